//! The I/O a control-plane pod's hold container kept running on its volume while the
//! lifecycle's snapshot, clone and expand ran (`controlPlane.busy`): written by the worker's
//! `probe-hold --busy` as its container's termination message when the pod is deleted, read by
//! the operator from the pod's last status, merged over the run's lifecycles.
//!
//! Kubernetes keeps at most 4 KiB of a termination message, so [`HoldIo::message`] leaves the
//! histogram out when the line would not fit (a long hold with very many distinct latencies):
//! the counts and the maximum are always there, the percentiles then come from the other
//! lifecycles' histograms, and the operator says how many were left out.

use serde::{Deserialize, Serialize};

use crate::latency::Latency;

/// The most bytes of a termination message Kubernetes keeps (the kubelet cuts the rest).
pub const MESSAGE_LIMIT: usize = 4096;

/// Characters of the first error kept in the message.
const ERROR_CHARS: usize = 512;

/// One hold's I/O: 4 KiB O_DIRECT random reads and writes, one at a time, from its container's
/// start to its termination.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldIo {
    /// Reads done.
    pub reads: u64,
    /// Writes done.
    pub writes: u64,
    /// I/Os that failed (setting up the file counts as one).
    pub errors: u64,
    /// The first failure's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// From the first I/O to the stop, milliseconds.
    pub elapsed_ms: f64,
    /// The slowest I/O, microseconds (kept also when the histogram is left out).
    pub max_us: u64,
    /// Every I/O's latency; absent when it did not fit in the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
}

impl HoldIo {
    /// The termination message: one JSON line of at most [`MESSAGE_LIMIT`] bytes, without the
    /// histogram when the line would be longer with it.
    pub fn message(&self) -> String {
        let line = |h: &HoldIo| serde_json::to_string(h).unwrap_or_default() + "\n";
        let mut io = self.clone();
        if let Some(e) = &mut io.first_error {
            // An error can be any length; the figures must not be cut off by it.
            *e = crate::quote::clip_to(e, ERROR_CHARS).into_owned();
        }
        let whole = line(&io);
        if whole.len() <= MESSAGE_LIMIT {
            return whole;
        }
        io.latency = None;
        line(&io)
    }

    /// I/Os done (reads and writes).
    pub fn ops(&self) -> u64 {
        self.reads + self.writes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_message_round_trips_with_its_histogram() {
        let mut h = Latency::default();
        for us in [80, 95, 120, 4_000] {
            h.record(Duration::from_micros(us));
        }
        let io = HoldIo {
            reads: 3,
            writes: 1,
            errors: 0,
            first_error: None,
            elapsed_ms: 12.5,
            max_us: 4_000,
            latency: Some(h),
        };
        let text = io.message();
        assert!(
            text.len() <= MESSAGE_LIMIT && text.ends_with('\n'),
            "{text}"
        );
        let back: HoldIo = serde_json::from_str(text.trim()).expect("parse");
        assert_eq!(back, io);
    }

    #[test]
    fn a_histogram_too_large_for_the_message_is_left_out_not_cut() {
        // 200,000 latencies spread irregularly from 1 us to ~1 s (a fixed LCG: counts that do
        // not compress away), and a long error: far over 4 KiB.
        let mut h = Latency::default();
        let mut x: u64 = 1;
        for _ in 0..200_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let exp = (x >> 60) as u32 + 1;
            h.record(Duration::from_micros((x >> 33) % (1u64 << exp) + 1));
        }
        let io = HoldIo {
            reads: 5_000,
            writes: 1_667,
            errors: 1,
            first_error: Some("x".repeat(10_000)),
            elapsed_ms: 3_000.0,
            max_us: 19_999,
            latency: Some(h),
        };
        let histogram = serde_json::to_string(&io.latency).expect("json");
        assert!(histogram.len() > MESSAGE_LIMIT, "{} bytes", histogram.len());
        let text = io.message();
        assert!(text.len() <= MESSAGE_LIMIT, "{} bytes", text.len());
        let back: HoldIo = serde_json::from_str(text.trim()).expect("parse");
        assert!(back.latency.is_none());
        assert_eq!((back.ops(), back.errors, back.max_us), (6_667, 1, 19_999));
        assert!(back.first_error.is_some_and(|e| e.len() < 600));
    }
}
