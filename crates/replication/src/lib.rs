//! SDR-MPI's parallel replication protocol (Algorithm 1 of
//! `sdr-mpi-replication`) as a sans-IO state machine, one per process.
//!
//! Why a state machine of its own: the protocol's correctness (every live
//! replica gets every message exactly once, in MPI order, and no send waits
//! for ever) depends on the interleaving of data, acks and failure notices,
//! which real processes reproduce badly. Here nothing sends, reads a clock
//! or draws a random number: the caller hands in what happened
//! (`handle_*`) and takes out what to do ([`Replica::poll_action`]), so
//! `resmpi-sim` runs the same code under every interleaving and a kill at
//! every step, and the engine will drive it through its interceptor hooks.
//!
//! The protocol, for process p = (rank i, replica k), R replicas per rank:
//! - A send of rank i to rank j gets the next logical number of channel
//!   i -> j (the same in every replica of i, since the program is
//!   send-deterministic). It is transmitted to replica l of j for every l
//!   that p sends for (l = k, and every l whose replica of i is dead and
//!   has p as its substitute); from every other live replica of j it waits
//!   for an ack. The send completes when its transmissions are out and
//!   those acks are in.
//! - When a message is in the receiver's library (eager data buffered or
//!   written, rendezvous data landed: `irecvComplete`, not MPI_Wait), the
//!   receiver acks every other live replica of the sender rank. A message
//!   whose logical number was already delivered is a duplicate (a
//!   substitute's re-send): dropped, not acked.
//! - When replica l of rank i dies, every process elects the same
//!   substitute: the first live replica of i after l, cyclically. The
//!   substitute re-sends every send not yet acked by replica l of each
//!   destination and sends for l from then on; everyone else cancels
//!   transmissions to and acks awaited from the dead process, and receives
//!   from rank i from the substitute. When every replica of a rank is
//!   dead, [`Action::RankLost`] says so: the job cannot go on.
//!
//! Bounds: a pending send lives until its acks are in, so the sends held
//! are the application's incomplete sends (bounded by the request table).
//! Acks that arrive before this replica has made the send they acknowledge
//! (a sibling replica ran ahead) are kept in `early_acks`; a sibling can
//! be ahead by at most its own incomplete sends, which need acks from this
//! replica's destinations, so that set is bounded the same way.
#![warn(missing_docs)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub mod anysource;
pub mod divergence;
mod interceptor;
mod recovery;
pub use divergence::SdcPolicy;
pub use interceptor::Replication;
pub use recovery::ForkCut;

/// One process of a replicated job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Process {
    /// MPI rank (of MPI_COMM_WORLD).
    pub rank: u32,
    /// Replica index, 0 to R-1.
    pub replica: u32,
}

impl std::fmt::Display for Process {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "rank {} replica {}", self.rank, self.replica)
    }
}

/// Identifies one application send of this process: its destination rank
/// and its logical number on the channel to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SendId {
    /// Destination rank.
    pub destination: u32,
    /// Logical sequence number on the channel (this rank -> destination),
    /// from 1.
    pub logical_seq: u64,
}

/// What the caller must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Transmit the data of send `send` to process `to`, carrying its
    /// logical number (the payload is the caller's: it keeps it until
    /// [`Action::SendComplete`]). Report the end with
    /// [`Replica::handle_transmitted`].
    Transmit {
        /// Which send.
        send: SendId,
        /// The replica of the destination to transmit to.
        to: Process,
    },
    /// Send an ack of message `logical_seq` of channel (`to.rank` ->
    /// `acking_rank`) to process `to` (a replica of the sender rank).
    Ack {
        /// The replica acknowledged.
        to: Process,
        /// The rank that received the message (this process's).
        acking_rank: u32,
        /// Its logical number.
        logical_seq: u64,
    },
    /// Send `send` is complete: out, and acknowledged by every live replica
    /// of its destination this process did not transmit to.
    SendComplete(SendId),
    /// Receives from `rank` now come from replica `replica` of it.
    ReceiveFrom {
        /// The source rank.
        rank: u32,
        /// Its replica this process now receives from.
        replica: u32,
    },
    /// Every replica of `rank` is dead: the job cannot go on (hand over to
    /// another protocol, or fail naming the rank).
    RankLost(u32),
    /// Tell `to` that this process knows the re-joined replica `joined`
    /// ([`Replica::handle_rejoin`]) and has delivered every message of
    /// `joined`'s rank up to logical number `delivered` (for `joined`
    /// itself a cumulative ack). See [`Replica::handle_welcome`].
    Welcome {
        /// The new replica, or its forker.
        to: Process,
        /// The re-joined replica.
        joined: Process,
        /// Its incarnation (0 for the first process of its place).
        incarnation: u32,
        /// The last message of `joined.rank` this process delivered.
        delivered: u64,
    },
}

/// A pending send for diagnostics: its id, the replicas of its
/// destination transmitted to (and whether out), those whose ack is in.
pub type PendingSummary = (SendId, Vec<(u32, bool)>, Vec<u32>);

/// What became of an arrived message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// New: deliver it to the matching engine (acks are queued).
    Deliver,
    /// Its logical number was delivered already (a substitute's re-send of
    /// what the dead replica had sent): drop it.
    Duplicate,
    /// It skips logical numbers not delivered yet, which per-channel FIFO
    /// order rules out: a protocol or transport bug, never dropped
    /// silently.
    OutOfOrder {
        /// The number expected next.
        expected: u64,
    },
}

/// A send not complete yet.
#[derive(Clone, Debug, Default)]
struct PendingSend {
    /// Replicas of the destination transmitted to, and whether each
    /// transmission is out.
    transmissions: BTreeMap<u32, bool>,
    /// Replicas of the destination whose ack is in.
    acked_by: BTreeSet<u32>,
}

/// The protocol state of one process.
#[derive(Clone, Debug)]
pub struct Replica {
    me: Process,
    rank_count: u32,
    replica_count: u32,
    /// Lost replicas are recovered ([`Replica::with_recovery`]): receivers
    /// ack every replica of the sender rank, the one they got it from
    /// too, and a send completes only once every live replica of its
    /// destination has it.
    recovery: bool,
    /// Per process (`rank * replica_count + replica`): still alive.
    alive: Vec<bool>,
    /// Per process: the incarnation this process knows (re-joins count).
    incarnation: Vec<u32>,
    /// Per replica index l of this rank: the replica that sends for l
    /// (l itself while alive).
    substitute: Vec<u32>,
    /// Per source rank: the replica of it this process receives from.
    source_replica: Vec<u32>,
    /// Per destination rank: logical number of the last send to it.
    last_seq_out: Vec<u64>,
    /// Per source rank: logical number of the last message delivered.
    last_seq_in: Vec<u64>,
    /// Sends not complete yet.
    pending: BTreeMap<SendId, PendingSend>,
    /// Acks of sends this replica has not made yet, by send: the replicas
    /// of the destination that acked.
    early_acks: BTreeMap<SendId, BTreeSet<u32>>,
    /// Ranks reported lost.
    lost_ranks: BTreeSet<u32>,
    /// Per (destination rank, replica): every send to that rank up to this
    /// logical number is acked by that replica (a re-joined replica's
    /// cumulative acks, from [`Action::Welcome`]).
    ack_floor: BTreeMap<(u32, u32), u64>,
    /// Per re-joining replica this process forked, or this process itself
    /// while it re-joins: the processes whose welcome is still due.
    joining: BTreeMap<Process, BTreeSet<Process>>,
    /// Actions for a process held until it welcomes (see `recovery`).
    held_out: BTreeMap<Process, Vec<Action>>,
    /// A forked replica: per destination rank, the forker's last send at
    /// the fork (its copies; see `recovery`).
    sent_at_fork: Vec<u64>,
    actions: VecDeque<Action>,
}

impl Replica {
    /// The protocol for process `me` of a job of `rank_count` ranks with
    /// `replica_count` replicas each.
    pub fn new(me: Process, rank_count: u32, replica_count: u32) -> Replica {
        assert!(me.rank < rank_count && me.replica < replica_count);
        let ranks = rank_count as usize;
        Replica {
            me,
            rank_count,
            replica_count,
            recovery: false,
            alive: vec![true; ranks * replica_count as usize],
            incarnation: vec![0; ranks * replica_count as usize],
            substitute: (0..replica_count).collect(),
            source_replica: vec![me.replica; ranks],
            last_seq_out: vec![0; ranks],
            last_seq_in: vec![0; ranks],
            pending: BTreeMap::new(),
            early_acks: BTreeMap::new(),
            lost_ranks: BTreeSet::new(),
            ack_floor: BTreeMap::new(),
            joining: BTreeMap::new(),
            held_out: BTreeMap::new(),
            sent_at_fork: Vec::new(),
            actions: VecDeque::new(),
        }
    }

    /// Recover lost replicas by fork (see `recovery`). A send then
    /// completes only when every live replica of its destination has
    /// acked it (not only those this process did not transmit to): the
    /// new replica's forker may not have the message yet, and only a
    /// sender that still holds it can give it to the new replica.
    pub fn with_recovery(mut self) -> Replica {
        self.recovery = true;
        self
    }

    /// Whether this process has made send `send` (its channel has reached
    /// that logical number).
    pub fn has_sent(&self, send: SendId) -> bool {
        send.logical_seq <= self.last_seq_out[send.destination as usize]
    }

    /// This process.
    pub fn me(&self) -> Process {
        self.me
    }

    /// Whether `process` is believed alive.
    pub fn is_alive(&self, process: Process) -> bool {
        self.alive[self.index(process)]
    }

    /// Sends started and not complete.
    pub fn pending_send_count(&self) -> usize {
        self.pending.len()
    }

    /// The sends not complete yet, for diagnostics: each with the
    /// replicas of its destination transmitted to (and whether out) and
    /// those whose ack is in.
    pub fn pending_sends(&self) -> Vec<PendingSummary> {
        self.pending
            .iter()
            .map(|(send, pending)| {
                (
                    *send,
                    pending
                        .transmissions
                        .iter()
                        .map(|(&r, &o)| (r, o))
                        .collect(),
                    pending.acked_by.iter().copied().collect(),
                )
            })
            .collect()
    }

    /// The replica of `rank` this process receives from.
    pub fn source_replica(&self, rank: u32) -> u32 {
        self.source_replica[rank as usize]
    }

    /// The next thing to do, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The application sends to `destination`: returns the send's id; the
    /// transmissions come out of [`Replica::poll_action`].
    pub fn handle_send(&mut self, destination: u32) -> SendId {
        let seq = &mut self.last_seq_out[destination as usize];
        *seq += 1;
        let send = SendId {
            destination,
            logical_seq: *seq,
        };
        let mut acked_by = self.early_acks.remove(&send).unwrap_or_default();
        acked_by.extend(
            self.ack_floor
                .range((destination, 0)..=(destination, u32::MAX))
                .filter(|(_, &floor)| floor >= send.logical_seq)
                .map(|(&(_, replica), _)| replica),
        );
        let mut pending = PendingSend {
            transmissions: BTreeMap::new(),
            acked_by,
        };
        for replica in self.replicas_sent_for() {
            let to = Process {
                rank: destination,
                replica,
            };
            // A replica of the destination that acked already got it from
            // the sibling this process substitutes for: no second copy.
            if self.is_alive(to) && !pending.acked_by.contains(&replica) {
                pending.transmissions.insert(replica, false);
                self.emit(Action::Transmit { send, to });
            }
        }
        self.pending.insert(send, pending);
        self.complete_if_done(send);
        send
    }

    /// The transmission of `send` to `to` is out.
    pub fn handle_transmitted(&mut self, send: SendId, to: Process) {
        if let Some(pending) = self.pending.get_mut(&send) {
            if let Some(out) = pending.transmissions.get_mut(&to.replica) {
                *out = true;
            }
            self.complete_if_done(send);
        }
    }

    /// A message from process `from` with logical number `logical_seq` is
    /// in this process's library.
    pub fn handle_arrival(&mut self, from: Process, logical_seq: u64) -> Arrival {
        let last = &mut self.last_seq_in[from.rank as usize];
        if logical_seq <= *last {
            if self.recovery && self.is_alive(from) {
                // Its sender may need this process's ack (a re-joined
                // replica's copy of a send this process got from another).
                self.emit(Action::Ack {
                    to: from,
                    acking_rank: self.me.rank,
                    logical_seq,
                });
            }
            return Arrival::Duplicate;
        }
        if logical_seq != *last + 1 {
            return Arrival::OutOfOrder {
                expected: *last + 1,
            };
        }
        *last = logical_seq;
        for replica in 0..self.replica_count {
            let to = Process {
                rank: from.rank,
                replica,
            };
            if (replica != from.replica || self.recovery) && self.is_alive(to) {
                self.emit(Action::Ack {
                    to,
                    acking_rank: self.me.rank,
                    logical_seq,
                });
            }
        }
        Arrival::Deliver
    }

    /// Process `from` (a replica of `destination`) acks this rank's
    /// message `logical_seq` to it.
    pub fn handle_ack(&mut self, from: Process, logical_seq: u64) {
        let send = SendId {
            destination: from.rank,
            logical_seq,
        };
        if let Some(pending) = self.pending.get_mut(&send) {
            pending.acked_by.insert(from.replica);
            self.complete_if_done(send);
        } else if logical_seq > self.last_seq_out[from.rank as usize] {
            self.early_acks
                .entry(send)
                .or_default()
                .insert(from.replica);
        }
        // Else an ack of a complete send (sent before a failure notice
        // made it unnecessary): nothing to do.
    }

    /// Process `dead` has failed (a notice; repeated notices are ignored).
    pub fn handle_failure(&mut self, dead: Process) {
        let index = self.index(dead);
        if !self.alive[index] {
            return;
        }
        self.alive[index] = false;
        self.forget_joining(dead);
        let substitute = self.elect_substitute(dead);
        let Some(substitute) = substitute else {
            if self.lost_ranks.insert(dead.rank) {
                self.actions.push_back(Action::RankLost(dead.rank));
            }
            self.forget(dead);
            return;
        };
        if dead.rank == self.me.rank {
            let taken_over: Vec<u32> = (0..self.replica_count)
                .filter(|&replica| self.substitute[replica as usize] == dead.replica)
                .collect();
            for &replica in &taken_over {
                self.substitute[replica as usize] = substitute;
            }
            if substitute == self.me.replica {
                self.take_over(&taken_over);
            }
            self.transmit_own_share();
        } else if self.source_replica[dead.rank as usize] == dead.replica {
            // This process's own counterpart sends to it when alive (a
            // re-joined one whose welcome is still due); else the
            // substitute.
            let counterpart = Process {
                rank: dead.rank,
                replica: self.me.replica,
            };
            let source = if self.is_alive(counterpart) {
                self.me.replica
            } else {
                substitute
            };
            self.source_replica[dead.rank as usize] = source;
            self.actions.push_back(Action::ReceiveFrom {
                rank: dead.rank,
                replica: source,
            });
        }
        self.forget(dead);
    }

    /// The substitute of `dead`: the first live replica of its rank after
    /// it, cyclically. Every process computes the same from the same
    /// notices, so no election messages are needed.
    fn elect_substitute(&self, dead: Process) -> Option<u32> {
        (1..self.replica_count)
            .map(|step| (dead.replica + step) % self.replica_count)
            .find(|&replica| {
                self.is_alive(Process {
                    rank: dead.rank,
                    replica,
                })
            })
    }

    /// Replica indices of the destination this process transmits to.
    fn replicas_sent_for(&self) -> Vec<u32> {
        (0..self.replica_count)
            .filter(|&replica| self.substitute[replica as usize] == self.me.replica)
            .collect()
    }

    /// This process now sends for the replicas `taken_over` of its rank:
    /// every pending send not acked by (nor transmitted to) those replicas
    /// of its destination is transmitted to them, in logical order.
    fn take_over(&mut self, taken_over: &[u32]) {
        let sends: Vec<SendId> = self.pending.keys().copied().collect();
        for send in sends {
            for &replica in taken_over {
                let to = Process {
                    rank: send.destination,
                    replica,
                };
                if !self.is_alive(to) {
                    continue;
                }
                let pending = self.pending.get_mut(&send).expect("listed above");
                // With recovery a transmission may be a dead forker's (a
                // new replica's copy): only the ack says it arrived.
                if pending.acked_by.contains(&replica)
                    || (pending.transmissions.contains_key(&replica) && !self.recovery)
                {
                    continue;
                }
                pending.transmissions.insert(replica, false);
                self.emit(Action::Transmit { send, to });
            }
        }
    }

    /// Stops waiting on `dead`: its transmissions and awaited acks no
    /// longer hold any send back.
    fn forget(&mut self, dead: Process) {
        for send in self.pending_to(dead.rank, 0..=u64::MAX) {
            if let Some(pending) = self.pending.get_mut(&send) {
                pending.transmissions.remove(&dead.replica);
            }
            self.complete_if_done(send);
        }
    }

    /// The pending sends to `destination` whose logical numbers are in
    /// `logical_seqs`, in logical order.
    fn pending_to(
        &self,
        destination: u32,
        logical_seqs: std::ops::RangeInclusive<u64>,
    ) -> Vec<SendId> {
        let (first, last) = logical_seqs.into_inner();
        if first > last {
            return Vec::new();
        }
        let at = |logical_seq| SendId {
            destination,
            logical_seq,
        };
        self.pending
            .range(at(first)..=at(last))
            .map(|(&send, _)| send)
            .collect()
    }

    fn complete_if_done(&mut self, send: SendId) {
        let Some(pending) = self.pending.get(&send) else {
            return;
        };
        let out = pending.transmissions.values().all(|&out| out);
        let acked = (0..self.replica_count).all(|replica| {
            let from = Process {
                rank: send.destination,
                replica,
            };
            (pending.transmissions.contains_key(&replica) && !self.recovery)
                || pending.acked_by.contains(&replica)
                || !self.is_alive(from)
        });
        if out && acked {
            self.pending.remove(&send);
            self.actions.push_back(Action::SendComplete(send));
        }
    }

    fn index(&self, process: Process) -> usize {
        debug_assert!(process.rank < self.rank_count && process.replica < self.replica_count);
        (process.rank * self.replica_count + process.replica) as usize
    }
}

#[cfg(test)]
mod tests;
