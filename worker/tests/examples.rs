//! Every standalone workload file in `examples/` is valid. (`benchmarkrun-*.yaml` and
//! `benchmarkschedule-*.yaml` manifests are checked by the operator's tests.)

#[test]
fn example_workloads_validate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".yaml")
            || name.starts_with("benchmarkrun-")
            || name.starts_with("benchmarkschedule-")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // A sweep file: every combination must validate.
        match benchrun_worker::matrix::split(&text) {
            Ok(Some((doc, matrix))) => {
                let planned = matrix
                    .expand(&doc)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(planned.len() > 1, "{name}: a matrix of one combination");
            }
            Ok(None) => {
                if let Err(e) = benchrun_worker::Workload::from_yaml(&text) {
                    panic!("{name}: {e}");
                }
            }
            Err(e) => panic!("{name}: {e}"),
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} example workloads found");
}

/// The first example a user runs must be safe on any machine: its worst-case footprint (the
/// prepared dataset plus every key PUT may write) is bounded and small, because `/tmp` is a
/// RAM-backed tmpfs on many laptops. Without `write.maxObjects` a 10-second run on a fast disk
/// wrote 17,670 new objects (4.3 GiB).
#[test]
fn quickstart_writes_are_bounded() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quickstart.yaml");
    let w = benchrun_worker::Workload::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap();
    let put_keys = w
        .write
        .max_objects
        .expect("quickstart.yaml must bound its PUTs with write.maxObjects");
    let largest = w.object_size.max();
    let dataset = w.dataset.objects * w.dataset.size.as_ref().map_or(largest, |s| s.max());
    let worst = dataset + put_keys * largest;
    assert!(
        worst <= 256 << 20,
        "quickstart.yaml may hold {worst} bytes; keep it under 256 MiB"
    );
}
