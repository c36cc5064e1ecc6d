//! An in-memory path: frames go into a bounded outgoing queue that someone
//! else (the simulator's network) empties, and come out of an incoming
//! queue that someone else fills.
//!
//! Why: the production engine must run unchanged inside `crates/sim`, one
//! thread, many ranks, every interleaving chosen by a seed. A path with no
//! sockets, shared memory or clocks is the seam that makes that possible:
//! the engine sees the same `Path` contract as on shm or TCP (whole frames,
//! FIFO per (sender, receiver) pair, back-pressure as `Ok(false)`), and the
//! simulator decides when each frame moves.
//!
//! Limits: the outgoing queue holds at most `outgoing_frames_max` frames
//! (that is the back-pressure the engine's outbox must absorb); a frame's
//! payload is at most `max_payload_bytes` (larger is a protocol error, as on
//! the other paths). The incoming queue is bounded by what the simulator
//! puts in it.

use std::collections::VecDeque;

use crate::{Path, PathError};
use resmpi_wire::HEADER_LEN_BYTES;

/// One rank's end of an in-memory network.
#[derive(Debug)]
pub struct MemoryPath {
    /// Frames sent by this rank, oldest first: (destination, frame).
    outgoing: VecDeque<(u32, Vec<u8>)>,
    /// Frames for this rank, oldest first: (source, frame).
    incoming: VecDeque<(u32, Vec<u8>)>,
    /// Frames the outgoing queue holds at most.
    outgoing_frames_max: usize,
    /// Largest payload of one frame.
    max_payload_bytes: usize,
}

impl MemoryPath {
    /// An empty path whose outgoing queue holds `outgoing_frames_max`
    /// frames (at least one) of at most `max_payload_bytes` payload each.
    pub fn new(outgoing_frames_max: usize, max_payload_bytes: usize) -> MemoryPath {
        assert!(outgoing_frames_max > 0, "a path that never accepts a frame");
        MemoryPath {
            outgoing: VecDeque::with_capacity(outgoing_frames_max),
            incoming: VecDeque::new(),
            outgoing_frames_max,
            max_payload_bytes,
        }
    }

    /// Take the oldest frame this rank sent: (destination, frame).
    pub fn take_outgoing(&mut self) -> Option<(u32, Vec<u8>)> {
        self.outgoing.pop_front()
    }

    /// Hand this rank a frame from `source` (after every frame handed
    /// before it).
    pub fn push_incoming(&mut self, source: u32, frame: Vec<u8>) {
        self.incoming.push_back((source, frame));
    }

    /// Frames sent and not yet taken.
    pub fn outgoing_len(&self) -> usize {
        self.outgoing.len()
    }

    /// Frames handed in and not yet polled.
    pub fn incoming_len(&self) -> usize {
        self.incoming.len()
    }

    /// Frames from `source` handed in and not yet polled, oldest first
    /// (the simulator reads which of a dead peer's frames a notice
    /// overtook).
    pub fn incoming_from(&self, source: u32) -> impl Iterator<Item = &[u8]> {
        self.incoming
            .iter()
            .filter(move |(from, _)| *from == source)
            .map(|(_, frame)| frame.as_slice())
    }

    /// Frames to `destination` sent and not yet taken.
    pub fn outgoing_count_to(&self, destination: u32) -> usize {
        self.outgoing
            .iter()
            .filter(|(to, _)| *to == destination)
            .count()
    }

    /// Drop every frame to or from `peer` still queued here (the peer died:
    /// nothing more travels between us).
    pub fn forget_peer(&mut self, peer: u32) {
        self.outgoing
            .retain(|(destination, _)| *destination != peer);
        self.incoming.retain(|(source, _)| *source != peer);
    }
}

impl Path for MemoryPath {
    fn try_send(
        &mut self,
        peer: u32,
        header: &[u8; HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> Result<bool, PathError> {
        if payload.len() > self.max_payload_bytes {
            return Err(PathError::Protocol(format!(
                "a {}-byte payload exceeds the memory path's {} bytes",
                payload.len(),
                self.max_payload_bytes
            )));
        }
        if self.outgoing.len() >= self.outgoing_frames_max {
            return Ok(false);
        }
        let mut frame = Vec::with_capacity(HEADER_LEN_BYTES + payload.len());
        frame.extend_from_slice(header);
        frame.extend_from_slice(payload);
        self.outgoing.push_back((peer, frame));
        Ok(true)
    }

    /// Delivers the frames that were queued when the call began; frames the
    /// handler causes to be pushed wait for the next poll (a fairness bound,
    /// as on the other paths).
    fn poll<F: FnMut(u32, &[u8])>(&mut self, mut handler: F) -> Result<usize, PathError> {
        let count = self.incoming.len();
        for _ in 0..count {
            let (source, frame) = self.incoming.pop_front().expect("counted above");
            handler(source, &frame);
        }
        Ok(count)
    }

    fn flush(&mut self) -> Result<(), PathError> {
        Ok(())
    }

    fn max_payload_bytes(&self) -> usize {
        self.max_payload_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(marker: u8) -> [u8; HEADER_LEN_BYTES] {
        [marker; HEADER_LEN_BYTES]
    }

    #[test]
    fn a_full_outgoing_queue_pushes_back_until_a_frame_is_taken() {
        let mut path = MemoryPath::new(2, 16);
        assert!(path.try_send(1, &header(1), b"a").unwrap());
        assert!(path.try_send(2, &header(2), b"b").unwrap());
        assert!(!path.try_send(1, &header(3), b"c").unwrap());
        let (destination, frame) = path.take_outgoing().unwrap();
        assert_eq!(destination, 1);
        assert_eq!(&frame[HEADER_LEN_BYTES..], b"a");
        assert!(path.try_send(1, &header(3), b"c").unwrap());
        assert_eq!(path.outgoing_len(), 2);
    }

    #[test]
    fn frames_come_out_in_the_order_they_went_in() {
        let mut path = MemoryPath::new(8, 16);
        for marker in 0..5u8 {
            path.push_incoming(3, vec![marker; 4]);
        }
        let mut seen = Vec::new();
        let count = path
            .poll(|source, frame| seen.push((source, frame[0])))
            .unwrap();
        assert_eq!(count, 5);
        assert_eq!(seen, (0..5u8).map(|marker| (3, marker)).collect::<Vec<_>>());
        assert_eq!(path.incoming_len(), 0);
    }

    #[test]
    fn an_oversized_payload_is_a_protocol_error() {
        let mut path = MemoryPath::new(1, 4);
        assert!(matches!(
            path.try_send(0, &header(0), b"12345"),
            Err(PathError::Protocol(_))
        ));
        assert_eq!(path.outgoing_len(), 0);
    }

    #[test]
    fn forgetting_a_peer_drops_only_its_frames() {
        let mut path = MemoryPath::new(4, 4);
        path.try_send(1, &header(0), b"x").unwrap();
        path.try_send(2, &header(0), b"y").unwrap();
        path.push_incoming(1, vec![1]);
        path.push_incoming(2, vec![2]);
        path.forget_peer(1);
        assert_eq!(path.take_outgoing().map(|(peer, _)| peer), Some(2));
        assert_eq!(path.take_outgoing(), None);
        let mut sources = Vec::new();
        path.poll(|source, _| sources.push(source)).unwrap();
        assert_eq!(sources, vec![2]);
    }
}
