//! Retry delays of failed passes, per run: 5 s, doubling, at most 60 s; reset by a pass that
//! succeeds.
//!
//! A pass fails when the API server refuses or is away. Retrying every run every 5 s through
//! an outage turns a fleet of runs into a steady load on a server that is struggling; doubling
//! per run spreads it, and the cap keeps a run from waiting long after the server is back (a
//! watch event from the server re-runs the pass at once anyway).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Delay after the first failure of a run.
pub const FIRST: Duration = Duration::from_secs(5);
/// The longest delay, however many passes failed in a row.
pub const MAX: Duration = Duration::from_secs(60);

/// Consecutive failed passes per run (`namespace/name`).
#[derive(Debug, Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Count a failed pass of `run` and return how long to wait before the next one.
    pub fn failed(&self, run: &str) -> Duration {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = f.entry(run.to_string()).or_default();
        *n = n.saturating_add(1);
        // 2^(n-1) x FIRST, computed without overflow for any n.
        let factor = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
        FIRST.saturating_mul(factor).min(MAX)
    }

    /// A pass of `run` succeeded (or the run is gone): the next failure starts over.
    pub fn reset(&self, run: &str) {
        let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        f.remove(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_run_up_to_the_cap_and_resets_on_success() {
        let b = Backoff::default();
        let secs: Vec<u64> = (0..7).map(|_| b.failed("ns/a").as_secs()).collect();
        assert_eq!(secs, vec![5, 10, 20, 40, 60, 60, 60]);
        // Another run has its own count.
        assert_eq!(b.failed("ns/b"), FIRST);
        b.reset("ns/a");
        assert_eq!(b.failed("ns/a"), FIRST);
    }

    #[test]
    fn a_very_long_streak_stays_at_the_cap() {
        let b = Backoff::default();
        for _ in 0..100 {
            assert!(b.failed("ns/a") <= MAX);
        }
        assert_eq!(b.failed("ns/a"), MAX);
    }
}
