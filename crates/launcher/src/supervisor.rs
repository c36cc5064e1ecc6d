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
//! A rank on another host is started, watched and signalled by that host's
//! proxy (`proxy`, `proxy_link`): its exit arrives as the proxy's report of
//! `waitpid`'s status and is judged exactly like a local rank's (same
//! messages, exit codes and notices). A proxy that is lost (its connection
//! closes, its launcher exits) takes every rank still running on its host
//! with it: they are counted as killed by SIGKILL, which is what the proxy
//! does to them when it loses mpiexec and what the kernel does when the
//! proxy dies.

use std::collections::HashMap;
use std::io::{self, IsTerminal};
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use resmpi_path::inject_spec::{ProcessFault, ProcessTarget};
use resmpi_runtime::{hex_encode, random_bytes};

use resmpi_msglog::event_logger::LoggerCounters;

use crate::event_logger::EventLoggerProcess;
use crate::ft_report::{FtReport, LauncherCounters};
use crate::hosts::{is_this_host, this_host_name, Placement};
use crate::options::{FailurePolicy, Options, ReplicaMasking};
use crate::output::{self, Destination};
use crate::pmi_server::PmiServer;
use crate::process_faults::KillSchedule;
use crate::proxy_link::{self, ProxyLink, RemoteExits, StartError};
use crate::proxy_protocol::Launch;
use crate::replicated_output::{self, RankOutput};
use crate::signals;
use crate::spawn::{self, JobIdentity, StandardInput};

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
/// How long, at the end, proxies' launchers may take to exit after their
/// connection was closed, before they are killed.
const LAUNCHER_EXIT_WAIT_MS: u64 = 2000;
/// How long an abort request waits for a rank death that may have caused it.
const ABORT_SETTLE_MS: u64 = 50;
/// Under `continue`, how long ranks that were inside MPI_Init's wire-up
/// when a process died get to come out of it (those that had finished
/// connecting to the dead do; the others wait for it until their connect
/// deadline) before the job is ended: a death during wire-up is not one
/// the library can survive.
const STARTUP_DEATH_GRACE_MS: u64 = 5_000;

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
    /// The rank's pid (on its own host, for a remote rank).
    pid: i32,
    /// Its incarnation (0 unless respawned).
    incarnation: u32,
    ending: Option<Ending>,
    /// The host of a remote rank; `None` on this host.
    host: Option<String>,
    /// The placement index of a remote rank's host, whose proxy runs it.
    proxy: Option<usize>,
    /// Under `continue`: its death was recorded and named already.
    failed: bool,
    /// When `--inject` sent it SIGKILL.
    killed_at: Option<Instant>,
}

struct Job {
    /// `-n`: ranks of the job (processes are `rank_count * replica_count`).
    rank_count: u32,
    /// `--replicas`: processes per rank.
    replica_count: u32,
    /// `--replica-masking`.
    replica_masking: ReplicaMasking,
    /// Per replica index: that replica of every rank was given up after
    /// one of its processes died (see [`Job::give_up_replica`]).
    replicas_given_up: Vec<bool>,
    /// Under `--replicas`, per rank: its stdout and stderr, fed by every
    /// replica, shown from one (`replicated_output`).
    replicated_outputs: Vec<[Arc<RankOutput>; 2]>,
    /// `--msglog`: the job's event logger, outside `MPI_COMM_WORLD`.
    event_logger: Option<EventLoggerProcess>,
    /// The reaper saw the event logger end, and how (it is started again
    /// when killed by a signal; an exit of its own is an error it found).
    event_logger_exited: Option<Ending>,
    server: Arc<PmiServer>,
    placement: Placement,
    /// Per placed host: its proxy (`None` for this host).
    proxies: Vec<Option<Arc<ProxyLink>>>,
    /// Per placed host: its proxy's loss was dealt with.
    proxy_loss_handled: Vec<bool>,
    /// Exits of remote ranks, as their proxies reported them.
    remote_exits: RemoteExits,
    /// `--replica-recovery now`: the socket forked replicas connect to
    /// (removed with the job).
    fork_socket: Option<crate::replica_recovery::ForkSocket>,
    /// Processes reaped that no rank owned: a forked replica reaped
    /// before its forker's announcement was adopted.
    orphan_endings: std::collections::HashMap<i32, Ending>,
    /// mpiexec's `RESMPI_*` configuration, passed on to remote ranks.
    forwarded: Vec<(String, String)>,
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
    /// `--msglog`: per rank stream, how much its incarnations have shown.
    replay_output: Option<std::sync::Arc<output::OutputLedger>>,
    /// Under `continue`: a death while other ranks were inside MPI_Init's
    /// wire-up (see [`STARTUP_DEATH_GRACE_MS`]), until they are out of it.
    startup_death: Option<StartupDeath>,
}

/// A death during other ranks' wire-up, being watched.
struct StartupDeath {
    /// When the death was judged.
    at: Instant,
    /// The dead process's exit code, and what the job's end will say.
    code: i32,
    who: String,
    /// The ranks that were inside wire-up then.
    starting: Vec<u32>,
}

/// Runs the job `options` describes; returns mpiexec's exit code.
pub fn run(options: &Options) -> i32 {
    signals::install();
    signals::install_child_wakeup();
    raise_descriptor_limit();
    if let Err(problem) = check_replication_library(options) {
        eprintln!("mpiexec: {problem}");
        return EXIT_LAUNCHER_FAILURE;
    }
    let identity = JobIdentity {
        job_id: hex_encode(&random_bytes(8)),
        job_secret_hex: hex_encode(&random_bytes(32)),
        library_path: library_path(options),
        proxy_token: hex_encode(&random_bytes(16)),
    };
    let placement = match &options.hosts {
        None => Placement::single_host(options.process_count()),
        Some(hosts) => {
            let host_name = this_host_name();
            match Placement::replicated(
                hosts,
                options.ranks_per_host,
                options.rank_count,
                options.replica_count,
                |name| is_this_host(name, &host_name),
            ) {
                Ok(placement) => placement,
                Err(message) => {
                    eprintln!("mpiexec: {message}");
                    return crate::EXIT_USAGE;
                }
            }
        }
    };
    let kills = {
        let host_name = this_host_name();
        KillSchedule::new(&process_faults_by_process(options), &placement, |name| {
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
    // --msglog: the event logger first, so that every rank (a remote
    // one's environment goes with its proxy) is told where it is.
    let mut options_with_logger = None;
    let event_logger = if options.msglog {
        match start_event_logger(options, &placement, &identity) {
            Ok((logger, with_address)) => {
                options_with_logger = Some(with_address);
                Some(logger)
            }
            Err(message) => {
                eprintln!("mpiexec: {message}");
                return EXIT_LAUNCHER_FAILURE;
            }
        }
    } else {
        None
    };
    let options = options_with_logger.as_ref().unwrap_or(options);
    // --replica-recovery now: the socket forked replicas connect to, named
    // in every rank's environment.
    let mut options_with_fork_socket = None;
    let mut fork_socket = None;
    if options.replica_recovery {
        match crate::replica_recovery::ForkSocket::open(&identity.job_id) {
            Ok(socket) => {
                let mut with_socket = options.clone();
                with_socket.environment.push((
                    crate::replica_recovery::FORK_SOCKET_VARIABLE.to_string(),
                    socket.path(),
                ));
                options_with_fork_socket = Some(with_socket);
                fork_socket = Some(socket);
            }
            Err(message) => {
                eprintln!("mpiexec: {message}");
                return EXIT_LAUNCHER_FAILURE;
            }
        }
    }
    let options = options_with_fork_socket.as_ref().unwrap_or(options);
    let server = PmiServer::new(
        options.process_count(),
        format!("kvs_{}", identity.job_id),
        placement.process_mapping(),
    )
    .with_universe_size(options.universe_size.saturating_mul(options.replica_count));
    if let Some(socket) = fork_socket.as_mut() {
        socket.serve(server.clone());
    }
    let remote_exits: RemoteExits = Arc::new(Mutex::new(Vec::new()));
    let replicated_outputs = replicated_output::rank_outputs(options);
    if options.replica_recovery {
        server.set_replicated_outputs(replicated_outputs.clone());
    }
    let replay_output = options.msglog.then(|| {
        Arc::new(output::OutputLedger::new(
            options.process_count() as usize * 2,
        ))
    });
    let mut output_threads = Vec::new();
    let proxies = if placement.has_remote() {
        match proxy_link::start_proxies(
            options,
            &placement,
            &identity,
            &remote_exits,
            &replicated_outputs,
            replay_output.as_ref(),
        ) {
            Ok(proxies) => {
                output_threads.extend(proxies.threads);
                proxies.links
            }
            Err((code, message)) => {
                eprintln!("mpiexec: {message}");
                let event_logger = event_logger.map(|logger| (logger.stop(), 0));
                report_fault_tolerance(options, &server, Duration::ZERO, 0, event_logger, code);
                return code;
            }
        }
    } else {
        vec![None; placement.hosts.len()]
    };
    let mut job = Job {
        server,
        proxy_loss_handled: vec![false; placement.hosts.len()],
        placement,
        proxies,
        remote_exits,
        forwarded: spawn::forwarded_variables(),
        ranks: Vec::new(),
        exit_code: None,
        first_death_code: None,
        job_ended_code: None,
        output_threads,
        policy: options.failure_policy,
        kills,
        detection_latency_max: Duration::ZERO,
        respawn_counts: vec![0; options.process_count() as usize],
        replay_output,
        startup_death: None,
        rank_count: options.rank_count,
        replica_count: options.replica_count,
        replica_masking: options.replica_masking,
        replicas_given_up: vec![false; options.replica_count as usize],
        replicated_outputs,
        event_logger,
        event_logger_exited: None,
        fork_socket,
        orphan_endings: std::collections::HashMap::new(),
    };
    let started = job.start_ranks(options, &identity);
    if started.is_ok() {
        job.supervise(options, &identity);
    } else {
        job.tear_down();
    }
    job.finish();
    let event_logger = job.event_logger.take().map(|logger| {
        let restarts = logger.restarts;
        (logger.stop(), restarts)
    });
    let code = match started {
        Ok(()) => job.final_exit_code(),
        Err(code) => code,
    };
    let code = wait_for_spawned_launchers(&job.server, code);
    let replicas_given_up = job
        .replicas_given_up
        .iter()
        .filter(|&&given_up| given_up)
        .count();
    report_fault_tolerance(
        options,
        &job.server,
        job.detection_latency_max,
        replicas_given_up as u64,
        event_logger,
        code,
    );
    code
}

/// Start the job's event logger (`--msglog`): listening on loopback, or
/// where proxies reach mpiexec when ranks run on other hosts; returns it
/// and the options with its address in the ranks' environment.
fn start_event_logger(
    options: &Options,
    placement: &Placement,
    identity: &JobIdentity,
) -> Result<(EventLoggerProcess, Options), String> {
    let remote_ip = if placement.has_remote() {
        Some(proxy_link::control_address(options)?.ip())
    } else {
        None
    };
    let checkpoint_directory =
        spawn::environment_value(&options.environment, "RESMPI_CKPT_DIR").map(str::to_string);
    let logger =
        EventLoggerProcess::start(checkpoint_directory.as_deref(), remote_ip, &identity.job_id)?;
    let mut with_address = options.clone();
    with_address.environment.push((
        resmpi_msglog::logger_link::ADDRESS_VARIABLE.to_string(),
        logger.address(),
    ));
    Ok((logger, with_address))
}

/// The job ends when MPI_Comm_spawn's children end too: wait for every
/// nested launcher (told to end first when the parents' job failed), and
/// a failed one makes a successful job's exit code its own.
fn wait_for_spawned_launchers(server: &PmiServer, code: i32) -> i32 {
    let pids = server.spawned().running_pids();
    for pid in pids {
        if code != 0 {
            // SAFETY: `pid` is a child of this process not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let mut status = 0;
        // SAFETY: waitpid writes only to the local `status`; `pid` is ours.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            server.spawned().record(pid, status);
        }
    }
    match code {
        0 => server.spawned().exit_code(),
        code => code,
    }
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
    replicas_given_up: u64,
    event_logger: Option<(LoggerCounters, u64)>,
    exit_code: i32,
) {
    let (mut report, lines) = {
        let state = server.state();
        let report = FtReport::collect(options.process_count(), |key| {
            state.key_value(key).map(str::to_string)
        });
        // Events the counters only count, named by the process that saw
        // them: `resmpi-report-line-<process>-<i>`, i = 0, 1, ..., hex.
        let lines: Vec<String> = (0..options.process_count())
            .flat_map(|process| {
                (0..)
                    .map_while(|index| {
                        state.key_value(&format!("resmpi-report-line-{process}-{index}"))
                    })
                    .filter_map(resmpi_runtime::hex_decode)
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                    .collect::<Vec<_>>()
            })
            .collect();
        (report, lines)
    };
    let (replicas_recovered, recovery_max) = server.recoveries();
    report.launcher = LauncherCounters {
        processes_lost: server.dead_ranks().len() as u64,
        failure_notices_sent: server.notices_sent_count(),
        detection_latency_us_max: detection_latency_max.as_micros() as u64,
        replicas_given_up,
        replicas_recovered,
        recovery_us_max: recovery_max.as_micros() as u64,
    };
    if let Some((counters, restarts)) = event_logger {
        for (name, value) in resmpi_msglog::server::named_counters(&counters)
            .into_iter()
            .chain([("restarts", restarts)])
        {
            report.counters.insert(format!("eventlog_{name}"), value);
        }
    }
    if report.any_nonzero() || options.ft_options_given {
        eprintln!("{}{}", notice_prefix(options.failure_policy), report.line());
    }
    for line in lines {
        eprintln!("{}mpiexec: {line}", notice_prefix(options.failure_policy));
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

/// What starts mpiexec's lines about a death and its FT report: under
/// `continue` a death is expected, and harnesses of fault-tolerance tests
/// (MPICH's `runtests`, ulfm-testing's scripts) take any output but a
/// `WARNING: ` line as the test's failure.
fn notice_prefix(policy: FailurePolicy) -> &'static str {
    match policy {
        FailurePolicy::Continue => "WARNING: ",
        FailurePolicy::Abort => "",
    }
}

/// `LD_LIBRARY_PATH` for the ranks: our `lib` directory first, then what
/// `-genv`/`-x` gave, else what mpiexec itself has.
fn library_path(options: &Options) -> String {
    let existing = spawn::environment_value(&options.environment, "LD_LIBRARY_PATH")
        .map(str::to_string)
        .or_else(|| std::env::var("LD_LIBRARY_PATH").ok());
    match spawn::library_directory() {
        Some(directory) => {
            let path = spawn::prepend_path(&directory, existing.as_deref());
            if let Some(protocol_directory) = protocol_library_directory(options) {
                // The build of libmpi.so.12 that runs the job's protocol
                // (replication, message logging), found before the plain one.
                return spawn::prepend_path(&directory.join(protocol_directory), Some(&path));
            }
            path
        }
        None => existing.unwrap_or_default(),
    }
}

/// Where, under our `lib` directory, the build of the library with the
/// replication protocol lies (`make` builds it).
const REPLICATION_LIBRARY_DIRECTORY: &str = "replication";

/// Whether the processes run the replication protocol (`--replicas R`,
/// R > 1, `--replica-masking process`).
fn replicates_in_the_library(options: &Options) -> bool {
    options.replica_count > 1 && options.replica_masking == ReplicaMasking::Process
}

/// Where, under our `lib` directory, the build of the library with the
/// message-logging protocol lies (`make` builds it).
const MSGLOG_LIBRARY_DIRECTORY: &str = "msglog";

/// The directory under `lib` of the library build the job's protocol
/// needs, and the option that asks for it; None for the plain library.
fn protocol_library(options: &Options) -> Option<(&'static str, &'static str)> {
    if replicates_in_the_library(options) {
        Some((REPLICATION_LIBRARY_DIRECTORY, "--replica-masking process"))
    } else if options.msglog {
        Some((MSGLOG_LIBRARY_DIRECTORY, "--msglog pessimistic"))
    } else {
        None
    }
}

fn protocol_library_directory(options: &Options) -> Option<&'static str> {
    protocol_library(options).map(|(directory, _)| directory)
}

/// `--replica-masking process` needs `lib/replication/libmpi.so.12`,
/// `--msglog` needs `lib/msglog/libmpi.so.12`.
fn check_replication_library(options: &Options) -> Result<(), String> {
    let Some((protocol_directory, option)) = protocol_library(options) else {
        return Ok(());
    };
    let library = spawn::library_directory()
        .map(|directory| directory.join(protocol_directory).join("libmpi.so.12"));
    match library {
        Some(library) if library.exists() => Ok(()),
        Some(library) => Err(format!(
            "{option} needs the library built with its protocol, {} (make builds it)",
            library.display()
        )),
        None => Err(format!("{option}: cannot find mpiexec's lib directory")),
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

/// Why a program could not be run, in words a user acts on.
fn start_failure_reason(kind: io::ErrorKind, text: &str) -> String {
    match kind {
        io::ErrorKind::NotFound => "no such file or command".to_string(),
        io::ErrorKind::PermissionDenied => "permission denied (is it executable?)".to_string(),
        _ => text.to_string(),
    }
}

/// The process faults of `options` with each `kill:RANK.REPLICA` target
/// turned into the process that runs it (`Options::process_of`, as replica
/// 0 of that process index), which is what the kill schedule and the
/// supervisor count in.
fn process_faults_by_process(options: &Options) -> Vec<ProcessFault> {
    options
        .process_faults
        .iter()
        .map(|fault| match fault {
            ProcessFault::Kill { target, trigger } => ProcessFault::Kill {
                target: ProcessTarget {
                    rank: options.process_of(target.rank, target.replica),
                    replica: 0,
                },
                trigger: *trigger,
            },
            other => other.clone(),
        })
        .collect()
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
        for rank in 0..options.process_count() {
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

    /// `--respawn`: starts every dead rank again that has respawns left,
    /// as the next incarnation of that rank (on its own host: a remote one
    /// through its proxy, unless that proxy is lost).
    fn respawn_dead(&mut self, options: &Options, identity: &JobIdentity) {
        if options.respawn_count_max == 0 {
            return;
        }
        for rank in 0..self.ranks.len() {
            let process = &self.ranks[rank];
            let due = process.failed
                && process.ending.is_some()
                && !self.proxy_lost(process)
                && self.respawn_counts[rank] < options.respawn_count_max;
            if !due {
                continue;
            }
            // Dead after MPI_Finalize: a new incarnation would replay its
            // whole MPI life against peers that may have finished and gone
            // (it hung waiting for their re-sends). Its MPI part is done;
            // the death is the job's, as without fault tolerance.
            if self.server.state().finalized[rank] {
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
    /// and PMI connection: here with fork/exec, on another host through
    /// its proxy.
    fn start_rank(
        &mut self,
        options: &Options,
        identity: &JobIdentity,
        rank: u32,
        incarnation: u32,
        standard_input: StandardInput,
    ) -> Result<RankProcess, i32> {
        let host_index = self.placement.host_of_rank[rank as usize];
        let local_numbers = self.placement.local_numbers(rank);
        if let Some(link) = self.proxies[host_index].clone() {
            return self.start_remote_rank(options, identity, rank, incarnation, &link);
        }
        let (launcher_end, rank_end) = UnixStream::pair().map_err(|error| {
            eprintln!("mpiexec: cannot create the PMI socket for rank {rank}: {error}");
            EXIT_LAUNCHER_FAILURE
        })?;
        let mut child: Child = spawn::spawn_rank(
            options,
            identity,
            rank,
            incarnation,
            local_numbers,
            &rank_end,
            standard_input,
        )
        .map_err(|error| {
            eprintln!(
                "mpiexec: cannot run '{}': {}",
                options.program,
                start_failure_reason(error.kind(), &error.to_string())
            );
            EXIT_CANNOT_RUN
        })?;
        drop(rank_end);
        let (logical_rank, replica) = options.rank_and_replica(rank);
        let prefix = if options.tag_output {
            format!("[{logical_rank}] ")
        } else {
            String::new()
        };
        if let Some([stdout_output, stderr_output]) =
            self.replicated_outputs.get(logical_rank as usize).cloned()
        {
            // Replicas print the same lines: each is shown once, from one
            // replica, and from a survivor when that one is given up.
            let replica = replica as usize;
            if let Some(stdout) = child.stdout.take() {
                self.output_threads.push(thread::spawn(move || {
                    replicated_output::forward_replica(stdout, stdout_output, replica)
                }));
            }
            if let Some(stderr) = child.stderr.take() {
                self.output_threads.push(thread::spawn(move || {
                    replicated_output::forward_replica(stderr, stderr_output, replica)
                }));
            }
        }
        // Message logging: a restarted rank replays, and prints again what
        // its dead incarnations printed; only what goes beyond is shown.
        let replayed = |stream: usize| {
            self.replay_output.as_ref().map(|ledger| {
                output::ReplayedStream::open(
                    ledger.clone(),
                    rank as usize * 2 + stream,
                    incarnation,
                )
            })
        };
        let (stdout_replay, stderr_replay) = (replayed(0), replayed(1));
        if let Some(stdout) = child.stdout.take() {
            let prefix = prefix.clone();
            self.output_threads.push(thread::spawn(move || {
                output::forward_replayed(stdout, Destination::Stdout, &prefix, stdout_replay)
            }));
        }
        if let Some(stderr) = child.stderr.take() {
            self.output_threads.push(thread::spawn(move || {
                output::forward_replayed(stderr, Destination::Stderr, &prefix, stderr_replay)
            }));
        }
        if let Some(mut rank_stdin) = child.stdin.take() {
            // Not joined: it may sit in a read of the terminal forever.
            thread::spawn(move || {
                let _ = io::copy(&mut io::stdin().lock(), &mut rank_stdin);
            });
        }
        let server = self.server.clone();
        thread::spawn(move || server.serve(rank, launcher_end));
        Ok(RankProcess {
            pid: child.id() as i32,
            incarnation,
            ending: None,
            host: None,
            proxy: None,
            failed: false,
            killed_at: None,
        })
    }

    /// Starts a rank on another host through `link`, its host's proxy.
    fn start_remote_rank(
        &mut self,
        options: &Options,
        identity: &JobIdentity,
        rank: u32,
        incarnation: u32,
        link: &Arc<ProxyLink>,
    ) -> Result<RankProcess, i32> {
        let host_index = self.placement.host_of_rank[rank as usize];
        let environment = spawn::remote_rank_environment(
            options,
            identity,
            rank,
            incarnation,
            self.placement.local_numbers(rank),
            &link.host,
            &self.forwarded,
        );
        let directory = std::env::current_dir()
            .map(|directory| directory.display().to_string())
            .unwrap_or_default();
        let started = link.start(
            &self.server,
            rank,
            incarnation,
            Launch {
                program: spawn::remote_program_path(&options.program),
                arguments: options.arguments.clone(),
                environment,
                directory,
            },
        );
        match started {
            Ok(pid) => Ok(RankProcess {
                pid,
                incarnation,
                ending: None,
                host: Some(link.host.clone()),
                proxy: Some(host_index),
                failed: false,
                killed_at: None,
            }),
            Err(StartError::Refused(error_number, reason)) if error_number == libc::EINVAL => {
                // The proxy's check of an option value on its host
                // (`preflight::check_launch_rails`): a usage error, as
                // the same value is on this host.
                eprintln!("mpiexec: on host {}: {reason}", link.host);
                Err(crate::EXIT_USAGE)
            }
            Err(StartError::Refused(error_number, reason)) => {
                let kind = io::Error::from_raw_os_error(error_number).kind();
                eprintln!(
                    "mpiexec: cannot run '{}' on host {}: {}",
                    options.program,
                    link.host,
                    start_failure_reason(kind, &reason)
                );
                Err(EXIT_CANNOT_RUN)
            }
            Err(StartError::ProxyLost(reason)) => {
                eprintln!(
                    "mpiexec: cannot start rank {rank} on host {}: {reason}",
                    link.host
                );
                Err(EXIT_LAUNCHER_FAILURE)
            }
        }
    }

    /// `rank R`, or under `--replicas` `rank R replica K`.
    fn process_name(&self, process_index: u32) -> String {
        if self.replica_count > 1 {
            format!(
                "rank {} replica {}",
                process_index % self.rank_count,
                process_index / self.rank_count
            )
        } else {
            format!("rank {process_index}")
        }
    }

    /// `rank R (pid P)`, or `rank R on host H (pid P)`; under
    /// `--replicas`, `rank R replica K (pid P)`.
    fn describe(&self, process_index: u32) -> String {
        let process = &self.ranks[process_index as usize];
        let who = self.process_name(process_index);
        match &process.host {
            Some(host) => format!("{who} on host {host} (pid {})", process.pid),
            None => format!("{who} (pid {})", process.pid),
        }
    }

    /// Sends `signal` to `ranks` at one instant: local ones directly, remote
    /// ones in one message to each proxy.
    fn signal_ranks(&self, ranks: &[u32], signal: i32) {
        let mut by_proxy: HashMap<usize, Vec<(u32, u32)>> = HashMap::new();
        for &rank in ranks {
            let process = &self.ranks[rank as usize];
            match process.proxy {
                None => signal_rank(process.pid, signal),
                Some(index) => by_proxy
                    .entry(index)
                    .or_default()
                    .push((rank, process.incarnation)),
            }
        }
        for (index, targets) in by_proxy {
            if let Some(link) = &self.proxies[index] {
                link.signal(&targets, signal);
            }
        }
    }

    /// Proxies newly lost: each with the ranks that were still running on
    /// its host, which are marked dead (SIGKILL: what happens to them).
    fn take_lost_hosts(&mut self) -> Vec<(usize, Vec<u32>)> {
        let mut lost = Vec::new();
        for index in 0..self.proxies.len() {
            let newly_lost = self.proxies[index]
                .as_ref()
                .is_some_and(|link| link.is_lost())
                && !self.proxy_loss_handled[index];
            if !newly_lost {
                continue;
            }
            self.proxy_loss_handled[index] = true;
            let ranks: Vec<u32> = (0..self.ranks.len() as u32)
                .filter(|&rank| {
                    let process = &self.ranks[rank as usize];
                    process.proxy == Some(index) && process.ending.is_none()
                })
                .collect();
            for &rank in &ranks {
                self.ranks[rank as usize].ending = Some(Ending::Signal(libc::SIGKILL));
            }
            lost.push((index, ranks));
        }
        lost
    }

    /// A lost proxy: every rank still running on its host died. Under
    /// `abort` the job ends naming the host; under `continue` each rank is
    /// a death like any other. True when the job must end.
    fn handle_lost_proxies(&mut self) -> bool {
        let any_newly_lost = self
            .proxies
            .iter()
            .zip(&self.proxy_loss_handled)
            .any(|(link, &handled)| !handled && link.as_ref().is_some_and(|link| link.is_lost()));
        if !any_newly_lost {
            return false;
        }
        // Exits the proxies reported before going are taken first (those
        // ranks died on their own, not with their proxy), and judged first
        // unless they aborted: an abort is most often the echo of the loss.
        let (aborted, others): (Vec<_>, Vec<_>) = self
            .reap()
            .into_iter()
            .partition(|&(rank, _)| self.aborted(rank));
        if self.judge(others) {
            return true;
        }
        for (index, ranks) in self.take_lost_hosts() {
            let ranks: Vec<u32> = ranks
                .into_iter()
                .filter(|&rank| !self.ranks[rank as usize].failed)
                .collect();
            if ranks.is_empty() {
                continue;
            }
            self.notify_deaths(&ranks);
            let host = self.placement.hosts[index].name.clone();
            let code = 128 + libc::SIGKILL;
            match self.policy {
                FailurePolicy::Abort => {
                    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
                    let launcher_pid = self.proxies[index]
                        .as_ref()
                        .map_or(0, |link| link.launcher_pid);
                    self.fail(
                        code,
                        &format!(
                            "lost the proxy of host {host} (launcher pid {launcher_pid}): its ranks {} are gone (the proxy died or its connection to mpiexec broke)",
                            list.join(", ")
                        ),
                    );
                    return true;
                }
                FailurePolicy::Continue => {
                    for rank in ranks {
                        self.continue_without(
                            rank,
                            code,
                            "was lost with its host's proxy (the proxy died or its connection to mpiexec broke)",
                        );
                    }
                }
            }
        }
        self.judge(aborted)
    }

    /// Whether process `process` belongs to a replica given up (under
    /// `--replica-masking process`: whether it is itself lost).
    fn given_up(&self, process: u32) -> bool {
        if self.replica_count > 1 && self.replica_masking == ReplicaMasking::Process {
            return self.ranks[process as usize].failed;
        }
        self.replica_count > 1 && self.replicas_given_up[(process / self.rank_count) as usize]
    }

    /// Under `--replicas` with `--replica-masking process`: process
    /// `process` died (`how`, exit code `code`). Only it is lost: the
    /// replication protocol in the library has a surviving replica of its
    /// rank take over its messages, and its rank's output switches to a
    /// survivor. True (the job ends, with the death as its cause) when its
    /// rank has no live replica left.
    fn give_up_process(&mut self, process: u32, code: i32, how: &str) -> bool {
        let (rank, replica) = (process % self.rank_count, process / self.rank_count);
        let who = self.describe(process);
        self.ranks[process as usize].failed = true;
        // A death inside MPI_Init: the others' wire-up goes on without it
        // (they take its missing card or connection for its death).
        self.server.excuse(process);
        for output in &self.replicated_outputs[rank as usize] {
            output.give_up(replica as usize);
        }
        let live: Vec<String> = (0..self.replica_count)
            .filter(|&other| !self.ranks[(other * self.rank_count + rank) as usize].failed)
            .map(|other| other.to_string())
            .collect();
        if live.is_empty() {
            self.fail(
                code,
                &format!(
                    "{who} {how}; every replica of rank {rank} is now dead, so the job cannot go on"
                ),
            );
            return true;
        }
        eprintln!(
            "WARNING: mpiexec: {who} {how} \u{2014} rank {rank} goes on with replica(s) {} (replica masking process)",
            live.join(", ")
        );
        false
    }

    /// Under `--replicas`: process `process` died (`how`, exit code
    /// `code`). Until the parallel protocol masks a single process's death
    /// (issue 12), its whole replica is given up: the same replica of every
    /// other rank is killed (it talks only to that replica), its output is
    /// no longer shown, and the job goes on with the other replicas. True
    /// (the job ends, with the death as its cause) when no replica is left.
    fn give_up_replica(&mut self, process: u32, code: i32, how: &str) -> bool {
        let replica = (process / self.rank_count) as usize;
        let who = self.describe(process);
        if self.replicas_given_up[replica] {
            self.ranks[process as usize].failed = true;
            return false;
        }
        self.replicas_given_up[replica] = true;
        let members: Vec<u32> = (0..self.rank_count)
            .map(|rank| replica as u32 * self.rank_count + rank)
            .collect();
        for &member in &members {
            self.ranks[member as usize].failed = true;
            self.server.excuse(member);
        }
        for output in self.replicated_outputs.iter().flatten() {
            output.give_up(replica);
        }
        let live: Vec<String> = (0..self.replica_count as usize)
            .filter(|&other| !self.replicas_given_up[other])
            .map(|other| other.to_string())
            .collect();
        if live.is_empty() {
            let rank = process % self.rank_count;
            self.fail(
                code,
                &format!(
                    "{who} {how}; every replica of the job has now lost a process (rank {rank}'s last live replica was this one), so the job cannot go on"
                ),
            );
            return true;
        }
        eprintln!(
            "WARNING: mpiexec: {who} {how} \u{2014} replica {replica} of every rank is given up; the job continues on replica(s) {}",
            live.join(", ")
        );
        let running: Vec<u32> = members
            .into_iter()
            .filter(|&member| self.ranks[member as usize].ending.is_none())
            .collect();
        self.signal_ranks(&running, libc::SIGKILL);
        false
    }

    /// Under `continue`: names the death of `rank` (`how` it died), keeps
    /// the first failure's exit code, and lets the job go on.
    fn continue_without(&mut self, rank: u32, code: i32, how: &str) {
        if self.startup_death.is_none() {
            let starting: Vec<u32> = (0..self.ranks.len() as u32)
                .filter(|&other| {
                    other != rank
                        && self.ranks[other as usize].ending.is_none()
                        && !self.ranks[other as usize].failed
                        && self.server.in_startup(other)
                })
                .collect();
            if !starting.is_empty() {
                self.startup_death = Some(StartupDeath {
                    at: Instant::now(),
                    code,
                    who: format!("{} {how}", self.describe(rank)),
                    starting,
                });
            }
        }
        let host = &self.placement.host(rank).name;
        eprintln!(
            "{}mpiexec: rank {rank} (host {host}) {how} \u{2014} the job continues (failure policy continue)",
            notice_prefix(self.policy)
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
            // One instant for a host's ranks: they go down together (a
            // remote host's in one message to its proxy).
            let now = Instant::now();
            let targets: Vec<u32> = kill
                .ranks
                .into_iter()
                .filter(|&rank| {
                    let process = &self.ranks[rank as usize];
                    process.ending.is_none() && !process.failed
                })
                .collect();
            self.signal_ranks(&targets, libc::SIGKILL);
            for rank in targets {
                self.ranks[rank as usize].killed_at.get_or_insert(now);
            }
        }
    }

    /// `--msglog`: start the event logger again if it died (it reads its
    /// log back; ranks connect again and re-send what it had not acked).
    /// True when it cannot be started, or ended by itself (an error it
    /// named, such as a damaged log: starting it again would fail again):
    /// the job ends.
    fn restart_event_logger(&mut self) -> bool {
        let Some(ending) = self.event_logger_exited.take() else {
            return false;
        };
        let Some(logger) = self.event_logger.as_mut() else {
            return false;
        };
        if let Ending::Code(code) = ending {
            self.fail(
                EXIT_LAUNCHER_FAILURE,
                &format!("the event logger exited with code {code}: the job ends"),
            );
            return true;
        }
        match logger.restart() {
            Ok(line) => {
                eprintln!("{line}");
                false
            }
            Err(message) => {
                self.fail(EXIT_LAUNCHER_FAILURE, &format!("{message}: the job ends"));
                true
            }
        }
    }

    /// mpiexec's exit code once the job is over: under `abort`, the first
    /// failure's (or the first non-zero exit after finalize); under
    /// `continue`, what ended the job early, else the first death, else
    /// the first non-zero exit after finalize. Under `--msglog` a death is
    /// masked (the rank was restarted and replayed), so it is not the
    /// job's exit code; one that could not be masked ends the job early.
    fn final_exit_code(&self) -> i32 {
        let death_code = if self.replay_output.is_some() {
            None
        } else {
            self.first_death_code
        };
        self.job_ended_code
            .or(death_code)
            .or(self.exit_code)
            .unwrap_or(0)
    }

    /// Whether `process` ran on a host whose proxy is gone (nothing there
    /// can start it again).
    fn proxy_lost(&self, process: &RankProcess) -> bool {
        process.proxy.is_some_and(|index| {
            self.proxies[index]
                .as_ref()
                .is_none_or(|link| link.is_lost())
        })
    }

    /// `--msglog`: a rank dead with no restart left cannot be replayed, and
    /// the survivors would wait for it for ever: the job ends, naming it.
    /// So does a rank lost with its host's proxy (nothing there can start
    /// it again).
    fn msglog_gave_up(&mut self, options: &Options) -> bool {
        let finalized = |rank: usize| self.server.state().finalized[rank];
        let exhausted = (0..self.ranks.len()).find(|&rank| {
            let process = &self.ranks[rank];
            process.failed
                && process.ending.is_some()
                && (self.respawn_counts[rank] >= options.respawn_count_max
                    || self.proxy_lost(process)
                    || finalized(rank))
        });
        let Some(rank) = exhausted else {
            return false;
        };
        let code = self.first_death_code.unwrap_or(1);
        let message = if finalized(rank) {
            format!(
                "rank {rank} died after MPI_Finalize; message logging does not start it again \
                 (a replay needs its peers, which may have finished): the job ends with its code"
            )
        } else if self.proxy_lost(&self.ranks[rank]) {
            format!(
                "rank {rank} was lost with the proxy of host {}; message logging cannot start \
                 it again there: the job ends",
                self.ranks[rank].host.as_deref().unwrap_or("?")
            )
        } else {
            format!(
                "rank {rank} died again after {} restarts; message logging restarts a rank at most \
                 {} times (--respawn N sets it): the job ends",
                self.respawn_counts[rank], options.respawn_count_max
            )
        };
        self.fail(code, &message);
        true
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

    /// MPI_Comm_spawn's children failed (their nested mpiexec, which
    /// reported the death, exited non-zero while the parents run): under
    /// `abort` that ends the job as a rank's death does, so no parent
    /// waits for a child that is gone.
    fn spawned_children_failed(&mut self) -> bool {
        let code = self.server.spawned().exit_code();
        if code == 0 || self.policy == FailurePolicy::Continue {
            return false;
        }
        self.fail(
            code,
            &format!(
                "processes started by MPI_Comm_spawn failed (their mpiexec exited with code {code}): ending the job"
            ),
        );
        true
    }

    fn running_count(&self) -> usize {
        self.ranks
            .iter()
            .filter(|rank| rank.ending.is_none())
            .count()
    }

    /// Adopts the replicas forked since the last call (announced by their
    /// forkers, `replica_recovery.rs`): each takes its process's place, as
    /// a respawned rank does; returns those that already died.
    fn adopt_forked_replicas(&mut self) -> Vec<(u32, Ending)> {
        let mut dead = Vec::new();
        for fork in self.server.take_forks() {
            let process = fork.rank;
            let Some(slot) = self.ranks.get_mut(process as usize) else {
                continue;
            };
            slot.pid = fork.pid;
            slot.incarnation = fork.incarnation;
            slot.ending = None;
            slot.failed = false;
            slot.killed_at = None;
            eprintln!(
                "mpiexec: rank {} replica {} recovered: a sibling forked it as pid {} (incarnation {})",
                process % self.rank_count,
                process / self.rank_count,
                fork.pid,
                fork.incarnation
            );
            if let Some(ending) = self.orphan_endings.remove(&fork.pid) {
                self.ranks[process as usize].ending = Some(ending);
                dead.push((process, ending));
            }
        }
        dead
    }

    /// Reaps every exited rank without blocking; returns (rank, ending).
    fn reap(&mut self) -> Vec<(u32, Ending)> {
        let mut reaped = self.adopt_forked_replicas();
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
            // A remote rank's pid is its host's: only local ranks here.
            if let Some(rank) = self
                .ranks
                .iter()
                .position(|rank| rank.proxy.is_none() && rank.pid == pid)
            {
                self.ranks[rank].ending = Some(ending);
                reaped.push((rank as u32, ending));
            } else if self
                .event_logger
                .as_ref()
                .is_some_and(|logger| logger.pid == pid)
            {
                self.event_logger_exited = Some(ending);
            } else if self.server.spawned().reaped(pid, status) {
                // A nested launcher of MPI_Comm_spawn: judged at the end.
            } else if let Some(link) = self
                .proxies
                .iter()
                .flatten()
                .find(|link| link.launcher_pid == pid)
            {
                // The launcher is the only way to the proxy (ssh) or is
                // the proxy (ip netns exec): either way it is gone.
                link.mark_lost();
            } else if self.fork_socket.is_some() {
                // Maybe a forked replica whose announcement is not adopted
                // yet (`adopt_forked_replicas`).
                self.orphan_endings.insert(pid, ending);
            }
        }
        let remote_exits = std::mem::take(
            &mut *self
                .remote_exits
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for exit in remote_exits {
            let Some(ending) = decode_wait_status(exit.wait_status) else {
                continue;
            };
            let Some(process) = self.ranks.get_mut(exit.rank as usize) else {
                continue;
            };
            // A report about a process since replaced is old news.
            if process.proxy.is_some()
                && process.incarnation == exit.incarnation
                && process.ending.is_none()
            {
                process.ending = Some(ending);
                reaped.push((exit.rank, ending));
            }
        }
        reaped
    }

    /// Handles pending abort requests; true when the job must end.
    fn handle_aborts(&mut self) -> bool {
        let mut requests = std::mem::take(&mut self.server.state().abort_requests);
        // A process of a replica given up may abort because its partner
        // died; that replica is gone anyway.
        requests.retain(|request| !self.given_up(request.rank));
        let Some(request) = requests.first() else {
            return false;
        };
        let code = match request.exit_code & 0xff {
            0 => 1,
            code => code,
        };
        let who = self.process_name(request.rank);
        self.fail(
            code,
            &format!("{who} called MPI_Abort with code {}", request.exit_code),
        );
        if let Some(message) = &request.message {
            eprintln!("mpiexec: {who} abort message: {message}");
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
            Ending::Code(resmpi_msglog::ROLLBACK_EXIT_CODE) if self.replay_output.is_some() => {
                Some((
                    resmpi_msglog::ROLLBACK_EXIT_CODE,
                    format!(
                        "rolled back (an orphan of optimistic message logging, it exited with \
                         code {} to be started again and replay)",
                        resmpi_msglog::ROLLBACK_EXIT_CODE
                    ),
                ))
            }
            Ending::Code(resmpi_runtime::OUTVOTED_EXIT_CODE) if self.replica_count > 2 => Some((
                resmpi_runtime::OUTVOTED_EXIT_CODE,
                "left the job after a vote of the replicas (--sdc vote): it sent, or took in, \
                 bytes that a majority of replicas sent otherwise"
                    .to_string(),
            )),
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
            if self.aborted(rank) {
                // The abort may echo the loss of a host whose proxy's end
                // is not known yet: let it arrive, so the report names the
                // cause.
                if self.proxies.iter().any(Option::is_some) {
                    thread::sleep(Duration::from_millis(ABORT_SETTLE_MS));
                    if self.handle_lost_proxies() {
                        return true;
                    }
                }
                if self.handle_aborts() {
                    return true;
                }
            }
        }
        let Some((code, how)) = self.failure_of(rank, ending) else {
            return false;
        };
        match self.policy {
            FailurePolicy::Abort if self.replica_count > 1 => {
                if self.replica_masking == ReplicaMasking::Process {
                    self.give_up_process(rank, code, &how)
                } else {
                    self.give_up_replica(rank, code, &how)
                }
            }
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
        let gone = self.ranks.iter().enumerate().position(|(rank, process)| {
            process.ending.is_some() && !state.finalized[rank] && !state.excused[rank]
        });
        let Some(rank) = gone else {
            return false;
        };
        drop(state);
        let who = self.describe(rank as u32);
        if self.ranks[rank].failed {
            // Under continue (or a replica given up): a death during
            // wire-up, which needs every process.
            eprintln!(
                "mpiexec: {who} is gone while other ranks wait for it in a PMI barrier (MPI_Init), which cannot complete; ending the job"
            );
            if self.replica_count > 1 {
                // Giving up the replica recorded no failure of the job:
                // this one is, with the dead process's code.
                let ending = self.ranks[rank].ending.expect("gone");
                let code = match ending {
                    Ending::Signal(signal) => 128 + signal,
                    Ending::Code(0) => 1,
                    Ending::Code(code) => code,
                };
                self.job_ended_code.get_or_insert(code);
            }
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
            if self.restart_event_logger() {
                break;
            }
            if !self.server.state().abort_requests.is_empty() {
                // Ranks often abort because a peer died: let that death be
                // seen first, so the report names the cause, not the echo.
                thread::sleep(Duration::from_millis(ABORT_SETTLE_MS));
                if self.handle_lost_proxies() || self.judge_reaped() {
                    break;
                }
            }
            if self.handle_aborts() || self.spawned_children_failed() {
                break;
            }
            if self.handle_lost_proxies()
                || self.judge_reaped()
                || self.barrier_deadlock()
                || self.stuck_in_startup()
            {
                break;
            }
            self.respawn_dead(options, identity);
            if options.msglog && self.msglog_gave_up(options) {
                break;
            }
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

    /// Under `continue`: whether ranks that were inside MPI_Init's wire-up
    /// when a process died are still there after [`STARTUP_DEATH_GRACE_MS`]
    /// (waiting for the dead); then the job ends with the death's code.
    fn stuck_in_startup(&mut self) -> bool {
        let Some(death) = &self.startup_death else {
            return false;
        };
        let stuck: Vec<String> = death
            .starting
            .iter()
            .filter(|&&rank| {
                self.ranks[rank as usize].ending.is_none() && self.server.in_startup(rank)
            })
            .map(u32::to_string)
            .collect();
        if stuck.is_empty() {
            self.startup_death = None;
            return false;
        }
        if death.at.elapsed() < Duration::from_millis(STARTUP_DEATH_GRACE_MS) {
            return false;
        }
        let message = format!(
            "{} during MPI_Init, and rank(s) {} could not finish wiring up without it within {} s (a death during MPI_Init cannot be survived); ending the job",
            death.who,
            stuck.join(", "),
            STARTUP_DEATH_GRACE_MS / 1000
        );
        let code = death.code;
        self.fail(code, &message);
        true
    }

    /// Reaps exited ranks, notifies the watchers of the deaths among them
    /// (before anything else: judging may wait for a PMI connection to
    /// drain), and judges each; true when the job must end.
    fn judge_reaped(&mut self) -> bool {
        let reaped = self.reap();
        self.judge(reaped)
    }

    /// Whether `rank` asked to abort the job.
    fn aborted(&self, rank: u32) -> bool {
        self.server
            .state()
            .abort_requests
            .iter()
            .any(|request| request.rank == rank)
    }

    /// Notifies the watchers of the deaths among `reaped` and judges each
    /// (see [`Job::judge_reaped`]); true when the job must end.
    fn judge(&mut self, mut reaped: Vec<(u32, Ending)>) -> bool {
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

    /// The ranks still running.
    fn running_ranks(&self) -> Vec<u32> {
        (0..self.ranks.len() as u32)
            .filter(|&rank| self.ranks[rank as usize].ending.is_none())
            .collect()
    }

    /// SIGTERM to every running rank's group (remote ones through their
    /// proxies), SIGKILL after the grace period. A proxy lost meanwhile
    /// takes its ranks with it.
    fn tear_down(&mut self) {
        self.server.shut_down();
        self.signal_ranks(&self.running_ranks(), libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_millis(TERMINATE_GRACE_MS);
        while self.running_count() > 0 && Instant::now() < deadline {
            self.reap();
            self.take_lost_hosts();
            thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
        }
        self.signal_ranks(&self.running_ranks(), libc::SIGKILL);
        let deadline = Instant::now() + Duration::from_millis(TERMINATE_GRACE_MS * 5);
        while self.running_count() > 0 && Instant::now() < deadline {
            self.reap();
            self.take_lost_hosts();
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// After the ranks: kill what local ranks left in their process groups,
    /// close every proxy (which kills what is left on its host and exits),
    /// let the output drain. (Shared memory needs nothing: it has no name.)
    fn finish(&mut self) {
        for rank in self.ranks.iter().filter(|rank| rank.proxy.is_none()) {
            // SAFETY: as in `signal_rank`; only the group, the rank is reaped.
            unsafe {
                libc::kill(-rank.pid, libc::SIGKILL);
            }
        }
        self.close_proxies();
        self.output_threads
            .extend(self.server.take_forked_output_threads());
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
    }

    /// Closes every proxy's connection and waits (bounded) for its launcher
    /// to exit; one that lingers is killed with its process group.
    fn close_proxies(&mut self) {
        let links: Vec<Arc<ProxyLink>> = self.proxies.iter().flatten().cloned().collect();
        if links.is_empty() {
            return;
        }
        for link in &links {
            link.close();
        }
        let mut running: Vec<i32> = links.iter().map(|link| link.launcher_pid).collect();
        let deadline = Instant::now() + Duration::from_millis(LAUNCHER_EXIT_WAIT_MS);
        while !running.is_empty() && Instant::now() < deadline {
            running.retain(|&pid| {
                let mut status = 0;
                // SAFETY: waitpid writes only to the local `status`; `pid` is
                // a launcher we started. -1 (already reaped) ends the wait.
                unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == 0 }
            });
            thread::sleep(Duration::from_millis(1));
        }
        for pid in running {
            signal_rank(pid, libc::SIGKILL);
            let mut status = 0;
            // SAFETY: as above; killed just now, so this returns promptly.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
    }
}
