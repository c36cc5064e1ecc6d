//! Failure notices: which processes of the job have died, as the launcher
//! tells every survivor.
//!
//! Why a separate, shared object: the notice arrives on the PMI connection,
//! read by a thread that blocks on it (no cost to the progress engine's hot
//! path), while the engine runs on the application's thread. The engine
//! checks one atomic counter per progress call and takes the new deaths
//! only when it moved. The same object is fed by whatever sees a death
//! first (the launcher's notice, or the network layer finding a peer
//! unreachable), so every path ends in the same event.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Deaths seen so far, in the order they were reported.
#[derive(Debug, Default)]
pub struct FailureNotices {
    /// Number of deaths recorded (the engine compares it with what it saw).
    count: AtomicU64,
    /// World ranks of the dead processes, first report first.
    failed: Mutex<Vec<u32>>,
    /// The connection to the launcher closed: no further notice can come.
    launcher_lost: AtomicBool,
}

impl FailureNotices {
    /// No deaths yet.
    pub fn new() -> FailureNotices {
        FailureNotices::default()
    }

    /// Record that world rank `rank` died; a rank reported twice counts once.
    pub fn note(&self, rank: u32) {
        let mut failed = self
            .failed
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if failed.contains(&rank) {
            return;
        }
        failed.push(rank);
        self.count.store(failed.len() as u64, Ordering::Release);
    }

    /// How many deaths have been recorded: cheap enough for every progress call.
    #[inline]
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// The deaths after the first `seen`, in report order.
    pub fn since(&self, seen: u64) -> Vec<u32> {
        let failed = self
            .failed
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        failed.iter().skip(seen as usize).copied().collect()
    }

    /// The launcher's connection closed.
    pub fn note_launcher_lost(&self) {
        self.launcher_lost.store(true, Ordering::Release);
    }

    /// Whether the launcher's connection closed.
    pub fn launcher_lost(&self) -> bool {
        self.launcher_lost.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deaths_are_counted_once_and_read_in_report_order() {
        let notices = FailureNotices::new();
        assert_eq!(notices.count(), 0);
        notices.note(3);
        notices.note(1);
        notices.note(3);
        assert_eq!(notices.count(), 2);
        assert_eq!(notices.since(0), vec![3, 1]);
        assert_eq!(notices.since(1), vec![1]);
        assert!(notices.since(2).is_empty());
        assert!(!notices.launcher_lost());
        notices.note_launcher_lost();
        assert!(notices.launcher_lost());
    }
}
