//! What a pass does: create the run's objects, collect finished workers' summaries, send the
//! start time, stop the workers, merge the results. Each step's outcome goes back to
//! [`super::decide`] or into the pass's draft of the status.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::events::EventType;

use super::decide::{self, Collected};
use super::Reconciler;
use crate::children::{create_if_absent, create_unique};
use crate::client::{fan_out, SummaryError, WorkerClient};
use crate::crd::WorkerPhase;
use crate::run_rules;
use crate::{netpol, resources, results, worker_cleanup, Error, Result};

impl Reconciler<'_> {
    /// Create what the run needs and does not have yet: the token Secret, the workload and
    /// result ConfigMaps, the NetworkPolicy, and each pending worker's claim and pod.
    pub(crate) async fn ensure_objects(&mut self) -> Result<()> {
        let run = self.run;
        create_unique(
            &self.api::<Secret>(),
            &resources::token_secret(run, &self.token()?)?,
        )
        .await?;
        let cms = self.api::<ConfigMap>();
        create_if_absent(&cms, &resources::workload_config_map(run)?, run).await?;
        create_if_absent(&cms, &resources::result_config_map(run)?, run).await?;
        if let Some(ingress) = &self.ctx.config.worker_ingress {
            create_unique(
                &self.api::<NetworkPolicy>(),
                &netpol::worker_policy(run, ingress)?,
            )
            .await?;
        }
        let pods = self.api::<Pod>();
        let count = self.draft.status.workers.len();
        for (index, w) in self.draft.status.workers.clone().into_iter().enumerate() {
            if w.phase != WorkerPhase::Pending {
                continue;
            }
            if let Some(pvc) = resources::worker_claim(run, &w.name)? {
                create_if_absent(&self.api::<PersistentVolumeClaim>(), &pvc, run).await?;
            }
            let mut pod = resources::worker_pod(run, &w, &self.ctx.config.worker_image)?;
            resources::leave_stability_to_the_run(&mut pod, run, self.draft.status.workers.len());
            resources::default_pull_secrets(&mut pod, &self.ctx.config.worker_image_pull_secrets);
            resources::set_rank(&mut pod, index, count);
            if create_if_absent(&pods, &pod, run).await? {
                self.draft.event(
                    EventType::Normal,
                    "CreatedWorker",
                    format!("created pod {} for worker {}", w.pod, w.name),
                );
            }
        }
        Ok(())
    }

    /// Collect the summaries of these finished workers, all at once (bounded): each is
    /// fetched, persisted in its result object before anything counts it, and then its worker
    /// may exit. Concurrent, so it touches no shared state: [`super::decide::collected`]
    /// applies the outcomes.
    pub(crate) async fn collect(
        &self,
        workers: Vec<usize>,
        token: &str,
        pods: &BTreeMap<String, Pod>,
    ) -> Vec<(usize, Collected)> {
        let jobs: Vec<_> = workers
            .into_iter()
            .filter_map(|i| {
                let w = &self.draft.status.workers[i];
                let ip = run_rules::pod_ip(pods.get(&w.pod)?)?;
                Some((i, w.name.clone(), self.worker_client(ip, token)))
            })
            .collect();
        let cms = self.api::<ConfigMap>();
        let run = self.run;
        fan_out(jobs, self.parallelism(), |(i, name, client)| {
            let cms = cms.clone();
            async move { (i, collect_one(&client, &cms, run, &name).await) }
        })
        .await
    }

    /// Tell these workers' agents to exit (workers given up on: see
    /// [`super::decide::Applied::shut_down`]); an agent that does not answer exits at its
    /// linger's end anyway.
    pub(crate) async fn shut_down(
        &self,
        workers: &[usize],
        token: &str,
        pods: &BTreeMap<String, Pod>,
    ) {
        let clients: Vec<_> = workers
            .iter()
            .filter_map(|&i| {
                let w = &self.draft.status.workers[i];
                let ip = run_rules::pod_ip(pods.get(&w.pod)?)?;
                Some((w.name.clone(), self.worker_client(ip, token)))
            })
            .collect();
        fan_out(clients, self.parallelism(), |(name, c)| async move {
            if let Err(e) = c.shutdown().await {
                tracing::debug!("shutdown {name}: {e}");
            }
        })
        .await;
    }

    /// Send the start time to every Ready worker at once (bounded), and say whether the last
    /// answer came back before the start time.
    pub(crate) async fn send_starts(
        &mut self,
        pods: &BTreeMap<String, Pod>,
        at: DateTime<Utc>,
        token: &str,
    ) {
        let mut jobs = Vec::new();
        for (i, w) in self.draft.status.workers.iter().enumerate() {
            if w.phase != WorkerPhase::Ready {
                continue;
            }
            let Some(ip) = pods.get(&w.pod).and_then(run_rules::pod_ip) else {
                continue;
            };
            jobs.push((i, self.worker_client(ip, token)));
        }
        if jobs.is_empty() {
            return;
        }
        let sent_at = Utc::now();
        let first = jobs.iter().map(|(i, _)| *i).min();
        let answers = fan_out(jobs, self.parallelism(), |(i, client)| async move {
            let r = client.start(at).await;
            if r.is_ok() && Some(i) == first {
                crate::failpoint::hit(crate::failpoint::A_START_SENT);
            }
            (i, r, Utc::now())
        })
        .await;
        let answers = answers
            .into_iter()
            .map(|(i, r, answered)| {
                let r = r.map(|st| st.clock_offset_ms).map_err(|e| e.to_string());
                (i, r, answered)
            })
            .collect();
        decide::starts_answered(&mut self.draft, at, sent_at, answers);
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

    /// Ask the workers of the run's running pods to stop; the names of those still at work
    /// (measuring, or removing what they created: [`worker_cleanup::at_work`]), whose pods
    /// must not go yet. An agent that does not answer has exited (or cannot be reached: its
    /// loss is the `WorkersLost` condition's) and is not waited for.
    pub(crate) async fn stop_and_find_busy(&self) -> Result<Vec<String>> {
        let token = self.token()?;
        let pods = self.pods();
        let clients = self.agents(pods.values().filter(|p| running(p)), &token);
        let busy = fan_out(clients, self.parallelism(), |(pod, c)| async move {
            let _ = c.shutdown().await;
            match c.status().await {
                Ok(st) if worker_cleanup::at_work(st.stage) => Some(pod),
                _ => None,
            }
        })
        .await;
        let workers = &self.draft.status.workers;
        Ok(busy
            .into_iter()
            .flatten()
            .map(|pod| {
                workers
                    .iter()
                    .find(|w| w.pod == pod)
                    .map_or(pod, |w| w.name.clone())
            })
            .collect())
    }

    /// Every live worker is collected: merge, persist, then the verdict (baseline,
    /// thresholds, the outcome of a control-plane section run `beside` the workers) and the
    /// final phase.
    pub(crate) async fn complete(&mut self, beside: decide::Beside) -> Result<()> {
        let live: Vec<String> = self
            .draft
            .status
            .workers
            .iter()
            .filter(|w| run_rules::is_live(w))
            .map(|w| w.name.clone())
            .collect();
        let names: Vec<&str> = live.iter().map(String::as_str).collect();
        // A persisted summary that does not merge will not merge on the next pass either:
        // fail now and say which, rather than retry until the timeout. The data stays.
        let merged = match results::merge_persisted(&self.api(), self.run, &names).await {
            Ok(m) => m,
            Err(Error::Result(e)) => {
                decide::merge_failed(&mut self.draft, e);
                self.stop_workers().await;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let text = serde_json::to_string(&merged)?;
        results::persist_merged(&self.api::<ConfigMap>(), &self.name, &text).await?;
        let msg = decide::merged(
            &mut self.draft,
            &merged,
            &resources::result_cm_name(&self.name),
        );
        self.compare_with_baseline(&merged).await;
        decide::verdict(
            &mut self.draft,
            &self.run.spec.thresholds,
            &merged,
            msg,
            beside,
        );
        Ok(())
    }
}

/// Whether a worker's pod is still running (its agent may still be measuring or cleaning up).
fn running(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.metadata.deletion_timestamp.is_none() && matches!(phase, Some("Pending" | "Running"))
}

/// Fetch one finished worker's summary and persist it (or, when it is unusable, what the
/// worker sent: kept for people, never counted); then let the worker exit.
async fn collect_one(
    client: &WorkerClient,
    cms: &kube::Api<ConfigMap>,
    run: &crate::crd::BenchmarkRun,
    name: &str,
) -> Collected {
    let collected = match client.summary().await {
        Ok((text, summary)) => match results::persist_worker(cms, run, name, &text).await {
            Ok(()) => {
                crate::failpoint::hit(crate::failpoint::AFTER_PERSIST);
                Collected::Persisted(results::WorkerFigures::of(&summary))
            }
            Err(e) => Collected::PersistFailed(e),
        },
        // A network error, even mid-body: the worker keeps its summary; asked again.
        Err(e) if e.is_retryable() => Collected::NotYet(e.to_string()),
        Err(SummaryError::Unreachable(e) | SummaryError::Interrupted(e)) => Collected::NotYet(e),
        Err(SummaryError::Invalid { message, body }) => match body {
            Some(body) => match results::persist_rejected(cms, run, name, &body).await {
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
    collected
}
