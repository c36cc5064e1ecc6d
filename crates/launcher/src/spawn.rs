//! Starting one rank: its environment, its PMI socket, its stdio pipes, and
//! the pre-exec steps that keep it from outliving mpiexec.
//!
//! Each rank is the leader of its own process group, so mpiexec can kill a
//! rank together with anything it started (`kill(-pgid)`), and the terminal's
//! Ctrl-C reaches only mpiexec, which then tears down in order. Each rank
//! also asks the kernel for SIGKILL when mpiexec dies (`PR_SET_PDEATHSIG`),
//! checking afterwards that mpiexec did not die before the request was made.

use std::io;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::options::Options;

/// What every rank of one job shares.
pub struct JobIdentity {
    /// `RESMPI_JOB_ID` (16 hex characters), also `PMI_JOBID`.
    pub job_id: String,
    /// `RESMPI_JOB_SECRET` (64 hex characters).
    pub job_secret_hex: String,
    /// `LD_LIBRARY_PATH` for the ranks, `<mpiexec dir>/../lib` first.
    pub library_path: String,
}

/// `<directory of the mpiexec executable>/../lib`, where `libmpich.so.12`
/// of resmpi is installed next to `bin/mpiexec`.
pub fn library_directory() -> Option<PathBuf> {
    let executable = std::env::current_exe().ok()?;
    Some(executable.parent()?.parent()?.join("lib"))
}

/// `directory` in front of `existing` (a colon-separated list).
pub fn prepend_path(directory: &Path, existing: Option<&str>) -> String {
    match existing {
        Some(existing) if !existing.is_empty() => format!("{}:{existing}", directory.display()),
        _ => directory.display().to_string(),
    }
}

/// How rank 0's stdin is wired; other ranks get `/dev/null`.
pub enum StandardInput {
    /// Inherit mpiexec's stdin (it is not a terminal).
    Inherit,
    /// A pipe that mpiexec fills from its terminal (a rank in its own
    /// process group must not read the terminal: it would be stopped).
    Pipe,
    /// `/dev/null`.
    Null,
}

/// Starts `rank` of the job described by `options`, connected to the PMI
/// server through `pmi_socket` (the rank's end, inherited as `PMI_FD`).
pub fn spawn_rank(
    options: &Options,
    identity: &JobIdentity,
    rank: u32,
    pmi_socket: &UnixStream,
    standard_input: StandardInput,
) -> io::Result<Child> {
    let pmi_fd = pmi_socket.as_raw_fd();
    let mut command = Command::new(&options.program);
    command.args(&options.arguments);
    // A PMI_PORT left over from an enclosing launcher would be ignored (PMI_FD
    // wins), but must not confuse anything the rank starts.
    command.env_remove("PMI_PORT").env_remove("PMI_ID");
    for (name, value) in &options.environment {
        command.env(name, value);
    }
    let rank_count = options.rank_count.to_string();
    let rank_text = rank.to_string();
    command
        .env("PMI_FD", pmi_fd.to_string())
        .env("PMI_RANK", &rank_text)
        .env("PMI_SIZE", &rank_count)
        .env("PMI_JOBID", &identity.job_id)
        .env("MPI_LOCALNRANKS", &rank_count)
        .env("MPI_LOCALRANKID", &rank_text)
        .env("RESMPI_JOB_ID", &identity.job_id)
        .env("RESMPI_JOB_SECRET", &identity.job_secret_hex)
        .env("LD_LIBRARY_PATH", &identity.library_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(match standard_input {
            StandardInput::Inherit => Stdio::inherit(),
            StandardInput::Pipe => Stdio::piped(),
            StandardInput::Null => Stdio::null(),
        });
    // Captured before fork: the child compares its parent with this.
    let launcher_pid = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (setpgid, prctl, getppid, fcntl); it
    // allocates nothing and touches no lock. `pmi_fd` stays open in the
    // parent until after `spawn` returns.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // mpiexec may have died between fork and prctl: then nobody
            // would ever kill us.
            if libc::getppid() != launcher_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // The PMI socket was created close-on-exec; this rank keeps its own.
            if libc::fcntl(pmi_fd, libc::F_SETFD, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_directory_is_beside_the_executable_directory() {
        let directory = library_directory().unwrap();
        assert!(directory.ends_with("lib"));
        let executable = std::env::current_exe().unwrap();
        assert_eq!(directory.parent(), executable.parent().unwrap().parent());
    }

    #[test]
    fn prepend_path_keeps_the_existing_list() {
        let directory = Path::new("/opt/resmpi/lib");
        assert_eq!(prepend_path(directory, None), "/opt/resmpi/lib");
        assert_eq!(prepend_path(directory, Some("")), "/opt/resmpi/lib");
        assert_eq!(
            prepend_path(directory, Some("/a:/b")),
            "/opt/resmpi/lib:/a:/b"
        );
    }
}
