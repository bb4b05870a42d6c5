//! Azure target against a real Azurite on loopback (`tests/storage/up.sh`): every operation,
//! multipart (block) uploads, the range engine's exact requests, bad credentials.

mod common;

use std::collections::HashMap;

use benchrun_worker::targets;
use benchrun_worker::OpKind;
use common::*;

fn az_yaml(
    env: &HashMap<String, String>,
    endpoint: &str,
    creds: &str,
    prefix: &str,
    body: &str,
) -> String {
    format!(
        "target: az://{c}/{prefix}\n{body}\nstorage: {{ endpoint: '{endpoint}', allowHttp: true, credentialsDir: '{creds}' }}\n",
        c = env["BENCHRUN_AZURE_CONTAINER"],
    )
}

/// The account path of the Azurite endpoint (`/devstoreaccount1`), to put behind a proxy.
fn account_path(env: &HashMap<String, String>) -> String {
    let ep = env["BENCHRUN_AZURE_ENDPOINT"].trim_start_matches("http://");
    ep.find('/')
        .map(|i| ep[i..].to_string())
        .unwrap_or_default()
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_op_runs_and_objects_have_the_asked_sizes() {
    let env = storage_env();
    let creds = azure_creds(&env);
    let w = workload(&az_yaml(
        &env,
        &env["BENCHRUN_AZURE_ENDPOINT"],
        creds.path().to_str().unwrap(),
        &unique("az-every-op"),
        "totalOps: 200\nconcurrency: 4\nops: [{op: get, weight: 40}, {op: put, weight: 25}, {op: stat, weight: 10}, {op: list, weight: 5}, {op: delete, weight: 20}]\n\
         objectSize: 64KiB\ndataset: { objects: 10, size: { uniform: { min: 1KiB, max: 2MiB } } }\nread: { verify: true }",
    ));
    let e = engine(w).await;
    let ds = e.prepare().await.expect("prepare");
    let listed = e.target().list("benchrun/").await.expect("list");
    let mut want: Vec<(String, u64)> = ds
        .objects
        .iter()
        .map(|o| (o.key.into_owned(), o.size))
        .collect();
    let mut got: Vec<(String, u64)> = listed
        .objects
        .iter()
        .map(|o| (o.key.clone(), o.size))
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    for op in OpKind::ALL.into_iter().filter(|o| !o.is_block()) {
        let st = &s.ops[&op];
        assert!(st.count > 0, "{op} never ran");
        assert_eq!(st.errors, 0, "{op} failed: {:?}", st.errors_by_kind);
    }
    assert_eq!(s.ops[&OpKind::Get].requests, s.ops[&OpKind::Get].count);
    assert_eq!(e.cleanup().await.expect("cleanup").errors, 0);
    assert!(e.target().list("").await.expect("list").objects.is_empty());
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_upload_and_range_engine_requests_are_exact() {
    let env = storage_env();
    let creds = azure_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_AZURE_ENDPOINT"])).await;
    let size = 9 << 20;
    let w = workload(&az_yaml(
        &env,
        &proxy.endpoint(&account_path(&env)),
        creds.path().to_str().unwrap(),
        &unique("az-range"),
        &format!(
            "totalOps: 2\nconcurrency: 1\nops: [{{op: get}}]\nobjectSize: {size}\ndataset: {{ objects: 1 }}\n\
             read: {{ verify: true }}\nwrite: {{ multipartThreshold: 8MiB, partSize: 5MiB }}\n\
             rangeEngine: {{ enabled: true, minSplitSize: 4MiB, chunkSize: 2MiB, maxConcurrentRanges: 4 }}"
        ),
    ));
    let e = engine(w).await;
    proxy.reset();
    let ds = e.prepare().await.expect("prepare");
    // Two blocks and the block list.
    assert_eq!(ds.prepare.as_ref().map(|p| p.requests), Some(3));
    assert_eq!(proxy.count("PUT"), 3, "{:?}", proxy.requests());
    assert_eq!(
        e.target()
            .stat(&ds.objects.get(0).expect("an object").key)
            .await
            .expect("stat")
            .size,
        size
    );
    proxy.reset();
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let g = &s.ops[&OpKind::Get];
    // 9 MiB in 2 MiB ranges: 5 per GET.
    assert_eq!(
        (g.count, g.errors, g.requests),
        (2, 0, 10),
        "{:?}",
        g.errors_by_kind
    );
    assert_eq!((proxy.count("GET"), proxy.count("HEAD")), (10, 0));
    e.cleanup().await.expect("cleanup");
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_key_is_a_clear_error_without_the_secret() {
    let env = storage_env();
    // A well-formed (base64) but wrong key.
    let secret = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk=";
    let creds = creds_dir(&[
        ("accountName", &env["AZURE_STORAGE_ACCOUNT_NAME"]),
        ("accountKey", secret),
    ]);
    let w = workload(&az_yaml(
        &env,
        &env["BENCHRUN_AZURE_ENDPOINT"],
        creds.path().to_str().unwrap(),
        &unique("az-badcreds"),
        "totalOps: 1\nops: [{op: list}]",
    ));
    let msg = targets::open(&w)
        .await
        .expect_err("bad key must fail at open")
        .to_string();
    assert!(
        msg.contains("credentials were rejected") && msg.contains("403"),
        "{msg}"
    );
    assert!(!msg.contains(secret), "the secret leaked: {msg}");
}
