//! `kubectl-benchrun`: the kubectl plugin of benchrun (`kubectl benchrun ...` once on PATH).
//! Thin: parse the flags, run the command, map its outcome to an exit code (listed in
//! `--help`) and any error to one line on stderr.
//!
//! # Layout
//! - `cli`: the clap options, with the exit codes in the help
//! - `exit`: the exit codes, bad input, a finished run's verdict
//! - `connect`: a client and namespace from `--kubeconfig`, `--context`, `-n`
//! - `manifest`: a workload file wrapped in a BenchmarkRun, the placement flags applied
//! - `fetch`: a run, its merged and per-worker summaries, a matrix run's combinations
//! - `watch`: following a run's status, with a progress line on stderr
//! - `show`: a finished run's result table (the worker's), thresholds, JSON/YAML
//! - `run`: `run` and `watch`; `list`, `compare` (with `report`), `logs`, `storageclass`
//! - `cpcompare`: `compare` of two control-plane runs (per operation and phase)
//! - `schedule`: `schedule create|list|history|suspend|resume` (BenchmarkSchedules)
//! - `completion`: the shell completion scripts

mod cli;
mod compare;
mod completion;
mod connect;
mod cpcompare;
mod exit;
mod fetch;
mod list;
mod logs;
mod manifest;
mod run;
mod schedule;
mod show;
mod storageclass;
mod watch;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The worker library links aws-lc-rs next to kube's ring: rustls needs one chosen.
    benchrun_operator::install_crypto_provider();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit::code(exit::ERROR);
        }
    };
    match rt.block_on(dispatch(&cli)) {
        Ok(code) => exit::code(code),
        Err(e) => {
            eprintln!("error: {}", exit::one_line(&e));
            exit::code(exit::of_error(&e))
        }
    }
}

async fn dispatch(cli: &Cli) -> Result<u8> {
    let g = &cli.global;
    match &cli.command {
        Command::Run(a) => run::main(g, a).await,
        Command::Watch(a) => run::watch(g, a).await,
        Command::Storageclass(a) => storageclass::main(g, a).await,
        Command::Result(a) => result(&connect::connect(g).await?, a).await,
        Command::List(a) => list::main(&connect::connect(g).await?, a).await,
        Command::Compare(a) => compare::main(&connect::connect(g).await?, a).await,
        Command::Report(a) => compare::report(&connect::connect(g).await?, a).await,
        Command::Logs(a) => logs::main(&connect::connect(g).await?, a).await,
        Command::Schedule(a) => schedule::main(&connect::connect(g).await?, &a.command).await,
        Command::Completion(a) => {
            print!("{}", completion::script(a.shell));
            Ok(exit::OK)
        }
    }
}

/// `kubectl benchrun result NAME`: only for a finished run (`watch` follows one).
async fn result(t: &connect::Target, a: &cli::ResultArgs) -> Result<u8> {
    let r = fetch::run(t, &a.name).await?;
    if !r.status.as_ref().is_some_and(|s| s.phase.is_finished()) {
        let phase = r.status.as_ref().map(|s| s.phase).unwrap_or_default();
        return Err(exit::bad_input(format!(
            "run {} has not finished (phase {}): kubectl benchrun watch {}",
            a.name,
            phase.as_str(),
            a.name
        )));
    }
    show::result(t, &r, a.output, a.per_worker).await
}
