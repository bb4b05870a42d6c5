//! A checkpoint run's figures (`Summary.checkpoint`), reported as MLPerf Storage does: the
//! save (restore) time of a repeat is the slowest rank's, its throughput the repeat's bytes
//! over that time; each averaged over repeats. Every rank's times are kept (one entry per
//! rank, bounded by the rank count), so the merge of workers is exact.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::latency::Latency;

/// One rank's save and restore in one repeat.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RankTimes {
    /// The rank (global: worker index x ranksPerWorker + local rank).
    pub rank: u32,
    /// Bytes of its shard.
    pub bytes: u64,
    /// Its save (write, and fsync for files), in microseconds; absent when it did not save.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_us: Option<u64>,
    /// Its restore (verified read), in microseconds; absent when it did not restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_us: Option<u64>,
    /// The rank whose shard it restored, when not its own (`checkpoint.restoreShift`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<u32>,
    /// Why its save or restore failed (a corrupt shard, an I/O error), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One repeat of save and restore over every rank.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RepeatFigures {
    /// The repeat's number, from 0.
    pub repeat: u32,
    /// The repeat's save time: the slowest rank's, in microseconds (absent when no rank
    /// saved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_us: Option<u64>,
    /// The repeat's restore time: the slowest rank's, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_us: Option<u64>,
    /// Every rank, by rank.
    pub ranks: Vec<RankTimes>,
}

impl RepeatFigures {
    /// Bytes of every shard.
    pub fn bytes(&self) -> u64 {
        self.ranks.iter().map(|r| r.bytes).sum()
    }

    /// A repeat of these ranks, its save and restore times the slowest rank's.
    pub fn new(repeat: u32, mut ranks: Vec<RankTimes>) -> Self {
        ranks.sort_by_key(|r| r.rank);
        Self {
            repeat,
            save_us: ranks.iter().filter_map(|r| r.save_us).max(),
            restore_us: ranks.iter().filter_map(|r| r.restore_us).max(),
            ranks,
        }
    }

    /// The save time in seconds.
    pub fn save_seconds(&self) -> Option<f64> {
        self.save_us.map(|us| us as f64 / 1e6)
    }

    /// The restore time in seconds.
    pub fn restore_seconds(&self) -> Option<f64> {
        self.restore_us.map(|us| us as f64 / 1e6)
    }

    /// Ranks that failed.
    pub fn errors(&self) -> u64 {
        self.ranks.iter().filter(|r| r.error.is_some()).count() as u64
    }
}

/// A checkpoint run's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointStats {
    /// The model's checkpoint size (all its ranks).
    pub model_bytes: u64,
    /// The ranks the model is split over.
    pub model_ranks: u32,
    /// Bytes of one rank's shard.
    pub shard_bytes: u64,
    /// Per repeat.
    pub repeats: Vec<RepeatFigures>,
    /// Every rank's save time, all repeats (exact HDR histogram, microseconds).
    pub save: Latency,
    /// Every rank's restore time, all repeats.
    pub restore: Latency,
}

/// Bytes over seconds in GB/s (decimal, as MLPerf reports), when there is a time.
pub fn gb_per_sec(bytes: u64, seconds: Option<f64>) -> Option<f64> {
    seconds.filter(|s| *s > 0.0).map(|s| bytes as f64 / 1e9 / s)
}

impl CheckpointStats {
    /// The mean over repeats of the save time, seconds.
    pub fn mean_save_seconds(&self) -> Option<f64> {
        mean(self.repeats.iter().filter_map(|r| r.save_seconds()))
    }

    /// The mean over repeats of the restore time, seconds.
    pub fn mean_restore_seconds(&self) -> Option<f64> {
        mean(self.repeats.iter().filter_map(|r| r.restore_seconds()))
    }

    /// The mean over repeats of the save throughput, GB/s.
    pub fn mean_save_gb_per_sec(&self) -> Option<f64> {
        mean(
            self.repeats
                .iter()
                .filter_map(|r| gb_per_sec(r.bytes(), r.save_seconds())),
        )
    }

    /// The mean over repeats of the restore throughput, GB/s.
    pub fn mean_restore_gb_per_sec(&self) -> Option<f64> {
        mean(
            self.repeats
                .iter()
                .filter_map(|r| gb_per_sec(r.bytes(), r.restore_seconds())),
        )
    }

    /// Ranks that failed, all repeats.
    pub fn errors(&self) -> u64 {
        self.repeats.iter().map(|r| r.errors()).sum()
    }

    /// Fold another worker's ranks in (exact: repeats matched by number).
    pub fn merge(&mut self, o: &CheckpointStats) {
        self.model_bytes = self.model_bytes.max(o.model_bytes);
        self.model_ranks = self.model_ranks.max(o.model_ranks);
        self.shard_bytes = self.shard_bytes.max(o.shard_bytes);
        for r in &o.repeats {
            match self.repeats.iter_mut().find(|m| m.repeat == r.repeat) {
                Some(m) => {
                    let mut ranks = std::mem::take(&mut m.ranks);
                    ranks.extend(r.ranks.iter().cloned());
                    *m = RepeatFigures::new(r.repeat, ranks);
                }
                None => self.repeats.push(r.clone()),
            }
        }
        self.repeats.sort_by_key(|r| r.repeat);
        self.save.add(&o.save);
        self.restore.add(&o.restore);
    }
}

fn mean(it: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = it.fold((0u32, 0.0), |(n, s), v| (n + 1, s + v));
    (n > 0).then(|| sum / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(ranks: &[(u32, u64, u64)]) -> CheckpointStats {
        let mut c = CheckpointStats {
            model_bytes: 400,
            model_ranks: 4,
            shard_bytes: 100,
            ..Default::default()
        };
        let mut list = vec![];
        for (rank, save, restore) in ranks {
            c.save.record(std::time::Duration::from_micros(*save));
            c.restore.record(std::time::Duration::from_micros(*restore));
            list.push(RankTimes {
                rank: *rank,
                bytes: 100,
                save_us: Some(*save),
                restore_us: Some(*restore),
                restored_from: None,
                error: None,
            });
        }
        c.repeats.push(RepeatFigures::new(0, list));
        c
    }

    #[test]
    fn save_time_is_the_slowest_ranks_over_every_worker() {
        let mut m = CheckpointStats::default();
        m.merge(&part(&[(2, 1_000_000, 500_000), (3, 1_500_000, 400_000)]));
        m.merge(&part(&[(0, 2_000_000, 250_000), (1, 100_000, 300_000)]));
        let r = &m.repeats[0];
        assert_eq!(
            r.ranks.iter().map(|x| x.rank).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(r.save_seconds(), Some(2.0));
        assert_eq!(r.restore_seconds(), Some(0.5));
        assert_eq!(
            gb_per_sec(r.bytes(), r.save_seconds()),
            Some(400.0 / 1e9 / 2.0)
        );
        assert_eq!(m.save.count(), 4);
        assert_eq!(m.mean_save_seconds(), Some(2.0));
    }
}
