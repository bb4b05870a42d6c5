//! What serde cannot check: the bounds of [`limits`] and the cross-field rules.
//!
//! [`Workload::validate`] is a list of named checks, one concern each, in one file per
//! section: `run` (length, concurrency, rate, warm-up, stop and error budget), `ops` (the
//! mix), `dataset` (sizes, access and prefix), `read` (read settings and the range engine),
//! `write`, `storage`, `bounds` (the ceilings of [`limits`]) and `histogram` (the latency
//! histogram memory a task needs, which `bounds` caps). Each check pushes its errors to
//! `bad` (field path, message); their order is the order errors are reported in.

mod bounds;
mod dataset;
mod histogram;
mod ops;
mod read;
mod run;
mod storage;
mod write;

use super::*;

pub use histogram::{histogram_bytes_per_task, mix_ops};

impl Workload {
    /// Check what serde cannot: ranges, exclusive fields and cross-field rules.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errs = Vec::new();
        let mut push = |path: &str, message: String| {
            errs.push(FieldError {
                path: path.to_string(),
                message,
            })
        };
        let bad = &mut push;
        let uri = self.check_target(bad);
        self.check_run_length(bad);
        self.check_concurrency(bad);
        self.check_op_mix(bad);
        super::block::validate(self, uri.as_ref(), bad);
        super::training::validate(self, uri.as_ref(), bad);
        super::checkpoint::validate(self, uri.as_ref(), bad);
        self.check_op_needs(bad);
        self.check_sizes(bad);
        self.check_rate_limit(bad);
        self.check_read(bad);
        self.check_direct_alignment(uri.as_ref(), bad);
        self.check_buffer_pool(uri.as_ref(), bad);
        self.check_write(uri.as_ref(), bad);
        self.check_range_engine(bad);
        self.check_warmup(bad);
        self.check_stop_when_stable(bad);
        self.check_error_budget(bad);
        self.check_storage(bad);
        self.check_bounds(uri.as_ref(), bad);
        self.check_access(bad);
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }

    /// The checks that need the run's worker count, which a file alone does not give: the
    /// operator runs them for `workers.count` at admission and for a `perNode` run's nodes
    /// once placed, and each worker at its start (`workers`: the run's workers). A training
    /// run has a sample for every rank; a checkpoint's `restoreShift` moves every shard.
    pub fn check_workers(&self, workers: u32) -> Result<(), Vec<FieldError>> {
        let checks = [
            self.training.as_ref().map(|t| t.check_workers(workers)),
            self.checkpoint.as_ref().map(|c| c.check_workers(workers)),
        ];
        let errs: Vec<FieldError> = checks
            .into_iter()
            .flatten()
            .filter_map(Result::err)
            .map(|(path, message)| FieldError {
                path: path.to_string(),
                message,
            })
            .collect();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }

    /// `target` is a URI we know; the checks that depend on its kind get `None` if not.
    fn check_target(&self, bad: &mut impl FnMut(&str, String)) -> Option<TargetUri> {
        match self.target.parse::<TargetUri>() {
            Ok(u) => Some(u),
            Err(e) => {
                bad("target", e);
                None
            }
        }
    }
}
