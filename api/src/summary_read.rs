//! Reading a summary of any format version this build knows, and refusing the others by
//! their version.
//!
//! Every reader of summaries (`merge`, `compare`, `report`, the operator) goes through
//! [`read`]: it looks at the document's version before anything else, so a summary from a
//! newer benchrun is refused with its version named instead of failing on some field the
//! newer format changed, and an older one is upgraded to the current in-memory form.
//!
//! Versions:
//! - 1: the version was `version`; no `toolVersion`, no `workload`.
//! - 2: `schemaVersion`, `toolVersion`, `workload` (the effective workload).

use serde::Deserialize;

use crate::stats::{Summary, OLDEST_SUMMARY_VERSION, SUMMARY_VERSION, TOOL_VERSION};

/// Why a text is not a summary this build reads.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not a JSON object with a version.
    #[error("not a summary: {0}")]
    NotASummary(String),
    /// A version this build does not read.
    #[error("summary schemaVersion {version} is not supported: benchrun {TOOL_VERSION} reads schemaVersion {OLDEST_SUMMARY_VERSION} to {SUMMARY_VERSION}{hint}", hint = if *.version > SUMMARY_VERSION { " (it was written by a newer benchrun: read it with that version)" } else { "" })]
    Unsupported {
        /// The version the document declares.
        version: u32,
    },
    /// The version is known but the document does not match it.
    #[error("not a valid summary of schemaVersion {version}: {message}")]
    Invalid {
        /// The version the document declares.
        version: u32,
        /// What did not match, with its path.
        message: String,
    },
}

/// Only the version, whatever else the document holds.
#[derive(Deserialize)]
struct Probe {
    /// `schemaVersion` since version 2, `version` before.
    #[serde(rename = "schemaVersion", alias = "version")]
    version: Option<u32>,
}

/// Parse a summary of any supported version, upgraded to [`SUMMARY_VERSION`]: fields a
/// version did not have stay absent (`toolVersion`, `workload` for version 1).
pub fn read(text: &str) -> Result<Summary, ReadError> {
    let probe: Probe =
        serde_json::from_str(text).map_err(|e| ReadError::NotASummary(e.to_string()))?;
    let version = probe.version.ok_or_else(|| {
        ReadError::NotASummary("it has no `schemaVersion` (nor the `version` of version 1)".into())
    })?;
    check(version)?;
    let de = &mut serde_json::Deserializer::from_str(text);
    let mut s: Summary = serde_path_to_error::deserialize(de).map_err(|e| ReadError::Invalid {
        version,
        message: e.to_string(),
    })?;
    // Version 1 differs from 2 only by the name of this field and by the fields 2 added,
    // which are optional: the upgrade is the version number.
    s.schema_version = SUMMARY_VERSION;
    Ok(s)
}

/// Refuse a version this build does not read (for summaries parsed inside another document,
/// such as a sweep's result).
pub fn check(version: u32) -> Result<(), ReadError> {
    if (OLDEST_SUMMARY_VERSION..=SUMMARY_VERSION).contains(&version) {
        Ok(())
    } else {
        Err(ReadError::Unsupported { version })
    }
}

/// The JSON Schema of the summaries this build writes (`benchrun-worker schema --summary`).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(Summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-1 summary as benchrun 0.1.0 before this change wrote it (one GET).
    pub(crate) const V1: &str = include_str!("../tests/fixtures/summary-v1.json");

    #[test]
    fn a_version_1_summary_is_read_and_upgraded() {
        let s = read(V1).unwrap();
        assert_eq!(s.schema_version, SUMMARY_VERSION);
        assert_eq!(
            (s.tool_version.as_deref(), s.workload.is_none()),
            (None, true)
        );
        assert!(s.ops.values().map(|o| o.count).sum::<u64>() > 0);
        // And it merges with a current one.
        let mut now = s.clone();
        now.tool_version = Some(TOOL_VERSION.into());
        let m = Summary::merge(&[s, now]).unwrap();
        assert_eq!(m.tool_version.as_deref(), Some(TOOL_VERSION));
        assert_eq!(m.workers, 2);
    }

    #[test]
    fn a_future_version_is_refused_by_its_number() {
        let future = V1.replacen("\"version\": 1", "\"schemaVersion\": 7", 1);
        assert_ne!(future, V1, "the fixture has a version to replace");
        let e = read(&future).unwrap_err().to_string();
        assert!(e.contains("schemaVersion 7 is not supported"), "{e}");
        assert!(e.contains("newer benchrun"), "{e}");
        // Refused before any other field is looked at: a newer format may change them all.
        let e = read(r#"{"schemaVersion": 3, "ops": "a newer shape"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("schemaVersion 3"), "{e}");
        let e = read(r#"{"schemaVersion": 0}"#).unwrap_err().to_string();
        assert!(e.contains("schemaVersion 0 is not supported"), "{e}");
        assert!(!e.contains("newer"), "{e}");
    }

    #[test]
    fn not_a_summary_says_so() {
        for (text, want) in [
            ("[]", "not a summary"),
            ("{}", "no `schemaVersion`"),
            (r#"{"schemaVersion": 2, "target": 5}"#, "target"),
        ] {
            let e = read(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn a_current_summary_round_trips() {
        let mut s = read(V1).unwrap();
        s.tool_version = Some(TOOL_VERSION.into());
        s.workload = Some(
            crate::Workload::from_yaml("target: file:///tmp/x\nduration: 1s\nops: [{op: get}]\n")
                .unwrap(),
        );
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            text.starts_with(r#"{"schemaVersion":2,"toolVersion":""#),
            "{text:.80}"
        );
        assert!(!text.contains(r#""version""#));
        // Counts and histograms exactly (derived floats may differ in their last bit).
        let back = read(&text).unwrap();
        assert!(
            back.ops == s.ops && back.workload == s.workload && back.tool_version == s.tool_version
        );
    }
}
