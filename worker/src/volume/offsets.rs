//! Where each block I/O goes and how large it is: the offset generator and the block-size
//! mix. Pure, seeded, and tested on their own.

use rand::Rng;

use crate::spec::Access;

/// The block sizes of a workload with their weights (fio `bs` or `bssplit`).
#[derive(Clone, Debug)]
pub struct BlockSizes {
    /// (size, cumulative weight), in the order given.
    sizes: Vec<(u64, u64)>,
    total: u64,
}

impl BlockSizes {
    /// From (size, weight) pairs; entries of weight 0 are dropped. `None` if nothing is left.
    pub fn new(pairs: &[(u64, u32)]) -> Option<Self> {
        let mut total = 0u64;
        let sizes: Vec<(u64, u64)> = pairs
            .iter()
            .filter(|(s, w)| *w > 0 && *s > 0)
            .map(|(s, w)| {
                total += *w as u64;
                (*s, total)
            })
            .collect();
        (!sizes.is_empty()).then_some(Self { sizes, total })
    }

    /// One block size, drawn by weight.
    pub fn pick(&self, rng: &mut impl Rng) -> u64 {
        if self.sizes.len() == 1 {
            return self.sizes[0].0;
        }
        let x = rng.random_range(0..self.total);
        self.sizes
            .iter()
            .find(|(_, cum)| x < *cum)
            .map_or(self.sizes[0].0, |(s, _)| *s)
    }

    /// The largest size.
    pub fn max(&self) -> u64 {
        self.sizes.iter().map(|s| s.0).max().unwrap_or(0)
    }
}

/// One I/O's place: which region (file or device range) of a task, and the offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Index into the task's regions.
    pub region: usize,
    /// Byte offset inside the region (add the region's start on a device).
    pub offset: u64,
}

/// The offsets of one task: uniform and aligned to the block size (`random`), or a walk
/// from the start of the first region to the end of the last, wrapping (`sequential`).
///
/// A random offset is `k x bs` with `k` uniform in `0 .. len / bs`, so every I/O is aligned
/// to its own size and lies wholly inside its region, and every block of the region can be
/// chosen (not a few hot ones). A sequential I/O that would cross a region's end starts the
/// next region instead, as fio does at the end of a file.
#[derive(Clone, Debug)]
pub struct Offsets {
    lens: Vec<u64>,
    access: Access,
    region: usize,
    pos: u64,
}

impl Offsets {
    /// Offsets over regions of these lengths.
    pub fn new(lens: Vec<u64>, access: Access) -> Self {
        Self {
            lens,
            access,
            region: 0,
            pos: 0,
        }
    }

    /// Where the next I/O of `bs` bytes goes. `bs` is never larger than a region (checked
    /// when the volume is opened).
    pub fn next(&mut self, bs: u64, rng: &mut impl Rng) -> Place {
        let n = self.lens.len();
        match self.access {
            Access::Random => {
                let region = if n == 1 { 0 } else { rng.random_range(0..n) };
                let blocks = (self.lens[region] / bs).max(1);
                Place {
                    region,
                    offset: rng.random_range(0..blocks) * bs,
                }
            }
            Access::Sequential => {
                for _ in 0..=n {
                    if self.pos + bs <= self.lens[self.region] {
                        let p = Place {
                            region: self.region,
                            offset: self.pos,
                        };
                        self.pos += bs;
                        return p;
                    }
                    self.region = (self.region + 1) % n;
                    self.pos = 0;
                }
                // Unreachable with bs <= every region's length; stay in bounds regardless.
                Place {
                    region: 0,
                    offset: 0,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn random_offsets_are_aligned_inside_and_spread_over_the_whole_file() {
        let len = 64 << 20;
        let bs = 4096;
        let mut o = Offsets::new(vec![len], Access::Random);
        let mut rng = SmallRng::seed_from_u64(7);
        let blocks = len / bs;
        // 16 bands of the file: each must get its share (chi-square over 16 bins, 15 degrees
        // of freedom: 37.7 is the 0.1% critical value, so a uniform generator fails 1 in 1000
        // seeds, and this seed is fixed).
        let mut bands = [0u64; 16];
        let n = 160_000;
        for _ in 0..n {
            let p = o.next(bs, &mut rng);
            assert_eq!(p.region, 0);
            assert_eq!(p.offset % bs, 0, "aligned to the block size");
            assert!(p.offset + bs <= len, "inside the file");
            bands[(p.offset / bs * 16 / blocks) as usize] += 1;
        }
        let expected = n as f64 / 16.0;
        let chi2: f64 = bands
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 37.7, "offsets not uniform over the file: {bands:?}");
    }

    #[test]
    fn random_offsets_of_a_block_size_mix_are_aligned_to_their_own_size() {
        let sizes = BlockSizes::new(&[(4096, 50), (65536, 50), (1 << 20, 0)]).unwrap();
        assert_eq!(sizes.max(), 65536, "weight 0 is dropped");
        let mut o = Offsets::new(vec![1 << 20, 3 << 20], Access::Random);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut seen = [0u32; 2];
        let lens = [1u64 << 20, 3 << 20];
        for _ in 0..10_000 {
            let bs = sizes.pick(&mut rng);
            let p = o.next(bs, &mut rng);
            assert_eq!(p.offset % bs, 0);
            assert!(p.offset + bs <= lens[p.region]);
            seen[(bs == 65536) as usize] += 1;
        }
        // 50/50 by weight: 5000 expected each, 4 sigma is 200.
        assert!((4800..5200).contains(&seen[0]), "{seen:?}");
    }

    #[test]
    fn sequential_offsets_walk_every_region_in_order_and_wrap() {
        let mut o = Offsets::new(vec![3 * 4096, 2 * 4096 + 100], Access::Sequential);
        let mut rng = SmallRng::seed_from_u64(1);
        let got: Vec<(usize, u64)> = (0..7)
            .map(|_| {
                let p = o.next(4096, &mut rng);
                (p.region, p.offset / 4096)
            })
            .collect();
        // The 100-byte tail of region 1 is skipped: no I/O crosses a region's end.
        assert_eq!(
            got,
            [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (0, 0), (0, 1)]
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_offsets() {
        let run = || {
            let mut o = Offsets::new(vec![1 << 30], Access::Random);
            let mut rng = SmallRng::seed_from_u64(42);
            (0..100)
                .map(|_| o.next(4096, &mut rng).offset)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
