//! The ceilings of [`limits`], so that no spec can make a worker run out of memory, disk
//! or time, and paths that could leave the target.

use super::*;
use limits::*;

/// `v` at most `max`, both shown with `show` in the message.
fn at_most(
    bad: &mut impl FnMut(&str, String),
    path: &str,
    v: u64,
    max: u64,
    show: impl Fn(u64) -> String,
) {
    if v > max {
        bad(
            path,
            format!("must be at most {} (got {})", show(max), show(v)),
        );
    }
}

/// A number of bytes, as a size (`64KiB`).
fn size(v: u64) -> String {
    ByteSize(v).to_string()
}

/// A count.
fn num(v: u64) -> String {
    v.to_string()
}

/// A number of seconds, as a duration (`5m`).
fn secs(v: u64) -> String {
    HumanDuration(std::time::Duration::from_secs(v)).to_string()
}

impl Workload {
    /// The bounds of [`limits`], and paths that could leave the target.
    pub(super) fn check_bounds(&self, uri: Option<&TargetUri>, bad: &mut impl FnMut(&str, String)) {
        self.bound_counts(bad);
        self.bound_dataset(bad);
        self.bound_read_chunks(bad);
        self.bound_whole_object_buffers(bad);
        self.bound_write_parts(bad);
        self.bound_range_engine(bad);
        self.bound_durations_and_rate(bad);
        self.bound_histograms(bad);
        self.check_paths(uri, bad);
    }

    /// The largest object of the dataset, as far as the bounds go (a larger one is an error
    /// of its own).
    fn largest_object(&self) -> u64 {
        self.dataset_size().max().min(MAX_OBJECT_SIZE)
    }

    /// The length of `target`, and the counts: tasks, ops, weights, objects.
    fn bound_counts(&self, bad: &mut impl FnMut(&str, String)) {
        at_most(
            bad,
            "target",
            self.target.len() as u64,
            MAX_TARGET_LEN as u64,
            |v| format!("{v} bytes"),
        );
        at_most(
            bad,
            "concurrency",
            self.concurrency as u64,
            MAX_CONCURRENCY as u64,
            num,
        );
        if let Some(n) = self.total_ops {
            at_most(bad, "totalOps", n, MAX_TOTAL_OPS, num);
        }
        for (i, w) in self.ops.iter().enumerate().take(OpKind::ALL.len()) {
            at_most(
                bad,
                &format!("ops[{i}].weight"),
                w.weight as u64,
                MAX_WEIGHT as u64,
                num,
            );
        }
        at_most(
            bad,
            "dataset.objects",
            self.dataset.objects,
            MAX_OBJECTS,
            num,
        );
        if let Some(m) = self.write.max_objects {
            at_most(bad, "write.maxObjects", m, MAX_OBJECTS, num);
        }
    }

    /// Each object size, and the bytes of the whole dataset.
    fn bound_dataset(&self, bad: &mut impl FnMut(&str, String)) {
        for (path, spec) in [
            ("objectSize", Some(&self.object_size)),
            ("dataset.size", self.dataset.size.as_ref()),
        ] {
            let Some(spec) = spec else { continue };
            for (sub, v) in spec.sizes() {
                at_most(bad, &format!("{path}{sub}"), v, MAX_OBJECT_SIZE, size);
            }
        }
        let dataset_max = self.largest_object();
        if self.dataset.objects.saturating_mul(dataset_max) > MAX_DATASET_BYTES {
            bad(
                "dataset.objects",
                format!(
                    "{} objects of up to {} is more than the {} a dataset may hold",
                    self.dataset.objects,
                    ByteSize(dataset_max),
                    ByteSize(MAX_DATASET_BYTES)
                ),
            );
        }
    }

    /// The read chunk sizes and how fast adaptive chunks grow.
    fn bound_read_chunks(&self, bad: &mut impl FnMut(&str, String)) {
        let rd = &self.read;
        if let Some(c) = rd.chunk_size {
            at_most(bad, "read.chunkSize", c.0, MAX_CHUNK_SIZE, size);
        }
        if let Some(a) = &rd.adaptive {
            at_most(
                bad,
                "read.adaptive.initial",
                a.initial.0,
                MAX_CHUNK_SIZE,
                size,
            );
            at_most(bad, "read.adaptive.max", a.max.0, MAX_CHUNK_SIZE, size);
            if a.factor > MAX_GROWTH {
                bad(
                    "read.adaptive.factor",
                    format!("must be at most {MAX_GROWTH} (got {})", a.factor),
                );
            }
        }
    }

    /// `get` into one buffer per object (`read.wholeObject`, or the range engine on a large
    /// object) only with objects that fit one.
    fn bound_whole_object_buffers(&self, bad: &mut impl FnMut(&str, String)) {
        let reads = self.weight_of(OpKind::Get) > 0;
        let dataset_max = self.largest_object();
        if reads && self.read.whole_object && dataset_max > MAX_WHOLE_OBJECT_BUFFER {
            bad(
                "read.wholeObject",
                format!(
                    "reads each object into one buffer, at most {}, but dataset objects may be {}: use read.chunkSize",
                    ByteSize(MAX_WHOLE_OBJECT_BUFFER),
                    ByteSize(dataset_max)
                ),
            );
        }
        let re = &self.range_engine;
        if reads
            && re.enabled
            && dataset_max >= re.min_split_size.0
            && dataset_max > MAX_WHOLE_OBJECT_BUFFER
        {
            bad(
                "rangeEngine.enabled",
                format!(
                    "fetches each object into one buffer, at most {}, but dataset objects may be {}: use read.chunkSize for objects this large",
                    ByteSize(MAX_WHOLE_OBJECT_BUFFER),
                    ByteSize(dataset_max)
                ),
            );
        }
    }

    /// The multipart threshold and part size of `write`.
    fn bound_write_parts(&self, bad: &mut impl FnMut(&str, String)) {
        at_most(
            bad,
            "write.multipartThreshold",
            self.write.multipart_threshold.0,
            MAX_OBJECT_SIZE,
            size,
        );
        at_most(
            bad,
            "write.partSize",
            self.write.part_size.0,
            MAX_PART_SIZE,
            size,
        );
    }

    /// The range engine's range size, split threshold and ranges in flight.
    fn bound_range_engine(&self, bad: &mut impl FnMut(&str, String)) {
        let re = &self.range_engine;
        at_most(
            bad,
            "rangeEngine.chunkSize",
            re.chunk_size.0,
            MAX_CHUNK_SIZE,
            size,
        );
        at_most(
            bad,
            "rangeEngine.minSplitSize",
            re.min_split_size.0,
            MAX_OBJECT_SIZE,
            size,
        );
        at_most(
            bad,
            "rangeEngine.maxConcurrentRanges",
            re.max_concurrent_ranges as u64,
            MAX_CONCURRENT_RANGES as u64,
            num,
        );
    }

    /// Every duration and timeout, and `rateLimit`'s range (when it is a rate at all: see
    /// `check_rate_limit`).
    fn bound_durations_and_rate(&self, bad: &mut impl FnMut(&str, String)) {
        for (path, d) in [
            ("duration", self.duration),
            (
                "rangeEngine.rangeTimeout",
                Some(self.range_engine.range_timeout),
            ),
            ("storage.requestTimeout", self.storage.request_timeout),
        ] {
            if let Some(d) = d {
                at_most(bad, path, d.0.as_secs(), MAX_DURATION_SECS, secs);
            }
        }
        if let Some(r) = self.rate_limit {
            if r.is_finite() && r > 0.0 && !(MIN_RATE..=MAX_RATE).contains(&r) {
                bad(
                    "rateLimit",
                    format!(
                        "must be between {MIN_RATE} and {MAX_RATE} operations per second (got {r})"
                    ),
                );
            }
        }
    }

    /// The latency histograms of all tasks fit a worker's memory.
    fn bound_histograms(&self, bad: &mut impl FnMut(&str, String)) {
        let hist = histogram_bytes_per_task(self);
        let total = hist.saturating_mul(self.concurrency as u64);
        if total > MAX_HISTOGRAM_BYTES {
            bad(
                "concurrency",
                format!(
                    "{} tasks x {} of latency histograms each ({} operations in the mix) is {}, more than the {} a worker may use: lower concurrency or run more workers",
                    self.concurrency,
                    ByteSize(hist),
                    self.ops.iter().filter(|o| o.weight > 0).count(),
                    ByteSize(total),
                    ByteSize(MAX_HISTOGRAM_BYTES)
                ),
            );
        }
    }

    /// No `..` in a file target's directory, and a `dataset.prefix` that stays under it.
    fn check_paths(&self, uri: Option<&TargetUri>, bad: &mut impl FnMut(&str, String)) {
        if let Some(TargetUri::File { root } | TargetUri::Direct { root }) = uri {
            if root
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                bad(
                    "target",
                    format!("`{}`: `..` in the path could leave the target directory; give the directory itself", clip(&self.target)),
                );
            }
        }
        if let Err(e) = super::dataset::check_prefix(&self.dataset.prefix) {
            bad("dataset.prefix", e);
        }
    }
}
