//! Bounded-time property tests of what parses untrusted input: the workload parser
//! (`Workload::from_yaml`) and the summary decoder the operator runs on what worker pods send
//! (`serde_json::from_str::<Summary>` then `Summary::merge`). Seeded random mutations of real
//! inputs, for a few seconds each: no panic, no call slower than a bound, and no call
//! allocating more than a bound (measured by a counting global allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use benchrun_worker::engine::sizes::SizeSampler;
use benchrun_worker::engine::{Recorder, Schedule};
use benchrun_worker::spec::OpKind;
use benchrun_worker::stats::{Latency, OpStats, Second};
use benchrun_worker::{Summary, Workload};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Counts live heap bytes and their peak, so a test can bound what one call allocates.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Run `f`, failing on a panic, on more than `max_time`, or on more than `max_bytes` of heap
/// allocated above what was live before it. (Tests in this file run one at a time: see
/// `one_at_a_time`, so the counter sees only this call.)
fn bounded<T>(
    what: &str,
    input: &str,
    max_time: Duration,
    max_bytes: usize,
    f: impl FnOnce() -> T,
) -> T {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t = Instant::now();
    let out = catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| panic!("{what} panicked on input:\n{}", clip(input)));
    let took = t.elapsed();
    let grew = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    assert!(
        took <= max_time,
        "{what} took {took:?} on input:\n{}",
        clip(input)
    );
    assert!(
        grew <= max_bytes,
        "{what} allocated {grew} bytes on input:\n{}",
        clip(input)
    );
    out
}

fn clip(s: &str) -> String {
    s.chars().take(2000).collect()
}

/// The allocator counts process-wide; the two tests must not overlap.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How many inputs each property tries: a fixed number, so every run (fast machine or
/// loaded) tries the same inputs and a failure reproduces; a few seconds in a debug build.
const WORKLOAD_CASES: u64 = 20_000;
const SUMMARY_CASES: u64 = 5_000;

const TOKENS: &[&str] = &[
    "*a",
    "&a ",
    "[",
    "]",
    "{",
    "}",
    ": ",
    "- ",
    ",",
    "\n",
    "\n  ",
    "\"",
    "'",
    "#",
    "!!binary ",
    "~",
    "null",
    ".nan",
    ".inf",
    "-1",
    "0",
    "1e308",
    "1e-20",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999TiB",
    "1.5.3GiB",
    "4MB?",
    "1.3",
    "5TiB",
    "100TiB",
    "65537",
    "1000000000",
    "../",
    "/etc/",
    "file:///",
    "s3://",
    "uniform: {min: 1}",
    "lognormal: {mean: 0, stdDev: 0}",
    "concurrency: ",
    "objectSize: ",
    "rateLimit: ",
    "duration: ",
    "totalOps: ",
    "dataset: ",
    "prefix: ",
    "9999999999d",
    "\u{0}",
    "\u{feff}",
    "é",
    "\t",
];

fn mutate(rng: &mut SmallRng, s: &str) -> String {
    let mut b: Vec<char> = s.chars().collect();
    for _ in 0..rng.random_range(1..6) {
        let at = rng.random_range(0..=b.len());
        match rng.random_range(0..5) {
            0 => b
                .splice(at..at, TOKENS[rng.random_range(0..TOKENS.len())].chars())
                .for_each(drop),
            1 if !b.is_empty() => {
                let end = (at + rng.random_range(1..20)).min(b.len());
                b.drain(at.min(end)..end);
            }
            2 if !b.is_empty() => {
                let i = rng.random_range(0..b.len());
                b[i] = char::from(rng.random_range(0x20u8..0x7f));
            }
            3 if !b.is_empty() => {
                // Duplicate a span (repeated keys, deeper nesting).
                let from = rng.random_range(0..b.len());
                let end = (from + rng.random_range(1..80)).min(b.len());
                let span: Vec<char> = b[from..end].to_vec();
                b.splice(at..at, span).for_each(drop);
            }
            _ => {
                let n = rng.random_range(1..200);
                let t = TOKENS[rng.random_range(0..TOKENS.len())];
                b.splice(at..at, t.repeat(n).chars()).for_each(drop);
            }
        }
    }
    b.into_iter().collect()
}

fn seeds() -> Vec<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut out = vec![];
    for dir in ["examples", "tests/corpus/worker"] {
        for e in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".yaml")
                && !name.starts_with("benchmarkrun-")
                && !name.starts_with("benchmarkschedule-")
            {
                if let Ok(t) = std::fs::read_to_string(&p) {
                    if t.len() < 4096 {
                        out.push(t);
                    }
                }
            }
        }
    }
    assert!(out.len() > 40, "{} seeds", out.len());
    // Sorted, not in the directory's order: the same inputs in every checkout.
    out.sort();
    out
}

#[test]
fn workload_parser_never_panics_and_stays_bounded() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let seeds = seeds();
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    let started = Instant::now();
    let (mut n, mut valid) = (0u64, 0u64);
    while n < WORKLOAD_CASES {
        let seed = &seeds[rng.random_range(0..seeds.len())];
        let input = mutate(&mut rng, seed);
        let parsed = bounded(
            "Workload::from_yaml",
            &input,
            Duration::from_secs(1),
            32 << 20,
            || {
                let r = Workload::from_yaml(&input);
                // Errors are bounded in size whatever the input.
                if let Err(e) = &r {
                    let m = e.to_string();
                    assert!(m.len() < 8192, "{} bytes of error", m.len());
                }
                r
            },
        );
        n += 1;
        if let Ok(w) = parsed {
            valid += 1;
            // What the engine builds from a valid workload cannot panic either.
            bounded(
                "engine setup",
                &input,
                Duration::from_secs(1),
                32 << 20,
                || {
                    SizeSampler::new(&w.object_size).expect("a validated size samples");
                    SizeSampler::new(w.dataset_size()).expect("a validated size samples");
                    let _ = Recorder::histogram_bytes_per_task(&w);
                    let now = tokio::time::Instant::now();
                    let s =
                        Schedule::starting(now, w.duration.map(|d| d.0), w.total_ops, w.rate_limit);
                    for _ in 0..3 {
                        s.next(now);
                    }
                },
            );
        }
    }
    eprintln!(
        "{n} mutated workloads, {valid} valid, in {:?}",
        started.elapsed()
    );
    assert!(
        valid > 0,
        "no mutation stayed valid: the mutations are too coarse to test much"
    );
}

fn sample_summary(id: &str, seed: u64) -> Summary {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut get = OpStats::default();
    let mut ttfb = Latency::default();
    for _ in 0..500 {
        let us = rng.random_range(50..50_000);
        get.count += 1;
        get.bytes += 4096;
        get.requests += 1;
        get.latency.record(Duration::from_micros(us));
        ttfb.record(Duration::from_micros(us / 2));
    }
    get.ttfb = Some(ttfb);
    get.errors_by_kind.insert("timeout".into(), 3);
    let mut s = Summary {
        target: "s3://bucket/p/".into(),
        workers: 1,
        worker_ids: vec![id.into()],
        started_at: chrono::Utc::now(),
        elapsed_seconds: 3.0,
        stopped_by: "duration".into(),
        ops: [(OpKind::Get, get)].into(),
        timeline: (0..3)
            .map(|second| Second {
                second,
                ops: 160,
                bytes: 655360,
                errors: 1,
                latency_sum_us: 159 * 2000,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    s.refresh();
    s
}

/// Replace one random leaf of a JSON document with a hostile value.
fn mutate_json(rng: &mut SmallRng, v: &mut serde_json::Value, hostile: &[serde_json::Value]) {
    use serde_json::Value;
    match v {
        Value::Object(m) if !m.is_empty() => {
            let i = rng.random_range(0..m.len());
            let k = m.keys().nth(i).cloned().unwrap();
            if rng.random_bool(0.3) {
                m.insert(k, hostile[rng.random_range(0..hostile.len())].clone());
            } else {
                mutate_json(rng, m.get_mut(&k).unwrap(), hostile);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = rng.random_range(0..a.len());
            if rng.random_bool(0.3) {
                a[i] = hostile[rng.random_range(0..hostile.len())].clone();
            } else {
                mutate_json(rng, &mut a[i], hostile);
            }
        }
        _ => *v = hostile[rng.random_range(0..hostile.len())].clone(),
    }
}

/// Base64 of a V2-deflate histogram whose header claims `payload` bytes and these bounds.
fn forged_histogram(payload: u32, digits: u32, high: u64) -> String {
    use base64::Engine as _;
    use std::io::Write;
    let mut v2 = vec![];
    v2.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
    v2.extend_from_slice(&payload.to_be_bytes());
    v2.extend_from_slice(&0u32.to_be_bytes());
    v2.extend_from_slice(&digits.to_be_bytes());
    v2.extend_from_slice(&1u64.to_be_bytes());
    v2.extend_from_slice(&high.to_be_bytes());
    v2.extend_from_slice(&1.0f64.to_be_bytes());
    let mut z = flate2::write::ZlibEncoder::new(vec![], flate2::Compression::default());
    z.write_all(&v2).unwrap();
    let z = z.finish().unwrap();
    let mut raw = vec![];
    raw.extend_from_slice(&0x1c84_9314u32.to_be_bytes());
    raw.extend_from_slice(&(z.len() as u32).to_be_bytes());
    raw.extend_from_slice(&z);
    base64::engine::general_purpose::STANDARD.encode(raw)
}

#[test]
fn summary_decoder_and_merge_never_panic_and_stay_bounded() {
    use serde_json::{json, Value};
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let good = sample_summary("w0", 1);
    let base: Value = serde_json::to_value(sample_summary("w1", 2)).unwrap();
    let hostile = vec![
        json!(u64::MAX),
        json!(-1),
        json!(1e308),
        json!(f64::MIN_POSITIVE),
        json!(""),
        json!("x".repeat(10_000)),
        json!(null),
        json!([]),
        json!({}),
        json!(true),
        json!(4_000_000_000u64),
        json!("AAAA"),
        json!(forged_histogram(u32::MAX, 3, 3_600_000_000)),
        json!(forged_histogram(0, 5, u64::MAX / 4)),
        json!(forged_histogram(16, 3, 3_600_000_000)),
        json!([{"second": u64::MAX, "ops": 1, "bytes": 1, "errors": 0}]),
        json!([{"second": 100_000_000u64, "ops": 1, "bytes": 1, "errors": 0}]),
        json!({"get": {"count": u64::MAX, "errors": u64::MAX, "bytes": 1, "requests": 1, "latency": "AAAA"}}),
    ];
    let base_text = base.to_string();
    let mut rng = SmallRng::seed_from_u64(0xfeed);
    let started = Instant::now();
    let (mut n, mut decoded, mut merged) = (0u64, 0u64, 0u64);
    while n < SUMMARY_CASES {
        let text = if rng.random_bool(0.7) {
            let mut v = base.clone();
            for _ in 0..rng.random_range(1..4) {
                mutate_json(&mut rng, &mut v, &hostile);
            }
            v.to_string()
        } else {
            mutate(&mut rng, &base_text)
        };
        // The operator reads summaries with a size limit; within it, decoding and merging
        // must stay bounded: 256 MiB covers the largest timeline a summary may have (31 days
        // of seconds, ~80 MiB) with room for the Vec's growth.
        let ok = bounded(
            "Summary decode + merge",
            &text,
            Duration::from_secs(2),
            256 << 20,
            || {
                let Ok(s) = serde_json::from_str::<Summary>(&text) else {
                    return (false, false);
                };
                let m = Summary::merge(&[good.clone(), s]);
                (true, m.is_ok())
            },
        );
        n += 1;
        decoded += ok.0 as u64;
        merged += ok.1 as u64;
    }
    eprintln!(
        "{n} mutated summaries, {decoded} decoded, {merged} merged, in {:?}",
        started.elapsed()
    );
    assert!(
        decoded > 0 && merged > 0,
        "mutations never produced a decodable summary"
    );
}
