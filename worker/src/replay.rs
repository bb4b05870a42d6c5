//! Replay of an op-log ([`crate::oplog`]): the log's operations issued again against a target, each at its recorded time
//! (scaled by `speed`), open loop: an op's latency runs from when it was meant to start, so
//! a target slower than the recorded one shows its queueing in the percentiles instead of
//! silently stretching the schedule (as the engine's rate-limited mode, `engine/schedule.rs`).
//!
//! Three stages, each bounded, so memory does not grow with the log:
//! 1. a reader thread decodes records, applies `--remap`, and queues them (`queue` deep);
//! 2. the scheduler keeps a reorder window of `queue` records (records are written when an
//!    op ends, so they come slightly out of start order), and issues the earliest at its
//!    time once an in-flight slot (`concurrency`) is free;
//! 3. each op, a tokio task, hands its result to one collector, which records it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

use crate::datagen::DataPattern;
use crate::engine::{Done, OpResult, Recorder, INTERRUPTED};
use crate::metrics::{Metrics, Stage};
use crate::oplog::record::{Phase, Record};
use crate::oplog::remap::{self, Remap};
use crate::oplog::{OplogError, Reader};
use crate::spec::{OpKind, Workload};
use crate::stats::{OpenLoop, ProcessStats, Summary};
use crate::targets::{self, GetRequest, ReadCheck, Target, TargetError};

/// `stopped_by` of a replay that issued every op of its log.
pub const STOPPED_AT_END: &str = "oplog";
/// `stopped_by` of a replay cut by `--duration-limit`.
pub const STOPPED_AT_LIMIT: &str = "durationLimit";

/// How to replay.
#[derive(Clone, Debug)]
pub struct Options {
    /// Time scale: 2.0 issues the ops twice as fast (offsets halved).
    pub speed: f64,
    /// Key rewrites, the first match applying.
    pub remap: Vec<Remap>,
    /// Ops in flight at most.
    pub concurrency: usize,
    /// Records read ahead, and the reorder window: each at most this many.
    pub queue: usize,
    /// Issue no op meant to start later than this after the replay's start.
    pub duration_limit: Option<Duration>,
    /// Replay the warm-up's records too (before the measured ones, as recorded).
    pub warmup: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            speed: 1.0,
            remap: Vec::new(),
            concurrency: 256,
            queue: 4096,
            duration_limit: None,
            warmup: false,
        }
    }
}

/// A finished replay.
#[derive(Debug)]
pub struct Replayed {
    /// The replay's figures, comparable with a run's (`compare`, `report`).
    pub summary: Summary,
    /// The most records held in memory at once (read and not yet finished): bounded by
    /// `2 x queue + concurrency` and a few, whatever the log's length.
    pub peak_held: u64,
}

/// Records read but not finished, and the most at once.
#[derive(Debug, Default)]
struct Held {
    now: AtomicU64,
    peak: AtomicU64,
}

impl Held {
    fn add(&self) {
        let n = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(n, Ordering::Relaxed);
    }
    fn done(&self) {
        self.now.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An op read from the log, ordered by when it is meant to start (then by its place in the
/// log), for the reorder window.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    offset_us: i64,
    seq: u64,
    op: OpKind,
    key: String,
    size: u64,
}

/// What an op in flight reports to the collector.
struct Finished {
    op: OpKind,
    due: Instant,
    issued: Instant,
    end: Instant,
    outcome: Result<Done, TargetError>,
}

/// Replay the log at `path` (already checked by [`crate::oplog::validate`], which gave `ops`, the
/// operations it holds, and `first_offset_us`, where its replayed part starts) against
/// `target`, read as `workload` says (its read plan, its data pattern for PUTs).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    path: &Path,
    target: Arc<dyn Target>,
    workload: &Workload,
    worker_id: &str,
    ops: &BTreeSet<OpKind>,
    opts: &Options,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Replayed, OplogError> {
    check(path, ops, opts)?;
    let held = Arc::new(Held::default());
    let queue = opts.queue.max(1);
    let (tx, mut rx) = mpsc::channel::<Pending>(queue);
    let reader = {
        let (path, rules, held, warmup) = (
            path.to_path_buf(),
            opts.remap.clone(),
            held.clone(),
            opts.warmup,
        );
        tokio::task::spawn_blocking(move || read_ahead(&path, &rules, warmup, &held, tx))
    };
    let pattern = Arc::new(DataPattern::new(workload.seed, &workload.data()));
    let get = GetRequest {
        plan: targets::read_plan(workload, target.as_ref()),
        check: if workload.read.verify {
            ReadCheck::Verify(pattern.clone())
        } else {
            ReadCheck::Discard
        },
        size_hint: None,
    };
    let concurrency = opts.concurrency.max(1);
    let slots = Arc::new(Semaphore::new(concurrency));
    let (results, mut finished) = mpsc::channel::<Finished>(concurrency);
    let start = Instant::now();
    let started_at = Utc::now();
    let cpu0 = ProcessStats::now();
    let collector = {
        let (metrics, held) = (metrics.clone(), held.clone());
        let ops: Vec<OpKind> = ops.iter().copied().collect();
        tokio::spawn(async move {
            let mut rec = Recorder::new(metrics, ops);
            while let Some(f) = finished.recv().await {
                rec.started_late(f.due, f.issued);
                rec.record(OpResult {
                    op: f.op,
                    latency: f.end.saturating_duration_since(f.due),
                    finished_at: f.end.saturating_duration_since(start),
                    outcome: f.outcome,
                    // A replay's figures are not broken down by endpoint.
                    endpoint: None,
                });
                held.done();
            }
            rec
        })
    };
    metrics.set_stage(Stage::Running);
    let mut shutdown = Box::pin(shutdown);
    let mut window: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut input_open = true;
    let mut issued = 0u64;
    // Where the replay's time 0 falls in the log: the measured stage's start, or the first
    // replayed op if it started before (the warm-up's, or one in flight at the start).
    let mut base_us: Option<i64> = None;
    let stopped_by = loop {
        while input_open && window.len() < queue {
            match rx.recv().await {
                Some(p) => window.push(Reverse(p)),
                None => input_open = false,
            }
        }
        let Some(Reverse(p)) = window.pop() else {
            break STOPPED_AT_END;
        };
        let base = *base_us.get_or_insert(p.offset_us.min(0));
        let at = Duration::from_secs_f64(
            p.offset_us.saturating_sub(base).max(0) as f64 / 1e6 / opts.speed,
        );
        if opts.duration_limit.is_some_and(|limit| at > limit) {
            held.done();
            break STOPPED_AT_LIMIT;
        }
        let due = start + at;
        // The engine's open-loop wait: tokio's timer alone rounds up to the next millisecond,
        // which would put 0-1 ms of lag into every replayed op's latency. A shutdown during the
        // last millisecond's yields is seen at the next op's wait.
        if crate::engine::wait::until_on_runtime(due, &mut shutdown, || false).await {
            held.done();
            break INTERRUPTED;
        }
        // A free slot; waiting for one is queueing, and counts in the op's latency.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break STOPPED_AT_END;
        };
        issued += 1;
        metrics.op_started();
        let (target, get, pattern, results) = (
            target.clone(),
            get.clone(),
            pattern.clone(),
            results.clone(),
        );
        tokio::spawn(async move {
            let began = Instant::now();
            let outcome = issue(target.as_ref(), &p, &get, &pattern)
                .await
                .map(|mut d| {
                    // As the engine's: TTFB from the intended start, like the latency.
                    if let Some(t) = d.ttfb.as_mut() {
                        *t += began.saturating_duration_since(due);
                    }
                    d
                });
            let _ = results
                .send(Finished {
                    op: p.op,
                    due,
                    issued: began,
                    end: Instant::now(),
                    outcome,
                })
                .await;
            drop(slot);
        });
    };
    // Stop reading (a limit or a stop leaves the rest unread), then wait for the ops in
    // flight: every slot free again.
    drop(rx);
    let _ = slots.acquire_many(concurrency as u32).await;
    drop(results);
    let rec = collector.await.map_err(|e| OplogError::Replay {
        path: path.to_path_buf(),
        why: format!("the replay's collector failed: {e}"),
    })?;
    let end = Instant::now();
    metrics.set_stage(Stage::Done);
    let read = reader.await.map_err(|e| OplogError::Replay {
        path: path.to_path_buf(),
        why: format!("the op-log reader failed: {e}"),
    })?;
    read?;
    let process = ProcessStats::now().since(&cpu0);
    let mut s = Summary {
        // The workload the replay ran as (the recorded one, retargeted): what `compare`
        // and `report` show beside the figures.
        workload: Some(workload.clone()),
        target: workload.target.clone(),
        workers: 1,
        worker_ids: vec![worker_id.to_string()],
        started_at,
        elapsed_seconds: end.duration_since(start).as_secs_f64(),
        stopped_by: stopped_by.to_string(),
        ops: OpKind::ALL
            .iter()
            .zip(rec.ops)
            .filter_map(|(op, s)| s.map(|s| (*op, s)))
            .collect(),
        timeline: rec.timeline,
        process,
        partial: stopped_by == INTERRUPTED,
        open_loop: Some(OpenLoop {
            due: issued,
            ..rec.open_loop
        }),
        tls_verification_skipped: workload.skips_tls_verification(),
        // Not broken down by size or endpoint; CPU % is filled by `refresh`.
        ..Default::default()
    };
    s.refresh();
    Ok(Replayed {
        summary: s,
        peak_held: held.peak.load(Ordering::Relaxed),
    })
}

/// Refuse what cannot be replayed (block ops in the log, a speed that is not above 0), so the
/// caller can ask before it writes anything (`--prepare`).
pub fn check(path: &Path, ops: &BTreeSet<OpKind>, opts: &Options) -> Result<(), OplogError> {
    if let Some(op) = ops
        .iter()
        .find(|op| matches!(op, OpKind::Read | OpKind::Write))
    {
        return Err(OplogError::Replay {
            path: path.to_path_buf(),
            why: format!("the log holds `{op}`, block I/O, which replay does not issue"),
        });
    }
    if !(opts.speed.is_finite() && opts.speed > 0.0) {
        return Err(OplogError::Replay {
            path: path.to_path_buf(),
            why: format!("--speed {} must be a number above 0", opts.speed),
        });
    }
    Ok(())
}

/// The reader thread: records decoded, filtered and remapped, queued for the scheduler until
/// the log ends or the scheduler hangs up.
fn read_ahead(
    path: &Path,
    rules: &[Remap],
    warmup: bool,
    held: &Held,
    tx: mpsc::Sender<Pending>,
) -> Result<(), OplogError> {
    let mut r = Reader::open(path)?;
    let mut seq = 0u64;
    while let Some(Record {
        offset_us,
        phase,
        op,
        key,
        size,
        ..
    }) = r.next_record()?
    {
        seq += 1;
        if phase == Phase::Warmup && !warmup {
            continue;
        }
        held.add();
        let p = Pending {
            offset_us,
            seq,
            op,
            key: remap::apply(rules, &key),
            size,
        };
        if tx.blocking_send(p).is_err() {
            held.done();
            break;
        }
    }
    Ok(())
}

/// One recorded op against the target.
async fn issue(
    t: &dyn Target,
    p: &Pending,
    get: &GetRequest,
    pattern: &DataPattern,
) -> Result<Done, TargetError> {
    let simple = |requests| Done {
        bytes: 0,
        requests,
        ttfb: None,
        heads: 0,
        buffers: 0,
    };
    match p.op {
        OpKind::Get => {
            let mut req = get.clone();
            req.size_hint = Some(p.size);
            let out = t.get(&p.key, &req).await?;
            Ok(Done {
                bytes: out.bytes,
                requests: out.requests,
                ttfb: Some(out.ttfb),
                heads: 0,
                buffers: out.buffers,
            })
        }
        OpKind::Put => {
            let requests = t.put(&p.key, pattern.payload(&p.key, p.size)).await?;
            Ok(Done {
                bytes: p.size,
                ..simple(requests)
            })
        }
        OpKind::Stat => t.stat(&p.key).await.map(|_| simple(1)),
        OpKind::List => t.list(&p.key).await.map(|l| simple(l.requests)),
        OpKind::Delete => t.delete(&p.key).await.map(|_| simple(1)),
        OpKind::Read | OpKind::Write => Err(TargetError::Unsupported(format!(
            "`{}` is block I/O, which replay does not issue",
            p.op
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use async_trait::async_trait;

    use super::*;
    use crate::datagen::Payload;
    use crate::oplog::record::{self, Header};
    use crate::targets::{ChunkPlan, GetOutcome, ListOutcome, ObjectInfo};

    /// A target that only counts what it is asked.
    #[derive(Debug, Default)]
    struct Counting {
        ops: AtomicU64,
    }

    #[async_trait]
    impl Target for Counting {
        async fn get(&self, _: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
            self.ops.fetch_add(1, Ordering::Relaxed);
            Ok(GetOutcome {
                bytes: req.size_hint.unwrap_or(0),
                requests: 1,
                ttfb: Duration::ZERO,
                buffers: 0,
            })
        }
        async fn put(&self, _: &str, _: Payload) -> Result<u32, TargetError> {
            self.ops.fetch_add(1, Ordering::Relaxed);
            Ok(1)
        }
        async fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError> {
            self.ops.fetch_add(1, Ordering::Relaxed);
            Ok(ObjectInfo {
                key: key.into(),
                size: 0,
            })
        }
        async fn list(&self, _: &str) -> Result<ListOutcome, TargetError> {
            unreachable!()
        }
        async fn delete(&self, _: &str) -> Result<(), TargetError> {
            unreachable!()
        }
        async fn check(&self) -> Result<(), TargetError> {
            Ok(())
        }
        fn default_plan(&self) -> ChunkPlan {
            ChunkPlan::Whole
        }
    }

    #[tokio::test]
    async fn a_long_log_is_replayed_in_bounded_memory() {
        // 250,000 records, 4 us apart: a second of schedule (1,000,000 took 40 s in a debug
        // build on a loaded machine; the bound below holds by construction for any length).
        const N: u64 = 250_000;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.gz");
        let w = Workload::from_yaml(
            "target: file:///tmp/x\nduration: 1s\nops: [{ op: get, weight: 1 }]\n",
        )
        .unwrap();
        {
            let mut out = flate2::write::GzEncoder::new(
                std::io::BufWriter::new(std::fs::File::create(&path).unwrap()),
                flate2::Compression::fast(),
            );
            let h = Header {
                worker_id: "synthetic".into(),
                workload: w.clone(),
            };
            writeln!(out, "{}", record::encode_header(&h).unwrap()).unwrap();
            let mut line = String::new();
            for i in 0..N {
                line.clear();
                // A little out of order, as a real log is (records are logged as ops end).
                let offset_us = 4 * (i ^ 3) as i64;
                let op = [OpKind::Get, OpKind::Put, OpKind::Stat][(i % 3) as usize];
                record::encode(
                    &Record {
                        offset_us,
                        phase: Phase::Measured,
                        op,
                        key: format!("k/{}", i % 1000),
                        size: 10,
                        bytes: 10,
                        latency_us: 1,
                        error: None,
                    },
                    &mut line,
                );
                out.write_all(line.as_bytes()).unwrap();
            }
            out.write_all(record::encode_end(N, 0).as_bytes()).unwrap();
            out.finish().unwrap();
        }
        let (_, info) = crate::oplog::validate(&path).unwrap();
        assert_eq!(info.records, N);
        let target = Arc::new(Counting::default());
        let opts = Options {
            concurrency: 8,
            queue: 64,
            ..Options::default()
        };
        let r = run(
            &path,
            target.clone(),
            &w,
            "t",
            &info.ops,
            &opts,
            Arc::new(Metrics::new()),
            std::future::pending(),
        )
        .await
        .unwrap();
        assert_eq!(target.ops.load(Ordering::Relaxed), N);
        assert!(r.summary.elapsed_seconds >= 1.0, "no op before its time");
        let counted: u64 = r.summary.ops.values().map(|s| s.count).sum();
        assert_eq!(counted, N);
        // Read-ahead + reorder window (64 each), 8 in flight, one waiting for a slot and one
        // being queued: never the log.
        let bound = 2 * 64 + 8 + 2;
        assert!(
            r.peak_held <= bound,
            "{} records held at once, bound {bound}",
            r.peak_held
        );
        assert!(r.peak_held > 64, "the bound was reached: {}", r.peak_held);
    }
}
