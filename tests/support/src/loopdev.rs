//! Loop devices for the volume tests: a real block device over a file of zeros, with the
//! kernel's own I/O counters. Also compiled into the worker's `volume_local` test (by path:
//! the worker does not depend on this crate), so it uses nothing but std.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A loop device over a zeroed file in `dir`, detached when dropped (unmounted first if a
/// test mounted it). `losetup` needs root: without it this fails and says so; the tests that
/// use it must never pass without a real device.
pub struct Loop {
    /// The device node, e.g. `/dev/loop3`.
    pub dev: PathBuf,
    /// The file behind it.
    pub backing: PathBuf,
}

/// The block layer's counters of a device (`/sys/block/NAME/stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStat {
    /// Reads completed plus reads merged: read requests issued to the device.
    pub reads: u64,
    /// Sectors (512 B) read.
    pub sectors_read: u64,
    /// Writes completed plus writes merged (a flush counts as an empty write).
    pub writes: u64,
    /// Sectors (512 B) written.
    pub sectors_written: u64,
}

impl IoStat {
    /// What happened between `self` and `later`.
    pub fn since(self, later: IoStat) -> IoStat {
        IoStat {
            reads: later.reads - self.reads,
            sectors_read: later.sectors_read - self.sectors_read,
            writes: later.writes - self.writes,
            sectors_written: later.sectors_written - self.sectors_written,
        }
    }
}

impl Loop {
    /// A loop device of `size` bytes over `dir/disk.img`, with direct I/O to the file (so
    /// the device's own reads and writes are not served from the host's page cache).
    pub fn new(dir: &Path, size: u64) -> Self {
        let root = std::fs::metadata("/proc/self")
            .map(|m| m.uid() == 0)
            .unwrap_or(false);
        assert!(
            root,
            "the loop device tests need root (losetup); run them as root, as `make test` does"
        );
        let backing = dir.join("disk.img");
        std::fs::File::create(&backing)
            .and_then(|f| f.set_len(size))
            .expect("backing file");
        let out = Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(&backing)
            .output()
            .expect("losetup runs");
        assert!(
            out.status.success(),
            "losetup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Self { dev, backing }
    }

    /// The device's counters now.
    pub fn stat(&self) -> IoStat {
        let name = self
            .dev
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let t = std::fs::read_to_string(format!("/sys/block/{name}/stat")).expect("device stat");
        let f: Vec<u64> = t
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        IoStat {
            reads: f[0] + f[1],
            sectors_read: f[2],
            writes: f[4] + f[5],
            sectors_written: f[6],
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dev).output();
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).output();
    }
}
