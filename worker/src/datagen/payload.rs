//! A PUT's data, described rather than held: an object's bytes are generated a piece at a
//! time as the target writes them, so memory per PUT is bounded by the piece (file and
//! direct writes) or by the parts in flight (multipart uploads), never by the object. A
//! checkpoint rank writing a 13 GB shard holds 4 MiB of it, not 13 GB.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use super::DataPattern;

/// Largest piece of a payload generated at once (and the largest `Bytes` any method returns).
pub const PIECE: usize = 4 << 20;

/// Data to write to one object or file.
#[derive(Clone, Debug)]
pub struct Payload {
    source: Source,
    len: u64,
}

#[derive(Clone, Debug)]
enum Source {
    /// Bytes already in memory: a small marker object, a test's hand-made body.
    Held(Vec<Bytes>),
    /// A stream's bytes from the keyed generator (generation 0, as objects are written),
    /// made when they are asked for. Copying it copies no data.
    Generated { pattern: DataPattern, stream: u64 },
}

impl Payload {
    /// The payload made of `parts`, in order.
    pub fn new(parts: Vec<Bytes>) -> Self {
        let len = parts.iter().map(|p| p.len() as u64).sum();
        Self {
            source: Source::Held(parts),
            len,
        }
    }

    /// `len` bytes of `stream` from `pattern`, generated when they are asked for.
    pub(super) fn generated(pattern: DataPattern, stream: u64, len: u64) -> Self {
        Self {
            source: Source::Generated { pattern, stream },
            len,
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Write the bytes at `offset..offset + dst.len()` into `dst`: generated straight into
    /// it, or copied from the held parts.
    ///
    /// # Panics
    /// When the range ends beyond the payload (a caller's arithmetic error, never input).
    pub fn copy_to(&self, offset: u64, dst: &mut [u8]) {
        assert!(
            offset + dst.len() as u64 <= self.len,
            "bytes {offset}..+{} of a {}-byte payload",
            dst.len(),
            self.len
        );
        match &self.source {
            Source::Generated { pattern, stream } => pattern.fill(*stream, offset, 0, dst),
            Source::Held(parts) => {
                let mut at = 0usize;
                for b in held_slices(parts, offset..offset + dst.len() as u64) {
                    dst[at..at + b.len()].copy_from_slice(&b);
                    at += b.len();
                }
            }
        }
    }

    /// The bytes of `range` as pieces of at most [`PIECE`] bytes, in order: slices of the
    /// held parts (no copy), or generated now.
    ///
    /// # Panics
    /// When the range ends beyond the payload.
    pub fn range(&self, range: Range<u64>) -> Vec<Bytes> {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "bytes {range:?} of a {}-byte payload",
            self.len
        );
        match &self.source {
            Source::Generated { .. } => pieces_of(range).map(|r| self.generate(r)).collect(),
            Source::Held(parts) => held_slices(parts, range)
                .flat_map(|b| {
                    (0..b.len())
                        .step_by(PIECE)
                        .map(move |at| b.slice(at..(at + PIECE).min(b.len())))
                        .collect::<Vec<_>>()
                })
                .collect(),
        }
    }

    /// Every byte, in pieces of at most [`PIECE`] bytes, each generated as the iterator
    /// reaches it: a writer that drops each piece after writing it holds one piece.
    pub fn pieces(&self) -> impl Iterator<Item = Bytes> + '_ {
        pieces_of(0..self.len).flat_map(|r| self.range(r))
    }

    /// Every byte in one buffer: for tests and small bodies, never for a benchmark's PUT.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len as usize];
        self.copy_to(0, &mut out);
        out
    }

    fn generate(&self, range: Range<u64>) -> Bytes {
        let mut b = BytesMut::zeroed((range.end - range.start) as usize);
        self.copy_to(range.start, &mut b);
        b.freeze()
    }
}

/// The parts of `parts` (laid end to end) inside `range`, in order, as slices (no copy).
fn held_slices(parts: &[Bytes], range: Range<u64>) -> impl Iterator<Item = Bytes> + '_ {
    let mut first = 0u64;
    parts.iter().filter_map(move |p| {
        let (start, end) = (first, first + p.len() as u64);
        first = end;
        let (lo, hi) = (range.start.max(start), range.end.min(end));
        (lo < hi).then(|| p.slice((lo - start) as usize..(hi - start) as usize))
    })
}

/// `range` cut into consecutive ranges of at most [`PIECE`] bytes.
fn pieces_of(range: Range<u64>) -> impl Iterator<Item = Range<u64>> {
    let end = range.end;
    (range.start..end)
        .step_by(PIECE)
        .map(move |s| s..(s + PIECE as u64).min(end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagen::stream_of;

    /// The whole stream generated in one buffer: what every method must agree with.
    fn whole(p: &DataPattern, key: &str, len: u64) -> Vec<u8> {
        let mut b = vec![0u8; len as usize];
        p.fill(stream_of(key), 0, 0, &mut b);
        b
    }

    fn flat(pieces: impl IntoIterator<Item = Bytes>) -> Vec<u8> {
        pieces.into_iter().flat_map(|b| b.to_vec()).collect()
    }

    #[test]
    fn generated_pieces_ranges_and_copies_equal_the_whole_stream() {
        let d = DataPattern::unique(5);
        let piece = PIECE as u64;
        for len in [0, 1, 511, 4096, piece - 1, piece, piece + 1, 2 * piece + 3] {
            let want = whole(&d, "obj", len);
            let p = d.payload("obj", len);
            assert_eq!(p.len(), len);
            let pieces: Vec<Bytes> = p.pieces().collect();
            assert!(pieces.iter().all(|b| !b.is_empty() && b.len() <= PIECE));
            assert_eq!(pieces.len() as u64, len.div_ceil(piece));
            assert_eq!(flat(pieces), want, "pieces of {len}");
            assert_eq!(p.to_vec(), want, "to_vec of {len}");
            // Ranges that start and end inside pieces, across a piece's boundary.
            for (s, e) in [(0, len), (len / 3, len - len / 5), (len / 2, len / 2)] {
                assert_eq!(
                    flat(p.range(s..e)),
                    want[s as usize..e as usize],
                    "{s}..{e}"
                );
                let mut b = vec![0u8; (e - s) as usize];
                p.copy_to(s, &mut b);
                assert_eq!(b, want[s as usize..e as usize], "copy {s}..{e}");
            }
        }
    }

    #[test]
    fn held_parts_give_the_same_bytes_as_generated_ones() {
        let d = DataPattern::unique(5);
        let len = 2 * PIECE as u64 + 1000;
        let want = whole(&d, "k", len);
        // Uneven parts, one larger than a piece, one empty.
        let cuts = [0usize, 100, 100, 5 << 20, want.len()];
        let parts: Vec<Bytes> = cuts
            .windows(2)
            .map(|w| Bytes::copy_from_slice(&want[w[0]..w[1]]))
            .collect();
        let p = Payload::new(parts);
        assert_eq!(p.len(), len);
        assert_eq!(p.to_vec(), want);
        assert_eq!(flat(p.pieces()), want);
        assert!(p.pieces().all(|b| b.len() <= PIECE));
        for (s, e) in [
            (50u64, 150u64),
            (99, 101),
            (0, len),
            (4 << 20, (4 << 20) + 9),
        ] {
            assert_eq!(
                flat(p.range(s..e)),
                want[s as usize..e as usize],
                "{s}..{e}"
            );
            let mut b = vec![0u8; (e - s) as usize];
            p.copy_to(s, &mut b);
            assert_eq!(b, want[s as usize..e as usize], "copy {s}..{e}");
        }
    }

    #[test]
    fn describing_a_huge_payload_costs_nothing() {
        // 1 TiB described; only the piece asked for is made.
        let p = DataPattern::unique(1).payload("huge", 1 << 40);
        let tail = p.range((1 << 40) - 10..1 << 40);
        assert_eq!(flat(tail).len(), 10);
        assert_eq!(p.pieces().next().map(|b| b.len()), Some(PIECE));
    }
}
