//! Op-logs on real files: `run --oplog` records every op exactly once, `replay` issues the
//! same ops at the same times (scaled, keys remapped) against another directory, and a
//! damaged log is refused with its offset before anything is written.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use benchrun_worker::oplog::{Phase, Reader, Record};
use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "worker failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("summary is JSON")
}

/// Run `workload` recording `log`; its summary.
fn record(dir: &Path, workload: &str, log: &Path) -> Value {
    let file = dir.join("workload.yaml");
    std::fs::write(&file, workload).unwrap();
    let summary = dir.join("run.json");
    ok(bin()
        .args(["run", file.to_str().unwrap(), "--progress", "never"])
        .arg("--summary")
        .arg(&summary)
        .arg("--oplog")
        .arg(log)
        .output()
        .unwrap());
    json(&summary)
}

/// Replay `log` against `target` with `extra` options; its summary.
fn replay(dir: &Path, log: &Path, target: &Path, name: &str, extra: &[&str]) -> Value {
    let summary = dir.join(format!("{name}.json"));
    ok(bin()
        .arg("replay")
        .arg(log)
        .arg("--target")
        .arg(format!("file://{}", target.display()))
        .arg("--summary")
        .arg(&summary)
        .args(extra)
        .output()
        .unwrap());
    json(&summary)
}

fn read_log(log: &Path) -> Vec<Record> {
    let mut r = Reader::open(log).expect("the log opens");
    let mut out = vec![];
    while let Some(rec) = r.next_record().expect("the log reads") {
        out.push(rec);
    }
    out
}

/// (path relative to `dir`, size) of every file under `dir`.
fn files(dir: &Path) -> BTreeMap<String, u64> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, u64>) {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let m = e.metadata().unwrap();
                if m.is_dir() {
                    walk(root, &e.path(), out);
                } else {
                    let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                    out.insert(rel, m.len());
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn count(s: &Value, op: &str) -> u64 {
    s["ops"][op]["count"].as_u64().unwrap_or(0)
}

fn mixed(dir: &Path) -> String {
    format!(
        r#"
target: file://{}
totalOps: 300
concurrency: 4
ops:
  - {{ op: get, weight: 2 }}
  - {{ op: put, weight: 2 }}
  - {{ op: stat, weight: 1 }}
objectSize: {{ uniform: {{ min: 1KiB, max: 64KiB }} }}
dataset: {{ objects: 20, prefix: data/, cleanup: false }}
"#,
        dir.display()
    )
}

#[test]
fn every_op_is_logged_once_and_a_replay_repeats_them_elsewhere() {
    let dir = scratch();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let log = dir.path().join("run.oplog.gz");
    let s = record(dir.path(), &mixed(&a), &log);
    let recs = read_log(&log);
    assert_eq!(s["oplog"]["records"].as_u64(), Some(recs.len() as u64));
    assert_eq!(s["oplog"]["dropped"].as_u64(), Some(0));
    assert!(recs
        .iter()
        .all(|r| r.phase == Phase::Measured && r.error.is_none()));
    for op in ["get", "put", "stat"] {
        let logged = recs.iter().filter(|r| r.op.as_str() == op).count() as u64;
        assert_eq!(logged, count(&s, op), "{op}: log and summary");
    }
    assert_eq!(recs.len(), 300);
    // Every record's key and size are the object's: PUT keys are written once each, GETs and
    // STATs name dataset objects of their size.
    let on_disk = files(&a);
    let puts: Vec<&Record> = recs.iter().filter(|r| r.op.as_str() == "put").collect();
    let put_keys: std::collections::BTreeSet<&str> = puts.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(put_keys.len(), puts.len(), "each PUT key once");
    for r in &recs {
        assert_eq!(on_disk.get(&r.key), Some(&r.size), "{r:?}");
        if r.op.as_str() != "stat" {
            assert_eq!(r.bytes, r.size, "{r:?}");
        }
    }
    let bytes: u64 = recs
        .iter()
        .filter(|r| r.op.as_str() == "get")
        .map(|r| r.bytes)
        .sum();
    assert_eq!(Some(bytes), s["ops"]["get"]["bytes"].as_u64());
    // Offsets are from the measured stage's start, in order of start within a task.
    assert!(recs.iter().all(|r| r.offset_us >= 0));

    let r = replay(
        dir.path(),
        &log,
        &b,
        "replay",
        &["--prepare", "--speed", "4"],
    );
    for op in ["get", "put", "stat"] {
        assert_eq!(count(&r, op), count(&s, op), "{op}: replay and run");
        assert_eq!(r["ops"][op]["errors"].as_u64(), Some(0), "{op}: {r}");
    }
    assert_eq!(r["stoppedBy"], "oplog");
    assert_eq!(r["openLoop"]["due"].as_u64(), Some(300));
    let replayed = files(&b);
    for p in &puts {
        assert_eq!(
            replayed.get(&p.key),
            Some(&p.size),
            "PUT {} replayed",
            p.key
        );
    }
    assert_eq!(
        r["ops"]["get"]["bytes"], s["ops"]["get"]["bytes"],
        "the same objects read"
    );
    // The replay's summary is a summary: compare and report read it.
    ok(bin()
        .arg("compare")
        .arg(dir.path().join("run.json"))
        .arg(dir.path().join("replay.json"))
        .output()
        .unwrap());
    ok(bin()
        .arg("report")
        .arg(dir.path().join("run.json"))
        .arg(dir.path().join("replay.json"))
        .output()
        .unwrap());

    // Remapped: every key under `moved/` instead of `data/`, nothing under `data/`.
    let c = dir.path().join("c");
    let m = replay(
        dir.path(),
        &log,
        &c,
        "remapped",
        &["--prepare", "--speed", "4", "--remap", "data/=>moved/"],
    );
    assert_eq!(m["ops"]["get"]["errors"].as_u64(), Some(0), "{m}");
    let moved = files(&c);
    assert!(moved.keys().all(|k| k.starts_with("moved/")), "{moved:?}");
    for p in &puts {
        let key = p.key.replacen("data/", "moved/", 1);
        assert_eq!(moved.get(&key), Some(&p.size), "PUT {key} remapped");
    }
}

#[test]
fn replay_keeps_the_recorded_timing_scaled_by_speed() {
    let dir = scratch();
    let log = dir.path().join("paced.oplog.gz");
    // Open loop at 100 ops/s for 2 s: ops spread evenly over the stage.
    let workload = format!(
        r#"
target: file://{}
duration: 2s
rateLimit: 100
concurrency: 2
ops: [{{ op: put, weight: 1 }}]
objectSize: 1KiB
dataset: {{ objects: 1, prefix: data/, cleanup: false }}
"#,
        dir.path().join("a").display()
    );
    record(dir.path(), &workload, &log);
    let recs = read_log(&log);
    let last = recs.iter().map(|r| r.offset_us).max().unwrap() as f64 / 1e6;
    assert!(last > 1.9, "the log spans the stage: last op at {last} s");
    let at = |speed: &str| {
        let r = replay(
            dir.path(),
            &log,
            &dir.path().join(format!("at-{speed}")),
            &format!("at-{speed}"),
            &["--speed", speed],
        );
        assert_eq!(count(&r, "put"), recs.len() as u64);
        r["elapsedSeconds"].as_f64().unwrap()
    };
    let (normal, fast) = (at("1"), at("4"));
    // Lower bounds hold by construction (no op is issued before its time); the upper bound
    // leaves a loaded machine a whole second.
    assert!(normal >= last, "speed 1: {normal} s for ops up to {last} s");
    assert!(
        fast >= last / 4.0,
        "speed 4: {fast} s for ops up to {last} s"
    );
    assert!(
        fast < last / 4.0 + 1.0,
        "speed 4: {fast} s, ops up to {last} s"
    );
    // A duration limit issues only the ops meant to start before it.
    let limited = replay(
        dir.path(),
        &log,
        &dir.path().join("limited"),
        "limited",
        &["--duration-limit", "1s"],
    );
    let before = recs.iter().filter(|r| r.offset_us <= 1_000_000).count() as u64;
    assert_eq!(count(&limited, "put"), before);
    assert_eq!(limited["stoppedBy"], "durationLimit");
}

fn gunzip(path: &Path) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    s
}

fn gzip(path: &Path, text: &str) {
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap();
}

/// Replay a damaged log with --prepare: refused, naming the file, record and offset, and
/// nothing at all written to the target.
fn refused(dir: &Path, log: &Path, expect: &str) {
    let target: PathBuf = dir.join(format!(
        "target-{}",
        log.file_name().unwrap().to_string_lossy()
    ));
    let out = bin()
        .arg("replay")
        .arg(log)
        .arg("--prepare")
        .arg("--target")
        .arg(format!("file://{}", target.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{} was replayed: {err}",
        log.display()
    );
    let want = format!("{}: corrupt op-log at {expect}", log.display());
    assert!(err.contains(&want), "{err}\nshould say: {want}");
    assert!(files(&target).is_empty(), "written: {:?}", files(&target));
}

#[test]
fn damaged_logs_are_refused_with_their_offset_before_anything_is_written() {
    let dir = scratch();
    let log = dir.path().join("good.oplog.gz");
    record(dir.path(), &mixed(&dir.path().join("a")), &log);
    let text = gunzip(&log);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let offset = |n: usize| lines[..n].iter().map(|l| l.len()).sum::<usize>();

    // A record in the middle with an unknown op.
    let n = lines.len() / 2;
    let mut bad = lines.clone();
    let broken = lines[n].replacen("\tm\t", "\tm\tfly", 1);
    bad[n] = &broken;
    let corrupt = dir.path().join("corrupt.oplog.gz");
    gzip(&corrupt, &bad.concat());
    refused(
        dir.path(),
        &corrupt,
        &format!("record {n} (byte offset {}): op `fly", offset(n)),
    );

    // Cut at a line boundary: no end line.
    let last = lines.len() - 1;
    let cut = dir.path().join("no-end.oplog.gz");
    gzip(&cut, &lines[..last].concat());
    refused(
        dir.path(),
        &cut,
        &format!(
            "record {last} (byte offset {}): the log ends without its end line",
            offset(last)
        ),
    );

    // The compressed file cut in half.
    let bytes = std::fs::read(&log).unwrap();
    let half = dir.path().join("half.oplog.gz");
    std::fs::write(&half, &bytes[..bytes.len() / 2]).unwrap();
    refused(dir.path(), &half, "record ");

    // Not an op-log at all.
    let other = dir.path().join("other.oplog.gz");
    gzip(&other, "hello\n");
    refused(
        dir.path(),
        &other,
        "record 0 (byte offset 0): not a benchrun op-log",
    );
}

#[test]
fn a_replay_that_cannot_run_writes_nothing_first() {
    let dir = scratch();
    let log = dir.path().join("good.oplog.gz");
    record(dir.path(), &mixed(&dir.path().join("a")), &log);
    let target = dir.path().join("untouched");
    let out = bin()
        .arg("replay")
        .arg(&log)
        .args(["--prepare", "--speed", "0", "--target"])
        .arg(format!("file://{}", target.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--speed 0 must be a number above 0"), "{err}");
    assert!(files(&target).is_empty(), "written: {:?}", files(&target));
}
