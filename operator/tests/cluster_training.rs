//! Training and checkpoint workloads as `BenchmarkRun`s on the real two-node test cluster,
//! against MinIO on the host (tests/cluster/up.sh, image.sh and tests/storage/up.sh), the
//! storage every worker of a training run shares (each epoch's order is split over all of
//! them): two workers prepare the dataset before the start instant, read every sample exactly
//! once per epoch between them (seen in their op-logs), and the run's status carries the merged
//! AU of both; a checkpoint over two workers reports save and restore as the slowest rank's,
//! each worker restoring the other's shards (`restoreShift`).
//!
//! Pods reach MinIO through this process's forwarder, as in `cluster_s3.rs` (`common::s3`).
//! These tests fail (never skip) when the cluster or the storage servers are not up.

mod common;

use std::collections::{BTreeMap, HashMap};
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

/// 40 samples of 16 KiB, 2 epochs, one accelerator and one reader per worker: each worker's
/// op-log is its read order, 20 samples a epoch.
const SAMPLES: usize = 40;

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_train_on_minio_reading_every_sample_once_per_epoch() {
    let storage = storage_env();
    let env = env("op-train").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let _op = spawn_operator(&env);
    let (bucket, prefix) = (&storage["BENCHRUN_S3_BUCKET"], env.ns.name().to_string());
    let spec = format!(
        r#"
workload:
  target: s3://{bucket}/{prefix}/data/
  ops: [{{op: get}}]
  seed: 3
  training: {{samples: {SAMPLES}, sampleSize: 16KiB, batchSize: 2, readers: 1, computeTime: 2ms, epochs: 2}}
  storage: {{endpoint: '{endpoint}', allowHttp: true, pathStyle: true, region: us-east-1}}
secretRef: {{name: {CREDS}}}
oplog: {{uri: 's3://{bucket}/{prefix}/oplogs/'}}
thresholds: [{{op: all, minAU: 0}}]
workers:
  count: 2
  resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
cleanup: OnSuccess
startDelay: 3s
timeout: 3m
"#,
        endpoint = fwd.endpoint,
    );
    let api = create_run(&env, "tr", &spec).await;
    let run = wait_for(&api, "tr", Duration::from_secs(150), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert_eq!(st.workers.len(), 2, "{:#?}", st.workers);

    // The merged figures: both workers' AU, every sample of both epochs.
    let t = st.training.clone().expect("status.training");
    assert_eq!(t.accelerators, 2, "{t:?}");
    assert_eq!(t.epochs, 2, "{t:?}");
    let names: Vec<_> = st.workers.iter().map(|w| w.name.clone()).collect();
    assert_eq!(
        t.au.per_worker.keys().cloned().collect::<Vec<_>>(),
        {
            let mut n = names.clone();
            n.sort();
            n
        },
        "{t:?}"
    );
    for au in t.au.per_worker.values().chain([&t.au.mean, &t.au.min]) {
        assert!(*au > 0.0 && *au <= 100.0, "{t:?}");
    }
    assert!(t.au.min <= t.au.mean, "{t:?}");
    assert!(
        t.samples_per_second > 0.0 && t.mib_per_second > 0.0,
        "{t:?}"
    );
    assert_eq!(t.errors, 0, "{t:?}");
    // minAU 0 is a limit like any other: evaluated, met.
    assert!(
        st.thresholds
            .iter()
            .any(|c| c.limit == "minAU" && c.met && c.op == "all"),
        "{:?}",
        st.thresholds
    );

    // Each worker's op-log: 20 reads a epoch; over both, every sample once per epoch.
    let uid = run.metadata.uid.clone().expect("the run has a uid");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut logs = vec![];
    for w in &st.workers {
        assert_eq!(w.phase, WorkerPhase::Collected, "{w:?}");
        let log = w.oplog.clone().expect("the worker names its op-log");
        assert_eq!(log.error, None, "{}: upload failed", w.name);
        let key = format!(
            "{prefix}/oplogs/{}/tr/{uid}/{}.oplog.gz",
            env.ns.name(),
            w.name
        );
        let path = dir.path().join(format!("{}.oplog.gz", w.name));
        std::fs::write(&path, fetch(&storage, &key).await).expect("write the fetched log");
        let mut r = Reader::open(&path).expect("the fetched log opens");
        let mut keys = vec![];
        while let Some(rec) = r.next_record().expect("the fetched log reads whole") {
            assert_eq!(rec.error, None, "{rec:?}");
            if rec.phase == RecordPhase::Measured {
                keys.push(rec.key);
            }
        }
        assert_eq!(keys.len(), SAMPLES, "{}: half of 2 epochs", w.name);
        logs.push(keys);
    }
    for epoch in 0..2 {
        let mut count: BTreeMap<&str, u32> = BTreeMap::new();
        for log in &logs {
            let half = SAMPLES / 2;
            for k in &log[epoch * half..(epoch + 1) * half] {
                *count.entry(k.as_str()).or_default() += 1;
            }
        }
        assert_eq!(count.len(), SAMPLES, "epoch {epoch}: every sample read");
        assert!(
            count.values().all(|c| *c == 1),
            "epoch {epoch}: a sample read twice: {count:?}"
        );
    }
    assert_ne!(
        logs[0][..SAMPLES / 2],
        logs[0][SAMPLES / 2..],
        "epoch 1 repeats epoch 0's order"
    );
    wait_pods_gone(&env, "tr", "cleanup: OnSuccess of a successful run").await;
    drop(fwd);
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_across_two_workers_reports_the_slowest_ranks_save_and_restore() {
    let storage = storage_env();
    let env = env("op-ckpt").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let _op = spawn_operator(&env);
    let (bucket, prefix) = (&storage["BENCHRUN_S3_BUCKET"], env.ns.name().to_string());
    let spec = format!(
        r#"
workload:
  target: s3://{bucket}/{prefix}/ckpt/
  ops: [{{op: put}}]
  checkpoint: {{totalSize: 16MiB, ranks: 4, ranksPerWorker: 2, repeats: 2, restoreShift: 2}}
  storage: {{endpoint: '{endpoint}', allowHttp: true, pathStyle: true, region: us-east-1}}
secretRef: {{name: {CREDS}}}
workers:
  count: 2
  resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
cleanup: OnSuccess
startDelay: 3s
timeout: 3m
"#,
        endpoint = fwd.endpoint,
    );
    let api = create_run(&env, "ck", &spec).await;
    let run = wait_for(&api, "ck", Duration::from_secs(150), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let c = st.checkpoint.clone().expect("status.checkpoint");
    assert_eq!((c.ranks, c.repeats, c.errors), (4, 2, 0), "{c:?}");
    assert_eq!(c.bytes, 16 << 20, "{c:?}");
    // The save time of a repeat is the slowest of the four ranks over both workers.
    let summaries = worker_summaries(&env, &run).await;
    let mut slowest = [0u64; 2];
    for s in &summaries {
        let part = s
            .checkpoint
            .as_ref()
            .expect("a worker's checkpoint figures");
        for r in &part.repeats {
            assert_eq!(r.ranks.len(), 2, "two ranks a worker");
            // restoreShift 2: each worker's ranks restored the other worker's shards.
            for x in &r.ranks {
                assert_eq!(x.restored_from, Some((x.rank + 2) % 4), "{x:?}");
                assert_eq!(x.error, None, "{x:?}");
            }
            let m = &mut slowest[r.repeat as usize];
            *m = (*m).max(r.save_us.expect("saved"));
        }
    }
    let mean_s = (slowest[0] + slowest[1]) as f64 / 2.0 / 1e6;
    let save = c.save_seconds.expect("a save time");
    assert!((save - mean_s).abs() < 0.001, "{save} vs {mean_s}");
    assert!(c.restore_seconds.is_some_and(|s| s > 0.0), "{c:?}");
    assert!(c.save_gbps.is_some_and(|g| g > 0.0), "{c:?}");
    wait_pods_gone(&env, "ck", "cleanup: OnSuccess of a successful run").await;
    drop(fwd);
}

/// A maximum-accelerators search as a `BenchmarkRun` of two workers: each probe is a child
/// run of both workers at one count, judged on its merged AU, and the counts follow the
/// standalone search's rule (replayed here with the same `Bracket`). The AU a count reaches is
/// the storage's and the nodes' business, so no count is asserted, only the search's
/// invariant: the answer has a passing probe with a failing probe one above it, or is the cap.
/// 64 samples of 4 KiB, 20 ms compute a step: each accelerator's share of an epoch shrinks as
/// the count grows (64 / (2 n) steps) while its first batch's wait does not, so AU falls with
/// the count and a 90% mark is crossed somewhere below the cap of 8 on most machines.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_probes_every_worker_at_once_and_stops_at_the_boundary() {
    use benchrun_api::training_search::Bracket;
    use benchrun_operator::crd::BenchmarkRun;
    use kube::api::Api;
    use kube::ResourceExt;

    let storage = storage_env();
    let env = env("op-search").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let _op = spawn_operator(&env);
    let (bucket, prefix) = (&storage["BENCHRUN_S3_BUCKET"], env.ns.name().to_string());
    let spec = format!(
        r#"
workload:
  target: s3://{bucket}/{prefix}/search/
  ops: [{{op: get}}]
  seed: 5
  concurrency: 4
  training: {{samples: 64, sampleSize: 4KiB, batchSize: 1, readers: 1, computeTime: 20ms, minAU: 90, search: {{maxAccelerators: true, upTo: 8}}}}
  storage: {{endpoint: '{endpoint}', allowHttp: true, pathStyle: true, region: us-east-1}}
secretRef: {{name: {CREDS}}}
workers:
  count: 2
  resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
cleanup: Always
startDelay: 3s
timeout: 8m
"#,
        endpoint = fwd.endpoint,
    );
    let api = create_run(&env, "sr", &spec).await;
    let run = wait_for(&api, "sr", Duration::from_secs(540), "finished", finished).await;
    let st = run.status.clone().expect("status");
    let s = st.search.clone().expect("status.search");
    let answer = s.max_accelerators.expect("the search ended with an answer");
    // One accelerator below the mark fails the run as a standalone search exits 4; else it
    // succeeded.
    if answer == 0 {
        let c = condition(&run, "Failed").expect("Failed");
        assert_eq!(c.reason, "ThresholdsNotMet", "{st:#?}");
    } else {
        assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    }
    assert_eq!((s.mark, s.cap), (90.0, 8), "{s:#?}");

    // Every probe: a child run of both workers at its count, owned and labelled, judged on
    // its merged result.
    let runs: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), env.ns.name());
    let uid = run.metadata.uid.clone().expect("uid");
    let mut bracket = Bracket::new(s.cap);
    for (k, row) in s.probes.iter().enumerate() {
        assert_eq!(row.run, format!("sr-probe-{}", k + 1));
        // The count is the search's next: 1, 2, 4, ... then bisection.
        assert_eq!(
            bracket.next(),
            Some(row.accelerators),
            "probe {}: {s:#?}",
            k + 1
        );
        let p = row.result.clone().expect("every probe judged");
        assert_eq!(p.accelerators, row.accelerators);
        assert!(p.complete, "{p:?}");
        assert_eq!(p.passed, p.au_min_percent >= s.mark, "{p:?}");
        bracket.record(p.accelerators, p.passed);

        let child = runs.get(&row.run).await.expect("the probe run");
        assert!(
            child.owner_references().iter().any(|o| o.uid == uid),
            "{}: owned by the search",
            row.run
        );
        assert_eq!(
            child
                .labels()
                .get("benchrun.dev/search")
                .map(String::as_str),
            Some("sr")
        );
        let t = child.spec.workload.training.clone().expect("training");
        assert_eq!(t.accelerators_per_worker, Some(row.accelerators));
        assert!(t.search.is_none());
        let cst = child.status.clone().expect("probe status");
        assert_eq!(cst.phase, row.phase);
        assert_eq!(
            cst.workers.len(),
            2,
            "{}: a probe runs on every worker",
            row.run
        );
        assert!(cst
            .workers
            .iter()
            .all(|w| w.phase == WorkerPhase::Collected));
        let ct = cst.training.clone().expect("probe training figures");
        assert_eq!(ct.accelerators, 2 * u64::from(row.accelerators), "{ct:?}");
        // Judged on the merged AU: the lowest of any accelerator of either worker.
        assert!((ct.au.min - p.au_min_percent).abs() < 0.01, "{ct:?} {p:?}");
        assert_eq!(ct.au.per_worker.len(), 2, "{ct:?}");
        // A probe below the mark is a run that missed its minAU.
        assert_eq!(cst.phase == Phase::Succeeded, p.passed, "{cst:#?}");
    }
    assert_eq!(bracket.next(), None, "the search ended where its rule does");
    assert_eq!(bracket.answer(), answer);
    assert_eq!(bracket.at_cap(), s.at_cap);
    // The invariant.
    let probe = |n: u32| {
        s.probes
            .iter()
            .filter_map(|r| r.result.as_ref())
            .find(|p| p.accelerators == n)
    };
    if s.at_cap {
        assert!(
            answer == s.cap && probe(s.cap).is_some_and(|p| p.passed),
            "{s:#?}"
        );
    } else {
        assert!(probe(answer + 1).is_some_and(|p| !p.passed), "{s:#?}");
        assert!(
            answer == 0 || probe(answer).is_some_and(|p| p.passed),
            "{s:#?}"
        );
    }

    // The run's own result: the answer probe's (the first's when none passed), with the
    // probe table, which `kubectl benchrun result` prints as the worker does.
    let data = result_data(&env, "sr").await;
    let merged = benchrun_api::summary_read::read(&data["merged.json"]).expect("merged.json");
    let f = merged
        .training
        .as_ref()
        .and_then(|t| t.search.clone())
        .expect("training.search in the merged result");
    assert_eq!(f.max_accelerators, answer);
    assert_eq!(
        f.probes,
        s.probes
            .iter()
            .filter_map(|r| r.result.clone())
            .collect::<Vec<_>>()
    );
    let table = benchrun_worker::training::search::table(&f);
    assert!(table.contains("max accelerators per worker"), "{table}");
    assert!(st.training.is_some() && !st.results.is_empty(), "{st:#?}");
    drop(fwd);
}
