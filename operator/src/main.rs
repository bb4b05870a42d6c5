//! `benchrun-operator`: `crd` prints the CRD; `run` runs the controller with its
//! `/metrics` + `/healthz` endpoint beside it.
//!
//! With `--leader-elect`, every replica serves `/metrics` and `/healthz`, but only the holder of
//! the Lease runs the controller. A leader that loses the lease (another holder, or no renewal
//! for 10 s) exits with status 1 so that Kubernetes restarts it as a standby: stopping is the
//! only way to be sure no reconcile of the old leader is still in flight. SIGTERM or SIGINT
//! stops the controller gracefully and then releases the lease, so a standby takes over at
//! its next poll (2 s) instead of after the 15 s lease duration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::routing::get;
use clap::{Parser, Subcommand};

use benchrun_api::units::HumanDuration;
use benchrun_operator::context::{self, Config};
use benchrun_operator::controller;
use benchrun_operator::leader::{Elector, LeaderConfig};
use benchrun_operator::metrics::Metrics;

/// Runs benchrun storage benchmarks declared as BenchmarkRun resources.
#[derive(Debug, Parser)]
#[command(name = "benchrun-operator", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the BenchmarkRun CustomResourceDefinition (YAML).
    Crd {
        /// Print the BenchmarkSchedule CustomResourceDefinition instead.
        #[arg(long)]
        schedule: bool,
    },
    /// Run the controller (kubeconfig from $KUBECONFIG, ~/.kube/config or in-cluster).
    Run(Box<RunArgs>),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Worker image for runs that name none.
    #[arg(long, env = "BENCHRUN_WORKER_IMAGE")]
    worker_image: String,
    /// File with the key the per-run worker tokens are derived from (HMAC-SHA256 of the run's
    /// UID). It must stay the same across restarts, or running workers become unreachable.
    #[arg(long, env = "BENCHRUN_OPERATOR_KEY_FILE")]
    key_file: PathBuf,
    /// Watch only this namespace (default: all).
    #[arg(long, env = "BENCHRUN_NAMESPACE")]
    namespace: Option<String>,
    /// Address of /metrics and /healthz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Run the controller only while holding the Lease, so that several replicas can run.
    /// Identity: $POD_NAME, else the hostname and process id.
    /// (The variable accepts true/false, 1/0, yes/no, on/off.)
    #[arg(long, env = "BENCHRUN_LEADER_ELECT", value_parser = clap::builder::BoolishValueParser::new())]
    leader_elect: bool,
    /// Name of the coordination.k8s.io/v1 Lease the replicas contend for.
    #[arg(long, env = "BENCHRUN_LEASE_NAME", default_value = "benchrun-operator")]
    lease_name: String,
    /// Namespace of the Lease (default: $POD_NAMESPACE); required with --leader-elect.
    #[arg(long, env = "BENCHRUN_LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// Secrets of the worker pods for pulling their image (from a private registry), for runs
    /// that name none in `spec.workers.imagePullSecrets`. Repeat the flag, or separate with
    /// commas in the variable.
    #[arg(
        long = "worker-image-pull-secret",
        env = "BENCHRUN_WORKER_IMAGE_PULL_SECRETS",
        value_delimiter = ','
    )]
    worker_image_pull_secrets: Vec<String>,
    /// Images runs may name in workers.image besides --worker-image: exact references or
    /// prefixes ending in `*`. Repeat the flag, or separate with commas in the variable.
    #[arg(
        long = "allowed-worker-image",
        env = "BENCHRUN_ALLOWED_WORKER_IMAGES",
        value_delimiter = ','
    )]
    allowed_worker_images: Vec<String>,
    /// Calls to one run's workers in flight at once: status polls, start requests, summary
    /// collection and shutdowns go to the workers concurrently, at most this many at a time.
    #[arg(long, env = "BENCHRUN_WORKER_PARALLELISM", default_value_t = context::DEFAULT_WORKER_PARALLELISM, value_parser = parse_parallelism)]
    worker_parallelism: usize,
    /// Longest call to one worker (e.g. `10s`, `2500ms`): a dead worker costs this once per
    /// pass, beside the others.
    #[arg(long, env = "BENCHRUN_WORKER_TIMEOUT", default_value = "10s", value_parser = parse_timeout)]
    worker_timeout: std::time::Duration,
    /// Least time between two writes of a running run's progress (`status.progress`, e.g.
    /// `5s`): each is a write to the API server of the cluster being measured.
    #[arg(long, env = "BENCHRUN_PROGRESS_INTERVAL", default_value = "5s", value_parser = parse_timeout)]
    progress_interval: std::time::Duration,
    /// Let runs mount hostPath volumes (they expose the node's files to whoever creates runs).
    #[arg(long, env = "BENCHRUN_ALLOW_HOST_PATH", value_parser = clap::builder::BoolishValueParser::new())]
    allow_host_path: bool,
    /// Let runs ask for an Unconfined seccomp profile (`spec.workers.seccompProfile`).
    #[arg(long, env = "BENCHRUN_ALLOW_UNCONFINED_SECCOMP", value_parser = clap::builder::BoolishValueParser::new())]
    allow_unconfined_seccomp: bool,
    /// Give each run a NetworkPolicy that lets only this operator's pods (in $POD_NAMESPACE,
    /// selected by --operator-pod-labels) and --worker-ingress-peers reach its workers' port.
    #[arg(long, env = "BENCHRUN_WORKER_NETWORK_POLICY", value_parser = clap::builder::BoolishValueParser::new())]
    worker_network_policy: bool,
    /// Labels of the operator's pods, `key=value,key=value` (the chart sets them).
    #[arg(long, env = "BENCHRUN_OPERATOR_POD_LABELS", default_value = "")]
    operator_pod_labels: String,
    /// More peers allowed to reach the workers' port (it serves /metrics too), as a JSON list
    /// of NetworkPolicyPeer, e.g. the monitoring namespace.
    #[arg(long, env = "BENCHRUN_WORKER_INGRESS_PEERS")]
    worker_ingress_peers: Option<String>,
}

impl RunArgs {
    /// The election settings, or `None` without --leader-elect.
    fn leader(&self) -> Result<Option<LeaderConfig>> {
        if !self.leader_elect {
            return Ok(None);
        }
        let namespace = self
            .lease_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .filter(|n| !n.is_empty())
            .context("--leader-elect needs --lease-namespace, $BENCHRUN_LEASE_NAMESPACE or $POD_NAMESPACE")?;
        let identity = match std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()) {
            Some(pod) => pod,
            // Outside a pod two processes may share a hostname; the pid tells them apart.
            None => format!(
                "{}-{}",
                hostname::get()
                    .context("reading the hostname for the leader identity")?
                    .to_string_lossy(),
                std::process::id()
            ),
        };
        Ok(Some(LeaderConfig::new(
            &self.lease_name,
            namespace,
            identity,
        )))
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BENCHRUN_LOG")
                .unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Crd { schedule: false } => {
            print!("{}", benchrun_operator::crd_yaml());
            Ok(())
        }
        Command::Crd { schedule: true } => {
            print!("{}", benchrun_operator::schedule_crd_yaml());
            Ok(())
        }
        Command::Run(args) => run(*args).await,
    }
}

async fn run(args: RunArgs) -> Result<()> {
    let key = std::fs::read(&args.key_file)
        .with_context(|| format!("reading the key file {}", args.key_file.display()))?;
    anyhow::ensure!(
        key.len() >= 16,
        "the key file {} holds fewer than 16 bytes",
        args.key_file.display()
    );
    let leader = args.leader()?;
    benchrun_operator::install_crypto_provider();
    let metrics = Arc::new(Metrics::new());
    let client = connect(&metrics).await?;
    let m = metrics.clone();
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = m.clone();
                async move { m.render() }
            }),
        )
        .route("/healthz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .with_context(|| format!("listening on {}", args.metrics_addr))?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("metrics server: {e}");
        }
    });
    let worker_ingress = if args.worker_network_policy {
        let ns = std::env::var("POD_NAMESPACE").unwrap_or_default();
        Some(
            benchrun_operator::netpol::WorkerIngress::parse(
                ns,
                &args.operator_pod_labels,
                args.worker_ingress_peers.as_deref(),
            )
            .map_err(|e| anyhow::anyhow!("--worker-network-policy: {e}"))?,
        )
    } else {
        None
    };
    let config = Config {
        key,
        worker_ingress,
        worker_image: args.worker_image,
        worker_image_pull_secrets: args
            .worker_image_pull_secrets
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect(),
        namespace: args.namespace,
        agent_port: benchrun_operator::resources::AGENT_PORT,
        policy: benchrun_operator::policy::Policy {
            allowed_images: args
                .allowed_worker_images
                .into_iter()
                .filter(|i| !i.is_empty())
                .collect(),
            allow_host_path: args.allow_host_path,
            allow_unconfined_seccomp: args.allow_unconfined_seccomp,
        },
        worker_parallelism: args.worker_parallelism,
        worker_timeout: args.worker_timeout,
        progress_interval: args.progress_interval,
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let shutdown = {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    let Some(leader) = leader else {
        metrics.set_leader(true);
        controller::run(client, config, metrics, shutdown).await?;
        return Ok(());
    };
    let (name, ns, me) = (
        leader.name.clone(),
        leader.namespace.clone(),
        leader.identity.clone(),
    );
    tracing::info!("leader election on lease {ns}/{name} as {me}");
    let mut elector = Elector::new(client.clone(), leader);
    let mut early = stopped.clone();
    tokio::select! {
        () = elector.acquire() => {}
        _ = early.wait_for(|s| *s) => return Ok(()),
    }
    tracing::info!("leading (lease {ns}/{name}); starting the controller");
    metrics.set_leader(true);
    let lost = tokio::select! {
        r = controller::run(client, config, metrics.clone(), shutdown) => {
            r?;
            None
        }
        why = elector.keep_leading() => Some(why),
    };
    metrics.set_leader(false);
    if let Some(why) = lost {
        anyhow::bail!(
            "lost the leadership of lease {ns}/{name}: {why}; exiting so that a restart stands by"
        );
    }
    match elector.release().await {
        Ok(true) => tracing::info!("released lease {ns}/{name}"),
        Ok(false) => {}
        Err(e) => {
            tracing::warn!("releasing lease {ns}/{name}: {e} (a standby takes it when it expires)")
        }
    }
    Ok(())
}

/// The kube client, from a kubeconfig ($KUBECONFIG or ~/.kube/config) when there is one, else
/// from the pod's service account (in-cluster), like `Client::try_default`; logs which.
async fn connect(metrics: &Metrics) -> Result<kube::Client> {
    let (config, source) =
        match kube::Config::from_kubeconfig(&kube::config::KubeConfigOptions::default()).await {
            Ok(c) => (c, "kubeconfig"),
            Err(kubeconfig) => match kube::Config::incluster() {
                Ok(c) => (c, "in-cluster service account"),
                Err(incluster) => anyhow::bail!(
                    "no Kubernetes config: kubeconfig: {kubeconfig}; in-cluster: {incluster}"
                ),
            },
        };
    tracing::info!("Kubernetes API {} ({source})", config.cluster_url);
    // Every request through the counting layer (benchrun_operator_api_requests_total).
    Ok(kube::client::ClientBuilder::try_from(config)
        .context("connecting to Kubernetes")?
        .with_layer(&benchrun_operator::apicount::CountLayer(
            metrics.api_requests.clone(),
        ))
        .build())
}

/// Worker parallelism: 1 to 4096.
fn parse_parallelism(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=4096).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n}: between 1 and 4096")),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

/// A call timeout or an interval, written as every duration of benchrun's is (`10s`,
/// `2500ms`, `1m`: [`HumanDuration`]), between 100 ms and 10 minutes.
fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    let d = s.parse::<HumanDuration>()?.get();
    if d < std::time::Duration::from_millis(100) || d > std::time::Duration::from_secs(600) {
        return Err(format!("{s:?}: between 100ms and 10m"));
    }
    Ok(d)
}

/// SIGTERM (what the kubelet sends) or SIGINT.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot catch SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timeouts_are_written_as_every_duration_and_bounded() {
        assert_eq!(parse_timeout("2500ms"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_timeout("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_timeout("1h")
            .unwrap_err()
            .contains("between 100ms and 10m"));
        assert!(parse_timeout("50ms").is_err());
        assert!(parse_timeout("10").unwrap_err().contains("not a duration"));
    }
}
