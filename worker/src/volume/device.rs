//! Raw block devices: their geometry, and the checks that keep a benchmark from destroying a
//! file system (a mounted device is refused; one with a signature needs `allowDestroy`).

use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

// <linux/fs.h>: _IO(0x12, 104) and _IOR(0x12, 114, size_t).
const BLKSSZGET: libc::c_ulong = 0x1268;
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

/// A block device's geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// The device node.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Logical block size: O_DIRECT sizes and offsets must be multiples of it.
    pub logical_block: u64,
    /// `major:minor`, to find it among mounts and holders.
    pub dev: (u32, u32),
}

/// Whether `path` is a block device (following symlinks, as a PVC's device path may be one).
pub fn is_block_device(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

impl Device {
    /// Read the geometry of the device at `path`.
    pub fn probe(path: &Path) -> std::io::Result<Self> {
        let f = std::fs::File::open(path)?;
        let m = f.metadata()?;
        if !m.file_type().is_block_device() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a block device",
            ));
        }
        let mut size: u64 = 0;
        let mut lbs: libc::c_int = 0;
        // SAFETY: f is an open block device; both ioctls write one integer of the given type.
        unsafe {
            if libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::ioctl(f.as_raw_fd(), BLKSSZGET, &mut lbs) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        let rdev = m.rdev();
        Ok(Self {
            path: path.to_path_buf(),
            size,
            logical_block: lbs.max(512) as u64,
            dev: (libc::major(rdev), libc::minor(rdev)),
        })
    }

    /// Where the device is in use: a mount of it (from /proc/self/mountinfo, as the worker
    /// sees mounts) or a holder (device-mapper, md, a partition's parent is not one).
    pub fn in_use(&self) -> Option<String> {
        let dev = format!("{}:{}", self.dev.0, self.dev.1);
        if let Ok(mi) = std::fs::read_to_string("/proc/self/mountinfo") {
            for line in mi.lines() {
                let f: Vec<&str> = line.split(' ').collect();
                if f.get(2) == Some(&dev.as_str()) {
                    return Some(format!("mounted on {}", f.get(4).unwrap_or(&"?")));
                }
            }
        }
        let holders = format!("/sys/dev/block/{dev}/holders");
        if let Ok(rd) = std::fs::read_dir(&holders) {
            let names: Vec<String> = rd
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if !names.is_empty() {
                return Some(format!("held by {}", names.join(", ")));
            }
        }
        None
    }

    /// The signature at the start of the device, if any: what is there to destroy.
    pub fn signature(&self) -> std::io::Result<Option<&'static str>> {
        let f = std::fs::File::open(&self.path)?;
        let mut buf = vec![0u8; 68 << 10];
        let n = read_up_to(&f, &mut buf)?;
        Ok(signature_of(&buf[..n]))
    }
}

fn read_up_to(f: &std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Known signatures (as blkid looks for them) in the first 68 KiB of a device.
pub fn signature_of(b: &[u8]) -> Option<&'static str> {
    let at = |off: usize, magic: &[u8]| b.get(off..off + magic.len()) == Some(magic);
    if at(0x438, &[0x53, 0xEF]) {
        Some("an ext2/3/4 file system")
    } else if at(0, b"XFSB") {
        Some("an XFS file system")
    } else if at(0x10040, b"_BHRfS_M") {
        Some("a btrfs file system")
    } else if at(512, b"EFI PART") {
        Some("a GPT partition table")
    } else if at(512 + 24, b"LVM2 001") || at(512, b"LABELONE") {
        Some("an LVM physical volume")
    } else if at(4086, b"SWAPSPACE2") || at(4086, b"SWAP-SPACE") {
        Some("swap space")
    } else if at(0, b"LUKS\xba\xbe") {
        Some("a LUKS volume")
    } else if at(510, &[0x55, 0xAA]) {
        Some("an MBR partition table")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_recognised_and_zeros_are_not() {
        let mut b = vec![0u8; 68 << 10];
        assert_eq!(signature_of(&b), None);
        b[0x438] = 0x53;
        b[0x439] = 0xEF;
        assert_eq!(signature_of(&b), Some("an ext2/3/4 file system"));
        let mut x = vec![0u8; 68 << 10];
        x[..4].copy_from_slice(b"XFSB");
        assert_eq!(signature_of(&x), Some("an XFS file system"));
        assert_eq!(signature_of(&[]), None, "a short device has no signature");
    }

    #[test]
    fn a_regular_file_is_not_a_block_device() {
        let f = tempfile::NamedTempFile::new().unwrap();
        assert!(!is_block_device(f.path()));
        assert!(Device::probe(f.path()).is_err());
    }
}
