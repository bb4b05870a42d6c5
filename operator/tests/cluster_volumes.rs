//! Volumes on the real two-node cluster: a claim per worker from a StorageClass with
//! `WaitForFirstConsumer` binding, served by `local` PersistentVolumes this test creates on
//! each node: raw loop devices (`volumeMode: Block`, the worker gets the device through
//! `volumeDevices`) and directories (`Filesystem`). The I/O is checked where it lands: the
//! kernel's counters of each node's loop device.
//!
//! Root is needed (`losetup`); these tests fail, never skip, without it or without the cluster.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use benchrun_api::OpKind;
use benchrun_operator::crd::{BenchmarkRun, Phase};
use benchrun_test_support::loopdev::Loop;
use benchrun_test_support::{ClusterScoped, NODES};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ListParams, PostParams};
use kube::Api;

use common::*;

/// A StorageClass with `WaitForFirstConsumer` binding and no provisioner, and one `local` PV
/// per node at `paths[i]` (pinned to `NODES[i]`), all named after the test's namespace.
/// Cluster-scoped, so deleted when dropped (also when the test fails); [`Storage::remove`]
/// first checks that the run's cleanup deleted its claims.
struct Storage {
    class: String,
    _objects: ClusterScoped,
}

impl Storage {
    async fn create(env: &Env, mode: &str, paths: &[String]) -> Self {
        let class = format!("{}-{}", env.ns.name(), mode.to_lowercase());
        let sc: StorageClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": class},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Retain",
        }))
        .unwrap();
        Api::<StorageClass>::all(env.client.clone())
            .create(&PostParams::default(), &sc)
            .await
            .expect("create StorageClass");
        let mut objects = ClusterScoped::class(&class);
        for (node, path) in NODES.iter().zip(paths) {
            let name = format!("{class}-{node}");
            let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": "64Mi"},
                    "volumeMode": mode,
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": class,
                    "local": {"path": path},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                    ]}]}},
                }
            }))
            .unwrap();
            Api::<PersistentVolume>::all(env.client.clone())
                .create(&PostParams::default(), &pv)
                .await
                .expect("create PersistentVolume");
            objects.pv(name);
        }
        Self {
            class,
            _objects: objects,
        }
    }

    /// Wait for the run's claims to be gone (cleanup), then remove the PVs and the class.
    async fn remove(self, env: &Env) {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), env.ns.name());
        for _ in 0..120 {
            if claims
                .list(&ListParams::default())
                .await
                .expect("list claims")
                .items
                .is_empty()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let left = claims
            .list(&ListParams::default())
            .await
            .expect("list claims")
            .items;
        assert!(
            left.is_empty(),
            "the run's claims were not deleted by its cleanup"
        );
        drop(self);
    }
}

/// Seccomp profiles written into the nodes' kubelet directories, removed when dropped.
struct Profiles(Vec<PathBuf>);

impl Drop for Profiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Create the run and wait until it has finished; it must have succeeded.
async fn run_to_success(env: &Env, name: &str, spec: &str) -> BenchmarkRun {
    let api = create_run(env, name, spec).await;
    let run = wait_for(&api, name, Duration::from_secs(150), "finished", finished).await;
    let st = run.status.as_ref().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    run
}

const WORKERS: &str = "workers:
  perNode: true
  resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: 50m, memory: 32Mi}}
startDelay: 3s
timeout: 3m
cleanup: Always";

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_block_claim_per_worker_reads_each_nodes_raw_device() {
    let env = env("op-block").await;
    let dirs: Vec<tempfile::TempDir> = NODES
        .iter()
        .map(|_| tempfile::tempdir_in("/var/tmp").expect("dir"))
        .collect();
    let loops: Vec<Loop> = dirs.iter().map(|d| Loop::new(d.path(), 64 << 20)).collect();
    let paths: Vec<String> = loops.iter().map(|l| l.dev.display().to_string()).collect();
    let storage = Storage::create(&env, "Block", &paths).await;
    let _op = spawn_operator(&env);
    let before: Vec<_> = loops.iter().map(Loop::stat).collect();
    let spec = format!(
        r#"
workload:
  target: direct:///dev/benchrun-data
  totalOps: 2000
  concurrency: 2
  ops: [{{op: read}}]
  dataset: {{prepare: false}}
  block: {{blockSize: 4KiB, queueDepth: 4, dropCache: false}}
volume:
  claimTemplate:
    volumeMode: Block
    storageClassName: {class}
    accessModes: [ReadWriteOnce]
    resources: {{requests: {{storage: 64Mi}}}}
{WORKERS}
"#,
        class = storage.class
    );
    let run = run_to_success(&env, "blk", &spec).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.results["read"].count, 2 * 2000, "2000 reads per worker");
    let v = st
        .volume
        .as_ref()
        .expect("the status says which engine ran");
    assert_eq!(v.engines.values().sum::<u32>(), 2, "{v:?}");
    assert_eq!(v.dataset_bytes, 2 * (64 << 20));
    for s in worker_summaries(&env, &run).await {
        let v = s.volume.expect("a block run's summary has volume figures");
        assert_eq!(v.dataset_bytes, 64 << 20, "the whole device is the range");
        assert!(v.direct);
        let engine = v.engine_label();
        // Under the RuntimeDefault seccomp profile io_uring may be refused: the fallback is
        // then named, with its reason.
        assert!(
            engine == "io_uring" || (engine == "sync" && v.fallback_reason.is_some()),
            "{v:?}"
        );
        assert_eq!(s.ops[&OpKind::Read].errors, 0);
    }
    // Each node's device served its worker's reads: the kernel counted them there.
    for (l, b) in loops.iter().zip(&before) {
        let d = b.since(l.stat());
        assert!(
            d.reads >= 2000 && d.sectors_read >= 2000 * 8,
            "{}: {d:?} since the start",
            l.dev.display()
        );
    }
    storage.remove(&env).await;
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_wait_for_first_consumer_class_serves_a_files_claim_per_worker() {
    let env = env("op-wffc").await;
    let dirs: Vec<tempfile::TempDir> = NODES
        .iter()
        .map(|_| tempfile::tempdir_in("/var/tmp").expect("dir"))
        .collect();
    for d in &dirs {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let paths: Vec<String> = dirs
        .iter()
        .map(|d| d.path().display().to_string())
        .collect();
    let storage = Storage::create(&env, "Filesystem", &paths).await;
    let _op = spawn_operator(&env);
    let spec = format!(
        r#"
workload:
  target: direct:///data
  totalOps: 1000
  concurrency: 2
  ops: [{{op: read, weight: 70}}, {{op: write, weight: 30}}]
  block: {{blockSize: 4KiB, queueDepth: 4, fileSize: 8MiB}}
volume:
  claimTemplate:
    storageClassName: {class}
    accessModes: [ReadWriteOnce]
    resources: {{requests: {{storage: 64Mi}}}}
{WORKERS}
"#,
        class = storage.class
    );
    let run = run_to_success(&env, "wffc", &spec).await;
    let st = run.status.clone().expect("status");
    let total = st.results["read"].count + st.results["write"].count;
    assert_eq!(total, 2 * 1000);
    for s in worker_summaries(&env, &run).await {
        let v = s.volume.expect("volume figures");
        assert_eq!(v.dataset_bytes, 2 * (8 << 20), "a file of 8 MiB per task");
        let p = s.prepare.expect("layout");
        assert_eq!(p.bytes, 2 * (8 << 20), "laid out in full with data");
    }
    storage.remove(&env).await;
    // Each worker's cleanup removed its files from its node's volume.
    for d in &dirs {
        let left: Vec<_> = walk(d.path());
        assert!(
            left.is_empty(),
            "{}: left behind {left:?}",
            d.path().display()
        );
    }
}

fn walk(p: &std::path::Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn io_uring_refused_by_the_seccomp_profile_falls_back_to_sync_and_says_so() {
    let env = env("op-seccomp").await;
    // A Localhost profile on both nodes (the kubelets' seccomp directories) that allows
    // everything but io_uring, as Docker 25's and recent containerd's defaults do.
    let profile = format!("{}-no-io-uring.json", env.ns.name());
    let text = r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["io_uring_setup", "io_uring_enter", "io_uring_register"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}"#;
    let paths: Vec<PathBuf> = NODES
        .iter()
        .map(|n| {
            benchrun_test_support::cluster::state_dir()
                .join(format!("cluster/{n}/kubelet/seccomp"))
                .join(&profile)
        })
        .collect();
    let profiles = Profiles(paths);
    for p in &profiles.0 {
        std::fs::create_dir_all(p.parent().unwrap()).expect("seccomp dir");
        std::fs::write(p, text).expect("write the profile");
    }
    let _op = spawn_operator(&env);
    let spec = format!(
        r#"
workload:
  target: direct:///data
  totalOps: 500
  concurrency: 2
  ops: [{{op: read}}]
  block: {{blockSize: 4KiB, queueDepth: 4, fileSize: 4MiB}}
volume: {{emptyDir: {{}}}}
{WORKERS}
"#
    )
    .replace(
        "perNode: true",
        &format!(
            "perNode: true\n  seccompProfile: {{type: Localhost, localhostProfile: {profile}}}"
        ),
    );
    let run = run_to_success(&env, "nouring", &spec).await;
    drop(profiles);
    let st = run.status.clone().expect("status");
    assert_eq!(st.results["read"].count, 2 * 500);
    let v = st.volume.as_ref().expect("volume figures in the status");
    assert_eq!(v.engine_label(), "sync", "{v:?}");
    assert_eq!(v.engines.get("sync"), Some(&2), "{v:?}");
    let why = v.fallback_reason.as_deref().unwrap_or_default();
    assert!(why.contains("io_uring refused here"), "{why}");
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_claim_that_cannot_bind_fails_the_run_with_the_reason() {
    let env = env("op-nobind").await;
    let _op = spawn_operator(&env);
    let spec = format!(
        r#"
workload:
  target: direct:///data
  totalOps: 10
  ops: [{{op: read}}]
  block: {{blockSize: 4KiB, fileSize: 1MiB}}
volume:
  claimTemplate:
    storageClassName: {}-no-such-class
    accessModes: [ReadWriteOnce]
    resources: {{requests: {{storage: 64Mi}}}}
{WORKERS}
"#,
        env.ns.name()
    )
    // Not the default 5 minutes (made for autoscalers): no node can ever come for this claim.
    .replacen("workers:\n", "workers:\n  scheduleTimeout: 20s\n", 1);
    let api = create_run(&env, "nobind", &spec).await;
    let run = wait_for(
        &api,
        "nobind",
        Duration::from_secs(120),
        "finished",
        finished,
    )
    .await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Failed, "{st:#?}");
    let text = serde_yaml::to_string(&st).unwrap();
    assert!(
        text.contains("PersistentVolumeClaim"),
        "the failure names the unbound claim: {text}"
    );
}
