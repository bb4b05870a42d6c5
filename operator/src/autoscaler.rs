//! What a node autoscaler said about an unschedulable worker pod, and how long the run waits
//! for the node it promised (pure).
//!
//! An unschedulable worker normally fails after `spec.workers.scheduleTimeout`. A cluster
//! autoscaler or Karpenter that is bringing up a node for the pod says so in the pod's Events:
//! - cluster-autoscaler: `TriggeredScaleUp` ("pod triggered scale-up: [{pool 1->2 (max: 3)}]"),
//!   or `NotTriggerScaleUp` ("pod didn't trigger scale-up: ...") when no node group can help;
//! - Karpenter: `Nominated` ("Pod should schedule on: nodeclaim/default-x2k4l").
//!
//! The latest of these decides. A scale-up under way extends the wait past the timeout, up to
//! [`SCALE_UP_WAIT_FACTOR`] times `scheduleTimeout` in all (a node that never joins must not
//! hold the run until its deadline). A refused scale-up ends the extension: past the timeout
//! the worker fails with the autoscaler's message. Before the timeout nothing changes (a
//! previous run's pods may still be terminating, which no autoscaler knows about), except that
//! the condition says what the autoscaler said.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Event;

use crate::run_rules::from_time;

/// How long, in all and in units of `spec.workers.scheduleTimeout`, a worker pod may stay
/// unschedulable while an autoscaler reports a scale-up for it (default timeout 5 min: 15 min).
pub const SCALE_UP_WAIT_FACTOR: u32 = 3;

/// What an autoscaler last said about a pod.
#[derive(Clone, Debug, PartialEq)]
pub enum ScaleUp {
    /// A node is being brought up for the pod: who said so, and what.
    Triggered {
        /// "cluster-autoscaler" or "Karpenter".
        by: &'static str,
        /// Its message.
        message: String,
    },
    /// cluster-autoscaler found no node group that would fit the pod: its message.
    Refused(String),
}

/// The latest autoscaler verdict among a pod's events (any order; `None` when none is an
/// autoscaler's).
pub fn latest(events: &[Event]) -> Option<ScaleUp> {
    events
        .iter()
        .filter_map(|e| {
            let message = e.message.clone().unwrap_or_default().trim().to_string();
            let verdict = match e.reason.as_deref()? {
                "TriggeredScaleUp" => ScaleUp::Triggered {
                    by: "cluster-autoscaler",
                    message,
                },
                "Nominated" => ScaleUp::Triggered {
                    by: "Karpenter",
                    message,
                },
                "NotTriggerScaleUp" => ScaleUp::Refused(message),
                _ => return None,
            };
            Some((event_time(e), verdict))
        })
        // Stable: of two at the same instant (second precision), the later in the list.
        .max_by_key(|(t, _)| *t)
        .map(|(_, v)| v)
}

/// When an event last happened: the latest of its times (core events set `lastTimestamp`,
/// events.k8s.io ones `eventTime` and `series`; `creationTimestamp` is always there).
fn event_time(e: &Event) -> Option<DateTime<Utc>> {
    [
        e.last_timestamp.as_ref().map(from_time),
        e.series
            .as_ref()
            .and_then(|s| s.last_observed_time.as_ref())
            .map(|t| DateTime::from_timestamp_micros(t.0.as_microsecond()).unwrap_or_default()),
        e.event_time
            .as_ref()
            .map(|t| DateTime::from_timestamp_micros(t.0.as_microsecond()).unwrap_or_default()),
        e.first_timestamp.as_ref().map(from_time),
        e.metadata.creation_timestamp.as_ref().map(from_time),
    ]
    .into_iter()
    .flatten()
    .max()
}

/// Whether an unschedulable worker goes on waiting, and what to say.
#[derive(Clone, Debug, PartialEq)]
pub enum ScheduleWait {
    /// Waiting: the bound waited for (the timeout, or the extended bound), and the
    /// autoscaler's word if any ("cluster-autoscaler triggered a scale-up: ...").
    Waiting {
        /// The bound of this wait.
        bound: Duration,
        /// What the autoscaler said, for the condition.
        autoscaler: Option<String>,
        /// Whether the bound is the extended one (a scale-up under way).
        extended: bool,
    },
    /// Give up.
    GiveUp {
        /// What the autoscaler said, if it did: said first, as the cause.
        autoscaler: Option<String>,
        /// The bound that passed ("for 60s, spec.workers.scheduleTimeout").
        bound: String,
    },
}

/// Whether a pod unschedulable for `waited` goes on waiting, given `spec.workers.scheduleTimeout`
/// and what the autoscaler last said.
pub fn schedule_wait(
    waited: Duration,
    timeout: Duration,
    autoscaler: Option<&ScaleUp>,
) -> ScheduleWait {
    let extended = timeout * SCALE_UP_WAIT_FACTOR;
    let timed_out = || format!("for {}s, spec.workers.scheduleTimeout", timeout.as_secs());
    match autoscaler {
        None if waited >= timeout => ScheduleWait::GiveUp {
            autoscaler: None,
            bound: timed_out(),
        },
        None => ScheduleWait::Waiting {
            bound: timeout,
            autoscaler: None,
            extended: false,
        },
        Some(ScaleUp::Refused(msg)) => {
            let said = format!("cluster-autoscaler did not trigger a scale-up: {msg}");
            if waited >= timeout {
                ScheduleWait::GiveUp {
                    autoscaler: Some(said),
                    bound: timed_out(),
                }
            } else {
                ScheduleWait::Waiting {
                    bound: timeout,
                    autoscaler: Some(said),
                    extended: false,
                }
            }
        }
        Some(ScaleUp::Triggered { by, message }) => {
            let said = if *by == "Karpenter" {
                format!("Karpenter nominated a node: {message}")
            } else {
                format!("{by} triggered a scale-up: {message}")
            };
            if waited >= extended {
                ScheduleWait::GiveUp {
                    autoscaler: Some(format!("no node came up: {said}")),
                    bound: format!(
                        "for {}s, {SCALE_UP_WAIT_FACTOR} x spec.workers.scheduleTimeout",
                        extended.as_secs()
                    ),
                }
            } else {
                ScheduleWait::Waiting {
                    bound: extended,
                    autoscaler: Some(said),
                    extended: true,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_rules::to_time;
    use k8s_openapi::api::core::v1::EventSeries;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).expect("time")
    }

    fn ev(reason: &str, message: &str, last: i64) -> Event {
        Event {
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_timestamp: Some(to_time(at(last))),
            ..Default::default()
        }
    }

    const T: Duration = Duration::from_secs(60);

    #[test]
    fn the_latest_autoscaler_event_decides_and_others_are_ignored() {
        assert_eq!(latest(&[]), None);
        assert_eq!(
            latest(&[ev("FailedScheduling", "0/2 nodes", 5)]),
            None,
            "the scheduler's own events are not an autoscaler's"
        );
        let up = ev(
            "TriggeredScaleUp",
            "pod triggered scale-up: [{pool 1->2}]",
            10,
        );
        let no = ev(
            "NotTriggerScaleUp",
            "pod didn't trigger scale-up: 1 max size",
            20,
        );
        let want_no = Some(ScaleUp::Refused(
            "pod didn't trigger scale-up: 1 max size".into(),
        ));
        assert_eq!(latest(&[up.clone(), no.clone()]), want_no);
        assert_eq!(
            latest(&[no.clone(), up.clone()]),
            want_no,
            "by time, not order"
        );
        let up_again = ev("TriggeredScaleUp", "again", 30);
        assert_eq!(
            latest(&[no, up_again]),
            Some(ScaleUp::Triggered {
                by: "cluster-autoscaler",
                message: "again".into()
            })
        );
        // Karpenter writes events.k8s.io events: eventTime and series, no lastTimestamp.
        let nominated = Event {
            reason: Some("Nominated".into()),
            message: Some("Pod should schedule on: nodeclaim/default-x2k4l".into()),
            event_time: Some(MicroTime(
                k8s_openapi::jiff::Timestamp::from_second(at(0).timestamp()).expect("t"),
            )),
            series: Some(EventSeries {
                count: Some(2),
                last_observed_time: Some(MicroTime(
                    k8s_openapi::jiff::Timestamp::from_second(at(40).timestamp()).expect("t"),
                )),
            }),
            ..Default::default()
        };
        assert_eq!(
            latest(&[up, nominated]),
            Some(ScaleUp::Triggered {
                by: "Karpenter",
                message: "Pod should schedule on: nodeclaim/default-x2k4l".into()
            }),
            "its series' last time counts"
        );
    }

    #[test]
    fn without_an_autoscaler_the_schedule_timeout_is_the_bound() {
        assert_eq!(
            schedule_wait(Duration::from_secs(59), T, None),
            ScheduleWait::Waiting {
                bound: T,
                autoscaler: None,
                extended: false
            }
        );
        assert_eq!(
            schedule_wait(T, T, None),
            ScheduleWait::GiveUp {
                autoscaler: None,
                bound: "for 60s, spec.workers.scheduleTimeout".into()
            }
        );
    }

    #[test]
    fn a_scale_up_extends_the_wait_to_three_timeouts_and_says_so() {
        let up = ScaleUp::Triggered {
            by: "cluster-autoscaler",
            message: "pod triggered scale-up: [{pool 1->2 (max: 3)}]".into(),
        };
        let said = "cluster-autoscaler triggered a scale-up: pod triggered scale-up: [{pool 1->2 (max: 3)}]";
        for waited in [10, 60, 179] {
            assert_eq!(
                schedule_wait(Duration::from_secs(waited), T, Some(&up)),
                ScheduleWait::Waiting {
                    bound: Duration::from_secs(180),
                    autoscaler: Some(said.into()),
                    extended: true
                },
                "{waited}s"
            );
        }
        assert_eq!(
            schedule_wait(Duration::from_secs(180), T, Some(&up)),
            ScheduleWait::GiveUp {
                autoscaler: Some(format!("no node came up: {said}")),
                bound: "for 180s, 3 x spec.workers.scheduleTimeout".into()
            }
        );
        let karpenter = ScaleUp::Triggered {
            by: "Karpenter",
            message: "Pod should schedule on: nodeclaim/a".into(),
        };
        assert!(matches!(
            schedule_wait(Duration::from_secs(90), T, Some(&karpenter)),
            ScheduleWait::Waiting { autoscaler: Some(s), .. }
                if s == "Karpenter nominated a node: Pod should schedule on: nodeclaim/a"
        ));
    }

    #[test]
    fn a_refused_scale_up_ends_the_wait_at_the_timeout_with_its_message() {
        let no = ScaleUp::Refused("pod didn't trigger scale-up: 2 node(s) didn't match".into());
        // Before the timeout: still waiting (pods of an earlier run may be terminating), saying it.
        assert_eq!(
            schedule_wait(Duration::from_secs(30), T, Some(&no)),
            ScheduleWait::Waiting {
                bound: T,
                autoscaler: Some(
                    "cluster-autoscaler did not trigger a scale-up: pod didn't trigger \
                     scale-up: 2 node(s) didn't match"
                        .into()
                ),
                extended: false
            }
        );
        // At the timeout: given up, with its message, not extended.
        assert_eq!(
            schedule_wait(Duration::from_secs(60), T, Some(&no)),
            ScheduleWait::GiveUp {
                autoscaler: Some(
                    "cluster-autoscaler did not trigger a scale-up: pod didn't trigger \
                     scale-up: 2 node(s) didn't match"
                        .into()
                ),
                bound: "for 60s, spec.workers.scheduleTimeout".into()
            }
        );
    }
}
