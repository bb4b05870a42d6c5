//! Block workloads: reads and writes of a block size at offsets inside large files or a raw
//! block device, at a queue depth, as fio does. The fio option each key maps to is named in
//! its doc comment (and in docs/VOLUMES.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[cfg(test)]
use super::FieldError;
use super::{defaults, limits, Access, OpKind, TargetUri, Workload};
use crate::units::{ByteSize, HumanDuration};

/// The longest `precondition`: steady state is reached by writing a drive over about twice,
/// and 72h does that for a 60 TB drive at 1 GB/s; a longer figure is a slip of the unit.
pub const MAX_PRECONDITION: std::time::Duration = std::time::Duration::from_secs(72 * 3600);

/// Block I/O inside large files (under a `file://` or `direct://` directory) or inside a raw
/// block device (a `file://` or `direct://` path that is a block device). Writes overwrite in
/// place, so the space a run uses is fixed and known before it starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockSpec {
    /// Size of every read and write (fio `bs`). Default 4KiB; excludes `blockSizes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maximum" = limits::MAX_BLOCK_SIZE))]
    pub block_size: Option<ByteSize>,
    /// A mix of block sizes (fio `bssplit`): each I/O picks one with probability
    /// weight / sum of weights. Excludes `blockSize`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub block_sizes: Vec<BlockSizeWeight>,
    /// I/Os in flight per task (fio `iodepth`). Default 1.
    #[serde(default = "defaults::queue_depth")]
    #[schemars(range(min = 1, max = limits::MAX_QUEUE_DEPTH))]
    pub queue_depth: u32,
    /// Offsets: `random` (fio `randread`/`randwrite`/`randrw`), aligned to the block size and
    /// uniform over the whole file or range, or `sequential` (fio `read`/`write`/`rw`), each
    /// task walking its files from the start, wrapping around.
    #[serde(default)]
    pub access: Access,
    /// Size of each file (fio `size` / `nrfiles`). On a block device, the length of the range
    /// used from `offset`; default the rest of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size: Option<ByteSize>,
    /// Files of each task, or in all when `shared` (fio `nrfiles`). Default 1; 1 on a device.
    #[serde(default = "defaults::block_files")]
    #[schemars(range(min = 1, max = limits::MAX_BLOCK_FILES))]
    pub files: u32,
    /// Every task does I/O on the same files (fio's `filename` shared by jobs) instead of
    /// each on its own. A device is always shared.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// Block device only: the first byte of the range used (fio `offset`). Nothing outside
    /// `offset` .. `offset + fileSize` is ever read or written.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: ByteSize,
    /// How I/Os are issued (fio `ioengine`): `auto` (io_uring, or `sync` where io_uring is
    /// refused, the reason in the summary), `ioUring` (fail if refused) or `sync`.
    #[serde(default)]
    pub engine: IoEngine,
    /// io_uring only: I/Os queued before they are handed to the kernel in one submission
    /// (fio `iodepth_batch_submit`), 1 to `queueDepth`. Default 1, as fio's: each I/O is
    /// submitted as soon as it is ready. `queueDepth` submits every free slot at once, which
    /// costs fewer system calls and may keep the device less busy (a virtual disk here
    /// served 0.80x fio's IOPS batched, 1.03x one by one: docs/BENCHMARKS.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = limits::MAX_QUEUE_DEPTH))]
    pub submit_batch: Option<u32>,
    /// Drop the dataset from the page cache before the measured stage (fio `invalidate`,
    /// default true): written back, then `posix_fadvise(DONTNEED)`, no privileges needed.
    #[serde(default = "defaults::yes")]
    pub drop_cache: bool,
    /// Create files without writing their data (sparse; reads of unwritten blocks may never
    /// reach the device). Default false: files are laid out with real data.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sparse: bool,
    /// Random overwrites of the whole dataset for this long after the layout and before the
    /// measured stage (SSD preconditioning: steady state, not fresh-out-of-box figures).
    /// At most 72h (twice a 60 TB drive's capacity at 1 GB/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<HumanDuration>,
    /// Block device only: write even though the device carries a file system, partition
    /// table or other signature (its contents in the range are destroyed). A mounted device
    /// is refused whatever this says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_destroy: bool,
}

fn is_zero(b: &ByteSize) -> bool {
    b.0 == 0
}

/// One entry of a block-size mix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockSizeWeight {
    /// The block size.
    #[schemars(extend("maximum" = limits::MAX_BLOCK_SIZE))]
    pub size: ByteSize,
    /// Relative weight; 0 disables the entry.
    #[serde(default = "defaults::weight")]
    #[schemars(range(max = limits::MAX_WEIGHT))]
    pub weight: u32,
}

/// How a block workload issues its I/Os.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum IoEngine {
    /// io_uring, or `sync` where the kernel or a seccomp profile refuses io_uring.
    #[default]
    Auto,
    /// io_uring (fio `ioengine=io_uring`): `queueDepth` I/Os in flight from one thread per
    /// task. The run fails where io_uring is refused.
    IoUring,
    /// Blocking `pread`/`pwrite` (fio `ioengine=psync`): `queueDepth` threads per task, one
    /// I/O each.
    Sync,
}

impl IoEngine {
    /// The name as written in a workload.
    pub fn as_str(self) -> &'static str {
        match self {
            IoEngine::Auto => "auto",
            IoEngine::IoUring => "ioUring",
            IoEngine::Sync => "sync",
        }
    }
}

impl BlockSpec {
    /// The block sizes and their weights (a single `blockSize`, 4KiB by default).
    pub fn sizes(&self) -> Vec<(u64, u32)> {
        if self.block_sizes.is_empty() {
            vec![(self.block_size.map_or(4096, |b| b.0), 1)]
        } else {
            self.block_sizes
                .iter()
                .filter(|b| b.weight > 0)
                .map(|b| (b.size.0, b.weight))
                .collect()
        }
    }

    /// I/Os queued per io_uring submission (`submitBatch`, 1 by default).
    pub fn submit_batch(&self) -> u32 {
        self.submit_batch.unwrap_or(1)
    }

    /// The largest block an I/O can be.
    pub fn max_block(&self) -> u64 {
        self.sizes().iter().map(|s| s.0).max().unwrap_or(4096)
    }
}

/// The checks of a block workload (and of block ops without one), pushed to `bad`.
pub(super) fn validate(w: &Workload, uri: Option<&TargetUri>, bad: &mut dyn FnMut(&str, String)) {
    let block_ops: Vec<OpKind> = w
        .ops
        .iter()
        .filter(|o| o.weight > 0)
        .map(|o| o.op)
        .collect();
    let Some(b) = &w.block else {
        if block_ops.iter().any(|o| o.is_block()) {
            bad(
                "ops",
                "`read` and `write` are block I/O: give a `block` section (blockSize, queueDepth, fileSize, ...)".into(),
            );
        }
        return;
    };
    if let Some(op) = block_ops.iter().find(|o| !o.is_block()) {
        bad(
            "ops",
            format!("a block workload issues `read` and `write` only, not `{op}` (without `block`, the target is a bucket of objects)"),
        );
    }
    if let Some(u) = uri {
        if !u.is_local() {
            bad(
                "block",
                format!("block I/O needs a file:// or direct:// target (a directory or a block device), not {}://", u.scheme()),
            );
        }
    }
    if b.block_size.is_some() && !b.block_sizes.is_empty() {
        bad(
            "block.blockSize",
            "give blockSize or blockSizes, not both".into(),
        );
    }
    if !b.block_sizes.is_empty() && b.block_sizes.iter().all(|s| s.weight == 0) {
        bad(
            "block.blockSizes",
            "at least one size needs a weight above 0".into(),
        );
    }
    let direct = matches!(uri, Some(TargetUri::Direct { .. }));
    let mut check_bs = |path: String, v: u64| {
        if v == 0 {
            bad(&path, "must be greater than 0".into());
        } else if v > limits::MAX_BLOCK_SIZE {
            bad(
                &path,
                format!(
                    "{} is above the largest block, {}",
                    ByteSize(v),
                    ByteSize(limits::MAX_BLOCK_SIZE)
                ),
            );
        } else if direct && v % limits::DIRECT_ALIGN as u64 != 0 {
            bad(
                &path,
                format!(
                    "{} is not a multiple of {} B, which O_DIRECT (direct://) needs",
                    ByteSize(v),
                    limits::DIRECT_ALIGN
                ),
            );
        }
    };
    if let Some(bs) = b.block_size {
        check_bs("block.blockSize".into(), bs.0);
    }
    for (i, s) in b.block_sizes.iter().enumerate() {
        check_bs(format!("block.blockSizes[{i}].size"), s.size.0);
    }
    if !(1..=limits::MAX_QUEUE_DEPTH).contains(&b.queue_depth) {
        bad(
            "block.queueDepth",
            format!(
                "must be 1 to {} (got {})",
                limits::MAX_QUEUE_DEPTH,
                b.queue_depth
            ),
        );
    }
    if let Some(batch) = b.submit_batch {
        if !(1..=b.queue_depth.max(1)).contains(&batch) {
            bad(
                "block.submitBatch",
                format!(
                    "must be 1 to block.queueDepth ({}) (got {batch})",
                    b.queue_depth
                ),
            );
        }
        if b.engine == IoEngine::Sync {
            bad(
                "block.submitBatch",
                "applies to io_uring only; engine sync issues each I/O by its own call".into(),
            );
        }
    }
    if !(1..=limits::MAX_BLOCK_FILES).contains(&b.files) {
        bad(
            "block.files",
            format!("must be 1 to {} (got {})", limits::MAX_BLOCK_FILES, b.files),
        );
    }
    let max_block = b.max_block();
    if let Some(fs) = b.file_size {
        if fs.0 < max_block {
            bad(
                "block.fileSize",
                format!(
                    "{fs} is smaller than the largest block ({})",
                    ByteSize(max_block)
                ),
            );
        }
        if direct && fs.0 % limits::DIRECT_ALIGN as u64 != 0 {
            bad(
                "block.fileSize",
                format!(
                    "{fs} is not a multiple of {} B, which O_DIRECT (direct://) needs",
                    limits::DIRECT_ALIGN
                ),
            );
        }
        let copies = if b.shared { 1 } else { w.concurrency as u64 };
        let total = fs.0.saturating_mul(b.files as u64).saturating_mul(copies);
        if total > limits::MAX_DATASET_BYTES {
            bad(
                "block.fileSize",
                format!(
                    "fileSize x files{} is {}, above {}",
                    if b.shared { "" } else { " x concurrency" },
                    ByteSize(total),
                    ByteSize(limits::MAX_DATASET_BYTES)
                ),
            );
        }
    }
    if direct && b.offset.0 % limits::DIRECT_ALIGN as u64 != 0 {
        bad(
            "block.offset",
            format!(
                "{} is not a multiple of {} B, which O_DIRECT (direct://) needs",
                b.offset,
                limits::DIRECT_ALIGN
            ),
        );
    }
    let buffers = (w.concurrency as u64)
        .saturating_mul(b.queue_depth as u64)
        .saturating_mul(max_block);
    if buffers > limits::MAX_BLOCK_BUFFER_BYTES {
        bad(
            "block.queueDepth",
            format!(
                "concurrency x queueDepth x the largest block is {} of I/O buffers, above {}: lower one of them",
                ByteSize(buffers),
                ByteSize(limits::MAX_BLOCK_BUFFER_BYTES)
            ),
        );
    }
    if let Some(p) = b.precondition {
        if p.0.is_zero() || p.0 > MAX_PRECONDITION {
            bad(
                "block.precondition",
                format!(
                    "must be more than 0 and at most {}h (got {p})",
                    MAX_PRECONDITION.as_secs() / 3600
                ),
            );
        }
    }
    let r = &w.read;
    if r.chunk_size.is_some() || r.whole_object || r.adaptive.is_some() || !r.buffer_pool {
        bad(
            "read",
            "a block workload reads `blockSize` at a time: read.chunkSize, wholeObject, adaptive and bufferPool do not apply".into(),
        );
    }
    if r.verify && b.sparse {
        bad(
            "read.verify",
            "checks every block against what benchrun wrote there; a sparse layout (block.sparse) leaves blocks never written".into(),
        );
    }
    if w.write.max_objects.is_some() || w.write.fsync {
        bad(
            "write",
            "a block workload overwrites in place: write.maxObjects and write.fsync do not apply (use direct:// to bypass the page cache)".into(),
        );
    }
    if w.range_engine.enabled {
        bad(
            "rangeEngine.enabled",
            "object storage only; not with `block`".into(),
        );
    }
}

/// The field errors of `w`'s block checks (for tests).
#[cfg(test)]
pub(super) fn errors(w: &Workload) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let uri = w.target.parse::<TargetUri>().ok();
    validate(w, uri.as_ref(), &mut |path, message| {
        errs.push(FieldError {
            path: path.to_string(),
            message,
        })
    });
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(yaml: &str) -> Vec<String> {
        let w: Workload = serde_yaml::from_str(yaml).expect("parses");
        errors(&w).into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_valid_block_workload_has_no_errors() {
        let e = errs("target: direct:///data\nduration: 10s\nops: [{op: read, weight: 70}, {op: write, weight: 30}]\nblock: {blockSize: 4KiB, queueDepth: 32, fileSize: 1GiB}\n");
        assert!(e.is_empty(), "{e:?}");
    }

    #[test]
    fn every_bad_field_is_named() {
        let e = errs("target: direct:///data\nduration: 10s\nconcurrency: 64\nops: [{op: read}, {op: get}]\nblock: {blockSize: 1000, blockSizes: [{size: 4KiB}], queueDepth: 2000, fileSize: 100, offset: 512}\nread: {bufferPool: false}\n");
        let has = |field: &str, text: &str| {
            assert!(
                e.iter().any(|m| m.starts_with(field) && m.contains(text)),
                "no `{field}` error containing `{text}` in {e:#?}"
            )
        };
        has("ops", "not `get`");
        has("block.blockSize", "not both");
        has("block.blockSize", "multiple of 4096");
        has("block.queueDepth", "1 to 1024");
        has("block.fileSize", "smaller than the largest block");
        has("block.offset", "multiple of 4096");
        has("read", "do not apply");
    }

    #[test]
    fn precondition_is_bounded() {
        let base = "target: file:///data\nduration: 1s\nops: [{op: write}]\nblock: {fileSize: 1GiB, precondition: ";
        assert!(errs(&format!("{base}72h}}\n")).is_empty());
        for bad in ["0s", "73h", "1000d"] {
            let e = errs(&format!("{base}{bad}}}\n"));
            assert!(
                e.iter()
                    .any(|m| m
                        .starts_with("block.precondition: must be more than 0 and at most 72h")),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn submit_batch_is_within_the_queue_depth_and_io_uring_only() {
        let base = "target: file:///data\nduration: 1s\nops: [{op: read}]\nblock: {fileSize: 1GiB, queueDepth: 8, ";
        assert!(errs(&format!("{base}submitBatch: 8}}\n")).is_empty());
        assert!(errs(&format!("{base}submitBatch: 1, engine: ioUring}}\n")).is_empty());
        let e = errs(&format!("{base}submitBatch: 9}}\n"));
        assert!(
            e.iter().any(|m| m.starts_with("block.submitBatch")
                && m.contains("1 to block.queueDepth (8) (got 9)")),
            "{e:?}"
        );
        let e = errs(&format!("{base}submitBatch: 0}}\n"));
        assert!(
            e.iter().any(|m| m.starts_with("block.submitBatch")),
            "{e:?}"
        );
        let e = errs(&format!("{base}submitBatch: 2, engine: sync}}\n"));
        assert!(
            e.iter()
                .any(|m| m.starts_with("block.submitBatch") && m.contains("io_uring only")),
            "{e:?}"
        );
        let w: Workload = serde_yaml::from_str(&format!("{base}}}\n")).expect("parses");
        assert_eq!(w.block.expect("block").submit_batch(), 1, "fio's default");
    }

    #[test]
    fn block_ops_need_a_block_section_and_a_local_target() {
        let e = errs("target: file:///data\nduration: 1s\nops: [{op: read}]\n");
        assert!(
            e.iter()
                .any(|m| m.starts_with("ops") && m.contains("give a `block` section")),
            "{e:?}"
        );
        let e =
            errs("target: s3://b/p\nduration: 1s\nops: [{op: read}]\nblock: {fileSize: 1GiB}\n");
        assert!(
            e.iter()
                .any(|m| m.starts_with("block") && m.contains("s3://")),
            "{e:?}"
        );
    }

    #[test]
    fn buffers_are_bounded() {
        let e = errs("target: file:///data\nduration: 1s\nconcurrency: 1024\nops: [{op: read}]\nblock: {blockSize: 1MiB, queueDepth: 1024, fileSize: 1GiB}\n");
        assert!(
            e.iter()
                .any(|m| m.starts_with("block.queueDepth") && m.contains("I/O buffers")),
            "{e:?}"
        );
    }
}
