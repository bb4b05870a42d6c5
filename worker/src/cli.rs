//! Command-line options (clap). Doc comments are the help text.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::progress::ProgressMode;

/// Storage benchmarks on local files and object storage, with exact latency statistics.
#[derive(Debug, Parser)]
#[command(
    name = "benchrun-worker",
    version,
    propagate_version = true,
    after_help = crate::exit::HELP
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the workload in FILE: prepare the dataset, run, print a result table, clean up.
    #[command(after_help = format!("{RUN_EXAMPLES}\n\n{}", crate::exit::HELP))]
    Run(RunArgs),
    /// Check workload files without running them.
    Validate {
        /// Workload files (YAML).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Merge summaries from several workers exactly (histograms are added, not averaged).
    Merge {
        /// Summary files written by `run --summary`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write the merged summary as JSON here (`-` for stdout).
        #[arg(long, value_name = "OUT")]
        summary: Option<PathBuf>,
        /// Byte rates in binary MiB/s (2^20 bytes) or decimal MB/s (10^6 bytes).
        #[arg(long, value_enum, default_value_t = crate::figures::Units::Binary)]
        units: crate::figures::Units,
    },
    /// Compare two summaries: per-op deltas of every figure, with significance tests on the
    /// latency histograms (Kolmogorov-Smirnov) and the per-second throughput (Mann-Whitney).
    Compare(CompareArgs),
    /// Tables like the performance reports' and SVG charts of one or more summaries.
    Report(ReportArgs),
    /// Replay an op-log (`run --oplog`) against a target: the same ops at the same times
    /// (open loop), into a summary that `compare` and `report` read.
    Replay(ReplayArgs),
    /// Print the JSON schema of workload files, or with `--summary` of the summaries `run`,
    /// `merge` and the operator write (docs/RESULTS.md describes every field).
    Schema {
        /// The schema of summaries instead of workload files.
        #[arg(long)]
        summary: bool,
    },
    /// Run as a worker pod of the operator: prepare, wait for the start time, serve the summary.
    /// Internal (the operator starts it), so hidden from `--help`.
    #[command(hide = true)]
    Agent(crate::agent::AgentArgs),
    /// The first I/O of a volume (the operator's control-plane runs): a 4 KiB O_DIRECT write
    /// and read in DIR (a file of its own) or at the start of a block device, the times as
    /// JSON on stdout and in the termination message.
    #[command(hide = true)]
    ProbeIo {
        /// A directory on the volume, or the volume's raw block device.
        dir: PathBuf,
        /// Where the report is also written (Kubernetes' termination message).
        #[arg(long, default_value = crate::probe::TERMINATION_LOG)]
        message_file: PathBuf,
    },
    /// Keep a volume mounted until terminated (SIGTERM or SIGINT): the second container of a
    /// control-plane pod with `inUse`, so that its snapshot, clone and expand find the volume
    /// in use after `probe-io` has ended. With `--busy PATH`, 4 KiB O_DIRECT random I/O (70%
    /// reads, one at a time, at most `--busy-iops` a second) runs on PATH meanwhile, reported when terminated as JSON on
    /// stdout and in the termination message.
    #[command(hide = true)]
    ProbeHold {
        /// A directory on the volume (the I/O goes to a file of its own there), or the
        /// volume's raw block device (from 1 MiB on).
        #[arg(long)]
        busy: Option<PathBuf>,
        /// The bytes the I/O is spread over.
        #[arg(long, default_value_t = 16 << 20)]
        busy_bytes: u64,
        /// The most I/Os a second.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
        busy_iops: u32,
        /// Where the report is also written (Kubernetes' termination message).
        #[arg(long, default_value = crate::probe::TERMINATION_LOG)]
        message_file: PathBuf,
    },
    /// Measure the data generator on one core (bench/datagen.sh): GiB/s generated and verified.
    #[command(hide = true)]
    DatagenSpeed {
        /// Seconds to generate for, then as long to verify.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// `data.dedupRatio`.
        #[arg(long, default_value_t = 1.0)]
        dedup_ratio: f64,
        /// `data.compressRatio`.
        #[arg(long, default_value_t = 1.0)]
        compress_ratio: f64,
    },
}

/// Examples of `run`, under its `--help`.
const RUN_EXAMPLES: &str = "\
Examples:
  # The quick start: reads and writes under /tmp, a table at the end
  benchrun-worker run examples/quickstart.yaml

  # The same for 30 s with 64 ops in flight, on another directory
  benchrun-worker run examples/quickstart.yaml --duration 30s --concurrency 64 --target file:///mnt/data/bench

  # Any key of the file: a 1 MiB chunk, every column of the table, the JSON summary kept
  benchrun-worker run examples/s3-minio.yaml --set read.chunkSize=1MiB --wide --summary out.json";

/// Options of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Workload file (YAML).
    pub file: PathBuf,
    /// Override the workload's `duration` (e.g. 30s): as `--set duration=30s`.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Override the workload's `concurrency` (ops in flight per worker).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<u32>,
    /// Override the workload's `target` (file:///dir, direct:///dir, s3://bucket/prefix, ...).
    #[arg(long, value_name = "URI")]
    pub target: Option<String>,
    /// Override any workload key (dotted, as in the file): `--set read.chunkSize=1MiB`;
    /// repeatable, applied after --duration/--concurrency/--target, later ones win.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<crate::overrides::Set>,
    /// Every column of the result table (req/op, mean, p90, p95, p99.99); the default fits
    /// 100 columns.
    #[arg(long)]
    pub wide: bool,
    /// Write the JSON summary here; `-` writes it to stdout and the table to stderr.
    #[arg(long, value_name = "OUT")]
    pub summary: Option<PathBuf>,
    /// Serve Prometheus metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:9090.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Live progress line on stderr.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Name of this worker in summaries and in the keys its PUTs write.
    #[arg(long, env = "BENCHRUN_WORKER_ID", default_value = "local")]
    pub worker_id: String,
    /// Keep the dataset after the run, whatever the workload says.
    #[arg(long)]
    pub no_cleanup: bool,
    /// Byte rates in binary MiB/s (2^20 bytes) or decimal MB/s (10^6 bytes).
    #[arg(long, value_enum, default_value_t = crate::figures::Units::Binary)]
    pub units: crate::figures::Units,
    /// Where to leave the reason when the run does not finish (a signal stopped it), for the
    /// kubelet to show in the pod's status. Written only when the file exists.
    #[arg(long, value_name = "FILE", default_value = crate::shutdown::TERMINATION_LOG)]
    pub termination_log: PathBuf,
    /// Record every operation (its start, op, key, size, latency, result) to FILE, a gzip
    /// op-log that `replay` reads (docs/OPLOG.md). Object workloads only.
    #[arg(long, value_name = "FILE")]
    pub oplog: Option<PathBuf>,
    /// With --oplog: records queued for the writer; when full, records are dropped (and
    /// counted in the summary's `oplog.dropped`) so the run never waits for the disk.
    #[arg(long, value_name = "N", default_value_t = crate::oplog::writer::DEFAULT_QUEUE)]
    pub oplog_queue: usize,
    /// This worker's index among the `--workers` workers of one run (0-based). What it
    /// writes is keyed by it (and by --run-seed), so workers of one run never write the same
    /// data. Training workloads: the epoch order is split over every worker's accelerators,
    /// so the workers together read every sample once per epoch; worker i writes every i-th
    /// dataset file.
    #[arg(long, env = "BENCHRUN_WORKER_INDEX", default_value_t = 0)]
    pub worker_index: u32,
    /// The number of workers of the run (see --worker-index).
    #[arg(long, env = "BENCHRUN_WORKERS", default_value_t = 1)]
    pub workers: u32,
    /// The run's identity: keys what every worker of the run writes, beside the workload's
    /// seed and --worker-index, so that two runs never write the same data either.
    #[arg(long, env = RUN_SEED_ENV, value_name = "N")]
    pub run_seed: Option<u64>,
}

/// The environment variable of `--run-seed` (the operator sets it from the run's UID).
pub use crate::datagen::RUN_SEED_ENV;

impl RunArgs {
    /// Who writes: this run (`--run-seed`) and this worker's place in it.
    pub fn writer(&self) -> crate::datagen::Writer {
        crate::datagen::Writer {
            run: self.run_seed,
            index: self.worker_index,
            count: self.workers.max(1),
        }
    }
}

/// Options of `replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The op-log (`run --oplog`).
    pub file: PathBuf,
    /// Where to replay: `file:///dir`, `s3://bucket/prefix`, ... (as a workload's `target`).
    #[arg(long, value_name = "URI")]
    pub target: String,
    /// A workload file whose `storage` and `read` settings (endpoint, timeouts, read plan)
    /// the replay uses; default: those of the workload recorded in the log.
    #[arg(long, value_name = "FILE")]
    pub workload: Option<PathBuf>,
    /// Time scale: 2.0 replays twice as fast, 0.5 at half speed.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Rewrite keys starting with OLD to start with NEW instead ('OLD=>NEW'); repeatable,
    /// the first matching rule applies.
    #[arg(long, value_name = "OLD=>NEW")]
    pub remap: Vec<crate::oplog::Remap>,
    /// Issue no op meant to start later than this after the replay starts (e.g. 30s).
    #[arg(long, value_name = "DURATION")]
    pub duration_limit: Option<crate::units::HumanDuration>,
    /// Byte rates in binary MiB/s (2^20 bytes) or decimal MB/s (10^6 bytes).
    #[arg(long, value_enum, default_value_t = crate::figures::Units::Binary)]
    pub units: crate::figures::Units,
    /// Ops in flight at most; an op waiting for a slot is late, and its latency says so.
    #[arg(long, default_value_t = 256)]
    pub concurrency: usize,
    /// Records read ahead of the schedule, and the window in which records are put back in
    /// start order (they are logged when they end).
    #[arg(long, default_value_t = 4096)]
    pub queue: usize,
    /// Also replay the warm-up's records (left out by default, as from the run's summary).
    #[arg(long)]
    pub warmup: bool,
    /// Write the recorded workload's dataset to the target first (the objects its GETs and
    /// STATs read, keys remapped), so the replay reads what the run read.
    #[arg(long)]
    pub prepare: bool,
    /// Write the JSON summary here; `-` writes it to stdout and the table to stderr.
    #[arg(long, value_name = "OUT")]
    pub summary: Option<PathBuf>,
    /// Name of this worker in the summary.
    #[arg(long, env = "BENCHRUN_WORKER_ID", default_value = "replay")]
    pub worker_id: String,
}

/// Options of `compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The baseline summary (`run --summary`, `merge --summary`, or a run's `merged.json`).
    pub a: PathBuf,
    /// The summary compared against it.
    pub b: PathBuf,
    /// Output format (`--format` is kept as a hidden alias).
    #[arg(short = 'o', long = "output", alias = "format", value_enum, default_value_t = crate::compare::render::Format::Text)]
    pub format: crate::compare::render::Format,
    /// Exit with status 5 when B is slower than A: an op's ops/s lower or p99 higher by more
    /// than PCT percent, and its significance test says it is no noise (a CI gate; the
    /// comparison is printed either way).
    #[arg(long, value_name = "PCT")]
    pub fail_if_slower: Option<f64>,
    /// Byte rates in binary MiB/s (2^20 bytes) or decimal MB/s (10^6 bytes).
    #[arg(long, value_enum, default_value_t = crate::figures::Units::Binary)]
    pub units: crate::figures::Units,
}

/// Options of `report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Summaries; with several, each row shows its difference to the first.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Write `report.md` and the SVG charts into this directory instead of printing text.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Names of the summaries in tables and charts, comma-separated, in order (default: the
    /// file names without `.json`).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub labels: Vec<String>,
    /// Byte rates in binary MiB/s (2^20 bytes) or decimal MB/s (10^6 bytes).
    #[arg(long, value_enum, default_value_t = crate::figures::Units::Binary)]
    pub units: crate::figures::Units,
}
