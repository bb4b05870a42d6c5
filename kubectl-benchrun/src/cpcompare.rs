//! `compare` of two control-plane runs (`spec.controlPlane`): per operation and per phase,
//! A's and B's p50, p95, p99 and max, and B's change against A in percent. Pure: the figures
//! come from the runs' `status.controlPlane`; `compare.rs` fetches them.
//!
//! Typically two StorageClasses (or two versions of one CSI driver) measured with the same
//! `controlPlane` section: a positive change is B taking longer. Whether B is slower
//! (`--fail-if-slower`) is the project's one rule ([`verdict`]) on each operation's p99; the
//! status keeps percentiles, not histograms, so its test counts the exceedances those
//! percentiles imply (at least, for B; at most, for A).

use std::fmt::Write;

use benchrun_api::verdict::{self, Evidence, OpEvidence, Tail, Verdict};
use benchrun_operator::crd::control_plane::{
    ControlPlaneStatus, LatencyReport, OPERATIONS as ORDER,
};
use benchrun_worker::compare::render::Format;
use serde::Serialize;

/// The statistics compared, as named in the table.
const STATS: [&str; 4] = ["p50", "p95", "p99", "max"];

/// One side of the comparison.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// The run's name.
    pub run: String,
    /// Its claims' StorageClass (`default` when the run named none).
    pub storage_class: String,
    /// `status.controlPlane`.
    #[serde(skip)]
    pub status: ControlPlaneStatus,
}

/// One compared figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// `provision`, `attach`, `firstIO`, `delete`.
    pub operation: String,
    /// A phase of the operation (`bound`, `pvCreated`, ...); none for the whole operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `p50`, `p95`, `p99` or `max`.
    pub stat: &'static str,
    /// A's value (ms); none when A has no such operation or phase.
    pub a_ms: Option<f64>,
    /// B's value (ms).
    pub b_ms: Option<f64>,
    /// `(B - A) / A` in percent; none without both values or with A at zero.
    pub change_percent: Option<f64>,
}

/// The comparison of B against A.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// The baseline.
    pub a: Side,
    /// The run compared against it.
    pub b: Side,
    /// Per operation (lifecycle order), the whole operation first, then its phases.
    pub rows: Vec<Row>,
}

fn stat(l: &LatencyReport, s: &str) -> f64 {
    match s {
        "p50" => l.p50_ms,
        "p95" => l.p95_ms,
        "p99" => l.p99_ms,
        _ => l.max_ms,
    }
}

/// The operations of either side, in lifecycle order.
fn operations(a: &ControlPlaneStatus, b: &ControlPlaneStatus) -> Vec<String> {
    let mut ops: Vec<String> = a
        .operations
        .keys()
        .chain(b.operations.keys())
        .cloned()
        .collect();
    ops.sort_by_key(|o| {
        (
            ORDER.iter().position(|x| x == o).unwrap_or(ORDER.len()),
            o.clone(),
        )
    });
    ops.dedup();
    if a.provision_to_first_io.is_some() || b.provision_to_first_io.is_some() {
        ops.push(TO_FIRST_IO.into());
    }
    ops
}

/// The span from the claim's create request to the first I/O done, compared as one more
/// operation after the lifecycle's own.
const TO_FIRST_IO: &str = "claim->firstIO";

/// A side's latency of `op` (and `phase`): none when it has no successful sample of it.
fn latency<'a>(
    s: &'a ControlPlaneStatus,
    op: &str,
    phase: Option<&str>,
) -> Option<&'a LatencyReport> {
    if op == TO_FIRST_IO {
        return s.provision_to_first_io.as_ref().filter(|_| phase.is_none());
    }
    let r = s.operations.get(op).filter(|r| r.count > 0)?;
    match phase {
        None => Some(&r.latency),
        Some(p) => r.phases.get(p),
    }
}

/// B against A.
pub fn compare(a: Side, b: Side) -> Comparison {
    let mut rows = vec![];
    for op in operations(&a.status, &b.status) {
        let mut phases: Vec<String> = [&a.status, &b.status]
            .iter()
            .filter_map(|s| s.operations.get(&op))
            .flat_map(|r| r.phases.keys().cloned())
            .collect();
        phases.sort();
        phases.dedup();
        let parts = std::iter::once(None).chain(phases.iter().map(|p| Some(p.as_str())));
        for phase in parts {
            let (la, lb) = (
                latency(&a.status, &op, phase),
                latency(&b.status, &op, phase),
            );
            for s in STATS {
                let (va, vb) = (la.map(|l| stat(l, s)), lb.map(|l| stat(l, s)));
                let change_percent = match (va, vb) {
                    (Some(x), Some(y)) if x > 0.0 => Some((y - x) / x * 100.0),
                    _ => None,
                };
                rows.push(Row {
                    operation: op.clone(),
                    phase: phase.map(str::to_string),
                    stat: s,
                    a_ms: va,
                    b_ms: vb,
                    change_percent,
                });
            }
        }
    }
    Comparison { a, b, rows }
}

impl Comparison {
    /// The verdicts of the one rule ([`verdict::slower`]) on each operation both have, B
    /// against A with a tolerance of `pct` percent.
    pub fn verdicts(&self, pct: f64) -> Vec<Verdict> {
        let (a, b) = (evidence(&self.a), evidence(&self.b));
        operations(&self.a.status, &self.b.status)
            .iter()
            .flat_map(|op| verdict::slower(op, &b, std::slice::from_ref(&a), pct))
            .collect()
    }

    /// The operations B is slower in by the rule (`--fail-if-slower`), each described; also an
    /// operation A measured and B has no result for.
    pub fn slower_than(&self, pct: f64) -> Vec<String> {
        let missing = self
            .rows
            .iter()
            .filter(|r| {
                r.phase.is_none() && r.stat == "p99" && r.a_ms.is_some() && r.b_ms.is_none()
            })
            .map(|r| format!("{}: no result in B", r.operation));
        self.verdicts(pct)
            .iter()
            .filter(|v| v.is_slower())
            .map(Verdict::describe)
            .chain(missing)
            .collect()
    }
}

/// What the rule can have of a side: per operation (and the claim-to-first-I/O span), its
/// count and reported percentiles.
fn evidence(s: &Side) -> Evidence {
    let tail = |count: u64, l: &LatencyReport| OpEvidence {
        count,
        ops_per_sec: None,
        latency: Tail::Reported {
            count,
            points: vec![
                (0.5, l.p50_ms),
                (0.95, l.p95_ms),
                (0.99, l.p99_ms),
                (1.0, l.max_ms),
            ],
        },
    };
    let st = &s.status;
    let mut ops: std::collections::BTreeMap<String, OpEvidence> = st
        .operations
        .iter()
        .filter(|(_, r)| r.count > 0)
        .map(|(op, r)| (op.clone(), tail(r.count, &r.latency)))
        .collect();
    // The span is measured over the lifecycles that got to their first I/O.
    if let (Some(l), Some(r)) = (&st.provision_to_first_io, st.operations.get("firstIO")) {
        ops.insert(TO_FIRST_IO.into(), tail(r.count, l));
    }
    Evidence {
        name: format!("run {}", s.run),
        ops,
        ..Default::default()
    }
}

fn side_line(label: &str, s: &Side) -> String {
    let st = &s.status;
    let mut errors: Vec<String> = st
        .operations
        .iter()
        .filter(|(_, r)| r.errors > 0)
        .map(|(op, r)| format!("{op} {}", r.errors))
        .collect();
    if errors.is_empty() {
        errors.push("none".into());
    }
    format!(
        "{label} = {} (StorageClass {}): {} of {} lifecycles completed in {:.1}s; errors: {}",
        s.run,
        s.storage_class,
        st.completed,
        st.requested,
        st.elapsed_ms / 1000.0,
        errors.join(", ")
    )
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:+.1}%"))
}

fn name(r: &Row) -> String {
    match &r.phase {
        None => r.operation.clone(),
        Some(p) => format!("{}.{p}", r.operation),
    }
}

/// The comparison as text, Markdown or JSON.
pub fn render(c: &Comparison, format: Format) -> String {
    let mut out = String::new();
    match format {
        Format::Json => {
            let mut v = serde_json::to_value(c).unwrap_or_default();
            // The sides' own figures, for a reader that wants more than the rows.
            for (k, s) in [("a", &c.a), ("b", &c.b)] {
                v[k]["controlPlane"] = serde_json::to_value(&s.status).unwrap_or_default();
            }
            out = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        }
        Format::Text => {
            let _ = writeln!(out, "{}", side_line("A", &c.a));
            let _ = writeln!(out, "{}", side_line("B", &c.b));
            let _ = writeln!(
                out,
                "{:<22} {:<4} {:>12} {:>12} {:>9}",
                "operation", "stat", "A ms", "B ms", "change"
            );
            for r in &c.rows {
                let _ = writeln!(
                    out,
                    "{:<22} {:<4} {:>12} {:>12} {:>9}",
                    name(r),
                    r.stat,
                    num(r.a_ms),
                    num(r.b_ms),
                    pct(r.change_percent)
                );
            }
        }
        Format::Markdown => {
            let _ = writeln!(out, "- {}", side_line("A", &c.a));
            let _ = writeln!(out, "- {}\n", side_line("B", &c.b));
            let _ = writeln!(out, "| operation | stat | A ms | B ms | change |");
            let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: |");
            for r in &c.rows {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    name(r),
                    r.stat,
                    num(r.a_ms),
                    num(r.b_ms),
                    pct(r.change_percent)
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(run: &str, provision_p50: f64, with_attach: bool) -> Side {
        let mut v = serde_json::json!({
            "requested": 20, "completed": 20, "failed": 0, "elapsedMs": 9000.0,
            "operations": {
                "delete": {"count": 20, "errors": 0, "p50Ms": 50.0, "p95Ms": 60.0, "p99Ms": 70.0, "maxMs": 70.0},
                "provision": {"count": 20, "errors": 0,
                    "p50Ms": provision_p50, "p95Ms": provision_p50 * 2.0, "p99Ms": provision_p50 * 3.0, "maxMs": provision_p50 * 3.0,
                    "phases": {"bound": {"p50Ms": provision_p50, "p95Ms": 1.0, "p99Ms": 1.0, "maxMs": 1.0}}}
            }
        });
        v["provisionToFirstIO"] =
            serde_json::json!({"p50Ms": 1000.0, "p95Ms": 1100.0, "p99Ms": 1200.0, "maxMs": 1300.0});
        if with_attach {
            v["operations"]["attach"] = serde_json::json!({"count": 20, "errors": 0, "p50Ms": 800.0, "p95Ms": 900.0, "p99Ms": 950.0, "maxMs": 990.0});
        }
        Side {
            run: run.into(),
            storage_class: format!("{run}-class"),
            status: serde_json::from_value(v).expect("status"),
        }
    }

    #[test]
    fn rows_follow_the_lifecycle_with_phases_after_their_operation_and_changes_in_percent() {
        let c = compare(side("a", 100.0, true), side("b", 150.0, false));
        let names: Vec<String> = c
            .rows
            .iter()
            .filter(|r| r.stat == "p50")
            .map(name)
            .collect();
        assert_eq!(
            names,
            [
                "provision",
                "provision.bound",
                "attach",
                "delete",
                "claim->firstIO"
            ]
        );
        let p50 = &c.rows[0];
        assert_eq!((p50.a_ms, p50.b_ms), (Some(100.0), Some(150.0)));
        assert_eq!(p50.change_percent, Some(50.0));
        // B has no attach: its cells are empty, no change.
        let attach = c
            .rows
            .iter()
            .find(|r| r.operation == "attach")
            .expect("row");
        assert_eq!((attach.b_ms, attach.change_percent), (None, None));
        // p99 of provision +50 %, but only B's p99 and max lie above A's p99: at least 1 of
        // B's 20 above it and none of A's, which 20 lifecycles cannot tell from noise
        // (p = 20 / 40). Attach is missing in B.
        assert_eq!(c.slower_than(40.0), ["attach: no result in B"]);
        let v = c.verdicts(40.0);
        let provision = v.iter().find(|v| v.op == "provision").expect("verdict");
        assert_eq!(provision.outcome, verdict::Outcome::NotSignificant);
        assert!(
            provision
                .test
                .p_value
                .is_some_and(|p| (p - 0.5).abs() < 1e-12),
            "{provision:?}"
        );
        assert_eq!(provision.against, ["run a"]);
    }

    #[test]
    fn an_operation_slower_by_the_shared_rule_fails_the_gate() {
        // B's provision median (400 ms) above A's p99 (300 ms): at least 11 of B's 20 above it,
        // none of A's: p = C(20, 11) / C(40, 11).
        let c = compare(side("a", 100.0, true), side("b", 400.0, true));
        assert_eq!(
            c.slower_than(40.0),
            ["provision p99 1200.000ms vs 300.000ms (+300.0%; exceedance p=7.3e-5)"]
        );
        let p = c.verdicts(40.0)[..]
            .iter()
            .find(|v| v.op == "provision")
            .and_then(|v| v.test.p_value)
            .expect("p");
        assert!((p - 167_960.0 / 2_311_801_440.0).abs() < 1e-15, "{p}");
        // Beyond 300% it is within the tolerance; the unchanged operations never were.
        assert!(c.slower_than(300.0).is_empty());
        assert_eq!(
            c.verdicts(0.0)
                .iter()
                .filter(|v| v.is_slower())
                .map(|v| v.op.as_str())
                .collect::<Vec<_>>(),
            ["provision"]
        );
    }

    #[test]
    fn text_markdown_and_json_carry_the_same_rows() {
        let c = compare(side("hp", 100.0, true), side("lp", 50.0, true));
        let text = render(&c, Format::Text);
        assert!(
            text.starts_with("A = hp (StorageClass hp-class): 20 of 20 lifecycles completed in 9.0s; errors: none\n"),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.starts_with("provision ") && l.contains(" p50 "))
            .expect("provision p50 row");
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["provision", "p50", "100.000", "50.000", "-50.0%"]
        );
        let md = render(&c, Format::Markdown);
        assert!(
            md.contains("| provision.bound | p50 | 100.000 | 50.000 | -50.0% |"),
            "{md}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&render(&c, Format::Json)).expect("json");
        assert_eq!(json["rows"].as_array().map(Vec::len), Some(c.rows.len()));
        assert_eq!(json["a"]["storageClass"], "hp-class");
        assert_eq!(json["b"]["controlPlane"]["completed"], 20);
    }
}
