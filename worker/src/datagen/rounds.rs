//! The generator's core: three AES rounds over a counter block, on the CPU's AES instructions
//! when it has them, and a portable version of the same rounds everywhere else.
//!
//! Why AES rounds: each round mixes every byte of a 16-byte block, the instruction does a
//! round per cycle or faster on every x86-64 CPU since 2010, and three rounds of a counter
//! leave no structure a compressor or deduplicator can find (byte frequencies, repeats,
//! correlations: tested below and in `bench/datagen.sh`'s notes), at about 20 GiB/s per core
//! against 5.7-8.7 for the multiply-based generator before it. This is not encryption: the
//! round keys are fixed constants and the block is keyed by the sector's seed.
//!
//! Every path produces the same bytes (tested): data written on one CPU verifies on any other.
//! The portable path (T-tables, about 1.3 GiB/s) serves CPUs without AES instructions.

/// Round keys: the first is whitening xored into the counter block, then one per round
/// (the fractional digits of pi, as any "nothing up my sleeve" constant would do).
const KEYS: [[u64; 2]; ROUNDS + 1] = [
    [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344],
    [0xa409_3822_299f_31d0, 0x082e_fa98_ec4e_6c89],
    [0x4528_21e6_38d0_1377, 0xbe54_66cf_34e9_0c6c],
    [0xc0ac_29b7_c97c_50dd, 0x3f84_d5b5_b547_0917],
];
/// Two rounds left byte frequencies of counter-like seeds visibly too even; three do not.
const ROUNDS: usize = 3;
/// Bytes of one block.
pub const BLOCK: usize = 16;

/// Fill `out` (a multiple of [`BLOCK`] long) with blocks `0..` of the sector keyed by
/// (`seed`, `base`): block `j` is [`ROUNDS`] AES rounds of the 128-bit counter
/// (`seed`, `base + j`) (little-endian halves). Distinct counters give distinct blocks
/// (the rounds are a permutation).
#[inline]
pub fn blocks(seed: u64, base: u64, out: &mut [u8]) {
    debug_assert_eq!(out.len() % BLOCK, 0);
    #[cfg(target_arch = "x86_64")]
    if hw::available() {
        // SAFETY: `hw::blocks` needs the `aes` and `sse4.1` CPU features, and `available()`
        // has just checked that this CPU has both.
        unsafe { hw::blocks(seed, base, out) };
        return;
    }
    portable(seed, base, out);
}

/// The same bytes as [`blocks`], without AES instructions.
pub fn portable(seed: u64, base: u64, out: &mut [u8]) {
    let keys = KEYS.map(columns);
    for (j, o) in out.chunks_exact_mut(BLOCK).enumerate() {
        let c = counter(seed, base, j);
        let mut s = columns(c);
        for (w, k) in s.iter_mut().zip(keys[0]) {
            *w ^= k;
        }
        for k in &keys[1..] {
            s = round(s, *k);
        }
        for (b, w) in o.chunks_exact_mut(4).zip(s) {
            b.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// Block `j`'s counter, as (low, high) 64-bit halves.
#[inline(always)]
fn counter(seed: u64, base: u64, j: usize) -> [u64; 2] {
    [seed, base.wrapping_add(j as u64)]
}

/// A block as its four columns (little-endian 32-bit words: byte 0 is row 0 of column 0),
/// which is how the AES instructions lay out a 128-bit register.
fn columns(v: [u64; 2]) -> [u32; 4] {
    [
        v[0] as u32,
        (v[0] >> 32) as u32,
        v[1] as u32,
        (v[1] >> 32) as u32,
    ]
}

/// One AES encryption round as x86's `aesenc` does it: ShiftRows, SubBytes, MixColumns,
/// then xor the round key, through one T-table (SubBytes and MixColumns of a byte in row 0;
/// the other rows are rotations of it).
#[inline(always)]
fn round(s: [u32; 4], key: [u32; 4]) -> [u32; 4] {
    // Row r of output column c comes, after ShiftRows, from column c + r.
    let byte = |c: usize, r: usize| ((s[(c + r) % 4] >> (8 * r)) & 0xff) as usize;
    let mut out = [0u32; 4];
    for (c, o) in out.iter_mut().enumerate() {
        *o = TE[byte(c, 0)]
            ^ TE[byte(c, 1)].rotate_left(8)
            ^ TE[byte(c, 2)].rotate_left(16)
            ^ TE[byte(c, 3)].rotate_left(24)
            ^ key[c];
    }
    out
}

/// Multiplication in AES's field GF(2^8).
const fn gmul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= 0x1b;
        }
        b >>= 1;
    }
    p
}

/// The S-box, computed from its definition (inverse in GF(2^8), then the affine map) rather
/// than typed in; the tests check it against FIPS-197's values.
const fn sbox() -> [u8; 256] {
    let mut s = [0u8; 256];
    let mut x = 0usize;
    while x < 256 {
        let mut inv = 0u8;
        let mut y = 1usize;
        while x != 0 && y < 256 {
            if gmul(x as u8, y as u8) == 1 {
                inv = y as u8;
                break;
            }
            y += 1;
        }
        s[x] = inv
            ^ inv.rotate_left(1)
            ^ inv.rotate_left(2)
            ^ inv.rotate_left(3)
            ^ inv.rotate_left(4)
            ^ 0x63;
        x += 1;
    }
    s
}

const SBOX: [u8; 256] = sbox();

/// A byte of row 0 through SubBytes and MixColumns: its column's rows get (2s, s, s, 3s).
const fn te() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut x = 0;
    while x < 256 {
        let s = SBOX[x];
        t[x] = gmul(s, 2) as u32 | (s as u32) << 8 | (s as u32) << 16 | (gmul(s, 3) as u32) << 24;
        x += 1;
    }
    t
}

static TE: [u32; 256] = te();

#[cfg(target_arch = "x86_64")]
mod hw {
    use std::arch::x86_64::{
        __m128i, _mm_aesenc_si128, _mm_extract_epi64, _mm_set_epi64x, _mm_xor_si128,
    };

    use super::{counter, BLOCK, KEYS, ROUNDS};

    /// Whether this CPU has what [`blocks`] needs (the answer is cached by std).
    #[inline(always)]
    pub fn available() -> bool {
        is_x86_feature_detected!("aes") && is_x86_feature_detected!("sse4.1")
    }

    /// Blocks in flight at once: `aesenc` takes 3-4 cycles and issues every 0.5-1, so eight
    /// independent blocks keep the unit busy.
    const LANES: usize = 8;

    /// [`super::portable`] on the AES instructions. Only safe pieces inside: registers are
    /// built from and read back into integers, no pointer is used.
    #[target_feature(enable = "aes,sse4.1")]
    pub fn blocks(seed: u64, base: u64, out: &mut [u8]) {
        let key = |k: [u64; 2]| _mm_set_epi64x(k[1] as i64, k[0] as i64);
        let keys: [__m128i; ROUNDS + 1] = KEYS.map(key);
        let mut j = 0usize;
        let mut chunks = out.chunks_exact_mut(BLOCK * LANES);
        for chunk in &mut chunks {
            let mut b: [__m128i; LANES] =
                std::array::from_fn(|i| _mm_xor_si128(key(counter(seed, base, j + i)), keys[0]));
            for k in &keys[1..] {
                for x in &mut b {
                    *x = _mm_aesenc_si128(*x, *k);
                }
            }
            for (o, x) in chunk.chunks_exact_mut(BLOCK).zip(b) {
                store(o, x);
            }
            j += LANES;
        }
        // A sector cut short by `compressRatio`: the blocks left, one at a time.
        for o in chunks.into_remainder().chunks_exact_mut(BLOCK) {
            let mut x = _mm_xor_si128(key(counter(seed, base, j)), keys[0]);
            for k in &keys[1..] {
                x = _mm_aesenc_si128(x, *k);
            }
            store(o, x);
            j += 1;
        }
    }

    #[inline]
    #[target_feature(enable = "sse4.1")]
    fn store(o: &mut [u8], x: __m128i) {
        o[..8].copy_from_slice(&(_mm_extract_epi64::<0>(x) as u64).to_le_bytes());
        o[8..].copy_from_slice(&(_mm_extract_epi64::<1>(x) as u64).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sbox_is_aes_s() {
        // FIPS-197, figure 7.
        assert_eq!(
            (SBOX[0x00], SBOX[0x01], SBOX[0x53], SBOX[0xff]),
            (0x63, 0x7c, 0xed, 0x16)
        );
    }

    #[test]
    fn a_round_is_aes_round_one_of_fips_197() {
        // FIPS-197 appendix B: the state at the start of round 1, round 1's key, and the
        // state at the start of round 2.
        let be = |b: [u8; 16]| {
            let w = |i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
            [w(0), w(1), w(2), w(3)]
        };
        let start = be([
            0x19, 0x3d, 0xe3, 0xbe, 0xa0, 0xf4, 0xe2, 0x2b, 0x9a, 0xc6, 0x8d, 0x2a, 0xe9, 0xf8,
            0x48, 0x08,
        ]);
        let key = be([
            0xa0, 0xfa, 0xfe, 0x17, 0x88, 0x54, 0x2c, 0xb1, 0x23, 0xa3, 0x39, 0x39, 0x2a, 0x6c,
            0x76, 0x05,
        ]);
        let next = be([
            0xa4, 0x9c, 0x7f, 0xf2, 0x68, 0x9f, 0x35, 0x2b, 0x6b, 0x5b, 0xea, 0x43, 0x02, 0x6a,
            0x50, 0x49,
        ]);
        assert_eq!(round(start, key), next);
    }

    #[test]
    fn every_path_gives_the_same_bytes() {
        // Whole sectors, and sectors cut short (every length a `compressRatio` can give).
        let mut seed = 0x1234_5678_9abc_def0u64;
        for n in 1..=32 {
            for _ in 0..8 {
                seed = seed.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(n);
                let base = seed.rotate_left(29) ^ u64::MAX.wrapping_sub(n);
                let mut a = vec![0u8; n as usize * BLOCK];
                let mut b = a.clone();
                blocks(seed, base, &mut a);
                portable(seed, base, &mut b);
                assert_eq!(a, b, "{n} blocks of seed {seed:#x}");
            }
        }
    }

    #[test]
    fn the_bytes_are_pinned() {
        // Changing them breaks verification of data written before: this is a deliberate
        // format change, to be documented (BENCHMARKS.md, docs/RESULTS.md).
        let mut b = [0u8; 2 * BLOCK];
        portable(1, 2, &mut b);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(
            hex,
            "64398838be3bdfc3e37a1e5b07dd8142948dfe54324b4f865234626776618e83"
        );
    }

    #[test]
    fn byte_frequencies_are_even_even_for_counter_seeds() {
        // Sectors keyed by consecutive seeds (in use they are hashed, which is easier): every
        // byte value as often as chance has it. Chi-square over 255 degrees of freedom is
        // 255 +- 23; a multiply-based generator tried first scored 260,000 here.
        let mut counts = [0u64; 256];
        let mut sector = [0u8; 512];
        for s in 0..8192u64 {
            blocks(s, 0, &mut sector);
            for b in sector {
                counts[b as usize] += 1;
            }
        }
        let expected = (8192 * 512 / 256) as f64;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 350.0, "chi-square {chi2:.1}");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn this_test_machine_has_the_fast_path() {
        // The figures in BENCHMARKS.md are from this path; if CI's CPU lacks it, say so.
        assert!(
            hw::available(),
            "no AES instructions: the portable path is measured"
        );
    }
}
