//! Training and checkpoint workloads through real agents and the operator's client, on
//! 127.0.0.1 (no cluster): two agents, worker 0 and 1 of 2, each prepare before the start
//! instant (the training dataset, split between them), become ready, start at the one instant
//! the operator sends, and serve summaries whose exact merge covers the whole run.

use std::sync::Arc;
use std::time::Duration;

use benchrun_api::agent::{AgentStage, AgentStatus};
use benchrun_api::stats::Summary;
use benchrun_api::Workload;
use benchrun_operator::client::WorkerClient;
use benchrun_worker::agent::{self, Agent};
use benchrun_worker::Metrics;
use chrono::Utc;

const TOKEN: &str = "tok";

struct Running {
    client: WorkerClient,
    addr: String,
    task: tokio::task::JoinHandle<Result<(), String>>,
}

/// Worker `index` of `count` running `yaml`, reached over HTTP.
async fn spawn_agent(yaml: &str, index: u32, count: u32) -> Running {
    let agent =
        Agent::new(&format!("w{index}"), TOKEN, Arc::new(Metrics::new())).with_rank(index, count);
    let addr = benchrun_worker::server::spawn(
        "127.0.0.1:0".parse().unwrap(),
        agent::router(agent.clone()),
    )
    .await
    .expect("bind");
    let w = Workload::from_yaml(yaml).expect("workload");
    let task = tokio::spawn(async move {
        agent::drive(
            &agent,
            w,
            Duration::from_secs(60),
            Duration::from_millis(200),
        )
        .await
    });
    let http = WorkerClient::http(Duration::from_secs(10)).expect("http client");
    Running {
        client: WorkerClient::new(http, &addr.to_string(), TOKEN),
        addr: addr.to_string(),
        task,
    }
}

/// Wait (bounded: 60 s) for the agent's stage; a failure on the way is shown.
async fn wait_stage(c: &WorkerClient, want: AgentStage) -> AgentStatus {
    let mut last = None;
    for _ in 0..1200 {
        if let Ok(st) = c.status().await {
            if st.stage == want {
                return st;
            }
            assert_ne!(st.stage, AgentStage::Failed, "agent failed: {st:?}");
            last = Some(st);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("agent never reached {want:?}: {last:?}");
}

/// Both agents prepared and ready, started at one instant, done: their summaries.
async fn run_two(yaml: &str) -> Vec<(Summary, String)> {
    let agents = vec![spawn_agent(yaml, 0, 2).await, spawn_agent(yaml, 1, 2).await];
    for a in &agents {
        let st = wait_stage(&a.client, AgentStage::Ready).await;
        assert_eq!(st.start_at, None, "ready before any start time");
        // The kubelet's readiness probe agrees.
        assert_eq!(get(&a.addr, "/readyz").await.0, 200);
    }
    let at = Utc::now() + chrono::Duration::milliseconds(400);
    for a in &agents {
        a.client.start(at).await.expect("start");
    }
    let mut out = vec![];
    for a in agents {
        wait_stage(&a.client, AgentStage::Done).await;
        let (_, metrics) = get(&a.addr, "/metrics").await;
        assert!(metrics.contains("benchrun_stage 5"), "{metrics}");
        let (_, summary) = a.client.summary().await.expect("summary");
        // The measured part began at the start instant, not at the end of the prepare.
        assert!(summary.started_at >= at, "{} < {at}", summary.started_at);
        assert!(
            (summary.started_at - at).num_milliseconds() < 1000,
            "started {} after the instant",
            summary.started_at - at
        );
        a.client.shutdown().await.expect("shutdown");
        let r = tokio::time::timeout(Duration::from_secs(10), a.task)
            .await
            .expect("exits after shutdown");
        assert_eq!(r.expect("no panic"), Ok(()));
        out.push((summary, metrics));
    }
    out
}

/// An unauthenticated GET of the agent's `path`: status code and body.
async fn get(addr: &str, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{addr}{path}"))
        .await
        .expect("GET");
    let code = r.status().as_u16();
    (code, r.text().await.expect("body"))
}

/// The value of the unlabelled series `name` in a Prometheus exposition.
fn series(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Two agents of one training run: each writes half of the dataset before the start instant,
/// and from it each epoch reads every sample once over both of them; the merged summary has
/// both workers' AU, and the dataset's page-cache residency once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_run_a_training_workload_from_one_start_instant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = format!(
        "target: file://{}\nops: [{{op: get}}]\nseed: 7\ntraining:\n  samples: 60\n  sampleSize: 8KiB\n  batchSize: 3\n  readers: 1\n  computeTime: 1ms\n  epochs: 2\n  minAU: 1\n",
        dir.path().display()
    );
    let (parts, metrics): (Vec<_>, Vec<_>) = run_two(&yaml).await.into_iter().unzip();
    // Each worker's /metrics counted its sample reads and its accelerator's steps: 30
    // samples a epoch in batches of 3, two epochs.
    for m in &metrics {
        assert!(m.contains("benchrun_ops_total{op=\"get\"} 60"), "{m}");
        assert_eq!(series(m, "benchrun_training_data_wait_seconds_count"), 20.0);
        let (compute, step) = (
            series(m, "benchrun_training_compute_seconds_total"),
            series(m, "benchrun_training_step_seconds_total"),
        );
        assert!(compute >= 0.02 && compute <= step, "{compute} {step}");
    }
    // The dataset was prepared once, split between the workers: 60 one-sample files.
    assert_eq!(files_under(dir.path()).len(), 60);
    for (i, p) in parts.iter().enumerate() {
        let t = p.training.as_ref().expect("training figures");
        assert_eq!(t.workers.len(), 1);
        assert!(t.workers.contains_key(&format!("w{i}")), "{:?}", t.workers);
        assert_eq!(t.epochs.len(), 2);
        // Half of every epoch each: the order is split over both workers.
        for e in &t.epochs {
            assert_eq!(e.samples, 30, "worker {i} epoch {}", e.epoch);
            assert!(e.complete);
        }
        let prep = p.prepare.as_ref().expect("prepare stage figures");
        assert_eq!(prep.objects, 30, "worker {i} wrote its half of the dataset");
        // Each measured the whole dataset's page cache (mincore), not its half.
        let c = t
            .cache
            .as_ref()
            .expect("page-cache residency of local files");
        assert_eq!(c.bytes, t.dataset_bytes, "worker {i}");
    }
    let merged = Summary::merge(&parts).expect("merge");
    let t = merged.training.expect("merged training figures");
    // One directory of one machine read by both: its residency counted once.
    assert_eq!(t.cache_targets.len(), 1, "{:?}", t.cache_targets);
    assert_eq!(t.cache_targets.values().next().map(|v| v.workers), Some(2));
    let c = t.cache.as_ref().expect("merged residency");
    assert_eq!(
        c.bytes, t.dataset_bytes,
        "the shared dataset once, not twice"
    );
    assert!(
        c.resident_at_start <= c.bytes && c.resident_at_end <= c.bytes,
        "{c:?}"
    );
    assert_eq!(c.dropped, 2, "both dropped the cache before their epochs");
    assert_eq!(t.accelerators, 2);
    assert_eq!(
        t.workers.keys().map(String::as_str).collect::<Vec<_>>(),
        ["w0", "w1"]
    );
    for e in &t.epochs {
        assert_eq!(e.samples, 60, "epoch {}: every sample once", e.epoch);
        assert_eq!(e.au.accelerators, 2);
    }
    assert_eq!(t.passed(), Some(true));
}

/// Two agents of one checkpoint run (2 ranks each, 4 in all): every rank saves and restores
/// its shard from the start instant; the merged save time is the slowest of the four ranks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_run_a_checkpoint_workload_from_one_start_instant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = format!(
        "target: file://{}\nops: [{{op: put}}]\ncheckpoint: {{totalSize: 8MiB, ranks: 4, ranksPerWorker: 2, repeats: 2}}\n",
        dir.path().display()
    );
    let parts: Vec<Summary> = run_two(&yaml).await.into_iter().map(|(s, _)| s).collect();
    let mut slowest = [0u64; 2];
    for (i, p) in parts.iter().enumerate() {
        let c = p.checkpoint.as_ref().expect("checkpoint figures");
        assert_eq!(c.repeats.len(), 2);
        for r in &c.repeats {
            let ranks: Vec<u32> = r.ranks.iter().map(|x| x.rank).collect();
            assert_eq!(
                ranks,
                [2 * i as u32, 2 * i as u32 + 1],
                "worker {i}'s ranks"
            );
            assert_eq!(r.errors(), 0, "{:?}", r.ranks);
            let s = &mut slowest[r.repeat as usize];
            *s = (*s).max(r.save_us.expect("saved"));
        }
    }
    let merged = Summary::merge(&parts).expect("merge");
    let c = merged.checkpoint.expect("merged checkpoint figures");
    for r in &c.repeats {
        assert_eq!(r.ranks.len(), 4);
        assert_eq!(r.save_us, Some(slowest[r.repeat as usize]));
        assert!(r.restore_us.is_some());
        assert_eq!(r.bytes(), 8 << 20);
    }
    assert_eq!(c.save.count(), 8, "4 ranks x 2 repeats");
    // Every shard is removed after the run (dataset.cleanup, the default).
    assert!(files_under(dir.path()).is_empty());
}

/// Two agents of one checkpoint run with `restoreShift: 2` (= ranksPerWorker): every rank
/// restores the shard the other worker saved, the agents meeting between save and restore
/// through markers named after the start instant the operator sent; over 2 repeats no rank
/// fails (no shard read before it was whole), the live metrics counted each worker's saves
/// and restores, and shards and markers are all removed after the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_restore_each_others_checkpoint_shards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = format!(
        "target: file://{}\nops: [{{op: put}}]\ncheckpoint: {{totalSize: 8MiB, ranks: 4, ranksPerWorker: 2, repeats: 2, restoreShift: 2}}\n",
        dir.path().display()
    );
    let (parts, metrics): (Vec<Summary>, Vec<String>) = run_two(&yaml).await.into_iter().unzip();
    for (i, p) in parts.iter().enumerate() {
        let c = p.checkpoint.as_ref().expect("checkpoint figures");
        assert_eq!(c.repeats.len(), 2);
        for r in &c.repeats {
            assert_eq!(r.errors(), 0, "{:?}", r.ranks);
            for x in &r.ranks {
                // Worker 0's ranks 0, 1 restore 2, 3 (worker 1's) and the other way round.
                assert_eq!(x.restored_from, Some((x.rank + 2) % 4), "worker {i}: {x:?}");
                assert!(x.restore_us.is_some(), "{x:?}");
            }
        }
        assert!(
            metrics[i].contains("benchrun_ops_total{op=\"put\"} 4")
                && metrics[i].contains("benchrun_ops_total{op=\"get\"} 4"),
            "2 ranks x 2 repeats of saves and restores: {}",
            metrics[i]
        );
    }
    assert!(
        files_under(dir.path()).is_empty(),
        "{:?}",
        files_under(dir.path())
    );
}
