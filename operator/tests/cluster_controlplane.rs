//! Control-plane runs (`spec.controlPlane`) on the real two-node test cluster
//! (tests/cluster/up.sh + image.sh), the controller in this test process: claims of the
//! cluster's default StorageClass (benchrun-hostpath, a real external provisioner on
//! sig-storage-lib-external-provisioner, WaitForFirstConsumer) provisioned, attached, written
//! once and deleted; a class nobody provisions, and a Block claim that provisioner refuses;
//! a run deleted mid-way; a user's pod and claim holding a lifecycle's names, left alone;
//! control operations beside a data-plane workload; Block claims served by `local` PersistentVolumes on loop devices
//! (the test cluster has no provisioner of Block volumes), written and read raw by the probe;
//! snapshot, clone and expand through the real Kubernetes CSI sidecars (external-provisioner,
//! external-resizer, csi-snapshotter) and snapshot controller, in front of benchrun's own CSI
//! plugin (tests/cluster/csi/: ext4 images on loop devices, class `benchrun-csi`; the
//! plugin is the test cluster's, the rest of the path is what production clusters run).
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run; the
//! Block test needs root (`losetup`), as the volume tests do.

mod common;

use std::time::Duration;

use benchrun_operator::control_plane::objects;
use benchrun_operator::crd::control_plane::{ControlPlaneStatus, OPERATIONS};
use benchrun_operator::crd::{BenchmarkRunStatus, Phase};
use benchrun_test_support::loopdev::Loop;
use benchrun_test_support::{ClusterScoped, NODES};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::Api;

use common::*;

fn snapshot_api(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", kind),
        plural,
    )
}

/// Names of the run's VolumeSnapshots still there, and of the VolumeSnapshotContents of any
/// snapshot of this test's namespace (cluster-scoped, made by the snapshot controller).
async fn snapshot_leftovers(env: &Env, run: &str) -> Vec<String> {
    let lp = ListParams::default().labels(&objects::selector(run));
    let snaps: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        env.ns.name(),
        &snapshot_api("VolumeSnapshot", "volumesnapshots"),
    );
    let mut left: Vec<String> = match snaps.list_metadata(&lp).await {
        Ok(l) => l
            .items
            .into_iter()
            .map(|v| format!("VolumeSnapshot {}", v.metadata.name.unwrap_or_default()))
            .collect(),
        Err(e) => panic!(
            "list VolumeSnapshots (are the snapshot CRDs installed? tests/cluster/csi.sh up): {e}"
        ),
    };
    let contents: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &snapshot_api("VolumeSnapshotContent", "volumesnapshotcontents"),
    );
    for c in contents
        .list(&ListParams::default())
        .await
        .expect("list contents")
        .items
    {
        if c.data["spec"]["volumeSnapshotRef"]["namespace"].as_str() == Some(env.ns.name()) {
            left.push(format!(
                "VolumeSnapshotContent {}",
                c.metadata.name.unwrap_or_default()
            ));
        }
    }
    left
}

/// The test cluster's CSI driver and its class are there (else: what to run).
async fn csi_driver_is_up(env: &Env) {
    let classes: Api<StorageClass> = Api::all(env.client.clone());
    let class = classes.get_opt("benchrun-csi").await.expect("get class");
    assert!(
        class.is_some_and(|c| c.provisioner == "loop.csi.benchrun.dev"),
        "StorageClass benchrun-csi of loop.csi.benchrun.dev missing: the test cluster's CSI driver is not up (tests/cluster/csi.sh up; tests/cluster/up.sh starts it)"
    );
}

/// Names of the run's claims and pods still there.
async fn leftovers(env: &Env, run: &str) -> Vec<String> {
    let lp = ListParams::default().labels(&objects::selector(run));
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), env.ns.name());
    let mut left: Vec<String> = pods
        .list_metadata(&lp)
        .await
        .expect("list pods")
        .items
        .into_iter()
        .map(|p| format!("pod {}", p.metadata.name.unwrap_or_default()))
        .collect();
    left.extend(
        claims
            .list_metadata(&lp)
            .await
            .expect("list claims")
            .items
            .into_iter()
            .map(|c| format!("claim {}", c.metadata.name.unwrap_or_default())),
    );
    left
}

/// PersistentVolumes bound to a claim of this test's namespace.
async fn volumes_of(env: &Env) -> Vec<String> {
    Api::<PersistentVolume>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list PVs")
        .items
        .into_iter()
        .filter(|pv| {
            pv.spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|c| c.namespace.as_deref())
                == Some(env.ns.name())
        })
        .filter_map(|pv| pv.metadata.name)
        .collect()
}

/// 20 claims of the default class at concurrency 5, through all four operations: exact
/// counts, every latency inside the measured span, nothing left afterwards (claims, pods,
/// and the provisioner's volumes).
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn twenty_claims_at_concurrency_five_on_the_default_class() {
    let env = env("op-cp").await;
    let _op = spawn_operator(&env);
    let api = create_run(
        &env,
        "cp20",
        r#"
controlPlane:
  operations: [provision, attach, firstIO, delete]
  count: 20
  concurrency: 5
  size: 16Mi
  timeout: 60s
  thresholds: [{operation: provision, maxP99: 60s}]
"#,
    )
    .await;
    let run = wait_for(&api, "cp20", Duration::from_secs(120), "finished", finished).await;
    let st = run.status.clone().expect("status");
    let cp = st.control_plane.clone().expect("status.controlPlane");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert_eq!(
        (cp.requested, cp.completed, cp.failed),
        (20, 20, 0),
        "{cp:#?}"
    );
    assert!(cp.elapsed_ms > 0.0);
    for op in ["provision", "attach", "firstIO", "delete"] {
        let r = cp
            .operations
            .get(op)
            .unwrap_or_else(|| panic!("{op} missing: {cp:#?}"));
        assert_eq!((r.count, r.errors), (20, 0), "{op}: {r:#?}");
        let l = &r.latency;
        assert!(
            0.0 < l.p50_ms && l.p50_ms <= l.p95_ms && l.p95_ms <= l.p99_ms && l.p99_ms <= l.max_ms,
            "{op}: {l:?}"
        );
        // HDR buckets are within 0.1 % of the value.
        assert!(
            l.max_ms <= cp.elapsed_ms * 1.001,
            "{op}: max {} > span {}",
            l.max_ms,
            cp.elapsed_ms
        );
        for (phase, p) in &r.phases {
            assert!(p.max_ms <= cp.elapsed_ms * 1.001, "{op}.{phase}: {p:?}");
        }
    }
    let prov = &cp.operations["provision"];
    for phase in ["bound", "pvCreated", "scheduled"] {
        assert!(
            prov.phases.contains_key(phase),
            "provision phases: {:?}",
            prov.phases.keys()
        );
    }
    let io = &cp.operations["firstIO"];
    assert!(io.phases.contains_key("write") && io.phases.contains_key("read"));
    assert!(st.thresholds.iter().all(|t| t.met), "{:?}", st.thresholds);
    assert_eq!(leftovers(&env, "cp20").await, Vec::<String>::new());
    // The provisioner's volumes went with their claims (the delete operation waited for them).
    assert_eq!(volumes_of(&env).await, Vec::<String>::new());
}

/// A StorageClass whose provisioner nobody runs: the run fails within its timeout, naming the
/// PV controller's Event about that provisioner, and starts no further claim after the
/// failures of the first wave.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn an_unbindable_class_fails_with_the_provisioners_message_not_a_hang() {
    let env = env("op-cp-nobody").await;
    let class = format!("{}-nobody", env.ns.name());
    let provisioner = "benchrun.dev/nobody-runs-this";
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": class},
        "provisioner": provisioner,
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Delete",
    }))
    .expect("class");
    let classes: Api<StorageClass> = Api::all(env.client.clone());
    classes
        .create(&PostParams::default(), &sc)
        .await
        .expect("create StorageClass");
    // Cluster-scoped: removed when the test ends, failed or not.
    let _class = ClusterScoped::class(&class);
    let _op = spawn_operator(&env);
    let started = tokio::time::Instant::now();
    let api = create_run(
        &env,
        "nobody",
        &format!(
            r#"
controlPlane:
  operations: [provision, delete]
  count: 10
  concurrency: 2
  storageClassName: {class}
  size: 16Mi
  timeout: 4s
"#
        ),
    )
    .await;
    let run = wait_for(
        &api,
        "nobody",
        Duration::from_secs(30),
        "finished",
        finished,
    )
    .await;
    let took = started.elapsed();
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Failed, "{st:#?}");
    let failed = condition(&run, "Failed").expect("Failed condition");
    assert_eq!(failed.reason, "ControlPlaneErrors");
    assert!(
        failed.message.contains(provisioner),
        "the message names the provisioner's Event: {}",
        failed.message
    );
    let cp = st.control_plane.clone().expect("status.controlPlane");
    let prov = &cp.operations["provision"];
    assert_eq!(prov.count, 0, "{prov:#?}");
    // The first wave (2 in flight) fails; none starts after.
    assert!((1..=2).contains(&prov.errors), "{prov:#?}");
    assert_eq!(
        prov.errors_by_kind.get("timeout").copied(),
        Some(prov.errors),
        "{prov:#?}"
    );
    assert!(
        took < Duration::from_secs(20),
        "took {took:?} with a 4s timeout"
    );
    assert_eq!(leftovers(&env, "nobody").await, Vec::<String>::new());
}

/// Control operations under data-plane load, one manifest: a worker per node keeps 70/30
/// random 4 KiB O_DIRECT reads and writes going on its own volume while 6 claims of the
/// default class go through provision, attach, first I/O and delete, 2 at a time. The
/// lifecycles start `startAfter` (2 s) after the workers' start instant, not before
/// (`status.controlPlane.startTime`); the run completes once both have ended, with both
/// results in its status and the thresholds of both in one list; nothing the control plane
/// created is left.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn control_operations_run_beside_the_workers_data_plane_load() {
    let env = env("op-cp-dp").await;
    let _op = spawn_operator(&env);
    let api = create_run(
        &env,
        "cpdp",
        r#"
workload:
  target: direct:///data
  duration: 15s
  concurrency: 2
  ops: [{op: read, weight: 70}, {op: write, weight: 30}]
  block: {blockSize: 4KiB, queueDepth: 4, fileSize: 8MiB}
volume: {emptyDir: {}}
workers:
  perNode: true
  resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: 50m, memory: 32Mi}}
startDelay: 3s
timeout: 4m
cleanup: Always
thresholds: [{op: read, maxP99: 10s}]
controlPlane:
  operations: [provision, attach, firstIO, delete]
  count: 6
  concurrency: 2
  size: 16Mi
  timeout: 60s
  startAfter: 2s
  thresholds: [{operation: provision, maxP99: 60s}]
"#,
    )
    .await;
    let run = wait_for(&api, "cpdp", Duration::from_secs(240), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    // The data plane: every worker's ops, merged.
    let reads = st.results.get("read").map_or(0, |r| r.count);
    let writes = st.results.get("write").map_or(0, |r| r.count);
    assert!(
        reads > 0 && writes > 0,
        "data-plane results: {:?}",
        st.results
    );
    assert_eq!(worker_summaries(&env, &run).await.len(), NODES.len());
    // The control plane: exact counts, every latency inside its span.
    let cp = st.control_plane.clone().expect("status.controlPlane");
    assert_eq!(
        (cp.requested, cp.completed, cp.failed),
        (6, 6, 0),
        "{cp:#?}"
    );
    for op in ["provision", "attach", "firstIO", "delete"] {
        let r = &cp.operations[op];
        assert_eq!((r.count, r.errors), (6, 0), "{op}: {r:#?}");
        assert!(r.latency.max_ms <= cp.elapsed_ms * 1.001, "{op}: {r:#?}");
    }
    // Started `startAfter` (2 s) after the workers, not before (one clock, the operator's;
    // 100 ms allowed for its monotonic timer against the wall clock the times are written in).
    let at = |t: &Option<String>| {
        chrono::DateTime::parse_from_rfc3339(t.as_deref().expect("a start time")).expect("rfc3339")
    };
    let delay = at(&cp.start_time) - at(&st.start_time);
    assert!(
        delay >= chrono::Duration::milliseconds(1900),
        "control plane started {:?}, workers {:?}: {delay} apart, startAfter 2s",
        cp.start_time,
        st.start_time
    );
    // How much of it ran after the load: measured, whatever it is on a slow machine.
    assert!(cp.after_load_ms.is_some_and(|ms| ms >= 0.0), "{cp:#?}");
    eprintln!(
        "control plane: {} lifecycles in {:.0} ms, {:.0} ms of it after the load; data plane: {reads} reads, {writes} writes; provision p99 {:.1} ms, attach p99 {:.1} ms",
        cp.completed,
        cp.elapsed_ms,
        cp.after_load_ms.unwrap_or_default(),
        cp.operations["provision"].latency.p99_ms,
        cp.operations["attach"].latency.p99_ms
    );
    let mut checked: Vec<&str> = st.thresholds.iter().map(|t| t.op.as_str()).collect();
    checked.sort();
    assert_eq!(checked, ["provision", "read"], "{:?}", st.thresholds);
    assert!(st.thresholds.iter().all(|t| t.met), "{:?}", st.thresholds);
    assert_eq!(leftovers(&env, "cpdp").await, Vec::<String>::new());
    assert_eq!(volumes_of(&env).await, Vec::<String>::new());
}

/// A run deleted while its lifecycles are in flight: the finalizer stops them and deletes
/// every claim and pod it created before the run goes, and the provisioner's volumes of
/// those claims go too. (Snapshots: a control-plane run makes none yet.)
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_run_deleted_mid_way_leaves_no_claim_pod_or_volume() {
    let env = env("op-cp-del").await;
    let _op = spawn_operator(&env);
    let api = create_run(
        &env,
        "cpdel",
        r#"
controlPlane:
  operations: [provision, attach, firstIO, delete]
  count: 50
  concurrency: 4
  size: 16Mi
  timeout: 60s
"#,
    )
    .await;
    // Mid-way: a claim of the run is Bound (provisioned, its volume exists), so the deletion
    // has claims, pods and volumes to clean up.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), env.ns.name());
    let lp = ListParams::default().labels(&objects::selector("cpdel"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let bound = claims
            .list(&lp)
            .await
            .expect("list")
            .items
            .iter()
            .any(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"));
        if bound {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no claim of the run Bound after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let run = api.get("cpdel").await.expect("get");
    let cp = run.status.and_then(|s| s.control_plane);
    assert!(
        cp.is_none(),
        "the run must still be measuring when it is deleted: {cp:#?}"
    );
    api.delete("cpdel", &DeleteParams::default())
        .await
        .expect("delete run");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let gone = api.get_opt("cpdel").await.expect("get").is_none();
        let left = leftovers(&env, "cpdel").await;
        let volumes = volumes_of(&env).await;
        if gone && left.is_empty() && volumes.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "90 s after the deletion: run gone {gone}, left {left:?}, volumes {volumes:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A Block claim of each of the test cluster's provisioners, neither of which provisions Block
/// volumes: each run fails within its timeout with that provisioner's own `ProvisioningFailed`
/// message (sig-storage-lib-external-provisioner's refusal, which both are built on), kind
/// `provisioningFailed`, not a hang.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_block_claim_a_provisioner_refuses_fails_with_its_message() {
    let env = env("op-cp-noblock").await;
    let _op = spawn_operator(&env);
    for (run, class, provisioner) in [
        ("noblock-hp", "benchrun-hostpath", "benchrun.dev/hostpath"),
        ("noblock-lp", "local-path", "rancher.io/local-path"),
    ] {
        let started = tokio::time::Instant::now();
        let api = create_run(
            &env,
            run,
            &format!(
                r#"
controlPlane:
  operations: [provision, attach, firstIO, delete]
  count: 5
  concurrency: 1
  storageClassName: {class}
  volumeMode: Block
  size: 16Mi
  timeout: 8s
"#
            ),
        )
        .await;
        let r = wait_for(&api, run, Duration::from_secs(60), "finished", finished).await;
        let took = started.elapsed();
        let st = r.status.clone().expect("status");
        assert_eq!(st.phase, Phase::Failed, "{run}: {st:#?}");
        let failed = condition(&r, "Failed").expect("Failed condition");
        assert_eq!(failed.reason, "ControlPlaneErrors", "{run}");
        let said =
            format!("ProvisioningFailed: {provisioner} does not support block volume provisioning");
        assert!(
            failed.message.contains(&said),
            "{run}: the message carries the provisioner's Event ({said}): {}",
            failed.message
        );
        let cp = st.control_plane.clone().expect("status.controlPlane");
        let prov = &cp.operations["provision"];
        assert_eq!((prov.count, prov.errors), (0, 1), "{run}: {prov:#?}");
        assert_eq!(
            prov.errors_by_kind.get("provisioningFailed"),
            Some(&1),
            "{run}: {prov:#?}"
        );
        assert_eq!(
            (cp.completed, cp.failed),
            (0, 1),
            "{run}: none started after the failure"
        );
        assert!(
            took < Duration::from_secs(40),
            "{run}: took {took:?} with an 8s timeout"
        );
        assert_eq!(leftovers(&env, run).await, Vec::<String>::new());
    }
}

/// `volumeMode: Block`: one claim per node, bound (WaitForFirstConsumer) to a `local`
/// PersistentVolume on a loop device; the probe pod gets the raw device through
/// `volumeDevices` and writes and reads its first 4 KiB with O_DIRECT: the write reached each
/// node's device (the kernel counted it) and the probe's pattern is there.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn block_claims_get_their_first_io_on_the_raw_device() {
    let env = env("op-cp-block").await;
    let dirs: Vec<tempfile::TempDir> = NODES
        .iter()
        .map(|_| tempfile::tempdir_in("/var/tmp").expect("dir"))
        .collect();
    let loops: Vec<Loop> = dirs.iter().map(|d| Loop::new(d.path(), 64 << 20)).collect();
    let class = format!("{}-block", env.ns.name());
    let sc: StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": class},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }))
    .expect("class");
    Api::<StorageClass>::all(env.client.clone())
        .create(&PostParams::default(), &sc)
        .await
        .expect("create StorageClass");
    let mut cluster_scoped = ClusterScoped::class(&class);
    for (node, lo) in NODES.iter().zip(&loops) {
        let name = format!("{class}-{node}");
        let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "64Mi"},
                "volumeMode": "Block",
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": class,
                "local": {"path": lo.dev.display().to_string()},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                ]}]}},
            }
        }))
        .expect("pv");
        Api::<PersistentVolume>::all(env.client.clone())
            .create(&PostParams::default(), &pv)
            .await
            .expect("create PersistentVolume");
        cluster_scoped.pv(name);
    }
    let before: Vec<_> = loops.iter().map(Loop::stat).collect();
    let _op = spawn_operator(&env);
    // `delete` is not measured: with Retain (and no provisioner) the volumes stay, Released.
    let api = create_run(
        &env,
        "blk",
        &format!(
            r#"
controlPlane:
  operations: [provision, attach, firstIO]
  count: 2
  concurrency: 2
  storageClassName: {class}
  volumeMode: Block
  size: 16Mi
  timeout: 90s
"#
        ),
    )
    .await;
    let run = wait_for(&api, "blk", Duration::from_secs(240), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let cp = st.control_plane.clone().expect("status.controlPlane");
    assert_eq!((cp.completed, cp.failed), (2, 0), "{cp:#?}");
    for op in ["provision", "attach", "firstIO"] {
        assert_eq!(cp.operations[op].count, 2, "{op}: {cp:#?}");
    }
    assert!(!cp.operations.contains_key("delete"), "{cp:#?}");
    let io = &cp.operations["firstIO"];
    assert!(io.phases.contains_key("write") && io.phases.contains_key("read"));
    // Each node's device took the probe's write (8 sectors; a flush counts as an empty
    // write): its start, zeros before, is the probe's bytes now, and no two claims' probes
    // wrote the same bytes (fresh ones each: one array behind every claim stores each).
    let mut heads = Vec::new();
    for ((lo, b), node) in loops.iter().zip(&before).zip(NODES) {
        let d = b.since(lo.stat());
        assert!(d.sectors_written >= 8, "{node} {}: {d:?}", lo.dev.display());
        let mut head = vec![0u8; 4096];
        std::os::unix::fs::FileExt::read_exact_at(
            &std::fs::File::open(&lo.dev).expect("open device"),
            &mut head,
            0,
        )
        .expect("read device");
        assert!(
            head.chunks(512).all(|s| s.iter().any(|b| *b != 0)),
            "{node}: the probe's bytes are not at the start of {}",
            lo.dev.display()
        );
        heads.push(head);
    }
    assert_ne!(
        heads[0], heads[1],
        "two claims' probes wrote the same bytes"
    );
    assert_eq!(leftovers(&env, "blk").await, Vec::<String>::new());
}

/// Run control-plane run `name` of `spec` to its end within `within`: its status, which must
/// say Succeeded, with its control-plane figures.
async fn succeeded(
    env: &Env,
    name: &str,
    spec: &str,
    within: Duration,
) -> (BenchmarkRunStatus, ControlPlaneStatus) {
    let api = create_run(env, name, spec).await;
    let run = wait_for(&api, name, within, "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let cp = st.control_plane.clone().expect("status.controlPlane");
    (st, cp)
}

/// Nothing of run `run` is left: no claim, pod, VolumeSnapshot, VolumeSnapshotContent or
/// PersistentVolume of this test's namespace.
async fn nothing_left(env: &Env, run: &str) {
    assert_eq!(leftovers(env, run).await, Vec::<String>::new());
    assert_eq!(snapshot_leftovers(env, run).await, Vec::<String>::new());
    assert_eq!(volumes_of(env).await, Vec::<String>::new());
}

/// Snapshot, clone and expand through the real CSI sidecars and snapshot controller (in front
/// of benchrun's own plugin, whose volumes are ext4 images: the snapshot and the clone copy
/// the image, the expansion grows it and runs resize2fs; attached through external-attacher,
/// so the pods wait for their VolumeAttachments): 4 claims 2 at a time through all seven
/// operations, exact counts, every phase Kubernetes exposes, every latency inside the span;
/// then a run restoring its clones from the snapshots, and one taking the snapshot and the
/// clone while the pods keep their volumes mounted and busy (`inUse`, `busy`). Nothing is left: no claim, pod,
/// VolumeSnapshot, VolumeSnapshotContent or PersistentVolume.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn snapshot_clone_and_expand_through_the_real_csi_sidecars() {
    let env = env("op-cp-csi").await;
    csi_driver_is_up(&env).await;
    let _op = spawn_operator(&env);
    let spec = r#"
controlPlane:
  operations: [provision, attach, firstIO, snapshot, clone, expand, delete]
  count: 4
  concurrency: 2
  storageClassName: benchrun-csi
  size: 16Mi
  expandedSize: 40Mi
  timeout: 60s
  thresholds: [{operation: snapshot, maxP99: 60s}, {operation: expand, maxP99: 60s}]
"#;
    let (st, cp) = succeeded(&env, "cpcsi", spec, Duration::from_secs(240)).await;
    assert_eq!(
        (cp.requested, cp.completed, cp.failed),
        (4, 4, 0),
        "{cp:#?}"
    );
    for op in OPERATIONS {
        let r = cp
            .operations
            .get(op)
            .unwrap_or_else(|| panic!("{op} missing: {cp:#?}"));
        assert_eq!((r.count, r.errors), (4, 0), "{op}: {r:#?}");
        let l = &r.latency;
        assert!(
            0.0 < l.p50_ms && l.p50_ms <= l.p99_ms && l.p99_ms <= l.max_ms,
            "{op}: {l:?}"
        );
        assert!(
            l.max_ms <= cp.elapsed_ms * 1.001,
            "{op}: max {} > span {}",
            l.max_ms,
            cp.elapsed_ms
        );
        for (phase, p) in &r.phases {
            assert!(
                p.max_ms <= l.max_ms * 1.001,
                "{op}.{phase} after the operation ended: {p:?} vs {l:?}"
            );
        }
    }
    for (op, phase) in [
        ("attach", "vaCreated"),
        ("attach", "attached"),
        ("snapshot", "bound"),
        ("clone", "pvCreated"),
        ("expand", "pvResized"),
    ] {
        assert!(
            cp.operations[op].phases.contains_key(phase),
            "{op} phases: {:?}",
            cp.operations[op].phases.keys()
        );
    }
    // Each pod's VolumeAttachment is created before it is attached (so every percentile of
    // the first is at most the second's), and the kubelet mounts only after that.
    let attach = &cp.operations["attach"].phases;
    let (created, attached) = (&attach["vaCreated"], &attach["attached"]);
    assert!(
        created.p50_ms <= attached.p50_ms && created.max_ms <= attached.max_ms,
        "{attach:#?}"
    );
    assert_eq!(st.thresholds.len(), 2, "{:?}", st.thresholds);
    assert!(st.thresholds.iter().all(|t| t.met), "{:?}", st.thresholds);
    nothing_left(&env, "cpcsi").await;

    // Restores: each clone from its lifecycle's VolumeSnapshot.
    let spec = r#"
controlPlane:
  operations: [provision, firstIO, snapshot, clone, delete]
  count: 2
  storageClassName: benchrun-csi
  size: 16Mi
  cloneSource: Snapshot
  timeout: 60s
"#;
    let (_, cp) = succeeded(&env, "cprestore", spec, Duration::from_secs(180)).await;
    let clone = &cp.operations["clone"];
    assert_eq!((clone.count, clone.errors), (2, 0), "{cp:#?}");
    assert!(!cp.operations.contains_key("expand"), "not asked: {cp:#?}");
    nothing_left(&env, "cprestore").await;

    // In use and busy: snapshot and clone while the pod has the volume mounted (the operator
    // fails a lifecycle, `notInUse`, whose pod stopped holding it before they ended, so
    // success says they ran in use) and keeps I/O running on it.
    let spec = r#"
controlPlane:
  operations: [provision, attach, snapshot, clone, delete]
  count: 2
  storageClassName: benchrun-csi
  size: 16Mi
  inUse: true
  busy: true
  timeout: 60s
"#;
    let (_, cp) = succeeded(&env, "cpinuse", spec, Duration::from_secs(180)).await;
    for op in ["snapshot", "clone"] {
        let r = &cp.operations[op];
        assert_eq!((r.count, r.errors), (2, 0), "{op}: {cp:#?}");
    }
    // Each pod's report, read from its last state: at least one I/O each (a hold does one
    // however early it is stopped), none failed, the latencies inside the run's span.
    let b = cp.busy.as_ref().expect("status.controlPlane.busy");
    assert_eq!((b.lifecycles, b.unreported, b.errors), (2, 0, 0), "{b:#?}");
    assert!(b.reads + b.writes >= 2 && b.iops_per_volume > 0.0, "{b:#?}");
    let l = &b.latency;
    if b.latency_left_out < 2 {
        assert!(
            0.0 < l.p50_ms && l.p50_ms <= l.p99_ms && l.p99_ms <= l.max_ms,
            "{b:#?}"
        );
    }
    assert!(l.max_ms <= cp.elapsed_ms, "{b:#?}");
    nothing_left(&env, "cpinuse").await;
}

/// Whether this process (root, as the test cluster's CSI plugin) has CAP_SYS_RESOURCE, which
/// an online ext4 resize needs: the plugin expands mounted volumes only then.
fn can_resize_online() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

/// An expansion of a volume in use (`inUse`): online where the driver can (the test
/// cluster's plugin can when it has CAP_SYS_RESOURCE), else the driver's refusal, reported with
/// the resizer's Event (the plugin's FailedPrecondition, "offline only"), not a hang.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn an_expansion_in_use_is_online_or_the_drivers_refusal() {
    let env = env("op-cp-online").await;
    csi_driver_is_up(&env).await;
    let _op = spawn_operator(&env);
    let spec = r#"
controlPlane:
  operations: [provision, attach, expand, delete]
  count: 1
  storageClassName: benchrun-csi
  size: 16Mi
  inUse: true
  timeout: 20s
"#;
    if can_resize_online() {
        let (_, cp) = succeeded(&env, "cponline", spec, Duration::from_secs(120)).await;
        assert_eq!(cp.operations["expand"].count, 1, "{cp:#?}");
    } else {
        let api = create_run(&env, "cponline", spec).await;
        let run = wait_for(
            &api,
            "cponline",
            Duration::from_secs(120),
            "finished",
            finished,
        )
        .await;
        let st = run.status.expect("status");
        assert_eq!(st.phase, Phase::Failed, "{st:#?}");
        let cp = st.control_plane.expect("status.controlPlane");
        let expand = &cp.operations["expand"];
        assert_eq!((expand.count, expand.errors), (0, 1), "{cp:#?}");
        let first = cp.first_error.unwrap_or_default();
        assert!(
            first.contains("expand") && first.contains("offline only"),
            "the resizer's Event with the plugin's refusal: {first}"
        );
    }
    assert_eq!(leftovers(&env, "cponline").await, Vec::<String>::new());
    // The failed lifecycle's claim goes without a wait; its volume once it is detached (the
    // provisioner's DeleteVolume is refused until then, and retried).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while !volumes_of(&env).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "volumes left 90 s after the run: {:?}",
            volumes_of(&env).await
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A snapshot-taking run deleted while its lifecycles are in flight: the finalizer's sweep and
/// the owner references leave no claim, pod, VolumeSnapshot, VolumeSnapshotContent or
/// PersistentVolume behind.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_run_deleted_mid_way_leaves_no_snapshot_behind() {
    let env = env("op-cp-csidel").await;
    csi_driver_is_up(&env).await;
    let _op = spawn_operator(&env);
    let api = create_run(
        &env,
        "cpsdel",
        r#"
controlPlane:
  operations: [provision, snapshot, clone, delete]
  count: 40
  concurrency: 3
  storageClassName: benchrun-csi
  size: 16Mi
  timeout: 60s
"#,
    )
    .await;
    // Mid-way: a VolumeSnapshot of the run exists, so the deletion has one to clean up.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if snapshot_leftovers(&env, "cpsdel")
            .await
            .iter()
            .any(|s| s.starts_with("VolumeSnapshot "))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no VolumeSnapshot of the run after 90 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let run = api.get("cpsdel").await.expect("get");
    assert!(
        run.status.and_then(|s| s.control_plane).is_none(),
        "the run must still be measuring when it is deleted"
    );
    api.delete("cpsdel", &DeleteParams::default())
        .await
        .expect("delete run");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let gone = api.get_opt("cpsdel").await.expect("get").is_none();
        let mut left = leftovers(&env, "cpsdel").await;
        left.extend(snapshot_leftovers(&env, "cpsdel").await);
        let volumes = volumes_of(&env).await;
        if gone && left.is_empty() && volumes.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "120 s after the deletion: run gone {gone}, left {left:?}, volumes {volumes:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A user's pod `taken-cp-0` (owned by a ConfigMap of theirs) and claim `taken-cp-1` (no
/// owner), then a run `taken` whose lifecycles would create those names: the run fails, its
/// first error is `nameTaken` naming whose the object is, the claim its lifecycle 0 created
/// is gone, and the user's pod and claim are still there with their UIDs.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn names_taken_by_a_users_objects_fail_the_run_and_leave_them_alone() {
    let env = env("op-cp-taken").await;
    let ns = env.ns.name().to_string();
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let owner = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "db"}}))
                .expect("ConfigMap"),
        )
        .await
        .expect("the user's ConfigMap");
    let owner_uid = owner.metadata.uid.clone().expect("uid");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &ns);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "taken-cp-0", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "db", "uid": owner_uid}]},
        // Within the namespace's PodSecurity level (restricted); it need not run, only exist.
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "db", "image": env.images.worker,
                            "command": ["sleep", "3600"],
                            "securityContext": {"allowPrivilegeEscalation": false,
                                                "capabilities": {"drop": ["ALL"]}}}]}
    }))
    .expect("pod");
    let pod_uid = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("the user's pod")
        .metadata
        .uid;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), &ns);
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "taken-cp-1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}
    }))
    .expect("claim");
    let claim_uid = claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("the user's claim")
        .metadata
        .uid;

    let _op = spawn_operator(&env);
    let api = create_run(
        &env,
        "taken",
        r#"
controlPlane:
  operations: [provision, attach, delete]
  count: 2
  concurrency: 2
  size: 16Mi
  timeout: 20s
"#,
    )
    .await;
    let run = wait_for(&api, "taken", Duration::from_secs(90), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Failed, "{st:#?}");
    let first = st
        .control_plane
        .and_then(|cp| cp.first_error)
        .unwrap_or_default();
    assert!(first.contains("nameTaken"), "{first}");
    assert!(
        first.contains("owned by ConfigMap db") || first.contains("it has no owner"),
        "{first}"
    );
    let pod = pods.get_opt("taken-cp-0").await.expect("get pod");
    assert_eq!(pod.and_then(|p| p.metadata.uid), pod_uid, "the user's pod");
    let claim = claims.get_opt("taken-cp-1").await.expect("get claim");
    assert_eq!(
        claim.and_then(|c| c.metadata.uid),
        claim_uid,
        "the user's claim"
    );
    // What the run created (it carries the run's labels; the user's objects do not) is gone.
    assert_eq!(leftovers(&env, "taken").await, Vec::<String>::new());
}
