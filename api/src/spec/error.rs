//! A workload that failed to parse or validate, with messages that name the field.

use std::fmt;

use super::{clip, limits};

/// A workload file that failed to parse or validate. The message names the field.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The text is not a workload (too large, not UTF-8, bad YAML, a wrong type or key).
    #[error("{}: {}", clip(path), clip_message(message))]
    Parse {
        /// Path of the field where parsing stopped (`workload` for the whole file).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A workload that parsed but breaks a bound or a cross-field rule, one error per field.
    #[error("{}", list_errors(.0))]
    Invalid(Vec<FieldError>),
}

/// A message cut in the middle when long, keeping its start (the field and value) and its end
/// (serde_yaml's "at line L column C").
fn clip_message(m: &str) -> std::borrow::Cow<'_, str> {
    const HEAD: usize = 300;
    const TAIL: usize = 80;
    if m.chars().count() <= HEAD + TAIL {
        return m.into();
    }
    let head_end = m.char_indices().nth(HEAD).map_or(m.len(), |(i, _)| i);
    let tail_start = m
        .char_indices()
        .rev()
        .nth(TAIL - 1)
        .map_or(head_end, |(i, _)| i.max(head_end));
    format!(
        "{} ... ({} bytes left out) ... {}",
        &m[..head_end],
        tail_start - head_end,
        &m[tail_start..]
    )
    .into()
}

fn list_errors(errs: &[FieldError]) -> String {
    let mut lines: Vec<String> = errs
        .iter()
        .take(limits::MAX_ERRORS_SHOWN)
        .map(|e| e.to_string())
        .collect();
    if errs.len() > limits::MAX_ERRORS_SHOWN {
        lines.push(format!(
            "... and {} more errors",
            errs.len() - limits::MAX_ERRORS_SHOWN
        ));
    }
    lines.join("\n")
}

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the field, e.g. `rangeEngine.chunkSize`.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", clip(&self.path), clip_message(&self.message))
    }
}
