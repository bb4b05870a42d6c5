//! MinIO on the host, reachable from the test cluster's pods: the settings
//! tests/storage/up.sh wrote, a TCP forwarder from the `vm` node's pod bridge to a server on
//! the host's loopback, and the S3 keys as a Secret.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use benchrun_test_support::{cluster, pods};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Secret};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::Api;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::Env;

/// The `vm` node's pod bridge (cni0) address: the host as pods on either node reach it.
pub const BRIDGE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 88, 0, 1);
/// Name of the Secret holding the S3 keys in each test namespace.
pub const CREDS: &str = "s3-creds";

/// `tests/.state/storage.env`, or a panic saying to run tests/storage/up.sh.
pub fn storage_env() -> HashMap<String, String> {
    let path = cluster::state_dir().join("storage.env");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "storage servers not set up: cannot read {}: {e}; run tests/storage/up.sh",
            path.display()
        )
    });
    let env: HashMap<String, String> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    for k in [
        "BENCHRUN_S3_ENDPOINT",
        "BENCHRUN_S3_BUCKET",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ] {
        assert!(
            env.contains_key(k),
            "{} has no {k}; run tests/storage/up.sh",
            path.display()
        );
    }
    env
}

/// MinIO's loopback address from `BENCHRUN_S3_ENDPOINT` (`http://127.0.0.1:9000`), checked to
/// answer; panics saying to run tests/storage/up.sh otherwise.
pub async fn minio_addr(env: &HashMap<String, String>) -> SocketAddr {
    let ep = &env["BENCHRUN_S3_ENDPOINT"];
    let hostport = ep
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("BENCHRUN_S3_ENDPOINT {ep} is not http://host:port"))
        .trim_end_matches('/');
    let addr: SocketAddr = hostport
        .parse()
        .unwrap_or_else(|e| panic!("BENCHRUN_S3_ENDPOINT {ep}: {e}"));
    assert!(
        addr.ip().is_loopback(),
        "BENCHRUN_S3_ENDPOINT {ep} must be a loopback address"
    );
    match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await {
        Ok(Ok(_)) => addr,
        Ok(Err(e)) => panic!("MinIO is not up at {ep}: {e}; run tests/storage/up.sh"),
        Err(_) => {
            panic!("MinIO did not accept a connection at {ep} in 5 s; run tests/storage/up.sh")
        }
    }
}

/// A TCP forwarder from the bridge address to MinIO, running in this process until dropped.
pub struct Forwarder {
    /// `http://10.88.0.1:<port>` (or `https://`): where pods reach the server.
    pub endpoint: String,
    task: JoinHandle<()>,
    /// True: no byte moves on any connection, open or new (each held open, silent).
    stalled: tokio::sync::watch::Sender<bool>,
}

impl Forwarder {
    /// Stall every connection, open or new: the server hangs, as seen from the pods (each
    /// request waits for its timeout). Dropping the forwarder ends them.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn forward(
    listener: TcpListener,
    to: SocketAddr,
    stalled: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let mut stalled = stalled.clone();
        tokio::spawn(async move {
            // Stalled: the connection is held open and silent until the forwarder goes
            // (`wait_for` then fails).
            let now = *stalled.borrow();
            if now {
                let _ = stalled.wait_for(|s| !*s).await.map(|_| ());
                return;
            }
            if let Ok(mut out) = TcpStream::connect(to).await {
                let _ = out.set_nodelay(true);
                let _ = inbound.set_nodelay(true);
                let cut = tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut out) => false,
                    r = stalled.wait_for(|s| *s) => r.is_ok(),
                };
                if cut {
                    let _ = stalled.wait_for(|s| !*s).await.map(|_| ());
                }
            }
        });
    }
}

/// Bind a listener on the bridge address. The bridge (cni0) only exists once a pod has run on
/// `vm`: if it is missing, run a throwaway pod there first and bind as soon as it appears.
pub async fn bridge_listener(env: &Env) -> TcpListener {
    let addr = SocketAddr::from((BRIDGE_ADDR, 0));
    match TcpListener::bind(addr).await {
        Ok(l) => return l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {}
        Err(e) => panic!("binding the S3 forwarder on {addr}: {e}"),
    }
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("bridge-warmup".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("vm".into()),
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            security_context: Some(pods::restricted_pod_security()),
            containers: vec![Container {
                name: "warmup".into(),
                image: Some(env.images.worker.clone()),
                image_pull_policy: Some("Never".into()),
                args: Some(vec!["--version".into()]),
                security_context: Some(pods::restricted_container_security()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating the bridge warm-up pod: {e}"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let listener = loop {
        match TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(e) if tokio::time::Instant::now() > deadline => panic!(
                "the vm node's pod bridge {BRIDGE_ADDR} did not appear within 60 s of running a pod there: {e}"
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let _ = pods.delete("bridge-warmup", &DeleteParams::default()).await;
    listener
}

/// Make MinIO reachable from pods on both nodes at `http://10.88.0.1:<port>`.
pub async fn s3_for_pods(env: &Env, storage: &HashMap<String, String>) -> Forwarder {
    let to = minio_addr(storage).await;
    for_pods(env, "http", to).await
}

/// Make the server at `to` reachable from pods on both nodes at `<scheme>://10.88.0.1:<port>`.
pub async fn for_pods(env: &Env, scheme: &str, to: SocketAddr) -> Forwarder {
    let listener = bridge_listener(env).await;
    let port = listener.local_addr().expect("forwarder address").port();
    let (stalled, rx) = tokio::sync::watch::channel(false);
    Forwarder {
        endpoint: format!("{scheme}://{BRIDGE_ADDR}:{port}"),
        task: tokio::spawn(forward(listener, to, rx)),
        stalled,
    }
}

/// The S3 keys as a Secret in the test namespace, under the worker's documented environment
/// variable names; the operator hands it to the workers with `envFrom`.
pub async fn create_creds_secret(env: &Env, storage: &HashMap<String, String>) {
    let mut data = BTreeMap::new();
    for k in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
        if let Some(v) = storage.get(k) {
            data.insert(k.to_string(), v.clone());
        }
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(CREDS.into()),
            ..Default::default()
        },
        string_data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(env.client.clone(), env.ns.name())
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("creating Secret {CREDS}: {e}"));
}
