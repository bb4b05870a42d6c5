//! The range engine: a large object fetched as concurrent byte ranges, each written straight
//! into its place in one pooled buffer (no reassembly copy).
//!
//! Off by default (measured 27-30% slower where one connection is not the bottleneck). The
//! object's size comes from the dataset listing or from the first range's `Content-Range`;
//! there is never a HEAD before a GET (one per GET was measured as a 10% regression).

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::GetResult;

use super::{copy_at, ObjectTarget};
use crate::targets::{GetOutcome, GetRequest, ReadCheck, TargetError};

/// `rangeEngine` settings, validated.
#[derive(Clone, Debug)]
pub struct RangeSettings {
    /// Objects at least this large are split.
    pub min_split: u64,
    /// Bytes per range.
    pub chunk: u64,
    /// Ranges in flight per object.
    pub max_in_flight: usize,
    /// Limit for each range request, body included.
    pub timeout: Duration,
}

/// Read one object through the range engine.
pub async fn get(
    t: &ObjectTarget,
    path: &Path,
    key: &str,
    req: &GetRequest,
    re: &RangeSettings,
) -> Result<GetOutcome, TargetError> {
    let start = Instant::now();
    let mut out = GetOutcome::default();
    let (size, first) = match req.size_hint {
        Some(s) => (s, None),
        None => {
            let res = match timed(re, key, 0, re.chunk, t.get_range(path, key, 0..re.chunk)).await {
                // An empty object has no satisfiable range: read it plainly.
                Err(TargetError::Http { status: 416, .. }) => {
                    let mut o = t.get_stream(path, key, req).await?;
                    o.requests += 1;
                    return Ok(o);
                }
                r => r?,
            };
            out.requests += 1;
            (res.meta.size, Some(res))
        }
    };
    if size < re.min_split {
        // Learned from the first range that the object is small: finish it with at most one
        // more ranged request (no reassembly needed, nothing is kept).
        let Some(res) = first else {
            return t.get_stream(path, key, req).await;
        };
        let (got, f) = t.drain(res, key, &req.check, start, |_, _| Ok(())).await?;
        out.bytes = got;
        out.ttfb = f.unwrap_or_else(|| start.elapsed());
        if got < size {
            let res = timed(re, key, got, size, t.get_range(path, key, got..size)).await?;
            out.requests += 1;
            out.bytes += t.drain(res, key, &req.check, start, |_, _| Ok(())).await?.0;
        }
        return Ok(out);
    }
    let len = crate::targets::whole_object_buffer(key, size)?;
    let (mut buf, fresh) = t.pool.take(len);
    let result = fill(
        t,
        path,
        key,
        &req.check,
        re,
        first,
        &mut buf.as_mut_slice()[..len],
        start,
    )
    .await;
    t.pool.give(buf);
    let (requests, ttfb) = result?;
    out.requests += requests;
    out.bytes = size;
    out.buffers = u32::from(fresh);
    out.ttfb = ttfb.unwrap_or_else(|| start.elapsed());
    Ok(out)
}

/// Fetch every range of `dst` (the whole object) with at most `max_in_flight` in flight.
/// `first`, when given, is the already-open response for the range at offset 0.
/// Returns the requests issued here and the earliest first byte.
#[allow(clippy::too_many_arguments)]
async fn fill(
    t: &ObjectTarget,
    path: &Path,
    key: &str,
    check: &ReadCheck,
    re: &RangeSettings,
    first: Option<GetResult>,
    dst: &mut [u8],
    start: Instant,
) -> Result<(u32, Option<Duration>), TargetError> {
    let mut first = first;
    let chunk = re.chunk as usize;
    // Built eagerly (futures do nothing until polled): a lazy `map` over `chunks_mut` trips
    // the compiler's higher-ranked lifetime check for `Send` futures.
    let mut ranges = Vec::with_capacity(dst.len().div_ceil(chunk));
    for (i, slice) in dst.chunks_mut(chunk).enumerate() {
        let open = if i == 0 { first.take() } else { None };
        ranges.push(fetch(
            t,
            path,
            key,
            check,
            re,
            (i * chunk) as u64,
            slice,
            open,
            start,
        ));
    }
    let results: Vec<(u32, Option<Duration>)> = futures::stream::iter(ranges)
        .buffer_unordered(re.max_in_flight)
        .try_collect()
        .await?;
    let requests = results.iter().map(|r| r.0).sum();
    let ttfb = results.iter().filter_map(|r| r.1).min();
    Ok((requests, ttfb))
}

/// Fetch one range into `slice` (its place in the object buffer), within the range timeout.
#[allow(clippy::too_many_arguments)]
async fn fetch(
    t: &ObjectTarget,
    path: &Path,
    key: &str,
    check: &ReadCheck,
    re: &RangeSettings,
    off: u64,
    slice: &mut [u8],
    open: Option<GetResult>,
    start: Instant,
) -> Result<(u32, Option<Duration>), TargetError> {
    let end = off + slice.len() as u64;
    timed(re, key, off, end, async {
        let (requests, res) = match open {
            Some(r) => (0, r),
            None => (1, t.get_range(path, key, off..end).await?),
        };
        if res.range != (off..end) {
            return Err(TargetError::Other(format!(
                "{key}: asked for bytes {off}..{end}, the server sent {:?}",
                res.range
            )));
        }
        let (got, first) = t
            .drain(res, key, check, start, |at, c| {
                copy_at(slice, at - off, c, key)
            })
            .await?;
        if got != end - off {
            return Err(TargetError::Other(format!(
                "{key}: range {off}..{end} ended after {got} bytes"
            )));
        }
        Ok((requests, first))
    })
    .await
}

/// Run one range request (headers and body) within the range timeout.
async fn timed<T>(
    re: &RangeSettings,
    key: &str,
    off: u64,
    end: u64,
    f: impl std::future::Future<Output = Result<T, TargetError>>,
) -> Result<T, TargetError> {
    match tokio::time::timeout(re.timeout, f).await {
        Ok(r) => r,
        Err(_) => Err(TargetError::Timeout {
            what: format!("{key}: range {off}..{end}"),
            after: re.timeout,
        }),
    }
}
