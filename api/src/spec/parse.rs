//! Bounded parsing: a workload file's size, nesting and aliases are checked before the YAML
//! parser runs.

use super::*;

/// The checks [`Workload::from_yaml`] makes before the YAML parser runs (size, nesting, no
/// aliases), for callers that parse the document themselves (a matrix file).
pub fn precheck(text: &str) -> Result<(), SpecError> {
    check_file_size(text.len())?;
    prescan(text).map_err(|message| SpecError::Parse {
        path: "workload".into(),
        message,
    })
}

fn check_file_size(len: usize) -> Result<(), SpecError> {
    if len > limits::MAX_FILE_BYTES {
        return Err(SpecError::Parse {
            path: "workload".into(),
            message: format!(
                "the file is larger than {max}: a workload file is at most {max}",
                max = ByteSize(limits::MAX_FILE_BYTES as u64)
            ),
        });
    }
    Ok(())
}

/// One linear pass over a YAML text, before parsing it: refuse flow nesting deeper than
/// [`limits::MAX_NESTING`] (the parser's cost grows with the square of the depth) and alias
/// nodes (`*name`, which can expand quadratically or worse). Quoted scalars and comments are
/// skipped; a `*` or quote counts as the start of a node only where a node can start.
fn prescan(text: &str) -> Result<(), String> {
    let mut depth = 0usize;
    let mut line = 1usize;
    // The previous character on this line, and the last one that was not a space.
    let mut prev: Option<char> = None;
    let mut last_sig: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let node_start = prev.is_none_or(|p| p == ' ' || p == '\t' || "[{,".contains(p))
            && last_sig.is_none_or(|p| ":-[{,?".contains(p));
        match c {
            '\n' => {
                line += 1;
                prev = None;
                last_sig = None;
                continue;
            }
            '#' if prev.is_none_or(|p| p == ' ' || p == '\t') => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
                continue;
            }
            '\'' | '"' if node_start => {
                // A quoted scalar, possibly over several lines.
                while let Some(q) = chars.next() {
                    match q {
                        '\n' => line += 1,
                        '\\' if c == '"' => {
                            chars.next();
                        }
                        '\'' if c == '\'' && chars.peek() == Some(&'\'') => {
                            chars.next();
                        }
                        q if q == c => break,
                        _ => {}
                    }
                }
                prev = Some(c);
                last_sig = Some(c);
                continue;
            }
            '*' if node_start => {
                return Err(format!(
                    "YAML aliases (`*name`, line {line}) are not supported: write the value out"
                ));
            }
            '[' | '{' => {
                depth += 1;
                if depth > limits::MAX_NESTING {
                    return Err(format!(
                        "nested more than {} levels deep (line {line})",
                        limits::MAX_NESTING
                    ));
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = Some(c);
        if c != ' ' && c != '\t' {
            last_sig = Some(c);
        }
    }
    Ok(())
}

impl Workload {
    /// Parse a workload file's bytes: at most [`limits::MAX_FILE_BYTES`], UTF-8, then
    /// [`Workload::from_yaml`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SpecError> {
        check_file_size(bytes.len())?;
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let at = e.valid_up_to();
            let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
            SpecError::Parse {
                path: "workload".into(),
                message: format!(
                    "the file is not UTF-8: invalid byte at offset {at} (line {line})"
                ),
            }
        })?;
        Self::from_yaml(text)
    }

    /// Parse a workload from YAML (or JSON) and validate it.
    ///
    /// Bounded in time and memory whatever the input: at most [`limits::MAX_FILE_BYTES`],
    /// `[`/`{` nested at most [`limits::MAX_NESTING`] deep, and no YAML aliases (`*name`),
    /// which could expand a small file into an unbounded document; all checked by one linear
    /// scan before the YAML parser runs.
    pub fn from_yaml(text: &str) -> Result<Self, SpecError> {
        precheck(text)?;
        let de = serde_yaml::Deserializer::from_str(text);
        let w: Workload = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                "workload".to_string()
            } else {
                path
            };
            // serde_yaml appends " at line L column C"; keep it, it helps find the spot.
            SpecError::Parse {
                path,
                message: e.into_inner().to_string(),
            }
        })?;
        w.validate().map_err(SpecError::Invalid)?;
        Ok(w)
    }
}
