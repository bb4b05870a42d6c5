//! The defaults of the workload's optional fields.

use super::*;

pub fn stable_window() -> HumanDuration {
    HumanDuration(std::time::Duration::from_secs(10))
}
pub fn stable_band() -> f64 {
    5.0
}
pub fn concurrency() -> u32 {
    8
}
pub fn object_size() -> SizeSpec {
    SizeSpec::Fixed(ByteSize::mib(1))
}
pub fn weight() -> u32 {
    1
}
pub fn lognormal_min() -> ByteSize {
    ByteSize(1)
}
pub fn lognormal_max() -> ByteSize {
    ByteSize(64 << 30)
}
pub fn prefix() -> String {
    "benchrun/".into()
}
pub fn objects() -> u64 {
    100
}
pub fn yes() -> bool {
    true
}
/// For `skip_serializing_if` on a field whose default is [`yes`].
pub fn is_true(b: &bool) -> bool {
    *b
}
pub fn growth() -> f64 {
    1.5
}
pub fn multipart_threshold() -> ByteSize {
    ByteSize::mib(64)
}
pub fn part_size() -> ByteSize {
    ByteSize::mib(16)
}
pub fn min_split() -> ByteSize {
    ByteSize::mib(64)
}
pub fn range_chunk() -> ByteSize {
    ByteSize::mib(8)
}
pub fn max_ranges() -> u32 {
    8
}
pub fn range_timeout() -> HumanDuration {
    HumanDuration(std::time::Duration::from_secs(30))
}
/// YCSB's Zipf constant.
pub fn zipf_exponent() -> f64 {
    0.99
}
/// YCSB's hotspot: 80% of the operations on 20% of the data.
pub fn hot_reads_percent() -> f64 {
    80.0
}
pub fn hot_objects_percent() -> f64 {
    20.0
}
pub fn seed() -> u64 {
    1
}

impl Default for DatasetSpec {
    fn default() -> Self {
        Self {
            prefix: prefix(),
            objects: objects(),
            size: None,
            prepare: true,
            cleanup: true,
            access: DatasetAccess::Random,
            zipf: None,
            hotspot: None,
        }
    }
}

impl Default for WriteSpec {
    fn default() -> Self {
        Self {
            compressibility: 0.0,
            multipart_threshold: multipart_threshold(),
            part_size: part_size(),
            fsync: false,
            max_objects: None,
        }
    }
}

impl Default for RangeEngineSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            min_split_size: min_split(),
            chunk_size: range_chunk(),
            max_concurrent_ranges: max_ranges(),
            range_timeout: range_timeout(),
            pre_stat: false,
        }
    }
}

/// `null` as the default, for the fields with a default that the CRD marks `nullable` (kube
/// makes every optional int-or-string property nullable): the API server keeps an explicit
/// `null` there, and the operator's typed decode of the run must not fail on it.
pub mod null_is_default {
    use super::*;
    macro_rules! or_default {
        ($($name:ident),*) => {$(
            pub fn $name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
                Ok(Option::<ByteSize>::deserialize(d)?.unwrap_or_else(super::$name))
            }
        )*};
    }
    or_default!(
        lognormal_min,
        lognormal_max,
        multipart_threshold,
        part_size,
        min_split,
        range_chunk
    );
}
pub fn queue_depth() -> u32 {
    1
}
pub fn block_files() -> u32 {
    1
}
