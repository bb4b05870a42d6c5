//! benchrun's shared API: the types the worker and the operator exchange.
//!
//! The operator needs the workload spec (it is part of the `BenchmarkRun` CRD), the summary
//! and its exact merge, sweeps and the agent's wire format, but not the engine or any storage
//! client; this crate holds those types alone, so the operator does not build the worker.
//!
//! # Layout
//! - [`quote`]: user input quoted in messages, cut to a bounded length
//! - [`units`]: byte sizes (`4MiB`) and durations (`30s`) as users write them
//! - [`spec`]: the workload type, shared with the operator's CRD, and its validation
//! - [`latency`]: the latency histogram and its bounded serialization
//! - [`hold_io`]: the I/O a control-plane pod keeps running on its volume during the
//!   lifecycle's snapshot, clone and expand (`controlPlane.busy`), as its termination message
//! - [`checkpoint`]: a checkpoint run's per-rank save and restore times and their exact merge
//! - [`training`]: a training run's AU, epoch and data-wait figures and their exact merge
//! - [`training_search`]: a maximum-accelerators search: its answer and probes, and the pure
//!   search (doubling, then bisection) the worker and the operator both drive
//! - [`volume`]: a block workload's engine, depth and page-cache figures (a leaf)
//! - [`timeline`]: the per-second timeline, coarser later in long runs, and its exact merge
//! - [`stats`]: histograms, the summary and its exact merge
//! - [`summary_read`]: reading every summary format version, refusing unknown ones by number;
//!   the summary's JSON Schema
//! - [`significance`]: the rank-sum, exceedance and Kolmogorov-Smirnov tests of two runs
//! - [`verdict`]: the one rule of "slower than the baseline", for `compare --fail-if-slower`
//!   and the operator's `Regressed`, each verdict with its effect size, interval and baselines
//! - [`size_buckets`]: figures per object-size bucket, for workloads whose sizes vary
//! - [`change`]: relative changes and the median repeat, for every comparison table
//! - [`matrix`]: parameter sweeps: one workload per combination of parameter values
//! - [`stable`]: the `stopWhenStable` rule, for one worker and for a run's merged seconds
//! - [`agent`]: the request and response bodies of the worker agent's HTTP endpoint
//! - [`data_errors`]: the first few data errors of a run (corrupt, short), named by place
//! - [`metric_family`]: what a process exports on `/metrics`, as data, for the chart's checks

#![warn(missing_docs)]

pub mod agent;
pub mod change;
pub mod checkpoint;
pub mod data_errors;
pub mod hold_io;
pub mod latency;
pub mod matrix;
pub mod metric_family;
pub mod quote;
pub mod significance;
pub mod size_buckets;
pub mod spec;
pub mod stable;
pub mod stats;
pub mod summary_read;
pub mod timeline;
pub mod training;
pub mod training_search;
pub mod units;
pub mod verdict;
pub mod volume;

pub use spec::{OpKind, SpecError, Workload};
pub use stats::Summary;
