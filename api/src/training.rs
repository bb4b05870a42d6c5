//! A training run's figures (`Summary.training`): accelerator utilization (AU), samples and
//! bytes per epoch, the per-step data-wait histogram, per worker; and their exact merge.
//!
//! AU of an accelerator over an epoch = the time it computed / the epoch's wall time on it
//! (from the epoch's start to its last step's end), as DLIO computes it. Sums of compute
//! and wall time are kept in microseconds, so the mean AU of any set of accelerators
//! (`compute / wall`) merges exactly; the lowest AU merges as a minimum.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::latency::Latency;
use crate::volume::{CacheResidency, TargetVolume};

/// The share of the dataset resident in the page cache when the epochs started (measured)
/// at or above which reads may have come from memory, whatever the 5x rule says: a drop
/// leaves a few pages (the block engine's check allows an eighth), tmpfs keeps everything.
pub const RESIDENT_WARN_SHARE: f64 = 0.1;

/// Time an accelerator spent, summed over accelerators.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuFigures {
    /// Accelerators counted.
    pub accelerators: u64,
    /// Compute time, summed over accelerators, in microseconds.
    pub compute_us: u64,
    /// Wall time, summed over accelerators, in microseconds.
    pub wall_us: u64,
    /// The lowest AU of one accelerator, in percent (100 when none is counted).
    pub min_au_percent: f64,
}

impl AuFigures {
    /// One accelerator's figures.
    pub fn one(compute_us: u64, wall_us: u64) -> Self {
        let mut a = AuFigures {
            accelerators: 1,
            compute_us,
            wall_us,
            min_au_percent: 100.0,
        };
        a.min_au_percent = a.mean_au_percent();
        a
    }

    /// Mean AU in percent: compute over wall time, all accelerators together.
    pub fn mean_au_percent(&self) -> f64 {
        if self.wall_us == 0 {
            return 100.0;
        }
        100.0 * self.compute_us as f64 / self.wall_us as f64
    }

    /// Fold another set of accelerators in (exact).
    pub fn merge(&mut self, o: &AuFigures) {
        if o.accelerators == 0 {
            return;
        }
        self.min_au_percent = if self.accelerators == 0 {
            o.min_au_percent
        } else {
            self.min_au_percent.min(o.min_au_percent)
        };
        self.accelerators = self.accelerators.saturating_add(o.accelerators);
        self.compute_us = self.compute_us.saturating_add(o.compute_us);
        self.wall_us = self.wall_us.saturating_add(o.wall_us);
    }
}

/// One epoch, over every accelerator of the run (or of one worker before the merge).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EpochFigures {
    /// The epoch's number, from 0.
    pub epoch: u32,
    /// Samples read.
    pub samples: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Steps (batches computed), all accelerators.
    pub steps: u64,
    /// Samples that could not be read (counted, the step goes on without them).
    pub errors: u64,
    /// The epoch's length: the longest wall time of an accelerator, in microseconds
    /// (workers start an epoch together, so this is the run's epoch time).
    pub elapsed_us: u64,
    /// Accelerator utilization.
    pub au: AuFigures,
    /// How long each step waited for its batch (exact HDR histogram, microseconds).
    pub data_wait: Latency,
    /// Whether every sample of this worker's share was read (false when the run was
    /// stopped inside the epoch).
    pub complete: bool,
    /// Local files: the share of the dataset, in percent, the page cache held when this
    /// epoch's reads began (after its drop, when `dropCache` ran), from `mincore`. Once
    /// merged, the most any worker measured (each measures its own node's cache); in the
    /// total, the most of any epoch. Absent on object storage and where it was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_percent_at_start: Option<f64>,
}

impl EpochFigures {
    /// Samples per second over the epoch.
    pub fn samples_per_sec(&self) -> f64 {
        per_sec(self.samples as f64, self.elapsed_us)
    }

    /// MiB per second over the epoch.
    pub fn mib_per_sec(&self) -> f64 {
        per_sec(self.bytes as f64 / (1u64 << 20) as f64, self.elapsed_us)
    }

    /// `cachePercentAtStart` as a table shows it: `12.5%`, or `-` where not measured.
    pub fn cache_cell(&self) -> String {
        self.cache_percent_at_start
            .map_or_else(|| "-".into(), |p| format!("{p:.1}%"))
    }

    /// Fold another worker's same epoch in (exact).
    pub fn merge(&mut self, o: &EpochFigures) {
        self.samples = self.samples.saturating_add(o.samples);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.steps = self.steps.saturating_add(o.steps);
        self.errors = self.errors.saturating_add(o.errors);
        self.elapsed_us = self.elapsed_us.max(o.elapsed_us);
        self.au.merge(&o.au);
        self.data_wait.add(&o.data_wait);
        self.complete &= o.complete;
        self.cache_percent_at_start = match (self.cache_percent_at_start, o.cache_percent_at_start)
        {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

fn per_sec(n: f64, us: u64) -> f64 {
    if us == 0 {
        0.0
    } else {
        n * 1e6 / us as f64
    }
}

/// A training run's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainingStats {
    /// Samples in the dataset.
    pub samples: u64,
    /// Bytes in the dataset.
    pub dataset_bytes: u64,
    /// Accelerators over all workers.
    pub accelerators: u64,
    /// Per epoch, in order.
    pub epochs: Vec<EpochFigures>,
    /// Per worker: its accelerators' utilization over every epoch.
    pub workers: BTreeMap<String, AuFigures>,
    /// The AU pass mark in percent (`training.minAU`), if any.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "minAUPercent"
    )]
    pub min_au_percent: Option<f64>,
    /// Client RAM, in bytes, summed over workers (from /proc/meminfo), for MLPerf's rule
    /// that the dataset be at least 5x the clients' RAM unless the page cache is dropped.
    pub client_ram_bytes: u64,
    /// Whether the page cache was dropped before every epoch (local files, `dropCache`)
    /// on every worker.
    pub cache_dropped: bool,
    /// Local files (`file://`, `direct://`): how much of the dataset the page cache held,
    /// from `mincore` over every dataset file, as block workloads measure it:
    /// `residentAtStart` when the first epoch's reads began (after its drop, when
    /// `dropCache` ran), `residentAtEnd` when the last epoch ended, `dropped` the workers
    /// that dropped it. A training run has no warm-up (`residentBeforeWarmup` is absent).
    /// Once merged: added up over distinct targets (`cacheTargets`), so a dataset several
    /// workers share counts once. Absent on object storage (no client page cache) and
    /// where it could not be measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheResidency>,
    /// Per dataset directory the workers read (`<node>:<dir>` on a node's own filesystem,
    /// `shared:<dir>` on one several nodes mount): its bytes and page-cache figures once
    /// however many workers used it (the largest residency any of them measured).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cache_targets: BTreeMap<String, TargetVolume>,
    /// With `training.search`: the most accelerators at or above the mark and every probe
    /// (the figures above are then the probe at the answer's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<crate::training_search::SearchFigures>,
}

impl TrainingStats {
    /// Every epoch together.
    pub fn total(&self) -> EpochFigures {
        let mut t = EpochFigures {
            complete: true,
            ..Default::default()
        };
        let mut elapsed = 0u64;
        for e in &self.epochs {
            elapsed = elapsed.saturating_add(e.elapsed_us);
            t.merge(e);
        }
        t.elapsed_us = elapsed;
        t
    }

    /// The lowest AU of an accelerator in any epoch, percent.
    pub fn min_au(&self) -> f64 {
        self.epochs
            .iter()
            .filter(|e| e.au.accelerators > 0)
            .map(|e| e.au.min_au_percent)
            .fold(100.0, f64::min)
    }

    /// Whether the run passes its AU mark (every epoch's lowest AU at least `minAU`);
    /// `None` without a mark.
    pub fn passed(&self) -> Option<bool> {
        self.min_au_percent.map(|m| self.min_au() >= m)
    }

    /// Whether the dataset breaks MLPerf's rule (at least 5x the clients' RAM, unless the
    /// page cache is dropped).
    pub fn breaks_5x_rule(&self) -> bool {
        !self.cache_dropped && self.dataset_bytes < self.client_ram_bytes.saturating_mul(5)
    }

    /// The share of the dataset resident in the page cache when the epochs started (after
    /// any drop), measured; `None` where it was not (object storage, older summaries).
    pub fn resident_at_start_share(&self) -> Option<f64> {
        self.cache.as_ref().map(|c| c.start_fraction())
    }

    /// Whether reads may have come from the clients' memory: the dataset breaks MLPerf's
    /// rule, or the page cache was measured holding at least [`RESIDENT_WARN_SHARE`] of it
    /// when the epochs started (a drop that did not take: tmpfs, a filesystem that ignores
    /// `posix_fadvise`; or a dataset cached whatever its size).
    pub fn cache_may_serve(&self) -> bool {
        self.breaks_5x_rule()
            || self
                .resident_at_start_share()
                .is_some_and(|f| f >= RESIDENT_WARN_SHARE)
    }

    /// The warning a table prints when reads may have come from memory, citing the rule and
    /// the measured residency; `None` when they may not.
    pub fn cache_warning(&self) -> Option<String> {
        if !self.cache_may_serve() {
            return None;
        }
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let measured = match &self.cache {
            Some(c) => format!(
                "measured (mincore): {:.1}% of the dataset was in the page cache when the epochs started, {:.1}% when they ended",
                100.0 * c.start_fraction(),
                100.0 * c.end_fraction()
            ),
            None => "its page-cache residency was not measured".into(),
        };
        let why = if self.breaks_5x_rule() {
            format!(
                "the dataset ({:.1} GiB) is under 5x the clients' RAM ({:.1} GiB) and the page cache was not dropped",
                gib(self.dataset_bytes),
                gib(self.client_ram_bytes)
            )
        } else if self.cache_dropped {
            "the page cache was dropped before every epoch, yet did not let go of the dataset (tmpfs, or a filesystem that ignores posix_fadvise)".into()
        } else {
            "the page cache held the dataset when the epochs started".into()
        };
        Some(format!(
            "warning: {why}: reads may come from memory (MLPerf Storage's rule: a dataset at least 5x the clients' RAM, or the cache dropped); {measured}"
        ))
    }

    /// Fold another worker's figures in (exact: epochs matched by number).
    pub fn merge(&mut self, o: &TrainingStats) {
        let first = self.accelerators == 0 && self.workers.is_empty();
        self.samples = self.samples.max(o.samples);
        self.dataset_bytes = self.dataset_bytes.max(o.dataset_bytes);
        self.accelerators = self.accelerators.saturating_add(o.accelerators);
        self.client_ram_bytes = self.client_ram_bytes.saturating_add(o.client_ram_bytes);
        self.cache_dropped = if first {
            o.cache_dropped
        } else {
            self.cache_dropped && o.cache_dropped
        };
        if self.min_au_percent.is_none() {
            self.min_au_percent = o.min_au_percent;
        }
        if self.search.is_none() {
            self.search = o.search.clone();
        }
        crate::volume::merge_targets(&mut self.cache_targets, &o.cache_targets);
        self.cache = crate::volume::caches_added(&self.cache_targets);
        for e in &o.epochs {
            match self.epochs.iter_mut().find(|m| m.epoch == e.epoch) {
                Some(m) => m.merge(e),
                None => self.epochs.push(e.clone()),
            }
        }
        self.epochs.sort_by_key(|e| e.epoch);
        for (k, v) in &o.workers {
            self.workers.entry(k.clone()).or_default().merge(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(n: u32, samples: u64, compute: u64, wall: u64, waits: &[u64]) -> EpochFigures {
        let mut data_wait = Latency::default();
        for w in waits {
            data_wait.record(std::time::Duration::from_micros(*w));
        }
        EpochFigures {
            epoch: n,
            samples,
            bytes: samples * 10,
            steps: waits.len() as u64,
            errors: 0,
            elapsed_us: wall,
            au: AuFigures::one(compute, wall),
            data_wait,
            complete: true,
            cache_percent_at_start: None,
        }
    }

    fn worker(id: &str, epochs: Vec<EpochFigures>) -> TrainingStats {
        let mut w = AuFigures::default();
        for e in &epochs {
            w.merge(&e.au);
        }
        TrainingStats {
            samples: 100,
            dataset_bytes: 1000,
            accelerators: 1,
            epochs,
            workers: [(id.to_string(), w)].into(),
            min_au_percent: Some(90.0),
            client_ram_bytes: 100,
            cache_dropped: false,
            ..Default::default()
        }
    }

    #[test]
    fn the_merge_is_exact_and_the_mean_is_time_weighted() {
        let a = worker(
            "a",
            vec![
                epoch(0, 50, 900, 1000, &[10, 20]),
                epoch(1, 50, 950, 1000, &[5]),
            ],
        );
        let b = worker(
            "b",
            vec![
                epoch(0, 50, 800, 1000, &[30]),
                epoch(1, 50, 990, 1100, &[7, 8]),
            ],
        );
        let mut m = TrainingStats::default();
        m.merge(&a);
        m.merge(&b);
        assert_eq!(m.accelerators, 2);
        assert_eq!(m.epochs.len(), 2);
        let e0 = &m.epochs[0];
        assert_eq!((e0.samples, e0.steps, e0.elapsed_us), (100, 3, 1000));
        assert_eq!(e0.au.mean_au_percent(), 100.0 * 1700.0 / 2000.0);
        assert_eq!(e0.au.min_au_percent, 80.0);
        assert_eq!(e0.data_wait.count(), 3);
        assert_eq!(m.epochs[1].elapsed_us, 1100);
        assert_eq!(m.min_au(), 80.0);
        assert_eq!(m.passed(), Some(false));
        assert_eq!(m.workers["b"].accelerators, 2);
        // Merging in another order gives the same figures.
        let mut n = TrainingStats::default();
        n.merge(&b);
        n.merge(&a);
        assert_eq!(n, m);
        assert_eq!(m.client_ram_bytes, 200);
        assert!(
            !m.cache_may_serve(),
            "1000 B of data, 200 B of RAM: 5x, as MLPerf asks"
        );
        m.client_ram_bytes = 201;
        assert!(
            m.cache_may_serve(),
            "1000 B of data, 201 B of RAM: under 5x"
        );
        m.cache_dropped = true;
        assert!(!m.cache_may_serve(), "the page cache was dropped");
    }

    #[test]
    fn an_epochs_cache_share_merges_as_the_most_measured() {
        let at = |p: Option<f64>| EpochFigures {
            cache_percent_at_start: p,
            ..epoch(0, 1, 1, 1, &[])
        };
        let mut e = at(None);
        assert_eq!(e.cache_cell(), "-", "not measured (object storage)");
        e.merge(&at(Some(12.5)));
        assert_eq!(e.cache_percent_at_start, Some(12.5));
        e.merge(&at(Some(3.0)));
        e.merge(&at(None));
        assert_eq!(
            e.cache_percent_at_start,
            Some(12.5),
            "the most any worker saw"
        );
        assert_eq!(e.cache_cell(), "12.5%");
        let mut t = worker("a", vec![at(Some(1.0)), at(Some(40.0)), at(None)]);
        assert_eq!(t.total().cache_percent_at_start, Some(40.0));
        t.epochs.truncate(0);
        assert_eq!(t.total().cache_percent_at_start, None);
    }

    /// One worker's page-cache figures of the dataset on `target`.
    fn with_cache(mut t: TrainingStats, target: &str, start: u64, end: u64) -> TrainingStats {
        let c = CacheResidency {
            bytes: 1000,
            resident_at_start: start,
            resident_at_end: end,
            resident_before_warmup: None,
            dropped: 1,
        };
        t.cache = Some(c.clone());
        t.cache_targets = [(
            target.to_string(),
            TargetVolume {
                workers: 1,
                dataset_bytes: 1000,
                cache: Some(c),
            },
        )]
        .into();
        t
    }

    #[test]
    fn a_shared_datasets_residency_counts_once_and_distinct_ones_add() {
        let a = with_cache(
            worker("a", vec![epoch(0, 50, 9, 10, &[1])]),
            "shared:/d",
            0,
            900,
        );
        let b = with_cache(
            worker("b", vec![epoch(0, 50, 9, 10, &[1])]),
            "shared:/d",
            100,
            800,
        );
        let mut m = TrainingStats::default();
        m.merge(&a);
        m.merge(&b);
        let c = m.cache.clone().expect("measured");
        // One dataset of 1000 B read by two workers: examined once, the most either saw.
        assert_eq!(
            (c.bytes, c.resident_at_start, c.resident_at_end),
            (1000, 100, 900)
        );
        assert_eq!((c.dropped, m.cache_targets["shared:/d"].workers), (2, 2));
        // A merge of merges gives the same figures.
        let mut again = TrainingStats::default();
        again.merge(&m);
        assert_eq!(again.cache, m.cache);
        // Another node's own copy is another target: it adds.
        let d = with_cache(
            worker("d", vec![epoch(0, 50, 9, 10, &[1])]),
            "node-b:/d",
            50,
            50,
        );
        m.merge(&d);
        let c = m.cache.clone().expect("measured");
        assert_eq!((c.bytes, c.resident_at_start), (2000, 150));
        // Object storage (nothing measured) leaves the figures as they are.
        m.merge(&worker("s3", vec![]));
        assert_eq!(m.cache.as_ref().map(|c| c.bytes), Some(2000));
    }

    #[test]
    fn the_cache_warning_cites_the_rule_and_the_measured_residency() {
        // 1000 B of data, 100 B of RAM, dropped: nothing to warn about, measured or not.
        let mut t = worker("a", vec![epoch(0, 50, 9, 10, &[1])]);
        t.cache_dropped = true;
        assert_eq!(t.cache_warning(), None);
        let t = with_cache(t, "n:/d", 20, 1000);
        assert_eq!(t.cache_warning(), None, "2% resident after the drop");
        // The drop did not take (tmpfs): the rule is kept, the measurement says otherwise.
        let t = with_cache(t, "n:/d", 1000, 1000);
        let w = t.cache_warning().expect("a warning");
        assert!(w.contains("yet did not let go"), "{w}");
        assert!(
            w.contains("100.0% of the dataset was in the page cache when the epochs started"),
            "{w}"
        );
        // Under 5x the RAM, not dropped: the rule's warning, with what was measured.
        let mut t = with_cache(worker("a", vec![]), "n:/d", 0, 1000);
        t.client_ram_bytes = 1000;
        let w = t.cache_warning().expect("a warning");
        assert!(w.contains("under 5x the clients' RAM"), "{w}");
        assert!(w.contains("0.0% of the dataset was in the page cache when the epochs started, 100.0% when they ended"), "{w}");
        t.cache = None;
        assert!(t
            .cache_warning()
            .expect("a warning")
            .contains("not measured"));
        // At 5x the RAM, not dropped, yet cached when the epochs started.
        let mut t = with_cache(worker("a", vec![]), "n:/d", 500, 1000);
        t.client_ram_bytes = 200;
        assert!(!t.breaks_5x_rule());
        let w = t.cache_warning().expect("a warning");
        assert!(
            w.contains("held the dataset when the epochs started"),
            "{w}"
        );
    }
}
