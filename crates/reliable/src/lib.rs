//! Sans-IO reliability for resmpi: one [`PeerLink`] per (me, peer) pair turns
//! a lossy, duplicating, reordering path into an exactly-once, in-order
//! stream of wire frames.
//!
//! Why sans-IO: the same state machine runs over shared memory, TCP and
//! inside the deterministic simulator (`crates/sim`); time comes in as
//! `now_ns`, frames and deadlines come out of `poll_*` (quinn-proto style).
//! This crate owns sequence numbers, acknowledgements, retransmission,
//! duplicate drop, and the rails to each peer: striping, per-rail failure
//! detection (send errors, silence), heartbeats and failover. It does not
//! own sockets, clocks, checksums or matching.
//!
//! # Protocol (after LA-MPI and NewMadeleine)
//! - **Sequence numbers**: per direction, 64-bit, starting at 1, written into
//!   the header's `seq` by [`PeerLink::handle_send`]; they never wrap.
//! - **Cumulative ack**: every emitted frame carries in `ack` the largest
//!   in-order sequence number received from the peer (LA-MPI's LIRS). Data
//!   frames piggyback it; a pure `FrameKind::Ack` frame (`seq` 0) goes out
//!   only when `ack_delay_ns` passed with no data frame to carry it, so acks
//!   coalesce (NewMadeleine's aggregation).
//! - **Selective ack**: a pure Ack also carries in `aux` a bitmap of frames
//!   held out of order: bit `i` = frame `ack + 2 + i`. The sender does not
//!   retransmit those (the receiver never discards a buffered frame), but
//!   keeps them until the cumulative ack passes. An out-of-order or duplicate
//!   arrival makes the receiver ack at once instead of after the delay.
//! - **Retransmission**: selective repeat, each frame on its own timer with
//!   truncated exponential backoff
//!   (`min(rto * 2^(k-1), max_backoff_ns)` after the k-th transmission),
//!   `rto` measured per rail from acknowledgements (`rtt.rs`: smoothed RTT
//!   and variance, Karn's rule, a floor), `ack_timeout_ns` until the first
//!   sample. After `max_retries` retransmissions of one frame go
//!   unanswered the link reports [`PeerUnreachable`] and stops transmitting;
//!   what to do next (failover, ULFM) belongs to the layers above.
//! - **Loss recovery in about a round trip**: a frame sent before a frame
//!   now acknowledged is resent once older than the reordering threshold
//!   (RACK); when nothing is acknowledged for a probe timeout after the
//!   latest transmission, a tail-loss probe (a pure Ack the peer answers
//!   at once) finds a lost last frame, which a fixed timer would wait out.
//! - **Duplicates** (network duplicates or spurious retransmissions) are
//!   recognised by sequence number and dropped.
//!
//! # Rails (after LA-MPI's paths and NewMadeleine's multirail)
//! - A link may have `rail_count` rails; `poll_transmit_on_rail` says which
//!   rail each frame takes ([`StripePolicy`]); retransmissions avoid the
//!   rail the frame was last sent on when another is live.
//! - A rail is marked down on a send error (`handle_rail_error`) or when
//!   nothing arrived on it, or nothing proved our frames get through on it,
//!   for `rail_silence_timeout_ns`. Heartbeat probes (pure Acks, answered at
//!   once on the same rail by the peer's link, whatever its application
//!   does) keep healthy rails proven. A down rail is probed slowly and comes
//!   back up when a probe is answered on it.
//! - On rail down, every unacked frame last sent on it is due at once on a
//!   survivor (not counted as a retry); the receiver drops the copy that
//!   comes second. With no rail left the peer is unreachable.
//! - With one rail nothing is watched: no heartbeats, no silence timeout.
//!
//! # Busy receivers
//! Pure Acks carry the receive limit in `message_id` and say when a frame
//! was refused for a full window; retransmissions of refused frames while
//! the peer is heard from do not count against the retry budget, and the
//! receiver announces when its window opens. A peer whose application
//! computes for a long time without consuming is never declared dead as
//! long as its link keeps running.
//!
//! # Bounds
//! - Sender: at most `send_window_frames` frames unacknowledged;
//!   `handle_send` returns [`WindowFull`] beyond (back-pressure).
//! - Receiver: frames ready for delivery plus frames held out of order never
//!   exceed `send_window_frames`: a frame with
//!   `seq > last_delivered_seq + send_window_frames` is dropped and the
//!   sender retransmits it. The application must keep calling
//!   [`PeerLink::poll_deliver`]; a consumer stalled for longer than the whole
//!   retry budget ([`ReliableConfig::unreachable_after_ns`]) makes its peers
//!   declare it unreachable.
//!
//! # Checksums
//! `seq` is written at `handle_send` and `ack` at every `poll_transmit`, so
//! a header checksum must be computed after `poll_transmit` (by the path,
//! fused with the copy onto the wire) and verified before `handle_receive`.
#![warn(missing_docs)]

mod config;
mod link;
#[cfg(test)]
mod rail_tests;
mod rails;
mod receive_buffer;
mod rtt;
mod send_buffer;
#[cfg(test)]
mod tests;

pub use config::{ReliableConfig, StripePolicy, RAIL_COUNT_MAX};
pub use link::{
    LinkEvent, LinkStats, LinkStatus, PeerLink, PeerUnreachable, ReceiveError, Transmission,
    UnreachableCause, WindowFull, ACK_TAG_PROBE, ACK_TAG_PROBE_ANSWER, ACK_TAG_RECEIVE_WINDOW_FULL,
    EVENT_QUEUE_MAX, FAST_RETRANSMIT_THRESHOLD, TAIL_LOSS_PROBES_MAX,
};
