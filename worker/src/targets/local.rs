//! What `file://` and `direct://` share: mapping keys to paths, listing, stat and delete.

use std::path::{Path, PathBuf};

use super::{ListOutcome, ObjectInfo, TargetError};

/// A directory that holds a target's objects; keys are relative paths with `/`.
#[derive(Debug, Clone)]
pub struct LocalRoot {
    pub root: PathBuf,
    /// The URI as the user wrote it, for error messages.
    pub uri: String,
}

impl LocalRoot {
    /// Where `key` lives: always under the root. Keys are built from a validated prefix, but
    /// `..`, `.` and root components are dropped here too, so no key can name a path outside.
    pub fn path(&self, key: &str) -> PathBuf {
        let mut p = self.root.clone();
        for c in std::path::Path::new(key).components() {
            if let std::path::Component::Normal(part) = c {
                p.push(part);
            }
        }
        p
    }

    pub fn err(&self, key: &str, e: std::io::Error) -> TargetError {
        if e.kind() == std::io::ErrorKind::NotFound {
            TargetError::NotFound {
                key: key.to_string(),
            }
        } else {
            TargetError::io(self.path(key).display().to_string(), e)
        }
    }

    /// Bytes an unprivileged writer can still use on the root's file system (statvfs
    /// `f_bavail`); `None` when the root does not exist yet or cannot be examined.
    pub fn free_space(&self) -> Option<u64> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(self.root.as_os_str().as_bytes()).ok()?;
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: c is a valid NUL-terminated path and st a valid out-pointer.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }

    /// Create the parent directories of `key`'s file.
    pub fn make_parent(&self, key: &str) -> Result<(), TargetError> {
        let p = self.path(key);
        match p.parent() {
            Some(dir) => std::fs::create_dir_all(dir)
                .map_err(|e| TargetError::io(dir.display().to_string(), e)),
            None => Ok(()),
        }
    }

    pub fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError> {
        let m = std::fs::metadata(self.path(key)).map_err(|e| self.err(key, e))?;
        Ok(ObjectInfo {
            key: key.to_string(),
            size: m.len(),
        })
    }

    /// Every file under `prefix`, recursively, sorted by key. One request per directory read.
    pub fn list(&self, prefix: &str) -> Result<ListOutcome, TargetError> {
        let mut out = ListOutcome::default();
        // A prefix is a directory path plus an optional leading part of a file name.
        let (dir, stem) = match prefix.rfind('/') {
            Some(i) => (&prefix[..i], &prefix[i + 1..]),
            None => ("", prefix),
        };
        let base = self.path(dir);
        self.walk(&base, dir, stem, &mut out)?;
        out.objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn walk(
        &self,
        dir: &Path,
        key_dir: &str,
        stem: &str,
        out: &mut ListOutcome,
    ) -> Result<(), TargetError> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(TargetError::io(dir.display().to_string(), e)),
        };
        out.requests += 1;
        for entry in entries {
            let entry = entry.map_err(|e| TargetError::io(dir.display().to_string(), e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(stem) {
                continue;
            }
            let key = if key_dir.is_empty() {
                name.clone()
            } else {
                format!("{key_dir}/{name}")
            };
            let meta = entry
                .metadata()
                .map_err(|e| TargetError::io(entry.path().display().to_string(), e))?;
            if meta.is_dir() {
                self.walk(&entry.path(), &key, "", out)?;
            } else if meta.is_file() {
                out.objects.push(ObjectInfo {
                    key,
                    size: meta.len(),
                });
            }
        }
        Ok(())
    }

    pub fn delete(&self, key: &str) -> Result<(), TargetError> {
        std::fs::remove_file(self.path(key)).map_err(|e| self.err(key, e))?;
        // Remove directories left empty, up to the root, so cleanup leaves nothing behind.
        let mut dir = self.path(key).parent().map(Path::to_path_buf);
        while let Some(d) = dir {
            if d == self.root || std::fs::remove_dir(&d).is_err() {
                break;
            }
            dir = d.parent().map(Path::to_path_buf);
        }
        Ok(())
    }

    /// Create the root directory and check it is writable.
    pub fn check_writable(&self) -> Result<(), TargetError> {
        std::fs::create_dir_all(&self.root).map_err(|e| {
            TargetError::Config(format!(
                "{}: cannot create {}: {e}",
                self.uri,
                self.root.display()
            ))
        })?;
        let probe = self.root.join(".benchrun-probe");
        std::fs::write(&probe, b"probe")
            .and_then(|_| std::fs::remove_file(&probe))
            .map_err(|e| {
                TargetError::Config(format!(
                    "{}: {} is not writable: {e}",
                    self.uri,
                    self.root.display()
                ))
            })
    }
}

/// The metadata operations both local targets share, run off the async runtime.
impl LocalRoot {
    pub async fn stat_async(&self, key: &str) -> Result<ObjectInfo, TargetError> {
        let (root, key) = (self.clone(), key.to_string());
        blocking(move || root.stat(&key)).await
    }

    pub async fn list_async(&self, prefix: &str) -> Result<ListOutcome, TargetError> {
        let (root, prefix) = (self.clone(), prefix.to_string());
        blocking(move || root.list(&prefix)).await
    }

    pub async fn delete_async(&self, key: &str) -> Result<(), TargetError> {
        let (root, key) = (self.clone(), key.to_string());
        blocking(move || root.delete(&key)).await
    }
}

/// Run blocking file I/O off the async runtime.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, TargetError> + Send + 'static,
) -> Result<T, TargetError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TargetError::Other(format!("I/O task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cannot_leave_the_root() {
        let root = LocalRoot {
            root: PathBuf::from("/data/bench"),
            uri: "file:///data/bench".into(),
        };
        for key in [
            "../../../etc/passwd",
            "/etc/passwd",
            "a/../../etc/passwd",
            "./../etc/passwd",
        ] {
            let p = root.path(key);
            assert!(p.starts_with("/data/bench"), "{key} -> {}", p.display());
            assert!(
                !p.components().any(|c| c == std::path::Component::ParentDir),
                "{key} -> {}",
                p.display()
            );
        }
        assert_eq!(
            root.path("benchrun/obj-1"),
            PathBuf::from("/data/bench/benchrun/obj-1")
        );
    }
}
