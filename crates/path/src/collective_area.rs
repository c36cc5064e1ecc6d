//! The collective area: a few slots at the end of every rank's shared-memory
//! segment through which small blocking collectives exchange data without
//! frames, requests or matching.
//!
//! Why: a collective built from point-to-point messages pays, per step, a
//! request, a matching pass, a frame header and a ring record on both sides.
//! For a few bytes between ranks of one host that bookkeeping is the whole
//! cost. Here a rank *publishes* its contribution once, into a slot of its
//! own area, and every rank that needs it reads it straight from there (the
//! peers' segments are already mapped for the rings): one copy in, one copy
//! (or reduction) out, and one cache line of flags.
//!
//! A slot is `{tag, readers, publication, payload}`, the header sharing its
//! cache line with the first 48 payload bytes, plus a `consumed` counter on
//! a line of its own (in a block of them before the slots). Finding and
//! reading a small contribution so touches one line the owner wrote; the
//! readers' writes go to another. (With the payload a line after the flags
//! and `consumed` beside them, a reader of an 8-byte bcast missed three
//! lines per call where it now misses two.) The writer waits until the
//! slot is free (every reader of its previous use has consumed it), stores
//! `readers`, resets `consumed`, copies the payload and then stores `tag`
//! with Release. A reader looks through the writer's slots for the tag it
//! expects (Acquire), uses the payload, then bumps `consumed` (Release), so
//! the writer's Acquire of `consumed` orders every read before the slot is
//! overwritten. Tags are unique per (communicator, collective) for the
//! writer, so a reader never takes an older or another communicator's
//! contribution; the caller builds them ([`collective_tag`]). The area knows
//! nothing of MPI: which ranks read what, and in which order, is the
//! caller's (`resmpi_core::coll::shared_memory`).
//!
//! A reader that will never come (it died, or it gave up on the collective
//! because a member died) would keep a slot busy for ever. So the owner may
//! *reclaim* a slot whose readers it knows have given up
//! ([`CollectiveSlot::publish`] does not need the slot to be free; the
//! caller decides). Two things keep a late reader of the old contribution
//! from being fooled: `consumed` carries the slot's publication number in
//! its high half, so a late reader's bump cannot count toward the next
//! publication (it is a compare-and-swap on the number it saw), and a reader
//! checks the tag again after reading ([`CollectiveSlot::finish`]): the
//! owner clears the tag before it touches the payload, so a changed tag
//! means the bytes read may be torn, and the reader reports that instead
//! of consuming.
//!
//! Slots are taken round robin, so a rank may run a few collectives ahead
//! of a slow reader before it has to wait for a slot.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Slots per rank: how many published contributions may be unread at once.
/// Deep enough that a root of back-to-back bcasts (or the first ranks of a
/// scan) runs many calls ahead before it needs its readers to catch up:
/// on a host with more ranks than free cores each switch between ranks
/// then covers many calls. Pages are touched only as far as payloads
/// reach, so unused depth costs address space, not memory.
pub const COLLECTIVE_SLOTS: usize = 16;
/// Payload bytes of one slot: the most one rank publishes per collective.
pub const COLLECTIVE_SLOT_PAYLOAD_BYTES: usize = 128 << 10;
/// Slot header, on the same cache line as the first 48 bytes of the
/// payload: `tag`, `readers` and the publication number, all written by
/// the owner and read by readers, so a reader of a small contribution
/// touches one line of the owner's to find and read it.
const SLOT_HEADER_BYTES: usize = 16;
const TAG_OFFSET_BYTES: usize = 0;
const READERS_OFFSET_BYTES: usize = 8;
const PUBLICATION_OFFSET_BYTES: usize = 12;
/// Each slot's `consumed` (written by readers) sits on a line of its own in
/// a block before the slots, away from everything the owner writes.
const CONSUMED_LINE_BYTES: usize = 64;
const CONSUMED_BLOCK_BYTES: usize = COLLECTIVE_SLOTS * CONSUMED_LINE_BYTES;
/// Slots start on cache lines.
const SLOT_BYTES: usize = (SLOT_HEADER_BYTES + COLLECTIVE_SLOT_PAYLOAD_BYTES).next_multiple_of(64);
/// Bytes of one rank's collective area.
pub const COLLECTIVE_AREA_BYTES: usize = CONSUMED_BLOCK_BYTES + COLLECTIVE_SLOTS * SLOT_BYTES;
/// Bits of a tag that number collectives; the rest name the communicator.
pub const SEQUENCE_BITS: u32 = 35;
/// Communicator keys that fit in a tag (see [`collective_tag`]).
pub const MAX_COMMUNICATOR_KEY: u64 = (1 << (64 - SEQUENCE_BITS)) - 1;
/// Collective numbers that fit in a tag.
pub const MAX_SEQUENCE: u64 = (1 << SEQUENCE_BITS) - 1;

/// The tag of collective `sequence` (1 ..= [`MAX_SEQUENCE`]) on the
/// communicator named by `communicator_key` (0 ..= [`MAX_COMMUNICATOR_KEY`],
/// distinct among the communicators one rank belongs to). Never 0, the tag
/// of a slot that was never written.
pub fn collective_tag(communicator_key: u64, sequence: u64) -> u64 {
    debug_assert!(communicator_key <= MAX_COMMUNICATOR_KEY);
    debug_assert!((1..=MAX_SEQUENCE).contains(&sequence));
    communicator_key << SEQUENCE_BITS | sequence
}

/// One rank's collective area inside a mapped segment (its own or a peer's).
#[derive(Clone, Copy, Debug)]
pub struct CollectiveArea {
    base: *mut u8,
}

// SAFETY: the area is shared memory reached only through atomics and the
// publish/consume protocol above, valid from any thread.
unsafe impl Send for CollectiveArea {}

impl CollectiveArea {
    /// The area at `base`.
    ///
    /// # Safety
    /// `base` must be 64-byte aligned, point to [`COLLECTIVE_AREA_BYTES`]
    /// of zero-initialised (or area-formatted) shared memory, and stay
    /// mapped while the view or any slot taken from it is used.
    pub unsafe fn new(base: *mut u8) -> CollectiveArea {
        debug_assert!((base as usize).is_multiple_of(64));
        CollectiveArea { base }
    }

    /// Slot `index` (< [`COLLECTIVE_SLOTS`]).
    #[inline]
    pub fn slot(&self, index: usize) -> CollectiveSlot {
        assert!(index < COLLECTIVE_SLOTS);
        // SAFETY: inside the area by the assertion and `new`'s promise.
        unsafe {
            CollectiveSlot {
                base: self.base.add(CONSUMED_BLOCK_BYTES + index * SLOT_BYTES),
                consumed: self.base.add(index * CONSUMED_LINE_BYTES),
            }
        }
    }
}

/// One slot of a collective area.
#[derive(Clone, Copy, Debug)]
pub struct CollectiveSlot {
    /// The header, then the payload.
    base: *mut u8,
    /// The slot's `consumed` counter.
    consumed: *mut u8,
}

/// A contribution a reader found: its slot and the publication it belongs to.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    slot: CollectiveSlot,
    /// Which slot of the area it is in.
    pub index: usize,
    tag: u64,
    publication: u32,
}

impl CollectiveSlot {
    #[inline]
    fn tag(&self) -> &AtomicU64 {
        // SAFETY: inside the slot header, 8-aligned (slots are multiples of
        // 64 bytes from a 64-aligned base), accessed only atomically.
        unsafe { &*(self.base.add(TAG_OFFSET_BYTES) as *const AtomicU64) }
    }

    #[inline]
    fn readers(&self) -> &AtomicU32 {
        // SAFETY: as in `tag`.
        unsafe { &*(self.base.add(READERS_OFFSET_BYTES) as *const AtomicU32) }
    }

    /// Publication number of the current contribution (as in `consumed`).
    #[inline]
    fn publication(&self) -> &AtomicU32 {
        // SAFETY: as in `tag`.
        unsafe { &*(self.base.add(PUBLICATION_OFFSET_BYTES) as *const AtomicU32) }
    }

    /// Publication number (high 32 bits) and readers done with it (low 32).
    #[inline]
    fn consumed(&self) -> &AtomicU64 {
        // SAFETY: a 64-aligned line of the area's consumed block, accessed
        // only atomically.
        unsafe { &*(self.consumed as *const AtomicU64) }
    }

    /// Whether every reader of the slot's last contribution has consumed
    /// it (a slot never written is free), so its owner may reuse it.
    #[inline]
    pub fn is_free(&self) -> bool {
        let consumed = self.consumed().load(Ordering::Acquire) as u32;
        consumed >= self.readers().load(Ordering::Relaxed)
    }

    /// Publish a contribution tagged `tag` that `readers` ranks will
    /// consume: `fill` writes the payload, then the tag is released.
    ///
    /// # Safety
    /// Only the area's owner publishes, from one thread, into a slot that
    /// [`is_free`](Self::is_free) said was free or whose readers the
    /// caller knows have given up (a reclaim).
    #[inline]
    pub unsafe fn publish(&self, tag: u64, readers: u32, fill: impl FnOnce(&mut [u8])) {
        // Late readers of the old contribution must see the tag change
        // before any byte of the payload does (see `finish`).
        self.tag().store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        let publication = (self.consumed().load(Ordering::Relaxed) >> 32).wrapping_add(1);
        self.readers().store(readers, Ordering::Relaxed);
        self.publication()
            .store(publication as u32, Ordering::Relaxed);
        self.consumed().store(publication << 32, Ordering::Relaxed);
        // SAFETY: the payload follows the header inside the slot; no reader
        // uses it: the slot is free, or its readers have given up and check
        // the tag (cleared above) before they trust what they read.
        fill(unsafe {
            std::slice::from_raw_parts_mut(
                self.base.add(SLOT_HEADER_BYTES),
                COLLECTIVE_SLOT_PAYLOAD_BYTES,
            )
        });
        self.tag().store(tag, Ordering::Release);
    }
}

impl CollectiveArea {
    /// The contribution tagged `tag`, once it is published. The search
    /// starts at slot `first` (where the caller expects it: the owner takes
    /// its slots in turn) and goes round.
    #[inline]
    pub fn find(&self, tag: u64, first: usize) -> Option<Found> {
        (0..COLLECTIVE_SLOTS).find_map(|step| {
            let index = (first + step) % COLLECTIVE_SLOTS;
            let slot = self.slot(index);
            if slot.tag().load(Ordering::Acquire) != tag {
                return None;
            }
            // Stored before the tag was released: on the line just read.
            let publication = slot.publication().load(Ordering::Relaxed);
            Some(Found {
                slot,
                index,
                tag,
                publication,
            })
        })
    }
}

impl Found {
    /// The first `length_bytes` of the payload. Until [`finish`]
    /// (Self::finish) says the contribution was still there, what they
    /// held may be torn (only when the owner reclaimed the slot).
    #[inline]
    pub fn payload(&self, length_bytes: usize) -> *const u8 {
        assert!(length_bytes <= COLLECTIVE_SLOT_PAYLOAD_BYTES);
        // SAFETY: inside the slot.
        unsafe { self.slot.base.add(SLOT_HEADER_BYTES) }
    }

    /// Done reading: consume the contribution and say whether it was still
    /// published while it was read (false: the owner reclaimed the slot,
    /// so the bytes read may be torn; nothing is consumed).
    #[inline]
    pub fn finish(&self) -> bool {
        // Pairs with the fence in `publish`: if any byte read came from a
        // new payload, the tag read here is no longer ours.
        fence(Ordering::Acquire);
        if self.slot.tag().load(Ordering::Relaxed) != self.tag {
            return false;
        }
        let consumed = self.slot.consumed();
        let mut current = consumed.load(Ordering::Relaxed);
        while (current >> 32) as u32 == self.publication {
            match consumed.compare_exchange_weak(
                current,
                current + 1,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
        // Reclaimed between the check and the bump: it was whole when read.
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An area in plain (zeroed, 64-aligned) memory.
    fn area_memory() -> Vec<u64> {
        vec![0u64; COLLECTIVE_AREA_BYTES / 8 + 8]
    }

    fn area_of(memory: &mut [u64]) -> CollectiveArea {
        let base = memory.as_mut_ptr() as *mut u8;
        let aligned = base.wrapping_add(base.align_offset(64));
        // SAFETY: the vector holds the area plus 64 bytes of alignment slack.
        unsafe { CollectiveArea::new(aligned) }
    }

    #[test]
    fn tags_are_never_zero_and_keep_key_and_sequence_apart() {
        assert_ne!(collective_tag(0, 1), 0);
        assert_ne!(collective_tag(1, 1), collective_tag(0, 1));
        assert_ne!(collective_tag(0, MAX_SEQUENCE), collective_tag(1, 1));
        assert_eq!(collective_tag(MAX_COMMUNICATOR_KEY, MAX_SEQUENCE), u64::MAX);
    }

    #[test]
    fn a_slot_is_found_by_its_tag_and_free_again_only_after_every_reader() {
        let mut memory = area_memory();
        let area = area_of(&mut memory);
        let slot = area.slot(2);
        assert!(slot.is_free(), "a fresh slot is free");
        assert!(area.find(collective_tag(3, 1), 0).is_none());
        // SAFETY: we own the area and the slot is free.
        unsafe {
            slot.publish(collective_tag(3, 1), 2, |payload| {
                payload[..4].copy_from_slice(b"abcd")
            })
        };
        assert!(!slot.is_free());
        assert!(area.find(collective_tag(3, 2), 5).is_none());
        assert!(area.find(collective_tag(4, 1), 2).is_none());
        let found = area.find(collective_tag(3, 1), 0).expect("published");
        // SAFETY: four bytes inside the slot, published above.
        assert_eq!(
            unsafe { std::slice::from_raw_parts(found.payload(4), 4) },
            b"abcd"
        );
        assert!(found.finish());
        assert!(!slot.is_free(), "one of two readers is not a free slot");
        assert!(area.find(collective_tag(3, 1), 0).unwrap().finish());
        assert!(slot.is_free());
    }

    /// The owner reclaims a slot a reader never finished (the reader gave
    /// up): the late reader's `finish` reports the change and does not
    /// count toward the new contribution.
    #[test]
    fn a_reclaimed_slot_is_reported_to_its_late_reader_and_not_consumed_by_it() {
        let mut memory = area_memory();
        let area = area_of(&mut memory);
        let slot = area.slot(0);
        // SAFETY: we own the area; the slot is fresh.
        unsafe { slot.publish(collective_tag(1, 1), 1, |payload| payload[0] = 1) };
        let late = area.find(collective_tag(1, 1), 0).unwrap();
        assert!(!slot.is_free());
        // SAFETY: a reclaim: the only reader "gave up".
        unsafe { slot.publish(collective_tag(2, 1), 1, |payload| payload[0] = 2) };
        assert!(!late.finish(), "the tag changed under the late reader");
        assert!(
            !slot.is_free(),
            "the late reader must not consume the new one"
        );
        let current = area.find(collective_tag(2, 1), 3).unwrap();
        // A late reader that checked the tag just before the reclaim bumps
        // with its old publication number: no effect on the new one.
        let stale = Found {
            publication: current.publication.wrapping_sub(1),
            ..current
        };
        assert!(stale.finish());
        assert!(!slot.is_free());
        assert!(current.finish());
        assert!(slot.is_free());
    }

    /// One writer, three reader threads, many rounds through the slots: each
    /// reader sees every round's payload whole, and the writer never
    /// overwrites a slot a reader still uses (the payload would change under
    /// the reader's check).
    #[test]
    fn rounds_through_the_slots_deliver_every_payload_intact() {
        const ROUNDS: u64 = 20_000;
        const READERS: u32 = 3;
        let mut memory = area_memory();
        let area = area_of(&mut memory);
        let address = area.base as usize;
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                std::thread::spawn(move || {
                    // SAFETY: the memory outlives the threads (joined below).
                    let area = unsafe { CollectiveArea::new(address as *mut u8) };
                    for round in 1..=ROUNDS {
                        let slot = loop {
                            if let Some(slot) = area.find(collective_tag(7, round), round as usize)
                            {
                                break slot;
                            }
                            std::hint::spin_loop();
                            std::thread::yield_now();
                        };
                        let length = (round % 300) as usize;
                        // SAFETY: inside the slot; published before its tag.
                        let payload =
                            unsafe { std::slice::from_raw_parts(slot.payload(length), length) };
                        for (index, byte) in payload.iter().enumerate() {
                            assert_eq!(*byte, (round as usize + index) as u8, "round {round}");
                        }
                        assert!(slot.finish(), "never reclaimed here");
                    }
                })
            })
            .collect();
        let mut next = 0;
        for round in 1..=ROUNDS {
            let slot = area.slot(next);
            next = (next + 1) % COLLECTIVE_SLOTS;
            while !slot.is_free() {
                std::thread::yield_now();
            }
            let length = (round % 300) as usize;
            // SAFETY: we own the area and the slot is free.
            unsafe {
                slot.publish(collective_tag(7, round), READERS, |payload| {
                    for (index, byte) in payload[..length].iter_mut().enumerate() {
                        *byte = (round as usize + index) as u8;
                    }
                })
            };
        }
        for reader in readers {
            reader.join().unwrap();
        }
    }
}
