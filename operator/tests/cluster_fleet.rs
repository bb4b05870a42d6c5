//! A fleet of simulated workers on the real test cluster: kwok (tests/cluster/kwok.sh up) keeps
//! [`FLEET`] fake nodes Ready and marks the worker pods placed on them Running with an IP from
//! the node's pod CIDR, which this test puts inside 127.0.0.0/8. For every pod IP the test
//! starts one real `benchrun-worker agent` process on the host, bound to that IP, with the
//! run's token, running a short light workload against its own temporary directory. The
//! operator (in this process) then places, starts, collects and merges the workers exactly as
//! on real nodes, and the test checks the merge against its own union of the workers'
//! histograms.
//!
//! Fails (never skips) without the cluster, the images (tests/cluster/image.sh, whose worker
//! binary the agents run) or kwok, saying which script to run.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use benchrun_api::stats::Latency;
use benchrun_operator::crd::{BenchmarkRun, Phase};
use benchrun_operator::resources;
use benchrun_test_support::cluster::state_dir;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Pod, Taint};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};

use common::*;

/// Simulated workers: one per fake node (perNode).
const FLEET: usize = 60;
/// Label on the fake nodes of this test (value: the test namespace).
const FLEET_LABEL: &str = "benchrun.dev/fleet";

/// The worker binary of the images (tests/cluster/image.sh keeps it beside images.env).
fn worker_binary() -> PathBuf {
    let bin = state_dir().join("images/benchrun-worker");
    assert!(
        bin.is_file(),
        "{} is missing: run tests/cluster/image.sh",
        bin.display()
    );
    bin
}

/// A fake node for kwok: labelled and tainted as kwok's own, with pod CIDR 127.100.`i`.0/24.
fn fake_node(name: &str, ns: &str, i: usize) -> Node {
    let cidr = format!("127.100.{i}.0/24");
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([
                ("type".to_string(), "kwok".to_string()),
                (FLEET_LABEL.to_string(), ns.to_string()),
                ("kubernetes.io/hostname".to_string(), name.to_string()),
            ])),
            annotations: Some(BTreeMap::from([(
                "kwok.x-k8s.io/node".to_string(),
                "fake".to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(cidr.clone()),
            pod_cidrs: Some(vec![cidr]),
            taints: Some(vec![Taint {
                key: "kwok.x-k8s.io/node".into(),
                value: Some("fake".into()),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// Ready, and without the lifecycle controller's not-ready taint (new nodes carry it for a few
/// seconds; the operator does not place workers on tainted nodes).
fn settled(n: &Node) -> bool {
    benchrun_test_support::cluster::unschedulable(n).is_none()
}

async fn delete_fake_nodes(nodes: &Api<Node>, selector: &str) {
    let lp = ListParams::default().labels(selector);
    for n in nodes
        .list_metadata(&lp)
        .await
        .expect("list fake nodes")
        .items
    {
        let name = n.name_any();
        match nodes.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => panic!("deleting fake node {name}: {e}"),
        }
    }
}

/// One agent process per pod, killed when dropped (a failed test leaves none behind).
struct Agents(Vec<(String, Child)>);

impl Drop for Agents {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Start `benchrun-worker agent` for worker `name` on `ip`:8080, against `dir`.
fn start_agent(bin: &Path, dir: &Path, name: &str, ip: &str, token: &str) -> Child {
    let wd = dir.join(name);
    std::fs::create_dir_all(wd.join("data")).expect("agent dir");
    let workload = format!(
        "target: file://{}\nduration: 3s\nconcurrency: 1\nops: [{{op: get, weight: 3}}, {{op: put, weight: 1}}]\nobjectSize: 4KiB\ndataset: {{objects: 8}}\n",
        wd.join("data").display()
    );
    std::fs::write(wd.join("workload.yaml"), workload).expect("workload file");
    std::fs::write(wd.join("token"), token).expect("token file");
    let log = std::fs::File::create(wd.join("agent.log")).expect("agent log");
    Command::new(bin)
        .args(["agent", "--workload"])
        .arg(wd.join("workload.yaml"))
        .args(["--listen", &format!("{ip}:{}", resources::AGENT_PORT)])
        .arg("--token-file")
        .arg(wd.join("token"))
        .args(["--linger", "120s"])
        .env("BENCHRUN_WORKER_ID", name)
        .env("BENCHRUN_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log fd"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()))
}

fn fleet_spec(ns: &str) -> String {
    format!(
        r#"
workload:
  target: file:///data/bench
  duration: 3s
  concurrency: 1
  ops: [{{op: get, weight: 3}}, {{op: put, weight: 1}}]
  objectSize: 4KiB
  dataset: {{objects: 8}}
workers:
  perNode: true
  nodeSelector: {{{FLEET_LABEL}: {ns}}}
  tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]
volume: {{emptyDir: {{}}}}
timeout: 5m
cleanup: Always
"#
    )
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_fleet_collects_and_merges_every_worker() {
    let env = env("op-fleet").await;
    let bin = worker_binary();
    let ns = env.ns.name().to_string();
    let nodes: Api<Node> = Api::all(env.client.clone());
    // Fake nodes left by an earlier, interrupted run of this test.
    delete_fake_nodes(&nodes, FLEET_LABEL).await;
    let names: Vec<String> = (0..FLEET).map(|i| format!("{ns}-n{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        nodes
            .create(&PostParams::default(), &fake_node(name, &ns, i))
            .await
            .unwrap_or_else(|e| panic!("creating fake node {name}: {e}"));
    }
    let mine = format!("{FLEET_LABEL}={ns}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let list = nodes
            .list(&ListParams::default().labels(&mine))
            .await
            .expect("list fake nodes");
        let ready = list.items.iter().filter(|n| settled(n)).count();
        if ready == FLEET {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            delete_fake_nodes(&nodes, &mine).await;
            panic!("{ready}/{FLEET} fake nodes Ready after 120 s: is kwok running? (tests/cluster/kwok.sh up)");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let _op = spawn_operator(&env);
    let api = create_run(&env, "fleet", &fleet_spec(&ns)).await;
    let run = api.get("fleet").await.expect("read run");
    let token = resources::worker_token(KEY, &run.uid().expect("uid"));
    let dir = std::env::temp_dir().join(format!("benchrun-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    // An agent for each worker pod as soon as kwok gives it an IP.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &ns);
    let mut agents = Agents(Vec::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    while agents.0.len() < FLEET {
        for p in pods.list(&run_selector("fleet")).await.expect("pods").items {
            let Some(w) = p.labels().get(resources::WORKER_LABEL).cloned() else {
                continue;
            };
            let Some(ip) = p.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
                continue;
            };
            if agents.0.iter().any(|(n, _)| *n == w) {
                continue;
            }
            assert!(
                ip.starts_with("127.100."),
                "pod {} got IP {ip}, not one from its fake node's 127.100.x.0/24",
                p.name_any()
            );
            let child = start_agent(&bin, &dir, &w, &ip, &token);
            agents.0.push((w, child));
        }
        let r = api.get("fleet").await.expect("read run");
        if finished(&r) || tokio::time::Instant::now() > deadline {
            panic!(
                "{} of {FLEET} agents started; run status:\n{}",
                agents.0.len(),
                serde_yaml::to_string(&r.status).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    let run: BenchmarkRun = wait_for(
        &api,
        "fleet",
        Duration::from_secs(240),
        "finished",
        finished,
    )
    .await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert_eq!(st.workers.len(), FLEET);
    assert_eq!(
        st.worker_phases,
        BTreeMap::from([("Collected".to_string(), FLEET as u32)])
    );
    assert_eq!(
        condition(&run, "StartRequestsOnTime").map(|c| c.status.as_str()),
        Some("True"),
        "{:#?}",
        st.conditions
    );

    // Counts are the sums of the workers' (check_merged), and each op's p99 is that of the
    // union of the workers' histograms, added up here sample bucket by bucket.
    let (merged, parts) = check_merged(&env, &run, FLEET).await;
    for (op, stats) in &merged.ops {
        let mut union = Latency::default();
        let mut count = 0;
        for p in &parts {
            if let Some(s) = p.ops.get(op) {
                union.0.add(&s.latency.0).expect("same histogram bounds");
                count += s.count;
            }
        }
        assert_eq!(stats.count, count, "{op} count");
        assert_eq!(union.count(), stats.latency.count(), "{op} samples");
        let p99 = union.quantile_us(0.99) as f64 / 1000.0;
        assert_eq!(st.results[&op.to_string()].p99_ms, p99, "{op} p99");
        assert_eq!(merged.report[op].p99_ms, p99, "{op} merged p99");
    }
    // Each worker's summary in its own object, none in the run's result ConfigMap.
    assert_eq!(
        result_objects(&env, "fleet", resources::RESULT_SUMMARY)
            .await
            .len(),
        FLEET
    );
    assert_eq!(
        result_data(&env, "fleet")
            .await
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        [benchrun_operator::crd::MERGED_KEY]
    );
    println!(
        "fleet of {FLEET}: start skew {:?} ms, {}",
        st.start_skew_ms,
        st.throughput.clone().unwrap_or_default()
    );

    // The operator told every agent to exit once its summary was persisted.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for (w, c) in &mut agents.0 {
        loop {
            if let Some(status) = c.try_wait().expect("agent wait") {
                assert!(status.success(), "agent {w} exited with {status}");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "agent {w} still running 30 s after the run succeeded: no shutdown reached it"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    wait_pods_gone(&env, "fleet", "cleanup: Always").await;
    delete_fake_nodes(&nodes, &mine).await;
    let _ = std::fs::remove_dir_all(&dir);
}
