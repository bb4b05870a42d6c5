//! One workload driven through the agent's stages: open, prepare, wait for the start (bounded
//! by `--start-timeout`), run, clean up, serve the summary.

use std::time::{Duration, SystemTime};

use chrono::Utc;

use super::{Agent, AgentStage};
use crate::{Engine, Workload};

/// Drive one workload through the agent's stages. Returns when the agent may exit:
/// `Ok(())` after a served summary, `Err(message)` after a failure.
pub async fn drive(
    agent: &Agent,
    workload: Workload,
    linger: Duration,
    error_linger: Duration,
) -> Result<(), String> {
    let result = drive_inner(agent, workload, linger).await;
    if let Err(message) = &result {
        agent.fail(message.clone());
        // Keep answering /v1/status so the operator reads the reason, then exit.
        tokio::select! {
            _ = tokio::time::sleep(error_linger) => {}
            _ = agent.wait_shutdown() => {}
        }
    }
    result
}

async fn drive_inner(
    agent: &Agent,
    mut workload: Workload,
    linger: Duration,
) -> Result<(), String> {
    if workload.training.is_some() || workload.checkpoint.is_some() {
        // Split over the run's ranks, with a measured part of their own.
        return super::ranked::drive(agent, workload, linger).await;
    }
    let cleanup = workload.dataset.cleanup;
    let worker_id = agent.lock().worker_id.clone();
    if workload.dataset.prepare {
        // Each worker prepares, reads and cleans up its own dataset under its own sub-prefix:
        // workers finish at slightly different instants, and a shared dataset would be
        // deleted by the first one done while the others still read it.
        workload.dataset.prefix = format!("{}{worker_id}/", workload.dataset.prefix);
    }
    let mut engine = Engine::open(workload, agent.metrics.clone(), &worker_id)
        .await
        .map_err(|e| format!("opening the target: {e}"))?
        .with_writer(agent.writer());
    if engine.workload().stop_when_stable.is_some() {
        // The seconds are counted for the operator in any case (an operator that decides only
        // for runs of several workers ignores them); with --stable-by-run this worker leaves
        // the decision to the run and ends at the instant the operator sends.
        engine = engine.with_run_stability(crate::engine::RunStability {
            local: !agent.stable_by_run,
            seconds: agent.seconds.clone(),
            stop_at: agent.stop_at_tx.subscribe(),
        });
    }
    // The spool is created before anything is prepared, so a bad one fails first.
    let mut recording = None;
    if let Some(plan) = &agent.oplog {
        let (r, sink) = plan.start(&engine, &worker_id)?;
        engine = engine.with_oplog(sink);
        recording = Some(r);
    }
    let dataset = tokio::select! {
        r = engine.prepare() => Some(r.map_err(|e| format!("preparing the dataset: {e}"))?),
        _ = agent.wait_shutdown() => None,
    };
    let Some(dataset) = dataset else {
        return stopped_before_start(&engine, cleanup).await;
    };
    agent.set_stage(AgentStage::Ready);
    let start_at = match wait_for_start(agent).await? {
        Waited::Start(at) => at,
        Waited::Stopped => return stopped_before_start(&engine, cleanup).await,
        // Nobody starts it (the operator gone, its start requests not reaching this pod):
        // say so rather than hold the node for ever; what was prepared is removed.
        Waited::TimedOut => {
            stopped_before_start(&engine, cleanup).await?;
            return Err(no_start_message(agent.start_timeout));
        }
    };
    agent.set_stage(AgentStage::Running);
    let stop = {
        let agent = agent.clone();
        async move { agent.wait_shutdown().await }
    };
    let mut summary = engine
        .run(&dataset, Some(SystemTime::from(start_at)), stop)
        .await
        .map_err(|e| format!("measured stage: {e}"))?;
    agent.lock().started_at = Some(summary.started_at);
    // A signal (eviction, pod deletion) that ended the measured stage early: what it measured
    // is less than the workload asked for, so it is never served as a result (the operator
    // would count it as the worker's whole run). The agent stays in `running`, cleans up, and
    // exits non-zero saying so; the pod tells the operator why it stopped.
    let cut_short = agent.lock().signalled_in == Some(AgentStage::Running);
    if cleanup {
        if !cut_short {
            agent.set_stage(AgentStage::CleaningUp);
        }
        match engine.cleanup().await {
            Ok(st) => summary.cleanup = Some(st),
            // A failed cleanup does not void the measurement: warn and keep the result.
            Err(e) => tracing::warn!("cleanup failed: {e}"),
        }
    }
    if cut_short {
        return Ok(());
    }
    // Uploaded after the cleanup (which could otherwise delete a log stored under the
    // dataset's prefix) and before the summary is served, which names where it is.
    if let Some(r) = recording {
        summary.oplog = Some(r.finish(engine.workload(), &worker_id).await);
    }
    serve(agent, summary, linger).await;
    Ok(())
}

/// Offer `summary` (stage `done`) until the operator's shutdown or `linger`.
pub(super) async fn serve(agent: &Agent, summary: crate::Summary, linger: Duration) {
    {
        let mut i = agent.lock();
        i.summary = Some(summary);
        i.stage = AgentStage::Done;
    }
    tokio::select! {
        _ = tokio::time::sleep(linger) => {}
        _ = agent.wait_shutdown() => {}
    }
}

/// Wait, once ready, for the operator's start time, a shutdown, or `--start-timeout`.
pub(super) async fn wait_for_start(agent: &Agent) -> Result<Waited, String> {
    let mut start_rx = agent.start_tx.subscribe();
    Ok(tokio::select! {
        r = start_rx.wait_for(|s| s.is_some()) => match r {
            Ok(s) => Waited::Start(s.unwrap_or_else(Utc::now)),
            Err(_) => return Err("start channel closed".into()),
        },
        _ = agent.wait_shutdown() => Waited::Stopped,
        _ = tokio::time::sleep(agent.start_timeout) => Waited::TimedOut,
    })
}

/// How the wait for the start time ended.
pub(super) enum Waited {
    /// The start time came.
    Start(chrono::DateTime<Utc>),
    /// Shut down first (the run failed or was deleted).
    Stopped,
    /// Nothing came within `--start-timeout`.
    TimedOut,
}

/// Why an agent ready for `waited` gave up on its start time.
pub(super) fn no_start_message(waited: Duration) -> String {
    format!(
        "no start time within {}s of being ready (--start-timeout): the operator never sent POST /v1/start (is it running, and can it reach this pod?)",
        waited.as_secs_f64()
    )
}

/// Stopped before the start (the run failed or was deleted): what the preparation wrote, all
/// or part, is removed as the workload's `dataset.cleanup` says, as after a run.
async fn stopped_before_start(engine: &Engine, cleanup: bool) -> Result<(), String> {
    if cleanup {
        if let Err(e) = engine.cleanup().await {
            tracing::warn!("cleanup after the stop failed: {e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use std::sync::Arc;

    #[tokio::test]
    async fn bad_target_fails_with_message() {
        let agent = Agent::new("w", "t", Arc::new(Metrics::new()));
        let w = Workload::from_yaml(
            "target: file:///proc/benchrun-no-such-dir\ntotalOps: 1\nops: [{op: get}]\ndataset: {objects: 1, size: 4KiB}\n",
        )
        .expect("valid workload");
        let r = drive(
            &agent,
            w,
            Duration::from_millis(10),
            Duration::from_millis(10),
        )
        .await;
        let e = r.expect_err("must fail");
        assert!(
            e.contains("opening the target") || e.contains("preparing"),
            "{e}"
        );
        let st = agent.status();
        assert_eq!(st.stage, AgentStage::Failed);
        assert_eq!(st.error.as_deref(), Some(e.as_str()));
    }

    /// Ready, and no start time ever comes: the agent fails after its start timeout, says why
    /// on its status (which the operator reads and names the worker with), and removes what
    /// it prepared.
    #[tokio::test]
    async fn a_start_that_never_comes_fails_after_the_bound_and_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let agent = Agent::new("w", "t", Arc::new(Metrics::new()))
            .with_start_timeout(Duration::from_millis(300));
        let w = Workload::from_yaml(&format!(
            "target: file://{}\nduration: 5s\nops: [{{op: get}}]\nobjectSize: 4KiB\ndataset: {{objects: 4}}\n",
            dir.path().display()
        ))
        .expect("valid workload");
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            drive(
                &agent,
                w,
                Duration::from_secs(60),
                Duration::from_millis(10),
            ),
        )
        .await
        .expect("bounded: the agent gives up on its own");
        let e = r.expect_err("no start is a failure");
        assert_eq!(e, no_start_message(Duration::from_millis(300)));
        assert_eq!(
            e,
            "no start time within 0.3s of being ready (--start-timeout): the operator never sent POST /v1/start (is it running, and can it reach this pod?)"
        );
        let st = agent.status();
        assert_eq!(st.stage, AgentStage::Failed);
        assert_eq!(st.error.as_deref(), Some(e.as_str()));
        assert_eq!(st.start_at, None);
        fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    files(&p, out);
                } else {
                    out.push(p);
                }
            }
        }
        let mut left = Vec::new();
        files(dir.path(), &mut left);
        assert!(left.is_empty(), "the prepared dataset is removed: {left:?}");
    }
}
