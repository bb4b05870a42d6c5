//! `probe-hold --busy PATH`: keep the volume busy while the operator snapshots, clones and
//! expands it (`controlPlane.busy`). 4 KiB O_DIRECT random I/O, 70% reads, one at a time
//! (queue depth 1: a steady load a snapshot or a resize meets, not a saturating one) and at
//! most a given rate (a volume served from a cache would otherwise take a core), over a
//! file of its own in the mounted directory PATH, or over the raw device PATH from 1 MiB on
//! (the probe's first 4 KiB and the 64 KiB its signature check reads stay untouched). Every
//! I/O's latency goes into the project's exact histogram; failures are counted, not fatal (a
//! storage error during a snapshot is what such a run is there to find).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use benchrun_api::hold_io::HoldIo;
use benchrun_api::latency::Latency;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::PROBE_BYTES;
use crate::targets::AlignedBuf;
use crate::targets::DIRECT_ALIGN;
use crate::volume::device::{is_block_device, Device};

/// The file the I/O goes to, in a mounted volume.
pub const FILE_NAME: &str = ".benchrun-busy";
/// Where the I/O starts on a raw device.
const DEVICE_START: u64 = 1 << 20;
/// Share of reads, percent.
const READ_PERCENT: u32 = 70;
/// Pause after a failed I/O, so that a volume that fails every I/O is not spun on.
const AFTER_ERROR: Duration = Duration::from_millis(1);

/// The I/O's region: an open file or device, and its 4 KiB blocks from `start`.
struct Region {
    file: File,
    start: u64,
    blocks: u64,
}

/// Open (and, in a directory, fill) the region `bytes` long on `path`.
fn region(path: &Path, bytes: u64) -> Result<Region> {
    let block = PROBE_BYTES as u64;
    let open = |p: &Path, create: bool| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .custom_flags(libc::O_DIRECT)
            .open(p)
            .with_context(|| format!("open {} with O_DIRECT", p.display()))
    };
    if is_block_device(path) {
        let dev = Device::probe(path)
            .with_context(|| format!("{}: read the block device's size", path.display()))?;
        let blocks = dev.size.saturating_sub(DEVICE_START).min(bytes) / block;
        if blocks == 0 {
            bail!(
                "{}: a device of {} bytes has no room past its first {DEVICE_START} bytes",
                path.display(),
                dev.size
            );
        }
        return Ok(Region {
            file: open(path, false)?,
            start: DEVICE_START,
            blocks,
        });
    }
    let blocks = (bytes / block).max(1);
    let p = path.join(FILE_NAME);
    let file = open(&p, true)?;
    // Written once before the loop: reads of a hole would never reach the device.
    let chunk = 256 * PROBE_BYTES;
    let mut buf = AlignedBuf::new(chunk.max(DIRECT_ALIGN));
    let total = blocks * block;
    let mut at = 0;
    while at < total {
        let n = (total - at).min(chunk as u64) as usize;
        super::fresh(&mut buf.as_mut_slice()[..n]);
        file.write_all_at(&buf.as_slice()[..n], at)
            .with_context(|| format!("fill {}", p.display()))?;
        at += n as u64;
    }
    file.sync_data()
        .with_context(|| format!("fdatasync {}", p.display()))?;
    Ok(Region {
        file,
        start: 0,
        blocks,
    })
}

/// Run the I/O on `path` over `bytes`, at most `iops` a second (I/O n starts no earlier than n /
/// `iops` after the first), until `stop` is set (at least one I/O, however early it is set);
/// what it did. A region that cannot be set up is one error (the hold keeps the
/// volume mounted all the same).
pub fn run(path: &Path, bytes: u64, iops: u32, stop: &AtomicBool) -> HoldIo {
    let mut io = HoldIo::default();
    let r = match region(path, bytes) {
        Ok(r) => r,
        Err(e) => {
            io.errors = 1;
            io.first_error = Some(format!("{e:#}"));
            return io;
        }
    };
    let mut latency = Latency::default();
    let mut buf = AlignedBuf::new(PROBE_BYTES.max(DIRECT_ALIGN));
    // Seeded by the operating system: a process id is the same in every pod (often 1).
    let mut rng = SmallRng::from_rng(&mut rand::rng());
    let started = Instant::now();
    let interval = Duration::from_secs(1) / iops.max(1);
    let mut due = started;
    loop {
        // Paced, not bursting to catch up: a late I/O moves the schedule on.
        let now = Instant::now();
        if now < due {
            std::thread::sleep(due - now);
        }
        due = due.max(now) + interval;
        let at = r.start + rng.random_range(0..r.blocks) * PROBE_BYTES as u64;
        let read = rng.random_range(0..100) < READ_PERCENT;
        let data = &mut buf.as_mut_slice()[..PROBE_BYTES];
        if !read {
            // Each write new bytes: never a sector this or any other hold wrote before.
            super::fresh(data);
        }
        let t = Instant::now();
        let result = if read {
            r.file.read_exact_at(data, at)
        } else {
            r.file.write_all_at(data, at)
        };
        let took = t.elapsed();
        match result {
            Ok(()) => {
                latency.record(took);
                io.max_us = io.max_us.max(took.as_micros() as u64);
                if read {
                    io.reads += 1;
                } else {
                    io.writes += 1;
                }
            }
            Err(e) => {
                io.errors += 1;
                let what = if read { "read" } else { "write" };
                io.first_error
                    .get_or_insert_with(|| format!("{what} at {at} of {}: {e}", path.display()));
                std::thread::sleep(AFTER_ERROR);
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    io.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    io.latency = Some(latency);
    io
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn it_fills_its_file_then_does_at_least_one_io() {
        // /var/tmp: a disk file system on most machines (tmpfs refuses O_DIRECT).
        let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        // Stopped before it starts: exactly one I/O, whatever the machine's speed.
        let io = run(dir.path(), 1 << 20, 1000, &AtomicBool::new(true));
        if let Some(e) = &io.first_error {
            // A file system without O_DIRECT: the one error says so.
            assert!(e.contains("O_DIRECT") && io.errors == 1, "{io:?}");
            return;
        }
        assert_eq!((io.ops(), io.errors), (1, 0), "{io:?}");
        let h = io.latency.as_ref().expect("histogram");
        assert_eq!(h.count(), 1);
        assert!(h.0.max() >= io.max_us, "{io:?}");
        let len = std::fs::metadata(dir.path().join(FILE_NAME))
            .expect("file")
            .len();
        assert_eq!(len, 1 << 20);
    }

    #[test]
    fn its_io_keeps_to_the_rate() {
        let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (path, s) = (dir.path().to_path_buf(), stop.clone());
        let t = std::thread::spawn(move || run(&path, 1 << 20, 200, &s));
        // How many I/Os run before the stop depends on the machine; the bound below does not:
        // I/O n starts no earlier than n * 5 ms after the first.
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        let io = t.join().expect("thread");
        if io.first_error.is_some() {
            return; // no O_DIRECT here: the test above says so
        }
        assert!(io.ops() >= 1, "{io:?}");
        assert!(
            (io.ops() - 1) as f64 * 5.0 <= io.elapsed_ms + 0.001,
            "more than 200 a second: {io:?}"
        );
    }

    #[test]
    fn a_path_it_cannot_open_is_one_error_named() {
        let stop = AtomicBool::new(true);
        let io = run(Path::new("/nonexistent/benchrun"), 1 << 20, 1000, &stop);
        assert_eq!((io.errors, io.ops()), (1, 0));
        assert!(
            io.first_error
                .as_deref()
                .is_some_and(|e| e.contains("/nonexistent/benchrun")),
            "{io:?}"
        );
    }
}
