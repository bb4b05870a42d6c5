//! Connecting to the test cluster and finding what `tests/cluster/*.sh` wrote.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// The two nodes `tests/cluster/up.sh` starts; benchrun places one worker on each.
pub const NODES: [&str; 2] = ["vm", "vm2"];

/// Overrides the kubeconfig path. Deliberately not `KUBECONFIG`: a developer's own cluster must
/// never receive test pods by accident.
pub const KUBECONFIG_ENV: &str = "BENCHRUN_KUBECONFIG";

/// `tests/.state`, where the cluster scripts write the kubeconfig and `images.env`.
pub fn state_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("BENCHRUN_STATE") {
        return PathBuf::from(dir);
    }
    // `tests/support/../.state` spelled without the `..`: the path reaches the cluster scripts
    // (fault.sh restarts kubelets with it), and the kubelet refuses a podLogsDir that is not
    // normalized.
    match Path::new(env!("CARGO_MANIFEST_DIR")).parent() {
        Some(tests) => tests.join(".state"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.state"),
    }
}

/// The kubeconfig the tests use: `$BENCHRUN_KUBECONFIG`, else `tests/.state/kubeconfig`.
pub fn kubeconfig_path() -> PathBuf {
    match std::env::var_os(KUBECONFIG_ENV) {
        Some(p) => PathBuf::from(p),
        None => state_dir().join("kubeconfig"),
    }
}

/// Builds a client from the test kubeconfig without contacting the server.
pub async fn client_from_kubeconfig(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let mut config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    // A stopped apiserver should fail a test in seconds, not after the default 295 s.
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(60));
    Ok(Client::try_from(config)?)
}

/// Runs `f` with a client of its own, on a thread with a runtime of its own, and waits for it:
/// the cleanup of a guard's `Drop`. Drop runs on the test's runtime thread; blocking it on that
/// runtime's client would starve the client's own background task (current-thread runtime).
/// Spawned threads inherit the test's output capture, so what `f` prints lands in the failed
/// test's output. `what` names the cleanup in the messages when it cannot start.
pub fn cleanup_with_own_client<F, Fut>(what: String, f: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let worker = std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => return eprintln!("{what}: no runtime for cleanup: {e}"),
        };
        rt.block_on(async move {
            match client_from_kubeconfig(&kubeconfig_path()).await {
                Ok(client) => f(client).await,
                Err(e) => eprintln!("{what}: cannot connect for cleanup: {e:#}"),
            }
        });
    });
    let _ = worker.join();
}

/// Connects to the test cluster, or panics with the reason and the script that fixes it.
pub async fn connect() -> Client {
    let path = kubeconfig_path();
    if !path.exists() {
        panic!(
            "test cluster is not up: no kubeconfig at {}; run tests/cluster/up.sh (as root)",
            path.display()
        );
    }
    let client = client_from_kubeconfig(&path)
        .await
        .unwrap_or_else(|e| panic!("cannot load kubeconfig {}: {e:#}", path.display()));
    match tokio::time::timeout(Duration::from_secs(15), client.apiserver_version()).await {
        Ok(Ok(_)) => client,
        Ok(Err(e)) => panic!(
            "test cluster is not reachable with {}: {e}; run tests/cluster/up.sh (as root)",
            path.display()
        ),
        Err(_) => panic!(
            "test cluster did not answer within 15 s with {}; run tests/cluster/up.sh (as root)",
            path.display()
        ),
    }
}

/// Waits (at most [`SCHEDULABLE_TIMEOUT`]) until every node in `names` exists, is Ready and
/// carries no `node.kubernetes.io/*` taint, then returns; panics naming what is still wrong.
///
/// Ready alone is not enough: after a node comes back (a test stopped its kubelet) the node
/// lifecycle controller removes its `unreachable`/`not-ready` taints a few seconds *after* the
/// node turns Ready, and until then the operator rightly places no worker there. A test that
/// started in that window saw one worker instead of two; waiting for the taints to go makes
/// the next test independent of that controller's timing.
pub async fn require_ready_nodes(client: &Client, names: &[&str]) {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + SCHEDULABLE_TIMEOUT;
    loop {
        let mut wrong = Vec::new();
        for name in names {
            let node = nodes
                .get_opt(name)
                .await
                .unwrap_or_else(|e| panic!("reading node {name}: {e}"));
            let Some(node) = node else {
                panic!("node {name} does not exist; run tests/cluster/up.sh");
            };
            if let Some(why) = unschedulable(&node) {
                wrong.push(format!("{name}: {why}"));
            }
        }
        if wrong.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "nodes not schedulable after {SCHEDULABLE_TIMEOUT:?}: {}; run tests/cluster/up.sh \
                 (a disk-pressure taint means the disk is nearly full)",
                wrong.join("; ")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// How long [`require_ready_nodes`] waits for the nodes to become schedulable.
pub const SCHEDULABLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the operator would not place a worker on `node` (not Ready, or a `node.kubernetes.io/*`
/// taint such as `unreachable`, `not-ready` or `disk-pressure`), or `None` when it would.
pub fn unschedulable(node: &Node) -> Option<String> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" => {}
        other => {
            return Some(format!(
                "not Ready ({:?})",
                other.map(|c| (&c.status, &c.message))
            ))
        }
    }
    let taints: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.key.starts_with("node.kubernetes.io/"))
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    (!taints.is_empty()).then(|| format!("tainted {}", taints.join(", ")))
}

/// The image references `tests/cluster/image.sh` imported into both nodes.
#[derive(Debug, Clone)]
pub struct Images {
    /// `WORKER_IMAGE`, e.g. `localhost/benchrun-worker:0.1.0-1a2b3c4d5e6f`.
    pub worker: String,
    /// `OPERATOR_IMAGE`; `None` until the operator crate exists.
    pub operator: Option<String>,
}

impl Images {
    /// Reads `tests/.state/images.env`, or panics saying to run `tests/cluster/image.sh`.
    pub fn load() -> Images {
        let path = state_dir().join("images.env");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "cannot read {}: {e}; run tests/cluster/image.sh",
                path.display()
            )
        });
        Self::parse(&text)
            .unwrap_or_else(|e| panic!("{}: {e}; run tests/cluster/image.sh", path.display()))
    }

    fn parse(text: &str) -> anyhow::Result<Images> {
        let get = |key: &str| {
            text.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_string())
        };
        Ok(Images {
            worker: get("WORKER_IMAGE").ok_or_else(|| anyhow::anyhow!("no WORKER_IMAGE"))?,
            operator: get("OPERATOR_IMAGE"),
        })
    }
}

/// An image reference `tests/cluster/addons.sh` imported into both nodes, by its key in
/// `tests/.state/addons.env`: `BUSYBOX_IMAGE` (busybox-static, entrypoint `/busybox`, applets
/// through `busybox APPLET`) or `COREDNS_IMAGE`. Panics saying to run `tests/cluster/up.sh`.
pub fn addon_image(key: &str) -> String {
    let path = state_dir().join("addons.env");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; run tests/cluster/up.sh (it runs addons.sh)",
            path.display()
        )
    });
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| {
            panic!(
                "{}: no {key}; run tests/cluster/up.sh (it runs addons.sh)",
                path.display()
            )
        })
}

/// Apply `crd` by server-side apply (idempotent; tests running at once may apply it too) and
/// wait until the API server serves it.
pub async fn install_crd(
    client: &Client,
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.patch(
        &name,
        &PatchParams::apply("benchrun-tests").force(),
        &Patch::Apply(crd),
    )
    .await
    .unwrap_or_else(|e| panic!("applying the CRD: {e}"));
    for _ in 0..60 {
        let c = crds.get(&name).await.expect("read CRD");
        let established = c
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    panic!("CRD {name} not Established after 30 s");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_images_env() {
        let i = Images::parse("WORKER_IMAGE=localhost/benchrun-worker:0.1.0-abc\n").unwrap();
        assert_eq!(i.worker, "localhost/benchrun-worker:0.1.0-abc");
        assert_eq!(i.operator, None);
        assert!(Images::parse("OPERATOR_IMAGE=x\n").is_err());
    }
}
