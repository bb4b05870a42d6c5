//! An agent's op-log (`BenchmarkRun.spec.oplog`): recorded to a spool file in the pod's
//! scratch directory while the run goes, then uploaded through the run's own target backend
//! (its endpoint, TLS and credentials) to `<uri><worker>.oplog.gz`.
//!
//! The operator passes `--oplog-uri <spec.oplog.uri><namespace>/<run>/<run UID>/`, a
//! directory of that run alone (two namespaces' runs of one name, or a run applied again, do
//! not overwrite each other's logs). The spool is written by the same
//! bounded, never-waiting writer as `run --oplog` (records dropped are counted, not waited
//! for). The upload comes after the measured stage, so it is never timed into the result, and
//! before the summary is served, so the summary names the object. A failed upload is reported
//! in the summary's `oplog.uploadError`, and the measurement is served all the same.

use std::path::PathBuf;
use std::sync::Arc;

use crate::oplog::{self, Sink, Writer};
use crate::stats::OplogStats;
use crate::{Engine, Workload};

/// Where an agent records its op-log, from `--oplog-uri`, `--oplog-spool`, `--oplog-queue`.
#[derive(Clone, Debug)]
pub struct OplogPlan {
    /// The directory the log is uploaded to, ending in `/`: the run's own, made by the
    /// operator from `spec.oplog.uri`, the run's namespace, name and UID.
    pub uri: String,
    /// A writable local directory for the spool file (the pod's emptyDir `/tmp`).
    pub spool: PathBuf,
    /// Records queued for the writer before new ones are dropped.
    pub queue: usize,
}

/// An op-log being recorded by one agent.
#[derive(Debug)]
pub struct Recording {
    plan: OplogPlan,
    spool: PathBuf,
    writer: Writer,
}

impl OplogPlan {
    /// The object a worker's log is uploaded as, relative to [`OplogPlan::uri`].
    pub fn key(worker_id: &str) -> String {
        format!("{worker_id}.oplog.gz")
    }

    /// Create the spool file (header written) before anything runs, so that a bad spool
    /// directory or a block workload fails the worker before it prepares.
    pub fn start(
        &self,
        engine: &Engine,
        worker_id: &str,
    ) -> Result<(Recording, Arc<Sink>), String> {
        if engine.workload().block.is_some() {
            return Err(
                "spec.oplog records object operations: a block workload's I/Os are not recorded"
                    .into(),
            );
        }
        let spool = self.spool.join(Self::key(worker_id));
        let header = oplog::Header {
            worker_id: worker_id.to_string(),
            workload: engine.workload().clone(),
        };
        let writer = Writer::create(&spool, &header, self.queue)
            .map_err(|e| format!("creating the op-log spool: {e}"))?;
        let sink = writer.sink();
        Ok((
            Recording {
                plan: self.clone(),
                spool,
                writer,
            },
            sink,
        ))
    }
}

impl Recording {
    /// Close the spool and upload it with `workload`'s storage settings. Never fails: what
    /// went wrong is in the stats' `uploadError`, and the run's result stands without its log.
    pub async fn finish(self, workload: &Workload, worker_id: &str) -> OplogStats {
        let Recording {
            plan,
            spool,
            writer,
        } = self;
        let closed = tokio::task::spawn_blocking(move || writer.finish()).await;
        let mut stats = match closed {
            Ok(Ok(stats)) => stats,
            Ok(Err(e)) => return failed(format!("writing the op-log spool: {e}")),
            Err(e) => return failed(format!("the op-log writer task failed: {e}")),
        };
        let key = OplogPlan::key(worker_id);
        let uri = format!("{}{key}", plan.uri);
        match upload(workload, &plan.uri, &key, &spool).await {
            Ok(bytes) => {
                tracing::info!("op-log uploaded to {uri} ({bytes} bytes)");
                stats.uri = Some(uri);
                // Only once it is stored: a failed upload leaves the spool in the pod's
                // scratch directory, where `kubectl cp` can still fetch it while the pod lives.
                if let Err(e) = std::fs::remove_file(&spool) {
                    tracing::warn!("removing the op-log spool {}: {e}", spool.display());
                }
            }
            Err(e) => {
                tracing::warn!("op-log upload to {uri} failed: {e}");
                stats.upload_error = Some(format!("uploading to {uri}: {e}"));
            }
        }
        stats
    }
}

/// The stats of a log that could not even be closed: nothing to upload.
fn failed(why: String) -> OplogStats {
    tracing::warn!("{why}");
    OplogStats {
        upload_error: Some(why),
        ..Default::default()
    }
}

/// Open `dir` as a target with the run's storage settings and store the spool as `key`.
async fn upload(
    workload: &Workload,
    dir: &str,
    key: &str,
    spool: &std::path::Path,
) -> Result<u64, String> {
    let mut w = workload.clone();
    w.target = dir.to_string();
    let target = crate::targets::open(&w)
        .await
        .map_err(|e| format!("opening {dir}: {e}"))?;
    target.put_file(key, spool).await.map_err(|e| e.to_string())
}
