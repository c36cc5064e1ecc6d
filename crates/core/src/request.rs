//! Requests: the state of every nonblocking operation, in a slab.
//!
//! A request id is a slab index; the id carried on the wire adds a
//! generation in the high 32 bits so a late frame for a recycled slot is
//! recognised and dropped instead of corrupting an unrelated request.

use resmpi_matching::ReceivePattern;

/// Completion status of a request, in the core's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Sender's rank in the request's communicator (receives), or -1.
    pub source: i32,
    /// Message tag (receives), or -1.
    pub tag: i32,
    /// MPI error class of the operation (0 = success).
    pub error: i32,
    /// Bytes received (receives) or sent.
    pub count_bytes: usize,
    /// Whether the operation was cancelled.
    pub cancelled: bool,
}

impl Status {
    /// Status of an operation on MPI_PROC_NULL: source PROC_NULL, tag ANY_TAG, no data.
    pub fn proc_null() -> Status {
        Status {
            source: -1,
            tag: -1,
            error: 0,
            count_bytes: 0,
            cancelled: false,
        }
    }
}

/// How a send behaves (MPI's send modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// MPI_Send / MPI_Rsend: eager below the threshold, rendezvous above.
    Standard,
    /// MPI_Ssend: completes only once the receive has matched.
    Synchronous,
    /// MPI_Bsend: the data is copied into the attached buffer first.
    Buffered,
}

/// Where a send is in its protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStage {
    /// Rendezvous: request-to-send sent, waiting for clear-to-send.
    AwaitingClearToSend,
    /// Rendezvous: streaming payload fragments to the receiver's request.
    Streaming {
        /// Receiver's wire request id.
        receiver_id: u64,
        /// Bytes already handed to the path.
        offset: usize,
    },
    /// Synchronous eager send waiting for the receiver's match acknowledgement.
    AwaitingSyncAck,
    /// Rendezvous over a reliable link: every fragment is on the wire, lent
    /// from the buffer; complete once the link released them all (acked).
    AwaitingAcks,
    /// Nothing left to do.
    Done,
}

/// A send in flight.
#[derive(Debug)]
pub struct SendState {
    /// Destination world rank.
    pub peer: u32,
    /// The data (user memory, or `owned` for buffered sends).
    pub bytes: crate::user_bytes::UserBytes,
    /// Bytes to send.
    pub length: usize,
    /// Context id the message is matched in.
    pub context: u32,
    /// Message tag.
    pub tag: i32,
    /// Protocol stage.
    pub stage: SendStage,
    /// Private copy of the data (MPI_Bsend).
    pub owned: Option<Vec<u8>>,
    /// Held while reliable links keep views of `buffer` (zero-copy
    /// retransmission): the send completes when no other reference is left.
    pub loan: Option<crate::reliability::Loan>,
    /// MPI_Cancel asked the receiver to withdraw the message; the request
    /// stays incomplete until it answers.
    pub cancel_requested: bool,
    /// The message depends on a failed process (a collective step after a
    /// lost contribution): it travels flagged, and its receive fails.
    pub tainted: bool,
    /// Fan-out (an interceptor's `route_send`): other copies of this
    /// message still to complete; the request completes after them.
    pub copies_pending: u32,
    /// An extra copy of a fanned-out send: the wire id of the request
    /// that completes once every copy has.
    pub copy_of: Option<u64>,
    /// Replication: the message's logical number on its rank channel, the
    /// same in every replica (0: the engine numbers it per channel).
    pub logical_seq: u64,
    /// Replication: the application's request, whose completion the
    /// protocol holds until the acks are in.
    pub gated: bool,
    /// Replication: a substitute's re-send of a held send (the protocol
    /// hears when it is out).
    pub resend: bool,
}

impl SendState {
    /// Whether reliable links still hold fragments lent from this send's
    /// buffer (unacknowledged): it may not complete yet.
    pub fn fragments_on_loan(&self) -> bool {
        self.loan
            .as_ref()
            .is_some_and(crate::reliability::loan_outstanding)
    }
}

/// A receive in flight.
#[derive(Debug)]
pub struct ReceiveState {
    /// The user buffer.
    pub bytes: crate::user_bytes::UserBytes,
    /// Packed bytes the user buffer can hold.
    pub capacity: usize,
    /// Total bytes of the matched message (known once matched).
    pub total: usize,
    /// Payload bytes that have arrived so far.
    pub received: usize,
    /// What the receive matches.
    pub pattern: ReceivePattern,
    /// Whether a message has matched.
    pub matched: bool,
    /// World rank of the matched message's sender.
    pub sender: Option<u32>,
}

/// What a persistent request does at each MPI_Start.
#[derive(Clone, Debug)]
pub enum Persistent {
    /// MPI_Send_init and friends.
    Send {
        /// Destination comm rank (or PROC_NULL as -1).
        destination: i32,
        /// User buffer.
        bytes: crate::user_bytes::UserBytes,
        /// Packed bytes.
        length: usize,
        /// Tag.
        tag: i32,
        /// Mode.
        mode: SendMode,
    },
    /// MPI_Recv_init.
    Receive {
        /// Source comm rank, ANY_SOURCE (-2) or PROC_NULL (-1).
        source: i32,
        /// User buffer.
        bytes: crate::user_bytes::UserBytes,
        /// Packed bytes it holds.
        capacity: usize,
        /// Tag or ANY_TAG (-1).
        tag: i32,
    },
    /// MPI_Allreduce_init and the other persistent collectives: each
    /// MPI_Start starts the nonblocking collective (the C layer keeps its
    /// arguments).
    Collective,
    /// MPI_Psend_init / MPI_Precv_init (`crate::partitioned`); the C layer
    /// drives it.
    Partitioned(Box<Partitioned>),
}

/// A partitioned request: its arguments, and the state of its current
/// activation.
#[derive(Clone, Debug)]
pub struct Partitioned {
    /// A send (MPI_Psend_init) or a receive.
    pub send: bool,
    /// Destination or source comm rank (or PROC_NULL).
    pub peer: i32,
    /// User buffer: every partition, in order.
    pub bytes: crate::user_bytes::UserBytes,
    /// Packed bytes of all partitions.
    pub length: usize,
    /// The application's tag.
    pub tag: i32,
    /// Number of partitions.
    pub partitions: u32,
    /// Send: partitions marked ready in this activation.
    pub ready: Vec<bool>,
    /// Send: how many are.
    pub ready_count: u32,
    /// Send: the request that holds the activation's group open until the
    /// transfer joins it (None once it has, or for a receive).
    pub holder: Option<u32>,
}

/// The operation a request stands for.
#[derive(Debug)]
pub enum Operation {
    /// A send.
    Send(SendState),
    /// A receive.
    Receive(ReceiveState),
    /// Completes at once (PROC_NULL, inactive persistent request).
    Nothing,
    /// An MPI_Ibsend (or a start of MPI_Bsend_init): complete at once, the
    /// data being in the attached buffer. `send` is the internal send that
    /// moves it, kept in the table while this request lives so that
    /// MPI_Cancel can still withdraw the message; this request is
    /// incomplete only while such a cancel waits for its answer.
    Buffered {
        /// The internal send's slot.
        send: u32,
    },
    /// A generalized request (MPI_Grequest_start): the application
    /// completes it with MPI_Grequest_complete; the C layer keeps its
    /// callbacks.
    Generalized,
    /// An operation whose buffer the reliable links hold views of (an
    /// MPI_Rput sent without a copy): complete once they released every
    /// one, i.e. when the buffer may be reused (local completion).
    LentOut(crate::reliability::Loan),
}

/// One request slot.
#[derive(Debug)]
pub struct Request {
    /// The operation.
    pub operation: Operation,
    /// Communicator index the request belongs to.
    pub comm: usize,
    /// Whether the operation has completed.
    pub complete: bool,
    /// Status filled at completion.
    pub status: Status,
    /// Generation of this slot (wire ids carry it).
    pub generation: u32,
    /// Set for persistent requests.
    pub persistent: Option<Persistent>,
    /// MPI_Request_free was called: release the slot once complete.
    pub free_when_complete: bool,
    /// Persistent requests: the request of the operation started by MPI_Start.
    pub inner: Option<u32>,
}

/// Slab of requests with free-slot reuse.
#[derive(Debug, Default)]
pub struct RequestTable {
    slots: Vec<Option<Request>>,
    free: Vec<u32>,
    generation: u32,
}

/// Largest number of live requests (ids must fit the 26-bit handle index).
pub const MAX_REQUESTS: usize = 1 << 24;

impl RequestTable {
    /// Store a request; None when the table is full.
    pub fn insert(&mut self, mut request: Request) -> Option<u32> {
        self.generation = self.generation.wrapping_add(1);
        request.generation = self.generation;
        if let Some(index) = self.free.pop() {
            self.slots[index as usize] = Some(request);
            return Some(index);
        }
        if self.slots.len() >= MAX_REQUESTS {
            return None;
        }
        self.slots.push(Some(request));
        Some((self.slots.len() - 1) as u32)
    }

    /// Give a persistent slot a fresh generation (each MPI_Start).
    pub fn renew_generation(&mut self, index: u32) {
        self.generation = self.generation.wrapping_add(1);
        let generation = self.generation;
        if let Some(request) = self.get_mut(index) {
            request.generation = generation;
        }
    }

    /// The request at `index`, if live.
    pub fn get(&self, index: u32) -> Option<&Request> {
        self.slots
            .get(index as usize)
            .and_then(|slot| slot.as_ref())
    }

    /// The request at `index`, if live.
    pub fn get_mut(&mut self, index: u32) -> Option<&mut Request> {
        self.slots
            .get_mut(index as usize)
            .and_then(|slot| slot.as_mut())
    }

    /// The request a wire id names, if it is still that request.
    pub fn by_wire_id(&mut self, wire_id: u64) -> Option<(u32, &mut Request)> {
        let index = wire_id as u32;
        let generation = (wire_id >> 32) as u32;
        match self.get_mut(index) {
            Some(request) if request.generation == generation => Some((index, request)),
            _ => None,
        }
    }

    /// Wire id of the request at `index`.
    pub fn wire_id(&self, index: u32) -> u64 {
        let generation = self.get(index).map_or(0, |request| request.generation);
        ((generation as u64) << 32) | index as u64
    }

    /// Release a slot, dropping its request where it lies: unlike
    /// [`RequestTable::remove`] nothing is moved out (a request is a few
    /// hundred bytes). True if the slot was live.
    #[inline]
    pub fn release(&mut self, index: u32) -> bool {
        self.remove(index).is_some()
    }

    /// Release a slot. A buffered send's request lets go of its internal
    /// send: removed now if it has completed, else when it completes.
    pub fn remove(&mut self, index: u32) -> Option<Request> {
        let request = self.slots.get_mut(index as usize)?.take()?;
        self.free.push(index);
        if let Operation::Buffered { send } = request.operation {
            match self.get_mut(send) {
                Some(internal) if internal.complete => {
                    self.remove(send);
                }
                Some(internal) => internal.free_when_complete = true,
                None => {}
            }
        }
        Some(request)
    }

    /// The status a finished request reports: its own, and for a buffered
    /// send whose cancel was answered, whether the internal send was
    /// withdrawn.
    pub fn final_status(&self, index: u32) -> Option<Status> {
        let request = self.get(index)?;
        let mut status = request.status;
        if let Operation::Buffered { send } = request.operation {
            if !request.complete {
                status.cancelled = self
                    .get(send)
                    .is_some_and(|internal| internal.status.cancelled);
            }
        }
        Some(status)
    }

    /// Whether a request the application holds has nothing more to do: its
    /// own flag, or for a buffered send whose cancel is pending, the
    /// internal send's (which the cancel reopened).
    pub fn done(&self, index: u32) -> bool {
        match self.get(index) {
            None => true,
            Some(Request {
                operation: Operation::Buffered { send },
                complete: false,
                ..
            }) => self.get(*send).is_none_or(|internal| internal.complete),
            Some(request) => request.complete,
        }
    }

    /// Indices of the live requests (failure handling walks them all).
    pub fn live_indices(&self) -> Vec<u32> {
        (0..self.slots.len() as u32)
            .filter(|&index| self.slots[index as usize].is_some())
            .collect()
    }

    /// Number of live requests.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether no request is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
