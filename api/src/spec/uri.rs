//! The target URI parser: `file:///dir`, `direct:///dir`, `s3://`, `gs://`, `az://`.

use std::str::FromStr;

/// A parsed target URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetUri {
    /// `file:///dir`: buffered I/O on a directory.
    File {
        /// The directory benchmarked.
        root: std::path::PathBuf,
    },
    /// `direct:///dir`: O_DIRECT I/O on a directory.
    Direct {
        /// The directory benchmarked.
        root: std::path::PathBuf,
    },
    /// `s3://bucket/prefix`.
    S3 {
        /// The bucket.
        bucket: String,
        /// Key prefix in the bucket, empty or ending in `/`.
        prefix: String,
    },
    /// `gs://bucket/prefix`.
    Gcs {
        /// The bucket.
        bucket: String,
        /// Key prefix in the bucket, empty or ending in `/`.
        prefix: String,
    },
    /// `az://container/prefix`.
    Azure {
        /// The container.
        container: String,
        /// Key prefix in the container, empty or ending in `/`.
        prefix: String,
    },
}

impl TargetUri {
    /// The URI scheme: `file`, `direct`, `s3`, `gs` or `az`.
    pub fn scheme(&self) -> &'static str {
        match self {
            TargetUri::File { .. } => "file",
            TargetUri::Direct { .. } => "direct",
            TargetUri::S3 { .. } => "s3",
            TargetUri::Gcs { .. } => "gs",
            TargetUri::Azure { .. } => "az",
        }
    }

    /// Whether the target is a local directory (`file` or `direct`).
    pub fn is_local(&self) -> bool {
        matches!(self, TargetUri::File { .. } | TargetUri::Direct { .. })
    }
}

impl FromStr for TargetUri {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            format!("`{s}` is not a target URI: expected file:///dir, direct:///dir, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix")
        })?;
        let local = |rest: &str| -> Result<std::path::PathBuf, String> {
            if !rest.starts_with('/') {
                return Err(format!(
                    "`{s}`: the path must be absolute, e.g. {scheme}:///data/bench"
                ));
            }
            Ok(std::path::PathBuf::from(rest))
        };
        let bucket = |rest: &str| -> Result<(String, String), String> {
            let (b, p) = rest.split_once('/').unwrap_or((rest, ""));
            if b.is_empty() {
                return Err(format!("`{s}`: the bucket or container name is missing"));
            }
            let p = p.trim_start_matches('/');
            let p = if p.is_empty() || p.ends_with('/') {
                p.to_string()
            } else {
                format!("{p}/")
            };
            Ok((b.to_string(), p))
        };
        match scheme {
            "file" => Ok(TargetUri::File { root: local(rest)? }),
            "direct" => Ok(TargetUri::Direct { root: local(rest)? }),
            "s3" => bucket(rest).map(|(bucket, prefix)| TargetUri::S3 { bucket, prefix }),
            "gs" => bucket(rest).map(|(bucket, prefix)| TargetUri::Gcs { bucket, prefix }),
            "az" => bucket(rest).map(|(container, prefix)| TargetUri::Azure { container, prefix }),
            other => Err(format!(
                "`{s}`: unknown scheme `{other}`: use file, direct, s3, gs or az"
            )),
        }
    }
}
