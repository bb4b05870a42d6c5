//! Exit codes a CI job can gate on, and the verdict of a finished run. Kept pure, so the
//! mapping is tested without a cluster; the codes are listed under `--help` (`cli.rs`).

use std::fmt;
use std::process::ExitCode;

use benchrun_operator::crd::{BenchmarkRun, Phase};

// One table with `benchrun-worker`'s (`benchrun_worker::exit`, listed under `--help`).
pub use benchrun_worker::exit::{
    BAD_INPUT, ERROR, INTERRUPTED, OK, REGRESSED, RUN_FAILED, SLOWER, THRESHOLDS_MISSED,
};

/// An error caused by what the user gave, not by the cluster: exit [`BAD_INPUT`].
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// A [`BadInput`] error.
pub fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    BadInput(msg.into()).into()
}

/// The exit code of an error that ended a command.
pub fn of_error(e: &anyhow::Error) -> u8 {
    let bad = e.chain().any(|c| {
        c.is::<BadInput>()
            || c.is::<benchrun_api::SpecError>()
            || matches!(c.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422))
    });
    if bad {
        BAD_INPUT
    } else {
        ERROR
    }
}

/// The error as one line (kubectl's `error: ...`): causes joined by `: `, newlines folded.
pub fn one_line(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How a run ended, for the exit code and the last line printed.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Succeeded, thresholds (if any) met.
    Succeeded,
    /// A result, but these limits missed (`get maxP99: got ..., want ...`).
    ThresholdsMissed(Vec<String>),
    /// Failed: the reason and message of its `Complete` condition.
    Failed(String),
    /// Succeeded, but regressed against `spec.baselineRef`: the regressions named.
    Regressed(Vec<String>),
    /// Not finished yet (phase).
    Unfinished(Phase),
}

impl Verdict {
    /// The verdict of `run` from its status.
    pub fn of(run: &BenchmarkRun) -> Verdict {
        let Some(st) = run.status.as_ref() else {
            return Verdict::Unfinished(Phase::Pending);
        };
        if !st.phase.is_finished() {
            return Verdict::Unfinished(st.phase);
        }
        let missed: Vec<String> = st
            .thresholds
            .iter()
            .filter(|c| !c.met)
            .map(|c| c.describe())
            .collect();
        let cond_false = |t: &str| {
            st.conditions
                .iter()
                .find(|c| c.type_ == t && c.status == "False")
        };
        let thresholds_false = cond_false(benchrun_operator::run_rules::cond::THRESHOLDS_MET);
        if !missed.is_empty() || thresholds_false.is_some() {
            let missed = if missed.is_empty() {
                thresholds_false
                    .map(|c| vec![c.message.clone()])
                    .unwrap_or_default()
            } else {
                missed
            };
            return Verdict::ThresholdsMissed(missed);
        }
        let regressed = st.conditions.iter().find(|c| {
            c.type_ == benchrun_operator::run_rules::cond::REGRESSED && c.status == "True"
        });
        let regressions = st
            .baseline
            .as_ref()
            .map(|b| b.regressions.clone())
            .unwrap_or_default();
        match st.phase {
            Phase::Succeeded if regressed.is_some() || !regressions.is_empty() => {
                Verdict::Regressed(if regressions.is_empty() {
                    regressed
                        .map(|c| vec![c.message.clone()])
                        .unwrap_or_default()
                } else {
                    regressions
                })
            }
            Phase::Succeeded => Verdict::Succeeded,
            _ => Verdict::Failed(
                cond_false(benchrun_operator::run_rules::cond::COMPLETE)
                    .map(|c| format!("{}: {}", c.reason, c.message))
                    .unwrap_or_else(|| "no reason given".into()),
            ),
        }
    }

    /// The exit code of a command that ends with this verdict.
    pub fn code(&self) -> u8 {
        match self {
            Verdict::Succeeded => OK,
            Verdict::ThresholdsMissed(_) => THRESHOLDS_MISSED,
            Verdict::Failed(_) => RUN_FAILED,
            Verdict::Regressed(_) => REGRESSED,
            Verdict::Unfinished(_) => ERROR,
        }
    }

    /// The one line for stderr when it is not a success.
    pub fn message(&self, name: &str) -> Option<String> {
        match self {
            Verdict::Succeeded => None,
            Verdict::ThresholdsMissed(m) => Some(format!(
                "run {name} missed its thresholds: {}",
                m.join("; ")
            )),
            Verdict::Failed(why) => Some(format!("run {name} failed: {why}")),
            Verdict::Regressed(r) => Some(format!(
                "run {name} regressed against its baseline: {}",
                r.join("; ")
            )),
            Verdict::Unfinished(p) => Some(format!(
                "run {name} has not finished (phase {})",
                p.as_str()
            )),
        }
    }
}

/// An exit code for `main`.
pub fn code(c: u8) -> ExitCode {
    ExitCode::from(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_operator::crd::thresholds::ThresholdCheck;
    use benchrun_operator::crd::BenchmarkRunStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn run(status: Option<BenchmarkRunStatus>) -> BenchmarkRun {
        let spec = serde_yaml::from_str(
            "workload: {target: file:///data/x, duration: 1s, ops: [{op: get}]}",
        )
        .expect("spec");
        let mut r = BenchmarkRun::new("r", spec);
        r.status = status;
        r
    }

    fn cond(t: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: t.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(Default::default()),
            observed_generation: None,
        }
    }

    #[test]
    fn verdicts_map_to_distinct_codes() {
        assert_eq!(Verdict::of(&run(None)), Verdict::Unfinished(Phase::Pending));
        let ok = run(Some(BenchmarkRunStatus {
            phase: Phase::Succeeded,
            ..Default::default()
        }));
        assert_eq!(Verdict::of(&ok).code(), OK);
        assert_eq!(Verdict::of(&ok).message("r"), None);

        let failed = run(Some(BenchmarkRunStatus {
            phase: Phase::Failed,
            conditions: vec![cond("Complete", "False", "WorkersLost", "w1 was evicted")],
            ..Default::default()
        }));
        let v = Verdict::of(&failed);
        assert_eq!(v, Verdict::Failed("WorkersLost: w1 was evicted".into()));
        assert_eq!(v.code(), RUN_FAILED);
        assert_eq!(
            v.message("r").as_deref(),
            Some("run r failed: WorkersLost: w1 was evicted")
        );

        let missed = run(Some(BenchmarkRunStatus {
            phase: Phase::Failed,
            conditions: vec![
                cond("Complete", "False", "ThresholdsNotMet", "..."),
                cond("ThresholdsMet", "False", "ThresholdsNotMet", "..."),
            ],
            thresholds: vec![
                ThresholdCheck {
                    op: "get".into(),
                    limit: "maxP99".into(),
                    want: "<= 1ms".into(),
                    got: "3.000ms".into(),
                    met: false,
                },
                ThresholdCheck {
                    op: "all".into(),
                    limit: "maxErrorRate".into(),
                    want: "<= 0".into(),
                    got: "0".into(),
                    met: true,
                },
            ],
            ..Default::default()
        }));
        let v = Verdict::of(&missed);
        assert_eq!(
            v,
            Verdict::ThresholdsMissed(vec!["get maxP99: got 3.000ms, want <= 1ms".into()])
        );
        assert_eq!(v.code(), THRESHOLDS_MISSED);
        // Succeeded, but the operator found a regression against spec.baselineRef.
        let regressed = run(Some(BenchmarkRunStatus {
            phase: Phase::Succeeded,
            conditions: vec![
                cond("Complete", "True", "Succeeded", "..."),
                cond(
                    "Regressed",
                    "True",
                    "Regressed",
                    "against run a (tolerance 10%): get ops/s -30.0%",
                ),
            ],
            baseline: Some(benchrun_operator::crd::baseline::BaselineStatus {
                source: "run a".into(),
                tolerance_percent: 10.0,
                regressions: vec!["get ops/s -30.0%".into()],
                ..Default::default()
            }),
            ..Default::default()
        }));
        let v = Verdict::of(&regressed);
        assert_eq!(v, Verdict::Regressed(vec!["get ops/s -30.0%".into()]));
        assert_eq!(v.code(), REGRESSED);
        assert_ne!(v.code(), OK, "a regressed run fails a CI gate");
        assert_eq!(
            v.message("r").as_deref(),
            Some("run r regressed against its baseline: get ops/s -30.0%")
        );
        // The condition alone (a status without the comparison) still gates.
        let cond_only = run(Some(BenchmarkRunStatus {
            phase: Phase::Succeeded,
            conditions: vec![cond("Regressed", "True", "Regressed", "get p99 +40%")],
            ..Default::default()
        }));
        assert_eq!(Verdict::of(&cond_only).code(), REGRESSED);
        // Within tolerance, or a baseline that could not be read: not a regression.
        for c in [
            cond("Regressed", "False", "WithinTolerance", "within 10%"),
            cond(
                "Regressed",
                "Unknown",
                "BaselineUnavailable",
                "run a does not exist",
            ),
        ] {
            let r = run(Some(BenchmarkRunStatus {
                phase: Phase::Succeeded,
                conditions: vec![c],
                ..Default::default()
            }));
            assert_eq!(Verdict::of(&r).code(), OK);
        }
        // Thresholds missed and regressed: the thresholds' code (the run Failed).
        let both = run(Some(BenchmarkRunStatus {
            phase: Phase::Failed,
            conditions: vec![
                cond("ThresholdsMet", "False", "ThresholdsNotMet", "get maxP99"),
                cond("Regressed", "True", "Regressed", "get p99 +40%"),
            ],
            ..Default::default()
        }));
        assert_eq!(Verdict::of(&both).code(), THRESHOLDS_MISSED);
        let running = run(Some(BenchmarkRunStatus {
            phase: Phase::Running,
            ..Default::default()
        }));
        assert_eq!(Verdict::of(&running).code(), ERROR);
        let codes = [
            OK,
            ERROR,
            BAD_INPUT,
            RUN_FAILED,
            THRESHOLDS_MISSED,
            SLOWER,
            REGRESSED,
            INTERRUPTED,
        ];
        let mut sorted = codes.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), codes.len(), "codes are distinct");
    }

    #[test]
    fn errors_are_one_line_and_classified() {
        let e = anyhow::Error::new(BadInput("x.yaml is not a workload:\n  line 2".into()))
            .context("reading x.yaml");
        assert_eq!(
            one_line(&e),
            "reading x.yaml: x.yaml is not a workload: line 2"
        );
        assert_eq!(of_error(&e), BAD_INPUT);
        assert_eq!(of_error(&anyhow::anyhow!("connection refused")), ERROR);
    }
}
