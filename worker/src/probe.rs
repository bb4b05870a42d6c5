//! `benchrun-worker probe-io PATH`: the first I/O of a freshly attached volume, for the
//! operator's control-plane runs (operator/src/control_plane/). One 4 KiB O_DIRECT write (with
//! its fdatasync) and one 4 KiB O_DIRECT read of it, each timed, in a file of the directory
//! PATH (a mounted `Filesystem` claim) or at offset 0 of the block device PATH (a `Block`
//! claim); the times go to the container's termination message as one JSON line
//! (`{"writeUs":..,"readUs":..}`), where the operator reads them from the pod's status
//! without any access to the pod.

pub mod busy;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::targets::AlignedBuf;
use crate::targets::DIRECT_ALIGN;
use crate::volume::device::{is_block_device, Device};

/// The probe's I/O size.
pub const PROBE_BYTES: usize = 4096;
/// Where Kubernetes takes the termination message from (the container's default).
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// The probe's two times, microseconds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// The write and its fdatasync.
    pub write_us: u64,
    /// The read.
    pub read_us: u64,
}

/// The bytes the probe writes, in an O_DIRECT-aligned buffer: [`fresh`] bytes.
fn pattern() -> AlignedBuf {
    let mut buf = AlignedBuf::new(PROBE_BYTES.max(DIRECT_ALIGN));
    fresh(buf.as_mut_slice());
    buf
}

/// `buf` filled with bytes no other probe, hold or run writes: random, from a generator the
/// operating system seeds. Every claim of a control-plane run is usually on one array, and a
/// fixed pattern (as these were) dedupes to one block on it, so the first write would be
/// timed against a write the array never makes. Nothing reads these bytes but the probe
/// itself, so they need no key that another worker could regenerate.
pub fn fresh(buf: &mut [u8]) {
    rand::RngCore::fill_bytes(&mut rand::rng(), buf);
}

/// Write then read [`PROBE_BYTES`] with O_DIRECT on `path`: a file in the directory `path`
/// (removed afterwards), or the first bytes of the block device `path` ([`probe_device`]).
pub fn probe(path: &Path) -> Result<Probe> {
    if is_block_device(path) {
        probe_device(path)
    } else {
        probe_dir(path)
    }
}

/// [`probe`] on a raw block device: its first [`PROBE_BYTES`] overwritten, then read back.
/// Refused, before anything is written, on a device that is mounted or held, or that holds a
/// file system or partition table (a control-plane run's claims are new volumes: a signature
/// means someone's data). That check reads the device's first 68 KiB (buffered, untimed), so
/// on a device the timed write is the first write, not the first I/O.
pub fn probe_device(path: &Path) -> Result<Probe> {
    let dev = Device::probe(path)
        .with_context(|| format!("{}: read the block device's size", path.display()))?;
    if let Some(u) = dev.in_use() {
        bail!(
            "{}: the device is in use ({u}): not written",
            path.display()
        );
    }
    if let Some(sig) = dev
        .signature()
        .with_context(|| format!("{}: read its first blocks", path.display()))?
    {
        bail!(
            "{}: the device holds {sig}: the probe overwrites its first {PROBE_BYTES} bytes and refuses to destroy it",
            path.display()
        );
    }
    if dev.size < PROBE_BYTES as u64 || PROBE_BYTES as u64 % dev.logical_block != 0 {
        bail!(
            "{}: a device of {} bytes with {}-byte blocks cannot take one {PROBE_BYTES}-byte O_DIRECT write",
            path.display(),
            dev.size,
            dev.logical_block
        );
    }
    let buf = pattern();
    let data = &buf.as_slice()[..PROBE_BYTES];
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .with_context(|| format!("open {} with O_DIRECT", path.display()))?;
    let t = Instant::now();
    f.write_all_at(data, 0)
        .with_context(|| format!("write {}", path.display()))?;
    f.sync_data()
        .with_context(|| format!("fdatasync {}", path.display()))?;
    let write_us = t.elapsed().as_micros() as u64;
    let read_us = read_back(&f, path, data)?;
    Ok(Probe { write_us, read_us })
}

/// [`probe`] in a directory: a file of its own, removed afterwards.
fn probe_dir(dir: &Path) -> Result<Probe> {
    let path = dir.join(".benchrun-probe");
    let buf = pattern();
    let data = &buf.as_slice()[..PROBE_BYTES];
    let t = Instant::now();
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .with_context(|| format!("open {} with O_DIRECT", path.display()))?;
    f.write_all(data)
        .with_context(|| format!("write {}", path.display()))?;
    f.sync_data()
        .with_context(|| format!("fdatasync {}", path.display()))?;
    let write_us = t.elapsed().as_micros() as u64;
    let read_us = read_back(&f, &path, data)?;
    drop(f);
    std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
    Ok(Probe { write_us, read_us })
}

/// Run the probe on `path` and report it (or its error) on stdout and in `message_file`.
pub fn main(path: &Path, message_file: &Path) -> Result<()> {
    let result = probe(path);
    let line = match &result {
        Ok(p) => serde_json::to_string(p)?,
        Err(e) => format!("{e:#}"),
    };
    println!("{line}");
    // Best effort: outside a container there is no termination log.
    let _ = std::fs::write(message_file, format!("{line}\n"));
    result.map(|_| ())
}

/// Read the probe's first bytes back from offset 0 with O_DIRECT, check they are `data`, and
/// give the read's time in microseconds.
fn read_back(f: &std::fs::File, path: &Path, data: &[u8]) -> Result<u64> {
    let mut back = AlignedBuf::new(PROBE_BYTES.max(DIRECT_ALIGN));
    let t = Instant::now();
    f.read_exact_at(&mut back.as_mut_slice()[..PROBE_BYTES], 0)
        .with_context(|| format!("read {}", path.display()))?;
    let read_us = t.elapsed().as_micros() as u64;
    if back.as_slice()[..PROBE_BYTES] != *data {
        bail!(
            "{}: read back other bytes than were written",
            path.display()
        );
    }
    Ok(read_us)
}

/// `probe-hold`: wait for SIGTERM or SIGINT, then return. As PID 1 of its container it must
/// handle them itself (the kernel ignores a signal PID 1 has no handler for), or a pod
/// deletion would wait for the kill. With `busy` (a path on the volume, the bytes of its region
/// and the most I/Os a second), [`busy::run`]'s I/O runs meanwhile, and what it did is written, once stopped, to
/// stdout and to `message_file` (the container's termination message).
pub async fn hold(busy: Option<(&Path, u64, u32)>, message_file: &Path) -> Result<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let stop = Arc::new(AtomicBool::new(false));
    let io = busy.map(|(path, bytes, iops)| {
        let (path, stop) = (path.to_path_buf(), stop.clone());
        tokio::task::spawn_blocking(move || busy::run(&path, bytes, iops, &stop))
    });
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(io) = io {
        let message = io.await.context("the busy I/O's thread")?.message();
        print!("{message}");
        // Best effort: outside a container there is no termination log.
        let _ = std::fs::write(message_file, message);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_writes_reads_and_removes_its_file() {
        // /var/tmp: a disk file system on most machines (tmpfs refuses O_DIRECT).
        let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        let msg = dir.path().join("message");
        match probe(dir.path()) {
            Ok(p) => {
                assert!(p.write_us > 0 || p.read_us > 0, "{p:?}");
                main(dir.path(), &msg).expect("main");
                let text = std::fs::read_to_string(&msg).expect("message");
                assert!(text.starts_with("{\"writeUs\":"), "{text}");
                assert!(!dir.path().join(".benchrun-probe").exists());
            }
            Err(e) => assert!(format!("{e:#}").contains("O_DIRECT"), "{e:#}"),
        }
    }
}
