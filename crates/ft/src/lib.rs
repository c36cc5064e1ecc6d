//! Fault-tolerance protocol interceptors.
//!
//! Replication (SDR-MPI) and message logging plug in here, between MPI
//! semantics and the matching engine, without patching either: the engine
//! reports what happened (a match, a completed receive, a completed send, a
//! failed peer) to one `Interceptor`, whose default methods do nothing. A
//! protocol overrides only the hooks it needs. [`PassThrough`] (`--ft none`)
//! is the default and, being a zero-sized type used through generics, costs
//! nothing.
#![warn(missing_docs)]

pub use resmpi_matching::{Envelope, MatchEvent};

/// What the job does when a peer is lost for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerFailureAction {
    /// End the job with a message naming the peer (no process fault tolerance).
    AbortJob,
    /// The protocol has handled it (a replica substitutes, a rank restarts).
    Handled,
}

/// Hooks a fault-tolerance protocol can override. Every method has a
/// do-nothing default, so a protocol states only what it changes.
pub trait Interceptor {
    /// Short name, as given to `--ft`.
    fn name(&self) -> &'static str;

    /// Whether the engine must record match events (ANY_SOURCE decisions)
    /// for [`Interceptor::on_match`]. False keeps matching free of bookkeeping.
    fn wants_match_events(&self) -> bool {
        false
    }

    /// A receive matched a message.
    fn on_match(&mut self, _event: &MatchEvent) {}

    /// A receive completed with `bytes` of payload from `envelope`.
    fn on_receive_complete(&mut self, _envelope: &Envelope, _bytes: usize) {}

    /// A send to world rank `destination` completed locally.
    fn on_send_complete(&mut self, _destination: u32, _context: u32, _tag: i32, _bytes: usize) {}

    /// World rank `peer` can no longer be reached.
    fn on_peer_failure(&mut self, _peer: u32) -> PeerFailureAction {
        PeerFailureAction::AbortJob
    }
}

/// The `none` protocol: every hook is the default.
#[derive(Clone, Copy, Debug, Default)]
pub struct PassThrough;

impl Interceptor for PassThrough {
    fn name(&self) -> &'static str {
        "none"
    }
}

/// An interceptor that counts every event; tests use it to check that the
/// engine reports what it should.
#[derive(Clone, Debug, Default)]
pub struct EventCounter {
    /// Matches seen.
    pub matches: u64,
    /// Receives completed.
    pub receives_completed: u64,
    /// Sends completed.
    pub sends_completed: u64,
    /// Peers reported failed.
    pub peer_failures: u64,
}

impl Interceptor for EventCounter {
    fn name(&self) -> &'static str {
        "event-counter"
    }
    fn wants_match_events(&self) -> bool {
        true
    }
    fn on_match(&mut self, _event: &MatchEvent) {
        self.matches += 1;
    }
    fn on_receive_complete(&mut self, _envelope: &Envelope, _bytes: usize) {
        self.receives_completed += 1;
    }
    fn on_send_complete(&mut self, _destination: u32, _context: u32, _tag: i32, _bytes: usize) {
        self.sends_completed += 1;
    }
    fn on_peer_failure(&mut self, _peer: u32) -> PeerFailureAction {
        self.peer_failures += 1;
        PeerFailureAction::AbortJob
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_through_aborts_on_peer_failure_and_wants_no_events() {
        let mut protocol = PassThrough;
        assert!(!protocol.wants_match_events());
        assert_eq!(protocol.on_peer_failure(3), PeerFailureAction::AbortJob);
        assert_eq!(std::mem::size_of::<PassThrough>(), 0);
    }
}
