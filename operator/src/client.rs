//! The operator's side of the worker agent's control endpoint (see `benchrun_worker::agent`).

use std::time::Duration;

use benchrun_worker::agent::{AgentStatus, StartRequest, StartResponse};
use benchrun_worker::Summary;
use chrono::{DateTime, Utc};

use crate::state::clock_offset_ms;

/// Talks to one worker at `http://<addr>`.
#[derive(Clone, Debug)]
pub struct WorkerClient {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// Why a call failed, as text: these end up in conditions and logs, never matched on.
pub type CallResult<T> = std::result::Result<T, String>;

/// Result of a start request: the worker's answer and our clock-offset estimate.
#[derive(Clone, Debug)]
pub struct Started {
    pub response: StartResponse,
    pub clock_offset_ms: f64,
}

impl WorkerClient {
    /// `addr` is `ip:port` (IPv6 in brackets).
    pub fn new(http: reqwest::Client, addr: &str, token: &str) -> Self {
        Self {
            http,
            base: format!("http://{addr}"),
            token: token.to_string(),
        }
    }

    /// The shared HTTP client: short timeouts, since a worker that does not answer within
    /// seconds is checked again on the next reconcile anyway.
    pub fn http() -> reqwest::Client {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default()
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> CallResult<reqwest::Response> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| format!("{}: {e}", self.base))?;
        if resp.status().is_success() {
            Ok(resp)
        } else {
            let code = resp.status();
            let body = resp.text().await.unwrap_or_default();
            Err(format!("{}: HTTP {code}: {}", self.base, body.trim()))
        }
    }

    pub async fn status(&self) -> CallResult<AgentStatus> {
        self.send(self.http.get(format!("{}/v1/status", self.base)))
            .await?
            .json()
            .await
            .map_err(|e| format!("{}: bad status body: {e}", self.base))
    }

    /// Send the start time; measure the clock offset from the round trip.
    pub async fn start(&self, at: DateTime<Utc>) -> CallResult<Started> {
        let sent = Utc::now();
        let response: StartResponse = self
            .send(
                self.http
                    .post(format!("{}/v1/start", self.base))
                    .json(&StartRequest { start_at: at }),
            )
            .await?
            .json()
            .await
            .map_err(|e| format!("{}: bad start body: {e}", self.base))?;
        let received = Utc::now();
        Ok(Started {
            clock_offset_ms: clock_offset_ms(sent, received, response.worker_time),
            response,
        })
    }

    /// The raw JSON text of the summary (persisted as is) and its parsed form.
    pub async fn summary(&self) -> CallResult<(String, Summary)> {
        let text = self
            .send(self.http.get(format!("{}/v1/summary", self.base)))
            .await?
            .text()
            .await
            .map_err(|e| format!("{}: reading summary: {e}", self.base))?;
        let s = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a summary: {e}", self.base))?;
        Ok((text, s))
    }

    pub async fn shutdown(&self) -> CallResult<()> {
        self.send(self.http.post(format!("{}/v1/shutdown", self.base)))
            .await
            .map(|_| ())
    }
}
