//! Wire format of resmpi frames: one fixed, versioned 80-byte header in front
//! of every payload, on every path (shm rings, TCP streams).
//!
//! Version 2 (this one) added what process fault tolerance needs below
//! matching: a per-(sender, receiver) logical message number that does not
//! depend on the physical link (the reliable link's `seq` is per link and
//! shared memory has none), the sender's incarnation and replica index, and
//! the length of an extension area at the start of the payload for protocol
//! piggybacks. A version-1 frame (64-byte header, resmpi before process FT)
//! is refused with an error that says so: every process of a job must run
//! the same resmpi.
//!
//! This crate owns only the byte layout. It knows nothing about sockets,
//! queues or MPI semantics. `FrameHeader` is the representation; `emit`
//! writes it, `parse` reads it back with every field checked, so a corrupt or
//! foreign frame is an error value, never a panic.
#![warn(missing_docs)]

pub mod bytes;
pub mod seal;

/// Magic number at offset 0 ("RM", little-endian).
pub const FRAME_MAGIC: u16 = 0x4D52;
/// Current header version.
pub const FRAME_VERSION: u8 = 2;
/// Size in bytes of the fixed header.
pub const HEADER_LEN_BYTES: usize = 80;
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
/// Flag on a message frame (eager, request-to-send): the message's content
/// depends on a failed process (a collective step that lost a
/// contribution), so its receive completes with MPIX_ERR_PROC_FAILED
/// instead of passing on a wrong result as a success.
pub const FLAG_FAILURE_TAINTED: u16 = 4;

/// The decoded 80-byte frame header.
///
/// Layout (little-endian): magic u16 @0, version u8 @2, kind u8 @3,
/// flags u16 @4, reserved u16 @6, source u32 @8, context u32 @12, tag i32 @16,
/// payload_len u32 @20, seq u64 @24, ack u64 @32, message_id u64 @40,
/// aux u64 @48, checksum u32 @56, header checksum u32 @60 (written by
/// [`seal::seal`], not a field here), logical_seq u64 @64, incarnation u32
/// @72, replica u16 @76, extension_len u16 @78.
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
    /// Per-(sender rank, receiver rank) number of the message a message
    /// frame (eager, request-to-send) starts, from 1; 0 on other frames. It
    /// survives a change of physical process, so a re-sent or replayed
    /// message is recognised.
    pub logical_seq: u64,
    /// Incarnation of the sending process (0 for the first one).
    pub incarnation: u32,
    /// Replica index of the sending process (0 without replication).
    pub replica: u16,
    /// Bytes at the start of the payload that are a protocol's piggyback,
    /// not message data (0 when no protocol adds any).
    pub extension_len: u16,
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
    /// An extension area longer than the payload that holds it.
    ExtensionTooLong(u16),
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Truncated => write!(f, "frame shorter than its header"),
            ParseError::BadMagic => write!(f, "not a resmpi frame (bad magic)"),
            ParseError::BadVersion(v) if *v < FRAME_VERSION => write!(
                f,
                "frame version {v} comes from an older resmpi (this one speaks version {FRAME_VERSION}): every process of a job must run the same resmpi"
            ),
            ParseError::BadVersion(v) => write!(
                f,
                "frame version {v} comes from a newer resmpi (this one speaks version {FRAME_VERSION}): every process of a job must run the same resmpi"
            ),
            ParseError::BadKind(k) => write!(f, "unknown frame kind {k}"),
            ParseError::PayloadTooLarge(n) => write!(f, "payload of {n} bytes exceeds the limit"),
            ParseError::ExtensionTooLong(n) => {
                write!(f, "extension area of {n} bytes is longer than the payload")
            }
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
            logical_seq: 0,
            incarnation: 0,
            replica: 0,
            extension_len: 0,
        }
    }

    /// Write the header into its wire form (the header checksum zero).
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
        out[64..72].copy_from_slice(&self.logical_seq.to_le_bytes());
        out[72..76].copy_from_slice(&self.incarnation.to_le_bytes());
        out[76..78].copy_from_slice(&self.replica.to_le_bytes());
        out[78..80].copy_from_slice(&self.extension_len.to_le_bytes());
    }

    /// The header as a fresh array.
    #[inline]
    pub fn to_bytes(&self) -> [u8; HEADER_LEN_BYTES] {
        let mut out = [0u8; HEADER_LEN_BYTES];
        self.emit(&mut out);
        out
    }

    /// Parse and check a header from the first `HEADER_LEN_BYTES` of
    /// `bytes`. A frame of another version is told apart by its version
    /// byte (at the same place in every version) before its length.
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<FrameHeader, ParseError> {
        if bytes.len() >= 4
            && u16::from_le_bytes([bytes[0], bytes[1]]) == FRAME_MAGIC
            && bytes[2] != FRAME_VERSION
        {
            return Err(ParseError::BadVersion(bytes[2]));
        }
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
        let extension_len = u16_at(78);
        if u32::from(extension_len) > payload_len {
            return Err(ParseError::ExtensionTooLong(extension_len));
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
            logical_seq: u64_at(64),
            incarnation: u32_at(72),
            replica: u16_at(76),
            extension_len,
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
        header.logical_seq = u64::MAX - 7;
        header.incarnation = 3;
        header.replica = 2;
        header.extension_len = 16;
        assert_eq!(FrameHeader::parse(&header.to_bytes()), Ok(header));
    }

    #[test]
    fn a_version_one_frame_is_refused_with_a_sentence_that_says_why() {
        // A version-1 header: 64 bytes, same magic and version offset.
        let mut old = [0u8; 64];
        old[0..2].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        old[2] = 1;
        old[3] = FrameKind::Eager as u8;
        let error = FrameHeader::parse(&old).unwrap_err();
        assert_eq!(error, ParseError::BadVersion(1));
        let text = error.to_string();
        assert!(
            text.contains("older resmpi") && text.contains("same resmpi"),
            "{text}"
        );
        let mut newer = FrameHeader::new(FrameKind::Eager, 0).to_bytes();
        newer[2] = 3;
        assert!(FrameHeader::parse(&newer)
            .unwrap_err()
            .to_string()
            .contains("newer resmpi"));
    }

    #[test]
    fn an_extension_longer_than_its_payload_is_refused() {
        let mut header = FrameHeader::new(FrameKind::Eager, 0);
        header.payload_len = 8;
        header.extension_len = 9;
        assert_eq!(
            FrameHeader::parse(&header.to_bytes()),
            Err(ParseError::ExtensionTooLong(9))
        );
        header.extension_len = 8;
        assert!(FrameHeader::parse(&header.to_bytes()).is_ok());
    }

    #[test]
    fn parse_rejects_garbage_without_panicking() {
        assert_eq!(FrameHeader::parse(&[0u8; 10]), Err(ParseError::Truncated));
        assert_eq!(
            FrameHeader::parse(&[0u8; HEADER_LEN_BYTES]),
            Err(ParseError::BadMagic)
        );
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
                assert!(u32::from(header.extension_len) <= header.payload_len);
                assert!(header.payload_len <= MAX_PAYLOAD_BYTES);
                let mut again = [0u8; HEADER_LEN_BYTES];
                header.emit(&mut again);
                assert_eq!(FrameHeader::parse(&again), Ok(header));
            }
        }
    }
}
