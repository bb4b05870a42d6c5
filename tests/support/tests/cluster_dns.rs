//! Services and DNS on the test cluster (kube-proxy, CoreDNS, the storage Services of
//! tests/cluster/addons.sh), seen from a pod on EACH node:
//! - a ClusterIP Service in front of a test pod answers, by name and by ClusterIP;
//! - `kubernetes.default.svc` resolves to the `kubernetes` Service and the apiserver answers on 443;
//! - the storage names the examples use (`minio.storage.svc:9000`, `azurite.storage.svc:10000`,
//!   `fake-gcs.storage.svc:4443`) resolve to their Services and the servers behind them answer.
//!
//! Needs the cluster (tests/cluster/up.sh) and the storage servers (tests/storage/up.sh).
//! Every wait is bounded and ends on an observable event: pod phase or readiness, or a check
//! inside the pod that retries until it succeeds (kube-proxy programs new rules asynchronously).

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::time::Duration;

use benchrun_test_support::cluster::{self, addon_image, NODES};
use benchrun_test_support::pods::{
    logs, restricted_container_security, restricted_pod_security, wait_for_phase,
};
use benchrun_test_support::TestNamespace;
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, Pod, PodSpec, Probe, Service, ServicePort, ServiceSpec,
    TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// The storage servers on the host, as tests/storage/up.sh starts them: name, in-cluster host
/// (as in examples/benchmarkrun-*.yaml), port, and the check of the in-pod script that asks it.
const STORAGE: [(&str, &str, u16, &str); 3] = [
    (
        "minio",
        "minio.storage.svc",
        9000,
        "status http://minio.storage.svc:9000/minio/health/live",
    ),
    (
        "azurite",
        "azurite.storage.svc",
        10000,
        "status http://azurite.storage.svc:10000/",
    ),
    (
        "fake-gcs",
        "fake-gcs.storage.svc",
        4443,
        "get http://fake-gcs.storage.svc:4443/storage/v1/b",
    ),
];

fn pod(name: &str, node: &str, image: &str, script: String, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_selector: Some(BTreeMap::from([(
                "kubernetes.io/hostname".into(),
                node.into(),
            )])),
            restart_policy: Some("Never".into()),
            // A bound on the pod's whole life, whatever hangs inside it.
            active_deadline_seconds: Some(180),
            automount_service_account_token: Some(false),
            security_context: Some(restricted_pod_security()),
            containers: vec![Container {
                name: "main".into(),
                image: Some(image.into()),
                image_pull_policy: Some("Never".into()),
                args: Some(vec!["sh".into(), "-c".into(), script]),
                security_context: Some(restricted_container_security()),
                volume_mounts: Some(vec![VolumeMount {
                    name: "tmp".into(),
                    mount_path: "/tmp".into(),
                    ..VolumeMount::default()
                }]),
                readiness_probe: labels.iter().any(|(k, _)| *k == "app").then(|| Probe {
                    tcp_socket: Some(TCPSocketAction {
                        port: IntOrString::Int(8080),
                        ..TCPSocketAction::default()
                    }),
                    period_seconds: Some(1),
                    ..Probe::default()
                }),
                ..Container::default()
            }],
            volumes: Some(vec![Volume {
                name: "tmp".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// The check script run in a pod on each node. Each check retries (at most 30 times, 1 s apart,
/// each try bounded by `timeout 5`) until it succeeds, then prints `CHECK <name> OK <output>`;
/// one that never succeeds prints `CHECK <name> FAIL <last output>`. The test reads the lines.
fn check_script(ns: &str, web_ip: &str, nonce: &str) -> String {
    let mut s = String::from(
        r#"
bb=busybox
# one line of output, so each check stays on its CHECK line
flat() { $bb tr '\r\n' '  '; }
run() { # run NAME CMD...: retry CMD until it exits 0
  name=$1; shift; n=0
  while :; do
    out=$("$@" 2>&1); rc=$?
    [ $rc = 0 ] && { echo "CHECK $name OK $(echo "$out" | flat)"; return; }
    n=$((n+1)); [ $n -ge 30 ] && { echo "CHECK $name FAIL rc=$rc $(echo "$out" | flat)"; return; }
    $bb sleep 1
  done
}
# resolve FQDN: the address of its A record, from the resolv.conf the kubelet wrote
resolve() { $bb timeout 5 $bb nslookup "$1" | $bb awk '/^Name:/{n=1} n&&/^Address/{print $2; found=1; exit} END{exit !found}'; }
# get URL: body of an HTTP GET that returned 2xx
get() { $bb timeout 5 $bb wget -q -O - "$1"; }
# status URL: the status line and Server header of an HTTP GET, whatever the status; fails
# when no HTTP answer came
status() { $bb timeout 5 $bb wget -S -O /dev/null "$1" 2>&1 | $bb grep -E '^ *(HTTP/|Server:)'; }
# raw HOST PORT: what a plain HTTP/1.0 request to a TLS port gets back; fails on no answer
raw() { r=$(printf 'GET / HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" | $bb timeout 5 $bb nc -w 5 "$1" "$2" | $bb head -c 200); [ -n "$r" ] && echo "$r"; }
echo "resolv.conf: $($bb cat /etc/resolv.conf | flat)"
run dns-kubernetes resolve kubernetes.default.svc.cluster.local
run https-kubernetes raw kubernetes.default.svc 443
"#,
    );
    s.push_str(&format!(
        "run web-by-name get http://web.{ns}.svc/{nonce}.txt\n\
         run web-by-short-name get http://web/{nonce}.txt\n\
         run web-by-clusterip get http://{web_ip}/{nonce}.txt\n"
    ));
    for (name, host, _, check) in STORAGE {
        s.push_str(&format!(
            "run dns-{name} resolve {host}.cluster.local\nrun http-{name} {check}\n"
        ));
    }
    s.push_str("echo CHECKS DONE\n");
    s
}

/// `CHECK name OK|FAIL output` lines of a check pod's log, by name.
fn parse_checks(log: &str) -> BTreeMap<String, (bool, String)> {
    log.lines()
        .filter_map(|l| l.strip_prefix("CHECK "))
        .filter_map(|l| {
            let mut it = l.splitn(3, ' ');
            let name = it.next()?.to_string();
            let ok = it.next()? == "OK";
            Some((name, (ok, it.next().unwrap_or("").trim().to_string())))
        })
        .collect()
}

async fn cluster_ip(client: &Client, ns: &str, name: &str) -> String {
    let svcs: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc = svcs
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("Service {ns}/{name}: {e}; run tests/cluster/up.sh"));
    svc.spec
        .and_then(|s| s.cluster_ip)
        .filter(|ip| !ip.is_empty() && ip != "None")
        .unwrap_or_else(|| panic!("Service {ns}/{name} has no ClusterIP"))
}

/// Waits (bounded) until the pod's Ready condition is True.
async fn wait_ready(client: &Client, ns: &str, name: &str, timeout: Duration) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let p = pods.get(name).await.expect("read pod");
        let ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if ready {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pod {ns}/{name} not Ready after {timeout:?}: {:?}",
            p.status
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn services_and_dns_work_from_a_pod_on_each_node() {
    // The servers themselves first, so a stopped server is not reported as a cluster problem.
    for (name, _, port, _) in STORAGE {
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))
            .unwrap_or_else(|e| {
                panic!("{name} does not answer on 127.0.0.1:{port} ({e}); run tests/storage/up.sh")
            });
    }
    let client = cluster::connect().await;
    cluster::require_ready_nodes(&client, &NODES).await;
    let busybox = addon_image("BUSYBOX_IMAGE");
    let ns = TestNamespace::create(&client, "dns").await;
    let nonce = format!("page-{}", ns.name());

    // A web server on vm behind a ClusterIP Service: the client on vm reaches it through its
    // own node's rules and bridge, the one on vm2 across nodes.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let web_script = format!(
        "mkdir -p /tmp/www && echo {nonce} > /tmp/www/{nonce}.txt && exec busybox httpd -f -p 8080 -h /tmp/www"
    );
    pods.create(
        &PostParams::default(),
        &pod("web", "vm", &busybox, web_script, &[("app", "web")]),
    )
    .await
    .expect("create web pod");
    let svcs: Api<Service> = Api::namespaced(client.clone(), ns.name());
    let svc = Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([("app".into(), "web".into())])),
            ports: Some(vec![ServicePort {
                port: 80,
                target_port: Some(IntOrString::Int(8080)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    svcs.create(&PostParams::default(), &svc)
        .await
        .expect("create web Service");
    wait_ready(&client, ns.name(), "web", Duration::from_secs(60)).await;

    let web_ip = cluster_ip(&client, ns.name(), "web").await;
    let mut want_ip = BTreeMap::from([(
        "dns-kubernetes".to_string(),
        cluster_ip(&client, "default", "kubernetes").await,
    )]);
    for (name, _, _, _) in STORAGE {
        want_ip.insert(
            format!("dns-{name}"),
            cluster_ip(&client, "storage", name).await,
        );
    }

    for node in NODES {
        let script = check_script(ns.name(), &web_ip, &nonce);
        pods.create(
            &PostParams::default(),
            &pod(&format!("check-{node}"), node, &busybox, script, &[]),
        )
        .await
        .unwrap_or_else(|e| panic!("create check pod on {node}: {e}"));
    }

    let mut failures = Vec::new();
    for node in NODES {
        let name = format!("check-{node}");
        let p = wait_for_phase(
            &client,
            ns.name(),
            &name,
            "Succeeded",
            Duration::from_secs(240),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(
            p.spec.and_then(|s| s.node_name).as_deref(),
            Some(node),
            "{name} ran on the wrong node"
        );
        let log = logs(&client, ns.name(), &name, "main")
            .await
            .expect("read check pod log");
        eprintln!("---- {name} ----\n{log}");
        assert!(
            log.contains("CHECKS DONE"),
            "{name} did not finish its checks:\n{log}"
        );
        let checks = parse_checks(&log);
        let mut expect =
            |check: &str, test: &dyn Fn(&str) -> bool, what: &str| match checks.get(check) {
                Some((true, out)) if test(out) => {}
                Some((ok, out)) => failures.push(format!(
                    "{node}: {check}: wanted {what}, got {} {out:?}",
                    if *ok { "OK" } else { "FAIL" }
                )),
                None => failures.push(format!("{node}: {check}: no CHECK line")),
            };
        for (check, ip) in &want_ip {
            expect(check, &|out| out == ip, &format!("address {ip}"));
        }
        // Go's TLS server answers a plain HTTP request with this: the apiserver itself replied.
        expect(
            "https-kubernetes",
            &|out| out.contains("Client sent an HTTP request to an HTTPS server"),
            "the apiserver's TLS port",
        );
        for check in ["web-by-name", "web-by-short-name", "web-by-clusterip"] {
            expect(check, &|out| out == nonce, &format!("the page {nonce:?}"));
        }
        expect(
            "http-minio",
            &|out| out.contains(" 200 OK") && out.contains("Server: MinIO"),
            "200 from MinIO's /minio/health/live",
        );
        // Unauthenticated, Azurite answers 400 with its own message: an answer from the server.
        expect(
            "http-azurite",
            &|out| out.starts_with("HTTP/1.1 "),
            "an HTTP status line from Azurite",
        );
        expect(
            "http-fake-gcs",
            &|out| out.contains("storage#buckets"),
            "fake-gcs-server's bucket list",
        );
    }
    assert!(
        failures.is_empty(),
        "failed checks:\n{}",
        failures.join("\n")
    );
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[test]
fn check_lines_parse() {
    let c = parse_checks("noise\nCHECK a OK 10.0.0.1\nCHECK b FAIL rc=1 x y\n");
    assert_eq!(c["a"], (true, "10.0.0.1".to_string()));
    assert_eq!(c["b"], (false, "rc=1 x y".to_string()));
}
