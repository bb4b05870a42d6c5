//! The real `benchrun-worker` binary against real directories: `file://` and `direct://` on the
//! target dir's filesystem (ext4 here; O_DIRECT capable), and `direct://` on tmpfs, which must
//! be refused.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
}

/// A scratch directory on the build directory's filesystem (not tmpfs, so O_DIRECT works).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

fn run(workload: &str, dir: &Path) -> (Output, Value) {
    let file = dir.join("workload.yaml");
    std::fs::write(&file, workload).unwrap();
    let summary = dir.join("summary.json");
    let out = bin()
        .args([
            "run",
            file.to_str().unwrap(),
            "--summary",
            summary.to_str().unwrap(),
            "--progress",
            "never",
        ])
        .output()
        .expect("run the worker");
    assert!(
        out.status.success(),
        "worker failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let json =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).expect("summary is JSON");
    (out, json)
}

/// (path, size) of every file under `dir`.
fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                out.extend(files(&e.path()));
            } else {
                out.push((e.path(), m.len()));
            }
        }
    }
    out
}

fn op(s: &Value, op: &str, field: &str) -> u64 {
    s["ops"][op][field]
        .as_u64()
        .unwrap_or_else(|| panic!("ops.{op}.{field} missing in {s}"))
}

#[test]
fn file_run_counts_bytes_and_written_sizes_match_the_workload() {
    let dir = scratch();
    let data = dir.path().join("data");
    let workload = format!(
        r#"
target: file://{}
totalOps: 400
concurrency: 4
ops:
  - {{ op: get, weight: 2 }}
  - {{ op: put, weight: 1 }}
  - {{ op: stat, weight: 1 }}
objectSize: {{ uniform: {{ min: 1KiB, max: 300KiB }} }}
dataset: {{ objects: 12, size: 100KiB, cleanup: false }}
read: {{ verify: true }}
"#,
        data.display()
    );
    let (out, s) = run(&workload, dir.path());
    let table = String::from_utf8_lossy(&out.stdout);
    // The default table's columns (`--wide` adds the others).
    for col in [
        "count", "errors", "ops/s", "MiB/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms",
    ] {
        assert!(table.contains(col), "table lacks {col}:\n{table}");
    }
    let (gets, puts, stats) = (
        op(&s, "get", "count"),
        op(&s, "put", "count"),
        op(&s, "stat", "count"),
    );
    assert_eq!(gets + puts + stats, 400, "exactly totalOps operations");
    assert!(
        gets > 120 && puts > 50 && stats > 50,
        "mix followed: {gets} {puts} {stats}"
    );
    for o in ["get", "put", "stat"] {
        assert_eq!(op(&s, o, "errors"), 0, "{o} errors in {s}");
    }
    // Every GET read a whole 100 KiB dataset object, verified byte for byte.
    assert_eq!(op(&s, "get", "bytes"), gets * 100 * 1024);
    // Dataset: 12 files of exactly 100 KiB.
    let ds: Vec<_> = files(&data.join("benchrun"))
        .into_iter()
        .filter(|(p, _)| !p.to_string_lossy().contains("/put/"))
        .collect();
    assert_eq!(ds.len(), 12);
    assert!(ds.iter().all(|(_, n)| *n == 100 * 1024), "{ds:?}");
    // PUTs: one file per PUT, and their sizes add up to the bytes reported.
    let written = files(&data.join("benchrun/put"));
    assert_eq!(written.len() as u64, puts);
    assert_eq!(
        written.iter().map(|(_, n)| n).sum::<u64>(),
        op(&s, "put", "bytes")
    );
    assert!(written.iter().all(|(_, n)| (1024..=300 * 1024).contains(n)));
    assert!(s["process"]["minorFaults"].as_u64().is_some());
    assert_eq!(s["stoppedBy"], "totalOps");
}

#[test]
fn direct_run_writes_exact_unaligned_sizes_and_reads_them_back_verified() {
    let dir = scratch();
    let data = dir.path().join("data");
    // Sizes deliberately not multiples of 4 KiB: the padded tail must be truncated away.
    let workload = format!(
        r#"
target: direct://{}
totalOps: 120
concurrency: 3
ops:
  - {{ op: get, weight: 3 }}
  - {{ op: put, weight: 1 }}
objectSize: 10001
dataset: {{ objects: 6, size: {{ uniform: {{ min: 4097, max: 9MiB }} }}, cleanup: false }}
read: {{ verify: true }}
"#,
        data.display()
    );
    let (_, s) = run(&workload, dir.path());
    assert_eq!(op(&s, "get", "errors") + op(&s, "put", "errors"), 0, "{s}");
    let written = files(&data.join("benchrun/put"));
    assert_eq!(written.len() as u64, op(&s, "put", "count"));
    assert!(written.iter().all(|(_, n)| *n == 10001), "{written:?}");
    // 4 MiB chunks by default: a 9 MiB object takes 3 reads, a 5 KiB one 1.
    let req_per_get = op(&s, "get", "requests") as f64 / op(&s, "get", "count") as f64;
    assert!(
        (1.0..=3.0).contains(&req_per_get),
        "requests per get {req_per_get}"
    );
}

#[test]
fn cleanup_removes_everything_the_run_wrote() {
    let dir = scratch();
    let data = dir.path().join("data");
    let workload = format!(
        "target: file://{}\ntotalOps: 50\nops: [{{op: put}}, {{op: get}}, {{op: delete}}]\nobjectSize: 4KiB\ndataset: {{objects: 5}}\n",
        data.display()
    );
    let (_, s) = run(&workload, dir.path());
    assert!(op(&s, "delete", "count") > 0);
    assert_eq!(files(&data), vec![], "nothing left after cleanup");
    assert_eq!(s["cleanup"]["errors"], 0);
}

#[test]
fn direct_on_tmpfs_fails_with_a_clear_error() {
    let shm = Path::new("/dev/shm");
    let fs = Command::new("stat")
        .args(["-f", "-c", "%T", "/dev/shm"])
        .output()
        .expect("stat");
    assert_eq!(
        String::from_utf8_lossy(&fs.stdout).trim(),
        "tmpfs",
        "this test needs /dev/shm to be tmpfs to prove the refusal"
    );
    let dir = tempfile::tempdir_in(shm).unwrap();
    let file = dir.path().join("w.yaml");
    std::fs::write(
        &file,
        format!(
            "target: direct://{}/d\nduration: 1s\nops: [{{op: get}}]\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let out = bin()
        .args(["run", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is on tmpfs, which does not support O_DIRECT"),
        "{err}"
    );
    assert!(
        err.contains("use file://"),
        "the error says what to do instead: {err}"
    );
}

#[test]
fn validate_names_the_bad_field_and_exits_2() {
    let dir = scratch();
    let good = dir.path().join("good.yaml");
    std::fs::write(
        &good,
        "target: file:///tmp/x\nduration: 5s\nops: [{op: get}]\n",
    )
    .unwrap();
    let out = bin()
        .args(["validate", good.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "target: file:///tmp/x\nduration: 5s\nops: [{op: get}]\nrangeEngin: {enabled: true}\n",
    )
    .unwrap();
    let out = bin()
        .args(["validate", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown field `rangeEngin`"), "{err}");
    assert!(err.contains("bad.yaml"), "{err}");
}

#[test]
fn merge_adds_counts_and_keeps_histograms_exact() {
    let dir = scratch();
    let mut paths = vec![];
    for i in 0..2 {
        let d = dir.path().join(format!("w{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let workload = format!(
            "target: file://{}/data\ntotalOps: {}\nops: [{{op: put}}]\nobjectSize: 8KiB\ndataset: {{objects: 0}}\n",
            d.display(),
            100 * (i + 1)
        );
        run(&workload, &d);
        paths.push(d.join("summary.json"));
    }
    let merged = dir.path().join("merged.json");
    let out = bin()
        .args([
            "merge",
            paths[0].to_str().unwrap(),
            paths[1].to_str().unwrap(),
            "--summary",
            merged.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert_eq!(m["workers"], 2);
    assert_eq!(op(&m, "put", "count"), 300);
    assert_eq!(op(&m, "put", "bytes"), 300 * 8192);
    assert!(String::from_utf8_lossy(&out.stdout).contains("merged result"));
}

#[test]
fn cleanup_never_deletes_an_existing_dataset_it_did_not_prepare() {
    let dir = scratch();
    let data = dir.path().join("data");
    let existing = data.join("shared/obj-a");
    std::fs::create_dir_all(existing.parent().unwrap()).unwrap();
    std::fs::write(&existing, vec![7u8; 5000]).unwrap();
    let workload = format!(
        "target: file://{}\ntotalOps: 40\nops: [{{op: get}}, {{op: put}}]\nobjectSize: 1KiB\ndataset: {{prefix: shared/, prepare: false}}\n",
        data.display()
    );
    let (_, s) = run(&workload, dir.path());
    assert!(op(&s, "get", "count") > 0 && op(&s, "put", "count") > 0);
    assert_eq!(
        op(&s, "get", "bytes"),
        op(&s, "get", "count") * 5000,
        "read the listed size"
    );
    assert_eq!(
        files(&data),
        vec![(existing, 5000)],
        "only the run's own PUTs were removed"
    );
}

#[test]
fn direct_whole_object_reads_are_verified_and_one_aligned_read_each() {
    let dir = scratch();
    let workload = format!(
        "target: direct://{}/data\ntotalOps: 20\nconcurrency: 2\nops: [{{op: get}}]\ndataset: {{objects: 3, size: 9000001}}\nread: {{wholeObject: true, verify: true}}\n",
        dir.path().display()
    );
    let (_, s) = run(&workload, dir.path());
    assert_eq!(op(&s, "get", "errors"), 0, "{s}");
    assert_eq!(op(&s, "get", "bytes"), 20 * 9_000_001);
    // One aligned read of 9000001 bytes rounded up to 4 KiB, short at the end of the file.
    assert_eq!(op(&s, "get", "requests"), 20);
}

#[test]
fn sigterm_mid_run_exits_130_with_a_partial_summary_and_a_termination_message() {
    let dir = scratch();
    let file = dir.path().join("workload.yaml");
    std::fs::write(
        &file,
        format!(
            "target: file://{}/data\nduration: 10m\nconcurrency: 1\nrateLimit: 200\nops: [{{op: stat}}]\ndataset: {{objects: 4, size: 4KiB}}\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let summary = dir.path().join("summary.json");
    // The kubelet creates the termination log; the worker only writes to one that exists.
    let termination = dir.path().join("termination-log");
    std::fs::write(&termination, "").unwrap();
    let mut child = bin()
        .args(["run", file.to_str().unwrap(), "--progress", "never"])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .arg("--summary")
        .arg(&summary)
        .arg("--termination-log")
        .arg(&termination)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the worker");
    let addr = common::metrics_addr(child.stderr.take().unwrap());
    // Bounded wait on an observable event: the measured stage has completed operations.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let m = common::scrape(&addr).expect("/metrics answers 200 while the worker runs");
        let running = m.lines().any(|l| l == "benchrun_stage 3");
        let ops = m
            .lines()
            .find_map(|l| l.strip_prefix("benchrun_ops_total{op=\"stat\"} "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if running && ops > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started:\n{m}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child's PID.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().expect("wait for the worker");
    assert_eq!(
        status.code(),
        Some(benchrun_worker::exit::INTERRUPTED as i32),
        "a run stopped by SIGTERM must not exit 0"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["partial"], true, "{s}");
    assert_eq!(s["stoppedBy"], "interrupted", "{s}");
    assert!(op(&s, "stat", "count") > 0, "{s}");
    let msg = std::fs::read_to_string(&termination).unwrap();
    assert!(
        msg.starts_with("stopped by a signal after") && msg.contains("partial"),
        "termination message: {msg:?}"
    );
}

#[test]
fn put_with_max_objects_overwrites_within_the_bound() {
    let dir = scratch();
    let data = dir.path().join("data");
    let workload = |bound: &str| {
        format!(
            "target: file://{}\ntotalOps: 200\nconcurrency: 4\nops: [{{op: put}}]\nobjectSize: 4KiB\ndataset: {{objects: 0, cleanup: false}}\n{bound}",
            data.display()
        )
    };
    // Unbounded: every PUT is a new file.
    let (_, s) = run(&workload(""), dir.path());
    assert_eq!(op(&s, "put", "count"), 200);
    assert_eq!(files(&data).len(), 200);
    std::fs::remove_dir_all(&data).unwrap();
    // Bounded: 8 keys, 2 per task, overwritten in turn.
    let (_, s) = run(&workload("write: {maxObjects: 8}\n"), dir.path());
    assert_eq!(op(&s, "put", "count"), 200);
    assert_eq!(op(&s, "put", "errors"), 0);
    let written = files(&data);
    assert!(
        !written.is_empty() && written.len() <= 8,
        "{} files for maxObjects 8: {written:?}",
        written.len()
    );
    assert!(written.iter().all(|(_, size)| *size == 4096), "{written:?}");
}

#[test]
fn a_run_that_cannot_fit_is_refused_before_writing_anything() {
    let dir = scratch();
    let data = dir.path().join("data");
    let file = dir.path().join("workload.yaml");
    std::fs::write(
        &file,
        format!(
            "target: file://{}\ntotalOps: 10\nops: [{{op: get}}]\ndataset: {{objects: 1000, size: 1TiB}}\n",
            data.display()
        ),
    )
    .unwrap();
    let out = bin()
        .args(["run", file.to_str().unwrap(), "--progress", "never"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not enough space") && err.contains("may write up to 1000TiB"),
        "{err}"
    );
    let written: Vec<_> = files(&data)
        .into_iter()
        .filter(|(p, _)| !p.ends_with(".benchrun-probe"))
        .collect();
    assert!(written.is_empty(), "wrote {written:?}");
}

/// `stopWhenStable` ends the measured stage once throughput holds steady, says so in
/// `stoppedBy`, and is not a partial run. A 2 s window with a 100% band is steady by
/// construction at its second sample (two rates are always within 100% of their mean), so
/// the run must end seconds into its 60 s.
#[test]
fn stop_when_stable_ends_the_run_early_and_says_why() {
    let dir = scratch();
    let workload = format!(
        "target: file://{}\nduration: 60s\nconcurrency: 2\nops: [{{op: get}}]\nobjectSize: 4KiB\ndataset: {{objects: 8}}\nstopWhenStable: {{window: 2s, bandPercent: 100}}\n",
        dir.path().join("data").display()
    );
    let (_, s) = run(&workload, dir.path());
    let stopped_by = s["stoppedBy"].as_str().expect("stoppedBy");
    assert!(
        stopped_by.starts_with("stable: every second of the last 2s within 100% of "),
        "{stopped_by}"
    );
    assert_eq!(s["partial"], false);
    let elapsed = s["elapsedSeconds"].as_f64().expect("elapsed");
    assert!((2.0..30.0).contains(&elapsed), "ended at {elapsed}s");
    assert!(s["ops"]["get"]["count"].as_u64().unwrap_or(0) > 0);
    // Standalone, the worker decided alone, and says when and on what figures.
    let st = &s["stable"];
    assert_eq!(st["decidedBy"], "worker", "{st}");
    assert_eq!(st["workers"], 1);
    assert_eq!(st["windowSeconds"], 2);
    assert_eq!(st["bandPercent"], 100.0);
    let mean = st["meanOpsPerSecond"].as_f64().expect("mean");
    assert_eq!(
        stopped_by,
        format!("stable: every second of the last 2s within 100% of {mean:.1} ops/s")
    );
    assert!(
        st["minOpsPerSecond"].as_f64() <= Some(mean)
            && st["maxOpsPerSecond"].as_f64() >= Some(mean)
    );
    // The stage's end is its start plus its length.
    let at = |k: &str| {
        chrono::DateTime::parse_from_rfc3339(s[k].as_str().unwrap_or_else(|| panic!("{k}")))
            .expect(k)
    };
    let length = (at("stoppedAt") - at("startedAt")).num_milliseconds() as f64 / 1000.0;
    assert!((length - elapsed).abs() < 0.002, "{length} vs {elapsed}");

    // It needs a duration to bound the run.
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "target: file:///tmp/x\ntotalOps: 10\nops: [{op: get}]\nstopWhenStable: {window: 1500ms}\n",
    )
    .unwrap();
    let out = bin()
        .args(["validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("stopWhenStable.window: must be whole seconds from 2s to 1h")
            && err.contains("stopWhenStable: needs duration"),
        "{err}"
    );
}

#[test]
fn reads_of_a_dataset_of_several_sizes_are_split_by_size() {
    // Real files of three sizes (two each), read in key order so each is read equally.
    let dir = scratch();
    let data = dir.path().join("data");
    let sizes = [4096u64, 65536, 1 << 20];
    std::fs::create_dir_all(data.join("sized")).unwrap();
    for (i, size) in sizes.iter().chain(&sizes).enumerate() {
        std::fs::write(
            data.join(format!("sized/obj-{i}")),
            vec![7u8; *size as usize],
        )
        .unwrap();
    }
    let workload = format!(
        "target: file://{}\ntotalOps: 300\nconcurrency: 2\nops: [{{op: get}}]\n\
         dataset: {{prefix: sized/, prepare: false, access: sequential}}\n",
        data.display()
    );
    let (out, s) = run(&workload, dir.path());
    let get = &s["sizes"]["get"];
    let buckets = get
        .as_object()
        .unwrap_or_else(|| panic!("no sizes.get in {s}"));
    assert_eq!(
        buckets
            .keys()
            .map(|k| k.parse::<u64>().unwrap())
            .collect::<Vec<_>>(),
        {
            let mut k = sizes.to_vec();
            k.sort_by_key(|s| s.to_string());
            k
        },
        "one bucket per size (JSON keys sort as text)"
    );
    let (mut count, mut bytes) = (0, 0);
    for size in sizes {
        let b = &get[size.to_string()];
        let n = b["count"].as_u64().unwrap();
        assert_eq!(
            n, 100,
            "sequential reads of six objects: 100 of each size: {b}"
        );
        assert_eq!(b["bytes"].as_u64().unwrap(), n * size, "count x size: {b}");
        assert_eq!(
            (b["smallest"].as_u64(), b["largest"].as_u64()),
            (Some(size), Some(size))
        );
        count += n;
        bytes += b["bytes"].as_u64().unwrap();
    }
    // The buckets add up to the op's totals.
    assert_eq!(count, op(&s, "get", "count"));
    assert_eq!(bytes, op(&s, "get", "bytes"));
    // The result table has a row per size.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("get by object size (successful ops):"),
        "{text}"
    );
    for label in ["4KiB", "64KiB", "1MiB"] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().next() == Some(label)
                    && l.split_whitespace().nth(1) == Some("100")),
            "{label} row: {text}"
        );
    }
    // A fixed size: no per-size figures.
    let fixed = format!(
        "target: file://{}/fixed\ntotalOps: 20\nops: [{{op: get}}]\nobjectSize: 4KiB\ndataset: {{objects: 4}}\n",
        dir.path().display()
    );
    let (_, s) = run(&fixed, dir.path());
    assert!(s.get("sizes").is_none(), "{s}");
}

/// The default table of a real run fits 100 columns (every line: rows, warm-up, TTFB, prose);
/// `--wide` adds the other columns; `--duration`, `--concurrency` and `--set` reach the run.
#[test]
fn the_table_fits_100_columns_and_overrides_reach_the_run() {
    let dir = scratch();
    let file = dir.path().join("workload.yaml");
    let target = format!("file://{}/data", dir.path().display());
    // Long enough a run that every figure has its widest width, with a warm-up section.
    std::fs::write(
        &file,
        "target: file:///nonexistent\nduration: 1h\nconcurrency: 1\nops: [{op: get, weight: 3}, {op: put, weight: 1}, {op: stat, weight: 1}]\nobjectSize: 64KiB\ndataset: {objects: 20}\nwrite: {maxObjects: 40}\n",
    )
    .unwrap();
    let summary = dir.path().join("summary.json");
    let out = bin()
        .args(["run", file.to_str().unwrap(), "--progress", "never"])
        .args([
            "--target",
            &target,
            "--duration",
            "1s",
            "--concurrency",
            "4",
        ])
        .args(["--set", "warmup=1s", "--summary", summary.to_str().unwrap()])
        .output()
        .expect("run the worker");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}\n{stdout}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["workload"]["concurrency"], 4, "--concurrency");
    assert_eq!(s["target"], target.as_str(), "--target");
    assert!(s["warmup"].is_object(), "--set warmup=1s: {s}");
    let elapsed = s["elapsedSeconds"].as_f64().unwrap();
    assert!(
        (0.9..30.0).contains(&elapsed),
        "--duration 1s: ran {elapsed}s"
    );
    for l in stdout.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}\n{stdout}",
            l.len()
        );
    }
    // The first line may fold (a long target path); the header is the line starting "op ".
    let header = stdout
        .lines()
        .find(|l| l.starts_with("op "))
        .unwrap_or_else(|| panic!("no header: {stdout}"));
    assert!(header.contains("p99 ms"), "{stdout}");
    assert!(
        !header.contains("p90 ms"),
        "p90 is a --wide column: {header}"
    );
    assert!(stdout.contains("warm-up:"), "{stdout}");
    // --wide on a second short run prints every column.
    let out = bin()
        .args([
            "run",
            file.to_str().unwrap(),
            "--progress",
            "never",
            "--wide",
        ])
        .args(["--target", &target, "--set", "duration=1s"])
        .output()
        .expect("run the worker");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header = stdout
        .lines()
        .find(|l| l.starts_with("op "))
        .unwrap_or_else(|| panic!("no header: {stdout}"));
    for col in ["req/op", "mean ms", "p90 ms", "p95 ms", "p99.99 ms"] {
        assert!(header.contains(col), "--wide lacks {col}: {header}");
    }
}

/// `--set` that is not KEY=VALUE, or sets a key to a value the workload refuses, exits 2
/// naming it; the help lists the exit codes and hides the internal `agent`.
#[test]
fn bad_overrides_exit_2_and_the_help_has_the_exit_codes() {
    let dir = scratch();
    let file = dir.path().join("workload.yaml");
    std::fs::write(
        &file,
        "target: file:///tmp/x\nduration: 1s\nops: [{op: get}]\ndataset: {objects: 1}\n",
    )
    .unwrap();
    let out = bin()
        .args(["run", file.to_str().unwrap(), "--set", "duration"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("KEY=VALUE"));
    let out = bin()
        .args(["run", file.to_str().unwrap(), "--concurrency", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("concurrency"), "{err}");
    let help = bin().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains(benchrun_worker::exit::HELP), "{help}");
    assert!(!help.contains("agent"), "agent is internal: {help}");
    let help = bin().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Examples:") && help.contains("Exit codes"),
        "{help}"
    );
}
