//! The job: start every rank, watch them, decide when the job has failed,
//! tear it down, and choose mpiexec's exit code.
//!
//! One loop on the main thread (the thread that forked the ranks, which
//! `PR_SET_PDEATHSIG` is tied to) polls every [`POLL_INTERVAL_MS`]: signals
//! to mpiexec, the timeout, the kills `--inject` scheduled, abort requests
//! from the PMI server, and exited ranks. The first failure decides the exit
//! code; later deaths caused by teardown are not reported.
//!
//! What a failure does depends on the failure policy. Under `abort` (the
//! default) the first death ends the job, exactly as before policies
//! existed. Under `continue` a death is named on stderr and the job goes on
//! until every rank has ended (or MPI_Abort, a signal to mpiexec, or the
//! timeout ends it). Under both, every death is written at once, from this
//! loop, as a failure notice to every rank that watches failures (see
//! `pmi_server`): the poll period bounds how late a survivor hears of it.
//!
//! A rank on another host is watched through its launcher process (`ssh`),
//! whose exit is judged like a local rank's, and through its TCP PMI
//! connection: one that drops before `MPI_Finalize` while the launcher
//! process lingers ends the job after [`CONNECTION_LOST_GRACE_MS`].

use std::io::{self, IsTerminal};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use resmpi_runtime::{hex_encode, random_bytes};

use crate::ft_report::{FtReport, LauncherCounters};
use crate::hosts::{first_non_loopback_ipv4, is_this_host, this_host_name, Placement};
use crate::options::{FailurePolicy, Options};
use crate::output::{self, Destination};
use crate::pmi_server::PmiServer;
use crate::process_faults::KillSchedule;
use crate::shm_cleanup::{remove_job_segments, SHM_DIRECTORY};
use crate::signals;
use crate::spawn::{self, JobIdentity, RankSite, RemoteSite, StandardInput};

/// How often the loop looks at the ranks; with the write of the notices, the
/// most a survivor waits to hear of a death on this host.
const POLL_INTERVAL_MS: u64 = 10;
/// Grace between SIGTERM and SIGKILL at teardown.
const TERMINATE_GRACE_MS: u64 = 1000;
/// How long to wait for a dead rank's PMI connection to be read to its end,
/// so an abort it sent just before dying is seen as an abort.
const PMI_DRAIN_WAIT_MS: u64 = 200;
/// How long to wait, at the end, for output of killed ranks to drain.
const OUTPUT_DRAIN_WAIT_MS: u64 = 2000;
/// How long a remote rank's launcher process may outlive the rank's PMI
/// connection (closed before finalize) before the rank counts as lost; in
/// that time a launcher usually exits with the rank's own exit code.
const CONNECTION_LOST_GRACE_MS: u64 = 1000;
/// How long an abort request waits for a rank death that may have caused it.
const ABORT_SETTLE_MS: u64 = 50;

/// Exit code when `--timeout` expires (as `timeout(1)`).
pub const EXIT_TIMED_OUT: i32 = 124;
/// Exit code when the program cannot be started (as a shell).
pub const EXIT_CANNOT_RUN: i32 = 127;
/// Exit code for an internal failure of mpiexec (no pipes, no sockets).
pub const EXIT_LAUNCHER_FAILURE: i32 = 1;

/// How a rank ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Code(i32),
    Signal(i32),
}

struct RankProcess {
    /// The rank's pid, or its launcher's for a remote rank.
    pid: i32,
    ending: Option<Ending>,
    /// The host of a remote rank; `None` on this host.
    host: Option<String>,
    /// When its PMI connection was first seen closed before finalize.
    connection_lost_at: Option<Instant>,
    /// Under `continue`: its death was recorded and named already.
    failed: bool,
    /// When `--inject` sent it SIGKILL.
    killed_at: Option<Instant>,
}

struct Job {
    server: Arc<PmiServer>,
    placement: Placement,
    /// `PMI_PORT` for remote ranks (`address:port`), when there are any.
    pmi_port: Option<String>,
    ranks: Vec<RankProcess>,
    /// Set by the first failure, or by the first non-zero exit after finalize.
    exit_code: Option<i32>,
    /// Under `continue`: the code of the first death the job went on after.
    first_death_code: Option<i32>,
    /// Under `continue`: the code of what ended the job early (timeout,
    /// signal, MPI_Abort, a wire-up that cannot complete).
    job_ended_code: Option<i32>,
    output_threads: Vec<JoinHandle<()>>,
    policy: FailurePolicy,
    /// The kills `--inject` asked mpiexec to carry out.
    kills: KillSchedule,
    /// Longest time from an injected SIGKILL to its notices being written.
    detection_latency_max: Duration,
    /// Per rank: how many times `--respawn` started it again.
    respawn_counts: Vec<u32>,
}

/// Runs the job `options` describes; returns mpiexec's exit code.
pub fn run(options: &Options) -> i32 {
    signals::install();
    signals::install_child_wakeup();
    raise_descriptor_limit();
    let identity = JobIdentity {
        job_id: hex_encode(&random_bytes(8)),
        job_secret_hex: hex_encode(&random_bytes(32)),
        library_path: library_path(options),
        pmi_token: hex_encode(&random_bytes(16)),
    };
    let placement = match &options.hosts {
        None => Placement::single_host(options.rank_count),
        Some(hosts) => {
            let host_name = this_host_name();
            Placement::new(hosts, options.ranks_per_host, options.rank_count, |name| {
                is_this_host(name, &host_name)
            })
        }
    };
    let kills = {
        let host_name = this_host_name();
        KillSchedule::new(&options.process_faults, &placement, |name| {
            is_this_host(name, &host_name)
        })
    };
    let kills = match kills {
        Ok(kills) => kills,
        Err(message) => {
            eprintln!("mpiexec: {message}");
            return crate::EXIT_USAGE;
        }
    };
    let server = PmiServer::new(
        options.rank_count,
        format!("kvs_{}", identity.job_id),
        placement.process_mapping(),
    );
    let pmi_port = if placement.has_remote() {
        match listen_for_remote_ranks(options, &server, &placement, &identity) {
            Ok(address) => Some(address),
            Err(message) => {
                eprintln!("mpiexec: {message}");
                report_fault_tolerance(options, &server, Duration::ZERO, EXIT_LAUNCHER_FAILURE);
                return EXIT_LAUNCHER_FAILURE;
            }
        }
    } else {
        None
    };
    let mut job = Job {
        server,
        placement,
        pmi_port,
        ranks: Vec::new(),
        exit_code: None,
        first_death_code: None,
        job_ended_code: None,
        output_threads: Vec::new(),
        policy: options.failure_policy,
        kills,
        detection_latency_max: Duration::ZERO,
        respawn_counts: vec![0; options.rank_count as usize],
    };
    let started = job.start_ranks(options, &identity);
    if started.is_ok() {
        job.supervise(options, &identity);
    } else {
        job.tear_down();
    }
    job.finish(&identity.job_id);
    let code = match started {
        Ok(()) => job.final_exit_code(),
        Err(code) => code,
    };
    report_fault_tolerance(options, &job.server, job.detection_latency_max, code);
    code
}

/// The end-of-job FT report: sums what ranks put under
/// `resmpi-report-<rank>`, adds mpiexec's own failure counters, prints it
/// when a rank's counter is non-zero or an FT option was given, and writes
/// `--report-json`. A report that cannot be written is named on stderr; it
/// does not change the exit code.
fn report_fault_tolerance(
    options: &Options,
    server: &PmiServer,
    detection_latency_max: Duration,
    exit_code: i32,
) {
    let mut report = {
        let state = server.state();
        FtReport::collect(options.rank_count, |key| {
            state.key_value(key).map(str::to_string)
        })
    };
    report.launcher = LauncherCounters {
        processes_lost: server.dead_ranks().len() as u64,
        failure_notices_sent: server.notices_sent_count(),
        detection_latency_us_max: detection_latency_max.as_micros() as u64,
    };
    if report.any_nonzero() || options.ft_options_given {
        eprintln!("{}", report.line());
    }
    if let Some(path) = &options.report_json {
        if let Err(error) = report.write_json(path, exit_code) {
            eprintln!(
                "mpiexec: --report-json: cannot write {}: {error}",
                path.display()
            );
        }
    }
}

/// Opens the TCP PMI port on the control address and accepts remote ranks'
/// connections on a thread; returns `PMI_PORT` (`address:port`).
fn listen_for_remote_ranks(
    options: &Options,
    server: &Arc<PmiServer>,
    placement: &Placement,
    identity: &JobIdentity,
) -> Result<String, String> {
    let address: SocketAddr = match &options.control_address {
        Some(text) => {
            let with_port = match text.parse::<std::net::IpAddr>() {
                Ok(ip) => SocketAddr::new(ip, 0).to_string(),
                Err(_) if text.contains(':') => text.clone(),
                Err(_) => format!("{text}:0"),
            };
            with_port
                .to_socket_addrs()
                .ok()
                .and_then(|mut addresses| addresses.next())
                .ok_or_else(|| format!("--control-addr '{text}': cannot resolve it"))?
        }
        None => SocketAddr::new(
            first_non_loopback_ipv4()
                .ok_or("this host has no non-loopback IPv4 address for remote ranks to reach mpiexec at; give --control-addr")?
                .into(),
            0,
        ),
    };
    let listener = TcpListener::bind(address)
        .map_err(|error| format!("cannot listen for remote ranks on {address}: {error}"))?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("cannot listen for remote ranks on {address}: {error}"))?;
    let remote: Vec<bool> = (0..options.rank_count)
        .map(|rank| !placement.host(rank).local)
        .collect();
    let accepted = Arc::new(move |rank: u32| remote.get(rank as usize) == Some(&true));
    let server = server.clone();
    let token = identity.pmi_token.clone();
    thread::spawn(move || server.accept_tcp(listener, accepted, token));
    Ok(bound.to_string())
}

/// `LD_LIBRARY_PATH` for the ranks: our `lib` directory first, then what
/// `-genv`/`-x` gave, else what mpiexec itself has.
fn library_path(options: &Options) -> String {
    let existing = options
        .environment
        .iter()
        .rev()
        .find(|(name, _)| name == "LD_LIBRARY_PATH")
        .map(|(_, value)| value.clone())
        .or_else(|| std::env::var("LD_LIBRARY_PATH").ok());
    match spawn::library_directory() {
        Some(directory) => spawn::prepend_path(&directory, existing.as_deref()),
        None => existing.unwrap_or_default(),
    }
}

/// Each rank costs the launcher three descriptors; lift the soft limit to
/// the hard one so large jobs do not fail on the default 1024.
fn raise_descriptor_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the local `limit`.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn decode_wait_status(status: i32) -> Option<Ending> {
    if libc::WIFEXITED(status) {
        Some(Ending::Code(libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        Some(Ending::Signal(libc::WTERMSIG(status)))
    } else {
        None
    }
}

/// Sends `signal` to the process group led by `pid` (the rank and anything it
/// started), and to the rank itself in case it left its group.
fn signal_rank(pid: i32, signal: i32) {
    // SAFETY: kill has no memory effects; `pid` is a rank we started, and its
    // process group id cannot be reused while any member lives.
    unsafe {
        libc::kill(-pid, signal);
        libc::kill(pid, signal);
    }
}

impl Job {
    fn start_ranks(&mut self, options: &Options, identity: &JobIdentity) -> Result<(), i32> {
        let stdin_is_terminal = io::stdin().is_terminal();
        for rank in 0..options.rank_count {
            let standard_input = match (rank, stdin_is_terminal) {
                (0, false) => StandardInput::Inherit,
                (0, true) => StandardInput::Pipe,
                _ => StandardInput::Null,
            };
            let process = self.start_rank(options, identity, rank, 0, standard_input)?;
            self.ranks.push(process);
        }
        Ok(())
    }

    /// `--respawn`: starts every dead rank on this host again that has
    /// respawns left, as the next incarnation of that rank.
    fn respawn_dead(&mut self, options: &Options, identity: &JobIdentity) {
        if options.respawn_count_max == 0 {
            return;
        }
        for rank in 0..self.ranks.len() {
            let process = &self.ranks[rank];
            let due = process.failed
                && process.ending.is_some()
                && process.host.is_none()
                && self.respawn_counts[rank] < options.respawn_count_max;
            if !due {
                continue;
            }
            self.respawn_counts[rank] += 1;
            let rank = rank as u32;
            let incarnation = self.server.prepare_respawn(rank);
            match self.start_rank(options, identity, rank, incarnation, StandardInput::Null) {
                Ok(process) => {
                    eprintln!(
                        "mpiexec: rank {rank} started again as incarnation {incarnation} (pid {}, --respawn)",
                        process.pid
                    );
                    self.ranks[rank as usize] = process;
                }
                Err(_) => eprintln!(
                    "mpiexec: rank {rank} could not be started again; the job goes on without it"
                ),
            }
        }
    }

    /// Starts incarnation `incarnation` of `rank` and forwards its output
    /// and PMI connection.
    fn start_rank(
        &mut self,
        options: &Options,
        identity: &JobIdentity,
        rank: u32,
        incarnation: u32,
        standard_input: StandardInput,
    ) -> Result<RankProcess, i32> {
        {
            let host = self.placement.host(rank);
            let remote = (!host.local).then(|| RemoteSite {
                host: &host.name,
                pmi_port: self.pmi_port.as_deref().unwrap_or(""),
            });
            let site = RankSite {
                local_numbers: self.placement.local_numbers(rank),
                remote,
            };
            let host_name = site.remote.as_ref().map(|remote| remote.host.to_string());
            let sockets = if site.remote.is_none() {
                Some(UnixStream::pair().map_err(|error| {
                    eprintln!("mpiexec: cannot create the PMI socket for rank {rank}: {error}");
                    EXIT_LAUNCHER_FAILURE
                })?)
            } else {
                None
            };
            let mut child: Child = spawn::spawn_rank(
                options,
                identity,
                rank,
                incarnation,
                &site,
                sockets.as_ref().map(|(_, rank_end)| rank_end),
                standard_input,
            )
            .map_err(|error| {
                let reason = match error.kind() {
                    io::ErrorKind::NotFound => "no such file or command".to_string(),
                    io::ErrorKind::PermissionDenied => {
                        "permission denied (is it executable?)".to_string()
                    }
                    _ => error.to_string(),
                };
                match &host_name {
                    Some(host) => eprintln!(
                        "mpiexec: cannot run the launcher '{}' for rank {rank} on host {host}: {reason}",
                        options.launcher_exec
                    ),
                    None => eprintln!("mpiexec: cannot run '{}': {reason}", options.program),
                }
                EXIT_CANNOT_RUN
            })?;
            let launcher_end = sockets.map(|(launcher_end, _)| launcher_end);
            let prefix = if options.tag_output {
                format!("[{rank}] ")
            } else {
                String::new()
            };
            if let Some(stdout) = child.stdout.take() {
                let prefix = prefix.clone();
                self.output_threads.push(thread::spawn(move || {
                    output::forward(stdout, Destination::Stdout, &prefix)
                }));
            }
            if let Some(stderr) = child.stderr.take() {
                self.output_threads.push(thread::spawn(move || {
                    output::forward(stderr, Destination::Stderr, &prefix)
                }));
            }
            if let Some(mut rank_stdin) = child.stdin.take() {
                // Not joined: it may sit in a read of the terminal forever.
                thread::spawn(move || {
                    let _ = io::copy(&mut io::stdin().lock(), &mut rank_stdin);
                });
            }
            if let Some(launcher_end) = launcher_end {
                let server = self.server.clone();
                thread::spawn(move || server.serve(rank, launcher_end));
            }
            Ok(RankProcess {
                pid: child.id() as i32,
                ending: None,
                host: host_name,
                connection_lost_at: None,
                failed: false,
                killed_at: None,
            })
        }
    }

    /// `rank R (pid P)`, or `rank R on host H (launcher pid P)`.
    fn describe(&self, rank: u32) -> String {
        let process = &self.ranks[rank as usize];
        match &process.host {
            Some(host) => format!("rank {rank} on host {host} (launcher pid {})", process.pid),
            None => format!("rank {rank} (pid {})", process.pid),
        }
    }

    /// A remote rank whose PMI connection closed before finalize, and whose
    /// launcher process has not exited within the grace period: lost.
    fn lost_connection(&mut self) -> bool {
        let now = Instant::now();
        let mut lost = None;
        {
            let state = self.server.state();
            for (rank, process) in self.ranks.iter_mut().enumerate() {
                if process.host.is_none()
                    || process.ending.is_some()
                    || process.failed
                    || !state.connection_closed[rank]
                    || !state.initialized[rank]
                    || state.finalized[rank]
                {
                    continue;
                }
                let since = *process.connection_lost_at.get_or_insert(now);
                if lost.is_none()
                    && now.duration_since(since) >= Duration::from_millis(CONNECTION_LOST_GRACE_MS)
                {
                    lost = Some(rank as u32);
                }
            }
        }
        let Some(rank) = lost else {
            return false;
        };
        let how =
            "lost its PMI connection before MPI_Finalize (the rank died or its host is unreachable)";
        self.notify_deaths(&[rank]);
        match self.policy {
            FailurePolicy::Abort => {
                let message = format!("{} {how}", self.describe(rank));
                self.fail(1, &message);
                true
            }
            FailurePolicy::Continue => {
                self.continue_without(rank, 1, how);
                // Its launcher lingers; the rank is gone for the job.
                signal_rank(self.ranks[rank as usize].pid, libc::SIGKILL);
                false
            }
        }
    }

    /// Under `continue`: names the death of `rank` (`how` it died), keeps
    /// the first failure's exit code, and lets the job go on.
    fn continue_without(&mut self, rank: u32, code: i32, how: &str) {
        let host = &self.placement.host(rank).name;
        eprintln!(
            "mpiexec: rank {rank} (host {host}) {how} \u{2014} the job continues (failure policy continue)"
        );
        self.first_death_code.get_or_insert(code);
        self.ranks[rank as usize].failed = true;
    }

    /// Writes the failure notices of `ranks` to every watching rank, and
    /// notes how long after an injected SIGKILL that happened.
    fn notify_deaths(&mut self, ranks: &[u32]) {
        if ranks.is_empty() {
            return;
        }
        let report = self.server.report_deaths(ranks);
        for rank in report.newly_dead {
            if let Some(killed_at) = self.ranks[rank as usize].killed_at {
                self.detection_latency_max = self.detection_latency_max.max(killed_at.elapsed());
            }
        }
    }

    /// Sends the SIGKILLs of `--inject kill:` and `host-down:` that are due
    /// `elapsed` after the ranks were started.
    fn carry_out_kills(&mut self, elapsed: Duration) {
        if self.kills.is_empty() {
            return;
        }
        for kill in self.kills.take_due(elapsed.as_nanos() as u64) {
            // One instant for a host's ranks: they go down together.
            let now = Instant::now();
            for rank in kill.ranks {
                let process = &mut self.ranks[rank as usize];
                if process.ending.is_some() || process.failed {
                    continue;
                }
                signal_rank(process.pid, libc::SIGKILL);
                process.killed_at.get_or_insert(now);
            }
        }
    }

    /// mpiexec's exit code once the job is over: under `abort`, the first
    /// failure's (or the first non-zero exit after finalize); under
    /// `continue`, what ended the job early, else the first death, else
    /// the first non-zero exit after finalize.
    fn final_exit_code(&self) -> i32 {
        self.job_ended_code
            .or(self.first_death_code)
            .or(self.exit_code)
            .unwrap_or(0)
    }

    /// Records the failure that ends the job: prints `message`, sets the
    /// exit code. Under `abort` only the first one counts (later ones are
    /// echoes of it); under `continue` the deaths before it were not
    /// failures of the job, so it is always named.
    fn fail(&mut self, code: i32, message: &str) {
        if self.policy == FailurePolicy::Continue {
            if self.job_ended_code.is_none() {
                eprintln!("mpiexec: {message}");
                self.job_ended_code = Some(code);
            }
            return;
        }
        if self.exit_code.is_none_or(|existing| existing == 0) {
            eprintln!("mpiexec: {message}");
            self.exit_code = Some(code);
        }
    }

    fn running_count(&self) -> usize {
        self.ranks
            .iter()
            .filter(|rank| rank.ending.is_none())
            .count()
    }

    /// Reaps every exited rank without blocking; returns (rank, ending).
    fn reap(&mut self) -> Vec<(u32, Ending)> {
        let mut reaped = Vec::new();
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes only to the local `status`.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            let Some(ending) = decode_wait_status(status) else {
                continue;
            };
            if let Some(rank) = self.ranks.iter().position(|rank| rank.pid == pid) {
                self.ranks[rank].ending = Some(ending);
                reaped.push((rank as u32, ending));
            }
        }
        reaped
    }

    /// Handles pending abort requests; true when the job must end.
    fn handle_aborts(&mut self) -> bool {
        let requests = std::mem::take(&mut self.server.state().abort_requests);
        let Some(request) = requests.first() else {
            return false;
        };
        let code = match request.exit_code & 0xff {
            0 => 1,
            code => code,
        };
        self.fail(
            code,
            &format!(
                "rank {} called MPI_Abort with code {}",
                request.rank, request.exit_code
            ),
        );
        if let Some(message) = &request.message {
            eprintln!("mpiexec: rank {} abort message: {message}", request.rank);
        }
        true
    }

    /// Waits (bounded) until the PMI connection of `rank` has been read to
    /// its end, so anything it sent before dying has been handled.
    fn drain_pmi_connection(&self, rank: u32) {
        let deadline = Instant::now() + Duration::from_millis(PMI_DRAIN_WAIT_MS);
        while !self.server.state().connection_closed[rank as usize] && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// How `rank`, which ended with `ending`, failed the job: (exit code,
    /// how it died); `None` when its end is no failure (after finalize, or
    /// a program that never spoke PMI ending with 0).
    fn failure_of(&self, rank: u32, ending: Ending) -> Option<(i32, String)> {
        let (initialized, finalized) = {
            let state = self.server.state();
            (
                state.initialized[rank as usize],
                state.finalized[rank as usize],
            )
        };
        match ending {
            Ending::Code(_) if finalized => None,
            Ending::Signal(signal) => Some((
                128 + signal,
                format!("killed by signal {signal} ({})", signals::name(signal)),
            )),
            // Under abort, the last rank to leave without finalize is let
            // go (as always); under continue every such exit is a death.
            Ending::Code(0)
                if initialized
                    && (self.policy == FailurePolicy::Continue || self.running_count() > 0) =>
            {
                Some((1, "exited with code 0 before MPI_Finalize".to_string()))
            }
            // A program that never spoke PMI (hostname, a script) may end
            // with 0 at any time; it only fails the job if others wait for
            // it in a barrier (checked by the loop).
            Ending::Code(0) => None,
            Ending::Code(code) => {
                Some((code, format!("exited with code {code} before MPI_Finalize")))
            }
        }
    }

    /// Judges one exited rank; true when the job must end.
    fn judge_exit(&mut self, rank: u32, ending: Ending) -> bool {
        if self.ranks[rank as usize].failed {
            return false;
        }
        if let Ending::Code(code) = ending {
            if self.server.state().finalized[rank as usize] {
                if code != 0 && self.exit_code.is_none() {
                    self.exit_code = Some(code);
                }
                return false;
            }
        }
        if ending != Ending::Code(0) {
            self.drain_pmi_connection(rank);
            let aborted = self
                .server
                .state()
                .abort_requests
                .iter()
                .any(|request| request.rank == rank);
            if aborted && self.handle_aborts() {
                return true;
            }
        }
        let Some((code, how)) = self.failure_of(rank, ending) else {
            return false;
        };
        match self.policy {
            FailurePolicy::Abort => {
                let message = format!("{} {how}", self.describe(rank));
                self.fail(code, &message);
                true
            }
            FailurePolicy::Continue => {
                self.continue_without(rank, code, &how);
                false
            }
        }
    }

    /// A rank that left without finalize while others wait in a barrier:
    /// the barrier can never complete.
    fn barrier_deadlock(&mut self) -> bool {
        let state = self.server.state();
        if state.barrier_waiting_count() == 0 {
            return false;
        }
        let gone = self
            .ranks
            .iter()
            .enumerate()
            .position(|(rank, process)| process.ending.is_some() && !state.finalized[rank]);
        let Some(rank) = gone else {
            return false;
        };
        drop(state);
        let who = self.describe(rank as u32);
        if self.ranks[rank].failed {
            // Under continue: a death during wire-up, which needs every rank.
            eprintln!(
                "mpiexec: {who} is gone while other ranks wait for it in a PMI barrier (MPI_Init), which cannot complete; ending the job"
            );
            return true;
        }
        self.fail(
            1,
            &format!("{who} exited with code 0 before MPI_Finalize while other ranks wait for it"),
        );
        true
    }

    fn supervise(&mut self, options: &Options, identity: &JobIdentity) {
        let started = Instant::now();
        let timeout = options.timeout_seconds.map(Duration::from_secs);
        loop {
            if let Some(signal) = signals::received() {
                self.fail(
                    128 + signal,
                    &format!("received {}, killing the job", signals::name(signal)),
                );
                break;
            }
            if let (Some(timeout), Some(seconds)) = (timeout, options.timeout_seconds) {
                if started.elapsed() >= timeout {
                    self.fail(EXIT_TIMED_OUT, &format!("job timed out after {seconds} s"));
                    break;
                }
            }
            self.carry_out_kills(started.elapsed());
            if !self.server.state().abort_requests.is_empty() {
                // Ranks often abort because a peer died: let that death be
                // seen first, so the report names the cause, not the echo.
                thread::sleep(Duration::from_millis(ABORT_SETTLE_MS));
                if self.judge_reaped() {
                    break;
                }
            }
            if self.handle_aborts() {
                break;
            }
            if self.judge_reaped() || self.barrier_deadlock() || self.lost_connection() {
                break;
            }
            self.respawn_dead(options, identity);
            if self.running_count() == 0 {
                return;
            }
            // A scheduled kill is not left waiting for the end of a period.
            let mut pause = Duration::from_millis(POLL_INTERVAL_MS);
            if let Some(due_ns) = self.kills.next_due_ns() {
                pause = pause.min(Duration::from_nanos(due_ns).saturating_sub(started.elapsed()));
            }
            // A death wakes it at once: the survivors' notice need not wait.
            signals::wait_for_child(pause);
        }
        self.tear_down();
    }

    /// Reaps exited ranks, notifies the watchers of the deaths among them
    /// (before anything else: judging may wait for a PMI connection to
    /// drain), and judges each; true when the job must end.
    fn judge_reaped(&mut self) -> bool {
        let mut reaped = self.reap();
        let dead: Vec<u32> = reaped
            .iter()
            .filter(|&&(rank, ending)| self.failure_of(rank, ending).is_some())
            .map(|&(rank, _)| rank)
            .collect();
        self.notify_deaths(&dead);
        // A rank that died on its own is the cause; one that aborted (maybe
        // because of that death) comes after it.
        {
            let state = self.server.state();
            reaped.sort_by_key(|(rank, _)| {
                state
                    .abort_requests
                    .iter()
                    .any(|request| request.rank == *rank)
            });
        }
        for (rank, ending) in reaped {
            if self.judge_exit(rank, ending) {
                return true;
            }
        }
        false
    }

    /// SIGTERM to every running rank's group, SIGKILL after the grace period.
    fn tear_down(&mut self) {
        self.server.shut_down();
        for rank in self.ranks.iter().filter(|rank| rank.ending.is_none()) {
            signal_rank(rank.pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_millis(TERMINATE_GRACE_MS);
        while self.running_count() > 0 && Instant::now() < deadline {
            self.reap();
            thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
        }
        for rank in self.ranks.iter().filter(|rank| rank.ending.is_none()) {
            signal_rank(rank.pid, libc::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_millis(TERMINATE_GRACE_MS * 5);
        while self.running_count() > 0 && Instant::now() < deadline {
            self.reap();
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// After the ranks: kill what they left in their process groups, let
    /// their output drain, remove the job's shm segments.
    fn finish(&mut self, job_id: &str) {
        for rank in &self.ranks {
            // SAFETY: as in `signal_rank`; only the group, the rank is reaped.
            unsafe {
                libc::kill(-rank.pid, libc::SIGKILL);
            }
        }
        let deadline = Instant::now() + Duration::from_millis(OUTPUT_DRAIN_WAIT_MS);
        while self
            .output_threads
            .iter()
            .any(|thread| !thread.is_finished())
            && Instant::now() < deadline
        {
            thread::sleep(Duration::from_millis(1));
        }
        for thread in std::mem::take(&mut self.output_threads) {
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
        remove_job_segments(Path::new(SHM_DIRECTORY), job_id);
    }
}
