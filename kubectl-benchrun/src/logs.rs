//! `logs`: every worker's log, each line prefixed by its worker (`[w0] ...`), found by the
//! run's label on its pods. Without `--follow` the workers are printed in order, one after
//! the other; with it, every worker's log is streamed at once, lines interleaved as they
//! arrive, until every worker's container has ended.

use anyhow::{Context, Result};
use benchrun_operator::resources::{CONTAINER, RUN_LABEL, WORKER_LABEL};
use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::Api;

use crate::cli::LogsArgs;
use crate::connect::Target;
use crate::exit::OK;
use crate::fetch;

/// `text` with every line prefixed by `[worker] `.
pub fn prefixed(worker: &str, text: &str) -> String {
    text.lines().map(|l| format!("[{worker}] {l}\n")).collect()
}

/// The pod's worker name (its label), or the pod's name for a pod without one.
fn worker_of(p: &Pod) -> String {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(WORKER_LABEL).cloned())
        .unwrap_or_else(|| p.metadata.name.clone().unwrap_or_default())
}

/// `kubectl benchrun logs NAME [--tail N] [--follow]`.
pub async fn main(t: &Target, args: &LogsArgs) -> Result<u8> {
    let name = &args.name;
    fetch::run(t, name).await?;
    let pods: Api<Pod> = t.api();
    let mut list = pods
        .list(&ListParams::default().labels(&format!("{RUN_LABEL}={name}")))
        .await
        .context("listing the run's pods")?
        .items;
    if list.is_empty() {
        eprintln!("run {name} has no worker pods (not created yet, or cleaned up after the run)");
        return Ok(OK);
    }
    // w2 before w10.
    list.sort_by_key(|p| {
        let w = worker_of(p);
        (w.len(), w)
    });
    let lp = LogParams {
        container: Some(CONTAINER.into()),
        tail_lines: args.tail,
        follow: args.follow,
        ..LogParams::default()
    };
    if args.follow {
        follow(&pods, &list, &lp).await;
        return Ok(OK);
    }
    for p in &list {
        let w = worker_of(p);
        let pod = p.metadata.name.clone().unwrap_or_default();
        match pods.logs(&pod, &lp).await {
            Ok(text) => print!("{}", prefixed(&w, &text)),
            // A pod still being created has no log yet: say so in its place, keep going.
            Err(e) => eprintln!("[{w}] no log from pod {pod}: {e}"),
        }
    }
    Ok(OK)
}

/// Stream every pod's log at once, a line at a time as it arrives, until all have ended.
/// A stream that cannot be opened or breaks is reported in its worker's place; the others go on.
async fn follow(pods: &Api<Pod>, list: &[Pod], lp: &LogParams) {
    let streams = list.iter().map(|p| {
        let w = worker_of(p);
        let pod = p.metadata.name.clone().unwrap_or_default();
        async move {
            let lines = match pods.log_stream(&pod, lp).await {
                Ok(reader) => reader.lines(),
                Err(e) => {
                    eprintln!("[{w}] no log from pod {pod}: {e}");
                    return futures::stream::empty().boxed();
                }
            };
            let tagged = lines.map_ok(move |l| format!("[{w}] {l}"));
            tagged
                .map_err(move |e| format!("log stream of pod {pod} broke: {e}"))
                .boxed()
        }
    });
    let mut merged = futures::stream::iter(streams)
        .buffer_unordered(list.len().max(1))
        .flatten_unordered(None);
    while let Some(line) = merged.next().await {
        match line {
            Ok(l) => println!("{l}"),
            Err(e) => eprintln!("{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_line_carries_its_worker() {
        assert_eq!(super::prefixed("w1", "a\nb\n"), "[w1] a\n[w1] b\n");
        assert_eq!(super::prefixed("w1", ""), "");
    }
}
