//! Message logging: where a rank's standard output stands, so that a rank
//! resumed from a checkpoint shows exactly what a fault-free run shows
//! (issue 13 item 5, the design's step 5).
//!
//! mpiexec's ledger skips, from a new incarnation's stream, as many bytes
//! as the earlier ones showed: right for a replay from `MPI_Init`, which
//! writes the same bytes again. A rank resumed from a checkpoint does not
//! write what came before the checkpoint (and writes, before
//! `VELOC_Restart` returns, lines the original never wrote). So under
//! `--msglog` the library puts a pipe between the program and its
//! standard output, copied by a thread that counts the bytes it passes
//! on: a checkpoint records that count (after `fflush`, with the pipe
//! drained, so it is exact); a resumed rank's copy drops everything until
//! `VELOC_Restart` returns (muted), then writes filler up to the recorded
//! count, which the ledger skips with the rest of what the original
//! showed, and from there its bytes line up with the original's.
//!
//! Only standard output: standard error is not copied (a resumed rank's
//! stderr before its checkpoint is not skipped; see docs/user-guide.md).
//!
//! **Output commit (optimistic logging).** What a process writes while it
//! depends on determinants not on the event logger's disk (its own or,
//! piggybacked, another rank's) may never happen in the run that a
//! failure leaves: the determinant lost, the process or an orphan of it
//! replays differently. So the protocol holds the copy ([`hold`]) while
//! that is so: what is read meanwhile waits here, and goes once the
//! protocol lets it pass, at a checkpoint (its state can no longer be
//! undone), or at exit. A process that dies or rolls back loses what it
//! held, which mpiexec never counted as shown: its replacement writes it
//! again, as the replay makes it. At most [`HELD_BYTES_MAX`] wait; past
//! that the copy passes them on (the guarantee lapses, said once on
//! standard error).

use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Most bytes of output held for stability (optimistic logging).
pub const HELD_BYTES_MAX: usize = 64 << 20;

/// The protocol holds the output now.
static HOLD: AtomicBool = AtomicBool::new(false);

/// The copy, while it runs.
struct Copy {
    /// Read end of the pipe the program writes to (non-blocking).
    read_fd: c_int,
    /// The standard output the process was given.
    real_fd: c_int,
    /// Bytes written to `real_fd` since the copy started.
    passed_bytes: u64,
    /// Drop what the program writes (a resumed rank before its restart).
    muted: bool,
    /// Read while the protocol held the output: passed on when it lets go.
    held: Vec<u8>,
}

static COPY: Mutex<Option<Copy>> = Mutex::new(None);

fn lock() -> std::sync::MutexGuard<'static, Option<Copy>> {
    COPY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

extern "C" {
    /// glibc's `stdout` stream.
    static mut stdout: *mut libc::FILE;
}

/// `fflush(stdout)`: what the program wrote is in the pipe afterwards.
pub fn flush_c_stdout() {
    // SAFETY: fflush on the C library's own stdout, which exists for the
    // whole process.
    unsafe {
        let stream = std::ptr::addr_of!(stdout).read();
        if !stream.is_null() {
            libc::fflush(stream);
        }
    }
}

/// Write all of `bytes` to `fd`; false on an error (the reader is gone).
fn write_all(fd: c_int, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a valid slice for its length.
        let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if written < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        bytes = &bytes[written as usize..];
    }
    true
}

/// Move what the pipe holds now to the real output (or drop it, muted).
/// Returns false at end of file.
fn drain(copy: &mut Copy) -> bool {
    let mut chunk = [0u8; 8192];
    loop {
        // SAFETY: `chunk` is a local buffer of its length.
        let count = unsafe { libc::read(copy.read_fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if count == 0 {
            return false;
        }
        if count < 0 {
            let error = std::io::Error::last_os_error();
            match error.kind() {
                std::io::ErrorKind::Interrupted => continue,
                _ => return true,
            }
        }
        let bytes = &chunk[..count as usize];
        if copy.muted {
            continue;
        }
        if HOLD.load(Ordering::Acquire) && copy.held.len() + bytes.len() <= HELD_BYTES_MAX {
            copy.held.extend_from_slice(bytes);
            continue;
        }
        if copy.held.len() + bytes.len() > HELD_BYTES_MAX && HOLD.load(Ordering::Acquire) {
            eprintln!(
                "resmpi: WARNING: more than {HELD_BYTES_MAX} bytes of standard output wait for \
                 optimistic message logging's determinants to be stable: passed on now"
            );
        }
        pass_held(copy);
        if write_all(copy.real_fd, bytes) {
            copy.passed_bytes += bytes.len() as u64;
        }
    }
}

/// Pass on what was held.
fn pass_held(copy: &mut Copy) {
    if copy.held.is_empty() {
        return;
    }
    let held = std::mem::take(&mut copy.held);
    if write_all(copy.real_fd, &held) {
        copy.passed_bytes += held.len() as u64;
    }
}

/// The protocol's gate: hold the output (`true`) or let it pass (what
/// was held goes now).
pub fn hold(held: bool) {
    HOLD.store(held, Ordering::Release);
    if held {
        return;
    }
    flush_c_stdout();
    let mut guard = lock();
    if let Some(copy) = guard.as_mut() {
        drain(copy);
        pass_held(copy);
    }
}

fn copy_thread(read_fd: c_int) {
    loop {
        let mut poll = libc::pollfd {
            fd: read_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, a local.
        let ready = unsafe { libc::poll(&mut poll, 1, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let mut guard = lock();
        let Some(copy) = guard.as_mut().filter(|copy| copy.read_fd == read_fd) else {
            return;
        };
        if !drain(copy) {
            // SAFETY: the read end is this thread's to close at its end.
            unsafe { libc::close(read_fd) };
            *guard = None;
            return;
        }
    }
}

extern "C" fn stop_at_exit() {
    stop();
}

/// Start copying standard output (message logging), muted from the start
/// when `muted`. False (and nothing changed) if it could not start: then
/// no checkpoint records a count and a resumed rank shows its output as
/// the ledger alone makes it.
pub fn start(muted: bool) -> bool {
    let mut guard = lock();
    if guard.is_some() {
        return true;
    }
    flush_c_stdout();
    let mut fds = [0 as c_int; 2];
    // SAFETY: plain descriptor calls on descriptors made here, and on 1,
    // which the process owns; every failure undoes what was done.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return false;
        }
        let [read_fd, write_fd] = fds;
        let real_fd = libc::fcntl(libc::STDOUT_FILENO, libc::F_DUPFD_CLOEXEC, 3);
        if real_fd < 0 {
            libc::close(read_fd);
            libc::close(write_fd);
            return false;
        }
        let flags = libc::fcntl(read_fd, libc::F_GETFL);
        if flags < 0
            || libc::fcntl(read_fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0
            || libc::dup2(write_fd, libc::STDOUT_FILENO) < 0
        {
            libc::close(read_fd);
            libc::close(write_fd);
            libc::close(real_fd);
            return false;
        }
        libc::close(write_fd);
        *guard = Some(Copy {
            read_fd,
            real_fd,
            passed_bytes: 0,
            muted,
            held: Vec::new(),
        });
        let spawned = std::thread::Builder::new()
            .name("resmpi-stdout".into())
            .spawn(move || copy_thread(read_fd));
        if spawned.is_err() {
            libc::dup2(real_fd, libc::STDOUT_FILENO);
            libc::close(real_fd);
            libc::close(read_fd);
            *guard = None;
            return false;
        }
        libc::atexit(stop_at_exit);
    }
    true
}

/// Bytes of standard output passed on so far, exactly (what the program
/// wrote before the call is counted), or None without the copy.
pub fn passed_bytes() -> Option<u64> {
    flush_c_stdout();
    let mut guard = lock();
    let copy = guard.as_mut()?;
    drain(copy);
    // A checkpoint: the state that wrote it can no longer be undone.
    pass_held(copy);
    Some(copy.passed_bytes)
}

/// A resumed rank's restart is done: drop what it wrote until now, pad
/// the output to `position` bytes (the count its checkpoint recorded,
/// which the launcher skips), and pass the rest on.
pub fn unmute_at(position: u64) {
    flush_c_stdout();
    let mut guard = lock();
    let Some(copy) = guard.as_mut() else {
        return;
    };
    drain(copy);
    copy.muted = false;
    let filler = [b'\n'; 4096];
    while copy.passed_bytes < position {
        let length = (position - copy.passed_bytes).min(filler.len() as u64) as usize;
        if !write_all(copy.real_fd, &filler[..length]) {
            break;
        }
        copy.passed_bytes += length as u64;
    }
}

/// Stop copying: pass on what is left and give the program its standard
/// output back (at exit).
pub fn stop() {
    flush_c_stdout();
    let mut guard = lock();
    let Some(mut copy) = guard.take() else {
        return;
    };
    drain(&mut copy);
    pass_held(&mut copy);
    // SAFETY: `real_fd` is the copy this module made of descriptor 1; the
    // pipe's last write end closes with the dup2, so the thread wakes,
    // finds no copy any more and ends (the read end stays open until the
    // process ends: closing it under a thread that polls it could let
    // the number be reused under it).
    unsafe {
        libc::dup2(copy.real_fd, libc::STDOUT_FILENO);
        libc::close(copy.real_fd);
    }
}
