//! The measured stage: tasks started on the schedule, each looping over tickets, and their
//! recorders folded into the summary.
//!
//! [`Engine::run`] is four steps, each its own function: [`Engine::setup`] (everything built
//! before the start instant), [`wait_for_start`] (the synchronized start, or a stop before
//! it), [`Engine::measure`] (the tasks let go and joined) and [`Engine::summarize`] (the
//! summary assembled from what they recorded).

use super::*;

/// A block workload's volume, the I/O engine picked for it and how much of its dataset was in
/// the page cache before the start.
type BlockSetup = (Arc<Volume>, block::Chosen, Option<u64>);

/// Everything built before the start instant: kept apart from the measured stage so that none
/// of its cost (threads started, clients built, the page cache measured) is timed.
struct Setup {
    /// Block workloads: their volume, engine and page-cache residency at the start.
    block: Option<BlockSetup>,
    schedule: Arc<Schedule>,
    ctx: Arc<RunCtx>,
    /// The tasks, started and parked at `gate`.
    tasks: tokio::task::JoinSet<Vec<Recorder>>,
    gate: threads::Gate,
    /// How long the setup took (the summary's `setup`).
    stats: StageStats,
    /// Connections the target's clients had opened when the setup began.
    connections_before: Option<u64>,
    /// Held for the whole run: tasks on threads of their own are not cancelled with the
    /// JoinSet, so if the run's future is dropped, the stopped schedule ends them at their
    /// next ticket.
    _stop_on_drop: StopOnDrop,
}

/// What the measured stage left: the tasks' recorders merged, and its instants and CPU
/// samples for the summary.
struct Measured {
    all: Recorder,
    /// When the tasks were let go (the warm-up's start, if there is one).
    start: Instant,
    /// When the last task ended.
    end: Instant,
    /// The process's usage at `start`.
    cpu0: ProcessStats,
    /// Connections the target's clients had opened at `start`.
    connections_at_start: Option<u64>,
    /// With a warm-up: the sampler of the process's usage (and of the connections opened)
    /// when the measured stage begins.
    cpu_at_measured: Option<tokio::task::JoinHandle<(ProcessStats, Option<u64>)>>,
    /// A block workload with a warm-up: the page cache's residency when the measured stage
    /// begins (the warm-up's reads fill it; what was resident before is the setup's).
    resident_at_measured: Option<tokio::task::JoinHandle<Option<u64>>>,
    /// Wall-clock start of the measured stage (after the warm-up).
    started_at: chrono::DateTime<Utc>,
}

impl Engine {
    /// Run the measured stage, starting at `start_at` (wall clock) or now, until the duration
    /// or op count is reached, the error budget is spent, or `shutdown` completes.
    pub async fn run(
        &self,
        dataset: &Dataset,
        start_at: Option<SystemTime>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Summary, EngineError> {
        let mut setup = self.setup(dataset).await?;
        let watcher = wait_for_start(&setup, start_at, Box::pin(shutdown)).await;
        let measured = self.measure(&mut setup).await;
        watcher.abort();
        let measured = measured.inspect_err(|_| self.metrics.set_stage(Stage::Done))?;
        Ok(self.summarize(dataset, setup, measured).await)
    }

    /// Build everything the measured stage needs before its start instant: the block
    /// engine picked and the page cache measured, the schedule, what the tasks share, and
    /// the tasks themselves, parked at the gate. Done inside the stage, it biased ops/s low
    /// and tails high (at concurrency 4,096, a 3 s run measured 4.26 s).
    async fn setup(&self, dataset: &Dataset) -> Result<Setup, EngineError> {
        let w = &self.workload;
        let block = match &self.volume {
            Some(v) => {
                let chosen = block::choose(v.spec.engine, v.spec.queue_depth)?;
                let vol = v.clone();
                let resident = tokio::task::spawn_blocking(move || vol.resident())
                    .await
                    .ok()
                    .flatten();
                Some((v.clone(), chosen, resident))
            }
            None => None,
        };
        let setup_started = Instant::now();
        let connections_before = self.target.connections_opened();
        let schedule = Arc::new(
            Schedule::new(w.duration.map(|d| d.0), w.total_ops, w.rate_limit)
                .with_warmup(w.warmup.map(|d| d.0)),
        );
        let ctx = Arc::new(self.run_ctx(dataset, schedule.clone())?);
        let stop_on_drop = StopOnDrop(schedule.clone());
        let mut tasks = tokio::task::JoinSet::new();
        let gate = threads::Gate::default();
        let mut primed = Vec::new();
        let started = match &block {
            Some((v, chosen, _)) => self.start_block_tasks(v, chosen, &ctx, &gate, &mut tasks),
            None => self.start_tasks(&ctx, &gate, &mut tasks, &mut primed),
        };
        if let Err(e) = started {
            // Stop the tasks already started (at their next ticket) and wait for them.
            ctx.stop("a task's thread could not be started");
            schedule.begin(Instant::now());
            gate.open();
            while tasks.join_next().await.is_some() {}
            self.metrics.set_stage(Stage::Done);
            return Err(e);
        }
        // Each shard's connections are open before the start (see `shards::spawn`); a shard
        // whose thread ended early has dropped its sender, and its tasks' error is seen later.
        for p in primed {
            let _ = p.await;
        }
        Ok(Setup {
            block,
            schedule,
            ctx,
            tasks,
            gate,
            stats: StageStats {
                seconds: setup_started.elapsed().as_secs_f64(),
                ..Default::default()
            },
            connections_before,
            _stop_on_drop: stop_on_drop,
        })
    }

    /// What the tasks of one measured stage share, built once: the op mix, the read plan,
    /// the key picker, the schedule they take tickets from.
    fn run_ctx(&self, dataset: &Dataset, schedule: Arc<Schedule>) -> Result<RunCtx, EngineError> {
        let w = &self.workload;
        Ok(RunCtx {
            engine_workload: self.workload.clone(),
            metrics: self.metrics.clone(),
            pattern: self.pattern.clone(),
            object_sizes: self.object_sizes.clone(),
            dataset: dataset.objects.clone(), // an Arc
            mix: OpMix::new(&w.ops, |_| false)
                .ok_or_else(|| EngineError::Workload("no operation has a weight above 0".into()))?,
            mix_without_delete: OpMix::new(&w.ops, |op| op == OpKind::Delete),
            written: Mutex::new(VecDeque::new()),
            track_written: w.weight_of(OpKind::Delete) > 0,
            get: GetRequest {
                plan: targets::read_plan(w, self.target.as_ref()),
                check: if w.read.verify {
                    ReadCheck::Verify(self.pattern.clone())
                } else {
                    ReadCheck::Discard
                },
                size_hint: None,
            },
            put_prefix: format!("{}{}/", self.put_prefix(), self.worker_id),
            put_keys_per_task: put_keys_per_task(w),
            schedule,
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            // The popularity order is the dataset's (the same hot objects for every
            // worker); a sequential pass starts at this worker's share, so workers reading
            // one shared dataset (`prepare: false`) do not read the same keys in lockstep.
            keys: keys::KeyPicker::new(
                w.dataset.object_access(),
                dataset.objects.len() as u64,
                w.seed,
            )
            .starting_at(self.writer.first_of(dataset.objects.len() as u64)),
            writer_seed: self.writer_seed(),
            stop_reason: Mutex::new(None),
            stable: Mutex::new(None),
            oplog: self.oplog.clone(),
        })
    }

    /// The measured stage (and its warm-up): the tasks let go at once, the process's usage
    /// sampled where the stages meet, `stopWhenStable` watched, and every task joined. A
    /// task that panicked stops all others and fails the run instead of leaving a result
    /// that silently lacks its share.
    async fn measure(&self, setup: &mut Setup) -> Result<Measured, EngineError> {
        let (schedule, ctx) = (&setup.schedule, &setup.ctx);
        self.metrics.set_stage(Stage::Running);
        let cpu0 = ProcessStats::now();
        let warmup = schedule.warmup();
        // The measured stage's wall-clock start: after the warm-up, if any.
        let started_at = Utc::now() + chrono::Duration::from_std(warmup).unwrap_or_default();
        // The setup's connections are those opened until the start instant (the wait for
        // it included: a connection the server closed meanwhile is reopened in the stage).
        let connections_at_start = self.target.connections_opened();
        setup.stats.connections_opened = connections_at_start
            .zip(setup.connections_before)
            .map(|(now, before)| now.saturating_sub(before));
        let start = Instant::now();
        schedule.begin(start);
        setup.gate.open();
        let measured_start = schedule.measured_start();
        // The process's usage when the measured stage begins, so the warm-up's CPU is its own.
        let target = self.target.clone();
        let cpu_at_measured = (!warmup.is_zero()).then(|| {
            tokio::spawn(async move {
                tokio::time::sleep_until(measured_start).await;
                (ProcessStats::now(), target.connections_opened())
            })
        });
        let resident_at_measured = match (&setup.block, warmup.is_zero()) {
            (Some((v, _, _)), false) => {
                let vol = v.clone();
                Some(tokio::spawn(async move {
                    tokio::time::sleep_until(measured_start).await;
                    tokio::task::spawn_blocking(move || vol.resident())
                        .await
                        .ok()
                        .flatten()
                }))
            }
            _ => None,
        };
        let run_stability = self.run_stability.clone();
        let _stable = self.workload.stop_when_stable.clone().map(|spec| {
            let (count, stop) = (ctx.clone(), ctx.clone());
            let local = run_stability.as_ref().is_none_or(|r| r.local);
            let seconds = run_stability.as_ref().map(|r| r.seconds.clone());
            stable::AbortOnDrop(tokio::spawn(stable::watch(
                spec,
                measured_start,
                Arc::new(move || count.done.load(Ordering::Relaxed)),
                seconds,
                local.then_some(move |figures: benchrun_api::stable::StableFigures| {
                    *stop.stable.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(benchrun_api::stable::StableDecision {
                            decided_by: benchrun_api::stable::BY_WORKER.into(),
                            workers: 1,
                            steady_at: Utc::now(),
                            figures: figures.clone(),
                        });
                    stop.stop(&figures.reason());
                }),
            )))
        });
        // The run's stop instant, whenever the operator sends it.
        let _cut = run_stability.map(|r| {
            let ctx = ctx.clone();
            stable::AbortOnDrop(tokio::spawn(stable::cut_when_told(
                r.stop_at,
                measured_start,
                move |at, decision| {
                    if ctx.schedule.cut_at(at) {
                        *ctx.stable.lock().unwrap_or_else(|e| e.into_inner()) = Some(decision);
                    }
                },
            )))
        });
        let mut all = Recorder::new(self.metrics.clone(), Recorder::mix_ops(&self.workload));
        while let Some(joined) = setup.tasks.join_next().await {
            match joined {
                Ok(recs) => recs.into_iter().for_each(|r| all.absorb(r)),
                Err(e) => {
                    // One task panicked (or was cancelled): stop every other one now, so none
                    // keeps hitting the target, and report the failure instead of a result.
                    ctx.stop("a task failed");
                    setup.tasks.abort_all();
                    while setup.tasks.join_next().await.is_some() {}
                    return Err(task_failed(e));
                }
            }
        }
        Ok(Measured {
            all,
            start,
            end: Instant::now(),
            cpu0,
            connections_at_start,
            cpu_at_measured,
            resident_at_measured,
            started_at,
        })
    }

    /// The run's summary, from the tasks' merged recorders: the measured stage's ops and
    /// timeline, the warm-up's apart, open-loop figures, CPU per stage, a block volume's
    /// figures, and why the stage ended.
    async fn summarize(&self, dataset: &Dataset, setup: Setup, m: Measured) -> Summary {
        let w = &self.workload;
        let Measured {
            mut all,
            start,
            end,
            cpu0,
            connections_at_start,
            cpu_at_measured,
            resident_at_measured,
            started_at,
        } = m;
        let schedule = &setup.schedule;
        let measured_start = schedule.measured_start();
        // The measured stage's length: zero if the run was stopped in its warm-up.
        let end = stage_end(
            end,
            all.last_finished.map(|f| start + f),
            schedule.deadline(),
        );
        let elapsed = end.saturating_duration_since(measured_start);
        let open_loop = schedule.due_before(end).map(|due| OpenLoop {
            due,
            ..all.open_loop.clone()
        });
        let cpu_end = ProcessStats::now();
        let connections_end = self.target.connections_opened();
        let warm = match cpu_at_measured {
            Some(sampler) => Some(
                warmup_figures(
                    &mut all,
                    sampler,
                    (&cpu0, connections_at_start),
                    (&cpu_end, connections_end),
                    start,
                    end,
                    measured_start,
                )
                .await,
            ),
            None => None,
        };
        let process = cpu_end.since(warm.as_ref().map_or(&cpu0, |(_, (mid, _))| mid));
        let connections_at_measured = match &warm {
            Some((_, (_, c))) => *c,
            None => connections_at_start,
        };
        let volume = match setup.block {
            Some((v, chosen, resident_before)) => {
                let vol = v.clone();
                let resident_at_end = tokio::task::spawn_blocking(move || vol.resident())
                    .await
                    .ok()
                    .flatten();
                // With a warm-up, "at the start" is when the measured stage began, and what
                // was resident before the warm-up is kept apart. Stopped in its warm-up, the
                // sampler never ran: the measured stage's start is its end.
                let (resident_at_start, resident_before_warmup) = match resident_at_measured {
                    // Reached the measured stage: the sampler is measuring, or has.
                    Some(h) if end >= measured_start => (h.await.ok().flatten(), resident_before),
                    Some(h) => {
                        h.abort();
                        (resident_at_end, resident_before)
                    }
                    None => (resident_before, None),
                };
                Some(volume_stats(
                    &v,
                    &chosen,
                    dataset,
                    (resident_at_start, resident_before_warmup),
                    resident_at_end,
                ))
            }
            None => None,
        };
        self.metrics.set_stage(Stage::Done);
        let explicit = setup
            .ctx
            .stop_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let stable = setup
            .ctx
            .stable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // The run's stop counts when it ended the stage (not its duration, op count or
        // anything else first); this worker's own decision when it stopped the stage.
        let reached_cut = schedule.ended_by_cut();
        let (stopped_by, stable) = match (explicit, stable) {
            (Some(r), Some(d)) if r.starts_with("stable") => (Some(r), Some(d)),
            (Some(r), _) => (Some(r), None),
            (None, Some(d)) if reached_cut => (Some(d.figures.reason()), Some(d)),
            (None, _) => (None, None),
        };
        let stopped_by = stopped_by.unwrap_or_else(|| {
            if w.total_ops.is_some() {
                "totalOps"
            } else {
                "duration"
            }
            .to_string()
        });
        // Stopped from outside (signal, shutdown request) before the duration or op count.
        let partial = stopped_by == INTERRUPTED;
        let sizes = all.sizes_by_op();
        let mut s = Summary {
            schema_version: SUMMARY_VERSION,
            tool_version: Some(TOOL_VERSION.to_string()),
            // As run: every default filled in (serde filled them when the file was read).
            workload: Some((**w).clone()),
            target: w.target.clone(),
            workers: 1,
            worker_ids: vec![self.worker_id.clone()],
            started_at,
            elapsed_seconds: elapsed.as_secs_f64(),
            stopped_at: Some(started_at + chrono::Duration::from_std(elapsed).unwrap_or_default()),
            stopped_by,
            stable,
            ops: OpKind::ALL
                .iter()
                .zip(all.ops)
                .filter_map(|(op, s)| s.map(|s| (*op, s)))
                .filter(|(op, s)| s.count > 0 || w.weight_of(*op) > 0)
                .collect(),
            report: Default::default(),
            // The warm-up's seconds (marked) first, then the measured stage's.
            timeline: all.warm_timeline.into_iter().chain(all.timeline).collect(),
            process,
            cpu_percent: None,
            prepare: dataset.prepare.clone(),
            pre_stat: dataset.pre_stat.clone(),
            setup: Some(setup.stats),
            warmup: warm.map(|(w, _)| w),
            access: [OpKind::Get, OpKind::Stat]
                .iter()
                .any(|&op| w.weight_of(op) > 0)
                .then(|| w.dataset.object_access().to_string()),
            cleanup: None,
            partial,
            open_loop,
            in_flight_at_deadline: (all.in_flight.ops > 0).then(|| all.in_flight.clone()),
            connections_opened: connections_end
                .zip(connections_at_measured)
                .map(|(end, at)| end.saturating_sub(at)),
            volume,
            // Every endpoint listed, one that no op reached too (fewer ops than endpoints).
            endpoints: {
                let urls = self.target.endpoints();
                let mut per = all.endpoints;
                per.resize_with(urls.len(), Default::default);
                urls.iter().map(|e| e.url.clone()).zip(per).collect()
            },
            tls_verification_skipped: w.skips_tls_verification(),
            oplog: None,
            sizes,
            training: None,
            checkpoint: None,
        };
        for (op, kind, l) in std::mem::take(&mut all.failed).into_histograms() {
            s.ops.entry(op).or_default().failed_latency.insert(kind, l);
        }
        s.refresh();
        s
    }

    /// Start the run's tasks, held at `gate`, each as a future of its recorders in `tasks`.
    ///
    /// Blocking targets (local files): every task on a thread of its own (see `threads`).
    /// Others: the tasks spread over a few single-threaded runtimes (see `shards`).
    fn start_tasks(
        &self,
        ctx: &Arc<RunCtx>,
        gate: &threads::Gate,
        tasks: &mut tokio::task::JoinSet<Vec<Recorder>>,
        primed: &mut Vec<shards::Primed>,
    ) -> Result<(), EngineError> {
        let w = &self.workload;
        // Keyed by the writer: the workers of a run pick different keys, sizes and ops.
        let seed = self.writer_seed();
        let rng = |i: u32| {
            SmallRng::seed_from_u64(
                seed.wrapping_add(0x5851_F42D_4C95_7F2D_u64.wrapping_mul(i as u64 + 1)),
            )
        };
        if self.target.blocking_io() {
            for i in 0..w.concurrency {
                let task = threads::spawn(
                    format!("benchrun-io-{i}"),
                    tokio::runtime::Handle::current(),
                    gate.clone(),
                    ctx.clone().task(i, rng(i), self.target.clone()),
                )
                .map_err(|e| {
                    EngineError::Workload(format!(
                        "cannot start the thread of task {i} of {}: {e}; on {} each task runs on a thread of its own: lower concurrency or raise the process's thread limit",
                        w.concurrency, w.target
                    ))
                })?;
                tasks.spawn(async move { vec![task.await] });
            }
            return Ok(());
        }
        let env = std::env::var(shards::ENV).ok();
        let n = shards::count(w.concurrency, env.as_deref()).map_err(EngineError::Workload)?;
        let targets = shards::targets(&self.target, n)?;
        let mut groups: Vec<Vec<_>> = (0..n).map(|_| Vec::new()).collect();
        for i in 0..w.concurrency {
            let k = i as usize % n;
            groups[k].push(ctx.clone().task(i, rng(i), targets[k].clone()));
        }
        for (k, group) in groups.into_iter().enumerate() {
            let name = format!("benchrun-shard-{k}");
            let (ready, shard) = shards::spawn(name, gate.clone(), targets[k].clone(), group)
                .map_err(|e| {
                    EngineError::Workload(format!(
                        "cannot start I/O thread {k} of {n} (set {} lower): {e}",
                        shards::ENV
                    ))
                })?;
            primed.push(ready);
            tasks.spawn(shard);
        }
        Ok(())
    }
}

/// Wait for the synchronized start (the operator's may be far off), then watch `shutdown`
/// for the rest of the run. A stop while waiting ends the run at once, with an empty partial
/// summary: the stage is stopped before its tasks are let go. Returns the watcher, to abort
/// once the stage is over.
async fn wait_for_start(
    setup: &Setup,
    start_at: Option<SystemTime>,
    mut shutdown: std::pin::Pin<Box<impl Future<Output = ()> + Send + 'static>>,
) -> tokio::task::JoinHandle<()> {
    let mut stopped_before_start = false;
    if let Some(at) = start_at {
        if let Ok(wait) = at.duration_since(SystemTime::now()) {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = &mut shutdown => stopped_before_start = true,
            }
        }
    }
    let (schedule, ctx) = (setup.schedule.clone(), setup.ctx.clone());
    if stopped_before_start {
        // `shutdown` has completed: it must not be polled again.
        ctx.stop(INTERRUPTED);
        tokio::spawn(async {})
    } else {
        tokio::spawn(async move {
            shutdown.await;
            ctx.stop(INTERRUPTED);
            schedule.stop();
        })
    }
}

/// The warm-up's figures, taken out of `all`, and the process's usage when the measured
/// stage began, with the connections opened by then (from `sampler`; if the run was
/// stopped in its warm-up, the sampler has not run and all of it was warm-up, so the figures
/// at the end). `at_start` and `at_end`: the usage and connections at those instants.
async fn warmup_figures(
    all: &mut Recorder,
    sampler: tokio::task::JoinHandle<(ProcessStats, Option<u64>)>,
    (cpu0, connections0): (&ProcessStats, Option<u64>),
    (cpu_end, connections_end): (&ProcessStats, Option<u64>),
    start: Instant,
    end: Instant,
    measured_start: Instant,
) -> (Warmup, (ProcessStats, Option<u64>)) {
    let at_end = || (cpu_end.clone(), connections_end);
    let (cpu_mid, connections_mid) = if sampler.is_finished() {
        sampler.await.unwrap_or_else(|_| at_end())
    } else {
        sampler.abort();
        at_end()
    };
    let ops = OpKind::ALL
        .iter()
        .zip(std::mem::take(&mut all.warm_ops))
        .filter_map(|(op, s)| s.map(|s| (*op, s)))
        .collect();
    (
        Warmup {
            seconds: end.min(measured_start).duration_since(start).as_secs_f64(),
            ops,
            report: Default::default(),
            process: cpu_mid.since(cpu0),
            connections_opened: connections_mid
                .zip(connections0)
                .map(|(mid, at)| mid.saturating_sub(at)),
        },
        (cpu_mid, connections_mid),
    )
}

/// The run's error for a task that panicked or was cancelled, with the panic's message.
fn task_failed(e: tokio::task::JoinError) -> EngineError {
    let what = if e.is_panic() {
        let p = e.into_panic();
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("panicked: {}", crate::spec::clip(&msg))
    } else {
        e.to_string()
    };
    EngineError::Workload(format!(
        "a worker task failed ({what}); all tasks were stopped"
    ))
}

/// The summary's volume figures of a block run.
fn volume_stats(
    v: &Volume,
    chosen: &block::Chosen,
    dataset: &Dataset,
    (resident_at_start, resident_before_warmup): (Option<u64>, Option<u64>),
    resident_at_end: Option<u64>,
) -> crate::stats::VolumeStats {
    let layout = dataset.layout.clone().unwrap_or_default();
    let cache = match (resident_at_start, resident_at_end) {
        (Some(s), Some(e)) => Some(crate::stats::CacheResidency {
            bytes: v.dataset_bytes(),
            resident_at_start: s,
            resident_at_end: e,
            resident_before_warmup,
            dropped: layout.dropped as u32,
        }),
        _ => None,
    };
    crate::stats::VolumeStats {
        engines: std::collections::BTreeMap::from([(chosen.name().to_string(), 1)]),
        fallback_reason: match chosen {
            block::Chosen::Sync(reason) => reason.clone(),
            block::Chosen::Uring => None,
        },
        queue_depth: v.spec.queue_depth,
        direct: v.direct,
        dataset_bytes: v.dataset_bytes(),
        reused: (layout.regions > 0 && layout.reused == layout.regions) as u32,
        layout_seconds: layout.seconds,
        precondition_seconds: layout.precondition_seconds,
        targets: std::collections::BTreeMap::from([(
            v.identity(),
            crate::stats::TargetVolume {
                workers: 1,
                dataset_bytes: v.dataset_bytes(),
                cache: cache.clone(),
            },
        )]),
        cache,
    }
}

/// The target times a GET's first byte from when it was called (`issued`); the op's latency
/// runs from `began`, its intended start in open loop. Both are measured from `began`, so the
/// scheduling lag a late op waited is in its TTFB as it is in its latency (before, under a
/// rate limit, TTFB left it out and could read far below a latency that included it).
fn from_began(mut done: Done, began: Instant, issued: Instant) -> Done {
    if let Some(t) = done.ttfb.as_mut() {
        *t += issued.saturating_duration_since(began);
    }
    done
}

/// Stops a schedule when dropped.
struct StopOnDrop(Arc<Schedule>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl RunCtx {
    pub(super) fn stop(&self, reason: &str) {
        let mut r = self.stop_reason.lock().unwrap_or_else(|e| e.into_inner());
        r.get_or_insert_with(|| reason.to_string());
        self.schedule.stop();
    }

    async fn task(
        self: Arc<Self>,
        id: u32,
        mut rng: SmallRng,
        target: Arc<dyn Target>,
    ) -> Recorder {
        let mut rec = Recorder::for_workload(self.metrics.clone(), &self.engine_workload)
            .with_warmup(self.schedule.warmup());
        let open_loop = self.schedule.is_open_loop();
        let mut seq = 0u64;
        // Several endpoints: ticket i goes to endpoint i mod n (`storage.endpoints`).
        let endpoints = target.endpoints().to_vec();
        let mut subject = self.oplog.as_ref().map(|_| super::ops::Subject::default());
        while let Some(ticket) = self.schedule.next(Instant::now()) {
            // Woken by a stop (signal, error budget, a failed task): at 0.001 ops/s the next
            // ticket may be 1000 s away.
            if ticket.due > Instant::now() && self.schedule.sleep_until(ticket.due).await {
                break;
            }
            let began = if open_loop {
                ticket.due
            } else {
                Instant::now()
            };
            let mut op = self.mix.pick(&mut rng);
            let mut delete_key = None;
            if op == OpKind::Delete {
                delete_key = self
                    .written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pop_front();
                if delete_key.is_none() {
                    // Nothing written yet to delete: draw again from the rest of the mix.
                    match &self.mix_without_delete {
                        Some(m) => op = m.pick(&mut rng),
                        None => continue,
                    }
                }
            }
            // Kept apart from the op's latency (measured from `due`, lag included): how late
            // the op starts, from busy tasks or the timer's granularity. Counted here, where
            // an op surely runs (a delete with nothing to delete does not), and only in the
            // measured stage, whose offered load `due_before` counts.
            if open_loop && !self.schedule.in_warmup(ticket.due) {
                rec.started_late(ticket.due, Instant::now());
            }
            let (endpoint, t) = match endpoints.len() {
                0 => (None, &target),
                n => {
                    let i = (ticket.index % n as u64) as usize;
                    (Some(i), &endpoints[i].target)
                }
            };
            self.metrics.op_started();
            let issued = Instant::now();
            let outcome = self
                .run_op(op, id, &mut seq, delete_key, &mut rng, t, subject.as_mut())
                .await
                .map(|done| from_began(done, began, issued));
            let end = Instant::now();
            if let (Some(sink), Some(s)) = (&self.oplog, subject.as_mut()) {
                self.log_op(sink, op, s, began, end, &outcome);
            }
            self.finished(&mut rec, op, endpoint, began, end, outcome);
        }
        rec
    }

    /// Hand one finished op to the op-log: its intended start from the measured stage's
    /// start, and its phase by the recorder's rule (when it finished), so the log's measured
    /// records are exactly the summary's ops.
    fn log_op(
        &self,
        sink: &crate::oplog::Sink,
        op: OpKind,
        subject: &mut super::ops::Subject,
        began: Instant,
        end: Instant,
        outcome: &Result<Done, TargetError>,
    ) {
        use crate::oplog::{Phase, Record};
        let measured_start = self.schedule.measured_start();
        let offset_us = if began >= measured_start {
            i64::try_from(began.duration_since(measured_start).as_micros()).unwrap_or(i64::MAX)
        } else {
            -i64::try_from(measured_start.duration_since(began).as_micros()).unwrap_or(i64::MAX)
        };
        let phase = if self.schedule.in_warmup(end) {
            Phase::Warmup
        } else {
            Phase::Measured
        };
        let (bytes, error) = match outcome {
            Ok(d) => (d.bytes, None),
            Err(e) => (0, Some(e.kind())),
        };
        sink.record(Record {
            offset_us,
            phase,
            op,
            key: std::mem::take(&mut subject.key),
            size: std::mem::take(&mut subject.size),
            bytes,
            latency_us: end
                .saturating_duration_since(began)
                .as_micros()
                .try_into()
                .unwrap_or(u64::MAX),
            error,
        });
    }

    /// Record an op that ended at `end` (its latency from `began`), served by `endpoint`
    /// when there are several, and count it against the error budget.
    pub(super) fn finished(
        &self,
        rec: &mut Recorder,
        op: OpKind,
        endpoint: Option<usize>,
        began: Instant,
        end: Instant,
        outcome: Result<Done, TargetError>,
    ) {
        // Still running at the deadline: counted, and how long it had run by then kept.
        if let Some(deadline) = self.schedule.deadline().filter(|d| end > *d && began < *d) {
            rec.in_flight.add_op(deadline - began, end - began);
        }
        let failed = rec
            .record(OpResult {
                op,
                latency: end - began,
                finished_at: end - self.schedule.start(),
                outcome,
                endpoint,
            })
            .is_some();
        self.check_budget(failed);
    }

    pub(super) fn check_budget(&self, failed: bool) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let failed = if failed {
            self.failed.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.failed.load(Ordering::Relaxed)
        };
        let Some(b) = &self.engine_workload.error_budget else {
            return;
        };
        if let Some(max) = b.max_errors {
            if failed > max {
                // Named by the error that crossed the bound, not by this task's count: tasks
                // failing at once may reach here in any order, and the first to stop names it.
                self.stop(&format!(
                    "errorBudget: {} errors exceed maxErrors {max}",
                    max.saturating_add(1)
                ));
            }
        }
        if let Some(ratio) = b.max_error_ratio {
            if done >= 100 && failed as f64 / done as f64 > ratio {
                self.stop(&format!(
                    "errorBudget: {failed} of {done} operations failed, above maxErrorRatio {ratio}"
                ));
            }
        }
    }
}

/// Where the measured stage ends, given when its tasks were all joined (`joined`), when its
/// last op finished and its deadline. Joining a thousand tasks and merging their histograms
/// takes time that is no part of the stage (on a loaded machine, seconds), so the stage ends
/// with its last op; but a stage that ran to its deadline ends there exactly: an op stuck on
/// a 30 s timeout must not stretch a 60 s window to 90 s (every rate would read a third low),
/// and an open loop may have nothing in flight then. The ops in flight at the deadline are
/// counted apart (`inFlightAtDeadline`). With no op at all, the join is all there is.
fn stage_end(joined: Instant, last_op: Option<Instant>, deadline: Option<Instant>) -> Instant {
    match (last_op, deadline) {
        (None, _) => joined,
        (Some(_), Some(deadline)) if joined >= deadline => deadline,
        (Some(last), _) => last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_ends_with_its_last_op_or_its_deadline_never_with_the_join() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // Ran its duration: its deadline ends it; ops in flight then (even one stuck for
        // 30 s) and joining later do not.
        assert_eq!(
            stage_end(at(3500), Some(at(2040)), Some(at(2000))),
            at(2000)
        );
        assert_eq!(
            stage_end(at(32_000), Some(at(32_000)), Some(at(2000))),
            at(2000)
        );
        // An open loop idle at its deadline: the stage still lasted until the deadline.
        assert_eq!(
            stage_end(at(2100), Some(at(1950)), Some(at(2000))),
            at(2000)
        );
        // Stopped early (a signal, totalOps): its last op ends it.
        assert_eq!(stage_end(at(900), Some(at(800)), Some(at(2000))), at(800));
        assert_eq!(stage_end(at(900), Some(at(800)), None), at(800));
        // No op at all.
        assert_eq!(stage_end(at(900), None, Some(at(2000))), at(900));
    }
}
