//! `run --set key=value` (and its short forms `--duration`, `--concurrency`, `--target`):
//! a workload key changed from the command line, so a tweak is not a YAML edit (as fio's
//! `--runtime` next to a job file). Applied to the file's YAML before it is parsed, so the
//! value is checked exactly as if it were written in the file.

use std::fmt;
use std::str::FromStr;

use serde_yaml::{Mapping, Value};

/// One `KEY=VALUE`: a dotted path of the file's keys (`read.chunkSize`, `storage.endpoint`)
/// and a YAML value (`30s`, `64`, `true`, `[get, put]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Set {
    /// The keys from the top of the workload, outermost first.
    pub path: Vec<String>,
    /// The value, parsed as YAML.
    pub value: Value,
}

/// A `--set` that is not `KEY=VALUE`.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("--set {given:?}: {why}")]
pub struct SetError {
    given: String,
    why: String,
}

impl FromStr for Set {
    type Err = SetError;

    fn from_str(s: &str) -> Result<Set, SetError> {
        let err = |why: &str| SetError {
            given: s.to_string(),
            why: why.to_string(),
        };
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| err("give KEY=VALUE, e.g. duration=30s or read.chunkSize=1MiB"))?;
        let path: Vec<String> = key.split('.').map(|k| k.trim().to_string()).collect();
        if path.iter().any(String::is_empty) {
            return Err(err("a key is empty (keys are dotted: storage.endpoint)"));
        }
        let value = if value.is_empty() {
            Value::String(String::new())
        } else {
            serde_yaml::from_str(value).map_err(|e| err(&format!("the value is not YAML: {e}")))?
        };
        Ok(Set { path, value })
    }
}

impl fmt::Display for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = serde_yaml::to_string(&self.value).unwrap_or_default();
        write!(f, "{}={}", self.path.join("."), v.trim_end())
    }
}

impl Set {
    /// `key=value` for a named flag (`--duration 30s` is `--set duration=30s`); the value is
    /// kept a string, so `--target 1` would not become a number.
    pub fn string(key: &str, value: &str) -> Set {
        Set {
            path: vec![key.to_string()],
            value: Value::String(value.to_string()),
        }
    }
}

/// The workload text with every set applied in order (later ones win), as YAML again.
/// A key that is not in the file is added; a key under a value that is not a mapping is
/// refused, naming it.
pub fn apply(text: &str, sets: &[Set]) -> Result<String, String> {
    if sets.is_empty() {
        return Ok(text.to_string());
    }
    let mut doc: Value =
        serde_yaml::from_str(text).map_err(|e| format!("the workload is not YAML: {e}"))?;
    if doc.is_null() {
        doc = Value::Mapping(Mapping::new());
    }
    for set in sets {
        let mut node = &mut doc;
        for (i, key) in set.path.iter().enumerate() {
            let Value::Mapping(map) = node else {
                return Err(format!(
                    "--set {set}: {} is not a mapping in the workload",
                    if i == 0 {
                        "the file".to_string()
                    } else {
                        set.path[..i].join(".")
                    }
                ));
            };
            let k = Value::String(key.clone());
            if i + 1 == set.path.len() {
                map.insert(k, set.value.clone());
                break;
            }
            node = map
                .entry(k)
                .or_insert_with(|| Value::Mapping(Mapping::new()));
        }
    }
    serde_yaml::to_string(&doc).map_err(|e| format!("writing the workload back: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(v: &[&str]) -> Vec<Set> {
        v.iter().map(|s| s.parse().expect(s)).collect()
    }

    #[test]
    fn sets_replace_add_and_nest() {
        let text = "target: file:///tmp/a\nduration: 10s\nread: {chunkSize: 64KiB}\n";
        let out = apply(
            text,
            &sets(&[
                "duration=30s",
                "concurrency=8",
                "read.chunkSize=1MiB",
                "storage.region=x",
            ]),
        )
        .unwrap();
        let v: Value = serde_yaml::from_str(&out).unwrap();
        assert_eq!(v["duration"], Value::String("30s".into()));
        assert_eq!(v["concurrency"], Value::Number(8.into()));
        assert_eq!(v["read"]["chunkSize"], Value::String("1MiB".into()));
        assert_eq!(v["storage"]["region"], Value::String("x".into()));
        assert_eq!(v["target"], Value::String("file:///tmp/a".into()));
        let t = apply(text, &[Set::string("target", "file:///tmp/b")]).unwrap();
        assert!(t.contains("target: file:///tmp/b"), "{t}");
    }

    #[test]
    fn bad_sets_are_refused_with_the_key() {
        assert!("duration"
            .parse::<Set>()
            .unwrap_err()
            .to_string()
            .contains("KEY=VALUE"));
        assert!("a..b=1"
            .parse::<Set>()
            .unwrap_err()
            .to_string()
            .contains("empty"));
        let e = apply("duration: 10s\n", &sets(&["duration.x=1"])).unwrap_err();
        assert!(e.contains("duration is not a mapping"), "{e}");
    }
}
