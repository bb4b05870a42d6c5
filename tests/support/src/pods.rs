//! Pods in tests: the restricted security context, waiting for a phase, logs, JSON in logs.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Capabilities, Pod, PodSecurityContext, SeccompProfile, SecurityContext,
};
use kube::api::LogParams;
use kube::{Api, Client};

/// The user the images run as (distroless "nonroot"); see `make_image` in tests/lib/cluster.sh.
pub const NONROOT_UID: i64 = 65532;

/// Pod-level settings of the `restricted` Pod Security Standard. `fsGroup` makes emptyDir and
/// other volumes writable by [`NONROOT_UID`].
pub fn restricted_pod_security() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(NONROOT_UID),
        run_as_group: Some(NONROOT_UID),
        fs_group: Some(NONROOT_UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Container-level settings of the `restricted` standard, plus a read-only root filesystem.
pub fn restricted_container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Waits until the pod's phase is `want`, and returns the pod. Fails at once when the pod ends
/// in another terminal phase or a container cannot start (e.g. the image is missing on the node).
pub async fn wait_for_phase(
    client: &Client,
    ns: &str,
    name: &str,
    want: &str,
    timeout: Duration,
) -> anyhow::Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("not created");
    loop {
        if let Some(pod) = pods.get_opt(name).await? {
            let status = pod.status.clone().unwrap_or_default();
            let phase = status.phase.clone().unwrap_or_default();
            if phase == want {
                return Ok(pod);
            }
            if phase == "Succeeded" || phase == "Failed" {
                // Say why: the kubelet's reason (Evicted, ...) and each container's end.
                let mut why = format!(
                    "{} {}",
                    status.reason.clone().unwrap_or_default(),
                    status.message.clone().unwrap_or_default()
                );
                for cs in status.container_statuses.iter().flatten() {
                    if let Some(t) = cs.state.as_ref().and_then(|s| s.terminated.as_ref()) {
                        why.push_str(&format!(
                            "; container {} exited {} ({}): {}",
                            cs.name,
                            t.exit_code,
                            t.reason.clone().unwrap_or_default(),
                            t.message.clone().unwrap_or_default()
                        ));
                    }
                }
                anyhow::bail!(
                    "pod {ns}/{name} ended {phase}, wanted {want}: {}",
                    why.trim()
                );
            }
            for cs in status.container_statuses.unwrap_or_default() {
                if let Some(w) = cs.state.and_then(|s| s.waiting) {
                    let reason = w.reason.unwrap_or_default();
                    // These never resolve on their own with imagePullPolicy: Never.
                    if matches!(
                        reason.as_str(),
                        "ErrImageNeverPull"
                            | "InvalidImageName"
                            | "CreateContainerConfigError"
                            | "CreateContainerError"
                    ) {
                        anyhow::bail!(
                            "pod {ns}/{name} container {}: {reason}: {}",
                            cs.name,
                            w.message.unwrap_or_default()
                        );
                    }
                }
            }
            last = format!("phase {phase:?}");
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("pod {ns}/{name} not {want} after {timeout:?} (last: {last})");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The whole log of one container (stdout and stderr interleaved, as the kubelet stores them).
pub async fn logs(
    client: &Client,
    ns: &str,
    name: &str,
    container: &str,
) -> anyhow::Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = LogParams {
        container: Some(container.to_string()),
        ..LogParams::default()
    };
    Ok(pods.logs(name, &lp).await?)
}

/// Only what the container wrote to stdout. The plain log API interleaves stderr line by line,
/// which can split a multi-line JSON document a program prints while it writes to stderr.
/// Uses the `stream` log option (feature gate PodLogsQuerySplitStreams, which
/// tests/cluster/up.sh enables on the apiserver and the kubelets).
pub async fn stdout_logs(
    client: &Client,
    ns: &str,
    name: &str,
    container: &str,
) -> anyhow::Result<String> {
    let lp = LogParams {
        container: Some(container.to_string()),
        ..LogParams::default()
    };
    let mut req =
        kube::core::Request::new(format!("/api/v1/namespaces/{ns}/pods")).logs(name, &lp)?;
    let uri = format!("{}&stream=Stdout", req.uri());
    *req.uri_mut() = uri.parse()?;
    Ok(client.request_text(req).await?)
}

/// The last JSON object in a log that starts at the beginning of a line. The log API merges
/// stderr (progress, warnings) into stdout, so a program's JSON result has to be found in it;
/// text after the object is ignored.
pub fn last_json_object(log: &str) -> Option<serde_json::Value> {
    let mut found = None;
    let mut offset = 0;
    for line in log.split_inclusive('\n') {
        if line.starts_with('{') {
            let mut stream =
                serde_json::Deserializer::from_str(&log[offset..]).into_iter::<serde_json::Value>();
            if let Some(Ok(v @ serde_json::Value::Object(_))) = stream.next() {
                found = Some(v);
            }
        }
        offset += line.len();
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_json_among_log_lines() {
        let log = "progress 1\n{\"a\": 1}\nmore\n{\n  \"ops\": {\"get\": {\"count\": 3}}\n}\ntrailing text\n";
        let v = last_json_object(log).unwrap();
        assert_eq!(v["ops"]["get"]["count"], 3);
        assert!(last_json_object("no json here\n").is_none());
    }
}
