//! Every `examples/benchmarkrun-*.yaml` parses as a BenchmarkRun and its spec validates,
//! so the examples cannot rot when the types change.

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
        seen >= 9,
        "expected the 9 BenchmarkRun examples, found {seen}"
    );
}
