//! When each lifecycle of a control-plane run starts.
//!
//! Closed loop (`concurrency` alone): lifecycle i starts as soon as one of the `concurrency`
//! slots is free. Open loop (`ratePerSecond` R): lifecycle i is due `i / R` seconds after the
//! first, whether or not the earlier ones have finished (pods arriving in a scale-up do not
//! wait for each other), and starts then unless `concurrency` lifecycles are in flight (the
//! cap): it then starts when one ends, and counts as late. Due times are computed from the
//! start, never by adding intervals, so rounding does not accumulate; tokio's timer wakes
//! with 1 ms resolution, which is what "due" means here.
//!
//! After a lifecycle fails, none starts (those in flight finish): a broken class fails the run
//! within about one timeout.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::crd::control_plane::Arrivals;

/// A start later than this after its due time counts as late: ten ticks of the timer.
pub const LATE: Duration = Duration::from_millis(10);

/// The due times of an open loop; none in a closed loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    rate: Option<f64>,
}

impl Pace {
    /// At `rate` lifecycles per second (open loop), or closed loop (`None`).
    pub fn new(rate: Option<f64>) -> Self {
        Self {
            rate: rate.filter(|r| r.is_finite() && *r > 0.0),
        }
    }

    /// When lifecycle `i` is due, after the first's start; `None` in a closed loop (as soon as
    /// a slot is free).
    pub fn due(&self, i: usize) -> Option<Duration> {
        let r = self.rate?;
        Some(Duration::try_from_secs_f64(i as f64 / r).unwrap_or(Duration::MAX))
    }
}

/// Start `count` lifecycles by `pace`, at most `cap` in flight, each the future `start(i)`
/// gives (true when it ran without an error), and wait for all of them. With an open loop,
/// says how they kept to their due times.
pub async fn drive<F, Fut>(count: usize, pace: Pace, cap: usize, mut start: F) -> Option<Arrivals>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = bool> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(cap.max(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let mut arrivals = pace.rate.map(|rate_per_second| Arrivals {
        rate_per_second,
        ..Arrivals::default()
    });
    let mut set = tokio::task::JoinSet::new();
    for i in 0..count {
        let due = pace.due(i).map(|d| t0 + d);
        if let Some(due) = due {
            tokio::time::sleep_until(due).await;
        }
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if let (Some(a), Some(due)) = (arrivals.as_mut(), due) {
            note(a, Instant::now().saturating_duration_since(due));
        }
        let (lifecycle, stop) = (start(i), stop.clone());
        set.spawn(async move {
            if !lifecycle.await {
                stop.store(true, Ordering::SeqCst);
            }
            drop(slot);
        });
    }
    while set.join_next().await.is_some() {}
    arrivals
}

/// One lifecycle started `lag` after it was due.
fn note(a: &mut Arrivals, lag: Duration) {
    a.started += 1;
    if lag > LATE {
        a.late += 1;
    }
    a.max_lag_ms = a.max_lag_ms.max(lag.as_micros() as f64 / 1000.0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn open_loop_due_times_are_computed_from_the_start() {
        let p = Pace::new(Some(3.0));
        assert_eq!(p.due(0), Some(Duration::ZERO));
        // i / R, not R additions of a rounded interval: lifecycle 3000 is due at 1000 s.
        assert_eq!(p.due(3000), Some(Duration::from_secs(1000)));
        assert_eq!(p.due(1), Some(Duration::from_secs_f64(1.0 / 3.0)));
        assert_eq!(Pace::new(Some(0.5)).due(3), Some(Duration::from_secs(6)));
        assert_eq!(Pace::new(None).due(7), None);
        // No rate that could not give due times.
        assert_eq!(Pace::new(Some(0.0)).due(1), None);
        assert_eq!(Pace::new(Some(f64::NAN)).due(1), None);
    }

    #[test]
    fn a_start_past_ten_ms_of_its_due_time_is_late() {
        let mut a = Arrivals::default();
        note(&mut a, Duration::from_millis(3));
        note(&mut a, Duration::from_micros(10_500));
        note(&mut a, Duration::from_millis(10));
        assert_eq!((a.started, a.late, a.max_lag_ms), (3, 1, 10.5));
    }

    /// Lifecycles whose outcome the test decides, one at a time: what `drive` starts is
    /// checked after each decision (each wait is for a start the driver must make, with a
    /// generous bound; no assertion depends on how long anything took).
    struct Gates {
        started: Arc<Mutex<Vec<usize>>>,
        outcomes: Vec<tokio::sync::oneshot::Sender<bool>>,
    }

    fn gated(
        count: usize,
    ) -> (
        Gates,
        impl FnMut(usize) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send>>,
    ) {
        let started = Arc::new(Mutex::new(vec![]));
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..count)
            .map(|_| tokio::sync::oneshot::channel::<bool>())
            .unzip();
        let rxs: Vec<_> = rxs.into_iter().map(|r| Mutex::new(Some(r))).collect();
        let s = started.clone();
        let start = move |i: usize| {
            s.lock().unwrap().push(i);
            let rx = rxs[i].lock().unwrap().take().expect("started once");
            Box::pin(async move { rx.await.unwrap_or(false) })
                as std::pin::Pin<Box<dyn Future<Output = bool> + Send>>
        };
        (
            Gates {
                started,
                outcomes: txs,
            },
            start,
        )
    }

    impl Gates {
        /// Wait until `want.len()` lifecycles have started; then they are exactly `want`.
        async fn expect_started(&self, want: &[usize]) {
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.started.lock().unwrap().len() < want.len() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // A few more turns: a start beyond `want` (the cap not held) would show.
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
            assert_eq!(*self.started.lock().unwrap(), want);
        }

        fn end(&mut self, i: usize, ok: bool) {
            let tx = std::mem::replace(&mut self.outcomes[i], tokio::sync::oneshot::channel().0);
            tx.send(ok).expect("lifecycle waiting");
        }
    }

    #[tokio::test]
    async fn the_cap_holds_and_after_a_failure_nothing_new_starts() {
        let (mut g, start) = gated(10);
        let driver = tokio::spawn(drive(10, Pace::new(None), 2, start));
        g.expect_started(&[0, 1]).await;
        g.end(0, true);
        g.expect_started(&[0, 1, 2]).await;
        // 2 fails while 1 is in flight: when 1 ends, its slot starts nothing.
        g.end(2, false);
        g.end(1, true);
        assert_eq!(driver.await.expect("driver"), None);
        assert_eq!(*g.started.lock().unwrap(), [0, 1, 2]);
    }

    #[tokio::test]
    async fn an_open_loop_starts_every_due_lifecycle_within_its_cap() {
        // 1000/s: every lifecycle is due within 2 ms, so the cap of 1 decides the starts.
        let (mut g, start) = gated(3);
        let driver = tokio::spawn(drive(3, Pace::new(Some(1000.0)), 1, start));
        g.expect_started(&[0]).await;
        g.end(0, true);
        g.expect_started(&[0, 1]).await;
        g.end(1, true);
        g.expect_started(&[0, 1, 2]).await;
        g.end(2, true);
        let a = driver.await.expect("driver").expect("open loop");
        assert_eq!((a.rate_per_second, a.started), (1000.0, 3));
        assert!(a.late <= a.started);
    }
}
