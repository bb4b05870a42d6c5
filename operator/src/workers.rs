//! The pass's calls to the workers' agents (through [`crate::client`]): status and summary
//! probes, start requests, shutdowns; each fanned out to every worker at once, bounded.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use tracing::warn;

use crate::client::{fan_out, SummaryError, WorkerClient};
use crate::crd::BenchmarkRun;
use crate::resources::{self, RUN_LABEL};
use crate::state::{self, cond, worker_phase as wp};
use crate::status::Reconciler;
use crate::{results, Error, Result};

impl Reconciler<'_> {
    pub(crate) fn token(&self) -> Result<String> {
        let uid = self
            .run
            .uid()
            .ok_or_else(|| Error::Invalid("the run has no uid".into()))?;
        Ok(resources::worker_token(&self.ctx.config.key, &uid))
    }

    /// The run's pods, from the controller's pod store (a pod created in this pass shows up
    /// in a later one).
    pub(crate) fn pods(&self) -> BTreeMap<String, Pod> {
        let uid = self.run.metadata.uid.as_ref();
        self.ctx
            .pods
            .state()
            .into_iter()
            // Only pods this run controls (a re-created run of the same name must not adopt).
            .filter(|p| {
                p.namespace().as_deref() == Some(self.ns.as_str())
                    && p.labels().get(RUN_LABEL) == Some(&self.name)
                    && p.owner_references().iter().any(|o| Some(&o.uid) == uid)
            })
            .map(|p| (p.name_any(), Pod::clone(&p)))
            .collect()
    }

    pub(crate) fn parallelism(&self) -> usize {
        self.ctx.config.worker_parallelism.max(1)
    }

    pub(crate) fn worker_client(&self, ip: &str, token: &str) -> WorkerClient {
        WorkerClient::new(
            self.ctx.http.clone(),
            &format!("{ip}:{}", self.ctx.config.agent_port),
            token,
        )
    }

    /// Send the start time to every Ready worker at once (bounded), and say whether the last
    /// answer came back before the start time.
    pub(crate) async fn send_starts(&mut self, pods: &BTreeMap<String, Pod>, token: &str) {
        let Some(at) = self
            .status
            .start_time
            .as_deref()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.with_timezone(&Utc))
        else {
            return;
        };
        let mut jobs = Vec::new();
        for (i, w) in self.status.workers.iter().enumerate() {
            if w.phase != wp::READY {
                continue;
            }
            let Some(ip) = pods
                .get(&w.pod)
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.pod_ip.clone())
            else {
                continue;
            };
            jobs.push((i, self.worker_client(&ip, token)));
        }
        if jobs.is_empty() {
            return;
        }
        let sent_at = Utc::now();
        let answers = fan_out(jobs, self.parallelism(), |(i, client)| async move {
            let r = client.start(at).await;
            (i, r, Utc::now())
        })
        .await;
        let mut last = None;
        let mut sent = 0;
        for (i, r, answered) in answers {
            match r {
                Ok(started) => {
                    let w = &mut self.status.workers[i];
                    w.clock_offset_ms = Some((started.clock_offset_ms * 1000.0).round() / 1000.0);
                    w.phase = wp::RUNNING.into();
                    sent += 1;
                    last = last.max(Some(answered));
                }
                Err(e) => warn!("start {}: {e}", self.status.workers[i].name),
            }
        }
        if let Some(last) = last {
            let took = (last - sent_at).num_milliseconds();
            let margin = (at - last).num_milliseconds();
            // What was measured replaces the estimate made before sending (whose warning
            // stays in the events); a late start measured on an earlier pass stays.
            let late_before = state::condition(&self.status.conditions, cond::START_ON_TIME)
                .is_some_and(|c| c.reason == "StartedLate");
            if margin < 0 {
                let msg = format!(
                    "{sent} start requests took {took} ms; the last answer came {} ms after the start time {}: raise startDelay",
                    -margin,
                    at.to_rfc3339()
                );
                self.condition(cond::START_ON_TIME, false, "StartedLate", msg.clone());
                self.event(EventType::Warning, "StartedLate", msg);
            } else if !late_before {
                self.condition(
                    cond::START_ON_TIME,
                    true,
                    "OnTime",
                    format!("{sent} start requests answered in {took} ms, {margin} ms before the start time"),
                );
            }
        }
        let n = self
            .status
            .workers
            .iter()
            .filter(|w| w.phase == wp::RUNNING)
            .count();
        if n > 0 && state::condition(&self.status.conditions, cond::STARTED).is_none() {
            self.condition(
                cond::STARTED,
                true,
                "Started",
                format!("start time {} sent to the workers", at.to_rfc3339()),
            );
        }
    }

    /// Ask every reachable worker to stop (the run failed); pods go per cleanup policy.
    pub(crate) async fn stop_workers(&self) {
        let Ok(token) = self.token() else { return };
        let pods = self.pods();
        let clients = self.agents(pods.values(), &token);
        fan_out(clients, self.parallelism(), |(_, c)| async move {
            let _ = c.shutdown().await;
        })
        .await;
    }

    /// A client for the agent of each of these pods that has an IP, by pod name.
    pub(crate) fn agents<'p>(
        &self,
        pods: impl Iterator<Item = &'p Pod>,
        token: &str,
    ) -> Vec<(String, WorkerClient)> {
        pods.filter_map(|p| {
            let ip = p.status.as_ref()?.pod_ip.as_deref()?;
            Some((p.name_any(), self.worker_client(ip, token)))
        })
        .collect()
    }
}

/// What became of a worker's summary in [`probe`].
pub(crate) enum Collected {
    /// Persisted in its result object (the summary itself dropped): count it.
    Persisted(results::WorkerFigures),
    /// Not to be had now (no answer, not ready): ask again.
    NotYet(String),
    /// Unusable (kept, not counted): the worker has no result.
    Invalid(String),
    /// Fetched but not persisted: not counted, asked for again.
    PersistFailed(Error),
}

/// One worker's answer to a pass.
pub(crate) enum Probe {
    /// No answer (not listening yet, or a network blip).
    Unreachable(String),
    /// Its agent's status, and what became of its summary when it was done.
    Status {
        status: benchrun_api::agent::AgentStatus,
        collected: Option<Collected>,
    },
}

/// Ask one worker where it is; when it is done, fetch its summary, persist it (before anything
/// counts it) and let the worker exit. Runs concurrently with the other workers' probes, so it
/// touches no shared state: the reconciler applies the outcome afterwards.
pub(crate) async fn probe(
    client: WorkerClient,
    cms: Api<ConfigMap>,
    run: &BenchmarkRun,
    name: String,
) -> Probe {
    use benchrun_api::agent::AgentStage;
    let status = match client.status().await {
        Ok(s) => s,
        Err(e) => return Probe::Unreachable(e),
    };
    if status.stage != AgentStage::Done {
        return Probe::Status {
            status,
            collected: None,
        };
    }
    let collected = match client.summary().await {
        Ok((text, summary)) => match results::persist_worker(&cms, run, &name, &text).await {
            Ok(()) => {
                crate::failpoint::hit(crate::failpoint::AFTER_PERSIST);
                Collected::Persisted(results::WorkerFigures::of(&summary))
            }
            Err(e) => Collected::PersistFailed(e),
        },
        Err(SummaryError::Unreachable(e)) => Collected::NotYet(e),
        // Keep what the worker sent (never counted), then say why this worker has no result
        // instead of asking until the timeout.
        Err(SummaryError::Invalid { message, body }) => match body {
            Some(body) => match results::persist_rejected(&cms, run, &name, &body).await {
                Ok(()) => Collected::Invalid(message),
                Err(e) => Collected::PersistFailed(e),
            },
            None => Collected::Invalid(message),
        },
    };
    // Collected or given up on: the worker may exit.
    if matches!(collected, Collected::Persisted(_) | Collected::Invalid(_)) {
        if let Err(e) = client.shutdown().await {
            tracing::debug!("shutdown {name}: {e}");
        }
    }
    Probe::Status {
        status,
        collected: Some(collected),
    }
}
