//! `spec.oplog` on the real two-node test cluster against MinIO on the host (tests/cluster/up.sh,
//! image.sh and tests/storage/up.sh): two workers record every operation and upload their
//! op-logs through the run's own S3 settings; each worker's status names its log, and each log,
//! read back from MinIO on 127.0.0.1, holds exactly that worker's measured operations.
//!
//! Pods reach MinIO through this process's forwarder on the `vm` node's bridge address, as in
//! `cluster_s3.rs` (`common::s3`). These tests fail (never skip) when the cluster or the storage
//! servers are not up, saying which script to run.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use benchrun_operator::crd::{Phase, WorkerPhase};
use benchrun_worker::oplog::{Phase as RecordPhase, Reader};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStoreExt;

use common::s3::*;
use common::*;

/// Read `key` from MinIO on loopback, with the test's own keys.
async fn fetch(storage: &HashMap<String, String>, key: &str) -> Vec<u8> {
    let store = AmazonS3Builder::new()
        .with_endpoint(&storage["BENCHRUN_S3_ENDPOINT"])
        .with_allow_http(true)
        .with_bucket_name(&storage["BENCHRUN_S3_BUCKET"])
        .with_access_key_id(&storage["AWS_ACCESS_KEY_ID"])
        .with_secret_access_key(&storage["AWS_SECRET_ACCESS_KEY"])
        .with_region(
            storage
                .get("AWS_REGION")
                .map(String::as_str)
                .unwrap_or("us-east-1"),
        )
        .with_virtual_hosted_style_request(false)
        .build()
        .expect("an S3 client for MinIO");
    store
        .get(&ObjectPath::from(key))
        .await
        .unwrap_or_else(|e| panic!("fetching {key} from MinIO: {e}"))
        .bytes()
        .await
        .unwrap_or_else(|e| panic!("reading {key} from MinIO: {e}"))
        .to_vec()
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_worker_uploads_its_oplog_beside_the_results() {
    let storage = storage_env();
    let env = env("op-oplog").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let _op = spawn_operator(&env);
    let (bucket, prefix) = (&storage["BENCHRUN_S3_BUCKET"], env.ns.name().to_string());
    let spec = format!(
        r#"
workload:
  target: s3://{bucket}/{prefix}/data/
  duration: 2s
  concurrency: 2
  ops: [{{op: get, weight: 60}}, {{op: put, weight: 30}}, {{op: stat, weight: 10}}]
  objectSize: 64KiB
  dataset: {{objects: 16}}
  storage: {{endpoint: '{endpoint}', allowHttp: true, pathStyle: true, region: us-east-1}}
secretRef: {{name: {CREDS}}}
oplog: {{uri: 's3://{bucket}/{prefix}/oplogs/'}}
workers:
  count: 2
  resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
cleanup: OnSuccess
startDelay: 3s
timeout: 3m
"#,
        endpoint = fwd.endpoint,
    );
    let api = create_run(&env, "ol", &spec).await;
    let run = wait_for(&api, "ol", Duration::from_secs(150), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert_eq!(st.workers.len(), 2, "{:#?}", st.workers);

    let summaries = worker_summaries(&env, &run).await;
    let dir = tempfile::tempdir().expect("tempdir");
    for (w, summary) in st.workers.iter().zip(&summaries) {
        assert_eq!(w.phase, WorkerPhase::Collected, "{w:?}");
        let log = w
            .oplog
            .clone()
            .unwrap_or_else(|| panic!("{}: no oplog in status: {w:?}", w.name));
        assert_eq!(log.error, None, "{}: upload failed", w.name);
        // The run's own directory: namespace, name and UID.
        let key = format!(
            "{prefix}/oplogs/{}/ol/{}/{}.oplog.gz",
            env.ns.name(),
            run.metadata.uid.as_deref().expect("the run has a uid"),
            w.name
        );
        assert_eq!(
            log.uri.as_deref(),
            Some(format!("s3://{bucket}/{key}").as_str())
        );
        // The summary the operator kept says the same.
        let so = summary
            .oplog
            .clone()
            .expect("the worker's summary has its oplog");
        assert_eq!(
            (so.uri, so.records, so.dropped),
            (log.uri.clone(), log.records, log.dropped)
        );

        let path = dir.path().join(format!("{}.oplog.gz", w.name));
        std::fs::write(&path, fetch(&storage, &key).await).expect("write the fetched log");
        let mut r = Reader::open(&path).expect("the fetched log opens");
        assert_eq!(r.header().worker_id, w.name);
        let (mut all, mut measured) = (0u64, 0u64);
        while let Some(rec) = r.next_record().expect("the fetched log reads whole") {
            all += 1;
            measured += u64::from(rec.phase == RecordPhase::Measured);
        }
        let ops: u64 = summary.ops.values().map(|o| o.count).sum();
        assert!(ops > 0, "{}: no ops", w.name);
        assert_eq!(measured, ops, "{}: measured records = its op count", w.name);
        assert_eq!(all, log.records, "{}", w.name);
        assert_eq!(log.dropped, 0, "{}", w.name);
    }
    wait_pods_gone(&env, "ol", "cleanup: OnSuccess of a successful run").await;
    drop(fwd);
}
