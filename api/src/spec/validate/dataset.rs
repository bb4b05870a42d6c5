//! The dataset and object sizes: size distributions, read access skew and the key prefix.

use super::*;

impl Workload {
    /// `objectSize` and `dataset.size` are distributions that can be drawn from.
    pub(super) fn check_sizes(&self, bad: &mut impl FnMut(&str, String)) {
        check_size(bad, "objectSize", &self.object_size);
        if let Some(s) = &self.dataset.size {
            check_size(bad, "dataset.size", s);
        }
    }

    /// The skewed read distributions' parameters, and no parameters for another
    /// distribution.
    pub(super) fn check_access(&self, bad: &mut impl FnMut(&str, String)) {
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
        match d.object_access() {
            ObjectAccess::Zipf { exponent } => check_zipf(bad, exponent),
            ObjectAccess::Hotspot {
                reads_percent,
                objects_percent,
            } => check_hotspot(bad, d, reads_percent, objects_percent),
            ObjectAccess::Random | ObjectAccess::Sequential => {}
        }
    }
}

/// One size: a range whose max is not below its min, and a lognormal that is not flat.
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

/// `dataset.zipf.exponent` in (0, 10].
fn check_zipf(bad: &mut impl FnMut(&str, String), exponent: f64) {
    if !(exponent.is_finite() && exponent > 0.0 && exponent <= 10.0) {
        bad(
            "dataset.zipf.exponent",
            format!("must be above 0 and at most 10 (got {exponent})"),
        );
    }
}

/// `dataset.hotspot`: both shares strictly between 0 and 100, and (for a dataset we prepare)
/// a share that leaves at least one hot and one cold object.
fn check_hotspot(
    bad: &mut impl FnMut(&str, String),
    d: &DatasetSpec,
    reads_percent: f64,
    objects_percent: f64,
) {
    let in_open = |v: f64, lo: f64, hi: f64| v.is_finite() && v > lo && v < hi;
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
    if in_open(objects_percent, 0.0, 100.0) && d.prepare && (hot < 1.0 || hot >= d.objects as f64) {
        bad(
            "dataset.hotspot.objectsPercent",
            format!(
                "{objects_percent}% of {} objects leaves no hot or no cold object: raise dataset.objects or change the share",
                d.objects
            ),
        );
    }
}

/// A key prefix stays under the target: relative, no `..` or `.` segment, no NUL or backslash.
pub(super) fn check_prefix(p: &str) -> Result<(), String> {
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
