//! The sender log's memory: the payloads it keeps in memory lie in large
//! chunks, bump-allocated, instead of one heap block per message.
//!
//! Why: a log that only grows (nothing is trimmed without checkpoints)
//! makes every logged byte new memory, which the kernel must fault in and
//! zero page by page, against 0.1 ms/MiB for the copy itself; a heap block
//! per message also goes back to the allocator (and often the kernel) when
//! trimmed or spilled. A chunk is one anonymous mapping of [`CHUNK_BYTES`]
//! (a payload over [`OWN_MAPPING_BYTES_MIN`] gets one of its own, so no
//! chunk tail is left unused for it). A mapping whose every entry was
//! trimmed or spilled is kept (up to [`SPARE_BYTES_MAX`]) and reused: a
//! log that trims or spills goes on in the same, already faulted memory.
//!
//! Huge pages are optional (`RESMPI_MSGLOG_HUGEPAGES=1`: mappings aligned
//! to 2 MiB and advised `MADV_HUGEPAGE`, which the kernel's `madvise` mode
//! needs): the copy then takes two 2 MiB faults instead of 1,024 small
//! ones. Off by default because on a VM whose host takes free memory back
//! (virtio-balloon free page reporting, which reports free 2 MiB blocks) a
//! huge page untouched for a few seconds costs more to fault in than small
//! pages: on the 2-core VM 1.7–2.6 ms/MiB against 0.4 ms/MiB, and 0.15
//! ms/MiB when it was freed just before. Nor are chunks populated ahead
//! (`MADV_POPULATE_WRITE`): that was slower than the copy's own faults
//! there (0.18–1.2 ms/MiB against 0.15).
//!
//! What it does not do: bound anything. The sender log charges payload
//! bytes against its bound as before; the arena's mapped bytes
//! ([`Arena::mapped_bytes`]) can exceed them by the unused tail of the
//! current chunk and by chunks kept alive by one entry (trims are per
//! destination, so entries of several destinations share a chunk).
//!
//! A spilled payload is written from its chunk by the spill writer
//! ([`Arena::shared_bytes`] holds the chunk); a chunk is only reused once
//! nothing holds it any more.

use std::sync::Arc;

/// Bytes of one chunk.
pub const CHUNK_BYTES: usize = 4 << 20;

/// Payloads longer than this get a mapping of their own (rounded up to
/// the page), so a chunk's tail is not left unused for them.
pub const OWN_MAPPING_BYTES_MIN: usize = CHUNK_BYTES / 2;

/// Bytes of emptied mappings kept for reuse, at most (a log trimmed at
/// each checkpoint grows again to about what it was).
pub const SPARE_BYTES_MAX: usize = 64 << 20;

/// Transparent huge page size on x86-64 and most aarch64 kernels; with
/// huge pages on, a mapping starts on such a boundary.
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Mapping granularity without huge pages.
const PAGE_BYTES: usize = 4096;

/// Alignment of every payload (a cache line).
const PAYLOAD_ALIGN_BYTES: usize = 64;

/// One anonymous private mapping, unmapped on drop.
#[derive(Debug)]
struct Mapping {
    start: *mut u8,
    length: usize,
}

// SAFETY: the mapping is plain memory owned by this value; which parts
// are written and read by whom is governed by the arena (a range given to
// the spill writer is never written again while it holds the mapping).
unsafe impl Send for Mapping {}
// SAFETY: as above; shared references only read ranges no one writes.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `length` bytes (a multiple of the page size, or with `huge_pages`
    /// of the huge page size, starting on a huge-page boundary and advised
    /// as huge pages).
    fn new(length: usize, huge_pages: bool) -> Result<Mapping, String> {
        let alignment = if huge_pages {
            HUGE_PAGE_BYTES
        } else {
            PAGE_BYTES
        };
        debug_assert!(length > 0 && length.is_multiple_of(alignment));
        let padded = length + alignment - PAGE_BYTES;
        // SAFETY: an anonymous private mapping at an address the kernel
        // chooses; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                padded,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "mapping {length} bytes for the sender log: {}",
                std::io::Error::last_os_error()
            ));
        }
        let base = base as usize;
        let start = base.next_multiple_of(alignment);
        let head = start - base;
        let tail = padded - head - length;
        // SAFETY: both ranges lie inside the mapping made above and are
        // not used: the head before `start`, the tail after its end.
        unsafe {
            if head > 0 {
                libc::munmap(base as *mut libc::c_void, head);
            }
            if tail > 0 {
                libc::munmap((start + length) as *mut libc::c_void, tail);
            }
        }
        let mapping = Mapping {
            start: start as *mut u8,
            length,
        };
        if huge_pages {
            // SAFETY: advice on this mapping's own range; failure (a
            // kernel without transparent huge pages) only means 4 KiB
            // pages.
            unsafe {
                libc::madvise(
                    mapping.start as *mut libc::c_void,
                    length,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
        Ok(mapping)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range is this value's own mapping, and nothing
        // refers to it any more (it is dropped).
        unsafe {
            libc::munmap(self.start as *mut libc::c_void, self.length);
        }
    }
}

/// Bytes of a chunk the spill writer reads while the log goes on: the
/// chunk stays mapped and unreused while this exists.
#[derive(Debug)]
pub struct SharedBytes {
    /// `None`: an empty payload.
    mapping: Option<Arc<Mapping>>,
    offset: usize,
    length: usize,
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        let Some(mapping) = &self.mapping else {
            return &[];
        };
        // SAFETY: `offset..offset + length` lies in the mapping (checked
        // when the slot was made), the mapping lives as long as `self`,
        // and the arena writes the range again only after every
        // `SharedBytes` of its chunk is dropped.
        unsafe { std::slice::from_raw_parts(mapping.start.add(self.offset), self.length) }
    }
}

/// Where one payload lies in the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    chunk: usize,
    offset: usize,
    length: usize,
}

impl Slot {
    /// Payload bytes.
    pub fn len(&self) -> usize {
        self.length
    }

    /// Whether the payload is empty (it then takes no memory).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }
}

/// The chunk index of slots that take no memory.
const NO_CHUNK: usize = usize::MAX;

#[derive(Debug)]
struct Chunk {
    mapping: Arc<Mapping>,
    /// Bytes handed out from the front.
    used: usize,
    /// Slots handed out and not yet freed.
    live: usize,
}

/// Chunks of mapped memory for the sender log's payloads.
#[derive(Debug, Default)]
pub struct Arena {
    /// Indexed by a slot's `chunk`; `None`: a free index.
    chunks: Vec<Option<Chunk>>,
    /// The chunk new payloads go to.
    current: Option<usize>,
    /// Mappings emptied and kept for reuse (the writer may still hold
    /// some: those are taken only once it let go).
    spare: Vec<Arc<Mapping>>,
    spare_bytes: usize,
    mapped_bytes: usize,
    huge_pages: bool,
    chunks_mapped: u64,
    chunks_reused: u64,
}

impl Arena {
    /// An arena that has mapped nothing yet; with `huge_pages` its
    /// mappings are advised as transparent huge pages.
    pub fn new(huge_pages: bool) -> Arena {
        Arena {
            huge_pages,
            ..Arena::default()
        }
    }

    fn granularity(&self) -> usize {
        if self.huge_pages {
            HUGE_PAGE_BYTES
        } else {
            PAGE_BYTES
        }
    }

    /// A mapping of `length` to `length_max` bytes: a spare one nobody
    /// holds if there is one, else a new one of `length`.
    fn mapping(&mut self, length: usize, length_max: usize) -> Result<Arc<Mapping>, String> {
        let reusable = self.spare.iter().position(|mapping| {
            Arc::strong_count(mapping) == 1 && (length..=length_max).contains(&mapping.length)
        });
        if let Some(index) = reusable {
            self.chunks_reused += 1;
            let mapping = self.spare.swap_remove(index);
            self.spare_bytes -= mapping.length;
            return Ok(mapping);
        }
        let mapping = Mapping::new(length, self.huge_pages)?;
        self.mapped_bytes += mapping.length;
        self.chunks_mapped += 1;
        Ok(Arc::new(mapping))
    }

    /// A slot of `length` bytes, and the bytes to fill (their content is
    /// whatever the memory held). Err: the kernel refused the memory.
    pub fn allocate(&mut self, length: usize) -> Result<(Slot, &mut [u8]), String> {
        let slot = if length == 0 {
            Slot {
                chunk: NO_CHUNK,
                offset: 0,
                length: 0,
            }
        } else if length > OWN_MAPPING_BYTES_MIN {
            // A mapping of its own, given back with the payload.
            let rounded = length.next_multiple_of(self.granularity());
            let mapping = self.mapping(rounded, rounded + rounded / 4)?;
            let chunk = self.insert(Chunk {
                mapping,
                used: length,
                live: 1,
            });
            Slot {
                chunk,
                offset: 0,
                length,
            }
        } else {
            let chunk = match self.current {
                Some(chunk) if self.fits(chunk, length) => chunk,
                _ => self.next_chunk()?,
            };
            let entry = self.chunks[chunk].as_mut().expect("current chunk");
            let offset = entry.used.next_multiple_of(PAYLOAD_ALIGN_BYTES);
            entry.used = offset + length;
            entry.live += 1;
            Slot {
                chunk,
                offset,
                length,
            }
        };
        let bytes = self.bytes_mut(slot);
        Ok((slot, bytes))
    }

    fn fits(&self, chunk: usize, length: usize) -> bool {
        let entry = self.chunks[chunk].as_ref().expect("current chunk");
        entry.used.next_multiple_of(PAYLOAD_ALIGN_BYTES) + length <= entry.mapping.length
    }

    /// Make a fresh chunk current: a spare nobody holds, or a new one.
    fn next_chunk(&mut self) -> Result<usize, String> {
        if let Some(current) = self.current.take() {
            // The old current chunk is freed by its last slot from now on.
            if self.chunks[current].as_ref().is_some_and(|c| c.live == 0) {
                self.retire(current);
            }
        }
        let mapping = self.mapping(CHUNK_BYTES, CHUNK_BYTES)?;
        let chunk = self.insert(Chunk {
            mapping,
            used: 0,
            live: 0,
        });
        self.current = Some(chunk);
        Ok(chunk)
    }

    fn insert(&mut self, chunk: Chunk) -> usize {
        match self.chunks.iter().position(Option::is_none) {
            Some(index) => {
                self.chunks[index] = Some(chunk);
                index
            }
            None => {
                self.chunks.push(Some(chunk));
                self.chunks.len() - 1
            }
        }
    }

    /// Chunk `index` holds nothing any more: keep it as a spare, or unmap
    /// it (when the spares would pass [`SPARE_BYTES_MAX`]).
    fn retire(&mut self, index: usize) {
        let chunk = self.chunks[index].take().expect("a chunk to retire");
        if self.spare_bytes + chunk.mapping.length <= SPARE_BYTES_MAX {
            self.spare_bytes += chunk.mapping.length;
            self.spare.push(chunk.mapping);
        } else {
            self.mapped_bytes -= chunk.mapping.length;
            // Unmapped when the spill writer, if it holds it, lets go.
        }
    }

    /// The payload in `slot`.
    pub fn bytes(&self, slot: Slot) -> &[u8] {
        if slot.chunk == NO_CHUNK {
            return &[];
        }
        let chunk = self.chunks[slot.chunk].as_ref().expect("a live slot");
        assert!(slot.offset + slot.length <= chunk.mapping.length);
        // SAFETY: the range lies in the chunk's mapping (asserted), which
        // lives while `self` does; `&self` keeps it from being written.
        unsafe { std::slice::from_raw_parts(chunk.mapping.start.add(slot.offset), slot.length) }
    }

    fn bytes_mut(&mut self, slot: Slot) -> &mut [u8] {
        if slot.chunk == NO_CHUNK {
            return &mut [];
        }
        let chunk = self.chunks[slot.chunk].as_ref().expect("a live slot");
        assert!(slot.offset + slot.length <= chunk.mapping.length);
        // SAFETY: the range lies in the chunk's mapping (asserted) and was
        // just handed out: no other slot overlaps it, no `SharedBytes` of
        // it exists (a chunk is reused only once none of its own does),
        // and `&mut self` keeps every other borrow of the arena away.
        unsafe { std::slice::from_raw_parts_mut(chunk.mapping.start.add(slot.offset), slot.length) }
    }

    /// The payload in `slot`, held for another thread (the spill writer)
    /// beyond [`Arena::free`]ing the slot.
    pub fn shared_bytes(&self, slot: Slot) -> SharedBytes {
        if slot.chunk == NO_CHUNK {
            return SharedBytes {
                mapping: None,
                offset: 0,
                length: 0,
            };
        }
        let chunk = self.chunks[slot.chunk].as_ref().expect("a live slot");
        SharedBytes {
            mapping: Some(Arc::clone(&chunk.mapping)),
            offset: slot.offset,
            length: slot.length,
        }
    }

    /// The payload in `slot` is no longer needed.
    pub fn free(&mut self, slot: Slot) {
        if slot.chunk == NO_CHUNK {
            return;
        }
        let chunk = self.chunks[slot.chunk].as_mut().expect("a live slot");
        chunk.live -= 1;
        if chunk.live > 0 {
            return;
        }
        if self.current == Some(slot.chunk) {
            // Empty and current: start it again from the front, unless
            // the spill writer still reads from it.
            if Arc::strong_count(&chunk.mapping) == 1 {
                chunk.used = 0;
            }
            return;
        }
        self.retire(slot.chunk);
    }

    /// Bytes mapped (chunks in use and spare ones).
    pub fn mapped_bytes(&self) -> usize {
        self.mapped_bytes
    }

    /// Mappings made so far, and spare ones reused instead.
    pub fn chunk_counts(&self) -> (u64, u64) {
        (self.chunks_mapped, self.chunks_reused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(arena: &mut Arena, length: usize, byte: u8) -> Slot {
        let (slot, bytes) = arena.allocate(length).unwrap();
        bytes.fill(byte);
        slot
    }

    #[test]
    fn payloads_stay_intact_across_chunk_boundaries() {
        let mut arena = Arena::new(false);
        // 300 KiB payloads: the 14th does not fit the first chunk.
        let slots: Vec<Slot> = (0..40u8).map(|n| fill(&mut arena, 300 << 10, n)).collect();
        assert!(arena.chunk_counts().0 >= 3);
        for (n, slot) in slots.iter().enumerate() {
            let bytes = arena.bytes(*slot);
            assert_eq!(bytes.len(), 300 << 10);
            assert!(bytes.iter().all(|&byte| byte == n as u8), "payload {n}");
        }
    }

    #[test]
    fn a_chunk_whose_payloads_are_all_freed_is_reused_not_mapped_again() {
        let mut arena = Arena::new(false);
        let first: Vec<Slot> = (0..8).map(|n| fill(&mut arena, 1 << 20, n)).collect();
        let mapped = arena.chunk_counts().0;
        for slot in first {
            arena.free(slot);
        }
        for round in 0..10u8 {
            let slots: Vec<Slot> = (0..8)
                .map(|n| fill(&mut arena, 1 << 20, n + round))
                .collect();
            for (n, slot) in slots.iter().enumerate() {
                assert!(arena.bytes(*slot).iter().all(|&b| b == n as u8 + round));
            }
            for slot in slots {
                arena.free(slot);
            }
        }
        assert_eq!(arena.chunk_counts().0, mapped, "no chunk mapped again");
        assert!(arena.chunk_counts().1 > 0);
        assert!(arena.mapped_bytes() <= SPARE_BYTES_MAX + CHUNK_BYTES);
    }

    #[test]
    fn a_payload_larger_than_a_chunk_gets_its_own_and_gives_it_back() {
        let mut arena = Arena::new(false);
        let small = fill(&mut arena, 100, 1);
        let large = fill(&mut arena, CHUNK_BYTES + 12345, 2);
        let after = fill(&mut arena, 100, 3);
        assert!(arena.bytes(large).iter().all(|&b| b == 2));
        assert_eq!(arena.bytes(large).len(), CHUNK_BYTES + 12345);
        assert_eq!(arena.bytes(small), &[1; 100]);
        assert_eq!(arena.bytes(after), &[3; 100]);
        // Freed, its mapping is a spare the next such payload reuses.
        arena.free(large);
        let (mapped, _) = arena.chunk_counts();
        let again = fill(&mut arena, CHUNK_BYTES + 10000, 4);
        assert_eq!(arena.chunk_counts(), (mapped, 1));
        assert!(arena.bytes(again).iter().all(|&b| b == 4));
        assert_eq!(arena.bytes(after), &[3; 100]);
        // One past what spares may hold is unmapped when freed.
        let huge = fill(&mut arena, SPARE_BYTES_MAX + 1, 5);
        let before = arena.mapped_bytes();
        arena.free(huge);
        assert_eq!(
            arena.mapped_bytes(),
            before - (SPARE_BYTES_MAX + PAGE_BYTES)
        );
    }

    #[test]
    fn shared_bytes_outlive_the_slot_and_keep_the_chunk_from_reuse() {
        let mut arena = Arena::new(false);
        let slots: Vec<Slot> = (0..4).map(|n| fill(&mut arena, 1 << 20, n)).collect();
        let held = arena.shared_bytes(slots[1]);
        for slot in slots {
            arena.free(slot);
        }
        // Refill: the held chunk must not be written under the reader.
        let again: Vec<Slot> = (0..8).map(|_| fill(&mut arena, 1 << 20, 0xee)).collect();
        assert!(held.as_ref().iter().all(|&b| b == 1));
        drop(held);
        for slot in again {
            arena.free(slot);
        }
    }

    #[test]
    fn a_payload_over_half_a_chunk_gets_a_mapping_of_its_size_reused_after() {
        let mut arena = Arena::new(false);
        let length = OWN_MAPPING_BYTES_MIN + 300_000;
        let small = fill(&mut arena, 1000, 9);
        let first: Vec<Slot> = (0..3).map(|n| fill(&mut arena, length, n)).collect();
        // Its own mapping, the page-rounded length: no chunk tail lost.
        assert_eq!(
            arena.mapped_bytes(),
            CHUNK_BYTES + 3 * length.next_multiple_of(PAGE_BYTES)
        );
        let (mapped, _) = arena.chunk_counts();
        for slot in first {
            arena.free(slot);
        }
        let again: Vec<Slot> = (0..3).map(|n| fill(&mut arena, length, 10 + n)).collect();
        assert_eq!(arena.chunk_counts(), (mapped, 3));
        for (n, slot) in again.iter().enumerate() {
            assert!(arena.bytes(*slot).iter().all(|&b| b == 10 + n as u8));
        }
        assert_eq!(arena.bytes(small), &[9; 1000]);
    }

    #[test]
    fn with_huge_pages_payloads_are_intact_too() {
        let mut arena = Arena::new(true);
        let slots: Vec<Slot> = (0..20u8).map(|n| fill(&mut arena, 700 << 10, n)).collect();
        assert!(arena.mapped_bytes().is_multiple_of(HUGE_PAGE_BYTES));
        for (n, slot) in slots.iter().enumerate() {
            assert!(arena.bytes(*slot).iter().all(|&b| b == n as u8));
        }
    }

    #[test]
    fn empty_payloads_take_no_memory() {
        let mut arena = Arena::new(false);
        let slot = fill(&mut arena, 0, 0);
        assert!(slot.is_empty());
        assert_eq!(arena.bytes(slot), &[] as &[u8]);
        assert_eq!(arena.mapped_bytes(), 0);
        arena.free(slot);
    }
}
