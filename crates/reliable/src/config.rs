//! Tunables of one reliable link, and the retransmission backoff they imply.
//!
//! Kept apart from the state machine so that the launcher (`--ack-timeout`,
//! `--retries`) and the simulator can build and reason about a configuration
//! without touching link state.

/// Tunables of a [`crate::PeerLink`]. Both ends of a link are expected to use
/// the same values: `send_window_frames` is also the receiver's reorder window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReliableConfig {
    /// Time after the first transmission of a frame before it is retransmitted
    /// if no acknowledgement covered it.
    pub ack_timeout_ns: u64,
    /// Cap of the doubling retransmission timeout (truncated exponential
    /// backoff): the timeout after the k-th transmission is
    /// `min(ack_timeout_ns * 2^(k-1), max_backoff_ns)`.
    pub max_backoff_ns: u64,
    /// Most frames the sender keeps unacknowledged (back-pressure beyond it),
    /// and most frames the receiver buffers ahead of the application.
    pub send_window_frames: usize,
    /// How long an acknowledgement may wait for an outgoing data frame to
    /// piggyback on before a pure Ack frame is sent.
    pub ack_delay_ns: u64,
    /// Retransmissions of one frame before the peer is declared unreachable.
    pub max_retries: u32,
}

impl Default for ReliableConfig {
    /// Cluster-scale defaults: 10 ms first timeout, 1 s cap, 256 frames in
    /// flight, 50 µs ack coalescing, 16 retries (about 11 s of silence before
    /// a peer is declared unreachable).
    fn default() -> ReliableConfig {
        ReliableConfig {
            ack_timeout_ns: 10_000_000,
            max_backoff_ns: 1_000_000_000,
            send_window_frames: 256,
            ack_delay_ns: 50_000,
            max_retries: 16,
        }
    }
}

impl ReliableConfig {
    /// Retransmission timeout after the `transmit_count`-th transmission of a
    /// frame (1 = first transmission): doubles each time, truncated at
    /// `max_backoff_ns`, never below `ack_timeout_ns`.
    pub fn retransmit_timeout_ns(&self, transmit_count: u32) -> u64 {
        let doublings = transmit_count.saturating_sub(1).min(63);
        let timeout_ns = self.ack_timeout_ns.saturating_mul(1u64 << doublings);
        timeout_ns.min(self.max_backoff_ns.max(self.ack_timeout_ns))
    }

    /// Longest silence, from the first transmission of a frame, before the
    /// link declares the peer unreachable: the sum of all timeouts of the
    /// `max_retries + 1` transmissions.
    pub fn unreachable_after_ns(&self) -> u64 {
        (1..=self.max_retries.saturating_add(1))
            .map(|transmit_count| self.retransmit_timeout_ns(transmit_count))
            .fold(0u64, u64::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_then_is_truncated_at_the_cap() {
        let config = ReliableConfig {
            ack_timeout_ns: 100,
            max_backoff_ns: 1_000,
            ..ReliableConfig::default()
        };
        let timeouts: Vec<u64> = (1..=6).map(|k| config.retransmit_timeout_ns(k)).collect();
        assert_eq!(timeouts, vec![100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(config.retransmit_timeout_ns(u32::MAX), 1_000);
    }

    #[test]
    fn unreachable_time_is_the_sum_of_all_timeouts() {
        let config = ReliableConfig {
            ack_timeout_ns: 100,
            max_backoff_ns: 1_000,
            max_retries: 5,
            ..ReliableConfig::default()
        };
        assert_eq!(
            config.unreachable_after_ns(),
            100 + 200 + 400 + 800 + 1_000 + 1_000
        );
    }
}
