//! Maximum-accelerators searches on the cluster (`workload.training.search`): each probe is a
//! child run (`<run>-probe-<k>`, owned by the run, labelled `benchrun.dev/search=<run>`) of
//! every worker with the same `acceleratorsPerWorker`, started at one instant and merged
//! exactly as any run; it is judged on that merged result (the lowest AU of any accelerator of
//! any worker in an epoch, against the mark). The next count comes from the api crate's
//! [`Bracket`], the same doubling-then-bisection the standalone worker drives, replayed from
//! the probes in the status (nothing else is kept between passes). Probes run one at a time,
//! so they never compete for the nodes.
//!
//! The planning and the judging here are pure; the run's pass is `reconcile/search.rs`.

use benchrun_api::training_search::{Bracket, SearchFigures, SearchProbe};
use benchrun_api::Summary;

use crate::crd::training::{ProbeRow, SearchStatus};
use crate::crd::{BenchmarkRun, BenchmarkRunSpec, Phase};
use crate::run_rules::{self, cond};

/// Label on a search's probe runs: the searching run's name
/// (`kubectl get br -l benchrun.dev/search=NAME`).
pub const SEARCH_LABEL: &str = "benchrun.dev/search";

/// Longest run name that leaves room for `-probe-<k>` (at most two digits: a search over 1024
/// accelerators takes at most 22 probes).
pub const MAX_PARENT_NAME: usize = crate::resources::MAX_RUN_NAME - 9;

/// What a search runs: the mark it judges by, the most accelerators a probe may run, and
/// each probe's epochs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// The AU mark, percent.
    pub mark: f64,
    /// The most accelerators per worker.
    pub cap: u32,
    /// Epochs of each probe.
    pub epochs: u32,
}

/// The search a run asks for: `None` when it asks for none, else its plan or why the
/// workload cannot be searched.
pub fn plan(spec: &BenchmarkRunSpec) -> Option<Result<Plan, String>> {
    let t = spec.workload.training.as_ref()?;
    let q = t.search.as_ref().filter(|q| q.max_accelerators)?;
    Some((|| {
        let shape = t
            .shape()
            .map_err(|(k, m)| format!("spec.workload.training.{k}: {m}"))?;
        let mark = shape.min_au.ok_or_else(|| {
            "spec.workload.training.search: give `minAU` or a `preset` (the AU mark)".to_string()
        })?;
        Ok(Plan {
            mark,
            // A perNode run's worker count is known once placed: each probe's placement
            // checks its ranks then.
            cap: q.cap(
                &shape,
                spec.workers
                    .count
                    .filter(|_| !spec.workers.per_node())
                    .unwrap_or(1)
                    .max(1) as u32,
            ),
            epochs: q.epochs(),
        })
    })())
}

/// What the schema cannot say about a searching run: each problem as "spec...: why".
pub fn validate(spec: &BenchmarkRunSpec, name: &str) -> Vec<String> {
    // A search without a mark is the workload's own error (`training.search`).
    if plan(spec).is_none() {
        return vec![];
    }
    let mut errs = vec![];
    if spec.matrix.is_some() {
        errs.push("spec.workload.training.search: not with spec.matrix (run the search alone; each of its probes is a child run already)".into());
    }
    if name.len() > MAX_PARENT_NAME {
        errs.push(format!(
            "metadata.name: at most {MAX_PARENT_NAME} characters for a searching run (its probes are named <name>-probe-<k>; got {})",
            name.len()
        ));
    }
    errs
}

/// The name of probe `k` (1-based).
pub fn child_name(parent: &str, k: usize) -> String {
    format!("{parent}-probe-{k}")
}

/// The spec of a probe of `n` accelerators per worker: the run's spec with that count and
/// the probe's epochs, no search, and neither baseline, thresholds, TTL nor timeout (the
/// searching run holds those: its timeout bounds every probe, its TTL removes them with it,
/// its thresholds judge the answer). The workload's own AU mark stays: a probe below it
/// fails its `minAU`, which is what it shows in `kubectl get br`.
pub fn probe_spec(parent: &BenchmarkRunSpec, n: u32, epochs: u32) -> BenchmarkRunSpec {
    let mut spec = parent.clone();
    if let Some(t) = spec.workload.training.as_mut() {
        t.accelerators_per_worker = Some(n);
        t.epochs = Some(epochs);
        t.search = None;
    }
    spec.matrix = None;
    spec.baseline_ref = None;
    spec.thresholds.clear();
    spec.ttl_seconds_after_finished = None;
    spec.timeout = None;
    spec
}

/// The search's state, replayed from the probes judged so far.
pub fn bracket(cap: u32, rows: &[ProbeRow]) -> Bracket {
    let mut b = Bracket::new(cap);
    for p in rows.iter().filter_map(|r| r.result.as_ref()) {
        b.record(p.accelerators, p.passed);
    }
    b
}

/// How a finished probe ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Judged {
    /// Its merged result, judged by the mark.
    Probe(SearchProbe),
    /// It failed for another reason than its AU (its workers, its storage): the search cannot
    /// go on without guessing.
    Failed(String),
}

/// Judge a finished probe child of `n` accelerators: by its merged result when it succeeded
/// or only missed its AU mark (`ThresholdsNotMet`), else the search fails naming why.
pub fn judge(child: &BenchmarkRun, merged: Option<&Summary>, n: u32, mark: f64) -> Judged {
    let name = child.metadata.name.clone().unwrap_or_default();
    let st = child.status.clone().unwrap_or_default();
    let failed = run_rules::condition(&st.conditions, cond::FAILED).filter(|c| c.status == "True");
    let below_mark = failed.is_some_and(|c| c.reason == "ThresholdsNotMet");
    match (st.phase, merged) {
        (Phase::Succeeded, Some(s)) => Judged::Probe(SearchProbe::of(n, s, mark)),
        (Phase::Failed, Some(s)) if below_mark => Judged::Probe(SearchProbe::of(n, s, mark)),
        (Phase::Succeeded, None) => Judged::Failed(format!(
            "probe run {name} succeeded but has no merged result"
        )),
        _ => Judged::Failed(format!(
            "probe run {name} ({n} accelerators per worker) ended {}: {}",
            st.phase.as_str(),
            failed.map_or("no reason given".to_string(), |c| format!(
                "{}: {}",
                c.reason, c.message
            ))
        )),
    }
}

/// The row whose result stands for the run: the last probe at the answer that passed, or the
/// first probe when none passed (its figures show how far below the mark one accelerator is).
pub fn representative(rows: &[ProbeRow], answer: u32) -> Option<usize> {
    rows.iter()
        .rposition(|r| {
            r.result
                .as_ref()
                .is_some_and(|p| p.passed && p.accelerators == answer)
        })
        .or_else(|| (!rows.is_empty()).then_some(0))
}

/// The figures of the finished search, as the standalone worker's `training.search`.
pub fn figures(st: &SearchStatus, b: &Bracket) -> SearchFigures {
    SearchFigures {
        max_accelerators: b.answer(),
        mark: st.mark,
        cap: st.cap,
        at_cap: b.at_cap(),
        probes: st.probes.iter().filter_map(|r| r.result.clone()).collect(),
    }
}

/// The answer in words, as the standalone table's last line.
pub fn answer_text(f: &SearchFigures) -> String {
    match (f.max_accelerators, f.at_cap) {
        (0, _) => format!(
            "max accelerators per worker: 0 (even one accelerator falls below the {:.1}% mark)",
            f.mark
        ),
        (n, true) => format!(
            "max accelerators per worker: at least {n} (every probe up to the cap of {} passed)",
            f.cap
        ),
        (n, false) => format!(
            "max accelerators per worker: {n} ({n} passed the {:.1}% mark, {} did not)",
            f.mark,
            n + 1
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> BenchmarkRunSpec {
        serde_yaml::from_str(&format!(
            "workload: {{target: s3://b/p/, ops: [{{op: get}}], training: {{samples: 64, sampleSize: 4KiB, computeTime: 20ms, minAU: 90, search: {{maxAccelerators: true, upTo: 8, epochsPerProbe: 2}}}}}}\nworkers: {{count: 2}}\n{extra}"
        ))
        .expect("spec parses")
    }

    fn probe(n: u32, passed: bool) -> ProbeRow {
        ProbeRow {
            run: format!("s-probe-{n}"),
            accelerators: n,
            phase: if passed {
                Phase::Succeeded
            } else {
                Phase::Failed
            },
            result: Some(SearchProbe {
                accelerators: n,
                complete: true,
                passed,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_probe_is_the_run_at_one_count_without_search_thresholds_or_timeout() {
        let s =
            spec("thresholds: [{op: all, minAU: 50}]\ntimeout: 10m\nttlSecondsAfterFinished: 60");
        let p = plan(&s).expect("a search").expect("plans");
        assert_eq!(
            p,
            Plan {
                mark: 90.0,
                cap: 8,
                epochs: 2
            }
        );
        let c = probe_spec(&s, 4, p.epochs);
        let t = c.workload.training.clone().expect("training");
        assert_eq!((t.accelerators_per_worker, t.epochs), (Some(4), Some(2)));
        assert!(t.search.is_none());
        assert_eq!(t.min_au, Some(90.0), "the probe keeps the mark");
        assert!(c.thresholds.is_empty() && c.timeout.is_none());
        assert!(c.ttl_seconds_after_finished.is_none());
        assert_eq!(c.workers, s.workers);
        assert!(plan(&c).is_none(), "a probe searches no further");
        assert_eq!(child_name("s", 3), "s-probe-3");
    }

    #[test]
    fn validation_wants_a_mark_no_matrix_and_room_for_the_probe_names() {
        assert!(validate(&spec(""), "s").is_empty());
        let errs = validate(
            &spec("matrix: {parameters: {seed: [1, 2]}}"),
            &"x".repeat(60),
        );
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("not with spec.matrix"), "{errs:?}");
        assert!(errs[1].starts_with("metadata.name: at most 54"), "{errs:?}");
        let no_mark: BenchmarkRunSpec = serde_yaml::from_str(
            "workload: {target: s3://b/p/, ops: [{op: get}], training: {samples: 8, sampleSize: 4KiB, computeTime: 1ms, search: {maxAccelerators: true}}}",
        )
        .expect("spec");
        assert_eq!(
            plan(&no_mark),
            Some(Err(
                "spec.workload.training.search: give `minAU` or a `preset` (the AU mark)".into()
            ))
        );
    }

    #[test]
    fn the_state_is_replayed_from_the_probes_judged() {
        // 1, 2, 4 passed, 8 failed: bisect to 6.
        let rows: Vec<ProbeRow> = vec![
            probe(1, true),
            probe(2, true),
            probe(4, true),
            probe(8, false),
        ];
        let b = bracket(8, &rows);
        assert_eq!(b.next(), Some(6));
        // A probe in flight (no result) does not count.
        let mut pending = rows.clone();
        pending.push(ProbeRow {
            run: "s-probe-5".into(),
            accelerators: 6,
            ..Default::default()
        });
        assert_eq!(bracket(8, &pending).next(), Some(6));
        // 6 failed, 5 passed: the answer is 5, with 6 failing above it.
        let mut done = rows.clone();
        done.push(probe(6, false));
        done.push(probe(5, true));
        let b = bracket(8, &done);
        assert_eq!((b.next(), b.answer(), b.at_cap()), (None, 5, false));
        assert_eq!(representative(&done, 5), Some(5));
        let st = SearchStatus {
            mark: 90.0,
            cap: 8,
            probes: done,
            ..Default::default()
        };
        let f = figures(&st, &b);
        assert_eq!(f.probes.len(), 6);
        assert_eq!(
            answer_text(&f),
            "max accelerators per worker: 5 (5 passed the 90.0% mark, 6 did not)"
        );
        // Nothing passed: the first probe stands for the run.
        assert_eq!(representative(&[probe(1, false)], 0), Some(0));
        assert_eq!(representative(&[], 0), None);
    }

    #[test]
    fn a_probe_below_the_mark_is_judged_and_one_that_broke_fails_the_search() {
        let mut child: BenchmarkRun = serde_json::from_value(serde_json::json!({
            "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": "s-probe-2"},
            "spec": {"workload": {"target": "s3://b/p/", "ops": [{"op": "get"}]}},
            "status": {"phase": "Failed", "conditions": [{
                "type": "Failed", "status": "True", "reason": "ThresholdsNotMet",
                "message": "training minAU >= 90%: got 42%",
                "lastTransitionTime": "2026-01-01T00:00:00Z"
            }]}
        }))
        .expect("run");
        let merged = Summary::default();
        match judge(&child, Some(&merged), 2, 90.0) {
            Judged::Probe(p) => {
                assert_eq!((p.accelerators, p.passed, p.complete), (2, false, false))
            }
            other => panic!("{other:?}"),
        }
        // Its workers failed: no AU to judge by.
        if let Some(st) = child.status.as_mut() {
            st.conditions[0].reason = "WorkersFailed".into();
            st.conditions[0].message = "worker w1 exited 2".into();
        }
        assert_eq!(
            judge(&child, Some(&merged), 2, 90.0),
            Judged::Failed(
                "probe run s-probe-2 (2 accelerators per worker) ended Failed: WorkersFailed: worker w1 exited 2".into()
            )
        );
    }
}
