//! Single-copy transfers between processes of one host (Linux cross-memory
//! attach: `process_vm_readv` / `process_vm_writev`), for large RMA puts and
//! gets on windows whose memory is the application's (`MPI_Win_create`,
//! dynamic windows), which the shared-segment direct path cannot reach.
//!
//! Why: an active-message put of 4 MiB was copied into frames at the origin,
//! through the shared-memory ring, and out into the window: three copies
//! where the kernel can do one. The origin sends one small frame naming its
//! own memory (pid, address runs); the target's engine, which applies
//! operations in order under the window's locks, copies between that memory
//! and its window itself. Ordering, locks and completion stay those of the
//! active messages: only where the bytes come from changes.
//!
//! When: the kernel must let one process of the job read another's memory
//! (same user; Yama's `ptrace_scope` 0 or absent; no seccomp filter refusing
//! the calls), checked once per process. `RESMPI_RMA_CMA=0` turns it off.

use std::sync::OnceLock;

/// Operations of fewer bytes go as frames: below this the system call and
/// the page walk cost more than the copies they save.
pub(super) const SINGLE_COPY_MIN_BYTES: usize = 64 * 1024;

/// Runs per system call (the kernel's `UIO_MAXIOV`).
const IOVECS_PER_CALL: usize = 1024;

/// Whether this process may use cross-memory attach toward processes of
/// its job; an error for a `RESMPI_RMA_CMA` other than `0` or `1`.
pub(super) fn available() -> Result<bool, String> {
    static AVAILABLE: OnceLock<Result<bool, String>> = OnceLock::new();
    AVAILABLE
        .get_or_init(|| {
            if let Ok(value) = std::env::var(ENVIRONMENT_VARIABLE) {
                match value.trim() {
                    "0" => return Ok(false),
                    "1" | "" => {}
                    other => {
                        return Err(format!("{ENVIRONMENT_VARIABLE}={other:?}: expected 0 or 1"))
                    }
                }
            }
            Ok(kernel_allows())
        })
        .clone()
}

/// The environment variable that turns single copy off (`0`).
const ENVIRONMENT_VARIABLE: &str = "RESMPI_RMA_CMA";

fn kernel_allows() -> bool {
    // Yama's scope 1 and up lets a process read only its descendants
    // (the ranks are siblings).
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope");
    if yama.is_ok_and(|scope| scope.trim() != "0") {
        return false;
    }
    // A seccomp filter (containers) may refuse the call itself.
    let source = [0x5au8; 8];
    let mut copy = [0u8; 8];
    // SAFETY: both runs are this function's arrays.
    let transferred = unsafe {
        transfer(
            Direction::Read,
            std::process::id(),
            &[(copy.as_mut_ptr() as usize, copy.len())],
            &[(source.as_ptr() as usize, source.len())],
        )
    };
    transferred.is_ok() && copy == source
}

/// Which way the bytes go, seen from the calling process.
#[derive(Clone, Copy, Debug)]
pub(super) enum Direction {
    /// From the other process's runs into the local ones.
    Read,
    /// From the local runs into the other process's.
    Write,
}

/// Copy between `local` runs of this process and `remote` runs of process
/// `pid` (both (address, length), the same total). Returns the OS error
/// when the kernel refuses or a run is not mapped.
///
/// # Safety
/// The local runs must be valid for the direction's access (writes for
/// `Read`) and not be touched by anything else meanwhile.
pub(super) unsafe fn transfer(
    direction: Direction,
    pid: u32,
    local: &[(usize, usize)],
    remote: &[(usize, usize)],
) -> std::io::Result<()> {
    let mut local = Cursor::new(local);
    let mut remote = Cursor::new(remote);
    while !local.done() && !remote.done() {
        // One call: up to IOVECS_PER_CALL runs on each side, cut to the
        // same byte count.
        let local_batch = local.batch();
        let remote_batch = remote.batch();
        let local_bytes: usize = local_batch.iter().map(|iov| iov.iov_len).sum();
        let remote_bytes: usize = remote_batch.iter().map(|iov| iov.iov_len).sum();
        let bytes = local_bytes.min(remote_bytes);
        let local_batch = cut(local_batch, bytes);
        let remote_batch = cut(remote_batch, bytes);
        // SAFETY: the local runs are the caller's (its contract); the
        // kernel checks the remote ones.
        let moved = unsafe {
            match direction {
                Direction::Read => libc::process_vm_readv(
                    pid as libc::pid_t,
                    local_batch.as_ptr(),
                    local_batch.len() as libc::c_ulong,
                    remote_batch.as_ptr(),
                    remote_batch.len() as libc::c_ulong,
                    0,
                ),
                Direction::Write => libc::process_vm_writev(
                    pid as libc::pid_t,
                    local_batch.as_ptr(),
                    local_batch.len() as libc::c_ulong,
                    remote_batch.as_ptr(),
                    remote_batch.len() as libc::c_ulong,
                    0,
                ),
            }
        };
        if moved < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if moved == 0 && bytes > 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        // A partial transfer stops at a run the kernel could not reach;
        // the next call starts there and reports why.
        local.advance(moved as usize);
        remote.advance(moved as usize);
    }
    Ok(())
}

/// Runs still to move, from a position inside them.
struct Cursor<'a> {
    runs: &'a [(usize, usize)],
    /// Bytes of `runs[0]` already moved.
    within: usize,
}

impl<'a> Cursor<'a> {
    fn new(runs: &'a [(usize, usize)]) -> Self {
        let mut cursor = Cursor { runs, within: 0 };
        cursor.skip_empty();
        cursor
    }

    fn done(&self) -> bool {
        self.runs.is_empty()
    }

    fn skip_empty(&mut self) {
        while let Some(&(_, length)) = self.runs.first() {
            if length > self.within {
                break;
            }
            self.runs = &self.runs[1..];
            self.within = 0;
        }
    }

    fn batch(&self) -> Vec<libc::iovec> {
        self.runs
            .iter()
            .take(IOVECS_PER_CALL)
            .enumerate()
            .map(|(index, &(address, length))| {
                let skip = if index == 0 { self.within } else { 0 };
                libc::iovec {
                    iov_base: (address + skip) as *mut libc::c_void,
                    iov_len: length - skip,
                }
            })
            .collect()
    }

    fn advance(&mut self, mut bytes: usize) {
        while bytes > 0 {
            let Some(&(_, length)) = self.runs.first() else {
                return;
            };
            let left = length - self.within;
            if bytes < left {
                self.within += bytes;
                return;
            }
            bytes -= left;
            self.runs = &self.runs[1..];
            self.within = 0;
        }
        self.skip_empty();
    }
}

/// `batch` shortened to `bytes`.
fn cut(mut batch: Vec<libc::iovec>, bytes: usize) -> Vec<libc::iovec> {
    let mut left = bytes;
    let mut keep = 0;
    for iov in batch.iter_mut() {
        if left == 0 {
            break;
        }
        iov.iov_len = iov.iov_len.min(left);
        left -= iov.iov_len;
        keep += 1;
    }
    batch.truncate(keep);
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_different_shapes_on_each_side_move_every_byte_in_order() {
        // Within this process (always allowed): 3000 bytes from 3 runs into
        // 7 runs of another layout (one empty), then back into 3000 runs of
        // one byte (more than one call takes).
        let source: Vec<u8> = (0..3000u32).map(|value| (value * 7 % 251) as u8).collect();
        let remote = [
            (source.as_ptr() as usize, 1000),
            (source.as_ptr() as usize + 1000, 1),
            (source.as_ptr() as usize + 1001, 1999),
        ];
        let mut landing = vec![0u8; 3000];
        let base = landing.as_mut_ptr() as usize;
        let local: Vec<(usize, usize)> = [0usize, 10, 11, 500, 1777, 2999]
            .windows(2)
            .map(|pair| (base + pair[0], pair[1] - pair[0]))
            .chain(std::iter::once((base + 2999, 1)))
            .chain(std::iter::once((base, 0)))
            .collect();
        unsafe { transfer(Direction::Read, std::process::id(), &local, &remote) }.unwrap();
        assert_eq!(landing, source);
        let mut back = vec![0u8; 3000];
        let many: Vec<(usize, usize)> = (0..3000)
            .map(|index| (back.as_mut_ptr() as usize + index, 1))
            .collect();
        unsafe {
            transfer(
                Direction::Write,
                std::process::id(),
                &[(landing.as_ptr() as usize, 3000)],
                &many,
            )
        }
        .unwrap();
        assert_eq!(back, source);
    }

    #[test]
    fn an_unmapped_remote_run_is_an_error_not_a_crash() {
        let mut landing = [0u8; 16];
        let result = unsafe {
            transfer(
                Direction::Read,
                std::process::id(),
                &[(landing.as_mut_ptr() as usize, 16)],
                &[(8, 16)],
            )
        };
        assert!(result.is_err());
    }
}
