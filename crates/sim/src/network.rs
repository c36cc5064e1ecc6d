//! The simulated network: frames in flight, ordered by arrival time.
//!
//! Faults are applied when a frame enters the network (see
//! [`crate::FaultModel`]); ties in arrival time are broken by entry order so
//! that a run depends on nothing but the seed.

use crate::faults::FaultModel;
use crate::rng::SplitMix64;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A frame on its way from `source` to `destination`.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    arrival_ns: u64,
    entry_order: u64,
    source: u32,
    destination: u32,
    frame: Vec<u8>,
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
}

/// Frames in flight between ranks.
#[derive(Debug)]
pub struct Network {
    faults: FaultModel,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    next_entry_order: u64,
    stats: NetworkStats,
}

impl Network {
    /// An empty network that applies `faults` to every frame.
    pub fn new(faults: FaultModel) -> Network {
        Network {
            faults,
            in_flight: BinaryHeap::new(),
            next_entry_order: 0,
            stats: NetworkStats::default(),
        }
    }

    /// Put a frame on the wire at `now_ns`, subject to the fault model.
    pub fn transmit(
        &mut self,
        now_ns: u64,
        rng: &mut SplitMix64,
        source: u32,
        destination: u32,
        frame: Vec<u8>,
        is_pure_ack: bool,
    ) {
        self.stats.frames_transmitted += 1;
        let delays_ns = self
            .faults
            .arrival_delays_ns(rng, source, destination, is_pure_ack);
        if delays_ns.is_empty() {
            self.stats.frames_lost += 1;
            return;
        }
        self.stats.frames_duplicated += delays_ns.len() as u64 - 1;
        for delay_ns in delays_ns {
            let entry_order = self.next_entry_order;
            self.next_entry_order += 1;
            self.in_flight.push(Reverse(InFlight {
                arrival_ns: now_ns + delay_ns,
                entry_order,
                source,
                destination,
                frame: frame.clone(),
            }));
        }
    }

    /// When the next frame arrives, if any is in flight.
    pub fn next_arrival_ns(&self) -> Option<u64> {
        self.in_flight
            .peek()
            .map(|Reverse(in_flight)| in_flight.arrival_ns)
    }

    /// The next frame arriving at or before `now_ns`, as
    /// `(source, destination, frame)`.
    pub fn pop_arrived(&mut self, now_ns: u64) -> Option<(u32, u32, Vec<u8>)> {
        if self.next_arrival_ns()? > now_ns {
            return None;
        }
        let Reverse(in_flight) = self.in_flight.pop()?;
        self.stats.frames_arrived += 1;
        Some((in_flight.source, in_flight.destination, in_flight.frame))
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
