//! The live progress line: elapsed/total, ops/s, MiB/s and errors, once a second.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

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

/// Print progress until the returned handle is aborted.
pub fn spawn(
    metrics: Arc<Metrics>,
    mode: ProgressMode,
    duration: Option<Duration>,
    total_ops: Option<u64>,
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
        loop {
            tick.tick().await;
            let (ops, bytes, errors) = metrics.totals();
            let dt = last.elapsed().as_secs_f64().max(1e-3);
            let line = format_line(
                start.elapsed(),
                duration,
                ops,
                total_ops,
                (ops - last_ops) as f64 / dt,
                (bytes - last_bytes) as f64 / dt / (1 << 20) as f64,
                errors,
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

/// The progress line's text.
pub fn format_line(
    elapsed: Duration,
    duration: Option<Duration>,
    ops: u64,
    total_ops: Option<u64>,
    ops_per_s: f64,
    mib_per_s: f64,
    errors: u64,
) -> String {
    let done = match (duration, total_ops) {
        (Some(d), _) => format!("{:>5.0}s/{}s", elapsed.as_secs_f64(), d.as_secs()),
        (None, Some(t)) => format!("{:>5.0}s {ops}/{t} ops", elapsed.as_secs_f64()),
        _ => format!("{:>5.0}s", elapsed.as_secs_f64()),
    };
    format!("{done}  {ops_per_s:>10.1} ops/s  {mib_per_s:>9.1} MiB/s  {errors} errors")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_elapsed_total_rates_and_errors() {
        let l = format_line(
            Duration::from_secs(3),
            Some(Duration::from_secs(10)),
            30,
            None,
            10.0,
            2.5,
            1,
        );
        assert_eq!(l, "    3s/10s        10.0 ops/s        2.5 MiB/s  1 errors");
        let l = format_line(Duration::from_secs(3), None, 30, Some(100), 10.0, 2.5, 0);
        assert!(l.contains("30/100 ops"), "{l}");
    }
}
