//! The fault model of the simulated network: what can happen to a frame
//! between `poll_transmit` at one rank and `handle_receive` at another.
//!
//! Every decision is drawn from the job's seeded generator, so a failing seed
//! replays the exact same losses, duplicates and delays.

use crate::rng::SplitMix64;

/// Per-frame fault probabilities and delays. Rates are in `0.0..=1.0`.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultModel {
    /// Probability that any frame is dropped.
    pub loss_rate: f64,
    /// Probability that a delivered frame is delivered twice.
    pub duplication_rate: f64,
    /// Probability that a frame gets an extra random delay (reordering).
    pub reorder_rate: f64,
    /// Largest extra delay of a reordered frame.
    pub reorder_delay_ns_max: u64,
    /// Additional probability that a pure Ack frame is dropped.
    pub ack_loss_rate: f64,
    /// Base one-way latency of every frame.
    pub latency_ns: u64,
    /// Largest uniform jitter added to the latency (reorders close frames).
    pub jitter_ns_max: u64,
    /// Directed (source, destination) pairs whose every frame is dropped.
    pub cut_links: Vec<(u32, u32)>,
}

impl FaultModel {
    /// A perfect network: fixed latency, nothing lost, duplicated or delayed.
    pub fn none() -> FaultModel {
        FaultModel {
            loss_rate: 0.0,
            duplication_rate: 0.0,
            reorder_rate: 0.0,
            reorder_delay_ns_max: 0,
            ack_loss_rate: 0.0,
            latency_ns: 2_000,
            jitter_ns_max: 0,
            cut_links: Vec::new(),
        }
    }

    /// A random mix of every fault kind, drawn from `rng`: loss up to 20 %,
    /// duplication up to 10 %, reordering up to 30 % (delays up to 60 µs,
    /// beyond the simulator's ack timeout), ack loss up to 20 %.
    pub fn random(rng: &mut SplitMix64) -> FaultModel {
        FaultModel {
            loss_rate: rng.uniform(0.0, 0.2),
            duplication_rate: rng.uniform(0.0, 0.1),
            reorder_rate: rng.uniform(0.0, 0.3),
            reorder_delay_ns_max: rng.between(1_000, 60_000),
            ack_loss_rate: rng.uniform(0.0, 0.2),
            latency_ns: rng.between(500, 5_000),
            jitter_ns_max: rng.between(0, 2_000),
            cut_links: Vec::new(),
        }
    }

    /// The arrival delays of one frame: empty if it is lost, two entries if
    /// it is duplicated.
    pub fn arrival_delays_ns(
        &self,
        rng: &mut SplitMix64,
        source: u32,
        destination: u32,
        is_pure_ack: bool,
    ) -> Vec<u64> {
        if self.cut_links.contains(&(source, destination)) {
            return Vec::new();
        }
        if rng.chance(self.loss_rate) || (is_pure_ack && rng.chance(self.ack_loss_rate)) {
            return Vec::new();
        }
        let copy_count = if rng.chance(self.duplication_rate) {
            2
        } else {
            1
        };
        (0..copy_count)
            .map(|_| {
                let mut delay_ns = self.latency_ns + rng.between(0, self.jitter_ns_max);
                if rng.chance(self.reorder_rate) {
                    delay_ns += rng.between(0, self.reorder_delay_ns_max);
                }
                delay_ns
            })
            .collect()
    }
}
