//! The workload: what a benchmark does, as users write it.
//!
//! One type serves the standalone worker's YAML file and the `spec.workload` of a
//! `BenchmarkRun`, so both have one schema. Keys are camelCase; unknown keys are errors.
//! [`Workload::from_yaml`] parses *and* validates, and every error names the field.
//!
//! The types are here; the rest has one file each: `size` (the object size and its
//! hand-written serde and schema), `defaults`, [`limits`], `uri` (the target URI parser),
//! `parse` (bounded YAML parsing), `validate` (the bounds and cross-field checks), `storage`
//! (the checks of `storage`: endpoints and TLS) and `error`.

mod block;
pub mod checkpoint;
mod data;
mod defaults;
mod error;
pub mod limits;
mod parse;
mod size;
mod storage;
#[cfg(test)]
mod tests;
pub mod training;
pub mod training_search;
mod uri;
mod validate;

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::{ByteSize, HumanDuration};
use defaults::null_is_default;

// In a leaf module, so `units` and `stats` quote user input without depending on `spec`.
pub use crate::quote::clip;
pub use block::{BlockSizeWeight, BlockSpec, IoEngine};
pub use checkpoint::{CheckpointMode, CheckpointPreset, CheckpointSpec};
pub use data::{DataSpec, MAX_COMPRESS_RATIO, MAX_DEDUP_RATIO};
pub use error::{FieldError, SpecError};
pub use parse::precheck;
pub use size::{SizeDistribution, SizeSpec};
pub use training::{TrainingPreset, TrainingShape, TrainingSpec};
pub use training_search::TrainingSearch;
pub use uri::TargetUri;
pub use validate::{histogram_bytes_per_task, mix_ops};

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
    /// Run the workload this long before the measured stage (e.g. `10s`, whole seconds up
    /// to 10m, at most `duration`): caches fill and connections open, and the operations
    /// that finish in it are left out of the results, reported apart in the summary's
    /// `warmup` and marked in its timeline (fio's `ramp_time`). `duration` is the measured
    /// stage's length, so the run takes `warmup` + `duration`. Needs `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<HumanDuration>,
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
    /// What written data is made of: unique and incompressible unless `dedupRatio` or
    /// `compressRatio` ask otherwise (objects and blocks alike).
    #[serde(default, skip_serializing_if = "DataSpec::is_default")]
    pub data: DataSpec,
    /// Concurrent ranged GETs for large objects on object storage (off by default).
    #[serde(default)]
    pub range_engine: RangeEngineSpec,
    /// Stop the run early when errors pass a limit. Unset: errors are counted and the run goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_budget: Option<ErrorBudget>,
    /// End the measured stage early once throughput has held steady (warp's autoterm): every
    /// second of the last `window` within `bandPercent` of their mean. `duration` stays the
    /// longest it may run; the summary's `stoppedBy` says `stable: ...` when this ended it,
    /// and its `stable` who decided, when, and on what figures. In a cluster run of several
    /// workers the run decides, from all workers' merged throughput, and stops every worker
    /// at the same instant (docs/SWEEPS.md, "Stop when stable").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_when_stable: Option<StableSpec>,
    /// Seed for every random choice (op mix, keys, sizes, data). Same seed, same sequence.
    #[serde(default = "defaults::seed")]
    pub seed: u64,
    /// Block I/O inside large files or a raw block device, as fio does (ops `read` and
    /// `write`). Unset: the target is a bucket of objects (`get`, `put`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockSpec>,
    /// Training reads: epochs of a data loader feeding emulated accelerators, shaped like
    /// MLPerf Storage (docs/TRAINING.md). With it, `ops` is `[{op: get}]` and the run's
    /// length is `training.epochs` (`duration` may cap it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training: Option<TrainingSpec>,
    /// Checkpoints: every rank writes its shard at one instant, then restores it, shaped
    /// like MLPerf Storage's checkpointing (docs/TRAINING.md). With it, `ops` is
    /// `[{op: put}]` and the run's length is `checkpoint.repeats`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointSpec>,
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
    /// Block workloads (`block`): read one block at an offset inside a file or device.
    Read,
    /// Block workloads (`block`): overwrite one block in place inside a file or device.
    Write,
}

impl OpKind {
    /// Every op, in [`OpKind::index`] order.
    pub const ALL: [OpKind; 7] = [
        OpKind::Get,
        OpKind::Put,
        OpKind::Stat,
        OpKind::List,
        OpKind::Delete,
        OpKind::Read,
        OpKind::Write,
    ];

    /// The name as written in a workload (`get`, `put`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Put => "put",
            OpKind::Stat => "stat",
            OpKind::List => "list",
            OpKind::Delete => "delete",
            OpKind::Read => "read",
            OpKind::Write => "write",
        }
    }

    /// Whether the op is block I/O inside a file or device (`read`, `write`).
    pub fn is_block(self) -> bool {
        matches!(self, OpKind::Read | OpKind::Write)
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
    /// Which object each `get` and `stat` reads: `random` (uniform), `sequential` (one
    /// pass after another over the dataset in key order, shared by all tasks, as a file
    /// reader such as fio walks its files), or skewed as real workloads read: `zipf` (see
    /// `zipf`) or `hotspot` (see `hotspot`).
    #[serde(default)]
    pub access: DatasetAccess,
    /// With `access: zipf`: the skew (default exponent 0.99, as YCSB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipf: Option<ZipfSpec>,
    /// With `access: hotspot`: which share of the reads goes to which share of the objects
    /// (default 80% of the reads on 20% of the objects, as YCSB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hotspot: Option<HotspotSpec>,
}

/// Order in which reads visit a dataset's objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DatasetAccess {
    /// Each read picks an object uniformly at random.
    #[default]
    Random,
    /// Reads walk the dataset in key order, wrapping around.
    Sequential,
    /// The object of popularity rank k is read with probability proportional to
    /// 1/k^exponent.
    Zipf,
    /// A share of the reads on a share of the objects, uniformly within each part.
    Hotspot,
}

/// The skew of `access: zipf`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZipfSpec {
    /// Above 0 and at most 10; YCSB uses 0.99, larger is more skewed.
    #[serde(default = "defaults::zipf_exponent")]
    pub exponent: f64,
}

/// The shares of `access: hotspot`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HotspotSpec {
    /// Share of the reads on the hot objects, in percent (0 to 100, exclusive).
    #[serde(default = "defaults::hot_reads_percent")]
    pub reads_percent: f64,
    /// Share of the objects that are hot, in percent (0 to 100, exclusive).
    #[serde(default = "defaults::hot_objects_percent")]
    pub objects_percent: f64,
}

/// Which dataset object each read visits, with its parameters ([`DatasetSpec::object_access`]).
/// The skewed forms rank the objects in an order drawn from the workload's `seed` (not key
/// order, so hot objects are spread over the keyspace), and are reproducible with it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ObjectAccess {
    /// Uniform.
    Random,
    /// In key order, wrapping around.
    Sequential,
    /// Rank k read with probability proportional to 1/k^exponent.
    Zipf {
        /// The skew.
        exponent: f64,
    },
    /// `reads_percent` of the reads on `objects_percent` of the objects.
    Hotspot {
        /// Share of the reads on the hot objects, percent.
        reads_percent: f64,
        /// Share of the objects that are hot, percent.
        objects_percent: f64,
    },
}

impl DatasetSpec {
    /// The read distribution, with its parameters (defaults where the workload gives none).
    pub fn object_access(&self) -> ObjectAccess {
        match self.access {
            DatasetAccess::Random => ObjectAccess::Random,
            DatasetAccess::Sequential => ObjectAccess::Sequential,
            DatasetAccess::Zipf => ObjectAccess::Zipf {
                exponent: self
                    .zipf
                    .as_ref()
                    .map_or_else(defaults::zipf_exponent, |z| z.exponent),
            },
            DatasetAccess::Hotspot => {
                let h = self.hotspot.clone().unwrap_or(HotspotSpec {
                    reads_percent: defaults::hot_reads_percent(),
                    objects_percent: defaults::hot_objects_percent(),
                });
                ObjectAccess::Hotspot {
                    reads_percent: h.reads_percent,
                    objects_percent: h.objects_percent,
                }
            }
        }
    }
}

impl std::fmt::Display for ObjectAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectAccess::Random => write!(f, "random"),
            ObjectAccess::Sequential => write!(f, "sequential"),
            ObjectAccess::Zipf { exponent } => write!(f, "zipf (exponent {exponent})"),
            ObjectAccess::Hotspot {
                reads_percent,
                objects_percent,
            } => write!(
                f,
                "hotspot ({reads_percent}% of reads on {objects_percent}% of objects)"
            ),
        }
    }
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

/// How objects are read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// Experiment only (off by default, like `rangeEngine.preStat`): send a HEAD (stat) for
    /// the object before each GET, inside the GET's latency and TTFB and counted in its
    /// requests, as a client with that regression does (docs/REPRODUCTIONS.md, study 001).
    /// The summary's get figures count the HEADs (`heads`). Never needed: a GET learns the
    /// object's size without it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub head_before_get: bool,
    /// Reuse read buffers (default true): a GET borrows an aligned buffer from a pool and
    /// gives it back, so at most one exists per operation in flight. `false` is an experiment
    /// (a client that allocates per read, docs/REPRODUCTIONS.md study 004): every GET
    /// allocates, zeroes and frees a buffer of its read's size, as a client without a pool
    /// does. The summary counts the buffers allocated (`ops.get.buffersAllocated`). Applies
    /// where reads land in a buffer: `file://`, `direct://`, and object storage with
    /// `wholeObject` or the range engine (streamed and ranged GETs discard the bodies the
    /// HTTP client hands over).
    #[serde(default = "defaults::yes", skip_serializing_if = "defaults::is_true")]
    pub buffer_pool: bool,
}

impl Default for ReadSpec {
    fn default() -> Self {
        Self {
            chunk_size: None,
            whole_object: false,
            adaptive: None,
            verify: false,
            head_before_get: false,
            buffer_pool: true,
        }
    }
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
    /// Deprecated: use `data.compressRatio`. Fraction of each block that is zeros, 0 to 1;
    /// `c` is read as `data.compressRatio: 1/(1-c)` (kept so older workloads and summaries
    /// still read).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
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
    /// Several endpoints of the same storage (the gateway nodes of a cluster), instead of
    /// `endpoint`. Requests are spread round robin per operation: the measured stage's
    /// operation number i (its ticket, whichever task runs it) goes to endpoint i mod n, so
    /// with `totalOps` every endpoint gets its exact share; the prepare and cleanup stages
    /// take turns the same way. Each endpoint has clients (connection pools) of its own, and
    /// the summary's `endpoints` breaks operations, requests, errors and latency down per
    /// endpoint (warp's per-host analysis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = limits::MAX_ENDPOINTS))]
    pub endpoints: Option<Vec<String>>,
    /// TLS for `https://` endpoints: the CA to verify their certificates with.
    #[serde(default, skip_serializing_if = "TlsSpec::is_default")]
    pub tls: TlsSpec,
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
    /// Sign the SHA-256 of every PUT body (S3 SigV4 signed payload). Off by default: a
    /// PUT is then sent as `UNSIGNED-PAYLOAD`, and the client spends no CPU hashing what a
    /// benchmark writes (the hash was half of a 1 MiB PUT's client CPU). Turn on for an
    /// endpoint that refuses unsigned payloads, or to measure the signing cost.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sign_payload: bool,
}

/// How `https://` endpoints are verified. By default against the system's roots; a private
/// CA is given by reference (a file here; a Secret or ConfigMap key under the operator).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsSpec {
    /// PEM file of the CA certificate(s) that signed the endpoints' certificates, trusted
    /// besides the system's roots. Under the operator, set the run's `caRef` instead: the
    /// Secret or ConfigMap key is mounted into the workers and this path set to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = limits::MAX_PATH_LEN))]
    pub ca_file: Option<String>,
    /// Do not verify certificates at all (any certificate of any host is accepted). For a
    /// test rig only: the worker warns on stderr at start, and the summary and its table say
    /// `tlsVerificationSkipped`. Excludes `caFile`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
}

impl TlsSpec {
    fn is_default(&self) -> bool {
        *self == TlsSpec::default()
    }
}

impl StorageSpec {
    /// The endpoints requests go to, in order: `endpoints`, else `endpoint`, else none (the
    /// service's default endpoint).
    pub fn endpoint_list(&self) -> Vec<String> {
        match (&self.endpoints, &self.endpoint) {
            (Some(list), _) => list.clone(),
            (None, Some(e)) => vec![e.clone()],
            (None, None) => vec![],
        }
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

impl Workload {
    /// The parsed target URI. Only fails on a workload that skipped [`Workload::validate`].
    pub fn target_uri(&self) -> Result<TargetUri, String> {
        self.target.parse()
    }

    /// Size of dataset objects.
    pub fn dataset_size(&self) -> &SizeSpec {
        self.dataset.size.as_ref().unwrap_or(&self.object_size)
    }

    /// Whether this run skips certificate verification (`storage.tls.insecureSkipVerify` on
    /// a network target; local targets have no certificates to skip).
    pub fn skips_tls_verification(&self) -> bool {
        self.storage.tls.insecure_skip_verify && !self.target_uri().is_ok_and(|u| u.is_local())
    }

    /// Weight of one op in the mix (0 when absent).
    pub fn weight_of(&self, op: OpKind) -> u64 {
        self.ops
            .iter()
            .filter(|w| w.op == op)
            .map(|w| w.weight as u64)
            .sum()
    }

    /// The data written, with the deprecated `write.compressibility` folded into
    /// `compressRatio` (validation refuses both at once).
    pub fn data(&self) -> DataSpec {
        let c = self.write.compressibility;
        if c > 0.0 && self.data.compress_ratio == 1.0 {
            let ratio = 1.0 / (1.0 - c.min(1.0 - 1.0 / MAX_COMPRESS_RATIO));
            return DataSpec {
                compress_ratio: ratio,
                ..self.data.clone()
            };
        }
        self.data.clone()
    }
}
