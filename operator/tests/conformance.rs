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
//! - writes nothing twice: each kind's write path run by two workers of one run sharing one
//!   directory (raw devices: one each), every 512-byte sector hashed.
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
    /// How a run of the kind writes, for "writes nothing twice".
    writes: Writes,
}

/// How a kind's write path is run by two workers of one run. Workloads are small (a few MiB)
/// so that the suite stays quick; `{dir}` is a directory both workers share, `{w}` the
/// worker's index (for what agents keep apart: each worker's own claim).
enum Writes {
    /// The engine: this workload, on `{dir}`.
    Engine(&'static str),
    /// The engine on a raw device each (two claims of one class on one array): this workload
    /// with `{dev}` a loop device of the worker's own.
    Devices(&'static str),
    /// Training: both workers prepare one dataset in `{dir}` (each its share).
    Training(&'static str),
    /// Checkpoint: both workers save their ranks' shards in `{dir}`.
    Checkpoint(&'static str),
    /// The control plane: the first-I/O probe's block and the busy hold's file, per claim.
    Probes,
    /// Its runs are of another kind (matrix combinations, search probes, a schedule's runs),
    /// whose case checks what they write.
    Runs,
}

/// The case of each kind. Exhaustive on purpose: a new kind must bring its case.
fn case(kind: RunKind) -> Case {
    match kind {
        RunKind::Object => Case {
            example: "benchmarkrun-s3-get.yaml",
            refused: &[
                // A block op on a run without `block`; a stability window longer than the run.
                ("{workload: {ops: [{op: read}]}}", "block"),
                (
                    "{workload: {stopWhenStable: {window: 2m}}}",
                    "stopWhenStable",
                ),
            ],
            writes: Writes::Engine("target: file://{dir}\ntotalOps: 40\nconcurrency: 2\nobjectSize: 64KiB\nops: [{op: put}]\ndataset: {prefix: w{w}/, objects: 20, size: 64KiB, cleanup: false}\n"),
        },
        RunKind::VolumeFile => Case {
            example: "benchmarkrun-pvc-file.yaml",
            refused: &[("{workload: {block: {precondition: 1000d}}}", "precondition")],
            writes: Writes::Engine("target: file://{dir}\ntotalOps: 400\nconcurrency: 2\nops: [{op: write}]\ndataset: {prefix: w{w}/, cleanup: false}\nblock: {blockSize: 4KiB, queueDepth: 4, fileSize: 1MiB, precondition: 100ms, dropCache: false}\n"),
        },
        RunKind::VolumeDirect => Case {
            example: "benchmarkrun-pvc-direct.yaml",
            refused: &[(
                "{workload: {stopWhenStable: {window: 5m}}}",
                "stopWhenStable",
            )],
            writes: Writes::Engine("target: direct://{dir}\ntotalOps: 400\nconcurrency: 2\nops: [{op: write}]\ndataset: {prefix: w{w}/, cleanup: false}\nblock: {blockSize: 4KiB, queueDepth: 4, fileSize: 1MiB, dropCache: false}\n"),
        },
        RunKind::VolumeBlock => Case {
            example: "benchmarkrun-block-claim.yaml",
            refused: &[("{workload: {block: {precondition: 1000d}}}", "precondition")],
            writes: Writes::Devices("target: direct://{dev}\ntotalOps: 1000\nconcurrency: 2\nops: [{op: write}]\ndataset: {prepare: false}\nblock: {blockSize: 4KiB, queueDepth: 8, dropCache: false}\n"),
        },
        RunKind::Matrix => Case {
            example: "benchmarkrun-sweep-range-engine.yaml",
            refused: &[("{oplog: {uri: 's3://benchrun-bucket/oplogs/'}}", "oplog")],
            writes: Writes::Runs,
        },
        RunKind::Search => Case {
            example: "benchmarkrun-training-search.yaml",
            refused: &[("{workload: {rateLimit: 100}}", "rateLimit")],
            writes: Writes::Runs,
        },
        RunKind::Training => Case {
            example: "benchmarkrun-training-unet3d.yaml",
            refused: &[
                ("{workload: {rateLimit: 100}}", "rateLimit"),
                ("{workload: {errorBudget: {maxErrors: 10}}}", "errorBudget"),
            ],
            writes: Writes::Training("target: file://{dir}\nops: [{op: get}]\ntraining: {samples: 16, sampleSize: 64KiB, samplesPerFile: 2, computeTime: 1ms, epochs: 1}\n"),
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
            writes: Writes::Checkpoint("target: file://{dir}\nops: [{op: put}]\ncheckpoint: {totalSize: 4MiB, ranks: 4, ranksPerWorker: 2, repeats: 1, mode: save}\n"),
        },
        RunKind::ControlPlane => Case {
            example: "benchmarkrun-control-plane.yaml",
            refused: &[("{controlPlane: {expandedSize: 2Gi}}", "expandedSize")],
            writes: Writes::Probes,
        },
        RunKind::ControlPlaneUnderLoad => Case {
            example: "benchmarkrun-control-plane-under-load.yaml",
            refused: &[("{matrix: {parameters: {concurrency: [1, 2]}}}", "matrix")],
            writes: Writes::Engine("target: file://{dir}\ntotalOps: 40\nconcurrency: 2\nobjectSize: 64KiB\nops: [{op: put}]\ndataset: {prefix: w{w}/, objects: 8, size: 64KiB, cleanup: false}\n"),
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
            writes: Writes::Runs,
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
        if let Err(e) = benchrun_operator::schedule::check::check(&s.spec, &sched, now) {
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
    for child in child_runs(run)? {
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

/// Every regular file under `dir`.
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.is_file() {
                out.push(p);
            }
        }
    }
    out
}

/// What two workers wrote: sectors in all, distinct ones, and where the first repeat was.
struct Written {
    total: usize,
    distinct: usize,
    first_repeat: Option<String>,
}

/// [`Written`] over named blobs (a file's or a device's bytes).
fn sector_counts(blobs: &[(String, Vec<u8>)]) -> Written {
    let mut seen = std::collections::HashMap::new();
    let mut w = Written {
        total: 0,
        distinct: 0,
        first_repeat: None,
    };
    for (name, blob) in blobs {
        for (i, s) in blob.chunks(512).enumerate() {
            if s.iter().all(|b| *b == 0) {
                continue;
            }
            w.total += 1;
            let here = format!("{name} at {}", i * 512);
            match seen.entry(s.to_vec()) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(here);
                }
                std::collections::hash_map::Entry::Occupied(o) => {
                    w.first_repeat
                        .get_or_insert_with(|| format!("{here} repeats {}", o.get()));
                }
            }
        }
    }
    w.distinct = seen.len();
    w
}

/// Every file under `dir`, named relative to it, with its bytes.
fn read_all(dir: &std::path::Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    files(dir)
        .iter()
        .map(|f| {
            let name = f.strip_prefix(dir).unwrap_or(f).display().to_string();
            std::fs::read(f)
                .map(|d| (name, d))
                .map_err(|e| format!("{}: {e}", f.display()))
        })
        .collect()
}

/// A directory on a disk file system (O_DIRECT needs one; tmpfs refuses it).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

fn worker_workload(yaml: &str, dir: &str, dev: &str, w: u32) -> benchrun_worker::Workload {
    let yaml = yaml
        .replace("{dir}", dir)
        .replace("{dev}", dev)
        .replace("{w}", &w.to_string());
    benchrun_worker::Workload::from_yaml(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
}

/// Worker `index` of a two-worker run (the run's seed as the operator draws it from the UID).
fn writer(index: u32) -> benchrun_worker::datagen::Writer {
    benchrun_worker::datagen::Writer {
        run: Some(benchrun_operator::resources::run_seed(&run_of(
            RunKind::Object,
            None,
        ))),
        index,
        count: 2,
    }
}

async fn engine(w: benchrun_worker::Workload, index: u32) -> benchrun_worker::Engine {
    benchrun_worker::Engine::open(
        w,
        std::sync::Arc::new(benchrun_worker::Metrics::new()),
        &format!("w{index}"),
    )
    .await
    .expect("engine")
    .with_writer(writer(index))
}

async fn engine_run(w: benchrun_worker::Workload, index: u32) -> Result<(), String> {
    let e = engine(w, index).await;
    let ds = e.prepare().await.map_err(|e| e.to_string())?;
    let s = e
        .run(&ds, None, std::future::pending())
        .await
        .map_err(|e| e.to_string())?;
    let errors: u64 = s.ops.values().map(|o| o.errors).sum();
    if errors > 0 {
        return Err(format!("{errors} errors: {:?}", s.ops));
    }
    Ok(())
}

/// Run `kind`'s write path on two workers: what they wrote.
async fn written_by_two_workers(kind: RunKind) -> Result<Written, String> {
    let dir = scratch();
    let d = dir.path().display().to_string();
    match case(kind).writes {
        Writes::Engine(yaml) => {
            for w in 0..2 {
                engine_run(worker_workload(yaml, &d, "", w), w).await?;
            }
        }
        Writes::Devices(yaml) => {
            // Each its own backing file (a loop device's is `disk.img` in the directory given).
            let homes: Vec<_> = (0..2).map(|_| scratch()).collect();
            let devices: Vec<_> = homes
                .iter()
                .map(|h| benchrun_test_support::loopdev::Loop::new(h.path(), 8 << 20))
                .collect();
            for (w, lo) in devices.iter().enumerate() {
                let dev = lo.dev.display().to_string();
                engine_run(worker_workload(yaml, &d, &dev, w as u32), w as u32).await?;
            }
            let data: Vec<(String, Vec<u8>)> = devices
                .iter()
                .enumerate()
                .map(|(w, lo)| {
                    std::fs::read(&lo.backing)
                        .map(|d| (format!("worker {w}'s device"), d))
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<_, _>>()?;
            return Ok(sector_counts(&data));
        }
        Writes::Training(yaml) => {
            let mut tasks = vec![];
            for index in 0..2u32 {
                let w = worker_workload(yaml, &d, "", index);
                tasks.push(tokio::spawn(async move {
                    let e = engine(w, index).await;
                    let opts = benchrun_worker::training::Options {
                        worker_id: format!("w{index}"),
                        index,
                        count: 2,
                        oplog: None,
                        prepare_wait: std::time::Duration::from_secs(60),
                        metrics: None,
                    };
                    benchrun_worker::training::run(
                        e.workload(),
                        e.target().clone(),
                        opts,
                        std::future::pending(),
                    )
                    .await
                    .map_err(|e| e.to_string())
                }));
            }
            for t in tasks {
                t.await.map_err(|e| e.to_string())??;
            }
        }
        Writes::Checkpoint(yaml) => {
            let mut tasks = vec![];
            for index in 0..2u32 {
                let w = worker_workload(yaml, &d, "", index);
                tasks.push(tokio::spawn(async move {
                    let e = engine(w, index).await;
                    let opts = benchrun_worker::checkpoint::Options {
                        worker_id: format!("w{index}"),
                        index,
                        count: 2,
                        metrics: None,
                        run_token: Some("2026-12-07T00:00:00Z".into()),
                    };
                    benchrun_worker::checkpoint::run(
                        e.workload(),
                        e.target().clone(),
                        opts,
                        std::future::pending(),
                    )
                    .await
                    .map_err(|e| e.to_string())
                }));
            }
            for t in tasks {
                t.await.map_err(|e| e.to_string())??;
            }
        }
        Writes::Probes => {
            use benchrun_worker::probe;
            let mut blobs: Vec<(String, Vec<u8>)> = vec![];
            for w in 0..2 {
                // The first I/O's block, as two lifecycles' probes write it.
                let mut block = vec![0u8; probe::PROBE_BYTES];
                probe::fresh(&mut block);
                blobs.push((format!("probe {w}'s block"), block));
                // The busy hold's file on each claim (filled, then one I/O).
                let claim = dir.path().join(format!("claim-{w}"));
                std::fs::create_dir_all(&claim).map_err(|e| e.to_string())?;
                let stop = std::sync::atomic::AtomicBool::new(true);
                let io = probe::busy::run(&claim, 1 << 20, 1000, &stop);
                if let Some(e) = io.first_error {
                    return Err(format!("the busy hold: {e}"));
                }
            }
            blobs.extend(read_all(dir.path())?);
            return Ok(sector_counts(&blobs));
        }
        Writes::Runs => unreachable!("checked by the kind of its runs"),
    }
    Ok(sector_counts(&read_all(dir.path())?))
}

/// The runs a run of `kind` makes, for the kinds whose writes are their runs'.
fn runs_made(kind: RunKind) -> Vec<BenchmarkRun> {
    let run = run_of(kind, None);
    if kind == RunKind::Scheduled {
        // A schedule's run is its template's run: the kind without the schedule as owner.
        let mut r = run;
        r.metadata.owner_references = None;
        return vec![r];
    }
    child_runs(&run).expect("child runs")
}

/// The child runs a run makes (matrix combinations, search probes): the first of each.
fn child_runs(run: &BenchmarkRun) -> Result<Vec<BenchmarkRun>, String> {
    [
        benchrun_operator::sweep::first_child(run),
        benchrun_operator::search::first_probe(run),
    ]
    .into_iter()
    .flatten()
    .map(|r| r.map_err(|e| format!("child run: {e}")))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_kind_writes_a_sector_twice() {
    let mut broken = vec![];
    for kind in RunKind::ALL {
        let result = match case(kind).writes {
            Writes::Runs => {
                let runs = runs_made(kind);
                let kinds: Vec<RunKind> = runs.iter().map(RunKind::of).collect();
                match kinds
                    .iter()
                    .find(|k| matches!(case(**k).writes, Writes::Runs))
                {
                    _ if kinds.is_empty() => Err("makes no run to check".to_string()),
                    Some(k) => Err(format!(
                        "its runs are {k} runs, whose writes are checked by nobody"
                    )),
                    // Checked by the case of their kind, below or above in this loop.
                    None => Ok(()),
                }
            }
            _ => match written_by_two_workers(kind).await {
                Ok(w) if w.total == 0 => Err("wrote nothing".to_string()),
                Ok(w) if w.distinct < w.total => Err(format!(
                    "{} of {} sectors written twice; the first: {}",
                    w.total - w.distinct,
                    w.total,
                    w.first_repeat.unwrap_or_default()
                )),
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            },
        };
        if let Err(e) = result {
            broken.push(format!("{kind}: {e}"));
        }
    }
    assert!(
        broken.is_empty(),
        "no sector written twice: broken by {} of {} kinds:\n{}",
        broken.len(),
        RunKind::ALL.len(),
        broken.join("\n")
    );
}
