//! Validation of a run: what the schema cannot say, each problem with the field's path, for the
//! `Valid` condition. The per-feature checks live with their features (thresholds, podfields,
//! baseline, sweep); this module calls them in one fixed order.

use chrono::{DateTime, Utc};

use crate::crd::schedule::{BaselinePolicy, BenchmarkScheduleSpec};
use crate::crd::{BenchmarkRunSpec, MAX_START_DELAY, MAX_THRESHOLDS, MAX_TIMEOUT, MAX_TTL_SECONDS};
use crate::schedule::cron::{Invalid, Schedule};
use crate::{baseline, oplog, podfields, resources, sweep, thresholds};

/// Check what the schema cannot (durations are strings to it): each problem as
/// `spec.<field>: <why>`. Bounds keep every timestamp sum the reconciler makes in range.
pub fn spec(spec: &BenchmarkRunSpec) -> Result<(), Vec<String>> {
    if let Some(cp) = spec
        .control_plane
        .as_ref()
        .filter(|_| crate::crd::is_control_plane_only(&spec.workload))
    {
        let errs = control_plane_run(spec, cp);
        return if errs.is_empty() { Ok(()) } else { Err(errs) };
    }
    let mut errs: Vec<String> = match spec.workload.validate() {
        Ok(()) => vec![],
        Err(e) => e.iter().map(|e| format!("spec.workload.{e}")).collect(),
    };
    if let Some(d) = spec.start_delay {
        if d.0 > MAX_START_DELAY {
            errs.push(format!(
                "spec.startDelay: must be at most 1h (got {}s)",
                d.0.as_secs()
            ));
        }
    }
    if let Some(t) = spec.timeout {
        if t.0.is_zero() || t.0 > MAX_TIMEOUT {
            errs.push(format!(
                "spec.timeout: must be more than 0 and at most 720h (got {}s)",
                t.0.as_secs()
            ));
        }
    }
    if let Some(ttl) = spec.ttl_seconds_after_finished {
        if !(0..=MAX_TTL_SECONDS).contains(&ttl) {
            errs.push(format!(
                "spec.ttlSecondsAfterFinished: must be between 0 and {MAX_TTL_SECONDS} (one year) (got {ttl})"
            ));
        }
    }
    errs.extend(checkpoint_ranks(spec));
    if !spec.workers.per_node() {
        errs.extend(for_workers(
            spec,
            spec.workers.count.unwrap_or(1).max(1) as u32,
        ));
    }
    errs.extend(training_volume(spec));
    errs.extend(ca_ref(spec));
    errs.extend(volume_mode(spec));
    errs.extend(claim_template(spec));
    errs.extend(thresholds::validate(&spec.thresholds, &spec.workload));
    errs.extend(podfields::check(spec));
    errs.extend(oplog::validate(spec));
    if let Some(cp) = &spec.control_plane {
        errs.extend(control_plane_beside_workers(spec, cp));
    }
    if spec.thresholds.len() > MAX_THRESHOLDS {
        errs.push(format!(
            "spec.thresholds: at most {MAX_THRESHOLDS} (got {})",
            spec.thresholds.len()
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}

/// A control-plane run: its section checked, and the data-plane fields it would ignore
/// refused (its workload is a placeholder the pass never reads).
fn control_plane_run(
    spec: &BenchmarkRunSpec,
    cp: &crate::crd::control_plane::ControlPlaneSpec,
) -> Vec<String> {
    let mut errs = crate::control_plane::check(cp);
    let unused = [
        (spec.volume.is_some(), "volume"),
        (spec.matrix.is_some(), "matrix"),
        (spec.oplog.is_some(), "oplog"),
        (spec.secret_ref.is_some(), "secretRef"),
        (spec.ca_ref.is_some(), "caRef"),
        (spec.baseline_ref.is_some(), "baselineRef"),
        (
            !spec.thresholds.is_empty(),
            "thresholds (give controlPlane.thresholds)",
        ),
    ];
    for (given, field) in unused {
        if given {
            errs.push(format!("spec.{field}: not used by a control-plane run"));
        }
    }
    if cp.start_after.is_some() {
        errs.push("spec.controlPlane.startAfter: only with a workload (it delays the control operations past the workers' start; alone, they start at once)".into());
    }
    if let Some(t) = spec.timeout {
        if t.0.is_zero() || t.0 > MAX_TIMEOUT {
            errs.push(format!(
                "spec.timeout: must be more than 0 and at most 720h (got {}s)",
                t.0.as_secs()
            ));
        }
    }
    errs
}

/// A control-plane section beside a workload (data-plane load during the control operations):
/// the section checked, and the run kinds whose workers are child runs refused (the
/// lifecycles start at the workers' start instant, which such a run does not have).
fn control_plane_beside_workers(
    spec: &BenchmarkRunSpec,
    cp: &crate::crd::control_plane::ControlPlaneSpec,
) -> Vec<String> {
    let mut errs = crate::control_plane::check(cp);
    let load = spec
        .workload
        .duration
        .map(|d| d.0 + spec.workload.warmup.map(|w| w.0).unwrap_or_default());
    if let (Some(after), Some(load)) = (cp.start_after, load) {
        if after.0 >= load {
            errs.push(format!(
                "spec.controlPlane.startAfter: {after} would start the control operations after the load has ended (workload warmup plus duration: {}s)",
                load.as_secs()
            ));
        }
    }
    if spec.workload.duration.is_none() {
        errs.push("spec.workload.duration: required with controlPlane (the load the control operations run under needs a known end to be compared with theirs; totalOps, training and checkpoint workloads have none)".into());
    }
    if spec.matrix.is_some() {
        errs.push("spec.matrix: not with controlPlane (its combinations are child runs, each with its own start)".into());
    }
    if crate::search::plan(spec).is_some() {
        errs.push("spec.workload.training.search: not with controlPlane (its probes are child runs, each with its own start)".into());
    }
    errs
}

/// A checkpoint split over `ranks` ranks needs workers x `ranksPerWorker` = `ranks` (or
/// `subset: true` and at most that many): known here for `workers.count`; with `perNode` the
/// count is the nodes', and each agent says so at its start if it does not fit.
fn checkpoint_ranks(spec: &BenchmarkRunSpec) -> Vec<String> {
    let Some(c) = &spec.workload.checkpoint else {
        return vec![];
    };
    if spec.workers.per_node() {
        return vec![];
    }
    // A bad model is named by the workload's own validation.
    let Ok((_, ranks)) = c.model() else {
        return vec![];
    };
    let count = spec.workers.count.unwrap_or(1).max(1) as u64;
    let per = u64::from(c.ranks_per_worker.max(1));
    let run = count * per;
    if run > u64::from(ranks) || (!c.subset && run != u64::from(ranks)) {
        return vec![format!(
            "spec.workers.count: {count} workers x {per} checkpoint.ranksPerWorker = {run} ranks, but the checkpoint is split over {ranks} ranks: set workers.count to {}, or checkpoint.subset: true to write only this run's share",
            u64::from(ranks).div_ceil(per)
        )];
    }
    vec![]
}

/// The workload's checks that need the worker count (every training rank has a sample, a
/// checkpoint's `restoreShift` moves every shard), for `workers` workers: `workers.count` at
/// admission, the nodes of a `perNode` run once placed ([`placed`]).
fn for_workers(spec: &BenchmarkRunSpec, workers: u32) -> Vec<String> {
    match spec.workload.check_workers(workers) {
        Ok(()) => vec![],
        Err(e) => e.iter().map(|e| format!("spec.workload.{e}")).collect(),
    }
}

/// What a `perNode` run cannot do on the `nodes` it was placed on (known only then): the
/// checks of [`for_workers`] for that many workers. Empty for a run of `workers.count`
/// workers, checked at admission.
pub fn placed(spec: &BenchmarkRunSpec, nodes: usize) -> Vec<String> {
    if !spec.workers.per_node() || nodes == 0 {
        return vec![];
    }
    for_workers(spec, u32::try_from(nodes).unwrap_or(u32::MAX))
        .into_iter()
        .map(|e| format!("{e} (workers.perNode placed {nodes} workers)"))
        .collect()
}

/// Every worker of a training run reads the whole dataset (each epoch's order is split over
/// all of them): a volume each worker has to itself would hold only its own share, and the
/// prepare would wait for the others' in vain. Several workers need storage they share.
fn training_volume(spec: &BenchmarkRunSpec) -> Vec<String> {
    let (Some(_), Some(v)) = (&spec.workload.training, &spec.volume) else {
        return vec![];
    };
    if !spec.workers.per_node() && spec.workers.count.unwrap_or(1) <= 1 {
        return vec![];
    }
    let per_worker = if v.empty_dir.is_some() {
        Some("emptyDir")
    } else if v.claim_template.is_some() {
        Some("claimTemplate")
    } else if v
        .claim_name
        .as_deref()
        .is_some_and(|n| n.contains("{worker}"))
    {
        Some("claimName with {worker}")
    } else {
        None
    };
    match per_worker {
        Some(kind) => vec![format!(
            "spec.volume: a training dataset is read by every worker, but {kind} gives each worker a volume of its own (holding only its share): use a claim every worker mounts (volume.claimName of a ReadWriteMany claim) or object storage, or run one worker"
        )],
        None => vec![],
    }
}

/// `caRef` sets the workers' CA file: only for object storage, exactly one of its sources, and
/// not beside a workload that names a CA file of its own (a path in the pod) or skips
/// verification.
fn ca_ref(spec: &BenchmarkRunSpec) -> Vec<String> {
    let Some(ca) = &spec.ca_ref else {
        return vec![];
    };
    let mut errs = vec![];
    if ca.secret.is_some() == ca.config_map.is_some() {
        errs.push("spec.caRef: give caRef.secret or caRef.configMap (exactly one)".into());
    }
    let tls = &spec.workload.storage.tls;
    if tls.ca_file.is_some() {
        errs.push(
            "spec.caRef: the workload names storage.tls.caFile too; give the CA by caRef only (it sets the file's path in the workers)"
                .into(),
        );
    }
    if tls.insecure_skip_verify {
        errs.push(
            "spec.caRef: the workload skips verification (storage.tls.insecureSkipVerify); a CA would not be used"
                .into(),
        );
    }
    if spec.workload.target_uri().is_ok_and(|u| u.is_local()) {
        errs.push("spec.caRef: only for object storage targets (s3://, gs://, az://)".into());
    }
    errs
}

/// A Block claim gives each worker a raw device: only a block workload can use one, and a
/// block workload on a device needs a device (not a mounted directory) under it.
fn volume_mode(spec: &BenchmarkRunSpec) -> Vec<String> {
    let Some(mode) = spec
        .volume
        .as_ref()
        .and_then(|v| v.claim_template.as_ref())
        .and_then(|t| t.volume_mode.as_deref())
    else {
        return vec![];
    };
    match mode {
        "Block" if spec.workload.block.is_none() => vec![
            "spec.volume.claimTemplate.volumeMode: Block gives each worker a raw device, which only a block workload (spec.workload.block, ops read/write) can use; use Filesystem for objects in files".into(),
        ],
        "Block" | "Filesystem" => vec![],
        other => vec![format!(
            "spec.volume.claimTemplate.volumeMode: must be Block or Filesystem (got `{}`)",
            benchrun_api::quote::clip(other)
        )],
    }
}

/// What the API server would refuse in a claim template, found before any object is created
/// (a claim refused after the pods exist would leave the run waiting on it).
fn claim_template(spec: &BenchmarkRunSpec) -> Vec<String> {
    const AT: &str = "spec.volume.claimTemplate";
    const MODES: [&str; 4] = [
        "ReadWriteOnce",
        "ReadOnlyMany",
        "ReadWriteMany",
        "ReadWriteOncePod",
    ];
    let Some(t) = spec.volume.as_ref().and_then(|v| v.claim_template.as_ref()) else {
        return vec![];
    };
    let mut errs = vec![];
    for m in t.access_modes.iter().flatten() {
        if !MODES.contains(&m.as_str()) {
            errs.push(format!(
                "{AT}.accessModes: `{}` is not one of {}",
                benchrun_api::quote::clip(m),
                MODES.join(", ")
            ));
        }
    }
    let r = t.resources.as_ref();
    for (what, map) in [
        ("requests", r.and_then(|r| r.requests.as_ref())),
        ("limits", r.and_then(|r| r.limits.as_ref())),
    ] {
        for (name, q) in map.into_iter().flatten() {
            if podfields::parse_quantity(&q.0).is_none_or(|v| v <= 0.0) {
                errs.push(format!(
                    "{AT}.resources.{what}.{name}: `{}` is not a positive quantity (e.g. 10Gi, 500M)",
                    benchrun_api::quote::clip(&q.0)
                ));
            }
        }
    }
    if !r
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|m| m.contains_key("storage"))
    {
        errs.push(format!(
            "{AT}.resources.requests.storage: required (the size of each worker's claim, e.g. 10Gi)"
        ));
    }
    errs
}

/// Everything wrong with a run named `name` with this spec, in the order reported: the spec,
/// the name, the baseline reference, the matrix. (The administrator's policy is checked
/// beside it by the reconciler, which holds the policy.)
pub fn run(s: &BenchmarkRunSpec, name: &str) -> Vec<String> {
    let mut errs = spec(s).err().unwrap_or_default();
    if name.len() > resources::MAX_RUN_NAME {
        // The name becomes the value of the benchrun.dev/run label on everything the run owns.
        errs.push(format!(
            "metadata.name: at most {} characters, since it becomes a label value (got {})",
            resources::MAX_RUN_NAME,
            name.len()
        ));
    }
    if let Some(b) = &s.baseline_ref {
        errs.extend(baseline::validate(b, name));
    }
    errs.extend(sweep::validate(s, name));
    errs.extend(crate::search::validate(s, name));
    errs
}

/// What the schema cannot say about a schedule whose cron and time zone parse (`sched`, read
/// from `now` on): combinations that would make every run after the first pointless. A
/// problem is (field, why), for the schedule's `Valid` condition.
pub fn schedule(
    spec: &BenchmarkScheduleSpec,
    sched: &Schedule,
    now: DateTime<Utc>,
) -> Result<(), Invalid> {
    let bad = |field: &'static str, message: String| Err(Invalid { field, message });
    if let Some(d) = spec.starting_deadline_seconds.filter(|d| *d < 1) {
        return bad(
            "spec.startingDeadlineSeconds",
            format!("{d}: every run would be missed (a run starts after its time); give at least 1, or leave it out for no deadline"),
        );
    }
    let policy = spec.baseline.policy;
    if crate::crd::is_control_plane_only(&spec.run_template.workload)
        && policy != BaselinePolicy::None
    {
        return bad(
            "spec.baseline.policy",
            format!("{policy:?} gives every run after the first a baselineRef, which a control-plane run does not take: set baseline.policy: None (compare its runs with kubectl benchrun compare)"),
        );
    }
    // The baseline is read when the next run (with `MedianOfLast`, the `count`-th next)
    // finishes; both runs take about as long, so the older one must outlive the gap between
    // their scheduled times.
    let runs_back = match policy {
        BaselinePolicy::LastSucceeded => 1,
        BaselinePolicy::MedianOfLast => spec.baseline.median_count(),
        BaselinePolicy::Pinned | BaselinePolicy::None => return Ok(()),
    };
    let Some(ttl) = spec.run_template.ttl_seconds_after_finished else {
        return Ok(());
    };
    let later = match runs_back {
        1 => "the next run".to_string(),
        k => format!("the run {k} scheduled times later"),
    };
    match longest_span(sched, now, runs_back).map(|s| s.num_seconds()) {
        Some(span) if span > ttl => bad(
            "spec.runTemplate.ttlSecondsAfterFinished",
            format!(
                "{ttl}s deletes each run before {later} (up to {span}s after it) can use it as its baseline (baseline.policy {policy:?}): give at least {span}, or leave it out (successfulRunsHistoryLimit prunes old runs and keeps the baseline)"
            ),
        ),
        _ => Ok(()),
    }
}

/// The longest time between a scheduled time and the one `k` times later, over the next year
/// of the schedule (at most [`SPAN_TIMES`] times looked at). `None` if it has fewer times.
fn longest_span(sched: &Schedule, from: DateTime<Utc>, k: usize) -> Option<chrono::Duration> {
    let horizon = from + chrono::Duration::days(366);
    let mut times = vec![];
    let mut t = from;
    while times.len() < SPAN_TIMES {
        match sched.next_after(t) {
            Some(next) if next <= horizon || times.len() <= k => {
                times.push(next);
                t = next;
            }
            _ => break,
        }
    }
    times.windows(k + 1).map(|w| w[k] - w[0]).max()
}

/// Most scheduled times [`longest_span`] looks at (a minutely schedule's: 2,000 minutes).
const SPAN_TIMES: usize = 2000;

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_search_without_an_au_mark_is_refused_by_the_workload_check() {
        let no_mark: BenchmarkRunSpec = serde_yaml::from_str(
            "workload: {target: s3://b/p/, ops: [{op: get}], training: {samples: 8, sampleSize: 4KiB, computeTime: 1ms, search: {maxAccelerators: true}}}",
        )
        .expect("spec");
        assert!(spec(&no_mark)
            .expect_err("the workload's own check")
            .iter()
            .any(|e| e.starts_with("spec.workload.training.search")));
    }

    /// A control-plane section beside a workload is a run (the workers' fields it uses, such
    /// as a volume and data-plane thresholds, allowed); both sections are checked; a matrix,
    /// whose combinations are child runs, is refused, naming why.
    #[test]
    fn a_control_plane_section_beside_a_workload_is_checked_with_it() {
        let both = "workload: {target: direct:///data, duration: 20s, ops: [{op: read, weight: 70}, {op: write, weight: 30}], block: {blockSize: 4KiB, fileSize: 8MiB}}\nvolume: {emptyDir: {}}\nthresholds: [{op: read, maxP99: 1s}]\ncontrolPlane: {operations: [provision, attach], count: 4}\n";
        let s: BenchmarkRunSpec = serde_yaml::from_str(both).expect("spec");
        assert_eq!(spec(&s), Ok(()));
        let bad = both.replace("count: 4", "count: 0").replace("20s", "0s");
        let s: BenchmarkRunSpec = serde_yaml::from_str(&bad).expect("spec");
        let errs = spec(&s).expect_err("both sections checked").join("\n");
        assert!(errs.contains("spec.controlPlane.count: from 1"), "{errs}");
        assert!(errs.contains("spec.workload.duration"), "{errs}");
        // startAfter: within the load (20 s here), and only beside a workload.
        let later = both.replace("count: 4}", "count: 4, startAfter: 5s}");
        let s: BenchmarkRunSpec = serde_yaml::from_str(&later).expect("spec");
        assert_eq!(spec(&s), Ok(()));
        let s: BenchmarkRunSpec = serde_yaml::from_str(&later.replace("5s", "20s")).expect("spec");
        let errs = spec(&s).expect_err("after the load").join("\n");
        assert!(errs.contains("spec.controlPlane.startAfter: 20s would start the control operations after the load has ended (workload warmup plus duration: 20s)"), "{errs}");
        let alone: BenchmarkRunSpec = serde_yaml::from_str(
            "controlPlane: {operations: [provision], count: 1, startAfter: 5s}",
        )
        .expect("spec");
        let errs = spec(&alone).expect_err("alone").join("\n");
        assert!(
            errs.contains("spec.controlPlane.startAfter: only with a workload"),
            "{errs}"
        );
        let with_matrix = format!("{both}matrix: {{parameters: {{concurrency: [1, 2]}}}}\n");
        let s: BenchmarkRunSpec = serde_yaml::from_str(&with_matrix).expect("spec");
        let errs = spec(&s).expect_err("matrix").join("\n");
        assert!(
            errs.contains("spec.matrix: not with controlPlane"),
            "{errs}"
        );
    }

    /// Training and checkpoint workloads are runs like any other (the agents split them by
    /// rank: operator/tests/agent_ranked.rs); a checkpoint's op-log is refused, naming why.
    #[test]
    fn training_and_checkpoint_workloads_are_valid_runs() {
        for section in [
            "ops: [{op: get}], training: {preset: unet3d}",
            "ops: [{op: put}], checkpoint: {preset: llama3-8b, ranksPerWorker: 8}",
        ] {
            let run: BenchmarkRunSpec = serde_yaml::from_str(&format!(
                "{{workload: {{target: 'file:///data', {section}}}}}"
            ))
            .unwrap();
            assert_eq!(spec(&run), Ok(()), "{section}");
        }
        // llama3-8b is 8 ranks: 2 workers x 4 fit, 3 x 4 do not (unless a subset, and 12 > 8
        // never).
        let ckpt = |workers: &str, extra: &str| {
            let run: BenchmarkRunSpec = serde_yaml::from_str(&format!(
                "{{workload: {{target: 'file:///d', ops: [{{op: put}}], checkpoint: {{preset: llama3-8b, ranksPerWorker: 4{extra}}}}}, workers: {workers}}}"
            ))
            .unwrap();
            spec(&run)
        };
        assert_eq!(ckpt("{count: 2}", ""), Ok(()));
        // A training run's workers share the dataset: not on volumes of their own.
        let train = |rest: &str| {
            let run: BenchmarkRunSpec = serde_yaml::from_str(&format!(
                "{{workload: {{target: 'file:///d', ops: [{{op: get}}], training: {{preset: unet3d}}}}, {rest}}}"
            ))
            .unwrap();
            spec(&run)
        };
        assert_eq!(
            train("workers: {count: 2}, volume: {claimName: shared}"),
            Ok(())
        );
        assert_eq!(train("workers: {count: 1}, volume: {emptyDir: {}}"), Ok(()));
        for (volume, kind) in [
            ("{emptyDir: {}}", "emptyDir"),
            ("{claimName: 'data-{worker}'}", "claimName with {worker}"),
        ] {
            let errs = train(&format!("workers: {{perNode: true}}, volume: {volume}"))
                .expect_err("per-worker volume");
            assert!(
                errs[0].contains(&format!("but {kind} gives each worker")),
                "{errs:?}"
            );
        }
        assert_eq!(ckpt("{perNode: true}", ""), Ok(()));
        assert_eq!(ckpt("{count: 1}", ", subset: true"), Ok(()));
        assert_eq!(
            ckpt("{count: 1}", ""),
            Err(vec!["spec.workers.count: 1 workers x 4 checkpoint.ranksPerWorker = 4 ranks, but the checkpoint is split over 8 ranks: set workers.count to 2, or checkpoint.subset: true to write only this run's share".to_string()])
        );
        assert!(ckpt("{count: 3}", ", subset: true").is_err());
        let run: BenchmarkRunSpec = serde_yaml::from_str(
            "{workload: {target: 's3://b/', ops: [{op: put}], checkpoint: {preset: llama3-8b, ranksPerWorker: 8}}, oplog: {uri: 's3://b/logs/'}}",
        )
        .unwrap();
        let errs = spec(&run).expect_err("no op-log of a checkpoint");
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.oplog: records object operations and training reads")),
            "{errs:?}"
        );
    }

    /// The workload's checks that need the worker count: for `workers.count` at admission,
    /// for a `perNode` run's nodes once placed (none before: the count is not known).
    #[test]
    fn ranks_are_checked_for_the_workers_the_run_has() {
        let run = |workers: &str| -> BenchmarkRunSpec {
            serde_yaml::from_str(&format!(
                "{{workload: {{target: 's3://b/t/', ops: [{{op: get}}], training: {{samples: 6, sampleSize: 4KiB, computeTime: 1ms, acceleratorsPerWorker: 2}}}}, workers: {workers}}}"
            ))
            .unwrap()
        };
        assert_eq!(spec(&run("{count: 3}")), Ok(()));
        let errs = spec(&run("{count: 4}")).expect_err("8 ranks over 6 samples");
        assert!(
            errs[0].starts_with("spec.workload.training.acceleratorsPerWorker: 2 accelerators per worker x 4 workers = 8 ranks, more than the 6 samples"),
            "{errs:?}"
        );
        // perNode: valid until placed; then the nodes decide.
        let per_node = run("{perNode: true}");
        assert_eq!(spec(&per_node), Ok(()));
        assert_eq!(placed(&per_node, 3), Vec::<String>::new());
        let errs = placed(&per_node, 4);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("spec.workload.training.acceleratorsPerWorker: 2 accelerators per worker x 4 workers")
                && errs[0].ends_with("(workers.perNode placed 4 workers)"),
            "{errs:?}"
        );
        // A run of `count` workers was checked at admission.
        assert_eq!(placed(&run("{count: 4}"), 4), Vec::<String>::new());
        // A checkpoint subset: the shift over this run's ranks (2 x 8 = 16).
        let ckpt = |workers: u32| -> BenchmarkRunSpec {
            serde_yaml::from_str(&format!(
                "{{workload: {{target: 's3://b/c/', ops: [{{op: put}}], checkpoint: {{preset: llama3-70b, ranksPerWorker: 8, subset: true, restoreShift: 16}}}}, workers: {{count: {workers}}}}}"
            ))
            .unwrap()
        };
        assert_eq!(spec(&ckpt(3)), Ok(()));
        let errs = spec(&ckpt(2)).expect_err("every rank its own shard");
        assert!(
            errs[0].starts_with(
                "spec.workload.checkpoint.restoreShift: 16 is a multiple of the run's 16 ranks"
            ),
            "{errs:?}"
        );
    }

    fn schedule_spec(yaml: &str) -> BenchmarkScheduleSpec {
        serde_yaml::from_str(yaml).expect("schedule spec")
    }

    fn check_schedule(yaml: &str) -> Result<(), Invalid> {
        let s = schedule_spec(yaml);
        let sched = Schedule::parse(&s.schedule, s.time_zone.as_deref()).expect("cron");
        let now = DateTime::parse_from_rfc3339("2026-03-02T08:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        schedule(&s, &sched, now)
    }

    const TEMPLATE: &str =
        "runTemplate: {workload: {target: 'file:///d', duration: 5s, ops: [{op: put}]}";

    #[test]
    fn a_starting_deadline_of_zero_misses_every_run() {
        let e = check_schedule(&format!(
            "schedule: '@hourly'\nstartingDeadlineSeconds: 0\n{TEMPLATE}}}"
        ))
        .expect_err("0 s");
        assert_eq!(e.field, "spec.startingDeadlineSeconds");
        assert!(check_schedule(&format!(
            "schedule: '@hourly'\nstartingDeadlineSeconds: 1\n{TEMPLATE}}}"
        ))
        .is_ok());
    }

    /// A control-plane run refuses a baselineRef, which every run after the first would get:
    /// refused at the schedule unless its policy is None.
    #[test]
    fn a_control_plane_template_needs_no_baseline() {
        let cp = "schedule: '@hourly'\nrunTemplate: {controlPlane: {operations: [provision], count: 1}}\n";
        for policy in [
            "",
            "baseline: {policy: LastSucceeded}\n",
            "baseline: {policy: MedianOfLast}\n",
        ] {
            let e = check_schedule(&format!("{cp}{policy}")).expect_err(policy);
            assert_eq!(e.field, "spec.baseline.policy", "{policy}");
        }
        assert!(check_schedule(&format!("{cp}baseline: {{policy: None}}\n")).is_ok());
    }

    /// The run TTL keeps each run until the run that uses it as a baseline has finished: at
    /// least the longest gap between scheduled times (weekdays at 9: Friday to Monday, 72 h),
    /// `count` gaps with MedianOfLast; Pinned and None use no run of the schedule.
    #[test]
    fn a_run_ttl_outlives_the_gap_to_the_run_it_is_the_baseline_of() {
        let weekdays = |ttl: i64, baseline: &str| {
            check_schedule(&format!(
                "schedule: '0 9 * * 1-5'\n{baseline}{TEMPLATE}, ttlSecondsAfterFinished: {ttl}}}"
            ))
        };
        let e = weekdays(86_400, "").expect_err("a day is less than Friday to Monday");
        assert_eq!(e.field, "spec.runTemplate.ttlSecondsAfterFinished");
        assert!(e.message.contains("give at least 259200"), "{}", e.message);
        assert!(weekdays(259_200, "").is_ok());
        // The median of the last 3: the run three times later (Wednesday to Monday: 5 days).
        let median = "baseline: {policy: MedianOfLast, count: 3}\n";
        let e = weekdays(259_200, median).expect_err("three gaps");
        assert!(e.message.contains("give at least 432000"), "{}", e.message);
        assert!(weekdays(432_000, median).is_ok());
        assert!(weekdays(60, "baseline: {policy: None}\n").is_ok());
        assert!(weekdays(60, "baseline: {policy: Pinned, run: golden}\n").is_ok());
    }

    #[test]
    fn a_claim_template_the_api_server_would_refuse_is_named() {
        let errs = |volume: &str| {
            let spec: BenchmarkRunSpec = serde_yaml::from_str(&format!(
                "workload: {{target: file:///data/x, duration: 1s, ops: [{{op: get}}]}}\nvolume: {volume}\n"
            ))
            .expect("spec");
            claim_template(&spec)
        };
        assert!(errs("{claimTemplate: {resources: {requests: {storage: 1Gi}}}}").is_empty());
        assert_eq!(
            errs("{claimTemplate: {resources: {requests: {storage: lots}}}}"),
            ["spec.volume.claimTemplate.resources.requests.storage: `lots` is not a positive quantity (e.g. 10Gi, 500M)"]
        );
        assert_eq!(
            errs("{claimTemplate: {accessModes: [ReadWriteSometimes], resources: {requests: {storage: 1Gi}, limits: {storage: -1Gi}}}}"),
            [
                "spec.volume.claimTemplate.accessModes: `ReadWriteSometimes` is not one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod",
                "spec.volume.claimTemplate.resources.limits.storage: `-1Gi` is not a positive quantity (e.g. 10Gi, 500M)",
            ]
        );
        assert_eq!(
            errs("{claimTemplate: {storageClassName: fast}}"),
            ["spec.volume.claimTemplate.resources.requests.storage: required (the size of each worker's claim, e.g. 10Gi)"]
        );
    }

    #[test]
    fn a_block_claim_needs_a_block_workload() {
        let parse = |workload: &str, mode: &str| -> BenchmarkRunSpec {
            serde_yaml::from_str(&format!(
                "workload: {workload}\nvolume: {{claimTemplate: {{volumeMode: {mode}, resources: {{requests: {{storage: 1Gi}}}}}}}}\n"
            ))
            .expect("parses")
        };
        let objects = "{target: file:///data, duration: 10s, ops: [{op: get}]}";
        let block = "{target: direct:///dev/xvdb, duration: 10s, ops: [{op: read}], dataset: {prepare: false}, block: {blockSize: 4KiB}}";
        assert_eq!(spec(&parse(block, "Block")), Ok(()));
        assert_eq!(spec(&parse(objects, "Filesystem")), Ok(()));
        let errs = spec(&parse(objects, "Block")).expect_err("objects on a raw device");
        assert!(
            errs.len() == 1
                && errs[0].starts_with("spec.volume.claimTemplate.volumeMode: Block")
                && errs[0].contains("spec.workload.block"),
            "{errs:?}"
        );
        let errs = spec(&parse(block, "Raw")).expect_err("unknown mode");
        assert!(errs[0].contains("must be Block or Filesystem"), "{errs:?}");
    }

    #[test]
    fn a_ca_ref_is_for_object_storage_and_the_only_ca() {
        let base = "workload: {target: s3://b/p, duration: 10s, ops: [{op: get}], storage: {endpoint: 'https://127.0.0.1:9443'STORAGE}}\n";
        let parse = |storage: &str, extra: &str| -> BenchmarkRunSpec {
            serde_yaml::from_str(&format!("{}{extra}", base.replace("STORAGE", storage)))
                .expect("parses")
        };
        let good = "caRef: {secret: {name: ca, key: ca.crt}}\n";
        assert_eq!(spec(&parse("", good)), Ok(()));
        for (storage, extra, want) in [
            (", tls: {caFile: /x.pem}", good, "storage.tls.caFile too"),
            (
                ", tls: {insecureSkipVerify: true}",
                good,
                "skips verification",
            ),
            (
                "",
                "caRef: {secret: {name: a, key: k}, configMap: {name: b, key: k}}\n",
                "exactly one",
            ),
            ("", "caRef: {}\n", "exactly one"),
        ] {
            let errs = spec(&parse(storage, extra)).expect_err(extra);
            assert!(
                errs.iter()
                    .any(|e| e.starts_with("spec.caRef: ") && e.contains(want)),
                "{storage} {extra}: {errs:?}"
            );
        }
        let local: BenchmarkRunSpec = serde_yaml::from_str(&format!(
            "workload: {{target: file:///data, duration: 10s, ops: [{{op: get}}]}}\n{good}"
        ))
        .unwrap();
        let errs = spec(&local).expect_err("local");
        assert!(errs[0].contains("only for object storage"), "{errs:?}");
        // The schema names a key: a reference without one does not parse.
        assert!(serde_yaml::from_str::<BenchmarkRunSpec>(&format!(
            "{}caRef: {{secret: {{name: ca}}}}\n",
            base.replace("STORAGE", "")
        ))
        .is_err());
    }

    #[test]
    fn durations_and_ttl_are_bounded_and_named() {
        let base = "workload: {target: file:///data, duration: 10s, ops: [{op: get}]}\n";
        let parse = |extra: &str| -> BenchmarkRunSpec {
            serde_yaml::from_str(&format!("{base}{extra}")).expect("parses")
        };
        assert_eq!(spec(&parse("")), Ok(()));
        assert_eq!(
            spec(&parse(
                "startDelay: 1h\ntimeout: 720h\nttlSecondsAfterFinished: 31536000\n"
            )),
            Ok(())
        );
        for (extra, field) in [
            ("startDelay: 2h\n", "spec.startDelay"),
            ("startDelay: 100000000000h\n", "spec.startDelay"),
            ("timeout: 721h\n", "spec.timeout"),
            ("timeout: 0s\n", "spec.timeout"),
            (
                "ttlSecondsAfterFinished: 9223372036854775807\n",
                "spec.ttlSecondsAfterFinished",
            ),
            (
                "ttlSecondsAfterFinished: -1\n",
                "spec.ttlSecondsAfterFinished",
            ),
        ] {
            let errs = spec(&parse(extra)).expect_err(extra);
            assert!(
                errs.len() == 1 && errs[0].starts_with(&format!("{field}: must be")),
                "{extra}: {errs:?}"
            );
        }
        let schema = serde_json::to_value(schemars::schema_for!(BenchmarkRunSpec)).unwrap();
        assert_eq!(
            schema["properties"]["ttlSecondsAfterFinished"]["maximum"].as_f64(),
            Some(MAX_TTL_SECONDS as f64)
        );
    }

    #[test]
    fn a_combination_is_as_valid_as_its_parent() {
        let s: BenchmarkRunSpec = serde_yaml::from_str(
            "workload: {target: file:///data, duration: 2s, ops: [{op: get}], objectSize: 4KiB}\nmatrix: {parameters: {objectSize: [4KiB, 8KiB], concurrency: [1, 2]}, baseline: {objectSize: 8KiB}}\nttlSecondsAfterFinished: 60\nthresholds: [{op: get, minOpsPerSec: 1}]",
        )
        .expect("spec parses");
        let m = s.matrix.clone().expect("matrix");
        let (planned, _) = sweep::plan(&s, &m).expect("plans");
        assert_eq!(spec(&sweep::child_spec(&s, &planned[3])), Ok(()));
    }
}
