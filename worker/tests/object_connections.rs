//! Connections of a run on MinIO (`tests/storage/up.sh`), as the server's side sees them at a
//! counting proxy: each shard opens its tasks' connections before the start, so no measured
//! op waits on a TCP handshake (issue 28, connections).

mod common;

use std::collections::BTreeMap;

use benchrun_worker::OpKind;
use common::*;

/// With 8 tasks on 2 shards and no warm-up, every GET of the measured stage runs on a
/// connection that served a request before it: the shard's listing sent before the gate
/// opened. A connection opened by a measured GET (its first request a GET) would put the
/// handshake in that op's latency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_measured_op_opens_a_connection() {
    let env = storage_env();
    let creds = s3_creds(&env);
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let prefix = unique("s3-conns");
    let yaml = format!(
        "target: s3://{bucket}/{prefix}\ntotalOps: 200\nconcurrency: 8\nops: [{{op: get}}]\nobjectSize: 4KiB\ndataset: {{ objects: 4 }}\nstorage: {{ endpoint: '{endpoint}', allowHttp: true, credentialsDir: '{creds}' }}\n",
        bucket = env["BENCHRUN_S3_BUCKET"],
        endpoint = proxy.endpoint(""),
        creds = creds.path().to_str().unwrap(),
    );
    // Two shards, so that each opens its own tasks' connections on its own client.
    std::env::set_var("BENCHRUN_IO_THREADS", "2");
    let e = engine(workload(&yaml)).await;
    let ds = e.prepare().await.expect("prepare");
    let before_run = proxy.connections();
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    let g = &s.ops[&OpKind::Get];
    assert_eq!((g.count, g.errors), (200, 0));

    // The first request of each connection the run opened.
    let mut first: BTreeMap<u64, String> = BTreeMap::new();
    for r in proxy.requests() {
        if r.conn >= before_run {
            first.entry(r.conn).or_insert(r.method);
        }
    }
    let opened_by_get: Vec<_> = first.iter().filter(|(_, m)| *m == "GET").collect();
    assert!(
        opened_by_get.is_empty(),
        "connections opened by a measured GET: {opened_by_get:?} of {first:?}"
    );
    // Each task had a connection of its own before the start.
    assert!(first.len() >= 8, "connections opened by the run: {first:?}");
    e.cleanup().await.expect("cleanup");
}
