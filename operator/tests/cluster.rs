//! The operator on the real two-node test cluster (tests/cluster/up.sh + image.sh). The
//! controller runs in this test process, watching only the test's namespace, and reaches the
//! worker pods' IPs through the nodes' CNI bridges like an in-cluster operator would.
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run.

mod common;

use std::time::Duration;

use benchrun_api::Summary;
use benchrun_operator::crd::WorkerPhase;
use benchrun_operator::crd::{BenchmarkRun, BenchmarkRunSpec, Phase};
use benchrun_operator::resources;
use benchrun_test_support::NODES;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;

use common::*;

fn per_node(duration: &str, extra: &str) -> String {
    format!(
        r#"
workload:
  target: file:///data/bench
  duration: {duration}
  concurrency: 2
  ops: [{{op: get, weight: 60}}, {{op: put, weight: 30}}, {{op: stat, weight: 10}}]
  objectSize: 16KiB
  dataset: {{objects: 20}}
workers:
  perNode: true
  resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
volume: {{emptyDir: {{}}}}
startDelay: 3s
timeout: 3m
{extra}
"#
    )
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn per_node_run_merges_exactly_and_cleans_up() {
    let env = env("op-pernode").await;
    let (_op, metrics) = spawn_operator_with_metrics(&env);
    let t0 = std::time::Instant::now();
    let api = create_run(&env, "pn", &per_node("4s", "cleanup: Always")).await;
    let run = wait_for(&api, "pn", Duration::from_secs(150), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");

    // Exactly one worker on each node.
    let mut nodes: Vec<_> = st.workers.iter().filter_map(|w| w.node.clone()).collect();
    nodes.sort();
    assert_eq!(
        nodes,
        NODES.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    );
    assert!(
        st.workers.iter().all(|w| w.phase == WorkerPhase::Collected),
        "{:#?}",
        st.workers
    );

    // Per-op counts are the sums of the workers'; p99 is that of the merged histograms.
    let data = result_data(&env, "pn").await;
    let parts: Vec<Summary> = worker_summaries(&env, &run).await;
    let merged: Summary =
        serde_json::from_str(&data[benchrun_operator::crd::MERGED_KEY]).expect("merged");
    let again = Summary::merge(&parts).expect("merge");
    for (op, stats) in &merged.ops {
        let sum: u64 = parts
            .iter()
            .filter_map(|p| p.ops.get(op))
            .map(|s| s.count)
            .sum();
        assert_eq!(stats.count, sum, "{op} count");
        let r = &st.results[&op.to_string()];
        assert_eq!(r.count, sum, "{op} status count");
        assert_eq!(
            r.p99_ms, again.report[op].p99_ms,
            "{op} p99 from merged histograms"
        );
        assert_eq!(r.p99_ms, merged.report[op].p99_ms);
    }
    assert!(
        merged.ops.values().map(|s| s.count).sum::<u64>() > 0,
        "the run did work"
    );
    assert_eq!(merged.workers, 2);
    let skew = st.start_skew_ms.expect("startSkew reported");
    assert!(skew < MAX_SKEW_MS, "workers started {skew}ms apart");
    assert!(st.throughput.is_some() && st.p99.is_some());

    // The operator's metrics carry the run: reconciles counted, the run by phase, and its
    // merged per-op results.
    let text = metrics.render();
    let reconciles =
        sample(&text, "benchrun_operator_reconciles_total").expect("reconciles metric");
    assert!(reconciles >= 3.0, "{text}");
    // Passes come from the poll (one per 2 s), the pods' changes and spec changes; not from
    // the operator's own status writes (which would make each write trigger the next pass:
    // hundreds here, ~10 a second).
    let bound = t0.elapsed().as_secs_f64() / 2.0 * 1.5 + 40.0;
    assert!(
        reconciles <= bound,
        "{reconciles} passes in {:.0?} (at most {bound:.0} expected)",
        t0.elapsed()
    );
    assert_eq!(
        sample(&text, "benchrun_operator_runs{phase=\"Succeeded\"}"),
        Some(1.0),
        "{text}"
    );
    for (op, r) in &st.results {
        let labels = format!("{{namespace=\"{}\",op=\"{op}\",run=\"pn\"}}", env.ns.name());
        let p99 = sample(&text, &format!("benchrun_operator_run_p99_seconds{labels}"))
            .unwrap_or_else(|| panic!("no p99 sample for {op}:\n{text}"));
        assert!(
            (p99 - r.p99_ms / 1000.0).abs() < 1e-9,
            "{op}: {p99} vs {}",
            r.p99_ms
        );
        assert!(sample(
            &text,
            &format!("benchrun_operator_run_ops_per_second{labels}")
        )
        .is_some());
    }

    // cleanup: Always -> worker pods go away.
    for _ in 0..60 {
        if run_pods(&env, "pn").await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("worker pods still present after cleanup: Always");
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn bad_target_fails_with_the_cause() {
    let env = env("op-badtarget").await;
    let _op = spawn_operator(&env);
    // The root filesystem is read-only and nothing is mounted here: the target cannot be made.
    let spec = r#"
workload:
  target: file:///nonexistent/bench
  totalOps: 10
  ops: [{op: get}]
workers: {count: 1}
cleanup: Never
"#;
    let api = create_run(&env, "bad", spec).await;
    let run = wait_for(&api, "bad", Duration::from_secs(90), "finished", finished).await;
    assert_eq!(phase(&run), Phase::Failed);
    let c = condition(&run, "Complete").expect("Complete condition");
    assert_eq!(c.status, "False");
    assert!(
        c.message.contains("/nonexistent/bench"),
        "condition names the target: {c:?}"
    );
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn missing_secret_fails_with_the_cause() {
    let env = env("op-nosecret").await;
    let _op = spawn_operator(&env);
    let spec = r#"
workload:
  target: file:///data/bench
  totalOps: 10
  ops: [{op: get}]
  dataset: {objects: 2, size: 4KiB}
workers: {count: 1}
volume: {emptyDir: {}}
secretRef: {name: no-such-secret}
"#;
    let api = create_run(&env, "nosecret", spec).await;
    let run = wait_for(
        &api,
        "nosecret",
        Duration::from_secs(60),
        "finished",
        finished,
    )
    .await;
    assert_eq!(phase(&run), Phase::Failed);
    let c = condition(&run, "Complete").expect("Complete condition");
    assert!(
        c.message.contains("no-such-secret"),
        "condition names the Secret: {c:?}"
    );
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn invalid_workload_is_rejected_or_reported() {
    let env = env("op-invalid").await;
    let _op = spawn_operator(&env);
    let api: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), env.ns.name());
    // duration and totalOps together: the CEL rule rejects it at create time.
    let spec: BenchmarkRunSpec = serde_yaml::from_str(
        "workload: {target: 'file:///d', duration: 1s, totalOps: 5, ops: [{op: get}]}\n",
    )
    .unwrap();
    let e = api
        .create(&PostParams::default(), &BenchmarkRun::new("both", spec))
        .await
        .expect_err("CEL rejects duration + totalOps");
    assert!(e.to_string().contains("duration"), "{e}");
    // A rule only validate() knows (uniform max < min) lands in the Valid condition.
    let spec = "workload: {target: 'file:///d', duration: 1s, ops: [{op: get}], objectSize: {uniform: {min: 8KiB, max: 4KiB}}}\n";
    let api = create_run(&env, "sizes", spec).await;
    let run = wait_for(&api, "sizes", Duration::from_secs(30), "finished", finished).await;
    let c = condition(&run, "Valid").expect("Valid condition");
    assert_eq!(c.status, "False");
    assert!(
        c.message.contains("spec.workload.objectSize.uniform.max"),
        "{c:?}"
    );
    // Beyond the operator's policy: a hostPath volume and an image nobody allowed. Refused in
    // the Valid condition, and no pod is ever created for it.
    let spec = "workload: {target: 'file:///d', duration: 1s, ops: [{op: get}]}\nvolume: {hostPath: {path: /}}\nworkers: {image: 'evil.example/miner:1'}\n";
    let forbidden = create_run(&env, "forbidden", spec).await;
    let run = wait_for(
        &forbidden,
        "forbidden",
        Duration::from_secs(30),
        "finished",
        finished,
    )
    .await;
    let c = condition(&run, "Valid").expect("Valid condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "Forbidden"),
        "{c:?}"
    );
    assert!(
        c.message.contains("spec.volume.hostPath") && c.message.contains("spec.workers.image"),
        "{c:?}"
    );
    assert!(
        run_pods(&env, "forbidden").await.is_empty(),
        "a forbidden run got pods"
    );
    // The spec is immutable.
    let patch = serde_json::json!({"spec": {"startDelay": "9s"}});
    let e = api
        .patch("sizes", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect_err("spec is immutable");
    assert!(e.to_string().contains("immutable"), "{e}");
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn operator_restart_mid_run_collects_each_worker_once() {
    let env = env("op-restart").await;
    let op = spawn_operator(&env);
    let api = create_run(&env, "rs", &per_node("10s", "")).await;
    let running = wait_for(&api, "rs", Duration::from_secs(120), "Running", |r| {
        phase(r) == Phase::Running
    })
    .await;
    op.abort();
    let _ = op.await;
    // Away until the workers' measured stage has ended (the common start time plus the 10 s
    // duration), so the new operator finds finished workers it did not start.
    let start = running
        .status
        .and_then(|s| s.start_time)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
        .expect("the start time is in the status once Running");
    let end = start + chrono::Duration::seconds(10);
    if let Ok(wait) = (end - chrono::Utc::now().fixed_offset()).to_std() {
        tokio::time::sleep(wait + Duration::from_millis(500)).await;
    }
    let _op = spawn_operator(&env);
    let run = wait_for(&api, "rs", Duration::from_secs(120), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let data = result_data(&env, "rs").await;
    let keys: Vec<_> = data.keys().cloned().collect();
    assert_eq!(keys, ["merged.json"]);
    assert_eq!(
        result_objects(&env, "rs", resources::RESULT_SUMMARY).await,
        ["rs-result-w0", "rs-result-w1"]
    );
    assert!(result_objects(&env, "rs", resources::RESULT_REJECTED)
        .await
        .is_empty());
    let merged: Summary = serde_json::from_str(&data["merged.json"]).unwrap();
    let mut ids = merged.worker_ids.clone();
    ids.sort();
    assert_eq!(ids, ["w0", "w1"], "exactly one result per worker");
    // The stored result says what measured it and what ran (docs/RESULTS.md): the run's
    // workload, the workers' own dataset sub-prefixes taken off.
    assert_eq!(merged.schema_version, benchrun_api::stats::SUMMARY_VERSION);
    assert_eq!(
        merged.tool_version.as_deref(),
        Some(benchrun_api::stats::TOOL_VERSION)
    );
    let w = merged.workload.as_ref().expect("the run's workload");
    assert!(
        !w.dataset.prefix.ends_with("w0/") && !w.dataset.prefix.ends_with("w1/"),
        "{}",
        w.dataset.prefix
    );
}

/// The crash a failpoint causes is expected: its panic, and kube's re-raise of it from the
/// reconcile task, print one line instead of two backtraces, so the first panic in the log of a
/// failing test is the failed check (CI shows only the start of a failure's output).
fn quiet_failpoint_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or_default();
            let reraised = msg.contains("JoinError::Panic(") && msg.contains("\"failpoint ");
            if msg.starts_with("failpoint ") || reraised {
                eprintln!("(the expected crash) {msg}");
            } else {
                default(info)
            }
        }));
    });
}

/// Arms the failpoint `point`, creates run `name` and runs an operator until the failpoint's
/// panic ends it (as a crash there would); returns the run's API once it has.
async fn operator_crashes_at(env: &Env, point: &str, name: &str, spec: &str) -> Api<BenchmarkRun> {
    quiet_failpoint_panics();
    benchrun_operator::failpoint::arm(point);
    let op = spawn_operator(env);
    let api = create_run(env, name, spec).await;
    let ended = tokio::time::timeout(Duration::from_secs(150), op)
        .await
        .unwrap_or_else(|_| panic!("the operator did not reach failpoint {point} in 150 s"));
    let panic = ended.expect_err("the operator crashed").into_panic();
    let msg = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains(&format!("failpoint {point}")), "{msg}");
    api
}

/// (name, uid) of the run's pods, sorted.
async fn pod_uids(env: &Env, run: &str) -> Vec<(String, String)> {
    let mut v: Vec<_> = run_pods(env, run)
        .await
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.uid.unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Preparing: the operator crashes right after creating the worker pods, before its pass
/// writes anything more. A new operator adopts those pods (same UIDs: none deleted, none
/// created twice), starts and collects both workers once.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn operator_crash_after_creating_pods_makes_no_duplicates() {
    let env = env("op-crash-prep").await;
    let point = benchrun_operator::failpoint::AFTER_PODS_CREATED;
    let api = operator_crashes_at(&env, point, "cp", &per_node("3s", "cleanup: Never")).await;
    let run = api.get("cp").await.expect("run");
    assert_eq!(phase(&run), Phase::Preparing, "{:#?}", run.status);
    let before = pod_uids(&env, "cp").await;
    assert_eq!(
        before.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["cp-w0", "cp-w1"],
        "both pods created before the crash"
    );

    let _op = spawn_operator(&env);
    let run = wait_for(&api, "cp", Duration::from_secs(120), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert!(
        st.workers.iter().all(|w| w.phase == WorkerPhase::Collected),
        "{st:#?}"
    );
    // cleanup: Never keeps the pods (said in the same write as the phase), so the same two
    // pods must still be there.
    let kept = condition(&run, "CleanedUp").expect("CleanedUp condition");
    assert_eq!(kept.reason, "PodsKept", "{kept:?}");
    assert_eq!(
        pod_uids(&env, "cp").await,
        before,
        "the pods of before the crash, no others"
    );
    let (merged, _) = check_merged(&env, &run, 2).await;
    let mut ids = merged.worker_ids.clone();
    ids.sort();
    assert_eq!(ids, ["w0", "w1"], "each worker exactly once");
}

/// Running: the operator crashes after writing the common start time and before sending
/// any start request. A new operator sends the start (same start time) and the run completes
/// with each worker counted once and its start skew measured.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn operator_crash_between_start_time_and_start_requests_starts_every_worker() {
    let env = env("op-crash-start").await;
    let point = benchrun_operator::failpoint::AFTER_START_WRITTEN;
    let api = operator_crashes_at(&env, point, "cs", &per_node("3s", "cleanup: Always")).await;
    let run = api.get("cs").await.expect("run");
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Running, "{st:#?}");
    let start = st
        .start_time
        .clone()
        .expect("the start time is written before the crash");
    assert!(
        st.workers.iter().all(|w| w.phase == WorkerPhase::Ready),
        "no worker started before the crash: {:#?}",
        st.workers
    );

    let _op = spawn_operator(&env);
    let run = wait_for(&api, "cs", Duration::from_secs(120), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert_eq!(
        st.start_time.as_deref(),
        Some(start.as_str()),
        "the same start time"
    );
    assert!(st.start_skew_ms.is_some(), "start skew measured: {st:#?}");
    assert_eq!(
        result_objects(&env, "cs", resources::RESULT_SUMMARY).await,
        ["cs-result-w0", "cs-result-w1"]
    );
    check_merged(&env, &run, 2).await;
}

/// The start instant each worker's agent holds (`start_at` of `/v1/status`), by pod, for the
/// agents that answer (asked the way the operator asks them: pod IP, the run's token).
async fn agents_start_at(
    env: &Env,
    run: &BenchmarkRun,
) -> std::collections::BTreeMap<String, Option<chrono::DateTime<chrono::Utc>>> {
    use benchrun_operator::client::WorkerClient;
    let uid = run.metadata.uid.as_deref().expect("uid");
    let token = resources::worker_token(KEY, uid);
    let http = WorkerClient::http(Duration::from_secs(5)).expect("http client");
    let mut out = std::collections::BTreeMap::new();
    for p in run_pods(env, run.metadata.name.as_deref().unwrap_or_default()).await {
        let Some(ip) = p.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
            continue;
        };
        let c = WorkerClient::new(
            http.clone(),
            &format!("{ip}:{}", resources::AGENT_PORT),
            &token,
        );
        if let Ok(st) = c.status().await {
            out.insert(p.metadata.name.clone().unwrap_or_default(), st.start_at);
        }
    }
    out
}

/// The operator stops at `point`, between "every worker Ready" and "started", and a new one
/// takes over: every agent holds one start instant, `status.startTime` names it (the one
/// recorded before the crash, if it was), and every worker is measured and counted once.
async fn restart_between_ready_and_started(prefix: &str, point: &str) {
    let env = env(prefix).await;
    let name = "rs";
    // A start delay well above the new operator's first pass under load (CI runs three test
    // binaries at once on 2 cores): the workers must be told before the instant, or they
    // start late and the 1 s check below would measure the machine, not the restart.
    let spec = per_node("3s", "cleanup: Always").replace("startDelay: 3s", "startDelay: 10s");
    assert!(spec.contains("startDelay: 10s"), "{spec}");
    let api = operator_crashes_at(&env, point, name, &spec).await;
    let run = api.get(name).await.expect("run");
    let st = run.status.clone().expect("status");
    // At `start-decided` the pass that saw every worker Ready had not written yet: the status
    // may still show some Preparing. Either way, none started.
    assert!(
        st.workers.iter().all(|w| matches!(
            w.phase,
            WorkerPhase::Pending | WorkerPhase::Preparing | WorkerPhase::Ready
        )),
        "the status says no worker started before the crash: {:#?}",
        st.workers
    );
    let recorded = st.start_time.clone();
    let held = agents_start_at(&env, &run).await;
    assert_eq!(held.len(), NODES.len(), "every agent answers: {held:?}");
    let told: Vec<_> = held.values().flatten().collect();
    println!("{point}: start time recorded {recorded:?}; agents told before the crash: {held:?}");
    if point == benchrun_operator::failpoint::START_DECIDED {
        assert_eq!(recorded, None, "nothing written before the crash");
        assert!(told.is_empty(), "nothing sent before the crash: {held:?}");
    } else {
        assert!(!told.is_empty(), "an agent was told before the crash");
    }

    let _op = spawn_operator(&env);
    // Every agent holds a start instant (asked while they run; they exit once collected).
    let mut starts = std::collections::BTreeMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while starts.len() < NODES.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every agent was seen holding a start time in 90 s: {starts:?}"
        );
        let run = api.get(name).await.expect("run");
        for (pod, at) in agents_start_at(&env, &run).await {
            if let Some(at) = at {
                starts.insert(pod, at);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let run = wait_for(&api, name, Duration::from_secs(120), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let start: chrono::DateTime<chrono::Utc> = st
        .start_time
        .as_deref()
        .expect("start time")
        .parse()
        .expect("rfc3339");
    if let Some(recorded) = recorded {
        assert_eq!(
            st.start_time,
            Some(recorded),
            "the start time recorded before the crash"
        );
    }
    for (pod, at) in &starts {
        assert_eq!(*at, start, "agent of {pod} holds another start instant");
    }
    // Measured once each, from that instant.
    assert_eq!(
        result_objects(&env, name, resources::RESULT_SUMMARY).await,
        [format!("{name}-result-w0"), format!("{name}-result-w1")]
    );
    for p in worker_summaries(&env, &run).await {
        let off = (p.started_at - start).num_milliseconds().abs();
        assert!(
            off < 1000,
            "worker {:?} started {off} ms from {start} (the start's condition: {:?})",
            p.worker_ids,
            condition(&run, benchrun_operator::run_rules::cond::START_ON_TIME)
        );
    }
    check_merged(&env, &run, 2).await;
}

/// Between "all Ready" and "started": the start time chosen, not yet written nor sent.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn operator_restart_after_choosing_the_start_time_starts_every_worker_at_one_instant() {
    restart_between_ready_and_started("op-rs-decided", benchrun_operator::failpoint::START_DECIDED)
        .await;
}

/// Between "all Ready" and "started": the start time written and accepted by one agent, the
/// status not yet saying any worker started.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn operator_restart_after_a_start_was_sent_starts_every_worker_at_one_instant() {
    restart_between_ready_and_started("op-rs-sent", benchrun_operator::failpoint::A_START_SENT)
        .await;
}

/// Collecting: the operator crashes exactly after persisting a worker's summary and before
/// any status counts it. A new operator finds the persisted summary, counts it once, collects
/// the other worker, and the merged result has each worker exactly once.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn operator_crash_between_persist_and_status_counts_each_worker_once() {
    let env = env("op-crash").await;
    let point = benchrun_operator::failpoint::AFTER_PERSIST;
    let api = operator_crashes_at(&env, point, "cr", &per_node("3s", "cleanup: Always")).await;
    // At the crash: a summary persisted, none counted.
    let persisted = result_objects(&env, "cr", resources::RESULT_SUMMARY).await;
    assert!(
        !persisted.is_empty(),
        "a summary was persisted before the crash"
    );
    let run = api.get("cr").await.expect("run");
    let workers = run.status.clone().unwrap_or_default().workers;
    assert!(
        workers.iter().all(|w| w.phase != WorkerPhase::Collected),
        "nothing counted before the crash: {workers:#?}"
    );

    let _op = spawn_operator(&env);
    let run = wait_for(&api, "cr", Duration::from_secs(120), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert!(
        st.workers.iter().all(|w| w.phase == WorkerPhase::Collected),
        "{st:#?}"
    );
    assert_eq!(
        result_objects(&env, "cr", resources::RESULT_SUMMARY).await,
        ["cr-result-w0", "cr-result-w1"]
    );
    // Counts are the sums of the two workers', p99 that of their merged histograms.
    let (merged, _) = check_merged(&env, &run, 2).await;
    let mut ids = merged.worker_ids.clone();
    ids.sort();
    assert_eq!(ids, ["w0", "w1"], "each worker exactly once");
}

async fn delete_worker_mid_run(policy: &str) -> BenchmarkRun {
    let env = env(&format!("op-lost-{}", policy.to_lowercase())).await;
    let _op = spawn_operator(&env);
    let api = create_run(
        &env,
        "lost",
        &per_node("15s", &format!("failurePolicy: {policy}")),
    )
    .await;
    wait_for(
        &api,
        "lost",
        Duration::from_secs(120),
        "Running on both workers",
        |r| {
            r.status.as_ref().is_some_and(|s| {
                s.workers.len() == 2 && s.workers.iter().all(|w| w.phase == WorkerPhase::Running)
            })
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    pods.delete("lost-w1", &DeleteParams::default())
        .await
        .expect("delete worker pod");
    wait_for(&api, "lost", Duration::from_secs(120), "finished", finished).await
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn worker_deleted_mid_run_fails_under_abort() {
    let run = delete_worker_mid_run("Abort").await;
    assert_eq!(phase(&run), Phase::Failed);
    let c = condition(&run, "WorkersLost").expect("WorkersLost condition");
    assert!(c.message.contains("w1"), "names the worker: {c:?}");
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn worker_deleted_mid_run_completes_under_continue() {
    let run = delete_worker_mid_run("Continue").await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let c = condition(&run, "WorkersLost").expect("WorkersLost condition");
    assert!(c.message.contains("w1"), "names the worker: {c:?}");
    let complete = condition(&run, "Complete").expect("Complete");
    assert!(complete.message.contains("w1"), "{complete:?}");
    assert_eq!(
        st.workers
            .iter()
            .filter(|w| w.phase == WorkerPhase::Collected)
            .count(),
        1
    );
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn missing_claim_fails_with_the_cause() {
    let env = env("op-noclaim").await;
    let _op = spawn_operator(&env);
    let spec = r#"
workload:
  target: file:///data/bench
  totalOps: 10
  ops: [{op: get}]
  dataset: {objects: 2, size: 4KiB}
workers: {perNode: true, scheduleTimeout: 20s}
volume: {claimName: no-such-claim}
"#;
    let api = create_run(&env, "noclaim", spec).await;
    // The scheduler's reason shows as a condition at once, long before the run gives up
    // (after spec.workers.scheduleTimeout).
    let run = wait_for(
        &api,
        "noclaim",
        Duration::from_secs(20),
        "WorkersScheduled=False",
        |r| condition(r, "WorkersScheduled").is_some_and(|c| c.status == "False"),
    )
    .await;
    let c = condition(&run, "WorkersScheduled").unwrap();
    assert!(c.message.contains("no-such-claim"), "{c:?}");
    let run = wait_for(
        &api,
        "noclaim",
        Duration::from_secs(60),
        "finished",
        finished,
    )
    .await;
    assert_eq!(phase(&run), Phase::Failed);
    let c = condition(&run, "Complete").expect("Complete condition");
    assert!(c.message.contains("no-such-claim"), "{c:?}");
}

/// An unschedulable worker for which cluster-autoscaler reports a scale-up waits past
/// `spec.workers.scheduleTimeout`, the condition naming the scale-up; a later
/// `NotTriggerScaleUp` fails it with the autoscaler's message. The test cluster has no
/// autoscaler: the test posts the pod's Events through the API as cluster-autoscaler does
/// (core Events on the pod, source `cluster-autoscaler`).
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_scale_up_keeps_an_unschedulable_worker_waiting_and_a_refusal_fails_it() {
    use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
    let env = env("op-scaleup").await;
    let _op = spawn_operator(&env);
    // No node has this label: the scheduler cannot place the worker.
    let spec = r#"
workload:
  target: file:///data/bench
  totalOps: 10
  ops: [{op: get}]
  dataset: {objects: 2, size: 4KiB}
workers:
  count: 1
  scheduleTimeout: 20s
  nodeSelector: {benchrun.test/pool: autoscaled}
volume: {emptyDir: {}}
"#;
    let api = create_run(&env, "scaleup", spec).await;
    wait_for(
        &api,
        "scaleup",
        Duration::from_secs(30),
        "WorkersScheduled=False/Unschedulable",
        |r| condition(r, "WorkersScheduled").is_some_and(|c| c.reason == "Unschedulable"),
    )
    .await;
    let pod = run_pods(&env, "scaleup")
        .await
        .pop()
        .expect("the worker pod");
    let events: Api<Event> = Api::namespaced(env.client.clone(), env.ns.name());
    let post = |reason: &'static str, message: &'static str| {
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let ev = Event {
            metadata: kube::api::ObjectMeta {
                generate_name: Some(format!(
                    "{}.",
                    pod.metadata.name.clone().unwrap_or_default()
                )),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                namespace: pod.metadata.namespace.clone(),
                uid: pod.metadata.uid.clone(),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            source: Some(EventSource {
                component: Some("cluster-autoscaler".into()),
                host: None,
            }),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            ..Default::default()
        };
        let events = events.clone();
        async move {
            events
                .create(&PostParams::default(), &ev)
                .await
                .unwrap_or_else(|e| panic!("posting the {reason} event: {e}"))
        }
    };
    post(
        "TriggeredScaleUp",
        "pod triggered scale-up: [{benchrun-test-pool 0->1 (max: 3)}]",
    )
    .await;
    // Past the 20 s timeout (the condition counts the seconds waited), still waiting, saying why.
    let waited = |r: &BenchmarkRun| -> Option<u64> {
        let c = condition(r, "WorkersScheduled")?;
        // The last "waiting Ns of": the message starts "worker w0 (any node) is waiting for".
        let rest = c.message.rsplit("waiting ").next()?;
        rest.split('s').next()?.parse().ok()
    };
    let run = wait_for(
        &api,
        "scaleup",
        Duration::from_secs(60),
        "waiting for a node past its scheduleTimeout",
        |r| {
            finished(r)
                || condition(r, "WorkersScheduled").is_some_and(|c| c.reason == "WaitingForNode")
                    && waited(r).is_some_and(|s| s > 22)
        },
    )
    .await;
    assert!(
        !finished(&run),
        "failed despite the scale-up: {:#?}",
        run.status
    );
    assert_eq!(worker(&run, "w0").phase, WorkerPhase::Pending);
    let c = condition(&run, "WorkersScheduled").expect("condition");
    assert!(
        c.message.contains(
            "is waiting for a node: cluster-autoscaler triggered a scale-up: pod triggered \
             scale-up: [{benchrun-test-pool 0->1 (max: 3)}]"
        ) && c
            .message
            .contains("of 60s, 3 x spec.workers.scheduleTimeout"),
        "{c:?}"
    );
    // The autoscaler gives up: so does the run, with its message.
    post(
        "NotTriggerScaleUp",
        "pod didn't trigger scale-up: 1 max node group size reached",
    )
    .await;
    let run = wait_for(
        &api,
        "scaleup",
        Duration::from_secs(30),
        "finished",
        finished,
    )
    .await;
    assert_eq!(phase(&run), Phase::Failed);
    let said = "cluster-autoscaler did not trigger a scale-up: pod didn't trigger scale-up: 1 \
                max node group size reached";
    let w = worker(&run, "w0");
    assert_eq!(w.phase, WorkerPhase::Failed);
    let msg = w.message.as_deref().unwrap_or_default();
    assert!(
        msg.starts_with(&format!(
            "worker w0 (any node) cannot be scheduled: {said} (for 20s"
        )),
        "{msg}"
    );
    let c = condition(&run, "Complete").expect("Complete condition");
    assert!(c.message.contains(said), "{c:?}");
}

/// A worker image that cannot be pulled (a mistyped tag; here a registry on 127.0.0.1:1,
/// where nothing listens, so the kubelet's pull fails at once without leaving the machine)
/// fails the run well within a minute, naming the image and what the kubelet said, instead
/// of leaving it Preparing until its deadline.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_worker_image_that_cannot_be_pulled_fails_fast_naming_it() {
    const IMAGE: &str = "127.0.0.1:1/benchrun/none:missing";
    let env = env("op-badimage").await;
    let _op = spawn_operator_configured(&env, |c| {
        c.policy.allowed_images = vec!["127.0.0.1:1/benchrun/*".into()];
    });
    let spec = format!(
        r#"
workload:
  target: file:///data/bench
  totalOps: 10
  ops: [{{op: get}}]
  dataset: {{objects: 2, size: 4KiB}}
workers: {{count: 1, image: "{IMAGE}"}}
volume: {{emptyDir: {{}}}}
timeout: 10m
"#
    );
    let t0 = std::time::Instant::now();
    let api = create_run(&env, "badimage", &spec).await;
    let run = wait_for(
        &api,
        "badimage",
        Duration::from_secs(60),
        "finished",
        finished,
    )
    .await;
    let took = t0.elapsed();
    assert_eq!(phase(&run), Phase::Failed, "{:#?}", run.status);
    let w = worker(&run, "w0");
    assert_eq!(w.phase, WorkerPhase::Failed);
    let msg = w.message.as_deref().unwrap_or_default();
    // The kubelet's reason, the image, and its message (which names the registry it tried).
    assert!(
        (msg.starts_with("ErrImagePull: ") || msg.starts_with("ImagePullBackOff: "))
            && msg.contains(&format!("image {IMAGE}: "))
            && msg.contains("127.0.0.1:1"),
        "{msg}"
    );
    let c = condition(&run, "Complete").expect("Complete condition");
    assert!(c.message.contains(IMAGE), "{c:?}");
    println!("failed {took:?} after creation: {msg}");
}

/// The counting layer the operator's client is built with sees every request, by verb, on the
/// real API server (bench/scale.sh divides these by the number of workers).
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn api_requests_are_counted_by_verb() {
    use benchrun_operator::apicount::CountLayer;
    use k8s_openapi::api::core::v1::ConfigMap;
    let env = env("op-apicount").await;
    let counter = prometheus::IntCounterVec::new(prometheus::Opts::new("requests", "t"), &["verb"])
        .expect("counter");
    let path = benchrun_test_support::cluster::kubeconfig_path();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(&CountLayer(counter.clone()))
        .build();
    let cms: Api<ConfigMap> = Api::namespaced(client, env.ns.name());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("counted".into());
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    cms.get("counted").await.expect("get");
    cms.list(&Default::default()).await.expect("list");
    cms.delete("counted", &DeleteParams::default())
        .await
        .expect("delete");
    let n = |verb: &str| counter.with_label_values(&[verb]).get();
    assert_eq!(
        (n("create"), n("get"), n("delete"), n("watch"), n("patch")),
        (1, 2, 1, 0, 0)
    );
}

/// A pass handed a copy of the run older than the operator's last status write (a watch
/// cache that has not caught up; here one that never does) reads the run afresh before
/// deciding: the workers are placed once and the start time chosen once, so every worker
/// starts at the start time in the status.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn stale_cache_never_decides_twice() {
    let env = env("op-stale").await;
    benchrun_operator::failpoint::serve_stale("stale");
    let _op = spawn_operator(&env);
    let api = create_run(&env, "stale", &per_node("3s", "cleanup: Always")).await;
    let run = wait_succeeded(&api, "stale").await;
    let start: chrono::DateTime<chrono::Utc> = run
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_deref())
        .expect("start time")
        .parse()
        .expect("rfc3339");
    let parts = worker_summaries(&env, &run).await;
    assert_eq!(parts.len(), NODES.len());
    for p in &parts {
        // A start time chosen again would be at least a poll (2 s) after the one the workers
        // were sent first.
        let off = (p.started_at - start).num_milliseconds().abs();
        assert!(
            off < 1000,
            "worker {:?} started {off} ms from the recorded start time {start}",
            p.worker_ids
        );
    }
}

/// Holds a ConfigMap with a finalizer of the test's own, as a slow garbage collector would;
/// removes the finalizer when dropped (also when the test fails), so nothing is left behind.
struct Hold {
    api: Api<ConfigMap>,
    name: String,
}

const HOLD: &str = "benchrun.dev/test-hold";

impl Hold {
    async fn new(api: Api<ConfigMap>, name: &str) -> Hold {
        let patch = serde_json::json!({"metadata": {"finalizers": [HOLD]}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("add the test's finalizer");
        Hold {
            api,
            name: name.to_string(),
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let (ns, name) = (
            self.api.namespace().unwrap_or_default().to_string(),
            self.name.clone(),
        );
        // A thread with its own runtime and its own client: the test's runtime is blocked on
        // this drop, and the test's client runs its connection on that runtime.
        let t = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let client = benchrun_test_support::cluster::connect().await;
                let api: Api<ConfigMap> = Api::namespaced(client, &ns);
                let patch = serde_json::json!({"metadata": {"finalizers": null}});
                if let Err(e) = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    eprintln!("removing the test's finalizer from {name}: {e}");
                }
            });
        });
        let _ = t.join();
    }
}

/// A run deleted and applied again while garbage collection still holds one of the first
/// run's objects (forced here: a finalizer of the test's own on its workload ConfigMap) does
/// not adopt it: the new run waits, saying why, and once the old object is gone creates its
/// own and runs its own spec.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_recreated_run_never_adopts_the_earlier_runs_objects() {
    let env = env("op-recreate").await;
    let _op = spawn_operator(&env);
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), env.ns.name());
    let workload = resources::workload_cm_name("again");
    let api = create_run(&env, "again", &per_node("2s", "cleanup: Always")).await;
    let first = api.get("again").await.expect("run").metadata.uid;
    wait_until(
        Duration::from_secs(60),
        "the first run's workload ConfigMap",
        || {
            let cms = cms.clone();
            let workload = workload.clone();
            async move { cms.get_opt(&workload).await.ok().flatten() }
        },
    )
    .await;
    let hold = Hold::new(cms.clone(), &workload).await;
    api.delete("again", &DeleteParams::background())
        .await
        .expect("delete");
    wait_until(Duration::from_secs(60), "the first run to be gone", || {
        let api = api.clone();
        async move { matches!(api.get_opt("again").await, Ok(None)).then_some(()) }
    })
    .await;

    // Again, with another spec.
    let api = create_run(&env, "again", &per_node("3s", "cleanup: Always")).await;
    let second = api.get("again").await.expect("run").metadata.uid;
    assert_ne!(first, second);
    let run = wait_for(&api, "again", Duration::from_secs(60), "waiting", |r| {
        condition(r, "WorkersReady").is_some_and(|c| c.reason == "WaitingForEarlierRun")
    })
    .await;
    let msg = &condition(&run, "WorkersReady")
        .expect("WorkersReady")
        .message;
    assert!(
        msg.contains(&format!("ConfigMap {workload}")) && msg.contains("earlier run again"),
        "{msg}"
    );
    // The first run's pods may still be terminating: none may be the new run's.
    let new_uid = second.clone().expect("uid");
    assert!(
        !run_pods(&env, "again").await.iter().any(|p| p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == new_uid)),
        "no worker of the new run started"
    );
    let old = cms.get(&workload).await.expect("held");
    assert_eq!(
        old.metadata.owner_references.expect("owners")[0].uid,
        first.clone().expect("uid")
    );

    // Released: the new run makes its own and runs its spec.
    drop(hold);
    let run = wait_succeeded(&api, "again").await;
    let cm = cms.get(&workload).await.expect("the new run's workload");
    assert_eq!(
        cm.metadata.owner_references.expect("owners")[0].uid,
        second.expect("uid")
    );
    assert_eq!(
        cm.data,
        resources::workload_config_map(&run).expect("cm").data,
        "the new spec's workload"
    );
}

/// Poll `probe` until it gives a value, or panic after `limit` naming `what`.
async fn wait_until<T, F, Fut>(limit: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A run deleted without the finalizer's pass (the finalizer removed by hand while the
/// operator was away) loses its series when the operator's watch lists the runs again; before,
/// only the finalizer's pass removed them, and they stayed in `/metrics` for ever (alerts
/// firing on a run that is gone).
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_run_deleted_without_the_finalizer_loses_its_series() {
    let env = env("op-forget").await;
    let metrics = std::sync::Arc::new(benchrun_operator::metrics::Metrics::new());
    let op = spawn_operator_sharing(&env, metrics.clone());
    let api = create_run(&env, "gone", &per_node("2s", "")).await;
    wait_succeeded(&api, "gone").await;
    let series = "run=\"gone\"";
    // Observed right after the status write the wait saw.
    wait_until(Duration::from_secs(30), "series of the run", || async {
        metrics.render().contains(series).then_some(())
    })
    .await;

    // The operator away; the finalizer removed by hand, so the deletion is immediate.
    op.abort();
    let _ = op.await;
    let none = serde_json::json!({"metadata": {"finalizers": null}});
    api.patch("gone", &PatchParams::default(), &Patch::Merge(&none))
        .await
        .expect("remove the finalizer");
    api.delete("gone", &DeleteParams::background())
        .await
        .expect("delete");
    wait_until(Duration::from_secs(30), "deletion of the run", || async {
        api.get_opt("gone")
            .await
            .expect("read run")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        metrics.render().contains(series),
        "nothing has forgotten them yet"
    );

    // Back (the same metrics, as a watch restarted after a gap): the relist forgets the run.
    let _op = spawn_operator_sharing(&env, metrics.clone());
    wait_until(Duration::from_secs(30), "removal of its series", || async {
        (!metrics.render().contains(series)).then_some(())
    })
    .await;
}
