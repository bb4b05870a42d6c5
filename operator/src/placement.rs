//! Where the workers run: one per eligible node (perNode: Ready, schedulable, taints tolerated,
//! required node affinity matched), or `count` workers placed by the scheduler.

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::crd::WorkerStatus;
use crate::resources;
use crate::state::worker_phase as wp;
use crate::status::Reconciler;
use crate::Result;

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
                phase: wp::PENDING.into(),
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

/// A node takes a perNode worker when it is Ready, schedulable, its taints are tolerated and
/// the required node-affinity terms match its labels.
pub fn node_eligible(
    node: &Node,
    tolerations: &[k8s_openapi::api::core::v1::Toleration],
    affinity: Option<&k8s_openapi::api::core::v1::Affinity>,
) -> bool {
    let spec = node.spec.clone().unwrap_or_default();
    if spec.unschedulable == Some(true) {
        return false;
    }
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if !ready {
        return false;
    }
    for taint in spec.taints.iter().flatten() {
        if taint.effect == "PreferNoSchedule" {
            continue;
        }
        let tolerated = tolerations.iter().any(|t| {
            let key_ok = match t.key.as_deref() {
                None | Some("") => t.operator.as_deref() == Some("Exists"),
                Some(k) => k == taint.key,
            };
            let value_ok = t.operator.as_deref() == Some("Exists")
                || t.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default();
            let effect_ok = t
                .effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == taint.effect);
            key_ok && value_ok && effect_ok
        });
        if !tolerated {
            return false;
        }
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let Some(terms) = affinity
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| &r.node_selector_terms)
    else {
        return true;
    };
    terms.iter().any(|term| {
        term.match_expressions.iter().flatten().all(|req| {
            let v = labels.get(&req.key);
            let vals = req.values.clone().unwrap_or_default();
            match req.operator.as_str() {
                "In" => v.is_some_and(|v| vals.contains(v)),
                "NotIn" => v.is_none_or(|v| !vals.contains(v)),
                "Exists" => v.is_some(),
                "DoesNotExist" => v.is_none(),
                _ => true,
            }
        }) && term.match_fields.iter().flatten().all(|req| {
            let vals = req.values.clone().unwrap_or_default();
            let name = node.name_any();
            req.key != "metadata.name"
                || match req.operator.as_str() {
                    "In" => vals.contains(&name),
                    "NotIn" => !vals.contains(&name),
                    _ => true,
                }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint, Toleration};

    fn node(name: &str, ready: bool, taint: Option<&str>) -> Node {
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: taint.map(|k| {
                    vec![Taint {
                        key: k.into(),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn eligible_nodes() {
        assert!(node_eligible(&node("a", true, None), &[], None));
        assert!(!node_eligible(&node("a", false, None), &[], None));
        assert!(!node_eligible(
            &node("a", true, Some("dedicated")),
            &[],
            None
        ));
        let tol = Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        assert!(node_eligible(
            &node("a", true, Some("dedicated")),
            &[tol],
            None
        ));
    }
}
