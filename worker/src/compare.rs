//! `benchrun-worker compare A.json B.json`: per-op differences between two summaries, with a
//! hint whether each could be noise.
//!
//! Every figure of [`Metric`] is compared as an absolute and a relative delta (B against A).
//! Latency distributions are compared whole with a two-sample Kolmogorov-Smirnov test on the
//! HDR histograms ([`ks`]); throughput with a rank-sum test on the per-second timeline
//! ([`rank_sum`]), on the row of all ops (the timeline is not kept per op). With
//! `storage.endpoints`, each gateway is compared too ([`endpoints`]). [`render`] prints the
//! result as text, Markdown or JSON. Those tests describe; whether B is slower than A
//! (`--fail-if-slower`) is the project's one rule, [`verdict`], which the operator's baselines
//! and `kubectl benchrun compare` use too.

pub mod endpoints;
pub mod render;

/// The tests themselves are the api crate's: the operator's baselines run the same ones.
pub use benchrun_api::significance::{
    full_seconds, ks, ops_per_second, rank_sum, significance, STRONG, WEAK,
};

use benchrun_api::verdict::{self, Evidence, Verdict};
use serde::Serialize;

use crate::figures::{relative, Figures, Metric, Scope, Units};
use crate::stats::Summary;

/// The comparison of two summaries.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// The baseline summary.
    pub a: Side,
    /// The summary compared against it.
    pub b: Side,
    /// One row per op of either summary, then all ops together.
    pub rows: Vec<Row>,
    /// One row per endpoint URL of either summary (`storage.endpoints`); absent when neither
    /// has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<endpoints::EndpointRow>,
    /// What the rule of "slower than" needs of A and B (their seconds, counts and histograms).
    #[serde(skip)]
    evidence: (Evidence, Evidence),
}

/// What identifies one compared summary.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// The file it came from.
    pub label: String,
    /// Its target URI.
    pub target: String,
    /// Workers merged into it.
    pub workers: u32,
    /// Length of its measured stage in seconds.
    pub elapsed_seconds: f64,
    /// Stopped from outside before it finished: its figures cover only what ran.
    pub partial: bool,
}

impl Side {
    fn of(label: &str, s: &Summary) -> Self {
        Self {
            label: label.to_string(),
            target: s.target.clone(),
            workers: s.workers,
            elapsed_seconds: s.elapsed_seconds,
            partial: s.partial,
        }
    }
}

/// One op (or all ops) compared.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The op (`get`, `put`, ...) or `all`.
    pub op: String,
    /// `a` or `b` when only that summary has the op (then nothing is compared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_in: Option<String>,
    /// Every figure compared, in [`Metric::ALL`] order.
    pub deltas: Vec<Delta>,
    /// Latency distributions compared whole; `None` when either side has no latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_test: Option<ks::KsTest>,
    /// Per-second throughput compared (row of all ops only); `None` without full seconds on
    /// both sides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_test: Option<rank_sum::RankSum>,
}

/// One figure of one row compared.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delta {
    /// The figure.
    pub metric: Metric,
    /// Its value in A.
    pub a: f64,
    /// Its value in B.
    pub b: f64,
    /// `b - a`.
    pub delta: f64,
    /// `(b - a) / a`; `None` when `a` is 0.
    pub relative: Option<f64>,
    /// Whether B is better or worse.
    pub change: Change,
}

/// Whether B is better or worse than A on one figure, by the figure's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// B is better.
    Better,
    /// B is worse.
    Worse,
    /// No difference.
    Same,
}

impl Change {
    fn of(m: Metric, a: f64, b: f64) -> Self {
        if a == b {
            Change::Same
        } else if (b > a) == m.higher_is_better() {
            Change::Better
        } else {
            Change::Worse
        }
    }
}

/// Compare `b` against `a`, byte rates in MiB/s.
pub fn compare(a_label: &str, a: &Summary, b_label: &str, b: &Summary) -> Comparison {
    compare_in(a_label, a, b_label, b, Units::Binary)
}

/// [`compare`] with byte rates in `units` (MB/s is its own figure, `mbPerSec` in JSON).
pub fn compare_in(
    a_label: &str,
    a: &Summary,
    b_label: &str,
    b: &Summary,
    units: Units,
) -> Comparison {
    let shown = Metric::all(units);
    let mut scopes: Vec<Scope> = a
        .ops
        .keys()
        .chain(b.ops.keys())
        .map(|op| Scope::Op(*op))
        .collect();
    scopes.sort();
    scopes.dedup();
    // With one op, all ops together repeat its figures: that row keeps only what is its own,
    // the process figures and the per-second throughput test.
    let one_op = scopes.len() == 1;
    scopes.push(Scope::All);
    let rows = scopes
        .into_iter()
        .map(|scope| {
            let (fa, fb) = (Figures::of(a, scope), Figures::of(b, scope));
            let in_a = fa.is_some();
            let mut row = Row {
                op: scope.name().to_string(),
                only_in: None,
                deltas: vec![],
                latency_test: None,
                throughput_test: None,
            };
            let (Some(fa), Some(fb)) = (fa, fb) else {
                row.only_in = Some(if in_a { "a" } else { "b" }.into());
                return row;
            };
            // Failed ops' latency on either side: the p99 of all ops, failed included,
            // beside the successful ops' (after it).
            let mut shown = shown.clone();
            if fa.report.all_p99_ms.is_some() || fb.report.all_p99_ms.is_some() {
                let at = shown
                    .iter()
                    .position(|m| *m == Metric::P99Ms)
                    .map_or(0, |i| i + 1);
                shown.insert(at, Metric::AllP99Ms);
            }
            row.deltas = shown
                .iter()
                .filter(|m| !(one_op && scope == Scope::All) || m.process_wide())
                .filter_map(|m| {
                    let (va, vb) = (fa.get(*m, scope)?, fb.get(*m, scope)?);
                    Some(Delta {
                        metric: *m,
                        a: va,
                        b: vb,
                        delta: vb - va,
                        relative: relative(va, vb),
                        change: Change::of(*m, va, vb),
                    })
                })
                .collect();
            row.latency_test = match scope {
                Scope::Op(op) => ks::two_sample(&a.ops[&op].latency.0, &b.ops[&op].latency.0),
                Scope::All if one_op => None,
                Scope::All => ks::two_sample(&a.total().latency.0, &b.total().latency.0),
            };
            if scope == Scope::All {
                row.throughput_test =
                    rank_sum::mann_whitney(&ops_per_second(a), &ops_per_second(b));
            }
            row
        })
        .collect();
    Comparison {
        a: Side::of(a_label, a),
        b: Side::of(b_label, b),
        rows,
        endpoints: endpoints::rows(a, b),
        evidence: (Evidence::of(a_label, a), Evidence::of(b_label, b)),
    }
}

impl Comparison {
    /// The verdicts of the one rule ([`verdict::slower`]) on every op both have (and all ops,
    /// when there are several), B against A with a tolerance of `pct` percent.
    pub fn verdicts(&self, pct: f64) -> Vec<Verdict> {
        let (a, b) = &self.evidence;
        let mut ops: Vec<&String> = b.ops.keys().filter(|op| a.ops.contains_key(*op)).collect();
        // With one op on each side (and `all`), all ops together repeat it.
        if a.ops.len() == 2 && b.ops.len() == 2 {
            ops.retain(|op| op.as_str() != "all");
        }
        ops.into_iter()
            .flat_map(|op| verdict::slower(op, b, std::slice::from_ref(a), pct))
            .collect()
    }

    /// The verdicts that say B is slower, described for a message (`--fail-if-slower`).
    pub fn slower_than(&self, pct: f64) -> Vec<String> {
        self.verdicts(pct)
            .iter()
            .filter(|v| v.is_slower())
            .map(Verdict::describe)
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::spec::OpKind;
    use crate::stats::{OpStats, ProcessStats, Second};

    /// A summary of GETs with these latencies (us) over `elapsed` seconds, one timeline entry
    /// per `per_second` value, 1 MiB per GET and 2 requests each.
    pub(crate) fn summary(latencies_us: &[u64], per_second: &[u64], elapsed: f64) -> Summary {
        let mut get = OpStats::default();
        for &us in latencies_us {
            get.count += 1;
            get.bytes += 1 << 20;
            get.requests += 2;
            get.latency.record(Duration::from_micros(us));
        }
        let mut s = Summary {
            target: "file:///x".into(),
            workers: 1,
            worker_ids: vec!["local".into()],
            started_at: chrono::Utc::now(),
            elapsed_seconds: elapsed,
            stopped_by: "duration".into(),
            ops: [(OpKind::Get, get)].into(),
            timeline: per_second
                .iter()
                .enumerate()
                .map(|(i, n)| Second {
                    second: i as u64,
                    ops: *n,
                    bytes: n << 20,
                    errors: 0,
                    latency_sum_us: n * 1000,
                    ..Default::default()
                })
                .collect(),
            process: ProcessStats {
                cpu_user_seconds: 1.0,
                cpu_system_seconds: 1.0,
                minor_faults: 10,
                major_faults: 0,
            },
            ..Default::default()
        };
        s.refresh();
        s
    }

    fn delta(c: &Comparison, op: &str, m: Metric) -> Delta {
        let row = c.rows.iter().find(|r| r.op == op).unwrap();
        row.deltas.iter().find(|d| d.metric == m).unwrap().clone()
    }

    #[test]
    fn the_p99_of_all_ops_is_compared_when_either_side_has_failed_ops() {
        let a = summary(&[100, 100, 100], &[1], 1.0);
        let mut b = a.clone();
        let get = b.ops.get_mut(&OpKind::Get).unwrap();
        get.count += 1;
        get.errors += 1;
        get.failed_latency
            .entry("timeout".into())
            .or_default()
            .record(Duration::from_secs(30));
        b.refresh();
        let c = compare("a", &a, "b", &b);
        let d = delta(&c, "get", Metric::AllP99Ms);
        // A: nothing failed, its all-ops p99 is its p99; B: the timeout is its tail.
        assert_eq!(d.a, a.report[&OpKind::Get].p99_ms);
        assert!(d.b >= 29_000.0, "{d:?}");
        assert_eq!(d.change, Change::Worse);
        // The successful ops' p99 did not move.
        assert_eq!(delta(&c, "get", Metric::P99Ms).change, Change::Same);
        // Nothing failed on either side: no such figure.
        let plain = compare("a", &a, "a", &a);
        assert!(plain.rows[0]
            .deltas
            .iter()
            .all(|d| d.metric != Metric::AllP99Ms));
    }

    #[test]
    fn a_slower_second_run_has_worse_deltas_and_significant_tests() {
        // A: 100 GETs at 1..=100 us over 2 s; B: 50 GETs at 101..=150 us over 2 s.
        let lat_a: Vec<u64> = (1..=100).collect();
        let lat_b: Vec<u64> = (101..=150).collect();
        let a = summary(&lat_a, &[49, 51], 2.0);
        let b = summary(&lat_b, &[19, 21, 10], 2.5);
        let c = compare("a.json", &a, "b.json", &b);
        assert_eq!(
            c.rows.iter().map(|r| r.op.as_str()).collect::<Vec<_>>(),
            ["get", "all"]
        );
        let ops = delta(&c, "get", Metric::OpsPerSec);
        assert_eq!((ops.a, ops.b, ops.delta), (50.0, 20.0, -30.0));
        assert_eq!(ops.relative, Some(-0.6));
        assert_eq!(ops.change, Change::Worse);
        let p50 = delta(&c, "get", Metric::P50Ms);
        assert_eq!((p50.a, p50.b), (0.050, 0.125));
        assert_eq!(p50.change, Change::Worse);
        let req = delta(&c, "get", Metric::RequestsPerOp);
        assert_eq!((req.a, req.b, req.change), (2.0, 2.0, Change::Same));
        // Process figures only on the row of all ops: 2 CPU s over 100 MiB, then 50 MiB.
        assert!(c.rows[0]
            .deltas
            .iter()
            .all(|d| d.metric != Metric::CpuSecondsPerGib));
        // One op: the row of all ops has only the process figures and no latency test.
        assert_eq!(
            c.rows[1]
                .deltas
                .iter()
                .map(|d| d.metric)
                .collect::<Vec<_>>(),
            [
                Metric::CpuSecondsPerGib,
                Metric::CpuPercent,
                Metric::MinorFaults
            ]
        );
        assert!(c.rows[1].latency_test.is_none());
        let cpu = delta(&c, "all", Metric::CpuSecondsPerGib);
        assert_eq!((cpu.a, cpu.b, cpu.change), (20.48, 40.96, Change::Worse));
        // Disjoint latencies: D = 1.
        let ks = c.rows[0].latency_test.clone().unwrap();
        assert_eq!((ks.n, ks.m, ks.d), (100, 50, 1.0));
        assert!(ks.second_slower && ks.p_value < 1e-9);
        // Two full seconds each (B's third is partial and left out): exact U = 4 of 4.
        let t = c.rows[1].throughput_test.clone().unwrap();
        assert_eq!((t.n, t.m, t.u, t.exact), (2, 2, 4.0, true));
        assert!((t.p_value - 2.0 / 6.0).abs() < 1e-12);
        assert_eq!(significance(t.p_value), "not significant");
        // The rule: ops/s 60% lower, untestable on 2 seconds each (the tolerance decides);
        // p99 150 us against 99 us, all 50 of B's GETs above A's p99 and 1 of A's 100:
        // p = 51 / C(150, 50). The interval: B's 47th to 50th GET over A's 96th to 100th,
        // 147 / 100 and 150 / 96 (56.25%, written as Rust rounds a tie: to even).
        assert_eq!(
            c.slower_than(50.0),
            [
                "get ops/s 20.00 vs 50.00 (-60.0%; not tested: 2 full seconds in b.json and 2 in a.json cannot reach p < 0.01 (5 and 5 can))",
                "get p99 0.150ms vs 0.099ms (+51.5%, 95% CI +47.0% to +56.2%; exceedance p=2.5e-39)",
            ]
        );
        assert!(c.slower_than(70.0).is_empty());
    }

    #[test]
    fn the_gate_is_the_shared_rule_on_every_op() {
        // A GET-heavy mix whose PUTs halved while its GETs got faster: the PUTs are slower on
        // their own, whatever all ops did.
        let mix = |gets: u64, puts: u64| {
            let rate = gets + puts;
            let mut s = summary(
                &(0..gets * 8).map(|i| 1000 + i % 500).collect::<Vec<_>>(),
                &[
                    rate,
                    rate + 3,
                    rate - 3,
                    rate + 6,
                    rate - 6,
                    rate,
                    rate + 3,
                    rate - 3,
                ],
                8.0,
            );
            let mut put = OpStats::default();
            for i in 0..puts * 8 {
                put.count += 1;
                put.latency.record(Duration::from_micros(3000 + i % 700));
            }
            s.ops.insert(OpKind::Put, put);
            s.refresh();
            s
        };
        let (a, b) = (mix(900, 100), mix(1000, 50));
        let c = compare("old.json", &a, "new.json", &b);
        let (ea, eb) = (Evidence::of("old.json", &a), Evidence::of("new.json", &b));
        let want: Vec<String> = ["all", "get", "put"]
            .iter()
            .flat_map(|op| verdict::slower(op, &eb, std::slice::from_ref(&ea), 10.0))
            .filter(|v| v.is_slower())
            .map(|v| v.describe())
            .collect();
        assert_eq!(c.slower_than(10.0), want);
        assert_eq!(want.len(), 1, "{want:?}");
        assert!(
            want[0].starts_with("put ops/s 50.00 vs 100.00 (-50.0%, 95% CI "),
            "{want:?}"
        );
    }

    #[test]
    fn a_forged_or_sparse_timeline_is_read_without_panicking() {
        let mut a = summary(&[10], &[3, 4, 5], 2.5);
        a.timeline[2].second = u64::MAX;
        a.timeline.swap(0, 1);
        // Seconds 1 and 0 are full (in any order); u64::MAX is not.
        assert_eq!(ops_per_second(&a), [4.0, 3.0]);
        let c = compare("a", &a, "b", &a);
        assert_eq!(c.rows[1].throughput_test.as_ref().unwrap().n, 2);
    }

    #[test]
    fn ops_of_only_one_side_are_listed_not_compared() {
        let a = summary(&[10, 20], &[2], 1.0);
        let mut b = a.clone();
        let put = b.ops[&OpKind::Get].clone();
        b.ops.insert(OpKind::Put, put);
        b.refresh();
        let c = compare("a", &a, "b", &b);
        let put = c.rows.iter().find(|r| r.op == "put").unwrap();
        assert_eq!(put.only_in.as_deref(), Some("b"));
        assert!(put.deltas.is_empty());
        let c = compare("b", &b, "a", &a);
        let put = c.rows.iter().find(|r| r.op == "put").unwrap();
        assert_eq!(put.only_in.as_deref(), Some("a"));
        // Two ops: the row of all ops has every figure but TTFB (GET's alone) and its own
        // latency test.
        let all = c.rows.last().unwrap();
        let not_ttfb = Metric::ALL.iter().filter(|m| !m.is_ttfb()).count();
        assert_eq!(all.deltas.len(), not_ttfb);
        assert!(all.latency_test.is_some());
    }

    #[test]
    fn get_ttfb_is_compared_when_both_sides_have_it() {
        let with_ttfb = |ms: &[u64]| {
            let mut s = summary(&[10, 20], &[2], 1.0);
            let mut t = crate::stats::Latency::default();
            for &m in ms {
                t.record(std::time::Duration::from_millis(m));
            }
            s.ops.get_mut(&OpKind::Get).unwrap().ttfb = Some(t);
            s.refresh();
            s
        };
        let (a, b) = (with_ttfb(&[4, 4, 4]), with_ttfb(&[8, 8, 8]));
        let c = compare("a", &a, "b", &b);
        let d = delta(&c, "get", Metric::TtfbP50Ms);
        // HDR's 3 significant digits: 4 ms reads 4.001.
        assert!(
            (d.a - 4.0).abs() < 0.01 && (d.b - 8.0).abs() < 0.01,
            "{d:?}"
        );
        assert!((d.relative.unwrap() - 1.0).abs() < 0.01, "{d:?}");
        assert!(delta(&c, "get", Metric::TtfbP99Ms).b >= 8.0);
        // Without it on one side (an older summary), there is nothing to compare.
        let old = summary(&[10, 20], &[2], 1.0);
        let c = compare("old", &old, "b", &b);
        let get = c.rows.iter().find(|r| r.op == "get").unwrap();
        assert!(get.deltas.iter().all(|d| !d.metric.is_ttfb()));
    }
}
