//! `spec.caRef`: the CA that verifies the storage's `https://` endpoints, by reference to a
//! key of a Secret or a ConfigMap (a CA certificate is public; either is fine). The operator
//! never reads it: the kubelet mounts the key read-only into the worker pods, and the workers'
//! workload gets `storage.tls.caFile` pointing at it (see `resources`).

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the CA bundle (PEM) is: exactly one of a Secret key or a ConfigMap key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.secret) != has(self.configMap)").message("give caRef.secret or caRef.configMap (exactly one)"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaRef {
    /// A key of a Secret in the run's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<KeyRef>,
    /// A key of a ConfigMap in the run's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<KeyRef>,
}

/// One key of a Secret or ConfigMap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyRef {
    /// The object's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the PEM bundle, e.g. `ca.crt`.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

impl CaRef {
    /// "secret minio-ca key ca.crt", for messages.
    pub fn source(&self) -> String {
        match (&self.secret, &self.config_map) {
            (Some(k), _) => format!("secret {} key {}", k.name, k.key),
            (None, Some(k)) => format!("configmap {} key {}", k.name, k.key),
            (None, None) => "nothing".into(),
        }
    }
}
