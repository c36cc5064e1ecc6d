//! Direct receives: a blocking receive (MPI_Recv) that holds no request.
//!
//! Why: a blocking receive is the other half of every ping-pong and halo
//! exchange, and building a request for it (a slot in the table, a wire
//! id, the generic match and completion, a status copied out and the slot
//! released) was a fifth of the instructions of a small round trip. One
//! blocking receive at a time (the caller holds the library until it
//! returns; under MPI_THREAD_MULTIPLE a second thread's blocking receive
//! finds the field taken and posts a request) can live in one field of the
//! engine's state instead, posted to the matcher under a reserved token.
//!
//! The matcher still decides which message it gets: it is posted like any
//! receive, so MPI's ordering rules hold unchanged (a receive posted later,
//! by a nonblocking collective progressing meanwhile, cannot overtake it).
//! What it skips is only the bookkeeping. Whenever anything unusual
//! happens (the message is a rendezvous, is longer than the buffer, depends
//! on a failed process, a process fails, a communicator is revoked) the
//! direct receive is *promoted*: it becomes an ordinary request, with the
//! same buffer, pattern and place in the matcher's queue, before the event
//! is handled, so every rule of the request path (ULFM's errors, the
//! rendezvous, truncation) applies to it exactly as before. Interceptors
//! that observe or steer matching (`PINS_WILDCARDS` for wildcard receives
//! and while a receive waits deferred, `WANTS_NONDETERMINISM` for all)
//! never see a direct receive: with them, and once any failure or
//! revocation is known, blocking receives post requests.

use resmpi_ft::Interceptor;
use resmpi_matching::{Envelope, ReceivePattern};

use super::{Engine, State, SyncAnswer, Unexpected};
use crate::error::MpiResult;
use crate::request::{Operation, ReceiveState, Request, Status};
use crate::user_bytes::UserBytes;

/// The matcher token of the direct receive. Request wire ids are
/// `generation << 32 | slot`, and no table has 2^32 slots.
pub(crate) const DIRECT_RECEIVE_TOKEN: u64 = u64::MAX;

/// The one blocking receive in progress without a request.
#[derive(Debug)]
pub(crate) enum DirectReceive {
    /// Posted to the matcher under [`DIRECT_RECEIVE_TOKEN`], waiting.
    Posted {
        bytes: UserBytes,
        capacity: usize,
        comm: usize,
        pattern: ReceivePattern,
    },
    /// An eager message was copied into the buffer.
    Delivered(Status),
    /// It became request `index` (see the module comment).
    Promoted(u32),
}

/// Where a blocking receive stands.
#[derive(Debug, PartialEq, Eq)]
pub enum BlockingReceive {
    /// Received, with this status (no error).
    Done(Status),
    /// It is request `index`: wait for it and release it as any request.
    Request(u32),
    /// Posted without a request; progress until
    /// [`Engine::poll_blocking_receive`] says otherwise.
    Waiting,
}

impl<F: Interceptor> Engine<F> {
    /// Start a blocking receive (see the module comment): received at once
    /// from the unexpected queue, posted without a request, or (where a
    /// direct receive is not allowed) posted as request.
    pub fn start_blocking_receive(
        &mut self,
        comm: usize,
        bytes: UserBytes,
        capacity: usize,
        source_world: Option<u32>,
        tag: Option<i32>,
        context: u32,
    ) -> MpiResult<BlockingReceive> {
        let state = &mut self.state;
        if (F::PINS_WILDCARDS && (source_world.is_none() || !state.deferred_receives.is_empty()))
            || F::WANTS_NONDETERMINISM
            || state.failed_count > 0
            || state.revoked_count > 0
            || state.direct_receive.is_some()
        {
            return self
                .start_receive(comm, bytes, capacity, source_world, tag, context)
                .map(BlockingReceive::Request);
        }
        let pattern = ReceivePattern {
            context,
            source: source_world,
            tag,
        };
        let Some((envelope, message)) = state.matcher.post_receive(pattern, DIRECT_RECEIVE_TOKEN)
        else {
            state.direct_receive = Some(DirectReceive::Posted {
                bytes,
                capacity,
                comm,
                pattern,
            });
            return Ok(BlockingReceive::Waiting);
        };
        if let Unexpected::Eager {
            data,
            sync,
            tainted: false,
            ..
        } = &message
        {
            if data.len() <= capacity {
                let status = state.take_eager(&bytes, capacity, comm, envelope, data, *sync);
                return Ok(BlockingReceive::Done(status));
            }
        }
        let index = self.insert_request(receive_request(comm, bytes, capacity, pattern))?;
        self.state.deliver_unexpected(index, envelope, message);
        Ok(BlockingReceive::Request(index))
    }

    /// Where the direct receive stands now; `Done` and `Request` end it.
    pub fn poll_blocking_receive(&mut self) -> BlockingReceive {
        match self.state.direct_receive {
            None | Some(DirectReceive::Posted { .. }) => BlockingReceive::Waiting,
            Some(DirectReceive::Delivered(status)) => {
                self.state.direct_receive = None;
                BlockingReceive::Done(status)
            }
            Some(DirectReceive::Promoted(index)) => {
                self.state.direct_receive = None;
                BlockingReceive::Request(index)
            }
        }
    }

    /// Withdraw a direct receive still waiting (its call failed for
    /// another reason): nothing may be delivered into its buffer later.
    pub fn abandon_blocking_receive(&mut self) {
        match self.state.direct_receive.take() {
            Some(DirectReceive::Posted { .. }) => {
                self.state.matcher.cancel_receive(DIRECT_RECEIVE_TOKEN);
            }
            Some(DirectReceive::Promoted(index)) => {
                // The request path's own withdrawal.
                self.state.fail_unmatched_receive(index);
                self.state.requests.remove(index);
            }
            Some(DirectReceive::Delivered(_)) | None => {}
        }
    }
}

impl<F: Interceptor> State<F> {
    /// Whether a direct receive waits (the loop of a blocking receive).
    #[inline]
    pub fn direct_receive_waiting(&self) -> bool {
        matches!(self.direct_receive, Some(DirectReceive::Posted { .. }))
    }

    /// An eager message matched the direct receive: take it (see
    /// [`State::take_eager`]) and end the receive, unless it needs the
    /// request path (longer than the buffer, or tainted by a failure).
    /// True if taken.
    #[inline]
    pub(super) fn deliver_direct(
        &mut self,
        envelope: Envelope,
        payload: &[u8],
        tainted: bool,
        sync: Option<SyncAnswer>,
    ) -> bool {
        match &self.direct_receive {
            Some(DirectReceive::Posted { capacity, .. })
                if !tainted && payload.len() <= *capacity => {}
            _ => return false,
        }
        let Some(DirectReceive::Posted {
            bytes,
            capacity,
            comm,
            ..
        }) = self.direct_receive.take()
        else {
            unreachable!("checked above");
        };
        let status = self.take_eager(&bytes, capacity, comm, envelope, payload, sync);
        self.direct_receive = Some(DirectReceive::Delivered(status));
        true
    }

    /// An eager message goes into a blocking receive's buffer without a
    /// request (arriving, or found unexpected): copy it, give the sender
    /// its credit back, acknowledge a synchronous send, tell the protocol;
    /// returns the receive's status.
    fn take_eager(
        &mut self,
        bytes: &UserBytes,
        capacity: usize,
        comm: usize,
        envelope: Envelope,
        payload: &[u8],
        sync: Option<SyncAnswer>,
    ) -> Status {
        // SAFETY: the blocking receive's caller guarantees `capacity`
        // writable packed bytes until it returns.
        unsafe { bytes.write(capacity, 0, payload) };
        self.return_credit(envelope.source, payload.len());
        if let Some(answer) = sync {
            self.send_sync_ack(answer);
        }
        self.interceptor
            .on_receive_complete(&envelope, payload.len());
        self.direct_status(comm, envelope, payload.len())
    }

    /// Turn a waiting direct receive into request (see the module
    /// comment), keeping its place in the matcher's queue if it is still
    /// there. Returns the request's index.
    pub(super) fn promote_direct_receive(&mut self) -> Option<u32> {
        let Some(DirectReceive::Posted { .. }) = self.direct_receive else {
            return None;
        };
        let Some(DirectReceive::Posted {
            bytes,
            capacity,
            comm,
            pattern,
        }) = self.direct_receive.take()
        else {
            unreachable!("checked above");
        };
        let Some(index) = self
            .requests
            .insert(receive_request(comm, bytes, capacity, pattern))
        else {
            self.matcher.cancel_receive(DIRECT_RECEIVE_TOKEN);
            self.pending_error
                .get_or_insert(crate::error::MpiError::new(
                    crate::error::ErrorClass::Other,
                    "too many outstanding requests",
                ));
            return None;
        };
        let wire_id = self.requests.wire_id(index);
        self.matcher.replace_token(DIRECT_RECEIVE_TOKEN, wire_id);
        self.direct_receive = Some(DirectReceive::Promoted(index));
        Some(index)
    }

    fn direct_status(&self, comm: usize, envelope: Envelope, length: usize) -> Status {
        let source = self
            .comms
            .get(comm)
            .and_then(|comm| comm.as_ref())
            .and_then(|comm| comm.comm_rank_of(envelope.source))
            .map_or(envelope.source as i32, |rank| rank as i32);
        Status {
            source,
            tag: envelope.tag,
            error: 0,
            count_bytes: length,
            cancelled: false,
        }
    }
}

/// A receive request, not matched yet (`Engine::start_receive`, and a
/// direct receive promoted).
pub(super) fn receive_request(
    comm: usize,
    bytes: UserBytes,
    capacity: usize,
    pattern: ReceivePattern,
) -> Request {
    Request {
        operation: Operation::Receive(ReceiveState {
            bytes,
            capacity,
            total: 0,
            received: 0,
            pattern,
            matched: false,
            sender: None,
        }),
        comm,
        complete: false,
        status: Status::default(),
        generation: 0,
        persistent: None,
        free_when_complete: false,
        inner: None,
    }
}
