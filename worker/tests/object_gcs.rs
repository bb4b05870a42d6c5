//! GCS target against a real fake-gcs-server on loopback (`tests/storage/up.sh`). It refuses
//! object_store's XML PUT, so objects are seeded through its JSON API and the workload lists
//! them (`dataset.prepare: false`); GET, ranged GET, STAT, LIST and DELETE go through the target.

mod common;

use std::sync::Arc;

use benchrun_worker::datagen::DataPattern;
use benchrun_worker::targets::{self, ChunkPlan, GetRequest, ReadCheck};
use benchrun_worker::OpKind;
use common::*;

const SIZE: u64 = (3 << 20) + 12345;

/// Seed `n` objects of SIZE under `prefix` with the bytes benchrun's PUT would write, so
/// verified reads can check them.
async fn seed(
    env: &std::collections::HashMap<String, String>,
    prefix: &str,
    n: u32,
) -> Vec<String> {
    let pattern = DataPattern::unique(1);
    let mut keys = Vec::new();
    for i in 0..n {
        let key = format!("benchrun/obj-{i:08}");
        let payload = pattern.payload(&key, SIZE);
        let data: Vec<u8> = payload.to_vec();
        gcs_seed(
            &env["BENCHRUN_GCS_ENDPOINT"],
            &env["BENCHRUN_GCS_BUCKET"],
            &format!("{prefix}/{key}"),
            &data,
        )
        .await;
        keys.push(key);
    }
    keys
}

fn gcs_yaml(env: &std::collections::HashMap<String, String>, prefix: &str, body: &str) -> String {
    format!(
        "target: gs://{b}/{prefix}\n{body}\nstorage: {{ endpoint: '{ep}', allowHttp: true }}\n",
        b = env["BENCHRUN_GCS_BUCKET"],
        ep = env["BENCHRUN_GCS_ENDPOINT"],
    )
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_stat_list_on_listed_dataset_then_delete() {
    let env = storage_env();
    let prefix = unique("gcs-ops");
    let keys = seed(&env, &prefix, 4).await;
    // With `read.verify`, a listed `obj-N` is expected at the size the workload gives it (a
    // shorter one is a `short` error, not a smaller object): say the seeded size.
    let w = workload(&gcs_yaml(
        &env,
        &prefix,
        &format!(
            "totalOps: 60\nconcurrency: 3\nops: [{{op: get, weight: 6}}, {{op: stat, weight: 2}}, {{op: list, weight: 1}}]\n\
             objectSize: {SIZE}\ndataset: {{ prepare: false, cleanup: true }}\nread: {{ verify: true }}"
        ),
    ));
    let e = engine(w).await;
    let ds = e.prepare().await.expect("list the seeded dataset");
    let mut listed: Vec<(String, u64)> = ds
        .objects
        .iter()
        .map(|o| (o.key.into_owned(), o.size))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        keys.iter().map(|k| (k.clone(), SIZE)).collect::<Vec<_>>()
    );
    let s = e.run(&ds, None, std::future::pending()).await.expect("run");
    for op in [OpKind::Get, OpKind::Stat, OpKind::List] {
        let st = &s.ops[&op];
        assert!(st.count > 0 && st.errors == 0, "{op}: {st:?}");
    }
    assert_eq!(s.ops[&OpKind::Get].bytes, s.ops[&OpKind::Get].count * SIZE);

    // DELETE, then the object is gone.
    let t = e.target();
    t.delete(&keys[0]).await.expect("delete");
    let gone = t.stat(&keys[0]).await.expect_err("deleted object");
    assert_eq!(gone.kind(), "not_found", "{gone}");
    // With `prepare: false` cleanup removes only what the run wrote (nothing here): the seeded
    // dataset is the user's, not the run's.
    let c = e.cleanup().await.expect("cleanup");
    assert_eq!((c.objects, c.errors), (0, 0));
    assert_eq!(t.list("").await.expect("list").objects.len(), 3);
    for k in &keys[1..] {
        t.delete(k).await.expect("delete");
    }
    assert!(t.list("").await.expect("list").objects.is_empty());
}

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranged_reads_return_the_right_bytes() {
    let env = storage_env();
    let prefix = unique("gcs-ranges");
    let keys = seed(&env, &prefix, 1).await;
    let w = workload(&gcs_yaml(
        &env,
        &prefix,
        "totalOps: 1\nops: [{op: get}]\ndataset: { prepare: false }\n\
         rangeEngine: { enabled: true, minSplitSize: 1MiB, chunkSize: 512KiB, maxConcurrentRanges: 3 }",
    ));
    let t = targets::open(&w).await.expect("open");
    let check = ReadCheck::Verify(Arc::new(DataPattern::unique(1)));
    // Range engine, size unknown: learned from the first range; 7 ranges of 512 KiB.
    let out = t
        .get(
            &keys[0],
            &GetRequest {
                plan: ChunkPlan::Stream,
                check: check.clone(),
                size_hint: None,
            },
        )
        .await
        .expect("range engine get");
    assert_eq!((out.bytes, out.requests), (SIZE, 7));
    // A wrong byte is caught: checking against another seed must fail as corrupt.
    let wrong = ReadCheck::Verify(Arc::new(DataPattern::unique(2)));
    let e = t
        .get(
            &keys[0],
            &GetRequest {
                plan: ChunkPlan::Stream,
                check: wrong,
                size_hint: Some(SIZE),
            },
        )
        .await
        .expect_err("verification against other data");
    assert_eq!(e.kind(), "corrupt");
    // Sequential ranged GETs (range engine off) of 1 MiB: 4 requests.
    let w = workload(&gcs_yaml(
        &env,
        &prefix,
        "totalOps: 1\nops: [{op: get}]\ndataset: { prepare: false }",
    ));
    let t = targets::open(&w).await.expect("open");
    let out = t
        .get(
            &keys[0],
            &GetRequest {
                plan: ChunkPlan::Fixed(1 << 20),
                check,
                size_hint: None,
            },
        )
        .await
        .expect("chunked get");
    assert_eq!((out.bytes, out.requests), (SIZE, 4));
    t.delete(&keys[0]).await.expect("delete");
}
