//! What a person reads: the result table printed at the end of a run ([`table`]), and
//! `benchrun-worker report`: tables like the performance reports' and SVG charts of one or
//! more summaries.
//!
//! - [`tables`]: the cells of the report tables, shared by
//! - [`markdown`]: `report.md`, and [`terminal`]: aligned text with per-second sparklines
//! - [`svg`]: self-contained bar and line charts, drawn for the runs by [`charts`]
//! - [`sizes`]: the per-size tables of a run whose object sizes varied
//! - [`columns`]: the result table's column widths, `--wide` columns and folding to 100
//! - [`files`]: the report directory (`report.md` and the charts)
//! - [`endpoints`]: the per-endpoint breakdown (`storage.endpoints`) of the result table and
//!   of the report
//! - [`training`]: the epochs, search probes and checkpoint repeats of training and
//!   checkpoint runs

pub mod charts;
pub mod columns;
pub mod endpoints;
pub mod files;
pub mod markdown;
pub mod sizes;
pub mod svg;
pub mod tables;
pub mod terminal;
pub mod training;

use std::fmt::Write;

use crate::figures::Units;
use crate::spec::OpKind;
use crate::stats::Summary;

/// One summary of a report, with the name its rows and series carry.
#[derive(Clone, Debug)]
pub struct Run {
    /// Name of the summary in rows and series.
    pub label: String,
    /// The summary.
    pub summary: Summary,
}

/// Names for summaries read from `paths`: each file's name without `.json`, or the whole path
/// where two names would be the same (every worker's `merged.json`).
pub fn labels(paths: &[std::path::PathBuf]) -> Vec<String> {
    let stem = |p: &std::path::PathBuf| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.display().to_string())
    };
    let stems: Vec<String> = paths.iter().map(stem).collect();
    paths
        .iter()
        .zip(&stems)
        .map(|(p, s)| {
            if stems.iter().filter(|o| *o == s).count() > 1 {
                p.display().to_string()
            } else {
                s.clone()
            }
        })
        .collect()
}

/// One line about a summary: target, workers, length, why it stopped.
pub fn describe(s: &Summary) -> String {
    format!(
        "{}, {} worker{}, {:.2} s, stopped by {}{}",
        s.target,
        s.workers,
        if s.workers == 1 { "" } else { "s" },
        s.elapsed_seconds,
        s.stopped_by,
        if s.partial { ", PARTIAL" } else { "" }
    )
}

/// A plain-text table: one row per op, then the process figures (byte rates in MiB/s).
pub fn table(s: &Summary) -> String {
    table_in(s, Units::Binary)
}

/// [`table`] with byte rates in `units`, and a per-size table for each op whose sizes varied.
/// Fits [`columns::WIDTH`] columns; [`table_with`] with `wide` shows every column.
pub fn table_in(s: &Summary, units: Units) -> String {
    table_with(s, units, false)
}

/// [`table_in`], with every column when `wide` (and no line folded); otherwise the main
/// columns, every line folded to fit [`columns::WIDTH`].
pub fn table_with(s: &Summary, units: Units, wide: bool) -> String {
    let out = table_lines(s, units, wide);
    if wide {
        out
    } else {
        columns::fold(&out, columns::WIDTH)
    }
}

/// Object targets: the TCP connections opened in the measured stage (and before it, where
/// the setup opens one per task on purpose), with a warning when the stage opened any.
fn connection_lines(out: &mut String, s: &Summary) {
    let Some(n) = s.connections_opened else {
        return;
    };
    let mut before = Vec::new();
    if let Some(p) = s.prepare.as_ref().and_then(|p| p.connections_opened) {
        before.push(format!("prepare {p}"));
    }
    if let Some(p) = s.setup.as_ref().and_then(|p| p.connections_opened) {
        before.push(format!("setup {p}"));
    }
    if let Some(p) = s.warmup.as_ref().and_then(|p| p.connections_opened) {
        before.push(format!("warm-up {p}"));
    }
    let before = if before.is_empty() {
        String::new()
    } else {
        format!(" (before it: {})", before.join(", "))
    };
    if n == 0 {
        let _ = writeln!(out, "connections opened in the measured stage: 0{before}");
    } else {
        let _ = writeln!(
            out,
            "WARNING: {n} connection{} opened in the measured stage{before}: its TCP (and TLS) setup is in the latency of the op that waited on it (docs/RESULTS.md, connectionsOpened)",
            if n == 1 { " was" } else { "s were" }
        );
    }
}

fn table_lines(s: &Summary, units: Units, wide: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {} ({} worker{}, {:.2}s, stopped by {})",
        if s.workers > 1 {
            "merged result"
        } else {
            "result"
        },
        s.target,
        s.workers,
        if s.workers == 1 { "" } else { "s" },
        s.elapsed_seconds,
        s.stopped_by
    );
    if s.tls_verification_skipped {
        let _ = writeln!(
            out,
            "WARNING: TLS certificates were NOT verified (storage.tls.insecureSkipVerify): tlsVerificationSkipped"
        );
    }
    let block = s.volume.is_some() || s.workload.as_ref().is_some_and(|w| w.block.is_some());
    let cols = op_columns(units, block);
    let mut rows = op_rows(&s.report, units);
    let measured = rows.len();
    if let Some(w) = &s.warmup {
        rows.extend(op_rows(&w.report, units));
    }
    // One set of widths for the measured and the warm-up rows, so they line up.
    let lines = columns::lines(&cols, &rows, wide);
    for l in &lines[..=measured] {
        let _ = writeln!(out, "{l}");
    }
    for (op, st) in &s.ops {
        for e in &st.data_errors {
            let _ = writeln!(
                out,
                "DATA ERROR: {op} {}: {} at byte {}",
                e.kind, e.key, e.offset
            );
        }
    }
    if let Some(w) = &s.warmup {
        let _ = writeln!(
            out,
            "warm-up: {:.2}s before the measured stage, its ops not in the figures above:",
            w.seconds
        );
        for l in &lines[measured + 1..] {
            let _ = writeln!(out, "{l}");
        }
    }
    for (op, st) in &s.ops {
        if let (Some(t), Some(p50)) = (&st.ttfb, st.ttfb_ms(0.5)) {
            let q = |q: f64| t.quantile_us(q) as f64 / 1000.0;
            let _ = writeln!(
                out,
                "time to first byte of {op}, ms from the op's start: p50 {p50:.3}, p90 {:.3}, p99 {:.3}, p99.9 {:.3}, max {:.3}",
                q(0.9),
                q(0.99),
                q(0.999),
                q(1.0)
            );
        }
    }
    for (op, st) in &s.ops {
        if st.heads > 0 {
            let _ = writeln!(
                out,
                "experiment read.headBeforeGet: {} HEADs sent before the {op}s (in their latency, TTFB and req/op)",
                st.heads
            );
        }
    }
    buffer_lines(&mut out, s);
    for (op, st) in &s.ops {
        if !st.errors_by_kind.is_empty() {
            let kinds: Vec<String> = st
                .errors_by_kind
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let _ = writeln!(out, "errors of {op}: {}", kinds.join(", "));
        }
    }
    // Only when some failed op's latency was recorded: the rows above are successful ops'.
    for (op, r) in &s.report {
        if let (Some(p50), Some(p99), Some(p999), Some(max)) =
            (r.all_p50_ms, r.all_p99_ms, r.all_p999_ms, r.all_max_ms)
        {
            let _ = writeln!(
                out,
                "all ops of {op}, failed included (ms): p50 {p50:.3}, p99 {p99:.3}, p99.9 {p999:.3}, max {max:.3}"
            );
        }
    }
    if let Some(f) = &s.in_flight_at_deadline {
        let _ = writeln!(
            out,
            "in flight at the deadline: {} op{} (counted above; the rates are over the {:.2}s window), running {:.3} ms on average and at most {:.3} ms by then, the longest ending after {:.3} ms",
            f.ops,
            if f.ops == 1 { "" } else { "s" },
            s.elapsed_seconds,
            f.age_mean_ms(),
            f.age_max_us as f64 / 1000.0,
            f.latency_max_us as f64 / 1000.0
        );
    }
    connection_lines(&mut out, s);
    if let Some(o) = &s.open_loop {
        // A share of the started ops; "-" for a summary older than the lag bands (all zero).
        let pct = |n: u64, of: u64| {
            if o.lag_within.ms1 == 0 && o.late < of {
                "-".to_string()
            } else {
                format!("{:.1}%", n as f64 * 100.0 / of.max(1) as f64)
            }
        };
        let per_s = |n: u64| {
            if s.elapsed_seconds > 0.0 {
                n as f64 / s.elapsed_seconds
            } else {
                0.0
            }
        };
        let _ = writeln!(
            out,
            "open loop: offered {:.1} ops/s, started {:.1} ops/s ({} due, {} never started); \
             scheduling lag mean {:.3} ms, max {:.3} ms, started within 10 us / 100 us / 1 ms \
             of due: {} / {} / {}, {} ops more than 1 ms late",
            per_s(o.due),
            per_s(o.started),
            o.due,
            o.not_started(),
            o.lag_mean_ms(),
            o.lag_max_us as f64 / 1000.0,
            pct(o.lag_within.us10, o.started),
            pct(o.lag_within.us100, o.started),
            pct(o.lag_within.ms1, o.started),
            o.late
        );
    }
    if let Some(v) = &s.volume {
        volume_lines(&mut out, s, v);
    }
    endpoints::lines(&mut out, s);
    let p = &s.process;
    let total = s.total();
    let gib = total.bytes as f64 / (1u64 << 30) as f64;
    let cpu = p.cpu_user_seconds + p.cpu_system_seconds;
    let _ = write!(
        out,
        "cpu {:.2}s user + {:.2}s system",
        p.cpu_user_seconds, p.cpu_system_seconds
    );
    if let Some(pct) = s.cpu_percent_of_a_core() {
        let _ = write!(out, " = {pct:.1}% of a core");
    }
    if gib > 0.0 {
        let _ = write!(out, " ({:.2} cpu-s/GiB)", cpu / gib);
    }
    let _ = writeln!(
        out,
        ", page faults {} minor / {} major",
        p.minor_faults, p.major_faults
    );
    for t in sizes::tables(s, "", units) {
        let _ = writeln!(out, "{}:", t.title);
        out += &terminal::table(&t);
    }
    if let Some(st) = &s.prepare {
        let _ = writeln!(
            out,
            "prepare: {} objects, {:.1} MiB in {:.2}s",
            st.objects,
            st.bytes as f64 / (1 << 20) as f64,
            st.seconds
        );
    }
    if let Some(st) = &s.pre_stat {
        let _ = writeln!(
            out,
            "pre-stat: {} objects in {:.3}s ({} errors)",
            st.objects, st.seconds, st.errors
        );
    }
    if let Some(st) = &s.setup {
        let _ = writeln!(
            out,
            "setup (threads and clients, before the start, not measured): {:.3}s",
            st.seconds
        );
    }
    if let Some(st) = &s.cleanup {
        let _ = writeln!(
            out,
            "cleanup: {} objects in {:.2}s ({} errors)",
            st.objects, st.seconds, st.errors
        );
    }
    out
}

/// The read buffers GETs allocated, when they read into buffers at all, and whether they
/// were pooled (`read.bufferPool`, the experiment of design report 004).
fn buffer_lines(out: &mut String, s: &Summary) {
    let pooled = s.workload.as_ref().is_none_or(|w| w.read.buffer_pool);
    for (op, st) in &s.ops {
        if st.buffers_allocated == 0 && (pooled || *op != OpKind::Get) {
            continue;
        }
        let how = if pooled {
            "pooled: reused once warm"
        } else {
            "experiment read.bufferPool: false, a fresh buffer per GET"
        };
        let _ = writeln!(
            out,
            "read buffers of {op}: {} allocated for {} successful {op}s ({how})",
            st.buffers_allocated,
            st.count.saturating_sub(st.errors)
        );
    }
}

/// The columns of the op rows: block runs count IOPS, as fio users read them.
fn op_columns(units: Units, block: bool) -> Vec<columns::Column> {
    use columns::Column;
    vec![
        Column::name("op"),
        Column::figure("count"),
        Column::figure("errors"),
        Column::figure(if block { "IOPS" } else { "ops/s" }),
        Column::figure(units.rate_label()),
        Column::wide("req/op"),
        Column::wide("mean ms"),
        Column::figure("p50 ms"),
        Column::wide("p90 ms"),
        Column::wide("p95 ms"),
        Column::figure("p99 ms"),
        Column::figure("p99.9 ms"),
        Column::wide("p99.99 ms"),
        Column::figure("max ms"),
    ]
}

/// One row per op of `report`, its cells in [`op_columns`] order.
fn op_rows(
    report: &std::collections::BTreeMap<OpKind, crate::stats::OpReport>,
    units: Units,
) -> Vec<Vec<String>> {
    let rate = units.rate_metric();
    report
        .iter()
        .map(|(op, r)| {
            vec![
                op.as_str().to_string(),
                r.count.to_string(),
                r.errors.to_string(),
                format!("{:.1}", r.ops_per_sec),
                rate.format(units.rate(r.mib_per_sec)),
                format!("{:.2}", r.requests_per_op),
                format!("{:.3}", r.mean_ms),
                format!("{:.3}", r.p50_ms),
                format!("{:.3}", r.p90_ms),
                format!("{:.3}", r.p95_ms),
                format!("{:.3}", r.p99_ms),
                format!("{:.3}", r.p999_ms),
                format!("{:.3}", r.p9999_ms),
                format!("{:.3}", r.max_ms),
            ]
        })
        .collect()
}

/// The engine that ran and the page cache: what a volume figure stands on.
fn volume_lines(out: &mut String, s: &Summary, v: &crate::stats::VolumeStats) {
    let _ = writeln!(
        out,
        "volume: {}, queue depth {} per task, {}, {:.1} MiB addressed{}",
        v.engine_label(),
        v.queue_depth,
        if v.direct { "O_DIRECT" } else { "buffered" },
        v.dataset_bytes as f64 / (1 << 20) as f64,
        if v.reused > 0 {
            format!(" (layout reused by {} of {} workers)", v.reused, s.workers)
        } else {
            String::new()
        }
    );
    if let Some(r) = &v.fallback_reason {
        let _ = writeln!(out, "note: sync engine: {r}");
    }
    if let Some(c) = &v.cache {
        let _ = writeln!(
            out,
            "page cache: {:.1}% of the dataset resident at the start, {:.1}% at the end{}{}",
            100.0 * c.start_fraction(),
            100.0 * c.end_fraction(),
            match c.resident_before_warmup {
                Some(b) if c.bytes > 0 => format!(
                    " ({:.1}% before the warm-up)",
                    100.0 * b as f64 / c.bytes as f64
                ),
                _ => String::new(),
            },
            if c.dropped > 0 {
                " (dropped before the start)"
            } else {
                ""
            }
        );
        let reads = s.ops.get(&OpKind::Read).is_some_and(|r| r.count > 0);
        if reads && !v.direct && c.start_fraction().max(c.end_fraction()) > 0.5 {
            let _ = writeln!(
                out,
                "warning: most of the dataset was in the page cache: buffered reads were served from RAM, not from the volume (use direct://, a dataset larger than RAM, or block.dropCache)"
            );
        }
    }
}

/// Write the report of `runs` into `out` (Markdown and SVG charts), printing the paths
/// written, or without `out` print it for the terminal: the `report` command of
/// `benchrun-worker` and of the kubectl plugin.
pub fn write_or_print(
    runs: &[Run],
    out: Option<&std::path::Path>,
    units: Units,
) -> anyhow::Result<()> {
    use anyhow::Context;
    match out {
        Some(dir) => {
            let written = files::write(runs, dir, units)
                .with_context(|| format!("writing the report into {}", dir.display()))?;
            for p in written {
                println!("{}", p.display());
            }
        }
        None => print!("{}", terminal::render(runs, units)),
    }
    Ok(())
}
