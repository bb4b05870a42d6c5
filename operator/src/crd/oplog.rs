//! `spec.oplog`: record every operation of every worker and keep each worker's op-log with
//! the run's results, as an object beside its data (`<uri><namespace>/<run>/<run UID>/<worker>.oplog.gz`). The
//! result ConfigMaps (at most 1 MiB) are too small for logs, so the workers upload them
//! through the run's own target backend: the URI has the target's scheme, and is written
//! with the run's endpoint, TLS settings and credentials. [`crate::oplog`] checks the rest.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the workers' op-logs are stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OplogSpec {
    /// A directory of the workload's target scheme, e.g. `s3://bucket/oplogs/`: each worker
    /// uploads its log as
    /// `<uri><namespace>/<run>/<run UID>/<worker>.oplog.gz` after its measured stage.
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = r"^(s3|gs|az|file|direct)://.+")
    )]
    pub uri: String,
}

/// Where a worker's op-log is, in its `status.workers[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerOplog {
    /// The object holding the log; absent when the upload failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Records written (warm-up ops included).
    pub records: u64,
    /// Records lost because the worker's log writer fell behind (the run never waits for it).
    pub dropped: u64,
    /// Why the upload failed; the worker's result is collected all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
