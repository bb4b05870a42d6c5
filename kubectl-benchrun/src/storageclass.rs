//! `storageclass CLASS`: a StorageClass benchmarked in one command. One worker per selected
//! node, each with a claim from the class, runs the volume profile storage engineers report
//! (O_DIRECT block I/O on one file: random 4 KiB at queue depth 32 for IOPS, sequential 1 MiB
//! at depth 4 for bandwidth, random 4 KiB at depth 1 for latency; each read, then write) as a
//! matrix run, one combination at a time; the table is printed and the run (with its claims)
//! deleted. The same run as `examples/benchmarkrun-storageclass-profile.yaml`, shorter.

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

/// `kubectl benchrun storageclass CLASS`.
pub async fn main(global: &Global, args: &StorageClassArgs) -> Result<u8> {
    let run = build(args)?;
    if args.dry_run == Some(DryRun::Client) {
        print!("{}", serde_yaml::to_string(&run)?);
        return Ok(crate::exit::OK);
    }
    let t = connect::connect(global).await?;
    let api: Api<BenchmarkRun> = t.api();
    if args.dry_run == Some(DryRun::Server) {
        let params = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let checked = api
            .create(&params, &run)
            .await
            .map_err(|e| connect::explain(e, "creating the BenchmarkRun"))?;
        print!("{}", serde_yaml::to_string(&checked)?);
        return Ok(crate::exit::OK);
    }
    eprintln!("benchmarking {}", describe(args));
    let created = api
        .create(&PostParams::default(), &run)
        .await
        .map_err(|e| connect::explain(e, "creating the BenchmarkRun"))?;
    let name = created.metadata.name.clone().unwrap_or_default();
    eprintln!(
        "benchmarkrun.benchrun.dev/{name} created in namespace {}",
        t.namespace
    );
    let mut view = View::default();
    let ended = tokio::select! {
        r = watch::follow(&t, &name, &mut view) => Some(r),
        _ = tokio::signal::ctrl_c() => None,
    };
    view.done();
    let code = match &ended {
        Some(Ok(run)) => {
            print!("{}", table(run));
            let verdict = Verdict::of(run);
            if let Some(m) = verdict.message(&name) {
                eprintln!("error: {m}");
            }
            verdict.code()
        }
        Some(Err(_)) => crate::exit::ERROR,
        None => INTERRUPTED,
    };
    if args.keep {
        eprintln!(
            "kept run {name}: kubectl benchrun report {name} -n {}",
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
}
