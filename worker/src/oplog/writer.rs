//! Recording: tasks hand records to a [`Sink`] (a bounded queue, never a wait), and one
//! thread per worker compresses them into the file.
//!
//! A full queue drops the record and counts it instead of making the task wait: a task
//! blocked on the disk would time the disk into the storage's latency (and, for object
//! targets, stall every task of its shard's runtime). The count is written in the log's end
//! line and in the summary's `oplog.dropped`, so a lost record is always visible.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use flate2::write::GzEncoder;
use flate2::Compression;

use super::record::{self, Header, Record};
use super::OplogError;
use crate::stats::OplogStats;

/// Records the queue holds before new ones are dropped: at about 100 bytes each, ~6 MiB, a
/// few hundred milliseconds of the fastest local runs.
pub const DEFAULT_QUEUE: usize = 65_536;

enum Msg {
    Record(Record),
    /// Write the end line and close the file.
    End,
}

/// Where tasks send their records; shared by every task of a run.
#[derive(Debug)]
pub struct Sink {
    tx: SyncSender<Msg>,
    /// Shared with the writer thread, which writes it in the end line.
    dropped: Arc<AtomicU64>,
}

impl Sink {
    /// Queue a record for the writer; never waits (a full queue counts it as dropped).
    pub fn record(&self, r: Record) {
        match self.tx.try_send(Msg::Record(r)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Records lost so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Msg::Record(_) => "Record",
            Msg::End => "End",
        })
    }
}

/// An op-log being written: the file, its writer thread and the sink tasks send to.
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    sink: Arc<Sink>,
    thread: JoinHandle<std::io::Result<u64>>,
}

impl Writer {
    /// Create the file at `path` and write its header now, so a bad path fails before the run
    /// starts; records queue up to `queue` deep.
    pub fn create(path: &Path, header: &Header, queue: usize) -> Result<Self, OplogError> {
        let io = |e: std::io::Error| OplogError::Io {
            path: path.to_path_buf(),
            error: e,
        };
        let file = File::create(path).map_err(io)?;
        let mut out = GzEncoder::new(BufWriter::new(file), Compression::fast());
        let line = record::encode_header(header).map_err(|e| OplogError::Io {
            path: path.to_path_buf(),
            error: std::io::Error::other(e),
        })?;
        writeln!(out, "{line}").map_err(io)?;
        let (tx, rx) = mpsc::sync_channel(queue.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let sink = Arc::new(Sink {
            tx,
            dropped: dropped.clone(),
        });
        // The thread holds no sender: once the writer and every task's sink are gone, it
        // ends even without `finish`.
        let thread = std::thread::Builder::new()
            .name("benchrun-oplog".into())
            .spawn(move || write_all(out, rx, &dropped))
            .map_err(io)?;
        Ok(Self {
            path: path.to_path_buf(),
            sink,
            thread,
        })
    }

    /// The sink the run's tasks record to.
    pub fn sink(&self) -> Arc<Sink> {
        self.sink.clone()
    }

    /// Write the end line and close the file, once every task has finished. Blocks until the
    /// file is flushed: call it off the async runtime's threads.
    pub fn finish(self) -> Result<OplogStats, OplogError> {
        let io = |e: std::io::Error| OplogError::Io {
            path: self.path.clone(),
            error: e,
        };
        // Waits for room: the end line must not be dropped. A writer that has failed has
        // hung up, and its error comes from the join below.
        let _ = self.sink.tx.send(Msg::End);
        let records = self
            .thread
            .join()
            .map_err(|_| io(std::io::Error::other("the op-log writer panicked")))?
            .map_err(io)?;
        Ok(OplogStats {
            records,
            dropped: self.sink.dropped(),
            ..Default::default()
        })
    }
}

/// The writer thread: records until the end message, then the end line; the number written.
fn write_all(
    mut out: GzEncoder<BufWriter<File>>,
    rx: Receiver<Msg>,
    dropped: &AtomicU64,
) -> std::io::Result<u64> {
    let mut records = 0u64;
    let mut line = String::with_capacity(256);
    // Every sender gone without an end message (the run's future dropped): the end line is
    // still written, so the log reads as complete for what it holds.
    while let Ok(Msg::Record(r)) = rx.recv() {
        line.clear();
        record::encode(&r, &mut line);
        out.write_all(line.as_bytes())?;
        records += 1;
    }
    out.write_all(record::encode_end(records, dropped.load(Ordering::Relaxed)).as_bytes())?;
    out.finish()?.flush()?;
    Ok(records)
}
