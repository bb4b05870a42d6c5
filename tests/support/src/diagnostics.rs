//! What a failed cluster test prints: every pod's state and logs, and the namespace's events.

use std::fmt::Write;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, LogParams};
use kube::{Api, Client};

/// Log lines kept per container; enough for a worker's error without flooding the output.
const LOG_TAIL_LINES: i64 = 200;

/// Collects pod states, container logs and events of `ns` into one report.
pub async fn collect(client: &Client, ns: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "===== diagnostics for namespace {ns} =====");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    match pods.list(&ListParams::default()).await {
        Err(e) => {
            let _ = writeln!(out, "listing pods failed: {e}");
        }
        Ok(list) => {
            for pod in list.items {
                write_pod(&mut out, &pods, &pod).await;
            }
        }
    }
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    match events.list(&ListParams::default()).await {
        Err(e) => {
            let _ = writeln!(out, "listing events failed: {e}");
        }
        Ok(list) => {
            let mut items = list.items;
            items.sort_by_key(|e| {
                e.last_timestamp
                    .clone()
                    .or(e.first_timestamp.clone())
                    .map(|t| t.0)
            });
            let _ = writeln!(out, "----- events ({}) -----", items.len());
            for e in items {
                let _ = writeln!(
                    out,
                    "{} {} {}/{}: {} {}",
                    e.last_timestamp
                        .map(|t| t.0.to_string())
                        .unwrap_or_default(),
                    e.type_.unwrap_or_default(),
                    e.involved_object.kind.unwrap_or_default(),
                    e.involved_object.name.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default().trim_end(),
                );
            }
        }
    }
    let _ = writeln!(out, "===== end of diagnostics for {ns} =====");
    out
}

async fn write_pod(out: &mut String, pods: &Api<Pod>, pod: &Pod) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "----- pod {name}: phase {} on node {} {}",
        status.phase.as_deref().unwrap_or("?"),
        spec.node_name.as_deref().unwrap_or("(unscheduled)"),
        status.message.as_deref().unwrap_or(""),
    );
    for c in status.conditions.unwrap_or_default() {
        if c.status != "True" {
            let _ = writeln!(
                out,
                "  condition {}={} {} {}",
                c.type_,
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default()
            );
        }
    }
    let statuses = status
        .init_container_statuses
        .unwrap_or_default()
        .into_iter()
        .chain(status.container_statuses.unwrap_or_default());
    for cs in statuses {
        let state = cs.state.unwrap_or_default();
        let desc = if let Some(t) = state.terminated {
            format!(
                "terminated exit={} reason={} {}",
                t.exit_code,
                t.reason.unwrap_or_default(),
                t.message.unwrap_or_default()
            )
        } else if let Some(w) = state.waiting {
            format!(
                "waiting reason={} {}",
                w.reason.unwrap_or_default(),
                w.message.unwrap_or_default()
            )
        } else if state.running.is_some() {
            "running".to_string()
        } else {
            "unknown".to_string()
        };
        let _ = writeln!(
            out,
            "  container {} ({}): {desc}, restarts {}",
            cs.name, cs.image, cs.restart_count
        );
        let lp = LogParams {
            container: Some(cs.name.clone()),
            tail_lines: Some(LOG_TAIL_LINES),
            ..LogParams::default()
        };
        match pods.logs(&name, &lp).await {
            Ok(logs) if logs.is_empty() => {
                let _ = writeln!(out, "  (no log output)");
            }
            Ok(logs) => {
                let _ = writeln!(
                    out,
                    "  --- logs of {name}/{} (last {LOG_TAIL_LINES} lines) ---",
                    cs.name
                );
                for line in logs.lines() {
                    let _ = writeln!(out, "  | {line}");
                }
            }
            Err(e) => {
                let _ = writeln!(out, "  (logs unavailable: {e})");
            }
        }
    }
}

/// Prints [`collect`]'s report to stderr, which the test harness shows for a failed test.
pub async fn dump_diagnostics(client: &Client, ns: &str) {
    eprintln!("{}", collect(client, ns).await);
}
