//! Reading runs and their stored results: the run itself, its merged summary (`merged.json`
//! in ConfigMap `NAME-result`), each worker's own summary, and a matrix run's combinations,
//! all through the operator's own readers (`benchrun_operator::results`).

use anyhow::{Context, Result};
use benchrun_api::Summary;
use benchrun_operator::crd::BenchmarkRun;
use benchrun_operator::results;
use benchrun_worker::report::Run;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::connect::{explain, not_found, Target};
use crate::exit::bad_input;

/// The run `name`; a missing run (or namespace) is bad input.
pub async fn run(t: &Target, name: &str) -> Result<BenchmarkRun> {
    let api: Api<BenchmarkRun> = t.api();
    // A 404 (no such run, namespace, or resource) reads as `None`.
    match api.get_opt(name).await {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(not_found(t, &format!("benchmarkrun \"{name}\"")).await),
        Err(e) => Err(explain(e, &format!("reading benchmarkrun {name}"))),
    }
}

/// The merged summary of a finished run.
pub async fn merged(t: &Target, run: &BenchmarkRun) -> Result<Summary> {
    let name = run.metadata.name.clone().unwrap_or_default();
    let cms: Api<ConfigMap> = t.api();
    results::load_merged(&cms, &name)
        .await
        .with_context(|| format!("reading the result of run {name}"))?
        .ok_or_else(|| {
            let phase = run.status.as_ref().map(|s| s.phase).unwrap_or_default();
            bad_input(format!(
                "run {name} has no merged result (phase {}): ConfigMap {} has no {}",
                phase.as_str(),
                benchrun_operator::resources::result_cm_name(&name),
                benchrun_operator::crd::MERGED_KEY
            ))
        })
}

/// Each worker's own summary, in `status.workers` order; workers without one are skipped.
pub async fn worker_summaries(t: &Target, run: &BenchmarkRun) -> Result<Vec<(String, Summary)>> {
    let cms: Api<ConfigMap> = t.api();
    let mut out = vec![];
    for w in run.status.iter().flat_map(|s| &s.workers) {
        let text = results::load_worker(&cms, run, &w.name)
            .await
            .with_context(|| format!("reading the summary of worker {}", w.name))?;
        if let Some(text) = text {
            out.push((w.name.clone(), results::parse(&w.name, &text)?));
        }
    }
    Ok(out)
}

/// The summaries a run stands for in a report: its merged summary, or for a matrix run each
/// combination's (the representative repeat's), the baseline first, labelled by combination.
pub async fn report_runs(t: &Target, name: &str) -> Result<Vec<Run>> {
    report_runs_of(t, &run(t, name).await?).await
}

/// [`report_runs`] of a run already read.
pub async fn report_runs_of(t: &Target, run: &BenchmarkRun) -> Result<Vec<Run>> {
    let name = run.metadata.name.clone().unwrap_or_default();
    let Some(m) = run.status.as_ref().and_then(|s| s.matrix.as_ref()) else {
        let summary = merged(t, run).await?;
        return Ok(vec![Run {
            label: name,
            summary,
        }]);
    };
    let mut order: Vec<usize> = (0..m.combinations.len()).collect();
    // 1-based in the status.
    let baseline = (m.baseline as usize).saturating_sub(1);
    if baseline < order.len() {
        order.retain(|i| *i != baseline);
        order.insert(0, baseline);
    }
    let mut out = vec![];
    for i in order {
        let row = &m.combinations[i];
        let child = self::run(t, &row.run).await?;
        out.push(Run {
            label: row.name.clone(),
            summary: merged(t, &child).await?,
        });
    }
    Ok(out)
}
