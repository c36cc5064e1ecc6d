//! `--replica-anysource agree`: the replicas of a rank agree on the source
//! of every wildcard (`MPI_ANY_SOURCE`) receive, as a sans-IO state machine
//! ([`WildcardAgreement`]), one per process.
//!
//! Why: SDR-MPI lets each replica match a wildcard receive on its own,
//! which is right only for send-deterministic programs. A program whose
//! sends depend on which source came first (a master that answers workers
//! in arrival order) makes the replicas of a rank diverge. This is the
//! leader-based scheme the paper compares against (its Figure 2, left):
//! one replica decides, the others follow. Like [`crate::Replica`], nothing
//! here sends or reads a clock: the caller hands in what happened
//! (`handle_*`) and takes out what to do ([`WildcardAgreement::poll_action`]),
//! so unit tests drive every interleaving of decisions and deaths.
//!
//! The scheme, for the replicas of one rank:
//! - Every replica numbers its wildcard receives in posting order (the
//!   *ordinal*, from 1); since the replicas run the same program and agree
//!   on every earlier wildcard, the ordinals name the same receive in all.
//! - The *leader* is the lowest live replica. It matches its wildcard
//!   receives freely; when one matches, the source rank is the decision
//!   for that ordinal, sent to every other live replica, which acks it.
//! - A decision is *stable* once every live replica holds it (the leader
//!   has every live follower's ack); the leader then tells the followers
//!   so. No replica acts on a decision before it is stable: the leader's
//!   matched receive is held (not complete,
//!   [`WildcardAgreement::hold_receive`]) and a follower's receive stays
//!   deferred until then, after which the follower posts it pinned to the
//!   decided source (per-channel FIFO order makes it match the message
//!   the leader matched). So whatever any replica, dead or alive, has
//!   acted on is held by every replica alive at that moment. A follower
//!   never matches a wildcard freely.
//! - When the leader dies, the next lowest live replica leads. Every
//!   follower sends it every decision it holds; the new leader merges them
//!   with its own, waiting for every live follower (a follower may learn of
//!   the death, and send, before the new leader does: kept), then sends
//!   the merged decisions to every follower and makes each stable again
//!   (acks, then the stable notice) before anyone acts on one not known
//!   stable; ordinals no live replica holds are decided anew, which no one
//!   can tell apart since no one acted on them.
//! - Decisions and stable notices come only from the current leader: any
//!   other is dropped, and a decision that contradicts a held one is
//!   reported ([`AgreementAction::Conflict`]), never applied.
//!
//! Cost: the leader's wildcard receive completes one round trip to its
//! followers after it matched; a follower's, one and a half. Decisions
//! are kept for the job's life (12 bytes of payload each) so that a
//! leader change can merge them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What becomes of a wildcard receive when it is posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WildcardPost {
    /// Match freely (the leader); ask [`WildcardAgreement::hold_receive`]
    /// when it would complete.
    AnySource,
    /// Match only this source rank (a stable decision is in).
    Pin(u32),
    /// Post nothing until [`AgreementAction::Release`].
    Defer,
}

/// What the caller must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgreementAction {
    /// Send these decisions (ordinal, source rank) to replica `to` of this
    /// rank.
    SendDecisions {
        /// The replica of this rank.
        to: u32,
        /// (ordinal, source rank), ascending.
        decisions: Vec<(u64, u32)>,
    },
    /// Ack the decisions for `ordinals` to the leader `to`.
    SendAcks {
        /// The leader.
        to: u32,
        /// The ordinals acked.
        ordinals: Vec<u64>,
    },
    /// Tell follower `to` that the decisions for `ordinals` are stable.
    SendStable {
        /// The follower.
        to: u32,
        /// The ordinals now stable.
        ordinals: Vec<u64>,
    },
    /// Send every decision this replica holds to the new leader `to`.
    SendSync {
        /// The new leader.
        to: u32,
        /// (ordinal, source rank), ascending.
        decisions: Vec<(u64, u32)>,
    },
    /// Post deferred receive `receive` now, pinned to `source` (a rank), or
    /// matching freely when None (this replica leads now).
    Release {
        /// The caller's token of the receive.
        receive: u64,
        /// The source rank, or None: any.
        source: Option<u32>,
    },
    /// Complete receive `receive`, held since it matched: its decision is
    /// stable.
    ReleaseHeld {
        /// The caller's token of the receive.
        receive: u64,
    },
    /// Replica `from` sent a decision for `ordinal` that contradicts the
    /// one held: a protocol bug, never applied.
    Conflict {
        /// The wildcard's ordinal.
        ordinal: u64,
        /// The source held.
        held: u32,
        /// The source sent.
        sent: u32,
        /// Who sent it.
        from: u32,
    },
}

/// The wildcard agreement of one replica of a rank.
#[derive(Clone, Debug)]
pub struct WildcardAgreement {
    /// This replica's index.
    me: u32,
    /// Per replica of this rank: still alive.
    alive: Vec<bool>,
    /// Ordinal the next wildcard receive gets.
    next_ordinal: u64,
    /// Every decision known: ordinal -> source rank.
    decisions: BTreeMap<u64, u32>,
    /// Ordinals whose decision is known to be held by every live replica.
    stable: BTreeSet<u64>,
    /// As the leader: per decided ordinal not stable yet, the followers
    /// whose ack is not in.
    awaiting: BTreeMap<u64, BTreeSet<u32>>,
    /// Deferred receives: ordinal -> the caller's token.
    deferred: BTreeMap<u64, u64>,
    /// The leader's receives posted to match freely: token -> ordinal,
    /// until they complete.
    free: BTreeMap<u64, u64>,
    /// The leader's receives held until their decision is stable:
    /// ordinal -> token.
    held: BTreeMap<u64, u64>,
    /// As a new leader: the followers whose decisions are not in yet
    /// (None: not merging).
    merging: Option<BTreeSet<u32>>,
    /// Followers whose decisions came in for this replica's leadership
    /// (a follower may learn of the old leader's death, and send them,
    /// before this replica does).
    synced: BTreeSet<u32>,
    actions: VecDeque<AgreementAction>,
}

impl WildcardAgreement {
    /// The agreement of replica `me` of a rank with `replica_count`
    /// replicas, all alive.
    pub fn new(me: u32, replica_count: u32) -> WildcardAgreement {
        assert!(me < replica_count);
        WildcardAgreement {
            me,
            alive: vec![true; replica_count as usize],
            next_ordinal: 1,
            decisions: BTreeMap::new(),
            stable: BTreeSet::new(),
            awaiting: BTreeMap::new(),
            deferred: BTreeMap::new(),
            free: BTreeMap::new(),
            held: BTreeMap::new(),
            merging: None,
            synced: BTreeSet::new(),
            actions: VecDeque::new(),
        }
    }

    /// The replica that leads: the lowest live one.
    pub fn leader(&self) -> u32 {
        self.alive
            .iter()
            .position(|&alive| alive)
            .expect("a replica runs this code, so one is alive") as u32
    }

    /// Whether this replica leads and has merged its predecessor's
    /// decisions: it may match wildcards freely.
    pub fn decides(&self) -> bool {
        self.leader() == self.me && self.merging.is_none()
    }

    /// The decision for `ordinal`, if known.
    pub fn decision(&self, ordinal: u64) -> Option<u32> {
        self.decisions.get(&ordinal).copied()
    }

    /// Whether the decision for `ordinal` is known to be stable.
    pub fn is_stable(&self, ordinal: u64) -> bool {
        self.stable.contains(&ordinal)
    }

    /// Wildcard receives posted and waiting for a decision.
    pub fn deferred_count(&self) -> usize {
        self.deferred.len()
    }

    /// The next thing to do, if any.
    pub fn poll_action(&mut self) -> Option<AgreementAction> {
        self.actions.pop_front()
    }

    /// A wildcard receive (the caller's token `receive`) is posted.
    pub fn handle_wildcard_receive(&mut self, receive: u64) -> WildcardPost {
        let ordinal = self.next_ordinal;
        self.next_ordinal += 1;
        // Behind a deferred receive it waits its turn: posted before it,
        // it could take the message that one's decision names.
        if self.deferred.is_empty() {
            if let Some(source) = self.decision(ordinal) {
                if self.is_stable(ordinal) {
                    return WildcardPost::Pin(source);
                }
            } else if self.decides() {
                self.free.insert(receive, ordinal);
                return WildcardPost::AnySource;
            }
        }
        self.deferred.insert(ordinal, receive);
        WildcardPost::Defer
    }

    /// Receive `receive` matched a message from rank `source`. Only the
    /// leader's free receives make decisions; anything else is ignored.
    pub fn handle_match(&mut self, receive: u64, source: u32) {
        let Some(&ordinal) = self.free.get(&receive) else {
            return;
        };
        if self.decisions.contains_key(&ordinal) {
            return;
        }
        self.decisions.insert(ordinal, source);
        let followers = self.followers();
        for &to in &followers {
            self.actions.push_back(AgreementAction::SendDecisions {
                to,
                decisions: vec![(ordinal, source)],
            });
        }
        self.awaiting
            .insert(ordinal, followers.into_iter().collect());
        self.stabilize_if_acked(ordinal);
        if self.is_stable(ordinal) && !self.held.contains_key(&ordinal) {
            // Alone: nothing to wait for, whether or not it was asked.
            self.free.remove(&receive);
        }
    }

    /// Receive `receive` would complete now: true holds it until
    /// [`AgreementAction::ReleaseHeld`] (a leader's wildcard receive whose
    /// decision is not stable yet; it may not have reported its match
    /// yet either).
    pub fn hold_receive(&mut self, receive: u64) -> bool {
        let Some(&ordinal) = self.free.get(&receive) else {
            return false;
        };
        if self.is_stable(ordinal) {
            self.free.remove(&receive);
            return false;
        }
        if !self.decisions.contains_key(&ordinal) && self.followers().is_empty() {
            // Not matched yet, and alone: its match will be stable at once.
            return false;
        }
        self.held.insert(ordinal, receive);
        true
    }

    /// Replica `from` of this rank sent `decisions`. Only the current
    /// leader's are taken; each is acked.
    pub fn handle_decisions(&mut self, from: u32, decisions: &[(u64, u32)]) {
        if !self.is_alive(from) || from != self.leader() || from == self.me {
            return;
        }
        for &(ordinal, source) in decisions {
            self.learn(from, ordinal, source);
        }
        self.actions.push_back(AgreementAction::SendAcks {
            to: from,
            ordinals: decisions.iter().map(|&(ordinal, _)| ordinal).collect(),
        });
    }

    /// Follower `from` acks the decisions for `ordinals`.
    pub fn handle_acks(&mut self, from: u32, ordinals: &[u64]) {
        if self.leader() != self.me {
            return;
        }
        for &ordinal in ordinals {
            if let Some(waiting) = self.awaiting.get_mut(&ordinal) {
                waiting.remove(&from);
                self.stabilize_if_acked(ordinal);
            }
        }
    }

    /// The leader `from` says the decisions for `ordinals` are stable.
    pub fn handle_stable(&mut self, from: u32, ordinals: &[u64]) {
        if !self.is_alive(from) || from != self.leader() || from == self.me {
            return;
        }
        for &ordinal in ordinals {
            if self.decisions.contains_key(&ordinal) {
                self.mark_stable(ordinal);
            }
        }
    }

    /// Follower `from` sent the decisions it holds to this replica, the
    /// new leader (or the leader once it learns of its predecessor's
    /// death: every decision in it came from a former leader, so it is
    /// taken either way).
    pub fn handle_sync(&mut self, from: u32, decisions: &[(u64, u32)]) {
        if !self.is_alive(from) {
            return;
        }
        for &(ordinal, source) in decisions {
            self.learn(from, ordinal, source);
        }
        self.synced.insert(from);
        if let Some(waiting) = &mut self.merging {
            waiting.remove(&from);
        }
        self.finish_merge_if_done();
    }

    /// Replica `dead` of this rank has failed (repeated notices are
    /// ignored).
    pub fn handle_failure(&mut self, dead: u32) {
        if !self.is_alive(dead) {
            return;
        }
        let leader_before = self.leader();
        self.alive[dead as usize] = false;
        if dead != leader_before {
            if let Some(waiting) = &mut self.merging {
                waiting.remove(&dead);
            }
            let ordinals: Vec<u64> = self.awaiting.keys().copied().collect();
            for ordinal in ordinals {
                if let Some(waiting) = self.awaiting.get_mut(&ordinal) {
                    waiting.remove(&dead);
                }
                self.stabilize_if_acked(ordinal);
            }
            self.finish_merge_if_done();
            return;
        }
        let leader = self.leader();
        if leader == self.me {
            let waiting = self
                .followers()
                .into_iter()
                .filter(|follower| !self.synced.contains(follower))
                .collect();
            self.merging = Some(waiting);
            self.finish_merge_if_done();
        } else {
            self.actions.push_back(AgreementAction::SendSync {
                to: leader,
                decisions: self.all_decisions(),
            });
        }
    }

    fn is_alive(&self, replica: u32) -> bool {
        self.alive.get(replica as usize).copied().unwrap_or(false)
    }

    /// The live replicas of this rank other than this one.
    fn followers(&self) -> Vec<u32> {
        (0..self.alive.len() as u32)
            .filter(|&replica| replica != self.me && self.is_alive(replica))
            .collect()
    }

    fn all_decisions(&self) -> Vec<(u64, u32)> {
        self.decisions.iter().map(|(&o, &s)| (o, s)).collect()
    }

    /// Take decision (`ordinal`, `source`) from `from`: kept; a
    /// contradiction is reported.
    fn learn(&mut self, from: u32, ordinal: u64, source: u32) {
        match self.decisions.get(&ordinal) {
            Some(&held) if held != source => {
                self.actions.push_back(AgreementAction::Conflict {
                    ordinal,
                    held,
                    sent: source,
                    from,
                });
            }
            Some(_) => {}
            None => {
                self.decisions.insert(ordinal, source);
            }
        }
    }

    /// As the leader: `ordinal` is stable once no live follower's ack is
    /// awaited; tell the followers.
    fn stabilize_if_acked(&mut self, ordinal: u64) {
        if !self.awaiting.get(&ordinal).is_some_and(BTreeSet::is_empty) {
            return;
        }
        self.awaiting.remove(&ordinal);
        for to in self.followers() {
            self.actions.push_back(AgreementAction::SendStable {
                to,
                ordinals: vec![ordinal],
            });
        }
        self.mark_stable(ordinal);
    }

    /// `ordinal`'s decision is stable: whatever waits for it goes on.
    fn mark_stable(&mut self, ordinal: u64) {
        if !self.stable.insert(ordinal) {
            return;
        }
        if let Some(receive) = self.held.remove(&ordinal) {
            self.free.remove(&receive);
            self.actions
                .push_back(AgreementAction::ReleaseHeld { receive });
        }
        self.release_ready();
    }

    /// Release the deferred receives in ordinal order, as far as each can
    /// go: pinned once its decision is stable, free when undecided and
    /// this replica decides. In order, because the matcher gives a
    /// message to the receive posted first: a later receive posted ahead
    /// of an earlier one could take the message the earlier one's
    /// decision names.
    fn release_ready(&mut self) {
        while let Some((&ordinal, &receive)) = self.deferred.first_key_value() {
            let source = match self.decision(ordinal) {
                Some(source) if self.is_stable(ordinal) => Some(source),
                None if self.decides() => None,
                _ => return,
            };
            self.deferred.remove(&ordinal);
            if source.is_none() {
                self.free.insert(receive, ordinal);
            }
            self.actions
                .push_back(AgreementAction::Release { receive, source });
        }
    }

    /// As a new leader with every live follower's decisions in: send every
    /// decision to every follower, say again which are stable, and make
    /// the others stable again; release the deferred receives that no
    /// decision holds back, in order (free: this replica decides them).
    fn finish_merge_if_done(&mut self) {
        if !self.merging.as_ref().is_some_and(BTreeSet::is_empty) {
            return;
        }
        self.merging = None;
        let decisions = self.all_decisions();
        let followers = self.followers();
        if !decisions.is_empty() {
            for &to in &followers {
                self.actions.push_back(AgreementAction::SendDecisions {
                    to,
                    decisions: decisions.clone(),
                });
            }
        }
        // A follower may have missed the old leader's word that some of
        // them are stable (it died sending it): say it again after them.
        let stable: Vec<u64> = self.stable.iter().copied().collect();
        if !stable.is_empty() {
            for &to in &followers {
                self.actions.push_back(AgreementAction::SendStable {
                    to,
                    ordinals: stable.clone(),
                });
            }
        }
        let unstable: Vec<u64> = decisions
            .iter()
            .map(|&(ordinal, _)| ordinal)
            .filter(|&ordinal| !self.is_stable(ordinal))
            .collect();
        for ordinal in unstable {
            self.awaiting
                .insert(ordinal, followers.iter().copied().collect());
            self.stabilize_if_acked(ordinal);
        }
        self.release_ready();
    }
}

#[cfg(test)]
mod tests;
