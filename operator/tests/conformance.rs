//! The conformance suite every kind of run passes, as every `object_store` backend passes one
//! suite: benchrun's promises are checked per [`RunKind`], so a capability cannot bring its
//! own code for a concern and quietly break a promise there.
//!
//! The kinds come from [`RunKind::ALL`], the list the operator classifies runs by; [`case`] is
//! an exhaustive `match`, so a kind added without a case here does not compile the suite.
//! Each case is a shipped example (users' manifests are the suite's), and each test below
//! checks one promise for every kind, collecting every kind that breaks it before failing:
//! - every case is of its kind and is accepted;
//! - owns only its own: every object the operator builds for the kind is owned by the run (a
//!   controller reference to its UID), named under the run's name, and labelled with it; the
//!   deletions themselves go through one function with a UID precondition (enforced by
//!   `tests/lint/deletes.py`);
//! - bad input refused naming the field: for each kind, a key the kind would ignore or a
//!   value that cannot mean anything is refused, the message naming the field;
//! - writes nothing twice: `conformance_writes.rs` runs each kind's write path on two workers
//!   sharing one directory and hashes every 512-byte sector.
//!
//! What only a cluster can show (an operator killed mid-run, a worker that stops answering, a
//! foreign object under every name a run can produce) is in the cluster tests named in
//! docs/GUARANTEES.md.

use benchrun_operator::crd::kind::RunKind;
use benchrun_operator::crd::schedule::BenchmarkSchedule;
use benchrun_operator::crd::{BenchmarkRun, WorkerStatus};
use benchrun_operator::schedule::cron::Schedule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

const UID: &str = "0b5e7d2c-1f6a-4c43-9a2e-4c8f0d7f1a01";
const NS: &str = "bench";

/// One kind's case: the shipped example that is its manifest, and the inputs it must refuse.
struct Case {
    /// A file under examples/: a BenchmarkRun, or for [`RunKind::Scheduled`] a
    /// BenchmarkSchedule whose run template is the run.
    example: &'static str,
    /// Changes to the example's `spec` (a YAML mapping merged into it, a `null` removing a
    /// key) that must be refused, each with the field path the message must name.
    refused: &'static [(&'static str, &'static str)],
}

/// The case of each kind. Exhaustive on purpose: a new kind must bring its case.
fn case(kind: RunKind) -> Case {
    match kind {
        RunKind::Object => Case {
            example: "benchmarkrun-s3-get.yaml",
            refused: &[
                // A training key on a run that does not train.
                ("{workload: {ops: [{op: read}]}}", "block"),
                (
                    "{workload: {stopWhenStable: {window: 2m}}}",
                    "stopWhenStable",
                ),
            ],
        },
        RunKind::VolumeFile => Case {
            example: "benchmarkrun-pvc-file.yaml",
            refused: &[("{workload: {block: {precondition: 1000d}}}", "precondition")],
        },
        RunKind::VolumeDirect => Case {
            example: "benchmarkrun-pvc-direct.yaml",
            refused: &[(
                "{workload: {stopWhenStable: {window: 5m}}}",
                "stopWhenStable",
            )],
        },
        RunKind::VolumeBlock => Case {
            example: "benchmarkrun-block-claim.yaml",
            refused: &[("{workload: {block: {precondition: 1000d}}}", "precondition")],
        },
        RunKind::Matrix => Case {
            example: "benchmarkrun-sweep-range-engine.yaml",
            refused: &[("{oplog: {uri: 's3://benchrun-bucket/oplogs/'}}", "oplog")],
        },
        RunKind::Search => Case {
            example: "benchmarkrun-training-search.yaml",
            refused: &[("{workload: {rateLimit: 100}}", "rateLimit")],
        },
        RunKind::Training => Case {
            example: "benchmarkrun-training-unet3d.yaml",
            refused: &[
                ("{workload: {rateLimit: 100}}", "rateLimit"),
                ("{workload: {errorBudget: {maxErrors: 10}}}", "errorBudget"),
            ],
        },
        RunKind::Checkpoint => Case {
            example: "benchmarkrun-checkpoint.yaml",
            refused: &[
                ("{workload: {rateLimit: 100}}", "rateLimit"),
                (
                    "{workload: {checkpoint: {restoreShift: 8}}}",
                    "restoreShift",
                ),
            ],
        },
        RunKind::ControlPlane => Case {
            example: "benchmarkrun-control-plane.yaml",
            refused: &[("{controlPlane: {expandedSize: 2Gi}}", "expandedSize")],
        },
        RunKind::ControlPlaneUnderLoad => Case {
            example: "benchmarkrun-control-plane-under-load.yaml",
            refused: &[("{matrix: {parameters: {concurrency: [1, 2]}}}", "matrix")],
        },
        // A schedule's changes are to the schedule's spec (its run template under
        // `runTemplate`), judged as the schedule controller judges them.
        RunKind::Scheduled => Case {
            example: "benchmarkschedule-nightly.yaml",
            refused: &[
                ("{startingDeadlineSeconds: 0}", "startingDeadlineSeconds"),
                (
                    "{runTemplate: {ttlSecondsAfterFinished: 3600}}",
                    "ttlSecondsAfterFinished",
                ),
                ("{runTemplate: {workload: {rateLimit: 0}}}", "rateLimit"),
            ],
        },
    }
}

fn example(name: &str) -> serde_yaml::Value {
    let path = format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The run of `kind`'s case, as the API server would hand it to the operator: named, in a
/// namespace, with a UID (and, for a schedule's run, owned by the schedule).
fn run_of(kind: RunKind, patch: Option<&str>) -> BenchmarkRun {
    let c = case(kind);
    let mut doc = example(c.example);
    if kind == RunKind::Scheduled {
        if let Some(p) = patch {
            merge(
                &mut doc["spec"],
                serde_yaml::from_str(p).expect("a patch is YAML"),
            );
        }
    }
    let (name, mut spec, owners) = if kind == RunKind::Scheduled {
        let s: BenchmarkSchedule = serde_yaml::from_value(doc).expect("the schedule example");
        let owner = OwnerReference {
            api_version: "benchrun.dev/v1alpha1".into(),
            kind: "BenchmarkSchedule".into(),
            name: s.name_any(),
            uid: "5c4d1b7e-schedule".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let spec = serde_yaml::to_value(&s.spec.run_template).expect("template");
        (format!("{}-29000000", s.name_any()), spec, vec![owner])
    } else {
        let name = doc["metadata"]["name"]
            .as_str()
            .expect("the example's name")
            .to_string();
        (name, doc["spec"].clone(), vec![])
    };
    if let Some(p) = patch.filter(|_| kind != RunKind::Scheduled) {
        merge(&mut spec, serde_yaml::from_str(p).expect("a patch is YAML"));
    }
    let spec = serde_yaml::from_value(spec)
        .unwrap_or_else(|e| panic!("{kind}: the spec{} parses: {e}", describe(patch)));
    let mut run = BenchmarkRun::new(&name, spec);
    run.metadata = ObjectMeta {
        name: Some(name),
        namespace: Some(NS.into()),
        uid: Some(UID.into()),
        owner_references: Some(owners).filter(|o| !o.is_empty()),
        ..Default::default()
    };
    run
}

fn describe(patch: Option<&str>) -> String {
    patch.map(|p| format!(" with {p}")).unwrap_or_default()
}

/// `patch` merged into `into`, mappings key by key; `null` removes a key.
fn merge(into: &mut serde_yaml::Value, patch: serde_yaml::Value) {
    match (into, patch) {
        (serde_yaml::Value::Mapping(a), serde_yaml::Value::Mapping(b)) => {
            for (k, v) in b {
                if v.is_null() {
                    a.remove(&k);
                } else if let Some(slot) = a.get_mut(&k) {
                    merge(slot, v);
                } else {
                    a.insert(k, v);
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Runs `check` on every kind and fails once with every kind that broke the promise.
fn for_every_kind(promise: &str, check: impl Fn(RunKind) -> Result<(), String>) {
    let broken: Vec<String> = RunKind::ALL
        .iter()
        .filter_map(|&k| check(k).err().map(|e| format!("{k}: {e}")))
        .collect();
    assert!(
        broken.is_empty(),
        "{promise}: broken by {} of {} kinds:\n{}",
        broken.len(),
        RunKind::ALL.len(),
        broken.join("\n")
    );
}

#[test]
fn every_case_is_of_its_kind_and_accepted() {
    for_every_kind("each case is a valid run of its kind", |kind| {
        let run = run_of(kind, None);
        let got = RunKind::of(&run);
        if got != kind {
            return Err(format!("{} is a {got} run", case(kind).example));
        }
        let errs = benchrun_operator::validate::run(&run.spec, &run.name_any());
        if !errs.is_empty() {
            return Err(format!("{} refused: {errs:?}", case(kind).example));
        }
        Ok(())
    });
}

/// Everything the operator says is wrong with `kind`'s case changed by `patch`: the run's
/// validation, and for a schedule's run the schedule's too.
fn refusals(kind: RunKind, patch: &str) -> Vec<String> {
    let run = run_of(kind, Some(patch));
    let mut errs = benchrun_operator::validate::run(&run.spec, &run.name_any());
    if kind == RunKind::Scheduled {
        let mut doc = example(case(kind).example);
        merge(
            &mut doc["spec"],
            serde_yaml::from_str(patch).expect("a patch is YAML"),
        );
        let s: BenchmarkSchedule = serde_yaml::from_value(doc).expect("the schedule parses");
        let sched = Schedule::parse(&s.spec.schedule, s.spec.time_zone.as_deref())
            .expect("the example's cron parses");
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-07T00:00:00Z")
            .expect("a time")
            .to_utc();
        if let Err(e) = benchrun_operator::validate::schedule(&s.spec, &sched, now) {
            errs.push(format!("{}: {}", e.field, e.message));
        }
    }
    errs
}

#[test]
fn every_kind_refuses_what_it_cannot_use_naming_the_field() {
    for_every_kind("bad input is refused naming the field", |kind| {
        let c = case(kind);
        if c.refused.is_empty() {
            return Err("the case names no input the kind must refuse".into());
        }
        for (patch, field) in c.refused {
            let errs = refusals(kind, patch);
            if !errs.iter().any(|e| e.contains(field)) {
                return Err(format!(
                    "{patch} was not refused naming `{field}`: {}",
                    if errs.is_empty() {
                        "accepted".to_string()
                    } else {
                        format!("{errs:?}")
                    }
                ));
            }
        }
        Ok(())
    });
}

/// Every object a run of this kind creates, as the operator builds it.
fn objects_built(run: &BenchmarkRun) -> Result<Vec<(String, ObjectMeta)>, String> {
    use benchrun_operator::{control_plane::objects, netpol, resources};
    fn e(what: &'static str) -> impl Fn(benchrun_operator::Error) -> String {
        move |err| format!("{what}: {err}")
    }
    let mut out = Vec::new();
    let kind = RunKind::of(run);
    if kind.has_workers() {
        let worker: WorkerStatus = serde_json::from_value(
            serde_json::json!({"name": "w0", "pod": "p", "phase": "Pending"}),
        )
        .expect("worker status");
        let pod = resources::worker_pod(run, &worker, "benchrun-worker:test").map_err(e("pod"))?;
        out.push(("Pod".into(), pod.metadata));
        let cm = resources::workload_config_map(run).map_err(e("workload ConfigMap"))?;
        out.push(("ConfigMap".into(), cm.metadata));
        let secret = resources::token_secret(run, "t").map_err(e("token Secret"))?;
        out.push(("Secret".into(), secret.metadata));
        if let Some(claim) = resources::worker_claim(run, "w0").map_err(e("claim"))? {
            out.push(("PersistentVolumeClaim".into(), claim.metadata));
        }
        let ingress = netpol::WorkerIngress {
            operator_namespace: "benchrun-system".into(),
            operator_labels: [("app".to_string(), "benchrun".to_string())].into(),
            extra_peers: vec![],
        };
        let np = netpol::worker_policy(run, &ingress).map_err(e("NetworkPolicy"))?;
        out.push(("NetworkPolicy".into(), np.metadata));
    }
    let result = resources::result_config_map(run).map_err(e("result ConfigMap"))?;
    out.push(("ConfigMap".into(), result.metadata));
    if let Some(cp) = &run.spec.control_plane {
        for i in [0, 1] {
            let claim = objects::claim(run, cp, i).map_err(e("control-plane claim"))?;
            out.push(("PersistentVolumeClaim".into(), claim.metadata));
            let clone = objects::clone_claim(run, cp, i).map_err(e("clone claim"))?;
            out.push(("PersistentVolumeClaim".into(), clone.metadata));
            let snap = objects::snapshot(run, cp, i).map_err(e("VolumeSnapshot"))?;
            out.push(("VolumeSnapshot".into(), snap.metadata));
            let pod = objects::pod(run, "benchrun-worker:test", i).map_err(e("probe pod"))?;
            out.push(("Pod".into(), pod.metadata));
        }
    }
    for child in resources::child_runs(run).map_err(e("child run"))? {
        out.push(("BenchmarkRun".into(), child.metadata));
    }
    Ok(out)
}

#[test]
fn every_object_a_kind_creates_is_the_runs() {
    for_every_kind("owns only its own", |kind| {
        let run = run_of(kind, None);
        let name = run.name_any();
        let built = objects_built(&run)?;
        if built.is_empty() {
            return Err("builds no object".into());
        }
        for (what, meta) in built {
            let n = meta.name.clone().unwrap_or_default();
            let owners = meta.owner_references.unwrap_or_default();
            let controller = owners
                .iter()
                .filter(|o| o.controller == Some(true))
                .collect::<Vec<_>>();
            if controller.len() != 1 || controller[0].uid != UID {
                return Err(format!(
                    "{what} {n} is not controlled by the run's UID: {owners:?}"
                ));
            }
            if !n.starts_with(&name) {
                return Err(format!("{what} {n} is not named under the run {name}"));
            }
            if meta.namespace.as_deref() != Some(NS) {
                return Err(format!("{what} {n} is outside the run's namespace"));
            }
        }
        Ok(())
    });
}
