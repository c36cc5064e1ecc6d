//! SSE4.2 `crc32` instruction path, with the copy folded into the same loop.
//!
//! The instruction retires one 8-byte word per cycle but its result is ready
//! only three cycles later, so a single dependent chain runs at a third of
//! the possible speed. Long inputs are therefore cut into three equal
//! stripes whose registers are independent; the three chains overlap in the
//! pipeline and are merged at the end of each block with a [`ShiftTable`]
//! (four lookups), which costs far less than the block itself.
//!
//! When copying, each 16 bytes are loaded into a vector register and stored
//! to the destination, and the two 8-byte words the CRC needs are re-read
//! from L1 right after: memory is crossed once, and the copy costs one store
//! per 16 bytes, which leaves the `crc32` unit as the only bottleneck.
//! Blocks come in three sizes (3 x 8 KiB, 3 x 256 B, 3 x 64 B) so that at
//! most 191 bytes go through the single, latency-bound chain at the end.

use core::arch::x86_64::{__m128i, _mm_crc32_u64, _mm_crc32_u8, _mm_loadu_si128, _mm_storeu_si128};

use crate::tables::ShiftTable;

/// Stripe length for big inputs: long enough that the merge is noise, short
/// enough that three stripes stay within L1 together with their copies.
const LONG_STRIPE_BYTES: usize = 8192;
/// Stripe length for medium inputs (a few hundred bytes up to 24 KiB).
const SHORT_STRIPE_BYTES: usize = 256;
/// Stripe length for what is left after the medium blocks, so at most 191
/// bytes go through the single, latency-bound chain.
const TINY_STRIPE_BYTES: usize = 64;

static LONG_SHIFT: ShiftTable = ShiftTable::new(LONG_STRIPE_BYTES);
static SHORT_SHIFT: ShiftTable = ShiftTable::new(SHORT_STRIPE_BYTES);
static TINY_SHIFT: ShiftTable = ShiftTable::new(TINY_STRIPE_BYTES);

/// Advances `register` over `length` bytes at `source`, copying them to
/// `destination` first when `COPY` is set.
///
/// # Safety
/// The CPU must support SSE4.2. `source` must be valid for `length` reads;
/// when `COPY` is set `destination` must be valid for `length` writes and
/// must not overlap the source. When `COPY` is clear `destination` is never
/// used and may be null.
///
/// Long inputs take the folding path where the CPU has it.
#[target_feature(enable = "sse4.2")]
pub(crate) unsafe fn update<const COPY: bool>(
    register: u32,
    source: *const u8,
    destination: *mut u8,
    length: usize,
) -> u32 {
    if length >= crate::folding::MIN_BYTES && crate::folding::available() {
        // SAFETY: the features were detected; the ranges are the caller's.
        return unsafe { crate::folding::update::<COPY>(register, source, destination, length) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { update_short::<COPY>(register, source, destination, length) }
}

/// [`update`] with the `crc32` instruction only.
///
/// # Safety
/// As [`update`].
#[target_feature(enable = "sse4.2")]
pub(crate) unsafe fn update_short<const COPY: bool>(
    register: u32,
    mut source: *const u8,
    mut destination: *mut u8,
    mut length: usize,
) -> u32 {
    let mut register = register;

    // Align the source so no load straddles a cache line; the stores follow
    // whatever alignment the destination has relative to it.
    let misalignment = source.align_offset(8);
    let prologue = if misalignment == usize::MAX {
        length
    } else {
        misalignment.min(length)
    };
    // SAFETY: prologue <= length, so these stay within the caller's ranges.
    unsafe {
        register = update_bytes::<COPY>(register, source, destination, prologue);
        source = source.add(prologue);
        if COPY {
            destination = destination.add(prologue);
        }
    }
    length -= prologue;

    while length >= 3 * LONG_STRIPE_BYTES {
        // SAFETY: 3 * LONG_STRIPE_BYTES bytes remain on both sides.
        unsafe {
            register = three_stripes::<COPY, LONG_STRIPE_BYTES>(
                register,
                source,
                destination,
                &LONG_SHIFT,
            );
            source = source.add(3 * LONG_STRIPE_BYTES);
            if COPY {
                destination = destination.add(3 * LONG_STRIPE_BYTES);
            }
        }
        length -= 3 * LONG_STRIPE_BYTES;
    }
    while length >= 3 * SHORT_STRIPE_BYTES {
        // SAFETY: 3 * SHORT_STRIPE_BYTES bytes remain on both sides.
        unsafe {
            register = three_stripes::<COPY, SHORT_STRIPE_BYTES>(
                register,
                source,
                destination,
                &SHORT_SHIFT,
            );
            source = source.add(3 * SHORT_STRIPE_BYTES);
            if COPY {
                destination = destination.add(3 * SHORT_STRIPE_BYTES);
            }
        }
        length -= 3 * SHORT_STRIPE_BYTES;
    }
    if length >= 3 * TINY_STRIPE_BYTES {
        // SAFETY: 3 * TINY_STRIPE_BYTES bytes remain on both sides.
        unsafe {
            register = three_stripes::<COPY, TINY_STRIPE_BYTES>(
                register,
                source,
                destination,
                &TINY_SHIFT,
            );
            source = source.add(3 * TINY_STRIPE_BYTES);
            if COPY {
                destination = destination.add(3 * TINY_STRIPE_BYTES);
            }
        }
        length -= 3 * TINY_STRIPE_BYTES;
    }

    let mut wide = u64::from(register);
    while length >= 8 {
        // SAFETY: at least 8 bytes remain on both sides; unaligned access is
        // explicit.
        unsafe {
            let word = (source as *const u64).read_unaligned();
            if COPY {
                (destination as *mut u64).write_unaligned(word);
                destination = destination.add(8);
            }
            wide = _mm_crc32_u64(wide, word);
            source = source.add(8);
        }
        length -= 8;
    }
    // SAFETY: exactly `length` (< 8) bytes remain on both sides.
    unsafe { update_bytes::<COPY>(wide as u32, source, destination, length) }
}

/// One block of three adjacent stripes of `STRIPE` bytes each, as three
/// independent `crc32` chains merged at the end.
///
/// # Safety
/// As [`update`], with `3 * STRIPE` in place of `length`.
#[target_feature(enable = "sse4.2")]
#[inline]
unsafe fn three_stripes<const COPY: bool, const STRIPE: usize>(
    register: u32,
    source: *const u8,
    destination: *mut u8,
    shift: &ShiftTable,
) -> u32 {
    let mut first = u64::from(register);
    let mut second = 0u64;
    let mut third = 0u64;
    let mut offset = 0;
    while offset < STRIPE {
        // SAFETY: offset + 2 * STRIPE + 16 <= 3 * STRIPE (STRIPE is a
        // multiple of 16), within the block on both sides; every access is
        // explicitly unaligned.
        unsafe {
            if COPY {
                // Copy with one 16-byte store per stripe rather than two
                // 8-byte ones: the store port, not the loads, is what would
                // otherwise compete with `crc32` for the cycle. The words the
                // CRC needs are re-read from L1, which has load ports to spare.
                for stripe in 0..3 {
                    let at = stripe * STRIPE + offset;
                    let vector = _mm_loadu_si128(source.add(at) as *const __m128i);
                    _mm_storeu_si128(destination.add(at) as *mut __m128i, vector);
                }
            }
            let word_first = (source.add(offset) as *const u64).read_unaligned();
            let word_second = (source.add(STRIPE + offset) as *const u64).read_unaligned();
            let word_third = (source.add(2 * STRIPE + offset) as *const u64).read_unaligned();
            first = _mm_crc32_u64(first, word_first);
            second = _mm_crc32_u64(second, word_second);
            third = _mm_crc32_u64(third, word_third);
            let word_first = (source.add(offset + 8) as *const u64).read_unaligned();
            let word_second = (source.add(STRIPE + offset + 8) as *const u64).read_unaligned();
            let word_third = (source.add(2 * STRIPE + offset + 8) as *const u64).read_unaligned();
            first = _mm_crc32_u64(first, word_first);
            second = _mm_crc32_u64(second, word_second);
            third = _mm_crc32_u64(third, word_third);
        }
        offset += 16;
    }
    let merged = shift.apply(first as u32) ^ second as u32;
    shift.apply(merged) ^ third as u32
}

/// Byte-at-a-time head and tail (fewer than eight bytes).
///
/// # Safety
/// As [`update`].
#[target_feature(enable = "sse4.2")]
#[inline]
unsafe fn update_bytes<const COPY: bool>(
    mut register: u32,
    source: *const u8,
    destination: *mut u8,
    length: usize,
) -> u32 {
    for index in 0..length {
        // SAFETY: index < length, within the caller's ranges.
        unsafe {
            let byte = source.add(index).read();
            if COPY {
                destination.add(index).write(byte);
            }
            register = _mm_crc32_u8(register, byte);
        }
    }
    register
}
