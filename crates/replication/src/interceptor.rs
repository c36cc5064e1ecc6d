//! The engine's interceptor for replication: drives one [`Replica`] from
//! the engine's hooks (`resmpi_ft::Interceptor` with `REPLICATES`).
//!
//! Why a separate layer: [`Replica`] speaks ranks, replicas and logical
//! numbers; the engine speaks processes (its "world ranks"), wire ids of
//! requests and frames. This type translates, and keeps what only the
//! engine pairing needs: which request a pending send is, sends the
//! protocol completed before the engine asked to hold them, re-sends the
//! engine has yet to make, acks to send. Process `p` of a job of N ranks
//! runs replica `p / N` of rank `p % N` (`resmpi_core::Replicas`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use resmpi_ft::{
    Interceptor, MatchEvent, MessageArrival, Payload, PeerFailureAction, ReceivePattern,
    SendEnvelope, SendTargets, SentMessage, WildcardDecision,
};

use crate::anysource::{AgreementAction, WildcardAgreement, WildcardPost};
use crate::divergence::{DivergenceCheck, SdcPolicy};
use crate::{Action, Arrival, ForkCut, Process, Replica, SendId};

/// Protocol frame: an ack (`ACK_FRAME`, then the logical number, u64 LE).
const ACK_FRAME: u8 = 1;
/// Protocol frame: an ack with the CRC32C of the payload received
/// (`ACK_WITH_HASH_FRAME`, the logical number, u64 LE, the hash, u32 LE).
const ACK_WITH_HASH_FRAME: u8 = 2;

/// Protocol frame (`--replica-anysource agree`): wildcard decisions from
/// the leader of this rank (`DECISIONS_FRAME`, then per decision the
/// ordinal, u64 LE, and the source rank, u32 LE).
const DECISIONS_FRAME: u8 = 3;
/// Protocol frame: a follower's decisions for a new leader, laid out as
/// `DECISIONS_FRAME`.
const SYNC_FRAME: u8 = 4;
/// Protocol frame (`--sdc vote`): the sender's replica that a majority
/// outvoted on message `logical_seq` (u64 LE) tells the replica it sent
/// that message to, which took the bytes in and must leave too.
const TAINTED_FRAME: u8 = 7;
/// Protocol frame (replica recovery): a welcome of a re-joined replica
/// (`WELCOME_FRAME`, then its rank, replica and incarnation, u32 LE each,
/// and how far the sender has delivered from its rank, u64 LE).
const WELCOME_FRAME: u8 = 8;
/// Bytes of a welcome frame.
const WELCOME_BYTES: usize = 21;
/// Bytes of one decision in a frame.
const DECISION_BYTES: usize = 12;
/// Protocol frame: a follower acks decisions to the leader
/// (`ACKS_FRAME`, then per decision its ordinal, u64 LE).
const ACKS_FRAME: u8 = 5;
/// Protocol frame: the leader says decisions are stable, held by every
/// live replica (laid out as `ACKS_FRAME`).
const STABLE_FRAME: u8 = 6;

/// A frame of `kind` carrying `ordinals`.
fn ordinals_frame(kind: u8, ordinals: &[u64]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1 + ordinals.len() * 8);
    bytes.push(kind);
    for ordinal in ordinals {
        bytes.extend_from_slice(&ordinal.to_le_bytes());
    }
    bytes
}

/// The ordinals of an `ACKS_FRAME` or `STABLE_FRAME` (after its kind
/// byte); None if malformed.
fn parse_ordinals(body: &[u8]) -> Option<Vec<u64>> {
    if !body.len().is_multiple_of(8) {
        return None;
    }
    Some(
        body.chunks_exact(8)
            .map(|chunk| u64::from_le_bytes(chunk.try_into().expect("8 bytes")))
            .collect(),
    )
}

/// A frame of `kind` carrying `decisions`.
fn decisions_frame(kind: u8, decisions: &[(u64, u32)]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1 + decisions.len() * DECISION_BYTES);
    bytes.push(kind);
    for &(ordinal, source) in decisions {
        bytes.extend_from_slice(&ordinal.to_le_bytes());
        bytes.extend_from_slice(&source.to_le_bytes());
    }
    bytes
}

/// The decisions of a `DECISIONS_FRAME` or `SYNC_FRAME` (after its kind
/// byte); None if malformed.
fn parse_decisions(body: &[u8]) -> Option<Vec<(u64, u32)>> {
    if !body.len().is_multiple_of(DECISION_BYTES) {
        return None;
    }
    Some(
        body.chunks_exact(DECISION_BYTES)
            .map(|chunk| {
                let ordinal = u64::from_le_bytes(chunk[..8].try_into().expect("8 bytes"));
                let source = u32::from_le_bytes(chunk[8..].try_into().expect("4 bytes"));
                (ordinal, source)
            })
            .collect(),
    )
}

/// An ack of message `logical_seq`, with the hash of its payload if known.
fn ack_frame(logical_seq: u64, hash: Option<u32>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(13);
    bytes.push(if hash.is_some() {
        ACK_WITH_HASH_FRAME
    } else {
        ACK_FRAME
    });
    bytes.extend_from_slice(&logical_seq.to_le_bytes());
    if let Some(hash) = hash {
        bytes.extend_from_slice(&hash.to_le_bytes());
    }
    bytes
}

/// CRC32C of a payload being sent.
fn payload_hash(payload: &Payload<'_>) -> u32 {
    match payload {
        Payload::Contiguous(bytes) => resmpi_checksum::crc32c(bytes),
        Payload::Gathered { .. } => resmpi_checksum::crc32c(&payload.to_vec()),
    }
}

/// The replication protocol as an engine interceptor.
#[derive(Clone, Debug)]
pub struct Replication {
    replica: Replica,
    ranks: u32,
    replicas: u32,
    /// Logical number of the send `route_send` routed last.
    last_seq: u64,
    /// Sends the engine holds, by send: the request's wire id.
    held: BTreeMap<SendId, u64>,
    /// Sends started and not yet out (so not held), by send: the
    /// request's wire id, so that a take-over re-sends them at once.
    started: BTreeMap<SendId, u64>,
    /// Sends the protocol completed before the engine asked to hold them.
    completed: BTreeSet<SendId>,
    /// Held sends that may complete now (wire ids).
    released: VecDeque<u64>,
    /// Transmissions of held sends to make again (a substitute's take-over).
    resends: VecDeque<(SendId, Process)>,
    /// Protocol frames to send: (process, bytes).
    frames: VecDeque<(u32, Vec<u8>)>,
    /// Acks of rendezvous messages whose data has not landed yet, by
    /// (sender rank, logical number): the processes to ack.
    deferred_acks: BTreeMap<(u32, u64), Vec<u32>>,
    /// The hash of the message received last: (sender rank, logical
    /// number, CRC32C), for the acks of its arrival or landing.
    received_hash: Option<(u32, u64, u32)>,
    /// Sent and acked payload hashes compared (`--sdc`).
    divergence: DivergenceCheck,
    /// What a divergence does.
    sdc_policy: SdcPolicy,
    /// A divergence under `SdcPolicy::Abort`, for the engine to report.
    fatal_error: Option<String>,
    /// Outvoted under `SdcPolicy::Vote`: why this process leaves the job
    /// (taken by the engine once).
    departure: Option<String>,
    /// Ranks whose every replica is dead.
    pub lost_ranks: Vec<u32>,
    /// Processes shown dead by a message from their substitute that came
    /// before their death notice (`Interceptor::replica_shown_dead`).
    shown_dead: BTreeSet<Process>,
    /// Messages dropped as duplicates (a substitute's re-sends).
    pub duplicates_dropped: u64,
    /// Sends re-transmitted after a take-over.
    pub resends_made: u64,
    /// `--replica-anysource agree`: the agreement on wildcard sources
    /// (None: `free`, each replica matches on its own).
    agreement: Option<WildcardAgreement>,
    /// Deferred wildcard receives to post: (wire id, source process).
    released_receives: VecDeque<(u64, Option<u32>)>,
    /// Held wildcard receives to complete (wire ids).
    released_held: VecDeque<u64>,
    /// Wildcard receives posted pinned to the leader's decision.
    pub wildcards_pinned: u64,
    /// `--replica-recovery now`: a substitute forks a new replica for a
    /// dead sibling.
    recovery: bool,
    /// Replicas of this rank this process is to fork, once it may.
    forks_due: Vec<u32>,
    /// In a forked process: per replica index of its engine's process
    /// numbers, the replica index on the wire (the engine goes on with its
    /// forker's numbering, see [`Replication::fork`]); and the inverse.
    relabel: Option<(Vec<u32>, Vec<u32>)>,
    /// New replicas this process forked.
    pub replicas_forked: u64,
}

impl Replication {
    /// The interceptor of process `process` in a job of `ranks` ranks with
    /// `replicas` replicas each.
    pub fn new(process: u32, ranks: u32, replicas: u32) -> Replication {
        let me = Process {
            rank: process % ranks,
            replica: process / ranks,
        };
        Replication {
            replica: Replica::new(me, ranks, replicas),
            ranks,
            replicas,
            last_seq: 0,
            held: BTreeMap::new(),
            started: BTreeMap::new(),
            completed: BTreeSet::new(),
            released: VecDeque::new(),
            resends: VecDeque::new(),
            frames: VecDeque::new(),
            deferred_acks: BTreeMap::new(),
            received_hash: None,
            divergence: DivergenceCheck::default(),
            sdc_policy: SdcPolicy::Report,
            fatal_error: None,
            departure: None,
            lost_ranks: Vec::new(),
            shown_dead: BTreeSet::new(),
            duplicates_dropped: 0,
            resends_made: 0,
            agreement: None,
            released_receives: VecDeque::new(),
            released_held: VecDeque::new(),
            wildcards_pinned: 0,
            recovery: false,
            forks_due: Vec::new(),
            relabel: None,
            replicas_forked: 0,
        }
    }

    /// The same, recovering lost replicas (`--replica-recovery now`): every
    /// process acks every replica of a sender (the protocol's recovery
    /// mode), and a substitute forks a new replica for a dead sibling.
    pub fn with_recovery(mut self) -> Replication {
        self.replica = self.replica.with_recovery();
        self.recovery = true;
        self
    }

    /// The replica of this rank to fork now, if one is due and the
    /// protocol allows it, and nothing of this process's own is on its way
    /// (no send between start and transmission, no re-send queued, no ack
    /// waiting for data): the fork copies the engine as it is, and such
    /// work belongs to this process, not to the copy.
    pub fn fork_ready(&mut self) -> Option<u32> {
        if self.forks_due.is_empty() {
            return None;
        }
        let protocol = &self.replica;
        self.forks_due.retain(|&replica| protocol.may_fork(replica));
        let replica = *self.forks_due.first()?;
        let quiet = self.started.is_empty()
            && self.resends.is_empty()
            && self.deferred_acks.is_empty()
            && self.frames.is_empty();
        (quiet && self.replica.can_fork(replica)).then_some(replica)
    }

    /// Fork replica `replica` of this rank ([`Replica::fork`]): returns the
    /// new replica's interceptor and the cut every other process gets with
    /// the re-join notice. The new process keeps its forker's engine, whose
    /// process numbers name its forker's counterparts: it swaps the two
    /// replica indices wherever it names processes to the protocol, so its
    /// engine talks to replica `replica` of every rank under the numbers
    /// of the forker's replica, and the other way round.
    pub fn fork(&mut self, replica: u32) -> (Replication, ForkCut) {
        let forker = self.replica.me().replica;
        // The copy talks, under each engine number, to the replica this
        // process talks to there, with `forker` and `replica` exchanged.
        let to_wire: Vec<u32> = (0..self.replicas)
            .map(|engine| {
                let wire = self.wire_replica(engine);
                if wire == forker {
                    replica
                } else if wire == replica {
                    forker
                } else {
                    wire
                }
            })
            .collect();
        let mut to_engine = vec![0; to_wire.len()];
        for (engine, &wire) in to_wire.iter().enumerate() {
            to_engine[wire as usize] = engine as u32;
        }
        let (protocol, cut) = self.replica.fork(replica);
        self.forks_due.retain(|&due| due != replica);
        self.replicas_forked += 1;
        let mut child = self.clone();
        self.drain(None);
        child.replica = protocol;
        child.relabel = Some((to_wire, to_engine));
        child.forks_due.clear();
        child.frames.clear();
        child.resends.clear();
        child.deferred_acks.clear();
        child.received_hash = None;
        child.replicas_forked = 0;
        child.drain(None);
        (child, cut)
    }

    /// The replica index on the wire of the engine's replica index
    /// `engine` (the same except in a forked process).
    fn wire_replica(&self, engine: u32) -> u32 {
        self.relabel
            .as_ref()
            .map_or(engine, |(to_wire, _)| to_wire[engine as usize])
    }

    /// The process number on the wire of the engine's process `engine`.
    pub fn wire_index(&self, engine: u32) -> u32 {
        self.wire_replica(engine / self.ranks) * self.ranks + engine % self.ranks
    }

    /// The engine's process number of the process the wire calls
    /// `physical`.
    pub fn engine_number(&self, physical: u32) -> u32 {
        let replica = physical / self.ranks;
        let replica = self
            .relabel
            .as_ref()
            .map_or(replica, |(_, to_engine)| to_engine[replica as usize]);
        replica * self.ranks + physical % self.ranks
    }

    /// The same, with the replicas of each rank agreeing on the source of
    /// every wildcard receive (`--replica-anysource agree`).
    pub fn with_anysource_agreement(mut self) -> Replication {
        let me = self.replica.me();
        self.agreement = Some(WildcardAgreement::new(me.replica, self.replicas));
        self
    }

    /// The wildcard agreement (`--replica-anysource agree`), if on.
    pub fn agreement(&self) -> Option<&WildcardAgreement> {
        self.agreement.as_ref()
    }

    /// This process's index for source `rank` (the one of its own replica,
    /// which its matching engine names).
    fn source_process(&self, rank: u32) -> u32 {
        self.index_of(Process {
            rank,
            replica: self.replica.me().replica,
        })
    }

    /// Carry out the wildcard agreement's actions.
    fn drain_agreement(&mut self) {
        let Some(agreement) = self.agreement.as_mut() else {
            return;
        };
        let rank = self.replica.me().rank;
        let mut actions = Vec::new();
        while let Some(action) = agreement.poll_action() {
            actions.push(action);
        }
        for action in actions {
            match action {
                AgreementAction::SendDecisions { to, decisions } => {
                    let to = self.index_of(Process { rank, replica: to });
                    let frame = decisions_frame(DECISIONS_FRAME, &decisions);
                    self.frames.push_back((to, frame));
                }
                AgreementAction::SendSync { to, decisions } => {
                    let to = self.index_of(Process { rank, replica: to });
                    self.frames
                        .push_back((to, decisions_frame(SYNC_FRAME, &decisions)));
                }
                AgreementAction::SendAcks { to, ordinals } => {
                    let to = self.index_of(Process { rank, replica: to });
                    self.frames
                        .push_back((to, ordinals_frame(ACKS_FRAME, &ordinals)));
                }
                AgreementAction::SendStable { to, ordinals } => {
                    let to = self.index_of(Process { rank, replica: to });
                    self.frames
                        .push_back((to, ordinals_frame(STABLE_FRAME, &ordinals)));
                }
                AgreementAction::ReleaseHeld { receive } => self.released_held.push_back(receive),
                AgreementAction::Release { receive, source } => {
                    self.wildcards_pinned += u64::from(source.is_some());
                    let source = source.map(|source| self.source_process(source));
                    self.released_receives.push_back((receive, source));
                }
                AgreementAction::Conflict {
                    ordinal,
                    held,
                    sent,
                    from,
                } => {
                    self.fatal_error.get_or_insert_with(|| {
                        format!(
                            "replication: rank {rank} replica {from} sent source rank {sent} for \
                             wildcard receive {ordinal}, whose source was agreed as rank {held} \
                             (--replica-anysource agree)"
                        )
                    });
                }
            }
        }
    }

    /// The same, with `policy` for divergences between replicas.
    pub fn with_sdc_policy(mut self, policy: SdcPolicy) -> Replication {
        self.sdc_policy = policy;
        if policy == SdcPolicy::Vote {
            self.divergence = DivergenceCheck::voting(self.replicas);
        }
        self
    }

    /// Sent and acked payload hashes compared so far.
    pub fn divergence(&self) -> &DivergenceCheck {
        &self.divergence
    }

    /// `found` new divergences: under `Abort`, the job must end.
    fn diverged(&mut self, found: u64) {
        if let Some(outvoted) = self.divergence.outvoted.take() {
            if self.departure.is_none() {
                // The replica of the destination this process sent the
                // outvoted bytes to took them in: it leaves too.
                let to = self.index_of(Process {
                    rank: outvoted.send.destination,
                    replica: outvoted.me.replica,
                });
                let mut frame = vec![TAINTED_FRAME];
                frame.extend_from_slice(&outvoted.send.logical_seq.to_le_bytes());
                self.frames.push_back((to, frame));
                self.departure = Some(outvoted.to_string());
            }
        }
        if found > 0 && self.sdc_policy == SdcPolicy::Abort && self.fatal_error.is_none() {
            let first = self.divergence.kept.last().map(ToString::to_string);
            self.fatal_error = Some(first.unwrap_or_else(|| "replicas diverged".to_string()));
        }
    }

    /// The protocol state.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    fn process_of(&self, index: u32) -> Process {
        let index = self.wire_index(index);
        Process {
            rank: index % self.ranks,
            replica: index / self.ranks,
        }
    }

    /// The protocol's id of a send the engine names by its destination
    /// process and logical number.
    fn send_id(&self, destination: u32, logical_seq: u64) -> SendId {
        SendId {
            destination: destination % self.ranks,
            logical_seq,
        }
    }

    fn index_of(&self, process: Process) -> u32 {
        self.engine_number(process.replica * self.ranks + process.rank)
    }

    /// Carry out the protocol's actions; transmissions of the send being
    /// routed go into `targets`, any other into the re-send queue.
    fn drain(&mut self, mut targets: Option<(&mut Vec<u32>, SendId)>) {
        while let Some(action) = self.replica.poll_action() {
            if let Action::SendComplete(send) = action {
                self.divergence.handle_complete(send);
            }
            match action {
                Action::Transmit { send, to } => match &mut targets {
                    Some((list, routed)) if *routed == send => {
                        list.push(self.index_of(to));
                        // The engine reports the send out only once every
                        // copy is: the protocol need not track each.
                        self.replica.handle_transmitted(send, to);
                    }
                    _ => self.resends.push_back((send, to)),
                },
                Action::Ack {
                    to, logical_seq, ..
                } => {
                    // `to` is a replica of the rank that sent the message.
                    let hash = self
                        .received_hash
                        .filter(|&(rank, seq, _)| (rank, seq) == (to.rank, logical_seq))
                        .map(|(_, _, hash)| hash);
                    let to = self.index_of(to);
                    self.frames.push_back((to, ack_frame(logical_seq, hash)));
                }
                Action::SendComplete(send) => match self.held.remove(&send) {
                    Some(wire_id) => self.released.push_back(wire_id),
                    None => {
                        self.started.remove(&send);
                        self.completed.insert(send);
                    }
                },
                Action::ReceiveFrom { .. } => {}
                Action::RankLost(rank) => self.lost_ranks.push(rank),
                Action::Welcome {
                    to,
                    joined,
                    incarnation,
                    delivered,
                } => {
                    let mut frame = Vec::with_capacity(WELCOME_BYTES);
                    frame.push(WELCOME_FRAME);
                    for word in [joined.rank, joined.replica, incarnation] {
                        frame.extend_from_slice(&word.to_le_bytes());
                    }
                    frame.extend_from_slice(&delivered.to_le_bytes());
                    let to = self.index_of(to);
                    self.frames.push_back((to, frame));
                }
            }
        }
    }
}

impl Interceptor for Replication {
    const ROUTES_SENDS: bool = true;
    const SENDS_PROTOCOL_FRAMES: bool = true;
    const REPLICATES: bool = true;
    const WANTS_PAYLOADS: bool = true;
    const HASHES_RECEIVED: bool = true;
    const PINS_WILDCARDS: bool = true;

    fn name(&self) -> &'static str {
        "replication"
    }

    fn wants_match_events(&self) -> bool {
        self.agreement.is_some()
    }

    fn on_wildcard_receive(&mut self, receive: u64, _pattern: &ReceivePattern) -> WildcardDecision {
        let Some(agreement) = self.agreement.as_mut() else {
            return WildcardDecision::AnySource;
        };
        let decision = match agreement.handle_wildcard_receive(receive) {
            WildcardPost::AnySource => WildcardDecision::AnySource,
            WildcardPost::Pin(rank) => {
                self.wildcards_pinned += 1;
                WildcardDecision::Pin(self.source_process(rank))
            }
            WildcardPost::Defer => WildcardDecision::Defer,
        };
        self.drain_agreement();
        decision
    }

    fn poll_released_receive(&mut self) -> Option<(u64, Option<u32>)> {
        self.released_receives.pop_front()
    }

    fn hold_receive(&mut self, receive: u64) -> bool {
        let Some(agreement) = self.agreement.as_mut() else {
            return false;
        };
        let held = agreement.hold_receive(receive);
        self.drain_agreement();
        held
    }

    fn poll_released_held_receive(&mut self) -> Option<u64> {
        self.released_held.pop_front()
    }

    fn on_match(&mut self, event: &MatchEvent) {
        let rank = event.envelope.source % self.ranks;
        if let Some(agreement) = self.agreement.as_mut() {
            agreement.handle_match(event.receive_token, rank);
            self.drain_agreement();
        }
    }

    fn route_send(&mut self, send: &SendEnvelope, targets: &mut SendTargets) {
        let destination = send.destination % self.ranks;
        let id = self.replica.handle_send(destination);
        self.last_seq = id.logical_seq;
        let mut list = Vec::new();
        self.drain(Some((&mut list, id)));
        // The primary copy (the request's own, which a synchronous send's
        // ack answers) goes to this replica's destination; copies for dead
        // siblings follow.
        let own = send.destination;
        list.sort_by_key(|&process| process != own);
        targets.clear();
        for process in list {
            targets.add(process);
        }
    }

    fn send_logical_seq(&self) -> u64 {
        self.last_seq
    }

    fn on_message_arrival(
        &mut self,
        peer: u32,
        logical_seq: u64,
        data_follows: bool,
    ) -> MessageArrival {
        let from = self.process_of(peer);
        // A replica sends to another replica index than its own only as a
        // substitute, after the death of the one it stands for.
        let partner = Process {
            rank: from.rank,
            replica: self.replica.source_replica(from.rank),
        };
        if partner != from && self.replica.is_alive(partner) {
            self.shown_dead.insert(partner);
        }
        let arrival = self.replica.handle_arrival(from, logical_seq);
        let queued = self.frames.len();
        self.drain(None);
        if data_follows && arrival == Arrival::Deliver {
            // `irecvComplete` of a rendezvous is its data landing: were it
            // acked now and its sender died before the data, the
            // substitute would not re-send it.
            let acks: Vec<u32> = self.frames.drain(queued..).map(|(to, _)| to).collect();
            self.deferred_acks.insert((from.rank, logical_seq), acks);
        }
        match arrival {
            Arrival::Deliver => MessageArrival::Deliver,
            Arrival::Duplicate => {
                self.duplicates_dropped += 1;
                MessageArrival::Duplicate
            }
            Arrival::OutOfOrder { expected } => MessageArrival::OutOfOrder { expected },
        }
    }

    fn on_message_landed(&mut self, peer: u32, logical_seq: u64) {
        let rank = self.process_of(peer).rank;
        let hash = self
            .received_hash
            .filter(|&(from, seq, _)| (from, seq) == (rank, logical_seq))
            .map(|(_, _, hash)| hash);
        for to in self
            .deferred_acks
            .remove(&(rank, logical_seq))
            .unwrap_or_default()
        {
            if self.replica.is_alive(self.process_of(to)) {
                self.frames.push_back((to, ack_frame(logical_seq, hash)));
            }
        }
    }

    fn on_received_hash(&mut self, peer: u32, logical_seq: u64, hash: u32) {
        self.received_hash = Some((self.process_of(peer).rank, logical_seq, hash));
    }

    fn on_send_payload(&mut self, message: &SentMessage, payload: Payload<'_>) {
        let send = self.send_id(message.destination, message.logical_seq);
        if !self.divergence.wants_hash(send) {
            return;
        }
        let hash = payload_hash(&payload);
        let pending = !self.completed.contains(&send);
        let me = self.replica.me();
        let found = self.divergence.handle_sent(me, send, hash, pending);
        self.diverged(found);
    }

    fn take_fatal_error(&mut self) -> Option<String> {
        self.fatal_error.take()
    }

    fn take_departure(&mut self) -> Option<String> {
        self.departure.take()
    }

    fn engine_index(&self, physical: u32) -> u32 {
        self.engine_number(physical)
    }

    fn on_replica_rejoin(&mut self, _peer: u32, _incarnation: u32, cut: &[u8]) {
        if let Some(cut) = ForkCut::from_bytes(cut) {
            self.replica.handle_rejoin(&cut);
            self.drain(None);
        }
    }

    fn report_counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("replica_divergences", self.divergence.found),
            ("replica_duplicates_dropped", self.duplicates_dropped),
            ("replica_resends", self.resends_made),
            ("replica_wildcards_pinned", self.wildcards_pinned),
            ("replicas_forked", self.replicas_forked),
        ]
    }

    fn report_lines(&self) -> Vec<String> {
        self.divergence
            .kept
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn send_started(&mut self, wire_id: u64, destination: u32, logical_seq: u64) {
        let send = self.send_id(destination, logical_seq);
        if !self.completed.contains(&send) {
            self.started.insert(send, wire_id);
        }
    }

    fn hold_send(&mut self, wire_id: u64, destination: u32, logical_seq: u64) -> bool {
        let send = self.send_id(destination, logical_seq);
        self.started.remove(&send);
        if self.completed.remove(&send) {
            return false;
        }
        self.held.insert(send, wire_id);
        true
    }

    fn poll_released_send(&mut self) -> Option<u64> {
        self.released.pop_front()
    }

    fn poll_resend(&mut self) -> Option<(u64, u32, u64)> {
        loop {
            let (send, to) = self.resends.pop_front()?;
            // A later notice in the same burst may have overtaken the
            // take-over that queued this re-send: its target died too (the
            // protocol forgot the transmission, and the send may have
            // completed and left the engine). Nothing to send then.
            if !self.replica.is_alive(to) {
                continue;
            }
            // Every send the protocol may re-send is known to the engine:
            // started (`send_started`, in the call that routes it) or held
            // (a send with no transmission of its own is held at once).
            let wire_id = *self
                .held
                .get(&send)
                .or_else(|| self.started.get(&send))
                .unwrap_or_else(|| {
                    panic!("replication: re-send of {send:?}, which the engine never started")
                });
            self.resends_made += 1;
            return Some((wire_id, self.index_of(to), send.logical_seq));
        }
    }

    fn on_resent(&mut self, destination: u32, logical_seq: u64) {
        let send = self.send_id(destination, logical_seq);
        self.replica
            .handle_transmitted(send, self.process_of(destination));
        self.drain(None);
    }

    fn logical_peer(&self, peer: u32) -> u32 {
        let from = self.process_of(peer);
        self.index_of(Process {
            rank: from.rank,
            replica: self.replica.me().replica,
        })
    }

    fn replica_dead(&self, peer: u32) -> bool {
        let process = self.process_of(peer);
        !self.replica.is_alive(process) && !self.lost_ranks.contains(&process.rank)
    }

    fn replica_shown_dead(&self, peer: u32) -> bool {
        self.shown_dead.contains(&self.process_of(peer))
    }

    fn supersedes(&self, new: u32, current: u32) -> bool {
        // Substitutes are elected cyclically after the dead replica, so
        // the later one in the chain is further from this replica.
        let mine = self.replica.me().replica;
        let replicas = self.replicas;
        let distance =
            |process: u32| (self.process_of(process).replica + replicas - mine) % replicas;
        distance(new) > distance(current)
    }

    fn on_peer_failure(&mut self, peer: u32) -> PeerFailureAction {
        let dead = self.process_of(peer);
        let lost_before = self.lost_ranks.len();
        self.replica.handle_failure(dead);
        self.drain(None);
        if dead.rank == self.replica.me().rank {
            if let Some(agreement) = self.agreement.as_mut() {
                agreement.handle_failure(dead.replica);
                self.drain_agreement();
            }
            if self.recovery {
                // The dead replicas this process now substitutes for.
                for replica in 0..self.replicas {
                    if self.replica.may_fork(replica) && !self.forks_due.contains(&replica) {
                        self.forks_due.push(replica);
                    }
                }
            }
        }
        if self.lost_ranks.len() > lost_before || self.lost_ranks.contains(&dead.rank) {
            PeerFailureAction::AbortJob
        } else {
            PeerFailureAction::Handled
        }
    }

    fn on_protocol_frame(&mut self, peer: u32, bytes: &[u8]) {
        if let Some(&kind @ (DECISIONS_FRAME | SYNC_FRAME | ACKS_FRAME | STABLE_FRAME)) =
            bytes.first()
        {
            let from = self.process_of(peer);
            let me = self.replica.me();
            let Some(agreement) = self.agreement.as_mut() else {
                return;
            };
            if from.rank != me.rank {
                return;
            }
            let body = &bytes[1..];
            match kind {
                DECISIONS_FRAME | SYNC_FRAME => {
                    let Some(decisions) = parse_decisions(body) else {
                        return;
                    };
                    if kind == DECISIONS_FRAME {
                        agreement.handle_decisions(from.replica, &decisions);
                    } else {
                        agreement.handle_sync(from.replica, &decisions);
                    }
                }
                _ => {
                    let Some(ordinals) = parse_ordinals(body) else {
                        return;
                    };
                    if kind == ACKS_FRAME {
                        agreement.handle_acks(from.replica, &ordinals);
                    } else {
                        agreement.handle_stable(from.replica, &ordinals);
                    }
                }
            }
            self.drain_agreement();
            return;
        }
        if let (WELCOME_BYTES, Some(&WELCOME_FRAME)) = (bytes.len(), bytes.first()) {
            let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
            let joined = Process {
                rank: word(1),
                replica: word(5),
            };
            let incarnation = word(9);
            let delivered = u64::from_le_bytes(bytes[13..21].try_into().expect("8 bytes"));
            let from = self.process_of(peer);
            self.replica
                .handle_welcome(from, joined, incarnation, delivered);
            self.drain(None);
            return;
        }
        if let (9, Some(&TAINTED_FRAME)) = (bytes.len(), bytes.first()) {
            let from = self.process_of(peer);
            let me = self.replica.me();
            if self.sdc_policy == SdcPolicy::Vote && from.replica == me.replica {
                let logical_seq = u64::from_le_bytes(bytes[1..9].try_into().expect("8 bytes"));
                self.departure.get_or_insert_with(|| {
                    format!(
                        "replica {} of rank {} received message {logical_seq} from rank {}, whose \
                         bytes a majority of rank {}'s replicas sent otherwise: its state is \
                         suspect, it leaves the job (--sdc vote)",
                        me.replica, me.rank, from.rank, from.rank
                    )
                });
            }
            return;
        }
        let hash = match (bytes.len(), bytes.first()) {
            (9, Some(&ACK_FRAME)) => None,
            (13, Some(&ACK_WITH_HASH_FRAME)) => Some(u32::from_le_bytes(
                bytes[9..13].try_into().expect("4 bytes"),
            )),
            _ => return,
        };
        let logical_seq = u64::from_le_bytes(bytes[1..9].try_into().expect("8 bytes"));
        let from = self.process_of(peer);
        if !self.replica.is_alive(from) {
            return;
        }
        if let Some(hash) = hash {
            // Compared before the ack may complete the send (and drop its
            // hash).
            let send = SendId {
                destination: from.rank,
                logical_seq,
            };
            let me = self.replica.me();
            let made = self.replica.has_sent(send);
            let found = self.divergence.handle_ack(me, send, from, hash, made);
            self.diverged(u64::from(found));
        }
        self.replica.handle_ack(from, logical_seq);
        self.drain(None);
    }

    fn poll_protocol_frame(&mut self) -> Option<(u32, Vec<u8>)> {
        self.frames.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Process indices: rank + replica * ranks.
    const RANKS: u32 = 2;

    /// Process 0 (rank 0 replica 0) with one send to rank 1 started, as
    /// wire id 77.
    fn sending_to_rank_1() -> Replication {
        let mut me = Replication::new(0, RANKS, 2);
        let mut targets = SendTargets::single(1);
        let envelope = SendEnvelope {
            destination: 1,
            context: 0,
            tag: 0,
            length_bytes: 8,
        };
        me.route_send(&envelope, &mut targets);
        assert_eq!(targets.as_slice(), &[1]);
        me.send_started(77, 1, me.send_logical_seq());
        me
    }

    #[test]
    fn a_resend_overtaken_by_the_death_of_its_target_is_dropped() {
        // Then a host holding replica 1 of both ranks goes down and the
        // two notices come in one burst, before the engine polls the
        // re-sends.
        let mut me = sending_to_rank_1();
        // Process 2 (rank 0 replica 1) dies: process 0 substitutes for it
        // and queues the re-send to process 3 (rank 1 replica 1).
        assert_eq!(me.on_peer_failure(2), PeerFailureAction::Handled);
        // Process 3 dies before the re-send is made.
        assert_eq!(me.on_peer_failure(3), PeerFailureAction::Handled);
        assert_eq!(me.poll_resend(), None);
        assert_eq!(me.resends_made, 0);
    }

    #[test]
    fn a_resend_to_a_live_replica_is_made() {
        let mut me = sending_to_rank_1();
        assert_eq!(me.on_peer_failure(2), PeerFailureAction::Handled);
        assert_eq!(me.poll_resend(), Some((77, 3, 1)));
        assert_eq!(me.poll_resend(), None);
    }

    #[test]
    fn a_substitutes_message_shows_the_replica_it_stands_for_dead_before_the_notice() {
        // Process 2 is rank 0 replica 1; its partner in rank 1 is process 3.
        let mut me = Replication::new(2, RANKS, 2);
        assert!(!me.replica_shown_dead(3));
        // From its own partner: nothing shown.
        assert_eq!(me.on_message_arrival(3, 1, false), MessageArrival::Deliver);
        assert!(!me.replica_shown_dead(3) && !me.replica_dead(3));
        // Rank 1 replica 0 (process 1) sends to replica 1 only as the
        // substitute of a dead process 3.
        assert_eq!(me.on_message_arrival(1, 2, false), MessageArrival::Deliver);
        assert!(me.replica_shown_dead(3));
        assert!(!me.replica_shown_dead(1));
        // Once the notice is handled the receives come from process 1,
        // whose messages show nothing more.
        assert_eq!(me.on_peer_failure(3), PeerFailureAction::Handled);
        assert!(me.replica_dead(3));
        assert_eq!(me.on_message_arrival(1, 3, false), MessageArrival::Deliver);
        assert!(!me.replica_shown_dead(1));
    }
}
