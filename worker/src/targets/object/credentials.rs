//! Credentials for object storage, from the standard environment variables or from files in
//! `storage.credentialsDir` (a Secret mounted as a volume, one file per key).
//!
//! Values are kept in [`Secret`], whose `Debug` prints nothing, and every secret is registered
//! with the [`Redactor`] so no error message can carry one by accident.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::targets::TargetError;

/// A credential value that never prints.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The value itself, for the client builder only (never for a message).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Where credentials are looked up: a directory (preferred, when configured) then the
/// process environment.
#[derive(Debug, Clone)]
pub struct CredentialSource {
    dir: Option<PathBuf>,
}

impl CredentialSource {
    /// Keys from files in `dir` (a mounted Secret) when given, else from the environment.
    pub fn new(dir: Option<&str>) -> Result<Self, TargetError> {
        let dir = dir.map(PathBuf::from);
        if let Some(d) = &dir {
            if !d.is_dir() {
                return Err(TargetError::Config(format!(
                    "storage.credentialsDir `{}` is not a directory",
                    d.display()
                )));
            }
        }
        Ok(Self { dir })
    }

    /// The value of `file` in the credentials directory, else of the first set variable in
    /// `env`. Surrounding whitespace is trimmed (Secrets written with `echo` end in a newline).
    pub fn get(&self, file: &str, env: &[&str]) -> Result<Option<Secret>, TargetError> {
        if let Some(d) = &self.dir {
            if let Some(v) = read_file(d, file)? {
                return Ok(Some(v));
            }
        }
        Ok(env
            .iter()
            .filter_map(|k| std::env::var(k).ok())
            .map(|v| v.trim().to_string())
            .find(|v| !v.is_empty())
            .map(Secret))
    }

    /// Where a missing credential should be put, for error messages.
    pub fn hint(&self, file: &str, env: &[&str]) -> String {
        let vars = env.join(" or ");
        match &self.dir {
            Some(d) => format!("{}/{file} or the environment variable {vars}", d.display()),
            None => format!("the environment variable {vars} (or storage.credentialsDir/{file})"),
        }
    }
}

fn read_file(dir: &Path, name: &str) -> Result<Option<Secret>, TargetError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(v) => {
            let v = v.trim();
            Ok((!v.is_empty()).then(|| Secret(v.to_string())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TargetError::io(
            format!("reading credential file {}", path.display()),
            e,
        )),
    }
}

/// Replaces every known secret in a message with `***`.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// Redact `s` from every message cleaned from now on.
    pub fn add(&mut self, s: &Secret) {
        // Very short values would redact ordinary words; real keys are long.
        if s.0.len() >= 6 {
            self.secrets.push(s.0.clone());
        }
    }

    /// `msg` with every known secret replaced.
    pub fn clean(&self, msg: &str) -> String {
        let mut out = msg.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "***");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_wins_over_env_and_is_trimmed_and_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secretAccessKey"), "s3cr3t-value\n").unwrap();
        let src = CredentialSource::new(dir.path().to_str()).unwrap();
        let v = src
            .get("secretAccessKey", &["BENCHRUN_TEST_UNSET_VAR"])
            .unwrap()
            .unwrap();
        assert_eq!(v.expose(), "s3cr3t-value");
        assert_eq!(format!("{v:?}"), "Secret(***)");
        let mut r = Redactor::default();
        r.add(&v);
        assert_eq!(r.clean("bad key s3cr3t-value!"), "bad key ***!");
        assert!(src
            .get("accessKeyId", &["BENCHRUN_TEST_UNSET_VAR"])
            .unwrap()
            .is_none());
    }

    #[test]
    fn missing_dir_is_a_config_error() {
        let e = CredentialSource::new(Some("/nonexistent/benchrun")).unwrap_err();
        assert!(e.to_string().contains("credentialsDir"), "{e}");
    }
}
