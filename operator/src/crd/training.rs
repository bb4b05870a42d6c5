//! `status.training` and `status.checkpoint`: the merged figures of a training or checkpoint
//! run, as MLPerf Storage reports them, computed from the exact merge of every worker's
//! summary (docs/TRAINING.md).

use std::collections::BTreeMap;

use benchrun_api::checkpoint::CheckpointStats;
use benchrun_api::training::TrainingStats;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Accelerator utilization (AU), in percent: the time the emulated accelerators computed
/// over their wall time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuStatus {
    /// Every accelerator of every worker over every epoch: total compute time over total
    /// wall time (exact: the sums merge).
    pub mean: f64,
    /// The lowest AU of one accelerator in one epoch: what `minAU` is held to.
    pub min: f64,
    /// Each worker's accelerators over every epoch (mean AU), by worker id.
    pub per_worker: BTreeMap<String, f64>,
}

/// A training run's merged figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainingStatus {
    /// Accelerator utilization.
    pub au: AuStatus,
    /// Emulated accelerators over every worker.
    pub accelerators: u64,
    /// Epochs run.
    pub epochs: u32,
    /// Samples read per second, every worker, over the epochs' time.
    pub samples_per_second: f64,
    /// MiB read per second, every worker, over the epochs' time.
    #[serde(rename = "mibPerSecond")]
    pub mib_per_second: f64,
    /// p99 of the per-step wait for data, every accelerator, ms (exact merged histogram).
    pub data_wait_p99_ms: f64,
    /// Sample reads that failed.
    pub errors: u64,
    /// The workload's `training.minAU` in percent, if any.
    #[serde(default, rename = "minAU", skip_serializing_if = "Option::is_none")]
    pub min_au: Option<f64>,
    /// Whether every accelerator's AU in every epoch reached `training.minAU`; absent without
    /// it. A miss fails the run (reason `ThresholdsNotMet`), as `spec.thresholds` do.
    #[serde(default, rename = "minAUMet", skip_serializing_if = "Option::is_none")]
    pub min_au_met: Option<bool>,
    /// Reads may have come from memory: the dataset is under 5x the workers' combined RAM and
    /// the page cache was not dropped (MLPerf's rule), or `pageCache` measured at least 10%
    /// of the dataset resident when the epochs started (a drop that did not take, on tmpfs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_may_serve: bool,
    /// Local files (`file://`, `direct://`): how much of the dataset the page cache held,
    /// from `mincore` on every worker, a dataset several workers share counted once; absent
    /// on object storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache: Option<PageCacheStatus>,
}

/// The training dataset's page-cache residency, in percent of its bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PageCacheStatus {
    /// When the first epoch's reads began (after its drop, with `dropCache`).
    pub resident_at_start_percent: f64,
    /// When the last epoch ended.
    pub resident_at_end_percent: f64,
    /// Whether the workers dropped the dataset from the cache before every epoch.
    pub dropped: bool,
}

/// `status.search`: a maximum-accelerators search run as child runs, one per probe.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchStatus {
    /// `probe k: N accelerators per worker (run NAME)`, or `done`.
    pub progress: String,
    /// The AU mark, percent (`minAU`, or the preset's).
    pub mark: f64,
    /// The most accelerators per worker a probe may run (`upTo`, or the reader-thread bound).
    pub cap: u32,
    /// Once the search ended: the most accelerators per worker whose probe passed the mark,
    /// with a failed probe one above it (or the cap); 0 when even one accelerator fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_accelerators: Option<u32>,
    /// Every probe up to the cap passed: the storage may keep more busy than this.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_cap: bool,
    /// Every probe, in the order it ran.
    pub probes: Vec<ProbeRow>,
}

/// One probe: a child run of every worker with the same `acceleratorsPerWorker`, judged on
/// its merged result (the lowest AU of any accelerator of any worker in an epoch).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeRow {
    /// The child run (`<run>-probe-<k>`).
    pub run: String,
    /// Accelerators per worker.
    pub accelerators: u32,
    /// The child run's phase (a probe below the mark fails its `minAU`: `Failed`).
    pub phase: super::status::Phase,
    /// Its merged figures and verdict, once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<benchrun_api::training_search::SearchProbe>,
}

/// Two decimals: the status carries figures people read, not float noise.
fn r2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

impl TrainingStatus {
    /// The status figures of the merged training summary.
    pub fn of(t: &TrainingStats) -> Self {
        let total = t.total();
        let mut all = benchrun_api::training::AuFigures::default();
        for w in t.workers.values() {
            all.merge(w);
        }
        TrainingStatus {
            au: AuStatus {
                mean: r2(all.mean_au_percent()),
                min: r2(t.min_au()),
                per_worker: t
                    .workers
                    .iter()
                    .map(|(k, v)| (k.clone(), r2(v.mean_au_percent())))
                    .collect(),
            },
            accelerators: t.accelerators,
            epochs: t.epochs.len() as u32,
            samples_per_second: r2(total.samples_per_sec()),
            mib_per_second: r2(total.mib_per_sec()),
            data_wait_p99_ms: total.data_wait.quantile_us(0.99) as f64 / 1000.0,
            errors: total.errors,
            min_au: t.min_au_percent,
            min_au_met: t.passed(),
            cache_may_serve: t.cache_may_serve(),
            page_cache: t.cache.as_ref().map(|c| PageCacheStatus {
                resident_at_start_percent: r2(100.0 * c.start_fraction()),
                resident_at_end_percent: r2(100.0 * c.end_fraction()),
                dropped: t.cache_dropped,
            }),
        }
    }
}

/// A checkpoint run's merged figures: per repeat, save (restore) time is the slowest rank's
/// over every worker, throughput the repeat's bytes over it; here averaged over repeats.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointStatus {
    /// Ranks that saved or restored, every worker.
    pub ranks: u32,
    /// Bytes of every rank's shard together (one repeat).
    pub bytes: u64,
    /// Repeats run.
    pub repeats: u32,
    /// Mean over repeats of the save time (the slowest rank's), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_seconds: Option<f64>,
    /// Mean over repeats of the restore time (the slowest rank's), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_seconds: Option<f64>,
    /// Mean over repeats of the save throughput, GB/s (decimal, as MLPerf reports).
    #[serde(default, rename = "saveGBps", skip_serializing_if = "Option::is_none")]
    pub save_gbps: Option<f64>,
    /// Mean over repeats of the restore throughput, GB/s.
    #[serde(
        default,
        rename = "restoreGBps",
        skip_serializing_if = "Option::is_none"
    )]
    pub restore_gbps: Option<f64>,
    /// Rank saves or restores that failed (a corrupt shard, an I/O error), every repeat.
    pub errors: u64,
}

impl CheckpointStatus {
    /// The status figures of the merged checkpoint summary.
    pub fn of(c: &CheckpointStats) -> Self {
        let r3 = |v: Option<f64>| v.map(|v| (v * 1000.0).round() / 1000.0);
        CheckpointStatus {
            ranks: c.repeats.first().map_or(0, |r| r.ranks.len() as u32),
            bytes: c.repeats.first().map_or(0, |r| r.bytes()),
            repeats: c.repeats.len() as u32,
            save_seconds: r3(c.mean_save_seconds()),
            restore_seconds: r3(c.mean_restore_seconds()),
            save_gbps: r3(c.mean_save_gb_per_sec()),
            restore_gbps: r3(c.mean_restore_gb_per_sec()),
            errors: c.errors(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_api::checkpoint::{RankTimes, RepeatFigures};
    use benchrun_api::training::{AuFigures, EpochFigures};

    fn worker(id: &str, compute: u64, wall: u64, samples: u64) -> TrainingStats {
        let mut data_wait = benchrun_api::latency::Latency::default();
        data_wait.record(std::time::Duration::from_micros(wall - compute));
        let au = AuFigures::one(compute, wall);
        TrainingStats {
            samples: 100,
            dataset_bytes: 1 << 30,
            accelerators: 1,
            epochs: vec![EpochFigures {
                epoch: 0,
                samples,
                bytes: samples << 20,
                steps: 1,
                errors: 0,
                elapsed_us: wall,
                au: au.clone(),
                data_wait,
                complete: true,
                cache_percent_at_start: None,
            }],
            workers: [(id.to_string(), au)].into(),
            min_au_percent: Some(85.0),
            client_ram_bytes: 1 << 20,
            cache_dropped: false,
            ..Default::default()
        }
    }

    /// The mean is over time (compute sums over wall sums), the minimum the lowest
    /// accelerator's, each worker's AU kept; the mark is held to the minimum.
    #[test]
    fn training_status_of_two_merged_workers() {
        let mut m = TrainingStats::default();
        m.merge(&worker("w0", 900_000, 1_000_000, 50));
        m.merge(&worker("w1", 800_000, 1_000_000, 50));
        let s = TrainingStatus::of(&m);
        assert_eq!(s.au.mean, 85.0);
        assert_eq!(s.au.min, 80.0);
        assert_eq!(
            s.au.per_worker,
            [("w0".to_string(), 90.0), ("w1".to_string(), 80.0)].into()
        );
        assert_eq!(s.accelerators, 2);
        assert_eq!(s.epochs, 1);
        assert_eq!(s.samples_per_second, 100.0);
        assert_eq!(s.mib_per_second, 100.0);
        assert!((s.data_wait_p99_ms - 200.0).abs() < 1.0, "{s:?}");
        assert_eq!((s.min_au, s.min_au_met), (Some(85.0), Some(false)));
        assert!(!s.cache_may_serve);
        assert_eq!(s.page_cache, None, "nothing measured: no residency");
        let json = serde_json::to_value(&s).unwrap();
        for key in ["mibPerSecond", "minAU", "minAUMet", "dataWaitP99Ms"] {
            assert!(json.get(key).is_some(), "{key} in {json}");
        }
        assert_eq!(json["au"]["perWorker"]["w1"], 80.0);
    }

    /// Two workers of one node reading one dataset: its residency is the dataset's once (the
    /// most either measured), in percent of its bytes, not of twice them.
    #[test]
    fn the_page_cache_of_a_shared_dataset_counts_once() {
        use benchrun_api::stats::{CacheResidency, TargetVolume};
        let measured = |id: &str, start: u64, end: u64| {
            let mut t = worker(id, 900_000, 1_000_000, 50);
            let c = CacheResidency {
                bytes: 1 << 30,
                resident_at_start: start,
                resident_at_end: end,
                resident_before_warmup: None,
                dropped: 0,
            };
            t.cache_targets = [(
                "node-a:/data".to_string(),
                TargetVolume {
                    workers: 1,
                    dataset_bytes: 1 << 30,
                    cache: Some(c.clone()),
                },
            )]
            .into();
            t.cache = Some(c);
            t
        };
        let mut m = TrainingStats::default();
        m.merge(&measured("w0", 1 << 28, 1 << 30));
        m.merge(&measured("w1", 1 << 29, 1 << 29));
        let s = TrainingStatus::of(&m);
        assert_eq!(
            s.page_cache,
            Some(PageCacheStatus {
                resident_at_start_percent: 50.0,
                resident_at_end_percent: 100.0,
                dropped: false,
            })
        );
        // Half the dataset in memory when the epochs started: reads may come from it.
        assert!(s.cache_may_serve);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["pageCache"]["residentAtStartPercent"], 50.0);
    }

    #[test]
    fn checkpoint_status_is_the_slowest_rank_per_repeat_averaged() {
        let rank = |rank, save, restore| RankTimes {
            rank,
            bytes: 500_000_000,
            save_us: Some(save),
            restore_us: Some(restore),
            restored_from: None,
            error: None,
        };
        let c = CheckpointStats {
            repeats: vec![
                RepeatFigures::new(
                    0,
                    vec![rank(0, 1_000_000, 500_000), rank(1, 2_000_000, 250_000)],
                ),
                RepeatFigures::new(
                    1,
                    vec![rank(0, 1_000_000, 1_000_000), rank(1, 500_000, 100)],
                ),
            ],
            ..Default::default()
        };
        let s = CheckpointStatus::of(&c);
        assert_eq!((s.ranks, s.bytes, s.repeats), (2, 1_000_000_000, 2));
        assert_eq!(s.save_seconds, Some(1.5));
        assert_eq!(s.restore_seconds, Some(0.75));
        // 1 GB in 2 s and in 1 s: 0.5 and 1 GB/s.
        assert_eq!(s.save_gbps, Some(0.75));
        assert_eq!(s.restore_gbps, Some(1.5));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["saveGBps"], 0.75);
    }
}
