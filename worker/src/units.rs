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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const KIB: u64 = 1024;
    pub const MIB: u64 = 1024 * 1024;
    pub const GIB: u64 = 1024 * 1024 * 1024;

    pub const fn kib(n: u64) -> Self {
        Self(n * Self::KIB)
    }
    pub const fn mib(n: u64) -> Self {
        Self(n * Self::MIB)
    }
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("`{s}` is not a size: expected a number with an optional unit such as 4KiB, 1MiB or 2GB"))?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" | "Ki" | "K" | "k" => 1 << 10,
            "MiB" | "Mi" | "M" => 1 << 20,
            "GiB" | "Gi" | "G" => 1 << 30,
            "TiB" | "Ti" | "T" => 1 << 40,
            "KB" | "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "TB" => 1_000_000_000_000,
            other => {
                return Err(format!(
                    "`{s}` has an unknown unit `{other}`: use B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000)"
                ))
            }
        };
        let bytes = value * mult as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("`{s}` is out of range"));
        }
        if bytes.fract() != 0.0 {
            return Err(format!("`{s}` is not a whole number of bytes"));
        }
        Ok(ByteSize(bytes as u64))
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
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // int-or-string is what Kubernetes accepts for quantities; the pattern catches typos
        // at `kubectl apply` time instead of in a worker pod.
        schemars::json_schema!({
            "description": "A byte size: an integer or a number with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), e.g. 4MiB.",
            "x-kubernetes-int-or-string": true,
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?\\s*(B|KiB|Ki|K|k|MiB|Mi|M|GiB|Gi|G|TiB|Ti|T|KB|kB|MB|GB|TB)?$"}
            ]
        })
    }
}

/// A duration written like `500ms`, `30s`, `5m` or `1h 30m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    pub fn get(self) -> Duration {
        self.0
    }
}

impl FromStr for HumanDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
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
            "pattern": "^([0-9]+\\s*(ns|us|ms|s|m|h|d)\\s*)+$"
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
