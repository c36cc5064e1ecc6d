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
}

impl DivergenceCheck {
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
    }

    /// Hashes held (sent and early), for bound checks in tests.
    pub fn held(&self) -> usize {
        self.sent.len() + self.early.values().map(Vec::len).sum::<usize>()
    }

    fn compare(
        &mut self,
        me: Process,
        send: SendId,
        sent_hash: u32,
        receiver: Process,
        received_hash: u32,
    ) -> bool {
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
}
