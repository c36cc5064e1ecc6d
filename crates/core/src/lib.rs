//! MPI semantics over the progress engine: initialisation, communicators,
//! point-to-point operations with argument checking, collectives.
//!
//! This crate owns what MPI *means*; it does not know C handles (that is
//! `resmpi-capi`) nor how bytes move (that is `resmpi-path`, under the
//! engine). Raw user buffers enter here as pointers because MPI's
//! nonblocking operations outlive the call that passed them; every place
//! that dereferences one says why it is valid.
#![warn(missing_docs)]
// Buffers are raw pointers by MPI's contract: the application keeps them
// valid until the request completes, which no Rust signature can express.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod coll;
pub mod comm;
mod comm_create;
pub mod datatype;
pub mod dpm;
pub mod engine;
pub mod error;
pub mod group;
mod intercomm;
pub mod op;
pub mod partitioned;
pub mod reliability;
mod replica_fork;
pub mod request;
pub mod schedule;
pub mod spawn;
pub mod topology;
pub mod transport;
pub mod ulfm;
pub mod user_bytes;
pub mod wireup;

use std::sync::Arc;

pub use resmpi_ft::CompletionCall;
use resmpi_ft::Interceptor as _;
pub use resmpi_runtime::MessageLogging;
use resmpi_runtime::{Config, FailureNotices, FailurePolicy, Pmi, StripeChoice};

pub use comm::Communicator;
pub use engine::{Destination, Engine, EngineConfig, Unexpected, ANY_SOURCE, ANY_TAG, PROC_NULL};
pub use error::{fail, ErrorClass, MpiError, MpiResult};
use request::{Operation, Request};
pub use request::{Persistent, SendMode, Status};

/// Largest tag an application may use (MPI_TAG_UB).
pub const TAG_UB: i32 = (1 << 30) - 1;

/// Contexts of MPI_Comm_idup: bit 29, the leader's world rank, its count
/// (agreed contexts stay far below bit 29; bits 30-31 mark temporaries).
const IDUP_CONTEXT_BIT: u32 = 1 << 29;

/// What a process offers in a context agreement when another of its
/// threads has the turn (see `Mpi::agree_context`): larger than any
/// context, so the agreement's result says someone sat out.
const CONTEXT_TURN_TAKEN: i64 = i64::MAX;

/// Whose turn it is to agree on a context (MPI_THREAD_MULTIPLE; see
/// `Mpi::agree_context`).
#[derive(Debug, Default)]
struct ContextTurns {
    /// The parent contexts of the agreements waiting or in progress.
    waiting: Vec<u32>,
    /// The parent context of the agreement in progress with the turn.
    turn: Option<u32>,
}

impl ContextTurns {
    /// Take the turn for the agreement on `parent` if nobody has it and
    /// `parent` is the lowest waiting context.
    fn take(&mut self, parent: u32) -> bool {
        if self.turn.is_none() && self.waiting.iter().min() == Some(&parent) {
            self.turn = Some(parent);
            return true;
        }
        false
    }

    /// The agreement on `parent` is over.
    fn leave(&mut self, parent: u32) {
        if let Some(at) = self.waiting.iter().position(|&waiting| waiting == parent) {
            self.waiting.swap_remove(at);
        }
    }
}
/// World ranks a leader may have (12 bits).
const IDUP_LEADER_BITS: u32 = 12;
/// Idups one leader may hand out (16 bits; each context takes two ids).
const IDUP_COUNT_BITS: u32 = 16;
/// The context of a duplicate whose MPI_Comm_idup has not completed (room
/// above it for an inter-communicator's four ids).
const UNSET_CONTEXT: u32 = u32::MAX - 3;

/// Index of MPI_COMM_WORLD in the communicator table.
pub const WORLD: usize = 0;
/// Index of MPI_COMM_SELF.
pub const SELF: usize = 1;

/// Bytes of MPI_BSEND_OVERHEAD charged per buffered message (MPICH's value).
pub const BSEND_OVERHEAD_BYTES: usize = 96;

/// The reliability layer's settings for a rank with `rail_count` TCP rails.
/// Heartbeats go at a fifth of the rail silence timeout; a down rail is
/// probed once per timeout; silence on every rail for the peer timeout
/// makes the peer unreachable.
fn reliable_config(config: &Config, rail_count: u32) -> resmpi_reliable::ReliableConfig {
    let rail_timeout_ns = config.rail_timeout_ms * 1_000_000;
    resmpi_reliable::ReliableConfig {
        rail_count,
        stripe_policy: match config.stripe {
            StripeChoice::RoundRobin => resmpi_reliable::StripePolicy::RoundRobin,
            StripeChoice::Fragments => resmpi_reliable::StripePolicy::Fragments,
            StripeChoice::Off => resmpi_reliable::StripePolicy::Off,
        },
        ack_timeout_ns: config.ack_timeout_ms * 1_000_000,
        max_retries: config.retries,
        rail_silence_timeout_ns: rail_timeout_ns,
        peer_silence_timeout_ns: config.peer_timeout_ms * 1_000_000,
        heartbeat_interval_ns: rail_timeout_ns / 5,
        down_rail_probe_interval_ns: rail_timeout_ns,
        ..Default::default()
    }
}

/// The buffer attached with MPI_Buffer_attach.
#[derive(Debug, Default)]
pub struct BsendBuffer {
    /// Start of the user's buffer.
    pub address: usize,
    /// Its size.
    pub size_bytes: usize,
    /// Requests of buffered sends still in flight, with their charged bytes.
    pub in_flight: Vec<(u32, usize)>,
}

/// The fault-tolerance protocol of this build of the library. The
/// default build is `PassThrough` (`--ft none`): the engine without hooks,
/// instruction for instruction. Built with the `replication` feature (the
/// library `mpiexec --replicas R --replica-masking process` loads), it is
/// the replication protocol, so that a build never pays for a protocol it
/// does not run (see docs/design.md, "Replication in the engine").
#[cfg(not(any(feature = "replication", feature = "msglog")))]
pub type JobProtocol = resmpi_ft::PassThrough;
/// The fault-tolerance protocol of this build of the library: replication.
#[cfg(feature = "replication")]
pub type JobProtocol = resmpi_replication::Replication;
/// The fault-tolerance protocol of this build of the library: pessimistic
/// message logging (`mpiexec --msglog pessimistic`).
#[cfg(feature = "msglog")]
pub type JobProtocol = resmpi_msglog::MessageLog;

/// Whether this build's protocol allows calls from several threads at once
/// (MPI_THREAD_MULTIPLE): not replication's nor message logging's, which
/// mirror or replay one sequence of calls per process.
pub const PROTOCOL_ALLOWS_THREADS: bool = !cfg!(any(feature = "replication", feature = "msglog"));

#[cfg(all(feature = "replication", feature = "msglog"))]
compile_error!("one library runs one protocol: build `replication` and `msglog` separately");

/// This build's protocol for process `rank` of a job mapped by `replicas`.
#[cfg(not(any(feature = "replication", feature = "msglog")))]
fn job_protocol(_rank: u32, _replicas: Replicas, config: &Config) -> MpiResult<JobProtocol> {
    if config.msglog != resmpi_runtime::MessageLogging::None {
        return fail(
            ErrorClass::Other,
            "MPI_Init: RESMPI_MSGLOG asks for message logging, but this is the library without it; \
             mpiexec --msglog puts the message-logging build (lib/msglog, which make builds) first \
             on the library path: is it there?",
        );
    }
    Ok(resmpi_ft::PassThrough)
}

/// This build's protocol for process `rank`: the message log, sized by
/// `RESMPI_MSGLOG_MEM`. Refused unless the job asked for it: this build
/// is only ever loaded by `mpiexec --msglog`.
#[cfg(feature = "msglog")]
fn job_protocol(rank: u32, replicas: Replicas, config: &Config) -> MpiResult<JobProtocol> {
    if config.msglog == resmpi_runtime::MessageLogging::None {
        return fail(
            ErrorClass::Other,
            "MPI_Init: this is resmpi's message-logging library (lib/msglog); it runs only under \
             mpiexec --msglog pessimistic or optimistic (RESMPI_MSGLOG)",
        );
    }
    if replicas.count > 1 {
        return fail(
            ErrorClass::Other,
            "MPI_Init: message logging with replicas is not supported",
        );
    }
    let spill_directory = config
        .msglog_spill_dir
        .clone()
        .or_else(|| std::env::var("TMPDIR").ok().filter(|dir| !dir.is_empty()))
        .unwrap_or_else(|| "/tmp".to_string());
    let spill = resmpi_msglog::spill::SpillConfig::new(
        spill_directory,
        config
            .msglog_disk_bytes_max
            .unwrap_or(resmpi_msglog::spill::SPILL_BYTES_MAX_DEFAULT),
    );
    // The event logger mpiexec started for the job (outside the world):
    // without it no determinant is ever acked, so no send could start.
    let variable = resmpi_msglog::logger_link::ADDRESS_VARIABLE;
    let logger_address = std::env::var(variable)
        .ok()
        .and_then(|text| text.parse::<std::net::SocketAddr>().ok());
    let Some(logger_address) = logger_address else {
        return fail(
            ErrorClass::Other,
            format!(
                "MPI_Init: message logging needs the job's event logger, which mpiexec --msglog \
                 starts and names in {variable} (not set, or not ip:port)"
            ),
        );
    };
    let protocol = resmpi_msglog::MessageLog::new(
        rank,
        replicas.ranks,
        config.incarnation,
        config
            .msglog_bytes_max
            .unwrap_or(resmpi_msglog::LOG_BYTES_MAX_DEFAULT),
    )
    .with_spill(spill)
    .with_huge_pages(
        std::env::var(resmpi_msglog::HUGE_PAGES_VARIABLE).is_ok_and(|value| value == "1"),
    )
    .with_logger_link(Box::new(resmpi_msglog::logger_link::TcpLink::new(
        logger_address,
    )));
    Ok(match config.msglog {
        resmpi_runtime::MessageLogging::Optimistic => {
            protocol.optimistic().with_rollback_exit(exit_for_rollback)
        }
        _ => protocol,
    })
}

/// An orphan of optimistic message logging whose rollback is durable
/// ends here: it says why and exits at once with the status mpiexec
/// starts a rank again for (`_exit`: no handler of the program's runs,
/// nothing of its state is worth keeping; its replacement replays).
#[cfg(feature = "msglog")]
fn exit_for_rollback(line: &str) {
    eprintln!("{line}");
    // SAFETY: _exit ends the process; it has no precondition.
    unsafe { libc::_exit(resmpi_msglog::ROLLBACK_EXIT_CODE) }
}

/// This build's protocol for process `rank` of a job mapped by `replicas`.
#[cfg(feature = "replication")]
fn job_protocol(rank: u32, replicas: Replicas, config: &Config) -> MpiResult<JobProtocol> {
    if config.msglog != resmpi_runtime::MessageLogging::None {
        return fail(
            ErrorClass::Other,
            "MPI_Init: message logging with replicas is not supported",
        );
    }
    let sdc = match config.sdc {
        resmpi_runtime::SdcChoice::Report => resmpi_replication::SdcPolicy::Report,
        resmpi_runtime::SdcChoice::Abort => resmpi_replication::SdcPolicy::Abort,
        resmpi_runtime::SdcChoice::Vote => resmpi_replication::SdcPolicy::Vote,
    };
    let mut protocol = resmpi_replication::Replication::new(rank, replicas.ranks, replicas.count)
        .with_sdc_policy(sdc);
    if config.replica_recovery {
        if config.replica_anysource_agree {
            return fail(
                ErrorClass::Other,
                "MPI_Init: --replica-recovery now with --replica-anysource agree is not supported \
                 (a forked replica would inherit its forker's place in the agreement)",
            );
        }
        protocol = protocol.with_recovery();
    }
    Ok(if config.replica_anysource_agree {
        protocol.with_anysource_agreement()
    } else {
        protocol
    })
}

/// One MPI process's library state.
pub struct Mpi {
    /// How the job's processes map to ranks (`--replicas`).
    pub replicas: Replicas,
    /// The progress engine.
    pub engine: Engine<JobProtocol>,
    pmi: Pmi,
    /// Next context id this process has not used.
    next_context: u32,
    /// MPI_Comm_idup contexts this process has handed out as a leader.
    idups_led: u32,
    /// Calls of several threads may be in the library at once
    /// (MPI_THREAD_MULTIPLE): context agreements take turns
    /// ([`Mpi::agree_context`]).
    pub threads_multiple: bool,
    /// Under `threads_multiple`: the parent contexts of the communicator
    /// creations waiting to agree on a context, and the one whose turn it
    /// is (its thread is in the agreement).
    context_turns: ContextTurns,
    /// Ports opened with MPI_Open_port and not closed (`dpm.rs`).
    ports: dpm::Ports,
    /// MPI_Comm_get_parent: the inter-communicator to the parents of a
    /// spawned process (`spawn.rs`).
    pub parent: Option<usize>,
    /// MPI_Buffer_attach state.
    pub bsend: BsendBuffer,
    /// MPI_Get_processor_name.
    pub processor_name: String,
    /// Configuration read at init.
    pub config: Config,
}

/// hydra (`mpiexec.hydra -disable-auto-cleanup`) tells the processes of a
/// job that one of them died by sending each SIGUSR1, whose default action
/// ends the process: a replicated job that should mask the death would
/// lose every process instead. The replication protocol learns of the
/// death on its own (the dead process's pidfd, a lost connection), so the
/// signal is taken by a handler that does nothing. A handler rather than
/// SIG_IGN: a program the process `exec`s gets the default action back, as
/// an ignored signal would not. A program that installs its own SIGUSR1
/// handler before `MPI_Init` keeps it (only the default is replaced), and
/// one that installs it after replaces this one.
fn survive_hydra_failure_signal() {
    extern "C" fn ignore(_signal: libc::c_int) {}
    // SAFETY: sigaction with a zeroed, then filled, action and a handler
    // that touches nothing; the current action is read first and only a
    // default one is replaced.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut current) != 0
            || current.sa_sigaction != libc::SIG_DFL
        {
            return;
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
    }
}

/// How the processes of a job map to MPI ranks under `--replicas`
/// (`RESMPI_REPLICAS`). Process (PMI rank) `p` runs replica `p / ranks` of
/// rank `p % ranks`: the engine and the links speak processes, while
/// MPI_COMM_WORLD of replica k holds the `ranks` processes of replica k, so
/// everything above the engine (groups, communicators, collectives) is the
/// same program in every replica, and replica k of a rank talks to replica
/// k of the others, which is the parallel protocol's data path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replicas {
    /// Ranks of MPI_COMM_WORLD.
    pub ranks: u32,
    /// Replicas of each rank (1 without replication).
    pub count: u32,
}

impl Replicas {
    /// The mapping of a job of `process_count` processes with
    /// `replica_count` replicas per rank; an error when they do not divide.
    pub fn of_job(process_count: u32, replica_count: u32) -> MpiResult<Replicas> {
        if replica_count == 0 || !process_count.is_multiple_of(replica_count) {
            return fail(
                ErrorClass::Other,
                format!(
                    "MPI_Init: RESMPI_REPLICAS={replica_count} does not divide the job's {process_count} processes"
                ),
            );
        }
        Ok(Replicas {
            ranks: process_count / replica_count,
            count: replica_count,
        })
    }

    /// The rank process `process` runs.
    pub fn rank_of(&self, process: u32) -> u32 {
        process % self.ranks
    }

    /// The replica index of process `process`.
    pub fn replica_of(&self, process: u32) -> u32 {
        process / self.ranks
    }

    /// MPI_COMM_WORLD's group as process `process` sees it: the processes
    /// of its own replica, by rank.
    pub fn world_group(&self, process: u32) -> Vec<u32> {
        let first = self.replica_of(process) * self.ranks;
        (first..first + self.ranks).collect()
    }
}

impl Mpi {
    /// MPI_Init: read the configuration, wire up, build WORLD and SELF.
    pub fn init(default_errhandler: i32) -> MpiResult<Mpi> {
        let config = Config::from_env()
            .map_err(|message| MpiError::new(ErrorClass::Other, format!("MPI_Init: {message}")))?;
        let mut pmi = Pmi::from_env()
            .map_err(|error| MpiError::new(ErrorClass::Other, format!("MPI_Init: {error}")))?;
        // A spawned child reaches its siblings and its parents over TCP,
        // its endpoint past the parents' (`spawn.rs`).
        let spawn_parent = spawn::child_parent()?;
        // The replication protocol masks a replica's death, even one inside
        // MPI_Init: its notices are watched from before the wire-up, which
        // goes on without a peer they report dead.
        let masks_deaths = cfg!(feature = "replication") && config.replica_count > 1;
        // Only resmpi's mpiexec (which always sets RESMPI_FAILURE_POLICY)
        // sends failure notices; hydra and Slurm refuse the request (hydra
        // ends the job on an unknown PMI command). There the library's own
        // detection (a local peer's pidfd, a lost connection) feeds the
        // same failure events.
        let launcher_sends_notices = config.failure_policy.is_some();
        if masks_deaths && !launcher_sends_notices {
            survive_hydra_failure_signal();
        }
        // A replacement watches them from before its re-join too: a peer
        // listed to connect to it may die first (`wire_up_replacement`).
        let replacement_watches = spawn_parent.is_none()
            && config.incarnation > 0
            && config.failure_policy == Some(FailurePolicy::Continue);
        let early_notices = if (masks_deaths
            && launcher_sends_notices
            && spawn_parent.is_none()
            && config.incarnation == 0)
            || replacement_watches
        {
            let notices = Arc::new(FailureNotices::new());
            pmi.watch_failures(notices.clone())
                .map_err(|error| MpiError::new(ErrorClass::Other, format!("MPI_Init: {error}")))?;
            Some(notices)
        } else {
            None
        };
        // A replacement process joins the running job instead (re-join).
        let mut departed = Vec::new();
        let (transports, live_peers) = if let Some((base, parent)) = &spawn_parent {
            (
                spawn::wire_up_child(&mut pmi, &config, *base, parent)?,
                None,
            )
        } else if config.incarnation > 0 {
            let (transports, live_peers) =
                wireup::wire_up_replacement(&mut pmi, &config, early_notices.as_deref())?;
            (transports, Some(live_peers))
        } else {
            let (transports, dead) = wireup::wire_up(&mut pmi, &config, early_notices.as_deref())?;
            departed = dead;
            (transports, None)
        };
        let (rank, size) = match &spawn_parent {
            Some((base, _)) => (base + pmi.rank(), base + pmi.size()),
            None => (pmi.rank(), pmi.size()),
        };
        // Enough credit for four maximal eager messages, otherwise 32 MiB of
        // unexpected payload per receiver shared by all senders, at most 1 MiB each.
        // RESMPI_EAGER_CREDIT overrides it (never below four eager messages).
        let eager_credit_bytes = config
            .eager_credit_bytes
            .unwrap_or(((32usize << 20) / size as usize).min(1 << 20))
            .max(4 * (config.eager_limit_bytes + 64));
        let engine_config = EngineConfig {
            eager_limit_bytes: config.eager_limit_bytes,
            eager_credit_bytes,
        };
        let reliable = config.reliable;
        let routes = transports.routes.clone();
        let held_send_warning = (config.held_send_warning_s > 0)
            .then(|| std::time::Duration::from_secs(config.held_send_warning_s));
        let rail_count = transports.rails.len().max(1) as u32;
        // The protocol is chosen here, once: this build's `JobProtocol`
        // (docs/design.md, "Interceptors"); `none` in the default build is
        // `Engine<PassThrough>`, exactly the engine without hooks.
        let replicas = Replicas::of_job(size, config.replica_count)?;
        if replicas.count > 1 && !masks_deaths && !launcher_sends_notices && rank == 0 {
            // Without resmpi's mpiexec nobody gives up a replica, and this
            // build has no protocol that masks one process's death: say so
            // once, before a death shows it.
            eprintln!(
                "resmpi: RESMPI_REPLICAS={} without resmpi's mpiexec and without the replication \
                 build of the library: a process's death will end the job; put \
                 <prefix>/lib/replication first on LD_LIBRARY_PATH to mask it",
                replicas.count
            );
        }
        let protocol = match resmpi_ft::Mode::from_name(&config.ft_protocol) {
            Ok(resmpi_ft::Mode::None) => job_protocol(rank, replicas, &config)?,
            Err(problem) => {
                return fail(ErrorClass::Other, format!("MPI_Init: RESMPI_FT: {problem}"))
            }
        };
        let mut engine = Engine::new(rank, size, engine_config, transports, protocol);
        engine.held_send_warning = held_send_warning;
        // Small blocking collectives over shared memory (protocol `none`
        // only: the fast path sends no message a protocol could log).
        // Not under message logging either: a restarted rank's collectives
        // replay from the sender logs, which only messages fill.
        engine.shared_memory.enabled = coll::shared_memory::enabled_by_environment()
            .map_err(|problem| MpiError::new(ErrorClass::Other, format!("MPI_Init: {problem}")))?
            && engine.transports.shm.is_some()
            && !cfg!(feature = "msglog");
        let local_ranks = (0..size)
            .filter(|&peer| {
                matches!(
                    engine.transports.routes[peer as usize],
                    transport::Route::Shm | transport::Route::Loopback
                )
            })
            .count();
        engine.shared_memory.spin_rounds = coll::shared_memory::spin_rounds_for(local_ranks);
        engine.shared_memory.tree_min_members =
            coll::shared_memory::tree_min_members_by_environment().map_err(|problem| {
                MpiError::new(ErrorClass::Other, format!("MPI_Init: {problem}"))
            })?;
        if reliable {
            engine.links = reliability::ReliableLinks::new(
                rank,
                size,
                reliable_config(&config, rail_count),
                config.checksums,
                config.debug_rails,
                |peer| routes[peer as usize] == transport::Route::Tcp,
            );
        }
        if replicas.count > 1 {
            // Each replica's collectives must be messages (which the
            // parallel protocol will acknowledge), and the replicas of a
            // communicator share its context id, so they must not share its
            // shared-memory area either.
            engine.shared_memory.enabled = false;
            // Until the parallel protocol masks one process's death, the
            // launcher gives up a whole replica when one of its processes
            // dies: the others must take the loss of a process they never
            // talk to for an event, not a fatal error.
            engine.failures_are_events = true;
            engine.links.unreachable_is_failure = true;
        }
        let (world_group, world_rank) = match &spawn_parent {
            Some((base, _)) => ((*base..size).collect(), rank - base),
            None => (replicas.world_group(rank), replicas.rank_of(rank)),
        };
        let world = Communicator::new(
            comm::WORLD_CONTEXT,
            Arc::new(world_group),
            world_rank,
            default_errhandler,
            "MPI_COMM_WORLD".into(),
        );
        let own = Communicator::new(
            comm::SELF_CONTEXT,
            Arc::new(vec![rank]),
            0,
            default_errhandler,
            "MPI_COMM_SELF".into(),
        );
        engine.state.comms = vec![Some(world), Some(own)];
        // `--inject kill:RANK@sends=N`: this process kills itself after its
        // N-th send (the launcher carries out the timed kills).
        // A replacement is not killed again by the same item.
        let target = resmpi_path::inject_spec::ProcessTarget {
            rank: replicas.rank_of(rank),
            replica: replicas.replica_of(rank),
        };
        if let Some(sends) = wireup::injection_spec(&config)?.kill_after_sends_of(target) {
            if config.incarnation == 0 {
                engine.state.sends_until_kill = sends;
            }
        }
        engine.set_own_incarnation(config.incarnation);
        // Peers that died inside MPI_Init (process replication): dead
        // before the first send, as their notices will say again.
        for &peer in &departed {
            engine.handle_peer_failure(peer);
        }
        if let Some(live_peers) = live_peers {
            for (peer, incarnation) in &live_peers {
                engine.assume_peer_incarnation(*peer, *incarnation);
            }
            for peer in 0..size {
                if peer != rank && !live_peers.iter().any(|(live, _)| *live == peer) {
                    engine.handle_peer_failure(peer);
                }
            }
        }
        // No resmpi launcher (Slurm, hydra): nobody tells of a local death.
        engine.watches_local_exits = config.failure_policy.is_none();
        // The replication protocol masks a replica's death: it must hear
        // of it from the launcher.
        if config.failure_policy == Some(FailurePolicy::Continue) || masks_deaths {
            // The job outlives a death: learn of it from the launcher, and
            // take a peer the network loses for the same event.
            let notices = match early_notices {
                Some(notices) => Some(notices),
                None if launcher_sends_notices => {
                    let notices = Arc::new(FailureNotices::new());
                    wireup::pause_before_watching_for_tests(rank);
                    pmi.watch_failures(notices.clone()).map_err(|error| {
                        MpiError::new(ErrorClass::Other, format!("MPI_Init: {error}"))
                    })?;
                    Some(notices)
                }
                None => None,
            };
            if let Some(notices) = notices {
                engine.watch_notices(notices);
            }
            engine.failures_are_events = true;
            // ULFM's rule; under message logging a death is masked, not
            // reported to the application.
            engine.state.wildcards_wait_for_acknowledgement = !cfg!(feature = "msglog");
            engine.links.unreachable_is_failure = true;
        }
        let mut mpi = Mpi {
            replicas,
            engine,
            pmi,
            next_context: comm::FIRST_FREE_CONTEXT,
            parent: None,
            idups_led: 0,
            threads_multiple: false,
            context_turns: ContextTurns::default(),
            ports: dpm::Ports::default(),
            bsend: BsendBuffer::default(),
            processor_name: wireup::processor_name(),
            config,
        };
        if let Some((_, parent)) = spawn_parent {
            mpi.adopt_parent(&parent);
        }
        Ok(mpi)
    }

    /// World rank.
    pub fn rank(&self) -> u32 {
        self.engine.state.rank
    }

    /// Whether this host has a core beyond one per rank of the job on it:
    /// a helper thread (MPI-IO's overlapped writes) then runs beside the
    /// ranks instead of taking turns with them. On a 2-core host with 2
    /// ranks, a collective write whose aggregator wrote on a thread ran at
    /// 450-2650 MB/s against 2200-2700 without it.
    pub fn has_spare_core(&self) -> bool {
        let local_ranks = (0..self.size())
            .filter(|&peer| {
                matches!(
                    self.engine.transports.routes[peer as usize],
                    transport::Route::Shm | transport::Route::Loopback
                )
            })
            .count();
        std::thread::available_parallelism().map_or(1, |cores| cores.get()) > local_ranks
    }

    /// World size.
    pub fn size(&self) -> u32 {
        self.engine.state.size
    }

    /// MPI_UNIVERSE_SIZE as the process manager reports it (in ranks: the
    /// replicas of one rank count once).
    pub fn universe_size(&self) -> u32 {
        self.pmi.universe_size() / self.replicas.count
    }

    /// MPI_Finalize: finish outgoing traffic, synchronise, leave the job.
    pub fn finalize(&mut self) -> MpiResult<()> {
        self.engine.drain()?;
        // A peer that passed the barrier may close its connections while we
        // still wait for others; the launcher reports a real death.
        self.engine.state.finalizing = true;
        self.engine.links.let_peers_leave();
        // ULFM: a revoked MPI_COMM_WORLD still synchronises the survivors
        // here (every member counted the revoked collectives alike, so
        // the barrier's sequence number matches everywhere).
        if let Some(Some(world)) = self.engine.state.comms.get_mut(WORLD) {
            world.revoked = false;
        }
        match self.barrier(WORLD) {
            // A dead process cannot join the barrier; the survivors still
            // leave together (each waited for every live peer's message).
            // (Its own notice may not be here yet: a partner's flagged data
            // can fail the barrier first.)
            Err(error)
                if error.class == ErrorClass::ProcFailed
                    && (self.engine.state.failed_count > 0 || self.engine.failures_are_events) => {}
            other => other?,
        }
        // Message logging: a peer that dies now replays from MPI_Init and
        // needs this process's sender log; stay until every rank is through.
        self.engine.wait_until_peers_need_no_replay()?;
        self.engine.drain()?;
        self.put_ft_report();
        self.pmi
            .finalize()
            .map_err(|error| MpiError::new(ErrorClass::Other, format!("MPI_Finalize: {error}")))
    }

    /// The fault-tolerance counters of this rank, as (name, value).
    pub fn ft_counters(&self) -> Vec<(&'static str, u64)> {
        let mut counters = self.engine.links.report();
        let mut injected = [0u64; 5];
        for rail in &self.engine.transports.rails {
            let stats = rail.stats();
            injected[0] += stats.frames_dropped;
            injected[1] += stats.frames_corrupted;
            injected[2] += stats.frames_duplicated;
            injected[3] += stats.frames_delayed;
            injected[4] += stats.frames_swallowed_rail_down;
        }
        counters.extend([
            ("injected_dropped", injected[0]),
            ("injected_corrupted", injected[1]),
            ("injected_duplicated", injected[2]),
            ("injected_delayed", injected[3]),
            ("injected_swallowed_rail_down", injected[4]),
        ]);
        // Process-failure counters, named only when something happened
        // (mpiexec lists unknown counters as they come).
        let state = &self.engine.state;
        for (name, value) in [
            (
                "duplicate_messages_dropped",
                state.duplicate_messages_dropped,
            ),
            (
                "old_incarnation_frames_dropped",
                state.old_incarnation_frames_dropped,
            ),
            ("msglog_replayed_messages", state.messages_replayed),
        ] {
            if value > 0 {
                counters.push((name, value));
            }
        }
        counters.extend(
            state
                .interceptor
                .report_counters()
                .into_iter()
                .filter(|(_, value)| *value > 0),
        );
        counters
    }

    /// Publish this rank's counters for mpiexec's end-of-job report
    /// (`resmpi-report-<rank>` = `name=N;...`). Best effort: a launcher
    /// without a report just ignores the key.
    fn put_ft_report(&mut self) {
        let counters = self.ft_counters();
        if counters.iter().all(|(_, value)| *value == 0) {
            return;
        }
        let text: Vec<String> = counters
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        let _ = self.pmi.put(
            &format!("resmpi-report-{}", self.engine.state.wire_rank),
            &text.join(";"),
        );
        // One key per line, hex: a PMI-1 value holds no blank.
        for (index, line) in self
            .engine
            .state
            .interceptor
            .report_lines()
            .iter()
            .enumerate()
        {
            let _ = self.pmi.put(
                &format!("resmpi-report-line-{}-{index}", self.engine.state.wire_rank),
                &resmpi_runtime::hex_encode(line.as_bytes()),
            );
        }
    }

    /// MPI_Abort: tell the process manager, then exit. The FT report's
    /// counters go first (best effort): an abort is often what a fault
    /// ended in (an orphan of optimistic message logging says so in them).
    pub fn abort(&mut self, exit_code: i32, message: &str) -> ! {
        self.put_ft_report();
        self.pmi.abort(exit_code, message);
        std::process::exit(exit_code);
    }

    /// The communicator at `index`, or MPI_ERR_COMM.
    #[inline]
    pub fn comm(&self, index: usize) -> MpiResult<&Communicator> {
        match self.engine.state.comms.get(index) {
            Some(Some(comm)) => Ok(comm),
            _ => fail(ErrorClass::Comm, "invalid communicator"),
        }
    }

    /// Mutable communicator at `index`, or MPI_ERR_COMM.
    pub fn comm_mut(&mut self, index: usize) -> MpiResult<&mut Communicator> {
        match self.engine.state.comms.get_mut(index) {
            Some(Some(comm)) => Ok(comm),
            _ => fail(ErrorClass::Comm, "invalid communicator"),
        }
    }

    /// Store a new communicator, returning its index.
    pub fn add_comm(&mut self, comm: Communicator) -> usize {
        let comms = &mut self.engine.state.comms;
        let index = match comms.iter().skip(2).position(Option::is_none) {
            Some(free) => {
                comms[free + 2] = Some(comm);
                free + 2
            }
            None => {
                comms.push(Some(comm));
                comms.len() - 1
            }
        };
        // A member that finished creating it first may have revoked it.
        self.engine.apply_early_revocation(index);
        index
    }

    /// MPI_Comm_free.
    pub fn free_comm(&mut self, index: usize) -> MpiResult<()> {
        if index < 2 {
            return fail(ErrorClass::Comm, "cannot free a predefined communicator");
        }
        let hidden = self
            .comm(index)?
            .remote
            .as_ref()
            .map(|remote| remote.local_comm);
        self.engine.state.comms[index] = None;
        if let Some(hidden) = hidden {
            self.engine.state.comms[hidden] = None;
        }
        Ok(())
    }

    // ----- point to point ---------------------------------------------------

    /// Check a peer rank and tag for `comm_index` (`receive` allows the
    /// ANY_SOURCE / ANY_TAG wildcards); PROC_NULL is always valid.
    pub fn check_envelope(
        &self,
        comm_index: usize,
        rank: i32,
        tag: i32,
        receive: bool,
    ) -> MpiResult<()> {
        self.check_rank(self.comm(comm_index)?, rank, receive)?;
        Self::check_tag(tag, receive)
    }

    #[inline]
    fn check_rank(&self, comm: &Communicator, rank: i32, allow_any: bool) -> MpiResult<()> {
        let valid = (rank >= 0 && (rank as u32) < comm.peer_count())
            || rank == PROC_NULL
            || (allow_any && rank == ANY_SOURCE);
        if valid {
            Ok(())
        } else {
            Err(rank_error(rank, comm.peer_count()))
        }
    }

    #[inline]
    fn check_tag(tag: i32, allow_any: bool) -> MpiResult<()> {
        if (0..=TAG_UB).contains(&tag) || (allow_any && tag == ANY_TAG) {
            Ok(())
        } else {
            Err(tag_error(tag))
        }
    }

    /// Start a send of `length` bytes to comm rank `destination`.
    pub fn isend(
        &mut self,
        comm_index: usize,
        bytes: impl Into<user_bytes::UserBytes>,
        length: usize,
        destination: i32,
        tag: i32,
        mode: SendMode,
    ) -> MpiResult<u32> {
        let comm = self.comm(comm_index)?;
        self.check_rank(comm, destination, false)?;
        Self::check_tag(tag, false)?;
        if destination == PROC_NULL {
            return self.engine.start_nothing(comm_index, Status::proc_null());
        }
        let target = Destination {
            peer: comm.peer_world_rank(destination as u32),
            context: comm.context,
            tag,
        };
        if mode == SendMode::Buffered {
            return self.bsend(comm_index, bytes, length, target);
        }
        self.engine
            .start_send(comm_index, target, bytes, length, mode)
    }

    /// Blocking standard-mode send (MPI_Send, MPI_Rsend): eager messages
    /// skip the request table entirely.
    pub fn send(
        &mut self,
        comm_index: usize,
        bytes: impl Into<user_bytes::UserBytes>,
        length: usize,
        destination: i32,
        tag: i32,
    ) -> MpiResult<()> {
        // One look-up of the communicator serves the checks and the target.
        let comm = self.comm(comm_index)?;
        self.check_rank(comm, destination, false)?;
        Self::check_tag(tag, false)?;
        if destination == PROC_NULL {
            return Ok(());
        }
        let target = Destination {
            peer: comm.peer_world_rank(destination as u32),
            context: comm.context,
            tag,
        };
        let bytes = bytes.into();
        if self
            .engine
            .send_eager_without_request(target, bytes.clone(), length)?
        {
            return Ok(());
        }
        let index =
            self.engine
                .start_send(comm_index, target, bytes, length, SendMode::Standard)?;
        self.engine.wait_request(index)?;
        let error = self
            .engine
            .state
            .requests
            .remove(index)
            .map_or(0, |request| request.status.error);
        match ErrorClass::from_i32(error) {
            Some(ErrorClass::Success) | None if error == 0 => Ok(()),
            Some(ErrorClass::Revoked) => Err(engine::revoked_error()),
            Some(ErrorClass::ProcFailed) => Err(engine::peer_failed_error(target.peer)),
            class => Err(MpiError::new(
                class.unwrap_or(ErrorClass::Other),
                format!("send to rank {destination} failed"),
            )),
        }
    }

    fn bsend(
        &mut self,
        comm_index: usize,
        bytes: impl Into<user_bytes::UserBytes>,
        length: usize,
        target: Destination,
    ) -> MpiResult<u32> {
        let engine = &self.engine;
        self.bsend.in_flight.retain(|(index, _)| {
            engine
                .state
                .requests
                .get(*index)
                .is_some_and(|request| !request.complete)
        });
        let used: usize = self.bsend.in_flight.iter().map(|(_, bytes)| bytes).sum();
        let needed = length + BSEND_OVERHEAD_BYTES;
        if used + needed > self.bsend.size_bytes {
            return fail(
                ErrorClass::Buffer,
                format!(
                    "MPI_Bsend of {length} bytes needs {needed} bytes of attached buffer, {} free",
                    self.bsend.size_bytes.saturating_sub(used)
                ),
            );
        }
        let index =
            self.engine
                .start_send(comm_index, target, bytes, length, SendMode::Buffered)?;
        self.bsend.in_flight.push((index, needed));
        // The application's request is complete at once; it keeps the
        // internal send in the table (see `Operation::Buffered`), which is
        // released with it.
        self.engine.insert_request(Request {
            operation: Operation::Buffered { send: index },
            comm: comm_index,
            complete: true,
            status: Status {
                source: -1,
                tag: -1,
                error: 0,
                count_bytes: length,
                cancelled: false,
            },
            generation: 0,
            persistent: None,
            free_when_complete: false,
            inner: None,
        })
    }

    /// Wait until every buffered send has left (MPI_Buffer_detach).
    pub fn wait_bsends(&mut self) -> MpiResult<()> {
        let in_flight: Vec<u32> = self
            .bsend
            .in_flight
            .drain(..)
            .map(|(index, _)| index)
            .collect();
        for index in in_flight {
            self.engine.wait_request(index)?;
        }
        Ok(())
    }

    /// Post a receive from comm rank `source` (or ANY_SOURCE) with `tag` (or ANY_TAG).
    pub fn irecv(
        &mut self,
        comm_index: usize,
        bytes: impl Into<user_bytes::UserBytes>,
        capacity: usize,
        source: i32,
        tag: i32,
    ) -> MpiResult<u32> {
        let comm = self.comm(comm_index)?;
        self.check_rank(comm, source, true)?;
        Self::check_tag(tag, true)?;
        if source == PROC_NULL {
            return self.engine.start_nothing(comm_index, Status::proc_null());
        }
        let source_world = (source != ANY_SOURCE).then(|| comm.peer_world_rank(source as u32));
        let tag = (tag != ANY_TAG).then_some(tag);
        let context = comm.context;
        self.engine
            .start_receive(comm_index, bytes, capacity, source_world, tag, context)
    }

    /// Blocking receive (MPI_Recv): done here when the message could go
    /// straight into the buffer (`engine/direct_receive.rs`), otherwise a
    /// request to wait for and release as any.
    pub fn recv(
        &mut self,
        comm_index: usize,
        bytes: user_bytes::UserBytes,
        capacity: usize,
        source: i32,
        tag: i32,
    ) -> MpiResult<engine::BlockingReceive> {
        let comm = self.comm(comm_index)?;
        self.check_rank(comm, source, true)?;
        Self::check_tag(tag, true)?;
        if source == PROC_NULL {
            return Ok(engine::BlockingReceive::Done(Status::proc_null()));
        }
        let source_world = (source != ANY_SOURCE).then(|| comm.peer_world_rank(source as u32));
        let tag = (tag != ANY_TAG).then_some(tag);
        let context = comm.context;
        let started = self.engine.start_blocking_receive(
            comm_index,
            bytes,
            capacity,
            source_world,
            tag,
            context,
        )?;
        if started != engine::BlockingReceive::Waiting {
            return Ok(started);
        }
        match self
            .engine
            .wait_until(|engine| !engine.state.direct_receive_waiting())
        {
            Ok(()) => Ok(self.engine.poll_blocking_receive()),
            Err(error) => {
                self.engine.abandon_blocking_receive();
                Err(error)
            }
        }
    }

    /// Look for a matching message without receiving it (MPI_Iprobe);
    /// `remove` takes it (MPI_Improbe) and returns its message index. The
    /// outcome, found or not, is reported to the FT protocol.
    pub fn iprobe(
        &mut self,
        comm_index: usize,
        source: i32,
        tag: i32,
        remove: bool,
    ) -> MpiResult<Option<(Status, Option<usize>)>> {
        self.probe_until(comm_index, source, tag, remove, false)
    }

    /// Blocking probe (MPI_Probe, MPI_Mprobe with `remove`).
    pub fn probe(
        &mut self,
        comm_index: usize,
        source: i32,
        tag: i32,
        remove: bool,
    ) -> MpiResult<(Status, Option<usize>)> {
        let found = self.probe_until(comm_index, source, tag, remove, true)?;
        Ok(found.expect("a blocking probe returns what it found"))
    }

    /// A progress round, then looks ([`engine::Engine::probe`]) until the
    /// probe has its outcome: at once for a nonblocking one (found or
    /// not), unless a replay makes it wait for its logged message; for a
    /// `blocking` one, until it finds a message, with the rounds of every
    /// blocking loop in between ([`engine::Engine::progress_or_idle`]).
    fn probe_until(
        &mut self,
        comm_index: usize,
        source: i32,
        tag: i32,
        remove: bool,
        blocking: bool,
    ) -> MpiResult<Option<(Status, Option<usize>)>> {
        self.check_envelope(comm_index, source, tag, true)?;
        if source == PROC_NULL {
            return Ok(Some((Status::proc_null(), None)));
        }
        self.engine.progress()?;
        let mut idler = engine::Idler::default();
        let failures_before = self.engine.state.failed_count;
        loop {
            let comm = self.comm(comm_index)?;
            if comm.revoked {
                return Err(engine::revoked_error());
            }
            let pattern = resmpi_matching::ReceivePattern {
                context: comm.context,
                source: (source != ANY_SOURCE).then(|| comm.peer_world_rank(source as u32)),
                tag: (tag != ANY_TAG).then_some(tag),
            };
            match self.engine.probe(comm_index, pattern, remove, blocking)? {
                engine::ProbeLook::Found(found) => {
                    let comm = self.comm(comm_index)?;
                    let status = Status {
                        source: comm
                            .comm_rank_of(found.envelope.source)
                            .map_or(-1, |rank| rank as i32),
                        tag: found.envelope.tag,
                        error: 0,
                        count_bytes: found.length_bytes,
                        cancelled: false,
                    };
                    return Ok(Some((status, found.message)));
                }
                engine::ProbeLook::Missed => {
                    let nothing = self.nothing_to_probe(&pattern)?;
                    if !blocking {
                        return Ok(nothing);
                    }
                }
                engine::ProbeLook::Retry => {}
            }
            // A wildcard probe may have waited for a process that died
            // meanwhile: it fails, as a pending wildcard receive does.
            if blocking && source == ANY_SOURCE && self.engine.state.failed_count > failures_before
            {
                let comm = self.comm(comm_index)?;
                if let Some(&dead) = comm.members().find(|&&peer| self.engine.peer_failed(peer)) {
                    return Err(engine::peer_failed_error(dead));
                }
            }
            self.engine.progress_or_idle(&mut idler)?;
        }
    }

    /// A probe found nothing: fine, unless it names a process that has
    /// failed (nothing from it will ever come).
    fn nothing_to_probe<T>(
        &self,
        pattern: &resmpi_matching::ReceivePattern,
    ) -> MpiResult<Option<T>> {
        match pattern.source {
            Some(source) if self.engine.peer_failed(source) => {
                Err(engine::peer_failed_error(source))
            }
            _ => Ok(None),
        }
    }

    /// Receive a message taken by MPI_Mprobe into `buffer`.
    pub fn imrecv(
        &mut self,
        message: usize,
        bytes: impl Into<user_bytes::UserBytes>,
        capacity: usize,
    ) -> MpiResult<u32> {
        let Some(Some(_)) = self.engine.state.probed_messages.get(message) else {
            return fail(
                ErrorClass::Request,
                "invalid or already received MPI_Message",
            );
        };
        let (envelope, unexpected, comm_index) = self.engine.state.probed_messages[message]
            .take()
            .expect("checked");
        let pattern_source = Some(envelope.source);
        let index = self.engine.insert_request(request::Request {
            operation: request::Operation::Receive(request::ReceiveState {
                bytes: bytes.into(),
                capacity,
                total: 0,
                received: 0,
                pattern: resmpi_matching::ReceivePattern {
                    context: envelope.context,
                    source: pattern_source,
                    tag: Some(envelope.tag),
                },
                matched: false,
                sender: None,
            }),
            comm: comm_index,
            complete: false,
            status: Status::default(),
            generation: 0,
            persistent: None,
            free_when_complete: false,
            inner: None,
        })?;
        self.engine.receive_probed(index, envelope, unexpected);
        Ok(index)
    }

    // ----- communicators -----------------------------------------------------

    /// Agree on a context id unused by every member of `comm_index`: the
    /// largest next free context among them.
    ///
    /// Under MPI_THREAD_MULTIPLE two threads may agree at once (on
    /// distinct parents) and, since the allreduce lets other threads in,
    /// both would offer the same next free context. So agreements take
    /// turns, as MPICH's context-id masks do: one thread per process at a
    /// time offers its context, the one whose parent has the lowest context
    /// among those waiting (so that some agreement always succeeds on every
    /// member); a thread without the turn offers [`CONTEXT_TURN_TAKEN`],
    /// and an agreement that any member sat out that way is tried again by
    /// all. A single-threaded process never sits out, so it agrees in one
    /// allreduce as before, and it joins the retries of a peer that does.
    fn agree_context(&mut self, comm_index: usize) -> MpiResult<u32> {
        let parent = self.comm(comm_index)?;
        // A communicator of this process alone, under MPI_THREAD_MULTIPLE,
        // takes its context from the space only this process allocates
        // from (MPI_Comm_idup's), without a turn: a thread duplicating
        // MPI_COMM_SELF while another holds the turn, waiting for a peer
        // whose thread does the same, would otherwise wait for ever
        // (MPICH's comm_dup_deadlock), and it must not take the context the
        // turn's holder offered either.
        let solo = parent.group.len() == 1;
        if self.threads_multiple
            && solo
            && self.size() <= 1 << IDUP_LEADER_BITS
            && self.idups_led < 1 << IDUP_COUNT_BITS
        {
            let context =
                IDUP_CONTEXT_BIT | (self.rank() << (IDUP_COUNT_BITS + 1)) | (self.idups_led << 1);
            self.idups_led += 1;
            return Ok(context);
        }
        let takes_turns = self.threads_multiple;
        let parent = parent.context;
        if takes_turns {
            self.context_turns.waiting.push(parent);
        }
        let agreed = loop {
            let has_turn = !takes_turns || self.context_turns.take(parent);
            let mine = if has_turn {
                self.next_context as i64
            } else {
                CONTEXT_TURN_TAKEN
            };
            let agreed = self.allreduce_i64_max(comm_index, mine);
            if takes_turns && has_turn {
                self.context_turns.turn = None;
            }
            match agreed {
                // Let the thread with the turn finish (an allreduce among
                // one process never waits, so would never let it in).
                Ok(CONTEXT_TURN_TAKEN) => self.engine.between_rounds(engine::Pause::Yield, 0),
                other => break other,
            }
        };
        if takes_turns {
            self.context_turns.leave(parent);
        }
        let agreed = agreed? as u32;
        self.next_context = self.next_context.max(agreed + 2);
        Ok(agreed)
    }

    /// MPI_Comm_idup without blocking: the duplicate is stored at once with
    /// no usable context, and the returned request broadcasts one from the
    /// parent's rank 0 into the returned cell; when the request completes
    /// the caller installs it ([`Mpi::set_comm_context`]).
    ///
    /// No agreement is needed, so any number of idups may be in flight on
    /// overlapping communicators: the leader takes the context from a
    /// space only it allocates from (`IDUP_CONTEXT_BIT`, its world rank,
    /// its own count of idups led), so no two communicators anywhere get
    /// the same one (an inter-communicator's leader is that of the group
    /// whose leader has the lower world rank). Jobs too large for the space
    /// (over 4096 ranks) duplicate eagerly (blocking) and return a
    /// completed request.
    pub fn comm_idup_start(&mut self, comm_index: usize) -> MpiResult<(usize, u32, Box<[u8]>)> {
        let parent = self.comm(comm_index)?.clone();
        if self.size() > 1 << IDUP_LEADER_BITS {
            let new_index = self.comm_dup(comm_index)?;
            let context = self.comm(new_index)?.context;
            let request = self.engine.start_nothing(new_index, Status::default())?;
            return Ok((
                new_index,
                request,
                context.to_ne_bytes().to_vec().into_boxed_slice(),
            ));
        }
        // An inter-communicator's context comes from the leader of the
        // group whose leader has the lower world rank, and takes two
        // allocations (four ids: point-to-point, leaders, hidden local pair).
        let leads = match &parent.remote {
            Some(remote) => parent.group[0] < remote.group[0],
            None => true,
        };
        let allocations = if parent.is_inter() { 2 } else { 1 };
        let mut cell = vec![0u8; 4].into_boxed_slice();
        if leads && parent.rank == 0 {
            if self.idups_led + allocations > 1 << IDUP_COUNT_BITS {
                return fail(
                    ErrorClass::Intern,
                    format!(
                        "this process led {} MPI_Comm_idup calls, the most resmpi can",
                        self.idups_led
                    ),
                );
            }
            let context =
                IDUP_CONTEXT_BIT | (self.rank() << (IDUP_COUNT_BITS + 1)) | (self.idups_led << 1);
            self.idups_led += allocations;
            cell.copy_from_slice(&context.to_ne_bytes());
        }
        let mut schedule = self.engine.new_schedule(comm_index)?;
        if parent.is_inter() {
            coll::inter::spread_from_leader(&mut schedule, cell.as_mut_ptr(), cell.len(), leads);
        } else {
            coll::bcast(&mut schedule, cell.as_mut_ptr(), cell.len(), 0);
        }
        let request = self.engine.start_schedule(schedule)?;
        let new_index = match &parent.remote {
            Some(remote) => self.add_intercomm(UNSET_CONTEXT, &parent, remote.group.clone()),
            None => {
                let mut comm = Communicator::new(
                    UNSET_CONTEXT,
                    parent.group.clone(),
                    parent.rank,
                    parent.errhandler,
                    String::new(),
                );
                comm.topology = parent.topology.clone();
                self.add_comm(comm)
            }
        };
        Ok((new_index, request, cell))
    }

    /// Install the context an MPI_Comm_idup request delivered (and its
    /// hidden local communicator's, for an inter-communicator).
    pub fn set_comm_context(&mut self, comm_index: usize, context: u32) -> MpiResult<()> {
        let comm = self.comm_mut(comm_index)?;
        comm.context = context;
        if let Some(local) = comm.remote.as_ref().map(|remote| remote.local_comm) {
            self.comm_mut(local)?.context = context + 2;
        }
        Ok(())
    }

    /// MPI_Comm_dup: same group(s), errhandler and topology, a new context.
    pub fn comm_dup(&mut self, comm_index: usize) -> MpiResult<usize> {
        let parent = self.comm(comm_index)?.clone();
        if parent.is_inter() {
            return self.intercomm_dup(&parent);
        }
        let context = self.agree_context(comm_index)?;
        let mut comm = Communicator::new(
            context,
            parent.group.clone(),
            parent.rank,
            parent.errhandler,
            String::new(),
        );
        comm.topology = parent.topology.clone();
        Ok(self.add_comm(comm))
    }

    /// MPI_Comm_split; None when `color` is MPI_UNDEFINED.
    pub fn comm_split(
        &mut self,
        comm_index: usize,
        color: i32,
        key: i32,
        undefined: i32,
    ) -> MpiResult<Option<usize>> {
        let parent = self.comm(comm_index)?.clone();
        if color < 0 && color != undefined {
            return fail(
                ErrorClass::Arg,
                format!("color {color} is negative and not MPI_UNDEFINED"),
            );
        }
        if parent.is_inter() {
            return self.intercomm_split(comm_index, color, key, undefined);
        }
        let mut mine = Vec::with_capacity(8);
        mine.extend_from_slice(&color.to_ne_bytes());
        mine.extend_from_slice(&key.to_ne_bytes());
        let all = self.allgather_bytes(comm_index, &mine)?;
        let context = self.agree_context(comm_index)?;
        if color == undefined {
            return Ok(None);
        }
        let group = intercomm::members_of_color(&all, &parent.group, color);
        let me = self.rank();
        let my_rank = group
            .iter()
            .position(|world| *world == me)
            .expect("member of own color") as u32;
        let comm = Communicator::new(
            context,
            Arc::new(group),
            my_rank,
            parent.errhandler,
            String::new(),
        );
        Ok(Some(self.add_comm(comm)))
    }
}

/// MPI_ERR_RANK for `rank` on a communicator of `size` (out of line: the
/// checks on the hot path stay a few compares).
#[cold]
fn rank_error(rank: i32, size: u32) -> MpiError {
    MpiError::new(
        ErrorClass::Rank,
        format!("rank {rank} is out of range (communicator size {size})"),
    )
}

/// MPI_ERR_TAG for `tag`.
#[cold]
fn tag_error(tag: i32) -> MpiError {
    MpiError::new(
        ErrorClass::Tag,
        format!("tag {tag} is invalid (valid: 0..={TAG_UB})"),
    )
}
