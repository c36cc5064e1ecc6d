//! The receiver's half of a link: in-order delivery out of a lossy,
//! duplicating, reordering network.
//!
//! Frames are identified by sequence number. `largest_in_order_seq` (LIRS in
//! the LA-MPI paper) is the cumulative acknowledgement: every frame up to it
//! has been received. Frames above it wait in a reorder buffer until the hole
//! fills. Frames at or below it, or already buffered, are duplicates.
//!
//! Bound: a frame is accepted only if `seq <= last_delivered_seq + capacity`,
//! so frames ready for the application plus frames held out of order never
//! exceed `capacity_frames`. A frame beyond the bound is dropped; the sender
//! still holds it and retransmits it later.
//!
//! Buffers: a frame that cannot be delivered straight from the path's
//! buffer (out of order, or while others wait) is copied into a buffer of
//! this link's pool, which the owner gives back after delivery
//! ([`ReceiveBuffer::recycle`]). Why a pool: fragments are up to 1 MiB, and
//! allocating and freeing one per fragment makes glibc map and unmap it (or
//! grow and trim the heap) each time, page faults on every fragment; the
//! library used to change the application's allocator (`mallopt`) to avoid
//! that. The pool is bounded: at most [`POOL_BYTES_MAX`] bytes of spare
//! capacity per link; a buffer given back beyond that is freed, and a frame
//! arriving with the pool empty gets a fresh allocation, so the limit costs
//! speed (allocation), never correctness.

use std::collections::{BTreeMap, VecDeque};

/// Most spare buffer capacity one link's pool keeps: four of the largest
/// TCP fragments (1 MiB). A window of reordered frames larger than that
/// allocates the rest, and frees it on return.
pub const POOL_BYTES_MAX: usize = 4 << 20;

/// What the receive buffer did with an arriving data frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// It filled the next expected sequence number (and possibly released
    /// buffered successors).
    InOrder,
    /// It is ahead of a hole and waits in the reorder buffer.
    OutOfOrder,
    /// It was received before: dropped.
    Duplicate,
    /// It lies beyond the receive window: dropped, the sender will retry.
    BeyondWindow,
}

#[derive(Debug)]
pub(crate) struct ReceiveBuffer {
    /// Every frame with `seq <= largest_in_order_seq` has been received.
    largest_in_order_seq: u64,
    /// Sequence number of the last frame handed to the application.
    last_delivered_seq: u64,
    /// In-order frames waiting for `pop_ready`, seqs
    /// `last_delivered_seq + 1 ..= largest_in_order_seq`.
    ready: VecDeque<Vec<u8>>,
    /// Frames above a hole, by sequence number.
    out_of_order: BTreeMap<u64, Vec<u8>>,
    capacity_frames: usize,
    buffered_bytes: usize,
    /// Spare buffers, given back after delivery, reused for the next copies.
    pool: Vec<Vec<u8>>,
    /// Capacity of the buffers in `pool`.
    pool_bytes: usize,
}

impl ReceiveBuffer {
    pub fn new(capacity_frames: usize) -> ReceiveBuffer {
        assert!(
            capacity_frames > 0,
            "a receive window of zero frames accepts nothing"
        );
        ReceiveBuffer {
            largest_in_order_seq: 0,
            last_delivered_seq: 0,
            ready: VecDeque::new(),
            out_of_order: BTreeMap::new(),
            capacity_frames,
            buffered_bytes: 0,
            pool: Vec::new(),
            pool_bytes: 0,
        }
    }

    /// A copy of `frame` in a pooled buffer (a fresh one if none is spare).
    fn copy(&mut self, frame: &[u8]) -> Vec<u8> {
        // The largest spare is the likeliest to fit without growing.
        let mut buffer = match self.pool.pop() {
            Some(buffer) => {
                self.pool_bytes -= buffer.capacity();
                buffer
            }
            None => Vec::new(),
        };
        buffer.clear();
        buffer.extend_from_slice(frame);
        buffer
    }

    /// Take back a buffer `pop_ready` handed out, for reuse; freed if the
    /// pool already holds `POOL_BYTES_MAX` of spare capacity.
    pub fn recycle(&mut self, buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if capacity == 0 || self.pool_bytes + capacity > POOL_BYTES_MAX {
            return;
        }
        self.pool_bytes += capacity;
        let at = self
            .pool
            .partition_point(|spare| spare.capacity() <= capacity);
        self.pool.insert(at, buffer);
    }

    /// Spare bytes held by the pool.
    #[cfg(test)]
    pub fn pool_bytes(&self) -> usize {
        self.pool_bytes
    }

    /// The cumulative acknowledgement to put in outgoing headers.
    pub fn largest_in_order_seq(&self) -> u64 {
        self.largest_in_order_seq
    }

    /// Largest sequence number `insert` accepts now; advertised to the
    /// sender so that frames beyond it while the application does not
    /// consume are not counted as failures.
    pub fn receive_limit_seq(&self) -> u64 {
        self.last_delivered_seq + self.capacity_frames as u64
    }

    pub fn has_out_of_order(&self) -> bool {
        !self.out_of_order.is_empty()
    }

    pub fn buffered_frames(&self) -> usize {
        self.ready.len() + self.out_of_order.len()
    }

    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Selective-ack bitmap: bit `i` set = frame `largest_in_order_seq + 2 + i`
    /// is held out of order.
    pub fn selective_ack_bitmap(&self) -> u64 {
        let base = self.largest_in_order_seq + 2;
        self.out_of_order
            .range(base..base + 64)
            .fold(0u64, |bitmap, (&seq, _)| bitmap | 1 << (seq - base))
    }

    pub fn insert(&mut self, seq: u64, frame: &[u8]) -> Arrival {
        debug_assert!(seq > 0, "sequence numbers start at 1");
        if seq <= self.largest_in_order_seq || self.out_of_order.contains_key(&seq) {
            return Arrival::Duplicate;
        }
        if seq - self.last_delivered_seq > self.capacity_frames as u64 {
            return Arrival::BeyondWindow;
        }
        self.buffered_bytes += frame.len();
        if seq != self.largest_in_order_seq + 1 {
            let copy = self.copy(frame);
            self.out_of_order.insert(seq, copy);
            return Arrival::OutOfOrder;
        }
        let copy = self.copy(frame);
        self.ready.push_back(copy);
        self.largest_in_order_seq = seq;
        while let Some(next) = self.out_of_order.remove(&(self.largest_in_order_seq + 1)) {
            self.ready.push_back(next);
            self.largest_in_order_seq += 1;
        }
        debug_assert!(self.buffered_frames() <= self.capacity_frames);
        Arrival::InOrder
    }

    /// Take frame `seq` for immediate delivery without buffering it, if it
    /// is exactly the next one and nothing is waiting: the common in-order
    /// case then costs no copy. False = use `insert`.
    pub fn accept_direct(&mut self, seq: u64) -> bool {
        let next = self.would_accept_direct(seq);
        if next {
            self.largest_in_order_seq = seq;
            self.last_delivered_seq = seq;
        }
        next
    }

    /// Whether frame `seq` was received already (taken in order, or
    /// waiting out of order): another copy of it is a duplicate.
    pub fn has_received(&self, seq: u64) -> bool {
        seq <= self.largest_in_order_seq || self.out_of_order.contains_key(&seq)
    }

    /// Whether `accept_placed(seq)` would accept (changes nothing).
    pub fn would_accept_placed(&self, seq: u64) -> bool {
        seq == self.largest_in_order_seq + 1
            && self.last_delivered_seq == self.largest_in_order_seq
            && self.ready.is_empty()
    }

    /// Take frame `seq`, whose payload its owner already delivered in
    /// place, if it is exactly the next one and every earlier frame has
    /// been delivered; frames waiting out of order right above it become
    /// ready. Unlike `accept_direct`, frames may wait above it: a rail
    /// faster than the one a large frame is placed from must not make the
    /// placement fail. False = not taken (nothing changed).
    pub fn accept_placed(&mut self, seq: u64) -> bool {
        if !self.would_accept_placed(seq) {
            return false;
        }
        self.largest_in_order_seq = seq;
        self.last_delivered_seq = seq;
        while let Some(next) = self.out_of_order.remove(&(self.largest_in_order_seq + 1)) {
            self.ready.push_back(next);
            self.largest_in_order_seq += 1;
        }
        true
    }

    /// Whether `accept_direct(seq)` would accept (changes nothing).
    pub fn would_accept_direct(&self, seq: u64) -> bool {
        seq == self.largest_in_order_seq + 1
            && self.last_delivered_seq == self.largest_in_order_seq
            && self.ready.is_empty()
            && self.out_of_order.is_empty()
    }

    /// Next frame in sequence order, each exactly once.
    pub fn pop_ready(&mut self) -> Option<Vec<u8>> {
        let frame = self.ready.pop_front()?;
        self.last_delivered_seq += 1;
        self.buffered_bytes -= frame.len();
        Some(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_acceptance_only_for_the_next_frame_with_nothing_waiting() {
        let mut buffer = ReceiveBuffer::new(8);
        assert!(buffer.accept_direct(1));
        assert!(
            !buffer.accept_direct(1),
            "a duplicate is never accepted twice"
        );
        assert_eq!(buffer.insert(1, b"a"), Arrival::Duplicate);
        assert!(!buffer.accept_direct(3), "not the next frame");
        assert_eq!(buffer.insert(3, b"c"), Arrival::OutOfOrder);
        assert!(
            !buffer.accept_direct(2),
            "frames are waiting behind the hole"
        );
        assert_eq!(buffer.insert(2, b"b"), Arrival::InOrder);
        assert_eq!(buffer.pop_ready(), Some(b"b".to_vec()));
        assert_eq!(buffer.pop_ready(), Some(b"c".to_vec()));
        assert!(buffer.accept_direct(4));
        assert_eq!(buffer.largest_in_order_seq(), 4);
    }

    #[test]
    fn hole_fill_releases_buffered_successors_in_order() {
        let mut buffer = ReceiveBuffer::new(8);
        assert_eq!(buffer.insert(3, b"c"), Arrival::OutOfOrder);
        assert_eq!(buffer.insert(2, b"b"), Arrival::OutOfOrder);
        assert_eq!(buffer.selective_ack_bitmap(), 0b11);
        assert_eq!(buffer.insert(1, b"a"), Arrival::InOrder);
        assert_eq!(buffer.largest_in_order_seq(), 3);
        let delivered: Vec<Vec<u8>> = std::iter::from_fn(|| buffer.pop_ready()).collect();
        assert_eq!(delivered, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(buffer.buffered_bytes(), 0);
    }

    #[test]
    fn delivered_buffers_are_reused_up_to_the_pool_limit() {
        let mut buffer = ReceiveBuffer::new(8);
        let big = vec![7u8; 1 << 20];
        assert_eq!(buffer.insert(2, &big), Arrival::OutOfOrder);
        assert_eq!(buffer.insert(1, &big), Arrival::InOrder);
        let first = buffer.pop_ready().unwrap();
        let second = buffer.pop_ready().unwrap();
        let reused_at = first.as_ptr();
        buffer.recycle(first);
        buffer.recycle(second);
        assert_eq!(buffer.pool_bytes(), 2 << 20);
        // The next copy lands in a recycled buffer: no allocation.
        assert_eq!(buffer.insert(4, b"small"), Arrival::OutOfOrder);
        assert_eq!(buffer.insert(3, &big), Arrival::InOrder);
        let third = buffer.pop_ready().unwrap();
        let fourth = buffer.pop_ready().unwrap();
        assert!(third.as_ptr() == reused_at || fourth.as_ptr() == reused_at);
        assert_eq!(third, big);
        assert_eq!(fourth, b"small");
        assert_eq!(buffer.pool_bytes(), 0);
        // Beyond the limit, given-back buffers are freed.
        for _ in 0..8 {
            buffer.recycle(Vec::with_capacity(1 << 20));
        }
        assert_eq!(buffer.pool_bytes(), POOL_BYTES_MAX);
    }

    #[test]
    fn duplicates_and_frames_beyond_the_window_are_refused() {
        let mut buffer = ReceiveBuffer::new(2);
        assert_eq!(buffer.insert(1, b"a"), Arrival::InOrder);
        assert_eq!(buffer.insert(1, b"a"), Arrival::Duplicate);
        assert_eq!(buffer.insert(2, b"b"), Arrival::InOrder);
        // Nothing delivered yet: the window (2 frames) is full.
        assert_eq!(buffer.insert(3, b"c"), Arrival::BeyondWindow);
        buffer.pop_ready();
        assert_eq!(buffer.insert(3, b"c"), Arrival::InOrder);
        assert_eq!(buffer.buffered_frames(), 2);
    }
}
