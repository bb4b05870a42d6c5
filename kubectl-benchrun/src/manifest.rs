//! What `run` creates: a BenchmarkRun manifest as given, or a standalone workload file (the
//! worker's own format, with or without a `matrix:`) wrapped in one; then the placement flags
//! applied. Pure, so the wrapping and the flags are tested without a cluster.

use std::collections::BTreeMap;

use anyhow::Result;
use benchrun_api::{matrix, Workload};
use benchrun_operator::crd::{BenchmarkRun, BenchmarkRunSpec, VolumeSpec, WorkersSpec};
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PersistentVolumeClaimSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;

use crate::exit::bad_input;

/// The claim size of `--storage-class` without `--claim-size`.
pub const DEFAULT_CLAIM_SIZE: &str = "10Gi";
/// Longest name prefix taken from a file name (the server appends 5 characters; the run's name
/// becomes a label value of at most 63).
const MAX_PREFIX: usize = 40;

/// The placement flags of `run`.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// `--name`.
    pub name: Option<String>,
    /// `--per-node`.
    pub per_node: bool,
    /// `--workers N`.
    pub workers: Option<i32>,
    /// `--node-selector k=v`, parsed.
    pub node_selector: BTreeMap<String, String>,
    /// `--storage-class`.
    pub storage_class: Option<String>,
    /// `--claim-size`.
    pub claim_size: Option<String>,
}

/// `k=v` pairs of `--node-selector`.
pub fn node_selector(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for p in pairs.iter().filter(|p| !p.is_empty()) {
        match p.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.insert(k.trim().to_string(), v.trim().to_string());
            }
            _ => {
                return Err(bad_input(format!(
                    "--node-selector {p:?}: expected KEY=VALUE"
                )))
            }
        }
    }
    Ok(out)
}

/// A name prefix from a file name: lowercase DNS-label characters, ending in `-`.
pub fn name_prefix(source: &str) -> String {
    let stem = std::path::Path::new(source)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut clean: String = stem
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    clean.truncate(MAX_PREFIX);
    let clean = clean.trim_matches('-');
    if clean.is_empty() || source == "-" {
        "benchrun-".into()
    } else {
        format!("{clean}-")
    }
}

/// Parse `text` (read from `source`) as a BenchmarkRun manifest or a workload file.
pub fn parse(text: &str, source: &str) -> Result<BenchmarkRun> {
    let doc: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| bad_input(format!("{source} is not YAML: {e}")))?;
    let Some(map) = doc.as_mapping() else {
        return Err(bad_input(format!(
            "{source} is not a workload or a BenchmarkRun (not a YAML mapping)"
        )));
    };
    if let Some(kind) = map.get("kind") {
        let kind = kind.as_str().unwrap_or_default();
        if kind != "BenchmarkRun" {
            return Err(bad_input(format!(
                "{source} is a {kind:?}, not a BenchmarkRun or a workload"
            )));
        }
        let api_version = map
            .get("apiVersion")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        if api_version != "benchrun.dev/v1alpha1" {
            return Err(bad_input(format!(
                "{source}: apiVersion {api_version:?}, expected benchrun.dev/v1alpha1"
            )));
        }
        let run: BenchmarkRun = serde_yaml::from_value(doc.clone())
            .map_err(|e| bad_input(format!("{source} is not a valid BenchmarkRun: {e}")))?;
        return Ok(run);
    }
    let invalid =
        |e: benchrun_api::SpecError| bad_input(format!("{source} is not a valid workload: {e}"));
    let (workload, matrix) = match matrix::split(text).map_err(invalid)? {
        None => (Workload::from_yaml(text).map_err(invalid)?, None),
        Some((doc, m)) => {
            // The combinations are checked by the operator (and `validate` below); the
            // document without `matrix:` must be a workload on its own.
            let base =
                serde_yaml::to_string(&doc).map_err(|e| bad_input(format!("{source}: {e}")))?;
            (Workload::from_yaml(&base).map_err(invalid)?, Some(m))
        }
    };
    let spec = BenchmarkRunSpec {
        workload,
        secret_ref: None,
        ca_ref: None,
        workers: WorkersSpec::default(),
        volume: None,
        start_delay: None,
        timeout: None,
        failure_policy: Default::default(),
        cleanup: Default::default(),
        ttl_seconds_after_finished: None,
        thresholds: vec![],
        baseline_ref: None,
        matrix,
        oplog: None,
        control_plane: None,
    };
    let mut run = BenchmarkRun::new("", spec);
    run.metadata = ObjectMeta {
        generate_name: Some(name_prefix(source)),
        ..ObjectMeta::default()
    };
    // A local target needs a volume: a scratch directory unless the flags give a claim.
    if is_local(&run.spec.workload.target) {
        run.spec.volume = Some(VolumeSpec {
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..VolumeSpec::default()
        });
    }
    Ok(run)
}

fn is_local(target: &str) -> bool {
    target.starts_with("file://") || target.starts_with("direct://")
}

/// Apply the flags: they override what the manifest says.
pub fn apply(run: &mut BenchmarkRun, p: &Placement) -> Result<()> {
    if let Some(n) = &p.name {
        run.metadata.name = Some(n.clone());
        run.metadata.generate_name = None;
    }
    let w = &mut run.spec.workers;
    if p.per_node {
        w.per_node = Some(true);
        w.count = None;
    }
    if let Some(n) = p.workers {
        w.count = Some(n);
        w.per_node = None;
    }
    if !p.node_selector.is_empty() {
        w.node_selector = Some(p.node_selector.clone());
    }
    if p.claim_size.is_some() && p.storage_class.is_none() {
        let has_template = run
            .spec
            .volume
            .as_ref()
            .is_some_and(|v| v.claim_template.is_some());
        if !has_template {
            return Err(bad_input(
                "--claim-size needs --storage-class (or a volume.claimTemplate in the manifest)",
            ));
        }
    }
    if p.storage_class.is_some() || p.claim_size.is_some() {
        let old = run.spec.volume.take().unwrap_or_default();
        let mut claim = old
            .claim_template
            .clone()
            .unwrap_or_else(|| PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                ..PersistentVolumeClaimSpec::default()
            });
        if let Some(class) = &p.storage_class {
            claim.storage_class_name = Some(class.clone());
        }
        let size = p
            .claim_size
            .clone()
            .or_else(|| {
                claim
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage"))
                    .map(|q| q.0.clone())
            })
            .unwrap_or_else(|| DEFAULT_CLAIM_SIZE.into());
        let mut resources = claim.resources.take().unwrap_or_default();
        resources
            .requests
            .get_or_insert_with(BTreeMap::new)
            .insert("storage".into(), Quantity(size));
        claim.resources = Some(resources);
        run.spec.volume = Some(VolumeSpec {
            mount_path: old.mount_path,
            claim_template: Some(claim),
            ..VolumeSpec::default()
        });
    }
    Ok(())
}

/// `--secret NAME` (`spec.secretRef`: the storage's credentials) and `--ca KIND/NAME:KEY`
/// (`spec.caRef`: the CA of an https:// endpoint), so a wrapped workload file can
/// authenticate; on a manifest they replace its own.
pub fn credentials(run: &mut BenchmarkRun, secret: Option<&str>, ca: Option<&str>) -> Result<()> {
    use benchrun_operator::crd::ca::{CaRef, KeyRef};
    use benchrun_operator::crd::SecretRef;
    if let Some(name) = secret {
        if name.is_empty() {
            return Err(bad_input("--secret: give the Secret's name"));
        }
        run.spec.secret_ref = Some(SecretRef { name: name.into() });
    }
    if let Some(text) = ca {
        let bad = || {
            bad_input(format!(
                "--ca {text:?}: give secret/NAME:KEY or configmap/NAME:KEY (the key holding the PEM bundle)"
            ))
        };
        let (kind, rest) = text.split_once('/').ok_or_else(bad)?;
        let (name, key) = rest.split_once(':').ok_or_else(bad)?;
        if name.is_empty() || key.is_empty() {
            return Err(bad());
        }
        let k = Some(KeyRef {
            name: name.into(),
            key: key.into(),
        });
        run.spec.ca_ref = Some(match kind {
            "secret" | "secrets" => CaRef {
                secret: k,
                config_map: None,
            },
            "configmap" | "configmaps" | "cm" => CaRef {
                secret: None,
                config_map: k,
            },
            _ => return Err(bad()),
        });
    }
    Ok(())
}

/// What the operator would refuse in `run`, checked before anything is created.
pub fn validate(run: &BenchmarkRun) -> Result<()> {
    let name = match (&run.metadata.name, &run.metadata.generate_name) {
        (Some(n), _) if !n.is_empty() => n.clone(),
        (_, Some(prefix)) => format!("{prefix}xxxxx"),
        _ => return Err(bad_input("the run has no name: give --name")),
    };
    let problems = benchrun_operator::validate::run(&run.spec, &name);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(bad_input(format!("invalid run: {}", problems.join("; "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORKLOAD: &str = "target: file:///data/bench\nduration: 2s\nops: [{op: get}]\n";

    #[test]
    fn a_workload_is_wrapped_with_a_scratch_volume_and_a_generated_name() {
        let run = parse(WORKLOAD, "examples/My_Quick.start.yaml").expect("wraps");
        assert_eq!(
            run.metadata.generate_name.as_deref(),
            Some("my-quick-start-")
        );
        assert_eq!(run.metadata.name, None);
        assert_eq!(run.spec.workload.target, "file:///data/bench");
        assert!(run
            .spec
            .volume
            .as_ref()
            .and_then(|v| v.empty_dir.as_ref())
            .is_some());
        assert!(run.spec.matrix.is_none());
        validate(&run).expect("valid");
        let yaml = serde_yaml::to_string(&run).expect("yaml");
        assert!(yaml.contains("apiVersion: benchrun.dev/v1alpha1"), "{yaml}");
        assert!(yaml.contains("kind: BenchmarkRun"), "{yaml}");
    }

    #[test]
    fn an_object_store_workload_gets_no_volume_and_stdin_a_plain_prefix() {
        let run = parse(
            "target: s3://b/p/\nduration: 2s\nops: [{op: get}]\nstorage: {endpoint: http://127.0.0.1:9000, allowHttp: true}\n",
            "-",
        )
        .expect("wraps");
        assert!(run.spec.volume.is_none());
        assert_eq!(run.metadata.generate_name.as_deref(), Some("benchrun-"));
    }

    #[test]
    fn a_matrix_workload_becomes_a_matrix_run() {
        let text = format!("{WORKLOAD}matrix:\n  parameters:\n    concurrency: [1, 2]\n");
        let run = parse(&text, "sweep.yaml").expect("wraps");
        let m = run.spec.matrix.as_ref().expect("matrix");
        assert_eq!(m.combinations(), 2);
        assert!(!serde_yaml::to_string(&run.spec.workload)
            .unwrap()
            .contains("matrix"));
    }

    #[test]
    fn a_manifest_is_taken_as_it_is() {
        let text = "apiVersion: benchrun.dev/v1alpha1\nkind: BenchmarkRun\nmetadata: {name: m1}\nspec:\n  workload: {target: file:///data/x, duration: 1s, ops: [{op: put}]}\n  volume: {hostPath: {path: /tmp/x}}\n";
        let run = parse(text, "m.yaml").expect("manifest");
        assert_eq!(run.metadata.name.as_deref(), Some("m1"));
        assert!(run.spec.volume.as_ref().unwrap().host_path.is_some());
    }

    #[test]
    fn what_is_not_a_workload_is_bad_input_in_one_message() {
        for (text, want) in [
            ("just text", "not a YAML mapping"),
            ("apiVersion: v1\nkind: ConfigMap\n", "is a \"ConfigMap\""),
            (
                "apiVersion: benchrun.dev/v2\nkind: BenchmarkRun\n",
                "expected benchrun.dev/v1alpha1",
            ),
            (
                "target: file:///x\nops: [{op: get}]\nduration: 1s\nbogus: 1\n",
                "not a valid workload",
            ),
            ("[1, 2", "not YAML"),
        ] {
            let e = parse(text, "f.yaml").expect_err(text);
            assert_eq!(crate::exit::of_error(&e), crate::exit::BAD_INPUT);
            let msg = crate::exit::one_line(&e);
            assert!(msg.contains(want), "{text:?}: {msg}");
            assert!(msg.starts_with("f.yaml"), "{msg}");
        }
    }

    #[test]
    fn flags_override_placement_and_add_a_claim_per_worker() {
        let mut run = parse(WORKLOAD, "w.yaml").expect("wraps");
        let p = Placement {
            name: Some("fixed".into()),
            workers: Some(3),
            node_selector: node_selector(&["disk=ssd".into(), "zone = a".into()]).unwrap(),
            storage_class: Some("fast".into()),
            ..Placement::default()
        };
        apply(&mut run, &p).expect("applies");
        assert_eq!(run.metadata.name.as_deref(), Some("fixed"));
        assert_eq!(run.metadata.generate_name, None);
        assert_eq!(run.spec.workers.count, Some(3));
        assert_eq!(run.spec.workers.per_node, None);
        let sel = run.spec.workers.node_selector.clone().unwrap();
        assert_eq!(sel["disk"], "ssd");
        assert_eq!(sel["zone"], "a");
        let v = run.spec.volume.clone().unwrap();
        assert!(
            v.empty_dir.is_none(),
            "the claim replaces the scratch volume"
        );
        let claim = v.claim_template.unwrap();
        assert_eq!(claim.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(
            claim.resources.unwrap().requests.unwrap()["storage"].0,
            DEFAULT_CLAIM_SIZE
        );
        validate(&run).expect("valid");

        apply(
            &mut run,
            &Placement {
                per_node: true,
                claim_size: Some("1Gi".into()),
                ..Placement::default()
            },
        )
        .expect("applies");
        assert_eq!(run.spec.workers.per_node, Some(true));
        assert_eq!(run.spec.workers.count, None);
        let claim = run.spec.volume.unwrap().claim_template.unwrap();
        assert_eq!(claim.storage_class_name.as_deref(), Some("fast"), "kept");
        assert_eq!(
            claim.resources.unwrap().requests.unwrap()["storage"].0,
            "1Gi"
        );
    }

    #[test]
    fn bad_flags_are_bad_input() {
        assert!(node_selector(&["nokey".into()]).is_err());
        assert!(node_selector(&["=v".into()]).is_err());
        let mut run = parse(WORKLOAD, "w.yaml").expect("wraps");
        let e = apply(
            &mut run,
            &Placement {
                claim_size: Some("1Gi".into()),
                ..Placement::default()
            },
        )
        .expect_err("no class");
        assert_eq!(crate::exit::of_error(&e), crate::exit::BAD_INPUT);
        let mut run = parse(WORKLOAD, "w.yaml").expect("wraps");
        run.metadata.name = Some("x".repeat(70));
        run.metadata.generate_name = None;
        assert!(crate::exit::one_line(&validate(&run).unwrap_err()).contains("at most 63"));
    }
}
