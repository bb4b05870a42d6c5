//! The corpus of invalid BenchmarkRuns (tests/corpus/benchmarkrun/cases.yaml) against the real
//! API server and the operator: each is either rejected at admission (schema, CEL, strict
//! field validation, as `kubectl apply` does) or reported by the operator in `Valid=False`,
//! and either way the message names the field. No invalid run ever gets a pod.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use benchrun_operator::decode::api_resource;
use common::*;
use kube::api::{DynamicObject, Patch, PatchParams, ValidationDirective};
use kube::Api;
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    name: String,
    field: String,
    spec: String,
    /// The run's name, when the case is about the name (default: `name`).
    #[serde(default, rename = "runName")]
    run_name: Option<String>,
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn every_invalid_run_is_refused_or_reported_with_its_field() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/benchmarkrun/cases.yaml"
    ))
    .expect("read the corpus");
    let cases: Vec<Case> = serde_yaml::from_str(&text).expect("corpus parses");
    assert!(cases.len() >= 45, "only {} cases", cases.len());
    let env = env("op-corpus").await;
    let ar = api_resource();
    let runs: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), env.ns.name(), &ar);
    let strict = PatchParams {
        field_manager: Some("benchrun-corpus".into()),
        field_validation: Some(ValidationDirective::Strict),
        ..PatchParams::default()
    };
    let mut rejected = 0;
    let mut accepted: BTreeMap<String, String> = BTreeMap::new();
    let mut bad = Vec::new();
    for c in &cases {
        let name = c.run_name.clone().unwrap_or_else(|| c.name.clone());
        // Specs that YAML cannot type (`5 parsecs`) go as the string they are.
        let spec: serde_json::Value = serde_yaml::from_str(&c.spec).expect("case spec is YAML");
        let obj = serde_json::json!({
            "apiVersion": "benchrun.dev/v1alpha1",
            "kind": "BenchmarkRun",
            "metadata": {"name": name},
            "spec": spec,
        });
        match runs.patch(&name, &strict, &Patch::Apply(&obj)).await {
            Err(e) => {
                let msg = e.to_string();
                if msg.contains(&c.field) {
                    rejected += 1;
                } else {
                    bad.push(format!(
                        "{}: rejected, but the message does not name {}: {msg}",
                        c.name, c.field
                    ));
                }
            }
            Ok(_) => {
                accepted.insert(name, c.field.clone());
            }
        }
    }
    // What admission let through, the operator must report.
    let _op = spawn_operator(&env);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut reported = 0;
    for (name, field) in &accepted {
        loop {
            let o = runs.get(name).await.expect("read run");
            let valid = o
                .data
                .pointer("/status/conditions")
                .and_then(|c| c.as_array())
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Valid").cloned());
            if let Some(v) = valid {
                let msg = v["message"].as_str().unwrap_or_default();
                if v["status"] == "False" && msg.contains(field.as_str()) {
                    reported += 1;
                } else {
                    bad.push(format!(
                        "{name}: accepted, and Valid does not name {field}: {v}"
                    ));
                }
                break;
            }
            if tokio::time::Instant::now() > deadline {
                bad.push(format!("{name}: accepted and never reported"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    // Every run here is invalid: the namespace must hold no pod at all.
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(env.client.clone(), env.ns.name());
    let names: Vec<_> = pods
        .list(&Default::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(names.is_empty(), "invalid runs got pods: {names:?}");
    eprintln!(
        "corpus: {} cases, {rejected} rejected at admission, {reported} reported in Valid",
        cases.len()
    );
    assert!(
        bad.is_empty(),
        "{} cases failed:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
