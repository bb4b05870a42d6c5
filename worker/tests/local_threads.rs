//! Local targets run each task on an OS thread of its own, with its file I/O inline.
//!
//! Through tokio's blocking pool (one `spawn_blocking` per op, at most 512 threads), a run at
//! concurrency 1,024 had at most 512 ops in the storage at once, and the others' wait for a
//! pool thread was timed as storage latency. Here the "storage" is a directory of FIFOs: a
//! GET's open blocks in the kernel (`wait_for_partner`) until the test opens the write end, so
//! the test can count, from `/proc/self/task/*/wchan`, how many GETs are inside the storage
//! at the same moment, hold them there, and release them together.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use benchrun_worker::targets::{
    self, ChunkPlan, GetOutcome, GetRequest, ListOutcome, ObjectInfo, Payload, Target, TargetError,
};
use benchrun_worker::{Dataset, Engine, Metrics, OpKind, Workload};

/// More than tokio's blocking pool holds (512).
const CONCURRENCY: usize = 1024;
/// How long the GETs are held in the storage once all of them are in.
const HOLD: Duration = Duration::from_millis(300);
/// How long the test waits for every GET to reach the storage before it fails.
const ARRIVAL_DEADLINE: Duration = Duration::from_secs(120);

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("path");
    // SAFETY: c is a valid NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(
        rc,
        0,
        "mkfifo {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// Threads of this process blocked opening a FIFO that has no writer yet.
fn blocked_in_fifo_open() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("wchan")).ok())
        .filter(|w| w.trim() == "wait_for_partner")
        .count()
}

/// Let every reader blocked on `fifos` through: open the write end (without blocking: only
/// a FIFO with a reader opens) and close it again.
fn release(fifos: &[PathBuf]) {
    for f in fifos {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags_nonblock()
            .open(f);
    }
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_the_blocking_pool_cap_every_get_is_in_the_storage_at_once() {
    let dir = scratch();
    let data = dir.path().join("benchrun");
    std::fs::create_dir_all(&data).unwrap();
    let objects: Vec<ObjectInfo> = (0..CONCURRENCY)
        .map(|i| ObjectInfo {
            key: format!("benchrun/obj-{i:08}"),
            size: 0,
        })
        .collect();
    let fifos: Vec<PathBuf> = objects.iter().map(|o| dir.path().join(&o.key)).collect();
    fifos.iter().for_each(|f| mkfifo(f));
    let w = Workload::from_yaml(&format!(
        "target: file://{}\nconcurrency: {CONCURRENCY}\ntotalOps: {CONCURRENCY}\n\
         ops: [{{op: get}}]\ndataset: {{objects: {CONCURRENCY}, size: 0, prepare: false, cleanup: false, access: sequential}}\n",
        dir.path().display()
    ))
    .expect("workload");
    let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
        .await
        .expect("open");
    let dataset = Dataset {
        objects: objects.into(),
        ..Default::default()
    };

    // The storage's side, on a plain thread: wait until every GET is inside, hold them, then
    // let everyone through until the run is over.
    let done = Arc::new(AtomicBool::new(false));
    let device = {
        let (fifos, done) = (fifos.clone(), done.clone());
        std::thread::spawn(move || {
            let since = Instant::now();
            let mut most = 0;
            while most < CONCURRENCY && since.elapsed() < ARRIVAL_DEADLINE {
                most = most.max(blocked_in_fifo_open());
                std::thread::sleep(Duration::from_millis(5));
            }
            if most == CONCURRENCY {
                std::thread::sleep(HOLD);
            }
            while !done.load(Ordering::Relaxed) {
                release(&fifos);
                std::thread::sleep(Duration::from_millis(5));
            }
            most
        })
    };
    let summary = engine.run(&dataset, None, std::future::pending()).await;
    done.store(true, Ordering::Relaxed);
    let most = device.join().expect("device thread");
    let summary = summary.expect("run");
    assert_eq!(
        most, CONCURRENCY,
        "GETs inside the storage at the same moment, at concurrency {CONCURRENCY}"
    );
    let get = &summary.ops[&OpKind::Get];
    assert_eq!(
        (get.count, get.errors, get.bytes),
        (CONCURRENCY as u64, 0, 0)
    );
    // Every GET was held inside the storage for HOLD: none reports less (the histogram
    // keeps 3 significant digits, so its lowest value may sit up to 0.1% below).
    let (min_us, hold_us) = (get.latency.quantile_us(0.0), HOLD.as_micros() as u64);
    assert!(
        min_us >= hold_us - hold_us / 1000,
        "shortest GET {min_us} us while all were held {hold_us} us"
    );
}

/// A real file target whose GET of one key panics, on the tasks' own threads (it forwards
/// `blocking_io`).
#[derive(Debug)]
struct PanicsOn {
    inner: Arc<dyn Target>,
    key: String,
}

#[async_trait]
impl Target for PanicsOn {
    async fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
        assert!(
            targets::io_inline_here(),
            "a blocking target's op runs on its task's own thread"
        );
        if key == self.key {
            panic!("storage exploded on {key}");
        }
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
    fn blocking_io(&self) -> bool {
        self.inner.blocking_io()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_on_a_task_thread_fails_the_run_with_its_message() {
    let dir = scratch();
    let w = Workload::from_yaml(&format!(
        "target: file://{}\nconcurrency: 4\ntotalOps: 400\nops: [{{op: get}}]\n\
         dataset: {{objects: 8, size: 4KiB, access: sequential}}\n",
        dir.path().display()
    ))
    .expect("workload");
    let inner = targets::open(&w).await.expect("open");
    assert!(
        inner.blocking_io(),
        "file:// runs tasks on their own threads"
    );
    let target = Arc::new(PanicsOn {
        inner,
        key: "benchrun/obj-00000003".into(),
    });
    let engine = Engine::with_target(w, target, Arc::new(Metrics::new()), "t").unwrap();
    let ds = engine.prepare().await.expect("prepare");
    let err = engine
        .run(&ds, None, std::future::pending())
        .await
        .expect_err("a panicking task fails the run")
        .to_string();
    assert!(
        err.contains("panicked: storage exploded on benchrun/obj-00000003")
            && err.contains("all tasks were stopped"),
        "{err}"
    );
}
