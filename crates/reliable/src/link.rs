//! `PeerLink`: my end of the reliable link to one peer, as a sans-IO state
//! machine.
//!
//! It owns no socket, clock or thread: frames and the current time come in
//! through `handle_*`, frames to put on the wire and deadlines come out of
//! `poll_*`. The same code therefore runs over real paths and inside the
//! deterministic simulator (`crates/sim`), where a seed replays any run.
//!
//! Protocol, per direction (see the crate docs for the why):
//! - the sender numbers data frames 1, 2, 3, ... in the header's `seq`;
//! - every frame either way carries in `ack` the receiver's largest in-order
//!   received sequence number (cumulative ack);
//! - pure Ack frames (`FrameKind::Ack`, `seq` 0) also carry in `aux` a 64-bit
//!   selective-ack bitmap of frames held out of order above the hole;
//! - each unacknowledged frame has its own retransmission timer with
//!   truncated exponential backoff from its rail's measured timeout
//!   (`rtt.rs`); after `max_retries` counted retransmissions the peer is
//!   declared unreachable;
//! - frames overtaken by acknowledged ones are resent after the reordering
//!   threshold, and a tail-loss probe finds a lost last frame after about
//!   one round trip (see `check_probe`);
//! - pure Acks also carry in `message_id` the receiver's receive limit (the
//!   largest sequence number it accepts now) and in `tag` bits: a heartbeat
//!   probe, an answer to one, "receive window full";
//! - with several rails, frames are striped over the live ones, rails are
//!   watched (`rails.rs`) and a failed rail's unacked frames are resent on
//!   the survivors at once.

use crate::rails::RailSet;
use crate::receive_buffer::{Arrival, ReceiveBuffer};
use crate::send_buffer::{SendBuffer, SentFrame};
use crate::ReliableConfig;
use resmpi_wire::{FrameHeader, FrameKind, ParseError, FLAG_ACK_NOW, HEADER_LEN_BYTES};
use std::collections::VecDeque;

/// Pure Ack `tag` bit: a heartbeat probe; answer it on the rail it came from.
pub const ACK_TAG_PROBE: i32 = 1;
/// Pure Ack `tag` bit: the answer to a probe, sent on the probe's rail.
pub const ACK_TAG_PROBE_ANSWER: i32 = 2;
/// Pure Ack `tag` bit: a frame was dropped because it lay beyond the receive
/// limit (the application is not consuming): it was not lost.
pub const ACK_TAG_RECEIVE_WINDOW_FULL: i32 = 4;

/// Frames the peer must report holding above a hole (selective ack) before
/// the hole is resent at once instead of at its timeout: more than one, so
/// frames merely overtaking each other on different rails do not trigger it.
pub const FAST_RETRANSMIT_THRESHOLD: u32 = 2;

/// Tail-loss probes sent in a row without an acknowledgement making
/// progress; after that only the (backed-off) retransmission timers act, so
/// a dead peer costs two extra frames, not a stream of them.
pub const TAIL_LOSS_PROBES_MAX: u32 = 2;

/// Most events kept for [`PeerLink::poll_event`]; beyond it the oldest are
/// dropped (and counted), so an owner that never polls costs bounded memory.
pub const EVENT_QUEUE_MAX: usize = 64;

/// Back-pressure: the send window is full; retry after acks arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowFull;

impl std::fmt::Display for WindowFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "send window full: wait for acknowledgements")
    }
}

impl std::error::Error for WindowFull {}

/// Why a peer was declared unreachable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnreachableCause {
    /// A frame went unacknowledged for its whole retry budget.
    RetriesExhausted,
    /// Every rail to the peer is down (errors or silence).
    AllRailsDown,
}

/// The peer acknowledged nothing for the whole retry budget of a frame, or
/// every rail to it is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerUnreachable {
    /// The peer's rank.
    pub peer_rank: u32,
    /// The frame whose retries ran out; with `AllRailsDown`, the oldest
    /// unacknowledged frame (0: none).
    pub seq: u64,
    /// Counted retransmissions of that frame before giving up.
    pub retry_count: u32,
    /// What happened.
    pub cause: UnreachableCause,
}

impl std::fmt::Display for PeerUnreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cause {
            UnreachableCause::RetriesExhausted => write!(
                f,
                "rank {} unreachable: frame {} unacknowledged after {} retransmissions",
                self.peer_rank, self.seq, self.retry_count
            ),
            UnreachableCause::AllRailsDown => write!(
                f,
                "rank {} unreachable: every rail to it is down",
                self.peer_rank
            ),
        }
    }
}

/// Something the owner of a link should know about; see
/// [`PeerLink::poll_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// `rail` was marked down (a send error, or silence) at `at_ns`; its
    /// unacknowledged frames were queued on the surviving rails.
    RailDown {
        /// The rail.
        rail: u32,
        /// When it was marked down.
        at_ns: u64,
    },
    /// `rail` answered a probe and carries traffic again since `at_ns`.
    RailUp {
        /// The rail.
        rail: u32,
        /// When it came back.
        at_ns: u64,
    },
    /// The link gave up on the peer (same value as `status()` from now on).
    PeerUnreachable(PeerUnreachable),
}

impl std::error::Error for PeerUnreachable {}

/// Health of a link: `Ok(())`, or `Err(PeerUnreachable)` for good once a
/// frame exhausted its retries (the link then stops transmitting).
pub type LinkStatus = Result<(), PeerUnreachable>;

/// How a received frame reaches the link (see `receive_on_rail`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivery {
    /// Buffered in the reorder buffer (copied) unless a duplicate.
    Buffered,
    /// Handed back to the caller when next in order, else buffered.
    Direct,
    /// Only the header: its payload is already in place.
    Placed,
}

/// Why an arriving frame was rejected. A rejected frame changes no state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiveError {
    /// The header did not parse.
    Malformed(ParseError),
    /// The frame's length disagrees with its header's `payload_len`.
    LengthMismatch {
        /// Length the header announces (header + payload).
        expected_bytes: usize,
        /// Length actually received.
        received_bytes: usize,
    },
    /// The frame claims to come from another rank than this link's peer.
    WrongSource {
        /// This link's peer.
        expected: u32,
        /// The header's `source`.
        found: u32,
    },
    /// A data frame without a sequence number (reliability off at the peer?).
    MissingSequence,
    /// A pure Ack frame carrying a sequence number.
    SequencedAck,
    /// The frame arrived on a rail this link does not have.
    UnknownRail {
        /// The rail given.
        rail: u32,
        /// Rails of this link.
        rail_count: u32,
    },
    /// The peer acknowledged a frame never sent: a protocol violation.
    AckBeyondSent {
        /// The header's `ack`.
        ack: u64,
        /// The largest sequence number this end has transmitted.
        largest_sent_seq: u64,
    },
}

impl std::fmt::Display for ReceiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReceiveError::Malformed(error) => write!(f, "malformed frame: {error}"),
            ReceiveError::LengthMismatch {
                expected_bytes,
                received_bytes,
            } => write!(
                f,
                "frame of {received_bytes} bytes, header says {expected_bytes}"
            ),
            ReceiveError::WrongSource { expected, found } => {
                write!(f, "frame from rank {found} on the link to rank {expected}")
            }
            ReceiveError::MissingSequence => write!(f, "data frame without a sequence number"),
            ReceiveError::SequencedAck => write!(f, "ack frame with a sequence number"),
            ReceiveError::UnknownRail { rail, rail_count } => {
                write!(f, "frame on rail {rail}, the link has {rail_count}")
            }
            ReceiveError::AckBeyondSent {
                ack,
                largest_sent_seq,
            } => write!(
                f,
                "ack {ack} beyond the largest sequence number sent ({largest_sent_seq})"
            ),
        }
    }
}

impl std::error::Error for ReceiveError {}

/// Counters and buffer occupancy of one link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Data frames transmitted for the first time.
    pub frames_sent: u64,
    /// Data frames transmitted again after a timeout.
    pub frames_retransmitted: u64,
    /// Pure Ack frames emitted (piggybacked acks are not counted).
    pub acks_sent: u64,
    /// Data frames from the peer accepted (first copy of each).
    pub frames_received: u64,
    /// Data frames handed out by `poll_deliver`.
    pub frames_delivered: u64,
    /// Data frames from the peer dropped because they were seen before.
    pub duplicates_dropped: u64,
    /// Data frames from the peer dropped because they lay beyond the receive
    /// window (the peer retransmits them).
    pub frames_dropped_beyond_window: u64,
    /// Frames held for retransmission now.
    pub send_buffered_frames: usize,
    /// Most frames ever held for retransmission at once.
    pub send_buffered_frames_max: usize,
    /// Frames held for in-order delivery now (ready + out of order).
    pub receive_buffered_frames: usize,
    /// Bytes held now, both buffers together.
    pub bytes_buffered: usize,
    /// Heartbeat probes and answers to the peer's probes emitted.
    pub heartbeats_sent: u64,
    /// Times a rail was marked down.
    pub rails_failed: u64,
    /// Times a down rail came back up.
    pub rails_recovered: u64,
    /// Sum, over rail failures with unacked frames on the rail, of the time
    /// from marking it down to the first acknowledgement of one of its
    /// frames resent on a surviving rail.
    pub failover_time_ns: u64,
    /// Events dropped because the owner let more than `EVENT_QUEUE_MAX` pile
    /// up.
    pub events_dropped: u64,
    /// Retransmissions made early because the peer reported later frames
    /// (included in `frames_retransmitted`).
    pub fast_retransmits: u64,
    /// Tail-loss probes: nothing was acknowledged for a probe timeout, so a
    /// probe (a pure Ack the peer answers at once) went out to find out what
    /// was lost.
    pub tail_loss_probes: u64,
    /// Retransmitted frames whose acknowledgement came sooner after the
    /// retransmission than the smallest round trip measured: it answered an
    /// earlier copy, so the retransmission was not needed (Eifel-style
    /// detection; the receiver's `duplicates_dropped` counts the copies).
    pub spurious_retransmits: u64,
    /// Round-trip samples taken (frames sent once, newest acknowledged).
    pub rtt_samples: u64,
    /// Smoothed round-trip time of rail 0 (0 until measured).
    pub smoothed_rtt_ns: u64,
}

/// One frame to put on the wire, as [`PeerLink::poll_transmission`] hands it
/// out: the header to send (with the current ack) and a view of the payload
/// the link keeps, so transmitting copies nothing.
#[derive(Debug)]
pub struct Transmission<'a> {
    /// Rail to send it on.
    pub rail: u32,
    /// The frame's header as it must go out now.
    pub header: [u8; HEADER_LEN_BYTES],
    /// The payload (empty for the link's own frames).
    pub payload: &'a [u8],
    /// The frame's sequence number (0 for pure Acks): what
    /// [`PeerLink::payload_of`] takes to see the payload again if the path
    /// had no room for it now.
    pub seq: u64,
}

/// My end of the reliable link to one peer. See the module docs.
///
/// `P` is what holds a data frame's payload until it is acknowledged: an
/// owned `Vec<u8>` by default, or any view of bytes the owner keeps alive
/// (resmpi's engine lends the application's buffer of a large send and
/// completes the send only when the link has released every frame of it).
#[derive(Debug)]
pub struct PeerLink<P = Vec<u8>> {
    local_rank: u32,
    peer_rank: u32,
    config: ReliableConfig,
    send_buffer: SendBuffer<P>,
    receive_buffer: ReceiveBuffer,
    /// When a pure Ack must go out if no data frame carries the ack first.
    ack_deadline_ns: Option<u64>,
    status: LinkStatus,
    stats: LinkStats,
    rails: RailSet,
    events: VecDeque<LinkEvent>,
    /// Largest receive limit the peer advertised (0: none yet).
    peer_receive_limit_seq: u64,
    /// Last time any valid frame arrived from the peer (proof it is alive).
    last_heard_ns: u64,
    /// Latest time any input told us; stamps what `poll_deliver` schedules.
    latest_now_ns: u64,
    /// A frame was dropped beyond the receive limit and no pure Ack said so
    /// yet.
    receive_window_full_unreported: bool,
    /// The peer was told our window was full: tell it when it opens.
    window_update_owed: bool,
    /// A window update is pending: a data frame must not cancel the pure Ack.
    window_update_due: bool,
    /// Extra copies of the next pure Ack still to send: an ack the sender
    /// waits on to complete a send (`FLAG_ACK_NOW`) goes out twice, so one
    /// lost ack does not stall the send for a retransmission timeout.
    ack_copies_owed: u8,
    /// When a tail-loss probe is due if nothing is acknowledged first.
    probe_deadline_ns: Option<u64>,
    /// Probes sent since an acknowledgement last made progress.
    probe_count: u32,
    /// Time and rail of the latest data transmission (the probe timer runs
    /// from it).
    last_data_transmit: Option<(u64, u32)>,
    /// A tail-loss probe is to go out on this rail.
    tail_probe_due_rail: Option<u32>,
    /// The tail-loss probe in flight: when and on which rail it went, and
    /// the largest sequence number sent before it.
    tail_probe_sent: Option<TailProbe>,
    /// Tail-loss probes numbered so far.
    tail_probes_numbered: u32,
    /// Number of the peer's latest probe, to echo in the answer.
    probe_id_to_answer: u32,
}

/// A tail-loss probe awaiting its answer.
#[derive(Clone, Copy, Debug)]
struct TailProbe {
    /// Its number (from 1), echoed by the answer.
    id: u32,
    at_ns: u64,
    rail: u32,
    largest_sent_seq: u64,
}

/// What one incoming acknowledgement newly covered, gathered while the send
/// buffer releases frames and acted on after.
#[derive(Clone, Copy, Debug, Default)]
struct NewlyAcked {
    /// Any frame at all.
    any: bool,
    /// The newest frame (largest sequence number) newly covered, if it was
    /// transmitted once: (seq, transmit time, rail). Karn's rule.
    sample: Option<(u64, u64, u32)>,
    /// Largest sequence number newly covered.
    largest_seq: u64,
    /// Send order of the latest-sent frame newly covered (see
    /// [`send_order`]): every frame sent before it and still unacked was
    /// overtaken.
    latest_sent: Option<(u64, u64)>,
}

impl PeerLink<Vec<u8>> {
    /// Accept an outgoing frame (header and payload in one buffer): see
    /// [`PeerLink::handle_send_parts`].
    ///
    /// # Panics
    /// As [`PeerLink::handle_send_parts`], or if `frame` is shorter than a
    /// header.
    pub fn handle_send(&mut self, now_ns: u64, mut frame: Vec<u8>) -> Result<u64, WindowFull> {
        assert!(
            frame.len() >= HEADER_LEN_BYTES,
            "handle_send: frame shorter than a header"
        );
        let payload = frame.split_off(HEADER_LEN_BYTES);
        let header: [u8; HEADER_LEN_BYTES] = frame[..].try_into().expect("header length");
        self.handle_send_parts(now_ns, header, payload)
    }

    /// Next frame to put on the wire, as one buffer, and its rail: see
    /// [`PeerLink::poll_transmission`] (which copies nothing).
    pub fn poll_transmit_on_rail(&mut self, now_ns: u64) -> Option<(u32, Vec<u8>)> {
        let transmission = self.poll_transmission(now_ns)?;
        let mut frame = Vec::with_capacity(HEADER_LEN_BYTES + transmission.payload.len());
        frame.extend_from_slice(&transmission.header);
        frame.extend_from_slice(transmission.payload);
        Some((transmission.rail, frame))
    }

    /// Next frame to put on the wire, for single-rail links: see
    /// [`PeerLink::poll_transmit_on_rail`].
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<Vec<u8>> {
        self.poll_transmit_on_rail(now_ns).map(|(_, frame)| frame)
    }
}

impl<P: AsRef<[u8]>> PeerLink<P> {
    /// A fresh link from `local_rank` to `peer_rank`; both ends start at
    /// sequence number 1. Rail clocks start at the first call that passes a
    /// time.
    ///
    /// # Panics
    /// If `config.send_window_frames` is 0 or `config.rail_count` is outside
    /// `1..=RAIL_COUNT_MAX`.
    pub fn new(local_rank: u32, peer_rank: u32, config: ReliableConfig) -> PeerLink<P> {
        PeerLink {
            local_rank,
            peer_rank,
            config,
            send_buffer: SendBuffer::new(config.send_window_frames),
            receive_buffer: ReceiveBuffer::new(config.send_window_frames),
            ack_deadline_ns: None,
            status: Ok(()),
            stats: LinkStats::default(),
            rails: RailSet::new(&config),
            events: VecDeque::new(),
            peer_receive_limit_seq: 0,
            last_heard_ns: 0,
            latest_now_ns: 0,
            receive_window_full_unreported: false,
            window_update_owed: false,
            window_update_due: false,
            ack_copies_owed: 0,
            probe_deadline_ns: None,
            probe_count: 0,
            last_data_transmit: None,
            tail_probe_due_rail: None,
            tail_probe_sent: None,
            tail_probes_numbered: 0,
            probe_id_to_answer: 0,
        }
    }

    /// This end's rank.
    pub fn local_rank(&self) -> u32 {
        self.local_rank
    }

    /// The peer's rank.
    pub fn peer_rank(&self) -> u32 {
        self.peer_rank
    }

    /// The configuration the link was built with.
    pub fn config(&self) -> &ReliableConfig {
        &self.config
    }

    /// Accept an outgoing frame: write the next sequence number (from 1) into
    /// its header and keep header and payload until acknowledged.
    /// `Err(WindowFull)` is back-pressure: `send_window_frames` frames are
    /// unacknowledged.
    ///
    /// # Panics
    /// If `header` is not a well-formed wire header of a data-carrying kind
    /// whose `payload_len` is the payload's length; frames are built by
    /// resmpi's own layers, so that is a bug upstream.
    pub fn handle_send_parts(
        &mut self,
        now_ns: u64,
        header: [u8; HEADER_LEN_BYTES],
        payload: P,
    ) -> Result<u64, WindowFull> {
        // Retransmission timers start at first transmission, in poll_transmit.
        self.note_time(now_ns);
        if self.send_buffer.is_full() {
            return Err(WindowFull);
        }
        let mut header_bytes = header;
        let mut header = FrameHeader::parse(&header_bytes).expect("handle_send: malformed frame");
        assert_ne!(
            header.kind,
            FrameKind::Ack,
            "handle_send: Ack frames are the link's own"
        );
        assert_eq!(
            payload.as_ref().len(),
            header.payload_len as usize,
            "handle_send: payload length disagrees with payload_len"
        );
        header.seq = self.send_buffer.next_seq();
        write_header(&mut header_bytes, &header);
        let seq = self.send_buffer.push(header_bytes, payload);
        self.stats.send_buffered_frames_max = self
            .stats
            .send_buffered_frames_max
            .max(self.send_buffer.len());
        Ok(seq)
    }

    /// A frame arrived from the peer on rail 0: see
    /// [`PeerLink::handle_receive_on_rail`]. For single-rail links.
    pub fn handle_receive(&mut self, now_ns: u64, frame: &[u8]) -> Result<(), ReceiveError> {
        self.handle_receive_on_rail(now_ns, 0, frame)
    }

    /// A frame arrived from the peer on `rail` (after the path verified its
    /// checksum). Its `ack` releases acknowledged frames; if it carries data
    /// (`seq != 0`) it is buffered for in-order delivery, or dropped if
    /// duplicate or beyond the window; an ack is scheduled. Any valid frame
    /// is evidence that `rail` works inbound; probes are answered on `rail`.
    pub fn handle_receive_on_rail(
        &mut self,
        now_ns: u64,
        rail: u32,
        frame: &[u8],
    ) -> Result<(), ReceiveError> {
        self.receive_on_rail(now_ns, rail, frame, Delivery::Buffered)
            .map(|_| ())
    }

    /// Like [`PeerLink::handle_receive_on_rail`], but a data frame that is
    /// exactly the next in sequence with nothing waiting is not buffered:
    /// `Ok(true)` tells the caller to deliver `frame` itself, now (it counts
    /// as delivered). Saves the reorder buffer's copy in the common case.
    pub fn handle_receive_on_rail_direct(
        &mut self,
        now_ns: u64,
        rail: u32,
        frame: &[u8],
    ) -> Result<bool, ReceiveError> {
        self.receive_on_rail(now_ns, rail, frame, Delivery::Direct)
    }

    /// A data frame whose payload the owner already wrote to where it
    /// belongs and checked, given by its `header` alone (the path read the
    /// payload straight into a receive buffer, see `is_next_in_order`).
    /// `Ok(true)`: it was exactly the next in sequence with nothing waiting
    /// and counts as delivered, as with `handle_receive_on_rail_direct`.
    /// `Ok(false)`: anything else; nothing of it is kept (there is no
    /// payload to keep), so it counts as never received and the sender
    /// retransmits it. Its `ack` is taken either way.
    pub fn handle_receive_placed_on_rail(
        &mut self,
        now_ns: u64,
        rail: u32,
        header: &[u8; HEADER_LEN_BYTES],
    ) -> Result<bool, ReceiveError> {
        self.receive_on_rail(now_ns, rail, header, Delivery::Placed)
    }

    fn receive_on_rail(
        &mut self,
        now_ns: u64,
        rail: u32,
        frame: &[u8],
        delivery: Delivery,
    ) -> Result<bool, ReceiveError> {
        if rail >= self.rails.count() {
            return Err(ReceiveError::UnknownRail {
                rail,
                rail_count: self.rails.count(),
            });
        }
        let header = FrameHeader::parse(frame).map_err(ReceiveError::Malformed)?;
        let expected_bytes = match delivery {
            Delivery::Placed => HEADER_LEN_BYTES,
            Delivery::Buffered | Delivery::Direct => HEADER_LEN_BYTES + header.payload_len as usize,
        };
        if frame.len() != expected_bytes {
            return Err(ReceiveError::LengthMismatch {
                expected_bytes,
                received_bytes: frame.len(),
            });
        }
        if header.source != self.peer_rank {
            return Err(ReceiveError::WrongSource {
                expected: self.peer_rank,
                found: header.source,
            });
        }
        let is_pure_ack = header.kind == FrameKind::Ack;
        if is_pure_ack && header.seq != 0 {
            return Err(ReceiveError::SequencedAck);
        }
        if !is_pure_ack && header.seq == 0 {
            return Err(ReceiveError::MissingSequence);
        }
        let largest_sent_seq = self.send_buffer.largest_sent_seq();
        if header.ack > largest_sent_seq {
            return Err(ReceiveError::AckBeyondSent {
                ack: header.ack,
                largest_sent_seq,
            });
        }

        self.note_time(now_ns);
        self.last_heard_ns = self.last_heard_ns.max(now_ns);
        self.rails.note_inbound(now_ns, rail);
        let rails = &mut self.rails;
        let stats = &mut self.stats;
        let mut newly_acked = NewlyAcked::default();
        let mut on_acked = |sent: &SentFrame<P>| {
            if sent.transmit_count == 1 {
                rails.note_outbound_proof(now_ns, sent.last_rail);
            } else if rails
                .rtt(sent.last_rail)
                .min_ns()
                .is_some_and(|min_rtt_ns| now_ns.saturating_sub(sent.last_transmit_ns) < min_rtt_ns)
            {
                // Faster than any round trip: an earlier copy was acked.
                stats.spurious_retransmits += 1;
            }
            if let Some(failed_rail) = sent.failed_over_from_rail {
                if let Some(failover_ns) = rails.note_failover_frame_acked(now_ns, failed_rail) {
                    stats.failover_time_ns += failover_ns;
                }
            }
            newly_acked.note(sent);
        };
        self.send_buffer
            .acknowledge_cumulative(header.ack, &mut on_acked);
        if is_pure_ack {
            self.send_buffer
                .acknowledge_selective(header.ack, header.aux, &mut on_acked);
            self.handle_newly_acked(now_ns, newly_acked);
            self.fast_retransmit_hole(now_ns, header.ack, header.aux);
            self.handle_pure_ack_signals(now_ns, rail, &header);
            return Ok(false);
        }
        self.handle_newly_acked(now_ns, newly_acked);
        // The sender waits for this ack to complete a send: no coalescing,
        // and a second copy (see `ack_copies_owed`).
        let in_order_ack_ns = if header.flags & FLAG_ACK_NOW != 0 {
            self.ack_copies_owed = 1;
            now_ns
        } else {
            now_ns.saturating_add(self.config.ack_delay_ns)
        };
        let fills_a_hole = self.receive_buffer.has_out_of_order();
        if delivery == Delivery::Placed {
            if !self.receive_buffer.accept_placed(header.seq) {
                return Ok(false);
            }
            self.stats.frames_received += 1;
            self.stats.frames_delivered += 1;
            self.schedule_ack(if fills_a_hole {
                now_ns
            } else {
                in_order_ack_ns
            });
            return Ok(true);
        }
        if delivery == Delivery::Direct && self.receive_buffer.accept_direct(header.seq) {
            self.stats.frames_received += 1;
            self.stats.frames_delivered += 1;
            self.schedule_ack(in_order_ack_ns);
            return Ok(true);
        }
        match self.receive_buffer.insert(header.seq, frame) {
            Arrival::InOrder => {
                self.stats.frames_received += 1;
                // A frame that fills a hole is acked at once (RFC 5681): the
                // sender is timing it against its reordering threshold.
                self.schedule_ack(if fills_a_hole {
                    now_ns
                } else {
                    in_order_ack_ns
                });
            }
            Arrival::OutOfOrder => {
                // A hole: tell the sender at once which frames we hold.
                self.stats.frames_received += 1;
                self.schedule_ack(now_ns);
            }
            Arrival::Duplicate => {
                // A retransmission: our earlier ack was probably lost.
                self.stats.duplicates_dropped += 1;
                self.schedule_ack(now_ns);
            }
            Arrival::BeyondWindow => {
                // The application is not consuming: say so at once, so that
                // the sender knows the frame was refused, not lost.
                self.stats.frames_dropped_beyond_window += 1;
                self.receive_window_full_unreported = true;
                self.window_update_owed = true;
                self.schedule_ack(now_ns);
            }
        }
        Ok(false)
    }

    /// The peer holds `FAST_RETRANSMIT_THRESHOLD` or more frames above the
    /// first one it misses (`ack + 1`): that one was lost, not late. Make it
    /// due now rather than at its timeout (TCP's fast retransmit), once.
    fn fast_retransmit_hole(&mut self, now_ns: u64, ack: u64, bitmap: u64) {
        if bitmap.count_ones() < FAST_RETRANSMIT_THRESHOLD {
            return;
        }
        let Some(hole) = self.send_buffer.get_mut(ack.saturating_add(1)) else {
            return;
        };
        if hole.transmit_count > 0
            && !hole.selectively_acked
            && !hole.fast_retransmitted
            && hole.retransmit_deadline_ns > now_ns
        {
            hole.fast_retransmitted = true;
            hole.early_retransmit_due = true;
            hole.retransmit_deadline_ns = now_ns;
        }
    }

    /// An acknowledgement covered new frames: take an RTT sample from the
    /// newest (if sent once), deem lost every frame sent before the
    /// latest-sent acknowledged one that is older than the reordering
    /// threshold (RFC 9002's time threshold, RACK in TCP), and restart the
    /// tail-loss probe timer.
    fn handle_newly_acked(&mut self, now_ns: u64, newly_acked: NewlyAcked) {
        if !newly_acked.any {
            return;
        }
        if let Some((_, transmit_ns, rail)) = newly_acked.sample {
            self.rails
                .note_rtt_sample(rail, now_ns.saturating_sub(transmit_ns));
            self.stats.rtt_samples += 1;
        }
        if let Some(latest_sent) = newly_acked.latest_sent {
            let config = self.config;
            let rails = &self.rails;
            let overtaken = self
                .send_buffer
                .in_flight_mut()
                .take_while(|sent| sent.seq < newly_acked.largest_seq);
            for sent in overtaken {
                if send_order(sent, u64::MAX) >= latest_sent || sent.early_retransmit_due {
                    continue;
                }
                let threshold_ns = rails
                    .rtt(sent.last_rail)
                    .timers(&config)
                    .reorder_threshold_ns;
                let lost_at_ns = sent
                    .last_transmit_ns
                    .saturating_add(threshold_ns)
                    .max(now_ns);
                if lost_at_ns < sent.retransmit_deadline_ns {
                    sent.retransmit_deadline_ns = lost_at_ns;
                    sent.early_retransmit_due = true;
                }
            }
        }
        self.probe_count = 0;
        if let Some((transmit_ns, rail)) = self.last_data_transmit {
            self.arm_probe(transmit_ns, rail);
        }
    }

    /// Start the tail-loss probe timer from the latest data transmission,
    /// backed off by the probes already sent; none while nothing is in
    /// flight, before the rail's RTT is measured, or once
    /// `TAIL_LOSS_PROBES_MAX` probes went unanswered.
    fn arm_probe(&mut self, from_ns: u64, rail: u32) {
        self.probe_deadline_ns = None;
        if self.probe_count >= TAIL_LOSS_PROBES_MAX || !self.send_buffer.has_transmitted() {
            return;
        }
        let Some(pto_ns) = self.rails.rtt(rail).timers(&self.config).pto_ns else {
            return;
        };
        self.probe_deadline_ns =
            Some(from_ns.saturating_add(pto_ns.saturating_mul(1 << self.probe_count.min(16))));
    }

    /// The probe timer expired: nothing was acknowledged for a probe timeout
    /// after the latest transmission. Send a tail-loss probe (a heartbeat
    /// probe: a pure Ack the peer answers at once, on the rail it came from)
    /// on the rail of the newest unacknowledged frame, rather than resending
    /// that frame: on a busy but loss-free path the answer simply
    /// acknowledges everything and a late ack cost 64 bytes, not a spurious
    /// retransmission of a fragment of up to 1 MiB. If the answer does not
    /// cover frames sent on that rail before the probe, they were lost (see
    /// `handle_tail_probe_answer`): recovered about two round trips after
    /// the probe timeout instead of after a retransmission timeout.
    fn check_probe(&mut self, now_ns: u64) {
        if self.status.is_err()
            || self
                .probe_deadline_ns
                .is_none_or(|deadline_ns| deadline_ns > now_ns)
        {
            return;
        }
        self.probe_deadline_ns = None;
        let Some(newest) = self.send_buffer.newest_in_flight_mut() else {
            return;
        };
        // A frame refused by a live peer's full window was not lost.
        if newest.blocked_by_window {
            return;
        }
        let newest_rail = newest.last_rail;
        let Some(rail) = (if self.rails.is_up(newest_rail) {
            Some(newest_rail)
        } else {
            self.rails.choose(None)
        }) else {
            return;
        };
        self.tail_probe_due_rail = Some(rail);
        self.tail_probes_numbered = self.tail_probes_numbered.wrapping_add(1).max(1);
        self.tail_probe_sent = Some(TailProbe {
            id: self.tail_probes_numbered,
            at_ns: now_ns,
            rail,
            largest_sent_seq: self.send_buffer.largest_sent_seq(),
        });
        self.probe_count += 1;
        self.stats.tail_loss_probes += 1;
        self.arm_probe(now_ns, rail);
    }

    /// The peer answered a probe on `rail`: frames sent on that rail before
    /// our tail-loss probe and still unacknowledged after the answer's acks
    /// were lost (a rail is FIFO: the probe came after them), once older
    /// than the reordering threshold (simulated links may reorder).
    fn handle_tail_probe_answer(&mut self, now_ns: u64, rail: u32, probe_id: u32) {
        let Some(probe) = self.tail_probe_sent else {
            return;
        };
        if probe.rail != rail || probe.id != probe_id {
            return;
        }
        self.tail_probe_sent = None;
        let config = self.config;
        let rails = &self.rails;
        for sent in self.send_buffer.in_flight_mut() {
            if sent.seq > probe.largest_sent_seq
                || sent.last_rail != rail
                || sent.last_transmit_ns > probe.at_ns
                || sent.blocked_by_window
                || sent.early_retransmit_due
            {
                continue;
            }
            let threshold_ns = rails.rtt(rail).timers(&config).reorder_threshold_ns;
            let lost_at_ns = sent
                .last_transmit_ns
                .saturating_add(threshold_ns)
                .max(now_ns);
            if lost_at_ns < sent.retransmit_deadline_ns {
                sent.retransmit_deadline_ns = lost_at_ns;
                sent.early_retransmit_due = true;
            }
        }
    }

    /// What a pure Ack says beyond acknowledgements: probes, answers, the
    /// peer's receive limit.
    fn handle_pure_ack_signals(&mut self, now_ns: u64, rail: u32, header: &FrameHeader) {
        if header.tag & ACK_TAG_PROBE != 0 {
            self.rails.note_probe_received(rail);
            self.probe_id_to_answer = header.context;
        }
        if header.tag & ACK_TAG_PROBE_ANSWER != 0 {
            self.handle_tail_probe_answer(now_ns, rail, header.context);
        }
        if header.tag & ACK_TAG_PROBE_ANSWER != 0 && self.rails.note_probe_answered(now_ns, rail) {
            self.stats.rails_recovered += 1;
            self.push_event(LinkEvent::RailUp {
                rail,
                at_ns: now_ns,
            });
        }
        let receive_limit_seq = header.message_id;
        if receive_limit_seq > self.peer_receive_limit_seq {
            self.peer_receive_limit_seq = receive_limit_seq;
            // The window opened: frames refused earlier go out again at once,
            // without counting against their retry budget.
            for sent in self.send_buffer.in_flight_mut() {
                if sent.blocked_by_window && sent.seq <= receive_limit_seq {
                    sent.blocked_by_window = false;
                    sent.next_transmission_is_forced = true;
                    sent.retransmit_deadline_ns = now_ns;
                }
            }
        }
        if header.tag & ACK_TAG_RECEIVE_WINDOW_FULL != 0 && receive_limit_seq != 0 {
            for sent in self.send_buffer.in_flight_mut() {
                if sent.seq > receive_limit_seq {
                    sent.blocked_by_window = true;
                }
            }
        }
    }

    /// Next frame to put on the wire, and the rail to send it on: new frames
    /// first (striped per the policy), then due retransmissions, oldest
    /// first (on a live rail other than the one they were last sent on,
    /// when there is one), then answers to the peer's probes, heartbeat
    /// probes, and a pure Ack if one is due and no data frame carried it.
    /// Every frame carries the current cumulative ack. Returns `None` for
    /// good once the peer is unreachable. The payload is lent, not copied.
    pub fn poll_transmission(&mut self, now_ns: u64) -> Option<Transmission<'_>> {
        self.note_time(now_ns);
        self.check_rails(now_ns);
        self.check_retries(now_ns);
        self.check_probe(now_ns);
        if self.status.is_err() {
            return None;
        }
        let control = |rail, header| {
            Some(Transmission {
                rail,
                header,
                payload: &[],
                seq: 0,
            })
        };
        if let Some((rail, seq)) = self.poll_data_frame(now_ns) {
            let sent = self.send_buffer.get(seq).expect("frame just transmitted");
            return Some(Transmission {
                rail,
                header: sent.header,
                payload: sent.payload.as_ref(),
                seq,
            });
        }
        if let Some(rail) = self.rails.take_answer() {
            self.stats.heartbeats_sent += 1;
            let probe_id = std::mem::take(&mut self.probe_id_to_answer);
            return control(rail, self.pure_ack_numbered(ACK_TAG_PROBE_ANSWER, probe_id));
        }
        if let Some(rail) = self.tail_probe_due_rail.take() {
            let probe_id = self.tail_probe_sent.map_or(0, |probe| probe.id);
            return control(rail, self.pure_ack_numbered(ACK_TAG_PROBE, probe_id));
        }
        if let Some(rail) = self.rails.take_due_probe(now_ns) {
            self.stats.heartbeats_sent += 1;
            return control(rail, self.pure_ack(ACK_TAG_PROBE));
        }
        if self
            .ack_deadline_ns
            .is_some_and(|deadline_ns| deadline_ns <= now_ns)
        {
            let rail = self.rails.choose(None)?;
            self.stats.acks_sent += 1;
            let ack = self.pure_ack(0);
            if self.ack_copies_owed > 0 {
                // Right behind it (on the next rail, with several).
                self.ack_copies_owed -= 1;
                self.schedule_ack(now_ns);
            }
            return control(rail, ack);
        }
        None
    }

    /// The payload of data frame `seq` while the link still holds it (not
    /// yet acknowledged): for a transmission the path had no room for.
    pub fn payload_of(&self, seq: u64) -> Option<&[u8]> {
        self.send_buffer.get(seq).map(|sent| sent.payload.as_ref())
    }

    /// Pick the next data frame to transmit, update its transmission state
    /// and header; returns its rail and sequence number.
    fn poll_data_frame(&mut self, now_ns: u64) -> Option<(u32, u64)> {
        let ack = self.receive_buffer.largest_in_order_seq();
        let config = self.config;
        let last_heard_ns = self.last_heard_ns;
        let retransmission;
        let sent = match self.send_buffer.take_unsent() {
            Some(sent) => {
                retransmission = false;
                sent
            }
            None => {
                retransmission = true;
                self.send_buffer.oldest_due(now_ns)?
            }
        };
        let avoid = retransmission.then_some(sent.last_rail);
        // Unreachable (checked by the caller) is the only state without one.
        let rail = self
            .rails
            .choose(avoid)
            .expect("a reachable link has a live rail");
        // A retransmission counts against the retry budget unless it was
        // forced (failover, reopened window) or the frame was refused by a
        // receiver heard from since: alive, just not consuming.
        let excused = sent.next_transmission_is_forced
            || (sent.blocked_by_window && last_heard_ns >= sent.last_transmit_ns);
        if !retransmission || !excused {
            sent.counted_transmit_count += 1;
        }
        sent.next_transmission_is_forced = false;
        if retransmission && std::mem::take(&mut sent.early_retransmit_due) {
            self.stats.fast_retransmits += 1;
        }
        sent.transmit_count += 1;
        let rto_ns = self.rails.rtt(rail).timers(&config).rto_ns;
        sent.retransmit_deadline_ns =
            now_ns.saturating_add(config.retransmit_timeout_from_ns(rto_ns, sent.transmit_count));
        sent.last_rail = rail;
        sent.last_transmit_ns = now_ns;
        set_ack(&mut sent.header, ack);
        let seq = sent.seq;
        self.last_data_transmit = Some((now_ns, rail));
        self.arm_probe(now_ns, rail);
        if retransmission {
            self.stats.frames_retransmitted += 1;
        } else {
            self.stats.frames_sent += 1;
        }
        // A data frame carries the cumulative ack but no selective-ack
        // bitmap nor receive limit: keep a pure Ack pending while frames wait
        // above a hole or a window update is due.
        if !self.receive_buffer.has_out_of_order() && !self.window_update_due {
            self.ack_deadline_ns = None;
        }
        Some((rail, seq))
    }

    /// A pure Ack (`tag` bits say probe / answer) with the cumulative ack,
    /// the selective-ack bitmap and the receive limit; it settles any ack
    /// that was due.
    fn pure_ack(&mut self, tag: i32) -> [u8; HEADER_LEN_BYTES] {
        self.pure_ack_numbered(tag, 0)
    }

    /// A pure Ack whose `context` carries `probe_id`: a tail-loss probe's
    /// number, or, in an answer, the number of the probe answered (0: a
    /// heartbeat), so an answer to an old probe is not taken for the
    /// answer to the latest one.
    fn pure_ack_numbered(&mut self, tag: i32, probe_id: u32) -> [u8; HEADER_LEN_BYTES] {
        self.ack_deadline_ns = None;
        self.window_update_due = false;
        let mut header = FrameHeader::new(FrameKind::Ack, self.local_rank);
        header.context = probe_id;
        header.ack = self.receive_buffer.largest_in_order_seq();
        header.aux = self.receive_buffer.selective_ack_bitmap();
        header.message_id = self.receive_buffer.receive_limit_seq();
        header.tag = tag;
        if std::mem::take(&mut self.receive_window_full_unreported) {
            header.tag |= ACK_TAG_RECEIVE_WINDOW_FULL;
        }
        header.to_bytes()
    }

    /// Next data frame from the peer in sequence order, each exactly once.
    pub fn poll_deliver(&mut self) -> Option<Vec<u8>> {
        let frame = self.receive_buffer.pop_ready()?;
        self.stats.frames_delivered += 1;
        if std::mem::take(&mut self.window_update_owed) {
            // We refused frames for a full window; it has room again.
            self.window_update_due = true;
            self.schedule_ack(self.latest_now_ns);
        }
        Some(frame)
    }

    /// Give back a buffer [`PeerLink::poll_deliver`] handed out, once its
    /// frame is consumed: the link reuses it for the next frame it must
    /// copy (a bounded pool, see `receive_buffer.rs`).
    pub fn recycle(&mut self, buffer: Vec<u8>) {
        self.receive_buffer.recycle(buffer);
    }

    /// Earliest time `handle_timeout` (then `poll_transmit`) must be called:
    /// a retransmission, a delayed ack, a heartbeat, an answer to a probe or
    /// a rail silence check. `None` when nothing is pending or the peer is
    /// unreachable. With several rails there is always a heartbeat pending.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.status.is_err() {
            return None;
        }
        [
            self.send_buffer.earliest_retransmit_deadline_ns(),
            self.ack_deadline_ns,
            self.probe_deadline_ns,
            self.tail_probe_due_rail.map(|_| 0),
            self.rails.next_deadline_ns(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Time has advanced to `now_ns`: mark silent rails down, give up on the
    /// peer if a frame's retries ran out or no rail is left. Due
    /// retransmissions, acks and heartbeats come out of `poll_transmit`.
    pub fn handle_timeout(&mut self, now_ns: u64) {
        self.note_time(now_ns);
        self.check_rails(now_ns);
        self.check_retries(now_ns);
        self.check_probe(now_ns);
    }

    /// The path failed to send on `rail` (connection reset, send error):
    /// mark it down now. Its unacknowledged frames go out again at once on
    /// the surviving rails; with none left, the peer is unreachable.
    ///
    /// # Panics
    /// If `rail` is not one of this link's rails (a bug in the caller).
    pub fn handle_rail_error(&mut self, now_ns: u64, rail: u32) {
        assert!(
            rail < self.rails.count(),
            "handle_rail_error: rail {rail} of {}",
            self.rails.count()
        );
        self.note_time(now_ns);
        self.mark_rail_down(now_ns, rail);
    }

    /// Next event (rail down or up, peer unreachable), oldest first.
    pub fn poll_event(&mut self) -> Option<LinkEvent> {
        self.events.pop_front()
    }

    /// `Ok(())`, or `Err(PeerUnreachable)` once a frame exceeded
    /// `max_retries` or every rail is down.
    pub fn status(&self) -> LinkStatus {
        self.status
    }

    /// Whether `rail` is live (not marked down).
    ///
    /// # Panics
    /// If `rail` is not one of this link's rails.
    pub fn rail_is_up(&self, rail: u32) -> bool {
        self.rails.is_up(rail)
    }

    /// Whether a data frame with sequence number `seq` arriving now would be
    /// delivered at once by [`PeerLink::handle_receive_on_rail_direct`]
    /// (`Ok(true)`): it is the next in order and nothing waits. Changes
    /// nothing; lets the owner place the payload before handing it over.
    pub fn is_next_in_order(&self, seq: u64) -> bool {
        self.status.is_ok() && self.receive_buffer.would_accept_direct(seq)
    }

    /// Whether frame `seq` arriving now would be dropped as a duplicate
    /// (and acked): its payload would not be used. Changes nothing.
    pub fn is_duplicate(&self, seq: u64) -> bool {
        seq > 0 && self.receive_buffer.has_received(seq)
    }

    /// Whether a data frame `seq` whose payload is still arriving may be
    /// placed (read straight to its destination, then given to
    /// [`PeerLink::handle_receive_placed_on_rail`]): it is the next in
    /// sequence and everything before it has been delivered. Frames above
    /// it may wait; they are delivered after it. Changes nothing.
    pub fn may_place(&self, seq: u64) -> bool {
        self.status.is_ok() && self.receive_buffer.would_accept_placed(seq)
    }

    /// Whether `handle_send_parts` would refuse a frame now (back-pressure).
    pub fn send_window_is_full(&self) -> bool {
        self.send_buffer.is_full()
    }

    /// Rails not marked down.
    pub fn live_rail_count(&self) -> u32 {
        self.rails.live_count()
    }

    /// Counters and buffer occupancy.
    pub fn stats(&self) -> LinkStats {
        LinkStats {
            smoothed_rtt_ns: self.rails.rtt(0).smoothed_ns().unwrap_or(0),
            send_buffered_frames: self.send_buffer.len(),
            receive_buffered_frames: self.receive_buffer.buffered_frames(),
            bytes_buffered: self.send_buffer.buffered_bytes()
                + self.receive_buffer.buffered_bytes(),
            ..self.stats
        }
    }

    /// True when every frame handed to `handle_send` has been acknowledged.
    pub fn is_idle(&self) -> bool {
        self.send_buffer.len() == 0
    }

    fn schedule_ack(&mut self, deadline_ns: u64) {
        self.ack_deadline_ns = Some(
            self.ack_deadline_ns
                .map_or(deadline_ns, |current| current.min(deadline_ns)),
        );
    }

    fn note_time(&mut self, now_ns: u64) {
        self.rails.start(now_ns);
        self.latest_now_ns = self.latest_now_ns.max(now_ns);
    }

    fn push_event(&mut self, event: LinkEvent) {
        if self.events.len() >= EVENT_QUEUE_MAX {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(event);
    }

    fn declare_unreachable(&mut self, seq: u64, retry_count: u32, cause: UnreachableCause) {
        let unreachable = PeerUnreachable {
            peer_rank: self.peer_rank,
            seq,
            retry_count,
            cause,
        };
        self.status = Err(unreachable);
        self.push_event(LinkEvent::PeerUnreachable(unreachable));
    }

    fn check_rails(&mut self, now_ns: u64) {
        if self.status.is_err() {
            return;
        }
        for rail in self.rails.silent_rails(now_ns) {
            self.mark_rail_down(now_ns, rail);
        }
    }

    /// Mark `rail` down and move its unacknowledged frames to the survivors:
    /// they become due now, and that retransmission does not count against
    /// their retry budget. The receiver drops whichever copy comes second.
    fn mark_rail_down(&mut self, now_ns: u64, rail: u32) {
        if self.status.is_err() || !self.rails.mark_down(now_ns, rail) {
            return;
        }
        self.stats.rails_failed += 1;
        self.push_event(LinkEvent::RailDown {
            rail,
            at_ns: now_ns,
        });
        let mut moved_count = 0;
        for sent in self.send_buffer.in_flight_mut() {
            if sent.last_rail == rail {
                sent.retransmit_deadline_ns = now_ns;
                sent.next_transmission_is_forced = true;
                sent.failed_over_from_rail = Some(rail);
                moved_count += 1;
            }
        }
        if moved_count > 0 {
            self.rails.note_failover_started(now_ns, rail);
        }
        if self.rails.live_count() == 0 {
            let (seq, retry_count) = self.send_buffer.oldest().map_or((0, 0), |sent| {
                (sent.seq, sent.counted_transmit_count.saturating_sub(1))
            });
            self.declare_unreachable(seq, retry_count, UnreachableCause::AllRailsDown);
        }
    }

    fn check_retries(&mut self, now_ns: u64) {
        if self.status.is_err() {
            return;
        }
        let max_retries = self.config.max_retries;
        let last_heard_ns = self.last_heard_ns;
        let exhausted = self
            .send_buffer
            .exhausted(now_ns, max_retries.saturating_add(1), |sent| {
                sent.blocked_by_window && last_heard_ns >= sent.last_transmit_ns
            })
            .map(|sent| sent.seq);
        if let Some(seq) = exhausted {
            self.declare_unreachable(seq, max_retries, UnreachableCause::RetriesExhausted);
        }
    }
}

/// Where `sent` stands in transmission order: time of its latest
/// transmission, then, among frames sent at the same instant (one burst),
/// sequence order for first transmissions; `retransmitted_rank` ranks a
/// retransmission at that instant (they go out after the new frames: pass
/// `u64::MAX` for a frame being judged, 0 for the acknowledged one).
fn send_order<P>(sent: &SentFrame<P>, retransmitted_rank: u64) -> (u64, u64) {
    let rank = if sent.transmit_count == 1 {
        sent.seq
    } else {
        retransmitted_rank
    };
    (sent.last_transmit_ns, rank)
}

impl NewlyAcked {
    fn note<P>(&mut self, sent: &SentFrame<P>) {
        self.any = true;
        if sent.seq >= self.largest_seq {
            self.largest_seq = sent.seq;
            self.sample = (sent.transmit_count == 1).then_some((
                sent.seq,
                sent.last_transmit_ns,
                sent.last_rail,
            ));
        }
        let order = send_order(sent, 0);
        if self.latest_sent.is_none_or(|latest| order > latest) {
            self.latest_sent = Some(order);
        }
    }
}

fn write_header(frame: &mut [u8], header: &FrameHeader) {
    let head: &mut [u8; HEADER_LEN_BYTES] = (&mut frame[..HEADER_LEN_BYTES])
        .try_into()
        .expect("frame holds a header");
    header.emit(head);
}

fn set_ack(frame: &mut [u8], ack: u64) {
    let mut header = FrameHeader::parse(frame).expect("stored frames were checked in handle_send");
    header.ack = ack;
    write_header(frame, &header);
}
