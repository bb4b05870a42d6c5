//! `benchrun-worker compare` and `report` on the summaries of two real runs: a fast one (each
//! 256 KiB file read whole, one read) and a deliberately slower one (the same files read in
//! 4 KiB chunks, 64 reads each, every byte verified). The outputs are checked for what they
//! say: the op rows, the signs of the deltas, the tests' direction, Markdown columns, and SVG
//! that parses as XML with one bar per figure and one point per full second.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_benchrun-worker"))
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed ({:?}): {}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn run_output(args: &[&str]) -> Output {
    bin().args(args).output().expect("run the worker")
}

/// Run `read` (a YAML `read:` mapping) over 16 files of 256 KiB for 2 s; the summary's path.
fn run(dir: &Path, name: &str, read: &str) -> (String, Value) {
    let workload = format!(
        "target: file://{}\nduration: 2s\nconcurrency: 1\nops: [{{op: get}}]\n\
         dataset: {{objects: 16, size: 256KiB, prefix: {name}/}}\nread: {read}\n",
        dir.join("data").display()
    );
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, workload).unwrap();
    let summary = dir.join(format!("{name}.json"));
    let s = summary.to_str().unwrap().to_string();
    ok(run_output(&[
        "run",
        file.to_str().unwrap(),
        "--summary",
        &s,
        "--progress",
        "never",
    ]));
    let json = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (s, json)
}

/// Seconds of a summary's timeline wholly inside its measured stage.
fn full_seconds(s: &Value) -> usize {
    let elapsed = s["elapsedSeconds"].as_f64().unwrap();
    s["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| (t["second"].as_u64().unwrap() + 1) as f64 <= elapsed + 1e-9)
        .count()
}

/// Every element of an SVG document by name with its attributes, failing on malformed XML.
fn elements(svg: &str) -> Vec<(String, Vec<(String, String)>)> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(svg);
    let mut out = vec![];
    let mut depth = 0i32;
    loop {
        match r.read_event() {
            Ok(Event::Eof) => break,
            Ok(ev @ (Event::Start(_) | Event::Empty(_))) => {
                let (Event::Start(e) | Event::Empty(e)) = &ev else {
                    unreachable!()
                };
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                let attrs = e
                    .attributes()
                    .map(|a| {
                        let a = a.expect("well-formed attribute");
                        (
                            String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                            a.normalized_value(quick_xml::XmlVersion::Explicit1_0)
                                .expect("escaped value")
                                .into_owned(),
                        )
                    })
                    .collect();
                out.push((name, attrs));
                depth += matches!(ev, Event::Start(_)) as i32;
            }
            Ok(Event::End(_)) => depth -= 1,
            Ok(_) => {}
            Err(e) => panic!("not well-formed XML at {}: {e}\n{svg}", r.buffer_position()),
        }
    }
    assert_eq!(depth, 0, "unclosed elements:\n{svg}");
    out
}

fn attr<'a>(e: &'a (String, Vec<(String, String)>), key: &str) -> Option<&'a str> {
    e.1.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn compare_and_report_describe_a_slower_second_run() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (a, sa) = run(dir.path(), "fast", "{wholeObject: true}");
    let (b, sb) = run(dir.path(), "slow", "{chunkSize: 4KiB, verify: true}");
    for s in [&sa, &sb] {
        assert_eq!(s["ops"]["get"]["errors"], 0, "{s}");
        assert!(full_seconds(s) >= 2, "{s}");
    }
    let (na, nb) = (full_seconds(&sa), full_seconds(&sb));

    // JSON: the numbers and their directions.
    let json: Value =
        serde_json::from_str(&ok(run_output(&["compare", &a, &b, "--format", "json"]))).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| r["op"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["get", "all"]
    );
    let delta = |row: usize, m: &str| -> Value {
        rows[row]["deltas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["metric"] == m)
            .unwrap_or_else(|| panic!("{m} missing in row {row}: {json}"))
            .clone()
    };
    let ops = delta(0, "opsPerSec");
    assert!(ops["delta"].as_f64().unwrap() < 0.0, "{ops}");
    assert!(
        ops["relative"].as_f64().unwrap() < -0.2,
        "clearly slower: {ops}"
    );
    assert_eq!(ops["change"], "worse");
    for m in ["p50Ms", "p90Ms", "p99Ms"] {
        let d = delta(0, m);
        assert!(d["delta"].as_f64().unwrap() > 0.0, "{d}");
        assert_eq!(d["change"], "worse", "{d}");
    }
    // One read per whole 256 KiB file against exactly 64 reads of 4 KiB (none past the end).
    let req = delta(0, "requestsPerOp");
    assert_eq!(
        (req["a"].as_f64(), req["b"].as_f64()),
        (Some(1.0), Some(64.0))
    );
    assert_eq!(req["relative"].as_f64(), Some(63.0));
    let errors = delta(0, "errors");
    assert_eq!(
        (errors["delta"].as_f64(), &errors["relative"]),
        (Some(0.0), &Value::Null)
    );
    assert_eq!(errors["change"], "same");
    // CPU per GiB only on the row of all ops.
    assert!(rows[0]["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["metric"] != "cpuSecondsPerGib"));
    let cpu = delta(1, "cpuSecondsPerGib");
    assert!(cpu["a"].as_f64().unwrap() > 0.0 && cpu["b"].as_f64().unwrap() > 0.0);
    let ks = &rows[0]["latencyTest"];
    assert_eq!(ks["n"], sa["ops"]["get"]["count"]);
    assert_eq!(ks["m"], sb["ops"]["get"]["count"]);
    assert!(ks["d"].as_f64().unwrap() > 0.5, "{ks}");
    assert!(ks["pValue"].as_f64().unwrap() < 0.01, "{ks}");
    assert_eq!(ks["secondSlower"], true);
    let tput = &rows[1]["throughputTest"];
    assert_eq!(
        (tput["n"].as_u64(), tput["m"].as_u64()),
        (Some(na as u64), Some(nb as u64))
    );
    // Every second of the fast run beats every second of the slow one.
    assert_eq!(tput["u"].as_f64(), Some((na * nb) as f64));

    // Text: the same figures, readable.
    let text = ok(run_output(&["compare", &a, &b]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with(&format!("A: {a} (file://")), "{text}");
    assert!(lines[1].starts_with(&format!("B: {b} (file://")), "{text}");
    assert_eq!(
        lines[3].split_whitespace().collect::<Vec<_>>(),
        ["get", "A", "B", "delta", "delta", "%"]
    );
    let ops_line: Vec<&str> = lines[4].split_whitespace().collect();
    assert_eq!(ops_line[0], "ops/s");
    let (va, vb): (f64, f64) = (ops_line[1].parse().unwrap(), ops_line[2].parse().unwrap());
    assert!(va > vb, "{text}");
    assert!(
        ops_line[3].starts_with('-') && ops_line[4].starts_with('-'),
        "{text}"
    );
    assert_eq!(ops_line[5], "worse");
    assert!(
        text.contains("  req/op               1.00        64.00       +63.00   +6300.0%  worse\n"),
        "{text}"
    );
    assert!(text.contains("significant, B slower\n"), "{text}");
    assert!(
        text.contains(&format!(
            "  ops per second: Mann-Whitney U = {} ({na} vs {nb} s, ",
            na * nb
        )),
        "{text}"
    );

    // Markdown: a 7-column table, one row per figure.
    let md = ok(run_output(&["compare", &a, &b, "--format", "markdown"]));
    assert!(md.contains("| op | metric | A | B | Δ | Δ% | |\n|---|---|---:|---:|---:|---:|---|\n"));
    let figure_rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| get | ") && !l.contains("latency"))
        .collect();
    // 11 figures and GET's TTFB p50 and p99.
    assert_eq!(figure_rows.len(), 13, "{md}");
    for l in &figure_rows {
        assert_eq!(l.matches('|').count(), 8, "{l}");
    }
    assert!(md.contains("| get | req/op | 1.00 | 64.00 | +63.00 | +6300.0% | worse |"));

    // The gate: B is slower than 10% allows, A against itself is not.
    let gate = run_output(&["compare", &a, &b, "--fail-if-slower", "10"]);
    assert_eq!(gate.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&gate.stderr).contains("slower than allowed (10%): get ops/s "));
    ok(run_output(&["compare", &a, &a, "--fail-if-slower", "0"]));
    ok(run_output(&["compare", &b, &a, "--fail-if-slower", "10"]));

    // Report on a terminal: one table (one op), a row per run, deltas against the first.
    let term = ok(run_output(&["report", &a, &b]));
    let lines: Vec<&str> = term.lines().collect();
    assert_eq!(lines[0], "get");
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        [
            "run", "ops/s", "MiB/s", "p50", "ms", "p90", "ms", "p95", "ms", "p99", "ms", "p99.9",
            "ms", "p99.99", "ms", "max", "ms", "errors", "req/op", "CPU", "s/GiB", "CPU", "%",
            "minor", "faults"
        ]
    );
    assert!(
        lines[2].starts_with("fast ") && !lines[2].contains('%'),
        "{term}"
    );
    let fast: Vec<&str> = lines[2].split_whitespace().collect();
    let slow: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(slow[0], "slow");
    let num = |s: &str| -> f64 { s.parse().unwrap() };
    assert!(num(slow[1]) < num(fast[1]), "ops/s fell: {term}");
    assert!(num(slow[3]) > num(fast[3]), "p50 rose: {term}");
    assert_eq!((fast[11], slow[11]), ("1.00", "64.00"), "req/op: {term}");
    // Under the slower run, its differences to the first (errors: 0 against 0, no ratio).
    let vs: Vec<&str> = lines[4].split_whitespace().collect();
    assert_eq!(vs[..2], ["vs", "fast"], "{term}");
    assert!(
        vs[2].starts_with('-') && vs[2].ends_with('%'),
        "ops/s: {term}"
    );
    assert!(
        vs[4].starts_with('+') && vs[4].ends_with('%'),
        "p50: {term}"
    );
    assert_eq!(vs[11], "+6300.0%", "req/op: {term}");
    assert!(
        term.contains("\nops per second (all ops, full seconds)\n  fast  "),
        "{term}"
    );
    assert!(
        term.contains("\nmean latency per second (all ops)\n  fast  "),
        "{term}"
    );

    // Report files.
    let out = dir.path().join("report");
    let listed = ok(run_output(&[
        "report",
        &a,
        &b,
        "--out",
        out.to_str().unwrap(),
    ]));
    let names: Vec<String> = listed
        .lines()
        .map(|l| {
            Path::new(l)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "report.md",
            "throughput.svg",
            "bandwidth.svg",
            "latency.svg",
            "timeline-throughput.svg",
            "timeline-latency.svg"
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let header = "| run | ops/s | MiB/s | p50 ms | p90 ms | p95 ms | p99 ms | p99.9 ms | p99.99 ms | max ms | errors | req/op | CPU s/GiB | CPU % | minor faults |";
    assert!(
        md.contains(&format!(
            "## get\n\n{header}\n|---|{}\n",
            "---:|".repeat(14)
        )),
        "{md}"
    );
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| fast") || l.starts_with("| slow"))
        .collect();
    assert_eq!(rows.len(), 2, "{md}");
    for r in &rows {
        assert_eq!(r.matches('|').count(), 16, "{r}");
    }
    assert!(rows[1].contains("| 64.00 (+6300.0%) |"), "{md}");
    for n in &names[1..] {
        assert!(md.contains(&format!("]({n})")), "{n} not linked: {md}");
    }

    let svg = |n: &str| std::fs::read_to_string(out.join(n)).unwrap();
    for n in &names[1..] {
        let text = svg(n);
        assert!(text.starts_with("<?xml"), "{n}");
        // Self-contained: nothing to fetch, nothing to run.
        for bad in [
            "href",
            "<script",
            "url(",
            "@import",
            "<image",
            "<foreignObject",
        ] {
            assert!(!text.contains(bad), "{n} contains {bad}");
        }
        let el = elements(&text);
        assert_eq!(el[0].0, "svg");
        assert_eq!(attr(&el[0], "xmlns"), Some("http://www.w3.org/2000/svg"));
    }
    let bars = |n: &str| {
        elements(&svg(n))
            .into_iter()
            .filter(|e| e.0 == "rect" && attr(e, "class") == Some("bar"))
            .collect::<Vec<_>>()
    };
    // One op, two runs: one bar each; p50 and p99 per run.
    assert_eq!(bars("throughput.svg").len(), 2);
    assert_eq!(bars("bandwidth.svg").len(), 2);
    assert_eq!(bars("latency.svg").len(), 4);
    // The slow run's throughput bar is the shorter one, its p50 bar the taller one.
    let height = |e: &(String, Vec<(String, String)>)| -> f64 {
        attr(e, "height").unwrap().parse().unwrap()
    };
    let t = bars("throughput.svg");
    assert!(height(&t[0]) > height(&t[1]));
    let l = bars("latency.svg");
    assert!(height(&l[2]) > height(&l[0]), "slow p50 above fast p50");
    // One point per full second of each run, in both timelines.
    for n in ["timeline-throughput.svg", "timeline-latency.svg"] {
        let points: Vec<usize> = elements(&svg(n))
            .iter()
            .filter(|e| e.0 == "polyline")
            .map(|e| attr(e, "points").unwrap().split_whitespace().count())
            .collect();
        assert_eq!(points, [na, nb], "{n}");
    }

    // One summary: a row per op and one for all ops, no relative differences.
    let one = ok(run_output(&["report", &a]));
    let lines: Vec<&str> = one.lines().collect();
    assert!(lines[0].starts_with("fast (file://"), "{one}");
    assert!(
        lines[2].starts_with("get ") && lines[3].starts_with("all "),
        "{one}"
    );
    // (`CPU %` is a heading; a difference would be `(+1.0%)`.)
    assert!(!one.contains("%)"), "{one}");
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"version\": 1}").unwrap();
    let b = bad.to_str().unwrap();
    let out = run_output(&["compare", b, b]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json: not a valid summary of schemaVersion 1: missing field"),
        "{err}"
    );
    let out = run_output(&["report", b, "--labels", "x,y"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 labels for 1 summaries"));
}

#[test]
fn units_decimal_prints_a_mebibyte_per_second_as_1_05_megabytes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (_, mut s) = run(dir.path(), "units", "{wholeObject: true}");
    // The same run over exactly as many seconds as it moved MiB: 1 MiB/s (the rates are
    // recomputed from the counts and the length).
    let bytes = s["ops"]["get"]["bytes"].as_u64().unwrap();
    assert!(bytes > 0, "{s}");
    s["elapsedSeconds"] = Value::from(bytes as f64 / (1u64 << 20) as f64);
    let one = dir.path().join("one-mib-per-s.json");
    std::fs::write(&one, s.to_string()).unwrap();
    let p = one.to_str().unwrap();
    let row = |text: &str, first: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(first))
            .unwrap_or_else(|| panic!("no {first} row:\n{text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    // report: the column is MB/s and the figure 1.05; by default MiB/s and 1.0.
    let text = ok(run_output(&["report", p, "--units", "decimal"]));
    let header = row(&text, "op");
    let at = header
        .iter()
        .position(|h| h == "MB/s")
        .expect("MB/s column");
    // Every column before it is one word in the header as in the rows: the same index.
    assert_eq!(row(&text, "get")[at], "1.05", "{text}");
    let text = ok(run_output(&["report", p]));
    let header = row(&text, "op");
    let at = header
        .iter()
        .position(|h| h == "MiB/s")
        .expect("MiB/s column");
    assert_eq!(row(&text, "get")[at], "1.0", "{text}");
    // compare: the decimal figure is its own metric.
    let json: Value = serde_json::from_str(&ok(run_output(&[
        "compare", p, p, "--format", "json", "--units", "decimal",
    ])))
    .unwrap();
    let deltas = json["rows"][0]["deltas"].as_array().unwrap();
    let mb = deltas
        .iter()
        .find(|d| d["metric"] == "mbPerSec")
        .unwrap_or_else(|| panic!("mbPerSec missing: {json}"));
    assert!((mb["a"].as_f64().unwrap() - 1.048576).abs() < 1e-9, "{mb}");
    assert!(!deltas.iter().any(|d| d["metric"] == "mibPerSec"));
    let text = ok(run_output(&["compare", p, p, "--units", "decimal"]));
    assert!(text.contains("MB/s") && text.contains("1.05"), "{text}");
    // merge prints the run's table in the units asked.
    let text = ok(run_output(&["merge", p, "--units", "decimal"]));
    assert!(text.contains("MB/s") && !text.contains("MiB/s"), "{text}");
    // The whole run used CPU: its percent of a core is in the report's row of all ops.
    let text = ok(run_output(&["report", p]));
    assert!(
        row(&text, "op").iter().any(|h| h == "%"),
        "CPU % column:\n{text}"
    );
}
