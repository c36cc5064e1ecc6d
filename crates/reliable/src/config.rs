//! Tunables of one reliable link, and the retransmission backoff they imply.
//!
//! Kept apart from the state machine so that the launcher (`--ack-timeout`,
//! `--retries`) and the simulator can build and reason about a configuration
//! without touching link state.

/// Largest number of rails one link may have: rail state is a few words per
/// rail, and the limit keeps every per-rail scan short.
pub const RAIL_COUNT_MAX: u32 = 16;

/// How a link with several rails spreads its frames over the live ones
/// (`mpiexec --stripe`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StripePolicy {
    /// Each frame goes to the next live rail in turn.
    #[default]
    RoundRobin,
    /// Consecutive fragments of one message alternate rails. Every frame the
    /// link sees is one fragment, so this is round robin per frame for now.
    Fragments,
    /// Everything goes to the lowest live rail; the others are standby
    /// (heartbeated, used for failover).
    Off,
}

/// Tunables of a [`crate::PeerLink`]. Both ends of a link are expected to use
/// the same values: `send_window_frames` is also the receiver's reorder window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReliableConfig {
    /// Initial retransmission timeout: time after the first transmission of
    /// a frame before it is retransmitted if no acknowledgement covered it,
    /// while the rail's round-trip time has not been measured yet (see
    /// `rtt.rs`: afterwards the estimator sets it).
    pub ack_timeout_ns: u64,
    /// Floor of the measured retransmission timeout, or `ack_timeout_ns` if
    /// smaller (the tail-loss probe has none but `timer_granularity_ns`).
    pub min_rto_ns: u64,
    /// Least allowance for RTT variation in the measured timers (QUIC's
    /// `kGranularity`): timers never fire within this of the smoothed RTT.
    pub timer_granularity_ns: u64,
    /// Cap of the doubling retransmission timeout (truncated exponential
    /// backoff): the timeout after the k-th transmission is
    /// `min(rto * 2^(k-1), max_backoff_ns)`, `rto` being `ack_timeout_ns`
    /// before the first RTT sample.
    pub max_backoff_ns: u64,
    /// Most frames the sender keeps unacknowledged (back-pressure beyond it),
    /// and most frames the receiver buffers ahead of the application.
    pub send_window_frames: usize,
    /// How long an acknowledgement may wait for an outgoing data frame to
    /// piggyback on before a pure Ack frame is sent.
    pub ack_delay_ns: u64,
    /// Retransmissions of one frame before the peer is declared unreachable.
    pub max_retries: u32,
    /// Paths ("rails") to the peer, `1..=RAIL_COUNT_MAX`. With one rail there
    /// are no heartbeats and no silence detection: the link behaves exactly
    /// as a single-path link (failure only through `max_retries` or
    /// [`crate::PeerLink::handle_rail_error`]).
    pub rail_count: u32,
    /// How frames are spread over live rails.
    pub stripe_policy: StripePolicy,
    /// With two rails or more: a live rail whose outbound direction nothing
    /// proved (an ack of a frame sent on it, or an answered probe) for this
    /// long gets a heartbeat probe, which the peer answers on the same rail.
    pub heartbeat_interval_ns: u64,
    /// With two rails or more: a rail on which nothing was received, or whose
    /// outbound direction nothing proved, for this long while another live
    /// rail was heard from is marked down.
    pub rail_silence_timeout_ns: u64,
    /// With two rails or more: when every live rail has been silent this
    /// long, all are marked down and the peer is unreachable. Much longer
    /// than `rail_silence_timeout_ns`: silence on every rail at once is what
    /// a slow (descheduled) peer looks like, not a broken rail.
    pub peer_silence_timeout_ns: u64,
    /// Pace of the probes sent on a rail marked down, to notice that it came
    /// back (slower than heartbeats: a dead rail should cost little).
    pub down_rail_probe_interval_ns: u64,
}

impl Default for ReliableConfig {
    /// Cluster-scale defaults: 10 ms first timeout (before the RTT is
    /// measured), 10 ms floor of the measured one, 1 ms timer granularity
    /// (QUIC's), 1 s cap, 256 frames in
    /// flight, 50 µs ack coalescing, 16 retries (about 11 s of silence before
    /// a peer is declared unreachable); one rail, round robin; with more
    /// rails, 20 ms heartbeats, a rail silent for 100 ms while another works
    /// is down, every rail silent for 1 s makes the peer unreachable, down
    /// rails probed every 100 ms.
    fn default() -> ReliableConfig {
        ReliableConfig {
            ack_timeout_ns: 10_000_000,
            min_rto_ns: 10_000_000,
            timer_granularity_ns: 1_000_000,
            max_backoff_ns: 1_000_000_000,
            send_window_frames: 256,
            ack_delay_ns: 50_000,
            max_retries: 16,
            rail_count: 1,
            stripe_policy: StripePolicy::RoundRobin,
            heartbeat_interval_ns: 20_000_000,
            rail_silence_timeout_ns: 100_000_000,
            peer_silence_timeout_ns: 1_000_000_000,
            down_rail_probe_interval_ns: 100_000_000,
        }
    }
}

impl ReliableConfig {
    /// Retransmission timeout after the `transmit_count`-th transmission of a
    /// frame (1 = first transmission) before any RTT sample: doubles each
    /// time from `ack_timeout_ns`, truncated at `max_backoff_ns`.
    pub fn retransmit_timeout_ns(&self, transmit_count: u32) -> u64 {
        self.retransmit_timeout_from_ns(self.ack_timeout_ns, transmit_count)
    }

    /// Retransmission timeout after the `transmit_count`-th transmission of a
    /// frame whose rail's base timeout is `rto_ns`: doubles each time,
    /// truncated at `max_backoff_ns` (or `rto_ns`, if larger).
    pub fn retransmit_timeout_from_ns(&self, rto_ns: u64, transmit_count: u32) -> u64 {
        let doublings = transmit_count.saturating_sub(1).min(63);
        let timeout_ns = rto_ns.saturating_mul(1u64 << doublings);
        timeout_ns.min(self.max_backoff_ns.max(rto_ns))
    }

    /// Whether rails are watched (heartbeats, silence detection): only when
    /// there is more than one.
    pub fn rails_are_watched(&self) -> bool {
        self.rail_count > 1
    }

    /// Latest time, after a rail stops carrying anything while another
    /// works, at which the link marks it down: the silence timeout, plus one
    /// heartbeat interval for the last proof to have been a heartbeat (on
    /// either rail).
    pub fn rail_down_detected_within_ns(&self) -> u64 {
        self.rail_silence_timeout_ns
            .saturating_add(self.heartbeat_interval_ns)
    }

    /// Latest time, after every rail stops carrying anything, at which the
    /// link declares the peer unreachable: the peer silence timeout plus one
    /// heartbeat interval.
    pub fn every_rail_down_detected_within_ns(&self) -> u64 {
        self.peer_silence_timeout_ns
            .max(self.rail_silence_timeout_ns)
            .saturating_add(self.heartbeat_interval_ns)
    }

    /// Silence, from the first transmission of a frame, before the link
    /// declares the peer unreachable when no RTT was measured: the sum of
    /// all timeouts of the `max_retries + 1` transmissions.
    pub fn unreachable_after_ns(&self) -> u64 {
        self.unreachable_after_from_ns(self.ack_timeout_ns)
    }

    /// The same, from a measured base timeout `rto_ns`.
    pub fn unreachable_after_from_ns(&self, rto_ns: u64) -> u64 {
        (1..=self.max_retries.saturating_add(1))
            .map(|transmit_count| self.retransmit_timeout_from_ns(rto_ns, transmit_count))
            .fold(0u64, u64::saturating_add)
    }

    /// Longest silence, whatever the RTT measured, before the link declares
    /// the peer unreachable: every timeout at least `ack_timeout_ns` or the
    /// largest measured timeout (`max_backoff_ns`).
    pub fn unreachable_after_ns_max(&self) -> u64 {
        self.unreachable_after_from_ns(self.ack_timeout_ns.max(self.max_backoff_ns))
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
