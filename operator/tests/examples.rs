//! Every `examples/benchmarkrun-*.yaml` parses as a BenchmarkRun and its spec validates, and
//! every `examples/benchmarkschedule-*.yaml` as a BenchmarkSchedule whose schedule, time zone
//! and run template validate, so the examples cannot rot when the types change.

use benchrun_operator::crd::BenchmarkRun;

#[test]
fn benchmarkrun_examples_are_valid() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("examples/") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if !(name.starts_with("benchmarkrun-") && name.ends_with(".yaml")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let run: BenchmarkRun =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Err(errs) = benchrun_operator::validate::spec(&run.spec) {
            panic!("{name}: {errs:?}");
        }
        seen += 1;
    }
    assert!(
        seen >= 21,
        "expected the 21 BenchmarkRun examples, found {seen}"
    );
}

#[test]
fn benchmarkschedule_examples_are_valid() {
    use benchrun_operator::crd::schedule::BenchmarkSchedule;
    use benchrun_operator::schedule::cron::Schedule;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("examples/") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if !(name.starts_with("benchmarkschedule-") && name.ends_with(".yaml")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let s: BenchmarkSchedule =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        Schedule::parse(&s.spec.schedule, s.spec.time_zone.as_deref())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            s.spec.run_template.baseline_ref.is_none(),
            "{name}: the schedule sets baselineRef"
        );
        if let Err(errs) = benchrun_operator::validate::spec(&s.spec.run_template) {
            panic!("{name}: {errs:?}");
        }
        seen += 1;
    }
    assert!(
        seen >= 1,
        "expected the BenchmarkSchedule example, found {seen}"
    );
}
