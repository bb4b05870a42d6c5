//! `run`: read a workload or manifest, wrap and place it, create it, follow it, print its
//! result; `watch`: the same for a run that exists. Ctrl-C deletes the run only when asked
//! (`--delete-on-interrupt`, or a yes at the prompt on a terminal); otherwise it keeps running
//! and the command says how to follow it again.

use std::io::{IsTerminal, Read};

use anyhow::{Context, Result};
use benchrun_operator::crd::BenchmarkRun;
use kube::api::{DeleteParams, PostParams};
use kube::Api;

use crate::cli::{DryRun, Output, RunArgs, WatchArgs};
use crate::connect::{self, Target};
use crate::exit::{bad_input, INTERRUPTED};
use crate::manifest::{self, Placement};
use crate::show;
use crate::watch::{self, View};

/// The input of `run`, read whole but bounded (a workload file has a size limit; a manifest
/// carries a little more around it).
fn read_input(file: &str) -> Result<String> {
    let limit = benchrun_api::spec::limits::MAX_FILE_BYTES as u64 * 2;
    let mut bytes = Vec::new();
    let read = if file == "-" {
        std::io::stdin()
            .lock()
            .take(limit + 1)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| bad_input(format!("reading {file}: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(bad_input(format!("{file} is larger than {limit} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| bad_input(format!("{file} is not UTF-8 text")))
}

/// The run `run` would create, with the flags applied and checked.
pub fn build(args: &RunArgs, text: &str) -> Result<BenchmarkRun> {
    let mut run = manifest::parse(text, &args.file)?;
    let placement = Placement {
        name: args.name.clone(),
        per_node: args.per_node,
        workers: args.workers,
        node_selector: manifest::node_selector(&args.node_selector)?,
        storage_class: args.storage_class.clone(),
        claim_size: args.claim_size.clone(),
    };
    manifest::apply(&mut run, &placement)?;
    manifest::credentials(&mut run, args.secret.as_deref(), args.ca.as_deref())?;
    manifest::validate(&run)?;
    Ok(run)
}

/// `kubectl benchrun run`.
pub async fn main(global: &crate::cli::Global, args: &RunArgs) -> Result<u8> {
    let text = read_input(&args.file)?;
    let mut run = build(args, &text)?;
    let encode_as = args.output.unwrap_or(Output::Yaml);
    if args.dry_run == Some(DryRun::Client) {
        if let (Some(ns), None) = (&global.namespace, &run.metadata.namespace) {
            run.metadata.namespace = Some(ns.clone());
        }
        print!("{}", show::encode(&run, encode_as)?);
        return Ok(crate::exit::OK);
    }
    let mut t = connect::connect(global).await?;
    if let Some(ns) = run.metadata.namespace.clone() {
        match &global.namespace {
            Some(flag) if *flag != ns => {
                return Err(bad_input(format!(
                    "the namespace of the manifest ({ns}) does not match the namespace from the flag ({flag})"
                )))
            }
            _ => t.namespace = ns,
        }
    }
    let api: Api<BenchmarkRun> = t.api();
    let params = PostParams {
        dry_run: args.dry_run == Some(DryRun::Server),
        ..PostParams::default()
    };
    let created = match api.create(&params, &run).await {
        Ok(r) => r,
        // A create is refused with NotFound only for its namespace.
        Err(kube::Error::Api(s)) if s.code == 404 && s.reason == "NotFound" => {
            return Err(bad_input(format!(
                "namespace \"{}\" not found",
                t.namespace
            )))
        }
        Err(e) => return Err(connect::explain(e, "creating the BenchmarkRun")),
    };
    if params.dry_run {
        // As kubectl: the object as the API server would store it, nothing created.
        print!("{}", show::encode(&created, encode_as)?);
        return Ok(crate::exit::OK);
    }
    let name = created.metadata.name.clone().unwrap_or_default();
    eprintln!(
        "benchmarkrun.benchrun.dev/{name} created in namespace {}",
        t.namespace
    );
    follow_and_show(&t, &name, args.output, Interrupt::from(args)).await
}

/// `kubectl benchrun watch`.
pub async fn watch(global: &crate::cli::Global, args: &WatchArgs) -> Result<u8> {
    let t = connect::connect(global).await?;
    crate::fetch::run(&t, &args.name).await?;
    follow_and_show(&t, &args.name, args.output, Interrupt::Leave).await
}

/// What Ctrl-C does to the run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Interrupt {
    /// Leave it running.
    Leave,
    /// Ask on the terminal (default `no`).
    Ask,
    /// Delete it.
    Delete,
}

impl Interrupt {
    fn from(args: &RunArgs) -> Interrupt {
        if args.delete_on_interrupt {
            Interrupt::Delete
        } else if args.file != "-"
            && std::io::stdin().is_terminal()
            && std::io::stderr().is_terminal()
        {
            Interrupt::Ask
        } else {
            Interrupt::Leave
        }
    }
}

async fn follow_and_show(
    t: &Target,
    name: &str,
    output: Option<Output>,
    on_interrupt: Interrupt,
) -> Result<u8> {
    let mut view = View::default();
    let ended = tokio::select! {
        r = watch::follow(t, name, &mut view) => Some(r?),
        _ = tokio::signal::ctrl_c() => None,
    };
    let Some(run) = ended else {
        view.done();
        return interrupted(t, name, on_interrupt).await;
    };
    show::result(t, &run, output, false).await
}

async fn interrupted(t: &Target, name: &str, on_interrupt: Interrupt) -> Result<u8> {
    let delete = match on_interrupt {
        Interrupt::Delete => true,
        Interrupt::Leave => false,
        Interrupt::Ask => {
            eprint!("interrupted: delete run {name}? [y/N] ");
            let answer = tokio::select! {
                a = tokio::task::spawn_blocking(|| {
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line).map(|_| line)
                }) => a.ok().and_then(|r| r.ok()).unwrap_or_default(),
                _ = tokio::signal::ctrl_c() => String::new(),
            };
            matches!(answer.trim(), "y" | "Y" | "yes")
        }
    };
    if delete {
        let api: Api<BenchmarkRun> = t.api();
        api.delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting run {name}"))?;
        eprintln!("interrupted: run {name} deleted (its workers are stopped and clean up)");
    } else {
        eprintln!(
            "interrupted: run {name} keeps running; follow it with: kubectl benchrun watch {name} -n {}",
            t.namespace
        );
    }
    Ok(INTERRUPTED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(line: &[&str]) -> RunArgs {
        let cli = crate::cli::Cli::try_parse_from(["kubectl-benchrun", "run"].iter().chain(line))
            .expect("parses");
        match cli.command {
            crate::cli::Command::Run(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_reach_the_run() {
        let a = args(&[
            "w.yaml",
            "--workers",
            "2",
            "--node-selector",
            "a=1,b=2",
            "--storage-class",
            "fast",
            "--claim-size",
            "3Gi",
            "--name",
            "n1",
        ]);
        let run = build(
            &a,
            "target: file:///data/x\nduration: 1s\nops: [{op: get}]\n",
        )
        .unwrap();
        assert_eq!(run.metadata.name.as_deref(), Some("n1"));
        assert_eq!(run.spec.workers.count, Some(2));
        assert_eq!(run.spec.workers.node_selector.as_ref().unwrap().len(), 2);
        let claim = run.spec.volume.unwrap().claim_template.unwrap();
        assert_eq!(
            claim.resources.unwrap().requests.unwrap()["storage"].0,
            "3Gi"
        );
        assert_eq!(
            Interrupt::from(&args(&["-", "--delete-on-interrupt"])),
            Interrupt::Delete
        );
        assert_eq!(Interrupt::from(&args(&["-"])), Interrupt::Leave);
    }

    #[test]
    fn dry_run_is_spelled_as_kubectl_spells_it() {
        assert_eq!(args(&["w.yaml"]).dry_run, None);
        assert_eq!(args(&["w.yaml", "--dry-run"]).dry_run, Some(DryRun::Client));
        assert_eq!(
            args(&["w.yaml", "--dry-run=client"]).dry_run,
            Some(DryRun::Client)
        );
        assert_eq!(
            args(&["w.yaml", "--dry-run=server"]).dry_run,
            Some(DryRun::Server)
        );
    }

    #[test]
    fn secret_and_ca_reach_a_wrapped_workload() {
        let w = "target: s3://b/p/\nduration: 1s\nops: [{op: get}]\nstorage: {endpoint: 'https://s3.local:9000'}\n";
        let run = build(
            &args(&[
                "w.yaml",
                "--secret",
                "s3-creds",
                "--ca",
                "configmap/minio-ca:ca.crt",
            ]),
            w,
        )
        .unwrap();
        assert_eq!(run.spec.secret_ref.unwrap().name, "s3-creds");
        let ca = run.spec.ca_ref.unwrap();
        let k = ca.config_map.unwrap();
        assert_eq!((k.name.as_str(), k.key.as_str()), ("minio-ca", "ca.crt"));
        let run = build(&args(&["w.yaml", "--ca", "secret/s:tls.crt"]), w).unwrap();
        assert_eq!(run.spec.ca_ref.unwrap().secret.unwrap().key, "tls.crt");
        for bad in ["s:ca.crt", "pod/s:ca.crt", "secret/s", "secret/:k"] {
            let e = build(&args(&["w.yaml", "--ca", bad]), w).unwrap_err();
            assert_eq!(crate::exit::of_error(&e), crate::exit::BAD_INPUT, "{bad}");
            assert!(e.to_string().contains("--ca"), "{e}");
        }
    }

    #[test]
    fn conflicting_or_out_of_range_flags_are_refused_by_the_parser() {
        for line in [
            &["run", "w.yaml", "--per-node", "--workers", "2"][..],
            &["run", "w.yaml", "--workers", "0"],
            &["run"],
            &["list", "-o", "xml"],
            // -o wide is list's only: refused up front, not after the whole benchmark.
            &["run", "w.yaml", "-o", "wide"],
            &["watch", "r", "-o", "wide"],
            &["run", "w.yaml", "--dry-run=always"],
        ] {
            let r = crate::cli::Cli::try_parse_from(
                std::iter::once("kubectl-benchrun").chain(line.iter().copied()),
            );
            let e = r.expect_err(&format!("{line:?}"));
            assert_eq!(e.exit_code(), crate::exit::BAD_INPUT as i32, "{line:?}");
        }
    }
}
