//! A replica forked by a substitute (replication's recovery of a lost
//! replica) takes over the copy of its forker's engine.
//!
//! Why the engine keeps its forker's numbering. Everything the application
//! sees (communicators, posted receives, requests, unexpected messages)
//! names processes by the engine's numbers, and the fork copied all of it
//! from a process that was replica `k'` of its rank. The new process is
//! replica `k`: it talks to replica `k` of every other rank where the
//! forker talked to replica `k'`. Rather than renumber every structure,
//! the new process swaps the two replica indices where its engine meets
//! the outside: its TCP path files each connection under the swapped
//! number (`TcpPath::renumber`), its reliability links and its frames say
//! who it and its peers are on the wire (`ReliableLinks::renumber`,
//! `State::wire_rank`), launcher notices and frame sources are mapped
//! through `Interceptor::engine_index`, and the replication protocol
//! (`Replication::fork`) maps its process names the same way. Inside,
//! "replica `k'` of rank j" now means the process that is replica `k` on
//! the wire, which is exactly the counterpart the copied receives expect.
//!
//! The fork is made only when nothing of the forker's own is on its way
//! ([`Engine::quiescent`]): a transfer the forker started belongs to the
//! forker, and its copy in the new process could only be wrong.

use std::sync::Arc;

use resmpi_ft::Interceptor;
use resmpi_runtime::FailureNotices;

use super::{Engine, Unexpected};
use crate::request::{Operation, SendStage};
use crate::transport::{Route, Transports};

impl<F: Interceptor> Engine<F> {
    /// Whether no transfer of this process is under way: nothing queued
    /// or streaming, no rendezvous or synchronous send waiting for its
    /// receiver, no receive half-filled, no announced rendezvous or
    /// synchronous eager message waiting to be matched (its answer would
    /// go to the wrong process from a copy), no RMA loan. What a fork
    /// copies is then only what the replication protocol accounts for.
    pub fn quiescent(&mut self) -> bool {
        let state = &mut self.state;
        if state.queued_frames != 0
            || state.streaming_sends != 0
            || !state.rendezvous_in.is_empty()
            || !state.sends_awaiting_acks.is_empty()
            || !state.lent_requests.is_empty()
            || state.probed_messages.iter().any(Option::is_some)
            || self.transports.rails_hold_output()
        {
            return false;
        }
        let busy_request = state.requests.live_indices().into_iter().any(|index| {
            match state.requests.get(index) {
                Some(request) if !request.complete => match &request.operation {
                    Operation::Send(send) => send.stage != SendStage::Done,
                    Operation::Receive(receive) => {
                        receive.matched && receive.received < receive.total
                    }
                    _ => false,
                },
                _ => false,
            }
        });
        if busy_request {
            return false;
        }
        !state.matcher.unexpected_mut().any(|(_, message)| {
            matches!(
                message,
                Unexpected::Rendezvous { .. } | Unexpected::Eager { sync: Some(_), .. }
            )
        })
    }

    /// In the forked process: take over this engine as process `wire_rank`
    /// (incarnation `incarnation`), with `interceptor` (the protocol's
    /// half of the fork, which swaps the numbers), `transports` (its own
    /// connections, made by its re-join) and `notices` (from its own
    /// launcher connection). `physical[p]` is the wire number of the
    /// engine's peer `p`. The forker's transports are the caller's to
    /// close (their descriptors are shared with the forker).
    pub fn become_forked_replica(
        &mut self,
        wire_rank: u32,
        incarnation: u32,
        interceptor: F,
        mut transports: Transports,
        physical: Vec<u32>,
        notices: Arc<FailureNotices>,
    ) -> Transports {
        let rank = self.state.rank;
        let size = self.state.size;
        // Every peer over TCP now (no shared memory was set up).
        transports.routes = (0..size)
            .map(|peer| {
                if peer == rank {
                    Route::Loopback
                } else {
                    Route::Tcp
                }
            })
            .collect();
        // The forker is the process this one was on the wire.
        let forker_wire = self.state.wire_rank;
        let forker = physical
            .iter()
            .position(|&wire| wire == forker_wire)
            .map_or(rank, |peer| peer as u32);
        let forker_incarnation = self.state.own_incarnation;
        // What the forker knew of each process (its incarnation, whether
        // its death was handled) moves to the slot that names it now.
        let forker_slots: Vec<usize> = physical
            .iter()
            .map(|&wire| self.state.interceptor.engine_index(wire) as usize)
            .collect();
        let state = &mut self.state;
        state.peer_incarnation = forker_slots
            .iter()
            .map(|&slot| state.peer_incarnation[slot])
            .collect();
        state.replica_death_handled = forker_slots
            .iter()
            .map(|&slot| state.replica_death_handled[slot])
            .collect();
        let old = std::mem::replace(&mut self.transports, transports);
        self.state.interceptor = interceptor;
        self.state.wire_rank = wire_rank;
        self.state.own_incarnation = incarnation;
        self.state.peer_incarnation[rank as usize] = incarnation;
        // The engine's peer `forker` is the forker on the wire now.
        self.state.peer_incarnation[forker as usize] = forker_incarnation;
        self.state.sends_until_kill = 0;
        self.links.renumber(wire_rank, physical);
        let credit = self.state.config.eager_credit_bytes;
        for peer in 0..size {
            let slot = peer as usize;
            self.state.eager_credit[slot] = credit;
            self.state.credit_owed[slot] = 0;
            self.state.message_seq_out[slot] = 0;
            self.state.message_seq_in[slot] = 0;
            if peer != rank {
                self.links.adopt(peer, true);
            }
        }
        for communicator in self.state.comms.iter_mut().flatten() {
            communicator.members_on_shared_memory = None;
        }
        self.shared_memory.enabled = false;
        self.notices_seen = 0;
        self.watch_notices(notices);
        old
    }
}
