//! Signals sent to mpiexec itself (Ctrl-C, SIGTERM, SIGHUP): the handler
//! only records the signal; the supervisor's loop sees it and tears the job
//! down, so that ranks, which live in their own process groups and so do not
//! get the terminal's Ctrl-C, are killed and shm segments removed.

use std::sync::atomic::{AtomicI32, Ordering};

static RECEIVED_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn record_signal(signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    RECEIVED_SIGNAL.store(signal, Ordering::SeqCst);
}

/// Installs the recording handler for SIGINT, SIGTERM and SIGHUP.
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: `action` is fully initialised (zeroed, then the handler and
        // flags set) before `sigaction` reads it; the handler only performs
        // an atomic store, which is async-signal-safe. Exec resets the
        // handler to the default in the ranks.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Write end of the pipe the SIGCHLD handler pokes (-1: not installed).
static CHILD_WAKEUP_WRITE_FD: AtomicI32 = AtomicI32::new(-1);
/// Read end of that pipe.
static CHILD_WAKEUP_READ_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn poke_on_child(_signal: libc::c_int) {
    let fd = CHILD_WAKEUP_WRITE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; one byte from a local to a
        // non-blocking pipe this module owns (a full pipe already wakes).
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Makes a child's death wake [`wait_for_child`] at once (a self-pipe
/// poked by a SIGCHLD handler), so the supervisor sees a death, and
/// notifies the survivors, without waiting out its polling period.
pub fn install_child_wakeup() {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`; `action` is fully
    // initialised before sigaction reads it, and the handler only calls
    // write(2), which is async-signal-safe. Exec resets the handler in the
    // ranks; the descriptors are close-on-exec.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) != 0 {
            return;
        }
        CHILD_WAKEUP_READ_FD.store(fds[0], Ordering::SeqCst);
        CHILD_WAKEUP_WRITE_FD.store(fds[1], Ordering::SeqCst);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = poke_on_child as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
    }
}

/// Wakes [`wait_for_child`] as a child's death would: a proxy's report of
/// a remote death is news just as urgent as a SIGCHLD.
pub fn wake() {
    poke_on_child(libc::SIGCHLD);
}

/// Sleep up to `timeout`, or less if a child died meanwhile (with
/// [`install_child_wakeup`]; a plain sleep without it).
pub fn wait_for_child(timeout: std::time::Duration) {
    let fd = CHILD_WAKEUP_READ_FD.load(Ordering::SeqCst);
    if fd < 0 {
        std::thread::sleep(timeout);
        return;
    }
    let mut poll_fd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd; read drains into a local buffer of its size.
    unsafe {
        if libc::poll(&mut poll_fd, 1, timeout_ms) > 0 {
            let mut buffer = [0u8; 64];
            while libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) > 0 {}
        }
    }
}

/// The last signal received, if any.
pub fn received() -> Option<i32> {
    match RECEIVED_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// The conventional name of `signal` (`SIGKILL`), or `signal N`.
pub fn name(signal: i32) -> String {
    let known = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGCHLD, "SIGCHLD"),
        (libc::SIGCONT, "SIGCONT"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGTSTP, "SIGTSTP"),
        (libc::SIGTTIN, "SIGTTIN"),
        (libc::SIGTTOU, "SIGTTOU"),
        (libc::SIGURG, "SIGURG"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGVTALRM, "SIGVTALRM"),
        (libc::SIGPROF, "SIGPROF"),
        (libc::SIGWINCH, "SIGWINCH"),
        (libc::SIGIO, "SIGIO"),
        (libc::SIGPWR, "SIGPWR"),
        (libc::SIGSYS, "SIGSYS"),
    ];
    known
        .iter()
        .find(|(number, _)| *number == signal)
        .map(|(_, name)| name.to_string())
        .unwrap_or_else(|| format!("signal {signal}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_conventional_ones() {
        assert_eq!(name(9), "SIGKILL");
        assert_eq!(name(11), "SIGSEGV");
        assert_eq!(name(15), "SIGTERM");
        assert_eq!(name(64), "signal 64");
    }
}
