//! Training workloads (`training`): a data loader's epochs feeding emulated accelerators,
//! shaped like MLPerf Storage's workloads (not an MLPerf submission). docs/TRAINING.md.
//!
//! The prepare stage writes the dataset (or reuses it), then every epoch reads every
//! sample once, in an order shuffled per epoch from the seed and split over every
//! accelerator of every worker of the run, and the summary reports the accelerators'
//! utilization (AU), samples/s, MiB/s and the per-step data wait.
//!
//! # Files
//! - `dataset.rs`: the dataset's shape (files, shards, sample sizes) and its prepare stage
//! - `sampler.rs`: the epoch order (a keyed permutation) and each accelerator's slice
//! - `accel.rs`: one epoch: readers with bounded prefetch queues, accelerators computing
//! - `cache.rs`: the page cache dropped before an epoch, its residency; the clients' RAM
//! - `figures.rs`: the outcomes as summary figures, and the table
//! - `search.rs`: the maximum-accelerators search (`training.search`), probe by probe

mod accel;
mod cache;
pub mod dataset;
pub mod figures;
pub mod sampler;
pub mod search;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use benchrun_api::training::{AuFigures, TrainingStats};
use chrono::Utc;

use crate::datagen::DataPattern;
use crate::engine::{EngineError, INTERRUPTED};
use crate::oplog::Sink;
use crate::spec::{OpKind, TargetUri, Workload};
use crate::stats::{ProcessStats, Summary};
use crate::targets::{self, ReadCheck, Target};

pub use cache::drop_file as drop_from_page_cache;
pub use figures::table;

/// How long a worker waits for the other workers' share of the dataset to appear.
pub const PREPARE_WAIT: Duration = Duration::from_secs(600);

/// Who runs this part of a training run, and what it records.
#[derive(Debug, Clone)]
pub struct Options {
    /// This worker's name in the summary.
    pub worker_id: String,
    /// This worker's index among the run's workers (0-based).
    pub index: u32,
    /// The run's workers: the epoch order is split over all their accelerators.
    pub count: u32,
    /// With `--oplog`: every sample read is recorded.
    pub oplog: Option<Arc<Sink>>,
    /// How long to wait for the other workers' dataset files.
    pub prepare_wait: Duration,
    /// The live metrics to count sample reads and steps in (`/metrics`), if served.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// Run a training workload: prepare (or reuse) the dataset, then its epochs.
pub async fn run(
    workload: &Workload,
    target: Arc<dyn Target>,
    opts: Options,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Summary, EngineError> {
    prepare(workload, target, opts).await?.run(stop).await
}

/// A training run set up before its start instant: the dataset prepared (or found), every
/// reader's client open. [`Prepared::run`] is the measured part, so an agent runs it at the
/// run's start instant with every other worker.
#[derive(Debug)]
pub struct Prepared {
    workload: Workload,
    target: Arc<dyn Target>,
    opts: Options,
    shape: benchrun_api::spec::TrainingShape,
    dataset: dataset::Shape,
    pattern: Arc<DataPattern>,
    prepare: Option<crate::stats::StageStats>,
    local_root: Option<std::path::PathBuf>,
    readers: Vec<accel::Reader>,
}

/// The set-up of a training run: the workload checked, this worker's share of the dataset
/// written (or found) and the other workers' shares waited for, the readers' clients open.
pub async fn prepare(
    workload: &Workload,
    target: Arc<dyn Target>,
    opts: Options,
) -> Result<Prepared, EngineError> {
    let spec = workload
        .training
        .as_ref()
        .ok_or_else(|| EngineError::Workload("not a training workload".into()))?;
    let shape = spec
        .shape()
        .map_err(|(k, m)| EngineError::Workload(format!("training.{k}: {m}")))?;
    if opts.count == 0 || opts.index >= opts.count {
        return Err(EngineError::Workload(format!(
            "worker index {} of {} workers: the index must be below the count",
            opts.index, opts.count
        )));
    }
    crate::engine::check_workers(workload, opts.count)?;
    let dataset = dataset::Shape::new(
        &shape,
        workload.seed,
        &workload.data(),
        &workload.dataset.prefix,
    );
    let pattern = Arc::new(DataPattern::new(workload.seed, &workload.data()));
    let prepare = if workload.dataset.prepare {
        Some(
            dataset::prepare(
                &target,
                &dataset,
                &pattern,
                (opts.index, opts.count),
                workload.concurrency as usize,
                opts.prepare_wait,
            )
            .await
            .map_err(|e| EngineError::Dataset(format!("training dataset: {e}")))?,
        )
    } else {
        None
    };
    let local_root = match workload.target_uri() {
        Ok(TargetUri::File { root } | TargetUri::Direct { root }) => Some(root),
        _ => None,
    };
    let readers = {
        let n = shape.accelerators as usize * shape.readers as usize;
        let t = target.clone();
        tokio::task::spawn_blocking(move || {
            (0..n)
                .map(|_| accel::Reader::new(&t))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| EngineError::Workload(format!("starting readers: {e}")))??
    };
    Ok(Prepared {
        workload: workload.clone(),
        target,
        opts,
        shape,
        dataset,
        pattern,
        prepare,
        local_root,
        readers,
    })
}

impl Prepared {
    /// The measured part: every epoch from now, until `stop` or the workload's `duration`.
    pub async fn run(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Summary, EngineError> {
        let Prepared {
            workload,
            target,
            opts,
            shape,
            dataset,
            pattern,
            prepare,
            local_root,
            readers,
        } = self;
        let workload = &workload;
        let stop_flag = Arc::new(AtomicBool::new(false));
        {
            let flag = stop_flag.clone();
            tokio::spawn(async move {
                stop.await;
                flag.store(true, Ordering::Relaxed);
            });
        }
        let run_start = Instant::now();
        let ctx = Arc::new(accel::Ctx {
            shape: shape.clone(),
            dataset: dataset.clone(),
            seed: workload.seed,
            worker: (opts.index, opts.count),
            plan: targets::read_plan(workload, target.as_ref()),
            check: if workload.read.verify {
                ReadCheck::Verify(pattern.clone())
            } else {
                ReadCheck::Discard
            },
            oplog: opts.oplog.clone(),
            run_start,
            stop: stop_flag.clone(),
            deadline: workload.duration.map(|d| run_start + d.0),
            metrics: opts.metrics.clone(),
        });
        let started_at = Utc::now();
        let before = ProcessStats::now();
        let mut stats = TrainingStats {
            samples: dataset.samples(),
            dataset_bytes: dataset.total_bytes(),
            accelerators: shape.accelerators as u64,
            min_au_percent: shape.min_au,
            client_ram_bytes: cache::ram_bytes(),
            cache_dropped: local_root.is_none() || shape.drop_cache,
            ..Default::default()
        };
        let mut reads = crate::stats::OpStats::default();
        let mut mine = AuFigures::default();
        let mut first_error = None;
        let mut readers = readers;
        // The page cache's residency when the first epoch's reads begin (after its drop).
        let mut resident_at_start = None;
        for e in 0..shape.epochs {
            if ctx.stop.load(Ordering::Relaxed) || ctx.deadline.is_some_and(|d| Instant::now() >= d)
            {
                break;
            }
            if let (Some(root), true) = (&local_root, shape.drop_cache) {
                drop_cache(root, &dataset).await?;
            }
            // Measured before every epoch (after its drop), so a drop that did not take, or a
            // cache that kept what the previous epoch read, shows in that epoch's row.
            let resident = match &local_root {
                Some(root) => residency(root, &dataset).await,
                None => None,
            };
            if e == 0 {
                resident_at_start = resident;
            }
            let c = ctx.clone();
            let (outcomes, back) = tokio::task::spawn_blocking(move || {
                let o = accel::epoch(&c, e, &readers);
                (o, readers)
            })
            .await
            .map_err(|e| EngineError::Workload(format!("an epoch's threads failed: {e}")))?;
            readers = back;
            for o in &outcomes {
                reads.merge(&o.reads);
                mine.merge(&AuFigures::one(
                    o.compute.as_micros() as u64,
                    o.wall.as_micros() as u64,
                ));
                if first_error.is_none() {
                    first_error = o.first_error.clone();
                }
            }
            let mut figures = figures::epoch_figures(e, &outcomes);
            figures.cache_percent_at_start = resident
                .filter(|&(bytes, _)| bytes > 0)
                .map(|(bytes, resident)| 100.0 * resident as f64 / bytes as f64);
            stats.epochs.push(figures);
        }
        stats.workers.insert(opts.worker_id.clone(), mine);
        if let (Some(root), Some((bytes, at_start))) = (&local_root, resident_at_start) {
            if let Some((_, at_end)) = residency(root, &dataset).await {
                let cache = benchrun_api::stats::CacheResidency {
                    bytes,
                    resident_at_start: at_start,
                    resident_before_warmup: None,
                    resident_at_end: at_end,
                    dropped: shape.drop_cache as u32,
                };
                stats.cache_targets.insert(
                    crate::volume::files_identity(root),
                    benchrun_api::stats::TargetVolume {
                        workers: 1,
                        dataset_bytes: bytes,
                        cache: Some(cache.clone()),
                    },
                );
                stats.cache = Some(cache);
            }
        }
        if reads.count > 0 && reads.errors == reads.count {
            return Err(EngineError::Dataset(format!(
                "every read of the training dataset failed; first: {}",
                first_error.unwrap_or_default()
            )));
        }
        if let Some(e) = first_error {
            eprintln!(
                "warning: {} of {} sample reads failed; first: {e}",
                reads.errors, reads.count
            );
        }
        let interrupted = ctx.stop.load(Ordering::Relaxed);
        let all_done =
            stats.epochs.len() == shape.epochs as usize && stats.epochs.iter().all(|e| e.complete);
        let mut summary = Summary {
            workload: Some(workload.clone()),
            target: workload.target.clone(),
            workers: 1,
            worker_ids: vec![opts.worker_id.clone()],
            started_at,
            elapsed_seconds: run_start.elapsed().as_secs_f64(),
            stopped_by: if interrupted {
                INTERRUPTED.into()
            } else if all_done {
                format!("epochs: {}", shape.epochs)
            } else {
                "duration".into()
            },
            partial: interrupted,
            ops: [(OpKind::Get, reads)].into(),
            process: ProcessStats::now().since(&before),
            prepare,
            training: Some(stats),
            ..Default::default()
        };
        summary.refresh();
        Ok(summary)
    }
}

/// The dataset's bytes under `root` and how many the page cache holds (off the async
/// threads); `None`, said on stderr, when a file cannot be measured (the summary then has no
/// residency, as on object storage).
async fn residency(root: &std::path::Path, dataset: &dataset::Shape) -> Option<(u64, u64)> {
    let (root, dataset) = (root.to_path_buf(), dataset.clone());
    tokio::task::spawn_blocking(move || cache::resident(&root, &dataset))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .inspect_err(|e| {
            eprintln!("warning: the dataset's page-cache residency is not measured: {e}")
        })
        .ok()
}

/// Drop every file of the dataset from the page cache (off the async threads).
async fn drop_cache(root: &std::path::Path, dataset: &dataset::Shape) -> Result<(), EngineError> {
    let (root, dataset) = (root.to_path_buf(), dataset.clone());
    tokio::task::spawn_blocking(move || {
        for f in 0..dataset.files() {
            let path = root.join(dataset.file_key(f));
            cache::drop_file(&path).map_err(|e| {
                EngineError::Workload(format!(
                    "dropping {} from the page cache: {e}",
                    path.display()
                ))
            })?;
        }
        Ok(())
    })
    .await
    .map_err(|e| EngineError::Workload(format!("dropping the page cache: {e}")))?
}
