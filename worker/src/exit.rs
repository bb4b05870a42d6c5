//! The exit codes of `benchrun-worker` and of `kubectl benchrun`: one table, so a CI job reads a
//! code the same way whichever of the two it ran. Printed under both `--help`s ([`HELP`]) and
//! in docs/THRESHOLDS.md (a test keeps the three the same).

/// Success: the run finished (for the plugin: Succeeded, thresholds met, no regression).
pub const OK: u8 = 0;
/// An error: a file or the cluster could not be read or written, storage refused the dataset.
pub const ERROR: u8 = 1;
/// Bad input: flags, a file that is not a workload, an unknown run or namespace.
pub const BAD_INPUT: u8 = 2;
/// The run failed: the worker's `errorBudget` stopped it; for the plugin, the run `Failed`.
pub const RUN_FAILED: u8 = 3;
/// The run finished with its result but missed a limit of `spec.thresholds` (plugin), or a
/// training run's accelerator utilization fell below `training.minAU` (worker).
pub const THRESHOLDS_MISSED: u8 = 4;
/// `compare --fail-if-slower`: B is slower than allowed.
pub const SLOWER: u8 = 5;
/// The run regressed against `spec.baselineRef` beyond its tolerance (plugin).
pub const REGRESSED: u8 = 6;
/// The run finished, but its dataset could not be deleted: it is left behind (worker).
pub const CLEANUP_FAILED: u8 = 7;
/// Stopped by Ctrl-C or SIGTERM before the run finished (128 + SIGINT, as shells report it);
/// the worker's summary is partial.
pub const INTERRUPTED: u8 = 130;

/// The table, as printed under `--help`.
pub const HELP: &str = "\
Exit codes (the same for benchrun-worker and kubectl benchrun):
  0    success (a run: finished; kubectl benchrun: Succeeded, thresholds met, not regressed)
  1    error: reading or writing files, the cluster, or the storage
  2    bad input: invalid flags or workload, an unknown run or namespace, a taken name
  3    the run failed (benchrun-worker: its errorBudget stopped it; kubectl benchrun: Failed)
  4    the run finished but missed its thresholds (spec.thresholds; a training run's minAU)
  5    compare --fail-if-slower: B is slower than allowed
  6    the run regressed against its baseline (spec.baselineRef)
  7    the run finished but its dataset cleanup failed: objects or files are left behind
  130  interrupted (Ctrl-C or SIGTERM) before the run finished";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_all_in_the_help() {
        let codes = [
            OK,
            ERROR,
            BAD_INPUT,
            RUN_FAILED,
            THRESHOLDS_MISSED,
            SLOWER,
            REGRESSED,
            CLEANUP_FAILED,
            INTERRUPTED,
        ];
        let mut sorted = codes.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), codes.len(), "codes are distinct");
        for c in codes {
            let row = format!("\n  {c:<4} ");
            assert!(HELP.contains(&row), "code {c} is missing from the help");
        }
        assert!(
            HELP.lines().all(|l| l.len() <= 100),
            "help lines fit 100 columns"
        );
    }

    #[test]
    fn the_docs_show_the_same_table() {
        let doc = include_str!("../../docs/THRESHOLDS.md");
        assert!(
            doc.contains(HELP),
            "docs/THRESHOLDS.md must contain the exit code table of worker/src/exit.rs verbatim"
        );
    }
}
