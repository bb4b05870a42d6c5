//! Tasks on OS threads of their own, for targets whose ops are blocking system calls.
//!
//! A local file op is a series of blocking syscalls. Handed to tokio's blocking pool, each op
//! costs two thread hand-offs (there and back), which a warm 1 MiB `file://` read measured at
//! ~10% of its throughput, and above 512 ops in flight (the pool's cap) an op waits for a
//! thread while its latency clock runs. Instead, such a task runs its whole loop on one thread,
//! like a fio job: the thread blocks in the read, and the time measured is the syscalls'.
//! Timers and the stop signal still come from the runtime (its handle is entered).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex};

use tokio::runtime::Handle;

use crate::targets::io_inline;

/// Holds the threads of a run until all of them exist.
///
/// Threads that started working at once would take the CPU from the one starting the rest:
/// on a busy 2-core machine, 1,024 threads took more than 3 s to start that way, and the run's
/// concurrency ramped up over its first seconds. Waiting threads cost nothing.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    /// Let every thread waiting (and every later one) through. Also when starting the
    /// threads failed: the run is stopped by then, and they end at their first ticket.
    pub fn open(&self) {
        let (open, cv) = &*self.0;
        *open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    pub(super) fn wait(&self) {
        let (open, cv) = &*self.0;
        let mut g = open.lock().unwrap_or_else(|e| e.into_inner());
        while !*g {
            g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Start `task` on a new OS thread named `name`, once `gate` opens, driven by `handle`'s
/// timers, with local file I/O inline. Returns a future of its output, to await on the
/// runtime; a panic on the thread is resumed there (so a `JoinSet` reports it as that task's
/// panic).
pub fn spawn<F>(
    name: String,
    handle: Handle,
    gate: Gate,
    task: F,
) -> std::io::Result<impl Future<Output = F::Output> + Send + 'static>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    on_thread(
        name,
        gate,
        "a task",
        || (),
        move |()| {
            // The thread is the task's alone: its waits for a due time may block it (`wait.rs`).
            super::wait::mark_own_thread();
            io_inline(|| handle.block_on(task))
        },
    )
}

/// Run `before` on a new OS thread named `name` at once, then `work` with its result once
/// `gate` opens. Returns a future of `work`'s result, to await on a runtime; a panic on the
/// thread (in either step) is resumed where it is awaited. `what` names the thread's job in
/// the one message that cannot happen in practice.
pub(super) fn on_thread<S: 'static, T: Send + 'static>(
    name: String,
    gate: Gate,
    what: &'static str,
    before: impl FnOnce() -> S + Send + 'static,
    work: impl FnOnce(S) -> T + Send + 'static,
) -> std::io::Result<impl Future<Output = T> + Send + 'static> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name(name).spawn(move || {
        let out = std::panic::catch_unwind(AssertUnwindSafe(before)).and_then(|state| {
            gate.wait();
            std::panic::catch_unwind(AssertUnwindSafe(move || work(state)))
        });
        // The receiver is gone only when the run was dropped; nothing is left to tell.
        let _ = tx.send(out);
    })?;
    Ok(async move {
        match rx.await {
            Ok(Ok(out)) => out,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            // catch_unwind above always sends, unless the thread itself was torn down.
            Err(_) => panic!("{what}'s thread ended without a result"),
        }
    })
}
