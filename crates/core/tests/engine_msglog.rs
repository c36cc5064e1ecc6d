//! Message logging at the engine: three production engines running
//! `Engine<MessageLog>` over the in-memory path, a program whose answers
//! depend on the order of its `ANY_SOURCE` matches, and one process killed
//! at a seeded step (its frames in flight delivered or lost, at random).
//! The killed rank is started again as incarnation 1 from the beginning of
//! its program; the survivors are told of the death, then of the re-join.
//!
//! Invariant (the oracle): every rank's sequence of delivered messages
//! (source, tag, bytes) equals the one of the same seed's run without the
//! kill, and every program runs to its end. Since a survivor's sequence
//! would hold a message twice if a replayed duplicate were delivered, and
//! the restarted rank's would differ if it matched its wildcards in
//! another order or missed a survivor's message, this covers the issue's
//! invariant ("the restarted process's delivery sequence equals the
//! failure-free one, and no survivor sees a message twice").
//!
//! A second program ([`Program::Polls`]) has rank 0 poll instead of
//! receiving with `ANY_SOURCE`: `Engine::probe` as MPI_Iprobe(ANY_SOURCE)
//! until it finds a message (then a receive from the source found), and
//! `Engine::test_flag_once` as MPI_Testall over receives it posted; its
//! answers carry every outcome (the message found, how many polls failed
//! before) verbatim. The oracle re-runs each rank's program on its
//! history *and its outcomes*: the restarted rank's outcomes must be the
//! ones its earlier incarnation's answers carried, exactly.
//!
//! With checkpoints ([`a_rank_killed_after_a_checkpoint_resumes_from_its_position`]):
//! every process takes a checkpoint at each round's start when it can
//! (no request pending), with messages of later rounds often waiting
//! unexpected above its position; the killed rank's new incarnation
//! resumes from its newest one (the engine's position, its program's
//! place and what it had delivered until then), the survivors trim their
//! logs to what the checkpoints announced, and the same oracle holds.
//!
//! And directly, for both programs: what the killed incarnation had
//! delivered and observed before its last completed send (stable by then:
//! pessimistic logging lets a send go only once the determinants before
//! it are acked) must be a prefix of what the restarted one delivers and
//! observes.
//!
//! Optimistic logging (O2P, `MessageLog::optimistic`, the `optimistic_*`
//! tests): the same programs and faults with sends that never wait for
//! acks. Where no survivor depends on a determinant the logger lost, the
//! same oracle holds (the prefix check then covers what was delivered
//! before the victim's last send made while everything was acked); where
//! one does (the logger made to store only a few of rank 0's
//! determinants), that survivor must find itself an orphan and roll back:
//! once its cut list is durable the harness kills it as the launcher
//! restarts an orphan that exited, its replacement replays the cut list,
//! and the run must end with histories some fault-free run has (the same
//! oracle), never stop.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;

use resmpi_core::comm::Communicator;
use resmpi_core::engine::{CheckpointPosition, Destination, Engine, EngineConfig, ProbeLook};
use resmpi_core::transport::{Route, Transports};
use resmpi_core::CompletionCall;
use resmpi_core::SendMode;
use resmpi_ft::Interceptor;
use resmpi_matching::ReceivePattern;
use resmpi_msglog::event_logger::{EventLogger, LoggerCounters};
use resmpi_msglog::MessageLog;
use resmpi_path::memory::MemoryPath;

const WORLD: usize = 0;
const WORLD_CONTEXT: u32 = 0;
const SIZE: u32 = 3;
const EAGER_LIMIT_BYTES: usize = 256;
const ROUNDS: u32 = 6;
/// Scheduler steps after which a run that has not finished is a hang.
const STEPS_MAX: usize = 200_000;

thread_local! {
    /// The processes of this thread's runs log optimistically (O2P).
    static OPTIMISTIC: Cell<bool> = const { Cell::new(false) };
    /// The event logger of this thread's runs stores at most this many
    /// determinants per rank (the rest are lost, unacked).
    static STORE_COUNT_MAX: Cell<Option<usize>> = const { Cell::new(None) };
}

/// A deterministic random stream (xorshift64*), one per seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

fn engine(rank: u32, incarnation: u32) -> Engine<MessageLog> {
    let config = EngineConfig {
        eager_limit_bytes: EAGER_LIMIT_BYTES,
        eager_credit_bytes: 4 * 1024,
    };
    let transports = Transports::memory(rank, SIZE, MemoryPath::new(64, 64 * 1024));
    let mut protocol = MessageLog::new(rank, SIZE, incarnation, 1 << 24);
    if OPTIMISTIC.get() {
        protocol = protocol.optimistic();
    }
    let mut engine = Engine::new(rank, SIZE, config, transports, protocol);
    let world = Communicator::new(
        WORLD_CONTEXT,
        Arc::new((0..SIZE).collect()),
        rank,
        0,
        "world".into(),
    );
    let own = Communicator::new(1, Arc::new(vec![rank]), 0, 0, "self".into());
    engine.state.comms = vec![Some(world), Some(own)];
    engine.set_own_incarnation(incarnation);
    engine
}

/// Which program the ranks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Program {
    /// Rank 0 receives with ANY_SOURCE; the workers also talk to each other.
    Wildcards,
    /// Rank 0 polls: Iprobe(ANY_SOURCE) loops and a Testall loop.
    Polls,
}

/// One operation of the program, run to completion before the next.
enum Operation {
    Send {
        to: u32,
        tag: i32,
        bytes: Vec<u8>,
    },
    Receive {
        from: Option<u32>,
        tag: i32,
        capacity: usize,
    },
    /// MPI_Iprobe(ANY_SOURCE, tag) until it finds a message.
    ProbePoll {
        tag: i32,
    },
    /// Irecvs from each of `from` (their deliveries come in this order).
    PostReceives {
        from: Vec<u32>,
        tag: i32,
    },
    /// MPI_Testall over the posted receives until it says true.
    TestallPoll,
}

/// What a polling operation observed: the outcomes a replay must repeat.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// The message an Iprobe loop found, after `failed` failed Iprobes.
    Probed {
        source: u32,
        tag: i32,
        length_bytes: usize,
        failed: u64,
    },
    /// A Testall loop said true after `failed` false ones.
    Testall { failed: u64 },
}

impl Outcome {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Outcome::Probed {
                source,
                tag,
                length_bytes,
                failed,
            } => [
                &[1u8][..],
                &source.to_le_bytes(),
                &tag.to_le_bytes(),
                &(*length_bytes as u64).to_le_bytes(),
                &failed.to_le_bytes(),
            ]
            .concat(),
            Outcome::Testall { failed } => [&[2u8][..], &failed.to_le_bytes()].concat(),
        }
    }
}

/// A message as delivered: (source, tag, bytes).
type Delivery = (u32, i32, Vec<u8>);

/// A message as sent on one channel: (tag, bytes).
type Sent = (i32, Vec<u8>);

/// What a process ends with: its deliveries and its polls' outcomes.
type Ending = (Vec<Delivery>, Vec<Outcome>);

/// The program of `rank`: rank 0 takes one message per round from each of
/// ranks 1 and 2 with ANY_SOURCE and answers each with a hash of the
/// match order so far; ranks 1 and 2 send (eager or rendezvous, by round)
/// what depends on the answers they got, and pass a message round the
/// other way to each other. `pc` counts operations done; `history` is
/// what was delivered so far, `outcomes` what its polls observed.
fn operation(
    program: Program,
    rank: u32,
    pc: usize,
    history: &[Delivery],
    outcomes: &[Outcome],
) -> Option<Operation> {
    let hash = history.iter().fold(17u64, |hash, (source, tag, bytes)| {
        hash.wrapping_mul(31)
            .wrapping_add(u64::from(*source) * 7 + *tag as u64 + bytes.len() as u64)
            .wrapping_add(bytes.iter().map(|&byte| u64::from(byte)).sum::<u64>())
    });
    let payload = |length: usize| -> Vec<u8> {
        (0..length)
            .map(|index| (hash as usize ^ index ^ rank as usize) as u8)
            .collect()
    };
    if program == Program::Polls {
        return polls_operation(rank, pc, outcomes, payload);
    }
    if rank == 0 {
        // Per round: receive, receive, answer 1, answer 2.
        let round = (pc / 4) as u32;
        if round >= ROUNDS {
            return None;
        }
        let tag = round as i32;
        return Some(match pc % 4 {
            0 | 1 => Operation::Receive {
                from: None,
                tag,
                capacity: 4 * EAGER_LIMIT_BYTES,
            },
            step => Operation::Send {
                to: step as u32 - 1,
                tag,
                bytes: payload(8),
            },
        });
    }
    // Ranks 1 and 2, per round: send to 0, send to the other worker,
    // receive from the other worker, receive 0's answer.
    let round = (pc / 4) as u32;
    if round >= ROUNDS {
        return None;
    }
    let tag = round as i32;
    let other = 3 - rank;
    let length = if (round + rank).is_multiple_of(2) {
        16
    } else {
        3 * EAGER_LIMIT_BYTES
    };
    Some(match pc % 4 {
        0 => Operation::Send {
            to: 0,
            tag,
            bytes: payload(length),
        },
        1 => Operation::Send {
            to: other,
            tag: 100 + tag,
            bytes: payload(24),
        },
        2 => Operation::Receive {
            from: Some(other),
            tag: 100 + tag,
            capacity: 64,
        },
        _ => Operation::Receive {
            from: Some(0),
            tag,
            capacity: 64,
        },
    })
}

/// Rounds of [`Program::Polls`].
const POLL_ROUNDS: u32 = 5;

/// [`Program::Polls`]: per round, rank 0 polls with Iprobe(ANY_SOURCE,
/// round) until it finds a message and receives it from the source found,
/// twice; posts receives of one message from each worker (tag 50 +
/// round) and polls them with Testall; then answers each worker with
/// `payload` followed by the round's outcomes, verbatim. Each worker
/// sends rank 0 a message of the round (eager or rendezvous, by round),
/// then one of tag 50 + round, and takes its answer.
fn polls_operation(
    rank: u32,
    pc: usize,
    outcomes: &[Outcome],
    payload: impl Fn(usize) -> Vec<u8>,
) -> Option<Operation> {
    if rank == 0 {
        let round = (pc / 8) as u32;
        if round >= POLL_ROUNDS {
            return None;
        }
        let tag = round as i32;
        let probed_source = || match outcomes.last() {
            Some(Outcome::Probed { source, .. }) => Some(*source),
            _ => panic!("a receive after a probe that found nothing"),
        };
        return Some(match pc % 8 {
            0 | 2 => Operation::ProbePoll { tag },
            1 | 3 => Operation::Receive {
                from: probed_source(),
                tag,
                capacity: 4 * EAGER_LIMIT_BYTES,
            },
            4 => Operation::PostReceives {
                from: vec![1, 2],
                tag: 50 + tag,
            },
            5 => Operation::TestallPoll,
            step => {
                // Answers after the round's three outcomes, which they carry.
                let mut bytes = payload(8);
                for outcome in &outcomes[outcomes.len() - 3..] {
                    bytes.extend(outcome.bytes());
                }
                Operation::Send {
                    to: step as u32 - 5,
                    tag,
                    bytes,
                }
            }
        });
    }
    let round = (pc / 3) as u32;
    if round >= POLL_ROUNDS {
        return None;
    }
    let tag = round as i32;
    let length = if (round + rank).is_multiple_of(2) {
        16
    } else {
        3 * EAGER_LIMIT_BYTES
    };
    Some(match pc % 3 {
        0 => Operation::Send {
            to: 0,
            tag,
            bytes: payload(length),
        },
        1 => Operation::Send {
            to: 0,
            tag: 50 + tag,
            bytes: payload(24),
        },
        _ => Operation::Receive {
            from: Some(0),
            tag,
            capacity: 256,
        },
    })
}

/// One process: its engine, its place in the program, and what it got.
struct Process {
    program: Program,
    engine: Engine<MessageLog>,
    pc: usize,
    history: Vec<Delivery>,
    /// What its polls observed.
    outcomes: Vec<Outcome>,
    /// Failed polls of the polling operation in progress.
    failed_polls: u64,
    /// Receives posted by `PostReceives`: request and buffer.
    posted: Vec<(u32, Box<[u8]>)>,
    /// Deliveries and outcomes before its last completed send: stable
    /// (their determinants acked), so a replay must give them again.
    stable: (usize, usize),
    /// The operation in progress: its request and its buffer.
    current: Option<(u32, Box<[u8]>, bool)>,
    done: bool,
    /// Take a checkpoint at the start of every round (`Wildcards`).
    checkpoints: bool,
    /// Its newest checkpoint, as the disk keeps it.
    checkpoint: Option<Saved>,
}

/// A checkpoint: the engine's position and the program's state.
#[derive(Clone)]
struct Saved {
    position: CheckpointPosition,
    pc: usize,
    history: Vec<Delivery>,
    outcomes: Vec<Outcome>,
}

impl Process {
    fn new(program: Program, rank: u32, incarnation: u32) -> Process {
        Process {
            program,
            engine: engine(rank, incarnation),
            pc: 0,
            history: Vec::new(),
            outcomes: Vec::new(),
            failed_polls: 0,
            posted: Vec::new(),
            stable: (0, 0),
            current: None,
            done: false,
            checkpoints: false,
            checkpoint: None,
        }
    }

    /// The new incarnation of a rank that resumes from `saved`.
    fn resumed(program: Program, rank: u32, incarnation: u32, saved: &Saved) -> Process {
        let mut process = Process::new(program, rank, incarnation);
        process.engine.resume_from(&saved.position).expect("resume");
        process.engine.resume_collectives(&saved.position);
        process.pc = saved.pc;
        process.history = saved.history.clone();
        process.outcomes = saved.outcomes.clone();
        process.stable = (process.history.len(), process.outcomes.len());
        process.checkpoints = true;
        process.checkpoint = Some(saved.clone());
        process
    }

    /// At a round's start, a checkpoint if nothing is pending.
    fn maybe_checkpoint(&mut self) {
        if !self.checkpoints
            || self.pc == 0
            || !self.pc.is_multiple_of(4)
            || self
                .checkpoint
                .as_ref()
                .is_some_and(|saved| saved.pc == self.pc)
        {
            return;
        }
        let Ok(position) = self.engine.checkpoint_position("test-job") else {
            return;
        };
        self.engine.announce_checkpoint(&position);
        self.checkpoint = Some(Saved {
            position,
            pc: self.pc,
            history: self.history.clone(),
            outcomes: self.outcomes.clone(),
        });
    }

    /// One look of the polling operation in progress.
    fn poll(&mut self, operation: Operation) {
        match operation {
            Operation::ProbePoll { tag } => {
                let pattern = ReceivePattern {
                    context: WORLD_CONTEXT,
                    source: None,
                    tag: Some(tag),
                };
                match self
                    .engine
                    .probe(WORLD, pattern, false, false)
                    .expect("iprobe")
                {
                    ProbeLook::Found(found) => {
                        self.outcomes.push(Outcome::Probed {
                            source: found.envelope.source,
                            tag: found.envelope.tag,
                            length_bytes: found.length_bytes,
                            failed: std::mem::take(&mut self.failed_polls),
                        });
                        self.pc += 1;
                    }
                    ProbeLook::Missed => self.failed_polls += 1,
                    ProbeLook::Retry => {}
                }
            }
            Operation::PostReceives { from, tag } => {
                for source in from {
                    let mut buffer = vec![0u8; 64].into_boxed_slice();
                    let index = self
                        .engine
                        .start_receive(
                            WORLD,
                            buffer.as_mut_ptr(),
                            buffer.len(),
                            Some(source),
                            Some(tag),
                            WORLD_CONTEXT,
                        )
                        .expect("receive");
                    self.posted.push((index, buffer));
                }
                self.pc += 1;
            }
            Operation::TestallPoll => {
                let indices: Vec<u32> = self.posted.iter().map(|(index, _)| *index).collect();
                let flag = self
                    .engine
                    .test_flag_once(CompletionCall::Testall, indices.len(), |engine| {
                        indices.iter().all(|&index| {
                            engine
                                .state
                                .requests
                                .get(index)
                                .is_some_and(|request| request.complete)
                        })
                    })
                    .expect("testall");
                match flag {
                    Some(true) => {
                        for (index, buffer) in std::mem::take(&mut self.posted) {
                            let request = self.engine.state.requests.remove(index).expect("live");
                            let count = request.status.count_bytes;
                            self.history.push((
                                request.status.source as u32,
                                request.status.tag,
                                buffer[..count].to_vec(),
                            ));
                        }
                        self.outcomes.push(Outcome::Testall {
                            failed: std::mem::take(&mut self.failed_polls),
                        });
                        self.pc += 1;
                    }
                    Some(false) => self.failed_polls += 1,
                    None => {}
                }
            }
            _ => unreachable!("not a polling operation"),
        }
    }

    /// Start the next operation, or finish the current one if it is
    /// complete. True if anything changed.
    fn step(&mut self) -> bool {
        let rank = self.engine.state.rank;
        if let Some((index, buffer, is_receive)) = &self.current {
            let request = self
                .engine
                .state
                .requests
                .get(*index)
                .expect("live request");
            if !request.complete {
                return false;
            }
            assert_eq!(request.status.error, 0, "rank {rank}: operation failed");
            if *is_receive {
                let count = request.status.count_bytes;
                let source = request.status.source as u32;
                let tag = request.status.tag;
                self.history.push((source, tag, buffer[..count].to_vec()));
            } else {
                // Pessimistic: the send went out only once everything
                // before it was stable. Optimistic: only if it was, and
                // nothing of another rank it depends on could be lost
                // (else it may be rolled back past it).
                let protocol = &self.engine.state.interceptor;
                let stable_on_others =
                    !protocol.is_optimistic() || protocol.dependencies().is_stable_on_others();
                if protocol.determinants_acknowledged() == protocol.determinant_count()
                    && stable_on_others
                {
                    self.stable = (self.history.len(), self.outcomes.len());
                }
            }
            self.engine.state.requests.remove(*index);
            self.current = None;
            self.pc += 1;
            return true;
        }
        if self.done {
            return false;
        }
        self.maybe_checkpoint();
        match operation(self.program, rank, self.pc, &self.history, &self.outcomes) {
            None => self.done = true,
            Some(
                polling @ (Operation::ProbePoll { .. }
                | Operation::PostReceives { .. }
                | Operation::TestallPoll),
            ) => self.poll(polling),
            Some(Operation::Send { to, tag, bytes }) => {
                let destination = Destination {
                    peer: to,
                    context: WORLD_CONTEXT,
                    tag,
                };
                let buffer = bytes.into_boxed_slice();
                let index = self
                    .engine
                    .start_send(
                        WORLD,
                        destination,
                        buffer.as_ptr(),
                        buffer.len(),
                        SendMode::Standard,
                    )
                    .expect("send");
                self.current = Some((index, buffer, false));
            }
            Some(Operation::Receive {
                from,
                tag,
                capacity,
            }) => {
                let mut buffer = vec![0u8; capacity].into_boxed_slice();
                let index = self
                    .engine
                    .start_receive(
                        WORLD,
                        buffer.as_mut_ptr(),
                        capacity,
                        from,
                        Some(tag),
                        WORLD_CONTEXT,
                    )
                    .expect("receive");
                self.current = Some((index, buffer, true));
            }
        }
        true
    }
}

/// A run of the program under `seed`, with rank `victim` killed before
/// scheduler step `kill_at` (None: no kill). Its frames on the way are
/// delivered first (its last words) or lost, at random; the survivors are
/// told of the death at once, and of its new incarnation's re-join a
/// seeded number of steps later (meanwhile they go on without it).
/// Returns every rank's history and outcomes, and whether the kill happened.
fn run(program: Program, seed: u64, kill: Option<(u32, usize)>) -> (Vec<Ending>, bool) {
    let (endings, killed, _) = run_with(program, seed, kill, false, false);
    (endings, killed)
}

/// What a run with checkpoints did besides its endings.
#[derive(Debug, Default)]
struct CheckpointStats {
    /// The new incarnation resumed from a checkpoint (not from the start).
    resumed: bool,
    /// Payload bytes the survivors trimmed from their logs.
    trimmed_bytes: u64,
    /// Messages the survivors re-sent to the new incarnation.
    replayed: u64,
    /// With `lose_checkpoint`, or an orphan (optimistic): the error a
    /// process stopped with.
    refusal: Option<String>,
    /// Optimistic: `Depend` frames piggybacked, all processes together.
    piggybacked_frames: u64,
    /// Optimistic: orphans that rolled back (killed once their cut list
    /// was durable, and restarted).
    rollbacks: u64,
    /// The event logger's counters at the end.
    logger: LoggerCounters,
}

/// The faults of one run: sets of ranks killed together, each at a step
/// (a set whose ranks are not all alive then waits until they are), and
/// the event logger killed at a step (its unsynced batch lost, sometimes
/// half written) and restarted from its file.
#[derive(Clone, Debug, Default)]
struct Faults {
    kills: Vec<(Vec<u32>, usize)>,
    logger_at: Option<usize>,
}

/// [`run`], with every process taking checkpoints when `checkpoints`
/// (the killed one's new incarnation then resumes from its newest).
fn run_with(
    program: Program,
    seed: u64,
    kill: Option<(u32, usize)>,
    checkpoints: bool,
    lose_checkpoint: bool,
) -> (Vec<Ending>, bool, CheckpointStats) {
    let faults = Faults {
        kills: kill
            .map(|(victim, at)| (vec![victim], at))
            .into_iter()
            .collect(),
        logger_at: None,
    };
    run_faults(program, seed, &faults, checkpoints, lose_checkpoint)
}

/// The event logger as the harness runs it: its state machine, its file,
/// the batch written and not yet synced, and whether it is down.
struct Logger {
    state: EventLogger,
    file: Vec<u8>,
    unsynced: Option<Vec<u8>>,
    down_until: Option<usize>,
}

/// The logger's connection id for incarnation `incarnation` of `rank`.
fn connection(rank: usize, incarnation: u32) -> u64 {
    (u64::from(incarnation) << 32) | rank as u64
}

impl Logger {
    /// One step: take every live rank's frames, then either write the
    /// next batch or sync the one written (or neither), then answer.
    fn step(
        &mut self,
        processes: &mut [Process],
        incarnations: &[u32],
        dead: &[Option<usize>],
        random: &mut Random,
    ) {
        if self.down_until.is_some() {
            return;
        }
        for (rank, process) in processes.iter_mut().enumerate() {
            if dead[rank].is_some() {
                continue;
            }
            let from = connection(rank, incarnations[rank]);
            while let Some(bytes) = process.engine.state.interceptor.poll_logger_frame() {
                self.state.handle_frame(from, &bytes);
            }
        }
        match self.unsynced.take() {
            Some(batch) if random.below(2) == 0 => {
                self.file.extend_from_slice(&batch);
                self.state.handle_durable();
            }
            Some(batch) => self.unsynced = Some(batch),
            None => self.unsynced = self.state.poll_write(),
        }
        while let Some((to, bytes)) = self.state.poll_frame() {
            let rank = (to & 0xffff_ffff) as usize;
            if dead[rank].is_none() && connection(rank, incarnations[rank]) == to {
                processes[rank]
                    .engine
                    .state
                    .interceptor
                    .handle_logger_frame(&bytes);
            }
        }
    }

    /// Killed: what was written and not synced is lost (or half of it
    /// reached the file: a torn record); the next one reads the file back.
    fn kill(
        &mut self,
        step: usize,
        processes: &mut [Process],
        dead: &[Option<usize>],
        random: &mut Random,
    ) {
        if let Some(batch) = self.unsynced.take() {
            if random.below(2) == 0 {
                self.file.extend_from_slice(&batch[..batch.len() / 2]);
            }
        }
        let (state, length) = EventLogger::recover(&self.file).expect("the log reads back");
        self.file.truncate(length);
        self.state = state;
        for (rank, process) in processes.iter_mut().enumerate() {
            if dead[rank].is_none() {
                process.engine.state.interceptor.handle_logger_lost();
            }
        }
        self.down_until = Some(step + random.below(300) as usize);
    }
}

/// [`run_with`] with any [`Faults`].
fn run_faults(
    program: Program,
    seed: u64,
    faults: &Faults,
    checkpoints: bool,
    lose_checkpoint: bool,
) -> (Vec<Ending>, bool, CheckpointStats) {
    let mut stats = CheckpointStats::default();
    let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut processes: Vec<Process> = (0..SIZE)
        .map(|rank| {
            let mut process = Process::new(program, rank, 0);
            process.checkpoints = checkpoints;
            process.engine.state.interceptor.handle_logger_connected();
            process
        })
        .collect();
    let mut logger = Logger {
        state: match STORE_COUNT_MAX.get() {
            Some(count) => EventLogger::new().with_store_count_max(count),
            None => EventLogger::new(),
        },
        file: Vec::new(),
        unsynced: None,
        down_until: None,
    };
    let mut incarnations = vec![0u32; SIZE as usize];
    // Each victim's newest checkpoint when it died.
    let mut disks: Vec<Option<Saved>> = vec![None; SIZE as usize];
    // The network: per (from, to), frames in order.
    let mut channels: Vec<VecDeque<Vec<u8>>> = vec![VecDeque::new(); (SIZE * SIZE) as usize];
    let mut kills_done = 0;
    let mut logger_killed = false;
    // What each victim had delivered and observed before its last send:
    // its restarted incarnation must deliver and observe it again, exactly.
    let mut stable_before_kill: Vec<(u32, Ending)> = Vec::new();
    // Per rank while it is dead: the step its new incarnation joins.
    let mut dead: Vec<Option<usize>> = vec![None; SIZE as usize];
    let channel = |from: u32, to: u32| (from * SIZE + to) as usize;
    for step in 0..STEPS_MAX {
        // An orphan (optimistic) that cannot roll back stops the run: its
        // error is the result.
        let orphan = processes.iter().enumerate().find_map(|(rank, process)| {
            let protocol = &process.engine.state.interceptor;
            (dead[rank].is_none()
                && protocol.is_orphan()
                && protocol.rollback_keep_count().is_none())
            .then(|| protocol.report_lines().join("; "))
        });
        if let Some(line) = orphan {
            stats.refusal = Some(line);
            return (Vec::new(), kills_done > 0, stats);
        }
        let all_done = dead.iter().all(Option::is_none)
            && kills_done == faults.kills.len()
            && processes.iter().all(|process| process.done)
            && channels.iter().all(VecDeque::is_empty);
        if all_done {
            for (victim, (history, outcomes)) in &stable_before_kill {
                let restarted = &processes[*victim as usize];
                assert!(
                    restarted.history.starts_with(history)
                        && restarted.outcomes.starts_with(outcomes),
                    "seed {seed} faults {faults:?}: rank {victim}'s deliveries or outcomes \
                     differ from what an earlier incarnation had before its last send"
                );
            }
            for process in &processes {
                let counters = process.engine.state.interceptor.report_counters();
                stats.trimmed_bytes += counters
                    .iter()
                    .find(|(name, _)| *name == "msglog_trimmed_bytes")
                    .map_or(0, |(_, value)| *value);
                stats.replayed += process.engine.state.messages_replayed;
                stats.piggybacked_frames += counters
                    .iter()
                    .find(|(name, _)| *name == "msglog_piggybacked_frames")
                    .map_or(0, |(_, value)| *value);
            }
            stats.logger = logger.state.counters;
            return (
                processes
                    .into_iter()
                    .map(|process| (process.history, process.outcomes))
                    .collect(),
                !faults.kills.is_empty() && kills_done == faults.kills.len(),
                stats,
            );
        }
        // Kills due at the logger's step wait, with it, until it has a
        // batch written and not synced: the moment its death loses most.
        // (Once every program is done no batch comes: they go then.)
        let batch_in_flight =
            logger.unsynced.is_some() || processes.iter().all(|process| process.done);
        let with_logger = |at: usize| !logger_killed && faults.logger_at == Some(at);
        let due = faults.kills.get(kills_done).filter(|(victims, at)| {
            step >= *at
                && victims
                    .iter()
                    .all(|&victim| dead[victim as usize].is_none())
                && (!with_logger(*at) || batch_in_flight)
        });
        // Orphans whose rollback is durable die now (the library exits
        // them), as a set of victims of their own.
        let rolled_back: Vec<u32> = (0..SIZE)
            .filter(|&rank| {
                dead[rank as usize].is_none()
                    && processes[rank as usize]
                        .engine
                        .state
                        .interceptor
                        .rollback_ready()
            })
            .collect();
        let victims = match due.cloned() {
            Some((victims, _)) => {
                kills_done += 1;
                Some(victims)
            }
            None if !rolled_back.is_empty() => {
                stats.rollbacks += rolled_back.len() as u64;
                Some(rolled_back)
            }
            None => None,
        };
        if let Some(victims) = victims {
            let is_victim = |rank: u32| victims.contains(&rank);
            for &victim in &victims {
                let first = &processes[victim as usize];
                disks[victim as usize] = first.checkpoint.clone();
                if first.engine.state.interceptor.rollback_ready() {
                    // An orphan replays less than it had done: no prefix.
                    continue;
                }
                let (deliveries, outcomes) = first.stable;
                stable_before_kill.push((
                    victim,
                    (
                        first.history[..deliveries].to_vec(),
                        first.outcomes[..outcomes].to_vec(),
                    ),
                ));
            }
            if random.below(2) == 0 {
                // Their last words reach the survivors before the deaths.
                for &victim in &victims {
                    for to in (0..SIZE).filter(|&to| !is_victim(to) && dead[to as usize].is_none())
                    {
                        let memory = processes[to as usize]
                            .engine
                            .transports
                            .memory
                            .as_mut()
                            .expect("memory");
                        for frame in channels[channel(victim, to)].drain(..) {
                            memory.push_incoming(victim, frame);
                        }
                        processes[to as usize]
                            .engine
                            .progress()
                            .expect("last words");
                    }
                }
            }
            // What was on the way to or from them dies with them: the
            // channels, and what the survivors' paths hold for them (a
            // socket or ring to a dead process; the new one is reached
            // anew).
            for from in 0..SIZE {
                for &victim in &victims {
                    channels[channel(from, victim)].clear();
                    channels[channel(victim, from)].clear();
                }
                if is_victim(from) || dead[from as usize].is_some() {
                    continue;
                }
                let memory = processes[from as usize]
                    .engine
                    .transports
                    .memory
                    .as_mut()
                    .expect("memory");
                while let Some((to, frame)) = memory.take_outgoing() {
                    if !is_victim(to) && dead[to as usize].is_none() {
                        channels[channel(from, to)].push_back(frame);
                    }
                }
            }
            for (rank, process) in processes.iter_mut().enumerate() {
                if !is_victim(rank as u32) && dead[rank].is_none() {
                    for &victim in &victims {
                        process.engine.handle_peer_failure(victim);
                    }
                }
            }
            for &victim in &victims {
                dead[victim as usize] = Some(step + random.below(400) as usize);
                // Its socket to the logger closes, at once or when its
                // replacement connects.
                if random.below(2) == 0 && logger.down_until.is_none() {
                    let from = connection(victim as usize, incarnations[victim as usize]);
                    logger.state.handle_closed(from);
                }
            }
        }
        let logger_due = faults.logger_at.is_some_and(|at| {
            step >= at
                && (batch_in_flight || !faults.kills.iter().any(|(_, kill_at)| *kill_at == at))
        });
        if logger_due && !logger_killed {
            logger_killed = true;
            logger.kill(step, &mut processes, &dead, &mut random);
        }
        if logger.down_until.is_some_and(|until| step >= until) {
            logger.down_until = None;
            for (rank, process) in processes.iter_mut().enumerate() {
                if dead[rank].is_none() {
                    process.engine.state.interceptor.handle_logger_connected();
                }
            }
        }
        for victim in 0..SIZE {
            let Some(rejoin_at) = dead[victim as usize] else {
                continue;
            };
            if step < rejoin_at {
                continue;
            }
            dead[victim as usize] = None;
            // Closed now if it was not at the death (a no-op if it was).
            logger
                .state
                .handle_closed(connection(victim as usize, incarnations[victim as usize]));
            incarnations[victim as usize] += 1;
            let incarnation = incarnations[victim as usize];
            if lose_checkpoint {
                disks[victim as usize] = None;
            }
            let mut replacement = match &disks[victim as usize] {
                Some(saved) => {
                    stats.resumed = true;
                    Process::resumed(program, victim, incarnation, saved)
                }
                None => Process::new(program, victim, incarnation),
            };
            // It hears of the ranks still dead, and of the incarnations of
            // those replaced, as a replacement does from the launcher.
            for other in 0..SIZE {
                if dead[other as usize].is_some() {
                    replacement.engine.handle_peer_failure(other);
                } else if other != victim {
                    replacement
                        .engine
                        .assume_peer_incarnation(other, incarnations[other as usize]);
                }
            }
            if logger.down_until.is_none() {
                replacement
                    .engine
                    .state
                    .interceptor
                    .handle_logger_connected();
            }
            processes[victim as usize] = replacement;
            for (rank, process) in processes.iter_mut().enumerate() {
                if rank as u32 != victim && dead[rank].is_none() {
                    assert!(process
                        .engine
                        .handle_peer_rejoin(victim, incarnation, Route::Memory));
                }
            }
        }
        let rank = random.below(u64::from(SIZE)) as usize;
        if dead[rank].is_some() {
            continue;
        }
        match random.below(4) {
            0 => {
                processes[rank].step();
            }
            1 => {
                if let Err(error) = processes[rank].engine.progress() {
                    let protocol = &processes[rank].engine.state.interceptor;
                    if lose_checkpoint
                        || (protocol.is_orphan() && protocol.rollback_keep_count().is_none())
                    {
                        stats.refusal = Some(error.message.clone());
                        return (Vec::new(), kills_done > 0, stats);
                    }
                    panic!("seed {seed}: rank {rank} progress: {error:?}");
                }
                let memory = processes[rank]
                    .engine
                    .transports
                    .memory
                    .as_mut()
                    .expect("memory");
                while let Some((to, frame)) = memory.take_outgoing() {
                    if dead[to as usize].is_some() {
                        continue;
                    }
                    channels[channel(rank as u32, to)].push_back(frame);
                }
            }
            2 => {
                // Deliver the oldest frame of one channel into `rank`.
                let from = random.below(u64::from(SIZE)) as u32;
                if let Some(frame) = channels[channel(from, rank as u32)].pop_front() {
                    let memory = processes[rank]
                        .engine
                        .transports
                        .memory
                        .as_mut()
                        .expect("memory");
                    memory.push_incoming(from, frame);
                }
            }
            _ => logger.step(&mut processes, &incarnations, &dead, &mut random),
        }
    }
    let stuck: Vec<(u32, usize, bool)> = processes
        .iter()
        .map(|process| (process.engine.state.rank, process.pc, process.done))
        .collect();
    panic!("seed {seed} faults {faults:?}: no end after {STEPS_MAX} steps: {stuck:?}");
}

/// The oracle: the histories are those of *some* run without a fault.
/// Each rank's program is run again on its own history (every receive
/// takes the next delivery, which must fit the receive); what that makes
/// each rank send to each other must be exactly, in order, what the other
/// delivered from it: nothing lost, nothing twice, no answer computed
/// from matches other than those the receiver's final history shows.
fn check_consistent(program: Program, endings: &[Ending]) -> Result<(), String> {
    let mut sent: Vec<Vec<Vec<Sent>>> = vec![vec![Vec::new(); SIZE as usize]; SIZE as usize];
    for rank in 0..SIZE {
        let (history, outcomes) = &endings[rank as usize];
        let mut taken = 0;
        let mut used = 0;
        let mut posted: Vec<(u32, i32)> = Vec::new();
        let mut pc = 0;
        let delivery = |taken: usize, pc: usize| {
            history
                .get(taken)
                .ok_or_else(|| format!("rank {rank}: its program ends early, at operation {pc}"))
        };
        while let Some(operation) =
            operation(program, rank, pc, &history[..taken], &outcomes[..used])
        {
            match operation {
                Operation::Send { to, tag, bytes } => {
                    sent[rank as usize][to as usize].push((tag, bytes))
                }
                Operation::Receive { from, tag, .. } => {
                    let (source, got_tag, _) = delivery(taken, pc)?;
                    if *got_tag != tag || from.is_some_and(|from| from != *source) {
                        return Err(format!(
                            "rank {rank}: delivery {taken} does not fit its receive"
                        ));
                    }
                    taken += 1;
                }
                Operation::ProbePoll { tag } => {
                    // What the probe found must be what the next receive
                    // (from that source, with that tag) delivered.
                    let Some(Outcome::Probed {
                        source,
                        tag: found_tag,
                        length_bytes,
                        ..
                    }) = outcomes.get(used)
                    else {
                        return Err(format!("rank {rank}: outcome {used} is not a probe's"));
                    };
                    let (next_source, next_tag, bytes) = delivery(taken, pc)?;
                    if (*found_tag, *length_bytes) != (tag, bytes.len())
                        || (next_source, next_tag) != (source, found_tag)
                    {
                        return Err(format!(
                            "rank {rank}: probe outcome {used} is not the message received next"
                        ));
                    }
                    used += 1;
                }
                Operation::PostReceives { from, tag } => {
                    posted.extend(from.into_iter().map(|source| (source, tag)))
                }
                Operation::TestallPoll => {
                    let Some(Outcome::Testall { .. }) = outcomes.get(used) else {
                        return Err(format!("rank {rank}: outcome {used} is not Testall's"));
                    };
                    for (source, tag) in std::mem::take(&mut posted) {
                        let (got_source, got_tag, _) = delivery(taken, pc)?;
                        if (*got_source, *got_tag) != (source, tag) {
                            return Err(format!(
                                "rank {rank}: delivery {taken} does not fit its posted receive"
                            ));
                        }
                        taken += 1;
                    }
                    used += 1;
                }
            }
            pc += 1;
        }
        if taken != history.len() || used != outcomes.len() {
            return Err(format!(
                "rank {rank}: {} deliveries and {} outcomes more than its program takes",
                history.len() - taken,
                outcomes.len() - used
            ));
        }
    }
    for (receiver, (history, _)) in endings.iter().enumerate() {
        for (sender, sent_by) in sent.iter().enumerate() {
            let delivered: Vec<Sent> = history
                .iter()
                .filter(|(source, _, _)| *source as usize == sender)
                .map(|(_, tag, bytes)| (*tag, bytes.clone()))
                .collect();
            if delivered != sent_by[receiver] {
                return Err(format!(
                    "rank {receiver} delivered {} messages from rank {sender}, which sent {} (or their contents differ)",
                    delivered.len(),
                    sent_by[receiver].len()
                ));
            }
        }
    }
    Ok(())
}

/// Runs of `program` without a kill are consistent, and what rank 0
/// observes differs between seeds (else a replay would prove nothing).
fn without_a_kill(program: Program) {
    let (first, _) = run(program, 1, None);
    check_consistent(program, &first).unwrap();
    let mut differing = 0;
    for seed in 2..40 {
        let (endings, _) = run(program, seed, None);
        check_consistent(program, &endings)
            .unwrap_or_else(|problem| panic!("seed {seed}: {problem}"));
        differing += usize::from(endings[0] != first[0]);
    }
    assert!(
        differing > 0,
        "rank 0's observations never changed: the test would prove nothing"
    );
}

/// `program` with each rank killed at seeded steps of `seeds` runs:
/// every run consistent; returns how many kills happened.
fn with_kills(program: Program, seeds: std::ops::Range<u64>, steps: &[usize]) -> usize {
    let mut kills = 0;
    for seed in seeds {
        for victim in 0..SIZE {
            for &kill_at in steps {
                let (endings, killed) = run(program, seed, Some((victim, kill_at)));
                check_consistent(program, &endings).unwrap_or_else(|problem| {
                    panic!("seed {seed}, rank {victim} killed at step {kill_at}: {problem}")
                });
                kills += usize::from(killed);
            }
        }
    }
    kills
}

#[test]
fn without_a_kill_every_seed_is_consistent_and_the_matches_differ_between_seeds() {
    without_a_kill(Program::Wildcards);
}

#[test]
fn a_rank_killed_at_any_step_replays_into_a_run_without_the_fault() {
    let kills = with_kills(
        Program::Wildcards,
        0..60,
        &[5, 40, 150, 400, 900, 1600, 3000],
    );
    assert!(kills > 900, "only {kills} of 1260 runs reached their kill");
}

#[test]
fn without_a_kill_the_polling_program_is_consistent_and_its_outcomes_differ_between_seeds() {
    without_a_kill(Program::Polls);
}

#[test]
fn a_rank_killed_while_it_polls_with_iprobe_and_testall_replays_the_same_outcomes() {
    let kills = with_kills(Program::Polls, 0..60, &[5, 40, 150, 400, 900, 1600, 3000]);
    assert!(kills > 900, "only {kills} of 1260 runs reached their kill");
}

#[test]
fn a_rank_killed_after_a_checkpoint_resumes_from_its_position() {
    let mut kills = 0;
    let mut resumed = 0;
    let mut trimmed_bytes = 0;
    let mut replayed_from_checkpoints = 0;
    let mut replayed_from_the_start = 0;
    for seed in 0..40 {
        for victim in 0..SIZE {
            for kill_at in [400, 900, 1600, 3000] {
                let (endings, killed, stats) = run_with(
                    Program::Wildcards,
                    seed,
                    Some((victim, kill_at)),
                    true,
                    false,
                );
                check_consistent(Program::Wildcards, &endings).unwrap_or_else(|problem| {
                    panic!("seed {seed}, rank {victim} killed at step {kill_at} after a checkpoint: {problem}")
                });
                kills += usize::from(killed);
                resumed += usize::from(stats.resumed);
                trimmed_bytes += stats.trimmed_bytes;
                if stats.resumed {
                    replayed_from_checkpoints += stats.replayed;
                    let (_, _, from_start) = run_with(
                        Program::Wildcards,
                        seed,
                        Some((victim, kill_at)),
                        false,
                        false,
                    );
                    replayed_from_the_start += from_start.replayed;
                }
            }
        }
    }
    assert!(kills > 300, "only {kills} of 480 runs reached their kill");
    assert!(
        resumed > 200,
        "only {resumed} restarts resumed from a checkpoint"
    );
    assert!(trimmed_bytes > 0, "no sender ever trimmed its log");
    assert!(
        replayed_from_checkpoints < replayed_from_the_start,
        "resuming re-sent {replayed_from_checkpoints} messages, from the start {replayed_from_the_start}"
    );
}

#[test]
fn a_checkpoint_with_a_request_pending_has_no_position() {
    let mut process = Process::new(Program::Wildcards, 1, 0);
    let mut buffer = [0u8; 8];
    process
        .engine
        .start_receive(
            WORLD,
            buffer.as_mut_ptr(),
            8,
            Some(2),
            Some(0),
            WORLD_CONTEXT,
        )
        .expect("receive");
    let refusal = process.engine.checkpoint_position("job").unwrap_err();
    assert!(refusal.contains("pending"), "{refusal}");
}

#[test]
fn a_replacement_without_its_checkpoint_is_refused_with_the_missing_range_named() {
    // Its peers trimmed what its checkpoints covered; started from the
    // beginning (its checkpoint lost), it would need those messages.
    let mut refusals = 0;
    for seed in 0..10 {
        let (_, killed, stats) = run_with(Program::Wildcards, seed, Some((1, 900)), true, true);
        if !killed || stats.trimmed_bytes == 0 && stats.refusal.is_none() {
            continue;
        }
        let refusal = stats.refusal.unwrap_or_else(|| {
            panic!("seed {seed}: the replacement replayed with the trimmed messages missing")
        });
        assert!(
            refusal.contains("messages 1 to ") && refusal.contains("are missing"),
            "{refusal}"
        );
        refusals += 1;
    }
    assert!(refusals > 5, "only {refusals} runs reached the kill");
}

#[test]
fn a_resumed_rank_that_communicates_before_its_restart_is_refused_with_an_error() {
    let mut original = Process::new(Program::Wildcards, 1, 0);
    let position = original
        .engine
        .checkpoint_position("job")
        .expect("position");
    let mut replacement = Process::new(Program::Wildcards, 1, 1);
    replacement.engine.resume_from(&position).expect("resume");
    let mut buffer = [0u8; 8];
    let refusal = replacement
        .engine
        .start_receive(
            WORLD,
            buffer.as_mut_ptr(),
            8,
            Some(2),
            Some(0),
            WORLD_CONTEXT,
        )
        .unwrap_err();
    assert!(
        refusal.message.contains("before VELOC_Restart"),
        "{refusal:?}"
    );
    // After the restart (the collective counters set) it may.
    replacement.engine.resume_collectives(&position);
    replacement
        .engine
        .start_receive(
            WORLD,
            buffer.as_mut_ptr(),
            8,
            Some(2),
            Some(0),
            WORLD_CONTEXT,
        )
        .expect("receive after the restart");
}

/// Every run of `program` under `faults(seed, step)` is consistent;
/// returns how many runs had all their kills happen.
fn with_faults(
    program: Program,
    seeds: std::ops::Range<u64>,
    steps: &[usize],
    faults: impl Fn(u64, usize) -> Faults,
) -> (usize, LoggerCounters) {
    let mut complete = 0;
    let mut logger_total = LoggerCounters::default();
    for seed in seeds {
        for &step in steps {
            let plan = faults(seed, step);
            let (endings, killed, stats) = run_faults(program, seed, &plan, false, false);
            check_consistent(program, &endings)
                .unwrap_or_else(|problem| panic!("seed {seed}, {plan:?}: {problem}"));
            complete += usize::from(killed);
            logger_total.determinants_recovered += stats.logger.determinants_recovered;
            logger_total.batches_synced += stats.logger.batches_synced;
            logger_total.determinants_stored += stats.logger.determinants_stored;
            assert_eq!(stats.logger.protocol_errors, 0, "seed {seed}, {plan:?}");
        }
    }
    (complete, logger_total)
}

#[test]
fn two_ranks_killed_together_both_replay_into_a_run_without_the_fault() {
    for program in [Program::Wildcards, Program::Polls] {
        // Every pair, each the other's neighbour (with 3 ranks every
        // pair is), at the same step.
        let (runs, logger) = with_faults(program, 0..20, &[5, 150, 900, 3000], |seed, step| {
            let first = (seed % u64::from(SIZE)) as u32;
            Faults {
                kills: vec![(vec![first, (first + 1) % SIZE], step)],
                logger_at: None,
            }
        });
        assert!(runs > 60, "only {runs} of 80 runs reached their kills");
        assert!(logger.determinants_stored > 0);
    }
}

#[test]
fn the_event_logger_killed_and_restarted_from_its_file_loses_nothing_acked() {
    for program in [Program::Wildcards, Program::Polls] {
        let (runs, logger) = with_faults(program, 0..30, &[40, 400, 1600], |seed, step| Faults {
            // A rank dies after the logger did: its replay must come
            // from what the restarted logger read back.
            kills: vec![(vec![(seed % u64::from(SIZE)) as u32], step + 300)],
            logger_at: Some(step),
        });
        assert!(
            logger.determinants_recovered > 0,
            "no restarted logger read anything back: the test would prove nothing"
        );
        assert!(runs > 60, "only {runs} of 90 runs reached their kill");
    }
}

#[test]
fn a_rank_and_the_event_logger_killed_together_replay_only_what_was_synced() {
    // What the logger had written but not synced dies with it; the rank
    // dies at the same step, so nothing re-sends it: its replay is what
    // the file held, which must be all it ever let a send depend on.
    for program in [Program::Wildcards, Program::Polls] {
        // Rank 0 is the one whose matches and polls are determinants.
        let (runs, _) = with_faults(program, 0..40, &[40, 150, 400, 900, 1600], |_, step| {
            Faults {
                kills: vec![(vec![0], step)],
                logger_at: Some(step),
            }
        });
        assert!(runs > 150, "only {runs} of 200 runs reached their kill");
    }
}

#[test]
fn the_same_rank_killed_twice_replays_both_times() {
    for program in [Program::Wildcards, Program::Polls] {
        let (runs, _) = with_faults(program, 0..20, &[40, 900], |seed, step| {
            let victim = (seed % u64::from(SIZE)) as u32;
            Faults {
                kills: vec![(vec![victim], step), (vec![victim], step + 700)],
                logger_at: None,
            }
        });
        assert!(runs > 20, "only {runs} of 40 runs reached both kills");
    }
}

/// Run `body` with this thread's processes logging optimistically and the
/// logger storing at most `store_count_max` determinants per rank.
fn optimistic<T>(store_count_max: Option<usize>, body: impl FnOnce() -> T) -> T {
    OPTIMISTIC.set(true);
    STORE_COUNT_MAX.set(store_count_max);
    let result = body();
    OPTIMISTIC.set(false);
    STORE_COUNT_MAX.set(None);
    result
}

#[test]
fn optimistic_without_a_kill_every_seed_is_consistent_and_dependencies_travel() {
    optimistic(None, || {
        for program in [Program::Wildcards, Program::Polls] {
            without_a_kill(program);
            let piggybacked: u64 = (0..20)
                .map(|seed| run_faults(program, seed, &Faults::default(), false, false).2)
                .map(|stats| stats.piggybacked_frames)
                .sum();
            // Sends went before their determinants were acked, with them.
            assert!(piggybacked > 0, "{program:?}: nothing was ever piggybacked");
        }
    });
}

/// Every run of `program` with each rank killed at each step ends
/// consistent (an orphan, if any, rolled back); returns (runs consistent
/// with their kill done, runs in which an orphan rolled back).
fn optimistic_with_kills(
    program: Program,
    seeds: std::ops::Range<u64>,
    steps: &[usize],
) -> (usize, usize) {
    let (mut consistent, mut rolled_back) = (0, 0);
    for seed in seeds {
        for victim in 0..SIZE {
            for &kill_at in steps {
                let faults = Faults {
                    kills: vec![(vec![victim], kill_at)],
                    logger_at: None,
                };
                let (endings, killed, stats) = run_faults(program, seed, &faults, false, false);
                assert_eq!(
                    stats.refusal, None,
                    "seed {seed}, rank {victim} killed at {kill_at}"
                );
                check_consistent(program, &endings).unwrap_or_else(|problem| {
                    panic!("seed {seed}, rank {victim} killed at step {kill_at}: {problem}")
                });
                consistent += usize::from(killed);
                rolled_back += usize::from(stats.rollbacks > 0);
            }
        }
    }
    (consistent, rolled_back)
}

#[test]
fn optimistic_a_rank_killed_at_any_step_replays_into_a_run_without_the_fault() {
    optimistic(None, || {
        for program in [Program::Wildcards, Program::Polls] {
            let (consistent, rolled_back) =
                optimistic_with_kills(program, 0..30, &[5, 40, 150, 400, 900, 1600, 3000]);
            assert!(
                consistent > 400,
                "{program:?}: only {consistent} of 630 runs recovered ({rolled_back} rolled back)"
            );
        }
    });
}

#[test]
fn optimistic_a_survivor_that_depended_on_a_lost_determinant_rolls_back_into_a_run_without_the_fault(
) {
    // The logger keeps only rank 0's first two determinants: the rest of
    // its wildcard matches (and polls) are never stable, and its answers
    // carry them to the workers. Killing rank 0 then leaves them orphans:
    // its replacement replays two matches and is free to match the rest
    // in another order than the one the workers' values were computed
    // from. Each orphan must roll back (cut its list, die, replay), and
    // every run must end with histories some fault-free run has.
    optimistic(Some(2), || {
        for program in [Program::Wildcards, Program::Polls] {
            let mut rolled_back = 0;
            for seed in 0..20 {
                for kill_at in [1600, 3000, 5000] {
                    let faults = Faults {
                        kills: vec![(vec![0], kill_at)],
                        logger_at: None,
                    };
                    let (endings, killed, stats) = run_faults(program, seed, &faults, false, false);
                    assert_eq!(
                        stats.refusal, None,
                        "seed {seed}, rank 0 killed at {kill_at}"
                    );
                    assert!(!killed || endings.len() == SIZE as usize);
                    check_consistent(program, &endings).unwrap_or_else(|problem| {
                        panic!("seed {seed}, rank 0 killed at {kill_at}: {problem}")
                    });
                    rolled_back += usize::from(stats.rollbacks > 0);
                }
            }
            assert!(
                rolled_back > 30,
                "{program:?}: only {rolled_back} of 60 runs rolled an orphan back"
            );
        }
    });
}

#[test]
fn optimistic_two_ranks_killed_together_roll_their_orphans_back() {
    // Rank 0 (its matches mostly lost) and a worker die together: the
    // other workers are orphans of rank 0, and the dead worker's
    // replacement is one too if it replays past what rank 0's
    // replacement will send it.
    optimistic(Some(2), || {
        for program in [Program::Wildcards, Program::Polls] {
            let mut rolled_back = 0;
            for seed in 0..15 {
                for kill_at in [1600, 3000] {
                    let faults = Faults {
                        kills: vec![(vec![0, 1 + (seed % 2) as u32], kill_at)],
                        logger_at: None,
                    };
                    let (endings, _, stats) = run_faults(program, seed, &faults, false, false);
                    assert_eq!(stats.refusal, None, "seed {seed}, killed at {kill_at}");
                    check_consistent(program, &endings).unwrap_or_else(|problem| {
                        panic!("seed {seed}, ranks killed at {kill_at}: {problem}")
                    });
                    rolled_back += usize::from(stats.rollbacks > 0);
                }
            }
            assert!(
                rolled_back > 10,
                "{program:?}: only {rolled_back} of 30 runs rolled an orphan back"
            );
        }
    });
}
