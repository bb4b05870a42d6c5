//! One conformance suite for every target: the same operations on `file://`, `direct://`,
//! `s3://` (MinIO), `az://` (Azurite) and `gs://` (fake-gcs-server), with the same results, the
//! same error kinds and, for object storage, the same HTTP requests counted on the wire by a
//! proxy (one request per GET, no HEAD before a read, one page per small listing).
//!
//! Needs `tests/storage/up.sh` (the object stores); fails, never skips, without it. Where an
//! emulator cannot do an operation the suite says so on stderr and seeds the object another
//! way, so the rest of the suite still runs against it.

mod common;

use std::sync::Arc;

use benchrun_worker::datagen::DataPattern;
use benchrun_worker::targets::{self, ChunkPlan, GetRequest, ReadCheck, Target};
use benchrun_worker::Workload;
use common::*;

/// The object the suite writes: not a multiple of the chunk size, so the last read is short.
const LEN: u64 = 100 * 1024 + 123;
const CHUNK: u64 = 32 * 1024;
const SEED: u64 = 7;

struct Case {
    name: &'static str,
    target: Arc<dyn Target>,
    /// The proxy in front of an object store, counting requests on the wire.
    proxy: Option<Proxy>,
    /// fake-gcs-server refuses object_store's upload: seed through its JSON API instead.
    seed_gcs: Option<(String, String, String)>,
    /// Key prefix inside the target root used by this case.
    _dir: Option<tempfile::TempDir>,
    _creds: Option<tempfile::TempDir>,
}

fn body() -> String {
    format!("duration: 1s\nops: [{{op: get}}]\nseed: {SEED}\n")
}

async fn open(yaml: &str) -> Arc<dyn Target> {
    let w: Workload = workload(yaml);
    targets::open(&w)
        .await
        .unwrap_or_else(|e| panic!("opening {}: {e}", w.target))
}

async fn cases() -> Vec<Case> {
    let env = storage_env();
    let mut out = vec![];
    for (name, scheme) in [("file", "file"), ("direct", "direct")] {
        // On the build directory's file system: tmpfs has no O_DIRECT.
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
        let target = open(&format!(
            "target: {scheme}://{}\n{}",
            dir.path().display(),
            body()
        ))
        .await;
        out.push(Case {
            name,
            target,
            proxy: None,
            seed_gcs: None,
            _dir: Some(dir),
            _creds: None,
        });
    }
    let prefix = unique("conformance");
    let proxy = Proxy::start(addr_of(&env["BENCHRUN_S3_ENDPOINT"])).await;
    let creds = s3_creds(&env);
    let target = open(&format!(
        "target: s3://{}/{prefix}\n{}storage: {{ endpoint: '{}', allowHttp: true, credentialsDir: '{}' }}\n",
        env["BENCHRUN_S3_BUCKET"],
        body(),
        proxy.endpoint(""),
        creds.path().display()
    ))
    .await;
    out.push(Case {
        name: "s3",
        target,
        proxy: Some(proxy),
        seed_gcs: None,
        _dir: None,
        _creds: Some(creds),
    });
    let az = &env["BENCHRUN_AZURE_ENDPOINT"];
    let account_path = az
        .trim_start_matches("http://")
        .split_once('/')
        .map(|(_, p)| format!("/{p}"))
        .unwrap_or_default();
    let proxy = Proxy::start(addr_of(az)).await;
    let creds = azure_creds(&env);
    let target = open(&format!(
        "target: az://{}/{prefix}\n{}storage: {{ endpoint: '{}', allowHttp: true, credentialsDir: '{}' }}\n",
        env["BENCHRUN_AZURE_CONTAINER"],
        body(),
        proxy.endpoint(&account_path),
        creds.path().display()
    ))
    .await;
    out.push(Case {
        name: "az",
        target,
        proxy: Some(proxy),
        seed_gcs: None,
        _dir: None,
        _creds: Some(creds),
    });
    // fake-gcs-server routes by the Host header it was started with, so it cannot sit behind
    // the counting proxy: its requests are checked as the target counts them.
    let gcs = &env["BENCHRUN_GCS_ENDPOINT"];
    let target = open(&format!(
        "target: gs://{}/{prefix}\n{}storage: {{ endpoint: '{gcs}', allowHttp: true }}\n",
        env["BENCHRUN_GCS_BUCKET"],
        body(),
    ))
    .await;
    out.push(Case {
        name: "gs",
        target,
        proxy: None,
        seed_gcs: Some((
            gcs.clone(),
            env["BENCHRUN_GCS_BUCKET"].clone(),
            prefix.clone(),
        )),
        _dir: None,
        _creds: None,
    });
    out
}

fn get(plan: ChunkPlan, check: ReadCheck) -> GetRequest {
    GetRequest {
        plan,
        check,
        size_hint: None,
    }
}

/// HTTP requests the proxy saw since the last call, by method (sorted), and reset.
fn wire(c: &Case) -> Vec<String> {
    let Some(p) = &c.proxy else { return vec![] };
    let mut m: Vec<String> = p.requests().into_iter().map(|r| r.method).collect();
    m.sort();
    p.reset();
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_target_behaves_the_same() {
    let pattern = Arc::new(DataPattern::new(SEED, 1.0));
    for c in cases().await {
        let t = &c.target;
        let key = "conf/a";
        let n = c.name;
        wire(&c);

        // PUT (or the emulator's own upload where it refuses ours).
        let data = pattern.payload(key, LEN);
        match &c.seed_gcs {
            None => {
                t.put(key, data)
                    .await
                    .unwrap_or_else(|e| panic!("{n}: put: {e}"));
                if c.proxy.is_some() {
                    assert_eq!(wire(&c), ["PUT"], "{n}: one PUT for a {LEN} B object");
                }
            }
            Some((endpoint, bucket, prefix)) => {
                eprintln!("{n}: put not run: fake-gcs-server refuses object_store's XML upload; seeded through its JSON API");
                let mut bytes = Vec::new();
                for p in &data.parts {
                    bytes.extend_from_slice(p);
                }
                gcs_seed(endpoint, bucket, &format!("{prefix}/{key}"), &bytes).await;
            }
        }

        // STAT: the size, one HEAD.
        let info = t
            .stat(key)
            .await
            .unwrap_or_else(|e| panic!("{n}: stat: {e}"));
        assert_eq!(info.size, LEN, "{n}: stat size");
        if c.proxy.is_some() {
            assert_eq!(wire(&c), ["HEAD"], "{n}: stat is one HEAD");
        }

        // GET whole, verified byte for byte: one request on object storage, no HEAD first.
        let g = t
            .get(
                key,
                &get(ChunkPlan::Whole, ReadCheck::Verify(pattern.clone())),
            )
            .await
            .unwrap_or_else(|e| panic!("{n}: whole get: {e}"));
        assert_eq!(g.bytes, LEN, "{n}: whole get bytes");
        assert_eq!(g.requests, 1, "{n}: whole get: one request (one read call)");
        if c.proxy.is_some() {
            assert_eq!(wire(&c), ["GET"], "{n}: whole get on the wire");
        }

        // GET in fixed chunks, verified: every byte, once.
        let g = t
            .get(
                key,
                &get(ChunkPlan::Fixed(CHUNK), ReadCheck::Verify(pattern.clone())),
            )
            .await
            .unwrap_or_else(|e| panic!("{n}: chunked get: {e}"));
        assert_eq!(g.bytes, LEN, "{n}: chunked get bytes");
        // ceil(LEN / CHUNK): no extra read past the end, no HEAD first, on every target.
        assert_eq!(
            u64::from(g.requests),
            LEN.div_ceil(CHUNK),
            "{n}: chunked get requests"
        );
        let on_wire = wire(&c);
        assert!(
            on_wire.iter().all(|m| m == "GET"),
            "{n}: chunked get sent {on_wire:?}"
        );
        if c.proxy.is_some() {
            assert_eq!(
                g.requests as usize,
                on_wire.len(),
                "{n}: counted requests = requests on the wire"
            );
        }

        // LIST: exactly the object, with its size, in one page.
        let l = t
            .list("conf/")
            .await
            .unwrap_or_else(|e| panic!("{n}: list: {e}"));
        let got: Vec<(String, u64)> = l.objects.iter().map(|o| (o.key.clone(), o.size)).collect();
        assert_eq!(got, [(key.to_string(), LEN)], "{n}: listing");
        if c.proxy.is_some() {
            assert_eq!(
                (l.requests, wire(&c)),
                (1, vec!["GET".to_string()]),
                "{n}: one list page"
            );
        }

        // Errors: a missing object is `not_found` for every read.
        let missing = "conf/missing";
        let e = t
            .get(missing, &get(ChunkPlan::Whole, ReadCheck::Discard))
            .await
            .expect_err("get missing");
        assert_eq!(e.kind(), "not_found", "{n}: get missing: {e}");
        let e = t.stat(missing).await.expect_err("stat missing");
        assert_eq!(e.kind(), "not_found", "{n}: stat missing: {e}");
        let e = t
            .get(missing, &get(ChunkPlan::Fixed(CHUNK), ReadCheck::Discard))
            .await
            .expect_err("chunked get missing");
        assert_eq!(e.kind(), "not_found", "{n}: chunked get missing: {e}");
        wire(&c);

        // DELETE, then it is gone everywhere.
        t.delete(key)
            .await
            .unwrap_or_else(|e| panic!("{n}: delete: {e}"));
        if c.proxy.is_some() {
            // One request; object_store's Azure client deletes through the Blob Batch API
            // (a POST), S3 with a DELETE.
            let want = if n == "az" { "POST" } else { "DELETE" };
            assert_eq!(wire(&c), [want], "{n}: one delete request");
        }
        let e = t.stat(key).await.expect_err("stat deleted");
        assert_eq!(e.kind(), "not_found", "{n}: stat after delete: {e}");
        let l = t
            .list("conf/")
            .await
            .unwrap_or_else(|e| panic!("{n}: list after delete: {e}"));
        assert!(
            l.objects.is_empty(),
            "{n}: listing after delete: {:?}",
            l.objects
        );
    }
}
