//! Where a message's bytes live in the application's memory.
//!
//! A message on the wire is always the packed byte stream of its datatype.
//! For a contiguous buffer that stream *is* the memory; for a derived
//! datatype it is the type's flattened segments, element after element
//! (LA-MPI's (offset, length) list). The engine moves a message fragment by
//! fragment, so it asks for packed bytes `[offset, offset + n)` at a time:
//! a sender gathers them straight into the frame it builds, a receiver
//! scatters a frame's payload straight into the application's buffer. That
//! is the only copy of non-contiguous data, and the reliability layer's
//! CRC32C is computed in the same pass over memory (`*_checksummed`), as it
//! is for contiguous data.

use std::sync::Arc;

use resmpi_checksum::Crc32c;

use crate::datatype::Datatype;

/// Typed data is checksummed in blocks of this many packed bytes, each
/// right after (send) or right before (receive) its gather or scatter,
/// while it is in L1: one pass over memory, like a fused copy, without
/// paying a checksum call per segment (a strided vector's segments are
/// single 8-byte elements).
const FUSED_BLOCK_BYTES: usize = 4096;

/// Copy `length` bytes from `source` to `target` (not overlapping): up to
/// 16 bytes with two unaligned loads and stores of 8 (or 4, 2, 1) bytes
/// that may overlap each other, instead of a call into the C library's
/// `memcpy` whose size dispatch costs more than a small message's copy.
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`.
#[inline(always)]
pub unsafe fn copy_bytes(source: *const u8, target: *mut u8, length: usize) {
    // SAFETY (every arm): each access lies within the `length` bytes the
    // caller promises; the pairs of accesses overlap when `length` is not
    // a multiple of the access width, which writes the same bytes twice.
    unsafe {
        if length > 16 {
            std::ptr::copy_nonoverlapping(source, target, length);
        } else if length >= 8 {
            let head = (source as *const u64).read_unaligned();
            let tail = (source.add(length - 8) as *const u64).read_unaligned();
            (target as *mut u64).write_unaligned(head);
            (target.add(length - 8) as *mut u64).write_unaligned(tail);
        } else if length >= 4 {
            let head = (source as *const u32).read_unaligned();
            let tail = (source.add(length - 4) as *const u32).read_unaligned();
            (target as *mut u32).write_unaligned(head);
            (target.add(length - 4) as *mut u32).write_unaligned(tail);
        } else if length >= 2 {
            let head = (source as *const u16).read_unaligned();
            let tail = (source.add(length - 2) as *const u16).read_unaligned();
            (target as *mut u16).write_unaligned(head);
            (target.add(length - 2) as *mut u16).write_unaligned(tail);
        } else if length == 1 {
            *target = *source;
        }
    }
}

/// The memory behind a message, read by sends and written by receives.
#[derive(Clone, Debug)]
pub enum UserBytes {
    /// One run of memory: the packed stream itself.
    Contiguous(*mut u8),
    /// `count` elements of `datatype` at `base`.
    Typed {
        /// The buffer address the datatype's offsets are relative to.
        base: *mut u8,
        /// The committed datatype's layout.
        datatype: Arc<Datatype>,
        /// Elements in the message.
        count: usize,
    },
}

impl From<*const u8> for UserBytes {
    fn from(pointer: *const u8) -> UserBytes {
        UserBytes::Contiguous(pointer as *mut u8)
    }
}

impl From<*mut u8> for UserBytes {
    fn from(pointer: *mut u8) -> UserBytes {
        UserBytes::Contiguous(pointer)
    }
}

impl UserBytes {
    /// The address of packed byte `offset`, when the bytes are contiguous.
    #[inline]
    pub fn contiguous_at(&self, offset: usize) -> Option<*mut u8> {
        match self {
            UserBytes::Contiguous(pointer) => Some(pointer.wrapping_add(offset)),
            UserBytes::Typed { .. } => None,
        }
    }

    /// Copy packed bytes `[offset, offset + out.len())` into `out`.
    ///
    /// # Safety
    /// The memory must hold the whole message, readable (the application's
    /// promise while its request is incomplete), and must not overlap `out`.
    #[inline]
    pub unsafe fn read(&self, offset: usize, out: &mut [u8]) {
        match self {
            UserBytes::Contiguous(pointer) => {
                // SAFETY: by the caller's promise.
                let source = unsafe { crate::engine::slice_from(pointer.add(offset), out.len()) };
                out.copy_from_slice(source);
            }
            UserBytes::Typed {
                base,
                datatype,
                count,
            } => {
                // SAFETY: by the caller's promise.
                unsafe { datatype.pack(*base, *count, offset, out) }
            }
        }
    }

    /// `read`, returning the CRC32C of the bytes copied, computed in the
    /// same pass.
    ///
    /// # Safety
    /// As for [`UserBytes::read`].
    pub unsafe fn read_checksummed(&self, offset: usize, out: &mut [u8]) -> u32 {
        match self {
            UserBytes::Contiguous(pointer) => {
                // SAFETY: by the caller's promise.
                let source = unsafe { crate::engine::slice_from(pointer.add(offset), out.len()) };
                Crc32c::new().copy_and_update(out, source).finish()
            }
            UserBytes::Typed {
                base,
                datatype,
                count,
            } => {
                let mut crc = Crc32c::new();
                for (index, block) in out.chunks_mut(FUSED_BLOCK_BYTES).enumerate() {
                    let at = offset + index * FUSED_BLOCK_BYTES;
                    // SAFETY: by the caller's promise.
                    unsafe { datatype.pack(*base, *count, at, block) };
                    crc = crc.update(block);
                }
                crc.finish()
            }
        }
    }

    /// Copy `data`, packed bytes from `offset` on, into the memory; bytes
    /// at or past `capacity` (a truncated receive) are dropped.
    ///
    /// # Safety
    /// The memory must hold `capacity` packed bytes, writable, not
    /// overlapping `data`.
    #[inline]
    pub unsafe fn write(&self, capacity: usize, offset: usize, data: &[u8]) {
        let length = data.len().min(capacity.saturating_sub(offset));
        if length == 0 {
            return;
        }
        match self {
            UserBytes::Contiguous(pointer) => {
                // SAFETY: `offset + length <= capacity` bytes, by the caller's promise.
                unsafe { copy_bytes(data.as_ptr(), pointer.add(offset), length) }
            }
            UserBytes::Typed {
                base,
                datatype,
                count,
            } => {
                // SAFETY: by the caller's promise.
                unsafe { datatype.unpack(*base, *count, offset, &data[..length]) }
            }
        }
    }

    /// `write`, returning the CRC32C of all of `data` (the part past
    /// `capacity` is checksummed without being copied), computed in the
    /// same pass as the copy.
    ///
    /// # Safety
    /// As for [`UserBytes::write`].
    pub unsafe fn write_checksummed(&self, capacity: usize, offset: usize, data: &[u8]) -> u32 {
        let length = data.len().min(capacity.saturating_sub(offset));
        let (copied, rest) = data.split_at(length);
        let mut crc = Crc32c::new();
        if length > 0 {
            match self {
                UserBytes::Contiguous(pointer) => {
                    // SAFETY: `offset + length <= capacity` writable bytes,
                    // not overlapping `data`.
                    let target =
                        unsafe { std::slice::from_raw_parts_mut(pointer.add(offset), length) };
                    crc = crc.copy_and_update(target, copied);
                }
                UserBytes::Typed {
                    base,
                    datatype,
                    count,
                } => {
                    for (index, block) in copied.chunks(FUSED_BLOCK_BYTES).enumerate() {
                        let at = offset + index * FUSED_BLOCK_BYTES;
                        crc = crc.update(block);
                        // SAFETY: by the caller's promise.
                        unsafe { datatype.unpack(*base, *count, at, block) };
                    }
                }
            }
        }
        crc.update(rest).finish()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn copy_bytes_copies_every_length_exactly_and_nothing_around_it() {
        let source: Vec<u8> = (1..=64).collect();
        for length in 0..=40 {
            let mut target = [0xEEu8; 64];
            // SAFETY: `length` bytes from `source`, into `target` from 8.
            unsafe { copy_bytes(source.as_ptr(), target.as_mut_ptr().add(8), length) };
            assert_eq!(&target[8..8 + length], &source[..length], "length {length}");
            assert!(
                target[..8].iter().all(|&byte| byte == 0xEE),
                "length {length}"
            );
            assert!(
                target[8 + length..].iter().all(|&byte| byte == 0xEE),
                "length {length}"
            );
        }
    }

    use super::*;
    use crate::datatype::{BasicKind, TypeInfo};

    /// Words 0 and 2 of every 16 bytes: packed size 8, extent 16.
    fn strided() -> Arc<Datatype> {
        let word = Datatype::basic(TypeInfo::basic(4, BasicKind::I32), 4);
        let pair = Datatype::hvector(2, 1, 8, &word).unwrap();
        let datatype = Datatype::resized(&pair, 0, 16).unwrap();
        assert_eq!((datatype.size_bytes, datatype.extent_bytes()), (8, 16));
        Arc::new(datatype)
    }

    #[test]
    fn a_typed_read_gathers_any_window_and_checksums_what_it_copied() {
        let memory: Vec<u8> = (0..48).collect();
        let bytes = UserBytes::Typed {
            base: memory.as_ptr() as *mut u8,
            datatype: strided(),
            count: 3,
        };
        let mut whole = vec![0u8; 24];
        // SAFETY: `memory` holds three elements.
        unsafe { bytes.read(0, &mut whole) };
        let expected: Vec<u8> = (0..3)
            .flat_map(|element| {
                let start = element * 16;
                (start..start + 4).chain(start + 8..start + 12)
            })
            .collect();
        assert_eq!(whole, expected);
        for offset in 0..24 {
            for length in 0..=24 - offset {
                let mut window = vec![0u8; length];
                // SAFETY: as above.
                let crc = unsafe { bytes.read_checksummed(offset, &mut window) };
                assert_eq!(window, expected[offset..offset + length]);
                assert_eq!(crc, Crc32c::new().update(&window).finish());
            }
        }
    }

    #[test]
    fn a_typed_write_scatters_clips_at_capacity_and_leaves_gaps_alone() {
        let packed: Vec<u8> = (100..124).collect();
        for offset in 0..24 {
            for capacity in [16usize, 24] {
                let mut memory = vec![0xEEu8; 48];
                let bytes = UserBytes::Typed {
                    base: memory.as_mut_ptr(),
                    datatype: strided(),
                    count: 3,
                };
                let data = &packed[offset..];
                // SAFETY: `memory` holds three elements.
                let crc = unsafe { bytes.write_checksummed(capacity, offset, data) };
                assert_eq!(crc, Crc32c::new().update(data).finish());
                let mut written = vec![0u8; 24];
                // SAFETY: as above.
                unsafe { bytes.read(0, &mut written) };
                for (position, byte) in written.iter().enumerate() {
                    let wanted = if position >= offset && position < capacity {
                        packed[position]
                    } else {
                        0xEE
                    };
                    assert_eq!(
                        *byte, wanted,
                        "offset {offset} capacity {capacity} byte {position}"
                    );
                }
                for element in 0..3 {
                    let gap = element * 16 + 4..element * 16 + 8;
                    assert!(memory[gap].iter().all(|byte| *byte == 0xEE));
                }
            }
        }
    }

    #[test]
    fn contiguous_bytes_read_and_write_in_place() {
        let mut memory = vec![0u8; 8];
        let bytes = UserBytes::from(memory.as_mut_ptr());
        // SAFETY: `memory` holds 8 bytes.
        let crc = unsafe { bytes.write_checksummed(6, 2, &[1, 2, 3, 4, 5]) };
        assert_eq!(crc, Crc32c::new().update(&[1, 2, 3, 4, 5]).finish());
        assert_eq!(memory, [0, 0, 1, 2, 3, 4, 0, 0]);
        let mut out = [0u8; 3];
        // SAFETY: as above.
        unsafe { bytes.read(1, &mut out) };
        assert_eq!(out, [0, 1, 2]);
    }
}
