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
//! (or reduction) out.
//!
//! A slot is `{tag, publication, payload}`, the header sharing its cache
//! line with the first 48 payload bytes: a reader of a small contribution
//! touches one line of the owner's to find and read it. The owner clears
//! the tag, writes the publication number (one more than the slot's last)
//! and the payload, then stores the tag with Release. A reader looks
//! through the owner's slots for the tag it expects (Acquire), uses the
//! payload, and then writes a *receipt* in its own area: in the row of that
//! owner, the slot's publication number (Release). Tags are unique per
//! (communicator, collective) for the owner, so a reader never takes an
//! older or another communicator's contribution; the caller builds them
//! ([`collective_tag`]).
//!
//! The owner reuses a slot once every reader of its last publication has
//! a receipt for it; which ranks read what is the caller's
//! (`resmpi_core::coll::shared_memory`), as is remembering the receipts
//! it has seen: one read of a reader's row (one cache line) shows that
//! reader's receipts for all the owner's slots, so a reader that keeps up
//! costs the owner one line read every few calls, and the reader writes a
//! line that stays in its own cache. (With a shared `consumed` counter per
//! slot, bumped by every reader and reset by the owner, that line crossed
//! between the cores twice per call.)
//!
//! A reader that will never come (it died, or it gave up on the collective
//! because a member died) would keep a slot busy for ever. So the owner may
//! *reclaim* a slot whose readers it knows have given up
//! ([`CollectiveSlot::publish`] does not need the slot to be free; the
//! caller decides). A late reader of the old contribution is never fooled:
//! it checks the tag again after reading ([`Found::finish`]) and the owner
//! clears the tag before it touches the payload, so a changed tag means the
//! bytes read may be torn and the reader reports that instead of taking
//! them; and a receipt it writes anyway (it checked just before the
//! reclaim) names the old publication number, never the new one.
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
/// payload: `tag` and the publication number, written by the owner and
/// read by readers.
const SLOT_HEADER_BYTES: usize = 16;
const TAG_OFFSET_BYTES: usize = 0;
const PUBLICATION_OFFSET_BYTES: usize = 8;
/// Slots start on cache lines.
const SLOT_BYTES: usize = (SLOT_HEADER_BYTES + COLLECTIVE_SLOT_PAYLOAD_BYTES).next_multiple_of(64);
/// One row of receipts per owner: a publication number per slot, one line.
const RECEIPT_ROW_BYTES: usize = COLLECTIVE_SLOTS * 4;
const _: () = assert!(RECEIPT_ROW_BYTES == 64);

/// Bytes of one rank's collective area in a world of `world_size` ranks:
/// the slots, then a row of receipts for each rank (pages of rows no local
/// owner uses are never touched).
pub fn collective_area_bytes(world_size: u32) -> usize {
    COLLECTIVE_SLOTS * SLOT_BYTES + world_size as usize * RECEIPT_ROW_BYTES
}

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
    world_size: u32,
}

// SAFETY: the area is shared memory reached only through atomics and the
// publish/receipt protocol above, valid from any thread.
unsafe impl Send for CollectiveArea {}

impl CollectiveArea {
    /// The area at `base` of a world of `world_size` ranks.
    ///
    /// # Safety
    /// `base` must be 64-byte aligned, point to
    /// [`collective_area_bytes`]`(world_size)` of zero-initialised (or
    /// area-formatted) shared memory, and stay mapped while the view or
    /// any slot taken from it is used.
    pub unsafe fn new(base: *mut u8, world_size: u32) -> CollectiveArea {
        debug_assert!((base as usize).is_multiple_of(64));
        CollectiveArea { base, world_size }
    }

    /// Slot `index` (< [`COLLECTIVE_SLOTS`]).
    #[inline]
    pub fn slot(&self, index: usize) -> CollectiveSlot {
        assert!(index < COLLECTIVE_SLOTS);
        // SAFETY: inside the area by the assertion and `new`'s promise.
        CollectiveSlot {
            base: unsafe { self.base.add(index * SLOT_BYTES) },
        }
    }

    /// Start fetching the first line of slot `index` (its header and the
    /// first 48 payload bytes) into this core's cache, without waiting.
    /// Readers call it for the slots they will look at next: the owner's
    /// slots lie 128 KiB apart, where no hardware prefetcher follows, so
    /// without it every contribution read costs a full miss to the
    /// owner's core, one after another (a root reading 15 members waited
    /// for 15 misses in a row). A prefetch of a line the owner has not
    /// written yet is only a wasted fetch.
    #[inline]
    pub fn prefetch(&self, index: usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetching is a hint; the address is inside the area
        // (`slot` checks the index) and never faults.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.slot(index).base as *const i8);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = index;
    }

    /// The receipt this area's rank wrote for `owner`'s slot `index`.
    #[inline]
    fn receipt(&self, owner: u32, index: usize) -> &AtomicU32 {
        assert!(owner < self.world_size && index < COLLECTIVE_SLOTS);
        // SAFETY: inside the rows after the slots (checked above), 4-aligned,
        // accessed only atomically.
        unsafe {
            &*(self
                .base
                .add(COLLECTIVE_SLOTS * SLOT_BYTES + owner as usize * RECEIPT_ROW_BYTES + index * 4)
                as *const AtomicU32)
        }
    }

    /// This area's rank's receipts for every slot of `owner` (the
    /// publication numbers it has consumed): what the owner reads to learn
    /// which of its slots this reader is done with.
    #[inline]
    pub fn receipts_for(&self, owner: u32) -> [u32; COLLECTIVE_SLOTS] {
        // Acquire: the reader's reads of the payload come before its receipt.
        std::array::from_fn(|index| self.receipt(owner, index).load(Ordering::Acquire))
    }
}

/// One slot of a collective area.
#[derive(Clone, Copy, Debug)]
pub struct CollectiveSlot {
    /// The header, then the payload.
    base: *mut u8,
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

    /// Publication number of the current contribution (never 0 once
    /// published: 0 is "nothing yet" in a receipt).
    #[inline]
    fn publication(&self) -> &AtomicU32 {
        // SAFETY: as in `tag`.
        unsafe { &*(self.base.add(PUBLICATION_OFFSET_BYTES) as *const AtomicU32) }
    }

    /// Publish a contribution tagged `tag`: `fill` writes the payload, then
    /// the tag is released. Returns the publication number, which every
    /// reader's receipt must carry before the slot is reused.
    ///
    /// # Safety
    /// Only the area's owner publishes, from one thread, into a slot whose
    /// last publication every reader has a receipt for, or whose readers
    /// the caller knows have given up (a reclaim).
    #[inline]
    pub unsafe fn publish(&self, tag: u64, fill: impl FnOnce(&mut [u8])) -> u32 {
        // Late readers of the old contribution must see the tag change
        // before any byte of the payload does (see `finish`).
        self.tag().store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        let publication = match self.publication().load(Ordering::Relaxed).wrapping_add(1) {
            0 => 1,
            next => next,
        };
        self.publication().store(publication, Ordering::Relaxed);
        // SAFETY: the payload follows the header inside the slot; no reader
        // uses it: every reader is done, or has given up and checks the tag
        // (cleared above) before it trusts what it read.
        fill(unsafe {
            std::slice::from_raw_parts_mut(
                self.base.add(SLOT_HEADER_BYTES),
                COLLECTIVE_SLOT_PAYLOAD_BYTES,
            )
        });
        self.tag().store(tag, Ordering::Release);
        publication
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

    /// Done reading: whether the contribution was still published while it
    /// was read (false: the owner reclaimed the slot, so the bytes read may
    /// be torn). If so, the reader owes the owner a receipt for
    /// [`publication`](Self::publication) ([`CollectiveArea::write_receipt`];
    /// a reclaim right after this check leaves that receipt naming the old
    /// publication, which never counts for the new one).
    #[inline]
    pub fn finish(&self) -> bool {
        // Pairs with the fence in `publish`: if any byte read came from a
        // new payload, the tag read here is no longer ours.
        fence(Ordering::Acquire);
        self.slot.tag().load(Ordering::Relaxed) == self.tag
    }

    /// The publication number a receipt for this contribution carries.
    #[inline]
    pub fn publication(&self) -> u32 {
        self.publication
    }
}

impl CollectiveArea {
    /// In this (the reader's own) area: the reader is done with
    /// `publication` of `owner`'s slot `index`. Release: every read of the
    /// payload comes before the owner may see it.
    #[inline]
    pub fn write_receipt(&self, owner: u32, index: usize, publication: u32) {
        self.receipt(owner, index)
            .store(publication, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranks in the tests' world: an owner (0) and three readers.
    const WORLD: u32 = 4;

    /// An area in plain (zeroed, 64-aligned) memory.
    fn area_memory() -> Vec<u64> {
        vec![0u64; collective_area_bytes(WORLD) / 8 + 8]
    }

    /// A reader's `finish`, then its receipt when the contribution held.
    fn finish_and_receipt(found: &Found, receipts: &CollectiveArea, owner: u32) -> bool {
        let whole = found.finish();
        if whole {
            receipts.write_receipt(owner, found.index, found.publication());
        }
        whole
    }

    fn area_of(memory: &mut [u64]) -> CollectiveArea {
        let base = memory.as_mut_ptr() as *mut u8;
        let aligned = base.wrapping_add(base.align_offset(64));
        // SAFETY: the vector holds the area plus 64 bytes of alignment slack.
        unsafe { CollectiveArea::new(aligned, WORLD) }
    }

    #[test]
    fn tags_are_never_zero_and_keep_key_and_sequence_apart() {
        assert_ne!(collective_tag(0, 1), 0);
        assert_ne!(collective_tag(1, 1), collective_tag(0, 1));
        assert_ne!(collective_tag(0, MAX_SEQUENCE), collective_tag(1, 1));
        assert_eq!(collective_tag(MAX_COMMUNICATOR_KEY, MAX_SEQUENCE), u64::MAX);
    }

    #[test]
    fn a_contribution_is_found_by_its_tag_and_its_reader_writes_a_receipt_in_its_own_area() {
        let (mut owner_memory, mut reader_memory) = (area_memory(), area_memory());
        let (owner, reader) = (area_of(&mut owner_memory), area_of(&mut reader_memory));
        assert!(owner.find(collective_tag(3, 1), 0).is_none());
        assert_eq!(
            reader.receipts_for(0),
            [0; COLLECTIVE_SLOTS],
            "no receipt yet"
        );
        // SAFETY: we own the area and the slot is fresh.
        let publication = unsafe {
            owner.slot(2).publish(collective_tag(3, 1), |payload| {
                payload[..4].copy_from_slice(b"abcd")
            })
        };
        assert_ne!(publication, 0);
        assert!(owner.find(collective_tag(3, 2), 5).is_none());
        assert!(owner.find(collective_tag(4, 1), 2).is_none());
        let found = owner.find(collective_tag(3, 1), 0).expect("published");
        assert_eq!(found.index, 2);
        // SAFETY: four bytes inside the slot, published above.
        assert_eq!(
            unsafe { std::slice::from_raw_parts(found.payload(4), 4) },
            b"abcd"
        );
        assert!(finish_and_receipt(&found, &reader, 0));
        let receipts = reader.receipts_for(0);
        assert_eq!(receipts[2], publication);
        assert_eq!(receipts.iter().filter(|&&r| r != 0).count(), 1);
        assert_eq!(
            reader.receipts_for(1),
            [0; COLLECTIVE_SLOTS],
            "another owner's row"
        );
        // The next publication of the slot has a new number.
        // SAFETY: as above; the reader is done.
        let next = unsafe { owner.slot(2).publish(collective_tag(3, 17), |_| {}) };
        assert_ne!(next, publication);
    }

    /// The owner reclaims a slot a reader never finished (the reader gave
    /// up): the late reader's `finish` reports the change, and a receipt
    /// written from just before the reclaim never counts for the new one.
    #[test]
    fn a_reclaimed_slot_is_reported_to_its_late_reader_and_not_receipted_by_it() {
        let (mut owner_memory, mut reader_memory) = (area_memory(), area_memory());
        let (owner, reader) = (area_of(&mut owner_memory), area_of(&mut reader_memory));
        let slot = owner.slot(0);
        // SAFETY: we own the area; the slot is fresh.
        let first = unsafe { slot.publish(collective_tag(1, 1), |payload| payload[0] = 1) };
        let late = owner.find(collective_tag(1, 1), 0).unwrap();
        // SAFETY: a reclaim: the only reader "gave up".
        let second = unsafe { slot.publish(collective_tag(2, 1), |payload| payload[0] = 2) };
        assert!(
            !finish_and_receipt(&late, &reader, 0),
            "the tag changed under the late reader"
        );
        assert_eq!(reader.receipts_for(0)[0], 0, "nothing receipted");
        let current = owner.find(collective_tag(2, 1), 3).unwrap();
        // A late reader that checked the tag just before the reclaim
        // receipts its old publication: not the new one.
        let stale = Found {
            publication: first,
            ..current
        };
        assert!(finish_and_receipt(&stale, &reader, 0));
        assert_ne!(reader.receipts_for(0)[0], second);
        assert!(finish_and_receipt(&current, &reader, 0));
        assert_eq!(reader.receipts_for(0)[0], second);
    }

    /// One writer, three reader threads (each with its own area for its
    /// receipts), many rounds through the slots: each reader sees every
    /// round's payload whole, and the writer never overwrites a slot before
    /// every reader's receipt names its last publication (the payload would
    /// change under the reader's check).
    #[test]
    fn rounds_through_the_slots_deliver_every_payload_intact() {
        const ROUNDS: u64 = 20_000;
        let mut owner_memory = area_memory();
        let owner = area_of(&mut owner_memory);
        let mut reader_memories: Vec<_> = (1..WORLD).map(|_| area_memory()).collect();
        let reader_areas: Vec<_> = reader_memories.iter_mut().map(|m| area_of(m)).collect();
        let owner_address = owner.base as usize;
        let readers: Vec<_> = reader_areas
            .iter()
            .map(|area| {
                let receipts_address = area.base as usize;
                std::thread::spawn(move || {
                    // SAFETY: the memory outlives the threads (joined below).
                    let (owner, receipts) = unsafe {
                        (
                            CollectiveArea::new(owner_address as *mut u8, WORLD),
                            CollectiveArea::new(receipts_address as *mut u8, WORLD),
                        )
                    };
                    for round in 1..=ROUNDS {
                        let found = loop {
                            if let Some(found) =
                                owner.find(collective_tag(7, round), round as usize)
                            {
                                break found;
                            }
                            std::hint::spin_loop();
                            std::thread::yield_now();
                        };
                        let length = (round % 300) as usize;
                        // SAFETY: inside the slot; published before its tag.
                        let payload =
                            unsafe { std::slice::from_raw_parts(found.payload(length), length) };
                        for (index, byte) in payload.iter().enumerate() {
                            assert_eq!(*byte, (round as usize + index) as u8, "round {round}");
                        }
                        assert!(
                            finish_and_receipt(&found, &receipts, 0),
                            "never reclaimed here"
                        );
                    }
                })
            })
            .collect();
        let mut publications = [0u32; COLLECTIVE_SLOTS];
        let mut next = 0;
        for round in 1..=ROUNDS {
            let index = next;
            next = (next + 1) % COLLECTIVE_SLOTS;
            while publications[index] != 0
                && !reader_areas
                    .iter()
                    .all(|area| area.receipts_for(0)[index] == publications[index])
            {
                std::thread::yield_now();
            }
            let length = (round % 300) as usize;
            // SAFETY: we own the area and every reader receipted the slot.
            publications[index] = unsafe {
                owner
                    .slot(index)
                    .publish(collective_tag(7, round), |payload| {
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
