//! The report's tables of training and checkpoint runs: per epoch (AU, samples/s, MiB/s,
//! data-wait time), the maximum-accelerators search's probes, and per checkpoint repeat (save
//! and restore time and throughput, as MLPerf Storage reports them). The same figures as the
//! tables `run` prints (`crate::training::figures`, `crate::checkpoint`), as cells.

use benchrun_api::checkpoint::{gb_per_sec, CheckpointStats};
use benchrun_api::training::{EpochFigures, TrainingStats};
use benchrun_api::training_search::SearchFigures;

use super::tables::Table;
use crate::stats::Summary;
use crate::training::figures::EPOCH_COLUMNS;

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

fn ms(e: &EpochFigures, q: f64) -> String {
    format!("{:.2} ms", e.data_wait.quantile_us(q) as f64 / 1000.0)
}

/// The tables of one summary's training and checkpoint figures (none for other workloads);
/// `prefix` names the run where a report has several.
pub fn tables(s: &Summary, prefix: &str) -> Vec<Table> {
    let mut out = vec![];
    if let Some(t) = &s.training {
        out.push(epochs(t, prefix));
        if let Some(f) = &t.search {
            out.push(search(f, prefix));
        }
    }
    if let Some(c) = &s.checkpoint {
        out.push(checkpoint(c, prefix));
    }
    out
}

/// One row per epoch, and one for all epochs when there are several. The title carries what a
/// reader needs beside the rows: the AU mark's verdict and the page cache's share.
fn epochs(t: &TrainingStats, prefix: &str) -> Table {
    let mut title = format!(
        "{prefix}training: {} accelerators, {} samples ({:.1} MiB)",
        t.accelerators,
        t.samples,
        t.dataset_bytes as f64 / (1u64 << 20) as f64
    );
    if let (Some(m), Some(p)) = (t.min_au_percent, t.passed()) {
        title += &format!(
            "; AU mark {}: {} (lowest AU of an accelerator in an epoch {})",
            pct(m),
            if p { "passed" } else { "FAILED" },
            pct(t.min_au())
        );
    }
    if let Some(c) = &t.cache {
        title += &format!(
            "; page cache {:.1}% resident at the first epoch's start, {:.1}% at the end",
            100.0 * c.start_fraction(),
            100.0 * c.end_fraction()
        );
    }
    let row = |name: String, e: &EpochFigures| {
        vec![
            name,
            pct(e.au.mean_au_percent()),
            pct(e.au.min_au_percent),
            format!("{:.1}", e.samples_per_sec()),
            format!("{:.1}", e.mib_per_sec()),
            e.steps.to_string(),
            e.errors.to_string(),
            ms(e, 0.5),
            ms(e, 0.99),
            format!("{:.2}", e.elapsed_us as f64 / 1e6),
            e.cache_cell(),
        ]
    };
    let mut rows: Vec<Vec<String>> = t
        .epochs
        .iter()
        .map(|e| row(e.epoch.to_string(), e))
        .collect();
    if t.epochs.len() > 1 {
        rows.push(row("all".into(), &t.total()));
    }
    Table {
        title,
        header: EPOCH_COLUMNS.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

/// The search's probes in the order they ran; the title gives the answer.
fn search(f: &SearchFigures, prefix: &str) -> Table {
    Table {
        title: format!(
            "{prefix}maximum-accelerators search: {} per worker at or above AU {}{}",
            f.max_accelerators,
            pct(f.mark),
            if f.at_cap {
                format!(" (the cap, {}: the storage may keep more)", f.cap)
            } else {
                String::new()
            }
        ),
        header: [
            "probe",
            "accelerators",
            "AU mean",
            "AU min",
            "samples/s",
            "MiB/s",
            "seconds",
            "mark",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect(),
        rows: f
            .probes
            .iter()
            .enumerate()
            .map(|(k, p)| {
                vec![
                    (k + 1).to_string(),
                    p.accelerators.to_string(),
                    pct(p.au_mean_percent),
                    pct(p.au_min_percent),
                    format!("{:.1}", p.samples_per_sec),
                    format!("{:.1}", p.mib_per_sec),
                    format!("{:.1}", p.seconds),
                    match (p.passed, p.complete) {
                        (true, _) => "pass",
                        (false, true) => "FAIL",
                        (false, false) => "FAIL (unfinished)",
                    }
                    .to_string(),
                ]
            })
            .collect(),
    }
}

/// One row per repeat (time as the slowest rank's, throughput as all bytes over that time),
/// and their mean when there are several.
fn checkpoint(c: &CheckpointStats, prefix: &str) -> Table {
    let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
    let mut rows: Vec<Vec<String>> = c
        .repeats
        .iter()
        .map(|r| {
            vec![
                r.repeat.to_string(),
                r.ranks.len().to_string(),
                f(r.save_seconds()),
                f(gb_per_sec(r.bytes(), r.save_seconds())),
                f(r.restore_seconds()),
                f(gb_per_sec(r.bytes(), r.restore_seconds())),
                r.errors().to_string(),
            ]
        })
        .collect();
    if c.repeats.len() > 1 {
        rows.push(vec![
            "mean".into(),
            String::new(),
            f(c.mean_save_seconds()),
            f(c.mean_save_gb_per_sec()),
            f(c.mean_restore_seconds()),
            f(c.mean_restore_gb_per_sec()),
            c.errors().to_string(),
        ]);
    }
    Table {
        title: format!(
            "{prefix}checkpoint: {:.2} GB over {} ranks, {:.3} GB a shard",
            c.model_bytes as f64 / 1e9,
            c.model_ranks,
            c.shard_bytes as f64 / 1e9
        ),
        header: [
            "repeat",
            "ranks",
            "save s",
            "save GB/s",
            "restore s",
            "restore GB/s",
            "errors",
        ]
        .iter()
        .map(|h| h.to_string())
        .collect(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_api::checkpoint::{RankTimes, RepeatFigures};
    use benchrun_api::training::AuFigures;

    fn epoch(epoch: u32, compute_us: u64, wall_us: u64) -> EpochFigures {
        let mut e = EpochFigures {
            epoch,
            samples: 100,
            bytes: 100 << 20,
            steps: 10,
            elapsed_us: 2_000_000,
            au: AuFigures::one(compute_us, wall_us),
            complete: true,
            ..Default::default()
        };
        e.data_wait.record(std::time::Duration::from_micros(1_500));
        e
    }

    #[test]
    fn a_training_run_has_a_row_per_epoch_one_for_all_and_its_verdict_in_the_title() {
        let mut s = crate::compare::tests::summary(&[100], &[1], 1.0);
        s.training = Some(TrainingStats {
            samples: 100,
            dataset_bytes: 100 << 20,
            accelerators: 1,
            epochs: vec![
                EpochFigures {
                    cache_percent_at_start: Some(2.5),
                    ..epoch(0, 1_800, 2_000)
                },
                EpochFigures {
                    cache_percent_at_start: Some(61.25),
                    ..epoch(1, 1_600, 2_000)
                },
            ],
            min_au_percent: Some(85.0),
            ..Default::default()
        });
        let t = tables(&s, "");
        assert_eq!(t.len(), 1, "{t:#?}");
        let t = &t[0];
        assert_eq!(t.rows.len(), 3, "{t:#?}");
        assert_eq!(
            t.rows[0][..5],
            ["0", "90.0%", "90.0%", "50.0", "50.0"].map(String::from)
        );
        assert_eq!(t.rows[1][1], "80.0%");
        assert_eq!(
            (t.rows[2][0].as_str(), t.rows[2][1].as_str()),
            ("all", "85.0%")
        );
        // One recorded wait of 1.5 ms: both quantiles are that value (HDR precision).
        assert_eq!(t.rows[0][7], "1.50 ms");
        // The page cache's share at each epoch's start; the most of any in `all`.
        assert_eq!(t.header[10], "cached");
        let cached: Vec<&str> = t.rows.iter().map(|r| r[10].as_str()).collect();
        assert_eq!(cached, ["2.5%", "61.2%", "61.2%"]);
        assert!(
            t.title.contains("AU mark 85.0%: FAILED") && t.title.contains("80.0%"),
            "{}",
            t.title
        );
    }

    #[test]
    fn a_checkpoint_run_has_a_row_per_repeat_and_their_mean() {
        let rank = |rank, save_us, restore_us| RankTimes {
            rank,
            bytes: 1_000_000_000,
            save_us: Some(save_us),
            restore_us: Some(restore_us),
            ..Default::default()
        };
        let mut s = crate::compare::tests::summary(&[100], &[1], 1.0);
        s.checkpoint = Some(CheckpointStats {
            model_bytes: 2_000_000_000,
            model_ranks: 2,
            shard_bytes: 1_000_000_000,
            repeats: vec![
                RepeatFigures::new(
                    0,
                    vec![rank(0, 1_000_000, 500_000), rank(1, 2_000_000, 400_000)],
                ),
                RepeatFigures::new(
                    1,
                    vec![rank(0, 4_000_000, 1_000_000), rank(1, 1_000_000, 1_000_000)],
                ),
            ],
            ..Default::default()
        });
        let t = tables(&s, "run a: ");
        assert_eq!(t.len(), 1, "{t:#?}");
        let t = &t[0];
        assert!(
            t.title
                .starts_with("run a: checkpoint: 2.00 GB over 2 ranks"),
            "{}",
            t.title
        );
        // Save time is the slowest rank's; throughput is all bytes over it.
        assert_eq!(
            t.rows[0][..6],
            ["0", "2", "2.000", "1.000", "0.500", "4.000"].map(String::from)
        );
        assert_eq!(t.rows[2][0], "mean");
        assert_eq!(t.rows[2][2], "3.000");
    }

    #[test]
    fn other_workloads_have_no_such_tables() {
        assert!(tables(&crate::compare::tests::summary(&[100], &[1], 1.0), "").is_empty());
    }
}
