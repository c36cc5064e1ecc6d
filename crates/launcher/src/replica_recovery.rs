//! `--replica-recovery now`: mpiexec's half of recovering a lost replica.
//!
//! The substitute of a dead replica forks a new one inside the library
//! (`resmpi_core::Mpi::recover_replicas`). mpiexec must then own that
//! process as it owns the ones it started: reap it, report its death to
//! the others, end it with the job. Three pieces make that so:
//!
//! - mpiexec is a child subreaper (`PR_SET_CHILD_SUBREAPER`): the forker
//!   forks twice and the intermediate exits at once, so the new process is
//!   re-parented to mpiexec, whose `waitpid` loop reaps it like any rank;
//! - the forker announces the new process on its own PMI connection
//!   (`cmd=resmpi_fork rank=P incarnation=I pid=X`) before the new process
//!   does anything, so that its death, however early, is a death of
//!   incarnation I of P (`PmiServer::register_fork`);
//! - the new process connects to a Unix socket named by
//!   `RESMPI_FORK_SOCKET` and says who it is (`cmd=resmpi_forked`); that
//!   connection is its PMI connection from then on (`PmiServer::serve_forked`),
//!   over which it re-joins the job as a replacement process does.
//!
//! Its output goes nowhere yet (the library points it at `/dev/null`): the
//! rank's output goes on from the replicas mpiexec started.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;

use crate::pmi_server::PmiServer;

pub use resmpi_runtime::FORK_SOCKET_VARIABLE;

/// The listening socket forked replicas connect to; removed when dropped.
pub struct ForkSocket {
    path: PathBuf,
    listener: Option<UnixListener>,
}

impl ForkSocket {
    /// Listen on a socket of job `job_id` in the temporary directory, and
    /// make this process the subreaper of its descendants.
    pub fn open(job_id: &str) -> Result<ForkSocket, String> {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(format!(
                "--replica-recovery now: cannot become a child subreaper: {}",
                std::io::Error::last_os_error()
            ));
        }
        let path = std::env::temp_dir().join(format!("resmpi-fork-{job_id}.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|error| {
            format!(
                "--replica-recovery now: cannot listen on {}: {error}",
                path.display()
            )
        })?;
        Ok(ForkSocket {
            path,
            listener: Some(listener),
        })
    }

    /// The socket's path, for `RESMPI_FORK_SOCKET`.
    pub fn path(&self) -> String {
        self.path.display().to_string()
    }

    /// Serve forked replicas' connections with `server`, each on a thread
    /// of its own, from now on.
    pub fn serve(&mut self, server: Arc<PmiServer>) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        server.accept_forks();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let server = server.clone();
                std::thread::spawn(move || server.serve_forked(stream));
            }
        });
    }
}

impl Drop for ForkSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
