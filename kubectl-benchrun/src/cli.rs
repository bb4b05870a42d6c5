//! The clap options of `kubectl benchrun`, and nothing else: doc comments become the help text.
//! Flags follow kubectl's (`-n/--namespace`, `--kubeconfig`, `--context`, `-o`), so the plugin
//! reads like any other kubectl command.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The exit codes, printed under `--help` (a CI job gates on them): one table with
/// `benchrun-worker`'s.
pub const EXIT_CODES_HELP: &str = benchrun_worker::exit::HELP;

/// `Examples:` and the exit codes, as the text after a subcommand's help.
fn examples(lines: &str) -> String {
    format!("Examples:\n{lines}\n\n{EXIT_CODES_HELP}")
}

/// Run, watch, read, compare and gate benchrun BenchmarkRuns (benchrun.dev/v1alpha1).
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-benchrun",
    bin_name = "kubectl benchrun",
    version,
    after_help = examples(
        "  # Run a workload file on 2 workers, follow it, print its result table
  kubectl benchrun run examples/s3-minio.yaml --workers 2 --secret s3-creds

  # The runs of a namespace, and one's result
  kubectl benchrun list -n bench
  kubectl benchrun result s3-get -n bench"
    )
)]
pub struct Cli {
    /// Where to connect.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's connection flags.
#[derive(Debug, Clone, Default, Args)]
pub struct Global {
    /// Namespace of the runs (default: the context's namespace, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a run from a workload file or a BenchmarkRun manifest, follow it, print its result.
    #[command(after_help = examples(
        "  # A workload file on one worker per node, with the credentials of Secret s3-creds
  kubectl benchrun run examples/s3-minio.yaml --per-node --secret s3-creds
  # A BenchmarkRun manifest, its merged summary as JSON on stdout (progress on stderr)
  kubectl benchrun run examples/benchmarkrun-ci-gate.yaml -o json
  # What would be created, checked by the API server, nothing created
  kubectl benchrun run examples/quickstart.yaml --dry-run=server"
    ))]
    Run(RunArgs),
    /// Follow a run someone else created until it finishes, then print its result.
    #[command(after_help = examples(
        "  # Follow a run created with kubectl apply; its exit code gates a CI job
  kubectl apply -f examples/benchmarkrun-ci-gate.yaml
  kubectl benchrun watch s3-get-gate"
    ))]
    Watch(WatchArgs),
    /// Print a finished run's result table (or its merged summary with -o json|yaml).
    #[command(after_help = examples(
        "  # The result table of a finished run, then each worker's
  kubectl benchrun result s3-get --per-worker
  # Its merged summary as JSON
  kubectl benchrun result s3-get -o json > s3-get.json"
    ))]
    Result(ResultArgs),
    /// List runs: NAME, PHASE, WORKERS, OPS/S, MIB/S, P99, AGE (-o wide: THRESHOLDS,
    /// TARGET, FINISHED).
    #[command(after_help = examples(
        "  # The runs of namespace bench, with their thresholds, target and finish time
  kubectl benchrun list -n bench -o wide
  # Runs with a label, in every namespace
  kubectl benchrun list -A -l team=storage"
    ))]
    List(ListArgs),
    /// Compare two finished runs (as `benchrun-worker compare`): B against A.
    #[command(after_help = examples(
        "  # B against A, failing (exit 5) when B is more than 10% slower
  kubectl benchrun compare s3-get s3-get-new --fail-if-slower 10
  # As JSON
  kubectl benchrun compare s3-get s3-get-new -o json
  # Two control-plane runs (two StorageClasses): per operation and phase, p50/p95/p99/max
  kubectl benchrun compare cp-hostpath cp-local-path"
    ))]
    Compare(CompareArgs),
    /// Report on finished runs (as `benchrun-worker report`): tables, or Markdown and SVG files.
    #[command(after_help = examples(
        "  # Tables of two runs, the second against the first
  kubectl benchrun report s3-get s3-get-new
  # report.md and SVG charts of a matrix run
  kubectl benchrun report sweep-range-engine --out report/"
    ))]
    Report(ReportArgs),
    /// Print the logs of a run's workers, each line prefixed by its worker.
    #[command(after_help = examples(
        "  # Every worker's logs, as they are written
  kubectl benchrun logs s3-get -f"
    ))]
    Logs(LogsArgs),
    /// Benchmark a StorageClass: a claim per node, a volume profile, the table, then cleanup.
    #[command(after_help = examples(
        "  # Benchmark StorageClass fast-ssd on the nodes labelled disk=ssd
  kubectl benchrun storageclass fast-ssd --node-selector disk=ssd
  # The same, then how long its claims take to provision, attach, serve a first I/O and delete
  kubectl benchrun storageclass fast-ssd --control-plane --control-plane-count 50"
    ))]
    Storageclass(StorageClassArgs),
    /// BenchmarkSchedules: create one from a workload file or a manifest, list them, show a
    /// schedule's run history with figures and verdicts, suspend or resume one.
    #[command(after_help = examples(
        "  # Every night at 03:00 Berlin time, each run compared with the last good one
  kubectl benchrun schedule create examples/s3-minio.yaml --name s3-nightly \\
    --schedule '0 3 * * *' --time-zone Europe/Berlin --workers 2 --secret s3-creds
  # The schedules of a namespace, then one's runs with their figures and verdicts
  kubectl benchrun schedule list -n bench
  kubectl benchrun schedule history s3-nightly -n bench
  # No runs during a maintenance window
  kubectl benchrun schedule suspend s3-nightly
  kubectl benchrun schedule resume s3-nightly"
    ))]
    Schedule(ScheduleArgs),
    /// Print a shell completion script (`source <(kubectl benchrun completion bash)`).
    #[command(after_help = "Examples:
  # bash: for this shell, or for every new one
  source <(kubectl benchrun completion bash)
  kubectl benchrun completion bash > ~/.local/share/bash-completion/completions/kubectl-benchrun

  # zsh
  kubectl benchrun completion zsh > \"${fpath[1]}/_kubectl-benchrun\"

  # kubectl's own completion of `kubectl benchrun ...` runs kubectl_complete-benchrun
  # (kubectl-benchrun/kubectl_complete-benchrun in the repository) when it is on PATH")]
    Completion(CompletionArgs),
}

/// `completion`.
#[derive(Debug, Clone, Args)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Shells `completion` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// bash.
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}

/// `--dry-run`, as kubectl spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Print the object, send nothing.
    Client,
    /// Send it for the API server to check (admission, schema, CEL rules), persist nothing.
    Server,
}

/// `-o` formats of a run's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// `-o` formats of `list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListOutput {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// More columns: THRESHOLDS, TARGET, FINISHED.
    Wide,
}

/// `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// A BenchmarkRun manifest, or a standalone workload file (wrapped in a run); `-` for stdin.
    pub file: String,
    /// Name of the run (default: the manifest's, else the file's name plus a random suffix).
    #[arg(long)]
    pub name: Option<String>,
    /// One worker on every Ready, schedulable node (matching --node-selector).
    #[arg(long, conflicts_with = "workers")]
    pub per_node: bool,
    /// Number of workers, placed by the scheduler.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=1000))]
    pub workers: Option<i32>,
    /// Only nodes with this label (repeat, or comma-separate, for several).
    #[arg(long, value_name = "KEY=VALUE", value_delimiter = ',')]
    pub node_selector: Vec<String>,
    /// A claim per worker from this StorageClass, mounted at the target's directory.
    #[arg(long, value_name = "CLASS")]
    pub storage_class: Option<String>,
    /// Size of each worker's claim (with --storage-class, default 10Gi).
    #[arg(long, value_name = "QUANTITY")]
    pub claim_size: Option<String>,
    /// On Ctrl-C, delete the run (default: leave it running and say how to watch it again).
    #[arg(long)]
    pub delete_on_interrupt: bool,
    /// Print the BenchmarkRun that would be created, and create nothing: `client` (the
    /// default) sends nothing, `server` has the API server check it.
    #[arg(long, value_enum, value_name = "STRATEGY", num_args = 0..=1, require_equals = true, default_missing_value = "client")]
    pub dry_run: Option<DryRun>,
    /// With a workload file: the Secret with the storage's credentials (spec.secretRef).
    #[arg(long, value_name = "NAME")]
    pub secret: Option<String>,
    /// With a workload file: the CA of the storage's https:// endpoint (spec.caRef), as
    /// `secret/NAME:KEY` or `configmap/NAME:KEY`.
    #[arg(long, value_name = "KIND/NAME:KEY")]
    pub ca: Option<String>,
    /// Print the merged summary as JSON or YAML instead of the table (the progress goes to stderr).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
}

/// `watch`.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// The run.
    pub name: String,
    /// Print the merged summary as JSON or YAML instead of the table.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
}

/// `result`.
#[derive(Debug, Clone, Args)]
pub struct ResultArgs {
    /// The run.
    pub name: String,
    /// The merged summary as JSON or YAML (with --per-worker: a list of the workers' summaries).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
    /// Each worker's own table (from its persisted summary) after the merged one.
    #[arg(long)]
    pub per_worker: bool,
}

/// `list`.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// `wide` adds THRESHOLDS, TARGET and FINISHED; `json`/`yaml` print the runs as a List.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<ListOutput>,
    /// Only runs whose labels match this selector (`key=value,key!=value,key`, as kubectl's).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Runs of every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The baseline run.
    pub a: String,
    /// The run compared against it.
    pub b: String,
    /// Output format (`--format` is kept as a hidden alias).
    #[arg(short = 'o', long = "output", alias = "format", value_enum, default_value_t = benchrun_worker::compare::render::Format::Text)]
    pub format: benchrun_worker::compare::render::Format,
    /// Exit 5 when B is slower than A: an op's ops/s lower or p99 higher by more than PCT
    /// percent, and its significance test says it is no noise; for two control-plane runs, an
    /// operation's p99.
    #[arg(long, value_name = "PCT")]
    pub fail_if_slower: Option<f64>,
    /// Byte rates in binary MiB/s (2^20 bytes) or decimal MB/s (10^6 bytes).
    #[arg(long, value_enum, default_value_t = benchrun_worker::figures::Units::Binary)]
    pub units: benchrun_worker::figures::Units,
}

/// `report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The runs (a matrix run stands for its combinations, the baseline first).
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Write `report.md` and SVG charts here instead of printing tables.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Byte rates in binary MiB/s (2^20 bytes) or decimal MB/s (10^6 bytes).
    #[arg(long, value_enum, default_value_t = benchrun_worker::figures::Units::Binary)]
    pub units: benchrun_worker::figures::Units,
}

/// `logs`.
#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    /// The run.
    pub name: String,
    /// Only the last N lines of each worker.
    #[arg(long, value_name = "N")]
    pub tail: Option<i64>,
    /// Stream the logs as they are written, every worker at once, until every worker's
    /// container ends (as `kubectl logs -f`).
    #[arg(short, long)]
    pub follow: bool,
}

/// `storageclass`.
#[derive(Debug, Clone, Args)]
pub struct StorageClassArgs {
    /// The StorageClass under test.
    pub class: String,
    /// Size of each node's claim.
    #[arg(long, value_name = "QUANTITY", default_value = "2Gi")]
    pub claim_size: String,
    /// Size of the file each worker lays out and reads/writes (fits in the claim).
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    pub file_size: String,
    /// Length of each measured combination.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub duration: String,
    /// Only nodes with this label (repeat, or comma-separate, for several).
    #[arg(long, value_name = "KEY=VALUE", value_delimiter = ',')]
    pub node_selector: Vec<String>,
    /// Print the BenchmarkRun that would be created, and create nothing: `client` (the
    /// default) sends nothing, `server` has the API server check it.
    #[arg(long, value_enum, value_name = "STRATEGY", num_args = 0..=1, require_equals = true, default_missing_value = "client")]
    pub dry_run: Option<DryRun>,
    /// Keep the run (and its result) instead of deleting it at the end.
    #[arg(long)]
    pub keep: bool,
    /// Also measure the class's control plane, after the I/O profile: claims provisioned,
    /// attached, written once and deleted (a control-plane run, docs/CONTROL_PLANE.md); its
    /// rows follow the profile's table.
    #[arg(long)]
    pub control_plane: bool,
    /// Claims the control-plane measurement takes through their lifecycle.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        requires = "control_plane"
    )]
    pub control_plane_count: i32,
    /// Of those lifecycles, how many in flight at once.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 5,
        requires = "control_plane"
    )]
    pub control_plane_concurrency: i32,
}

/// `schedule`.
#[derive(Debug, Clone, Args)]
pub struct ScheduleArgs {
    /// What to do with schedules.
    #[command(subcommand)]
    pub command: ScheduleCommand,
}

/// `schedule` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum ScheduleCommand {
    /// Create a BenchmarkSchedule from a workload file or BenchmarkRun manifest (its spec is
    /// the run template) or a BenchmarkSchedule manifest; flags override the file.
    #[command(after_help = examples(
        "  # Every hour, keep 5 good runs, skip a run the previous one overlaps
  kubectl benchrun schedule create examples/quickstart.yaml --schedule @hourly --keep-succeeded 5
  # From a manifest, checked by the API server, nothing created
  kubectl benchrun schedule create examples/benchmarkschedule-nightly.yaml --dry-run=server"
    ))]
    Create(Box<ScheduleCreateArgs>),
    /// List schedules: NAME, SCHEDULE, TIMEZONE, SUSPEND, ACTIVE, LAST SCHEDULE, LAST
    /// VERDICT, FAILURES (in a row), BASELINE.
    #[command(after_help = examples(
        "  # Every namespace's schedules
  kubectl benchrun schedule list -A"
    ))]
    List(ScheduleListArgs),
    /// A schedule's recent runs, newest first: scheduled time, phase, verdict, throughput,
    /// p99, baseline and the ops that moved (or why it failed).
    #[command(after_help = examples(
        "  # The last runs of s3-nightly, then as JSON
  kubectl benchrun schedule history s3-nightly
  kubectl benchrun schedule history s3-nightly -o json"
    ))]
    History(ScheduleHistoryArgs),
    /// Stop making runs (runs already started go on).
    #[command(after_help = examples("  kubectl benchrun schedule suspend s3-nightly"))]
    Suspend(ScheduleNameArgs),
    /// Make runs again (the time missed while suspended is started if within the deadline).
    #[command(after_help = examples("  kubectl benchrun schedule resume s3-nightly"))]
    Resume(ScheduleNameArgs),
    /// Make one run now, as a scheduled time would (compared with the schedule's baseline),
    /// also while suspended; with concurrencyPolicy Forbid it waits for an active run.
    #[command(after_help = examples(
        "  # Run s3-nightly now, then follow it
  kubectl benchrun schedule run s3-nightly
  kubectl benchrun schedule history s3-nightly"
    ))]
    Run(ScheduleNameArgs),
}

/// `schedule create`.
#[derive(Debug, Clone, Args)]
pub struct ScheduleCreateArgs {
    /// A workload file, a BenchmarkRun manifest or a BenchmarkSchedule manifest; `-` for stdin.
    pub file: String,
    /// Cron schedule: 5 fields (minute hour day-of-month month day-of-week) or @hourly,
    /// @daily, @weekly, @monthly, @yearly. Required unless the file is a schedule.
    #[arg(long, value_name = "CRON")]
    pub schedule: Option<String>,
    /// The schedule's name (default: from the file name, or the manifest's).
    #[arg(long)]
    pub name: Option<String>,
    /// IANA time zone of the schedule (default UTC).
    #[arg(long, value_name = "ZONE")]
    pub time_zone: Option<String>,
    /// A run due while another is active: forbid (default: skip it), allow, replace.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub concurrency_policy: Option<Concurrency>,
    /// Succeeded runs kept (default 3).
    #[arg(long, value_name = "N")]
    pub keep_succeeded: Option<i32>,
    /// Failed runs kept (default 1).
    #[arg(long, value_name = "N")]
    pub keep_failed: Option<i32>,
    /// Skip a run not started within this many seconds of its time.
    #[arg(long, value_name = "SECONDS")]
    pub starting_deadline_seconds: Option<i64>,
    /// Largest tolerated change against the baseline, in percent (default 10).
    #[arg(long, value_name = "PCT")]
    pub tolerance: Option<f64>,
    /// Compare every run with this run (default: the schedule's last good run).
    #[arg(long, value_name = "RUN", conflicts_with_all = ["no_baseline", "baseline_median"])]
    pub baseline_run: Option<String>,
    /// Compare every run with the median of the schedule's last N good runs (1 to 20).
    #[arg(long, value_name = "N", conflicts_with = "no_baseline", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub baseline_median: Option<u32>,
    /// Compare with nothing.
    #[arg(long)]
    pub no_baseline: bool,
    /// Create it suspended.
    #[arg(long)]
    pub suspend: bool,
    /// One worker on each Ready node the run may use.
    #[arg(long, conflicts_with = "workers")]
    pub per_node: bool,
    /// Number of workers.
    #[arg(long, value_name = "N")]
    pub workers: Option<i32>,
    /// Only nodes with this label (repeatable, `key=value`).
    #[arg(long, value_name = "KEY=VALUE")]
    pub node_selector: Vec<String>,
    /// A claim of this StorageClass per worker, mounted for file:// and direct:// targets.
    #[arg(long, value_name = "CLASS")]
    pub storage_class: Option<String>,
    /// Size of each claim (default 10Gi).
    #[arg(long, value_name = "SIZE")]
    pub claim_size: Option<String>,
    /// Secret with the storage's credentials.
    #[arg(long, value_name = "NAME")]
    pub secret: Option<String>,
    /// client: print the schedule; server: the API server checks it, nothing is created.
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1, require_equals = true, default_missing_value = "client")]
    pub dry_run: Option<DryRun>,
}

/// `schedule create --concurrency-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Concurrency {
    /// Skip a run due while another is active.
    Forbid,
    /// Start it beside.
    Allow,
    /// Delete the active one, then start it.
    Replace,
}

impl From<Concurrency> for benchrun_operator::crd::schedule::ConcurrencyPolicy {
    fn from(c: Concurrency) -> Self {
        match c {
            Concurrency::Forbid => Self::Forbid,
            Concurrency::Allow => Self::Allow,
            Concurrency::Replace => Self::Replace,
        }
    }
}

/// `schedule list`.
#[derive(Debug, Clone, Args)]
pub struct ScheduleListArgs {
    /// `json`/`yaml`: the schedules as a List.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<ListOutput>,
    /// Schedules of every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// `schedule history`.
#[derive(Debug, Clone, Args)]
pub struct ScheduleHistoryArgs {
    /// The schedule.
    pub name: String,
    /// `json`/`yaml`: the recent runs as data.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
}

/// `schedule suspend` and `resume`.
#[derive(Debug, Clone, Args)]
pub struct ScheduleNameArgs {
    /// The schedule.
    pub name: String,
}
