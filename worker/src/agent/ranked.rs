//! Training and checkpoint workloads in the agent: split over the run's ranks (this worker's
//! `--worker-index` of `--workers`), set up before the start instant and measured from it,
//! so every worker's epochs (or saves) begin together.
//!
//! - `training`: the prepare stage writes this worker's share of the dataset (or finds it),
//!   waits for the other workers' shares and opens the readers; the epochs run from the start
//!   instant. The dataset is shared by every worker (each epoch's order is split over all of
//!   them), so it stays under the workload's prefix and is not removed after the run: one
//!   worker finished early would delete the files the others still read; the next run reuses
//!   it (docs/TRAINING.md).
//! - `checkpoint`: nothing to prepare; save and restore of this worker's ranks run from the
//!   start instant, and its shards are removed per `dataset.cleanup` as standalone.

use std::time::{Duration, SystemTime};

use super::drive::{no_start_message, serve, wait_for_start, Waited};
use super::{Agent, AgentStage};
use crate::metrics::Stage;
use crate::{checkpoint, training, Engine, Workload};

/// Drive a training or checkpoint workload through the agent's stages.
pub(super) async fn drive(
    agent: &Agent,
    mut workload: Workload,
    linger: Duration,
) -> Result<(), String> {
    let worker_id = agent.lock().worker_id.clone();
    let (index, count) = agent.rank;
    if count == 0 || index >= count {
        return Err(format!(
            "worker index {index} of {count} workers (BENCHRUN_WORKER_INDEX, BENCHRUN_WORKERS): the index must be below the count"
        ));
    }
    if workload
        .training
        .as_ref()
        .is_some_and(|t| t.search.as_ref().is_some_and(|q| q.max_accelerators))
    {
        // Under the operator each probe is a child run of every worker, started at one
        // instant and judged merged (operator/src/search.rs); an agent is never sent the
        // search itself, which one worker alone cannot judge.
        return Err("training.search is not an agent's: the operator runs each probe as a run of every worker (a BenchmarkRun with training.search), or run it standalone with benchrun-worker run".into());
    }
    let is_checkpoint = workload.checkpoint.is_some();
    if is_checkpoint {
        // A saved shard is on the storage, not in the page cache: files are fsync'd.
        workload.write.fsync = true;
    }
    // The engine's prepare, which sets the exported stage (and `/readyz`) for object
    // workloads, is not run here: the stages are set as they are reached.
    agent.metrics.set_stage(Stage::Preparing);
    let engine = Engine::open(workload, agent.metrics.clone(), &worker_id)
        .await
        .map_err(|e| format!("opening the target: {e}"))?;
    let mut recording = None;
    let mut sink = None;
    if let Some(plan) = &agent.oplog {
        if is_checkpoint {
            return Err(
                "spec.oplog records object operations and training reads, not checkpoints".into(),
            );
        }
        let (r, s) = plan.start(&engine, &worker_id)?;
        recording = Some(r);
        sink = Some(s);
    }
    let prepared = if is_checkpoint {
        None
    } else {
        let opts = training::Options {
            worker_id: worker_id.clone(),
            index,
            count,
            oplog: sink,
            prepare_wait: training::PREPARE_WAIT,
            metrics: Some(agent.metrics.clone()),
        };
        tokio::select! {
            r = training::prepare(engine.workload(), engine.target().clone(), opts) => {
                Some(r.map_err(|e| format!("preparing the training dataset: {e}"))?)
            }
            _ = agent.wait_shutdown() => return Ok(()),
        }
    };
    agent.set_stage(AgentStage::Ready);
    agent.metrics.set_stage(Stage::Ready);
    let start_at = match wait_for_start(agent).await? {
        Waited::Start(at) => at,
        Waited::Stopped => return Ok(()),
        Waited::TimedOut => return Err(no_start_message(agent.start_timeout)),
    };
    agent.set_stage(AgentStage::Running);
    agent.metrics.set_stage(Stage::Running);
    // The measured part begins at the run's start instant on every worker.
    tokio::select! {
        _ = tokio::time::sleep(crate::engine::until(SystemTime::from(start_at))) => {}
        _ = agent.wait_shutdown() => return Ok(()),
    }
    let stop = {
        let agent = agent.clone();
        async move { agent.wait_shutdown().await }
    };
    let run = match prepared {
        Some(p) => p.run(stop).await,
        None => {
            let opts = checkpoint::Options {
                worker_id: worker_id.clone(),
                index,
                count,
                metrics: Some(agent.metrics.clone()),
                // Every worker got the same start instant: it names the run's markers.
                run_token: Some(start_at.to_rfc3339()),
            };
            checkpoint::run(engine.workload(), engine.target().clone(), opts, stop).await
        }
    };
    let mut summary = run.map_err(|e| format!("measured stage: {e}"))?;
    agent.lock().started_at = Some(summary.started_at);
    // Cut short by a signal: never served as the worker's whole run (see drive.rs).
    if agent.lock().signalled_in == Some(AgentStage::Running) {
        return Ok(());
    }
    if let Some(r) = recording {
        summary.oplog = Some(r.finish(engine.workload(), &worker_id).await);
    }
    agent.metrics.set_stage(Stage::Done);
    serve(agent, summary, linger).await;
    Ok(())
}
