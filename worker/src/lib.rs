//! benchrun's storage benchmark engine.
//!
//! The same library runs inside a worker pod scheduled by the operator and standalone from a
//! YAML file (`benchrun-worker run workload.yaml`).
//!
//! # Layout
//! [`units`], [`spec`], [`stats`] and [`matrix`] are re-exported from `benchrun_api`, the
//! crate of the types the operator shares.
//!
//! - [`units`]: byte sizes (`4MiB`) and durations (`30s`) as users write them
//! - [`spec`]: the workload type, shared with the operator's CRD, and its validation
//! - [`targets`]: the storage trait and one module per backend (`file`, `direct`, object stores)
//! - [`volume`]: block workloads' files or raw device: checks, layout, page cache, offsets
//! - [`datagen`]: the data PUT writes and verified GETs check
//! - [`engine`]: prepare, the measured stage (op mix, scheduling, recording), cleanup
//! - [`stats`]: histograms, the summary and its exact merge
//! - [`metrics`] and [`server`]: live Prometheus metrics and the HTTP endpoint
//! - [`report`] and [`progress`]: what a person sees on a terminal; `report` also renders
//!   Markdown tables and SVG charts of summaries
//! - [`figures`]: the figures of one op of a summary, shared by `report` and `compare`
//! - [`compare`]: two summaries compared, with significance tests on their histograms
//! - [`oplog`]: every op of a run recorded (`run --oplog`): the format, writer and reader
//! - [`replay`]: an op-log's ops issued again with their timing (`replay`)
//! - [`shutdown`]: Ctrl-C and SIGTERM
//! - [`exit`]: the exit codes, one table with the kubectl plugin's
//! - [`matrix`]: parameter sweeps: one workload per combination of parameter values
//! - [`sweep`]: a matrix run standalone, combination by combination, and its table
//! - [`checkpoint`]: checkpoint workloads: every rank saves its shard at one instant, then restores it
//! - [`training`]: training workloads: data-loader epochs feeding emulated accelerators (AU)
//! - [`probe`]: `probe-io`: a volume's first 4 KiB O_DIRECT write and read (the operator's control-plane runs)
//! - [`agent`]: the worker in a pod, started and collected by the operator over HTTP
//! - [`cli`]: the clap options of `benchrun-worker`; [`overrides`]: its `run --set key=value`

#![warn(missing_docs)]

// The shared types live in the api crate (which the operator uses without the engine);
// re-exported so `crate::spec::X` and `benchrun_worker::spec::X` keep working.
pub use benchrun_api::{data_errors, matrix, size_buckets, spec, stats, summary_read, units};

pub mod agent;
pub mod checkpoint;
pub mod cli;
pub mod compare;
pub mod datagen;
pub mod engine;
pub mod exit;
pub mod figures;
pub mod metrics;
pub mod oplog;
pub mod overrides;
pub mod probe;
pub mod progress;
pub mod replay;
pub mod report;
pub mod server;
pub mod shutdown;
pub mod sweep;
pub mod targets;
pub mod training;
pub mod volume;

pub use engine::{Dataset, Engine, EngineError};
pub use metrics::Metrics;
pub use spec::{OpKind, SpecError, Workload};
pub use stats::Summary;
