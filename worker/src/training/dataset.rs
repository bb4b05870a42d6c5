//! The dataset's shape: which file (object) holds each sample, at which offset, of which
//! size; its keys; and the prepare stage that writes it (or reuses it when present).
//!
//! Sample sizes are normal around the mean (DLIO's `record_length_bytes` and `_stdev`), a
//! pure function of the seed and the sample's number: nothing is stored per sample. Files
//! live under `<dataset.prefix>train-<hash>/`, a hash of everything their bytes depend on
//! (the shape, the seed and `data`), so a dataset of another shape, seed or data is never
//! mistaken for this one, and one with the same content is reused.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;

use super::sampler::mix;
use crate::datagen::DataPattern;
use crate::spec::{DataSpec, TrainingShape};
use crate::stats::StageStats;
use crate::targets::{Target, TargetError};

/// The smallest sample (sizes drawn below it are raised to it).
const MIN_SAMPLE: u64 = 4096;

/// Where one sample is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file (object) key.
    pub key: String,
    /// Offset in the file.
    pub offset: u64,
    /// Length of the sample.
    pub len: u64,
    /// Whether the sample is the whole file (read with a plain GET, not a range).
    pub whole: bool,
}

/// The dataset of a training workload.
#[derive(Clone, Debug)]
pub struct Shape {
    samples: u64,
    per_file: u64,
    mean: u64,
    stdev: u64,
    seed: u64,
    dir: String,
}

impl Shape {
    /// The dataset of `shape` under `prefix`, sizes and content from `seed` and `data`.
    pub fn new(shape: &TrainingShape, seed: u64, data: &DataSpec, prefix: &str) -> Self {
        let mut h = mix(seed);
        for v in [
            shape.samples,
            shape.samples_per_file as u64,
            shape.sample_size,
            shape.sample_size_stdev,
        ] {
            h = mix(h ^ v);
        }
        // The default data leaves the hash as it was, so datasets laid out before `data`
        // was part of it are still found.
        if !data.is_default() {
            for v in [data.dedup_ratio.to_bits(), data.compress_ratio.to_bits()] {
                h = mix(h ^ v);
            }
        }
        Self {
            samples: shape.samples,
            per_file: shape.samples_per_file as u64,
            mean: shape.sample_size,
            stdev: shape.sample_size_stdev,
            seed,
            dir: format!("{prefix}train-{:08x}/", h as u32),
        }
    }

    /// Samples in the dataset.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Files in the dataset.
    pub fn files(&self) -> u64 {
        self.samples.div_ceil(self.per_file)
    }

    /// The directory (key prefix) of the files.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The key of file `f`.
    pub fn file_key(&self, f: u64) -> String {
        format!("{}{f:010}", self.dir)
    }

    /// The size of sample `s`: normal around the mean, within 4KiB .. mean + 3 stdev.
    pub fn sample_size(&self, s: u64) -> u64 {
        if self.stdev == 0 {
            return self.mean.max(1);
        }
        // Box-Muller from two uniforms hashed from (seed, sample).
        let h1 = mix(self.seed ^ mix(s));
        let h2 = mix(h1 ^ 0x5a5a_5a5a);
        let u1 = ((h1 >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (h2 >> 11) as f64 / (1u64 << 53) as f64;
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let v = self.mean as f64 + z * self.stdev as f64;
        let hi = self.mean.saturating_add(3 * self.stdev);
        (v.max(0.0) as u64).clamp(MIN_SAMPLE.min(self.mean), hi)
    }

    /// The samples of file `f`.
    fn file_samples(&self, f: u64) -> std::ops::Range<u64> {
        let first = f * self.per_file;
        first..(first + self.per_file).min(self.samples)
    }

    /// Bytes of file `f` (the sum of its samples).
    pub fn file_len(&self, f: u64) -> u64 {
        self.file_samples(f).map(|s| self.sample_size(s)).sum()
    }

    /// Bytes of the whole dataset (one pass over the sample sizes, no memory).
    pub fn total_bytes(&self) -> u64 {
        (0..self.samples).map(|s| self.sample_size(s)).sum()
    }

    /// Where sample `s` is.
    pub fn locate(&self, s: u64) -> Location {
        let f = s / self.per_file;
        let offset = self
            .file_samples(f)
            .take_while(|x| *x < s)
            .map(|x| self.sample_size(x))
            .sum();
        Location {
            key: self.file_key(f),
            offset,
            len: self.sample_size(s),
            whole: self.per_file == 1,
        }
    }
}

/// Write the files of worker `index` of `count` (file f when f mod count = index) that are
/// not already there at their size, `concurrency` at a time; then wait, at most
/// `wait_for_others`, until every other file of the dataset is there (the other workers'
/// share). Returns what was written.
pub async fn prepare(
    target: &Arc<dyn Target>,
    shape: &Shape,
    pattern: &Arc<DataPattern>,
    (index, count): (u32, u32),
    concurrency: usize,
    wait_for_others: std::time::Duration,
) -> Result<StageStats, TargetError> {
    let start = Instant::now();
    let mine = (index as u64..shape.files()).step_by(count.max(1) as usize);
    let results = futures::stream::iter(mine)
        .map(|f| {
            let (target, pattern) = (target.clone(), pattern.clone());
            let (key, len) = (shape.file_key(f), shape.file_len(f));
            async move {
                if target.stat(&key).await.is_ok_and(|i| i.size == len) {
                    return Ok((0u64, 0u64, 1u64));
                }
                let requests = target.put(&key, pattern.payload(&key, len)).await?;
                Ok::<_, TargetError>((len, requests as u64 + 1, 1))
            }
        })
        .buffer_unordered(concurrency.max(1));
    futures::pin_mut!(results);
    let mut stats = StageStats::default();
    while let Some(r) = results.next().await {
        let (bytes, requests, _) = r?;
        if bytes > 0 {
            stats.objects += 1;
        }
        stats.bytes += bytes;
        stats.requests += requests;
    }
    if count > 1 {
        let deadline = Instant::now() + wait_for_others;
        for f in (0..shape.files()).filter(|f| f % count as u64 != index as u64) {
            let (key, len) = (shape.file_key(f), shape.file_len(f));
            loop {
                if target.stat(&key).await.is_ok_and(|i| i.size == len) {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(TargetError::Other(format!(
                        "{key}: another worker's share of the training dataset is still missing after {wait_for_others:?} (is worker {} of {count} running?)",
                        f % count as u64
                    )));
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(samples: u64, per_file: u32, stdev: u64) -> Shape {
        let t = crate::spec::TrainingSpec {
            samples: Some(samples),
            sample_size: Some(crate::units::ByteSize(100_000)),
            sample_size_stdev: Some(crate::units::ByteSize(stdev)),
            samples_per_file: Some(per_file),
            compute_time: Some(crate::units::HumanDuration(std::time::Duration::ZERO)),
            ..Default::default()
        }
        .shape()
        .unwrap();
        Shape::new(&t, 5, &DataSpec::default(), "p/")
    }

    #[test]
    fn shards_place_samples_end_to_end() {
        let s = shape(10, 4, 20_000);
        assert_eq!(s.files(), 3);
        let mut off = 0;
        for i in 0..4 {
            let l = s.locate(i);
            assert_eq!(
                (l.key.as_str(), l.offset, l.whole),
                (s.file_key(0).as_str(), off, false)
            );
            off += l.len;
        }
        assert_eq!(off, s.file_len(0));
        assert_eq!(s.locate(9).offset, s.sample_size(8));
        assert_eq!(s.total_bytes(), (0..3).map(|f| s.file_len(f)).sum::<u64>());
    }

    #[test]
    fn sizes_spread_around_the_mean() {
        let s = shape(10_000, 1, 20_000);
        let sizes: Vec<u64> = (0..10_000).map(|i| s.sample_size(i)).collect();
        let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
        assert!((mean - 100_000.0).abs() < 1_000.0, "{mean}");
        assert!(sizes.iter().all(|v| (4096..=160_000).contains(v)));
        assert!(sizes.iter().any(|v| *v < 80_000) && sizes.iter().any(|v| *v > 120_000));
        assert!(s.locate(3).whole);
        // Another shape, another directory: never mistaken for this one.
        assert_ne!(s.dir(), shape(10_000, 2, 20_000).dir());
    }

    #[test]
    fn the_directory_is_keyed_by_the_data_as_well_as_the_shape() {
        let t = crate::spec::TrainingSpec {
            samples: Some(100),
            sample_size: Some(crate::units::ByteSize(100_000)),
            compute_time: Some(crate::units::HumanDuration(std::time::Duration::ZERO)),
            ..Default::default()
        }
        .shape()
        .unwrap();
        let dir = |dedup: f64, compress: f64| {
            let data = DataSpec {
                dedup_ratio: dedup,
                compress_ratio: compress,
            };
            Shape::new(&t, 5, &data, "p/").dir().to_string()
        };
        // Files of incompressible data are never reused for a run asking for 4:1, nor the
        // other way: their bytes differ, and a verified read would call them corrupt.
        let dirs = [dir(1.0, 1.0), dir(1.0, 4.0), dir(2.0, 1.0), dir(2.0, 4.0)];
        for (i, a) in dirs.iter().enumerate() {
            for b in &dirs[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(dirs[1], dir(1.0, 4.0), "the same data, the same directory");
    }
}
