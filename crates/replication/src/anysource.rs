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
//!   for that ordinal, sent to every other live replica.
//! - A *follower* defers each wildcard receive until the decision for its
//!   ordinal is in (it may be in already), then posts it pinned to that
//!   source: per-channel FIFO order makes it match the same message the
//!   leader matched. A follower never matches a wildcard freely.
//! - When the leader dies, the next lowest live replica leads. Decisions
//!   the old leader sent may have reached some followers and not others,
//!   so every follower sends the new leader every decision it holds; the
//!   new leader merges them with its own and decides nothing (and matches
//!   no undecided wildcard) until every live follower has answered. It
//!   then sends every decision to every follower (each ignores those it
//!   has) and from then on decides freely. Every decision any live replica
//!   has acted on is thus kept; those nobody alive received are decided
//!   anew, which no live replica can tell apart.
//! - Decisions come only from the current leader: one from a replica that
//!   is no longer the leader (a frame that overtook its death notice the
//!   other way round cannot happen: the channel is FIFO and the notice is
//!   local) is dropped, and a decision that contradicts a known one is
//!   reported ([`AgreementAction::Conflict`]), never applied.
//!
//! Limits (see docs/design.md, "Wildcard agreement"): the leader does not
//! wait for its followers to have a decision before its own receive
//! completes, so a leader that dies between acting on a decision and
//! getting it out of its process may leave effects (messages to its
//! partner replicas) that its successor decides differently; `--sdc`
//! reports such a divergence. Decisions are kept for the job's life (12
//! bytes of payload each) so that a leader change can merge them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What becomes of a wildcard receive when it is posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WildcardPost {
    /// Match freely (the leader).
    AnySource,
    /// Match only this source rank (the decision is in).
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
    /// Deferred receives: ordinal -> the caller's token.
    deferred: BTreeMap<u64, u64>,
    /// The leader's receives posted to match freely: token -> ordinal,
    /// until they match.
    free: BTreeMap<u64, u64>,
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
            deferred: BTreeMap::new(),
            free: BTreeMap::new(),
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
        if let Some(source) = self.decision(ordinal) {
            return WildcardPost::Pin(source);
        }
        if self.decides() {
            self.free.insert(receive, ordinal);
            return WildcardPost::AnySource;
        }
        self.deferred.insert(ordinal, receive);
        WildcardPost::Defer
    }

    /// Receive `receive` matched a message from rank `source`. Only the
    /// leader's free receives make decisions; anything else is ignored.
    pub fn handle_match(&mut self, receive: u64, source: u32) {
        let Some(ordinal) = self.free.remove(&receive) else {
            return;
        };
        self.decisions.insert(ordinal, source);
        for to in self.followers() {
            self.actions.push_back(AgreementAction::SendDecisions {
                to,
                decisions: vec![(ordinal, source)],
            });
        }
    }

    /// Replica `from` of this rank sent `decisions`. Only the current
    /// leader's are taken.
    pub fn handle_decisions(&mut self, from: u32, decisions: &[(u64, u32)]) {
        if !self.is_alive(from) || from != self.leader() || from == self.me {
            return;
        }
        for &(ordinal, source) in decisions {
            self.learn(from, ordinal, source);
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

    /// Take decision (`ordinal`, `source`) from `from`: kept, and a
    /// receive waiting for it released; a contradiction is reported.
    fn learn(&mut self, from: u32, ordinal: u64, source: u32) {
        match self.decisions.get(&ordinal) {
            Some(&held) if held != source => {
                self.actions.push_back(AgreementAction::Conflict {
                    ordinal,
                    held,
                    sent: source,
                    from,
                });
                return;
            }
            Some(_) => return,
            None => {}
        }
        self.decisions.insert(ordinal, source);
        if let Some(receive) = self.deferred.remove(&ordinal) {
            self.actions.push_back(AgreementAction::Release {
                receive,
                source: Some(source),
            });
        }
    }

    /// As a new leader with every live follower's decisions in: send every
    /// decision to every follower, then release the deferred receives
    /// (pinned where decided, free otherwise).
    fn finish_merge_if_done(&mut self) {
        if !self.merging.as_ref().is_some_and(BTreeSet::is_empty) {
            return;
        }
        self.merging = None;
        let decisions = self.all_decisions();
        if !decisions.is_empty() {
            for to in self.followers() {
                self.actions.push_back(AgreementAction::SendDecisions {
                    to,
                    decisions: decisions.clone(),
                });
            }
        }
        for (ordinal, receive) in std::mem::take(&mut self.deferred) {
            let source = self.decision(ordinal);
            if source.is_none() {
                self.free.insert(receive, ordinal);
            }
            self.actions
                .push_back(AgreementAction::Release { receive, source });
        }
    }
}

#[cfg(test)]
mod tests;
