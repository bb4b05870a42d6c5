//! Checkpoint workloads (`checkpoint`): every rank of this worker writes its shard at the
//! same instant (a file written and fsync'd, or an object uploaded in parts above
//! `write.multipartThreshold`), the shards are dropped from the page cache, then every rank
//! reads its shard back at one instant and checks every byte (restore). Save and restore
//! time per repeat is the slowest rank's, as MLPerf Storage reports it (docs/TRAINING.md).
//!
//! Each shard's content is the data generator's for its key and its save, so a restore by
//! any process verifies any shard, and no save writes what an earlier one did (a
//! deduplicating store would otherwise keep the second save of the same shard for free): the
//! save of repeat r is keyed by the saves still to come after it (`repeats - 1 - r`), so the
//! last save is always key 0, which a later `mode: restore` run checks. With `restoreShift`, rank r restores the shard rank r + shift saved,
//! as a job restarted on other nodes does, and when that moves restores onto other workers
//! the workers meet through markers on the storage between save and restore (`handoff.rs`).
//! Ranks are tasks. Memory per rank is bounded, not a shard: a shard is written from a
//! [`Payload`](crate::targets::Payload) that generates 4 MiB at a time as the file is
//! written (or a part at a time, at most four in flight, as the object is uploaded), and read
//! back in chunks.

mod handoff;

use handoff::Step;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use benchrun_api::checkpoint::{gb_per_sec, CheckpointStats, RankTimes, RepeatFigures};
use benchrun_api::latency::Latency;
use chrono::Utc;

use crate::datagen::DataPattern;
use crate::engine::{EngineError, INTERRUPTED};
use crate::metrics::Metrics;
use crate::spec::{CheckpointMode, OpKind, TargetUri, Workload};
use crate::stats::{OpStats, ProcessStats, Summary};
use crate::targets::{self, GetRequest, ReadCheck, Target, TargetError};

/// How far ahead of now the ranks' common start instant is set: every rank's task is
/// waiting by then.
const BARRIER_AHEAD: Duration = Duration::from_millis(50);

/// This worker's place in the run.
#[derive(Clone, Debug)]
pub struct Options {
    /// This worker's name in the summary.
    pub worker_id: String,
    /// Its index among the run's workers.
    pub index: u32,
    /// The run's workers.
    pub count: u32,
    /// The live metrics (`/metrics`) to count each rank's save and restore in, if served.
    pub metrics: Option<Arc<Metrics>>,
    /// A name every worker of the run shares (the agents' start instant), for the markers
    /// of a shifted restore across workers; `None` standalone.
    pub run_token: Option<String>,
}

/// Which data generator a shard's bytes come from: a thin adapter over
/// [`DataPattern`]'s public API (`payload`, `first_mismatch` by key and offset), so the
/// generator can change behind it.
#[derive(Debug, Clone)]
struct ShardData(Arc<DataPattern>);

impl ShardData {
    /// The data of the save `k` saves before the last one (see the module's docs).
    fn save(&self, k: u64) -> Self {
        Self(Arc::new(self.0.rekeyed(k)))
    }

    fn payload(&self, key: &str, len: u64) -> crate::targets::Payload {
        self.0.payload(key, len)
    }

    fn check(&self) -> ReadCheck {
        ReadCheck::Verify(self.0.clone())
    }
}

/// The shards' directory: `<prefix>checkpoint-<hash of the model and seed>/`.
fn shard_dir(prefix: &str, model: (u64, u32), seed: u64) -> String {
    use crate::training::sampler::mix;
    let h = mix(mix(seed ^ model.0) ^ model.1 as u64);
    format!("{prefix}checkpoint-{:08x}/", h as u32)
}

/// A shard's key, in [`shard_dir`].
fn shard_key(dir: &str, rank: u32) -> String {
    format!("{dir}rank-{rank:05}")
}

/// Run a checkpoint workload: `repeats` of save and restore over this worker's ranks.
pub async fn run(
    workload: &Workload,
    target: Arc<dyn Target>,
    opts: Options,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Summary, EngineError> {
    let spec = workload
        .checkpoint
        .as_ref()
        .ok_or_else(|| EngineError::Workload("not a checkpoint workload".into()))?;
    let bad = |(k, m): (&str, String)| EngineError::Workload(format!("checkpoint.{k}: {m}"));
    let model = spec.model().map_err(bad)?;
    let shard = spec.shard_size().map_err(bad)?;
    if opts.count == 0 || opts.index >= opts.count {
        return Err(EngineError::Workload(format!(
            "worker index {} of {} workers: the index must be below the count",
            opts.index, opts.count
        )));
    }
    let run_ranks = opts.count as u64 * spec.ranks_per_worker as u64;
    if run_ranks > model.1 as u64 || (!spec.subset && run_ranks != model.1 as u64) {
        return Err(EngineError::Workload(format!(
            "{} workers x {} ranksPerWorker = {run_ranks} ranks, but the checkpoint is split over {} ranks: run {} workers, or set subset: true to write only this run's share",
            opts.count, spec.ranks_per_worker, model.1, model.1.div_ceil(spec.ranks_per_worker)
        )));
    }
    crate::engine::check_workers(workload, opts.count)?;
    let data = ShardData(Arc::new(DataPattern::new(workload.seed, &workload.data())));
    let dir = shard_dir(&workload.dataset.prefix, model, workload.seed);
    let ranks: Vec<(u32, String)> = (0..spec.ranks_per_worker)
        .map(|l| {
            let rank = opts.index * spec.ranks_per_worker + l;
            (rank, shard_key(&dir, rank))
        })
        .collect();
    // Whose shard each rank restores: its own, or rank + shift's (every shard read once).
    let shift = (spec.restore_shift as u64 % run_ranks) as u32;
    let sources: Vec<(u32, String)> = ranks
        .iter()
        .map(|(rank, _)| {
            let from = ((*rank as u64 + shift as u64) % run_ranks) as u32;
            (from, shard_key(&dir, from))
        })
        .collect();
    // Shards read across workers: no worker restores before every worker has saved, nor
    // overwrites or deletes its shards before every worker has restored them.
    let across = shift != 0 && opts.count > 1 && spec.mode == CheckpointMode::SaveAndRestore;
    let mut handoff = match (across, &opts.run_token) {
        (false, _) => None,
        (true, Some(token)) => Some(handoff::Handoff::new(
            target.clone(),
            &dir,
            token,
            opts.index,
            opts.count,
        )),
        (true, None) => {
            return Err(EngineError::Workload(format!(
                "checkpoint.restoreShift {shift} restores shards another worker saves, so the workers must meet between save and restore: run it as a BenchmarkRun (its workers start together), or as one worker with all the ranks"
            )))
        }
    };
    let local_root = match workload.target_uri() {
        Ok(TargetUri::File { root } | TargetUri::Direct { root }) => Some(root),
        _ => None,
    };
    let stopped = Arc::new(AtomicBool::new(false));
    {
        let s = stopped.clone();
        tokio::spawn(async move {
            stop.await;
            s.store(true, Ordering::Relaxed);
        });
    }
    let plan = targets::read_plan(workload, target.as_ref());
    let started_at = Utc::now();
    let before = ProcessStats::now();
    let run_start = Instant::now();
    let mut stats = CheckpointStats {
        model_bytes: model.0,
        model_ranks: model.1,
        shard_bytes: shard,
        ..Default::default()
    };
    let (mut puts, mut gets) = (OpStats::default(), OpStats::default());
    let metrics = opts.metrics.as_ref();
    let mut restored_last = None;
    for repeat in 0..spec.repeats {
        if stopped.load(Ordering::Relaxed) {
            break;
        }
        if let (Some(h), Some(last)) = (&mut handoff, restored_last) {
            // The shards are overwritten: every worker must be done reading them.
            if !h.wait_all(Step::Restored, last, false, &stopped).await? {
                break;
            }
            h.forget(Step::Saved, last).await;
        }
        // This repeat's shards: another version of each per save; a restore-only run reads
        // what the last save of the run that saved wrote (key 0).
        let data = match spec.mode {
            CheckpointMode::Restore => data.clone(),
            _ => data.save((spec.repeats - 1 - repeat) as u64),
        };
        let mut times: Vec<RankTimes> = ranks
            .iter()
            .map(|(rank, _)| RankTimes {
                rank: *rank,
                bytes: shard,
                ..Default::default()
            })
            .collect();
        if spec.mode != CheckpointMode::Restore {
            let results = at_once(&ranks, OpKind::Put, metrics, |key| {
                let (target, data) = (target.clone(), data.clone());
                async move {
                    let requests = target.put(&key, data.payload(&key, shard)).await?;
                    Ok((shard, requests as u64))
                }
            })
            .await;
            for (t, r) in times.iter_mut().zip(results) {
                record(&mut puts, &mut stats.save, &r);
                match r {
                    Ok((d, _)) => t.save_us = Some(d.as_micros() as u64),
                    Err(e) => t.error = Some(format!("save: {e}")),
                }
            }
            if let Some(root) = &local_root {
                let paths: Vec<_> = ranks.iter().map(|(_, k)| root.join(k)).collect();
                tokio::task::spawn_blocking(move || {
                    for p in paths {
                        // A shard that failed to save has nothing to drop.
                        let _ = crate::training::drop_from_page_cache(&p);
                    }
                })
                .await
                .map_err(|e| EngineError::Workload(format!("dropping the page cache: {e}")))?;
            }
        }
        if let Some(h) = &mut handoff {
            h.mark(Step::Saved, repeat).await?;
            if !h.wait_all(Step::Saved, repeat, false, &stopped).await? {
                stats.repeats.push(RepeatFigures::new(repeat, times));
                break;
            }
            if repeat > 0 {
                h.forget(Step::Restored, repeat - 1).await;
            }
        }
        if spec.mode != CheckpointMode::Save {
            let results = at_once(&sources, OpKind::Get, metrics, |key| {
                let target = target.clone();
                let req = GetRequest {
                    plan: plan.clone(),
                    check: data.check(),
                    size_hint: Some(shard),
                };
                async move {
                    let o = target.get(&key, &req).await?;
                    if o.bytes != shard {
                        return Err(TargetError::Other(format!(
                            "{key}: restored {} bytes of a {shard}-byte shard",
                            o.bytes
                        )));
                    }
                    Ok((o.bytes, o.requests as u64))
                }
            })
            .await;
            for ((t, r), (from, _)) in times.iter_mut().zip(results).zip(&sources) {
                if *from != t.rank {
                    t.restored_from = Some(*from);
                }
                record(&mut gets, &mut stats.restore, &r);
                match r {
                    Ok((d, _)) => t.restore_us = Some(d.as_micros() as u64),
                    Err(e) => {
                        let msg = format!("restore: {e}");
                        t.error = Some(match t.error.take() {
                            Some(s) => format!("{s}; {msg}"),
                            None => msg,
                        });
                    }
                }
            }
        }
        if let Some(h) = &mut handoff {
            if repeat + 1 == spec.repeats {
                h.mark_each(Step::Restored, repeat).await?;
            } else {
                h.mark(Step::Restored, repeat).await?;
            }
            restored_last = Some(repeat);
        }
        stats.repeats.push(RepeatFigures::new(repeat, times));
    }
    // Another worker may still be reading this worker's shards: after the last repeat, wait
    // until every worker has restored (the markers addressed to this worker).
    let mut all_restored = true;
    if let Some(h) = &mut handoff {
        if restored_last == Some(spec.repeats - 1) {
            all_restored = h
                .wait_all(Step::Restored, spec.repeats - 1, true, &stopped)
                .await?;
            if all_restored {
                h.forget(Step::Saved, spec.repeats - 1).await;
            }
        }
        h.clear().await;
    }
    if workload.dataset.cleanup && spec.mode == CheckpointMode::SaveAndRestore && all_restored {
        for (_, key) in &ranks {
            let _ = target.delete(key).await;
        }
    }
    let interrupted = stopped.load(Ordering::Relaxed);
    let mut ops = std::collections::BTreeMap::new();
    if puts.count > 0 {
        ops.insert(OpKind::Put, puts);
    }
    if gets.count > 0 {
        ops.insert(OpKind::Get, gets);
    }
    let mut summary = Summary {
        workload: Some(workload.clone()),
        target: workload.target.clone(),
        workers: 1,
        worker_ids: vec![opts.worker_id],
        started_at,
        elapsed_seconds: run_start.elapsed().as_secs_f64(),
        stopped_by: if interrupted {
            INTERRUPTED.into()
        } else {
            format!("repeats: {}", spec.repeats)
        },
        partial: interrupted,
        ops,
        process: ProcessStats::now().since(&before),
        checkpoint: Some(stats),
        ..Default::default()
    };
    summary.refresh();
    Ok(summary)
}

type RankResult = Result<(Duration, (u64, u64)), TargetError>;

/// Run `op` (a `kind` of op) on every rank's key, all starting at one instant; each result
/// with its duration, and counted in the live `metrics` as it ends.
async fn at_once<F, Fut>(
    keys: &[(u32, String)],
    kind: OpKind,
    metrics: Option<&Arc<Metrics>>,
    op: F,
) -> Vec<RankResult>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<(u64, u64), TargetError>> + Send + 'static,
{
    let at = tokio::time::Instant::now() + BARRIER_AHEAD;
    let tasks: Vec<_> = keys
        .iter()
        .map(|(_, key)| {
            let fut = op(key.clone());
            let metrics = metrics.cloned();
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                if let Some(m) = &metrics {
                    m.op_started();
                }
                let began = Instant::now();
                let r = fut.await;
                let took = began.elapsed();
                if let Some(m) = &metrics {
                    match &r {
                        Ok((bytes, _)) => m.op_done(kind, took, *bytes),
                        Err(e) => m.op_failed(kind, &e.kind()),
                    }
                }
                r.map(|v| (took, v))
            })
        })
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(
            t.await
                .unwrap_or_else(|e| Err(TargetError::Other(format!("rank task failed: {e}")))),
        );
    }
    out
}

/// Count one rank's op in the summary's per-op figures and the rank histogram.
fn record(ops: &mut OpStats, hist: &mut Latency, r: &RankResult) {
    ops.count += 1;
    match r {
        Ok((d, (bytes, requests))) => {
            ops.bytes += bytes;
            ops.requests += requests;
            ops.latency.record(*d);
            hist.record(*d);
        }
        Err(e) => {
            ops.errors += 1;
            *ops.errors_by_kind.entry(e.kind()).or_default() += 1;
        }
    }
}

/// The table of a checkpoint run's figures.
pub fn table(c: &CheckpointStats) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ncheckpoint: {:.2} GB over {} ranks, {:.3} GB a shard",
        c.model_bytes as f64 / 1e9,
        c.model_ranks,
        c.shard_bytes as f64 / 1e9
    );
    let _ = writeln!(
        out,
        "{:>6} {:>6} {:>10} {:>10} {:>12} {:>12} {:>7}",
        "repeat", "ranks", "save s", "save GB/s", "restore s", "restore GB/s", "errors"
    );
    let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    for r in &c.repeats {
        let _ = writeln!(
            out,
            "{:>6} {:>6} {:>10} {:>10} {:>12} {:>12} {:>7}",
            r.repeat,
            r.ranks.len(),
            f(r.save_seconds()),
            f(gb_per_sec(r.bytes(), r.save_seconds())),
            f(r.restore_seconds()),
            f(gb_per_sec(r.bytes(), r.restore_seconds())),
            r.errors()
        );
    }
    if c.repeats.len() > 1 {
        let _ = writeln!(
            out,
            "{:>6} {:>6} {:>10} {:>10} {:>12} {:>12} {:>7}",
            "mean",
            "",
            f(c.mean_save_seconds()),
            f(c.mean_save_gb_per_sec()),
            f(c.mean_restore_seconds()),
            f(c.mean_restore_gb_per_sec()),
            c.errors()
        );
    }
    for r in &c.repeats {
        for t in r.ranks.iter().filter(|t| t.error.is_some()) {
            let _ = writeln!(
                out,
                "repeat {} rank {}: {}",
                r.repeat,
                t.rank,
                t.error.as_deref().unwrap_or_default()
            );
        }
    }
    out
}
