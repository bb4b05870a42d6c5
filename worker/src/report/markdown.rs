//! `report.md`: the report tables as Markdown, and the charts beside them.

use std::fmt::Write;

use super::charts::Chart;
use super::tables::{tables, Table};
use super::{describe, Run};
use crate::figures::Units;

/// A cell's text with the characters that would break a Markdown table escaped.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// One table: the first column left-aligned, the figures right-aligned.
pub fn table(t: &Table) -> String {
    let mut out = String::new();
    let line = |cells: &[String]| {
        format!(
            "| {} |\n",
            cells
                .iter()
                .map(|c| cell(c))
                .collect::<Vec<_>>()
                .join(" | ")
        )
    };
    out += &line(&t.header);
    let _ = writeln!(
        out,
        "|{}",
        (0..t.header.len())
            .map(|i| if i == 0 { "---|" } else { "---:|" })
            .collect::<String>()
    );
    for r in &t.rows {
        out += &line(r);
    }
    out
}

/// The whole document: the runs, their tables (byte rates in `units`), and links to `charts`
/// (files beside it).
pub fn document(runs: &[Run], charts: &[Chart], units: Units) -> String {
    let mut out = String::from("# benchrun report\n\n");
    for r in runs {
        let _ = writeln!(
            out,
            "- `{}`: {}",
            cell(&r.label),
            cell(&describe(&r.summary))
        );
    }
    if runs.len() > 1 {
        let _ = writeln!(
            out,
            "\nFigures after the first row: relative difference to `{}` in parentheses.",
            cell(&runs[0].label)
        );
    }
    for t in tables(runs, units) {
        let _ = writeln!(out, "\n## {}\n", cell(&t.title));
        out += &table(&t);
    }
    if !charts.is_empty() {
        out += "\n## Charts\n";
        for c in charts {
            let _ = writeln!(out, "\n![{}]({})", cell(&c.title), c.file);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_has_a_header_an_alignment_row_and_escaped_cells() {
        let t = Table {
            title: "get".into(),
            header: vec!["run".into(), "ops/s".into()],
            rows: vec![vec!["a|b".into(), "1.0".into()]],
        };
        assert_eq!(table(&t), "| run | ops/s |\n|---|---:|\n| a\\|b | 1.0 |\n");
    }
}
