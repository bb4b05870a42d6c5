//! One line of an op-log: the header, a record, the end line; each encoded and decoded here,
//! and nowhere else, so the format has one definition (documented in `docs/OPLOG.md`).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::spec::{OpKind, Workload};

/// The first word of every op-log: what the file is.
pub const MAGIC: &str = "benchrun-oplog";
/// The format version this build writes and reads.
pub const VERSION: u32 = 1;
/// The first word of the last line, which says how many records precede it: without it the
/// log was cut short.
const END: &str = "end";

/// The header line's document: where the log came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// The worker that recorded the log.
    pub worker_id: String,
    /// The workload that produced it (its `target` is where the ops went).
    pub workload: Workload,
}

/// Whether an op belongs to the warm-up or to the measured stage: the same rule as the
/// summary's (by when the op finished), so the measured records are exactly the summary's ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Finished in the warm-up (left out of the summary's `ops`).
    Warmup,
    /// Counted in the summary's `ops`.
    Measured,
}

/// One operation as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// When the op was meant to start (its due time in open loop, else when it began),
    /// from the start of the measured stage, in microseconds; negative in the warm-up.
    pub offset_us: i64,
    /// Warm-up or measured.
    pub phase: Phase,
    /// The op.
    pub op: OpKind,
    /// The key (for `list`, the prefix listed).
    pub key: String,
    /// The object's size: written by `put`, known from the dataset for `get` and `stat`;
    /// 0 for `list` and `delete`.
    pub size: u64,
    /// Payload bytes the op moved (a `get` that read less than `size` shows here).
    pub bytes: u64,
    /// Latency in microseconds, from the intended start.
    pub latency_us: u64,
    /// `None` for success, else the error's kind (`not_found`, `http_503`, ...).
    pub error: Option<String>,
}

/// A line that is not what the format says, and why.
#[derive(Debug, PartialEq, Eq)]
pub struct BadLine(pub String);

/// A decoded line of the log's body.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// An operation.
    Record(Record),
    /// The last line: the number of records written and of records lost.
    End {
        /// Records before this line.
        records: u64,
        /// Records the writer lost.
        dropped: u64,
    },
}

/// The header line, without its newline.
pub fn encode_header(h: &Header) -> Result<String, serde_json::Error> {
    Ok(format!("{MAGIC} {VERSION} {}", serde_json::to_string(h)?))
}

/// Read a header line (without its newline).
pub fn decode_header(line: &str) -> Result<Header, BadLine> {
    let mut parts = line.splitn(3, ' ');
    if parts.next() != Some(MAGIC) {
        return Err(BadLine(format!(
            "not a benchrun op-log (the first line does not start with `{MAGIC}`)"
        )));
    }
    let version = parts.next().unwrap_or_default();
    if version != VERSION.to_string() {
        return Err(BadLine(format!(
            "op-log format version `{}` is not supported (this build reads version {VERSION})",
            crate::spec::clip(version)
        )));
    }
    serde_json::from_str(parts.next().unwrap_or_default())
        .map_err(|e| BadLine(format!("the header's workload cannot be read: {e}")))
}

/// Append a record's line, with its newline, to `out`.
pub fn encode(r: &Record, out: &mut String) {
    let phase = match r.phase {
        Phase::Warmup => 'w',
        Phase::Measured => 'm',
    };
    let _ = write!(out, "{}\t{phase}\t{}\t", r.offset_us, r.op);
    escape(&r.key, out);
    let _ = writeln!(
        out,
        "\t{}\t{}\t{}\t{}",
        r.size,
        r.bytes,
        r.latency_us,
        r.error.as_deref().unwrap_or("ok")
    );
}

/// The end line, with its newline.
pub fn encode_end(records: u64, dropped: u64) -> String {
    format!("{END}\t{records}\t{dropped}\n")
}

/// Read one line of the body (without its newline).
pub fn decode(line: &str) -> Result<Line, BadLine> {
    let f: Vec<&str> = line.split('\t').collect();
    let num = |i: usize, what: &str| -> Result<u64, BadLine> {
        f[i].parse()
            .map_err(|_| BadLine(format!("{what} `{}` is not a number", clip(f[i]))))
    };
    if f[0] == END {
        if f.len() != 3 {
            return Err(BadLine(format!(
                "the end line has {} fields, not 3",
                f.len()
            )));
        }
        return Ok(Line::End {
            records: num(1, "the record count")?,
            dropped: num(2, "the dropped count")?,
        });
    }
    if f.len() != 8 {
        return Err(BadLine(format!("{} fields, not 8", f.len())));
    }
    let offset_us = f[0]
        .parse()
        .map_err(|_| BadLine(format!("offset `{}` is not a number", clip(f[0]))))?;
    let phase = match f[1] {
        "w" => Phase::Warmup,
        "m" => Phase::Measured,
        other => return Err(BadLine(format!("phase `{}` is not w or m", clip(other)))),
    };
    let op = OpKind::ALL
        .iter()
        .copied()
        .find(|op| op.as_str() == f[2])
        .ok_or_else(|| BadLine(format!("op `{}` is not an operation", clip(f[2]))))?;
    let error = match f[7] {
        "" => return Err(BadLine("the result is empty".into())),
        "ok" => None,
        kind => Some(kind.to_string()),
    };
    Ok(Line::Record(Record {
        offset_us,
        phase,
        op,
        key: unescape(f[3])?,
        size: num(4, "size")?,
        bytes: num(5, "bytes")?,
        latency_us: num(6, "latency")?,
        error,
    }))
}

fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    crate::spec::clip(s)
}

/// Keys are written with `%`, tab, newline and carriage return as `%25`, `%09`, `%0A`, `%0D`,
/// so a key can never split a line or a field.
fn escape(key: &str, out: &mut String) {
    for c in key.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\t' => out.push_str("%09"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            c => out.push(c),
        }
    }
}

fn unescape(s: &str) -> Result<String, BadLine> {
    if !s.contains('%') {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let c = match rest.get(i + 1..i + 3) {
            Some("25") => '%',
            Some("09") => '\t',
            Some("0A") => '\n',
            Some("0D") => '\r',
            _ => {
                return Err(BadLine(format!(
                    "key `{}` has an escape that is not %25, %09, %0A or %0D",
                    clip(s)
                )))
            }
        };
        out.push(c);
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, error: Option<&str>) -> Record {
        Record {
            offset_us: -1_500,
            phase: Phase::Warmup,
            op: OpKind::Put,
            key: key.into(),
            size: 4096,
            bytes: 4096,
            latency_us: 250,
            error: error.map(String::from),
        }
    }

    #[test]
    fn records_round_trip_with_any_key() {
        for (key, error) in [
            ("data/obj-00000001", None),
            ("odd\tkey\nwith%25 and \r", Some("not_found")),
            ("", Some("http_503")),
            ("ünïcode/ключ", None),
        ] {
            let r = record(key, error);
            let mut line = String::new();
            encode(&r, &mut line);
            assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
            let back = decode(line.trim_end_matches('\n')).unwrap();
            assert_eq!(back, Line::Record(r));
        }
        let end = encode_end(7, 2);
        assert_eq!(
            decode(end.trim_end()).unwrap(),
            Line::End {
                records: 7,
                dropped: 2
            }
        );
    }

    #[test]
    fn the_header_round_trips_and_names_what_is_wrong() {
        let w = Workload::from_yaml(
            "target: file:///tmp/x\nduration: 1s\nops: [{ op: get, weight: 1 }]\n",
        )
        .unwrap();
        let h = Header {
            worker_id: "w-0".into(),
            workload: w,
        };
        assert_eq!(decode_header(&encode_header(&h).unwrap()).unwrap(), h);
        assert!(decode_header("PK\u{3}\u{4}")
            .unwrap_err()
            .0
            .contains("not a benchrun op-log"));
        assert!(decode_header("benchrun-oplog 9 {}")
            .unwrap_err()
            .0
            .contains("version `9`"));
    }

    #[test]
    fn bad_lines_are_refused_with_the_reason() {
        for (line, why) in [
            ("1\tm\tget\tk\t1\t1\t1", "7 fields"),
            ("x\tm\tget\tk\t1\t1\t1\tok", "offset `x`"),
            ("1\tq\tget\tk\t1\t1\t1\tok", "phase `q`"),
            ("1\tm\tfly\tk\t1\t1\t1\tok", "op `fly`"),
            ("1\tm\tget\tk%zz\t1\t1\t1\tok", "escape"),
            ("1\tm\tget\tk\t-1\t1\t1\tok", "size `-1`"),
            ("1\tm\tget\tk\t1\t1\t1\t", "result is empty"),
            ("end\t1", "end line"),
        ] {
            let e = decode(line).unwrap_err();
            assert!(e.0.contains(why), "{line:?}: {e:?} should say {why}");
        }
    }
}
