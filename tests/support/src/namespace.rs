//! A fresh namespace per test, removed when the test ends, with diagnostics on failure.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams,
};
use kube::{Api, Client};

use crate::cluster::cleanup_with_own_client;
use crate::diagnostics;

/// Set to keep a failed test's namespace for inspection with kubectl.
pub const KEEP_ENV: &str = "BENCHRUN_KEEP_NAMESPACE";

/// Owns a namespace created for one test. Dropping it deletes the namespace (and with it all
/// the test's objects); if the test is panicking, the pods' logs and the events are printed first.
///
/// Every namespace enforces the `restricted` Pod Security Standard, so the apiserver itself
/// rejects a test pod that runs as root, keeps capabilities or has a writable root filesystem.
pub struct TestNamespace {
    name: String,
    client: Client,
}

impl TestNamespace {
    /// Creates `bt-<prefix>-<unique>` and waits until its default service account exists
    /// (pods are refused before that).
    pub async fn create(client: &Client, prefix: &str) -> TestNamespace {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let unique = format!(
            "{:x}{:x}{}",
            std::process::id(),
            nanos % 0xffff,
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut name = format!("bt-{prefix}-{unique}").to_lowercase();
        name.truncate(63);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(
                    [
                        ("app.kubernetes.io/part-of", "benchrun-tests"),
                        ("pod-security.kubernetes.io/enforce", "restricted"),
                        ("pod-security.kubernetes.io/enforce-version", "latest"),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        let guard = TestNamespace {
            name: name.clone(),
            client: client.clone(),
        };
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while sas.get_opt("default").await.ok().flatten().is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "namespace {name}: no default service account after 30 s (is kube-controller-manager running?)"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        guard
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client the namespace was created with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Prints the pods' logs and the events now (for failures that do not panic).
    pub async fn dump_diagnostics(&self) {
        diagnostics::dump_diagnostics(&self.client, &self.name).await;
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        let name = self.name.clone();
        cleanup_with_own_client(format!("namespace {name}"), move |client| async move {
            if failed {
                diagnostics::dump_diagnostics(&client, &name).await;
                if std::env::var_os(KEEP_ENV).is_some() {
                    return eprintln!("{KEEP_ENV} is set: keeping namespace {name}");
                }
            }
            release_runs(&client, &name).await;
            let namespaces: Api<Namespace> = Api::all(client);
            let deleted = tokio::time::timeout(
                Duration::from_secs(20),
                namespaces.delete(&name, &DeleteParams::background()),
            )
            .await;
            match deleted {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => eprintln!("deleting namespace {name}: {e}"),
                Err(_) => eprintln!("deleting namespace {name}: timed out"),
            }
        });
    }
}

/// Remove the finalizers of the namespace's BenchmarkRuns: the operator that would have
/// removed them ran in the test and is gone, and a finalizer left would keep the namespace
/// terminating forever. Nothing to do where the CRD is not installed.
async fn release_runs(client: &Client, ns: &str) {
    let ar = ApiResource {
        group: "benchrun.dev".into(),
        version: "v1alpha1".into(),
        api_version: "benchrun.dev/v1alpha1".into(),
        kind: "BenchmarkRun".into(),
        plural: "benchmarkruns".into(),
    };
    let runs: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let Ok(list) = runs.list(&ListParams::default()).await else {
        return;
    };
    let patch = serde_json::json!({"metadata": {"finalizers": null}});
    for r in list.items {
        let name = r.metadata.name.unwrap_or_default();
        if r.metadata.finalizers.is_some_and(|f| !f.is_empty()) {
            if let Err(e) = runs
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                eprintln!("namespace {ns}: releasing run {name}: {e}");
            }
        }
    }
}
