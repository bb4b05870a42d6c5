//! The epoch order: a permutation of the dataset's samples drawn per epoch from the run's
//! seed, and each accelerator's slice of it (a distributed sampler's global shuffle).
//!
//! The permutation is a keyed Feistel network over the smallest even power of two at
//! least N, cycle-walked into [0, N): a bijection computed per position, so an epoch of
//! 10 million samples costs no memory at all (nothing is materialized) and any worker
//! computes any position of it. Rank r of R (every accelerator of every worker) takes
//! positions r, r + R, r + 2R, ... as PyTorch's `DistributedSampler` does, so the ranks
//! together read every sample exactly once per epoch.

/// Rounds of the Feistel network (4 make a balanced network a strong pseudorandom
/// permutation; the order only needs to look shuffled).
const ROUNDS: usize = 4;

/// A pseudorandom permutation of [0, n).
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; ROUNDS],
}

/// SplitMix64's finalizer: a fast, well-mixed 64-bit hash.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Permutation {
    /// The permutation of epoch `epoch` of a run seeded `seed`, over `n` samples.
    pub fn new(n: u64, seed: u64, epoch: u32) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut keys = [0; ROUNDS];
        let mut k = mix(seed ^ mix(epoch as u64 ^ 0x5452_4149_4e00_0000));
        for key in &mut keys {
            k = mix(k);
            *key = k;
        }
        Self { n, half_bits, keys }
    }

    fn encrypt(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for k in &self.keys {
            let f = mix(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }

    /// The sample at position `i` (< n) of the epoch's order.
    pub fn at(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        // Cycle walking: the domain is under 4n, so about 4 steps at most on average, and
        // the walk ends because the network is a bijection on the domain.
        let mut x = self.encrypt(i);
        while x >= self.n {
            x = self.encrypt(x);
        }
        x
    }
}

/// One rank's share of an epoch: positions `rank`, `rank + ranks`, ...
#[derive(Clone, Debug)]
pub struct RankSlice {
    perm: Permutation,
    rank: u64,
    ranks: u64,
}

impl RankSlice {
    /// Rank `rank` of `ranks` over `perm`.
    pub fn new(perm: Permutation, rank: u64, ranks: u64) -> Self {
        Self { perm, rank, ranks }
    }

    /// Samples this rank reads in the epoch.
    pub fn len(&self) -> u64 {
        self.perm.n.saturating_sub(self.rank).div_ceil(self.ranks)
    }

    /// Whether this rank reads nothing (more ranks than samples).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rank's `j`-th sample.
    pub fn sample(&self, j: u64) -> u64 {
        self.perm.at(self.rank + j * self.ranks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_is_a_permutation() {
        for n in [1u64, 2, 3, 7, 64, 100, 1000, 4097] {
            let p = Permutation::new(n, 42, 0);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let s = p.at(i) as usize;
                assert!(!seen[s], "n={n}: {s} twice");
                seen[s] = true;
            }
        }
    }

    #[test]
    fn epochs_differ_and_a_seed_repeats() {
        let order = |seed, epoch| {
            let p = Permutation::new(1000, seed, epoch);
            (0..1000).map(|i| p.at(i)).collect::<Vec<_>>()
        };
        assert_ne!(order(1, 0), order(1, 1));
        assert_eq!(order(1, 3), order(1, 3));
        assert_ne!(order(1, 0), order(2, 0));
        // Shuffled: not the identity, and not mostly in place.
        let o = order(1, 0);
        let fixed = o
            .iter()
            .enumerate()
            .filter(|(i, s)| *i as u64 == **s)
            .count();
        assert!(fixed < 20, "{fixed} of 1000 samples in place");
    }

    #[test]
    fn ranks_cover_the_epoch_exactly_once() {
        let n = 1001;
        let ranks = 6;
        let mut count = vec![0u32; n as usize];
        for r in 0..ranks {
            let s = RankSlice::new(Permutation::new(n, 9, 2), r, ranks);
            for j in 0..s.len() {
                count[s.sample(j) as usize] += 1;
            }
        }
        assert!(count.iter().all(|c| *c == 1));
    }

    #[test]
    fn ten_million_samples_cost_no_memory() {
        let p = Permutation::new(10_000_000, 7, 0);
        assert!(std::mem::size_of_val(&p) <= 64);
        assert!(p.at(9_999_999) < 10_000_000);
    }
}
