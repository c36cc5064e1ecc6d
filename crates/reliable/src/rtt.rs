//! Round-trip time of one rail, estimated from acknowledgements, and the
//! timers it sets: the retransmission timeout (RTO) and the probe timeout
//! (PTO) of the tail-loss probe.
//!
//! Why: a fixed timer is either too short for a busy or distant peer
//! (spurious retransmissions, wasted bandwidth) or far too long for a fast
//! one (a lost last fragment stalls the message for the whole timer: 50 ms
//! on TCP, against a round trip of well under a millisecond). TCP
//! (RFC 6298) and QUIC (RFC 9002) both measure the path instead; this is
//! their estimator, per rail because rails may differ (a slow and a fast
//! NIC, a rail across another switch).
//!
//! - **Samples**: only from a frame transmitted once (Karn's rule: the ack
//!   of a retransmitted frame may answer either copy), and only from the
//!   newest frame an acknowledgement newly covers (an ack covering ten
//!   frames says nothing about the nine older ones, which waited in
//!   queues, QUIC's "largest acknowledged").
//! - **Ack delay**: the receiver may hold an ack up to `ack_delay_ns`
//!   (coalescing). Piggybacked acks cannot say how long they waited, so
//!   samples include that wait and the timers add `ack_delay_ns` once more,
//!   for a tail frame whose ack waits the whole delay: the estimate errs
//!   long, never short.
//! - **Smoothing**: `srtt = 7/8 srtt + 1/8 sample`,
//!   `rttvar = 3/4 rttvar + 1/4 |srtt - sample|`; the first sample sets
//!   `srtt = sample`, `rttvar = sample / 2`.
//! - **RTO** `= max(srtt + max(4 rttvar, granularity) + ack_delay, floor)`,
//!   `floor = min(min_rto, ack_timeout)`, capped at `max_backoff`; before
//!   any sample it is the configured `ack_timeout_ns`. Backoff doubles it per transmission of a frame.
//! - **PTO** `= srtt + max(4 rttvar, granularity) + ack_delay`, without the
//!   RTO's floor: a probe is cheap (one frame, not counted against the retry
//!   budget), so it may fire early; the RTO, which counts, keeps a floor
//!   that scheduler noise on an oversubscribed node does not cross.

use crate::config::ReliableConfig;

/// RTT state of one rail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RttEstimator {
    /// Smoothed RTT; `None` until the first sample.
    smoothed_ns: Option<u64>,
    /// Mean deviation of the samples.
    variance_ns: u64,
    /// Smallest sample seen (0 until the first sample).
    min_ns: u64,
    /// Most recent sample.
    latest_ns: u64,
    /// Samples taken.
    sample_count: u64,
}

/// What the timers of a rail are, for the link's use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RttTimers {
    /// Base retransmission timeout (first transmission of a frame).
    pub rto_ns: u64,
    /// Tail-loss probe timeout; `None` before the first sample (the RTO
    /// alone governs until the path has been measured).
    pub pto_ns: Option<u64>,
    /// Time after which a frame sent before an acknowledged one is deemed
    /// lost: RFC 9002's time threshold, widened from 9/8 of the larger of
    /// smoothed and latest RTT to that plus the variance allowance and the
    /// ack delay, as the probe timeout, so that jitter of the order of the
    /// RTT does not make it fire spuriously; the RTO before any sample.
    pub reorder_threshold_ns: u64,
    /// Smallest RTT seen; `None` before the first sample.
    pub min_rtt_ns: Option<u64>,
}

impl RttEstimator {
    /// Take a sample of `rtt_ns` (Karn's rule applied by the caller).
    pub fn sample(&mut self, rtt_ns: u64) {
        let rtt_ns = rtt_ns.max(1);
        self.latest_ns = rtt_ns;
        self.sample_count += 1;
        match self.smoothed_ns {
            None => {
                self.smoothed_ns = Some(rtt_ns);
                self.variance_ns = rtt_ns / 2;
                self.min_ns = rtt_ns;
            }
            Some(smoothed_ns) => {
                self.min_ns = self.min_ns.min(rtt_ns);
                let deviation_ns = smoothed_ns.abs_diff(rtt_ns);
                self.variance_ns = (3 * self.variance_ns + deviation_ns) / 4;
                self.smoothed_ns = Some((7 * smoothed_ns + rtt_ns) / 8);
            }
        }
    }

    /// Smallest RTT sample, if measured.
    pub fn min_ns(&self) -> Option<u64> {
        self.smoothed_ns.map(|_| self.min_ns)
    }

    /// Smoothed RTT, if measured.
    pub fn smoothed_ns(&self) -> Option<u64> {
        self.smoothed_ns
    }

    /// The timers this estimate implies under `config`.
    pub fn timers(&self, config: &ReliableConfig) -> RttTimers {
        let cap_ns = config.max_backoff_ns.max(config.ack_timeout_ns);
        let Some(smoothed_ns) = self.smoothed_ns else {
            return RttTimers {
                rto_ns: config.ack_timeout_ns,
                pto_ns: None,
                reorder_threshold_ns: config.ack_timeout_ns,
                min_rtt_ns: None,
            };
        };
        let allowance_ns = self
            .variance_ns
            .saturating_mul(4)
            .max(config.timer_granularity_ns);
        let pto_ns = smoothed_ns
            .saturating_add(allowance_ns)
            .saturating_add(config.ack_delay_ns);
        // The floor never exceeds the configured timeout: a user who asks
        // for a 5 ms timeout (`--ack-timeout`) gets no slower detection.
        let floor_ns = config.min_rto_ns.min(config.ack_timeout_ns);
        let rto_ns = pto_ns.max(floor_ns).min(cap_ns);
        let reorder_threshold_ns = smoothed_ns
            .max(self.latest_ns)
            .saturating_add(allowance_ns)
            .saturating_add(config.ack_delay_ns);
        RttTimers {
            rto_ns,
            pto_ns: Some(pto_ns.min(cap_ns)),
            reorder_threshold_ns,
            min_rtt_ns: Some(self.min_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ReliableConfig {
        ReliableConfig {
            ack_timeout_ns: 50_000,
            min_rto_ns: 2_000,
            timer_granularity_ns: 100,
            ack_delay_ns: 10,
            max_backoff_ns: 1_000_000,
            ..ReliableConfig::default()
        }
    }

    #[test]
    fn before_any_sample_the_configured_timeout_rules_and_there_is_no_probe() {
        let timers = RttEstimator::default().timers(&config());
        assert_eq!(timers.rto_ns, 50_000);
        assert_eq!(timers.pto_ns, None);
        assert_eq!(timers.min_rtt_ns, None);
    }

    #[test]
    fn first_sample_sets_srtt_and_half_of_it_as_variance() {
        let mut estimator = RttEstimator::default();
        estimator.sample(1_000);
        let timers = estimator.timers(&config());
        // 1000 + 4 * 500 + 10
        assert_eq!(timers.pto_ns, Some(3_010));
        assert_eq!(timers.rto_ns, 3_010);
        assert_eq!(timers.min_rtt_ns, Some(1_000));
        assert_eq!(timers.reorder_threshold_ns, 3_010);
    }

    #[test]
    fn steady_samples_shrink_the_variance_down_to_the_floors() {
        let mut estimator = RttEstimator::default();
        for _ in 0..100 {
            estimator.sample(1_000);
        }
        let timers = estimator.timers(&config());
        assert_eq!(estimator.smoothed_ns(), Some(1_000));
        // Variance gone: the granularity stands in for it; the RTO keeps
        // its floor, the probe does not.
        assert_eq!(timers.pto_ns, Some(1_000 + 100 + 10));
        assert_eq!(timers.rto_ns, 2_000);
    }

    #[test]
    fn smoothing_follows_rfc_6298() {
        let mut estimator = RttEstimator::default();
        estimator.sample(800);
        estimator.sample(1_600);
        // rttvar = 3/4 * 400 + 1/4 * |800 - 1600| = 500; srtt = 7/8 * 800 + 1/8 * 1600 = 900
        assert_eq!(estimator.smoothed_ns(), Some(900));
        assert_eq!(estimator.timers(&config()).pto_ns, Some(900 + 2_000 + 10));
        assert_eq!(estimator.timers(&config()).min_rtt_ns, Some(800));
        // The time threshold follows the larger of smoothed and latest.
        assert_eq!(
            estimator.timers(&config()).reorder_threshold_ns,
            1_600 + 2_000 + 10
        );
    }

    #[test]
    fn the_floor_never_exceeds_the_configured_timeout() {
        let mut estimator = RttEstimator::default();
        for _ in 0..100 {
            estimator.sample(1_000);
        }
        let short = ReliableConfig {
            ack_timeout_ns: 1_500,
            ..config()
        };
        assert_eq!(estimator.timers(&short).rto_ns, 1_500);
    }

    #[test]
    fn timers_never_exceed_the_backoff_cap() {
        let mut estimator = RttEstimator::default();
        estimator.sample(10_000_000);
        let timers = estimator.timers(&config());
        assert_eq!(timers.rto_ns, 1_000_000);
        assert_eq!(timers.pto_ns, Some(1_000_000));
    }
}
