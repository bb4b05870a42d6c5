//! Shutdown on Ctrl-C or SIGTERM (what Kubernetes sends a pod being deleted).

/// Completes on the first Ctrl-C or SIGTERM.
pub async fn signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            // No SIGTERM handler (unusual): rely on Ctrl-C alone.
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
