//! The bodies of the worker agent's HTTP endpoint (`/v1/status`, `/v1/start`, `/v1/stop-at`), shared by the
//! agent (the worker's `agent` module serves them) and the operator (which sends and reads
//! them). The summary of `GET /v1/summary` is [`Summary`](crate::stats::Summary).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::stable::{SecondCounts, StableDecision};

/// Where the agent is. Serialized in camelCase on `/v1/status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AgentStage {
    /// Opening the target and preparing the dataset.
    Preparing,
    /// Prepared, waiting for `POST /v1/start`.
    Ready,
    /// In the measured stage.
    Running,
    /// Deleting what the run created.
    CleaningUp,
    /// The summary is ready on `GET /v1/summary`.
    Done,
    /// Something failed; `error` says what.
    Failed,
}

/// Body of `GET /v1/status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// The worker's name (`--worker-id`).
    pub worker_id: String,
    /// Where the agent is.
    pub stage: AgentStage,
    /// What failed, when `stage` is `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The start time the operator sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<DateTime<Utc>>,
    /// The actual start of the measured stage on this worker's clock, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// Operations completed so far (successful or not) and failed, from the live metrics.
    pub ops: u64,
    /// Payload bytes moved so far, from the live metrics.
    pub bytes: u64,
    /// Operations failed so far, from the live metrics.
    pub errors: u64,
    /// This worker's clock now, for offset estimates.
    pub worker_time: DateTime<Utc>,
    /// Whether the summary was fetched.
    pub summary_fetched: bool,
    /// With `stopWhenStable`, while running: the ops completed in each of the last seconds
    /// of the measured stage, from which the operator decides a run of several workers is
    /// steady (absent otherwise, and from older agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<SecondCounts>,
    /// The instant the operator told this agent to end its measured stage
    /// (`POST /v1/stop-at`), once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_at: Option<DateTime<Utc>>,
}

/// Body of `POST /v1/stop-at`: end the measured stage at `stopAt` (on the worker's clock) as
/// if its duration ended there, because the run is steady. An instant already past ends it
/// at once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopAtRequest {
    /// When the measured stage ends, the same instant for every worker of the run.
    pub stop_at: DateTime<Utc>,
    /// Why: the run's steady window, written into the summary's `stable`.
    pub stable: StableDecision,
}

/// Answer of `POST /v1/stop-at`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopAtResponse {
    /// This worker's clock when the request arrived.
    pub worker_time: DateTime<Utc>,
    /// The stop instant accepted (the one of the request).
    pub stop_at: DateTime<Utc>,
}

/// Body of `POST /v1/start`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartRequest {
    /// When the measured stage starts, on the worker's clock.
    pub start_at: DateTime<Utc>,
}

/// Answer of `POST /v1/start`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartResponse {
    /// This worker's clock when the request arrived.
    pub worker_time: DateTime<Utc>,
    /// The start time accepted (the one of the request).
    pub start_at: DateTime<Utc>,
}
