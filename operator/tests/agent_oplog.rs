//! An agent recording its op-log (`--oplog-uri`, what `spec.oplog` sets) and the operator's
//! client collecting its summary, together on 127.0.0.1 (no cluster): the log is uploaded
//! under the given URI before the summary is served, its measured records are the summary's
//! ops, and a failed upload is reported without losing the result.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use benchrun_api::agent::AgentStage;
use benchrun_api::{Summary, Workload};
use benchrun_operator::client::WorkerClient;
use benchrun_worker::agent::{self, Agent, OplogPlan};
use benchrun_worker::oplog::{Phase, Reader};
use benchrun_worker::Metrics;
use chrono::Utc;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "benchrun-agent-oplog-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Run `workload` in an agent recording to `uri` (spooled in `spool`) through prepare,
/// start, done; its summary, fetched by the operator's client, then shut down.
async fn run_agent(workload: &str, uri: &str, spool: &Path) -> Summary {
    let agent = Agent::new("w0", "tok", Arc::new(Metrics::new())).with_oplog(OplogPlan {
        uri: uri.to_string(),
        spool: spool.to_path_buf(),
        queue: 1 << 16,
    });
    let addr = benchrun_worker::server::spawn(
        "127.0.0.1:0".parse().expect("addr"),
        agent::router(agent.clone()),
    )
    .await
    .expect("bind");
    let w = Workload::from_yaml(workload).expect("workload");
    let a = agent.clone();
    let task = tokio::spawn(async move {
        agent::drive(&a, w, Duration::from_secs(30), Duration::from_millis(200)).await
    });
    let c = WorkerClient::new(
        WorkerClient::http(Duration::from_secs(10)).expect("http client"),
        &addr.to_string(),
        "tok",
    );
    let wait = |want: AgentStage| {
        let c = &c;
        async move {
            for _ in 0..400 {
                if let Ok(st) = c.status().await {
                    assert_ne!(st.stage, AgentStage::Failed, "{:?}", st.error);
                    if st.stage == want {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("agent never reached {want:?}: {:?}", c.status().await);
        }
    };
    wait(AgentStage::Ready).await;
    c.start(Utc::now() + chrono::Duration::milliseconds(200))
        .await
        .expect("start");
    wait(AgentStage::Done).await;
    let (_, summary) = c.summary().await.expect("summary");
    c.shutdown().await.expect("shutdown");
    let r = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("exits after shutdown");
    assert_eq!(r.expect("no panic"), Ok(()));
    summary
}

fn workload(target: &Path) -> String {
    format!(
        "target: file://{}\ntotalOps: 300\nconcurrency: 2\nops: [{{op: get, weight: 3}}, {{op: put, weight: 1}}]\nobjectSize: 8KiB\ndataset: {{objects: 8}}\n",
        target.display()
    )
}

#[tokio::test]
async fn the_log_is_uploaded_under_the_uri_and_holds_every_measured_op() {
    let dir = scratch("ok");
    let (target, logs, spool) = (dir.join("data"), dir.join("logs"), dir.join("spool"));
    std::fs::create_dir_all(&spool).expect("spool dir");
    let uri = format!("file://{}/run-a/", logs.display());
    let summary = run_agent(&workload(&target), &uri, &spool).await;

    let oplog = summary.oplog.expect("the summary has the op-log's figures");
    assert_eq!(oplog.upload_error, None);
    assert_eq!(
        oplog.uri.as_deref(),
        Some(format!("{uri}w0.oplog.gz").as_str())
    );
    let stored = logs.join("run-a/w0.oplog.gz");
    assert!(stored.is_file(), "{} missing", stored.display());
    // Uploaded, so the spool is gone from the pod's scratch directory.
    assert!(!spool.join("w0.oplog.gz").exists());

    let mut r = Reader::open(&stored).expect("the uploaded log opens");
    assert_eq!(r.header().worker_id, "w0");
    let (mut measured, mut all) = (0u64, 0u64);
    while let Some(rec) = r.next_record().expect("the log reads") {
        all += 1;
        measured += u64::from(rec.phase == Phase::Measured);
    }
    let ops: u64 = summary.ops.values().map(|o| o.count).sum();
    assert_eq!(ops, 300);
    assert_eq!(measured, ops, "measured records = the summary's ops");
    assert_eq!(oplog.records, all);
    assert_eq!(oplog.dropped, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_failed_upload_is_reported_and_the_result_is_kept() {
    let dir = scratch("fail");
    let (target, spool) = (dir.join("data"), dir.join("spool"));
    std::fs::create_dir_all(&spool).expect("spool dir");
    // /proc takes no new directories: the upload's target cannot be opened.
    let uri = "file:///proc/benchrun-no-such-dir/run-b/";
    let summary = run_agent(&workload(&target), uri, &spool).await;

    let ops: u64 = summary.ops.values().map(|o| o.count).sum();
    assert_eq!(ops, 300, "the measurement is still the worker's result");
    let oplog = summary.oplog.expect("the summary has the op-log's figures");
    assert_eq!(oplog.uri, None);
    let why = oplog.upload_error.expect("the failure is reported");
    assert!(
        why.contains("uploading to file:///proc/benchrun-no-such-dir/run-b/w0.oplog.gz")
            && why.contains("/proc/benchrun-no-such-dir"),
        "{why}"
    );
    // Recorded all the same, and kept in the spool for `kubectl cp`.
    assert!(oplog.records >= 300);
    assert!(spool.join("w0.oplog.gz").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}
