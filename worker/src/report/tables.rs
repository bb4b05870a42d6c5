//! The tables of a report, as cells: the same cells become Markdown ([`super::markdown`]) or
//! aligned text ([`super::terminal`]).
//!
//! One summary: one table, one row per op and one for all ops (which carries the process
//! figures, CPU per GiB and page faults). Several summaries (runs of a parameter study, like
//! the reports' old/new or chunk-size tables): one table per op, one row per summary, each
//! figure after the first row followed by its relative difference to the first row. After
//! them, for each run whose sizes varied, its per-size tables ([`super::sizes`]), for each
//! run through two or more endpoints its per-endpoint table ([`super::endpoints`]), and for
//! each training or checkpoint run its epochs, search probes or repeats
//! ([`super::training`]).

use crate::figures::{percent, relative, scopes, Figures, Metric, Scope, Units};

use super::Run;

/// One table of cells.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// What the table covers (an op, or the run).
    pub title: String,
    /// Column names.
    pub header: Vec<String>,
    /// Cells, row by row.
    pub rows: Vec<Vec<String>>,
}

/// The figures shown for `scope`: process figures only for all ops, and only when some
/// run has them.
fn metrics(runs: &[Run], scope: Scope, units: Units) -> Vec<Metric> {
    Metric::all(units)
        .into_iter()
        .filter(|m| !m.process_wide() || scope == Scope::All)
        .filter(|m| {
            // TTFB only where some run has GETs (and not on all ops: GET's alone).
            !m.is_ttfb()
                || (scope != Scope::All
                    && runs.iter().any(|r| {
                        Figures::of(&r.summary, scope)
                            .is_some_and(|f| f.report.ttfb_p50_ms.is_some())
                    }))
        })
        .filter(|m| {
            // CPU per GiB is absent without CPU time or bytes; leave out an empty column.
            *m != Metric::CpuSecondsPerGib
                || runs.iter().any(|r| {
                    Figures::of(&r.summary, Scope::All)
                        .is_some_and(|f| f.cpu_seconds_per_gib.is_some())
                })
        })
        .filter(|m| {
            // Likewise CPU percent without CPU time.
            *m != Metric::CpuPercent
                || runs.iter().any(|r| {
                    Figures::of(&r.summary, Scope::All).is_some_and(|f| f.cpu_percent.is_some())
                })
        })
        .collect()
}

/// The tables of `runs` (one or more), byte rates in `units`.
pub fn tables(runs: &[Run], units: Units) -> Vec<Table> {
    let mut out = match runs {
        [] => vec![],
        [one] => vec![single(one, units)],
        _ => several(runs, units),
    };
    for r in runs {
        let prefix = if runs.len() > 1 {
            format!("{}: ", r.label)
        } else {
            String::new()
        };
        out.extend(super::sizes::tables(&r.summary, &prefix, units));
        out.extend(super::endpoints::table(&r.summary, &prefix, units));
        out.extend(super::training::tables(&r.summary, &prefix));
    }
    out
}

fn single(run: &Run, units: Units) -> Table {
    let all = metrics(std::slice::from_ref(run), Scope::All, units);
    let mut header = vec!["op".to_string()];
    header.extend(all.iter().map(|m| m.label().to_string()));
    let rows = scopes(&run.summary)
        .into_iter()
        .filter_map(|scope| {
            let f = Figures::of(&run.summary, scope)?;
            let mut row = vec![scope.name().to_string()];
            row.extend(
                all.iter()
                    .map(|m| f.get(*m, scope).map(|v| m.format(v)).unwrap_or_default()),
            );
            Some(row)
        })
        .collect();
    Table {
        title: format!("{} ({})", run.label, super::describe(&run.summary)),
        header,
        rows,
    }
}

fn several(runs: &[Run], units: Units) -> Vec<Table> {
    let mut all_scopes: Vec<Scope> = runs.iter().flat_map(|r| scopes(&r.summary)).collect();
    all_scopes.sort();
    all_scopes.dedup();
    // With a single op, its table and the one of all ops show the same latencies: keep the
    // op's and put the process figures there.
    let single_op = all_scopes.len() == 2;
    all_scopes
        .into_iter()
        .filter(|s| !(single_op && *s == Scope::All))
        .map(|scope| {
            let shown = if single_op {
                metrics(runs, Scope::All, units)
            } else {
                metrics(runs, scope, units)
            };
            // Process figures come from the summary whatever the op.
            let figure = |f: &Figures, m: Metric| {
                f.get(m, if m.process_wide() { Scope::All } else { scope })
            };
            let base = Figures::of(&runs[0].summary, scope);
            let mut header = vec!["run".to_string()];
            header.extend(shown.iter().map(|m| m.label().to_string()));
            let rows = runs
                .iter()
                .enumerate()
                .map(|(i, run)| {
                    let mut row = vec![run.label.clone()];
                    let Some(f) = Figures::of(&run.summary, scope) else {
                        row.extend(shown.iter().map(|_| "-".to_string()));
                        return row;
                    };
                    row.extend(shown.iter().map(|m| {
                        let Some(v) = figure(&f, *m) else {
                            return String::new();
                        };
                        let mut cell = m.format(v);
                        let rel = base
                            .as_ref()
                            .and_then(|b| figure(b, *m))
                            .and_then(|b| relative(b, v));
                        if let (true, Some(rel)) = (i > 0, rel) {
                            cell += &format!(" ({})", percent(rel));
                        }
                        cell
                    }));
                    row
                })
                .collect();
            Table {
                title: scope.name().to_string(),
                header,
                rows,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::summary;

    fn run(label: &str, lat: &[u64], elapsed: f64) -> Run {
        Run {
            label: label.into(),
            summary: summary(lat, &[1], elapsed),
        }
    }

    #[test]
    fn one_summary_is_one_row_per_op_and_one_for_all() {
        let lat: Vec<u64> = (1..=100).collect();
        let t = tables(&[run("a", &lat, 2.0)], Units::Binary);
        assert_eq!(t.len(), 1);
        assert_eq!(
            t[0].header,
            [
                "op",
                "ops/s",
                "MiB/s",
                "p50 ms",
                "p90 ms",
                "p95 ms",
                "p99 ms",
                "p99.9 ms",
                "p99.99 ms",
                "max ms",
                "errors",
                "req/op",
                "CPU s/GiB",
                "CPU %",
                "minor faults"
            ]
        );
        assert_eq!(
            t[0].rows,
            [
                vec![
                    "get", "50.0", "50.0", "0.050", "0.090", "0.095", "0.099", "0.100", "0.100",
                    "0.100", "0", "2.00", "", "", ""
                ],
                vec![
                    "all", "50.0", "50.0", "0.050", "0.090", "0.095", "0.099", "0.100", "0.100",
                    "0.100", "0", "2.00", "20.48", "100.0", "10"
                ],
            ]
        );
    }

    #[test]
    fn several_summaries_show_the_difference_to_the_first() {
        let lat: Vec<u64> = (1..=100).collect();
        let slow: Vec<u64> = (101..=150).collect();
        let t = tables(
            &[run("4MiB", &lat, 2.0), run("8MiB", &slow, 2.5)],
            Units::Binary,
        );
        // A single op: one table, with the process figures.
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].title, "get");
        assert_eq!(t[0].header[0], "run");
        assert_eq!(t[0].rows[0][..4], ["4MiB", "50.0", "50.0", "0.050"]);
        assert_eq!(
            t[0].rows[1][..4],
            ["8MiB", "20.0 (-60.0%)", "20.0 (-60.0%)", "0.125 (+150.0%)"]
        );
        assert_eq!(t[0].rows[1][12], "40.96 (+100.0%)");
        // 2 CPU seconds over 2.5 s instead of 2 s.
        assert_eq!(t[0].rows[1][13], "80.0 (-20.0%)");
        assert_eq!(t[0].rows[1][14], "10 (0.0%)");
    }

    #[test]
    fn decimal_units_show_megabytes_per_second() {
        let lat: Vec<u64> = (1..=100).collect();
        let t = tables(&[run("a", &lat, 2.0)], Units::Decimal);
        assert_eq!(t[0].header[2], "MB/s");
        // 50 MiB/s is 52.43 MB/s.
        assert_eq!(t[0].rows[0][2], "52.43");
    }

    #[test]
    fn a_run_whose_sizes_varied_gets_a_table_per_size() {
        use crate::size_buckets::record;
        use crate::spec::OpKind;
        use std::time::Duration;
        let lat: Vec<u64> = (1..=100).collect();
        let mut r = run("a", &lat, 2.0);
        let b = r.summary.sizes.entry(OpKind::Get).or_default();
        for i in 0..10u64 {
            record(b, 4096, 1, Duration::from_micros(100 + i));
        }
        record(b, 1 << 20, 1, Duration::from_millis(5));
        let t = tables(std::slice::from_ref(&r), Units::Binary);
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].title, "get by object size (successful ops)");
        assert_eq!(t[1].header[..4], ["size", "count", "ops/s", "MiB/s"]);
        assert_eq!(t[1].rows[0][..3], ["4KiB", "10", "5.0"]);
        assert_eq!(t[1].rows[1][..4], ["1MiB", "1", "0.5", "0.5"]);
        // The bucket's own histogram: its p99 is the 5 ms op (to the histogram's 3 digits).
        assert_eq!(t[1].rows[1][7], "5.003");
        // One bucket only: nothing to split, no table.
        r.summary
            .sizes
            .get_mut(&OpKind::Get)
            .unwrap()
            .remove(&(1 << 20));
        assert_eq!(tables(&[r], Units::Binary).len(), 1);
    }
}
