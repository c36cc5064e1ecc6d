//! CRC32C (Castagnoli; the iSCSI, ext4 and SCTP CRC) for resmpi frames.
//!
//! Why this crate exists: issue 3 asks for every fragment on an unreliable
//! path to carry a CRC over header and payload, at a bandwidth cost of at
//! most a few percent. A checksum pass over a buffer that was just copied
//! reads all of it from memory a second time, which is what makes
//! checksumming expensive; LA-MPI's CRC "is generated at the same time data
//! is copied, if at all possible". [`Crc32c::copy_and_update`] therefore
//! checksums the bytes while copying them into or out of the wire buffer, in
//! one pass.
//!
//! CRC32C rather than CRC32 or a sum: x86_64 has an instruction for it
//! (SSE4.2 `crc32`), and it detects every burst error of up to 32 bits and
//! every odd number of flipped bits, which a ones-complement sum does not.
//!
//! Paths: on x86_64 with SSE4.2 (detected once at run time) the instruction
//! is used, with three independent streams for long inputs; everywhere else
//! a slicing-by-8 table ([`portable`]). Both give identical results.
//!
//! This crate owns only the arithmetic. Where the CRC sits in a frame and
//! what happens on a mismatch belong to `resmpi-wire` and `resmpi-reliable`.
#![warn(missing_docs)]

#[cfg(target_arch = "x86_64")]
mod folding;
pub mod portable;
mod tables;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(test)]
mod tests;

/// Running CRC32C state (pre-final-xor), so a frame's header and payload can
/// be fed in pieces.
///
/// ```
/// use resmpi_checksum::{crc32c, Crc32c};
/// let whole = crc32c(b"header+payload");
/// let pieces = Crc32c::new().update(b"header").update(b"+payload").finish();
/// assert_eq!(whole, pieces);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crc32c(u32);

impl Crc32c {
    /// The state before any byte (register all ones).
    pub const fn new() -> Crc32c {
        Crc32c(!0)
    }

    /// Feeds `bytes` into the checksum.
    #[must_use]
    #[inline]
    pub fn update(self, bytes: &[u8]) -> Crc32c {
        #[cfg(target_arch = "x86_64")]
        if hardware_accelerated() {
            // SAFETY: SSE4.2 was detected; the source range is a live slice;
            // with COPY = false the null destination is never touched.
            let register = unsafe {
                x86_64::update::<false>(self.0, bytes.as_ptr(), core::ptr::null_mut(), bytes.len())
            };
            return Crc32c(register);
        }
        portable::update(self, bytes)
    }

    /// Copies `source` into `destination[..source.len()]` and feeds the same
    /// bytes into the checksum, in one pass over memory. Bytes of
    /// `destination` past `source.len()` are left untouched.
    ///
    /// # Panics
    /// If `destination` is shorter than `source`.
    #[must_use]
    #[inline]
    pub fn copy_and_update(self, destination: &mut [u8], source: &[u8]) -> Crc32c {
        assert!(
            destination.len() >= source.len(),
            "copy_and_update: destination holds {} bytes, source has {}",
            destination.len(),
            source.len()
        );
        #[cfg(target_arch = "x86_64")]
        if hardware_accelerated() {
            // SAFETY: SSE4.2 was detected; `source` is readable and
            // `destination` writable for `source.len()` bytes (asserted
            // above), and a `&mut` cannot overlap a `&`.
            let register = unsafe {
                x86_64::update::<true>(
                    self.0,
                    source.as_ptr(),
                    destination.as_mut_ptr(),
                    source.len(),
                )
            };
            return Crc32c(register);
        }
        portable::copy_and_update(self, destination, source)
    }

    /// Continue a checksum from a finished value: the state after the
    /// bytes that `finished` covers, so more bytes can follow
    /// (`resume(crc32c(a)).update(b).finish() == crc32c(a ++ b)`).
    pub const fn resume(finished: u32) -> Crc32c {
        Crc32c(finished ^ !0)
    }

    /// The CRC of everything fed so far (final xor applied). The state is
    /// `Copy`, so feeding may go on after this.
    pub const fn finish(self) -> u32 {
        self.0 ^ !0
    }
}

impl Default for Crc32c {
    fn default() -> Crc32c {
        Crc32c::new()
    }
}

/// CRC32C of `bytes` in one call: `Crc32c::new().update(bytes).finish()`.
///
/// ```
/// assert_eq!(resmpi_checksum::crc32c(b"123456789"), 0xE306_9283);
/// ```
#[must_use]
pub fn crc32c(bytes: &[u8]) -> u32 {
    Crc32c::new().update(bytes).finish()
}

/// Whether [`Crc32c`] uses a CPU instruction here rather than tables.
/// Detected on the first call and cached.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn hardware_accelerated() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    const UNKNOWN: u8 = 0;
    const ABSENT: u8 = 1;
    const PRESENT: u8 = 2;
    static DETECTED: AtomicU8 = AtomicU8::new(UNKNOWN);

    if cfg!(target_feature = "sse4.2") {
        return true;
    }
    match DETECTED.load(Ordering::Relaxed) {
        PRESENT => true,
        ABSENT => false,
        _ => {
            let present = std::arch::is_x86_feature_detected!("sse4.2");
            DETECTED.store(if present { PRESENT } else { ABSENT }, Ordering::Relaxed);
            present
        }
    }
}

/// Whether [`Crc32c`] uses a CPU instruction here rather than tables.
/// Always `false` on this architecture: only the table path exists.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub fn hardware_accelerated() -> bool {
    false
}

#[cfg(test)]
mod resume_tests {
    use super::*;

    #[test]
    fn resume_continues_a_finished_checksum() {
        let (a, b) = (b"payload bytes".as_slice(), b"then a header".as_slice());
        let joined: Vec<u8> = a.iter().chain(b).copied().collect();
        assert_eq!(
            Crc32c::resume(crc32c(a)).update(b).finish(),
            crc32c(&joined)
        );
        assert_eq!(Crc32c::resume(crc32c(&[])).update(b).finish(), crc32c(b));
    }
}
