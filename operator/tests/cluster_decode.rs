//! One run the operator cannot decode must not stop it (real API server, in-process controller).
//!
//! Reproduced as it happens in a real cluster: a run stored under an older, looser schema (here
//! a CRD whose `spec` keeps unknown fields), read back after the current CRD is installed. A
//! typed watch would fail on the list that contains it and reconcile nothing; the operator must
//! report that run (`Valid=False`, reason `Undecodable`, the field named, an event) and keep
//! reconciling the others.

mod common;

use std::time::Duration;

use benchrun_operator::crd::Phase;
use benchrun_operator::decode::{api_resource, UNDECODABLE};
use common::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

/// Install a CRD whose `spec` accepts anything, as an older schema version might have.
async fn install_loose_crd(client: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut crd = serde_json::to_value(benchrun_operator::crd()).expect("crd json");
    let schema = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    schema["properties"]["spec"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    crds.patch(
        &name,
        &PatchParams::apply("benchrun-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap_or_else(|e| panic!("applying the loose CRD: {e}"));
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn an_undecodable_run_is_reported_and_the_others_go_on() {
    let env = env("op-decode").await;
    let ar = api_resource();
    let runs: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), env.ns.name(), &ar);
    // A size the Rust type cannot parse, stored while the loose schema is served. The schema
    // change reaches the API server's handlers asynchronously: retry until it is accepted.
    install_loose_crd(&env.client).await;
    let mut bad = DynamicObject::new("bad", &ar);
    bad.data = json!({"spec": {"workload": {
        "target": "file:///data", "duration": "5s", "ops": [{"op": "get"}], "objectSize": "1MB2"
    }}});
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match runs.create(&PostParams::default(), &bad).await {
            Ok(_) => break,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("not stored yet ({e}); retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("the loose schema never accepted the run: {e}"),
        }
    }
    // The current CRD again; then a good run beside the bad one, and the controller.
    install_crd(&env.client).await;
    let spec = "workload: {target: 'file:///d', duration: 1s, ops: [{op: get}], objectSize: {uniform: {min: 8KiB, max: 4KiB}}}\n";
    let api = create_run(&env, "good", spec).await;
    let _op = spawn_operator(&env);

    // The good run is reconciled: its own (validate-only) problem is reported.
    let run = wait_for(&api, "good", Duration::from_secs(60), "finished", finished).await;
    assert_eq!(phase(&run), Phase::Failed);
    let c = condition(&run, "Valid").expect("Valid condition on the good run");
    assert_eq!(c.reason, "InvalidWorkload", "{c:?}");

    // The bad run is reported on itself, naming the field.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        let o = runs.get("bad").await.expect("read the bad run");
        let st = o.data.get("status").cloned().unwrap_or_default();
        if st["phase"] == "Failed" {
            break st;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bad run was never reported: {o:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let valid = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Valid"))
        .unwrap_or_else(|| panic!("no Valid condition: {status}"));
    assert_eq!(valid["status"], "False", "{valid}");
    assert_eq!(valid["reason"], UNDECODABLE, "{valid}");
    let msg = valid["message"].as_str().unwrap_or_default();
    assert!(msg.contains("spec.workload.objectSize"), "{msg}");

    // And an event says so.
    let events: Api<Event> = Api::namespaced(env.client.clone(), env.ns.name());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = events.list(&ListParams::default()).await.expect("events");
        if list.items.iter().any(|e| {
            e.reason.as_deref() == Some(UNDECODABLE)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("bad")
        }) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {UNDECODABLE} event for the bad run"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
