//! Pure builders for the objects a run owns: the workload ConfigMap, the token Secret, the
//! result ConfigMap, per-worker claims and the worker Pods. Every one carries a controller
//! owner reference to the run, so deleting the run deletes them.

use std::collections::BTreeMap;

use benchrun_api::spec::TargetUri;
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort,
    EmptyDirVolumeSource, EnvFromSource, EnvVar, HTTPGetAction, KeyToPath, NodeAffinity,
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec, Probe, SeccompProfile,
    Secret, SecretEnvSource, SecretVolumeSource, SecurityContext, Volume, VolumeDevice,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};

use crate::crd::{BenchmarkRun, WorkerStatus};
use crate::{Error, Result};

/// Name of the worker container.
pub const CONTAINER: &str = "worker";
/// Port of the agent's HTTP endpoint (metrics, health, control).
pub const AGENT_PORT: u16 = 8080;
/// UID/GID the workers run as (distroless `nonroot`).
pub const WORKER_UID: i64 = 65532;
/// Label on everything a run owns: the run's name.
pub const RUN_LABEL: &str = "benchrun.dev/run";
/// Longest run name: a label value holds at most 63 characters.
pub const MAX_RUN_NAME: usize = 63;
/// Label on worker pods: the worker's name.
pub const WORKER_LABEL: &str = "benchrun.dev/worker";
/// Field manager for server-side apply and the managed-by label.
pub const MANAGER: &str = "benchrun-operator";

const CONFIG_DIR: &str = "/config";
const TOKEN_DIR: &str = "/var/run/benchrun/token";
/// Where the run's `secretRef` is mounted; the default `storage.credentialsDir`.
pub const CREDENTIALS_DIR: &str = "/var/run/benchrun/credentials";
/// Where the run's `caRef` key is mounted (a directory of this one file).
pub const TLS_DIR: &str = "/var/run/benchrun/tls";
/// The file of the `caRef` key in [`TLS_DIR`], set as the workers' `storage.tls.caFile`.
pub const TLS_CA_FILE: &str = "/var/run/benchrun/tls/ca.crt";

/// The run's workload ConfigMap.
pub fn workload_cm_name(run: &str) -> String {
    format!("{run}-workload")
}
/// The run's result ConfigMap (the merged summary).
pub fn result_cm_name(run: &str) -> String {
    format!("{run}-result")
}
/// The run's worker-token Secret. Named for this run's UID as well as its name: the operator
/// may create Secrets but not read them, so it could not tell the Secret of an earlier run of
/// the same name (not yet garbage-collected) from its own; with the UID in the name, there is
/// nothing to tell apart.
pub fn token_secret_name(run: &BenchmarkRun) -> String {
    format!("{}-token-{}", run.name_any(), uid_tag(run))
}

/// The first 8 characters of the run's UID (a name suffix for objects the operator cannot
/// read back, see [`token_secret_name`]).
pub fn uid_tag(run: &BenchmarkRun) -> String {
    run.metadata
        .uid
        .as_deref()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect::<String>()
        .to_ascii_lowercase()
}
/// A worker's pod.
pub fn pod_name(run: &str, worker: &str) -> String {
    format!("{run}-{worker}")
}
/// The existing claim `volume.claimName` names for `worker`: the name itself, or with
/// `{worker}` replaced by the worker's name (a claim per worker).
pub fn existing_claim(claim_name: &str, worker: &str) -> String {
    claim_name.replace(WORKER_PLACEHOLDER, worker)
}

/// In `volume.claimName`, stands for the worker's name.
pub const WORKER_PLACEHOLDER: &str = "{worker}";

/// A worker's own claim (`volume.claimTemplate`).
pub fn claim_name(run: &str, worker: &str) -> String {
    format!("{run}-{worker}-data")
}
/// One worker's own result ConfigMap: its summary, gzip-compressed (see `results`). One object
/// per worker, so that no object grows with the number of workers.
pub fn worker_result_cm_name(run: &str, worker: &str) -> String {
    format!("{run}-result-{worker}")
}
/// Where an unusable answer of a worker is kept (never counted or merged).
pub fn rejected_cm_name(run: &str, worker: &str) -> String {
    format!("{run}-rejected-{worker}")
}
/// Key of the gzip-compressed summary JSON in a worker's result ConfigMap (`binaryData`).
pub const SUMMARY_GZ_KEY: &str = "summary.json.gz";
/// Key of the gzip-compressed rejected answer in a worker's rejected ConfigMap.
pub const REJECTED_GZ_KEY: &str = "rejected.json.gz";
/// Label on per-worker result objects: `summary` (counted) or `rejected` (kept, not counted).
pub const RESULT_LABEL: &str = "benchrun.dev/result";
/// [`RESULT_LABEL`] value of a worker's counted summary.
pub const RESULT_SUMMARY: &str = "summary";
/// [`RESULT_LABEL`] value of a worker's unusable answer, kept but not counted.
pub const RESULT_REJECTED: &str = "rejected";

/// The per-run control token: HMAC-SHA256(operator key, run UID), hex. Derived, not stored in
/// the operator, so a restarted operator can talk to the workers of runs it did not start,
/// and never needs to read a Secret back.
pub fn worker_token(key: &[u8], run_uid: &str) -> String {
    let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    hex::encode(ring::hmac::sign(&k, run_uid.as_bytes()).as_ref())
}

fn owner(run: &BenchmarkRun) -> Result<OwnerReference> {
    run.controller_owner_ref(&())
        .ok_or_else(|| Error::Invalid("the run has no uid yet".into()))
}

/// Metadata of an object the run owns: its namespace, the run's labels, the run as owner.
pub fn owned_meta(run: &BenchmarkRun, name: String) -> Result<ObjectMeta> {
    meta(run, name)
}

fn meta(run: &BenchmarkRun, name: String) -> Result<ObjectMeta> {
    Ok(ObjectMeta {
        name: Some(name),
        namespace: run.namespace(),
        labels: Some(base_labels(run)),
        owner_references: Some(vec![owner(run)?]),
        ..Default::default()
    })
}

/// A child run of `parent` (a matrix combination, a search probe): in the parent's namespace,
/// controlled by the parent's UID, labelled `label=<parent>` so `kubectl get br -l` finds it.
pub fn child_run(
    parent: &BenchmarkRun,
    name: &str,
    spec: crate::crd::BenchmarkRunSpec,
    label: &str,
) -> Result<BenchmarkRun> {
    let mut child = BenchmarkRun::new(name, spec);
    child.metadata.namespace = parent.namespace();
    child.metadata.owner_references = Some(vec![owner(parent)?]);
    child.metadata.labels = Some([(label.to_string(), parent.name_any())].into());
    Ok(child)
}

/// The first child run a run creates, if it makes any: a matrix's first combination, a
/// search's first probe. (The conformance suite checks they are the parent's; the others
/// differ only in spec and number.)
pub fn child_runs(run: &BenchmarkRun) -> Result<Vec<BenchmarkRun>> {
    let name = run.name_any();
    if let Some(m) = &run.spec.matrix {
        let (planned, _) =
            crate::sweep::plan(&run.spec, m).map_err(|e| Error::Invalid(e.join("; ")))?;
        return planned
            .first()
            .map(|p| {
                let spec = crate::sweep::child_spec(&run.spec, p);
                child_run(
                    run,
                    &crate::sweep::child_name(&name, 0),
                    spec,
                    crate::sweep::MATRIX_LABEL,
                )
            })
            .into_iter()
            .collect();
    }
    if let Some(plan) = crate::search::plan(&run.spec) {
        let plan = plan.map_err(Error::Invalid)?;
        let spec = crate::search::probe_spec(&run.spec, 1, plan.epochs);
        let child = child_run(
            run,
            &crate::search::child_name(&name, 1),
            spec,
            crate::search::SEARCH_LABEL,
        )?;
        return Ok(vec![child]);
    }
    Ok(vec![])
}

fn base_labels(run: &BenchmarkRun) -> BTreeMap<String, String> {
    BTreeMap::from([
        (RUN_LABEL.to_string(), run.name_any()),
        ("app.kubernetes.io/name".into(), "benchrun-worker".into()),
        ("app.kubernetes.io/managed-by".into(), MANAGER.into()),
    ])
}

/// The workload as the workers read it: the spec's, with the credentials directory pointing
/// at the mounted Secret when the run has one and the workload names none, and the CA file at
/// the mounted `caRef` key (validation refuses a workload that names its own with `caRef`).
pub fn worker_workload(run: &BenchmarkRun) -> benchrun_api::Workload {
    let mut w = run.spec.workload.clone();
    if run.spec.secret_ref.is_some() && w.storage.credentials_dir.is_none() && !is_local(&w) {
        w.storage.credentials_dir = Some(CREDENTIALS_DIR.into());
    }
    if run.spec.ca_ref.is_some() && !is_local(&w) {
        w.storage.tls.ca_file = Some(TLS_CA_FILE.into());
    }
    w
}

fn is_local(w: &benchrun_api::Workload) -> bool {
    w.target_uri().map(|u| u.is_local()).unwrap_or(false)
}

/// The ConfigMap holding the workload every worker runs.
pub fn workload_config_map(run: &BenchmarkRun) -> Result<ConfigMap> {
    let yaml = serde_yaml::to_string(&worker_workload(run))
        .map_err(|e| Error::Invalid(format!("workload does not serialize: {e}")))?;
    Ok(ConfigMap {
        metadata: meta(run, workload_cm_name(&run.name_any()))?,
        data: Some(BTreeMap::from([("workload.yaml".to_string(), yaml)])),
        ..Default::default()
    })
}

/// The run's (initially empty) result ConfigMap.
pub fn result_config_map(run: &BenchmarkRun) -> Result<ConfigMap> {
    Ok(ConfigMap {
        metadata: meta(run, result_cm_name(&run.name_any()))?,
        data: Some(BTreeMap::new()),
        ..Default::default()
    })
}

/// A worker's result object: `key` holds `gz` (gzip-compressed JSON) in `binaryData`; labelled
/// with the run, the worker and `kind` (`RESULT_SUMMARY` or `RESULT_REJECTED`) so that the
/// operator can list what is persisted without reading the bodies.
pub fn worker_result_config_map(
    run: &BenchmarkRun,
    worker: &str,
    kind: &str,
    key: &str,
    gz: Vec<u8>,
) -> Result<ConfigMap> {
    let name = if kind == RESULT_REJECTED {
        rejected_cm_name(&run.name_any(), worker)
    } else {
        worker_result_cm_name(&run.name_any(), worker)
    };
    let mut metadata = meta(run, name)?;
    if let Some(l) = metadata.labels.as_mut() {
        l.insert(WORKER_LABEL.into(), worker.into());
        l.insert(RESULT_LABEL.into(), kind.into());
    }
    Ok(ConfigMap {
        metadata,
        binary_data: Some(BTreeMap::from([(
            key.to_string(),
            k8s_openapi::ByteString(gz),
        )])),
        ..Default::default()
    })
}

/// The Secret holding the run's worker token, mounted into every worker.
pub fn token_secret(run: &BenchmarkRun, token: &str) -> Result<Secret> {
    Ok(Secret {
        metadata: meta(run, token_secret_name(run))?,
        string_data: Some(BTreeMap::from([("token".to_string(), token.to_string())])),
        type_: Some("Opaque".into()),
        ..Default::default()
    })
}

/// A worker's own claim from `volume.claimTemplate`.
pub fn worker_claim(run: &BenchmarkRun, worker: &str) -> Result<Option<PersistentVolumeClaim>> {
    let Some(tpl) = run
        .spec
        .volume
        .as_ref()
        .and_then(|v| v.claim_template.clone())
    else {
        return Ok(None);
    };
    Ok(Some(PersistentVolumeClaim {
        metadata: meta(run, claim_name(&run.name_any(), worker))?,
        spec: Some(tpl),
        ..Default::default()
    }))
}

/// Whether the run's claims are raw block devices (`volumeMode: Block` in the template): the
/// worker gets the device at the target's path (`volumeDevices`), not a mounted file system.
pub fn is_block_claim(run: &BenchmarkRun) -> bool {
    run.spec
        .volume
        .as_ref()
        .and_then(|v| v.claim_template.as_ref())
        .and_then(|t| t.volume_mode.as_deref())
        == Some("Block")
}

/// Where the data volume is mounted (or, for a Block claim, where its device appears):
/// `volume.mountPath`, else the target's path.
fn data_mount_path(run: &BenchmarkRun) -> Option<String> {
    let v = run.spec.volume.as_ref()?;
    if let Some(p) = &v.mount_path {
        return Some(p.clone());
    }
    match run.spec.workload.target_uri() {
        Ok(TargetUri::File { root }) | Ok(TargetUri::Direct { root }) => {
            Some(root.to_string_lossy().into_owned())
        }
        _ => Some("/data".into()),
    }
}

/// A node affinity that pins the pod to `node` through the scheduler (as DaemonSets do), so
/// that a missing claim or a taint still shows up as a PodScheduled condition; `nodeName`
/// would bypass the scheduler and leave the pod waiting silently.
fn pin_to_node(user: Option<Affinity>, node: &str) -> Affinity {
    let mut a = user.unwrap_or_default();
    let mut na: NodeAffinity = a.node_affinity.take().unwrap_or_default();
    na.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.to_string()]),
            }]),
            ..Default::default()
        }],
    });
    a.node_affinity = Some(na);
    a
}

/// One worker pod: non-root, read-only root filesystem, no capabilities, no API token.
pub fn worker_pod(run: &BenchmarkRun, worker: &WorkerStatus, default_image: &str) -> Result<Pod> {
    let spec = &run.spec;
    let mut metadata = meta(run, pod_name(&run.name_any(), &worker.name))?;
    if let Some(l) = metadata.labels.as_mut() {
        l.insert(WORKER_LABEL.into(), worker.name.clone());
    }
    let mut storage = worker_storage(run, worker);
    let volumes = std::mem::take(&mut storage.volumes);
    let container = worker_container(run, worker, default_image, storage);
    let affinity = match &worker.node {
        Some(node) if spec.workers.per_node() => {
            Some(pin_to_node(spec.workers.affinity.clone(), node))
        }
        _ => spec.workers.affinity.clone(),
    };
    Ok(Pod {
        metadata,
        spec: Some(PodSpec {
            containers: vec![container],
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            affinity,
            node_selector: spec.workers.node_selector.clone(),
            tolerations: spec.workers.tolerations.clone(),
            image_pull_secrets: spec.workers.image_pull_secrets.clone(),
            termination_grace_period_seconds: Some(10),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(WORKER_UID),
                run_as_group: Some(WORKER_UID),
                fs_group: Some(WORKER_UID),
                // RuntimeDefault unless the run asks for another (held to the policy).
                seccomp_profile: Some(spec.workers.seccomp_profile.clone().unwrap_or(
                    SeccompProfile {
                        type_: "RuntimeDefault".into(),
                        localhost_profile: None,
                    },
                )),
                ..Default::default()
            }),
            volumes: Some(volumes),
            ..Default::default()
        }),
        status: None,
    })
}

/// The operator's default pull secrets (`--worker-image-pull-secret`) for a worker pod whose
/// run names none (`spec.workers.imagePullSecrets`, which wins whole, as a pod's own list).
pub fn default_pull_secrets(pod: &mut Pod, names: &[String]) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if spec.image_pull_secrets.is_none() && !names.is_empty() {
        spec.image_pull_secrets = Some(
            names
                .iter()
                .map(|n| k8s_openapi::api::core::v1::LocalObjectReference { name: n.clone() })
                .collect(),
        );
    }
}

/// What a worker's container mounts: its workload, token, a scratch /tmp, the run's
/// credentials (as env and files) and the data volume (a mount, or a raw device).
struct WorkerStorage {
    volumes: Vec<Volume>,
    mounts: Vec<VolumeMount>,
    devices: Vec<VolumeDevice>,
    env_from: Option<Vec<EnvFromSource>>,
}

fn worker_storage(run: &BenchmarkRun, worker: &WorkerStatus) -> WorkerStorage {
    let name = run.name_any();
    let spec = &run.spec;
    let mut volumes = vec![
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: workload_cm_name(&name),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "token".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(token_secret_name(run)),
                ..Default::default()
            }),
            ..Default::default()
        },
        // The root filesystem is read-only; anything that wants a temp file gets this.
        Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    ];
    let mut devices: Vec<VolumeDevice> = vec![];
    let mut mounts = vec![
        VolumeMount {
            name: "config".into(),
            mount_path: CONFIG_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        },
        VolumeMount {
            name: "token".into(),
            mount_path: TOKEN_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        },
        VolumeMount {
            name: "tmp".into(),
            mount_path: "/tmp".into(),
            ..Default::default()
        },
    ];
    let mut env_from = None;
    if let Some(s) = &spec.secret_ref {
        // As env (AWS_ACCESS_KEY_ID, ...) and as files. The env reference is not optional: a
        // missing Secret stops the container with CreateContainerConfigError naming it, which
        // the reconciler turns into a condition at once. The volume is optional so that it
        // does not hold the pod in ContainerCreating first.
        env_from = Some(vec![EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: s.name.clone(),
                optional: Some(false),
            }),
            ..Default::default()
        }]);
        volumes.push(Volume {
            name: "credentials".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(s.name.clone()),
                optional: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: "credentials".into(),
            mount_path: CREDENTIALS_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    if let Some(ca) = &spec.ca_ref {
        volumes.push(ca_volume(ca));
        mounts.push(VolumeMount {
            name: "tls-ca".into(),
            mount_path: TLS_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    if let (Some(v), Some(path)) = (&spec.volume, data_mount_path(run)) {
        let mut vol = Volume {
            name: "data".into(),
            ..Default::default()
        };
        if let Some(c) = &v.claim_name {
            vol.persistent_volume_claim = Some(PersistentVolumeClaimVolumeSource {
                claim_name: existing_claim(c, &worker.name),
                read_only: None,
            });
        } else if v.claim_template.is_some() {
            vol.persistent_volume_claim = Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&name, &worker.name),
                read_only: None,
            });
        } else if let Some(e) = &v.empty_dir {
            vol.empty_dir = Some(e.clone());
        } else if let Some(h) = &v.host_path {
            vol.host_path = Some(h.clone());
        }
        volumes.push(vol);
        if is_block_claim(run) {
            // A raw device: the worker opens it at the target's path (fio's filename=/dev/..).
            devices.push(VolumeDevice {
                name: "data".into(),
                device_path: path,
            });
        } else {
            mounts.push(VolumeMount {
                name: "data".into(),
                mount_path: path,
                ..Default::default()
            });
        }
    }
    WorkerStorage {
        volumes,
        mounts,
        devices,
        env_from,
    }
}

/// The volume of the run's `caRef`: that one key, as the file `ca.crt`. Optional, so a missing
/// object or key does not hold the pod in ContainerCreating: the worker then stops at once
/// with "storage.tls.caFile: cannot read the CA file ...", reported in the run's status.
fn ca_volume(ca: &crate::crd::ca::CaRef) -> Volume {
    let file = |key: &str| {
        Some(vec![KeyToPath {
            key: key.to_string(),
            path: "ca.crt".into(),
            ..Default::default()
        }])
    };
    Volume {
        name: "tls-ca".into(),
        secret: ca.secret.as_ref().map(|k| SecretVolumeSource {
            secret_name: Some(k.name.clone()),
            items: file(&k.key),
            optional: Some(true),
            ..Default::default()
        }),
        config_map: ca.config_map.as_ref().map(|k| ConfigMapVolumeSource {
            name: k.name.clone(),
            items: file(&k.key),
            optional: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The worker's one container: the agent, locked down (non-root, read-only root, no
/// capabilities), ready when its agent answers.
fn worker_container(
    run: &BenchmarkRun,
    worker: &WorkerStatus,
    default_image: &str,
    storage: WorkerStorage,
) -> Container {
    let spec = &run.spec;
    let WorkerStorage {
        mounts,
        devices,
        env_from,
        ..
    } = storage;
    // A finished worker keeps its summary until the operator collects it: for as long as the
    // run may last, so an operator outage shorter than the run's timeout loses no result.
    let linger = format!("{}s", spec.deadline().as_secs().max(600));
    Container {
        name: CONTAINER.into(),
        image: Some(
            spec.workers
                .image
                .clone()
                .unwrap_or_else(|| default_image.to_string()),
        ),
        args: Some(worker_args(run, &linger)),
        env: Some(vec![
            EnvVar {
                name: "BENCHRUN_WORKER_ID".into(),
                value: Some(worker.name.clone()),
                ..Default::default()
            },
            EnvVar {
                name: "BENCHRUN_LOG".into(),
                value: Some("info".into()),
                ..Default::default()
            },
            // The agent's `--run-seed`: what every worker writes is keyed by the run (and
            // by its index), so no two workers or runs write the same bytes.
            EnvVar {
                name: RUN_SEED_ENV.into(),
                value: Some(run_seed(run).to_string()),
                ..Default::default()
            },
            // The agent's `--start-timeout`: a worker whose start request never arrives
            // fails saying so (on its status, which names it in the run) instead of waiting
            // for ever; by the run's deadline, past which the run has failed anyway. An
            // environment variable, not a flag, so that an older worker image ignores it.
            EnvVar {
                name: START_TIMEOUT_ENV.into(),
                value: Some(linger.clone()),
                ..Default::default()
            },
        ]),
        env_from,
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: AGENT_PORT as i32,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/readyz".into()),
                port: IntOrString::Int(AGENT_PORT as i32),
                ..Default::default()
            }),
            period_seconds: Some(2),
            ..Default::default()
        }),
        resources: spec.workers.resources.clone(),
        security_context: Some(worker_security_context()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(mounts),
        volume_devices: (!devices.is_empty()).then_some(devices),
        ..Default::default()
    }
}

/// The environment variables of the agent's `--worker-index` and `--workers`.
pub const WORKER_INDEX_ENV: &str = "BENCHRUN_WORKER_INDEX";
/// See [`WORKER_INDEX_ENV`].
pub const WORKERS_ENV: &str = "BENCHRUN_WORKERS";

/// Tell worker `index` of the run's `count` its place: training and checkpoint workloads
/// split the dataset's epochs and the checkpoint's ranks by it. The index is the worker's
/// place in `.status.workers`, fixed once the workers are placed (every pod is created after
/// the list is). Environment variables, which an older worker image ignores.
pub fn set_rank(pod: &mut Pod, index: usize, count: usize) {
    let Some(c) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) else {
        return;
    };
    let env = c.env.get_or_insert_with(Vec::new);
    for (name, value) in [(WORKER_INDEX_ENV, index), (WORKERS_ENV, count)] {
        env.retain(|e| e.name != name);
        env.push(EnvVar {
            name: name.into(),
            value: Some(value.to_string()),
            ..Default::default()
        });
    }
}

/// The environment variable of the agent's `--run-seed`.
pub const RUN_SEED_ENV: &str = "BENCHRUN_RUN_SEED";

/// The seed that keys what the run's workers write (with each one's index): a hash of the
/// run's UID (FNV-1a), the same for every worker of the run and whenever a pod is made again,
/// and another for every run, a run of the same name made again included.
pub fn run_seed(run: &BenchmarkRun) -> u64 {
    let uid = run.metadata.uid.as_deref().unwrap_or_default();
    uid.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// The environment variable of the agent's `--start-timeout`.
pub const START_TIMEOUT_ENV: &str = "BENCHRUN_START_TIMEOUT";

/// The environment variable of the agent's `--stable-by-run`.
pub const STABLE_BY_RUN_ENV: &str = "BENCHRUN_STABLE_BY_RUN";

/// A run of several workers with `stopWhenStable`: the run decides (the operator, from all
/// workers' merged throughput) and stops every worker at one instant, so each agent is told
/// not to stop on its own. An environment variable, so an older worker image ignores it (and
/// stops on its own stability, as before). One worker decides alone, as standalone.
pub fn leave_stability_to_the_run(pod: &mut Pod, run: &BenchmarkRun, workers: usize) {
    if workers < 2 || run.spec.workload.stop_when_stable.is_none() {
        return;
    }
    let containers = pod.spec.iter_mut().flat_map(|s| s.containers.iter_mut());
    for c in containers.filter(|c| c.name == CONTAINER) {
        c.env.get_or_insert_with(Vec::new).push(EnvVar {
            name: STABLE_BY_RUN_ENV.into(),
            value: Some("true".into()),
            ..Default::default()
        });
    }
}

/// The agent's command line. With `spec.oplog`, the run's op-log directory, and the pod's
/// writable scratch `/tmp` (an emptyDir; the root filesystem is read-only) as the spool.
fn worker_args(run: &BenchmarkRun, linger: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "agent",
        "--workload",
        &format!("{CONFIG_DIR}/workload.yaml"),
        "--listen",
        &format!("0.0.0.0:{AGENT_PORT}"),
        "--token-file",
        &format!("{TOKEN_DIR}/token"),
        "--linger",
        linger,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (ns, uid) = (
        run.namespace().unwrap_or_default(),
        run.uid().unwrap_or_default(),
    );
    if let Some(dir) = crate::oplog::run_dir(&run.spec, &ns, &run.name_any(), &uid) {
        args.extend([
            "--oplog-uri".into(),
            dir,
            "--oplog-spool".into(),
            "/tmp".into(),
        ]);
    }
    args
}

/// Every container the operator runs with the worker image: non-root, a read-only root file
/// system, no privilege escalation and no capabilities.
pub fn worker_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BenchmarkRunSpec;

    pub fn run(yaml: &str) -> BenchmarkRun {
        let spec: BenchmarkRunSpec = serde_yaml::from_str(yaml).expect("spec");
        let mut r = BenchmarkRun::new("bench", spec);
        r.metadata.namespace = Some("ns".into());
        r.metadata.uid = Some("uid-1".into());
        r
    }

    const SPEC: &str = r#"
workload:
  target: file:///data/bench
  duration: 5s
  ops: [{op: get}]
workers: {perNode: true, tolerations: [{operator: Exists}]}
volume: {emptyDir: {}}
secretRef: {name: creds}
"#;

    fn worker() -> WorkerStatus {
        WorkerStatus {
            name: "w0".into(),
            pod: "bench-w0".into(),
            node: Some("vm2".into()),
            phase: crate::crd::WorkerPhase::Pending,
            ..Default::default()
        }
    }

    #[test]
    fn only_a_run_of_several_workers_with_stop_when_stable_decides_stability() {
        let by_run = |spec: &str, workers: usize| {
            let r = run(spec);
            let mut p = worker_pod(&r, &worker(), "img:1").unwrap();
            leave_stability_to_the_run(&mut p, &r, workers);
            let env = p.spec.unwrap().containers[0]
                .env
                .clone()
                .unwrap_or_default();
            env.iter()
                .find(|e| e.name == STABLE_BY_RUN_ENV)
                .and_then(|e| e.value.clone())
        };
        let stable = SPEC.replace(
            "  duration: 5s\n",
            "  duration: 5s\n  stopWhenStable: {window: 3s}\n",
        );
        assert_ne!(stable, SPEC);
        assert_eq!(by_run(&stable, 4).as_deref(), Some("true"));
        assert_eq!(by_run(&stable, 1), None, "one worker decides alone");
        assert_eq!(by_run(SPEC, 4), None, "no stopWhenStable");
    }

    #[test]
    fn an_oplog_run_tells_each_agent_its_directory_and_spool() {
        let args = |spec: &str| {
            let p = worker_pod(&run(spec), &worker(), "img:1").unwrap();
            p.spec.unwrap().containers[0].args.clone().unwrap()
        };
        assert!(!args(SPEC).iter().any(|a| a.starts_with("--oplog")));
        let with = args(&format!("{SPEC}oplog: {{uri: file:///data/logs/}}\n"));
        let at = with
            .iter()
            .position(|a| a == "--oplog-uri")
            .expect("--oplog-uri");
        // The run's own directory: namespace, name, UID.
        assert_eq!(with[at + 1], "file:///data/logs/ns/bench/uid-1/");
        let at = with
            .iter()
            .position(|a| a == "--oplog-spool")
            .expect("--oplog-spool");
        // The pod's emptyDir: the only writable place besides the data volume.
        assert_eq!(with[at + 1], "/tmp");
    }

    #[test]
    fn pull_secrets_come_from_the_run_else_the_operator() {
        let names = |p: &Pod| -> Vec<String> {
            p.spec
                .as_ref()
                .and_then(|s| s.image_pull_secrets.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|r| r.name)
                .collect()
        };
        let defaults = ["regcred".to_string()];
        let mut p = worker_pod(&run(SPEC), &worker(), "img:1").unwrap();
        assert!(names(&p).is_empty(), "none unless asked");
        default_pull_secrets(&mut p, &defaults);
        assert_eq!(names(&p), ["regcred"]);
        let own = SPEC.replace(
            "workers: {perNode: true,",
            "workers: {imagePullSecrets: [{name: mine}], perNode: true,",
        );
        let r = run(&own);
        assert_eq!(
            r.spec.workers.image_pull_secrets.as_ref().map(|v| v.len()),
            Some(1),
            "the spec names its own: {own}"
        );
        let mut p = worker_pod(&r, &worker(), "img:1").unwrap();
        default_pull_secrets(&mut p, &defaults);
        assert_eq!(names(&p), ["mine"], "the run's list wins whole");
    }

    #[test]
    fn pod_is_locked_down_and_pinned() {
        let r = run(SPEC);
        let p = worker_pod(&r, &worker(), "img:1").unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("bench-w0"));
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.kind, "BenchmarkRun");
        let spec = p.spec.unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(
            spec.security_context.as_ref().unwrap().run_as_user,
            Some(65532)
        );
        let c = &spec.containers[0];
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(
            sc.capabilities.as_ref().unwrap().drop.as_deref(),
            Some(&["ALL".to_string()][..])
        );
        assert_eq!(c.image.as_deref(), Some("img:1"));
        // 5 s run: the default timeout is 10 min 5 s, and the summary is kept that long.
        let args = c.args.as_ref().unwrap();
        let at = args.iter().position(|a| a == "--linger").expect("--linger");
        assert_eq!(args[at + 1], "605s");
        // The wait for the start is bounded by the same deadline.
        let start_timeout = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == START_TIMEOUT_ENV)
            .and_then(|e| e.value.as_deref());
        assert_eq!(start_timeout, Some("605s"));
        let term = &spec
            .affinity
            .unwrap()
            .node_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms[0];
        assert_eq!(
            term.match_fields.as_ref().unwrap()[0].values.as_deref(),
            Some(&["vm2".to_string()][..])
        );
        let mounts = c.volume_mounts.as_ref().unwrap();
        assert!(mounts
            .iter()
            .any(|m| m.name == "data" && m.mount_path == "/data/bench"));
        assert!(mounts.iter().any(|m| m.mount_path == CREDENTIALS_DIR));
        assert_eq!(
            c.env_from.as_ref().unwrap()[0]
                .secret_ref
                .as_ref()
                .unwrap()
                .name,
            "creds"
        );
        assert!(spec.tolerations.is_some());
    }

    #[test]
    fn a_block_claim_is_a_device_at_the_target_path_not_a_mount() {
        let r = run(r#"
workload:
  target: direct:///dev/benchrun-data
  duration: 5s
  ops: [{op: read}]
  dataset: {prepare: false}
  block: {blockSize: 4KiB, queueDepth: 8}
workers: {perNode: true}
volume:
  claimTemplate:
    volumeMode: Block
    storageClassName: local-block
    accessModes: [ReadWriteOnce]
    resources: {requests: {storage: 1Gi}}
"#);
        assert!(is_block_claim(&r));
        let p = worker_pod(&r, &worker(), "img:1").unwrap();
        let spec = p.spec.unwrap();
        let c = &spec.containers[0];
        let devices = c.volume_devices.as_ref().expect("volumeDevices");
        assert_eq!(devices.len(), 1);
        assert_eq!(
            (devices[0].name.as_str(), devices[0].device_path.as_str()),
            ("data", "/dev/benchrun-data")
        );
        assert!(
            !c.volume_mounts
                .as_ref()
                .unwrap()
                .iter()
                .any(|m| m.name == "data"),
            "a Block claim is never mounted"
        );
        let vol = spec
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == "data")
            .unwrap();
        assert_eq!(
            vol.persistent_volume_claim.unwrap().claim_name,
            "bench-w0-data"
        );
        // Still locked down: no privilege is added for the device.
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.capabilities.as_ref().unwrap().add, None);
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert!(worker_pod(&run(SPEC), &worker(), "img:1")
            .unwrap()
            .spec
            .unwrap()
            .containers[0]
            .volume_devices
            .is_none());
    }

    #[test]
    fn an_existing_claim_is_shared_or_one_per_worker() {
        let claim = |spec: &str| {
            worker_pod(&run(spec), &worker(), "img:1")
                .unwrap()
                .spec
                .unwrap()
                .volumes
                .unwrap()
                .into_iter()
                .find(|v| v.name == "data")
                .and_then(|v| v.persistent_volume_claim)
                .map(|c| c.claim_name)
        };
        let shared = SPEC.replace("volume: {emptyDir: {}}", "volume: {claimName: shared}");
        assert_eq!(claim(&shared).as_deref(), Some("shared"));
        let own = SPEC.replace(
            "volume: {emptyDir: {}}",
            "volume: {claimName: 'data-{worker}'}",
        );
        assert_eq!(claim(&own).as_deref(), Some("data-w0"));
    }

    #[test]
    fn the_seccomp_profile_is_runtime_default_unless_the_run_names_one() {
        let profile = |r: &BenchmarkRun| {
            worker_pod(r, &worker(), "img:1")
                .unwrap()
                .spec
                .unwrap()
                .security_context
                .unwrap()
                .seccomp_profile
                .unwrap()
        };
        assert_eq!(profile(&run(SPEC)).type_, "RuntimeDefault");
        let named = SPEC.replace(
            "workers: {perNode: true,",
            "workers: {seccompProfile: {type: Localhost, localhostProfile: profiles/io-uring.json}, perNode: true,",
        );
        let p = profile(&run(&named));
        assert_eq!(
            (p.type_.as_str(), p.localhost_profile.as_deref()),
            ("Localhost", Some("profiles/io-uring.json"))
        );
    }

    #[test]
    fn token_is_stable_and_keyed() {
        let a = worker_token(b"key", "uid-1");
        assert_eq!(a, worker_token(b"key", "uid-1"));
        assert_ne!(a, worker_token(b"other", "uid-1"));
        assert_ne!(a, worker_token(b"key", "uid-2"));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn the_ca_ref_key_is_mounted_read_only_and_named_as_the_ca_file() {
        let s3 = SPEC
            .replace("file:///data/bench", "s3://bkt/p")
            .replace("volume: {emptyDir: {}}\n", "");
        for (ca_ref, secret) in [
            ("caRef: {secret: {name: minio-ca, key: public.crt}}", true),
            (
                "caRef: {configMap: {name: minio-ca, key: public.crt}}",
                false,
            ),
        ] {
            let r = run(&format!("{s3}{ca_ref}\n"));
            let spec = worker_pod(&r, &worker(), "img:1").unwrap().spec.unwrap();
            let vol = spec
                .volumes
                .unwrap()
                .into_iter()
                .find(|v| v.name == "tls-ca")
                .expect("the CA volume");
            let items = match (vol.secret, vol.config_map) {
                (Some(s), None) if secret => {
                    assert_eq!(s.secret_name.as_deref(), Some("minio-ca"));
                    assert_eq!(s.optional, Some(true));
                    s.items
                }
                (None, Some(c)) if !secret => {
                    assert_eq!(c.name, "minio-ca");
                    assert_eq!(c.optional, Some(true));
                    c.items
                }
                other => panic!("{ca_ref}: wrong source {other:?}"),
            };
            let items = items.unwrap();
            assert_eq!(
                (items[0].key.as_str(), items[0].path.as_str()),
                ("public.crt", "ca.crt")
            );
            let mounts = spec.containers[0].volume_mounts.clone().unwrap();
            let m = mounts.iter().find(|m| m.name == "tls-ca").unwrap();
            assert_eq!((m.mount_path.as_str(), m.read_only), (TLS_DIR, Some(true)));
            assert_eq!(format!("{TLS_DIR}/{}", items[0].path), TLS_CA_FILE);
            let cm = workload_config_map(&r).unwrap();
            let text = &cm.data.unwrap()["workload.yaml"];
            let w = benchrun_api::Workload::from_yaml(text).unwrap();
            assert_eq!(
                w.storage.tls.ca_file.as_deref(),
                Some(TLS_CA_FILE),
                "{text}"
            );
        }
        // Without caRef: no volume, no CA file.
        let r = run(&s3);
        let spec = worker_pod(&r, &worker(), "img:1").unwrap().spec.unwrap();
        assert!(!spec.volumes.unwrap().iter().any(|v| v.name == "tls-ca"));
        assert!(worker_workload(&r).storage.tls.ca_file.is_none());
    }

    #[test]
    fn workload_config_map_points_credentials_at_the_secret() {
        let r = run(&SPEC.replace("file:///data/bench", "s3://bkt/p"));
        let cm = workload_config_map(&r).unwrap();
        let text = &cm.data.unwrap()["workload.yaml"];
        assert!(text.contains(CREDENTIALS_DIR), "{text}");
        // Local targets have no credentials to read.
        let cm = workload_config_map(&run(SPEC)).unwrap();
        assert!(!cm.data.unwrap()["workload.yaml"].contains(CREDENTIALS_DIR));
    }

    #[test]
    fn a_worker_pod_knows_its_rank() {
        let mut p = worker_pod(&run(SPEC), &worker(), "img:1").unwrap();
        set_rank(&mut p, 1, 3);
        set_rank(&mut p, 2, 3);
        let env = p.spec.unwrap().containers[0].env.clone().unwrap();
        let get = |n: &str| {
            let v: Vec<_> = env.iter().filter(|e| e.name == n).collect();
            assert_eq!(v.len(), 1, "{n} once");
            v[0].value.clone().unwrap()
        };
        assert_eq!(get(WORKER_INDEX_ENV), "2");
        assert_eq!(get(WORKERS_ENV), "3");
    }

    #[test]
    fn every_worker_of_a_run_gets_the_runs_seed_and_another_run_another() {
        let seed_of = |r: &BenchmarkRun, w: &WorkerStatus| {
            let p = worker_pod(r, w, "img:1").unwrap();
            let env = p.spec.unwrap().containers[0].env.clone().unwrap();
            let v: Vec<_> = env.iter().filter(|e| e.name == RUN_SEED_ENV).collect();
            assert_eq!(v.len(), 1, "{RUN_SEED_ENV} once");
            v[0].value.clone().unwrap()
        };
        let a = run(SPEC);
        let w1 = WorkerStatus {
            name: "w1".into(),
            pod: "bench-w1".into(),
            ..worker()
        };
        assert_eq!(seed_of(&a, &worker()), seed_of(&a, &w1));
        assert_eq!(seed_of(&a, &worker()), run_seed(&a).to_string());
        // The same name made again is another run: another UID, another seed.
        let mut b = run(SPEC);
        b.metadata.uid = Some("uid-2".into());
        assert_ne!(seed_of(&a, &worker()), seed_of(&b, &worker()));
    }
}
