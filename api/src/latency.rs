//! The latency histogram: HDR, in microseconds, and its bounded serialization (a summary's
//! histograms come from other processes, so decoding one never allocates what its header asks).

use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer as HdrDe, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
/// Highest latency tracked: one hour, in microseconds.
const MAX_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, 3 significant digits, serialized as base64 of the
/// HdrHistogram V2 compressed format (readable by every HdrHistogram implementation).
#[derive(Clone, Debug)]
pub struct Latency(pub Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Self(Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds"))
    }
}

impl PartialEq for Latency {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Latency {
    /// Memory of one histogram's counts (fixed by its bounds and precision).
    pub fn bytes() -> u64 {
        static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *BYTES.get_or_init(|| {
            (Latency::default().0.distinct_values() * std::mem::size_of::<u64>()) as u64
        })
    }

    /// Count one sample, clamped to the tracked range (1 µs to one hour).
    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, MAX_US);
        // saturating_record cannot fail: the value is clamped to the bounds.
        self.0.saturating_record(us);
    }

    /// Add every sample of `other` (an exact merge: every `Latency` has this tool's bounds
    /// and precision, which [`Latency`]'s deserialization enforces, so both counts arrays
    /// have the same buckets and `add` adds them index by index).
    pub fn add(&mut self, other: &Latency) {
        // Same buckets on both sides, so `add` cannot fail; saturating if it ever did.
        if self.0.add(&other.0).is_err() {
            for v in other.0.iter_recorded() {
                self.0
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    /// The value at quantile `q` (0..=1), in microseconds.
    pub fn quantile_us(&self, q: f64) -> u64 {
        self.0.value_at_quantile(q)
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.0.len()
    }
}

impl Serialize for Latency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.0, &mut out)
            .map_err(|e| serde::ser::Error::custom(format!("histogram: {e:?}")))?;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(out))
    }
}

/// In a summary's JSON Schema: a string (the base64 of the HdrHistogram V2 deflate format).
impl schemars::JsonSchema for Latency {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Latency".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "contentEncoding": "base64",
            "maxLength": MAX_HISTOGRAM_TEXT,
            "description": "A latency histogram in microseconds (1 us to one hour, 3 significant digits): base64 of the HdrHistogram V2 deflate format, readable by every HdrHistogram implementation."
        })
    }
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let s = String::deserialize(d)?;
        if s.len() > MAX_HISTOGRAM_TEXT {
            return Err(D::Error::custom(format!(
                "histogram is {} bytes of text, more than the {MAX_HISTOGRAM_TEXT} a histogram of this tool takes",
                s.len()
            )));
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map_err(|e| D::Error::custom(format!("histogram is not base64: {e}")))?;
        let v2 = checked_v2(&raw).map_err(|e| D::Error::custom(format!("histogram: {e}")))?;
        let h: Histogram<u64> = HdrDe::new()
            .deserialize(&mut v2.as_slice())
            .map_err(|e| D::Error::custom(format!("histogram is not HdrHistogram V2: {e:?}")))?;
        // Same lowest value and precision (checked above): the same buckets as ours, only
        // fewer of them when its highest value is lower, so adding it is exact.
        let mut l = Latency::default();
        if l.0.add(&h).is_err() {
            return Err(D::Error::custom(
                "histogram holds values past this tool's highest (one hour)",
            ));
        }
        Ok(l)
    }
}

/// Longest base64 text of a histogram accepted in a summary. A full histogram of this tool
/// (every one of its ~24,000 buckets used) compresses to well under this.
const MAX_HISTOGRAM_TEXT: usize = 1 << 20;
/// Largest decompressed histogram accepted: the V2 header plus at most 9 bytes per bucket.
const MAX_HISTOGRAM_V2: u64 = 1 << 20;

/// The plain HdrHistogram V2 bytes of a V2 (compressed or not) histogram, after checking what
/// its header would make a decoder allocate: the decompressed size is bounded, the payload
/// length must match what is there, and the bounds and precision must be this tool's own
/// (HdrHistogram sizes its counts from them, and a forged header would otherwise allocate
/// gigabytes from a few bytes). A histogram of another precision or lowest value is refused,
/// not re-recorded: its buckets are not ours, and moving its counts into ours would put each
/// sample at a value it may not have had (a merge that is not exact). A lower highest value
/// is accepted: its buckets are a prefix of ours, so its counts add exactly.
fn checked_v2(raw: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    const V2: u32 = 0x1c84_9313;
    const V2_COMPRESSED: u32 = 0x1c84_9314;
    let be32 = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let be64 = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let v2 = match be32(raw, 0) {
        Some(V2) => raw.to_vec(),
        Some(V2_COMPRESSED) => {
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(raw.get(8..).unwrap_or_default())
                .take(MAX_HISTOGRAM_V2 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("not zlib data: {e}"))?;
            out
        }
        _ => return Err("not HdrHistogram V2 (unknown cookie)".into()),
    };
    if v2.len() as u64 > MAX_HISTOGRAM_V2 {
        return Err(format!("more than {MAX_HISTOGRAM_V2} bytes decompressed"));
    }
    let header = 40;
    let bad = || "truncated V2 header".to_string();
    if be32(&v2, 0) != Some(V2) {
        return Err("not HdrHistogram V2 (bad inner cookie)".into());
    }
    let payload = be32(&v2, 4).ok_or_else(bad)? as usize;
    let digits = be32(&v2, 12).ok_or_else(bad)?;
    let low = be64(&v2, 16).ok_or_else(bad)?;
    let high = be64(&v2, 24).ok_or_else(bad)?;
    if payload > v2.len().saturating_sub(header) {
        return Err(format!(
            "header announces {payload} payload bytes but {} follow",
            v2.len().saturating_sub(header)
        ));
    }
    if digits != 3 || low != 1 || !(2..=MAX_US).contains(&high) {
        return Err(format!(
            "bounds {low}..{high} with {digits} significant digits are not this tool's (1..{MAX_US} us, 3 digits): \
             it cannot be merged exactly (a histogram of another precision or lowest value has other buckets), so it is refused"
        ));
    }
    Ok(v2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_histogram_text_is_a_clear_error() {
        let e = serde_json::from_str::<Latency>("\"!!!\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not base64"), "{e}");
    }

    /// A V2 histogram header with the given fields, compressed as V2 deflate, as base64 JSON.
    fn forged(payload_len: u32, digits: u32, low: u64, high: u64, payload: &[u8]) -> String {
        use std::io::Write;
        let mut v2 = Vec::new();
        v2.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
        v2.extend_from_slice(&payload_len.to_be_bytes());
        v2.extend_from_slice(&0u32.to_be_bytes());
        v2.extend_from_slice(&digits.to_be_bytes());
        v2.extend_from_slice(&low.to_be_bytes());
        v2.extend_from_slice(&high.to_be_bytes());
        v2.extend_from_slice(&1.0f64.to_be_bytes());
        v2.extend_from_slice(payload);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&v2).unwrap();
        let z = z.finish().unwrap();
        let mut raw = Vec::new();
        raw.extend_from_slice(&0x1c84_9314u32.to_be_bytes());
        raw.extend_from_slice(&(z.len() as u32).to_be_bytes());
        raw.extend_from_slice(&z);
        format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }

    #[test]
    fn forged_histogram_headers_are_refused_before_allocating() {
        // Announces a 4 GiB payload: HdrHistogram would zero a 4 GiB buffer for it.
        let e = serde_json::from_str::<Latency>(&forged(u32::MAX, 3, 1, MAX_US, &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("payload bytes"), "{e}");
        // Bounds and precision that would size the counts array in the hundreds of MiB.
        let e = serde_json::from_str::<Latency>(&forged(0, 5, 1, u64::MAX / 2, &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("are not this tool's"), "{e}");
        // A zlib bomb: 8 MiB of zeros after the header.
        let e = serde_json::from_str::<Latency>(&forged(0, 3, 1, MAX_US, &vec![0; 8 << 20]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("decompressed"), "{e}");
        // A genuine histogram still round-trips through the same checks.
        let mut l = Latency::default();
        l.record(Duration::from_millis(3));
        let back: Latency = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
        assert_eq!(back, l);
    }

    /// A histogram serialized with the given bounds and precision, holding `us`.
    fn other(low: u64, high: u64, digits: u8, us: &[u64]) -> String {
        let mut h = Histogram::<u64>::new_with_bounds(low, high, digits).unwrap();
        for &u in us {
            h.record(u).unwrap();
        }
        let mut out = Vec::new();
        V2DeflateSerializer::new().serialize(&h, &mut out).unwrap();
        format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(out)
        )
    }

    #[test]
    fn a_histogram_of_other_buckets_is_refused_and_a_lower_highest_value_merges_exactly() {
        let samples = [1, 999, 1_001, 12_345, 987_654];
        // Lower precision: 2 digits would put 12,345 us in a bucket of 128 us; re-recorded
        // in ours it would be moved, so the merge would not be exact. Refused, saying why.
        for (low, high, digits) in [(1, MAX_US, 2), (1_000, MAX_US, 3), (1, MAX_US, 4)] {
            let e = serde_json::from_str::<Latency>(&other(low, high, digits, &samples))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("not this tool's") && e.contains("cannot be merged exactly"),
                "{low} {high} {digits}: {e}"
            );
        }
        // Same lowest value and precision, lower highest value: the same buckets, fewer of
        // them. Read and merged, it is exactly the histogram of the same samples.
        let read: Latency = serde_json::from_str(&other(1, 10_000_000, 3, &samples)).unwrap();
        let mut ours = Latency::default();
        for &u in &samples {
            ours.record(Duration::from_micros(u));
        }
        assert_eq!(read, ours);
        let mut merged = Latency::default();
        merged.add(&read);
        merged.add(&ours);
        for q in [0.0, 0.3, 0.5, 0.9, 1.0] {
            let mut twice = ours.clone();
            twice.add(&ours);
            assert_eq!(merged.quantile_us(q), twice.quantile_us(q), "q {q}");
        }
    }
}
