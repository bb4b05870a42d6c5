//! Human-friendly units used in workload files: byte sizes (`4MiB`) and durations (`30s`).
//!
//! Both serialize back to the same strings users write, so a summary or a CRD status shows the
//! workload exactly as it was given.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte count written as an integer or with a unit: `4096`, `64KiB`, `1MiB`, `1.5GiB`, `10MB`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Bytes in a KiB.
    pub const KIB: u64 = 1024;
    /// Bytes in a MiB.
    pub const MIB: u64 = 1024 * 1024;
    /// Bytes in a GiB.
    pub const GIB: u64 = 1024 * 1024 * 1024;

    /// `n` KiB.
    pub const fn kib(n: u64) -> Self {
        Self(n * Self::KIB)
    }
    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        Self(n * Self::MIB)
    }
    /// The count of bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

/// The units a size may have: names, multiplier, and the most digits the whole part may
/// have with that unit, chosen so that every size the syntax allows fits in a `u64` (parsing
/// never fails on a value the schema pattern accepts).
const UNITS: &[(&[&str], u64, usize)] = &[
    (&["", "B"], 1, 19),
    (&["KiB", "Ki", "K", "k"], 1 << 10, 16),
    (&["KB", "kB"], 1_000, 16),
    (&["MiB", "Mi", "M"], 1 << 20, 13),
    (&["MB"], 1_000_000, 13),
    (&["GiB", "Gi", "G"], 1 << 30, 10),
    (&["GB"], 1_000_000_000, 10),
    (&["TiB", "Ti", "T"], 1 << 40, 7),
    (&["TB"], 1_000_000_000_000, 7),
];

/// Most digits after the decimal point.
const MAX_FRACTION_DIGITS: usize = 9;

/// The regular expression (RE2 and Rust `regex` syntax) that accepts exactly the strings
/// [`ByteSize::from_str`] accepts. It is the schema's `pattern`, so the API server rejects at
/// admission every string size the worker (and the operator's typed decode) would reject.
pub fn byte_size_pattern() -> String {
    let alts: Vec<String> = UNITS
        .iter()
        .map(|(names, mult, digits)| {
            let names: Vec<&str> = names.iter().copied().filter(|n| !n.is_empty()).collect();
            if *mult == 1 {
                format!("[0-9]{{1,{digits}}}(?: *(?:{}))?", names.join("|"))
            } else {
                format!(
                    "[0-9]{{1,{digits}}}(?:\\.[0-9]{{1,{MAX_FRACTION_DIGITS}}})? *(?:{})",
                    names.join("|")
                )
            }
        })
        .collect();
    format!("^(?:{})$", alts.join("|"))
}

impl FromStr for ByteSize {
    type Err = String;

    /// `<digits>[.<digits>][ ...]<unit>`: a fraction needs a unit above bytes and is rounded
    /// up to a whole byte (`1.5KiB` is 1536, `0.1KiB` is 103); no sign, no exponent, no
    /// surrounding spaces. See [`byte_size_pattern`], which accepts exactly the same strings.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let shown = crate::quote::clip(s);
        let not_a_size = || {
            format!("`{shown}` is not a size: expected a whole number with an optional unit such as 4096, 4KiB, 1.5MiB or 2GB")
        };
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (int, rest) = s.split_at(end);
        if int.is_empty() {
            return Err(not_a_size());
        }
        let (frac, rest) = match rest.strip_prefix('.') {
            Some(r) => {
                let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
                if end == 0 {
                    return Err(not_a_size());
                }
                (Some(&r[..end]), &r[end..])
            }
            None => (None, rest),
        };
        let unit = rest.trim_start_matches(' ');
        let found = UNITS.iter().find(|(names, _, _)| names.contains(&unit));
        let Some((_, mult, max_digits)) = found.filter(|_| !unit.is_empty() || rest.is_empty())
        else {
            return Err(format!(
                "`{shown}` has an unknown unit `{}`: use B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)",
                crate::quote::clip(unit)
            ));
        };
        if int.len() > *max_digits {
            return Err(format!(
                "`{shown}` is out of range: at most {max_digits} digits before the unit `{unit}`"
            ));
        }
        // Cannot overflow: the digit limits keep int * mult below u64::MAX / 1.8.
        let mut bytes = int.parse::<u64>().map_err(|_| not_a_size())? * mult;
        if let Some(f) = frac {
            if *mult == 1 {
                return Err(format!(
                    "`{shown}` is not a whole number of bytes: a fraction needs a unit, e.g. 1.5KiB"
                ));
            }
            if f.len() > MAX_FRACTION_DIGITS {
                return Err(format!(
                    "`{shown}` has more than {MAX_FRACTION_DIGITS} digits after the decimal point"
                ));
            }
            let num = f.parse::<u128>().map_err(|_| not_a_size())?;
            let den = 10u128.pow(f.len() as u32);
            bytes += (num * *mult as u128).div_ceil(den) as u64;
        }
        Ok(ByteSize(bytes))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, m) in [
            ("TiB", 1u64 << 40),
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
        ] {
            if b >= m && b % m == 0 {
                return write!(f, "{}{unit}", b / m);
            }
        }
        write!(f, "{b}")
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a size such as 4096, 64KiB or 1MiB"))?
        {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Str(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }
    fn inline_schema() -> bool {
        // Inline, so that a field's `#[schemars(range(max = ...))]` lands beside the pattern.
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // int-or-string is what Kubernetes accepts for quantities. No anyOf: `minimum` (and a
        // field's `maximum`) only constrain integers and `pattern` only strings, so the node
        // itself checks both forms; anyOf branches would lose their types when made
        // structural, and then any string passed the integer branch and any integer the
        // string branch.
        schemars::json_schema!({
            "description": "A byte size: an integer or a number with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), e.g. 4MiB.",
            "x-kubernetes-int-or-string": true,
            "minimum": 0,
            "pattern": byte_size_pattern()
        })
    }
}

/// Longest duration string: with at most 9 digits per number (the schema pattern), no
/// string this long can overflow.
pub const MAX_DURATION_LEN: usize = 64;

/// A duration written like `500ms`, `30s`, `5m` or `1h 30m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl FromStr for HumanDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() > MAX_DURATION_LEN {
            return Err(format!(
                "`{}` is not a duration: at most {MAX_DURATION_LEN} characters",
                crate::quote::clip(s)
            ));
        }
        humantime::parse_duration(s.trim())
            .map(HumanDuration)
            .map_err(|e| format!("`{s}` is not a duration ({e}): write e.g. 500ms, 30s, 5m or 1h"))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for HumanDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A duration such as 500ms, 30s, 5m or 1h.",
            "type": "string",
            "maxLength": MAX_DURATION_LEN,
            "pattern": "^([0-9]{1,9} *(ns|us|ms|s|m|h|d) *)+$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!("4096".parse::<ByteSize>().unwrap().0, 4096);
        assert_eq!("64KiB".parse::<ByteSize>().unwrap().0, 65536);
        assert_eq!("1.5MiB".parse::<ByteSize>().unwrap().0, 1572864);
        assert_eq!("10MB".parse::<ByteSize>().unwrap().0, 10_000_000);
        assert_eq!("4 MiB".parse::<ByteSize>().unwrap().0, 4 << 20);
        let e = "4MiBs".parse::<ByteSize>().unwrap_err();
        assert!(e.contains("unknown unit `MiBs`"), "{e}");
        let e = "lots".parse::<ByteSize>().unwrap_err();
        assert!(e.contains("is not a size"), "{e}");
        let e = "0.3B".parse::<ByteSize>().unwrap_err();
        assert!(e.contains("whole number"), "{e}");
    }

    #[test]
    fn sizes_reject_signs_typos_fractions_of_bytes_and_overflow() {
        for bad in [
            "-1",
            "4MB?",
            "1.5.3GiB",
            "1.3",
            "1.",
            ".5KiB",
            "1e3",
            "+4",
            " 4KiB",
            "4KiB ",
            "4 ",
            "0x10",
            "1MB2",
            "99999999999999999999",
            "9999999TiB0",
            "10000000TiB",
            "1.0000000001KiB",
            "",
            "KiB",
        ] {
            assert!(bad.parse::<ByteSize>().is_err(), "`{bad}` must be rejected");
        }
        assert_eq!("1.5KiB".parse::<ByteSize>().unwrap().0, 1536);
        assert_eq!("0.1KiB".parse::<ByteSize>().unwrap().0, 103, "rounded up");
        assert_eq!(
            "9999999TiB".parse::<ByteSize>().unwrap().0,
            9_999_999u64 << 40,
            "the largest TiB count fits"
        );
        assert_eq!(
            "9999999999999999999".parse::<ByteSize>().unwrap().0,
            9_999_999_999_999_999_999
        );
    }

    /// The schema's pattern and the parser agree on every string: a fixed list of edge
    /// cases plus 50,000 seeded random strings over the characters sizes are made of.
    #[test]
    fn pattern_accepts_exactly_what_the_parser_accepts() {
        use rand::{Rng, SeedableRng};
        let re = regex::Regex::new(&byte_size_pattern()).unwrap();
        let mut cases: Vec<String> = [
            "0",
            "4096",
            "64KiB",
            "1.5MiB",
            "10MB",
            "4 MiB",
            "4  GiB",
            "1B",
            "1 B",
            "1.5B",
            "1.3",
            "-1",
            "4MB?",
            "1.5.3GiB",
            "1MB2",
            "1.",
            ".5",
            "9999999TiB",
            "10000000TiB",
            "9999999999999999999",
            "99999999999999999999",
            "1.123456789KiB",
            "1.1234567890KiB",
            "1k",
            "1K",
            "1kB",
            "1Ki",
            "1TB",
            "1T",
            "4MiBs",
            " 1",
            "1 ",
            "1\t",
            "1\u{a0}KiB",
            "١٢KiB",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let alphabet: Vec<char> = "0123456789.. KMGTiBkb?-+e".chars().collect();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..50_000 {
            let len = rng.random_range(1..24);
            cases.push(
                (0..len)
                    .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                    .collect(),
            );
            // Mostly well-formed ones too, so both sides of the boundary are exercised.
            let unit = ["", "B", "KiB", "k", "MB", "Gi", "TiB", "TB", "T"][rng.random_range(0..9)];
            let digits: String = (0..rng.random_range(1..22))
                .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                .collect();
            let frac = if rng.random_bool(0.3) { ".25" } else { "" };
            cases.push(format!("{digits}{frac}{unit}"));
        }
        let mut accepted = 0;
        for c in &cases {
            let parsed = c.parse::<ByteSize>();
            assert_eq!(
                re.is_match(c),
                parsed.is_ok(),
                "pattern and parser disagree on `{c}`: {parsed:?}"
            );
            accepted += parsed.is_ok() as u32;
        }
        assert!(
            accepted > 5_000,
            "too few valid cases to mean anything: {accepted}"
        );
    }

    #[test]
    fn sizes_display_in_the_largest_exact_unit() {
        assert_eq!(ByteSize(4 << 20).to_string(), "4MiB");
        assert_eq!(ByteSize(1536).to_string(), "1536");
        assert_eq!(ByteSize(3 << 10).to_string(), "3KiB");
    }

    #[test]
    fn durations_round_trip() {
        let d: HumanDuration = "1m 30s".parse().unwrap();
        assert_eq!(d.0, Duration::from_secs(90));
        assert_eq!(d.to_string().parse::<HumanDuration>().unwrap(), d);
        assert!("soon"
            .parse::<HumanDuration>()
            .unwrap_err()
            .contains("not a duration"));
    }
}
