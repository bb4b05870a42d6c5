//! TLS of `https://` endpoints: the CA bundle the workload names (`storage.tls.caFile`, a
//! mounted Secret or ConfigMap key under the operator), the opt-in to skip verification, and
//! the one clear message for a certificate that could not be verified.

use object_store::ClientOptions;
use reqwest::Certificate;

use crate::spec::TlsSpec;
use crate::targets::TargetError;

/// `o` with the workload's TLS settings, and the CA file's certificates for the client
/// (`connections`) to trust. The CA file is read here, when the target is opened, so an
/// unreadable or empty file stops the run before anything is written.
pub fn apply(
    o: ClientOptions,
    tls: &TlsSpec,
) -> Result<(ClientOptions, Vec<Certificate>), TargetError> {
    if tls.insecure_skip_verify {
        return Ok((o.with_allow_invalid_certificates(true), Vec::new()));
    }
    let Some(path) = &tls.ca_file else {
        return Ok((o, Vec::new()));
    };
    let pem = std::fs::read(path).map_err(|e| {
        TargetError::Config(format!(
            "storage.tls.caFile: cannot read the CA file `{path}`: {e}"
        ))
    })?;
    let certs = Certificate::from_pem_bundle(&pem).map_err(|e| {
        TargetError::Config(format!(
            "storage.tls.caFile: `{path}` is not a PEM bundle of certificates: {e}"
        ))
    })?;
    if certs.is_empty() {
        return Err(TargetError::Config(format!(
            "storage.tls.caFile: `{path}` holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok((o, certs))
}

/// What certificates are verified against, for messages.
pub fn trust_source(tls: &TlsSpec) -> String {
    match &tls.ca_file {
        Some(f) => format!("the CA file `{f}` (storage.tls.caFile)"),
        None => "the system's root certificates (no storage.tls.caFile given)".into(),
    }
}

/// Why the peer's certificate was refused, when `chain` (an error and its sources, as one
/// line) says it was: rustls's "invalid peer certificate: UnknownIssuer" gives
/// `unknown issuer`. `None` for any other failure.
pub fn refused_certificate(chain: &str) -> Option<String> {
    const MARK: &str = "invalid peer certificate: ";
    let at = chain.find(MARK)? + MARK.len();
    let cause = chain[at..].trim();
    // rustls prints most causes as the variant's name (`UnknownIssuer`, `Expired`, ...).
    let word = cause
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    if !word.is_empty() && word.len() == cause.len() {
        return Some(spaced(word));
    }
    Some(cause.to_string())
}

/// `UnknownIssuer` as `unknown issuer`.
fn spaced(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_read_from_the_error_chain() {
        let chain = "Generic S3 error: HTTP error: error sending request: client error (Connect): invalid peer certificate: UnknownIssuer";
        assert_eq!(
            refused_certificate(chain).as_deref(),
            Some("unknown issuer")
        );
        let named = "x: invalid peer certificate: certificate not valid for name \"a\"; certificate is only valid for b";
        assert!(refused_certificate(named)
            .unwrap()
            .starts_with("certificate not valid for name"));
        assert_eq!(refused_certificate("connection refused"), None);
    }

    #[test]
    fn an_unreadable_or_empty_ca_file_names_the_field_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let tls = |f: &std::path::Path| TlsSpec {
            ca_file: Some(f.display().to_string()),
            insecure_skip_verify: false,
        };
        let e = apply(ClientOptions::new(), &tls(&missing))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("storage.tls.caFile") && e.contains("nope.pem") && e.contains("cannot read"),
            "{e}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = apply(ClientOptions::new(), &tls(&empty))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("storage.tls.caFile") && e.contains("empty.pem"),
            "{e}"
        );
        assert!(trust_source(&tls(&empty)).contains("empty.pem"));
    }
}
