//! `file://`: buffered I/O through the page cache, read in chunks into pooled buffers.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::local::{blocking, LocalRoot};
use super::{
    whole_object_buffer, BufferPool, ChunkPlan, GetOutcome, GetRequest, ListOutcome, ObjectInfo,
    Payload, Target, TargetError,
};
use crate::spec::Workload;

/// The chunk size the chunked-read report found fastest for buffered reads.
pub const DEFAULT_CHUNK: u64 = 1 << 20;

#[derive(Debug)]
pub struct FileTarget {
    root: LocalRoot,
    pool: Arc<BufferPool>,
    fsync: bool,
}

impl FileTarget {
    pub fn new(root: PathBuf, workload: &Workload) -> Self {
        Self {
            root: LocalRoot {
                root,
                uri: workload.target.clone(),
            },
            pool: Arc::new(BufferPool::new()),
            fsync: workload.write.fsync,
        }
    }
}

#[async_trait]
impl Target for FileTarget {
    async fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
        let (root, pool, key, req) = (
            self.root.clone(),
            self.pool.clone(),
            key.to_string(),
            req.clone(),
        );
        blocking(move || {
            let start = Instant::now();
            let file = std::fs::File::open(root.path(&key)).map_err(|e| root.err(&key, e))?;
            let size = match req.plan {
                ChunkPlan::Whole => Some(whole_object_buffer(
                    &key,
                    file.metadata().map_err(|e| root.err(&key, e))?.len(),
                )? as u64),
                _ => None,
            };
            let buf_len = match (req.plan.max_chunk(), size) {
                (Some(c), _) => c,
                (None, Some(s)) => s.max(1),
                (None, None) => DEFAULT_CHUNK,
            } as usize;
            let mut buf = pool.take(buf_len);
            let result = (|| {
                let mut out = GetOutcome::default();
                let mut chunk = None;
                loop {
                    let want = req.plan.next(chunk, 1).min(buf_len as u64) as usize;
                    let n = file
                        .read_at(&mut buf.as_mut_slice()[..want], out.bytes)
                        .map_err(|e| root.err(&key, e))?;
                    out.requests += 1;
                    if out.requests == 1 {
                        out.ttfb = start.elapsed();
                    }
                    req.check.check(&key, out.bytes, &buf.as_slice()[..n])?;
                    out.bytes += n as u64;
                    // pread on a regular file is short only at end of file: stop without an
                    // extra zero-length read.
                    if n < want || size.is_some_and(|s| out.bytes >= s) {
                        break;
                    }
                    chunk = Some(want as u64);
                }
                Ok(out)
            })();
            pool.give(buf);
            result
        })
        .await
    }

    async fn put(&self, key: &str, data: Payload) -> Result<u32, TargetError> {
        let (root, key, fsync) = (self.root.clone(), key.to_string(), self.fsync);
        blocking(move || {
            let create = || std::fs::File::create(root.path(&key));
            let mut f = match create() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    root.make_parent(&key)?;
                    create()
                }
                other => other,
            }
            .map_err(|e| root.err(&key, e))?;
            let mut writes = 0;
            for part in &data.parts {
                f.write_all(part).map_err(|e| root.err(&key, e))?;
                writes += 1;
            }
            if fsync {
                f.sync_all().map_err(|e| root.err(&key, e))?;
            }
            Ok(writes)
        })
        .await
    }

    async fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError> {
        self.root.stat_async(key).await
    }

    async fn list(&self, prefix: &str) -> Result<ListOutcome, TargetError> {
        self.root.list_async(prefix).await
    }

    async fn delete(&self, key: &str) -> Result<(), TargetError> {
        self.root.delete_async(key).await
    }

    async fn check(&self) -> Result<(), TargetError> {
        let root = self.root.clone();
        blocking(move || root.check_writable()).await
    }

    fn default_plan(&self) -> ChunkPlan {
        ChunkPlan::Fixed(DEFAULT_CHUNK)
    }

    fn free_space(&self) -> Option<u64> {
        self.root.free_space()
    }
}
