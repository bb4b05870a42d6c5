//! Tasks of a network target on a few single-threaded runtimes ("shards").
//!
//! On tokio's multi-threaded runtime, tasks waiting on sockets are woken by whichever thread
//! polls the reactor and often run on another: a 1 MiB GET from MinIO at concurrency 16 cost
//! about 5 context switches, and those hand-offs were about a quarter of the client's CPU per
//! GiB (see BENCHMARKS.md, "Client CPU"). A shard is one OS thread with a current-thread
//! runtime, a share of the run's tasks and, where the target can make one, a client of its
//! own ([`Target::for_shard`]): a task, its connections and the tasks driving them stay on
//! one thread, so an op is woken where it waits.
//!
//! One shard serves up to [`TASKS_PER_SHARD`] tasks, and there are never more shards than
//! CPUs; `BENCHRUN_IO_THREADS` sets the number. The stop signal, the live metrics and the
//! ticket counter are the run's, shared as before; a panic in a shard's task is resumed where
//! the shard is awaited, so the engine stops every other task as it does for one task.

use std::future::Future;
use std::sync::Arc;

use super::recorder::Recorder;
use super::threads::Gate;
use crate::targets::{Target, TargetError};

/// Tasks one shard serves before another is added (until there is one per CPU).
///
/// One shard drove 16 tasks of 1 MiB GETs at ~0.23 CPU-s/GiB, i.e. about 4 GiB/s per core;
/// small objects cost more per op, hence a share well below what a thread can hold.
pub const TASKS_PER_SHARD: u32 = 32;

/// Environment variable that sets the number of shards (a positive integer).
pub const ENV: &str = "BENCHRUN_IO_THREADS";

/// How many shards run `concurrency` tasks: `BENCHRUN_IO_THREADS` when set, else one per
/// [`TASKS_PER_SHARD`] tasks, at most one per CPU, never more than the tasks.
pub fn count(concurrency: u32, env: Option<&str>) -> Result<usize, String> {
    let tasks = concurrency.max(1) as usize;
    if let Some(v) = env {
        return match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n.min(tasks)),
            _ => Err(format!(
                "{ENV}={v:?}: expected a positive number of threads"
            )),
        };
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(tasks.div_ceil(TASKS_PER_SHARD as usize).clamp(1, cpus))
}

/// The target each of `n` shards uses: a new client per shard where the target can make
/// one, else the shared one.
pub fn targets(shared: &Arc<dyn Target>, n: usize) -> Result<Vec<Arc<dyn Target>>, TargetError> {
    (0..n)
        .map(|_| Ok(shared.for_shard()?.unwrap_or_else(|| shared.clone())))
        .collect()
}

/// Connections a shard opens before the start beyond one per task. hyper-util's pool starts a
/// new connection when a task asks for one while none is idle, which happens whenever a task
/// sends its next request before another task's finished response has put its connection
/// back: with exactly one per task, 0 to 4 connections per run were still opened inside the
/// measured stage on MinIO (8 to 256 tasks); with 2 spares per shard, none in 10 runs. The
/// count a run opened in its measured stage is reported (`connectionsOpened`).
pub const SPARE_CONNECTIONS: usize = 2;

/// A shard's signal that its connections are open (or their opening failed): its thread
/// then waits at the gate.
pub type Primed = tokio::sync::oneshot::Receiver<()>;

/// Run `tasks` on a new OS thread named `name` with a runtime of its own, once `gate` opens.
///
/// Before the gate, the shard opens its connections on that runtime: one cheap request
/// ([`Target::check`], a listing of at most one key) per task and [`SPARE_CONNECTIONS`] more,
/// all at once, so the client's pool holds a connection per task and TCP/TLS setup is not
/// timed in the first op of each task (it lands in the setup stage, which waits on the
/// returned [`Primed`]). A failed
/// request is not an error of the run (the connection was made, or the first op will say
/// why it cannot be), only logged at debug level.
///
/// Returns the [`Primed`] signal and a future of the tasks' recorders, to await on the
/// engine's runtime; a panic of a task is resumed there.
pub fn spawn<F>(
    name: String,
    gate: Gate,
    target: Arc<dyn Target>,
    tasks: Vec<F>,
) -> std::io::Result<(Primed, impl Future<Output = Vec<Recorder>> + Send + 'static)>
where
    F: Future<Output = Recorder> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (primed_tx, primed) = tokio::sync::oneshot::channel();
    let connections = tasks.len() + SPARE_CONNECTIONS;
    let prime = move || {
        rt.block_on(async {
            let checks = (0..connections).map(|_| target.check());
            for r in futures::future::join_all(checks).await {
                if let Err(e) = r {
                    tracing::debug!("opening a connection before the start: {e}");
                }
            }
        });
        // Setup may already have given up waiting (an error elsewhere).
        let _ = primed_tx.send(());
        rt
    };
    let done = super::threads::on_thread(name, gate, "a shard", prime, move |rt| {
        rt.block_on(async move {
            let mut set = tokio::task::JoinSet::new();
            for t in tasks {
                set.spawn(t);
            }
            let mut out = Vec::with_capacity(set.len());
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok(rec) => out.push(rec),
                    // The rest of this shard is dropped with its runtime; the engine stops
                    // the other shards when it sees the panic.
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    // Nothing aborts a shard's tasks but the runtime's own drop.
                    Err(e) => panic!("a task of a shard was cancelled: {e}"),
                }
            }
            out
        })
    })?;
    Ok((primed, done))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::datagen::Payload;
    use crate::targets::{ChunkPlan, GetOutcome, GetRequest, ListOutcome, ObjectInfo};

    /// A target that counts its checks (the shard's connection-opening requests); the
    /// first fails, as on an empty or refused prefix, which must not stop the shard.
    #[derive(Debug, Default)]
    struct Checks(AtomicU32);

    #[async_trait]
    impl Target for Checks {
        async fn get(&self, _: &str, _: &GetRequest) -> Result<GetOutcome, TargetError> {
            unreachable!()
        }
        async fn put(&self, _: &str, _: Payload) -> Result<u32, TargetError> {
            unreachable!()
        }
        async fn stat(&self, _: &str) -> Result<ObjectInfo, TargetError> {
            unreachable!()
        }
        async fn list(&self, _: &str) -> Result<ListOutcome, TargetError> {
            unreachable!()
        }
        async fn delete(&self, _: &str) -> Result<(), TargetError> {
            unreachable!()
        }
        async fn check(&self) -> Result<(), TargetError> {
            match self.0.fetch_add(1, Ordering::SeqCst) {
                0 => Err(TargetError::Unsupported("no listing here".into())),
                _ => Ok(()),
            }
        }
        fn default_plan(&self) -> ChunkPlan {
            ChunkPlan::Whole
        }
    }

    #[test]
    fn one_shard_per_32_tasks_at_most_one_per_cpu() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(count(1, None), Ok(1));
        assert_eq!(count(16, None), Ok(1));
        assert_eq!(count(32, None), Ok(1));
        assert_eq!(count(33, None), Ok(2.min(cpus)));
        assert_eq!(count(100_000, None), Ok(cpus));
    }

    #[test]
    fn the_environment_sets_the_count_within_the_tasks() {
        assert_eq!(count(16, Some("4")), Ok(4));
        assert_eq!(count(2, Some("8")), Ok(2));
        for bad in ["0", "-1", "two", ""] {
            let e = count(16, Some(bad)).unwrap_err();
            assert!(e.contains(ENV) && e.contains("positive"), "{e}");
        }
    }

    #[tokio::test]
    async fn tasks_run_on_the_shard_and_a_panic_reaches_the_caller() {
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let gate = Gate::default();
        let m = metrics.clone();
        let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let tasks = (0..3)
            .map(|_| {
                let (m, names) = (m.clone(), names.clone());
                async move {
                    let me = std::thread::current().name().map(str::to_string);
                    names.lock().unwrap().push(me);
                    Recorder::new(m, [])
                }
            })
            .collect();
        let target = Arc::new(Checks::default());
        let (primed, done) =
            spawn("shard-test".into(), gate.clone(), target.clone(), tasks).unwrap();
        // One request per task and the spares before the gate opens, none of the tasks run
        // yet; a failed one does not stop the shard.
        primed.await.unwrap();
        assert_eq!(
            target.0.load(Ordering::SeqCst),
            3 + SPARE_CONNECTIONS as u32
        );
        assert!(names.lock().unwrap().is_empty());
        gate.open();
        assert_eq!(done.await.len(), 3);
        assert_eq!(*names.lock().unwrap(), vec![Some("shard-test".into()); 3]);

        let failing: Vec<std::pin::Pin<Box<dyn Future<Output = Recorder> + Send>>> = vec![
            Box::pin(async { panic!("boom in a shard") }),
            Box::pin(std::future::pending()),
        ];
        let (_, failing) = spawn("shard-panic".into(), gate, target, failing).unwrap();
        let done = tokio::spawn(failing);
        let e = done.await.unwrap_err();
        let p = e.into_panic();
        assert_eq!(p.downcast_ref::<&str>(), Some(&"boom in a shard"));
    }
}
