//! What a benchrun process exports on `/metrics`, as data: each family's name, type and label
//! names. The worker and the operator list their registered families in this form, so that the
//! chart's dashboard and alerts can be checked against what the code really exports
//! (`tests/helm/dashcheck/metrics.json`, checked by `tests/helm/dashcheck`).

use serde::Serialize;

/// The Prometheus type of a family: decides which series it has (`_bucket` and `le` for a
/// histogram).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    /// Only goes up (`_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets (`_bucket{le}`), `_sum` and `_count`.
    Histogram,
}

/// One registered metric family.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MetricFamily {
    /// The full name, `benchrun_...`.
    pub name: String,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Label names the code sets (not those Prometheus adds when it scrapes).
    pub labels: Vec<String>,
    /// The help text, as exported.
    pub help: String,
}

impl MetricFamily {
    /// A collector's families (the type is the caller's: a descriptor does not carry it).
    pub fn of(collector: &dyn prometheus::core::Collector, kind: MetricKind) -> Vec<Self> {
        collector
            .desc()
            .into_iter()
            .map(|d| Self {
                name: d.fq_name.clone(),
                kind,
                labels: d.variable_labels.clone(),
                help: d.help.clone(),
            })
            .collect()
    }
}
