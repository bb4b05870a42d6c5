//! The agent's HTTP routes: the worker's usual ones plus the authorized `/v1/*` control.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::Utc;

use super::{Agent, AgentStage, StartRequest, StartResponse, StopAtRequest, StopAtResponse};

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(serde_json::json!({"error": "missing or wrong bearer token"})),
    )
        .into_response()
}

fn conflict(message: String) -> Response {
    (
        StatusCode::CONFLICT,
        Json(serde_json::json!({"error": message})),
    )
        .into_response()
}

/// The agent's routes: the worker's usual ones plus `/v1/*`.
pub fn router(agent: Agent) -> Router {
    let control = Router::new()
        .route("/v1/status", get(status_handler))
        .route("/v1/start", post(start_handler))
        .route("/v1/stop-at", post(stop_at_handler))
        .route("/v1/summary", get(summary_handler))
        .route("/v1/shutdown", post(shutdown_handler))
        .with_state(agent.clone());
    crate::server::router(agent.metrics.clone()).merge(control)
}

async fn status_handler(State(agent): State<Agent>, headers: HeaderMap) -> Response {
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    Json(agent.status()).into_response()
}

async fn start_handler(
    State(agent): State<Agent>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let worker_time = Utc::now();
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    let req: StartRequest = match parse_body(&body, r#"{"startAt": RFC 3339}"#) {
        Ok(r) => r,
        Err(bad) => return *bad,
    };
    {
        let mut i = agent.lock();
        match (i.stage, i.start_at) {
            (_, Some(at)) if at == req.start_at => {}
            (_, Some(at)) => return conflict(format!("already started for {}", at.to_rfc3339())),
            (AgentStage::Ready, None) => i.start_at = Some(req.start_at),
            (stage, None) => return conflict(format!("not ready to start (stage {stage:?})")),
        }
    }
    agent.start_tx.send_replace(Some(req.start_at));
    Json(StartResponse {
        worker_time,
        start_at: req.start_at,
    })
    .into_response()
}

/// `POST /v1/stop-at`: the run is steady; end the measured stage at the given instant.
async fn stop_at_handler(
    State(agent): State<Agent>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let worker_time = Utc::now();
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    let req: StopAtRequest = match parse_body(&body, r#"{"stopAt": RFC 3339, "stable": {...}}"#) {
        Ok(r) => r,
        Err(bad) => return *bad,
    };
    {
        let mut i = agent.lock();
        match (i.stage, i.stop_at) {
            // Resent (an operator restarted, or an answer lost): the same instant is accepted.
            (_, Some(at)) if at == req.stop_at => {}
            (_, Some(at)) => return conflict(format!("already stopping at {}", at.to_rfc3339())),
            (AgentStage::Running, None) => i.stop_at = Some(req.stop_at),
            (stage, None) => {
                return conflict(format!("not in the measured stage (stage {stage:?})"))
            }
        }
    }
    agent
        .stop_at_tx
        .send_replace(Some((req.stop_at, req.stable)));
    Json(StopAtResponse {
        worker_time,
        stop_at: req.stop_at,
    })
    .into_response()
}

/// A request body as JSON, or the 400 answer that says what was expected and why it was not.
fn parse_body<T: serde::de::DeserializeOwned>(
    body: &[u8],
    expected: &str,
) -> Result<T, Box<Response>> {
    serde_json::from_slice(body).map_err(|e| {
        Box::new(
            (
                StatusCode::BAD_REQUEST,
                Json(serde_json::json!({"error": format!("expected {expected}: {e}")})),
            )
                .into_response(),
        )
    })
}

async fn summary_handler(State(agent): State<Agent>, headers: HeaderMap) -> Response {
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    let mut i = agent.lock();
    match (&i.summary, i.stage) {
        (Some(s), AgentStage::Done) => {
            let body = Json(s.clone()).into_response();
            i.summary_fetched = true;
            body
        }
        (_, stage) => conflict(format!("no summary yet (stage {stage:?})")),
    }
}

async fn shutdown_handler(State(agent): State<Agent>, headers: HeaderMap) -> Response {
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    agent.request_shutdown();
    (
        StatusCode::ACCEPTED,
        Json(serde_json::json!({"shutdown": true})),
    )
        .into_response()
}
