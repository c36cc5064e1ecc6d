//! A single-producer / single-consumer byte ring of length-prefixed records,
//! laid out in memory that two processes share.
//!
//! This file owns only the ring protocol, so that it can be tested on plain
//! heap memory; `shm.rs` owns the segments the rings live in.
//!
//! Layout of one ring: a 256-byte header, then `ring_bytes` of data
//! (`ring_bytes` a power of two). `tail` (written by the producer) and `head`
//! (written by the consumer) are monotonically increasing byte counters on
//! cache lines 128 bytes apart, so the two sides never false-share (128, not
//! 64, because adjacent-line prefetchers pull cache lines in pairs).
//!
//! A record is a 16-byte prefix (a stamp word, then the frame length), then
//! the frame, padded to 16 bytes. A record never wraps: when it does not fit
//! before the end of the data area, the producer writes a skip record (length
//! [`SKIP_MARKER`]) and continues at the start.
//!
//! Publication: the producer writes the frame and the length, then stores the
//! stamp with Release, then advances `tail` with Release. The stamp is the
//! record's absolute position XOR a random per-ring key, so the consumer can
//! poll the next record slot itself (one cache line that the producer has just
//! written) instead of first reading `tail` and then the record (two cache
//! misses in a row on the latency path). Stale bytes from an earlier lap
//! cannot pass for the expected stamp: the position differs by a multiple of
//! the ring size, and payload bytes would have to guess the key (2^-64). The
//! consumer hands the frame to its handler in place and only then frees it
//! with a Release store of `head`. `tail` stays exact, for sleepers (who must
//! check "anything unconsumed?" without knowing the stamp protocol) and for
//! checks. Each side keeps a private copy of the counters it reads, so the
//! head and tail lines move between cores only when a ring looks full or
//! someone goes to sleep.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes in front of the data area of every ring.
pub(crate) const RING_HEADER_BYTES: usize = 256;
/// Smallest ring accepted.
pub(crate) const MIN_RING_BYTES: usize = 4096;
/// Largest ring accepted (keeps every offset and length inside u32 range).
pub(crate) const MAX_RING_BYTES: usize = 1 << 30;

const TAIL_OFFSET_BYTES: usize = 0;
const HEAD_OFFSET_BYTES: usize = 128;
/// Stamp word, then length word.
const RECORD_PREFIX_BYTES: usize = 16;
const RECORD_ALIGN_BYTES: usize = 16;
const LENGTH_OFFSET_BYTES: usize = 8;
/// Record length meaning "nothing more in this lap; continue at offset 0".
const SKIP_MARKER: u64 = u64::MAX;

/// Largest frame (header + payload) one record of a ring of `ring_bytes` may
/// hold. A quarter of the ring, so that a frame plus the skip in front of it
/// always fits and several frames can be in flight at once.
#[inline]
pub(crate) fn max_frame_bytes(ring_bytes: usize) -> usize {
    ring_bytes / 4
}

/// Bytes a record carrying a frame of `frame_bytes` occupies in the ring.
#[inline]
fn record_bytes(frame_bytes: usize) -> usize {
    (RECORD_PREFIX_BYTES + frame_bytes + RECORD_ALIGN_BYTES - 1) & !(RECORD_ALIGN_BYTES - 1)
}

/// Whether `ring_bytes` is a size this module can run a ring in.
pub(crate) fn ring_bytes_valid(ring_bytes: usize) -> bool {
    ring_bytes.is_power_of_two() && (MIN_RING_BYTES..=MAX_RING_BYTES).contains(&ring_bytes)
}

/// Where one ring lives. Plain pointers: the memory is shared with another
/// process, so no Rust reference may claim exclusive access to it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingView {
    base: *mut u8,
    ring_bytes: usize,
    /// XORed into every record stamp; both ends must agree on it.
    key: u64,
}

// SAFETY: a view is an address into shared memory that is touched only
// through atomics and the ring protocol, which hold across threads exactly as
// they hold across processes. Moving a view (or the one producer/consumer
// built on it) to another thread changes nothing about who accesses what.
unsafe impl Send for RingView {}

impl RingView {
    /// # Safety
    /// `base` must be 64-byte aligned and point to `RING_HEADER_BYTES +
    /// ring_bytes` bytes of readable and writable memory (zeroed when the
    /// ring is new) that stay mapped for as long as this view or any
    /// producer/consumer built from it is used. `ring_bytes` must satisfy
    /// [`ring_bytes_valid`]. `key` should be random (see the module docs);
    /// producer and consumer must use the same one.
    pub(crate) unsafe fn new(base: *mut u8, ring_bytes: usize, key: u64) -> RingView {
        debug_assert!(ring_bytes_valid(ring_bytes));
        debug_assert_eq!(base as usize % 64, 0);
        RingView {
            base,
            ring_bytes,
            key,
        }
    }

    /// The stamp word of the record slot at `offset` of the data area.
    ///
    /// # Safety
    /// `offset` must be 16-aligned and below `ring_bytes`.
    #[inline]
    unsafe fn stamp(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: inside the data area and 8-aligned by the caller's
        // promise; stamps are only ever accessed atomically by both sides
        // (the producer may write frame bytes over an old stamp position of
        // an earlier lap, but never while the consumer may read it).
        unsafe { &*(self.data().add(offset) as *const AtomicU64) }
    }

    #[inline]
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: the view's contract makes the header valid and 64-byte
        // aligned; AtomicU64 has the layout of u64, and all access to this
        // word from either process goes through atomics.
        unsafe { &*(self.base.add(TAIL_OFFSET_BYTES) as *const AtomicU64) }
    }

    #[inline]
    fn head(&self) -> &AtomicU64 {
        // SAFETY: as in `tail`.
        unsafe { &*(self.base.add(HEAD_OFFSET_BYTES) as *const AtomicU64) }
    }

    #[inline]
    fn data(&self) -> *mut u8 {
        // SAFETY: the data area follows the header inside the same mapping.
        unsafe { self.base.add(RING_HEADER_BYTES) }
    }

    /// Bytes published by the producer and not yet freed by the consumer.
    /// Used by sleepers to decide whether to sleep; SeqCst so that it pairs
    /// with the waker's fence.
    #[inline]
    pub(crate) fn has_unconsumed(&self) -> bool {
        self.tail().load(Ordering::SeqCst) != self.head().load(Ordering::SeqCst)
    }
}

/// The writing end of a ring. Exactly one may exist per ring.
#[derive(Debug)]
pub(crate) struct Producer {
    view: RingView,
    /// Our own copy of the shared tail (we are its only writer).
    tail: u64,
    /// Last value of the shared head we loaded.
    cached_head: u64,
}

impl Producer {
    pub(crate) fn new(view: RingView) -> Producer {
        Producer {
            view,
            // The shared counters are as the peer left them: a tail that is
            // not a record boundary would put records at unaligned offsets.
            tail: view.tail().load(Ordering::Acquire) & !(RECORD_ALIGN_BYTES as u64 - 1),
            cached_head: view.head().load(Ordering::Acquire),
        }
    }

    /// Largest frame one record may hold.
    #[inline]
    pub(crate) fn max_frame_bytes(&self) -> usize {
        max_frame_bytes(self.view.ring_bytes)
    }

    /// Reserve room for one frame of `frame_bytes`, let `fill` write it in
    /// place, and publish it. Returns false, without calling `fill`, when the
    /// consumer has not freed enough room yet. The caller has checked
    /// `frame_bytes <= max_frame_bytes()`.
    #[inline]
    pub(crate) fn try_push<F: FnOnce(&mut [u8])>(&mut self, frame_bytes: usize, fill: F) -> bool {
        debug_assert!(frame_bytes <= self.max_frame_bytes());
        let ring_bytes = self.view.ring_bytes;
        let record = record_bytes(frame_bytes);
        let offset = (self.tail as usize) & (ring_bytes - 1);
        let contiguous = ring_bytes - offset;
        // A record that does not fit before the end costs the rest of this
        // lap too (it is skipped); `need` cannot exceed the ring because a
        // record is at most a quarter of it plus padding.
        let (skip, need) = if record > contiguous {
            (contiguous, contiguous + record)
        } else {
            (0, record)
        };
        // Wrapping: the head is the consumer's word, and one that is ahead
        // of the tail (a faulty peer) must read as "no room", not overflow.
        let room_needed = |head: u64| self.tail.wrapping_add(need as u64).wrapping_sub(head);
        if room_needed(self.cached_head) > ring_bytes as u64 {
            self.cached_head = self.view.head().load(Ordering::Acquire);
            if room_needed(self.cached_head) > ring_bytes as u64 {
                return false;
            }
        }
        let data = self.view.data();
        let record_position = self.tail.wrapping_add(skip as u64);
        let record_offset = if skip > 0 { 0 } else { offset };
        // SAFETY: [record_offset, record_offset + record) lies inside the
        // data area (the record fits in the contiguous space chosen above),
        // is 16-aligned, and is free: the consumer stopped reading it before
        // it published the head we compared against, and will not read past
        // the stamp until we publish it. So this slice is the only live
        // reference to these bytes.
        let frame = unsafe {
            (data.add(record_offset + LENGTH_OFFSET_BYTES) as *mut u64).write(frame_bytes as u64);
            std::slice::from_raw_parts_mut(
                data.add(record_offset + RECORD_PREFIX_BYTES),
                frame_bytes,
            )
        };
        fill(frame);
        // SAFETY: record_offset is 16-aligned and inside the data area.
        unsafe { self.view.stamp(record_offset) }
            .store(record_position ^ self.view.key, Ordering::Release);
        if skip > 0 {
            // SAFETY: `offset` is 16-aligned and below ring_bytes; the
            // consumer freed it (room was checked above) and reads its length
            // only after seeing the stamp stored below.
            unsafe {
                (data.add(offset + LENGTH_OFFSET_BYTES) as *mut u64).write(SKIP_MARKER);
                self.view
                    .stamp(offset)
                    .store(self.tail ^ self.view.key, Ordering::Release);
            }
        }
        self.tail = self.tail.wrapping_add(need as u64);
        self.view.tail().store(self.tail, Ordering::Release);
        true
    }

    /// Whether the consumer has freed room since we last looked. SeqCst so
    /// that it pairs with the consumer's fence (see `ShmPath::wait`).
    #[inline]
    pub(crate) fn head_moved(&self) -> bool {
        self.view.head().load(Ordering::SeqCst) != self.cached_head
    }
}

/// The reading end of a ring. Exactly one may exist per ring.
#[derive(Debug)]
pub(crate) struct Consumer {
    view: RingView,
    /// Our own copy of the shared head (we are its only writer).
    head: u64,
}

impl Consumer {
    pub(crate) fn new(view: RingView) -> Consumer {
        Consumer {
            view,
            // As the peer left it: rounded down to a record boundary, so
            // that every stamp read below is aligned.
            head: view.head().load(Ordering::Acquire) & !(RECORD_ALIGN_BYTES as u64 - 1),
        }
    }

    /// Whether the next record is published: one load of the slot that
    /// `poll` would read first (no other shared line), so an idle poller
    /// can ask this instead of polling.
    #[inline]
    pub(crate) fn ready(&self) -> bool {
        let offset = (self.head as usize) & (self.view.ring_bytes - 1);
        // SAFETY: as in `poll`: `offset` is a 16-aligned record position
        // inside the data area.
        let stamp = unsafe { self.view.stamp(offset) }.load(Ordering::Acquire);
        stamp == self.head ^ self.view.key
    }

    /// Hand up to `max_frames` published frames to `handler`, in order,
    /// freeing each after the handler returns. A record that cannot have
    /// been written by a correct producer is a protocol error (the ring is
    /// then left as it is).
    #[inline]
    pub(crate) fn poll<F: FnMut(&[u8])>(
        &mut self,
        max_frames: usize,
        mut handler: F,
    ) -> Result<usize, String> {
        let ring_bytes = self.view.ring_bytes;
        let data = self.view.data();
        let mut delivered = 0;
        while delivered < max_frames {
            let offset = (self.head as usize) & (ring_bytes - 1);
            // SAFETY: head only ever moves by whole 16-aligned records, so
            // `offset` is 16-aligned and inside the data area.
            let stamp = unsafe { self.view.stamp(offset) }.load(Ordering::Acquire);
            if stamp != self.head ^ self.view.key {
                break;
            }
            // SAFETY: the Acquire load of the matching stamp made the
            // producer's writes of this record visible; the length word is
            // inside the data area.
            let length = unsafe { (data.add(offset + LENGTH_OFFSET_BYTES) as *const u64).read() };
            let record = if length == SKIP_MARKER {
                ring_bytes - offset
            } else {
                let frame_bytes = length as usize;
                if length > max_frame_bytes(ring_bytes) as u64
                    || offset + record_bytes(frame_bytes) > ring_bytes
                {
                    return Err(format!(
                        "corrupt record length {length} at ring offset {offset}"
                    ));
                }
                // SAFETY: the record lies inside the data area (checked just
                // above) and is published (stamp), so the producer finished
                // writing it and will not touch it until we move head past
                // it, which happens only after the handler has returned.
                let frame = unsafe {
                    std::slice::from_raw_parts(data.add(offset + RECORD_PREFIX_BYTES), frame_bytes)
                };
                handler(frame);
                delivered += 1;
                record_bytes(frame_bytes)
            };
            self.head = self.head.wrapping_add(record as u64);
            self.view.head().store(self.head, Ordering::Release);
        }
        Ok(delivered)
    }
}

/// A ring as a faulty or hostile peer may leave it, built from `bytes`,
/// and both ends run over it (the decoder fuzzers' entry point, through
/// `crate::fuzzing`): bytes 0..8 and 8..16 are the shared head and tail
/// words; then each 9-byte item writes one record prefix where the consumer
/// looks next (with the right stamp, so that it is read) whose length word
/// is the item's 8 bytes, kept as they are, made a small length or the skip
/// marker by the item's first byte, and the consumer polls it; the rest
/// (under 9 bytes) sets the sizes of frames a producer then pushes.
/// Returns the frames delivered, or the consumer's error. Whatever the
/// bytes, nothing may panic or touch memory outside the ring.
pub(crate) fn fuzz_records(bytes: &[u8]) -> Result<usize, String> {
    const RING_BYTES: usize = MIN_RING_BYTES;
    const KEY: u64 = 0x5eed_0000_1234_5679;
    let word = |at: usize| -> u64 {
        let mut word = [0u8; 8];
        if let Some(found) = bytes.get(at..(at + 8).min(bytes.len())) {
            word[..found.len()].copy_from_slice(found);
        }
        u64::from_le_bytes(word)
    };
    // Heap memory standing in for the segment, 64-byte aligned.
    let mut memory = vec![0u64; (RING_HEADER_BYTES + RING_BYTES + 64) / 8];
    let raw = memory.as_mut_ptr() as *mut u8;
    // SAFETY: align_offset(64) of an 8-aligned pointer is below 64, inside
    // the over-allocation.
    let base = unsafe { raw.add(raw.align_offset(64)) };
    // SAFETY: base is 64-aligned with RING_HEADER_BYTES + RING_BYTES zeroed
    // bytes that outlive every use below (`memory` is dropped last).
    let view = unsafe { RingView::new(base, RING_BYTES, KEY) };
    view.head().store(word(0), Ordering::Relaxed);
    view.tail().store(word(8), Ordering::Relaxed);
    let mut consumer = Consumer::new(view);
    let mut delivered = 0;
    let mut items = bytes.get(16..).unwrap_or(&[]).chunks_exact(9);
    for item in items.by_ref() {
        let position = consumer.head;
        let offset = (position as usize) & (RING_BYTES - 1);
        let raw_length = u64::from_le_bytes(item[1..].try_into().expect("8 bytes"));
        let length = match item[0] % 4 {
            0 => raw_length,
            1 => SKIP_MARKER,
            _ => raw_length % (max_frame_bytes(RING_BYTES) as u64 + 64),
        };
        // SAFETY: writes inside the data area: `offset` is where the consumer
        // reads next, which it keeps 16-aligned and below RING_BYTES.
        unsafe {
            (view.data().add(offset + LENGTH_OFFSET_BYTES) as *mut u64).write(length);
            view.stamp(offset).store(position ^ KEY, Ordering::Release);
        }
        delivered += consumer.poll(1, |frame| {
            assert!(
                frame.len() <= max_frame_bytes(RING_BYTES),
                "oversized frame delivered"
            );
        })?;
    }
    let mut producer = Producer::new(view);
    for &size in items.remainder() {
        let frame_bytes = (size as usize * 7) % (max_frame_bytes(RING_BYTES) + 1);
        producer.try_push(frame_bytes, |frame| frame.fill(size));
    }
    drop(memory);
    Ok(delivered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Heap memory standing in for a shared segment.
    struct TestRing {
        memory: Vec<u64>,
        ring_bytes: usize,
    }

    impl TestRing {
        fn new(ring_bytes: usize) -> TestRing {
            // Over-allocate so the base can be 64-byte aligned.
            let memory = vec![0u64; (RING_HEADER_BYTES + ring_bytes + 64) / 8];
            TestRing { memory, ring_bytes }
        }

        fn view(&mut self) -> RingView {
            let raw = self.memory.as_mut_ptr() as *mut u8;
            let aligned = unsafe { raw.add(raw.align_offset(64)) };
            // SAFETY: the vector outlives every use in these tests.
            unsafe { RingView::new(aligned, self.ring_bytes, 0x5eed_0000_1234_5679) }
        }
    }

    fn frame_of(length: usize, seed: u64) -> Vec<u8> {
        (0..length)
            .map(|index| (seed as usize * 31 + index * 7) as u8)
            .collect()
    }

    fn drain(consumer: &mut Consumer) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        consumer
            .poll(usize::MAX, |frame| frames.push(frame.to_vec()))
            .unwrap();
        frames
    }

    #[test]
    fn frames_come_out_in_order_with_their_content() {
        let mut memory = TestRing::new(4096);
        let view = memory.view();
        let (mut producer, mut consumer) = (Producer::new(view), Consumer::new(view));
        for (seed, length) in [0usize, 1, 7, 8, 9, 64, 100].into_iter().enumerate() {
            let frame = frame_of(length, seed as u64);
            assert!(producer.try_push(length, |slot| slot.copy_from_slice(&frame)));
        }
        let frames = drain(&mut consumer);
        assert_eq!(frames.len(), 7);
        for (seed, (frame, length)) in frames.iter().zip([0usize, 1, 7, 8, 9, 64, 100]).enumerate()
        {
            assert_eq!(frame, &frame_of(length, seed as u64));
        }
        assert!(!view.has_unconsumed());
    }

    #[test]
    fn ready_says_whether_poll_would_deliver_across_laps_and_skips() {
        let mut memory = TestRing::new(4096);
        let view = memory.view();
        let (mut producer, mut consumer) = (Producer::new(view), Consumer::new(view));
        assert!(!consumer.ready(), "an empty ring has nothing ready");
        // Records of 1008 + 16 = 1024 and 1040 bytes walk the ring through
        // several laps and skip records; `ready` must agree with `poll`.
        for (round, length) in [1008usize, 1024, 8, 1024, 1008, 100, 1024, 0]
            .into_iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            assert!(producer.try_push(length, |slot| slot.fill(round as u8)));
            assert!(
                consumer.ready(),
                "round {round}: a published frame is ready"
            );
            assert_eq!(drain(&mut consumer).len(), 1);
            assert!(!consumer.ready(), "round {round}: nothing left after poll");
        }
    }

    #[test]
    fn full_ring_pushes_back_until_consumer_frees() {
        let mut memory = TestRing::new(4096);
        let view = memory.view();
        let (mut producer, mut consumer) = (Producer::new(view), Consumer::new(view));
        // 1008 + 16 prefix = 1024 bytes per record: exactly four fit.
        for _ in 0..4 {
            assert!(producer.try_push(1008, |slot| slot.fill(1)));
        }
        let mut called = false;
        assert!(!producer.try_push(1, |_| called = true));
        assert!(!called, "fill must not run when there is no room");
        assert!(!producer.head_moved());
        assert_eq!(
            consumer
                .poll(1, |frame| assert_eq!(frame.len(), 1008))
                .unwrap(),
            1
        );
        assert!(producer.head_moved());
        assert!(producer.try_push(1008, |slot| slot.fill(2)));
        assert_eq!(drain(&mut consumer).len(), 4);
    }

    #[test]
    fn record_that_would_wrap_is_skipped_to_the_start() {
        let mut memory = TestRing::new(4096);
        let view = memory.view();
        let (mut producer, mut consumer) = (Producer::new(view), Consumer::new(view));
        // Three records of 1008 bytes leave 1072 at the end; after freeing,
        // a 1024-byte frame (1040-byte record) still fits, a second does not
        // and must go to offset 0 behind a 32-byte skip record.
        for seed in 0..3 {
            assert!(producer.try_push(992, |slot| slot.copy_from_slice(&frame_of(992, seed))));
        }
        assert_eq!(drain(&mut consumer).len(), 3);
        assert!(producer.try_push(1024, |slot| slot.copy_from_slice(&frame_of(1024, 10))));
        assert!(producer.try_push(1024, |slot| slot.copy_from_slice(&frame_of(1024, 11))));
        assert_eq!(producer.tail as usize, 3 * 1008 + 1040 + 32 + 1040);
        let frames = drain(&mut consumer);
        assert_eq!(frames, vec![frame_of(1024, 10), frame_of(1024, 11)]);
        assert_eq!(consumer.head, producer.tail);
    }

    #[test]
    fn skip_needs_room_for_both_the_skip_and_the_record() {
        let mut memory = TestRing::new(4096);
        let view = memory.view();
        let (mut producer, mut consumer) = (Producer::new(view), Consumer::new(view));
        for _ in 0..3 {
            assert!(producer.try_push(1008, |slot| slot.fill(3)));
        }
        // Free only the first record: 1024 free at the start, 1024 at the
        // end; a 1024-byte frame needs 1040 so it would wrap and needs 2064.
        assert_eq!(consumer.poll(1, |_| ()).unwrap(), 1);
        assert!(!producer.try_push(1024, |_| unreachable!()));
        assert_eq!(consumer.poll(1, |_| ()).unwrap(), 1);
        assert!(producer.try_push(1024, |slot| slot.fill(4)));
        let frames = drain(&mut consumer);
        assert_eq!(frames.len(), 2);
        assert!(frames[1].iter().all(|&byte| byte == 4));
    }

    #[test]
    fn many_sizes_through_many_laps_keep_order_and_content() {
        for ring_bytes in [4096usize, 8192, 65536] {
            let mut memory = TestRing::new(ring_bytes);
            let view = memory.view();
            let (mut producer, mut consumer) = (Producer::new(view), Consumer::new(view));
            let max = max_frame_bytes(ring_bytes);
            let mut random = 0x9e37_79b9_7f4a_7c15u64;
            let (mut sent, mut received) = (0u64, 0u64);
            while received < 20_000 {
                random ^= random << 13;
                random ^= random >> 7;
                random ^= random << 17;
                let length = (random as usize) % (max + 1);
                let seed = sent;
                if producer.try_push(length, |slot| slot.copy_from_slice(&frame_of(length, seed))) {
                    sent += 1;
                }
                let pushed_everything_it_could =
                    producer.tail - consumer.head < ring_bytes as u64 / 2;
                if random.is_multiple_of(3) || !pushed_everything_it_could {
                    let budget = (random >> 40) as usize % 4 + 1;
                    consumer
                        .poll(budget, |frame| {
                            assert_eq!(frame, &frame_of(frame.len(), received)[..]);
                            received += 1;
                        })
                        .unwrap();
                }
            }
            assert!(
                producer.tail > 4 * ring_bytes as u64,
                "test must wrap many times"
            );
        }
    }

    #[test]
    fn corrupt_prefix_is_an_error_not_a_crash() {
        let mut memory = TestRing::new(4096);
        let view = memory.view();
        let (mut producer, mut consumer) = (Producer::new(view), Consumer::new(view));
        assert!(producer.try_push(16, |slot| slot.fill(0)));
        // Scribble a huge length over the record's length word.
        unsafe { (view.data().add(LENGTH_OFFSET_BYTES) as *mut u64).write(1 << 40) };
        assert!(consumer.poll(1, |_| panic!("no frame expected")).is_err());
    }
}
