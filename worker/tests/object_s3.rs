//! S3 target against a real MinIO on loopback (`tests/storage/up.sh`): every operation, sizes
//! seen by the server, verified ranged reads, exact request counts (no HEAD before GET) at a
//! counting proxy, a server lost mid-run, and bad credentials.

mod common;

use std::collections::HashMap;

use benchrun_worker::targets::{self, ChunkPlan, GetRequest, ReadCheck};
use benchrun_worker::OpKind;
use common::*;

/// A workload on MinIO (or on `endpoint`, e.g. a proxy in front of it).
fn s3_yaml(
    env: &HashMap<String, String>,
    endpoint: &str,
    creds: &str,
    prefix: &str,
    body: &str,
) -> String {
    format!(
        "target: s3://{bucket}/{prefix}\n{body}\nstorage: {{ endpoint: '{endpoint}', allowHttp: true, credentialsDir: '{creds}' }}\n",
        bucket = env["BENCHRUN_S3_BUCKET"],
    )
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_op_runs_and_objects_have_the_asked_sizes() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let prefix = unique("s3-every-op");
    let w = workload(&s3_yaml(
        &env,
        &env["BENCHRUN_S3_ENDPOINT"],
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 300\nconcurrency: 4\nops: [{op: get, weight: 40}, {op: put, weight: 25}, {op: stat, weight: 10}, {op: list, weight: 5}, {op: delete, weight: 20}]\n\
         objectSize: 64KiB\ndataset: { objects: 12, size: { uniform: { min: 1KiB, max: 3MiB } } }\nread: { verify: true }",
    ));
    let e = engine(w).await;
    let ds = e.prepare().await.expect("prepare");
    // The server's own listing has every dataset object at the size prepare asked for.
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
    assert!(
        want.iter().any(|(_, s)| *s > 1 << 20),
        "sizes are spread: {want:?}"
    );

    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    for op in OpKind::ALL.into_iter().filter(|o| !o.is_block()) {
        let st = &s.ops[&op];
        assert!(st.count > 0, "{op} never ran");
        assert_eq!(st.errors, 0, "{op} failed: {:?}", st.errors_by_kind);
    }
    // Range engine off: one streaming GET per object.
    assert_eq!(s.ops[&OpKind::Get].requests, s.ops[&OpKind::Get].count);
    let c = e.cleanup().await.expect("cleanup");
    assert_eq!(c.errors, 0);
    assert!(
        e.target().list("").await.expect("list").objects.is_empty(),
        "cleanup left objects"
    );
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_without_range_engine_is_one_request_and_no_head() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let prefix = unique("s3-one-get");
    let w = workload(&s3_yaml(
        &env,
        &proxy.endpoint(""),
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 40\nconcurrency: 4\nops: [{op: get}]\nobjectSize: 1MiB\ndataset: { objects: 5 }",
    ));
    let e = engine(w).await;
    let ds = e.prepare().await.expect("prepare");
    proxy.reset();
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let g = &s.ops[&OpKind::Get];
    assert_eq!((g.count, g.errors, g.requests), (40, 0, 40));
    assert_eq!(proxy.count("GET"), 40, "{:?}", proxy.requests());
    assert_eq!(proxy.count("HEAD"), 0);
    assert!(proxy.requests().iter().all(|r| r.range.is_none()));
    e.cleanup().await.expect("cleanup");
}

/// The experiment `read.headBeforeGet` (report 001's regression): exactly one HEAD before
/// each GET, as the server's side sees it at the proxy, counted in the summary.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_before_get_sends_one_head_per_get_and_reports_it() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let prefix = unique("s3-head-get");
    let w = workload(&s3_yaml(
        &env,
        &proxy.endpoint(""),
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 40\nconcurrency: 4\nops: [{op: get}]\nobjectSize: 64KiB\ndataset: { objects: 5 }\nread: { headBeforeGet: true }",
    ));
    let e = engine(w).await;
    let ds = e.prepare().await.expect("prepare");
    proxy.reset();
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let g = &s.ops[&OpKind::Get];
    assert_eq!((g.count, g.errors, g.heads, g.requests), (40, 0, 40, 80));
    assert_eq!(proxy.count("HEAD"), 40, "{:?}", proxy.requests());
    assert_eq!(proxy.count("GET"), 40, "{:?}", proxy.requests());
    assert_eq!(s.report[&OpKind::Get].requests_per_op, 2.0);
    let table = benchrun_worker::report::table(&s);
    assert!(
        table.contains("experiment read.headBeforeGet: 40 HEADs sent before the gets"),
        "{table}"
    );
    e.cleanup().await.expect("cleanup");
}

/// `read.bufferPool` on whole-object GETs: pooled, at most one buffer per task in flight
/// (concurrency 4); off, one per GET; every byte verified either way.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_object_gets_allocate_per_task_pooled_and_per_get_without_the_pool() {
    let env = storage_env();
    let creds = s3_creds(&env);
    for pooled in [true, false] {
        let prefix = unique("s3-bufpool");
        let w = workload(&s3_yaml(
            &env,
            &env["BENCHRUN_S3_ENDPOINT"],
            creds.path().to_str().unwrap(),
            &prefix,
            &format!(
                "totalOps: 40\nconcurrency: 4\nops: [{{op: get}}]\ndataset: {{ objects: 5, size: 256KiB }}\n\
                 read: {{ wholeObject: true, verify: true, bufferPool: {pooled} }}"
            ),
        ));
        let e = engine(w).await;
        let ds = e.prepare().await.expect("prepare");
        let s = e.run(&ds, None, std::future::pending()).await.expect("run");
        let g = &s.ops[&OpKind::Get];
        assert_eq!(
            (g.count, g.errors, g.bytes),
            (40, 0, 40 * 256 * 1024),
            "bufferPool: {pooled}"
        );
        if pooled {
            assert!(
                (1..=4).contains(&g.buffers_allocated),
                "at most one buffer per task: {}",
                g.buffers_allocated
            );
        } else {
            assert_eq!(g.buffers_allocated, 40, "one buffer per GET");
        }
        e.cleanup().await.expect("cleanup");
    }
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_engine_fetches_exact_ranges_with_no_head_and_right_bytes() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let prefix = unique("s3-range");
    // 10 MiB + 1 byte in 1 MiB ranges: 11 ranges, the last one a single byte.
    let size = (10 << 20) + 1;
    let w = workload(&s3_yaml(
        &env,
        &proxy.endpoint(""),
        creds.path().to_str().unwrap(),
        &prefix,
        &format!(
            "totalOps: 3\nconcurrency: 1\nops: [{{op: get}}]\nobjectSize: {size}\ndataset: {{ objects: 1 }}\n\
             read: {{ verify: true }}\nrangeEngine: {{ enabled: true, minSplitSize: 4MiB, chunkSize: 1MiB, maxConcurrentRanges: 3 }}"
        ),
    ));
    let e = engine(w).await;
    let ds = e.prepare().await.expect("prepare");
    proxy.reset();
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let g = &s.ops[&OpKind::Get];
    assert_eq!((g.count, g.errors), (3, 0), "{:?}", g.errors_by_kind);
    assert_eq!(g.requests, 33);
    assert_eq!(g.bytes, 3 * size);
    assert_eq!(proxy.count("GET"), 33);
    assert_eq!(proxy.count("HEAD"), 0, "the range engine must never HEAD");
    let mut ranges: Vec<String> = proxy
        .requests()
        .iter()
        .filter_map(|r| r.range.clone())
        .collect();
    ranges.sort();
    ranges.dedup();
    assert_eq!(ranges.len(), 11, "{ranges:?}");
    assert!(
        ranges.contains(&format!("bytes={}-{}", 10 << 20, 10 << 20)),
        "{ranges:?}"
    );

    // Size unknown (no listing): learned from the first range's Content-Range, still no HEAD.
    proxy.reset();
    let key = &ds.objects.get(0).expect("an object").key;
    let out = e
        .target()
        .get(
            key,
            &GetRequest {
                plan: ChunkPlan::Stream,
                check: verify(&e),
                size_hint: None,
            },
        )
        .await
        .expect("get without size hint");
    assert_eq!((out.bytes, out.requests), (size, 11));
    assert_eq!((proxy.count("GET"), proxy.count("HEAD")), (11, 0));
    e.cleanup().await.expect("cleanup");
}

fn verify(e: &benchrun_worker::Engine) -> ReadCheck {
    ReadCheck::Verify(std::sync::Arc::new(
        benchrun_worker::datagen::DataPattern::new(e.workload().seed, &e.workload().data()),
    ))
}

/// A PUT's body is not hashed unless `signPayload` asks for it (the hash was half of the
/// client's CPU per GiB written); with it, the header carries the body's SHA-256.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_are_unsigned_payload_unless_sign_payload() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    for (extra, signed) in [("", false), (", signPayload: true", true)] {
        let prefix = unique("s3-sign");
        let yaml = s3_yaml(
            &env,
            &proxy.endpoint(""),
            creds.path().to_str().unwrap(),
            &prefix,
            "totalOps: 6\nconcurrency: 2\nops: [{op: put}]\nobjectSize: 64KiB\ndataset: { prepare: false }",
        )
        .replace("allowHttp: true", &format!("allowHttp: true{extra}"));
        let e = engine(workload(&yaml)).await;
        let ds = e.prepare().await.expect("prepare");
        proxy.reset();
        let s = e.run(&ds, None, std::future::pending()).await.expect("run");
        let p = &s.ops[&OpKind::Put];
        assert_eq!((p.count, p.errors), (6, 0), "{:?}", p.errors_by_kind);
        let puts: Vec<_> = proxy
            .requests()
            .into_iter()
            .filter(|r| r.method == "PUT")
            .collect();
        assert_eq!(puts.len(), 6, "{puts:?}");
        for r in &puts {
            let h = r.content_sha256.as_deref().unwrap_or_default();
            if signed {
                assert!(
                    h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()),
                    "{r:?}"
                );
            } else {
                assert_eq!(h, "UNSIGNED-PAYLOAD", "{r:?}");
            }
        }
        e.cleanup().await.expect("cleanup");
    }
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_reads_and_multipart_puts() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let prefix = unique("s3-chunks");
    // 12 MiB objects, multipart from 8 MiB in 5 MiB parts: 3 parts + initiate + complete.
    let w = workload(&s3_yaml(
        &env,
        &proxy.endpoint(""),
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 4\nconcurrency: 1\nops: [{op: get}]\nobjectSize: 12MiB\ndataset: { objects: 2 }\n\
         read: { verify: true, chunkSize: 4MiB }\nwrite: { multipartThreshold: 8MiB, partSize: 5MiB }",
    ));
    let e = engine(w).await;
    proxy.reset();
    let ds = e.prepare().await.expect("prepare");
    assert_eq!(ds.prepare.as_ref().map(|p| p.requests), Some(10));
    assert_eq!(proxy.count("PUT"), 6, "{:?}", proxy.requests());
    assert_eq!(proxy.count("POST"), 4);
    for o in ds.objects.iter() {
        assert_eq!(e.target().stat(&o.key).await.expect("stat").size, 12 << 20);
    }
    proxy.reset();
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let g = &s.ops[&OpKind::Get];
    assert_eq!(
        (g.count, g.errors, g.requests),
        (4, 0, 12),
        "{:?}",
        g.errors_by_kind
    );
    assert_eq!((proxy.count("GET"), proxy.count("HEAD")), (12, 0));
    e.cleanup().await.expect("cleanup");
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_lost_mid_run_gives_counted_errors() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let prefix = unique("s3-lost");
    let w = workload(&s3_yaml(
        &env,
        &proxy.endpoint(""),
        creds.path().to_str().unwrap(),
        &prefix,
        "duration: 4s\nconcurrency: 4\nops: [{op: get, weight: 3}, {op: put, weight: 1}]\nobjectSize: 64KiB\ndataset: { objects: 8, cleanup: true }",
    ));
    let (e, metrics) = engine_with_metrics(w).await;
    let ds = e.prepare().await.expect("prepare");
    // Lost once operations have run (observed), not after a guessed time.
    let stopper = async {
        until(&metrics, "20 ops done", |ops, _| ops >= 20).await;
        proxy.stop();
    };
    let (s, ()) = tokio::join!(e.run(&ds, None, std::future::pending()), stopper);
    let s = s.expect("the run survives a lost server");
    let g = &s.ops[&OpKind::Get];
    assert!(
        g.count > g.errors && g.errors > 0,
        "some GETs before, errors after: {g:?}"
    );
    let kinds: Vec<&String> = s
        .ops
        .values()
        .flat_map(|o| o.errors_by_kind.keys())
        .collect();
    assert!(
        kinds.iter().all(|k| *k == "io" || *k == "timeout"),
        "{kinds:?}"
    );
    // Clean up through MinIO directly, the proxy is gone.
    let direct = workload(&s3_yaml(
        &env,
        &env["BENCHRUN_S3_ENDPOINT"],
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 1\nops: [{op: list}]",
    ));
    engine(direct).await.cleanup().await.expect("cleanup");
}

/// The server goes down mid-run and comes back: the run goes on, the outage is counted as
/// errors by kind, and operations succeed again after it. Each step waits for an observed
/// event (operations done, errors counted), not for a time; the open-loop rate (200/s for
/// 1,200 ops, about 6 s) leaves seconds of work after the server is back.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_down_then_back_mid_run_counts_the_outage_and_recovers() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let prefix = unique("s3-outage");
    let w = workload(&s3_yaml(
        &env,
        &proxy.endpoint(""),
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 1200
rateLimit: 200
concurrency: 8
ops: [{op: get}]
objectSize: 16KiB
dataset: { objects: 8, cleanup: true }",
    ));
    let (e, metrics) = engine_with_metrics(w).await;
    let ds = e.prepare().await.expect("prepare");
    let outage = async {
        until(&metrics, "100 ops done", |ops, _| ops >= 100).await;
        proxy.set_down(true);
        let (ops, _, errors) = metrics.totals();
        let ok_before = ops - errors;
        until(&metrics, "20 errors during the outage", |_, e| e >= 20).await;
        proxy.set_down(false);
        ok_before
    };
    let (s, ok_before) = tokio::join!(e.run(&ds, None, std::future::pending()), outage);
    let s = s.expect("the run survives the outage");
    let g = &s.ops[&OpKind::Get];
    assert_eq!(g.count, 1200, "every op ran: {g:?}");
    assert!(g.errors >= 20, "the outage is counted: {g:?}");
    assert!(
        g.count - g.errors > ok_before,
        "GETs succeed again after the server is back ({} ok, {ok_before} before the outage)",
        g.count - g.errors
    );
    let kinds: Vec<&String> = g.errors_by_kind.keys().collect();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| *k == "io" || *k == "timeout"),
        "{kinds:?}"
    );
    e.cleanup()
        .await
        .expect("cleanup after the server came back");
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_are_a_clear_error_without_the_secret() {
    let env = storage_env();
    let secret = "wrong-secret-Zq81xPl0m";
    let creds = creds_dir(&[
        ("accessKeyId", &env["AWS_ACCESS_KEY_ID"]),
        ("secretAccessKey", secret),
    ]);
    let w = workload(&s3_yaml(
        &env,
        &env["BENCHRUN_S3_ENDPOINT"],
        creds.path().to_str().unwrap(),
        &unique("s3-badcreds"),
        "totalOps: 1\nops: [{op: list}]",
    ));
    let e = targets::open(&w)
        .await
        .expect_err("bad secret must fail at open");
    let msg = e.to_string();
    assert!(
        msg.contains("credentials were rejected") && msg.contains("403"),
        "{msg}"
    );
    assert!(!msg.contains(secret), "the secret leaked: {msg}");
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[test]
fn endpoint_without_keys_is_a_config_error_not_a_metadata_lookup() {
    let env = storage_env();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("w.yaml");
    std::fs::write(
        &file,
        s3_yaml(
            &env,
            &env["BENCHRUN_S3_ENDPOINT"],
            dir.path().to_str().unwrap(),
            "x",
            "totalOps: 1\nops: [{op: list}]",
        ),
    )
    .expect("write workload");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
        .args(["run", "--progress", "never"])
        .arg(&file)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .output()
        .expect("run the worker");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no S3 keys were found") && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );
}

/// `put_file` (how an agent uploads its op-log): a file below the multipart threshold in one
/// PUT, a larger one streamed part by part; MinIO holds both byte for byte.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_uploaded_whole_or_in_parts_byte_for_byte() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let prefix = unique("s3-put-file");
    let w = workload(&s3_yaml(
        &env,
        &env["BENCHRUN_S3_ENDPOINT"],
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 1\nops: [{op: get}]\nwrite: { multipartThreshold: 5MiB, partSize: 5MiB }",
    ));
    let t = targets::open(&w).await.expect("open");
    let dir = tempfile::tempdir().expect("tempdir");
    let pattern = std::sync::Arc::new(benchrun_worker::datagen::DataPattern::unique(7));
    // 12 MiB + 5 bytes: two whole parts and a short last one.
    for (key, len) in [
        ("small.oplog.gz", 100 * 1024u64),
        ("large.oplog.gz", (12 << 20) + 5),
    ] {
        let path = dir.path().join(key);
        let bytes = pattern.payload(key, len).to_vec();
        std::fs::write(&path, &bytes).expect("write the local file");
        assert_eq!(t.put_file(key, &path).await.expect("upload"), len, "{key}");
        assert_eq!(t.stat(key).await.expect("stat").size, len, "{key}");
        let got = t
            .get(
                key,
                &GetRequest {
                    plan: ChunkPlan::Stream,
                    check: ReadCheck::Verify(pattern.clone()),
                    size_hint: None,
                },
            )
            .await
            .unwrap_or_else(|e| panic!("{key} reads back as written: {e}"));
        assert_eq!(got.bytes, len, "{key}");
        t.delete(key).await.expect("delete");
    }
    // A file that is not there: an error naming it, nothing stored.
    let missing = dir.path().join("missing.oplog.gz");
    let e = t
        .put_file("missing.oplog.gz", &missing)
        .await
        .expect_err("no file");
    assert!(e.to_string().contains("missing.oplog.gz"), "{e}");
    assert!(t.stat("missing.oplog.gz").await.is_err());
}

/// Failed, stuck and late operations against MinIO behind a proxy that holds every PUT (a
/// server stuck under overload), with a 2 s request timeout:
/// - a 1 s stage whose one PUT is held past the deadline: the window is 1 s, not the 2 s the
///   PUT took to time out; the PUT is reported in flight at the deadline with its age; and
///   its wait is in the all-ops latency, where the successful-only figures have none;
/// - a mix of GETs (served) and PUTs (held): the GETs' latency is the successful figures,
///   and the PUTs' timeouts lift the all-ops p99 of the run to the timeout.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_and_stuck_ops_are_in_the_latency_and_outside_the_window() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let prefix = unique("s3-stuck");
    let yaml = |body: &str| {
        s3_yaml(
            &env,
            &proxy.endpoint(""),
            creds.path().to_str().unwrap(),
            &prefix,
            body,
        )
        .replace("allowHttp: true,", "allowHttp: true, requestTimeout: 2s,")
    };
    let stuck = workload(&yaml(
        "duration: 1s\nconcurrency: 1\nops: [{op: put}]\nobjectSize: 4KiB\ndataset: { prepare: false }",
    ));
    let e = engine(stuck).await;
    let ds = e.prepare().await.expect("prepare");
    proxy.stall(Some("PUT"));
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    assert_eq!(s.elapsed_seconds, 1.0, "the window is the duration");
    let put = &s.ops[&OpKind::Put];
    assert_eq!((put.count, put.errors), (1, 1), "{:?}", put.errors_by_kind);
    assert_eq!(put.errors_by_kind.get("timeout"), Some(&1));
    assert_eq!(s.report[&OpKind::Put].ops_per_sec, 1.0, "1 op over 1 s");
    let f = s.in_flight_at_deadline.clone().expect("the held PUT");
    assert_eq!(f.ops, 1);
    assert!(f.age_max_us <= 1_000_000, "began inside the window: {f:?}");
    assert!(f.latency_max_us >= 2_000_000, "ran to its timeout: {f:?}");
    assert_eq!(put.failed_latency["timeout"].count(), 1);
    assert_eq!(put.latency.count(), 0);
    let r = &s.report[&OpKind::Put];
    assert_eq!(r.p99_ms, 0.0, "no successful op");
    let all = r.all_p99_ms.expect("all-ops figures");
    assert!(all >= 2_000.0, "the timeout's wait: {all} ms");
    let table = benchrun_worker::report::table(&s);
    assert!(table.contains("in flight at the deadline: 1 op"), "{table}");
    assert!(table.contains("all ops"), "{table}");

    // Some ops fail: GETs served, PUTs held until their timeout.
    proxy.stall(None);
    let mix = workload(&yaml(
        "totalOps: 24\nconcurrency: 2\nops: [{op: get, weight: 3}, {op: put, weight: 1}]\nobjectSize: 4KiB\ndataset: { objects: 4, size: 4KiB, cleanup: true }",
    ));
    let e = engine(mix).await;
    let ds = e.prepare().await.expect("prepare");
    proxy.stall(Some("PUT"));
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    proxy.stall(None);
    e.cleanup().await.expect("cleanup");
    let (get, put) = (&s.ops[&OpKind::Get], &s.ops[&OpKind::Put]);
    assert_eq!(get.errors, 0, "{:?}", get.errors_by_kind);
    assert!(put.count > 0 && put.errors == put.count, "{put:?}");
    assert_eq!(put.failed_latency["timeout"].count(), put.errors);
    let total = s.total();
    let all = total.all_latency().expect("failed ops recorded");
    assert_eq!(all.count(), get.latency.count() + put.errors);
    // The successful ops' tail is a GET's; the run's tail over all ops is the timeout.
    assert!(total.latency.quantile_us(1.0) < 2_000_000);
    assert!(all.quantile_us(1.0) >= 2_000_000);
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains("\"failedLatency\""), "in the summary");
}

/// An object truncated on MinIO between the run that wrote it and a verify run (which lists
/// the dataset): counted `short` and named, where the listing's own size would hide it.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_truncated_after_its_run_is_counted_short_by_a_verify_run() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let prefix = unique("s3-short");
    let yaml = |body: &str| {
        workload(&s3_yaml(
            &env,
            &env["BENCHRUN_S3_ENDPOINT"],
            creds.path().to_str().unwrap(),
            &prefix,
            body,
        ))
    };
    let write = engine(yaml(
        "totalOps: 1\nops: [{op: stat}]\ndataset: { objects: 6, size: 64KiB, cleanup: false }",
    ))
    .await;
    let ds = write.prepare().await.expect("prepare");
    write
        .run(&ds, None, std::future::pending())
        .await
        .expect("run");
    let verify = "totalOps: 6\nconcurrency: 1\nops: [{op: get}]\nread: { verify: true }\ndataset: { objects: 6, size: 64KiB, prepare: false, cleanup: false, access: sequential }";
    let run = |e: benchrun_worker::Engine| async move {
        let ds = e.prepare().await.expect("list");
        e.run(&ds, None, std::future::pending()).await.expect("run")
    };
    let clean = run(engine(yaml(verify)).await).await;
    assert_eq!(
        clean.ops[&OpKind::Get].errors,
        0,
        "a clean dataset verifies"
    );
    // Stored short: the first 10,000 bytes of what was there, put back under the same key.
    let key = "benchrun/obj-00000002";
    let p = benchrun_worker::datagen::DataPattern::unique(write.workload().seed);
    let head = p.payload(key, 64 << 10).range(0..10_000);
    let short = benchrun_worker::targets::Payload::new(head);
    write.target().put(key, short).await.expect("truncate");
    let s = run(engine(yaml(verify)).await).await;
    let g = &s.ops[&OpKind::Get];
    assert_eq!(g.errors_by_kind.get("short"), Some(&1), "{g:?}");
    assert_eq!(g.errors, 1);
    let d = &g.data_errors;
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].kind.as_str(), d[0].key.as_str(), d[0].offset),
        ("short", key, 10_000)
    );
    write.cleanup().await.expect("cleanup");
}
