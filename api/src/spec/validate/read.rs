//! How objects are read: `read` (chunks, whole objects, adaptive chunks), their O_DIRECT
//! alignment, and the range engine.

use super::*;

impl Workload {
    /// `read`: at most one way to size reads, and sizes above 0 that grow.
    pub(super) fn check_read(&self, bad: &mut impl FnMut(&str, String)) {
        let rd = &self.read;
        if rd.whole_object && (rd.chunk_size.is_some() || rd.adaptive.is_some()) {
            bad(
                "read.wholeObject",
                "excludes read.chunkSize and read.adaptive".into(),
            );
        }
        if rd.chunk_size.is_some() && rd.adaptive.is_some() {
            bad(
                "read.chunkSize",
                "give chunkSize or adaptive, not both".into(),
            );
        }
        if rd.chunk_size == Some(ByteSize(0)) {
            bad("read.chunkSize", "must be greater than 0".into());
        }
        if let Some(a) = &rd.adaptive {
            if a.initial.0 == 0 {
                bad("read.adaptive.initial", "must be greater than 0".into());
            }
            if a.max < a.initial {
                bad(
                    "read.adaptive.max",
                    format!("must be at least initial ({})", a.initial),
                );
            }
            if !(a.factor.is_finite() && a.factor >= 1.0) {
                bad(
                    "read.adaptive.factor",
                    format!("must be at least 1 (got {})", a.factor),
                );
            }
        }
    }

    /// With a `direct://` target, read chunk sizes are multiples of the O_DIRECT alignment.
    pub(super) fn check_direct_alignment(
        &self,
        uri: Option<&TargetUri>,
        bad: &mut impl FnMut(&str, String),
    ) {
        if !matches!(uri, Some(TargetUri::Direct { .. })) {
            return;
        }
        let align = limits::DIRECT_ALIGN as u64;
        let mut aligned = |path: &str, v: ByteSize| {
            if v.0 % align != 0 {
                bad(
                    path,
                    format!("{v} is not a multiple of {align} bytes, which O_DIRECT requires"),
                );
            }
        };
        let rd = &self.read;
        if let Some(c) = rd.chunk_size {
            aligned("read.chunkSize", c);
        }
        if let Some(a) = &rd.adaptive {
            aligned("read.adaptive.initial", a.initial);
            aligned("read.adaptive.max", a.max);
        }
    }

    /// `read.bufferPool: false` only where reads land in a buffer: local files, and object
    /// storage read whole or by the range engine (a streamed or ranged GET discards the
    /// bodies its HTTP client allocates, pool or not, so the switch would change nothing).
    pub(super) fn check_buffer_pool(
        &self,
        uri: Option<&TargetUri>,
        bad: &mut impl FnMut(&str, String),
    ) {
        let local = matches!(
            uri,
            None | Some(TargetUri::File { .. } | TargetUri::Direct { .. })
        );
        if self.read.buffer_pool || local {
            return;
        }
        if !(self.read.whole_object || self.range_engine.enabled) {
            bad(
                "read.bufferPool",
                "false changes nothing here: object storage GETs use a buffer only with read.wholeObject or rangeEngine.enabled (streamed and ranged GETs discard the HTTP client's bodies)".into(),
            );
        }
    }

    /// `rangeEngine`: ranges of some size, at least one at a time, a timeout above 0, and
    /// `preStat` only with the engine on.
    pub(super) fn check_range_engine(&self, bad: &mut impl FnMut(&str, String)) {
        let re = &self.range_engine;
        if re.chunk_size.0 == 0 {
            bad("rangeEngine.chunkSize", "must be greater than 0".into());
        }
        if re.max_concurrent_ranges == 0 {
            bad(
                "rangeEngine.maxConcurrentRanges",
                "must be at least 1".into(),
            );
        }
        if re.range_timeout.0.is_zero() {
            bad("rangeEngine.rangeTimeout", "must be greater than 0".into());
        }
        if re.pre_stat && !re.enabled {
            bad(
                "rangeEngine.preStat",
                "runs only with the range engine: set rangeEngine.enabled".into(),
            );
        }
    }
}
