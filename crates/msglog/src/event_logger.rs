//! The event logger's protocol (sans-IO): the process `mpiexec --msglog`
//! starts outside `MPI_COMM_WORLD` that stores every rank's determinants
//! durably, acks them only once they are on disk, and serves a restarted
//! rank the determinants of its earlier incarnations.
//!
//! Why a state machine without I/O: the same code runs in the logger
//! process (`server.rs` owns the sockets, the file and the fsync) and in
//! the engine tests, where the harness plays disk and network and can lose
//! a batch that was written but not yet synced, or kill the logger
//! between any two steps.
//!
//! **Group commit.** Determinants that arrive together become records in
//! one batch ([`EventLogger::poll_write`]); the driver appends the batch,
//! syncs once, and says so ([`EventLogger::handle_durable`]); only then do
//! the acks for it go out. A rank whose determinant is not acked starts no
//! send (pessimism), so an ack sent before the sync could let a rank's
//! peers see a state that a logger crash would erase.
//!
//! **The file.** Append-only records, each `length u32 | crc32c u32 |
//! body`, the checksum over the body, the body `rank u32 | first u64 |
//! entries` (entries as the frames carry them). On a restart the logger
//! reads the file back ([`EventLogger::recover`]): the first record that
//! is short or fails its checksum ends it (a torn last write), and the
//! driver truncates the file there; records that do not continue their
//! rank's list are a damaged file, refused with a reason.
//!
//! **Incarnations.** A rank's connection says who it is first (`Hello`,
//! with its incarnation). A newer incarnation's hello makes frames from
//! older ones ignored: a dead process's last determinants, still in a
//! socket, must not land after its replacement was served its list.
//! Replay is served from what is durable, after any batch in flight.
//!
//! **Optimistic ranks** (O2P) say so in their hello; every ack to them is
//! a `Stable` frame carrying the logger's *stable vector* (per rank, how
//! many determinants are on disk), from which a rank learns which of its
//! dependencies on other ranks can never be lost and stops tracking (and
//! piggybacking) them. Pessimistic ranks get the bare `Ack`: they track
//! no dependency, and the vector would cost them bytes for nothing.
//!
//! **Where a dead incarnation's list ends** (`Query`/`Answer`): when a
//! rank dies, a survivor that depends on determinants of it it does not
//! know stable asks. The answer must be one number for every asker, and
//! exactly what the replacement replays: the rank's list when its
//! connection closed (a dead process sends nothing more; its socket was
//! read to the end) or, if its replacement said hello first, when that
//! hello came (from then on the old incarnation's frames are ignored).
//! A query that comes before either waits; the answer goes once that
//! much is on disk. (A second death of the same rank before a query
//! about the first is answered moves the end to the second's: a
//! survivor then takes determinants of the replacement for ones it
//! depended on; the window is a query delayed past a whole restart.)
//! Queries and answers name the dead incarnation: the logger keeps the
//! end of each incarnation of a rank that ended, so an asker that learns
//! late of a dependency on an old incarnation (a message an orphan sent
//! before it rolled back, arriving after the replacement re-joined) gets
//! that incarnation's end, not the newest one's.
//!
//! **Orphans roll back** (`Truncate`/`Truncated`): an orphan asks the
//! logger to cut its list where it first depended on a lost determinant.
//! The cut is a record with no entries (`first` = the new length) in the
//! same append-only file, acked once synced like a batch of
//! determinants; reading the file back applies it. The orphan then dies,
//! and its replacement replays the list as cut.

use std::collections::{BTreeMap, VecDeque};

use resmpi_checksum::crc32c;

use crate::frame_end;
use crate::frames::{self, Entry, Frame};

/// Bytes of a record's header: length and checksum.
pub const RECORD_HEADER_BYTES: usize = 8;
/// The largest record body the logger writes or reads back (one frame's
/// entries at most, with room to spare).
pub const RECORD_BODY_BYTES_MAX: usize = 1 << 20;

/// Counters the logger reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoggerCounters {
    /// Determinants stored (read back on a restart included).
    pub determinants_stored: u64,
    /// Batches written and synced (one fsync each).
    pub batches_synced: u64,
    /// Bytes appended to the file by this process.
    pub bytes_appended: u64,
    /// Determinants read back from the file at the start.
    pub determinants_recovered: u64,
    /// Frames refused (unparsable, before a hello, or a gap in a list).
    pub protocol_errors: u64,
}

#[derive(Debug, Default)]
struct RankLog {
    /// The rank's determinants, in its order (durable or in the batch).
    entries: Vec<Entry>,
    /// How many of `entries` are on disk and synced.
    durable: usize,
    /// The newest incarnation that said hello.
    incarnation: u32,
    /// Per dead incarnation, where its list ends (`Query`): set when its
    /// connection closes or a newer incarnation says hello.
    ends: BTreeMap<u32, usize>,
}

/// A replacement's hello, held until its predecessor's socket is closed.
#[derive(Clone, Copy, Debug)]
struct WaitingHello {
    connection: u64,
    rank: u32,
    incarnation: u32,
    replay: bool,
    optimistic: bool,
}

#[derive(Clone, Copy, Debug)]
struct Connection {
    rank: u32,
    incarnation: u32,
    /// Its acks carry the stable vector.
    optimistic: bool,
}

/// The event logger's state: per rank, its determinant list.
#[derive(Debug, Default)]
pub struct EventLogger {
    ranks: BTreeMap<u32, RankLog>,
    /// Connections that said hello, by the driver's connection id.
    connections: BTreeMap<u64, Connection>,
    /// Records not yet handed to the driver.
    unwritten: Vec<u8>,
    /// Per rank, its list length when the batch in flight was taken.
    batch: Option<Vec<(u32, usize)>>,
    /// Connections waiting for their replay until nothing is in flight.
    replay_waiting: Vec<u64>,
    /// Queries (connection, dead rank, its incarnation) waiting for that
    /// incarnation's end to be known and on disk.
    queries_waiting: Vec<(u64, u32, u32)>,
    /// Cuts of orphans' lists (connection, length) not yet in a batch,
    /// and those in the batch in flight: acked once it is durable.
    truncations_unwritten: Vec<(u64, u64)>,
    truncations_in_batch: Vec<(u64, u64)>,
    /// Hellos of replacements waiting for an optimistic predecessor's
    /// connection to close.
    hellos_waiting: Vec<WaitingHello>,
    frames_out: VecDeque<(u64, Vec<u8>)>,
    /// Test only: most determinants stored per rank (the rest are
    /// dropped unacked, as a logger that lost them would).
    store_count_max: Option<usize>,
    /// What it did.
    pub counters: LoggerCounters,
}

/// The variable of the test-only bound [`EventLogger::with_store_count_max`]
/// (`mpiexec` passes its environment to the logger it starts).
pub const STORE_COUNT_MAX_VARIABLE: &str = "RESMPI_EVENTLOG_TEST_STORE_MAX";

impl EventLogger {
    /// A logger with an empty file.
    pub fn new() -> EventLogger {
        EventLogger::default()
    }

    /// Test only: store at most `count` determinants of each rank and drop
    /// the rest unacked, so that an optimistic rank's determinants stay
    /// unstable (what a slow or lost disk does) and a death provably
    /// leaves orphans.
    pub fn with_store_count_max(mut self, count: usize) -> EventLogger {
        self.store_count_max = Some(count);
        self
    }

    /// A logger that resumes from `file`, the bytes of its log: the
    /// logger, and how many leading bytes of `file` are whole records
    /// (the driver truncates the file there: a torn last record is
    /// dropped, as it was never synced and never acked).
    pub fn recover(file: &[u8]) -> Result<(EventLogger, usize), String> {
        let mut logger = EventLogger::new();
        let mut at = 0;
        while let Some((rank, first, entries, end)) = read_record(file, at) {
            let log = logger.ranks.entry(rank).or_default();
            if entries.is_empty() && first as usize <= log.entries.len() {
                // An orphan's rollback cut its list here.
                log.entries.truncate(first as usize);
                log.durable = log.entries.len();
                at = end;
                continue;
            }
            if first as usize != log.entries.len() {
                return Err(format!(
                    "event log: the record at byte {at} holds rank {rank}'s determinants from \
                     {first}, but {} came before it",
                    log.entries.len()
                ));
            }
            logger.counters.determinants_recovered += entries.len() as u64;
            logger.counters.determinants_stored += entries.len() as u64;
            log.entries.extend(entries);
            log.durable = log.entries.len();
            at = end;
        }
        Ok((logger, at))
    }

    /// How many determinants of `rank` are stored (durable or not).
    pub fn stored(&self, rank: u32) -> usize {
        self.ranks.get(&rank).map_or(0, |log| log.entries.len())
    }

    /// How many determinants of `rank` are durable.
    pub fn durable(&self, rank: u32) -> usize {
        self.ranks.get(&rank).map_or(0, |log| log.durable)
    }

    /// The determinants of `rank`, in order.
    pub fn entries(&self, rank: u32) -> &[Entry] {
        self.ranks.get(&rank).map_or(&[], |log| &log.entries)
    }

    /// Connection `connection` closed.
    pub fn handle_closed(&mut self, connection: u64) {
        if let Some(closed) = self.connections.remove(&connection) {
            let still_open = self
                .connections
                .values()
                .any(|state| state.rank == closed.rank && state.incarnation == closed.incarnation);
            if let Some(log) = self.ranks.get_mut(&closed.rank) {
                if !still_open && closed.incarnation == log.incarnation {
                    // Everything it sent was read before the close.
                    log.ends.insert(closed.incarnation, log.entries.len());
                }
            }
        }
        self.replay_waiting.retain(|&waiting| waiting != connection);
        self.queries_waiting
            .retain(|&(waiting, _, _)| waiting != connection);
        self.hellos_waiting
            .retain(|waiting| waiting.connection != connection);
        self.frames_out.retain(|(to, _)| *to != connection);
        for hello in std::mem::take(&mut self.hellos_waiting) {
            // Held again if a predecessor is still open.
            self.handle_hello(
                hello.connection,
                hello.rank,
                hello.incarnation,
                hello.replay,
                hello.optimistic,
            );
        }
        self.answer_queries();
    }

    /// Answer the queries whose rank's end is known and on disk.
    fn answer_queries(&mut self) {
        let mut waiting = std::mem::take(&mut self.queries_waiting);
        waiting.retain(|&(connection, rank, incarnation)| {
            let Some(log) = self.ranks.get(&rank) else {
                return true;
            };
            match log.ends.get(&incarnation) {
                Some(&count) if log.durable >= count => {
                    let answer = Frame::Answer {
                        rank,
                        incarnation,
                        count: count as u64,
                    };
                    self.frames_out.push_back((connection, answer.encode()));
                    false
                }
                _ => true,
            }
        });
        self.queries_waiting = waiting;
    }

    /// A frame from connection `connection`.
    pub fn handle_frame(&mut self, connection: u64, bytes: &[u8]) {
        match Frame::decode(bytes) {
            Ok(Frame::Hello {
                rank,
                incarnation,
                replay,
                optimistic,
            }) => self.handle_hello(connection, rank, incarnation, replay, optimistic),
            Ok(Frame::Determinants { first, entries }) => {
                self.handle_determinants(connection, first, entries)
            }
            Ok(Frame::Query { rank, incarnation })
                if self.connections.contains_key(&connection) =>
            {
                self.ranks.entry(rank).or_default();
                self.queries_waiting.push((connection, rank, incarnation));
                self.answer_queries();
            }
            Ok(Frame::Truncate { count }) => self.handle_truncate(connection, count),
            _ => self.counters.protocol_errors += 1,
        }
    }

    fn handle_hello(
        &mut self,
        connection: u64,
        rank: u32,
        incarnation: u32,
        replay: bool,
        optimistic: bool,
    ) {
        let log = self.ranks.entry(rank).or_default();
        if incarnation < log.incarnation {
            // A process already replaced: nothing it says counts.
            self.counters.protocol_errors += 1;
            return;
        }
        let optimistic_predecessor = self
            .connections
            .values()
            .any(|state| state.rank == rank && state.incarnation < incarnation && state.optimistic);
        if optimistic_predecessor {
            // An optimistic predecessor's last determinants may still be
            // in its socket, and others may depend on them (its sends did
            // not wait): its list ends only once that socket is read to
            // its end (`handle_closed`), so wait for it.
            self.hellos_waiting.push(WaitingHello {
                connection,
                rank,
                incarnation,
                replay,
                optimistic,
            });
            return;
        }
        let log = self.ranks.entry(rank).or_default();
        if incarnation > log.incarnation {
            // The old incarnations' lists end here (unless their
            // connection closed first): their frames are ignored from now
            // on, and this one replays exactly this much.
            let length = log.entries.len();
            for dead in log.incarnation..incarnation {
                log.ends.entry(dead).or_insert(length);
            }
        } else if !replay {
            // The same process again (its link broke): not dead.
            log.ends.remove(&incarnation);
        }
        log.incarnation = incarnation;
        self.connections.insert(
            connection,
            Connection {
                rank,
                incarnation,
                optimistic,
            },
        );
        if replay {
            if self.batch.is_some() || !self.unwritten.is_empty() {
                self.replay_waiting.push(connection);
            } else {
                self.send_replay(connection, rank);
            }
        } else {
            let count = log.durable as u64;
            let ack = self.ack(optimistic, count);
            self.frames_out.push_back((connection, ack));
        }
        self.answer_queries();
    }

    /// An orphan on `connection` rolls back: cut its list to `count`
    /// determinants, durably (a record with no entries), and say so once
    /// the cut is on disk. Its own list only: from its live incarnation.
    fn handle_truncate(&mut self, connection: u64, count: u64) {
        let Some(Connection { rank, .. }) = self.live_connection(connection) else {
            return;
        };
        let log = self.ranks.entry(rank).or_default();
        let length = log
            .entries
            .len()
            .min(usize::try_from(count).unwrap_or(usize::MAX));
        log.entries.truncate(length);
        log.durable = log.durable.min(length);
        append_record(&mut self.unwritten, rank, length as u64, &[]);
        self.truncations_unwritten.push((connection, length as u64));
    }

    /// The logger's stable vector: (rank, determinants on disk), ranks
    /// with none left out.
    pub fn stable_vector(&self) -> Vec<(u32, u64)> {
        self.ranks
            .iter()
            .filter(|(_, log)| log.durable > 0)
            .map(|(&rank, log)| (rank, log.durable as u64))
            .collect()
    }

    /// An ack of `count` determinants for a connection: with the stable
    /// vector when it is optimistic.
    fn ack(&self, optimistic: bool, count: u64) -> Vec<u8> {
        if optimistic {
            Frame::Stable {
                count,
                stable: self.stable_vector(),
            }
            .encode()
        } else {
            Frame::Ack { count }.encode()
        }
    }

    /// The state of `connection` if it speaks for its rank's live
    /// incarnation. A frame on an unknown connection (before its hello) is
    /// a protocol error; one from an incarnation since replaced is ignored.
    fn live_connection(&mut self, connection: u64) -> Option<Connection> {
        let Some(&state) = self.connections.get(&connection) else {
            self.counters.protocol_errors += 1;
            return None;
        };
        let log = self.ranks.entry(state.rank).or_default();
        (state.incarnation >= log.incarnation).then_some(state)
    }

    fn handle_determinants(&mut self, connection: u64, first: u64, entries: Vec<Entry>) {
        let Some(Connection {
            rank, optimistic, ..
        }) = self.live_connection(connection)
        else {
            return;
        };
        let log = self.ranks.entry(rank).or_default();
        let Ok(first) = usize::try_from(first) else {
            self.counters.protocol_errors += 1;
            return;
        };
        if first > log.entries.len() {
            // A gap: a rank sends its list in order from what was acked.
            self.counters.protocol_errors += 1;
            return;
        }
        // Entries before `entries.len()` are a re-send of what is stored.
        let already = log.entries.len() - first;
        let room = self
            .store_count_max
            .map_or(usize::MAX, |max| max.saturating_sub(log.entries.len()));
        let new: Vec<Entry> = entries.into_iter().skip(already).take(room).collect();
        if new.is_empty() {
            // Nothing new; say how far the durable list reaches.
            let count = log.durable as u64;
            if log.durable == log.entries.len() {
                let ack = self.ack(optimistic, count);
                self.frames_out.push_back((connection, ack));
            }
            return;
        }
        let position = log.entries.len() as u64;
        append_record(&mut self.unwritten, rank, position, &new);
        self.counters.determinants_stored += new.len() as u64;
        log.entries.extend(new);
    }

    /// The next batch of records to append to the file, if any; the
    /// driver appends it, syncs the file, and calls
    /// [`handle_durable`](Self::handle_durable) before the next one.
    pub fn poll_write(&mut self) -> Option<Vec<u8>> {
        if self.batch.is_some() || self.unwritten.is_empty() {
            return None;
        }
        self.batch = Some(
            self.ranks
                .iter()
                .filter(|(_, log)| log.entries.len() > log.durable)
                .map(|(&rank, log)| (rank, log.entries.len()))
                .collect(),
        );
        let bytes = std::mem::take(&mut self.unwritten);
        self.truncations_in_batch = std::mem::take(&mut self.truncations_unwritten);
        self.counters.bytes_appended += bytes.len() as u64;
        Some(bytes)
    }

    /// The batch [`poll_write`](Self::poll_write) gave is on disk and
    /// synced: its determinants are acked to every connection of their rank.
    pub fn handle_durable(&mut self) {
        let Some(batch) = self.batch.take() else {
            return;
        };
        self.counters.batches_synced += 1;
        for &(rank, count) in &batch {
            let log = self.ranks.entry(rank).or_default();
            // A cut that came after the batch was taken shortened it.
            log.durable = log.durable.max(count.min(log.entries.len()));
        }
        for (connection, count) in std::mem::take(&mut self.truncations_in_batch) {
            let truncated = Frame::Truncated { count };
            self.frames_out.push_back((connection, truncated.encode()));
        }
        // The whole batch is durable before any ack goes: the stable
        // vector of every ack covers all of it.
        for (rank, _) in batch {
            let log = &self.ranks[&rank];
            let (incarnation, count) = (log.incarnation, log.durable as u64);
            let targets: Vec<(u64, bool)> = self
                .connections
                .iter()
                .filter(|(_, state)| state.rank == rank && state.incarnation == incarnation)
                .map(|(&connection, state)| (connection, state.optimistic))
                .collect();
            for (connection, optimistic) in targets {
                let ack = self.ack(optimistic, count);
                self.frames_out.push_back((connection, ack));
            }
        }
        self.answer_queries();
        if self.unwritten.is_empty() {
            for connection in std::mem::take(&mut self.replay_waiting) {
                if let Some(state) = self.connections.get(&connection).copied() {
                    self.send_replay(connection, state.rank);
                }
            }
        }
    }

    /// Whether a batch was polled and is not durable yet.
    pub fn batch_in_flight(&self) -> bool {
        self.batch.is_some()
    }

    /// The next frame to send: (connection, bytes).
    pub fn poll_frame(&mut self) -> Option<(u64, Vec<u8>)> {
        self.frames_out.pop_front()
    }

    /// The durable list of `rank` as `Replay` frames, then its ack.
    fn send_replay(&mut self, connection: u64, rank: u32) {
        let log = self.ranks.entry(rank).or_default();
        let durable = &log.entries[..log.durable];
        let mut first = 0;
        loop {
            let end = frame_end(durable, first);
            let frame = Frame::Replay {
                last: end == durable.len(),
                entries: durable[first..end].to_vec(),
            };
            self.frames_out.push_back((connection, frame.encode()));
            if end == durable.len() {
                break;
            }
            first = end;
        }
        let count = log.durable as u64;
        let optimistic = self
            .connections
            .get(&connection)
            .is_some_and(|state| state.optimistic);
        let ack = self.ack(optimistic, count);
        self.frames_out.push_back((connection, ack));
    }
}

/// Append one record: `rank`'s determinants from `first`.
pub fn append_record(file: &mut Vec<u8>, rank: u32, first: u64, entries: &[Entry]) {
    let mut body = Vec::with_capacity(16 + entries.len() * 16);
    body.extend_from_slice(&rank.to_le_bytes());
    body.extend_from_slice(&first.to_le_bytes());
    frames::encode_entries(&mut body, entries);
    file.extend_from_slice(&(body.len() as u32).to_le_bytes());
    file.extend_from_slice(&crc32c(&body).to_le_bytes());
    file.extend_from_slice(&body);
}

/// The record at `at` of `file`: (rank, first, entries, end), or `None`
/// when there is none whole and sound there (the end of the log).
pub fn read_record(file: &[u8], at: usize) -> Option<(u32, u64, Vec<Entry>, usize)> {
    let header = file.get(at..at.checked_add(RECORD_HEADER_BYTES)?)?;
    let length = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    let checksum = u32::from_le_bytes(header[4..8].try_into().ok()?);
    if !(12..=RECORD_BODY_BYTES_MAX).contains(&length) {
        return None;
    }
    let start = at + RECORD_HEADER_BYTES;
    let body = file.get(start..start.checked_add(length)?)?;
    if crc32c(body) != checksum {
        return None;
    }
    let rank = u32::from_le_bytes(body[..4].try_into().ok()?);
    let first = u64::from_le_bytes(body[4..12].try_into().ok()?);
    let entries = frames::decode_entries(&body[12..]).ok()?;
    Some((rank, first, entries, start + length))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames::Determinant;

    fn wildcard(ordinal: u64, source: u32) -> Entry {
        Entry::Wildcard(Determinant { ordinal, source })
    }

    fn hello(rank: u32, incarnation: u32, replay: bool) -> Vec<u8> {
        Frame::Hello {
            rank,
            incarnation,
            replay,
            optimistic: false,
        }
        .encode()
    }

    fn determinants(first: u64, entries: Vec<Entry>) -> Vec<u8> {
        Frame::Determinants { first, entries }.encode()
    }

    fn frames_out(logger: &mut EventLogger) -> Vec<(u64, Frame)> {
        std::iter::from_fn(|| logger.poll_frame())
            .map(|(connection, bytes)| (connection, Frame::decode(&bytes).unwrap()))
            .collect()
    }

    #[test]
    fn determinants_are_acked_only_after_their_batch_is_synced_once() {
        let mut logger = EventLogger::new();
        logger.handle_frame(1, &hello(0, 0, false));
        logger.handle_frame(2, &hello(1, 0, false));
        assert_eq!(
            frames_out(&mut logger),
            vec![(1, Frame::Ack { count: 0 }), (2, Frame::Ack { count: 0 })]
        );
        logger.handle_frame(1, &determinants(0, vec![wildcard(0, 2)]));
        logger.handle_frame(2, &determinants(0, vec![wildcard(0, 0), wildcard(1, 2)]));
        logger.handle_frame(1, &determinants(1, vec![wildcard(1, 1)]));
        // Nothing is acked before the sync.
        assert!(frames_out(&mut logger).is_empty());
        let batch = logger.poll_write().expect("one batch");
        assert!(logger.poll_write().is_none(), "one batch at a time");
        assert!(frames_out(&mut logger).is_empty());
        logger.handle_durable();
        assert_eq!(logger.counters.batches_synced, 1);
        assert_eq!(
            frames_out(&mut logger),
            vec![(1, Frame::Ack { count: 2 }), (2, Frame::Ack { count: 2 })]
        );
        // The batch is three records that read back as the lists.
        let (recovered, length) = EventLogger::recover(&batch).unwrap();
        assert_eq!(length, batch.len());
        assert_eq!(recovered.entries(0), logger.entries(0));
        assert_eq!(recovered.entries(1), logger.entries(1));
    }

    #[test]
    fn a_restarted_logger_reloads_its_file_drops_a_torn_record_and_serves_the_replay() {
        let mut logger = EventLogger::new();
        logger.handle_frame(1, &hello(2, 0, false));
        let mut file = Vec::new();
        for ordinal in 0..5 {
            logger.handle_frame(1, &determinants(ordinal, vec![wildcard(ordinal, 1)]));
            file.extend(logger.poll_write().unwrap());
            logger.handle_durable();
        }
        // A sixth record torn halfway: it was never synced nor acked.
        logger.handle_frame(1, &determinants(5, vec![wildcard(5, 0)]));
        let whole = file.len();
        let torn = logger.poll_write().unwrap();
        file.extend_from_slice(&torn[..torn.len() / 2]);
        let (mut restarted, length) = EventLogger::recover(&file).unwrap();
        assert_eq!(length, whole);
        assert_eq!(restarted.durable(2), 5);
        // A flipped bit in the last whole record ends the log before it.
        let mut flipped = file[..whole].to_vec();
        flipped[whole - 1] ^= 1;
        let (_, flipped_length) = EventLogger::recover(&flipped).unwrap();
        assert!(flipped_length < whole);
        // Rank 2's new incarnation gets its five back, then the ack.
        restarted.handle_frame(7, &hello(2, 1, true));
        let out = frames_out(&mut restarted);
        assert_eq!(
            out,
            vec![
                (
                    7,
                    Frame::Replay {
                        last: true,
                        entries: (0..5).map(|ordinal| wildcard(ordinal, 1)).collect(),
                    }
                ),
                (7, Frame::Ack { count: 5 }),
            ]
        );
    }

    #[test]
    fn an_older_incarnation_is_ignored_and_a_replay_waits_for_the_batch_in_flight() {
        let mut logger = EventLogger::new();
        logger.handle_frame(1, &hello(0, 0, false));
        logger.handle_frame(1, &determinants(0, vec![wildcard(0, 1)]));
        let _ = logger.poll_write().unwrap();
        frames_out(&mut logger);
        // The replacement says hello while the batch is being synced.
        logger.handle_frame(2, &hello(0, 1, true));
        assert!(frames_out(&mut logger).is_empty());
        // The dead process's last frame, still in its socket, is dropped.
        logger.handle_frame(1, &determinants(1, vec![wildcard(1, 2)]));
        assert_eq!(logger.stored(0), 1);
        logger.handle_durable();
        let out = frames_out(&mut logger);
        assert_eq!(
            out.last(),
            Some(&(2, Frame::Ack { count: 1 })),
            "the replay came after the sync: {out:?}"
        );
        assert!(out.iter().all(|(connection, _)| *connection == 2));
    }

    #[test]
    fn a_resent_list_is_stored_once_and_a_gap_is_refused() {
        let mut logger = EventLogger::new();
        logger.handle_frame(1, &hello(0, 0, false));
        logger.handle_frame(1, &determinants(0, vec![wildcard(0, 1), wildcard(1, 1)]));
        logger.handle_frame(
            1,
            &determinants(0, vec![wildcard(0, 1), wildcard(1, 1), wildcard(2, 2)]),
        );
        assert_eq!(logger.stored(0), 3);
        logger.handle_frame(1, &determinants(5, vec![wildcard(5, 1)]));
        assert_eq!(logger.stored(0), 3);
        assert_eq!(logger.counters.protocol_errors, 1);
        // Determinants before a hello are refused.
        logger.handle_frame(9, &determinants(0, vec![wildcard(0, 1)]));
        assert_eq!(logger.counters.protocol_errors, 2);
    }
}
