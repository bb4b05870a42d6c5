//! Data written by PUT and checked by verified GETs.
//!
//! One pattern of random bytes is generated per run; an object's content is that pattern
//! rotated by a hash of its key. A payload is a list of zero-copy slices of the pattern, so
//! writing costs no generation time at all, and reads can be verified without storing anything.

use bytes::Bytes;
use rand::{RngCore, SeedableRng};

/// Data to write: the pieces of one object, in order, sharing one generated pattern.
#[derive(Clone, Debug)]
pub struct Payload {
    /// The pieces, in order.
    pub parts: Vec<Bytes>,
    /// Their total length in bytes.
    pub len: u64,
}

impl Payload {
    /// The payload made of `parts`.
    pub fn new(parts: Vec<Bytes>) -> Self {
        let len = parts.iter().map(|p| p.len() as u64).sum();
        Self { parts, len }
    }
}

/// Length of the repeating pattern: large enough that no dedup or compression of a whole
/// object finds repeats within a typical object.
const PATTERN_LEN: usize = 4 << 20;
/// Granularity of compressibility: that fraction of every block is zeros.
const BLOCK: usize = 4096;

/// The run's data pattern.
#[derive(Debug)]
pub struct DataPattern {
    /// The pattern twice over, so any `PATTERN_LEN` window is one contiguous slice.
    doubled: Bytes,
    seed: u64,
}

impl DataPattern {
    /// A pattern from `seed` where `compressibility` (0 to 1) of every 4 KiB block is zeros.
    pub fn new(seed: u64, compressibility: f64) -> Self {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut buf = vec![0u8; PATTERN_LEN * 2];
        let zeros = ((compressibility.clamp(0.0, 1.0)) * BLOCK as f64) as usize;
        for block in buf[..PATTERN_LEN].chunks_mut(BLOCK) {
            let from = zeros.min(block.len());
            rng.fill_bytes(&mut block[from..]);
        }
        buf.copy_within(..PATTERN_LEN, PATTERN_LEN);
        Self {
            doubled: Bytes::from(buf),
            seed,
        }
    }

    /// Where in the pattern an object's content starts.
    fn rotation(&self, key: &str) -> usize {
        // FNV-1a: stable across builds and platforms, so any worker can verify any object.
        let mut h: u64 = 0xcbf29ce484222325 ^ self.seed;
        for b in key.as_bytes() {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        (h % PATTERN_LEN as u64) as usize
    }

    /// The content of object `key` of `len` bytes.
    pub fn payload(&self, key: &str, len: u64) -> Payload {
        // Sizes come from a validated sampler (at most 5 TiB, ~1.3M slices); the capacity is
        // capped anyway so a bad length can never abort on a huge allocation up front.
        let mut parts = Vec::with_capacity((len / PATTERN_LEN as u64 + 1).min(1 << 16) as usize);
        let mut pos = self.rotation(key);
        let mut left = len;
        while left > 0 {
            let n = left.min(PATTERN_LEN as u64) as usize;
            parts.push(self.doubled.slice(pos..pos + n));
            pos = (pos + n) % PATTERN_LEN;
            left -= n as u64;
        }
        Payload::new(parts)
    }

    /// The index of the first byte of `chunk` (read at `offset` of `key`) that differs from
    /// what this pattern wrote there, if any.
    pub fn first_mismatch(&self, key: &str, offset: u64, chunk: &[u8]) -> Option<usize> {
        let mut pos = (self.rotation(key) + (offset % PATTERN_LEN as u64) as usize) % PATTERN_LEN;
        let mut done = 0;
        while done < chunk.len() {
            let n = (chunk.len() - done).min(PATTERN_LEN);
            let want = &self.doubled[pos..pos + n];
            let got = &chunk[done..done + n];
            if want != got {
                return got
                    .iter()
                    .zip(want)
                    .position(|(a, b)| a != b)
                    .map(|i| done + i);
            }
            done += n;
            pos = (pos + n) % PATTERN_LEN;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(p: &Payload) -> Vec<u8> {
        p.parts.iter().flat_map(|b| b.iter().copied()).collect()
    }

    #[test]
    fn payload_has_the_asked_length_and_verifies() {
        let d = DataPattern::new(7, 0.0);
        for len in [
            0u64,
            1,
            4095,
            4096,
            (PATTERN_LEN + 123) as u64,
            3 * PATTERN_LEN as u64,
        ] {
            let p = d.payload("k", len);
            assert_eq!(p.len, len);
            let bytes = flat(&p);
            assert_eq!(bytes.len() as u64, len);
            assert_eq!(d.first_mismatch("k", 0, &bytes), None);
            if len > 1000 {
                assert_eq!(
                    d.first_mismatch("k", 1000, &bytes[1000..]),
                    None,
                    "offset reads verify"
                );
            }
        }
    }

    #[test]
    fn corruption_and_wrong_keys_are_found() {
        let d = DataPattern::new(7, 0.0);
        let mut bytes = flat(&d.payload("a", 10_000));
        assert_ne!(
            d.first_mismatch("b", 0, &bytes),
            None,
            "different keys have different content"
        );
        bytes[5000] ^= 0xff;
        assert_eq!(d.first_mismatch("a", 0, &bytes), Some(5000));
    }

    #[test]
    fn compressibility_zeroes_that_fraction() {
        let d = DataPattern::new(1, 0.5);
        let bytes = flat(&d.payload("x", 1 << 20));
        let zeros = bytes.iter().filter(|b| **b == 0).count() as f64 / bytes.len() as f64;
        assert!((0.49..0.52).contains(&zeros), "zeros fraction {zeros}");
    }
}
