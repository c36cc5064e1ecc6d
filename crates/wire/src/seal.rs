//! Frame checksums: a CRC32C over payload and header sealed into the
//! header, plus a CRC32C of the header alone, so a receiver can trust where
//! a fragment goes before its payload is checked (and check the payload in
//! the same pass as its copy: LA-MPI's "CRC during the copy").
//!
//! Why here, beside the layout: the checksum is part of the wire format,
//! and the simulator runs the same `seal`/`verify` as real paths, so a
//! flipped bit is caught by the production check, not a model of it.

use resmpi_checksum::Crc32c;

use crate::HEADER_LEN_BYTES;

/// Where the frame checksum sits in the header.
pub const CHECKSUM_BYTES: std::ops::Range<usize> = 56..60;
/// Where the header's own checksum sits. It covers every other header byte.
pub const HEADER_CHECKSUM_BYTES: std::ops::Range<usize> = 60..64;
/// Header bytes before the checksum fields, covered by the header checksum.
const HEADER_COVERED_BYTES: std::ops::RangeTo<usize> = ..56;
/// Header bytes after the checksum fields (version 2), covered too.
const HEADER_COVERED_TAIL_BYTES: std::ops::Range<usize> = 64..HEADER_LEN_BYTES;

/// CRC32C of the header's bytes but its two checksum fields.
fn header_checksum(frame: &[u8]) -> u32 {
    Crc32c::new()
        .update(&frame[HEADER_COVERED_BYTES])
        .update(&frame[HEADER_COVERED_TAIL_BYTES])
        .finish()
}

/// CRC32C of a frame: its payload, then its header with the checksum field
/// zero. Payload first so the running CRC of a payload could be kept from
/// the copy that built the frame; the header's `ack` changes at every
/// retransmission, so the header part is always computed at send time.
pub fn frame_checksum(frame: &[u8]) -> u32 {
    let payload_crc = Crc32c::new().update(&frame[HEADER_LEN_BYTES..]).finish();
    checksum_from_payload_crc(frame, payload_crc)
}

/// The frame checksum, given the CRC32C of the payload: it continues over
/// the header (`frame`'s first `HEADER_LEN_BYTES`) with the checksum field zero.
fn checksum_from_payload_crc(frame: &[u8], payload_crc: u32) -> u32 {
    let mut zeroed = [0u8; HEADER_LEN_BYTES];
    zeroed.copy_from_slice(&frame[..HEADER_LEN_BYTES]);
    zeroed[CHECKSUM_BYTES].fill(0);
    Crc32c::resume(payload_crc).update(&zeroed).finish()
}

/// Write a frame's checksum into its header. If the checksum field holds
/// the payload's CRC32C (parked there by `offer`, computed during its copy),
/// only the header is checksummed here; frames the link makes itself carry
/// no payload, and a zero field is always recomputed in full, so either way
/// the result equals `frame_checksum`.
pub fn seal(header: &mut [u8; HEADER_LEN_BYTES], payload: &[u8]) {
    let own = header_checksum(header);
    header[HEADER_CHECKSUM_BYTES].copy_from_slice(&own.to_le_bytes());
    let parked = u32::from_le_bytes(header[CHECKSUM_BYTES].try_into().expect("4 bytes"));
    let payload_crc = if parked != 0 || payload.is_empty() {
        parked
    } else {
        Crc32c::new().update(payload).finish()
    };
    let checksum = checksum_from_payload_crc(header, payload_crc);
    header[CHECKSUM_BYTES].copy_from_slice(&checksum.to_le_bytes());
}

/// Whether a frame's checksums match its bytes.
pub fn verify(frame: &[u8]) -> bool {
    header_verifies(frame) && frame[CHECKSUM_BYTES] == frame_checksum(frame).to_le_bytes()
}

/// Whether a frame's header matches its own checksum.
pub fn header_verifies(frame: &[u8]) -> bool {
    frame.len() >= HEADER_LEN_BYTES
        && frame[HEADER_CHECKSUM_BYTES] == header_checksum(frame).to_le_bytes()
}

/// Whether `payload_crc`, the CRC32C of a frame's payload computed while it
/// was copied out, completes to the frame's checksum.
pub fn payload_checksum_matches(frame: &[u8], payload_crc: u32) -> bool {
    frame[CHECKSUM_BYTES] == checksum_from_payload_crc(frame, payload_crc).to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameHeader, FrameKind};

    #[test]
    fn sealed_frame_verifies_and_any_single_bit_flip_is_caught() {
        let mut header = FrameHeader::new(FrameKind::Eager, 3);
        header.payload_len = 40;
        header.seq = 9;
        let mut frame = header.to_bytes().to_vec();
        frame.extend((0..40u8).map(|i| i.wrapping_mul(37)));
        let (head, payload) = frame.split_at_mut(HEADER_LEN_BYTES);
        let head: &mut [u8; HEADER_LEN_BYTES] = head.try_into().unwrap();
        let mut parked = *head;
        seal(head, payload);
        assert!(verify(&frame));
        // A payload CRC parked by `offer` gives the same seal.
        let payload_crc = resmpi_checksum::crc32c(&frame[HEADER_LEN_BYTES..]);
        parked[CHECKSUM_BYTES].copy_from_slice(&payload_crc.to_le_bytes());
        seal(&mut parked, &frame[HEADER_LEN_BYTES..]);
        assert_eq!(parked[..], frame[..HEADER_LEN_BYTES]);
        for bit in 0..frame.len() * 8 {
            let mut flipped = frame.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(!verify(&flipped), "flip of bit {bit} not caught");
        }
    }

    #[test]
    fn fused_check_trusts_only_an_intact_header_and_catches_any_payload_flip() {
        let mut header = FrameHeader::new(FrameKind::Data, 1);
        header.payload_len = 48;
        header.seq = 4;
        header.aux = 4096;
        let mut frame = header.to_bytes().to_vec();
        frame.extend((0..48u8).map(|i| i.wrapping_mul(91)));
        let (head, payload) = frame.split_at_mut(HEADER_LEN_BYTES);
        seal(head.try_into().unwrap(), payload);
        assert!(header_verifies(&frame));
        let payload_crc = |frame: &[u8]| resmpi_checksum::crc32c(&frame[HEADER_LEN_BYTES..]);
        assert!(payload_checksum_matches(&frame, payload_crc(&frame)));
        // Where the payload goes (offset, request id, sequence) is in the
        // header: any flip there is caught before the payload is placed.
        for bit in 0..HEADER_LEN_BYTES * 8 {
            let mut flipped = frame.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let caught = !header_verifies(&flipped)
                || !payload_checksum_matches(&flipped, payload_crc(&flipped));
            assert!(caught, "header flip of bit {bit} not caught");
        }
        // A payload flip passes the header check and fails the fused one.
        for bit in HEADER_LEN_BYTES * 8..frame.len() * 8 {
            let mut flipped = frame.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(header_verifies(&flipped));
            assert!(
                !payload_checksum_matches(&flipped, payload_crc(&flipped)),
                "payload flip of bit {bit} not caught"
            );
        }
    }
}
