//! Every standalone workload file in `examples/` is valid. (`benchmarkrun-*.yaml` manifests are
//! checked by the operator's tests.)

#[test]
fn example_workloads_validate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".yaml") || name.starts_with("benchmarkrun-") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if let Err(e) = benchrun_worker::Workload::from_yaml(&text) {
            panic!("{name}: {e}");
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} example workloads found");
}
