//! The fault model of the simulated network: what can happen to a frame
//! between `poll_transmit` at one rank and `handle_receive` at another.
//!
//! Every decision is drawn from the job's seeded generator, so a failing seed
//! replays the exact same losses, duplicates, delays, bit flips and rail
//! outages.

use crate::rng::SplitMix64;

/// A rail that stops carrying frames for a while: a NIC, cable or switch
/// port failing. Frames on it are dropped while it is out, both when sent and
/// when they would arrive (so frames in flight at the failure are lost too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RailOutage {
    /// The rail that fails.
    pub rail: u32,
    /// When it fails.
    pub down_at_ns: u64,
    /// When it works again; `None`: never.
    pub up_at_ns: Option<u64>,
    /// The unordered pair of ranks it fails for; `None`: every pair (a
    /// switch).
    pub pair: Option<(u32, u32)>,
    /// The sender's path notices (connection reset, send error) and reports
    /// it to the link; otherwise the rail just goes silent.
    pub sender_sees_errors: bool,
}

impl RailOutage {
    /// Whether the outage drops a frame from `source` to `destination` on
    /// `rail` at `now_ns`.
    pub fn drops(&self, rail: u32, source: u32, destination: u32, now_ns: u64) -> bool {
        rail == self.rail
            && now_ns >= self.down_at_ns
            && self.up_at_ns.is_none_or(|up_at_ns| now_ns < up_at_ns)
            && self.covers(source, destination)
    }

    /// Whether the outage concerns the link between `source` and
    /// `destination` (either direction).
    pub fn covers(&self, source: u32, destination: u32) -> bool {
        self.pair.is_none_or(|(first, second)| {
            (first, second) == (source, destination) || (second, first) == (source, destination)
        })
    }

    /// Latest time the outage is in force (`u64::MAX`: for good).
    pub fn end_ns(&self) -> u64 {
        self.up_at_ns.unwrap_or(u64::MAX)
    }
}

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
    /// Probability that a frame has one random bit flipped in flight (header
    /// or payload). The receiver's checksum check (CRC32C on real paths)
    /// drops it before the link sees it.
    pub bit_flip_rate: f64,
    /// Rails failing for a while or for good.
    pub rail_outages: Vec<RailOutage>,
    /// Data frames lost on their first transmission, as (source,
    /// destination, sequence number): a chosen loss, e.g. the last fragment
    /// of a message, for loss-recovery scenarios.
    pub dropped_data_frames: Vec<(u32, u32, u64)>,
    /// Time each frame occupies its directed link (per rail) before the next
    /// may start: a busy link queues frames, so round trips grow and vary
    /// with the load, and is FIFO (jitter and reorder delays hold back the
    /// frames behind). 0: links have no capacity limit and reorder freely.
    pub link_busy_ns_per_frame: u64,
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
            bit_flip_rate: 0.0,
            rail_outages: Vec::new(),
            dropped_data_frames: Vec::new(),
            link_busy_ns_per_frame: 0,
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
            bit_flip_rate: 0.0,
            rail_outages: Vec::new(),
            dropped_data_frames: Vec::new(),
            link_busy_ns_per_frame: 0,
        }
    }

    /// The outage that drops a frame on `rail` from `source` to
    /// `destination` at `now_ns`, if any.
    pub fn rail_outage(
        &self,
        rail: u32,
        source: u32,
        destination: u32,
        now_ns: u64,
    ) -> Option<&RailOutage> {
        self.rail_outages
            .iter()
            .find(|outage| outage.drops(rail, source, destination, now_ns))
    }

    /// When every one of `rail_count` rails between `source` and
    /// `destination` is out for good, if that happens: the link must then
    /// declare the peer unreachable.
    pub fn all_rails_lost_at_ns(
        &self,
        rail_count: u32,
        source: u32,
        destination: u32,
    ) -> Option<u64> {
        (0..rail_count)
            .map(|rail| {
                self.rail_outages
                    .iter()
                    .filter(|outage| {
                        outage.rail == rail
                            && outage.up_at_ns.is_none()
                            && outage.covers(source, destination)
                    })
                    .map(|outage| outage.down_at_ns)
                    .min()
            })
            .try_fold(0u64, |latest_ns, down_at_ns| {
                Some(latest_ns.max(down_at_ns?))
            })
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
