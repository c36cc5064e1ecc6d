//! Carry-less multiplication ("folding") path for long inputs, on CPUs with
//! AVX-512 and VPCLMULQDQ.
//!
//! Why: the `crc32` instruction retires 8 bytes per cycle at best (about
//! 25 GB/s here), slower than the copy it is fused with (memcpy runs at
//! twice that in cache), so on a fast network path the checksum, not the
//! data movement, set the bandwidth. Folding (Intel, "Fast CRC Computation
//! for Generic Polynomials Using PCLMULQDQ", 2009) treats the running
//! remainder as a 128-bit polynomial per lane and moves it forward over the
//! data by multiplying with constants `x^(d±32) mod P`: four 512-bit
//! accumulators each take 64 bytes per step, independent of each other,
//! limited by loads rather than by a dependency chain.
//!
//! At the end the accumulators are folded into one 128-bit value whose CRC
//! (from a zero register) equals the CRC of everything consumed; that last
//! 16 bytes and the tail go through the `crc32` instruction path, so no
//! Barrett reduction is needed. The constants are computed at compile time
//! from the polynomial (`tables::fold_constant`), and a unit test checks the
//! formula against the published CRC-32/IEEE ones.

use core::arch::x86_64::{
    __m128i, __m512i, _mm512_castsi512_si128, _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32,
    _mm512_loadu_si512, _mm512_set_epi64, _mm512_storeu_si512, _mm512_ternarylogic_epi64,
    _mm512_xor_si512, _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_extract_epi64, _mm_loadu_si128,
    _mm_set_epi64x, _mm_storeu_si128, _mm_xor_si128,
};

use crate::tables::fold_constant;

/// Shortest input worth the set-up: four accumulators of 64 bytes.
pub(crate) const MIN_BYTES: usize = 256;

/// (`x^(d+32)`, `x^(d-32)`) for folding by `d` bits, in the reflected,
/// shifted form the multiplications use.
const FOLD_256_BYTES: (u64, u64) = (fold_constant(2048 + 32), fold_constant(2048 - 32));
const FOLD_64_BYTES: (u64, u64) = (fold_constant(512 + 32), fold_constant(512 - 32));
const FOLD_16_BYTES: (u64, u64) = (fold_constant(128 + 32), fold_constant(128 - 32));

/// Whether this CPU has what [`update`] needs. Detected once.
pub(crate) fn available() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    static DETECTED: AtomicU8 = AtomicU8::new(0);
    match DETECTED.load(Ordering::Relaxed) {
        2 => true,
        1 => false,
        _ => {
            let present = std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("vpclmulqdq")
                && std::arch::is_x86_feature_detected!("pclmulqdq")
                && std::arch::is_x86_feature_detected!("sse4.2");
            DETECTED.store(if present { 2 } else { 1 }, Ordering::Relaxed);
            present
        }
    }
}

/// Every 128-bit lane of `accumulator` moved forward by the distance the
/// `keys` stand for, plus `data`: `lo * keys.lo ^ hi * keys.hi ^ data`.
#[inline]
#[target_feature(enable = "avx512f,vpclmulqdq")]
fn fold_512(accumulator: __m512i, data: __m512i, keys: __m512i) -> __m512i {
    let low = _mm512_clmulepi64_epi128(accumulator, keys, 0x00);
    let high = _mm512_clmulepi64_epi128(accumulator, keys, 0x11);
    // 0x96: three-way exclusive or.
    _mm512_ternarylogic_epi64(low, high, data, 0x96)
}

#[inline]
#[target_feature(enable = "pclmulqdq,sse2")]
fn fold_128(accumulator: __m128i, data: __m128i, keys: __m128i) -> __m128i {
    let low = _mm_clmulepi64_si128(accumulator, keys, 0x00);
    let high = _mm_clmulepi64_si128(accumulator, keys, 0x11);
    _mm_xor_si128(_mm_xor_si128(low, high), data)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn keys_512((low, high): (u64, u64)) -> __m512i {
    let (low, high) = (low as i64, high as i64);
    _mm512_set_epi64(high, low, high, low, high, low, high, low)
}

/// Load 64 bytes at `source` (and store them at `destination` when `COPY`).
///
/// # Safety
/// 64 readable bytes at `source`; with `COPY`, 64 writable bytes at
/// `destination`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_64<const COPY: bool>(source: *const u8, destination: *mut u8) -> __m512i {
    // SAFETY: guaranteed by the caller; unaligned loads and stores.
    unsafe {
        let data = _mm512_loadu_si512(source.cast());
        if COPY {
            _mm512_storeu_si512(destination.cast(), data);
        }
        data
    }
}

/// Advances `register` over `length >= MIN_BYTES` bytes at `source`,
/// copying them to `destination` first when `COPY` is set.
///
/// # Safety
/// [`available`] returned true. `source` must be valid for `length` reads;
/// with `COPY`, `destination` valid for `length` writes, not overlapping.
#[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.2")]
pub(crate) unsafe fn update<const COPY: bool>(
    register: u32,
    mut source: *const u8,
    mut destination: *mut u8,
    mut length: usize,
) -> u32 {
    debug_assert!(length >= MIN_BYTES);
    // SAFETY (the whole body): every pointer advance is matched by a length
    // decrement, and loads/stores only touch bytes below `length`.
    unsafe {
        let step = |source: &mut *const u8, destination: &mut *mut u8, bytes: usize| {
            *source = source.add(bytes);
            if COPY {
                *destination = destination.add(bytes);
            }
        };
        let mut accumulators = [
            load_64::<COPY>(source, destination),
            load_64::<COPY>(source.add(64), destination.wrapping_add(64)),
            load_64::<COPY>(source.add(128), destination.wrapping_add(128)),
            load_64::<COPY>(source.add(192), destination.wrapping_add(192)),
        ];
        // The register enters as the first 32 bits of the message, xored.
        accumulators[0] = _mm512_xor_si512(
            accumulators[0],
            _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, register as i64),
        );
        step(&mut source, &mut destination, 256);
        length -= 256;

        let keys = keys_512(FOLD_256_BYTES);
        while length >= 256 {
            for (lane, accumulator) in accumulators.iter_mut().enumerate() {
                let data =
                    load_64::<COPY>(source.add(64 * lane), destination.wrapping_add(64 * lane));
                *accumulator = fold_512(*accumulator, data, keys);
            }
            step(&mut source, &mut destination, 256);
            length -= 256;
        }

        let keys = keys_512(FOLD_64_BYTES);
        let mut folded = accumulators[0];
        for &next in &accumulators[1..] {
            folded = fold_512(folded, next, keys);
        }
        while length >= 64 {
            folded = fold_512(folded, load_64::<COPY>(source, destination), keys);
            step(&mut source, &mut destination, 64);
            length -= 64;
        }

        let (low, high) = FOLD_16_BYTES;
        let keys = _mm_set_epi64x(high as i64, low as i64);
        let mut remainder = _mm512_castsi512_si128(folded);
        remainder = fold_128(remainder, _mm512_extracti32x4_epi32::<1>(folded), keys);
        remainder = fold_128(remainder, _mm512_extracti32x4_epi32::<2>(folded), keys);
        remainder = fold_128(remainder, _mm512_extracti32x4_epi32::<3>(folded), keys);
        while length >= 16 {
            let data = _mm_loadu_si128(source.cast());
            if COPY {
                _mm_storeu_si128(destination.cast(), data);
            }
            remainder = fold_128(remainder, data, keys);
            step(&mut source, &mut destination, 16);
            length -= 16;
        }

        // The CRC from a zero register of the 16 bytes left equals the CRC
        // of everything consumed so far.
        let low = _mm_cvtsi128_si64(remainder) as u64;
        let high = _mm_extract_epi64::<1>(remainder) as u64;
        let register = core::arch::x86_64::_mm_crc32_u64(0, low);
        let register = core::arch::x86_64::_mm_crc32_u64(register, high) as u32;
        crate::x86_64::update_short::<COPY>(register, source, destination, length)
    }
}
