//! Width handling of the result table: columns sized to their widest cell, the columns only
//! `--wide` shows, and prose lines folded to fit a terminal ([`WIDTH`] by default), so the
//! table a run prints reads on a 100-column terminal whatever lines are added to it.

/// Columns of text the default table fits in.
pub const WIDTH: usize = 100;

/// One column of an aligned table.
#[derive(Clone, Debug)]
pub struct Column {
    /// The heading.
    pub header: String,
    /// Left-aligned (text) rather than right-aligned (numbers).
    pub left: bool,
    /// Shown only in the wide table.
    pub wide_only: bool,
}

impl Column {
    /// A right-aligned column of figures, always shown.
    pub fn figure(header: impl Into<String>) -> Column {
        Column {
            header: header.into(),
            left: false,
            wide_only: false,
        }
    }

    /// A right-aligned column of figures shown only by the wide table.
    pub fn wide(header: impl Into<String>) -> Column {
        Column {
            wide_only: true,
            ..Column::figure(header)
        }
    }

    /// A left-aligned column of names, always shown.
    pub fn name(header: impl Into<String>) -> Column {
        Column {
            left: true,
            ..Column::figure(header)
        }
    }
}

/// The header line and one line per row (cells in `columns` order), each column as wide as
/// its widest cell, separated by one space; without `wide`, the wide-only columns are left out.
pub fn lines(columns: &[Column], rows: &[Vec<String>], wide: bool) -> Vec<String> {
    let shown: Vec<usize> = (0..columns.len())
        .filter(|i| wide || !columns[*i].wide_only)
        .collect();
    let width = |i: usize| {
        rows.iter()
            .filter_map(|r| r.get(i))
            .map(|c| c.chars().count())
            .chain(std::iter::once(columns[i].header.chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = shown.iter().map(|i| width(*i)).collect();
    let line = |cells: &dyn Fn(usize) -> String| {
        let parts: Vec<String> = shown
            .iter()
            .zip(&widths)
            .map(|(i, w)| {
                let c = cells(*i);
                if columns[*i].left {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        parts.join(" ").trim_end().to_string()
    };
    let mut out = vec![line(&|i| columns[i].header.clone())];
    for r in rows {
        out.push(line(&|i| r.get(i).cloned().unwrap_or_default()));
    }
    out
}

/// `text` with every line longer than `width` folded at spaces, continuation lines indented
/// by two; a word longer than the width stays whole on its own line.
pub fn fold(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.chars().count() <= width {
            out.push_str(line);
            continue;
        }
        let mut cur = String::new();
        for word in body.split(' ') {
            let next = cur.chars().count() + 1 + word.chars().count();
            if !cur.trim().is_empty() && next > width {
                out.push_str(cur.trim_end());
                out.push('\n');
                cur = format!("  {word}");
            } else if cur.is_empty() {
                cur = word.to_string();
            } else {
                cur.push(' ');
                cur.push_str(word);
            }
        }
        out.push_str(cur.trim_end());
        out.push_str(nl);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_their_widest_cell_and_wide_ones_are_optional() {
        let cols = [
            Column::name("op"),
            Column::figure("count"),
            Column::wide("mean ms"),
        ];
        let rows = vec![
            vec!["get".into(), "1234567".into(), "0.5".into()],
            vec!["put".into(), "1".into(), "12.25".into()],
        ];
        assert_eq!(
            lines(&cols, &rows, false),
            ["op    count", "get 1234567", "put       1"]
        );
        assert_eq!(
            lines(&cols, &rows, true),
            [
                "op    count mean ms",
                "get 1234567     0.5",
                "put       1   12.25"
            ]
        );
    }

    #[test]
    fn long_lines_fold_at_spaces() {
        let text = "short\naaa bbb ccc ddd\n";
        assert_eq!(fold(text, 8), "short\naaa bbb\n  ccc\n  ddd\n");
        assert_eq!(fold("x\n", 8), "x\n");
        let long = "averyveryverylongword next";
        assert_eq!(fold(long, 8), "averyveryverylongword\n  next");
        for l in fold(&"word ".repeat(100), WIDTH).lines() {
            assert!(l.len() <= WIDTH, "{l}");
        }
    }
}
