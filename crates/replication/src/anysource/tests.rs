//! The wildcard agreement of one rank's replicas: single steps, then whole
//! seeded runs of R replicas over FIFO channels with the leader (or any
//! replica) killed at every step. Invariant: every live replica matches
//! every ordinal, all with the same source; no decision conflicts.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::*;

fn drain(agreement: &mut WildcardAgreement) -> Vec<AgreementAction> {
    std::iter::from_fn(|| agreement.poll_action()).collect()
}

#[test]
fn the_leader_matches_freely_tells_the_followers_and_holds_until_they_ack() {
    let mut leader = WildcardAgreement::new(0, 3);
    assert_eq!(leader.handle_wildcard_receive(70), WildcardPost::AnySource);
    // The receive may complete before its match is reported.
    assert!(leader.hold_receive(70));
    leader.handle_match(70, 4);
    assert_eq!(
        drain(&mut leader),
        [
            AgreementAction::SendDecisions {
                to: 1,
                decisions: vec![(1, 4)]
            },
            AgreementAction::SendDecisions {
                to: 2,
                decisions: vec![(1, 4)]
            },
        ]
    );
    leader.handle_acks(2, &[1]);
    assert_eq!(drain(&mut leader), [], "replica 1 has not acked");
    leader.handle_acks(1, &[1]);
    assert_eq!(
        drain(&mut leader),
        [
            AgreementAction::SendStable {
                to: 1,
                ordinals: vec![1]
            },
            AgreementAction::SendStable {
                to: 2,
                ordinals: vec![1]
            },
            AgreementAction::ReleaseHeld { receive: 70 },
        ]
    );
    // A pinned or specific receive's match decides nothing, holds nothing.
    leader.handle_match(71, 2);
    assert!(!leader.hold_receive(71));
    assert_eq!(drain(&mut leader), []);
}

#[test]
fn a_leader_alone_holds_nothing() {
    let mut leader = WildcardAgreement::new(1, 2);
    leader.handle_failure(0);
    assert_eq!(leader.handle_wildcard_receive(5), WildcardPost::AnySource);
    assert!(!leader.hold_receive(5));
    leader.handle_match(5, 3);
    assert_eq!(leader.handle_wildcard_receive(6), WildcardPost::AnySource);
    leader.handle_match(6, 2);
    assert!(!leader.hold_receive(6));
    assert_eq!(drain(&mut leader), []);
    assert!(leader.is_stable(1) && leader.is_stable(2));
}

#[test]
fn a_follower_waits_for_the_stable_decision_then_pins() {
    let mut follower = WildcardAgreement::new(1, 2);
    assert_eq!(follower.handle_wildcard_receive(5), WildcardPost::Defer);
    assert_eq!(drain(&mut follower), []);
    follower.handle_decisions(0, &[(1, 3)]);
    assert_eq!(
        drain(&mut follower),
        [AgreementAction::SendAcks {
            to: 0,
            ordinals: vec![1]
        }]
    );
    follower.handle_stable(0, &[1]);
    assert_eq!(
        drain(&mut follower),
        [AgreementAction::Release {
            receive: 5,
            source: Some(3)
        }]
    );
    // A stable decision ahead of the receive: pinned when posted; a
    // decision not stable yet: deferred.
    follower.handle_decisions(0, &[(2, 1)]);
    follower.handle_stable(0, &[2]);
    follower.handle_decisions(0, &[(3, 2)]);
    drain(&mut follower);
    assert_eq!(follower.handle_wildcard_receive(6), WildcardPost::Pin(1));
    assert_eq!(follower.handle_wildcard_receive(7), WildcardPost::Defer);
}

#[test]
fn a_follower_posts_its_wildcards_in_ordinal_order() {
    // The leader matched ordinal 2 before ordinal 1 (its decisions and
    // stable notices come in that order): ordinal 2 still waits for 1.
    let mut follower = WildcardAgreement::new(1, 2);
    assert_eq!(follower.handle_wildcard_receive(21), WildcardPost::Defer);
    assert_eq!(follower.handle_wildcard_receive(22), WildcardPost::Defer);
    follower.handle_decisions(0, &[(2, 4)]);
    follower.handle_stable(0, &[2]);
    drain(&mut follower);
    assert_eq!(follower.deferred_count(), 2);
    // A decided, stable ordinal posted behind a deferred one waits too.
    follower.handle_decisions(0, &[(3, 5)]);
    follower.handle_stable(0, &[3]);
    assert_eq!(follower.handle_wildcard_receive(23), WildcardPost::Defer);
    drain(&mut follower);
    follower.handle_decisions(0, &[(1, 6)]);
    follower.handle_stable(0, &[1]);
    let released: Vec<AgreementAction> = drain(&mut follower)
        .into_iter()
        .filter(|action| matches!(action, AgreementAction::Release { .. }))
        .collect();
    assert_eq!(
        released,
        [
            AgreementAction::Release {
                receive: 21,
                source: Some(6)
            },
            AgreementAction::Release {
                receive: 22,
                source: Some(4)
            },
            AgreementAction::Release {
                receive: 23,
                source: Some(5)
            },
        ]
    );
}

#[test]
fn decisions_from_a_replica_that_does_not_lead_are_dropped() {
    let mut follower = WildcardAgreement::new(2, 3);
    assert_eq!(follower.handle_wildcard_receive(9), WildcardPost::Defer);
    follower.handle_decisions(1, &[(1, 0)]);
    follower.handle_stable(1, &[1]);
    assert_eq!(drain(&mut follower), []);
    assert_eq!(follower.decision(1), None);
}

#[test]
fn a_contradicting_decision_is_reported_not_applied() {
    let mut follower = WildcardAgreement::new(1, 2);
    follower.handle_decisions(0, &[(1, 3)]);
    follower.handle_decisions(0, &[(1, 2)]);
    assert!(drain(&mut follower).contains(&AgreementAction::Conflict {
        ordinal: 1,
        held: 3,
        sent: 2,
        from: 0
    }));
    assert_eq!(follower.decision(1), Some(3));
}

#[test]
fn a_new_leader_merges_what_the_followers_got_before_deciding() {
    // Leader 0 decided ordinals 1 and 2 (1 stable); replica 1 got only 1,
    // replica 2 got both. Replica 1 leads after 0's death: it must learn
    // ordinal 2 from replica 2, not decide it anew, and make it stable.
    let mut new_leader = WildcardAgreement::new(1, 3);
    new_leader.handle_decisions(0, &[(1, 5)]);
    new_leader.handle_stable(0, &[1]);
    assert_eq!(new_leader.handle_wildcard_receive(11), WildcardPost::Pin(5));
    assert_eq!(new_leader.handle_wildcard_receive(12), WildcardPost::Defer);
    drain(&mut new_leader);
    new_leader.handle_failure(0);
    assert!(!new_leader.decides(), "merging");
    assert_eq!(drain(&mut new_leader), []);
    assert_eq!(new_leader.handle_wildcard_receive(13), WildcardPost::Defer);

    let mut follower = WildcardAgreement::new(2, 3);
    follower.handle_decisions(0, &[(1, 5)]);
    follower.handle_stable(0, &[1]);
    follower.handle_decisions(0, &[(2, 7)]);
    drain(&mut follower);
    follower.handle_failure(0);
    assert_eq!(
        drain(&mut follower),
        [AgreementAction::SendSync {
            to: 1,
            decisions: vec![(1, 5), (2, 7)]
        }]
    );
    new_leader.handle_sync(2, &[(1, 5), (2, 7)]);
    assert!(new_leader.decides());
    assert_eq!(
        drain(&mut new_leader),
        [
            AgreementAction::SendDecisions {
                to: 2,
                decisions: vec![(1, 5), (2, 7)]
            },
            AgreementAction::SendStable {
                to: 2,
                ordinals: vec![1]
            },
        ]
    );
    // Ordinal 2 waits for replica 2's ack before anyone receives by it,
    // and ordinal 3 (undecided) waits behind it.
    follower.handle_decisions(1, &[(1, 5), (2, 7)]);
    assert_eq!(
        drain(&mut follower),
        [AgreementAction::SendAcks {
            to: 1,
            ordinals: vec![1, 2]
        }]
    );
    new_leader.handle_acks(2, &[1, 2]);
    assert_eq!(
        drain(&mut new_leader),
        [
            AgreementAction::SendStable {
                to: 2,
                ordinals: vec![2]
            },
            AgreementAction::Release {
                receive: 12,
                source: Some(7)
            },
            AgreementAction::Release {
                receive: 13,
                source: None
            },
        ]
    );
    // Ordinal 3 is the new leader's to decide.
    new_leader.handle_match(13, 4);
    assert_eq!(
        drain(&mut new_leader),
        [AgreementAction::SendDecisions {
            to: 2,
            decisions: vec![(3, 4)]
        }]
    );
    assert!(new_leader.hold_receive(13));
}

#[test]
fn a_follower_that_dies_during_the_merge_or_before_acking_is_not_waited_for() {
    let mut new_leader = WildcardAgreement::new(1, 3);
    assert_eq!(new_leader.handle_wildcard_receive(1), WildcardPost::Defer);
    new_leader.handle_failure(0);
    assert!(!new_leader.decides());
    new_leader.handle_failure(2);
    assert!(new_leader.decides());
    assert_eq!(
        drain(&mut new_leader),
        [AgreementAction::Release {
            receive: 1,
            source: None
        }]
    );
    let mut leader = WildcardAgreement::new(0, 2);
    assert_eq!(leader.handle_wildcard_receive(8), WildcardPost::AnySource);
    leader.handle_match(8, 1);
    assert!(leader.hold_receive(8));
    drain(&mut leader);
    leader.handle_failure(1);
    assert_eq!(
        drain(&mut leader),
        [AgreementAction::ReleaseHeld { receive: 8 }]
    );
}

#[test]
fn a_sync_that_comes_before_the_new_leaders_own_notice_is_kept() {
    let mut new_leader = WildcardAgreement::new(1, 3);
    assert_eq!(new_leader.handle_wildcard_receive(1), WildcardPost::Defer);
    // Replica 2 learned of 0's death first; its decisions are in before
    // replica 1 learns it leads.
    new_leader.handle_sync(2, &[(1, 6)]);
    assert_eq!(drain(&mut new_leader), []);
    new_leader.handle_failure(0);
    assert!(new_leader.decides(), "replica 2 is not waited for again");
    assert_eq!(
        drain(&mut new_leader),
        [AgreementAction::SendDecisions {
            to: 2,
            decisions: vec![(1, 6)]
        }]
    );
    new_leader.handle_acks(2, &[1]);
    assert_eq!(
        drain(&mut new_leader),
        [
            AgreementAction::SendStable {
                to: 2,
                ordinals: vec![1]
            },
            AgreementAction::Release {
                receive: 1,
                source: Some(6)
            },
        ]
    );
}

/// A frame in flight.
#[derive(Clone, Debug)]
enum Frame {
    Decisions(Vec<(u64, u32)>),
    Sync(Vec<(u64, u32)>),
    Acks(Vec<u64>),
    Stable(Vec<u64>),
}

/// Where a posted receive stands in a whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Posted {
    Deferred,
    Free,
    Pinned(u32),
    /// Matched this source, held until its decision is stable.
    Held(u32),
}

/// Whole runs: `replica_count` replicas post `ordinals` wildcard receives,
/// `outstanding` at a time, over per-pair FIFO channels, in a seeded
/// order; `kills` die at their steps (a random suffix of what each sent
/// is lost), and each survivor learns of a death after a random delay.
/// A free receive matches a source of its replica's own (they differ).
struct Run {
    agreements: Vec<WildcardAgreement>,
    alive: Vec<bool>,
    /// (from, to) -> frames in flight.
    channels: BTreeMap<(u32, u32), VecDeque<Frame>>,
    /// Per replica: posted receives (token = ordinal).
    posted: Vec<BTreeMap<u64, Posted>>,
    /// Per replica, dead ones included: ordinal -> the source its receive
    /// completed with (what the application acted on).
    completed: Vec<BTreeMap<u64, u32>>,
    /// Per replica: next ordinal to post.
    next: Vec<u64>,
    /// Failure notices not yet delivered: (step, survivor, dead).
    notices: Vec<(u64, u32, u32)>,
    conflicts: usize,
    rng: u64,
}

impl Run {
    fn random(&mut self, below: u64) -> u64 {
        // SplitMix64.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % below.max(1)
    }

    fn send(&mut self, from: u32, to: u32, frame: Frame) {
        self.channels
            .entry((from, to))
            .or_default()
            .push_back(frame);
    }

    fn carry_out(&mut self, replica: u32) {
        let r = replica as usize;
        while let Some(action) = self.agreements[r].poll_action() {
            match action {
                AgreementAction::SendDecisions { to, decisions } => {
                    self.send(replica, to, Frame::Decisions(decisions))
                }
                AgreementAction::SendSync { to, decisions } => {
                    self.send(replica, to, Frame::Sync(decisions))
                }
                AgreementAction::SendAcks { to, ordinals } => {
                    self.send(replica, to, Frame::Acks(ordinals))
                }
                AgreementAction::SendStable { to, ordinals } => {
                    self.send(replica, to, Frame::Stable(ordinals))
                }
                AgreementAction::Release { receive, source } => {
                    let how = source.map_or(Posted::Free, Posted::Pinned);
                    assert_eq!(self.posted[r].insert(receive, how), Some(Posted::Deferred));
                }
                AgreementAction::ReleaseHeld { receive } => {
                    let Some(Posted::Held(source)) = self.posted[r].remove(&receive) else {
                        panic!("released {receive}, which is not held");
                    };
                    self.completed[r].insert(receive, source);
                }
                AgreementAction::Conflict { .. } => self.conflicts += 1,
            }
        }
    }

    /// A posted receive that can match now matches (pinned: its source;
    /// free: one of this replica's own), as the engine reports it: the
    /// match and the completion (asking for a hold) in either order.
    fn match_one(&mut self, replica: u32) {
        let r = replica as usize;
        let ready: Vec<(u64, Posted)> = self.posted[r]
            .iter()
            .filter(|(_, how)| matches!(how, Posted::Free | Posted::Pinned(_)))
            .map(|(&o, &h)| (o, h))
            .collect();
        if ready.is_empty() {
            return;
        }
        let (ordinal, how) = ready[self.random(ready.len() as u64) as usize];
        let source = match how {
            Posted::Pinned(source) => source,
            _ => self.random(5) as u32 + 10 * replica,
        };
        let hold_first = self.random(2) == 0;
        let agreement = &mut self.agreements[r];
        let held = if hold_first {
            let held = agreement.hold_receive(ordinal);
            agreement.handle_match(ordinal, source);
            held
        } else {
            agreement.handle_match(ordinal, source);
            agreement.hold_receive(ordinal)
        };
        if held {
            self.posted[r].insert(ordinal, Posted::Held(source));
        } else {
            self.posted[r].remove(&ordinal);
            self.completed[r].insert(ordinal, source);
        }
        self.carry_out(replica);
    }

    /// One random event; false when nothing is left to do.
    fn step(&mut self, step: u64, ordinals: u64, outstanding: usize) -> bool {
        let channels: Vec<(u32, u32)> = self
            .channels
            .iter()
            .filter(|(&(_, to), frames)| !frames.is_empty() && self.alive[to as usize])
            .map(|(&key, _)| key)
            .collect();
        let due: Vec<usize> = (0..self.notices.len())
            .filter(|&i| self.notices[i].0 <= step)
            .collect();
        let busy = (0..self.agreements.len()).any(|r| {
            self.alive[r]
                && ((self.next[r] <= ordinals && self.posted[r].len() < outstanding)
                    || self.posted[r]
                        .values()
                        .any(|how| matches!(how, Posted::Free | Posted::Pinned(_))))
        });
        if !busy && channels.is_empty() && self.notices.is_empty() {
            return false;
        }
        let pick = self.random(3);
        if pick == 0 && !due.is_empty() {
            let (_, survivor, dead) = self.notices.remove(due[0]);
            if self.alive[survivor as usize] {
                self.agreements[survivor as usize].handle_failure(dead);
                self.carry_out(survivor);
            }
        } else if pick == 1 && !channels.is_empty() {
            let (from, to) = channels[self.random(channels.len() as u64) as usize];
            let frame = self
                .channels
                .get_mut(&(from, to))
                .and_then(VecDeque::pop_front)
                .expect("non-empty");
            let agreement = &mut self.agreements[to as usize];
            match &frame {
                Frame::Decisions(decisions) => agreement.handle_decisions(from, decisions),
                Frame::Sync(decisions) => agreement.handle_sync(from, decisions),
                Frame::Acks(ordinals) => agreement.handle_acks(from, ordinals),
                Frame::Stable(ordinals) => agreement.handle_stable(from, ordinals),
            }
            self.carry_out(to);
        } else {
            let replica = self.random(self.agreements.len() as u64) as u32;
            let r = replica as usize;
            if !self.alive[r] {
                return true;
            }
            let can_post = self.next[r] <= ordinals && self.posted[r].len() < outstanding;
            if can_post && self.random(2) == 0 {
                let ordinal = self.next[r];
                self.next[r] += 1;
                let how = match self.agreements[r].handle_wildcard_receive(ordinal) {
                    WildcardPost::AnySource => Posted::Free,
                    WildcardPost::Pin(source) => Posted::Pinned(source),
                    WildcardPost::Defer => Posted::Deferred,
                };
                self.posted[r].insert(ordinal, how);
                self.carry_out(replica);
            } else {
                self.match_one(replica);
            }
        }
        true
    }

    fn kill(&mut self, dead: u32, step: u64) {
        self.alive[dead as usize] = false;
        let replica_count = self.agreements.len() as u32;
        for to in 0..replica_count {
            let lost = self.random(3) as usize;
            if let Some(frames) = self.channels.get_mut(&(dead, to)) {
                let keep = frames.len().saturating_sub(lost);
                frames.truncate(keep);
            }
            if to != dead {
                let delay = self.random(30);
                self.notices.push((step + delay, to, dead));
            }
        }
    }
}

/// Runs one seeded job and checks: no conflict, no hang; every live
/// replica completes every ordinal; and for every ordinal, every replica
/// that completed it, dead or alive, did so with the same source (what a
/// replica acted on before it died is what the survivors do).
fn run(seed: u64, replica_count: u32, ordinals: u64, outstanding: usize, kills: &[(u32, u64)]) {
    let replicas = replica_count as usize;
    let mut run = Run {
        agreements: (0..replica_count)
            .map(|me| WildcardAgreement::new(me, replica_count))
            .collect(),
        alive: vec![true; replicas],
        channels: BTreeMap::new(),
        posted: vec![BTreeMap::new(); replicas],
        completed: vec![BTreeMap::new(); replicas],
        next: vec![1; replicas],
        notices: Vec::new(),
        conflicts: 0,
        rng: seed,
    };
    let mut step = 0;
    loop {
        for &(dead, at) in kills {
            if at == step && run.alive[dead as usize] {
                run.kill(dead, step);
            }
        }
        if !run.step(step, ordinals, outstanding) {
            break;
        }
        step += 1;
        assert!(step < 100_000, "seed {seed}: no progress (a hang)");
    }
    assert_eq!(run.conflicts, 0, "seed {seed}: conflicting decisions");
    for r in (0..replicas).filter(|&r| run.alive[r]) {
        assert_eq!(
            run.completed[r].len() as u64,
            ordinals,
            "seed {seed}: replica {r} did not complete every wildcard: {:?}",
            run.posted[r]
        );
    }
    for ordinal in 1..=ordinals {
        let sources: BTreeSet<u32> = run
            .completed
            .iter()
            .filter_map(|completed| completed.get(&ordinal).copied())
            .collect();
        assert!(
            sources.len() <= 1,
            "seed {seed}: wildcard {ordinal} completed with sources {sources:?} in different replicas: {:?}",
            run.completed
        );
    }
}

#[test]
fn fault_free_replicas_agree_on_every_wildcard() {
    for seed in 0..200 {
        for replica_count in [2, 3] {
            run(seed, replica_count, 20, 1 + (seed % 3) as usize, &[]);
        }
    }
}

#[test]
fn the_leader_killed_at_every_step_is_masked() {
    for seed in 0..400u64 {
        for replica_count in [2, 3] {
            let step = seed % 200;
            run(
                seed,
                replica_count,
                20,
                1 + (seed % 3) as usize,
                &[(0, step)],
            );
        }
    }
}

#[test]
fn any_replica_and_then_the_next_leader_killed_are_masked() {
    for seed in 0..400u64 {
        let first = (seed % 3) as u32;
        let kills = [(first, seed % 150), ((first + 1) % 3, seed * 7 % 200)];
        run(seed, 3, 20, 1 + (seed % 2) as usize, &kills);
        run(seed, 4, 20, 2, &kills);
    }
}

#[test]
fn two_leaders_killed_close_together_leave_no_trace_of_their_choices() {
    // The old leader and its successor die within a few steps: what
    // either acted on must be what the last replica does.
    for seed in 0..400u64 {
        let at = seed % 180;
        run(
            seed,
            3,
            20,
            1 + (seed % 3) as usize,
            &[(0, at), (1, at + seed % 7)],
        );
    }
}
