//! Proves the test cluster is real: one worker pod per node (vm and vm2) runs the worker image
//! against an emptyDir `file://` target, completes, and its JSON summary, read back through the
//! API (pod logs), counts operations. Needs tests/cluster/up.sh and tests/cluster/image.sh.
//!
//! The data volume fits its limit by construction, not by timing: the kubelet evicts a pod
//! whose emptyDir passes its `sizeLimit` whenever its housekeeping looks, so the workload's
//! bound ([`MAX_BYTES_WRITTEN`]) must stay well under [`DATA_LIMIT`], whatever the speed.

use std::collections::BTreeMap;
use std::time::Duration;

use benchrun_test_support::pods::{
    restricted_container_security, restricted_pod_security, stdout_logs, wait_for_phase,
};
use benchrun_test_support::{cluster, Images, TestNamespace, NODES};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, Pod, PodSpec,
    ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;

const WORKLOAD: &str = "\
target: file:///data
duration: 3s
concurrency: 4
ops:
  - { op: put, weight: 1 }
  - { op: get, weight: 3 }
objectSize: 64KiB
dataset: { objects: 20 }
write: { maxObjects: 8 }
";

/// What the workload can ever hold on the volume: 20 dataset objects plus 8 PUT keys
/// (overwritten in turn), 64 KiB each.
const MAX_BYTES_WRITTEN: u64 = (20 + 8) * 64 * 1024;
/// The emptyDir's `sizeLimit`.
const DATA_LIMIT: &str = "64Mi";
// A wide margin under the limit (checked at compile time).
const _: () = assert!(MAX_BYTES_WRITTEN * 4 < 64 << 20);

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[test]
fn the_workload_fits_the_volume_by_construction() {
    let w = benchrun_worker::Workload::from_yaml(WORKLOAD).expect("valid workload");
    let keys = w.dataset.objects + w.write.max_objects.expect("PUTs must be bounded");
    assert_eq!(keys * w.object_size.max(), MAX_BYTES_WRITTEN);
}

fn worker_pod(node: &str, image: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("worker-{node}")),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            // Through the scheduler (not spec.nodeName), so placement is tested too.
            node_selector: Some(BTreeMap::from([(
                "kubernetes.io/hostname".into(),
                node.into(),
            )])),
            security_context: Some(restricted_pod_security()),
            automount_service_account_token: Some(false),
            containers: vec![Container {
                name: "worker".into(),
                image: Some(image.into()),
                image_pull_policy: Some("Never".into()),
                args: Some(
                    ["run", "/config/workload.yaml", "--summary", "-"]
                        .map(String::from)
                        .to_vec(),
                ),
                security_context: Some(restricted_container_security()),
                // Both nodes report the whole machine, so the scheduler double-books: keep
                // requests small and set limits so a runaway worker cannot starve the cluster.
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".into(), Quantity("100m".into())),
                        ("memory".into(), Quantity("64Mi".into())),
                    ])),
                    limits: Some(BTreeMap::from([(
                        "memory".into(),
                        Quantity("512Mi".into()),
                    )])),
                    ..Default::default()
                }),
                volume_mounts: Some(vec![
                    VolumeMount {
                        name: "config".into(),
                        mount_path: "/config".into(),
                        read_only: Some(true),
                        ..Default::default()
                    },
                    VolumeMount {
                        name: "data".into(),
                        mount_path: "/data".into(),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }],
            volumes: Some(vec![
                Volume {
                    name: "config".into(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: "workload".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "data".into(),
                    empty_dir: Some(EmptyDirVolumeSource {
                        size_limit: Some(Quantity(DATA_LIMIT.into())),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
        ..Pod::default()
    }
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn one_worker_per_node_completes_with_ops() {
    let client = cluster::connect().await;
    cluster::require_ready_nodes(&client, &NODES).await;
    let images = Images::load();
    let ns = TestNamespace::create(&client, "smoke").await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("workload".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("workload.yaml".into(), WORKLOAD.into())])),
        ..ConfigMap::default()
    };
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create ConfigMap");

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    for node in NODES {
        pods.create(&PostParams::default(), &worker_pod(node, &images.worker))
            .await
            .unwrap_or_else(|e| panic!("create worker pod for {node}: {e}"));
    }

    for node in NODES {
        let name = format!("worker-{node}");
        let pod = wait_for_phase(
            &client,
            ns.name(),
            &name,
            "Succeeded",
            Duration::from_secs(120),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
        let ran_on = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
        assert_eq!(ran_on, node, "pod {name} ran on the wrong node");

        let log = stdout_logs(&client, ns.name(), &name, "worker")
            .await
            .expect("read worker stdout");
        // stdout holds the summary and nothing else; anything more means stderr leaked in.
        let summary: serde_json::Value = serde_json::from_str(&log).unwrap_or_else(|e| {
            panic!("stdout of {name} is not one JSON summary ({e}); is PodLogsQuerySplitStreams on?\n{log}")
        });
        let ops = summary["ops"]
            .as_object()
            .unwrap_or_else(|| panic!("summary of {name} has no \"ops\" object: {summary}"));
        let counts: BTreeMap<&str, u64> = ops
            .iter()
            .map(|(op, v)| (op.as_str(), v["count"].as_u64().unwrap_or(0)))
            .collect();
        eprintln!("node {node}: pod {name} ops {counts:?}");
        for op in ["get", "put"] {
            assert!(
                counts.get(op).copied().unwrap_or(0) > 0,
                "worker on {node} completed no {op}: {summary}"
            );
            assert_eq!(
                ops[op]["errors"].as_u64(),
                Some(0),
                "worker on {node}: {op} errors: {summary}"
            );
        }
        assert_eq!(summary["partial"], false, "{summary}");
        assert_eq!(summary["stoppedBy"], "duration", "{summary}");
    }
}
