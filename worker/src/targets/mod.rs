//! Storage targets: one small trait, one module per backend.
//!
//! The engine only sees [`Target`]. Each backend maps its own failures into
//! [`TargetError`], whose [`TargetError::kind`] is the label errors are counted under.
//!
//! Reads never stat first: a GET learns the object's size from its own response (or from the
//! dataset listing passed in as a hint), because one extra request per GET was measured as a
//! 10% regression. Local files take theirs from the fstat of the file they opened (no extra
//! path lookup), and stop reading at it: no empty read at the end of an object whose size is a
//! multiple of the chunk size.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::datagen::DataPattern;
use crate::spec::{TargetUri, Workload};

mod buffers;
mod direct;
mod file;
mod local;
pub mod object;
mod spread;

pub use buffers::{AlignedBuf, BufferPool};
// What PUT writes is made by the data generator; targets only take it.
pub use crate::datagen::Payload;
pub use local::{free_bytes, io_inline, io_inline_here};
pub use spread::{Endpoint, Spread};

/// Alignment of O_DIRECT buffers, offsets and lengths (defined with the workload's bounds).
pub use crate::spec::limits::DIRECT_ALIGN;

/// How one GET reads an object.
#[derive(Clone, Debug, PartialEq)]
pub enum ChunkPlan {
    /// One request, one buffer of the object's size.
    Whole,
    /// Fixed-size chunks.
    Fixed(u64),
    /// Chunks growing from `initial` by `factor` up to `max`.
    Adaptive {
        /// Size of the first chunk.
        initial: u64,
        /// Growth of each chunk over the previous one.
        factor: f64,
        /// Largest chunk.
        max: u64,
    },
    /// Object storage only: one streaming GET, chunks as the network delivers them.
    Stream,
}

impl ChunkPlan {
    /// Size of the chunk after one of `prev` bytes (`None` for the first chunk).
    pub fn next(&self, prev: Option<u64>, align: u64) -> u64 {
        let raw = match (self, prev) {
            (ChunkPlan::Fixed(n), _) => *n,
            (ChunkPlan::Adaptive { initial, .. }, None) => *initial,
            (ChunkPlan::Adaptive { factor, max, .. }, Some(p)) => {
                ((p as f64 * factor) as u64).min(*max)
            }
            (ChunkPlan::Whole | ChunkPlan::Stream, _) => u64::MAX,
        };
        if raw == u64::MAX || align <= 1 {
            raw.max(1)
        } else {
            (raw / align).max(1) * align
        }
    }

    /// The largest chunk this plan reads, if bounded.
    pub fn max_chunk(&self) -> Option<u64> {
        match self {
            ChunkPlan::Fixed(n) => Some(*n),
            ChunkPlan::Adaptive { max, .. } => Some(*max),
            ChunkPlan::Whole | ChunkPlan::Stream => None,
        }
    }
}

/// What a GET does with the bytes it reads.
#[derive(Clone, Debug)]
pub enum ReadCheck {
    /// Discard (the default: memory stays bounded by concurrency x chunk size).
    Discard,
    /// Compare every byte with what this tool writes under that key.
    Verify(Arc<DataPattern>),
}

impl ReadCheck {
    /// Check `chunk`, read at `offset` of `key`.
    pub fn check(&self, key: &str, offset: u64, chunk: &[u8]) -> Result<(), TargetError> {
        match self {
            ReadCheck::Discard => Ok(()),
            ReadCheck::Verify(p) => match p.first_mismatch(key, offset, chunk) {
                None => Ok(()),
                Some(at) => Err(TargetError::Corrupt {
                    key: key.to_string(),
                    offset: offset + at as u64,
                }),
            },
        }
    }
}

/// One GET.
#[derive(Clone, Debug)]
pub struct GetRequest {
    /// How the object is read: whole, in chunks or by ranges.
    pub plan: ChunkPlan,
    /// What is checked of the data read.
    pub check: ReadCheck,
    /// Size known from the dataset listing, used by the range engine instead of a HEAD.
    pub size_hint: Option<u64>,
}

/// What a GET did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GetOutcome {
    /// Payload bytes read.
    pub bytes: u64,
    /// Requests (or read syscalls for local files) it took.
    pub requests: u32,
    /// Time to the first byte.
    pub ttfb: Duration,
    /// Read buffers newly allocated for it: 0 when a pooled one was reused (or the bytes
    /// landed in no buffer of ours), 1 when the pool had none or is off (`read.bufferPool`).
    pub buffers: u32,
}

/// An object's metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Key relative to the target root.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
}

/// A listing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListOutcome {
    /// The objects listed.
    pub objects: Vec<ObjectInfo>,
    /// Requests (pages) it took.
    pub requests: u32,
}

/// The operations every backend provides.
#[async_trait]
pub trait Target: Send + Sync + fmt::Debug {
    /// Read an object.
    async fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError>;
    /// Write an object; returns the requests it took.
    async fn put(&self, key: &str, data: Payload) -> Result<u32, TargetError>;
    /// Read an object's metadata.
    async fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError>;
    /// List every object under `prefix` (all pages).
    async fn list(&self, prefix: &str) -> Result<ListOutcome, TargetError>;
    /// Delete an object.
    async fn delete(&self, key: &str) -> Result<(), TargetError>;
    /// Read `len` bytes of `key` from `offset` (one record of a shard, for `training`),
    /// checking them with `check` at their offsets. Backends that cannot read a range
    /// refuse it (the default).
    async fn get_range(
        &self,
        key: &str,
        offset: u64,
        len: u64,
        check: &ReadCheck,
    ) -> Result<GetOutcome, TargetError> {
        let _ = (offset, len, check);
        Err(TargetError::Unsupported(format!(
            "{key}: this target does not read byte ranges"
        )))
    }
    /// Fail early, with a clear message, when the target cannot be used at all.
    async fn check(&self) -> Result<(), TargetError>;
    /// Store the local file `path` as the object `key` (an agent's op-log, after its run);
    /// the bytes sent. Not a benchmark op: nothing is timed or counted. Backends that can
    /// stream override this so that memory stays bounded whatever the file's size; this
    /// default reads the file whole, and refuses one above [`PUT_FILE_IN_MEMORY_MAX`].
    async fn put_file(&self, key: &str, path: &std::path::Path) -> Result<u64, TargetError> {
        let data = read_bounded(path, PUT_FILE_IN_MEMORY_MAX).await?;
        let len = data.len() as u64;
        self.put(key, Payload::new(vec![data])).await?;
        Ok(len)
    }
    /// The default read plan for this backend when the workload sets none.
    fn default_plan(&self) -> ChunkPlan;
    /// Bytes that can still be written, when the backend can tell (local file systems);
    /// checked before a run writes anything.
    fn free_space(&self) -> Option<u64> {
        None
    }
    /// Whether every op is blocking system calls (local files). The engine then runs each task
    /// on an OS thread of its own, inside [`io_inline`], where the target does its I/O in
    /// place instead of handing each op to tokio's blocking pool: no thread hand-off and no
    /// wait for a pool thread is ever timed as storage latency. A wrapper that delegates to
    /// a local target without forwarding this keeps the pooled path, which is just as correct.
    fn blocking_io(&self) -> bool {
        false
    }
    /// A new instance with a client (connection pool) of its own, for the tasks of one
    /// engine shard (see `engine::shards`), so that a connection is driven on the thread of
    /// the task using it. `None` where instances would share everything anyway.
    fn for_shard(&self) -> Result<Option<Arc<dyn Target>>, TargetError> {
        Ok(None)
    }
    /// With several endpoints (`storage.endpoints`, see [`Spread`]): each endpoint's URL and
    /// the target bound to it, in the workload's order, so the engine can send an op to the
    /// endpoint of its turn and count it there. Empty for a target with one endpoint.
    fn endpoints(&self) -> &[Endpoint] {
        &[]
    }
    /// TCP connections its clients (its shards' included) have established so far, for
    /// the engine to count per stage; `None` where nothing is counted (local files).
    fn connections_opened(&self) -> Option<u64> {
        None
    }
}

/// The largest file [`Target::put_file`] reads whole into memory on a backend that cannot
/// stream an upload: 256 MiB, about 2.5 million op-log records.
pub const PUT_FILE_IN_MEMORY_MAX: u64 = 256 << 20;

/// Read `path` whole, refusing a file larger than `max` with an error naming it.
pub async fn read_bounded(path: &std::path::Path, max: u64) -> Result<bytes::Bytes, TargetError> {
    let what = || path.display().to_string();
    let len = tokio::fs::metadata(path)
        .await
        .map_err(|e| TargetError::io(what(), e))?
        .len();
    if len > max {
        return Err(TargetError::Unsupported(format!(
            "{}: {} is more than the {} this backend uploads from memory",
            what(),
            crate::units::ByteSize(len),
            crate::units::ByteSize(max)
        )));
    }
    let data = tokio::fs::read(path)
        .await
        .map_err(|e| TargetError::io(what(), e))?;
    Ok(bytes::Bytes::from(data))
}

/// A failed storage operation.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// No object at `key`.
    #[error("{key}: not found")]
    NotFound {
        /// The key asked for.
        key: String,
    },
    /// A request did not finish in time.
    #[error("{what}: timed out after {after:?}")]
    Timeout {
        /// The request.
        what: String,
        /// How long it was given.
        after: Duration,
    },
    /// The server answered with an error status.
    #[error("{what}: HTTP {status}: {message}")]
    Http {
        /// The request.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// A local I/O error.
    #[error("{what}: {source}")]
    Io {
        /// The operation and path.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The target is full (ENOSPC) or over its quota (EDQUOT).
    #[error("{what}: no space left on the target; bound what `put` writes with write.maxObjects, or give the volume more room")]
    NoSpace {
        /// The operation and path.
        what: String,
    },
    /// A verified read (`read.verify`) read data that differs from what was written.
    #[error("{key}: data read back differs from what was written, first at byte {offset}")]
    Corrupt {
        /// The object, or the block file or device.
        key: String,
        /// The first byte that differs.
        offset: u64,
    },
    /// A GET returned fewer bytes than the object's size said (the size the prepare stage
    /// wrote, or with `read.verify` the size the seed gives a dataset object).
    #[error("{key}: short object: {got} bytes read of the {want} it should hold")]
    Short {
        /// The object.
        key: String,
        /// Bytes read.
        got: u64,
        /// Bytes it should hold.
        want: u64,
    },
    /// A block read returned fewer bytes than asked: the file or device ends before the
    /// dataset does (a block file truncated since it was laid out, or a smaller device).
    #[error("{path}: short read at {at}: {got} bytes of {want}; the file or device ends before the dataset does")]
    ShortRead {
        /// The block file or device.
        path: String,
        /// The read's offset in it.
        at: u64,
        /// Bytes read.
        got: u64,
        /// Bytes asked for.
        want: u64,
    },
    /// The target cannot do what is asked (O_DIRECT on tmpfs, a scheme that is no object store).
    #[error("{0}")]
    Unsupported(String),
    /// The target is misconfigured (credentials, endpoint, bucket, an unwritable directory).
    #[error("{0}")]
    Config(String),
    /// Any other failure.
    #[error("{0}")]
    Other(String),
}

/// The length of a buffer that holds a whole object of `size` bytes (a size a server or the
/// file system reported): an error above
/// [`MAX_WHOLE_OBJECT_BUFFER`](crate::spec::limits::MAX_WHOLE_OBJECT_BUFFER), so a huge or
/// lying size is refused instead of allocated.
pub fn whole_object_buffer(key: &str, size: u64) -> Result<usize, TargetError> {
    let max = crate::spec::limits::MAX_WHOLE_OBJECT_BUFFER;
    if size > max {
        return Err(TargetError::Unsupported(format!(
            "{key}: the object is {}, more than the {} a whole-object read may buffer; read it in chunks (read.chunkSize)",
            crate::units::ByteSize(size),
            crate::units::ByteSize(max)
        )));
    }
    Ok(size as usize)
}

impl TargetError {
    /// An I/O error; a full target becomes [`TargetError::NoSpace`], counted as `no_space`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
            return TargetError::NoSpace { what: what.into() };
        }
        TargetError::Io {
            what: what.into(),
            source,
        }
    }

    /// Where a data error (`corrupt` or `short`) is, for the summary's first few; `None`
    /// for any other error.
    pub fn data_error(&self) -> Option<crate::stats::DataError> {
        let (key, offset) = match self {
            TargetError::Corrupt { key, offset } => (key, *offset),
            TargetError::Short { key, got, .. } => (key, *got),
            TargetError::ShortRead { path, at, got, .. } => (path, at + got),
            _ => return None,
        };
        Some(crate::stats::DataError {
            kind: self.kind(),
            key: crate::spec::clip(key).into_owned(),
            offset,
        })
    }

    /// The label this error is counted under: `not_found`, `timeout`, `http_503`, `io`, ...
    pub fn kind(&self) -> String {
        match self {
            TargetError::NotFound { .. } => "not_found".into(),
            TargetError::Timeout { .. } => "timeout".into(),
            TargetError::Http { status, .. } => format!("http_{status}"),
            TargetError::Io { source, .. } if source.kind() == std::io::ErrorKind::TimedOut => {
                "timeout".into()
            }
            TargetError::Io { .. } => "io".into(),
            TargetError::NoSpace { .. } => "no_space".into(),
            TargetError::Corrupt { .. } => "corrupt".into(),
            TargetError::Short { .. } | TargetError::ShortRead { .. } => "short".into(),
            TargetError::Unsupported(_) => "unsupported".into(),
            TargetError::Config(_) => "config".into(),
            TargetError::Other(_) => "other".into(),
        }
    }
}

/// Open the target a workload names.
pub async fn open(workload: &Workload) -> Result<Arc<dyn Target>, TargetError> {
    let uri = workload.target_uri().map_err(TargetError::Config)?;
    let target: Arc<dyn Target> = match uri {
        TargetUri::File { root } => Arc::new(file::FileTarget::new(root, workload)),
        TargetUri::Direct { root } => Arc::new(direct::DirectTarget::new(root, workload)),
        other => object::open(&other, workload)?,
    };
    target.check().await?;
    Ok(target)
}

/// The `file://` or `direct://` target of a workload, unchecked: for a block workload on a
/// raw device, which the volume checks itself.
pub fn local(workload: &Workload) -> Result<Arc<dyn Target>, TargetError> {
    match workload.target_uri().map_err(TargetError::Config)? {
        TargetUri::File { root } => Ok(Arc::new(file::FileTarget::new(root, workload))),
        TargetUri::Direct { root } => Ok(Arc::new(direct::DirectTarget::new(root, workload))),
        other => Err(TargetError::Config(format!(
            "{}:// is not a local target",
            other.scheme()
        ))),
    }
}

/// The read plan a workload asks for on a target.
pub fn read_plan(workload: &Workload, target: &dyn Target) -> ChunkPlan {
    let r = &workload.read;
    if r.whole_object {
        ChunkPlan::Whole
    } else if let Some(c) = r.chunk_size {
        ChunkPlan::Fixed(c.0)
    } else if let Some(a) = &r.adaptive {
        ChunkPlan::Adaptive {
            initial: a.initial.0,
            factor: a.factor,
            max: a.max.0,
        }
    } else {
        target.default_plan()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_block_read_is_a_short_data_error_where_the_data_ends() {
        let e = TargetError::ShortRead {
            path: "/dev/loop3".into(),
            at: 8192,
            got: 512,
            want: 4096,
        };
        assert_eq!(e.kind(), "short");
        let d = e.data_error().expect("a data error");
        assert_eq!(
            (d.kind.as_str(), d.key.as_str(), d.offset),
            ("short", "/dev/loop3", 8704)
        );
        assert!(
            e.to_string()
                .contains("short read at 8192: 512 bytes of 4096"),
            "{e}"
        );
    }

    #[test]
    fn a_full_target_is_its_own_error_kind_with_advice() {
        for errno in [libc::ENOSPC, libc::EDQUOT] {
            let e = TargetError::io("/data/x", std::io::Error::from_raw_os_error(errno));
            assert_eq!(e.kind(), "no_space");
            let msg = e.to_string();
            assert!(
                msg.starts_with("/data/x: no space left") && msg.contains("write.maxObjects"),
                "{msg}"
            );
        }
        let other = TargetError::io("/data/x", std::io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(other.kind(), "io");
    }

    #[test]
    fn adaptive_plan_grows_to_max_and_stays_aligned() {
        let p = ChunkPlan::Adaptive {
            initial: 64 << 10,
            factor: 1.5,
            max: 256 << 10,
        };
        let mut sizes = vec![];
        let mut prev = None;
        for _ in 0..6 {
            let n = p.next(prev, 4096);
            sizes.push(n);
            prev = Some(n);
        }
        assert_eq!(sizes, vec![65536, 98304, 147456, 221184, 262144, 262144]);
        assert!(sizes.iter().all(|s| s % 4096 == 0));
    }
}
