//! Self-contained SVG charts: a grouped bar chart and a line chart, written as plain SVG 1.1
//! with inline attributes (no stylesheet, script, font or image to fetch), so a chart opens
//! the same in a browser, a Markdown preview, or an offline copy of a report.
//!
//! Every bar is a `rect` of class `bar` and every series a `polyline` of class `series`, with
//! a `title` giving the exact figure (a browser shows it on hover): tests and scripts can find
//! them, people can read them.

use std::fmt::Write;

/// Colours of the series (Okabe-Ito: distinguishable with the common colour blindnesses).
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 380.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 56.0;

/// The colour of series `i`.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Text for XML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A round axis maximum at or above `max` and its tick step: 1, 2 or 5 times a power of ten,
/// about five ticks.
pub fn nice_axis(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (1.0, 0.2);
    }
    let raw = max / 5.0;
    let pow = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * pow)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * pow);
    ((max / step).ceil() * step, step)
}

/// A tick label: no decimals for large numbers, enough for small ones.
fn tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

/// One bar chart: groups along the x axis (the ops), one bar per series in each group.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// Title above the chart.
    pub title: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Names of the groups along the x axis.
    pub groups: Vec<String>,
    /// Series name and opacity (a lighter bar for a second figure of the same run).
    pub series: Vec<(String, f64)>,
    /// Colour index of each series.
    pub colours: Vec<usize>,
    /// `values[group][series]`; `None` draws no bar (the run has no such op).
    pub values: Vec<Vec<Option<f64>>>,
}

/// One line chart: x and y values per series.
#[derive(Clone, Debug)]
pub struct LineChart {
    /// Title above the chart.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Name and (x, y) points of each line.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

/// Height of one legend row.
const LEGEND_ROW: f64 = 16.0;

/// Start the document: title, then the legend in rows as wide as the chart, then a group
/// that moves the plot below the legend's extra rows (the plot itself is drawn at fixed
/// coordinates, and the image grows instead). [`close`] ends both.
fn open(out: &mut String, title: &str, legend: &[(String, &str, f64)]) {
    let mut placed = vec![];
    let (mut x, mut row) = (LEFT, 0.0);
    for (name, colour, opacity) in legend {
        let w = 24.0 + 7.0 * name.chars().count() as f64;
        if x > LEFT && x + w > WIDTH - RIGHT {
            x = LEFT;
            row += 1.0;
        }
        placed.push((x, 30.0 + row * LEGEND_ROW, name, colour, opacity));
        x += w;
    }
    let extra = row * LEGEND_ROW;
    let height = HEIGHT + extra;
    let _ = writeln!(
        out,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">
<title>{t}</title>
<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>
<text x="{x}" y="20" font-size="15" text-anchor="middle">{t}</text>"##,
        t = escape(title),
        x = WIDTH / 2.0,
    );
    for (x, y, name, colour, opacity) in placed {
        let _ = writeln!(
            out,
            r#"<rect class="legend" x="{x}" y="{y}" width="10" height="10" fill="{colour}" fill-opacity="{opacity}"/><text x="{tx}" y="{ty}">{n}</text>"#,
            tx = x + 14.0,
            ty = y + 9.0,
            n = escape(name)
        );
    }
    let _ = writeln!(out, r#"<g transform="translate(0 {extra})">"#);
}

/// End what [`open`] started.
fn close(out: &mut String) {
    out.push_str("</g>\n</svg>\n");
}

/// Axes, grid and y ticks for values `0..=y_max`; returns the y scale (pixels per unit).
fn axes(out: &mut String, y_max: f64, step: f64, y_label: &str) -> f64 {
    let plot_h = HEIGHT - TOP - BOTTOM;
    let scale = plot_h / y_max;
    let mut v = 0.0;
    while v <= y_max + step / 2.0 {
        let y = HEIGHT - BOTTOM - v * scale;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#dddddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end">{l}</text>"##,
            x2 = WIDTH - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            l = tick(v, step)
        );
        v += step;
    }
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b}" stroke="#333333"/><line x1="{LEFT}" y1="{b}" x2="{r}" y2="{b}" stroke="#333333"/>
<text x="16" y="{my:.1}" text-anchor="middle" transform="rotate(-90 16 {my:.1})">{l}</text>"##,
        b = HEIGHT - BOTTOM,
        r = WIDTH - RIGHT,
        my = TOP + plot_h / 2.0,
        l = escape(y_label)
    );
    scale
}

impl BarChart {
    /// The chart as a self-contained SVG document.
    pub fn svg(&self) -> String {
        let mut out = String::new();
        let legend: Vec<(String, &str, f64)> = self
            .series
            .iter()
            .zip(&self.colours)
            .map(|((n, o), c)| (n.clone(), colour(*c), *o))
            .collect();
        open(&mut out, &self.title, &legend);
        let max = self
            .values
            .iter()
            .flatten()
            .flatten()
            .fold(0.0f64, |m, v| m.max(*v));
        let (y_max, step) = nice_axis(max);
        let scale = axes(&mut out, y_max, step, &self.y_label);
        let plot_w = WIDTH - LEFT - RIGHT;
        let group_w = plot_w / self.groups.len().max(1) as f64;
        let bar_w = (group_w * 0.8) / self.series.len().max(1) as f64;
        // Figures above the bars while there is room for them.
        let labelled = bar_w >= 36.0;
        for (g, name) in self.groups.iter().enumerate() {
            let gx = LEFT + g as f64 * group_w + group_w * 0.1;
            for (i, ((series, opacity), c)) in self.series.iter().zip(&self.colours).enumerate() {
                let Some(v) = self.values.get(g).and_then(|r| r.get(i)).copied().flatten() else {
                    continue;
                };
                let h = (v.max(0.0) * scale).max(0.5);
                let x = gx + i as f64 * bar_w;
                let _ = writeln!(
                    out,
                    r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}" fill-opacity="{opacity}"><title>{t}</title></rect>"#,
                    y = HEIGHT - BOTTOM - h,
                    w = (bar_w - 2.0).max(1.0),
                    c = colour(*c),
                    t = escape(&format!("{name} {series}: {}", fmt_value(v)))
                );
                if labelled {
                    let _ = writeln!(
                        out,
                        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                        x + (bar_w - 2.0) / 2.0,
                        HEIGHT - BOTTOM - h - 3.0,
                        fmt_value(v)
                    );
                }
            }
            let _ = writeln!(
                out,
                r#"<text x="{x:.1}" y="{y}" text-anchor="middle">{n}</text>"#,
                x = LEFT + (g as f64 + 0.5) * group_w,
                y = HEIGHT - BOTTOM + 18.0,
                n = escape(name)
            );
        }
        close(&mut out);
        out
    }
}

impl LineChart {
    /// The chart as a self-contained SVG document.
    pub fn svg(&self) -> String {
        let mut out = String::new();
        let legend: Vec<(String, &str, f64)> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), colour(i), 1.0))
            .collect();
        open(&mut out, &self.title, &legend);
        let points = || self.series.iter().flat_map(|s| s.1.iter());
        let y_top = points().fold(0.0f64, |m, p| m.max(p.1));
        let x_top = points().fold(0.0f64, |m, p| m.max(p.0));
        let (y_max, step) = nice_axis(y_top);
        let scale = axes(&mut out, y_max, step, &self.y_label);
        let (x_max, x_step) = nice_axis(x_top);
        let plot_w = WIDTH - LEFT - RIGHT;
        let x_of = |x: f64| LEFT + x / x_max * plot_w;
        let mut v = 0.0;
        while v <= x_max + x_step / 2.0 {
            let _ = writeln!(
                out,
                r#"<text x="{x:.1}" y="{y}" text-anchor="middle">{l}</text>"#,
                x = x_of(v),
                y = HEIGHT - BOTTOM + 18.0,
                l = tick(v, x_step)
            );
            v += x_step;
        }
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{y}" text-anchor="middle">{l}</text>"#,
            x = LEFT + plot_w / 2.0,
            y = HEIGHT - 12.0,
            l = escape(&self.x_label)
        );
        for (i, (name, pts)) in self.series.iter().enumerate() {
            let coords: Vec<String> = pts
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", x_of(*x), HEIGHT - BOTTOM - y * scale))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline class="series" fill="none" stroke="{c}" stroke-width="2" points="{p}"><title>{t}</title></polyline>"#,
                c = colour(i),
                p = coords.join(" "),
                t = escape(name)
            );
            // A lone point draws no line: mark it.
            if let [(x, y)] = pts.as_slice() {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                    x_of(*x),
                    HEIGHT - BOTTOM - y * scale,
                    colour(i)
                );
            }
        }
        close(&mut out);
        out
    }
}

/// A figure in a tooltip: three significant decimals for small values.
fn fmt_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_round_numbers() {
        assert_eq!(nice_axis(2635.0), (3000.0, 1000.0));
        let (max, step) = nice_axis(0.47);
        assert!((max - 0.5).abs() < 1e-12 && (step - 0.1).abs() < 1e-12);
        assert_eq!(nice_axis(100.0), (100.0, 20.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(tick(0.30000000000000004, 0.1), "0.3");
        assert_eq!(tick(2000.0, 1000.0), "2000");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot; ");
    }

    #[test]
    fn a_bar_chart_draws_one_bar_per_value() {
        let c = BarChart {
            title: "ops/s <per op>".into(),
            y_label: "ops/s".into(),
            groups: vec!["get".into(), "put".into()],
            series: vec![("a".into(), 1.0), ("b".into(), 1.0)],
            colours: vec![0, 1],
            values: vec![vec![Some(2635.0), Some(1947.0)], vec![Some(10.0), None]],
        };
        let svg = c.svg();
        assert_eq!(svg.matches(r#"class="bar""#).count(), 3);
        assert!(svg.contains("<title>get b: 1947.0</title>"));
        assert!(svg.contains("<title>ops/s &lt;per op&gt;</title>"));
        // The 2635 bar is 2635/3000 of the plot's 276 px.
        assert!(svg.contains(r#"height="242.4""#), "{svg}");
    }

    #[test]
    fn a_line_chart_has_one_polyline_per_series_with_every_point() {
        let c = LineChart {
            title: "t".into(),
            x_label: "s".into(),
            y_label: "ops/s".into(),
            series: vec![
                ("a".into(), vec![(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]),
                ("b".into(), vec![(0.0, 1.0)]),
            ],
        };
        let svg = c.svg();
        let lines: Vec<&str> = svg.lines().filter(|l| l.contains("<polyline")).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0]
                .split("points=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .split(' ')
                .count(),
            3
        );
        assert_eq!(svg.matches("<circle").count(), 1);
    }

    #[test]
    fn a_long_legend_wraps_and_the_image_grows() {
        let c = BarChart {
            title: "t".into(),
            y_label: "ms".into(),
            groups: vec!["get".into()],
            series: (0..16)
                .map(|i| (format!("combination-{i} p99"), 1.0))
                .collect(),
            colours: (0..16).collect(),
            values: vec![vec![Some(1.0); 16]],
        };
        let svg = c.svg();
        // 17 characters: 143 px an entry, 4 in the 660 px between the margins: 4 rows.
        assert!(svg.contains(r#"height="428""#), "{svg}");
        assert!(svg.contains(r#"<g transform="translate(0 48)">"#));
        assert!(svg.contains(r#"<rect class="legend" x="80" y="78""#));
        assert_eq!(svg.matches(r#"class="bar""#).count(), 16);
    }
}
