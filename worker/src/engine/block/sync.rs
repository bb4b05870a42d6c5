//! A block task on blocking syscalls (fio's `psync`): `queueDepth` threads share the task's
//! files and its offsets, each with one `pread` or `pwrite` at a time.

use std::os::unix::fs::FileExt;

use super::*;
use crate::targets::AlignedBuf;

/// What the threads of one task share.
#[derive(Debug)]
pub(super) struct Job {
    files: Files,
    offsets: Mutex<Offsets>,
}

impl Job {
    pub(super) fn new(files: Files, volume: &Volume) -> Self {
        let offsets = Mutex::new(files.offsets(volume));
        Self { files, offsets }
    }
}

/// One thread of a task: a ticket, an I/O, its record, until the schedule ends.
pub(super) async fn slot(
    ctx: Arc<RunCtx>,
    volume: Arc<Volume>,
    job: Arc<Job>,
    mut rng: SmallRng,
) -> Recorder {
    let mut rec = Recorder::for_workload(ctx.metrics.clone(), &ctx.engine_workload)
        .with_warmup(ctx.schedule.warmup());
    let mut buf = AlignedBuf::new(volume.sizes.max() as usize);
    let open_loop = ctx.schedule.is_open_loop();
    let verify = ctx.engine_workload.read.verify;
    while let Some(t) = ctx.schedule.next(Instant::now()) {
        if t.due > Instant::now() && ctx.schedule.sleep_until(t.due).await {
            break;
        }
        let began = if open_loop { t.due } else { Instant::now() };
        if open_loop && !ctx.schedule.in_warmup(t.due) {
            rec.started_late(t.due, Instant::now());
        }
        let op = ctx.mix.pick(&mut rng);
        let bs = volume.sizes.pick(&mut rng);
        let place = job
            .offsets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next(bs, &mut rng);
        let f = &job.files.files[place.region];
        let at = job.files.at(place);
        ctx.metrics.op_started();
        let b = &mut buf.as_mut_slice()[..bs as usize];
        let r = match op {
            OpKind::Write => {
                job.files.fill(&volume, place, b, &mut rng);
                f.write_at(b, at)
            }
            _ => f.read_at(b, at),
        };
        let outcome = match r {
            Ok(n) if n as u64 == bs => match op {
                OpKind::Read if verify => job.files.verify(&volume, place, b),
                _ => Ok(()),
            }
            .map(|()| Done {
                bytes: bs,
                requests: 1,
                ..Default::default()
            }),
            Ok(n) => Err(job.files.short(place, op, n, bs)),
            Err(e) => Err(job.files.error(place, op, e)),
        };
        ctx.finished(&mut rec, op, None, began, Instant::now(), outcome);
    }
    rec
}
