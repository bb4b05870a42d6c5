//! The summary's versioned schema through the real binary: a real run's summary validates
//! against `schema --summary` and carries its version, the tool's version and the effective
//! workload; a summary of the previous format version (as benchrun wrote it before the
//! versioned schema) is read by `compare`, `report` and `merge`; a summary of a version this
//! build does not know is refused by each, naming the version.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A version-1 summary, as `benchrun-worker run --summary` wrote it before this format.
fn v1_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../api/tests/fixtures/summary-v1.json")
}

fn worker(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
        .args(args)
        .output()
        .expect("run benchrun-worker")
}

fn ok(args: &[&str]) -> String {
    let out = worker(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A short file:// run's summary, in `dir`.
fn real_summary(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir(&data).unwrap();
    let w = dir.join("w.yaml");
    // Only a few keys: the summary's workload must hold the rest, filled in.
    std::fs::write(
        &w,
        format!(
            "target: file://{}\ntotalOps: 200\nobjectSize: 4KiB\ndataset: {{ objects: 10 }}\n\
             ops: [{{op: get, weight: 6}}, {{op: put, weight: 3}}, {{op: stat}}]\n",
            data.display()
        ),
    )
    .unwrap();
    let out = dir.join("summary.json");
    ok(&[
        "run",
        "--progress",
        "never",
        "--summary",
        out.to_str().unwrap(),
        w.to_str().unwrap(),
    ]);
    out
}

fn validate(schema: &Value, doc: &Value, what: &str) {
    let v = jsonschema::validator_for(schema).expect("the printed schema is a valid JSON Schema");
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}:\n{}", errors.join("\n"));
}

#[test]
fn a_real_summary_validates_against_the_printed_schema_and_says_what_ran() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = real_summary(dir.path());
    let schema: Value = serde_json::from_str(&ok(&["schema", "--summary"])).unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    validate(&schema, &doc, "a run's summary");

    assert_eq!(doc["schemaVersion"], 2);
    assert!(doc.get("version").is_none(), "the old name is not written");
    assert_eq!(doc["toolVersion"], env!("CARGO_PKG_VERSION"));
    let w = &doc["workload"];
    assert_eq!(w["totalOps"], 200);
    // Defaults the file did not give, as the engine ran them.
    for key in ["concurrency", "seed", "dataset", "read", "write", "storage"] {
        assert!(w.get(key).is_some(), "workload.{key} missing: {w}");
    }
    assert_eq!(w["dataset"]["objects"], 10);

    // The schema is strict enough to catch a wrong document: it is not `true`.
    let mut bad = doc.clone();
    bad["ops"]["get"]["count"] = Value::String("many".into());
    let v = jsonschema::validator_for(&schema).unwrap();
    assert!(!v.is_valid(&bad), "a string count passed the schema");
    let mut bad = doc.clone();
    bad.as_object_mut().unwrap().remove("schemaVersion");
    assert!(!v.is_valid(&bad), "a summary without schemaVersion passed");
}

#[test]
fn a_version_1_summary_is_read_by_compare_report_and_merge() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let old = v1_fixture();
    let old = old.to_str().unwrap();
    let text = std::fs::read_to_string(old).unwrap();
    assert!(
        text.contains("\"version\": 1") && !text.contains("schemaVersion"),
        "the fixture is a version-1 summary"
    );
    let new = real_summary(dir.path());
    let new = new.to_str().unwrap();

    let c = ok(&["compare", old, new]);
    assert!(c.contains("get"), "{c}");
    let r = ok(&["report", old, new]);
    assert!(r.contains("get"), "{r}");
    let out = dir.path().join("merged.json");
    ok(&["merge", old, new, "--summary", out.to_str().unwrap()]);
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        merged["schemaVersion"], 2,
        "a merge writes the current version"
    );
    assert_eq!(merged["workers"], 2);
    // The old part had no tool version and no workload: the new one's version stands, the
    // workload is absent (the parts did not all say they ran the same one).
    assert_eq!(merged["toolVersion"], env!("CARGO_PKG_VERSION"));
    assert!(merged.get("workload").is_none());
    let schema: Value = serde_json::from_str(&ok(&["schema", "--summary"])).unwrap();
    validate(&schema, &merged, "a merge of old and new");
}

#[test]
fn a_summary_of_an_unknown_version_is_refused_naming_it() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let text = std::fs::read_to_string(v1_fixture()).unwrap();
    let future = dir.path().join("future.json");
    std::fs::write(
        &future,
        text.replacen("\"version\": 1", "\"schemaVersion\": 9", 1),
    )
    .unwrap();
    let f = future.to_str().unwrap();
    let old = v1_fixture();
    let old = old.to_str().unwrap();
    for args in [
        vec!["compare", old, f],
        vec!["report", f],
        vec!["merge", old, f],
    ] {
        let out = worker(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("future.json: summary schemaVersion 9 is not supported")
                && err.contains("newer benchrun"),
            "{args:?}: {err}"
        );
    }
}
