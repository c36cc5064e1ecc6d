//! Recovery of a lost replica (issue 12 item 5): the substitute of a dead
//! replica forks a new one, which re-joins the job in its place.
//!
//! Why these rules. SDR-MPI recovers only for R = 2 and decides what the
//! new replica must receive from the timing of one broadcast. Here the
//! per-channel logical numbers decide it, so the same rules hold for any R
//! and for several ranks recovering at once:
//!
//! - **The cut.** The fork copies the forker's state, so the new replica
//!   has delivered exactly what the forker had (`ForkCut::delivered`, per
//!   source rank) and made exactly its sends (`ForkCut::sent`, per
//!   destination rank). A copy of a send still pending in the forker is
//!   the forker's to transmit; the new replica only waits for its acks
//!   (and transmits its own share if the forker dies first).
//! - **Re-join.** Every other process learns of the new replica from a
//!   notice ([`Replica::handle_rejoin`]), after the death notice of the
//!   replica it replaces, in the order the launcher sent them; the
//!   transport takes nothing from a new incarnation before that notice
//!   (its connection is accepted then). A sender counts its sends up to
//!   `delivered` as acked by the new replica and transmits the later ones
//!   still pending to it when it sends for that replica index. The new
//!   replica's counterparts (its replica index in other ranks) receive
//!   from it from then on: it first re-sends them the copies they lack
//!   (past what their welcome says they delivered, up to `sent`), so the
//!   forker's last messages and its own first ones cannot cross.
//! - **Welcome.** Each process then tells the new replica and its forker
//!   ([`Action::Welcome`]) how far it has delivered from their rank: for
//!   the new replica a cumulative ack of the copies of the forker's
//!   pending sends. Until a process has welcomed it, the new replica
//!   transmits nothing to it, and the forker holds back its acks and
//!   welcomes to it. The held acks make the cut exact: a send made after
//!   the fork to the new replica's rank cannot complete (and be forgotten
//!   by its sender) before its sender knows the new replica, which must
//!   get it too. A process that re-joins later without knowing the new
//!   replica (its own forker did not) is waited for too.
//!
//! Only the protocol is here; the simulator (`resmpi-sim`'s
//! `replication_job`) runs it with forks, re-joins and kills at every
//! step, and the engine drives it under `--replica-recovery now`
//! (`resmpi_core`'s `replica_fork.rs`, the interceptor's `fork`).

use std::collections::{BTreeMap, BTreeSet};

use crate::{Action, PendingSend, Process, Replica};

/// Where a forked replica starts: its forker's channel positions and
/// knowledge at the fork.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkCut {
    /// The new replica (the dead one's rank and replica index).
    pub joined: Process,
    /// Its incarnation (one more than the dead one's).
    pub incarnation: u32,
    /// The replica index of the forker (the dead one's substitute).
    pub forker: u32,
    /// Per source rank: the last logical number the forker had delivered.
    pub delivered: Vec<u64>,
    /// Per destination rank: the last logical number the forker had sent.
    pub sent: Vec<u64>,
    /// Per process (`rank * R + replica`): the incarnation the forker knew
    /// alive, if any; the new replica starts knowing the same.
    pub known: Vec<Option<u32>>,
}

impl ForkCut {
    /// The cut as bytes, for the re-join notice the launcher relays (all
    /// little-endian: joined rank, replica, incarnation, forker, then each
    /// list as a u32 length and its entries; `known` entries as a flag
    /// byte and an incarnation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for word in [
            self.joined.rank,
            self.joined.replica,
            self.incarnation,
            self.forker,
        ] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        for list in [&self.delivered, &self.sent] {
            bytes.extend_from_slice(&(list.len() as u32).to_le_bytes());
            for value in list.iter() {
                bytes.extend_from_slice(&value.to_le_bytes());
            }
        }
        bytes.extend_from_slice(&(self.known.len() as u32).to_le_bytes());
        for known in &self.known {
            bytes.push(u8::from(known.is_some()));
            bytes.extend_from_slice(&known.unwrap_or(0).to_le_bytes());
        }
        bytes
    }

    /// The cut [`ForkCut::to_bytes`] wrote; None if malformed.
    pub fn from_bytes(bytes: &[u8]) -> Option<ForkCut> {
        let mut rest = bytes;
        let mut take = |count: usize| -> Option<&[u8]> {
            let (head, tail) = (rest.get(..count)?, rest.get(count..)?);
            rest = tail;
            Some(head)
        };
        let u32_at = |slice: &[u8]| u32::from_le_bytes(slice.try_into().expect("4 bytes"));
        let u64_at = |slice: &[u8]| u64::from_le_bytes(slice.try_into().expect("8 bytes"));
        let joined = Process {
            rank: u32_at(take(4)?),
            replica: u32_at(take(4)?),
        };
        let incarnation = u32_at(take(4)?);
        let forker = u32_at(take(4)?);
        let mut lists = [Vec::new(), Vec::new()];
        for list in lists.iter_mut() {
            let count = u32_at(take(4)?) as usize;
            for _ in 0..count {
                list.push(u64_at(take(8)?));
            }
        }
        let count = u32_at(take(4)?) as usize;
        let mut known = Vec::with_capacity(count);
        for _ in 0..count {
            let flag = take(1)?[0];
            let incarnation = u32_at(take(4)?);
            known.push((flag != 0).then_some(incarnation));
        }
        if !rest.is_empty() {
            return None;
        }
        let [delivered, sent] = lists;
        Some(ForkCut {
            joined,
            incarnation,
            forker,
            delivered,
            sent,
            known,
        })
    }

    fn forker_process(&self) -> Process {
        Process {
            rank: self.joined.rank,
            replica: self.forker,
        }
    }
}

impl Replica {
    /// Whether this process may fork a replacement for its rank's replica
    /// `replica`: that one is dead, this process is its substitute, and
    /// its own re-join (or that of the last replica it forked) is over, so
    /// every other process knows it (the new replica's protection rests
    /// on the forker's held acks counting at every sender).
    pub fn can_fork(&self, replica: u32) -> bool {
        self.may_fork(replica) && !self.is_rejoining()
    }

    /// Whether this process is to fork replica `replica` of its rank, now
    /// or once [`Replica::can_fork`] allows it.
    pub fn may_fork(&self, replica: u32) -> bool {
        let dead = Process {
            rank: self.me.rank,
            replica,
        };
        replica != self.me.replica
            && replica < self.replica_count
            && !self.is_alive(dead)
            && self.substitute[replica as usize] == self.me.replica
    }

    /// This process forks a new replica `replica` of its rank (see
    /// [`Replica::can_fork`]): returns the new replica's protocol state
    /// and the cut that every other process gets in a re-join notice.
    /// From now on the new replica sends for `replica`; this process keeps
    /// the transmissions it made for it so far.
    pub fn fork(&mut self, replica: u32) -> (Replica, ForkCut) {
        assert!(self.can_fork(replica), "fork of replica {replica}");
        let joined = Process {
            rank: self.me.rank,
            replica,
        };
        let index = self.index(joined);
        let incarnation = self.incarnation[index] + 1;
        let cut = ForkCut {
            joined,
            incarnation,
            forker: self.me.replica,
            delivered: self.last_seq_in.clone(),
            sent: self.last_seq_out.clone(),
            known: self
                .alive
                .iter()
                .zip(&self.incarnation)
                .map(|(&alive, &incarnation)| alive.then_some(incarnation))
                .collect(),
        };
        let others: BTreeSet<Process> = self
            .all_processes()
            .filter(|&process| process != self.me && process != joined && self.is_alive(process))
            .collect();
        self.alive[index] = true;
        self.incarnation[index] = incarnation;
        self.substitute[replica as usize] = replica;
        let mut child = self.clone();
        self.joining.insert(joined, others.clone());

        child.me = joined;
        child.sent_at_fork = cut.sent.clone();
        child.actions.clear();
        // The forker's obligations stay the forker's: its held acks, the
        // welcomes it owes, the re-joins of replicas it forked.
        child.held_out.clear();
        child.joining = BTreeMap::from([(joined, others)]);
        // Acks went to the forker, not to this replica (its peers counted
        // it dead): the welcomes' cumulative acks stand for them.
        // The forker's transmissions stay the forker's (out, for the
        // copy's completion, which waits for every replica's ack).
        child.early_acks.clear();
        child.ack_floor.clear();
        for pending in child.pending.values_mut() {
            *pending = PendingSend {
                transmissions: pending.transmissions.keys().map(|&r| (r, true)).collect(),
                acked_by: BTreeSet::new(),
            };
        }
        for rank in 0..self.rank_count {
            if rank != self.me.rank {
                child.source_replica[rank as usize] = child.sender_for(rank, replica);
            }
        }
        // Sends to their own rank: both have delivered them up to the cut,
        // and neither gets a welcome from the other.
        let own = self.me.rank;
        let delivered = cut.delivered[own as usize];
        let forker_replica = self.me.replica;
        for (replica, process) in [(joined.replica, &mut *self), (forker_replica, &mut child)] {
            process.ack_floor.insert((own, replica), delivered);
            process
                .ack_floor
                .insert((own, process.me.replica), delivered);
            let me = process.me.replica;
            process.acked_up_to(own, &[replica, me], delivered);
        }
        // The new replica sends for itself now: what the forker sent its
        // own rank after the cut, with the new replica dead, it sends
        // itself.
        for send in child.pending_to(own, delivered + 1..=u64::MAX) {
            let pending = child.pending.get_mut(&send).expect("listed above");
            if let std::collections::btree_map::Entry::Vacant(entry) =
                pending.transmissions.entry(replica)
            {
                entry.insert(false);
                child.emit(Action::Transmit { send, to: joined });
            }
        }
        (child, cut)
    }

    fn all_processes(&self) -> impl Iterator<Item = Process> + '_ {
        (0..self.rank_count)
            .flat_map(|rank| (0..self.replica_count).map(move |replica| Process { rank, replica }))
    }

    /// The replica of `rank` believed to send for replica index `replica`:
    /// itself when alive, else the first live one after it, cyclically (the
    /// substitute elections' result when no replica in between re-joined).
    fn sender_for(&self, rank: u32, replica: u32) -> u32 {
        (0..self.replica_count)
            .map(|step| (replica + step) % self.replica_count)
            .find(|&candidate| {
                self.is_alive(Process {
                    rank,
                    replica: candidate,
                })
            })
            .unwrap_or(replica)
    }

    /// A new replica re-joined the job (a notice; after the death notice of
    /// the one it replaces). Repeated notices are ignored.
    pub fn handle_rejoin(&mut self, cut: &ForkCut) {
        let joined = cut.joined;
        let index = self.index(joined);
        if joined == self.me || self.incarnation[index] >= cut.incarnation {
            return;
        }
        self.alive[index] = true;
        self.incarnation[index] = cut.incarnation;
        if joined.rank == self.me.rank {
            self.substitute[joined.replica as usize] = joined.replica;
        }
        // As a sender to its rank: what it has delivered, made or not yet
        // by this process, needs no transmission nor ack.
        let delivered = cut.delivered[self.me.rank as usize];
        let floor = self
            .ack_floor
            .entry((joined.rank, joined.replica))
            .or_default();
        *floor = delivered;
        self.acked_up_to(joined.rank, &[joined.replica], delivered);
        let sent_for = self.replicas_sent_for();
        for send in self.pending_to(joined.rank, delivered + 1..=u64::MAX) {
            let pending = self.pending.get_mut(&send).expect("listed above");
            // An ack of the dead incarnation is no ack of the new one.
            pending.acked_by.remove(&joined.replica);
            if sent_for.contains(&joined.replica)
                && !pending.transmissions.contains_key(&joined.replica)
            {
                pending.transmissions.insert(joined.replica, false);
                self.emit(Action::Transmit { send, to: joined });
            }
            self.complete_if_done(send);
        }
        for (send, acked_by) in self.early_acks.iter_mut() {
            if send.destination == joined.rank && send.logical_seq > delivered {
                acked_by.remove(&joined.replica);
            }
        }
        // A replica this process forked, still re-joining, that the new one
        // does not know: its welcome is awaited too.
        let incarnations = &self.incarnation;
        let me = self.me;
        for (child, waiting) in self.joining.iter_mut() {
            let child_index = (child.rank * self.replica_count + child.replica) as usize;
            if *child != me && cut.known[child_index] != Some(incarnations[child_index]) {
                waiting.insert(joined);
            }
        }
        self.welcome(cut);
    }

    /// Process `from` welcomes the re-joined replica `joined` (this process,
    /// or one it forked) in its incarnation `incarnation`, having delivered
    /// `joined`'s rank's messages up to `delivered`.
    pub fn handle_welcome(
        &mut self,
        from: Process,
        joined: Process,
        incarnation: u32,
        delivered: u64,
    ) {
        if self.incarnation[self.index(joined)] != incarnation || !self.is_alive(joined) {
            return;
        }
        if joined == self.me {
            let floor = self.ack_floor.entry((from.rank, from.replica)).or_default();
            *floor = (*floor).max(delivered);
            self.acked_up_to(from.rank, &[from.replica], delivered);
            // A counterpart that welcomes before it has every copy (the
            // forker died first) gets the rest from this process now,
            // ahead of this process's own later sends (held for it).
            let forker_sent = self.sent_at_fork.get(from.rank as usize).copied();
            if from.replica == self.me.replica && from.rank != self.me.rank {
                let copies = delivered + 1..=forker_sent.unwrap_or(0);
                for send in self.pending_to(from.rank, copies) {
                    let pending = self.pending.get_mut(&send).expect("listed above");
                    pending.transmissions.insert(from.replica, false);
                    self.emit(Action::Transmit { send, to: from });
                }
            }
        }
        // The entry of a replica this process forked stays while it lives,
        // even empty: a process forked before its forker knew the new
        // replica may still re-join, and must welcome it too.
        if let Some(waiting) = self.joining.get_mut(&joined) {
            waiting.remove(&from);
            if waiting.is_empty() && joined == self.me {
                self.joining.remove(&joined);
            }
        }
        self.release_held(from);
    }

    /// Count the sends to `destination` up to logical number `delivered`
    /// as acked by its `replicas`, and complete those that are done.
    fn acked_up_to(&mut self, destination: u32, replicas: &[u32], delivered: u64) {
        for send in self.pending_to(destination, 0..=delivered) {
            if let Some(pending) = self.pending.get_mut(&send) {
                pending.acked_by.extend(replicas);
            }
            self.complete_if_done(send);
        }
    }

    /// Whether this process still re-joins, or holds acks for a replica
    /// it forked.
    pub fn is_rejoining(&self) -> bool {
        self.joining.values().any(|waiting| !waiting.is_empty())
    }

    /// Whether `action` must wait: a re-joining process transmits nothing
    /// to a process that has not welcomed it; a forker sends no ack, nor
    /// welcome to a new replica, to a process that has not welcomed the
    /// replica it forked.
    fn holds(&self, action: &Action) -> bool {
        match *action {
            Action::Transmit { to, .. } => self
                .joining
                .get(&self.me)
                .is_some_and(|waiting| waiting.contains(&to)),
            // A welcome is a cumulative ack only for the new replica
            // itself; its forker just counts it (holding that could make
            // two forkers wait on each other).
            Action::Welcome { to, joined, .. } if to != joined => false,
            Action::Ack { to, .. } | Action::Welcome { to, .. } => self
                .joining
                .iter()
                .any(|(joined, waiting)| *joined != self.me && waiting.contains(&to)),
            _ => false,
        }
    }

    /// Queue `action`, or hold it (see `holds`).
    pub(crate) fn emit(&mut self, action: Action) {
        match action {
            Action::Transmit { to, .. } | Action::Ack { to, .. } | Action::Welcome { to, .. }
                if self.holds(&action) =>
            {
                self.held_out.entry(to).or_default().push(action)
            }
            _ => self.actions.push_back(action),
        }
    }

    /// Queue again what was held for `to`, transmissions first and in
    /// logical order (a re-send of the forker's share may have been held
    /// after a later send of this process's own); what must still wait is
    /// held again.
    fn release_held(&mut self, to: Process) {
        let Some(mut actions) = self.held_out.remove(&to) else {
            return;
        };
        actions.sort_by_key(|action| match action {
            Action::Transmit { send, .. } => (0, send.logical_seq),
            _ => (1, 0),
        });
        for action in actions {
            self.emit(action);
        }
    }

    /// Welcome the re-joined replica of `cut`: tell it and its forker how
    /// far this process has delivered from their rank. Its counterpart
    /// receives from it from now on; what the forker sent before the fork
    /// and this process has not delivered, the new replica re-sends ahead
    /// of its own sends (see `handle_welcome`), so the two cannot cross.
    fn welcome(&mut self, cut: &ForkCut) {
        let joined = cut.joined;
        let counterpart = joined.rank != self.me.rank && joined.replica == self.me.replica;
        if counterpart && self.source_replica[joined.rank as usize] != joined.replica {
            self.source_replica[joined.rank as usize] = joined.replica;
            self.actions.push_back(Action::ReceiveFrom {
                rank: joined.rank,
                replica: joined.replica,
            });
        }
        let delivered = self.last_seq_in[joined.rank as usize];
        let welcome = |to| Action::Welcome {
            to,
            joined,
            incarnation: cut.incarnation,
            delivered,
        };
        self.emit(welcome(joined));
        let forker = cut.forker_process();
        if self.is_alive(forker) && forker != self.me {
            self.emit(welcome(forker));
        }
    }

    /// `dead` died: no welcome is awaited from it, a re-join it was (or
    /// that it forked) is over, and nothing held for it is sent.
    pub(crate) fn forget_joining(&mut self, dead: Process) {
        self.held_out.remove(&dead);
        for waiting in self.joining.values_mut() {
            waiting.remove(&dead);
        }
        self.joining.remove(&dead);
        let me = self.me;
        self.joining
            .retain(|joined, waiting| *joined != me || !waiting.is_empty());
        let held: Vec<Process> = self.held_out.keys().copied().collect();
        for to in held {
            self.release_held(to);
        }
    }

    /// A replica of this process's rank died: transmit to this process's
    /// own counterpart of each destination what it has neither sent it
    /// nor had acked. After a fork that is the forker's share of the sends
    /// pending at the fork; otherwise nothing.
    pub(crate) fn transmit_own_share(&mut self) {
        let own = self.me.replica;
        let sends: Vec<_> = self.pending.keys().copied().collect();
        for send in sends {
            let to = Process {
                rank: send.destination,
                replica: own,
            };
            let alive = self.is_alive(to);
            let recovery = self.recovery;
            let pending = self.pending.get_mut(&send).expect("listed above");
            // With recovery the counterpart's ack says it has it; a
            // transmission may have been the dead forker's, lost with it.
            let sent = pending.transmissions.contains_key(&own) && !recovery;
            if alive && !sent && !pending.acked_by.contains(&own) {
                pending.transmissions.insert(own, false);
                self.emit(Action::Transmit { send, to });
            }
        }
    }
}
