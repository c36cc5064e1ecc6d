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
//!
//! **Trimming at checkpoints** (`Trim`): a rank's newest restartable
//! checkpoint covers the first `count` determinants of its list (its
//! replacement resumes from the checkpoint's ordinals and never looks
//! below them), so the logger drops them from memory, keeping the list's
//! positions (`RankLog::base`: acks, the stable vector, queries' answers
//! and cuts all count from the start of the job). It trims only what is
//! durable, never past the end of a dead incarnation's list (what its
//! replacement replays), and a cut below the trim (a rollback: never
//! past a checkpoint with a position, but the file must stay readable)
//! lowers it. The trim is a record too (the rank with [`TRIM_RECORD_FLAG`],
//! no entries, `first` = the new start of the list), so a restarted
//! logger starts the list there.
//!
//! **Compaction.** The file only grows; once the records that a rewrite
//! would keep (per rank a trim record and its live entries) are less than
//! half of it, [`EventLogger::poll_compaction`] hands the driver the
//! rewritten file, which it writes beside the log, syncs and renames over
//! it (a logger killed meanwhile reads back the old file or the new one,
//! both whole), then says so ([`EventLogger::handle_compacted`]). Only
//! between batches, with nothing unwritten: the image is exactly what is
//! durable. Amortized: a file rewritten to `n` live bytes is rewritten
//! again only after about `n` more bytes were appended, and never below
//! [`COMPACTION_BYTES_MIN`].

use std::collections::{BTreeMap, VecDeque};

use resmpi_checksum::crc32c;

use crate::frame_end;
use crate::frames::{self, Entry, Frame, ENTRIES_PER_FRAME_MAX, ENTRY_BYTES_PER_FRAME_MAX};

/// Bytes of a record's header: length and checksum.
pub const RECORD_HEADER_BYTES: usize = 8;
/// The largest record body the logger writes or reads back (one frame's
/// entries at most, with room to spare).
pub const RECORD_BODY_BYTES_MAX: usize = 1 << 20;

/// The flag of a record's rank field that makes it a trim record: the
/// rank's list starts at the record's `first` (positions below it were
/// covered by the rank's checkpoint and dropped).
pub const TRIM_RECORD_FLAG: u32 = 1 << 31;
/// Bytes of a record with no entries (header, rank, first, count).
const EMPTY_RECORD_BYTES: usize = RECORD_HEADER_BYTES + 4 + 8 + 4;
/// The smallest file the logger compacts (smaller ones cost nothing to keep).
pub const COMPACTION_BYTES_MIN: u64 = 16 * 1024;

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
    /// Determinants dropped because a checkpoint of their rank covers them.
    pub determinants_trimmed: u64,
    /// Times the file was rewritten without its dead records.
    pub compactions: u64,
    /// Bytes compaction removed from the file.
    pub log_bytes_compacted: u64,
    /// Determinants held in memory now (every rank's live list).
    pub determinants_live: u64,
    /// The most determinants held in memory at once.
    pub determinants_live_max: u64,
    /// Bytes of the file now.
    pub log_bytes: u64,
}

#[derive(Debug, Default)]
struct RankLog {
    /// Positions below this were trimmed: `entries[0]` is at `base`.
    base: usize,
    /// The rank's determinants from `base`, in its order (durable or in
    /// the batch).
    entries: Vec<Entry>,
    /// Bytes of `entries` encoded (what a compacted file keeps of them).
    entry_bytes: usize,
    /// How much of the list (a position, from the start) is on disk and
    /// synced.
    durable: usize,
    /// The newest checkpoint of the rank covers the list up to here
    /// (`Trim`): trimmed once durable.
    trim_wanted: usize,
    /// The newest incarnation that said hello.
    incarnation: u32,
    /// Per dead incarnation, where its list ends (`Query`): set when its
    /// connection closes or a newer incarnation says hello.
    ends: BTreeMap<u32, usize>,
}

impl RankLog {
    /// The list's length, from the start of the job.
    fn length(&self) -> usize {
        self.base + self.entries.len()
    }

    fn extend(&mut self, entries: Vec<Entry>) {
        self.entry_bytes += entries.iter().map(Entry::encoded_len).sum::<usize>();
        self.entries.extend(entries);
    }

    /// Start the list at `position` (no lower than it starts now);
    /// returns how many determinants were dropped. Past the list's end,
    /// the list is that long with nothing held.
    fn trim_to(&mut self, position: usize) -> usize {
        if position <= self.base {
            return 0;
        }
        let dropped = (position - self.base).min(self.entries.len());
        self.entry_bytes -= self.entries[..dropped]
            .iter()
            .map(Entry::encoded_len)
            .sum::<usize>();
        self.entries.drain(..dropped);
        self.base = position;
        dropped
    }

    /// Cut the list to `length` (a rollback); a cut below the trimmed
    /// part leaves the list that long with nothing held.
    fn cut(&mut self, length: usize) {
        let kept = length.saturating_sub(self.base).min(self.entries.len());
        self.entry_bytes -= self.entries[kept..]
            .iter()
            .map(Entry::encoded_len)
            .sum::<usize>();
        self.entries.truncate(kept);
        self.base = self.base.min(length);
        self.durable = self.durable.min(length);
        // What the checkpoint covered was cut: the list after the cut is
        // the replacement's, which no checkpoint covers yet.
        self.trim_wanted = self.trim_wanted.min(length);
    }

    /// Bytes its records take in a compacted file (about: one trim
    /// record, and the entries in records of at most a frame's worth).
    fn compacted_bytes(&self) -> usize {
        let records = 1
            + self.entry_bytes / ENTRY_BYTES_PER_FRAME_MAX
            + self.entries.len() / ENTRIES_PER_FRAME_MAX
            + usize::from(!self.entries.is_empty());
        records * EMPTY_RECORD_BYTES + self.entry_bytes
    }
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
    /// Bytes of the file (read back, appended, or rewritten).
    file_bytes: u64,
    /// A compaction was handed to the driver and is not done yet: the
    /// file's size before it.
    compaction_in_flight: Option<u64>,
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
        while let Some((raw_rank, first, entries, end)) = read_record(file, at) {
            let rank = raw_rank & !TRIM_RECORD_FLAG;
            let log = logger.ranks.entry(rank).or_default();
            let first = usize::try_from(first).unwrap_or(usize::MAX);
            if raw_rank & TRIM_RECORD_FLAG != 0 {
                if !entries.is_empty() {
                    return Err(format!(
                        "event log: the trim record at byte {at} holds determinants"
                    ));
                }
                // The rank's checkpoint covers its list below `first`.
                log.trim_wanted = log.trim_wanted.max(first);
                logger.counters.determinants_trimmed += log.trim_to(first) as u64;
                log.durable = log.length();
                at = end;
                continue;
            }
            if entries.is_empty() && first <= log.length() {
                // An orphan's rollback cut its list here.
                log.cut(first);
                log.durable = log.length();
                at = end;
                continue;
            }
            if first != log.length() {
                return Err(format!(
                    "event log: the record at byte {at} holds rank {rank}'s determinants from \
                     {first}, but {} came before it",
                    log.length()
                ));
            }
            logger.counters.determinants_recovered += entries.len() as u64;
            logger.counters.determinants_stored += entries.len() as u64;
            log.extend(entries);
            log.durable = log.length();
            at = end;
        }
        logger.file_bytes = at as u64;
        logger.note_live();
        Ok((logger, at))
    }

    /// How many determinants of `rank` are stored (durable or not),
    /// counted from the start of its list (trimmed ones included).
    pub fn stored(&self, rank: u32) -> usize {
        self.ranks.get(&rank).map_or(0, RankLog::length)
    }

    /// How many determinants of `rank` are durable (a position in its
    /// list, from the start).
    pub fn durable(&self, rank: u32) -> usize {
        self.ranks.get(&rank).map_or(0, |log| log.durable)
    }

    /// Where `rank`'s list starts in memory: the determinants before it
    /// were trimmed (a checkpoint of the rank covers them).
    pub fn trimmed(&self, rank: u32) -> usize {
        self.ranks.get(&rank).map_or(0, |log| log.base)
    }

    /// The determinants of `rank` held, in order, from [`trimmed`](Self::trimmed).
    pub fn entries(&self, rank: u32) -> &[Entry] {
        self.ranks.get(&rank).map_or(&[], |log| &log.entries)
    }

    /// The counters, with the live count and the file's size as of now.
    pub fn report(&self) -> LoggerCounters {
        LoggerCounters {
            determinants_live: self.live_count() as u64,
            log_bytes: self.file_bytes,
            ..self.counters
        }
    }

    /// Determinants held in memory, every rank's.
    fn live_count(&self) -> usize {
        self.ranks.values().map(|log| log.entries.len()).sum()
    }

    /// Keep the most determinants held at once.
    fn note_live(&mut self) {
        let live = self.live_count() as u64;
        let most = &mut self.counters.determinants_live_max;
        *most = (*most).max(live);
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
                    log.ends.insert(closed.incarnation, log.length());
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
            Ok(Frame::Trim { count }) => self.handle_trim(connection, count),
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
            let length = log.length();
            for dead in log.incarnation..incarnation {
                log.ends.entry(dead).or_insert(length);
            }
            // A checkpoint of the dead incarnation may reach past what it
            // logged (determinants lost with it): the replacement's own
            // determinants come from here on, and no checkpoint covers
            // them yet.
            log.trim_wanted = log.trim_wanted.min(length);
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
            .length()
            .min(usize::try_from(count).unwrap_or(usize::MAX));
        log.cut(length);
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
        if first > log.length() {
            // A gap: a rank sends its list in order from what was acked.
            self.counters.protocol_errors += 1;
            return;
        }
        // Entries before the list's length are a re-send of what is stored.
        let already = log.length() - first;
        let room = self
            .store_count_max
            .map_or(usize::MAX, |max| max.saturating_sub(log.length()));
        let new: Vec<Entry> = entries.into_iter().skip(already).take(room).collect();
        if new.is_empty() {
            // Nothing new; say how far the durable list reaches.
            let count = log.durable as u64;
            if log.durable == log.length() {
                let ack = self.ack(optimistic, count);
                self.frames_out.push_back((connection, ack));
            }
            return;
        }
        let position = log.length() as u64;
        append_record(&mut self.unwritten, rank, position, &new);
        self.counters.determinants_stored += new.len() as u64;
        log.extend(new);
        self.note_live();
    }

    /// A rank's newest restartable checkpoint covers its first `count`
    /// determinants: trim them once durable. From its live incarnation
    /// only (a dead one's checkpoint is not necessarily its replacement's).
    fn handle_trim(&mut self, connection: u64, count: u64) {
        let Some(Connection { rank, .. }) = self.live_connection(connection) else {
            return;
        };
        let log = self.ranks.entry(rank).or_default();
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        log.trim_wanted = log.trim_wanted.max(count);
        self.apply_trim(rank);
    }

    /// Trim `rank`'s list as far as its checkpoint covers and its list is
    /// durable, with a trim record (so a restarted logger starts there).
    fn apply_trim(&mut self, rank: u32) {
        let log = self.ranks.entry(rank).or_default();
        let position = log.trim_wanted.min(log.durable);
        if position <= log.base {
            return;
        }
        self.counters.determinants_trimmed += log.trim_to(position) as u64;
        append_record(
            &mut self.unwritten,
            rank | TRIM_RECORD_FLAG,
            position as u64,
            &[],
        );
    }

    /// The next batch of records to append to the file, if any; the
    /// driver appends it, syncs the file, and calls
    /// [`handle_durable`](Self::handle_durable) before the next one.
    pub fn poll_write(&mut self) -> Option<Vec<u8>> {
        if self.batch.is_some() || self.compaction_in_flight.is_some() || self.unwritten.is_empty()
        {
            return None;
        }
        self.batch = Some(
            self.ranks
                .iter()
                .filter(|(_, log)| log.length() > log.durable)
                .map(|(&rank, log)| (rank, log.length()))
                .collect(),
        );
        let bytes = std::mem::take(&mut self.unwritten);
        self.truncations_in_batch = std::mem::take(&mut self.truncations_unwritten);
        self.counters.bytes_appended += bytes.len() as u64;
        self.file_bytes += bytes.len() as u64;
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
            log.durable = log.durable.max(count.min(log.length()));
        }
        for &(rank, _) in &batch {
            // A checkpoint may have come before its determinants were durable.
            self.apply_trim(rank);
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

    /// The whole file rewritten without its dead records, when it is due:
    /// nothing unwritten or in flight, the file at least
    /// [`COMPACTION_BYTES_MIN`], and the rewrite less than half of it. The
    /// driver writes it beside the log, syncs it, renames it over the log,
    /// and calls [`handle_compacted`](Self::handle_compacted); no batch is
    /// given meanwhile.
    pub fn poll_compaction(&mut self) -> Option<Vec<u8>> {
        if self.batch.is_some()
            || self.compaction_in_flight.is_some()
            || !self.unwritten.is_empty()
            || self.file_bytes < COMPACTION_BYTES_MIN
        {
            return None;
        }
        let kept: usize = self.ranks.values().map(RankLog::compacted_bytes).sum();
        if kept as u64 >= self.file_bytes / 2 {
            return None;
        }
        self.compaction_in_flight = Some(self.file_bytes);
        Some(self.compacted_file())
    }

    /// The file as it would be written now: per rank a trim record where
    /// its list starts, then its live entries (all durable: nothing is
    /// unwritten or in flight when it is asked for).
    pub fn compacted_file(&self) -> Vec<u8> {
        let mut file = Vec::new();
        for (&rank, log) in &self.ranks {
            if log.base > 0 {
                append_record(&mut file, rank | TRIM_RECORD_FLAG, log.base as u64, &[]);
            }
            let mut first = 0;
            while first < log.entries.len() {
                let end = frame_end(&log.entries, first);
                append_record(
                    &mut file,
                    rank,
                    (log.base + first) as u64,
                    &log.entries[first..end],
                );
                first = end;
            }
        }
        file
    }

    /// The rewrite [`poll_compaction`](Self::poll_compaction) gave is the
    /// log now (renamed over it, synced).
    pub fn handle_compacted(&mut self, file_bytes: u64) {
        let Some(before) = self.compaction_in_flight.take() else {
            return;
        };
        self.counters.compactions += 1;
        self.counters.log_bytes_compacted += before.saturating_sub(file_bytes);
        self.file_bytes = file_bytes;
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
        // From where the list starts now: a checkpoint of the rank covers
        // what was trimmed, and the replacement resumes from it.
        let durable = &log.entries[..log.durable - log.base];
        let mut first = 0;
        loop {
            let end = frame_end(durable, first);
            let frame = Frame::Replay {
                first: (log.base + first) as u64,
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
                        first: 0,
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

    fn trim(count: u64) -> Vec<u8> {
        Frame::Trim { count }.encode()
    }

    /// Rank `rank` on `connection` logs `count` wildcard determinants from
    /// `first`, one batch each, appended to `file`.
    fn log_batches(
        logger: &mut EventLogger,
        file: &mut Vec<u8>,
        connection: u64,
        first: u64,
        count: u64,
    ) {
        for ordinal in first..first + count {
            logger.handle_frame(
                connection,
                &determinants(ordinal, vec![wildcard(ordinal, 1)]),
            );
            file.extend(logger.poll_write().unwrap());
            logger.handle_durable();
        }
        frames_out(logger);
    }

    #[test]
    fn a_trim_waits_for_durable_determinants_and_a_replacement_lowers_it_to_its_list() {
        let mut logger = EventLogger::new();
        logger.handle_frame(1, &hello(0, 0, false));
        let mut file = Vec::new();
        log_batches(&mut logger, &mut file, 1, 0, 5);
        // The checkpoint covers eight; five are durable: five go now.
        logger.handle_frame(1, &trim(8));
        assert_eq!(logger.trimmed(0), 5);
        logger.handle_frame(1, &determinants(5, vec![wildcard(5, 1), wildcard(6, 1)]));
        assert_eq!(logger.trimmed(0), 5, "not before they are durable");
        file.extend(logger.poll_write().unwrap());
        logger.handle_durable();
        assert_eq!(logger.trimmed(0), 7);
        // The rank dies with the eighth lost: its replacement's list goes
        // on from seven, and its determinants there are no checkpoint's.
        logger.handle_closed(1);
        logger.handle_frame(2, &hello(0, 1, true));
        frames_out(&mut logger);
        logger.handle_frame(2, &determinants(7, vec![wildcard(7, 2), wildcard(8, 2)]));
        while let Some(batch) = logger.poll_write() {
            file.extend(batch);
            logger.handle_durable();
        }
        assert_eq!(logger.trimmed(0), 7);
        assert_eq!(logger.entries(0), &[wildcard(7, 2), wildcard(8, 2)]);
        // A trim from the dead incarnation's socket is ignored.
        logger.handle_frame(1, &trim(9));
        assert_eq!(logger.trimmed(0), 7);
        let (recovered, _) = EventLogger::recover(&file).unwrap();
        assert_eq!(recovered.trimmed(0), 7);
        assert_eq!(recovered.entries(0), logger.entries(0));
        assert_eq!(recovered.counters.determinants_trimmed, 7);
    }

    #[test]
    fn a_cut_below_the_trim_reads_back_as_the_same_list() {
        let mut logger = EventLogger::new();
        logger.handle_frame(1, &hello(3, 0, false));
        let mut file = Vec::new();
        log_batches(&mut logger, &mut file, 1, 0, 6);
        logger.handle_frame(1, &trim(4));
        logger.handle_frame(1, &Frame::Truncate { count: 2 }.encode());
        file.extend(logger.poll_write().unwrap());
        logger.handle_durable();
        assert_eq!(
            frames_out(&mut logger),
            vec![(1, Frame::Truncated { count: 2 })]
        );
        assert_eq!(logger.stored(3), 2);
        assert!(logger.entries(3).is_empty());
        let (recovered, _) = EventLogger::recover(&file).unwrap();
        assert_eq!(recovered.stored(3), 2);
        assert_eq!(recovered.trimmed(3), 2);
        // The replacement's list continues at the cut, untrimmed.
        logger.handle_frame(1, &determinants(2, vec![wildcard(9, 0)]));
        file.extend(logger.poll_write().unwrap());
        logger.handle_durable();
        assert_eq!(logger.entries(3), &[wildcard(9, 0)]);
        let (recovered, _) = EventLogger::recover(&file).unwrap();
        assert_eq!(recovered.entries(3), logger.entries(3));
    }

    #[test]
    fn compaction_keeps_only_live_records_and_reads_back_the_same_lists() {
        let mut logger = EventLogger::new();
        logger.handle_frame(1, &hello(0, 0, false));
        logger.handle_frame(2, &hello(1, 0, false));
        let mut file = Vec::new();
        log_batches(&mut logger, &mut file, 1, 0, 400);
        log_batches(&mut logger, &mut file, 2, 0, 300);
        assert!(file.len() as u64 > COMPACTION_BYTES_MIN);
        logger.handle_frame(1, &trim(390));
        logger.handle_frame(2, &trim(100));
        // Not while the trim records are unwritten.
        assert!(logger.poll_compaction().is_none());
        file.extend(logger.poll_write().unwrap());
        logger.handle_durable();
        let image = logger.poll_compaction().expect("most of the file is dead");
        assert!(logger.poll_write().is_none());
        assert!(
            image.len() < file.len() / 2,
            "{} of {}",
            image.len(),
            file.len()
        );
        let (recovered, length) = EventLogger::recover(&image).unwrap();
        assert_eq!(length, image.len());
        for rank in [0, 1] {
            assert_eq!(recovered.trimmed(rank), logger.trimmed(rank));
            assert_eq!(recovered.stored(rank), logger.stored(rank));
            assert_eq!(recovered.durable(rank), logger.durable(rank));
            assert_eq!(recovered.entries(rank), logger.entries(rank));
        }
        logger.handle_compacted(image.len() as u64);
        let report = logger.report();
        assert_eq!(report.compactions, 1);
        assert_eq!(report.log_bytes, image.len() as u64);
        assert_eq!(
            report.log_bytes_compacted,
            (file.len() - image.len()) as u64
        );
        assert_eq!(report.determinants_trimmed, 490);
        assert_eq!(report.determinants_live, 10 + 200);
        assert_eq!(report.determinants_live_max, 700);
        // Appends go on after the rewrite; not compacted again until
        // about as much again is dead.
        let mut file = image;
        log_batches(&mut logger, &mut file, 1, 400, 5);
        assert!(logger.poll_compaction().is_none());
        let (recovered, _) = EventLogger::recover(&file).unwrap();
        assert_eq!(recovered.entries(0), logger.entries(0));
        assert_eq!(recovered.trimmed(0), 390);
        // A replacement is served its list from the trim on.
        logger.handle_closed(1);
        logger.handle_frame(3, &hello(0, 1, true));
        let out = frames_out(&mut logger);
        assert_eq!(
            out[0],
            (
                3,
                Frame::Replay {
                    first: 390,
                    last: true,
                    entries: (390..405).map(|ordinal| wildcard(ordinal, 1)).collect(),
                }
            )
        );
        assert_eq!(out[1], (3, Frame::Ack { count: 405 }));
    }
}
