//! Re-join: a replacement process (a new incarnation of a world rank)
//! takes the place of a dead one in a running job.
//!
//! Why it lives beside the engine and not in it: the engine's failure
//! handling and interceptor hooks change in parallel, and re-join needs
//! only a few of its fields. What the engine itself does for re-join is
//! three lines: every frame it emits carries its own incarnation
//! ([`emit_stamped`]), every frame it takes is checked against the
//! incarnation it knows for the sender ([`State::drop_other_incarnation`]
//! when they differ), and launcher notices go through
//! [`Engine::handle_notices`].
//!
//! The rule that makes "nothing of the old incarnation is delivered after"
//! hold on every path (a shared-memory ring still full of the dead
//! process's frames, a simulated network with frames in flight): a frame is
//! delivered only when its `incarnation` equals the one this process knows
//! for the sender. Older ones are dropped and counted. A newer one means a
//! re-join this process was not told of, which no path can produce (the
//! re-join event always precedes the new incarnation's first frame: over
//! TCP the connection is made by the survivor when it handles the notice),
//! so it is an error rather than a silent loss of messages.
//!
//! [`Engine::handle_peer_rejoin`] resets everything this process keeps per
//! peer to the state of a peer it has never talked to: the failed flag,
//! both logical message numbers (each side numbers from 1 again), eager
//! credit both ways, the reliable link, and the route.

use resmpi_ft::Interceptor;
use resmpi_path::Path;
use resmpi_runtime::notices::PeerEvent;
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};

use super::{Engine, State, Unexpected};
use crate::error::{ErrorClass, MpiError};
use crate::transport::Route;

/// Most polling rounds [`Engine::deliver_last_words`] runs before a death
/// is handled.
const LAST_WORDS_ROUNDS: usize = 64;

/// The wire form of `header` with `incarnation` as the sender's.
#[inline]
pub(super) fn emit_stamped(header: &FrameHeader, incarnation: u32) -> [u8; HEADER_LEN_BYTES] {
    let mut stamped = *header;
    stamped.incarnation = incarnation;
    stamped.to_bytes()
}

impl<F: Interceptor> State<F> {
    /// A frame from `peer` sent by incarnation `incarnation`, which is not
    /// the one this process delivers from: dropped. An older one is a
    /// leftover of a dead process (counted); a newer one is a re-join this
    /// process was not told of (an error: its messages would be lost).
    #[cold]
    pub(super) fn drop_other_incarnation(&mut self, peer: u32, incarnation: u32) {
        let known = self.peer_incarnation[peer as usize];
        if incarnation < known {
            self.old_incarnation_frames_dropped += 1;
            return;
        }
        self.pending_error.get_or_insert(MpiError::new(
            ErrorClass::Intern,
            format!(
                "a frame from incarnation {incarnation} of rank {peer} arrived, but this process knows only incarnation {known}: its re-join was not announced"
            ),
        ));
    }

    /// The incarnation of `peer` whose frames are delivered here.
    pub fn peer_incarnation(&self, peer: u32) -> u32 {
        self.peer_incarnation
            .get(peer as usize)
            .copied()
            .unwrap_or(0)
    }
}

/// Whether a frame of `kind` is the link layer's own (acknowledgements
/// carry no incarnation: the link, not the process, makes them).
#[inline]
pub(super) fn is_link_frame(kind: FrameKind) -> bool {
    kind == FrameKind::Ack
}

impl<F: Interceptor> Engine<F> {
    /// This process is incarnation `incarnation` of its world rank (a
    /// replacement started by the launcher): every frame it sends says so,
    /// including those it sends itself.
    pub fn set_own_incarnation(&mut self, incarnation: u32) {
        let rank = self.state.rank as usize;
        self.state.own_incarnation = incarnation;
        self.state.peer_incarnation[rank] = incarnation;
    }

    /// Take for granted that `peer` is at incarnation `incarnation` (what
    /// a replacement learns at wire-up about peers that were themselves
    /// replaced), without any event.
    pub fn assume_peer_incarnation(&mut self, peer: u32, incarnation: u32) {
        if let Some(known) = self.state.peer_incarnation.get_mut(peer as usize) {
            *known = incarnation;
            if F::LOGS_MESSAGES && incarnation > 0 {
                // Optimistic logging tells a dead incarnation's
                // dependencies from a live one's by it.
                self.state.interceptor.on_peer_rejoin(peer, incarnation);
            }
        }
    }

    /// Incarnation `incarnation` of world rank `peer` has joined the job,
    /// reached over `route`: forget everything of the old incarnation and
    /// talk to it as to a peer never seen. An incarnation not newer than
    /// the one known is stale and ignored (false); so are this process and
    /// ranks out of range. If the old incarnation's death was not handled
    /// yet, it is handled first: the re-join proves it.
    pub fn handle_peer_rejoin(&mut self, peer: u32, incarnation: u32, route: Route) -> bool {
        if peer >= self.state.size
            || peer == self.state.rank
            || incarnation <= self.state.peer_incarnation[peer as usize]
        {
            return false;
        }
        if !F::REPLICATES {
            // Under replication the death came first in the notices, and
            // the protocol would take this for the new replica's death.
            self.handle_peer_failure(peer);
        }
        let state = &mut self.state;
        let slot = peer as usize;
        if state.failed[slot] {
            state.failed[slot] = false;
            state.failed_count -= 1;
        }
        state.peer_incarnation[slot] = incarnation;
        state.eager_credit[slot] = state.config.eager_credit_bytes;
        state.credit_owed[slot] = 0;
        if F::LOGS_MESSAGES {
            // It replays from MPI_Init: the channel's numbers go on, and
            // what it had of this process comes again from the log
            // (`engine/replay.rs`); its old messages here stay delivered.
            state.restarting[slot] = false;
            self.transports.routes[slot] = route;
            for communicator in self.state.comms.iter_mut().flatten() {
                communicator.members_on_shared_memory = None;
            }
            self.links.adopt(peer, route == Route::Tcp);
            self.state.interceptor.on_peer_rejoin(peer, incarnation);
            if self.state.interceptor.holds_replay_to(peer) {
                self.state.replays_held.push(peer);
            } else {
                self.replay_to(peer);
            }
            return true;
        }
        state.message_seq_out[slot] = 0;
        state.message_seq_in[slot] = 0;
        // Eager messages of the old incarnation that no receive took: the
        // process that sent them is gone, and a receive posted from now on
        // waits for the new one (whose numbering starts over). Under
        // replication they stay: the protocol delivered them (per-rank
        // logical numbers), and the new replica goes on from the cut.
        while !F::REPLICATES
            && state
                .matcher
                .withdraw_unexpected(|envelope, message| {
                    envelope.source == peer && matches!(message, Unexpected::Eager { .. })
                })
                .is_some()
        {
            state.old_incarnation_frames_dropped += 1;
        }
        self.transports.routes[slot] = route;
        // The route may have changed (a peer respawned elsewhere is reached
        // over TCP): what the collective fast path knew of it is stale.
        for communicator in self.state.comms.iter_mut().flatten() {
            communicator.members_on_shared_memory = None;
        }
        self.links.adopt(peer, route == Route::Tcp);
        true
    }

    /// The launcher's notices since the last call: deaths and re-joins, in
    /// the order it sent them (before a death, what is in transit is
    /// delivered: [`Engine::deliver_last_words`]). A death of an incarnation older than the one
    /// known is stale (the re-join came first) and ignored. A re-join is
    /// connected over TCP here ([`crate::wireup::connect_rejoined_peer`]);
    /// if that fails the new incarnation is taken as failed too.
    pub fn handle_notices(&mut self) {
        let Some(notices) = self.notices.clone() else {
            return;
        };
        let fresh = notices.events_since(self.notices_seen);
        self.notices_seen += fresh.len() as u64;
        for event in fresh {
            match event {
                PeerEvent::Failed { rank, incarnation } => {
                    let rank = self.state.interceptor.engine_index(rank);
                    if rank < self.state.size && incarnation >= self.state.peer_incarnation(rank) {
                        self.deliver_last_words();
                        self.handle_peer_death(rank, incarnation);
                    }
                }
                PeerEvent::Rejoined {
                    rank,
                    incarnation,
                    address,
                    cut,
                } => self.connect_rejoined(rank, incarnation, &address, cut.as_deref()),
            }
        }
    }

    /// Deliver what is still in transit to this process (rings, sockets)
    /// before a death is handled: a dead peer's last frames were written
    /// before the launcher noticed the death, so they are there now, and a
    /// message it sent (or an Issend's acknowledgement) must not be lost
    /// because its notice was read first. Polls until a round brings
    /// nothing, at most [`LAST_WORDS_ROUNDS`] rounds (live peers may keep
    /// sending); errors resurface in the next progress round.
    fn deliver_last_words(&mut self) {
        for _ in 0..LAST_WORDS_ROUNDS {
            let state = &mut self.state;
            let mut frames = match self.transports.shm.as_mut() {
                Some(shm) => shm
                    .poll(|peer, frame| state.handle_frame(peer, frame))
                    .unwrap_or(0),
                None => 0,
            };
            if !self.transports.rails.is_empty() {
                frames += self.poll_rails().unwrap_or(0);
            }
            if frames == 0 {
                return;
            }
        }
    }

    /// Connect to incarnation `incarnation` of process `physical` (as the
    /// launcher names it), listening at `address`, and reset the peer for
    /// it; a replica forked by a substitute brings its fork's `cut` (hex),
    /// for the replication protocol.
    fn connect_rejoined(
        &mut self,
        physical: u32,
        incarnation: u32,
        address: &str,
        cut: Option<&str>,
    ) {
        let peer = self.state.interceptor.engine_index(physical);
        if peer >= self.state.size
            || peer == self.state.rank
            || incarnation <= self.state.peer_incarnation(peer)
        {
            return;
        }
        match crate::wireup::connect_rejoined_peer(
            &mut self.transports,
            self.state.wire_rank,
            physical,
            address,
        ) {
            Ok(()) => {
                self.handle_peer_rejoin(peer, incarnation, Route::Tcp);
                if let Some(cut) = cut.and_then(resmpi_runtime::hex_decode) {
                    self.state
                        .interceptor
                        .on_replica_rejoin(peer, incarnation, &cut);
                }
            }
            Err(error) => {
                eprintln!(
                    "resmpi: rank {}: incarnation {incarnation} of rank {peer} re-joined, but connecting to it failed ({error}); it stays failed",
                    self.state.rank
                );
                self.handle_peer_failure(peer);
                self.state.peer_incarnation[peer as usize] = incarnation;
            }
        }
    }
}
