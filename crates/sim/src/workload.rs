//! What a simulated job sends: per rank, a random sequence of MPI-like
//! messages, each one eager frame.
//!
//! A message's payload is a pure function of (source, destination, index), so
//! the checker can tell an intact message from a corrupted, misrouted or
//! swapped one without keeping copies.

use crate::rng::{mix64, SplitMix64};
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};

/// Contexts (communicators) messages are spread over.
pub const CONTEXT_COUNT: u32 = 2;
/// Tags messages are spread over (few, so wildcard receives have choices).
pub const TAG_COUNT: i32 = 3;
/// Largest payload of a simulated message.
pub const PAYLOAD_BYTES_MAX: usize = 200;

/// One message of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedMessage {
    /// Sending rank.
    pub source: u32,
    /// Receiving rank.
    pub destination: u32,
    /// Communicator context id.
    pub context: u32,
    /// MPI tag.
    pub tag: i32,
    /// Position among the messages from `source` to `destination` (0-based):
    /// MPI's send order on that pair.
    pub index: u64,
    /// Payload length.
    pub payload_bytes: usize,
    /// Virtual time at which the application issues the send.
    pub issue_ns: u64,
}

/// Every rank's messages, in issue order.
#[derive(Clone, Debug)]
pub struct Workload {
    /// `outgoing[source]`: messages of `source` in issue order.
    pub outgoing: Vec<Vec<PlannedMessage>>,
}

impl Workload {
    /// `messages_per_rank` random messages for each of `rank_count` ranks,
    /// issued at random gaps of up to `issue_gap_ns_max`.
    pub fn random(
        rng: &mut SplitMix64,
        rank_count: u32,
        messages_per_rank: usize,
        issue_gap_ns_max: u64,
    ) -> Workload {
        assert!(rank_count >= 2, "a job needs two ranks to send anything");
        let mut next_index = vec![vec![0u64; rank_count as usize]; rank_count as usize];
        let outgoing = (0..rank_count)
            .map(|source| {
                let mut issue_ns = 0;
                (0..messages_per_rank)
                    .map(|_| {
                        // Any rank but the source itself.
                        let mut destination = rng.below(u64::from(rank_count) - 1) as u32;
                        if destination >= source {
                            destination += 1;
                        }
                        issue_ns += rng.between(0, issue_gap_ns_max);
                        let index = next_index[source as usize][destination as usize];
                        next_index[source as usize][destination as usize] += 1;
                        PlannedMessage {
                            source,
                            destination,
                            context: rng.below(u64::from(CONTEXT_COUNT)) as u32,
                            tag: rng.below(TAG_COUNT as u64) as i32,
                            index,
                            payload_bytes: rng.between(0, PAYLOAD_BYTES_MAX as u64) as usize,
                            issue_ns,
                        }
                    })
                    .collect()
            })
            .collect();
        Workload { outgoing }
    }

    /// Messages to `destination` from `source`, in send order.
    pub fn between(&self, source: u32, destination: u32) -> Vec<PlannedMessage> {
        self.outgoing[source as usize]
            .iter()
            .filter(|message| message.destination == destination)
            .copied()
            .collect()
    }

    /// Total number of messages.
    pub fn message_count(&self) -> usize {
        self.outgoing.iter().map(Vec::len).sum()
    }
}

/// Byte `position` of the payload of message `index` from `source` to
/// `destination`.
pub fn payload_byte(source: u32, destination: u32, index: u64, position: usize) -> u8 {
    let key = mix64((u64::from(source) << 48) ^ (u64::from(destination) << 32) ^ index);
    (mix64(key ^ (position as u64 / 8)) >> (8 * (position % 8))) as u8
}

/// The wire frame carrying `message`: an Eager frame whose `message_id` is the
/// message's index on its (source, destination) pair.
pub fn encode(message: &PlannedMessage) -> Vec<u8> {
    let mut header = FrameHeader::new(FrameKind::Eager, message.source);
    header.context = message.context;
    header.tag = message.tag;
    header.payload_len = message.payload_bytes as u32;
    header.message_id = message.index;
    header.aux = message.payload_bytes as u64;
    let mut frame = Vec::with_capacity(HEADER_LEN_BYTES + message.payload_bytes);
    frame.extend_from_slice(&header.to_bytes());
    frame.extend((0..message.payload_bytes).map(|position| {
        payload_byte(message.source, message.destination, message.index, position)
    }));
    frame
}

/// Check that `frame`, delivered at `destination`, is intact message
/// `expected`; a description of the first difference otherwise.
pub fn verify(frame: &[u8], expected: &PlannedMessage) -> Result<(), String> {
    let header = FrameHeader::parse(frame)
        .map_err(|error| format!("delivered frame does not parse: {error}"))?;
    let found = (
        header.source,
        header.context,
        header.tag,
        header.message_id,
        header.payload_len as usize,
    );
    let wanted = (
        expected.source,
        expected.context,
        expected.tag,
        expected.index,
        expected.payload_bytes,
    );
    if found != wanted {
        return Err(format!(
            "envelope (source, context, tag, index, bytes) {found:?}, expected {wanted:?}"
        ));
    }
    let payload = &frame[HEADER_LEN_BYTES..];
    if payload.len() != expected.payload_bytes {
        return Err(format!(
            "{} payload bytes, expected {}",
            payload.len(),
            expected.payload_bytes
        ));
    }
    for (position, &byte) in payload.iter().enumerate() {
        if byte
            != payload_byte(
                expected.source,
                expected.destination,
                expected.index,
                position,
            )
        {
            return Err(format!(
                "payload byte {position} of message {} corrupted",
                expected.index
            ));
        }
    }
    Ok(())
}
