//! Volumes for block workloads: large files under a directory, or a range of a raw block
//! device, on which tasks read and write blocks at a queue depth (see `engine/block`).
//!
//! # Files
//! - `mod.rs`: [`Volume`]: the target opened and checked, its [`Region`]s, each task's share
//! - `device.rs`: a raw device's geometry, and the mounted / signature checks
//! - `layout.rs`: the dataset laid out (or reused), preconditioned, removed
//! - `cache.rs`: the page cache dropped and its residency measured
//! - `offsets.rs`: where each I/O goes and how large it is
//!
//! What a run uses is fixed before it starts: every region's size is known at open, and
//! writes overwrite inside them. Nothing outside a device's range is read or written.

mod cache;
pub mod device;
mod layout;
pub mod offsets;

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub use layout::Layout;
pub use offsets::{BlockSizes, Offsets, Place};

use crate::spec::{BlockSpec, OpKind, TargetUri, Workload};
use crate::units::ByteSize;

/// Why a volume cannot be used. The message names the field or the path.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A workload field that does not fit this volume.
    #[error("{field}: {message}")]
    Field {
        /// The field, as written in a workload (`block.fileSize`).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A system call on a path failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or device.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

impl VolumeError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        VolumeError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    fn field(field: &'static str, message: impl Into<String>) -> Self {
        VolumeError::Field {
            field,
            message: message.into(),
        }
    }
}

/// One place I/O happens: a whole file, or the run's range of a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// The file or device node.
    pub path: PathBuf,
    /// First byte used (0 for a file; `block.offset` on a device).
    pub start: u64,
    /// Bytes used.
    pub len: u64,
}

/// What the volume is.
#[derive(Clone, Debug)]
pub enum Kind {
    /// Files under a directory (`dataset.prefix` inside the target's directory).
    Files {
        /// The directory the files are in.
        dir: PathBuf,
    },
    /// A raw block device.
    Device(device::Device),
}

/// A block workload's volume, opened and checked.
#[derive(Debug)]
pub struct Volume {
    /// The workload's `block` section.
    pub spec: BlockSpec,
    /// O_DIRECT (`direct://`).
    pub direct: bool,
    /// Files or a device.
    pub kind: Kind,
    /// Every region; a task's own are [`Volume::regions_of`].
    pub regions: Vec<Region>,
    /// The block sizes I/Os pick from.
    pub sizes: BlockSizes,
    /// Whether anything is ever written (layout, precondition or `write` ops).
    pub writes: bool,
    /// Whether the measured stage writes (`write` in the mix).
    pub write_ops: bool,
    /// `dataset.prepare`: lay the dataset out (or reuse a matching one) before the run.
    pub prepare: bool,
    /// What layout, preconditioning and writes write, and verified reads check.
    pub pattern: crate::datagen::DataPattern,
    concurrency: u32,
}

impl Volume {
    /// Open the workload's target as a volume: a block device, or a directory for files.
    /// Checks what the workload's validation could not (the device, its geometry and use,
    /// the free space), so a bad volume fails here, before anything is written.
    pub fn open(w: &Workload) -> Result<Self, VolumeError> {
        let spec = w
            .block
            .clone()
            .ok_or_else(|| VolumeError::field("block", "not a block workload"))?;
        let (root, direct) = match w.target_uri() {
            Ok(TargetUri::File { root }) => (root, false),
            Ok(TargetUri::Direct { root }) => (root, true),
            Ok(other) => {
                return Err(VolumeError::field(
                    "target",
                    format!(
                        "block I/O needs file:// or direct://, not {}://",
                        other.scheme()
                    ),
                ))
            }
            Err(e) => return Err(VolumeError::field("target", e)),
        };
        let sizes = BlockSizes::new(&spec.sizes()).ok_or_else(|| {
            VolumeError::field("block.blockSizes", "no size has a weight above 0")
        })?;
        let write_ops = w.weight_of(OpKind::Write) > 0;
        let prepare = w.dataset.prepare;
        let writes = write_ops || spec.precondition.is_some() || prepare;
        let mut v = Self {
            direct,
            kind: Kind::Files { dir: root.clone() },
            regions: vec![],
            sizes,
            writes,
            write_ops,
            prepare,
            concurrency: w.concurrency,
            pattern: crate::datagen::DataPattern::new(w.seed, &w.data()),
            spec,
        };
        if device::is_block_device(&root) {
            v.open_device(&root)?;
        } else {
            v.open_files(&root, &w.dataset.prefix)?;
        }
        Ok(v)
    }

    fn open_device(&mut self, path: &Path) -> Result<(), VolumeError> {
        let dev = device::Device::probe(path).map_err(|e| VolumeError::io(path, e))?;
        let s = &self.spec;
        if s.files != 1 {
            return Err(VolumeError::field(
                "block.files",
                format!(
                    "a block device is one region: files must be 1 (got {})",
                    s.files
                ),
            ));
        }
        let start = s.offset.0;
        if start % 4096 != 0 {
            return Err(VolumeError::field(
                "block.offset",
                format!("{} is not a multiple of 4KiB", s.offset),
            ));
        }
        if start >= dev.size {
            return Err(VolumeError::field(
                "block.offset",
                format!(
                    "{} is past the end of {} ({})",
                    s.offset,
                    path.display(),
                    ByteSize(dev.size)
                ),
            ));
        }
        let len = s.file_size.map_or(dev.size - start, |f| f.0);
        if start.saturating_add(len) > dev.size {
            return Err(VolumeError::field(
                "block.fileSize",
                format!(
                    "offset {} + fileSize {} is past the end of {} ({})",
                    s.offset,
                    ByteSize(len),
                    path.display(),
                    ByteSize(dev.size)
                ),
            ));
        }
        if self.direct {
            let lbs = dev.logical_block;
            for (field, v) in [("block.offset", start), ("block.fileSize", len)] {
                if v % lbs != 0 {
                    return Err(VolumeError::field(
                        field,
                        format!("{} is not a multiple of {}'s logical block size ({lbs} B), which O_DIRECT needs", ByteSize(v), path.display()),
                    ));
                }
            }
            for (bs, _) in s.sizes() {
                if bs % lbs != 0 {
                    return Err(VolumeError::field(
                        "block.blockSize",
                        format!("{} is not a multiple of {}'s logical block size ({lbs} B), which O_DIRECT needs", ByteSize(bs), path.display()),
                    ));
                }
            }
        }
        if len < self.sizes.max() {
            return Err(VolumeError::field(
                "block.fileSize",
                format!(
                    "the range ({}) is smaller than the largest block",
                    ByteSize(len)
                ),
            ));
        }
        if self.writes {
            if let Some(how) = dev.in_use() {
                return Err(VolumeError::field(
                    "target",
                    format!("{} is in use ({how}): a benchmark that writes would destroy it; unmount it first", path.display()),
                ));
            }
            if !s.allow_destroy {
                if let Some(sig) = dev.signature().map_err(|e| VolumeError::io(path, e))? {
                    return Err(VolumeError::field(
                        "block.allowDestroy",
                        format!(
                            "{} holds {sig}, which this run would overwrite{}; set block.allowDestroy: true to destroy it, or use dataset.prepare: false with only `read` to leave it as it is",
                            path.display(),
                            if self.prepare { " (dataset.prepare lays the range out)" } else { "" }
                        ),
                    ));
                }
            }
        }
        self.regions = vec![Region {
            path: path.to_path_buf(),
            start,
            len,
        }];
        self.kind = Kind::Device(dev);
        Ok(())
    }

    fn open_files(&mut self, root: &Path, prefix: &str) -> Result<(), VolumeError> {
        match std::fs::metadata(root) {
            Ok(m) if !m.is_dir() => {
                return Err(VolumeError::field(
                    "target",
                    format!(
                        "{} is neither a directory nor a block device",
                        root.display()
                    ),
                ))
            }
            _ => {}
        }
        let s = &self.spec;
        if s.offset.0 != 0 || s.allow_destroy {
            let field = if s.offset.0 != 0 {
                "block.offset"
            } else {
                "block.allowDestroy"
            };
            return Err(VolumeError::field(
                field,
                format!(
                    "only for a block device; {} is a directory of files",
                    root.display()
                ),
            ));
        }
        let len = s
            .file_size
            .ok_or_else(|| {
                VolumeError::field(
                    "block.fileSize",
                    "give the size of each file (fio's size), e.g. 1GiB",
                )
            })?
            .0;
        let mut dir = root.to_path_buf();
        for c in Path::new(prefix).components() {
            if let std::path::Component::Normal(p) = c {
                dir.push(p);
            }
        }
        let name = |task: Option<u32>, f: u32| match task {
            Some(t) => format!("block-t{t}-f{f}"),
            None => format!("block-f{f}"),
        };
        self.regions = if s.shared {
            (0..s.files)
                .map(|f| dir.join(name(None, f)))
                .collect::<Vec<_>>()
        } else {
            (0..self.concurrency)
                .flat_map(|t| (0..s.files).map(move |f| (t, f)))
                .map(|(t, f)| dir.join(name(Some(t), f)))
                .collect()
        }
        .into_iter()
        .map(|path| Region {
            path,
            start: 0,
            len,
        })
        .collect();
        if self.prepare {
            self.check_space(root)?;
        }
        self.kind = Kind::Files { dir };
        Ok(())
    }

    /// Refuse a dataset that cannot fit: what the files still need against the free space.
    fn check_space(&self, root: &Path) -> Result<(), VolumeError> {
        let mut probe = root.to_path_buf();
        while !probe.exists() {
            match probe.parent() {
                Some(p) => probe = p.to_path_buf(),
                None => return Ok(()),
            }
        }
        let Some(free) = crate::targets::free_bytes(&probe) else {
            return Ok(());
        };
        let need: u64 = self
            .regions
            .iter()
            .map(|r| {
                let have = std::fs::metadata(&r.path).map_or(0, |m| m.len());
                r.len.saturating_sub(have)
            })
            .sum();
        if need > free {
            return Err(VolumeError::field(
                "block.fileSize",
                format!(
                    "the files need {} more ({} files of {}) but {} has {} free; lower fileSize or files{}",
                    ByteSize(need),
                    self.regions.len(),
                    ByteSize(self.regions.first().map_or(0, |r| r.len)),
                    probe.display(),
                    ByteSize(free),
                    if self.spec.shared { "" } else { ", or share them (block.shared)" }
                ),
            ));
        }
        Ok(())
    }

    /// The data stream of `r` (see [`crate::datagen`]): a file's name, so the same layout
    /// verifies wherever its directory is mounted; one stream for a whole device, whose
    /// offsets are absolute. Not who writes: two workers writing a stream at the same offset
    /// write different generations (their generators are keyed by the run and the worker),
    /// and a reader takes each sector's generation from the sector itself.
    pub fn stream(&self, r: &Region) -> u64 {
        match self.kind {
            Kind::Device(_) => crate::datagen::stream_of("device"),
            Kind::Files { .. } => crate::datagen::stream_of(
                &r.path
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default(),
            ),
        }
    }

    /// The regions task `task` does I/O on: its own files, or all of them when shared (a
    /// device is one shared region).
    pub fn regions_of(&self, task: u32) -> &[Region] {
        if self.spec.shared || matches!(self.kind, Kind::Device(_)) {
            &self.regions
        } else {
            let n = self.spec.files as usize;
            let i = task as usize * n;
            &self.regions[i.min(self.regions.len())..(i + n).min(self.regions.len())]
        }
    }

    /// Open a region for the measured stage: read-write when the mix writes, O_DIRECT on
    /// `direct://`.
    pub fn open_region(&self, r: &Region) -> Result<std::fs::File, VolumeError> {
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(self.write_ops);
        if self.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(&r.path).map_err(|e| VolumeError::io(&r.path, e))
    }

    /// Bytes the measured stage addresses.
    pub fn dataset_bytes(&self) -> u64 {
        self.regions.iter().map(|r| r.len).sum()
    }

    /// What the volume is, as a merge of workers' summaries tells targets apart (the keys of
    /// the summary's `volume.targets`): workers with the same identity used the same data,
    /// and their bytes and page cache count once. A device is its node's: `<node>:<path>
    /// [start..end]`. Files on a shared filesystem (NFS, CephFS, SMB, Lustre, GPFS, FUSE,
    /// 9P: a claim mounted by several workers) are the directory's on every node:
    /// `shared:<dir>`; files on a node's own filesystem are that node's: `<node>:<dir>`.
    /// The node is `NODE_NAME` when set (a pod's downward API), else the host name.
    pub fn identity(&self) -> String {
        let node = node_name();
        match &self.kind {
            Kind::Device(d) => {
                let (start, len) = self
                    .regions
                    .first()
                    .map_or((0, d.size), |r| (r.start, r.len));
                format!("{node}:{}[{start}..{}]", d.path.display(), start + len)
            }
            Kind::Files { dir } => files_identity_on(&node, dir),
        }
    }

    /// Bytes of the dataset resident in the page cache, `None` where it cannot be measured.
    pub fn resident(&self) -> Option<u64> {
        let mut total = 0;
        for r in &self.regions {
            total += cache::resident(&r.path, r.start, r.len).ok()?;
        }
        Some(total)
    }
}

/// Which files under `dir` are, for merging workers' page-cache figures: `shared:<dir>` on a
/// filesystem several nodes mount (the same files from every node), else `<node>:<dir>` (see
/// [`Volume::identity`]). Training datasets are named this way too.
pub fn files_identity(dir: &Path) -> String {
    files_identity_on(&node_name(), dir)
}

/// This node's name: `NODE_NAME` when set (a pod's downward API), else the host name.
fn node_name() -> String {
    std::env::var("NODE_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(host_name)
}

fn files_identity_on(node: &str, dir: &Path) -> String {
    if on_shared_filesystem(dir) {
        format!("shared:{}", dir.display())
    } else {
        format!("{node}:{}", dir.display())
    }
}

/// Bytes of `len` at `start` (page aligned) of the file at `path` resident in the page cache
/// (`mincore`; it reads the page tables and faults nothing in).
pub fn resident_in_page_cache(path: &Path, start: u64, len: u64) -> std::io::Result<u64> {
    cache::resident(path, start, len)
}

/// This machine's host name (empty if it has none).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: a valid buffer of its stated length; gethostname NUL-terminates within it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Whether `dir` is on a filesystem several machines mount (by its `statfs` type): the same
/// files from every node that mounts it. Unknown (statfs failed): not shared.
fn on_shared_filesystem(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    // NFS, SMB (CIFS, SMB2), CephFS, Lustre, GPFS, FUSE (s3fs, GlusterFS...), 9P.
    const SHARED: [i64; 8] = [
        0x6969,
        0xFF53_4D42,
        0xFE53_4D42,
        0x00C3_6400,
        0x0BD0_0BD0,
        0x4750_4653,
        0x6573_5546,
        0x0102_1997,
    ];
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    SHARED.contains(&(st.f_type as i64))
}
