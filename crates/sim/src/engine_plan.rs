//! What each rank of a simulated engine job does: a seeded program of real
//! MPI operations (sends in every mode, receives with specific and wildcard
//! patterns, cancels, nonblocking collectives on WORLD).
//!
//! Why a plan fixed up front: the oracle must know every message that will
//! ever exist (so it can say one was lost, duplicated or reordered) and
//! every collective's inputs (so it can compute the right result). The plan
//! is a pure function of the seed; only the interleaving is left to the
//! scheduler.
//!
//! A message's payload starts with its number in the plan (8 bytes, little
//! endian) and continues with bytes that are a pure function of (seed,
//! number, offset), so a receiver's buffer alone tells which message it got
//! and whether it is intact.

use crate::rng::{mix64, SplitMix64};

/// Tags point-to-point messages use (few, so wildcard receives have choices).
pub const TAG_COUNT: i32 = 3;
/// Smallest message: room for the message number.
pub const MESSAGE_BYTES_MIN: usize = 8;

/// How a send is made (`resmpi_core::SendMode`, kept here so plans print
/// and compare without the engine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannedMode {
    /// MPI_Isend.
    Standard,
    /// MPI_Issend.
    Synchronous,
    /// MPI_Ibsend: the user buffer is scribbled over right after the call.
    Buffered,
}

/// One point-to-point message of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedMessage {
    /// Sending world rank.
    pub source: u32,
    /// Receiving world rank (may equal `source`: loopback).
    pub destination: u32,
    /// Position among the messages from `source` to `destination`: MPI's
    /// send order on that pair.
    pub index: u64,
    /// MPI tag.
    pub tag: i32,
    /// Payload bytes.
    pub length_bytes: usize,
    /// Send mode.
    pub mode: PlannedMode,
}

/// A receive's pattern in world ranks: `None` is a wildcard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedPattern {
    /// Source, or ANY_SOURCE.
    pub source: Option<u32>,
    /// Tag, or ANY_TAG.
    pub tag: Option<i32>,
}

impl PlannedPattern {
    /// MPI_ANY_SOURCE, MPI_ANY_TAG.
    pub const ANY: PlannedPattern = PlannedPattern {
        source: None,
        tag: None,
    };

    /// Whether `message` satisfies the pattern.
    pub fn fits(&self, message: &PlannedMessage) -> bool {
        self.source.is_none_or(|source| source == message.source)
            && self.tag.is_none_or(|tag| tag == message.tag)
    }
}

/// A collective on WORLD; every rank starts them in plan order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannedCollective {
    /// MPI_Ibarrier: completes nowhere before every rank has started it.
    Barrier,
    /// MPI_Iallreduce with MPI_SUM over `count` u64 values.
    Allreduce {
        /// Elements.
        count: usize,
    },
    /// MPI_Ibcast of `length_bytes` from `root`.
    Bcast {
        /// Root rank.
        root: u32,
        /// Bytes.
        length_bytes: usize,
    },
}

/// One step of a rank's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start the send of plan message `message`.
    Send {
        /// Number of the message in [`Plan::messages`].
        message: usize,
    },
    /// Post a receive.
    Receive {
        /// What it matches.
        pattern: PlannedPattern,
    },
    /// MPI_Cancel this rank's `ordinal`-th receive (if not yet completed
    /// and released).
    CancelReceive {
        /// Position among this rank's receives.
        ordinal: usize,
    },
    /// MPI_Cancel this rank's `ordinal`-th send.
    CancelSend {
        /// Position among this rank's sends.
        ordinal: usize,
    },
    /// Start collective `index` of [`Plan::collectives`].
    Collective {
        /// Position in the plan's collectives.
        index: usize,
    },
}

/// Sizes and mixes a plan is drawn from.
#[derive(Clone, Copy, Debug)]
pub struct PlanShape {
    /// Ranks.
    pub rank_count: u32,
    /// Sends each rank makes.
    pub sends_per_rank: usize,
    /// Largest message.
    pub message_bytes_max: usize,
    /// The engine's eager limit (sizes cluster around it).
    pub eager_limit_bytes: usize,
    /// The path's largest frame payload (sizes cluster around multiples).
    pub max_payload_bytes: usize,
    /// Collectives in the job.
    pub collective_count: usize,
    /// Probability that a send or receive is later cancelled.
    pub cancel_rate: f64,
    /// Receives posted by the program, as a fraction of the messages a rank
    /// gets (the rest are received by the end-of-job drain).
    pub receive_fraction: f64,
}

/// Everything every rank will do.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Seed of the payload contents.
    pub seed: u64,
    /// Every point-to-point message.
    pub messages: Vec<PlannedMessage>,
    /// Every collective, in the order all ranks start them.
    pub collectives: Vec<PlannedCollective>,
    /// `programs[rank]`: that rank's actions in order.
    pub programs: Vec<Vec<Action>>,
}

impl Plan {
    /// A random plan of `shape` from `rng`.
    pub fn random(rng: &mut SplitMix64, seed: u64, shape: &PlanShape) -> Plan {
        let rank_count = shape.rank_count;
        assert!(rank_count >= 1, "a job has ranks");
        let mut pair_index = vec![0u64; (rank_count * rank_count) as usize];
        let mut messages = Vec::new();
        let mut sends: Vec<Vec<usize>> = vec![Vec::new(); rank_count as usize];
        for source in 0..rank_count {
            for _ in 0..shape.sends_per_rank {
                // Now and then a message to itself (the loopback route).
                let destination = if rank_count == 1 || rng.chance(0.08) {
                    source
                } else {
                    let other = rng.below(u64::from(rank_count) - 1) as u32;
                    if other >= source {
                        other + 1
                    } else {
                        other
                    }
                };
                let pair = (source * rank_count + destination) as usize;
                let mode = match rng.below(10) {
                    0..=5 => PlannedMode::Standard,
                    6..=7 => PlannedMode::Synchronous,
                    _ => PlannedMode::Buffered,
                };
                sends[source as usize].push(messages.len());
                messages.push(PlannedMessage {
                    source,
                    destination,
                    index: pair_index[pair],
                    tag: rng.below(TAG_COUNT as u64) as i32,
                    length_bytes: message_length(rng, shape),
                    mode,
                });
                pair_index[pair] += 1;
            }
        }
        let collectives = (0..shape.collective_count)
            .map(|_| match rng.below(3) {
                0 => PlannedCollective::Barrier,
                1 => PlannedCollective::Allreduce {
                    count: rng.between(1, 96) as usize,
                },
                _ => PlannedCollective::Bcast {
                    root: rng.below(u64::from(rank_count)) as u32,
                    length_bytes: rng.between(0, shape.message_bytes_max as u64) as usize,
                },
            })
            .collect::<Vec<_>>();
        let programs = (0..rank_count)
            .map(|rank| {
                let incoming: Vec<&PlannedMessage> = messages
                    .iter()
                    .filter(|message| message.destination == rank)
                    .collect();
                program(
                    rng,
                    shape,
                    &sends[rank as usize],
                    &incoming,
                    collectives.len(),
                )
            })
            .collect();
        Plan {
            seed,
            messages,
            collectives,
            programs,
        }
    }

    /// Number of messages `rank` is sent.
    pub fn incoming_count(&self, rank: u32) -> usize {
        self.messages
            .iter()
            .filter(|message| message.destination == rank)
            .count()
    }
}

/// A message length: mostly near the protocol boundaries (eager limit,
/// fragment multiples), sometimes anywhere up to the maximum.
fn message_length(rng: &mut SplitMix64, shape: &PlanShape) -> usize {
    let eager = shape.eager_limit_bytes.max(MESSAGE_BYTES_MIN);
    let fragment = shape.max_payload_bytes;
    let length = match rng.below(8) {
        0..=2 => rng.between(MESSAGE_BYTES_MIN as u64, eager as u64) as usize,
        3 => eager + rng.below(3) as usize,
        4 => (fragment * rng.between(1, 4) as usize) + rng.below(3) as usize,
        5 => (fragment * rng.between(1, 4) as usize).saturating_sub(1),
        _ => rng.between(MESSAGE_BYTES_MIN as u64, shape.message_bytes_max as u64) as usize,
    };
    length.clamp(MESSAGE_BYTES_MIN, shape.message_bytes_max)
}

/// One rank's program: its sends in order, receives whose patterns are
/// generalisations of messages it will get, cancels of some of both, and
/// every collective in plan order, shuffled together.
fn program(
    rng: &mut SplitMix64,
    shape: &PlanShape,
    sends: &[usize],
    incoming: &[&PlannedMessage],
    collective_count: usize,
) -> Vec<Action> {
    let receive_count = (incoming.len() as f64 * shape.receive_fraction).round() as usize;
    // Three ordered streams merged at random keep each stream's order.
    let mut streams: [Vec<Action>; 3] = [
        sends
            .iter()
            .map(|&message| Action::Send { message })
            .collect(),
        (0..receive_count)
            .map(|_| {
                let model = incoming[rng.below(incoming.len() as u64) as usize];
                let pattern = PlannedPattern {
                    source: (!rng.chance(0.3)).then_some(model.source),
                    tag: (!rng.chance(0.3)).then_some(model.tag),
                };
                Action::Receive { pattern }
            })
            .collect(),
        (0..collective_count)
            .map(|index| Action::Collective { index })
            .collect(),
    ];
    for stream in &mut streams {
        stream.reverse();
    }
    let mut actions = Vec::new();
    let (mut sends_started, mut receives_posted) = (0, 0);
    while streams.iter().any(|stream| !stream.is_empty()) {
        let choice = rng.below(3) as usize;
        let Some(action) = streams[choice].pop() else {
            continue;
        };
        actions.push(action);
        match action {
            Action::Send { .. } => {
                if rng.chance(shape.cancel_rate) {
                    let ordinal = sends_started;
                    // The cancel comes a little later, or right away.
                    let delay = rng.below(4) as usize;
                    streams[0].insert(
                        streams[0].len().saturating_sub(delay),
                        Action::CancelSend { ordinal },
                    );
                }
                sends_started += 1;
            }
            Action::Receive { .. } => {
                if rng.chance(shape.cancel_rate) {
                    let ordinal = receives_posted;
                    let delay = rng.below(4) as usize;
                    streams[1].insert(
                        streams[1].len().saturating_sub(delay),
                        Action::CancelReceive { ordinal },
                    );
                }
                receives_posted += 1;
            }
            _ => {}
        }
    }
    actions
}

/// Byte `offset` of message `number`'s payload in a plan made with `seed`.
#[inline]
pub fn payload_byte(seed: u64, number: usize, offset: usize) -> u8 {
    if offset < MESSAGE_BYTES_MIN {
        return (number as u64).to_le_bytes()[offset];
    }
    let word = mix64(seed ^ mix64(number as u64 + 1) ^ (offset as u64 / 8));
    word.to_le_bytes()[offset % 8]
}

/// The payload of message `number`, `length_bytes` long.
pub fn payload(seed: u64, number: usize, length_bytes: usize) -> Box<[u8]> {
    (0..length_bytes)
        .map(|offset| payload_byte(seed, number, offset))
        .collect()
}

/// The values rank `rank` contributes to collective `index` (an allreduce
/// of `count` elements), small enough that sums never wrap.
pub fn allreduce_input(seed: u64, index: usize, rank: u32, count: usize) -> Vec<u64> {
    (0..count)
        .map(|element| {
            mix64(seed ^ mix64((index as u64) << 32 | u64::from(rank)) ^ element as u64) % 1_000_000
        })
        .collect()
}

/// The root's data of collective `index` (a broadcast).
pub fn bcast_data(seed: u64, index: usize, length_bytes: usize) -> Box<[u8]> {
    (0..length_bytes)
        .map(|offset| (mix64(seed ^ mix64(!(index as u64)) ^ offset as u64) & 0xff) as u8)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> PlanShape {
        PlanShape {
            rank_count: 4,
            sends_per_rank: 20,
            message_bytes_max: 4096,
            eager_limit_bytes: 256,
            max_payload_bytes: 1024,
            collective_count: 3,
            cancel_rate: 0.2,
            receive_fraction: 0.8,
        }
    }

    #[test]
    fn each_program_keeps_its_sends_in_pair_order_and_every_collective_in_plan_order() {
        let plan = Plan::random(&mut SplitMix64::new(5), 5, &shape());
        for (rank, program) in plan.programs.iter().enumerate() {
            let mut next_index = [0u64; 4];
            let mut next_collective = 0;
            for action in program {
                match *action {
                    Action::Send { message } => {
                        let message = plan.messages[message];
                        assert_eq!(message.source, rank as u32);
                        assert_eq!(message.index, next_index[message.destination as usize]);
                        next_index[message.destination as usize] += 1;
                    }
                    Action::Collective { index } => {
                        assert_eq!(index, next_collective);
                        next_collective += 1;
                    }
                    _ => {}
                }
            }
            assert_eq!(next_collective, 3);
        }
    }

    #[test]
    fn a_payload_names_its_message_and_differs_between_messages() {
        let first = payload(9, 300, 64);
        let second = payload(9, 301, 64);
        assert_eq!(u64::from_le_bytes(first[..8].try_into().unwrap()), 300);
        assert_ne!(first[8..], second[8..]);
    }
}
