//! The read syscalls of one local GET, counted by the kernel.
//!
//! A chunked GET of an object whose size is a multiple of the chunk size used to end with one
//! extra, empty read (9 reads for 8 MiB in 1 MiB chunks). The local targets now stop at the
//! size of the open file. These tests count the reads the real `file://` and `direct://`
//! targets issue, from the kernel's own accounting: the `syscr` line of
//! `/proc/self/task/<tid>/io` of the one thread that runs the target's blocking I/O (a runtime
//! with a single blocking thread), read from another thread so the reading is not counted.

use std::sync::Arc;
use std::time::Duration;

use benchrun_worker::datagen::DataPattern;
use benchrun_worker::targets::{self, ChunkPlan, GetRequest, ReadCheck};
use benchrun_worker::{Engine, Metrics, Workload};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// A scratch directory on the build directory's filesystem (ext4 here: O_DIRECT works).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

/// A runtime whose blocking I/O all runs on one long-lived thread.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .thread_keep_alive(Duration::from_secs(3600))
        .build()
        .expect("runtime")
}

/// The thread that runs `spawn_blocking` closures on `rt`.
fn blocking_tid(rt: &tokio::runtime::Runtime) -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    rt.block_on(rt.spawn_blocking(|| unsafe { libc::gettid() }))
        .expect("blocking task")
}

/// Read syscalls `tid` has made so far (the kernel's `syscr`).
fn syscr(tid: libc::pid_t) -> u64 {
    let path = format!("/proc/self/task/{tid}/io");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (needs CONFIG_TASK_IO_ACCOUNTING)"));
    text.lines()
        .find_map(|l| l.strip_prefix("syscr: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no syscr in {path}: {text}"))
}

struct Case {
    size: u64,
    plan: ChunkPlan,
    reads: u32,
}

fn case(size: u64, plan: ChunkPlan, reads: u32) -> Case {
    Case { size, plan, reads }
}

/// Write each case's object, GET it with its plan (verifying every byte), and compare the
/// read syscalls the kernel counted with the expected number and with what the GET reported.
fn check_reads(scheme: &str, cases: &[Case]) {
    let dir = scratch();
    let w = Workload::from_yaml(&format!(
        "target: {scheme}://{}\nduration: 1s\nops: [{{op: get}}]\n",
        dir.path().display()
    ))
    .expect("workload");
    let rt = runtime();
    let target = rt.block_on(targets::open(&w)).expect("open target");
    let pattern = Arc::new(DataPattern::unique(7));
    let tid = blocking_tid(&rt);
    let mut got = vec![];
    for (i, c) in cases.iter().enumerate() {
        let key = format!("obj-{i}");
        rt.block_on(target.put(&key, pattern.payload(&key, c.size)))
            .expect("put");
        let req = GetRequest {
            plan: c.plan.clone(),
            check: ReadCheck::Verify(pattern.clone()),
            size_hint: None,
        };
        let before = syscr(tid);
        let out = rt.block_on(target.get(&key, &req)).expect("get");
        let counted = syscr(tid) - before;
        assert_eq!(out.bytes, c.size, "{scheme} {key}: bytes read");
        got.push((c.size, c.plan.clone(), counted, out.requests));
    }
    assert_eq!(
        blocking_tid(&rt),
        tid,
        "every GET ran on the one blocking thread"
    );
    let want: Vec<_> = cases
        .iter()
        .map(|c| (c.size, c.plan.clone(), c.reads as u64, c.reads))
        .collect();
    assert_eq!(
        got, want,
        "{scheme}: (size, plan, read syscalls counted by the kernel, requests reported)"
    );
}

#[test]
fn file_gets_stop_at_the_size_without_an_empty_read() {
    let m1 = ChunkPlan::Fixed(MIB);
    check_reads(
        "file",
        &[
            case(8 * MIB, m1.clone(), 8),
            case(8 * MIB + 1, m1.clone(), 9),
            case(8 * MIB - 1, m1.clone(), 8),
            case(MIB, m1.clone(), 1),
            case(100, m1.clone(), 1),
            case(0, m1.clone(), 0),
            case(8 * MIB, ChunkPlan::Fixed(4 * MIB), 2),
            case(8 * MIB, ChunkPlan::Whole, 1),
            case(0, ChunkPlan::Whole, 0),
            // 64 + 128 + 256 KiB, then the rest of the object in one 1 MiB-capped read.
            case(
                448 * KIB,
                ChunkPlan::Adaptive {
                    initial: 64 * KIB,
                    factor: 2.0,
                    max: MIB,
                },
                3,
            ),
            case(
                448 * KIB + 5,
                ChunkPlan::Adaptive {
                    initial: 64 * KIB,
                    factor: 2.0,
                    max: MIB,
                },
                4,
            ),
        ],
    );
}

#[test]
fn direct_gets_stop_at_the_size_without_an_empty_read() {
    let m4 = ChunkPlan::Fixed(4 * MIB);
    check_reads(
        "direct",
        &[
            case(8 * MIB, m4.clone(), 2),
            case(8 * MIB + 4 * KIB, m4.clone(), 3),
            // An unaligned tail: the last read asks for the rounded-up length and comes back
            // short at the end of the file.
            case(8 * MIB + 1, m4.clone(), 3),
            case(4 * MIB - 1, m4.clone(), 1),
            case(5000, m4.clone(), 1),
            case(0, m4.clone(), 0),
            case(8 * MIB, ChunkPlan::Fixed(MIB), 8),
            // Whole object: one aligned read of the object's rounded-up size, whatever the size
            // (an unaligned one comes back short at the end of the file).
            case(8 * MIB, ChunkPlan::Whole, 1),
            case(9 * MIB, ChunkPlan::Whole, 1),
            case(8 * MIB + 1, ChunkPlan::Whole, 1),
            case(0, ChunkPlan::Whole, 0),
        ],
    );
}

/// Through the engine: a run of exactly 16 GETs of 8 MiB objects in 1 MiB chunks reports 8
/// requests per GET (the summary's request count is the targets' read count, checked above).
#[test]
fn the_engine_reports_one_request_per_chunk() {
    for (scheme, chunk, per_get) in [("file", "1MiB", 8), ("direct", "4MiB", 2)] {
        let dir = scratch();
        let w = Workload::from_yaml(&format!(
            "target: {scheme}://{}\ntotalOps: 16\nconcurrency: 2\nops: [{{op: get}}]\n\
             dataset: {{objects: 4, size: 8MiB}}\nread: {{chunkSize: {chunk}}}\n",
            dir.path().display()
        ))
        .expect("workload");
        let rt = runtime();
        let s = rt.block_on(async {
            let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
                .await
                .expect("open");
            let ds = engine.prepare().await.expect("prepare");
            engine
                .run(&ds, None, std::future::pending())
                .await
                .expect("run")
        });
        let get = &s.ops[&benchrun_worker::OpKind::Get];
        assert_eq!(
            (get.count, get.errors, get.bytes, get.requests),
            (16, 0, 16 * 8 * MIB, 16 * per_get),
            "{scheme} with {chunk} chunks"
        );
    }
}

/// Run `w` through the engine (prepare, then the measured GETs) on a runtime of its own.
fn engine_run(w: Workload, before_run: impl FnOnce()) -> benchrun_worker::Summary {
    let rt = runtime();
    rt.block_on(async {
        let engine = Engine::open(w, Arc::new(Metrics::new()), "t")
            .await
            .expect("open");
        let ds = engine.prepare().await.expect("prepare");
        before_run();
        engine
            .run(&ds, None, std::future::pending())
            .await
            .expect("run")
    })
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `read.bufferPool` (design report 004's allocation per read): with the pool, the GETs of a
/// run allocate at most one buffer per task (concurrency 2); without it, one per GET. Either
/// way every byte read is verified against what the dataset's writer wrote, and a corrupted
/// byte is caught in a fresh buffer as in a pooled one.
#[test]
fn the_buffer_pool_switch_allocates_once_per_task_or_once_per_get() {
    const GETS: u64 = 24;
    for (scheme, chunk) in [("file", "1MiB"), ("direct", "4MiB")] {
        for pooled in [true, false] {
            let what = format!("{scheme}, bufferPool: {pooled}");
            let yaml = |dir: &tempfile::TempDir| {
                let text = format!(
                    "target: {scheme}://{}\ntotalOps: {GETS}\nconcurrency: 2\nops: [{{op: get}}]\n\
                     dataset: {{objects: 4, size: 3MiB}}\n\
                     read: {{chunkSize: {chunk}, verify: true, bufferPool: {pooled}}}\n",
                    dir.path().display()
                );
                Workload::from_yaml(&text).expect("workload")
            };
            let dir = scratch();
            let s = engine_run(yaml(&dir), || {});
            let get = &s.ops[&benchrun_worker::OpKind::Get];
            assert_eq!(
                (get.count, get.errors, get.bytes),
                (GETS, 0, GETS * 3 * MIB),
                "{what}: every GET read and verified its 3 MiB"
            );
            if pooled {
                assert!(
                    (1..=2).contains(&get.buffers_allocated),
                    "{what}: at most one buffer per task, got {}",
                    get.buffers_allocated
                );
            } else {
                assert_eq!(get.buffers_allocated, GETS, "{what}: one buffer per GET");
                let w = s.workload.as_ref().expect("the summary's workload");
                assert!(!w.read.buffer_pool, "{what}: reported as run");
                let table = benchrun_worker::report::table(&s);
                assert!(
                    table.contains(&format!(
                        "read buffers of get: {GETS} allocated for {GETS} successful gets (experiment read.bufferPool: false"
                    )),
                    "{what}: {table}"
                );
            }
            let json = serde_json::to_value(&s).expect("summary json");
            assert_eq!(
                json["ops"]["get"]["buffersAllocated"].as_u64(),
                Some(get.buffers_allocated),
                "{what}"
            );

            // The same run over a dataset with one byte changed in every object: each GET
            // reads into its buffer and fails as corrupt.
            let dir = scratch();
            let s = engine_run(yaml(&dir), || {
                let files = files_under(dir.path());
                assert_eq!(files.len(), 4, "{what}: the prepared dataset");
                for f in files {
                    let mut bytes = std::fs::read(&f).expect("read object");
                    bytes[(2 * MIB + 5) as usize] ^= 0xff;
                    std::fs::write(&f, bytes).expect("corrupt object");
                }
            });
            let get = &s.ops[&benchrun_worker::OpKind::Get];
            assert_eq!(
                (get.count, get.errors, get.errors_by_kind.get("corrupt")),
                (GETS, GETS, Some(&GETS)),
                "{what}: every GET caught the changed byte"
            );
        }
    }
}
