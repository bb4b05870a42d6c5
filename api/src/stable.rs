//! The stability rule of `stopWhenStable` (warp's autoterm), pure: one worker applies it to
//! its own ops per second, and the operator applies the same rule to the merged ops per
//! second of all the workers of a run, so a cluster stops every worker at one instant
//! instead of each on its own (which would merge stages of different lengths).
//!
//! The rule: the measured stage is steady once every second of the last `window` is within
//! `bandPercent` of the window's mean, and the mean is above zero (a stall is not steady).

use std::collections::VecDeque;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::StableSpec;

/// The figures that made a window steady.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StableFigures {
    /// The window's length in seconds.
    pub window_seconds: u64,
    /// The band every second had to stay in, in percent of the mean.
    pub band_percent: f64,
    /// The window's mean ops/s (all workers together when the run decided).
    pub mean_ops_per_second: f64,
    /// The window's slowest second, ops/s.
    pub min_ops_per_second: f64,
    /// The window's fastest second, ops/s.
    pub max_ops_per_second: f64,
}

impl StableFigures {
    /// The summary's `stoppedBy` for a stage these figures ended (the text standalone runs
    /// have always written).
    pub fn reason(&self) -> String {
        format!(
            "stable: every second of the last {}s within {}% of {:.1} ops/s",
            self.window_seconds, self.band_percent, self.mean_ops_per_second
        )
    }
}

/// Who found the stage steady, and when: the summary's `stable` and the body of the
/// operator's stop request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StableDecision {
    /// `worker`: the worker alone, from its own throughput (standalone, or a one-worker
    /// run); `run`: the operator, from the merged throughput of all the run's workers.
    pub decided_by: String,
    /// The workers whose throughput was merged (1 when a worker decided).
    pub workers: u32,
    /// The end of the steady window (wall clock), RFC 3339 UTC.
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub steady_at: DateTime<Utc>,
    /// The window's figures.
    #[serde(flatten)]
    pub figures: StableFigures,
}

/// `decidedBy` of a worker that found its own stage steady.
pub const BY_WORKER: &str = "worker";
/// `decidedBy` of the operator, from all workers' merged throughput.
pub const BY_RUN: &str = "run";

/// The last `window` per-second rates and the band they must stay in.
#[derive(Clone, Debug)]
pub struct Steady {
    window: usize,
    band_percent: f64,
    rates: VecDeque<f64>,
}

impl Steady {
    /// A detector for `spec`'s window and band.
    pub fn new(spec: &StableSpec) -> Self {
        let window = window_seconds(spec) as usize;
        Self {
            window,
            band_percent: spec.band_percent,
            rates: VecDeque::with_capacity(window + 1),
        }
    }

    /// Add one second's rate (ops/s); the window's figures once it is steady.
    pub fn push(&mut self, rate: f64) -> Option<StableFigures> {
        self.rates.push_back(rate);
        if self.rates.len() > self.window {
            self.rates.pop_front();
        }
        if self.rates.len() < self.window {
            return None;
        }
        let mean = self.rates.iter().sum::<f64>() / self.window as f64;
        let band = self.band_percent / 100.0;
        let steady = mean > 0.0 && self.rates.iter().all(|r| (r - mean).abs() <= mean * band);
        steady.then(|| StableFigures {
            window_seconds: self.window as u64,
            band_percent: self.band_percent,
            mean_ops_per_second: mean,
            min_ops_per_second: self.rates.iter().copied().fold(f64::INFINITY, f64::min),
            max_ops_per_second: self.rates.iter().copied().fold(0.0, f64::max),
        })
    }
}

/// The window in whole seconds (validation keeps it from 2 s to 1 h; never below 2 here).
pub fn window_seconds(spec: &StableSpec) -> u64 {
    spec.window.0.as_secs().max(2)
}

/// How many seconds an agent keeps for the operator beyond the window: the operator reads
/// every couple of seconds and workers started a little apart, so the seconds all workers
/// have in common still span a window.
pub const SECONDS_KEPT_BEYOND_WINDOW: u64 = 30;

/// One worker's ops completed in each second of its measured stage, counted from its start:
/// `ops[k]` is second `first + k` (the last ones only, see [`SECONDS_KEPT_BEYOND_WINDOW`]).
/// Served on `/v1/status` when the workload has `stopWhenStable`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecondCounts {
    /// The measured stage's second `ops[0]` counts (0: the first).
    pub first: u64,
    /// Ops completed in each whole second, in order.
    pub ops: Vec<u64>,
}

impl SecondCounts {
    /// The second after the last one counted.
    pub fn end(&self) -> u64 {
        self.first + self.ops.len() as u64
    }

    /// Count one more second, keeping at most `keep`.
    pub fn push(&mut self, ops: u64, keep: usize) {
        self.ops.push(ops);
        if self.ops.len() > keep.max(1) {
            let drop = self.ops.len() - keep.max(1);
            self.ops.drain(..drop);
            self.first += drop as u64;
        }
    }
}

/// The run's decision from its workers' seconds: the workers started together (within the
/// start skew), so second `i` of each is the same second of the run. Only the seconds every
/// worker has counted are merged (summed); the rule runs over them in order and the first
/// steady window wins: `(the second after it, its figures)`. `None` with no worker, or when
/// no window of merged seconds is steady yet.
pub fn decide(spec: &StableSpec, workers: &[SecondCounts]) -> Option<(u64, StableFigures)> {
    let from = workers.iter().map(|w| w.first).max()?;
    let to = workers.iter().map(SecondCounts::end).min()?;
    let mut steady = Steady::new(spec);
    for second in from..to {
        let total: u64 = workers
            .iter()
            .map(|w| w.ops[(second - w.first) as usize])
            .sum();
        if let Some(figures) = steady.push(total as f64) {
            return Some((second + 1, figures));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::HumanDuration;
    use std::time::Duration;

    fn spec(window: u64, band: f64) -> StableSpec {
        StableSpec {
            window: HumanDuration(Duration::from_secs(window)),
            band_percent: band,
        }
    }

    #[test]
    fn steady_only_after_a_full_window_inside_the_band() {
        let mut s = Steady::new(&spec(3, 5.0));
        assert_eq!(s.push(100.0), None);
        assert_eq!(s.push(104.0), None, "window not full yet");
        // 100, 104, 120: mean 108, 120 is 11% off.
        assert_eq!(s.push(120.0), None);
        // 104, 120, 101: mean 108.3, 120 still 10.8% off.
        assert_eq!(s.push(101.0), None);
        // 120, 101, 99: still out. Then 101, 99, 100: mean 100, within 1%.
        assert_eq!(s.push(99.0), None);
        let f = s.push(100.0).expect("steady");
        assert_eq!(
            f.reason(),
            "stable: every second of the last 3s within 5% of 100.0 ops/s"
        );
        assert_eq!((f.min_ops_per_second, f.max_ops_per_second), (99.0, 101.0));
    }

    #[test]
    fn an_idle_target_is_never_stable() {
        let mut s = Steady::new(&spec(2, 100.0));
        assert_eq!(s.push(0.0), None);
        assert_eq!(
            s.push(0.0),
            None,
            "zero throughput is a stall, not a steady state"
        );
    }

    fn counts(first: u64, ops: &[u64]) -> SecondCounts {
        SecondCounts {
            first,
            ops: ops.to_vec(),
        }
    }

    /// Two workers each far from steady on their own, steady together: the run is steady
    /// (and the reverse: each steady alone at very different rates is judged on the sum).
    #[test]
    fn the_run_is_judged_on_the_merged_seconds() {
        let a = counts(0, &[10, 90, 10, 90, 50, 50]);
        let b = counts(0, &[90, 10, 90, 10, 50, 50]);
        let s = spec(3, 5.0);
        // Alone, neither is ever steady: its seconds swing by 80%.
        assert_eq!(decide(&s, std::slice::from_ref(&a)), None);
        assert_eq!(decide(&s, std::slice::from_ref(&b)), None);
        let (at, f) = decide(&s, &[a, b]).expect("steady merged");
        // Seconds 0..3 merged are 100, 100, 100: steady at the end of second 2.
        assert_eq!(at, 3);
        assert_eq!(f.mean_ops_per_second, 100.0);
        assert_eq!(f.window_seconds, 3);
        assert_eq!(f.band_percent, 5.0);
    }

    #[test]
    fn only_the_seconds_every_worker_counted_are_merged() {
        let s = spec(3, 5.0);
        // b has counted only two seconds so far: no full window in common.
        let a = counts(0, &[100, 100, 100, 100]);
        let b = counts(0, &[100, 100]);
        assert_eq!(decide(&s, &[a.clone(), b]), None);
        // b's seconds 2..5 and a's 0..4 share 2..4: two seconds, not a window.
        let b = counts(2, &[100, 100, 100]);
        assert_eq!(decide(&s, &[a.clone(), b]), None);
        // Sharing 1..4: steady at the end of second 3, at 200 ops/s merged.
        let b = counts(1, &[100, 100, 100]);
        let (at, f) = decide(&s, &[a, b]).expect("steady");
        assert_eq!((at, f.mean_ops_per_second), (4, 200.0));
    }

    #[test]
    fn one_worker_off_the_band_keeps_the_run_going() {
        let s = spec(3, 5.0);
        let a = counts(0, &[100, 100, 100, 100]);
        // b stalls for a second: merged 200, 200, 120, 200 is never steady.
        let b = counts(0, &[100, 100, 20, 100]);
        assert_eq!(decide(&s, &[a.clone(), b]), None);
        // No worker at all: nothing to decide on.
        assert_eq!(decide(&s, &[]), None);
        // An idle run is never steady.
        let idle = counts(0, &[0, 0, 0, 0]);
        assert_eq!(decide(&s, &[idle.clone(), idle]), None);
        // The same as a worker alone would find, for one worker.
        assert_eq!(decide(&s, &[a]).map(|(at, _)| at), Some(3));
    }

    #[test]
    fn seconds_kept_are_bounded() {
        let mut c = SecondCounts::default();
        for n in 0..10 {
            c.push(n, 4);
        }
        assert_eq!(c, counts(6, &[6, 7, 8, 9]));
        assert_eq!(c.end(), 10);
    }
}
