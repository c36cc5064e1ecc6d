//! Recovery of a lost replica (`--replica-recovery now`), the substitute's
//! half: between two MPI calls, it forks a copy of itself that re-joins the
//! job as the dead replica's next incarnation.
//!
//! The protocol (`resmpi_replication::recovery`) decides when a fork may
//! happen and what the new replica must be told; the engine
//! (`engine/fork.rs`) lets the copy take over its forker's engine under
//! swapped numbers; mpiexec (`replica_recovery.rs` in the launcher) adopts
//! the new process. Here is the order of things, chosen so that no step
//! can leave a process waiting for one that never comes:
//!
//! 1. Only at the end of an MPI call, when the protocol has a fork due and
//!    the engine is quiescent (nothing of the forker's own on its way).
//! 2. The forker forks twice; the intermediate process reports the new
//!    pid through a pipe and exits, so the new process is re-parented to
//!    mpiexec (a child subreaper).
//! 3. The forker tells mpiexec (`Pmi::announce_fork`) before it goes on:
//!    from then on a death of the new process, however early, is reported
//!    as a death of the new incarnation, which the protocol handles
//!    ("a new replica killed mid re-join"). If forking or the announcement
//!    fails, the forker counts the new replica dead at once.
//! 4. The new process drops its forker's connections (their descriptors
//!    are shared with the forker: closed, never shut down), registers on
//!    mpiexec's fork socket, and re-joins over TCP as a replacement
//!    process does, its re-join notice carrying the fork's cut.
//!
//! Its standard output and error go to mpiexec over the fork socket
//! (`cmd=resmpi_forked_output`), which shows them from where its forker's
//! stood at the fork: the forker flushes stdio before forking, and mpiexec
//! reads the forker's pipe to its end while the forker waits for the
//! announcement's answer (`RankOutput::fork_stream`).

#[cfg(feature = "replication")]
mod recovery {
    use std::io::{BufRead, Write};
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    use resmpi_ft::Interceptor;
    use resmpi_runtime::{FailureNotices, FailurePolicy, FORK_SOCKET_VARIABLE};

    use crate::wireup;
    use crate::Mpi;

    impl Mpi {
        /// Fork a new replica for a dead sibling if one is due and this
        /// process may (see the module comment); called at the end of MPI
        /// calls. In the new process it returns as that replica.
        pub fn recover_replicas(&mut self) {
            if !self.config.replica_recovery || self.engine.state.finalizing {
                return;
            }
            let Some(replica) = self.engine.state.interceptor.fork_ready() else {
                return;
            };
            if !self.engine.quiescent() {
                return;
            }
            let Ok(socket) = std::env::var(FORK_SOCKET_VARIABLE) else {
                eprintln!(
                    "resmpi: --replica-recovery now needs resmpi's mpiexec ({FORK_SOCKET_VARIABLE} is not set); lost replicas are not recovered"
                );
                self.config.replica_recovery = false;
                return;
            };
            let ranks = self.replicas.ranks;
            // The protocol as it was, should the fork not happen.
            let before = self.engine.state.interceptor.clone();
            let (protocol, cut) = self.engine.state.interceptor.fork(replica);
            let joined = cut.joined.replica * ranks + cut.joined.rank;
            let incarnation = cut.incarnation;
            let inherited = self.inherited_descriptors();
            // What the application printed is in mpiexec's pipe, not in a
            // stdio buffer the copy would print again: the new replica's
            // output goes on from here (mpiexec's `fork_stream`).
            // SAFETY: flushes every stdio output stream.
            unsafe { libc::fflush(std::ptr::null_mut()) };
            let mut pipe = [0 as libc::c_int; 2];
            // SAFETY: pipe writes two descriptors into the local array.
            if unsafe { libc::pipe(pipe.as_mut_ptr()) } != 0 {
                return self.fork_failed(before, "pipe");
            }
            // SAFETY: fork; the intermediate child only forks again, writes
            // to the pipe and exits.
            let intermediate = unsafe { libc::fork() };
            if intermediate == 0 {
                // SAFETY: as above.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    // SAFETY: closing this process's copies of the pipe.
                    unsafe {
                        libc::close(pipe[0]);
                        libc::close(pipe[1]);
                    }
                    let cut_hex = resmpi_runtime::hex_encode(&cut.to_bytes());
                    self.become_forked(
                        protocol,
                        joined,
                        incarnation,
                        &socket,
                        &cut_hex,
                        &inherited,
                    );
                    return;
                }
                let bytes = pid.to_le_bytes();
                // SAFETY: writes 4 bytes from a local array, then exits.
                unsafe {
                    libc::write(pipe[1], bytes.as_ptr().cast(), bytes.len());
                    libc::_exit(0);
                }
            }
            // SAFETY: the forker's end of the pipe.
            unsafe { libc::close(pipe[1]) };
            let mut bytes = [0u8; 4];
            // SAFETY: reads at most 4 bytes into a local array.
            let read = unsafe { libc::read(pipe[0], bytes.as_mut_ptr().cast(), bytes.len()) };
            // SAFETY: closing the pipe; reaping the intermediate.
            unsafe {
                libc::close(pipe[0]);
                if intermediate > 0 {
                    let mut status = 0;
                    libc::waitpid(intermediate, &mut status, 0);
                }
            }
            let pid = i32::from_le_bytes(bytes);
            if intermediate < 0 || read != 4 || pid <= 0 {
                return self.fork_failed(before, "fork");
            }
            if let Err(error) = self.pmi.announce_fork(joined, incarnation, pid) {
                // SAFETY: the process this one just forked.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                self.fork_failed(before, &error.to_string());
            }
        }

        /// Lost replicas of this rank are not forked back by this process
        /// (`why`): said once, when a fork is first due.
        pub fn decline_replica_recovery(&mut self, why: &str) {
            if !self.config.replica_recovery || self.engine.state.interceptor.fork_ready().is_none()
            {
                return;
            }
            eprintln!(
                "resmpi: process {}: a lost replica is not forked back: {why}; the rank goes on with fewer replicas",
                self.engine.state.wire_rank
            );
            self.config.replica_recovery = false;
        }

        /// The fork failed (`why`): the protocol goes back to its state
        /// `before` (the replica stays dead, as without recovery), and no
        /// fork is tried again.
        fn fork_failed(&mut self, before: resmpi_replication::Replication, why: &str) {
            eprintln!(
                "resmpi: process {}: forking a new replica failed ({why}); the rank goes on with fewer replicas",
                self.engine.state.wire_rank
            );
            self.config.replica_recovery = false;
            self.engine.state.interceptor = before;
        }

        /// Descriptors of this process's connections (TCP paths, their
        /// listeners, the launcher's): a forked copy closes them.
        fn inherited_descriptors(&self) -> Vec<i32> {
            let mut fds: Vec<i32> = self.pmi.connection_fd().into_iter().collect();
            for rail in &self.engine.transports.rails {
                fds.extend(rail.inner().fds());
                fds.push(rail.inner().listener_fd());
            }
            fds
        }

        /// In the new process: become incarnation `incarnation` of process
        /// `joined` and re-join the job; any failure ends this process
        /// (mpiexec reports the death, the protocol handles it).
        fn become_forked(
            &mut self,
            protocol: resmpi_replication::Replication,
            joined: u32,
            incarnation: u32,
            socket: &str,
            cut: &str,
            inherited: &[i32],
        ) {
            let leave = |why: String| -> ! {
                let _ = writeln!(std::io::stderr(), "resmpi: forked replica {joined}: {why}");
                // SAFETY: ends this process.
                unsafe { libc::_exit(1) }
            };
            // SAFETY: descriptors of this process: the forker's connections
            // (closed, not shut down: the forker keeps using them), then
            // the output pointed at /dev/null.
            unsafe {
                for &fd in inherited {
                    libc::close(fd);
                }
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
                if null >= 0 {
                    libc::dup2(null, 1);
                    libc::dup2(null, 2);
                    libc::close(null);
                }
            }
            // RESMPI_FORK_LOG=FILE: the forked replicas' standard error
            // goes there instead (appended), to diagnose a recovery.
            if let Ok(path) = std::env::var("RESMPI_FORK_LOG") {
                if let Ok(file) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                {
                    use std::os::fd::IntoRawFd;
                    let fd = file.into_raw_fd();
                    // SAFETY: moving a descriptor this process owns onto 2.
                    unsafe {
                        libc::dup2(fd, 2);
                        libc::close(fd);
                    }
                }
            }
            let replica = joined / self.replicas.ranks;
            std::env::set_var("RESMPI_REPLICA", replica.to_string());
            let mut stream = UnixStream::connect(socket).unwrap_or_else(|error| {
                leave(format!("cannot reach mpiexec at {socket}: {error}"))
            });
            let hello = format!("cmd=resmpi_forked rank={joined} incarnation={incarnation}\n");
            if let Err(error) = stream.write_all(hello.as_bytes()) {
                leave(format!("cannot register with mpiexec: {error}"));
            }
            let mut reply = Vec::new();
            let mut reader = std::io::BufReader::new(
                stream
                    .try_clone()
                    .unwrap_or_else(|error| leave(format!("socket: {error}"))),
            );
            // One line only: nothing else is sent before this reply.
            let _ = reader.read_until(b'\n', &mut reply);
            if !String::from_utf8_lossy(&reply).contains("rc=0") {
                leave(format!(
                    "mpiexec refused it: {}",
                    String::from_utf8_lossy(&reply).trim_end()
                ));
            }
            drop(reader);
            // Its standard output and error (unless RESMPI_FORK_LOG takes
            // the latter) go to mpiexec, which shows them from where its
            // forker's stood at the fork.
            let log = std::env::var_os("RESMPI_FORK_LOG").is_some();
            for fd in [1, 2].into_iter().filter(|&fd| fd == 1 || !log) {
                let Ok(mut output) = UnixStream::connect(socket) else {
                    continue;
                };
                let hello = format!(
                    "cmd=resmpi_forked_output rank={joined} incarnation={incarnation} stream={fd}\n"
                );
                if output.write_all(hello.as_bytes()).is_ok() {
                    use std::os::fd::AsRawFd;
                    // SAFETY: points descriptor `fd` at this process's socket.
                    unsafe { libc::dup2(output.as_raw_fd(), fd) };
                }
            }
            let forked = self.pmi.forked(joined, stream);
            std::mem::forget(std::mem::replace(&mut self.pmi, forked));
            let notices = Arc::new(FailureNotices::new());
            if let Err(error) = self.pmi.watch_failures(notices.clone()) {
                leave(format!("cannot watch failure notices: {error}"));
            }
            let mut config = self.config.clone();
            config.incarnation = incarnation;
            config.failure_policy = Some(FailurePolicy::Continue);
            let (mut transports, answer) =
                wireup::wire_up_rejoining(&mut self.pmi, &config, Some(&notices), Some(cut))
                    .unwrap_or_else(|error| leave(format!("re-join: {error}")));
            let size = self.engine.state.size;
            // Engine number to wire number, and the other way round.
            let physical: Vec<u32> = (0..size).map(|peer| protocol.wire_index(peer)).collect();
            let slot_of: Vec<u32> = (0..size).map(|wire| protocol.engine_number(wire)).collect();
            if let Some(rail) = transports.rails.first_mut() {
                rail.inner_mut().renumber(slot_of.clone());
            }
            let old = self.engine.become_forked_replica(
                joined,
                incarnation,
                protocol,
                transports,
                physical.clone(),
                notices,
            );
            std::mem::forget(old);
            self.config.incarnation = incarnation;
            let live_peers = answer.peers;
            for (peer, incarnation) in &live_peers {
                self.engine
                    .assume_peer_incarnation(slot_of[*peer as usize], *incarnation);
            }
            let own = self.engine.state.rank;
            for peer in 0..size {
                if peer != own
                    && !live_peers
                        .iter()
                        .any(|(live, _)| slot_of[*live as usize] == peer)
                {
                    self.engine.handle_peer_failure(peer);
                }
            }
            // Replicas forked after this one's forker forked it, whose
            // re-join notices came before this process watched.
            for (peer, cut) in &answer.cuts {
                let incarnation = live_peers
                    .iter()
                    .find(|(live, _)| live == peer)
                    .map_or(0, |&(_, incarnation)| incarnation);
                if let Some(cut) = resmpi_runtime::hex_decode(cut) {
                    self.engine.state.interceptor.on_replica_rejoin(
                        slot_of[*peer as usize],
                        incarnation,
                        &cut,
                    );
                }
            }
        }
    }
}

#[cfg(not(feature = "replication"))]
impl crate::Mpi {
    /// Without the replication build there is nothing to recover.
    #[inline]
    pub fn recover_replicas(&mut self) {}

    /// Without the replication build nothing is recovered.
    #[inline]
    pub fn decline_replica_recovery(&mut self, _why: &str) {}
}
