//! Slicing-by-8 table implementation, used on CPUs without a CRC32C
//! instruction (and as the second opinion the tests check the hardware path
//! against). It is public so benchmarks and tests can exercise it on any
//! machine; ordinary callers should use [`Crc32c::update`], which picks the
//! fastest path itself.

use crate::tables::SLICING;
use crate::Crc32c;

/// [`Crc32c::update`] without the hardware path.
#[must_use]
pub fn update(state: Crc32c, bytes: &[u8]) -> Crc32c {
    let mut register = state.0;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        register = update_word(register, word);
    }
    Crc32c(update_bytes(register, words.remainder()))
}

/// [`Crc32c::copy_and_update`] without the hardware path: each eight-byte
/// word is loaded once, stored to `destination` and folded into the
/// register, so the source is read from memory a single time.
///
/// # Panics
/// If `destination` is shorter than `source`.
#[must_use]
pub fn copy_and_update(state: Crc32c, destination: &mut [u8], source: &[u8]) -> Crc32c {
    assert!(
        destination.len() >= source.len(),
        "copy_and_update: destination holds {} bytes, source has {}",
        destination.len(),
        source.len()
    );
    let destination = &mut destination[..source.len()];
    let mut register = state.0;
    let mut source_words = source.chunks_exact(8);
    let mut destination_words = destination.chunks_exact_mut(8);
    for (to, from) in (&mut destination_words).zip(&mut source_words) {
        to.copy_from_slice(from);
        register = update_word(register, from);
    }
    let tail = source_words.remainder();
    destination_words.into_remainder().copy_from_slice(tail);
    Crc32c(update_bytes(register, tail))
}

/// Folds eight bytes into the register. Only the first four bytes meet the
/// register; the lookups for the last four depend on the data alone, so they
/// are summed apart and stay off the loop-carried dependency chain.
#[inline(always)]
fn update_word(register: u32, word: &[u8]) -> u32 {
    let low = u32::from_le_bytes([word[0], word[1], word[2], word[3]]) ^ register;
    let high = u32::from_le_bytes([word[4], word[5], word[6], word[7]]);
    let data_only = (SLICING[3][(high & 0xFF) as usize]
        ^ SLICING[2][((high >> 8) & 0xFF) as usize])
        ^ (SLICING[1][((high >> 16) & 0xFF) as usize] ^ SLICING[0][(high >> 24) as usize]);
    let through_register = (SLICING[7][(low & 0xFF) as usize]
        ^ SLICING[6][((low >> 8) & 0xFF) as usize])
        ^ (SLICING[5][((low >> 16) & 0xFF) as usize] ^ SLICING[4][(low >> 24) as usize]);
    through_register ^ data_only
}

#[inline(always)]
fn update_bytes(mut register: u32, bytes: &[u8]) -> u32 {
    for &byte in bytes {
        register = SLICING[0][((register ^ u32::from(byte)) & 0xFF) as usize] ^ (register >> 8);
    }
    register
}
