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
