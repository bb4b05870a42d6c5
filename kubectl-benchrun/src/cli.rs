//! The clap options of `kubectl benchrun`, and nothing else: doc comments become the help text.
//! Flags follow kubectl's (`-n/--namespace`, `--kubeconfig`, `--context`, `-o`), so the plugin
//! reads like any other kubectl command.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The exit codes, printed under `--help` (a CI job gates on them).
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    success (for run/watch/result: the run Succeeded and its thresholds were met)
  1    error talking to the cluster, or reading/writing files
  2    bad input: invalid flags, a file that is not a workload or BenchmarkRun, an unknown
       run or namespace, a run name that is taken, a spec the API server refuses
  3    the run Failed (workers lost, timeout, invalid spec, ...)
  4    the run finished but missed its thresholds (spec.thresholds)
  5    compare --fail-if-slower: B is slower than allowed
  130  interrupted (Ctrl-C) before the run finished";

/// Run, watch, read, compare and gate benchrun BenchmarkRuns (benchrun.dev/v1alpha1).
#[derive(Debug, Parser)]
#[command(name = "kubectl-benchrun", bin_name = "kubectl benchrun", version, after_help = EXIT_CODES_HELP)]
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
    #[command(after_help = EXIT_CODES_HELP)]
    Run(RunArgs),
    /// Follow a run someone else created until it finishes, then print its result.
    #[command(after_help = EXIT_CODES_HELP)]
    Watch(WatchArgs),
    /// Print a finished run's result table (or its merged summary with -o json|yaml).
    #[command(after_help = EXIT_CODES_HELP)]
    Result(ResultArgs),
    /// List runs: NAME, PHASE, WORKERS, OPS/S, MIB/S, P99, AGE.
    List(ListArgs),
    /// Compare two finished runs (as `benchrun-worker compare`): B against A.
    #[command(after_help = EXIT_CODES_HELP)]
    Compare(CompareArgs),
    /// Report on finished runs (as `benchrun-worker report`): tables, or Markdown and SVG files.
    Report(ReportArgs),
    /// Print the logs of a run's workers, each line prefixed by its worker.
    Logs(LogsArgs),
    /// Benchmark a StorageClass: a claim per node, a volume profile, the table, then cleanup.
    #[command(after_help = EXIT_CODES_HELP)]
    Storageclass(StorageClassArgs),
}

/// `-o` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// More columns (list).
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
    /// Print the BenchmarkRun that would be created, and create nothing.
    #[arg(long)]
    pub dry_run: bool,
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
    /// `wide` adds TARGET, THRESHOLDS and FINISHED; `json`/`yaml` print the runs as a List.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
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
    /// Output format.
    #[arg(long, value_enum, default_value_t = benchrun_worker::compare::render::Format::Text)]
    pub format: benchrun_worker::compare::render::Format,
    /// Exit 5 when B's ops/s (per op or overall) is more than PCT percent below A's.
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
    /// Print the BenchmarkRun that would be created, and create nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Keep the run (and its result) instead of deleting it at the end.
    #[arg(long)]
    pub keep: bool,
}
