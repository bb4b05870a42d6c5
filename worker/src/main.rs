//! `benchrun-worker`: parse, run, map errors to exit codes.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;

use benchrun_worker::cli::{Cli, Command, CompareArgs, ReplayArgs, ReportArgs, RunArgs};
use benchrun_worker::figures::Units;
use benchrun_worker::matrix::{self, Matrix, Planned};
use benchrun_worker::{
    oplog, overrides, progress, report, server, sweep, Engine, Metrics, Summary, Workload,
};

// The exit codes are one table with the plugin's (`benchrun_worker::exit`, under `--help`).
use benchrun_worker::exit::{
    BAD_INPUT as EXIT_INVALID, CLEANUP_FAILED as EXIT_CLEANUP_FAILED,
    INTERRUPTED as EXIT_INTERRUPTED, RUN_FAILED as EXIT_ERROR_BUDGET, SLOWER as EXIT_SLOWER,
    THRESHOLDS_MISSED as EXIT_AU_BELOW_MARK,
};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BENCHRUN_LOG")
                // rustls's platform verifier logs every refused certificate as an ERROR of
                // its own; the worker names a refused certificate itself, once.
                .unwrap_or_else(|_| "warn,rustls_platform_verifier=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            progress::clear();
            eprintln!("error: {e:#}");
            if e.downcast_ref::<benchrun_worker::SpecError>().is_some() {
                ExitCode::from(EXIT_INVALID)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

async fn dispatch(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Run(args) => run(args).await,
        Command::Agent(args) => benchrun_worker::agent::main(args).await,
        Command::Validate { files } => {
            for f in &files {
                match load(f)? {
                    Plan::Single(_) => println!("{}: ok", f.display()),
                    Plan::Sweep { planned, .. } => {
                        println!("{}: ok ({} combinations)", f.display(), planned.len())
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge {
            files,
            summary,
            units,
        } => {
            let parts = files
                .iter()
                .map(|f| read_summary(f))
                .collect::<Result<Vec<_>>>()?;
            let merged = Summary::merge(&parts)?;
            emit(&merged, summary.as_deref(), units, false)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::ProbeHold {
            busy,
            busy_bytes,
            busy_iops,
            message_file,
        } => {
            let busy = busy.as_deref().map(|p| (p, busy_bytes, busy_iops));
            benchrun_worker::probe::hold(busy, &message_file).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::DatagenSpeed {
            seconds,
            dedup_ratio,
            compress_ratio,
        } => {
            let data = benchrun_worker::spec::DataSpec {
                dedup_ratio,
                compress_ratio,
            };
            let (generated, verified) = benchrun_worker::datagen::speed(&data, seconds);
            println!("generate_gib_per_s {generated:.2}\nverify_gib_per_s {verified:.2}");
            Ok(ExitCode::SUCCESS)
        }
        Command::ProbeIo { dir, message_file } => {
            benchrun_worker::probe::main(&dir, &message_file)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare(args) => compare(args),
        Command::Report(args) => report_cmd(args),
        Command::Replay(args) => replay(args).await,
        Command::Schema { summary } => {
            let schema = if summary {
                benchrun_worker::summary_read::schema()
            } else {
                schemars::schema_for!(Workload)
            };
            println!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A summary file of any format version this build reads (older ones upgraded); a newer
/// one is refused with its version named.
fn read_summary(path: &std::path::Path) -> Result<Summary> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_summary(path, &text)
}

fn parse_summary(path: &std::path::Path, text: &str) -> Result<Summary> {
    benchrun_worker::summary_read::read(text).with_context(|| format!("{}", path.display()))
}

fn compare(args: CompareArgs) -> Result<ExitCode> {
    use benchrun_worker::compare;
    let (a, b) = (read_summary(&args.a)?, read_summary(&args.b)?);
    let c = compare::compare_in(
        &args.a.display().to_string(),
        &a,
        &args.b.display().to_string(),
        &b,
        args.units,
    );
    print!("{}", compare::render::render(&c, args.format));
    if let Some(pct) = args.fail_if_slower {
        let slower = c.slower_than(pct);
        if !slower.is_empty() {
            eprintln!("slower than allowed ({pct}%): {}", slower.join("; "));
            return Ok(ExitCode::from(EXIT_SLOWER));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn report_cmd(args: ReportArgs) -> Result<ExitCode> {
    use benchrun_worker::report::{labels, Run};
    if !args.labels.is_empty() && args.labels.len() != args.files.len() {
        anyhow::bail!(
            "{} labels for {} summaries: give one per summary",
            args.labels.len(),
            args.files.len()
        );
    }
    let names = if args.labels.is_empty() {
        labels(&args.files)
    } else {
        args.labels.clone()
    };
    let mut runs = vec![];
    for (f, label) in args.files.iter().zip(names) {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        // A matrix run's summary: one run per combination, the baseline first (the report
        // compares with the first), each represented by its median repeat.
        if let Ok(sw) = serde_json::from_str::<sweep::SweepResult>(&text) {
            for s in sw.combinations.iter().flat_map(|c| &c.runs) {
                benchrun_worker::summary_read::check(s.schema_version)
                    .with_context(|| format!("{}", f.display()))?;
            }
            let mut order: Vec<usize> = (0..sw.combinations.len()).collect();
            if sw.baseline < order.len() {
                order.retain(|i| *i != sw.baseline);
                order.insert(0, sw.baseline);
            }
            for i in order {
                let c = &sw.combinations[i];
                if let Some(s) = c.representative() {
                    runs.push(Run {
                        label: c.name.clone(),
                        summary: s.clone(),
                    });
                }
            }
            continue;
        }
        let summary = parse_summary(f, &text)?;
        runs.push(Run { label, summary });
    }
    report::write_or_print(&runs, args.out.as_deref(), args.units)?;
    Ok(ExitCode::SUCCESS)
}

/// A workload file: one workload, or one per combination of its `matrix:`.
enum Plan {
    Single(Box<Workload>),
    Sweep {
        planned: Vec<Planned>,
        matrix: Matrix,
        baseline: usize,
    },
}

fn load(path: &std::path::Path) -> Result<Plan> {
    load_with(path, &[])
}

/// The `--duration`, `--concurrency`, `--target` and `--set` of `run`, in the order applied.
fn run_overrides(args: &RunArgs) -> Vec<overrides::Set> {
    let mut sets = vec![];
    if let Some(d) = &args.duration {
        sets.push(overrides::Set::string("duration", d));
    }
    if let Some(c) = args.concurrency {
        sets.push(overrides::Set {
            path: vec!["concurrency".into()],
            value: c.into(),
        });
    }
    if let Some(t) = &args.target {
        sets.push(overrides::Set::string("target", t));
    }
    sets.extend(args.sets.iter().cloned());
    sets
}

/// [`load`] with `sets` applied to the file's YAML first.
fn load_with(path: &std::path::Path, sets: &[overrides::Set]) -> Result<Plan> {
    use std::io::Read;
    // Read at most one byte more than a workload may have, so a huge file (or /dev/zero) is
    // refused by its size without being read whole.
    let limit = benchrun_worker::spec::limits::MAX_FILE_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit).read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    let invalid = || format!("{} is not a valid workload", path.display());
    if !sets.is_empty() {
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| benchrun_worker::SpecError::Parse {
                path: "workload".into(),
                message: "the file is not UTF-8 text".into(),
            })
            .with_context(invalid)?;
        benchrun_worker::spec::precheck(text).with_context(invalid)?;
        bytes = overrides::apply(text, sets)
            .map_err(|message| benchrun_worker::SpecError::Parse {
                path: "workload".into(),
                message,
            })
            .with_context(invalid)?
            .into_bytes();
    }
    // Without a matrix, exactly the single-workload path (and its error messages).
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) if benchrun_worker::spec::precheck(t).is_ok() => t,
        _ => {
            let w = Workload::from_bytes(&bytes).with_context(invalid)?;
            return Ok(Plan::Single(Box::new(w)));
        }
    };
    match matrix::split(text).with_context(invalid)? {
        None => {
            let w = Workload::from_yaml(text).with_context(invalid)?;
            Ok(Plan::Single(Box::new(w)))
        }
        Some((doc, matrix)) => {
            let planned = matrix.expand(&doc).with_context(invalid)?;
            let baseline = matrix.baseline_index(&planned).with_context(invalid)?;
            Ok(Plan::Sweep {
                planned,
                matrix,
                baseline,
            })
        }
    }
}

/// Print the table, and write the JSON summary where asked.
fn emit(s: &Summary, summary: Option<&std::path::Path>, units: Units, wide: bool) -> Result<()> {
    print_text(summary, &report::table_with(s, units, wide));
    write_json(summary, serde_json::to_string_pretty(s)?)
}

/// Print human-readable text: to stderr when the JSON summary goes to stdout (`--summary -`),
/// so that stdout stays one JSON document a pipe can parse; to stdout otherwise.
fn print_text(summary: Option<&std::path::Path>, text: &str) {
    if summary.is_some_and(|p| p.as_os_str() == "-") {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
}

/// Write the JSON document where `--summary` says (`-`: stdout), if it says anywhere.
fn write_json(summary: Option<&std::path::Path>, json: String) -> Result<()> {
    match summary {
        Some(p) if p.as_os_str() == "-" => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{json}")?;
        }
        Some(p) => {
            std::fs::write(p, json + "\n").with_context(|| format!("writing {}", p.display()))?
        }
        None => {}
    }
    Ok(())
}

async fn run(args: RunArgs) -> Result<ExitCode> {
    let plan = load_with(&args.file, &run_overrides(&args))?;
    // From here on a SIGTERM (pod deleted or evicted) or Ctrl-C ends the run with a partial
    // summary and a non-zero exit, never a silent exit 0.
    let stop = benchrun_worker::shutdown::signal();
    let workload = match plan {
        Plan::Single(w) => *w,
        Plan::Sweep {
            planned,
            matrix,
            baseline,
        } => {
            if args.oplog.is_some() {
                anyhow::bail!("--oplog records one workload: a matrix file runs several; run a combination on its own to record it");
            }
            return run_sweep(&args, planned, &matrix, baseline, stop).await;
        }
    };
    if workload.training.is_some() {
        return run_training(&args, workload, stop).await;
    }
    if workload.checkpoint.is_some() {
        return run_checkpoint(&args, workload, stop).await;
    }
    let metrics = serve_metrics(args.metrics_addr).await?;
    let plan = progress::Plan {
        duration: workload.duration.map(|d| d.0),
        total_ops: workload.total_ops,
        warmup: workload.warmup.map(|d| d.0),
        units: args.units,
    };
    let cleanup = workload.dataset.cleanup && !args.no_cleanup;
    let mut engine = Engine::open(workload, metrics.clone(), &args.worker_id)
        .await?
        .with_writer(args.writer());
    // Created (header written) before anything runs, so a bad path fails first.
    let log = match &args.oplog {
        Some(path) => {
            if engine.workload().block.is_some() {
                anyhow::bail!(
                    "--oplog records object operations: a block workload's I/Os are not recorded"
                );
            }
            let header = oplog::Header {
                worker_id: args.worker_id.clone(),
                workload: engine.workload().clone(),
            };
            let w = oplog::Writer::create(path, &header, args.oplog_queue)?;
            engine = engine.with_oplog(w.sink());
            Some(w)
        }
        None => None,
    };
    eprintln!("preparing dataset on {}", engine.workload().target);
    let dataset = engine.prepare().await?;
    let bar = progress::spawn(metrics.clone(), args.progress, plan);
    let run = engine.run(&dataset, None, stop).await;
    if let Some(bar) = bar {
        bar.abort();
    }
    progress::clear();
    // Closed whatever the run's outcome: the log of a failed run is still whole.
    let logged = match log {
        Some(w) => Some(tokio::task::spawn_blocking(move || w.finish()).await??),
        None => None,
    };
    let mut summary = run?;
    if let Some(stats) = logged {
        if stats.dropped > 0 {
            eprintln!(
                "warning: the op-log lost {} of {} records (its writer fell behind; raise --oplog-queue or use a faster disk)",
                stats.dropped,
                stats.records + stats.dropped
            );
        }
        summary.oplog = Some(stats);
    }
    let mut left_behind = None;
    if cleanup {
        match engine.cleanup().await {
            Ok(st) => summary.cleanup = Some(st),
            Err(e) => {
                let w = engine.workload();
                left_behind = Some(format!(
                    "cleanup failed: the dataset under prefix {:?} of {} is left behind (delete it, or run again with dataset.cleanup): {e:#}",
                    w.dataset.prefix, w.target
                ));
            }
        }
    }
    emit(&summary, args.summary.as_deref(), args.units, args.wide)?;
    if summary.partial {
        // An evicted or deleted pod must not look like a finished benchmark.
        let message = format!(
            "stopped by a signal after {:.1}s, before the workload finished: the summary is partial",
            summary.elapsed_seconds
        );
        eprintln!("error: {message}");
        benchrun_worker::shutdown::write_termination_message(&args.termination_log, &message);
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if summary.stopped_by.starts_with("errorBudget") {
        return Ok(ExitCode::from(EXIT_ERROR_BUDGET));
    }
    if let Some(message) = left_behind {
        eprintln!("error: {message}");
        return Ok(ExitCode::from(EXIT_CLEANUP_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

/// The worker's live metrics, served on `addr` (`--metrics-addr`) when given.
async fn serve_metrics(addr: Option<std::net::SocketAddr>) -> Result<Arc<Metrics>> {
    let metrics = Arc::new(Metrics::new());
    if let Some(addr) = addr {
        let bound = server::spawn(addr, server::router(metrics.clone()))
            .await
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
        eprintln!("metrics on http://{bound}/metrics");
    }
    Ok(metrics)
}

/// A training workload (`training`): dataset prepared or reused, epochs, the AU table.
async fn run_training(
    args: &RunArgs,
    workload: Workload,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<ExitCode> {
    use benchrun_worker::metrics::Stage;
    use benchrun_worker::training;
    // Served through the run (the search's probes included), so AU is watched live: the
    // rates of the compute and step counters are the worker's accelerator utilization.
    let metrics = serve_metrics(args.metrics_addr).await?;
    metrics.set_stage(Stage::Preparing);
    let engine = Engine::open(workload, metrics.clone(), &args.worker_id).await?;
    let log = match &args.oplog {
        Some(path) => {
            let header = oplog::Header {
                worker_id: args.worker_id.clone(),
                workload: engine.workload().clone(),
            };
            Some(oplog::Writer::create(path, &header, args.oplog_queue)?)
        }
        None => None,
    };
    eprintln!(
        "preparing the training dataset on {} (worker {} of {})",
        engine.workload().target,
        args.worker_index,
        args.workers
    );
    let opts = training::Options {
        worker_id: args.worker_id.clone(),
        index: args.worker_index,
        count: args.workers,
        oplog: log.as_ref().map(|w| w.sink()),
        prepare_wait: training::PREPARE_WAIT,
        metrics: Some(metrics.clone()),
    };
    let searching = engine
        .workload()
        .training
        .as_ref()
        .and_then(|t| t.search.as_ref())
        .is_some_and(|s| s.max_accelerators);
    let run = if searching {
        metrics.set_stage(Stage::Running);
        training::search::run(engine.workload(), engine.target().clone(), opts, stop).await
    } else {
        match training::prepare(engine.workload(), engine.target().clone(), opts).await {
            Ok(prepared) => {
                metrics.set_stage(Stage::Running);
                prepared.run(stop).await
            }
            Err(e) => Err(e),
        }
    };
    metrics.set_stage(Stage::Done);
    let logged = match log {
        Some(w) => Some(tokio::task::spawn_blocking(move || w.finish()).await??),
        None => None,
    };
    let mut summary = run?;
    summary.oplog = logged;
    emit(&summary, args.summary.as_deref(), args.units, args.wide)?;
    let passed = summary.training.as_ref().and_then(|t| {
        print_text(args.summary.as_deref(), &training::table(t));
        match &t.search {
            // A search passes when at least one accelerator stays at the mark.
            Some(f) => {
                print_text(args.summary.as_deref(), &training::search::table(f));
                Some(f.max_accelerators > 0)
            }
            None => t.passed(),
        }
    });
    if summary.partial {
        let message = format!(
            "stopped by a signal after {:.1}s, before the training epochs finished: the summary is partial",
            summary.elapsed_seconds
        );
        eprintln!("error: {message}");
        benchrun_worker::shutdown::write_termination_message(&args.termination_log, &message);
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(if passed == Some(false) {
        ExitCode::from(EXIT_AU_BELOW_MARK)
    } else {
        ExitCode::SUCCESS
    })
}

/// A checkpoint workload (`checkpoint`): save and restore of every rank's shard.
async fn run_checkpoint(
    args: &RunArgs,
    mut workload: Workload,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<ExitCode> {
    use benchrun_worker::checkpoint;
    if args.oplog.is_some() {
        anyhow::bail!("--oplog records object workloads and training reads, not checkpoints");
    }
    // A saved shard is on the storage, not in the page cache: files are fsync'd.
    workload.write.fsync = true;
    let metrics = serve_metrics(args.metrics_addr).await?;
    metrics.set_stage(benchrun_worker::metrics::Stage::Preparing);
    let engine = Engine::open(workload, metrics.clone(), &args.worker_id).await?;
    let opts = checkpoint::Options {
        worker_id: args.worker_id.clone(),
        index: args.worker_index,
        count: args.workers,
        metrics: Some(metrics.clone()),
        run_token: None,
    };
    metrics.set_stage(benchrun_worker::metrics::Stage::Running);
    let run = checkpoint::run(engine.workload(), engine.target().clone(), opts, stop).await;
    metrics.set_stage(benchrun_worker::metrics::Stage::Done);
    let summary = run?;
    emit(&summary, args.summary.as_deref(), args.units, args.wide)?;
    let errors = summary.checkpoint.as_ref().map_or(0, |c| {
        print_text(args.summary.as_deref(), &checkpoint::table(c));
        c.errors()
    });
    if summary.partial {
        eprintln!(
            "error: stopped by a signal before every repeat finished: the summary is partial"
        );
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if errors > 0 {
        eprintln!("error: {errors} rank saves or restores failed (see the table)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Replay an op-log: the whole log checked first (nothing is sent if it is damaged), the
/// dataset written if asked, then the ops at their recorded times.
async fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let path = args.file.clone();
    let (header, info) = tokio::task::spawn_blocking(move || oplog::validate(&path)).await??;
    let mut workload = header.workload.clone();
    if let Some(f) = &args.workload {
        let Plan::Single(other) = load(f)? else {
            anyhow::bail!(
                "{}: --workload takes one workload, not a matrix",
                f.display()
            );
        };
        workload.storage = other.storage;
        workload.read = other.read;
        workload.range_engine = other.range_engine;
    }
    workload.target = args.target.clone();
    workload.dataset.prefix = oplog::remap::apply(&args.remap, &workload.dataset.prefix);
    if info.dropped > 0 {
        eprintln!(
            "warning: {} lost {} records when it was recorded: the replay lacks them",
            args.file.display(),
            info.dropped
        );
    }
    let opts = benchrun_worker::replay::Options {
        speed: args.speed,
        remap: args.remap.clone(),
        concurrency: args.concurrency,
        queue: args.queue,
        duration_limit: args.duration_limit.map(|d| d.0),
        warmup: args.warmup,
    };
    // Before anything is written (--prepare included).
    benchrun_worker::replay::check(&args.file, &info.ops, &opts)?;
    let stop = benchrun_worker::shutdown::signal();
    let metrics = Arc::new(Metrics::new());
    let engine = Engine::open(workload, metrics.clone(), &args.worker_id).await?;
    let prepare = if args.prepare {
        eprintln!("preparing dataset on {}", engine.workload().target);
        engine.prepare().await?.prepare
    } else {
        None
    };
    eprintln!(
        "replaying {} records of {} against {}",
        if args.warmup {
            info.records
        } else {
            info.measured
        },
        args.file.display(),
        args.target
    );
    let mut replayed = benchrun_worker::replay::run(
        &args.file,
        engine.target().clone(),
        engine.workload(),
        &args.worker_id,
        &info.ops,
        &opts,
        metrics,
        stop,
    )
    .await?;
    replayed.summary.prepare = prepare;
    emit(
        &replayed.summary,
        args.summary.as_deref(),
        args.units,
        false,
    )?;
    if replayed.summary.partial {
        eprintln!("error: stopped by a signal before the log was replayed: the summary is partial");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}

/// A matrix file: every combination in turn, then the table of all of them.
async fn run_sweep(
    args: &RunArgs,
    planned: Vec<Planned>,
    matrix: &Matrix,
    baseline: usize,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<ExitCode> {
    if args.metrics_addr.is_some() {
        eprintln!("note: --metrics-addr is not served for a matrix run (each combination has its own metrics)");
    }
    let result = sweep::run(
        planned,
        baseline,
        matrix.repeats,
        matrix.warmup,
        &args.worker_id,
        args.no_cleanup,
        stop,
    )
    .await?;
    print_text(args.summary.as_deref(), &sweep::table(&result, args.units));
    write_json(
        args.summary.as_deref(),
        serde_json::to_string_pretty(&result)?,
    )?;
    let partial = result
        .combinations
        .iter()
        .flat_map(|c| &c.runs)
        .any(|s| s.partial);
    if partial {
        let message =
            "stopped by a signal before every combination finished: the results are partial";
        eprintln!("error: {message}");
        benchrun_worker::shutdown::write_termination_message(&args.termination_log, message);
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}
