//! The protocol's control frames (carried as the engine's protocol frames,
//! `CONTROL_PROTOCOL`), with a checked parse.
//!
//! Layout: a version byte, a kind byte, then the kind's fields, all
//! little-endian:
//! - `Determinants`: first position u64, count u32, count × (ordinal u64,
//!   source u32) — a rank's determinants, from position `first` of its
//!   list, to the rank that holds them.
//! - `Ack`: count u64 — the holder has the first `count` determinants.
//! - `Replay`: last u8 (0 or 1), count u32, entries as above — the holder
//!   hands a restarted rank the determinants of its earlier incarnations.
//! - `Finished`: no fields — the sender has passed `MPI_Finalize`'s barrier.

/// Version of this frame format.
pub const VERSION: u8 = 1;
const KIND_DETERMINANTS: u8 = 1;
const KIND_ACK: u8 = 2;
const KIND_REPLAY: u8 = 3;
const KIND_FINISHED: u8 = 4;
const ENTRY_BYTES: usize = 12;

/// Most determinants one frame carries (about 12 KiB: well under one
/// frame's payload on every path).
pub const ENTRIES_PER_FRAME_MAX: usize = 1024;

/// One determinant: the `ordinal`-th ANY_SOURCE receive this rank posted
/// matched a message from world rank `source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Determinant {
    /// Which wildcard receive (0 = the first this rank posted).
    pub ordinal: u64,
    /// The world rank it matched.
    pub source: u32,
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Determinants from position `first` of the sender's list.
    Determinants {
        /// Position of the first entry in the sender's list.
        first: u64,
        /// The entries.
        entries: Vec<Determinant>,
    },
    /// The holder has the sender's first `count` determinants.
    Ack {
        /// How many.
        count: u64,
    },
    /// Determinants of the receiver's earlier incarnations.
    Replay {
        /// The last replay frame.
        last: bool,
        /// The entries.
        entries: Vec<Determinant>,
    },
    /// The sender has passed `MPI_Finalize`'s barrier.
    Finished,
}

impl Frame {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![VERSION];
        match self {
            Frame::Determinants { first, entries } => {
                bytes.push(KIND_DETERMINANTS);
                bytes.extend_from_slice(&first.to_le_bytes());
                encode_entries(&mut bytes, entries);
            }
            Frame::Ack { count } => {
                bytes.push(KIND_ACK);
                bytes.extend_from_slice(&count.to_le_bytes());
            }
            Frame::Replay { last, entries } => {
                bytes.push(KIND_REPLAY);
                bytes.push(u8::from(*last));
                encode_entries(&mut bytes, entries);
            }
            Frame::Finished => bytes.push(KIND_FINISHED),
        }
        bytes
    }

    /// Parse `bytes`; an error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Frame, String> {
        let mut reader = Reader { bytes, at: 0 };
        let version = reader.u8()?;
        if version != VERSION {
            return Err(format!(
                "message-logging frame version {version}, expected {VERSION}"
            ));
        }
        let frame = match reader.u8()? {
            KIND_DETERMINANTS => {
                let first = reader.u64()?;
                let entries = reader.entries()?;
                Frame::Determinants { first, entries }
            }
            KIND_ACK => Frame::Ack {
                count: reader.u64()?,
            },
            KIND_REPLAY => {
                let last = match reader.u8()? {
                    0 => false,
                    1 => true,
                    other => return Err(format!("replay frame: last flag {other}")),
                };
                let entries = reader.entries()?;
                Frame::Replay { last, entries }
            }
            KIND_FINISHED => Frame::Finished,
            other => return Err(format!("unknown message-logging frame kind {other}")),
        };
        if reader.at != bytes.len() {
            return Err(format!(
                "message-logging frame: {} bytes left over",
                bytes.len() - reader.at
            ));
        }
        Ok(frame)
    }
}

fn encode_entries(bytes: &mut Vec<u8>, entries: &[Determinant]) {
    bytes.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for entry in entries {
        bytes.extend_from_slice(&entry.ordinal.to_le_bytes());
        bytes.extend_from_slice(&entry.source.to_le_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, length: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(length)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| "message-logging frame is truncated".to_string())?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn entries(&mut self) -> Result<Vec<Determinant>, String> {
        let count = self.u32()? as usize;
        if count > ENTRIES_PER_FRAME_MAX || count * ENTRY_BYTES > self.bytes.len() - self.at {
            return Err(format!("message-logging frame claims {count} determinants"));
        }
        (0..count)
            .map(|_| {
                Ok(Determinant {
                    ordinal: self.u64()?,
                    source: self.u32()?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_and_every_truncation_is_refused() {
        let entries = vec![
            Determinant {
                ordinal: 0,
                source: 3,
            },
            Determinant {
                ordinal: 9,
                source: 1,
            },
        ];
        let frames = [
            Frame::Determinants {
                first: 5,
                entries: entries.clone(),
            },
            Frame::Ack { count: 77 },
            Frame::Replay {
                last: true,
                entries,
            },
            Frame::Finished,
        ];
        for frame in frames {
            let bytes = frame.encode();
            assert_eq!(Frame::decode(&bytes), Ok(frame));
            for length in 0..bytes.len() {
                assert!(Frame::decode(&bytes[..length]).is_err());
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Frame::decode(&longer).is_err());
        }
    }

    #[test]
    fn a_bad_version_kind_or_count_is_refused() {
        assert!(Frame::decode(&[2, KIND_ACK, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Frame::decode(&[VERSION, 9]).is_err());
        let mut huge = vec![VERSION, KIND_REPLAY, 1];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(Frame::decode(&huge).is_err());
    }
}
