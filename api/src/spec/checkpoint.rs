//! Checkpoint workloads: every rank writes its shard of a model's checkpoint at the same
//! instant, then reads it back (restore), as MLPerf Storage's checkpointing workload does.
//! Shaped like it, not an MLPerf submission.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{limits, OpKind, TargetUri, Workload};
use crate::units::ByteSize;

/// The most ranks of one worker (each is an OS thread).
pub const MAX_RANKS_PER_WORKER: u32 = 1024;
/// The most ranks a checkpoint may be split over.
pub const MAX_RANKS: u32 = 1 << 16;
/// The most repeats.
pub const MAX_REPEATS: u32 = 1000;
/// The largest checkpoint (`totalSize`): 1 PiB, fifty times the largest preset's (18 TB);
/// a bigger figure is a typo in the unit.
pub const MAX_TOTAL_SIZE: u64 = 1 << 50;
/// The largest object S3 (and GCS) stores: one shard on object storage is one object.
pub const MAX_SHARD_OBJECT: u64 = limits::MAX_OBJECT_SIZE;
/// The most parts of one multipart upload (S3's limit).
pub const MAX_PARTS: u64 = 10_000;

/// A model whose checkpoint size and rank count MLPerf Storage's checkpointing uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CheckpointPreset {
    /// Llama 3 8B: 105 GB over 8 ranks.
    #[serde(rename = "llama3-8b")]
    Llama3_8b,
    /// Llama 3 70B: 912 GB over 64 ranks.
    #[serde(rename = "llama3-70b")]
    Llama3_70b,
    /// Llama 3 405B: 5.29 TB over 512 ranks.
    #[serde(rename = "llama3-405b")]
    Llama3_405b,
    /// Llama 3 1T: 18 TB over 1,024 ranks.
    #[serde(rename = "llama3-1t")]
    Llama3_1t,
}

/// What a checkpoint run does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CheckpointMode {
    /// Save, drop the page cache, restore (verified).
    #[default]
    SaveAndRestore,
    /// Save only (the shards are left for a later `restore`).
    Save,
    /// Restore (verify) shards an earlier `save` of the same shape and seed wrote.
    Restore,
}

/// A checkpoint workload: the model's checkpoint (`preset`, or `totalSize` over `ranks`),
/// split into one shard per rank; this run has workers x `ranksPerWorker` ranks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckpointSpec {
    /// `llama3-8b`, `llama3-70b`, `llama3-405b` or `llama3-1t`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<CheckpointPreset>,
    /// The whole checkpoint's size (all ranks), e.g. `105GB`. At most 1PiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maximum" = MAX_TOTAL_SIZE))]
    pub total_size: Option<ByteSize>,
    /// Ranks the checkpoint is split over (each writes total / ranks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_RANKS))]
    pub ranks: Option<u32>,
    /// Ranks on each worker (default 8, a node's GPUs). Without `subset`, workers x
    /// ranksPerWorker must be `ranks`.
    #[serde(default = "default_ranks_per_worker")]
    #[schemars(range(min = 1, max = MAX_RANKS_PER_WORKER))]
    pub ranks_per_worker: u32,
    /// Write only this run's ranks' share of a larger model (MLPerf's subset mode): shards keep
    /// the model's size (total / ranks), and this run has fewer ranks than the model.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subset: bool,
    /// Save and restore this many times (figures per repeat and averaged).
    #[serde(default = "default_repeats")]
    #[schemars(range(min = 1, max = MAX_REPEATS))]
    pub repeats: u32,
    /// `saveAndRestore` (default), `save` or `restore`.
    #[serde(default)]
    pub mode: CheckpointMode,
    /// Restore on another rank: rank r reads back the shard rank (r + restoreShift) saved,
    /// modulo the run's ranks, as a job restarted on other nodes does. Set it to
    /// `ranksPerWorker` and every shard is restored by another worker than the one that
    /// wrote it, so no node restores from its own page cache. Default 0: each rank its own.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(max = MAX_RANKS))]
    pub restore_shift: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn default_ranks_per_worker() -> u32 {
    8
}

fn default_repeats() -> u32 {
    1
}

impl CheckpointSpec {
    /// The checkpoint's size and rank count (preset, overridden by the keys given).
    pub fn model(&self) -> Result<(u64, u32), (&'static str, String)> {
        const GB: u64 = 1_000_000_000;
        let (size, ranks) = match self.preset {
            Some(CheckpointPreset::Llama3_8b) => (105 * GB, 8),
            Some(CheckpointPreset::Llama3_70b) => (912 * GB, 64),
            Some(CheckpointPreset::Llama3_405b) => (5_290 * GB, 512),
            Some(CheckpointPreset::Llama3_1t) => (18_000 * GB, 1024),
            None => (0, 0),
        };
        let size = self.total_size.map_or(size, |b| b.0);
        let ranks = self.ranks.unwrap_or(ranks);
        if size == 0 {
            return Err((
                "totalSize",
                "give `totalSize` or a `preset` (llama3-8b, llama3-70b, llama3-405b, llama3-1t)"
                    .into(),
            ));
        }
        if ranks == 0 {
            return Err(("ranks", "give `ranks` or a `preset`".into()));
        }
        Ok((size, ranks))
    }

    /// Bytes of each rank's shard.
    pub fn shard_size(&self) -> Result<u64, (&'static str, String)> {
        let (size, ranks) = self.model()?;
        Ok(size.div_ceil(ranks as u64))
    }
}

/// The checks of a checkpoint workload, pushed to `bad`.
pub(super) fn validate(w: &Workload, uri: Option<&TargetUri>, bad: &mut dyn FnMut(&str, String)) {
    let Some(c) = &w.checkpoint else {
        return;
    };
    if w.training.is_some() || w.block.is_some() {
        bad(
            "checkpoint",
            "give `checkpoint` alone, not with `training` or `block`".into(),
        );
    }
    if w.ops.iter().any(|o| o.weight > 0 && o.op != OpKind::Put) {
        bad(
            "ops",
            "a checkpoint workload writes and reads back its shards: give `ops: [{op: put}]` only"
                .into(),
        );
    }
    if w.total_ops.is_some() || w.duration.is_some() {
        bad("duration", "a checkpoint run's length is its `repeats` of save and restore: give neither duration nor totalOps".into());
    }
    if !(1..=MAX_RANKS_PER_WORKER).contains(&c.ranks_per_worker) {
        bad(
            "checkpoint.ranksPerWorker",
            format!("must be within 1 .. {MAX_RANKS_PER_WORKER}"),
        );
    }
    if !(1..=MAX_REPEATS).contains(&c.repeats) {
        bad(
            "checkpoint.repeats",
            format!("must be within 1 .. {MAX_REPEATS}"),
        );
    }
    if c.restore_shift > MAX_RANKS {
        bad(
            "checkpoint.restoreShift",
            format!("must be at most {MAX_RANKS}"),
        );
    }
    if c.restore_shift > 0 && c.mode == CheckpointMode::Save {
        bad(
            "checkpoint.restoreShift",
            "mode: save restores nothing: give restoreShift with saveAndRestore or restore".into(),
        );
    }
    match c.model() {
        Err((k, m)) => bad(&format!("checkpoint.{k}"), m),
        Ok((_, ranks)) => {
            if ranks > MAX_RANKS {
                bad("checkpoint.ranks", format!("must be at most {MAX_RANKS}"));
            }
            if c.ranks_per_worker > ranks {
                bad(
                    "checkpoint.ranksPerWorker",
                    format!("is more than the model's {ranks} ranks"),
                );
            }
        }
    }
    if let Some(TargetUri::Direct { .. }) = uri {
        bad("target", "checkpoint shards are written with fsync through the page cache: use file://, not direct://".into());
    }
    if let Some(t) = c.total_size.filter(|t| t.0 > MAX_TOTAL_SIZE) {
        bad(
            "checkpoint.totalSize",
            format!(
                "must be at most {} (1 PiB; got {} bytes)",
                ByteSize(MAX_TOTAL_SIZE),
                t.0
            ),
        );
    }
    if let (Some(u), Ok((size, ranks))) = (uri, c.model()) {
        if !u.is_local() && size <= MAX_TOTAL_SIZE {
            check_shard_object(w, size.div_ceil(ranks.max(1) as u64), bad);
        }
    }
    // Without `subset` the run has the model's ranks (the operator and each worker hold it
    // to that); with it, the run's ranks are known from the worker count (`check_workers`).
    if let (false, Ok((_, ranks))) = (c.subset, c.model()) {
        if let Err((k, m)) = c.check_shift(ranks as u64) {
            bad(k, m);
        }
    }
    for (given, key, ignored) in [
        (
            w.rate_limit.is_some(),
            "rateLimit",
            "every rank saves (restores) its whole shard at once, as fast as it can",
        ),
        (
            w.error_budget.is_some(),
            "errorBudget",
            "a rank that fails is recorded in the summary and never stops it",
        ),
    ] {
        if given {
            bad(key, format!("not applied to a checkpoint run: {ignored}"));
        }
    }
}

/// On object storage a shard is one object: at most 5TiB, uploaded (from
/// `write.multipartThreshold` on) in at most 10,000 parts of `write.partSize`.
fn check_shard_object(w: &Workload, shard: u64, bad: &mut dyn FnMut(&str, String)) {
    if shard > MAX_SHARD_OBJECT {
        bad(
            "checkpoint.totalSize",
            format!(
                "each rank's shard is {} (totalSize / ranks), above the {} an object may hold: give more ranks or a smaller totalSize",
                ByteSize(shard),
                ByteSize(MAX_SHARD_OBJECT)
            ),
        );
        return;
    }
    let part = w.write.part_size.0.max(1);
    let parts = shard.div_ceil(part);
    if shard >= w.write.multipart_threshold.0 && parts > MAX_PARTS {
        bad(
            "write.partSize",
            format!(
                "each rank's shard of {} would be uploaded in {parts} parts of {} (write.partSize), above the {MAX_PARTS} parts of one upload: give a partSize of at least {}",
                ByteSize(shard),
                ByteSize(part),
                ByteSize(shard.div_ceil(MAX_PARTS))
            ),
        );
    }
}

impl CheckpointSpec {
    /// `restoreShift` over a run of `run_ranks` ranks: rank r restores rank
    /// (r + shift) mod run_ranks's shard, so a shift that is a multiple of the run's ranks
    /// has every rank restore its own (from its node's page cache): refused, as a shift that
    /// means nothing. `Err` is (field, why).
    pub fn check_shift(&self, run_ranks: u64) -> Result<(), (&'static str, String)> {
        let shift = self.restore_shift as u64;
        if shift > 0 && run_ranks > 0 && shift % run_ranks == 0 {
            return Err((
                "checkpoint.restoreShift",
                format!(
                    "{shift} is a multiple of the run's {run_ranks} ranks, so every rank would restore its own shard: give a shift that is not (ranksPerWorker restores each shard on another worker), or 0"
                ),
            ));
        }
        Ok(())
    }

    /// The checks that need the run's worker count (`workers.count`, or the nodes of a
    /// `perNode` run): `restoreShift` over the run's ranks (workers x `ranksPerWorker`).
    pub fn check_workers(&self, workers: u32) -> Result<(), (&'static str, String)> {
        self.check_shift(workers.max(1) as u64 * self.ranks_per_worker as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_size_the_shards() {
        let c = CheckpointSpec {
            preset: Some(CheckpointPreset::Llama3_8b),
            ..Default::default()
        };
        assert_eq!(c.shard_size().unwrap(), 13_125_000_000);
        let c = CheckpointSpec {
            preset: Some(CheckpointPreset::Llama3_1t),
            ..Default::default()
        };
        assert_eq!(c.model().unwrap(), (18_000_000_000_000, 1024));
    }

    #[test]
    fn bad_checkpoint_workloads_are_refused_by_field() {
        for (yaml, field) in [
            (
                "ops: [{op: put}]\ncheckpoint: {ranks: 4}",
                "checkpoint.totalSize",
            ),
            ("ops: [{op: get}]\ncheckpoint: {preset: llama3-8b}", "ops"),
            (
                "ops: [{op: put}]\ncheckpoint: {preset: llama3-8b, mode: save, restoreShift: 8}",
                "checkpoint.restoreShift",
            ),
            (
                "ops: [{op: put}]\nduration: 5s\ncheckpoint: {preset: llama3-8b}",
                "duration",
            ),
            (
                "ops: [{op: put}]\ncheckpoint: {totalSize: 1MiB, ranks: 2, ranksPerWorker: 4}",
                "checkpoint.ranksPerWorker",
            ),
        ] {
            let e = Workload::from_yaml(&format!("target: file:///tmp/x\n{yaml}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{yaml}: {e}");
        }
        assert!(Workload::from_yaml(
            "target: file:///tmp/x\nops: [{op: put}]\ncheckpoint: {totalSize: 1MiB, ranks: 4, ranksPerWorker: 2}\n"
        )
        .is_ok());
    }

    fn refusal(yaml: &str) -> String {
        match Workload::from_yaml(yaml) {
            Ok(_) => panic!("accepted: {yaml}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn sizes_shards_and_shifts_that_mean_nothing_are_refused() {
        let base = "ops: [{op: put}]\ncheckpoint: {";
        for (target, section, want) in [
            (
                "file:///tmp/x",
                "totalSize: 9999999TB, ranks: 8",
                "checkpoint.totalSize: must be at most 1024TiB (1 PiB",
            ),
            // 6 TB shards: above the 5 TiB an object may hold.
            (
                "s3://b/p/",
                "totalSize: 48TB, ranks: 8",
                "checkpoint.totalSize: each rank's shard is",
            ),
            // 200 GB shards in the default 16 MiB parts: 11,921 parts.
            (
                "s3://b/p/",
                "totalSize: 1600GB, ranks: 8",
                "write.partSize: each rank's shard of",
            ),
            (
                "file:///tmp/x",
                "preset: llama3-8b, restoreShift: 16",
                "checkpoint.restoreShift: 16 is a multiple of the run's 8 ranks",
            ),
        ] {
            let e = refusal(&format!("target: {target}\n{base}{section}}}\n"));
            assert!(e.contains(want), "{section}: {e}");
        }
        // The same shards in larger parts fit one upload; on files, no object limit applies.
        let parts = "ops: [{op: put}]\nwrite: {partSize: 64MiB}\ncheckpoint: {totalSize: 1600GB, ranks: 8}\n";
        assert!(Workload::from_yaml(&format!("target: s3://b/p/\n{parts}")).is_ok());
        assert!(Workload::from_yaml(&format!(
            "target: file:///tmp/x\n{base}totalSize: 48TB, ranks: 8}}\n"
        ))
        .is_ok());
        for (key, want) in [
            (
                "rateLimit: 10",
                "rateLimit: not applied to a checkpoint run",
            ),
            (
                "errorBudget: {maxErrors: 1}",
                "errorBudget: not applied to a checkpoint run",
            ),
        ] {
            let e = refusal(&format!(
                "target: file:///tmp/x\n{key}\n{base}preset: llama3-8b}}\n"
            ));
            assert!(e.contains(want), "{key}: {e}");
        }
    }

    /// With `subset`, the run's ranks are workers x ranksPerWorker: the shift is checked for
    /// the worker count (by the operator, and by each worker at its start).
    #[test]
    fn a_shift_is_checked_against_the_runs_ranks() {
        let c = CheckpointSpec {
            preset: Some(CheckpointPreset::Llama3_70b),
            ranks_per_worker: 8,
            subset: true,
            restore_shift: 16,
            ..Default::default()
        };
        assert_eq!(c.check_workers(3), Ok(()));
        let (field, why) = c.check_workers(2).unwrap_err();
        assert_eq!(field, "checkpoint.restoreShift");
        assert!(
            why.starts_with("16 is a multiple of the run's 16 ranks"),
            "{why}"
        );
        assert!(c.check_workers(1).is_err());
        assert_eq!(
            CheckpointSpec {
                restore_shift: 0,
                ..c
            }
            .check_workers(2),
            Ok(())
        );
    }
}
