//! A NetworkPolicy per run that lets only the operator (and the scrapers the administrator
//! names) reach the worker pods' port. The port also serves `/metrics`, so Prometheus must be
//! listed; everything else in the cluster is refused. The control endpoints also demand the
//! per-run token: this is the second wall, not the only one.
//!
//! Enforced only where the cluster's network plugin implements NetworkPolicy (Calico, Cilium,
//! ...); the test cluster's bridge plugin does not, so its tests check the object, not the
//! enforcement.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::crd::BenchmarkRun;
use crate::resources::{self, RUN_LABEL};
use crate::Result;

/// Who may reach the workers, besides nobody.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerIngress {
    /// The operator's namespace.
    pub operator_namespace: String,
    /// Labels that select the operator's pods in that namespace.
    pub operator_labels: BTreeMap<String, String>,
    /// Other peers (e.g. the monitoring namespace), as the administrator wrote them.
    pub extra_peers: Vec<NetworkPolicyPeer>,
}

impl WorkerIngress {
    /// Parse `k=v,k=v` operator labels and a JSON list of extra peers (the chart's values).
    pub fn parse(
        operator_namespace: String,
        operator_labels: &str,
        extra_peers_json: Option<&str>,
    ) -> Result<Self, String> {
        let mut labels = BTreeMap::new();
        for pair in operator_labels
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("operator pod label `{pair}` is not key=value"))?;
            labels.insert(k.trim().to_string(), v.trim().to_string());
        }
        if labels.is_empty() {
            return Err("the operator's pod labels are needed to let it through the policy".into());
        }
        if operator_namespace.is_empty() {
            return Err("the operator's namespace ($POD_NAMESPACE) is needed".into());
        }
        let extra_peers = match extra_peers_json.map(str::trim).filter(|s| !s.is_empty()) {
            None => vec![],
            Some(text) => serde_json::from_str(text).map_err(|e| {
                format!("worker ingress peers are not a JSON list of NetworkPolicyPeer: {e}")
            })?,
        };
        Ok(Self {
            operator_namespace,
            operator_labels: labels,
            extra_peers,
        })
    }
}

/// Name of a run's worker NetworkPolicy, with the run's UID (like the token Secret, the
/// operator may create policies but not read them back).
pub fn name(run: &BenchmarkRun) -> String {
    format!("{}-workers-{}", run.name_any(), resources::uid_tag(run))
}

/// The policy: the run's worker pods accept TCP on the agent port from the operator's pods and
/// the extra peers, and nothing else.
pub fn worker_policy(run: &BenchmarkRun, ingress: &WorkerIngress) -> Result<NetworkPolicy> {
    let operator = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "kubernetes.io/metadata.name".to_string(),
                ingress.operator_namespace.clone(),
            )])),
            ..Default::default()
        }),
        pod_selector: Some(LabelSelector {
            match_labels: Some(ingress.operator_labels.clone()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut from = vec![operator];
    from.extend(ingress.extra_peers.iter().cloned());
    let mut meta = resources::owned_meta(run, name(run))?;
    meta.labels.get_or_insert_with(Default::default).insert(
        "app.kubernetes.io/component".into(),
        "worker-network-policy".into(),
    );
    Ok(NetworkPolicy {
        metadata: meta,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(RUN_LABEL.to_string(), run.name_any())])),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(from),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(resources::AGENT_PORT as i32)),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
            }]),
            ..Default::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BenchmarkRunSpec;

    fn run() -> BenchmarkRun {
        let spec: BenchmarkRunSpec = serde_yaml::from_str(
            "workload: {target: file:///data, duration: 1s, ops: [{op: get}]}",
        )
        .expect("spec");
        let mut r = BenchmarkRun::new("r1", spec);
        r.metadata.namespace = Some("team-a".into());
        r.metadata.uid = Some("uid-1".into());
        r
    }

    #[test]
    fn only_the_operator_and_named_peers_reach_the_agent_port() {
        let ing = WorkerIngress::parse(
            "benchrun-system".into(),
            "app.kubernetes.io/name=benchrun, app.kubernetes.io/component=operator",
            Some(r#"[{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]"#),
        )
        .expect("parses");
        let p = worker_policy(&run(), &ing).expect("policy");
        let v = serde_json::to_value(&p).expect("json");
        assert_eq!(p.metadata.name.as_deref(), Some("r1-workers-uid1"));
        assert_eq!(
            p.metadata
                .owner_references
                .as_ref()
                .map(|o| o[0].uid.as_str()),
            Some("uid-1")
        );
        assert_eq!(v["spec"]["podSelector"]["matchLabels"][RUN_LABEL], "r1");
        assert_eq!(v["spec"]["policyTypes"], serde_json::json!(["Ingress"]));
        let rule = &v["spec"]["ingress"][0];
        assert_eq!(
            rule["ports"],
            serde_json::json!([{"port": 8080, "protocol": "TCP"}])
        );
        assert_eq!(
            rule["from"],
            serde_json::json!([
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "benchrun-system"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/component": "operator", "app.kubernetes.io/name": "benchrun"}}
                },
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
            ])
        );
    }

    #[test]
    fn bad_settings_are_refused_with_the_reason() {
        assert!(WorkerIngress::parse("ns".into(), "", None)
            .unwrap_err()
            .contains("pod labels are needed"));
        assert!(WorkerIngress::parse("ns".into(), "novalue", None)
            .unwrap_err()
            .contains("`novalue` is not key=value"));
        assert!(WorkerIngress::parse("".into(), "a=b", None)
            .unwrap_err()
            .contains("namespace"));
        assert!(WorkerIngress::parse("ns".into(), "a=b", Some("{}"))
            .unwrap_err()
            .contains("not a JSON list"));
    }
}
