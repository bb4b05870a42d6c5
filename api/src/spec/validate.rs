//! What serde cannot check: the bounds of [`limits`] and the cross-field rules.

use super::*;

impl Workload {
    /// Check what serde cannot: ranges, exclusive fields and cross-field rules.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errs = Vec::new();
        let mut bad = |path: &str, message: String| {
            errs.push(FieldError {
                path: path.to_string(),
                message,
            })
        };
        let uri = match self.target.parse::<TargetUri>() {
            Ok(u) => Some(u),
            Err(e) => {
                bad("target", e);
                None
            }
        };
        match (self.duration, self.total_ops) {
            (Some(_), Some(_)) => bad(
                "duration",
                "give either duration or totalOps, not both".into(),
            ),
            (None, None) => bad("duration", "give a duration (e.g. 30s) or totalOps".into()),
            (Some(d), None) if d.0.is_zero() => bad("duration", "must be greater than 0".into()),
            (None, Some(0)) => bad("totalOps", "must be at least 1".into()),
            _ => {}
        }
        if self.concurrency == 0 {
            bad("concurrency", "must be at least 1 (got 0)".into());
        }
        if self.ops.iter().map(|w| w.weight as u64).sum::<u64>() == 0 {
            bad(
                "ops",
                "at least one operation needs a weight above 0".into(),
            );
        }
        if self.ops.len() > OpKind::ALL.len() {
            // Every further entry would repeat an op: say so once, not once per entry.
            bad(
                "ops",
                format!(
                    "has {} entries; list each operation at most once (at most {})",
                    self.ops.len(),
                    OpKind::ALL.len()
                ),
            );
        } else {
            let mut seen = [false; OpKind::ALL.len()];
            for (i, w) in self.ops.iter().enumerate() {
                if std::mem::replace(&mut seen[w.op.index()], true) {
                    bad(
                        &format!("ops[{i}].op"),
                        format!("`{}` is listed twice", w.op),
                    );
                }
            }
        }
        super::block::validate(self, uri.as_ref(), &mut bad);
        if self.weight_of(OpKind::Delete) > 0 && self.weight_of(OpKind::Put) == 0 {
            bad("ops", "`delete` removes objects written by `put`, so it needs `put` with a weight above 0".into());
        }
        let reads = self.weight_of(OpKind::Get) + self.weight_of(OpKind::Stat);
        if reads > 0 && self.dataset.objects == 0 {
            bad(
                "dataset.objects",
                "`get` and `stat` need a dataset of at least 1 object".into(),
            );
        }
        check_size(&mut bad, "objectSize", &self.object_size);
        if let Some(s) = &self.dataset.size {
            check_size(&mut bad, "dataset.size", s);
        }
        if let Some(r) = self.rate_limit {
            if !(r.is_finite() && r > 0.0) {
                bad(
                    "rateLimit",
                    format!("must be a positive number of operations per second (got {r})"),
                );
            }
        }
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
        if matches!(uri, Some(TargetUri::Direct { .. })) {
            let align = limits::DIRECT_ALIGN as u64;
            let mut aligned = |path: &str, v: ByteSize| {
                if v.0 % align != 0 {
                    bad(
                        path,
                        format!("{v} is not a multiple of {align} bytes, which O_DIRECT requires"),
                    );
                }
            };
            if let Some(c) = rd.chunk_size {
                aligned("read.chunkSize", c);
            }
            if let Some(a) = &rd.adaptive {
                aligned("read.adaptive.initial", a.initial);
                aligned("read.adaptive.max", a.max);
            }
        }
        let w = &self.write;
        if !(0.0..=1.0).contains(&w.compressibility) {
            bad(
                "write.compressibility",
                format!("must be between 0 and 1 (got {})", w.compressibility),
            );
        }
        if w.part_size.0 < 5 << 20 && uri.as_ref().is_some_and(|u| !u.is_local()) {
            bad(
                "write.partSize",
                format!(
                    "must be at least 5MiB, the S3 minimum (got {})",
                    w.part_size
                ),
            );
        }
        if let Some(max) = w.max_objects {
            if max < self.concurrency as u64 {
                bad(
                    "write.maxObjects",
                    format!(
                        "must be at least concurrency ({}) so that two PUTs in flight never write the same key (got {max})",
                        self.concurrency
                    ),
                );
            }
            if self.weight_of(OpKind::Delete) > 0 {
                bad(
                    "write.maxObjects",
                    "overwrites keys in turn, so `delete` could remove a key twice: use one or the other".into(),
                );
            }
        }
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
        if let Some(w) = self.warmup {
            check_warmup(&mut bad, w, self.duration);
        }
        if let Some(st) = &self.stop_when_stable {
            let w = st.window.0;
            let (min, max) = (
                std::time::Duration::from_secs(2),
                std::time::Duration::from_secs(3600),
            );
            if w < min || w > max || w.subsec_nanos() != 0 {
                bad(
                    "stopWhenStable.window",
                    format!("must be whole seconds from 2s to 1h (got {})", st.window),
                );
            }
            if !(0.1..=100.0).contains(&st.band_percent) {
                bad(
                    "stopWhenStable.bandPercent",
                    format!("must be from 0.1 to 100 (got {})", st.band_percent),
                );
            }
            if self.duration.is_none() {
                bad(
                    "stopWhenStable",
                    "needs duration (the longest the run may take), not totalOps".into(),
                );
            }
        }
        if let Some(b) = &self.error_budget {
            if b.max_errors.is_none() && b.max_error_ratio.is_none() {
                bad(
                    "errorBudget",
                    "give maxErrors, maxErrorRatio or both".into(),
                );
            }
            if let Some(r) = b.max_error_ratio {
                if !(0.0..=1.0).contains(&r) {
                    bad(
                        "errorBudget.maxErrorRatio",
                        format!("must be between 0 and 1 (got {r})"),
                    );
                }
            }
        }
        if self.storage.max_retries > 100 {
            bad(
                "storage.maxRetries",
                format!("must be at most 100 (got {})", self.storage.max_retries),
            );
        }
        if self.storage.request_timeout.is_some_and(|t| t.0.is_zero()) {
            bad("storage.requestTimeout", "must be greater than 0".into());
        }
        self.storage.check(&mut bad);
        self.check_bounds(uri.as_ref(), &mut bad);
        self.check_access(&mut bad);
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }

    /// The bounds of [`limits`], and paths that could leave the target.
    fn check_bounds(&self, uri: Option<&TargetUri>, bad: &mut impl FnMut(&str, String)) {
        use limits::*;
        let at_most = |bad: &mut dyn FnMut(&str, String),
                       path: &str,
                       v: u64,
                       max: u64,
                       show: &dyn Fn(u64) -> String| {
            if v > max {
                bad(
                    path,
                    format!("must be at most {} (got {})", show(max), show(v)),
                );
            }
        };
        let size = |v: u64| ByteSize(v).to_string();
        let num = |v: u64| v.to_string();
        let secs = |v: u64| HumanDuration(std::time::Duration::from_secs(v)).to_string();
        at_most(
            bad,
            "target",
            self.target.len() as u64,
            MAX_TARGET_LEN as u64,
            &|v| format!("{v} bytes"),
        );
        at_most(
            bad,
            "concurrency",
            self.concurrency as u64,
            MAX_CONCURRENCY as u64,
            &num,
        );
        if let Some(n) = self.total_ops {
            at_most(bad, "totalOps", n, MAX_TOTAL_OPS, &num);
        }
        for (i, w) in self.ops.iter().enumerate().take(OpKind::ALL.len()) {
            at_most(
                bad,
                &format!("ops[{i}].weight"),
                w.weight as u64,
                MAX_WEIGHT as u64,
                &num,
            );
        }
        at_most(
            bad,
            "dataset.objects",
            self.dataset.objects,
            MAX_OBJECTS,
            &num,
        );
        if let Some(m) = self.write.max_objects {
            at_most(bad, "write.maxObjects", m, MAX_OBJECTS, &num);
        }
        for (path, spec) in [
            ("objectSize", Some(&self.object_size)),
            ("dataset.size", self.dataset.size.as_ref()),
        ] {
            let Some(spec) = spec else { continue };
            for (sub, v) in spec.sizes() {
                at_most(bad, &format!("{path}{sub}"), v, MAX_OBJECT_SIZE, &size);
            }
        }
        let dataset_max = self.dataset_size().max().min(MAX_OBJECT_SIZE);
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
        let rd = &self.read;
        if let Some(c) = rd.chunk_size {
            at_most(bad, "read.chunkSize", c.0, MAX_CHUNK_SIZE, &size);
        }
        if let Some(a) = &rd.adaptive {
            at_most(
                bad,
                "read.adaptive.initial",
                a.initial.0,
                MAX_CHUNK_SIZE,
                &size,
            );
            at_most(bad, "read.adaptive.max", a.max.0, MAX_CHUNK_SIZE, &size);
            if a.factor > MAX_GROWTH {
                bad(
                    "read.adaptive.factor",
                    format!("must be at most {MAX_GROWTH} (got {})", a.factor),
                );
            }
        }
        let reads = self.weight_of(OpKind::Get) > 0;
        if reads && rd.whole_object && dataset_max > MAX_WHOLE_OBJECT_BUFFER {
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
        at_most(
            bad,
            "write.multipartThreshold",
            self.write.multipart_threshold.0,
            MAX_OBJECT_SIZE,
            &size,
        );
        at_most(
            bad,
            "write.partSize",
            self.write.part_size.0,
            MAX_PART_SIZE,
            &size,
        );
        at_most(
            bad,
            "rangeEngine.chunkSize",
            re.chunk_size.0,
            MAX_CHUNK_SIZE,
            &size,
        );
        at_most(
            bad,
            "rangeEngine.minSplitSize",
            re.min_split_size.0,
            MAX_OBJECT_SIZE,
            &size,
        );
        at_most(
            bad,
            "rangeEngine.maxConcurrentRanges",
            re.max_concurrent_ranges as u64,
            MAX_CONCURRENT_RANGES as u64,
            &num,
        );
        for (path, d) in [
            ("duration", self.duration),
            ("rangeEngine.rangeTimeout", Some(re.range_timeout)),
            ("storage.requestTimeout", self.storage.request_timeout),
        ] {
            if let Some(d) = d {
                at_most(bad, path, d.0.as_secs(), MAX_DURATION_SECS, &secs);
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
        if let Err(e) = check_prefix(&self.dataset.prefix) {
            bad("dataset.prefix", e);
        }
    }
}

/// `warmup`: whole seconds from 1s to 10m (each of its seconds has its own entry in the
/// summary's timeline: 10 minutes of them are 54 KB of the 1 MiB a summary may take), with a `duration` at least as long (a warm-up is a preamble to a measured stage
/// of a known length, and one longer than it is most likely a slip; with `totalOps` it would
/// eat into the op count).
fn check_warmup(
    bad: &mut impl FnMut(&str, String),
    w: crate::units::HumanDuration,
    duration: Option<crate::units::HumanDuration>,
) {
    let d = w.0;
    if d < std::time::Duration::from_secs(1)
        || d > std::time::Duration::from_secs(600)
        || d.subsec_nanos() != 0
    {
        bad(
            "warmup",
            format!("must be whole seconds from 1s to 10m (got {w})"),
        );
    }
    match duration {
        None => bad(
            "warmup",
            "needs duration (the measured stage after the warm-up), not totalOps".into(),
        ),
        Some(m) if d > m.0 => bad(
            "warmup",
            format!("must not be longer than duration (got warmup {w}, duration {m})"),
        ),
        Some(_) => {}
    }
}

/// The ops of `w`'s mix (weight above 0): a task keeps a histogram for these only.
pub fn mix_ops(w: &Workload) -> Vec<OpKind> {
    OpKind::ALL
        .into_iter()
        .filter(|op| w.weight_of(*op) > 0)
        .collect()
}

/// Histogram memory of one task running `w`: one per op of the mix, plus GET's TTFB (twice
/// with a warm-up), plus one per endpoint of the measured stage with several
/// `storage.endpoints`. Here, not
/// in `stats` or the worker's recorder, because [`Workload::validate`] bounds it (`concurrency`
/// x this at most [`MAX_HISTOGRAM_BYTES`](limits::MAX_HISTOGRAM_BYTES)).
pub fn histogram_bytes_per_task(w: &Workload) -> u64 {
    let ops = mix_ops(w);
    let n = ops.len() as u64 + ops.contains(&OpKind::Get) as u64;
    // With a warm-up a task keeps the warm-up's histograms apart, as many again.
    let stages = 1 + w.warmup.is_some() as u64;
    // Several endpoints: a task keeps one latency histogram per endpoint (measured stage).
    let endpoints = match w.storage.endpoint_list().len() {
        n if n > 1 && !w.target_uri().is_ok_and(|u| u.is_local()) => n as u64,
        _ => 0,
    };
    (stages * n + endpoints) * crate::latency::Latency::bytes()
}

/// A key prefix stays under the target: relative, no `..` or `.` segment, no NUL or backslash.
fn check_prefix(p: &str) -> Result<(), String> {
    let shown = clip(p);
    if p.len() > limits::MAX_PREFIX_LEN as usize {
        return Err(format!(
            "must be at most {} bytes (got {})",
            limits::MAX_PREFIX_LEN,
            p.len()
        ));
    }
    if p.starts_with('/') {
        return Err(format!(
            "`{shown}` must be relative to the target (no leading /)"
        ));
    }
    if p.split('/').any(|seg| seg == ".." || seg == ".") {
        return Err(format!(
            "`{shown}`: `..` and `.` segments could leave the target"
        ));
    }
    if p.contains(['\\', '\0']) {
        return Err(format!("`{shown}` must not contain a backslash or NUL"));
    }
    Ok(())
}

fn check_size(bad: &mut impl FnMut(&str, String), path: &str, s: &SizeSpec) {
    match s {
        SizeSpec::Fixed(_) => {}
        SizeSpec::Distribution(SizeDistribution::Uniform { min, max }) => {
            if max < min {
                bad(
                    &format!("{path}.uniform.max"),
                    format!("{max} is smaller than min {min}"),
                );
            }
        }
        SizeSpec::Distribution(SizeDistribution::Lognormal {
            mean,
            std_dev,
            min,
            max,
        }) => {
            if mean.0 == 0 {
                bad(
                    &format!("{path}.lognormal.mean"),
                    "must be greater than 0".into(),
                );
            }
            if max < min {
                bad(
                    &format!("{path}.lognormal.max"),
                    format!("{max} is smaller than min {min}"),
                );
            }
            if std_dev.0 == 0 {
                bad(
                    &format!("{path}.lognormal.stdDev"),
                    "must be greater than 0; use a fixed size instead".into(),
                );
            }
        }
    }
}

impl Workload {
    /// The skewed read distributions' parameters, and no parameters for another
    /// distribution.
    fn check_access(&self, bad: &mut impl FnMut(&str, String)) {
        let d = &self.dataset;
        if d.zipf.is_some() && d.access != DatasetAccess::Zipf {
            bad("dataset.zipf", "applies with access: zipf only".into());
        }
        if d.hotspot.is_some() && d.access != DatasetAccess::Hotspot {
            bad(
                "dataset.hotspot",
                "applies with access: hotspot only".into(),
            );
        }
        let in_open = |v: f64, lo: f64, hi: f64| v.is_finite() && v > lo && v < hi;
        match d.object_access() {
            ObjectAccess::Zipf { exponent } => {
                if !(exponent.is_finite() && exponent > 0.0 && exponent <= 10.0) {
                    bad(
                        "dataset.zipf.exponent",
                        format!("must be above 0 and at most 10 (got {exponent})"),
                    );
                }
            }
            ObjectAccess::Hotspot {
                reads_percent,
                objects_percent,
            } => {
                for (field, v) in [
                    ("readsPercent", reads_percent),
                    ("objectsPercent", objects_percent),
                ] {
                    if !in_open(v, 0.0, 100.0) {
                        bad(
                            &format!("dataset.hotspot.{field}"),
                            format!("must be between 0 and 100, exclusive (got {v})"),
                        );
                    }
                }
                let hot = (d.objects as f64 * objects_percent / 100.0).floor();
                if in_open(objects_percent, 0.0, 100.0)
                    && d.prepare
                    && (hot < 1.0 || hot >= d.objects as f64)
                {
                    bad(
                        "dataset.hotspot.objectsPercent",
                        format!(
                            "{objects_percent}% of {} objects leaves no hot or no cold object: raise dataset.objects or change the share",
                            d.objects
                        ),
                    );
                }
            }
            ObjectAccess::Random | ObjectAccess::Sequential => {}
        }
    }
}
