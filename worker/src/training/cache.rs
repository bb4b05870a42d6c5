//! The clients' memory: the dataset's files dropped from the page cache before an epoch
//! (`posix_fadvise(DONTNEED)`, no privileges needed), how much of the dataset the cache
//! holds (`mincore`, as block workloads measure it), and the RAM MLPerf's 5x rule is
//! measured against.

use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Write back and drop the cached pages of the file at `path`.
pub fn drop_file(path: &Path) -> std::io::Result<()> {
    let f = std::fs::File::open(path)?;
    // Dirty pages (a file just written by the prepare stage) are not dropped: write back.
    f.sync_data()?;
    // SAFETY: f is open; the advice touches no memory of ours.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// The dataset's files under `root`: their bytes, and how many of those the page cache
/// holds. Off the async threads: it opens and maps every file.
pub fn resident(root: &Path, dataset: &super::dataset::Shape) -> std::io::Result<(u64, u64)> {
    let (mut bytes, mut resident) = (0u64, 0u64);
    for f in 0..dataset.files() {
        let path = root.join(dataset.file_key(f));
        let with_path =
            |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let len = std::fs::metadata(&path).map_err(with_path)?.len();
        bytes += len;
        resident += crate::volume::resident_in_page_cache(&path, 0, len).map_err(with_path)?;
    }
    Ok((bytes, resident))
}

/// This machine's RAM in bytes (`MemTotal` of /proc/meminfo), or 0 if unknown.
pub fn ram_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_machine_has_ram() {
        assert!(super::ram_bytes() > 1 << 20);
    }
}
