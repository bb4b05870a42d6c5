//! Thresholds and baselines on the real test cluster: a run that misses a limit fails with the
//! limit named and its result kept; a baseline much faster than the run marks it `Regressed`;
//! a baseline given as another run's name is compared with exactly that run's merged result.
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run.

mod common;

use std::time::Duration;

use benchrun_api::Summary;
use benchrun_operator::baseline;
use benchrun_operator::crd::Phase;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::Api;

use common::*;

/// One worker, two seconds of small GETs on its scratch directory.
fn gets(extra: &str) -> String {
    format!(
        r#"
workload:
  target: file:///data/bench
  duration: 2s
  concurrency: 2
  ops: [{{op: get}}]
  objectSize: 4KiB
  dataset: {{objects: 8}}
workers:
  count: 1
  resources: {{limits: {{cpu: 500m, memory: 128Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
volume: {{emptyDir: {{sizeLimit: 16Mi}}}}
startDelay: 2s
timeout: 3m
{extra}
"#
    )
}

async fn merged(env: &Env, run: &str) -> Summary {
    let data = result_data(env, run).await;
    serde_json::from_str(&data[benchrun_operator::crd::MERGED_KEY]).expect("merged summary")
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn thresholds_gate_the_run_and_baselines_are_compared() {
    let env = env("op-verdicts").await;
    let _op = spawn_operator(&env);
    let api = create_run(&env, "base", &gets("")).await;
    let base = wait_for(&api, "base", Duration::from_secs(120), "finished", finished).await;
    assert_eq!(phase(&base), Phase::Succeeded, "{:#?}", base.status);
    assert!(
        condition(&base, "ThresholdsMet").is_none() && condition(&base, "Regressed").is_none(),
        "no thresholds, no baseline: no verdicts"
    );
    let base_merged = merged(&env, "base").await;

    // A stored "golden" result 1000 times faster than anything this run can do.
    let mut golden = base_merged.clone();
    for s in golden.ops.values_mut() {
        s.count *= 1000;
        s.bytes *= 1000;
    }
    // Every second too, so the significance tests see what the figures say.
    for t in golden.timeline.iter_mut() {
        t.ops *= 1000;
        t.bytes *= 1000;
    }
    golden.refresh();
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), env.ns.name());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("golden".into());
    cm.data = Some(
        [(
            "merged.json".to_string(),
            serde_json::to_string(&golden).expect("json"),
        )]
        .into(),
    );
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("golden ConfigMap");

    // `gate` misses one limit (no GET is faster than 1ns) and meets the other; `again` meets
    // its limit and is compared with the `base` run.
    create_run(
        &env,
        "gate",
        &gets(
            "thresholds: [{op: get, minOpsPerSec: 1, maxP99: 1ns}]\nbaselineRef: {configMap: {name: golden}, tolerancePercent: 50}",
        ),
    )
    .await;
    create_run(
        &env,
        "again",
        &gets("thresholds: [{op: all, maxErrorRate: 0}]\nbaselineRef: {run: base}"),
    )
    .await;

    let gate = wait_for(&api, "gate", Duration::from_secs(120), "finished", finished).await;
    let st = gate.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Failed, "{st:#?}");
    let complete = condition(&gate, "Complete").expect("Complete");
    assert_eq!(
        (complete.status.as_str(), complete.reason.as_str()),
        ("False", "ThresholdsNotMet")
    );
    let met = condition(&gate, "ThresholdsMet").expect("ThresholdsMet");
    assert_eq!(met.status, "False");
    let get = &st.results["get"];
    assert!(get.count > 0, "the result is kept: {st:#?}");
    assert_eq!(
        met.message,
        format!("get maxP99: got {:.3}ms, want <= 1ns", get.p99_ms)
    );
    let checks: Vec<(&str, &str, bool)> = st
        .thresholds
        .iter()
        .map(|c| (c.op.as_str(), c.limit.as_str(), c.met))
        .collect();
    assert_eq!(
        checks,
        [("get", "minOpsPerSec", true), ("get", "maxP99", false)]
    );
    // Against the golden result: about 1000 times fewer ops/s (-99.9%; -100.0% once rounded
    // when this run was slower than `base`, as on a loaded machine), so the change is the
    // one the two summaries give, whatever this run's speed.
    let regressed = condition(&gate, "Regressed").expect("Regressed");
    assert_eq!(regressed.status, "True", "{regressed:?}");
    let b = st.baseline.expect("status.baseline");
    assert_eq!(b.source, "configmap golden/merged.json");
    assert_eq!(b.tolerance_percent, 50.0);
    let want = baseline::compare(
        &merged(&env, "gate").await,
        &golden,
        "configmap golden/merged.json",
        50.0,
    );
    let got = b.deltas["get"].ops_per_sec_percent;
    assert_eq!(got, want.deltas["get"].ops_per_sec_percent);
    assert!(
        got <= -99.0,
        "get ops/s {got}% against a result 1000 times faster"
    );
    assert!(
        b.regressions.iter().any(|r| r.starts_with("get ops/s")),
        "{b:?}"
    );

    let again = wait_for(
        &api,
        "again",
        Duration::from_secs(120),
        "finished",
        finished,
    )
    .await;
    let st = again.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert_eq!(
        condition(&again, "ThresholdsMet").map(|c| c.status.as_str()),
        Some("True")
    );
    // The deltas are exactly those of the two stored merged results.
    let want = baseline::compare(&merged(&env, "again").await, &base_merged, "run base", 10.0);
    let b = st.baseline.expect("status.baseline");
    assert_eq!(b.source, "run base");
    assert_eq!(b.deltas, want.deltas);
    assert_eq!(b.regressions, want.regressions);
    let regressed = condition(&again, "Regressed").expect("Regressed");
    let want_status = if want.regressions.is_empty() {
        "False"
    } else {
        "True"
    };
    assert_eq!(regressed.status, want_status, "{regressed:?}");
}
