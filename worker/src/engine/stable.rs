//! Stop when stable (`stopWhenStable`, warp's autoterm): sample the ops completed each second
//! and end the measured stage once every second of the last window is within the band of the
//! window's mean. Rates are per measured interval, so a late timer tick (a busy machine) does
//! not read as a dip. The rule itself is `benchrun_api::stable`'s, shared with the operator.
//!
//! In an agent of a run of several workers the run decides: the seconds are counted for the
//! operator, this worker does not stop on its own, and the operator's stop instant
//! ([`cut_when_told`]) ends the stage as a deadline would, at the same instant on every worker.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use benchrun_api::stable::{
    window_seconds, SecondCounts, StableDecision, StableFigures, Steady, SECONDS_KEPT_BEYOND_WINDOW,
};
use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use crate::spec::StableSpec;

/// Sample `done` each second from `start` (the measured stage's, after any warm-up): each
/// second's count goes to `seconds` (for the operator, when the run decides), and with
/// `stop`, the rule runs here and `stop` gets the window's figures once steady.
pub async fn watch(
    spec: StableSpec,
    start: Instant,
    done: Arc<dyn Fn() -> u64 + Send + Sync>,
    seconds: Option<Arc<Mutex<Option<SecondCounts>>>>,
    stop: Option<impl Fn(StableFigures) + Send>,
) {
    let mut steady = Steady::new(&spec);
    let keep = (window_seconds(&spec) + SECONDS_KEPT_BEYOND_WINDOW) as usize;
    let mut tick = tokio::time::interval_at(start, Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The count at `start` is the baseline: after a warm-up, ops have run before it.
    let mut last_at = tick.tick().await;
    let mut last = done();
    if let Some(s) = &seconds {
        *s.lock().unwrap_or_else(|e| e.into_inner()) = Some(SecondCounts::default());
    }
    loop {
        let now = tick.tick().await;
        let n = done();
        let dt = (now - last_at).as_secs_f64();
        let ops = n.saturating_sub(last);
        if let Some(s) = &seconds {
            // A late tick (a busy machine) covers more than a second: it is counted as the
            // one second it stands for, at its rate, so the seconds stay aligned with the run.
            let per_second = if dt > 0.0 {
                (ops as f64 / dt).round() as u64
            } else {
                ops
            };
            s.lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(SecondCounts::default)
                .push(per_second, keep);
        }
        if dt > 0.0 {
            if let Some(figures) = steady.push(ops as f64 / dt) {
                if let Some(stop) = &stop {
                    stop(figures);
                    return;
                }
            }
        }
        (last_at, last) = (now, n);
    }
}

/// Wait for the run's stop instant and hand it to `cut` as an instant of this process's clock
/// (not before `measured_start`; one already past is now: the stage ends at once).
pub async fn cut_when_told(
    mut stop_at: watch::Receiver<Option<(DateTime<Utc>, StableDecision)>>,
    measured_start: Instant,
    cut: impl Fn(Instant, StableDecision) + Send,
) {
    let Ok(told) = stop_at.wait_for(|s| s.is_some()).await else {
        return;
    };
    let Some((at, decision)) = told.clone() else {
        return;
    };
    drop(told);
    cut(
        instant_of(at, Utc::now(), Instant::now()).max(measured_start),
        decision,
    );
}

/// The instant of this clock at wall-clock `at`, given that `now_wall` is `now`; `now` when
/// `at` is already past.
pub fn instant_of(at: DateTime<Utc>, now_wall: DateTime<Utc>, now: Instant) -> Instant {
    match (at - now_wall).to_std() {
        Ok(ahead) => now + ahead,
        Err(_) => now,
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

    #[test]
    fn a_stop_instant_maps_to_this_clock_and_a_past_one_is_now() {
        let now = Instant::now();
        let wall = Utc::now();
        assert_eq!(
            instant_of(wall + chrono::Duration::milliseconds(1500), wall, now),
            now + Duration::from_millis(1500)
        );
        assert_eq!(
            instant_of(wall - chrono::Duration::seconds(3), wall, now),
            now
        );
    }

    /// The seconds are counted for the operator and, without a local stop, the watch never
    /// ends the stage however steady it is.
    #[tokio::test(start_paused = true)]
    async fn the_seconds_are_counted_and_a_run_decided_watch_never_stops() {
        let spec = StableSpec {
            window: crate::units::HumanDuration(Duration::from_secs(2)),
            band_percent: 5.0,
        };
        let start = Instant::now();
        // 100 ops each second, as the clock goes.
        let done: Arc<dyn Fn() -> u64 + Send + Sync> =
            Arc::new(move || (Instant::now() - start).as_secs() * 100);
        let seconds = Arc::new(Mutex::new(None));
        let w = tokio::spawn(watch(
            spec,
            start,
            done,
            Some(seconds.clone()),
            None::<fn(StableFigures)>,
        ));
        tokio::time::sleep(Duration::from_millis(5_500)).await;
        assert!(!w.is_finished(), "the run decides, not this worker");
        w.abort();
        let s = seconds.lock().unwrap().clone().expect("counted");
        assert_eq!(s.first, 0);
        assert_eq!(s.ops, vec![100; 5]);
    }
}
