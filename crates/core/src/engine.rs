//! The progress engine: turns MPI point-to-point operations into frames on
//! paths and incoming frames into completed requests.
//!
//! Protocols: a message of at most `eager_limit_bytes` travels in one
//! `Eager` frame if the sender holds enough eager credit for that peer
//! (credit bounds what a receiver ever buffers for unexpected messages:
//! back-pressure, not unbounded memory); anything else goes by rendezvous
//! (`RequestToSend` -> `ClearToSend` -> `Data` fragments written straight
//! into the matched receive buffer). `MPI_Ssend` asks for a `SyncAck`.
//!
//! Every operation is driven by [`Engine::progress`], called from MPI calls;
//! blocked callers spin briefly, then yield, then sleep on the path's
//! doorbell so oversubscribed ranks leave the CPU to their peers.
//!
//! A dead peer is an event, not an error that poisons the library
//! ([`Engine::handle_peer_failure`]): the engine marks it failed, ends with
//! `MPIX_ERR_PROC_FAILED` exactly the requests that need it (sends to it,
//! receives from it, wildcard receives pending on a communicator that holds
//! it), drops what was queued for it and everything it still sends, and
//! every later operation on it fails at once. Everything else goes on, so a
//! collective's schedule runs to its end on every survivor and no call
//! waits for ever on a dead peer. The death arrives from the launcher's
//! notice ([`resmpi_runtime::FailureNotices`], checked with one atomic load
//! per progress call) or from the network layer (a connection closed, a
//! peer unreachable on every rail), and both end in the same call.
//!
//! The fault-tolerance protocol (`F: Interceptor`) is consulted where it
//! may change what happens: the targets of every send (fan-out to
//! replicas, redirect to a substitute), the source of every ANY_SOURCE
//! receive (pinned or deferred during replay); and told what it may need to
//! log: every payload sent, every match, probe and any/some completion
//! choice. It owns a control-frame subtype (`CONTROL_PROTOCOL`) and its
//! own timers. Each of these is behind an associated constant of `F`, so
//! with `PassThrough` the engine compiles to what it was without them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use resmpi_ft::{
    CompletionCall, CompletionChoice, Interceptor, MessageArrival, PassThrough, Payload,
    PeerFailureAction, ProbeOutcome, ReplayedChoice, SendEnvelope, SendTargets, SentMessage,
    WildcardDecision,
};
use resmpi_matching::{Envelope, Matcher, ReceivePattern};
use resmpi_path::{Path, PathError, Placed, Placement};
use resmpi_wire::{
    FrameHeader, FrameKind, FLAG_ACK_NOW, FLAG_FAILURE_TAINTED, FLAG_SYNC, HEADER_LEN_BYTES,
};

use crate::comm::Communicator;
use crate::error::{fail, ErrorClass, MpiError, MpiResult};
use crate::reliability::{Check, LentBytes, Loan, ReliableLinks};
use crate::request::{Operation, Request, RequestTable, SendMode, SendStage, SendState, Status};
use crate::transport::Transports;
use crate::user_bytes::UserBytes;
use resmpi_checksum::crc32c;
use resmpi_runtime::FailureNotices;

mod direct_receive;
mod fork;
mod position;
mod rejoin;
mod replay;
pub mod rma;
mod single_copy;
mod ulfm;

pub use direct_receive::BlockingReceive;
use direct_receive::{DirectReceive, DIRECT_RECEIVE_TOKEN};
pub use position::{logs_messages, CheckpointPosition, CollectivePosition};

use rma::{CONTROL_RMA, CONTROL_RMA_PUT_DATA, CONTROL_RMA_REPLY_DATA};
pub use ulfm::revoked_error;
use ulfm::CONTROL_ULFM;

/// Control-frame subtype (in `message_id`): eager credit returned (`aux` bytes).
const CONTROL_CREDIT: u64 = 1;
/// Control-frame subtype: the sender cancelled its send `aux` (a wire
/// request id); withdraw the message if no receive has matched it yet.
const CONTROL_CANCEL_SEND: u64 = 2;
/// Control-frame subtype: the answer to `CONTROL_CANCEL_SEND` for send
/// `aux`; `tag` 1 = withdrawn (cancelled), 0 = already matched.
const CONTROL_CANCEL_ANSWER: u64 = 3;
/// Control-frame subtype reserved for the fault-tolerance protocol: the
/// payload is the protocol's own bytes, handed to `on_protocol_frame`.
/// A subtype rather than a frame kind: it needs no header change, travels
/// (and is retransmitted) like every control frame, and is not numbered as
/// an application message.
const CONTROL_PROTOCOL: u64 = 4;
/// `tag` of a clear-to-send (replication) that answers a re-sent
/// request-to-send whose message the receiver has whole already: the
/// sender's copy ends without data.
const CLEAR_TO_SEND_ALREADY_DELIVERED: i32 = 1;
/// Empty progress rounds spent spinning before the waiter starts yielding:
/// ~1-2 µs of idle rounds on one host (10-20 ns each), several times a
/// shared-memory round trip. Longer spins only cost, when ranks share a
/// core: the waiter burns its slice while the peer it waits for cannot run
/// (an 8 B ping-pong of two ranks on one busy core measured ~10 µs per hop
/// with 1000 rounds, ~3 µs with 100; on idle cores both ~0.25 µs).
const SPIN_ROUNDS: u32 = 100;
/// How long an idle waiter polls with `sched_yield` before it sleeps.
const YIELD_PHASE: std::time::Duration = std::time::Duration::from_millis(2);
/// Longest sleep on a path's doorbell before polling again.
const SLEEP_TIMEOUT_US: u64 = 1_000;
/// MPI_ANY_SOURCE as the C layer passes it.
pub const ANY_SOURCE: i32 = -2;
/// MPI_ANY_TAG.
pub const ANY_TAG: i32 = -1;
/// MPI_PROC_NULL.
pub const PROC_NULL: i32 = -1;

/// How a blocked caller waits: it spins briefly, then polls with
/// `sched_yield` (free when a core is idle, and hands the CPU to a peer
/// when ranks outnumber cores), then sleeps on the path's doorbell so a
/// long wait burns no CPU. [`Engine::pause`] waits as it says.
#[derive(Debug, Default)]
pub struct Idler {
    rounds: u32,
    since: Option<std::time::Instant>,
}

/// What a blocking loop does between two progress rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// Something moved: go on at once.
    None,
    /// Nothing moved lately: poll again at once (a spin).
    Spin,
    /// Nothing moved for a while: give the CPU away (`sched_yield`).
    Yield,
    /// Nothing moved for long: sleep until traffic or a short timeout.
    Sleep,
}

/// A function that lets the process's other threads into the library
/// between two rounds of a blocking loop (see [`set_between_rounds`]).
pub type BetweenRounds = fn(engine: *mut (), pause: Pause);

/// The hook every blocking loop calls between two progress rounds, once
/// installed.
static BETWEEN_ROUNDS: std::sync::OnceLock<BetweenRounds> = std::sync::OnceLock::new();

/// From now on every blocking loop of the process (waits, blocking probe,
/// blocking collectives) calls `hook` between two progress rounds instead
/// of pausing itself, with the engine's address and what it would have
/// done: the C layer's hook, under MPI_THREAD_MULTIPLE, releases the
/// library lock, pauses, and takes the lock again, so that a thread
/// blocked in MPI does not shut the others out. The hook must leave with
/// the calling thread holding the engine exclusively again; whatever the
/// loop reads next it reads afresh (the hook gets the engine's address, so
/// the compiler cannot keep a value read before it). Installed at most
/// once per process (the first call wins); without it the loops pause as
/// [`Idler`] says, with no other cost than one load per round.
pub fn set_between_rounds(hook: BetweenRounds) {
    let _ = BETWEEN_ROUNDS.set(hook);
}

impl Idler {
    /// How long nothing has happened, once spinning is over (None while
    /// it spins).
    #[inline]
    pub fn idle_for(&self) -> Option<std::time::Duration> {
        self.since.map(|since| since.elapsed())
    }

    /// Something happened: start over with spinning.
    #[inline]
    pub fn reset(&mut self) {
        self.rounds = 0;
        self.since = None;
    }

    /// Nothing happened in the last progress round: how long to wait.
    #[inline]
    pub fn next_pause(&mut self) -> Pause {
        self.rounds = self.rounds.saturating_add(1);
        if self.rounds < SPIN_ROUNDS {
            // Poll again at once: a `pause` here costs more than the poll
            // and delays noticing the message we wait for.
            return Pause::Spin;
        }
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() < YIELD_PHASE {
            Pause::Yield
        } else {
            Pause::Sleep
        }
    }
}

/// The counter of a job without failure notices: it stays 0.
static NO_NOTICES: AtomicU64 = AtomicU64::new(0);

/// Where the idle check reads the failure notices' event counter: the
/// watched notices' own counter, or [`NO_NOTICES`]. One pointer, read the
/// same way whether or not notices are watched, so the policies that watch
/// them (`continue`, ULFM) run the very instructions of the ones that
/// don't in the waiting loop.
#[derive(Debug)]
struct NoticeCounter(*const AtomicU64);

// SAFETY: it points to an atomic that is static or kept alive by the
// engine's `notices` (an `Arc`), and is only read atomically.
unsafe impl Send for NoticeCounter {}
unsafe impl Sync for NoticeCounter {}

/// The answer a synchronous send waits for: its request id at the process
/// that sent this copy. Under replication that process may be a
/// substitute standing for a dead sibling (the envelope names the
/// sibling), and the answer must go to the process that waits for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncAnswer {
    /// The process that sent the copy (a world rank).
    pub to: u32,
    /// Its request id.
    pub id: u64,
}

/// A message that arrived before any receive wanted it.
#[derive(Debug)]
pub enum Unexpected {
    /// Eager payload buffered here.
    Eager {
        /// The payload.
        data: Vec<u8>,
        /// Where the SyncAck goes, when the sender asked for one.
        sync: Option<SyncAnswer>,
        /// Its logical number on the channel from its source (under
        /// replication a substitute's re-send of it carries the same).
        logical_seq: u64,
        /// Sender's request id (0 for a send without a request, which can
        /// never be cancelled).
        send_id: u64,
        /// The content depends on a failed process (`FLAG_FAILURE_TAINTED`).
        tainted: bool,
    },
    /// Rendezvous announcement; the payload is still at the sender.
    Rendezvous {
        /// Sender's request id.
        send_id: u64,
        /// Its logical number on the channel from its source: under
        /// replication the announcements of several senders (a dead one's,
        /// its substitute's) stand for one message, and request ids of
        /// different processes can be equal.
        logical_seq: u64,
        /// Message length.
        length: usize,
        /// The content depends on a failed process (`FLAG_FAILURE_TAINTED`).
        tainted: bool,
    },
}

impl Unexpected {
    /// Its logical number on the channel from its source.
    pub fn logical_seq(&self) -> u64 {
        match self {
            Unexpected::Eager { logical_seq, .. } | Unexpected::Rendezvous { logical_seq, .. } => {
                *logical_seq
            }
        }
    }

    /// Message length in bytes.
    pub fn length(&self) -> usize {
        match self {
            Unexpected::Eager { data, .. } => data.len(),
            Unexpected::Rendezvous { length, .. } => *length,
        }
    }

    /// Whether its content depends on a failed process.
    pub fn tainted(&self) -> bool {
        match self {
            Unexpected::Eager { tainted, .. } | Unexpected::Rendezvous { tainted, .. } => *tainted,
        }
    }
}

/// Where a send goes: world rank, context id and tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Destination {
    /// Destination world rank.
    pub peer: u32,
    /// Context id the message is matched in.
    pub context: u32,
    /// Message tag.
    pub tag: i32,
}

/// Tunables of the engine.
#[derive(Clone, Copy, Debug)]
pub struct EngineConfig {
    /// Largest message sent eagerly.
    pub eager_limit_bytes: usize,
    /// Eager bytes (payload + header) a sender may have unconsumed at one receiver.
    pub eager_credit_bytes: usize,
}

/// How long a rank waits idle before it looks for local peers that
/// exited, and how often it looks again ([`Engine::check_local_exits`]).
const LOCAL_EXIT_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Everything except the paths, so frame handlers can run while a path is
/// borrowed for polling.
pub struct State<F: Interceptor = PassThrough> {
    /// This process's world rank.
    pub rank: u32,
    /// The rank its frames name as their source: `rank`, except in a
    /// replica forked by a substitute (replication's recovery), whose
    /// engine goes on with its forker's numbering while its frames say who
    /// it is (`Engine::become_forked_replica`).
    pub wire_rank: u32,
    /// World size.
    pub size: u32,
    /// Tunables.
    pub config: EngineConfig,
    /// Requests.
    pub requests: RequestTable,
    /// Posted / unexpected queues.
    pub matcher: Matcher<Unexpected>,
    /// Communicator table (index 0 world, 1 self).
    pub comms: Vec<Option<Communicator>>,
    /// Frames waiting for room on their path, per peer, in order.
    outbox: Vec<VecDeque<Queued>>,
    /// Rendezvous sends streaming data, per peer.
    streams: Vec<VecDeque<u32>>,
    /// Frames in all outboxes (so idle progress skips the per-peer scan).
    queued_frames: usize,
    /// Sends in all streams.
    streaming_sends: usize,
    /// Rendezvous sends waiting for the links to acknowledge their lent
    /// fragments (`SendStage::AwaitingAcks`).
    sends_awaiting_acks: Vec<u32>,
    /// Requests of operations whose buffers the links hold views of
    /// (`Operation::LentOut`), completed as the views end.
    lent_requests: Vec<u32>,
    /// Eager credit left toward each peer.
    eager_credit: Vec<usize>,
    /// Credit consumed here and not yet returned, per peer.
    credit_owed: Vec<usize>,
    /// Messages taken by MPI_Mprobe, waiting for MPI_Mrecv.
    pub probed_messages: Vec<Option<(Envelope, Unexpected, usize)>>,
    /// First fatal error raised inside a frame handler.
    pending_error: Option<MpiError>,
    /// Past MPI_Finalize's barrier: peers closing connections is expected.
    pub finalizing: bool,
    /// Per world rank: the process has failed.
    failed: Vec<bool>,
    /// Per peer: logical number of the last message sent to it (eager or
    /// request-to-send frames carry the next one in `logical_seq`).
    message_seq_out: Vec<u64>,
    /// Per peer: logical number of the last message taken from it.
    message_seq_in: Vec<u64>,
    /// Messages dropped because their logical number was already taken.
    pub duplicate_messages_dropped: u64,
    /// Message logging: messages re-sent from the log to re-joined peers.
    pub messages_replayed: u64,
    /// Incarnation of this process (0 for the first; stamped on every
    /// frame it sends, see `rejoin.rs`).
    pub own_incarnation: u32,
    /// Per peer: the incarnation whose frames are delivered; frames of any
    /// other are dropped (see `rejoin.rs`).
    peer_incarnation: Vec<u32>,
    /// Replication, per peer: the last incarnation whose death was handled
    /// (a death is reported twice, by the transport and by the launcher's
    /// notice; after a fork the second would be taken for the death of the
    /// replica's new incarnation, which the forker counts alive).
    replica_death_handled: Vec<Option<u32>>,
    /// Frames dropped because an older incarnation of their sender sent them.
    pub old_incarnation_frames_dropped: u64,
    /// Number of failed peers; 0 keeps every hot-path check to one compare.
    pub failed_count: u32,
    /// ULFM's rule for wildcard receives: one still unmatched when a member
    /// of its communicator dies stays posted (the application sees
    /// `MPIX_ERR_PROC_FAILED_PENDING` from the C layer's waits until it
    /// acknowledges the failure) instead of failing. Off by default (the
    /// plain rule of MPI's fault-tolerance chapter, which the simulator
    /// checks); the library turns it on under the `continue` policy.
    pub wildcards_wait_for_acknowledgement: bool,
    /// `--inject kill:RANK@sends=N`: sends left before this process kills
    /// itself (0: never).
    pub sends_until_kill: u64,
    /// Receives not yet handed to the matcher, in posting order: wildcard
    /// receives the protocol deferred (`WildcardDecision::Defer`), and
    /// receives posted after one of these that could match the same
    /// message (they wait their turn: posted first, they would take it).
    deferred_receives: Vec<DeferredReceive>,
    /// Receives whose message is in but that the protocol holds
    /// (`Interceptor::hold_receive`): wire id and the matched envelope.
    held_receives: Vec<(u64, Envelope)>,
    /// ULFM agreements and revoke flood (`engine/ulfm.rs`).
    pub ulfm: resmpi_ft::ulfm::AgreementTable,
    /// Communicators revoked here; 0 keeps the revoked check to one compare.
    pub revoked_count: u32,
    /// The blocking receive in progress without a request, if any
    /// (`engine/direct_receive.rs`).
    direct_receive: Option<DirectReceive>,
    /// Requests of nonblocking agreements (iagree, ishrink) not complete
    /// yet: (request, agreement, whether an unacknowledged failure is the
    /// request's error).
    agreement_requests: Vec<(u32, resmpi_ft::ulfm::AgreementKey, bool)>,
    /// Decisions of completed nonblocking agreements, by request, until
    /// the C layer takes them.
    agreement_decisions: Vec<(u32, resmpi_ft::agreement::Decision)>,
    /// Replication: rendezvous messages delivered here whose data has not
    /// all landed (empty otherwise).
    rendezvous_in: Vec<RendezvousIn>,
    /// One-sided communication: windows this process exposes and its
    /// operations in flight (`engine/rma.rs`).
    pub rma: rma::RmaState,
    /// Message logging: per world rank, dead and not yet re-joined (its
    /// new incarnation will replay; see `engine/replay.rs`).
    restarting: Vec<bool>,
    /// Peers of another world (MPI_Comm_spawn's parents or children) whose
    /// inter-communicator was disconnected: they may close their
    /// connections, as every peer may past MPI_Finalize's barrier.
    pub leavers: Vec<u32>,
    /// Message logging: this replacement took a checkpoint's position
    /// (`engine/position.rs`) and the program has not reached its
    /// restart yet: it must not communicate.
    resume_pending: bool,
    /// Message logging: sends started while a determinant was not stable,
    /// launched in order once it is (request, mode).
    sends_waiting_for_log: VecDeque<(u32, SendMode)>,
    /// Message logging: re-joined peers whose re-send of the log the
    /// protocol holds (`Interceptor::holds_replay_to`).
    replays_held: Vec<u32>,
    /// The fault-tolerance protocol.
    pub interceptor: F,
}

/// Replication: a rendezvous message taken here (its request-to-send
/// delivered) whose data has not all landed. If its sender dies, the
/// substitute's re-sent request-to-send (same logical number) re-points it:
/// the clear-to-send goes to the substitute, and only its data counts.
#[derive(Clone, Copy, Debug)]
struct RendezvousIn {
    /// The sender as matched (the process of this replica).
    peer: u32,
    /// The process whose request-to-send is current.
    physical: u32,
    /// Its logical number.
    logical_seq: u64,
    /// The current sender's request id.
    send_id: u64,
    /// The receive it matched, once it has.
    receive: Option<u32>,
    /// Replication: the current sender died (its data may never come); a
    /// re-send from any process, a new incarnation of it too, takes over.
    sender_dead: bool,
}

/// What one look of a probe ([`Engine::probe`]) gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeLook {
    /// A message: the probe's outcome (reported to the protocol).
    Found(ProbeFound),
    /// Nothing matches: an Iprobe/Improbe's outcome (reported), or, for a
    /// blocking probe, a reason to look again (not reported).
    Missed,
    /// A replay dictates the outcome and it cannot be given yet (the
    /// replay is not in, or the logged message has not arrived): nothing
    /// is reported; look again after a progress round.
    Retry,
}

/// A message MPI_Iprobe / MPI_Improbe found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeFound {
    /// Its envelope (source is a world rank).
    pub envelope: Envelope,
    /// Its length in bytes.
    pub length_bytes: usize,
    /// Improbe/Mprobe: where the taken message waits for MPI_Mrecv
    /// (an index into `State::probed_messages`).
    pub message: Option<usize>,
}

/// Nanoseconds since the first call in this process, from the monotonic
/// clock: the default time source of protocol timers.
pub fn monotonic_now_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

/// Leave the job at once, as a crash would, so that the others mask this
/// process's death: says why on stderr, then exits with
/// [`resmpi_runtime::OUTVOTED_EXIT_CODE`], which the launcher names.
/// Nothing is flushed or finalized (the process's state is what went
/// wrong).
pub fn leave_the_job(rank: u32, why: &str) {
    eprintln!("resmpi: process {rank}: {why}");
    // SAFETY: ends the process; nothing after it runs.
    unsafe { libc::_exit(resmpi_runtime::OUTVOTED_EXIT_CODE) }
}

/// The engine: state plus paths.
pub struct Engine<F: Interceptor = PassThrough> {
    /// Paths to peers.
    pub transports: Transports,
    /// Reliability links for peers on network paths (none when disabled).
    pub links: ReliableLinks,
    /// Everything else.
    pub state: State<F>,
    /// Collectives in progress (advanced by every progress call).
    pub schedules: crate::schedule::Schedules,
    /// Failure notices from the launcher (None when nobody sends them;
    /// set with [`Engine::watch_notices`]).
    notices: Option<Arc<FailureNotices>>,
    /// The notices' event counter, or a counter that stays 0 when there
    /// are none: the idle check reads it the same way in every failure
    /// policy (see [`Engine::idle_on_shared_memory`]).
    notice_count: NoticeCounter,
    /// Notices already handled.
    notices_seen: u64,
    /// A peer the network loses (connection closed, every rail silent) is
    /// a failure event (failure policy `continue`) rather than a fatal error.
    pub failures_are_events: bool,
    /// `RESMPI_HELD_SEND_WARNING_S`: after this long blocked without
    /// progress, a rank whose small sends are held back for lack of eager
    /// credit says so, once (None: never; see [`Engine::warn_of_held_sends`]).
    pub held_send_warning: Option<std::time::Duration>,
    /// The held-send diagnostic was printed.
    held_send_warned: bool,
    /// Whether a waiting rank looks for local peers whose process exited
    /// ([`Engine::check_local_exits`]): on where no resmpi launcher reports
    /// deaths (Slurm, hydra).
    pub watches_local_exits: bool,
    /// When the local peers were last looked at.
    local_exits_checked_at: Option<std::time::Instant>,
    /// Where protocol timers read the time (nanoseconds); read on progress
    /// only when the protocol uses timers (`F::USES_TIMERS`). Tests and the
    /// simulator put a virtual clock here.
    pub timer_clock: fn() -> u64,
    /// How this process leaves the job when its protocol says it must
    /// (`Interceptor::take_departure`): [`leave_the_job`], or a test's
    /// hook.
    pub depart: fn(u32, &str),
    /// The shared-memory fast path of small blocking collectives
    /// (`coll::shared_memory`; off until `Mpi::init` turns it on).
    pub shared_memory: crate::coll::shared_memory::SharedMemoryCollectives,
}

impl<F: Interceptor> Engine<F> {
    /// An engine over already wired-up transports.
    pub fn new(
        rank: u32,
        size: u32,
        config: EngineConfig,
        transports: Transports,
        interceptor: F,
    ) -> Engine<F> {
        let mut matcher = Matcher::new();
        matcher.set_record_events(interceptor.wants_match_events());
        let peers = size as usize;
        Engine {
            transports,
            links: ReliableLinks::none(size),
            state: State {
                rank,
                wire_rank: rank,
                size,
                config,
                requests: RequestTable::default(),
                matcher,
                comms: Vec::new(),
                outbox: (0..peers).map(|_| VecDeque::new()).collect(),
                streams: (0..peers).map(|_| VecDeque::new()).collect(),
                queued_frames: 0,
                streaming_sends: 0,
                sends_awaiting_acks: Vec::new(),
                lent_requests: Vec::new(),
                eager_credit: vec![config.eager_credit_bytes; peers],
                credit_owed: vec![0; peers],
                probed_messages: Vec::new(),
                pending_error: None,
                finalizing: false,
                failed: vec![false; peers],
                message_seq_out: vec![0; peers],
                message_seq_in: vec![0; peers],
                messages_replayed: 0,
                duplicate_messages_dropped: 0,
                own_incarnation: 0,
                peer_incarnation: vec![0; peers],
                replica_death_handled: vec![None; peers],
                old_incarnation_frames_dropped: 0,
                failed_count: 0,
                wildcards_wait_for_acknowledgement: false,
                sends_until_kill: 0,
                deferred_receives: Vec::new(),
                held_receives: Vec::new(),
                ulfm: Default::default(),
                revoked_count: 0,
                direct_receive: None,
                agreement_requests: Vec::new(),
                agreement_decisions: Vec::new(),
                rendezvous_in: Vec::new(),
                rma: rma::RmaState::default(),
                restarting: vec![false; peers],
                leavers: Vec::new(),
                resume_pending: false,
                sends_waiting_for_log: VecDeque::new(),
                replays_held: Vec::new(),
                interceptor,
            },
            schedules: Default::default(),
            notices: None,
            notice_count: NoticeCounter(&NO_NOTICES),
            notices_seen: 0,
            failures_are_events: false,
            held_send_warning: None,
            held_send_warned: false,
            watches_local_exits: false,
            local_exits_checked_at: None,
            timer_clock: monotonic_now_ns,
            depart: leave_the_job,
            shared_memory: Default::default(),
        }
    }

    /// Grow every per-peer table to `size` endpoints (MPI_Comm_spawn's
    /// children get job-wide numbers past the parents'); a new peer starts
    /// as a fresh one: no frames, full credit, numbered from 1,
    /// incarnation 0, not failed, routed over TCP with a fresh link when
    /// the reliability layer is on (`reliable`).
    pub fn add_endpoints(&mut self, size: u32, reliable: bool) {
        if size <= self.state.size {
            return;
        }
        let (old, peers) = (self.state.size, size as usize);
        let state = &mut self.state;
        state.outbox.resize_with(peers, VecDeque::new);
        state.streams.resize_with(peers, VecDeque::new);
        state
            .eager_credit
            .resize(peers, state.config.eager_credit_bytes);
        state.credit_owed.resize(peers, 0);
        state.failed.resize(peers, false);
        state.message_seq_out.resize(peers, 0);
        state.message_seq_in.resize(peers, 0);
        state.peer_incarnation.resize(peers, 0);
        state.replica_death_handled.resize(peers, None);
        state.restarting.resize(peers, false);
        state.size = size;
        self.transports
            .routes
            .resize(peers, crate::transport::Route::Tcp);
        self.links.grow(size);
        for peer in old..size {
            self.links.adopt(peer, reliable);
        }
    }

    // ----- starting operations -------------------------------------------------

    /// Start a send of the `length` packed bytes of `bytes` to world rank
    /// `peer`. Returns the request index.
    pub fn start_send(
        &mut self,
        comm: usize,
        destination: Destination,
        bytes: impl Into<UserBytes>,
        length: usize,
        mode: SendMode,
    ) -> MpiResult<u32> {
        self.start_send_marked(comm, destination, bytes, length, mode, false)
    }

    /// [`Engine::start_send`] of a message that, when `tainted`, depends on
    /// a failed process: its receive will complete with
    /// MPIX_ERR_PROC_FAILED (collective schedules after a lost step).
    pub fn start_send_marked(
        &mut self,
        comm: usize,
        destination: Destination,
        bytes: impl Into<UserBytes>,
        length: usize,
        mode: SendMode,
        tainted: bool,
    ) -> MpiResult<u32> {
        if F::LOGS_MESSAGES {
            self.state.refuse_before_restart()?;
        }
        if self.state.comm_revoked(comm) {
            return self.start_revoked(comm);
        }
        let Destination { peer, context, tag } = destination;
        let bytes = bytes.into();
        let (bytes, owned) = if mode == SendMode::Buffered {
            let mut copy = vec![0u8; length];
            // SAFETY: the caller guarantees `length` readable packed bytes.
            unsafe { bytes.read(0, &mut copy) };
            (UserBytes::from(copy.as_mut_ptr()), Some(copy))
        } else {
            (bytes, None)
        };
        let mut targets = SendTargets::single(peer);
        if F::ROUTES_SENDS {
            let send = SendEnvelope {
                destination: peer,
                context,
                tag,
                length_bytes: length,
            };
            self.state.interceptor.route_send(&send, &mut targets);
        }
        if F::REPLICATES && targets.as_slice().is_empty() {
            // Every replica of the destination this process sends for is
            // dead: nothing to transmit, the send waits for acks only.
            let mut request =
                send_request(comm, peer, (context, tag), bytes, length, owned, tainted);
            if let Operation::Send(send) = &mut request.operation {
                send.logical_seq = self.state.interceptor.send_logical_seq();
                send.gated = true;
            }
            let index = self.insert_request(request)?;
            self.state.complete_send(index);
            return Ok(index);
        }
        let primary = targets.as_slice()[0];
        let copies = &targets.as_slice()[1..];
        let mut request = send_request(
            comm,
            primary,
            (context, tag),
            bytes.clone(),
            length,
            owned,
            tainted,
        );
        if F::REPLICATES {
            if let Operation::Send(send) = &mut request.operation {
                send.logical_seq = self.state.interceptor.send_logical_seq();
                send.gated = true;
            }
        }
        let index = self.insert_request(request)?;
        if F::REPLICATES {
            let wire_id = self.state.requests.wire_id(index);
            let logical_seq = self.state.interceptor.send_logical_seq();
            self.state
                .interceptor
                .send_started(wire_id, primary, logical_seq);
        }
        if F::ROUTES_SENDS && !copies.is_empty() {
            return self.fan_out(index, copies, mode, bytes, tainted);
        }
        if F::LOGS_MESSAGES && self.state.send_waits_for_log() {
            // Pessimistic logging: it may depend on a determinant not yet
            // stable; launched (and numbered) in order once it is.
            self.state.sends_waiting_for_log.push_back((index, mode));
            return Ok(index);
        }
        self.launch_send(index, mode)?;
        Ok(index)
    }

    /// Send the message of send request `index` (not yet launched) to
    /// `copies` too: each copy is an internal request of its own, freed
    /// when it completes; `index` completes once its own message and every
    /// copy have. A copy that fails (its peer died) does not fail the
    /// request: the protocol hears of the death from `on_peer_failure`.
    fn fan_out(
        &mut self,
        index: u32,
        copies: &[u32],
        mode: SendMode,
        bytes: UserBytes,
        tainted: bool,
    ) -> MpiResult<u32> {
        let parent_wire_id = self.state.requests.wire_id(index);
        let Some(Request {
            operation: Operation::Send(parent),
            comm,
            ..
        }) = self.state.requests.get(index)
        else {
            return fail(ErrorClass::Intern, "fan_out of a non-send request");
        };
        let (comm, context, tag, length, buffered, logical_seq) = (
            *comm,
            parent.context,
            parent.tag,
            parent.length,
            parent.owned.is_some(),
            parent.logical_seq,
        );
        let mut copy_indices = Vec::with_capacity(copies.len());
        for &peer in copies {
            // A buffered send's copy keeps its own bytes: the primary may
            // end (and be freed) before it.
            let (copy_bytes, owned) = if buffered {
                let mut copy = vec![0u8; length];
                // SAFETY: `bytes` is the primary's owned copy of `length` bytes.
                unsafe { bytes.read(0, &mut copy) };
                (UserBytes::from(copy.as_mut_ptr()), Some(copy))
            } else {
                (bytes.clone(), None)
            };
            let mut request = send_request(
                comm,
                peer,
                (context, tag),
                copy_bytes,
                length,
                owned,
                tainted,
            );
            request.free_when_complete = true;
            if let Operation::Send(send) = &mut request.operation {
                send.copy_of = Some(parent_wire_id);
                send.logical_seq = logical_seq;
            }
            copy_indices.push(self.insert_request(request)?);
        }
        if let Some(Request {
            operation: Operation::Send(parent),
            ..
        }) = self.state.requests.get_mut(index)
        {
            parent.copies_pending = copy_indices.len() as u32;
        }
        self.launch_send(index, mode)?;
        // Replication: a copy to a dead sibling's destination is standard
        // mode: the receiver may answer a synchronous send's ack to the
        // dead sibling before it hears of the death, and the application's
        // synchronous send is decided by its own copy.
        let copy_mode = if F::REPLICATES && mode == SendMode::Synchronous {
            SendMode::Standard
        } else {
            mode
        };
        for copy in copy_indices {
            self.launch_send(copy, copy_mode)?;
        }
        Ok(index)
    }

    /// Spend eager credit toward `peer` for a `length`-byte message, if the
    /// message may go eagerly at all.
    #[inline]
    fn take_eager_credit(&mut self, peer: u32, length: usize) -> bool {
        let frame_cost = length + HEADER_LEN_BYTES;
        let credit = &mut self.state.eager_credit[peer as usize];
        let eager = length <= self.state.config.eager_limit_bytes
            && *credit >= frame_cost
            && length <= self.transports.max_payload_bytes(peer);
        if eager {
            *credit -= frame_cost;
        }
        eager
    }

    /// MPI_Send's common case without a request: a standard-mode message
    /// that may go eagerly is complete once its frame is on the path (or
    /// copied to the outbox). False = the caller must use a request.
    pub fn send_eager_without_request(
        &mut self,
        destination: Destination,
        bytes: impl Into<UserBytes>,
        length: usize,
    ) -> MpiResult<bool> {
        if F::LOGS_MESSAGES {
            self.state.refuse_before_restart()?;
        }
        if F::ROUTES_SENDS {
            // The protocol may fan it out: only a request can track copies.
            return Ok(false);
        }
        // Revoked first: on a revoked communicator every operation reports
        // MPIX_ERR_REVOKED, also one to a process that has died (ULFM).
        if self.state.revoked_count > 0 && self.state.ulfm.is_revoked(destination.context) {
            // The request path reports the revocation.
            return Ok(false);
        }
        if self.state.is_failed(destination.peer) {
            return Err(peer_failed_error(destination.peer));
        }
        if F::LOGS_MESSAGES
            && (self.state.send_waits_for_log() || self.state.is_restarting(destination.peer))
        {
            // The request path waits for the log or logs for a restart.
            return Ok(false);
        }
        if !self.take_eager_credit(destination.peer, length) {
            return Ok(false);
        }
        let bytes = bytes.into();
        let mut header = eager_header(self.state.wire_rank, destination, length);
        header.logical_seq = self.state.next_message_seq(destination.peer);
        if F::WANTS_PAYLOADS {
            // SAFETY: the caller guarantees `length` readable bytes for this call.
            unsafe {
                self.state
                    .report_payload(&header, destination.peer, &bytes, length)
            };
        }
        if F::LOGS_MESSAGES {
            self.send_piggyback(destination.peer)?;
        }
        // SAFETY: the caller guarantees `length` readable bytes for this call.
        if !unsafe { self.try_send_contiguous_now(destination.peer, &header, &bytes, length) } {
            // SAFETY: as above.
            unsafe { self.send_frame_from(destination.peer, &header, &bytes, 0, length)? };
        }
        self.state.interceptor.on_send_complete(
            destination.peer,
            destination.context,
            destination.tag,
            length,
        );
        self.count_send_for_kill();
        Ok(true)
    }

    /// The common case of an eager send, without the layers of
    /// `send_frame_from`: contiguous bytes, nothing queued before them and
    /// no reliability link, handed to the path at once. False = not that
    /// case, or the path refused it (no room, an error): the caller then
    /// sends through `send_frame_from`, which queues or reports it.
    ///
    /// # Safety
    /// `bytes` must hold `length` readable bytes for this call.
    #[inline]
    unsafe fn try_send_contiguous_now(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        bytes: &UserBytes,
        length: usize,
    ) -> bool {
        let Some(start) = bytes.contiguous_at(0) else {
            return false;
        };
        if !self.state.outbox[peer as usize].is_empty() || self.links.covers(peer) {
            return false;
        }
        // SAFETY: by the caller's promise.
        let payload = unsafe { slice_from(start, length) };
        matches!(
            self.transports
                .try_send_frame(peer, header, self.state.own_incarnation, payload),
            Ok(true)
        )
    }

    /// (Re)start the protocol of the send request at `index`.
    pub fn launch_send(&mut self, index: u32, mode: SendMode) -> MpiResult<()> {
        let wire_id = self.state.requests.wire_id(index);
        let rank = self.state.wire_rank;
        let Some(Request {
            operation: Operation::Send(send),
            ..
        }) = self.state.requests.get(index)
        else {
            return fail(ErrorClass::Intern, "launch_send on a non-send request");
        };
        let (peer, bytes, length, context, tag, tainted, logical_seq, resend) = (
            send.peer,
            send.bytes.clone(),
            send.length,
            send.context,
            send.tag,
            send.tainted,
            send.logical_seq,
            send.resend,
        );
        if self.state.is_failed(peer) {
            self.state.fail_request(index);
            return Ok(());
        }
        let mut header = eager_header(rank, Destination { peer, context, tag }, length);
        header.message_id = wire_id;
        header.logical_seq = if (F::REPLICATES || F::LOGS_MESSAGES) && logical_seq != 0 {
            logical_seq
        } else {
            self.state.next_message_seq(peer)
        };
        if tainted {
            header.flags |= FLAG_FAILURE_TAINTED;
        }
        if F::WANTS_PAYLOADS && !(F::LOGS_MESSAGES && resend) {
            // SAFETY: the caller of start_send guarantees the buffer.
            unsafe { self.state.report_payload(&header, peer, &bytes, length) };
        }
        if F::LOGS_MESSAGES && self.state.is_restarting(peer) {
            // Numbered and logged: its new incarnation gets it from the log.
            self.state.complete_send(index);
            self.count_send_for_kill();
            return Ok(());
        }
        if F::LOGS_MESSAGES {
            self.send_piggyback(peer)?;
        }
        let stage = if self.take_eager_credit(peer, length) {
            if mode == SendMode::Synchronous {
                header.flags |= FLAG_SYNC;
            }
            // SAFETY (both): the caller of start_send guarantees the buffer.
            if !unsafe { self.try_send_contiguous_now(peer, &header, &bytes, length) } {
                unsafe { self.send_frame_from(peer, &header, &bytes, 0, length)? };
            }
            if mode == SendMode::Synchronous {
                SendStage::AwaitingSyncAck
            } else {
                SendStage::Done
            }
        } else {
            header.kind = FrameKind::RequestToSend;
            header.payload_len = 0;
            self.send_frame(peer, &header, &[])?;
            SendStage::AwaitingClearToSend
        };
        let request = self.state.requests.get_mut(index).expect("request exists");
        if let Operation::Send(send) = &mut request.operation {
            send.stage = stage;
        }
        if stage == SendStage::Done {
            self.state.complete_send(index);
        }
        self.count_send_for_kill();
        Ok(())
    }

    /// Post a receive into `buffer` (capacity bytes). `source_world` is None
    /// for ANY_SOURCE; `tag` None for ANY_TAG.
    pub fn start_receive(
        &mut self,
        comm: usize,
        bytes: impl Into<UserBytes>,
        capacity: usize,
        source_world: Option<u32>,
        tag: Option<i32>,
        context: u32,
    ) -> MpiResult<u32> {
        if F::LOGS_MESSAGES {
            self.state.refuse_before_restart()?;
        }
        if self.state.comm_revoked(comm) {
            return self.start_revoked(comm);
        }
        let pattern = ReceivePattern {
            context,
            source: source_world,
            tag,
        };
        let request = direct_receive::receive_request(comm, bytes.into(), capacity, pattern);
        let index = self.insert_request(request)?;
        self.post_receive(index);
        Ok(index)
    }

    /// Hand the receive request at `index` to the matcher (or match it at once).
    pub fn post_receive(&mut self, index: u32) {
        let wire_id = self.state.requests.wire_id(index);
        let Some(Request {
            operation: Operation::Receive(receive),
            ..
        }) = self.state.requests.get(index)
        else {
            return;
        };
        let mut pattern = receive.pattern;
        if F::PINS_WILDCARDS {
            let mut ready = true;
            if pattern.source.is_none() {
                match self
                    .state
                    .interceptor
                    .on_wildcard_receive(wire_id, &pattern)
                {
                    WildcardDecision::AnySource => {}
                    // Only the matcher sees the pinned source; the request
                    // keeps the application's pattern.
                    WildcardDecision::Pin(source) => pattern.source = Some(source),
                    WildcardDecision::Defer => ready = false,
                }
            }
            let behind =
                |waiting: &DeferredReceive| may_share_a_message(&waiting.pattern, &pattern);
            if !ready || self.state.deferred_receives.iter().any(behind) {
                self.state.deferred_receives.push(DeferredReceive {
                    wire_id,
                    pattern,
                    ready,
                });
                return;
            }
        }
        self.post_pattern(index, wire_id, pattern);
    }

    /// Hand receive `index` to the matcher with `pattern` (or match it at once).
    fn post_pattern(&mut self, index: u32, wire_id: u64, pattern: ReceivePattern) {
        if let Some((envelope, message)) = self.state.matcher.post_receive(pattern, wire_id) {
            self.state.deliver_unexpected(index, envelope, message);
        } else if pattern
            .source
            .is_some_and(|source| self.state.is_failed(source))
        {
            // Nothing from it arrived before it died, and nothing will.
            self.state.matcher.cancel_receive(wire_id);
            self.state.fail_request(index);
        }
        self.state.report_matches();
    }

    /// A request that completes when the links have released every view
    /// made with `loan` (an MPI_Rput sent without a copy: its buffer may be
    /// reused then).
    pub fn start_lent_completion(
        &mut self,
        comm: usize,
        loan: crate::reliability::Loan,
    ) -> MpiResult<u32> {
        let request = Request {
            operation: Operation::LentOut(loan),
            comm,
            complete: false,
            status: Status::default(),
            generation: 0,
            persistent: None,
            free_when_complete: false,
            inner: None,
        };
        let index = self.insert_request(request)?;
        self.state.lent_requests.push(index);
        Ok(index)
    }

    /// A completed request with nothing to do (PROC_NULL operations).
    pub fn start_nothing(&mut self, comm: usize, status: Status) -> MpiResult<u32> {
        let request = Request {
            operation: Operation::Nothing,
            comm,
            complete: true,
            status,
            generation: 0,
            persistent: None,
            free_when_complete: false,
            inner: None,
        };
        self.insert_request(request)
    }

    /// Store a request or fail with MPI_ERR_NO_MEM... as MPI_ERR_OTHER.
    pub fn insert_request(&mut self, request: Request) -> MpiResult<u32> {
        self.state
            .requests
            .insert(request)
            .ok_or_else(|| MpiError::new(ErrorClass::Other, "too many outstanding requests"))
    }

    /// Deliver a message taken by MPI_Mprobe into receive request `index`.
    pub fn receive_probed(&mut self, index: u32, envelope: Envelope, message: Unexpected) {
        self.state.deliver_unexpected(index, envelope, message);
    }

    /// Try to cancel request `index` (MPI_Cancel). A receive not yet
    /// matched is withdrawn at once. A send whose message may still wait
    /// unmatched at the receiver (an eager message, or a rendezvous
    /// announcement not yet cleared) asks the receiver to withdraw it and
    /// stays incomplete until it answers: cancelled if it was withdrawn,
    /// completed normally if a receive had matched it. A send already
    /// streaming its data cannot be cancelled.
    pub fn cancel(&mut self, index: u32) -> MpiResult<()> {
        let wire_id = self.state.requests.wire_id(index);
        let rank = self.state.rank;
        let Some(request) = self.state.requests.get_mut(index) else {
            return Ok(());
        };
        match &mut request.operation {
            Operation::Receive(receive)
                if !request.complete
                    && !receive.matched
                    && (self.state.matcher.cancel_receive(wire_id)
                        || (F::PINS_WILDCARDS
                            && take_deferred(&mut self.state.deferred_receives, wire_id))) =>
            {
                request.status.cancelled = true;
                request.status.source = -1;
                request.status.tag = -1;
                request.complete = true;
            }
            Operation::Send(send) => {
                // A send to a failed peer has ended (with PROC_FAILED, or
                // normally before the death) and nobody will answer a
                // cancel request: reopening it would hang its waiter.
                if self.state.failed.get(send.peer as usize) == Some(&true) {
                    return Ok(());
                }
                let withdrawable = matches!(
                    send.stage,
                    SendStage::Done | SendStage::AwaitingSyncAck | SendStage::AwaitingClearToSend
                ) && !send.cancel_requested
                    && !request.status.cancelled;
                if !withdrawable {
                    return Ok(());
                }
                send.cancel_requested = true;
                request.complete = false;
                let peer = send.peer;
                if peer == rank {
                    // A message to this rank: deliver what is still queued
                    // to itself, then decide at once (no answer to wait for).
                    while !self.transports.loopback.is_empty()
                        || !self.state.outbox[rank as usize].is_empty()
                    {
                        self.progress()?;
                    }
                    let withdrawn = self.state.withdraw_message(rank, wire_id);
                    self.state.finish_send_cancel(wire_id, withdrawn);
                    return Ok(());
                }
                let mut header = FrameHeader::new(FrameKind::Control, self.state.wire_rank);
                header.message_id = CONTROL_CANCEL_SEND;
                header.aux = wire_id;
                self.send_frame(peer, &header, &[])?;
            }
            // A buffered send: withdraw its internal send, and stay open
            // until that is answered (`RequestTable::done`).
            Operation::Buffered { send } if request.complete => {
                let send = *send;
                request.complete = false;
                self.cancel(send)?;
            }
            _ => {}
        }
        Ok(())
    }

    // ----- progress ------------------------------------------------------------

    /// Take failure notices from `notices` from now on.
    pub fn watch_notices(&mut self, notices: Arc<FailureNotices>) {
        self.notice_count = NoticeCounter(notices.counter());
        self.notices = Some(notices);
    }

    /// Events recorded by the watched notices (0 without any).
    #[inline]
    fn notice_count(&self) -> u64 {
        // SAFETY: `NO_NOTICES` is static; a watched counter lives in
        // `self.notices`, kept as long as the pointer.
        unsafe { (*self.notice_count.0).load(Ordering::Acquire) }
    }

    /// Make progress on every path once. True if anything happened.
    ///
    /// This is the loop a blocked caller spins in, so an idle round must be
    /// cheap. On one host, when nothing but shared memory can bring work
    /// (see [`Engine::idle_on_shared_memory`]), a round is one load per
    /// local peer's ring; otherwise [`Engine::progress_round`] runs.
    #[inline]
    pub fn progress(&mut self) -> MpiResult<bool> {
        // Whoever progresses may be about to wait: receipts held back for
        // batching must not keep an owner of the collective area waiting.
        if self.owes_receipts() {
            self.write_receipts();
        }
        if self.idle_on_shared_memory() {
            return Ok(false);
        }
        self.progress_round()
    }

    /// Whether a progress round would find nothing to do: the only path is
    /// shared memory and no frame waits in it, and nothing else is pending
    /// (no queued frame or stream, no schedule, no failure notice, no
    /// protocol that polls). A few compares and one load per ring.
    #[inline]
    fn idle_on_shared_memory(&self) -> bool {
        let Some(shm) = &self.transports.shm else {
            return false;
        };
        !F::PINS_WILDCARDS
            && !F::USES_TIMERS
            && !F::SENDS_PROTOCOL_FRAMES
            && self.transports.rails.is_empty()
            && self.transports.memory.is_none()
            && self.transports.loopback.is_empty()
            && self.state.queued_frames == 0
            && self.state.streaming_sends == 0
            && self.state.sends_awaiting_acks.is_empty()
            && self.state.lent_requests.is_empty()
            && self.state.pending_error.is_none()
            && self.schedules.is_empty()
            && self.notice_count() == self.notices_seen
            && !shm.has_input()
    }

    /// One full progress round over every path and every kind of pending
    /// work. Every step that has nothing to do is skipped by one compare of
    /// a counter or a length here, without a call. Network rails (and the
    /// reliability links, which exist only for peers reached over them) are
    /// skipped entirely in a job on one host.
    pub fn progress_round(&mut self) -> MpiResult<bool> {
        let mut frames = 0;
        // (Before a death applies, what is in transit is delivered:
        // `deliver_last_words`.)
        if self.notice_count() != self.notices_seen {
            self.handle_notices();
            frames += 1;
        }
        let state = &mut self.state;
        if let Some(shm) = self.transports.shm.as_mut() {
            frames += shm
                .poll(|peer, frame| state.handle_frame(peer, frame))
                .map_err(shm_error)?;
        }
        if let Some(memory) = self.transports.memory.as_mut() {
            frames += memory
                .poll(|peer, frame| state.handle_frame(peer, frame))
                .map_err(|error| {
                    MpiError::new(ErrorClass::Other, format!("memory path: {error}"))
                })?;
        }
        let networked = !self.transports.rails.is_empty();
        if networked {
            frames += self.poll_rails()?;
        }
        while let Some(frame) = self.transports.loopback.pop_front() {
            let rank = self.state.rank;
            self.state.handle_frame(rank, &frame);
            frames += 1;
        }
        if let Some(error) = self.state.pending_error.take() {
            return Err(error);
        }
        if F::HASHES_RECEIVED || F::LOGS_MESSAGES {
            if let Some(text) = self.state.interceptor.take_fatal_error() {
                return Err(MpiError::new(ErrorClass::Other, text));
            }
        }
        if F::PINS_WILDCARDS {
            frames += self.release_deferred_receives();
        }
        if F::USES_TIMERS && self.handle_timers((self.timer_clock)()) {
            frames += 1;
        }
        if F::SENDS_PROTOCOL_FRAMES {
            while let Some((peer, bytes)) = self.state.interceptor.poll_protocol_frame() {
                self.send_protocol_frame(peer, &bytes)?;
                frames += 1;
            }
        }
        if F::HASHES_RECEIVED {
            if let Some(text) = self.state.interceptor.take_departure() {
                // Its last protocol frames (above) go out first.
                let _ = self.transports.flush();
                (self.depart)(self.state.rank, &text);
            }
        }
        if F::REPLICATES {
            frames += self.replication_progress()?;
        }
        if F::LOGS_MESSAGES {
            frames += self.release_held_replays();
            frames += self.launch_sends_waiting_for_log()?;
        }
        // Rails buffer output until flushed, so with rails the flush runs
        // even when no frame waits in an outbox.
        let sent = (networked || self.state.queued_frames > 0) && self.flush_outbox()?;
        let streamed = self.state.streaming_sends > 0 && self.pump_streams()?;
        let transmitted =
            networked && self.links.any() && self.links.transmit(&mut self.transports)?;
        let acknowledged =
            !self.state.sends_awaiting_acks.is_empty() && self.complete_acknowledged_sends();
        let returned = !self.state.lent_requests.is_empty() && self.complete_returned_loans();
        let collectives = !self.schedules.is_empty() && crate::schedule::advance_all(self)?;
        let agreements =
            !self.state.agreement_requests.is_empty() && self.state.complete_agreement_requests();
        Ok(frames > 0
            || sent
            || streamed
            || transmitted
            || acknowledged
            || returned
            || collectives
            || agreements)
    }

    /// Poll every TCP rail once, feeding frames through the reliability
    /// links, and handle the peers lost on the way (and those the links
    /// found unreachable). Returns how many frames and events there were.
    pub(crate) fn poll_rails(&mut self) -> MpiResult<usize> {
        let mut frames = 0;
        let mut lost_peers: Vec<u32> = Vec::new();
        let failures_are_events = self.failures_are_events;
        let state = &mut self.state;
        let links = &mut self.links;
        for (rail_index, rail) in self.transports.rails.iter_mut().enumerate() {
            let rail_index = rail_index as u32;
            let polled = rail.poll_placing(&mut RailReceiver {
                rail: rail_index,
                links: &mut *links,
                state: &mut *state,
            });
            let state = &mut *state;
            match polled {
                Ok(count) => frames += count,
                // Its death is known: the closed connection says nothing new.
                Err(PathError::PeerClosed(peer)) if state.is_failed(peer) => {}
                // Past the final barrier, peers leave whenever they like; a
                // peer that left has received all it needed from us.
                Err(PathError::PeerClosed(peer))
                    if state.finalizing || state.leavers.contains(&peer) =>
                {
                    links.forget(peer)
                }
                // Another rail may carry on; the link decides when the
                // peer is unreachable.
                Err(PathError::PeerClosed(peer)) if links.covers(peer) => {
                    links.rail_failed(peer, rail_index)
                }
                // The network saw the death first: the same event as a notice.
                Err(PathError::PeerClosed(peer)) if failures_are_events => lost_peers.push(peer),
                Err(PathError::PeerClosed(peer)) => {
                    return Err(MpiError::new(
                        ErrorClass::Other,
                        format!("lost the TCP connection to rank {peer} (did it die?)"),
                    ))
                }
                Err(error) => {
                    return Err(MpiError::new(
                        ErrorClass::Other,
                        format!("TCP rail {rail_index}: {error}"),
                    ))
                }
            }
        }
        lost_peers.extend(self.links.take_unreachable());
        for peer in lost_peers {
            self.handle_peer_failure(peer);
            frames += 1;
        }
        Ok(frames)
    }

    /// Progress until `done` holds, pausing with an [`Idler`] when nothing moves.
    pub fn wait_until(&mut self, mut done: impl FnMut(&mut Engine<F>) -> bool) -> MpiResult<()> {
        let mut idler = Idler::default();
        loop {
            if done(self) {
                return Ok(());
            }
            self.progress_or_idle(&mut idler)?;
        }
    }

    /// One round of a blocking loop, the one every such loop makes: a
    /// progress round; if it moved something, start `idler` over (and let
    /// other threads in, under MPI_THREAD_MULTIPLE); if not, wait as
    /// `idler` says and, once idle a while, do the idle checks
    /// ([`Engine::while_idle`]). Whatever the loop read from the engine
    /// before, it reads afresh after (the hook may have let another
    /// thread in).
    #[inline]
    pub fn progress_or_idle(&mut self, idler: &mut Idler) -> MpiResult<()> {
        if self.progress()? {
            idler.reset();
            self.between_rounds(Pause::None, SLEEP_TIMEOUT_US);
        } else {
            self.pause(idler);
            if let Some(idle) = idler.idle_for() {
                self.while_idle(idle)?;
            }
        }
        Ok(())
    }

    /// Nothing moved in a blocking loop's last progress round: wait as
    /// `idler` says (see [`Engine::between_rounds`]).
    #[inline]
    pub fn pause(&mut self, idler: &mut Idler) {
        let pause = idler.next_pause();
        self.between_rounds(pause, SLEEP_TIMEOUT_US);
    }

    /// Between two rounds of a blocking loop: wait as `pause` says
    /// (sleeping at most `sleep_us` on the paths' doorbells), or, once a
    /// hook is installed ([`set_between_rounds`]), let the hook do it.
    #[inline]
    pub fn between_rounds(&mut self, pause: Pause, sleep_us: u64) {
        if let Some(&hook) = BETWEEN_ROUNDS.get() {
            self.call_between_rounds(hook, pause);
            return;
        }
        match pause {
            Pause::None | Pause::Spin => {}
            Pause::Yield => std::thread::yield_now(),
            Pause::Sleep => self.transports.sleep_until_traffic(sleep_us),
        }
    }

    /// [`Engine::between_rounds`] with a hook: out of line, and given the
    /// engine's address, so that nothing read from the engine before the
    /// call is trusted after it (another thread may have changed it).
    #[cold]
    #[inline(never)]
    fn call_between_rounds(&mut self, hook: BetweenRounds, pause: Pause) {
        hook(std::ptr::from_mut(self).cast(), pause);
    }

    /// What every blocking loop does once it has been idle for `idle`
    /// (nothing moved): look for local peers whose process exited, where
    /// no launcher reports deaths, and say once which small sends are
    /// held back for lack of eager credit. Every loop that can wait for
    /// ever calls it ([`Engine::wait_until`], the shared-memory collectives,
    /// blocking probe), so a death under Slurm or hydra ends each of them.
    #[inline]
    pub(crate) fn while_idle(&mut self, idle: std::time::Duration) -> MpiResult<()> {
        if self.watches_local_exits && idle >= LOCAL_EXIT_CHECK_INTERVAL {
            self.check_local_exits()?;
        }
        if let Some(after) = self.held_send_warning {
            if !self.held_send_warned && idle >= after {
                self.warn_of_held_sends(after);
            }
        }
        Ok(())
    }

    /// Looks, at most every [`LOCAL_EXIT_CHECK_INTERVAL`], for ranks on
    /// this host whose process exited. Before `MPI_Finalize` (whose barrier
    /// no rank leaves before every rank entered it) an exit is a death:
    /// the failure event where failures are events, else an error that
    /// names the rank, so the job ends (the default handler aborts) rather
    /// than waiting for ever on a ring nobody will write.
    #[cold]
    fn check_local_exits(&mut self) -> MpiResult<()> {
        let now = std::time::Instant::now();
        if self.state.finalizing
            || self
                .local_exits_checked_at
                .is_some_and(|checked| now.duration_since(checked) < LOCAL_EXIT_CHECK_INTERVAL)
        {
            return Ok(());
        }
        self.local_exits_checked_at = Some(now);
        let exited = match self.transports.shm.as_mut() {
            Some(shm) => shm.exited_peers(),
            None => return Ok(()),
        };
        for peer in exited {
            if self.failures_are_events {
                self.handle_peer_failure(peer);
            } else if !self.state.is_failed(peer) {
                return Err(MpiError::new(
                    ErrorClass::Other,
                    format!(
                        "rank {peer} on this host exited before MPI_Finalize (killed or \
                         crashed?) while rank {} waited",
                        self.state.rank
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A program that relies on MPI buffering its small standard-mode
    /// sends (a receiver that waits elsewhere while thousands arrive) can
    /// block for ever once this rank's eager credit to that receiver is
    /// used up: each further small send waits for the receiver to post its
    /// receive. Legal under MPI, but silent; after `waited` without
    /// progress, say which sends are held and what would let them through
    /// (once per process).
    #[cold]
    fn warn_of_held_sends(&mut self, waited: std::time::Duration) {
        let eager_limit_bytes = self.state.config.eager_limit_bytes;
        let mut held: std::collections::BTreeMap<u32, (usize, usize)> = Default::default();
        for index in self.state.requests.live_indices() {
            if let Some(Request {
                operation: Operation::Send(send),
                complete: false,
                ..
            }) = self.state.requests.get(index)
            {
                if send.stage == SendStage::AwaitingClearToSend && send.length <= eager_limit_bytes
                {
                    let (count, bytes) = held.entry(send.peer).or_default();
                    *count += 1;
                    *bytes += send.length + HEADER_LEN_BYTES;
                }
            }
        }
        let Some(most_bytes) = held.values().map(|&(_, bytes)| bytes).max() else {
            return;
        };
        self.held_send_warned = true;
        let count: usize = held.values().map(|&(count, _)| count).sum();
        let ranks: Vec<String> = held.keys().map(u32::to_string).collect();
        let credit_bytes = self.state.config.eager_credit_bytes;
        eprintln!(
            "resmpi: rank {}: blocked for {} s with {count} small send(s) to rank(s) {} held back: \
             the receivers have not posted matching receives and this rank's eager credit to each \
             ({credit_bytes} bytes of unreceived messages) is used up. MPI does not promise to \
             buffer standard-mode sends: post the receives first, use MPI_Isend or MPI_Bsend, or \
             set RESMPI_EAGER_CREDIT above the bytes (plus {HEADER_LEN_BYTES} per message) this \
             rank sends ahead of their receives ({held_bytes} bytes wait now) \
             (RESMPI_HELD_SEND_WARNING_S=0 silences this)",
            self.state.rank,
            waited.as_secs(),
            ranks.join(", "),
            held_bytes = credit_bytes + most_bytes,
        );
    }

    /// Block until request `index` completes.
    pub fn wait_request(&mut self, index: u32) -> MpiResult<()> {
        self.wait_until(|engine| engine.state.requests.done(index))
    }

    // ----- the fault-tolerance protocol -----------------------------------------

    /// Fire the protocol's timer if it is due at `now_ns` (at most once per
    /// call, so a protocol that never moves its deadline cannot stall
    /// progress). Called by `progress` with `timer_clock` when `F` uses
    /// timers; the simulator calls it with its virtual time. True if it fired.
    pub fn handle_timers(&mut self, now_ns: u64) -> bool {
        match self.state.interceptor.poll_timeout() {
            Some(due_ns) if due_ns <= now_ns => {
                self.state.interceptor.handle_timeout(now_ns);
                true
            }
            _ => false,
        }
    }

    /// Send the protocol's own frame `bytes` to world rank `peer`; it
    /// arrives as `on_protocol_frame` there. Fails for a rank out of range,
    /// a failed peer, or more bytes than one frame carries to it.
    pub fn send_protocol_frame(&mut self, peer: u32, bytes: &[u8]) -> MpiResult<()> {
        if peer >= self.state.size {
            return fail(
                ErrorClass::Rank,
                format!(
                    "protocol frame for rank {peer} of a {}-rank job",
                    self.state.size
                ),
            );
        }
        if self.peer_failed(peer) {
            return Err(peer_failed_error(peer));
        }
        let max_payload_bytes = self.transports.max_payload_bytes(peer);
        if bytes.len() > max_payload_bytes {
            return fail(
                ErrorClass::Intern,
                format!(
                    "protocol frame of {} bytes for rank {peer}: at most {max_payload_bytes} fit in one frame",
                    bytes.len()
                ),
            );
        }
        let mut header = FrameHeader::new(FrameKind::Control, self.state.wire_rank);
        header.message_id = CONTROL_PROTOCOL;
        header.payload_len = bytes.len() as u32;
        self.send_frame(peer, &header, bytes)
    }

    /// Send what the protocol piggybacks on the message about to go to
    /// `peer` (optimistic logging's dependencies), ahead of it on the
    /// same channel: the receiver takes it in before the message.
    #[inline]
    fn send_piggyback(&mut self, peer: u32) -> MpiResult<()> {
        match self.state.interceptor.piggyback(peer) {
            Some(bytes) => self.send_protocol_frame(peer, &bytes),
            None => Ok(()),
        }
    }

    /// Post the deferred receives the protocol releases (in posting
    /// order: one waits while an earlier one is not released), and
    /// complete the held receives it gives back. Returns how many.
    fn release_deferred_receives(&mut self) -> usize {
        let mut released = 0;
        while let Some((wire_id, source)) = self.state.interceptor.poll_released_receive() {
            if let Some(waiting) = self
                .state
                .deferred_receives
                .iter_mut()
                .find(|waiting| waiting.wire_id == wire_id && !waiting.ready)
            {
                waiting.pattern.source = source.or(waiting.pattern.source);
                waiting.ready = true;
            }
        }
        while self
            .state
            .deferred_receives
            .first()
            .is_some_and(|first| first.ready)
        {
            let DeferredReceive {
                wire_id, pattern, ..
            } = self.state.deferred_receives.remove(0);
            let Some((index, request)) = self.state.requests.by_wire_id(wire_id) else {
                continue;
            };
            if request.complete || !matches!(request.operation, Operation::Receive(_)) {
                continue;
            }
            self.post_pattern(index, wire_id, pattern);
            released += 1;
        }
        let state = &mut self.state;
        while let Some(wire_id) = state.interceptor.poll_released_held_receive() {
            let Some(slot) = state
                .held_receives
                .iter()
                .position(|&(id, _)| id == wire_id)
            else {
                continue;
            };
            let (_, envelope) = state.held_receives.swap_remove(slot);
            if let Some((index, _)) = state.requests.by_wire_id(wire_id) {
                state.complete_receive_now(index, envelope);
                released += 1;
            }
        }
        released
    }

    /// One look of MPI_Iprobe / MPI_Improbe (`remove`), or of a round of
    /// MPI_Probe / MPI_Mprobe (`blocking`), on communicator `comm` for
    /// `pattern`: the first matching unexpected message, taken off the
    /// queue with `remove`. The outcome goes to the protocol, a miss
    /// included, except a miss of a `blocking` probe (Probe/Mprobe look
    /// until they find something; only the find is the application's
    /// outcome). No progress is made here.
    ///
    /// A replay (a restarted incarnation under message logging) dictates
    /// the outcome of a probe whose outcome depends on timing: a logged
    /// miss is a miss even if a message is there; a logged find waits
    /// ([`ProbeLook::Retry`]) until that message (source and tag, the
    /// first such from the source, which sends in order) is there and
    /// returns it (an Improbe/Mprobe takes it). An outcome this probe
    /// cannot give is an error naming the divergence.
    pub fn probe(
        &mut self,
        comm: usize,
        pattern: ReceivePattern,
        remove: bool,
        blocking: bool,
    ) -> MpiResult<ProbeLook> {
        let mut look_for = pattern;
        let mut logged_length = None;
        if F::WANTS_NONDETERMINISM {
            match self.state.interceptor.replayed_probe(&pattern, blocking) {
                ReplayedChoice::Free => {}
                ReplayedChoice::NotYetKnown => return Ok(ProbeLook::Retry),
                ReplayedChoice::Logged(positions) if positions.is_empty() && !blocking => {
                    self.report_probe(pattern, None, remove, blocking);
                    return Ok(ProbeLook::Missed);
                }
                ReplayedChoice::Probed {
                    source,
                    tag,
                    length_bytes,
                } if pattern.source.is_none_or(|wanted| wanted == source)
                    && pattern.tag.is_none_or(|wanted| wanted == tag) =>
                {
                    look_for.source = Some(source);
                    look_for.tag = Some(tag);
                    logged_length = Some(length_bytes);
                }
                other => return Err(probe_replay_diverged(&pattern, blocking, &other)),
            }
        }
        if let Some(logged) = logged_length {
            match self.state.matcher.probe(&look_for) {
                None => return Ok(ProbeLook::Retry),
                Some((_, message)) if message.length() != logged => {
                    return Err(MpiError::new(
                        ErrorClass::Intern,
                        format!(
                            "probe: message-logging replay diverged: the earlier incarnation \
                             found a message of {logged} bytes from rank {:?} with tag {:?}, \
                             this one finds {} bytes",
                            look_for.source,
                            look_for.tag,
                            message.length()
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        let found = if remove {
            self.state
                .matcher
                .take_unexpected(&look_for)
                .map(|(envelope, message)| {
                    let length_bytes = message.length();
                    let messages = &mut self.state.probed_messages;
                    let entry = Some((envelope, message, comm));
                    let slot = match messages.iter().position(Option::is_none) {
                        Some(slot) => {
                            messages[slot] = entry;
                            slot
                        }
                        None => {
                            messages.push(entry);
                            messages.len() - 1
                        }
                    };
                    ProbeFound {
                        envelope,
                        length_bytes,
                        message: Some(slot),
                    }
                })
        } else {
            self.state
                .matcher
                .probe(&look_for)
                .map(|(envelope, message)| ProbeFound {
                    envelope: *envelope,
                    length_bytes: message.length(),
                    message: None,
                })
        };
        match found {
            Some(found) => {
                self.report_probe(pattern, Some(&found), remove, blocking);
                Ok(ProbeLook::Found(found))
            }
            None => {
                if !blocking {
                    self.report_probe(pattern, None, remove, blocking);
                }
                Ok(ProbeLook::Missed)
            }
        }
    }

    /// Tell the protocol a probe's outcome (free without `WANTS_NONDETERMINISM`).
    #[inline]
    fn report_probe(
        &mut self,
        pattern: ReceivePattern,
        found: Option<&ProbeFound>,
        removed: bool,
        blocking: bool,
    ) {
        if F::WANTS_NONDETERMINISM {
            self.state.interceptor.on_probe(&ProbeOutcome {
                pattern,
                found: found.map(|found| found.envelope),
                length_bytes: found.map_or(0, |found| found.length_bytes),
                removed,
                blocking,
            });
        }
    }

    /// One look of a call whose outcome is a flag over `offered`
    /// requests (MPI_Test, MPI_Testall, MPI_Request_get_status): `done`
    /// says whether the requests it is about are complete now. Some(flag)
    /// is the outcome, reported to the protocol; None: a replay dictates
    /// it and it cannot be given yet (the replay is not in, or the logged
    /// "complete" is not true yet): nothing is reported; look again after
    /// a progress round. A logged "not complete" is false even if the
    /// requests are complete. No progress is made here.
    pub fn test_flag_once(
        &mut self,
        call: CompletionCall,
        offered: usize,
        done: impl Fn(&Engine<F>) -> bool,
    ) -> MpiResult<Option<bool>> {
        let flag = if F::WANTS_NONDETERMINISM {
            match self
                .state
                .interceptor
                .replayed_completion_choice(call, offered)
            {
                ReplayedChoice::Free => done(self),
                ReplayedChoice::NotYetKnown => return Ok(None),
                ReplayedChoice::Logged(positions) => match positions.as_slice() {
                    [] => false,
                    [0] if done(self) => true,
                    [0] => return Ok(None),
                    _ => {
                        return Err(completion_replay_diverged(
                            call,
                            &ReplayedChoice::Logged(positions),
                        ))
                    }
                },
                probed @ ReplayedChoice::Probed { .. } => {
                    return Err(completion_replay_diverged(call, &probed));
                }
            }
        } else {
            done(self)
        };
        let completed: &[usize] = if flag { &[0] } else { &[] };
        self.report_completion_choice(call, offered, completed);
        Ok(Some(flag))
    }

    /// MPI_Test's way with a flag call ([`Engine::test_flag_once`]): a
    /// progress round unless `done` already, then the outcome; in a replay
    /// that must wait, progress until it can be given.
    pub fn test_flag(
        &mut self,
        call: CompletionCall,
        offered: usize,
        done: impl Fn(&Engine<F>) -> bool,
    ) -> MpiResult<bool> {
        if !done(self) {
            self.progress()?;
        }
        let mut idler = Idler::default();
        loop {
            if let Some(flag) = self.test_flag_once(call, offered, &done)? {
                return Ok(flag);
            }
            self.progress_or_idle(&mut idler)?;
        }
    }

    /// The outcome of a Test/Testany/Waitany/Testsome/Waitsome call over
    /// `offered` requests: the positions that completed (empty: none).
    /// The C layer reports every such outcome here so a logging protocol
    /// can record it; free for a protocol that does not want it.
    #[inline]
    pub fn report_completion_choice(
        &mut self,
        call: CompletionCall,
        offered: usize,
        completed: &[usize],
    ) {
        if F::WANTS_NONDETERMINISM {
            self.state
                .interceptor
                .on_completion_choice(&CompletionChoice {
                    call,
                    offered,
                    completed,
                });
        }
    }

    /// What the replay of a restarted incarnation dictates for the next
    /// `call` over `offered` requests: None (choose as usual; always so
    /// for a protocol without `WANTS_NONDETERMINISM`), or the positions
    /// to report (empty: nothing completed). Progresses while the replay
    /// is not in yet. The C layer then reports that choice through
    /// [`Engine::report_completion_choice`].
    #[inline]
    pub fn replayed_completion_choice(
        &mut self,
        call: CompletionCall,
        offered: usize,
    ) -> MpiResult<Option<Vec<usize>>> {
        if !F::WANTS_NONDETERMINISM {
            return Ok(None);
        }
        let mut answer = ReplayedChoice::NotYetKnown;
        self.wait_until(|engine| {
            answer = engine
                .state
                .interceptor
                .replayed_completion_choice(call, offered);
            answer != ReplayedChoice::NotYetKnown
        })?;
        match answer {
            ReplayedChoice::Logged(positions) => Ok(Some(positions)),
            probed @ ReplayedChoice::Probed { .. } => {
                Err(completion_replay_diverged(call, &probed))
            }
            ReplayedChoice::Free | ReplayedChoice::NotYetKnown => Ok(None),
        }
    }

    // ----- sending frames -------------------------------------------------------

    #[inline]
    fn offer(
        &mut self,
        peer: u32,
        header: &[u8; HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> MpiResult<bool> {
        offer_to(&mut self.links, &mut self.transports, peer, header, payload)
    }

    /// Send one frame to `peer`, queueing a copy if its path has no room.
    #[inline]
    pub fn send_frame(&mut self, peer: u32, header: &FrameHeader, payload: &[u8]) -> MpiResult<()> {
        if self.send_frame_now(peer, header, payload)? {
            return Ok(());
        }
        let bytes = rejoin::emit_stamped(header, self.state.own_incarnation);
        let mut frame = Vec::with_capacity(HEADER_LEN_BYTES + payload.len());
        frame.extend_from_slice(&bytes);
        frame.extend_from_slice(payload);
        self.state.outbox[peer as usize].push_back(Queued::Built(frame));
        self.state.queued_frames += 1;
        Ok(())
    }

    /// Send one frame built in place: `frame` holds `HEADER_LEN_BYTES` of
    /// room for `header` (written here), then the payload. Where the path
    /// has no room the frame itself is queued, so a large payload is not
    /// copied a second time (RMA builds its frames this way).
    pub(crate) fn send_built_frame(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        mut frame: Vec<u8>,
    ) -> MpiResult<()> {
        debug_assert!(frame.len() >= HEADER_LEN_BYTES);
        if self.send_frame_now(peer, header, &frame[HEADER_LEN_BYTES..])? {
            return Ok(());
        }
        frame[..HEADER_LEN_BYTES]
            .copy_from_slice(&rejoin::emit_stamped(header, self.state.own_incarnation));
        self.state.outbox[peer as usize].push_back(Queued::Built(frame));
        self.state.queued_frames += 1;
        Ok(())
    }

    /// Send one frame whose payload is lent, not copied (an RMA data
    /// frame): straight to `peer`'s link when nothing is queued before it
    /// and it has room, else queued with the view, in order.
    pub(crate) fn send_lent_frame(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        payload: LentBytes,
    ) -> MpiResult<()> {
        if self.peer_failed(peer) || (F::LOGS_MESSAGES && self.state.is_restarting(peer)) {
            return Ok(());
        }
        let header_bytes = rejoin::emit_stamped(header, self.state.own_incarnation);
        if self.state.outbox[peer as usize].is_empty() {
            let offered = offer_lent_to(
                &mut self.links,
                &mut self.transports,
                peer,
                &header_bytes,
                &payload,
            );
            if self.absorb_lost_peer(peer, offered)? {
                return Ok(());
            }
        }
        self.state.outbox[peer as usize].push_back(Queued::Lent {
            header: header_bytes,
            payload,
        });
        self.state.queued_frames += 1;
        Ok(())
    }

    /// Offer one frame straight to `peer`'s link or path when nothing is
    /// queued before it. Ok(true): it is out (or the peer is dead, and
    /// nothing goes to a dead process nor waits in its queue); Ok(false):
    /// the caller queues it.
    #[inline]
    fn send_frame_now(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        payload: &[u8],
    ) -> MpiResult<bool> {
        if self.peer_failed(peer) || (F::LOGS_MESSAGES && self.state.is_restarting(peer)) {
            return Ok(true);
        }
        if !self.state.outbox[peer as usize].is_empty() {
            return Ok(false);
        }
        let incarnation = self.state.own_incarnation;
        let offered = if self.links.covers(peer) {
            let bytes = rejoin::emit_stamped(header, incarnation);
            self.offer(peer, &bytes, payload)
        } else {
            // Straight into the path: on shared memory the header is
            // written in the ring's slot, not first on the stack.
            self.transports
                .try_send_frame(peer, header, incarnation, payload)
        };
        self.absorb_lost_peer(peer, offered)
    }

    /// Send one frame whose payload is packed bytes `[offset, offset +
    /// length)` of `bytes`: contiguous bytes as `send_frame`; typed ones are
    /// gathered straight into the link's copy or the path's slot (one copy,
    /// checksummed in the same pass), or into a queued frame if there is no
    /// room.
    ///
    /// # Safety
    /// `bytes` must hold the message, readable, for this call.
    #[inline]
    unsafe fn send_frame_from(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        bytes: &UserBytes,
        offset: usize,
        length: usize,
    ) -> MpiResult<()> {
        if self.peer_failed(peer) {
            return Ok(());
        }
        if let Some(start) = bytes.contiguous_at(offset) {
            // SAFETY: by the caller's promise.
            return self.send_frame(peer, header, unsafe { slice_from(start, length) });
        }
        let header_bytes = rejoin::emit_stamped(header, self.state.own_incarnation);
        if self.state.outbox[peer as usize].is_empty() {
            // SAFETY: by the caller's promise.
            let offered = unsafe {
                offer_gathered(
                    &mut self.links,
                    &mut self.transports,
                    peer,
                    &header_bytes,
                    bytes,
                    offset,
                    length,
                )
            };
            if self.absorb_lost_peer(peer, offered)? {
                return Ok(());
            }
        }
        let mut frame = vec![0u8; HEADER_LEN_BYTES + length];
        frame[..HEADER_LEN_BYTES].copy_from_slice(&header_bytes);
        // SAFETY: by the caller's promise.
        unsafe { bytes.read(offset, &mut frame[HEADER_LEN_BYTES..]) };
        self.state.outbox[peer as usize].push_back(Queued::Built(frame));
        self.state.queued_frames += 1;
        Ok(())
    }

    fn flush_outbox(&mut self) -> MpiResult<bool> {
        let mut any = false;
        if self.state.queued_frames == 0 {
            self.transports.flush()?;
            return Ok(false);
        }
        for peer in 0..self.state.size as usize {
            while let Some(queued) = self.state.outbox[peer].front() {
                let offered = match queued {
                    Queued::Built(frame) => {
                        let header: &[u8; HEADER_LEN_BYTES] =
                            frame[..HEADER_LEN_BYTES].try_into().expect("frame header");
                        offer_to(
                            &mut self.links,
                            &mut self.transports,
                            peer as u32,
                            header,
                            &frame[HEADER_LEN_BYTES..],
                        )
                    }
                    Queued::Lent { header, payload } => offer_lent_to(
                        &mut self.links,
                        &mut self.transports,
                        peer as u32,
                        header,
                        payload,
                    ),
                };
                match offered {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(error) if lost_peer_is_event(self.failures_are_events, &error) => {
                        // Its death seen by the network: its queue is dropped.
                        self.handle_peer_failure(peer as u32);
                        any = true;
                        break;
                    }
                    Err(error) => return Err(error),
                }
                self.state.outbox[peer].pop_front();
                self.state.queued_frames -= 1;
                any = true;
            }
        }
        self.transports.flush()?;
        Ok(any)
    }

    fn pump_streams(&mut self) -> MpiResult<bool> {
        let mut any = false;
        if self.state.streaming_sends == 0 {
            return Ok(false);
        }
        let rank = self.state.wire_rank;
        let failures_are_events = self.failures_are_events;
        let mut lost_peers = Vec::new();
        for peer in 0..self.state.size as usize {
            while let Some(&index) = self.state.streams[peer].front() {
                if !self.state.outbox[peer].is_empty() {
                    break;
                }
                let max_payload = self.transports.max_payload_bytes(peer as u32);
                let Some(Request {
                    operation: Operation::Send(send),
                    ..
                }) = self.state.requests.get_mut(index)
                else {
                    self.state.streams[peer].pop_front();
                    self.state.streaming_sends -= 1;
                    continue;
                };
                let SendStage::Streaming {
                    receiver_id,
                    offset,
                } = send.stage
                else {
                    self.state.streams[peer].pop_front();
                    self.state.streaming_sends -= 1;
                    continue;
                };
                let chunk = (send.length - offset).min(max_payload);
                let new_offset = offset + chunk;
                let mut header = FrameHeader::new(FrameKind::Data, rank);
                header.message_id = receiver_id;
                header.aux = offset as u64;
                header.payload_len = chunk as u32;
                let reliable = self.links.covers(peer as u32);
                if reliable && new_offset >= send.length {
                    // The send completes on this fragment's ack: no delay.
                    header.flags |= FLAG_ACK_NOW;
                }
                let header_bytes = rejoin::emit_stamped(&header, self.state.own_incarnation);
                // SAFETY (every arm): the send's buffer holds `length` bytes
                // until the request completes, and a send with a loan
                // completes only once the links returned it.
                let offered = match send.bytes.contiguous_at(offset) {
                    Some(start) if reliable => {
                        let loan = send.loan.get_or_insert_with(Loan::default);
                        let accepted = unsafe {
                            self.links
                                .offer_lent(peer as u32, &header_bytes, start, chunk, loan)
                        };
                        if accepted {
                            self.links.transmit_to(peer as u32, &mut self.transports)?;
                        }
                        Ok(accepted)
                    }
                    Some(start) => offer_to(
                        &mut self.links,
                        &mut self.transports,
                        peer as u32,
                        &header_bytes,
                        unsafe { slice_from(start, chunk) },
                    ),
                    // Non-contiguous data cannot be lent: it is gathered
                    // into the link's copy or the path's slot.
                    None => unsafe {
                        offer_gathered(
                            &mut self.links,
                            &mut self.transports,
                            peer as u32,
                            &header_bytes,
                            &send.bytes,
                            offset,
                            chunk,
                        )
                    },
                };
                let offered = match offered {
                    Ok(accepted) => accepted,
                    // Its death seen by the network (policy continue).
                    Err(error) if lost_peer_is_event(failures_are_events, &error) => {
                        lost_peers.push(peer as u32);
                        break;
                    }
                    Err(error) => return Err(error),
                };
                if !offered {
                    break;
                }
                any = true;
                send.stage = SendStage::Streaming {
                    receiver_id,
                    offset: new_offset,
                };
                if new_offset >= send.length {
                    self.state.streams[peer].pop_front();
                    self.state.streaming_sends -= 1;
                    if send.fragments_on_loan() {
                        send.stage = SendStage::AwaitingAcks;
                        self.state.sends_awaiting_acks.push(index);
                    } else {
                        send.stage = SendStage::Done;
                        send.loan = None;
                        self.state.complete_send(index);
                    }
                }
            }
        }
        for peer in lost_peers {
            self.handle_peer_failure(peer);
            any = true;
        }
        Ok(any)
    }

    /// Complete the sends whose lent fragments the links have all released.
    fn complete_acknowledged_sends(&mut self) -> bool {
        let state = &mut self.state;
        if state.sends_awaiting_acks.is_empty() {
            return false;
        }
        let before = state.sends_awaiting_acks.len();
        let mut awaiting = std::mem::take(&mut state.sends_awaiting_acks);
        awaiting.retain(|&index| {
            let Some(Request {
                operation: Operation::Send(send),
                ..
            }) = state.requests.get_mut(index)
            else {
                return false;
            };
            if send.fragments_on_loan() {
                return true;
            }
            send.loan = None;
            send.stage = SendStage::Done;
            state.complete_send(index);
            false
        });
        state.sends_awaiting_acks = awaiting;
        state.sends_awaiting_acks.len() < before
    }

    /// Complete the `Operation::LentOut` requests whose views the links
    /// have all released.
    fn complete_returned_loans(&mut self) -> bool {
        let state = &mut self.state;
        let before = state.lent_requests.len();
        let mut waiting = std::mem::take(&mut state.lent_requests);
        waiting.retain(|&index| {
            let Some(request) = state.requests.get_mut(index) else {
                return false;
            };
            let Operation::LentOut(loan) = &request.operation else {
                return false;
            };
            if crate::reliability::loan_outstanding(loan) {
                return true;
            }
            request.complete = true;
            if request.free_when_complete {
                state.requests.remove(index);
            }
            false
        });
        state.lent_requests = waiting;
        state.lent_requests.len() < before
    }

    /// Process `peer` (a world rank) has died: mark it failed, forget its
    /// link and everything queued for it, end with `MPIX_ERR_PROC_FAILED`
    /// every request that needs it, and tell the protocol. Every other
    /// operation goes on. Idempotent; this process itself and ranks out of
    /// range are ignored.
    pub fn handle_peer_failure(&mut self, peer: u32) {
        let incarnation = self.state.peer_incarnation(peer);
        self.handle_peer_death(peer, incarnation);
    }

    /// [`Engine::handle_peer_failure`] of incarnation `incarnation` of
    /// `peer` (a launcher's notice names it; a transport's loss is of the
    /// one it talks to).
    pub(crate) fn handle_peer_death(&mut self, peer: u32, incarnation: u32) {
        if F::LOGS_MESSAGES {
            let state = &mut self.state;
            if peer >= state.size
                || peer == state.rank
                || state.is_failed(peer)
                || state.is_restarting(peer)
            {
                return;
            }
            match state.interceptor.on_peer_failure(peer) {
                PeerFailureAction::Handled => return self.await_restart(peer),
                PeerFailureAction::AbortJob => {
                    // The protocol's report lines say why (which bound, or
                    // which spill file failed, or an orphan).
                    let why = state.interceptor.report_lines().join("; ");
                    state.pending_error.get_or_insert(MpiError::new(
                        ErrorClass::ProcFailed,
                        format!("message logging: rank {peer} died and cannot be restarted: {why}"),
                    ));
                }
            }
        }
        if F::REPLICATES {
            let state = &mut self.state;
            if peer >= state.size || peer == state.rank || state.is_failed(peer) {
                return;
            }
            if !state.first_replica_death(peer, incarnation) {
                return;
            }
            match state.interceptor.on_peer_failure(peer) {
                PeerFailureAction::Handled => return self.replica_lost(peer),
                PeerFailureAction::AbortJob => {
                    // Every replica of its rank is dead: the process of
                    // this replica (whose frames the substitutes stood
                    // for) fails too, with the usual rules.
                    let logical = state.interceptor.logical_peer(peer);
                    if self.watches_local_exits {
                        // No resmpi launcher (hydra, Slurm) says which
                        // rank is gone, and the error of the operation
                        // that needed it names no rank: say it here.
                        let world = state.comms.get(crate::WORLD).and_then(Option::as_ref);
                        let rank = world
                            .and_then(|world| world.group.iter().position(|&p| p == logical))
                            .unwrap_or(logical as usize);
                        let own_rank = world.map_or(state.rank, |world| world.rank);
                        eprintln!(
                            "resmpi: rank {own_rank}: every replica of rank {rank} has died \
                             (process {peer} last), so the job cannot go on"
                        );
                    }
                    self.fail_peer(peer);
                    return self.fail_peer(logical);
                }
            }
        }
        self.fail_peer(peer);
    }

    /// [`Engine::handle_peer_failure`] without a protocol that masks it.
    fn fail_peer(&mut self, peer: u32) {
        let state = &mut self.state;
        if peer >= state.size || peer == state.rank || state.is_failed(peer) {
            return;
        }
        // A blocking receive becomes a request first, so that the failure
        // rules of requests apply to it.
        state.promote_direct_receive();
        let slot = peer as usize;
        state.failed[slot] = true;
        state.failed_count += 1;
        self.links.forget(peer);
        state.queued_frames -= state.outbox[slot].len();
        state.outbox[slot].clear();
        state.streaming_sends -= state.streams[slot].len();
        state.streams[slot].clear();
        // An announced rendezvous can never deliver its data now.
        while state
            .matcher
            .withdraw_unexpected(|envelope, message| {
                envelope.source == peer && matches!(message, Unexpected::Rendezvous { .. })
            })
            .is_some()
        {}
        state.fail_requests_involving(peer);
        state.ulfm_peer_failure(peer);
        state.rma_peer_failed(peer);
        // Until a protocol can act on it (logging), the event is only
        // reported: the policy was applied by the launcher. (Replication
        // was asked first, in `handle_peer_failure`.)
        if !F::REPLICATES && !F::LOGS_MESSAGES {
            let _ = state.interceptor.on_peer_failure(peer);
        }
    }

    /// Replication: complete the sends the protocol released and make
    /// the re-sends it asks for (a substitute's take-over). Returns how
    /// many there were.
    fn replication_progress(&mut self) -> MpiResult<usize> {
        let mut events = 0;
        while let Some(wire_id) = self.state.interceptor.poll_released_send() {
            if let Some((index, _)) = self.state.requests.by_wire_id(wire_id) {
                self.state.complete_send(index);
            }
            events += 1;
        }
        while let Some((wire_id, to, logical_seq)) = self.state.interceptor.poll_resend() {
            self.resend(wire_id, to, logical_seq)?;
            events += 1;
        }
        Ok(events)
    }

    /// Replication: transmit the held send `wire_id` again, to process
    /// `to`, with its logical number: an internal request over the same
    /// bytes (the held request keeps them valid until the protocol, told
    /// by `on_resent`, releases it).
    fn resend(&mut self, wire_id: u64, to: u32, logical_seq: u64) -> MpiResult<()> {
        let Some((
            _,
            Request {
                operation: Operation::Send(send),
                comm,
                complete: false,
                ..
            },
        )) = self.state.requests.by_wire_id(wire_id)
        else {
            // The protocol holds every send it may re-send until its acks
            // are in: a re-send of a completed one would read a buffer the
            // application owns again, and skipping it would leave the
            // protocol waiting for ever.
            return fail(
                ErrorClass::Intern,
                format!(
                    "replication: message {logical_seq} to process {to} must be re-sent, \
                     but its send request has completed"
                ),
            );
        };
        let mut request = send_request(
            *comm,
            to,
            (send.context, send.tag),
            send.bytes.clone(),
            send.length,
            None,
            send.tainted,
        );
        request.free_when_complete = true;
        if let Operation::Send(copy) = &mut request.operation {
            copy.logical_seq = logical_seq;
            copy.resend = true;
        }
        let index = self.insert_request(request)?;
        self.launch_send(index, SendMode::Standard)
    }

    /// Replication: process `dead` died and its rank lives on in another
    /// replica (the protocol has elected the substitute). Nothing fails:
    /// what was queued for it is dropped, and each transmission to it
    /// counts as out, so its send waits only for the acks the protocol
    /// still expects.
    fn replica_lost(&mut self, dead: u32) {
        for entry in &mut self.state.rendezvous_in {
            entry.sender_dead |= entry.physical == dead;
        }
        // A send whose message is out already (stage Done) waits for its
        // copies or is held by the protocol until its acks are in;
        // completing it here would let the application reuse a buffer a
        // substitute may still have to re-send from.
        self.stop_sending_to(dead, |_, send| send.stage == SendStage::Done);
    }

    /// Process `dead` is gone but its rank lives on (a replica's
    /// substitute, or a restart under message logging): drop what was on
    /// the way to it and complete the sends to it, except those `keep`
    /// picks (by request index), without failing anything. RMA is not
    /// masked: a lock it held here goes with it.
    pub(super) fn stop_sending_to(&mut self, dead: u32, keep: impl Fn(u32, &SendState) -> bool) {
        let state = &mut self.state;
        state.promote_direct_receive();
        let slot = dead as usize;
        self.links.forget(dead);
        state.queued_frames -= state.outbox[slot].len();
        state.outbox[slot].clear();
        state.streaming_sends -= state.streams[slot].len();
        state.streams[slot].clear();
        state.credit_owed[slot] = 0;
        for index in state.requests.live_indices() {
            let Some(Request {
                operation: Operation::Send(send),
                complete: false,
                ..
            }) = state.requests.get_mut(index)
            else {
                continue;
            };
            if send.peer != dead || send.cancel_requested || keep(index, send) {
                continue;
            }
            send.stage = SendStage::Done;
            send.loan = None;
            state.complete_send(index);
        }
        let requests = &state.requests;
        state
            .sends_awaiting_acks
            .retain(|&index| requests.get(index).is_some_and(|request| !request.complete));
        state.rma_peer_failed(dead);
    }

    /// Whether world rank `peer` is known to have failed.
    #[inline]
    pub fn peer_failed(&self, peer: u32) -> bool {
        self.state.is_failed(peer)
    }

    /// The outcome of handing a frame to `peer`'s channel. A closed
    /// connection (`ProcFailed`) under the `continue` policy is the peer's
    /// death seen by the network: handled as the event (the frame and
    /// everything queued for the peer dropped), and the send that tried
    /// fails with the peer's error, unless the death was masked (a
    /// replica's, a logged rank's restart). Anything else passes through.
    fn absorb_lost_peer(&mut self, peer: u32, offered: MpiResult<bool>) -> MpiResult<bool> {
        match offered {
            Err(error) if lost_peer_is_event(self.failures_are_events, &error) => {
                self.handle_peer_failure(peer);
                if F::LOGS_MESSAGES && self.state.is_restarting(peer) {
                    // Logged: its new incarnation gets it again.
                    return Ok(true);
                }
                if F::REPLICATES && !self.state.is_failed(peer) {
                    // A replica the protocol masked (its rank lives on in
                    // a substitute): what was for it is dropped, as after
                    // mpiexec's notice. Seen when a host with several
                    // replicas goes down and a survivor's frame to one of
                    // them finds the connection closed before the notice.
                    return Ok(true);
                }
                Err(peer_failed_error(peer))
            }
            other => other,
        }
    }

    /// `--inject kill:RANK@sends=N`: count one send, and die after the N-th.
    #[inline]
    pub(crate) fn count_send_for_kill(&mut self) {
        if self.state.sends_until_kill == 0 {
            return;
        }
        self.state.sends_until_kill -= 1;
        if self.state.sends_until_kill == 0 {
            // Push out what this send queued, so the kill lands after it.
            let _ = self.flush_outbox();
            // SAFETY: raising a signal on this process has no memory effects.
            unsafe { libc::raise(libc::SIGKILL) };
        }
    }

    /// Send everything queued and wait for every send in flight (Finalize).
    pub fn drain(&mut self) -> MpiResult<()> {
        self.wait_until(|engine| {
            engine.state.queued_frames == 0
                && engine.state.streaming_sends == 0
                && engine.state.sends_awaiting_acks.is_empty()
                && !engine.transports.rails_hold_output()
                && engine.links.all_acknowledged()
        })
    }
}

/// Whether a path's `error` (a closed connection: `ProcFailed`) is a lost
/// peer to handle as a failure event, which it is under policy `continue`
/// (`failures_are_events`).
#[inline]
fn lost_peer_is_event(failures_are_events: bool, error: &MpiError) -> bool {
    failures_are_events && error.class == ErrorClass::ProcFailed
}

/// The shared-memory path's error as the engine reports it (out of line:
/// the idle progress round should not carry the formatting code).
#[cold]
fn shm_error(error: PathError) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("shared-memory path: {error}"))
}

/// The error of an operation that needs failed world rank `peer`.
pub fn peer_failed_error(peer: u32) -> MpiError {
    MpiError::new(
        ErrorClass::ProcFailed,
        format!("process {peer} (MPI_COMM_WORLD rank) has failed"),
    )
}

impl<F: Interceptor> State<F> {
    /// Show the protocol the payload of the message with `header` to `peer`.
    ///
    /// # Safety
    /// `bytes` must hold `length` readable packed bytes for this call.
    unsafe fn report_payload(
        &mut self,
        header: &FrameHeader,
        peer: u32,
        bytes: &UserBytes,
        length: usize,
    ) {
        let message = SentMessage {
            destination: peer,
            context: header.context,
            tag: header.tag,
            logical_seq: header.logical_seq,
        };
        match bytes.contiguous_at(0) {
            // SAFETY: by the caller's promise.
            Some(start) => self.interceptor.on_send_payload(
                &message,
                Payload::Contiguous(unsafe { slice_from(start, length) }),
            ),
            None => {
                // SAFETY: by the caller's promise; `out` is `length` long.
                let gather = |out: &mut [u8]| unsafe { bytes.read(0, out) };
                self.interceptor.on_send_payload(
                    &message,
                    Payload::Gathered {
                        length_bytes: length,
                        gather: &gather,
                    },
                );
            }
        }
    }

    /// A copy of fanned-out send `parent_wire_id` has ended: complete the
    /// send once its own message and every copy have.
    fn copy_finished(&mut self, parent_wire_id: u64) {
        let Some((index, request)) = self.requests.by_wire_id(parent_wire_id) else {
            return;
        };
        if request.complete {
            return;
        }
        let Operation::Send(send) = &mut request.operation else {
            return;
        };
        send.copies_pending = send.copies_pending.saturating_sub(1);
        if send.copies_pending == 0 && send.stage == SendStage::Done && !send.cancel_requested {
            self.complete_send(index);
        }
    }

    /// The logical number of the next message to `peer`.
    #[inline]
    fn next_message_seq(&mut self, peer: u32) -> u64 {
        let seq = &mut self.message_seq_out[peer as usize];
        *seq += 1;
        *seq
    }

    /// Whether a message frame from `peer` numbered `logical_seq` is the
    /// next one, to be taken. A number already taken is a duplicate (a
    /// re-sent or replayed message): dropped and counted. A gap means a
    /// message was lost below the engine, which no path may do: an error.
    #[inline]
    fn take_message_seq(&mut self, peer: u32, logical_seq: u64) -> bool {
        let last = &mut self.message_seq_in[peer as usize];
        if logical_seq == *last + 1 {
            *last = logical_seq;
            return true;
        }
        if logical_seq <= *last {
            self.duplicate_messages_dropped += 1;
        } else if F::LOGS_MESSAGES {
            self.pending_error.get_or_insert(MpiError::new(
                ErrorClass::ProcFailed,
                format!(
                    "message logging: message {logical_seq} from rank {peer} arrived after message {last}: messages {} to {} are missing (the sender's log no longer holds them: a checkpoint covered them, or the sender resumed from its own checkpoint after sending them); this restart is refused",
                    *last + 1,
                    logical_seq - 1
                ),
            ));
        } else {
            self.pending_error.get_or_insert(MpiError::new(
                ErrorClass::Intern,
                format!(
                    "message {} from rank {peer} arrived after message {last}: messages in between were lost",
                    logical_seq
                ),
            ));
        }
        false
    }

    /// Replication: a message frame from process `physical` standing for
    /// `peer`: the protocol decides by its rank channel's logical number
    /// (and acks the sender's other replicas). A duplicate (a substitute's
    /// re-send) is dropped, its eager credit returned. True = deliver.
    fn replicated_arrival(&mut self, physical: u32, peer: u32, header: &FrameHeader) -> bool {
        let data_follows = header.kind == FrameKind::RequestToSend;
        match self
            .interceptor
            .on_message_arrival(physical, header.logical_seq, data_follows)
        {
            MessageArrival::Deliver => {
                if data_follows {
                    self.rendezvous_in.push(RendezvousIn {
                        peer,
                        physical,
                        logical_seq: header.logical_seq,
                        send_id: header.message_id,
                        receive: None,
                        sender_dead: false,
                    });
                }
                true
            }
            MessageArrival::Duplicate => {
                self.duplicate_messages_dropped += 1;
                if data_follows {
                    self.repoint_rendezvous(physical, peer, header);
                } else {
                    if physical == peer {
                        self.return_credit(peer, header.payload_len as usize);
                    }
                    if header.flags & FLAG_SYNC != 0 {
                        self.answer_duplicate_sync(physical, peer, header);
                    }
                }
                false
            }
            MessageArrival::OutOfOrder { expected } => {
                self.pending_error.get_or_insert(MpiError::new(
                    ErrorClass::Intern,
                    format!(
                        "replication: message {} from process {physical} arrived while {expected} was expected: messages in between were lost",
                        header.logical_seq
                    ),
                ));
                false
            }
        }
    }

    /// Replication: a substitute (`physical`) re-sent a synchronous eager
    /// message from `peer` taken here already. Its send waits for a
    /// SyncAck that the first copy's answer (sent to the first sender,
    /// dead) never brings: if that copy is still unmatched, the answer at
    /// its match goes to the substitute instead; if it was matched, the
    /// substitute gets its answer now.
    fn answer_duplicate_sync(&mut self, physical: u32, peer: u32, header: &FrameHeader) {
        let substitute = SyncAnswer {
            to: physical,
            id: header.message_id,
        };
        match unexpected_message(&mut self.matcher, peer, header.logical_seq) {
            Some(Unexpected::Eager {
                sync: Some(answer), ..
            }) => {
                if self.interceptor.supersedes(physical, answer.to) {
                    *answer = substitute;
                }
            }
            // Matched already (or its first copy came another way: a
            // rendezvous announcement): answered now.
            _ => self.send_sync_ack(substitute),
        }
    }

    /// Replication: a substitute (`physical`) re-sent the request-to-send
    /// of a rendezvous from `peer` taken here already. If its data has not
    /// all landed (its first sender died), the substitute's copy takes
    /// over: an unexpected announcement gets its request id, a matched
    /// receive starts over with a clear-to-send to it.
    fn repoint_rendezvous(&mut self, physical: u32, peer: u32, header: &FrameHeader) {
        let entry = self
            .rendezvous_in
            .iter_mut()
            .find(|entry| entry.peer == peer && entry.logical_seq == header.logical_seq);
        // Its data is in already, or (under replication) on its way from
        // this very sender (a re-send to its own counterpart under replica
        // recovery, which cannot tell its first copy from a dead
        // forker's): the re-send's copy has nothing to deliver, and must
        // still end. Under message logging the same sender's re-send is its
        // new incarnation's replay, which takes over.
        let Some(entry) =
            entry.filter(|entry| !F::REPLICATES || entry.physical != physical || entry.sender_dead)
        else {
            let mut answer = FrameHeader::new(FrameKind::ClearToSend, self.wire_rank);
            answer.message_id = header.message_id;
            answer.tag = CLEAR_TO_SEND_ALREADY_DELIVERED;
            self.queue_frame(physical, &answer, &[]);
            return;
        };
        if !entry.sender_dead && !self.interceptor.supersedes(physical, entry.physical) {
            // A late copy from earlier in the chain of substitutes (its
            // sender is dead, though this process may not know it yet).
            return;
        }
        entry.send_id = header.message_id;
        entry.physical = physical;
        entry.sender_dead = false;
        match entry.receive {
            None => {
                if let Some(Unexpected::Rendezvous { send_id, .. }) =
                    unexpected_message(&mut self.matcher, peer, header.logical_seq)
                {
                    *send_id = header.message_id;
                }
            }
            Some(index) => {
                let wire_id = self.requests.wire_id(index);
                let Some(Request {
                    operation: Operation::Receive(receive),
                    complete: false,
                    ..
                }) = self.requests.get_mut(index)
                else {
                    return;
                };
                receive.received = 0;
                let mut answer = FrameHeader::new(FrameKind::ClearToSend, self.wire_rank);
                answer.message_id = header.message_id;
                answer.aux = wire_id;
                self.queue_frame(physical, &answer, &[]);
            }
        }
    }

    /// Replication: the receive `index` matched rendezvous `logical_seq` of
    /// `peer`: where the clear-to-send goes (the sender whose announcement
    /// the rendezvous follows now).
    fn rendezvous_matched(&mut self, index: u32, peer: u32, logical_seq: u64) -> u32 {
        match self
            .rendezvous_in
            .iter_mut()
            .find(|entry| entry.peer == peer && entry.logical_seq == logical_seq)
        {
            Some(entry) => {
                entry.receive = Some(index);
                entry.physical
            }
            None => peer,
        }
    }

    /// Replication: the data of receive `index` has all landed: the
    /// protocol may ack it.
    fn rendezvous_landed(&mut self, index: u32) {
        if let Some(position) = self
            .rendezvous_in
            .iter()
            .position(|entry| entry.receive == Some(index))
        {
            let entry = self.rendezvous_in.swap_remove(position);
            if F::HASHES_RECEIVED {
                if let Some(hash) = self.received_payload_hash(index) {
                    self.interceptor
                        .on_received_hash(entry.physical, entry.logical_seq, hash);
                }
            }
            self.interceptor
                .on_message_landed(entry.physical, entry.logical_seq);
        }
    }

    /// CRC32C of the message receive `index` holds, packed (None when it
    /// was truncated: its bytes are not all kept).
    fn received_payload_hash(&self, index: u32) -> Option<u32> {
        let Some(Request {
            operation: Operation::Receive(receive),
            ..
        }) = self.requests.get(index)
        else {
            return None;
        };
        if receive.total > receive.capacity {
            return None;
        }
        if let Some(start) = receive.bytes.contiguous_at(0) {
            // SAFETY: the receive's buffer holds `total` bytes (at most its
            // capacity), just written.
            return Some(crc32c(unsafe { slice_from(start, receive.total) }));
        }
        let mut crc = resmpi_checksum::Crc32c::new();
        let mut chunk = vec![0u8; receive.total.min(64 << 10)];
        let mut offset = 0;
        while offset < receive.total {
            let length = chunk.len().min(receive.total - offset);
            // SAFETY: as above; `read` packs `length` bytes from `offset`.
            unsafe { receive.bytes.read(offset, &mut chunk[..length]) };
            crc = crc.update(&chunk[..length]);
            offset += length;
        }
        Some(crc.finish())
    }

    /// Replication: whether a data frame from `physical` for receive
    /// `wire_id` comes from a sender the rendezvous no longer listens to
    /// (a dead sender's last fragments after the substitute took over).
    fn stale_rendezvous_data(&self, physical: u32, wire_id: u64) -> bool {
        self.rendezvous_in.iter().any(|entry| {
            entry.physical != physical
                && entry
                    .receive
                    .is_some_and(|index| self.requests.wire_id(index) == wire_id)
        })
    }

    /// Replication: whether the death of incarnation `incarnation` of
    /// `peer` is news (not reported before, nor an older one's); it is
    /// counted handled from now on.
    fn first_replica_death(&mut self, peer: u32, incarnation: u32) -> bool {
        let handled = &mut self.replica_death_handled[peer as usize];
        if handled.is_some_and(|handled| handled >= incarnation) {
            return false;
        }
        *handled = Some(incarnation);
        true
    }

    /// Whether world rank `peer` has failed (false for ranks out of range).
    /// Until a first death, one compare: this sits on every send and frame.
    #[inline]
    pub fn is_failed(&self, peer: u32) -> bool {
        self.failed_count > 0 && self.failed.get(peer as usize).copied().unwrap_or(false)
    }

    /// World ranks known to have failed, lowest first.
    pub fn failed_peers(&self) -> Vec<u32> {
        (0..self.size)
            .filter(|&peer| self.is_failed(peer))
            .collect()
    }

    /// Complete request `index` with `MPIX_ERR_PROC_FAILED`, without the
    /// completion hooks (nothing was delivered or sent).
    fn fail_request(&mut self, index: u32) {
        self.fail_request_with(index, ErrorClass::ProcFailed);
    }

    /// Complete request `index` with error `class`, without the completion
    /// hooks (nothing was delivered or sent).
    fn fail_request_with(&mut self, index: u32, class: ErrorClass) {
        let Some(request) = self.requests.get_mut(index) else {
            return;
        };
        request.status.error = class as i32;
        request.complete = true;
        let mut copy_of = None;
        if let Operation::Send(send) = &mut request.operation {
            send.stage = SendStage::Done;
            send.loan = None;
            send.cancel_requested = false;
            copy_of = send.copy_of;
        }
        if request.free_when_complete {
            self.requests.remove(index);
        }
        if F::ROUTES_SENDS {
            if let Some(parent) = copy_of {
                self.copy_finished(parent);
            }
        }
    }

    /// End every incomplete request that needs `peer`: sends to it,
    /// receives matched to it or posted for it, and wildcard receives still
    /// pending on a communicator that holds it (they might have waited for
    /// it; MPI's fault-tolerance chapter fails them too).
    fn fail_requests_involving(&mut self, peer: u32) {
        for index in self.requests.live_indices() {
            let wire_id = self.requests.wire_id(index);
            let Some(request) = self.requests.get(index) else {
                continue;
            };
            if request.complete {
                continue;
            }
            let involved = match &request.operation {
                Operation::Send(send) => send.peer == peer,
                Operation::Receive(receive) if receive.matched => receive.sender == Some(peer),
                Operation::Receive(receive) => match receive.pattern.source {
                    Some(source) => source == peer,
                    None => {
                        !self.wildcards_wait_for_acknowledgement
                            && self
                                .comms
                                .get(request.comm)
                                .and_then(Option::as_ref)
                                .is_some_and(|comm| comm_holds(comm, peer))
                    }
                },
                Operation::Nothing
                | Operation::Buffered { .. }
                | Operation::Generalized
                | Operation::LentOut(_) => false,
            };
            if !involved {
                continue;
            }
            if let Operation::Receive(receive) = &request.operation {
                if !receive.matched {
                    self.matcher.cancel_receive(wire_id);
                }
            }
            self.fail_request(index);
        }
        let requests = &self.requests;
        self.sends_awaiting_acks
            .retain(|&index| requests.get(index).is_some_and(|request| !request.complete));
    }

    /// Withdraw receive `index` if nothing matched it yet and end it with
    /// `MPIX_ERR_PROC_FAILED`: a blocking wildcard receive that may not go
    /// on waiting while a failure is unacknowledged (ULFM). True if it did.
    pub fn fail_unmatched_receive(&mut self, index: u32) -> bool {
        let wire_id = self.requests.wire_id(index);
        match self.requests.get(index) {
            Some(Request {
                operation: Operation::Receive(receive),
                complete: false,
                ..
            }) if !receive.matched => {
                self.matcher.cancel_receive(wire_id);
                self.fail_request(index);
                true
            }
            _ => false,
        }
    }

    /// Record an error found while a path was borrowed; the current
    /// progress call returns it.
    pub fn fail_later(&mut self, error: MpiError) {
        self.pending_error.get_or_insert(error);
    }

    /// Queue a frame for `peer` (used while a path is borrowed). Nothing
    /// goes to a failed peer.
    fn queue_frame(&mut self, peer: u32, header: &FrameHeader, payload: &[u8]) {
        let mut frame = Vec::with_capacity(HEADER_LEN_BYTES + payload.len());
        frame.resize(HEADER_LEN_BYTES, 0);
        frame.extend_from_slice(payload);
        self.queue_built_frame(peer, header, frame);
    }

    /// `queue_frame` for a frame built in place (`HEADER_LEN_BYTES` of room
    /// for `header`, then the payload): queued as it is, not copied.
    fn queue_built_frame(&mut self, peer: u32, header: &FrameHeader, mut frame: Vec<u8>) {
        // Replication: nothing goes to a dead replica (an answer to what it
        // sent carries its request ids, which mean nothing to its
        // substitute; the substitute's own copies get their answers).
        if F::REPLICATES && self.interceptor.replica_dead(peer) {
            return;
        }
        if self.is_failed(peer) || (F::LOGS_MESSAGES && self.is_restarting(peer)) {
            return;
        }
        frame[..HEADER_LEN_BYTES]
            .copy_from_slice(&rejoin::emit_stamped(header, self.own_incarnation));
        self.outbox[peer as usize].push_back(Queued::Built(frame));
        self.queued_frames += 1;
    }

    /// `queue_built_frame` for a frame whose payload is lent (an RMA
    /// reply read from window memory): queued with the view, not copied.
    fn queue_lent_frame(&mut self, peer: u32, header: &FrameHeader, payload: LentBytes) {
        if F::REPLICATES && self.interceptor.replica_dead(peer) {
            return;
        }
        if self.is_failed(peer) || (F::LOGS_MESSAGES && self.is_restarting(peer)) {
            return;
        }
        self.outbox[peer as usize].push_back(Queued::Lent {
            header: rejoin::emit_stamped(header, self.own_incarnation),
            payload,
        });
        self.queued_frames += 1;
    }

    fn complete_send(&mut self, index: u32) {
        if F::REPLICATES && self.replication_holds(index) {
            return;
        }
        let Some(request) = self.requests.get_mut(index) else {
            return;
        };
        let mut copy_of = None;
        if let Operation::Send(send) = &request.operation {
            if F::ROUTES_SENDS && send.copies_pending > 0 {
                // Its own message is out (stage Done); the last copy to
                // end completes it (`copy_finished`).
                return;
            }
            self.interceptor
                .on_send_complete(send.peer, send.context, send.tag, send.length);
            copy_of = send.copy_of;
        }
        request.complete = true;
        if request.free_when_complete {
            self.requests.remove(index);
        }
        if F::ROUTES_SENDS {
            if let Some(parent) = copy_of {
                self.copy_finished(parent);
            }
        }
    }

    /// Replication: send `index` is out. A substitute's re-send is
    /// reported to the protocol; the application's send (every copy out)
    /// is held until the protocol releases it (`release_held_sends`).
    /// True = it does not complete now.
    fn replication_holds(&mut self, index: u32) -> bool {
        let wire_id = self.requests.wire_id(index);
        let Some(Request {
            operation: Operation::Send(send),
            ..
        }) = self.requests.get_mut(index)
        else {
            return false;
        };
        if send.resend {
            let (peer, logical_seq) = (send.peer, send.logical_seq);
            self.interceptor.on_resent(peer, logical_seq);
            return false;
        }
        if !send.gated || send.copies_pending > 0 {
            return false;
        }
        send.gated = false;
        let (peer, logical_seq) = (send.peer, send.logical_seq);
        self.interceptor.hold_send(wire_id, peer, logical_seq)
    }

    #[inline]
    fn complete_receive(&mut self, index: u32, envelope: Envelope) {
        if F::PINS_WILDCARDS {
            let wire_id = self.requests.wire_id(index);
            if self.interceptor.hold_receive(wire_id) {
                self.held_receives.push((wire_id, envelope));
                return;
            }
        }
        self.complete_receive_now(index, envelope);
    }

    /// Complete receive `index` (its message is in), past any hold.
    fn complete_receive_now(&mut self, index: u32, envelope: Envelope) {
        let Some(request) = self.requests.get_mut(index) else {
            return;
        };
        request.complete = true;
        let bytes = request.status.count_bytes;
        self.interceptor.on_receive_complete(&envelope, bytes);
        if request.free_when_complete {
            self.requests.remove(index);
        }
    }

    #[inline]
    fn report_matches(&mut self) {
        while let Some(event) = self.matcher.poll_event() {
            self.interceptor.on_match(&event);
        }
    }

    /// Fill the status of receive `index` for a matched message of
    /// `length` bytes and copy `payload` (an eager message's data; empty
    /// for a rendezvous, whose data follows) into its buffer, where the
    /// request lies (no copy of its buffer description). False if `index`
    /// is no receive.
    fn accept_match(
        &mut self,
        index: u32,
        envelope: Envelope,
        length: usize,
        tainted: bool,
        payload: &[u8],
    ) -> bool {
        let Some(request) = self.requests.get(index) else {
            return false;
        };
        let comm_rank = self
            .comms
            .get(request.comm)
            .and_then(|comm| comm.as_ref())
            .and_then(|comm| comm.comm_rank_of(envelope.source))
            .map_or(envelope.source as i32, |rank| rank as i32);
        let Some(request) = self.requests.get_mut(index) else {
            return false;
        };
        let Operation::Receive(receive) = &mut request.operation else {
            return false;
        };
        receive.matched = true;
        receive.sender = Some(envelope.source);
        receive.total = length;
        request.status.source = comm_rank;
        request.status.tag = envelope.tag;
        request.status.count_bytes = length.min(receive.capacity);
        if length > receive.capacity {
            request.status.error = ErrorClass::Truncate as i32;
        }
        if tainted {
            // The message depends on a failed process: the receive fails
            // (its data still arrives).
            request.status.error = ErrorClass::ProcFailed as i32;
        }
        // SAFETY: the receive's owner guarantees `capacity` writable packed
        // bytes until the request completes.
        unsafe { receive.bytes.write(receive.capacity, 0, payload) };
        true
    }

    fn deliver_unexpected(&mut self, index: u32, envelope: Envelope, message: Unexpected) {
        let length = message.length();
        let payload: &[u8] = match &message {
            Unexpected::Eager { data, .. } => data,
            Unexpected::Rendezvous { .. } => &[],
        };
        if !self.accept_match(index, envelope, length, message.tainted(), payload) {
            return;
        }
        match message {
            Unexpected::Eager { data, sync, .. } => {
                self.return_credit(envelope.source, data.len());
                if let Some(answer) = sync {
                    self.send_sync_ack(answer);
                }
                self.complete_receive(index, envelope);
            }
            Unexpected::Rendezvous {
                send_id,
                logical_seq,
                length,
                ..
            } => self.clear_to_send(index, envelope, (send_id, logical_seq), length),
        }
    }

    /// Answer the announcement (`send_id`, `logical_seq`) that receive
    /// `index` matched: the sender may stream its data.
    fn clear_to_send(
        &mut self,
        index: u32,
        envelope: Envelope,
        (send_id, logical_seq): (u64, u64),
        length: usize,
    ) {
        if self.is_failed(envelope.source) {
            // An announcement the dead sender can no longer follow with data.
            self.fail_request(index);
            return;
        }
        let to = if F::REPLICATES || F::LOGS_MESSAGES {
            self.rendezvous_matched(index, envelope.source, logical_seq)
        } else {
            envelope.source
        };
        if length == 0 {
            if F::REPLICATES || F::LOGS_MESSAGES {
                self.rendezvous_landed(index);
            }
            self.complete_receive(index, envelope);
        }
        let mut header = FrameHeader::new(FrameKind::ClearToSend, self.wire_rank);
        header.message_id = send_id;
        header.aux = self.requests.wire_id(index);
        self.queue_frame(to, &header, &[]);
    }

    /// `peer` cancelled its send `send_id`: withdraw the message if it is
    /// still unexpected here, and answer either way.
    fn withdraw_cancelled_send(&mut self, peer: u32, send_id: u64) {
        let withdrawn = self.withdraw_message(peer, send_id);
        let mut header = FrameHeader::new(FrameKind::Control, self.wire_rank);
        header.message_id = CONTROL_CANCEL_ANSWER;
        header.aux = send_id;
        header.tag = i32::from(withdrawn);
        self.queue_frame(peer, &header, &[]);
    }

    /// Withdraw the message of `peer`'s send `send_id` if no receive has
    /// matched it yet; whether it was withdrawn.
    fn withdraw_message(&mut self, peer: u32, send_id: u64) -> bool {
        let withdrawn = self.matcher.withdraw_unexpected(|envelope, message| {
            envelope.source == peer
                && send_id != 0
                && match message {
                    Unexpected::Eager { send_id: id, .. } => *id == send_id,
                    Unexpected::Rendezvous { send_id: id, .. } => *id == send_id,
                }
        });
        if let Some((_, Unexpected::Eager { data, .. })) = &withdrawn {
            self.return_credit(peer, data.len());
        }
        withdrawn.is_some()
    }

    /// The receiver answered the cancel of send `send_id`.
    fn finish_send_cancel(&mut self, send_id: u64, withdrawn: bool) {
        let Some((index, request)) = self.requests.by_wire_id(send_id) else {
            return;
        };
        let Operation::Send(send) = &mut request.operation else {
            return;
        };
        if !send.cancel_requested {
            return;
        }
        send.cancel_requested = false;
        if withdrawn {
            send.stage = SendStage::Done;
            request.status.cancelled = true;
            request.complete = true;
            if request.free_when_complete {
                self.requests.remove(index);
            }
        } else if send.stage == SendStage::Done {
            // It had completed before the cancel; it stays complete.
            request.complete = true;
            if request.free_when_complete {
                self.requests.remove(index);
            }
        }
    }

    fn send_sync_ack(&mut self, answer: SyncAnswer) {
        let mut header = FrameHeader::new(FrameKind::SyncAck, self.wire_rank);
        header.message_id = answer.id;
        self.queue_frame(answer.to, &header, &[]);
    }

    #[inline]
    fn return_credit(&mut self, peer: u32, payload_bytes: usize) {
        let owed = &mut self.credit_owed[peer as usize];
        *owed += payload_bytes + HEADER_LEN_BYTES;
        if *owed >= self.config.eager_credit_bytes / 4 {
            let mut header = FrameHeader::new(FrameKind::Control, self.wire_rank);
            header.message_id = CONTROL_CREDIT;
            header.aux = *owed as u64;
            *owed = 0;
            self.queue_frame(peer, &header, &[]);
        }
    }

    /// One frame from `peer` (header + payload).
    pub fn handle_frame(&mut self, peer: u32, frame: &[u8]) {
        self.handle_frame_checked(peer, frame, None);
    }

    /// One frame from `peer`, whose payload checksum, with `check`, is still
    /// to be verified (see [`Check`]): a rendezvous fragment is verified
    /// during its copy into the receive buffer, anything else before it is
    /// handled. False = the checksum failed and nothing was committed.
    pub fn handle_frame_checked(&mut self, peer: u32, frame: &[u8], check: Check) -> bool {
        if self.is_failed(peer) {
            // Nothing from a process is delivered once its death is known.
            return true;
        }
        let header = match FrameHeader::parse(frame) {
            Ok(header) => header,
            Err(error) => {
                self.pending_error.get_or_insert(MpiError::new(
                    ErrorClass::Intern,
                    format!("bad frame from rank {peer}: {error}"),
                ));
                return true;
            }
        };
        if header.incarnation != self.peer_incarnation[peer as usize]
            && !rejoin::is_link_frame(header.kind)
        {
            self.drop_other_incarnation(peer, header.incarnation);
            return true;
        }
        let payload_end = HEADER_LEN_BYTES + header.payload_len as usize;
        if header.extension_len != 0 {
            // Piggybacks belong to FT protocols; none that adds them runs here.
            self.pending_error.get_or_insert(MpiError::new(
                ErrorClass::Intern,
                format!(
                    "frame from rank {peer} carries a {}-byte protocol extension, but no fault-tolerance protocol that uses one is active (do all processes run with the same options?)",
                    header.extension_len
                ),
            ));
            return true;
        }
        if frame.len() < payload_end || self.interceptor.engine_index(header.source) != peer {
            self.pending_error.get_or_insert(MpiError::new(
                ErrorClass::Intern,
                format!("malformed frame from rank {peer}"),
            ));
            return true;
        }
        let payload = &frame[HEADER_LEN_BYTES..payload_end];
        if F::REPLICATES && self.interceptor.replica_dead(peer) {
            // A dead replica's last frames, read after its death is known:
            // what they carried and was not acked, its substitute re-sends.
            return true;
        }
        let physical = peer;
        let peer = if F::REPLICATES && is_sender_frame(&header) {
            // A substitute's frames stand for its dead sibling: matched as
            // from the process of this replica.
            self.interceptor.logical_peer(peer)
        } else {
            peer
        };
        if header.kind == FrameKind::Data {
            if F::REPLICATES && self.stale_rendezvous_data(physical, header.message_id) {
                return true;
            }
            return self.receive_data(peer, &header, payload, check);
        }
        if check.is_some_and(|check| !check(crc32c(payload))) {
            return false;
        }
        if matches!(header.kind, FrameKind::Eager | FrameKind::RequestToSend) {
            if F::REPLICATES {
                if physical != peer && header.kind == FrameKind::Eager {
                    // A substitute's message: its credit goes back to it
                    // now (answers to the process it stands for, dead, are
                    // dropped).
                    self.return_credit(physical, header.payload_len as usize);
                }
                if F::HASHES_RECEIVED && header.kind == FrameKind::Eager {
                    self.interceptor.on_received_hash(
                        physical,
                        header.logical_seq,
                        crc32c(payload),
                    );
                }
                if !self.replicated_arrival(physical, peer, &header) {
                    return true;
                }
            } else if !self.take_message_seq(peer, header.logical_seq) {
                if F::LOGS_MESSAGES {
                    self.replayed_duplicate(peer, &header);
                }
                return true;
            } else if F::LOGS_MESSAGES && header.kind == FrameKind::RequestToSend {
                self.rendezvous_in.push(RendezvousIn {
                    peer,
                    physical: peer,
                    logical_seq: header.logical_seq,
                    send_id: header.message_id,
                    receive: None,
                    sender_dead: false,
                });
            }
        }
        match header.kind {
            FrameKind::Eager => {
                let envelope = Envelope {
                    source: peer,
                    context: header.context,
                    tag: header.tag,
                };
                let sync = (header.flags & FLAG_SYNC != 0).then_some(SyncAnswer {
                    to: physical,
                    id: header.message_id,
                });
                let tainted = header.flags & FLAG_FAILURE_TAINTED != 0;
                let matched = self
                    .matcher
                    .handle_arrival_with(envelope, || Unexpected::Eager {
                        data: payload.to_vec(),
                        sync,
                        logical_seq: header.logical_seq,
                        send_id: header.message_id,
                        tainted,
                    });
                if let Some(wire_id) = matched {
                    let index = if wire_id == DIRECT_RECEIVE_TOKEN {
                        if self.deliver_direct(envelope, payload, tainted, sync) {
                            return true;
                        }
                        let Some(index) = self.promote_direct_receive() else {
                            return true;
                        };
                        index
                    } else {
                        let Some((index, _)) = self.requests.by_wire_id(wire_id) else {
                            return true;
                        };
                        index
                    };
                    self.accept_match(index, envelope, payload.len(), tainted, payload);
                    self.return_credit(peer, payload.len());
                    if let Some(answer) = sync {
                        self.send_sync_ack(answer);
                    }
                    self.complete_receive(index, envelope);
                    self.report_matches();
                }
            }
            FrameKind::RequestToSend => {
                let envelope = Envelope {
                    source: peer,
                    context: header.context,
                    tag: header.tag,
                };
                let length = header.aux as usize;
                let send_id = header.message_id;
                let tainted = header.flags & FLAG_FAILURE_TAINTED != 0;
                let matched =
                    self.matcher
                        .handle_arrival_with(envelope, || Unexpected::Rendezvous {
                            send_id,
                            logical_seq: header.logical_seq,
                            length,
                            tainted,
                        });
                if let Some(wire_id) = matched {
                    let found = if wire_id == DIRECT_RECEIVE_TOKEN {
                        self.promote_direct_receive()
                    } else {
                        self.requests.by_wire_id(wire_id).map(|(index, _)| index)
                    };
                    let Some(index) = found else {
                        return true;
                    };
                    self.accept_match(index, envelope, length, tainted, &[]);
                    self.clear_to_send(index, envelope, (send_id, header.logical_seq), length);
                    self.report_matches();
                }
            }
            FrameKind::ClearToSend => {
                let Some((index, request)) = self.requests.by_wire_id(header.message_id) else {
                    return true;
                };
                if request.complete {
                    // Ended already (its communicator was revoked).
                    return true;
                }
                if let Operation::Send(send) = &mut request.operation {
                    if (F::REPLICATES || F::LOGS_MESSAGES)
                        && header.tag == CLEAR_TO_SEND_ALREADY_DELIVERED
                    {
                        // Replication: a re-sent message the receiver has.
                        send.stage = SendStage::Done;
                        self.complete_send(index);
                        return true;
                    }
                    if send.length == 0 {
                        send.stage = SendStage::Done;
                        self.complete_send(index);
                    } else {
                        send.stage = SendStage::Streaming {
                            receiver_id: header.aux,
                            offset: 0,
                        };
                        self.streams[peer as usize].push_back(index);
                        self.streaming_sends += 1;
                    }
                }
            }
            FrameKind::Data => unreachable!("handled above"),
            FrameKind::SyncAck => {
                let Some((index, request)) = self.requests.by_wire_id(header.message_id) else {
                    return true;
                };
                if request.complete {
                    return true;
                }
                if let Operation::Send(send) = &mut request.operation {
                    send.stage = SendStage::Done;
                    self.complete_send(index);
                }
            }
            FrameKind::Control => match header.message_id {
                CONTROL_CREDIT => self.eager_credit[peer as usize] += header.aux as usize,
                CONTROL_CANCEL_SEND => self.withdraw_cancelled_send(peer, header.aux),
                CONTROL_CANCEL_ANSWER => self.finish_send_cancel(header.aux, header.tag == 1),
                CONTROL_PROTOCOL => self.interceptor.on_protocol_frame(peer, payload),
                CONTROL_ULFM => self.handle_ulfm_frame(peer, payload),
                CONTROL_RMA => self.handle_rma_frame(peer, payload),
                CONTROL_RMA_PUT_DATA | CONTROL_RMA_REPLY_DATA => {
                    self.handle_rma_data_frame(peer, &header, payload)
                }
                _ => {}
            },
            FrameKind::Ack => {}
        }
        true
    }

    /// A rendezvous fragment: copy it into its receive at its offset; with
    /// `check`, checksum the payload in the same pass and commit nothing
    /// unless `check` accepts it. Returns whether the fragment was taken.
    fn receive_data(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        payload: &[u8],
        check: Check,
    ) -> bool {
        let target = self
            .requests
            .by_wire_id(header.message_id)
            .filter(|(_, request)| {
                // A receive that ended early (revoked) takes no more data.
                !request.complete && matches!(request.operation, Operation::Receive(_))
            });
        let Some((index, request)) = target else {
            // No receive waits for it (a bug upstream): nothing to copy into.
            return check.is_none_or(|check| check(crc32c(payload)));
        };
        let Operation::Receive(receive) = &mut request.operation else {
            unreachable!("filtered above");
        };
        let offset = header.aux as usize;
        // SAFETY (both arms): the receive's owner guarantees `capacity`
        // writable packed bytes until the request completes.
        match check {
            None => unsafe { receive.bytes.write(receive.capacity, offset, payload) },
            Some(check) => {
                let payload_crc = unsafe {
                    receive
                        .bytes
                        .write_checksummed(receive.capacity, offset, payload)
                };
                if !check(payload_crc) {
                    // What the copy wrote belongs to this fragment's range of
                    // an incomplete receive: the retransmission rewrites it.
                    return false;
                }
            }
        }
        self.count_received(index, peer, payload.len());
        true
    }

    /// `length` more bytes of receive `index` (from `peer`) are in its
    /// buffer, checked: complete it when that was the last of them.
    fn count_received(&mut self, index: u32, peer: u32, length: usize) {
        let Some(Request {
            operation: Operation::Receive(receive),
            status,
            ..
        }) = self.requests.get_mut(index)
        else {
            return;
        };
        receive.received += length;
        if receive.received >= receive.total {
            let envelope = Envelope {
                source: peer,
                context: receive.pattern.context,
                tag: status.tag,
            };
            if F::REPLICATES || F::LOGS_MESSAGES {
                self.rendezvous_landed(index);
            }
            self.complete_receive(index, envelope);
        }
    }

    /// Where the payload of the data frame `header` from `peer` may be read
    /// to directly: its receive's buffer at the fragment's offset, when
    /// that receive is matched to `peer`, incomplete, contiguous, and has
    /// room for the whole fragment; `None` sends the frame the usual way
    /// (`handle_frame_checked`), which also reports whatever is wrong
    /// with it.
    fn placement_for(&mut self, peer: u32, header: &FrameHeader) -> Option<*mut u8> {
        if self.is_failed(peer)
            || self.interceptor.engine_index(header.source) != peer
            || header.extension_len != 0
            || header.incarnation != self.peer_incarnation[peer as usize]
        {
            return None;
        }
        match header.kind {
            FrameKind::Data => self.receive_placement(peer, header),
            FrameKind::Control => self.rma_placement(peer, header),
            _ => None,
        }
    }

    /// `placement_for` a rendezvous fragment.
    fn receive_placement(&mut self, peer: u32, header: &FrameHeader) -> Option<*mut u8> {
        let (_, request) = self.requests.by_wire_id(header.message_id)?;
        let Operation::Receive(receive) = &request.operation else {
            return None;
        };
        let offset = header.aux as usize;
        let end = offset.checked_add(header.payload_len as usize)?;
        let fits = !request.complete
            && receive.matched
            && receive.sender == Some(peer)
            && end <= receive.capacity
            && end <= receive.total
            && receive.received + (header.payload_len as usize) <= receive.total;
        fits.then(|| receive.bytes.contiguous_at(offset)).flatten()
    }

    /// A placed data frame passed its checks: count its bytes received
    /// (its payload is already in the buffer `placement_for` named).
    fn commit_placed(&mut self, peer: u32, header: &FrameHeader) {
        if self.is_failed(peer) {
            return;
        }
        if header.kind == FrameKind::Control {
            self.commit_placed_rma(peer, header);
            return;
        }
        if let Some((index, request)) = self.requests.by_wire_id(header.message_id) {
            if !request.complete {
                self.count_received(index, peer, header.payload_len as usize);
            }
        }
    }
}

/// What a TCP rail hands its frames to: the reliability links, then the
/// engine; and, for a data frame whose payload is still on the wire, where
/// in a receive buffer that payload may be read to directly.
struct RailReceiver<'a, F: Interceptor> {
    rail: u32,
    links: &'a mut ReliableLinks,
    state: &'a mut State<F>,
}

// SAFETY: a placement is the contiguous buffer of a matched, incomplete
// receive at the fragment's offset with room for the whole payload
// (`placement_for`); the application keeps it writable until the receive
// completes, and nothing completes it between this answer and the path's
// next call into the receiver.
unsafe impl<F: Interceptor> resmpi_path::Receiver for RailReceiver<'_, F> {
    fn frame(&mut self, peer: u32, frame: &[u8]) {
        let state = &mut *self.state;
        let delivered = self
            .links
            .receive(peer, self.rail, frame, |peer, frame, check| {
                state.handle_frame_checked(peer, frame, check)
            });
        if let Err(error) = delivered {
            state.fail_later(error);
        }
    }

    fn place(
        &mut self,
        peer: u32,
        header: &[u8; HEADER_LEN_BYTES],
        resumed: bool,
    ) -> Option<Placement> {
        let state = &mut *self.state;
        self.links
            .place(peer, self.rail, header, resumed, |header| {
                state.placement_for(peer, header)
            })
    }

    fn placed(&mut self, peer: u32, header: &[u8; HEADER_LEN_BYTES], placed: Placed) {
        match self.links.placed(peer, self.rail, header, placed) {
            Ok(true) => {
                if let Ok(header) = FrameHeader::parse(header) {
                    self.state.commit_placed(peer, &header);
                }
                let state = &mut *self.state;
                self.links.deliver_ready(peer, |peer, frame, check| {
                    state.handle_frame_checked(peer, frame, check)
                });
            }
            Ok(false) => {}
            Err(error) => self.state.fail_later(error),
        }
    }
}

/// Remove `wire_id` from the deferred wildcard receives; whether it was there.
fn take_deferred(deferred: &mut Vec<DeferredReceive>, wire_id: u64) -> bool {
    match deferred
        .iter()
        .position(|waiting| waiting.wire_id == wire_id)
    {
        Some(position) => {
            deferred.remove(position);
            true
        }
        None => false,
    }
}

/// A receive not yet handed to the matcher (`State::deferred_receives`).
#[derive(Clone, Copy, Debug)]
struct DeferredReceive {
    wire_id: u64,
    /// The pattern it is posted with (a released wildcard's pinned source
    /// filled in).
    pattern: ReceivePattern,
    /// Whether it may be posted once every receive before it is:
    /// false while the protocol holds a wildcard back.
    ready: bool,
}

/// Whether some message could match both patterns (a receive posted with
/// `b` before one with `a` could take the other's message).
fn may_share_a_message(a: &ReceivePattern, b: &ReceivePattern) -> bool {
    fn overlap<T: PartialEq>(a: Option<T>, b: Option<T>) -> bool {
        a.is_none() || b.is_none() || a == b
    }
    a.context == b.context && overlap(a.source, b.source) && overlap(a.tag, b.tag)
}

/// Replication: the unexpected message numbered `logical_seq` from `peer`
/// (one at most: a logical number names one message, whichever copy of
/// it arrived).
fn unexpected_message(
    matcher: &mut Matcher<Unexpected>,
    peer: u32,
    logical_seq: u64,
) -> Option<&mut Unexpected> {
    matcher
        .unexpected_mut()
        .find(|(envelope, message)| envelope.source == peer && message.logical_seq() == logical_seq)
        .map(|(_, message)| message)
}

/// Whether a frame comes from the sending side of a message (eager,
/// request-to-send, data, a cancel), so that under replication a
/// substitute's frame stands for its dead sibling; answers (clear-to-send,
/// sync ack, credit, protocol frames) are taken from the process that sent
/// them.
#[inline]
fn is_sender_frame(header: &FrameHeader) -> bool {
    match header.kind {
        FrameKind::Eager | FrameKind::RequestToSend | FrameKind::Data => true,
        FrameKind::Control => header.message_id == CONTROL_CANCEL_SEND,
        _ => false,
    }
}

/// A send request to world rank `peer` with (context, tag), not yet
/// launched; `tainted` as in [`SendState::tainted`].
fn send_request(
    comm: usize,
    peer: u32,
    (context, tag): (u32, i32),
    bytes: UserBytes,
    length: usize,
    owned: Option<Vec<u8>>,
    tainted: bool,
) -> Request {
    Request {
        operation: Operation::Send(SendState {
            peer,
            bytes,
            length,
            context,
            tag,
            stage: SendStage::Done,
            owned,
            loan: None,
            cancel_requested: false,
            tainted,
            copies_pending: 0,
            copy_of: None,
            logical_seq: 0,
            gated: false,
            resend: false,
        }),
        comm,
        complete: false,
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
    }
}

/// Whether world rank `peer` belongs to `comm` (either group of an
/// inter-communicator).
fn comm_holds(comm: &Communicator, peer: u32) -> bool {
    comm.members().any(|&member| member == peer)
}

/// A frame waiting in an outbox for room on its link or path.
enum Queued {
    /// `HEADER_LEN_BYTES` of header, then the payload, owned.
    Built(Vec<u8>),
    /// A header and a view of memory lent until the frame is acknowledged
    /// (an RMA data frame: an origin's put buffer, a target's window).
    Lent {
        header: [u8; HEADER_LEN_BYTES],
        payload: LentBytes,
    },
}

/// `offer_to` for a lent payload: the link keeps the view (another clone
/// of its loan) until the frame is acknowledged; without a link the path
/// takes the bytes now.
fn offer_lent_to(
    links: &mut ReliableLinks,
    transports: &mut Transports,
    peer: u32,
    header: &[u8; HEADER_LEN_BYTES],
    payload: &LentBytes,
) -> MpiResult<bool> {
    if !links.covers(peer) {
        return transports.try_send_direct(peer, header, payload.bytes());
    }
    // SAFETY: the view's own promise (`LentBytes::new`) covers the clone.
    let accepted = unsafe {
        links.offer_lent(
            peer,
            header,
            payload.bytes().as_ptr(),
            payload.bytes().len(),
            payload.loan(),
        )
    };
    if accepted {
        links.transmit_to(peer, transports)?;
    }
    Ok(accepted)
}

/// Hand one frame to the channel toward `peer`: its reliability link if it
/// has one, else its path. False = no room now.
#[inline]
fn offer_to(
    links: &mut ReliableLinks,
    transports: &mut Transports,
    peer: u32,
    header: &[u8; HEADER_LEN_BYTES],
    payload: &[u8],
) -> MpiResult<bool> {
    if links.covers(peer) {
        if !links.offer(peer, header, payload) {
            return Ok(false);
        }
        links.transmit_to(peer, transports)?;
        return Ok(true);
    }
    transports.try_send_direct(peer, header, payload)
}

/// Hand one frame whose payload is packed bytes `[offset, offset + length)`
/// of non-contiguous `bytes` to the channel toward `peer`, gathering them
/// in one pass into the link's copy (checksummed as they go) or the path's
/// slot. False = no room now.
///
/// # Safety
/// `bytes` must hold the message, readable, for this call.
unsafe fn offer_gathered(
    links: &mut ReliableLinks,
    transports: &mut Transports,
    peer: u32,
    header: &[u8; HEADER_LEN_BYTES],
    bytes: &UserBytes,
    offset: usize,
    length: usize,
) -> MpiResult<bool> {
    if links.covers(peer) {
        // SAFETY: by the caller's promise.
        if !unsafe { links.offer_gathered(peer, header, bytes, offset, length) } {
            return Ok(false);
        }
        links.transmit_to(peer, transports)?;
        return Ok(true);
    }
    // SAFETY: by the caller's promise.
    transports.try_send_gathered(peer, header, length, |payload| unsafe {
        bytes.read(offset, payload)
    })
}

/// Header of an eager frame carrying `length` bytes to `destination`.
#[inline]
fn eager_header(rank: u32, destination: Destination, length: usize) -> FrameHeader {
    let mut header = FrameHeader::new(FrameKind::Eager, rank);
    header.context = destination.context;
    header.tag = destination.tag;
    header.aux = length as u64;
    header.payload_len = length as u32;
    header
}

/// View `length` bytes at `buffer` (empty for a null or zero-length buffer).
///
/// # Safety
/// `buffer` must point to `length` readable bytes that outlive the slice.
pub unsafe fn slice_from<'a>(buffer: *const u8, length: usize) -> &'a [u8] {
    if length == 0 || buffer.is_null() {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(buffer, length) }
}

/// A completion call's logged outcome is one it cannot report (a probe's,
/// or positions it does not have): the replay is not the same execution.
fn completion_replay_diverged(call: CompletionCall, logged: &ReplayedChoice) -> MpiError {
    MpiError::new(
        ErrorClass::Intern,
        format!(
            "{call:?}: message-logging replay diverged: the earlier incarnation's call at this \
             point had the outcome {logged:?}, which this call cannot report"
        ),
    )
}

/// A probe's logged outcome is one it cannot give.
fn probe_replay_diverged(
    pattern: &ReceivePattern,
    blocking: bool,
    logged: &ReplayedChoice,
) -> MpiError {
    MpiError::new(
        ErrorClass::Intern,
        format!(
            "probe (source {:?}, tag {:?}, blocking {blocking}): message-logging replay \
             diverged: the earlier incarnation's call at this point had the outcome {logged:?}, \
             which this probe cannot give",
            pattern.source, pattern.tag
        ),
    )
}
