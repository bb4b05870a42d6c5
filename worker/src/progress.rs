//! The live progress line: elapsed/total, ops/s, MiB/s and errors, once a second.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::figures::Units;
use crate::metrics::Metrics;

/// When to print progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// A line rewritten in place when stderr is a terminal, nothing otherwise.
    Auto,
    /// One line per second, also when stderr is not a terminal (logs).
    Always,
    /// No progress line.
    Never,
}

/// What the progress line measures against: the run's length, and its warm-up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plan {
    /// The measured stage's length (`duration`).
    pub duration: Option<Duration>,
    /// Or its number of ops (`totalOps`).
    pub total_ops: Option<u64>,
    /// The warm-up before it (`warmup`): counted apart, its ops not in the measured count.
    pub warmup: Option<Duration>,
    /// Byte rates in MiB/s or MB/s (`--units`).
    pub units: Units,
}

/// Print progress until the returned handle is aborted.
pub fn spawn(
    metrics: Arc<Metrics>,
    mode: ProgressMode,
    plan: Plan,
) -> Option<tokio::task::JoinHandle<()>> {
    let tty = std::io::stderr().is_terminal();
    let in_place = match mode {
        ProgressMode::Never => return None,
        ProgressMode::Auto if !tty => return None,
        ProgressMode::Auto => true,
        ProgressMode::Always => tty,
    };
    Some(tokio::spawn(async move {
        let start = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let (mut last_ops, mut last_bytes, _) = metrics.totals();
        let mut last = Instant::now();
        // Totals when the warm-up ended, taken off the measured counts.
        let mut at_measure_start: Option<(u64, u64)> = None;
        loop {
            tick.tick().await;
            let (ops, bytes, errors) = metrics.totals();
            let dt = last.elapsed().as_secs_f64().max(1e-3);
            let elapsed = start.elapsed();
            let warming = plan.warmup.is_some_and(|w| elapsed < w);
            if !warming && at_measure_start.is_none() {
                at_measure_start = Some(if plan.warmup.is_some() {
                    (ops, errors)
                } else {
                    (0, 0)
                });
            }
            let (ops0, errors0) = at_measure_start.unwrap_or((0, 0));
            let line = format_line(
                &plan,
                elapsed,
                ops.saturating_sub(ops0),
                (ops - last_ops) as f64 / dt,
                (bytes - last_bytes) as f64 / dt / (1 << 20) as f64,
                errors.saturating_sub(errors0),
            );
            (last_ops, last_bytes, last) = (ops, bytes, Instant::now());
            let mut err = std::io::stderr().lock();
            if in_place {
                let _ = write!(err, "\r\x1b[2K{line}");
            } else {
                let _ = writeln!(err, "{line}");
            }
            let _ = err.flush();
        }
    }))
}

/// Clear an in-place progress line before printing anything else.
pub fn clear() {
    if std::io::stderr().is_terminal() {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
}

/// The progress line's text, `elapsed` since the start (warm-up included); `ops` and
/// `errors` counted from the end of the warm-up (during it, its own).
pub fn format_line(
    plan: &Plan,
    elapsed: Duration,
    ops: u64,
    ops_per_s: f64,
    mib_per_s: f64,
    errors: u64,
) -> String {
    let warmup = plan.warmup.unwrap_or_default();
    let rate = plan.units.rate_metric().format(plan.units.rate(mib_per_s));
    let rates = format!(
        "{ops_per_s:>10.1} ops/s  {rate:>9} {}  {errors} error{}",
        plan.units.rate_label(),
        if errors == 1 { "" } else { "s" }
    );
    if elapsed < warmup {
        return format!(
            "warm-up {:>3.0}s/{}s (not measured)  {rates}",
            elapsed.as_secs_f64(),
            warmup.as_secs()
        );
    }
    let measured = elapsed.saturating_sub(warmup).as_secs_f64();
    let done = match (plan.duration, plan.total_ops) {
        (Some(d), _) => format!("{measured:>5.0}s/{}s", d.as_secs()),
        (None, Some(t)) => format!("{measured:>5.0}s {ops}/{t} ops"),
        _ => format!("{measured:>5.0}s"),
    };
    format!("{done}  {rates}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_elapsed_total_rates_and_errors() {
        let plan = Plan {
            duration: Some(Duration::from_secs(10)),
            ..Plan::default()
        };
        let l = format_line(&plan, Duration::from_secs(3), 30, 10.0, 2.5, 1);
        assert_eq!(l, "    3s/10s        10.0 ops/s        2.5 MiB/s  1 error");
        let l = format_line(&plan, Duration::from_secs(3), 30, 10.0, 2.5, 2);
        assert!(l.ends_with("2 errors"), "{l}");
        let plan = Plan {
            total_ops: Some(100),
            ..Plan::default()
        };
        let l = format_line(&plan, Duration::from_secs(3), 30, 10.0, 2.5, 0);
        assert!(l.contains("30/100 ops"), "{l}");
    }

    #[test]
    fn warm_up_is_counted_apart_and_units_are_honoured() {
        let plan = Plan {
            duration: Some(Duration::from_secs(10)),
            warmup: Some(Duration::from_secs(5)),
            units: Units::Decimal,
            ..Plan::default()
        };
        let l = format_line(&plan, Duration::from_secs(2), 30, 10.0, 1.0, 0);
        assert!(l.starts_with("warm-up   2s/5s (not measured)"), "{l}");
        assert!(l.contains("1.05 MB/s"), "1 MiB/s is 1.05 MB/s: {l}");
        let l = format_line(&plan, Duration::from_secs(8), 30, 10.0, 1.0, 0);
        assert!(l.starts_with("    3s/10s"), "the measured stage's 3 s: {l}");
    }
}
