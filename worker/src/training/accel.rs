//! One epoch on one worker: per emulated accelerator, `readers` reader threads loading its
//! batches into bounded queues (`prefetch` batches each), and the accelerator taking them
//! in order, waiting for each (the data wait), then computing for `computeTime` (a sleep).
//!
//! Reader i of an accelerator loads its batches i, i + readers, ..., and the accelerator
//! takes batch k from reader k mod readers, as PyTorch's DataLoader does with `num_workers`
//! and `prefetch_factor`: memory is bounded by accelerators x readers x prefetch batches'
//! counters (the bytes read are discarded, or verified, as they arrive).
//!
//! Every reader and accelerator is an OS thread of its own, so a blocking local read or a
//! sleeping accelerator never holds up another; a reader of a network target drives its
//! own client on its own single-threaded runtime.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::dataset::{Location, Shape};
use super::sampler::{mix, Permutation, RankSlice};
use crate::oplog::{Phase, Record, Sink};
use crate::spec::{OpKind, TrainingShape};
use crate::stats::OpStats;
use crate::targets::{
    io_inline, ChunkPlan, GetOutcome, GetRequest, ReadCheck, Target, TargetError,
};
use benchrun_api::latency::Latency;

/// What every thread of a run shares.
#[derive(Debug)]
pub struct Ctx {
    /// The resolved workload.
    pub shape: TrainingShape,
    /// The dataset.
    pub dataset: Shape,
    /// The run's seed (epoch orders, compute spread).
    pub seed: u64,
    /// This worker's index and the run's worker count.
    pub worker: (u32, u32),
    /// How whole-file samples are read.
    pub plan: ChunkPlan,
    /// What is checked of the bytes read.
    pub check: ReadCheck,
    /// With `--oplog`: every sample read.
    pub oplog: Option<Arc<Sink>>,
    /// When the run's first epoch began (the op-log's offsets are from it).
    pub run_start: Instant,
    /// Set to stop (a signal).
    pub stop: Arc<AtomicBool>,
    /// `duration`: no step starts after it.
    pub deadline: Option<Instant>,
    /// The worker's live metrics (`/metrics`), if served: sample reads, steps.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl Ctx {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// A reader thread's means: its target (own client for network targets) and runtime.
#[derive(Debug)]
pub struct Reader {
    /// Always `Some` but in `drop`.
    rt: Option<tokio::runtime::Runtime>,
    target: Arc<dyn Target>,
    /// Local files: do the I/O on this thread (no hand-off to a pool).
    inline: bool,
}

impl Reader {
    /// A reader of `target`: a client of its own where the target has per-shard clients.
    pub fn new(target: &Arc<dyn Target>) -> Result<Self, TargetError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| TargetError::Other(format!("starting a reader's runtime: {e}")))?;
        let inline = target.blocking_io();
        let target = if inline {
            target.clone()
        } else {
            target.for_shard()?.unwrap_or_else(|| target.clone())
        };
        Ok(Self {
            rt: Some(rt),
            target,
            inline,
        })
    }

    fn read(&self, loc: &Location, ctx: &Ctx) -> Result<GetOutcome, TargetError> {
        let fut = async {
            if loc.whole {
                let req = GetRequest {
                    plan: ctx.plan.clone(),
                    check: ctx.check.clone(),
                    size_hint: Some(loc.len),
                };
                self.target.get(&loc.key, &req).await
            } else {
                self.target
                    .get_range(&loc.key, loc.offset, loc.len, &ctx.check)
                    .await
            }
        };
        let Some(rt) = &self.rt else {
            return Err(TargetError::Other(
                "reader used after it was dropped".into(),
            ));
        };
        if self.inline {
            io_inline(|| rt.block_on(fut))
        } else {
            rt.block_on(fut)
        }
    }
}

impl Drop for Reader {
    /// Readers are dropped on the async runtime, where a runtime may not block to shut down;
    /// theirs has nothing left to wait for (every read was awaited).
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// A loaded batch, as counts.
#[derive(Debug, Default)]
struct Batch {
    samples: u64,
    bytes: u64,
    errors: u64,
}

/// What one accelerator did in one epoch.
#[derive(Debug, Default)]
pub struct AccOutcome {
    /// Time it computed.
    pub compute: Duration,
    /// The epoch's wall time on it.
    pub wall: Duration,
    /// Steps computed.
    pub steps: u64,
    /// Samples in those steps.
    pub samples: u64,
    /// Bytes of those samples.
    pub bytes: u64,
    /// Samples of those steps that failed to read.
    pub errors: u64,
    /// The wait for each step's batch.
    pub waits: Latency,
    /// Every sample read by its readers (latency per sample, errors by kind).
    pub reads: OpStats,
    /// The first read error, to report.
    pub first_error: Option<String>,
    /// Whether it computed every batch of its share.
    pub complete: bool,
}

/// Run epoch `epoch` on this worker: `readers` holds accelerators x readers readers.
pub fn epoch(ctx: &Ctx, epoch: u32, readers: &[Reader]) -> Vec<AccOutcome> {
    let s = &ctx.shape;
    let (index, workers) = ctx.worker;
    let ranks = workers as u64 * s.accelerators as u64;
    let perm = Permutation::new(ctx.dataset.samples(), ctx.seed, epoch);
    let start = Instant::now();
    std::thread::scope(|scope| {
        let accs: Vec<_> = readers
            .chunks(s.readers as usize)
            .enumerate()
            .map(|(a, mine)| {
                let rank = index as u64 * s.accelerators as u64 + a as u64;
                let slice = RankSlice::new(perm.clone(), rank, ranks);
                let batches = slice.len().div_ceil(s.batch_size as u64);
                let mut rxs = Vec::with_capacity(mine.len());
                let mut loaders = Vec::with_capacity(mine.len());
                for (i, reader) in mine.iter().enumerate() {
                    let (tx, rx) = sync_channel(s.prefetch as usize);
                    rxs.push(rx);
                    let slice = slice.clone();
                    loaders.push(scope.spawn(move || {
                        load(
                            ctx,
                            &slice,
                            batches,
                            i as u64,
                            mine.len() as u64,
                            reader,
                            tx,
                        )
                    }));
                }
                let acc = scope.spawn(move || accelerate(ctx, rank, epoch, batches, rxs, start));
                (acc, loaders)
            })
            .collect();
        accs.into_iter()
            .map(|(acc, loaders)| {
                let mut out = acc.join().unwrap_or_default();
                for l in loaders {
                    if let Ok((reads, first)) = l.join() {
                        out.reads.merge(&reads);
                        if out.first_error.is_none() {
                            out.first_error = first;
                        }
                    }
                }
                out
            })
            .collect()
    })
}

/// A reader: its batches of the accelerator's slice, each sample read in turn, each batch
/// queued (waiting while `prefetch` are queued). Ends at the last batch, at a stop, or when
/// the accelerator is gone.
fn load(
    ctx: &Ctx,
    slice: &RankSlice,
    batches: u64,
    first: u64,
    step: u64,
    reader: &Reader,
    tx: SyncSender<Batch>,
) -> (OpStats, Option<String>) {
    let bs = ctx.shape.batch_size as u64;
    let mut reads = OpStats::default();
    let mut first_error = None;
    let mut k = first;
    while k < batches && !ctx.stopped() {
        let mut b = Batch::default();
        for j in k * bs..((k + 1) * bs).min(slice.len()) {
            let loc = ctx.dataset.locate(slice.sample(j));
            if let Some(m) = &ctx.metrics {
                m.op_started();
            }
            let began = Instant::now();
            let r = reader.read(&loc, ctx);
            let latency = began.elapsed();
            if let Some(m) = &ctx.metrics {
                match &r {
                    Ok(o) => m.op_done(OpKind::Get, latency, o.bytes),
                    Err(e) => m.op_failed(OpKind::Get, &e.kind()),
                }
            }
            reads.count += 1;
            reads.latency.record(latency);
            match &r {
                Ok(o) => {
                    b.samples += 1;
                    b.bytes += o.bytes;
                    reads.bytes += o.bytes;
                    reads.requests += o.requests as u64;
                }
                Err(e) => {
                    b.errors += 1;
                    reads.errors += 1;
                    *reads.errors_by_kind.entry(e.kind()).or_default() += 1;
                    first_error.get_or_insert_with(|| e.to_string());
                }
            }
            if let Some(sink) = &ctx.oplog {
                sink.record(Record {
                    offset_us: began.duration_since(ctx.run_start).as_micros() as i64,
                    phase: Phase::Measured,
                    op: OpKind::Get,
                    key: loc.key,
                    size: loc.len,
                    bytes: r.as_ref().map_or(0, |o| o.bytes),
                    latency_us: latency.as_micros() as u64,
                    error: r.as_ref().err().map(|e| e.kind()),
                });
            }
        }
        if tx.send(b).is_err() {
            break;
        }
        k += step;
    }
    (reads, first_error)
}

/// An accelerator: each batch waited for, then computed on.
fn accelerate(
    ctx: &Ctx,
    rank: u64,
    epoch: u32,
    batches: u64,
    rxs: Vec<Receiver<Batch>>,
    start: Instant,
) -> AccOutcome {
    let s = &ctx.shape;
    let mut rng = SmallRng::seed_from_u64(mix(ctx.seed ^ mix(rank ^ ((epoch as u64) << 40))));
    let spread = s.compute_spread_percent / 100.0;
    let mut out = AccOutcome {
        complete: true,
        ..Default::default()
    };
    for k in 0..batches {
        if ctx.stopped() {
            out.complete = false;
            break;
        }
        let waited = Instant::now();
        let Ok(b) = rxs[(k % rxs.len() as u64) as usize].recv() else {
            out.complete = false;
            break;
        };
        let wait = waited.elapsed();
        out.waits.record(wait);
        out.samples += b.samples;
        out.bytes += b.bytes;
        out.errors += b.errors;
        let compute = if spread > 0.0 {
            s.compute
                .mul_f64(rng.random_range(1.0 - spread..=1.0 + spread))
        } else {
            s.compute
        };
        let began = Instant::now();
        if !compute.is_zero() {
            std::thread::sleep(compute);
        }
        let computed = began.elapsed();
        out.compute += computed;
        out.steps += 1;
        if let Some(m) = &ctx.metrics {
            m.training_step(wait, computed);
        }
    }
    out.wall = start.elapsed();
    out
}
