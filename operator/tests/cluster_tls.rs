//! `spec.caRef` on the real two-node test cluster against the MinIO with TLS on the host
//! (tests/cluster/up.sh + image.sh, tests/storage/up.sh): its certificate names the `vm` node's
//! pod bridge 10.88.0.1, where this process forwards to it (`common::s3`), and is signed by
//! the CA tests/storage/up.sh made. With that CA as a ConfigMap key the run succeeds over
//! https; without it the workers stop at once and the run fails with the cause named.
//!
//! These tests fail (never skip) when the cluster or the storage servers are not up, saying
//! which script to run.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use benchrun_operator::crd::Phase;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::Api;

use common::s3::*;
use common::*;

/// The TLS MinIO's loopback address and its CA (PEM), from storage.env.
fn tls_server(storage: &HashMap<String, String>) -> (SocketAddr, String) {
    let (Some(ep), Some(ca)) = (
        storage.get("BENCHRUN_S3_TLS_ENDPOINT"),
        storage.get("BENCHRUN_S3_TLS_CA"),
    ) else {
        panic!("storage.env has no TLS server (BENCHRUN_S3_TLS_ENDPOINT, BENCHRUN_S3_TLS_CA); run tests/storage/up.sh");
    };
    let addr: SocketAddr = ep
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .parse()
        .unwrap_or_else(|e| panic!("BENCHRUN_S3_TLS_ENDPOINT {ep}: {e}"));
    assert!(addr.ip().is_loopback(), "{ep} must be a loopback address");
    let pem = std::fs::read_to_string(ca)
        .unwrap_or_else(|e| panic!("{ca}: {e}; run tests/storage/up.sh"));
    (addr, pem)
}

/// The CA as key `ca.crt` of ConfigMap `s3-ca`.
async fn create_ca_config_map(env: &Env, pem: &str) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("s3-ca".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("ca.crt".to_string(), pem.to_string())])),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(env.client.clone(), env.ns.name())
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("creating ConfigMap s3-ca: {e}"));
}

fn tls_spec(bucket: &str, endpoint: &str, prefix: &str, extra: &str) -> String {
    format!(
        r#"
workload:
  target: s3://{bucket}/{prefix}/
  totalOps: 40
  concurrency: 2
  ops: [{{op: get, weight: 1}}, {{op: put, weight: 1}}]
  objectSize: 16KiB
  dataset: {{objects: 4}}
  storage: {{endpoint: '{endpoint}', pathStyle: true, region: us-east-1}}
secretRef: {{name: {CREDS}}}
workers:
  count: 1
  resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
{extra}
startDelay: 3s
timeout: 3m
"#
    )
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_from_a_config_map_verifies_the_endpoint_and_without_it_the_run_fails() {
    let storage = storage_env();
    let (addr, pem) = tls_server(&storage);
    let env = env("op-s3-tls").await;
    let fwd = for_pods(&env, "https", addr).await;
    create_creds_secret(&env, &storage).await;
    create_ca_config_map(&env, &pem).await;
    let _op = spawn_operator(&env);
    let bucket = &storage["BENCHRUN_S3_BUCKET"];
    let prefix = env.ns.name().to_string();

    let spec = tls_spec(
        bucket,
        &fwd.endpoint,
        &prefix,
        "caRef: {configMap: {name: s3-ca, key: ca.crt}}",
    );
    let api = create_run(&env, "tls", &spec).await;
    let run = wait_for(&api, "tls", Duration::from_secs(150), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    // `all` is every op of the run (the per-op rows add up to it).
    let all = &st.results["all"];
    assert_eq!((all.count, all.errors), (40, 0), "{:#?}", st.results);

    // The same run without the CA: the worker's check refuses the certificate at once.
    let spec = tls_spec(bucket, &fwd.endpoint, &format!("{prefix}-noca"), "");
    let api = create_run(&env, "noca", &spec).await;
    let run = wait_for(&api, "noca", Duration::from_secs(150), "finished", finished).await;
    assert_eq!(phase(&run), Phase::Failed);
    let c = condition(&run, "Complete").expect("Complete condition");
    assert!(
        c.message.contains("could not be verified") && c.message.contains("unknown issuer"),
        "the condition names the refused certificate: {c:?}"
    );
    drop(fwd);
}
