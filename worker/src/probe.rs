//! `benchrun-worker probe-io DIR`: the first I/O of a freshly attached volume, for the
//! operator's control-plane runs (operator/src/control_plane/). One 4 KiB O_DIRECT write (with
//! its fdatasync) and one 4 KiB O_DIRECT read of it, each timed; the times go to the
//! container's termination message as one JSON line (`{"writeUs":..,"readUs":..}`), where the
//! operator reads them from the pod's status without any access to the pod.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::targets::AlignedBuf;
use crate::targets::DIRECT_ALIGN;

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

/// Write then read [`PROBE_BYTES`] with O_DIRECT in `dir` (a file removed afterwards).
pub fn probe(dir: &Path) -> Result<Probe> {
    let path = dir.join(".benchrun-probe");
    let mut buf = AlignedBuf::new(PROBE_BYTES.max(DIRECT_ALIGN));
    for (i, b) in buf.as_mut_slice().iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
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
    let mut back = AlignedBuf::new(PROBE_BYTES.max(DIRECT_ALIGN));
    f.seek(SeekFrom::Start(0))?;
    let t = Instant::now();
    f.read_exact(&mut back.as_mut_slice()[..PROBE_BYTES])
        .with_context(|| format!("read {}", path.display()))?;
    let read_us = t.elapsed().as_micros() as u64;
    if back.as_slice()[..PROBE_BYTES] != *data {
        bail!(
            "{}: read back other bytes than were written",
            path.display()
        );
    }
    drop(f);
    std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
    Ok(Probe { write_us, read_us })
}

/// Run the probe on `dir` and report it (or its error) on stdout and in `message_file`.
pub fn main(dir: &Path, message_file: &Path) -> Result<()> {
    let result = probe(dir);
    let line = match &result {
        Ok(p) => serde_json::to_string(p)?,
        Err(e) => format!("{e:#}"),
    };
    println!("{line}");
    // Best effort: outside a container there is no termination log.
    let _ = std::fs::write(message_file, format!("{line}\n"));
    result.map(|_| ())
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
