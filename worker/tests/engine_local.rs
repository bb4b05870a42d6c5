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
    assert!((190..=200).contains(&n), "100 ops/s for 2 s gave {n}");
    // Paced, not bursty: every full second carries about 100 operations.
    for sec in &s.timeline[..2] {
        assert!(
            (90..=110).contains(&sec.ops),
            "second {} had {} ops",
            sec.second,
            sec.ops
        );
    }
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

    // The same stall, closed loop: latency is the service time.
    let w = workload(
        dir.path(),
        "duration: 1s\nconcurrency: 1\nops: [{op: get}]\ndataset: {objects: 2, size: 4KiB}\n",
    );
    let slow = Observed::new(targets::open(&w).await.unwrap(), Duration::from_millis(50));
    let s = run_on(w, slow).await;
    let get = &s.report[&OpKind::Get];
    assert!((50.0..80.0).contains(&get.p50_ms), "{get:?}");
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
