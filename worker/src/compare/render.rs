//! A [`Comparison`] as aligned text (a terminal), a Markdown table (a report or a pull
//! request) or JSON (a script).

use std::fmt::Write;

use super::ks::KsTest;
use super::rank_sum::RankSum;
use super::{significance, Change, Comparison, Delta, Row, Side};
use crate::figures::percent;

/// Output formats of `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text for a terminal.
    Text,
    /// Markdown tables.
    Markdown,
    /// The comparison as JSON.
    Json,
}

/// The comparison as text, Markdown or JSON.
pub fn render(c: &Comparison, format: Format) -> String {
    match format {
        Format::Text => text(c),
        Format::Markdown => markdown(c),
        Format::Json => serde_json::to_string_pretty(c).unwrap_or_default() + "\n",
    }
}

fn side(s: &Side) -> String {
    side_with(s, &s.label)
}

/// `label (target, workers, length)`, with the label as given (plain or Markdown code).
fn side_with(s: &Side, label: &str) -> String {
    format!(
        "{label} ({}, {} worker{}, {:.2} s{})",
        s.target,
        s.workers,
        if s.workers == 1 { "" } else { "s" },
        s.elapsed_seconds,
        if s.partial { ", PARTIAL" } else { "" }
    )
}

/// A p-value as `0.034`, `2.1e-7`, or `< 1e-300` once below what a double holds.
pub fn p_value(p: f64) -> String {
    if p < 1e-300 {
        "< 1e-300".into()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

fn change(c: Change) -> &'static str {
    match c {
        Change::Better => "better",
        Change::Worse => "worse",
        Change::Same => "",
    }
}

/// `(a, b, delta, delta %)` of one figure, formatted.
fn cells(d: &Delta) -> [String; 4] {
    let dec = d.metric.decimals();
    [
        format!("{:.*}", dec, d.a),
        format!("{:.*}", dec, d.b),
        format!("{:+.*}", dec, d.delta),
        d.relative.map(percent).unwrap_or_else(|| "n/a".into()),
    ]
}

/// A rule of thumb for D as an effect size. With many thousands of operations a tiny D is
/// already "significant": the word says whether it matters.
pub fn effect(d: f64) -> &'static str {
    if d < 0.05 {
        "negligible"
    } else if d < 0.2 {
        "small"
    } else if d < 0.5 {
        "medium"
    } else {
        "large"
    }
}

/// The latency test in words, with its statistic.
pub fn latency_hint(t: &KsTest) -> String {
    let mut s = format!(
        "KS D = {:.3} ({}) at {:.3} ms, p {} (n = {}, m = {}; D at 1% = {:.3}): {}",
        t.d,
        effect(t.d),
        t.at_us as f64 / 1000.0,
        if t.p_value < 1e-300 {
            p_value(t.p_value)
        } else {
            format!("= {}", p_value(t.p_value))
        },
        t.n,
        t.m,
        t.critical_d_1pct,
        significance(t.p_value)
    );
    if t.d > 0.0 {
        s += if t.second_slower {
            ", B slower"
        } else {
            ", B faster"
        };
    }
    s
}

/// The per-second throughput test in words.
pub fn throughput_hint(t: &RankSum) -> String {
    let mid = t.n as f64 * t.m as f64 / 2.0;
    let mut s = format!(
        "Mann-Whitney U = {} ({} vs {} s, {}), p {}: {}",
        t.u,
        t.n,
        t.m,
        if t.exact { "exact" } else { "normal approx." },
        if t.p_value < 1e-300 {
            p_value(t.p_value)
        } else {
            format!("= {}", p_value(t.p_value))
        },
        significance(t.p_value)
    );
    if t.u != mid {
        s += if t.u > mid {
            ", B slower"
        } else {
            ", B faster"
        };
    }
    s
}

/// `only in A` or `only in B` for a row (op or endpoint) of one summary only.
fn only_in(side: &Option<String>) -> Option<String> {
    side.as_ref()
        .map(|w| format!("only in {}", w.to_uppercase()))
}

fn only(r: &Row) -> Option<String> {
    only_in(&r.only_in)
}

/// One line per figure compared (A, B, the change and whether it is significant), then the
/// latency test: the body of an op's or an endpoint's block of the text form.
fn deltas_text(out: &mut String, deltas: &[Delta], latency: Option<&KsTest>) {
    for d in deltas {
        let [a, b, delta, rel] = cells(d);
        let line = format!(
            "  {:<12} {a:>12} {b:>12} {delta:>12} {rel:>10}  {}",
            d.metric.label(),
            change(d.change)
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if let Some(t) = latency {
        let _ = writeln!(out, "  latency: {}", latency_hint(t));
    }
}

/// The per-endpoint rows as text, after the ops: nothing without endpoints.
fn endpoints_text(out: &mut String, c: &Comparison) {
    if c.endpoints.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nper endpoint (all ops):");
    for r in &c.endpoints {
        if let Some(o) = only_in(&r.only_in) {
            let _ = writeln!(out, "{}: {o}", r.endpoint);
            continue;
        }
        let _ = writeln!(
            out,
            "{}\n  {:<12} {:>12} {:>12} {:>12} {:>10}",
            r.endpoint, "", "A", "B", "delta", "delta %"
        );
        deltas_text(out, &r.deltas, r.latency_test.as_ref());
    }
}

/// The per-endpoint rows as a Markdown table of figures and one of tests.
fn endpoints_markdown(out: &mut String, c: &Comparison) {
    if c.endpoints.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n| endpoint | metric | A | B | Δ | Δ% | |");
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---|");
    for r in &c.endpoints {
        let url = r.endpoint.replace('|', "\\|");
        if let Some(o) = only_in(&r.only_in) {
            let _ = writeln!(out, "| {url} | | | | | | {o} |");
        }
        for d in &r.deltas {
            let [a, b, delta, rel] = cells(d);
            let _ = writeln!(
                out,
                "| {url} | {} | {a} | {b} | {delta} | {rel} | {} |",
                d.metric.label(),
                change(d.change)
            );
        }
    }
    let tests: Vec<String> = c
        .endpoints
        .iter()
        .filter_map(|r| {
            let t = r.latency_test.as_ref()?;
            Some(format!(
                "| {} | latency | {} |",
                r.endpoint.replace('|', "\\|"),
                latency_hint(t)
            ))
        })
        .collect();
    if !tests.is_empty() {
        let _ = writeln!(out, "\n| endpoint | distribution | test |");
        let _ = writeln!(out, "|---|---|---|");
        for t in tests {
            let _ = writeln!(out, "{t}");
        }
    }
}

fn text(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}", side(&c.a));
    let _ = writeln!(out, "B: {}", side(&c.b));
    for r in &c.rows {
        let _ = writeln!(out);
        if let Some(o) = only(r) {
            let _ = writeln!(out, "{}: {o}", r.op);
            continue;
        }
        let _ = writeln!(
            out,
            "{:<14} {:>12} {:>12} {:>12} {:>10}",
            r.op, "A", "B", "delta", "delta %"
        );
        deltas_text(&mut out, &r.deltas, r.latency_test.as_ref());
        if let Some(t) = &r.throughput_test {
            let _ = writeln!(out, "  ops per second: {}", throughput_hint(t));
        }
    }
    endpoints_text(&mut out, c);
    out
}

fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}  ", side_with(&c.a, &format!("`{}`", c.a.label)));
    let _ = writeln!(out, "B: {}", side_with(&c.b, &format!("`{}`", c.b.label)));
    let _ = writeln!(out);
    let _ = writeln!(out, "| op | metric | A | B | Δ | Δ% | |");
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---|");
    for r in &c.rows {
        if let Some(o) = only(r) {
            let _ = writeln!(out, "| {} | | | | | | {o} |", r.op);
        }
        for d in &r.deltas {
            let [a, b, delta, rel] = cells(d);
            let _ = writeln!(
                out,
                "| {} | {} | {a} | {b} | {delta} | {rel} | {} |",
                r.op,
                d.metric.label(),
                change(d.change)
            );
        }
    }
    let tests: Vec<String> = c
        .rows
        .iter()
        .flat_map(|r| {
            let lat = r
                .latency_test
                .as_ref()
                .map(|t| format!("| {} | latency | {} |", r.op, latency_hint(t)));
            let tput = r
                .throughput_test
                .as_ref()
                .map(|t| format!("| {} | ops per second | {} |", r.op, throughput_hint(t)));
            lat.into_iter().chain(tput)
        })
        .collect();
    if !tests.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "| op | distribution | test |");
        let _ = writeln!(out, "|---|---|---|");
        for t in tests {
            let _ = writeln!(out, "{t}");
        }
    }
    endpoints_markdown(&mut out, c);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare;
    use crate::compare::tests::summary;

    fn pair() -> Comparison {
        let lat_a: Vec<u64> = (1..=100).collect();
        let lat_b: Vec<u64> = (101..=150).collect();
        compare(
            "a.json",
            &summary(&lat_a, &[49, 51], 2.0),
            "b.json",
            &summary(&lat_b, &[19, 21, 10], 2.5),
        )
    }

    #[test]
    fn text_lists_every_figure_with_its_delta_and_the_tests() {
        let t = render(&pair(), Format::Text);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "A: a.json (file:///x, 1 worker, 2.00 s)");
        assert_eq!(lines[1], "B: b.json (file:///x, 1 worker, 2.50 s)");
        assert_eq!(
            lines[3],
            "get                       A            B        delta    delta %"
        );
        assert_eq!(
            lines[4],
            "  ops/s                50.0         20.0        -30.0     -60.0%  worse"
        );
        assert!(t.contains("  req/op               2.00         2.00        +0.00       0.0%\n"));
        assert!(
            t.contains("  latency: KS D = 1.000 (large) at 0.100 ms, p = 8.6e-31 "),
            "{t}"
        );
        assert!(t.contains("(n = 100, m = 50; D at 1% = 0.282): significant, B slower"));
        assert!(t.contains(
            "  ops per second: Mann-Whitney U = 4 (2 vs 2 s, exact), p = 0.333: not significant, B slower"
        ));
    }

    #[test]
    fn markdown_is_one_table_row_per_figure() {
        let m = render(&pair(), Format::Markdown);
        assert!(
            m.starts_with("A: `a.json` (file:///x, 1 worker, 2.00 s)  \nB: `b.json` (file:///x")
        );
        assert!(
            m.contains("| op | metric | A | B | Δ | Δ% | |\n|---|---|---:|---:|---:|---:|---|\n")
        );
        assert!(m.contains("| get | p50 ms | 0.050 | 0.125 | +0.075 | +150.0% | worse |\n"));
        assert!(m.contains("| all | CPU s/GiB | 20.48 | 40.96 | +20.48 | +100.0% | worse |\n"));
        // Every table row has the header's 7 cells.
        for l in m
            .lines()
            .filter(|l| l.starts_with("| get") || l.starts_with("| all"))
        {
            let cells = l.matches('|').count() - 1;
            assert!(cells == 7 || cells == 3, "{l}");
        }
    }

    #[test]
    fn json_round_trips_the_numbers() {
        let v: serde_json::Value = serde_json::from_str(&render(&pair(), Format::Json)).unwrap();
        assert_eq!(v["rows"][0]["op"], "get");
        assert_eq!(v["rows"][0]["deltas"][0]["metric"], "opsPerSec");
        assert_eq!(v["rows"][0]["deltas"][0]["relative"], -0.6);
        assert_eq!(v["rows"][0]["deltas"][0]["change"], "worse");
        assert_eq!(v["rows"][0]["latencyTest"]["d"], 1.0);
        assert_eq!(v["rows"][1]["throughputTest"]["u"], 4.0);
    }

    #[test]
    fn endpoints_are_rendered_only_when_a_side_has_them() {
        for f in [Format::Text, Format::Markdown, Format::Json] {
            let out = render(&pair(), f);
            assert!(!out.contains("endpoint"), "{f:?}: {out}");
        }
        let mut c = pair();
        let ep = |us: std::ops::RangeInclusive<u64>| {
            let mut s = crate::stats::OpStats::default();
            for u in us {
                s.count += 1;
                s.latency.record(std::time::Duration::from_micros(u));
            }
            s
        };
        let (mut a, mut b) = (summary(&[1], &[1], 2.0), summary(&[1], &[1], 2.0));
        a.endpoints = [
            ("https://gw|1".to_string(), ep(1..=100)),
            ("https://gw-2".to_string(), ep(1..=10)),
        ]
        .into();
        b.endpoints = [("https://gw|1".to_string(), ep(101..=150))].into();
        c.endpoints = crate::compare::endpoints::rows(&a, &b);
        let t = render(&c, Format::Text);
        let tail = &t[t.find("per endpoint (all ops):").expect("section")..];
        assert!(tail.contains("\nhttps://gw|1\n"), "{tail}");
        assert!(
            tail.contains(
                "  ops/s                50.0         25.0        -25.0     -50.0%  worse\n"
            ),
            "{tail}"
        );
        assert!(tail.contains("  latency: KS D = 1.000 (large)"), "{tail}");
        assert!(tail.contains("https://gw-2: only in A\n"), "{tail}");
        let m = render(&c, Format::Markdown);
        assert!(
            m.contains("| endpoint | metric | A | B | Δ | Δ% | |\n"),
            "{m}"
        );
        assert!(
            m.contains("| https://gw\\|1 | errors | 0 | 0 | +0 | n/a |  |\n"),
            "{m}"
        );
        assert!(
            m.contains("| https://gw-2 | | | | | | only in A |\n"),
            "{m}"
        );
        assert!(
            m.contains("| https://gw\\|1 | latency | KS D = 1.000"),
            "{m}"
        );
        let v: serde_json::Value = serde_json::from_str(&render(&c, Format::Json)).unwrap();
        // In URL order: `-` sorts before `|`.
        assert_eq!(v["endpoints"][0]["endpoint"], "https://gw-2");
        assert_eq!(v["endpoints"][0]["onlyIn"], "a");
        assert_eq!(v["endpoints"][1]["endpoint"], "https://gw|1");
        assert_eq!(v["endpoints"][1]["deltas"][0]["metric"], "opsPerSec");
        assert_eq!(v["endpoints"][1]["latencyTest"]["d"], 1.0);
    }

    #[test]
    fn p_values_are_readable() {
        assert_eq!(p_value(0.5), "0.500");
        assert_eq!(p_value(2.1e-7), "2.1e-7");
        assert_eq!(p_value(0.0), "< 1e-300");
    }
}
