//! A replicated job of production engines: N ranks × R replicas, each
//! process a `resmpi_core::Engine<resmpi_replication::Replication>` over a
//! [`MemoryPath`], under a seeded scheduler, with replica processes killed
//! at chosen steps.
//!
//! Why: `replication_job` checks the protocol state machine alone; this
//! checks the engine's replication hooks (rank-channel numbering, acks on
//! arrival, sends held until acked, a substitute's re-sends, frames of a
//! substitute matched as its dead sibling's, answers sent to the
//! substitute) with the code that runs in `MPI_Init`'s engine. The
//! program is send-deterministic, as the protocol assumes: rounds of a
//! ring exchange, a gather to rank 0 with `MPI_ANY_SOURCE` receives, and
//! an allreduce (a collective schedule, whose messages go through the
//! protocol like any other). Every live process must finish, and its
//! application-visible trace (what each receive got, the allreduce
//! results) must equal the fault-free one: a replica's death is masked.
//!
//! With `order_dependent` the program is not send-deterministic: rank 0
//! mixes the order its gather's ANY_SOURCE receives matched into its
//! allreduce contribution. Under `anysource_agree` (`--replica-anysource
//! agree`) the replicas of rank 0 must then match in the same order, and
//! every result must be the one that order gives; without it they differ.
//!
//! Kills follow `engine_job`'s rules: the dead process never runs again,
//! frames to it vanish, a random prefix of what it sent per destination
//! still lands, and each survivor learns of the death after its own delay
//! through `Engine::handle_peer_failure` (a launcher notice's call).

use std::collections::VecDeque;
use std::sync::Arc;

use resmpi_core::coll::{self, Reduction};
use resmpi_core::comm::{SELF_CONTEXT, WORLD_CONTEXT};
use resmpi_core::datatype::{BasicKind, TypeInfo};
use resmpi_core::op::Op;
use resmpi_core::request::SendMode;
use resmpi_core::transport::Transports;
use resmpi_core::{Communicator, Destination, Engine, EngineConfig};
use resmpi_path::MemoryPath;
use resmpi_replication::Replication;

use crate::rng::SplitMix64;

const WORLD: usize = 0;
/// Byte a completed send's buffer is overwritten with: a message that
/// shows it was read after its send completed.
const SCRIBBLE_BYTE: u8 = 0xEE;
/// Tags of the gather phase are `GATHER_TAG + round`.
const GATHER_TAG: i32 = 1000;

/// Kill one process (replica `replica` of rank `rank`) at a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaKill {
    /// Its rank.
    pub rank: u32,
    /// Its replica index.
    pub replica: u32,
    /// The step it dies at.
    pub step: u64,
}

/// Everything that defines a run; equal configs give identical runs.
#[derive(Clone, Debug)]
pub struct ReplicatedEngineJobConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Ranks (N).
    pub ranks: u32,
    /// Replicas per rank (R).
    pub replicas: u32,
    /// Rounds of ring + gather + allreduce.
    pub rounds: u32,
    /// Messages each rank sends its ring neighbour per round, all with
    /// the same envelope and in flight together (nonblocking), so that a
    /// later one can overtake an earlier one a substitute must re-send.
    pub ring_burst: u32,
    /// Largest message (bytes, at least 8).
    pub message_bytes_max: usize,
    /// The engines' eager limit (messages above it go by rendezvous).
    pub eager_limit_bytes: usize,
    /// Processes to kill.
    pub kills: Vec<ReplicaKill>,
    /// A survivor learns of a death up to this many steps after it.
    pub notice_delay_steps_max: u64,
    /// A frame is deliverable up to this many steps after it is taken.
    pub delivery_delay_steps_max: u64,
    /// The run fails when it has not ended after this many steps.
    pub step_limit: u64,
    /// The program is not send-deterministic: rank 0's allreduce
    /// contribution of a round mixes in the order in which its gather's
    /// ANY_SOURCE receives matched, so every rank's result depends on it.
    pub order_dependent: bool,
    /// `--replica-anysource agree`: the replicas of a rank agree on every
    /// wildcard match (`Replication::with_anysource_agreement`).
    pub anysource_agree: bool,
}

impl ReplicatedEngineJobConfig {
    /// A fault-free run of `ranks` × `replicas`.
    pub fn new(seed: u64, ranks: u32, replicas: u32) -> ReplicatedEngineJobConfig {
        ReplicatedEngineJobConfig {
            seed,
            ranks,
            replicas,
            rounds: 4,
            ring_burst: 1,
            message_bytes_max: 64,
            eager_limit_bytes: 256,
            kills: Vec::new(),
            notice_delay_steps_max: 40,
            delivery_delay_steps_max: 6,
            step_limit: 400_000,
            order_dependent: false,
            anysource_agree: false,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct ReplicatedEngineJobReport {
    /// Steps taken.
    pub steps: u64,
    /// Duplicate messages the receivers dropped (substitutes' re-sends).
    pub duplicates_dropped: u64,
    /// Re-sends the substitutes made.
    pub resends: u64,
    /// Processes killed.
    pub killed: usize,
    /// Divergences between replicas the acks' payload hashes showed.
    pub divergences: u64,
}

/// One phase of a rank's program: operations started together, waited
/// for together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Ring(u32),
    Gather(u32),
    Allreduce(u32),
}

/// The bytes rank `source` sends in `round` of phase `kind` (its first 8
/// bytes name source, round and kind, so a receive's content identifies
/// the message).
fn message(seed: u64, kind: u8, source: u32, round: u32, length_max: usize) -> Vec<u8> {
    let mut rng = SplitMix64::new(
        seed ^ (u64::from(source) << 40) ^ (u64::from(round) << 8) ^ u64::from(kind),
    );
    let length = rng.between(8, length_max.max(8) as u64) as usize;
    let mut bytes = vec![0u8; length];
    let id = (u64::from(kind) << 56) | (u64::from(source) << 32) | u64::from(round);
    bytes[..8].copy_from_slice(&id.to_le_bytes());
    for byte in &mut bytes[8..] {
        *byte = rng.below(256) as u8;
    }
    bytes
}

/// The `round` argument of [`message`] for message `burst` of a ring
/// round (the first keeps the round's own).
fn ring_message_round(round: u32, burst: u32) -> u32 {
    round + 1_000 * burst
}

/// Posts a receive on WORLD from process `source` (None: ANY_SOURCE) with
/// `tag`, into a buffer of the largest message: its request and buffer.
fn start_receive(
    engine: &mut Engine<Replication>,
    length_max: usize,
    source: Option<u32>,
    tag: i32,
) -> Result<(u32, Box<[u8]>), resmpi_core::MpiError> {
    let mut buffer = vec![0u8; length_max.max(8)].into_boxed_slice();
    let request = engine.start_receive(
        WORLD,
        buffer.as_mut_ptr(),
        buffer.len(),
        source,
        Some(tag),
        WORLD_CONTEXT,
    )?;
    Ok((request, buffer))
}

/// What a gather order (`Process::gather_orders`) adds to rank 0's
/// allreduce contribution in an order-dependent program.
fn order_mix(order: u64) -> u64 {
    SplitMix64::new(order).below(1 << 40)
}

/// An allreduce contribution.
fn contribution(seed: u64, rank: u32, round: u32) -> u64 {
    SplitMix64::new(seed ^ 0xa11 ^ (u64::from(rank) << 20) ^ u64::from(round)).below(1 << 40)
}

/// Operations of the phase in progress: request, buffer, whether it is a
/// receive (whose buffer goes to the trace).
struct OpenPhase {
    requests: Vec<(u32, Box<[u8]>, bool)>,
    collective: Option<OpenCollective>,
    /// Its receives take ANY_SOURCE: only the set of what they got is
    /// determined, not the order.
    wildcard: bool,
}

/// An allreduce in progress: its request, input (kept alive for the
/// schedule) and result buffer.
type OpenCollective = (u32, Box<[u8]>, Box<[u8]>);

struct Process {
    engine: Engine<Replication>,
    rank: u32,
    alive: bool,
    phases: Vec<Phase>,
    next_phase: usize,
    open: Option<OpenPhase>,
    trace: Vec<Vec<u8>>,
    /// Per gather round at rank 0: a hash of the order in which its
    /// ANY_SOURCE receives matched (their posting order).
    gather_orders: Vec<u64>,
    /// Buffers of completed sends, scribbled on (see `finish_phase_if_done`).
    retired_buffers: Vec<Box<[u8]>>,
}

/// Run one replicated engine job; the error names the seed and what went
/// wrong.
pub fn run_replicated_engine_job(
    config: &ReplicatedEngineJobConfig,
) -> Result<ReplicatedEngineJobReport, String> {
    let mut job = Job::new(config);
    job.run()
        .map_err(|problem| format!("seed {}: step {}: {problem}", config.seed, job.step))?;
    let report = job.report();
    if report.divergences > 0 {
        // Every replica of a rank sends the same bytes here: a mismatch
        // is a hash taken of the wrong bytes, or an ack of the wrong
        // message.
        let first = job
            .processes
            .iter()
            .find_map(|process| process.engine.state.interceptor.divergence().kept.first())
            .map(ToString::to_string)
            .unwrap_or_default();
        return Err(format!(
            "seed {}: {} false divergences, e.g. {first}",
            config.seed, report.divergences
        ));
    }
    Ok(report)
}

struct InFlight {
    ready_step: u64,
    frame: Vec<u8>,
}

struct Job {
    config: ReplicatedEngineJobConfig,
    rng: SplitMix64,
    processes: Vec<Process>,
    in_flight: Vec<VecDeque<InFlight>>,
    /// (step, survivor, dead process) notices still to give.
    notices: Vec<(u64, usize, u32)>,
    step: u64,
}

impl Job {
    fn new(config: &ReplicatedEngineJobConfig) -> Job {
        let (ranks, replicas) = (config.ranks, config.replicas);
        let size = ranks * replicas;
        let engine_config = EngineConfig {
            eager_limit_bytes: config.eager_limit_bytes,
            eager_credit_bytes: 4 * (config.eager_limit_bytes + 64) * 4,
        };
        let mut phases = Vec::new();
        for round in 0..config.rounds {
            phases.push(Phase::Ring(round));
            phases.push(Phase::Gather(round));
            phases.push(Phase::Allreduce(round));
        }
        let processes = (0..size)
            .map(|process| {
                let path = MemoryPath::new(64, 1 << 16);
                let transports = Transports::memory(process, size, path);
                let protocol = Replication::new(process, ranks, replicas);
                let protocol = if config.anysource_agree {
                    protocol.with_anysource_agreement()
                } else {
                    protocol
                };
                let mut engine = Engine::new(process, size, engine_config, transports, protocol);
                // WORLD of replica k is processes k*N .. k*N+N-1, as
                // `Mpi::init` builds it (`Replicas::world_group`).
                let first = (process / ranks) * ranks;
                let world = Communicator::new(
                    WORLD_CONTEXT,
                    Arc::new((first..first + ranks).collect()),
                    process % ranks,
                    0,
                    "MPI_COMM_WORLD".into(),
                );
                let own = Communicator::new(
                    SELF_CONTEXT,
                    Arc::new(vec![process]),
                    0,
                    0,
                    "MPI_COMM_SELF".into(),
                );
                engine.state.comms = vec![Some(world), Some(own)];
                Process {
                    engine,
                    rank: process % ranks,
                    alive: true,
                    phases: phases.clone(),
                    next_phase: 0,
                    open: None,
                    trace: Vec::new(),
                    gather_orders: Vec::new(),
                    retired_buffers: Vec::new(),
                }
            })
            .collect();
        Job {
            config: config.clone(),
            rng: SplitMix64::new(config.seed),
            processes,
            in_flight: (0..size * size).map(|_| VecDeque::new()).collect(),
            notices: Vec::new(),
            step: 0,
        }
    }

    fn size(&self) -> usize {
        self.processes.len()
    }

    fn report(&self) -> ReplicatedEngineJobReport {
        let mut report = ReplicatedEngineJobReport {
            steps: self.step,
            killed: self.processes.iter().filter(|p| !p.alive).count(),
            ..Default::default()
        };
        for process in &self.processes {
            report.duplicates_dropped += process.engine.state.interceptor.duplicates_dropped;
            report.resends += process.engine.state.interceptor.resends_made;
            report.divergences += process.engine.state.interceptor.divergence().found;
        }
        report
    }

    fn run(&mut self) -> Result<(), String> {
        while self.step < self.config.step_limit {
            self.step += 1;
            self.kills_and_notices()?;
            if self.finished() {
                return self.check_traces();
            }
            match self.rng.below(10) {
                0..=4 => {
                    let process = self.random_live();
                    self.turn(process)?;
                }
                5..=7 => {
                    let process = self.random_live();
                    let count = self.rng.between(1, 4) as usize;
                    self.take_frames(process, count);
                }
                _ => self.deliver_frames(),
            }
        }
        Err(format!(
            "no end within {} steps: {}",
            self.config.step_limit,
            self.describe()
        ))
    }

    fn describe(&self) -> String {
        self.processes
            .iter()
            .enumerate()
            .filter(|(_, p)| p.alive)
            .map(|(index, p)| {
                format!(
                    "process {index} (rank {}) at phase {}/{} ({:?}), {} sends pending in the protocol",
                    p.rank,
                    p.next_phase,
                    p.phases.len(),
                    p.phases.get(p.next_phase),
                    p.engine.state.interceptor.replica().pending_send_count()
                ) + &format!(" {:?} posted {} unexpected {} dups {} resends {}", p.engine.state.interceptor.replica().pending_sends(), p.engine.state.matcher.posted_len(), p.engine.state.matcher.unexpected_len(), p.engine.state.interceptor.duplicates_dropped, p.engine.state.interceptor.resends_made)
                    + &format!(
                        "\n    agreement: {:?}\n    matcher: {:?}\n    live requests: {:?}\n",
                        p.engine.state.interceptor.agreement(),
                        p.engine.state.matcher,
                        p.engine
                            .state
                            .requests
                            .live_indices()
                            .iter()
                            .map(|&index| p.engine.state.requests.get(index))
                            .collect::<Vec<_>>()
                    )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn random_live(&mut self) -> usize {
        loop {
            let process = self.rng.below(self.size() as u64) as usize;
            if self.processes[process].alive {
                return process;
            }
        }
    }

    fn finished(&self) -> bool {
        self.notices.is_empty()
            && self
                .processes
                .iter()
                .filter(|p| p.alive)
                .all(|p| p.next_phase == p.phases.len() && p.open.is_none())
    }

    fn kills_and_notices(&mut self) -> Result<(), String> {
        let kills: Vec<ReplicaKill> = self
            .config
            .kills
            .iter()
            .copied()
            .filter(|kill| kill.step == self.step)
            .collect();
        // Deaths at one step (a host going down) reach each survivor at
        // one step too, as one burst of notices.
        let mut delays = vec![None; self.size()];
        for kill in kills {
            let dead = (kill.replica * self.config.ranks + kill.rank) as usize;
            if self.processes[dead].alive {
                self.kill(dead, &mut delays);
            }
        }
        let mut due: Vec<(u64, usize, u32)> = self
            .notices
            .iter()
            .copied()
            .filter(|&(step, _, _)| step <= self.step)
            .collect();
        self.notices.retain(|&(step, _, _)| step > self.step);
        // A survivor handles every notice that is in before it progresses,
        // as the engine does with the notices one read brings: the
        // protocol's actions of one notice may be overtaken by the next.
        due.sort_by_key(|&(step, survivor, _)| (survivor, step));
        for (index, &(_, survivor, dead)) in due.iter().enumerate() {
            if !self.processes[survivor].alive {
                continue;
            }
            self.processes[survivor].engine.handle_peer_failure(dead);
            let last_of_survivor = due.get(index + 1).is_none_or(|next| next.1 != survivor);
            if last_of_survivor {
                self.progress(survivor)?;
            }
        }
        Ok(())
    }

    /// Kill process `dead`; `delays` holds, per survivor, the notice delay
    /// drawn for the deaths of this step.
    fn kill(&mut self, dead: usize, delays: &mut [Option<u64>]) {
        let size = self.size();
        self.processes[dead].alive = false;
        for peer in (0..size).filter(|&peer| peer != dead) {
            self.in_flight[peer * size + dead].clear();
            let queue = &mut self.in_flight[dead * size + peer];
            let kept = self.rng.between(0, queue.len() as u64) as usize;
            queue.truncate(kept);
            if self.processes[peer].alive {
                let max = self.config.notice_delay_steps_max.max(1);
                let delay = match delays[peer] {
                    Some(delay) => delay,
                    None => *delays[peer].insert(self.rng.between(1, max)),
                };
                self.notices.push((self.step + delay, peer, dead as u32));
            }
        }
    }

    fn take_frames(&mut self, process: usize, count: usize) {
        let size = self.size();
        for _ in 0..count {
            let memory = self.processes[process]
                .engine
                .transports
                .memory
                .as_mut()
                .expect("a simulated process has a memory path");
            let Some((destination, frame)) = memory.take_outgoing() else {
                return;
            };
            if !self.processes[destination as usize].alive {
                continue;
            }
            let queue = &mut self.in_flight[process * size + destination as usize];
            let delay = self.rng.between(0, self.config.delivery_delay_steps_max);
            let ready_step = queue
                .back()
                .map_or(0, |ahead| ahead.ready_step)
                .max(self.step + delay);
            queue.push_back(InFlight { ready_step, frame });
        }
    }

    fn deliver_frames(&mut self) {
        let step = self.step;
        let ready: Vec<usize> = (0..self.in_flight.len())
            .filter(|&pair| {
                self.in_flight[pair]
                    .front()
                    .is_some_and(|head| head.ready_step <= step)
            })
            .collect();
        if ready.is_empty() {
            return;
        }
        let pair = ready[self.rng.below(ready.len() as u64) as usize];
        let size = self.size();
        let (source, destination) = (pair / size, pair % size);
        for _ in 0..self.rng.between(1, 3) {
            let queue = &mut self.in_flight[pair];
            if queue.front().is_none_or(|head| head.ready_step > step) {
                break;
            }
            let InFlight { frame, .. } = queue.pop_front().expect("checked above");
            self.processes[destination]
                .engine
                .transports
                .memory
                .as_mut()
                .expect("a simulated process has a memory path")
                .push_incoming(source as u32, frame);
        }
    }

    fn progress(&mut self, process: usize) -> Result<(), String> {
        self.processes[process]
            .engine
            .progress()
            .map(|_| ())
            .map_err(|error| format!("process {process}: progress: {error}"))
    }

    /// One turn: start the next phase, or progress and finish the open one.
    fn turn(&mut self, process: usize) -> Result<(), String> {
        if self.processes[process].open.is_none() {
            let simulated = &self.processes[process];
            if simulated.next_phase < simulated.phases.len() {
                let phase = simulated.phases[simulated.next_phase];
                return self.start_phase(process, phase);
            }
            return self.progress(process);
        }
        self.progress(process)?;
        self.finish_phase_if_done(process)
    }

    fn start_phase(&mut self, process: usize, phase: Phase) -> Result<(), String> {
        let (ranks, seed, length_max, ring_burst) = (
            self.config.ranks,
            self.config.seed,
            self.config.message_bytes_max,
            self.config.ring_burst,
        );
        let order_dependent = self.config.order_dependent;
        let simulated = &mut self.processes[process];
        let rank = simulated.rank;
        let first = process as u32 - rank;
        let engine = &mut simulated.engine;
        let mut open = OpenPhase {
            requests: Vec::new(),
            collective: None,
            wildcard: matches!(phase, Phase::Gather(_)),
        };
        let error = |what: &str, error: resmpi_core::MpiError| {
            format!("process {process}: {what}: {error}")
        };
        match phase {
            Phase::Ring(round) => {
                let next = (rank + 1) % ranks;
                let previous = (rank + ranks - 1) % ranks;
                for _ in 0..ring_burst {
                    let (request, buffer) =
                        start_receive(engine, length_max, Some(first + previous), round as i32)
                            .map_err(|e| error("start_receive", e))?;
                    open.requests.push((request, buffer, true));
                }
                for burst in 0..ring_burst {
                    let bytes =
                        message(seed, 1, rank, ring_message_round(round, burst), length_max)
                            .into_boxed_slice();
                    let destination = Destination {
                        peer: first + next,
                        context: WORLD_CONTEXT,
                        tag: round as i32,
                    };
                    let request = engine
                        .start_send(
                            WORLD,
                            destination,
                            bytes.as_ptr(),
                            bytes.len(),
                            SendMode::Standard,
                        )
                        .map_err(|e| error("start_send", e))?;
                    open.requests.push((request, bytes, false));
                }
            }
            Phase::Gather(round) => {
                let tag = GATHER_TAG + round as i32;
                if rank == 0 {
                    for _ in 1..ranks {
                        let (request, buffer) = start_receive(engine, length_max, None, tag)
                            .map_err(|e| error("start_receive", e))?;
                        open.requests.push((request, buffer, true));
                    }
                } else {
                    let bytes = message(seed, 2, rank, round, length_max).into_boxed_slice();
                    let destination = Destination {
                        peer: first,
                        context: WORLD_CONTEXT,
                        tag,
                    };
                    // Every other gather send is synchronous (MPI_Ssend).
                    let mode = if round % 2 == 1 {
                        SendMode::Synchronous
                    } else {
                        SendMode::Standard
                    };
                    let request = engine
                        .start_send(WORLD, destination, bytes.as_ptr(), bytes.len(), mode)
                        .map_err(|e| error("start_send", e))?;
                    open.requests.push((request, bytes, false));
                }
            }
            Phase::Allreduce(round) => {
                let mut value = contribution(seed, rank, round);
                if order_dependent && rank == 0 {
                    value ^= order_mix(simulated.gather_orders[round as usize]);
                }
                let input: Box<[u8]> = value.to_ne_bytes().into();
                let mut result: Box<[u8]> = vec![0u8; 8].into_boxed_slice();
                let mut schedule = engine
                    .new_schedule(WORLD)
                    .map_err(|e| error("new_schedule", e))?;
                schedule.reduction = Some(Reduction {
                    op: Op::Sum,
                    info: TypeInfo::basic(8, BasicKind::U64),
                    datatype_handle: 0,
                    layout: None,
                });
                coll::allreduce(&mut schedule, input.as_ptr(), result.as_mut_ptr(), 1);
                let request = engine
                    .start_schedule(schedule)
                    .map_err(|e| error("start_schedule", e))?;
                open.collective = Some((request, input, result));
            }
        }
        simulated.open = Some(open);
        simulated.next_phase += 1;
        Ok(())
    }

    fn finish_phase_if_done(&mut self, process: usize) -> Result<(), String> {
        let simulated = &mut self.processes[process];
        let engine = &mut simulated.engine;
        let open = simulated.open.as_ref().expect("a phase is open");
        let requests_done = open.requests.iter().all(|(request, _, _)| {
            engine
                .state
                .requests
                .get(*request)
                .is_some_and(|request| request.complete)
        });
        let collective_done = open.collective.as_ref().is_none_or(|(request, _, _)| {
            engine
                .state
                .requests
                .get(*request)
                .is_some_and(|request| request.complete)
        });
        if !requests_done || !collective_done {
            return Ok(());
        }
        let open = simulated.open.take().expect("checked above");
        let mut received = Vec::new();
        for (request, buffer, is_receive) in open.requests {
            let finished = engine.state.requests.remove(request).expect("complete");
            if finished.status.error != 0 {
                return Err(format!(
                    "process {process}: a request failed with error {}",
                    finished.status.error
                ));
            }
            if is_receive {
                received.push(buffer[..finished.status.count_bytes].to_vec());
            } else {
                // The send is complete: the application may reuse its
                // buffer. Scribble on it (and keep it, so a bug reading it
                // later shows in the trace instead of reading freed memory).
                let mut buffer = buffer;
                buffer.fill(SCRIBBLE_BYTE);
                simulated.retired_buffers.push(buffer);
            }
        }
        // ANY_SOURCE receives may match in any order: the trace keeps the
        // set, which is what a send-deterministic program may rely on.
        // Receives from one source match its messages in the order sent.
        if open.wildcard {
            let order = received.iter().fold(0u64, |hash, bytes| {
                let id = u64::from_le_bytes(bytes[..8].try_into().expect("8-byte id"));
                hash.wrapping_mul(1_000_003).wrapping_add(id)
            });
            simulated.gather_orders.push(order);
            received.sort();
        }
        simulated.trace.extend(received);
        if let Some((request, _input, result)) = open.collective {
            engine
                .take_schedule_result(request)
                .map_err(|error| format!("process {process}: allreduce: {error}"))?;
            simulated.trace.push(result.to_vec());
        }
        Ok(())
    }

    /// The trace a process of `rank` must show; `orders`: rank 0's gather
    /// orders, which an order-dependent program's allreduce mixes in.
    fn expected_trace(&self, rank: u32, orders: &[u64]) -> Vec<Vec<u8>> {
        let (ranks, seed, length_max, ring_burst) = (
            self.config.ranks,
            self.config.seed,
            self.config.message_bytes_max,
            self.config.ring_burst,
        );
        let mut trace = Vec::new();
        for round in 0..self.config.rounds {
            let previous = (rank + ranks - 1) % ranks;
            for burst in 0..ring_burst {
                let round = ring_message_round(round, burst);
                trace.push(message(seed, 1, previous, round, length_max));
            }
            if rank == 0 {
                let mut gathered: Vec<Vec<u8>> = (1..ranks)
                    .map(|source| message(seed, 2, source, round, length_max))
                    .collect();
                gathered.sort();
                trace.extend(gathered);
            }
            let sum = (0..ranks)
                .map(|rank| contribution(seed, rank, round))
                .fold(0u64, u64::wrapping_add);
            let sum = match orders.get(round as usize) {
                Some(&order) if self.config.order_dependent => {
                    let rank_0 = contribution(seed, 0, round);
                    sum.wrapping_sub(rank_0)
                        .wrapping_add(rank_0 ^ order_mix(order))
                }
                _ => sum,
            };
            trace.push(sum.to_ne_bytes().to_vec());
        }
        trace
    }

    fn check_traces(&self) -> Result<(), String> {
        // Rank 0's gather orders, the same in every live replica of it
        // when they agree (without agreement, an order-dependent program
        // fails here or in the traces).
        let rank_0: Vec<(usize, &Process)> = self
            .processes
            .iter()
            .enumerate()
            .filter(|(_, process)| process.alive && process.rank == 0)
            .collect();
        let orders = &rank_0[0].1.gather_orders;
        if self.config.order_dependent {
            if let Some((index, _)) = rank_0
                .iter()
                .find(|(_, process)| &process.gather_orders != orders)
            {
                return Err(format!(
                    "processes {} and {index} (rank 0) matched the gather's ANY_SOURCE \
                     receives in different orders",
                    rank_0[0].0
                ));
            }
        }
        for (index, process) in self.processes.iter().enumerate() {
            if !process.alive {
                continue;
            }
            let expected = self.expected_trace(process.rank, orders);
            if process.trace != expected {
                let first = process
                    .trace
                    .iter()
                    .zip(&expected)
                    .position(|(got, want)| got != want)
                    .unwrap_or(process.trace.len().min(expected.len()));
                let show = |entry: Option<&Vec<u8>>| {
                    entry.map(|bytes| {
                        let mismatch = expected
                            .get(first)
                            .map(|want| bytes.iter().zip(want).position(|(a, b)| a != b));
                        format!(
                            "{} bytes, head {:02x?}, first difference at {mismatch:?}",
                            bytes.len(),
                            &bytes[..bytes.len().min(8)]
                        )
                    })
                };
                return Err(format!(
                    "process {index} (rank {}): trace differs from the fault-free one at entry {first} of {} (got {} entries): got {:?}, want {:?}",
                    process.rank,
                    expected.len(),
                    process.trace.len(),
                    show(process.trace.get(first)),
                    show(expected.get(first)),
                ));
            }
        }
        Ok(())
    }
}
