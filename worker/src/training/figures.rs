//! The accelerators' outcomes as the summary's figures ([`TrainingStats`]), and the table
//! `run` prints.

use std::fmt::Write;

use super::accel::AccOutcome;
use benchrun_api::training::{AuFigures, EpochFigures, TrainingStats};

/// One epoch's figures from its accelerators' outcomes.
pub fn epoch_figures(epoch: u32, accs: &[AccOutcome]) -> EpochFigures {
    let mut e = EpochFigures {
        epoch,
        complete: true,
        ..Default::default()
    };
    for a in accs {
        let one = EpochFigures {
            epoch,
            samples: a.samples,
            bytes: a.bytes,
            steps: a.steps,
            errors: a.errors,
            elapsed_us: a.wall.as_micros() as u64,
            au: AuFigures::one(a.compute.as_micros() as u64, a.wall.as_micros() as u64),
            data_wait: a.waits.clone(),
            complete: a.complete,
            cache_percent_at_start: None,
        };
        e.merge(&one);
    }
    e
}

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

/// The columns of a training run's epoch table, here and in a report (`report::training`).
pub const EPOCH_COLUMNS: [&str; 11] = [
    "epoch",
    "AU mean",
    "AU min",
    "samples/s",
    "MiB/s",
    "steps",
    "errors",
    "wait p50",
    "wait p99",
    "seconds",
    "cached",
];

/// The table of a training run's figures.
pub fn table(t: &TrainingStats) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ntraining: {} accelerators, {} samples ({:.1} MiB)",
        t.accelerators,
        t.samples,
        t.dataset_bytes as f64 / (1u64 << 20) as f64
    );
    let _ = writeln!(
        out,
        "{:>6} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10} {:>7} {:>7}",
        EPOCH_COLUMNS[0],
        EPOCH_COLUMNS[1],
        EPOCH_COLUMNS[2],
        EPOCH_COLUMNS[3],
        EPOCH_COLUMNS[4],
        EPOCH_COLUMNS[5],
        EPOCH_COLUMNS[6],
        EPOCH_COLUMNS[7],
        EPOCH_COLUMNS[8],
        EPOCH_COLUMNS[9],
        EPOCH_COLUMNS[10]
    );
    let row = |out: &mut String, name: String, e: &EpochFigures| {
        let ms = |q| e.data_wait.quantile_us(q) as f64 / 1000.0;
        let _ = writeln!(
            out,
            "{:>6} {:>9} {:>9} {:>10.1} {:>10.1} {:>8} {:>8} {:>8.2}ms {:>8.2}ms {:>7.2} {:>7}",
            name,
            pct(e.au.mean_au_percent()),
            pct(e.au.min_au_percent),
            e.samples_per_sec(),
            e.mib_per_sec(),
            e.steps,
            e.errors,
            ms(0.5),
            ms(0.99),
            e.elapsed_us as f64 / 1e6,
            e.cache_cell()
        );
    };
    for e in &t.epochs {
        row(&mut out, e.epoch.to_string(), e);
    }
    if t.epochs.len() > 1 {
        row(&mut out, "all".into(), &t.total());
    }
    if t.workers.len() > 1 {
        for (w, a) in &t.workers {
            let _ = writeln!(
                out,
                "worker {w}: AU mean {} min {} ({} accelerator-epochs)",
                pct(a.mean_au_percent()),
                pct(a.min_au_percent),
                a.accelerators
            );
        }
    }
    if let (Some(m), Some(p)) = (t.min_au_percent, t.passed()) {
        let _ = writeln!(
            out,
            "AU mark {}: {} (lowest AU of an accelerator in an epoch: {})",
            pct(m),
            if p { "PASSED" } else { "FAILED" },
            pct(t.min_au())
        );
    }
    if let Some(c) = &t.cache {
        let _ = writeln!(
            out,
            "page cache: {:.1}% of the dataset resident when the epochs started{}, {:.1}% when they ended ({:.1} MiB examined{})",
            100.0 * c.start_fraction(),
            if c.dropped > 0 { " (after the drop)" } else { "" },
            100.0 * c.end_fraction(),
            c.bytes as f64 / (1u64 << 20) as f64,
            match t.cache_targets.len() {
                0 | 1 => String::new(),
                n => format!(", {n} targets"),
            }
        );
    }
    if let Some(w) = t.cache_warning() {
        let _ = writeln!(out, "{w}");
    }
    out
}
