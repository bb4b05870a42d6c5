//! When each operation may start, and when the measured stage ends.
//!
//! Every operation takes a ticket. Closed loop (no rate limit): a ticket means "go now".
//! Open loop (rate limit R): ticket *i* is due at `start + i / R`, whoever takes it. A task
//! sleeps until its ticket is due; if the target is slow and tickets are overdue, they run at
//! once and their latency is still measured from the due time, so queueing delay shows up in
//! the percentiles instead of silently lowering the offered load (no coordinated omission).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A permission to run one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub index: u64,
    /// When the operation should start; latency is measured from here in open loop.
    pub due: Instant,
}

/// Hands out tickets until the duration or op budget is spent or someone calls [`stop`].
///
/// [`stop`]: Schedule::stop
#[derive(Debug)]
pub struct Schedule {
    start: Instant,
    deadline: Option<Instant>,
    max_ops: Option<u64>,
    interval: Option<Duration>,
    next: AtomicU64,
    stopped: AtomicBool,
}

impl Schedule {
    pub fn new(
        start: Instant,
        duration: Option<Duration>,
        max_ops: Option<u64>,
        rate: Option<f64>,
    ) -> Self {
        Self {
            start,
            deadline: duration.map(|d| start + d),
            max_ops,
            interval: rate.map(|r| Duration::from_secs_f64(1.0 / r)),
            next: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    pub fn start(&self) -> Instant {
        self.start
    }

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
            Some(iv) => self.start + iv.mul_f64(index as f64),
            None => now,
        };
        if self.deadline.is_some_and(|d| due >= d || now >= d) {
            return None;
        }
        Some(Ticket { index, due })
    }

    /// End the stage: no more tickets.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn open_loop_tickets_are_due_at_the_rate() {
        let start = Instant::now();
        let s = Schedule::new(start, Some(Duration::from_secs(1)), None, Some(100.0));
        let mut dues = vec![];
        while let Some(t) = s.next(start) {
            dues.push(t.due - start);
        }
        assert_eq!(dues.len(), 100, "100 ops/s for 1 s");
        assert_eq!(dues[1], Duration::from_millis(10));
        assert_eq!(dues[99], Duration::from_millis(990));
    }

    #[tokio::test(start_paused = true)]
    async fn op_budget_and_stop_end_the_stage() {
        let now = Instant::now();
        let s = Schedule::new(now, None, Some(3), None);
        assert_eq!((0..10).filter_map(|_| s.next(now)).count(), 3);
        let s = Schedule::new(now, Some(Duration::from_secs(5)), None, None);
        assert!(s.next(now).is_some());
        s.stop();
        assert!(s.next(now).is_none());
        let s = Schedule::new(now, Some(Duration::from_secs(5)), None, None);
        assert!(
            s.next(now + Duration::from_secs(5)).is_none(),
            "past the deadline"
        );
    }
}
