//! `file://`: buffered I/O through the page cache, read in chunks into pooled buffers.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::local::{blocking, io_inline_here, LocalRoot, ReadPlan};
use super::{
    whole_object_buffer, BufferPool, ChunkPlan, GetOutcome, GetRequest, ListOutcome, ObjectInfo,
    Payload, Target, TargetError,
};
use crate::spec::Workload;

/// The chunk size the chunked-read report found fastest for buffered reads.
pub const DEFAULT_CHUNK: u64 = 1 << 20;

#[derive(Debug)]
pub struct FileTarget {
    inner: Arc<Files>,
}

/// The target's state, shared with the blocking pool when an op runs there.
#[derive(Debug)]
struct Files {
    root: LocalRoot,
    /// Read buffers (`read.bufferPool`).
    pool: BufferPool,
    fsync: bool,
}

impl FileTarget {
    pub fn new(root: PathBuf, workload: &Workload) -> Self {
        Self {
            inner: Arc::new(Files {
                root: LocalRoot {
                    root,
                    uri: workload.target.clone(),
                },
                pool: BufferPool::reusing(workload.read.buffer_pool),
                fsync: workload.write.fsync,
            }),
        }
    }
}

impl Files {
    fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
        let root = &self.root;
        let start = Instant::now();
        let file = std::fs::File::open(root.path(key)).map_err(|e| root.err(key, e))?;
        let size = file.metadata().map_err(|e| root.err(key, e))?.len();
        let buf_len = match req.plan.max_chunk() {
            Some(c) => c as usize,
            None if req.plan == ChunkPlan::Whole => whole_object_buffer(key, size)?.max(1),
            None => DEFAULT_CHUNK as usize,
        };
        let (mut buf, fresh) = self.pool.take(buf_len);
        let result = ReadPlan {
            size,
            plan: &req.plan,
            align: 1,
            fill: false,
        }
        .run(&file, &mut buf, buf_len, &req.check, key, root, start);
        self.pool.give(buf);
        result.map(|o| GetOutcome {
            buffers: u32::from(fresh),
            ..o
        })
    }

    /// Read `len` bytes from `offset` in chunks of at most [`DEFAULT_CHUNK`].
    fn get_range(
        &self,
        key: &str,
        offset: u64,
        len: u64,
        check: &super::ReadCheck,
    ) -> Result<GetOutcome, TargetError> {
        use std::os::unix::fs::FileExt;
        let root = &self.root;
        let start = Instant::now();
        let file = std::fs::File::open(root.path(key)).map_err(|e| root.err(key, e))?;
        let buf_len = len.clamp(1, DEFAULT_CHUNK) as usize;
        let (mut buf, fresh) = self.pool.take(buf_len);
        let mut out = GetOutcome {
            buffers: u32::from(fresh),
            ..Default::default()
        };
        let result = (|| {
            while out.bytes < len {
                let want = (len - out.bytes).min(buf_len as u64) as usize;
                let dst = &mut buf.as_mut_slice()[..want];
                let n = file
                    .read_at(dst, offset + out.bytes)
                    .map_err(|e| root.err(key, e))?;
                out.requests += 1;
                if out.requests == 1 {
                    out.ttfb = start.elapsed();
                }
                check.check(key, offset + out.bytes, &buf.as_slice()[..n])?;
                out.bytes += n as u64;
                if n < want {
                    break;
                }
            }
            Ok(())
        })();
        self.pool.give(buf);
        result.map(|()| out)
    }

    /// Copy a local file in as `key` (the kernel copies it: no buffer of its size).
    fn put_file(&self, key: &str, from: &std::path::Path) -> Result<u64, TargetError> {
        let root = &self.root;
        root.make_parent(key)?;
        let n = std::fs::copy(from, root.path(key)).map_err(|e| root.err(key, e))?;
        if self.fsync {
            std::fs::File::open(root.path(key))
                .and_then(|f| f.sync_all())
                .map_err(|e| root.err(key, e))?;
        }
        Ok(n)
    }

    fn put(&self, key: &str, data: &Payload) -> Result<u32, TargetError> {
        let root = &self.root;
        let create = || std::fs::File::create(root.path(key));
        let mut f = match create() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                root.make_parent(key)?;
                create()
            }
            other => other,
        }
        .map_err(|e| root.err(key, e))?;
        // One piece generated, written and dropped at a time: memory is a piece, not the file.
        let mut writes = 0;
        for piece in data.pieces() {
            f.write_all(&piece).map_err(|e| root.err(key, e))?;
            writes += 1;
        }
        if self.fsync {
            f.sync_all().map_err(|e| root.err(key, e))?;
        }
        Ok(writes)
    }
}

#[async_trait]
impl Target for FileTarget {
    async fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
        if io_inline_here() {
            return self.inner.get(key, req);
        }
        let (inner, key, req) = (self.inner.clone(), key.to_string(), req.clone());
        blocking(move || inner.get(&key, &req)).await
    }

    async fn get_range(
        &self,
        key: &str,
        offset: u64,
        len: u64,
        check: &super::ReadCheck,
    ) -> Result<GetOutcome, TargetError> {
        if io_inline_here() {
            return self.inner.get_range(key, offset, len, check);
        }
        let (inner, key, check) = (self.inner.clone(), key.to_string(), check.clone());
        blocking(move || inner.get_range(&key, offset, len, &check)).await
    }

    async fn put(&self, key: &str, data: Payload) -> Result<u32, TargetError> {
        if io_inline_here() {
            return self.inner.put(key, &data);
        }
        let (inner, key) = (self.inner.clone(), key.to_string());
        blocking(move || inner.put(&key, &data)).await
    }

    async fn put_file(&self, key: &str, path: &std::path::Path) -> Result<u64, TargetError> {
        let (inner, key, path) = (self.inner.clone(), key.to_string(), path.to_path_buf());
        blocking(move || inner.put_file(&key, &path)).await
    }

    async fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError> {
        self.inner.root.stat_async(key).await
    }

    async fn list(&self, prefix: &str) -> Result<ListOutcome, TargetError> {
        self.inner.root.list_async(prefix).await
    }

    async fn delete(&self, key: &str) -> Result<(), TargetError> {
        self.inner.root.delete_async(key).await
    }

    async fn check(&self) -> Result<(), TargetError> {
        let root = self.inner.root.clone();
        blocking(move || root.check_writable()).await
    }

    fn default_plan(&self) -> ChunkPlan {
        ChunkPlan::Fixed(DEFAULT_CHUNK)
    }

    fn free_space(&self) -> Option<u64> {
        self.inner.root.free_space()
    }

    fn blocking_io(&self) -> bool {
        true
    }
}
