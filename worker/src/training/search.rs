//! The maximum-accelerators search (`training.search.maxAccelerators`): the most emulated
//! accelerators per worker the storage keeps at or above the AU mark.
//!
//! A full grid would cost a run per accelerator count; the search stops at the boundary
//! instead. It probes 1, 2, 4, ... accelerators (each probe a short training run of
//! `epochsPerProbe` epochs) until a probe falls below the mark or the cap is reached, then
//! bisects between the last pass and the first fail: about 2 log2(answer) probes. The answer
//! always has a passing probe with a failing probe (or the cap) one above it, so a noisy AU
//! near the boundary moves the answer by the noise's width, never past a measured failure.
//!
//! [`Bracket`] is the pure search (the api crate's: the operator drives the same one across
//! a cluster's workers, each probe a child run); [`run`] drives it with real training runs, each preparing (reusing) the dataset and starting its readers
//! before its own start instant, as a single run does.

use std::fmt::Write;
use std::future::Future;
use std::sync::Arc;

pub use benchrun_api::training_search::Bracket;
use benchrun_api::training_search::{SearchFigures, SearchProbe};

use crate::engine::EngineError;
use crate::spec::Workload;
use crate::stats::Summary;
use crate::targets::Target;

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

/// One probe as a line of the table (also printed as it finishes).
pub fn probe_line(k: usize, p: &SearchProbe) -> String {
    format!(
        "{:>5} {:>12} {:>9} {:>9} {:>10.1} {:>10.1} {:>7.1}  {}",
        k,
        p.accelerators,
        pct(p.au_mean_percent),
        pct(p.au_min_percent),
        p.samples_per_sec,
        p.mib_per_sec,
        p.seconds,
        if p.passed {
            "pass"
        } else if p.complete {
            "FAIL"
        } else {
            "FAIL (unfinished)"
        }
    )
}

fn header() -> String {
    format!(
        "{:>5} {:>12} {:>9} {:>9} {:>10} {:>10} {:>7}  {}",
        "probe", "accelerators", "AU mean", "AU min", "samples/s", "MiB/s", "seconds", "mark"
    )
}

/// The search as a table: every probe in the order it ran, then the answer.
pub fn table(f: &SearchFigures) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nmaximum-accelerators search (AU mark {}, lowest AU of an accelerator in an epoch):",
        pct(f.mark)
    );
    let _ = writeln!(out, "{}", header());
    for (k, p) in f.probes.iter().enumerate() {
        let _ = writeln!(out, "{}", probe_line(k + 1, p));
    }
    let _ = match (f.max_accelerators, f.at_cap) {
        (0, _) => writeln!(
            out,
            "max accelerators per worker: 0 (even one accelerator falls below the {} mark)",
            pct(f.mark)
        ),
        (n, true) => writeln!(
            out,
            "max accelerators per worker: at least {n} (every probe up to the cap of {} passed; raise `search.upTo` or add workers)",
            f.cap
        ),
        (n, false) => writeln!(
            out,
            "max accelerators per worker: {n} ({n} passed the {} mark, {} did not)",
            pct(f.mark),
            n + 1
        ),
    };
    out
}

/// Run the search: probes of `epochsPerProbe` epochs each, then the summary of the probe at
/// the answer (of the first probe when none passed) with `training.search` set. `stop`
/// (a signal) ends the running probe with a partial summary and starts no other.
pub async fn run(
    workload: &Workload,
    target: Arc<dyn Target>,
    opts: super::Options,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Summary, EngineError> {
    let spec = workload
        .training
        .as_ref()
        .ok_or_else(|| EngineError::Workload("not a training workload".into()))?;
    let search = spec
        .search
        .clone()
        .filter(|s| s.max_accelerators)
        .ok_or_else(|| EngineError::Workload("no `training.search` asked for".into()))?;
    let shape = spec
        .shape()
        .map_err(|(k, m)| EngineError::Workload(format!("training.{k}: {m}")))?;
    let mark = shape.min_au.ok_or_else(|| {
        EngineError::Workload("training.search: give `minAU` or a `preset` (the AU mark)".into())
    })?;
    if opts.count > 1 {
        // Every worker would have to probe the same count at once and judge the run's
        // merged AU; standalone processes cannot agree on that.
        return Err(EngineError::Workload(
            "training.search runs on one worker standalone (--workers 1): each probe's verdict is the whole run's".into(),
        ));
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        let _ = stop_tx.send(true);
    });
    let cap = search.cap(&shape, opts.count);
    let mut bracket = Bracket::new(cap);
    let mut figures = SearchFigures {
        mark,
        cap,
        ..Default::default()
    };
    // Summaries kept: the best passing probe's and the first probe's (for an answer of 0).
    let mut best: Option<Summary> = None;
    let mut first: Option<Summary> = None;
    eprintln!(
        "searching for the most accelerators per worker at or above AU {} (up to {cap}, {} epoch(s) a probe)",
        pct(mark),
        search.epochs()
    );
    eprintln!("{}", header());
    while let Some(n) = bracket.next() {
        let mut w = workload.clone();
        if let Some(t) = w.training.as_mut() {
            t.accelerators_per_worker = Some(n);
            t.epochs = Some(search.epochs());
            t.search = None;
        }
        let mut rx = stop_rx.clone();
        let stopped = async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let s = super::run(&w, target.clone(), opts.clone(), stopped).await?;
        let p = SearchProbe::of(n, &s, mark);
        eprintln!("{}", probe_line(figures.probes.len() + 1, &p));
        bracket.record(n, p.passed);
        let partial = s.partial;
        figures.probes.push(p.clone());
        if p.passed && bracket.answer() == n {
            best = Some(s);
        } else if first.is_none() && figures.probes.len() == 1 {
            first = Some(s);
        }
        if partial {
            break;
        }
    }
    figures.max_accelerators = bracket.answer();
    figures.at_cap = bracket.at_cap();
    let partial = *stop_rx.borrow();
    let mut summary = best
        .or(first)
        .ok_or_else(|| EngineError::Workload("the search ran no probe".into()))?;
    summary.partial |= partial;
    if let Some(t) = summary.training.as_mut() {
        t.search = Some(figures);
    }
    Ok(summary)
}
