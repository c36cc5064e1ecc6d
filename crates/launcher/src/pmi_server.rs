//! The launcher's PMI-1 server: one key-value space and one barrier shared by
//! all ranks of the job, one thread per rank connection.
//!
//! It answers exactly as MPICH's hydra does (same reply fields, same limits:
//! keys up to 64 bytes, values up to 1024), so code that works under our
//! `mpiexec` also works under `mpiexec.hydra`. What the supervisor needs to
//! decide a rank's fate (did it init, finalize, abort, close its connection)
//! is recorded here and read by the supervisor's loop.
//!
//! # Failure notices
//!
//! One extension to PMI-1, for the library's failure detector: a rank that
//! sends `cmd=resmpi_watch_failures` is answered `cmd=resmpi_watch_failures_ok`,
//! then at once one `cmd=resmpi_failure rank=R incarnation=0` line for each
//! rank already known dead, and from then on the same line whenever the
//! supervisor reports a death ([`PmiServer::report_deaths`]), written from the
//! supervisor's thread. A rank is never told of its own death. Replies and
//! notices share one writer per connection behind a mutex, so lines never
//! interleave; the backlog and the registration happen under one lock, so a
//! subscriber gets every death exactly once however the two race. A death
//! reported after teardown began (the deaths teardown causes) is not sent.
//!
//! # Re-join (test-only `--respawn`)
//!
//! A rank the supervisor started again ([`PmiServer::prepare_respawn`]) is
//! incarnation I > 0 of its rank: its deaths are announced as
//! `incarnation=I`. Its MPI_Init sends `cmd=resmpi_rejoin incarnation=I
//! address=A` (A: its TCP listener); every other watching rank that is
//! alive and not finalized gets `cmd=resmpi_rejoin rank=R incarnation=I
//! address=A` and connects to it, and the replacement is answered
//! `cmd=resmpi_rejoin_ok rc=0 peers=R:I,...` (`peers=-` for none): exactly
//! the ranks that will connect, with their current incarnations. A
//! subscriber's backlog holds only the deaths of processes that were not
//! replaced since.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use resmpi_runtime::codec::{decode_text, PmiLine, MAX_LINE_BYTES};

use crate::proxy_link::lock;
use crate::replicated_output::{self, RankOutput};

/// Longest key accepted (hydra's `keylen_max`).
pub const KEY_MAX_BYTES: usize = 64;
/// Longest value accepted (hydra's `vallen_max`).
pub const VALUE_MAX_BYTES: usize = 1024;
/// Longest key-value space name reported (hydra's `kvsname_max`).
pub const KVS_NAME_MAX_BYTES: usize = 256;
/// Bound on the key-value space: past it, puts fail with `rc=-1`.
pub const KVS_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Most services MPI_Publish_name may have published at once in a job.
pub const NAMES_MAX_COUNT: usize = 4096;
/// How long one write to a rank's connection may block (a rank that stopped
/// reading must not stall the supervisor, which writes failure notices).
/// Never reached in practice: a connection is sent at most one notice per
/// rank of the job, a few tens of KiB, less than a socket buffer.
pub const WRITE_TIMEOUT_MS: u64 = 1000;
/// Longest wait of a forked replica's connection for its forker's
/// announcement (`PmiServer::serve_forked`).
pub const FORK_ANNOUNCE_WAIT_MS: u64 = 10_000;
/// How long a fork's announcement waits for its forker's output pipe to be
/// read to its end (the new replica's output goes on from there).
pub const FORK_OUTPUT_DRAIN_WAIT_MS: u64 = 2_000;
/// Longest wait of a re-join announcement for the ranks still in their
/// first MPI_Init (see `PmiServer::wait_for_first_watchers`).
pub const REJOIN_WATCH_WAIT_MS: u64 = 10_000;
/// A rank's request to end the job (`cmd=abort`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbortRequest {
    /// The rank that asked.
    pub rank: u32,
    /// Its `exitcode`.
    pub exit_code: i32,
    /// Its `message`, when it sent one.
    pub message: Option<String>,
}

/// The writing half of a rank's connection, shared by the thread that
/// answers the rank and the thread that sends it failure notices.
pub type SharedWriter = Arc<Mutex<Box<dyn Write + Send>>>;

/// A rank's PMI connection: a socketpair end (to the rank itself, or to
/// the proxy connection that carries a remote rank's lines).
pub trait Connection: Read + Send {
    /// A second handle on the same socket, for writing.
    fn writer(&self) -> std::io::Result<Box<dyn Write + Send>>;
    /// Bounds how long one write may block.
    fn limit_writes(&self, timeout: Duration) -> std::io::Result<()>;
}

impl Connection for UnixStream {
    fn writer(&self) -> std::io::Result<Box<dyn Write + Send>> {
        Ok(Box::new(self.try_clone()?))
    }

    fn limit_writes(&self, timeout: Duration) -> std::io::Result<()> {
        self.set_write_timeout(Some(timeout))
    }
}

/// The line that tells a watching rank that incarnation `incarnation` of
/// `rank` died.
pub fn failure_notice(rank: u32, incarnation: u32) -> String {
    PmiLine::new("resmpi_failure")
        .with("rank", rank)
        .with("incarnation", incarnation)
        .encode()
}

/// Who is dead and who wants to hear of it.
struct FailureBoard {
    /// Processes reported dead as (rank, incarnation), in the order
    /// reported, each once.
    dead: Vec<(u32, u32)>,
    /// Per rank: the incarnation of its current process (0 unless respawned).
    incarnations: Vec<u32>,
    /// Per rank: its writer, while it watches failures.
    watchers: Vec<Option<SharedWriter>>,
    /// Per rank: whether its first process ever subscribed (its MPI_Init
    /// got past wire-up).
    watched: Vec<bool>,
    /// Notice lines written (backlogs included).
    notices_sent_count: u64,
    /// Per rank: whether its current replacement has announced its
    /// re-join (and so accepts connections from those it was told of).
    announced: Vec<bool>,
    /// Per rank: re-join notices for its replacement, which announced but
    /// does not watch yet; written when it subscribes.
    pending_rejoins: Vec<Vec<String>>,
    /// Per rank: the fork cut (hex) its current process re-joined with, if
    /// it is a replica forked by a substitute; given to processes that
    /// re-join after it (they may have missed its notice).
    cuts: Vec<Option<String>>,
    /// Per rank: when its current process's death was reported; and per
    /// forked replica that re-joined, the time from its predecessor's
    /// death to its re-join (replication's recovery, for the FT report).
    died_at: Vec<Option<std::time::Instant>>,
    recovery_times: Vec<Duration>,
}

/// What [`PmiServer::report_deaths`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeathReport {
    /// The ranks not known dead before, in the order given; empty once
    /// teardown has begun (nothing is recorded or sent then).
    pub newly_dead: Vec<u32>,
    /// Notice lines written to watching ranks.
    pub notice_count: u32,
}

/// What the server knows about each rank and the shared key-value space.
#[derive(Debug, Default)]
pub struct ServerState {
    key_values: HashMap<String, String>,
    key_values_bytes: usize,
    barrier_epoch: u64,
    /// Per rank: inside the barrier of the current epoch.
    barrier_arrived: Vec<bool>,
    /// Per rank: its process is given up for good (a replica set dropped
    /// under replica masking), so no barrier waits for it.
    pub excused: Vec<bool>,
    shutting_down: bool,
    /// Per rank: sent `cmd=init`.
    pub initialized: Vec<bool>,
    /// Per rank: sent `cmd=finalize`.
    pub finalized: Vec<bool>,
    /// Per rank: its PMI connection reached end of file (it exited or closed it).
    pub connection_closed: Vec<bool>,
    /// Aborts not yet handled by the supervisor.
    pub abort_requests: Vec<AbortRequest>,
}

impl ServerState {
    /// The value ranks put under `key`, if any.
    pub fn key_value(&self, key: &str) -> Option<&str> {
        self.key_values.get(key).map(String::as_str)
    }

    /// Ranks inside a barrier that has not completed.
    pub fn barrier_waiting_count(&self) -> u32 {
        self.barrier_arrived
            .iter()
            .filter(|&&arrived| arrived)
            .count() as u32
    }
}

/// The server shared by all rank threads.
pub struct PmiServer {
    rank_count: u32,
    /// What `get_universe_size` answers (`--universe-size`).
    universe_size: u32,
    /// MPI_Publish_name's services: service name to port name, shared by
    /// every process of the job, visible at once (no barrier).
    names: Mutex<HashMap<String, String>>,
    kvs_name: String,
    process_mapping: String,
    state: Mutex<ServerState>,
    barrier_released: Condvar,
    failures: Mutex<FailureBoard>,
    /// MPI_Comm_spawn's nested launchers (`cmd=resmpi_spawn`).
    spawns: Mutex<crate::dynamic_spawn::SpawnedLaunchers>,
    /// `--replica-recovery now`: forked replicas announced by their
    /// forkers (`cmd=resmpi_fork`), for the supervisor to adopt, and
    /// whether such announcements are taken at all.
    forks: Mutex<Vec<ForkedReplica>>,
    /// Per rank of a replicated job, its stdout and stderr (a forked
    /// replica's output goes on from its forker's), and the threads that
    /// forward forked replicas' output, for the supervisor to wait for.
    replicated_outputs: Mutex<Vec<[Arc<RankOutput>; 2]>>,
    forked_output_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    recovery: std::sync::atomic::AtomicBool,
}

/// A process a replica forked to replace a dead sibling
/// (`cmd=resmpi_fork rank=P incarnation=I pid=X`): incarnation
/// `incarnation` of process `rank`, pid `pid` (mpiexec's child once its
/// intermediate parent exits: mpiexec is a child subreaper).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForkedReplica {
    /// The process it replaces (rank * replicas + replica numbering).
    pub rank: u32,
    /// Its incarnation.
    pub incarnation: u32,
    /// Its pid.
    pub pid: i32,
}

impl PmiServer {
    /// A server for `rank_count` ranks with key-value space `kvs_name`;
    /// `process_mapping` is the `PMI_process_mapping` value.
    pub fn new(rank_count: u32, kvs_name: String, process_mapping: String) -> Arc<PmiServer> {
        let ranks = rank_count as usize;
        Arc::new(PmiServer {
            rank_count,
            universe_size: rank_count,
            names: Mutex::new(HashMap::new()),
            kvs_name,
            process_mapping,
            state: Mutex::new(ServerState {
                initialized: vec![false; ranks],
                finalized: vec![false; ranks],
                connection_closed: vec![false; ranks],
                barrier_arrived: vec![false; ranks],
                excused: vec![false; ranks],
                ..ServerState::default()
            }),
            barrier_released: Condvar::new(),
            failures: Mutex::new(FailureBoard {
                dead: Vec::new(),
                incarnations: vec![0; ranks],
                watchers: vec![None; ranks],
                watched: vec![false; ranks],
                announced: vec![false; ranks],
                pending_rejoins: vec![Vec::new(); ranks],
                cuts: vec![None; ranks],
                died_at: vec![None; ranks],
                recovery_times: Vec::new(),
                notices_sent_count: 0,
            }),
            spawns: Mutex::new(crate::dynamic_spawn::SpawnedLaunchers::new(rank_count)),
            forks: Mutex::new(Vec::new()),
            replicated_outputs: Mutex::new(Vec::new()),
            forked_output_threads: Mutex::new(Vec::new()),
            recovery: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The same server answering `universe_size` to `get_universe_size`
    /// (processes, so replicas count); call before it is shared.
    pub fn with_universe_size(mut self: Arc<PmiServer>, universe_size: u32) -> Arc<PmiServer> {
        if let Some(server) = Arc::get_mut(&mut self) {
            server.universe_size = universe_size.max(1);
            server.spawned().set_universe_size(server.universe_size);
        }
        self
    }

    /// MPI_Comm_spawn's nested launchers.
    pub fn spawned(&self) -> MutexGuard<'_, crate::dynamic_spawn::SpawnedLaunchers> {
        self.spawns
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `cmd=resmpi_spawn count=N script=S parent=P`: start the processes
    /// (see `dynamic_spawn.rs`) and answer their first endpoint.
    fn spawn(&self, line: &PmiLine) -> PmiLine {
        let reply = PmiLine::new("resmpi_spawn_result");
        let count = line.get("count").and_then(|text| text.parse::<u32>().ok());
        let (Some(count), Some(script), Some(parent)) =
            (count, line.get("script"), line.get("parent"))
        else {
            return reply
                .with("rc", -1)
                .with("msg", "spawn_needs_count_script_and_parent");
        };
        if self.state().shutting_down {
            return reply.with("rc", -1).with("msg", "the_job_is_ending");
        }
        match self
            .spawned()
            .start(count, &decode_text(script), &decode_text(parent))
        {
            Ok(base) => reply.with("rc", 0).with("base", base),
            Err(message) => reply.with("rc", -1).with("msg", message),
        }
    }

    /// MPI_Publish_name / Lookup_name / Unpublish_name (hydra's PMI-1
    /// commands `publish_name`, `lookup_name`, `unpublish_name`).
    fn name_service(&self, line: &PmiLine) -> PmiLine {
        let mut names = self
            .names
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let reply = match line.command.as_str() {
            "publish_name" => "publish_result",
            "lookup_name" => "lookup_result",
            _ => "unpublish_result",
        };
        let refuse = |message: &str| PmiLine::new(reply).with("rc", -1).with("msg", message);
        let Some(service) = line.get("service") else {
            return refuse("a_service_name_is_needed");
        };
        match line.command.as_str() {
            "publish_name" => {
                let Some(port) = line.get("port") else {
                    return refuse("a_port_name_is_needed");
                };
                if names.contains_key(service) {
                    return refuse("service_already_published");
                }
                if names.len() >= NAMES_MAX_COUNT
                    || service.len() > VALUE_MAX_BYTES
                    || port.len() > VALUE_MAX_BYTES
                {
                    return refuse("name_service_full");
                }
                names.insert(service.to_string(), port.to_string());
                PmiLine::new(reply).with("rc", 0).with("msg", "success")
            }
            "lookup_name" => match names.get(service) {
                Some(port) => PmiLine::new(reply)
                    .with("rc", 0)
                    .with("msg", "success")
                    .with("port", port),
                None => refuse("service_not_published"),
            },
            _ => match names.remove(service) {
                Some(_) => PmiLine::new(reply).with("rc", 0).with("msg", "success"),
                None => refuse("service_not_published"),
            },
        }
    }

    fn failures(&self) -> MutexGuard<'_, FailureBoard> {
        self.failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records that `ranks` died and writes their notices to every
    /// watching rank but the dead themselves, now, on the caller's thread:
    /// one write per watcher for the whole batch (a socketpair holds only a
    /// few hundred separate writes that its reader has not read yet).
    pub fn report_deaths(&self, ranks: &[u32]) -> DeathReport {
        let mut report = DeathReport::default();
        if self.state().shutting_down {
            return report;
        }
        let mut board = self.failures();
        let mut newly_dead = Vec::new();
        for &rank in ranks {
            let process = (rank, board.incarnations[rank as usize]);
            if !board.dead.contains(&process) {
                board.dead.push(process);
                board.died_at[rank as usize] = Some(std::time::Instant::now());
                newly_dead.push(process);
                report.newly_dead.push(rank);
            }
        }
        let FailureBoard {
            watchers,
            notices_sent_count,
            ..
        } = &mut *board;
        for (watcher, slot) in watchers.iter_mut().enumerate() {
            let Some(writer) = slot else {
                continue;
            };
            let mut lines = String::new();
            let mut line_count = 0;
            for &(dead, incarnation) in newly_dead
                .iter()
                .filter(|&&(dead, _)| dead != watcher as u32)
            {
                lines.push_str(&failure_notice(dead, incarnation));
                line_count += 1;
            }
            if line_count == 0 {
                continue;
            }
            let written = lock_writer(writer).write_all(lines.as_bytes());
            match written {
                Ok(()) => {
                    report.notice_count += line_count;
                    *notices_sent_count += u64::from(line_count);
                }
                Err(error) => {
                    // Gone (its thread has not noticed yet), or it stopped
                    // reading for WRITE_TIMEOUT_MS: it gets no more notices.
                    *slot = None;
                    let gone = matches!(
                        error.kind(),
                        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                    );
                    if !gone && !self.state().connection_closed[watcher] {
                        // Notices go only to watchers, which exist only
                        // under the continue policy: a warning there.
                        eprintln!(
                            "WARNING: mpiexec: rank {watcher} does not read its PMI connection; it gets no more failure notices"
                        );
                    }
                }
            }
        }
        report
    }

    /// Ranks reported dead, in the order reported, once per process (a
    /// respawned rank that died again is listed again).
    pub fn dead_ranks(&self) -> Vec<u32> {
        self.failures().dead.iter().map(|&(rank, _)| rank).collect()
    }

    /// The incarnation of `rank`'s current process.
    pub fn incarnation_of(&self, rank: u32) -> u32 {
        self.failures().incarnations[rank as usize]
    }

    /// `rank` is about to be started again: its next incarnation, with the
    /// rank's PMI state (init, finalize, connection) as for a new process.
    pub fn prepare_respawn(&self, rank: u32) -> u32 {
        self.begin_incarnation(rank, |_| true)
            .expect("an unconditional new incarnation")
    }

    /// If `allowed` (asked under the failure board's lock): `rank`'s next
    /// incarnation begins, its PMI state (init, finalize, connection) as
    /// for a new process.
    fn begin_incarnation(
        &self,
        rank: u32,
        allowed: impl FnOnce(&FailureBoard) -> bool,
    ) -> Option<u32> {
        let slot = rank as usize;
        let incarnation = {
            let mut board = self.failures();
            if !allowed(&board) {
                return None;
            }
            board.incarnations[slot] += 1;
            board.watchers[slot] = None;
            board.announced[slot] = false;
            board.pending_rejoins[slot].clear();
            board.cuts[slot] = None;
            board.incarnations[slot]
        };
        let mut state = self.state();
        state.initialized[slot] = false;
        state.finalized[slot] = false;
        state.connection_closed[slot] = false;
        Some(incarnation)
    }

    /// Take `cmd=resmpi_fork` (`--replica-recovery now`).
    pub fn accept_forks(&self) {
        self.recovery
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// `cmd=resmpi_fork rank=P incarnation=I pid=X` from `forker`: it
    /// forked pid X as incarnation I of dead process P. P becomes that
    /// incarnation here (its deaths are announced as such) and the
    /// supervisor adopts X ([`PmiServer::take_forks`]).
    fn register_fork(&self, forker: u32, line: &PmiLine) -> PmiLine {
        let failure = |message: &str| {
            PmiLine::new("resmpi_fork_ok")
                .with("rc", -1)
                .with("msg", message)
        };
        if !self.recovery.load(std::sync::atomic::Ordering::Acquire) {
            return failure("replica_recovery_is_off");
        }
        let number = |key: &str| line.get(key).and_then(|text| text.parse::<u64>().ok());
        let (Some(rank), Some(incarnation), Some(pid)) =
            (number("rank"), number("incarnation"), number("pid"))
        else {
            return failure("resmpi_fork_needs_rank_incarnation_and_pid");
        };
        let (rank, incarnation, pid) = (rank as u32, incarnation as u32, pid as i32);
        if rank >= self.rank_count || rank == forker || pid <= 0 {
            return failure("no_such_process");
        }
        let next_incarnation = |board: &FailureBoard| {
            let current = board.incarnations[rank as usize];
            board.dead.contains(&(rank, current)) && incarnation == current + 1
        };
        // The forker may have seen the death (its connection closed)
        // before mpiexec reaped the process: wait for that.
        let deadline = std::time::Instant::now() + Duration::from_millis(FORK_ANNOUNCE_WAIT_MS);
        while !next_incarnation(&self.failures()) {
            let death_to_come = self.incarnation_of(rank) + 1 == incarnation;
            if !death_to_come || std::time::Instant::now() >= deadline {
                return failure("not_the_next_incarnation_of_a_dead_process");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // The forker flushed its output and waits for this reply: the new
        // replica's output goes on from where the forker's is now, before
        // the new process may register (and send its own).
        if let (Some((outputs, from)), Some((_, to))) =
            (self.outputs_of(forker), self.outputs_of(rank))
        {
            for output in &outputs {
                output.fork_stream(from, to, Duration::from_millis(FORK_OUTPUT_DRAIN_WAIT_MS));
            }
        }
        // Checked again and taken under one lock: of two announcements of
        // the same incarnation, one wins.
        if self.begin_incarnation(rank, next_incarnation).is_none() {
            return failure("not_the_next_incarnation_of_a_dead_process");
        }
        self.state().initialized[rank as usize] = true;
        self.forks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(ForkedReplica {
                rank,
                incarnation,
                pid,
            });
        PmiLine::new("resmpi_fork_ok").with("rc", 0)
    }

    /// The outputs of a replicated job's ranks (see `replicated_output`):
    /// a forked replica's output goes on from its forker's.
    pub fn set_replicated_outputs(&self, outputs: Vec<[Arc<RankOutput>; 2]>) {
        *lock(&self.replicated_outputs) = outputs;
    }

    /// The threads forwarding forked replicas' output (they end when
    /// those processes close their output).
    pub fn take_forked_output_threads(&self) -> Vec<std::thread::JoinHandle<()>> {
        std::mem::take(&mut *lock(&self.forked_output_threads))
    }

    /// Process `process`'s logical rank's outputs and its replica index,
    /// in a replicated job.
    fn outputs_of(&self, process: u32) -> Option<([Arc<RankOutput>; 2], usize)> {
        let outputs = lock(&self.replicated_outputs);
        let ranks = outputs.len() as u32;
        let rank_outputs = outputs.get((process % ranks.max(1)) as usize)?.clone();
        Some((rank_outputs, (process / ranks) as usize))
    }

    /// The forked replicas announced since the last call.
    pub fn take_forks(&self) -> Vec<ForkedReplica> {
        std::mem::take(
            &mut *self
                .forks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// A forked replica's own connection (on `--replica-recovery`'s
    /// socket): its first line, `cmd=resmpi_forked rank=P incarnation=I`,
    /// names the incarnation its forker announced; from then on it is P's
    /// PMI connection, served as any other.
    pub fn serve_forked(&self, mut stream: UnixStream) {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while line.len() < MAX_LINE_BYTES {
            match stream.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => break,
                Ok(1) => line.push(byte[0]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                _ => return,
            }
        }
        let text = String::from_utf8_lossy(&line);
        let parsed = PmiLine::parse(&text).ok().filter(|line| {
            line.command == "resmpi_forked" || line.command == "resmpi_forked_output"
        });
        let output_stream = parsed
            .as_ref()
            .filter(|line| line.command == "resmpi_forked_output")
            .map(|line| line.get("stream") == Some("2"));
        let number = |key: &str| {
            parsed
                .as_ref()
                .and_then(|line| line.get(key))
                .and_then(|text| text.parse::<u32>().ok())
        };
        let refuse = |stream: &mut UnixStream, message: &str| {
            let reply = PmiLine::new("resmpi_forked_ok")
                .with("rc", -1)
                .with("msg", message);
            let _ = stream.write_all(reply.encode().as_bytes());
        };
        let (Some(rank), Some(incarnation)) = (number("rank"), number("incarnation")) else {
            return refuse(&mut stream, "expected_cmd=resmpi_forked_rank_incarnation");
        };
        // The forker announces the new process (`cmd=resmpi_fork`) after
        // the fork, so the new process may be here first: wait for it.
        let deadline = std::time::Instant::now() + Duration::from_millis(FORK_ANNOUNCE_WAIT_MS);
        while rank < self.rank_count
            && self.incarnation_of(rank) < incarnation
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        if rank >= self.rank_count || self.incarnation_of(rank) != incarnation {
            return refuse(&mut stream, "not_the_announced_incarnation");
        }
        if let Some(is_stderr) = output_stream {
            // Its standard output or error, from its forker's point on.
            let Some((outputs, replica)) = self.outputs_of(rank) else {
                return refuse(&mut stream, "not_a_replicated_job");
            };
            let output = outputs[usize::from(is_stderr)].clone();
            let thread = std::thread::spawn(move || {
                replicated_output::forward_replica(stream, output, replica)
            });
            lock(&self.forked_output_threads).push(thread);
            return;
        }
        let reply = PmiLine::new("resmpi_forked_ok").with("rc", 0).encode();
        if stream.write_all(reply.as_bytes()).is_err() {
            return;
        }
        self.serve(rank, stream);
    }

    /// `cmd=resmpi_rejoin` from `rank`: tell every live watcher but `rank`
    /// to connect to it, and answer with who was told.
    fn announce_rejoin(&self, rank: u32, line: &PmiLine) -> PmiLine {
        let failure = |message: &str| {
            PmiLine::new("resmpi_rejoin_ok")
                .with("rc", -1)
                .with("msg", message)
        };
        let Some(address) = line.get("address").filter(|address| !address.is_empty()) else {
            return failure("resmpi_rejoin_needs_an_address");
        };
        self.wait_for_first_watchers(rank);
        let finalized = self.state().finalized.clone();
        let mut board = self.failures();
        let incarnation = board.incarnations[rank as usize];
        if line.get("incarnation") != Some(incarnation.to_string().as_str()) {
            return failure("not_the_current_incarnation_of_this_rank");
        }
        let mut notice = PmiLine::new("resmpi_rejoin")
            .with("rank", rank)
            .with("incarnation", incarnation)
            .with("address", address);
        // A forked replica's cut (hex), for the replication protocol.
        let cut = line.get("cut").filter(|cut| !cut.is_empty());
        if let Some(cut) = cut {
            notice = notice.with("cut", cut);
        }
        let notice = notice.encode();
        let mut peers = Vec::new();
        let FailureBoard {
            dead,
            incarnations,
            watchers,
            notices_sent_count,
            announced,
            pending_rejoins,
            cuts,
            died_at,
            recovery_times,
            ..
        } = &mut *board;
        announced[rank as usize] = true;
        cuts[rank as usize] = cut.map(str::to_string);
        if let (Some(_), Some(died_at)) = (cut, died_at[rank as usize]) {
            recovery_times.push(died_at.elapsed());
        }
        for (watcher, slot) in watchers.iter_mut().enumerate() {
            let peer = watcher as u32;
            let alive = !dead.contains(&(peer, incarnations[watcher]));
            if peer == rank || !alive || finalized[watcher] {
                continue;
            }
            if incarnations[watcher] > 0 && !announced[watcher] {
                // A replacement that watches from before its own re-join
                // (to hear of deaths during it) and has not announced
                // yet: it connects to this one when it announces, as one
                // that does not watch yet does (below). Listing it here
                // too would have each wait in its wire-up for the other.
                continue;
            }
            let Some(writer) = slot else {
                // Another replacement, re-joining at the same time: one
                // that announced already connects to this one once it
                // watches (the notice waits for it); one that has not
                // announced yet is connected to by this one when it does.
                if incarnations[watcher] > 0 && announced[watcher] {
                    pending_rejoins[watcher].push(notice.clone());
                    peers.push((peer, incarnations[watcher]));
                }
                continue;
            };
            if lock_writer(writer).write_all(notice.as_bytes()).is_ok() {
                *notices_sent_count += 1;
                peers.push((peer, incarnations[watcher]));
            } else {
                *slot = None;
            }
        }
        // The cuts of forked replicas among them: this process may have
        // missed their notices (it watched, but had not announced yet).
        let peer_cuts: Vec<String> = peers
            .iter()
            .filter_map(|&(peer, _)| Some(format!("{peer}:{}", cuts[peer as usize].as_ref()?)))
            .collect();
        let peers = if peers.is_empty() {
            "-".to_string()
        } else {
            let listed: Vec<String> = peers
                .iter()
                .map(|(peer, incarnation)| format!("{peer}:{incarnation}"))
                .collect();
            listed.join(",")
        };
        let reply = PmiLine::new("resmpi_rejoin_ok")
            .with("rc", 0)
            .with("peers", peers);
        if peer_cuts.is_empty() {
            reply
        } else {
            reply.with("cuts", peer_cuts.join(","))
        }
    }

    /// Before a re-join is announced: wait (at most
    /// [`REJOIN_WATCH_WAIT_MS`]) until every live first process other than
    /// `joining` watches failures. One that does not yet is still inside
    /// its MPI_Init (slow to start, e.g. on a busy host); the announcement
    /// would pass it by (a subscriber's backlog holds deaths, not re-joins,
    /// and not even the death of a process since replaced), so it would
    /// never connect to the new process, which would count it as failed.
    fn wait_for_first_watchers(&self, joining: u32) {
        let deadline = std::time::Instant::now() + Duration::from_millis(REJOIN_WATCH_WAIT_MS);
        loop {
            // The two locks one after the other, never nested this way
            // round (`report_deaths` takes them the other way).
            let (finalized, closed) = {
                let state = self.state();
                (state.finalized.clone(), state.connection_closed.clone())
            };
            let waiting = {
                let board = self.failures();
                (0..self.rank_count as usize).any(|slot| {
                    slot != joining as usize
                        && board.incarnations[slot] == 0
                        && !finalized[slot]
                        && !closed[slot]
                        && board.watchers[slot].is_none()
                        && !board.dead.contains(&(slot as u32, 0))
                })
            };
            if !waiting || std::time::Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Replicas forked back that re-joined, and the longest time from a
    /// replica's death to its successor's re-join.
    pub fn recoveries(&self) -> (u64, Duration) {
        let board = self.failures();
        let longest = board.recovery_times.iter().max().copied();
        (
            board.recovery_times.len() as u64,
            longest.unwrap_or_default(),
        )
    }

    /// Notice lines written so far (backlogs included).
    pub fn notices_sent_count(&self) -> u64 {
        self.failures().notices_sent_count
    }

    /// `cmd=resmpi_watch_failures` from `rank`: the reply, the backlog, and
    /// from now on every new death, on `writer`.
    fn watch_failures(&self, rank: u32, writer: &SharedWriter) -> std::io::Result<()> {
        let mut board = self.failures();
        let mut lines = PmiLine::new("resmpi_watch_failures_ok").encode();
        let mut backlog_count: u64 = 0;
        // Deaths of processes since replaced are news to nobody who
        // subscribes now.
        for &(dead, incarnation) in board.dead.iter().filter(|&&(dead, incarnation)| {
            dead != rank && board.incarnations[dead as usize] == incarnation
        }) {
            lines.push_str(&failure_notice(dead, incarnation));
            backlog_count += 1;
        }
        // Re-joins announced while this replacement was joining itself.
        for notice in std::mem::take(&mut board.pending_rejoins[rank as usize]) {
            lines.push_str(&notice);
            backlog_count += 1;
        }
        lock_writer(writer).write_all(lines.as_bytes())?;
        board.notices_sent_count += backlog_count;
        board.watchers[rank as usize] = Some(writer.clone());
        board.watched[rank as usize] = true;
        Ok(())
    }

    /// Whether the first process of `rank` is inside MPI_Init's wire-up:
    /// it sent `cmd=init` but has not subscribed to failure notices yet
    /// (it does once wire-up is done), so nobody can tell it of a death,
    /// and wire-up needs every process.
    pub fn in_startup(&self, rank: u32) -> bool {
        let slot = rank as usize;
        let started = {
            let state = self.state();
            state.initialized[slot] && !state.finalized[slot] && !state.connection_closed[slot]
        };
        let board = self.failures();
        started && board.incarnations[slot] == 0 && !board.watched[slot]
    }

    /// Process `rank` is given up for good (its replica set dropped under
    /// replica masking): barriers no longer wait for it, so the others'
    /// `MPI_Init` completes even when it died during wire-up.
    pub fn excuse(&self, rank: u32) {
        let mut state = self.state();
        state.excused[rank as usize] = true;
        self.release_barrier_if_complete(&mut state);
    }

    /// Ends the current barrier epoch once every process not excused is in
    /// it.
    fn release_barrier_if_complete(&self, state: &mut ServerState) {
        let complete = state
            .barrier_arrived
            .iter()
            .zip(&state.excused)
            .all(|(&arrived, &excused)| arrived || excused);
        if complete && state.barrier_arrived.contains(&true) {
            state.barrier_arrived.fill(false);
            state.barrier_epoch += 1;
            self.barrier_released.notify_all();
        }
    }

    /// The state, for the supervisor to read or to take abort requests.
    pub fn state(&self) -> MutexGuard<'_, ServerState> {
        // A rank thread cannot panic while holding the lock (panic = abort).
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Releases every thread waiting in a barrier without a reply: the job
    /// is being torn down.
    pub fn shut_down(&self) {
        self.state().shutting_down = true;
        self.barrier_released.notify_all();
    }

    /// Serves rank `rank` on `stream` until the rank (or, for a remote
    /// rank, its proxy) closes it.
    pub fn serve(&self, rank: u32, mut stream: impl Connection) {
        let writer: SharedWriter = match stream.writer() {
            Ok(writer) => Arc::new(Mutex::new(writer)),
            Err(error) => {
                eprintln!("mpiexec: cannot serve the PMI connection of rank {rank}: {error}");
                self.state().connection_closed[rank as usize] = true;
                return;
            }
        };
        let _ = stream.limit_writes(Duration::from_millis(WRITE_TIMEOUT_MS));
        let incarnation = self.incarnation_of(rank);
        self.serve_lines(rank, &mut stream, &writer);
        // A connection of a process since replaced says nothing about the
        // replacement.
        if self.incarnation_of(rank) != incarnation {
            return;
        }
        self.failures().watchers[rank as usize] = None;
        self.state().connection_closed[rank as usize] = true;
    }

    fn serve_lines(&self, rank: u32, stream: &mut impl Read, writer: &SharedWriter) {
        let mut pending: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 4096];
        'connection: loop {
            while let Some(end) = pending.iter().position(|&byte| byte == b'\n') {
                let bytes: Vec<u8> = pending.drain(..=end).collect();
                let text = String::from_utf8_lossy(&bytes);
                let reply = match PmiLine::parse(&text) {
                    Ok(line) if line.command == "resmpi_watch_failures" => {
                        if self.watch_failures(rank, writer).is_err() {
                            break 'connection;
                        }
                        None
                    }
                    Ok(line) if line.command == "resmpi_rejoin" => {
                        Some(self.announce_rejoin(rank, &line))
                    }
                    Ok(line) if line.command == "resmpi_fork" => {
                        Some(self.register_fork(rank, &line))
                    }
                    Ok(line) => self.handle_line(rank, &line),
                    Err(error) => {
                        eprintln!("mpiexec: rank {rank} sent a malformed PMI line: {error}");
                        Some(
                            PmiLine::new("error")
                                .with("rc", -1)
                                .with("msg", "malformed_line"),
                        )
                    }
                };
                if let Some(reply) = reply {
                    if lock_writer(writer)
                        .write_all(reply.encode().as_bytes())
                        .is_err()
                    {
                        break 'connection;
                    }
                }
            }
            if pending.len() > MAX_LINE_BYTES {
                eprintln!(
                    "mpiexec: rank {rank} sent a PMI line longer than {MAX_LINE_BYTES} bytes; closing its connection"
                );
                break;
            }
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(count) => pending.extend_from_slice(&chunk[..count]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// The reply to one request from `rank`; `None` for requests that get no
    /// reply (abort, a barrier ended by shutdown). Blocks in `barrier_in`
    /// until every rank has arrived. (`resmpi_watch_failures` is not a
    /// request/reply: [`PmiServer::serve`] handles it.)
    pub fn handle_line(&self, rank: u32, line: &PmiLine) -> Option<PmiLine> {
        let failure = |command: &str, message: &str| {
            Some(PmiLine::new(command).with("rc", -1).with("msg", message))
        };
        let kvs_matches = || line.get("kvsname") == Some(self.kvs_name.as_str());
        match line.command.as_str() {
            "init" => {
                if line.get("pmi_version") != Some("1") {
                    return failure("response_to_init", "only_pmi_version_1_is_supported");
                }
                self.state().initialized[rank as usize] = true;
                Some(
                    PmiLine::new("response_to_init")
                        .with("pmi_version", 1)
                        .with("pmi_subversion", 1)
                        .with("rc", 0),
                )
            }
            "get_maxes" => Some(
                PmiLine::new("maxes")
                    .with("kvsname_max", KVS_NAME_MAX_BYTES)
                    .with("keylen_max", KEY_MAX_BYTES)
                    .with("vallen_max", VALUE_MAX_BYTES),
            ),
            "get_appnum" => Some(PmiLine::new("appnum").with("appnum", 0)),
            "get_my_kvsname" => Some(PmiLine::new("my_kvsname").with("kvsname", &self.kvs_name)),
            "get_universe_size" => {
                Some(PmiLine::new("universe_size").with("size", self.universe_size))
            }
            "publish_name" | "lookup_name" | "unpublish_name" => Some(self.name_service(line)),
            "resmpi_spawn" => Some(self.spawn(line)),
            "put" => {
                let (Some(key), Some(value)) = (line.get("key"), line.get("value")) else {
                    return failure("put_result", "put_needs_key_and_value");
                };
                if !kvs_matches() {
                    return failure("put_result", "unknown_kvsname");
                }
                if key.len() > KEY_MAX_BYTES || value.len() > VALUE_MAX_BYTES {
                    return failure("put_result", "key_or_value_too_long");
                }
                let mut state = self.state();
                if state.key_values_bytes + key.len() + value.len() > KVS_MAX_BYTES {
                    return failure("put_result", "kvs_full");
                }
                state.key_values_bytes += key.len() + value.len();
                if let Some(old) = state.key_values.insert(key.to_string(), value.to_string()) {
                    state.key_values_bytes -= key.len() + old.len();
                }
                Some(
                    PmiLine::new("put_result")
                        .with("rc", 0)
                        .with("msg", "success"),
                )
            }
            "get" => {
                let Some(key) = line.get("key") else {
                    return failure("get_result", "get_needs_a_key");
                };
                if !kvs_matches() {
                    return failure("get_result", "unknown_kvsname");
                }
                let found = self.state().key_values.get(key).cloned().or_else(|| {
                    // MPICH clients read the rank-to-node map from this key.
                    (key == "PMI_process_mapping").then(|| self.process_mapping.clone())
                });
                Some(match found {
                    Some(value) => PmiLine::new("get_result")
                        .with("rc", 0)
                        .with("msg", "success")
                        .with("value", value),
                    None => PmiLine::new("get_result")
                        .with("rc", -1)
                        .with("msg", format!("key_{key}_not_found"))
                        .with("value", "unknown"),
                })
            }
            "barrier_in" => {
                let mut state = self.state();
                let epoch = state.barrier_epoch;
                state.barrier_arrived[rank as usize] = true;
                self.release_barrier_if_complete(&mut state);
                while state.barrier_epoch == epoch && !state.shutting_down {
                    state = self
                        .barrier_released
                        .wait(state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
                if state.barrier_epoch == epoch {
                    return None;
                }
                Some(PmiLine::new("barrier_out"))
            }
            "finalize" => {
                self.state().finalized[rank as usize] = true;
                Some(PmiLine::new("finalize_ack"))
            }
            "abort" => {
                let exit_code = line
                    .get("exitcode")
                    .and_then(|text| text.parse::<i32>().ok())
                    .unwrap_or(1);
                self.state().abort_requests.push(AbortRequest {
                    rank,
                    exit_code,
                    message: line.get("message").map(decode_text),
                });
                None
            }
            other => {
                eprintln!("mpiexec: rank {rank} sent an unsupported PMI command 'cmd={other}'");
                failure(&format!("{other}_result"), "unsupported_command")
            }
        }
    }
}

fn lock_writer(writer: &SharedWriter) -> MutexGuard<'_, Box<dyn Write + Send>> {
    // A thread cannot panic while holding the lock (panic = abort).
    writer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn server(rank_count: u32, kvs_name: &str) -> Arc<PmiServer> {
        PmiServer::new(
            rank_count,
            kvs_name.to_string(),
            format!("(vector,(0,1,{rank_count}))"),
        )
    }

    fn request(server: &PmiServer, rank: u32, text: &str) -> Option<String> {
        server
            .handle_line(rank, &PmiLine::parse(text).unwrap())
            .map(|reply| reply.encode().trim_end().to_string())
    }

    #[test]
    fn replies_match_hydra() {
        let server = server(2, "kvs_test");
        let cases = [
            (
                "cmd=init pmi_version=1 pmi_subversion=1",
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
            ),
            (
                "cmd=get_maxes",
                "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
            ),
            ("cmd=get_appnum", "cmd=appnum appnum=0"),
            ("cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_test"),
            ("cmd=get_universe_size", "cmd=universe_size size=2"),
            (
                "cmd=put kvsname=kvs_test key=k value=a=b",
                "cmd=put_result rc=0 msg=success",
            ),
            (
                "cmd=get kvsname=kvs_test key=k",
                "cmd=get_result rc=0 msg=success value=a=b",
            ),
            (
                "cmd=get kvsname=kvs_test key=none",
                "cmd=get_result rc=-1 msg=key_none_not_found value=unknown",
            ),
            (
                "cmd=get kvsname=kvs_test key=PMI_process_mapping",
                "cmd=get_result rc=0 msg=success value=(vector,(0,1,2))",
            ),
            (
                "cmd=get kvsname=other key=k",
                "cmd=get_result rc=-1 msg=unknown_kvsname",
            ),
            ("cmd=finalize", "cmd=finalize_ack"),
        ];
        for (sent, expected) in cases {
            assert_eq!(
                request(&server, 0, sent).as_deref(),
                Some(expected),
                "{sent}"
            );
        }
        let state = server.state();
        assert!(state.initialized[0] && state.finalized[0]);
        assert!(!state.initialized[1] && !state.finalized[1]);
    }

    #[test]
    fn names_are_published_looked_up_and_withdrawn_at_once_across_ranks() {
        let server = server(2, "kvs_test").with_universe_size(6);
        let cases = [
            (0, "cmd=get_universe_size", "cmd=universe_size size=6"),
            (
                1,
                "cmd=lookup_name service=s",
                "cmd=lookup_result rc=-1 msg=service_not_published",
            ),
            (
                0,
                "cmd=publish_name service=s port=resmpi-port:j:0:1",
                "cmd=publish_result rc=0 msg=success",
            ),
            (
                1,
                "cmd=publish_name service=s port=other",
                "cmd=publish_result rc=-1 msg=service_already_published",
            ),
            (
                1,
                "cmd=lookup_name service=s",
                "cmd=lookup_result rc=0 msg=success port=resmpi-port:j:0:1",
            ),
            (
                1,
                "cmd=unpublish_name service=s",
                "cmd=unpublish_result rc=0 msg=success",
            ),
            (
                0,
                "cmd=unpublish_name service=s",
                "cmd=unpublish_result rc=-1 msg=service_not_published",
            ),
            (
                0,
                "cmd=lookup_name",
                "cmd=lookup_result rc=-1 msg=a_service_name_is_needed",
            ),
        ];
        for (rank, sent, expected) in cases {
            assert_eq!(
                request(&server, rank, sent).as_deref(),
                Some(expected),
                "{sent}"
            );
        }
    }

    #[test]
    fn puts_past_the_limits_are_refused() {
        let server = server(1, "k");
        let long_value = "v".repeat(VALUE_MAX_BYTES + 1);
        let reply = request(
            &server,
            0,
            &format!("cmd=put kvsname=k key=x value={long_value}"),
        );
        assert!(reply.unwrap().contains("rc=-1"));
        let long_key = "k".repeat(KEY_MAX_BYTES + 1);
        let reply = request(
            &server,
            0,
            &format!("cmd=put kvsname=k key={long_key} value=v"),
        );
        assert!(reply.unwrap().contains("rc=-1"));
    }

    #[test]
    fn abort_is_recorded_and_not_answered() {
        let server = server(2, "k");
        assert_eq!(
            request(&server, 1, "cmd=abort exitcode=7 message=bad%20input%3D2"),
            None
        );
        assert_eq!(
            server.state().abort_requests,
            vec![AbortRequest {
                rank: 1,
                exit_code: 7,
                message: Some("bad input=2".to_string())
            }]
        );
    }

    /// A thread per rank of `ranks` entering the barrier, returned once
    /// all of them are in it.
    fn barrier_waiters(
        server: &Arc<PmiServer>,
        ranks: std::ops::Range<u32>,
    ) -> Vec<thread::JoinHandle<Option<String>>> {
        let count = ranks.len() as u32;
        let waiters = ranks
            .map(|rank| {
                let server = server.clone();
                thread::spawn(move || request(&server, rank, "cmd=barrier_in"))
            })
            .collect();
        while server.state().barrier_waiting_count() < count {
            thread::sleep(Duration::from_millis(1));
        }
        waiters
    }

    #[test]
    fn barrier_releases_only_when_every_rank_arrived_and_is_reusable() {
        let server = server(3, "k");
        for _round in 0..2 {
            let waiters = barrier_waiters(&server, 0..2);
            assert!(waiters.iter().all(|waiter| !waiter.is_finished()));
            assert_eq!(
                request(&server, 2, "cmd=barrier_in").as_deref(),
                Some("cmd=barrier_out")
            );
            for waiter in waiters {
                assert_eq!(waiter.join().unwrap().as_deref(), Some("cmd=barrier_out"));
            }
        }
    }

    #[test]
    fn a_barrier_stops_waiting_for_an_excused_process() {
        let server = server(3, "k");
        let waiters = barrier_waiters(&server, 0..2);
        assert!(waiters.iter().all(|waiter| !waiter.is_finished()));
        server.excuse(2);
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap().as_deref(), Some("cmd=barrier_out"));
        }
        // The next barrier needs only the two left.
        let other = barrier_waiters(&server, 0..1).remove(0);
        assert_eq!(
            request(&server, 1, "cmd=barrier_in").as_deref(),
            Some("cmd=barrier_out")
        );
        assert_eq!(other.join().unwrap().as_deref(), Some("cmd=barrier_out"));
    }

    #[test]
    fn shutdown_releases_barrier_waiters_without_a_reply() {
        let server = server(2, "k");
        let waiter = barrier_waiters(&server, 0..1).remove(0);
        server.shut_down();
        assert_eq!(waiter.join().unwrap(), None);
    }

    #[test]
    fn serve_answers_over_a_socket_and_notes_the_close() {
        let server = server(1, "k");
        let (client, server_end) = UnixStream::pair().unwrap();
        let thread = {
            let server = server.clone();
            thread::spawn(move || server.serve(0, server_end))
        };
        let mut client_writer = &client;
        client_writer
            .write_all(b"cmd=init pmi_version=1 pmi_subversion=1\nnot a pmi line\ncmd=finalize\n")
            .unwrap();
        let mut received = String::new();
        let mut reader = &client;
        let mut buffer = [0u8; 1024];
        while received.matches('\n').count() < 3 {
            let count = reader.read(&mut buffer).unwrap();
            received.push_str(std::str::from_utf8(&buffer[..count]).unwrap());
        }
        assert!(received.starts_with("cmd=response_to_init"), "{received}");
        assert!(received.contains("cmd=error rc=-1"), "{received}");
        assert!(received.ends_with("cmd=finalize_ack\n"), "{received}");
        drop(client);
        thread.join().unwrap();
        assert!(server.state().connection_closed[0]);
    }

    /// A rank's end of a served socketpair connection.
    fn served(server: &Arc<PmiServer>, rank: u32) -> (UnixStream, thread::JoinHandle<()>) {
        let (client, server_end) = UnixStream::pair().unwrap();
        let server = server.clone();
        let thread = thread::spawn(move || server.serve(rank, server_end));
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        (client, thread)
    }

    /// Reads exactly `count` lines (fails the test after 10 s).
    fn read_lines(mut client: &UnixStream, count: usize) -> Vec<String> {
        let mut received = String::new();
        let mut byte = [0u8; 1];
        while received.matches('\n').count() < count {
            assert_eq!(
                client.read(&mut byte).unwrap(),
                1,
                "closed after {received:?}"
            );
            received.push(byte[0] as char);
        }
        received.lines().map(str::to_string).collect()
    }

    /// Nothing arrives within `wait_ms`.
    fn assert_silent(mut client: &UnixStream, wait_ms: u64) {
        client
            .set_read_timeout(Some(Duration::from_millis(wait_ms)))
            .unwrap();
        let mut buffer = [0u8; 256];
        match client.read(&mut buffer) {
            Err(error) => assert!(
                matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{error}"
            ),
            Ok(count) => panic!(
                "expected nothing, got {:?}",
                String::from_utf8_lossy(&buffer[..count])
            ),
        }
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
    }

    fn watch(mut client: &UnixStream) {
        client.write_all(b"cmd=resmpi_watch_failures\n").unwrap();
    }

    #[test]
    fn a_watching_rank_gets_the_exact_notice_of_a_death_once() {
        let server = server(3, "k");
        let (client, _thread) = served(&server, 0);
        (&client)
            .write_all(b"cmd=init pmi_version=1 pmi_subversion=1\n")
            .unwrap();
        watch(&client);
        let lines = read_lines(&client, 2);
        assert!(lines[0].starts_with("cmd=response_to_init"), "{lines:?}");
        assert_eq!(lines[1], "cmd=resmpi_watch_failures_ok");
        assert_eq!(
            server.report_deaths(&[2]),
            DeathReport {
                newly_dead: vec![2],
                notice_count: 1
            }
        );
        assert_eq!(
            read_lines(&client, 1),
            ["cmd=resmpi_failure rank=2 incarnation=0"]
        );
        assert_eq!(server.report_deaths(&[2]), DeathReport::default());
        assert_silent(&client, 50);
        assert_eq!(server.notices_sent_count(), 1);
        assert_eq!(server.dead_ranks(), [2]);
        // The connection still answers requests after subscribing.
        (&client).write_all(b"cmd=finalize\n").unwrap();
        assert_eq!(read_lines(&client, 1), ["cmd=finalize_ack"]);
    }

    #[test]
    fn a_rank_watching_after_deaths_gets_the_backlog_in_order() {
        let server = server(4, "k");
        let (client, _thread) = served(&server, 0);
        assert_eq!(server.report_deaths(&[3]).notice_count, 0);
        assert_eq!(server.report_deaths(&[1]).notice_count, 0);
        watch(&client);
        assert_eq!(
            read_lines(&client, 3),
            [
                "cmd=resmpi_watch_failures_ok",
                "cmd=resmpi_failure rank=3 incarnation=0",
                "cmd=resmpi_failure rank=1 incarnation=0",
            ]
        );
        assert_eq!(server.notices_sent_count(), 2);
        server.report_deaths(&[2]);
        assert_eq!(
            read_lines(&client, 1),
            ["cmd=resmpi_failure rank=2 incarnation=0"]
        );
        assert_eq!(server.notices_sent_count(), 3);
    }

    #[test]
    fn the_dead_rank_is_never_told_of_its_own_death() {
        let server = server(3, "k");
        let (dying, _dying_thread) = served(&server, 1);
        let (survivor, _survivor_thread) = served(&server, 0);
        watch(&dying);
        watch(&survivor);
        assert_eq!(read_lines(&dying, 1), ["cmd=resmpi_watch_failures_ok"]);
        assert_eq!(read_lines(&survivor, 1), ["cmd=resmpi_watch_failures_ok"]);
        assert_eq!(server.report_deaths(&[1]).notice_count, 1);
        assert_eq!(
            read_lines(&survivor, 1),
            ["cmd=resmpi_failure rank=1 incarnation=0"]
        );
        assert_silent(&dying, 100);
        // Nor in a backlog: rank 2 subscribes after its own death and rank 1's.
        server.report_deaths(&[2]);
        let (late, _late_thread) = served(&server, 2);
        watch(&late);
        assert_eq!(
            read_lines(&late, 2),
            [
                "cmd=resmpi_watch_failures_ok",
                "cmd=resmpi_failure rank=1 incarnation=0"
            ]
        );
        assert_silent(&late, 50);
    }

    #[test]
    fn notices_and_replies_never_interleave_within_a_line() {
        const RANK_COUNT: u32 = 64;
        const REQUEST_COUNT: usize = 300;
        let server = server(RANK_COUNT, "k");
        let (client, _thread) = served(&server, 0);
        watch(&client);
        assert_eq!(read_lines(&client, 1), ["cmd=resmpi_watch_failures_ok"]);
        let reader = {
            let client = client.try_clone().unwrap();
            thread::spawn(move || read_lines(&client, REQUEST_COUNT + RANK_COUNT as usize - 1))
        };
        let reporter = {
            let server = server.clone();
            thread::spawn(move || {
                for rank in 1..RANK_COUNT {
                    server.report_deaths(&[rank]);
                }
            })
        };
        for _ in 0..REQUEST_COUNT {
            (&client).write_all(b"cmd=get_universe_size\n").unwrap();
        }
        reporter.join().unwrap();
        let lines = reader.join().unwrap();
        let mut notified: Vec<u32> = Vec::new();
        for line in &lines {
            if line == "cmd=universe_size size=64" {
                continue;
            }
            let rank = line
                .strip_prefix("cmd=resmpi_failure rank=")
                .and_then(|rest| rest.strip_suffix(" incarnation=0"))
                .and_then(|rank| rank.parse().ok())
                .unwrap_or_else(|| panic!("a torn or unknown line: {line:?}"));
            notified.push(rank);
        }
        assert_eq!(notified, (1..RANK_COUNT).collect::<Vec<_>>());
    }

    #[test]
    fn deaths_seen_together_go_out_in_one_batch_each_once() {
        let server = server(5, "k");
        let (client, _thread) = served(&server, 3);
        watch(&client);
        read_lines(&client, 1);
        let report = server.report_deaths(&[1, 3, 2, 1]);
        assert_eq!(report.newly_dead, [1, 3, 2]);
        assert_eq!(report.notice_count, 2);
        assert_eq!(
            read_lines(&client, 2),
            [
                "cmd=resmpi_failure rank=1 incarnation=0",
                "cmd=resmpi_failure rank=2 incarnation=0"
            ]
        );
        assert_eq!(server.report_deaths(&[2, 4]).newly_dead, [4]);
        assert_eq!(
            read_lines(&client, 1),
            ["cmd=resmpi_failure rank=4 incarnation=0"]
        );
        assert_eq!(server.dead_ranks(), [1, 3, 2, 4]);
    }

    #[test]
    fn deaths_during_teardown_and_closed_watchers_get_no_notice() {
        let server = server(3, "k");
        let (closing, closing_thread) = served(&server, 0);
        let (open, _open_thread) = served(&server, 1);
        watch(&closing);
        watch(&open);
        read_lines(&closing, 1);
        read_lines(&open, 1);
        drop(closing);
        closing_thread.join().unwrap();
        assert_eq!(server.report_deaths(&[2]).notice_count, 1);
        read_lines(&open, 1);
        server.shut_down();
        assert_eq!(server.report_deaths(&[0]), DeathReport::default());
        assert_silent(&open, 50);
        assert_eq!(server.dead_ranks(), [2]);
    }

    #[test]
    fn a_respawned_rank_announces_its_rejoin_to_the_live_watchers_and_dies_as_its_new_incarnation()
    {
        let server = server(4, "k");
        let (zero, _zero_thread) = served(&server, 0);
        let (one, _one_thread) = served(&server, 1);
        for client in [&zero, &one] {
            watch(client);
            assert_eq!(read_lines(client, 1), ["cmd=resmpi_watch_failures_ok"]);
        }
        server.report_deaths(&[3]);
        for client in [&zero, &one] {
            assert_eq!(
                read_lines(client, 1),
                ["cmd=resmpi_failure rank=3 incarnation=0"]
            );
        }
        assert_eq!(server.prepare_respawn(3), 1);
        let (mut replacement, _replacement_thread) = served(&server, 3);
        // An announcement for another incarnation is refused, and nobody hears of it.
        replacement
            .write_all(b"cmd=resmpi_rejoin incarnation=2 address=127.0.0.1:5\n")
            .unwrap();
        assert_eq!(
            read_lines(&replacement, 1),
            ["cmd=resmpi_rejoin_ok rc=-1 msg=not_the_current_incarnation_of_this_rank"]
        );
        assert_silent(&zero, 50);
        replacement
            .write_all(b"cmd=resmpi_rejoin incarnation=1 address=127.0.0.1:5\n")
            .unwrap();
        // Rank 2 never watched: it is not told and not listed.
        assert_eq!(
            read_lines(&replacement, 1),
            ["cmd=resmpi_rejoin_ok rc=0 peers=0:0,1:0"]
        );
        for client in [&zero, &one] {
            assert_eq!(
                read_lines(client, 1),
                ["cmd=resmpi_rejoin rank=3 incarnation=1 address=127.0.0.1:5"]
            );
        }
        // The replaced process's death is no news to the replacement.
        watch(&replacement);
        assert_eq!(
            read_lines(&replacement, 1),
            ["cmd=resmpi_watch_failures_ok"]
        );
        assert_silent(&replacement, 50);
        assert_eq!(server.report_deaths(&[3]).newly_dead, vec![3]);
        for client in [&zero, &one] {
            assert_eq!(
                read_lines(client, 1),
                ["cmd=resmpi_failure rank=3 incarnation=1"]
            );
        }
        assert_eq!(server.dead_ranks(), vec![3, 3]);
    }

    /// The server side of PMI lines (issue 16, item 7; `decoders_fuzz`):
    /// random and mutated byte streams from a rank, split into lines,
    /// parsed and answered as `serve` does (one rank, so a barrier never
    /// waits), then the FT reports put into the key-value space are decoded
    /// as mpiexec does at exit. Nothing panics, every line gets its answer
    /// or is refused, and the key-value space stays within its bound.
    #[test]
    fn decoders_fuzz_pmi_server_takes_random_and_mutated_streams() {
        use resmpi_fuzz_input::Inputs;
        let corpus: [&[u8]; 6] = [
            b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\n",
            b"cmd=put kvsname=kvs_fuzz key=resmpi-report-0 value=frames_sent=3;corrupt_caught=1\n",
            b"cmd=get kvsname=kvs_fuzz key=resmpi-card-0\ncmd=barrier_in\n",
            b"cmd=abort exitcode=7 message=a%20b\n",
            b"cmd=resmpi_watch_failures\ncmd=resmpi_rejoin incarnation=0 address=1.2.3.4:5\n",
            b"cmd=finalize\ncmd=nosuch x=y\n",
        ];
        let mut inputs = Inputs::new(23);
        let mut answered = 0usize;
        for round in 0..4_000 {
            let case = if round < corpus.len() {
                corpus[round].to_vec()
            } else {
                inputs.next_case(&corpus, 512)
            };
            let server = server(1, "kvs_fuzz");
            let sink: SharedWriter = Arc::new(Mutex::new(Box::new(Vec::<u8>::new())));
            server.serve_lines(0, &mut std::io::Cursor::new(&case), &sink);
            let reply = server
                .handle_line(0, &PmiLine::parse("cmd=get_appnum").unwrap())
                .expect("the server still answers");
            assert_eq!(reply.command, "appnum");
            answered += 1;
            let state = server.state();
            assert!(state.key_values_bytes <= KVS_MAX_BYTES);
            let key_values = state.key_values.clone();
            drop(state);
            let report = crate::ft_report::FtReport::collect(1, |key| key_values.get(key).cloned());
            assert!(report.ranks_reported <= 1);
        }
        assert_eq!(answered, 4_000);
    }
}
