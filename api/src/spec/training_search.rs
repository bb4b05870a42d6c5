//! `training.search`: find the most accelerators per worker the storage keeps at or above the
//! AU mark (the figure storage buyers ask for), by probes that stop at the boundary: 1, 2,
//! 4, ... accelerators until one probe fails the mark, then bisection between the last pass
//! and the first fail. Each probe is a short training run (`epochsPerProbe` epochs).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::training::{TrainingShape, MAX_ACCELERATORS, MAX_EPOCHS, MAX_READER_THREADS};

/// Search for the most accelerators per worker that stay at or above the AU mark.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrainingSearch {
    /// Run the search (`acceleratorsPerWorker` is then what each probe sets).
    pub max_accelerators: bool,
    /// Epochs of each probe. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_EPOCHS))]
    pub epochs_per_probe: Option<u32>,
    /// The most accelerators per worker a probe may run. Default: as many as the worker's
    /// reader threads allow (4096 / readers), at most 1024. Never more than `samples` /
    /// workers (a rank without a sample reads nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_ACCELERATORS))]
    pub up_to: Option<u32>,
}

impl TrainingSearch {
    /// Epochs per probe.
    pub fn epochs(&self) -> u32 {
        self.epochs_per_probe.unwrap_or(1)
    }

    /// The most accelerators per worker a probe of `shape` on `workers` workers may run: as
    /// many as the reader threads allow, at most `upTo`, and no more than give every rank a
    /// sample (a rank without one reads nothing, and validation refuses such a probe).
    pub fn cap(&self, shape: &TrainingShape, workers: u32) -> u32 {
        let by_threads =
            (MAX_READER_THREADS / shape.readers.max(1) as u64).min(MAX_ACCELERATORS as u64);
        let by_samples = shape.samples / workers.max(1) as u64;
        self.up_to
            .map_or(by_threads as u32, |u| u.min(by_threads as u32))
            .min(by_samples.min(u32::MAX as u64) as u32)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TrainingPreset, TrainingSpec};
    use super::*;

    /// The cap leaves every rank of every probe a sample: unet3d's 168 samples over 4 workers
    /// are 42 accelerators each at most, whatever the reader threads would allow.
    #[test]
    fn the_cap_gives_every_rank_a_sample() {
        let shape = TrainingSpec {
            preset: Some(TrainingPreset::Unet3d),
            ..Default::default()
        }
        .shape()
        .expect("preset");
        let q = TrainingSearch {
            max_accelerators: true,
            ..Default::default()
        };
        assert_eq!(q.cap(&shape, 1), 168);
        assert_eq!(q.cap(&shape, 4), 42);
        let q = TrainingSearch {
            up_to: Some(8),
            ..q
        };
        assert_eq!(q.cap(&shape, 4), 8);
        assert_eq!(q.cap(&shape, 1000), 1, "at least one accelerator");
    }
}
