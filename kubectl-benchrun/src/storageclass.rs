//! `storageclass CLASS`: a StorageClass benchmarked in one command. One worker per selected
//! node, each with a claim from the class, runs the volume profile storage engineers report
//! (O_DIRECT block I/O on one file: random 4 KiB at queue depth 32 for IOPS, sequential 1 MiB
//! at depth 4 for bandwidth, random 4 KiB at depth 1 for latency; each read, then write) as a
//! matrix run, one combination at a time; the table is printed and the run (with its claims)
//! deleted. The same run as `examples/benchmarkrun-storageclass-profile.yaml`, shorter.
//! With `--control-plane`, a control-plane run on the class follows (claims provisioned,
//! attached, written once and deleted, `--control-plane-count` of them,
//! `--control-plane-concurrency` at once): its rows are printed after the profile's.

use std::fmt::Write;

use anyhow::{Context, Result};
use benchrun_operator::crd::{BenchmarkRun, BenchmarkRunSpec};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::Api;

use crate::cli::{DryRun, Global, StorageClassArgs};
use crate::connect;
use crate::exit::{bad_input, Verdict, INTERRUPTED};
use crate::manifest;
use crate::watch::{self, View};

/// The profiles, in the matrix's order: (label, blockSize, queueDepth, access).
const PROFILES: [(&str, &str, u32, &str); 3] = [
    ("random 4KiB QD32 (IOPS)", "4KiB", 32, "random"),
    ("sequential 1MiB QD4 (bandwidth)", "1MiB", 4, "sequential"),
    ("random 4KiB QD1 (latency)", "4KiB", 1, "random"),
];
/// The ops of each profile, varying fastest.
const OPS: [&str; 2] = ["read", "write"];
/// Where the claim is mounted in each worker.
const MOUNT: &str = "/data";

/// What the command runs, in one line.
pub fn describe(args: &StorageClassArgs) -> String {
    let profiles: Vec<&str> = PROFILES.iter().map(|p| p.0).collect();
    format!(
        "StorageClass {}: a {} claim per node, O_DIRECT block I/O on a {} file, {} per combination: {}; each read, then write",
        args.class,
        args.claim_size,
        args.file_size,
        args.duration,
        profiles.join(", ")
    )
}

/// The matrix run that benchmarks the class.
pub fn build(args: &StorageClassArgs) -> Result<BenchmarkRun> {
    let blocks: Vec<_> = PROFILES
        .iter()
        .map(|(_, bs, qd, access)| {
            serde_json::json!({"blockSize": bs, "queueDepth": qd, "access": access, "fileSize": args.file_size})
        })
        .collect();
    let selector = manifest::node_selector(&args.node_selector)?;
    let spec = serde_json::json!({
        "workload": {
            "target": format!("direct://{MOUNT}/benchrun"),
            "duration": args.duration,
            "concurrency": 1,
            "ops": [{"op": "read"}],
            "block": blocks[0],
        },
        "workers": {
            "perNode": true,
            "nodeSelector": if selector.is_empty() { None } else { Some(selector) },
        },
        "volume": {
            "mountPath": MOUNT,
            "claimTemplate": {
                "storageClassName": args.class,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": args.claim_size}},
            },
        },
        "matrix": {"parameters": {"block": blocks, "ops.0.op": OPS}},
        "cleanup": "Always",
    });
    let spec: BenchmarkRunSpec = serde_json::from_value(spec)
        .map_err(|e| bad_input(format!("storageclass {}: {e}", args.class)))?;
    let mut run = BenchmarkRun::new("", spec);
    run.metadata = ObjectMeta {
        generate_name: Some(manifest::name_prefix(&format!("sc-{}", args.class))),
        ..ObjectMeta::default()
    };
    manifest::validate(&run)?;
    Ok(run)
}

/// The table storage engineers read: one row per profile and op.
pub fn table(run: &BenchmarkRun) -> String {
    let rows = run
        .status
        .as_ref()
        .and_then(|s| s.matrix.as_ref())
        .map(|m| m.combinations.clone())
        .unwrap_or_default();
    let labels: Vec<String> = PROFILES
        .iter()
        .flat_map(|p| OPS.iter().map(move |op| format!("{} {op}", p.0)))
        .collect();
    let same_shape = rows.len() == labels.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<40} {:<10} {:>10} {:>9} {:>9} {:>9} {:>7}",
        "profile", "phase", "IOPS", "MiB/s", "p50 ms", "p99 ms", "errors"
    );
    let num = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
    for (i, r) in rows.iter().enumerate() {
        let label = if same_shape {
            labels[i].clone()
        } else {
            r.name.clone()
        };
        let _ = writeln!(
            out,
            "{:<40} {:<10} {:>10} {:>9} {:>9} {:>9} {:>7}",
            label,
            r.phase.as_str(),
            num(r.ops_per_sec, 1),
            num(r.mib_per_sec, 1),
            num(r.p50_ms, 3),
            num(r.p99_ms, 3),
            r.errors.map_or("-".to_string(), |e| e.to_string())
        );
    }
    out
}

/// The control-plane run of `--control-plane`: the class's claims (of `--claim-size`) through
/// provision, attach, firstIO and delete.
pub fn build_control_plane(args: &StorageClassArgs) -> Result<BenchmarkRun> {
    let selector = manifest::node_selector(&args.node_selector)?;
    let spec = serde_json::json!({
        "controlPlane": {
            "operations": ["provision", "attach", "firstIO", "delete"],
            "count": args.control_plane_count,
            "concurrency": args.control_plane_concurrency,
            "storageClassName": args.class,
            "size": args.claim_size,
        },
        "workers": {
            "nodeSelector": if selector.is_empty() { None } else { Some(selector) },
        },
        "cleanup": "Always",
    });
    let spec: BenchmarkRunSpec = serde_json::from_value(spec)
        .map_err(|e| bad_input(format!("storageclass {} --control-plane: {e}", args.class)))?;
    let mut run = BenchmarkRun::new("", spec);
    run.metadata = ObjectMeta {
        generate_name: Some(manifest::name_prefix(&format!("sc-{}-cp", args.class))),
        ..ObjectMeta::default()
    };
    manifest::validate(&run)?;
    Ok(run)
}

/// The control-plane rows: the per-operation table of `kubectl benchrun result`.
fn control_plane_table(run: &BenchmarkRun) -> String {
    match run.status.as_ref().and_then(|s| s.control_plane.as_ref()) {
        Some(cp) => format!("\n{}", crate::show::control_plane(cp)),
        None => String::new(),
    }
}

/// `kubectl benchrun storageclass CLASS`.
pub async fn main(global: &Global, args: &StorageClassArgs) -> Result<u8> {
    let mut runs = vec![(build(args)?, table as fn(&BenchmarkRun) -> String)];
    if args.control_plane {
        runs.push((build_control_plane(args)?, control_plane_table));
    }
    if args.dry_run == Some(DryRun::Client) {
        let docs: Vec<String> = runs
            .iter()
            .map(|(r, _)| serde_yaml::to_string(r))
            .collect::<Result<_, _>>()?;
        print!("{}", docs.join("---\n"));
        return Ok(crate::exit::OK);
    }
    let t = connect::connect(global).await?;
    let api: Api<BenchmarkRun> = t.api();
    if args.dry_run == Some(DryRun::Server) {
        let params = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let mut docs = vec![];
        for (run, _) in &runs {
            let checked = api
                .create(&params, run)
                .await
                .map_err(|e| connect::explain(e, "creating the BenchmarkRun"))?;
            docs.push(serde_yaml::to_string(&checked)?);
        }
        print!("{}", docs.join("---\n"));
        return Ok(crate::exit::OK);
    }
    eprintln!("benchmarking {}", describe(args));
    // One after the other, so the control-plane figures are not taken under the profile's I/O;
    // the first verdict that is not OK is the exit code.
    let mut code = crate::exit::OK;
    for (run, print) in &runs {
        let c = one(&t, &api, run, *print, args.keep).await?;
        if c == INTERRUPTED {
            return Ok(c);
        }
        if code == crate::exit::OK {
            code = c;
        }
    }
    Ok(code)
}

/// Create `run`, follow it to its end, print it with `print`, delete it (unless `keep`): the
/// exit code of its verdict.
async fn one(
    t: &connect::Target,
    api: &Api<BenchmarkRun>,
    run: &BenchmarkRun,
    print: fn(&BenchmarkRun) -> String,
    keep: bool,
) -> Result<u8> {
    let created = api
        .create(&PostParams::default(), run)
        .await
        .map_err(|e| connect::explain(e, "creating the BenchmarkRun"))?;
    let name = created.metadata.name.clone().unwrap_or_default();
    eprintln!(
        "benchmarkrun.benchrun.dev/{name} created in namespace {}",
        t.namespace
    );
    let mut view = View::default();
    let ended = tokio::select! {
        r = watch::follow(t, &name, &mut view) => Some(r),
        _ = tokio::signal::ctrl_c() => None,
    };
    view.done();
    let code = match &ended {
        Some(Ok(run)) => {
            print!("{}", print(run));
            let verdict = Verdict::of(run);
            if let Some(m) = verdict.message(&name) {
                eprintln!("error: {m}");
            }
            verdict.code()
        }
        Some(Err(_)) => crate::exit::ERROR,
        None => INTERRUPTED,
    };
    if keep {
        eprintln!(
            "kept run {name}: kubectl benchrun result {name} -n {}",
            t.namespace
        );
    } else {
        api.delete(&name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting run {name}"))?;
        eprintln!("run {name} deleted (its claims with it)");
    }
    if let Some(Err(e)) = ended {
        return Err(e);
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> StorageClassArgs {
        StorageClassArgs {
            class: "fast".into(),
            claim_size: "2Gi".into(),
            file_size: "256MiB".into(),
            duration: "10s".into(),
            node_selector: vec!["disk=ssd".into()],
            dry_run: None,
            keep: false,
            control_plane: true,
            control_plane_count: 10,
            control_plane_concurrency: 5,
        }
    }

    #[test]
    fn the_profile_is_a_valid_matrix_run_on_a_claim_per_node() {
        let run = build(&args()).expect("valid");
        assert_eq!(run.metadata.generate_name.as_deref(), Some("sc-fast-"));
        assert!(run.spec.workers.per_node());
        assert_eq!(
            run.spec.workers.node_selector.as_ref().unwrap()["disk"],
            "ssd"
        );
        let claim = run
            .spec
            .volume
            .as_ref()
            .unwrap()
            .claim_template
            .clone()
            .unwrap();
        assert_eq!(claim.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(run.spec.matrix.as_ref().unwrap().combinations(), 6);
        assert!(describe(&args()).contains("random 4KiB QD32 (IOPS)"));
        let mut bad = args();
        bad.duration = "soon".into();
        assert!(build(&bad).is_err());
    }

    #[test]
    fn the_control_plane_rows_come_from_a_control_plane_run_on_the_class() {
        let run = build_control_plane(&args()).expect("valid");
        assert_eq!(run.metadata.generate_name.as_deref(), Some("sc-fast-cp-"));
        let cp = run.spec.control_plane.as_ref().expect("controlPlane");
        assert_eq!(cp.storage_class_name.as_deref(), Some("fast"));
        assert_eq!((cp.count, cp.concurrency), (10, Some(5)));
        assert_eq!(cp.operations, ["provision", "attach", "firstIO", "delete"]);
        assert_eq!(cp.size.as_ref().map(|q| q.0.as_str()), Some("2Gi"));
        assert!(benchrun_operator::crd::is_control_plane_only(
            &run.spec.workload
        ));
        let mut bad = args();
        bad.control_plane_concurrency = 11;
        let e = build_control_plane(&bad).expect_err("concurrency above count");
        assert!(e.to_string().contains("concurrency"), "{e}");
    }
}
