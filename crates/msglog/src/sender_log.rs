//! The sender-based payload log: every message this process sends, kept in
//! its own memory, keyed by (destination, logical number), so that a
//! destination restarted from `MPI_Init` can be sent its whole history
//! again in the original order.
//!
//! Why in the sender: the payload exists here anyway when it is sent (the
//! paper's sender-based logging), so logging costs one copy and no
//! message; if this process dies the log is lost with it, but its own
//! replay regenerates every message it held.
//!
//! Bound: `bytes_max` (payload plus a fixed cost per entry). What happens
//! at the bound is specified: the log stops taking messages and says it
//! is incomplete ([`SenderLog::is_complete`]); the protocol then refuses to
//! restart any peer (the job ends with an error naming the bound) instead
//! of replaying a history with holes. Spilling to disk and trimming at
//! checkpoints are not built yet (issue 13).

use std::collections::VecDeque;

/// Bytes charged per logged message besides its payload (its key and the
/// container's bookkeeping).
pub const ENTRY_OVERHEAD_BYTES: usize = 48;

/// One logged message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedMessage {
    /// Its number on the (this process, destination) channel.
    pub logical_seq: u64,
    /// Context id it was matched in.
    pub context: u32,
    /// Its tag.
    pub tag: i32,
    /// Its packed bytes.
    pub payload: Vec<u8>,
}

/// Every message sent, per destination, in logical order.
#[derive(Debug)]
pub struct SenderLog {
    per_destination: Vec<VecDeque<LoggedMessage>>,
    bytes_logged: usize,
    bytes_max: usize,
    complete: bool,
}

impl SenderLog {
    /// An empty log for a job of `size` ranks, holding at most `bytes_max`.
    pub fn new(size: u32, bytes_max: usize) -> SenderLog {
        SenderLog {
            per_destination: (0..size).map(|_| VecDeque::new()).collect(),
            bytes_logged: 0,
            bytes_max,
            complete: true,
        }
    }

    /// Keep `message`, sent to `destination`. Past the bound nothing is
    /// kept any more and the log is incomplete for good.
    pub fn record(&mut self, destination: u32, message: LoggedMessage) {
        let cost = message.payload.len() + ENTRY_OVERHEAD_BYTES;
        if !self.complete || self.bytes_logged + cost > self.bytes_max {
            self.complete = false;
            return;
        }
        let Some(queue) = self.per_destination.get_mut(destination as usize) else {
            return;
        };
        self.bytes_logged += cost;
        queue.push_back(message);
    }

    /// The message numbered `logical_seq` sent to `destination`, if logged.
    pub fn message(&self, destination: u32, logical_seq: u64) -> Option<&LoggedMessage> {
        let queue = self.per_destination.get(destination as usize)?;
        let first = queue.front()?.logical_seq;
        let position = logical_seq.checked_sub(first)? as usize;
        queue
            .get(position)
            .filter(|message| message.logical_seq == logical_seq)
            .or_else(|| {
                queue
                    .iter()
                    .find(|message| message.logical_seq == logical_seq)
            })
    }

    /// Whether every message sent so far is in the log.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Bytes charged against the bound.
    pub fn bytes_logged(&self) -> usize {
        self.bytes_logged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(logical_seq: u64, length: usize) -> LoggedMessage {
        LoggedMessage {
            logical_seq,
            context: 0,
            tag: 7,
            payload: vec![logical_seq as u8; length],
        }
    }

    #[test]
    fn messages_are_found_by_destination_and_number() {
        let mut log = SenderLog::new(3, 1 << 20);
        for seq in 1..=5 {
            log.record(2, message(seq, 10));
        }
        log.record(1, message(1, 4));
        assert_eq!(log.message(2, 3).unwrap().payload, vec![3; 10]);
        assert_eq!(log.message(1, 1).unwrap().payload.len(), 4);
        assert!(log.message(2, 6).is_none());
        assert!(log.message(0, 1).is_none());
        assert!(log.is_complete());
    }

    #[test]
    fn past_the_bound_the_log_takes_nothing_and_says_it_is_incomplete() {
        let mut log = SenderLog::new(2, 2 * (100 + ENTRY_OVERHEAD_BYTES));
        log.record(1, message(1, 100));
        log.record(1, message(2, 100));
        assert!(log.is_complete());
        log.record(1, message(3, 1));
        assert!(!log.is_complete());
        // A later small message is not taken either: no holes.
        log.record(1, message(4, 0));
        assert!(log.message(1, 4).is_none());
        assert_eq!(log.bytes_logged(), 2 * (100 + ENTRY_OVERHEAD_BYTES));
    }
}
