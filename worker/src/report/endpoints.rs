//! The per-endpoint breakdown (`storage.endpoints`), as warp's per-host analysis: how the
//! operations spread over the gateways and how each one answered. Printed under the result
//! table ([`lines`]) and as a table of `benchrun-worker report` ([`table`]).

use std::fmt::Write;

use super::tables::Table;
use crate::figures::Units;
use crate::stats::Summary;

/// The report's table of `s`'s endpoints, titled `PREFIX per endpoint`, when there are two
/// or more (one endpoint would repeat the row of all ops): each endpoint's operations, share,
/// errors, rates and latency percentiles (from its histogram, merged exactly over workers).
pub fn table(s: &Summary, prefix: &str, units: Units) -> Option<Table> {
    if s.endpoints.len() < 2 {
        return None;
    }
    let total: u64 = s.endpoints.values().map(|e| e.count).sum();
    let header = [
        "endpoint",
        "count",
        "share",
        "errors",
        "ops/s",
        units.rate_label(),
        "req/op",
        "mean ms",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
    ]
    .map(String::from)
    .to_vec();
    let rate_decimals = units.rate_metric().decimals();
    let rows = s
        .endpoints
        .iter()
        .map(|(url, e)| {
            let r = e.report(s.elapsed_seconds);
            let share = if total > 0 {
                100.0 * e.count as f64 / total as f64
            } else {
                0.0
            };
            vec![
                url.clone(),
                r.count.to_string(),
                format!("{share:.1}%"),
                r.errors.to_string(),
                format!("{:.1}", r.ops_per_sec),
                format!("{:.*}", rate_decimals, units.rate(r.mib_per_sec)),
                format!("{:.2}", r.requests_per_op),
                format!("{:.3}", r.mean_ms),
                format!("{:.3}", r.p50_ms),
                format!("{:.3}", r.p95_ms),
                format!("{:.3}", r.p99_ms),
                format!("{:.3}", r.max_ms),
            ]
        })
        .collect();
    Some(Table {
        title: format!("{prefix}per endpoint (all ops; round robin per operation)"),
        header,
        rows,
    })
}

/// A small table of the summary's endpoints, when there is more than one; nothing otherwise.
pub fn lines(out: &mut String, s: &Summary) {
    if s.endpoints.len() < 2 {
        return;
    }
    let total: u64 = s.endpoints.values().map(|e| e.count).sum();
    let width = s
        .endpoints
        .keys()
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(8, 60);
    let _ = writeln!(
        out,
        "per endpoint (all ops; round robin per operation):\n{:<width$} {:>10} {:>6} {:>7} {:>10} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "endpoint", "count", "share", "errors", "ops/s", "MiB/s", "req/op", "mean ms", "p50 ms", "p99 ms", "max ms"
    );
    for (url, e) in &s.endpoints {
        let r = e.report(s.elapsed_seconds);
        let share = if total > 0 {
            100.0 * e.count as f64 / total as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "{:<width$} {:>10} {:>5.1}% {:>7} {:>10.1} {:>9.1} {:>8.2} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            crate::spec::clip(url),
            r.count,
            share,
            r.errors,
            r.ops_per_sec,
            r.mib_per_sec,
            r.requests_per_op,
            r.mean_ms,
            r.p50_ms,
            r.p99_ms,
            r.max_ms
        );
    }
    for (url, e) in &s.endpoints {
        if !e.errors_by_kind.is_empty() {
            let kinds: Vec<String> = e
                .errors_by_kind
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let _ = writeln!(
                out,
                "errors at {}: {}",
                crate::spec::clip(url),
                kinds.join(", ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::OpStats;

    #[test]
    fn a_row_per_endpoint_only_when_there_are_several() {
        let mut s = crate::compare::tests::summary(&[100, 200], &[2], 2.0);
        let mut out = String::new();
        lines(&mut out, &s);
        assert!(out.is_empty(), "{out}");
        let ep = |count, errors| OpStats {
            count,
            errors,
            errors_by_kind: if errors > 0 {
                [("http_503".to_string(), errors)].into()
            } else {
                Default::default()
            },
            ..Default::default()
        };
        s.endpoints = [
            ("https://a:1".to_string(), ep(6, 0)),
            ("https://b:2".to_string(), ep(4, 1)),
        ]
        .into();
        lines(&mut out, &s);
        assert!(out.contains("per endpoint"), "{out}");
        let row = |url: &str| {
            out.lines()
                .find(|l| l.starts_with(url))
                .unwrap()
                .to_string()
        };
        assert!(row("https://a:1").contains("60.0%"), "{out}");
        assert!(row("https://b:2").contains("40.0%"), "{out}");
        assert!(out.contains("errors at https://b:2: http_503=1"), "{out}");
        assert!(crate::report::table(&s).contains("per endpoint"));
    }

    #[test]
    fn the_report_has_a_table_per_endpoint_only_when_there_are_several() {
        let mut s = crate::compare::tests::summary(&[100, 200], &[2], 2.0);
        let run = |s: &Summary| super::super::Run {
            label: "r".into(),
            summary: s.clone(),
        };
        let titled = |s: &Summary| {
            super::super::tables::tables(&[run(s)], Units::Binary)
                .into_iter()
                .filter(|t| t.title.contains("per endpoint"))
                .count()
        };
        assert_eq!(titled(&s), 0);
        let mut e = OpStats {
            count: 4,
            bytes: 4 << 20,
            requests: 4,
            ..Default::default()
        };
        for ms in [1, 2, 3, 4] {
            e.latency.record(std::time::Duration::from_millis(ms));
        }
        s.endpoints = [("https://a:1".to_string(), e.clone())].into();
        assert_eq!(titled(&s), 0, "one endpoint repeats the row of all ops");
        e.errors = 1;
        e.count += 1;
        s.endpoints.insert("https://b:2".into(), e);
        let t = table(&s, "r: ", Units::Decimal).unwrap();
        assert_eq!(
            t.title,
            "r: per endpoint (all ops; round robin per operation)"
        );
        assert_eq!(t.header[5], "MB/s");
        assert_eq!(t.rows.len(), 2);
        let b = &t.rows[1];
        // 5 of 9 ops, 1 failed, 5 ops in 2 s, 4 MiB in 2 s = 2.10 MB/s.
        assert_eq!(&b[..6], ["https://b:2", "5", "55.6%", "1", "2.5", "2.10"]);
        assert_eq!(b[8], "2.000", "median of 1..4 ms: {b:?}");
        assert_eq!(titled(&s), 1);
        let md = super::super::markdown::document(&[run(&s)], &[], Units::Binary);
        assert!(
            md.contains("## per endpoint (all ops; round robin per operation)"),
            "{md}"
        );
        assert!(
            md.contains("| https://b:2 | 5 | 55.6% | 1 | 2.5 | 2.0 |"),
            "{md}"
        );
        let text = super::super::terminal::render(&[run(&s)], Units::Binary);
        assert!(text.contains("per endpoint"), "{text}");
    }
}
