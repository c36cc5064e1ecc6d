//! Fault-tolerance protocol interceptors.
//!
//! Replication (SDR-MPI) and message logging plug in here, between MPI
//! semantics and the matching engine, without patching either: the engine
//! asks one `Interceptor` at the points where a protocol may change what
//! happens (where a send goes, which source a wildcard receive takes) and
//! tells it what happened (a payload sent, a match, a probe's or a
//! Waitany's outcome, a completion, a failed peer, a protocol frame, a
//! timer due). Every method has a default that leaves the engine's
//! behaviour as it is, so a protocol overrides only the hooks it needs.
//!
//! Cost: the hooks on the message path are guarded by associated
//! constants (`ROUTES_SENDS`, `WANTS_PAYLOADS`, `PINS_WILDCARDS`,
//! `WANTS_NONDETERMINISM`, `SENDS_PROTOCOL_FRAMES`, `USES_TIMERS`). The
//! engine is generic over the interceptor, so for [`PassThrough`]
//! (`--ft none`), a zero-sized type whose constants are all false, every
//! guarded branch is removed at compile time: no call, no clock read, no
//! bookkeeping. The constants also make the trait unusable as `dyn`, which
//! is intended: a protocol is chosen once at `MPI_Init`, never per call.
//!
//! The protocol is sans-IO like the engine: it never sends by itself.
//! Frames it wants sent it queues and hands out from
//! [`Interceptor::poll_protocol_frame`]; time comes in as `now_ns`.
#![warn(missing_docs)]

pub mod agreement;
pub mod member_set;
pub mod ulfm;

pub use resmpi_matching::{Envelope, MatchEvent, ReceivePattern};

/// What the job does when a peer is lost for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerFailureAction {
    /// End the job with a message naming the peer (no process fault tolerance).
    AbortJob,
    /// The protocol has handled it (a replica substitutes, a rank restarts).
    Handled,
}

/// A send as the application started it, before any protocol decided
/// where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendEnvelope {
    /// Destination world rank the application named.
    pub destination: u32,
    /// Context id the message is matched in.
    pub context: u32,
    /// Message tag.
    pub tag: i32,
    /// Packed bytes of payload.
    pub length_bytes: usize,
}

/// The most world ranks one send may go to (the application's destination
/// and its replicas): a bound, so routing never allocates.
pub const SEND_TARGETS_MAX: usize = 8;

/// The world ranks one send goes to. Starts as the application's single
/// destination; [`Interceptor::route_send`] may replace it or add copies.
/// The send request completes when every copy has completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendTargets {
    ranks: [u32; SEND_TARGETS_MAX],
    count: usize,
}

impl SendTargets {
    /// One target: the send goes where the application said.
    #[inline]
    pub fn single(destination: u32) -> SendTargets {
        let mut ranks = [0; SEND_TARGETS_MAX];
        ranks[0] = destination;
        SendTargets { ranks, count: 1 }
    }

    /// Replace every target with `destination` (a redirect, e.g. to a
    /// substitute replica).
    #[inline]
    pub fn redirect(&mut self, destination: u32) {
        *self = SendTargets::single(destination);
    }

    /// No target at all (replication: every replica this process sends
    /// for is dead; the send only waits for acks).
    #[inline]
    pub fn clear(&mut self) {
        self.count = 0;
    }

    /// Add a copy to `destination`. False (nothing added) when the bound
    /// [`SEND_TARGETS_MAX`] is reached or `destination` is already a target.
    pub fn add(&mut self, destination: u32) -> bool {
        if self.count == SEND_TARGETS_MAX || self.as_slice().contains(&destination) {
            return false;
        }
        self.ranks[self.count] = destination;
        self.count += 1;
        true
    }

    /// The targets, the first being the primary copy.
    #[inline]
    pub fn as_slice(&self) -> &[u32] {
        &self.ranks[..self.count]
    }
}

/// A message leaving this process, as the logging hook sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentMessage {
    /// World rank it goes to (one target of a fanned-out send).
    pub destination: u32,
    /// Context id.
    pub context: u32,
    /// Tag.
    pub tag: i32,
    /// Its logical number on the (this process, destination) channel: what
    /// a restarted receiver asks to have replayed.
    pub logical_seq: u64,
}

/// The packed bytes of a message being sent. Valid only during the hook
/// call: a protocol that keeps the payload copies it.
pub enum Payload<'a> {
    /// Contiguous bytes, readable in place.
    Contiguous(&'a [u8]),
    /// Non-contiguous bytes: `gather` writes all `length_bytes` of them,
    /// packed, into the slice it is given (exactly that long).
    Gathered {
        /// Packed length.
        length_bytes: usize,
        /// Packs the message into its argument.
        gather: &'a dyn Fn(&mut [u8]),
    },
}

impl Payload<'_> {
    /// Packed length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Contiguous(bytes) => bytes.len(),
            Payload::Gathered { length_bytes, .. } => *length_bytes,
        }
    }

    /// Whether the message has no payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the packed bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Payload::Contiguous(bytes) => bytes.to_vec(),
            Payload::Gathered {
                length_bytes,
                gather,
            } => {
                let mut copy = vec![0u8; *length_bytes];
                gather(&mut copy);
                copy
            }
        }
    }
}

/// What the engine does with an arrived message frame (replication).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageArrival {
    /// New: deliver it.
    Deliver,
    /// Already delivered (a substitute's re-send): drop it (returning an
    /// eager message's credit).
    Duplicate,
    /// It skips numbers not delivered yet: a protocol or transport bug.
    OutOfOrder {
        /// The number expected next.
        expected: u64,
    },
}

/// What becomes of a receive posted with MPI_ANY_SOURCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WildcardDecision {
    /// Match any source, as posted.
    AnySource,
    /// Match only this world rank (replay of a logged determinant). The
    /// application still sees an ANY_SOURCE receive: its status names the
    /// sender, which is this rank.
    Pin(u32),
    /// Post nothing yet: the receive matches no message until the
    /// protocol releases it through [`Interceptor::poll_released_receive`]
    /// (e.g. once the event logger has answered). A receive posted after
    /// it that could match the same message waits behind it: the engine
    /// posts deferred receives in posting order.
    Defer,
}

/// An MPI_Probe / Iprobe / Mprobe / Improbe outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// What the probe looked for (source None = ANY_SOURCE).
    pub pattern: ReceivePattern,
    /// The message it found, or None (an Iprobe/Improbe that found nothing).
    pub found: Option<Envelope>,
    /// The found message's packed length (0 when nothing was found).
    pub length_bytes: usize,
    /// Mprobe/Improbe: the message was taken off the queue.
    pub removed: bool,
    /// Probe/Mprobe (the outcome is the first message found).
    pub blocking: bool,
}

/// Whether a probe's outcome depends on timing: every Iprobe/Improbe
/// (whether it finds anything does), and a Probe/Mprobe with
/// MPI_ANY_SOURCE (which source's message it finds first does). A
/// blocking probe of one source is not: it finds that source's next
/// matching message, in the order the source sent them.
#[inline]
pub fn probe_is_nondeterministic(pattern: &ReceivePattern, blocking: bool) -> bool {
    !blocking || pattern.source.is_none()
}

/// Which completion call made a choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionCall {
    /// MPI_Test (one request; `completed` is `[0]` or empty).
    Test,
    /// MPI_Testany.
    Testany,
    /// MPI_Waitany.
    Waitany,
    /// MPI_Testsome.
    Testsome,
    /// MPI_Waitsome.
    Waitsome,
    /// MPI_Testall: its outcome is its flag, reported as `[0]` (every
    /// request complete) or empty.
    Testall,
    /// MPI_Request_get_status (one request; `[0]` or empty, as MPI_Test).
    RequestGetStatus,
}

/// The outcome of a completion call whose result depends on timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletionChoice<'a> {
    /// The call.
    pub call: CompletionCall,
    /// How many requests the application offered.
    pub offered: usize,
    /// Positions (in the application's array) of the requests that
    /// completed, in the order reported; empty = none did.
    pub completed: &'a [usize],
}

/// What a replay dictates for a completion call
/// ([`Interceptor::replayed_completion_choice`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayedChoice {
    /// Nothing: the call chooses as usual.
    Free,
    /// The replay is not in yet: progress and ask again.
    NotYetKnown,
    /// Report exactly these positions (empty: nothing completed, or for
    /// a probe: nothing found), waiting for them to complete; the others
    /// stay pending.
    Logged(Vec<usize>),
    /// A probe found this message (in the probe's context): wait until it
    /// is there and report it, whatever else is there too.
    Probed {
        /// World rank of its source.
        source: u32,
        /// Its tag.
        tag: i32,
        /// Its packed length.
        length_bytes: usize,
    },
}

/// Hooks a fault-tolerance protocol can override. Every method has a
/// default that keeps the engine's behaviour, so a protocol states only
/// what it changes. Hooks behind a `false` constant are never called.
pub trait Interceptor {
    /// The engine asks [`Interceptor::route_send`] where each send goes.
    const ROUTES_SENDS: bool = false;
    /// The engine shows every sent payload to [`Interceptor::on_send_payload`].
    const WANTS_PAYLOADS: bool = false;
    /// The engine asks [`Interceptor::on_wildcard_receive`] about every
    /// ANY_SOURCE receive and polls [`Interceptor::poll_released_receive`].
    const PINS_WILDCARDS: bool = false;
    /// The engine reports probe and completion outcomes
    /// ([`Interceptor::on_probe`], [`Interceptor::on_completion_choice`]).
    const WANTS_NONDETERMINISM: bool = false;
    /// The engine drains [`Interceptor::poll_protocol_frame`] on progress.
    const SENDS_PROTOCOL_FRAMES: bool = false;
    /// The engine reads its clock on progress and drives
    /// [`Interceptor::poll_timeout`] / [`Interceptor::handle_timeout`].
    const USES_TIMERS: bool = false;
    /// Replication (SDR-MPI): the protocol numbers every message per rank
    /// channel ([`Interceptor::send_logical_seq`]), decides on every
    /// arrival ([`Interceptor::on_message_arrival`]), holds a send's
    /// completion until its acks are in ([`Interceptor::hold_send`],
    /// [`Interceptor::poll_released_send`]), asks for re-sends
    /// ([`Interceptor::poll_resend`]), says which process of another
    /// replica a frame stands for ([`Interceptor::logical_peer`]) and
    /// which processes are dead ([`Interceptor::replica_dead`]).
    const REPLICATES: bool = false;
    /// The engine hands [`Interceptor::on_received_hash`] the CRC32C of
    /// every message it receives (replication's divergence check).
    const HASHES_RECEIVED: bool = false;
    /// Message logging (restart and replay of a failed rank): a peer the
    /// protocol takes a death of as `Handled` is *restarting*: nothing is
    /// transmitted to it and nothing waiting for it fails; sends to it are
    /// numbered and logged and complete at once. When its new incarnation
    /// re-joins, both logical numbers of the channel are kept (it replays
    /// from `MPI_Init`): what it re-sends that was delivered already is a
    /// duplicate (dropped, its credit returned, a synchronous or rendezvous
    /// send answered), and every message this process numbered for it is
    /// sent again from [`Interceptor::replay_message`], in order. Sends wait
    /// (queued in order, never blocking inside the engine) while
    /// [`Interceptor::send_may_start`] is false: pessimistic logging.
    const LOGS_MESSAGES: bool = false;

    /// Short name, as given to `--ft`.
    fn name(&self) -> &'static str;

    /// Whether the engine must record match events (ANY_SOURCE decisions)
    /// for [`Interceptor::on_match`]. False keeps matching free of bookkeeping.
    fn wants_match_events(&self) -> bool {
        false
    }

    /// Where a send goes (only with `ROUTES_SENDS`): `targets` holds the
    /// application's destination; redirect it or add copies. A send with
    /// several targets always takes a request (MPI_Send's request-free
    /// eager path is skipped), and MPI_Cancel withdraws only its primary
    /// copy.
    #[inline]
    fn route_send(&mut self, _send: &SendEnvelope, _targets: &mut SendTargets) {}

    /// A message is sent (only with `WANTS_PAYLOADS`), once per target,
    /// when its send starts: eager or rendezvous, the bytes are those the
    /// receiver will get.
    #[inline]
    fn on_send_payload(&mut self, _message: &SentMessage, _payload: Payload<'_>) {}

    /// A receive with ANY_SOURCE is posted (only with `PINS_WILDCARDS`);
    /// `receive` identifies it in [`Interceptor::poll_released_receive`].
    #[inline]
    fn on_wildcard_receive(
        &mut self,
        _receive: u64,
        _pattern: &ReceivePattern,
    ) -> WildcardDecision {
        WildcardDecision::AnySource
    }

    /// A deferred receive the protocol now releases, with the source it
    /// must match (None: any). Polled on progress (only with `PINS_WILDCARDS`).
    #[inline]
    fn poll_released_receive(&mut self) -> Option<(u64, Option<u32>)> {
        None
    }

    /// Receive `receive` (a wire id) has its message and would complete
    /// now (only with `PINS_WILDCARDS`): true holds it, matched and filled
    /// but not complete, until [`Interceptor::poll_released_held_receive`]
    /// gives it back (replication's wildcard agreement: a leader's receive
    /// waits until its followers hold the match). Asked before or after
    /// [`Interceptor::on_match`] reports its match.
    #[inline]
    fn hold_receive(&mut self, _receive: u64) -> bool {
        false
    }

    /// A held receive to complete now (only with `PINS_WILDCARDS`).
    #[inline]
    fn poll_released_held_receive(&mut self) -> Option<u64> {
        None
    }

    /// A receive matched a message.
    #[inline]
    fn on_match(&mut self, _event: &MatchEvent) {}

    /// A probe returned (only with `WANTS_NONDETERMINISM`).
    #[inline]
    fn on_probe(&mut self, _outcome: &ProbeOutcome) {}

    /// What the next probe for `pattern` must report, when a replay
    /// dictates it (only with `WANTS_NONDETERMINISM`): asked by the engine
    /// before it looks at its queue; the answer is for the outcome the
    /// following [`Interceptor::on_probe`] reports. `Logged(empty)`:
    /// nothing found; `Probed`: that message; `Logged` with positions is
    /// not a probe's outcome (the replay diverged).
    #[inline]
    fn replayed_probe(&self, _pattern: &ReceivePattern, _blocking: bool) -> ReplayedChoice {
        ReplayedChoice::Free
    }

    /// Test/Testany/Waitany/Testsome/Waitsome/Testall/Request_get_status
    /// chose (only with `WANTS_NONDETERMINISM`).
    #[inline]
    fn on_completion_choice(&mut self, _choice: &CompletionChoice<'_>) {}

    /// What the next `call` over `offered` requests must report, when a
    /// replay dictates it (only with `WANTS_NONDETERMINISM`): asked by
    /// the C layer before it looks at the requests; the answer is for the
    /// choice the following [`Interceptor::on_completion_choice`] reports.
    #[inline]
    fn replayed_completion_choice(&self, _call: CompletionCall, _offered: usize) -> ReplayedChoice {
        ReplayedChoice::Free
    }

    /// A receive completed with `bytes` of payload from `envelope`.
    #[inline]
    fn on_receive_complete(&mut self, _envelope: &Envelope, _bytes: usize) {}

    /// A send to world rank `destination` completed locally (once per
    /// copy of a fanned-out send).
    #[inline]
    fn on_send_complete(&mut self, _destination: u32, _context: u32, _tag: i32, _bytes: usize) {}

    /// World rank `peer` can no longer be reached.
    fn on_peer_failure(&mut self, _peer: u32) -> PeerFailureAction {
        PeerFailureAction::AbortJob
    }

    /// A frame of this protocol arrived from world rank `peer`.
    #[inline]
    fn on_protocol_frame(&mut self, _peer: u32, _bytes: &[u8]) {}

    /// A frame this protocol wants sent: (world rank, bytes). Polled on
    /// progress (only with `SENDS_PROTOCOL_FRAMES`) until None.
    #[inline]
    fn poll_protocol_frame(&mut self) -> Option<(u32, Vec<u8>)> {
        None
    }

    /// The logical number [`Interceptor::route_send`] gave the send it
    /// just routed (only with `REPLICATES`); 0: the engine numbers it per
    /// channel as usual.
    #[inline]
    fn send_logical_seq(&self) -> u64 {
        0
    }

    /// A message frame (eager or request-to-send) numbered `logical_seq`
    /// arrived from process `peer` (only with `REPLICATES`, instead of the
    /// engine's own per-channel check). `data_follows`: a rendezvous, whose
    /// data is in only at [`Interceptor::on_message_landed`].
    #[inline]
    fn on_message_arrival(
        &mut self,
        _peer: u32,
        _logical_seq: u64,
        _data_follows: bool,
    ) -> MessageArrival {
        MessageArrival::Deliver
    }

    /// The data of rendezvous message `logical_seq` from process `peer`
    /// has all landed (only with `REPLICATES`).
    #[inline]
    fn on_message_landed(&mut self, _peer: u32, _logical_seq: u64) {}

    /// The CRC32C of message `logical_seq` from process `peer` as this
    /// process received it (only with `HASHES_RECEIVED`): an eager one
    /// just before [`Interceptor::on_message_arrival`], a rendezvous just
    /// before [`Interceptor::on_message_landed`] (none for a truncated
    /// one, whose bytes are not all kept).
    #[inline]
    fn on_received_hash(&mut self, _peer: u32, _logical_seq: u64, _hash: u32) {}

    /// An error the protocol found that must end the job (taken once):
    /// the engine reports it from the next MPI call.
    #[inline]
    fn take_fatal_error(&mut self) -> Option<String> {
        None
    }

    /// Why this process must leave the job now, quietly, as if it had
    /// crashed (its death is then masked like any other): replication's
    /// `--sdc vote` outvoted it. Taken once.
    fn take_departure(&mut self) -> Option<String> {
        None
    }

    /// The engine's number for the process the launcher (or a frame's
    /// source) calls `physical`: the same, except in a replica forked by a
    /// substitute, whose engine keeps its forker's numbering.
    #[inline]
    fn engine_index(&self, physical: u32) -> u32 {
        physical
    }

    /// Incarnation `incarnation` of process `peer`, a replica forked by a
    /// substitute, re-joined; `cut` is the fork's cut as its forker wrote
    /// it (replication's recovery; `resmpi_replication::ForkCut`).
    fn on_replica_rejoin(&mut self, _peer: u32, _incarnation: u32, _cut: &[u8]) {}

    /// Counters for the end-of-job report, named when non-zero.
    fn report_counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Lines for the end-of-job report (each names an event the counters
    /// only count).
    fn report_lines(&self) -> Vec<String> {
        Vec::new()
    }

    /// The send request with wire id `wire_id` to process `destination`,
    /// numbered `logical_seq`, has started (only with `REPLICATES`): from
    /// now on a take-over can re-send from it at once, in order with the
    /// sends after it, instead of waiting for it to be out.
    #[inline]
    fn send_started(&mut self, _wire_id: u64, _destination: u32, _logical_seq: u64) {}

    /// The send request with wire id `wire_id` to process `destination`,
    /// numbered `logical_seq`, is out (only with `REPLICATES`): true holds
    /// its completion until [`Interceptor::poll_released_send`] hands the
    /// wire id back.
    #[inline]
    fn hold_send(&mut self, _wire_id: u64, _destination: u32, _logical_seq: u64) -> bool {
        false
    }

    /// A held send that may complete now (wire id), polled on progress
    /// (only with `REPLICATES`).
    #[inline]
    fn poll_released_send(&mut self) -> Option<u64> {
        None
    }

    /// A held send to transmit again (only with `REPLICATES`): the wire id
    /// of its request, the process to send it to, its logical number.
    #[inline]
    fn poll_resend(&mut self) -> Option<(u64, u32, u64)> {
        None
    }

    /// A re-send [`Interceptor::poll_resend`] asked for is out: message
    /// `logical_seq` to process `destination` (only with `REPLICATES`).
    #[inline]
    fn on_resent(&mut self, _destination: u32, _logical_seq: u64) {}

    /// The process a message frame from process `peer` stands for (only
    /// with `REPLICATES`): a substitute's frames are matched as its dead
    /// sibling's, the process of the receiver's own replica.
    #[inline]
    fn logical_peer(&self, peer: u32) -> u32 {
        peer
    }

    /// Whether process `peer` is known dead while its rank lives on in
    /// other replicas (only with `REPLICATES`): nothing goes to it, nothing
    /// from it is taken.
    #[inline]
    fn replica_dead(&self, _peer: u32) -> bool {
        false
    }

    /// Whether process `peer` is dead by the evidence of a substitute's
    /// message, before its death notice is here (only with `REPLICATES`).
    /// Point-to-point traffic needs no such shortcut (the substitute's
    /// copies are numbered like the dead one's), but RMA does: a
    /// synchronisation that a substitute vouched for does not cover the
    /// dead replica's RMA operations on this process's window.
    #[inline]
    fn replica_shown_dead(&self, _peer: u32) -> bool {
        false
    }

    /// Whether a message re-sent by process `new` replaces the copy
    /// process `current` was sending (only with `REPLICATES`): `new` took
    /// over later in the chain of substitutes of the receiver's source.
    #[inline]
    fn supersedes(&self, _new: u32, _current: u32) -> bool {
        false
    }

    /// Whether a send may start now (only with `LOGS_MESSAGES`): false
    /// while a determinant the send may depend on is not yet stable.
    #[inline]
    fn send_may_start(&self) -> bool {
        true
    }

    /// A frame to send to world rank `destination` just before the
    /// application message (or request-to-send) about to go to it (only
    /// with `LOGS_MESSAGES`), in order on the same channel: optimistic
    /// logging piggybacks the sender's dependencies this way. `None`, the
    /// common case, sends nothing extra.
    #[inline]
    fn piggyback(&mut self, _destination: u32) -> Option<Vec<u8>> {
        None
    }

    /// A send is about to ask [`Interceptor::send_may_start`] (only with
    /// `LOGS_MESSAGES`): the moment to make stable what was logged lazily
    /// (e.g. a run of failed tests), since the send may depend on it.
    #[inline]
    fn before_send(&mut self) {}

    /// The logged message numbered `logical_seq` to world rank
    /// `destination`, as (context, tag, packed bytes), for its re-send to a
    /// restarted destination (only with `LOGS_MESSAGES`); Err says why it
    /// cannot be had (not logged, or lost with the log's disk).
    #[inline]
    fn replay_message(
        &self,
        _destination: u32,
        _logical_seq: u64,
    ) -> Result<(u32, i32, Vec<u8>), String> {
        Err("this protocol keeps no message log".to_string())
    }

    /// Incarnation `incarnation` of world rank `peer` has joined the job
    /// and this process reaches it again (only with `LOGS_MESSAGES`).
    #[inline]
    fn on_peer_rejoin(&mut self, _peer: u32, _incarnation: u32) {}

    /// Whether the re-send of the log to re-joined `peer` must wait (only
    /// with `LOGS_MESSAGES`): optimistic logging's possible orphan sends
    /// nothing until it knows it is none. The engine asks again on every
    /// progress round and re-sends once it is false, before any send
    /// that waited for the log.
    #[inline]
    fn holds_replay_to(&self, _peer: u32) -> bool {
        false
    }

    /// The process's standard output can be held (only with
    /// `LOGS_MESSAGES`): the protocol calls `gate(true)` while what the
    /// process writes may rest on something a failure could undo, and
    /// `gate(false)` once it may pass (optimistic logging's output
    /// commit).
    #[inline]
    fn set_output_gate(&mut self, _gate: fn(bool)) {}

    /// The first logical number to world rank `destination` this process
    /// still holds in its log (only with `LOGS_MESSAGES`): what a re-join
    /// re-sends from. Above 1 once the destination's checkpoint covered
    /// the rest, or when this process resumed from its own checkpoint.
    #[inline]
    fn replay_first(&self, _destination: u32) -> u64 {
        1
    }

    /// The protocol's part of a checkpoint's position (only with
    /// `LOGS_MESSAGES`): the ordinals of the next wildcard receive and of
    /// the next counted completion call or probe, and the length of its
    /// determinant list (what a restart from the checkpoint never needs).
    #[inline]
    fn checkpoint_ordinals(&self) -> [u64; 3] {
        [0, 0, 0]
    }

    /// The sender log as a checkpoint carries it (only with
    /// `LOGS_MESSAGES`): what the peers' checkpoints do not cover yet, so
    /// that a replacement can send again what its peers had not taken and
    /// replay to a peer restarted later. Err: it cannot be carried (the
    /// log is incomplete).
    #[inline]
    fn checkpoint_log(&self) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }

    /// A checkpoint's position was refused by [`Interceptor::checkpoint_log`]
    /// for now (only with `LOGS_MESSAGES`): true if the protocol asked for
    /// what it lacks, so that the caller may make progress a little and
    /// ask again (optimistic logging: the event logger's stable vector,
    /// which a rank otherwise learns only from acks it does not wait for).
    #[inline]
    fn checkpoint_may_wait(&mut self) -> bool {
        false
    }

    /// This process (a restarted incarnation) resumes from a checkpoint's
    /// position (only with `LOGS_MESSAGES`): the next ordinals are
    /// `ordinals`, and its sender log is `log` ([`Interceptor::checkpoint_log`]).
    #[inline]
    fn resume_at(&mut self, _ordinals: [u64; 3], _log: &[u8]) -> Result<(), String> {
        Ok(())
    }

    /// A checkpoint of this process is durable and restartable from its
    /// position (only with `LOGS_MESSAGES`): it covers, per peer, the
    /// messages numbered at or below `delivered[peer]`, which the peers
    /// may now drop from their logs, and the determinants its `ordinals`
    /// ([`Interceptor::checkpoint_ordinals`]) say were made before it.
    #[inline]
    fn on_checkpoint(&mut self, _delivered: &[u64], _ordinals: [u64; 3]) {}

    /// This process has passed `MPI_Finalize`'s barrier (only with
    /// `LOGS_MESSAGES`): it will leave once [`Interceptor::may_leave`] says so.
    #[inline]
    fn on_finalize(&mut self) {}

    /// Whether this process may leave the job now (only with
    /// `LOGS_MESSAGES`): message logging keeps a process, and its sender
    /// log, until no peer can need a replay from it.
    #[inline]
    fn may_leave(&self) -> bool {
        true
    }

    /// When the protocol's next timer is due (clock nanoseconds), if any.
    #[inline]
    fn poll_timeout(&self) -> Option<u64> {
        None
    }

    /// A timer is due: `now_ns` has reached [`Interceptor::poll_timeout`].
    #[inline]
    fn handle_timeout(&mut self, _now_ns: u64) {}
}

/// The `none` protocol: every hook is the default.
#[derive(Clone, Copy, Debug, Default)]
pub struct PassThrough;

impl Interceptor for PassThrough {
    fn name(&self) -> &'static str {
        "none"
    }
}

/// The fault-tolerance protocols a job can run, by `--ft` name. Only
/// `none` exists today; each protocol adds a variant, and `MPI_Init`
/// builds the engine for it (see docs/design.md, "Interceptors").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No process fault tolerance ([`PassThrough`]).
    None,
}

impl Mode {
    /// The mode named `name` (as given to `--ft` / `RESMPI_FT`).
    pub fn from_name(name: &str) -> Result<Mode, String> {
        match name {
            "" | "none" => Ok(Mode::None),
            other => Err(format!(
                "unknown fault-tolerance protocol '{other}' (known: none)"
            )),
        }
    }
}

/// An interceptor that counts every event; tests use it to check that the
/// engine reports what it should.
#[derive(Clone, Debug, Default)]
pub struct EventCounter {
    /// Matches seen.
    pub matches: u64,
    /// Receives completed.
    pub receives_completed: u64,
    /// Sends completed.
    pub sends_completed: u64,
    /// Peers reported failed.
    pub peer_failures: u64,
    /// Probe outcomes seen.
    pub probes: u64,
    /// Completion choices seen.
    pub completion_choices: u64,
}

impl Interceptor for EventCounter {
    const WANTS_NONDETERMINISM: bool = true;

    fn name(&self) -> &'static str {
        "event-counter"
    }
    fn wants_match_events(&self) -> bool {
        true
    }
    fn on_match(&mut self, _event: &MatchEvent) {
        self.matches += 1;
    }
    fn on_probe(&mut self, _outcome: &ProbeOutcome) {
        self.probes += 1;
    }
    fn on_completion_choice(&mut self, _choice: &CompletionChoice<'_>) {
        self.completion_choices += 1;
    }
    fn on_receive_complete(&mut self, _envelope: &Envelope, _bytes: usize) {
        self.receives_completed += 1;
    }
    fn on_send_complete(&mut self, _destination: u32, _context: u32, _tag: i32, _bytes: usize) {
        self.sends_completed += 1;
    }
    fn on_peer_failure(&mut self, _peer: u32) -> PeerFailureAction {
        self.peer_failures += 1;
        PeerFailureAction::AbortJob
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_through_aborts_on_peer_failure_and_wants_no_events() {
        let mut protocol = PassThrough;
        assert!(!protocol.wants_match_events());
        assert_eq!(protocol.on_peer_failure(3), PeerFailureAction::AbortJob);
        assert_eq!(std::mem::size_of::<PassThrough>(), 0);
        const GUARDS: [bool; 8] = [
            PassThrough::REPLICATES,
            PassThrough::LOGS_MESSAGES,
            PassThrough::ROUTES_SENDS,
            PassThrough::WANTS_PAYLOADS,
            PassThrough::PINS_WILDCARDS,
            PassThrough::WANTS_NONDETERMINISM,
            PassThrough::SENDS_PROTOCOL_FRAMES,
            PassThrough::USES_TIMERS,
        ];
        assert_eq!(GUARDS, [false; 8]);
    }

    #[test]
    fn send_targets_are_bounded_and_never_repeat_a_rank() {
        let mut targets = SendTargets::single(4);
        assert!(!targets.add(4));
        for rank in 5..(4 + SEND_TARGETS_MAX as u32) {
            assert!(targets.add(rank));
        }
        assert_eq!(targets.as_slice().len(), SEND_TARGETS_MAX);
        assert!(!targets.add(100));
        targets.redirect(2);
        assert_eq!(targets.as_slice(), &[2]);
    }

    #[test]
    fn gathered_payload_copies_every_packed_byte() {
        let gather = |out: &mut [u8]| {
            for (index, byte) in out.iter_mut().enumerate() {
                *byte = index as u8 * 3;
            }
        };
        let payload = Payload::Gathered {
            length_bytes: 5,
            gather: &gather,
        };
        assert_eq!(payload.to_vec(), vec![0, 3, 6, 9, 12]);
        assert_eq!(Payload::Contiguous(&[1, 2]).to_vec(), vec![1, 2]);
    }

    #[test]
    fn mode_names_other_than_none_are_refused_with_the_known_list() {
        assert_eq!(Mode::from_name("none"), Ok(Mode::None));
        let refused = Mode::from_name("replication").unwrap_err();
        assert!(refused.contains("replication") && refused.contains("known: none"));
    }
}
