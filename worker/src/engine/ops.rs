//! One operation of the mix issued against the target: get, put, stat, list or delete.

use super::*;

/// The key and size an op was about, kept for the op-log (only when the run records one, so
/// a run without an op-log copies no key).
#[derive(Debug, Default)]
pub(super) struct Subject {
    pub key: String,
    pub size: u64,
}

/// Note `key` and `size` in `subject`, if there is one.
fn note(subject: &mut Option<&mut Subject>, key: &str, size: u64) {
    if let Some(s) = subject {
        s.key.clear();
        s.key.push_str(key);
        s.size = size;
    }
}

impl RunCtx {
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_op(
        &self,
        op: OpKind,
        task: u32,
        seq: &mut u64,
        delete_key: Option<String>,
        rng: &mut SmallRng,
        t: &Arc<dyn Target>,
        mut subject: Option<&mut Subject>,
    ) -> Result<Done, TargetError> {
        let pick = |rng: &mut SmallRng, subject: &mut Option<&mut Subject>| {
            let i = self.keys.pick(rng);
            let obj = self
                .dataset
                .get(i as usize)
                .ok_or_else(|| TargetError::Other("the dataset is empty".into()))?;
            note(subject, &obj.key, obj.size);
            Ok::<_, TargetError>(obj)
        };
        match op {
            // Validation keeps block ops out of object workloads; they run in `block`.
            OpKind::Read | OpKind::Write => Err(TargetError::Unsupported(format!(
                "`{op}` is block I/O: give the workload a `block` section"
            ))),
            OpKind::Get => {
                let obj = pick(rng, &mut subject)?;
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
                if out.bytes < obj.size {
                    // Silently stored short (mlcommons/storage#593): an error of its own.
                    return Err(TargetError::Short {
                        key: obj.key.to_string(),
                        got: out.bytes,
                        want: obj.size,
                    });
                }
                let heads = u32::from(head.is_some());
                Ok(Done {
                    bytes: out.bytes,
                    requests: out.requests + heads,
                    ttfb: Some(head.unwrap_or_default() + out.ttfb),
                    heads,
                    buffers: out.buffers,
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
                note(&mut subject, &key, size);
                let requests = t
                    .put(&key, self.pattern.payload_by(self.writer_seed, &key, size))
                    .await?;
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
                    buffers: 0,
                })
            }
            OpKind::Stat => {
                t.stat(&pick(rng, &mut subject)?.key).await?;
                Ok(Done {
                    bytes: 0,
                    requests: 1,
                    ttfb: None,
                    heads: 0,
                    buffers: 0,
                })
            }
            OpKind::List => {
                let prefix = &self.engine_workload.dataset.prefix;
                note(&mut subject, prefix, 0);
                let l = t.list(prefix).await?;
                Ok(Done {
                    bytes: 0,
                    requests: l.requests,
                    ttfb: None,
                    heads: 0,
                    buffers: 0,
                })
            }
            OpKind::Delete => {
                let key =
                    delete_key.ok_or_else(|| TargetError::Other("delete without a key".into()))?;
                note(&mut subject, &key, 0);
                t.delete(&key).await?;
                Ok(Done {
                    bytes: 0,
                    requests: 1,
                    ttfb: None,
                    heads: 0,
                    buffers: 0,
                })
            }
        }
    }
}
