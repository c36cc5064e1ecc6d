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
//!   truncated exponential backoff; after `max_retries` retransmissions the
//!   peer is declared unreachable.

use crate::receive_buffer::{Arrival, ReceiveBuffer};
use crate::send_buffer::SendBuffer;
use crate::ReliableConfig;
use resmpi_wire::{FrameHeader, FrameKind, ParseError, HEADER_LEN_BYTES};

/// Back-pressure: the send window is full; retry after acks arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowFull;

impl std::fmt::Display for WindowFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "send window full: wait for acknowledgements")
    }
}

impl std::error::Error for WindowFull {}

/// The peer acknowledged nothing for the whole retry budget of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerUnreachable {
    /// The peer's rank.
    pub peer_rank: u32,
    /// The frame whose retries ran out.
    pub seq: u64,
    /// Retransmissions made before giving up.
    pub retry_count: u32,
}

impl std::fmt::Display for PeerUnreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rank {} unreachable: frame {} unacknowledged after {} retransmissions",
            self.peer_rank, self.seq, self.retry_count
        )
    }
}

impl std::error::Error for PeerUnreachable {}

/// Health of a link: `Ok(())`, or `Err(PeerUnreachable)` for good once a
/// frame exhausted its retries (the link then stops transmitting).
pub type LinkStatus = Result<(), PeerUnreachable>;

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
}

/// My end of the reliable link to one peer. See the module docs.
#[derive(Debug)]
pub struct PeerLink {
    local_rank: u32,
    peer_rank: u32,
    config: ReliableConfig,
    send_buffer: SendBuffer,
    receive_buffer: ReceiveBuffer,
    /// When a pure Ack must go out if no data frame carries the ack first.
    ack_deadline_ns: Option<u64>,
    status: LinkStatus,
    stats: LinkStats,
}

impl PeerLink {
    /// A fresh link from `local_rank` to `peer_rank`; both ends start at
    /// sequence number 1.
    ///
    /// # Panics
    /// If `config.send_window_frames` is 0.
    pub fn new(local_rank: u32, peer_rank: u32, config: ReliableConfig) -> PeerLink {
        PeerLink {
            local_rank,
            peer_rank,
            config,
            send_buffer: SendBuffer::new(config.send_window_frames),
            receive_buffer: ReceiveBuffer::new(config.send_window_frames),
            ack_deadline_ns: None,
            status: Ok(()),
            stats: LinkStats::default(),
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
    /// its header and keep it until acknowledged. `Err(WindowFull)` is
    /// back-pressure: `send_window_frames` frames are unacknowledged.
    ///
    /// # Panics
    /// If `frame` is not a well-formed wire frame of a data-carrying kind;
    /// frames are built by resmpi's own layers, so that is a bug upstream.
    pub fn handle_send(&mut self, now_ns: u64, frame: Vec<u8>) -> Result<u64, WindowFull> {
        let _ = now_ns; // Timers start at first transmission, in poll_transmit.
        if self.send_buffer.is_full() {
            return Err(WindowFull);
        }
        let mut frame = frame;
        let mut header = FrameHeader::parse(&frame).expect("handle_send: malformed frame");
        assert_ne!(
            header.kind,
            FrameKind::Ack,
            "handle_send: Ack frames are the link's own"
        );
        assert_eq!(
            frame.len(),
            HEADER_LEN_BYTES + header.payload_len as usize,
            "handle_send: frame length disagrees with payload_len"
        );
        header.seq = self.send_buffer.next_seq();
        write_header(&mut frame, &header);
        let seq = self.send_buffer.push(frame);
        self.stats.send_buffered_frames_max = self
            .stats
            .send_buffered_frames_max
            .max(self.send_buffer.len());
        Ok(seq)
    }

    /// A frame arrived from the peer. Its `ack` releases acknowledged frames;
    /// if it carries data (`seq != 0`) it is buffered for in-order delivery,
    /// or dropped if duplicate or beyond the window; an ack is scheduled.
    pub fn handle_receive(&mut self, now_ns: u64, frame: &[u8]) -> Result<(), ReceiveError> {
        let header = FrameHeader::parse(frame).map_err(ReceiveError::Malformed)?;
        let expected_bytes = HEADER_LEN_BYTES + header.payload_len as usize;
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

        self.send_buffer.acknowledge_cumulative(header.ack);
        if is_pure_ack {
            self.send_buffer
                .acknowledge_selective(header.ack, header.aux);
            return Ok(());
        }
        match self.receive_buffer.insert(header.seq, frame) {
            Arrival::InOrder => {
                self.stats.frames_received += 1;
                self.schedule_ack(now_ns.saturating_add(self.config.ack_delay_ns));
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
            Arrival::BeyondWindow => self.stats.frames_dropped_beyond_window += 1,
        }
        Ok(())
    }

    /// Next frame to put on the wire: new frames first, then due
    /// retransmissions (oldest first), then a pure Ack if one is due and no
    /// data frame carried it. Every frame carries the current cumulative ack.
    /// Returns `None` for good once the peer is unreachable.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<Vec<u8>> {
        self.check_retries(now_ns);
        if self.status.is_err() {
            return None;
        }
        let ack = self.receive_buffer.largest_in_order_seq();
        let timeout_for = |transmit_count| self.config.retransmit_timeout_ns(transmit_count);
        let mut retransmission = false;
        let sent = match self.send_buffer.take_unsent() {
            Some(sent) => Some(sent),
            None => {
                retransmission = true;
                self.send_buffer.oldest_due(now_ns)
            }
        };
        if let Some(sent) = sent {
            sent.transmit_count += 1;
            sent.retransmit_deadline_ns = now_ns.saturating_add(timeout_for(sent.transmit_count));
            set_ack(&mut sent.frame, ack);
            let frame = sent.frame.clone();
            if retransmission {
                self.stats.frames_retransmitted += 1;
            } else {
                self.stats.frames_sent += 1;
            }
            // A data frame carries the cumulative ack but no selective-ack
            // bitmap: keep a pure Ack pending while frames wait above a hole.
            if !self.receive_buffer.has_out_of_order() {
                self.ack_deadline_ns = None;
            }
            return Some(frame);
        }
        if self
            .ack_deadline_ns
            .is_some_and(|deadline_ns| deadline_ns <= now_ns)
        {
            self.ack_deadline_ns = None;
            self.stats.acks_sent += 1;
            let mut header = FrameHeader::new(FrameKind::Ack, self.local_rank);
            header.ack = ack;
            header.aux = self.receive_buffer.selective_ack_bitmap();
            return Some(header.to_bytes().to_vec());
        }
        None
    }

    /// Next data frame from the peer in sequence order, each exactly once.
    pub fn poll_deliver(&mut self) -> Option<Vec<u8>> {
        let frame = self.receive_buffer.pop_ready()?;
        self.stats.frames_delivered += 1;
        Some(frame)
    }

    /// Earliest time `handle_timeout` (then `poll_transmit`) must be called:
    /// a retransmission or a delayed ack. `None` when nothing is pending or
    /// the peer is unreachable.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.status.is_err() {
            return None;
        }
        let retransmit_ns = self.send_buffer.earliest_retransmit_deadline_ns();
        match (retransmit_ns, self.ack_deadline_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Time has advanced to `now_ns`: give up on the peer if a frame's
    /// retries ran out. Due retransmissions and acks come out of
    /// `poll_transmit`.
    pub fn handle_timeout(&mut self, now_ns: u64) {
        self.check_retries(now_ns);
    }

    /// `Ok(())`, or `Err(PeerUnreachable)` once a frame exceeded
    /// `max_retries`.
    pub fn status(&self) -> LinkStatus {
        self.status
    }

    /// Counters and buffer occupancy.
    pub fn stats(&self) -> LinkStats {
        LinkStats {
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

    fn check_retries(&mut self, now_ns: u64) {
        if self.status.is_err() {
            return;
        }
        let max_retries = self.config.max_retries;
        let exhausted = self
            .send_buffer
            .exhausted(now_ns, max_retries.saturating_add(1));
        if let Some(seq) = exhausted {
            self.status = Err(PeerUnreachable {
                peer_rank: self.peer_rank,
                seq,
                retry_count: max_retries,
            });
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
