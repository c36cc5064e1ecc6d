//! Wire format of resmpi frames: one fixed, versioned 64-byte header in front
//! of every payload, on every path (shm rings, TCP streams).
//!
//! This crate owns only the byte layout. It knows nothing about sockets,
//! queues or MPI semantics. `FrameHeader` is the representation; `emit`
//! writes it, `parse` reads it back with every field checked, so a corrupt or
//! foreign frame is an error value, never a panic.
#![warn(missing_docs)]

/// Magic number at offset 0 ("RM", little-endian).
pub const FRAME_MAGIC: u16 = 0x4D52;
/// Current header version.
pub const FRAME_VERSION: u8 = 1;
/// Size in bytes of the fixed header.
pub const HEADER_LEN_BYTES: usize = 64;
/// Largest payload one frame may carry.
pub const MAX_PAYLOAD_BYTES: u32 = 16 << 20;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// A whole message sent eagerly: envelope + payload. `aux` = total length.
    Eager = 1,
    /// Rendezvous request-to-send: envelope, no payload. `aux` = total length,
    /// `message_id` = sender's request id.
    RequestToSend = 2,
    /// Rendezvous clear-to-send. `message_id` = sender's request id,
    /// `aux` = receiver's request id.
    ClearToSend = 3,
    /// Rendezvous payload fragment. `message_id` = receiver's request id,
    /// `aux` = byte offset of this fragment in the message.
    Data = 4,
    /// Acknowledgement only (reliability layer); no payload.
    Ack = 5,
    /// Synchronous-send acknowledgement: the eager message with
    /// `message_id` was matched by the receiver.
    SyncAck = 6,
    /// Runtime control (abort notices, finalize handshake, ...).
    Control = 7,
}

impl FrameKind {
    /// Decode a kind byte.
    pub fn from_u8(value: u8) -> Option<FrameKind> {
        Some(match value {
            1 => FrameKind::Eager,
            2 => FrameKind::RequestToSend,
            3 => FrameKind::ClearToSend,
            4 => FrameKind::Data,
            5 => FrameKind::Ack,
            6 => FrameKind::SyncAck,
            7 => FrameKind::Control,
            _ => return None,
        })
    }
}

/// Flag: the sender wants a `SyncAck` when the message is matched (MPI_Ssend).
pub const FLAG_SYNC: u16 = 1;
/// Flag: acknowledge this frame at once instead of coalescing the ack: the
/// sender completes a send only when its last frame is acknowledged.
pub const FLAG_ACK_NOW: u16 = 2;

/// The decoded 64-byte frame header.
///
/// Layout (little-endian): magic u16 @0, version u8 @2, kind u8 @3,
/// flags u16 @4, reserved u16 @6, source u32 @8, context u32 @12, tag i32 @16,
/// payload_len u32 @20, seq u64 @24, ack u64 @32, message_id u64 @40,
/// aux u64 @48, checksum u32 @56, reserved u32 @60.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Frame kind.
    pub kind: FrameKind,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// Sender's rank in MPI_COMM_WORLD.
    pub source: u32,
    /// Communicator context id (matching key).
    pub context: u32,
    /// MPI tag (matching key).
    pub tag: i32,
    /// Bytes of payload following the header.
    pub payload_len: u32,
    /// Per-(sender, receiver) fragment sequence number; 0 when the
    /// reliability layer is off.
    pub seq: u64,
    /// Piggybacked cumulative acknowledgement (reliability layer).
    pub ack: u64,
    /// Request id, meaning depends on `kind`.
    pub message_id: u64,
    /// Length or offset, meaning depends on `kind`.
    pub aux: u64,
    /// CRC32C over header (with this field zero) and payload; 0 = none.
    pub checksum: u32,
}

/// Why a header could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Fewer than `HEADER_LEN_BYTES` bytes.
    Truncated,
    /// Magic number mismatch: not a resmpi frame.
    BadMagic,
    /// Unknown header version.
    BadVersion(u8),
    /// Unknown frame kind.
    BadKind(u8),
    /// Payload length above `MAX_PAYLOAD_BYTES`.
    PayloadTooLarge(u32),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Truncated => write!(f, "frame shorter than its header"),
            ParseError::BadMagic => write!(f, "not a resmpi frame (bad magic)"),
            ParseError::BadVersion(v) => write!(f, "unsupported frame version {v}"),
            ParseError::BadKind(k) => write!(f, "unknown frame kind {k}"),
            ParseError::PayloadTooLarge(n) => write!(f, "payload of {n} bytes exceeds the limit"),
        }
    }
}

impl std::error::Error for ParseError {}

impl FrameHeader {
    /// A header with every optional field zero.
    pub fn new(kind: FrameKind, source: u32) -> FrameHeader {
        FrameHeader {
            kind,
            flags: 0,
            source,
            context: 0,
            tag: 0,
            payload_len: 0,
            seq: 0,
            ack: 0,
            message_id: 0,
            aux: 0,
            checksum: 0,
        }
    }

    /// Write the header into its 64-byte wire form.
    #[inline]
    pub fn emit(&self, out: &mut [u8; HEADER_LEN_BYTES]) {
        out[0..2].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        out[2] = FRAME_VERSION;
        out[3] = self.kind as u8;
        out[4..6].copy_from_slice(&self.flags.to_le_bytes());
        out[6..8].copy_from_slice(&0u16.to_le_bytes());
        out[8..12].copy_from_slice(&self.source.to_le_bytes());
        out[12..16].copy_from_slice(&self.context.to_le_bytes());
        out[16..20].copy_from_slice(&self.tag.to_le_bytes());
        out[20..24].copy_from_slice(&self.payload_len.to_le_bytes());
        out[24..32].copy_from_slice(&self.seq.to_le_bytes());
        out[32..40].copy_from_slice(&self.ack.to_le_bytes());
        out[40..48].copy_from_slice(&self.message_id.to_le_bytes());
        out[48..56].copy_from_slice(&self.aux.to_le_bytes());
        out[56..60].copy_from_slice(&self.checksum.to_le_bytes());
        out[60..64].copy_from_slice(&0u32.to_le_bytes());
    }

    /// The header as a fresh 64-byte array.
    #[inline]
    pub fn to_bytes(&self) -> [u8; HEADER_LEN_BYTES] {
        let mut out = [0u8; HEADER_LEN_BYTES];
        self.emit(&mut out);
        out
    }

    /// Parse and check a header from the first 64 bytes of `bytes`.
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<FrameHeader, ParseError> {
        if bytes.len() < HEADER_LEN_BYTES {
            return Err(ParseError::Truncated);
        }
        let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        if u16_at(0) != FRAME_MAGIC {
            return Err(ParseError::BadMagic);
        }
        if bytes[2] != FRAME_VERSION {
            return Err(ParseError::BadVersion(bytes[2]));
        }
        let kind = FrameKind::from_u8(bytes[3]).ok_or(ParseError::BadKind(bytes[3]))?;
        let payload_len = u32_at(20);
        if payload_len > MAX_PAYLOAD_BYTES {
            return Err(ParseError::PayloadTooLarge(payload_len));
        }
        Ok(FrameHeader {
            kind,
            flags: u16_at(4),
            source: u32_at(8),
            context: u32_at(12),
            tag: u32_at(16) as i32,
            payload_len,
            seq: u64_at(24),
            ack: u64_at(32),
            message_id: u64_at(40),
            aux: u64_at(48),
            checksum: u32_at(56),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_then_parse_round_trips_every_field() {
        let mut header = FrameHeader::new(FrameKind::Data, 7);
        header.flags = FLAG_SYNC;
        header.context = 42;
        header.tag = -5;
        header.payload_len = 1234;
        header.seq = u64::MAX - 1;
        header.ack = 99;
        header.message_id = 0xdead_beef_0000_0001;
        header.aux = 1 << 40;
        header.checksum = 0xabcd_1234;
        assert_eq!(FrameHeader::parse(&header.to_bytes()), Ok(header));
    }

    #[test]
    fn parse_rejects_garbage_without_panicking() {
        assert_eq!(FrameHeader::parse(&[0u8; 10]), Err(ParseError::Truncated));
        assert_eq!(FrameHeader::parse(&[0u8; 64]), Err(ParseError::BadMagic));
        let mut bytes = FrameHeader::new(FrameKind::Eager, 0).to_bytes();
        bytes[2] = 9;
        assert_eq!(FrameHeader::parse(&bytes), Err(ParseError::BadVersion(9)));
        bytes[2] = FRAME_VERSION;
        bytes[3] = 200;
        assert_eq!(FrameHeader::parse(&bytes), Err(ParseError::BadKind(200)));
        bytes[3] = 1;
        bytes[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            FrameHeader::parse(&bytes),
            Err(ParseError::PayloadTooLarge(_))
        ));
    }
}

#[cfg(test)]
mod robustness {
    use super::*;

    /// SplitMix64: a tiny deterministic generator so the test needs no crate.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn parse_never_panics_on_random_or_mutated_bytes_and_valid_headers_round_trip() {
        let mut state = 7;
        for round in 0..200_000 {
            let mut bytes = [0u8; HEADER_LEN_BYTES];
            if round % 2 == 0 {
                bytes
                    .iter_mut()
                    .for_each(|byte| *byte = next(&mut state) as u8);
            } else {
                let mut header = FrameHeader::new(FrameKind::Eager, next(&mut state) as u32);
                header.payload_len = (next(&mut state) % (MAX_PAYLOAD_BYTES as u64 + 2)) as u32;
                header.seq = next(&mut state);
                header.emit(&mut bytes);
                let flips = next(&mut state) % 3;
                for _ in 0..flips {
                    let bit = next(&mut state) as usize % (HEADER_LEN_BYTES * 8);
                    bytes[bit / 8] ^= 1 << (bit % 8);
                }
            }
            let length = (next(&mut state) % (HEADER_LEN_BYTES as u64 + 1)) as usize;
            if let Ok(header) = FrameHeader::parse(&bytes[..length]) {
                assert_eq!(length, HEADER_LEN_BYTES);
                assert!(header.payload_len <= MAX_PAYLOAD_BYTES);
                let mut again = [0u8; HEADER_LEN_BYTES];
                header.emit(&mut again);
                assert_eq!(FrameHeader::parse(&again), Ok(header));
            }
        }
    }
}
