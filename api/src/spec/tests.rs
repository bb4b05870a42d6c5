//! Parsing and validation of workloads: every error names its field.

use super::*;

const GOOD: &str = r#"
target: file:///tmp/bench
duration: 10s
concurrency: 4
ops:
  - { op: get, weight: 60 }
  - { op: put, weight: 30 }
  - { op: stat, weight: 10 }
objectSize: 1MiB
dataset: { objects: 10, size: { uniform: { min: 4KiB, max: 64KiB } } }
"#;

fn err(text: &str) -> String {
    Workload::from_yaml(text).unwrap_err().to_string()
}

#[test]
fn max_objects_must_cover_concurrency_and_excludes_delete() {
    let ok = format!("{GOOD}write: {{maxObjects: 4}}\n");
    assert_eq!(Workload::from_yaml(&ok).unwrap().write.max_objects, Some(4));
    let e = err(&format!("{GOOD}write: {{maxObjects: 3}}\n"));
    assert!(
        e.contains("write.maxObjects") && e.contains("at least concurrency (4)"),
        "{e}"
    );
    let with_delete = GOOD.replace(
        "  - { op: stat, weight: 10 }",
        "  - { op: stat, weight: 10 }\n  - { op: delete, weight: 5 }",
    );
    let e = err(&format!("{with_delete}write: {{maxObjects: 8}}\n"));
    assert!(
        e.contains("write.maxObjects") && e.contains("delete"),
        "{e}"
    );
}

#[test]
fn good_file_parses_with_defaults() {
    let w = Workload::from_yaml(GOOD).unwrap();
    assert_eq!(w.concurrency, 4);
    assert_eq!(w.duration.unwrap().0.as_secs(), 10);
    assert_eq!(w.object_size, SizeSpec::Fixed(ByteSize::mib(1)));
    assert_eq!(w.dataset.prefix, "benchrun/");
    assert!(w.dataset.prepare && w.dataset.cleanup);
    assert!(
        !w.range_engine.enabled,
        "range engine must be off by default"
    );
    assert_eq!(w.range_engine.min_split_size, ByteSize::mib(64));
    assert_eq!(
        w.dataset_size(),
        &SizeSpec::Distribution(SizeDistribution::Uniform {
            min: ByteSize::kib(4),
            max: ByteSize::kib(64)
        })
    );
}

#[test]
fn round_trips_through_yaml() {
    let w = Workload::from_yaml(GOOD).unwrap();
    let again = Workload::from_yaml(&serde_yaml::to_string(&w).unwrap()).unwrap();
    assert_eq!(w, again);
}

#[test]
fn lognormal_parses() {
    let w = Workload::from_yaml(&GOOD.replace(
        "objectSize: 1MiB",
        "objectSize: { lognormal: { mean: 1MiB, stdDev: 256KiB } }",
    ))
    .unwrap();
    assert!(matches!(
        w.object_size,
        SizeSpec::Distribution(SizeDistribution::Lognormal { .. })
    ));
}

#[test]
fn unknown_key_is_named() {
    let e = err(&GOOD.replace("concurrency: 4", "concurrency: 4\nconcurency: 5"));
    assert!(e.contains("unknown field `concurency`"), "{e}");
    let e = err(&GOOD.replace("objects: 10", "objects: 10, prefx: x/"));
    assert!(e.starts_with("dataset"), "{e}");
    assert!(e.contains("unknown field `prefx`"), "{e}");
}

#[test]
fn bad_values_name_field_and_value() {
    let e = err(&GOOD.replace("objectSize: 1MiB", "objectSize: 1MB2"));
    assert!(e.starts_with("objectSize"), "{e}");
    let e = err(&GOOD.replace("concurrency: 4", "concurrency: many"));
    assert!(e.starts_with("concurrency:"), "{e}");
    let e = err(&GOOD.replace("duration: 10s", "duration: 10 parsecs"));
    assert!(
        e.starts_with("duration:") && e.contains("10 parsecs"),
        "{e}"
    );
    let e = err(&GOOD.replace("op: stat", "op: head"));
    assert!(
        e.starts_with("ops[2].op") && e.contains("unknown variant `head`"),
        "{e}"
    );
    let e = err(&GOOD.replace("file:///tmp/bench", "ftp://host/x"));
    assert!(
        e.contains("target: `ftp://host/x`: unknown scheme `ftp`"),
        "{e}"
    );
    let e = err(&GOOD.replace("file:///tmp/bench", "file://relative/x"));
    assert!(e.contains("must be absolute"), "{e}");
    let e = err(&GOOD.replace("concurrency: 4", "concurrency: 0"));
    assert!(e.contains("concurrency: must be at least 1 (got 0)"), "{e}");
}

#[test]
fn warmup_bounds_name_the_field() {
    let ok =
        Workload::from_yaml(&GOOD.replace("duration: 10s", "duration: 10s\nwarmup: 3s")).unwrap();
    assert_eq!(ok.warmup.map(|w| w.0.as_secs()), Some(3));
    for (warmup, want) in [
        (
            "11s",
            "warmup: must not be longer than duration (got warmup 11s, duration 10s)",
        ),
        (
            "0s",
            "warmup: must be whole seconds from 1s to 10m (got 0s)",
        ),
        (
            "1500ms",
            "warmup: must be whole seconds from 1s to 10m (got 1s 500ms)",
        ),
        (
            "11m",
            "warmup: must be whole seconds from 1s to 10m (got 11m)",
        ),
    ] {
        let e = err(&GOOD.replace("duration: 10s", &format!("duration: 10s\nwarmup: {warmup}")));
        assert!(e.contains(want), "{warmup}: {e}");
    }
    let e = err(&GOOD.replace("duration: 10s", "totalOps: 100\nwarmup: 2s"));
    assert!(e.contains("warmup: needs duration"), "{e}");
}

/// A `stopWhenStable` window judged on a full window of the measured stage: one as long as
/// `duration` could never end the run early.
#[test]
fn a_stable_window_is_shorter_than_the_run() {
    let with = |window: &str| {
        GOOD.replace(
            "duration: 10s",
            &format!("duration: 10s\nstopWhenStable: {{window: {window}}}"),
        )
    };
    assert!(Workload::from_yaml(&with("9s")).is_ok());
    for window in ["10s", "1h"] {
        let e = err(&with(window));
        assert!(
            e.contains(&format!(
                "stopWhenStable.window: {window} is not shorter than duration (10s)"
            )),
            "{e}"
        );
    }
}

#[test]
fn cross_field_rules() {
    let e = err(&GOOD.replace("duration: 10s", "duration: 10s\ntotalOps: 5"));
    assert!(e.contains("either duration or totalOps"), "{e}");
    let e = err(&GOOD.replace("duration: 10s\n", ""));
    assert!(e.contains("give a duration"), "{e}");
    let e = err(&GOOD.replace("{ op: put, weight: 30 }", "{ op: delete, weight: 30 }"));
    assert!(e.contains("needs `put`"), "{e}");
    let e = err(&GOOD.replace("min: 4KiB, max: 64KiB", "min: 64KiB, max: 4KiB"));
    assert!(
        e.contains("dataset.size.uniform.max: 4KiB is smaller than min 64KiB"),
        "{e}"
    );
    let e = err(&format!("{GOOD}rangeEngine: {{ preStat: true }}\n"));
    assert!(e.contains("rangeEngine.preStat"), "{e}");
    let e = err(&format!(
        "{GOOD}read: {{ wholeObject: true, chunkSize: 1MiB }}\n"
    ));
    assert!(e.contains("read.wholeObject"), "{e}");
    let direct = GOOD.replace("file://", "direct://");
    let e = err(&format!("{direct}read: {{ chunkSize: 1000 }}\n"));
    assert!(
        e.contains("read.chunkSize: 1000 is not a multiple of 4096"),
        "{e}"
    );
    let e = err(&GOOD.replace(
        "{ op: get, weight: 60 }",
        "{ op: get, weight: 60 }\n  - { op: get, weight: 1 }",
    ));
    assert!(e.contains("ops[1].op: `get` is listed twice"), "{e}");
    let s3 = GOOD.replace("file:///tmp/bench", "s3://bkt/p");
    let e = err(&format!(
        "{s3}storage: {{ endpoint: 'http://127.0.0.1:9000' }}\n"
    ));
    assert!(e.contains("storage.allowHttp"), "{e}");
}

#[test]
fn several_errors_are_reported_together() {
    let e = err(&GOOD
        .replace("concurrency: 4", "concurrency: 0")
        .replace("file://", "nope://"));
    assert!(e.contains("target:") && e.contains("concurrency:"), "{e}");
}

#[test]
fn every_bound_is_enforced_with_the_field_named() {
    for (edit, field) in [
        (
            ("concurrency: 4", "concurrency: 1000000000"),
            "concurrency: must be at most 65536",
        ),
        (
            ("concurrency: 4", "concurrency: 65537"),
            "concurrency: must be at most 65536",
        ),
        (
            ("objectSize: 1MiB", "objectSize: 100TiB"),
            "objectSize: must be at most 5TiB",
        ),
        (
            ("objectSize: 1MiB", "objectSize: 18446744073709551615"),
            "objectSize: must be at most 5TiB",
        ),
        (
            ("max: 64KiB", "max: 6TiB"),
            "dataset.size.uniform.max: must be at most 5TiB",
        ),
        (
            ("objects: 10", "objects: 100000001"),
            "dataset.objects: must be at most 100000000",
        ),
        (
            (
                "objects: 10, size: { uniform: { min: 4KiB, max: 64KiB } }",
                "objects: 1000000, size: 5TiB",
            ),
            "dataset.objects: 1000000 objects of up to 5TiB",
        ),
        (
            ("duration: 10s", "duration: 31d"),
            "duration: must be at most 30days",
        ),
        (
            ("duration: 10s", "totalOps: 1000000000001"),
            "totalOps: must be at most",
        ),
        (
            ("weight: 60", "weight: 1000001"),
            "ops[0].weight: must be at most 1000000",
        ),
    ] {
        let e = err(&GOOD.replace(edit.0, edit.1));
        assert!(e.contains(field), "{edit:?}: {e}");
    }
    for (extra, field) in [
        (
            "rateLimit: 0.0001",
            "rateLimit: must be between 0.001 and 10000000",
        ),
        ("rateLimit: 1e-20", "rateLimit: must be between"),
        ("rateLimit: 20000000", "rateLimit: must be between"),
        ("rateLimit: .inf", "rateLimit: must be a positive number"),
        ("rateLimit: 0", "rateLimit: must be a positive number"),
        (
            "read: {chunkSize: 2GiB}",
            "read.chunkSize: must be at most 1GiB",
        ),
        (
            "read: {adaptive: {initial: 1MiB, max: 2GiB}}",
            "read.adaptive.max: must be at most 1GiB",
        ),
        (
            "read: {adaptive: {initial: 1MiB, max: 2MiB, factor: 1000}}",
            "read.adaptive.factor: must be at most 16",
        ),
        (
            "rangeEngine: {chunkSize: 2GiB}",
            "rangeEngine.chunkSize: must be at most 1GiB",
        ),
        (
            "rangeEngine: {rangeTimeout: 400d}",
            "rangeEngine.rangeTimeout: must be at most 30days",
        ),
        (
            "rangeEngine: {maxConcurrentRanges: 5000}",
            "rangeEngine.maxConcurrentRanges: must be at most 1024",
        ),
        (
            "storage: {requestTimeout: 365d}",
            "storage.requestTimeout: must be at most 30days",
        ),
        (
            "write: {partSize: 6GiB}",
            "write.partSize: must be at most 5GiB",
        ),
        (
            "write: {multipartThreshold: 6TiB}",
            "write.multipartThreshold: must be at most 5TiB",
        ),
        (
            "write: {maxObjects: 100000001}",
            "write.maxObjects: must be at most 100000000",
        ),
    ] {
        let e = err(&format!("{GOOD}{extra}\n"));
        assert!(e.contains(field), "{extra}: {e}");
    }
    // Whole-object reads of objects larger than a buffer may be.
    let big = GOOD.replace("size: { uniform: { min: 4KiB, max: 64KiB } }", "size: 2GiB");
    let e = err(&format!("{big}read: {{wholeObject: true}}\n"));
    assert!(
        e.contains("read.wholeObject: reads each object into one buffer"),
        "{e}"
    );
    let e = err(&format!("{big}rangeEngine: {{enabled: true}}\n"));
    assert!(
        e.contains("rangeEngine.enabled: fetches each object into one buffer"),
        "{e}"
    );
    // Histograms of 65536 tasks x 3 ops + TTFB pass the memory bound.
    let e = err(&GOOD.replace("concurrency: 4", "concurrency: 65536"));
    assert!(e.contains("concurrency: 65536 tasks x"), "{e}");
    // The bounds themselves are accepted.
    let ok = GOOD
        .replace("concurrency: 4", "concurrency: 4096")
        .replace("duration: 10s", "duration: 30d")
        .replace("objectSize: 1MiB", "objectSize: 5TiB");
    Workload::from_yaml(&format!("{ok}rateLimit: 0.001\n")).unwrap();
}

#[test]
fn paths_that_leave_the_target_are_refused() {
    let e = err(&GOOD.replace("file:///tmp/bench", "file:///data/bench/../../../etc"));
    assert!(
        e.contains("target: `file:///data/bench/../../../etc`: `..`"),
        "{e}"
    );
    for prefix in ["../../../etc/", "/etc/", "a/../../b/", "./x/", "a\\b/"] {
        let e = err(&format!("{GOOD}dataset: {{prefix: '{prefix}'}}\n").replace(
            "dataset: { objects: 10, size: { uniform: { min: 4KiB, max: 64KiB } } }\n",
            "",
        ));
        assert!(e.contains("dataset.prefix:"), "{prefix}: {e}");
    }
    let ok = GOOD.replace("objects: 10,", "objects: 10, prefix: runs/a.b/,");
    Workload::from_yaml(&ok).unwrap();
}

#[test]
fn hostile_files_are_refused_fast_with_bounded_messages() {
    // An alias bomb: a 10,000-item leaf referenced through alias levels.
    let mut bomb = String::from("a: &a [");
    bomb.push_str(&vec!["x"; 10_000].join(","));
    bomb.push_str(
        "]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
    );
    let t = std::time::Instant::now();
    let e = err(&format!("{GOOD}objectSize: *c\n{bomb}"));
    assert!(e.contains("YAML aliases"), "{e}");
    // 100,000 nested brackets.
    let deep = format!(
        "{GOOD}seed: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let e = err(&deep);
    assert!(e.contains("nested more than 32 levels"), "{e}");
    let e = err(&"#".repeat(2 << 20));
    assert!(e.contains("a workload file is at most 1MiB"), "{e}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    // A 500 KB bad value is not echoed whole.
    let e = err(&GOOD.replace("file:///tmp/bench", &"x".repeat(500_000)));
    assert!(e.len() < 1000, "{} bytes: {}", e.len(), &e[..200]);
    assert!(e.contains("more bytes") || e.contains("left out"), "{e}");
    let e = err(&GOOD.replace(
        "concurrency: 4",
        &format!("concurrency: {}", "9".repeat(500_000)),
    ));
    assert!(
        e.starts_with("concurrency") && e.len() < 1000,
        "{}",
        e.len()
    );
    // Duplicate keys and invalid UTF-8.
    let e = err(&GOOD.replace("concurrency: 4", "concurrency: 4\nconcurrency: 5"));
    assert!(e.contains("duplicate field `concurrency`"), "{e}");
    let mut bytes = GOOD.as_bytes().to_vec();
    bytes.extend_from_slice(b"seed: \xff\xfe\n");
    let e = Workload::from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("not UTF-8") && e.contains("line 11"), "{e}");
    // What looks like an alias or a quote inside a plain scalar is not one.
    let ok = GOOD.replace("objects: 10,", "objects: 10, prefix: it's*fine/,");
    Workload::from_yaml(&ok).unwrap();
}

#[test]
fn null_means_the_default_where_the_crd_allows_null() {
    let w = Workload::from_yaml(&format!(
            "{GOOD}rangeEngine: {{chunkSize: null, minSplitSize: ~}}\nwrite: {{partSize: null, multipartThreshold: null}}\n"
        ))
        .unwrap();
    assert_eq!(w.range_engine, RangeEngineSpec::default());
    assert_eq!(w.write, WriteSpec::default());
    let w = Workload::from_yaml(&GOOD.replace(
        "objectSize: 1MiB",
        "objectSize: { lognormal: { mean: 1MiB, stdDev: 256KiB, min: null, max: null } }",
    ))
    .unwrap();
    assert_eq!(w.object_size.max(), 64 << 30);
    // The same through JSON, as the operator decodes runs.
    let mut v = serde_json::to_value(&w).unwrap();
    v["rangeEngine"]["chunkSize"] = serde_json::Value::Null;
    let back: Workload = serde_json::from_value(v).unwrap();
    assert_eq!(back.range_engine.chunk_size, ByteSize::mib(8));
}

#[test]
fn target_uris_parse() {
    assert_eq!(
        "s3://b/some/prefix".parse::<TargetUri>().unwrap(),
        TargetUri::S3 {
            bucket: "b".into(),
            prefix: "some/prefix/".into()
        }
    );
    assert_eq!(
        "az://c".parse::<TargetUri>().unwrap(),
        TargetUri::Azure {
            container: "c".into(),
            prefix: "".into()
        }
    );
    assert!("gs:///x"
        .parse::<TargetUri>()
        .unwrap_err()
        .contains("bucket or container name is missing"));
    assert_eq!(
        "direct:///mnt/x".parse::<TargetUri>().unwrap(),
        TargetUri::Direct {
            root: "/mnt/x".into()
        }
    );
}

#[test]
fn skewed_access_parses_and_its_parameters_are_bounded() {
    let with = |access: &str| {
        GOOD.replace(
            "dataset: { objects: 10,",
            &format!("dataset: {{ objects: 10, {access},"),
        )
    };
    let access = |text: &str| {
        Workload::from_yaml(&with(text))
            .unwrap()
            .dataset
            .object_access()
    };
    assert_eq!(
        access("access: zipf"),
        ObjectAccess::Zipf { exponent: 0.99 }
    );
    assert_eq!(
        access("access: zipf, zipf: { exponent: 1.1 }"),
        ObjectAccess::Zipf { exponent: 1.1 }
    );
    assert_eq!(
        access("access: hotspot, hotspot: { readsPercent: 90, objectsPercent: 30 }"),
        ObjectAccess::Hotspot {
            reads_percent: 90.0,
            objects_percent: 30.0
        }
    );
    assert_eq!(access("access: sequential"), ObjectAccess::Sequential);
    let e = err(&with("access: zipf, zipf: { exponent: 0 }"));
    assert!(
        e.contains("dataset.zipf.exponent") && e.contains("above 0"),
        "{e}"
    );
    let e = err(&with("access: hotspot, hotspot: { readsPercent: 100 }"));
    assert!(e.contains("dataset.hotspot.readsPercent"), "{e}");
    // 5% of 10 objects is no object at all.
    let e = err(&with("access: hotspot, hotspot: { objectsPercent: 5 }"));
    assert!(e.contains("leaves no hot or no cold object"), "{e}");
    let e = err(&with("access: random, zipf: { exponent: 2 }"));
    assert!(
        e.contains("dataset.zipf") && e.contains("access: zipf only"),
        "{e}"
    );
    let e = err(&with("access: zipf, zipf: { skew: 1 }"));
    assert!(e.contains("skew"), "{e}");
}

#[test]
fn endpoints_and_tls_are_checked_with_the_field_named() {
    let s3 = GOOD.replace("file:///tmp/bench", "s3://bkt/p");
    let ok = Workload::from_yaml(&format!(
        "{s3}storage: {{endpoints: ['https://127.0.0.1:9443', 'https://127.0.0.2:9443'], tls: {{caFile: /etc/ca.pem}}}}\n"
    ))
    .unwrap();
    assert_eq!(
        ok.storage.endpoint_list(),
        ["https://127.0.0.1:9443", "https://127.0.0.2:9443"]
    );
    assert_eq!(ok.storage.tls.ca_file.as_deref(), Some("/etc/ca.pem"));
    let one = Workload::from_yaml(&format!(
        "{s3}storage: {{endpoint: 'https://127.0.0.1:9443'}}\n"
    ))
    .unwrap();
    assert_eq!(one.storage.endpoint_list(), ["https://127.0.0.1:9443"]);
    for (storage, want) in [
        (
            "{endpoints: []}",
            "storage.endpoints: the list is empty: give at least one endpoint URL",
        ),
        (
            "{endpoint: 'https://a', endpoints: ['https://b']}",
            "storage.endpoints: give `endpoint` or `endpoints`, not both",
        ),
        (
            "{endpoints: ['https://a', 'ftp://b']}",
            "storage.endpoints.1: `ftp://b` must start with http:// or https://",
        ),
        (
            "{endpoints: ['https://a', 'https://a']}",
            "storage.endpoints.1: `https://a` is listed twice",
        ),
        (
            "{endpoints: ['https://a', 'http://b']}",
            "storage.allowHttp: endpoint `http://b` is plain http",
        ),
        (
            "{tls: {caFile: ''}}",
            "storage.tls.caFile: must not be empty",
        ),
        (
            "{tls: {caFile: /ca.pem, insecureSkipVerify: true}}",
            "storage.tls.insecureSkipVerify: excludes `caFile`",
        ),
        (
            "{tls: {caFiles: /ca.pem}}",
            "storage.tls: unknown field `caFiles`",
        ),
    ] {
        let e = err(&format!("{s3}storage: {storage}\n"));
        assert!(e.contains(want), "{storage}: {e}");
    }
    // A task keeps a latency histogram per endpoint, counted in the memory bound.
    let one_op = crate::latency::Latency::bytes();
    let w = |storage: &str| {
        Workload::from_yaml(&format!(
            "target: s3://b/p\ntotalOps: 10\nops: [{{op: stat}}]\nstorage: {storage}\n"
        ))
        .unwrap()
    };
    assert_eq!(
        histogram_bytes_per_task(&w("{endpoint: 'https://a'}")),
        one_op
    );
    assert_eq!(
        histogram_bytes_per_task(&w("{endpoints: ['https://a', 'https://b', 'https://c']}")),
        4 * one_op
    );
    let many: Vec<String> = (0..65).map(|i| format!("'https://h{i}'")).collect();
    let e = err(&format!(
        "{s3}storage: {{endpoints: [{}]}}\n",
        many.join(",")
    ));
    assert!(
        e.contains("storage.endpoints: must list at most 64 endpoints (got 65)"),
        "{e}"
    );
}

/// A hostile key (serde puts it in the error's field path) cannot make the error huge: the
/// path is clipped as the message is (found by the fuzz test: an 8 KB key gave 8.5 KB).
#[test]
fn an_unknown_key_of_any_length_gives_a_bounded_error() {
    let key = format!("op{}", "9".repeat(8000));
    let m = err(&format!(
        "target: file:///tmp/x\nduration: 1s\nops: [{{op: get, {key}: 1}}]\n"
    ));
    assert!(m.len() < 1024, "{} bytes of error: {m}", m.len());
    assert!(m.starts_with("ops[0].op999"), "{m}");
}

#[test]
fn buffer_pool_is_on_by_default_and_off_only_where_reads_use_a_buffer() {
    let w = Workload::from_yaml(GOOD).unwrap();
    assert!(w.read.buffer_pool, "pooled by default");
    assert!(ReadSpec::default().buffer_pool);
    // The default is not written out; the experiment is, so a summary's workload shows it.
    let yaml = serde_yaml::to_string(&w).unwrap();
    assert!(!yaml.contains("bufferPool"), "{yaml}");
    let off = Workload::from_yaml(&format!("{GOOD}read: {{ bufferPool: false }}\n")).unwrap();
    assert!(!off.read.buffer_pool);
    let yaml = serde_yaml::to_string(&off).unwrap();
    assert!(yaml.contains("bufferPool: false"), "{yaml}");
    let direct = GOOD.replace("file://", "direct://");
    assert!(Workload::from_yaml(&format!("{direct}read: {{ bufferPool: false }}\n")).is_ok());

    let e = err(&format!("{GOOD}read: {{ bufferPool: maybe }}\n"));
    assert!(e.contains("read.bufferPool"), "{e}");
    let e = err(&format!("{GOOD}read: {{ bufferPools: false }}\n"));
    assert!(e.contains("unknown field `bufferPools`"), "{e}");

    // Object storage: only whole-object and range-engine reads land in a buffer.
    let s3 = GOOD.replace("file:///tmp/bench", "s3://bkt/p");
    let e = err(&format!("{s3}read: {{ bufferPool: false }}\n"));
    assert!(
        e.contains("read.bufferPool: false changes nothing here") && e.contains("wholeObject"),
        "{e}"
    );
    let e = err(&format!(
        "{s3}read: {{ bufferPool: false, chunkSize: 1MiB }}\n"
    ));
    assert!(e.contains("read.bufferPool"), "{e}");
    for ok in [
        "read: { bufferPool: false, wholeObject: true }\n",
        "read: { bufferPool: false }\nrangeEngine: { enabled: true }\n",
    ] {
        let w = Workload::from_yaml(&format!("{s3}{ok}")).unwrap();
        assert!(!w.read.buffer_pool, "{ok}");
    }

    // Block I/O has buffers of its own.
    let e = err("target: direct:///data\nduration: 1s\nops: [{op: read}]\nblock: {fileSize: 1GiB}\nread: {bufferPool: false}\n");
    assert!(e.contains("bufferPool do not apply"), "{e}");
}
