//! The reliability layer on real paths: one `resmpi_reliable::PeerLink` per
//! peer reached over a network path, between the engine's frames and the
//! path. Frames handed to a link get a sequence number and stay buffered
//! until acknowledged; what the link gives back to transmit (new frames,
//! retransmissions, pure acks) goes to the path; what arrives from the path
//! goes through the link, which drops duplicates and delivers in order.
//!
//! Shared memory does not use it: rings neither lose nor reorder, so the
//! layer would only cost time there.

use std::time::Instant;

use resmpi_checksum::Crc32c;
use resmpi_reliable::{PeerLink, ReliableConfig};
use resmpi_wire::HEADER_LEN_BYTES;

use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::transport::Transports;

/// Where the frame checksum sits in the header (see `resmpi_wire`).
const CHECKSUM_BYTES: std::ops::Range<usize> = 56..60;

/// CRC32C of a frame: its payload, then its header with the checksum field
/// zero. Payload first so the running CRC of a payload could be kept from
/// the copy that built the frame; the header's `ack` changes at every
/// retransmission, so the header part is always computed at send time.
pub fn frame_checksum(frame: &[u8]) -> u32 {
    let (header, payload) = frame.split_at(HEADER_LEN_BYTES);
    let mut zeroed = [0u8; HEADER_LEN_BYTES];
    zeroed.copy_from_slice(header);
    zeroed[CHECKSUM_BYTES].fill(0);
    Crc32c::new().update(payload).update(&zeroed).finish()
}

/// Write a frame's checksum into its header. If the checksum field holds
/// the payload's CRC32C (parked there by `offer`, computed during its copy),
/// only the header is checksummed here; frames the link makes itself carry
/// no payload, and a zero field is always recomputed in full, so either way
/// the result equals `frame_checksum`.
pub fn seal(frame: &mut [u8]) {
    let parked = u32::from_le_bytes(frame[CHECKSUM_BYTES].try_into().expect("4 bytes"));
    let checksum = if parked != 0 || frame.len() == HEADER_LEN_BYTES {
        let mut zeroed = [0u8; HEADER_LEN_BYTES];
        zeroed.copy_from_slice(&frame[..HEADER_LEN_BYTES]);
        zeroed[CHECKSUM_BYTES].fill(0);
        Crc32c::resume(parked).update(&zeroed).finish()
    } else {
        frame_checksum(frame)
    };
    frame[CHECKSUM_BYTES].copy_from_slice(&checksum.to_le_bytes());
}

/// Whether a frame's checksum matches its bytes.
pub fn verify(frame: &[u8]) -> bool {
    frame.len() >= HEADER_LEN_BYTES && frame[CHECKSUM_BYTES] == frame_checksum(frame).to_le_bytes()
}

/// Counters for the end-of-job report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReliabilityCounters {
    /// Frames whose checksum did not match (dropped; the sender retransmits).
    pub corrupt_caught: u64,
}

/// Add the counters the end-of-job report shows, in `report`'s order.
fn add_stats(totals: &mut [u64; 6], stats: &resmpi_reliable::LinkStats) {
    totals[0] += stats.frames_sent;
    totals[1] += stats.frames_retransmitted;
    totals[2] += stats.duplicates_dropped;
    totals[3] += stats.rails_failed;
    totals[4] += stats.rails_recovered;
    totals[5] += stats.failover_time_ns;
}

/// Links to the peers that need one, and frames a full path refused.
pub struct ReliableLinks {
    links: Vec<Option<PeerLink>>,
    /// Whether frames carry and are checked against a CRC32C.
    checksums: bool,
    /// Print rails going down or up (`RESMPI_DEBUG_RAILS`).
    debug_rails: bool,
    counters: ReliabilityCounters,
    /// A frame the link produced that the path had no room for, per peer.
    refused: Vec<Option<(u32, Vec<u8>)>>,
    /// Report counters of links already forgotten (see `report`).
    retired: [u64; 6],
    epoch: Instant,
}

impl ReliableLinks {
    /// Links from `rank` to each peer for which `needs_link(peer)` holds;
    /// `checksums` seals every frame with a CRC32C and drops frames that
    /// fail it.
    pub fn new(
        rank: u32,
        size: u32,
        config: ReliableConfig,
        checksums: bool,
        debug_rails: bool,
        needs_link: impl Fn(u32) -> bool,
    ) -> ReliableLinks {
        ReliableLinks {
            checksums,
            debug_rails,
            counters: ReliabilityCounters::default(),
            links: (0..size)
                .map(|peer| needs_link(peer).then(|| PeerLink::new(rank, peer, config)))
                .collect(),
            refused: (0..size).map(|_| None).collect(),
            retired: [0; 6],
            epoch: Instant::now(),
        }
    }

    /// No peer uses the layer.
    pub fn none(size: u32) -> ReliableLinks {
        ReliableLinks::new(0, size, ReliableConfig::default(), false, false, |_| false)
    }

    /// Whether frames to `peer` go through a link.
    #[inline]
    pub fn covers(&self, peer: u32) -> bool {
        self.links.get(peer as usize).is_some_and(Option::is_some)
    }

    /// Whether any peer uses the layer.
    pub fn any(&self) -> bool {
        self.links.iter().any(Option::is_some)
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Hand a frame to `peer`'s link. False = its send window is full.
    pub fn offer(&mut self, peer: u32, header: &[u8; HEADER_LEN_BYTES], payload: &[u8]) -> bool {
        let now_ns = self.now_ns();
        let Some(link) = self.links[peer as usize].as_mut() else {
            return false;
        };
        let mut frame = vec![0u8; HEADER_LEN_BYTES + payload.len()];
        frame[..HEADER_LEN_BYTES].copy_from_slice(header);
        if self.checksums {
            // The payload's CRC32C is computed in the same pass as the copy
            // and parked in the checksum field; `seal` continues it over the
            // header at every transmission.
            let payload_crc = Crc32c::new()
                .copy_and_update(&mut frame[HEADER_LEN_BYTES..], payload)
                .finish();
            frame[CHECKSUM_BYTES].copy_from_slice(&payload_crc.to_le_bytes());
        } else {
            frame[HEADER_LEN_BYTES..].copy_from_slice(payload);
        }
        link.handle_send(now_ns, frame).is_ok()
    }

    /// A frame arrived from `peer` over its path: pass it to the link and
    /// hand every frame now deliverable in order to `deliver`.
    pub fn receive(
        &mut self,
        peer: u32,
        rail: u32,
        frame: &[u8],
        mut deliver: impl FnMut(u32, &[u8]),
    ) -> MpiResult<()> {
        let now_ns = self.now_ns();
        let Some(link) = self.links.get_mut(peer as usize).and_then(Option::as_mut) else {
            deliver(peer, frame);
            return Ok(());
        };
        if self.checksums && !verify(frame) {
            // Never delivered, never fatal: the sender retransmits it.
            self.counters.corrupt_caught += 1;
            return Ok(());
        }
        let deliver_now = link
            .handle_receive_on_rail_direct(now_ns, rail, frame)
            .map_err(|error| {
                MpiError::new(
                    ErrorClass::Intern,
                    format!("bad frame from rank {peer}: {error:?}"),
                )
            })?;
        if deliver_now {
            // The next frame in order with nothing waiting: straight from
            // the path's buffer, no copy into the link.
            deliver(peer, frame);
        }
        while let Some(delivered) = link.poll_deliver() {
            deliver(peer, &delivered);
        }
        Ok(())
    }

    /// Run timers and push everything the links want to transmit onto the
    /// paths. True if any frame went out.
    pub fn transmit(&mut self, transports: &mut Transports) -> MpiResult<bool> {
        let mut any = false;
        for peer in 0..self.links.len() as u32 {
            any |= self.transmit_to(peer, transports)?;
        }
        Ok(any)
    }

    /// Run `peer`'s timers and push what its link wants to transmit. Called
    /// right after every `offer` too: a frame must not wait in the link for
    /// the next MPI call, since the send it belongs to is already complete.
    pub fn transmit_to(&mut self, peer: u32, transports: &mut Transports) -> MpiResult<bool> {
        let now_ns = self.now_ns();
        let peer_index = peer as usize;
        let Some(link) = self.links[peer_index].as_mut() else {
            return Ok(false);
        };
        if link.poll_timeout().is_some_and(|due| due <= now_ns) {
            link.handle_timeout(now_ns);
        }
        if let Err(unreachable) = link.status() {
            return Err(MpiError::new(
                ErrorClass::Other,
                format!("rank {peer} is unreachable: no acknowledgement after every retransmission ({unreachable:?})"),
            ));
        }
        let mut any = false;
        loop {
            let (rail, frame) = match self.refused[peer_index].take() {
                // A frame held for a rail that has since gone down is
                // resent on a survivor by the link itself.
                Some((rail, _)) if !link.rail_is_up(rail) => continue,
                Some(held) => held,
                None => match link.poll_transmit_on_rail(now_ns) {
                    Some((rail, mut frame)) => {
                        if self.checksums {
                            seal(&mut frame);
                        }
                        (rail, frame)
                    }
                    None => break,
                },
            };
            let header: &[u8; HEADER_LEN_BYTES] =
                frame[..HEADER_LEN_BYTES].try_into().expect("frame header");
            match transports.try_send_on_rail(rail, peer, header, &frame[HEADER_LEN_BYTES..]) {
                Ok(true) => any = true,
                Ok(false) => {
                    self.refused[peer_index] = Some((rail, frame));
                    break;
                }
                // The frame stays in the link, which resends it elsewhere.
                Err(_) => link.handle_rail_error(now_ns, rail),
            }
        }
        while let Some(event) = link.poll_event() {
            if self.debug_rails {
                eprintln!(
                    "resmpi: rank {} link to {peer}: {event:?} at {now_ns}",
                    link.local_rank()
                );
            }
        }
        Ok(any)
    }

    /// A rail to `peer` failed (connection reset or closed).
    pub fn rail_failed(&mut self, peer: u32, rail: u32) {
        let now_ns = self.now_ns();
        if let Some(link) = self.links.get_mut(peer as usize).and_then(Option::as_mut) {
            if link.rail_is_up(rail) {
                link.handle_rail_error(now_ns, rail);
            }
        }
    }

    /// Stop using the link to `peer` (it left the job after finishing).
    pub fn forget(&mut self, peer: u32) {
        if let Some(slot) = self.links.get_mut(peer as usize) {
            // Its counters stay in the end-of-job report.
            if let Some(link) = slot.take() {
                add_stats(&mut self.retired, &link.stats());
            }
            self.refused[peer as usize] = None;
        }
    }

    /// Whether every frame sent has been acknowledged.
    pub fn all_acknowledged(&self) -> bool {
        self.links.iter().flatten().all(PeerLink::is_idle)
            && self.refused.iter().all(Option::is_none)
    }

    /// Counters of this layer.
    pub fn counters(&self) -> ReliabilityCounters {
        self.counters
    }

    /// The layer's counters for the end-of-job report, as (name, value).
    pub fn report(&self) -> Vec<(&'static str, u64)> {
        let mut totals = self.retired;
        for stats in self.links.iter().flatten().map(PeerLink::stats) {
            add_stats(&mut totals, &stats);
        }
        vec![
            ("frames_sent", totals[0]),
            ("frames_retransmitted", totals[1]),
            ("corrupt_caught", self.counters.corrupt_caught),
            ("duplicates_dropped", totals[2]),
            ("rails_failed", totals[3]),
            ("rails_recovered", totals[4]),
            ("failover_time_ns", totals[5]),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resmpi_wire::{FrameHeader, FrameKind};

    #[test]
    fn sealed_frame_verifies_and_any_single_bit_flip_is_caught() {
        let mut header = FrameHeader::new(FrameKind::Eager, 3);
        header.payload_len = 40;
        header.seq = 9;
        let mut frame = header.to_bytes().to_vec();
        frame.extend((0..40u8).map(|i| i.wrapping_mul(37)));
        seal(&mut frame);
        assert!(verify(&frame));
        // A payload CRC parked by `offer` gives the same seal.
        let mut parked = frame.clone();
        let payload_crc = resmpi_checksum::crc32c(&parked[HEADER_LEN_BYTES..]);
        parked[CHECKSUM_BYTES].copy_from_slice(&payload_crc.to_le_bytes());
        seal(&mut parked);
        assert_eq!(parked, frame);
        for bit in 0..frame.len() * 8 {
            let mut flipped = frame.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(!verify(&flipped), "flip of bit {bit} not caught");
        }
    }
}
