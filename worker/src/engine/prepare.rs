//! Before and after the measured stage: the space check, the dataset written (or listed) and
//! pre-stat'd, and the cleanup of what the run created.

use super::objects::Objects;
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
            let writer = self.writer_seed();
            let layout = tokio::task::spawn_blocking(move || v.prepare(writer))
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
            let before = self.target.connections_opened();
            let (objects, mut stats) = self.write_dataset().await?;
            stats.connections_opened = self.connections_since(before);
            ds.objects = objects;
            ds.prepare = Some(stats);
        } else if needs_dataset {
            let listing = self.target.list(&w.dataset.prefix).await?;
            let put_prefix = self.put_prefix();
            let listed: Vec<ObjectInfo> = listing
                .objects
                .into_iter()
                .filter(|o| !o.key.starts_with(&put_prefix))
                .collect();
            if listed.is_empty() {
                return Err(EngineError::Dataset(format!(
                    "no objects under `{}` in {}; set dataset.prepare: true to create them",
                    w.dataset.prefix, w.target
                )));
            }
            ds.objects = self.sizes_as_written(listed).into();
        }
        let re = &w.range_engine;
        if re.enabled && re.pre_stat && !ds.objects.is_empty() {
            let before = self.target.connections_opened();
            let (objects, mut stats) = self.pre_stat(&ds.objects).await;
            stats.connections_opened = self.connections_since(before);
            ds.objects = objects;
            ds.pre_stat = Some(stats);
        }
        self.metrics.set_stage(Stage::Ready);
        Ok(ds)
    }

    /// Connections the target's clients opened since they had opened `before` (`None` for a
    /// target that does not count them).
    pub(super) fn connections_since(&self, before: Option<u64>) -> Option<u64> {
        Some(self.target.connections_opened()?.saturating_sub(before?))
    }

    /// The size dataset object `i` is written with: drawn from a seed of its own, so any
    /// worker or later run knows it.
    fn dataset_object_size(&self, i: u64) -> u64 {
        let mut rng =
            SmallRng::seed_from_u64(self.workload.seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        self.dataset_sizes.sample(&mut rng)
    }

    /// With `read.verify`, a listed dataset's objects with the sizes they were written with
    /// (an object named as the prepare stage names them, `<prefix>obj-<index>`, gets the
    /// size the seed gives it), so an object stored short since is counted `short`.
    fn sizes_as_written(&self, mut listed: Vec<ObjectInfo>) -> Vec<ObjectInfo> {
        if !self.workload.read.verify {
            return listed;
        }
        let prefix = format!("{}obj-", self.workload.dataset.prefix);
        for o in &mut listed {
            let index = o
                .key
                .strip_prefix(&prefix)
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(i) = index.filter(|i| *i < self.workload.dataset.objects) {
                o.size = self.dataset_object_size(i);
            }
        }
        listed
    }

    /// Write the dataset: object `i` gets its key from its index and its size from a seed of
    /// its own, so nothing per object is held but its size, and results are counted as they
    /// come (a vector of 100 million results was gigabytes).
    async fn write_dataset(&self) -> Result<(Objects, StageStats), EngineError> {
        let w = &self.workload;
        let started = Instant::now();
        // Per-object seed: the same index always gets the same size, whoever writes it.
        // Collected straight into the shared slice the run reads: a `Vec` turned into an
        // `Arc<[u64]>` afterwards is copied, and both copies were in the peak (13 bytes an
        // object at 10 million instead of 8).
        let sizes: Arc<[u64]> = (0..w.dataset.objects)
            .map(|i| self.dataset_object_size(i))
            .collect();
        let prefix = w.dataset.prefix.as_str();
        let mut stats = StageStats {
            objects: w.dataset.objects,
            ..Default::default()
        };
        let mut first = None;
        self.for_each_concurrent(
            sizes.iter().copied().enumerate(),
            |t, (i, size)| {
                let pattern = self.pattern.clone();
                async move {
                    let key = Objects::generated_key(prefix, i as u64);
                    (size, t.put(&key, pattern.payload(&key, size)).await)
                }
            },
            |(size, r)| match r {
                Ok(req) => {
                    stats.requests += req as u64;
                    stats.bytes += size;
                }
                Err(e) => {
                    stats.errors += 1;
                    first.get_or_insert(e);
                }
            },
        )
        .await;
        stats.seconds = started.elapsed().as_secs_f64();
        if let Some(first) = first {
            return Err(EngineError::Prepare {
                failed: stats.errors,
                total: stats.objects,
                first,
            });
        }
        let objects = Objects::Generated {
            prefix: prefix.into(),
            sizes,
        };
        Ok((objects, stats))
    }

    /// Stat every object of the dataset (`rangeEngine.preStat`), keys made one at a time;
    /// the objects come back with the sizes the target gave (a failed stat keeps the old).
    async fn pre_stat(&self, objects: &Objects) -> (Objects, StageStats) {
        let started = Instant::now();
        let mut sizes = objects.sizes();
        let mut stats = StageStats {
            objects: objects.len() as u64,
            ..Default::default()
        };
        self.for_each_concurrent(
            0..objects.len(),
            |t, i| {
                let key = objects
                    .get(i)
                    .map(|o| o.key.into_owned())
                    .unwrap_or_default();
                async move { (i, t.stat(&key).await) }
            },
            |(i, r)| {
                stats.requests += 1;
                match r {
                    Ok(info) => sizes[i] = info.size,
                    Err(_) => stats.errors += 1,
                }
            },
        )
        .await;
        stats.seconds = started.elapsed().as_secs_f64();
        (objects.with_sizes(sizes), stats)
    }

    /// Run `f` over `items` with the workload's concurrency, handing each result to `each`
    /// as it completes (in any order): memory is bounded by the concurrency, not the items.
    async fn for_each_concurrent<I, T, F, Fut>(&self, items: I, f: F, mut each: impl FnMut(T))
    where
        I: IntoIterator,
        F: Fn(Arc<dyn Target>, I::Item) -> Fut,
        Fut: Future<Output = T>,
    {
        use futures::stream::StreamExt;
        let mut results =
            futures::stream::iter(items.into_iter().map(|item| f(self.target.clone(), item)))
                .buffer_unordered(self.workload.concurrency as usize);
        while let Some(r) = results.next().await {
            each(r);
        }
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
        let before = self.target.connections_opened();
        let listing = self.target.list(&scope).await?;
        let mut stats = StageStats {
            objects: listing.objects.len() as u64,
            requests: listing.requests as u64,
            ..Default::default()
        };
        let keys = listing.objects.into_iter().map(|o| o.key);
        self.for_each_concurrent(
            keys,
            |t, key| async move { t.delete(&key).await },
            |r| {
                stats.requests += 1;
                match r {
                    // Another worker sharing the prefix may have deleted it first.
                    Ok(()) | Err(TargetError::NotFound { .. }) => {}
                    Err(_) => stats.errors += 1,
                }
            },
        )
        .await;
        stats.seconds = started.elapsed().as_secs_f64();
        stats.connections_opened = self.connections_since(before);
        self.metrics.set_stage(Stage::Done);
        Ok(stats)
    }
}
