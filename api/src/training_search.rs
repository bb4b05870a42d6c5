//! The maximum-accelerators search (`training.search.maxAccelerators`): its figures
//! (`Summary.training.search`: the answer, the mark it was judged by, every probe in the order
//! it ran) and its pure state machine, [`Bracket`], which the standalone worker and the
//! operator (each probe a child run of every worker) both drive.
//!
//! A full grid would cost a run per accelerator count; the search stops at the boundary
//! instead. It probes 1, 2, 4, ... accelerators (each probe a short training run of
//! `epochsPerProbe` epochs) until a probe falls below the mark or the cap is reached, then
//! bisects between the last pass and the first fail: about 2 log2(answer) probes. The answer
//! always has a passing probe with a failing probe (or the cap) one above it, so a noisy AU
//! near the boundary moves the answer by the noise's width, never past a measured failure.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One probe: a short training run with `accelerators` accelerators per worker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchProbe {
    /// Accelerators per worker in this probe.
    pub accelerators: u32,
    /// Mean AU over the probe's epochs and accelerators, percent.
    #[serde(rename = "auMeanPercent")]
    pub au_mean_percent: f64,
    /// Lowest AU of an accelerator in an epoch, percent (what the mark is judged on).
    #[serde(rename = "auMinPercent")]
    pub au_min_percent: f64,
    /// Samples per second over the probe's epochs.
    pub samples_per_sec: f64,
    /// MiB per second over the probe's epochs.
    pub mib_per_sec: f64,
    /// Whether every epoch of the probe ran to its end.
    pub complete: bool,
    /// Whether the lowest AU was at or above the mark.
    pub passed: bool,
    /// The probe's epochs' length (each the longest accelerator's wall time), seconds.
    pub seconds: f64,
}

/// A maximum-accelerators search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchFigures {
    /// The most accelerators per worker whose probe passed the mark, with a failed probe (or
    /// the cap) above it; 0 when even one accelerator falls below the mark.
    pub max_accelerators: u32,
    /// The AU mark, percent.
    pub mark: f64,
    /// The most accelerators a probe could run (`upTo`, or the reader-thread bound).
    pub cap: u32,
    /// Whether the answer is the cap (every probe up to it passed: the storage may keep
    /// more busy than one worker can emulate).
    pub at_cap: bool,
    /// Every probe, in the order it ran.
    pub probes: Vec<SearchProbe>,
}

/// The search's state: the largest count that passed, the smallest that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bracket {
    cap: u32,
    /// The largest count that passed (0: none yet).
    pass: u32,
    /// The smallest count that failed, once one has.
    fail: Option<u32>,
}

impl Bracket {
    /// A search over 1 ..= `cap` accelerators.
    pub fn new(cap: u32) -> Self {
        Bracket {
            cap: cap.max(1),
            pass: 0,
            fail: None,
        }
    }

    /// The next count to probe, or `None` when the answer is known.
    pub fn next(&self) -> Option<u32> {
        match self.fail {
            // Growing: double the last pass, up to the cap.
            None if self.pass >= self.cap => None,
            None => Some((self.pass.saturating_mul(2)).clamp(1, self.cap)),
            // Bisecting between the last pass and the first fail.
            Some(f) if f <= self.pass + 1 => None,
            Some(f) => Some(self.pass + (f - self.pass) / 2),
        }
    }

    /// Record a probe of `n` accelerators.
    pub fn record(&mut self, n: u32, passed: bool) {
        if passed {
            self.pass = self.pass.max(n);
        } else {
            self.fail = Some(self.fail.map_or(n, |f| f.min(n)));
        }
    }

    /// The most accelerators that passed (0: not even one).
    pub fn answer(&self) -> u32 {
        self.pass
    }

    /// Whether every count up to the cap passed.
    pub fn at_cap(&self) -> bool {
        self.pass >= self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probe `f` until the bracket closes: (answer, probes run).
    fn search(cap: u32, mut f: impl FnMut(u32) -> bool) -> (u32, Vec<u32>) {
        let mut b = Bracket::new(cap);
        let mut probes = vec![];
        while let Some(n) = b.next() {
            assert!((1..=cap).contains(&n), "probe {n} outside 1 ..= {cap}");
            assert!(!probes.contains(&n), "{n} probed twice: {probes:?}");
            probes.push(n);
            b.record(n, f(n));
            assert!(probes.len() <= 64, "no end: {probes:?}");
        }
        (b.answer(), probes)
    }

    /// A storage that feeds `capacity` accelerators: AU = min(1, capacity / n).
    fn au(capacity: f64, n: u32) -> f64 {
        100.0 * (capacity / n as f64).min(1.0)
    }

    #[test]
    fn a_monotone_au_is_found_exactly_in_logarithmic_probes() {
        for cap_units in [1.0, 2.5, 5.5, 7.0, 13.2, 100.0, 700.0] {
            let mark = 90.0;
            // The largest n with capacity / n >= 0.9.
            let want = (cap_units / 0.9f64).floor() as u32;
            let (got, probes) = search(1024, |n| au(cap_units, n) >= mark);
            assert_eq!(got, want, "capacity {cap_units}: probes {probes:?}");
            let bound = 2 * (32 - want.leading_zeros()) + 2;
            assert!(
                probes.len() as u32 <= bound,
                "capacity {cap_units}: {} probes {probes:?}, more than {bound}",
                probes.len()
            );
            // The answer passed and the count above it failed, both measured.
            assert!(
                probes.contains(&want) && probes.contains(&(want + 1)),
                "{probes:?}"
            );
        }
    }

    #[test]
    fn the_probes_grow_by_doubling_then_bisect() {
        let (got, probes) = search(1024, |n| n <= 5);
        assert_eq!(got, 5);
        assert_eq!(probes, vec![1, 2, 4, 8, 6, 5]);
    }

    #[test]
    fn every_probe_passing_stops_at_the_cap() {
        let (got, probes) = search(24, |_| true);
        assert_eq!(got, 24);
        assert_eq!(probes, vec![1, 2, 4, 8, 16, 24]);
        let mut b = Bracket::new(24);
        for n in probes {
            b.record(n, true);
        }
        assert!(b.at_cap());
        // A cap of 1: one probe.
        assert_eq!(search(1, |_| true), (1, vec![1]));
    }

    #[test]
    fn one_accelerator_failing_answers_zero_after_one_probe() {
        assert_eq!(search(1024, |_| false), (0, vec![1]));
        assert!(!Bracket::new(8).at_cap());
    }

    /// Noise at the boundary: within +-3% of the mark a probe passes or fails at random. The
    /// answer stays inside the noisy band (never past a count that clearly fails, never
    /// under one that clearly passes), and still has a measured fail right above it.
    #[test]
    fn noise_at_the_boundary_keeps_the_answer_inside_the_noisy_band() {
        use rand::{Rng, SeedableRng};
        let (capacity, mark) = (20.0, 90.0);
        // AU = 100 * 20 / n: within 90 +- 3 for n in 21 ..= 23 (AU 95.2 at 21 is clear).
        let clear_pass = (1..=1024)
            .filter(|&n| au(capacity, n) > mark + 3.0)
            .max()
            .unwrap();
        let clear_fail = (1..=1024).find(|&n| au(capacity, n) < mark - 3.0).unwrap();
        for seed in 0..200 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let mut seen = std::collections::BTreeMap::new();
            let (got, probes) = search(1024, |n| {
                let a = au(capacity, n);
                let pass = if (a - mark).abs() <= 3.0 {
                    rng.random_bool(0.5)
                } else {
                    a >= mark
                };
                seen.insert(n, pass);
                pass
            });
            assert!(
                (clear_pass..clear_fail).contains(&got),
                "seed {seed}: answer {got} outside {clear_pass} .. {clear_fail}: {probes:?}"
            );
            assert_eq!(seen.get(&got), Some(&true), "seed {seed}: {probes:?}");
            assert_eq!(
                seen.get(&(got + 1)),
                Some(&false),
                "seed {seed}: {probes:?}"
            );
        }
    }
}
