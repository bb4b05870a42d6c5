//! The worker agent and the operator's client for it, together on 127.0.0.1 (no cluster):
//! auth, prepare -> ready -> start at a common time -> summary -> shutdown, and failure
//! reporting.

use std::sync::Arc;
use std::time::Duration;

use benchrun_api::agent::{AgentStage, AgentStatus};
use benchrun_api::Workload;
use benchrun_operator::client::WorkerClient;
// The agent's server and engine are the worker's (a dev-dependency).
use benchrun_worker::agent::{self, Agent};
use benchrun_worker::Metrics;
use chrono::Utc;

async fn spawn_agent(
    workload: &str,
    token: &str,
) -> (Agent, String, tokio::task::JoinHandle<Result<(), String>>) {
    let agent = Agent::new("w0", token, Arc::new(Metrics::new()));
    let addr = benchrun_worker::server::spawn(
        "127.0.0.1:0".parse().unwrap(),
        agent::router(agent.clone()),
    )
    .await
    .expect("bind");
    let w = Workload::from_yaml(workload).expect("workload");
    let a = agent.clone();
    let task = tokio::spawn(async move {
        agent::drive(&a, w, Duration::from_secs(30), Duration::from_millis(200)).await
    });
    (agent, addr.to_string(), task)
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("benchrun-agent-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

async fn wait_stage(c: &WorkerClient, want: AgentStage) -> AgentStatus {
    for _ in 0..200 {
        if let Ok(st) = c.status().await {
            if st.stage == want {
                return st;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("agent never reached {want:?}: {:?}", c.status().await);
}

#[tokio::test]
async fn agent_runs_from_start_time_and_serves_summary() {
    let dir = scratch("ok");
    let yaml = format!(
        "target: file://{}\ntotalOps: 200\nconcurrency: 2\nops: [{{op: get, weight: 3}}, {{op: put, weight: 1}}]\nobjectSize: 16KiB\ndataset: {{objects: 8}}\n",
        dir.display()
    );
    let (_agent, addr, task) = spawn_agent(&yaml, "tok").await;
    let http = WorkerClient::http(std::time::Duration::from_secs(10)).expect("http client");

    // Wrong or missing token: 401, and the run does not start.
    let bad = WorkerClient::new(http.clone(), &addr, "nope");
    let e = bad.status().await.expect_err("unauthorized");
    assert!(e.contains("401"), "{e}");
    let raw = http
        .get(format!("http://{addr}/v1/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 401);
    // /metrics stays open for Prometheus.
    let m = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(m.status(), 200);

    let c = WorkerClient::new(http.clone(), &addr, "tok");
    wait_stage(&c, AgentStage::Ready).await;
    assert_eq!(
        http.get(format!("http://{addr}/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // Summary before the run: 409.
    match c.summary().await {
        Err(benchrun_operator::client::SummaryError::Unreachable(e)) => {
            assert!(e.contains("409"), "{e}")
        }
        other => panic!("no summary yet must be asked again: {other:?}"),
    }

    let at = Utc::now() + chrono::Duration::milliseconds(500);
    let started = c.start(at).await.expect("start");
    assert_eq!(started.response.start_at, at);
    assert!(
        started.clock_offset_ms.abs() < 1000.0,
        "same host, tiny offset: {}",
        started.clock_offset_ms
    );
    // Resending the same time is fine (operator restart); another time is a conflict.
    c.start(at).await.expect("same start again");
    let e = c
        .start(at + chrono::Duration::seconds(1))
        .await
        .expect_err("conflict");
    assert!(e.contains("409"), "{e}");

    let st = wait_stage(&c, AgentStage::Done).await;
    assert_eq!(st.ops, 200);
    let (text, summary) = c.summary().await.expect("summary");
    assert!(text.contains("\"ops\""));
    let total: u64 = summary.ops.values().map(|o| o.count).sum();
    assert_eq!(total, 200);
    // It started at the given instant, not before.
    assert!(summary.started_at >= at, "{} < {at}", summary.started_at);
    assert!((summary.started_at - at).num_milliseconds() < 500);
    assert!(c.status().await.unwrap().summary_fetched);

    c.shutdown().await.expect("shutdown");
    let r = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("exits after shutdown");
    assert_eq!(r.unwrap(), Ok(()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn agent_reports_a_bad_target() {
    // A directory that cannot be created: /proc does not take new entries.
    let yaml = "target: file:///proc/benchrun-nope\ntotalOps: 10\nops: [{op: get}]\ndataset: {objects: 2, size: 4KiB}\n";
    let (_agent, addr, task) = spawn_agent(yaml, "tok").await;
    let c = WorkerClient::new(
        WorkerClient::http(std::time::Duration::from_secs(10)).expect("http client"),
        &addr,
        "tok",
    );
    let st = wait_stage(&c, AgentStage::Failed).await;
    let err = st.error.expect("error message");
    assert!(err.contains("/proc/benchrun-nope"), "{err}");
    assert!(c
        .start(Utc::now())
        .await
        .expect_err("cannot start")
        .contains("409"));
    let r = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("exits after linger");
    assert_eq!(r.unwrap(), Err(err));
}

/// A ready agent that no start request reaches fails after its start timeout, and says so
/// on `/v1/status`, where the operator reads it (and fails the worker naming it); a start
/// that comes after is refused.
#[tokio::test]
async fn an_agent_never_started_fails_after_its_start_timeout_and_says_so() {
    let dir = scratch("nostart");
    let yaml = format!(
        "target: file://{}\nduration: 5s\nops: [{{op: get}}]\nobjectSize: 4KiB\ndataset: {{objects: 2}}\n",
        dir.display()
    );
    let agent = Agent::new("w0", "tok", Arc::new(Metrics::new()))
        .with_start_timeout(Duration::from_secs(1));
    let addr = benchrun_worker::server::spawn(
        "127.0.0.1:0".parse().unwrap(),
        agent::router(agent.clone()),
    )
    .await
    .expect("bind")
    .to_string();
    let w = Workload::from_yaml(&yaml).expect("workload");
    let a = agent.clone();
    let task = tokio::spawn(async move {
        agent::drive(&a, w, Duration::from_secs(30), Duration::from_secs(30)).await
    });
    let c = WorkerClient::new(
        WorkerClient::http(Duration::from_secs(10)).expect("http client"),
        &addr,
        "tok",
    );
    let st = wait_stage(&c, AgentStage::Failed).await;
    let err = st.error.expect("error message");
    assert!(
        err.starts_with("no start time within 1s of being ready (--start-timeout)"),
        "{err}"
    );
    assert_eq!(st.start_at, None);
    let late = c.start(Utc::now()).await.expect_err("too late to start");
    assert!(late.contains("409"), "{late}");
    c.shutdown().await.expect("shutdown");
    let r = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("exits after shutdown");
    assert_eq!(r.unwrap(), Err(err));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn shutdown_interrupts_a_running_stage() {
    let dir = scratch("stop");
    let yaml = format!(
        "target: file://{}\nduration: 60s\nconcurrency: 1\nops: [{{op: stat}}]\ndataset: {{objects: 2, size: 4KiB}}\n",
        dir.display()
    );
    let (_agent, addr, task) = spawn_agent(&yaml, "tok").await;
    let c = WorkerClient::new(
        WorkerClient::http(std::time::Duration::from_secs(10)).expect("http client"),
        &addr,
        "tok",
    );
    wait_stage(&c, AgentStage::Ready).await;
    c.start(Utc::now()).await.expect("start");
    wait_stage(&c, AgentStage::Running).await;
    c.shutdown().await.expect("shutdown");
    let r = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("stops well before 60s");
    assert_eq!(r.unwrap(), Ok(()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A "worker" on 127.0.0.1 that answers every request with `body` (chunked when `chunked`,
/// so no Content-Length warns the client in advance).
async fn serve_body(body: Vec<u8>, chunked: bool) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = if chunked {
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_string()
                } else {
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len())
                };
                let _ = s.write_all(head.as_bytes()).await;
                if chunked {
                    for part in body.chunks(64 << 10) {
                        let _ = s
                            .write_all(format!("{:x}\r\n", part.len()).as_bytes())
                            .await;
                        let _ = s.write_all(part).await;
                        let _ = s.write_all(b"\r\n").await;
                    }
                    let _ = s.write_all(b"0\r\n\r\n").await;
                } else {
                    let _ = s.write_all(&body).await;
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn oversized_worker_answers_are_refused_before_parsing() {
    let big = vec![b' '; benchrun_operator::client::MAX_SUMMARY_BYTES + 1];
    for chunked in [false, true] {
        let addr = serve_body(big.clone(), chunked).await;
        let c = WorkerClient::new(
            WorkerClient::http(std::time::Duration::from_secs(10)).expect("http client"),
            &addr,
            "t",
        );
        match c.summary().await {
            Err(benchrun_operator::client::SummaryError::Invalid {
                message,
                body: None,
            }) => assert!(
                message.contains("larger than"),
                "chunked={chunked}: {message}"
            ),
            other => panic!("chunked={chunked}: {other:?}"),
        }
        let e = c.status().await.expect_err("a huge status is refused");
        assert!(e.contains("larger than"), "chunked={chunked}: {e}");
    }
}

#[tokio::test]
async fn an_unusable_summary_is_invalid_not_retried_and_its_body_kept() {
    use benchrun_operator::client::SummaryError;
    let addr = serve_body(br#"{"not": "a summary"}"#.to_vec(), false).await;
    let c = WorkerClient::new(
        WorkerClient::http(std::time::Duration::from_secs(10)).expect("http client"),
        &addr,
        "t",
    );
    match c.summary().await {
        Err(SummaryError::Invalid { message, body }) => {
            assert!(message.contains("not a summary"), "{message}");
            assert_eq!(body.as_deref(), Some(r#"{"not": "a summary"}"#));
        }
        other => panic!("{other:?}"),
    }
    // Nobody listening: unreachable, to be asked again.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let c = WorkerClient::new(
        WorkerClient::http(std::time::Duration::from_secs(10)).expect("http client"),
        &addr,
        "t",
    );
    assert!(matches!(
        c.summary().await,
        Err(SummaryError::Unreachable(_))
    ));
}

/// Workers that accept connections and never answer (a hung agent) cost one timeout together,
/// not one each: the calls go out through `fan_out` side by side, and the live worker's answer
/// is not held up behind them.
#[tokio::test]
async fn hung_workers_cost_one_timeout_not_one_each() {
    use benchrun_operator::client::fan_out;
    const HUNG: usize = 8;
    const TIMEOUT: Duration = Duration::from_millis(1000);
    let dir = scratch("fanout");
    let yaml = format!(
        "target: file://{}\ntotalOps: 50\nconcurrency: 1\nops: [{{op: get, weight: 1}}]\nobjectSize: 4KiB\ndataset: {{objects: 4}}\n",
        dir.display()
    );
    let (_agent, live, _task) = spawn_agent(&yaml, "tok").await;
    // Hung agents: the listeners stay open (connections are accepted by the kernel) and
    // nothing ever reads or answers.
    let mut hung = Vec::new();
    let mut addrs = vec![live.clone()];
    for _ in 0..HUNG {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(l.local_addr().unwrap().to_string());
        hung.push(l);
    }
    let http = WorkerClient::http(TIMEOUT).expect("http client");
    let clients: Vec<_> = addrs
        .iter()
        .map(|a| (a.clone(), WorkerClient::new(http.clone(), a, "tok")))
        .collect();
    let t0 = std::time::Instant::now();
    let answers = fan_out(
        clients,
        64,
        |(addr, c)| async move { (addr, c.status().await) },
    )
    .await;
    let took = t0.elapsed();
    assert_eq!(answers.len(), HUNG + 1);
    for (addr, r) in &answers {
        if *addr == live {
            assert_eq!(r.as_ref().expect("the live worker answers").worker_id, "w0");
        } else {
            let e = r.as_ref().expect_err("a hung worker times out");
            assert!(e.contains("timed out"), "{e}");
        }
    }
    // One after another the hung workers alone would take HUNG timeouts (8 s).
    assert!(
        took < TIMEOUT * 4,
        "{HUNG} hung workers took {took:?} at parallelism 64"
    );
    drop(hung);
}

/// A summary as a worker serves it.
fn summary_text() -> String {
    let s = benchrun_api::Summary {
        target: "file:///data".into(),
        workers: 1,
        worker_ids: vec!["w0".into()],
        started_at: chrono::DateTime::UNIX_EPOCH,
        elapsed_seconds: 1.0,
        stopped_by: "duration".into(),
        ..Default::default()
    };
    serde_json::to_string(&s).expect("json")
}

/// How a "worker" on 127.0.0.1 breaks its first answer.
#[derive(Clone, Copy)]
enum Cut {
    /// Half the body, then the connection reset (RST).
    Reset,
    /// Half the body, then nothing (the client's total timeout runs out mid-body).
    Stall,
}

/// A "worker" that breaks its first answer (half the body, then `cut`) and serves `body`
/// whole on every later connection; the connections it accepted, counted.
async fn serve_cut_once(body: String, cut: Cut) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut s, _)) = listener.accept().await {
            let n = count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).await;
            if n > 0 {
                let _ = s.write_all(body.as_bytes()).await;
                continue;
            }
            let _ = s.write_all(&body.as_bytes()[..body.len() / 2]).await;
            let _ = s.flush().await;
            match cut {
                Cut::Reset => {
                    // SO_LINGER 0: closing sends a reset, not an orderly end.
                    s.set_zero_linger().expect("linger");
                    drop(s);
                }
                // Kept open and silent: the client's timeout ends the read.
                Cut::Stall => held.push(s),
            }
        }
    });
    (addr, accepted)
}

/// A summary whose answer is cut mid-body (a reset, or the call's timeout) is a network
/// error to retry, not an invalid summary: the next read, on a new connection, collects it.
#[tokio::test]
async fn a_summary_cut_mid_body_is_retried_and_collected() {
    use benchrun_operator::client::SummaryError;
    use std::sync::atomic::Ordering;
    let text = summary_text();
    for (cut, what) in [(Cut::Reset, "reset"), (Cut::Stall, "timeout")] {
        let (addr, accepted) = serve_cut_once(text.clone(), cut).await;
        let c = WorkerClient::new(
            WorkerClient::http(Duration::from_secs(1)).expect("http client"),
            &addr,
            "t",
        );
        match c.summary().await {
            Err(e @ SummaryError::Interrupted(_)) => {
                assert!(e.is_retryable(), "{what}: {e}");
                assert!(e.to_string().contains("reading summary"), "{what}: {e}");
            }
            other => panic!("{what}: a cut body must be retried, got {other:?}"),
        }
        let (kept, summary) = c
            .summary()
            .await
            .unwrap_or_else(|e| panic!("{what}: the second read: {e}"));
        assert_eq!(kept, text, "{what}");
        assert_eq!(summary.worker_ids, ["w0"], "{what}");
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "{what}: one connection each"
        );
    }
}
