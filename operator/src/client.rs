//! The operator's side of the worker agent's control endpoint, which `benchrun_worker::agent`
//! serves; the request and response bodies are in `benchrun_api::agent`.

use std::time::Duration;

use benchrun_api::agent::{AgentStatus, StartRequest, StartResponse};
use benchrun_api::Summary;
use chrono::{DateTime, Utc};

use crate::state::clock_offset_ms;

/// Largest summary body read from a worker: what one result ConfigMap can hold (1 MiB). A
/// worker's answer is read up to this and no further before it is parsed.
pub const MAX_SUMMARY_BYTES: usize = 1 << 20;
/// Largest status, start or error body.
const MAX_SMALL_BODY: usize = 64 << 10;

/// Talks to one worker at `http://<addr>`.
#[derive(Clone, Debug)]
pub struct WorkerClient {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// Why a call failed, as text: these end up in conditions and logs, never matched on.
pub type CallResult<T> = std::result::Result<T, String>;

/// Why a summary could not be had: whether asking again may help is in the variant, so that
/// a result is never given up on for a network error.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SummaryError {
    /// No answer, or not done yet (HTTP 409): ask again on the next pass.
    #[error("{0}")]
    Unreachable(String),
    /// The answer was cut off while its body was read (a reset connection, the call's
    /// timeout mid-body): the worker still holds its summary; ask again on the next pass.
    #[error("{0}")]
    Interrupted(String),
    /// The worker answered with something that is not a usable summary (too large, not
    /// UTF-8, not a summary of this version): asking again will not help. The body, when it
    /// is text, so that it can be kept rather than lost.
    #[error("{message}")]
    Invalid {
        /// Why it is unusable.
        message: String,
        /// What the worker sent, when it is text, to keep.
        body: Option<String>,
    },
}

impl SummaryError {
    /// Whether asking again may give the summary (a network error, not a bad body).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, SummaryError::Invalid { .. })
    }
}

/// Why a body could not be read whole.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
enum BodyError {
    /// The connection failed while the body was read: a network error, worth another try.
    #[error("{0}")]
    Transport(String),
    /// Larger than allowed: what the worker sent, not how.
    #[error("{0}")]
    TooLarge(String),
}

impl From<BodyError> for SummaryError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::Transport(m) => SummaryError::Interrupted(m),
            BodyError::TooLarge(message) => SummaryError::Invalid {
                message,
                body: None,
            },
        }
    }
}

/// A summary body read whole, as the raw text (persisted as is) and its parsed form; what is
/// wrong with it otherwise (never retryable: the same bytes come back).
fn summary_from_body(base: &str, body: Vec<u8>) -> Result<(String, Summary), SummaryError> {
    let text = String::from_utf8(body).map_err(|e| SummaryError::Invalid {
        message: format!("{base}: summary is not UTF-8: {e}"),
        body: None,
    })?;
    // Any format version this operator reads: a worker image older than the operator
    // serves an older one; a newer one is refused with its version named.
    match benchrun_api::summary_read::read(&text) {
        Ok(s) => Ok((text, s)),
        Err(e) => Err(SummaryError::Invalid {
            message: format!("{base}: {e}"),
            body: Some(text),
        }),
    }
}

/// An error with its causes (`error sending request: ... : operation timed out`): reqwest's
/// own message alone does not say whether the worker refused, timed out or reset.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = c.source();
    }
    out
}

/// Run `f` on every item with at most `parallelism` calls in flight, and return the outputs
/// in completion order. Every call to the workers goes through this: each call has its own
/// timeout (the HTTP client's), so a dead worker costs one timeout beside the others instead of
/// one before each of them.
pub async fn fan_out<I, T, F, Fut>(items: Vec<I>, parallelism: usize, f: F) -> Vec<T>
where
    F: FnMut(I) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    use futures::StreamExt;
    futures::stream::iter(items)
        .map(f)
        .buffer_unordered(parallelism.max(1))
        .collect()
        .await
}

/// Result of a start request: the worker's answer and our clock-offset estimate.
#[derive(Clone, Debug)]
pub struct Started {
    /// The agent's answer.
    pub response: StartResponse,
    /// The worker's clock minus the operator's, in milliseconds, measured by this call.
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
    /// seconds is checked again on the next reconcile anyway. `timeout` bounds each call.
    /// An error when the client cannot be built (no TLS is involved, so in practice only an
    /// unusable system configuration): never a fallback without the timeout, with which one
    /// hung worker would stall every pass.
    pub fn http(timeout: Duration) -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2).min(timeout))
            .timeout(timeout)
            .build()
            .map_err(|e| format!("HTTP client for the workers: {}", chain(&e)))
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> CallResult<reqwest::Response> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| format!("{}: {}", self.base, chain(&e)))?;
        if resp.status().is_success() {
            Ok(resp)
        } else {
            let code = resp.status();
            let body = self.read(resp, 4096, "error").await.unwrap_or_default();
            Err(format!(
                "{}: HTTP {code}: {}",
                self.base,
                String::from_utf8_lossy(&body).trim()
            ))
        }
    }

    /// The body, read chunk by chunk and refused past `max` bytes (never buffered whole first).
    async fn read(
        &self,
        mut resp: reqwest::Response,
        max: usize,
        what: &str,
    ) -> std::result::Result<Vec<u8>, BodyError> {
        if resp.content_length().is_some_and(|n| n > max as u64) {
            return Err(BodyError::TooLarge(format!(
                "{}: {what} body of {} bytes is larger than the {max} allowed",
                self.base,
                resp.content_length().unwrap_or_default()
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| {
            BodyError::Transport(format!("{}: reading {what}: {}", self.base, chain(&e)))
        })? {
            if body.len() + chunk.len() > max {
                return Err(BodyError::TooLarge(format!(
                    "{}: {what} body is larger than the {max} bytes allowed",
                    self.base
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        resp: reqwest::Response,
        what: &str,
    ) -> CallResult<T> {
        let body = self
            .read(resp, MAX_SMALL_BODY, what)
            .await
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(&body).map_err(|e| format!("{}: bad {what} body: {e}", self.base))
    }

    /// `GET /v1/status`: where the agent is.
    pub async fn status(&self) -> CallResult<AgentStatus> {
        let resp = self
            .send(self.http.get(format!("{}/v1/status", self.base)))
            .await?;
        self.json(resp, "status").await
    }

    /// Send the start time; measure the clock offset from the round trip.
    pub async fn start(&self, at: DateTime<Utc>) -> CallResult<Started> {
        let sent = Utc::now();
        let resp = self
            .send(
                self.http
                    .post(format!("{}/v1/start", self.base))
                    .json(&StartRequest { start_at: at }),
            )
            .await?;
        let response: StartResponse = self.json(resp, "start").await?;
        let received = Utc::now();
        Ok(Started {
            clock_offset_ms: clock_offset_ms(sent, received, response.worker_time),
            response,
        })
    }

    /// `POST /v1/stop-at`: end the measured stage at `at` (the run is steady, `stable` says
    /// how). The instant the agent accepted.
    pub async fn stop_at(
        &self,
        at: DateTime<Utc>,
        stable: &benchrun_api::stable::StableDecision,
    ) -> CallResult<DateTime<Utc>> {
        let resp = self
            .send(self.http.post(format!("{}/v1/stop-at", self.base)).json(
                &benchrun_api::agent::StopAtRequest {
                    stop_at: at,
                    stable: stable.clone(),
                },
            ))
            .await?;
        let response: benchrun_api::agent::StopAtResponse = self.json(resp, "stop-at").await?;
        Ok(response.stop_at)
    }

    /// The raw JSON text of the summary (persisted as is) and its parsed form.
    pub async fn summary(&self) -> Result<(String, Summary), SummaryError> {
        let resp = self
            .send(self.http.get(format!("{}/v1/summary", self.base)))
            .await
            .map_err(SummaryError::Unreachable)?;
        let body = self.read(resp, MAX_SUMMARY_BYTES, "summary").await?;
        summary_from_body(&self.base, body)
    }

    /// `POST /v1/shutdown`: let the agent exit (its summary was collected or given up on).
    pub async fn shutdown(&self) -> CallResult<()> {
        self.send(self.http.post(format!("{}/v1/shutdown", self.base)))
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "http://10.0.0.7:8080";

    /// The longest `stopWhenStable` window (1 h) and the seconds kept beyond it, at a billion
    /// ops per second each: the agent's status still fits the body limit of a status read.
    #[test]
    fn a_status_with_the_longest_window_of_seconds_fits_the_limit() {
        let keep = 3600 + benchrun_api::stable::SECONDS_KEPT_BEYOND_WINDOW as usize;
        let st = AgentStatus {
            worker_id: "w".repeat(63),
            stage: benchrun_api::agent::AgentStage::Running,
            error: None,
            start_at: Some(Utc::now()),
            started_at: Some(Utc::now()),
            ops: u64::MAX,
            bytes: u64::MAX,
            errors: u64::MAX,
            worker_time: Utc::now(),
            summary_fetched: false,
            seconds: Some(benchrun_api::stable::SecondCounts {
                first: u64::MAX / 2,
                ops: vec![1_000_000_000; keep],
            }),
            stop_at: Some(Utc::now()),
        };
        let len = serde_json::to_vec(&st).unwrap().len();
        assert!(len < MAX_SMALL_BODY, "{len} bytes");
    }

    #[test]
    fn a_cut_body_is_retried_and_a_bad_one_is_not() {
        let cut: SummaryError = BodyError::Transport(format!(
            "{BASE}: reading summary: error decoding response body: connection reset by peer"
        ))
        .into();
        assert!(matches!(cut, SummaryError::Interrupted(_)), "{cut:?}");
        assert!(cut.is_retryable());
        assert!(SummaryError::Unreachable(format!("{BASE}: HTTP 409 Conflict")).is_retryable());
        let big: SummaryError =
            BodyError::TooLarge(format!("{BASE}: summary body is larger than allowed")).into();
        assert_eq!(
            big,
            SummaryError::Invalid {
                message: format!("{BASE}: summary body is larger than allowed"),
                body: None
            }
        );
        assert!(!big.is_retryable());
    }

    #[test]
    fn a_body_read_whole_is_a_summary_or_invalid_with_what_was_sent() {
        let summary = Summary {
            target: "file:///data".into(),
            workers: 1,
            worker_ids: vec!["w0".into()],
            started_at: chrono::DateTime::UNIX_EPOCH,
            elapsed_seconds: 1.0,
            stopped_by: "duration".into(),
            ..Default::default()
        };
        let text = serde_json::to_string(&summary).expect("json");
        let (kept, read) = summary_from_body(BASE, text.clone().into_bytes()).expect("valid");
        assert_eq!((kept, read), (text, summary));

        let e = summary_from_body(BASE, vec![0xff, 0xfe]).expect_err("not UTF-8");
        assert!(!e.is_retryable());
        assert!(
            matches!(&e, SummaryError::Invalid { body: None, message } if message.contains("not UTF-8")),
            "{e:?}"
        );

        // Text that is not a summary: invalid, and kept to be looked at.
        let e = summary_from_body(BASE, br#"{"not": "a summary"}"#.to_vec()).expect_err("no");
        match e {
            SummaryError::Invalid { message, body } => {
                assert!(message.starts_with(BASE), "{message}");
                assert_eq!(body.as_deref(), Some(r#"{"not": "a summary"}"#));
            }
            other => panic!("{other:?}"),
        }
    }
}
