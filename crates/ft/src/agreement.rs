//! Uniform fault-tolerant agreement among the members of one communicator
//! (`MPIX_Comm_agree`, and the failed set and context id `MPIX_Comm_shrink`
//! needs), as a sans-IO state machine: messages and failure notices in,
//! messages to send and a decision out.
//!
//! Why this protocol. ULFM's agree must be *uniform*: every process that
//! returns, including one that returns and then dies, returns the same
//! value and the same error, whoever dies during the call. The failure
//! notices resmpi gets come from the launcher's `waitpid` (or the network
//! declaring a peer gone, after which nothing of it is delivered), so they
//! behave as a perfect failure detector: a process reported failed is dead,
//! and every death is eventually reported to every survivor. With that, a
//! coordinator protocol with takeover is enough and much simpler to get
//! right than the early-returning agreement of Herault et al. (SC'15),
//! which needs a tree and its repair:
//!
//! - the **coordinator** is the lowest participant not known to have
//!   failed; each participant sends it a `Report` (its flag, the failures
//!   it knows, the failures it acknowledged, its next free context id) and
//!   sends the report again to the next coordinator when the current one
//!   is reported dead;
//! - a coordinator that has **accepted** a proposal before proposes that
//!   one again; otherwise it waits for the reports of every participant it
//!   does not know dead and computes a fresh decision (AND of the flags,
//!   union of the failed sets plus what it knows now, intersection of the
//!   acknowledged sets, largest context id);
//! - it sends `Propose(ballot = its own index, decision)`; a participant
//!   accepts a proposal whose ballot is at least the one it accepted last,
//!   and answers `Ack`;
//! - once every participant it does not know dead acknowledged, the
//!   coordinator decides and sends `Decide` to all of them.
//!
//! Safety: a decision at ballot `b` needs the acceptance of every process
//! alive at that moment, so every later coordinator (alive then) has
//! accepted it, and proposes it again: nothing else can ever be decided.
//! If the next coordinator has accepted nothing, nothing was decided
//! anywhere, and a fresh decision is safe. Termination: each coordinator
//! waits only for processes it does not know dead, and every death is
//! eventually reported. A participant that decided and left may still be
//! asked by a later coordinator: the per-process table
//! ([`crate::ulfm::AgreementTable`]) answers for decided instances from
//! its history.
//!
//! `crates/sim` (`agreement_sweep`) runs this machine for every
//! participant with a crash injected before every message index of every
//! participant, and one or two deaths, and checks uniform agreement,
//! validity and termination.

use std::collections::VecDeque;

use crate::member_set::MemberSet;

/// What one participant brings to an agreement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contribution {
    /// The value; the decision holds the bitwise AND of the flags.
    pub flag: i32,
    /// Participants this process knows to have failed.
    pub failed: MemberSet,
    /// Participants whose failure this process acknowledged.
    pub acknowledged: MemberSet,
    /// The lowest context id this process could use for a new
    /// communicator; the decision holds the largest (shrink uses it).
    pub next_context: u32,
}

/// What every participant decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Bitwise AND of the flags of the contributions it was computed from,
    /// of the participants below the split (all of them on an
    /// intra-communicator).
    pub flag: i32,
    /// The same AND over the participants from the split on (an
    /// inter-communicator's second group; all ones when there are none).
    pub second_flag: i32,
    /// Participants known failed when it was computed (union of the
    /// reported sets and what the coordinator knew then).
    pub failed: MemberSet,
    /// Participants whose failure every contributor acknowledged.
    pub acknowledged: MemberSet,
    /// Largest context id of the contributions.
    pub next_context: u32,
}

impl Decision {
    /// The decision computed from the `reports` there are (indexed by
    /// participant; those from `split` on are the second group) plus the
    /// coordinator's `known_failed`.
    fn combine(
        reports: &[Option<Contribution>],
        split: usize,
        known_failed: &MemberSet,
    ) -> Decision {
        let size = known_failed.size();
        let mut decision = Decision {
            flag: !0,
            second_flag: !0,
            failed: known_failed.clone(),
            acknowledged: MemberSet::from_fn(size, |_| true),
            next_context: 0,
        };
        for (index, contribution) in reports.iter().enumerate() {
            let Some(contribution) = contribution else {
                continue;
            };
            if index < split {
                decision.flag &= contribution.flag;
            } else {
                decision.second_flag &= contribution.flag;
            }
            decision.failed.unite(&contribution.failed);
            decision.acknowledged.intersect(&contribution.acknowledged);
            decision.next_context = decision.next_context.max(contribution.next_context);
        }
        decision
    }

    /// Whether a failed participant is not acknowledged by every
    /// contributor: agree then returns `MPIX_ERR_PROC_FAILED` everywhere.
    pub fn has_unacknowledged_failure(&self) -> bool {
        !self.failed.is_subset(&self.acknowledged)
    }
}

/// A message of the protocol, between participants of one agreement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A participant's contribution, to whom it thinks coordinates.
    Report(Contribution),
    /// The coordinator `ballot` (its participant index) proposes a decision.
    Propose {
        /// The proposer's index.
        ballot: u32,
        /// What it proposes.
        decision: Decision,
    },
    /// The sender accepted the proposal of `ballot`.
    Ack {
        /// The proposer's index.
        ballot: u32,
    },
    /// The decision, final.
    Decide(Decision),
}

/// One participant's side of one agreement.
#[derive(Debug)]
pub struct Agreement {
    me: usize,
    size: usize,
    /// Participants from here on are the second group (inter-communicators).
    split: usize,
    known_failed: MemberSet,
    /// Latest report from each participant (own included).
    reports: Vec<Option<Contribution>>,
    /// Last proposal accepted, with its ballot.
    accepted: Option<(u32, Decision)>,
    /// Whom the last report went to (None before the first).
    reported_to: Option<usize>,
    /// This process coordinates and proposed: who acknowledged.
    proposal_acks: Option<MemberSet>,
    decided: Option<Decision>,
    outbox: VecDeque<(usize, Message)>,
}

impl Agreement {
    /// Participant `me` of `size` starts an agreement with `contribution`,
    /// knowing the participants in `known_failed` dead. Participants from
    /// `split` on (`size` for none) form a second group whose flags are
    /// ANDed apart (an inter-communicator's remote or local group).
    pub fn start(
        me: usize,
        size: usize,
        split: usize,
        contribution: Contribution,
        known_failed: MemberSet,
    ) -> Agreement {
        assert!(me < size, "participant {me} of {size}");
        assert!(split <= size, "split {split} of {size}");
        assert_eq!(known_failed.size(), size, "failed set of another size");
        let mut reports = vec![None; size];
        reports[me] = Some(contribution);
        let mut agreement = Agreement {
            me,
            size,
            split,
            known_failed,
            reports,
            accepted: None,
            reported_to: None,
            proposal_acks: None,
            decided: None,
            outbox: VecDeque::new(),
        };
        agreement.step();
        agreement
    }

    /// This participant's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// Participants.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The decision, once reached.
    pub fn decision(&self) -> Option<&Decision> {
        self.decided.as_ref()
    }

    /// A message from participant `from`.
    pub fn handle_message(&mut self, from: usize, message: Message) {
        if from >= self.size || from == self.me {
            return;
        }
        match message {
            Message::Report(contribution) => {
                if contribution.failed.size() != self.size
                    || contribution.acknowledged.size() != self.size
                {
                    return;
                }
                self.reports[from] = Some(contribution);
                if let Some(decision) = &self.decided {
                    // It still waits for a coordinator: tell it the end.
                    self.outbox
                        .push_back((from, Message::Decide(decision.clone())));
                }
            }
            Message::Propose { ballot, decision } => {
                if decision.failed.size() != self.size {
                    return;
                }
                if self.decided.is_some() {
                    // Whatever is proposed now is what was decided (safety).
                    self.outbox.push_back((from, Message::Ack { ballot }));
                    return;
                }
                let newer = self
                    .accepted
                    .as_ref()
                    .is_none_or(|(accepted_ballot, _)| ballot >= *accepted_ballot);
                if newer {
                    self.accepted = Some((ballot, decision));
                    self.outbox.push_back((from, Message::Ack { ballot }));
                }
            }
            Message::Ack { ballot } => {
                if ballot as usize == self.me {
                    if let Some(acks) = &mut self.proposal_acks {
                        acks.insert(from);
                    }
                }
            }
            Message::Decide(decision) => {
                if self.decided.is_none() && decision.failed.size() == self.size {
                    // Whoever reported here took this process for its
                    // coordinator and waits: it learns the end from here.
                    for index in 0..self.size {
                        if index != self.me && index != from && self.reports[index].is_some() {
                            self.outbox
                                .push_back((index, Message::Decide(decision.clone())));
                        }
                    }
                    self.decided = Some(decision);
                }
            }
        }
        self.step();
    }

    /// Participant `participant` is reported dead.
    pub fn handle_failure(&mut self, participant: usize) {
        if participant >= self.size || participant == self.me {
            return;
        }
        self.known_failed.insert(participant);
        self.step();
    }

    /// The next message to send, to a participant index.
    pub fn poll_transmit(&mut self) -> Option<(usize, Message)> {
        self.outbox.pop_front()
    }

    fn live_others(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.size).filter(|&index| index != self.me && !self.known_failed.contains(index))
    }

    fn coordinator(&self) -> usize {
        (0..self.size)
            .find(|&index| !self.known_failed.contains(index))
            .unwrap_or(self.me)
    }

    /// Act on what is known now.
    fn step(&mut self) {
        if self.decided.is_some() {
            return;
        }
        let coordinator = self.coordinator();
        if coordinator != self.me {
            if self.reported_to != Some(coordinator) {
                self.reported_to = Some(coordinator);
                let report = self.reports[self.me].clone().expect("own report");
                self.outbox
                    .push_back((coordinator, Message::Report(report)));
            }
            return;
        }
        if self.proposal_acks.is_none() {
            let decision = match &self.accepted {
                Some((_, decision)) => decision.clone(),
                None => {
                    if self
                        .live_others()
                        .any(|index| self.reports[index].is_none())
                    {
                        return;
                    }
                    Decision::combine(&self.reports, self.split, &self.known_failed)
                }
            };
            let ballot = self.me as u32;
            self.accepted = Some((ballot, decision.clone()));
            self.proposal_acks = Some(MemberSet::empty(self.size));
            let others: Vec<usize> = self.live_others().collect();
            for index in others {
                self.outbox.push_back((
                    index,
                    Message::Propose {
                        ballot,
                        decision: decision.clone(),
                    },
                ));
            }
        }
        let acks = self.proposal_acks.as_ref().expect("proposed above");
        if self.live_others().all(|index| acks.contains(index)) {
            let (_, decision) = self.accepted.clone().expect("accepted its own proposal");
            let others: Vec<usize> = self.live_others().collect();
            for index in others {
                self.outbox
                    .push_back((index, Message::Decide(decision.clone())));
            }
            self.decided = Some(decision);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contribution(size: usize, flag: i32) -> Contribution {
        Contribution {
            flag,
            failed: MemberSet::empty(size),
            acknowledged: MemberSet::empty(size),
            next_context: 4 + flag as u32,
        }
    }

    /// Deliver every message until nobody sends, in order.
    fn run(machines: &mut [Agreement]) {
        loop {
            let mut moved = false;
            for from in 0..machines.len() {
                while let Some((to, message)) = machines[from].poll_transmit() {
                    machines[to].handle_message(from, message);
                    moved = true;
                }
            }
            if !moved {
                return;
            }
        }
    }

    #[test]
    fn without_failures_everyone_decides_the_and_of_the_flags() {
        let size = 4;
        let mut machines: Vec<Agreement> = (0..size)
            .map(|me| {
                Agreement::start(
                    me,
                    size,
                    size,
                    contribution(size, 0b111 ^ (1 << (me % 3))),
                    MemberSet::empty(size),
                )
            })
            .collect();
        run(&mut machines);
        for machine in &machines {
            let decision = machine.decision().expect("decided");
            assert_eq!(decision.flag, 0);
            assert_eq!(decision.next_context, 4 + 6);
            assert!(!decision.has_unacknowledged_failure());
        }
    }

    #[test]
    fn a_dead_coordinator_is_replaced_by_the_next_lowest() {
        let size = 3;
        let mut machines: Vec<Agreement> = (0..size)
            .map(|me| {
                Agreement::start(
                    me,
                    size,
                    size,
                    contribution(size, 1),
                    MemberSet::empty(size),
                )
            })
            .collect();
        // Rank 0 dies before reading anything; 1 and 2 are told.
        while machines[1].poll_transmit().is_some() {}
        while machines[2].poll_transmit().is_some() {}
        machines[1].handle_failure(0);
        machines[2].handle_failure(0);
        let mut survivors = machines.split_off(1);
        // Indexes shift by one in the slice: route by hand.
        loop {
            let mut moved = false;
            for slot in 0..2 {
                while let Some((to, message)) = survivors[slot].poll_transmit() {
                    assert_ne!(to, 0, "nothing goes to the dead");
                    survivors[to - 1].handle_message(slot + 1, message);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        for machine in &survivors {
            let decision = machine.decision().expect("decided");
            assert_eq!(decision.failed.iter().collect::<Vec<_>>(), vec![0]);
            assert!(decision.has_unacknowledged_failure());
        }
    }
}
