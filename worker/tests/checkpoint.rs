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
