//! Op-logs: every operation of a run recorded (`run --oplog FILE`), and replayed with the
//! same timing against another target (`replay FILE --target URI`).
//!
//! The format (gzip-compressed lines, versioned; `docs/OPLOG.md` has it in full):
//!
//! ```text
//! benchrun-oplog 1 {"workerId":"local","workload":{...}}
//! <offset_us>\t<w|m>\t<op>\t<key>\t<size>\t<bytes>\t<latency_us>\t<ok|error kind>
//! ...
//! end\t<records>\t<dropped>
//! ```
//!
//! Memory is bounded however long the log: recording queues at most a fixed number of
//! records (more are dropped and counted, never waited for), and replay holds one line
//! while reading, and at most its reorder window, its read-ahead queue and the ops in
//! flight while replaying.
//!
//! # Files
//! - `record.rs`: the lines: header, record, end line; encode and decode
//! - `writer.rs`: the sink tasks record to and the thread that writes the file
//! - `reader.rs`: the log read as a stream, and its validation before a replay
//! - `remap.rs`: `--remap` prefix rules
//!
//! The replay itself, which runs ops as the engine does, is [`crate::replay`] (so the engine,
//! which records into a [`Sink`], does not depend on it).

pub mod reader;
pub mod record;
pub mod remap;
pub mod writer;

use std::path::PathBuf;

pub use reader::{validate, LogInfo, Reader};
pub use record::{Header, Phase, Record};
pub use remap::Remap;
pub use writer::{Sink, Writer};

/// Why an op-log could not be written, read or replayed.
#[derive(Debug, thiserror::Error)]
pub enum OplogError {
    /// The file could not be created, opened or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The op-log.
        path: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
    /// The file is not a complete, well-formed op-log.
    #[error("{}: corrupt op-log at record {record} (byte offset {offset}): {why}", path.display())]
    Corrupt {
        /// The op-log.
        path: PathBuf,
        /// The record (0: the header; operations count from 1).
        record: u64,
        /// Where the record starts in the decompressed stream.
        offset: u64,
        /// What is wrong.
        why: String,
    },
    /// The log cannot be replayed as asked (block ops, a bad option).
    #[error("{}: {why}", path.display())]
    Replay {
        /// The op-log.
        path: PathBuf,
        /// Why.
        why: String,
    },
}
