//! The page cache, out of the way and measured: a file (or device range) written back and
//! dropped with `posix_fadvise(DONTNEED)` (no privileges needed, unlike `drop_caches`), and
//! its residency counted with `mincore`, so a read figure served from RAM shows as such.

use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Write back and drop the cached pages of `len` bytes at `start` of `path`.
pub fn drop(path: &Path, start: u64, len: u64) -> std::io::Result<()> {
    let f = std::fs::File::open(path)?;
    // Dirty pages are not dropped: write them back first.
    f.sync_data()?;
    // SAFETY: f is open; the advice touches no memory of ours.
    let r = unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            start as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        )
    };
    if r != 0 {
        return Err(std::io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Bytes of `len` at `start` (page aligned) of `path` resident in the page cache.
pub fn resident(path: &Path, start: u64, len: u64) -> std::io::Result<u64> {
    let f = std::fs::File::open(path)?;
    let page = page_size();
    // Mapped a window at a time: the vector mincore fills is one byte per page.
    const WINDOW: u64 = 1 << 30;
    // A small file (a training sample) needs a small vector.
    let mut vec = vec![0u8; (len.min(WINDOW).div_ceil(page)) as usize];
    let mut total = 0u64;
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(WINDOW);
        // SAFETY: a read-only shared mapping of an open file, unmapped below; the pages are
        // never touched (mincore reads the page tables, it does not fault them in).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                n as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                (start + off) as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let pages = n.div_ceil(page) as usize;
        // SAFETY: p maps n bytes; vec holds at least one byte per page of it.
        let r = unsafe { libc::mincore(p, n as usize, vec.as_mut_ptr()) };
        let err = std::io::Error::last_os_error();
        // SAFETY: p and n are the mapping made above.
        unsafe { libc::munmap(p, n as usize) };
        if r != 0 {
            return Err(err);
        }
        let here = vec[..pages].iter().filter(|b| *b & 1 == 1).count() as u64;
        total += (here * page).min(n);
        off += n;
    }
    Ok(total)
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_just_written_is_resident_and_dropped_is_not() {
        // On tmpfs, DONTNEED cannot drop anything (the cache is the storage): use /var/tmp,
        // which is on the machine's disk, as the test's file system.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let path = dir.path().join("f");
        let len = 8u64 << 20;
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&vec![7u8; len as usize])
            .unwrap();
        let before = resident(&path, 0, len).unwrap();
        assert_eq!(before, len, "a file just written is in the cache");
        drop(&path, 0, len).unwrap();
        let after = resident(&path, 0, len).unwrap();
        assert!(
            after < len / 8,
            "after DONTNEED at most a few pages stay resident: {after} of {len}"
        );
    }
}
