//! Collective schedules: every collective, blocking or not, is a list of
//! steps (sends, receives, local reductions and copies, separated by
//! fences) that the progress engine advances whenever MPI makes progress.
//!
//! Why one mechanism for both: a nonblocking collective must move while the
//! application computes and calls other MPI functions, so its state cannot
//! live on a call stack. Running blocking collectives through the same
//! schedules (start, then wait) keeps exactly one implementation of every
//! algorithm (the algorithms are in `coll/`).
//!
//! A schedule belongs to a request in the engine's request table; the
//! request completes when the last step has run, so MPI_Wait/Test and their
//! any/all/some forms need nothing special. Messages of one schedule carry
//! the communicator's collective sequence number as their tag: ranks call
//! collectives on a communicator in the same order, so several outstanding
//! collectives never match each other's messages, and the collective
//! context keeps them apart from point-to-point traffic.

use std::sync::Arc;

use resmpi_ft::Interceptor;

use crate::coll::Reduction;
use crate::engine::{Destination, Engine};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::request::{Operation, Request, SendMode, Status};

/// Tags of collective messages: the sequence number modulo this.
pub const SEQUENCE_TAG_MODULUS: u32 = 1 << 30;

/// One step of a schedule. Pointers are user memory (valid until the
/// collective completes, by MPI's rules) or temporaries the schedule owns.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// Start a send to communicator rank `peer`.
    Send {
        /// Destination (communicator rank; remote rank when `remote`).
        peer: u32,
        /// Whether `peer` names a member of an inter-communicator's remote group.
        remote: bool,
        /// Data.
        data: *const u8,
        /// Bytes.
        length_bytes: usize,
    },
    /// Start a receive from communicator rank `peer`.
    Receive {
        /// Source (communicator rank; remote rank when `remote`).
        peer: u32,
        /// Whether `peer` names a member of an inter-communicator's remote group.
        remote: bool,
        /// Where the data goes.
        data: *mut u8,
        /// Bytes expected.
        length_bytes: usize,
    },
    /// `inout = input op inout` over `count` elements with the schedule's reduction.
    Reduce {
        /// Left operand.
        input: *const u8,
        /// Right operand and result.
        inout: *mut u8,
        /// Elements.
        count: usize,
    },
    /// Local copy (regions never overlap).
    Copy {
        /// Source.
        from: *const u8,
        /// Destination.
        to: *mut u8,
        /// Bytes.
        length_bytes: usize,
    },
    /// Wait until every send and receive started so far has completed.
    Fence,
}

/// A collective in progress.
pub struct Schedule {
    steps: Vec<Step>,
    next_step: usize,
    /// Engine requests of the sends and receives started since the last fence.
    pending: Vec<u32>,
    /// World rank of each communicator rank.
    group: Arc<Vec<u32>>,
    /// World rank of each remote rank (inter-communicators only). Local and
    /// remote groups are disjoint, so messages of both share the context
    /// and tag without ever matching each other.
    remote_group: Option<Arc<Vec<u32>>>,
    /// Communicator index (for the sub-requests).
    comm: usize,
    context: u32,
    tag: i32,
    /// This process's rank in the communicator.
    pub rank: u32,
    /// The reduction, for schedules with `Reduce` steps.
    pub reduction: Option<Reduction>,
    /// Temporaries; boxed slices never move, so steps may point into them.
    temporaries: Vec<Box<[u8]>>,
    /// First error seen (the schedule still runs to the end so that peers
    /// are not left waiting for messages).
    error: Option<MpiError>,
    /// The sub-request whose status the schedule's request reports
    /// (MPI_Isendrecv: its receive), and that status once it completed.
    reported: Option<(u32, Option<Status>)>,
}

impl Schedule {
    /// Communicator size.
    pub fn size(&self) -> u32 {
        self.group.len() as u32
    }

    /// A schedule with no engine behind it, for tests of the steps an
    /// algorithm appends: local rank `rank` of `local_size`, and a remote
    /// group of `remote_size` (0: an intra-communicator).
    #[cfg(test)]
    pub(crate) fn detached(rank: u32, local_size: u32, remote_size: u32) -> Schedule {
        let remote_group =
            (remote_size > 0).then(|| Arc::new((local_size..local_size + remote_size).collect()));
        Schedule {
            steps: Vec::new(),
            next_step: 0,
            pending: Vec::new(),
            group: Arc::new((0..local_size).collect()),
            remote_group,
            comm: 0,
            context: 0,
            tag: 0,
            rank,
            reduction: None,
            temporaries: Vec::new(),
            error: None,
            reported: None,
        }
    }

    /// Size of the remote group (0 on an intra-communicator).
    pub fn remote_size(&self) -> u32 {
        self.remote_group
            .as_ref()
            .map_or(0, |group| group.len() as u32)
    }

    /// A zeroed temporary of `length_bytes` owned by the schedule.
    pub fn temporary(&mut self, length_bytes: usize) -> *mut u8 {
        let mut buffer = vec![0u8; length_bytes].into_boxed_slice();
        let pointer = buffer.as_mut_ptr();
        self.temporaries.push(buffer);
        pointer
    }

    /// Keep `buffer` (a packed copy of the caller's data that steps point
    /// into) alive until the schedule is done. A boxed slice never moves.
    pub fn keep(&mut self, buffer: Box<[u8]>) {
        self.temporaries.push(buffer);
    }

    /// Append a send (nothing for zero bytes would break matching, so
    /// zero-byte messages are sent too).
    pub fn send(&mut self, peer: u32, data: *const u8, length_bytes: usize) {
        debug_assert!(peer != self.rank, "collectives never message themselves");
        self.steps.push(Step::Send {
            peer,
            remote: false,
            data,
            length_bytes,
        });
    }

    /// Append a send to remote rank `peer` of an inter-communicator.
    pub fn send_remote(&mut self, peer: u32, data: *const u8, length_bytes: usize) {
        debug_assert!(peer < self.remote_size(), "a remote rank");
        self.steps.push(Step::Send {
            peer,
            remote: true,
            data,
            length_bytes,
        });
    }

    /// Append a receive from remote rank `peer` of an inter-communicator.
    pub fn receive_remote(&mut self, peer: u32, data: *mut u8, length_bytes: usize) {
        debug_assert!(peer < self.remote_size(), "a remote rank");
        self.steps.push(Step::Receive {
            peer,
            remote: true,
            data,
            length_bytes,
        });
    }

    /// Append a receive.
    pub fn receive(&mut self, peer: u32, data: *mut u8, length_bytes: usize) {
        debug_assert!(peer != self.rank, "collectives never message themselves");
        self.steps.push(Step::Receive {
            peer,
            remote: false,
            data,
            length_bytes,
        });
    }

    /// Append `inout = input op inout` (MPI's operand order: `input` is the
    /// left operand, from the lower ranks).
    pub fn reduce(&mut self, input: *const u8, inout: *mut u8, count: usize) {
        if count > 0 {
            self.steps.push(Step::Reduce {
                input,
                inout,
                count,
            });
        }
    }

    /// Append a local copy; nothing when source and destination coincide.
    pub fn copy(&mut self, from: *const u8, to: *mut u8, length_bytes: usize) {
        if length_bytes > 0 && !std::ptr::eq(from, to) {
            self.steps.push(Step::Copy {
                from,
                to,
                length_bytes,
            });
        }
    }

    /// Append a fence: later steps run once everything before has completed.
    pub fn fence(&mut self) {
        if !matches!(self.steps.last(), None | Some(Step::Fence)) {
            self.steps.push(Step::Fence);
        }
    }

    /// Make request `index`, already started by the caller (point-to-point,
    /// in any context), part of the schedule: the schedule completes only
    /// once it has, and releases it. Adopted requests belong to the first
    /// fence, like steps appended before it.
    pub fn adopt(&mut self, index: u32) {
        self.pending.push(index);
    }

    /// The schedule's request reports the status of adopted request
    /// `index` (source, tag, count, cancelled) instead of an empty status.
    pub fn report_status_of(&mut self, index: u32) {
        self.reported = Some((index, None));
    }

    /// The steps, for tests.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// World rank of local (or remote) rank `peer`.
    fn world_rank(&self, peer: u32, remote: bool) -> u32 {
        match (&self.remote_group, remote) {
            (Some(group), true) => group[peer as usize],
            _ => self.group[peer as usize],
        }
    }

    fn record(&mut self, error: MpiError) {
        self.error.get_or_insert(error);
    }

    /// Whether every request started since the last fence has completed;
    /// if so, release them (noting truncation).
    fn reap<F: Interceptor>(&mut self, engine: &mut Engine<F>) -> bool {
        let requests = &mut engine.state.requests;
        let all_done = self
            .pending
            .iter()
            .all(|index| requests.get(*index).is_none_or(|request| request.complete));
        if !all_done {
            return false;
        }
        for index in std::mem::take(&mut self.pending) {
            let removed = engine.state.requests.remove(index);
            if let Some((reported, status)) = &mut self.reported {
                if *reported == index {
                    *status = removed.as_ref().map(|request| request.status);
                }
            }
            // The reported request's truncation is in the status it hands on.
            let reported = self.reported.is_some_and(|(reported, _)| reported == index);
            let truncated = !reported
                && removed
                    .as_ref()
                    .is_some_and(|request| request.status.error == ErrorClass::Truncate as i32);
            let failed_peer = removed
                .as_ref()
                .filter(|request| request.status.error == ErrorClass::ProcFailed as i32)
                .and_then(|request| match &request.operation {
                    Operation::Send(send) => Some(send.peer),
                    Operation::Receive(receive) => receive.sender.or(receive.pattern.source),
                    _ => None,
                });
            if removed
                .as_ref()
                .is_some_and(|request| request.status.error == ErrorClass::Revoked as i32)
            {
                self.record(crate::engine::revoked_error());
            }
            if truncated {
                self.record(MpiError::new(
                    ErrorClass::Truncate,
                    "collective message longer than expected: are the counts and datatypes the same on every rank?",
                ));
            }
            // A step with a failed peer ended at once; the schedule runs on
            // (its messages to live peers still go) and reports the failure.
            if let Some(peer) = failed_peer {
                let error = if engine.peer_failed(peer) {
                    crate::engine::peer_failed_error(peer)
                } else {
                    MpiError::new(
                        ErrorClass::ProcFailed,
                        format!("a contribution of a failed process is missing from what rank {peer} (MPI_COMM_WORLD) passed on"),
                    )
                };
                self.record(error);
            }
        }
        true
    }

    /// Run steps until one must wait. Returns (anything happened, finished).
    fn advance<F: Interceptor>(&mut self, engine: &mut Engine<F>) -> MpiResult<(bool, bool)> {
        let mut progressed = false;
        while self.next_step < self.steps.len() {
            match self.steps[self.next_step] {
                Step::Send {
                    peer,
                    remote,
                    data,
                    length_bytes,
                } => {
                    let destination = Destination {
                        peer: self.world_rank(peer, remote),
                        context: self.context,
                        tag: self.tag,
                    };
                    // Data computed after a lost contribution must not pass
                    // for a good result at the receiver.
                    let tainted = self
                        .error
                        .as_ref()
                        .is_some_and(|error| error.class == ErrorClass::ProcFailed);
                    let index = engine.start_send_marked(
                        self.comm,
                        destination,
                        data,
                        length_bytes,
                        SendMode::Standard,
                        tainted,
                    )?;
                    self.pending.push(index);
                }
                Step::Receive {
                    peer,
                    remote,
                    data,
                    length_bytes,
                } => {
                    let index = engine.start_receive(
                        self.comm,
                        data,
                        length_bytes,
                        Some(self.world_rank(peer, remote)),
                        Some(self.tag),
                        self.context,
                    )?;
                    self.pending.push(index);
                }
                Step::Fence => {
                    if !self.reap(engine) {
                        return Ok((progressed, false));
                    }
                }
                Step::Reduce {
                    input,
                    inout,
                    count,
                } => {
                    if self.error.is_none() {
                        if let Some(reduction) = &self.reduction {
                            let length_bytes = count * reduction.info.extent_bytes;
                            // SAFETY: the algorithm sized both regions for `count`
                            // elements; they are temporaries or user buffers that
                            // stay valid until the collective completes, and
                            // never the same memory.
                            let result = unsafe {
                                reduction.apply(
                                    crate::engine::slice_from(input, length_bytes),
                                    std::slice::from_raw_parts_mut(inout, length_bytes),
                                    count,
                                )
                            };
                            if let Err(error) = result {
                                self.record(error);
                            }
                        }
                    }
                }
                Step::Copy {
                    from,
                    to,
                    length_bytes,
                } => {
                    // SAFETY: as for Reduce; regions of `length_bytes` that do not overlap.
                    unsafe { std::ptr::copy_nonoverlapping(from, to, length_bytes) };
                }
            }
            self.next_step += 1;
            progressed = true;
        }
        let finished = self.reap(engine);
        Ok((progressed, finished))
    }
}

/// The schedules in flight, with the request each one completes.
#[derive(Default)]
pub struct Schedules {
    active: Vec<(u32, Schedule)>,
    /// Errors of finished schedules, kept for a blocking caller's message.
    errors: Vec<(u32, MpiError)>,
}

impl Schedules {
    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }
}

/// Advance every schedule in flight; complete the requests of finished
/// ones. True if anything happened. Called from [`Engine::progress`].
pub fn advance_all<F: Interceptor>(engine: &mut Engine<F>) -> MpiResult<bool> {
    if engine.schedules.active.is_empty() {
        return Ok(false);
    }
    let mut active = std::mem::take(&mut engine.schedules.active);
    let mut any = false;
    let mut failure = None;
    let mut position = 0;
    while position < active.len() {
        let (request_index, schedule) = &mut active[position];
        let request_index = *request_index;
        match schedule.advance(engine) {
            Ok((progressed, finished)) => {
                any |= progressed;
                if finished {
                    let (_, schedule) = active.swap_remove(position);
                    finish(engine, request_index, schedule);
                    any = true;
                    continue;
                }
            }
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
        position += 1;
    }
    // Schedules started while these ran (none today) come after them.
    active.append(&mut engine.schedules.active);
    engine.schedules.active = active;
    match failure {
        Some(error) => Err(error),
        None => Ok(any),
    }
}

fn finish<F: Interceptor>(engine: &mut Engine<F>, request_index: u32, schedule: Schedule) {
    let Some(request) = engine.state.requests.get_mut(request_index) else {
        return;
    };
    request.complete = true;
    if let Some((_, Some(status))) = schedule.reported {
        request.status = status;
    }
    if let Some(error) = schedule.error {
        request.status.error = error.class as i32;
        if request.free_when_complete {
            engine.state.requests.remove(request_index);
        } else {
            engine.schedules.errors.push((request_index, error));
        }
        return;
    }
    if request.free_when_complete {
        engine.state.requests.remove(request_index);
    }
}

impl<F: Interceptor> Engine<F> {
    /// A new, empty schedule for communicator `comm_index`; takes the
    /// communicator's next collective sequence number.
    pub fn new_schedule(&mut self, comm_index: usize) -> MpiResult<Schedule> {
        let comm = match self.state.comms.get_mut(comm_index) {
            Some(Some(comm)) => comm,
            _ => return Err(MpiError::new(ErrorClass::Comm, "invalid communicator")),
        };
        let sequence = comm.collective_sequence;
        comm.collective_sequence = comm.collective_sequence.wrapping_add(1);
        Ok(Schedule {
            steps: Vec::new(),
            next_step: 0,
            pending: Vec::new(),
            group: comm.group.clone(),
            remote_group: comm.remote.as_ref().map(|remote| remote.group.clone()),
            comm: comm_index,
            context: comm.collective_context(),
            tag: (sequence % SEQUENCE_TAG_MODULUS) as i32,
            rank: comm.rank,
            reduction: None,
            temporaries: Vec::new(),
            error: None,
            reported: None,
        })
    }

    /// A schedule that only gathers point-to-point requests the caller
    /// starts and then adopts ([`Schedule::adopt`]), so that they complete
    /// as one request (MPI_Isendrecv). Unlike [`Engine::new_schedule`] it
    /// takes no collective sequence number: only this process calls it.
    /// It must have no send or receive steps of its own.
    pub fn new_request_group(&mut self, comm_index: usize) -> MpiResult<Schedule> {
        let comm = match self.state.comms.get(comm_index) {
            Some(Some(comm)) => comm,
            _ => return Err(MpiError::new(ErrorClass::Comm, "invalid communicator")),
        };
        Ok(Schedule {
            steps: Vec::new(),
            next_step: 0,
            pending: Vec::new(),
            group: comm.group.clone(),
            remote_group: None,
            comm: comm_index,
            context: comm.context,
            tag: 0,
            rank: comm.rank,
            reduction: None,
            temporaries: Vec::new(),
            error: None,
            reported: None,
        })
    }

    /// Add request `index` to the running request group under request
    /// `group` ([`Engine::new_request_group`], started): the group's request
    /// completes once `index` has too (a partitioned send's transfer joins
    /// the group MPI_Start made when its last partition is ready).
    pub fn adopt_into(&mut self, group: u32, index: u32) -> MpiResult<()> {
        match self
            .schedules
            .active
            .iter_mut()
            .find(|(request, _)| *request == group)
        {
            Some((_, schedule)) => {
                schedule.adopt(index);
                Ok(())
            }
            None => Err(MpiError::new(
                ErrorClass::Request,
                "the request group has already completed",
            )),
        }
    }

    /// Start `schedule` under a new request and run it as far as it goes
    /// without waiting. Returns the request index.
    pub fn start_schedule(&mut self, schedule: Schedule) -> MpiResult<u32> {
        let index = self.insert_request(Request {
            operation: Operation::Nothing,
            comm: schedule.comm,
            complete: false,
            status: Status {
                source: -1,
                tag: -1,
                error: 0,
                count_bytes: 0,
                cancelled: false,
            },
            generation: 0,
            persistent: None,
            free_when_complete: false,
            inner: None,
        })?;
        // An error kept for an earlier request of this slot that nobody
        // collected (a nonblocking collective completed by MPI_Wait) must
        // not become this one's.
        self.forget_schedule_error(index);
        self.schedules.active.push((index, schedule));
        advance_all(self)?;
        Ok(index)
    }

    /// Run `schedule` to completion (blocking collectives).
    pub fn run_schedule(&mut self, schedule: Schedule) -> MpiResult<()> {
        let index = self.start_schedule(schedule)?;
        self.wait_request(index)?;
        self.take_schedule_result(index)
    }

    /// Release the completed collective request `index` and return its
    /// outcome (with the full error message, if any).
    pub fn take_schedule_result(&mut self, index: u32) -> MpiResult<()> {
        self.state.requests.remove(index);
        let errors = &mut self.schedules.errors;
        match errors.iter().position(|(request, _)| *request == index) {
            Some(position) => Err(errors.swap_remove(position).1),
            None => Ok(()),
        }
    }

    /// Forget the error message kept for collective request `index` (the
    /// C layer reports the class from the status).
    pub fn forget_schedule_error(&mut self, index: u32) {
        self.schedules
            .errors
            .retain(|(request, _)| *request != index);
    }
}
