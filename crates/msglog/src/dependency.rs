//! Optimistic logging's dependency vector (O2P): per rank, how many of
//! that rank's determinants this process's state depends on, what of it
//! is known stable, and what to piggyback on the next message to a peer.
//!
//! Why its own file and no I/O: it is the part of O2P that decides what
//! travels (bytes on every application message) and who is an orphan,
//! so its rules are tested alone (`tests.rs`) and through the engine.
//!
//! The rules, after O2P as Bouteiller, Ropars et al. describe it ("Reasons
//! for a pessimistic or optimistic message logging protocol in MPI
//! uncoordinated failure recovery", section IV.B):
//! - own entry = determinants this process made (its earlier
//!   incarnations' included); another rank's = the most any piggyback it
//!   took in named (a determinant count only grows, so max merges);
//! - an entry at or below the rank's stable count (the logger's stable
//!   vector) is *empty*: that determinant is on disk, no failure can lose
//!   it, so it is neither piggybacked nor a reason to be an orphan;
//! - a message to `destination` carries only the non-empty entries that
//!   changed since the last message to it (Singhal and Kshemkalyani: one
//!   clock per entry, one per destination), never one about
//!   `destination` itself (it knows its own), and nothing at all when no
//!   entry qualifies — the common case with an active logger.

use std::collections::BTreeSet;

/// One process's dependency vector and what it knows stable.
#[derive(Clone, Debug)]
pub struct Dependencies {
    rank: u32,
    /// Per rank: determinants of it this state depends on.
    depends_count: Vec<u64>,
    /// Per rank: determinants of it the logger has on disk, as last heard.
    stable_count: Vec<u64>,
    /// Ranks whose entry is above their stable count (non-empty).
    unstable: BTreeSet<u32>,
    /// Per rank: the send clock at which its entry last grew.
    changed_at: Vec<u64>,
    /// Per destination: the send clock of the last piggyback to it.
    sent_at: Vec<u64>,
    /// One tick per message sent.
    send_clock: u64,
    /// `Depend` frames sent.
    pub piggybacked_frames: u64,
    /// (rank, count) entries they carried.
    pub piggybacked_entries: u64,
}

impl Dependencies {
    /// The vector of world rank `rank` in a job of `size` ranks: empty.
    pub fn new(rank: u32, size: u32) -> Dependencies {
        let size = size as usize;
        Dependencies {
            rank,
            depends_count: vec![0; size],
            stable_count: vec![0; size],
            unstable: BTreeSet::new(),
            changed_at: vec![0; size],
            sent_at: vec![0; size],
            send_clock: 0,
            piggybacked_frames: 0,
            piggybacked_entries: 0,
        }
    }

    /// Determinants of `rank` this state depends on.
    pub fn dependency(&self, rank: u32) -> u64 {
        self.depends_count.get(rank as usize).copied().unwrap_or(0)
    }

    /// Determinants of `rank` known on the logger's disk.
    pub fn stable(&self, rank: u32) -> u64 {
        self.stable_count.get(rank as usize).copied().unwrap_or(0)
    }

    /// Whether everything of `rank` this state depends on is known stable
    /// (a failure of `rank` cannot make this process an orphan).
    pub fn is_stable_on(&self, rank: u32) -> bool {
        !self.unstable.contains(&rank)
    }

    /// Ranks with a non-empty entry.
    pub fn unstable_ranks(&self) -> impl Iterator<Item = u32> + '_ {
        self.unstable.iter().copied()
    }

    fn raise(&mut self, rank: u32, count: u64) {
        let index = rank as usize;
        if count <= self.depends_count[index] {
            return;
        }
        self.depends_count[index] = count;
        // The next message's clock: it must carry the new value.
        self.changed_at[index] = self.send_clock + 1;
        if count > self.stable_count[index] {
            self.unstable.insert(rank);
        }
    }

    /// This process made its `count`-th determinant (or replayed that many).
    pub fn handle_own(&mut self, count: u64) {
        self.raise(self.rank, count);
    }

    /// The logger has `count` determinants of `rank` on disk.
    pub fn handle_stable(&mut self, rank: u32, count: u64) {
        let index = rank as usize;
        if index >= self.stable_count.len() {
            return;
        }
        self.stable_count[index] = self.stable_count[index].max(count);
        if self.depends_count[index] <= self.stable_count[index] {
            self.unstable.remove(&rank);
        }
    }

    /// A piggyback came with a message: merge it. False: a rank out of
    /// range (the frame is refused whole).
    pub fn handle_piggyback(&mut self, entries: &[(u32, u64)]) -> bool {
        if entries
            .iter()
            .any(|&(rank, _)| rank as usize >= self.depends_count.len())
        {
            return false;
        }
        for &(rank, count) in entries {
            // Its own entry this process knows better (a peer may carry an
            // old one back to it).
            if rank != self.rank {
                self.raise(rank, count);
            }
        }
        true
    }

    /// What the message about to go to `destination` must carry: the
    /// non-empty entries changed since the last one to it; `None` when
    /// there is none (nothing is sent). Ticks the send clock.
    pub fn piggyback(&mut self, destination: u32) -> Option<Vec<(u32, u64)>> {
        if self.unstable.is_empty() {
            // The common case: no clock to keep (nothing changed since is
            // older than a later growth, which sets its own clock).
            return None;
        }
        self.send_clock += 1;
        let since = self.sent_at[destination as usize];
        self.sent_at[destination as usize] = self.send_clock;
        let entries: Vec<(u32, u64)> = self
            .unstable
            .iter()
            .copied()
            .filter(|&rank| rank != destination && self.changed_at[rank as usize] > since)
            .map(|rank| (rank, self.depends_count[rank as usize]))
            .collect();
        if entries.is_empty() {
            return None;
        }
        self.piggybacked_frames += 1;
        self.piggybacked_entries += entries.len() as u64;
        Some(entries)
    }

    /// `destination` died or came back: its next message carries every
    /// non-empty entry again (its new incarnation knows none).
    pub fn forget_sent(&mut self, destination: u32) {
        if let Some(sent) = self.sent_at.get_mut(destination as usize) {
            *sent = 0;
        }
    }
}
