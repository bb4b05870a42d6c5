//! `report` on a terminal: the report tables as aligned text, and each run's seconds as a
//! sparkline (throughput, then mean latency), all runs on one scale so they compare by eye.

use std::fmt::Write;

use super::tables::{tables, Table};
use super::Run;
use crate::compare::full_seconds;
use crate::figures::Units;

const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Widest sparkline; longer timelines are averaged into this many columns.
const SPARK_WIDTH: usize = 60;

/// Rows with their relative differences (`5394.1 (-56.9%)`) split in two: the figures, and
/// under them a `vs FIRST` row of the differences, so columns stay narrow.
fn split_differences(t: &Table) -> Vec<Vec<String>> {
    let first = t
        .rows
        .first()
        .and_then(|r| r.first())
        .cloned()
        .unwrap_or_default();
    let mut out = vec![];
    for r in &t.rows {
        let split: Vec<(String, Option<String>)> = r
            .iter()
            .map(|c| match c.split_once(" (") {
                Some((v, d)) if d.ends_with(')') => {
                    (v.to_string(), Some(d.trim_end_matches(')').to_string()))
                }
                _ => (c.clone(), None),
            })
            .collect();
        out.push(split.iter().map(|c| c.0.clone()).collect());
        if split.iter().any(|c| c.1.is_some()) {
            let mut d: Vec<String> = split.into_iter().map(|c| c.1.unwrap_or_default()).collect();
            d[0] = format!("  vs {first}");
            out.push(d);
        }
    }
    out
}

/// One table as aligned columns: the first left, the others right.
pub fn table(t: &Table) -> String {
    let rows = split_differences(t);
    let t = &Table {
        title: t.title.clone(),
        header: t.header.clone(),
        rows,
    };
    let n = t.header.len();
    let width: Vec<usize> = (0..n)
        .map(|i| {
            std::iter::once(&t.header)
                .chain(&t.rows)
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in std::iter::once(&t.header).chain(&t.rows) {
        let cells: Vec<String> = (0..n)
            .map(|i| {
                let c = r.get(i).map(String::as_str).unwrap_or("");
                if i == 0 {
                    format!("{c:<w$}", w = width[i])
                } else {
                    format!("{c:>w$}", w = width[i])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

/// `values` as block characters scaled to `0..=max`, averaged down to at most
/// [`SPARK_WIDTH`] columns.
pub fn sparkline(values: &[f64], max: f64) -> String {
    let per = values.len().div_ceil(SPARK_WIDTH).max(1);
    values
        .chunks(per)
        .map(|c| {
            let v = c.iter().sum::<f64>() / c.len() as f64;
            let i = if max > 0.0 {
                ((v / max) * (BLOCKS.len() - 1) as f64).round() as usize
            } else {
                0
            };
            BLOCKS[i.min(BLOCKS.len() - 1)]
        })
        .collect()
}

/// One sparkline per run under `title`, with its min, mean and max (`decimals` of `unit`).
fn spark_block(
    out: &mut String,
    title: &str,
    unit: &str,
    decimals: usize,
    series: &[(String, Vec<f64>)],
) {
    let max = series
        .iter()
        .flat_map(|s| s.1.iter())
        .fold(0.0f64, |m, v| m.max(*v));
    if series.iter().all(|s| s.1.is_empty()) {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    let w = series
        .iter()
        .map(|s| s.0.chars().count())
        .max()
        .unwrap_or(0);
    for (label, v) in series {
        if v.is_empty() {
            let _ = writeln!(out, "  {label:<w$}  (no full second)");
            continue;
        }
        let min = v.iter().fold(f64::INFINITY, |m, x| m.min(*x));
        let top = v.iter().fold(0.0f64, |m, x| m.max(*x));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let _ = writeln!(
            out,
            "  {label:<w$}  {}  min {min:.decimals$} mean {mean:.decimals$} max {top:.decimals$} {unit}",
            sparkline(v, max)
        );
    }
}

/// The report for a terminal, byte rates in `units`.
pub fn render(runs: &[Run], units: Units) -> String {
    let mut out = String::new();
    for (i, t) in tables(runs, units).iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "{}", t.title);
        out += &table(t);
    }
    fn seconds(r: &Run) -> Vec<&crate::stats::Second> {
        full_seconds(&r.summary).collect()
    }
    let ops: Vec<(String, Vec<f64>)> = runs
        .iter()
        .map(|r| {
            (
                r.label.clone(),
                seconds(r).iter().map(|s| s.per_second(s.ops)).collect(),
            )
        })
        .collect();
    spark_block(
        &mut out,
        "ops per second (all ops, full seconds)",
        "ops/s",
        1,
        &ops,
    );
    let lat: Vec<(String, Vec<f64>)> = runs
        .iter()
        .map(|r| {
            (
                r.label.clone(),
                seconds(r)
                    .iter()
                    .filter_map(|s| s.mean_latency_ms())
                    .collect(),
            )
        })
        .collect();
    spark_block(&mut out, "mean latency per second (all ops)", "ms", 3, &lat);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let t = Table {
            title: "t".into(),
            header: vec!["op".into(), "ops/s".into()],
            rows: vec![
                vec!["get".into(), "12345.0".into()],
                vec!["all".into(), "1.0".into()],
            ],
        };
        assert_eq!(table(&t), "op     ops/s\nget  12345.0\nall      1.0\n");
    }

    #[test]
    fn differences_go_on_their_own_row() {
        let t = Table {
            title: "get".into(),
            header: vec!["run".into(), "ops/s".into(), "errors".into()],
            rows: vec![
                vec!["4MiB".into(), "2635.0".into(), "0".into()],
                vec!["8MiB".into(), "1947.0 (-26.1%)".into(), "0".into()],
            ],
        };
        assert_eq!(
            table(&t),
            "run         ops/s  errors\n4MiB       2635.0       0\n8MiB       1947.0       0\n  vs 4MiB  -26.1%\n"
        );
    }

    #[test]
    fn sparklines_scale_to_the_common_maximum_and_fit_the_width() {
        assert_eq!(sparkline(&[0.0, 50.0, 100.0], 100.0), "▁▅█");
        assert_eq!(sparkline(&[50.0, 50.0], 200.0), "▃▃");
        assert_eq!(sparkline(&vec![1.0; 600], 1.0).chars().count(), 60);
    }
}
