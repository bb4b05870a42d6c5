//! A matrix file run by the real `benchrun-worker` binary on a real directory: every
//! combination runs in order with its own parameter values applied, repeats are kept, the
//! table compares with the baseline combination, and a bad value is refused before anything
//! runs, naming its combination.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

fn run(workload: &str, dir: &Path) -> (Output, Option<Value>) {
    let file = dir.join("workload.yaml");
    std::fs::write(&file, workload).expect("write workload");
    let summary = dir.join("summary.json");
    let out = bin()
        .args(["run", file.to_str().expect("utf8 path")])
        .args(["--summary", summary.to_str().expect("utf8 path")])
        .args(["--progress", "never"])
        .output()
        .expect("run the worker");
    let json = std::fs::read_to_string(&summary)
        .ok()
        .map(|t| serde_json::from_str(&t).expect("summary is JSON"));
    (out, json)
}

#[test]
fn every_combination_runs_with_its_values_and_repeats() {
    let dir = scratch();
    let target = dir.path().join("data");
    let workload = format!(
        r#"
target: file://{}
totalOps: 60
concurrency: 2
ops: [{{op: get}}]
objectSize: 4KiB
dataset: {{objects: 6}}
matrix:
  parameters:
    objectSize: [4KiB, 16KiB]
    read.chunkSize: [1KiB, 4KiB]
  repeats: 2
  baseline: {{objectSize: 16KiB, read.chunkSize: 4KiB}}
"#,
        target.display()
    );
    let (out, json) = run(&workload, dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    let json = json.expect("summary written");
    assert_eq!(json["baseline"], 3);
    let combos = json["combinations"].as_array().expect("combinations");
    let names: Vec<&str> = combos
        .iter()
        .map(|c| c["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "objectSize=4KiB, read.chunkSize=1KiB",
            "objectSize=4KiB, read.chunkSize=4KiB",
            "objectSize=16KiB, read.chunkSize=1KiB",
            "objectSize=16KiB, read.chunkSize=4KiB",
        ]
    );
    for c in combos {
        let size: u64 = if c["parameters"]["objectSize"] == "4KiB" {
            4096
        } else {
            16384
        };
        let chunk: u64 = if c["parameters"]["read.chunkSize"] == "1KiB" {
            1024
        } else {
            4096
        };
        let runs = c["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), 2, "two repeats of {}", c["name"]);
        for s in runs {
            let get = &s["ops"]["get"];
            // Exactly the op count, each GET a whole object of this combination's size, read
            // in chunks of this combination's chunk size.
            assert_eq!(get["count"], 60, "{}", c["name"]);
            assert_eq!(get["errors"], 0);
            assert_eq!(get["bytes"].as_u64(), Some(60 * size), "{}", c["name"]);
            // Exactly size/chunk reads per GET (no read past the end).
            assert_eq!(
                get["requests"].as_u64(),
                Some(60 * (size / chunk)),
                "{}: reads for 60 GETs of {size} B in {chunk} B chunks",
                c["name"]
            );
        }
    }
    // The table: a row per combination in order, the baseline marked, the others compared.
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(rows.len(), 4, "{stdout}");
    let header = stdout
        .lines()
        .find(|l| l.contains("combination"))
        .expect("header");
    for col in ["CPU-s/GiB", "CPU %", "min flt", "maj flt", "d ops/s"] {
        assert!(header.contains(col), "{col} in {header}");
    }
    for (i, (row, name)) in rows.iter().zip(&names).enumerate() {
        assert!(row.contains(name), "row {i}: {row}");
        let fields: Vec<&str> = row.split_whitespace().collect();
        let last_two = &fields[fields.len() - 2..];
        // Before the changes: CPU %, then the minor and major page faults of the
        // combination's representative repeat, as its summary has them.
        let n = fields.len();
        let rep = &combos[i]["runs"];
        let faults: Vec<u64> = rep
            .as_array()
            .expect("runs")
            .iter()
            .map(|s| s["process"]["minorFaults"].as_u64().expect("minorFaults"))
            .collect();
        let minor: u64 = fields[n - 4].parse().expect("minor faults");
        assert!(
            faults.contains(&minor),
            "row {i}: {minor} not in {faults:?}: {row}"
        );
        fields[n - 3].parse::<u64>().expect("major faults");
        let cpu: f64 = fields[n - 5].parse().expect("CPU %");
        assert!(cpu >= 0.0, "{row}");
        if i == 3 {
            assert_eq!(last_two, ["base", "base"], "{row}");
        } else {
            // A change is signed, as the reports write it; no change is `0.0%`.
            assert!(
                last_two
                    .iter()
                    .all(|f| *f == "0.0%" || (f.ends_with('%') && f.starts_with(['+', '-']))),
                "row {i} compared with the baseline: {row}"
            );
        }
    }
    assert!(stdout.contains("median of its repeats"), "{stdout}");
    assert!(stderr.contains("combination 4 of 4"), "{stderr}");
    // `report` reads the matrix summary: one entry per combination, the baseline first.
    let out = bin()
        .args([
            "report",
            dir.path().join("summary.json").to_str().expect("path"),
        ])
        .output()
        .expect("report");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let at = |name: &str| {
        text.find(name)
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
    };
    assert!(at(names[3]) < at(names[0]), "baseline first:\n{text}");
    for n in &names {
        at(n);
    }
    // Each combination cleaned up its dataset.
    let left: Vec<_> = walk(&target);
    assert!(left.is_empty(), "left behind: {left:?}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn a_bad_combination_is_refused_before_anything_runs() {
    let dir = scratch();
    let target = dir.path().join("data");
    let workload = format!(
        r#"
target: file://{}
totalOps: 10
ops: [{{op: get}}]
matrix:
  parameters:
    concurrency: [2, 0]
    objectSize: [4KiB, 1MB2]
"#,
        target.display()
    );
    let (out, json) = run(&workload, dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "invalid workload exit code: {stderr}"
    );
    assert!(json.is_none(), "nothing ran, no summary");
    assert!(!target.exists(), "nothing was prepared");
    for combo in [
        "combination 2 of 4 (concurrency=2, objectSize=1MB2)",
        "combination 3 of 4 (concurrency=0, objectSize=4KiB)",
        "combination 4 of 4 (concurrency=0, objectSize=1MB2)",
    ] {
        assert!(stderr.contains(combo), "{combo} missing: {stderr}");
    }
    assert!(!stderr.contains("combination 1 of 4"), "{stderr}");
    // `validate` says the same, and counts combinations of a good file.
    let file = dir.path().join("workload.yaml");
    let out = bin()
        .args(["validate", file.to_str().expect("path")])
        .output()
        .expect("validate");
    assert_eq!(out.status.code(), Some(2));
    std::fs::write(
        &file,
        format!(
            "target: file://{}\ntotalOps: 10\nops: [{{op: get}}]\nmatrix: {{parameters: {{seed: [1, 2, 3]}}}}\n",
            target.display()
        ),
    )
    .expect("write");
    let out = bin()
        .args(["validate", file.to_str().expect("path")])
        .output()
        .expect("validate");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok (3 combinations)"));
}

#[test]
fn a_block_profile_matrix_with_warmup_runs_every_combination_on_one_layout() {
    let dir = scratch();
    let target = dir.path().join("vol");
    let workload = format!(
        r#"
target: direct://{}
totalOps: 200
concurrency: 1
ops: [{{op: read}}]
dataset: {{cleanup: false}}
block: {{blockSize: 4KiB, fileSize: 8MiB}}
matrix:
  parameters:
    block:
      - {{blockSize: 4KiB, queueDepth: 8, access: random, fileSize: 8MiB}}
      - {{blockSize: 1MiB, queueDepth: 2, access: sequential, fileSize: 8MiB}}
    ops.0.op: [read, write]
  warmup: 1s
"#,
        target.display()
    );
    let (out, json) = run(&workload, dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let json = json.expect("summary written");
    let combos = json["combinations"].as_array().expect("combinations");
    assert_eq!(combos.len(), 4);
    for (i, c) in combos.iter().enumerate() {
        let s = &c["runs"][0];
        let op = if c["parameters"]["ops.0.op"] == "read" {
            "read"
        } else {
            "write"
        };
        let bs: u64 = if c["parameters"]["block"]["blockSize"] == "4KiB" {
            4096
        } else {
            1 << 20
        };
        // The warm-up ran beside, not in, the measured run: exactly totalOps, no errors.
        assert_eq!(s["ops"][op]["count"], 200, "{}", c["name"]);
        assert_eq!(s["ops"][op]["errors"], 0, "{}", c["name"]);
        assert_eq!(s["ops"][op]["bytes"], 200 * bs, "{}", c["name"]);
        // One layout for the whole matrix: written by the first combination, reused after.
        assert_eq!(
            s["volume"]["reused"],
            if i == 0 { 0 } else { 1 },
            "{}",
            c["name"]
        );
    }
}
