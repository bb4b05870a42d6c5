//! The figures of a maximum-accelerators search (`Summary.training.search`): the answer, the
//! mark it was judged by, and every probe in the order it ran.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One probe: a short training run with `accelerators` accelerators per worker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchProbe {
    /// Accelerators per worker in this probe.
    pub accelerators: u32,
    /// Mean AU over the probe's epochs and accelerators, percent.
    #[serde(rename = "auMeanPercent")]
    pub au_mean_percent: f64,
    /// Lowest AU of an accelerator in an epoch, percent (what the mark is judged on).
    #[serde(rename = "auMinPercent")]
    pub au_min_percent: f64,
    /// Samples per second over the probe's epochs.
    pub samples_per_sec: f64,
    /// MiB per second over the probe's epochs.
    pub mib_per_sec: f64,
    /// Whether every epoch of the probe ran to its end.
    pub complete: bool,
    /// Whether the lowest AU was at or above the mark.
    pub passed: bool,
    /// The probe's epochs' length (each the longest accelerator's wall time), seconds.
    pub seconds: f64,
}

/// A maximum-accelerators search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchFigures {
    /// The most accelerators per worker whose probe passed the mark, with a failed probe (or
    /// the cap) above it; 0 when even one accelerator falls below the mark.
    pub max_accelerators: u32,
    /// The AU mark, percent.
    pub mark: f64,
    /// The most accelerators a probe could run (`upTo`, or the reader-thread bound).
    pub cap: u32,
    /// Whether the answer is the cap (every probe up to it passed: the storage may keep
    /// more busy than one worker can emulate).
    pub at_cap: bool,
    /// Every probe, in the order it ran.
    pub probes: Vec<SearchProbe>,
}
