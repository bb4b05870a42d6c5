//! Training workloads: epochs of a data loader feeding emulated accelerators, shaped like
//! MLPerf Storage's (DLIO's) workloads. Shaped like them, not an MLPerf submission.
//!
//! A `training` section replaces the op mix's random reads: the dataset is `samples` samples
//! of about `sampleSize` bytes, stored one per file (`samplesPerFile: 1`) or as record shards
//! of many samples read by range; each epoch reads every sample once, in an order shuffled
//! per epoch from `seed` and split over every accelerator of the run, in batches of
//! `batchSize`, by `readers` threads per accelerator with `prefetch` batches queued each.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{OpKind, TargetUri, Workload};
use crate::units::{ByteSize, HumanDuration};

/// The most samples a dataset may have (a permutation costs no memory per sample, and the
/// engine none either; the bound keeps a typo from meaning weeks of prepare).
pub const MAX_SAMPLES: u64 = 1 << 34;
/// The most samples a record shard may hold.
pub const MAX_SAMPLES_PER_FILE: u32 = 1 << 20;
/// The most emulated accelerators per worker.
pub const MAX_ACCELERATORS: u32 = 1024;
/// The most reader threads per accelerator.
pub const MAX_READERS: u32 = 256;
/// The most reader threads of one worker (accelerators x readers): each is an OS thread.
pub const MAX_READER_THREADS: u64 = 4096;
/// The most batches queued per reader.
pub const MAX_PREFETCH: u32 = 64;
/// The most samples per batch.
pub const MAX_BATCH: u32 = 1 << 16;
/// The most epochs.
pub const MAX_EPOCHS: u32 = 10_000;
/// The largest sample.
pub const MAX_SAMPLE_SIZE: u64 = 1 << 30;

/// A preset named after an MLPerf Storage workload, with DLIO's published figures for an
/// A100 (`dlio_benchmark/configs/workload/*_a100.yaml`); any key given overrides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TrainingPreset {
    /// 3D U-Net: 168 samples of 146,600,628 B (stdev 68,341,808 B), one per file (NPZ),
    /// batches of 7, 4 readers, 636 ms of compute per step, AU pass mark 90%.
    Unet3d,
    /// ResNet-50: record shards (TFRecord) of 1,251 samples of 114,660 B, 1,024 shards,
    /// batches of 400, 8 readers, 435 ms per step, AU pass mark 90%.
    Resnet50,
    /// CosmoFlow: 524,288 samples of 2,828,486 B (stdev 71,311 B), one per file, batches
    /// of 1, 4 readers, 5.51 ms per step, AU pass mark 70%.
    Cosmoflow,
}

/// A training workload (see the module docs). Every key but `preset` overrides the preset;
/// without a preset, `samples`, `sampleSize` and `computeTime` are required.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrainingSpec {
    /// Start from an MLPerf Storage workload's figures: `unet3d`, `resnet50`, `cosmoflow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<TrainingPreset>,
    /// Samples in the dataset (all workers together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_SAMPLES))]
    pub samples: Option<u64>,
    /// Mean size of a sample (DLIO `record_length_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maximum" = MAX_SAMPLE_SIZE))]
    pub sample_size: Option<ByteSize>,
    /// Standard deviation of sample sizes (DLIO `record_length_bytes_stdev`); sizes are
    /// normal, cut to 4KiB .. mean + 3 stdev, fixed per sample by `seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_size_stdev: Option<ByteSize>,
    /// Samples per file: 1 stores each sample in a file (object) of its own; more stores
    /// record shards whose samples are read by range (DLIO `num_samples_per_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_SAMPLES_PER_FILE))]
    pub samples_per_file: Option<u32>,
    /// Samples per step of each accelerator (DLIO `batch_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_BATCH))]
    pub batch_size: Option<u32>,
    /// Reader threads per accelerator (DLIO `read_threads`, PyTorch `num_workers`): reader
    /// i loads batches i, i + readers, ... of its accelerator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_READERS))]
    pub readers: Option<u32>,
    /// Batches each reader loads ahead (PyTorch `prefetch_factor`, default 2): a bounded
    /// queue, so memory stays accelerators x readers x prefetch batches' figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_PREFETCH))]
    pub prefetch: Option<u32>,
    /// Emulated accelerators on each worker (DLIO's ranks per node). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_ACCELERATORS))]
    pub accelerators_per_worker: Option<u32>,
    /// Time an accelerator computes per step once its batch is there (DLIO
    /// `computation_time`), e.g. `636ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_time: Option<HumanDuration>,
    /// Spread of the compute time, in percent of it: each step computes uniformly within
    /// `computeTime` +- this. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 100.0))]
    pub compute_spread_percent: Option<f64>,
    /// Epochs (passes over the dataset). Default 5 with a preset, else 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_EPOCHS))]
    pub epochs: Option<u32>,
    /// The AU pass mark, in percent: the run passes when every epoch's lowest accelerator
    /// utilization is at least this. Default: the preset's (90, or 70 for cosmoflow).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "minAU")]
    #[schemars(range(min = 0.0, max = 100.0))]
    pub min_au: Option<f64>,
    /// Local files: drop the dataset from the page cache (`posix_fadvise(DONTNEED)`) before
    /// each epoch, as MLPerf Storage requires unless the dataset is 5x the clients' RAM.
    /// Default true. Object storage has no client page cache to drop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_cache: Option<bool>,
    /// Search for the most accelerators per worker at or above the AU mark instead of one
    /// run: `{maxAccelerators: true, epochsPerProbe: 1, upTo: 64}` (docs/TRAINING.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<super::training_search::TrainingSearch>,
}

/// A training workload with every figure resolved (preset, then the keys given).
#[derive(Clone, Debug, PartialEq)]
pub struct TrainingShape {
    /// Samples in the dataset.
    pub samples: u64,
    /// Mean sample size.
    pub sample_size: u64,
    /// Standard deviation of sample sizes.
    pub sample_size_stdev: u64,
    /// Samples per file.
    pub samples_per_file: u32,
    /// Samples per step.
    pub batch_size: u32,
    /// Reader threads per accelerator.
    pub readers: u32,
    /// Batches queued per reader.
    pub prefetch: u32,
    /// Accelerators per worker.
    pub accelerators: u32,
    /// Compute per step.
    pub compute: std::time::Duration,
    /// Spread of the compute time, percent.
    pub compute_spread_percent: f64,
    /// Epochs.
    pub epochs: u32,
    /// AU pass mark, percent, if any.
    pub min_au: Option<f64>,
    /// Drop the page cache before each epoch (local files).
    pub drop_cache: bool,
}

impl TrainingShape {
    /// Files in the dataset.
    pub fn files(&self) -> u64 {
        self.samples.div_ceil(self.samples_per_file as u64)
    }
}

/// A preset's figures (everything but `preset`).
fn preset(p: TrainingPreset) -> TrainingShape {
    let ms = std::time::Duration::from_micros;
    let base = TrainingShape {
        samples: 0,
        sample_size: 0,
        sample_size_stdev: 0,
        samples_per_file: 1,
        batch_size: 1,
        readers: 4,
        prefetch: 2,
        accelerators: 1,
        compute: ms(0),
        compute_spread_percent: 0.0,
        epochs: 5,
        min_au: Some(90.0),
        drop_cache: true,
    };
    match p {
        TrainingPreset::Unet3d => TrainingShape {
            samples: 168,
            sample_size: 146_600_628,
            sample_size_stdev: 68_341_808,
            batch_size: 7,
            readers: 4,
            compute: ms(636_000),
            ..base
        },
        TrainingPreset::Resnet50 => TrainingShape {
            samples: 1024 * 1251,
            sample_size: 114_660,
            samples_per_file: 1251,
            batch_size: 400,
            readers: 8,
            compute: ms(435_000),
            ..base
        },
        TrainingPreset::Cosmoflow => TrainingShape {
            samples: 524_288,
            sample_size: 2_828_486,
            sample_size_stdev: 71_311,
            batch_size: 1,
            readers: 4,
            compute: ms(5_510),
            min_au: Some(70.0),
            ..base
        },
    }
}

impl TrainingSpec {
    /// The figures the run uses: the preset's, overridden by the keys given. `Err` names
    /// a required key that is missing (no preset gives it).
    pub fn shape(&self) -> Result<TrainingShape, (&'static str, String)> {
        let mut s = match self.preset {
            Some(p) => preset(p),
            None => TrainingShape {
                epochs: 1,
                min_au: None,
                ..preset(TrainingPreset::Unet3d)
            },
        };
        if self.preset.is_none() {
            let need = |v: bool, key: &'static str| {
                if v {
                    Ok(())
                } else {
                    Err((
                        key,
                        format!("give `{key}` or a `preset` (unet3d, resnet50, cosmoflow)"),
                    ))
                }
            };
            need(self.samples.is_some(), "samples")?;
            need(self.sample_size.is_some(), "sampleSize")?;
            need(self.compute_time.is_some(), "computeTime")?;
            s.sample_size_stdev = 0;
            s.batch_size = 1;
        }
        macro_rules! over {
            ($field:ident, $val:expr) => {
                if let Some(v) = $val {
                    s.$field = v;
                }
            };
        }
        over!(samples, self.samples);
        over!(sample_size, self.sample_size.map(|b| b.0));
        over!(sample_size_stdev, self.sample_size_stdev.map(|b| b.0));
        over!(samples_per_file, self.samples_per_file);
        over!(batch_size, self.batch_size);
        over!(readers, self.readers);
        over!(prefetch, self.prefetch);
        over!(accelerators, self.accelerators_per_worker);
        over!(compute, self.compute_time.map(|d| d.0));
        over!(compute_spread_percent, self.compute_spread_percent);
        over!(epochs, self.epochs);
        over!(drop_cache, self.drop_cache);
        if self.min_au.is_some() {
            s.min_au = self.min_au;
        }
        Ok(s)
    }
}

/// Why `ranks` ranks (`accelerators` per worker x `workers`) over `samples` samples is refused:
/// each epoch's order is dealt out one sample per rank in turn, so a rank past the last
/// sample reads nothing and its AU is 0% whatever the storage.
fn ranks_message(accelerators: u64, workers: u64, samples: u64) -> String {
    format!(
        "{accelerators} accelerators per worker x {workers} workers = {} ranks, more than the {samples} samples (training.samples): a rank without a sample reads nothing and its AU is 0% whatever the storage; give at most {samples} ranks or more samples",
        accelerators * workers
    )
}

impl TrainingSpec {
    /// The check that needs the run's worker count (`workers`: `workers.count`, or the
    /// nodes of a `perNode` run, known to the operator once placed and to each worker at its
    /// start): every rank has at least one sample. `Err` is (field, why).
    pub fn check_workers(&self, workers: u32) -> Result<(), (&'static str, String)> {
        let Ok(s) = self.shape() else {
            // A missing key is named by the workload's validation.
            return Ok(());
        };
        let (acc, n) = (s.accelerators as u64, workers.max(1) as u64);
        if acc * n > s.samples {
            return Err((
                "training.acceleratorsPerWorker",
                ranks_message(acc, n, s.samples),
            ));
        }
        Ok(())
    }
}

/// The checks of a training workload, pushed to `bad`.
pub(super) fn validate(w: &Workload, uri: Option<&TargetUri>, bad: &mut dyn FnMut(&str, String)) {
    let Some(t) = &w.training else {
        return;
    };
    if w.ops.iter().any(|o| o.weight > 0 && o.op != OpKind::Get) {
        bad(
            "ops",
            "a training workload reads its dataset: give `ops: [{op: get}]` only".into(),
        );
    }
    if w.block.is_some() {
        bad("training", "give `training` or `block`, not both".into());
    }
    if w.total_ops.is_some() {
        bad(
            "totalOps",
            "a training run's length is `training.epochs`; `duration` may cap it".into(),
        );
    }
    if w.warmup.is_some() {
        bad(
            "warmup",
            "a training run has no warm-up: every epoch is measured, as DLIO's are (the page cache is dropped before each instead, `training.dropCache`)".into(),
        );
    }
    let s = match t.shape() {
        Ok(s) => s,
        Err((key, msg)) => {
            bad(&format!("training.{key}"), msg);
            return;
        }
    };
    let mut range = |key: &str, v: u64, min: u64, max: u64| {
        if v < min || v > max {
            bad(
                &format!("training.{key}"),
                format!("{v} is outside {min} .. {max}"),
            );
        }
    };
    range("samples", s.samples, 1, MAX_SAMPLES);
    range("sampleSize", s.sample_size, 1, MAX_SAMPLE_SIZE);
    range("sampleSizeStdev", s.sample_size_stdev, 0, MAX_SAMPLE_SIZE);
    range(
        "samplesPerFile",
        s.samples_per_file as u64,
        1,
        MAX_SAMPLES_PER_FILE as u64,
    );
    range("batchSize", s.batch_size as u64, 1, MAX_BATCH as u64);
    range("readers", s.readers as u64, 1, MAX_READERS as u64);
    range("prefetch", s.prefetch as u64, 1, MAX_PREFETCH as u64);
    range(
        "acceleratorsPerWorker",
        s.accelerators as u64,
        1,
        MAX_ACCELERATORS as u64,
    );
    range("epochs", s.epochs as u64, 1, MAX_EPOCHS as u64);
    if s.accelerators as u64 * s.readers as u64 > MAX_READER_THREADS {
        bad(
            "training.readers",
            format!(
                "acceleratorsPerWorker x readers is {}, above the {MAX_READER_THREADS} reader threads a worker may run",
                s.accelerators as u64 * s.readers as u64
            ),
        );
    }
    if s.compute > std::time::Duration::from_secs(3600) {
        bad("training.computeTime", "must be at most 1h".into());
    }
    if let Some(m) = s.min_au.filter(|m| *m > 0.0 && s.compute.is_zero()) {
        bad(
            "training.computeTime",
            format!("0s beside an AU mark of {m}% (minAU, or the preset's): AU is compute time over step time, so with no compute every epoch's AU is 0% and the mark can never be met: give a computeTime above 0, or minAU: 0 to measure the reads alone"),
        );
    }
    if s.samples < s.accelerators as u64 {
        bad(
            "training.acceleratorsPerWorker",
            ranks_message(s.accelerators as u64, 1, s.samples),
        );
    }
    for (given, key, ignored) in [
        (
            w.rate_limit.is_some(),
            "rateLimit",
            "its pace is set by computeTime, batchSize and the readers",
        ),
        (
            w.error_budget.is_some(),
            "errorBudget",
            "its read errors are counted in the summary and never stop it",
        ),
    ] {
        if given {
            bad(key, format!("not applied to a training run: {ignored}"));
        }
    }
    if let Some(q) = t.search.as_ref().filter(|q| q.max_accelerators) {
        if s.min_au.is_none() {
            bad(
                "training.search",
                "the search looks for the most accelerators at or above the AU mark: give `minAU` or a `preset`".into(),
            );
        }
        if !(1..=MAX_EPOCHS).contains(&q.epochs()) {
            bad(
                "training.search.epochsPerProbe",
                format!("{} is outside 1 .. {MAX_EPOCHS}", q.epochs()),
            );
        }
        if let Some(u) = q.up_to {
            if !(1..=MAX_ACCELERATORS).contains(&u) {
                bad(
                    "training.search.upTo",
                    format!("{u} is outside 1 .. {MAX_ACCELERATORS}"),
                );
            } else if u as u64 * s.readers as u64 > MAX_READER_THREADS {
                bad(
                    "training.search.upTo",
                    format!(
                        "upTo x readers is {}, above the {MAX_READER_THREADS} reader threads a worker may run",
                        u as u64 * s.readers as u64
                    ),
                );
            }
        }
    }
    if !(0.0..=100.0).contains(&s.compute_spread_percent) {
        bad(
            "training.computeSpreadPercent",
            "must be within 0 .. 100".into(),
        );
    }
    if let Some(m) = s.min_au {
        if !(0.0..=100.0).contains(&m) {
            bad("training.minAU", "must be a percentage, 0 .. 100".into());
        }
    }
    if let Some(TargetUri::Direct { .. }) = uri {
        if s.samples_per_file > 1 {
            bad(
                "training.samplesPerFile",
                "record shards are read by byte range, which direct:// (aligned O_DIRECT) does not do: use file:// or object storage".into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(yaml: &str) -> Result<Workload, crate::spec::SpecError> {
        Workload::from_yaml(yaml)
    }

    #[test]
    fn a_preset_resolves_and_keys_override_it() {
        let t = TrainingSpec {
            preset: Some(TrainingPreset::Unet3d),
            batch_size: Some(3),
            ..Default::default()
        };
        let s = t.shape().unwrap();
        assert_eq!(
            (s.samples, s.sample_size, s.batch_size),
            (168, 146_600_628, 3)
        );
        assert_eq!(s.compute, std::time::Duration::from_millis(636));
        assert_eq!(s.min_au, Some(90.0));
        let r = TrainingSpec {
            preset: Some(TrainingPreset::Resnet50),
            ..Default::default()
        }
        .shape()
        .unwrap();
        assert_eq!((r.samples_per_file, r.files()), (1251, 1024));
    }

    /// Every rank of the run (accelerators x workers) needs a sample: checked for the worker
    /// count the run has, which the operator and each worker know.
    #[test]
    fn every_rank_of_the_run_has_a_sample() {
        let t = TrainingSpec {
            samples: Some(12),
            sample_size: Some(ByteSize(4096)),
            compute_time: Some(HumanDuration(std::time::Duration::from_millis(1))),
            accelerators_per_worker: Some(4),
            ..Default::default()
        };
        assert_eq!(t.check_workers(3), Ok(()));
        let (field, why) = t.check_workers(4).unwrap_err();
        assert_eq!(field, "training.acceleratorsPerWorker");
        assert!(
            why.starts_with(
                "4 accelerators per worker x 4 workers = 16 ranks, more than the 12 samples"
            ),
            "{why}"
        );
    }

    #[test]
    fn without_a_preset_the_shape_is_required() {
        let e = w("target: file:///tmp/x\nops: [{op: get}]\ntraining: {samples: 10}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("training.sampleSize"), "{e}");
        let ok = w("target: file:///tmp/x\nops: [{op: get}]\ntraining: {samples: 10, sampleSize: 4KiB, computeTime: 10ms}\n");
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn bad_training_workloads_are_refused_by_field() {
        for (yaml, field) in [
            ("ops: [{op: put}]\ntraining: {preset: unet3d}", "ops"),
            ("ops: [{op: get}]\ntotalOps: 5\ntraining: {preset: unet3d}", "totalOps"),
            (
                "ops: [{op: get}]\nduration: 10s\nwarmup: 2s\ntraining: {preset: unet3d}",
                "warmup: a training run has no warm-up",
            ),
            ("ops: [{op: get}]\ntraining: {preset: unet3d, readers: 0}", "training.readers"),
            (
                "ops: [{op: get}]\ntraining: {preset: unet3d, acceleratorsPerWorker: 1000, readers: 200}",
                "training.readers",
            ),
            ("ops: [{op: get}]\ntraining: {preset: unet3d, minAU: 120}", "minAU"),
            (
                "ops: [{op: get}]\ntraining: {samples: 9, sampleSize: 4KiB, computeTime: 1ms, search: {maxAccelerators: true}}",
                "training.search",
            ),
            (
                "ops: [{op: get}]\ntraining: {preset: unet3d, search: {maxAccelerators: true, upTo: 2000}}",
                "training.search.upTo",
            ),
            (
                "ops: [{op: get}]\ntraining: {preset: unet3d, search: {maxAccelerators: true, epochsPerProbe: 0}}",
                "training.search.epochsPerProbe",
            ),
        ] {
            let e = w(&format!("target: file:///tmp/x\n{yaml}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{yaml}: {e}");
        }
        // A mark beside no compute can never be met; minAU: 0 measures the reads alone.
        let zero = "ops: [{op: get}]\ntraining: {preset: unet3d, computeTime: 0s";
        for extra in ["", ", minAU: 50"] {
            let e = w(&format!("target: file:///tmp/x\n{zero}{extra}}}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("training.computeTime: 0s beside an AU mark"),
                "{e}"
            );
        }
        assert!(w(&format!("target: file:///tmp/x\n{zero}, minAU: 0}}\n")).is_ok());
        // More ranks on one worker than samples; rateLimit and errorBudget are not applied.
        for (yaml, field) in [
            (
                "training: {samples: 4, sampleSize: 4KiB, computeTime: 1ms, acceleratorsPerWorker: 8}",
                "training.acceleratorsPerWorker: 8 accelerators per worker x 1 workers = 8 ranks, more than the 4 samples",
            ),
            ("rateLimit: 100\ntraining: {preset: unet3d}", "rateLimit: not applied to a training run"),
            (
                "errorBudget: {maxErrors: 5}\ntraining: {preset: unet3d}",
                "errorBudget: not applied to a training run",
            ),
        ] {
            let e = w(&format!("target: file:///tmp/x\nops: [{{op: get}}]\n{yaml}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{yaml}: {e}");
        }
        let e = w("target: direct:///tmp/x\nops: [{op: get}]\ntraining: {preset: resnet50}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("training.samplesPerFile"), "{e}");
    }
}
