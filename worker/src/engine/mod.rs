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
//!
//! # Files
//! - `mod.rs`: [`Engine`], [`Dataset`], [`EngineError`] and what the tasks of a run share
//! - `prepare.rs`: the space check, the dataset written or listed (and pre-stat'd), cleanup
//! - `objects.rs`: the dataset's objects, 8 bytes each when the prepare stage wrote them
//! - `run.rs`: the measured stage: tasks on the schedule, the task loop, the summary
//! - `ops.rs`: one op of the mix against the target (and what it was about, for the op-log)
//! - `mix.rs`, `schedule.rs`, `sizes.rs`, `recorder.rs`, `stable.rs`: the op choice, the
//!   tickets, object sizes, per-task recording, `stopWhenStable`
//! - `failed.rs`: failed ops' latency per op and error kind, sparse per task
//! - `threads.rs`, `shards.rs`: where tasks run (a thread each for local files, a few
//!   single-threaded runtimes for network targets)
//! - `block/`: block workloads' tasks (io_uring or sync) on a [`Volume`]

mod block;
mod failed;
mod keys;
mod mix;
mod objects;
mod ops;
mod prepare;
mod recorder;
mod run;
mod schedule;
mod shards;
pub mod sizes;
mod stable;
mod threads;
pub(crate) mod wait;

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chrono::Utc;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::time::Instant;

pub use mix::OpMix;
pub use objects::{Object, Objects};
pub use recorder::{Done, OpResult, Recorder};
pub use schedule::{Schedule, Ticket};
pub use shards::SPARE_CONNECTIONS;
use sizes::SizeSampler;

use crate::datagen::{DataPattern, Writer};
use crate::metrics::{Metrics, Stage};
use crate::spec::{OpKind, Workload};
use crate::stats::{
    OpenLoop, ProcessStats, StageStats, Summary, Warmup, SUMMARY_VERSION, TOOL_VERSION,
};
use crate::targets::{self, GetRequest, ObjectInfo, ReadCheck, Target, TargetError};
use crate::volume::{Layout, Volume};

/// `stopped_by` of a measured stage stopped from outside before it finished.
pub const INTERRUPTED: &str = "interrupted";

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The target could not be opened or used. Not a `source`: the message already holds
    /// the target's, and `{:#}` would print it twice.
    #[error("target: {0}")]
    Target(TargetError),
    /// Dataset objects could not be written.
    #[error(
        "prepare: {failed} of {total} dataset objects could not be written; first error: {first}"
    )]
    Prepare {
        /// Objects that failed.
        failed: u64,
        /// Objects of the dataset.
        total: u64,
        /// The first failure.
        first: TargetError,
    },
    /// The dataset to read is missing (nothing listed under its prefix).
    #[error("dataset: {0}")]
    Dataset(String),
    /// The workload cannot run here (a bad size, a thread that did not start, a failed task).
    #[error("workload: {0}")]
    Workload(String),
    /// The run may write more than the target has free.
    #[error("not enough space: {0}")]
    Space(String),
}

impl From<TargetError> for EngineError {
    fn from(e: TargetError) -> Self {
        EngineError::Target(e)
    }
}

/// What of `workload` needs the run's worker count (a perNode run's is known only at its
/// start), checked by a training or checkpoint worker before it does anything.
pub(crate) fn check_workers(workload: &Workload, count: u32) -> Result<(), EngineError> {
    workload.check_workers(count).map_err(|e| {
        EngineError::Workload(
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        )
    })
}

/// The objects reads run against, with sizes from the prepare stage or the listing.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    /// The objects, with their sizes.
    pub objects: Objects,
    /// The prepare stage, when it wrote or listed the dataset.
    pub prepare: Option<StageStats>,
    /// The pre-stat of the dataset, when it ran.
    pub pre_stat: Option<StageStats>,
    /// Block workloads: what laying the volume's dataset out did.
    pub layout: Option<Layout>,
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
    /// Block workloads: the files or device their reads and writes go to. `target` is then
    /// the local target of the same path, used only for its read plan.
    volume: Option<Arc<Volume>>,
    /// With `run --oplog`: where every op of the measured stage (and warm-up) is recorded.
    oplog: Option<Arc<crate::oplog::Sink>>,
    /// `stopWhenStable` in an agent of a run of several workers (see [`RunStability`]).
    run_stability: Option<RunStability>,
    /// Who writes (the run and this worker): keys what this worker writes and where it
    /// starts in a shared dataset (see [`crate::datagen`]).
    writer: Writer,
}

/// `stopWhenStable` decided by the run, not by this worker: the seconds it counts are shared
/// (the agent serves them to the operator), it does not stop on its own stability, and the
/// operator's stop instant ends its measured stage.
#[derive(Clone, Debug)]
pub struct RunStability {
    /// Whether this worker still stops on its own stability (false: the run decides).
    pub local: bool,
    /// The measured stage's ops per second, the last ones, filled while running.
    pub seconds: Arc<Mutex<Option<benchrun_api::stable::SecondCounts>>>,
    /// The run's stop: the wall-clock instant and why.
    pub stop_at: tokio::sync::watch::Receiver<Option<StopAt>>,
}

/// The operator's stop instant (wall clock) and the decision behind it.
pub type StopAt = (chrono::DateTime<Utc>, benchrun_api::stable::StableDecision);

impl Engine {
    /// Open the workload's target and check it can be used.
    pub async fn open(
        workload: Workload,
        metrics: Arc<Metrics>,
        worker_id: &str,
    ) -> Result<Self, EngineError> {
        if workload.block.is_some() {
            let w = workload.clone();
            let volume = tokio::task::spawn_blocking(move || Volume::open(&w))
                .await
                .map_err(|e| EngineError::Workload(format!("opening the volume: {e}")))?
                .map_err(|e| EngineError::Workload(e.to_string()))?;
            // A directory gets the same checks as for objects (writable; O_DIRECT not on
            // tmpfs); a device has had its own.
            let target = match volume.kind {
                crate::volume::Kind::Files { .. } => targets::open(&workload).await?,
                crate::volume::Kind::Device(_) => targets::local(&workload)?,
            };
            let mut e = Self::with_target(workload, target, metrics, worker_id)?;
            e.volume = Some(Arc::new(volume));
            return Ok(e);
        }
        if workload.skips_tls_verification() {
            // Loud on purpose: the run's figures may come from whoever answered.
            let list = workload.storage.endpoint_list().join(", ");
            let shown = match list.as_str() {
                "" => "the service's endpoint".into(),
                l => crate::spec::clip(l),
            };
            eprintln!(
                "warning: TLS certificates of {shown} are NOT verified (storage.tls.insecureSkipVerify: true): \
                 any host can answer for the endpoint; the summary says tlsVerificationSkipped"
            );
        }
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
        let pattern = Arc::new(DataPattern::new(workload.seed, &workload.data()));
        Ok(Self {
            workload: Arc::new(workload),
            target,
            metrics,
            worker_id: worker_id.to_string(),
            pattern,
            object_sizes,
            dataset_sizes,
            volume: None,
            oplog: None,
            run_stability: None,
            writer: Writer::default(),
        })
    }

    /// The same engine recording every op of its runs to `sink` (`run --oplog`). Object
    /// workloads only: a block workload's I/Os are not recorded.
    pub fn with_oplog(mut self, sink: Arc<crate::oplog::Sink>) -> Self {
        self.oplog = Some(sink);
        self
    }

    /// The same engine writing as `writer` (the run and this worker's place in it): without
    /// it, worker 0 of a run of its own.
    pub fn with_writer(mut self, writer: Writer) -> Self {
        self.writer = writer;
        self
    }

    /// The seed of this worker's generators: the workload's seed keyed by the writer.
    fn writer_seed(&self) -> u64 {
        self.writer.key(self.workload.seed)
    }

    /// The same engine with `stopWhenStable` watched as `s` says (the agent's, see
    /// [`RunStability`]).
    pub fn with_run_stability(mut self, s: RunStability) -> Self {
        self.run_stability = Some(s);
        self
    }

    /// The same target (and a block workload's volume) with another workload, such as a
    /// matrix's warm-up of another length.
    pub fn with_workload(&self, workload: Workload) -> Result<Self, EngineError> {
        let mut e = Self::with_target(
            workload,
            self.target.clone(),
            self.metrics.clone(),
            &self.worker_id,
        )?;
        e.volume = self.volume.clone();
        e.writer = self.writer;
        Ok(e)
    }

    /// The workload run.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// The target it runs against.
    pub fn target(&self) -> &Arc<dyn Target> {
        &self.target
    }

    fn put_prefix(&self) -> String {
        format!("{}put/", self.workload.dataset.prefix)
    }
}

/// Keys of `put` kept for `delete` to remove: about 60 bytes each, so at most ~60 MiB however
/// long a run whose puts outrun its deletes lasts.
const MAX_TRACKED_WRITES: usize = 1 << 20;

/// What the tasks of one measured stage share.
#[derive(Debug)]
struct RunCtx {
    engine_workload: Arc<Workload>,
    metrics: Arc<Metrics>,
    pattern: Arc<DataPattern>,
    object_sizes: SizeSampler,
    /// The dataset, shared with the engine (never copied).
    dataset: Objects,
    mix: OpMix,
    mix_without_delete: Option<OpMix>,
    /// Keys written by `put`, oldest first, for `delete` to remove; at most
    /// [`MAX_TRACKED_WRITES`].
    written: Mutex<VecDeque<String>>,
    /// Whether the mix deletes, so `put` must remember its keys (decided once, not per op).
    track_written: bool,
    get: GetRequest,
    put_prefix: String,
    /// With `write.maxObjects`: how many keys each task cycles through (tasks never share one).
    put_keys_per_task: Option<u64>,
    /// The writer's seed, which keys PUT payloads (see [`Writer`]).
    writer_seed: u64,
    schedule: Arc<Schedule>,
    done: AtomicU64,
    failed: AtomicU64,
    /// Which dataset object each read visits (`dataset.access`).
    keys: keys::KeyPicker,
    stop_reason: Mutex<Option<String>>,
    /// Why `stopWhenStable` ended the stage: this worker's decision, or the run's (which
    /// counts only if the stage reached the schedule's cut).
    stable: Mutex<Option<benchrun_api::stable::StableDecision>>,
    /// With `run --oplog`: the op-log's sink.
    oplog: Option<Arc<crate::oplog::Sink>>,
}

/// With `write.maxObjects`, the keys each task writes in turn: an equal share, so tasks never
/// write the same key at once and all of them together stay within the bound.
fn put_keys_per_task(w: &Workload) -> Option<u64> {
    w.write
        .max_objects
        .map(|max| (max / w.concurrency.max(1) as u64).max(1))
}

/// Whether the workload's target is a local `file://` or `direct://` one.
/// How long until `at`, or zero if it has passed.
pub fn until(at: SystemTime) -> Duration {
    at.duration_since(SystemTime::now()).unwrap_or_default()
}
