//! The engine as a library, on real files: open-loop rate limiting, coordinated-omission
//! accounting, error counting, the error budget and the live `/metrics` endpoint.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use benchrun_worker::spec::OpKind;
use benchrun_worker::targets::{
    self, ChunkPlan, GetOutcome, GetRequest, ListOutcome, ObjectInfo, Payload, Target, TargetError,
};
use benchrun_worker::{Engine, Metrics, Workload};

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

fn workload(dir: &std::path::Path, rest: &str) -> Workload {
    Workload::from_yaml(&format!("target: file://{}\n{rest}", dir.display()))
        .expect("valid workload")
}

/// A real file target, observed: each GET is delayed by `delay` (a stalled disk, on demand)
/// and its key recorded.
#[derive(Debug)]
struct Observed {
    inner: Arc<dyn Target>,
    delay: Duration,
    reads: std::sync::Mutex<Vec<String>>,
}

impl Observed {
    fn new(inner: Arc<dyn Target>, delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner,
            delay,
            reads: Default::default(),
        })
    }
}

#[async_trait]
impl Target for Observed {
    async fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
        self.reads.lock().unwrap().push(key.to_string());
        tokio::time::sleep(self.delay).await;
        self.inner.get(key, req).await
    }
    async fn put(&self, key: &str, data: Payload) -> Result<u32, TargetError> {
        self.inner.put(key, data).await
    }
    async fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError> {
        self.inner.stat(key).await
    }
    async fn list(&self, prefix: &str) -> Result<ListOutcome, TargetError> {
        self.inner.list(prefix).await
    }
    async fn delete(&self, key: &str) -> Result<(), TargetError> {
        self.inner.delete(key).await
    }
    async fn check(&self) -> Result<(), TargetError> {
        self.inner.check().await
    }
    fn default_plan(&self) -> ChunkPlan {
        self.inner.default_plan()
    }
}

/// Run `w` on `target` (prepare + measured stage).
async fn run_on(w: Workload, target: Arc<dyn Target>) -> benchrun_worker::Summary {
    let engine = Engine::with_target(w, target, Arc::new(Metrics::new()), "t").unwrap();
    let ds = engine.prepare().await.unwrap();
    engine.run(&ds, None, std::future::pending()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_paces_operations() {
    let dir = scratch();
    let w = workload(dir.path(), "duration: 2s\nconcurrency: 4\nrateLimit: 100\nops: [{op: stat}]\ndataset: {objects: 4, size: 4KiB}\n");
    let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
        .await
        .unwrap();
    let ds = engine.prepare().await.unwrap();
    let s = engine.run(&ds, None, std::future::pending()).await.unwrap();
    let n = s.ops[&OpKind::Stat].count;
    // Exact whatever the machine's load: 200 tickets were due in 2 s, and every one either
    // ran (and was counted) or is reported as never started.
    let ol = s.open_loop.as_ref().expect("open-loop figures");
    assert_eq!((ol.due, ol.started), (200, n), "{ol:?}");
    assert_eq!(n + ol.not_started(), 200, "{ol:?}");
    assert!(n > 0, "{ol:?}");
    // The scheduler's lag, in bands that account for every started op.
    let b = &ol.lag_within;
    assert!(b.us10 <= b.us100 && b.us100 <= b.ms1, "{ol:?}");
    assert_eq!(b.ms1 + ol.late, ol.started, "{ol:?}");
    // Paced, not bursty: no op starts before its ticket is due, so the first second can
    // finish at most the 100 tickets due in it (a busy machine may finish fewer and catch up
    // later; it can never run ahead). An unpaced run would finish all 200 at once.
    let first = s.timeline.first().map_or(0, |t| t.ops);
    assert!(
        first <= 100,
        "second 0 finished {first} ops: ran ahead of the rate"
    );
    assert!(
        s.elapsed_seconds >= 1.9,
        "a paced run lasts its 2 s: {}",
        s.elapsed_seconds
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_latency_includes_queueing_behind_a_stall() {
    let dir = scratch();
    // One task, 50 ms per GET, asked for 100 GET/s: the target can do 20/s, so requests queue.
    let w = workload(dir.path(), "duration: 1s\nconcurrency: 1\nrateLimit: 100\nops: [{op: get}]\ndataset: {objects: 2, size: 4KiB}\n");
    let slow = Observed::new(targets::open(&w).await.unwrap(), Duration::from_millis(50));
    let s = run_on(w, slow).await;
    let get = &s.report[&OpKind::Get];
    assert!(get.count <= 100, "{get:?}");
    // Measured from each op's intended start, latency grows with the backlog: the later
    // operations waited hundreds of milliseconds. A closed-loop tool would report ~50 ms.
    assert!(
        get.p50_ms > 150.0,
        "median must include queueing delay: {get:?}"
    );
    assert!(get.max_ms > 400.0, "the last ops waited most: {get:?}");
    assert!(get.p50_ms > 3.0 * 50.0, "{get:?}");
    // Time to first byte runs from the same instant (the intended start): the backlog is in
    // it too, and it never exceeds the latency of the same ops. (From when the target was
    // called instead, it read well under 1 ms here.)
    let ttfb = get.ttfb_p50_ms.expect("GET records TTFB");
    assert!(ttfb > 150.0, "TTFB must include queueing delay: {get:?}");
    assert!(ttfb <= get.p50_ms, "{get:?}");
    assert!(get.ttfb_p99_ms.unwrap() <= get.p99_ms, "{get:?}");
    // The schedule's side, apart from latency: 100 ops offered, at most 1 s / 50 ms started,
    // every one after the first started behind the one before it, the last ones ~0.5 s late.
    let ol = s.open_loop.as_ref().expect("open-loop figures");
    assert_eq!((ol.due, ol.started), (100, get.count), "{ol:?}");
    assert!(ol.started <= 21 && ol.not_started() >= 79, "{ol:?}");
    assert!(ol.late >= ol.started - 1, "{ol:?}");
    assert!(ol.lag_max_us > 400_000, "{ol:?}");
    let text = benchrun_worker::report::table(&s);
    let line = format!("{} due, {} never started", ol.due, ol.not_started());
    assert!(
        text.contains("open loop: offered") && text.contains(&line),
        "{text}"
    );

    // The same stall, closed loop: latency is the service time.
    let w = workload(
        dir.path(),
        "duration: 1s\nconcurrency: 1\nops: [{op: get}]\ndataset: {objects: 2, size: 4KiB}\n",
    );
    let slow = Observed::new(targets::open(&w).await.unwrap(), Duration::from_millis(50));
    let s = run_on(w, slow).await;
    let get = &s.report[&OpKind::Get];
    // At least the 50 ms stall, and far from the open loop's queueing (> 150 ms above); the
    // upper bound leaves a busy machine 100 ms of scheduling delay.
    assert!((50.0..150.0).contains(&get.p50_ms), "{get:?}");
    assert!(s.open_loop.is_none(), "closed loop offers no schedule");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_errors_are_counted_by_kind_and_the_run_goes_on() {
    let dir = scratch();
    let w = workload(dir.path(), "totalOps: 200\nconcurrency: 2\nops: [{op: get}, {op: put}]\nobjectSize: 1KiB\ndataset: {objects: 3, size: 1KiB}\n");
    let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
        .await
        .unwrap();
    let ds = engine.prepare().await.unwrap();
    // Remove the dataset behind the engine's back: every GET now fails with not_found.
    std::fs::remove_dir_all(dir.path().join("benchrun")).unwrap();
    let s = engine.run(&ds, None, std::future::pending()).await.unwrap();
    let get = &s.ops[&OpKind::Get];
    assert!(get.errors > 50 && get.errors == get.count, "{get:?}");
    assert_eq!(get.errors_by_kind.get("not_found"), Some(&get.errors));
    assert_eq!(s.ops[&OpKind::Put].errors, 0, "PUTs still work");
    assert_eq!(s.ops[&OpKind::Get].count + s.ops[&OpKind::Put].count, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_budget_stops_the_run_with_a_reason() {
    let dir = scratch();
    let w = workload(dir.path(), "duration: 30s\nops: [{op: get}]\ndataset: {objects: 3, size: 1KiB}\nerrorBudget: {maxErrors: 10}\n");
    let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
        .await
        .unwrap();
    let ds = engine.prepare().await.unwrap();
    std::fs::remove_dir_all(dir.path().join("benchrun")).unwrap();
    let s = engine.run(&ds, None, std::future::pending()).await.unwrap();
    assert!(
        s.stopped_by
            .contains("errorBudget: 11 errors exceed maxErrors 10"),
        "{}",
        s.stopped_by
    );
    assert!(s.elapsed_seconds < 5.0, "stopped early, not after 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_live_counters() {
    let dir = scratch();
    let w = workload(
        dir.path(),
        "totalOps: 50\nops: [{op: put}]\nobjectSize: 2KiB\ndataset: {objects: 0}\n",
    );
    let metrics = Arc::new(Metrics::new());
    let addr = benchrun_worker::server::spawn(
        "127.0.0.1:0".parse().unwrap(),
        benchrun_worker::server::router(metrics.clone()),
    )
    .await
    .unwrap();
    let engine = Engine::open(w, metrics, "t").await.unwrap();
    assert_eq!(
        http_get(addr, "/readyz").await.0,
        503,
        "not ready before prepare"
    );
    let ds = engine.prepare().await.unwrap();
    assert_eq!(http_get(addr, "/readyz").await.0, 200);
    engine.run(&ds, None, std::future::pending()).await.unwrap();
    let (code, body) = http_get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(body.contains("benchrun_ops_total{op=\"put\"} 50"), "{body}");
    assert!(
        body.contains(&format!("benchrun_bytes_total{{op=\"put\"}} {}", 50 * 2048)),
        "{body}"
    );
    assert!(
        body.contains("benchrun_op_duration_seconds_count{op=\"put\"} 50"),
        "{body}"
    );
    assert_eq!(http_get(addr, "/healthz").await.0, 200);
}

/// A minimal HTTP/1.0 GET, so the test needs no HTTP client crate.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_access_walks_the_dataset_in_key_order() {
    let dir = scratch();
    let w = workload(dir.path(), "totalOps: 10\nconcurrency: 1\nops: [{op: get}]\ndataset: {objects: 4, size: 4KiB, access: sequential}\n");
    let rec = Observed::new(targets::open(&w).await.unwrap(), Duration::ZERO);
    run_on(w, rec.clone()).await;
    let reads = rec.reads.lock().unwrap().clone();
    let want: Vec<String> = (0..10)
        .map(|i| format!("benchrun/obj-{:08}", i % 4))
        .collect();
    assert_eq!(reads, want);
}

/// `rateLimit: 0.001` (the schema's minimum) with a small `totalOps`: the second ticket is due
/// 1000 s after the first. A stop while the task sleeps for it ends the run within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_a_long_wait_for_the_next_ticket_ends_the_run_at_once() {
    let dir = scratch();
    let w = workload(
        dir.path(),
        "totalOps: 3\nconcurrency: 1\nrateLimit: 0.001\nops: [{op: put}]\nobjectSize: 4KiB\ndataset: {objects: 0}\n",
    );
    let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
        .await
        .unwrap();
    let ds = engine.prepare().await.unwrap();
    let started = std::time::Instant::now();
    let stop = tokio::time::sleep(Duration::from_millis(300));
    let s = tokio::time::timeout(Duration::from_secs(10), engine.run(&ds, None, stop))
        .await
        .expect("the run must end soon after the stop, not after 1000 s")
        .unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1300), "took {took:?}");
    assert_eq!(s.stopped_by, "interrupted");
    assert!(s.partial);
    assert_eq!(
        s.ops[&OpKind::Put].count,
        1,
        "only the first ticket was due"
    );
}

/// A target whose GET panics after a few calls, while PUTs keep working and are counted.
#[derive(Debug)]
struct Panicky {
    inner: Arc<dyn Target>,
    gets: std::sync::atomic::AtomicU64,
    puts_after_panic: std::sync::atomic::AtomicU64,
    panicked: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl Target for Panicky {
    async fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
        use std::sync::atomic::Ordering;
        if self.gets.fetch_add(1, Ordering::SeqCst) == 5 {
            self.panicked.store(true, Ordering::SeqCst);
            panic!("injected failure in a GET");
        }
        self.inner.get(key, req).await
    }
    async fn put(&self, key: &str, data: Payload) -> Result<u32, TargetError> {
        use std::sync::atomic::Ordering;
        tokio::time::sleep(Duration::from_millis(1)).await;
        if self.panicked.load(Ordering::SeqCst) {
            self.puts_after_panic.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.put(key, data).await
    }
    async fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError> {
        self.inner.stat(key).await
    }
    async fn list(&self, prefix: &str) -> Result<ListOutcome, TargetError> {
        self.inner.list(prefix).await
    }
    async fn delete(&self, key: &str) -> Result<(), TargetError> {
        self.inner.delete(key).await
    }
    async fn check(&self) -> Result<(), TargetError> {
        self.inner.check().await
    }
    fn default_plan(&self) -> ChunkPlan {
        self.inner.default_plan()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_task_stops_all_the_others_and_the_run_fails() {
    let dir = scratch();
    let w = workload(
        dir.path(),
        "duration: 30s\nconcurrency: 8\nops: [{op: get}, {op: put}]\nobjectSize: 1KiB\ndataset: {objects: 4, size: 1KiB}\n",
    );
    let target = Arc::new(Panicky {
        inner: targets::open(&w).await.unwrap(),
        gets: Default::default(),
        puts_after_panic: Default::default(),
        panicked: Default::default(),
    });
    let engine = Engine::with_target(w, target.clone(), Arc::new(Metrics::new()), "t").unwrap();
    let ds = engine.prepare().await.unwrap();
    let started = std::time::Instant::now();
    let e = engine
        .run(&ds, None, std::future::pending())
        .await
        .expect_err("a panicked task must fail the run");
    assert!(started.elapsed() < Duration::from_secs(5), "not after 30 s");
    let msg = e.to_string();
    assert!(
        msg.contains("panicked: injected failure in a GET")
            && msg.contains("all tasks were stopped"),
        "{msg}"
    );
    // Nothing hits the target any more once run() has returned.
    let after = target
        .puts_after_panic
        .load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        target
            .puts_after_panic
            .load(std::sync::atomic::Ordering::SeqCst),
        after,
        "tasks kept writing after the run failed"
    );
}

/// Sizes that skipped validation, and a whole-object read of a file larger than a buffer may
/// be: errors, never a panic or a huge allocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_sizes_and_huge_objects_are_errors_not_aborts() {
    use benchrun_worker::spec::SizeSpec;
    use benchrun_worker::units::ByteSize;
    let dir = scratch();
    let mut w = workload(dir.path(), "totalOps: 1\nops: [{op: put}]\n");
    w.object_size = SizeSpec::Fixed(ByteSize(u64::MAX));
    let target = targets::open(&w).await.unwrap();
    let e = Engine::with_target(w.clone(), target.clone(), Arc::new(Metrics::new()), "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("above the largest object"), "{e}");

    // A sparse 2 GiB file (no disk used), read whole: refused before any buffer is allocated.
    let f = std::fs::File::create(dir.path().join("huge")).unwrap();
    f.set_len(2 << 30).unwrap();
    let req = GetRequest {
        plan: ChunkPlan::Whole,
        check: targets::ReadCheck::Discard,
        size_hint: None,
    };
    let e = target.get("huge", &req).await.unwrap_err().to_string();
    assert!(
        e.contains("more than the 1GiB a whole-object read may buffer"),
        "{e}"
    );
}

/// A stop while waiting for a synchronized start far in the future ends the run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_before_the_start_time_ends_the_run_at_once() {
    let dir = scratch();
    let w = workload(
        dir.path(),
        "totalOps: 3\nconcurrency: 1\nops: [{op: put}]\nobjectSize: 4KiB\ndataset: {objects: 0}\n",
    );
    let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
        .await
        .unwrap();
    let ds = engine.prepare().await.unwrap();
    let start_at = std::time::SystemTime::now() + Duration::from_secs(1000);
    let started = std::time::Instant::now();
    let stop = tokio::time::sleep(Duration::from_millis(200));
    let s = tokio::time::timeout(
        Duration::from_secs(10),
        engine.run(&ds, Some(start_at), stop),
    )
    .await
    .expect("the run must end soon after the stop")
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(s.stopped_by, "interrupted");
    assert!(s.partial);
    assert_eq!(s.ops[&OpKind::Put].count, 0, "nothing ran");
}

/// The measured stage starts once its 1,024 tasks' threads exist (parked at a gate), not
/// before: the spawning is reported as `setup` and lies before `startedAt`, and the stage
/// lasts its configured duration plus at most its slowest op, whatever the concurrency.
/// (Taken before the spawning, the start put the spawning inside every rate: a 3 s run at
/// concurrency 4,096 measured 4.26 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_measured_window_excludes_starting_1024_tasks() {
    let dir = scratch();
    let w = workload(
        dir.path(),
        "duration: 2s\nconcurrency: 1024\nops: [{op: get}]\nobjectSize: 4KiB\ndataset: {objects: 64}\n",
    );
    let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
        .await
        .expect("open");
    let ds = engine.prepare().await.expect("prepare");
    let before = chrono::Utc::now();
    let s = engine
        .run(&ds, None, std::future::pending())
        .await
        .expect("run");
    let setup = s.setup.as_ref().expect("setup reported").seconds;
    assert!(setup > 0.0, "setup {setup}");
    let waited = (s.started_at - before)
        .num_microseconds()
        .unwrap_or_default() as f64
        / 1e6;
    assert!(
        waited >= setup * 0.99,
        "the stage started {waited:.3} s after the call, before its {setup:.3} s of setup ended"
    );
    // The stage ends with its last op: no later than the deadline plus the slowest op (and a
    // little for the instructions between taking a ticket and starting the op), however long
    // joining 1,024 tasks takes on a loaded machine.
    let slowest = s.ops[&OpKind::Get].latency.0.max() as f64 / 1e6;
    assert!(
        s.elapsed_seconds >= 2.0 && s.elapsed_seconds <= 2.0 + slowest + 0.25,
        "a 2 s stage measured {} s (slowest op {slowest} s)",
        s.elapsed_seconds
    );
    assert!(s.ops[&OpKind::Get].count > 0, "the tasks ran");
}

/// `warmup`: the ops that finish in the warm-up are counted apart, never in the results; the
/// timeline marks its seconds; the measured stage lasts `duration` after it, and its
/// offered load counts its own tickets only (at 100 ops/s: exactly 200 in 2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmup_runs_before_the_measured_stage_and_is_counted_apart() {
    let dir = scratch();
    let w = workload(
        dir.path(),
        "duration: 2s\nwarmup: 2s\nconcurrency: 4\nrateLimit: 100\nops: [{op: stat}]\ndataset: {objects: 4, size: 4KiB}\n",
    );
    let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
        .await
        .unwrap();
    let ds = engine.prepare().await.unwrap();
    let before = std::time::Instant::now();
    let called_at = chrono::Utc::now();
    let s = engine.run(&ds, None, std::future::pending()).await.unwrap();
    let took = before.elapsed().as_secs_f64();

    let warm = s.warmup.as_ref().expect("the warm-up is reported");
    let (warm_ops, measured_ops) = (warm.ops[&OpKind::Stat].count, s.ops[&OpKind::Stat].count);
    assert!(
        warm_ops > 0 && measured_ops > 0,
        "{warm_ops} / {measured_ops}"
    );
    // The timeline's marked seconds hold exactly the warm-up's ops, the others exactly the
    // measured ones: no op is in both, none is lost.
    let sum = |warmup: bool| -> u64 {
        s.timeline
            .iter()
            .filter(|t| t.warmup == warmup)
            .map(|t| t.ops)
            .sum()
    };
    assert_eq!(sum(true), warm_ops);
    assert_eq!(sum(false), measured_ops);
    assert_eq!(s.report[&OpKind::Stat].count, measured_ops);
    let marked: Vec<u64> = s
        .timeline
        .iter()
        .filter(|t| t.warmup)
        .map(|t| t.second)
        .collect();
    assert_eq!(marked, [0, 1], "the warm-up's two seconds, marked");
    assert!(
        !s.timeline.last().unwrap().warmup,
        "measured seconds follow"
    );
    // The measured stage: its 2 s, after the 2 s warm-up (ending with its last op, due at
    // 1.99 s); the rates are over it alone. The upper bound leaves a loaded machine room for
    // a late last op and still fails a stage that took the warm-up in (4 s).
    assert!(
        (1.99..3.5).contains(&s.elapsed_seconds),
        "a 2 s stage measured {} s",
        s.elapsed_seconds
    );
    assert!(
        (warm.seconds - 2.0).abs() < 1e-3,
        "warm-up {} s",
        warm.seconds
    );
    assert!(took >= 3.99, "warm-up and measured stage took {took} s");
    let offset = (s.started_at - called_at).num_milliseconds();
    assert!(
        offset >= 2_000,
        "the measured stage starts after the warm-up: {offset} ms"
    );
    let ol = s.open_loop.as_ref().expect("open-loop figures");
    assert_eq!(ol.due, 200, "the measured stage's tickets only: {ol:?}");
    assert_eq!(ol.started + ol.not_started(), 200, "{ol:?}");
    assert!(
        (s.report[&OpKind::Stat].ops_per_sec - measured_ops as f64 / s.elapsed_seconds).abs()
            < 1e-9
    );
    // And it reads back from JSON as it was written.
    let back: benchrun_worker::Summary =
        serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back.timeline, s.timeline);
    assert_eq!(back.warmup.map(|w| w.ops), Some(warm.ops.clone()));
}

/// Zipf access through the whole engine: the reads counted at the target follow the skew
/// (the most read object takes its Zipf share, not the uniform 1/50), and the summary says
/// how objects were picked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zipf_reads_concentrate_on_the_popular_objects() {
    let dir = scratch();
    let w = workload(
        dir.path(),
        "totalOps: 5000\nconcurrency: 4\nops: [{op: get}]\ndataset: {objects: 50, size: 1KiB, access: zipf, zipf: {exponent: 1.2}}\n",
    );
    let observed = Observed::new(targets::open(&w).await.unwrap(), Duration::ZERO);
    let s = run_on(w, observed.clone()).await;
    assert_eq!(s.access.as_deref(), Some("zipf (exponent 1.2)"));
    let reads = observed.reads.lock().unwrap().clone();
    assert_eq!(reads.len(), 5000);
    let mut counts = std::collections::BTreeMap::<&str, u64>::new();
    for k in &reads {
        *counts.entry(k.as_str()).or_default() += 1;
    }
    let mut by_count: Vec<u64> = counts.values().copied().collect();
    by_count.sort_unstable_by(|a, b| b.cmp(a));
    // Rank 1's share under Zipf(50, 1.2) is 1 / sum(k^-1.2) = 0.305; its standard error over
    // 5,000 reads is 0.0065, so the band is about 6 of them either side.
    let h: f64 = (1..=50).map(|k| (k as f64).powf(-1.2)).sum();
    let top = by_count[0] as f64 / 5000.0;
    assert!(
        (top - 1.0 / h).abs() < 0.04,
        "top share {top:.3}, expected {:.3}",
        1.0 / h
    );
    // The ten most read objects take about 70% of the reads (uniform: 20%).
    let top10: u64 = by_count.iter().take(10).sum();
    let expected: f64 = (1..=10).map(|k| (k as f64).powf(-1.2)).sum::<f64>() / h;
    let got = top10 as f64 / 5000.0;
    assert!(
        (got - expected).abs() < 0.04,
        "top-10 share {got:.3}, expected {expected:.3}"
    );
}
