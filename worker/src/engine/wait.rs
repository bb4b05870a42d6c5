//! Waiting for an op's due time to the microsecond, not to tokio's millisecond.
//!
//! Under `rateLimit` an op's latency is measured from its due time, so whatever the wait
//! overshoots lands in every op's latency. tokio's timer rounds a deadline up to its next
//! 1 ms tick: 0-1 ms of lag on every op, most of the p50 of a 80 us block I/O. So:
//!
//! - a task on an OS thread of its own (block I/O, `file://`, see `threads.rs`) sleeps on the
//!   OS timer (nanosleep, with its thread's timer slack cut to 1 ns) until [`SPIN`] before the
//!   due time, then spins on the clock until the instant itself: the wait ends at or after the
//!   due time, a few microseconds after it on an idle machine. (It spins rather than yields:
//!   on a busy machine a thread that yields loses the CPU to whatever else is runnable for a
//!   whole time slice, where one that wakes from a sleep preempts it, measured below);
//! - a task on the tokio runtime (network targets) sleeps on tokio's timer until one tick
//!   ([`TOKIO_TICK`]) before the due time, then yields to the runtime in a loop until the
//!   instant.
//!
//! The cost is the spin: at most [`SPIN`] of CPU per wait on a task thread, and at most a
//! quarter of a core over all waits of a run ([`SPIN_BUDGET`]); at most
//! [`TOKIO_TICK`] on the runtime. Every wait is cut short by a stop.

use std::cell::Cell;
use std::time::Duration;

use tokio::time::Instant;

/// How long before the due time a task thread stops sleeping on the OS timer and spins: about
/// the OS sleep's overshoot on a busy machine. Measured on a shared 2-core VM (load average
/// 5-6) with 1 ns timer slack: a 400 us nanosleep wakes p50 30 us, p99 65 us late (with the
/// default 50 us slack, p50 82 us); waits of 500 us with a 50 us spin ended p90 0 us, p99
/// 5-150 us after due (the tail: other threads holding the CPU), no better with 100 us or
/// with `sched_yield` in the spin.
pub const SPIN: Duration = Duration::from_micros(50);

/// The share of one core all spinning may cost, whatever the rate: a wait spins at most
/// this share of the interval between due times, so at rate R the spins take at most
/// `R * interval / 4` = a quarter of a core (at 52,000 ops/s over 4 tasks, spinning the full
/// [`SPIN`] took 2.6 cores of a 2-core machine, and the tasks fell behind).
pub const SPIN_BUDGET: f64 = 0.25;

/// How long a wait spins before a due time, for due times `interval` apart: [`SPIN`], or less
/// at high rates (see [`SPIN_BUDGET`]); [`SPIN`] in closed loop (no interval).
pub fn spin_for(interval: Option<Duration>) -> Duration {
    interval.map_or(SPIN, |iv| SPIN.min(iv.mul_f64(SPIN_BUDGET)))
}

/// tokio's timer resolution: a deadline is rounded up to the next tick of 1 ms.
pub const TOKIO_TICK: Duration = Duration::from_millis(1);

/// The longest single OS sleep, so that a stop ends a long wait within about this long.
const CHUNK: Duration = Duration::from_millis(5);

thread_local! {
    /// Whether this thread runs one task alone (set by `threads::spawn`): blocking it in a wait
    /// blocks nothing else.
    static OWN_THREAD: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread's timer slack was already cut to 1 ns.
    static SLACK_CUT: Cell<bool> = const { Cell::new(false) };
}

/// Mark the current thread as one task's own: its waits block it on the OS timer, whose
/// slack for this thread is cut to 1 ns (also for its io_uring waits with a timeout).
pub fn mark_own_thread() {
    OWN_THREAD.with(|o| o.set(true));
    cut_timer_slack();
}

/// Whether the current thread is one task's own.
pub fn on_own_thread() -> bool {
    OWN_THREAD.with(Cell::get)
}

/// What a wait needs of a clock: the time, a sleep, and a pause while spinning. The real one
/// is [`OsClock`]; tests give one they control.
pub trait Clock {
    fn now(&self) -> Instant;
    /// Sleep about `d` (maybe longer, never much shorter).
    fn sleep(&self, d: Duration);
    /// One turn of the spin.
    fn pause(&self);
}

/// The OS's monotonic clock and timer, as a task thread sees them.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsClock;

impl Clock for OsClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, d: Duration) {
        cut_timer_slack();
        std::thread::sleep(d);
    }

    fn pause(&self) {
        std::hint::spin_loop();
    }
}

/// Cut this thread's timer slack (by default 50 us, added to every OS sleep) to 1 ns, once.
fn cut_timer_slack() {
    SLACK_CUT.with(|done| {
        if !done.replace(true) {
            // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread's slack.
            // On failure the slack stays at its default: waits are less precise, not wrong.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        }
    });
}

/// Block the thread until `clock` reads `due` or later, or until `stopped()` says so (then
/// true). OS sleeps (of at most 5 ms each, so a stop is seen) end `spin` before `due`
/// ([`spin_for`]), then it spins: returns `false` only once `clock.now() >= due`.
pub fn block_until(
    clock: &impl Clock,
    due: Instant,
    spin: Duration,
    stopped: impl Fn() -> bool,
) -> bool {
    loop {
        if stopped() {
            return true;
        }
        let left = due.saturating_duration_since(clock.now());
        if left.is_zero() {
            return false;
        }
        match left.checked_sub(spin) {
            Some(far) if !far.is_zero() => clock.sleep(far.min(CHUNK)),
            _ => clock.pause(),
        }
    }
}

/// On the tokio runtime: sleep on tokio's timer until [`TOKIO_TICK`] before `due` (or until
/// `stop` completes: then true), then yield to the runtime until `due`.
pub async fn until_on_runtime(
    due: Instant,
    stop: impl std::future::Future<Output = ()>,
    stopped: impl Fn() -> bool,
) -> bool {
    if let Some(coarse) = due.checked_sub(TOKIO_TICK) {
        if coarse > Instant::now() {
            tokio::select! {
                _ = tokio::time::sleep_until(coarse) => {}
                _ = stop => return true,
            }
        }
    }
    while Instant::now() < due {
        if stopped() {
            return true;
        }
        tokio::task::yield_now().await;
    }
    stopped()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A clock that moves only when slept on (by the time asked plus a set overshoot) or
    /// paused on (by a set step), and keeps what it was asked.
    struct FakeClock {
        now: Cell<Instant>,
        overshoot: Duration,
        step: Duration,
        sleeps: RefCell<Vec<(Duration, Duration)>>,
        pauses: Cell<u32>,
    }

    impl FakeClock {
        fn new(start: Instant, overshoot: Duration, step: Duration) -> Self {
            Self {
                now: Cell::new(start),
                overshoot,
                step,
                sleeps: RefCell::new(vec![]),
                pauses: Cell::new(0),
            }
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            self.now.get()
        }
        fn sleep(&self, d: Duration) {
            let at = self.now.get();
            self.now.set(at + d + self.overshoot);
            self.sleeps.borrow_mut().push((d, self.now.get() - at));
        }
        fn pause(&self) {
            self.pauses.set(self.pauses.get() + 1);
            self.now.set(self.now.get() + self.step);
        }
    }

    #[test]
    fn a_wait_ends_at_or_after_the_due_time_to_the_microsecond() {
        let start = Instant::now();
        // A due time between two milliseconds: nothing may round it to one.
        let due = start + Duration::from_micros(1_234) + Duration::from_nanos(567);
        for overshoot_us in [0, 20, 49, 80] {
            let overshoot = Duration::from_micros(overshoot_us);
            let c = FakeClock::new(start, overshoot, Duration::from_nanos(300));
            assert!(!block_until(&c, due, SPIN, || false));
            let end = c.now();
            assert!(end >= due, "ended {:?} before due", due - end);
            // One OS sleep, of exactly the time to SPIN before due, in nanoseconds.
            let sleeps = c.sleeps.borrow();
            assert_eq!(sleeps[0].0, due - start - SPIN);
            assert_eq!(sleeps.len(), 1, "{sleeps:?}");
            if overshoot < SPIN {
                // The rest is spun, to within one turn of the spin.
                assert!(c.pauses.get() > 0);
                assert!(end - due <= Duration::from_nanos(300), "{:?}", end - due);
            } else {
                // A sleep that overshot past the due time: late by what it overshot.
                assert_eq!(c.pauses.get(), 0);
                assert_eq!(end - due, overshoot - SPIN);
            }
        }
    }

    #[test]
    fn the_spin_costs_at_most_a_quarter_core_at_any_rate() {
        assert_eq!(spin_for(None), SPIN);
        assert_eq!(spin_for(Some(Duration::from_micros(500))), SPIN);
        assert_eq!(
            spin_for(Some(Duration::from_micros(20))),
            Duration::from_micros(5)
        );
        // Spun 5 us before a due time 1.2345 ms away: one sleep of the rest, to the ns.
        let start = Instant::now();
        let c = FakeClock::new(start, Duration::ZERO, Duration::from_nanos(100));
        let due = start + Duration::from_nanos(1_234_500);
        let spin = spin_for(Some(Duration::from_micros(20)));
        assert!(!block_until(&c, due, spin, || false));
        assert_eq!(c.sleeps.borrow()[0].0, Duration::from_nanos(1_229_500));
        assert!(c.now() >= due);
    }

    #[test]
    fn a_long_wait_sleeps_in_chunks_and_a_stop_ends_it() {
        let start = Instant::now();
        let c = FakeClock::new(start, Duration::ZERO, Duration::from_micros(1));
        let due = start + Duration::from_secs(1);
        let checks = Cell::new(0);
        let stopped = block_until(&c, due, SPIN, || {
            checks.set(checks.get() + 1);
            checks.get() > 3
        });
        assert!(stopped);
        assert_eq!(
            c.now() - start,
            CHUNK * 3,
            "three sleeps of 5 ms, then stopped"
        );
        // Without a stop it gets there, never sleeping past SPIN before due.
        let c = FakeClock::new(start, Duration::ZERO, Duration::from_micros(1));
        assert!(!block_until(&c, due, SPIN, || false));
        assert!(c.now() >= due);
        assert!(c.sleeps.borrow().iter().all(|(d, _)| *d <= CHUNK));
    }

    #[test]
    fn a_due_time_already_past_returns_at_once() {
        let start = Instant::now();
        let c = FakeClock::new(start, Duration::ZERO, Duration::from_micros(1));
        assert!(!block_until(&c, start, SPIN, || false));
        assert!(!block_until(
            &c,
            start - Duration::from_millis(1),
            SPIN,
            || false
        ));
        assert_eq!((c.now(), c.pauses.get()), (start, 0));
        assert!(block_until(
            &c,
            start + Duration::from_secs(1),
            SPIN,
            || true
        ));
    }

    #[test]
    fn on_the_os_clock_a_wait_never_ends_early() {
        // Load-independent: however late the thread wakes, it must not wake before the due
        // time (the bound on how late is the benchmark's business: bench/openloop.sh).
        for us in [1, 150, 1_500] {
            let due = Instant::now() + Duration::from_micros(us);
            assert!(!block_until(&OsClock, due, SPIN, || false));
            assert!(Instant::now() >= due);
        }
    }

    #[tokio::test]
    async fn on_the_runtime_a_wait_ends_at_or_after_the_due_time() {
        // The real clock (tokio's paused one does not move while a task yields), asserting
        // only what holds under any load: never early, and a stop ends a distant wait.
        for us in [1, 300, 2_345] {
            let due = Instant::now() + Duration::from_micros(us);
            assert!(!until_on_runtime(due, std::future::pending(), || false).await);
            assert!(Instant::now() >= due);
        }
        let far = Instant::now() + Duration::from_secs(600);
        assert!(until_on_runtime(far, async {}, || false).await);
    }
}
