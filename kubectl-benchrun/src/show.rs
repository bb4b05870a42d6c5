//! A finished run printed: the worker's own result table (`benchrun_worker::report::table`,
//! the one implementation), the thresholds as evaluated, and a one-line verdict on stderr;
//! or the merged summary as JSON/YAML. Returns the exit code of the verdict.

use std::fmt::Write;

use anyhow::Result;
use benchrun_operator::crd::BenchmarkRun;
use benchrun_worker::report;
use serde::Serialize;

use crate::cli::Output;
use crate::connect::Target;
use crate::exit::Verdict;
use crate::fetch;

/// `value` as JSON or YAML.
pub fn encode<T: Serialize>(value: &T, output: Output) -> Result<String> {
    Ok(match output {
        Output::Json => serde_json::to_string_pretty(value)? + "\n",
        Output::Yaml => serde_yaml::to_string(value)?,
    })
}

/// Where each worker's op-log is (`spec.oplog`), one line each; empty without op-logs.
pub fn oplogs(run: &BenchmarkRun) -> String {
    let mut out = String::new();
    for w in run.status.iter().flat_map(|s| &s.workers) {
        let Some(o) = &w.oplog else { continue };
        let _ = match (&o.uri, &o.error) {
            (Some(uri), _) => writeln!(
                out,
                "oplog {}: {uri} ({} records, {} dropped)",
                w.name, o.records, o.dropped
            ),
            (None, Some(e)) => writeln!(out, "oplog {}: NOT STORED: {e}", w.name),
            (None, None) => writeln!(out, "oplog {}: not stored", w.name),
        };
    }
    out
}

/// The thresholds of a run as evaluated, one line each.
pub fn thresholds(run: &BenchmarkRun) -> String {
    let mut out = String::new();
    let checks = run.status.iter().flat_map(|s| &s.thresholds);
    for c in checks {
        let _ = writeln!(
            out,
            "threshold {} {} {}: got {} {}",
            c.op,
            c.limit,
            c.want,
            c.got,
            if c.met { "met" } else { "MISSED" }
        );
    }
    out
}

/// Print the result of a finished run; the exit code of its verdict.
pub async fn result(
    t: &Target,
    run: &BenchmarkRun,
    output: Option<Output>,
    per_worker: bool,
) -> Result<u8> {
    let name = run.metadata.name.clone().unwrap_or_default();
    let verdict = Verdict::of(run);
    let cp = run.status.as_ref().and_then(|s| s.control_plane.as_ref());
    // A control-plane run keeps its figures in the status: no summary to fetch.
    if let Some(cp) =
        cp.filter(|_| benchrun_operator::crd::is_control_plane_only(&run.spec.workload))
    {
        match output {
            Some(o) => print!("{}", encode(cp, o)?),
            None => print!("{}{}", control_plane(cp), thresholds(run)),
        }
        if let Some(m) = verdict.message(&name) {
            eprintln!("error: {m}");
        }
        return Ok(verdict.code());
    }
    let has_result = run.status.as_ref().is_some_and(|s| {
        !s.results.is_empty()
            || s.matrix
                .as_ref()
                .is_some_and(|m| !m.combinations.is_empty())
    });
    if has_result {
        match output {
            Some(o) if run.status.as_ref().is_some_and(|s| s.matrix.is_some()) => {
                let runs = fetch::report_runs(t, &name).await?;
                let labelled: Vec<_> = runs
                    .iter()
                    .map(|r| serde_json::json!({"combination": r.label, "summary": r.summary}))
                    .collect();
                print!("{}", encode(&labelled, o)?);
            }
            Some(o) if per_worker => {
                let parts = fetch::worker_summaries(t, run).await?;
                let parts: Vec<_> = parts
                    .iter()
                    .map(|(w, s)| serde_json::json!({"worker": w, "summary": s}))
                    .collect();
                print!("{}", encode(&parts, o)?);
            }
            Some(o) => print!("{}", encode(&fetch::merged(t, run).await?, o)?),
            // Control operations under data-plane load: both tables (the thresholds of both
            // are in the one list `tables` ends with).
            None => {
                if let Some(cp) = cp {
                    println!("{}", control_plane(cp));
                }
                print!("{}", tables(t, run, per_worker).await?)
            }
        }
    }
    if let Some(m) = verdict.message(&name) {
        eprintln!("error: {m}");
    }
    Ok(verdict.code())
}

/// A control-plane run's table: one row per operation, then one per phase (indented).
pub fn control_plane(cp: &benchrun_operator::crd::control_plane::ControlPlaneStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "control plane: {} of {} lifecycles completed, {} failed, in {:.1}s",
        cp.completed,
        cp.requested,
        cp.failed,
        cp.elapsed_ms / 1000.0
    );
    let _ = writeln!(
        out,
        "{:<14} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10}",
        "operation", "count", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
    // Lifecycle order; an operation of a later version follows.
    let order = benchrun_operator::crd::control_plane::OPERATIONS;
    let mut ops: Vec<_> = cp.operations.iter().collect();
    ops.sort_by_key(|(k, _)| order.iter().position(|o| o == k).unwrap_or(order.len()));
    for (op, r) in ops {
        let l = &r.latency;
        let _ = writeln!(
            out,
            "{op:<14} {:>6} {:>6} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            r.count, r.errors, l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms
        );
        for (phase, l) in &r.phases {
            let _ = writeln!(
                out,
                "  {phase:<12} {:>6} {:>6} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
                "", "", l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms
            );
        }
    }
    if let Some(l) = &cp.provision_to_first_io {
        let n = cp.operations.get("firstIO").map_or(0, |r| r.count);
        let _ = writeln!(
            out,
            "{:<14} {:>6} {:>6} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            "claim->firstIO", n, 0, l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms
        );
    }
    if let Some(b) = &cp.busy {
        // The holds' I/O, in the same columns: what the operations above did to it.
        let l = &b.latency;
        let _ = writeln!(
            out,
            "{:<14} {:>6} {:>6} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            "busy I/O",
            b.reads + b.writes,
            b.errors,
            l.p50_ms,
            l.p95_ms,
            l.p99_ms,
            l.max_ms
        );
        let mut note = format!(
            "busy I/O: 4 KiB O_DIRECT random, 70% reads, depth 1: {:.0} IOPS per volume over {} lifecycles",
            b.iops_per_volume, b.lifecycles
        );
        if b.unreported > 0 {
            let _ = write!(note, ", {} without a report", b.unreported);
        }
        if b.latency_left_out > 0 {
            let _ = write!(
                note,
                ", {} histograms left out of the percentiles (too large for a termination message)",
                b.latency_left_out
            );
        }
        let _ = writeln!(out, "{note}");
        if let Some(e) = &b.first_error {
            let _ = writeln!(out, "busy I/O first error: {e}");
        }
    }
    if let Some(a) = &cp.arrivals {
        let _ = writeln!(
            out,
            "arrivals: {}/s, {} started, {} late (>10 ms), max lag {:.1} ms",
            a.rate_per_second, a.started, a.late, a.max_lag_ms
        );
    }
    if let Some(e) = &cp.first_error {
        let _ = writeln!(out, "first error: {e}");
    }
    out
}

/// The text of a run's result: the table(s) and the thresholds.
async fn tables(t: &Target, run: &BenchmarkRun, per_worker: bool) -> Result<String> {
    let name = run.metadata.name.clone().unwrap_or_default();
    let mut out = String::new();
    if run.status.as_ref().is_some_and(|s| s.matrix.is_some()) {
        for r in fetch::report_runs(t, &name).await? {
            let _ = writeln!(out, "combination {}", r.label);
            out.push_str(&report::table(&r.summary));
            out.push('\n');
        }
    } else {
        let merged = fetch::merged(t, run).await?;
        out.push_str(&report::table(&merged));
        out.push_str(&workload_tables(&merged));
        if per_worker {
            for (w, s) in fetch::worker_summaries(t, run).await? {
                let _ = writeln!(out, "\nworker {w}:");
                out.push_str(&report::table(&s));
            }
        }
    }
    out.push_str(&oplogs(run));
    out.push_str(&thresholds(run));
    out.push_str(&baseline(run));
    Ok(out)
}

/// A training run's AU table per epoch, a checkpoint run's save and restore per repeat (the
/// worker's own tables); empty for other runs.
fn workload_tables(s: &benchrun_api::Summary) -> String {
    let mut out = String::new();
    if let Some(t) = &s.training {
        out.push_str(&benchrun_worker::training::table(t));
        // A search's probes (of every worker, one child run each), as the worker prints them.
        if let Some(f) = &t.search {
            out.push_str(&benchrun_worker::training::search::table(f));
        }
    }
    if let Some(c) = &s.checkpoint {
        out.push_str(&benchrun_worker::checkpoint::table(c));
    }
    out
}

/// The run against its baseline (`spec.baselineRef`), per op: the changes of ops/s, MiB/s,
/// p50, p99 and the error rate, then the verdict; empty without a baseline.
pub fn baseline(run: &BenchmarkRun) -> String {
    let mut out = String::new();
    let st = run.status.as_ref();
    let cond = st.and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == benchrun_operator::run_rules::cond::REGRESSED)
    });
    let Some(b) = st.and_then(|s| s.baseline.as_ref()) else {
        if let Some(c) = cond.filter(|c| c.status == "Unknown") {
            let _ = writeln!(out, "baseline: not compared: {}", c.message);
        }
        return out;
    };
    let _ = writeln!(
        out,
        "baseline {} (tolerance {}%): change in percent of the baseline",
        b.source, b.tolerance_percent
    );
    let _ = writeln!(
        out,
        "{:<7} {:>8} {:>8} {:>8} {:>8} {:>11}",
        "op", "ops/s", "MiB/s", "p50", "p99", "error rate"
    );
    for (op, d) in &b.deltas {
        let _ = writeln!(
            out,
            "{:<7} {:>+7.1}% {:>+7.1}% {:>+7.1}% {:>+7.1}% {:>+11.4}",
            op,
            d.ops_per_sec_percent,
            d.mib_per_sec_percent,
            d.p50_percent,
            d.p99_percent,
            d.error_rate_change
        );
    }
    if !b.regressions.is_empty() {
        let _ = writeln!(out, "baseline: REGRESSED: {}", b.regressions.join("; "));
    }
    if !b.not_significant.is_empty() {
        let _ = writeln!(
            out,
            "baseline: beyond the tolerance but not significant (noise): {}",
            b.not_significant.join("; ")
        );
    }
    if b.regressions.is_empty() && b.not_significant.is_empty() {
        let _ = writeln!(out, "baseline: within tolerance on every op");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_control_plane_run_prints_one_row_per_operation_in_lifecycle_order() {
        let cp: benchrun_operator::crd::control_plane::ControlPlaneStatus =
            serde_json::from_value(serde_json::json!({
                "requested": 3, "completed": 2, "failed": 1, "elapsedMs": 4500.0,
                "operations": {
                    "delete": {"count": 2, "errors": 0, "p50Ms": 80.0, "p95Ms": 90.0, "p99Ms": 90.0, "maxMs": 90.0},
                    "provision": {"count": 2, "errors": 1, "errorsByKind": {"timeout": 1},
                        "p50Ms": 1200.0, "p95Ms": 1500.0, "p99Ms": 1500.0, "maxMs": 1500.0,
                        "phases": {"bound": {"p50Ms": 1200.0, "p95Ms": 1500.0, "p99Ms": 1500.0, "maxMs": 1500.0}}}
                },
                "firstError": "provision timeout: ExternalProvisioning: waiting"
            }))
            .expect("status");
        let text = super::control_plane(&cp);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains("2 of 3 lifecycles completed, 1 failed, in 4.5s"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("provision") && lines[2].contains("1200.000"),
            "{text}"
        );
        assert!(lines[3].trim_start().starts_with("bound"), "{text}");
        assert!(lines[4].starts_with("delete"), "{text}");
        assert!(
            lines[5].starts_with("first error: provision timeout"),
            "{text}"
        );
    }

    #[test]
    fn a_busy_run_prints_its_holds_io_under_the_operations() {
        let cp: benchrun_operator::crd::control_plane::ControlPlaneStatus =
            serde_json::from_value(serde_json::json!({
                "requested": 2, "completed": 2, "failed": 0, "elapsedMs": 4500.0,
                "operations": {
                    "snapshot": {"count": 2, "errors": 0, "p50Ms": 800.0, "p95Ms": 820.0, "p99Ms": 820.0, "maxMs": 820.0}
                },
                "busy": {"lifecycles": 2, "unreported": 1, "reads": 700, "writes": 300, "errors": 1,
                         "firstError": "write at 4096: EIO", "iopsPerVolume": 250.0,
                         "p50Ms": 0.2, "p95Ms": 0.9, "p99Ms": 3.5, "maxMs": 40.0}
            }))
            .expect("status");
        let text = super::control_plane(&cp);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].starts_with("snapshot"), "{text}");
        assert!(
            lines[3].starts_with("busy I/O")
                && lines[3].contains("1000")
                && lines[3].contains("3.500"),
            "{text}"
        );
        assert!(
            lines[4].contains("250 IOPS per volume over 2 lifecycles, 1 without a report"),
            "{text}"
        );
        assert_eq!(
            lines[5], "busy I/O first error: write at 4096: EIO",
            "{text}"
        );
    }

    #[test]
    fn training_and_checkpoint_runs_print_their_tables() {
        use benchrun_api::training::{AuFigures, EpochFigures, TrainingStats};
        let mut s = benchrun_api::Summary::default();
        assert_eq!(super::workload_tables(&s), "");
        s.training = Some(TrainingStats {
            accelerators: 2,
            epochs: vec![EpochFigures {
                au: AuFigures::one(900, 1000),
                samples: 10,
                elapsed_us: 1000,
                complete: true,
                ..Default::default()
            }],
            ..Default::default()
        });
        let text = super::workload_tables(&s);
        assert!(text.contains("training: 2 accelerators"), "{text}");
        assert!(text.contains("AU mean"), "{text}");
        // A search run on the cluster: its probe table, as the worker prints it.
        if let Some(t) = s.training.as_mut() {
            t.search = Some(benchrun_api::training_search::SearchFigures {
                max_accelerators: 2,
                mark: 90.0,
                cap: 8,
                at_cap: false,
                probes: [(1, true), (2, true), (4, false), (3, false)]
                    .map(|(n, passed)| benchrun_api::training_search::SearchProbe {
                        accelerators: n,
                        complete: true,
                        passed,
                        ..Default::default()
                    })
                    .to_vec(),
            });
        }
        let text = super::workload_tables(&s);
        assert!(text.contains("maximum-accelerators search"), "{text}");
        assert!(
            text.contains("max accelerators per worker: 2 (2 passed the 90.0% mark, 3 did not)"),
            "{text}"
        );
        assert_eq!(text.matches(" FAIL").count(), 2, "{text}");
        s.training = None;
        s.checkpoint = Some(Default::default());
        assert!(super::workload_tables(&s).contains("checkpoint:"));
    }

    use super::*;

    #[test]
    fn each_workers_oplog_is_named_or_its_failure_said() {
        let run: BenchmarkRun = serde_json::from_value(serde_json::json!({
            "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": "r"},
            "spec": {"workload": {"target": "s3://b/p/", "duration": "1s", "ops": [{"op": "get"}]}},
            "status": {"phase": "Succeeded", "workers": [
                {"name": "w0", "pod": "r-w0", "phase": "Collected",
                 "oplog": {"uri": "s3://b/logs/r/w0.oplog.gz", "records": 10, "dropped": 1}},
                {"name": "w1", "pod": "r-w1", "phase": "Collected",
                 "oplog": {"records": 7, "dropped": 0, "error": "uploading: HTTP 403"}},
                {"name": "w2", "pod": "r-w2", "phase": "Collected"}
            ]}
        }))
        .expect("run");
        assert_eq!(
            oplogs(&run),
            "oplog w0: s3://b/logs/r/w0.oplog.gz (10 records, 1 dropped)\noplog w1: NOT STORED: uploading: HTTP 403\n"
        );
    }

    #[test]
    fn a_change_the_tests_call_noise_is_said_and_not_called_within_tolerance() {
        let run = |baseline: serde_json::Value| -> BenchmarkRun {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
                "metadata": {"name": "r"},
                "spec": {"workload": {"target": "s3://b/p/", "duration": "1s", "ops": [{"op": "get"}]}},
                "status": {"phase": "Succeeded", "baseline": baseline}
            }))
            .expect("run")
        };
        let noise = "get ops/s 95.00 vs 110.00 (-13.6%; rank-sum p=0.21, not significant)";
        let text = baseline(&run(serde_json::json!({
            "source": "run a", "tolerancePercent": 10.0, "notSignificant": [noise]
        })));
        assert!(
            text.ends_with(&format!(
                "baseline: beyond the tolerance but not significant (noise): {noise}\n"
            )),
            "{text}"
        );
        assert!(!text.contains("within tolerance"), "{text}");
        let text = baseline(&run(
            serde_json::json!({"source": "run a", "tolerancePercent": 10.0}),
        ));
        assert!(
            text.ends_with("baseline: within tolerance on every op\n"),
            "{text}"
        );
    }
}
