//! `benchrun-operator`: `crd` prints the CRD; `run` runs the controller with its
//! `/metrics` + `/healthz` endpoint beside it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::routing::get;
use clap::{Parser, Subcommand};

use benchrun_operator::metrics::Metrics;
use benchrun_operator::reconcile::{self, Config};

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
    Crd,
    /// Run the controller (kubeconfig from $KUBECONFIG, ~/.kube/config or in-cluster).
    Run(RunArgs),
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
        Command::Crd => {
            print!("{}", benchrun_operator::crd_yaml());
            Ok(())
        }
        Command::Run(args) => run(args).await,
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
    benchrun_operator::install_crypto_provider();
    let client = kube::Client::try_default()
        .await
        .context("connecting to Kubernetes")?;
    let metrics = Arc::new(Metrics::new());
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
    let config = Config {
        key,
        worker_image: args.worker_image,
        namespace: args.namespace,
        agent_port: benchrun_operator::resources::AGENT_PORT,
    };
    reconcile::run(client, config, metrics, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}
