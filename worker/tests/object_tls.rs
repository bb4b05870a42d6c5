//! `https://` object storage with a private CA (`storage.tls`), against the MinIO that
//! `tests/storage/up.sh` starts with a certificate signed by a CA it makes: a run with the CA
//! succeeds; one without fails at once with one error that says the certificate could not be
//! verified; an unreadable CA file is named before anything is written; and skipping
//! verification runs but says so on stderr, in the summary and in the table.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use benchrun_worker::OpKind;
use common::*;

/// A workload on the TLS MinIO with `tls` as its `storage.tls` (YAML flow map, may be empty).
fn tls_yaml(env: &HashMap<String, String>, creds: &Path, prefix: &str, tls: &str) -> String {
    format!(
        "target: s3://{bucket}/{prefix}\ntotalOps: 40\nconcurrency: 4\n\
         ops: [{{op: get, weight: 1}}, {{op: put, weight: 1}}]\nobjectSize: 16KiB\n\
         dataset: {{objects: 4}}\nread: {{verify: true}}\n\
         storage: {{endpoint: '{endpoint}', credentialsDir: '{creds}', tls: {tls}}}\n",
        bucket = env["BENCHRUN_S3_BUCKET"],
        endpoint = env["BENCHRUN_S3_TLS_ENDPOINT"],
        creds = creds.display(),
    )
}

/// Run the worker binary on `yaml`; its output and the summary (when it wrote one).
fn run_bin(yaml: &str) -> (Output, Option<serde_json::Value>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("workload.yaml");
    std::fs::write(&file, yaml).expect("write workload");
    let summary = dir.path().join("summary.json");
    let out = Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
        .args(["run", file.to_str().unwrap(), "--summary"])
        .arg(&summary)
        .args(["--progress", "never"])
        .output()
        .expect("run the worker");
    let json = std::fs::read_to_string(&summary)
        .ok()
        .map(|t| serde_json::from_str(&t).expect("summary is JSON"));
    (out, json)
}

/// What is stored under `prefix` on the TLS server, listed with the CA (so the listing
/// itself is trusted).
async fn stored(env: &HashMap<String, String>, creds: &Path, prefix: &str) -> usize {
    let w = workload(&tls_yaml(
        env,
        creds,
        prefix,
        &format!("{{caFile: '{}'}}", env["BENCHRUN_S3_TLS_CA"]),
    ));
    let t = benchrun_worker::targets::open(&w)
        .await
        .expect("open with the CA");
    t.list("").await.expect("list").objects.len()
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_the_ca_succeeds_over_https() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let prefix = unique("tls-with-ca");
    let w = workload(&tls_yaml(
        &env,
        creds.path(),
        &prefix,
        &format!("{{caFile: '{}'}}", env["BENCHRUN_S3_TLS_CA"]),
    ));
    let e = engine(w).await;
    let ds = e.prepare().await.expect("prepare over https");
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let total = s.total();
    assert_eq!(total.count, 40);
    assert_eq!(total.errors, 0, "{:?}", s.ops);
    assert!(s.ops[&OpKind::Get].bytes > 0, "verified GETs read data");
    assert!(!s.tls_verification_skipped);
    let c = e.cleanup().await.expect("cleanup");
    assert_eq!(c.errors, 0);
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ca_the_run_fails_at_once_with_one_clear_error() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let prefix = unique("tls-without-ca");
    let started = Instant::now();
    let (out, summary) = run_bin(&tls_yaml(&env, creds.path(), &prefix, "{}"));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a run without the CA must fail: {stderr}"
    );
    assert!(summary.is_none(), "no summary for a run that never started");
    let want = format!(
        "TLS: the certificate of {} could not be verified against the system's root certificates",
        env["BENCHRUN_S3_TLS_ENDPOINT"]
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(stderr.contains("unknown issuer"), "{stderr}");
    // One error, not one per op: the check before the prepare stage stopped it.
    assert_eq!(
        stderr.matches("could not be verified").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("preparing dataset"), "{stderr}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert_eq!(
        stored(&env, creds.path(), &prefix).await,
        0,
        "nothing written"
    );
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_ca_file_is_named_and_nothing_is_written() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let prefix = unique("tls-bad-ca");
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing-ca.pem");
    let (out, _) = run_bin(&tls_yaml(
        &env,
        creds.path(),
        &prefix,
        &format!("{{caFile: '{}'}}", missing.display()),
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("storage.tls.caFile: cannot read the CA file")
            && stderr.contains(&missing.display().to_string()),
        "{stderr}"
    );
    // A file that is no certificate is refused the same way.
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "hello\n").unwrap();
    let (out, _) = run_bin(&tls_yaml(
        &env,
        creds.path(),
        &prefix,
        &format!("{{caFile: '{}'}}", junk.display()),
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("storage.tls.caFile") && stderr.contains("junk.pem"),
        "{stderr}"
    );
    assert_eq!(
        stored(&env, creds.path(), &prefix).await,
        0,
        "nothing written"
    );
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipping_verification_runs_and_says_so_everywhere() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let prefix = unique("tls-insecure");
    let (out, summary) = run_bin(&tls_yaml(
        &env,
        creds.path(),
        &prefix,
        "{insecureSkipVerify: true}",
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    assert!(
        stderr.contains(&format!(
            "warning: TLS certificates of {} are NOT verified",
            env["BENCHRUN_S3_TLS_ENDPOINT"]
        )),
        "{stderr}"
    );
    let s = summary.expect("summary");
    assert_eq!(s["tlsVerificationSkipped"], true, "{s}");
    assert!(
        stdout.contains("WARNING: TLS certificates were NOT verified"),
        "{stdout}"
    );
    let errors: u64 = s["ops"]
        .as_object()
        .unwrap()
        .values()
        .map(|o| o["errors"].as_u64().unwrap())
        .sum();
    assert_eq!(errors, 0, "{s}");
}
