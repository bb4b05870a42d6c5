//! Where the workers run: one per eligible node (perNode, see [`crate::placement`]), or
//! `count` workers placed by the scheduler.

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::Reconciler;
use crate::crd::{WorkerPhase, WorkerStatus};
use crate::placement::node_eligible;
use crate::{resources, Result};

impl Reconciler<'_> {
    /// Resolve workers: one per matching node (perNode), or `count` placed by the scheduler.
    pub(crate) async fn place(&mut self) -> Result<Vec<WorkerStatus>> {
        let spec = &self.run.spec.workers;
        let mk = |i: usize, node: Option<String>| {
            let name = format!("w{i}");
            WorkerStatus {
                pod: resources::pod_name(&self.name, &name),
                name,
                node,
                phase: WorkerPhase::Pending,
                ..Default::default()
            }
        };
        if !spec.per_node() {
            let n = spec.count.unwrap_or(1).max(1) as usize;
            return Ok((0..n).map(|i| mk(i, None)).collect());
        }
        let nodes: Api<Node> = Api::all(self.ctx.client.clone());
        let mut lp = ListParams::default();
        if let Some(sel) = &spec.node_selector {
            lp = lp.labels(
                &sel.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        let mut names: Vec<String> = nodes
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|n| {
                node_eligible(
                    n,
                    spec.tolerations.as_deref().unwrap_or_default(),
                    spec.affinity.as_ref(),
                )
            })
            .map(|n| n.name_any())
            .collect();
        names.sort();
        Ok(names
            .into_iter()
            .enumerate()
            .map(|(i, n)| mk(i, Some(n)))
            .collect())
    }
}
