//! Divergence between replicas: silent data corruption, or a program that
//! is not send-deterministic (issue 12 item 6, beyond SDR-MPI).
//!
//! Why here: the parallel protocol already sends an ack from every replica
//! of a receiver to the replicas of the sender that did not send it the
//! message. Each ack carries the CRC32C of the payload the acking replica
//! received, and the sender's replica compares it with the CRC32C of what
//! it sent itself. Replicas of a send-deterministic program send the same
//! bytes, so a mismatch means one replica's memory (or its copy of the
//! message) went wrong. Nothing but the comparison lives here: the
//! interceptor hashes, the engine hashes what it receives, the launcher
//! reports.
//!
//! Bounds: a sent hash lives while its send is pending (the application's
//! incomplete sends); hashes of acks for sends this replica has not made
//! yet live until it makes them (a sibling runs ahead by at most its own
//! incomplete sends, as for the protocol's early acks); at most
//! [`DIVERGENCES_KEPT`] divergences are kept in full, all are counted.
//!
//! Vote (`--sdc vote`, R >= 3): every replica of the sender learns, from
//! the acks, the hash of what each of its siblings sent. A replica whose
//! own hash is contradicted by a strict majority of the R replicas (the
//! same other hash from more than R/2 siblings) knows it is the one that
//! went wrong, and leaves the job; the others see a single disagreeing
//! sibling and go on, so the decision needs no agreement round. With no
//! majority (three replicas, three hashes) nobody leaves: it is reported.
//! The votes of a send live while it is pending, as its hash does.

use std::collections::BTreeMap;

use crate::{Process, SendId};

/// Divergences kept with their details (all are counted).
pub const DIVERGENCES_KEPT: usize = 8;

/// What a divergence does (`mpiexec --sdc`, `RESMPI_SDC`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdcPolicy {
    /// Count it and name it in the end-of-job report; the job goes on.
    Report,
    /// End the job with an error naming it.
    Abort,
    /// The replica a strict majority contradicts leaves the job (R >= 3);
    /// the others mask its death.
    Vote,
}

/// One message two replicas disagree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The send: destination rank and logical number.
    pub send: SendId,
    /// The replica that sent it (this process).
    pub sender: Process,
    /// The replica of the destination whose ack says it got other bytes.
    pub receiver: Process,
    /// CRC32C of what `sender` sent.
    pub sent_hash: u32,
    /// CRC32C of what `receiver` got (from its own replica of the sender).
    pub received_hash: u32,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "replicas diverged: message {} from rank {} to rank {}: replica {} of rank {} \
             received bytes with CRC32C {:08x}, replica {} of rank {} sent {:08x} \
             (silent data corruption, or a program that is not send-deterministic)",
            self.send.logical_seq,
            self.sender.rank,
            self.send.destination,
            self.receiver.replica,
            self.receiver.rank,
            self.received_hash,
            self.sender.replica,
            self.sender.rank,
            self.sent_hash,
        )
    }
}

/// A replica the majority of its rank's replicas contradicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outvoted {
    /// The send they disagree on.
    pub send: SendId,
    /// This process.
    pub me: Process,
    /// CRC32C of what it sent.
    pub own_hash: u32,
    /// CRC32C of what the majority sent.
    pub majority_hash: u32,
    /// Siblings whose copies hashed to `majority_hash`.
    pub voters: u32,
    /// Replicas of the rank.
    pub replicas: u32,
}

impl std::fmt::Display for Outvoted {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "replica {} of rank {} was outvoted on message {} to rank {}: it sent bytes with \
             CRC32C {:08x}, {} of the {} replicas sent {:08x}; it leaves the job (--sdc vote)",
            self.me.replica,
            self.me.rank,
            self.send.logical_seq,
            self.send.destination,
            self.own_hash,
            self.voters,
            self.replicas,
            self.majority_hash,
        )
    }
}

/// The comparison state of one process.
#[derive(Clone, Debug, Default)]
pub struct DivergenceCheck {
    /// CRC32C of each pending send's payload.
    sent: BTreeMap<SendId, u32>,
    /// Hashes from acks of sends this process has not made yet.
    early: BTreeMap<SendId, Vec<(Process, u32)>>,
    /// Divergences found.
    pub found: u64,
    /// The first [`DIVERGENCES_KEPT`] of them.
    pub kept: Vec<Divergence>,
    /// Replicas per rank when voting (`--sdc vote`), else 0.
    voting_replicas: u32,
    /// When voting: per pending send, the hashes its siblings' copies
    /// arrived with.
    votes: BTreeMap<SendId, Vec<u32>>,
    /// When voting: the first send on which this process was outvoted.
    pub outvoted: Option<Outvoted>,
}

impl DivergenceCheck {
    /// A check that also votes (`--sdc vote`) among `replicas` replicas.
    pub fn voting(replicas: u32) -> DivergenceCheck {
        DivergenceCheck {
            voting_replicas: replicas,
            ..DivergenceCheck::default()
        }
    }

    /// This process (`me`) sends `send` with payload hash `hash`;
    /// `pending`: the send is not complete yet (its acks may still come).
    /// Acks that came early are compared now. Returns the divergences
    /// found.
    pub fn handle_sent(&mut self, me: Process, send: SendId, hash: u32, pending: bool) -> u64 {
        let before = self.found;
        if self.sent.contains_key(&send) {
            return 0;
        }
        for (receiver, received_hash) in self.early.remove(&send).unwrap_or_default() {
            self.compare(me, send, hash, receiver, received_hash);
        }
        if pending {
            self.sent.insert(send, hash);
        }
        self.found - before
    }

    /// `receiver` acked `send` with the hash of what it received;
    /// `made`: this process has made the send already. Returns whether
    /// that is a divergence.
    pub fn handle_ack(
        &mut self,
        me: Process,
        send: SendId,
        receiver: Process,
        received_hash: u32,
        made: bool,
    ) -> bool {
        match self.sent.get(&send) {
            Some(&sent_hash) => self.compare(me, send, sent_hash, receiver, received_hash),
            None if !made => {
                self.early
                    .entry(send)
                    .or_default()
                    .push((receiver, received_hash));
                false
            }
            // Complete already, or sent with no payload hash: nothing to
            // compare with.
            None => false,
        }
    }

    /// Whether the payload hash of `send` is still to be taken (false once
    /// taken: a send goes to several replicas and may be re-sent).
    pub fn wants_hash(&self, send: SendId) -> bool {
        !self.sent.contains_key(&send)
    }

    /// `send` is complete: its hash is no longer needed.
    pub fn handle_complete(&mut self, send: SendId) {
        self.sent.remove(&send);
        self.votes.remove(&send);
    }

    /// Hashes held (sent and early), for bound checks in tests.
    pub fn held(&self) -> usize {
        self.sent.len()
            + self.early.values().map(Vec::len).sum::<usize>()
            + self.votes.values().map(Vec::len).sum::<usize>()
    }

    fn compare(
        &mut self,
        me: Process,
        send: SendId,
        sent_hash: u32,
        receiver: Process,
        received_hash: u32,
    ) -> bool {
        if self.voting_replicas > 0 {
            self.vote(me, send, sent_hash, received_hash);
        }
        if sent_hash == received_hash {
            return false;
        }
        self.found += 1;
        if self.kept.len() < DIVERGENCES_KEPT {
            self.kept.push(Divergence {
                send,
                sender: me,
                receiver,
                sent_hash,
                received_hash,
            });
        }
        true
    }
}

impl DivergenceCheck {
    /// Count a sibling's copy of `send` (hashed `received_hash`): outvoted
    /// once more than half of the replicas sent the same other bytes.
    fn vote(&mut self, me: Process, send: SendId, own_hash: u32, received_hash: u32) {
        let votes = self.votes.entry(send).or_default();
        votes.push(received_hash);
        if received_hash == own_hash || self.outvoted.is_some() {
            return;
        }
        let voters = votes.iter().filter(|&&hash| hash == received_hash).count() as u32;
        if voters > self.voting_replicas / 2 {
            self.outvoted = Some(Outvoted {
                send,
                me,
                own_hash,
                majority_hash: received_hash,
                voters,
                replicas: self.voting_replicas,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: Process = Process {
        rank: 0,
        replica: 0,
    };
    const OTHER: Process = Process {
        rank: 1,
        replica: 1,
    };
    const SEND: SendId = SendId {
        destination: 1,
        logical_seq: 4,
    };

    #[test]
    fn equal_hashes_are_no_divergence_in_either_order() {
        let mut check = DivergenceCheck::default();
        check.handle_sent(ME, SEND, 7, true);
        assert!(!check.handle_ack(ME, SEND, OTHER, 7, true));
        check.handle_complete(SEND);
        let mut early = DivergenceCheck::default();
        assert!(!early.handle_ack(ME, SEND, OTHER, 7, false));
        assert_eq!(early.handle_sent(ME, SEND, 7, false), 0);
        assert_eq!(
            (check.found, early.found, check.held(), early.held()),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn a_different_hash_is_found_and_named_whichever_comes_first() {
        let mut check = DivergenceCheck::default();
        check.handle_sent(ME, SEND, 7, true);
        assert!(check.handle_ack(ME, SEND, OTHER, 8, true));
        let mut early = DivergenceCheck::default();
        early.handle_ack(ME, SEND, OTHER, 8, false);
        assert_eq!(early.handle_sent(ME, SEND, 7, true), 1);
        for found in [&check, &early] {
            assert_eq!(found.found, 1);
            let text = found.kept[0].to_string();
            assert!(text.contains("message 4 from rank 0 to rank 1"), "{text}");
            assert!(text.contains("replica 1 of rank 1 received"), "{text}");
        }
    }

    #[test]
    fn late_acks_of_complete_sends_are_not_kept() {
        let mut check = DivergenceCheck::default();
        check.handle_sent(ME, SEND, 7, true);
        check.handle_complete(SEND);
        assert!(!check.handle_ack(ME, SEND, OTHER, 9, true));
        assert_eq!(check.held(), 0);
    }

    #[test]
    fn divergences_are_all_counted_and_the_first_few_kept() {
        let mut check = DivergenceCheck::default();
        for seq in 1..=20 {
            let send = SendId {
                destination: 1,
                logical_seq: seq,
            };
            check.handle_sent(ME, send, 1, true);
            check.handle_ack(ME, send, OTHER, 2, true);
        }
        assert_eq!((check.found, check.kept.len()), (20, DIVERGENCES_KEPT));
    }

    fn sibling(replica: u32) -> Process {
        Process { rank: 1, replica }
    }

    #[test]
    fn a_replica_contradicted_by_a_majority_is_outvoted_and_a_single_dissenter_is_not() {
        // Three replicas: this one (replica 0) sent 7.
        let mut majority = DivergenceCheck::voting(3);
        majority.handle_sent(ME, SEND, 7, true);
        majority.handle_ack(ME, SEND, sibling(1), 8, true);
        assert_eq!(majority.outvoted, None, "one sibling alone outvotes nobody");
        majority.handle_ack(ME, SEND, sibling(2), 7, true);
        assert_eq!(majority.outvoted, None);
        // This one is the dissenter: both siblings' copies agree on 8.
        let mut dissenter = DivergenceCheck::voting(3);
        dissenter.handle_ack(ME, SEND, sibling(1), 8, false);
        dissenter.handle_sent(ME, SEND, 7, true);
        assert_eq!(dissenter.outvoted, None);
        dissenter.handle_ack(ME, SEND, sibling(2), 8, true);
        let outvoted = dissenter.outvoted.expect("outvoted");
        assert_eq!((outvoted.voters, outvoted.majority_hash), (2, 8));
        assert!(outvoted
            .to_string()
            .contains("replica 0 of rank 0 was outvoted on message 4"));
        // No majority: three replicas, three hashes.
        let mut split = DivergenceCheck::voting(3);
        split.handle_sent(ME, SEND, 7, true);
        split.handle_ack(ME, SEND, sibling(1), 8, true);
        split.handle_ack(ME, SEND, sibling(2), 9, true);
        assert_eq!(split.outvoted, None);
        split.handle_complete(SEND);
        assert_eq!(split.held(), 0, "votes go with the send");
    }

    #[test]
    fn without_voting_nobody_is_outvoted() {
        let mut check = DivergenceCheck::default();
        check.handle_sent(ME, SEND, 7, true);
        check.handle_ack(ME, SEND, sibling(1), 8, true);
        check.handle_ack(ME, SEND, sibling(2), 8, true);
        assert_eq!((check.found, check.outvoted), (2, None));
    }
}
