//! Which nodes take a perNode worker: Ready, schedulable, taints tolerated, required node
//! affinity matched (the pass places the workers in `reconcile/place.rs`).

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

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
