//! A matrix run on the real test cluster: each combination runs in turn as a child run with
//! its own parameter values, and the parent's table holds exactly the children's figures.
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run.

mod common;

use std::time::Duration;

use benchrun_api::spec::OpKind;
use benchrun_api::Summary;
use benchrun_operator::crd::Phase;
use benchrun_operator::sweep;
use kube::api::ListParams;
use kube::ResourceExt;

use common::*;

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn combinations_run_in_turn_and_fill_the_table() {
    let env = env("op-matrix").await;
    let _op = spawn_operator(&env);
    let spec = r#"
workload:
  target: file:///data/bench
  totalOps: 400
  concurrency: 2
  ops: [{op: get}]
  objectSize: 4KiB
  dataset: {objects: 8}
workers:
  count: 1
  resources: {limits: {cpu: 500m, memory: 128Mi}, requests: {cpu: 50m, memory: 32Mi}}
volume: {emptyDir: {sizeLimit: 16Mi}}
startDelay: 2s
matrix:
  parameters:
    objectSize: [4KiB, 16KiB]
  baseline: {objectSize: 16KiB}
  warmup: 1s
  repeats: 2
"#;
    let api = create_run(&env, "sweep", spec).await;
    let run = wait_for(
        &api,
        "sweep",
        Duration::from_secs(240),
        "finished",
        finished,
    )
    .await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let m = st.matrix.clone().expect("status.matrix");
    assert_eq!((m.total, m.baseline), (2, 2));
    assert_eq!(m.progress, "2 combinations done");
    assert_eq!(st.workers_summary.as_deref(), Some("2/2 combinations"));
    let names: Vec<(&str, &str)> = m
        .combinations
        .iter()
        .map(|c| (c.name.as_str(), c.run.as_str()))
        .collect();
    assert_eq!(names[0].0, "objectSize=4KiB");
    assert_eq!(names[1].0, "objectSize=16KiB");
    // Each row stands for the median of its two repeats; the warm-ups are not measured.
    for (k, row) in m.combinations.iter().enumerate() {
        let want = [format!("sweep-{}-r1", k + 1), format!("sweep-{}-r2", k + 1)];
        assert_eq!(row.runs, want, "repeats of combination {}", k + 1);
        assert!(want.contains(&row.run), "{} is one of its repeats", row.run);
    }

    // The children: labelled, owned by the parent, a warm-up and two repeats per combination.
    let mut children: Vec<String> = api
        .list(&ListParams::default().labels(&format!("{}=sweep", sweep::MATRIX_LABEL)))
        .await
        .expect("list children")
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    children.sort();
    assert_eq!(
        children,
        [
            "sweep-1-r1",
            "sweep-1-r2",
            "sweep-1-w",
            "sweep-2-r1",
            "sweep-2-r2",
            "sweep-2-w"
        ]
    );
    for w in ["sweep-1-w", "sweep-2-w"] {
        let warm = api.get(w).await.expect("warm-up run");
        assert!(finished(&warm), "{w} finished before the repeats");
        assert_eq!(warm.spec.workload.duration.map(|d| d.0.as_secs()), Some(1));
    }
    for (row, size) in m.combinations.iter().zip([4096u64, 16384]) {
        let child = api.get(&row.run).await.expect("child run");
        assert_eq!(
            child.owner_references()[0].uid,
            run.uid().expect("uid"),
            "{} owned by the parent",
            row.run
        );
        let cst = child.status.clone().expect("child status");
        assert_eq!(cst.phase, Phase::Succeeded);
        assert_eq!(row.phase, Phase::Succeeded);
        let data = result_data(&env, &row.run).await;
        let merged: Summary = serde_json::from_str(&data[benchrun_operator::crd::MERGED_KEY])
            .expect("merged summary");
        let get = &merged.ops[&OpKind::Get];
        assert_eq!(get.count, 400);
        assert_eq!(get.bytes, 400 * size, "{}: GETs of {size} B", row.run);
        // The row holds exactly the child's figures.
        let all = &cst.results["all"];
        assert_eq!(row.ops_per_sec, Some(all.ops_per_sec));
        assert_eq!(row.p99_ms, Some(all.p99_ms));
        assert_eq!(row.errors, Some(0));
        let total = merged.total();
        let want_rpo = (total.requests as f64 / total.count as f64 * 1000.0).round() / 1000.0;
        assert_eq!(row.requests_per_op, Some(want_rpo));
        // The process figures of the merged summary.
        assert_eq!(row.minor_faults, Some(merged.process.minor_faults));
        assert_eq!(row.major_faults, Some(merged.process.major_faults));
        assert_eq!(
            row.cpu_percent,
            merged
                .cpu_percent_of_a_core()
                .map(|v| (v * 10.0).round() / 10.0)
        );
    }
    // Row 1 compared with the baseline (row 2), which has no change of its own.
    let (a, b) = (&m.combinations[0], &m.combinations[1]);
    let want = ((a.ops_per_sec.unwrap() - b.ops_per_sec.unwrap()) / b.ops_per_sec.unwrap()
        * 1000.0)
        .round()
        / 10.0;
    assert_eq!(a.ops_per_sec_change_percent, Some(want));
    assert_eq!(b.ops_per_sec_change_percent, None);
}

/// A matrix run that fails (here its deadline) while a combination runs deletes that child
/// run: the child's finalizer stops its workers, and nothing measures on after the sweep
/// failed. Before, the child ran on to its own end.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_failed_matrix_run_stops_its_child_in_flight() {
    let env = env("op-matrix-stop").await;
    let _op = spawn_operator(&env);
    // The parent's deadline (20 s) passes while its first child, of 10 minutes, runs.
    let spec = r#"
workload:
  target: file:///data/bench
  duration: 10m
  concurrency: 1
  ops: [{op: get}]
  objectSize: 4KiB
  dataset: {objects: 8}
workers:
  count: 1
  resources: {limits: {cpu: 500m, memory: 128Mi}, requests: {cpu: 50m, memory: 32Mi}}
volume: {emptyDir: {sizeLimit: 16Mi}}
startDelay: 2s
timeout: 20s
matrix:
  parameters:
    objectSize: [4KiB, 16KiB]
"#;
    let api = create_run(&env, "stop", spec).await;
    // The child exists (it is what the parent must stop).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while api.get_opt("stop-1").await.expect("read child").is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "child stop-1 not created within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let parent = wait_for(&api, "stop", Duration::from_secs(90), "finished", finished).await;
    let c = condition(&parent, "Complete").expect("Complete");
    assert_eq!(
        (phase(&parent), c.reason.as_str()),
        (Phase::Failed, "Timeout")
    );
    // Gone within the cleanup bound (its workers stop and remove their datasets first).
    let bound = benchrun_operator::worker_cleanup::CLEANUP_BOUND + Duration::from_secs(30);
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        match api.get_opt("stop-1").await.expect("read child") {
            None => break,
            Some(child) if tokio::time::Instant::now() > deadline => panic!(
                "child stop-1 still there {bound:?} after the parent failed: {:?}",
                child.status
            ),
            Some(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    // The next combination was never started.
    assert!(api.get_opt("stop-2").await.expect("read").is_none());
    wait_pods_gone(&env, "stop-1", "the stopped child's workers").await;
}
