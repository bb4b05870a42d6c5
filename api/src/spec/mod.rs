//! The workload: what a benchmark does, as users write it.
//!
//! One type serves the standalone worker's YAML file and the `spec.workload` of a
//! `BenchmarkRun`, so both have one schema. Keys are camelCase; unknown keys are errors.
//! [`Workload::from_yaml`] parses *and* validates, and every error names the field.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::{ByteSize, HumanDuration};

/// A storage benchmark: a target, a mix of operations, how long, and how hard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    /// Where the benchmark runs: `file:///dir` (buffered), `direct:///dir` (O_DIRECT),
    /// `s3://bucket/prefix`, `gs://bucket/prefix` or `az://container/prefix`.
    #[schemars(length(min = 1, max = limits::MAX_TARGET_LEN))]
    pub target: String,
    /// How long the measured stage runs, e.g. `30s` or `5m`. Give this or `totalOps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<HumanDuration>,
    /// Stop after this many operations instead of after a duration. Give this or `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = limits::MAX_TOTAL_OPS))]
    pub total_ops: Option<u64>,
    /// Operations in flight at once (tasks issuing operations).
    #[serde(default = "defaults::concurrency")]
    #[schemars(range(min = 1, max = limits::MAX_CONCURRENCY))]
    pub concurrency: u32,
    /// The operation mix: each operation is picked with probability weight / sum of weights.
    #[schemars(length(min = 1, max = 5))]
    pub ops: Vec<OpWeight>,
    /// Size of objects written by `put`, and of the dataset unless `dataset.size` is given.
    #[serde(default = "defaults::object_size")]
    pub object_size: SizeSpec,
    /// The objects that `get` and `stat` read, created by a prepare stage.
    #[serde(default)]
    pub dataset: DatasetSpec,
    /// Operations per second for this worker. Unset runs closed-loop (as fast as possible).
    /// When set, operations are scheduled open-loop and latency is measured from each
    /// operation's intended start, so a stalled target cannot hide its queueing delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = limits::MIN_RATE, max = limits::MAX_RATE))]
    pub rate_limit: Option<f64>,
    /// How objects are read.
    #[serde(default)]
    pub read: ReadSpec,
    /// How objects are written.
    #[serde(default)]
    pub write: WriteSpec,
    /// Concurrent ranged GETs for large objects on object storage (off by default).
    #[serde(default)]
    pub range_engine: RangeEngineSpec,
    /// Stop the run early when errors pass a limit. Unset: errors are counted and the run goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_budget: Option<ErrorBudget>,
    /// End the measured stage early once throughput has held steady (warp's autoterm): every
    /// second of the last `window` within `bandPercent` of their mean. `duration` stays the
    /// longest it may run; the summary's `stoppedBy` says `stable: ...` when this ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_when_stable: Option<StableSpec>,
    /// Seed for every random choice (op mix, keys, sizes, data). Same seed, same sequence.
    #[serde(default = "defaults::seed")]
    pub seed: u64,
    /// Connection settings for object storage; ignored for `file://` and `direct://`.
    #[serde(default)]
    pub storage: StorageSpec,
}

/// The operations a workload can issue.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// Read a whole dataset object.
    Get,
    /// Write a new object of `objectSize`.
    Put,
    /// Read a dataset object's metadata (HEAD).
    Stat,
    /// List the dataset prefix, every page.
    List,
    /// Delete an object written by this run's `put`s.
    Delete,
}

impl OpKind {
    pub const ALL: [OpKind; 5] = [
        OpKind::Get,
        OpKind::Put,
        OpKind::Stat,
        OpKind::List,
        OpKind::Delete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Put => "put",
            OpKind::Stat => "stat",
            OpKind::List => "list",
            OpKind::Delete => "delete",
        }
    }

    /// Dense index, for per-op arrays on the hot path.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the operation mix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpWeight {
    /// The operation.
    pub op: OpKind,
    /// Relative weight; 0 disables the entry.
    #[serde(default = "defaults::weight")]
    #[schemars(range(max = limits::MAX_WEIGHT))]
    pub weight: u32,
}

/// An object size: fixed (`1MiB`) or drawn from a distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeSpec {
    /// Every object has this size.
    Fixed(ByteSize),
    /// Sizes drawn from a distribution.
    Distribution(SizeDistribution),
}

/// A size distribution; write exactly one key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum SizeDistribution {
    /// Uniform between `min` and `max`, inclusive.
    Uniform { min: ByteSize, max: ByteSize },
    /// Log-normal with this mean and standard deviation, clamped to `[min, max]`.
    Lognormal {
        mean: ByteSize,
        #[serde(rename = "stdDev")]
        std_dev: ByteSize,
        #[serde(
            default = "defaults::lognormal_min",
            deserialize_with = "null_is_default::lognormal_min"
        )]
        min: ByteSize,
        #[serde(
            default = "defaults::lognormal_max",
            deserialize_with = "null_is_default::lognormal_max"
        )]
        max: ByteSize,
    },
}

impl Serialize for SizeSpec {
    // Through a JSON value: serde_yaml would write an enum as a YAML tag (`!uniform`), which
    // neither this parser nor Kubernetes reads back.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SizeSpec::Fixed(b) => b.serialize(s),
            SizeSpec::Distribution(d) => serde_json::to_value(d)
                .map_err(serde::ser::Error::custom)?
                .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SizeSpec {
    // Hand-written so that a bad size says what is wrong, not "did not match any variant".
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Number(n) => n
                .as_u64()
                .map(|n| SizeSpec::Fixed(ByteSize(n)))
                .ok_or_else(|| D::Error::custom(format!("{n} is not a whole, non-negative number of bytes"))),
            serde_json::Value::String(s) => s.parse().map(SizeSpec::Fixed).map_err(D::Error::custom),
            v @ serde_json::Value::Object(_) => serde_json::from_value(v)
                .map(SizeSpec::Distribution)
                .map_err(|e| D::Error::custom(format!("{e} (expected a size such as 1MiB, or uniform: {{min, max}} or lognormal: {{mean, stdDev}})"))),
            other => Err(D::Error::custom(format!(
                "expected a size such as 1MiB, or uniform: {{min, max}} or lognormal: {{mean, stdDev}}, got {other}"
            ))),
        }
    }
}

impl JsonSchema for SizeSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SizeSpec".into()
    }
    fn inline_schema() -> bool {
        true
    }
    /// Structural for Kubernetes, and as strict as the parser: a value that is an integer, a
    /// string or an object, so no single `type`; `x-kubernetes-preserve-unknown-fields` is
    /// the only untyped node a CRD allows. Each keyword below constrains one JSON type only
    /// (`minimum`/`maximum` integers, `pattern` strings, `properties`/`*Properties`/`required`
    /// objects), so together they check every form. "Exactly one of uniform, lognormal" is
    /// `not: {allOf: [{not: {required: [uniform]}}, {not: {required: [lognormal]}}]}` with
    /// `maxProperties: 1` (an anyOf of the two `required`s, written without anyOf, which the
    /// operator's schema rewriting would turn into an unchecked node).
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let max = limits::MAX_OBJECT_SIZE;
        let size = |description: &str| {
            serde_json::json!({
                "description": description,
                "x-kubernetes-int-or-string": true,
                "minimum": 0,
                "maximum": max,
                "pattern": crate::units::byte_size_pattern(),
            })
        };
        schemars::json_schema!({
            "description": "An object size: an integer or a string such as 4096, 64KiB, 1.5MiB, or a distribution: {uniform: {min, max}} or {lognormal: {mean, stdDev, min, max}}.",
            "x-kubernetes-preserve-unknown-fields": true,
            "minimum": 0,
            "maximum": max,
            "pattern": crate::units::byte_size_pattern(),
            "minProperties": 1,
            "maxProperties": 1,
            "not": {"allOf": [
                {"not": {"required": ["uniform"]}},
                {"not": {"required": ["lognormal"]}}
            ]},
            "properties": {
                "uniform": {
                    "description": "Uniform between `min` and `max`, inclusive.",
                    "type": "object",
                    "required": ["min", "max"],
                    "properties": {
                        "min": size("Smallest size."),
                        "max": size("Largest size."),
                    },
                    "additionalProperties": false
                },
                "lognormal": {
                    "description": "Log-normal with this mean and standard deviation, clamped to `[min, max]`.",
                    "type": "object",
                    "required": ["mean", "stdDev"],
                    "properties": {
                        "mean": size("Mean size."),
                        "stdDev": size("Standard deviation."),
                        "min": size("Smallest size (default 1)."),
                        "max": size("Largest size (default 64GiB)."),
                    },
                    "additionalProperties": false
                }
            }
        })
    }
}

impl SizeSpec {
    pub fn fixed(size: ByteSize) -> Self {
        SizeSpec::Fixed(size)
    }

    /// Every size this spec gives, with the path suffix of each (`""`, `.uniform.min`, ...).
    pub fn sizes(&self) -> Vec<(&'static str, u64)> {
        match self {
            SizeSpec::Fixed(s) => vec![("", s.0)],
            SizeSpec::Distribution(SizeDistribution::Uniform { min, max }) => {
                vec![(".uniform.min", min.0), (".uniform.max", max.0)]
            }
            SizeSpec::Distribution(SizeDistribution::Lognormal {
                mean,
                std_dev,
                min,
                max,
            }) => vec![
                (".lognormal.mean", mean.0),
                (".lognormal.stdDev", std_dev.0),
                (".lognormal.min", min.0),
                (".lognormal.max", max.0),
            ],
        }
    }

    /// The largest size this spec can produce, for sizing buffers.
    pub fn max(&self) -> u64 {
        match self {
            SizeSpec::Fixed(s) => s.0,
            SizeSpec::Distribution(SizeDistribution::Uniform { max, .. }) => max.0,
            SizeSpec::Distribution(SizeDistribution::Lognormal { max, .. }) => max.0,
        }
    }
}

/// The dataset that reads run against.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatasetSpec {
    /// Key prefix under the target for everything this run creates; `put` writes under
    /// `<prefix>put/`.
    #[serde(default = "defaults::prefix")]
    #[schemars(length(max = limits::MAX_PREFIX_LEN))]
    pub prefix: String,
    /// Number of objects in the dataset.
    #[serde(default = "defaults::objects")]
    #[schemars(range(max = limits::MAX_OBJECTS))]
    pub objects: u64,
    /// Size of dataset objects; defaults to `objectSize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<SizeSpec>,
    /// Create the dataset before the measured stage. When false, the existing objects under
    /// the prefix are listed and used, with the sizes the listing reports.
    #[serde(default = "defaults::yes")]
    pub prepare: bool,
    /// Delete what the run created after it: the dataset (when `prepare` wrote it) and the
    /// objects `put` wrote. Under the operator each worker has its own dataset under
    /// `<prefix><worker>/`.
    #[serde(default = "defaults::yes")]
    pub cleanup: bool,
    /// Which object each `get` and `stat` reads: `random` (uniform) or `sequential` (one
    /// pass after another over the dataset in key order, shared by all tasks, as a file
    /// reader such as fio walks its files).
    #[serde(default)]
    pub access: Access,
}

/// Order in which reads visit the dataset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Access {
    /// Each read picks an object uniformly at random.
    #[default]
    Random,
    /// Reads walk the dataset in key order, wrapping around.
    Sequential,
}

impl Default for DatasetSpec {
    fn default() -> Self {
        Self {
            prefix: defaults::prefix(),
            objects: defaults::objects(),
            size: None,
            prepare: true,
            cleanup: true,
            access: Access::Random,
        }
    }
}

/// How objects are read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadSpec {
    /// Read in chunks of this size into reused buffers. Defaults: 1MiB for `file://`,
    /// 4MiB for `direct://` (a multiple of 4KiB); for object storage, unset means one
    /// streaming GET per object and a size means sequential ranged GETs of that size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maximum" = limits::MAX_CHUNK_SIZE))]
    pub chunk_size: Option<ByteSize>,
    /// Read each object with a single request into one buffer of the object's size.
    /// For comparisons only; excludes `chunkSize` and `adaptive`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole_object: bool,
    /// Grow the chunk size from `initial` by `factor` up to `max` within each object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveChunks>,
    /// Check every byte read against the data this tool wrote (costs CPU).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
}

/// Adaptive chunk growth within one object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdaptiveChunks {
    /// First chunk size.
    #[schemars(extend("maximum" = limits::MAX_CHUNK_SIZE))]
    pub initial: ByteSize,
    /// Multiply the chunk size by this after each chunk.
    #[serde(default = "defaults::growth")]
    #[schemars(range(min = 1.0, max = limits::MAX_GROWTH))]
    pub factor: f64,
    /// Largest chunk size.
    #[schemars(extend("maximum" = limits::MAX_CHUNK_SIZE))]
    pub max: ByteSize,
}

/// How objects are written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteSpec {
    /// Fraction of each 4KiB block that is compressible (zeros), 0 to 1.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub compressibility: f64,
    /// Object storage: objects at least this large are uploaded in parts.
    #[serde(
        default = "defaults::multipart_threshold",
        deserialize_with = "null_is_default::multipart_threshold"
    )]
    #[schemars(extend("maximum" = limits::MAX_OBJECT_SIZE))]
    pub multipart_threshold: ByteSize,
    /// Object storage: size of each multipart part.
    #[serde(
        default = "defaults::part_size",
        deserialize_with = "null_is_default::part_size"
    )]
    #[schemars(extend("maximum" = limits::MAX_PART_SIZE))]
    pub part_size: ByteSize,
    /// Local files: fsync each file before the write counts as done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fsync: bool,
    /// Bound the keys `put` writes: each worker writes at most this many distinct objects
    /// and then overwrites them in turn, so a long write workload holds at most
    /// `maxObjects` x the largest `objectSize` of PUT data per worker and cannot fill a volume.
    /// Unset: every `put` writes a new object (the target must hold everything written).
    /// At least `concurrency` (two PUTs in flight never share a key); excludes `delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = limits::MAX_OBJECTS))]
    pub max_objects: Option<u64>,
}

impl Default for WriteSpec {
    fn default() -> Self {
        Self {
            compressibility: 0.0,
            multipart_threshold: defaults::multipart_threshold(),
            part_size: defaults::part_size(),
            fsync: false,
            max_objects: None,
        }
    }
}

/// The range engine: large objects fetched as concurrent byte ranges into one buffer (so an
/// object larger than
/// [`MAX_WHOLE_OBJECT_BUFFER`](limits::MAX_WHOLE_OBJECT_BUFFER), 1 GiB, is refused).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RangeEngineSpec {
    /// Off by default: measured 27-30% slower where bandwidth per connection is not the limit.
    #[serde(default)]
    pub enabled: bool,
    /// Only objects at least this large are split.
    #[serde(
        default = "defaults::min_split",
        deserialize_with = "null_is_default::min_split"
    )]
    #[schemars(extend("maximum" = limits::MAX_OBJECT_SIZE))]
    pub min_split_size: ByteSize,
    /// Size of each range.
    #[serde(
        default = "defaults::range_chunk",
        deserialize_with = "null_is_default::range_chunk"
    )]
    #[schemars(extend("maximum" = limits::MAX_CHUNK_SIZE))]
    pub chunk_size: ByteSize,
    /// Ranges in flight per object.
    #[serde(default = "defaults::max_ranges")]
    #[schemars(range(min = 1, max = limits::MAX_CONCURRENT_RANGES))]
    pub max_concurrent_ranges: u32,
    /// Timeout of each range request.
    #[serde(default = "defaults::range_timeout")]
    pub range_timeout: HumanDuration,
    /// Experiment only: stat every dataset object before the run (timed separately).
    /// Runs only when the range engine is enabled.
    #[serde(default)]
    pub pre_stat: bool,
}

impl Default for RangeEngineSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            min_split_size: defaults::min_split(),
            chunk_size: defaults::range_chunk(),
            max_concurrent_ranges: defaults::max_ranges(),
            range_timeout: defaults::range_timeout(),
            pre_stat: false,
        }
    }
}

/// When throughput counts as steady (see `stopWhenStable`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StableSpec {
    /// How long throughput must hold steady, e.g. `10s` (whole seconds, 2s to 1h).
    #[serde(default = "defaults::stable_window")]
    pub window: HumanDuration,
    /// How far each second's ops/s may be from the window's mean, in percent. Default 5.
    #[serde(default = "defaults::stable_band")]
    #[schemars(range(min = 0.1, max = 100.0))]
    pub band_percent: f64,
}

/// When to give up on a run because of errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ErrorBudget {
    /// Stop after this many failed operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_errors: Option<u64>,
    /// Stop when failed / total operations exceeds this (checked after 100 operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_error_ratio: Option<f64>,
}

/// Object storage connection settings. Credentials are never written here: they come from
/// the standard environment variables or from files mounted from a Secret.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageSpec {
    /// Endpoint URL for S3-compatible servers and emulators, e.g. `http://127.0.0.1:9000`.
    /// When set, no metadata service or public host is ever contacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::MAX_ENDPOINT_LEN))]
    pub endpoint: Option<String>,
    /// Region (S3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Path-style (`endpoint/bucket/key`) instead of virtual-hosted-style requests (S3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_style: Option<bool>,
    /// Allow plain `http://` endpoints.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_http: bool,
    /// Directory of credential files, one file per key (as a Secret mounted as a volume):
    /// `accessKeyId`/`secretAccessKey` (S3), `accountName`/`accountKey` (Azure),
    /// `serviceAccountKey` (GCS JSON key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_dir: Option<String>,
    /// Timeout of each request, body included. Unset: no limit on the whole request, but a
    /// connection silent for 30s fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout: Option<HumanDuration>,
    /// Retries of a failed request inside one operation. 0 (the default) makes every failure
    /// count as an error of its kind (`http_503`, `timeout`, ...) and keeps requests per
    /// operation exact; retries would hide both.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(max = limits::MAX_RETRIES))]
    pub max_retries: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// The bounds every workload is held to. Each is both in the schema (so the CRD rejects it at
/// admission where a schema can express it) and in [`Workload::validate`] (so a standalone
/// file is held to the same bounds): one source of truth.
pub mod limits {
    /// Alignment of O_DIRECT buffers, offsets and lengths. 4 KiB satisfies every common
    /// logical block size (512 B and 4 KiB sectors). Here, beside the other bounds, because
    /// validation checks sizes against it (`targets` re-exports it).
    pub const DIRECT_ALIGN: usize = 4096;
    /// Tasks issuing operations (`concurrency`).
    pub const MAX_CONCURRENCY: u32 = 65_536;
    /// `totalOps`.
    pub const MAX_TOTAL_OPS: u64 = 1_000_000_000_000;
    /// One object (`objectSize`, `dataset.size`, every size of a distribution): 5 TiB, the
    /// largest S3 object.
    pub const MAX_OBJECT_SIZE: u64 = 5 << 40;
    /// What one run's dataset may hold in all: `dataset.objects` x the largest dataset size.
    pub const MAX_DATASET_BYTES: u64 = 1 << 50;
    /// `dataset.objects` and `write.maxObjects`.
    pub const MAX_OBJECTS: u64 = 100_000_000;
    /// Chunk and range sizes (`read.chunkSize`, `read.adaptive.*`, `rangeEngine.chunkSize`):
    /// each is one buffer per task.
    pub const MAX_CHUNK_SIZE: u64 = 1 << 30;
    /// A buffer holding a whole object (`read.wholeObject`, the range engine): larger objects
    /// are refused with an error instead of allocated.
    pub const MAX_WHOLE_OBJECT_BUFFER: u64 = 1 << 30;
    /// `write.partSize`: 5 GiB, the largest S3 part.
    pub const MAX_PART_SIZE: u64 = 5 << 30;
    /// `rateLimit`, operations per second.
    pub const MIN_RATE: f64 = 0.001;
    pub const MAX_RATE: f64 = 10_000_000.0;
    /// Every duration (`duration`, `rangeEngine.rangeTimeout`, `storage.requestTimeout`): 30 days.
    pub const MAX_DURATION_SECS: u64 = 30 * 24 * 3600;
    /// `read.adaptive.factor`.
    pub const MAX_GROWTH: f64 = 16.0;
    /// `ops[].weight`.
    pub const MAX_WEIGHT: u32 = 1_000_000;
    /// `target`, in bytes.
    pub const MAX_TARGET_LEN: u32 = 1024;
    /// `storage.endpoint`, in bytes.
    pub const MAX_ENDPOINT_LEN: u32 = 2048;
    /// `dataset.prefix`, in bytes.
    pub const MAX_PREFIX_LEN: u32 = 256;
    /// `rangeEngine.maxConcurrentRanges`.
    pub const MAX_CONCURRENT_RANGES: u32 = 1024;
    /// `storage.maxRetries`.
    pub const MAX_RETRIES: u32 = 100;
    /// All tasks' latency histograms together (see
    /// [`histogram_bytes_per_task`](super::histogram_bytes_per_task)).
    pub const MAX_HISTOGRAM_BYTES: u64 = 4 << 30;
    /// A workload file, in bytes.
    pub const MAX_FILE_BYTES: usize = 1 << 20;
    /// Nesting of `[` and `{` in a workload file.
    pub const MAX_NESTING: usize = 32;
    pub use crate::quote::MAX_QUOTED;
    /// Errors listed for one file; the rest are counted.
    pub const MAX_ERRORS_SHOWN: usize = 20;
}

// In a leaf module, so `units` and `stats` quote user input without depending on `spec`.
pub use crate::quote::clip;

/// `null` as the default, for the fields with a default that the CRD marks `nullable` (kube
/// makes every optional int-or-string property nullable): the API server keeps an explicit
/// `null` there, and the operator's typed decode of the run must not fail on it.
mod null_is_default {
    use super::*;
    macro_rules! or_default {
        ($($name:ident),*) => {$(
            pub fn $name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
                Ok(Option::<ByteSize>::deserialize(d)?.unwrap_or_else(defaults::$name))
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

mod defaults {
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
    pub fn seed() -> u64 {
        1
    }
}

/// A parsed target URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetUri {
    /// `file:///dir`: buffered I/O on a directory.
    File { root: std::path::PathBuf },
    /// `direct:///dir`: O_DIRECT I/O on a directory.
    Direct { root: std::path::PathBuf },
    /// `s3://bucket/prefix`.
    S3 { bucket: String, prefix: String },
    /// `gs://bucket/prefix`.
    Gcs { bucket: String, prefix: String },
    /// `az://container/prefix`.
    Azure { container: String, prefix: String },
}

impl TargetUri {
    pub fn scheme(&self) -> &'static str {
        match self {
            TargetUri::File { .. } => "file",
            TargetUri::Direct { .. } => "direct",
            TargetUri::S3 { .. } => "s3",
            TargetUri::Gcs { .. } => "gs",
            TargetUri::Azure { .. } => "az",
        }
    }

    pub fn is_local(&self) -> bool {
        matches!(self, TargetUri::File { .. } | TargetUri::Direct { .. })
    }
}

impl FromStr for TargetUri {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            format!("`{s}` is not a target URI: expected file:///dir, direct:///dir, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix")
        })?;
        let local = |rest: &str| -> Result<std::path::PathBuf, String> {
            if !rest.starts_with('/') {
                return Err(format!(
                    "`{s}`: the path must be absolute, e.g. {scheme}:///data/bench"
                ));
            }
            Ok(std::path::PathBuf::from(rest))
        };
        let bucket = |rest: &str| -> Result<(String, String), String> {
            let (b, p) = rest.split_once('/').unwrap_or((rest, ""));
            if b.is_empty() {
                return Err(format!("`{s}`: the bucket or container name is missing"));
            }
            let p = p.trim_start_matches('/');
            let p = if p.is_empty() || p.ends_with('/') {
                p.to_string()
            } else {
                format!("{p}/")
            };
            Ok((b.to_string(), p))
        };
        match scheme {
            "file" => Ok(TargetUri::File { root: local(rest)? }),
            "direct" => Ok(TargetUri::Direct { root: local(rest)? }),
            "s3" => bucket(rest).map(|(bucket, prefix)| TargetUri::S3 { bucket, prefix }),
            "gs" => bucket(rest).map(|(bucket, prefix)| TargetUri::Gcs { bucket, prefix }),
            "az" => bucket(rest).map(|(container, prefix)| TargetUri::Azure { container, prefix }),
            other => Err(format!(
                "`{s}`: unknown scheme `{other}`: use file, direct, s3, gs or az"
            )),
        }
    }
}

/// A workload file that failed to parse or validate. The message names the field.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{path}: {}", clip_message(message))]
    Parse { path: String, message: String },
    #[error("{}", list_errors(.0))]
    Invalid(Vec<FieldError>),
}

/// A message cut in the middle when long, keeping its start (the field and value) and its end
/// (serde_yaml's "at line L column C").
fn clip_message(m: &str) -> std::borrow::Cow<'_, str> {
    const HEAD: usize = 300;
    const TAIL: usize = 80;
    if m.chars().count() <= HEAD + TAIL {
        return m.into();
    }
    let head_end = m.char_indices().nth(HEAD).map_or(m.len(), |(i, _)| i);
    let tail_start = m
        .char_indices()
        .rev()
        .nth(TAIL - 1)
        .map_or(head_end, |(i, _)| i.max(head_end));
    format!(
        "{} ... ({} bytes left out) ... {}",
        &m[..head_end],
        tail_start - head_end,
        &m[tail_start..]
    )
    .into()
}

fn list_errors(errs: &[FieldError]) -> String {
    let mut lines: Vec<String> = errs
        .iter()
        .take(limits::MAX_ERRORS_SHOWN)
        .map(|e| e.to_string())
        .collect();
    if errs.len() > limits::MAX_ERRORS_SHOWN {
        lines.push(format!(
            "... and {} more errors",
            errs.len() - limits::MAX_ERRORS_SHOWN
        ));
    }
    lines.join("\n")
}

/// The checks [`Workload::from_yaml`] makes before the YAML parser runs (size, nesting, no
/// aliases), for callers that parse the document themselves (a matrix file).
pub fn precheck(text: &str) -> Result<(), SpecError> {
    check_file_size(text.len())?;
    prescan(text).map_err(|message| SpecError::Parse {
        path: "workload".into(),
        message,
    })
}

fn check_file_size(len: usize) -> Result<(), SpecError> {
    if len > limits::MAX_FILE_BYTES {
        return Err(SpecError::Parse {
            path: "workload".into(),
            message: format!(
                "the file is larger than {max}: a workload file is at most {max}",
                max = ByteSize(limits::MAX_FILE_BYTES as u64)
            ),
        });
    }
    Ok(())
}

/// One linear pass over a YAML text, before parsing it: refuse flow nesting deeper than
/// [`limits::MAX_NESTING`] (the parser's cost grows with the square of the depth) and alias
/// nodes (`*name`, which can expand quadratically or worse). Quoted scalars and comments are
/// skipped; a `*` or quote counts as the start of a node only where a node can start.
fn prescan(text: &str) -> Result<(), String> {
    let mut depth = 0usize;
    let mut line = 1usize;
    // The previous character on this line, and the last one that was not a space.
    let mut prev: Option<char> = None;
    let mut last_sig: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let node_start = prev.is_none_or(|p| p == ' ' || p == '\t' || "[{,".contains(p))
            && last_sig.is_none_or(|p| ":-[{,?".contains(p));
        match c {
            '\n' => {
                line += 1;
                prev = None;
                last_sig = None;
                continue;
            }
            '#' if prev.is_none_or(|p| p == ' ' || p == '\t') => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
                continue;
            }
            '\'' | '"' if node_start => {
                // A quoted scalar, possibly over several lines.
                while let Some(q) = chars.next() {
                    match q {
                        '\n' => line += 1,
                        '\\' if c == '"' => {
                            chars.next();
                        }
                        '\'' if c == '\'' && chars.peek() == Some(&'\'') => {
                            chars.next();
                        }
                        q if q == c => break,
                        _ => {}
                    }
                }
                prev = Some(c);
                last_sig = Some(c);
                continue;
            }
            '*' if node_start => {
                return Err(format!(
                    "YAML aliases (`*name`, line {line}) are not supported: write the value out"
                ));
            }
            '[' | '{' => {
                depth += 1;
                if depth > limits::MAX_NESTING {
                    return Err(format!(
                        "nested more than {} levels deep (line {line})",
                        limits::MAX_NESTING
                    ));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = Some(c);
        if c != ' ' && c != '\t' {
            last_sig = Some(c);
        }
    }
    Ok(())
}

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the field, e.g. `rangeEngine.chunkSize`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", clip(&self.path), clip_message(&self.message))
    }
}

impl Workload {
    /// Parse a workload file's bytes: at most [`limits::MAX_FILE_BYTES`], UTF-8, then
    /// [`Workload::from_yaml`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SpecError> {
        check_file_size(bytes.len())?;
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let at = e.valid_up_to();
            let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
            SpecError::Parse {
                path: "workload".into(),
                message: format!(
                    "the file is not UTF-8: invalid byte at offset {at} (line {line})"
                ),
            }
        })?;
        Self::from_yaml(text)
    }

    /// Parse a workload from YAML (or JSON) and validate it.
    ///
    /// Bounded in time and memory whatever the input: at most [`limits::MAX_FILE_BYTES`],
    /// `[`/`{` nested at most [`limits::MAX_NESTING`] deep, and no YAML aliases (`*name`),
    /// which could expand a small file into an unbounded document; all checked by one linear
    /// scan before the YAML parser runs.
    pub fn from_yaml(text: &str) -> Result<Self, SpecError> {
        precheck(text)?;
        let de = serde_yaml::Deserializer::from_str(text);
        let w: Workload = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                "workload".to_string()
            } else {
                path
            };
            // serde_yaml appends " at line L column C"; keep it, it helps find the spot.
            SpecError::Parse {
                path,
                message: e.into_inner().to_string(),
            }
        })?;
        w.validate().map_err(SpecError::Invalid)?;
        Ok(w)
    }

    /// The parsed target URI. Only fails on a workload that skipped [`Workload::validate`].
    pub fn target_uri(&self) -> Result<TargetUri, String> {
        self.target.parse()
    }

    /// Size of dataset objects.
    pub fn dataset_size(&self) -> &SizeSpec {
        self.dataset.size.as_ref().unwrap_or(&self.object_size)
    }

    /// Weight of one op in the mix (0 when absent).
    pub fn weight_of(&self, op: OpKind) -> u64 {
        self.ops
            .iter()
            .filter(|w| w.op == op)
            .map(|w| w.weight as u64)
            .sum()
    }

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
            let mut seen = [false; 5];
            for (i, w) in self.ops.iter().enumerate() {
                if std::mem::replace(&mut seen[w.op.index()], true) {
                    bad(
                        &format!("ops[{i}].op"),
                        format!("`{}` is listed twice", w.op),
                    );
                }
            }
        }
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
        if let Some(e) = &self.storage.endpoint {
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                bad(
                    "storage.endpoint",
                    format!("`{e}` must start with http:// or https://"),
                );
            } else if e.starts_with("http://") && !self.storage.allow_http {
                bad(
                    "storage.allowHttp",
                    format!("endpoint `{e}` is plain http: set storage.allowHttp: true"),
                );
            }
        }
        self.check_bounds(uri.as_ref(), &mut bad);
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
        if let Some(e) = &self.storage.endpoint {
            at_most(
                bad,
                "storage.endpoint",
                e.len() as u64,
                MAX_ENDPOINT_LEN as u64,
                &|v| format!("{v} bytes"),
            );
        }
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

/// The ops of `w`'s mix (weight above 0): a task keeps a histogram for these only.
pub fn mix_ops(w: &Workload) -> Vec<OpKind> {
    OpKind::ALL
        .into_iter()
        .filter(|op| w.weight_of(*op) > 0)
        .collect()
}

/// Histogram memory of one task running `w`: one per op of the mix, plus GET's TTFB. Here, not
/// in `stats` or the worker's recorder, because [`Workload::validate`] bounds it (`concurrency`
/// x this at most [`MAX_HISTOGRAM_BYTES`](limits::MAX_HISTOGRAM_BYTES)).
pub fn histogram_bytes_per_task(w: &Workload) -> u64 {
    let ops = mix_ops(w);
    let n = ops.len() as u64 + ops.contains(&OpKind::Get) as u64;
    n * crate::latency::Latency::bytes()
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

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
target: file:///tmp/bench
duration: 10s
concurrency: 4
ops:
  - { op: get, weight: 60 }
  - { op: put, weight: 30 }
  - { op: stat, weight: 10 }
objectSize: 1MiB
dataset: { objects: 10, size: { uniform: { min: 4KiB, max: 64KiB } } }
"#;

    fn err(text: &str) -> String {
        Workload::from_yaml(text).unwrap_err().to_string()
    }

    #[test]
    fn max_objects_must_cover_concurrency_and_excludes_delete() {
        let ok = format!("{GOOD}write: {{maxObjects: 4}}\n");
        assert_eq!(Workload::from_yaml(&ok).unwrap().write.max_objects, Some(4));
        let e = err(&format!("{GOOD}write: {{maxObjects: 3}}\n"));
        assert!(
            e.contains("write.maxObjects") && e.contains("at least concurrency (4)"),
            "{e}"
        );
        let with_delete = GOOD.replace(
            "  - { op: stat, weight: 10 }",
            "  - { op: stat, weight: 10 }\n  - { op: delete, weight: 5 }",
        );
        let e = err(&format!("{with_delete}write: {{maxObjects: 8}}\n"));
        assert!(
            e.contains("write.maxObjects") && e.contains("delete"),
            "{e}"
        );
    }

    #[test]
    fn good_file_parses_with_defaults() {
        let w = Workload::from_yaml(GOOD).unwrap();
        assert_eq!(w.concurrency, 4);
        assert_eq!(w.duration.unwrap().0.as_secs(), 10);
        assert_eq!(w.object_size, SizeSpec::Fixed(ByteSize::mib(1)));
        assert_eq!(w.dataset.prefix, "benchrun/");
        assert!(w.dataset.prepare && w.dataset.cleanup);
        assert!(
            !w.range_engine.enabled,
            "range engine must be off by default"
        );
        assert_eq!(w.range_engine.min_split_size, ByteSize::mib(64));
        assert_eq!(
            w.dataset_size(),
            &SizeSpec::Distribution(SizeDistribution::Uniform {
                min: ByteSize::kib(4),
                max: ByteSize::kib(64)
            })
        );
    }

    #[test]
    fn round_trips_through_yaml() {
        let w = Workload::from_yaml(GOOD).unwrap();
        let again = Workload::from_yaml(&serde_yaml::to_string(&w).unwrap()).unwrap();
        assert_eq!(w, again);
    }

    #[test]
    fn lognormal_parses() {
        let w = Workload::from_yaml(&GOOD.replace(
            "objectSize: 1MiB",
            "objectSize: { lognormal: { mean: 1MiB, stdDev: 256KiB } }",
        ))
        .unwrap();
        assert!(matches!(
            w.object_size,
            SizeSpec::Distribution(SizeDistribution::Lognormal { .. })
        ));
    }

    #[test]
    fn unknown_key_is_named() {
        let e = err(&GOOD.replace("concurrency: 4", "concurrency: 4\nconcurency: 5"));
        assert!(e.contains("unknown field `concurency`"), "{e}");
        let e = err(&GOOD.replace("objects: 10", "objects: 10, prefx: x/"));
        assert!(e.starts_with("dataset"), "{e}");
        assert!(e.contains("unknown field `prefx`"), "{e}");
    }

    #[test]
    fn bad_values_name_field_and_value() {
        let e = err(&GOOD.replace("objectSize: 1MiB", "objectSize: 1MB2"));
        assert!(e.starts_with("objectSize"), "{e}");
        let e = err(&GOOD.replace("concurrency: 4", "concurrency: many"));
        assert!(e.starts_with("concurrency:"), "{e}");
        let e = err(&GOOD.replace("duration: 10s", "duration: 10 parsecs"));
        assert!(
            e.starts_with("duration:") && e.contains("10 parsecs"),
            "{e}"
        );
        let e = err(&GOOD.replace("op: stat", "op: head"));
        assert!(
            e.starts_with("ops[2].op") && e.contains("unknown variant `head`"),
            "{e}"
        );
        let e = err(&GOOD.replace("file:///tmp/bench", "ftp://host/x"));
        assert!(
            e.contains("target: `ftp://host/x`: unknown scheme `ftp`"),
            "{e}"
        );
        let e = err(&GOOD.replace("file:///tmp/bench", "file://relative/x"));
        assert!(e.contains("must be absolute"), "{e}");
        let e = err(&GOOD.replace("concurrency: 4", "concurrency: 0"));
        assert!(e.contains("concurrency: must be at least 1 (got 0)"), "{e}");
    }

    #[test]
    fn cross_field_rules() {
        let e = err(&GOOD.replace("duration: 10s", "duration: 10s\ntotalOps: 5"));
        assert!(e.contains("either duration or totalOps"), "{e}");
        let e = err(&GOOD.replace("duration: 10s\n", ""));
        assert!(e.contains("give a duration"), "{e}");
        let e = err(&GOOD.replace("{ op: put, weight: 30 }", "{ op: delete, weight: 30 }"));
        assert!(e.contains("needs `put`"), "{e}");
        let e = err(&GOOD.replace("min: 4KiB, max: 64KiB", "min: 64KiB, max: 4KiB"));
        assert!(
            e.contains("dataset.size.uniform.max: 4KiB is smaller than min 64KiB"),
            "{e}"
        );
        let e = err(&format!("{GOOD}rangeEngine: {{ preStat: true }}\n"));
        assert!(e.contains("rangeEngine.preStat"), "{e}");
        let e = err(&format!(
            "{GOOD}read: {{ wholeObject: true, chunkSize: 1MiB }}\n"
        ));
        assert!(e.contains("read.wholeObject"), "{e}");
        let direct = GOOD.replace("file://", "direct://");
        let e = err(&format!("{direct}read: {{ chunkSize: 1000 }}\n"));
        assert!(
            e.contains("read.chunkSize: 1000 is not a multiple of 4096"),
            "{e}"
        );
        let e = err(&GOOD.replace(
            "{ op: get, weight: 60 }",
            "{ op: get, weight: 60 }\n  - { op: get, weight: 1 }",
        ));
        assert!(e.contains("ops[1].op: `get` is listed twice"), "{e}");
        let s3 = GOOD.replace("file:///tmp/bench", "s3://bkt/p");
        let e = err(&format!(
            "{s3}storage: {{ endpoint: 'http://127.0.0.1:9000' }}\n"
        ));
        assert!(e.contains("storage.allowHttp"), "{e}");
    }

    #[test]
    fn several_errors_are_reported_together() {
        let e = err(&GOOD
            .replace("concurrency: 4", "concurrency: 0")
            .replace("file://", "nope://"));
        assert!(e.contains("target:") && e.contains("concurrency:"), "{e}");
    }

    #[test]
    fn every_bound_is_enforced_with_the_field_named() {
        for (edit, field) in [
            (
                ("concurrency: 4", "concurrency: 1000000000"),
                "concurrency: must be at most 65536",
            ),
            (
                ("concurrency: 4", "concurrency: 65537"),
                "concurrency: must be at most 65536",
            ),
            (
                ("objectSize: 1MiB", "objectSize: 100TiB"),
                "objectSize: must be at most 5TiB",
            ),
            (
                ("objectSize: 1MiB", "objectSize: 18446744073709551615"),
                "objectSize: must be at most 5TiB",
            ),
            (
                ("max: 64KiB", "max: 6TiB"),
                "dataset.size.uniform.max: must be at most 5TiB",
            ),
            (
                ("objects: 10", "objects: 100000001"),
                "dataset.objects: must be at most 100000000",
            ),
            (
                (
                    "objects: 10, size: { uniform: { min: 4KiB, max: 64KiB } }",
                    "objects: 1000000, size: 5TiB",
                ),
                "dataset.objects: 1000000 objects of up to 5TiB",
            ),
            (
                ("duration: 10s", "duration: 31d"),
                "duration: must be at most 30days",
            ),
            (
                ("duration: 10s", "totalOps: 1000000000001"),
                "totalOps: must be at most",
            ),
            (
                ("weight: 60", "weight: 1000001"),
                "ops[0].weight: must be at most 1000000",
            ),
        ] {
            let e = err(&GOOD.replace(edit.0, edit.1));
            assert!(e.contains(field), "{edit:?}: {e}");
        }
        for (extra, field) in [
            (
                "rateLimit: 0.0001",
                "rateLimit: must be between 0.001 and 10000000",
            ),
            ("rateLimit: 1e-20", "rateLimit: must be between"),
            ("rateLimit: 20000000", "rateLimit: must be between"),
            ("rateLimit: .inf", "rateLimit: must be a positive number"),
            ("rateLimit: 0", "rateLimit: must be a positive number"),
            (
                "read: {chunkSize: 2GiB}",
                "read.chunkSize: must be at most 1GiB",
            ),
            (
                "read: {adaptive: {initial: 1MiB, max: 2GiB}}",
                "read.adaptive.max: must be at most 1GiB",
            ),
            (
                "read: {adaptive: {initial: 1MiB, max: 2MiB, factor: 1000}}",
                "read.adaptive.factor: must be at most 16",
            ),
            (
                "rangeEngine: {chunkSize: 2GiB}",
                "rangeEngine.chunkSize: must be at most 1GiB",
            ),
            (
                "rangeEngine: {rangeTimeout: 400d}",
                "rangeEngine.rangeTimeout: must be at most 30days",
            ),
            (
                "rangeEngine: {maxConcurrentRanges: 5000}",
                "rangeEngine.maxConcurrentRanges: must be at most 1024",
            ),
            (
                "storage: {requestTimeout: 365d}",
                "storage.requestTimeout: must be at most 30days",
            ),
            (
                "write: {partSize: 6GiB}",
                "write.partSize: must be at most 5GiB",
            ),
            (
                "write: {multipartThreshold: 6TiB}",
                "write.multipartThreshold: must be at most 5TiB",
            ),
            (
                "write: {maxObjects: 100000001}",
                "write.maxObjects: must be at most 100000000",
            ),
        ] {
            let e = err(&format!("{GOOD}{extra}\n"));
            assert!(e.contains(field), "{extra}: {e}");
        }
        // Whole-object reads of objects larger than a buffer may be.
        let big = GOOD.replace("size: { uniform: { min: 4KiB, max: 64KiB } }", "size: 2GiB");
        let e = err(&format!("{big}read: {{wholeObject: true}}\n"));
        assert!(
            e.contains("read.wholeObject: reads each object into one buffer"),
            "{e}"
        );
        let e = err(&format!("{big}rangeEngine: {{enabled: true}}\n"));
        assert!(
            e.contains("rangeEngine.enabled: fetches each object into one buffer"),
            "{e}"
        );
        // Histograms of 65536 tasks x 3 ops + TTFB pass the memory bound.
        let e = err(&GOOD.replace("concurrency: 4", "concurrency: 65536"));
        assert!(e.contains("concurrency: 65536 tasks x"), "{e}");
        // The bounds themselves are accepted.
        let ok = GOOD
            .replace("concurrency: 4", "concurrency: 4096")
            .replace("duration: 10s", "duration: 30d")
            .replace("objectSize: 1MiB", "objectSize: 5TiB");
        Workload::from_yaml(&format!("{ok}rateLimit: 0.001\n")).unwrap();
    }

    #[test]
    fn paths_that_leave_the_target_are_refused() {
        let e = err(&GOOD.replace("file:///tmp/bench", "file:///data/bench/../../../etc"));
        assert!(
            e.contains("target: `file:///data/bench/../../../etc`: `..`"),
            "{e}"
        );
        for prefix in ["../../../etc/", "/etc/", "a/../../b/", "./x/", "a\\b/"] {
            let e = err(&format!("{GOOD}dataset: {{prefix: '{prefix}'}}\n").replace(
                "dataset: { objects: 10, size: { uniform: { min: 4KiB, max: 64KiB } } }\n",
                "",
            ));
            assert!(e.contains("dataset.prefix:"), "{prefix}: {e}");
        }
        let ok = GOOD.replace("objects: 10,", "objects: 10, prefix: runs/a.b/,");
        Workload::from_yaml(&ok).unwrap();
    }

    #[test]
    fn hostile_files_are_refused_fast_with_bounded_messages() {
        // An alias bomb: a 10,000-item leaf referenced through alias levels.
        let mut bomb = String::from("a: &a [");
        bomb.push_str(&vec!["x"; 10_000].join(","));
        bomb.push_str(
            "]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
        );
        let t = std::time::Instant::now();
        let e = err(&format!("{GOOD}objectSize: *c\n{bomb}"));
        assert!(e.contains("YAML aliases"), "{e}");
        // 100,000 nested brackets.
        let deep = format!(
            "{GOOD}seed: {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let e = err(&deep);
        assert!(e.contains("nested more than 32 levels"), "{e}");
        let e = err(&"#".repeat(2 << 20));
        assert!(e.contains("a workload file is at most 1MiB"), "{e}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        // A 500 KB bad value is not echoed whole.
        let e = err(&GOOD.replace("file:///tmp/bench", &"x".repeat(500_000)));
        assert!(e.len() < 1000, "{} bytes: {}", e.len(), &e[..200]);
        assert!(e.contains("more bytes") || e.contains("left out"), "{e}");
        let e = err(&GOOD.replace(
            "concurrency: 4",
            &format!("concurrency: {}", "9".repeat(500_000)),
        ));
        assert!(
            e.starts_with("concurrency") && e.len() < 1000,
            "{}",
            e.len()
        );
        // Duplicate keys and invalid UTF-8.
        let e = err(&GOOD.replace("concurrency: 4", "concurrency: 4\nconcurrency: 5"));
        assert!(e.contains("duplicate field `concurrency`"), "{e}");
        let mut bytes = GOOD.as_bytes().to_vec();
        bytes.extend_from_slice(b"seed: \xff\xfe\n");
        let e = Workload::from_bytes(&bytes).unwrap_err().to_string();
        assert!(e.contains("not UTF-8") && e.contains("line 11"), "{e}");
        // What looks like an alias or a quote inside a plain scalar is not one.
        let ok = GOOD.replace("objects: 10,", "objects: 10, prefix: it's*fine/,");
        Workload::from_yaml(&ok).unwrap();
    }

    #[test]
    fn null_means_the_default_where_the_crd_allows_null() {
        let w = Workload::from_yaml(&format!(
            "{GOOD}rangeEngine: {{chunkSize: null, minSplitSize: ~}}\nwrite: {{partSize: null, multipartThreshold: null}}\n"
        ))
        .unwrap();
        assert_eq!(w.range_engine, RangeEngineSpec::default());
        assert_eq!(w.write, WriteSpec::default());
        let w = Workload::from_yaml(&GOOD.replace(
            "objectSize: 1MiB",
            "objectSize: { lognormal: { mean: 1MiB, stdDev: 256KiB, min: null, max: null } }",
        ))
        .unwrap();
        assert_eq!(w.object_size.max(), 64 << 30);
        // The same through JSON, as the operator decodes runs.
        let mut v = serde_json::to_value(&w).unwrap();
        v["rangeEngine"]["chunkSize"] = serde_json::Value::Null;
        let back: Workload = serde_json::from_value(v).unwrap();
        assert_eq!(back.range_engine.chunk_size, ByteSize::mib(8));
    }

    #[test]
    fn target_uris_parse() {
        assert_eq!(
            "s3://b/some/prefix".parse::<TargetUri>().unwrap(),
            TargetUri::S3 {
                bucket: "b".into(),
                prefix: "some/prefix/".into()
            }
        );
        assert_eq!(
            "az://c".parse::<TargetUri>().unwrap(),
            TargetUri::Azure {
                container: "c".into(),
                prefix: "".into()
            }
        );
        assert!("gs:///x"
            .parse::<TargetUri>()
            .unwrap_err()
            .contains("bucket or container name is missing"));
        assert_eq!(
            "direct:///mnt/x".parse::<TargetUri>().unwrap(),
            TargetUri::Direct {
                root: "/mnt/x".into()
            }
        );
    }
}
