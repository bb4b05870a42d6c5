//! `stopWhenStable` across a cluster run's workers, on the real two-node test cluster
//! (tests/cluster/up.sh + image.sh): the operator decides from the workers' merged
//! throughput and stops them all at one instant, so the merged result is of one window.
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run.

mod common;

use std::time::Duration;

use benchrun_api::stable::BY_RUN;
use benchrun_api::OpKind;
use benchrun_operator::crd::{Phase, WorkerPhase};
use chrono::{DateTime, Utc};

use common::*;

/// How far apart two instants of the same run measured on the workers may be beyond the
/// measured start skew: each worker's start and end instants are read off its wall clock a
/// few milliseconds from the instant itself.
const CLOCK_READ_MS: f64 = 100.0;

/// Four workers on two nodes, 100 GETs/s each (open loop, steady at once), a 10-minute
/// duration and `stopWhenStable`: the run stops well before 10 minutes, every worker's
/// measured stage ends at the run's one stop instant (within the start skew), every summary
/// says the run found it steady, and the merged figures are the workers' summed over the one
/// window.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_workers_stop_together_when_their_merged_throughput_is_steady() {
    let env = env("op-stable").await;
    let _op = spawn_operator(&env);
    let spec = r#"
workload:
  target: file:///data/bench
  duration: 10m
  concurrency: 2
  rateLimit: 100
  ops: [{op: get}]
  objectSize: 4KiB
  dataset: {objects: 20}
  stopWhenStable: {window: 5s, bandPercent: 20}
workers:
  count: 4
  resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: 50m, memory: 32Mi}}
volume: {emptyDir: {}}
startDelay: 3s
timeout: 15m
"#;
    let api = create_run(&env, "steady", spec).await;
    // Far less than the 10-minute duration: pods, prepare, start delay, a 5 s window, the
    // stop margin, collection.
    let run = wait_for(
        &api,
        "steady",
        Duration::from_secs(240),
        "finished",
        finished,
    )
    .await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert_eq!(st.workers.len(), 4, "{:#?}", st.workers);
    assert!(st.workers.iter().all(|w| w.phase == WorkerPhase::Collected));

    // The run's decision, recorded before any worker was told.
    let rs = st.stable.clone().expect("status.stable: the run decided");
    assert_eq!(rs.workers, 4);
    assert_eq!((rs.window_seconds, rs.band_percent), (5, 20.0));
    let stop_at: DateTime<Utc> = DateTime::parse_from_rfc3339(&rs.stop_at)
        .expect("stopAt")
        .with_timezone(&Utc);
    // 4 workers at 100 ops/s each: the merged mean, inside the band.
    assert!(
        (300.0..=500.0).contains(&rs.mean_ops_per_second),
        "merged mean {} ops/s",
        rs.mean_ops_per_second
    );
    assert!(rs.min_ops_per_second >= rs.mean_ops_per_second * 0.8);
    assert!(rs.max_ops_per_second <= rs.mean_ops_per_second * 1.2);

    let (merged, parts) = check_merged(&env, &run, 4).await;
    let skew = st.start_skew_ms.expect("startSkew reported");
    assert!(skew < MAX_SKEW_MS, "workers started {skew}ms apart");
    let tolerance = skew + CLOCK_READ_MS;

    // Every worker: stopped by the run's decision, at the run's instant.
    let mut ends = Vec::new();
    for p in &parts {
        let who = p.worker_ids.join(",");
        let d = p
            .stable
            .clone()
            .unwrap_or_else(|| panic!("{who}: no `stable` ({})", p.stopped_by));
        assert_eq!(d.decided_by, BY_RUN, "{who}");
        assert_eq!(d.workers, 4, "{who}");
        assert_eq!(p.stopped_by, d.figures.reason(), "{who}");
        assert!(!p.partial, "{who}");
        let end = p.stopped_at.expect("stoppedAt");
        let off = (end - stop_at).num_milliseconds().abs() as f64;
        assert!(
            off <= tolerance,
            "{who} ended at {end}, the run at {stop_at}"
        );
        assert!(
            p.elapsed_seconds < 120.0,
            "{who}: ended early, not after its 10 minutes: {} s",
            p.elapsed_seconds
        );
        ends.push(end);
    }
    let spread = (*ends.iter().max().unwrap() - *ends.iter().min().unwrap()).num_milliseconds();
    assert!(
        spread as f64 <= tolerance,
        "the workers' stages ended {spread} ms apart (start skew {skew} ms)"
    );
    // The windows are one: each worker's length within the start skew of the merged one.
    for p in &parts {
        let d = (p.elapsed_seconds - merged.elapsed_seconds).abs() * 1000.0;
        assert!(
            d <= tolerance,
            "{:?}: window {} s vs {} s",
            p.worker_ids,
            p.elapsed_seconds,
            merged.elapsed_seconds
        );
    }

    // The merged result says why, and its figures hold: ops summed, rate = ops / window.
    assert_eq!(merged.stopped_by, parts[0].stopped_by);
    assert_eq!(st.stopped_by.as_deref(), Some(merged.stopped_by.as_str()));
    assert_eq!(
        merged.stable.as_ref().map(|d| d.decided_by.as_str()),
        Some(BY_RUN)
    );
    let ops: u64 = parts.iter().map(|p| p.ops[&OpKind::Get].count).sum();
    assert_eq!(merged.ops[&OpKind::Get].count, ops);
    let rate = merged.report[&OpKind::Get].ops_per_sec;
    assert!(
        (rate - ops as f64 / merged.elapsed_seconds).abs() < 1e-6,
        "{rate} ops/s for {ops} ops over {} s",
        merged.elapsed_seconds
    );
    assert!(
        (rate - rs.mean_ops_per_second).abs() <= rs.mean_ops_per_second * 0.25,
        "the merged rate {rate} is the steady one {}",
        rs.mean_ops_per_second
    );
    assert_eq!(st.results["all"].count, ops);
}
