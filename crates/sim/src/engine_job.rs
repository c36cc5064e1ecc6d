//! A simulated job of production engines: N `resmpi_core::Engine`s, one
//! [`MemoryPath`] each, one thread, and a seeded scheduler that decides at
//! every step who moves.
//!
//! Why: the engine's protocols (eager with credit, rendezvous RTS/CTS/Data,
//! Ssend's SyncAck, cancel, collective schedules) only break in rare
//! interleavings. Here the code under test is the engine itself, not a
//! model of it; the seed picks, step by step, one of:
//! - a rank's turn: it runs the next action of its program (start a send
//!   or receive, cancel, start a collective) or calls `progress()`;
//! - the network takes frames from a rank's outgoing queue (until it does,
//!   the bounded queue pushes back on the engine) and gives each a delivery
//!   step at a random delay, keeping every (source, destination) pair FIFO
//!   as every real path does;
//! - the network hands the ready head frames of a random pair to the
//!   destination's incoming queue (pairs interleave arbitrarily).
//!
//! After every engine call the driver reads the requests the call touched
//! (matched, completed, status, buffer) and hands them to the
//! [`EngineChecker`]. When a rank's program is done it drains: it keeps one
//! ANY_SOURCE/ANY_TAG receive posted while messages to it are unclaimed,
//! and cancels its leftover receives once none are. The job must then go
//! quiet with every queue empty and every request released, within
//! `step_limit` steps.
//!
//! A scenario can also kill a rank at a step ([`Kill`]): it stops running;
//! frames to it vanish; of the frames it sent that are still on the wire
//! a random prefix per destination goes on arriving (what a socket had
//! buffered), the rest is lost; and each survivor is told after its own
//! delay, through the engine call a launcher notice ends in
//! (`Engine::handle_peer_failure`). The checker then judges which
//! requests may end with PROC_FAILED and which must not, and the job must
//! still go quiet: a correct engine leaves no survivor waiting on the dead.

use std::collections::VecDeque;
use std::sync::Arc;

use resmpi_core::coll::{self, Reduction};
use resmpi_core::comm::{SELF_CONTEXT, WORLD_CONTEXT};
use resmpi_core::datatype::{BasicKind, TypeInfo};
use resmpi_core::engine::BlockingReceive;
use resmpi_core::op::Op;
use resmpi_core::request::{Operation, SendMode, SendStage};
use resmpi_core::transport::Transports;
use resmpi_core::user_bytes::UserBytes;
use resmpi_core::{Communicator, Destination, Engine, EngineConfig, Status, Unexpected};
use resmpi_ft::PassThrough;
use resmpi_path::MemoryPath;
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};

use crate::engine_checker::{EngineChecker, SeenStatus, PROC_FAILED, SENTINEL_BYTE};
use crate::engine_plan::{
    allreduce_input, bcast_data, payload, Action, Plan, PlanShape, PlannedCollective, PlannedMode,
    PlannedPattern,
};
use crate::rng::SplitMix64;

/// Index of MPI_COMM_WORLD in an engine's communicator table.
const WORLD: usize = 0;
/// Byte a buffered send's user buffer is overwritten with right after the
/// call (MPI_Bsend lets the application reuse it at once).
const SCRIBBLE_BYTE: u8 = 0xEE;

/// Kill one rank during the job.
#[derive(Clone, Copy, Debug)]
pub struct Kill {
    /// The rank that dies.
    pub rank: u32,
    /// Step at which it dies.
    pub step: u64,
    /// Each survivor learns of the death up to this many steps later.
    pub notice_delay_steps_max: u64,
    /// Whether survivors are told at all (false is the negative control:
    /// a survivor waiting on the dead rank must then be reported as a
    /// hang, not pass).
    pub notices: bool,
}

/// Everything that defines a simulated engine job; equal configs give
/// identical runs.
#[derive(Clone, Debug)]
pub struct EngineJobConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// What the ranks do.
    pub shape: PlanShape,
    /// Eager bytes a sender may have unconsumed at one receiver.
    pub eager_credit_bytes: usize,
    /// Frames a rank's memory path holds before it pushes back.
    pub outgoing_frames_max: usize,
    /// Longest delay, in steps, between the network taking a frame and the
    /// frame being deliverable.
    pub delivery_delay_steps_max: u64,
    /// Probability that a rank's turn runs its next action (else it
    /// progresses).
    pub action_rate: f64,
    /// Relative weights of a rank's turn, the network taking frames, and
    /// the network delivering frames.
    pub step_weights: [u64; 3],
    /// The job must end within this many steps.
    pub step_limit: u64,
    /// A rank that dies, if any.
    pub kill: Option<Kill>,
    /// Probability that a planned receive is a blocking one
    /// (`Engine::start_blocking_receive`: no request unless promoted); the
    /// rank then only progresses until it ends.
    pub blocking_receive_rate: f64,
}

impl EngineJobConfig {
    /// A random job of up to `rank_count_max` ranks.
    pub fn random(seed: u64, rank_count_max: u32) -> EngineJobConfig {
        let mut rng = SplitMix64::new(seed ^ 0x656e_6769_6e65);
        let rank_count = rng.between(1, u64::from(rank_count_max.max(1))) as u32;
        let rank_count = if rank_count == 1 && rank_count_max > 1 && rng.chance(0.8) {
            2
        } else {
            rank_count
        };
        let eager_limit_bytes = rng.between(8, 512) as usize;
        let max_payload_bytes = [128, 256, 512, 1024][rng.below(4) as usize];
        let frame_bytes = eager_limit_bytes + 64;
        let eager_credit_bytes = match rng.below(3) {
            // Barely one small message at a time: credit runs out constantly.
            0 => rng.between(72, 200) as usize,
            _ => rng.between(frame_bytes as u64, 4 * frame_bytes as u64) as usize,
        };
        EngineJobConfig {
            seed,
            shape: PlanShape {
                rank_count,
                sends_per_rank: rng.between(2, 24) as usize,
                message_bytes_max: 4096,
                eager_limit_bytes,
                max_payload_bytes,
                collective_count: rng.between(0, 4) as usize,
                cancel_rate: rng.uniform(0.0, 0.3),
                receive_fraction: rng.uniform(0.2, 1.2),
            },
            eager_credit_bytes,
            outgoing_frames_max: rng.between(1, 8) as usize,
            delivery_delay_steps_max: rng.between(0, 40),
            action_rate: rng.uniform(0.2, 0.9),
            step_weights: [rng.between(1, 6), rng.between(1, 6), rng.between(1, 6)],
            step_limit: 200_000,
            kill: None,
            // Its own generator, so that every other draw of a seed stays
            // what it was before blocking receives were simulated.
            blocking_receive_rate: SplitMix64::new(seed ^ 0x0062_6c6f_636b).uniform(0.0, 0.6),
        }
    }

    /// [`EngineJobConfig::random`] with, in every job of two ranks or more,
    /// a random rank killed at a random step of the job's busy part and
    /// survivors told up to a few hundred steps later.
    pub fn random_with_kill(seed: u64, rank_count_max: u32) -> EngineJobConfig {
        let mut config = EngineJobConfig::random(seed, rank_count_max);
        let rank_count = config.shape.rank_count;
        if rank_count < 2 {
            return config;
        }
        let mut rng = SplitMix64::new(seed ^ 0x6b69_6c6c);
        // A job takes roughly this many steps per planned operation; a kill
        // drawn inside that span lands while messages and collectives are
        // in flight rather than after everything is done.
        let operations =
            rank_count as usize * (config.shape.sends_per_rank + config.shape.collective_count) * 2;
        let busy_steps = (operations as u64 * KILL_STEPS_PER_OPERATION).max(2);
        config.kill = Some(Kill {
            rank: rng.below(u64::from(rank_count)) as u32,
            step: rng.between(1, busy_steps),
            notice_delay_steps_max: [0, 20, 200, 600][rng.below(4) as usize],
            notices: true,
        });
        config
    }
}

/// Turns a simulated rank stays blocked in a blocking receive before it
/// gives it up (see `Simulation::blocked_turn`).
const BLOCKED_TURNS_MAX: u64 = 400;

/// Steps per planned operation over which a random kill step is drawn.
const KILL_STEPS_PER_OPERATION: u64 = 12;

/// Where a kill landed: what was under way between the dead rank and the
/// survivors at that step.
#[derive(Clone, Copy, Debug, Default)]
pub struct KillLanding {
    /// A rendezvous to or from the dead rank had started and not finished
    /// (announced, cleared, or data streaming), point-to-point or inside a
    /// collective.
    pub mid_rendezvous: bool,
    /// The dead rank had a collective schedule in flight.
    pub mid_collective: bool,
    /// Frames were on their way both to the dead rank and from it (some of
    /// the latter still arrive after the death).
    pub frames_in_flight_both_ways: bool,
}

/// What a finished job did.
#[derive(Clone, Debug, Default)]
pub struct EngineJobReport {
    /// Steps the job took.
    pub steps: u64,
    /// Point-to-point messages planned.
    pub message_count: usize,
    /// Frames the network carried.
    pub frames_carried: u64,
    /// Of those, `frames_by_kind[kind]` by `resmpi_wire::FrameKind` value
    /// (1 eager, 2 request-to-send, 3 clear-to-send, 4 data, 6 sync-ack,
    /// 7 control).
    pub frames_by_kind: [u64; 8],
    /// Sends that completed cancelled.
    pub sends_cancelled: usize,
    /// Receives that completed cancelled.
    pub receives_cancelled: usize,
    /// Collectives completed (summed over ranks).
    pub collectives_completed: usize,
    /// Where the kill landed, if the job had one.
    pub kill_landing: Option<KillLanding>,
    /// Survivor receives that ended with PROC_FAILED.
    pub receives_failed: usize,
    /// Survivor sends that ended with PROC_FAILED.
    pub sends_failed: usize,
    /// Survivor collectives that ended with PROC_FAILED.
    pub collectives_failed: usize,
    /// Frames from the dead rank still on the wire when its destination was
    /// told (a correct engine drops them).
    pub frames_overtaken_by_notices: usize,
    /// Blocking receives that ended without a request.
    pub blocking_receives_direct: usize,
    /// Blocking receives that became requests (a rendezvous, a message too
    /// long, a failure).
    pub blocking_receives_promoted: usize,
}

/// A violated invariant, with what is needed to reproduce it.
#[derive(Clone, Debug)]
pub struct EngineJobFailure {
    /// The job's seed.
    pub seed: u64,
    /// Step at which the violation was seen.
    pub step: u64,
    /// What went wrong.
    pub message: String,
}

impl std::fmt::Display for EngineJobFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "seed {} step {}: {}",
            self.seed, self.step, self.message
        )
    }
}

struct OpenReceive {
    /// None while it is a blocking receive without a request.
    request: Option<u32>,
    ordinal: usize,
    pattern: PlannedPattern,
    buffer: Box<[u8]>,
}

struct OpenSend {
    request: u32,
    ordinal: usize,
    message: usize,
    /// Keeps the data alive until the request is released.
    _buffer: Box<[u8]>,
    /// The program cancels this send later: keep the request until then.
    cancel_planned: bool,
}

struct OpenCollective {
    request: u32,
    index: usize,
    /// The allreduce's input (kept alive for the schedule).
    _input: Box<[u8]>,
    /// The allreduce's output or the broadcast buffer.
    result: Box<[u8]>,
}

struct SimulatedRank {
    engine: Engine<PassThrough>,
    rank: u32,
    alive: bool,
    program: Vec<Action>,
    next_action: usize,
    /// Engine calls made so far (the checker's clock for this rank).
    calls: u64,
    sends_started: usize,
    receives: Vec<OpenReceive>,
    sends: Vec<OpenSend>,
    collectives: Vec<OpenCollective>,
    /// Turns this rank has spent blocked in its blocking receive.
    blocked_turns: u64,
}

impl SimulatedRank {
    fn program_done(&self) -> bool {
        self.next_action >= self.program.len()
    }

    fn has_open_operations(&self) -> bool {
        !self.receives.is_empty() || !self.sends.is_empty() || !self.collectives.is_empty()
    }
}

/// A frame in the network: deliverable from step `ready_step`.
struct InFlight {
    ready_step: u64,
    frame: Vec<u8>,
}

struct Simulation {
    config: EngineJobConfig,
    plan: Plan,
    rng: SplitMix64,
    ranks: Vec<SimulatedRank>,
    checker: EngineChecker,
    /// `in_flight[source * n + destination]`, oldest first.
    in_flight: Vec<VecDeque<InFlight>>,
    /// `notices[survivor]`: step at which it learns of the kill, until it
    /// has.
    notices: Vec<Option<u64>>,
    step: u64,
    report: EngineJobReport,
    /// Chooses which receives block (apart from `rng`, see
    /// `blocking_receive_rate`).
    blocking_rng: SplitMix64,
}

/// Run one simulated engine job.
pub fn run_engine_job(config: &EngineJobConfig) -> Result<EngineJobReport, EngineJobFailure> {
    let mut simulation = Simulation::new(config);
    let result = simulation.run();
    let step = simulation.step;
    result
        .map(|()| simulation.report)
        .map_err(|message| EngineJobFailure {
            seed: config.seed,
            step,
            message,
        })
}

impl Simulation {
    fn new(config: &EngineJobConfig) -> Simulation {
        let mut rng = SplitMix64::new(config.seed);
        let plan = Plan::random(&mut rng, config.seed, &config.shape);
        let size = config.shape.rank_count;
        let engine_config = EngineConfig {
            eager_limit_bytes: config.shape.eager_limit_bytes,
            eager_credit_bytes: config.eager_credit_bytes,
        };
        let ranks = (0..size)
            .map(|rank| {
                let path =
                    MemoryPath::new(config.outgoing_frames_max, config.shape.max_payload_bytes);
                let transports = Transports::memory(rank, size, path);
                let mut engine = Engine::new(rank, size, engine_config, transports, PassThrough);
                // WORLD and SELF exactly as `Mpi::init` builds them.
                let world = Communicator::new(
                    WORLD_CONTEXT,
                    Arc::new((0..size).collect()),
                    rank,
                    0,
                    "MPI_COMM_WORLD".into(),
                );
                let own = Communicator::new(
                    SELF_CONTEXT,
                    Arc::new(vec![rank]),
                    0,
                    0,
                    "MPI_COMM_SELF".into(),
                );
                engine.state.comms = vec![Some(world), Some(own)];
                SimulatedRank {
                    engine,
                    rank,
                    alive: true,
                    program: plan.programs[rank as usize].clone(),
                    next_action: 0,
                    calls: 0,
                    sends_started: 0,
                    receives: Vec::new(),
                    sends: Vec::new(),
                    collectives: Vec::new(),
                    blocked_turns: 0,
                }
            })
            .collect();
        Simulation {
            config: config.clone(),
            checker: EngineChecker::new(&plan),
            report: EngineJobReport {
                message_count: plan.messages.len(),
                ..Default::default()
            },
            plan,
            rng,
            ranks,
            in_flight: (0..size * size).map(|_| VecDeque::new()).collect(),
            notices: vec![None; size as usize],
            step: 0,
            blocking_rng: SplitMix64::new(config.seed ^ 0x7475_726e),
        }
    }

    fn size(&self) -> u32 {
        self.ranks.len() as u32
    }

    fn run(&mut self) -> Result<(), String> {
        let [turn_weight, take_weight, deliver_weight] = self.config.step_weights;
        let weight_total = turn_weight + take_weight + deliver_weight;
        while self.step < self.config.step_limit {
            self.step += 1;
            self.handle_kill_and_notices()?;
            if self.step.is_multiple_of(64) && self.finished() {
                self.quiesce()?;
                self.report.steps = self.step;
                return self.checker.finish();
            }
            let choice = self.rng.below(weight_total);
            if choice < turn_weight {
                let rank = self.random_live_rank();
                self.turn(rank)?;
            } else if choice < turn_weight + take_weight {
                let rank = self.random_live_rank();
                let count = self.rng.between(1, 4) as usize;
                self.take_frames(rank, count);
            } else {
                self.deliver_frames();
            }
        }
        Err(format!(
            "the job did not end within {} steps: {}",
            self.config.step_limit,
            self.describe_open()
        ))
    }

    fn random_live_rank(&mut self) -> usize {
        loop {
            let rank = self.rng.below(u64::from(self.size())) as usize;
            if self.ranks[rank].alive {
                return rank;
            }
        }
    }

    /// Every program done, every request released, every message delivered
    /// or cancelled, every survivor told of a death.
    fn finished(&self) -> bool {
        self.notices.iter().all(Option::is_none)
            && self
                .ranks
                .iter()
                .filter(|rank| rank.alive)
                .all(|rank| rank.program_done() && !rank.has_open_operations())
            && self.checker.all_accounted()
    }

    /// One turn of `rank`: its next action, a drain step, or progress.
    fn turn(&mut self, rank: usize) -> Result<(), String> {
        if self.ranks[rank].engine.state.direct_receive_waiting() {
            return self.blocked_turn(rank);
        }
        let simulated = &self.ranks[rank];
        if !simulated.program_done() {
            if self.rng.chance(self.config.action_rate) {
                let action = simulated.program[simulated.next_action];
                self.ranks[rank].next_action += 1;
                return self.act(rank, action);
            }
            return self.progress(rank);
        }
        let unclaimed = self.checker.unclaimed(rank as u32);
        let simulated = &self.ranks[rank];
        let open_unmatched: Vec<(u32, bool)> = simulated
            .receives
            .iter()
            .filter(|receive| !self.checker.is_matched(rank as u32, receive.ordinal))
            .filter_map(|receive| Some((receive.request?, receive.pattern == PlannedPattern::ANY)))
            .collect();
        // A receive posted with a narrower pattern may wait for a message
        // that went elsewhere: only a wildcard one is sure to be taken.
        let wildcard_waiting = open_unmatched.iter().any(|&(_, wildcard)| wildcard);
        if unclaimed > 0 && !wildcard_waiting {
            return self.post_receive(rank, PlannedPattern::ANY);
        }
        if unclaimed == 0 && !open_unmatched.is_empty() {
            let (request, _) = open_unmatched[self.rng.below(open_unmatched.len() as u64) as usize];
            return self.call(rank, |engine| engine.cancel(request));
        }
        self.progress(rank)
    }

    /// A turn of a rank blocked in a blocking receive: it progresses. A
    /// random program can block a rank for ever (its message went to
    /// another receive, or comes only after what the rank itself has yet
    /// to send): after `BLOCKED_TURNS_MAX` turns, or when nothing is left
    /// for it, the receive is withdrawn (`abandon_blocking_receive`, the
    /// engine's path for a blocking receive whose call fails) and must
    /// then look cancelled: nothing written, nothing matched.
    fn blocked_turn(&mut self, rank: usize) -> Result<(), String> {
        let simulated = &mut self.ranks[rank];
        simulated.blocked_turns += 1;
        let nothing_left = simulated.program_done() && self.checker.unclaimed(rank as u32) == 0;
        if simulated.blocked_turns <= BLOCKED_TURNS_MAX && !nothing_left {
            return self.progress(rank);
        }
        simulated.blocked_turns = 0;
        simulated.engine.abandon_blocking_receive();
        let position = simulated
            .receives
            .iter()
            .position(|receive| receive.request.is_none())
            .ok_or_else(|| format!("rank {rank}: a blocking receive waits but none is open"))?;
        let open = simulated.receives.swap_remove(position);
        self.report.receives_cancelled += 1;
        let call = simulated.calls;
        let status = SeenStatus {
            cancelled: true,
            ..seen(&Status::default())
        };
        self.checker
            .receive_completed(rank as u32, open.ordinal, call, status, &open.buffer)
    }

    fn progress(&mut self, rank: usize) -> Result<(), String> {
        self.call(rank, |engine| engine.progress().map(|_| ()))
    }

    /// Run one engine call on `rank`, then look at what it changed.
    fn call(
        &mut self,
        rank: usize,
        operation: impl FnOnce(&mut Engine<PassThrough>) -> resmpi_core::MpiResult<()>,
    ) -> Result<(), String> {
        let simulated = &mut self.ranks[rank];
        simulated.calls += 1;
        operation(&mut simulated.engine).map_err(|error| format!("rank {rank}: {error}"))?;
        self.observe(rank)
    }

    fn act(&mut self, rank: usize, action: Action) -> Result<(), String> {
        match action {
            Action::Send { message } => self.start_send(rank, message),
            Action::Receive { pattern } => self.post_receive(rank, pattern),
            Action::CancelReceive { ordinal } => {
                let request = self.ranks[rank]
                    .receives
                    .iter()
                    .find(|receive| receive.ordinal == ordinal)
                    .and_then(|receive| receive.request);
                match request {
                    Some(request) => self.call(rank, |engine| engine.cancel(request)),
                    None => Ok(()),
                }
            }
            Action::CancelSend { ordinal } => {
                let send = self.ranks[rank]
                    .sends
                    .iter_mut()
                    .find(|send| send.ordinal == ordinal);
                let Some(send) = send else {
                    return Ok(());
                };
                send.cancel_planned = false;
                let request = send.request;
                self.call(rank, |engine| engine.cancel(request))
            }
            Action::Collective { index } => self.start_collective(rank, index),
        }
    }

    fn start_send(&mut self, rank: usize, number: usize) -> Result<(), String> {
        let message = self.plan.messages[number];
        let mut buffer = payload(self.plan.seed, number, message.length_bytes);
        let mode = match message.mode {
            PlannedMode::Standard => SendMode::Standard,
            PlannedMode::Synchronous => SendMode::Synchronous,
            PlannedMode::Buffered => SendMode::Buffered,
        };
        let destination = Destination {
            peer: message.destination,
            context: WORLD_CONTEXT,
            tag: message.tag,
        };
        let ordinal = self.ranks[rank].sends_started;
        self.ranks[rank].sends_started += 1;
        let cancel_planned = self.ranks[rank].program[self.ranks[rank].next_action..]
            .contains(&Action::CancelSend { ordinal });
        let simulated = &mut self.ranks[rank];
        simulated.calls += 1;
        let request = simulated
            .engine
            .start_send(
                WORLD,
                destination,
                buffer.as_ptr(),
                message.length_bytes,
                mode,
            )
            .map_err(|error| format!("rank {rank}: start_send: {error}"))?;
        if mode == SendMode::Buffered {
            // The engine owns a copy now; the application may reuse this.
            buffer.fill(SCRIBBLE_BYTE);
        }
        simulated.sends.push(OpenSend {
            request,
            ordinal,
            message: number,
            _buffer: buffer,
            cancel_planned,
        });
        self.observe(rank)
    }

    fn post_receive(&mut self, rank: usize, pattern: PlannedPattern) -> Result<(), String> {
        let mut buffer =
            vec![SENTINEL_BYTE; self.config.shape.message_bytes_max].into_boxed_slice();
        let blocking = self.blocking_rng.chance(self.config.blocking_receive_rate);
        let simulated = &mut self.ranks[rank];
        simulated.calls += 1;
        let call = simulated.calls;
        let started = if blocking {
            simulated
                .engine
                .start_blocking_receive(
                    WORLD,
                    UserBytes::from(buffer.as_mut_ptr()),
                    buffer.len(),
                    pattern.source,
                    pattern.tag,
                    WORLD_CONTEXT,
                )
                .map_err(|error| format!("rank {rank}: start_blocking_receive: {error}"))?
        } else {
            simulated
                .engine
                .start_receive(
                    WORLD,
                    buffer.as_mut_ptr(),
                    buffer.len(),
                    pattern.source,
                    pattern.tag,
                    WORLD_CONTEXT,
                )
                .map(BlockingReceive::Request)
                .map_err(|error| format!("rank {rank}: start_receive: {error}"))?
        };
        let ordinal = self.checker.receive_posted(rank as u32, pattern, call);
        let request = match started {
            BlockingReceive::Done(status) => {
                self.report.blocking_receives_direct += 1;
                self.checker.receive_matched(rank as u32, ordinal, call);
                return self.checker.receive_completed(
                    rank as u32,
                    ordinal,
                    call,
                    seen(&status),
                    &buffer,
                );
            }
            BlockingReceive::Request(index) => Some(index),
            BlockingReceive::Waiting => {
                simulated.blocked_turns = 0;
                None
            }
        };
        simulated.receives.push(OpenReceive {
            request,
            ordinal,
            pattern,
            buffer,
        });
        self.observe(rank)
    }

    fn start_collective(&mut self, rank: usize, index: usize) -> Result<(), String> {
        let seed = self.plan.seed;
        let collective = self.plan.collectives[index];
        let simulated = &mut self.ranks[rank];
        simulated.calls += 1;
        let engine = &mut simulated.engine;
        let mut schedule = engine
            .new_schedule(WORLD)
            .map_err(|error| format!("rank {rank}: new_schedule: {error}"))?;
        let (input, mut result): (Box<[u8]>, Box<[u8]>) = match collective {
            PlannedCollective::Barrier => (Box::new([]), Box::new([])),
            PlannedCollective::Allreduce { count } => {
                let input: Box<[u8]> = allreduce_input(seed, index, rank as u32, count)
                    .iter()
                    .flat_map(|value| value.to_ne_bytes())
                    .collect();
                (input, vec![SENTINEL_BYTE; count * 8].into_boxed_slice())
            }
            PlannedCollective::Bcast { root, length_bytes } => {
                let buffer = if root == rank as u32 {
                    bcast_data(seed, index, length_bytes)
                } else {
                    vec![SENTINEL_BYTE; length_bytes].into_boxed_slice()
                };
                (Box::new([]), buffer)
            }
        };
        match collective {
            PlannedCollective::Barrier => coll::barrier(&mut schedule),
            PlannedCollective::Allreduce { count } => {
                schedule.reduction = Some(Reduction {
                    op: Op::Sum,
                    info: TypeInfo::basic(8, BasicKind::U64),
                    datatype_handle: 0,
                    layout: None,
                });
                coll::allreduce(&mut schedule, input.as_ptr(), result.as_mut_ptr(), count);
            }
            PlannedCollective::Bcast { root, length_bytes } => {
                coll::bcast(&mut schedule, result.as_mut_ptr(), length_bytes, root)
            }
        }
        let request = engine
            .start_schedule(schedule)
            .map_err(|error| format!("rank {rank}: start_schedule: {error}"))?;
        simulated.collectives.push(OpenCollective {
            request,
            index,
            _input: input,
            result,
        });
        self.checker
            .collective_started(index, rank as u32, self.step);
        self.observe(rank)
    }

    /// Read every open request of `rank` after an engine call: note
    /// matches, judge and release completed ones.
    fn observe(&mut self, rank: usize) -> Result<(), String> {
        let simulated = &mut self.ranks[rank];
        let call = simulated.calls;
        let rank_id = rank as u32;
        check_credit_bound(simulated, self.config.eager_credit_bytes)?;
        let mut position = 0;
        while position < simulated.receives.len() {
            let open = &mut simulated.receives[position];
            let index = match open.request {
                Some(index) => index,
                None => match simulated.engine.poll_blocking_receive() {
                    BlockingReceive::Waiting => {
                        position += 1;
                        continue;
                    }
                    BlockingReceive::Request(index) => {
                        self.report.blocking_receives_promoted += 1;
                        open.request = Some(index);
                        index
                    }
                    BlockingReceive::Done(status) => {
                        self.report.blocking_receives_direct += 1;
                        let open = simulated.receives.swap_remove(position);
                        self.checker.receive_matched(rank_id, open.ordinal, call);
                        self.checker.receive_completed(
                            rank_id,
                            open.ordinal,
                            call,
                            seen(&status),
                            &open.buffer,
                        )?;
                        continue;
                    }
                },
            };
            let open = &simulated.receives[position];
            let Some(request) = simulated.engine.state.requests.get(index) else {
                return Err(format!(
                    "rank {rank}: receive #{} vanished from the request table",
                    open.ordinal
                ));
            };
            if let Operation::Receive(receive) = &request.operation {
                if receive.matched {
                    self.checker.receive_matched(rank_id, open.ordinal, call);
                }
            }
            if !request.complete {
                position += 1;
                continue;
            }
            let status = seen(&request.status);
            let open = simulated.receives.swap_remove(position);
            simulated.engine.state.requests.remove(index);
            if status.cancelled {
                self.report.receives_cancelled += 1;
            }
            if status.error == PROC_FAILED {
                self.report.receives_failed += 1;
            }
            self.checker
                .receive_completed(rank_id, open.ordinal, call, status, &open.buffer)?;
        }
        let mut position = 0;
        while position < simulated.sends.len() {
            let open = &simulated.sends[position];
            let Some(request) = simulated.engine.state.requests.get(open.request) else {
                return Err(format!(
                    "rank {rank}: send of message {} vanished from the request table",
                    open.message
                ));
            };
            if !request.complete || open.cancel_planned {
                position += 1;
                continue;
            }
            let status = seen(&request.status);
            let open = simulated.sends.swap_remove(position);
            simulated.engine.state.requests.remove(open.request);
            if status.cancelled {
                self.report.sends_cancelled += 1;
            }
            if status.error == PROC_FAILED {
                self.report.sends_failed += 1;
            }
            self.checker.send_completed(open.message, call, status)?;
        }
        let mut position = 0;
        while position < simulated.collectives.len() {
            let open = &simulated.collectives[position];
            let complete = simulated
                .engine
                .state
                .requests
                .get(open.request)
                .is_some_and(|request| request.complete);
            if !complete {
                position += 1;
                continue;
            }
            let open = simulated.collectives.swap_remove(position);
            let error = match simulated.engine.take_schedule_result(open.request) {
                Ok(()) => 0,
                Err(error) => error.class as i32,
            };
            self.report.collectives_completed += 1;
            if error == PROC_FAILED {
                self.report.collectives_failed += 1;
            }
            self.checker.collective_completed(
                open.index,
                rank_id,
                self.step,
                error,
                &open.result,
            )?;
        }
        Ok(())
    }

    /// The network takes up to `count` frames from `rank`'s outgoing queue.
    fn take_frames(&mut self, rank: usize, count: usize) {
        let size = self.size() as usize;
        for _ in 0..count {
            let memory = self.ranks[rank]
                .engine
                .transports
                .memory
                .as_mut()
                .expect("a simulated rank has a memory path");
            let Some((destination, frame)) = memory.take_outgoing() else {
                return;
            };
            if !self.ranks[destination as usize].alive {
                continue;
            }
            let queue = &mut self.in_flight[rank * size + destination as usize];
            let delay = self.rng.between(0, self.config.delivery_delay_steps_max);
            // FIFO per pair: never deliverable before the frame ahead of it.
            let ready_step = queue
                .back()
                .map_or(0, |ahead| ahead.ready_step)
                .max(self.step + delay);
            if let Ok(header) = FrameHeader::parse(&frame) {
                self.report.frames_by_kind[header.kind as usize] += 1;
            }
            queue.push_back(InFlight { ready_step, frame });
            self.report.frames_carried += 1;
        }
    }

    /// The network hands the ready head frames of one random pair to its
    /// destination.
    fn deliver_frames(&mut self) {
        let step = self.step;
        let ready: Vec<usize> = self
            .in_flight
            .iter()
            .enumerate()
            .filter(|(_, queue)| queue.front().is_some_and(|head| head.ready_step <= step))
            .map(|(pair, _)| pair)
            .collect();
        if ready.is_empty() {
            return;
        }
        let pair = ready[self.rng.below(ready.len() as u64) as usize];
        let size = self.size() as usize;
        let (source, destination) = (pair / size, pair % size);
        let burst = self.rng.between(1, 3);
        for _ in 0..burst {
            let queue = &mut self.in_flight[pair];
            if queue.front().is_none_or(|head| head.ready_step > step) {
                break;
            }
            let InFlight { frame, .. } = queue.pop_front().expect("checked above");
            self.ranks[destination]
                .engine
                .transports
                .memory
                .as_mut()
                .expect("a simulated rank has a memory path")
                .push_incoming(source as u32, frame);
        }
    }

    /// Kill the planned rank at its step, and tell each survivor at its
    /// notice step.
    fn handle_kill_and_notices(&mut self) -> Result<(), String> {
        let Some(kill) = self.config.kill else {
            return Ok(());
        };
        if self.step == kill.step && self.ranks[kill.rank as usize].alive {
            self.kill(kill);
        }
        for survivor in 0..self.size() as usize {
            if self.notices[survivor] == Some(self.step) {
                self.notices[survivor] = None;
                self.notify(survivor, kill.rank)?;
            }
        }
        Ok(())
    }

    /// `kill.rank` dies now: it never runs again, frames to it vanish, and
    /// of the frames it sent that are still on the wire each destination
    /// gets a random prefix (never a gap: a message numbered after a lost
    /// one would be a path losing data, which no path does).
    fn kill(&mut self, kill: Kill) {
        let size = self.size() as usize;
        let dead = kill.rank as usize;
        let mut landing = self.kill_landing(kill.rank);
        let mut frames_to_dead = 0;
        let mut frames_from_dead = 0;
        self.ranks[dead].alive = false;
        for peer in (0..size).filter(|&peer| peer != dead) {
            frames_to_dead += self.in_flight[peer * size + dead].len();
            self.in_flight[peer * size + dead].clear();
            let memory = self.ranks[peer].engine.transports.memory.as_ref();
            let memory = memory.expect("a simulated rank has a memory path");
            frames_to_dead += memory.outgoing_count_to(kill.rank);
            frames_from_dead += memory.incoming_from(kill.rank).count();
            let queue = &mut self.in_flight[dead * size + peer];
            let kept = self.rng.between(0, queue.len() as u64) as usize;
            queue.truncate(kept);
            frames_from_dead += kept;
        }
        landing.frames_in_flight_both_ways = frames_to_dead > 0 && frames_from_dead > 0;
        self.report.kill_landing = Some(landing);
        self.checker.rank_died(kill.rank, self.step);
        if kill.notices {
            for survivor in (0..size).filter(|&rank| rank != dead) {
                let delay = self.rng.between(0, kill.notice_delay_steps_max);
                self.notices[survivor] = Some(self.step + delay);
            }
        }
    }

    /// What was under way between `dead` and the others as it died.
    fn kill_landing(&self, dead: u32) -> KillLanding {
        let mut landing = KillLanding {
            mid_collective: !self.ranks[dead as usize].engine.schedules.is_empty(),
            ..KillLanding::default()
        };
        for simulated in &self.ranks {
            let requests = &simulated.engine.state.requests;
            for index in requests.live_indices() {
                let Some(request) = requests.get(index) else {
                    continue;
                };
                // A rendezvous between the dead rank and another one.
                let across = |peer: Option<u32>| {
                    peer.is_some_and(|peer| {
                        peer != simulated.rank && (simulated.rank == dead || peer == dead)
                    })
                };
                let rendezvous_open = match &request.operation {
                    Operation::Send(send) => {
                        across(Some(send.peer))
                            && matches!(
                                send.stage,
                                SendStage::AwaitingClearToSend
                                    | SendStage::Streaming { .. }
                                    | SendStage::AwaitingAcks
                            )
                    }
                    Operation::Receive(receive) => {
                        across(receive.sender) && receive.matched && !request.complete
                    }
                    _ => false,
                };
                landing.mid_rendezvous |= rendezvous_open;
            }
        }
        landing
    }

    /// Tell `survivor` that `dead` died, in one engine call of its own, and
    /// check that every request that needed the dead rank ended in it.
    fn notify(&mut self, survivor: usize, dead: u32) -> Result<(), String> {
        let size = self.size() as usize;
        // Eager messages from the dead rank that its engine has not read
        // yet: once it knows, none of them may be delivered.
        let memory = self.ranks[survivor].engine.transports.memory.as_ref();
        let unread = memory
            .expect("a simulated rank has a memory path")
            .incoming_from(dead);
        let on_the_wire = self.in_flight[dead as usize * size + survivor]
            .iter()
            .map(|in_flight| in_flight.frame.as_slice());
        let overtaken: Vec<&[u8]> = unread.chain(on_the_wire).collect();
        self.report.frames_overtaken_by_notices += overtaken.len();
        let late_messages: Vec<usize> = overtaken
            .into_iter()
            .filter_map(point_to_point_message_number)
            .collect();
        let simulated = &mut self.ranks[survivor];
        simulated.calls += 1;
        let call = simulated.calls;
        simulated.engine.handle_peer_failure(dead);
        self.checker
            .notice_arrived(survivor as u32, call, &late_messages);
        self.observe(survivor)?;
        self.checker.check_notice_took_effect(survivor as u32)?;
        let simulated = &self.ranks[survivor];
        for send in &simulated.sends {
            let complete = simulated
                .engine
                .state
                .requests
                .get(send.request)
                .is_some_and(|request| request.complete);
            if self.plan.messages[send.message].destination == dead && !complete {
                return Err(format!(
                    "rank {survivor} send of message {} ({:?}) to rank {dead} is still open \
                     after rank {survivor} was told of its death (call {call})",
                    send.message, self.plan.messages[send.message]
                ));
            }
        }
        Ok(())
    }

    /// Deliver everything, progress everyone, until nothing moves; then
    /// every queue must be empty and every request released.
    fn quiesce(&mut self) -> Result<(), String> {
        let size = self.size() as usize;
        for _ in 0..10_000 {
            let mut moved = false;
            for rank in 0..size {
                if self.ranks[rank].alive {
                    self.take_frames(rank, usize::MAX);
                }
            }
            for pair in 0..size * size {
                let (source, destination) = (pair / size, pair % size);
                while let Some(InFlight { frame, .. }) = self.in_flight[pair].pop_front() {
                    self.ranks[destination]
                        .engine
                        .transports
                        .memory
                        .as_mut()
                        .expect("a simulated rank has a memory path")
                        .push_incoming(source as u32, frame);
                    moved = true;
                }
            }
            for rank in 0..size {
                if !self.ranks[rank].alive {
                    continue;
                }
                let simulated = &mut self.ranks[rank];
                simulated.calls += 1;
                moved |= simulated
                    .engine
                    .progress()
                    .map_err(|error| format!("rank {rank}: {error}"))?;
                let memory = simulated.engine.transports.memory.as_ref().expect("path");
                moved |= memory.outgoing_len() > 0 || memory.incoming_len() > 0;
                self.observe(rank)?;
            }
            self.step += 1;
            if !moved {
                return self.check_quiet();
            }
        }
        Err("the job never went quiet after its last request".into())
    }

    fn check_quiet(&mut self) -> Result<(), String> {
        let dead = self.config.kill.map(|kill| kill.rank);
        for simulated in self.ranks.iter_mut().filter(|rank| rank.alive) {
            let rank = simulated.rank;
            let state = &mut simulated.engine.state;
            // An eager message the dead rank sent before it died may stay
            // unclaimed: nobody needs it.
            let from_survivors = state
                .matcher
                .unexpected_mut()
                .filter(|(envelope, _)| Some(envelope.source) != dead)
                .count();
            if from_survivors > 0 {
                return Err(format!(
                    "rank {rank}: {from_survivors} unexpected message(s) from survivors left at \
                     the end (delivered twice?)"
                ));
            }
            if state.matcher.posted_len() > 0 {
                return Err(format!(
                    "rank {rank}: {} receive(s) still posted in the matcher at the end",
                    state.matcher.posted_len()
                ));
            }
            if !state.requests.is_empty() {
                return Err(format!(
                    "rank {rank}: {} request(s) left in the table at the end",
                    state.requests.len()
                ));
            }
            if !simulated.engine.schedules.is_empty() {
                return Err(format!("rank {rank}: collective schedules left at the end"));
            }
        }
        Ok(())
    }

    /// What is still open, for a job that did not end.
    fn describe_open(&self) -> String {
        let mut parts = Vec::new();
        for simulated in &self.ranks {
            let rank = simulated.rank;
            if !simulated.alive {
                parts.push(format!("rank {rank} dead"));
                continue;
            }
            if !simulated.program_done() {
                parts.push(format!(
                    "rank {rank} at action {} of {}",
                    simulated.next_action,
                    simulated.program.len()
                ));
            }
            for receive in &simulated.receives {
                let Some(index) = receive.request else {
                    parts.push(format!(
                        "rank {rank} blocking receive #{} waits",
                        receive.ordinal
                    ));
                    continue;
                };
                let progress = match simulated.engine.state.requests.get(index) {
                    Some(request) => match &request.operation {
                        Operation::Receive(state) => format!(
                            "matched {}, {} of {} bytes",
                            state.matched, state.received, state.total
                        ),
                        _ => "not a receive".into(),
                    },
                    None => "gone".into(),
                };
                parts.push(format!(
                    "rank {rank} receive #{} open ({progress})",
                    receive.ordinal
                ));
            }
            for send in &simulated.sends {
                let stage = match simulated.engine.state.requests.get(send.request) {
                    Some(request) => match &request.operation {
                        Operation::Send(state) => format!(
                            "{:?}, complete {}, error {}, cancel planned {}",
                            state.stage,
                            request.complete,
                            request.status.error,
                            send.cancel_planned
                        ),
                        _ => "not a send".into(),
                    },
                    None => "gone".into(),
                };
                parts.push(format!(
                    "rank {rank} send of message {} open ({stage}; {:?})",
                    send.message, self.plan.messages[send.message]
                ));
            }
            for collective in &simulated.collectives {
                parts.push(format!(
                    "rank {rank} collective {} open ({:?})",
                    collective.index, self.plan.collectives[collective.index]
                ));
            }
            let unclaimed = self.checker.unclaimed(rank);
            if unclaimed > 0 {
                parts.push(format!("rank {rank}: {unclaimed} message(s) unclaimed"));
            }
        }
        parts.join("; ")
    }
}

/// Eager credit bounds what a receiver buffers: the unexpected eager
/// messages from any one sender, headers included, never exceed it.
fn check_credit_bound(simulated: &mut SimulatedRank, credit_bytes: usize) -> Result<(), String> {
    let mut buffered_bytes = vec![0usize; simulated.engine.state.size as usize];
    for (envelope, message) in simulated.engine.state.matcher.unexpected_mut() {
        if let Unexpected::Eager { data, .. } = message {
            buffered_bytes[envelope.source as usize] += data.len() + HEADER_LEN_BYTES;
        }
    }
    match buffered_bytes
        .iter()
        .enumerate()
        .find(|(_, &bytes)| bytes > credit_bytes)
    {
        Some((source, bytes)) => Err(format!(
            "rank {}: buffers {bytes} unexpected eager bytes from rank {source}, \
             beyond the {credit_bytes}-byte credit",
            simulated.rank
        )),
        None => Ok(()),
    }
}

fn seen(status: &Status) -> SeenStatus {
    SeenStatus {
        source: status.source,
        tag: status.tag,
        error: status.error,
        count_bytes: status.count_bytes,
        cancelled: status.cancelled,
    }
}

/// The plan number of the point-to-point message whose eager frame this
/// is (its payload starts with the number); None for any other frame.
fn point_to_point_message_number(frame: &[u8]) -> Option<usize> {
    let header = FrameHeader::parse(frame).ok()?;
    let payload = frame.get(HEADER_LEN_BYTES..HEADER_LEN_BYTES + 8)?;
    (header.kind == FrameKind::Eager && header.context == WORLD_CONTEXT && header.payload_len >= 8)
        .then(|| u64::from_le_bytes(payload.try_into().expect("8 bytes")) as usize)
}
