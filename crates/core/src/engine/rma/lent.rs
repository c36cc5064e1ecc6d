//! Large RMA puts and gets over the network without a staging copy: the
//! two-sided rendezvous machinery (`reliability.rs`) applied to RMA.
//!
//! A request frame of `CONTROL_RMA` carries its description (kind, window,
//! blocks) in front of its data, so its payload can only land in a buffer
//! and be copied out. An RMA *data frame* carries nothing but data: the
//! frame header names where it goes (a control subtype, the window and
//! displacement, or the get's operation and packed offset), so the TCP
//! path can read its payload straight from the socket into the window
//! (a put) or into the origin's buffer (a get's reply), as it does for a
//! rendezvous fragment of a matched receive ([`State::rma_placement`]).
//!
//! Sending, the payload is lent, not copied: the links keep a view of the
//! origin's buffer (a put) or of the window (a reply) until the frame is
//! acknowledged, with a clone of a per-window [`Loan`]. What waits for the
//! views to end, and why:
//! - a flush (and unlock, fence, complete, which flush) waits for the
//!   origin's loan toward its targets: MPI lets the application reuse a
//!   put's buffer then, and a retransmission would read it;
//! - freeing a window and detaching a dynamic window's memory wait for the
//!   target's loan: a reply retransmitted after that would read memory the
//!   application may have unmapped.
//!
//! - an MPI_Rput's request (`Operation::LentOut`) completes when the views
//!   of its own loan end: that is when MPI lets its buffer be reused.
//!
//! Accumulates are not lent (the target combines, it cannot place), nor
//! pieces under [`LENT_MIN_BYTES`].
//!
//! Why a placed put may sit unchecked in the window: the same argument as
//! for a receive. The frame is the next in order on its link, so every
//! earlier operation of this origin is applied; it lands only in the range
//! its header names, which the origin is writing in this epoch (another
//! access to it meanwhile is a conflict MPI leaves undefined); a payload
//! that fails its CRC is not acknowledged, so the retransmission
//! overwrites the range; and the put is acknowledged (its RMA `ACK`) only
//! after the link accepted the whole frame. A put of an origin whose lock
//! is not granted yet is not placed (it would write under another
//! process's exclusive lock): it is held back, copied, like any request.

use std::sync::OnceLock;

use resmpi_ft::Interceptor;
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};

use super::{
    frame_with_header, push_blocks, Access, PendingOperation, TargetBlock, BLOCK_BYTES, KIND_ACK,
    KIND_GET_LENT, KIND_PUT, KIND_REPLY,
};
use crate::engine::{Engine, State};
use crate::error::{ErrorClass, MpiResult};
use crate::reliability::{loan_outstanding, LentBytes, Loan};

/// Control subtype of a put's data frame: `context` = window, `aux` = the
/// target displacement in bytes (an address in a dynamic window).
pub(in crate::engine) const CONTROL_RMA_PUT_DATA: u64 = 7;
/// Control subtype of a get's reply data frame: `aux` = the operation,
/// `context` and `tag` = the low and high halves of its packed offset.
pub(in crate::engine) const CONTROL_RMA_REPLY_DATA: u64 = 8;

/// Smallest piece (contiguous at both ends) sent as a data frame: below it
/// a path reads the frame whole anyway, and a copy costs less than a loan.
pub(super) const LENT_MIN_BYTES: usize = resmpi_path::PLACEMENT_MIN_PAYLOAD_BYTES;

/// The operation id an acknowledgement of a put data frame echoes: none
/// (a put waits for no bytes; ids are counted from 0 and never reach it).
pub(super) const NO_OPERATION: u64 = u64::MAX;

/// `RESMPI_RMA_ZERO_COPY=0` sends every put and get as request frames
/// (copied), for comparison and as a way out.
const ENVIRONMENT_VARIABLE: &str = "RESMPI_RMA_ZERO_COPY";

/// What the header of an RMA data frame names; its length is the frame's
/// `payload_len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DataFrame {
    /// Bytes of a put into `window` at `offset_bytes`.
    Put { window: u32, offset_bytes: i64 },
    /// Bytes of get `operation`'s reply at `packed_offset` of its stream.
    Reply { operation: u64, packed_offset: u64 },
}

impl DataFrame {
    /// The header of a data frame from `rank` with `length_bytes` of payload.
    pub(super) fn header(&self, rank: u32, length_bytes: usize) -> FrameHeader {
        let mut header = FrameHeader::new(FrameKind::Control, rank);
        header.payload_len = length_bytes as u32;
        match *self {
            DataFrame::Put {
                window,
                offset_bytes,
            } => {
                header.message_id = CONTROL_RMA_PUT_DATA;
                header.context = window;
                header.aux = offset_bytes as u64;
            }
            DataFrame::Reply {
                operation,
                packed_offset,
            } => {
                header.message_id = CONTROL_RMA_REPLY_DATA;
                header.aux = operation;
                header.context = packed_offset as u32;
                header.tag = (packed_offset >> 32) as u32 as i32;
            }
        }
        header
    }

    /// The data frame `header` describes, if it is one.
    pub(super) fn parse(header: &FrameHeader) -> Option<DataFrame> {
        if header.kind != FrameKind::Control {
            return None;
        }
        match header.message_id {
            CONTROL_RMA_PUT_DATA => Some(DataFrame::Put {
                window: header.context,
                offset_bytes: header.aux as i64,
            }),
            CONTROL_RMA_REPLY_DATA => Some(DataFrame::Reply {
                operation: header.aux,
                packed_offset: u64::from(header.context) | (u64::from(header.tag as u32) << 32),
            }),
            _ => None,
        }
    }
}

/// One data frame's share of an operation: contiguous at the target and
/// at the origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Piece {
    /// Where it goes (put) or comes from (get) in the window.
    pub target: TargetBlock,
    /// Where it comes from (put) or goes (get) at the origin.
    pub origin_address: usize,
    /// Where it starts in the operation's packed stream.
    pub packed_start: u64,
}

/// Cut an operation into pieces contiguous at both ends (the intersections
/// of the target `blocks` and the `origin` runs, both in packed order) of
/// at most `max_bytes`. None when the two sides differ in size or an
/// intersection is shorter than `min_bytes` (such an operation goes as
/// request frames; a piece cut short by `max_bytes` is fine).
pub(super) fn plan_pieces(
    blocks: &[TargetBlock],
    origin: &[(usize, usize)],
    max_bytes: usize,
    min_bytes: usize,
) -> Option<Vec<Piece>> {
    let target_total: u64 = blocks.iter().map(|block| block.length_bytes).sum();
    let origin_total: u64 = origin.iter().map(|&(_, length)| length as u64).sum();
    if target_total != origin_total || max_bytes == 0 {
        return None;
    }
    let mut pieces = Vec::new();
    let (mut block_index, mut block_done) = (0usize, 0u64);
    let (mut run_index, mut run_done) = (0usize, 0usize);
    let mut packed = 0u64;
    while block_index < blocks.len() && run_index < origin.len() {
        let block = blocks[block_index];
        let (address, run_length) = origin[run_index];
        let block_left = block.length_bytes - block_done;
        let run_left = (run_length - run_done) as u64;
        let overlap = block_left.min(run_left);
        if overlap > 0 && (overlap as usize) < min_bytes {
            return None;
        }
        let mut cut = 0u64;
        while cut < overlap {
            let length = (overlap - cut).min(max_bytes as u64);
            pieces.push(Piece {
                target: TargetBlock {
                    offset_bytes: block.offset_bytes + (block_done + cut) as i64,
                    length_bytes: length,
                },
                origin_address: address + run_done + cut as usize,
                packed_start: packed,
            });
            cut += length;
            packed += length;
        }
        block_done += overlap;
        run_done += overlap as usize;
        if block_done == block.length_bytes {
            (block_index, block_done) = (block_index + 1, 0);
        }
        if run_done == run_length {
            (run_index, run_done) = (run_index + 1, 0);
        }
    }
    Some(pieces)
}

/// Whether `RESMPI_RMA_ZERO_COPY` allows lending (read once).
fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| {
        std::env::var(ENVIRONMENT_VARIABLE).map_or(true, |value| value.trim() != "0")
    })
}

impl PendingOperation {
    /// The address where `length_bytes` of fetched bytes at `packed_offset`
    /// go, when they fall inside one destination run.
    fn place_of(&self, packed_offset: u64, length_bytes: usize) -> Option<usize> {
        let position = usize::try_from(packed_offset).ok()?;
        let run = self
            .destination_starts
            .partition_point(|&start| start <= position)
            .checked_sub(1)?;
        let (address, length) = self.destination[run];
        let within = position - self.destination_starts[run];
        (within.checked_add(length_bytes)? <= length).then_some(address + within)
    }
}

impl<F: Interceptor> Engine<F> {
    /// Whether this process may send puts and gets toward `target` as data
    /// frames: no protocol must see every byte (as for single copy), the
    /// peer is reached over TCP through a reliable link (which keeps the
    /// views), and `RESMPI_RMA_ZERO_COPY` does not forbid it.
    fn rma_lent_possible(&self, window: u32, target: u32) -> bool {
        !Self::protocol_has_hooks()
            && target != self.state.rank
            && matches!(
                self.transports.routes.get(target as usize),
                Some(crate::transport::Route::Tcp)
            )
            && self.links.covers(target)
            && self.state.rma.windows.contains_key(&window)
            && enabled()
    }

    /// Start a put or get whose pieces are all contiguous at both ends and
    /// at least [`LENT_MIN_BYTES`] as data frames: a put's payload lent
    /// from the `origin` runs (address, length, packed order), a get's
    /// reply lent from the target's window and placed at the origin.
    /// Returns None (and sends nothing) where that cannot be done.
    ///
    /// # Safety
    /// The `origin` runs must stay valid (for reads: a put; for writes: a
    /// get) and untouched until the operation is complete at the target
    /// (a put: the next flush, unlock, complete or fence, which wait for
    /// the links to return every view; a get: done).
    pub unsafe fn rma_issue_lent(
        &mut self,
        window: u32,
        target: u32,
        access: Access,
        blocks: &[TargetBlock],
        origin: &[(usize, usize)],
        request_loan: Option<&Loan>,
    ) -> MpiResult<Option<u64>> {
        let put = match access {
            Access::Put => true,
            Access::Get => false,
            _ => return Ok(None),
        };
        if !self.rma_lent_possible(window, target) {
            return Ok(None);
        }
        let max_bytes = self.transports.max_payload_bytes(target);
        let Some(pieces) = plan_pieces(blocks, origin, max_bytes, LENT_MIN_BYTES)
            .filter(|pieces| !pieces.is_empty())
        else {
            return Ok(None);
        };
        let operation = self.state.rma.next_operation_id;
        self.state.rma.next_operation_id += 1;
        if put {
            // SAFETY: the caller's promise.
            unsafe { self.send_put_pieces(window, target, &pieces, request_loan) }?;
        } else {
            self.send_get_pieces(window, target, operation, &pieces, origin)?;
        }
        Ok(Some(operation))
    }

    /// A put's data frames, each lent from the origin's memory.
    ///
    /// # Safety
    /// As [`Engine::rma_issue_lent`].
    unsafe fn send_put_pieces(
        &mut self,
        window: u32,
        target: u32,
        pieces: &[Piece],
        request_loan: Option<&Loan>,
    ) -> MpiResult<()> {
        let rank = self.state.rank;
        let Some(state) = self.state.rma.windows.get_mut(&window) else {
            return Ok(());
        };
        // An MPI_Rput's views are its request's to wait for; a put's, the
        // next flush's.
        let loan = match request_loan {
            Some(loan) => loan.clone(),
            None => state.origin_loans.entry(target).or_default().clone(),
        };
        for piece in pieces {
            let length = piece.target.length_bytes as usize;
            let header = DataFrame::Put {
                window,
                offset_bytes: piece.target.offset_bytes,
            }
            .header(rank, length);
            // SAFETY: the caller's promise; a flush waits for `loan`.
            let payload =
                unsafe { LentBytes::new(piece.origin_address as *const u8, length, &loan) };
            self.count_request(window, target);
            self.send_lent_frame(target, &header, payload)?;
        }
        Ok(())
    }

    /// A get's request frames, one per piece, each asking for a reply data
    /// frame that the origin places at `origin_address`.
    fn send_get_pieces(
        &mut self,
        window: u32,
        target: u32,
        operation: u64,
        pieces: &[Piece],
        origin: &[(usize, usize)],
    ) -> MpiResult<()> {
        let mut destination_starts = Vec::with_capacity(origin.len());
        let mut start = 0;
        for &(_, length) in origin {
            destination_starts.push(start);
            start += length;
        }
        self.state.rma.operations.insert(
            operation,
            PendingOperation {
                window,
                responses_left: pieces.len() as u32,
                destination: origin.to_vec(),
                destination_starts,
            },
        );
        for piece in pieces {
            let mut frame = frame_with_header(
                KIND_GET_LENT,
                window,
                operation,
                piece.packed_start,
                4 + BLOCK_BYTES,
            );
            push_blocks(&mut frame, &[piece.target]);
            self.send_request_frame(window, target, frame)?;
        }
        Ok(())
    }

    /// Whether every view the links hold of this process's put buffers
    /// toward `target` (all targets when None) on `window` has ended.
    pub(super) fn origin_views_returned(&self, window: u32, target: Option<u32>) -> bool {
        let Some(state) = self.state.rma.windows.get(&window) else {
            return true;
        };
        let returned = |loan: &Loan| !loan_outstanding(loan);
        match target {
            Some(target) => state.origin_loans.get(&target).is_none_or(returned),
            None => state.origin_loans.values().all(returned),
        }
    }

    /// Wait until no link holds a view of `window`'s memory (replies lent
    /// from it) nor of this process's put buffers: before the memory may
    /// go (free, detach). A failed peer's link drops its views.
    pub(super) fn wait_window_views_returned(&mut self, window: u32) -> MpiResult<()> {
        self.wait_until(|engine| {
            engine.origin_views_returned(window, None)
                && engine
                    .state
                    .rma
                    .windows
                    .get(&window)
                    .is_none_or(|state| !loan_outstanding(&state.target_loan))
        })
    }
}

impl<F: Interceptor> State<F> {
    /// Where the payload of RMA data frame `header` from `peer` may be read
    /// to directly: the window's bytes it names (inside the window, or an
    /// attached region of a dynamic one, and the origin holds no lock
    /// request still waiting), or the destination run of a get's reply.
    /// `None`: the frame comes whole, and `handle_rma_data_frame` applies
    /// it or reports what is wrong with it.
    pub(in crate::engine) fn rma_placement(
        &mut self,
        peer: u32,
        header: &FrameHeader,
    ) -> Option<*mut u8> {
        let length = header.payload_len as usize;
        match DataFrame::parse(header)? {
            DataFrame::Put {
                window,
                offset_bytes,
            } => {
                let state = self.rma.windows.get(&window)?;
                if state.lock_queue.iter().any(|&(origin, ..)| origin == peer) {
                    return None;
                }
                let block = TargetBlock {
                    offset_bytes,
                    length_bytes: length as u64,
                };
                state
                    .memory
                    .address_of(&block)
                    .map(|address| address as *mut u8)
            }
            DataFrame::Reply {
                operation,
                packed_offset,
            } => self
                .rma
                .operations
                .get(&operation)?
                .place_of(packed_offset, length)
                .map(|address| address as *mut u8),
        }
    }

    /// A placed RMA data frame passed its checks: its bytes are in place;
    /// acknowledge a put, count a reply.
    pub(in crate::engine) fn commit_placed_rma(&mut self, peer: u32, header: &FrameHeader) {
        match DataFrame::parse(header) {
            Some(DataFrame::Put { window, .. }) => self.acknowledge_put(peer, window, 0),
            Some(DataFrame::Reply {
                operation,
                packed_offset,
            }) => self.reply_arrived(peer, operation, packed_offset, &[]),
            None => {}
        }
    }

    /// An RMA data frame from `peer` that came whole (not placed): a put
    /// is applied (or held back with its origin's other frames while its
    /// lock waits), a reply's bytes are copied to their destination.
    pub(in crate::engine) fn handle_rma_data_frame(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        payload: &[u8],
    ) {
        let block = |offset_bytes| TargetBlock {
            offset_bytes,
            length_bytes: payload.len() as u64,
        };
        match DataFrame::parse(header) {
            Some(DataFrame::Put {
                window,
                offset_bytes,
            }) => {
                let waiting = self.rma.windows.get(&window).is_some_and(|state| {
                    state.lock_queue.iter().any(|&(origin, ..)| origin == peer)
                });
                if waiting {
                    // Held back as the request frame it stands for, so
                    // its lock's grant handles it in order.
                    let mut frame = frame_with_header(
                        KIND_PUT,
                        window,
                        NO_OPERATION,
                        0,
                        4 + BLOCK_BYTES + payload.len(),
                    );
                    push_blocks(&mut frame, &[block(offset_bytes)]);
                    frame.extend_from_slice(payload);
                    self.handle_rma_frame(peer, &frame[HEADER_LEN_BYTES..]);
                    return;
                }
                let class = match self.apply_rma(
                    window,
                    Access::Put,
                    &[block(offset_bytes)],
                    payload,
                    &mut Vec::new(),
                ) {
                    Ok(()) => 0,
                    Err(class) => class as u8,
                };
                self.acknowledge_put(peer, window, class);
            }
            Some(DataFrame::Reply {
                operation,
                packed_offset,
            }) => self.reply_arrived(peer, operation, packed_offset, payload),
            None => self.malformed_rma(peer),
        }
    }

    /// The RMA `ACK` of one put data frame (error class `class`, 0 = none).
    fn acknowledge_put(&mut self, peer: u32, window: u32, class: u8) {
        let mut frame = frame_with_header(KIND_ACK, window, NO_OPERATION, 0, 1);
        frame.push(class);
        self.rma_queue(peer, frame);
    }

    /// Bytes of get `operation`'s reply (`data`, empty when placed) from
    /// `peer`: the response to one of its request frames.
    fn reply_arrived(&mut self, peer: u32, operation: u64, packed_offset: u64, data: &[u8]) {
        // An operation already given up (its target failed) counts nothing.
        let Some(window) = self
            .rma
            .operations
            .get(&operation)
            .map(|pending| pending.window)
        else {
            return;
        };
        self.rma_response(peer, window, operation, packed_offset, 0, data);
    }

    /// The target's side of a `KIND_GET_LENT` request: the reply is a data
    /// frame lent from the window's memory (one block, inside the window),
    /// or, when the block is refused, a `KIND_REPLY` with the error.
    pub(super) fn reply_lent(
        &mut self,
        peer: u32,
        window: u32,
        operation: u64,
        packed_offset: u64,
        blocks: &[TargetBlock],
    ) {
        let found = match (self.rma.windows.get(&window), blocks) {
            (None, _) => Err(ErrorClass::Win),
            (Some(state), [block]) => state
                .memory
                .address_of(block)
                .map(|address| {
                    (
                        address,
                        block.length_bytes as usize,
                        state.target_loan.clone(),
                    )
                })
                .ok_or(ErrorClass::RmaRange),
            (Some(_), _) => Err(ErrorClass::Intern),
        };
        match found {
            Ok((address, length, loan)) => {
                let header = DataFrame::Reply {
                    operation,
                    packed_offset,
                }
                .header(self.wire_rank, length);
                // SAFETY: window memory, valid until unregistered or
                // detached, which wait for `loan` (`wait_window_views_returned`).
                let payload = unsafe { LentBytes::new(address as *const u8, length, &loan) };
                self.queue_lent_frame(peer, &header, payload);
            }
            Err(class) => {
                let mut frame = frame_with_header(KIND_REPLY, window, operation, packed_offset, 1);
                frame.push(class as u8);
                self.rma_queue(peer, frame);
            }
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
    fn data_frame_headers_survive_the_wire_with_every_field() {
        let frames = [
            DataFrame::Put {
                window: 0xdead_beef,
                offset_bytes: -5,
            },
            DataFrame::Put {
                window: 3,
                offset_bytes: 0x7fff_0000_1234_5678,
            },
            DataFrame::Reply {
                operation: 42,
                packed_offset: 0xffff_ffff_8000_0001,
            },
        ];
        for frame in frames {
            let header = frame.header(7, 65536);
            let mut bytes = [0u8; HEADER_LEN_BYTES];
            header.emit(&mut bytes);
            let parsed = FrameHeader::parse(&bytes).expect("a valid header");
            assert_eq!(parsed.payload_len, 65536);
            assert_eq!(parsed.source, 7);
            assert_eq!(DataFrame::parse(&parsed), Some(frame));
        }
    }

    #[test]
    fn other_frames_are_not_data_frames() {
        let mut header = FrameHeader::new(FrameKind::Control, 0);
        header.message_id = super::super::CONTROL_RMA;
        assert_eq!(DataFrame::parse(&header), None);
        let mut data = FrameHeader::new(FrameKind::Data, 0);
        data.message_id = CONTROL_RMA_PUT_DATA;
        assert_eq!(DataFrame::parse(&data), None);
    }

    #[test]
    fn contiguous_operation_is_cut_at_the_frame_limit_and_covers_every_byte() {
        let pieces = plan_pieces(&[block(100, 2500)], &[(0x1000, 2500)], 1000, 16).unwrap();
        assert_eq!(
            pieces,
            vec![
                Piece {
                    target: block(100, 1000),
                    origin_address: 0x1000,
                    packed_start: 0
                },
                Piece {
                    target: block(1100, 1000),
                    origin_address: 0x1000 + 1000,
                    packed_start: 1000
                },
                Piece {
                    target: block(2100, 500),
                    origin_address: 0x1000 + 2000,
                    packed_start: 2000
                },
            ]
        );
    }

    #[test]
    fn pieces_are_the_intersections_of_target_blocks_and_origin_runs() {
        let pieces = plan_pieces(
            &[block(0, 300), block(1000, 300)],
            &[(0x10_000, 200), (0x20_000, 400)],
            1 << 20,
            100,
        )
        .unwrap();
        let shape: Vec<(i64, u64, usize, u64)> = pieces
            .iter()
            .map(|piece| {
                (
                    piece.target.offset_bytes,
                    piece.target.length_bytes,
                    piece.origin_address,
                    piece.packed_start,
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (0, 200, 0x10_000, 0),
                (200, 100, 0x20_000, 200),
                (1000, 300, 0x20_000 + 100, 300)
            ]
        );
    }

    #[test]
    fn small_or_mismatched_intersections_are_not_lent() {
        assert_eq!(
            plan_pieces(&[block(0, 64)], &[(0, 32), (64, 32)], 1000, 48),
            None
        );
        assert_eq!(plan_pieces(&[block(0, 64)], &[(0, 65)], 1000, 1), None);
        assert_eq!(plan_pieces(&[], &[], 1000, 1), Some(Vec::new()));
    }

    #[test]
    fn a_reply_is_placed_only_inside_one_destination_run() {
        let pending = PendingOperation {
            window: 0,
            responses_left: 2,
            destination: vec![(0x1000, 100), (0x5000, 50)],
            destination_starts: vec![0, 100],
        };
        assert_eq!(pending.place_of(0, 100), Some(0x1000));
        assert_eq!(pending.place_of(10, 90), Some(0x1000 + 10));
        assert_eq!(pending.place_of(10, 91), None, "crosses into the next run");
        assert_eq!(pending.place_of(100, 50), Some(0x5000));
        assert_eq!(pending.place_of(120, 31), None, "past the last run");
        assert_eq!(pending.place_of(150, 1), None);
    }

    #[test]
    fn a_put_is_placed_only_inside_the_window_or_an_attached_region() {
        use super::super::WindowMemory;
        let fixed = WindowMemory {
            base: 0x10_000,
            size_bytes: 4096,
            dynamic: false,
            regions: Vec::new(),
        };
        assert_eq!(fixed.address_of(&block(0, 4096)), Some(0x10_000));
        assert_eq!(fixed.address_of(&block(4095, 1)), Some(0x10_000 + 4095));
        assert_eq!(
            fixed.address_of(&block(4095, 2)),
            None,
            "one byte past the end"
        );
        assert_eq!(fixed.address_of(&block(-1, 1)), None);
        assert_eq!(fixed.address_of(&block(i64::MAX, 1)), None);
        let dynamic = WindowMemory {
            base: 0,
            size_bytes: 0,
            dynamic: true,
            regions: vec![(0x20_000, 100), (0x20_000 + 100, 50)],
        };
        assert_eq!(dynamic.address_of(&block(0x20_000, 150)), Some(0x20_000));
        assert_eq!(dynamic.address_of(&block(0x20_000, 151)), None);
        assert_eq!(dynamic.address_of(&block(0x1f_fff, 2)), None);
    }
}
