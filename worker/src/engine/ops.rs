//! One operation of the mix issued against the target: get, put, stat, list or delete.

use super::*;

impl RunCtx {
    pub(super) async fn run_op(
        &self,
        op: OpKind,
        task: u32,
        seq: &mut u64,
        delete_key: Option<String>,
        rng: &mut SmallRng,
        t: &Arc<dyn Target>,
    ) -> Result<Done, TargetError> {
        let pick = |rng: &mut SmallRng| {
            let i = self.keys.pick(rng);
            self.dataset
                .get(i as usize)
                .ok_or_else(|| TargetError::Other("the dataset is empty".into()))
        };
        match op {
            // Validation keeps block ops out of object workloads; they run in `block`.
            OpKind::Read | OpKind::Write => Err(TargetError::Unsupported(format!(
                "`{op}` is block I/O: give the workload a `block` section"
            ))),
            OpKind::Get => {
                let obj = pick(rng)?;
                let mut req = self.get.clone();
                req.size_hint = Some(obj.size);
                // The experiment `read.headBeforeGet`: report 001's regression, a HEAD before
                // every GET, inside the GET's latency and its time to first byte.
                let head = if self.engine_workload.read.head_before_get {
                    let at = Instant::now();
                    t.stat(&obj.key).await?;
                    Some(at.elapsed())
                } else {
                    None
                };
                let out = t.get(&obj.key, &req).await?;
                let heads = u32::from(head.is_some());
                Ok(Done {
                    bytes: out.bytes,
                    requests: out.requests + heads,
                    ttfb: Some(head.unwrap_or_default() + out.ttfb),
                    heads,
                })
            }
            OpKind::Put => {
                *seq += 1;
                let n = match self.put_keys_per_task {
                    Some(keys) => *seq % keys,
                    None => *seq,
                };
                let key = format!("{}{task}-{n}", self.put_prefix);
                let size = self.object_sizes.sample(rng);
                let requests = t.put(&key, self.pattern.payload(&key, size)).await?;
                if self.track_written {
                    let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
                    // Bounded: when puts outrun deletes, the oldest keys leave the queue (the
                    // objects stay; cleanup lists and removes them).
                    if written.len() >= MAX_TRACKED_WRITES {
                        written.pop_front();
                    }
                    written.push_back(key);
                }
                Ok(Done {
                    bytes: size,
                    requests,
                    ttfb: None,
                    heads: 0,
                })
            }
            OpKind::Stat => {
                t.stat(&pick(rng)?.key).await?;
                Ok(Done {
                    bytes: 0,
                    requests: 1,
                    ttfb: None,
                    heads: 0,
                })
            }
            OpKind::List => {
                let l = t.list(&self.engine_workload.dataset.prefix).await?;
                Ok(Done {
                    bytes: 0,
                    requests: l.requests,
                    ttfb: None,
                    heads: 0,
                })
            }
            OpKind::Delete => {
                let key =
                    delete_key.ok_or_else(|| TargetError::Other("delete without a key".into()))?;
                t.delete(&key).await?;
                Ok(Done {
                    bytes: 0,
                    requests: 1,
                    ttfb: None,
                    heads: 0,
                })
            }
        }
    }
}
