//! The bounds every workload is held to. Each is both in the schema (so the CRD rejects it at
//! admission where a schema can express it) and in [`Workload::validate`](super::Workload::validate) (so a standalone
//! file is held to the same bounds): one source of truth.

/// Alignment of O_DIRECT buffers, offsets and lengths. 4 KiB satisfies every common
/// logical block size (512 B and 4 KiB sectors). Here, beside the other bounds, because
/// validation checks sizes against it (`targets` re-exports it).
pub const DIRECT_ALIGN: usize = 4096;
/// Tasks issuing operations (`concurrency`).
pub const MAX_CONCURRENCY: u32 = 65_536;
/// `totalOps`.
pub const MAX_TOTAL_OPS: u64 = 1_000_000_000_000;
/// One object (`objectSize`, `dataset.size`, every size of a distribution): 5 TiB, the
/// largest S3 object.
pub const MAX_OBJECT_SIZE: u64 = 5 << 40;
/// What one run's dataset may hold in all: `dataset.objects` x the largest dataset size.
pub const MAX_DATASET_BYTES: u64 = 1 << 50;
/// `dataset.objects` and `write.maxObjects`.
pub const MAX_OBJECTS: u64 = 100_000_000;
/// Chunk and range sizes (`read.chunkSize`, `read.adaptive.*`, `rangeEngine.chunkSize`):
/// each is one buffer per task.
pub const MAX_CHUNK_SIZE: u64 = 1 << 30;
/// A buffer holding a whole object (`read.wholeObject`, the range engine): larger objects
/// are refused with an error instead of allocated.
pub const MAX_WHOLE_OBJECT_BUFFER: u64 = 1 << 30;
/// `write.partSize`: 5 GiB, the largest S3 part.
pub const MAX_PART_SIZE: u64 = 5 << 30;
/// `rateLimit`, operations per second: the smallest.
pub const MIN_RATE: f64 = 0.001;
/// `rateLimit`, operations per second: the largest.
pub const MAX_RATE: f64 = 10_000_000.0;
/// Every duration (`duration`, `rangeEngine.rangeTimeout`, `storage.requestTimeout`): 30 days.
pub const MAX_DURATION_SECS: u64 = 30 * 24 * 3600;
/// `read.adaptive.factor`.
pub const MAX_GROWTH: f64 = 16.0;
/// `ops[].weight`.
pub const MAX_WEIGHT: u32 = 1_000_000;
/// `target`, in bytes.
pub const MAX_TARGET_LEN: u32 = 1024;
/// `storage.endpoint`, in bytes.
pub const MAX_ENDPOINT_LEN: u32 = 2048;
/// `storage.endpoints`: gateway nodes one worker spreads its requests over.
pub const MAX_ENDPOINTS: u32 = 64;
/// `storage.tls.caFile`, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_LEN: u32 = 4096;
/// `dataset.prefix`, in bytes.
pub const MAX_PREFIX_LEN: u32 = 256;
/// `rangeEngine.maxConcurrentRanges`.
pub const MAX_CONCURRENT_RANGES: u32 = 1024;
/// `storage.maxRetries`.
pub const MAX_RETRIES: u32 = 100;
/// All tasks' latency histograms together (see
/// [`histogram_bytes_per_task`](super::histogram_bytes_per_task)).
pub const MAX_HISTOGRAM_BYTES: u64 = 4 << 30;
/// A workload file, in bytes.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Nesting of `[` and `{` in a workload file.
pub const MAX_NESTING: usize = 32;
pub use crate::quote::MAX_QUOTED;
/// Errors listed for one file; the rest are counted.
pub const MAX_ERRORS_SHOWN: usize = 20;
/// `block.queueDepth`: I/Os in flight per task (fio's `iodepth`).
pub const MAX_QUEUE_DEPTH: u32 = 1024;
/// One block (`block.blockSize`, every size of `block.blockSizes`).
pub const MAX_BLOCK_SIZE: u64 = 64 << 20;
/// `block.files`: files per task (or in all, when shared).
pub const MAX_BLOCK_FILES: u32 = 4096;
/// I/O buffers of a block workload in all: `concurrency` x `queueDepth` x the largest block.
pub const MAX_BLOCK_BUFFER_BYTES: u64 = 4 << 30;
