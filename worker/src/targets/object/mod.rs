//! Object storage targets (`s3://`, `gs://`, `az://`) through the `object_store` crate.
//!
//! # Layout
//! - [`connections`]: the HTTP client, built so that the TCP connections it opens are counted
//! - [`credentials`]: keys from the environment or a mounted Secret; nothing secret prints
//! - [`errors`]: object_store errors mapped to [`TargetError`] kinds (`http_503`, `timeout`, ...)
//! - `s3`, `gcs`, `azure`: one builder per backend, loopback-safe when an endpoint is set
//! - `tls`: the CA bundle of `storage.tls`, and the message for a refused certificate
//! - [`range`]: the range engine (concurrent byte ranges into one pooled buffer)
//!
//! A GET never stats first: its size comes from the dataset listing (`size_hint`) or from
//! its own response. Requests are not retried inside an operation unless
//! `storage.maxRetries` asks for it, so every failure is counted and requests per op are exact.

mod azure;
pub mod connections;
pub mod credentials;
pub mod errors;
mod gcs;
pub mod range;
mod s3;
mod tls;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;
use object_store::{
    ClientOptions, GetOptions, GetRange, GetResult, ObjectStore, PutMultipartOptions, PutOptions,
    PutPayload, RetryConfig,
};

use self::connections::{CountingConnector, Opened};
use self::credentials::{CredentialSource, Redactor};
use self::range::RangeSettings;
use super::{
    whole_object_buffer, BufferPool, ChunkPlan, Endpoint, GetOutcome, GetRequest, ListOutcome,
    ObjectInfo, Payload, ReadCheck, Spread, Target, TargetError,
};
use crate::spec::{StorageSpec, TargetUri, Workload};

/// Parts of one multipart upload sent at once.
const PART_CONCURRENCY: usize = 4;

/// Which service a target talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// AWS S3 and S3-compatible servers.
    S3,
    /// Google Cloud Storage.
    Gcs,
    /// Azure Blob Storage.
    Azure,
}

impl Backend {
    /// Requests a multipart upload takes besides its parts: S3 and GCS initiate and complete;
    /// Azure only commits the block list.
    fn multipart_overhead(self) -> u32 {
        match self {
            Backend::S3 | Backend::Gcs => 2,
            Backend::Azure => 1,
        }
    }
}

/// One client seen through the two object_store traits the target uses.
pub struct Stores {
    backend: Backend,
    store: Arc<dyn ObjectStore>,
    pages: Arc<dyn PaginatedListStore>,
}

impl Stores {
    fn new<T: ObjectStore + PaginatedListStore>(backend: Backend, client: T) -> Self {
        let client = Arc::new(client);
        Self {
            backend,
            store: client.clone(),
            pages: client,
        }
    }
}

/// Open an object storage target: one client, or with several `storage.endpoints` one per
/// endpoint behind a [`Spread`].
pub fn open(uri: &TargetUri, workload: &Workload) -> Result<Arc<dyn Target>, TargetError> {
    let list = workload.storage.endpoint_list();
    // Each endpoint's target sees a workload of that one endpoint.
    let single = |url: &str| {
        let mut w = workload.clone();
        w.storage.endpoint = Some(url.to_string());
        w.storage.endpoints = None;
        w
    };
    match list.as_slice() {
        [] => Ok(open_one(uri, workload, Default::default())?),
        [one] => Ok(open_one(uri, &single(one), Default::default())?),
        many => {
            let endpoints = many
                .iter()
                .map(|url| {
                    Ok(Endpoint {
                        url: url.clone(),
                        target: open_one(uri, &single(url), Default::default())?,
                    })
                })
                .collect::<Result<Vec<_>, TargetError>>()?;
            Ok(Arc::new(Spread::new(endpoints)?))
        }
    }
}

/// One client for `workload.storage.endpoint` (or the service's default endpoint), counting
/// the connections it opens into `opened`.
fn open_one(
    uri: &TargetUri,
    workload: &Workload,
    opened: Arc<Opened>,
) -> Result<Arc<ObjectTarget>, TargetError> {
    let storage = &workload.storage;
    let creds = CredentialSource::new(storage.credentials_dir.as_deref())?;
    let mut redact = Redactor::default();
    let (options, roots) = tls::apply(client_options(storage), &storage.tls)?;
    let client = (options, CountingConnector::new(opened.clone(), roots));
    let retry = RetryConfig {
        max_retries: storage.max_retries as usize,
        ..Default::default()
    };
    let (stores, prefix) = match uri {
        TargetUri::S3 { bucket, prefix } => (
            s3::build(bucket, storage, client, retry, &creds, &mut redact)?,
            prefix,
        ),
        TargetUri::Gcs { bucket, prefix } => (
            gcs::build(bucket, storage, client, retry, &creds, &mut redact)?,
            prefix,
        ),
        TargetUri::Azure { container, prefix } => (
            azure::build(container, storage, client, retry, &creds, &mut redact)?,
            prefix,
        ),
        other => {
            return Err(TargetError::Unsupported(format!(
                "{}:// is not an object storage target",
                other.scheme()
            )))
        }
    };
    let re = &workload.range_engine;
    Ok(Arc::new(ObjectTarget {
        backend: stores.backend,
        root: root_uri(uri),
        endpoint: storage
            .endpoint
            .clone()
            .unwrap_or_else(|| "the service's default endpoint".into()),
        trust: tls::trust_source(&storage.tls),
        prefix: prefix.clone(),
        store: stores.store,
        pages: stores.pages,
        multipart_threshold: workload.write.multipart_threshold.0,
        part_size: workload.write.part_size.0.max(1),
        range: re.enabled.then(|| RangeSettings {
            min_split: re.min_split_size.0,
            chunk: re.chunk_size.0.max(1),
            max_in_flight: re.max_concurrent_ranges.max(1) as usize,
            timeout: re.range_timeout.0,
        }),
        pool: Arc::new(BufferPool::reusing(workload.read.buffer_pool)),
        redact,
        opened,
        opened_as: (uri.clone(), workload.clone()),
    }))
}

fn root_uri(uri: &TargetUri) -> String {
    match uri {
        TargetUri::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
        TargetUri::Gcs { bucket, prefix } => format!("gs://{bucket}/{prefix}"),
        TargetUri::Azure { container, prefix } => format!("az://{container}/{prefix}"),
        other => format!("{}://", other.scheme()),
    }
}

fn client_options(s: &StorageSpec) -> ClientOptions {
    let o = ClientOptions::new()
        .with_allow_http(s.allow_http)
        // A server that is down should fail an operation quickly, not stall the run.
        .with_connect_timeout(Duration::from_secs(5));
    match s.request_timeout {
        Some(t) => o.with_timeout(t.0),
        // object_store's default 30 s limit on a whole request would cut off slow reads of
        // large objects; a stalled connection is still caught by the read timeout.
        None => o
            .with_timeout_disabled()
            .with_read_timeout(Duration::from_secs(30)),
    }
}

/// A bucket or container (plus the URI's prefix) as a [`Target`].
pub struct ObjectTarget {
    backend: Backend,
    /// `s3://bucket/prefix/`, for messages.
    root: String,
    /// The configured endpoint, for messages.
    endpoint: String,
    /// What certificates are verified against, for messages.
    trust: String,
    /// The URI's prefix, prepended to every key.
    prefix: String,
    store: Arc<dyn ObjectStore>,
    pages: Arc<dyn PaginatedListStore>,
    multipart_threshold: u64,
    part_size: u64,
    /// The range engine's settings, when it is enabled.
    range: Option<RangeSettings>,
    /// Buffers for whole-object and range-engine reads (`read.bufferPool`).
    pool: Arc<BufferPool>,
    redact: Redactor,
    /// Connections opened by this client and its shards' (they share the count).
    opened: Arc<Opened>,
    /// What it was opened from, to open another client for an engine shard.
    opened_as: (TargetUri, Workload),
}

impl fmt::Debug for ObjectTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectTarget")
            .field("backend", &self.backend)
            .field("root", &self.root)
            .field("endpoint", &self.endpoint)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}

impl ObjectTarget {
    fn path(&self, key: &str) -> Result<Path, TargetError> {
        Path::parse(format!("{}{key}", self.prefix)).map_err(|e| {
            TargetError::Config(format!("{}{key}: not a valid object key: {e}", self.root))
        })
    }

    fn err(&self, e: object_store::Error, key: &str) -> TargetError {
        errors::map(e, &format!("{}{key}", self.root), &self.redact)
    }

    async fn get_range(
        &self,
        path: &Path,
        key: &str,
        r: Range<u64>,
    ) -> Result<GetResult, TargetError> {
        let opts = GetOptions {
            range: Some(GetRange::Bounded(r)),
            ..Default::default()
        };
        self.store
            .get_opts(path, opts)
            .await
            .map_err(|e| self.err(e, key))
    }

    async fn get_plain(&self, path: &Path, key: &str) -> Result<GetResult, TargetError> {
        self.store
            .get_opts(path, GetOptions::default())
            .await
            .map_err(|e| self.err(e, key))
    }

    /// Read a response body: verify each chunk at its offset and hand it to `sink`.
    /// Returns the bytes read and when the first chunk arrived (relative to `start`).
    async fn drain(
        &self,
        res: GetResult,
        key: &str,
        check: &ReadCheck,
        start: Instant,
        mut sink: impl FnMut(u64, &Bytes) -> Result<(), TargetError>,
    ) -> Result<(u64, Option<Duration>), TargetError> {
        let base = res.range.start;
        let mut stream = res.into_stream();
        let mut read = 0u64;
        let mut first = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.err(e, key))?;
            first.get_or_insert_with(|| start.elapsed());
            check.check(key, base + read, &chunk)?;
            sink(base + read, &chunk)?;
            read += chunk.len() as u64;
        }
        Ok((read, first))
    }

    /// `ChunkPlan::Stream`: one GET, chunks discarded as they arrive.
    async fn get_stream(
        &self,
        path: &Path,
        key: &str,
        req: &GetRequest,
    ) -> Result<GetOutcome, TargetError> {
        let start = Instant::now();
        let res = self.get_plain(path, key).await?;
        let (bytes, first) = self
            .drain(res, key, &req.check, start, |_, _| Ok(()))
            .await?;
        Ok(GetOutcome {
            bytes,
            requests: 1,
            ttfb: first.unwrap_or_else(|| start.elapsed()),
            buffers: 0,
        })
    }

    /// `ChunkPlan::Whole`: one GET into one pooled buffer of the object's size.
    async fn get_whole(
        &self,
        path: &Path,
        key: &str,
        req: &GetRequest,
    ) -> Result<GetOutcome, TargetError> {
        let start = Instant::now();
        let res = self.get_plain(path, key).await?;
        let size = whole_object_buffer(key, res.meta.size)?;
        let (mut buf, fresh) = self.pool.take(size);
        let dst = &mut buf.as_mut_slice()[..size];
        let result = self
            .drain(res, key, &req.check, start, |off, c| {
                copy_at(dst, off, c, key)
            })
            .await;
        self.pool.give(buf);
        let (bytes, first) = result?;
        Ok(GetOutcome {
            bytes,
            requests: 1,
            ttfb: first.unwrap_or_else(|| start.elapsed()),
            buffers: u32::from(fresh),
        })
    }

    /// `ChunkPlan::Fixed` / `Adaptive`: sequential ranged GETs of the plan's sizes. The size
    /// comes from the hint, else from the first response's `Content-Range`.
    async fn get_chunked(
        &self,
        path: &Path,
        key: &str,
        req: &GetRequest,
    ) -> Result<GetOutcome, TargetError> {
        if req.size_hint == Some(0) {
            // A range of an empty object is unsatisfiable (416): read it plainly.
            return self.get_stream(path, key, req).await;
        }
        let start = Instant::now();
        let mut size = req.size_hint;
        let mut out = GetOutcome::default();
        let mut first = None;
        let mut prev = None;
        loop {
            if size.is_some_and(|s| out.bytes >= s) {
                break;
            }
            let n = req.plan.next(prev, 1);
            let end = size.map_or(out.bytes + n, |s| (out.bytes + n).min(s));
            let res = match self.get_range(path, key, out.bytes..end).await {
                Err(TargetError::Http { status: 416, .. }) if out.bytes == 0 && size.is_none() => {
                    let mut o = self.get_stream(path, key, req).await?;
                    o.requests += 1;
                    return Ok(o);
                }
                r => r?,
            };
            out.requests += 1;
            size = Some(res.meta.size);
            let (got, f) = self
                .drain(res, key, &req.check, start, |_, _| Ok(()))
                .await?;
            first = first.or(f);
            out.bytes += got;
            if got == 0 {
                break;
            }
            prev = Some(n);
        }
        out.ttfb = first.unwrap_or_else(|| start.elapsed());
        Ok(out)
    }

    /// Clear messages for the failures `check` can meet.
    fn check_error(&self, e: object_store::Error) -> TargetError {
        let status = errors::status_of(&e);
        if let Some(why) = tls::refused_certificate(&errors::chain(&e)) {
            return TargetError::Config(format!(
                "TLS: the certificate of {} could not be verified against {}: {why}",
                self.endpoint, self.trust
            ));
        }
        let mapped = errors::map(e, &self.root, &self.redact);
        let detail = match &mapped {
            TargetError::Http { message, .. } => message.clone(),
            other => other.to_string(),
        };
        match (status, &mapped) {
            (Some(401 | 403), _) => TargetError::Config(format!(
                "{}: the credentials were rejected by {} (HTTP {}: {detail}); check the access key and secret",
                self.root,
                self.endpoint,
                status.unwrap_or_default()
            )),
            (Some(404), _) | (_, TargetError::NotFound { .. }) => TargetError::Config(format!(
                "{}: the bucket or container does not exist at {} ({detail}); create it first",
                self.root, self.endpoint
            )),
            (None, TargetError::Io { .. }) => TargetError::Config(format!(
                "{}: cannot reach {}: {detail}",
                self.root, self.endpoint
            )),
            _ => mapped,
        }
    }
}

/// Copy `c`, read at `off`, into `dst`, refusing bytes beyond the object's announced size.
fn copy_at(dst: &mut [u8], off: u64, c: &Bytes, key: &str) -> Result<(), TargetError> {
    let off = off as usize;
    match dst.get_mut(off..off + c.len()) {
        Some(d) => {
            d.copy_from_slice(c);
            Ok(())
        }
        None => Err(TargetError::Other(format!(
            "{key}: the server sent bytes beyond the object's size ({} > {})",
            off + c.len(),
            dst.len()
        ))),
    }
}

/// The byte ranges of a multipart upload's parts: `part_size` each, the last one shorter.
fn part_ranges(len: u64, part_size: u64) -> Vec<std::ops::Range<u64>> {
    (0..len)
        .step_by(part_size as usize)
        .map(|s| s..(s + part_size).min(len))
        .collect()
}

#[async_trait]
impl Target for ObjectTarget {
    async fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
        let path = self.path(key)?;
        if let Some(re) = &self.range {
            // Unknown size: the range engine learns it from its first range, never a HEAD.
            if req.size_hint.is_none_or(|s| s >= re.min_split) {
                return range::get(self, &path, key, req, re).await;
            }
        }
        match req.plan {
            ChunkPlan::Stream => self.get_stream(&path, key, req).await,
            ChunkPlan::Whole => self.get_whole(&path, key, req).await,
            ChunkPlan::Fixed(_) | ChunkPlan::Adaptive { .. } => {
                self.get_chunked(&path, key, req).await
            }
        }
    }

    async fn get_range(
        &self,
        key: &str,
        offset: u64,
        len: u64,
        check: &ReadCheck,
    ) -> Result<GetOutcome, TargetError> {
        let path = self.path(key)?;
        let start = Instant::now();
        let res = self.get_range(&path, key, offset..offset + len).await?;
        let (bytes, first) = self.drain(res, key, check, start, |_, _| Ok(())).await?;
        Ok(GetOutcome {
            bytes,
            requests: 1,
            ttfb: first.unwrap_or_else(|| start.elapsed()),
            buffers: 0,
        })
    }

    async fn put(&self, key: &str, data: Payload) -> Result<u32, TargetError> {
        let path = self.path(key)?;
        if data.len() < self.multipart_threshold {
            // Whole in memory: object_store retries a single PUT from its body.
            let body = PutPayload::from_iter(data.range(0..data.len()));
            self.store
                .put_opts(&path, body, PutOptions::default())
                .await
                .map_err(|e| self.err(e, key))?;
            return Ok(1);
        }
        let parts = part_ranges(data.len(), self.part_size);
        let count = parts.len() as u32;
        let mut upload = self
            .store
            .put_multipart_opts(&path, PutMultipartOptions::default())
            .await
            .map_err(|e| self.err(e, key))?;
        // Each part is generated when the stream reaches it, so at most PART_CONCURRENCY
        // parts of an upload are in memory, whatever the object's size.
        let sent = futures::stream::iter(parts)
            .map(|r| upload.put_part(PutPayload::from_iter(data.range(r))))
            .buffer_unordered(PART_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await;
        let done = match sent {
            Ok(_) => upload.complete().await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            // Leave no orphaned parts behind; the original error is what counts.
            let _ = upload.abort().await;
            return Err(self.err(e, key));
        }
        Ok(count + self.backend.multipart_overhead())
    }

    /// A file below the multipart threshold in one PUT; a larger one as a multipart upload
    /// read part by part, one part in memory at a time, however large the file.
    async fn put_file(&self, key: &str, file: &std::path::Path) -> Result<u64, TargetError> {
        use tokio::io::AsyncReadExt;
        let path = self.path(key)?;
        let what = || file.display().to_string();
        let len = tokio::fs::metadata(file)
            .await
            .map_err(|e| TargetError::io(what(), e))?
            .len();
        // One PUT holds the file in memory: never above the in-memory bound, whatever
        // threshold the workload sets.
        let whole = self.multipart_threshold.min(super::PUT_FILE_IN_MEMORY_MAX);
        if len < whole {
            let data = super::read_bounded(file, whole).await?;
            self.store
                .put_opts(&path, PutPayload::from(data), PutOptions::default())
                .await
                .map_err(|e| self.err(e, key))?;
            return Ok(len);
        }
        let mut f = tokio::fs::File::open(file)
            .await
            .map_err(|e| TargetError::io(what(), e))?;
        let mut upload = self
            .store
            .put_multipart_opts(&path, PutMultipartOptions::default())
            .await
            .map_err(|e| self.err(e, key))?;
        let mut sent = 0u64;
        let result: Result<(), TargetError> = async {
            loop {
                let mut part = Vec::with_capacity(self.part_size as usize);
                (&mut f)
                    .take(self.part_size)
                    .read_to_end(&mut part)
                    .await
                    .map_err(|e| TargetError::io(what(), e))?;
                if part.is_empty() {
                    break;
                }
                sent += part.len() as u64;
                upload
                    .put_part(PutPayload::from(part))
                    .await
                    .map_err(|e| self.err(e, key))?;
            }
            upload.complete().await.map_err(|e| self.err(e, key))?;
            Ok(())
        }
        .await;
        if let Err(e) = result {
            // Leave no orphaned parts behind; the original error is what counts.
            let _ = upload.abort().await;
            return Err(e);
        }
        Ok(sent)
    }

    async fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError> {
        let path = self.path(key)?;
        let opts = GetOptions {
            head: true,
            ..Default::default()
        };
        let res = self
            .store
            .get_opts(&path, opts)
            .await
            .map_err(|e| self.err(e, key))?;
        Ok(ObjectInfo {
            key: key.to_string(),
            size: res.meta.size,
        })
    }

    async fn list(&self, prefix: &str) -> Result<ListOutcome, TargetError> {
        let full = format!("{}{prefix}", self.prefix);
        let mut opts = PaginatedListOptions::default();
        let mut out = ListOutcome::default();
        loop {
            let page = self
                .pages
                .list_paginated((!full.is_empty()).then_some(full.as_str()), opts.clone())
                .await
                .map_err(|e| self.err(e, prefix))?;
            out.requests += 1;
            for o in page.result.objects {
                let loc: &str = o.location.as_ref();
                out.objects.push(ObjectInfo {
                    key: loc.strip_prefix(&self.prefix).unwrap_or(loc).to_string(),
                    size: o.size,
                });
            }
            match page.page_token {
                Some(t) => opts.page_token = Some(t),
                None => break,
            }
        }
        Ok(out)
    }

    async fn delete(&self, key: &str) -> Result<(), TargetError> {
        let path = self.path(key)?;
        let mut done = self
            .store
            .delete_stream(futures::stream::once(async move { Ok(path) }).boxed());
        match done.next().await {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(self.err(e, key)),
            None => Err(TargetError::Other(format!(
                "{}{key}: delete returned no result",
                self.root
            ))),
        }
    }

    async fn check(&self) -> Result<(), TargetError> {
        // One listing of at most one key: proves the endpoint answers, the bucket exists and
        // the credentials are accepted, before any stage starts.
        let opts = PaginatedListOptions {
            max_keys: Some(1),
            ..Default::default()
        };
        let prefix = (!self.prefix.is_empty()).then_some(self.prefix.as_str());
        match self.pages.list_paginated(prefix, opts).await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.check_error(e)),
        }
    }

    fn default_plan(&self) -> ChunkPlan {
        ChunkPlan::Stream
    }

    fn for_shard(&self) -> Result<Option<Arc<dyn Target>>, TargetError> {
        let (uri, workload) = &self.opened_as;
        let t: Arc<dyn Target> = open_one(uri, workload, self.opened.clone())?;
        Ok(Some(t))
    }

    fn connections_opened(&self) -> Option<u64> {
        Some(self.opened.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_cut_at_part_size_with_a_short_last_one() {
        assert_eq!(part_ranges(12, 5), vec![0..5, 5..10, 10..12]);
        assert_eq!(part_ranges(10, 5), vec![0..5, 5..10]);
        assert_eq!(part_ranges(0, 5), vec![]);
    }
}
