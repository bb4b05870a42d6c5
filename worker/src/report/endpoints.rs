//! The result table's per-endpoint breakdown (`storage.endpoints`), as warp's per-host
//! analysis: how the operations spread over the gateways and how each one answered.

use std::fmt::Write;

use crate::stats::Summary;

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
}
