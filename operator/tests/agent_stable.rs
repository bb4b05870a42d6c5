//! `stopWhenStable` decided by the run: a real agent (the worker's server and engine) on
//! 127.0.0.1 with the operator's client. With `--stable-by-run` the agent counts its seconds
//! for the operator and never stops on its own; `POST /v1/stop-at` ends its measured stage at
//! the instant given (at once for one already past), and the summary says why and when.
//! Without it, the agent stops on its own stability as a standalone worker does.

use std::sync::Arc;
use std::time::Duration;

use benchrun_api::agent::{AgentStage, AgentStatus};
use benchrun_api::stable::{self, StableDecision};
use benchrun_api::{Summary, Workload};
use benchrun_operator::client::WorkerClient;
use benchrun_worker::agent::{self, Agent};
use benchrun_worker::Metrics;
use chrono::{DateTime, Utc};

/// A steady load: 200 PUTs/s (open loop) for at most 60 s, steady after a 2 s window within
/// 50%.
fn workload(dir: &std::path::Path) -> Workload {
    Workload::from_yaml(&format!(
        "target: file://{}\nduration: 60s\nconcurrency: 2\nrateLimit: 200\nops: [{{op: put}}]\nobjectSize: 4KiB\ndataset: {{objects: 0}}\nwrite: {{maxObjects: 16}}\nstopWhenStable: {{window: 2s, bandPercent: 50}}\n",
        dir.display()
    ))
    .expect("workload")
}

struct Running {
    client: WorkerClient,
    task: tokio::task::JoinHandle<Result<(), String>>,
    dir: std::path::PathBuf,
}

async fn spawn(name: &str, by_run: bool) -> Running {
    let dir = std::env::temp_dir().join(format!(
        "benchrun-agent-stable-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let agent = Agent::new("w0", "tok", Arc::new(Metrics::new())).with_stable_by_run(by_run);
    let addr = benchrun_worker::server::spawn(
        "127.0.0.1:0".parse().unwrap(),
        agent::router(agent.clone()),
    )
    .await
    .expect("bind");
    let w = workload(&dir);
    let task = tokio::spawn(async move {
        agent::drive(
            &agent,
            w,
            Duration::from_secs(30),
            Duration::from_millis(200),
        )
        .await
    });
    let client = WorkerClient::new(
        WorkerClient::http(Duration::from_secs(10)).expect("http client"),
        &addr.to_string(),
        "tok",
    );
    Running { client, task, dir }
}

/// Poll the agent's status until `pred` holds, at most `bound`.
async fn wait_for(
    c: &WorkerClient,
    bound: Duration,
    what: &str,
    pred: impl Fn(&AgentStatus) -> bool,
) -> AgentStatus {
    let until = tokio::time::Instant::now() + bound;
    loop {
        let st = c.status().await;
        if let Ok(st) = &st {
            if pred(st) {
                return st.clone();
            }
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{what}: not within {bound:?}: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn start(c: &WorkerClient) -> DateTime<Utc> {
    wait_for(c, Duration::from_secs(20), "ready", |s| {
        s.stage == AgentStage::Ready
    })
    .await;
    let at = Utc::now() + chrono::Duration::milliseconds(300);
    c.start(at).await.expect("start");
    at
}

async fn finish(r: Running) -> Summary {
    let c = &r.client;
    wait_for(c, Duration::from_secs(30), "done", |s| {
        s.stage == AgentStage::Done
    })
    .await;
    let (_, summary) = c.summary().await.expect("summary");
    c.shutdown().await.expect("shutdown");
    let exit = tokio::time::timeout(Duration::from_secs(10), r.task)
        .await
        .expect("exits after shutdown");
    assert_eq!(exit.unwrap(), Ok(()));
    let _ = std::fs::remove_dir_all(&r.dir);
    summary
}

fn decision(steady_at: DateTime<Utc>) -> StableDecision {
    StableDecision {
        decided_by: stable::BY_RUN.into(),
        workers: 4,
        steady_at,
        figures: stable::StableFigures {
            window_seconds: 2,
            band_percent: 50.0,
            mean_ops_per_second: 800.0,
            min_ops_per_second: 790.0,
            max_ops_per_second: 810.0,
        },
    }
}

/// The run decides: steady seconds go by and the agent keeps measuring; the stop instant
/// ends its stage there, the same instant resent is fine, another is refused, and the
/// summary's window ends at the instant and says the run found it steady.
#[tokio::test]
async fn a_stop_instant_ends_the_stage_there_and_the_summary_says_so() {
    let r = spawn("at", true).await;
    let c = &r.client;
    let started = start(c).await;
    // Four seconds counted, far past a steady 2 s window: a worker on its own would have
    // stopped; this one is still running, and the operator's rule finds it steady.
    let st = wait_for(c, Duration::from_secs(20), "4 seconds counted", |s| {
        s.seconds.as_ref().is_some_and(|n| n.end() >= 4)
    })
    .await;
    assert_eq!(st.stage, AgentStage::Running, "{st:?}");
    let seconds = st.seconds.expect("seconds");
    let spec = workload(&r.dir).stop_when_stable.expect("stopWhenStable");
    let (_, figures) = stable::decide(&spec, std::slice::from_ref(&seconds)).expect("steady");
    assert!(
        (100.0..=300.0).contains(&figures.mean_ops_per_second),
        "about 200 ops/s: {figures:?} from {seconds:?}"
    );

    let at = Utc::now() + chrono::Duration::milliseconds(1500);
    let d = decision(Utc::now());
    assert_eq!(c.stop_at(at, &d).await.expect("stop-at"), at);
    c.stop_at(at, &d).await.expect("the same instant resent");
    let e = c
        .stop_at(at + chrono::Duration::seconds(1), &d)
        .await
        .expect_err("another instant");
    assert!(e.contains("409"), "{e}");
    assert_eq!(c.status().await.expect("status").stop_at, Some(at));

    let s = finish(r).await;
    assert_eq!(s.stable.as_ref(), Some(&d), "{}", s.stopped_by);
    assert_eq!(s.stopped_by, d.figures.reason());
    assert!(!s.partial);
    // The window ends at the instant: rates are over [startedAt, stopAt].
    let stopped_at = s.stopped_at.expect("stoppedAt");
    let off = (stopped_at - at).num_milliseconds().abs();
    assert!(off <= 50, "stopped at {stopped_at}, told {at}");
    let window = (at - s.started_at).num_milliseconds() as f64 / 1000.0;
    assert!(
        (s.elapsed_seconds - window).abs() < 0.05,
        "elapsed {} for a window of {window}",
        s.elapsed_seconds
    );
    assert!(s.started_at >= started);
    let ops = s.total().count;
    let rate = s.report.values().map(|r| r.ops_per_sec).sum::<f64>();
    assert!((rate - ops as f64 / s.elapsed_seconds).abs() < 1e-6);
    assert!(s.elapsed_seconds < 20.0, "well before its 60 s");
}

/// An instant already past (the request came late): the stage ends at once.
#[tokio::test]
async fn a_stop_instant_already_past_ends_the_stage_at_once() {
    let r = spawn("past", true).await;
    let c = &r.client;
    start(c).await;
    wait_for(c, Duration::from_secs(20), "2 seconds counted", |s| {
        s.seconds.as_ref().is_some_and(|n| n.end() >= 2)
    })
    .await;
    let told = Utc::now();
    let d = decision(told);
    c.stop_at(told - chrono::Duration::seconds(30), &d)
        .await
        .expect("stop-at");
    let s = finish(r).await;
    assert_eq!(s.stable, Some(d));
    let stopped_at = s.stopped_at.expect("stoppedAt");
    assert!(
        stopped_at >= told - chrono::Duration::milliseconds(50)
            && stopped_at <= told + chrono::Duration::seconds(2),
        "ended when told ({told}), not 30 s before nor at its duration: {stopped_at}"
    );
}

/// A stop before the start is refused (there is no stage to end).
#[tokio::test]
async fn a_stop_before_the_start_is_refused() {
    let r = spawn("early", true).await;
    let c = &r.client;
    wait_for(c, Duration::from_secs(20), "ready", |s| {
        s.stage == AgentStage::Ready
    })
    .await;
    let e = c
        .stop_at(Utc::now(), &decision(Utc::now()))
        .await
        .expect_err("not running");
    assert!(e.contains("409"), "{e}");
    c.shutdown().await.expect("shutdown");
    let _ = tokio::time::timeout(Duration::from_secs(10), r.task).await;
    let _ = std::fs::remove_dir_all(&r.dir);
}

/// Without `--stable-by-run` (a one-worker run, or an operator that does not decide), the
/// agent stops on its own stability, as a standalone worker does, and says it decided.
#[tokio::test]
async fn an_agent_left_alone_stops_on_its_own_stability() {
    let r = spawn("alone", false).await;
    start(&r.client).await;
    let s = finish(r).await;
    let d = s.stable.clone().expect("stable");
    assert_eq!(d.decided_by, stable::BY_WORKER);
    assert_eq!(d.workers, 1);
    assert!(s.stopped_by.starts_with("stable: "), "{}", s.stopped_by);
    assert_eq!(s.stopped_by, d.figures.reason());
    assert!(s.elapsed_seconds < 20.0, "{}", s.elapsed_seconds);
}

/// Two real agents as a run of two workers: started at one instant, decided on their merged
/// seconds with the operator's rule, told one stop instant; their stages end together, and
/// the merged result is their ops over the one window.
#[tokio::test]
async fn two_agents_told_one_instant_end_together_and_merge_exactly() {
    let (a, b) = (spawn("two-a", true).await, spawn("two-b", true).await);
    for r in [&a, &b] {
        wait_for(&r.client, Duration::from_secs(20), "ready", |s| {
            s.stage == AgentStage::Ready
        })
        .await;
    }
    let at = Utc::now() + chrono::Duration::milliseconds(300);
    a.client.start(at).await.expect("start a");
    b.client.start(at).await.expect("start b");
    let spec = workload(&a.dir).stop_when_stable.expect("stopWhenStable");
    // Poll both, as the operator does, until their merged seconds hold a steady window.
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    let (end, figures) = loop {
        let sa = a.client.status().await.expect("status a").seconds;
        let sb = b.client.status().await.expect("status b").seconds;
        if let (Some(sa), Some(sb)) = (sa, sb) {
            if let Some(found) = stable::decide(&spec, &[sa, sb]) {
                break found;
            }
        }
        assert!(tokio::time::Instant::now() < until, "never steady");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(end >= 2, "a full 2 s window: {end}");
    assert!(
        (300.0..=500.0).contains(&figures.mean_ops_per_second),
        "two workers at 200 ops/s: {figures:?}"
    );
    let stop = Utc::now() + chrono::Duration::seconds(1);
    let d = StableDecision {
        decided_by: stable::BY_RUN.into(),
        workers: 2,
        steady_at: at + chrono::Duration::seconds(end as i64),
        figures,
    };
    a.client.stop_at(stop, &d).await.expect("stop a");
    b.client.stop_at(stop, &d).await.expect("stop b");
    let parts = vec![finish(a).await, finish(b).await];
    for p in &parts {
        assert_eq!(p.stable.as_ref(), Some(&d), "{}", p.stopped_by);
        let off = (p.stopped_at.expect("stoppedAt") - stop)
            .num_milliseconds()
            .abs();
        assert!(
            off <= 50,
            "{:?} ended {off} ms from the instant",
            p.worker_ids
        );
    }
    let merged = Summary::merge(&parts).expect("merge");
    assert_eq!(merged.stopped_by, d.figures.reason());
    assert_eq!(merged.stable, Some(d));
    let ops: u64 = parts.iter().map(|p| p.total().count).sum();
    assert_eq!(merged.total().count, ops);
    for p in &parts {
        assert!((p.elapsed_seconds - merged.elapsed_seconds).abs() < 0.05);
    }
    let rate: f64 = merged.report.values().map(|r| r.ops_per_sec).sum();
    assert!((rate - ops as f64 / merged.elapsed_seconds).abs() < 1e-6);
}
