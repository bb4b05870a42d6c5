//! The hand-off between workers when restores are shifted onto other workers
//! (`checkpoint.restoreShift`): a rank may only read another worker's shard once that worker
//! has saved it, and a worker may only overwrite (next repeat) or delete (cleanup) its shards
//! once every worker has restored them. Each worker leaves a small marker object beside the
//! shards when it has saved (restored) a repeat, and waits for every worker's marker before
//! the next step: a barrier through the storage itself, as the workers share nothing else.
//!
//! Marker names carry a token of the run (the agents' common start instant), so markers an
//! earlier run left behind never satisfy this one. A marker is deleted once no worker can
//! still be waiting for it: a worker's `saved` of repeat k once every worker has `restored`
//! k (each did so after seeing it), its `restored` of k once every worker has `saved` k + 1.
//! Nothing follows the last `restored`, so it is sent to each other worker as a marker of
//! its own, which that worker deletes when it has seen it: the run leaves nothing behind.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::EngineError;
use crate::targets::{Target, TargetError};

/// How long a worker waits for the others' markers: a slow worker's save of a large shard
/// takes minutes; a worker that never comes is the operator's to report.
pub const WAIT: Duration = Duration::from_secs(3600);
/// Between two looks at the missing markers.
const POLL: Duration = Duration::from_millis(20);

/// What a marker says a worker has done for a repeat.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    Saved,
    Restored,
}

impl Step {
    fn as_str(self) -> &'static str {
        match self {
            Step::Saved => "saved",
            Step::Restored => "restored",
        }
    }
}

/// This worker's markers, and the others' it waits for.
pub struct Handoff {
    target: Arc<dyn Target>,
    /// The shards' directory (ends in `/`).
    dir: String,
    token: String,
    index: u32,
    count: u32,
    /// The markers this worker wrote, deleted at the end.
    written: Vec<String>,
}

impl Handoff {
    /// Markers under `dir` for the run named by `token`, this worker `index` of `count`.
    pub fn new(target: Arc<dyn Target>, dir: &str, token: &str, index: u32, count: u32) -> Self {
        use crate::training::sampler::mix;
        let h = token
            .bytes()
            .fold(0u64, |h, b| mix(h ^ b as u64).wrapping_add(1));
        Handoff {
            target,
            dir: dir.to_string(),
            token: format!("{h:016x}"),
            index,
            count,
            written: vec![],
        }
    }

    fn key(&self, step: Step, repeat: u32, from: u32, to: Option<u32>) -> String {
        let to = to.map_or(String::new(), |t| format!("-for{t:05}"));
        format!(
            "{}{}-{}-r{repeat:04}-w{from:05}{to}",
            self.dir,
            self.token,
            step.as_str()
        )
    }

    async fn put(&self, key: &str) -> Result<(), EngineError> {
        let body = crate::targets::Payload::new(vec![bytes::Bytes::from_static(b"done\n")]);
        self.target.put(key, body).await.map_err(|e| {
            EngineError::Workload(format!("writing the hand-off marker {key}: {e}"))
        })?;
        Ok(())
    }

    fn others(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.count).filter(|w| *w != self.index)
    }

    /// Say to every worker that this one has done `step` of `repeat`.
    pub async fn mark(&mut self, step: Step, repeat: u32) -> Result<(), EngineError> {
        let key = self.key(step, repeat, self.index, None);
        self.put(&key).await?;
        self.written.push(key);
        Ok(())
    }

    /// [`mark`](Self::mark), as one marker for each other worker, which deletes it when seen:
    /// for the last step, after which no one would say it is safe to delete.
    pub async fn mark_each(&mut self, step: Step, repeat: u32) -> Result<(), EngineError> {
        for w in self.others().collect::<Vec<_>>() {
            self.put(&self.key(step, repeat, self.index, Some(w)))
                .await?;
        }
        Ok(())
    }

    /// Delete this worker's marker of `step` of `repeat`: no worker waits for it any more.
    pub async fn forget(&mut self, step: Step, repeat: u32) {
        let key = self.key(step, repeat, self.index, None);
        if let Some(i) = self.written.iter().position(|k| *k == key) {
            self.written.remove(i);
            let _ = self.target.delete(&key).await;
        }
    }

    /// Wait until every worker has done `step` of `repeat` (markers sent to this worker with
    /// [`mark_each`](Self::mark_each) when `addressed`, deleted as they are seen); `Ok(false)`
    /// when `stopped` first.
    pub async fn wait_all(
        &self,
        step: Step,
        repeat: u32,
        addressed: bool,
        stopped: &AtomicBool,
    ) -> Result<bool, EngineError> {
        let to = addressed.then_some(self.index);
        let mut missing: BTreeSet<u32> = self.others().collect();
        let began = Instant::now();
        while !missing.is_empty() {
            if stopped.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let mut found = vec![];
            for w in &missing {
                let key = self.key(step, repeat, *w, to);
                match self.target.stat(&key).await {
                    Ok(_) => found.push((*w, key)),
                    Err(TargetError::NotFound { .. }) => {}
                    Err(e) => {
                        return Err(EngineError::Workload(format!(
                            "looking for the hand-off marker {key}: {e}"
                        )))
                    }
                }
            }
            for (w, key) in found {
                missing.remove(&w);
                if addressed {
                    let _ = self.target.delete(&key).await;
                }
            }
            if missing.is_empty() {
                break;
            }
            if began.elapsed() > WAIT {
                return Err(EngineError::Workload(format!(
                    "restoreShift: workers {missing:?} did not report repeat {repeat} {} within {}s",
                    step.as_str(),
                    WAIT.as_secs()
                )));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(true)
    }

    /// Delete the markers this worker still has (a run stopped half-way).
    pub async fn clear(&mut self) {
        for key in self.written.drain(..) {
            let _ = self.target.delete(&key).await;
        }
    }
}
