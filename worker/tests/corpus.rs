//! The corpus of invalid workload files (`tests/corpus/worker/`) through the real binary:
//! each is refused with exit code 2, quickly, naming the field its header names, with stderr
//! of a few KB at most whatever the input (an alias bomb, 100,000 nested brackets, a
//! multi-megabyte file, megabyte-long values).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Most stderr a refused file may produce.
const MAX_STDERR: usize = 4096;
/// Most time one refusal may take (debug build, busy 2-core machine).
const MAX_TIME: Duration = Duration::from_secs(5);

fn corpus() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/worker");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// The `# field:` header line.
fn expected_field(path: &PathBuf) -> String {
    let bytes = std::fs::read(path).unwrap();
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let first = String::from_utf8_lossy(first);
    first
        .strip_prefix("# field: ")
        .unwrap_or_else(|| panic!("{}: first line must be `# field: <path>`", path.display()))
        .trim()
        .to_string()
}

#[test]
fn every_corpus_file_is_refused_fast_with_exit_2_naming_the_field() {
    let files = corpus();
    assert!(
        files.len() >= 30,
        "the corpus has only {} files",
        files.len()
    );
    let mut failures = vec![];
    for f in &files {
        let field = expected_field(f);
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
            .arg("validate")
            .arg(f)
            .output()
            .expect("run benchrun-worker");
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let name = f.file_name().unwrap().to_string_lossy();
        if out.status.code() != Some(2) {
            failures.push(format!(
                "{name}: exit {:?}, want 2: {stderr}",
                out.status.code()
            ));
        }
        if !stderr.contains(&field) {
            failures.push(format!("{name}: stderr does not name `{field}`: {stderr}"));
        }
        if out.stderr.len() > MAX_STDERR {
            failures.push(format!(
                "{name}: {} bytes of stderr (at most {MAX_STDERR})",
                out.stderr.len()
            ));
        }
        if took > MAX_TIME {
            failures.push(format!("{name}: took {took:?}"));
        }
        if !out.stdout.is_empty() {
            failures.push(format!(
                "{name}: printed to stdout: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The header convention is honest: the same file with the bad part removed is not what is
/// refused. Here: the base every corpus file starts from validates.
#[test]
fn the_corpus_base_workload_is_valid() {
    let f = corpus()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("unknown-root-field"))
        .expect("the unknown-root-field case");
    let text = std::fs::read_to_string(&f).unwrap();
    let base = text.replace("concurency: 5\n", "");
    benchrun_worker::Workload::from_yaml(&base).expect("the base workload is valid");
}
