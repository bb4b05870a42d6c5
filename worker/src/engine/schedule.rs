//! When each operation may start, and when the measured stage ends.
//!
//! Every operation takes a ticket. Closed loop (no rate limit): a ticket means "go now".
//! Open loop (rate limit R): ticket *i* is due at `start + i / R`, whoever takes it. A task
//! sleeps until its ticket is due; if the target is slow and tickets are overdue, they run at
//! once and their latency is still measured from the due time, so queueing delay shows up in
//! the percentiles instead of silently lowering the offered load (no coordinated omission).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

use super::wait;

/// A permission to run one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// Position of the ticket in the stage, from 0.
    pub index: u64,
    /// When the operation should start; latency is measured from here in open loop.
    pub due: Instant,
}

/// Hands out tickets until the duration or op budget is spent or someone calls [`stop`].
///
/// [`stop`]: Schedule::stop
#[derive(Debug)]
pub struct Schedule {
    /// Set once, by [`Schedule::begin`], when the tasks are let go: everything done before
    /// (threads, clients) is outside the measured stage.
    start: OnceLock<Instant>,
    /// The warm-up before the measured stage (zero: none): tickets flow through it, but the
    /// measured stage, its deadline and its offered load start after it.
    warmup: Duration,
    duration: Option<Duration>,
    max_ops: Option<u64>,
    interval: Option<Duration>,
    next: AtomicU64,
    /// An earlier end than `duration` set while running (the operator's `POST /v1/stop-at`):
    /// the stage ends there exactly as at its deadline.
    cut: OnceLock<Instant>,
    stopped: AtomicBool,
    /// Wakes tasks sleeping until their ticket is due when the stage is stopped.
    stop_signal: tokio::sync::watch::Sender<bool>,
}

impl Schedule {
    /// A schedule for `duration` or `max_ops`, at `rate` ops/s (open loop) or as fast as tasks
    /// go, from the instant given to [`begin`](Schedule::begin).
    pub fn new(duration: Option<Duration>, max_ops: Option<u64>, rate: Option<f64>) -> Self {
        Self {
            start: OnceLock::new(),
            warmup: Duration::ZERO,
            duration,
            max_ops,
            // A rate too small to give an interval (validate refuses it) gives one ticket and
            // then none, never a panic.
            interval: rate.map(|r| Duration::try_from_secs_f64(1.0 / r).unwrap_or(Duration::MAX)),
            next: AtomicU64::new(0),
            cut: OnceLock::new(),
            stopped: AtomicBool::new(false),
            stop_signal: tokio::sync::watch::channel(false).0,
        }
    }

    /// The same schedule with a warm-up of `warmup` before its measured stage.
    pub fn with_warmup(mut self, warmup: Option<Duration>) -> Self {
        self.warmup = warmup.unwrap_or_default();
        self
    }

    /// A schedule begun at `start` (tests, and callers with nothing to set up).
    pub fn starting(
        start: Instant,
        duration: Option<Duration>,
        max_ops: Option<u64>,
        rate: Option<f64>,
    ) -> Self {
        let s = Self::new(duration, max_ops, rate);
        s.begin(start);
        s
    }

    /// Start the measured stage at `start` (the first call counts).
    pub fn begin(&self, start: Instant) {
        let _ = self.start.set(start);
    }

    /// The start of the measured stage. Tasks ask only once let go, after
    /// [`begin`](Schedule::begin); before it, this is the present.
    pub fn start(&self) -> Instant {
        self.start.get().copied().unwrap_or_else(Instant::now)
    }

    /// The warm-up's length (zero without one).
    pub fn warmup(&self) -> Duration {
        self.warmup
    }

    /// Where the measured stage starts: after the warm-up.
    pub fn measured_start(&self) -> Instant {
        self.start() + self.warmup
    }

    /// Whether an op due (or finished) at `at` belongs to the warm-up.
    pub fn in_warmup(&self, at: Instant) -> bool {
        at < self.measured_start()
    }

    /// When the measured stage ends on its own: its `duration` run out, or the earlier end
    /// [`cut_at`](Schedule::cut_at) set (`None`: neither).
    pub fn deadline(&self) -> Option<Instant> {
        let by_duration = self
            .duration
            .and_then(|d| self.measured_start().checked_add(d));
        match (by_duration, self.cut.get().copied()) {
            (Some(d), Some(c)) => Some(d.min(c)),
            (d, c) => d.or(c),
        }
    }

    /// End the measured stage at `at` as if its duration ended there (the first call counts):
    /// no ticket after it, ops in flight then counted as at a deadline, and every rate over
    /// the stage up to `at`. Whether this call set it.
    pub fn cut_at(&self, at: Instant) -> bool {
        self.cut.set(at).is_ok()
    }

    /// The earlier end set by [`cut_at`](Schedule::cut_at), if any.
    pub fn cut(&self) -> Option<Instant> {
        self.cut.get().copied()
    }

    /// Whether the cut is what ended the stage: set before the duration's end, and the op
    /// count (if any) not spent. Not "the last op finished at the cut": in open loop the
    /// tasks leave at their last ticket due before it, a few milliseconds earlier.
    pub fn ended_by_cut(&self) -> bool {
        let Some(cut) = self.cut() else {
            return false;
        };
        let by_duration = self
            .duration
            .and_then(|d| self.measured_start().checked_add(d));
        let ops_left = self
            .max_ops
            .is_none_or(|m| self.next.load(Ordering::Relaxed) <= m);
        by_duration.is_none_or(|d| cut < d) && ops_left
    }

    /// Whether tickets come at a fixed rate (latency measured from when each was due).
    pub fn is_open_loop(&self) -> bool {
        self.interval.is_some()
    }

    /// The next ticket, or `None` when the stage is over.
    pub fn next(&self, now: Instant) -> Option<Ticket> {
        if self.stopped.load(Ordering::Relaxed) {
            return None;
        }
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        if self.max_ops.is_some_and(|m| index >= m) {
            return None;
        }
        let due = match self.interval {
            // Checked: a due time past what an Instant can hold means no more tickets.
            Some(iv) => Duration::try_from_secs_f64(iv.as_secs_f64() * index as f64)
                .ok()
                .and_then(|d| self.start().checked_add(d))?,
            None => now,
        };
        if self.deadline().is_some_and(|d| due >= d || now >= d) {
            return None;
        }
        Some(Ticket { index, due })
    }

    /// Open loop: how many tickets of the measured stage (after any warm-up) were due before
    /// `end` (or the deadline, if earlier), i.e. the load offered until then; `None` in
    /// closed loop, where nothing is ever due.
    pub fn due_before(&self, end: Instant) -> Option<u64> {
        let iv = self.interval?;
        let end = self.deadline().map_or(end, |d| d.min(end));
        // Tickets 0..n are due at start + i * iv < at: n = ceil(span / iv), in integer ns.
        let due = |at: Instant| {
            let span = at.saturating_duration_since(self.start());
            let n = match iv.as_nanos() {
                0 => u64::MAX,
                iv => u64::try_from(span.as_nanos().div_ceil(iv)).unwrap_or(u64::MAX),
            };
            self.max_ops.map_or(n, |m| n.min(m))
        };
        Some(due(end).saturating_sub(due(self.measured_start())))
    }

    /// End the stage: no more tickets.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.stop_signal.send_replace(true);
    }

    /// Completes once [`stop`](Schedule::stop) has been called (at once if it already was).
    pub async fn stopped(&self) {
        let mut rx = self.stop_signal.subscribe();
        // The sender lives in self, so the channel cannot close while this waits.
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Wait until `due`, or less if the stage is stopped meanwhile; true if it was stopped.
    /// Not stopped, the wait ends at `due` or after it, never before, and is not rounded to
    /// tokio's millisecond: on a task's own thread it sleeps on the OS timer and spins the
    /// last [`wait::SPIN`] (less at high rates); on the runtime it spins (yielding) the last millisecond (see
    /// `wait.rs`).
    pub async fn sleep_until(&self, due: Instant) -> bool {
        if wait::on_own_thread() {
            return wait::block_until(&wait::OsClock, due, self.spin(), || self.is_stopped());
        }
        wait::until_on_runtime(due, self.stopped(), || self.is_stopped()).await
    }

    /// How long a task thread spins before a due time ([`wait::spin_for`] the rate).
    pub fn spin(&self) -> Duration {
        wait::spin_for(self.interval)
    }

    /// Whether the stage was stopped.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_before_counts_the_offered_tickets() {
        let start = Instant::now();
        let s = Schedule::starting(start, Some(Duration::from_secs(2)), None, Some(100.0));
        assert_eq!(s.due_before(start), Some(0));
        assert_eq!(s.due_before(start + Duration::from_millis(1)), Some(1));
        assert_eq!(s.due_before(start + Duration::from_secs(1)), Some(100));
        // Never past the deadline, however late the stage ends.
        assert_eq!(s.due_before(start + Duration::from_secs(60)), Some(200));
        let capped = Schedule::starting(start, None, Some(10), Some(100.0));
        assert_eq!(capped.due_before(start + Duration::from_secs(1)), Some(10));
        let closed = Schedule::starting(start, Some(Duration::from_secs(2)), None, None);
        assert_eq!(closed.due_before(start + Duration::from_secs(1)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_warmup_comes_before_the_measured_stage_and_its_deadline() {
        let start = Instant::now();
        let s = Schedule::new(Some(Duration::from_secs(2)), None, Some(100.0))
            .with_warmup(Some(Duration::from_secs(1)));
        s.begin(start);
        assert_eq!(s.measured_start(), start + Duration::from_secs(1));
        assert!(s.in_warmup(start + Duration::from_millis(999)));
        assert!(!s.in_warmup(start + Duration::from_secs(1)));
        let mut dues = vec![];
        while let Some(t) = s.next(start) {
            dues.push(t.due - start);
        }
        // 1 s of warm-up and 2 s measured at 100 ops/s.
        assert_eq!(dues.len(), 300);
        assert_eq!(dues[299], Duration::from_millis(2_990));
        // The offered load counts the measured stage's tickets only.
        assert_eq!(s.due_before(start + Duration::from_millis(500)), Some(0));
        assert_eq!(s.due_before(start + Duration::from_millis(1_500)), Some(50));
        assert_eq!(s.due_before(start + Duration::from_secs(60)), Some(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cut_ends_the_stage_before_its_duration() {
        let start = Instant::now();
        let s = Schedule::starting(start, Some(Duration::from_secs(10)), None, Some(100.0));
        assert_eq!(s.deadline(), Some(start + Duration::from_secs(10)));
        assert!(s.cut_at(start + Duration::from_secs(2)));
        assert!(
            !s.cut_at(start + Duration::from_secs(3)),
            "the first cut counts"
        );
        assert_eq!(s.deadline(), Some(start + Duration::from_secs(2)));
        let mut n = 0;
        while s.next(start).is_some() {
            n += 1;
        }
        assert_eq!(n, 200, "100 ops/s until the cut");
        assert_eq!(s.due_before(start + Duration::from_secs(60)), Some(200));
        assert!(s.ended_by_cut());
        let uncut = Schedule::starting(start, Some(Duration::from_secs(1)), None, None);
        assert!(!uncut.ended_by_cut());
        // A cut after the duration's end changes nothing.
        let late = Schedule::starting(start, Some(Duration::from_secs(1)), None, None);
        late.cut_at(start + Duration::from_secs(5));
        assert_eq!(late.deadline(), Some(start + Duration::from_secs(1)));
        assert!(!late.ended_by_cut(), "the duration ended it first");
    }

    #[tokio::test(start_paused = true)]
    async fn open_loop_tickets_are_due_at_the_rate() {
        let start = Instant::now();
        let s = Schedule::starting(start, Some(Duration::from_secs(1)), None, Some(100.0));
        let mut dues = vec![];
        while let Some(t) = s.next(start) {
            dues.push(t.due - start);
        }
        assert_eq!(dues.len(), 100, "100 ops/s for 1 s");
        assert_eq!(dues[1], Duration::from_millis(10));
        assert_eq!(dues[99], Duration::from_millis(990));
    }

    #[tokio::test(start_paused = true)]
    async fn absurd_rates_end_the_stage_instead_of_panicking() {
        let now = Instant::now();
        let s = Schedule::starting(now, None, Some(5), Some(1e-20));
        assert!(s.next(now).is_some(), "the first ticket is due at once");
        assert!(
            s.next(now).is_none(),
            "the next would be due past any Instant"
        );
        let s = Schedule::starting(now, None, None, Some(0.0));
        assert!(s.next(now).is_some());
        assert!(s.next(now).is_none());
    }

    #[tokio::test]
    async fn a_stop_wakes_a_sleeper_waiting_for_a_distant_ticket() {
        let start = Instant::now();
        let s = std::sync::Arc::new(Schedule::starting(start, None, Some(5), Some(0.001)));
        s.next(start).unwrap();
        let t = s.next(start).unwrap();
        assert_eq!(t.due - start, Duration::from_secs(1000));
        let sleeper = {
            let s = s.clone();
            tokio::spawn(async move { s.sleep_until(t.due).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        s.stop();
        let stopped = tokio::time::timeout(Duration::from_secs(1), sleeper)
            .await
            .expect("the sleeper must wake within 1 s of the stop")
            .unwrap();
        assert!(stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn op_budget_and_stop_end_the_stage() {
        let now = Instant::now();
        let s = Schedule::starting(now, None, Some(3), None);
        assert_eq!((0..10).filter_map(|_| s.next(now)).count(), 3);
        let s = Schedule::starting(now, Some(Duration::from_secs(5)), None, None);
        assert!(s.next(now).is_some());
        s.stop();
        assert!(s.next(now).is_none());
        let s = Schedule::starting(now, Some(Duration::from_secs(5)), None, None);
        assert!(
            s.next(now + Duration::from_secs(5)).is_none(),
            "past the deadline"
        );
    }
}
