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
    pub target: String,
    /// How long the measured stage runs, e.g. `30s` or `5m`. Give this or `totalOps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<HumanDuration>,
    /// Stop after this many operations instead of after a duration. Give this or `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub total_ops: Option<u64>,
    /// Operations in flight at once (tasks issuing operations).
    #[serde(default = "defaults::concurrency")]
    #[schemars(range(min = 1, max = 65536))]
    pub concurrency: u32,
    /// The operation mix: each operation is picked with probability weight / sum of weights.
    #[schemars(length(min = 1))]
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
    #[schemars(range(min = 0.001))]
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
    pub weight: u32,
}

/// An object size: fixed (`1MiB`) or drawn from a distribution.
#[derive(Clone, Debug, PartialEq, JsonSchema)]
#[serde(untagged)]
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
        #[serde(default = "defaults::lognormal_min")]
        min: ByteSize,
        #[serde(default = "defaults::lognormal_max")]
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

impl SizeSpec {
    pub fn fixed(size: ByteSize) -> Self {
        SizeSpec::Fixed(size)
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
    pub prefix: String,
    /// Number of objects in the dataset.
    #[serde(default = "defaults::objects")]
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
    pub initial: ByteSize,
    /// Multiply the chunk size by this after each chunk.
    #[serde(default = "defaults::growth")]
    #[schemars(range(min = 1.0))]
    pub factor: f64,
    /// Largest chunk size.
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
    #[serde(default = "defaults::multipart_threshold")]
    pub multipart_threshold: ByteSize,
    /// Object storage: size of each multipart part.
    #[serde(default = "defaults::part_size")]
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
    #[schemars(range(min = 1))]
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

/// The range engine: large objects fetched as concurrent byte ranges into one buffer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RangeEngineSpec {
    /// Off by default: measured 27-30% slower where bandwidth per connection is not the limit.
    #[serde(default)]
    pub enabled: bool,
    /// Only objects at least this large are split.
    #[serde(default = "defaults::min_split")]
    pub min_split_size: ByteSize,
    /// Size of each range.
    #[serde(default = "defaults::range_chunk")]
    pub chunk_size: ByteSize,
    /// Ranges in flight per object.
    #[serde(default = "defaults::max_ranges")]
    #[schemars(range(min = 1, max = 1024))]
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
    #[schemars(range(max = 100))]
    pub max_retries: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

mod defaults {
    use super::*;
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
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<FieldError>),
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
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl Workload {
    /// Parse a workload from YAML (or JSON) and validate it.
    pub fn from_yaml(text: &str) -> Result<Self, SpecError> {
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
        for (i, w) in self.ops.iter().enumerate() {
            if self.ops[..i].iter().any(|o| o.op == w.op) {
                bad(
                    &format!("ops[{i}].op"),
                    format!("`{}` is listed twice", w.op),
                );
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
            let align = crate::targets::DIRECT_ALIGN as u64;
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
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
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
