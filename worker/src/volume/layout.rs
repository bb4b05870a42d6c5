//! Before and after the measured stage: the dataset laid out at full size with real data (or
//! a matching one reused), preconditioned, dropped from the page cache; removed afterwards.

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{cache, Kind, Offsets, Region, Volume, VolumeError};
use crate::targets::AlignedBuf;

/// Size of each write of the layout and of the data buffer it stamps.
const CHUNK: usize = 4 << 20;
/// Threads laying files out at once: enough to keep a device busy, few enough not to thrash.
const LAYOUT_THREADS: usize = 4;

/// What the prepare stage did.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// Seconds laying the dataset out (0 when it was reused).
    pub seconds: f64,
    /// Bytes written by the layout.
    pub bytes: u64,
    /// Regions reused as they were (a matching layout found, or `dataset.prepare: false`).
    pub reused: usize,
    /// Regions in all.
    pub regions: usize,
    /// Seconds of preconditioning.
    pub precondition_seconds: f64,
    /// Whether the dataset was dropped from the page cache afterwards.
    pub dropped: bool,
}

/// The marker beside a laid-out file: what its layout was, so a later run can reuse it.
fn marker_path(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    file.with_file_name(format!(".{name}.layout"))
}

/// What a marker says of its file's layout: a later run reuses the file when it says the same.
fn marker_text(len: u64, sparse: bool) -> String {
    format!("benchrun block layout v1\nsize {len}\nsparse {sparse}\n")
}

/// The marker as written: [`marker_text`], then the layout's generation, so that no two
/// markers (of two files, two workers, two runs) are the same bytes: the promise that no
/// sector is written twice covers the markers too.
fn marker_written(len: u64, sparse: bool, generation: u64) -> String {
    format!("{}generation {generation:016x}\n", marker_text(len, sparse))
}

/// Whether the marker `text` describes a layout of `len` bytes (`sparse` or not).
fn marker_matches(text: &str, len: u64, sparse: bool) -> bool {
    text.strip_prefix(&marker_text(len, sparse))
        // Markers from before generations were written have nothing after the text.
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("generation "))
}

impl Volume {
    /// Lay the dataset out (reusing files whose marker matches), precondition it when asked,
    /// and drop it from the page cache when asked. `writer` keys what this worker writes (see
    /// [`crate::datagen::Writer`]). Blocking: run it off the async runtime.
    pub fn prepare(&self, writer: u64) -> Result<Layout, VolumeError> {
        let mut out = Layout {
            regions: self.regions.len(),
            ..Default::default()
        };
        let started = Instant::now();
        if !self.prepare {
            // Used as it is: files must exist at their size; a device range always does.
            for r in &self.regions {
                let len = std::fs::metadata(&r.path)
                    .map_err(|e| VolumeError::io(&r.path, e))?
                    .len();
                if matches!(self.kind, Kind::Files { .. }) && len < r.len {
                    return Err(VolumeError::field(
                        "dataset.prepare",
                        format!("{} is {len} B, smaller than block.fileSize ({} B); with prepare: false the files must already exist at full size", r.path.display(), r.len),
                    ));
                }
            }
            out.reused = self.regions.len();
        } else {
            if let Kind::Files { dir } = &self.kind {
                std::fs::create_dir_all(dir).map_err(|e| VolumeError::io(dir, e))?;
            }
            let todo: Vec<(usize, &Region)> = self
                .regions
                .iter()
                .enumerate()
                .filter(|(_, r)| !self.reusable(r))
                .collect();
            out.reused = self.regions.len() - todo.len();
            let written = AtomicU64::new(0);
            let next = AtomicUsize::new(0);
            let threads = todo.len().clamp(1, LAYOUT_THREADS);
            let results: Vec<Result<(), VolumeError>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|_| {
                        s.spawn(|| loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some((_, r)) = todo.get(i) else {
                                return Ok(());
                            };
                            written.fetch_add(self.lay_out(r)?, Ordering::Relaxed);
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(VolumeError::field("dataset", "a layout thread panicked"))
                        })
                    })
                    .collect()
            });
            results.into_iter().collect::<Result<(), _>>()?;
            out.bytes = written.into_inner();
        }
        out.seconds = started.elapsed().as_secs_f64();
        if let Some(d) = self.spec.precondition {
            let t = Instant::now();
            self.precondition(d.0, writer)?;
            out.precondition_seconds = t.elapsed().as_secs_f64();
        }
        if self.spec.drop_cache {
            for r in &self.regions {
                cache::drop(&r.path, r.start, r.len).map_err(|e| VolumeError::io(&r.path, e))?;
            }
            out.dropped = true;
        }
        Ok(out)
    }

    /// A file laid out by an earlier run with the same size and kind of layout.
    fn reusable(&self, r: &Region) -> bool {
        if !matches!(self.kind, Kind::Files { .. }) {
            return false;
        }
        let same_size = std::fs::metadata(&r.path).is_ok_and(|m| m.len() == r.len);
        same_size
            && std::fs::read_to_string(marker_path(&r.path))
                .is_ok_and(|t| marker_matches(&t, r.len, self.spec.sparse))
    }

    /// Write one region from start to end with data (or, `sparse`, only size a file);
    /// returns the bytes written.
    fn lay_out(&self, r: &Region) -> Result<u64, VolumeError> {
        let is_file = matches!(self.kind, Kind::Files { .. });
        let marker = marker_path(&r.path);
        if is_file {
            // A layout cut short must not be reused: the marker goes first, comes back last.
            let _ = std::fs::remove_file(&marker);
        }
        let mut o = std::fs::OpenOptions::new();
        o.write(true);
        if is_file {
            o.create(true);
        }
        if self.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let f = o.open(&r.path).map_err(|e| VolumeError::io(&r.path, e))?;
        let mut written = 0u64;
        // A generation of its own, from the OS's entropy: laying a file out again, or
        // another worker laying out a file of the same name, never repeats its data.
        let gen = rand::rng().random::<u64>() | 1;
        if !self.spec.sparse {
            let mut buf = AlignedBuf::new(CHUNK);
            let stream = self.stream(r);
            let mut off = 0u64;
            while off < r.len {
                let n = ((r.len - off) as usize).min(CHUNK);
                self.pattern
                    .fill(stream, r.start + off, gen, &mut buf.as_mut_slice()[..n]);
                f.write_all_at(&buf.as_slice()[..n], r.start + off)
                    .map_err(|e| VolumeError::io(&r.path, e))?;
                off += n as u64;
                written += n as u64;
            }
        }
        if is_file {
            f.set_len(r.len).map_err(|e| VolumeError::io(&r.path, e))?;
        }
        f.sync_data().map_err(|e| VolumeError::io(&r.path, e))?;
        if is_file {
            std::fs::write(&marker, marker_written(r.len, self.spec.sparse, gen))
                .map_err(|e| VolumeError::io(&marker, e))?;
        }
        Ok(written)
    }

    /// Random overwrites of every task's regions for `d`, a thread per task (capped), as
    /// SSD preconditioning does after the sequential layout; places and generations drawn
    /// from `writer`'s generator, so no other worker writes the same.
    fn precondition(&self, d: Duration, writer: u64) -> Result<(), VolumeError> {
        let until = Instant::now() + d;
        let tasks = if self.spec.shared || matches!(self.kind, Kind::Device(_)) {
            1
        } else {
            self.concurrency
        };
        let results: Vec<Result<(), VolumeError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..tasks)
                .map(|t| {
                    s.spawn(move || {
                        let regions = self.regions_of(t);
                        let mut o = std::fs::OpenOptions::new();
                        o.write(true);
                        if self.direct {
                            o.custom_flags(libc::O_DIRECT);
                        }
                        let files = regions
                            .iter()
                            .map(|r| o.open(&r.path).map_err(|e| VolumeError::io(&r.path, e)))
                            .collect::<Result<Vec<_>, _>>()?;
                        let mut offsets = Offsets::new(
                            regions.iter().map(|r| r.len).collect(),
                            crate::spec::Access::Random,
                        );
                        let mut rng = SmallRng::seed_from_u64(
                            writer.wrapping_add(0x9E37_79B9_7F4A_7C15_u64.wrapping_mul(t as u64)),
                        );
                        let mut buf = AlignedBuf::new(self.sizes.max() as usize);
                        let streams: Vec<u64> = regions.iter().map(|r| self.stream(r)).collect();
                        while Instant::now() < until {
                            let bs = self.sizes.pick(&mut rng);
                            let p = offsets.next(bs, &mut rng);
                            let r = &regions[p.region];
                            // Fresh data for every write (a new generation).
                            let b = &mut buf.as_mut_slice()[..bs as usize];
                            let gen = rng.random::<u64>() | 1;
                            self.pattern
                                .fill(streams[p.region], r.start + p.offset, gen, b);
                            files[p.region]
                                .write_all_at(b, r.start + p.offset)
                                .map_err(|e| VolumeError::io(&r.path, e))?;
                        }
                        for (f, r) in files.iter().zip(regions) {
                            f.sync_data().map_err(|e| VolumeError::io(&r.path, e))?;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(VolumeError::field(
                            "block.precondition",
                            "a thread panicked",
                        ))
                    })
                })
                .collect()
        });
        results.into_iter().collect()
    }

    /// Remove the files the layout created (a device is left as it is). Returns the number of
    /// files removed and the errors.
    pub fn cleanup(&self) -> (u64, u64) {
        let Kind::Files { dir } = &self.kind else {
            return (0, 0);
        };
        if !self.prepare {
            // An existing dataset used as it is belongs to the user.
            return (0, 0);
        }
        let (mut removed, mut errors) = (0, 0);
        for r in &self.regions {
            for p in [r.path.clone(), marker_path(&r.path)] {
                match std::fs::remove_file(&p) {
                    Ok(()) => removed += (p == r.path) as u64,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(_) => errors += 1,
                }
            }
        }
        // Only when empty: the directory may hold what others put there.
        let _ = std::fs::remove_dir(dir);
        (removed, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_differ_by_generation_and_still_match_their_layout() {
        let (a, b) = (
            marker_written(1 << 20, false, 1),
            marker_written(1 << 20, false, 3),
        );
        assert_ne!(a, b);
        assert!(marker_matches(&a, 1 << 20, false) && marker_matches(&b, 1 << 20, false));
        assert!(!marker_matches(&a, 2 << 20, false), "another size");
        assert!(!marker_matches(&a, 1 << 20, true), "sparse");
        assert!(
            marker_matches(&marker_text(1 << 20, false), 1 << 20, false),
            "an older marker"
        );
        assert!(!marker_matches("garbage", 1 << 20, false));
    }
}
