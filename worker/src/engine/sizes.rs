//! Drawing object sizes from a [`SizeSpec`].

use rand::Rng;
use rand_distr::{Distribution, LogNormal};

use crate::spec::limits::MAX_OBJECT_SIZE;
use crate::spec::{SizeDistribution, SizeSpec};
use crate::units::ByteSize;

/// A sampler built once per run from a validated spec.
#[derive(Clone, Debug)]
pub enum SizeSampler {
    /// Always this size.
    Fixed(u64),
    /// Uniform between `min` and `max`, inclusive.
    Uniform {
        /// Smallest size.
        min: u64,
        /// Largest size.
        max: u64,
    },
    /// Log-normal, clamped to `[min, max]`.
    Lognormal {
        /// The distribution, fitted to the spec's mean and standard deviation.
        dist: LogNormal<f64>,
        /// Smallest size.
        min: u64,
        /// Largest size.
        max: u64,
    },
}

impl SizeSampler {
    /// The largest size this sampler can draw.
    pub fn max(&self) -> u64 {
        match self {
            SizeSampler::Fixed(s) => *s,
            SizeSampler::Uniform { max, .. } | SizeSampler::Lognormal { max, .. } => *max,
        }
    }

    /// Refuses what [`Workload::validate`](crate::spec::Workload::validate) refuses about
    /// sizes (above [`MAX_OBJECT_SIZE`], max below min), so a spec that skipped validation is
    /// an error here, never a panic or an unbounded allocation when data is generated.
    pub fn new(spec: &SizeSpec) -> Result<Self, String> {
        for (path, v) in spec.sizes() {
            if v > MAX_OBJECT_SIZE {
                return Err(format!(
                    "size{path} {} is above the largest object, {}",
                    ByteSize(v),
                    ByteSize(MAX_OBJECT_SIZE)
                ));
            }
        }
        if let SizeSpec::Distribution(
            SizeDistribution::Uniform { min, max } | SizeDistribution::Lognormal { min, max, .. },
        ) = spec
        {
            if max < min {
                return Err(format!("size: max {max} is smaller than min {min}"));
            }
        }
        Ok(match spec {
            SizeSpec::Fixed(s) => SizeSampler::Fixed(s.0),
            SizeSpec::Distribution(SizeDistribution::Uniform { min, max }) => {
                SizeSampler::Uniform {
                    min: min.0,
                    max: max.0.max(min.0),
                }
            }
            SizeSpec::Distribution(SizeDistribution::Lognormal {
                mean,
                std_dev,
                min,
                max,
            }) => {
                // Parameters of the underlying normal so that the sizes have this mean and sd.
                let (m, sd) = (mean.0 as f64, std_dev.0 as f64);
                let sigma2 = (1.0 + (sd * sd) / (m * m)).ln();
                let mu = m.ln() - sigma2 / 2.0;
                let dist = LogNormal::new(mu, sigma2.sqrt())
                    .map_err(|e| format!("lognormal size: {e}"))?;
                SizeSampler::Lognormal {
                    dist,
                    min: min.0,
                    max: max.0,
                }
            }
        })
    }

    /// Draw one size, in bytes.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        match self {
            SizeSampler::Fixed(n) => *n,
            SizeSampler::Uniform { min, max } => rng.random_range(*min..=*max),
            SizeSampler::Lognormal { dist, min, max } => {
                (dist.sample(rng).round() as u64).clamp(*min, *max)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_sizes_are_errors_not_panics() {
        let e = SizeSampler::new(&SizeSpec::Fixed(ByteSize(u64::MAX))).unwrap_err();
        assert!(e.contains("above the largest object"), "{e}");
        let inverted = SizeSpec::Distribution(SizeDistribution::Lognormal {
            mean: ByteSize(10),
            std_dev: ByteSize(5),
            min: ByteSize(100),
            max: ByteSize(1),
        });
        assert!(SizeSampler::new(&inverted)
            .unwrap_err()
            .contains("smaller than min"));
    }
    use crate::units::ByteSize;
    use rand::SeedableRng;

    fn stats(spec: SizeSpec) -> (f64, f64, u64, u64) {
        let s = SizeSampler::new(&spec).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
        let v: Vec<u64> = (0..200_000).map(|_| s.sample(&mut rng)).collect();
        let mean = v.iter().sum::<u64>() as f64 / v.len() as f64;
        let var = v.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
        (
            mean,
            var.sqrt(),
            *v.iter().min().unwrap(),
            *v.iter().max().unwrap(),
        )
    }

    #[test]
    fn fixed_is_fixed() {
        assert_eq!(
            stats(SizeSpec::Fixed(ByteSize(4096))),
            (4096.0, 0.0, 4096, 4096)
        );
    }

    #[test]
    fn uniform_mean_and_bounds() {
        let (mean, _, min, max) = stats(SizeSpec::Distribution(SizeDistribution::Uniform {
            min: ByteSize::kib(4),
            max: ByteSize::kib(64),
        }));
        assert!(
            (mean - 34.0 * 1024.0).abs() / (34.0 * 1024.0) < 0.01,
            "mean {mean}"
        );
        assert!((4096..4200).contains(&min), "min {min}");
        assert!((65401..=65536).contains(&max), "max {max}");
    }

    #[test]
    fn lognormal_mean_sd_and_clamp() {
        let (mean, sd, min, max) = stats(SizeSpec::Distribution(SizeDistribution::Lognormal {
            mean: ByteSize::mib(1),
            std_dev: ByteSize::kib(256),
            min: ByteSize(1),
            max: ByteSize::mib(64),
        }));
        let m = (1 << 20) as f64;
        assert!((mean - m).abs() / m < 0.01, "mean {mean}");
        assert!((sd - m / 4.0).abs() / (m / 4.0) < 0.03, "sd {sd}");
        assert!(min > 0 && max <= 64 << 20);
        let (_, _, min, max) = stats(SizeSpec::Distribution(SizeDistribution::Lognormal {
            mean: ByteSize::mib(1),
            std_dev: ByteSize::mib(1),
            min: ByteSize::kib(512),
            max: ByteSize::mib(2),
        }));
        assert_eq!((min, max), (512 << 10, 2 << 20), "clamped to [min, max]");
    }
}
