//! Reading an op-log as a stream: one line in memory at a time, however long the log.
//!
//! Every failure names the file, the record (the header is record 0, operations count from
//! 1) and the byte offset where that record starts in the decompressed stream (`zcat FILE |
//! tail -c +OFFSET+1` shows it).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

use super::record::{self, Header, Line, Record};
use super::OplogError;
use crate::spec::OpKind;

/// The longest header line read: a workload file is at most 1 MiB.
const MAX_HEADER: usize = 2 << 20;
/// The longest record line read: a key of 1 KiB (S3's limit) escaped thrice over, and room.
const MAX_RECORD: usize = 16 << 10;

/// The decompressed stream, read line by line with the offset of each.
struct Lines {
    path: PathBuf,
    inner: BufReader<GzDecoder<File>>,
    /// Bytes of the decompressed stream consumed so far.
    offset: u64,
    buf: Vec<u8>,
}

impl Lines {
    /// Line `record` (0: the header) without its newline, at most `limit` bytes; `None` at
    /// the end of the stream.
    fn line(&mut self, record: u64, limit: usize) -> Result<Option<String>, OplogError> {
        let at = self.offset;
        self.buf.clear();
        let read = (&mut self.inner)
            .take(limit as u64 + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| self.corrupt_at(record, at, stream_error(&e)))?;
        if read == 0 {
            return Ok(None);
        }
        self.offset += read as u64;
        if self.buf.pop() != Some(b'\n') {
            let why = if read > limit {
                format!("a line longer than {limit} bytes")
            } else {
                "the last line is cut short (truncated)".into()
            };
            return Err(self.corrupt_at(record, at, why));
        }
        String::from_utf8(std::mem::take(&mut self.buf))
            .map(Some)
            .map_err(|_| self.corrupt_at(record, at, "a line that is not UTF-8".into()))
    }

    fn corrupt_at(&self, record: u64, offset: u64, why: String) -> OplogError {
        OplogError::Corrupt {
            path: self.path.clone(),
            record,
            offset,
            why,
        }
    }
}

/// An op-log opened for reading, its header read and checked.
pub struct Reader {
    lines: Lines,
    header: Header,
    /// Records read so far.
    records: u64,
    /// Whether the end line has been read.
    ended: bool,
    /// The end line's count of records the recording lost.
    dropped: u64,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.lines.path)
            .field("records", &self.records)
            .finish()
    }
}

/// What a whole log holds, from a pass over it ([`validate`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogInfo {
    /// Records in the log (warm-up ones included).
    pub records: u64,
    /// Records of the measured stage.
    pub measured: u64,
    /// Records the recording lost (its end line's count).
    pub dropped: u64,
    /// The operations the log holds.
    pub ops: BTreeSet<OpKind>,
}

impl Reader {
    /// Open `path` and read its header.
    pub fn open(path: &Path) -> Result<Self, OplogError> {
        let file = File::open(path).map_err(|e| OplogError::Io {
            path: path.to_path_buf(),
            error: e,
        })?;
        let mut lines = Lines {
            path: path.to_path_buf(),
            inner: BufReader::with_capacity(64 << 10, GzDecoder::new(file)),
            offset: 0,
            buf: Vec::new(),
        };
        let Some(line) = lines.line(0, MAX_HEADER)? else {
            return Err(lines.corrupt_at(0, 0, "the file is empty (no header)".into()));
        };
        let header = record::decode_header(&line).map_err(|e| lines.corrupt_at(0, 0, e.0))?;
        Ok(Self {
            lines,
            header,
            records: 0,
            ended: false,
            dropped: 0,
        })
    }

    /// The log's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The next record, or `None` after the end line.
    pub fn next_record(&mut self) -> Result<Option<Record>, OplogError> {
        if self.ended {
            return Ok(None);
        }
        let n = self.records + 1;
        let at = self.lines.offset;
        let Some(line) = self.lines.line(n, MAX_RECORD)? else {
            return Err(self.lines.corrupt_at(
                n,
                at,
                "the log ends without its end line (truncated)".into(),
            ));
        };
        match record::decode(&line).map_err(|e| self.lines.corrupt_at(n, at, e.0))? {
            Line::Record(r) => {
                self.records = n;
                Ok(Some(r))
            }
            Line::End { records, dropped } => {
                if records != self.records {
                    return Err(self.lines.corrupt_at(
                        n,
                        at,
                        format!(
                            "the end line counts {records} records, the log holds {}",
                            self.records
                        ),
                    ));
                }
                self.ended = true;
                self.dropped = dropped;
                let after = self.lines.offset;
                let mut extra = [0u8; 1];
                match self.lines.inner.read(&mut extra) {
                    Ok(0) => Ok(None),
                    Ok(_) => {
                        Err(self
                            .lines
                            .corrupt_at(n + 1, after, "data after the end line".into()))
                    }
                    Err(e) => Err(self.lines.corrupt_at(n + 1, after, stream_error(&e))),
                }
            }
        }
    }

    /// Read the rest of the log; what it holds.
    fn rest(&mut self) -> Result<LogInfo, OplogError> {
        let mut info = LogInfo::default();
        while let Some(r) = self.next_record()? {
            info.records += 1;
            info.measured += u64::from(r.phase == record::Phase::Measured);
            info.ops.insert(r.op);
        }
        info.dropped = self.dropped;
        Ok(info)
    }
}

/// A decompression failure in words: a cut file or damaged bytes.
fn stream_error(e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        "the compressed stream ends early (truncated)".into()
    } else {
        format!("the compressed stream is damaged ({e})")
    }
}

/// Read the whole log at `path` (streaming, one line at a time), checking every line, the
/// end line and the compressed stream's checksum: replay calls this before it sends
/// anything, so a damaged log writes nothing to the target.
pub fn validate(path: &Path) -> Result<(Header, LogInfo), OplogError> {
    let mut r = Reader::open(path)?;
    let info = r.rest()?;
    Ok((r.header.clone(), info))
}

#[cfg(test)]
mod tests {
    use super::super::record::Phase;
    use super::super::Writer;
    use super::*;

    fn header() -> Header {
        Header {
            worker_id: "w".into(),
            workload: crate::spec::Workload::from_yaml(
                "target: file:///tmp/x\nduration: 1s\nops: [{ op: get, weight: 1 }]\n",
            )
            .unwrap(),
        }
    }

    fn rec(i: u64) -> Record {
        Record {
            offset_us: i as i64 - 5,
            phase: if i < 5 {
                Phase::Warmup
            } else {
                Phase::Measured
            },
            op: OpKind::Get,
            key: format!("k\t{i}"),
            size: i,
            bytes: i,
            latency_us: 7,
            error: (i % 3 == 0).then(|| "not_found".to_string()),
        }
    }

    #[test]
    fn what_the_writer_writes_the_reader_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.gz");
        let w = Writer::create(&path, &header(), 1 << 16).unwrap();
        let sink = w.sink();
        for i in 0..1000 {
            sink.record(rec(i));
        }
        let stats = w.finish().unwrap();
        assert_eq!((stats.records, stats.dropped), (1000, 0));
        let mut r = Reader::open(&path).unwrap();
        assert_eq!(r.header(), &header());
        for i in 0..1000 {
            assert_eq!(r.next_record().unwrap(), Some(rec(i)));
        }
        assert_eq!(r.next_record().unwrap(), None);
        let (_, info) = validate(&path).unwrap();
        assert_eq!((info.records, info.measured, info.dropped), (1000, 995, 0));
    }

    #[test]
    fn a_full_queue_drops_records_and_counts_every_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.gz");
        // A queue of 1 against 20,000 records sent at once: the writer cannot keep up with
        // all of them, and whatever it misses must be counted.
        let w = Writer::create(&path, &header(), 1).unwrap();
        let sink = w.sink();
        for i in 0..20_000 {
            sink.record(rec(i));
        }
        let stats = w.finish().unwrap();
        assert_eq!(stats.records + stats.dropped, 20_000);
        assert!(stats.dropped > 0, "{stats:?}");
        let (_, info) = validate(&path).unwrap();
        assert_eq!((info.records, info.dropped), (stats.records, stats.dropped));
    }

    #[test]
    fn a_log_cut_anywhere_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.gz");
        let w = Writer::create(&path, &header(), 1 << 16).unwrap();
        for i in 0..200 {
            w.sink().record(rec(i));
        }
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let cut = dir.path().join("cut.gz");
        for len in (0..bytes.len()).step_by(7) {
            std::fs::write(&cut, &bytes[..len]).unwrap();
            let e = validate(&cut).expect_err("a cut log must not validate");
            assert!(
                e.to_string().contains("corrupt op-log at record"),
                "cut at {len}: {e}"
            );
        }
    }
}
