//! The protocol's control frames (carried as the engine's protocol frames,
//! `CONTROL_PROTOCOL`), with a checked parse.
//!
//! Layout: a version byte, a kind byte, then the kind's fields, all
//! little-endian:
//! - `Determinants`: first position u64, count u32, count × entry — a
//!   rank's determinants, from position `first` of its list, to the event
//!   logger (`event_logger.rs`), which stores them durably. An entry is a kind byte and its fields:
//!   - 0, wildcard: ordinal u64, source u32 — the `ordinal`-th
//!     ANY_SOURCE receive matched `source`;
//!   - 1, completion choice: ordinal u64, repeat u32 (at least 1), count
//!     u32, count × position u32 — the non-deterministic calls numbered
//!     `ordinal` to `ordinal + repeat - 1` each reported these positions
//!     (a run of failed tests and probes, logged lazily, is one entry with
//!     none);
//!   - 2, probe: ordinal u64, source u32, tag i32, length u64 — the
//!     `ordinal`-th non-deterministic call, a probe, found the message of
//!     `length` packed bytes from world rank `source` with `tag`.
//! - `Ack`: count u64 — the event logger has the first `count`
//!   determinants of the rank on disk (synced).
//! - `Replay`: first position u64, last u8 (0 or 1), count u32, count ×
//!   entry as above — the event logger hands a restarted rank the
//!   determinants of its earlier incarnations, from position `first` of
//!   its list (above 0 once a checkpoint of the rank let the logger trim
//!   the list: the replacement resumes from that checkpoint).
//! - `Finished`: no fields — the sender has passed `MPI_Finalize`'s barrier.
//! - `Covered`: last u64 — the sender's newest restartable checkpoint
//!   covers the messages the receiver sent it numbered 1 to `last`: the
//!   receiver may drop them from its log (garbage collection).
//! - `Hello`: rank u32, incarnation u32, replay u8 (0 or 1), optimistic
//!   u8 (0 or 1) — the first frame of a rank on each connection to the
//!   event logger: who it is, whether it wants its earlier incarnations'
//!   determinants, and whether its acks must carry the stable vector
//!   (optimistic logging, O2P).
//! - `Stable`: count u64, n u32, n × (rank u32, count u64) — an ack (as
//!   `Ack`) to an optimistic rank, with the logger's *stable vector*: for
//!   each rank listed, how many of its determinants are on disk (ranks
//!   with none are left out).
//! - `Depend`: n u32, n × (rank u32, incarnation u32, count u64) —
//!   piggybacked (O2P) just before an application message: the sender's
//!   state depends on the first `count` determinants of `rank`'s list as
//!   its incarnation `incarnation` had it, not known stable. Only entries
//!   changed since the sender's last message to the receiver are listed,
//!   and no frame goes when none is. (The incarnation tells a dead
//!   incarnation's count from its replacement's when the message arrives
//!   after the replacement re-joined.)
//! - `Query`: rank u32, incarnation u32 — an optimistic rank asks the
//!   event logger where the list of `rank`'s dead incarnation
//!   `incarnation` ends (it died, and the asker depends on determinants of
//!   it it does not know stable).
//! - `Answer`: rank u32, incarnation u32, count u64 — that list ends at
//!   `count`, all of it on disk: what the replacement replays.
//! - `Truncate`: count u64 — an orphan (optimistic logging) rolls back:
//!   the logger cuts its list to its first `count` determinants, durably
//!   (its replacement replays only those).
//! - `Truncated`: count u64 — the logger's answer once the cut is on disk.
//! - `Trim`: count u64 — the sender's newest restartable checkpoint (durable,
//!   with a position) covers the first `count` determinants of its list:
//!   the event logger may drop them (its replacement resumes from that
//!   checkpoint and never looks below its ordinals).

/// Version of this frame format (2: entries carry a kind, and completion
/// choices exist; 3: probe entries exist; 4: the event logger's `Hello`;
/// 5: optimistic logging's `Stable` and `Depend`, and the `Hello` flag;
/// 6: incarnations in `Depend`, `Query` and `Answer`, and the orphans'
/// `Truncate` and `Truncated`; 7: the checkpoints' `Trim`, and the first
/// position in `Replay`).
pub const VERSION: u8 = 7;
const KIND_DETERMINANTS: u8 = 1;
const KIND_ACK: u8 = 2;
const KIND_REPLAY: u8 = 3;
const KIND_FINISHED: u8 = 4;
const KIND_COVERED: u8 = 5;
const KIND_HELLO: u8 = 6;
const KIND_STABLE: u8 = 7;
const KIND_DEPEND: u8 = 8;
const KIND_QUERY: u8 = 9;
const KIND_ANSWER: u8 = 10;
const KIND_TRUNCATE: u8 = 11;
const KIND_TRUNCATED: u8 = 12;
const KIND_TRIM: u8 = 13;
/// An encoded (rank, count) pair of `Stable`.
const PAIR_BYTES: usize = 4 + 8;
/// An encoded (rank, incarnation, count) entry of `Depend`.
const DEPENDENCY_BYTES: usize = 4 + 4 + 8;
/// Most (rank, count) pairs one frame carries: one per rank of the
/// largest job the engine numbers (world ranks are u32, but a frame's
/// payload is far smaller; this bounds the decoder's allocation).
pub const PAIRS_PER_FRAME_MAX: usize = 1 << 16;
const ENTRY_WILDCARD: u8 = 0;
const ENTRY_CHOICE: u8 = 1;
const ENTRY_PROBE: u8 = 2;
/// An encoded probe entry.
const ENTRY_PROBE_BYTES: usize = 1 + 8 + 4 + 4 + 8;
/// The smallest encoded entry (a wildcard one).
const ENTRY_BYTES_MIN: usize = 13;

/// Most encoded entry bytes one frame carries when the sender packs
/// several entries in it (one entry always goes, whatever its size).
pub const ENTRY_BYTES_PER_FRAME_MAX: usize = 16 * 1024;

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

/// One completion-choice determinant: the non-deterministic calls (Test,
/// Testany, Waitany over several requests, Testsome, Waitsome over
/// several, Testall, Request_get_status, and the probes of [`Probed`])
/// numbered `ordinal` to `ordinal + repeat - 1` among this rank's each
/// reported the request positions `completed` (empty: nothing completed,
/// or a probe found nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The first call (0 = the first such call this rank made).
    pub ordinal: u64,
    /// How many consecutive calls (at least 1; more only for failed tests).
    pub repeat: u32,
    /// Positions in the application's array, in the order reported.
    pub completed: Vec<u32>,
}

/// One probe determinant: the non-deterministic call numbered `ordinal`
/// (in the same count as [`Choice`]'s), an Iprobe, Improbe, or a Probe or
/// Mprobe with MPI_ANY_SOURCE, found this message. (A probe that found
/// nothing is a [`Choice`] with no positions.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probed {
    /// The call.
    pub ordinal: u64,
    /// World rank the message came from.
    pub source: u32,
    /// Its tag.
    pub tag: i32,
    /// Its packed length.
    pub length_bytes: u64,
}

/// One entry of a rank's determinant list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// The source of an ANY_SOURCE receive.
    Wildcard(Determinant),
    /// The outcome of completion calls (or of probes that found nothing).
    Choice(Choice),
    /// The message a probe found.
    Probe(Probed),
}

impl Entry {
    /// Bytes of its wire form.
    pub fn encoded_len(&self) -> usize {
        match self {
            Entry::Wildcard(_) => ENTRY_BYTES_MIN,
            Entry::Choice(choice) => 1 + 8 + 4 + 4 + 4 * choice.completed.len(),
            Entry::Probe(_) => ENTRY_PROBE_BYTES,
        }
    }
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Determinants from position `first` of the sender's list.
    Determinants {
        /// Position of the first entry in the sender's list.
        first: u64,
        /// The entries.
        entries: Vec<Entry>,
    },
    /// The event logger has the first `count` determinants of the receiver on disk.
    Ack {
        /// How many.
        count: u64,
    },
    /// Determinants of the receiver's earlier incarnations.
    Replay {
        /// Position of the first entry in the receiver's list.
        first: u64,
        /// The last replay frame.
        last: bool,
        /// The entries.
        entries: Vec<Entry>,
    },
    /// The sender has passed `MPI_Finalize`'s barrier.
    Finished,
    /// The sender's checkpoint covers the receiver's messages to it up to
    /// `last`.
    Covered {
        /// The highest logical number covered.
        last: u64,
    },
    /// A rank introduces itself to the event logger.
    Hello {
        /// World rank.
        rank: u32,
        /// Its incarnation (0 at the start of the job).
        incarnation: u32,
        /// It wants the determinants of its earlier incarnations.
        replay: bool,
        /// It logs optimistically: its acks carry the stable vector.
        optimistic: bool,
    },
    /// An ack with the stable vector (optimistic logging).
    Stable {
        /// The receiver's first `count` determinants are on disk.
        count: u64,
        /// (rank, determinants of it on disk), ranks with none left out.
        stable: Vec<(u32, u64)>,
    },
    /// The sender depends on these determinants, not known stable:
    /// piggybacked before an application message.
    Depend {
        /// What it depends on.
        entries: Vec<Dependency>,
    },
    /// An optimistic rank asks where a dead incarnation's list ends.
    Query {
        /// The dead rank.
        rank: u32,
        /// Its dead incarnation.
        incarnation: u32,
    },
    /// Where a dead incarnation's list ends, answering a `Query`.
    Answer {
        /// The dead rank.
        rank: u32,
        /// Its dead incarnation.
        incarnation: u32,
        /// Its determinants the replacement replays (all on disk).
        count: u64,
    },
    /// An orphan rolls back: keep only the first `count` of its list.
    Truncate {
        /// Determinants kept.
        count: u64,
    },
    /// The cut is on disk.
    Truncated {
        /// Determinants kept.
        count: u64,
    },
    /// The sender's newest restartable checkpoint covers the first
    /// `count` determinants of its list.
    Trim {
        /// Determinants covered.
        count: u64,
    },
}

/// One entry of a dependency vector as `Depend` carries it: the state
/// depends on the first `count` determinants of `rank`'s list as its
/// incarnation `incarnation` had made (or replayed) them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dependency {
    /// World rank.
    pub rank: u32,
    /// Its incarnation that had the list this long.
    pub incarnation: u32,
    /// Determinants.
    pub count: u64,
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
            Frame::Replay {
                first,
                last,
                entries,
            } => {
                bytes.push(KIND_REPLAY);
                bytes.extend_from_slice(&first.to_le_bytes());
                bytes.push(u8::from(*last));
                encode_entries(&mut bytes, entries);
            }
            Frame::Finished => bytes.push(KIND_FINISHED),
            Frame::Covered { last } => {
                bytes.push(KIND_COVERED);
                bytes.extend_from_slice(&last.to_le_bytes());
            }
            Frame::Hello {
                rank,
                incarnation,
                replay,
                optimistic,
            } => {
                bytes.push(KIND_HELLO);
                bytes.extend_from_slice(&rank.to_le_bytes());
                bytes.extend_from_slice(&incarnation.to_le_bytes());
                bytes.push(u8::from(*replay));
                bytes.push(u8::from(*optimistic));
            }
            Frame::Stable { count, stable } => {
                bytes.push(KIND_STABLE);
                bytes.extend_from_slice(&count.to_le_bytes());
                encode_pairs(&mut bytes, stable);
            }
            Frame::Depend { entries } => {
                bytes.push(KIND_DEPEND);
                bytes.extend_from_slice(&(entries.len() as u32).to_le_bytes());
                for entry in entries {
                    bytes.extend_from_slice(&entry.rank.to_le_bytes());
                    bytes.extend_from_slice(&entry.incarnation.to_le_bytes());
                    bytes.extend_from_slice(&entry.count.to_le_bytes());
                }
            }
            Frame::Query { rank, incarnation } => {
                bytes.push(KIND_QUERY);
                bytes.extend_from_slice(&rank.to_le_bytes());
                bytes.extend_from_slice(&incarnation.to_le_bytes());
            }
            Frame::Answer {
                rank,
                incarnation,
                count,
            } => {
                bytes.push(KIND_ANSWER);
                bytes.extend_from_slice(&rank.to_le_bytes());
                bytes.extend_from_slice(&incarnation.to_le_bytes());
                bytes.extend_from_slice(&count.to_le_bytes());
            }
            Frame::Truncate { count } => {
                bytes.push(KIND_TRUNCATE);
                bytes.extend_from_slice(&count.to_le_bytes());
            }
            Frame::Truncated { count } => {
                bytes.push(KIND_TRUNCATED);
                bytes.extend_from_slice(&count.to_le_bytes());
            }
            Frame::Trim { count } => {
                bytes.push(KIND_TRIM);
                bytes.extend_from_slice(&count.to_le_bytes());
            }
        }
        bytes
    }

    /// Parse `bytes`; an error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Frame, String> {
        let mut reader = Reader::new(bytes, "message-logging frame is truncated".to_string());
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
                let first = reader.u64()?;
                let last = match reader.u8()? {
                    0 => false,
                    1 => true,
                    other => return Err(format!("replay frame: last flag {other}")),
                };
                let entries = reader.entries()?;
                Frame::Replay {
                    first,
                    last,
                    entries,
                }
            }
            KIND_FINISHED => Frame::Finished,
            KIND_COVERED => Frame::Covered {
                last: reader.u64()?,
            },
            KIND_HELLO => Frame::Hello {
                rank: reader.u32()?,
                incarnation: reader.u32()?,
                replay: match reader.u8()? {
                    0 => false,
                    1 => true,
                    other => return Err(format!("hello frame: replay flag {other}")),
                },
                optimistic: match reader.u8()? {
                    0 => false,
                    1 => true,
                    other => return Err(format!("hello frame: optimistic flag {other}")),
                },
            },
            KIND_STABLE => Frame::Stable {
                count: reader.u64()?,
                stable: reader.pairs()?,
            },
            KIND_DEPEND => Frame::Depend {
                entries: reader.dependencies()?,
            },
            KIND_QUERY => Frame::Query {
                rank: reader.u32()?,
                incarnation: reader.u32()?,
            },
            KIND_ANSWER => Frame::Answer {
                rank: reader.u32()?,
                incarnation: reader.u32()?,
                count: reader.u64()?,
            },
            KIND_TRUNCATE => Frame::Truncate {
                count: reader.u64()?,
            },
            KIND_TRUNCATED => Frame::Truncated {
                count: reader.u64()?,
            },
            KIND_TRIM => Frame::Trim {
                count: reader.u64()?,
            },
            other => return Err(format!("unknown message-logging frame kind {other}")),
        };
        if reader.remaining() != 0 {
            return Err(format!(
                "message-logging frame: {} bytes left over",
                reader.remaining()
            ));
        }
        Ok(frame)
    }
}

/// Append `entries` as a frame carries them (count, then each entry): the
/// event logger's file records use the same form.
pub fn encode_entries(bytes: &mut Vec<u8>, entries: &[Entry]) {
    bytes.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for entry in entries {
        match entry {
            Entry::Wildcard(determinant) => {
                bytes.push(ENTRY_WILDCARD);
                bytes.extend_from_slice(&determinant.ordinal.to_le_bytes());
                bytes.extend_from_slice(&determinant.source.to_le_bytes());
            }
            Entry::Choice(choice) => {
                bytes.push(ENTRY_CHOICE);
                bytes.extend_from_slice(&choice.ordinal.to_le_bytes());
                bytes.extend_from_slice(&choice.repeat.to_le_bytes());
                bytes.extend_from_slice(&(choice.completed.len() as u32).to_le_bytes());
                for position in &choice.completed {
                    bytes.extend_from_slice(&position.to_le_bytes());
                }
            }
            Entry::Probe(probed) => {
                bytes.push(ENTRY_PROBE);
                bytes.extend_from_slice(&probed.ordinal.to_le_bytes());
                bytes.extend_from_slice(&probed.source.to_le_bytes());
                bytes.extend_from_slice(&probed.tag.to_le_bytes());
                bytes.extend_from_slice(&probed.length_bytes.to_le_bytes());
            }
        }
    }
}

/// Append (rank, count) pairs: how many, then each.
fn encode_pairs(bytes: &mut Vec<u8>, pairs: &[(u32, u64)]) {
    bytes.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    for (rank, count) in pairs {
        bytes.extend_from_slice(&rank.to_le_bytes());
        bytes.extend_from_slice(&count.to_le_bytes());
    }
}

/// Parse entries as [`encode_entries`] wrote them, the whole of `bytes`.
pub fn decode_entries(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let mut reader = Reader::new(bytes, "message-logging frame is truncated".to_string());
    let entries = reader.entries()?;
    if reader.remaining() != 0 {
        return Err(format!(
            "determinant entries: {} bytes left over",
            reader.remaining()
        ));
    }
    Ok(entries)
}

/// A cursor over a frame or log record, with the decoders of what only
/// message logging writes.
type Reader<'a> = resmpi_wire::bytes::ByteReader<'a, String>;

/// The determinant lists inside frames and log records.
trait EntryReader {
    fn pairs(&mut self) -> Result<Vec<(u32, u64)>, String>;
    fn dependencies(&mut self) -> Result<Vec<Dependency>, String>;
    fn entries(&mut self) -> Result<Vec<Entry>, String>;
    fn entry(&mut self) -> Result<Entry, String>;
}

impl EntryReader for Reader<'_> {
    fn pairs(&mut self) -> Result<Vec<(u32, u64)>, String> {
        let count = self.u32()? as usize;
        if count > PAIRS_PER_FRAME_MAX || count * PAIR_BYTES > self.remaining() {
            return Err(format!(
                "message-logging frame claims {count} (rank, count) pairs"
            ));
        }
        (0..count).map(|_| Ok((self.u32()?, self.u64()?))).collect()
    }
    fn dependencies(&mut self) -> Result<Vec<Dependency>, String> {
        let count = self.u32()? as usize;
        if count > PAIRS_PER_FRAME_MAX || count * DEPENDENCY_BYTES > self.remaining() {
            return Err(format!(
                "message-logging frame claims {count} dependency entries"
            ));
        }
        (0..count)
            .map(|_| {
                Ok(Dependency {
                    rank: self.u32()?,
                    incarnation: self.u32()?,
                    count: self.u64()?,
                })
            })
            .collect()
    }
    fn entries(&mut self) -> Result<Vec<Entry>, String> {
        let count = self.u32()? as usize;
        if count > ENTRIES_PER_FRAME_MAX || count * ENTRY_BYTES_MIN > self.remaining() {
            return Err(format!("message-logging frame claims {count} determinants"));
        }
        (0..count).map(|_| self.entry()).collect()
    }
    fn entry(&mut self) -> Result<Entry, String> {
        match self.u8()? {
            ENTRY_WILDCARD => Ok(Entry::Wildcard(Determinant {
                ordinal: self.u64()?,
                source: self.u32()?,
            })),
            ENTRY_CHOICE => {
                let ordinal = self.u64()?;
                let repeat = self.u32()?;
                if repeat == 0 {
                    return Err("completion-choice determinant repeated 0 times".to_string());
                }
                let count = self.u32()? as usize;
                if count.saturating_mul(4) > self.remaining() {
                    return Err(format!(
                        "completion-choice determinant claims {count} positions"
                    ));
                }
                if repeat > 1 && count > 0 {
                    return Err("a repeated completion choice must be a failed test".to_string());
                }
                let completed = (0..count).map(|_| self.u32()).collect::<Result<_, _>>()?;
                Ok(Entry::Choice(Choice {
                    ordinal,
                    repeat,
                    completed,
                }))
            }
            ENTRY_PROBE => {
                let ordinal = self.u64()?;
                let source = self.u32()?;
                let tag = self.u32()? as i32;
                let length_bytes = self.u64()?;
                if tag < 0 {
                    // A found message has a real tag (MPI_ANY_TAG is a pattern's).
                    return Err(format!("probe determinant with tag {tag}"));
                }
                Ok(Entry::Probe(Probed {
                    ordinal,
                    source,
                    tag,
                    length_bytes,
                }))
            }
            other => Err(format!("unknown determinant kind {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_and_every_truncation_is_refused() {
        let entries = vec![
            Entry::Wildcard(Determinant {
                ordinal: 0,
                source: 3,
            }),
            Entry::Choice(Choice {
                ordinal: 0,
                repeat: 1,
                completed: vec![2, 0],
            }),
            Entry::Choice(Choice {
                ordinal: 1,
                repeat: 40,
                completed: vec![],
            }),
            Entry::Wildcard(Determinant {
                ordinal: 9,
                source: 1,
            }),
            Entry::Probe(Probed {
                ordinal: 41,
                source: 2,
                tag: 7,
                length_bytes: 1 << 33,
            }),
        ];
        let frames = [
            Frame::Determinants {
                first: 5,
                entries: entries.clone(),
            },
            Frame::Ack { count: 77 },
            Frame::Replay {
                first: 12,
                last: true,
                entries,
            },
            Frame::Finished,
            Frame::Covered { last: 1 << 40 },
            Frame::Hello {
                rank: 3,
                incarnation: 2,
                replay: true,
                optimistic: true,
            },
            Frame::Stable {
                count: 4,
                stable: vec![(0, 4), (7, 1 << 35)],
            },
            Frame::Depend {
                entries: vec![Dependency {
                    rank: 2,
                    incarnation: 1,
                    count: 9,
                }],
            },
            Frame::Depend { entries: vec![] },
            Frame::Query {
                rank: 2,
                incarnation: 3,
            },
            Frame::Answer {
                rank: 1,
                incarnation: 0,
                count: 2,
            },
            Frame::Truncate { count: 7 },
            Frame::Truncated { count: 7 },
            Frame::Trim { count: 1 << 33 },
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
        assert!(Frame::decode(&[VERSION + 1, KIND_ACK, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Frame::decode(&[VERSION, 99]).is_err());
        let mut many_pairs = vec![VERSION, KIND_DEPEND];
        many_pairs.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(Frame::decode(&many_pairs).is_err());
        // Version 4 (no optimistic flag in the hello) is refused.
        assert!(Frame::decode(&[4, KIND_HELLO, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let mut huge = vec![VERSION, KIND_REPLAY, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(Frame::decode(&huge).is_err());
        // Versions 1 (no entry kinds) and 2 (no probe entries) are
        // refused, not misread.
        assert!(Frame::decode(&[1, KIND_ACK, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Frame::decode(&[2, KIND_ACK, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Frame::decode(&[3, KIND_ACK, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        // A replay flag other than 0 or 1.
        assert!(Frame::decode(&[VERSION, KIND_HELLO, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0]).is_err());
        // An optimistic flag other than 0 or 1.
        assert!(Frame::decode(&[VERSION, KIND_HELLO, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]).is_err());
        // Version 6 (a replay without its first position) is refused.
        assert!(Frame::decode(&[6, KIND_REPLAY, 1, 0, 0, 0, 0]).is_err());
    }

    fn one_choice(repeat: u32, completed: &[u32]) -> Vec<u8> {
        Frame::Determinants {
            first: 0,
            entries: vec![Entry::Choice(Choice {
                ordinal: 4,
                repeat,
                completed: completed.to_vec(),
            })],
        }
        .encode()
    }

    #[test]
    fn a_probe_entry_with_a_wildcard_tag_is_refused() {
        let frame = |tag| {
            Frame::Replay {
                first: 0,
                last: false,
                entries: vec![Entry::Probe(Probed {
                    ordinal: 1,
                    source: 0,
                    tag,
                    length_bytes: 4,
                })],
            }
            .encode()
        };
        assert!(Frame::decode(&frame(0)).is_ok());
        assert!(Frame::decode(&frame(-1)).is_err());
    }

    #[test]
    fn a_bad_choice_entry_is_refused() {
        assert!(Frame::decode(&one_choice(1, &[3])).is_ok());
        // Repeated zero times, or a repeated success: not something a
        // sender makes.
        assert!(Frame::decode(&one_choice(0, &[])).is_err());
        assert!(Frame::decode(&one_choice(2, &[1])).is_err());
        // An unknown entry kind.
        let mut bytes = one_choice(1, &[]);
        bytes[1 + 1 + 8 + 4] = 7;
        assert!(Frame::decode(&bytes).is_err());
        // A position count larger than the bytes left.
        let mut bytes = one_choice(1, &[5]);
        let count_at = 1 + 1 + 8 + 4 + 1 + 8 + 4;
        bytes[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Frame::decode(&bytes).is_err());
    }
}
