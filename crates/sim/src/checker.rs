//! Invariant checkers: the oracle of every simulated job.
//!
//! The checker knows the whole plan, so it can judge each event as it
//! happens:
//! - link delivery: from each source, messages arrive exactly once, intact,
//!   in send order (this implies MPI non-overtaking per (source,
//!   destination, context));
//! - matching: a receive gets a message its pattern allows; never a message
//!   matched before; never a message when an older unmatched message from the
//!   same source and context also fits the pattern (non-overtaking, with
//!   ANY_SOURCE / ANY_TAG); and an arriving message goes to the oldest posted
//!   receive that fits it.
//!
//! Every check returns a description of the violation instead of panicking,
//! so the driver can report the seed.

use crate::workload::{verify, PlannedMessage, Workload};
use resmpi_matching::{Envelope, ReceivePattern};

/// One match reported by a rank's matching engine.
#[derive(Clone, Copy, Debug)]
pub struct ObservedMatch {
    /// The receiving rank.
    pub destination: u32,
    /// The receive's token.
    pub token: u64,
    /// The pattern the receive was posted with.
    pub pattern: ReceivePattern,
    /// The envelope of the message it got.
    pub envelope: Envelope,
    /// The message's index on its (source, destination) pair.
    pub index: u64,
    /// The receive was waiting before the message arrived, so it must have
    /// been the oldest waiting receive that fits.
    pub was_waiting: bool,
}

/// State of the oracle for one job.
#[derive(Debug)]
pub struct Checker {
    /// `incoming[destination][source]`: messages in send order.
    incoming: Vec<Vec<Vec<PlannedMessage>>>,
    /// `delivered_count[destination][source]`: messages delivered by the link.
    delivered_count: Vec<Vec<u64>>,
    /// `matched[destination][source][index]`.
    matched: Vec<Vec<Vec<bool>>>,
    /// `posted[destination]`: receives waiting, oldest first.
    posted: Vec<Vec<(u64, ReceivePattern)>>,
    matched_count: usize,
    message_count: usize,
}

impl Checker {
    /// An oracle for `workload`.
    pub fn new(workload: &Workload) -> Checker {
        let rank_count = workload.outgoing.len() as u32;
        let incoming: Vec<Vec<Vec<PlannedMessage>>> = (0..rank_count)
            .map(|destination| {
                (0..rank_count)
                    .map(|source| workload.between(source, destination))
                    .collect()
            })
            .collect();
        let matched = incoming
            .iter()
            .map(|by_source| {
                by_source
                    .iter()
                    .map(|messages| vec![false; messages.len()])
                    .collect()
            })
            .collect();
        Checker {
            delivered_count: vec![vec![0; rank_count as usize]; rank_count as usize],
            matched,
            posted: vec![Vec::new(); rank_count as usize],
            matched_count: 0,
            message_count: workload.message_count(),
            incoming,
        }
    }

    /// The link at `destination` delivered `frame` from `source`; returns the
    /// message's index on that pair.
    pub fn check_delivery(
        &mut self,
        destination: u32,
        source: u32,
        frame: &[u8],
    ) -> Result<u64, String> {
        let index = self.delivered_count[destination as usize][source as usize];
        let Some(expected) =
            self.incoming[destination as usize][source as usize].get(index as usize)
        else {
            return Err(format!(
                "rank {destination} got a message from rank {source} beyond the {index} sent (duplicate delivery)"
            ));
        };
        verify(frame, expected).map_err(|why| {
            format!("rank {destination}, message {index} from rank {source} (out of order, lost or corrupt): {why}")
        })?;
        self.delivered_count[destination as usize][source as usize] += 1;
        Ok(index)
    }

    /// `destination` posted a receive that is now waiting.
    pub fn note_posted(&mut self, destination: u32, token: u64, pattern: ReceivePattern) {
        self.posted[destination as usize].push((token, pattern));
    }

    /// `destination` withdrew a waiting receive.
    pub fn note_cancelled(&mut self, destination: u32, token: u64) {
        self.posted[destination as usize].retain(|&(posted_token, _)| posted_token != token);
    }

    /// Receives waiting at `destination`, oldest first.
    pub fn posted(&self, destination: u32) -> &[(u64, ReceivePattern)] {
        &self.posted[destination as usize]
    }

    /// A receive matched a message (see [`ObservedMatch`]); `frame` is the
    /// message as the matching engine handed it back.
    pub fn check_match(&mut self, observed: ObservedMatch, frame: &[u8]) -> Result<(), String> {
        let ObservedMatch {
            destination,
            token,
            pattern,
            envelope,
            index,
            was_waiting,
        } = observed;
        let where_ = format!(
            "rank {destination}: receive {token} {pattern:?} matched message {index} {envelope:?}"
        );
        if !pattern.matches(&envelope) {
            return Err(format!("{where_}, which its pattern does not allow"));
        }
        let source = envelope.source as usize;
        let messages = &self.incoming[destination as usize][source];
        let expected = messages
            .get(index as usize)
            .ok_or_else(|| format!("{where_}, never sent"))?;
        verify(frame, expected).map_err(|why| format!("{where_}, not intact: {why}"))?;
        let matched = &self.matched[destination as usize][source];
        if matched[index as usize] {
            return Err(format!("{where_}, already matched before"));
        }
        if let Some(overtaken) = messages[..index as usize].iter().find(|earlier| {
            !matched[earlier.index as usize]
                && pattern.matches(&Envelope {
                    source: earlier.source,
                    context: earlier.context,
                    tag: earlier.tag,
                })
        }) {
            return Err(format!(
                "{where_}, overtaking message {} (tag {}) sent earlier on the same context",
                overtaken.index, overtaken.tag
            ));
        }
        if was_waiting {
            let posted = &self.posted[destination as usize];
            let position = posted
                .iter()
                .position(|&(posted_token, _)| posted_token == token)
                .ok_or_else(|| format!("{where_}, but that receive was not waiting"))?;
            if let Some((older_token, _)) = posted[..position]
                .iter()
                .find(|(_, older)| older.matches(&envelope))
            {
                return Err(format!(
                    "{where_}, but older waiting receive {older_token} also fits"
                ));
            }
            self.posted[destination as usize].remove(position);
        }
        self.matched[destination as usize][source][index as usize] = true;
        self.matched_count += 1;
        Ok(())
    }

    /// Messages to `destination` delivered by the link but not yet matched,
    /// in (source, index) order.
    pub fn unmatched_delivered(&self, destination: u32) -> Vec<PlannedMessage> {
        let destination = destination as usize;
        self.incoming[destination]
            .iter()
            .enumerate()
            .flat_map(|(source, messages)| {
                let delivered_count = self.delivered_count[destination][source] as usize;
                messages[..delivered_count].iter().filter(move |message| {
                    !self.matched[destination][source][message.index as usize]
                })
            })
            .copied()
            .collect()
    }

    /// A few messages to `destination` not yet matched (delivered or not),
    /// the oldest per source first: candidates to derive receives from.
    pub fn unmatched_candidates(
        &self,
        destination: u32,
        per_source_count: usize,
    ) -> Vec<PlannedMessage> {
        let destination = destination as usize;
        self.incoming[destination]
            .iter()
            .enumerate()
            .flat_map(|(source, messages)| {
                messages
                    .iter()
                    .filter(move |message| {
                        !self.matched[destination][source][message.index as usize]
                    })
                    .take(per_source_count)
            })
            .copied()
            .collect()
    }

    /// Messages from `source` to `destination` the link has delivered.
    pub fn delivered_count(&self, destination: u32, source: u32) -> u64 {
        self.delivered_count[destination as usize][source as usize]
    }

    /// Messages planned from `source` to `destination`.
    pub fn planned_count(&self, destination: u32, source: u32) -> u64 {
        self.incoming[destination as usize][source as usize].len() as u64
    }

    /// Messages matched by a receive so far.
    pub fn matched_count(&self) -> usize {
        self.matched_count
    }

    /// Messages in the plan.
    pub fn message_count(&self) -> usize {
        self.message_count
    }
}
