//! The reliability layer on real paths: one `resmpi_reliable::PeerLink` per
//! peer reached over a network path, between the engine's frames and the
//! path. Frames handed to a link get a sequence number and stay buffered
//! until acknowledged; what the link gives back to transmit (new frames,
//! retransmissions, pure acks) goes to the path; what arrives from the path
//! goes through the link, which drops duplicates and delivers in order.
//!
//! Shared memory does not use it: rings neither lose nor reorder, so the
//! layer would only cost time there.
//!
//! Copies: a small frame's payload is copied once into the link (with its
//! CRC32C computed in the same pass); a rendezvous fragment is not copied at
//! all: the link keeps a view of the application's buffer ([`Loan`]) and the
//! engine completes the send only when the link has released every view,
//! i.e. when every fragment is acknowledged. Transmitting and retransmitting
//! lend the stored payload to the path, which writes it straight to the
//! socket. On receipt, a TCP path reads the payload of the next data frame
//! in order straight into the matched receive's buffer when the engine says
//! where that is ([`ReliableLinks::place`]); the frame is checked (its
//! header before, its payload after) and committed only then
//! ([`ReliableLinks::placed`]). Large RMA puts and get replies use the same
//! two halves (`engine/rma/lent.rs`): lent from the origin's buffer or the
//! window, placed into the window or the origin's buffer.
//!
//! Why a placed payload may sit unchecked in the user's buffer: it lands
//! only in the byte range of its own fragment of a receive that is not
//! complete, a range no earlier frame has filled (the frame is next in
//! order); a payload that fails its CRC is not acknowledged and its
//! retransmission overwrites the range; nothing counts the fragment
//! received before the check passes. And no other copy of the same frame
//! writes there meanwhile: while a frame is being placed from one rail,
//! copies of it arriving on other rails are dropped (the placement claim).

use std::sync::Arc;
use std::time::Instant;

use resmpi_checksum::Crc32c;
use resmpi_path::{Placed, Placement};
use resmpi_reliable::{PeerLink, ReliableConfig, Transmission, UnreachableCause};
use resmpi_wire::seal::{header_verifies, payload_checksum_matches, seal, verify, CHECKSUM_BYTES};
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};

use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::transport::Transports;
use crate::user_bytes::UserBytes;

/// Proof that a send's buffer is lent to the links: the send holds one
/// reference, every fragment the links keep holds another; the send may
/// complete once it holds the only one.
pub type Loan = Arc<()>;

/// Whether the links still hold a view made with `loan` (someone besides
/// its owner holds a clone).
pub fn loan_outstanding(loan: &Loan) -> bool {
    Arc::strong_count(loan) > 1
}

/// What a link keeps of a frame's payload until it is acknowledged.
pub enum OutPayload {
    /// A private copy (eager and control frames: small).
    Owned(Vec<u8>),
    /// A view of the application's send buffer (rendezvous fragments).
    Lent(LentBytes),
}

/// `length` bytes at `start`, kept readable by the send request that holds
/// the same [`Loan`].
pub struct LentBytes {
    start: *const u8,
    length: usize,
    loan: Loan,
}

impl LentBytes {
    /// A view of `length` bytes at `start` that holds a clone of `loan`.
    ///
    /// # Safety
    /// The bytes must stay readable and unmodified while any clone of
    /// `loan` made from this view exists.
    pub unsafe fn new(start: *const u8, length: usize, loan: &Loan) -> LentBytes {
        LentBytes {
            start,
            length,
            loan: Arc::clone(loan),
        }
    }

    /// The loan this view holds a clone of.
    pub fn loan(&self) -> &Loan {
        &self.loan
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `new`'s contract keeps them readable while the view lives.
        unsafe { crate::engine::slice_from(self.start, self.length) }
    }
}

// SAFETY: the bytes are only read, under the library lock, while the
// lender waits for this loan to end (a send request stays incomplete, an
// RMA flush or a window's free waits).
unsafe impl Send for LentBytes {}

impl AsRef<[u8]> for OutPayload {
    fn as_ref(&self) -> &[u8] {
        match self {
            OutPayload::Owned(bytes) => bytes,
            OutPayload::Lent(lent) => lent.bytes(),
        }
    }
}

/// How the link hands a frame to the engine: `check` is `None` for a frame
/// already verified (or sent without checksums); `Some` for a data frame
/// whose payload the engine must checksum during its copy, giving the CRC to
/// `check` and committing nothing if it says no. Returns whether the frame
/// was taken.
pub type Check<'a> = Option<&'a dyn Fn(u32) -> bool>;

/// A transmission the path had no room for; its payload stays in the link.
#[derive(Clone, Copy)]
struct Refused {
    rail: u32,
    header: [u8; HEADER_LEN_BYTES],
    seq: u64,
}

/// Counters for the end-of-job report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReliabilityCounters {
    /// Frames whose checksum did not match (dropped; the sender retransmits).
    pub corrupt_caught: u64,
    /// Data frames whose payload was read straight into its receive buffer
    /// and accepted there.
    pub frames_placed: u64,
    /// Of `corrupt_caught`, frames caught after their payload was read
    /// straight into a receive buffer (never counted received there).
    pub placed_corrupt_caught: u64,
}

/// Add the counters the end-of-job report shows, in `report`'s order.
fn add_stats(totals: &mut [u64; REPORT_COUNTERS], stats: &resmpi_reliable::LinkStats) {
    totals[0] += stats.frames_sent;
    totals[1] += stats.frames_retransmitted;
    totals[2] += stats.duplicates_dropped;
    totals[3] += stats.rails_failed;
    totals[4] += stats.rails_recovered;
    totals[5] += stats.failover_time_ns;
    totals[6] += stats.tail_loss_probes;
    totals[7] += stats.spurious_retransmits;
}

/// Link counters summed for the end-of-job report (see `add_stats`).
const REPORT_COUNTERS: usize = 8;

/// Links to the peers that need one, and frames a full path refused.
pub struct ReliableLinks {
    links: Vec<Option<PeerLink<OutPayload>>>,
    /// Whether frames carry and are checked against a CRC32C.
    checksums: bool,
    /// Print rails going down or up (`RESMPI_DEBUG_RAILS`).
    debug_rails: bool,
    counters: ReliabilityCounters,
    /// A frame the link produced that the path had no room for, per peer:
    /// its rail, header and sequence number (0 for the link's own frames,
    /// which carry no payload).
    refused: Vec<Option<Refused>>,
    /// Report counters of links already forgotten (see `report`).
    retired: [u64; REPORT_COUNTERS],
    /// Per peer, the frame whose payload a rail is reading into place:
    /// (rail, seq). At most one per peer, so two copies of one frame never
    /// write the same range (see the module notes).
    placing: Vec<Option<(u32, u64)>>,
    /// MPI_Finalize passed its barrier: a peer whose rails fail has left
    /// the job after finishing (see `peers_may_leave`).
    peers_may_leave: bool,
    /// Peers that may leave one by one (`let_peer_leave`).
    leavers: Vec<u32>,
    /// A peer unreachable on every rail is a process failure for the
    /// engine to handle (failure policy `continue`), not a fatal error.
    pub unreachable_is_failure: bool,
    /// Peers found unreachable since the engine last asked.
    unreachable: Vec<u32>,
    epoch: Instant,
    /// This process's world rank and the links' configuration, for a link
    /// made after wire-up (a re-joined peer); `None` when the layer is off.
    template: Option<(u32, ReliableConfig)>,
    /// In a forked replica: each engine peer's process number on the wire
    /// ([`ReliableLinks::renumber`]).
    physical: Option<Vec<u32>>,
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
            retired: [0; REPORT_COUNTERS],
            placing: vec![None; size as usize],
            peers_may_leave: false,
            leavers: Vec::new(),
            unreachable_is_failure: false,
            unreachable: Vec::new(),
            epoch: Instant::now(),
            template: Some((rank, config)),
            physical: None,
        }
    }

    /// No peer uses the layer.
    pub fn none(size: u32) -> ReliableLinks {
        let mut links =
            ReliableLinks::new(0, size, ReliableConfig::default(), false, false, |_| false);
        links.template = None;
        links
    }

    /// A new process took `peer`'s place (re-join): drop the old link and,
    /// when the layer is on and `needs_link`, start a fresh one (sequence
    /// numbers from the start, nothing in flight).
    pub fn adopt(&mut self, peer: u32, needs_link: bool) {
        self.forget(peer);
        let physical = self
            .physical
            .as_ref()
            .map_or(peer, |physical| physical[peer as usize]);
        if let (Some((rank, config)), Some(slot)) =
            (self.template, self.links.get_mut(peer as usize))
        {
            if needs_link {
                *slot = Some(PeerLink::new(rank, physical, config));
            }
        }
        self.unreachable.retain(|&lost| lost != peer);
    }

    /// In a replica forked by a substitute: this process is `rank` on the
    /// wire, and the peer this engine calls `p` is `physical[p]` there
    /// (the links' frames name both). Links made from now on say so;
    /// existing ones are dropped (the caller adopts each peer again).
    pub fn renumber(&mut self, rank: u32, physical: Vec<u32>) {
        if let Some((local, _)) = self.template.as_mut() {
            *local = rank;
        }
        for peer in 0..self.links.len() as u32 {
            self.forget(peer);
        }
        self.physical = Some(physical);
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

    /// Hand a frame to `peer`'s link, with a private copy of its payload.
    /// False = its send window is full.
    pub fn offer(&mut self, peer: u32, header: &[u8; HEADER_LEN_BYTES], payload: &[u8]) -> bool {
        let bytes = UserBytes::from(payload.as_ptr());
        // SAFETY: `payload` is a live slice of `payload.len()` bytes.
        unsafe { self.offer_gathered(peer, header, &bytes, 0, payload.len()) }
    }

    /// Hand a frame to `peer`'s link whose payload is packed bytes
    /// `[offset, offset + length)` of `bytes`, gathered into a private copy.
    /// False = its send window is full.
    ///
    /// # Safety
    /// `bytes` must hold those bytes, readable, for this call.
    pub unsafe fn offer_gathered(
        &mut self,
        peer: u32,
        header: &[u8; HEADER_LEN_BYTES],
        bytes: &UserBytes,
        offset: usize,
        length: usize,
    ) -> bool {
        if !self.has_room(peer) {
            return false;
        }
        let mut header = *header;
        let mut copy = vec![0u8; length];
        // SAFETY (both arms): by the caller's promise.
        if self.checksums {
            // The payload's CRC32C is computed in the same pass as the copy
            // and parked in the checksum field; `seal` continues it over the
            // header at every transmission.
            let payload_crc = unsafe { bytes.read_checksummed(offset, &mut copy) };
            header[CHECKSUM_BYTES].copy_from_slice(&payload_crc.to_le_bytes());
        } else {
            unsafe { bytes.read(offset, &mut copy) };
        }
        self.push(peer, header, OutPayload::Owned(copy))
    }

    /// Hand a frame to `peer`'s link without copying its payload: the link
    /// keeps a view of `length` bytes at `start` until the frame is
    /// acknowledged, holding a clone of `loan` meanwhile. False = its send
    /// window is full.
    ///
    /// # Safety
    /// `start` must point to `length` readable bytes that stay alive and
    /// unmodified while any clone of `loan` made here exists.
    pub unsafe fn offer_lent(
        &mut self,
        peer: u32,
        header: &[u8; HEADER_LEN_BYTES],
        start: *const u8,
        length: usize,
        loan: &Loan,
    ) -> bool {
        if !self.has_room(peer) {
            return false;
        }
        let mut header = *header;
        // SAFETY: the caller's promise.
        let payload = OutPayload::Lent(unsafe { LentBytes::new(start, length, loan) });
        if self.checksums {
            // One read of the payload, parked like `offer`'s.
            let payload_crc = Crc32c::new().update(payload.as_ref()).finish();
            header[CHECKSUM_BYTES].copy_from_slice(&payload_crc.to_le_bytes());
        }
        self.push(peer, header, payload)
    }

    fn has_room(&self, peer: u32) -> bool {
        self.links[peer as usize]
            .as_ref()
            .is_some_and(|link| !link.send_window_is_full())
    }

    fn push(&mut self, peer: u32, header: [u8; HEADER_LEN_BYTES], payload: OutPayload) -> bool {
        let now_ns = self.now_ns();
        let Some(link) = self.links[peer as usize].as_mut() else {
            return false;
        };
        link.handle_send_parts(now_ns, header, payload).is_ok()
    }

    /// A frame arrived from `peer` over its path: pass it to the link and
    /// hand every frame now deliverable in order to `deliver` (see
    /// [`Check`]).
    ///
    /// With checksums, the next data frame in order is checked in the same
    /// pass as the engine's copy of its payload into the receive buffer
    /// (LA-MPI's "CRC during the copy"): its header, which says where the
    /// payload goes, is checked first on its own; a payload that fails
    /// leaves the receive incomplete and the frame unacknowledged, so the
    /// retransmission overwrites what the copy wrote. Other frames are
    /// checked whole before the link sees them.
    pub fn receive(
        &mut self,
        peer: u32,
        rail: u32,
        frame: &[u8],
        mut deliver: impl FnMut(u32, &[u8], Check) -> bool,
    ) -> MpiResult<()> {
        let now_ns = self.now_ns();
        let Some(link) = self.links.get_mut(peer as usize).and_then(Option::as_mut) else {
            deliver(peer, frame, None);
            return Ok(());
        };
        if let Some((placing_rail, placing_seq)) = self.placing[peer as usize] {
            if placing_rail != rail
                && FrameHeader::parse(frame).is_ok_and(|header| header.seq == placing_seq)
            {
                if link.rail_is_up(placing_rail) {
                    // Another copy of the frame being placed: it would
                    // write the same range. Unacknowledged, it is resent
                    // if need be.
                    return Ok(());
                }
                // The placing rail went silent mid-payload: revoke its
                // claim (its next read finds none and abandons the frame)
                // and take this copy instead.
                self.placing[peer as usize] = None;
            }
        }
        let mut delivered_already = false;
        if self.checksums {
            if !header_verifies(frame) {
                // Never delivered, never fatal: the sender retransmits it.
                self.counters.corrupt_caught += 1;
                return Ok(());
            }
            let parsed = FrameHeader::parse(frame).ok();
            // A copy of a frame received already is dropped and acked
            // whatever its payload: its bytes are never used, and they may
            // honestly differ from the first copy's (a lent buffer the
            // application may reuse once the first copy was taken, e.g.
            // window memory under a get's reply). Checking them would leave
            // the sender unacked until it gave the peer up.
            let duplicate = parsed.is_some_and(|header| link.is_duplicate(header.seq));
            let fused = parsed.is_some_and(|header| {
                header.kind == FrameKind::Data
                    && header.payload_len > 0
                    && frame.len() == HEADER_LEN_BYTES + header.payload_len as usize
                    && link.is_next_in_order(header.seq)
            });
            if duplicate {
            } else if fused {
                let check = |payload_crc| payload_checksum_matches(frame, payload_crc);
                if !deliver(peer, frame, Some(&check)) {
                    self.counters.corrupt_caught += 1;
                    return Ok(());
                }
                delivered_already = true;
            } else if !verify(frame) {
                self.counters.corrupt_caught += 1;
                return Ok(());
            }
        }
        let deliver_now = link
            .handle_receive_on_rail_direct(now_ns, rail, frame)
            .map_err(|error| {
                MpiError::new(
                    ErrorClass::Intern,
                    format!("bad frame from rank {peer}: {error:?}"),
                )
            })?;
        if deliver_now && !delivered_already {
            // The next frame in order with nothing waiting: straight from
            // the path's buffer, no copy into the link.
            deliver(peer, frame, None);
        }
        while let Some(delivered) = link.poll_deliver() {
            deliver(peer, &delivered, None);
            link.recycle(delivered);
        }
        Ok(())
    }

    /// A path has the header of a frame from `peer` on `rail` whose payload
    /// is still on the wire: where should the payload go? Only a frame
    /// with a payload and an intact header (with checksums), the next in order on its
    /// link (`PeerLink::may_place`), not being placed from another rail, and
    /// for which `locate` (the engine) names a destination. Asked again
    /// (`resumed`) before every read of more of that payload: any answer
    /// `None` abandons the placement (and drops its claim), and a resumed
    /// placement whose claim was revoked (its rail went down and another
    /// copy was taken) is refused, so it never writes again.
    pub fn place(
        &mut self,
        peer: u32,
        rail: u32,
        header_bytes: &[u8; HEADER_LEN_BYTES],
        resumed: bool,
        locate: impl FnOnce(&FrameHeader) -> Option<*mut u8>,
    ) -> Option<Placement> {
        let Ok(header) = FrameHeader::parse(header_bytes) else {
            return None;
        };
        // Which kinds may be placed is the engine's to say (`locate`): a
        // rendezvous fragment, an RMA data frame.
        if header.payload_len == 0 {
            return None;
        }
        let Some(link) = self.links.get(peer as usize).and_then(Option::as_ref) else {
            // No link (`--reliable off`): TCP alone orders and delivers.
            return locate(&header).map(|start| Placement {
                start,
                checksum: false,
            });
        };
        let claim = &mut self.placing[peer as usize];
        let ours = Some((rail, header.seq));
        match *claim {
            _ if *claim == ours => {}
            // Revoked (or never ours): this payload writes no more.
            _ if resumed => return None,
            None => {}
            // Another rail's placement, which its own reads will finish.
            Some((other_rail, _)) if other_rail != rail && link.rail_is_up(other_rail) => {
                return None
            }
            // Stale: its rail went down, or ended on this rail unreported
            // (the path reports every placement it ends; kept for safety).
            Some(_) => *claim = None,
        }
        let start = (!self.checksums || header_verifies(header_bytes))
            .then(|| link.may_place(header.seq))
            .filter(|&next| next)
            .and_then(|_| locate(&header));
        *claim = start.and(ours);
        Some(Placement {
            start: start?,
            checksum: self.checksums,
        })
    }

    /// The payload of a frame [`ReliableLinks::place`] placed has been read
    /// (`placed`). With checksums, its CRC must complete the frame's
    /// checksum; then the link takes it. `Ok(true)`: the link accepted it
    /// as delivered, and the caller counts its bytes received and then
    /// hands over what the link holds ready ([`ReliableLinks::deliver_ready`]).
    /// `Ok(false)`: nothing of it counts (lost, corrupt, or no longer ours).
    pub fn placed(
        &mut self,
        peer: u32,
        rail: u32,
        header_bytes: &[u8; HEADER_LEN_BYTES],
        placed: Placed,
    ) -> MpiResult<bool> {
        let Ok(header) = FrameHeader::parse(header_bytes) else {
            return Ok(false);
        };
        let claimed = self.placing[peer as usize] == Some((rail, header.seq));
        if claimed {
            self.placing[peer as usize] = None;
        }
        let Placed::Whole { payload_crc } = placed else {
            return Ok(false);
        };
        let now_ns = self.now_ns();
        let Some(link) = self.links.get_mut(peer as usize).and_then(Option::as_mut) else {
            return Ok(true);
        };
        if !claimed {
            // Not ours to commit (the claim was dropped meanwhile).
            return Ok(false);
        }
        if self.checksums && !payload_checksum_matches(header_bytes, payload_crc) {
            // The bytes stay in the incomplete receive's range of this
            // fragment until the retransmission overwrites them.
            self.counters.corrupt_caught += 1;
            self.counters.placed_corrupt_caught += 1;
            return Ok(false);
        }
        let accepted = link
            .handle_receive_placed_on_rail(now_ns, rail, header_bytes)
            .map_err(|error| {
                MpiError::new(
                    ErrorClass::Intern,
                    format!("bad frame from rank {peer}: {error:?}"),
                )
            })?;
        self.counters.frames_placed += u64::from(accepted);
        Ok(accepted)
    }

    /// Hand every frame `peer`'s link holds ready, in order, to `deliver`.
    pub fn deliver_ready(&mut self, peer: u32, mut deliver: impl FnMut(u32, &[u8], Check) -> bool) {
        let Some(link) = self.links.get_mut(peer as usize).and_then(Option::as_mut) else {
            return;
        };
        while let Some(delivered) = link.poll_deliver() {
            deliver(peer, &delivered, None);
            link.recycle(delivered);
        }
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
            if self.peers_may_leave || self.leavers.contains(&peer) {
                self.forget(peer);
                return Ok(false);
            }
            if self.unreachable_is_failure {
                self.forget(peer);
                self.unreachable.push(peer);
                return Ok(false);
            }
            let why = match unreachable.cause {
                UnreachableCause::RetriesExhausted => format!(
                    "frame {} unacknowledged after {} retransmissions",
                    unreachable.seq, unreachable.retry_count
                ),
                UnreachableCause::AllRailsDown => "every rail to it is down".to_string(),
            };
            return Err(MpiError::new(
                ErrorClass::Other,
                format!("rank {peer} is unreachable: {why}"),
            ));
        }
        let mut any = false;
        loop {
            let (Refused { rail, header, seq }, payload) = match self.refused[peer_index].take() {
                // A frame held for a rail that has since gone down is
                // resent on a survivor by the link itself.
                Some(held) if !link.rail_is_up(held.rail) => continue,
                Some(held) if held.seq == 0 => (held, &[][..]),
                Some(held) => match link.payload_of(held.seq) {
                    Some(payload) => (held, payload),
                    // Acknowledged meanwhile (an earlier copy got through).
                    None => continue,
                },
                None => match link.poll_transmission(now_ns) {
                    Some(Transmission {
                        rail,
                        mut header,
                        payload,
                        seq,
                    }) => {
                        if self.checksums {
                            seal(&mut header, payload);
                        }
                        (Refused { rail, header, seq }, payload)
                    }
                    None => break,
                },
            };
            match transports.try_send_on_rail(rail, peer, &header, payload) {
                Ok(true) => any = true,
                Ok(false) => {
                    self.refused[peer_index] = Some(Refused { rail, header, seq });
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

    /// From now on (MPI_Finalize's barrier entered), a peer whose every
    /// rail fails is taken to have left after finishing: every rank passed
    /// the barrier only once all had entered it, and a peer leaves only
    /// when all its own frames are acknowledged; a real death is the
    /// launcher's to report. Sending an ack to a peer that already closed
    /// its sockets must not fail this rank's MPI_Finalize.
    pub fn let_peers_leave(&mut self) {
        self.peers_may_leave = true;
    }

    /// Peers found unreachable since the last call (with
    /// `unreachable_is_failure`): the engine turns each into a failure event.
    pub fn take_unreachable(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.unreachable)
    }

    /// A rail to `peer` failed (connection reset or closed).
    pub fn rail_failed(&mut self, peer: u32, rail: u32) {
        let now_ns = self.now_ns();
        if let Some(claim) = self.placing.get_mut(peer as usize) {
            // Its partly read frame went with the connection.
            if claim.is_some_and(|(placing_rail, _)| placing_rail == rail) {
                *claim = None;
            }
        }
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
            self.placing[peer as usize] = None;
        }
    }

    /// Room for `size` peers (MPI_Comm_spawn's children); new ones have no
    /// link until `adopt` gives them one.
    pub fn grow(&mut self, size: u32) {
        let peers = size as usize;
        if peers > self.links.len() {
            self.links.resize_with(peers, || None);
            self.refused.resize_with(peers, || None);
            self.placing.resize(peers, None);
        }
    }

    /// `peer` may leave (its inter-communicator was disconnected): an
    /// unreachable link to it is forgotten, not an error.
    pub fn let_peer_leave(&mut self, peer: u32) {
        if !self.leavers.contains(&peer) {
            self.leavers.push(peer);
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
            ("tail_loss_probes", totals[6]),
            ("spurious_retransmissions", totals[7]),
            ("corrupt_caught", self.counters.corrupt_caught),
            ("frames_placed", self.counters.frames_placed),
            ("placed_corrupt_caught", self.counters.placed_corrupt_caught),
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

    /// Data frame `seq` from rank 0 of `payload_bytes` bytes, sealed.
    fn sealed_data_frame(seq: u64, payload_bytes: usize) -> Vec<u8> {
        let mut header = FrameHeader::new(FrameKind::Data, 0);
        header.seq = seq;
        header.payload_len = payload_bytes as u32;
        let payload = vec![7u8; payload_bytes];
        let mut header_bytes = header.to_bytes();
        seal(&mut header_bytes, &payload);
        [&header_bytes[..], &payload].concat()
    }

    #[test]
    fn placement_on_a_rail_gone_silent_is_revoked_by_another_rails_copy_and_never_writes_again() {
        let config = ReliableConfig {
            rail_count: 2,
            ..ReliableConfig::default()
        };
        // Rank 1's links; rank 0 is the peer.
        let mut links = ReliableLinks::new(1, 2, config, true, false, |peer| peer == 0);
        let frame = sealed_data_frame(1, 64 << 10);
        let header: [u8; HEADER_LEN_BYTES] = frame[..HEADER_LEN_BYTES].try_into().unwrap();
        let mut destination = vec![0u8; 64 << 10];
        let start = destination.as_mut_ptr();
        let mut delivered = 0;
        // Rail 1 starts placing frame 1.
        assert!(links.place(0, 1, &header, false, |_| Some(start)).is_some());
        // A copy on rail 0 while rail 1 is up: dropped (rail 1 finishes it).
        links
            .receive(0, 0, &frame, |_, _, _| {
                delivered += 1;
                true
            })
            .unwrap();
        assert_eq!(delivered, 0);
        // Nor may rail 0 start placing it.
        assert!(links.place(0, 0, &header, false, |_| Some(start)).is_none());
        // Rail 1 goes silent (the link marks it down, the connection stays).
        links.links[0].as_mut().unwrap().handle_rail_error(0, 1);
        links
            .receive(0, 0, &frame, |_, _, _| {
                delivered += 1;
                true
            })
            .unwrap();
        assert_eq!(delivered, 1, "the other rail's copy is taken");
        // Rail 1 comes back mid-payload: its placement is refused, and
        // what it reports is not committed.
        assert!(links.place(0, 1, &header, true, |_| Some(start)).is_none());
        let crc = resmpi_checksum::crc32c(&frame[HEADER_LEN_BYTES..]);
        assert!(!links
            .placed(0, 1, &header, Placed::Whole { payload_crc: crc })
            .unwrap());
    }

    #[test]
    fn a_duplicate_whose_lent_payload_changed_since_is_dropped_and_acked_not_taken_for_corrupt() {
        let mut links = ReliableLinks::new(1, 2, ReliableConfig::default(), true, false, |peer| {
            peer == 0
        });
        let frame = sealed_data_frame(1, 4096);
        let delivered = std::cell::Cell::new(0);
        // As the engine does: a fused check is made on the payload copied.
        let take = |_: u32, frame: &[u8], check: Check| {
            let crc = resmpi_checksum::crc32c(&frame[HEADER_LEN_BYTES..]);
            let whole = check.is_none_or(|check| check(crc));
            if whole {
                delivered.set(delivered.get() + 1);
            }
            whole
        };
        links.receive(0, 0, &frame, take).unwrap();
        // The retransmission read the sender's buffer after it changed: the
        // header (and its sequence number) verify, the payload does not.
        let mut changed = frame.clone();
        changed[HEADER_LEN_BYTES + 100] ^= 0xff;
        links.receive(0, 0, &changed, take).unwrap();
        assert_eq!(delivered.get(), 1);
        let counters: std::collections::HashMap<_, _> = links.report().into_iter().collect();
        assert_eq!(counters["corrupt_caught"], 0, "{counters:?}");
        assert_eq!(counters["duplicates_dropped"], 1, "{counters:?}");
        // A changed payload of a frame not received yet is still caught.
        let mut fresh = sealed_data_frame(2, 4096);
        fresh[HEADER_LEN_BYTES + 100] ^= 0xff;
        links.receive(0, 0, &fresh, take).unwrap();
        assert_eq!(delivered.get(), 1);
        let counters: std::collections::HashMap<_, _> = links.report().into_iter().collect();
        assert_eq!(counters["corrupt_caught"], 1, "{counters:?}");
    }
}
