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
//!   entry qualifies — the common case with an active logger;
//! - every entry names the incarnation of the rank whose list it counts
//!   (a replacement's list starts with what it replayed of its
//!   predecessor's, so a newer incarnation's entry supersedes an older
//!   one's): a count of a dead incarnation must be compared with where
//!   that incarnation's list ended, never with the replacement's;
//! - each raise of another rank's entry is kept, until it is stable, with
//!   this process's own list length when it came (its *position*): if the
//!   raise turns out to name a lost determinant, this process is an orphan
//!   from that position on, and rolling back means cutting its own list
//!   there (nothing it decided before the raise can depend on it).

use std::collections::BTreeSet;

pub use crate::frames::Dependency;

/// A raise of an entry not known stable yet: which incarnation's list,
/// to what count, and this process's own list length when it came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Raise {
    incarnation: u32,
    count: u64,
    own_position: u64,
}

/// One process's dependency vector and what it knows stable.
#[derive(Clone, Debug)]
pub struct Dependencies {
    rank: u32,
    incarnation: u32,
    /// Per rank: (incarnation, determinants of its list this state
    /// depends on).
    depends: Vec<(u32, u64)>,
    /// Per rank: determinants of it the logger has on disk, as last heard.
    stable_count: Vec<u64>,
    /// Ranks whose entry is above their stable count (non-empty).
    unstable: BTreeSet<u32>,
    /// Per rank: its raises not known stable (bounded by the entries
    /// taken in between two stable vectors).
    raises: Vec<Vec<Raise>>,
    /// Per rank: the send clock at which its entry last grew.
    changed_at: Vec<u64>,
    /// Per destination: the send clock of the last piggyback to it.
    sent_at: Vec<u64>,
    /// One tick per message sent.
    send_clock: u64,
    /// `Depend` frames sent.
    pub piggybacked_frames: u64,
    /// Entries they carried.
    pub piggybacked_entries: u64,
}

impl Dependencies {
    /// The vector of world rank `rank`, incarnation `incarnation`, in a
    /// job of `size` ranks: empty.
    pub fn new(rank: u32, incarnation: u32, size: u32) -> Dependencies {
        let size = size as usize;
        Dependencies {
            rank,
            incarnation,
            depends: vec![(0, 0); size],
            stable_count: vec![0; size],
            unstable: BTreeSet::new(),
            raises: vec![Vec::new(); size],
            changed_at: vec![0; size],
            sent_at: vec![0; size],
            send_clock: 0,
            piggybacked_frames: 0,
            piggybacked_entries: 0,
        }
    }

    /// Determinants of `rank` this state depends on (in the list of the
    /// incarnation [`dependency_incarnation`](Self::dependency_incarnation) names).
    pub fn dependency(&self, rank: u32) -> u64 {
        self.depends.get(rank as usize).map_or(0, |entry| entry.1)
    }

    /// The incarnation of `rank` whose list the entry counts.
    pub fn dependency_incarnation(&self, rank: u32) -> u32 {
        self.depends.get(rank as usize).map_or(0, |entry| entry.0)
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

    /// Whether every entry of another rank is known stable: nothing this
    /// state depends on can be lost (a checkpoint taken now lies before
    /// any point this process could have to roll back to).
    pub fn is_stable_on_others(&self) -> bool {
        self.unstable.iter().all(|&rank| rank == self.rank)
    }

    /// Whether every entry, its own included, is known stable: nothing
    /// this state rests on can be lost (its output may be shown).
    pub fn is_all_stable(&self) -> bool {
        self.unstable.is_empty()
    }

    /// Ranks with a non-empty entry.
    pub fn unstable_ranks(&self) -> impl Iterator<Item = u32> + '_ {
        self.unstable.iter().copied()
    }

    fn raise(&mut self, entry: Dependency) {
        let index = entry.rank as usize;
        let (incarnation, count) = self.depends[index];
        let newer = entry.incarnation > incarnation;
        if entry.incarnation < incarnation || (!newer && entry.count <= count) {
            return;
        }
        self.depends[index] = (entry.incarnation, entry.count);
        // The next message's clock: it must carry the new value.
        self.changed_at[index] = self.send_clock + 1;
        if entry.count > self.stable_count[index] {
            self.unstable.insert(entry.rank);
        } else {
            self.unstable.remove(&entry.rank);
        }
    }

    /// This process made its `count`-th determinant (or replayed that many).
    pub fn handle_own(&mut self, count: u64) {
        let own = Dependency {
            rank: self.rank,
            incarnation: self.incarnation,
            count,
        };
        self.raise(own);
    }

    /// The logger has `count` determinants of `rank` on disk.
    pub fn handle_stable(&mut self, rank: u32, count: u64) {
        let index = rank as usize;
        if index >= self.stable_count.len() {
            return;
        }
        self.stable_count[index] = self.stable_count[index].max(count);
        let stable = self.stable_count[index];
        if self.depends[index].1 <= stable {
            self.unstable.remove(&rank);
        }
        // The count is of the rank's list, whichever incarnation made it:
        // it says nothing of an older incarnation's count beyond where
        // that one ended (`handle_end` settles those).
        let current = self.depends[index].0;
        self.raises[index].retain(|raise| raise.incarnation < current || raise.count > stable);
    }

    /// `rank`'s incarnation `incarnation` ended at `end` and this process
    /// depends on no more of it than that (or rolls back): forget its raises.
    pub fn handle_end(&mut self, rank: u32, incarnation: u32) {
        if let Some(raises) = self.raises.get_mut(rank as usize) {
            raises.retain(|raise| raise.incarnation != incarnation);
        }
    }

    /// A piggyback came with a message, when this process's own list was
    /// `own_position` long: merge it (every entry is kept as a raise, an
    /// older incarnation's too: the caller checks those against where
    /// that incarnation ended). False: a rank out of range (the frame is
    /// refused whole).
    pub fn handle_piggyback(&mut self, entries: &[Dependency], own_position: u64) -> bool {
        if entries
            .iter()
            .any(|entry| entry.rank as usize >= self.depends.len())
        {
            return false;
        }
        for &entry in entries {
            // Its own entry this process knows better (a peer may carry an
            // old one back to it). A count at or below the stable one is
            // kept as a raise all the same: it may be a dead incarnation's,
            // and the stable count may be its replacement's.
            if entry.rank == self.rank || entry.count == 0 {
                continue;
            }
            self.raises[entry.rank as usize].push(Raise {
                incarnation: entry.incarnation,
                count: entry.count,
                own_position,
            });
            self.raise(entry);
        }
        true
    }

    /// Whether this state depends on determinants of `rank`'s incarnation
    /// `incarnation` beyond the first `end` (that incarnation's list ended
    /// there: the rest are lost): the most it depends on, and this
    /// process's own list length when it first did (where it must roll
    /// back to).
    pub fn beyond(&self, rank: u32, incarnation: u32, end: u64) -> Option<(u64, u64)> {
        let raises = self.raises.get(rank as usize)?;
        let lost = raises
            .iter()
            .filter(|raise| raise.incarnation == incarnation && raise.count > end);
        let count = lost.clone().map(|raise| raise.count).max()?;
        let own_position = lost.map(|raise| raise.own_position).min()?;
        Some((count, own_position))
    }

    /// What the message about to go to `destination` must carry: the
    /// non-empty entries changed since the last one to it; `None` when
    /// there is none (nothing is sent). Ticks the send clock.
    pub fn piggyback(&mut self, destination: u32) -> Option<Vec<Dependency>> {
        if self.unstable.is_empty() {
            // The common case: no clock to keep (nothing changed since is
            // older than a later growth, which sets its own clock).
            return None;
        }
        self.send_clock += 1;
        let since = self.sent_at[destination as usize];
        self.sent_at[destination as usize] = self.send_clock;
        let entries: Vec<Dependency> = self
            .unstable
            .iter()
            .copied()
            .filter(|&rank| rank != destination && self.changed_at[rank as usize] > since)
            .map(|rank| {
                let (incarnation, count) = self.depends[rank as usize];
                Dependency {
                    rank,
                    incarnation,
                    count,
                }
            })
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
