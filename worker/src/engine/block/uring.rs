//! A block task on io_uring: one thread keeps `queueDepth` reads and writes in flight on
//! one ring, as fio's `ioengine=io_uring` does (no registered files or buffers, no SQ
//! polling: fio's defaults). Like fio 3.33 and later, the ring is single-issuer with
//! deferred task work (completions are posted when the task asks for them, not by
//! interrupting it), where the kernel has those (6.1); older kernels get a plain ring.

use io_uring::{opcode, types, IoUring};

use super::*;
use crate::targets::AlignedBuf;

/// A ring for `depth` I/Os in flight. Created disabled, so that the task's own thread, which
/// enables it ([`enable`]), is its single issuer.
pub(super) fn ring(depth: u32) -> std::io::Result<IoUring> {
    let entries = depth.max(1).next_power_of_two();
    match IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_r_disabled()
        .build(entries)
    {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries),
        other => other,
    }
}

/// Enable a ring made disabled by [`ring`], on the thread that submits to it.
fn enable(ring: &IoUring) -> std::io::Result<()> {
    if ring.params().is_setup_single_issuer() {
        ring.submitter().register_enable_rings()?;
    }
    Ok(())
}

/// One I/O slot: its buffer, and what is in flight in it.
struct Slot {
    buf: AlignedBuf,
    op: OpKind,
    place: Place,
    len: u64,
    began: Instant,
}

/// The task: take a ticket for every free slot, submit, reap what completed, until the
/// schedule ends, then drain what is in flight.
pub(super) async fn task(
    ctx: Arc<RunCtx>,
    volume: Arc<Volume>,
    files: Files,
    mut ring: IoUring,
    mut rng: SmallRng,
) -> Recorder {
    let mut rec = Recorder::for_workload(ctx.metrics.clone(), &ctx.engine_workload)
        .with_warmup(ctx.schedule.warmup());
    if let Err(e) = enable(&ring) {
        ctx.stop(&format!("io_uring: enabling the ring: {e}"));
        return rec;
    }
    let mut offsets = files.offsets(&volume);
    let depth = volume.spec.queue_depth as usize;
    // I/Os handed to the kernel per submission (fio `iodepth_batch_submit`): 1 by default, so
    // the device sees each I/O as soon as it is ready, as under fio; batching every free slot
    // saves system calls but held the device below fio's rate (docs/BENCHMARKS.md).
    let batch = (volume.spec.submit_batch() as usize).clamp(1, depth.max(1));
    let mut queued = 0usize;
    let start = ctx.schedule.start();
    let open_loop = ctx.schedule.is_open_loop();
    let max = volume.sizes.max() as usize;
    let mut slots: Vec<Slot> = (0..depth)
        .map(|_| {
            let buf = AlignedBuf::new(max);
            Slot {
                buf,
                op: OpKind::Read,
                place: Place {
                    region: 0,
                    offset: 0,
                },
                len: 0,
                began: start,
            }
        })
        .collect();
    let mut free: Vec<usize> = (0..depth).rev().collect();
    let mut in_flight = 0usize;
    let mut pending: Option<Ticket> = None;
    let mut exhausted = false;
    let verify = ctx.engine_workload.read.verify;
    loop {
        // Fill every free slot with an I/O that is due.
        while !exhausted {
            if ctx.schedule.is_stopped() {
                exhausted = true;
                pending = None;
                break;
            }
            let Some(&i) = free.last() else { break };
            let now = Instant::now();
            let Some(t) = pending.take().or_else(|| ctx.schedule.next(now)) else {
                exhausted = true;
                break;
            };
            if t.due > now {
                pending = Some(t);
                break;
            }
            free.pop();
            let op = ctx.mix.pick(&mut rng);
            let bs = volume.sizes.pick(&mut rng);
            let place = offsets.next(bs, &mut rng);
            let s = &mut slots[i];
            let (fd, at) = (types::Fd(files.fd(place)), files.at(place));
            if op == OpKind::Write {
                // Fresh content for every write (fio's default data compresses ~45:1 and
                // repeats; some volumes compress or deduplicate, and would flatter it).
                files.fill(
                    &volume,
                    place,
                    &mut s.buf.as_mut_slice()[..bs as usize],
                    &mut rng,
                );
            }
            let ptr = s.buf.as_mut_slice().as_mut_ptr();
            let entry = match op {
                OpKind::Write => opcode::Write::new(fd, ptr, bs as u32).offset(at).build(),
                _ => opcode::Read::new(fd, ptr, bs as u32).offset(at).build(),
            }
            .user_data(i as u64);
            if open_loop && !ctx.schedule.in_warmup(t.due) {
                rec.started_late(t.due, now);
            }
            (s.op, s.place, s.len) = (op, place, bs);
            s.began = if open_loop { t.due } else { now };
            // SAFETY: the entry points into slot i's buffer, which stays in `slots`, untouched,
            // until its completion is reaped below; the task never returns with I/O in
            // flight (it drains, or leaks the buffers on a ring failure).
            if unsafe { ring.submission().push(&entry) }.is_err() {
                // Cannot happen: the ring has at least `depth` entries and at most `depth`
                // are queued. Stop rather than lose track of a slot.
                ctx.stop("io_uring: the submission queue is full");
                free.push(i);
                exhausted = true;
                break;
            }
            ctx.metrics.op_started();
            in_flight += 1;
            queued += 1;
            if queued >= batch {
                queued = 0;
                // Refused for now: what is queued goes with the wait below.
                if let Some(e) = fatal(ring.submit()) {
                    ctx.stop(&format!("io_uring: {e}"));
                    // The kernel may still write into buffers in flight: never free them.
                    std::mem::forget(slots);
                    return rec;
                }
            }
        }
        if in_flight == 0 {
            match pending.take() {
                None if exhausted => break,
                None => continue,
                Some(t) => {
                    if ctx.schedule.sleep_until(t.due).await {
                        exhausted = true;
                    } else {
                        pending = Some(t);
                    }
                    continue;
                }
            }
        }
        // Submit what is still queued and wait for a completion; under a rate limit, no
        // longer than until the next ticket is due.
        // The kernel's timer wakes late by tens of microseconds: wait in it until
        // `Schedule::spin` before the due time, then poll (a zero timeout, which still posts the
        // completions deferred task work holds) until the ticket is due, as
        // `Schedule::sleep_until` spins on a task thread.
        queued = 0;
        let waited = match &pending {
            Some(t) => {
                let left = t.due.saturating_duration_since(Instant::now());
                let wait = left.saturating_sub(ctx.schedule.spin());
                let ts = types::Timespec::new()
                    .sec(wait.as_secs())
                    .nsec(wait.subsec_nanos());
                ring.submitter()
                    .submit_with_args(1, &types::SubmitArgs::new().timespec(&ts))
            }
            None => ring.submit_and_wait(1),
        };
        if let Some(e) = fatal(waited) {
            ctx.stop(&format!("io_uring: {e}"));
            // The kernel may still write into buffers in flight: never free them.
            std::mem::forget(slots);
            return rec;
        }
        let end = Instant::now();
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            let Some(s) = slots.get(i) else { continue };
            let res = cqe.result();
            let outcome = if res < 0 {
                Err(files.error(s.place, s.op, std::io::Error::from_raw_os_error(-res)))
            } else if res as u64 != s.len {
                Err(files.short(s.place, s.op, res as usize, s.len))
            } else if verify && s.op == OpKind::Read {
                files
                    .verify(&volume, s.place, &s.buf.as_slice()[..s.len as usize])
                    .map(|()| Done {
                        bytes: s.len,
                        requests: 1,
                        ..Default::default()
                    })
            } else {
                Ok(Done {
                    bytes: s.len,
                    requests: 1,
                    ..Default::default()
                })
            };
            ctx.finished(&mut rec, s.op, None, s.began, end, outcome);
            free.push(i);
            in_flight -= 1;
        }
    }
    rec
}

/// The error of a submission that leaves the ring unusable; `None` when it went through or
/// is only to be tried again: interrupted (EINTR), a wait's timeout (ETIME), or the kernel
/// asking for completions to be reaped first (EBUSY, EAGAIN).
fn fatal(submitted: std::io::Result<usize>) -> Option<std::io::Error> {
    submitted.err().filter(|e| {
        !matches!(
            e.raw_os_error(),
            Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
        )
    })
}
