//! `logs`: every worker's log, each line prefixed by its worker (`[w0] ...`), workers in
//! order, found by the run's label on its pods.

use anyhow::{Context, Result};
use benchrun_operator::resources::{CONTAINER, RUN_LABEL, WORKER_LABEL};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::Api;

use crate::connect::Target;
use crate::exit::OK;
use crate::fetch;

/// `text` with every line prefixed by `[worker] `.
pub fn prefixed(worker: &str, text: &str) -> String {
    text.lines().map(|l| format!("[{worker}] {l}\n")).collect()
}

/// `kubectl benchrun logs NAME`.
pub async fn main(t: &Target, name: &str, tail: Option<i64>) -> Result<u8> {
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
    let worker = |p: &Pod| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(WORKER_LABEL).cloned())
            .unwrap_or_else(|| p.metadata.name.clone().unwrap_or_default())
    };
    list.sort_by_key(|p| {
        let w = worker(p);
        // w2 before w10.
        (w.len(), w)
    });
    for p in &list {
        let w = worker(p);
        let pod = p.metadata.name.clone().unwrap_or_default();
        let lp = LogParams {
            container: Some(CONTAINER.into()),
            tail_lines: tail,
            ..LogParams::default()
        };
        match pods.logs(&pod, &lp).await {
            Ok(text) => print!("{}", prefixed(&w, &text)),
            // A pod still being created has no log yet: say so in its place, keep going.
            Err(e) => eprintln!("[{w}] no log from pod {pod}: {e}"),
        }
    }
    Ok(OK)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_line_carries_its_worker() {
        assert_eq!(super::prefixed("w1", "a\nb\n"), "[w1] a\n[w1] b\n");
        assert_eq!(super::prefixed("w1", ""), "");
    }
}
