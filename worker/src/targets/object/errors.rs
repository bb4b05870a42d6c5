//! object_store errors mapped into [`TargetError`], so they are counted by kind
//! (`http_503`, `timeout`, `not_found`, `io`, ...).

use std::error::Error as StdError;

use object_store::client::{HttpError, HttpErrorKind};

use super::credentials::Redactor;
use crate::targets::TargetError;

/// Map an object_store error from an operation on `what` (a key or a description).
pub fn map(e: object_store::Error, what: &str, redact: &Redactor) -> TargetError {
    if let object_store::Error::NotFound { .. } = e {
        return TargetError::NotFound {
            key: what.to_string(),
        };
    }
    let text = redact.clean(&chain(&e));
    if let Some(status) = status_of(&e) {
        return TargetError::Http {
            what: what.to_string(),
            status,
            message: short_message(&text),
        };
    }
    let mut cur: Option<&(dyn StdError + 'static)> = Some(&e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<HttpError>() {
            let kind = match h.kind() {
                HttpErrorKind::Timeout => std::io::ErrorKind::TimedOut,
                HttpErrorKind::Connect => std::io::ErrorKind::ConnectionRefused,
                HttpErrorKind::Interrupted | HttpErrorKind::Request => {
                    std::io::ErrorKind::ConnectionReset
                }
                _ => std::io::ErrorKind::Other,
            };
            return TargetError::io(what, std::io::Error::new(kind, text));
        }
        cur = err.source();
    }
    TargetError::Other(format!("{what}: {text}"))
}

/// The HTTP status of a failed request. object_store 0.14 keeps its retry error type private,
/// so the status is read from the variant where it has one, else from the message that
/// object_store formats as "... status code: 503 Service Unavailable ...".
pub fn status_of(e: &object_store::Error) -> Option<u16> {
    match e {
        object_store::Error::NotFound { .. } => return Some(404),
        object_store::Error::PermissionDenied { .. } => return Some(403),
        object_store::Error::Unauthenticated { .. } => return Some(401),
        object_store::Error::Precondition { .. } => return Some(412),
        object_store::Error::AlreadyExists { .. } => return Some(409),
        object_store::Error::NotModified { .. } => return Some(304),
        _ => {}
    }
    let text = chain(e);
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

/// The error and its sources, as one line.
pub fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        // object_store repeats the source inside its own message; only add what is new.
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    out
}

/// A short message for a failed request: the S3/Azure error `<Code>` and `<Message>` when the
/// body has them, else the text cut to a readable length.
fn short_message(text: &str) -> String {
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find("</")? + start;
        Some(text[start..end].trim().to_string())
    };
    match (tag("Code"), tag("Message")) {
        (Some(c), Some(m)) => format!("{c}: {}", first_line(&m)),
        (Some(c), None) => c,
        _ => {
            let mut t: String = text.chars().take(300).collect();
            if t.len() < text.len() {
                t.push('…');
            }
            t
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_read_from_message() {
        let e = object_store::Error::Generic {
            store: "S3",
            source: "Error performing GET http://x in 1ms - Server returned non-2xx status code: 503 Service Unavailable: <Error><Code>SlowDown</Code><Message>Please reduce</Message></Error>".into(),
        };
        assert_eq!(status_of(&e), Some(503));
        let t = map(e, "k", &Redactor::default());
        assert_eq!(t.kind(), "http_503");
        assert!(t.to_string().contains("SlowDown: Please reduce"), "{t}");
    }
}
