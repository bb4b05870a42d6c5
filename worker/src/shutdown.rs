//! Shutdown on Ctrl-C or SIGTERM (what Kubernetes sends a pod being deleted or evicted), and
//! the termination message that tells the pod's status why a worker stopped.

use std::path::Path;

/// Where the kubelet reads a container's termination message (`terminationMessagePath`).
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// The kubelet keeps at most 4096 bytes of a termination message.
const TERMINATION_MESSAGE_MAX: usize = 4096;

/// Leave `message` where the kubelet picks it up for the pod's status. Only when the file
/// already exists (the kubelet mounts it): outside Kubernetes nothing is created under /dev.
/// Best effort: the exit code says the same thing.
pub fn write_termination_message(path: &Path, message: &str) {
    if !path.exists() {
        return;
    }
    let mut end = message.len().min(TERMINATION_MESSAGE_MAX);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    if let Err(e) = std::fs::write(path, &message[..end]) {
        tracing::warn!(
            "cannot write the termination message to {}: {e}",
            path.display()
        );
    }
}

/// Completes on the first Ctrl-C (SIGINT) or SIGTERM. The handlers are installed when this
/// is called, not when the future is first polled: a signal that arrives before the run gets
/// that far still stops it cleanly, instead of killing the process by the default action
/// with nothing reported.
pub fn signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    // No handler (unusual): that signal keeps its default action.
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    async move {
        let wait = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = wait(term) => {}
            _ = wait(int) => {}
        }
    }
}
