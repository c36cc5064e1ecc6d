//! The sender-based payload log: every message this process sends, kept in
//! its own memory, keyed by (destination, logical number), so that a
//! destination restarted from `MPI_Init` can be sent its whole history
//! again in the original order.
//!
//! Why in the sender: the payload exists here anyway when it is sent (the
//! paper's sender-based logging), so logging costs one copy and no
//! message; if this process dies the log is lost with it, but its own
//! replay regenerates every message it held.
//!
//! Bounds: `memory_bytes_max` (payloads in memory plus a fixed cost per
//! entry, spilled or not). With a spill file ([`SenderLog::with_spill`]),
//! a message that would pass it pushes the oldest payloads still in memory
//! to local disk (`spill`, written in the background) until it fits, or
//! goes to disk itself; the index of every message stays in memory. What
//! happens when nothing fits any more (the memory holds only index
//! entries, or the file reached its own bound, or the disk failed) is
//! specified: the log stops taking messages and says why
//! ([`SenderLog::incomplete_reason`]); the protocol then refuses to
//! restart any peer (the job ends with an error naming the bound) instead
//! of replaying a history with holes.
//!
//! Trimming ([`SenderLog::trim`]): once a destination's restartable
//! checkpoint covers the messages numbered up to some `last` (it says so
//! in a `Covered` frame), they are dropped, from memory and from the
//! spill file's index (the file's bytes stay until the process ends: it
//! is append-only and unlinked). What a log no longer holds is named by
//! [`SenderLog::first_held`]; asking for a message below it is an error
//! naming the missing range, never a replay with a hole.
//!
//! Payloads in memory lie in an [`Arena`] of large chunks (copied there
//! straight from the send's bytes, [`SenderLog::record_with`]); a spilled
//! payload is written from its chunk, which is reused once every entry in
//! it was trimmed or spilled.

use std::collections::VecDeque;

use resmpi_ft::Payload;

use crate::arena::{Arena, Slot};
use crate::spill::{SpillConfig, SpillFile, SpilledAt};

/// Bytes charged per logged message besides its payload (its key and the
/// container's bookkeeping).
pub const ENTRY_OVERHEAD_BYTES: usize = 48;

/// One logged message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedMessage {
    /// Its number on the (this process, destination) channel.
    pub logical_seq: u64,
    /// Context id it was matched in.
    pub context: u32,
    /// Its tag.
    pub tag: i32,
    /// Its packed bytes.
    pub payload: Vec<u8>,
}

/// The key of a message being logged (its payload comes separately).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageKey {
    /// Its number on the (this process, destination) channel.
    pub logical_seq: u64,
    /// Context id it was matched in.
    pub context: u32,
    /// Its tag.
    pub tag: i32,
}

/// Where a logged payload is.
#[derive(Debug)]
enum Stored {
    Memory(Slot),
    Disk(SpilledAt),
    /// Its spill failed (the log is incomplete since).
    Lost,
}

/// One message in the index.
#[derive(Debug)]
struct Entry {
    logical_seq: u64,
    context: u32,
    tag: i32,
    stored: Stored,
}

/// Every message sent, per destination, in logical order.
#[derive(Debug)]
pub struct SenderLog {
    per_destination: Vec<VecDeque<Entry>>,
    /// Per destination: entries trimmed from the front of its queue (an
    /// entry's absolute position is this plus its index).
    trimmed_entries: Vec<usize>,
    /// Per destination: the first logical number this log can hold (1
    /// until a trim or a resume moves it).
    first_held: Vec<u64>,
    /// Payload bytes dropped by trims, and how many messages.
    trimmed_bytes: u64,
    trimmed_messages: u64,
    /// Payload bytes, and messages, ever taken (in memory or spilled).
    logged_bytes: u64,
    logged_messages: u64,
    /// The most `memory_bytes` and arena bytes mapped have been.
    memory_bytes_peak: usize,
    mapped_bytes_peak: usize,
    /// (destination, absolute position) of the entries whose payload is
    /// in memory, oldest first: the order they spill in.
    in_memory: VecDeque<(u32, usize)>,
    memory_bytes: usize,
    memory_bytes_max: usize,
    arena: Arena,
    spill: Option<(SpillConfig, u32)>,
    spill_file: Option<SpillFile>,
    incomplete: Option<String>,
}

impl SenderLog {
    /// An empty log for a job of `size` ranks, holding at most `bytes_max`
    /// in memory and nothing on disk.
    pub fn new(size: u32, bytes_max: usize) -> SenderLog {
        SenderLog {
            per_destination: (0..size).map(|_| VecDeque::new()).collect(),
            trimmed_entries: vec![0; size as usize],
            first_held: vec![1; size as usize],
            trimmed_bytes: 0,
            trimmed_messages: 0,
            logged_bytes: 0,
            logged_messages: 0,
            memory_bytes_peak: 0,
            mapped_bytes_peak: 0,
            in_memory: VecDeque::new(),
            memory_bytes: 0,
            memory_bytes_max: bytes_max,
            arena: Arena::new(false),
            spill: None,
            spill_file: None,
            incomplete: None,
        }
    }

    /// Advise the in-memory log's mappings as transparent huge pages
    /// (`RESMPI_MSGLOG_HUGEPAGES`; see [`crate::arena`] for when that
    /// pays). Call before anything is logged.
    pub fn with_huge_pages(mut self, huge_pages: bool) -> SenderLog {
        debug_assert_eq!(self.logged_messages, 0);
        self.arena = Arena::new(huge_pages);
        self
    }

    /// Past the memory bound, spill to a file as `config` says (process
    /// `rank`'s; the file is created when first needed). A bound of 0
    /// keeps spilling off.
    pub fn with_spill(mut self, config: SpillConfig, rank: u32) -> SenderLog {
        self.spill = (config.bytes_max > 0).then_some((config, rank));
        self
    }

    /// Keep `message`, sent to `destination`. When it fits nowhere nothing
    /// is kept any more and the log is incomplete for good.
    pub fn record(&mut self, destination: u32, message: LoggedMessage) {
        let key = MessageKey {
            logical_seq: message.logical_seq,
            context: message.context,
            tag: message.tag,
        };
        self.record_with(destination, key, Payload::Contiguous(&message.payload));
    }

    /// Keep the message `key` sent to `destination`, copying (or
    /// gathering) `payload` straight to where the log keeps it, so the copy
    /// into the log is the only one. As [`SenderLog::record`] otherwise.
    pub fn record_with(&mut self, destination: u32, key: MessageKey, payload: Payload<'_>) {
        let length = payload.len();
        if self.incomplete.is_some() || destination as usize >= self.per_destination.len() {
            return;
        }
        let cost = length + ENTRY_OVERHEAD_BYTES;
        if let Err(reason) = self.make_room(cost) {
            self.incomplete = Some(reason);
            return;
        }
        let MessageKey {
            logical_seq,
            context,
            tag,
        } = key;
        let in_memory = if self.memory_bytes + cost <= self.memory_bytes_max {
            self.arena.allocate(length)
        } else {
            Err(String::new())
        };
        let stored = match in_memory {
            Ok((slot, bytes)) => {
                match payload {
                    Payload::Contiguous(source) => bytes.copy_from_slice(source),
                    Payload::Gathered { gather, .. } => gather(bytes),
                }
                self.memory_bytes += length;
                let position = self.trimmed_entries[destination as usize]
                    + self.per_destination[destination as usize].len();
                self.in_memory.push_back((destination, position));
                Stored::Memory(slot)
            }
            Err(arena_error) => {
                // A copy of its own that the writer owns (for a
                // contiguous payload, not zeroed first).
                match self.spill_payload(payload.to_vec()) {
                    Ok(at) => Stored::Disk(at),
                    Err(reason) if arena_error.is_empty() => {
                        self.incomplete = Some(reason);
                        return;
                    }
                    Err(reason) => {
                        self.incomplete = Some(format!("{arena_error}; {reason}"));
                        return;
                    }
                }
            }
        };
        self.memory_bytes += ENTRY_OVERHEAD_BYTES;
        self.logged_bytes += length as u64;
        self.logged_messages += 1;
        self.memory_bytes_peak = self.memory_bytes_peak.max(self.memory_bytes);
        self.mapped_bytes_peak = self.mapped_bytes_peak.max(self.arena.mapped_bytes());
        self.per_destination[destination as usize].push_back(Entry {
            logical_seq,
            context,
            tag,
            stored,
        });
    }

    /// Spill the oldest payloads in memory until `cost` more bytes fit, or
    /// until only the new entry's index would (its payload then spills
    /// itself). Err: even that does not fit.
    fn make_room(&mut self, cost: usize) -> Result<(), String> {
        if self.spill.is_some() {
            while self.memory_bytes + cost > self.memory_bytes_max {
                let Some((destination, absolute)) = self.in_memory.pop_front() else {
                    break;
                };
                let Some(position) =
                    absolute.checked_sub(self.trimmed_entries[destination as usize])
                else {
                    // Trimmed since.
                    continue;
                };
                let entry = &self.per_destination[destination as usize][position];
                let Stored::Memory(slot) = entry.stored else {
                    continue;
                };
                // The writer writes from the chunk, which is not reused
                // until it has.
                let payload = self.arena.shared_bytes(slot);
                self.arena.free(slot);
                self.memory_bytes -= slot.len();
                let stored = match self.spill_payload(payload) {
                    Ok(at) => Stored::Disk(at),
                    Err(reason) => {
                        self.per_destination[destination as usize][position].stored = Stored::Lost;
                        return Err(reason);
                    }
                };
                self.per_destination[destination as usize][position].stored = stored;
            }
        }
        let index_fits = self.memory_bytes + ENTRY_OVERHEAD_BYTES <= self.memory_bytes_max;
        if self.memory_bytes + cost <= self.memory_bytes_max || (self.spill.is_some() && index_fits)
        {
            return Ok(());
        }
        Err(format!(
            "it passed its memory bound of {} bytes (RESMPI_MSGLOG_MEM / --msglog-mem){}",
            self.memory_bytes_max,
            if self.spill.is_some() {
                " with only the index of spilled messages in memory"
            } else {
                " and spilling to disk is off (RESMPI_MSGLOG_DISK / --msglog-disk 0)"
            }
        ))
    }

    fn spill_payload(
        &mut self,
        payload: impl AsRef<[u8]> + Send + 'static,
    ) -> Result<SpilledAt, String> {
        let Some((config, rank)) = &self.spill else {
            return Err("spilling to disk is off".to_string());
        };
        if self.spill_file.is_none() {
            self.spill_file = Some(SpillFile::open(config, *rank)?);
        }
        let file = self.spill_file.as_mut().expect("opened above");
        file.append(payload)
    }

    /// The message numbered `logical_seq` sent to `destination`, read back
    /// from disk if it was spilled. Err says why it cannot be had.
    pub fn message(&self, destination: u32, logical_seq: u64) -> Result<LoggedMessage, String> {
        let first_held = self.first_held(destination);
        if logical_seq < first_held {
            return Err(format!(
                "messages {logical_seq} to {} to rank {destination} are no longer in this rank's \
                 sender log (a checkpoint of rank {destination} covered them, or this rank resumed \
                 from its own checkpoint after sending them); a restart that needs them is refused",
                first_held - 1
            ));
        }
        let entry = self.entry(destination, logical_seq).ok_or_else(|| {
            format!(
                "message {logical_seq} to rank {destination} is not in this rank's sender log{}",
                self.incomplete
                    .as_ref()
                    .map(|reason| format!(": {reason}"))
                    .unwrap_or_default()
            )
        })?;
        let payload = match &entry.stored {
            Stored::Memory(slot) => self.arena.bytes(*slot).to_vec(),
            Stored::Disk(at) => self
                .spill_file
                .as_ref()
                .ok_or_else(|| "a spilled message without a spill file".to_string())?
                .read(*at)?,
            Stored::Lost => {
                return Err(format!(
                    "message {logical_seq} to rank {destination} was lost spilling it: {}",
                    self.incomplete.as_deref().unwrap_or("the spill failed")
                ))
            }
        };
        Ok(LoggedMessage {
            logical_seq,
            context: entry.context,
            tag: entry.tag,
            payload,
        })
    }

    fn entry(&self, destination: u32, logical_seq: u64) -> Option<&Entry> {
        let queue = self.per_destination.get(destination as usize)?;
        let first = queue.front()?.logical_seq;
        let position = logical_seq.checked_sub(first)? as usize;
        queue
            .get(position)
            .filter(|entry| entry.logical_seq == logical_seq)
            .or_else(|| queue.iter().find(|entry| entry.logical_seq == logical_seq))
    }

    /// The first logical number to `destination` this log can still hold.
    pub fn first_held(&self, destination: u32) -> u64 {
        self.first_held
            .get(destination as usize)
            .copied()
            .unwrap_or(1)
    }

    /// Drop the messages to `destination` numbered at or below `last` (its
    /// checkpoint covers them). Returns the payload bytes dropped.
    pub fn trim(&mut self, destination: u32, last: u64) -> u64 {
        let slot = destination as usize;
        let Some(queue) = self.per_destination.get_mut(slot) else {
            return 0;
        };
        let mut dropped_bytes = 0u64;
        while queue.front().is_some_and(|entry| entry.logical_seq <= last) {
            let entry = queue.pop_front().expect("checked");
            self.trimmed_entries[slot] += 1;
            self.trimmed_messages += 1;
            self.memory_bytes -= ENTRY_OVERHEAD_BYTES;
            match entry.stored {
                Stored::Memory(slot) => {
                    self.memory_bytes -= slot.len();
                    dropped_bytes += slot.len() as u64;
                    self.arena.free(slot);
                }
                Stored::Disk(at) => dropped_bytes += at.length,
                Stored::Lost => {}
            }
        }
        self.first_held[slot] = self.first_held[slot].max(last.saturating_add(1));
        self.trimmed_bytes += dropped_bytes;
        // Forget trimmed entries' places in the spill order (they are
        // skipped anyway; this keeps the queue bounded without spilling).
        if self.in_memory.len() > 64 && self.in_memory.len() > 2 * self.entries_in_memory() {
            let trimmed = &self.trimmed_entries;
            self.in_memory
                .retain(|&(destination, absolute)| absolute >= trimmed[destination as usize]);
        }
        dropped_bytes
    }

    /// The log as a checkpoint carries it: per destination, the first
    /// number held and every message held (read back from disk if it was
    /// spilled). Layout: count u32, then per destination: first held
    /// u64, messages u32, and per message: number u64, context u32, tag
    /// i32, length u64, payload. Err: the log is incomplete.
    pub fn export(&self) -> Result<Vec<u8>, String> {
        if let Some(reason) = &self.incomplete {
            return Err(format!("the sender log is incomplete: {reason}"));
        }
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&(self.per_destination.len() as u32).to_le_bytes());
        for (destination, queue) in self.per_destination.iter().enumerate() {
            bytes.extend_from_slice(&self.first_held[destination].to_le_bytes());
            bytes.extend_from_slice(&(queue.len() as u32).to_le_bytes());
            for entry in queue {
                let message = self.message(destination as u32, entry.logical_seq)?;
                bytes.extend_from_slice(&message.logical_seq.to_le_bytes());
                bytes.extend_from_slice(&message.context.to_le_bytes());
                bytes.extend_from_slice(&message.tag.to_le_bytes());
                bytes.extend_from_slice(&(message.payload.len() as u64).to_le_bytes());
                bytes.extend_from_slice(&message.payload);
            }
        }
        Ok(bytes)
    }

    /// Take back a log [`SenderLog::export`] wrote (a replacement resuming
    /// from its checkpoint; this log is empty then). Err names what is
    /// wrong with the bytes.
    pub fn import(&mut self, bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        let mut at = 0usize;
        let mut take = |length: usize| -> Result<&[u8], String> {
            let end = at
                .checked_add(length)
                .filter(|&end| end <= bytes.len())
                .ok_or_else(|| "checkpointed sender log: truncated".to_string())?;
            let taken = &bytes[at..end];
            at = end;
            Ok(taken)
        };
        let count = u32::from_le_bytes(take(4)?.try_into().expect("4")) as usize;
        if count != self.per_destination.len() {
            return Err(format!(
                "checkpointed sender log: {count} destinations, the job has {}",
                self.per_destination.len()
            ));
        }
        for destination in 0..count {
            let first_held = u64::from_le_bytes(take(8)?.try_into().expect("8"));
            let messages = u32::from_le_bytes(take(4)?.try_into().expect("4"));
            self.first_held[destination] = first_held.max(1);
            for _ in 0..messages {
                let logical_seq = u64::from_le_bytes(take(8)?.try_into().expect("8"));
                let context = u32::from_le_bytes(take(4)?.try_into().expect("4"));
                let tag = i32::from_le_bytes(take(4)?.try_into().expect("4"));
                let length = u64::from_le_bytes(take(8)?.try_into().expect("8"));
                let length = usize::try_from(length)
                    .map_err(|_| "checkpointed sender log: a message too long".to_string())?;
                let payload = take(length)?.to_vec();
                self.record(
                    destination as u32,
                    LoggedMessage {
                        logical_seq,
                        context,
                        tag,
                        payload,
                    },
                );
            }
        }
        if at != bytes.len() {
            return Err(format!(
                "checkpointed sender log: {} bytes left over",
                bytes.len() - at
            ));
        }
        Ok(())
    }

    fn entries_in_memory(&self) -> usize {
        self.per_destination
            .iter()
            .flatten()
            .filter(|entry| matches!(entry.stored, Stored::Memory(_)))
            .count()
    }

    /// Payload bytes, and messages, dropped by trims so far.
    pub fn trimmed(&self) -> (u64, u64) {
        (self.trimmed_bytes, self.trimmed_messages)
    }

    /// Whether every message sent so far is in the log.
    pub fn is_complete(&self) -> bool {
        self.incomplete.is_none()
    }

    /// Why the log stopped taking messages, if it did.
    pub fn incomplete_reason(&self) -> Option<&str> {
        self.incomplete.as_deref()
    }

    /// Bytes charged against the memory bound.
    pub fn bytes_logged(&self) -> usize {
        self.memory_bytes
    }

    /// Bytes the arena holding the in-memory payloads has mapped (what
    /// the log costs in memory, besides its index).
    pub fn bytes_mapped(&self) -> usize {
        self.arena.mapped_bytes()
    }

    /// The arena's chunks mapped so far, and chunks reused instead.
    pub fn arena_chunks(&self) -> (u64, u64) {
        self.arena.chunk_counts()
    }

    /// Payload bytes, and messages, taken so far (in memory or spilled).
    pub fn logged(&self) -> (u64, u64) {
        (self.logged_bytes, self.logged_messages)
    }

    /// The most bytes charged against the memory bound, and the most the
    /// arena had mapped, at any time so far.
    pub fn peaks(&self) -> (usize, usize) {
        (self.memory_bytes_peak, self.mapped_bytes_peak)
    }

    /// Bytes written (or being written) to the spill file.
    pub fn bytes_spilled(&self) -> u64 {
        self.spill_file.as_ref().map_or(0, SpillFile::bytes_spilled)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn message(logical_seq: u64, length: usize) -> LoggedMessage {
        LoggedMessage {
            logical_seq,
            context: 0,
            tag: 7,
            payload: vec![logical_seq as u8; length],
        }
    }

    #[test]
    fn messages_are_found_by_destination_and_number() {
        let mut log = SenderLog::new(3, 1 << 20);
        for seq in 1..=5 {
            log.record(2, message(seq, 10));
        }
        log.record(1, message(1, 4));
        assert_eq!(log.message(2, 3).unwrap().payload, vec![3; 10]);
        assert_eq!(log.message(1, 1).unwrap().payload.len(), 4);
        assert!(log.message(2, 6).is_err());
        assert!(log.message(0, 1).is_err());
        assert!(log.is_complete());
    }

    #[test]
    fn past_the_bound_the_log_takes_nothing_and_says_it_is_incomplete() {
        let mut log = SenderLog::new(2, 2 * (100 + ENTRY_OVERHEAD_BYTES));
        log.record(1, message(1, 100));
        log.record(1, message(2, 100));
        assert!(log.is_complete());
        log.record(1, message(3, 1));
        assert!(!log.is_complete());
        // A later small message is not taken either: no holes.
        log.record(1, message(4, 0));
        assert!(log.message(1, 4).is_err());
        assert_eq!(log.bytes_logged(), 2 * (100 + ENTRY_OVERHEAD_BYTES));
    }

    fn spilling_log(memory_bytes_max: usize, disk_bytes_max: u64) -> SenderLog {
        SenderLog::new(3, memory_bytes_max)
            .with_spill(SpillConfig::new(std::env::temp_dir(), disk_bytes_max), 0)
    }

    #[test]
    fn past_the_memory_bound_the_oldest_payloads_spill_and_read_back() {
        // Room for the index of 40 messages and four 100-byte payloads.
        let memory_bytes_max = 40 * ENTRY_OVERHEAD_BYTES + 4 * 100;
        let mut log = spilling_log(memory_bytes_max, 1 << 20);
        for seq in 1..=20 {
            log.record(1, message(seq, 100));
            log.record(2, message(seq, 100));
        }
        assert!(log.is_complete(), "{:?}", log.incomplete_reason());
        assert!(log.bytes_logged() <= memory_bytes_max);
        assert!(log.bytes_spilled() >= 36 * 100, "{}", log.bytes_spilled());
        for seq in 1..=20 {
            for destination in [1, 2] {
                let logged = log.message(destination, seq).unwrap();
                assert_eq!(logged.payload, vec![seq as u8; 100]);
                assert_eq!((logged.logical_seq, logged.tag), (seq, 7));
            }
        }
    }

    #[test]
    fn a_message_larger_than_memory_goes_to_disk_itself() {
        let mut log = spilling_log(1000, 1 << 20);
        log.record(1, message(1, 5000));
        log.record(1, message(2, 10));
        assert!(log.is_complete());
        assert_eq!(log.message(1, 1).unwrap().payload, vec![1; 5000]);
        assert_eq!(log.message(1, 2).unwrap().payload, vec![2; 10]);
    }

    #[test]
    fn past_both_bounds_the_log_is_incomplete_and_says_which() {
        let mut log = spilling_log(2 * (100 + ENTRY_OVERHEAD_BYTES), 250);
        for seq in 1..=4 {
            log.record(1, message(seq, 100));
        }
        let reason = log.incomplete_reason().expect("past the disk bound");
        assert!(reason.contains("bound of 250 bytes"), "{reason}");
        assert!(reason.contains("--msglog-disk"), "{reason}");
        // What was logged before stays readable; nothing after it is kept.
        assert_eq!(log.message(1, 1).unwrap().payload, vec![1; 100]);
        let error = log.message(1, 4).unwrap_err();
        assert!(error.contains("not in this rank's sender log"), "{error}");
    }

    #[test]
    fn a_trim_drops_what_a_checkpoint_covers_and_a_lookup_below_names_the_range() {
        let mut log = spilling_log(16 * ENTRY_OVERHEAD_BYTES + 2 * 100, 1 << 20);
        for seq in 1..=6 {
            log.record(1, message(seq, 100));
            log.record(2, message(seq, 100));
        }
        let before = log.bytes_logged();
        assert_eq!(log.trim(1, 4), 400);
        assert_eq!(log.trimmed(), (400, 4));
        assert!(log.bytes_logged() < before);
        assert_eq!(log.first_held(1), 5);
        let error = log.message(1, 2).unwrap_err();
        assert!(error.contains("messages 2 to 4 to rank 1"), "{error}");
        assert_eq!(log.message(1, 5).unwrap().payload, vec![5; 100]);
        assert_eq!(log.message(2, 1).unwrap().payload, vec![1; 100]);
        // Spilling goes on past trimmed entries.
        for seq in 7..=12 {
            log.record(1, message(seq, 100));
        }
        assert!(log.is_complete(), "{:?}", log.incomplete_reason());
        for seq in 5..=12 {
            assert_eq!(log.message(1, seq).unwrap().payload, vec![seq as u8; 100]);
        }
    }

    fn filled(logical_seq: u64, length: usize) -> Vec<u8> {
        (0..length)
            .map(|index| (logical_seq as usize * 31 + index / 4096) as u8)
            .collect()
    }

    fn record_filled(log: &mut SenderLog, destination: u32, logical_seq: u64, length: usize) {
        let key = MessageKey {
            logical_seq,
            context: 3,
            tag: 7,
        };
        let payload = filled(logical_seq, length);
        if length.is_multiple_of(2) {
            log.record_with(destination, key, Payload::Contiguous(&payload));
        } else {
            // The non-contiguous form, packed by its gather.
            let gather = |out: &mut [u8]| out.copy_from_slice(&payload);
            log.record_with(
                destination,
                key,
                Payload::Gathered {
                    length_bytes: length,
                    gather: &gather,
                },
            );
        }
    }

    #[test]
    fn payloads_are_intact_across_arena_chunk_boundaries() {
        let mut log = SenderLog::new(3, 1 << 30);
        // 300 KiB payloads and gathered 700 KiB + 1 ones, two destinations
        // interleaved: many land where one chunk ends and the next begins.
        for seq in 1..=30 {
            record_filled(&mut log, 1, seq, 300 << 10);
            record_filled(&mut log, 2, seq, (700 << 10) + 1);
        }
        assert!(log.is_complete());
        assert!(log.bytes_mapped() >= 30 * (1000 << 10));
        for seq in 1..=30 {
            let message = log.message(1, seq).unwrap();
            assert_eq!((message.context, message.tag), (3, 7));
            assert!(message.payload == filled(seq, 300 << 10), "to 1, {seq}");
            assert!(log.message(2, seq).unwrap().payload == filled(seq, (700 << 10) + 1));
        }
        assert_eq!(log.logged(), (30 * ((1000 << 10) + 1), 60));
    }

    #[test]
    fn memory_freed_by_a_trim_is_reused_not_mapped_again() {
        let mut log = SenderLog::new(2, 1 << 30);
        for seq in 1..=16 {
            record_filled(&mut log, 1, seq, 1 << 20);
        }
        let mapped = log.bytes_mapped();
        let (chunks_mapped, _) = log.arena_chunks();
        assert_eq!(log.trim(1, 16), 16 << 20);
        for seq in 17..=32 {
            record_filled(&mut log, 1, seq, 1 << 20);
        }
        assert_eq!(log.arena_chunks().0, chunks_mapped, "no chunk mapped again");
        assert!(log.arena_chunks().1 >= 3, "{:?}", log.arena_chunks());
        assert_eq!(log.bytes_mapped(), mapped);
        assert_eq!(log.peaks().1, mapped);
        for seq in 17..=32 {
            assert!(log.message(1, seq).unwrap().payload == filled(seq, 1 << 20));
        }
        assert!(log.message(1, 16).is_err());
    }

    #[test]
    fn payloads_spill_from_the_arena_and_the_memory_is_reused() {
        // Room for about six 700 KiB payloads: the rest spill, oldest first.
        let memory_bytes_max = 6 * ((700 << 10) + ENTRY_OVERHEAD_BYTES) + 100 * 48;
        let mut log = spilling_log(memory_bytes_max, 1 << 30);
        for seq in 1..=60 {
            record_filled(&mut log, 1 + (seq % 2) as u32, seq, 700 << 10);
        }
        assert!(log.is_complete(), "{:?}", log.incomplete_reason());
        assert!(log.bytes_logged() <= memory_bytes_max);
        assert!(log.bytes_spilled() >= 50 * (700 << 10));
        // The chunks of spilled payloads were reused: the arena holds what
        // the bound allows and a few chunks more, not the whole history.
        assert!(
            log.bytes_mapped() <= memory_bytes_max + 8 * crate::arena::CHUNK_BYTES,
            "{}",
            log.bytes_mapped()
        );
        for seq in 1..=60 {
            let destination = 1 + (seq % 2) as u32;
            assert!(log.message(destination, seq).unwrap().payload == filled(seq, 700 << 10));
        }
    }

    #[test]
    fn a_payload_larger_than_a_chunk_is_kept_in_memory_and_its_memory_reused_after_a_trim() {
        let chunk = crate::arena::CHUNK_BYTES;
        let mut log = SenderLog::new(2, 1 << 30);
        record_filled(&mut log, 1, 1, 100);
        record_filled(&mut log, 1, 2, 2 * chunk + 5);
        record_filled(&mut log, 1, 3, 100);
        assert_eq!(log.bytes_spilled(), 0);
        assert!(log.message(1, 2).unwrap().payload == filled(2, 2 * chunk + 5));
        assert!(log.message(1, 3).unwrap().payload == filled(3, 100));
        let (mapped, _) = log.arena_chunks();
        log.trim(1, 2);
        assert!(log.message(1, 3).unwrap().payload == filled(3, 100));
        record_filled(&mut log, 1, 4, 2 * chunk + 5);
        assert_eq!(log.arena_chunks(), (mapped, 1));
        assert!(log.message(1, 4).unwrap().payload == filled(4, 2 * chunk + 5));
    }

    #[test]
    fn an_exported_log_is_imported_whole_and_a_damaged_one_is_refused() {
        let mut log = spilling_log(4 * ENTRY_OVERHEAD_BYTES + 100, 1 << 20);
        for seq in 1..=5 {
            log.record(1, message(seq, 100));
        }
        log.trim(1, 2);
        let bytes = log.export().unwrap();
        let mut again = SenderLog::new(3, 1 << 20);
        again.import(&bytes).unwrap();
        assert_eq!(again.first_held(1), 3);
        for seq in 3..=5 {
            assert_eq!(again.message(1, seq).unwrap(), log.message(1, seq).unwrap());
        }
        assert!(again.message(1, 2).is_err());
        for length in 1..bytes.len() {
            assert!(SenderLog::new(3, 1 << 20).import(&bytes[..length]).is_err());
        }
    }
}
