//! The built `kubectl-benchrun` binary against the real two-node test cluster
//! (tests/cluster/up.sh + image.sh), with the operator's controller running in this test
//! process and watching only the test's namespace (as `operator/tests/common/mod.rs` does).
//! The plugin is given the test kubeconfig with `--kubeconfig`; `KUBECONFIG` is removed from
//! its environment, so a developer's own cluster is never touched.
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use benchrun_api::Summary;
use benchrun_operator::crd::{BenchmarkRun, Phase};
use benchrun_operator::resources::RUN_LABEL;
use benchrun_operator::results;
use benchrun_test_support::NODES;
use common::{env_without_workers, exec, exec_stdin, plugin, Env, Ran};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::ListParams;
use kube::Api;
use tokio::io::AsyncWriteExt;

/// The operator's HMAC key in these tests.
const KEY: &[u8] = b"benchrun-plugin-test-operator-key";
/// Longest a short run may take from create to finish (pods start, prepare, 3 s measured).
const RUN_BOUND: Duration = Duration::from_secs(180);

async fn env(prefix: &str) -> Env {
    Env::new(prefix).await
}

fn spawn_operator(env: &Env) -> tokio::task::JoinHandle<()> {
    common::spawn_operator(env, KEY)
}

const WORKLOAD: &str = "\
target: file:///data/bench
duration: 3s
concurrency: 2
ops: [{op: get, weight: 60}, {op: put, weight: 30}, {op: stat, weight: 10}]
objectSize: 16KiB
dataset: {objects: 20}
";

/// The same as a BenchmarkRun manifest, one worker per node, with extra spec lines.
fn manifest(name: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: benchrun.dev/v1alpha1
kind: BenchmarkRun
metadata:
  name: {name}
spec:
  workload:
    target: file:///data/bench
    duration: 3s
    concurrency: 2
    ops: [{{op: get, weight: 60}}, {{op: put, weight: 30}}, {{op: stat, weight: 10}}]
    objectSize: 16KiB
    dataset: {{objects: 20}}
  workers:
    perNode: true
    resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
  volume: {{emptyDir: {{}}}}
  startDelay: 3s
  timeout: 3m
{extra}"#
    )
}

async fn get_run(env: &Env, name: &str) -> BenchmarkRun {
    let api: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), env.ns.name());
    api.get(name)
        .await
        .unwrap_or_else(|e| panic!("reading run {name}: {e}"))
}

async fn stored_merged(env: &Env, name: &str) -> Summary {
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), env.ns.name());
    results::load_merged(&cms, name)
        .await
        .expect("read the result ConfigMap")
        .unwrap_or_else(|| panic!("run {name} has no merged result"))
}

/// The cells of the table row of `op` (the worker's table: op, count, errors, ops/s, MiB/s,
/// req/op, mean, p50, p90, p95, p99, p99.9, p99.99, max).
fn table_row<'a>(table: &'a str, op: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.len() == 9 && cells[0] == op)
        .unwrap_or_else(|| panic!("no table row for {op} in:\n{table}"))
}

/// The printed table says what `.status.results` says, op by op.
fn check_table_against_status(table: &str, run: &BenchmarkRun) {
    let st = run.status.as_ref().expect("status");
    let ops: Vec<_> = st.results.keys().filter(|k| *k != "all").collect();
    assert!(!ops.is_empty(), "status has per-op results: {st:#?}");
    for op in ops {
        let r = &st.results[op];
        let cells = table_row(table, op);
        assert_eq!(cells[1], r.count.to_string(), "{op} count");
        assert_eq!(cells[2], r.errors.to_string(), "{op} errors");
        // The status rounds rates to 0.01, the table prints 0.1 of the exact figure.
        let close = |cell: &str, want: f64, what: &str| {
            let got: f64 = cell
                .parse()
                .unwrap_or_else(|_| panic!("{op} {what}: {cell:?}"));
            assert!(
                (got - want).abs() <= 0.06,
                "{op} {what}: table {got}, status {want}"
            );
        };
        close(cells[3], r.ops_per_sec, "ops/s");
        close(cells[4], r.mib_per_sec, "MiB/s");
        // The default table: op count errors ops/s MiB/s p50 p99 p99.9 max.
        assert_eq!(cells[5], format!("{:.3}", r.p50_ms), "{op} p50");
        assert_eq!(cells[6], format!("{:.3}", r.p99_ms), "{op} p99");
        assert_eq!(cells[8], format!("{:.3}", r.max_ms), "{op} max");
    }
}

/// Exactly one line on stderr, `error: ...` containing `want`.
fn one_line_error(r: &Ran, want: &str) {
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {:?}", r.stderr);
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(want),
        "{:?} should say {want:?}",
        lines[0]
    );
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn run_result_list_compare_report_and_logs() {
    let env = env("plugin").await;
    let _op = spawn_operator(&env);
    let ns = env.ns.name().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mixed.yaml");
    std::fs::write(&file, WORKLOAD).expect("write workload");

    // A standalone workload file, wrapped in a run of two workers.
    let a = exec(
        &ns,
        &[
            "run",
            file.to_str().expect("utf-8 path"),
            "--name",
            "a",
            "--workers",
            "2",
        ],
    )
    .await;
    assert_eq!(a.code, 0, "run a succeeds");
    assert!(
        a.stderr.contains("benchmarkrun.benchrun.dev/a created"),
        "{}",
        a.stderr
    );
    assert!(
        a.stderr.contains("\na: Succeeded"),
        "progress shown: {}",
        a.stderr
    );
    let run_a = get_run(&env, "a").await;
    assert_eq!(
        run_a.status.as_ref().map(|s| s.phase),
        Some(Phase::Succeeded)
    );
    assert_eq!(run_a.spec.workers.count, Some(2));
    assert!(run_a
        .spec
        .volume
        .as_ref()
        .and_then(|v| v.empty_dir.as_ref())
        .is_some());
    assert!(
        a.stdout
            .starts_with("merged result on file:///data/bench (2 workers"),
        "{}",
        a.stdout
    );
    check_table_against_status(&a.stdout, &run_a);

    // A manifest on stdin, one worker per node.
    // Its pods are kept (`cleanup: Never`) for `logs` below.
    let b = exec_stdin(&ns, &["run", "-"], &manifest("b", "  cleanup: Never\n")).await;
    assert_eq!(b.code, 0, "run b succeeds");
    let run_b = get_run(&env, "b").await;
    check_table_against_status(&b.stdout, &run_b);
    let mut nodes: Vec<_> = run_b
        .status
        .as_ref()
        .unwrap()
        .workers
        .iter()
        .filter_map(|w| w.node.clone())
        .collect();
    nodes.sort();
    assert_eq!(nodes, NODES.map(String::from).to_vec());

    // result: the table again, the merged summary as stored, each worker's table.
    let r = exec(&ns, &["result", "a"]).await;
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout, a.stdout, "result prints what run printed");
    let r = exec(&ns, &["result", "a", "-o", "json"]).await;
    assert_eq!(r.code, 0);
    let printed: Summary = serde_json::from_str(&r.stdout).expect("result -o json is a summary");
    let stored = stored_merged(&env, "a").await;
    assert_eq!(printed.workers, 2);
    assert_eq!(printed.worker_ids, stored.worker_ids);
    assert_eq!(
        printed.ops.keys().collect::<Vec<_>>(),
        stored.ops.keys().collect::<Vec<_>>()
    );
    for (op, s) in &stored.ops {
        assert_eq!(printed.ops[op].count, s.count, "{op}");
        assert_eq!(
            printed.report[op].p99_ms,
            run_a.status.as_ref().unwrap().results[&op.to_string()].p99_ms
        );
    }
    let r = exec(&ns, &["result", "a", "--per-worker"]).await;
    assert_eq!(r.code, 0);
    for w in &run_a.status.as_ref().unwrap().workers {
        assert!(
            r.stdout.contains(&format!(
                "\nworker {}:\nresult on file:///data/bench (1 worker",
                w.name
            )),
            "{}",
            r.stdout
        );
    }

    // list: both runs, with the merged figures of the status.
    let r = exec(&ns, &["list"]).await;
    assert_eq!(r.code, 0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert!(lines[0].starts_with("NAME") && lines[0].contains("OPS/S") && lines[0].contains("P99"));
    let all = &run_a.status.as_ref().unwrap().results["all"];
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    let want = [
        "a".to_string(),
        "Succeeded".into(),
        "2/2".into(),
        format!("{:.1}", all.ops_per_sec),
        format!("{:.1}", all.mib_per_sec),
        format!("{:.3}ms", all.p99_ms),
    ];
    assert_eq!(
        row[..6],
        want.iter().map(String::as_str).collect::<Vec<_>>()[..]
    );
    assert!(lines[2].starts_with("b "), "{}", r.stdout);

    // compare: B against A, from the stored summaries.
    let r = exec(&ns, &["compare", "a", "b", "-o", "json"]).await;
    assert_eq!(r.code, 0);
    let c: serde_json::Value = serde_json::from_str(&r.stdout).expect("compare --format json");
    assert_eq!(c["a"]["label"], "a");
    assert_eq!(c["b"]["label"], "b");
    assert_eq!(c["a"]["workers"], 2);
    let stored_b = stored_merged(&env, "b").await;
    let get = c["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["op"] == "get")
        .expect("a get row");
    let ops = get["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metric"] == "opsPerSec")
        .expect("ops/s delta");
    for (side, summary) in [("a", &stored), ("b", &stored_b)] {
        let want = summary.report[&benchrun_api::OpKind::Get].ops_per_sec;
        let got = ops[side].as_f64().expect("a number");
        assert!((got - want).abs() <= want * 1e-9, "{side}: {got} vs {want}");
    }
    let text = exec(&ns, &["compare", "a", "b"]).await;
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.contains("get") && text.stdout.contains("put"),
        "{}",
        text.stdout
    );
    // No op can lose more than 100% of its ops/s, and no p99 of two runs of one workload
    // grows elevenfold: the gate passes.
    let r = exec(&ns, &["compare", "a", "b", "--fail-if-slower", "1000"]).await;
    assert_eq!(r.code, 0, "nothing is 1000% slower: {}", r.stderr);

    // report: Markdown and charts of both.
    let out = dir.path().join("report");
    let r = exec(&ns, &["report", "a", "b", "--out", out.to_str().unwrap()]).await;
    assert_eq!(r.code, 0);
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md written");
    assert!(md.contains("- `a`: file:///data/bench, 2 workers"), "{md}");
    assert!(md.contains("- `b`: file:///data/bench, 2 workers"), "{md}");
    assert!(
        r.stdout
            .lines()
            .any(|l| l.ends_with(".svg") && Path::new(l).exists()),
        "{}",
        r.stdout
    );

    // logs: each worker's log, every line prefixed by its worker.
    let r = exec(&ns, &["logs", "b"]).await;
    assert_eq!(r.code, 0);
    assert!(
        r.stdout
            .lines()
            .all(|l| l.starts_with("[w0] ") || l.starts_with("[w1] ")),
        "{}",
        r.stdout
    );
    for w in ["w0", "w1"] {
        assert!(
            r.stdout.lines().any(|l| l.starts_with(&format!("[{w}] "))
                && l.contains(&format!("agent {w} listening"))),
            "{}",
            r.stdout
        );
    }
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_missed_threshold_exits_4_with_the_table_and_the_miss() {
    let env = env("plugin-thr").await;
    let _op = spawn_operator(&env);
    let ns = env.ns.name().to_string();
    let text = manifest(
        "gate",
        "  thresholds:\n    - {op: all, minOpsPerSec: 1000000000, maxErrorRate: 0.5}\n",
    );
    let r = exec_stdin(&ns, &["run", "-"], &text).await;
    assert_eq!(r.code, 4, "thresholds missed");
    let run = get_run(&env, "gate").await;
    assert_eq!(run.status.as_ref().map(|s| s.phase), Some(Phase::Failed));
    check_table_against_status(&r.stdout, &run);
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("threshold all minOpsPerSec") && l.ends_with("MISSED")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("threshold all maxErrorRate") && l.ends_with(" met")),
        "{}",
        r.stdout
    );
    let last = r.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: run gate missed its thresholds: all minOpsPerSec"),
        "{}",
        r.stderr
    );
    // result of the stored run gives the same verdict.
    let again = exec(&ns, &["result", "gate"]).await;
    assert_eq!(again.code, 4);
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn ctrl_c_with_delete_on_interrupt_deletes_the_run() {
    let env = env("plugin-int").await;
    let _op = spawn_operator(&env);
    let ns = env.ns.name().to_string();
    let long = manifest("long", "").replace("duration: 3s", "duration: 5m");
    let mut cmd = plugin(&ns, &["run", "-", "--delete-on-interrupt"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(long.as_bytes()).await.expect("write");
    drop(stdin);
    // Interrupt once the run is Running (a bounded poll, not a sleep).
    let api: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), &ns);
    let deadline = tokio::time::Instant::now() + RUN_BOUND;
    loop {
        let phase = api
            .get_opt("long")
            .await
            .expect("read")
            .and_then(|r| r.status)
            .map(|s| s.phase);
        if phase == Some(Phase::Running) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run long not Running: {phase:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let pid = child.id().expect("pid").to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill");
    assert!(kill.success());
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("ends after Ctrl-C")
        .expect("waits");
    let r = Ran::of(
        out,
        &["run", "-", "--delete-on-interrupt"],
        " (interrupted)",
    );
    assert_eq!(r.code, 130);
    assert!(
        r.stderr.contains("interrupted: run long deleted"),
        "{}",
        r.stderr
    );
    // The finalizer stops the workers, then the run is gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(150);
    while api.get_opt("long").await.expect("read").is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "run long still exists 150 s after the delete"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn bad_input_is_one_line_and_exit_2() {
    let (client, ns_guard) = env_without_workers("plugin-bad").await;
    let ns = ns_guard.name().to_string();
    let dir = tempfile::tempdir().expect("tempdir");

    let r = exec(&ns, &["result", "no-such-run"]).await;
    assert_eq!(r.code, 2);
    one_line_error(
        &r,
        &format!("benchmarkrun \"no-such-run\" not found in namespace \"{ns}\""),
    );

    for (name, text, want) in [
        (
            "notes.txt",
            "just some notes\n",
            "is not a workload or a BenchmarkRun",
        ),
        (
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
            "is a \"ConfigMap\"",
        ),
        (
            "typo.yaml",
            "target: file:///data/x\nduration: 3s\nops: [{op: gett}]\n",
            "is not a valid workload",
        ),
    ] {
        let f = dir.path().join(name);
        std::fs::write(&f, text).expect("write");
        let r = exec(&ns, &["run", f.to_str().unwrap()]).await;
        assert_eq!(r.code, 2, "{name}");
        one_line_error(&r, want);
    }
    let r = exec(&ns, &["run", "/no/such/file.yaml"]).await;
    assert_eq!(r.code, 2);
    one_line_error(&r, "reading /no/such/file.yaml");

    let missing = format!("{ns}-missing");
    for args in [&["list"][..], &["result", "x"], &["watch", "x"]] {
        let r = exec(&missing, args).await;
        assert_eq!(r.code, 2, "{args:?}");
        one_line_error(&r, &format!("namespace \"{missing}\" not found"));
    }
    let f = dir.path().join("ok.yaml");
    std::fs::write(&f, WORKLOAD).expect("write");
    let r = exec(&missing, &["run", f.to_str().unwrap()]).await;
    assert_eq!(r.code, 2);
    one_line_error(&r, &format!("namespace \"{missing}\" not found"));

    let r = exec(&ns, &["--context", "no-such-context", "list"]).await;
    assert_eq!(r.code, 2);
    one_line_error(&r, "no-such-context");
    // Nothing was created by any of these.
    let api: Api<BenchmarkRun> = Api::namespaced(client, &ns);
    assert!(api
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .is_empty());
}

/// Wait (a bounded poll) until every pod of run `name` has started its container: a log
/// can be followed only from then.
async fn wait_containers_started(env: &Env, name: &str, want: usize) {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    let lp = ListParams::default().labels(&format!("{RUN_LABEL}={name}"));
    let deadline = tokio::time::Instant::now() + RUN_BOUND;
    loop {
        let list = pods.list(&lp).await.expect("list pods").items;
        let started = list
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.state
                                .as_ref()
                                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
                        })
                    })
            })
            .count();
        if started == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{started} of {want} containers of run {name} started within {RUN_BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The lines of `text` whose prefix is `[w] `, in order.
fn lines_of<'a>(text: &'a str, w: &str) -> Vec<&'a str> {
    let prefix = format!("[{w}] ");
    text.lines().filter(|l| l.starts_with(&prefix)).collect()
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn logs_follow_streams_every_worker_until_it_ends() {
    let env = env("plugin-follow").await;
    let _op = spawn_operator(&env);
    let ns = env.ns.name().to_string();
    let api: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), &ns);
    let text = manifest("f", "  cleanup: Never\n").replace("duration: 3s", "duration: 6s");
    let run: BenchmarkRun = serde_yaml::from_str(&text).expect("manifest");
    api.create(&Default::default(), &run).await.expect("create");
    wait_containers_started(&env, "f", NODES.len()).await;

    // Followed while the run goes on: ends by itself once both containers have exited,
    // which they do only after the operator has collected their results.
    let followed = exec(&ns, &["logs", "f", "--follow"]).await;
    assert_eq!(followed.code, 0);
    // The containers exit once their results are collected; the merge and the status write
    // that says Succeeded may come a moment later, so the run is past its measured stage now
    // and succeeds after.
    let phase = get_run(&env, "f").await.status.map(|s| s.phase);
    assert!(
        matches!(phase, Some(Phase::Collecting | Phase::Succeeded)),
        "the stream ended with the workers, the run {phase:?}"
    );
    let deadline = tokio::time::Instant::now() + RUN_BOUND;
    let phase = loop {
        let phase = get_run(&env, "f").await.status.map(|s| s.phase);
        if phase.is_some_and(|p| p.is_finished()) || tokio::time::Instant::now() > deadline {
            break phase;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(phase, Some(Phase::Succeeded), "the run ended");
    // Every line is a worker's; each worker's lines are its whole log, in order, as the
    // non-following form prints it once the run is over.
    let whole = exec(&ns, &["logs", "f"]).await;
    assert_eq!(whole.code, 0);
    assert!(
        followed
            .stdout
            .lines()
            .all(|l| l.starts_with("[w0] ") || l.starts_with("[w1] ")),
        "{}",
        followed.stdout
    );
    for w in ["w0", "w1"] {
        let f = lines_of(&followed.stdout, w);
        assert!(
            f.iter()
                .any(|l| l.contains(&format!("agent {w} listening"))),
            "{w}'s first lines were streamed: {}",
            followed.stdout
        );
        assert_eq!(f, lines_of(&whole.stdout, w), "{w}'s whole log, in order");
    }
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn storageclass_benchmarks_the_default_class_and_cleans_up() {
    let env = env("plugin-sc").await;
    let _op = spawn_operator(&env);
    let ns = env.ns.name().to_string();
    // The test cluster's default class (tests/cluster/provisioner: an ext4 loop image per
    // claim), so the volume profile runs with real O_DIRECT on a real filesystem.
    let r = exec(
        &ns,
        &[
            "storageclass",
            "benchrun-hostpath",
            "--claim-size",
            "256Mi",
            "--file-size",
            "32MiB",
            "--duration",
            "2s",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "the class was benchmarked");
    assert!(
        r.stderr
            .contains("benchmarking StorageClass benchrun-hostpath: a 256Mi claim per node"),
        "{}",
        r.stderr
    );
    // The table: a header and one row per profile and op, each measured without error.
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{}", r.stdout);
    assert!(lines[0].starts_with("profile") && lines[0].contains("IOPS"));
    let want = [
        "random 4KiB QD32 (IOPS) read",
        "random 4KiB QD32 (IOPS) write",
        "sequential 1MiB QD4 (bandwidth) read",
        "sequential 1MiB QD4 (bandwidth) write",
        "random 4KiB QD1 (latency) read",
        "random 4KiB QD1 (latency) write",
    ];
    for (line, label) in lines[1..].iter().zip(want) {
        assert!(line.starts_with(label), "{line:?} is the {label:?} row");
        let cells: Vec<&str> = line[label.len()..].split_whitespace().collect();
        assert_eq!(cells.len(), 6, "{line:?}");
        assert_eq!(cells[0], "Succeeded", "{line:?}");
        let iops: f64 = cells[1].parse().expect("IOPS is a number");
        assert!(iops > 0.0, "{line:?}");
        assert_eq!(cells[5], "0", "no errors: {line:?}");
    }
    // Cleanup: the run, its children and their claims are deleted (a bounded poll:
    // deletion is asynchronous, through the finalizer and garbage collection).
    assert!(
        r.stderr.contains("deleted (its claims with it)"),
        "{}",
        r.stderr
    );
    common::wait_no_runs_or_claims(&env, RUN_BOUND).await;
}

/// `schedule create|list|suspend|resume|run|history` against the API server: the schedule is made
/// suspended from a workload file, so no run starts and no operator is needed.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn schedule_create_list_suspend_resume_and_history() {
    use benchrun_operator::crd::schedule::BenchmarkSchedule;
    let (client, ns_guard) = env_without_workers("plugin-sched").await;
    let ns = ns_guard.name().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("nightly-get.yaml");
    std::fs::write(&f, WORKLOAD).expect("write");
    let file = f.to_str().unwrap();

    // A bad time zone is bad input, naming the field; nothing is created.
    let r = exec(
        &ns,
        &[
            "schedule",
            "create",
            file,
            "--schedule",
            "@daily",
            "--time-zone",
            "Berlin",
        ],
    )
    .await;
    assert_eq!(r.code, 2);
    one_line_error(&r, "spec.timeZone: unknown time zone \"Berlin\"");

    let r = exec(
        &ns,
        &[
            "schedule",
            "create",
            file,
            "--schedule",
            "30 2 * * *",
            "--time-zone",
            "Europe/Berlin",
            "--workers",
            "2",
            "--suspend",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("benchmarkschedule.benchrun.dev/nightly-get created"),
        "{}",
        r.stdout
    );
    let api: Api<BenchmarkSchedule> = Api::namespaced(client.clone(), &ns);
    let s = api.get("nightly-get").await.expect("created");
    assert_eq!(s.spec.schedule, "30 2 * * *");
    assert_eq!(s.spec.time_zone.as_deref(), Some("Europe/Berlin"));
    assert_eq!(s.spec.run_template.workers.count, Some(2));
    assert!(s.spec.suspend);

    let r = exec(&ns, &["schedule", "list"]).await;
    assert_eq!(r.code, 0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[0].contains("LAST VERDICT"),
        "{}",
        r.stdout
    );
    assert!(
        lines[1].starts_with("nightly-get")
            && lines[1].contains("Europe/Berlin")
            && lines[1].contains("true"),
        "{}",
        r.stdout
    );

    let r = exec(&ns, &["schedule", "resume", "nightly-get"]).await;
    assert_eq!(r.code, 0);
    assert!(!api.get("nightly-get").await.expect("get").spec.suspend);
    let r = exec(&ns, &["schedule", "suspend", "nightly-get"]).await;
    assert_eq!(r.code, 0);
    assert!(api.get("nightly-get").await.expect("get").spec.suspend);

    // `run`: the request is the annotation the operator acts on (also while suspended), its
    // value a time that names the run printed.
    let r = exec(&ns, &["schedule", "run", "nightly-get"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = api.get("nightly-get").await.expect("get");
    let at = s
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("benchrun.dev/run-now"))
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .expect("a run-now annotation holding a time");
    assert!(
        r.stdout.contains(&format!(
            "benchmarkrun.benchrun.dev/nightly-get-{}",
            at.timestamp()
        )),
        "{}",
        r.stdout
    );
    let r = exec(&ns, &["schedule", "run", "nope"]).await;
    assert_eq!(r.code, 2);
    one_line_error(&r, "benchmarkschedule \"nope\" not found");

    let r = exec(&ns, &["schedule", "history", "nightly-get"]).await;
    assert_eq!(r.code, 0);
    assert!(r.stderr.contains("has made no runs yet"), "{}", r.stderr);
    let r = exec(&ns, &["schedule", "history", "nope"]).await;
    assert_eq!(r.code, 2);
    one_line_error(&r, "benchmarkschedule \"nope\" not found");
    let r = exec(&ns, &["schedule", "suspend", "nope"]).await;
    assert_eq!(r.code, 2);
    one_line_error(&r, "benchmarkschedule \"nope\" not found");
}
