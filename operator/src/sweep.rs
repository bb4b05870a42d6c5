//! Matrix runs on the cluster: a `BenchmarkRun` with `spec.matrix` runs each combination in
//! turn as a child run (`<run>-<k>`, owned by it, on the same node selection), one at a time so
//! combinations never compete for the nodes. Each child is an ordinary run: synchronized start,
//! exact merge, its merged result persisted in its own result ConfigMap. The parent's status
//! shows "combination k of n" and, row by row, the table of the design reports: ops/s, MiB/s,
//! p50, p99, errors, requests per op, client CPU per GiB and in percent of a core, page faults
//! and the change against the baseline combination.
//!
//! The planning here is pure (combinations, child specs and names, the median repeat, the
//! table's rows); the matrix run's pass is `reconcile/sweep.rs`.

use benchrun_api::change;
use benchrun_api::matrix::{Matrix, Planned};
use benchrun_api::units::HumanDuration;
use benchrun_api::Summary;

use crate::crd::matrix::{CombinationRow, MatrixStatus};
use kube::ResourceExt;

use crate::crd::{BenchmarkRun, BenchmarkRunSpec, OpReport, Phase};
use crate::status::Draft;

/// Label on a matrix run's children: the parent's name (`kubectl get br -l benchrun.dev/matrix=NAME`).
pub const MATRIX_LABEL: &str = "benchrun.dev/matrix";

/// Longest run name that leaves room for `-<k>-r<j>` in its children's names.
pub const MAX_PARENT_NAME: usize = crate::resources::MAX_RUN_NAME - 9;

/// The combinations of a run's matrix, validated like the workload itself.
pub fn plan(spec: &BenchmarkRunSpec, m: &Matrix) -> Result<(Vec<Planned>, usize), Vec<String>> {
    let doc =
        serde_yaml::to_value(&spec.workload).map_err(|e| vec![format!("spec.workload: {e}")])?;
    let planned = m.expand(&doc).map_err(|e| prefixed(&e))?;
    let baseline = m.baseline_index(&planned).map_err(|e| prefixed(&e))?;
    Ok((planned, baseline))
}

fn prefixed(e: &benchrun_api::SpecError) -> Vec<String> {
    match e {
        benchrun_api::SpecError::Invalid(errs) => {
            errs.iter().map(|e| format!("spec.{e}")).collect()
        }
        other => vec![format!("spec.{other}")],
    }
}

/// What the schema cannot say about a run's matrix: each problem as "spec.matrix...: why".
pub fn validate(spec: &BenchmarkRunSpec, name: &str) -> Vec<String> {
    let Some(m) = &spec.matrix else {
        return vec![];
    };
    let mut errs = match plan(spec, m) {
        Ok(_) => vec![],
        Err(e) => e,
    };
    if let Some(w) = m.warmup {
        if w.0.is_zero() || w.0 > std::time::Duration::from_secs(3600) {
            errs.push(format!(
                "spec.matrix.warmup: must be more than 0 and at most 1h (got {w})"
            ));
        }
    }
    if spec.baseline_ref.is_some() {
        errs.push("spec.baselineRef: not with spec.matrix (the combinations are compared with matrix.baseline; give each child's baseline by running it alone)".into());
    }
    if name.len() > MAX_PARENT_NAME {
        errs.push(format!(
            "metadata.name: at most {MAX_PARENT_NAME} characters for a matrix run (its combinations are named <name>-<k>-r<j>; got {})",
            name.len()
        ));
    }
    errs
}

/// The child run of combination `k` (0-based): the parent's spec with that combination's
/// workload, and neither matrix, baseline nor TTL (the parent's TTL removes it with the rest).
pub fn child_spec(parent: &BenchmarkRunSpec, p: &Planned) -> BenchmarkRunSpec {
    let mut spec = parent.clone();
    spec.workload = p.workload.clone();
    spec.matrix = None;
    spec.baseline_ref = None;
    spec.ttl_seconds_after_finished = None;
    spec.timeout = None;
    spec
}

/// The child run of the first combination's first slot, as the reconciler makes it (the
/// others differ only in spec and name); `None` without a matrix.
pub fn first_child(run: &BenchmarkRun) -> Option<crate::Result<BenchmarkRun>> {
    let m = run.spec.matrix.as_ref()?;
    Some((|| {
        let (planned, _) = plan(&run.spec, m).map_err(|e| crate::Error::Invalid(e.join("; ")))?;
        let first = planned
            .first()
            .ok_or_else(|| crate::Error::Invalid("spec.matrix: no combination".into()))?;
        let name = child_name(&run.name_any(), 0);
        crate::resources::child_run(run, &name, child_spec(&run.spec, first), MATRIX_LABEL)
    })())
}

/// One child run of a combination: its unmeasured warm-up, or a measured repeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The unmeasured warm-up.
    Warmup,
    /// 0-based repeat.
    Repeat(u32),
}

/// The child runs of combination `k` (0-based), in the order they run: the warm-up (if
/// any), then each repeat. One repeat without warm-up keeps the plain name `<run>-<k>`.
pub fn slots(parent: &str, k: usize, m: &Matrix) -> Vec<(String, Slot)> {
    let base = child_name(parent, k);
    let mut out = vec![];
    if m.warmup.is_some() {
        out.push((format!("{base}-w"), Slot::Warmup));
    }
    if m.repeats <= 1 && m.warmup.is_none() {
        out.push((base, Slot::Repeat(0)));
    } else {
        out.extend((0..m.repeats.max(1)).map(|j| (format!("{base}-r{}", j + 1), Slot::Repeat(j))));
    }
    out
}

/// The warm-up child: the combination's workload for `warmup`, unjudged (no thresholds).
pub fn warmup_spec(
    parent: &BenchmarkRunSpec,
    p: &Planned,
    warmup: HumanDuration,
) -> BenchmarkRunSpec {
    let mut spec = child_spec(parent, p);
    spec.workload.duration = Some(warmup);
    spec.workload.total_ops = None;
    spec.workload.stop_when_stable = None;
    // The child is all warm-up: the workload's own would have to fit in its duration.
    spec.workload.warmup = None;
    spec.thresholds.clear();
    spec
}

/// The name of combination `k`'s (0-based) child run, `<parent>-<k+1>`; a warm-up and
/// repeats add a suffix (see [`slots`]).
pub fn child_name(parent: &str, k: usize) -> String {
    format!("{parent}-{}", k + 1)
}

/// Index of the repeat that stands for a combination: the median by merged ops/s (the lower
/// of the two middle ones for an even count), as the standalone table does.
pub fn representative(repeats: &[BenchmarkRun]) -> Option<usize> {
    let rate = |r: &BenchmarkRun| {
        r.status
            .as_ref()
            .and_then(|s| s.results.get("all"))
            .map_or(0.0, |a| a.ops_per_sec)
    };
    change::median_by(repeats, rate)
}

/// Fill a row from its finished child and the child's merged summary (when it has one).
pub fn fill_row(row: &mut CombinationRow, child: &BenchmarkRun, merged: Option<&Summary>) {
    let st = child.status.clone().unwrap_or_default();
    row.phase = st.phase;
    if let Some(all) = st.results.get("all") {
        fill_from(row, all);
    }
    if let Some(s) = merged {
        row.stopped_by = Some(s.stopped_by.clone());
        let all = s.total().report(s.elapsed_seconds);
        row.requests_per_op = Some(round(all.requests_per_op, 3));
        row.cpu_seconds_per_gib = s.cpu_seconds_per_gib().map(|v| round(v, 3));
        row.cpu_percent = s.cpu_percent_of_a_core().map(|v| round(v, 1));
        row.minor_faults = Some(s.process.minor_faults);
        row.major_faults = Some(s.process.major_faults);
    }
}

fn fill_from(row: &mut CombinationRow, r: &OpReport) {
    row.ops_per_sec = Some(r.ops_per_sec);
    row.mib_per_sec = Some(r.mib_per_sec);
    row.p50_ms = Some(r.p50_ms);
    row.p99_ms = Some(r.p99_ms);
    row.errors = Some(r.errors);
}

/// Each row's change against the baseline row (none for the baseline itself, or without
/// figures on either side).
pub fn compare_rows(rows: &mut [CombinationRow], baseline: usize) {
    let Some(base) = rows.get(baseline).cloned() else {
        return;
    };
    for (i, row) in rows.iter_mut().enumerate() {
        if i == baseline {
            continue;
        }
        row.ops_per_sec_change_percent = change(row.ops_per_sec, base.ops_per_sec);
        row.p99_change_percent = change(row.p99_ms, base.p99_ms);
    }
}

/// The table's progress after a pass, and the run's end once no combination is current:
/// `Succeeded` when every combination did, `Failed` naming those that did not.
pub(crate) fn progress(d: &mut Draft, table: &mut MatrixStatus, current: Option<usize>) {
    let n = table.combinations.len();
    if let Some(k) = current {
        table.progress = format!("combination {} of {n}", k + 1);
        d.status.workers_summary = Some(format!("{k}/{n} combinations"));
        return;
    }
    table.progress = format!("{n} combinations done");
    d.status.workers_summary = Some(format!("{n}/{n} combinations"));
    let failed: Vec<String> = table
        .combinations
        .iter()
        .filter(|c| c.phase != Phase::Succeeded)
        .map(|c| format!("{} ({})", c.run, c.name))
        .collect();
    if failed.is_empty() {
        let msg = format!("{n} combinations finished; the table is in status.matrix");
        d.status.finish_time = Some(d.now.to_rfc3339());
        d.succeed(msg.clone(), msg);
    } else {
        let msg = format!(
            "{} of {n} combinations did not succeed: {}",
            failed.len(),
            failed.join(", ")
        );
        d.fail("CombinationsFailed", msg);
    }
}

/// The child runs a finished matrix run must stop: those still in flight (not finished, not
/// being deleted) that are this run's (owned by its UID, as `children.rs` decides; a run that
/// only carries the label, or an earlier incarnation's child, is left alone). Each as its name
/// and UID, the UID a precondition of its deletion. None while the matrix run (in `phase`,
/// as the pass decided) is not finished.
pub fn children_to_stop(
    parent: &BenchmarkRun,
    phase: Phase,
    children: &[BenchmarkRun],
) -> Vec<(String, String)> {
    if !phase.is_finished() {
        return vec![];
    }
    children
        .iter()
        .filter(|c| crate::children::owned_by(parent, c.owner_references()))
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| !c.status.as_ref().is_some_and(|s| s.phase.is_finished()))
        .filter_map(|c| Some((c.name_any(), c.metadata.uid.clone()?)))
        .collect()
}

fn change(now: Option<f64>, base: Option<f64>) -> Option<f64> {
    change::percent(base?, now?)
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> BenchmarkRunSpec {
        serde_yaml::from_str(&format!(
            "workload: {{target: file:///data, duration: 2s, ops: [{{op: get}}], objectSize: 4KiB}}\n{extra}"
        ))
        .expect("spec parses")
    }

    #[test]
    fn children_carry_their_combination_only() {
        let s = spec(
            "matrix: {parameters: {objectSize: [4KiB, 8KiB], concurrency: [1, 2]}, baseline: {objectSize: 8KiB}}\nttlSecondsAfterFinished: 60\nthresholds: [{op: get, minOpsPerSec: 1}]",
        );
        let m = s.matrix.clone().expect("matrix");
        let (planned, baseline) = plan(&s, &m).expect("plans");
        assert_eq!(planned.len(), 4);
        assert_eq!(baseline, 2);
        let c = child_spec(&s, &planned[3]);
        assert_eq!(c.workload.concurrency, 2);
        assert!(
            c.matrix.is_none()
                && c.baseline_ref.is_none()
                && c.ttl_seconds_after_finished.is_none()
        );
        assert_eq!(
            c.thresholds, s.thresholds,
            "each combination is held to the thresholds"
        );
        assert_eq!(child_name("sweep", 3), "sweep-4");
    }

    #[test]
    fn validation_names_combination_and_limits() {
        let s = spec(
            "matrix: {parameters: {concurrency: [1, 0]}, repeats: 2, warmup: 2h}\nbaselineRef: {run: a}",
        );
        let errs = validate(&s, &"x".repeat(60));
        assert_eq!(errs.len(), 4, "{errs:?}");
        assert!(
            errs[0].starts_with("spec.matrix: combination 2 of 2 (concurrency=0)"),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with("spec.matrix.warmup: must be more than 0 and at most 1h"),
            "{errs:?}"
        );
        assert!(errs[2].starts_with("spec.baselineRef: not with spec.matrix"));
        assert!(errs[3].starts_with("metadata.name: at most 54 characters"));
        assert!(validate(&spec(""), "x").is_empty());
    }

    #[test]
    fn slots_warm_up_then_repeat() {
        let m = |extra: &str| -> Matrix {
            serde_yaml::from_str(&format!("{{parameters: {{seed: [1]}}{extra}}}")).expect("matrix")
        };
        assert_eq!(
            slots("sw", 0, &m("")),
            [("sw-1".to_string(), Slot::Repeat(0))]
        );
        assert_eq!(
            slots("sw", 2, &m(", repeats: 2, warmup: 3s")),
            [
                ("sw-3-w".to_string(), Slot::Warmup),
                ("sw-3-r1".to_string(), Slot::Repeat(0)),
                ("sw-3-r2".to_string(), Slot::Repeat(1)),
            ]
        );
        let s = spec("matrix: {parameters: {seed: [1]}, warmup: 3s}\nthresholds: [{op: get, minOpsPerSec: 1}]");
        let (planned, _) = plan(&s, s.matrix.as_ref().expect("matrix")).expect("plans");
        let w = warmup_spec(
            &s,
            &planned[0],
            HumanDuration(std::time::Duration::from_secs(3)),
        );
        assert_eq!(w.workload.duration.map(|d| d.0.as_secs()), Some(3));
        assert!(w.thresholds.is_empty() && w.matrix.is_none());
    }

    #[test]
    fn the_default_deadline_covers_every_child_run() {
        // 2 combinations x (warm-up + 2 repeats) = 6 child runs of 2 s + 10 min each.
        let s = spec("matrix: {parameters: {seed: [1, 2]}, repeats: 2, warmup: 1s}");
        assert_eq!(s.deadline(), std::time::Duration::from_secs(6 * 602));
        assert_eq!(spec("").deadline(), std::time::Duration::from_secs(602));
    }

    #[test]
    fn rows_carry_the_process_figures_of_the_merged_summary() {
        let child = BenchmarkRun::new("m-0", spec(""));
        let merged: Summary = serde_json::from_value(serde_json::json!({
            "version": 1, "target": "file:///data", "workers": 2,
            "startedAt": "2026-01-01T00:00:00Z", "elapsedSeconds": 2.0,
            "stoppedBy": "duration", "ops": {}, "report": {}, "timeline": [],
            "process": {"cpuUserSeconds": 1.5, "cpuSystemSeconds": 0.5,
                        "minorFaults": 7, "majorFaults": 3}
        }))
        .expect("summary");
        let mut row = CombinationRow::default();
        fill_row(&mut row, &child, Some(&merged));
        // 2 CPU seconds over 2 s: one core.
        assert_eq!(
            (row.minor_faults, row.major_faults, row.cpu_percent),
            (Some(7), Some(3), Some(100.0))
        );
        let mut none = CombinationRow::default();
        fill_row(&mut none, &child, None);
        assert_eq!((none.minor_faults, none.cpu_percent), (None, None));
    }

    #[test]
    fn rows_compare_with_the_baseline() {
        let row = |ops: f64, p99: f64| CombinationRow {
            ops_per_sec: Some(ops),
            p99_ms: Some(p99),
            ..Default::default()
        };
        let mut rows = vec![row(100.0, 2.0), row(150.0, 1.0), CombinationRow::default()];
        compare_rows(&mut rows, 0);
        assert_eq!(rows[0].ops_per_sec_change_percent, None);
        assert_eq!(rows[1].ops_per_sec_change_percent, Some(50.0));
        assert_eq!(rows[1].p99_change_percent, Some(-50.0));
        assert_eq!(
            rows[2].ops_per_sec_change_percent, None,
            "no figures, no change"
        );
    }

    #[test]
    fn a_finished_matrix_run_stops_only_its_own_children_in_flight() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let owner = |uid: &str| OwnerReference {
            api_version: "benchrun.dev/v1alpha1".into(),
            kind: "BenchmarkRun".into(),
            name: "m".into(),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        };
        let run = |name: &str, uid: &str, owner_uid: Option<&str>, phase: Option<Phase>| {
            let mut r = BenchmarkRun::new(name, spec(""));
            r.metadata.uid = Some(uid.into());
            r.metadata.owner_references = owner_uid.map(|u| vec![owner(u)]);
            r.status = phase.map(|phase| crate::crd::BenchmarkRunStatus {
                phase,
                ..Default::default()
            });
            r
        };
        let parent = run("m", "p2", None, None);
        let mut deleting = run("m-4", "c4", Some("p2"), Some(Phase::Running));
        deleting.metadata.deletion_timestamp = Some(crate::run_rules::to_time(chrono::Utc::now()));
        let children = vec![
            run("m-1", "c1", Some("p2"), Some(Phase::Succeeded)),
            run("m-2", "c2", Some("p2"), Some(Phase::Running)),
            // Never created a status yet: in flight too.
            run("m-3", "c3", Some("p2"), None),
            deleting,
            // The label without the owner, or an earlier incarnation's child: not ours.
            run("m-5", "c5", None, Some(Phase::Running)),
            run("m-6", "c6", Some("p1"), Some(Phase::Running)),
        ];
        // A running sweep stops nothing.
        assert!(children_to_stop(&parent, Phase::Running, &children).is_empty());
        assert_eq!(
            children_to_stop(&parent, Phase::Failed, &children),
            [
                ("m-2".to_string(), "c2".to_string()),
                ("m-3".to_string(), "c3".to_string())
            ]
        );
    }

    #[test]
    fn the_sweep_ends_when_no_combination_is_current() {
        let row = |run: &str, phase| CombinationRow {
            name: format!("size={run}"),
            run: run.into(),
            phase,
            ..Default::default()
        };
        let mut table = MatrixStatus {
            progress: String::new(),
            total: 2,
            baseline: 1,
            combinations: vec![row("m-1", Phase::Succeeded), row("m-2", Phase::Running)],
        };
        let now = chrono::Utc::now();
        let mut d = Draft::new(Default::default(), Some(1), now);
        progress(&mut d, &mut table, Some(1));
        assert_eq!(table.progress, "combination 2 of 2");
        assert_eq!(d.status.phase, Phase::Pending);
        table.combinations[1].phase = Phase::Failed;
        progress(&mut d, &mut table, None);
        assert_eq!(d.status.phase, Phase::Failed);
        let c = crate::run_rules::condition(&d.status.conditions, crate::run_rules::cond::COMPLETE)
            .expect("Complete");
        assert!(
            c.message
                .contains("1 of 2 combinations did not succeed: m-2 (size=m-2)"),
            "{c:?}"
        );
    }
}
