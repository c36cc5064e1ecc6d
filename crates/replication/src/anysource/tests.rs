//! The wildcard agreement of one rank's replicas: single steps, then whole
//! seeded runs of R replicas over FIFO channels with the leader (or any
//! replica) killed at every step. Invariant: every live replica matches
//! every ordinal, all with the same source; no decision conflicts.

use std::collections::{BTreeMap, VecDeque};

use super::*;

fn drain(agreement: &mut WildcardAgreement) -> Vec<AgreementAction> {
    std::iter::from_fn(|| agreement.poll_action()).collect()
}

#[test]
fn the_leader_matches_freely_and_tells_the_followers() {
    let mut leader = WildcardAgreement::new(0, 3);
    assert_eq!(leader.handle_wildcard_receive(70), WildcardPost::AnySource);
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
    // A pinned or specific receive's match decides nothing.
    leader.handle_match(71, 2);
    assert_eq!(drain(&mut leader), []);
}

#[test]
fn a_follower_waits_for_the_decision_then_pins() {
    let mut follower = WildcardAgreement::new(1, 2);
    assert_eq!(follower.handle_wildcard_receive(5), WildcardPost::Defer);
    assert_eq!(drain(&mut follower), []);
    follower.handle_decisions(0, &[(1, 3)]);
    assert_eq!(
        drain(&mut follower),
        [AgreementAction::Release {
            receive: 5,
            source: Some(3)
        }]
    );
    // A decision ahead of the receive: the receive is pinned when posted.
    follower.handle_decisions(0, &[(2, 1)]);
    assert_eq!(drain(&mut follower), []);
    assert_eq!(follower.handle_wildcard_receive(6), WildcardPost::Pin(1));
}

#[test]
fn decisions_from_a_replica_that_does_not_lead_are_dropped() {
    let mut follower = WildcardAgreement::new(2, 3);
    assert_eq!(follower.handle_wildcard_receive(9), WildcardPost::Defer);
    follower.handle_decisions(1, &[(1, 0)]);
    assert_eq!(drain(&mut follower), []);
    assert_eq!(follower.decision(1), None);
}

#[test]
fn a_contradicting_decision_is_reported_not_applied() {
    let mut follower = WildcardAgreement::new(1, 2);
    follower.handle_decisions(0, &[(1, 3)]);
    follower.handle_decisions(0, &[(1, 2)]);
    assert_eq!(
        drain(&mut follower),
        [AgreementAction::Conflict {
            ordinal: 1,
            held: 3,
            sent: 2,
            from: 0
        }]
    );
    assert_eq!(follower.decision(1), Some(3));
}

#[test]
fn a_new_leader_merges_what_the_followers_got_before_deciding() {
    // Leader 0 decided ordinals 1 and 2; replica 1 got only 1, replica 2
    // got both. Replica 1 leads after 0's death: it must learn ordinal 2
    // from replica 2, not decide it anew.
    let mut new_leader = WildcardAgreement::new(1, 3);
    new_leader.handle_decisions(0, &[(1, 5)]);
    assert_eq!(new_leader.handle_wildcard_receive(11), WildcardPost::Pin(5));
    assert_eq!(new_leader.handle_wildcard_receive(12), WildcardPost::Defer);
    new_leader.handle_failure(0);
    assert!(!new_leader.decides(), "merging");
    assert_eq!(drain(&mut new_leader), []);
    assert_eq!(new_leader.handle_wildcard_receive(13), WildcardPost::Defer);

    let mut follower = WildcardAgreement::new(2, 3);
    follower.handle_decisions(0, &[(1, 5)]);
    follower.handle_decisions(0, &[(2, 7)]);
    follower.handle_failure(0);
    let sync = drain(&mut follower);
    assert_eq!(
        sync,
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
            AgreementAction::Release {
                receive: 12,
                source: Some(7)
            },
            AgreementAction::SendDecisions {
                to: 2,
                decisions: vec![(1, 5), (2, 7)]
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
}

#[test]
fn a_follower_that_dies_during_the_merge_is_not_waited_for() {
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
}

#[test]
fn a_sync_that_comes_before_the_new_leaders_own_notice_is_kept() {
    let mut new_leader = WildcardAgreement::new(1, 3);
    assert_eq!(new_leader.handle_wildcard_receive(1), WildcardPost::Defer);
    // Replica 2 learned of 0's death first; its decisions are in before
    // replica 1 learns it leads.
    new_leader.handle_sync(2, &[(1, 6)]);
    assert_eq!(
        drain(&mut new_leader),
        [AgreementAction::Release {
            receive: 1,
            source: Some(6)
        }]
    );
    new_leader.handle_failure(0);
    assert!(new_leader.decides(), "replica 2 is not waited for again");
    assert_eq!(
        drain(&mut new_leader),
        [AgreementAction::SendDecisions {
            to: 2,
            decisions: vec![(1, 6)]
        }]
    );
}

/// A frame in flight: (is a sync, decisions).
type Frame = (bool, Vec<(u64, u32)>);

/// Whole runs: `replica_count` replicas post `ordinals` wildcard receives,
/// `outstanding` at a time, over per-pair FIFO channels, in a seeded
/// order; `kills` die at their steps (a random suffix of what each sent
/// is lost), and each survivor learns of a death after a random delay.
struct Run {
    agreements: Vec<WildcardAgreement>,
    alive: Vec<bool>,
    /// (from, to) -> frames in flight.
    channels: BTreeMap<(u32, u32), VecDeque<Frame>>,
    /// Per replica: posted receives (token = ordinal) and how.
    posted: Vec<BTreeMap<u64, WildcardPost>>,
    /// Per replica: ordinal -> matched source.
    matched: Vec<BTreeMap<u64, u32>>,
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

    fn carry_out(&mut self, replica: u32) {
        while let Some(action) = self.agreements[replica as usize].poll_action() {
            match action {
                AgreementAction::SendDecisions { to, decisions } => self
                    .channels
                    .entry((replica, to))
                    .or_default()
                    .push_back((false, decisions)),
                AgreementAction::SendSync { to, decisions } => self
                    .channels
                    .entry((replica, to))
                    .or_default()
                    .push_back((true, decisions)),
                AgreementAction::Release { receive, source } => {
                    let how = source.map_or(WildcardPost::AnySource, WildcardPost::Pin);
                    self.posted[replica as usize].insert(receive, how);
                }
                AgreementAction::Conflict { .. } => self.conflicts += 1,
            }
        }
    }

    /// One random event; false when nothing is left to do.
    fn step(&mut self, step: u64, ordinals: u64, outstanding: usize) -> bool {
        let replica_count = self.agreements.len() as u32;
        let mut choices = Vec::new();
        for replica in 0..replica_count {
            if !self.alive[replica as usize] {
                continue;
            }
            let r = replica as usize;
            if self.next[r] <= ordinals && self.posted[r].len() < outstanding {
                choices.push(0);
            }
            if self.posted[r]
                .values()
                .any(|how| *how != WildcardPost::Defer)
            {
                choices.push(1);
            }
        }
        let channels: Vec<(u32, u32)> = self
            .channels
            .iter()
            .filter(|(&(_, to), frames)| !frames.is_empty() && self.alive[to as usize])
            .map(|(&key, _)| key)
            .collect();
        let due: Vec<usize> = (0..self.notices.len())
            .filter(|&i| self.notices[i].0 <= step)
            .collect();
        if choices.is_empty() && channels.is_empty() && self.notices.is_empty() {
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
            let (sync, decisions) = self
                .channels
                .get_mut(&(from, to))
                .and_then(VecDeque::pop_front)
                .expect("non-empty");
            let agreement = &mut self.agreements[to as usize];
            if sync {
                agreement.handle_sync(from, &decisions);
            } else {
                agreement.handle_decisions(from, &decisions);
            }
            self.carry_out(to);
        } else {
            let replica = self.random(u64::from(replica_count)) as u32;
            let r = replica as usize;
            if !self.alive[r] {
                return true;
            }
            let ready: Vec<(u64, WildcardPost)> = self.posted[r]
                .iter()
                .filter(|(_, how)| **how != WildcardPost::Defer)
                .map(|(&o, &h)| (o, h))
                .collect();
            if !ready.is_empty() && (self.random(2) == 0 || self.next[r] > ordinals) {
                // A posted receive matches: pinned to its source, or (free)
                // whatever came first here, which differs per replica.
                let (ordinal, how) = ready[self.random(ready.len() as u64) as usize];
                let source = match how {
                    WildcardPost::Pin(source) => source,
                    _ => self.random(5) as u32 + 10 * replica,
                };
                self.posted[r].remove(&ordinal);
                self.matched[r].insert(ordinal, source);
                self.agreements[r].handle_match(ordinal, source);
                self.carry_out(replica);
            } else if self.next[r] <= ordinals && self.posted[r].len() < outstanding {
                let ordinal = self.next[r];
                self.next[r] += 1;
                let how = self.agreements[r].handle_wildcard_receive(ordinal);
                self.posted[r].insert(ordinal, how);
                self.carry_out(replica);
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

/// Runs one seeded job; returns the live replicas' matched sources.
fn run(seed: u64, replica_count: u32, ordinals: u64, outstanding: usize, kills: &[(u32, u64)]) {
    let mut run = Run {
        agreements: (0..replica_count)
            .map(|me| WildcardAgreement::new(me, replica_count))
            .collect(),
        alive: vec![true; replica_count as usize],
        channels: BTreeMap::new(),
        posted: vec![BTreeMap::new(); replica_count as usize],
        matched: vec![BTreeMap::new(); replica_count as usize],
        next: vec![1; replica_count as usize],
        notices: Vec::new(),
        conflicts: 0,
        rng: seed,
    };
    let mut step = 0;
    loop {
        for &(dead, at) in kills {
            if at == step {
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
    let live: Vec<usize> = (0..replica_count as usize)
        .filter(|&r| run.alive[r])
        .collect();
    for &r in &live {
        assert_eq!(
            run.matched[r].len() as u64,
            ordinals,
            "seed {seed}: replica {r} did not match every wildcard: {:?}",
            run.posted[r]
        );
        assert_eq!(
            run.matched[r], run.matched[live[0]],
            "seed {seed}: replicas {} and {r} disagree",
            live[0]
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
            let step = seed % 150;
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
        let kills = [(first, seed % 120), ((first + 1) % 3, seed * 7 % 160)];
        run(seed, 3, 20, 1 + (seed % 2) as usize, &kills);
        run(seed, 4, 20, 2, &kills);
    }
}
