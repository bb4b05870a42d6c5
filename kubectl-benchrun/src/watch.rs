//! Following a run until it finishes: its status polled once a second and shown as one
//! progress line on stderr (phase, a bar over the duration, ops and errors, ops/s over the
//! last status update, the live throughput, workers by phase). On a terminal the line is
//! redrawn in place; otherwise a line is printed whenever it changes, so CI logs stay short.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use benchrun_operator::crd::{BenchmarkRun, Phase};
use kube::Api;

use crate::connect::Target;

/// How often the status is read.
const POLL: Duration = Duration::from_secs(1);
/// Consecutive failed reads before giving up (an API server restart takes a few seconds).
const MAX_FAILED_READS: u32 = 30;
/// A run still without any status after this long: say the operator may not be running.
const NO_STATUS_HINT: Duration = Duration::from_secs(30);
/// Width of the progress bar.
const BAR: usize = 20;

/// The progress display of one followed run.
pub struct View {
    tty: bool,
    last: String,
    /// (elapsed seconds, ops) of the previous progress update, for the per-second rate.
    sample: Option<(f64, u64)>,
    rate: Option<f64>,
}

impl Default for View {
    fn default() -> Self {
        View {
            tty: std::io::stderr().is_terminal(),
            last: String::new(),
            sample: None,
            rate: None,
        }
    }
}

impl View {
    /// Show the run's status.
    pub fn show(&mut self, run: &BenchmarkRun) {
        if let Some(p) = run.status.as_ref().and_then(|s| s.progress.as_ref()) {
            match self.sample {
                Some((e, n)) if p.elapsed_seconds > e + 0.5 && p.ops >= n => {
                    self.rate = Some((p.ops - n) as f64 / (p.elapsed_seconds - e));
                    self.sample = Some((p.elapsed_seconds, p.ops));
                }
                Some(_) => {}
                None => self.sample = Some((p.elapsed_seconds, p.ops)),
            }
        }
        let line = status_line(run, self.rate);
        if line == self.last {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.last = line;
    }

    /// End the in-place line before anything else is printed.
    pub fn done(&mut self) {
        if self.tty && !self.last.is_empty() {
            eprintln!();
        }
        self.last.clear();
    }
}

/// The progress line of a run (pure: tested without a cluster).
pub fn status_line(run: &BenchmarkRun, rate: Option<f64>) -> String {
    let name = run.metadata.name.clone().unwrap_or_default();
    let Some(st) = run.status.as_ref() else {
        return format!("{name}: Pending (no status yet)");
    };
    let mut parts = vec![format!("{name}: {}", st.phase.as_str())];
    let duration = run.spec.workload.duration.map(|d| d.0.as_secs_f64());
    if let Some(m) = &st.matrix {
        parts.push(format!("combinations {}", m.progress));
    }
    if let Some(p) = &st.progress {
        if let Some(d) = duration.filter(|d| *d > 0.0) {
            let frac = (p.elapsed_seconds / d).clamp(0.0, 1.0);
            let filled = (frac * BAR as f64).round() as usize;
            parts.push(format!(
                "[{}{}] {:>3.0}% {:.0}s/{:.0}s",
                "#".repeat(filled),
                ".".repeat(BAR - filled),
                frac * 100.0,
                p.elapsed_seconds,
                d
            ));
        } else {
            parts.push(format!("{:.0}s", p.elapsed_seconds));
        }
        parts.push(format!(
            "{} ops, {} error{}",
            p.ops,
            p.errors,
            if p.errors == 1 { "" } else { "s" }
        ));
        match rate {
            Some(r) => parts.push(format!("{r:.0} ops/s now")),
            None => parts.push(format!("{:.0} ops/s", p.ops_per_sec)),
        }
    }
    // While running, the live throughput repeats the ops/s above unless it has MiB/s.
    if let Some(t) = st
        .throughput
        .as_ref()
        .filter(|t| st.progress.is_none() || t.contains("MiB/s"))
    {
        parts.push(t.clone());
    }
    if !st.worker_phases.is_empty() {
        let w: Vec<String> = st
            .worker_phases
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.push(format!("workers {}", w.join(" ")));
    } else if let Some(s) = &st.workers_summary {
        parts.push(format!("workers {s}"));
    }
    parts.join("  ")
}

/// Poll run `name` until it has finished; returns it as it ended.
pub async fn follow(t: &Target, name: &str, view: &mut View) -> Result<BenchmarkRun> {
    let api: Api<BenchmarkRun> = t.api();
    let since = Instant::now();
    let mut failed = 0;
    let mut hinted = false;
    loop {
        let run = match api.get_opt(name).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                view.done();
                bail!("run {name} was deleted before it finished");
            }
            Err(e) => {
                failed += 1;
                if failed >= MAX_FAILED_READS {
                    view.done();
                    return Err(anyhow::Error::new(e).context(format!(
                        "reading run {name} ({failed} attempts in a row failed)"
                    )));
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        failed = 0;
        view.show(&run);
        let phase = run.status.as_ref().map(|s| s.phase);
        if phase.is_some_and(Phase::is_finished) {
            view.done();
            return Ok(run);
        }
        if phase.is_none() && !hinted && since.elapsed() > NO_STATUS_HINT {
            hinted = true;
            view.done();
            eprintln!(
                "note: run {name} has no status after {}s: is the benchrun operator running and watching namespace {}?",
                NO_STATUS_HINT.as_secs(),
                t.namespace
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_operator::crd::{BenchmarkRunStatus, Progress};

    #[test]
    fn the_line_shows_phase_bar_rates_and_workers() {
        let spec = serde_yaml::from_str(
            "workload: {target: file:///data/x, duration: 10s, ops: [{op: get}]}",
        )
        .unwrap();
        let mut run = BenchmarkRun::new("r1", spec);
        assert_eq!(status_line(&run, None), "r1: Pending (no status yet)");
        run.status = Some(BenchmarkRunStatus {
            phase: Phase::Running,
            progress: Some(Progress {
                elapsed_seconds: 5.0,
                ops: 1000,
                errors: 2,
                ops_per_sec: 200.0,
            }),
            throughput: Some("200 op/s, 3.1 MiB/s".into()),
            worker_phases: [("Running".to_string(), 2)].into(),
            ..Default::default()
        });
        assert_eq!(
            status_line(&run, Some(250.0)),
            "r1: Running  [##########..........]  50% 5s/10s  1000 ops, 2 errors  250 ops/s now  200 op/s, 3.1 MiB/s  workers Running=2"
        );
        run.status = Some(BenchmarkRunStatus {
            phase: Phase::Running,
            progress: Some(Progress {
                elapsed_seconds: 5.0,
                ops: 1000,
                errors: 2,
                ops_per_sec: 200.0,
            }),
            throughput: Some("200 op/s".into()),
            worker_phases: [("Running".to_string(), 2)].into(),
            ..Default::default()
        });
        assert_eq!(
            status_line(&run, None),
            "r1: Running  [##########..........]  50% 5s/10s  1000 ops, 2 errors  200 ops/s  workers Running=2",
            "no repeated ops/s"
        );
        let mut v = View {
            tty: false,
            ..View::default()
        };
        v.show(&run);
        run.status.as_mut().unwrap().progress = Some(Progress {
            elapsed_seconds: 7.0,
            ops: 1600,
            errors: 2,
            ops_per_sec: 228.0,
        });
        v.show(&run);
        assert_eq!(v.rate, Some(300.0), "600 ops in the 2 s between updates");
    }
}
