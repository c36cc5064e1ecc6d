//! A replicated job: N ranks × R replicas, each process running the
//! production [`resmpi_replication::Replica`] under a seeded scheduler, with
//! processes killed at any step.
//!
//! Why here: SDR-MPI's claims (every live replica gets every message
//! exactly once and in order, a replica's death is masked, no send waits
//! for ever) are about interleavings of data, acks and failure notices.
//! The scheduler picks, at every step, one of: deliver the head of a
//! random FIFO channel (data or ack), deliver a due failure notice, or run
//! one program step of a random process. A kill planned at step `s` removes
//! a process before step `s`: it may die between its data and its ack,
//! mid re-send as a substitute, or before it made a send its sibling made.
//! Frames a dead process sent stay in flight until their receiver handles
//! its notice (then they are dropped), as the engine does.
//!
//! With `recovery`, the substitute of a dead replica forks a new one (a
//! scheduler move of its own, at any step after it handled the death): the
//! new process is a copy of the forker's (protocol, application, inbox,
//! undelivered notices) with the next incarnation, and every other live
//! process gets a re-join notice. Notices reach each process in the order
//! they were sent (the launcher's one connection per process), and frames
//! carry the incarnations of both ends: a frame for an older incarnation,
//! or from one whose death the receiver handled, is dropped.
//!
//! `RESMPI_SIM_TRACE` set prints every move, frame and protocol action on
//! stderr (to follow one failing seed).
//!
//! The program is send-deterministic, like the C test program of
//! `tests/test_replication.py`: every round each rank starts a nonblocking
//! send to its right neighbour (so several sends are pending at a
//! substitute's take-over), sends to it blocking and receives from its
//! left one (named source); then every
//! rank but 0 sends to rank 0, which takes N-1 messages with ANY_SOURCE in
//! whatever order they come (each replica may see another order) and
//! records their sum; last, each rank takes the nonblocking message and
//! waits for its own nonblocking sends. The oracle ([`ReplicationOutcome::violations`])
//! compares every live replica's application trace with the fault-free
//! one computed from the program alone.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use resmpi_replication::{Action, Arrival, ForkCut, Process, Replica, SendId};

use crate::rng::{mix64, SplitMix64};

/// Most scheduler steps a job may take before it counts as hung.
pub const STEPS_MAX: u64 = 1_000_000;

/// Most steps between a death and its notice reaching a process.
pub const NOTICE_DELAY_STEPS_MAX: u64 = 40;

/// A planned kill: `process` dies just before scheduler step `at_step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedKill {
    /// Who dies.
    pub process: Process,
    /// Before which step.
    pub at_step: u64,
}

/// One replicated job to run.
#[derive(Clone, Debug)]
pub struct ReplicationJob {
    /// Ranks.
    pub rank_count: u32,
    /// Replicas per rank.
    pub replica_count: u32,
    /// Rounds of the program.
    pub rounds: u32,
    /// Kills, in any order. A kill of a replica that was recovered kills
    /// its new incarnation.
    pub kills: Vec<PlannedKill>,
    /// Seed of the scheduler.
    pub seed: u64,
    /// The substitute of a dead replica forks a new one
    /// (`--replica-recovery now`).
    pub recovery: bool,
}

/// What a process's application saw, in program order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEntry {
    /// A named-source receive got `value` from `source`.
    Received {
        /// Source rank.
        source: u32,
        /// The message's content.
        value: u64,
    },
    /// Rank 0's ANY_SOURCE receives of one round: the sum of the values.
    AnySourceSum(u64),
}

/// The end of a replicated job.
#[derive(Clone, Debug)]
pub struct ReplicationOutcome {
    /// Scheduler steps taken.
    pub steps: u64,
    /// Per live process at the end: its application trace.
    pub traces: BTreeMap<Process, Vec<TraceEntry>>,
    /// Ranks some process reported lost (every replica dead).
    pub lost_ranks: BTreeSet<u32>,
    /// Copies a substitute re-sent that were dropped as duplicates.
    pub duplicates_dropped: u64,
    /// Replicas forked (recovered).
    pub forks: u64,
    /// Whether some rank really had every replica dead at once (then the
    /// job may end early, reporting it lost).
    pub rank_really_lost: bool,
    /// Broken invariants (empty when the run is correct).
    pub violations: Vec<String>,
}

/// One operation of the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Send {
        destination: u32,
        tag: u32,
        value: u64,
    },
    Receive {
        source: u32,
        tag: u32,
    },
    ReceiveAny {
        tag: u32,
        count: u32,
    },
    /// A nonblocking send: started, completed later (several may be
    /// pending at once, which is what a substitute's take-over re-sends).
    Isend {
        destination: u32,
        tag: u32,
        value: u64,
    },
    /// Wait for every nonblocking send.
    WaitAll,
}

/// Tag of the nonblocking messages to the right neighbour.
const HALO_TAG: u32 = 1_000_000;

/// Tag of the ring messages.
const RING_TAG: u32 = 0;
/// Tag of the messages to rank 0 taken with ANY_SOURCE, plus the round
/// (which keeps one round's wildcard receives from taking the next round's
/// messages, as the barrier does in the C test program).
const GATHER_TAG: u32 = 1;

/// The content of message `index` of a round from `source`: derived, so
/// the oracle needs no record of what was sent.
fn message_value(source: u32, round: u32, index: u32) -> u64 {
    mix64((u64::from(source) << 40) ^ (u64::from(round) << 8) ^ u64::from(index)) >> 16
}

/// The program of `rank` (the same in every replica).
fn program(rank: u32, rank_count: u32, rounds: u32) -> Vec<Operation> {
    let right = (rank + 1) % rank_count;
    let left = (rank + rank_count - 1) % rank_count;
    let mut operations = Vec::new();
    for round in 0..rounds {
        operations.push(Operation::Isend {
            destination: right,
            tag: HALO_TAG,
            value: message_value(rank, round, 2),
        });
        operations.push(Operation::Send {
            destination: right,
            tag: RING_TAG,
            value: message_value(rank, round, 0),
        });
        operations.push(Operation::Receive {
            source: left,
            tag: RING_TAG,
        });
        if rank == 0 {
            if rank_count > 1 {
                operations.push(Operation::ReceiveAny {
                    tag: GATHER_TAG + round,
                    count: rank_count - 1,
                });
            }
        } else {
            operations.push(Operation::Send {
                destination: 0,
                tag: GATHER_TAG + round,
                value: message_value(rank, round, 1),
            });
        }
        operations.push(Operation::Receive {
            source: left,
            tag: HALO_TAG,
        });
        operations.push(Operation::WaitAll);
    }
    operations
}

/// The fault-free trace of `rank`'s application.
pub fn expected_trace(rank: u32, rank_count: u32, rounds: u32) -> Vec<TraceEntry> {
    let left = (rank + rank_count - 1) % rank_count;
    let mut trace = Vec::new();
    for round in 0..rounds {
        trace.push(TraceEntry::Received {
            source: left,
            value: message_value(left, round, 0),
        });
        if rank == 0 && rank_count > 1 {
            let sum = (1..rank_count)
                .map(|other| message_value(other, round, 1))
                .fold(0u64, u64::wrapping_add);
            trace.push(TraceEntry::AnySourceSum(sum));
        }
        trace.push(TraceEntry::Received {
            source: left,
            value: message_value(left, round, 2),
        });
    }
    trace
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FrameKind {
    Data {
        send: SendId,
        tag: u32,
        value: u64,
    },
    Ack {
        logical_seq: u64,
    },
    Welcome {
        joined: Process,
        incarnation: u32,
        delivered: u64,
    },
}

/// What the launcher tells a process.
#[derive(Clone, Debug)]
enum Notice {
    Death { dead: Process, incarnation: u32 },
    Rejoin { cut: ForkCut, incarnation: u32 },
}

/// A process and one of its lives.
type Incarnate = (Process, u32);

#[derive(Clone)]
struct SimProcess {
    protocol: Replica,
    alive: bool,
    incarnation: u32,
    /// Per process index: the incarnation this process believes alive.
    known_incarnation: Vec<u32>,
    /// Notices not handled yet, in the order sent: (due step, notice).
    notices: VecDeque<(u64, Notice)>,
    /// Dead replicas of its rank this process is to fork again.
    forks_due: Vec<u32>,
    operations: Vec<Operation>,
    next_operation: usize,
    /// The blocking send in progress and whether it completed.
    sending: Option<(SendId, bool)>,
    /// Payloads (tag, value) of sends not complete yet (the sender keeps
    /// them for a substitute's re-send).
    payloads: BTreeMap<SendId, (u32, u64)>,
    /// Delivered messages (tag, value) not taken by the application yet,
    /// per source rank, in arrival order (MPI's non-overtaking order).
    inbox: Vec<VecDeque<(u32, u64)>>,
    /// ANY_SOURCE receives of the current operation: taken so far, sum.
    any_taken: u32,
    any_sum: u64,
    /// Dead incarnations whose notice this one has handled.
    notified: BTreeSet<Incarnate>,
    trace: Vec<TraceEntry>,
}

struct Simulation {
    rank_count: u32,
    replica_count: u32,
    recovery: bool,
    processes: Vec<SimProcess>,
    /// FIFO channels, by (from, to), each end with the incarnation the
    /// sender knew.
    channels: BTreeMap<(Incarnate, Incarnate), VecDeque<FrameKind>>,
    rng: SplitMix64,
    lost_ranks: BTreeSet<u32>,
    duplicates_dropped: u64,
    forks: u64,
    rank_really_lost: bool,
    violations: Vec<String>,
    /// `RESMPI_SIM_TRACE` set: every move on stderr.
    tracing: bool,
}

impl Simulation {
    fn index(&self, process: Process) -> usize {
        (process.rank * self.replica_count + process.replica) as usize
    }

    fn all_processes(&self) -> Vec<Process> {
        (0..self.rank_count)
            .flat_map(|rank| (0..self.replica_count).map(move |replica| Process { rank, replica }))
            .collect()
    }

    /// Carries out what `process`'s protocol asks for.
    fn drain_actions(&mut self, process: Process) {
        let index = self.index(process);
        while let Some(action) = self.processes[index].protocol.poll_action() {
            if self.tracing {
                eprintln!("  {process}: {action:?}");
            }
            let channel = |simulation: &Simulation, to: Process| {
                let state = &simulation.processes[index];
                (
                    (process, state.incarnation),
                    (to, state.known_incarnation[simulation.index(to)]),
                )
            };
            match action {
                Action::Transmit { send, to } => {
                    let Some(&(tag, value)) = self.processes[index].payloads.get(&send) else {
                        self.violations.push(format!(
                            "{process}: transmit of {send:?} whose payload is gone"
                        ));
                        continue;
                    };
                    let key = channel(self, to);
                    self.channels
                        .entry(key)
                        .or_default()
                        .push_back(FrameKind::Data { send, tag, value });
                    // Eager: out once handed to the (reliable) network.
                    self.processes[index].protocol.handle_transmitted(send, to);
                }
                Action::Ack {
                    to, logical_seq, ..
                } => {
                    let key = channel(self, to);
                    self.channels
                        .entry(key)
                        .or_default()
                        .push_back(FrameKind::Ack { logical_seq });
                }
                Action::Welcome {
                    to,
                    joined,
                    incarnation,
                    delivered,
                } => {
                    if !self.recovery {
                        self.violations
                            .push(format!("{process}: a welcome without recovery"));
                    }
                    let key = channel(self, to);
                    self.channels
                        .entry(key)
                        .or_default()
                        .push_back(FrameKind::Welcome {
                            joined,
                            incarnation,
                            delivered,
                        });
                }
                Action::SendComplete(send) => {
                    let state = &mut self.processes[index];
                    state.payloads.remove(&send);
                    if let Some((waiting, done)) = &mut state.sending {
                        if *waiting == send {
                            *done = true;
                        }
                    }
                }
                Action::ReceiveFrom { .. } => {}
                Action::RankLost(rank) => {
                    self.lost_ranks.insert(rank);
                }
            }
        }
    }

    fn kill(&mut self, dead: Process, step: u64) {
        let index = self.index(dead);
        if !self.processes[index].alive {
            return;
        }
        self.processes[index].alive = false;
        let incarnation = self.processes[index].incarnation;
        if self.tracing {
            eprintln!("kill {dead} incarnation {incarnation}");
        }
        let rank_dead = (0..self.replica_count).all(|replica| {
            !self.processes[self.index(Process {
                rank: dead.rank,
                replica,
            })]
            .alive
        });
        self.rank_really_lost |= rank_dead;
        for other in self.all_processes() {
            if other != dead {
                self.notify(other, step, Notice::Death { dead, incarnation });
            }
        }
    }

    /// Queue `notice` for `to` (if alive), after every notice sent to it
    /// before.
    fn notify(&mut self, to: Process, step: u64, notice: Notice) {
        let index = self.index(to);
        if !self.processes[index].alive {
            return;
        }
        let delay = self.rng.below(NOTICE_DELAY_STEPS_MAX + 1);
        let queue = &mut self.processes[index].notices;
        let due = queue.back().map_or(0, |&(due, _)| due).max(step + delay);
        queue.push_back((due, notice));
    }

    /// `forker` forks a new replica `replica` of its rank.
    fn fork(&mut self, forker: Process, replica: u32, step: u64) {
        let index = self.index(forker);
        if !self.processes[index].protocol.can_fork(replica) {
            return;
        }
        let (protocol, cut) = self.processes[index].protocol.fork(replica);
        if self.tracing {
            eprintln!("{forker} forks {cut:?}");
        }
        let joined = cut.joined;
        let joined_index = self.index(joined);
        let incarnation = cut.incarnation;
        if incarnation != self.processes[joined_index].incarnation + 1 {
            self.violations.push(format!(
                "{forker} forked incarnation {incarnation} of {joined}, whose last was {}",
                self.processes[joined_index].incarnation
            ));
        }
        let mut child = self.processes[index].clone();
        child.protocol = protocol;
        child.incarnation = incarnation;
        child.forks_due.clear();
        child.known_incarnation[joined_index] = incarnation;
        self.processes[index].known_incarnation[joined_index] = incarnation;
        self.processes[joined_index] = child;
        self.forks += 1;
        self.drain_actions(forker);
        self.drain_actions(joined);
        for other in self.all_processes() {
            if other != forker && other != joined {
                self.notify(
                    other,
                    step,
                    Notice::Rejoin {
                        cut: cut.clone(),
                        incarnation,
                    },
                );
            }
        }
    }

    /// Whether `process` is alive and its next program step can run.
    fn can_progress(&self, process: Process) -> bool {
        let state = &self.processes[self.index(process)];
        if !state.alive {
            return false;
        }
        match state.operations.get(state.next_operation) {
            None => false,
            Some(Operation::Send { .. }) => !matches!(state.sending, Some((_, false))),
            Some(Operation::Isend { .. }) => true,
            Some(Operation::WaitAll) => state.payloads.is_empty(),
            Some(Operation::Receive { source, tag }) => {
                first_with_tag(&state.inbox[*source as usize], *tag).is_some()
            }
            Some(Operation::ReceiveAny { tag, .. }) => state
                .inbox
                .iter()
                .any(|inbox| first_with_tag(inbox, *tag).is_some()),
        }
    }

    /// Runs one program step of `process`; false when it is blocked or done.
    fn run_program_step(&mut self, process: Process) -> bool {
        let index = self.index(process);
        let state = &self.processes[index];
        let Some(&operation) = state.operations.get(state.next_operation) else {
            return false;
        };
        match operation {
            Operation::Send {
                destination,
                tag,
                value,
            } => match state.sending {
                None => {
                    let send = self.processes[index].protocol.handle_send(destination);
                    let state = &mut self.processes[index];
                    state.payloads.insert(send, (tag, value));
                    state.sending = Some((send, false));
                    self.drain_actions(process);
                    true
                }
                Some((_, true)) => {
                    let state = &mut self.processes[index];
                    state.sending = None;
                    state.next_operation += 1;
                    true
                }
                Some((_, false)) => false,
            },
            Operation::Isend {
                destination,
                tag,
                value,
            } => {
                let send = self.processes[index].protocol.handle_send(destination);
                let state = &mut self.processes[index];
                state.payloads.insert(send, (tag, value));
                state.next_operation += 1;
                self.drain_actions(process);
                true
            }
            Operation::WaitAll => {
                let state = &mut self.processes[index];
                if !state.payloads.is_empty() {
                    return false;
                }
                state.next_operation += 1;
                true
            }
            Operation::Receive { source, tag } => {
                let state = &mut self.processes[index];
                let inbox = &mut state.inbox[source as usize];
                let Some(position) = first_with_tag(inbox, tag) else {
                    return false;
                };
                let (_, value) = inbox.remove(position).expect("found");
                state.trace.push(TraceEntry::Received { source, value });
                state.next_operation += 1;
                true
            }
            Operation::ReceiveAny { tag, count } => {
                let ready: Vec<usize> = (0..self.rank_count as usize)
                    .filter(|&source| {
                        first_with_tag(&self.processes[index].inbox[source], tag).is_some()
                    })
                    .collect();
                if ready.is_empty() {
                    return false;
                }
                let source = ready[self.rng.below(ready.len() as u64) as usize];
                let state = &mut self.processes[index];
                let inbox = &mut state.inbox[source];
                let position = first_with_tag(inbox, tag).expect("ready");
                let (_, value) = inbox.remove(position).expect("found");
                state.any_sum = state.any_sum.wrapping_add(value);
                state.any_taken += 1;
                if state.any_taken == count {
                    let sum = std::mem::take(&mut state.any_sum);
                    state.trace.push(TraceEntry::AnySourceSum(sum));
                    state.any_taken = 0;
                    state.next_operation += 1;
                }
                true
            }
        }
    }

    /// Delivers the head of channel (from, to).
    fn deliver(&mut self, key: (Incarnate, Incarnate)) {
        let frame = self
            .channels
            .get_mut(&key)
            .and_then(VecDeque::pop_front)
            .expect("a non-empty channel was chosen");
        let ((from, _), (to, to_incarnation)) = key;
        if self.tracing {
            eprintln!("deliver {key:?}: {frame:?}");
        }
        let index = self.index(to);
        let receiver = &self.processes[index];
        // A dead process reads nothing, nor does a later incarnation read
        // what was sent to an earlier one; a frame from a process whose
        // death the receiver has handled is dropped (the engine drops them
        // too).
        if !receiver.alive
            || receiver.incarnation != to_incarnation
            || receiver.notified.contains(&key.0)
        {
            return;
        }
        match frame {
            FrameKind::Data { send, tag, value } => {
                match self.processes[index]
                    .protocol
                    .handle_arrival(from, send.logical_seq)
                {
                    Arrival::Deliver => {
                        self.processes[index].inbox[from.rank as usize].push_back((tag, value))
                    }
                    Arrival::Duplicate => self.duplicates_dropped += 1,
                    Arrival::OutOfOrder { expected } => self.violations.push(format!(
                        "{to}: message {} from {from} arrived while {expected} was expected",
                        send.logical_seq
                    )),
                }
            }
            FrameKind::Ack { logical_seq } => {
                self.processes[index].protocol.handle_ack(from, logical_seq)
            }
            FrameKind::Welcome {
                joined,
                incarnation,
                delivered,
            } => {
                self.processes[index]
                    .protocol
                    .handle_welcome(from, joined, incarnation, delivered)
            }
        }
        self.drain_actions(to);
    }

    /// Hands `to` the first notice sent to it.
    fn deliver_notice(&mut self, to: Process) {
        let index = self.index(to);
        let Some((_, notice)) = self.processes[index].notices.pop_front() else {
            return;
        };
        if self.tracing {
            eprintln!("notice to {to}: {notice:?}");
        }
        match notice {
            Notice::Death { dead, incarnation } => {
                let state = &mut self.processes[index];
                state.notified.insert((dead, incarnation));
                state.protocol.handle_failure(dead);
                self.drain_actions(to);
                if self.recovery && dead.rank == to.rank {
                    // The dead replicas this process now substitutes for
                    // (the dead one, and those it stood for).
                    let state = &mut self.processes[index];
                    for replica in 0..self.replica_count {
                        if state.protocol.may_fork(replica) && !state.forks_due.contains(&replica) {
                            state.forks_due.push(replica);
                        }
                    }
                }
            }
            Notice::Rejoin { cut, incarnation } => {
                let joined = self.index(cut.joined);
                self.processes[index].known_incarnation[joined] = incarnation;
                self.processes[index].protocol.handle_rejoin(&cut);
                self.drain_actions(to);
            }
        }
    }

    fn finished(&self) -> bool {
        self.processes.iter().all(|state| {
            !state.alive
                || (state.next_operation == state.operations.len()
                    && state.payloads.is_empty()
                    && state.forks_due.is_empty()
                    && state.notices.is_empty())
        })
    }
}

/// Position of the first message with `tag` in `inbox`.
fn first_with_tag(inbox: &VecDeque<(u32, u64)>, tag: u32) -> Option<usize> {
    inbox
        .iter()
        .position(|(message_tag, _)| *message_tag == tag)
}

/// Runs `job` to its end and judges it.
pub fn run_replication_job(job: &ReplicationJob) -> ReplicationOutcome {
    let (rank_count, replica_count) = (job.rank_count, job.replica_count);
    let size = (rank_count * replica_count) as usize;
    let processes = (0..rank_count)
        .flat_map(|rank| (0..replica_count).map(move |replica| Process { rank, replica }))
        .map(|me| SimProcess {
            protocol: if job.recovery {
                Replica::new(me, rank_count, replica_count).with_recovery()
            } else {
                Replica::new(me, rank_count, replica_count)
            },
            alive: true,
            incarnation: 0,
            known_incarnation: vec![0; size],
            notices: VecDeque::new(),
            forks_due: Vec::new(),
            operations: program(me.rank, rank_count, job.rounds),
            next_operation: 0,
            sending: None,
            payloads: BTreeMap::new(),
            inbox: vec![VecDeque::new(); rank_count as usize],
            any_taken: 0,
            any_sum: 0,
            notified: BTreeSet::new(),
            trace: Vec::new(),
        })
        .collect();
    let mut simulation = Simulation {
        rank_count,
        replica_count,
        recovery: job.recovery,
        processes,
        channels: BTreeMap::new(),
        rng: SplitMix64::new(job.seed),
        lost_ranks: BTreeSet::new(),
        duplicates_dropped: 0,
        forks: 0,
        rank_really_lost: false,
        violations: Vec::new(),
        tracing: std::env::var_os("RESMPI_SIM_TRACE").is_some(),
    };
    let mut step = 0u64;
    loop {
        for kill in &job.kills {
            if kill.at_step == step {
                simulation.kill(kill.process, step);
            }
        }
        if simulation.finished() || !simulation.lost_ranks.is_empty() {
            break;
        }
        if step == STEPS_MAX {
            simulation
                .violations
                .push(format!("no end after {STEPS_MAX} steps"));
            break;
        }
        // Every move possible now; one is picked at random.
        let mut moves: Vec<(u8, usize)> = Vec::new();
        // A frame from a new incarnation waits until its receiver handled
        // the re-join notice (the engine accepts its connection then).
        let channels: Vec<(Incarnate, Incarnate)> = simulation
            .channels
            .iter()
            .filter(|(((from, from_incarnation), (to, _)), frames)| {
                !frames.is_empty()
                    && simulation.processes[simulation.index(*to)].known_incarnation
                        [simulation.index(*from)]
                        >= *from_incarnation
            })
            .map(|(key, _)| *key)
            .collect();
        moves.extend((0..channels.len()).map(|position| (0, position)));
        let live: Vec<Process> = simulation
            .all_processes()
            .into_iter()
            .filter(|&process| simulation.processes[simulation.index(process)].alive)
            .collect();
        let notified: Vec<Process> = live
            .iter()
            .copied()
            .filter(|&process| {
                simulation.processes[simulation.index(process)]
                    .notices
                    .front()
                    .is_some_and(|&(due, _)| due <= step)
            })
            .collect();
        moves.extend((0..notified.len()).map(|position| (1, position)));
        let runnable: Vec<Process> = live
            .iter()
            .copied()
            .filter(|&process| simulation.can_progress(process))
            .collect();
        moves.extend((0..runnable.len()).map(|position| (2, position)));
        // Forks no longer to make are dropped; one waiting for its forker's
        // own re-join to end is not offered yet.
        for &process in &live {
            let index = simulation.index(process);
            let state = &mut simulation.processes[index];
            let protocol = &state.protocol;
            state
                .forks_due
                .retain(|&replica| protocol.may_fork(replica));
        }
        let forking: Vec<Process> = live
            .iter()
            .copied()
            .filter(|&process| {
                let state = &simulation.processes[simulation.index(process)];
                state
                    .forks_due
                    .first()
                    .is_some_and(|&replica| state.protocol.can_fork(replica))
            })
            .collect();
        moves.extend((0..forking.len()).map(|position| (3, position)));
        let future_notice = live.iter().any(|&process| {
            !simulation.processes[simulation.index(process)]
                .notices
                .is_empty()
        });
        let pending_kill = job.kills.iter().any(|kill| kill.at_step > step);
        step += 1;
        if moves.is_empty() {
            if future_notice || pending_kill {
                continue;
            }
            let pending: Vec<String> = simulation
                .processes
                .iter()
                .filter(|state| state.alive)
                .map(|state| {
                    format!(
                        "{} at {}: {:?} joining {}",
                        state.protocol.me(),
                        state.next_operation,
                        state.protocol.pending_sends(),
                        state.protocol.is_rejoining()
                    )
                })
                .collect();
            simulation.violations.push(format!(
                "nothing can move: the job hangs; {}",
                pending.join("; ")
            ));
            break;
        }
        let (kind, position) = moves[simulation.rng.below(moves.len() as u64) as usize];
        match kind {
            0 => simulation.deliver(channels[position]),
            1 => simulation.deliver_notice(notified[position]),
            2 => {
                simulation.run_program_step(runnable[position]);
            }
            _ => {
                let forker = forking[position];
                let index = simulation.index(forker);
                let replica = simulation.processes[index].forks_due.remove(0);
                simulation.fork(forker, replica, step);
            }
        }
    }
    let mut outcome = ReplicationOutcome {
        steps: step,
        traces: BTreeMap::new(),
        lost_ranks: simulation.lost_ranks.clone(),
        duplicates_dropped: simulation.duplicates_dropped,
        forks: simulation.forks,
        rank_really_lost: simulation.rank_really_lost,
        violations: simulation.violations,
    };
    if !outcome.lost_ranks.is_empty() && !outcome.rank_really_lost {
        outcome.violations.push(format!(
            "ranks {:?} reported lost while a replica of each lived",
            outcome.lost_ranks
        ));
    }
    let lost = !outcome.lost_ranks.is_empty();
    for process in simulation
        .processes
        .iter()
        .filter(|state| state.alive)
        .map(|state| state.protocol.me())
    {
        let state =
            &simulation.processes[(process.rank * replica_count + process.replica) as usize];
        outcome.traces.insert(process, state.trace.clone());
        if lost {
            continue;
        }
        let expected = expected_trace(process.rank, rank_count, job.rounds);
        if state.trace != expected {
            outcome.violations.push(format!(
                "{process}: application trace {:?} differs from the fault-free {:?}",
                state.trace, expected
            ));
        }
        if let Some(source) = state.inbox.iter().position(|inbox| !inbox.is_empty()) {
            outcome.violations.push(format!(
                "{process}: {} message(s) from rank {source} delivered twice or never taken",
                state.inbox[source].len()
            ));
        }
    }
    outcome
}

/// Whether some rank had every replica killed by `kills`.
pub fn kills_a_whole_rank(kills: &[PlannedKill], replica_count: u32) -> Option<u32> {
    let mut by_rank: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for kill in kills {
        by_rank
            .entry(kill.process.rank)
            .or_default()
            .insert(kill.process.replica);
    }
    by_rank
        .into_iter()
        .find(|(_, replicas)| replicas.len() == replica_count as usize)
        .map(|(rank, _)| rank)
}
