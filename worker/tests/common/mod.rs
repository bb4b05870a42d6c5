//! Helpers for the object storage tests: the servers' settings written by
//! `tests/storage/up.sh`, workloads, credentials directories, seeding fake-gcs-server, and a
//! loopback proxy that counts HTTP requests (and can be cut to simulate a server failure).
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use benchrun_worker::metrics::Metrics;
use benchrun_worker::{Engine, Workload};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Settings of the running storage servers. Panics (fails the test) when they are not up:
/// these tests must never pass without having talked to a server.
pub fn storage_env() -> HashMap<String, String> {
    let path = std::env::var_os("BENCHRUN_STATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/.state"))
        .join("storage.env");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the storage servers are not running; run tests/storage/up.sh first",
            path.display()
        )
    });
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A prefix no other test (or earlier run) uses.
pub fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("tests/{name}-{}-{nanos}", std::process::id())
}

/// A directory of credential files, as a mounted Secret would be.
pub fn creds_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    for (name, value) in files {
        std::fs::write(d.path().join(name), value).expect("write credential file");
    }
    d
}

pub fn s3_creds(env: &HashMap<String, String>) -> tempfile::TempDir {
    creds_dir(&[
        ("accessKeyId", &env["AWS_ACCESS_KEY_ID"]),
        ("secretAccessKey", &env["AWS_SECRET_ACCESS_KEY"]),
    ])
}

pub fn azure_creds(env: &HashMap<String, String>) -> tempfile::TempDir {
    creds_dir(&[
        ("accountName", &env["AZURE_STORAGE_ACCOUNT_NAME"]),
        ("accountKey", &env["AZURE_STORAGE_ACCOUNT_KEY"]),
    ])
}

pub fn workload(yaml: &str) -> Workload {
    Workload::from_yaml(yaml).unwrap_or_else(|e| panic!("bad test workload: {e}\n{yaml}"))
}

pub async fn engine(w: Workload) -> Engine {
    Engine::open(w, Arc::new(Metrics::new()), "t1")
        .await
        .unwrap_or_else(|e| panic!("opening the target failed: {e}"))
}

/// An engine and the live metrics it records into (to wait on observed progress).
pub async fn engine_with_metrics(w: Workload) -> (Engine, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let e = Engine::open(w, metrics.clone(), "t1")
        .await
        .unwrap_or_else(|e| panic!("opening the target failed: {e}"));
    (e, metrics)
}

/// Wait (at most 12 s) until the live totals `(operations, errors)` satisfy `f`.
pub async fn until(m: &Metrics, what: &str, f: impl Fn(u64, u64) -> bool) {
    for _ in 0..600 {
        let (ops, _, errors) = m.totals();
        if f(ops, errors) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("not {what} after 12 s: {:?}", m.totals());
}

/// `host:port` of an `http://host:port/...` endpoint.
pub fn addr_of(endpoint: &str) -> SocketAddr {
    let rest = endpoint.trim_start_matches("http://");
    let hostport = rest.split('/').next().unwrap_or(rest);
    hostport
        .parse()
        .unwrap_or_else(|e| panic!("endpoint {endpoint}: {e}"))
}

/// Upload `data` to fake-gcs-server through its JSON API (it refuses object_store's XML PUT).
pub async fn gcs_seed(endpoint: &str, bucket: &str, name: &str, data: &[u8]) {
    let addr = addr_of(endpoint);
    let mut s = TcpStream::connect(addr)
        .await
        .expect("connect fake-gcs-server");
    let head = format!(
        "POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name={} HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        name.replace('/', "%2F"),
        data.len()
    );
    s.write_all(head.as_bytes()).await.expect("send");
    s.write_all(data).await.expect("send body");
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).await.expect("read response");
    let status = String::from_utf8_lossy(&resp[..resp.len().min(12)]).to_string();
    assert!(
        status.starts_with("HTTP/1.1 200"),
        "seeding gs://{bucket}/{name} failed: {}",
        String::from_utf8_lossy(&resp[..resp.len().min(300)])
    );
}

/// One HTTP request seen by the proxy.
#[derive(Clone, Debug)]
pub struct SeenRequest {
    pub method: String,
    pub target: String,
    pub range: Option<String>,
    /// `x-amz-content-sha256` (S3): `UNSIGNED-PAYLOAD` or the body's hash.
    pub content_sha256: Option<String>,
    /// The connection it came on: the proxy's accept order, from 0.
    pub conn: u64,
}

impl SeenRequest {
    /// A listing of at most one key (`Target::check`: S3 `max-keys=1`, Azure `maxresults=1`,
    /// GCS `maxResults=1`), as sent before a run's start, not by an op.
    pub fn is_check(&self) -> bool {
        self.method == "GET"
            && self.target.split(['?', '&']).any(|kv| {
                let kv = kv.to_ascii_lowercase();
                kv == "max-keys=1" || kv == "maxresults=1"
            })
    }
}

/// A loopback TCP proxy in front of a server that records each HTTP/1.1 request line (with
/// keep-alive, several per connection) and can be cut off at once with [`Proxy::stop`].
pub struct Proxy {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    stop: tokio::sync::watch::Sender<bool>,
    /// While true the server is "down": live connections are cut and new ones closed at once.
    down: tokio::sync::watch::Sender<bool>,
    /// Requests of this method are held: never forwarded, never answered (a server stuck
    /// under overload), until the client gives up.
    stall: Arc<Mutex<Option<String>>>,
    /// Connections accepted so far.
    accepted: Arc<std::sync::atomic::AtomicU64>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (down, is_down) = tokio::sync::watch::channel(false);
        let seen2 = seen.clone();
        let stall = Arc::new(Mutex::new(None::<String>));
        let accepted = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (stall2, accepted2) = (stall.clone(), accepted.clone());
        tokio::spawn(async move {
            loop {
                let mut st = stopped.clone();
                let (client, _) = tokio::select! {
                    r = listener.accept() => match r { Ok(c) => c, Err(_) => return },
                    _ = st.changed() => return,
                };
                let conn = accepted2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if *is_down.borrow() {
                    drop(client);
                    continue;
                }
                let seen = seen2.clone();
                let stall = stall2.clone();
                let mut st = stopped.clone();
                let mut went_down = is_down.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = forward(client, conn, upstream, seen, stall) => {}
                        _ = st.changed() => {}
                        _ = went_down.wait_for(|d| *d) => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            seen,
            stop,
            down,
            stall,
            accepted,
        }
    }

    /// Hold every later request of `method` (`None`: forward all again).
    pub fn stall(&self, method: Option<&str>) {
        *self.stall.lock().unwrap() = method.map(str::to_string);
    }

    /// Connections accepted since the proxy started.
    pub fn connections(&self) -> u64 {
        self.accepted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Endpoint URL of the proxy, with `path` appended (e.g. `/devstoreaccount1`).
    pub fn endpoint(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The requests of ops, in arrival order: every request but the target's checks (the
    /// one-key listings a run's shards send before the start to open their connections).
    pub fn requests(&self) -> Vec<SeenRequest> {
        let mut all = self.all_requests();
        all.retain(|r| !r.is_check());
        all
    }

    /// Every request, checks included.
    pub fn all_requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub fn count(&self, method: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method)
            .count()
    }

    pub fn reset(&self) {
        if let Ok(mut s) = self.seen.lock() {
            s.clear();
        }
    }

    /// Close the listener and every connection, as a crashed server would.
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// The server goes down (every connection cut, new ones closed at once) or comes back up
    /// on the same address, as a restarted server would.
    pub fn set_down(&self, down: bool) {
        let _ = self.down.send(down);
    }
}

async fn forward(
    client: TcpStream,
    conn: u64,
    upstream: SocketAddr,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    stall: Arc<Mutex<Option<String>>>,
) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async move {
        let mut parser = Parser::default();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let mut held = false;
            for mut r in parser.feed(&buf[..n]) {
                r.conn = conn;
                held |= stall.lock().is_ok_and(|m| m.as_deref() == Some(&r.method));
                if let Ok(mut s) = seen.lock() {
                    s.push(r);
                }
            }
            if held {
                // Never forwarded, never answered.
                return std::future::pending().await;
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async move {
        let _ = tokio::io::copy(&mut sr, &mut cw).await;
    };
    tokio::join!(up, down);
}

/// Finds request heads in a client's byte stream, skipping bodies by Content-Length.
#[derive(Default)]
struct Parser {
    head: Vec<u8>,
    body_left: u64,
}

impl Parser {
    fn feed(&mut self, mut data: &[u8]) -> Vec<SeenRequest> {
        let mut out = Vec::new();
        while !data.is_empty() {
            if self.body_left > 0 {
                let skip = (self.body_left as usize).min(data.len());
                self.body_left -= skip as u64;
                data = &data[skip..];
                continue;
            }
            self.head.push(data[0]);
            data = &data[1..];
            if self.head.ends_with(b"\r\n\r\n") {
                let text = String::from_utf8_lossy(&self.head).to_string();
                self.head.clear();
                let mut lines = text.split("\r\n");
                let mut first = lines.next().unwrap_or("").split(' ');
                let method = first.next().unwrap_or("").to_string();
                let target = first.next().unwrap_or("").to_string();
                let mut range = None;
                let mut content_sha256 = None;
                for l in lines {
                    if let Some((k, v)) = l.split_once(':') {
                        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
                        if k == "content-length" {
                            self.body_left = v.parse().unwrap_or(0);
                        } else if k == "range" {
                            range = Some(v.to_string());
                        } else if k == "x-amz-content-sha256" {
                            content_sha256 = Some(v.to_string());
                        } else if k == "transfer-encoding" && v.contains("chunked") {
                            panic!("the counting proxy does not parse chunked request bodies");
                        }
                    }
                }
                out.push(SeenRequest {
                    method,
                    target,
                    range,
                    content_sha256,
                    conn: 0,
                });
            }
        }
        out
    }
}

/// Reads a child worker's stderr until it prints its metrics address (`--metrics-addr`),
/// and returns it; a thread keeps draining the rest (a closed pipe would make the worker's
/// next message fail).
pub fn metrics_addr(stderr: std::process::ChildStderr) -> String {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(rest) = line.strip_prefix("metrics on http://") {
                let _ = tx.send(rest.trim_end_matches("/metrics").to_string());
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the worker never printed its metrics address")
}

/// `GET /metrics` over a plain TCP connection; `None` once the worker has gone.
pub fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.starts_with("HTTP/1.1 200").then_some(body)
}

/// The value of the sample `name` (with its labels, e.g. `benchrun_ops_total{op="get"}`) in
/// a Prometheus text exposition.
pub fn sample(exposition: &str, name: &str) -> Option<f64> {
    exposition.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(' ')?;
        rest.trim().parse().ok()
    })
}
