//! An object size, fixed or drawn from a distribution, with a hand-written serde and schema.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{defaults, limits, null_is_default};
use crate::units::ByteSize;

/// An object size: fixed (`1MiB`) or drawn from a distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeSpec {
    /// Every object has this size.
    Fixed(ByteSize),
    /// Sizes drawn from a distribution.
    Distribution(SizeDistribution),
}

/// A size distribution; write exactly one key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum SizeDistribution {
    /// Uniform between `min` and `max`, inclusive.
    Uniform {
        /// Smallest size.
        min: ByteSize,
        /// Largest size.
        max: ByteSize,
    },
    /// Log-normal with this mean and standard deviation, clamped to `[min, max]`.
    Lognormal {
        /// Mean size.
        mean: ByteSize,
        /// Standard deviation.
        #[serde(rename = "stdDev")]
        std_dev: ByteSize,
        /// Smallest size (default 1).
        #[serde(
            default = "defaults::lognormal_min",
            deserialize_with = "null_is_default::lognormal_min"
        )]
        min: ByteSize,
        /// Largest size (default 64GiB).
        #[serde(
            default = "defaults::lognormal_max",
            deserialize_with = "null_is_default::lognormal_max"
        )]
        max: ByteSize,
    },
}

impl Serialize for SizeSpec {
    // Through a JSON value: serde_yaml would write an enum as a YAML tag (`!uniform`), which
    // neither this parser nor Kubernetes reads back.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SizeSpec::Fixed(b) => b.serialize(s),
            SizeSpec::Distribution(d) => serde_json::to_value(d)
                .map_err(serde::ser::Error::custom)?
                .serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SizeSpec {
    // Hand-written so that a bad size says what is wrong, not "did not match any variant".
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Number(n) => n
                .as_u64()
                .map(|n| SizeSpec::Fixed(ByteSize(n)))
                .ok_or_else(|| D::Error::custom(format!("{n} is not a whole, non-negative number of bytes"))),
            serde_json::Value::String(s) => s.parse().map(SizeSpec::Fixed).map_err(D::Error::custom),
            v @ serde_json::Value::Object(_) => serde_json::from_value(v)
                .map(SizeSpec::Distribution)
                .map_err(|e| D::Error::custom(format!("{e} (expected a size such as 1MiB, or uniform: {{min, max}} or lognormal: {{mean, stdDev}})"))),
            other => Err(D::Error::custom(format!(
                "expected a size such as 1MiB, or uniform: {{min, max}} or lognormal: {{mean, stdDev}}, got {other}"
            ))),
        }
    }
}

impl JsonSchema for SizeSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SizeSpec".into()
    }
    fn inline_schema() -> bool {
        true
    }
    /// Structural for Kubernetes, and as strict as the parser: a value that is an integer, a
    /// string or an object, so no single `type`; `x-kubernetes-preserve-unknown-fields` is
    /// the only untyped node a CRD allows. Each keyword below constrains one JSON type only
    /// (`minimum`/`maximum` integers, `pattern` strings, `properties`/`*Properties`/`required`
    /// objects), so together they check every form. "Exactly one of uniform, lognormal" is
    /// `not: {allOf: [{not: {required: [uniform]}}, {not: {required: [lognormal]}}]}` with
    /// `maxProperties: 1` (an anyOf of the two `required`s, written without anyOf, which the
    /// operator's schema rewriting would turn into an unchecked node).
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let max = limits::MAX_OBJECT_SIZE;
        let size = |description: &str| {
            serde_json::json!({
                "description": description,
                "x-kubernetes-int-or-string": true,
                "minimum": 0,
                "maximum": max,
                "pattern": crate::units::byte_size_pattern(),
            })
        };
        schemars::json_schema!({
            "description": "An object size: an integer or a string such as 4096, 64KiB, 1.5MiB, or a distribution: {uniform: {min, max}} or {lognormal: {mean, stdDev, min, max}}.",
            "x-kubernetes-preserve-unknown-fields": true,
            "minimum": 0,
            "maximum": max,
            "pattern": crate::units::byte_size_pattern(),
            "minProperties": 1,
            "maxProperties": 1,
            "not": {"allOf": [
                {"not": {"required": ["uniform"]}},
                {"not": {"required": ["lognormal"]}}
            ]},
            "properties": {
                "uniform": {
                    "description": "Uniform between `min` and `max`, inclusive.",
                    "type": "object",
                    "required": ["min", "max"],
                    "properties": {
                        "min": size("Smallest size."),
                        "max": size("Largest size."),
                    },
                    "additionalProperties": false
                },
                "lognormal": {
                    "description": "Log-normal with this mean and standard deviation, clamped to `[min, max]`.",
                    "type": "object",
                    "required": ["mean", "stdDev"],
                    "properties": {
                        "mean": size("Mean size."),
                        "stdDev": size("Standard deviation."),
                        "min": size("Smallest size (default 1)."),
                        "max": size("Largest size (default 64GiB)."),
                    },
                    "additionalProperties": false
                }
            }
        })
    }
}

impl SizeSpec {
    /// Every object of `size`.
    pub fn fixed(size: ByteSize) -> Self {
        SizeSpec::Fixed(size)
    }

    /// Every size this spec gives, with the path suffix of each (`""`, `.uniform.min`, ...).
    pub fn sizes(&self) -> Vec<(&'static str, u64)> {
        match self {
            SizeSpec::Fixed(s) => vec![("", s.0)],
            SizeSpec::Distribution(SizeDistribution::Uniform { min, max }) => {
                vec![(".uniform.min", min.0), (".uniform.max", max.0)]
            }
            SizeSpec::Distribution(SizeDistribution::Lognormal {
                mean,
                std_dev,
                min,
                max,
            }) => vec![
                (".lognormal.mean", mean.0),
                (".lognormal.stdDev", std_dev.0),
                (".lognormal.min", min.0),
                (".lognormal.max", max.0),
            ],
        }
    }

    /// The largest size this spec can produce, for sizing buffers.
    pub fn max(&self) -> u64 {
        match self {
            SizeSpec::Fixed(s) => s.0,
            SizeSpec::Distribution(SizeDistribution::Uniform { max, .. }) => max.0,
            SizeSpec::Distribution(SizeDistribution::Lognormal { max, .. }) => max.0,
        }
    }
}
