//! Results: each worker's summary is written to its own ConfigMap (`<run>-result-<worker>`,
//! gzip-compressed JSON in `binaryData`) the moment it is collected, before the status says
//! "collected". So an operator restart or a pod lost afterwards loses nothing, a summary is
//! never counted twice (one object per worker, created once), and no object grows with the
//! number of workers: a run of 1,000 workers writes 1,000 objects of one summary each, not one
//! object of 1,000 summaries (which the API server's ~1 MiB object limit refuses at a few
//! dozen). The merge reads them back page by page, adds the histograms and stores the merged
//! summary, the size of one summary, as `merged.json` in the run's result ConfigMap.

use std::collections::BTreeSet;
use std::io::{Read, Write};

use benchrun_api::Summary;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};

use crate::children::{create_if_absent, owned_by};
use crate::crd::oplog::WorkerOplog;
use crate::crd::MERGED_KEY;
use crate::crd::{BenchmarkRun, BenchmarkRunStatus, WorkerStatus};
use crate::resources::{
    self, result_cm_name, worker_result_cm_name, MANAGER, RESULT_LABEL, RESULT_REJECTED,
    RESULT_SUMMARY, RUN_LABEL, SUMMARY_GZ_KEY, WORKER_LABEL,
};
use crate::run_rules;
use crate::{Error, Result};

/// Largest decompressed summary accepted from a result object: what a worker may send
/// ([`crate::client::MAX_SUMMARY_BYTES`]), as only such a body is ever persisted. Anyone who
/// can create a ConfigMap in the namespace can forge one; a gzip bomb stops here.
const MAX_DECOMPRESSED: u64 = crate::client::MAX_SUMMARY_BYTES as u64;
/// Result objects read per list request while merging: bounds the memory held at once.
const MERGE_PAGE: u32 = 50;
/// Objects per page when listing only the metadata of what is persisted.
const LIST_PAGE: u32 = 500;

/// gzip of `text` (writing to a `Vec` cannot fail).
pub fn gzip(text: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = enc.write_all(text.as_bytes());
    enc.finish().unwrap_or_default()
}

/// The text inside a gzip body, refused past [`MAX_DECOMPRESSED`] bytes.
pub fn gunzip(gz: &[u8]) -> std::result::Result<String, String> {
    let mut out = String::new();
    flate2::read::GzDecoder::new(gz)
        .take(MAX_DECOMPRESSED + 1)
        .read_to_string(&mut out)
        .map_err(|e| format!("not gzip-compressed UTF-8: {e}"))?;
    if out.len() as u64 > MAX_DECOMPRESSED {
        return Err(format!("larger than {MAX_DECOMPRESSED} bytes uncompressed"));
    }
    Ok(out)
}

fn selector(run: &str, kind: &str) -> String {
    format!("{RUN_LABEL}={run},{RESULT_LABEL}={kind}")
}

/// Create `cm`; one of this run's that exists already is the same worker's answer, persisted
/// by an earlier pass (a worker answers the same summary every time), so it is kept as it is.
/// One that is not this run's (an earlier run's of the same name, a user's) is never taken for
/// the worker's summary: [`crate::Error::NotOurs`] says whose it is.
async fn create_once(cms: &Api<ConfigMap>, cm: &ConfigMap, run: &BenchmarkRun) -> Result<()> {
    create_if_absent(cms, cm, run).await.map(|_| ())
}

/// Persist one worker's summary (its JSON text as the worker sent it) in its own object.
pub async fn persist_worker(
    cms: &Api<ConfigMap>,
    run: &BenchmarkRun,
    worker: &str,
    json: &str,
) -> Result<()> {
    let cm = resources::worker_result_config_map(
        run,
        worker,
        RESULT_SUMMARY,
        SUMMARY_GZ_KEY,
        gzip(json),
    )?;
    create_once(cms, &cm, run).await
}

/// Keep an unusable answer of a worker (never counted or merged).
pub async fn persist_rejected(
    cms: &Api<ConfigMap>,
    run: &BenchmarkRun,
    worker: &str,
    body: &str,
) -> Result<()> {
    let cm = resources::worker_result_config_map(
        run,
        worker,
        RESULT_REJECTED,
        resources::REJECTED_GZ_KEY,
        gzip(body),
    )?;
    create_once(cms, &cm, run).await
}

/// Whether `cm` belongs to this incarnation of the run (a re-created run of the same name must
/// not count the old one's results).
fn owned(cm: &impl ResourceExt, run: &BenchmarkRun) -> bool {
    owned_by(run, cm.owner_references())
}

/// The workers whose summaries are persisted: metadata only, page by page.
pub async fn persisted_workers(
    cms: &Api<ConfigMap>,
    run: &BenchmarkRun,
) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut lp = ListParams::default()
        .labels(&selector(&run.name_any(), RESULT_SUMMARY))
        .limit(LIST_PAGE);
    loop {
        let page = cms.list_metadata(&lp).await?;
        for m in &page.items {
            if owned(m, run) {
                if let Some(w) = m.labels().get(WORKER_LABEL) {
                    out.insert(w.clone());
                }
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => return Ok(out),
        }
    }
}

/// The summary JSON inside a worker's result object.
fn summary_text(cm: &ConfigMap) -> std::result::Result<String, String> {
    let gz = cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get(SUMMARY_GZ_KEY))
        .ok_or_else(|| format!("{} has no {SUMMARY_GZ_KEY}", cm.name_any()))?;
    gunzip(&gz.0).map_err(|e| format!("{}: {e}", cm.name_any()))
}

/// One worker's persisted summary JSON, if there is one.
pub async fn load_worker(
    cms: &Api<ConfigMap>,
    run: &BenchmarkRun,
    worker: &str,
) -> Result<Option<String>> {
    let Some(cm) = cms
        .get_opt(&worker_result_cm_name(&run.name_any(), worker))
        .await?
    else {
        return Ok(None);
    };
    if !owned(&cm, run) {
        return Ok(None);
    }
    summary_text(&cm).map(Some).map_err(Error::Result)
}

/// Parse and check one persisted summary, of any format version this operator reads (one
/// persisted by an older operator, or served by an older worker image, is upgraded; a newer
/// one is refused with its version named).
pub fn parse(worker: &str, text: &str) -> Result<Summary> {
    benchrun_api::summary_read::read(text)
        .map_err(|e| Error::Result(format!("the summary of worker {worker}: {e}")))
}

/// Merge the persisted summaries of exactly `workers`, reading them [`MERGE_PAGE`] objects at a
/// time and folding each page into the running merge, so memory holds one page, not the run.
/// `Error::Result` means the data does not merge (retrying will not help); `Error::Kube` that
/// the API server could not be read.
pub async fn merge_persisted(
    cms: &Api<ConfigMap>,
    run: &BenchmarkRun,
    workers: &[&str],
) -> Result<Summary> {
    let want: BTreeSet<&str> = workers.iter().copied().collect();
    let mut seen = BTreeSet::new();
    let mut acc: Option<Summary> = None;
    let mut lp = ListParams::default()
        .labels(&selector(&run.name_any(), RESULT_SUMMARY))
        .limit(MERGE_PAGE);
    loop {
        let page = cms.list(&lp).await?;
        let mut parts: Vec<Summary> = acc.take().into_iter().collect();
        for cm in &page.items {
            let Some(w) = cm.labels().get(WORKER_LABEL) else {
                continue;
            };
            if !owned(cm, run) || !want.contains(w.as_str()) || !seen.insert(w.clone()) {
                continue;
            }
            let text = summary_text(cm).map_err(Error::Result)?;
            parts.push(parse(w, &text)?);
        }
        if !parts.is_empty() {
            acc = Some(Summary::merge(&parts).map_err(|e| Error::Result(e.to_string()))?);
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    if let Some(w) = want.iter().find(|w| !seen.contains(**w)) {
        return Err(Error::Result(format!("no summary for worker {w}")));
    }
    acc.ok_or_else(|| Error::Result("no workers to merge".into()))
}

/// Store the merged summary as `merged.json` in the run's result ConfigMap (a merge patch:
/// other keys stay).
pub async fn persist_merged(cms: &Api<ConfigMap>, run: &str, json: &str) -> Result<()> {
    let patch = serde_json::json!({ "data": { MERGED_KEY: json } });
    cms.patch(
        &result_cm_name(run),
        &PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        },
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// The merged summary of a finished run (`merged.json` in its result ConfigMap), if any: what
/// baselines and comparisons are built on.
pub async fn load_merged(cms: &Api<ConfigMap>, run: &str) -> Result<Option<Summary>> {
    let Some(cm) = cms.get_opt(&result_cm_name(run)).await? else {
        return Ok(None);
    };
    let Some(text) = cm.data.as_ref().and_then(|d| d.get(MERGED_KEY)) else {
        return Ok(None);
    };
    parse("merged", text).map(Some)
}

/// Fill a worker's figures from its own summary.
pub fn fold_worker(w: &mut WorkerStatus, f: &WorkerFigures) {
    w.ops_per_sec = Some(f.ops_per_sec);
    w.p99_ms = Some(f.p99_ms);
    w.errors = Some(f.errors);
    w.started_at = Some(f.started_at.clone());
    w.oplog = f.oplog.clone();
}

/// What a worker's status shows of its summary: taken as soon as the summary is persisted,
/// so a pass that collects a thousand workers holds a thousand of these, not a thousand
/// summaries with their histograms (the operator's peak memory at fleet scale).
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerFigures {
    /// All ops per second.
    pub ops_per_sec: f64,
    /// All ops' p99, ms.
    pub p99_ms: f64,
    /// Failed ops.
    pub errors: u64,
    /// Start of its measured stage, RFC 3339.
    pub started_at: String,
    /// With `spec.oplog`: where its log is, or why it is not.
    pub oplog: Option<WorkerOplog>,
}

impl WorkerFigures {
    /// The figures of summary `s`.
    pub fn of(s: &Summary) -> WorkerFigures {
        let total = s.total().report(s.elapsed_seconds);
        WorkerFigures {
            ops_per_sec: (total.ops_per_sec * 100.0).round() / 100.0,
            p99_ms: total.p99_ms,
            errors: total.errors,
            started_at: s.started_at.to_rfc3339(),
            oplog: s.oplog.as_ref().map(|o| WorkerOplog {
                uri: o.uri.clone(),
                records: o.records,
                dropped: o.dropped,
                error: o.upload_error.clone(),
            }),
        }
    }
}

/// Fill the run's aggregate figures from the merged summary.
pub fn fold_merged(status: &mut BenchmarkRunStatus, merged: &Summary) {
    status.results = run_rules::op_results(merged);
    status.endpoints = run_rules::endpoint_results(merged);
    status.volume = merged.volume.clone();
    status.connections_opened = merged.connections_opened;
    status.training = merged
        .training
        .as_ref()
        .map(crate::crd::training::TrainingStatus::of);
    status.checkpoint = merged
        .checkpoint
        .as_ref()
        .map(crate::crd::training::CheckpointStatus::of);
    status.stopped_by = (!merged.stopped_by.is_empty()).then(|| merged.stopped_by.clone());
    if let Some(all) = status.results.get("all") {
        status.throughput = Some(run_rules::throughput_text(
            all.ops_per_sec,
            Some(all.mib_per_sec),
        ));
        status.p99 = Some(format!("{:.3}ms", all.p99_ms));
    }
    status.start_skew_ms = run_rules::start_skew_ms(&status.workers);
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_api::stats::{Latency, OpStats, Second, SUMMARY_VERSION};
    use benchrun_api::OpKind;
    use std::collections::BTreeMap;
    use std::time::Duration;

    /// xorshift: a fixed, dependency-free stream of "measured" values.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// A worker's summary of a one-hour run: five ops with wide latency histograms (every
    /// bucket from 50 µs to 200 ms is hit) and a per-second timeline of 3,600 entries with
    /// varying counts, i.e. the largest summary a realistic run sends.
    fn hour_summary(id: &str, seed: u64) -> Summary {
        long_summary(id, seed, 3600, 0)
    }

    /// A worker's summary of a run of `seconds` after a warm-up of `warmup` seconds, its
    /// timeline built as a worker's recorder builds it (compacted past the first hour).
    fn long_summary(id: &str, seed: u64, seconds: u64, warmup: u64) -> Summary {
        let mut rng = Rng(seed);
        let mut ops = BTreeMap::new();
        for op in OpKind::ALL.into_iter().filter(|o| !o.is_block()) {
            let mut s = OpStats {
                count: 0,
                requests: 0,
                ..Default::default()
            };
            let mut lat = Latency::default();
            for _ in 0..200_000 {
                let us = 50 + rng.next() % 200_000;
                lat.record(Duration::from_micros(us));
                s.count += 1;
                s.requests += 2;
                s.bytes += 16 << 10;
            }
            if op == OpKind::Get {
                s.ttfb = Some(lat.clone());
            }
            s.latency = lat;
            ops.insert(op, s);
        }
        let mut second = |second: u64| Second {
            second,
            ops: 20_000 + rng.next() % 20_000,
            bytes: 300_000_000 + rng.next() % 300_000_000,
            errors: rng.next() % 3,
            latency_sum_us: 40_000_000 + rng.next() % 40_000_000,
            ..Default::default()
        };
        let (mut warm, mut measured) = (vec![], vec![]);
        for sec in 0..warmup {
            Second::at_stage(&mut warm, sec, true).add(&second(sec));
        }
        for sec in 0..seconds {
            Second::at(&mut measured, sec).add(&second(sec));
        }
        let s = Summary {
            target: "s3://bucket/prefix".into(),
            workers: 1,
            worker_ids: vec![id.into()],
            // One start for every worker: merged timelines are aligned by it.
            started_at: chrono::DateTime::UNIX_EPOCH,
            elapsed_seconds: seconds as f64,
            stopped_by: "duration".into(),
            warmup: (warmup > 0).then(|| benchrun_api::stats::Warmup {
                seconds: warmup as f64,
                ops: ops.clone(),
                ..Default::default()
            }),
            ops,
            timeline: warm.into_iter().chain(measured).collect(),
            ..Default::default()
        };
        // Fills `report` as a worker's summary has it.
        Summary::merge(&[s]).expect("one summary merges")
    }

    /// Runs of any length: a 24-hour and a 30-day summary (the longest `duration`, after the
    /// longest warm-up) stay below what the operator reads of a summary
    /// ([`crate::client::MAX_SUMMARY_BYTES`], 1 MiB) and fit their result object; 8 workers'
    /// merge (stored uncompressed as `merged.json`) stays below it too and adds every count
    /// exactly.
    #[test]
    fn day_and_month_long_summaries_fit_and_merge_exactly() {
        for (name, seconds) in [("24-hour", 24 * 3600), ("30-day", 30 * 24 * 3600)] {
            let parts: Vec<Summary> = (0..8)
                .map(|i| long_summary(&format!("w{i}"), 3 + i, seconds, 600))
                .collect();
            let json = serde_json::to_string(&parts[0]).unwrap();
            let gz = gzip(&json);
            println!(
                "{name} summary: {} bytes JSON, {} bytes gzip, {} timeline entries",
                json.len(),
                gz.len(),
                parts[0].timeline.len()
            );
            assert!(
                json.len() < crate::client::MAX_SUMMARY_BYTES,
                "{name}: {} bytes",
                json.len()
            );
            assert!(gz.len() < 512 << 10, "{name}: {} bytes gzip", gz.len());
            // Persisted and read back as the operator does (the counts and histograms; the
            // derived floats may differ in their last digit through JSON).
            let back: Summary = serde_json::from_str(&gunzip(&gz).unwrap()).unwrap();
            assert_eq!(back.timeline, parts[0].timeline);
            assert_eq!(back.ops, parts[0].ops);
            assert_eq!(
                back.warmup.map(|w| w.ops),
                parts[0].warmup.clone().map(|w| w.ops)
            );
            let merged = Summary::merge(&parts).unwrap();
            let merged_json = serde_json::to_string(&merged).unwrap();
            println!("{name}, 8 workers merged: {} bytes JSON", merged_json.len());
            assert!(
                merged_json.len() < crate::client::MAX_SUMMARY_BYTES * 3 / 4,
                "{name} merged: {} bytes",
                merged_json.len()
            );
            assert_eq!(merged.timeline.len(), parts[0].timeline.len());
            for warmup in [true, false] {
                let sum = |s: &Summary, f: fn(&Second) -> u64| -> u64 {
                    s.timeline
                        .iter()
                        .filter(|t| t.warmup == warmup)
                        .map(f)
                        .sum()
                };
                for f in [
                    |t: &Second| t.ops,
                    |t: &Second| t.bytes,
                    |t: &Second| t.errors,
                ] {
                    let want: u64 = parts.iter().map(|p| sum(p, f)).sum();
                    assert_eq!(sum(&merged, f), want, "{name}");
                }
            }
            let get = &merged.ops[&OpKind::Get];
            assert_eq!(get.count, 8 * 200_000);
            assert_eq!(get.ttfb.as_ref().unwrap().count(), 8 * 200_000);
        }
    }

    /// Summaries persisted by an older operator or served by an older worker image (format
    /// version 1) are read and merge with current ones; a newer format is refused by number.
    #[test]
    fn persisted_summaries_of_every_known_version_are_read_and_a_newer_one_is_refused() {
        let v1 = include_str!("../../api/tests/fixtures/summary-v1.json");
        assert!(v1.contains("\"version\": 1"), "the fixture is version 1");
        let old = parse("w0", &gunzip(&gzip(v1)).unwrap()).unwrap();
        assert_eq!(old.schema_version, SUMMARY_VERSION);
        assert_eq!(
            (old.tool_version.as_ref(), old.workload.as_ref()),
            (None, None)
        );
        let mut new = old.clone();
        new.tool_version = Some(benchrun_api::stats::TOOL_VERSION.into());
        new.worker_ids = vec!["w1".into()];
        let text = serde_json::to_string(&new).unwrap();
        assert!(text.contains("\"schemaVersion\":2"), "{text:.60}");
        let back = parse("w1", &gunzip(&gzip(&text)).unwrap()).unwrap();
        // Counts and histograms exactly (the derived floats may differ in their last bit
        // through JSON); `assert!`, not `assert_eq!`: a summary's Debug is megabytes.
        assert!(back.ops == new.ops && back.tool_version == new.tool_version);
        let merged = Summary::merge(&[old, back]).unwrap();
        assert_eq!(merged.workers, 2);
        // The merged summary as stored in `merged.json` reads back the same.
        let stored = serde_json::to_string(&merged).unwrap();
        let read = parse("merged", &stored).unwrap();
        assert!(read.ops == merged.ops && read.worker_ids == ["fixture", "w1"]);

        let future = v1.replacen("\"version\": 1", "\"schemaVersion\": 5", 1);
        let e = parse("w2", &future).unwrap_err().to_string();
        assert!(
            e.contains("worker w2") && e.contains("schemaVersion 5 is not supported"),
            "{e}"
        );
    }

    #[test]
    fn gzip_round_trip_and_refusals() {
        let text = "{\"a\": 1}".repeat(1000);
        assert_eq!(gunzip(&gzip(&text)).unwrap(), text);
        assert!(gunzip(b"not gzip").unwrap_err().contains("not gzip"));
        // A bomb: 1 KiB or so of gzip that decompresses past what a worker may send.
        let bomb = gzip(&" ".repeat(crate::client::MAX_SUMMARY_BYTES + 1));
        assert!(bomb.len() < 8192, "{}", bomb.len());
        let e = gunzip(&bomb).unwrap_err();
        assert!(e.contains("larger than 1048576 bytes"), "{e}");
        let fits = " ".repeat(crate::client::MAX_SUMMARY_BYTES);
        assert_eq!(gunzip(&gzip(&fits)).unwrap().len(), fits.len());
    }

    /// A one-hour per-second summary fits its own object with room to spare (measured here:
    /// the figures are printed with `--nocapture`), and the merged summary of many workers is
    /// the size of one summary, not of the fleet.
    #[test]
    fn hour_long_summary_fits_one_object() {
        let s = hour_summary("w0", 0x9e37_79b9_7f4a_7c15);
        let json = serde_json::to_string(&s).unwrap();
        let gz = gzip(&json);
        let run = crate::crd::BenchmarkRun {
            metadata: kube::api::ObjectMeta {
                name: Some("a-run-with-a-long-name-of-forty-characters".into()),
                namespace: Some("benchmarks".into()),
                uid: Some("0b0c4a3e-1d2e-4f5a-8b9c-0d1e2f3a4b5c".into()),
                ..Default::default()
            },
            spec: serde_yaml::from_str(
                "workload: {target: 'file:///data', duration: 1h, ops: [{op: get, weight: 1}]}",
            )
            .unwrap(),
            status: None,
        };
        let cm = resources::worker_result_config_map(
            &run,
            "w999",
            RESULT_SUMMARY,
            SUMMARY_GZ_KEY,
            gz.clone(),
        )
        .unwrap();
        let object = serde_json::to_vec(&cm).unwrap().len();
        println!(
            "one-hour summary: {} bytes JSON, {} bytes gzip, {object} bytes as a ConfigMap",
            json.len(),
            gz.len()
        );
        assert!(
            json.len() < crate::client::MAX_SUMMARY_BYTES,
            "{} bytes",
            json.len()
        );
        // A quarter of the ~1 MiB object limit: room for longer timelines and more ops.
        assert!(object < 256 << 10, "{object} bytes");
        assert_eq!(
            gunzip(&cm.binary_data.unwrap()[SUMMARY_GZ_KEY].0).unwrap(),
            json
        );

        let parts: Vec<Summary> = (0..8)
            .map(|i| hour_summary(&format!("w{i}"), 7 + i))
            .collect();
        let merged = serde_json::to_string(&Summary::merge(&parts).unwrap()).unwrap();
        println!("merged of 8: {} bytes JSON", merged.len());
        // The merged document does not hold the summaries side by side: it grows only by the
        // worker ids and the digits of the summed counts (8 workers: about +11%).
        assert!(
            merged.len() < json.len() * 5 / 4,
            "{} vs {}",
            merged.len(),
            json.len()
        );
    }

    /// Two workers that spread their ops over two gateways (one answering slowly and with
    /// errors): `.status.endpoints` holds a row per URL, its counts summed over the workers
    /// and its percentiles read from the merged histograms, not averaged; a run through one
    /// endpoint has none (the row of all ops says it all).
    #[test]
    fn the_status_has_a_row_per_endpoint_merged_over_workers() {
        let ep = |count: u64, errors: u64, us: &[u64]| {
            let mut s = OpStats {
                count,
                errors,
                requests: count,
                bytes: count << 20,
                ..Default::default()
            };
            for &u in us {
                s.latency.record(Duration::from_micros(u));
            }
            s
        };
        let worker = |id: &str, fast: &[u64], slow: &[u64]| {
            let mut get = OpStats::default();
            for &u in fast.iter().chain(slow) {
                get.count += 1;
                get.requests += 1;
                get.bytes += 1 << 20;
                get.latency.record(Duration::from_micros(u));
            }
            get.count += 1;
            get.errors += 1;
            Summary {
                worker_ids: vec![id.into()],
                workers: 1,
                elapsed_seconds: 2.0,
                ops: [(OpKind::Get, get)].into(),
                endpoints: [
                    (
                        "https://gw-a:9000".to_string(),
                        ep(fast.len() as u64, 0, fast),
                    ),
                    (
                        "https://gw-b:9000".to_string(),
                        ep(slow.len() as u64 + 1, 1, slow),
                    ),
                ]
                .into(),
                ..Default::default()
            }
        };
        // Worker 1's gateway B is fast, worker 2's slow: an average of the two p99s would
        // sit between them, the merged histogram's p99 is worker 2's.
        let w1 = worker("w1", &[1_000, 1_000, 1_000], &[2_000]);
        let w2 = worker("w2", &[1_000; 3], &[50_000, 50_000, 50_000]);
        let merged = Summary::merge(&[w1, w2]).unwrap();
        let mut status = BenchmarkRunStatus::default();
        fold_merged(&mut status, &merged);
        assert_eq!(
            status.endpoints.keys().collect::<Vec<_>>(),
            ["https://gw-a:9000", "https://gw-b:9000"]
        );
        let (a, b) = (
            &status.endpoints["https://gw-a:9000"],
            &status.endpoints["https://gw-b:9000"],
        );
        assert_eq!((a.count, a.errors), (6, 0));
        assert_eq!((b.count, b.errors), (6, 2));
        // 6 ops over 2 s at each; B moved 6 MiB (as the fixture counts) in 2 s.
        assert_eq!((a.ops_per_sec, b.ops_per_sec), (3.0, 3.0));
        assert_eq!(b.mib_per_sec, 3.0);
        assert!((b.p99_ms - 50.0).abs() < 0.1, "{b:?}");
        assert!((b.p50_ms - 50.0).abs() < 0.1, "{b:?}");
        assert!((a.p99_ms - 1.0).abs() < 0.01, "{a:?}");
        // The endpoints add up to the run's row of all ops.
        let all = &status.results["all"];
        assert_eq!(a.count + b.count, all.count);
        assert_eq!(a.errors + b.errors, all.errors);
        // Written as `.status.endpoints`, keyed by URL, in the results' own row format.
        let v = serde_json::to_value(&status).unwrap();
        assert_eq!(v["endpoints"]["https://gw-b:9000"]["errors"], 2);
        assert_eq!(v["endpoints"]["https://gw-a:9000"]["p50Ms"], a.p50_ms);

        // One endpoint: no per-endpoint rows, and no key in the status.
        let mut one = merged.clone();
        one.endpoints.retain(|k, _| k == "https://gw-a:9000");
        let mut status = BenchmarkRunStatus::default();
        fold_merged(&mut status, &one);
        assert!(status.endpoints.is_empty());
        assert!(serde_json::to_value(&status)
            .unwrap()
            .get("endpoints")
            .is_none());
    }
}
