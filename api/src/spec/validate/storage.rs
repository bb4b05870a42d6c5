//! The client settings of `storage`: retries and timeout here, endpoints and TLS in
//! `StorageSpec::check` (`spec/storage.rs`).

use super::*;

impl Workload {
    /// `storage`: a bounded retry count, a timeout above 0, then its endpoints and TLS.
    pub(super) fn check_storage(&self, bad: &mut impl FnMut(&str, String)) {
        if self.storage.max_retries > 100 {
            bad(
                "storage.maxRetries",
                format!("must be at most 100 (got {})", self.storage.max_retries),
            );
        }
        if self.storage.request_timeout.is_some_and(|t| t.0.is_zero()) {
            bad("storage.requestTimeout", "must be greater than 0".into());
        }
        self.storage.check(bad);
    }
}
