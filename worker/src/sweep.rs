//! Running a [`Matrix`](crate::matrix::Matrix) standalone: each combination in turn, on its own
//! dataset, with an optional unmeasured warm-up and repeats, then one table of all of them with
//! each one's change against the baseline combination.

use std::fmt::Write;
use std::future::Future;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_yaml::Mapping;

use crate::figures::Units;
use crate::matrix::Planned;
use crate::stats::{OpReport, Summary};
use crate::units::HumanDuration;
use crate::{Engine, EngineError, Metrics};
use benchrun_api::change::{median_by, percent_text, relative};

/// Every combination's results, as `run --summary` writes them for a matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepResult {
    /// Index into `combinations` of the one the others are compared with.
    pub baseline: usize,
    /// Every combination, in run order.
    pub combinations: Vec<CombinationResult>,
}

/// One combination: its parameter values and one summary per repeat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CombinationResult {
    /// `path=value, ...`, as in the table.
    pub name: String,
    /// Parameter path to its value in this combination.
    pub parameters: Mapping,
    /// One summary per repeat, in order.
    pub runs: Vec<Summary>,
}

impl CombinationResult {
    /// The repeat that stands for the combination: the median by throughput (the lower one
    /// of the two middle repeats for an even count).
    pub fn representative(&self) -> Option<&Summary> {
        median_by(&self.runs, ops_per_sec).map(|i| &self.runs[i])
    }
}

fn all_ops(s: &Summary) -> OpReport {
    s.total().report(s.elapsed_seconds)
}

fn ops_per_sec(s: &Summary) -> f64 {
    all_ops(s).ops_per_sec
}

/// Run every planned combination in turn. `stop` resolves on Ctrl-C or SIGTERM: the running
/// combination ends with a partial summary and no further combination starts.
pub async fn run(
    planned: Vec<Planned>,
    baseline: usize,
    repeats: u32,
    warmup: Option<HumanDuration>,
    worker_id: &str,
    keep_dataset: bool,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<SweepResult, EngineError> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        let _ = stop_tx.send(true);
    });
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let n = planned.len();
    let mut out = SweepResult {
        baseline,
        combinations: vec![],
    };
    for (k, p) in planned.into_iter().enumerate() {
        let name = p.combination.to_string();
        eprintln!("combination {} of {n}: {name}", k + 1);
        let parameters: Mapping = p
            .combination
            .0
            .iter()
            .map(|(path, v)| (path.clone().into(), v.clone()))
            .collect();
        let cleanup = p.workload.dataset.cleanup && !keep_dataset;
        let metrics = Arc::new(Metrics::new());
        let engine = Engine::open(p.workload.clone(), metrics.clone(), worker_id).await?;
        let dataset = engine.prepare().await?;
        if let Some(w) = warmup {
            let mut warm = p.workload.clone();
            warm.duration = Some(w);
            warm.total_ops = None;
            // All of this run is warm-up: the workload's own would have to fit in it.
            warm.warmup = None;
            let warm_engine = engine.with_workload(warm)?;
            warm_engine.run(&dataset, None, stopped()).await?;
        }
        let mut runs = vec![];
        for r in 0..repeats {
            if repeats > 1 {
                eprintln!("  repeat {} of {repeats}", r + 1);
            }
            let s = engine.run(&dataset, None, stopped()).await?;
            let partial = s.partial;
            runs.push(s);
            if partial {
                break;
            }
        }
        if cleanup {
            if let Err(e) = engine.cleanup().await {
                eprintln!("warning: cleanup of combination {} failed: {e}", k + 1);
            }
        }
        let partial = runs.iter().any(|s| s.partial);
        out.combinations.push(CombinationResult {
            name,
            parameters,
            runs,
        });
        if partial {
            break;
        }
    }
    Ok(out)
}

/// The sweep as a table: one row per combination (its representative repeat), with ops/s,
/// the byte rate in `units`, p50, p99, errors, requests per op, client CPU per GiB and in
/// percent of a core, the client's minor and major page faults (buffered against O_DIRECT
/// reads show here), and the change of ops/s and p99 against the baseline combination.
pub fn table(r: &SweepResult, units: Units) -> String {
    let mut out = String::new();
    let base = r
        .combinations
        .get(r.baseline)
        .and_then(|c| c.representative())
        .map(all_ops);
    let w = r
        .combinations
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("combination".len());
    let _ = writeln!(
        out,
        "{:>3}  {:<w$} {:>10} {:>9} {:>8} {:>8} {:>7} {:>7} {:>9} {:>6} {:>10} {:>8} {:>8} {:>8}",
        "#",
        "combination",
        "ops/s",
        units.rate_label(),
        "p50 ms",
        "p99 ms",
        "errors",
        "req/op",
        "CPU-s/GiB",
        "CPU %",
        "min flt",
        "maj flt",
        "d ops/s",
        "d p99"
    );
    let rate = units.rate_metric();
    for (i, c) in r.combinations.iter().enumerate() {
        let Some(s) = c.representative() else {
            continue;
        };
        let t = all_ops(s);
        let (d_ops, d_p99) = match &base {
            _ if i == r.baseline => ("base".to_string(), "base".to_string()),
            Some(b) => (
                percent(t.ops_per_sec, b.ops_per_sec),
                percent(t.p99_ms, b.p99_ms),
            ),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{:>3}  {:<w$} {:>10.1} {:>9} {:>8.3} {:>8.3} {:>7} {:>7.2} {:>9.3} {:>6.1} {:>10} {:>8} {:>8} {:>8}{}",
            i + 1,
            c.name,
            t.ops_per_sec,
            rate.format(units.rate(t.mib_per_sec)),
            t.p50_ms,
            t.p99_ms,
            t.errors,
            t.requests_per_op,
            s.cpu_seconds_per_gib().unwrap_or(0.0),
            s.cpu_percent_of_a_core().unwrap_or(0.0),
            s.process.minor_faults,
            s.process.major_faults,
            d_ops,
            d_p99,
            if s.partial {
                "  (partial)".to_string()
            } else if s.stopped_by.starts_with("stable") {
                format!("  (stable after {:.0}s)", s.elapsed_seconds)
            } else {
                String::new()
            }
        );
    }
    if r.combinations.iter().any(|c| c.runs.len() > 1) {
        let _ = writeln!(
            out,
            "each row is the median of its repeats by ops/s; every repeat is in the JSON summary"
        );
    }
    out
}

/// Relative change in percent, signed, or `-` without a base.
fn percent(now: f64, base: f64) -> String {
    relative(base, now).map_or_else(|| "-".into(), percent_text)
}
