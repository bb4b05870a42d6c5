//! Block workloads on real files and real loop devices (root: `losetup`, `mkfs.ext4`,
//! `mount`): I/O counted by the kernel (`/sys/block/loopN/stat`), writes confined to the
//! range the run names, devices with a file system refused, layouts reused, and the page
//! cache dropped and measured.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use benchrun_worker::spec::OpKind;
use benchrun_worker::{Engine, Metrics, Summary, Workload};

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

fn workload(target: &str, rest: &str) -> Workload {
    Workload::from_yaml(&format!("target: {target}\n{rest}")).expect("valid workload")
}

async fn run(w: Workload) -> Result<Summary, String> {
    let cleanup = w.dataset.cleanup;
    let e = Engine::open(w, Arc::new(Metrics::new()), "w0")
        .await
        .map_err(|e| e.to_string())?;
    let ds = e.prepare().await.map_err(|e| e.to_string())?;
    let mut s = e
        .run(&ds, None, std::future::pending())
        .await
        .map_err(|e| e.to_string())?;
    if cleanup {
        s.cleanup = Some(e.cleanup().await.map_err(|e| e.to_string())?);
    }
    Ok(s)
}

// The loop device helper shared with the operator's cluster tests (std only, so included by
// path rather than as a dependency).
#[path = "../../tests/support/src/loopdev.rs"]
mod loopdev;
use loopdev::Loop;

fn new_loop(dir: &tempfile::TempDir, size: u64) -> Loop {
    Loop::new(dir.path(), size)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_4k_reads_on_a_loop_device_are_exactly_what_the_kernel_sees() {
    // dropCache is off in the device tests: its fdatasync reaches the device as an empty
    // write (a flush), which would blur the kernel's exact counts.
    let dir = scratch();
    let lo = new_loop(&dir, 64 << 20);
    // io_uring submitting each I/O (the default, fio's) and 8 at a time, and sync.
    for engine in ["ioUring", "ioUring, submitBatch: 8", "sync"] {
        let w = workload(
            &format!("direct://{}", lo.dev.display()),
            &format!("totalOps: 20000\nconcurrency: 2\nops: [{{op: read}}]\ndataset: {{prepare: false}}\nblock: {{blockSize: 4KiB, queueDepth: 8, engine: {engine}, dropCache: false}}\n"),
        );
        let before = lo.stat();
        let s = run(w).await.expect("run");
        let d = before.since(lo.stat());
        let r = &s.ops[&OpKind::Read];
        assert_eq!(r.count, 20000, "{engine}");
        assert_eq!(r.errors, 0, "{engine}");
        assert_eq!(r.bytes, 20000 * 4096, "{engine}");
        // Every read reached the device as one 4 KiB request (8 sectors), none written.
        assert_eq!(d.reads, 20000, "{engine}: reads the kernel counted: {d:?}");
        assert_eq!(d.sectors_read, 20000 * 8, "{engine}: sectors read: {d:?}");
        assert_eq!(
            d.writes + d.sectors_written,
            0,
            "{engine}: a read-only run wrote: {d:?}"
        );
        let v = s.volume.expect("volume figures");
        assert_eq!(v.queue_depth, 8);
        assert!(v.direct);
        assert_eq!(v.dataset_bytes, 64 << 20);
        let want = if engine == "sync" { "sync" } else { "io_uring" };
        assert_eq!(v.engine_label(), want);
    }
}

/// `rateLimit` on a loop device, both engines: every I/O waits for its due time (none starts
/// before it: the run cannot end before the last one is due), and the scheduler's lag is
/// recorded in bands that account for every started I/O. How small the lag is depends on the
/// machine's load: that is bench/openloop.sh's business, not a test's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_block_io_waits_for_each_due_time_and_records_its_lag() {
    let dir = scratch();
    let lo = new_loop(&dir, 16 << 20);
    for engine in ["ioUring", "sync"] {
        let w = workload(
            &format!("direct://{}", lo.dev.display()),
            &format!("totalOps: 400\nrateLimit: 2000\nconcurrency: 1\nops: [{{op: read}}]\ndataset: {{prepare: false}}\nblock: {{blockSize: 4KiB, queueDepth: 4, engine: {engine}, dropCache: false}}\n"),
        );
        let before = lo.stat();
        let s = run(w).await.expect("run");
        let d = before.since(lo.stat());
        assert_eq!(s.ops[&OpKind::Read].count, 400, "{engine}");
        assert_eq!(d.reads, 400, "{engine}: {d:?}");
        // Ticket 399 is due 199.5 ms after the start: no wait ended before its due time.
        assert!(
            s.elapsed_seconds >= 0.1995,
            "{engine}: 400 I/Os at 2,000/s ended after {} s",
            s.elapsed_seconds
        );
        let ol = s.open_loop.expect("open-loop figures");
        assert_eq!((ol.due, ol.started), (400, 400), "{engine}: {ol:?}");
        let b = &ol.lag_within;
        assert!(b.us10 <= b.us100 && b.us100 <= b.ms1, "{engine}: {ol:?}");
        assert_eq!(
            b.ms1 + ol.late,
            ol.started,
            "{engine}: every start in a band: {ol:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_writes_stay_inside_the_range_and_spread_over_all_of_it() {
    let dir = scratch();
    let lo = new_loop(&dir, 64 << 20);
    // The range is 16 MiB .. 48 MiB of a 64 MiB device; the device is zeros, so no signature.
    let n = 4000u64;
    let w = workload(
        &format!("direct://{}", lo.dev.display()),
        &format!("totalOps: {n}\nconcurrency: 1\nops: [{{op: write}}]\ndataset: {{prepare: false}}\nblock: {{blockSize: 4KiB, queueDepth: 16, offset: 16MiB, fileSize: 32MiB, dropCache: false}}\n"),
    );
    let before = lo.stat();
    let s = run(w).await.expect("run");
    let d = before.since(lo.stat());
    assert_eq!(s.ops[&OpKind::Write].count, n);
    assert_eq!(d.writes, n, "writes the kernel counted: {d:?}");
    assert_eq!(d.sectors_written, n * 8, "sectors written: {d:?}");
    let data = std::fs::read(&lo.backing).unwrap();
    let (lo_b, hi_b) = (16usize << 20, 48usize << 20);
    assert!(
        data[..lo_b].iter().all(|b| *b == 0) && data[hi_b..].iter().all(|b| *b == 0),
        "a byte outside the run's range changed"
    );
    let blocks: Vec<bool> = data[lo_b..hi_b]
        .chunks(4096)
        .map(|b| b.iter().any(|x| *x != 0))
        .collect();
    let written = blocks.iter().filter(|b| **b).count() as f64;
    // n uniform draws over B blocks touch B(1 - (1 - 1/B)^n) distinct ones (3,228 here);
    // the standard deviation is about 20, so 150 either way cannot happen by chance.
    let b = blocks.len() as f64;
    let expect = b * (1.0 - (1.0 - 1.0 / b).powf(n as f64));
    assert!(
        (written - expect).abs() < 150.0,
        "{written} distinct blocks written, {expect:.0} expected of uniform offsets"
    );
    for (i, band) in blocks.chunks(blocks.len() / 8).enumerate() {
        let hit = band.iter().filter(|b| **b).count();
        assert!(
            hit > band.len() / 8,
            "band {i} of the range got only {hit} writes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_with_a_file_system_is_refused_and_a_mounted_one_always() {
    let dir = scratch();
    let lo = new_loop(&dir, 32 << 20);
    mkfs_ext4(&lo.dev);
    let target = format!("direct://{}", lo.dev.display());
    let writes =
        "totalOps: 10\nops: [{op: write}]\ndataset: {prepare: false}\nblock: {blockSize: 4KiB}\n";
    let e = run(workload(&target, writes))
        .await
        .expect_err("must refuse");
    assert!(
        e.contains("block.allowDestroy") && e.contains("ext2/3/4"),
        "{e}"
    );
    // Reading it as it is harms nothing.
    let reads =
        "totalOps: 10\nops: [{op: read}]\ndataset: {prepare: false}\nblock: {blockSize: 4KiB}\n";
    assert_eq!(
        run(workload(&target, reads)).await.expect("reads").ops[&OpKind::Read].count,
        10
    );
    let mnt = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("mount point");
    let m = Command::new("mount")
        .arg(&lo.dev)
        .arg(mnt.path())
        .output()
        .unwrap();
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    let destroy = writes.replace("blockSize: 4KiB", "blockSize: 4KiB, allowDestroy: true");
    let e = run(workload(&target, &destroy))
        .await
        .expect_err("mounted: refused");
    let _ = Command::new("umount").arg(mnt.path()).output();
    assert!(e.contains("in use (mounted on"), "{e}");
}

fn files_workload(dir: &Path, scheme: &str, rest: &str) -> Workload {
    workload(&format!("{scheme}://{}", dir.display()), rest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_is_written_once_then_reused_and_removed_by_cleanup() {
    let dir = scratch();
    let keep = "totalOps: 100\nconcurrency: 2\nops: [{op: read, weight: 70}, {op: write, weight: 30}]\ndataset: {cleanup: false}\nblock: {blockSize: 4KiB, queueDepth: 4, fileSize: 4MiB, files: 2}\n";
    let first = run(files_workload(dir.path(), "direct", keep))
        .await
        .expect("first");
    let p = first.prepare.clone().expect("prepare stats");
    assert_eq!(
        (p.objects, p.bytes),
        (4, 16 << 20),
        "2 tasks x 2 files of 4 MiB, written in full"
    );
    assert_eq!(first.volume.as_ref().unwrap().reused, 0);
    let files: Vec<_> = std::fs::read_dir(dir.path().join("benchrun"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(files.len(), 8, "4 files and their layout markers");
    let clean = keep.replace("cleanup: false", "cleanup: true");
    let second = run(files_workload(dir.path(), "direct", &clean))
        .await
        .expect("second");
    assert_eq!(
        second.prepare.as_ref().unwrap().bytes,
        0,
        "the layout is reused, not rewritten"
    );
    assert_eq!(second.volume.as_ref().unwrap().reused, 1);
    assert_eq!(second.cleanup.as_ref().unwrap().objects, 4);
    assert!(
        !dir.path().join("benchrun").exists(),
        "cleanup removed the files and their directory"
    );
    let total: u64 = [&first, &second]
        .iter()
        .map(|s| s.ops.values().map(|o| o.count).sum::<u64>())
        .sum();
    assert_eq!(total, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_cache_is_dropped_before_buffered_reads_and_measured() {
    let dir = scratch();
    let base = "totalOps: 200\nconcurrency: 1\nops: [{op: read}]\nblock: {blockSize: 4KiB, fileSize: 16MiB, dropCache: DROP}\n";
    // Laid out through the page cache: without the drop, the whole file is resident.
    let kept = run(files_workload(
        dir.path(),
        "file",
        &base.replace("DROP", "false"),
    ))
    .await
    .unwrap();
    let c = kept
        .volume
        .as_ref()
        .unwrap()
        .cache
        .clone()
        .expect("residency measured");
    assert_eq!(c.bytes, 16 << 20);
    assert!(
        c.start_fraction() > 0.9,
        "a file just written is resident: {c:?}"
    );
    let table = benchrun_worker::report::table(&kept);
    assert!(
        table.contains("warning: most of the dataset was in the page cache"),
        "{table}"
    );
    let dropped = run(files_workload(
        dir.path(),
        "file",
        &base.replace("DROP", "true"),
    ))
    .await
    .unwrap();
    let c = dropped.volume.unwrap().cache.expect("residency measured");
    assert_eq!(c.dropped, 1);
    assert!(c.start_fraction() < 0.1, "dropped before the start: {c:?}");
    // 200 reads of 4 KiB (plus the kernel's readahead) bring back only a part of 16 MiB.
    assert!(c.end_fraction() < 0.9, "{c:?}");
}

#[tokio::test]
async fn a_path_that_is_neither_a_directory_nor_a_device_and_a_too_large_dataset_are_named() {
    let dir = scratch();
    let file = dir.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let rest = "totalOps: 1\nops: [{op: read}]\nblock: {fileSize: 1MiB}\n";
    let e = run(workload(&format!("file://{}", file.display()), rest))
        .await
        .unwrap_err();
    assert!(e.contains("neither a directory nor a block device"), "{e}");
    let huge = "totalOps: 1\nops: [{op: read}]\nblock: {fileSize: 100TiB}\n";
    let e = run(files_workload(dir.path(), "file", huge))
        .await
        .unwrap_err();
    assert!(e.contains("block.fileSize") && e.contains("free"), "{e}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() == 1,
        "nothing was written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mix_of_block_sizes_is_split_by_size_and_adds_up() {
    // fio's bssplit: each I/O one of three sizes, on real files with O_DIRECT.
    let dir = scratch();
    let rest = "totalOps: 300\nconcurrency: 2\nops: [{op: read}]\nblock: {blockSizes: [{size: 4KiB}, {size: 64KiB}, {size: 1MiB}], queueDepth: 2, fileSize: 4MiB, files: 1}\n";
    let s = run(files_workload(dir.path(), "direct", rest))
        .await
        .expect("run");
    let read = &s.ops[&OpKind::Read];
    let buckets = s.sizes.get(&OpKind::Read).expect("per-size figures");
    assert_eq!(
        buckets.keys().copied().collect::<Vec<_>>(),
        [4096, 65536, 1 << 20],
        "one bucket per block size"
    );
    for (size, b) in buckets {
        assert!(b.count > 0, "{size}: drawn at least once in 300");
        assert_eq!(b.bytes, b.count * size, "{size}: count x size");
        assert_eq!((b.smallest, b.largest), (*size, *size));
        assert_eq!(b.latency.count(), b.count);
    }
    assert_eq!(buckets.values().map(|b| b.count).sum::<u64>(), read.count);
    assert_eq!(buckets.values().map(|b| b.bytes).sum::<u64>(), read.bytes);
    assert_eq!(read.errors, 0);
}

/// Residency "at the start" is the measured stage's start: a warm-up that reads the dataset
/// fills the cache before it, and what was resident before the warm-up is kept apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn residency_at_the_start_is_taken_after_the_warmup() {
    let dir = scratch();
    let s = run(files_workload(
        dir.path(),
        "file",
        "duration: 3s\nwarmup: 2s\nconcurrency: 1\nops: [{op: read}]\nblock: {blockSize: 1MiB, fileSize: 16MiB, access: sequential, dropCache: true}\n",
    ))
    .await
    .unwrap();
    let warm_reads = s.warmup.as_ref().expect("warm-up figures").ops[&OpKind::Read].count;
    assert!(
        warm_reads >= 16,
        "the warm-up must read the 16 MiB file through once (1 MiB sequential reads for 2 s): {warm_reads} reads"
    );
    let v = s.volume.as_ref().expect("volume figures");
    let c = v.cache.clone().expect("residency measured");
    let before = c.resident_before_warmup.expect("kept apart with a warm-up");
    assert!(
        (before as f64) < 0.1 * c.bytes as f64,
        "dropped before the warm-up: {c:?}"
    );
    assert!(
        c.start_fraction() > 0.9,
        "the warm-up read the whole file into the cache before the measured stage: {c:?}"
    );
    // The volume is named by its target, with the same figures.
    let (key, t) = v.targets.iter().next().expect("one target");
    assert!(
        key.ends_with(&dir.path().join("benchrun").display().to_string()),
        "{key}"
    );
    assert_eq!((t.workers, t.dataset_bytes), (1, 16 << 20));
    assert_eq!(t.cache.as_ref(), Some(&c));
    // Without a warm-up, the start is the only instant before the stage.
    let plain = run(files_workload(
        dir.path(),
        "file",
        "totalOps: 10\nconcurrency: 1\nops: [{op: read}]\nblock: {blockSize: 1MiB, fileSize: 16MiB, dropCache: true}\n",
    ))
    .await
    .unwrap();
    let c = plain.volume.unwrap().cache.expect("residency measured");
    assert_eq!(c.resident_before_warmup, None);
    assert!(c.start_fraction() < 0.1, "{c:?}");
}

/// `probe-io` on a raw device (a control-plane run's `Block` claim): one 4 KiB write and one
/// 4 KiB read at its start, both reaching the device (the kernel counts them); a device with a
/// file system is refused before anything is written.
#[test]
fn the_first_io_probe_writes_and_reads_a_raw_device_and_spares_a_file_system() {
    let dir = scratch();
    let lo = new_loop(&dir, 16 << 20);
    let before = lo.stat();
    let p = benchrun_worker::probe::probe(&lo.dev).expect("probe");
    let d = before.since(lo.stat());
    // The signature check before it reads 68 KiB: reads are at least that, plus the probe's.
    assert_eq!(d.sectors_written, 8, "one 4 KiB write: {d:?}");
    assert!(d.reads >= 1 && d.sectors_read >= 8, "{d:?}");
    assert!(p.write_us > 0, "{p:?}");
    let mut head = vec![0u8; 4096];
    std::os::unix::fs::FileExt::read_exact_at(
        &std::fs::File::open(&lo.dev).expect("open"),
        &mut head,
        0,
    )
    .expect("read");
    assert!(head.iter().any(|b| *b != 0), "the pattern is on the device");

    let dir2 = scratch();
    let lo = new_loop(&dir2, 32 << 20);
    mkfs_ext4(&lo.dev);
    let before = lo.stat();
    let e = benchrun_worker::probe::probe(&lo.dev).expect_err("must refuse");
    assert!(format!("{e:#}").contains("ext2/3/4"), "{e:#}");
    assert_eq!(
        before.since(lo.stat()).sectors_written,
        0,
        "nothing written"
    );
}

/// `probe-hold --busy` on a raw device (a `busy` control-plane run's `Block` claim): every
/// I/O it counts is one the kernel saw, all of them 4 KiB, none in the first 1 MiB (the
/// probe's bytes and the 64 KiB a signature check reads stay as they were).
#[test]
fn the_busy_hold_keeps_io_on_a_raw_device_past_its_first_mebibyte() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = scratch();
    let lo = new_loop(&dir, 8 << 20);
    let before = lo.stat();
    let stop = Arc::new(AtomicBool::new(false));
    let (dev, s) = (lo.dev.clone(), stop.clone());
    // Unpaced in effect (a million a second): the test waits on the kernel's count.
    let hold = std::thread::spawn(move || {
        benchrun_worker::probe::busy::run(&dev, 16 << 20, 1_000_000, &s)
    });
    // Stopped once the kernel has seen 200 I/Os (bounded: a device that takes none fails).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while {
        let d = before.since(lo.stat());
        d.reads + d.writes < 200
    } {
        assert!(
            std::time::Instant::now() < deadline,
            "no I/O reached the device"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    let io = hold.join().expect("hold");
    let d = before.since(lo.stat());
    assert_eq!((io.errors, io.first_error.as_deref()), (0, None), "{io:?}");
    assert_eq!(
        (io.reads, io.writes),
        (d.reads, d.writes),
        "{io:?} vs {d:?}"
    );
    assert_eq!(
        d.sectors_read + d.sectors_written,
        8 * io.ops(),
        "4 KiB each: {d:?}"
    );
    assert!(io.reads > io.writes && io.writes > 0, "70% reads: {io:?}");
    let mut head = vec![0u8; 1 << 20];
    std::os::unix::fs::FileExt::read_exact_at(
        &std::fs::File::open(&lo.dev).expect("open"),
        &mut head,
        0,
    )
    .expect("read");
    assert!(head.iter().all(|b| *b == 0), "the first MiB is untouched");
}

/// An ext4 file system on `dev` (a real mkfs, as a user's device would have).
fn mkfs_ext4(dev: &std::path::Path) {
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(dev)
        .output()
        .expect("mkfs.ext4 runs");
    assert!(
        mkfs.status.success(),
        "{}",
        String::from_utf8_lossy(&mkfs.stderr)
    );
}
