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
    /// page cache is dropped): then reads may come from the clients' memory.
    pub fn cache_may_serve(&self) -> bool {
        !self.cache_dropped && self.dataset_bytes < self.client_ram_bytes.saturating_mul(5)
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
            search: None,
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
}
