//! The checks of `storage`: the endpoint or endpoints, and TLS.

use super::{clip, limits, StorageSpec};

impl StorageSpec {
    /// Report every invalid field of `storage` to `bad` (path, message).
    pub(super) fn check(&self, bad: &mut impl FnMut(&str, String)) {
        if self.endpoint.is_some() && self.endpoints.is_some() {
            bad(
                "storage.endpoints",
                "give `endpoint` or `endpoints`, not both".into(),
            );
        }
        if let Some(e) = &self.endpoint {
            self.check_endpoint("storage.endpoint", e, bad);
        }
        if let Some(list) = &self.endpoints {
            if list.is_empty() {
                bad(
                    "storage.endpoints",
                    "the list is empty: give at least one endpoint URL (or use `endpoint`)".into(),
                );
            }
            if list.len() > limits::MAX_ENDPOINTS as usize {
                bad(
                    "storage.endpoints",
                    format!(
                        "must list at most {} endpoints (got {})",
                        limits::MAX_ENDPOINTS,
                        list.len()
                    ),
                );
            }
            for (i, e) in list.iter().enumerate().take(limits::MAX_ENDPOINTS as usize) {
                let path = format!("storage.endpoints.{i}");
                self.check_endpoint(&path, e, bad);
                // The summary's per-endpoint figures are keyed by the URL.
                if list[..i].contains(e) {
                    bad(&path, format!("`{}` is listed twice", clip(e)));
                }
            }
        }
        let tls = &self.tls;
        if let Some(f) = &tls.ca_file {
            if f.trim().is_empty() {
                bad("storage.tls.caFile", "must not be empty".into());
            } else if f.len() > limits::MAX_PATH_LEN as usize {
                bad(
                    "storage.tls.caFile",
                    format!("must be at most {} bytes", limits::MAX_PATH_LEN),
                );
            }
            if tls.insecure_skip_verify {
                bad(
                    "storage.tls.insecureSkipVerify",
                    "excludes `caFile`: a CA is only used to verify certificates".into(),
                );
            }
        }
    }

    fn check_endpoint(&self, path: &str, e: &str, bad: &mut impl FnMut(&str, String)) {
        if e.len() > limits::MAX_ENDPOINT_LEN as usize {
            bad(
                path,
                format!(
                    "must be at most {} bytes (got {} bytes)",
                    limits::MAX_ENDPOINT_LEN,
                    e.len()
                ),
            );
        } else if !(e.starts_with("http://") || e.starts_with("https://")) {
            bad(
                path,
                format!("`{}` must start with http:// or https://", clip(e)),
            );
        } else if e.starts_with("http://") && !self.allow_http {
            bad(
                "storage.allowHttp",
                format!(
                    "endpoint `{}` is plain http: set storage.allowHttp: true",
                    clip(e)
                ),
            );
        }
    }
}
