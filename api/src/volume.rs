//! What a block workload's summary says about the volume: which I/O engine ran, how deep,
//! and how much of the dataset the page cache held (so a read figure served from RAM shows
//! as such). A leaf: `stats` holds it in the summary and merges it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A block workload's volume figures (one worker, or several merged).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStats {
    /// Workers per I/O engine that ran (`io_uring`, `sync`).
    pub engines: BTreeMap<String, u32>,
    /// Why `sync` ran under `engine: auto` (io_uring refused: kernel, seccomp profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
    /// I/Os in flight per task (`block.queueDepth`).
    pub queue_depth: u32,
    /// O_DIRECT (`direct://`): the page cache is not in the data path.
    pub direct: bool,
    /// Bytes the measured stage addresses: files x file size, or the device range (summed
    /// over workers).
    pub dataset_bytes: u64,
    /// Workers that reused a dataset already laid out (a volume kept between runs).
    #[serde(default)]
    pub reused: u32,
    /// Seconds spent laying the dataset out (summed over workers).
    #[serde(default)]
    pub layout_seconds: f64,
    /// Seconds of random overwrites before the measured stage (`block.precondition`).
    #[serde(default)]
    pub precondition_seconds: f64,
    /// The page cache, for files (a device is not measured: `mincore` needs a mapping).
    /// Once merged: summed over distinct targets (see `targets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheResidency>,
    /// Per target the workers addressed (a device on a node, a directory on a node's own
    /// filesystem, or a directory of a shared filesystem: see the worker's
    /// `Volume::identity`): its bytes and page-cache figures once however many workers used
    /// it. `datasetBytes` and `cache` add these up, so a device or claim shared by several
    /// workers is counted once. Empty (absent) in older summaries, whose figures add up per
    /// worker as before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub targets: BTreeMap<String, TargetVolume>,
}

/// One target's figures in a merged [`VolumeStats`] (or a training run's `cacheTargets`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetVolume {
    /// Workers that used it.
    pub workers: u32,
    /// Bytes the measured stage addressed on it (the largest any of its workers did).
    pub dataset_bytes: u64,
    /// Its page cache: bytes examined and resident are the largest any of its workers
    /// measured (workers of one node see one page cache); `dropped` counts its workers that
    /// dropped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheResidency>,
}

impl TargetVolume {
    /// Another worker's figures of the same target.
    fn merge(&mut self, o: &TargetVolume) {
        self.workers = self.workers.saturating_add(o.workers);
        self.dataset_bytes = self.dataset_bytes.max(o.dataset_bytes);
        if let Some(c) = &o.cache {
            let m = self.cache.get_or_insert_with(Default::default);
            m.bytes = m.bytes.max(c.bytes);
            m.resident_before_warmup = m.resident_before_warmup.max(c.resident_before_warmup);
            m.resident_at_start = m.resident_at_start.max(c.resident_at_start);
            m.resident_at_end = m.resident_at_end.max(c.resident_at_end);
            m.dropped = m.dropped.saturating_add(c.dropped);
        }
    }
}

/// How much of the dataset was in the page cache, from `mincore` over every file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheResidency {
    /// Bytes examined (the files' sizes).
    pub bytes: u64,
    /// Bytes resident when the measured stage started (a training run's: when its first
    /// epoch's reads began): after `dropCache`, when it ran, and after the warm-up, when there
    /// was one (the warm-up's reads fill the cache).
    pub resident_at_start: u64,
    /// With a warm-up: bytes resident before it (when the warm-up started); absent without
    /// one (the same instant as `residentAtStart`) and in older summaries, which measured
    /// `residentAtStart` there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_before_warmup: Option<u64>,
    /// Bytes resident when it ended.
    pub resident_at_end: u64,
    /// Workers that dropped the dataset from the cache before the start (`block.dropCache`;
    /// `training.dropCache`, before every epoch).
    pub dropped: u32,
}

impl CacheResidency {
    /// Fraction of the dataset resident at the start (0 when nothing was examined).
    pub fn start_fraction(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.resident_at_start as f64 / self.bytes as f64
        }
    }

    /// Fraction resident at the end.
    pub fn end_fraction(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            self.resident_at_end as f64 / self.bytes as f64
        }
    }
}

impl VolumeStats {
    /// Add another worker's figures: counts add, the depth is the largest, `direct` holds
    /// only when it held for every worker; bytes and the page cache add per target, a
    /// target's own counted once (its largest figures) however many workers used it.
    pub fn merge(&mut self, o: &VolumeStats) {
        let first = self.engines.is_empty();
        for (k, v) in &o.engines {
            *self.engines.entry(k.clone()).or_default() += v;
        }
        if self.fallback_reason.is_none() {
            self.fallback_reason = o.fallback_reason.clone();
        }
        self.queue_depth = self.queue_depth.max(o.queue_depth);
        self.direct = if first {
            o.direct
        } else {
            self.direct && o.direct
        };
        self.reused = self.reused.saturating_add(o.reused);
        self.layout_seconds += o.layout_seconds;
        self.precondition_seconds += o.precondition_seconds;
        let mut theirs = o.targets.clone();
        if theirs.is_empty() {
            // An older summary names no target: its figures count as a target of their own.
            let key = format!("(unnamed {})", self.targets.len());
            theirs.insert(
                key,
                TargetVolume {
                    workers: 1,
                    dataset_bytes: o.dataset_bytes,
                    cache: o.cache.clone(),
                },
            );
        }
        merge_targets(&mut self.targets, &theirs);
        self.dataset_bytes = self
            .targets
            .values()
            .fold(0u64, |n, t| n.saturating_add(t.dataset_bytes));
        self.cache = caches_added(&self.targets);
    }

    /// The engines, as `io_uring` or `io_uring x3, sync x1`.
    pub fn engine_label(&self) -> String {
        if self.engines.len() == 1 {
            return self.engines.keys().next().cloned().unwrap_or_default();
        }
        self.engines
            .iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Fold `theirs` (one worker's per-target figures, or a merge's) into `mine`: a target both
/// name is counted once, with its largest figures (see [`TargetVolume`]). Block workloads'
/// `volume.targets` and training datasets' `training.cacheTargets` merge alike.
pub fn merge_targets(
    mine: &mut BTreeMap<String, TargetVolume>,
    theirs: &BTreeMap<String, TargetVolume>,
) {
    for (key, t) in theirs {
        mine.entry(key.clone())
            .and_modify(|m| m.merge(t))
            .or_insert_with(|| t.clone());
    }
}

/// The page caches of `targets` added up, each target once; `None` when none was measured.
/// `residentBeforeWarmup` only when every target measured it.
pub fn caches_added(targets: &BTreeMap<String, TargetVolume>) -> Option<CacheResidency> {
    let caches: Vec<&CacheResidency> = targets.values().filter_map(|t| t.cache.as_ref()).collect();
    (!caches.is_empty()).then(|| {
        let add =
            |f: fn(&CacheResidency) -> u64| caches.iter().fold(0u64, |n, c| n.saturating_add(f(c)));
        CacheResidency {
            bytes: add(|c| c.bytes),
            resident_at_start: add(|c| c.resident_at_start),
            resident_at_end: add(|c| c.resident_at_end),
            resident_before_warmup: caches.iter().try_fold(0u64, |n, c| {
                Some(n.saturating_add(c.resident_before_warmup?))
            }),
            dropped: caches.iter().fold(0u32, |n, c| n.saturating_add(c.dropped)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(engine: &str, resident: u64) -> VolumeStats {
        VolumeStats {
            engines: BTreeMap::from([(engine.to_string(), 1)]),
            queue_depth: 16,
            direct: false,
            dataset_bytes: 1 << 30,
            cache: Some(CacheResidency {
                bytes: 1 << 30,
                resident_at_start: resident,
                resident_at_end: 1 << 30,
                dropped: 1,
                resident_before_warmup: None,
            }),
            ..Default::default()
        }
    }

    /// `one` as a worker on `target`.
    fn on(target: &str, resident: u64) -> VolumeStats {
        let mut v = one("io_uring", resident);
        v.targets = BTreeMap::from([(
            target.to_string(),
            TargetVolume {
                workers: 1,
                dataset_bytes: v.dataset_bytes,
                cache: v.cache.clone(),
            },
        )]);
        v
    }

    #[test]
    fn workers_sharing_a_target_count_it_once() {
        let mut m = VolumeStats::default();
        // Three workers on one shared claim, one on a device of its own node.
        m.merge(&on("nfs:/exports/bench", 1 << 28));
        m.merge(&on("nfs:/exports/bench", 1 << 29));
        m.merge(&on("nfs:/exports/bench", 0));
        m.merge(&on("node-b:/dev/nvme0n1[0..1073741824]", 1 << 20));
        // 2 GiB addressed, not 4: the claim's GiB once, the device's once.
        assert_eq!(m.dataset_bytes, 2 << 30);
        assert_eq!(m.targets["nfs:/exports/bench"].workers, 3);
        let c = m.cache.clone().expect("cache figures kept");
        assert_eq!(c.bytes, 2 << 30);
        // The claim's residency: the most any of its workers saw, not their sum.
        assert_eq!(c.resident_at_start, (1 << 29) + (1 << 20));
        assert_eq!(c.resident_at_end, 2 << 30);
        assert_eq!(c.dropped, 4);
        assert!(c.start_fraction() <= 1.0);
        // Merging merged summaries again gives the same figures (a merge of merges).
        let mut again = VolumeStats::default();
        again.merge(&m);
        assert_eq!(again, m);
        // An older part, naming no target, counts as a target of its own.
        m.merge(&one("sync", 0));
        assert_eq!(m.dataset_bytes, 3 << 30);
    }

    #[test]
    fn merged_workers_add_up_and_name_every_engine() {
        let mut m = VolumeStats::default();
        m.merge(&one("io_uring", 0));
        m.merge(&one("io_uring", 1 << 29));
        m.merge(&one("sync", 0));
        assert_eq!(m.engine_label(), "io_uring x2, sync x1");
        assert_eq!(m.dataset_bytes, 3 << 30);
        let c = m.cache.expect("cache figures kept");
        assert_eq!(c.resident_at_start, 1 << 29);
        assert!((c.start_fraction() - 1.0 / 6.0).abs() < 1e-9);
        assert_eq!(c.end_fraction(), 1.0);
        assert_eq!(c.dropped, 3);
    }
}
