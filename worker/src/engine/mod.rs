//! The engine: prepare the dataset, run the measured stage, clean up.
//!
//! `concurrency` tasks each loop: take a ticket from the [`Schedule`], pick an op from the
//! mix, run it against the [`Target`], record it in their own [`Recorder`]. Nothing on that
//! path is shared but the ticket counter, the live metrics (atomics) and, for `delete`, the
//! queue of keys this run has written.
//!
//! Memory per worker is bounded by construction: histograms only for the ops of the mix,
//! at most 4 GiB of them in all, one read buffer of at most 1 GiB per task (see
//! [`Recorder`] for the figures), and no task outlives a failed one: a panicking task stops
//! the run and every other task is cancelled (a task on a thread of its own, for local
//! files, ends after the op it is in).

mod mix;
mod recorder;
mod schedule;
pub mod sizes;
mod stable;
mod threads;

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chrono::Utc;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

pub use mix::OpMix;
pub use recorder::{Done, OpResult, Recorder};
pub use schedule::{Schedule, Ticket};
use sizes::SizeSampler;

use crate::datagen::DataPattern;
use crate::metrics::{Metrics, Stage};
use crate::spec::{Access, OpKind, Workload};
use crate::stats::{ProcessStats, StageStats, Summary, SUMMARY_VERSION};
use crate::targets::{self, GetRequest, ObjectInfo, ReadCheck, Target, TargetError};

/// `stopped_by` of a measured stage stopped from outside before it finished.
pub const INTERRUPTED: &str = "interrupted";

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("target: {0}")]
    Target(#[from] TargetError),
    #[error(
        "prepare: {failed} of {total} dataset objects could not be written; first error: {first}"
    )]
    Prepare {
        failed: u64,
        total: u64,
        first: TargetError,
    },
    #[error("dataset: {0}")]
    Dataset(String),
    #[error("workload: {0}")]
    Workload(String),
    #[error("not enough space: {0}")]
    Space(String),
}

/// The objects reads run against, with sizes from the prepare stage or the listing.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    pub objects: Vec<ObjectInfo>,
    pub prepare: Option<StageStats>,
    pub pre_stat: Option<StageStats>,
}

/// A workload bound to its target.
#[derive(Debug)]
pub struct Engine {
    workload: Arc<Workload>,
    target: Arc<dyn Target>,
    metrics: Arc<Metrics>,
    worker_id: String,
    pattern: Arc<DataPattern>,
    object_sizes: SizeSampler,
    dataset_sizes: SizeSampler,
}

impl Engine {
    /// Open the workload's target and check it can be used.
    pub async fn open(
        workload: Workload,
        metrics: Arc<Metrics>,
        worker_id: &str,
    ) -> Result<Self, EngineError> {
        let target = targets::open(&workload).await?;
        Self::with_target(workload, target, metrics, worker_id)
    }

    /// Use an already opened target (tests, wrappers).
    pub fn with_target(
        workload: Workload,
        target: Arc<dyn Target>,
        metrics: Arc<Metrics>,
        worker_id: &str,
    ) -> Result<Self, EngineError> {
        let object_sizes =
            SizeSampler::new(&workload.object_size).map_err(EngineError::Workload)?;
        let dataset_sizes =
            SizeSampler::new(workload.dataset_size()).map_err(EngineError::Workload)?;
        let pattern = Arc::new(DataPattern::new(
            workload.seed,
            workload.write.compressibility,
        ));
        Ok(Self {
            workload: Arc::new(workload),
            target,
            metrics,
            worker_id: worker_id.to_string(),
            pattern,
            object_sizes,
            dataset_sizes,
        })
    }

    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    pub fn target(&self) -> &Arc<dyn Target> {
        &self.target
    }

    fn dataset_key(&self, i: u64) -> String {
        format!("{}obj-{i:08}", self.workload.dataset.prefix)
    }

    fn put_prefix(&self) -> String {
        format!("{}put/", self.workload.dataset.prefix)
    }

    /// The most this run can write: the dataset the prepare stage creates plus what `put`
    /// can create (bounded by `write.maxObjects` or `totalOps`). `None` when `put` is
    /// unbounded (a duration with no `write.maxObjects`).
    pub fn max_bytes_written(&self) -> Option<u64> {
        let w = &self.workload;
        let dataset = if w.dataset.prepare {
            w.dataset.objects.saturating_mul(self.dataset_sizes.max())
        } else {
            0
        };
        let puts = if w.weight_of(OpKind::Put) == 0 {
            0
        } else {
            let keys = match (put_keys_per_task(w), w.total_ops) {
                (Some(per_task), Some(n)) => (per_task * w.concurrency as u64).min(n),
                (Some(per_task), None) => per_task * w.concurrency as u64,
                (None, Some(n)) => n,
                (None, None) => return None,
            };
            keys.saturating_mul(self.object_sizes.max())
        };
        Some(dataset.saturating_add(puts))
    }

    /// Refuse, before anything is written, a run that cannot fit in the target's free space.
    pub fn check_space(&self) -> Result<(), EngineError> {
        let (Some(free), Some(need)) = (self.target.free_space(), self.max_bytes_written()) else {
            return Ok(());
        };
        if need > free {
            return Err(EngineError::Space(format!(
                "this run may write up to {} (dataset.objects x dataset size, plus what `put` writes, bounded by write.maxObjects or totalOps) but {} has only {} free; shrink the dataset or lower write.maxObjects",
                crate::units::ByteSize(need),
                self.workload.target,
                crate::units::ByteSize(free),
            )));
        }
        Ok(())
    }

    /// Create the dataset (or list the existing one), then pre-stat it if asked.
    pub async fn prepare(&self) -> Result<Dataset, EngineError> {
        self.metrics.set_stage(Stage::Preparing);
        self.check_space()?;
        let w = &self.workload;
        let needs_dataset = w.weight_of(OpKind::Get) + w.weight_of(OpKind::Stat) > 0;
        let mut ds = Dataset::default();
        if w.dataset.prepare && w.dataset.objects > 0 {
            let started = Instant::now();
            let sizes: Vec<u64> = (0..w.dataset.objects)
                .map(|i| {
                    // Per-object seed: the same index always gets the same size, whoever writes it.
                    let mut rng =
                        SmallRng::seed_from_u64(w.seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    self.dataset_sizes.sample(&mut rng)
                })
                .collect();
            let keys: Vec<String> = (0..w.dataset.objects)
                .map(|i| self.dataset_key(i))
                .collect();
            let results = self
                .for_each_concurrent(
                    keys.clone().into_iter().zip(sizes.iter().copied()),
                    |t, (key, size)| {
                        let pattern = self.pattern.clone();
                        async move { t.put(&key, pattern.payload(&key, size)).await }
                    },
                )
                .await;
            let mut stats = StageStats {
                objects: keys.len() as u64,
                ..Default::default()
            };
            let mut first = None;
            for (i, r) in results.into_iter().enumerate() {
                match r {
                    Ok(req) => {
                        stats.requests += req as u64;
                        stats.bytes += sizes[i];
                    }
                    Err(e) => {
                        stats.errors += 1;
                        first.get_or_insert(e);
                    }
                }
            }
            stats.seconds = started.elapsed().as_secs_f64();
            if let Some(first) = first {
                return Err(EngineError::Prepare {
                    failed: stats.errors,
                    total: stats.objects,
                    first,
                });
            }
            ds.objects = keys
                .into_iter()
                .zip(sizes)
                .map(|(key, size)| ObjectInfo { key, size })
                .collect();
            ds.prepare = Some(stats);
        } else if needs_dataset {
            let listing = self.target.list(&w.dataset.prefix).await?;
            let put_prefix = self.put_prefix();
            ds.objects = listing
                .objects
                .into_iter()
                .filter(|o| !o.key.starts_with(&put_prefix))
                .collect();
            if ds.objects.is_empty() {
                return Err(EngineError::Dataset(format!(
                    "no objects under `{}` in {}; set dataset.prepare: true to create them",
                    w.dataset.prefix, w.target
                )));
            }
        }
        let re = &w.range_engine;
        if re.enabled && re.pre_stat && !ds.objects.is_empty() {
            let started = Instant::now();
            let keys: Vec<String> = ds.objects.iter().map(|o| o.key.clone()).collect();
            let results = self
                .for_each_concurrent(keys, |t, key| async move { t.stat(&key).await })
                .await;
            let mut stats = StageStats {
                objects: ds.objects.len() as u64,
                ..Default::default()
            };
            for (o, r) in ds.objects.iter_mut().zip(results) {
                stats.requests += 1;
                match r {
                    Ok(info) => o.size = info.size,
                    Err(_) => stats.errors += 1,
                }
            }
            stats.seconds = started.elapsed().as_secs_f64();
            ds.pre_stat = Some(stats);
        }
        self.metrics.set_stage(Stage::Ready);
        Ok(ds)
    }

    /// Run `f` over `items` with the workload's concurrency; results in input order.
    async fn for_each_concurrent<I, T, F, Fut>(&self, items: I, f: F) -> Vec<Result<T, TargetError>>
    where
        I: IntoIterator,
        F: Fn(Arc<dyn Target>, I::Item) -> Fut,
        Fut: Future<Output = Result<T, TargetError>>,
    {
        use futures::stream::StreamExt;
        futures::stream::iter(items.into_iter().map(|item| f(self.target.clone(), item)))
            .buffered(self.workload.concurrency as usize)
            .collect()
            .await
    }

    /// Run the measured stage, starting at `start_at` (wall clock) or now, until the duration
    /// or op count is reached, the error budget is spent, or `shutdown` completes.
    pub async fn run(
        &self,
        dataset: &Dataset,
        start_at: Option<SystemTime>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Summary, EngineError> {
        let w = &self.workload;
        let mut shutdown = Box::pin(shutdown);
        // A stop while waiting for the start (the operator's synchronized start may be far
        // off) ends the run at once, with an empty partial summary.
        let mut stopped_before_start = false;
        if let Some(at) = start_at {
            if let Ok(wait) = at.duration_since(SystemTime::now()) {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = &mut shutdown => stopped_before_start = true,
                }
            }
        }
        let started_at = Utc::now();
        let start = Instant::now();
        let schedule = Arc::new(Schedule::new(
            start,
            w.duration.map(|d| d.0),
            w.total_ops,
            w.rate_limit,
        ));
        let ctx = Arc::new(RunCtx {
            engine_workload: self.workload.clone(),
            target: self.target.clone(),
            metrics: self.metrics.clone(),
            pattern: self.pattern.clone(),
            object_sizes: self.object_sizes.clone(),
            dataset: dataset.objects.clone(),
            mix: OpMix::new(&w.ops, |_| false)
                .ok_or_else(|| EngineError::Workload("no operation has a weight above 0".into()))?,
            mix_without_delete: OpMix::new(&w.ops, |op| op == OpKind::Delete),
            written: Mutex::new(VecDeque::new()),
            track_written: w.weight_of(OpKind::Delete) > 0,
            get: GetRequest {
                plan: targets::read_plan(w, self.target.as_ref()),
                check: if w.read.verify {
                    ReadCheck::Verify(self.pattern.clone())
                } else {
                    ReadCheck::Discard
                },
                size_hint: None,
            },
            put_prefix: format!("{}{}/", self.put_prefix(), self.worker_id),
            put_keys_per_task: put_keys_per_task(w),
            schedule: schedule.clone(),
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cursor: AtomicU64::new(0),
            stop_reason: Mutex::new(None),
        });
        let watcher = {
            let (schedule, ctx) = (schedule.clone(), ctx.clone());
            if stopped_before_start {
                // `shutdown` has completed: it must not be polled again.
                ctx.stop(INTERRUPTED);
                tokio::spawn(async {})
            } else {
                tokio::spawn(async move {
                    shutdown.await;
                    ctx.stop(INTERRUPTED);
                    schedule.stop();
                })
            }
        };
        let _stable = w.stop_when_stable.clone().map(|spec| {
            let (count, stop) = (ctx.clone(), ctx.clone());
            stable::AbortOnDrop(tokio::spawn(stable::watch(
                spec,
                start,
                Arc::new(move || count.done.load(Ordering::Relaxed)),
                move |reason| stop.stop(reason),
            )))
        });
        // Tasks on threads of their own are not cancelled with the JoinSet: if this future is
        // dropped mid-run, the stopped schedule ends them at their next ticket.
        let _stop_on_drop = StopOnDrop(schedule.clone());
        self.metrics.set_stage(Stage::Running);
        let cpu0 = ProcessStats::now();
        let mut tasks = tokio::task::JoinSet::new();
        // Blocking targets (local files): every task on a thread of its own (see `threads`).
        let own_threads = self.target.blocking_io();
        let gate = threads::Gate::default();
        for i in 0..w.concurrency {
            let ctx = ctx.clone();
            let rng = SmallRng::seed_from_u64(
                w.seed
                    .wrapping_add(0x5851_F42D_4C95_7F2D_u64.wrapping_mul(i as u64 + 1)),
            );
            if !own_threads {
                tasks.spawn(ctx.task(i, rng));
                continue;
            }
            let name = format!("benchrun-io-{i}");
            match threads::spawn(
                name,
                tokio::runtime::Handle::current(),
                gate.clone(),
                ctx.clone().task(i, rng),
            ) {
                Ok(task) => {
                    tasks.spawn(task);
                }
                Err(e) => {
                    // Stop the tasks already started (at their next ticket) and wait for them.
                    ctx.stop("a task's thread could not be started");
                    gate.open();
                    while tasks.join_next().await.is_some() {}
                    watcher.abort();
                    self.metrics.set_stage(Stage::Done);
                    return Err(EngineError::Workload(format!(
                        "cannot start the thread of task {i} of {}: {e}; on {} each task runs on a thread of its own: lower concurrency or raise the process's thread limit",
                        w.concurrency, w.target
                    )));
                }
            }
        }
        gate.open();
        let mut all = Recorder::new(self.metrics.clone(), Recorder::mix_ops(w));
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(rec) => all.absorb(rec),
                Err(e) => {
                    // One task panicked (or was cancelled): stop every other one now, so none
                    // keeps hitting the target, and report the failure instead of a result.
                    ctx.stop("a task failed");
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                    watcher.abort();
                    self.metrics.set_stage(Stage::Done);
                    let what = if e.is_panic() {
                        let p = e.into_panic();
                        let msg = p
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        format!("panicked: {}", crate::spec::clip(&msg))
                    } else {
                        e.to_string()
                    };
                    return Err(EngineError::Workload(format!(
                        "a worker task failed ({what}); all tasks were stopped"
                    )));
                }
            }
        }
        let elapsed = start.elapsed();
        let process = ProcessStats::now().since(&cpu0);
        watcher.abort();
        self.metrics.set_stage(Stage::Done);
        let stopped_by = ctx
            .stop_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| {
                if w.total_ops.is_some() {
                    "totalOps"
                } else {
                    "duration"
                }
                .to_string()
            });
        // Stopped from outside (signal, shutdown request) before the duration or op count.
        let partial = stopped_by == INTERRUPTED;
        let mut s = Summary {
            version: SUMMARY_VERSION,
            target: w.target.clone(),
            workers: 1,
            worker_ids: vec![self.worker_id.clone()],
            started_at,
            elapsed_seconds: elapsed.as_secs_f64(),
            stopped_by,
            ops: OpKind::ALL
                .iter()
                .zip(all.ops)
                .filter_map(|(op, s)| s.map(|s| (*op, s)))
                .filter(|(op, s)| s.count > 0 || w.weight_of(*op) > 0)
                .collect(),
            report: Default::default(),
            timeline: all.timeline,
            process,
            prepare: dataset.prepare.clone(),
            pre_stat: dataset.pre_stat.clone(),
            cleanup: None,
            partial,
        };
        s.refresh();
        Ok(s)
    }

    /// Delete what this run created: the dataset, if the prepare stage wrote it, and every
    /// object `put` wrote. An existing dataset used with `prepare: false` is never deleted.
    pub async fn cleanup(&self) -> Result<StageStats, EngineError> {
        self.metrics.set_stage(Stage::CleaningUp);
        let started = Instant::now();
        let scope = if self.workload.dataset.prepare {
            self.workload.dataset.prefix.clone()
        } else {
            self.put_prefix()
        };
        let listing = self.target.list(&scope).await?;
        let mut stats = StageStats {
            objects: listing.objects.len() as u64,
            requests: listing.requests as u64,
            ..Default::default()
        };
        let keys = listing.objects.into_iter().map(|o| o.key);
        for r in self
            .for_each_concurrent(keys, |t, key| async move { t.delete(&key).await })
            .await
        {
            stats.requests += 1;
            match r {
                // Another worker sharing the prefix may have deleted it first.
                Ok(()) | Err(TargetError::NotFound { .. }) => {}
                Err(_) => stats.errors += 1,
            }
        }
        stats.seconds = started.elapsed().as_secs_f64();
        self.metrics.set_stage(Stage::Done);
        Ok(stats)
    }
}

/// Stops a schedule when dropped.
struct StopOnDrop(Arc<Schedule>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// What the tasks of one measured stage share.
#[derive(Debug)]
struct RunCtx {
    engine_workload: Arc<Workload>,
    target: Arc<dyn Target>,
    metrics: Arc<Metrics>,
    pattern: Arc<DataPattern>,
    object_sizes: SizeSampler,
    dataset: Vec<ObjectInfo>,
    mix: OpMix,
    mix_without_delete: Option<OpMix>,
    /// Keys written by `put`, oldest first, for `delete` to remove.
    written: Mutex<VecDeque<String>>,
    /// Whether the mix deletes, so `put` must remember its keys (decided once, not per op).
    track_written: bool,
    get: GetRequest,
    put_prefix: String,
    /// With `write.maxObjects`: how many keys each task cycles through (tasks never share one).
    put_keys_per_task: Option<u64>,
    schedule: Arc<Schedule>,
    done: AtomicU64,
    failed: AtomicU64,
    /// Next dataset index for `access: sequential`.
    cursor: AtomicU64,
    stop_reason: Mutex<Option<String>>,
}

impl RunCtx {
    fn stop(&self, reason: &str) {
        let mut r = self.stop_reason.lock().unwrap_or_else(|e| e.into_inner());
        r.get_or_insert_with(|| reason.to_string());
        self.schedule.stop();
    }

    async fn task(self: Arc<Self>, id: u32, mut rng: SmallRng) -> Recorder {
        let mut rec = Recorder::new(
            self.metrics.clone(),
            Recorder::mix_ops(&self.engine_workload),
        );
        let start = self.schedule.start();
        let open_loop = self.schedule.is_open_loop();
        let mut seq = 0u64;
        while let Some(ticket) = self.schedule.next(Instant::now()) {
            // Woken by a stop (signal, error budget, a failed task): at 0.001 ops/s the next
            // ticket may be 1000 s away.
            if ticket.due > Instant::now() && self.schedule.sleep_until(ticket.due).await {
                break;
            }
            let began = if open_loop {
                ticket.due
            } else {
                Instant::now()
            };
            let mut op = self.mix.pick(&mut rng);
            let mut delete_key = None;
            if op == OpKind::Delete {
                delete_key = self
                    .written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pop_front();
                if delete_key.is_none() {
                    // Nothing written yet to delete: draw again from the rest of the mix.
                    match &self.mix_without_delete {
                        Some(m) => op = m.pick(&mut rng),
                        None => continue,
                    }
                }
            }
            self.metrics.op_started();
            let outcome = self.run_op(op, id, &mut seq, delete_key, &mut rng).await;
            let end = Instant::now();
            let failed = rec
                .record(OpResult {
                    op,
                    latency: end - began,
                    finished_at: end - start,
                    outcome,
                })
                .is_some();
            self.check_budget(failed);
        }
        rec
    }

    fn check_budget(&self, failed: bool) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let failed = if failed {
            self.failed.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.failed.load(Ordering::Relaxed)
        };
        let Some(b) = &self.engine_workload.error_budget else {
            return;
        };
        if let Some(max) = b.max_errors {
            if failed > max {
                self.stop(&format!(
                    "errorBudget: {failed} errors exceed maxErrors {max}"
                ));
            }
        }
        if let Some(ratio) = b.max_error_ratio {
            if done >= 100 && failed as f64 / done as f64 > ratio {
                self.stop(&format!(
                    "errorBudget: {failed} of {done} operations failed, above maxErrorRatio {ratio}"
                ));
            }
        }
    }

    async fn run_op(
        &self,
        op: OpKind,
        task: u32,
        seq: &mut u64,
        delete_key: Option<String>,
        rng: &mut SmallRng,
    ) -> Result<Done, TargetError> {
        let t = &self.target;
        let pick = |rng: &mut SmallRng| {
            let n = self.dataset.len().max(1) as u64;
            let i = match self.engine_workload.dataset.access {
                Access::Random => rng.random_range(0..n),
                Access::Sequential => self.cursor.fetch_add(1, Ordering::Relaxed) % n,
            };
            self.dataset
                .get(i as usize)
                .ok_or_else(|| TargetError::Other("the dataset is empty".into()))
        };
        match op {
            OpKind::Get => {
                let obj = pick(rng)?;
                let mut req = self.get.clone();
                req.size_hint = Some(obj.size);
                let out = t.get(&obj.key, &req).await?;
                Ok(Done {
                    bytes: out.bytes,
                    requests: out.requests,
                    ttfb: Some(out.ttfb),
                })
            }
            OpKind::Put => {
                *seq += 1;
                let n = match self.put_keys_per_task {
                    Some(keys) => *seq % keys,
                    None => *seq,
                };
                let key = format!("{}{task}-{n}", self.put_prefix);
                let size = self.object_sizes.sample(rng);
                let requests = t.put(&key, self.pattern.payload(&key, size)).await?;
                if self.track_written {
                    self.written
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push_back(key);
                }
                Ok(Done {
                    bytes: size,
                    requests,
                    ttfb: None,
                })
            }
            OpKind::Stat => {
                t.stat(&pick(rng)?.key).await?;
                Ok(Done {
                    bytes: 0,
                    requests: 1,
                    ttfb: None,
                })
            }
            OpKind::List => {
                let l = t.list(&self.engine_workload.dataset.prefix).await?;
                Ok(Done {
                    bytes: 0,
                    requests: l.requests,
                    ttfb: None,
                })
            }
            OpKind::Delete => {
                let key =
                    delete_key.ok_or_else(|| TargetError::Other("delete without a key".into()))?;
                t.delete(&key).await?;
                Ok(Done {
                    bytes: 0,
                    requests: 1,
                    ttfb: None,
                })
            }
        }
    }
}

/// With `write.maxObjects`, the keys each task writes in turn: an equal share, so tasks never
/// write the same key at once and all of them together stay within the bound.
fn put_keys_per_task(w: &Workload) -> Option<u64> {
    w.write
        .max_objects
        .map(|max| (max / w.concurrency.max(1) as u64).max(1))
}

/// How long until `at`, or zero if it has passed.
pub fn until(at: SystemTime) -> Duration {
    at.duration_since(SystemTime::now()).unwrap_or_default()
}
