//! `benchrun-worker`: parse, run, map errors to exit codes.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;

use benchrun_worker::cli::{Cli, Command, RunArgs};
use benchrun_worker::{progress, report, server, Engine, Metrics, Summary, Workload};

/// Exit code when the workload file is invalid.
const EXIT_INVALID: u8 = 2;
/// Exit code when the error budget stopped the run.
const EXIT_ERROR_BUDGET: u8 = 3;
/// Exit code when a signal stopped the run before it finished (the summary is partial).
const EXIT_INTERRUPTED: u8 = 4;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BENCHRUN_LOG")
                .unwrap_or_else(|_| "warn".into()),
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
                load(f)?;
                println!("{}: ok", f.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge { files, summary } => {
            let mut parts = Vec::new();
            for f in &files {
                let text = std::fs::read_to_string(f)
                    .with_context(|| format!("reading {}", f.display()))?;
                let s: Summary = serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a benchrun summary", f.display()))?;
                parts.push(s);
            }
            let merged = Summary::merge(&parts)?;
            emit(&merged, summary.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema => {
            let schema = schemars::schema_for!(Workload);
            println!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn load(path: &std::path::Path) -> Result<Workload> {
    use std::io::Read;
    // Read at most one byte more than a workload may have, so a huge file (or /dev/zero) is
    // refused by its size without being read whole.
    let limit = benchrun_worker::spec::limits::MAX_FILE_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit).read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    Workload::from_bytes(&bytes)
        .with_context(|| format!("{} is not a valid workload", path.display()))
}

/// Print the table, and write the JSON summary where asked.
fn emit(s: &Summary, summary: Option<&std::path::Path>) -> Result<()> {
    let json = serde_json::to_string_pretty(s)?;
    match summary {
        Some(p) if p.as_os_str() == "-" => {
            eprint!("{}", report::table(s));
            let mut out = std::io::stdout().lock();
            writeln!(out, "{json}")?;
        }
        Some(p) => {
            print!("{}", report::table(s));
            std::fs::write(p, json + "\n").with_context(|| format!("writing {}", p.display()))?;
        }
        None => print!("{}", report::table(s)),
    }
    Ok(())
}

async fn run(args: RunArgs) -> Result<ExitCode> {
    let workload = load(&args.file)?;
    // From here on a SIGTERM (pod deleted or evicted) or Ctrl-C ends the run with a partial
    // summary and a non-zero exit, never a silent exit 0.
    let stop = benchrun_worker::shutdown::signal();
    let metrics = Arc::new(Metrics::new());
    if let Some(addr) = args.metrics_addr {
        let bound = server::spawn(addr, server::router(metrics.clone()))
            .await
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
        eprintln!("metrics on http://{bound}/metrics");
    }
    let (duration, total_ops, cleanup) = (
        workload.duration.map(|d| d.0),
        workload.total_ops,
        workload.dataset.cleanup && !args.no_cleanup,
    );
    let engine = Engine::open(workload, metrics.clone(), &args.worker_id).await?;
    eprintln!("preparing dataset on {}", engine.workload().target);
    let dataset = engine.prepare().await?;
    let bar = progress::spawn(metrics.clone(), args.progress, duration, total_ops);
    let run = engine.run(&dataset, None, stop).await;
    if let Some(bar) = bar {
        bar.abort();
    }
    progress::clear();
    let mut summary = run?;
    if cleanup {
        match engine.cleanup().await {
            Ok(st) => summary.cleanup = Some(st),
            Err(e) => eprintln!("warning: cleanup failed: {e}"),
        }
    }
    emit(&summary, args.summary.as_deref())?;
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
    Ok(if summary.stopped_by.starts_with("errorBudget") {
        ExitCode::from(EXIT_ERROR_BUDGET)
    } else {
        ExitCode::SUCCESS
    })
}
