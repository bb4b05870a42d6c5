//! Checkpoint workloads on real files, through the `benchrun-worker` binary: every rank's
//! shard saved and restored, the reported save time the slowest rank's, and a shard changed
//! between save and restore caught.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

fn run(dir: &Path, yaml: &str) -> (Output, Value) {
    let wl = dir.join("w.yaml");
    std::fs::write(&wl, yaml).unwrap();
    let out = dir.join("s.json");
    let _ = std::fs::remove_file(&out);
    let o = bin()
        .arg("run")
        .arg(&wl)
        .arg("--summary")
        .arg(&out)
        .arg("--progress=never")
        .output()
        .unwrap();
    let s = std::fs::read_to_string(&out)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (o, s)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn save_time_is_the_slowest_ranks_and_every_shard_is_restored() {
    let dir = scratch();
    let data = dir.path().join("data");
    let (o, s) = run(
        dir.path(),
        &format!(
            "target: file://{}\nops: [{{op: put}}]\ncheckpoint: {{totalSize: 64MiB, ranks: 4, ranksPerWorker: 4, repeats: 2}}\n",
            data.display()
        ),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = &s["checkpoint"];
    assert_eq!(u(&c["shardBytes"]), 16 << 20);
    let repeats = c["repeats"].as_array().unwrap();
    assert_eq!(repeats.len(), 2);
    for r in repeats {
        let ranks = r["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 4);
        let slowest_save = ranks.iter().map(|x| u(&x["saveUs"])).max().unwrap();
        let slowest_restore = ranks.iter().map(|x| u(&x["restoreUs"])).max().unwrap();
        assert_eq!(u(&r["saveUs"]), slowest_save, "{r}");
        assert_eq!(u(&r["restoreUs"]), slowest_restore, "{r}");
        assert!(ranks.iter().all(|x| x.get("error").is_none()), "{r}");
    }
    assert_eq!(u(&s["ops"]["get"]["bytes"]), 2 * (64 << 20));
    assert_eq!(u(&s["ops"]["put"]["count"]), 8);
    // Cleaned up after saveAndRestore.
    assert!(walk(&data).is_empty(), "{:?}", walk(&data));
}

#[test]
fn a_shard_changed_after_the_save_is_caught_on_restore() {
    let dir = scratch();
    let data = dir.path().join("data");
    let shape = "checkpoint: {totalSize: 8MiB, ranks: 2, ranksPerWorker: 2";
    let (o, _) = run(
        dir.path(),
        &format!(
            "target: file://{}\nops: [{{op: put}}]\n{shape}, mode: save}}\n",
            data.display()
        ),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shards = walk(&data);
    assert_eq!(shards.len(), 2, "{shards:?}");
    let mut bytes = std::fs::read(&shards[1]).unwrap();
    bytes[3 << 20] ^= 1;
    std::fs::write(&shards[1], &bytes).unwrap();
    let (o, s) = run(
        dir.path(),
        &format!(
            "target: file://{}\nops: [{{op: put}}]\n{shape}, mode: restore}}\n",
            data.display()
        ),
    );
    assert!(!o.status.success(), "a corrupt shard must fail the run");
    let ranks = &s["checkpoint"]["repeats"][0]["ranks"];
    assert!(ranks[0].get("error").is_none(), "{ranks}");
    let err = ranks[1]["error"].as_str().unwrap();
    assert!(
        err.contains("differs") && err.contains(&(3u64 << 20).to_string()),
        "{err}"
    );
    assert_eq!(u(&s["ops"]["get"]["errorsByKind"]["corrupt"]), 1);
}

/// Each save of a run writes another version of every shard (a deduplicating store keeps
/// nothing of the last save for free), and a later restore-only run verifies the last one.
#[test]
fn every_save_writes_another_version_and_a_restore_checks_the_last() {
    let dir = scratch();
    let data = dir.path().join("data");
    let shape = "checkpoint: {totalSize: 4MiB, ranks: 2, ranksPerWorker: 2";
    let save = |repeats: u32| {
        let (o, _) = run(
            dir.path(),
            &format!(
                "target: file://{}\nops: [{{op: put}}]\n{shape}, mode: save, repeats: {repeats}}}\n",
                data.display()
            ),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        walk(&data)
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect::<Vec<_>>()
    };
    // The last save of any run is the same version: the one a restore-only run checks.
    let one = save(1);
    assert_eq!(save(3), one);
    let (o, s) = run(
        dir.path(),
        &format!(
            "target: file://{}\nops: [{{op: put}}]\n{shape}, mode: restore}}\n",
            data.display()
        ),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(u(&s["ops"]["get"]["bytes"]), 4 << 20);
    // A save and restore of 2 repeats: each restore verifies the version its save wrote
    // (that the versions differ is datagen's rekeyed-pattern test).
    let (o, s) = run(
        dir.path(),
        &format!(
            "target: file://{}\nops: [{{op: put}}]\n{shape}, repeats: 2}}\ndataset: {{cleanup: false}}\n",
            data.display()
        ),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(u(&s["ops"]["get"]["bytes"]), 2 * (4 << 20));
    assert_eq!(u(&s["ops"]["get"]["errors"]), 0);
}

/// `restoreShift: 1` on one worker of 4 ranks: rank r restores the shard rank r + 1 saved
/// (the last rank the first's), every shard once and verified; a shard changed after the
/// save is then caught by the rank that restores it, not by the one that wrote it.
#[test]
fn a_shifted_restore_reads_the_next_ranks_shard() {
    let dir = scratch();
    let data = dir.path().join("data");
    let shape = "checkpoint: {totalSize: 16MiB, ranks: 4, ranksPerWorker: 4, restoreShift: 1";
    let (o, s) = run(
        dir.path(),
        &format!(
            "target: file://{}\nops: [{{op: put}}]\n{shape}}}\n",
            data.display()
        ),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ranks = s["checkpoint"]["repeats"][0]["ranks"].as_array().unwrap();
    let from: Vec<u64> = ranks.iter().map(|r| u(&r["restoredFrom"])).collect();
    assert_eq!(from, [1, 2, 3, 0], "{ranks:?}");
    assert!(ranks.iter().all(|x| x.get("error").is_none()), "{ranks:?}");
    assert_eq!(u(&s["ops"]["get"]["bytes"]), 16 << 20);
    assert!(walk(&data).is_empty(), "{:?}", walk(&data));

    // Saved, rank 2's shard changed, restored shifted: rank 1 reads it and catches it.
    let unshifted = shape.replace(", restoreShift: 1", "");
    let (o, _) = run(
        dir.path(),
        &format!(
            "target: file://{}\nops: [{{op: put}}]\n{unshifted}, mode: save}}\n",
            data.display()
        ),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shards = walk(&data);
    let two = shards
        .iter()
        .find(|p| p.ends_with("rank-00002"))
        .unwrap_or_else(|| panic!("{shards:?}"));
    let mut bytes = std::fs::read(two).unwrap();
    bytes[1 << 20] ^= 1;
    std::fs::write(two, &bytes).unwrap();
    let (o, s) = run(
        dir.path(),
        &format!(
            "target: file://{}\nops: [{{op: put}}]\n{shape}, mode: restore}}\n",
            data.display()
        ),
    );
    assert!(!o.status.success(), "a corrupt shard must fail the run");
    let ranks = s["checkpoint"]["repeats"][0]["ranks"].as_array().unwrap();
    let failed: Vec<u64> = ranks
        .iter()
        .filter(|r| r.get("error").is_some())
        .map(|r| u(&r["rank"]))
        .collect();
    assert_eq!(failed, [1], "{ranks:?}");
}

/// Two workers of one run (the library, as two agents run it, with the run's shared token),
/// 2 ranks each, `restoreShift: 2`: every shard is restored by the other worker, in each of
/// 3 repeats, with no error (no restore read a shard before its save ended, no save
/// overwrote a shard being read), and nothing is left behind (shards and markers deleted).
/// Worker 1 starts late, so worker 0 has to wait for it at every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_restore_each_others_shards() {
    use benchrun_worker::{checkpoint, Engine, Metrics, Workload};
    use std::sync::Arc;
    let dir = scratch();
    let data = dir.path().join("data");
    let yaml = format!(
        "target: file://{}\nops: [{{op: put}}]\ncheckpoint: {{totalSize: 16MiB, ranks: 4, ranksPerWorker: 2, repeats: 3, restoreShift: 2}}\n",
        data.display()
    );
    let w = Workload::from_yaml(&yaml).unwrap();
    let mut tasks = vec![];
    for index in 0..2u32 {
        let w = w.clone();
        tasks.push(tokio::spawn(async move {
            if index == 1 {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            let id = format!("w{index}");
            let engine = Engine::open(w, Arc::new(Metrics::new()), &id)
                .await
                .unwrap();
            let opts = checkpoint::Options {
                worker_id: id,
                index,
                count: 2,
                metrics: None,
                run_token: Some("2026-11-27T08:00:00Z".into()),
            };
            checkpoint::run(
                engine.workload(),
                engine.target().clone(),
                opts,
                std::future::pending(),
            )
            .await
        }));
    }
    for (index, t) in tasks.into_iter().enumerate() {
        let s = t.await.unwrap().unwrap();
        let c = s.checkpoint.unwrap();
        assert_eq!(c.repeats.len(), 3);
        for r in &c.repeats {
            for rank in &r.ranks {
                assert_eq!(rank.error, None, "worker {index}: {r:?}");
                assert_eq!(rank.restored_from, Some((rank.rank + 2) % 4), "{r:?}");
                assert!(rank.restore_us.is_some(), "{r:?}");
            }
        }
    }
    assert!(walk(&data).is_empty(), "{:?}", walk(&data));

    // Standalone workers share no start to meet at: refused, with what to do instead.
    let wl = dir.path().join("w.yaml");
    std::fs::write(&wl, &yaml).unwrap();
    let o = bin()
        .arg("run")
        .arg(&wl)
        .args(["--workers", "2", "--worker-index", "0", "--progress=never"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("restoreShift") && err.contains("BenchmarkRun"),
        "{err}"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A rank's memory is a piece of its shard, not the shard: a 512 MiB shard saved to a file
/// and restored by a worker whose peak resident set (the kernel's own count, `wait4`'s
/// `ru_maxrss` for exactly that child) stays far below it. Before the payload was generated
/// piece by piece the save held the whole shard, so the peak was above 512 MiB.
#[test]
fn a_ranks_memory_is_a_piece_of_its_shard_not_the_shard() {
    let dir = scratch();
    let wl = dir.path().join("w.yaml");
    std::fs::write(
        &wl,
        format!(
            "target: file://{}\nops: [{{op: put}}]\ncheckpoint: {{totalSize: 512MiB, ranks: 1, ranksPerWorker: 1}}\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    // Reaped by the wait4 below, which std cannot see: it is what gives us the child's rusage.
    #[allow(clippy::zombie_processes)]
    let child = bin()
        .arg("run")
        .arg(&wl)
        .arg("--summary")
        .arg(dir.path().join("s.json"))
        .arg("--progress=never")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, whose pid std gave us; std never waits for it after.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "worker failed: {status:#x}"
    );
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("s.json")).unwrap()).unwrap();
    assert_eq!(u(&s["checkpoint"]["shardBytes"]), 512 << 20);
    assert_eq!(u(&s["ops"]["get"]["bytes"]), 512 << 20, "restored whole");
    let peak_mib = usage.ru_maxrss as u64 / 1024;
    assert!(
        peak_mib < 160,
        "the worker's peak resident set was {peak_mib} MiB for a 512 MiB shard"
    );
    eprintln!("peak resident set: {peak_mib} MiB for a 512 MiB shard");
}
