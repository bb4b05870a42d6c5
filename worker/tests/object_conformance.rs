//! One conformance suite for every target: the same operations on `file://`, `direct://`,
//! `s3://` on two S3 implementations (MinIO and versitygw), `az://` (Azurite) and `gs://`
//! (fake-gcs-server), with the same results, the same error kinds and, for object storage,
//! the same HTTP requests counted on the wire by a proxy (one request per GET, no HEAD before
//! a read, one page per small listing). The S3 servers also answer the S3 behaviours a client
//! leans on (conditional create, ranges at and past the end, deleting a missing key, listing
//! with a delimiter), and run a short benchmark through the real binary.
//!
//! Where a server answers differently from S3, [`DIFFERENCES`] says so: what it answers and
//! why that is tolerated. Each entry is asserted (the suite fails when the server starts to
//! answer as S3 does, or differs another way) and printed; nothing is skipped silently.
//!
//! Needs `tests/storage/up.sh` (the object stores); fails, never skips, without it. Where an
//! emulator cannot do an operation the suite says so on stderr and seeds the object another
//! way, so the rest of the suite still runs against it.

mod common;

use std::fmt::Debug;
use std::sync::Arc;

use benchrun_worker::datagen::DataPattern;
use benchrun_worker::targets::{self, ChunkPlan, GetRequest, ReadCheck, Target};
use benchrun_worker::Workload;
use common::*;

/// The object the suite writes: not a multiple of the chunk size, so the last read is short.
const LEN: u64 = 100 * 1024 + 123;
const CHUNK: u64 = 32 * 1024;
const SEED: u64 = 7;

/// Where an S3 server is known to answer otherwise than S3 (as Amazon S3 documents it, and
/// MinIO answers it).
struct Difference {
    /// The case: `s3-` and the server's name.
    server: &'static str,
    /// The check, as the suite names it.
    check: &'static str,
    /// What the server answers instead, exactly as the suite observes it.
    answers: &'static str,
    /// Why benchrun still works against it.
    why: &'static str,
}

/// Every known difference of the servers under test. An entry that no longer holds fails.
const DIFFERENCES: &[Difference] = &[
    Difference {
        server: "s3-versitygw",
        check: "PUT of a key below an existing key (a, then a/b)",
        answers: r#""AlreadyExists (HTTP 409)""#,
        why: "its POSIX backend stores a key as a file path, so the file `a` cannot also be the \
              directory `a/` (S3 keys are flat). benchrun never writes a key below another: \
              dataset objects are `<prefix>obj-N` and PUTs `<prefix>put/<worker>-N`, all leaves",
    },
    Difference {
        server: "s3-versitygw",
        check: "PUT of a key that is a prefix of existing keys (d/x, then d)",
        answers: r#""AlreadyExists (HTTP 409)""#,
        why: "the same: `d/` is a directory, so no file `d` can be created. benchrun's keys \
              never are another key's prefix (a dataset prefix ends with `/` by default; \
              `obj-N` and `put/` never collide)",
    },
];

/// The checks' outcomes: every failure collected (so one run shows all of a server's
/// differences), and which known differences were met.
#[derive(Default)]
struct Checks {
    failures: Vec<String>,
    met: Vec<(String, &'static str)>,
}

impl Checks {
    /// `got` must be what S3 answers (`want`), or exactly the server's known difference.
    fn check(&mut self, server: &str, check: &'static str, want: impl Debug, got: impl Debug) {
        let (want, got) = (format!("{want:?}"), format!("{got:?}"));
        match DIFFERENCES
            .iter()
            .find(|d| d.server == server && d.check == check)
        {
            Some(d) => {
                self.met.push((server.to_string(), check));
                if got == d.answers {
                    eprintln!(
                        "{server}: {check}: differs from S3 (known): S3 answers {want}, {server} {got}; tolerated: {}",
                        d.why
                    );
                } else if got == want {
                    self.failures.push(format!(
                        "{server}: {check}: now answers as S3 does ({got}): remove its entry from DIFFERENCES"
                    ));
                } else {
                    self.failures.push(format!(
                        "{server}: {check}: answers {got}, neither S3's {want} nor the known {}",
                        d.answers
                    ));
                }
            }
            None if got != want => self.failures.push(format!(
                "{server}: {check}: answers {got}, S3 answers {want}"
            )),
            None => {}
        }
    }

    /// Fail with every failure, and with every known difference of `servers` not met.
    fn finish(self, servers: &[String]) {
        let mut failures = self.failures;
        for d in DIFFERENCES {
            if servers.iter().any(|s| s == d.server)
                && !self.met.iter().any(|(s, c)| s == d.server && *c == d.check)
            {
                failures.push(format!(
                    "{}: {}: a known difference the suite no longer checks",
                    d.server, d.check
                ));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }
}

struct Case {
    name: String,
    /// An S3 server: its endpoint and bucket, for the checks made with a client of its own.
    s3: Option<(String, String)>,
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

/// The S3 servers under test: `(case name, endpoint, bucket)`. Fails when the second one is
/// not in storage.env (an up.sh older than this suite): never tests one server silently.
fn s3_servers(env: &std::collections::HashMap<String, String>) -> Vec<(String, String, String)> {
    let name = env.get("BENCHRUN_S3B_NAME").unwrap_or_else(|| {
        panic!("storage.env has no second S3 server (BENCHRUN_S3B_*): rerun tests/storage/up.sh")
    });
    vec![
        (
            "s3-minio".into(),
            env["BENCHRUN_S3_ENDPOINT"].clone(),
            env["BENCHRUN_S3_BUCKET"].clone(),
        ),
        (
            format!("s3-{name}"),
            env["BENCHRUN_S3B_ENDPOINT"].clone(),
            env["BENCHRUN_S3B_BUCKET"].clone(),
        ),
    ]
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
            name: name.into(),
            s3: None,
            target,
            proxy: None,
            seed_gcs: None,
            _dir: Some(dir),
            _creds: None,
        });
    }
    let prefix = unique("conformance");
    for (name, endpoint, bucket) in s3_servers(&env) {
        let proxy = Proxy::start(addr_of(&endpoint)).await;
        let creds = s3_creds(&env);
        let target = open(&format!(
            "target: s3://{bucket}/{prefix}\n{}storage: {{ endpoint: '{}', allowHttp: true, credentialsDir: '{}' }}\n",
            body(),
            proxy.endpoint(""),
            creds.path().display()
        ))
        .await;
        out.push(Case {
            name,
            s3: Some((endpoint, bucket)),
            target,
            proxy: Some(proxy),
            seed_gcs: None,
            _dir: None,
            _creds: Some(creds),
        });
    }
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
        name: "az".into(),
        s3: None,
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
        name: "gs".into(),
        s3: None,
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

#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_target_behaves_the_same() {
    let pattern = Arc::new(DataPattern::unique(SEED));
    let cases = cases().await;
    print_differences(&cases);
    let mut chk = Checks::default();
    for c in &cases {
        let t = &c.target;
        let key = "conf/a";
        let n = c.name.as_str();
        let proxied = c.proxy.is_some();
        wire(c);

        // PUT (or the emulator's own upload where it refuses ours).
        let data = pattern.payload(key, LEN);
        match &c.seed_gcs {
            None => {
                t.put(key, data)
                    .await
                    .unwrap_or_else(|e| panic!("{n}: put: {e}"));
                if proxied {
                    chk.check(n, "put is one PUT", ["PUT"], wire(c));
                }
            }
            Some((endpoint, bucket, prefix)) => {
                eprintln!("{n}: put not run: fake-gcs-server refuses object_store's XML upload; seeded through its JSON API");
                let bytes = data.to_vec();
                gcs_seed(endpoint, bucket, &format!("{prefix}/{key}"), &bytes).await;
            }
        }

        // STAT: the size, one HEAD.
        let info = t
            .stat(key)
            .await
            .unwrap_or_else(|e| panic!("{n}: stat: {e}"));
        chk.check(n, "stat size", LEN, info.size);
        if proxied {
            chk.check(n, "stat is one HEAD", ["HEAD"], wire(c));
        }

        // GET whole, verified byte for byte: one request on object storage, no HEAD first.
        let g = t
            .get(
                key,
                &get(ChunkPlan::Whole, ReadCheck::Verify(pattern.clone())),
            )
            .await
            .map(|g| (g.bytes, g.requests))
            .map_err(|e| e.to_string());
        chk.check(
            n,
            "whole get (bytes, requests)",
            Ok::<_, String>((LEN, 1)),
            g,
        );
        if proxied {
            chk.check(n, "whole get on the wire", ["GET"], wire(c));
        }

        // GET in fixed chunks, verified: every byte, once, in ceil(LEN / CHUNK) requests (no
        // extra read past the end, no HEAD first), on every target.
        let g = t
            .get(
                key,
                &get(ChunkPlan::Fixed(CHUNK), ReadCheck::Verify(pattern.clone())),
            )
            .await
            .map(|g| (g.bytes, u64::from(g.requests)))
            .map_err(|e| e.to_string());
        chk.check(
            n,
            "chunked get (bytes, requests)",
            Ok::<_, String>((LEN, LEN.div_ceil(CHUNK))),
            &g,
        );
        let on_wire = wire(c);
        if proxied {
            let counted = g.as_ref().map(|g| g.1 as usize).unwrap_or(0);
            chk.check(
                n,
                "chunked get on the wire: counted requests, all GETs",
                (counted, true),
                (on_wire.len(), on_wire.iter().all(|m| m == "GET")),
            );
        }

        // LIST: exactly the object, with its size, in one page.
        let l = t
            .list("conf/")
            .await
            .unwrap_or_else(|e| panic!("{n}: list: {e}"));
        let got: Vec<(String, u64)> = l.objects.iter().map(|o| (o.key.clone(), o.size)).collect();
        chk.check(n, "listing", [(key.to_string(), LEN)], got);
        if proxied {
            chk.check(
                n,
                "one list page",
                (1, vec!["GET".to_string()]),
                (l.requests, wire(c)),
            );
        }

        // Errors: a missing object is `not_found` for every read.
        let missing = "conf/missing";
        let kind = |r: Result<(), benchrun_worker::targets::TargetError>| r.map_err(|e| e.kind());
        let want: Result<(), String> = Err("not_found".into());
        let e = t
            .get(missing, &get(ChunkPlan::Whole, ReadCheck::Discard))
            .await
            .map(|_| ());
        chk.check(n, "get missing", &want, kind(e));
        let e = t.stat(missing).await.map(|_| ());
        chk.check(n, "stat missing", &want, kind(e));
        let e = t
            .get(missing, &get(ChunkPlan::Fixed(CHUNK), ReadCheck::Discard))
            .await
            .map(|_| ());
        chk.check(n, "chunked get missing", &want, kind(e));
        wire(c);

        // DELETE, then it is gone everywhere.
        t.delete(key)
            .await
            .unwrap_or_else(|e| panic!("{n}: delete: {e}"));
        if proxied {
            // One request; object_store's Azure client deletes through the Blob Batch API
            // (a POST), S3 with a DELETE.
            let want = if n == "az" { "POST" } else { "DELETE" };
            chk.check(n, "one delete request", [want], wire(c));
        }
        let e = t.stat(key).await.map(|_| ());
        chk.check(n, "stat after delete", &want, kind(e));
        let l = t
            .list("conf/")
            .await
            .map(|l| l.objects.len())
            .map_err(|e| e.to_string());
        chk.check(n, "listing after delete", Ok::<usize, String>(0), l);

        if let Some((endpoint, bucket)) = &c.s3 {
            s3_semantics(&mut chk, n, endpoint, bucket).await;
        }
    }
    let servers: Vec<String> = cases.iter().map(|c| c.name.clone()).collect();
    chk.finish(&servers);
}

/// The known differences of the servers under test, on stderr before the checks.
fn print_differences(cases: &[Case]) {
    for c in cases {
        let ds: Vec<&Difference> = DIFFERENCES.iter().filter(|d| d.server == c.name).collect();
        if c.s3.is_some() && ds.is_empty() {
            eprintln!("{}: no known difference from S3", c.name);
        }
        for d in ds {
            eprintln!(
                "{}: known difference: {}: answers {}; tolerated: {}",
                d.server, d.check, d.answers, d.why
            );
        }
    }
}

/// An object_store error by kind, with the HTTP status where the message has one: what a
/// server answered, without the addresses and request ids that change between runs.
fn outcome<T>(r: object_store::Result<T>, ok: impl Fn(T) -> String) -> String {
    match r {
        Ok(v) => ok(v),
        Err(e) => {
            let debug = format!("{e:?}");
            let variant = debug
                .split([' ', '{', '('])
                .next()
                .unwrap_or("")
                .to_string();
            let text = e.to_string();
            if std::env::var_os("BENCHRUN_CONFORMANCE_DEBUG").is_some() {
                eprintln!("{text}");
            }
            let status = http_status(&text);
            match status {
                Some(s) => format!("{variant} (HTTP {s})"),
                None => variant,
            }
        }
    }
}

/// The HTTP status an object_store error message reports (`... status code: 416 ...` or
/// `status: 404`), when it has one.
fn http_status(text: &str) -> Option<String> {
    ["status code: ", "status: ", "Status: "]
        .iter()
        .find_map(|tag| {
            let at = text.find(tag)? + tag.len();
            let code: String = text[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            (code.len() == 3).then_some(code)
        })
}

/// S3 behaviours a client leans on, asked of the server directly with a client of the suite's
/// own (benchrun's targets do not expose them): conditional create, ranges at and past the
/// end, deleting a missing key, listing with a delimiter.
async fn s3_semantics(chk: &mut Checks, n: &str, endpoint: &str, bucket: &str) {
    use object_store::path::Path;
    use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions};
    let env = storage_env();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_access_key_id(&env["AWS_ACCESS_KEY_ID"])
        .with_secret_access_key(&env["AWS_SECRET_ACCESS_KEY"])
        .with_virtual_hosted_style_request(false)
        .build()
        .unwrap_or_else(|e| panic!("{n}: s3 client: {e}"));
    let base = unique("semantics");
    let key = Path::from(format!("{base}/a"));
    let body = vec![7u8; 1000];
    let create = || PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };

    let r = store.put_opts(&key, body.clone().into(), create()).await;
    chk.check(
        n,
        "conditional create of a new key",
        "ok",
        outcome(r, |_| "ok".into()),
    );
    let r = store.put_opts(&key, body.clone().into(), create()).await;
    chk.check(
        n,
        "conditional create of an existing key (If-None-Match: *)",
        "AlreadyExists (HTTP 412)",
        outcome(r, |_| "ok".into()),
    );

    let range = |r: GetRange| GetOptions {
        range: Some(r),
        ..Default::default()
    };
    let bytes = |r: object_store::Result<object_store::GetResult>| async move {
        match r {
            Ok(g) => outcome(g.bytes().await, |b| format!("{} bytes", b.len())),
            Err(e) => outcome::<()>(Err(e), |_| String::new()),
        }
    };
    let r = store
        .get_opts(&key, range(GetRange::Bounded(990..1100)))
        .await;
    chk.check(
        n,
        "range over the end (990..1100 of 1000)",
        "10 bytes",
        bytes(r).await,
    );
    let r = store
        .get_opts(&key, range(GetRange::Bounded(1000..1100)))
        .await;
    chk.check(
        n,
        "range wholly past the end (1000..1100 of 1000)",
        "Generic (HTTP 416)",
        bytes(r).await,
    );
    let r = store
        .get_opts(
            &Path::from(format!("{base}/missing")),
            range(GetRange::Bounded(0..10)),
        )
        .await;
    chk.check(
        n,
        "range of a missing key",
        "NotFound (HTTP 404)",
        bytes(r).await,
    );
    let r = store.get_opts(&key, range(GetRange::Suffix(10))).await;
    chk.check(
        n,
        "suffix range (the last 10 bytes)",
        "10 bytes",
        bytes(r).await,
    );

    let r = store.delete(&Path::from(format!("{base}/missing"))).await;
    chk.check(
        n,
        "delete of a missing key",
        "ok",
        outcome(r, |_| "ok".into()),
    );

    for k in ["d/x", "d/y", "z"] {
        store
            .put(&Path::from(format!("{base}/{k}")), vec![1u8; 10].into())
            .await
            .unwrap_or_else(|e| panic!("{n}: put {k}: {e}"));
    }
    let r = store
        .list_with_delimiter(Some(&Path::from(base.clone())))
        .await
        .map(|l| {
            let strip = |p: &Path| {
                p.as_ref()
                    .trim_start_matches(&format!("{base}/"))
                    .to_string()
            };
            let mut objects: Vec<String> = l.objects.iter().map(|o| strip(&o.location)).collect();
            objects.sort();
            let prefixes: Vec<String> = l.common_prefixes.iter().map(strip).collect();
            format!("objects {objects:?}, prefixes {prefixes:?}")
        });
    chk.check(
        n,
        "list with a delimiter",
        r#"objects ["a", "z"], prefixes ["d"]"#,
        outcome(r, |s| s),
    );
    // A prefix is not an object, even where a file system has a directory for it.
    let r = store.head(&Path::from(format!("{base}/d"))).await;
    chk.check(
        n,
        "HEAD of a prefix that is no key",
        "NotFound (HTTP 404)",
        outcome(r, |m| format!("ok, {} bytes", m.size)),
    );
    // S3 keys are flat: `a` and `a/b` are two keys (a file system cannot have both).
    let r = store
        .put(&Path::from(format!("{base}/a/b")), vec![1u8; 10].into())
        .await;
    chk.check(
        n,
        "PUT of a key below an existing key (a, then a/b)",
        "ok",
        outcome(r, |_| "ok".into()),
    );
    let r = store
        .put(&Path::from(format!("{base}/d")), vec![1u8; 10].into())
        .await;
    chk.check(
        n,
        "PUT of a key that is a prefix of existing keys (d/x, then d)",
        "ok",
        outcome(r, |_| "ok".into()),
    );
    for k in ["a/b", "a", "d", "d/x", "d/y", "z"] {
        let _ = store.delete(&Path::from(format!("{base}/{k}"))).await;
    }
}

/// A short bounded benchmark of a small mixed workload through the real binary against every
/// S3 server: the engine (prepare, the mix, cleanup), not only single calls, works against it.
#[ignore = "needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`"]
#[test]
fn a_short_mixed_benchmark_runs_against_every_s3_server() {
    let env = storage_env();
    for (name, endpoint, bucket) in s3_servers(&env) {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
        let creds = s3_creds(&env);
        let file = dir.path().join("w.yaml");
        let summary = dir.path().join("summary.json");
        std::fs::write(
            &file,
            format!(
                "target: s3://{bucket}/{}\nduration: 2s\nconcurrency: 4\nobjectSize: 16KiB\n\
                 ops: [{{op: get, weight: 50}}, {{op: put, weight: 20}}, {{op: stat, weight: 20}}, \
                 {{op: list, weight: 5}}, {{op: delete, weight: 5}}]\n\
                 dataset: {{ objects: 20, cleanup: true }}\n\
                 storage: {{ endpoint: '{endpoint}', allowHttp: true, credentialsDir: '{}' }}\n",
                unique("bench"),
                creds.path().display()
            ),
        )
        .expect("write workload");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
            .args(["run", "--progress", "never", "--summary"])
            .arg(&summary)
            .arg(&file)
            .output()
            .expect("run the worker");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("{name}:\n{stdout}");
        let s = benchrun_worker::summary_read::read(
            &std::fs::read_to_string(&summary).expect("summary written"),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        for op in ["get", "put", "stat", "list", "delete"] {
            let o = s
                .ops
                .iter()
                .find(|(k, _)| k.as_str() == op)
                .map(|(_, o)| o)
                .unwrap_or_else(|| panic!("{name}: no {op} in the summary"));
            assert!(o.count > 0, "{name}: no {op} ran");
            assert_eq!(o.errors, 0, "{name}: {op} failed: {:?}", o.errors_by_kind);
        }
        let prepare = s.prepare.as_ref().expect("the prepare stage ran");
        assert_eq!(
            (prepare.objects, prepare.errors),
            (20, 0),
            "{name}: prepare"
        );
        let cleanup = s.cleanup.as_ref().expect("the cleanup stage ran");
        assert_eq!(cleanup.errors, 0, "{name}: cleanup");
    }
}
