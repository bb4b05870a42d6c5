//! The per-endpoint part of `compare` (`storage.endpoints`): for each gateway URL in both
//! summaries, its ops/s, p50, p99 and errors as deltas, and its latency distribution tested
//! whole with the same Kolmogorov-Smirnov test as an op's ([`super::ks`]). An endpoint of
//! only one summary is listed as such. Throughput is not tested per endpoint: the per-second
//! timeline is kept for the run, not per endpoint.

use serde::Serialize;

use super::{ks, Change, Delta};
use crate::figures::{relative, Metric};
use crate::stats::{OpStats, Summary};

/// The figures compared per endpoint, in this order.
pub const METRICS: [Metric; 4] = [
    Metric::OpsPerSec,
    Metric::P50Ms,
    Metric::P99Ms,
    Metric::Errors,
];

/// One endpoint (all its ops together) compared.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointRow {
    /// The endpoint's URL.
    pub endpoint: String,
    /// `a` or `b` when only that summary has the endpoint (then nothing is compared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only_in: Option<String>,
    /// The figures of [`METRICS`] compared.
    pub deltas: Vec<Delta>,
    /// Latency distributions compared whole; `None` when either side has no latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_test: Option<ks::KsTest>,
}

/// One figure of an endpoint's ops over `elapsed` seconds.
fn figure(s: &OpStats, elapsed: f64, m: Metric) -> f64 {
    let r = s.report(elapsed);
    match m {
        Metric::OpsPerSec => r.ops_per_sec,
        Metric::P50Ms => r.p50_ms,
        Metric::P99Ms => r.p99_ms,
        _ => r.errors as f64,
    }
}

/// The endpoints of `a` and `b` compared, in URL order: empty when neither summary has any
/// (a run through one endpoint records none).
pub fn rows(a: &Summary, b: &Summary) -> Vec<EndpointRow> {
    let mut urls: Vec<&String> = a.endpoints.keys().chain(b.endpoints.keys()).collect();
    urls.sort();
    urls.dedup();
    urls.into_iter()
        .map(|url| {
            let mut row = EndpointRow {
                endpoint: url.clone(),
                only_in: None,
                deltas: vec![],
                latency_test: None,
            };
            let (Some(ea), Some(eb)) = (a.endpoints.get(url), b.endpoints.get(url)) else {
                row.only_in = Some(
                    if a.endpoints.contains_key(url) {
                        "a"
                    } else {
                        "b"
                    }
                    .into(),
                );
                return row;
            };
            row.deltas = METRICS
                .iter()
                .map(|m| {
                    let va = figure(ea, a.elapsed_seconds, *m);
                    let vb = figure(eb, b.elapsed_seconds, *m);
                    Delta {
                        metric: *m,
                        a: va,
                        b: vb,
                        delta: vb - va,
                        relative: relative(va, vb),
                        change: Change::of(*m, va, vb),
                    }
                })
                .collect();
            row.latency_test = ks::two_sample(&ea.latency.0, &eb.latency.0);
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::compare::tests::summary;

    fn ep(count: u64, errors: u64, latencies_us: impl IntoIterator<Item = u64>) -> OpStats {
        let mut s = OpStats {
            count,
            errors,
            requests: count,
            ..Default::default()
        };
        for us in latencies_us {
            s.latency.record(Duration::from_micros(us));
        }
        s
    }

    #[test]
    fn endpoints_of_both_sides_are_compared_and_the_others_listed() {
        let mut a = summary(&[10], &[1], 2.0);
        let mut b = summary(&[10], &[1], 2.0);
        assert!(rows(&a, &b).is_empty(), "no endpoints, no rows");
        a.endpoints = [
            ("https://gw-1".to_string(), ep(100, 0, 1..=100)),
            ("https://gw-2".to_string(), ep(100, 0, 1..=100)),
        ]
        .into();
        b.endpoints = [
            ("https://gw-1".to_string(), ep(100, 0, 1..=100)),
            // Slower and failing: 50 ops, 2 of them errors, at 101..=148 us.
            ("https://gw-3".to_string(), ep(50, 2, 101..=148)),
        ]
        .into();
        let r = rows(&a, &b);
        assert_eq!(
            r.iter()
                .map(|r| (r.endpoint.as_str(), r.only_in.as_deref()))
                .collect::<Vec<_>>(),
            [
                ("https://gw-1", None),
                ("https://gw-2", Some("a")),
                ("https://gw-3", Some("b"))
            ]
        );
        let same = &r[0];
        assert!(same.deltas.iter().all(|d| d.change == Change::Same));
        let ks = same.latency_test.as_ref().unwrap();
        assert_eq!((ks.n, ks.m, ks.d), (100, 100, 0.0));
        assert!(r[1].deltas.is_empty() && r[1].latency_test.is_none());

        // The same URL slower in B: worse on every figure, and a significant KS test.
        b.endpoints
            .insert("https://gw-2".into(), ep(50, 2, 101..=148));
        let r = rows(&a, &b);
        let gw2 = &r[1];
        assert_eq!(gw2.only_in, None);
        let d = |m: Metric| gw2.deltas.iter().find(|d| d.metric == m).unwrap().clone();
        assert_eq!(
            (d(Metric::OpsPerSec).a, d(Metric::OpsPerSec).b),
            (50.0, 25.0)
        );
        assert_eq!(d(Metric::OpsPerSec).relative, Some(-0.5));
        assert_eq!((d(Metric::Errors).a, d(Metric::Errors).b), (0.0, 2.0));
        assert_eq!(d(Metric::Errors).change, Change::Worse);
        assert_eq!((d(Metric::P50Ms).a, d(Metric::P50Ms).b), (0.050, 0.124));
        assert_eq!(d(Metric::P99Ms).change, Change::Worse);
        let ks = gw2.latency_test.as_ref().unwrap();
        assert_eq!((ks.n, ks.m, ks.d), (100, 48, 1.0));
        assert!(ks.second_slower && ks.p_value < super::super::STRONG);
    }
}
