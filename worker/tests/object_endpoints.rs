//! Several endpoints of one store (`storage.endpoints`): MinIO at :9000 and the second gateway
//! `tests/storage/up.sh` puts in front of it at :9010, each behind a counting proxy. Requests
//! spread round robin per operation with exact shares, the summary's per-endpoint counts match
//! what each gateway saw and add up to the totals, merged summaries add per endpoint, a lost
//! gateway fails its share only, and an empty list is refused before anything is written.

mod common;

use std::collections::HashMap;
use std::process::Command;

use benchrun_worker::{OpKind, Summary};
use common::*;

fn endpoints_yaml(
    env: &HashMap<String, String>,
    endpoints: &[String],
    creds: &str,
    prefix: &str,
    body: &str,
) -> String {
    let list: Vec<String> = endpoints.iter().map(|e| format!("'{e}'")).collect();
    format!(
        "target: s3://{bucket}/{prefix}\n{body}\nstorage: {{ endpoints: [{}], allowHttp: true, credentialsDir: '{creds}' }}\n",
        list.join(", "),
        bucket = env["BENCHRUN_S3_BUCKET"],
    )
}

/// Requests a proxy saw for object data (GET and HEAD: the ops of the mix).
fn reads(p: &Proxy) -> u64 {
    (p.count("GET") + p.count("HEAD")) as u64
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_spread_round_robin_and_are_counted_per_endpoint() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let a = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let b = Proxy::start(addr_of(&env["BENCHRUN_S3_GATEWAY2_ENDPOINT"])).await;
    let (ea, eb) = (a.endpoint(""), b.endpoint(""));
    let prefix = unique("endpoints-spread");
    let w = workload(&endpoints_yaml(
        &env,
        &[ea.clone(), eb.clone()],
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 60\nconcurrency: 4\nops: [{op: get, weight: 1}, {op: stat, weight: 1}]\n\
         objectSize: 4KiB\ndataset: { objects: 6 }",
    ));
    let e = engine(w.clone()).await;
    let ds = e.prepare().await.expect("prepare");
    // Prepare takes the endpoints in turn too: 6 PUTs, 3 each.
    assert_eq!((a.count("PUT"), b.count("PUT")), (3, 3));
    a.reset();
    b.reset();
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let total = s.total();
    assert_eq!((total.count, total.errors), (60, 0), "{:?}", s.ops);
    let (sa, sb) = (&s.endpoints[&ea], &s.endpoints[&eb]);
    // Ticket i to endpoint i mod 2: exact halves, whichever task ran them.
    assert_eq!((sa.count, sb.count), (30, 30));
    assert_eq!(sa.count + sb.count, total.count);
    assert_eq!(sa.requests + sb.requests, total.requests);
    // Each gateway saw exactly the requests counted under it (one per get or stat).
    assert_eq!((reads(&a), reads(&b)), (sa.requests, sb.requests));
    assert_eq!((sa.latency.count(), sb.latency.count()), (30, 30));

    // A second worker's summary merges per endpoint, exactly.
    let e2 = benchrun_worker::Engine::open(
        w,
        std::sync::Arc::new(benchrun_worker::Metrics::new()),
        "t2",
    )
    .await
    .expect("second worker");
    let ds2 = e2.prepare().await.expect("prepare 2");
    let s2 = e2
        .run(&ds2, None, std::future::pending())
        .await
        .expect("run 2");
    let m = Summary::merge(&[s.clone(), s2.clone()]).expect("merge");
    for ep in [&ea, &eb] {
        let (x, y, z) = (&s.endpoints[ep], &s2.endpoints[ep], &m.endpoints[ep]);
        assert_eq!(z.count, x.count + y.count);
        assert_eq!(z.requests, x.requests + y.requests);
        assert_eq!(z.latency.count(), x.latency.count() + y.latency.count());
    }
    let merged_per_endpoint: u64 = m.endpoints.values().map(|e| e.count).sum();
    assert_eq!(merged_per_endpoint, m.total().count);
    assert_eq!(m.total().count, 120);
    let table = benchrun_worker::report::table(&m);
    assert!(
        table.contains("per endpoint") && table.contains(&ea) && table.contains(&eb),
        "{table}"
    );
    assert_eq!(e.cleanup().await.expect("cleanup").errors, 0);
    assert_eq!(e2.cleanup().await.expect("cleanup 2").errors, 0);
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_gateway_fails_its_share_only() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let a = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let b = Proxy::start(addr_of(&env["BENCHRUN_S3_GATEWAY2_ENDPOINT"])).await;
    let (ea, eb) = (a.endpoint(""), b.endpoint(""));
    let prefix = unique("endpoints-lost");
    let w = workload(&endpoints_yaml(
        &env,
        &[ea.clone(), eb.clone()],
        creds.path().to_str().unwrap(),
        &prefix,
        "totalOps: 40\nconcurrency: 2\nops: [{op: stat}]\nobjectSize: 1KiB\ndataset: { objects: 4 }",
    ));
    let e = engine(w).await;
    let ds = e.prepare().await.expect("prepare");
    b.set_down(true);
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let (sa, sb) = (&s.endpoints[&ea], &s.endpoints[&eb]);
    assert_eq!((sa.count, sa.errors), (20, 0), "{sa:?}");
    assert_eq!((sb.count, sb.errors), (20, 20), "{sb:?}");
    assert_eq!(s.ops[&OpKind::Stat].errors, 20);
    assert_eq!(sb.latency.count(), 0, "failed ops have no latency");
    b.set_down(false);
    assert_eq!(e.cleanup().await.expect("cleanup").errors, 0);
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[test]
fn an_empty_endpoint_list_is_refused_before_anything_is_written() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("workload.yaml");
    std::fs::write(
        &file,
        endpoints_yaml(
            &env,
            &[],
            creds.path().to_str().unwrap(),
            &unique("endpoints-empty"),
            "totalOps: 10\nops: [{op: put}]",
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
        .args(["run", file.to_str().unwrap(), "--progress", "never"])
        .output()
        .expect("run the worker");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("storage.endpoints: the list is empty"),
        "{stderr}"
    );
    // Refused while reading the workload: no connection was even opened.
    assert!(!stderr.contains("preparing dataset"), "{stderr}");
}

/// `benchrun-worker run --summary` through `endpoints` (blocking: run off the runtime that
/// serves the proxies); the summary file's path and its JSON.
async fn cli_run(dir: &std::path::Path, name: &str, yaml: String) -> (String, serde_json::Value) {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let summary = dir.join(format!("{name}.json"));
    let args: Vec<String> = vec![
        "run".into(),
        file.display().to_string(),
        "--summary".into(),
        summary.display().to_string(),
        "--progress".into(),
        "never".into(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
            .args(&args)
            .output()
            .expect("run the worker")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&summary).unwrap();
    (
        summary.display().to_string(),
        serde_json::from_str(&text).unwrap(),
    )
}

/// `benchrun-worker ARGS`' standard output, which must succeed.
fn cli(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
        .args(args)
        .output()
        .expect("run the worker");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Two real runs through gateways: A through proxies 1 and 2, B through 1 and 3 (2 and 3 in
/// front of the second gateway). `compare` compares gateway 1 with the figures each summary
/// recorded for it and lists 2 and 3 as only in A and B; `report` has a per-endpoint table
/// whose counts are the summary's. A run through one endpoint has no per-endpoint output.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_report_show_each_endpoint_of_real_runs() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let p1 = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let p2 = Proxy::start(addr_of(&env["BENCHRUN_S3_GATEWAY2_ENDPOINT"])).await;
    let p3 = Proxy::start(addr_of(&env["BENCHRUN_S3_GATEWAY2_ENDPOINT"])).await;
    let (e1, e2, e3) = (p1.endpoint(""), p2.endpoint(""), p3.endpoint(""));
    let dir = tempfile::tempdir().unwrap();
    let body = "totalOps: 40\nconcurrency: 2\nops: [{op: get, weight: 1}, {op: stat, weight: 1}]\n\
                objectSize: 4KiB\ndataset: { objects: 4 }";
    let c = creds.path().to_str().unwrap();
    let yaml = |eps: &[String], name: &str| endpoints_yaml(&env, eps, c, &unique(name), body);
    let (a, ja) = cli_run(dir.path(), "a", yaml(&[e1.clone(), e2.clone()], "ep-cli-a")).await;
    let (b, jb) = cli_run(dir.path(), "b", yaml(&[e1.clone(), e3.clone()], "ep-cli-b")).await;
    // Each endpoint took half the measured ops.
    assert_eq!(ja["endpoints"][&e1]["count"], 20, "{}", ja["endpoints"]);
    assert_eq!(jb["endpoints"][&e3]["count"], 20, "{}", jb["endpoints"]);

    let v: serde_json::Value =
        serde_json::from_str(&cli(&["compare", &a, &b, "--format", "json"])).unwrap();
    let rows = v["endpoints"].as_array().expect("endpoint rows");
    let row = |url: &str| rows.iter().find(|r| r["endpoint"] == url).unwrap().clone();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(row(&e2)["onlyIn"], "a");
    assert_eq!(row(&e3)["onlyIn"], "b");
    let r1 = row(&e1);
    assert!(r1.get("onlyIn").is_none());
    let metrics: Vec<&str> = r1["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["metric"].as_str().unwrap())
        .collect();
    assert_eq!(metrics, ["opsPerSec", "p50Ms", "p99Ms", "errors"]);
    // The figures are the summaries' own: gateway 1's 20 ops over each run's measured stage.
    let rate = |j: &serde_json::Value| 20.0 / j["elapsedSeconds"].as_f64().unwrap();
    let ops = &r1["deltas"][0];
    assert!(
        (ops["a"].as_f64().unwrap() - rate(&ja)).abs() < 1e-9,
        "{ops}"
    );
    assert!(
        (ops["b"].as_f64().unwrap() - rate(&jb)).abs() < 1e-9,
        "{ops}"
    );
    assert_eq!(
        (r1["deltas"][3]["a"].as_f64(), r1["deltas"][3]["b"].as_f64()),
        (Some(0.0), Some(0.0))
    );
    // Every successful op of gateway 1 in each run was tested whole.
    let ks = &r1["latencyTest"];
    assert_eq!(
        (ks["n"].as_u64(), ks["m"].as_u64()),
        (Some(20), Some(20)),
        "{ks}"
    );
    let text = cli(&["compare", &a, &b]);
    assert!(text.contains("per endpoint (all ops):"), "{text}");
    assert!(text.contains(&format!("{e2}: only in A")), "{text}");
    assert!(text.contains(&format!("{e3}: only in B")), "{text}");
    let md = cli(&["compare", &a, &b, "--format", "markdown"]);
    assert!(md.contains(&format!("| {e1} | ops/s |")), "{md}");

    // report: the terminal and the Markdown both have B's endpoints with its counts.
    let term = cli(&["report", &b]);
    assert!(
        term.contains("per endpoint (all ops; round robin per operation)"),
        "{term}"
    );
    for url in [&e1, &e3] {
        let line = term
            .lines()
            .find(|l| l.starts_with(url.as_str()))
            .expect(url);
        assert!(line.contains(" 20 ") && line.contains("50.0%"), "{line}");
    }
    let out = dir.path().join("report");
    cli(&["report", &a, &b, "--out", out.to_str().unwrap()]);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## a: per endpoint"), "{md}");
    assert!(md.contains(&format!("| {e2} | 20 | 50.0% | 0 |")), "{md}");
    assert!(md.contains("## b: per endpoint"), "{md}");

    // One endpoint: nothing per endpoint anywhere.
    let (one, jo) = cli_run(
        dir.path(),
        "one",
        yaml(std::slice::from_ref(&e1), "ep-cli-one"),
    )
    .await;
    assert!(jo.get("endpoints").is_none(), "{jo}");
    assert!(!cli(&["compare", &one, &one]).contains("endpoint"));
    assert!(!cli(&["compare", &one, &one, "--format", "json"]).contains("endpoints"));
    assert!(!cli(&["report", &one]).contains("per endpoint"));
}
