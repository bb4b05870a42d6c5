//! Results: each worker's summary is written to the run's result ConfigMap the moment it is
//! collected (`worker-<name>.json`), before the status says "collected", so an operator restart
//! or a pod lost afterwards loses nothing and a summary is never counted twice (one key per
//! worker). The merge reads them back, adds the histograms and stores `merged.json`.

use std::collections::BTreeMap;

use benchrun_worker::Summary;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::Api;

use crate::crd::{BenchmarkRunStatus, WorkerStatus};
use crate::resources::{result_cm_name, summary_key, MANAGER, MERGED_KEY};
use crate::state;
use crate::{Error, Result};

/// Store one document under `key` in the result ConfigMap (a merge patch: other keys stay).
pub async fn persist(cms: &Api<ConfigMap>, run: &str, key: &str, json: &str) -> Result<()> {
    let patch = serde_json::json!({ "data": { key: json } });
    cms.patch(
        &result_cm_name(run),
        &PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        },
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// The worker summaries already persisted, by worker name.
pub fn collected(cm: Option<&ConfigMap>) -> BTreeMap<String, String> {
    cm.and_then(|c| c.data.as_ref())
        .map(|d| {
            d.iter()
                .filter_map(|(k, v)| {
                    let w = k.strip_prefix("worker-")?.strip_suffix(".json")?;
                    Some((w.to_string(), v.clone()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Parse the persisted summaries of `workers` and merge them exactly.
pub fn merge(persisted: &BTreeMap<String, String>, workers: &[&str]) -> Result<Summary> {
    let mut parts = Vec::new();
    for w in workers {
        let text = persisted
            .get(*w)
            .ok_or_else(|| Error::Result(format!("no summary for worker {w}")))?;
        let s: Summary = serde_json::from_str(text)
            .map_err(|e| Error::Result(format!("{} is not a summary: {e}", summary_key(w))))?;
        parts.push(s);
    }
    Summary::merge(&parts).map_err(|e| Error::Result(e.to_string()))
}

pub const MERGED: &str = MERGED_KEY;

/// Fill a worker's figures from its own summary.
pub fn fold_worker(w: &mut WorkerStatus, s: &Summary) {
    let total = s.total().report(s.elapsed_seconds);
    w.ops_per_sec = Some((total.ops_per_sec * 100.0).round() / 100.0);
    w.p99_ms = Some(total.p99_ms);
    w.errors = Some(total.errors);
    w.started_at = Some(s.started_at.to_rfc3339());
}

/// Fill the run's aggregate figures from the merged summary.
pub fn fold_merged(status: &mut BenchmarkRunStatus, merged: &Summary) {
    status.results = state::op_results(merged);
    if let Some(all) = status.results.get("all") {
        status.throughput = Some(state::throughput_text(
            all.ops_per_sec,
            Some(all.mib_per_sec),
        ));
        status.p99 = Some(format!("{:.3}ms", all.p99_ms));
    }
    status.start_skew_ms = state::start_skew_ms(&status.workers);
}
