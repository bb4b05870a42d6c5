//! The kinds of run a `BenchmarkRun` can be: the one list that per-kind rules and the
//! conformance suite (`operator/tests/conformance.rs`) enumerate.
//!
//! benchrun's promises (it deletes only what it owns, it writes no sector twice, a verdict
//! means what it says, bad input is refused naming the field) must hold for every kind. Each
//! capability added so far brought its own code for the same concerns, and several broke a
//! promise again; the suite runs every kind in [`RunKind::ALL`] through the same checks, and
//! its case table is an exhaustive `match`, so a kind added here without a case does not
//! compile the suite.

use std::fmt;

use benchrun_api::spec::TargetUri;
use kube::ResourceExt;

use super::{is_control_plane_only, BenchmarkRun};

/// What a run does, as far as the promises are concerned: which objects it creates, where it
/// writes, and which keys of the spec it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RunKind {
    /// Objects on object storage (`s3://`, `gs://`, `az://`).
    Object,
    /// A `file://` directory (object ops or block I/O in files), usually a claim per worker.
    VolumeFile,
    /// A `direct://` directory: the same with O_DIRECT.
    VolumeDirect,
    /// A raw block device: a `volumeMode: Block` claim per worker.
    VolumeBlock,
    /// `spec.matrix`: one child run per combination of parameter values.
    Matrix,
    /// `training.search.maxAccelerators`: child runs probing accelerator counts.
    Search,
    /// `workload.training`: epochs of a data loader feeding emulated accelerators.
    Training,
    /// `workload.checkpoint`: every rank saves its shard, then restores it.
    Checkpoint,
    /// `spec.controlPlane` alone: claims provisioned, attached, snapshotted, deleted.
    ControlPlane,
    /// `spec.controlPlane` beside a `workload`: the lifecycles run while the workers do.
    ControlPlaneUnderLoad,
    /// A run a `BenchmarkSchedule` created from its template (owned by the schedule).
    Scheduled,
}

impl RunKind {
    /// Every kind, in declaration order.
    pub const ALL: [RunKind; 11] = [
        RunKind::Object,
        RunKind::VolumeFile,
        RunKind::VolumeDirect,
        RunKind::VolumeBlock,
        RunKind::Matrix,
        RunKind::Search,
        RunKind::Training,
        RunKind::Checkpoint,
        RunKind::ControlPlane,
        RunKind::ControlPlaneUnderLoad,
        RunKind::Scheduled,
    ];

    /// The kind of `run`. Where a run is several things at once, the outermost decides: a
    /// schedule's run of a matrix is [`RunKind::Scheduled`], a matrix of training runs is
    /// [`RunKind::Matrix`], a search is [`RunKind::Search`] although it trains.
    pub fn of(run: &BenchmarkRun) -> RunKind {
        let spec = &run.spec;
        let w = &spec.workload;
        if run
            .owner_references()
            .iter()
            .any(|o| o.kind == "BenchmarkSchedule")
        {
            RunKind::Scheduled
        } else if spec.matrix.is_some() {
            RunKind::Matrix
        } else if spec.control_plane.is_some() {
            if is_control_plane_only(w) {
                RunKind::ControlPlane
            } else {
                RunKind::ControlPlaneUnderLoad
            }
        } else if let Some(t) = &w.training {
            if t.search.as_ref().is_some_and(|s| s.max_accelerators) {
                RunKind::Search
            } else {
                RunKind::Training
            }
        } else if w.checkpoint.is_some() {
            RunKind::Checkpoint
        } else if crate::resources::is_block_claim(run) {
            RunKind::VolumeBlock
        } else {
            match w.target_uri() {
                Ok(TargetUri::File { .. }) => RunKind::VolumeFile,
                Ok(TargetUri::Direct { .. }) => RunKind::VolumeDirect,
                // An unparsable target is refused by validation before anything runs; as a
                // kind it is an object run's (the schemes that are not local).
                _ => RunKind::Object,
            }
        }
    }

    /// The name used in messages and test output.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Object => "object",
            RunKind::VolumeFile => "volume-file",
            RunKind::VolumeDirect => "volume-direct",
            RunKind::VolumeBlock => "volume-block",
            RunKind::Matrix => "matrix",
            RunKind::Search => "search",
            RunKind::Training => "training",
            RunKind::Checkpoint => "checkpoint",
            RunKind::ControlPlane => "control-plane",
            RunKind::ControlPlaneUnderLoad => "control-plane-under-load",
            RunKind::Scheduled => "scheduled",
        }
    }

    /// Whether runs of this kind start worker pods (every kind but a control-plane run alone,
    /// whose probe pods are its lifecycles', and the parents of child runs).
    pub fn has_workers(self) -> bool {
        !matches!(
            self,
            RunKind::ControlPlane | RunKind::Matrix | RunKind::Search
        )
    }
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_kind_once() {
        // The exhaustive match fails to compile when a kind is added without a place here;
        // the count then checks ALL has it too.
        let index = |k: RunKind| match k {
            RunKind::Object => 0,
            RunKind::VolumeFile => 1,
            RunKind::VolumeDirect => 2,
            RunKind::VolumeBlock => 3,
            RunKind::Matrix => 4,
            RunKind::Search => 5,
            RunKind::Training => 6,
            RunKind::Checkpoint => 7,
            RunKind::ControlPlane => 8,
            RunKind::ControlPlaneUnderLoad => 9,
            RunKind::Scheduled => 10,
        };
        for (i, k) in RunKind::ALL.iter().enumerate() {
            assert_eq!(index(*k), i, "{k} out of place in RunKind::ALL");
        }
        let names: std::collections::BTreeSet<_> =
            RunKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), RunKind::ALL.len(), "two kinds share a name");
    }
}
