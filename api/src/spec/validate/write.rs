//! How objects are written: `write`.

use super::*;

impl Workload {
    /// `write`: a compressibility that is a share, parts the object stores accept, and a
    /// `maxObjects` key ring that neither collides nor races `delete`.
    pub(super) fn check_write(&self, uri: Option<&TargetUri>, bad: &mut impl FnMut(&str, String)) {
        let w = &self.write;
        if !(0.0..=1.0).contains(&w.compressibility) {
            bad(
                "write.compressibility",
                format!("must be between 0 and 1 (got {})", w.compressibility),
            );
        }
        if w.compressibility > 0.0 && self.data.compress_ratio != 1.0 {
            bad(
                "write.compressibility",
                "is the deprecated form of data.compressRatio: set only data.compressRatio".into(),
            );
        }
        self.data.check(bad);
        if w.part_size.0 < 5 << 20 && uri.is_some_and(|u| !u.is_local()) {
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
    }
}
