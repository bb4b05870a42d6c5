//! What `file://` and `direct://` share: mapping keys to paths, listing, stat and delete.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{AlignedBuf, ChunkPlan, GetOutcome, ListOutcome, ObjectInfo, ReadCheck, TargetError};

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
        free_bytes(&self.root)
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
        // A name of its own: workers sharing a directory (a ReadWriteMany claim) check it at
        // the same time, and one's remove must not race another's write.
        let probe = self.root.join(format!(
            ".benchrun-probe-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
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

/// How one local GET reads an open file of a known size.
pub struct ReadPlan<'a> {
    /// The object's size, from the fstat of the open file: reading stops there, so an
    /// object whose size is a multiple of the chunk size costs no extra, empty read at the end.
    pub size: u64,
    pub plan: &'a ChunkPlan,
    /// Alignment of every read's length (O_DIRECT), or 1.
    pub align: u64,
    /// Fill `buf` with the whole object (each read lands after the previous one) instead of
    /// reading every chunk to the start of `buf`.
    pub fill: bool,
}

impl ReadPlan<'_> {
    /// Read the file from offset 0 to `size` into `buf[..buf_len]`, checking every chunk.
    ///
    /// Stops at `size`, or earlier at a short read (the file shrank since the fstat); a file
    /// that grew is read to its size at open. `requests` is the number of read syscalls.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        file: &std::fs::File,
        buf: &mut AlignedBuf,
        buf_len: usize,
        check: &ReadCheck,
        key: &str,
        root: &LocalRoot,
        start: Instant,
    ) -> Result<GetOutcome, TargetError> {
        let mut out = GetOutcome::default();
        let mut chunk = None;
        while out.bytes < self.size {
            let at = if self.fill { out.bytes as usize } else { 0 };
            let left = (self.size - out.bytes).div_ceil(self.align) * self.align;
            let want = self
                .plan
                .next(chunk, self.align)
                .min((buf_len - at) as u64)
                .min(left) as usize;
            if want == 0 {
                break;
            }
            let dst = &mut buf.as_mut_slice()[at..at + want];
            let n = file.read_at(dst, out.bytes).map_err(|e| root.err(key, e))?;
            out.requests += 1;
            if out.requests == 1 {
                out.ttfb = start.elapsed();
            }
            check.check(key, out.bytes, &buf.as_slice()[at..at + n])?;
            out.bytes += n as u64;
            // pread on a regular file is short only at its end: the file shrank.
            if n < want {
                break;
            }
            chunk = Some(want as u64);
        }
        if out.requests == 0 {
            out.ttfb = start.elapsed();
        }
        Ok(out)
    }
}

thread_local! {
    /// Set on a thread that belongs to one engine task (see [`io_inline`]).
    static INLINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` with local file I/O done right on this thread, not handed to tokio's blocking pool.
///
/// The engine runs each task of a run on a local target on an OS thread of its own (see
/// [`Target::blocking_io`](super::Target::blocking_io)) and calls this there: the thread has
/// nothing else to do while a read blocks, so the op is timed without the two thread
/// hand-offs per op (measured at ~10% of a warm 1 MiB `file://` read's throughput) and
/// without waiting for a free thread of the pool (capped at 512) at high concurrency.
pub fn io_inline<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            INLINE.set(self.0);
        }
    }
    let _reset = Reset(INLINE.replace(true));
    f()
}

/// Whether this thread does its local file I/O inline (inside [`io_inline`]).
pub fn io_inline_here() -> bool {
    INLINE.get()
}

/// Run blocking file I/O off the async runtime, or inline on a task's own thread.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, TargetError> + Send + 'static,
) -> Result<T, TargetError> {
    if io_inline_here() {
        return f();
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TargetError::Other(format!("I/O task failed: {e}")))?
}

/// Bytes an unprivileged writer can still use on `path`'s file system (statvfs `f_bavail`);
/// `None` when it does not exist or cannot be examined.
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and st a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
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
