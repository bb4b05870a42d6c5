//! Block workloads in the measured stage: every task a thread of its own (as a fio job) over
//! its regions, with `queueDepth` I/Os in flight: through one io_uring per task
//! (`uring.rs`), or, where io_uring is refused or `engine: sync` asks, `queueDepth` threads
//! per task each doing one blocking `pread`/`pwrite` at a time (`sync.rs`).
//!
//! Each I/O takes a ticket from the run's [`Schedule`] (so `duration`, `totalOps`,
//! `rateLimit` and stops work as for objects) and is recorded in the task's [`Recorder`]
//! with its latency from submission (from its due time under a rate limit) to completion.

mod sync;
mod uring;

use std::os::unix::io::AsRawFd;

use super::*;
use crate::spec::IoEngine;
use crate::volume::{Region, Volume, VolumeError};

/// Which engine a run's tasks use, decided once before any starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Chosen {
    /// io_uring, a ring per task.
    Uring,
    /// Blocking syscalls, `queueDepth` threads per task; why, when `auto` fell back.
    Sync(Option<String>),
}

impl Chosen {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Chosen::Uring => "io_uring",
            Chosen::Sync(_) => "sync",
        }
    }
}

/// Pick the engine: io_uring when a ring can be set up here (a container runtime's default
/// seccomp profile usually refuses `io_uring_setup`), else `sync` under `auto`.
pub(super) fn choose(engine: IoEngine, depth: u32) -> Result<Chosen, EngineError> {
    if engine == IoEngine::Sync {
        return Ok(Chosen::Sync(None));
    }
    match uring::ring(depth) {
        Ok(_) => Ok(Chosen::Uring),
        Err(e) if engine == IoEngine::Auto => Ok(Chosen::Sync(Some(format!(
            "io_uring refused here ({e}); a container's RuntimeDefault seccomp profile refuses it: give the worker a profile that allows io_uring (docs/VOLUMES.md) or set block.engine: sync"
        )))),
        Err(e) => Err(EngineError::Workload(format!(
            "block.engine: ioUring: io_uring is refused here ({e}); allow it in the worker's seccomp profile (docs/VOLUMES.md), or use engine: auto or sync"
        ))),
    }
}

/// A task's regions, opened for the measured stage.
#[derive(Debug)]
pub(super) struct Files {
    files: Vec<std::fs::File>,
    regions: Vec<Region>,
    /// Each region's data stream (see [`crate::datagen`]).
    streams: Vec<u64>,
}

impl Files {
    fn open(volume: &Volume, task: u32) -> Result<Self, VolumeError> {
        let regions = volume.regions_of(task).to_vec();
        let files = regions
            .iter()
            .map(|r| volume.open_region(r))
            .collect::<Result<Vec<_>, _>>()?;
        let streams = regions.iter().map(|r| volume.stream(r)).collect();
        Ok(Self {
            files,
            regions,
            streams,
        })
    }

    /// Fill `buf` with fresh data for a write at `p`: a new generation, so no write repeats
    /// what any other wrote (see [`crate::datagen`]).
    fn fill(&self, volume: &Volume, p: Place, buf: &mut [u8], rng: &mut SmallRng) {
        use rand::Rng;
        let gen = rng.random::<u64>() | 1;
        volume
            .pattern
            .fill(self.streams[p.region], self.at(p), gen, buf);
    }

    /// Check a block read at `p` (`read.verify`): a `corrupt` error naming the file and the
    /// first byte that differs from what benchrun wrote there.
    fn verify(&self, volume: &Volume, p: Place, buf: &[u8]) -> Result<(), TargetError> {
        match volume
            .pattern
            .first_block_mismatch(self.streams[p.region], self.at(p), buf)
        {
            None => Ok(()),
            Some(i) => Err(TargetError::Corrupt {
                key: self.regions[p.region].path.display().to_string(),
                offset: self.at(p) + i as u64,
            }),
        }
    }

    fn offsets(&self, volume: &Volume) -> Offsets {
        Offsets::new(
            self.regions.iter().map(|r| r.len).collect(),
            volume.spec.access,
        )
    }

    fn fd(&self, p: Place) -> i32 {
        self.files[p.region].as_raw_fd()
    }

    /// The absolute offset of `p` in its file or device.
    fn at(&self, p: Place) -> u64 {
        self.regions[p.region].start + p.offset
    }

    fn error(&self, p: Place, op: OpKind, e: std::io::Error) -> TargetError {
        TargetError::io(
            format!(
                "{} {} at {}",
                op,
                self.regions[p.region].path.display(),
                self.at(p)
            ),
            e,
        )
    }

    /// A read or write that moved fewer bytes than asked. A short read is a data error
    /// (`short`, with its place in the summary's first few, like a short object): the data
    /// the run expects is not there. A short write is an I/O error of its own kind (`other`).
    fn short(&self, p: Place, op: OpKind, got: usize, want: u64) -> TargetError {
        let path = self.regions[p.region].path.display().to_string();
        if op == OpKind::Read {
            return TargetError::ShortRead {
                path,
                at: self.at(p),
                got: got as u64,
                want,
            };
        }
        TargetError::Other(format!(
            "{op} {path} at {}: {got} of {want} bytes",
            self.at(p)
        ))
    }
}

use crate::volume::{Offsets, Place};

impl Engine {
    /// Start the block tasks of a run, held at `gate`: a thread per task with io_uring, or
    /// `queueDepth` threads per task with `sync`.
    pub(super) fn start_block_tasks(
        &self,
        volume: &Arc<Volume>,
        chosen: &Chosen,
        ctx: &Arc<RunCtx>,
        gate: &threads::Gate,
        tasks: &mut tokio::task::JoinSet<Vec<Recorder>>,
    ) -> Result<(), EngineError> {
        let w = &self.workload;
        let depth = volume.spec.queue_depth;
        // Keyed by the writer (the run and this worker): each write's generation and place
        // differ from every other worker's, even on the same file names or device offsets.
        let key = self.writer_seed();
        let seed = |i: u64| {
            SmallRng::seed_from_u64(key.wrapping_add(0x5851_F42D_4C95_7F2D_u64.wrapping_mul(i + 1)))
        };
        let thread_err = |i: u32, e: std::io::Error| {
            EngineError::Workload(format!(
                "cannot start the thread of task {i} of {}: {e}; lower concurrency{} or raise the process's thread limit",
                w.concurrency,
                if matches!(chosen, Chosen::Sync(_)) { " or queueDepth (sync runs a thread per I/O in flight)" } else { "" }
            ))
        };
        for i in 0..w.concurrency {
            let files = Files::open(volume, i).map_err(|e| EngineError::Workload(e.to_string()))?;
            match chosen {
                Chosen::Uring => {
                    let ring = uring::ring(depth).map_err(|e| {
                        EngineError::Workload(format!("io_uring for task {i}: {e}"))
                    })?;
                    let task = threads::spawn(
                        format!("benchrun-io-{i}"),
                        tokio::runtime::Handle::current(),
                        gate.clone(),
                        uring::task(ctx.clone(), volume.clone(), files, ring, seed(i as u64)),
                    )
                    .map_err(|e| thread_err(i, e))?;
                    tasks.spawn(async move { vec![task.await] });
                }
                Chosen::Sync(_) => {
                    let job = Arc::new(sync::Job::new(files, volume));
                    for d in 0..depth {
                        let task = threads::spawn(
                            format!("benchrun-io-{i}.{d}"),
                            tokio::runtime::Handle::current(),
                            gate.clone(),
                            sync::slot(
                                ctx.clone(),
                                volume.clone(),
                                job.clone(),
                                seed(((i as u64) << 16) | d as u64),
                            ),
                        )
                        .map_err(|e| thread_err(i, e))?;
                        tasks.spawn(async move { vec![task.await] });
                    }
                }
            }
        }
        Ok(())
    }
}
