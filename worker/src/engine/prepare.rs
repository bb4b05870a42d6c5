//! Before and after the measured stage: the space check, the dataset written (or listed) and
//! pre-stat'd, and the cleanup of what the run created.

use super::*;

impl Engine {
    /// The most this run can write: the dataset the prepare stage creates plus what `put`
    /// can create (bounded by `write.maxObjects` or `totalOps`). `None` when `put` is
    /// unbounded (a duration with no `write.maxObjects`).
    pub fn max_bytes_written(&self) -> Option<u64> {
        let w = &self.workload;
        let dataset = if w.dataset.prepare {
            w.dataset.objects.saturating_mul(self.dataset_sizes.max())
        } else {
            0
        };
        let puts = if w.weight_of(OpKind::Put) == 0 {
            0
        } else {
            let keys = match (put_keys_per_task(w), w.total_ops) {
                (Some(per_task), Some(n)) => (per_task * w.concurrency as u64).min(n),
                (Some(per_task), None) => per_task * w.concurrency as u64,
                (None, Some(n)) => n,
                (None, None) => return None,
            };
            keys.saturating_mul(self.object_sizes.max())
        };
        Some(dataset.saturating_add(puts))
    }

    /// Refuse, before anything is written, a run that cannot fit in the target's free space.
    pub fn check_space(&self) -> Result<(), EngineError> {
        let (Some(free), Some(need)) = (self.target.free_space(), self.max_bytes_written()) else {
            return Ok(());
        };
        if need > free {
            return Err(EngineError::Space(format!(
                "this run may write up to {} (dataset.objects x dataset size, plus what `put` writes, bounded by write.maxObjects or totalOps) but {} has only {} free; shrink the dataset or lower write.maxObjects",
                crate::units::ByteSize(need),
                self.workload.target,
                crate::units::ByteSize(free),
            )));
        }
        Ok(())
    }

    /// Create the dataset (or list the existing one), then pre-stat it if asked.
    pub async fn prepare(&self) -> Result<Dataset, EngineError> {
        self.metrics.set_stage(Stage::Preparing);
        if let Some(v) = self.volume.clone() {
            let layout = tokio::task::spawn_blocking(move || v.prepare())
                .await
                .map_err(|e| EngineError::Workload(format!("laying the volume out: {e}")))?
                .map_err(|e| EngineError::Workload(format!("laying the volume out: {e}")))?;
            return Ok(Dataset {
                prepare: Some(StageStats {
                    seconds: layout.seconds,
                    objects: (layout.regions - layout.reused) as u64,
                    bytes: layout.bytes,
                    ..Default::default()
                }),
                layout: Some(layout),
                ..Default::default()
            });
        }
        self.check_space()?;
        let w = &self.workload;
        let needs_dataset = w.weight_of(OpKind::Get) + w.weight_of(OpKind::Stat) > 0;
        let mut ds = Dataset::default();
        if w.dataset.prepare && w.dataset.objects > 0 {
            let started = Instant::now();
            let sizes: Vec<u64> = (0..w.dataset.objects)
                .map(|i| {
                    // Per-object seed: the same index always gets the same size, whoever writes it.
                    let mut rng =
                        SmallRng::seed_from_u64(w.seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    self.dataset_sizes.sample(&mut rng)
                })
                .collect();
            let keys: Vec<String> = (0..w.dataset.objects)
                .map(|i| self.dataset_key(i))
                .collect();
            let results = self
                .for_each_concurrent(
                    keys.clone().into_iter().zip(sizes.iter().copied()),
                    |t, (key, size)| {
                        let pattern = self.pattern.clone();
                        async move { t.put(&key, pattern.payload(&key, size)).await }
                    },
                )
                .await;
            let mut stats = StageStats {
                objects: keys.len() as u64,
                ..Default::default()
            };
            let mut first = None;
            for (i, r) in results.into_iter().enumerate() {
                match r {
                    Ok(req) => {
                        stats.requests += req as u64;
                        stats.bytes += sizes[i];
                    }
                    Err(e) => {
                        stats.errors += 1;
                        first.get_or_insert(e);
                    }
                }
            }
            stats.seconds = started.elapsed().as_secs_f64();
            if let Some(first) = first {
                return Err(EngineError::Prepare {
                    failed: stats.errors,
                    total: stats.objects,
                    first,
                });
            }
            ds.objects = keys
                .into_iter()
                .zip(sizes)
                .map(|(key, size)| ObjectInfo { key, size })
                .collect();
            ds.prepare = Some(stats);
        } else if needs_dataset {
            let listing = self.target.list(&w.dataset.prefix).await?;
            let put_prefix = self.put_prefix();
            ds.objects = listing
                .objects
                .into_iter()
                .filter(|o| !o.key.starts_with(&put_prefix))
                .collect();
            if ds.objects.is_empty() {
                return Err(EngineError::Dataset(format!(
                    "no objects under `{}` in {}; set dataset.prepare: true to create them",
                    w.dataset.prefix, w.target
                )));
            }
        }
        let re = &w.range_engine;
        if re.enabled && re.pre_stat && !ds.objects.is_empty() {
            let started = Instant::now();
            let keys: Vec<String> = ds.objects.iter().map(|o| o.key.clone()).collect();
            let results = self
                .for_each_concurrent(keys, |t, key| async move { t.stat(&key).await })
                .await;
            let mut stats = StageStats {
                objects: ds.objects.len() as u64,
                ..Default::default()
            };
            for (o, r) in ds.objects.iter_mut().zip(results) {
                stats.requests += 1;
                match r {
                    Ok(info) => o.size = info.size,
                    Err(_) => stats.errors += 1,
                }
            }
            stats.seconds = started.elapsed().as_secs_f64();
            ds.pre_stat = Some(stats);
        }
        self.metrics.set_stage(Stage::Ready);
        Ok(ds)
    }

    /// Run `f` over `items` with the workload's concurrency; results in input order.
    async fn for_each_concurrent<I, T, F, Fut>(&self, items: I, f: F) -> Vec<Result<T, TargetError>>
    where
        I: IntoIterator,
        F: Fn(Arc<dyn Target>, I::Item) -> Fut,
        Fut: Future<Output = Result<T, TargetError>>,
    {
        use futures::stream::StreamExt;
        futures::stream::iter(items.into_iter().map(|item| f(self.target.clone(), item)))
            .buffered(self.workload.concurrency as usize)
            .collect()
            .await
    }

    /// Delete what this run created: the dataset, if the prepare stage wrote it, and every
    /// object `put` wrote. An existing dataset used with `prepare: false` is never deleted.
    pub async fn cleanup(&self) -> Result<StageStats, EngineError> {
        self.metrics.set_stage(Stage::CleaningUp);
        let started = Instant::now();
        if let Some(v) = self.volume.clone() {
            let (removed, errors) = tokio::task::spawn_blocking(move || v.cleanup())
                .await
                .map_err(|e| EngineError::Workload(format!("removing the volume's files: {e}")))?;
            self.metrics.set_stage(Stage::Done);
            return Ok(StageStats {
                seconds: started.elapsed().as_secs_f64(),
                objects: removed,
                requests: removed + errors,
                errors,
                ..Default::default()
            });
        }
        let scope = if self.workload.dataset.prepare {
            self.workload.dataset.prefix.clone()
        } else {
            self.put_prefix()
        };
        let listing = self.target.list(&scope).await?;
        let mut stats = StageStats {
            objects: listing.objects.len() as u64,
            requests: listing.requests as u64,
            ..Default::default()
        };
        let keys = listing.objects.into_iter().map(|o| o.key);
        for r in self
            .for_each_concurrent(keys, |t, key| async move { t.delete(&key).await })
            .await
        {
            stats.requests += 1;
            match r {
                // Another worker sharing the prefix may have deleted it first.
                Ok(()) | Err(TargetError::NotFound { .. }) => {}
                Err(_) => stats.errors += 1,
            }
        }
        stats.seconds = started.elapsed().as_secs_f64();
        self.metrics.set_stage(Stage::Done);
        Ok(stats)
    }
}
