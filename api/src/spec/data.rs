//! What written data is made of: `data`.
//!
//! By default every 512-byte sector benchrun writes is unique and incompressible (see the
//! worker's `datagen`); `dedupRatio` and `compressRatio` ask for data a deduplicating or
//! compressing store can reduce by that much, as fio's `dedupe_percentage` and
//! `buffer_compress_percentage` do.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The largest `data.dedupRatio`: past it nearly every block is a repeat of the pool.
pub const MAX_DEDUP_RATIO: f64 = 100.0;
/// The largest `data.compressRatio`: each 512-byte sector keeps at least 16 bytes of data.
pub const MAX_COMPRESS_RATIO: f64 = 32.0;

/// Reducibility of the data PUT, block writes, the block layout and preconditioning write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataSpec {
    /// Deduplication ratio over 4 KiB blocks (fio's unit): 1 (the default) writes no block
    /// twice; R makes a share 1 - 1/R of every object's or file's 4 KiB blocks copies of a
    /// small pool (256 blocks, from the seed), so a fixed-block dedup store keeps about 1/R.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1.0, max = MAX_DEDUP_RATIO))]
    pub dedup_ratio: f64,
    /// Compression ratio: 1 (the default) is incompressible; C leaves about 1/C of every
    /// 512-byte sector random and zeroes the rest, so gzip or zstd reach about C:1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1.0, max = MAX_COMPRESS_RATIO))]
    pub compress_ratio: f64,
}

impl Default for DataSpec {
    fn default() -> Self {
        Self {
            dedup_ratio: 1.0,
            compress_ratio: 1.0,
        }
    }
}

impl DataSpec {
    /// Whether the data is the default: unique and incompressible.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Check both ratios; `bad(field, message)` for each one out of its bounds.
    pub fn check(&self, bad: &mut impl FnMut(&str, String)) {
        for (field, v, max) in [
            ("data.dedupRatio", self.dedup_ratio, MAX_DEDUP_RATIO),
            (
                "data.compressRatio",
                self.compress_ratio,
                MAX_COMPRESS_RATIO,
            ),
        ] {
            if !(1.0..=max).contains(&v) {
                bad(field, format!("must be between 1 and {max} (got {v})"));
            }
        }
    }
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}
