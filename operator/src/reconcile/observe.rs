//! What a pass reads: the run's pods (from the controller's store), the results earlier
//! passes persisted, and its workers' agents (asked all at once, bounded). Nothing here
//! writes; [`super::decide`] says what it means.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::decide::Answer;
use super::Reconciler;
use crate::autoscaler::{self, ScaleUp};
use crate::children::owned_by;
use crate::client::{fan_out, WorkerClient};
use crate::control_plane::objects;
use crate::crd::WorkerPhase;
use crate::lost::{node_health, NodeHealth};
use crate::resources::RUN_LABEL;
use crate::results::{self, WorkerFigures};
use crate::run_rules::{self, classify_pod, PodView};
use crate::Result;

impl Reconciler<'_> {
    /// The run's pods, from the controller's pod store (a pod created in this pass shows up
    /// in a later one).
    pub(crate) fn pods(&self) -> BTreeMap<String, Pod> {
        self.ctx
            .pods
            .state()
            .into_iter()
            // Only pods this run controls (a re-created run of the same name must not adopt),
            // and only its workers: the probe pods of a control-plane section beside them
            // carry the same label and owner, and are its own business.
            .filter(|p| {
                p.namespace().as_deref() == Some(self.ns.as_str())
                    && p.labels().get(RUN_LABEL) == Some(&self.name)
                    && p.labels().get(objects::COMPONENT_LABEL).map(String::as_str)
                        != Some(objects::COMPONENT)
                    && owned_by(self.run, p.owner_references())
            })
            .map(|p| (p.name_any(), Pod::clone(&p)))
            .collect()
    }

    /// The workers whose summaries an earlier pass persisted but did not get to count (it
    /// ended before its status write), with their figures when the summary parses.
    pub(crate) async fn persisted(&self) -> Result<BTreeMap<String, Option<WorkerFigures>>> {
        // Summaries exist only after the start; before, there is nothing to list.
        if self.draft.status.start_time.is_none() {
            return Ok(BTreeMap::new());
        }
        let cms = self.api::<ConfigMap>();
        let names = results::persisted_workers(&cms, self.run).await?;
        let mut out = BTreeMap::new();
        for w in &self.draft.status.workers {
            if w.phase == WorkerPhase::Collected || !names.contains(&w.name) {
                continue;
            }
            let text = results::load_worker(&cms, self.run, &w.name).await?;
            let figures = text
                .and_then(|t| benchrun_api::summary_read::read(&t).ok())
                .map(|s| WorkerFigures::of(&s));
            out.insert(w.name.clone(), figures);
        }
        Ok(out)
    }

    /// Ask these workers' agents (by index, at their pods' IPs) where they are. Every worker is asked at once (bounded): one that does
    /// not answer costs one timeout beside the others, not one before each of them.
    pub(crate) async fn ask_agents(
        &self,
        ask: Vec<(usize, String)>,
        token: &str,
    ) -> Vec<(usize, Answer)> {
        let clients: Vec<_> = ask
            .into_iter()
            .map(|(i, ip)| (i, self.worker_client(&ip, token)))
            .collect();
        fan_out(clients, self.parallelism(), |(i, client)| async move {
            (i, ask_agent(&client).await)
        })
        .await
    }

    /// The health of these nodes (those of silent workers, see [`super::decide::nodes_to_read`]),
    /// read at once (bounded). By `list` with a field selector on the name, the one verb on
    /// nodes the operator has (perNode placement): no new right. A node that cannot be read
    /// (`rbac.listNodes` off, an API-server error) is left out, and its worker is judged by the
    /// run's expected end alone.
    pub(crate) async fn nodes(&self, names: Vec<String>) -> BTreeMap<String, NodeHealth> {
        if names.is_empty() {
            return BTreeMap::new();
        }
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        let read = fan_out(names, self.parallelism(), |name| {
            let api = api.clone();
            async move {
                let lp = ListParams::default().fields(&format!("metadata.name={name}"));
                let r = api.list(&lp).await;
                (name, r)
            }
        })
        .await;
        let mut out = BTreeMap::new();
        for (name, r) in read {
            match r {
                Ok(list) => {
                    out.insert(name, node_health(list.items.first(), self.draft.now));
                }
                Err(e) => tracing::debug!("{}/{}: reading node {name}: {e}", self.ns, self.name),
            }
        }
        out
    }

    /// What an autoscaler last said about each unschedulable pod (by name), from the pod's
    /// Events (`list` on core `events`, by field selector on the pod's name and UID, so an
    /// earlier pod of the same name does not count). Only unschedulable pods are looked at, so
    /// a run whose pods are scheduled reads no events. An error (no `list` on events, the API
    /// server) is logged and leaves the pod without a verdict: it waits its scheduleTimeout.
    pub(crate) async fn scale_ups(
        &self,
        pods: &BTreeMap<String, Pod>,
    ) -> BTreeMap<String, ScaleUp> {
        let unschedulable: Vec<(String, String)> = pods
            .iter()
            .filter(|(_, p)| {
                matches!(
                    classify_pod(Some(p)),
                    PodView::Pending {
                        unschedulable: Some(_)
                    }
                )
            })
            .filter_map(|(name, p)| Some((name.clone(), p.metadata.uid.clone()?)))
            .collect();
        if unschedulable.is_empty() {
            return BTreeMap::new();
        }
        let api = self.api::<Event>();
        let read = fan_out(unschedulable, self.parallelism(), |(name, uid)| {
            let api = api.clone();
            async move {
                let lp = ListParams::default().fields(&format!(
                    "involvedObject.kind=Pod,involvedObject.name={name},involvedObject.uid={uid}"
                ));
                let r = api.list(&lp).await;
                (name, r)
            }
        })
        .await;
        let mut out = BTreeMap::new();
        for (name, r) in read {
            match r {
                Ok(list) => {
                    if let Some(v) = autoscaler::latest(&list.items) {
                        out.insert(name, v);
                    }
                }
                Err(e) => tracing::debug!(
                    "{}/{}: reading the events of pod {name}: {e}",
                    self.ns,
                    self.name
                ),
            }
        }
        out
    }

    /// A client for the agent of each of these pods that has an IP, by pod name.
    pub(crate) fn agents<'p>(
        &self,
        pods: impl Iterator<Item = &'p Pod>,
        token: &str,
    ) -> Vec<(String, WorkerClient)> {
        pods.filter_map(|p| {
            let ip = run_rules::pod_ip(p)?;
            Some((p.name_any(), self.worker_client(ip, token)))
        })
        .collect()
    }
}

/// One agent's status.
async fn ask_agent(client: &WorkerClient) -> Answer {
    match client.status().await {
        Ok(s) => Answer::Status(s),
        Err(e) => Answer::Unreachable(e),
    }
}
