//! Leader election against the real apiserver of the test cluster (tests/cluster/up.sh): two
//! candidates on one Lease, in this process and as two `benchrun-operator run --leader-elect`
//! processes. Every wait polls an observable state (the Lease, `/metrics`, a process's exit)
//! up to a bound.
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use benchrun_operator::leader::{holder, Elector, LeaderConfig};
use benchrun_test_support::{cluster, TestNamespace};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;

/// Short timings so that an expiry takes seconds; the same ratios as production (15/10/2).
fn config(ns: &str, lease: &str, identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: Duration::from_secs(6),
        renew_deadline: Duration::from_secs(4),
        retry_period: Duration::from_millis(500),
        ..LeaderConfig::new(lease, ns, identity)
    }
}

async fn setup(prefix: &str) -> (Client, TestNamespace) {
    benchrun_operator::install_crypto_provider();
    let client = cluster::connect().await;
    let ns = TestNamespace::create(&client, prefix).await;
    (client, ns)
}

async fn lease_holder(client: &Client, ns: &str, name: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let lease = leases.get_opt(name).await.expect("read lease")?;
    holder(lease.spec.as_ref()).map(str::to_string)
}

/// Poll the Lease until `want` holds it; returns how long that took.
async fn wait_holder(
    client: &Client,
    ns: &str,
    name: &str,
    want: &str,
    timeout: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let h = lease_holder(client, ns, name).await;
        if h.as_deref() == Some(want) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "lease {ns}/{name} not held by {want} after {timeout:?}; holder: {h:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn one_leader_then_takeover_on_release() {
    let (client, ns) = setup("leader-release").await;
    let mut a = Elector::new(client.clone(), config(ns.name(), "l", "a"));
    let mut b = Elector::new(client.clone(), config(ns.name(), "l", "b"));

    assert!(
        a.try_acquire_or_renew().await.unwrap(),
        "a creates and holds the lease"
    );
    assert!(
        !b.try_acquire_or_renew().await.unwrap(),
        "b must not take a live lease"
    );
    assert_eq!(b.observed_holder(), Some("a"));
    assert!(a.renew().await.unwrap(), "a renews its own lease");
    assert!(!b.renew().await.unwrap());
    assert_eq!(
        lease_holder(&client, ns.name(), "l").await.as_deref(),
        Some("a")
    );

    // b campaigns while a shuts down gracefully: the release frees the lease at once, so b
    // takes it at its next poll, long before the 6 s lease would have expired.
    let standby = tokio::spawn(async move {
        b.acquire().await;
        b
    });
    assert!(
        a.release().await.unwrap(),
        "a held the lease, so it releases it"
    );
    let took = wait_holder(&client, ns.name(), "l", "b", Duration::from_secs(4)).await;
    assert!(
        took < Duration::from_secs(4),
        "takeover after release took {took:?}"
    );
    let mut b = tokio::time::timeout(Duration::from_secs(5), standby)
        .await
        .expect("b's campaign returns once it leads")
        .unwrap();
    assert!(b.renew().await.unwrap());
    assert!(
        !a.try_acquire_or_renew().await.unwrap(),
        "a is now the standby"
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let spec = leases.get("l").await.unwrap().spec.unwrap();
    assert_eq!(
        spec.lease_transitions,
        Some(0),
        "a release is not a transition"
    );
    assert_eq!(spec.lease_duration_seconds, Some(6));
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn standby_takes_over_when_leader_stops_renewing() {
    let (client, ns) = setup("leader-expiry").await;
    let mut a = Elector::new(client.clone(), config(ns.name(), "l", "a"));
    let mut b = Elector::new(client.clone(), config(ns.name(), "l", "b"));
    assert!(a.try_acquire_or_renew().await.unwrap());

    // a renews in the background; b campaigns and keeps seeing a live, renewed lease.
    let renewer = tokio::spawn(async move { a.keep_leading().await });
    let standby = tokio::spawn(async move {
        b.acquire().await;
        b
    });
    // Wait until a has held the lease, renewing, for longer than its duration: a lease that
    // b would have taken by then had a stopped renewing.
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let start = Instant::now();
    loop {
        let spec = leases.get("l").await.unwrap().spec.unwrap();
        let held = match (&spec.acquire_time, &spec.renew_time) {
            (Some(a), Some(r)) => r.0.duration_since(a.0).as_millis(),
            _ => 0,
        };
        assert_eq!(
            holder(Some(&spec)),
            Some("a"),
            "b took a lease that a renews"
        );
        if held > 8000 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "a's renewals stalled at {held} ms"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(!standby.is_finished(), "b's campaign ended while a leads");
    assert!(
        !renewer.is_finished(),
        "a stopped leading: {:?}",
        renewer.await
    );
    // a crashes: no release, the lease is left to expire.
    renewer.abort();
    let stopped = Instant::now();
    let took = wait_holder(&client, ns.name(), "l", "b", Duration::from_secs(12)).await;
    // b waits a whole lease duration from its first sight of a's last renewal, which is at
    // most one retry period before a stopped.
    assert!(
        took >= Duration::from_secs(5),
        "b took the lease {took:?} after a stopped, before it could expire (6 s)"
    );
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(12), "takeover took {took:?}");
    let mut b = tokio::time::timeout(Duration::from_secs(5), standby)
        .await
        .expect("b's campaign returns once it leads")
        .unwrap();
    assert!(b.renew().await.unwrap());
    let spec = leases.get("l").await.unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(1), "a to b is one transition");
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn racing_candidates_never_both_win() {
    let (client, ns) = setup("leader-race").await;
    let mut a = Elector::new(client.clone(), config(ns.name(), "l", "a"));
    let mut b = Elector::new(client.clone(), config(ns.name(), "l", "b"));
    for round in 0..8 {
        // Both read the same free (or missing) lease and write at once: the resourceVersion
        // precondition (or AlreadyExists) lets exactly one write through.
        let (ra, rb) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert!(
            ra ^ rb,
            "round {round}: exactly one leads, got a={ra} b={rb}"
        );
        let winner = if ra { "a" } else { "b" };
        assert_eq!(
            lease_holder(&client, ns.name(), "l").await.as_deref(),
            Some(winner),
            "round {round}"
        );
        let w = if ra { &mut a } else { &mut b };
        assert!(w.release().await.unwrap(), "round {round}: winner releases");
    }
}

/// A free TCP port on 127.0.0.1 for a child's metrics server.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

struct Operator {
    child: Child,
    port: u16,
    name: &'static str,
}

impl Operator {
    fn start(ns: &str, name: &'static str, key: &std::path::Path) -> Operator {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_benchrun-operator"))
            .args(["run", "--worker-image", "localhost/benchrun-worker:unused"])
            .arg("--key-file")
            .arg(key)
            .args(["--namespace", ns, "--metrics-addr"])
            .arg(format!("127.0.0.1:{port}"))
            .env("KUBECONFIG", cluster::kubeconfig_path())
            .env("BENCHRUN_LEADER_ELECT", "true")
            .env("BENCHRUN_LEASE_NAME", "benchrun-operator")
            .env("POD_NAMESPACE", ns)
            .env("POD_NAME", name)
            .env("BENCHRUN_LOG", "info,kube=warn")
            // The lost-lease exit is expected here: its error, not a backtrace.
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .spawn()
            .expect("start benchrun-operator");
        Operator { child, port, name }
    }

    /// The `benchrun_operator_leader` sample, once `/metrics` answers.
    async fn leader_gauge(&self) -> Option<f64> {
        let url = format!("http://127.0.0.1:{}/metrics", self.port);
        let text = reqwest::get(&url).await.ok()?.text().await.ok()?;
        common::sample(&text, "benchrun_operator_leader")
    }

    async fn wait_gauge(&self, want: f64, timeout: Duration) {
        let start = Instant::now();
        loop {
            let v = self.leader_gauge().await;
            if v == Some(want) {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "{}: benchrun_operator_leader is {v:?}, not {want}, after {timeout:?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} {}", self.name);
    }

    /// Wait for the process to exit; returns its exit code.
    async fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                start.elapsed() < timeout,
                "{} still running {timeout:?} after it should have exited",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real binary, twice: one leads (gauge 1, holds the Lease), the other stands by with its
/// metrics server up (gauge 0). SIGTERM on the leader releases the lease and the standby leads
/// within a poll or two; a leader whose lease is taken from under it exits with status 1.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn two_operator_processes_fail_over() {
    let (client, ns) = setup("leader-bin").await;
    common::install_crd(&client).await;
    let dir = std::env::temp_dir().join(format!("benchrun-leader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key");
    std::fs::write(&key, common::KEY).unwrap();
    let lease = "benchrun-operator";

    let mut first = Operator::start(ns.name(), "op-a", &key);
    first.wait_gauge(1.0, Duration::from_secs(30)).await;
    wait_holder(&client, ns.name(), lease, "op-a", Duration::from_secs(5)).await;
    let mut second = Operator::start(ns.name(), "op-b", &key);
    second.wait_gauge(0.0, Duration::from_secs(30)).await;
    assert_eq!(first.leader_gauge().await, Some(1.0));

    first.signal("-TERM");
    assert_eq!(
        first.wait_exit(Duration::from_secs(20)).await,
        Some(0),
        "a SIGTERMed leader stops cleanly"
    );
    // Released, not expired: the standby polls every 2 s, far below the 15 s lease.
    let took = wait_holder(&client, ns.name(), lease, "op-b", Duration::from_secs(8)).await;
    second.wait_gauge(1.0, Duration::from_secs(5)).await;
    eprintln!("op-b leads {took:?} after op-a's SIGTERM exit");

    // Take the lease from under op-b (as a partitioned leader would find it): it must stop.
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let mut l = leases.get(lease).await.unwrap();
    if let Some(spec) = l.spec.as_mut() {
        spec.holder_identity = Some("intruder".into());
    }
    leases
        .replace(lease, &PostParams::default(), &l)
        .await
        .expect("replace lease");
    assert_eq!(
        second.wait_exit(Duration::from_secs(10)).await,
        Some(1),
        "a leader that lost its lease exits non-zero"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
