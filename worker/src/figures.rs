//! The figures `compare` and `report` show for one row (one op of a summary, or all its ops
//! together), named once so both commands agree on names, units and which direction is
//! better.

use serde::Serialize;

use crate::spec::OpKind;
use crate::stats::{OpReport, Summary};

/// One figure of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Metric {
    /// Operations per second.
    OpsPerSec,
    /// Payload MiB (2^20 bytes) per second.
    MibPerSec,
    /// Payload MB (10^6 bytes) per second: `--units decimal` shows this instead of MiB/s.
    MbPerSec,
    /// Median latency, ms.
    P50Ms,
    /// 90th percentile latency, ms.
    P90Ms,
    /// 95th percentile latency, ms.
    P95Ms,
    /// 99th percentile latency, ms.
    P99Ms,
    /// 99.9th percentile latency, ms.
    P999Ms,
    /// 99.99th percentile latency, ms.
    P9999Ms,
    /// Largest latency, ms.
    MaxMs,
    /// 99th percentile latency of all operations, failed ones included, ms: shown by
    /// `compare` only where either side has failed ops' latency (elsewhere it is `p99`).
    AllP99Ms,
    /// GET: median time to first byte, ms (from the op's start, as its latency).
    TtfbP50Ms,
    /// GET: 99th percentile time to first byte, ms.
    TtfbP99Ms,
    /// Failed operations.
    Errors,
    /// Requests (or syscalls) per operation.
    RequestsPerOp,
    /// Client CPU seconds (user + system) per GiB moved: a process figure, so only on the
    /// row of all ops.
    CpuSecondsPerGib,
    /// Minor page faults of the client process (report 003's buffered vs O_DIRECT column):
    /// a process figure, so only on the row of all ops.
    MinorFaults,
    /// Client CPU use in percent of one core (CPU seconds over the measured stage, all
    /// workers together): a process figure, so only on the row of all ops.
    CpuPercent,
}

/// How byte rates are shown: binary (MiB/s, 2^20 bytes, the default) or decimal (MB/s, 10^6
/// bytes, as storage vendors and some reports quote them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Units {
    /// MiB/s: 2^20 bytes per second.
    #[default]
    Binary,
    /// MB/s: 10^6 bytes per second.
    Decimal,
}

impl Units {
    /// The byte-rate heading: `MiB/s` or `MB/s`.
    pub fn rate_label(self) -> &'static str {
        match self {
            Units::Binary => "MiB/s",
            Units::Decimal => "MB/s",
        }
    }

    /// A rate in MiB/s (as summaries keep it) in these units.
    pub fn rate(self, mib_per_sec: f64) -> f64 {
        match self {
            Units::Binary => mib_per_sec,
            Units::Decimal => mib_per_sec * (1u64 << 20) as f64 / 1e6,
        }
    }

    /// The byte-rate figure of these units.
    pub fn rate_metric(self) -> Metric {
        match self {
            Units::Binary => Metric::MibPerSec,
            Units::Decimal => Metric::MbPerSec,
        }
    }
}

impl Metric {
    /// Every figure, in table order, with the byte rate in binary units (see [`Metric::all`]).
    pub const ALL: [Metric; 16] = [
        Metric::OpsPerSec,
        Metric::MibPerSec,
        Metric::P50Ms,
        Metric::P90Ms,
        Metric::P95Ms,
        Metric::P99Ms,
        Metric::P999Ms,
        Metric::P9999Ms,
        Metric::MaxMs,
        Metric::TtfbP50Ms,
        Metric::TtfbP99Ms,
        Metric::Errors,
        Metric::RequestsPerOp,
        Metric::CpuSecondsPerGib,
        Metric::CpuPercent,
        Metric::MinorFaults,
    ];

    /// Every figure, in table order, with the byte rate in `units`.
    pub fn all(units: Units) -> Vec<Metric> {
        Metric::ALL
            .into_iter()
            .map(|m| {
                if m == Metric::MibPerSec {
                    units.rate_metric()
                } else {
                    m
                }
            })
            .collect()
    }

    /// Column heading.
    pub fn label(self) -> &'static str {
        match self {
            Metric::OpsPerSec => "ops/s",
            Metric::MibPerSec => "MiB/s",
            Metric::MbPerSec => "MB/s",
            Metric::P50Ms => "p50 ms",
            Metric::P90Ms => "p90 ms",
            Metric::P95Ms => "p95 ms",
            Metric::P99Ms => "p99 ms",
            Metric::P999Ms => "p99.9 ms",
            Metric::P9999Ms => "p99.99 ms",
            Metric::MaxMs => "max ms",
            Metric::AllP99Ms => "all-ops p99 ms",
            Metric::TtfbP50Ms => "TTFB p50 ms",
            Metric::TtfbP99Ms => "TTFB p99 ms",
            Metric::Errors => "errors",
            Metric::RequestsPerOp => "req/op",
            Metric::CpuSecondsPerGib => "CPU s/GiB",
            Metric::MinorFaults => "minor faults",
            Metric::CpuPercent => "CPU %",
        }
    }

    /// Whether a larger value is an improvement (throughput) or a regression (latency,
    /// errors, requests, CPU, faults).
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::OpsPerSec | Metric::MibPerSec | Metric::MbPerSec
        )
    }

    /// Decimals shown; latencies in ms get three (microsecond resolution).
    pub fn decimals(self) -> usize {
        match self {
            Metric::OpsPerSec | Metric::MibPerSec | Metric::CpuPercent => 1,
            // Two: a decimal rate is asked for to match a figure quoted elsewhere (1 MiB/s
            // is 1.05 MB/s), where one decimal would round the difference away.
            Metric::MbPerSec => 2,
            Metric::P50Ms
            | Metric::P90Ms
            | Metric::P95Ms
            | Metric::P99Ms
            | Metric::P999Ms
            | Metric::P9999Ms
            | Metric::MaxMs
            | Metric::AllP99Ms
            | Metric::TtfbP50Ms
            | Metric::TtfbP99Ms => 3,
            Metric::Errors | Metric::MinorFaults => 0,
            Metric::RequestsPerOp | Metric::CpuSecondsPerGib => 2,
        }
    }

    /// `value` with this metric's decimals.
    pub fn format(self, value: f64) -> String {
        format!("{value:.*}", self.decimals())
    }

    /// Whether the figure is time to first byte (GET's only).
    pub fn is_ttfb(self) -> bool {
        matches!(self, Metric::TtfbP50Ms | Metric::TtfbP99Ms)
    }

    /// Whether the figure belongs to the process (only on the row of all ops).
    pub fn process_wide(self) -> bool {
        matches!(
            self,
            Metric::CpuSecondsPerGib | Metric::MinorFaults | Metric::CpuPercent
        )
    }
}

/// Which ops a row covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// One op.
    Op(OpKind),
    /// Every op of the summary together (histograms added, so its percentiles are exact).
    All,
}

impl Scope {
    /// The row's name: the op, or `all`.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Op(op) => op.as_str(),
            Scope::All => "all",
        }
    }
}

/// The rows a summary has: one per op, then all ops together.
pub fn scopes(s: &Summary) -> Vec<Scope> {
    let mut out: Vec<Scope> = s.ops.keys().map(|op| Scope::Op(*op)).collect();
    out.push(Scope::All);
    out
}

/// The figures of one row.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    /// The op's (or all ops') report.
    pub report: OpReport,
    /// `None` when the summary has no CPU time or no bytes moved (nothing to divide by).
    pub cpu_seconds_per_gib: Option<f64>,
    /// Minor page faults of the client process (all ops only).
    pub minor_faults: u64,
    /// Client CPU in percent of one core; `None` without CPU time.
    pub cpu_percent: Option<f64>,
}

impl Figures {
    /// The row `scope` of `s`, or `None` if `s` has no such op.
    pub fn of(s: &Summary, scope: Scope) -> Option<Figures> {
        let report = match scope {
            Scope::Op(op) => s.ops.get(&op)?.report(s.elapsed_seconds),
            Scope::All => s.total().report(s.elapsed_seconds),
        };
        Some(Figures {
            report,
            // No CPU time recorded: no figure rather than a misleading 0.
            cpu_seconds_per_gib: s.cpu_seconds_per_gib().filter(|v| *v > 0.0),
            minor_faults: s.process.minor_faults,
            cpu_percent: s.cpu_percent_of_a_core(),
        })
    }

    /// One figure, `None` where it does not apply (a process figure on an op's row, TTFB on
    /// a row without GETs or on all ops, where it would be GET's alone).
    pub fn get(&self, m: Metric, scope: Scope) -> Option<f64> {
        let r = &self.report;
        if m.process_wide() && scope != Scope::All {
            return None;
        }
        if m.is_ttfb() && scope == Scope::All {
            return None;
        }
        Some(match m {
            Metric::OpsPerSec => r.ops_per_sec,
            Metric::MibPerSec => r.mib_per_sec,
            Metric::MbPerSec => Units::Decimal.rate(r.mib_per_sec),
            Metric::P50Ms => r.p50_ms,
            Metric::P90Ms => r.p90_ms,
            Metric::P95Ms => r.p95_ms,
            Metric::P99Ms => r.p99_ms,
            Metric::P999Ms => r.p999_ms,
            Metric::P9999Ms => r.p9999_ms,
            Metric::MaxMs => r.max_ms,
            // Nothing failed: all ops are the successful ones.
            Metric::AllP99Ms => r.all_p99_ms.unwrap_or(r.p99_ms),
            Metric::TtfbP50Ms => return r.ttfb_p50_ms,
            Metric::TtfbP99Ms => return r.ttfb_p99_ms,
            Metric::Errors => r.errors as f64,
            Metric::RequestsPerOp => r.requests_per_op,
            Metric::CpuSecondsPerGib => return self.cpu_seconds_per_gib,
            Metric::MinorFaults => self.minor_faults as f64,
            Metric::CpuPercent => return self.cpu_percent,
        })
    }
}

// One definition for every table (the operator's too).
pub use benchrun_api::change::{percent_text as percent, relative};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mebibyte_per_second_is_1_05_decimal_megabytes() {
        assert_eq!(Units::Binary.rate(1.0), 1.0);
        assert!((Units::Decimal.rate(1.0) - 1.048576).abs() < 1e-12);
        assert_eq!(Metric::MbPerSec.format(Units::Decimal.rate(1.0)), "1.05");
        assert_eq!(Metric::MbPerSec.label(), "MB/s");
        let all = Metric::all(Units::Decimal);
        assert!(all.contains(&Metric::MbPerSec) && !all.contains(&Metric::MibPerSec));
        assert_eq!(Metric::all(Units::Binary), Metric::ALL);
    }
}
