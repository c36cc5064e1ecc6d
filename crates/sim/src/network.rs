//! The simulated network: frames in flight, ordered by arrival time.
//!
//! Faults are applied when a frame enters the network (see
//! [`crate::FaultModel`]), except rail outages, which also drop frames in
//! flight when they arrive; ties in arrival time are broken by entry order so
//! that a run depends on nothing but the seed.

use crate::faults::FaultModel;
use crate::rng::SplitMix64;
use resmpi_wire::FrameHeader;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

/// Rails the network keeps per-rail counters for.
pub const SIM_RAIL_COUNT_MAX: usize = 4;

/// A frame on its way from `source` to `destination`.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    arrival_ns: u64,
    entry_order: u64,
    source: u32,
    destination: u32,
    rail: u32,
    /// A bit was flipped on the way: the receiver's checksum fails.
    corrupted: bool,
    frame: Vec<u8>,
}

/// A frame handed to its receiver.
#[derive(Debug)]
pub struct Arrival {
    /// Sending rank.
    pub source: u32,
    /// Receiving rank.
    pub destination: u32,
    /// Rail it travelled on.
    pub rail: u32,
    /// Whether a bit of it was flipped (its checksum no longer matches).
    pub corrupted: bool,
    /// The bytes as they arrive.
    pub frame: Vec<u8>,
}

/// What happened to a frame put on a rail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransmitOutcome {
    /// On its way (or lost silently, as a network does).
    Sent,
    /// The rail is out and the sender's path noticed: report it to the link.
    RailError,
}

/// Counters of what the network did to frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetworkStats {
    /// Frames handed to the network.
    pub frames_transmitted: u64,
    /// Frames dropped (loss, ack loss or a cut link).
    pub frames_lost: u64,
    /// Extra copies delivered.
    pub frames_duplicated: u64,
    /// Copies handed to a receiver.
    pub frames_arrived: u64,
    /// Frames dropped by a rail outage (at send or arrival time).
    pub frames_lost_to_rail_outages: u64,
    /// Copies that had one bit flipped in flight.
    pub frames_corrupted: u64,
    /// Frames handed to the network, per rail.
    pub frames_transmitted_per_rail: [u64; SIM_RAIL_COUNT_MAX],
    /// Frames dropped because the fault model names them
    /// (`dropped_data_frames`).
    pub frames_dropped_by_choice: u64,
    /// Longest wait of a frame for its busy link.
    pub link_queue_ns_max: u64,
}

/// Frames in flight between ranks.
#[derive(Debug)]
pub struct Network {
    faults: FaultModel,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    next_entry_order: u64,
    stats: NetworkStats,
    /// When each directed link (source, destination, rail) is free again,
    /// and the latest arrival on it (a busy link is FIFO).
    link_free_at_ns: HashMap<(u32, u32, u32), (u64, u64)>,
    /// Chosen losses already done (each happens once).
    dropped_already: HashSet<(u32, u32, u64)>,
}

impl Network {
    /// An empty network that applies `faults` to every frame.
    pub fn new(faults: FaultModel) -> Network {
        Network {
            faults,
            in_flight: BinaryHeap::new(),
            next_entry_order: 0,
            stats: NetworkStats::default(),
            link_free_at_ns: HashMap::new(),
            dropped_already: HashSet::new(),
        }
    }

    /// Put a frame on `rail` at `now_ns`, subject to the fault model.
    #[allow(clippy::too_many_arguments)] // One frame's whole context.
    pub fn transmit(
        &mut self,
        now_ns: u64,
        rng: &mut SplitMix64,
        source: u32,
        destination: u32,
        rail: u32,
        frame: Vec<u8>,
        is_pure_ack: bool,
    ) -> TransmitOutcome {
        self.stats.frames_transmitted += 1;
        self.stats.frames_transmitted_per_rail[rail as usize % SIM_RAIL_COUNT_MAX] += 1;
        if let Some(outage) = self.faults.rail_outage(rail, source, destination, now_ns) {
            self.stats.frames_lost_to_rail_outages += 1;
            return if outage.sender_sees_errors {
                TransmitOutcome::RailError
            } else {
                TransmitOutcome::Sent
            };
        }
        if !is_pure_ack && self.drops_by_choice(source, destination, &frame) {
            self.stats.frames_dropped_by_choice += 1;
            self.stats.frames_lost += 1;
            return TransmitOutcome::Sent;
        }
        // A busy link: the frame leaves when the ones before it have.
        let busy = self.faults.link_busy_ns_per_frame > 0;
        let (departure_ns, latest_arrival_ns) = if busy {
            let (free_at_ns, latest_arrival_ns) = self
                .link_free_at_ns
                .get(&(source, destination, rail))
                .copied()
                .unwrap_or((0, 0));
            let start_ns = now_ns.max(free_at_ns);
            self.stats.link_queue_ns_max = self.stats.link_queue_ns_max.max(start_ns - now_ns);
            (
                start_ns + self.faults.link_busy_ns_per_frame,
                latest_arrival_ns,
            )
        } else {
            (now_ns, 0)
        };
        let mut delays_ns = self
            .faults
            .arrival_delays_ns(rng, source, destination, is_pure_ack);
        if busy {
            // Jitter delays frames on a busy link but does not reorder them:
            // a wire and its switch queues are FIFO.
            let mut latest_arrival_ns = latest_arrival_ns;
            for delay_ns in &mut delays_ns {
                let arrival_ns = (departure_ns + *delay_ns).max(latest_arrival_ns);
                *delay_ns = arrival_ns - departure_ns;
                latest_arrival_ns = arrival_ns;
            }
            self.link_free_at_ns.insert(
                (source, destination, rail),
                (departure_ns, latest_arrival_ns),
            );
        }
        if delays_ns.is_empty() {
            self.stats.frames_lost += 1;
            return TransmitOutcome::Sent;
        }
        self.stats.frames_duplicated += delays_ns.len() as u64 - 1;
        for delay_ns in delays_ns {
            let entry_order = self.next_entry_order;
            self.next_entry_order += 1;
            let mut frame = frame.clone();
            let corrupted = rng.chance(self.faults.bit_flip_rate) && !frame.is_empty();
            if corrupted {
                let bit = rng.below(frame.len() as u64 * 8);
                frame[(bit / 8) as usize] ^= 1 << (bit % 8);
                self.stats.frames_corrupted += 1;
            }
            self.in_flight.push(Reverse(InFlight {
                arrival_ns: departure_ns + delay_ns,
                entry_order,
                source,
                destination,
                rail,
                corrupted,
                frame,
            }));
        }
        TransmitOutcome::Sent
    }

    /// Whether `frame` is a data frame the fault model loses on purpose, the
    /// first time it is sent.
    fn drops_by_choice(&mut self, source: u32, destination: u32, frame: &[u8]) -> bool {
        if self.faults.dropped_data_frames.is_empty() {
            return false;
        }
        let Ok(header) = FrameHeader::parse(frame) else {
            return false;
        };
        let key = (source, destination, header.seq);
        self.faults.dropped_data_frames.contains(&key) && self.dropped_already.insert(key)
    }

    /// When the next frame arrives, if any is in flight.
    pub fn next_arrival_ns(&self) -> Option<u64> {
        self.in_flight
            .peek()
            .map(|Reverse(in_flight)| in_flight.arrival_ns)
    }

    /// The next frame arriving at or before `now_ns`. Frames whose rail is
    /// out when they arrive are dropped on the way.
    pub fn pop_arrived(&mut self, now_ns: u64) -> Option<Arrival> {
        loop {
            if self.next_arrival_ns()? > now_ns {
                return None;
            }
            let Reverse(in_flight) = self.in_flight.pop()?;
            if self
                .faults
                .rail_outage(
                    in_flight.rail,
                    in_flight.source,
                    in_flight.destination,
                    in_flight.arrival_ns,
                )
                .is_some()
            {
                self.stats.frames_lost_to_rail_outages += 1;
                continue;
            }
            self.stats.frames_arrived += 1;
            return Some(Arrival {
                source: in_flight.source,
                destination: in_flight.destination,
                rail: in_flight.rail,
                corrupted: in_flight.corrupted,
                frame: in_flight.frame,
            });
        }
    }

    /// Frames in flight now.
    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    /// Counters so far.
    pub fn stats(&self) -> NetworkStats {
        self.stats
    }
}
