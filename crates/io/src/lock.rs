//! fcntl byte-range locks: what makes a block update (read, merge, write
//! every copy) or an atomic-mode access indivisible between processes, and
//! the shared file pointer a fetch-and-add. fcntl locks are per process,
//! released when the process closes any descriptor of the file or exits, so
//! a killed rank never leaves a file locked.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// A held lock on a byte range; released when dropped. It keeps its own
/// descriptor of the file, so it borrows nothing (closing that descriptor
/// would release every lock this process holds on the file: locks are not
/// nested here).
pub struct RangeLock {
    file: File,
    start_bytes: u64,
    length_bytes: u64,
}

fn fcntl_lock(file: &File, kind: i32, start_bytes: u64, length_bytes: u64) -> io::Result<()> {
    // SAFETY: flock is plain data; zeroed is a valid value.
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = kind as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    request.l_start = start_bytes as libc::off_t;
    // 0 would mean "to the end of the file, however far it grows".
    request.l_len = length_bytes.max(1) as libc::off_t;
    loop {
        // SAFETY: a valid descriptor and a valid flock.
        let result = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLKW, &request) };
        if result == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

impl RangeLock {
    /// Wait for an exclusive lock on `[start, start + length)` of `file`.
    pub fn exclusive(file: &File, start_bytes: u64, length_bytes: u64) -> io::Result<RangeLock> {
        let file = file.try_clone()?;
        fcntl_lock(&file, libc::F_WRLCK, start_bytes, length_bytes)?;
        Ok(RangeLock {
            file,
            start_bytes,
            length_bytes,
        })
    }

    /// Wait for a shared lock (readers exclude writers only).
    pub fn shared(file: &File, start_bytes: u64, length_bytes: u64) -> io::Result<RangeLock> {
        let file = file.try_clone()?;
        fcntl_lock(&file, libc::F_RDLCK, start_bytes, length_bytes)?;
        Ok(RangeLock {
            file,
            start_bytes,
            length_bytes,
        })
    }
}

impl Drop for RangeLock {
    fn drop(&mut self) {
        let _ = fcntl_lock(
            &self.file,
            libc::F_UNLCK,
            self.start_bytes,
            self.length_bytes,
        );
    }
}

/// Add `delta` to the 8-byte little-endian counter at the start of `file`
/// under an exclusive lock; returns the value before (a shared file
/// pointer's fetch-and-add). A missing or short counter reads as 0.
pub fn fetch_add(file: &File, delta: i64) -> io::Result<i64> {
    use std::os::unix::fs::FileExt;
    let _lock = RangeLock::exclusive(file, 0, 8)?;
    let mut bytes = [0u8; 8];
    let read = file.read_at(&mut bytes, 0)?;
    if read < 8 {
        bytes = [0u8; 8];
    }
    let before = i64::from_le_bytes(bytes);
    if delta != 0 {
        file.write_all_at(&(before + delta).to_le_bytes(), 0)?;
    }
    Ok(before)
}

/// Set the counter of [`fetch_add`] to `value`.
pub fn store(file: &File, value: i64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let _lock = RangeLock::exclusive(file, 0, 8)?;
    file.write_all_at(&value.to_le_bytes(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_adds_and_stores() {
        let path = std::env::temp_dir().join(format!("resmpi-io-lock-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        assert_eq!(fetch_add(&file, 5).unwrap(), 0);
        assert_eq!(fetch_add(&file, 3).unwrap(), 5);
        assert_eq!(fetch_add(&file, 0).unwrap(), 8);
        store(&file, 2).unwrap();
        assert_eq!(fetch_add(&file, 0).unwrap(), 2);
        std::fs::remove_file(&path).unwrap();
    }
}
