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
