//! One-sided communication (RMA) beside the engine: every operation on a
//! window is an active message, a control frame of subtype `CONTROL_RMA`,
//! executed by the target's engine when it handles the frame.
//!
//! Why active messages in the engine and not messages on a hidden
//! communicator: a passive-target epoch must progress while the target
//! does something else. Whatever thread progresses the target's engine
//! (any MPI call, a blocked wait inside one, the background progress
//! thread) handles frames, so it also serves RMA; no layer above the
//! engine has to poll. And the frames travel like every other control
//! frame: the per-peer sequence numbers, CRC32C, retransmission and rail
//! failover of the reliable links apply to RMA traffic unchanged.
//!
//! The engine knows nothing about datatypes: the origin flattens the target
//! datatype into [`TargetBlock`]s (byte runs relative to the window base,
//! absolute addresses in a dynamic window) and its own datatype into
//! address runs where fetched bytes go. An operation larger than one frame
//! is split at element boundaries; each request frame gets exactly one
//! response (`ACK` or `REPLY` with the fetched bytes), which is how the
//! origin counts completion (flush, unlock, fence, complete).
//!
//! Ordering and atomicity: frames between two processes are handled in the
//! order they were sent, one at a time, so accumulates from one origin to
//! one target apply in program order and each element is updated
//! atomically with respect to every other RMA operation (the target
//! applies a whole frame before it handles the next).
//!
//! Locks (passive target) are a queue at the target: a lock request is
//! granted when compatible (shared with shared), else waits in FIFO order;
//! the grant is a frame back. Post/complete (PSCW) are counted notices.
//!
//! Windows whose members all share a host and whose memory the library
//! allocated skip all of this except PSCW's notices: the C layer loads and
//! stores in a shared segment (`crates/capi/src/rma_direct.rs`), when
//! [`Engine::rma_direct_possible`] says this build and the group allow it.

use std::collections::{HashMap, VecDeque};

use resmpi_ft::Interceptor;
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};

use super::{peer_failed_error, single_copy, Engine, State};
use crate::datatype::{BasicKind, PairValue, TypeInfo};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::op::{reduce_predefined, Op};
use crate::reliability::Loan;

mod lent;
pub(super) use lent::{CONTROL_RMA_PUT_DATA, CONTROL_RMA_REPLY_DATA};

/// Control-frame subtype: an RMA active message (request, response or
/// synchronisation notice), encoded below.
pub(super) const CONTROL_RMA: u64 = 6;

const KIND_PUT: u8 = 1;
const KIND_GET: u8 = 2;
const KIND_ACCUMULATE: u8 = 3;
const KIND_COMPARE_AND_SWAP: u8 = 4;
const KIND_ACK: u8 = 5;
const KIND_REPLY: u8 = 6;
const KIND_LOCK: u8 = 7;
const KIND_LOCK_GRANTED: u8 = 8;
const KIND_UNLOCK: u8 = 9;
const KIND_POST: u8 = 10;
const KIND_COMPLETE: u8 = 11;
/// A put whose bytes the target reads from the origin's memory itself
/// (`single_copy`): pid, then the origin's runs, instead of data.
const KIND_PUT_SINGLE_COPY: u8 = 12;
/// A get whose bytes the target writes into the origin's memory itself.
const KIND_GET_SINGLE_COPY: u8 = 13;
/// A get of one block whose reply is a data frame lent from the window
/// (`lent`), placed at the origin: the format of `KIND_GET`.
const KIND_GET_LENT: u8 = 14;

/// The error byte of a response whose single-copy transfer the kernel
/// refused (not an MPI error class).
const SINGLE_COPY_FAILED: u8 = 0xff;

/// kind, window, operation id, packed offset.
const COMMON_HEADER_BYTES: usize = 1 + 4 + 8 + 8;
/// What a frame spends on headers besides its blocks and data (the common
/// header, an accumulate's description, counts), rounded up.
const FRAME_OVERHEAD_BYTES: usize = 64;
/// Wire size of one [`TargetBlock`].
const BLOCK_BYTES: usize = 16;

/// A run of window bytes an operation touches at the target: relative to
/// the window's base (an absolute address in a dynamic window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetBlock {
    /// Where the run starts.
    pub offset_bytes: i64,
    /// How long it is.
    pub length_bytes: u64,
}

/// What an operation does at the target.
#[derive(Clone, Copy, Debug)]
pub enum Access {
    /// Write the origin's bytes.
    Put,
    /// Read the target's bytes back.
    Get,
    /// Combine the origin's elements into the target's with `op`
    /// (`fetch`: send the previous contents back first, Get_accumulate).
    Accumulate {
        /// A predefined op, MPI_REPLACE or MPI_NO_OP.
        op: Op,
        /// The basic element type.
        unit: TypeInfo,
        /// Return the previous contents.
        fetch: bool,
    },
    /// Replace one element by the origin's if it equals the compare value
    /// (data: origin element then compare element); returns the previous.
    CompareAndSwap {
        /// The element type.
        unit: TypeInfo,
    },
}

impl Access {
    fn fetches(&self) -> bool {
        match self {
            Access::Put => false,
            Access::Get | Access::CompareAndSwap { .. } => true,
            Access::Accumulate { fetch, .. } => *fetch,
        }
    }

    /// Whether request frames carry origin data.
    fn carries_data(&self) -> bool {
        match self {
            Access::Put | Access::CompareAndSwap { .. } => true,
            Access::Get => false,
            Access::Accumulate { op, .. } => !matches!(op, Op::NoOp),
        }
    }

    /// Bytes a frame may not split.
    fn granule_bytes(&self) -> u64 {
        match self {
            Access::Put | Access::Get => 1,
            Access::Accumulate { unit, .. } | Access::CompareAndSwap { unit } => {
                unit.extent_bytes.max(1) as u64
            }
        }
    }
}

/// Memory a window exposes here.
#[derive(Clone, Debug, Default)]
struct WindowMemory {
    base: usize,
    size_bytes: usize,
    /// MPI_Win_create_dynamic: offsets are addresses inside `regions`.
    dynamic: bool,
    /// Attached (address, length) regions of a dynamic window.
    regions: Vec<(usize, usize)>,
}

impl WindowMemory {
    /// The address of `block`, if the whole block lies in the window.
    fn address_of(&self, block: &TargetBlock) -> Option<usize> {
        let length = usize::try_from(block.length_bytes).ok()?;
        if self.dynamic {
            let address = usize::try_from(block.offset_bytes).ok()?;
            let end = address.checked_add(length)?;
            // Adjacent attached regions together cover an access that
            // crosses from one into the next.
            let mut covered = address;
            while covered < end {
                let &(base, size) = self
                    .regions
                    .iter()
                    .find(|&&(base, size)| covered >= base && covered < base + size)?;
                covered = base + size;
            }
            Some(address)
        } else {
            let offset = usize::try_from(block.offset_bytes).ok()?;
            (offset.checked_add(length)? <= self.size_bytes).then_some(self.base + offset)
        }
    }
}

/// One window's state in this process, as a target and as an origin.
#[derive(Debug, Default)]
struct WindowState {
    memory: WindowMemory,
    /// Target: the process holding the exclusive lock.
    exclusive_holder: Option<u32>,
    /// Target: the processes holding a shared lock (one entry per lock).
    shared_holders: Vec<u32>,
    /// Target: lock requests waiting, (origin, exclusive, whether the
    /// origin waits for the grant), in arrival order.
    lock_queue: VecDeque<(u32, bool, bool)>,
    /// Target: frames of origins whose lock request waits in `lock_queue`,
    /// in arrival order; handled when their lock is granted.
    deferred: VecDeque<(u32, Vec<u8>)>,
    /// Origin: MPI_Win_post notices received, per target, not yet consumed.
    posts_from: HashMap<u32, u32>,
    /// Target: MPI_Win_complete notices received, per origin.
    completes_from: HashMap<u32, u32>,
    /// Origin: request frames sent per target whose response has not come.
    responses_outstanding: HashMap<u32, u32>,
    /// Origin: lock grants received per target, not yet consumed.
    locks_granted: HashMap<u32, u32>,
    /// Origin: the first error a target reported, until a synchronisation
    /// call returns it.
    first_error: Option<MpiError>,
    /// Origin: per target, the loan the links hold a clone of while they
    /// keep a view of a put's buffer (`lent`); a flush waits for it.
    origin_loans: HashMap<u32, Loan>,
    /// Target: the loan the links hold a clone of while they keep a view
    /// of this window's memory (lent replies); free and detach wait for it.
    target_loan: Loan,
}

/// Where the fetched bytes of an operation go at the origin.
#[derive(Debug)]
struct PendingOperation {
    /// The window it works on.
    window: u32,
    /// Responses still to come.
    responses_left: u32,
    /// (address, length) runs in packed order.
    destination: Vec<(usize, usize)>,
    /// Packed offset where each destination run starts.
    destination_starts: Vec<usize>,
}

/// Windows and operations in flight.
#[derive(Debug, Default)]
pub struct RmaState {
    windows: HashMap<u32, WindowState>,
    operations: HashMap<u64, PendingOperation>,
    next_operation_id: u64,
}

fn encode_op(op: Op) -> MpiResult<u8> {
    Ok(match op {
        Op::Max => 0,
        Op::Min => 1,
        Op::Sum => 2,
        Op::Prod => 3,
        Op::LogicalAnd => 4,
        Op::BitwiseAnd => 5,
        Op::LogicalOr => 6,
        Op::BitwiseOr => 7,
        Op::LogicalXor => 8,
        Op::BitwiseXor => 9,
        Op::MinLoc => 10,
        Op::MaxLoc => 11,
        Op::Replace => 12,
        Op::NoOp => 13,
        Op::User { .. } => {
            return Err(MpiError::new(
                ErrorClass::Op,
                "RMA accumulates take predefined ops only (MPI-4.0 12.3.4), not user-defined ones",
            ))
        }
    })
}

fn decode_op(code: u8) -> Option<Op> {
    Some(match code {
        0 => Op::Max,
        1 => Op::Min,
        2 => Op::Sum,
        3 => Op::Prod,
        4 => Op::LogicalAnd,
        5 => Op::BitwiseAnd,
        6 => Op::LogicalOr,
        7 => Op::BitwiseOr,
        8 => Op::LogicalXor,
        9 => Op::BitwiseXor,
        10 => Op::MinLoc,
        11 => Op::MaxLoc,
        12 => Op::Replace,
        13 => Op::NoOp,
        _ => return None,
    })
}

const KINDS: [BasicKind; 23] = [
    BasicKind::I8,
    BasicKind::U8,
    BasicKind::I16,
    BasicKind::U16,
    BasicKind::I32,
    BasicKind::U32,
    BasicKind::I64,
    BasicKind::U64,
    BasicKind::F32,
    BasicKind::F64,
    BasicKind::LongDouble,
    BasicKind::Bool,
    BasicKind::ComplexF32,
    BasicKind::ComplexF64,
    BasicKind::ComplexLongDouble,
    BasicKind::Byte,
    BasicKind::Char,
    BasicKind::Pair(PairValue::F32),
    BasicKind::Pair(PairValue::F64),
    BasicKind::Pair(PairValue::I64),
    BasicKind::Pair(PairValue::I32),
    BasicKind::Pair(PairValue::I16),
    BasicKind::Pair(PairValue::LongDouble),
];

fn encode_unit(unit: &TypeInfo, out: &mut Vec<u8>) {
    let kind = KINDS
        .iter()
        .position(|kind| *kind == unit.kind)
        .expect("every kind is listed") as u8;
    out.push(kind);
    out.extend_from_slice(&(unit.size_bytes as u32).to_le_bytes());
    out.extend_from_slice(&(unit.extent_bytes as u32).to_le_bytes());
    out.extend_from_slice(&(unit.basic_elements as u32).to_le_bytes());
}

/// A checked reader of a frame's payload.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < count {
            return None;
        }
        let (head, rest) = self.bytes.split_at(count);
        self.bytes = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn unit(&mut self) -> Option<TypeInfo> {
        let kind = *KINDS.get(self.u8()? as usize)?;
        let size_bytes = self.u32()? as usize;
        let extent_bytes = self.u32()? as usize;
        let basic_elements = self.u32()? as usize;
        if size_bytes == 0 || extent_bytes < size_bytes {
            return None;
        }
        Some(TypeInfo {
            size_bytes,
            extent_bytes,
            basic_elements,
            kind,
        })
    }
    fn blocks(&mut self) -> Option<Vec<TargetBlock>> {
        let count = self.u32()? as usize;
        if count > self.bytes.len() / BLOCK_BYTES {
            return None;
        }
        (0..count)
            .map(|_| {
                Some(TargetBlock {
                    offset_bytes: self.u64()? as i64,
                    length_bytes: self.u64()?,
                })
            })
            .collect()
    }
}

/// A frame built in place: `HEADER_LEN_BYTES` of room for the frame header
/// (written when it is sent), then the common RMA header; `more_bytes` is
/// what the caller will append (blocks, data), reserved now so a large
/// payload is written once and never moved (`Engine::send_built_frame`).
fn frame_with_header(
    kind: u8,
    window: u32,
    operation: u64,
    packed_offset: u64,
    more_bytes: usize,
) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_LEN_BYTES + COMMON_HEADER_BYTES + more_bytes);
    bytes.resize(HEADER_LEN_BYTES, 0);
    bytes.push(kind);
    bytes.extend_from_slice(&window.to_le_bytes());
    bytes.extend_from_slice(&operation.to_le_bytes());
    bytes.extend_from_slice(&packed_offset.to_le_bytes());
    bytes
}

/// The frame header of an RMA frame built by [`frame_with_header`].
fn rma_frame_header(rank: u32, frame: &[u8]) -> FrameHeader {
    let mut header = FrameHeader::new(FrameKind::Control, rank);
    header.message_id = CONTROL_RMA;
    header.payload_len = (frame.len() - HEADER_LEN_BYTES) as u32;
    header
}

fn push_blocks(out: &mut Vec<u8>, blocks: &[TargetBlock]) {
    out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
    for block in blocks {
        out.extend_from_slice(&block.offset_bytes.to_le_bytes());
        out.extend_from_slice(&block.length_bytes.to_le_bytes());
    }
}

/// One request frame's share of an operation: its blocks, and where its
/// bytes start in the operation's packed stream.
#[derive(Debug, PartialEq, Eq)]
struct FramePlan {
    blocks: Vec<TargetBlock>,
    packed_start: u64,
    packed_length: u64,
}

/// Split `blocks` into frames of at most `budget_bytes` (each block costs
/// its wire description plus its bytes, which bounds both the request and
/// the response), never splitting inside a `granule_bytes` element.
fn plan_frames(blocks: &[TargetBlock], granule_bytes: u64, budget_bytes: usize) -> Vec<FramePlan> {
    let budget = budget_bytes as u64;
    let mut plans = Vec::new();
    let mut current: Vec<TargetBlock> = Vec::new();
    let (mut cost, mut packed, mut start) = (0u64, 0u64, 0u64);
    for block in blocks {
        let (mut offset, mut left) = (block.offset_bytes, block.length_bytes);
        while left > 0 {
            let room = budget.saturating_sub(cost + BLOCK_BYTES as u64);
            let take = left.min(room - room % granule_bytes);
            if take == 0 {
                plans.push(FramePlan {
                    blocks: std::mem::take(&mut current),
                    packed_start: start,
                    packed_length: packed - start,
                });
                start = packed;
                cost = 0;
                continue;
            }
            current.push(TargetBlock {
                offset_bytes: offset,
                length_bytes: take,
            });
            cost += BLOCK_BYTES as u64 + take;
            offset += take as i64;
            left -= take;
            packed += take;
        }
    }
    if !current.is_empty() {
        plans.push(FramePlan {
            blocks: current,
            packed_start: start,
            packed_length: packed - start,
        });
    }
    plans
}

fn window_unknown(window: u32) -> MpiError {
    MpiError::new(
        ErrorClass::Win,
        format!("window {window} is not registered with the engine"),
    )
}

impl<F: Interceptor> Engine<F> {
    /// Expose `size_bytes` at `base` as window `window` (an id every member
    /// uses for the same window). `dynamic`: memory comes with attach.
    ///
    /// # Safety
    /// `[base, base + size_bytes)` must stay valid for reads and writes
    /// until [`Engine::rma_unregister`]; peers write it from any progress call.
    pub unsafe fn rma_register(
        &mut self,
        window: u32,
        base: *mut u8,
        size_bytes: usize,
        dynamic: bool,
    ) {
        let state = self.state.rma.windows.entry(window).or_default();
        state.memory = WindowMemory {
            base: base as usize,
            size_bytes,
            dynamic,
            regions: Vec::new(),
        };
    }

    /// Whether a window over the world ranks `group` may take the direct
    /// path of the C layer (loads and stores in a shared segment instead
    /// of active messages): this build's protocol has no hooks (a protocol
    /// that logs or replicates must see every operation as a frame), this
    /// process has a shared-memory path, and every member is this process
    /// or reached over shared memory (so on this host). Depends only on
    /// the build, the job's layout and the group, never on timing; the
    /// caller still agrees on it with every member (environment switches
    /// may differ).
    pub fn rma_direct_possible(&self, group: &[u32]) -> bool {
        !Self::protocol_has_hooks()
            && self.transports.shm.is_some()
            && group.iter().all(|&peer| {
                matches!(
                    self.transports.routes.get(peer as usize),
                    Some(crate::transport::Route::Shm | crate::transport::Route::Loopback)
                )
            })
    }

    /// Whether this build's protocol has hooks: one that logs or
    /// replicates must see every operation as a request frame.
    fn protocol_has_hooks() -> bool {
        F::ROUTES_SENDS
            || F::WANTS_PAYLOADS
            || F::PINS_WILDCARDS
            || F::WANTS_NONDETERMINISM
            || F::SENDS_PROTOCOL_FRAMES
            || F::USES_TIMERS
            || F::REPLICATES
    }

    /// Forget window `window` (MPI_Win_free, after its last epoch), once
    /// no link holds a view of its memory any more (the application may
    /// free that memory next). An error of that wait (the job is ending)
    /// is the progress loop's to report, not this call's.
    pub fn rma_unregister(&mut self, window: u32) {
        let _ = self.wait_window_views_returned(window);
        self.state.rma.windows.remove(&window);
    }

    /// MPI_Win_attach: expose `[base, base + size_bytes)` in dynamic window `window`.
    ///
    /// # Safety
    /// The memory must stay valid for reads and writes until detached.
    pub unsafe fn rma_attach(
        &mut self,
        window: u32,
        base: *mut u8,
        size_bytes: usize,
    ) -> MpiResult<()> {
        let state = self
            .state
            .rma
            .windows
            .get_mut(&window)
            .ok_or_else(|| window_unknown(window))?;
        state.memory.regions.push((base as usize, size_bytes));
        Ok(())
    }

    /// MPI_Win_detach: withdraw the region attached at `base`, once no
    /// link holds a view of the window's memory (a lent reply).
    pub fn rma_detach(&mut self, window: u32, base: *const u8) -> MpiResult<()> {
        if self.state.rma.windows.contains_key(&window) {
            self.wait_window_views_returned(window)?;
        }
        let state = self
            .state
            .rma
            .windows
            .get_mut(&window)
            .ok_or_else(|| window_unknown(window))?;
        let Some(position) = state
            .memory
            .regions
            .iter()
            .position(|&(start, _)| start == base as usize)
        else {
            return Err(MpiError::new(
                ErrorClass::RmaAttach,
                format!("no memory attached at {base:?} in this window"),
            ));
        };
        state.memory.regions.remove(position);
        Ok(())
    }

    /// Send `frame` (from [`frame_with_header`]) to `peer`.
    fn rma_send(&mut self, peer: u32, frame: Vec<u8>) -> MpiResult<()> {
        if self.rma_peer_lost(peer) {
            return Err(self.rma_lost_error(peer));
        }
        if peer == self.state.rank {
            // To itself: handled now, as MPICH applies operations on its
            // own window at once. Through the loopback queue, which a
            // progress round drains after the other paths, a frame of
            // another process that causally follows this one could be
            // applied first: mpi4py's MCS mutex resets its own `next`
            // field, publishes itself at the tail, and its successor then
            // writes `next`; applied in the wrong order the reset erased
            // the successor and the holder waited for it forever.
            self.state
                .handle_rma_frame(peer, &frame[HEADER_LEN_BYTES..]);
            return Ok(());
        }
        let header = rma_frame_header(self.state.wire_rank, &frame);
        self.send_built_frame(peer, &header, frame)
    }

    /// Start one operation on window `window` at world rank `target`:
    /// `blocks` at the target, `data` the origin's packed bytes (for puts
    /// and accumulates), `destination` the (address, length) runs where
    /// fetched bytes go. Returns the operation's id for
    /// [`Engine::rma_operation_done`].
    ///
    /// # Safety
    /// The `destination` runs must stay valid for writes until the
    /// operation is done.
    pub unsafe fn rma_issue(
        &mut self,
        window: u32,
        target: u32,
        access: Access,
        blocks: &[TargetBlock],
        data: &[u8],
        destination: Vec<(usize, usize)>,
    ) -> MpiResult<u64> {
        if !self.state.rma.windows.contains_key(&window) {
            return Err(window_unknown(window));
        }
        let operation = self.state.rma.next_operation_id;
        self.state.rma.next_operation_id += 1;
        let max_payload_bytes = self.transports.max_payload_bytes(target);
        let budget_bytes = match access {
            // Origin and compare values travel together.
            Access::CompareAndSwap { .. } => max_payload_bytes / 2,
            _ => max_payload_bytes,
        }
        .saturating_sub(FRAME_OVERHEAD_BYTES);
        let plans = plan_frames(blocks, access.granule_bytes(), budget_bytes);
        let mut destination_starts = Vec::with_capacity(destination.len());
        let mut start = 0;
        for &(_, length) in &destination {
            destination_starts.push(start);
            start += length;
        }
        if access.fetches() && !plans.is_empty() {
            self.state.rma.operations.insert(
                operation,
                PendingOperation {
                    window,
                    responses_left: plans.len() as u32,
                    destination,
                    destination_starts,
                },
            );
        }
        for plan in &plans {
            let kind = match access {
                Access::Put => KIND_PUT,
                Access::Get => KIND_GET,
                Access::Accumulate { .. } => KIND_ACCUMULATE,
                Access::CompareAndSwap { .. } => KIND_COMPARE_AND_SWAP,
            };
            let data_bytes = if access.carries_data() {
                match access {
                    Access::CompareAndSwap { .. } => data.len(),
                    _ => plan.packed_length as usize,
                }
            } else {
                0
            };
            let mut payload = frame_with_header(
                kind,
                window,
                operation,
                plan.packed_start,
                FRAME_OVERHEAD_BYTES + plan.blocks.len() * BLOCK_BYTES + data_bytes,
            );
            match access {
                Access::Accumulate { op, unit, fetch } => {
                    payload.push(encode_op(op)?);
                    payload.push(fetch as u8);
                    encode_unit(&unit, &mut payload);
                }
                Access::CompareAndSwap { unit } => encode_unit(&unit, &mut payload),
                _ => {}
            }
            push_blocks(&mut payload, &plan.blocks);
            if access.carries_data() {
                let start = plan.packed_start as usize;
                let end = start + plan.packed_length as usize;
                match access {
                    Access::CompareAndSwap { .. } => payload.extend_from_slice(data),
                    _ => payload.extend_from_slice(data.get(start..end).ok_or_else(|| {
                        MpiError::new(
                            ErrorClass::Intern,
                            "RMA origin data shorter than its target",
                        )
                    })?),
                }
            }
            self.send_request_frame(window, target, payload)?;
        }
        Ok(operation)
    }

    /// Start a put or get of at least [`single_copy::SINGLE_COPY_MIN_BYTES`]
    /// as one frame that names the origin's memory, `origin` (address,
    /// length) runs in packed order, which the target copies from or into
    /// itself. Returns None (and sends nothing) where that cannot be done:
    /// another access, a small or highly scattered operation, a target not
    /// on this host's shared memory, a build whose protocol must see every
    /// byte, or a kernel that refuses cross-memory attach.
    ///
    /// # Safety
    /// The `origin` runs must stay valid (for reads: a put; for writes: a
    /// get) and untouched until the operation is complete at the target
    /// (a put: the next flush, unlock, complete or fence; a get: done).
    pub unsafe fn rma_issue_single_copy(
        &mut self,
        window: u32,
        target: u32,
        access: Access,
        blocks: &[TargetBlock],
        origin: &[(usize, usize)],
    ) -> MpiResult<Option<u64>> {
        let put = match access {
            Access::Put => true,
            Access::Get => false,
            _ => return Ok(None),
        };
        let total: usize = origin.iter().map(|&(_, length)| length).sum();
        let description_bytes = (blocks.len() + origin.len()) * BLOCK_BYTES + FRAME_OVERHEAD_BYTES;
        let possible = total >= single_copy::SINGLE_COPY_MIN_BYTES
            && description_bytes <= self.transports.max_payload_bytes(target)
            && target != self.state.rank
            && matches!(
                self.transports.routes.get(target as usize),
                Some(crate::transport::Route::Shm)
            )
            && self.rma_direct_possible(&[target])
            && self.state.rma.windows.contains_key(&window)
            && single_copy::available()
                .map_err(|problem| MpiError::new(ErrorClass::Other, problem))?;
        if !possible {
            return Ok(None);
        }
        let operation = self.state.rma.next_operation_id;
        self.state.rma.next_operation_id += 1;
        let kind = if put {
            KIND_PUT_SINGLE_COPY
        } else {
            KIND_GET_SINGLE_COPY
        };
        let mut frame = frame_with_header(kind, window, operation, 0, description_bytes);
        frame.extend_from_slice(&std::process::id().to_le_bytes());
        push_blocks(&mut frame, blocks);
        let runs: Vec<TargetBlock> = origin
            .iter()
            .map(|&(address, length)| TargetBlock {
                offset_bytes: address as i64,
                length_bytes: length as u64,
            })
            .collect();
        push_blocks(&mut frame, &runs);
        if !put {
            // Counted like a fetch: the reply carries no bytes (they are
            // in place already) but ends the operation.
            self.state.rma.operations.insert(
                operation,
                PendingOperation {
                    window,
                    responses_left: 1,
                    destination: Vec::new(),
                    destination_starts: Vec::new(),
                },
            );
        }
        self.send_request_frame(window, target, frame)?;
        Ok(Some(operation))
    }

    /// Send a request frame of registered window `window`, whose response
    /// a flush of `target` waits for.
    fn send_request_frame(&mut self, window: u32, target: u32, frame: Vec<u8>) -> MpiResult<()> {
        self.count_request(window, target);
        self.rma_send(target, frame)
    }

    /// One more frame to `target` on `window` whose response a flush waits for.
    fn count_request(&mut self, window: u32, target: u32) {
        if let Some(state) = self.state.rma.windows.get_mut(&window) {
            *state.responses_outstanding.entry(target).or_default() += 1;
        }
    }

    /// Whether operation `operation`'s fetched bytes have all arrived
    /// (always true for operations that fetch nothing).
    pub fn rma_operation_done(&self, operation: u64) -> bool {
        !self.state.rma.operations.contains_key(&operation)
    }

    /// Wait for operation `operation` (request-based RMA) at `target`.
    pub fn rma_wait_operation(&mut self, operation: u64, target: u32) -> MpiResult<()> {
        self.wait_until(|engine| {
            engine.rma_operation_done(operation) || engine.rma_peer_lost(target)
        })?;
        if !self.rma_operation_done(operation) {
            self.state.rma.operations.remove(&operation);
            return Err(self.rma_lost_error(target));
        }
        Ok(())
    }

    fn outstanding(&self, window: u32, target: Option<u32>) -> u32 {
        self.state
            .rma
            .windows
            .get(&window)
            .map_or(0, |state| match target {
                Some(target) => state
                    .responses_outstanding
                    .get(&target)
                    .copied()
                    .unwrap_or(0),
                None => state.responses_outstanding.values().sum(),
            })
    }

    fn any_failed(&self, targets: &[u32]) -> Option<u32> {
        targets
            .iter()
            .copied()
            .find(|&peer| self.rma_peer_lost(peer))
    }

    /// Whether `peer` will never answer this process's RMA frames: it has
    /// failed, or (replication) it is a dead replica. Replication masks a
    /// dead replica for point-to-point traffic (a substitute re-sends), not
    /// for RMA: windows and epochs live in each process, and frames to a
    /// dead replica are dropped, so a wait for its answer would never end.
    fn rma_peer_lost(&self, peer: u32) -> bool {
        self.peer_failed(peer)
            || (F::REPLICATES
                && (self.state.interceptor.replica_dead(peer)
                    || self.state.interceptor.replica_shown_dead(peer)))
    }

    /// Replication: an error when a member of a window (`members`, world
    /// ranks) is a dead replica. A synchronisation over point-to-point
    /// messages (a fence's barrier, the application's own barrier before it
    /// locks its own window) completes on a substitute's word, which does
    /// not cover the dead replica's operations on this process's window;
    /// the synchronisation calls check here so that the program never reads
    /// a window those operations missed.
    pub fn rma_members_intact(&self, members: &[u32]) -> MpiResult<()> {
        if !F::REPLICATES {
            return Ok(());
        }
        match self.any_failed(members) {
            Some(peer) => Err(self.rma_lost_error(peer)),
            None => Ok(()),
        }
    }

    /// The error of an RMA call that needs `peer` (see `rma_peer_lost`).
    fn rma_lost_error(&self, peer: u32) -> MpiError {
        if self.peer_failed(peer) {
            return peer_failed_error(peer);
        }
        MpiError::new(
            ErrorClass::ProcFailed,
            format!(
                "process {peer}, a replica that this process's RMA epochs target, has died: replication does not mask RMA (--replica-masking replica gives up the whole replica set instead)"
            ),
        )
    }

    /// Complete every operation of this process on `window` at `target`
    /// (all targets when None) at the target (MPI_Win_flush and the
    /// synchronisation calls built on it); returns the first error a
    /// target reported.
    pub fn rma_flush(&mut self, window: u32, target: Option<u32>) -> MpiResult<()> {
        let targets: Vec<u32> = match target {
            Some(target) => vec![target],
            None => self
                .state
                .rma
                .windows
                .get(&window)
                .map(|state| state.responses_outstanding.keys().copied().collect())
                .unwrap_or_default(),
        };
        // Lent put buffers are the application's again only when the links
        // let go of them too (acknowledged: with the response, as a rule).
        self.wait_until(|engine| {
            (engine.outstanding(window, target) == 0
                && engine.origin_views_returned(window, target))
                || engine.any_failed(&targets).is_some()
        })?;
        if let Some(peer) = self.any_failed(&targets) {
            if let Some(state) = self.state.rma.windows.get_mut(&window) {
                state.responses_outstanding.remove(&peer);
            }
            return Err(self.rma_lost_error(peer));
        }
        match self
            .state
            .rma
            .windows
            .get_mut(&window)
            .and_then(|state| state.first_error.take())
        {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// MPI_Win_lock: ask `target` for its lock. The target holds back this
    /// process's later frames until it grants the lock, so the call need
    /// not wait (one round trip less per epoch, as MPICH); it waits for the
    /// grant only when `wait_for_grant` (the caller will load or store the
    /// window memory directly: its own, or a shared window's).
    pub fn rma_lock(
        &mut self,
        window: u32,
        target: u32,
        exclusive: bool,
        wait_for_grant: bool,
    ) -> MpiResult<()> {
        let mut frame = frame_with_header(KIND_LOCK, window, 0, 0, 2);
        frame.push(exclusive as u8);
        frame.push(wait_for_grant as u8);
        self.rma_send(target, frame)?;
        if !wait_for_grant {
            return Ok(());
        }
        self.wait_until(|engine| {
            engine
                .state
                .rma
                .windows
                .get(&window)
                .is_none_or(|state| state.locks_granted.get(&target).copied().unwrap_or(0) > 0)
                || engine.rma_peer_lost(target)
        })?;
        if self.rma_peer_lost(target) {
            return Err(self.rma_lost_error(target));
        }
        let state = self
            .state
            .rma
            .windows
            .get_mut(&window)
            .ok_or_else(|| window_unknown(window))?;
        *state.locks_granted.entry(target).or_default() -= 1;
        Ok(())
    }

    /// MPI_Win_unlock: complete this process's operations at `target`,
    /// then release its lock there.
    pub fn rma_unlock(&mut self, window: u32, target: u32) -> MpiResult<()> {
        let flushed = self.rma_flush(window, Some(target));
        let released = self.rma_send(target, frame_with_header(KIND_UNLOCK, window, 0, 0, 0));
        flushed.and(released)
    }

    /// MPI_Win_post: tell each origin in `origins` that its access epoch may start.
    pub fn rma_post(&mut self, window: u32, origins: &[u32]) -> MpiResult<()> {
        for &origin in origins {
            self.rma_send(origin, frame_with_header(KIND_POST, window, 0, 0, 0))?;
        }
        Ok(())
    }

    /// MPI_Win_start: wait until each target in `targets` posted.
    pub fn rma_wait_posts(&mut self, window: u32, targets: &[u32]) -> MpiResult<()> {
        self.wait_until(|engine| {
            engine.any_failed(targets).is_some()
                || engine.state.rma.windows.get(&window).is_none_or(|state| {
                    targets
                        .iter()
                        .all(|target| state.posts_from.get(target).copied().unwrap_or(0) > 0)
                })
        })?;
        if let Some(peer) = self.any_failed(targets) {
            return Err(self.rma_lost_error(peer));
        }
        let state = self
            .state
            .rma
            .windows
            .get_mut(&window)
            .ok_or_else(|| window_unknown(window))?;
        for target in targets {
            *state.posts_from.entry(*target).or_default() -= 1;
        }
        Ok(())
    }

    /// MPI_Win_complete: complete this epoch's operations at each target
    /// and tell it so.
    pub fn rma_complete(&mut self, window: u32, targets: &[u32]) -> MpiResult<()> {
        let mut result = Ok(());
        for &target in targets {
            let flushed = self.rma_flush(window, Some(target));
            if result.is_ok() {
                result = flushed;
            }
        }
        for &target in targets {
            let sent = self.rma_send(target, frame_with_header(KIND_COMPLETE, window, 0, 0, 0));
            if result.is_ok() {
                result = sent;
            }
        }
        result
    }

    /// MPI_Win_wait (`block`) or MPI_Win_test: whether every origin in
    /// `origins` completed its epoch; consumes the notices when so.
    pub fn rma_wait_completes(
        &mut self,
        window: u32,
        origins: &[u32],
        block: bool,
    ) -> MpiResult<bool> {
        let all_done = |engine: &Engine<F>| {
            engine.state.rma.windows.get(&window).is_none_or(|state| {
                origins
                    .iter()
                    .all(|origin| state.completes_from.get(origin).copied().unwrap_or(0) > 0)
            })
        };
        if block {
            self.wait_until(|engine| all_done(engine) || engine.any_failed(origins).is_some())?;
        } else {
            self.progress()?;
        }
        if !all_done(self) {
            if let Some(peer) = self.any_failed(origins) {
                return Err(self.rma_lost_error(peer));
            }
            return Ok(false);
        }
        let state = self
            .state
            .rma
            .windows
            .get_mut(&window)
            .ok_or_else(|| window_unknown(window))?;
        for origin in origins {
            *state.completes_from.entry(*origin).or_default() -= 1;
        }
        Ok(true)
    }
}

impl<F: Interceptor> State<F> {
    /// Queue `frame` (from [`frame_with_header`]) for `peer`, as it is.
    fn rma_queue(&mut self, peer: u32, frame: Vec<u8>) {
        let header = rma_frame_header(self.wire_rank, &frame);
        self.queue_built_frame(peer, &header, frame);
    }

    fn malformed_rma(&mut self, peer: u32) {
        self.pending_error.get_or_insert(MpiError::new(
            ErrorClass::Intern,
            format!("malformed RMA frame from rank {peer}"),
        ));
    }

    /// An RMA frame from `peer`.
    pub(super) fn handle_rma_frame(&mut self, peer: u32, payload: &[u8]) {
        if self.handle_rma_frame_checked(peer, payload).is_none() {
            self.malformed_rma(peer);
        }
    }

    fn handle_rma_frame_checked(&mut self, peer: u32, payload: &[u8]) -> Option<()> {
        let mut reader = Reader { bytes: payload };
        let kind = reader.u8()?;
        let window = reader.u32()?;
        let operation = reader.u64()?;
        let packed_offset = reader.u64()?;
        let held_back = matches!(
            kind,
            KIND_PUT
                | KIND_GET
                | KIND_ACCUMULATE
                | KIND_COMPARE_AND_SWAP
                | KIND_LOCK
                | KIND_UNLOCK
                | KIND_PUT_SINGLE_COPY
                | KIND_GET_SINGLE_COPY
                | KIND_GET_LENT
        );
        if held_back {
            if let Some(state) = self.rma.windows.get_mut(&window) {
                if state.lock_queue.iter().any(|&(origin, ..)| origin == peer) {
                    // Its lock is not granted yet: everything it sends
                    // after the request waits, in order.
                    state.deferred.push_back((peer, payload.to_vec()));
                    return Some(());
                }
            }
        }
        match kind {
            KIND_PUT | KIND_GET | KIND_ACCUMULATE | KIND_COMPARE_AND_SWAP => {
                let access = match kind {
                    KIND_PUT => Access::Put,
                    KIND_GET => Access::Get,
                    KIND_ACCUMULATE => {
                        let op = decode_op(reader.u8()?)?;
                        let fetch = reader.u8()? != 0;
                        let unit = reader.unit()?;
                        Access::Accumulate { op, unit, fetch }
                    }
                    _ => Access::CompareAndSwap {
                        unit: reader.unit()?,
                    },
                };
                let blocks = reader.blocks()?;
                let data = reader.bytes;
                let response = if access.fetches() {
                    KIND_REPLY
                } else {
                    KIND_ACK
                };
                // The response echoes the request's header; fetched bytes
                // are read from the window straight into it.
                let fetched_bytes: u64 = if access.fetches() {
                    blocks.iter().map(|block| block.length_bytes).sum()
                } else {
                    0
                };
                let mut frame = frame_with_header(
                    response,
                    window,
                    operation,
                    packed_offset,
                    1 + fetched_bytes as usize,
                );
                frame.push(0);
                if let Err(class) = self.apply_rma(window, access, &blocks, data, &mut frame) {
                    frame.truncate(HEADER_LEN_BYTES + COMMON_HEADER_BYTES);
                    frame.push(class as u8);
                }
                self.rma_queue(peer, frame);
            }
            KIND_PUT_SINGLE_COPY | KIND_GET_SINGLE_COPY => {
                let pid = reader.u32()?;
                let blocks = reader.blocks()?;
                let origin = reader.blocks()?;
                let put = kind == KIND_PUT_SINGLE_COPY;
                let class = self.apply_single_copy(window, put, pid, &blocks, &origin);
                let response = if put { KIND_ACK } else { KIND_REPLY };
                let mut frame = frame_with_header(response, window, operation, packed_offset, 1);
                frame.push(class);
                self.rma_queue(peer, frame);
            }
            KIND_GET_LENT => {
                let blocks = reader.blocks()?;
                self.reply_lent(peer, window, operation, packed_offset, &blocks);
            }
            KIND_ACK | KIND_REPLY => {
                let class = reader.u8()?;
                let data = reader.bytes;
                self.rma_response(peer, window, operation, packed_offset, class, data);
            }
            KIND_LOCK => {
                let exclusive = reader.u8()? != 0;
                let notify = reader.u8()? != 0;
                if let Some(state) = self.rma.windows.get_mut(&window) {
                    state.lock_queue.push_back((peer, exclusive, notify));
                }
                self.grant_locks(window);
            }
            KIND_UNLOCK => {
                if let Some(state) = self.rma.windows.get_mut(&window) {
                    if state.exclusive_holder == Some(peer) {
                        state.exclusive_holder = None;
                    } else {
                        if let Some(position) = state
                            .shared_holders
                            .iter()
                            .position(|&holder| holder == peer)
                        {
                            state.shared_holders.swap_remove(position);
                        }
                    }
                }
                self.grant_locks(window);
            }
            KIND_LOCK_GRANTED | KIND_POST | KIND_COMPLETE => {
                if let Some(state) = self.rma.windows.get_mut(&window) {
                    let counters = match kind {
                        KIND_LOCK_GRANTED => &mut state.locks_granted,
                        KIND_POST => &mut state.posts_from,
                        _ => &mut state.completes_from,
                    };
                    *counters.entry(peer).or_default() += 1;
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// Process `peer` has failed: the locks it held at this process's
    /// windows are released and its queued requests and held-back frames
    /// dropped, so that a survivor's lock does not wait for an unlock that
    /// never comes; then waiting locks are granted. What its epoch had
    /// applied stays (each frame is applied whole or not at all).
    pub(super) fn rma_peer_failed(&mut self, peer: u32) {
        let windows: Vec<u32> = self.rma.windows.keys().copied().collect();
        for window in windows {
            if let Some(state) = self.rma.windows.get_mut(&window) {
                if state.exclusive_holder == Some(peer) {
                    state.exclusive_holder = None;
                }
                state.shared_holders.retain(|&holder| holder != peer);
                state.lock_queue.retain(|&(origin, ..)| origin != peer);
                state.deferred.retain(|(origin, _)| *origin != peer);
            }
            self.grant_locks(window);
        }
    }

    /// Grant queued lock requests of `window` in order while compatible,
    /// then handle the frames each granted origin sent after its request.
    fn grant_locks(&mut self, window: u32) {
        let mut granted = Vec::new();
        if let Some(state) = self.rma.windows.get_mut(&window) {
            while let Some(&(origin, exclusive, notify)) = state.lock_queue.front() {
                let free = state.exclusive_holder.is_none()
                    && (!exclusive || state.shared_holders.is_empty());
                if !free {
                    break;
                }
                state.lock_queue.pop_front();
                if exclusive {
                    state.exclusive_holder = Some(origin);
                } else {
                    state.shared_holders.push(origin);
                }
                granted.push((origin, notify));
            }
        }
        for (origin, notify) in granted {
            if notify {
                self.rma_queue(
                    origin,
                    frame_with_header(KIND_LOCK_GRANTED, window, 0, 0, 0),
                );
            }
            // Its held-back frames, in order; one may be a new request
            // that is held back again, or an unlock that grants others.
            let frames: Vec<Vec<u8>> = match self.rma.windows.get_mut(&window) {
                Some(state) => {
                    let (mine, others): (VecDeque<_>, VecDeque<_>) = state
                        .deferred
                        .drain(..)
                        .partition(|(peer, _)| *peer == origin);
                    state.deferred = others;
                    mine.into_iter().map(|(_, frame)| frame).collect()
                }
                None => Vec::new(),
            };
            for frame in frames {
                self.handle_rma_frame(origin, &frame);
            }
        }
    }

    /// Execute one request frame on this process's window memory,
    /// appending the fetched bytes to `fetched` (the response frame);
    /// returns the error class to report.
    fn apply_rma(
        &mut self,
        window: u32,
        access: Access,
        blocks: &[TargetBlock],
        data: &[u8],
        fetched: &mut Vec<u8>,
    ) -> Result<(), ErrorClass> {
        let state = self.rma.windows.get(&window).ok_or(ErrorClass::Win)?;
        let mut addresses = Vec::with_capacity(blocks.len());
        for block in blocks {
            addresses.push((
                state.memory.address_of(block).ok_or(ErrorClass::RmaRange)?,
                block.length_bytes as usize,
            ));
        }
        let total: usize = addresses.iter().map(|&(_, length)| length).sum();
        if access.carries_data() {
            let expected = match access {
                Access::CompareAndSwap { .. } => 2 * total,
                _ => total,
            };
            if data.len() != expected {
                return Err(ErrorClass::Intern);
            }
        }
        let fetched_start = fetched.len();
        if access.fetches() {
            fetched.reserve(total);
            for &(address, length) in &addresses {
                // SAFETY: inside memory registered with rma_register or
                // rma_attach, valid until unregistered (their contract).
                fetched.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(address as *const u8, length)
                });
            }
        }
        let mut consumed = 0;
        match access {
            Access::Get => {}
            Access::Put => {
                for &(address, length) in &addresses {
                    // SAFETY: as above; `data` holds `total` bytes (checked).
                    unsafe {
                        std::ptr::copy(data[consumed..].as_ptr(), address as *mut u8, length)
                    };
                    consumed += length;
                }
            }
            Access::Accumulate { op, unit, .. } => {
                if matches!(op, Op::NoOp) {
                    return Ok(());
                }
                // The kernels read typed elements (long double with
                // aligned loads): the frame's bytes are copied to 16-byte
                // aligned memory first.
                let mut aligned = vec![0u128; total.div_ceil(16)];
                // SAFETY: `aligned` holds at least `total` bytes.
                let input = unsafe {
                    std::slice::from_raw_parts_mut(aligned.as_mut_ptr().cast::<u8>(), total)
                };
                input.copy_from_slice(&data[..total]);
                for &(address, length) in &addresses {
                    let count = length / unit.extent_bytes;
                    // SAFETY: as above.
                    let target =
                        unsafe { std::slice::from_raw_parts_mut(address as *mut u8, length) };
                    reduce_predefined(
                        op,
                        &unit,
                        &input[consumed..consumed + length],
                        target,
                        count,
                    )
                    .map_err(|error| error.class)?;
                    consumed += length;
                }
            }
            Access::CompareAndSwap { unit } => {
                let &[(address, length)] = addresses.as_slice() else {
                    return Err(ErrorClass::Intern);
                };
                let (origin, compare) = data.split_at(length);
                if fetched[fetched_start..fetched_start + unit.size_bytes]
                    == compare[..unit.size_bytes]
                {
                    // SAFETY: as above.
                    unsafe { std::ptr::copy(origin.as_ptr(), address as *mut u8, length) };
                }
            }
        }
        Ok(())
    }

    /// A response from target `peer` to one request frame of `operation`.
    /// The target's side of a single-copy put (`put`) or get: move the
    /// bytes between the window's `blocks` and the `origin` runs (address,
    /// length) of process `pid`. Returns the response's error byte.
    fn apply_single_copy(
        &mut self,
        window: u32,
        put: bool,
        pid: u32,
        blocks: &[TargetBlock],
        origin: &[TargetBlock],
    ) -> u8 {
        let Some(state) = self.rma.windows.get(&window) else {
            return ErrorClass::Win as u8;
        };
        let mut local = Vec::with_capacity(blocks.len());
        for block in blocks {
            match state.memory.address_of(block) {
                Some(address) => local.push((address, block.length_bytes as usize)),
                None => return ErrorClass::RmaRange as u8,
            }
        }
        let remote: Vec<(usize, usize)> = origin
            .iter()
            .map(|run| (run.offset_bytes as usize, run.length_bytes as usize))
            .collect();
        let local_total: usize = local.iter().map(|&(_, length)| length).sum();
        let remote_total: usize = remote.iter().map(|&(_, length)| length).sum();
        if local_total != remote_total {
            return ErrorClass::Intern as u8;
        }
        let direction = if put {
            single_copy::Direction::Read
        } else {
            single_copy::Direction::Write
        };
        // SAFETY: the window's runs, inside memory registered with
        // rma_register or rma_attach (valid until unregistered); this
        // engine applies one frame at a time.
        match unsafe { single_copy::transfer(direction, pid, &local, &remote) } {
            Ok(()) => 0,
            Err(_) => SINGLE_COPY_FAILED,
        }
    }

    fn rma_response(
        &mut self,
        peer: u32,
        window: u32,
        operation: u64,
        packed_offset: u64,
        class: u8,
        data: &[u8],
    ) {
        if let Some(state) = self.rma.windows.get_mut(&window) {
            if let Some(count) = state.responses_outstanding.get_mut(&peer) {
                *count = count.saturating_sub(1);
            }
            if class == SINGLE_COPY_FAILED && state.first_error.is_none() {
                state.first_error = Some(MpiError::new(
                    ErrorClass::Other,
                    format!(
                        "rank {peer} could not copy an RMA operation's bytes from or to this process's memory (process_vm_readv/writev refused by the kernel); run with RESMPI_RMA_CMA=0"
                    ),
                ));
            } else if class != 0 && state.first_error.is_none() {
                let class = ErrorClass::from_i32(class as i32).unwrap_or(ErrorClass::Other);
                state.first_error = Some(MpiError::new(
                    class,
                    format!(
                        "rank {peer} refused an RMA operation: {} (target displacement and datatype must lie inside its window)",
                        class.description()
                    ),
                ));
            }
        }
        let Some(pending) = self.rma.operations.get_mut(&operation) else {
            return;
        };
        // Scatter the fetched bytes into the destination runs.
        let mut position = packed_offset as usize;
        let mut data = data;
        let mut run = pending
            .destination_starts
            .partition_point(|&start| start <= position)
            .saturating_sub(1);
        while !data.is_empty() && run < pending.destination.len() {
            let (address, length) = pending.destination[run];
            let within = position - pending.destination_starts[run];
            let take = (length - within).min(data.len());
            // SAFETY: the origin's destination, valid until the operation
            // is done (rma_issue's contract).
            unsafe { std::ptr::copy(data.as_ptr(), (address + within) as *mut u8, take) };
            data = &data[take..];
            position += take;
            run += 1;
        }
        pending.responses_left -= 1;
        if pending.responses_left == 0 {
            self.rma.operations.remove(&operation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(offset_bytes: i64, length_bytes: u64) -> TargetBlock {
        TargetBlock {
            offset_bytes,
            length_bytes,
        }
    }

    #[test]
    fn small_operation_is_one_frame() {
        let plans = plan_frames(&[block(0, 8), block(16, 8)], 4, 1000);
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].packed_length, 16);
    }

    #[test]
    fn large_operation_splits_at_element_boundaries_and_covers_every_byte() {
        let plans = plan_frames(&[block(0, 999), block(2000, 333 * 3)], 3, 100 + 16);
        let mut covered = 0;
        for plan in &plans {
            assert_eq!(plan.packed_start, covered);
            let bytes: u64 = plan.blocks.iter().map(|b| b.length_bytes).sum();
            assert_eq!(bytes, plan.packed_length);
            for b in &plan.blocks {
                assert_eq!(b.length_bytes % 3, 0, "{b:?} splits an element");
            }
            assert!(plan.packed_length as usize + 16 * plan.blocks.len() <= 116);
            covered += plan.packed_length;
        }
        assert_eq!(covered, 999 + 999);
    }

    #[test]
    fn empty_operation_has_no_frames() {
        assert!(plan_frames(&[], 1, 100).is_empty());
    }
}
