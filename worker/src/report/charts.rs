//! The charts of a report: throughput and latency per run and op (bars), throughput and mean
//! latency over time (lines, one per run).

use crate::compare::full_seconds;
use crate::figures::{scopes, Figures, Metric, Scope};

use super::svg::{BarChart, LineChart};
use super::Run;

/// One chart: its file name in the report directory, what it shows, and its SVG.
#[derive(Clone, Debug)]
pub struct Chart {
    /// File name in the report directory.
    pub file: &'static str,
    /// What it shows.
    pub title: String,
    /// The SVG document.
    pub svg: String,
}

/// The ops charted: each op, and all ops together when there is more than one.
fn groups(runs: &[Run]) -> Vec<Scope> {
    let mut all: Vec<Scope> = runs.iter().flat_map(|r| scopes(&r.summary)).collect();
    all.sort();
    all.dedup();
    if all.len() == 2 {
        all.retain(|s| *s != Scope::All);
    }
    all
}

fn bars(runs: &[Run], title: &str, y_label: &str, metrics: &[(Metric, &str, f64)]) -> BarChart {
    let groups = groups(runs);
    let mut series = vec![];
    let mut colours = vec![];
    for (i, r) in runs.iter().enumerate() {
        for (_, suffix, opacity) in metrics {
            series.push((format!("{}{suffix}", r.label), *opacity));
            colours.push(i);
        }
    }
    let values = groups
        .iter()
        .map(|scope| {
            runs.iter()
                .flat_map(|r| {
                    let f = Figures::of(&r.summary, *scope);
                    metrics
                        .iter()
                        .map(move |(m, _, _)| f.as_ref().and_then(|f| f.get(*m, *scope)))
                })
                .collect()
        })
        .collect();
    BarChart {
        title: title.into(),
        y_label: y_label.into(),
        groups: groups.iter().map(|s| s.name().to_string()).collect(),
        series,
        colours,
        values,
    }
}

/// Per-second points of each run: `(second, value)` of its full seconds.
fn over_time(
    runs: &[Run],
    value: impl Fn(&crate::stats::Second) -> Option<f64>,
) -> Vec<(String, Vec<(f64, f64)>)> {
    runs.iter()
        .map(|r| {
            let pts = full_seconds(&r.summary)
                .filter_map(|s| Some((s.second as f64, value(s)?)))
                .collect();
            (r.label.clone(), pts)
        })
        .collect()
}

/// Every chart that has something to show for `runs`.
pub fn charts(runs: &[Run]) -> Vec<Chart> {
    let mut out = vec![];
    let mut push = |file, title: &str, svg| {
        out.push(Chart {
            file,
            title: title.to_string(),
            svg,
        })
    };
    let t = "Throughput per op (ops/s)";
    push(
        "throughput.svg",
        t,
        bars(runs, t, "ops/s", &[(Metric::OpsPerSec, "", 1.0)]).svg(),
    );
    if runs.iter().any(|r| r.summary.total().bytes > 0) {
        let t = "Bandwidth per op (MiB/s)";
        push(
            "bandwidth.svg",
            t,
            bars(runs, t, "MiB/s", &[(Metric::MibPerSec, "", 1.0)]).svg(),
        );
    }
    let t = "Latency per op: p50 (solid) and p99 (light), ms";
    push(
        "latency.svg",
        t,
        bars(
            runs,
            t,
            "ms",
            &[(Metric::P50Ms, " p50", 1.0), (Metric::P99Ms, " p99", 0.45)],
        )
        .svg(),
    );
    let t = "Throughput over time (all ops, ops/s per full second)";
    push(
        "timeline-throughput.svg",
        t,
        LineChart {
            title: t.into(),
            x_label: "second of the measured stage".into(),
            y_label: "ops/s".into(),
            series: over_time(runs, |s| Some(s.per_second(s.ops))),
        }
        .svg(),
    );
    let latency = over_time(runs, |s| s.mean_latency_ms());
    if latency.iter().any(|(_, pts)| !pts.is_empty()) {
        let t = "Mean latency over time (all successful ops, ms)";
        push(
            "timeline-latency.svg",
            t,
            LineChart {
                title: t.into(),
                x_label: "second of the measured stage".into(),
                y_label: "ms".into(),
                series: latency,
            }
            .svg(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::summary;

    #[test]
    fn every_run_gets_its_bars_and_its_line() {
        let runs = [
            Run {
                label: "a".into(),
                summary: summary(&[100, 200], &[10, 12, 3], 2.5),
            },
            Run {
                label: "b".into(),
                summary: summary(&[300], &[5, 6, 7, 1], 3.2),
            },
        ];
        let c = charts(&runs);
        let files: Vec<&str> = c.iter().map(|c| c.file).collect();
        assert_eq!(
            files,
            [
                "throughput.svg",
                "bandwidth.svg",
                "latency.svg",
                "timeline-throughput.svg",
                "timeline-latency.svg"
            ]
        );
        // One op: a bar per run, and p50 + p99 per run.
        assert_eq!(c[0].svg.matches(r#"class="bar""#).count(), 2);
        assert_eq!(c[2].svg.matches(r#"class="bar""#).count(), 4);
        assert!(
            c[2].svg.contains("<title>get b p99: 0.300</title>"),
            "{}",
            c[2].svg
        );
        // Full seconds only: 2 for a, 3 for b.
        let counts: Vec<usize> = c[3]
            .svg
            .lines()
            .filter(|l| l.contains("<polyline"))
            .map(|l| {
                l.split("points=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .split(' ')
                    .count()
            })
            .collect();
        assert_eq!(counts, [2, 3]);
        // Mean latency of each second: latency_sum_us = ops x 1000 us, so 1 ms throughout.
        assert!(c[4].svg.contains("<title>Mean latency"));
    }
}
