//! Failure notices: which processes of the job have died (and which
//! replacements have joined), as the launcher tells every survivor.
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

/// What the launcher said about one process of the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEvent {
    /// Incarnation `incarnation` of world rank `rank` died.
    Failed {
        /// World rank.
        rank: u32,
        /// Which process of that rank (0 for the first).
        incarnation: u32,
    },
    /// Incarnation `incarnation` of world rank `rank` (a replacement the
    /// launcher started) listens at `address` for the survivors to connect.
    Rejoined {
        /// World rank.
        rank: u32,
        /// Which process of that rank (1 for the first replacement).
        incarnation: u32,
        /// Its TCP listener, `ip:port`.
        address: String,
        /// For a replica forked by a substitute (replication's recovery):
        /// the fork's cut, hex (`resmpi_replication::ForkCut::to_bytes`).
        cut: Option<String>,
    },
}

/// Deaths and re-joins seen so far, in the order they were reported.
#[derive(Debug, Default)]
pub struct FailureNotices {
    /// Number of events recorded (the engine compares it with what it saw).
    count: AtomicU64,
    /// The events, first report first; a death of one (rank, incarnation)
    /// is recorded once.
    events: Mutex<Vec<PeerEvent>>,
    /// The connection to the launcher closed: no further notice can come.
    launcher_lost: AtomicBool,
}

impl FailureNotices {
    /// No deaths yet.
    pub fn new() -> FailureNotices {
        FailureNotices::default()
    }

    /// Record that incarnation `incarnation` of world rank `rank` died; a
    /// death reported twice counts once.
    pub fn note_failure(&self, rank: u32, incarnation: u32) {
        self.record(PeerEvent::Failed { rank, incarnation });
    }

    /// Record that incarnation `incarnation` of world rank `rank` joined,
    /// listening at `address`.
    pub fn note_rejoin(&self, rank: u32, incarnation: u32, address: String) {
        self.note_rejoin_with_cut(rank, incarnation, address, None);
    }

    /// The same, for a forked replica whose re-join carries `cut` (hex).
    pub fn note_rejoin_with_cut(
        &self,
        rank: u32,
        incarnation: u32,
        address: String,
        cut: Option<String>,
    ) {
        self.record(PeerEvent::Rejoined {
            rank,
            incarnation,
            address,
            cut,
        });
    }

    fn record(&self, event: PeerEvent) {
        let mut events = self
            .events
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if events.contains(&event) {
            return;
        }
        events.push(event);
        self.count.store(events.len() as u64, Ordering::Release);
    }

    /// How many events have been recorded: cheap enough for every progress call.
    #[inline]
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// The event counter itself ([`count`](Self::count) reads it), for a
    /// reader that keeps a pointer to it beside the notices.
    pub fn counter(&self) -> &AtomicU64 {
        &self.count
    }

    /// The events after the first `seen`, in report order.
    pub fn events_since(&self, seen: u64) -> Vec<PeerEvent> {
        let events = self
            .events
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        events.iter().skip(seen as usize).cloned().collect()
    }

    /// Whether a death of world rank `rank` has been reported (any
    /// incarnation): for a wire-up that goes on without a dead peer.
    pub fn has_failed(&self, rank: u32) -> bool {
        self.events
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .iter()
            .any(|event| matches!(event, PeerEvent::Failed { rank: dead, .. } if *dead == rank))
    }

    /// Whether a death of world rank `rank`'s incarnation `incarnation`,
    /// or of a later one, has been reported: for a replacement's wire-up
    /// that goes on without a peer that died after the launcher listed it.
    pub fn has_failed_since(&self, rank: u32, incarnation: u32) -> bool {
        self.events
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .iter()
            .any(|event| {
                matches!(event, PeerEvent::Failed { rank: dead, incarnation: died }
                    if *dead == rank && *died >= incarnation)
            })
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
        let death = |rank| PeerEvent::Failed {
            rank,
            incarnation: 0,
        };
        notices.note_failure(3, 0);
        notices.note_failure(1, 0);
        notices.note_failure(3, 0);
        assert_eq!(notices.count(), 2);
        assert_eq!(notices.events_since(0), vec![death(3), death(1)]);
        assert_eq!(notices.events_since(1), vec![death(1)]);
        assert!(notices.events_since(2).is_empty());
        notices.note_rejoin(3, 1, "127.0.0.1:9".into());
        notices.note_failure(3, 1);
        notices.note_failure(3, 1);
        assert_eq!(notices.count(), 4);
        assert_eq!(
            notices.events_since(2),
            vec![
                PeerEvent::Rejoined {
                    rank: 3,
                    incarnation: 1,
                    address: "127.0.0.1:9".into(),
                    cut: None,
                },
                PeerEvent::Failed {
                    rank: 3,
                    incarnation: 1
                }
            ]
        );
        assert!(!notices.launcher_lost());
        notices.note_launcher_lost();
        assert!(notices.launcher_lost());
    }

    #[test]
    fn a_death_counts_for_the_incarnation_listed_and_earlier_ones_only() {
        let notices = FailureNotices::new();
        notices.note_failure(2, 0);
        // Listed as incarnation 1 (its replacement): the old death is not its.
        assert!(!notices.has_failed_since(2, 1));
        assert!(notices.has_failed_since(2, 0));
        notices.note_failure(2, 1);
        assert!(notices.has_failed_since(2, 1));
        assert!(!notices.has_failed_since(3, 0));
    }
}
