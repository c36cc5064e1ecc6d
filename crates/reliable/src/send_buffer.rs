//! The sender's half of a link: frames kept until the peer acknowledges them.
//!
//! Every frame handed to the link gets the next sequence number and stays
//! here, with its own retransmission timer, until a cumulative ack covers it.
//! The buffer holds at most `capacity_frames` frames; beyond that the caller
//! gets back-pressure, so sender memory is bounded by the window. Sequence
//! numbers in the buffer are contiguous (`oldest_seq ..= next_seq - 1`), which
//! makes lookups by sequence an index computation.

use std::collections::VecDeque;

use resmpi_wire::HEADER_LEN_BYTES;

/// One frame awaiting acknowledgement. The payload is whatever the owner
/// handed over (`P`): an owned buffer, or a view of memory the owner keeps
/// alive until the frame is released (zero-copy retransmission from the
/// application's buffer).
#[derive(Debug)]
pub(crate) struct SentFrame<P> {
    /// Sequence number written into the frame header.
    pub seq: u64,
    /// The frame's header; `ack` is rewritten at every transmission.
    pub header: [u8; HEADER_LEN_BYTES],
    /// The frame's payload, kept for retransmission.
    pub payload: P,
    /// Transmissions so far; 0 = not yet on the wire.
    pub transmit_count: u32,
    /// When the frame must be retransmitted if still unacknowledged.
    pub retransmit_deadline_ns: u64,
    /// The peer reported it holds this frame out of order (selective ack):
    /// no need to retransmit, but keep it until the cumulative ack passes.
    pub selectively_acked: bool,
    /// Rail of the latest transmission.
    pub last_rail: u32,
    /// Time of the latest transmission.
    pub last_transmit_ns: u64,
    /// Transmissions that count against the retry budget: not those forced
    /// by a rail failover or a reopened receive window, nor those made while
    /// the live peer's receive window excluded the frame.
    pub counted_transmit_count: u32,
    /// The next transmission is forced (failover, window reopened): it does
    /// not count against the retry budget.
    pub next_transmission_is_forced: bool,
    /// The peer said its receive window was full after this frame's latest
    /// transmission and the frame lies beyond it: it was probably dropped by
    /// a live but busy receiver, not lost.
    pub blocked_by_window: bool,
    /// Set when the frame was queued again because `rail` went down; its
    /// acknowledgement ends that rail's failover.
    pub failed_over_from_rail: Option<u32>,
    /// Already resent early because the peer reported frames after it
    /// (fast retransmit happens once per frame; after that, timers).
    pub fast_retransmitted: bool,
    /// The deadline of the latest transmission was brought forward because
    /// frames sent after it were acknowledged (reordering threshold).
    pub early_retransmit_due: bool,
}

/// Frames sent (or about to be) and not yet cumulatively acknowledged.
#[derive(Debug)]
pub(crate) struct SendBuffer<P> {
    frames: VecDeque<SentFrame<P>>,
    /// Sequence number the next pushed frame gets; starts at 1.
    next_seq: u64,
    /// First sequence number never transmitted; frames at or after it form
    /// the buffer's tail (new frames go out in order).
    first_unsent_seq: u64,
    capacity_frames: usize,
    buffered_bytes: usize,
}

impl<P: AsRef<[u8]>> SendBuffer<P> {
    pub fn new(capacity_frames: usize) -> SendBuffer<P> {
        assert!(
            capacity_frames > 0,
            "a send window of zero frames can send nothing"
        );
        SendBuffer {
            frames: VecDeque::with_capacity(capacity_frames),
            next_seq: 1,
            first_unsent_seq: 1,
            capacity_frames,
            buffered_bytes: 0,
        }
    }

    pub fn is_full(&self) -> bool {
        self.frames.len() >= self.capacity_frames
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// The sequence number the next `push` assigns.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Largest sequence number ever put on the wire (0 = none): an ack beyond
    /// it is a protocol violation.
    pub fn largest_sent_seq(&self) -> u64 {
        self.first_unsent_seq - 1
    }

    fn oldest_seq(&self) -> u64 {
        self.next_seq - self.frames.len() as u64
    }

    /// Store a frame whose header already carries `next_seq()`.
    pub fn push(&mut self, header: [u8; HEADER_LEN_BYTES], payload: P) -> u64 {
        assert!(!self.is_full(), "push past the send window");
        let seq = self.next_seq;
        self.next_seq += 1;
        self.buffered_bytes += HEADER_LEN_BYTES + payload.as_ref().len();
        self.frames.push_back(SentFrame {
            seq,
            header,
            payload,
            transmit_count: 0,
            retransmit_deadline_ns: u64::MAX,
            selectively_acked: false,
            last_rail: 0,
            last_transmit_ns: 0,
            counted_transmit_count: 0,
            next_transmission_is_forced: false,
            blocked_by_window: false,
            failed_over_from_rail: None,
            fast_retransmitted: false,
            early_retransmit_due: false,
        });
        seq
    }

    /// The oldest frame never transmitted, marked as transmitted now.
    pub fn take_unsent(&mut self) -> Option<&mut SentFrame<P>> {
        if self.first_unsent_seq >= self.next_seq {
            return None;
        }
        let index = (self.first_unsent_seq - self.oldest_seq()) as usize;
        self.first_unsent_seq += 1;
        let sent = &mut self.frames[index];
        debug_assert_eq!(sent.transmit_count, 0);
        Some(sent)
    }

    /// The oldest transmitted frame whose retransmission timer has expired
    /// and that the peer has not selectively acknowledged.
    pub fn oldest_due(&mut self, now_ns: u64) -> Option<&mut SentFrame<P>> {
        self.frames.iter_mut().find(|sent| {
            sent.transmit_count > 0
                && !sent.selectively_acked
                && sent.retransmit_deadline_ns <= now_ns
        })
    }

    /// A frame with `transmit_limit` counted transmissions whose last timer
    /// expired unacknowledged, and that `is_excused` does not excuse (a live
    /// peer's full receive window): the retry budget is spent.
    pub fn exhausted(
        &self,
        now_ns: u64,
        transmit_limit: u32,
        is_excused: impl Fn(&SentFrame<P>) -> bool,
    ) -> Option<&SentFrame<P>> {
        self.frames.iter().find(|sent| {
            sent.counted_transmit_count >= transmit_limit
                && !sent.selectively_acked
                && sent.retransmit_deadline_ns <= now_ns
                && !is_excused(sent)
        })
    }

    /// Whether any transmitted frame awaits its cumulative acknowledgement.
    pub fn has_transmitted(&self) -> bool {
        self.first_unsent_seq > self.oldest_seq()
    }

    /// The newest frame transmitted and not yet acknowledged in any way.
    pub fn newest_in_flight_mut(&mut self) -> Option<&mut SentFrame<P>> {
        self.frames
            .iter_mut()
            .rev()
            .find(|sent| sent.transmit_count > 0 && !sent.selectively_acked)
    }

    /// Frames transmitted and not yet acknowledged in any way, oldest first.
    pub fn in_flight_mut(&mut self) -> impl Iterator<Item = &mut SentFrame<P>> {
        self.frames
            .iter_mut()
            .filter(|sent| sent.transmit_count > 0 && !sent.selectively_acked)
    }

    /// The frame with sequence number `seq`, if still held.
    pub fn get(&self, seq: u64) -> Option<&SentFrame<P>> {
        let index = seq.checked_sub(self.oldest_seq())?;
        self.frames.get(usize::try_from(index).ok()?)
    }

    /// The frame with sequence number `seq`, if still held, for changes.
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut SentFrame<P>> {
        let index = seq.checked_sub(self.oldest_seq())?;
        self.frames.get_mut(usize::try_from(index).ok()?)
    }

    /// The oldest frame not yet cumulatively acknowledged.
    pub fn oldest(&self) -> Option<&SentFrame<P>> {
        self.frames.front()
    }

    /// Earliest pending retransmission deadline.
    pub fn earliest_retransmit_deadline_ns(&self) -> Option<u64> {
        self.frames
            .iter()
            .filter(|sent| sent.transmit_count > 0 && !sent.selectively_acked)
            .map(|sent| sent.retransmit_deadline_ns)
            .min()
    }

    /// Release every frame with `seq <= ack`, showing each to `on_acked`
    /// (unless it was selectively acknowledged, hence shown, before); returns
    /// how many were released.
    pub fn acknowledge_cumulative(
        &mut self,
        ack: u64,
        mut on_acked: impl FnMut(&SentFrame<P>),
    ) -> usize {
        debug_assert!(ack <= self.largest_sent_seq());
        let mut released_count = 0;
        while self.frames.front().is_some_and(|sent| sent.seq <= ack) {
            let sent = self.frames.pop_front().expect("front checked");
            if !sent.selectively_acked {
                on_acked(&sent);
            }
            self.buffered_bytes -= HEADER_LEN_BYTES + sent.payload.as_ref().len();
            released_count += 1;
        }
        released_count
    }

    /// Mark frames the peer holds out of order: bit `i` of `bitmap` stands
    /// for sequence `ack + 2 + i` (`ack + 1` is the hole, by definition).
    /// Each newly marked frame is shown to `on_acked`.
    pub fn acknowledge_selective(
        &mut self,
        ack: u64,
        bitmap: u64,
        mut on_acked: impl FnMut(&SentFrame<P>),
    ) {
        let oldest_seq = self.oldest_seq();
        for bit in 0..64u64 {
            if bitmap & (1 << bit) == 0 {
                continue;
            }
            let seq = ack.saturating_add(2 + bit);
            if seq < oldest_seq || seq > self.largest_sent_seq() {
                continue;
            }
            let sent = &mut self.frames[(seq - oldest_seq) as usize];
            if !sent.selectively_acked {
                sent.selectively_acked = true;
                on_acked(sent);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent_buffer_with(count: usize) -> SendBuffer<Vec<u8>> {
        let mut buffer = SendBuffer::new(8);
        for _ in 0..count {
            buffer.push([0; HEADER_LEN_BYTES], vec![0; 10]);
        }
        while let Some(sent) = buffer.take_unsent() {
            sent.transmit_count = 1;
            sent.retransmit_deadline_ns = 100;
        }
        buffer
    }

    #[test]
    fn cumulative_ack_releases_prefix_and_bytes() {
        let mut buffer = sent_buffer_with(5);
        let mut shown = Vec::new();
        assert_eq!(
            buffer.acknowledge_cumulative(3, |sent| shown.push(sent.seq)),
            3
        );
        assert_eq!(shown, [1, 2, 3]);
        assert_eq!(buffer.len(), 2);
        assert_eq!(buffer.buffered_bytes(), 2 * (HEADER_LEN_BYTES + 10));
        assert_eq!(
            buffer.acknowledge_cumulative(3, |_| panic!("nothing left")),
            0
        );
    }

    #[test]
    fn selectively_acked_frames_are_never_due() {
        let mut buffer = sent_buffer_with(4);
        // ack 0, bitmap bits 0 and 1 => seqs 2 and 3 held by the peer.
        buffer.acknowledge_selective(0, 0b11, |_| {});
        let due: Vec<u64> = std::iter::from_fn(|| {
            let sent = buffer.oldest_due(100)?;
            sent.retransmit_deadline_ns = u64::MAX;
            Some(sent.seq)
        })
        .collect();
        assert_eq!(due, vec![1, 4]);
    }
}
