//! Parameter sweeps: one workload run once per combination of parameter values, like the
//! tables of parameter studies (chunk size against throughput, range engine on and off per
//! object size, `file://` against `direct://`).
//!
//! A matrix names parameters, each a dotted path into the workload (`objectSize`,
//! `read.chunkSize`, `rangeEngine.enabled`, `target`, `ops.0.weight`) with a list of values.
//! [`Matrix::expand`] builds every combination (the first parameter varies slowest) by setting
//! the values in the workload document and parsing it as a workload, so each combination is
//! checked by exactly the rules a single workload is, and every error names its combination.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_yaml::{Mapping, Value};

use crate::spec::{FieldError, SpecError, Workload};
use crate::units::HumanDuration;

/// Most parameters in a matrix.
pub const MAX_PARAMETERS: usize = 8;
/// Most values of one parameter.
pub const MAX_VALUES: usize = 64;
/// Most combinations of a matrix (the product of the value counts).
pub const MAX_COMBINATIONS: usize = 256;
/// Most repeats of each combination.
pub const MAX_REPEATS: u32 = 100;

/// Run the workload once per combination of these parameter values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Matrix {
    /// Parameter path (dotted, into the workload) to its values, in order: the first varies
    /// slowest. E.g. `objectSize: [4MiB, 16MiB]`, `rangeEngine.enabled: [false, true]`.
    #[schemars(with = "std::collections::BTreeMap<String, Vec<serde_json::Value>>")]
    pub parameters: Mapping,
    /// Measured runs per combination (each reported; the median by throughput stands for the
    /// combination in the table). Default 1.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 100))]
    pub repeats: u32,
    /// An unmeasured run of this length before each combination (caches, connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<HumanDuration>,
    /// The combination the others are compared with, by its parameter values (e.g.
    /// `{rangeEngine.enabled: false}`; parameters left out match any value). Default the
    /// first combination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    pub baseline: Option<Mapping>,
}

fn field_error(path: String, message: String) -> FieldError {
    FieldError { path, message }
}

fn one() -> u32 {
    1
}

/// One combination: each parameter's path with its value for this combination.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Combination(pub Vec<(String, Value)>);

impl fmt::Display for Combination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (path, value)) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{path}={}", scalar(value))?;
        }
        Ok(())
    }
}

/// A YAML value on one line (`4MiB`, `true`, `{uniform: ...}` as flow YAML).
pub fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => "null".into(),
        other => serde_json::to_string(other).unwrap_or_else(|_| "?".into()),
    }
}

/// A combination with its workload, ready to run.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The parameter values of this combination.
    pub combination: Combination,
    /// The base workload with those values set, validated.
    pub workload: Workload,
}

impl Matrix {
    /// Every combination of `base` (the workload document, as YAML) with the parameter values,
    /// validated. All problems are reported at once, each naming its combination.
    pub fn expand(&self, base: &Value) -> Result<Vec<Planned>, SpecError> {
        let params = self.params()?;
        let mut errs = vec![];
        let mut out = vec![];
        let n: usize = params.iter().map(|(_, v)| v.len()).product();
        for k in 0..n {
            let mut rest = k;
            let mut combo = Vec::with_capacity(params.len());
            // Mixed radix, last parameter fastest.
            let mut picks = vec![0; params.len()];
            for (i, (_, values)) in params.iter().enumerate().rev() {
                picks[i] = rest % values.len();
                rest /= values.len();
            }
            for (i, (path, values)) in params.iter().enumerate() {
                combo.push((path.clone(), values[picks[i]].clone()));
            }
            let combination = Combination(combo);
            let mut doc = base.clone();
            let mut ok = true;
            for (path, value) in &combination.0 {
                if let Err(message) = set_path(&mut doc, path, value.clone()) {
                    errs.push(field_error(
                        format!("matrix.parameters.{path}"),
                        format!("combination {} of {n} ({combination}): {message}", k + 1),
                    ));
                    ok = false;
                }
            }
            if !ok {
                continue;
            }
            let text = serde_yaml::to_string(&doc).map_err(|e| SpecError::Parse {
                path: "matrix".into(),
                message: e.to_string(),
            })?;
            match Workload::from_yaml(&text) {
                Ok(workload) => out.push(Planned {
                    combination,
                    workload,
                }),
                Err(e) => errs.push(field_error(
                    "matrix".to_string(),
                    format!("combination {} of {n} ({combination}): {e}", k + 1),
                )),
            }
        }
        if errs.is_empty() {
            Ok(out)
        } else {
            Err(SpecError::Invalid(errs))
        }
    }

    /// The parameters with their values, checked for shape and size.
    fn params(&self) -> Result<Vec<(String, Vec<Value>)>, SpecError> {
        let bad = |path: &str, message: String| {
            SpecError::Invalid(vec![field_error(path.to_string(), message)])
        };
        if self.parameters.is_empty() {
            return Err(bad(
                "matrix.parameters",
                "give at least one parameter".into(),
            ));
        }
        if self.parameters.len() > MAX_PARAMETERS {
            return Err(bad(
                "matrix.parameters",
                format!(
                    "at most {MAX_PARAMETERS} parameters (got {})",
                    self.parameters.len()
                ),
            ));
        }
        if !(1..=MAX_REPEATS).contains(&self.repeats) {
            return Err(bad(
                "matrix.repeats",
                format!("must be 1 to {MAX_REPEATS} (got {})", self.repeats),
            ));
        }
        let mut out = vec![];
        let mut total: usize = 1;
        for (k, v) in &self.parameters {
            let Value::String(path) = k else {
                return Err(bad(
                    "matrix.parameters",
                    format!("`{}` is not a path", scalar(k)),
                ));
            };
            let at = format!("matrix.parameters.{path}");
            check_path(path).map_err(|m| bad(&at, m))?;
            let Value::Sequence(values) = v else {
                return Err(bad(&at, "give a list of values".into()));
            };
            if values.is_empty() || values.len() > MAX_VALUES {
                return Err(bad(
                    &at,
                    format!("give 1 to {MAX_VALUES} values (got {})", values.len()),
                ));
            }
            total = total.saturating_mul(values.len());
            out.push((path.clone(), values.clone()));
        }
        if total > MAX_COMBINATIONS {
            return Err(bad(
                "matrix.parameters",
                format!("at most {MAX_COMBINATIONS} combinations (got {total})"),
            ));
        }
        Ok(out)
    }

    /// How many combinations the parameters make (saturating; before validation a
    /// parameter that is not a list counts as one value).
    pub fn combinations(&self) -> usize {
        self.parameters
            .values()
            .map(|v| match v {
                Value::Sequence(s) => s.len().max(1),
                _ => 1,
            })
            .fold(1usize, |a, b| a.saturating_mul(b))
    }

    /// Index of the baseline combination in `planned` (0 without `baseline`).
    pub fn baseline_index(&self, planned: &[Planned]) -> Result<usize, SpecError> {
        let Some(want) = &self.baseline else {
            return Ok(0);
        };
        planned
            .iter()
            .position(|p| {
                want.iter().all(|(k, v)| {
                    p.combination
                        .0
                        .iter()
                        .any(|(path, value)| Value::String(path.clone()) == *k && value == v)
                })
            })
            .ok_or_else(|| {
                SpecError::Invalid(vec![field_error(
                    "matrix.baseline".to_string(),
                    "matches no combination (give parameter paths with one of their values)"
                        .to_string(),
                )])
            })
    }
}

/// A path is dotted names (letters, digits) or list indexes: `read.chunkSize`, `ops.0.weight`.
fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() || path.len() > 128 {
        return Err("a path is 1 to 128 characters".into());
    }
    if path == "matrix" || path.starts_with("matrix.") {
        return Err("a matrix cannot vary itself".into());
    }
    for seg in path.split('.') {
        if seg.is_empty() || !seg.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!(
                "`{path}` is not a dotted path of field names or list indexes (e.g. read.chunkSize, ops.0.weight)"
            ));
        }
    }
    Ok(())
}

/// Set `path` in `doc` to `value`, creating missing sections. A list index must exist.
fn set_path(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let segs: Vec<&str> = path.split('.').collect();
    let mut cur = doc;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        if cur.is_null() {
            // `read:` written with nothing under it: a section to fill.
            *cur = Value::Mapping(Mapping::new());
        }
        let slot = match cur {
            Value::Mapping(m) => m
                .entry(Value::String((*seg).to_string()))
                .or_insert(Value::Null),
            Value::Sequence(items) => {
                let idx: usize = seg
                    .parse()
                    .map_err(|_| format!("`{seg}` in {path} must be a list index"))?;
                let len = items.len();
                items
                    .get_mut(idx)
                    .ok_or_else(|| format!("{path}: index {idx} is past the list's {len} items"))?
            }
            _ => {
                return Err(format!(
                    "{path}: `{}` is a value, not a section",
                    segs[..i].join(".")
                ))
            }
        };
        if last {
            *slot = value;
            return Ok(());
        }
        cur = slot;
    }
    Ok(())
}

/// A standalone file with a `matrix:` section: the workload (everything else) and the matrix.
pub fn split(text: &str) -> Result<Option<(Value, Matrix)>, SpecError> {
    let parse = |e: serde_yaml::Error| SpecError::Parse {
        path: "workload".into(),
        message: e.to_string(),
    };
    let mut doc: Value = serde_yaml::from_str(text).map_err(parse)?;
    let Value::Mapping(m) = &mut doc else {
        return Ok(None);
    };
    let Some(matrix) = m.remove("matrix") else {
        return Ok(None);
    };
    let matrix: Matrix =
        serde_path_to_error::deserialize(matrix).map_err(|e| SpecError::Parse {
            path: format!("matrix.{}", e.path()),
            message: e.into_inner().to_string(),
        })?;
    Ok(Some((doc, matrix)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "target: file:///tmp/x\nduration: 1s\nops: [{op: get}]\n";

    fn expand(matrix: &str) -> Result<Vec<Planned>, SpecError> {
        let (doc, m) = split(&format!("{BASE}matrix:\n{matrix}"))
            .expect("parses")
            .expect("has a matrix");
        m.expand(&doc)
    }

    #[test]
    fn combinations_in_order_first_parameter_slowest() {
        let p = expand(
            "  parameters:\n    objectSize: [4KiB, 8KiB]\n    read.chunkSize: [1KiB, 2KiB, 4KiB]\n",
        )
        .expect("expands");
        let names: Vec<String> = p.iter().map(|p| p.combination.to_string()).collect();
        assert_eq!(
            names,
            [
                "objectSize=4KiB, read.chunkSize=1KiB",
                "objectSize=4KiB, read.chunkSize=2KiB",
                "objectSize=4KiB, read.chunkSize=4KiB",
                "objectSize=8KiB, read.chunkSize=1KiB",
                "objectSize=8KiB, read.chunkSize=2KiB",
                "objectSize=8KiB, read.chunkSize=4KiB",
            ]
        );
        assert_eq!(
            p[5].workload.object_size,
            crate::spec::SizeSpec::Fixed(crate::units::ByteSize(8192))
        );
        assert_eq!(p[4].workload.read.chunk_size.map(|c| c.bytes()), Some(2048));
    }

    #[test]
    fn a_bad_value_names_its_combination_and_field() {
        let err = expand("  parameters:\n    concurrency: [4, 0, -1]\n").expect_err("invalid");
        let text = err.to_string();
        assert!(
            text.contains("combination 2 of 3 (concurrency=0)")
                && text.contains("combination 3 of 3 (concurrency=-1)")
                && !text.contains("combination 1"),
            "{text}"
        );
        let err = expand("  parameters:\n    nosuchField: [1]\n").expect_err("unknown field");
        assert!(
            err.to_string()
                .contains("combination 1 of 1 (nosuchField=1)")
                && err.to_string().contains("nosuchField"),
            "{err}"
        );
        let err = expand("  parameters:\n    duration.x: [1]\n").expect_err("into a value");
        assert!(err.to_string().contains("`duration` is a value"), "{err}");
    }

    #[test]
    fn shape_and_size_are_bounded() {
        for (m, want) in [
            ("  parameters: {}\n", "give at least one parameter"),
            ("  parameters:\n    objectSize: 4KiB\n", "give a list of values"),
            ("  parameters:\n    objectSize: []\n", "give 1 to 64 values"),
            ("  parameters:\n    'a b': [1]\n", "is not a dotted path"),
            ("  parameters:\n    matrix.repeats: [1]\n", "cannot vary itself"),
            ("  parameters:\n    seed: [1]\n  repeats: 0\n", "must be 1 to 100"),
            (
                "  parameters:\n    seed: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]\n    concurrency: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]\n",
                "at most 256 combinations (got 272)",
            ),
        ] {
            let err = expand(m).expect_err(m).to_string();
            assert!(err.contains(want), "{m}: {err}");
        }
    }

    #[test]
    fn baseline_is_found_by_values() {
        let (doc, m) = split(&format!(
            "{BASE}matrix:\n  parameters:\n    objectSize: [4KiB, 8KiB]\n    read.chunkSize: [1KiB, 2KiB]\n  baseline: {{objectSize: 8KiB}}\n"
        ))
        .expect("parses")
        .expect("matrix");
        let p = m.expand(&doc).expect("expands");
        assert_eq!(m.baseline_index(&p).expect("found"), 2);
        let (doc, m) = split(&format!(
            "{BASE}matrix:\n  parameters:\n    objectSize: [4KiB]\n  baseline: {{objectSize: 1MiB}}\n"
        ))
        .expect("parses")
        .expect("matrix");
        let p = m.expand(&doc).expect("expands");
        assert!(m.baseline_index(&p).is_err());
    }

    #[test]
    fn a_file_without_matrix_is_not_split() {
        assert!(split(BASE).expect("parses").is_none());
    }
}
