//! Stop when stable (`stopWhenStable`, warp's autoterm): sample the ops completed each second
//! and end the measured stage once every second of the last window is within the band of the
//! window's mean. Rates are per measured interval, so a late timer tick (a busy machine) does
//! not read as a dip.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use crate::spec::StableSpec;

/// The last `window` per-second rates and the band they must stay in.
#[derive(Debug)]
pub struct Steady {
    window: usize,
    band: f64,
    rates: VecDeque<f64>,
}

impl Steady {
    /// A detector for `spec`'s window and band.
    pub fn new(spec: &StableSpec) -> Self {
        let window = spec.window.0.as_secs().max(2) as usize;
        Self {
            window,
            band: spec.band_percent / 100.0,
            rates: VecDeque::with_capacity(window + 1),
        }
    }

    /// Add one interval's rate (ops/s); the reason to stop once the window is steady.
    pub fn push(&mut self, rate: f64) -> Option<String> {
        self.rates.push_back(rate);
        if self.rates.len() > self.window {
            self.rates.pop_front();
        }
        if self.rates.len() < self.window {
            return None;
        }
        let mean = self.rates.iter().sum::<f64>() / self.window as f64;
        let steady = mean > 0.0
            && self
                .rates
                .iter()
                .all(|r| (r - mean).abs() <= mean * self.band);
        steady.then(|| {
            format!(
                "stable: every second of the last {}s within {}% of {mean:.1} ops/s",
                self.window,
                self.band * 100.0
            )
        })
    }
}

/// Sample `done` each second from `start` (the measured stage's, after any warm-up); call
/// `stop` with the reason once steady.
pub async fn watch(
    spec: StableSpec,
    start: Instant,
    done: Arc<dyn Fn() -> u64 + Send + Sync>,
    stop: impl Fn(&str) + Send,
) {
    let mut steady = Steady::new(&spec);
    let mut tick = tokio::time::interval_at(start, Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The count at `start` is the baseline: after a warm-up, ops have run before it.
    let mut last_at = tick.tick().await;
    let mut last = done();
    loop {
        let now = tick.tick().await;
        let n = done();
        let dt = (now - last_at).as_secs_f64();
        if dt > 0.0 {
            if let Some(reason) = steady.push(n.saturating_sub(last) as f64 / dt) {
                stop(&reason);
                return;
            }
        }
        (last_at, last) = (now, n);
    }
}

/// Aborts the watcher when the measured stage ends, however it ends.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::HumanDuration;

    fn steady(window: u64, band: f64) -> Steady {
        Steady::new(&StableSpec {
            window: HumanDuration(Duration::from_secs(window)),
            band_percent: band,
        })
    }

    #[test]
    fn steady_only_after_a_full_window_inside_the_band() {
        let mut s = steady(3, 5.0);
        assert_eq!(s.push(100.0), None);
        assert_eq!(s.push(104.0), None, "window not full yet");
        // 100, 104, 120: mean 108, 120 is 11% off.
        assert_eq!(s.push(120.0), None);
        // 104, 120, 101: mean 108.3, 120 still 10.8% off.
        assert_eq!(s.push(101.0), None);
        // 120, 101, 99: still out. Then 101, 99, 100: mean 100, within 1%.
        assert_eq!(s.push(99.0), None);
        assert_eq!(
            s.push(100.0).as_deref(),
            Some("stable: every second of the last 3s within 5% of 100.0 ops/s")
        );
    }

    #[test]
    fn an_idle_target_is_never_stable() {
        let mut s = steady(2, 100.0);
        assert_eq!(s.push(0.0), None);
        assert_eq!(
            s.push(0.0),
            None,
            "zero throughput is a stall, not a steady state"
        );
    }
}
