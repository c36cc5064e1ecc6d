//! [`FaultyPath`]: a [`Path`] wrapper that drops, corrupts, duplicates and
//! delays frames and takes its rail down on a schedule, as a [`FaultSpec`]
//! (`mpiexec --inject SPEC`) says.
//!
//! It is middleware in the manner of smoltcp's `phy::FaultInjector`: it wraps
//! any path, forwards by default, and knows nothing about frame kinds,
//! sequence numbers or retransmission. The layers above it (`crates/reliable`)
//! must survive what it does; it exists so that tests and users can show they
//! do.
//!
//! # Reproducibility
//!
//! Whether frame *n* from this rank to `peer` on this rail is dropped,
//! corrupted (and which bit) or duplicated is a pure function of
//! (seed, local rank, peer, rail, *n*): the decisions come from a SplitMix64
//! generator seeded from those five numbers, not from one stream shared by
//! all traffic. So the fault sequence of a pair does not depend on how its
//! frames interleave with other peers' frames, nor on back-pressure: a send
//! refused with `Ok(false)` does not advance *n*, and its retry meets the
//! same fate. Time (delays, rail-down windows) comes only from the clock the
//! caller passes in, so a virtual clock makes a run exactly repeatable.
//!
//! # Where each fault happens
//!
//! - drop, corrupt, duplicate and delay act on `try_send` only. Under
//!   `--inject` every rank wraps its paths, so a frame crosses two wrappers;
//!   acting on one side keeps each fault at the rate the spec states.
//! - rail-down acts in both directions: while the rail is down for a pair,
//!   frames sent to the peer are swallowed (`try_send` says `Ok(true)` and
//!   sends nothing) and frames received from it are discarded before the
//!   handler sees them, because a dead link carries nothing either way and the
//!   peer may not be wrapped. Windows are half-open, `[start, start +
//!   duration)`, on the wrapper's clock.
//! - corruption flips exactly one bit of a copy (the caller's buffers are
//!   never written) anywhere in the header or payload **except** the header
//!   bytes a path itself reads to delimit and validate frames: magic,
//!   version and kind (bytes 0..4) and `payload_len` (bytes 20..24). On a
//!   byte stream (TCP) a flip there desynchronises or fails the whole
//!   connection, which is a broken link (model it with `rail-down`), not a
//!   corrupt frame that the checksum must catch. The checksum field itself
//!   may flip. When a frame is both corrupted and duplicated, only the first
//!   copy is corrupted: a duplicate is a second transmission.
//!
//! # Delay and ordering
//!
//! `delay:MS` holds *every* frame of an affected pair for MS before it enters
//! the wrapped path. Held frames wait in one FIFO queue per peer, released by
//! later `poll`/`flush` calls once due, so frames to one peer stay in the
//! order sent (this wrapper models latency, not reordering; the simulator in
//! `crates/sim` models reordering). Once a peer has frames held (delayed, or
//! the second copy of a duplicate the wrapped path had no room for), its new
//! frames queue behind them for the same reason. The queue is bounded
//! ([`HELD_FRAME_COUNT_MAX`], [`HELD_BYTES_MAX`]); when it is full `try_send`
//! reports back-pressure (`Ok(false)`). A held frame is lost if its rail is
//! down when it falls due or when it is released. [`FaultyPath::next_due_ns`]
//! tells a caller about to sleep when the next held frame falls due.
//!
//! # Process faults
//!
//! `kill:` and `host-down:` items end processes, which is `mpiexec`'s job
//! (and the library's, for `kill:R@sends=N`); this wrapper ignores them, so a
//! spec with only process faults costs a path nothing.

use crate::inject_spec::{Fault, FaultSpec, PairFaults, RailDownWindow};
use crate::{Path, PathError, Placed, Placement, Receiver};
use std::collections::{BTreeMap, VecDeque};

/// Most frames held (delayed or waiting for room) at once, all peers together.
pub const HELD_FRAME_COUNT_MAX: usize = 4096;
/// Most bytes (headers and payloads) held at once, all peers together.
pub const HELD_BYTES_MAX: usize = 64 << 20;

const HEADER_BYTES: usize = resmpi_wire::HEADER_LEN_BYTES;
/// Header bytes corruption may flip: everything but magic, version, kind
/// (0..4) and payload_len (20..24). See the module docs for why.
const CORRUPTIBLE_HEADER_RANGES: [std::ops::Range<usize>; 2] = [4..20, 24..HEADER_BYTES];
const CORRUPTIBLE_HEADER_BYTES: usize = 16 + 40;

/// What the wrapper has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Frames accepted from the caller and never sent.
    pub frames_dropped: u64,
    /// Frames sent with one bit flipped.
    pub frames_corrupted: u64,
    /// Frames sent twice.
    pub frames_duplicated: u64,
    /// Frames held for `delay:` before entering the wrapped path.
    pub frames_delayed: u64,
    /// Frames lost to a rail-down window: sent, held or received.
    pub frames_swallowed_rail_down: u64,
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, any seed gives a good stream,
/// and it keeps this crate free of a random-number dependency.
struct SplitMix64 {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix64(value: u64) -> u64 {
    let mut z = value;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// True with probability `rate`: 53 random bits as a float in [0, 1).
    fn chance(&mut self, rate: f64) -> bool {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < rate
    }
}

/// What happens to one accepted frame.
struct FrameFate {
    drop: bool,
    /// Index among the corruptible bits of the frame, if it is corrupted.
    corrupt_bit: Option<usize>,
    duplicate: bool,
}

/// A frame copy waiting in a peer's queue.
struct HeldFrame {
    due_ns: u64,
    header: [u8; HEADER_BYTES],
    payload: Vec<u8>,
}

impl HeldFrame {
    fn bytes(&self) -> usize {
        HEADER_BYTES + self.payload.len()
    }
}

/// Everything the wrapper knows about one peer, built on first contact.
struct PeerState {
    faults: PairFaults,
    windows: Vec<RailDownWindow>,
    /// Key from (seed, local rank, peer, rail); frame decisions derive from it.
    frame_key: u64,
    /// Frames accepted so far for this peer: the *n* of the next frame.
    frames_accepted: u64,
    held: VecDeque<HeldFrame>,
}

impl PeerState {
    fn new(spec: &FaultSpec, local_rank: u32, rail: u32, peer: u32) -> PeerState {
        let mut frame_key = mix64(spec.seed_or_default() ^ 0x6661_756c_7479); // "faulty"
        for part in [local_rank, peer, rail] {
            frame_key = mix64(frame_key ^ u64::from(part).wrapping_add(GOLDEN_GAMMA));
        }
        PeerState {
            faults: spec.faults_for_pair(local_rank, peer),
            windows: spec.rail_down_windows(rail, local_rank, peer),
            frame_key,
            frames_accepted: 0,
            held: VecDeque::new(),
        }
    }

    fn rail_down_at(&self, now_ns: u64) -> bool {
        self.windows.iter().any(|window| window.contains(now_ns))
    }

    /// The fate of the next frame; the same every time until it is accepted.
    fn next_fate(&self, payload_bytes: usize) -> FrameFate {
        let mut random = SplitMix64 {
            state: mix64(self.frame_key ^ self.frames_accepted.wrapping_mul(GOLDEN_GAMMA)),
        };
        // Always four draws in this order, so changing one rate leaves the
        // other decisions of the run as they were.
        let drop = random.chance(self.faults.drop_rate);
        let corrupt = random.chance(self.faults.corrupt_rate);
        let duplicate = random.chance(self.faults.duplicate_rate);
        let bit_draw = random.next_u64();
        let corruptible_bits = (CORRUPTIBLE_HEADER_BYTES + payload_bytes) * 8;
        FrameFate {
            drop,
            corrupt_bit: corrupt.then(|| (bit_draw % corruptible_bits as u64) as usize),
            duplicate,
        }
    }
}

fn peer_state<'a>(
    peers: &'a mut BTreeMap<u32, PeerState>,
    spec: &FaultSpec,
    local_rank: u32,
    rail: u32,
    peer: u32,
) -> &'a mut PeerState {
    peers
        .entry(peer)
        .or_insert_with(|| PeerState::new(spec, local_rank, rail, peer))
}

/// A path that injects the faults of a [`FaultSpec`] into the frames it
/// carries for rank `local_rank` on rail `rail`. See the module docs.
///
/// The clock returns nanoseconds on the time line of the spec's rail-down
/// times: since the job started, for `mpiexec` (which gives every rank the
/// same origin, so a rail goes down everywhere at once), or a virtual clock
/// in tests. It must not go backwards. The default clock type is boxed so
/// that the wrapper can be named (`FaultyPath<TcpPath>`) and sent to a
/// progress thread.
pub struct FaultyPath<P, C = Box<dyn Fn() -> u64 + Send>> {
    inner: P,
    spec: FaultSpec,
    local_rank: u32,
    rail: u32,
    clock: C,
    /// Whether any rail-down item names this rail: if not, received frames
    /// need no per-peer check.
    rail_has_windows: bool,
    peers: BTreeMap<u32, PeerState>,
    held_frame_count: usize,
    held_bytes: usize,
    stats: FaultStats,
    /// Reused for the payload of a frame whose flipped bit is in its payload.
    corrupt_payload: Vec<u8>,
}

impl<P: Path, C: Fn() -> u64> FaultyPath<P, C> {
    /// Wrap `inner`, which carries `local_rank`'s frames on rail `rail`.
    /// `clock` gives "now" in nanoseconds (see the type's docs).
    pub fn new(inner: P, spec: FaultSpec, local_rank: u32, rail: u32, clock: C) -> Self {
        let rail_has_windows = spec.rules.iter().any(
            |rule| matches!(rule.fault, Fault::RailDown { rail: down_rail, .. } if down_rail == rail),
        );
        FaultyPath {
            inner,
            spec,
            local_rank,
            rail,
            clock,
            rail_has_windows,
            peers: BTreeMap::new(),
            held_frame_count: 0,
            held_bytes: 0,
            stats: FaultStats::default(),
            corrupt_payload: Vec::new(),
        }
    }

    /// What has been injected so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// The spec this wrapper applies.
    pub fn spec(&self) -> &FaultSpec {
        &self.spec
    }

    /// The wrapped path (for its `wait`, file descriptors, ...).
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The wrapped path, mutably. Frames sent on it directly bypass the
    /// faults and may overtake held frames.
    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// Frames held right now (delayed, or waiting for room in the wrapped
    /// path).
    pub fn held_frame_count(&self) -> usize {
        self.held_frame_count
    }

    /// When the earliest held frame falls due, on the wrapper's clock; `None`
    /// when nothing is held. A caller about to sleep should wake by then and
    /// `poll` or `flush`.
    pub fn next_due_ns(&self) -> Option<u64> {
        self.peers
            .values()
            .filter_map(|state| state.held.front().map(|frame| frame.due_ns))
            .min()
    }

    /// Hand every held frame that is due by `now_ns` to the wrapped path, in
    /// order per peer, stopping at a peer whose path has no room.
    fn release_due(&mut self, now_ns: u64) -> Result<(), PathError> {
        if self.held_frame_count == 0 {
            return Ok(());
        }
        for (&peer, state) in self.peers.iter_mut() {
            while let Some(frame) = state.held.front() {
                if frame.due_ns > now_ns {
                    break;
                }
                let swallowed = state.rail_down_at(frame.due_ns) || state.rail_down_at(now_ns);
                let outcome = if swallowed {
                    Ok(true)
                } else {
                    self.inner.try_send(peer, &frame.header, &frame.payload)
                };
                if let Ok(false) = outcome {
                    break;
                }
                // Sent, swallowed, or refused for good (the error goes to the
                // caller): either way the frame leaves the queue.
                let frame = state.held.pop_front().expect("front exists");
                self.held_frame_count -= 1;
                self.held_bytes -= frame.bytes();
                if swallowed {
                    self.stats.frames_swallowed_rail_down += 1;
                }
                outcome?;
            }
        }
        Ok(())
    }
}

/// The receiving half of rail-down for `poll_placing`: what arrives from a
/// peer whose rail is down is discarded, whole or placed.
struct RailDownFilter<'a, R, D> {
    receiver: &'a mut R,
    is_down: D,
    stats: &'a mut FaultStats,
    delivered: usize,
}

// SAFETY: placements are the wrapped receiver's, passed through unchanged.
unsafe impl<R: Receiver, D: FnMut(u32) -> bool> Receiver for RailDownFilter<'_, R, D> {
    fn frame(&mut self, peer: u32, frame: &[u8]) {
        if (self.is_down)(peer) {
            self.stats.frames_swallowed_rail_down += 1;
        } else {
            self.delivered += 1;
            self.receiver.frame(peer, frame);
        }
    }

    fn place(
        &mut self,
        peer: u32,
        header: &[u8; HEADER_BYTES],
        resumed: bool,
    ) -> Option<Placement> {
        if (self.is_down)(peer) {
            None
        } else {
            self.receiver.place(peer, header, resumed)
        }
    }

    fn placed(&mut self, peer: u32, header: &[u8; HEADER_BYTES], placed: Placed) {
        if (self.is_down)(peer) && placed != Placed::Lost {
            // The rail went down while the payload arrived: lost, and the
            // receiver must hear so (it may hold the frame's place).
            self.stats.frames_swallowed_rail_down += 1;
            self.receiver.placed(peer, header, Placed::Lost);
        } else {
            self.delivered += usize::from(placed != Placed::Lost);
            self.receiver.placed(peer, header, placed);
        }
    }
}

impl<P: Path, C: Fn() -> u64> Path for FaultyPath<P, C> {
    fn try_send(
        &mut self,
        peer: u32,
        header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> Result<bool, PathError> {
        if !self.spec.has_frame_faults() {
            return self.inner.try_send(peer, header, payload);
        }
        let state = peer_state(
            &mut self.peers,
            &self.spec,
            self.local_rank,
            self.rail,
            peer,
        );
        if !state.faults.is_active() && state.windows.is_empty() && state.held.is_empty() {
            return self.inner.try_send(peer, header, payload);
        }
        let now_ns = (self.clock)();
        if state.rail_down_at(now_ns) {
            state.frames_accepted += 1;
            self.stats.frames_swallowed_rail_down += 1;
            return Ok(true);
        }
        let fate = state.next_fate(payload.len());
        if fate.drop {
            state.frames_accepted += 1;
            self.stats.frames_dropped += 1;
            return Ok(true);
        }

        // The first copy, with one bit flipped if its fate says so.
        let mut first_header = *header;
        let mut first_payload = payload;
        if let Some(bit) = fate.corrupt_bit {
            let (byte, mask) = (bit / 8, 1u8 << (bit % 8));
            if byte < CORRUPTIBLE_HEADER_BYTES {
                let [low, high] = &CORRUPTIBLE_HEADER_RANGES;
                let header_byte = if byte < low.len() {
                    low.start + byte
                } else {
                    high.start + byte - low.len()
                };
                first_header[header_byte] ^= mask;
            } else {
                self.corrupt_payload.clear();
                self.corrupt_payload.extend_from_slice(payload);
                self.corrupt_payload[byte - CORRUPTIBLE_HEADER_BYTES] ^= mask;
                first_payload = &self.corrupt_payload;
            }
        }

        let copy_count = if fate.duplicate { 2 } else { 1 };
        let delayed = state.faults.delay_ns > 0;
        let frame_bytes = HEADER_BYTES + payload.len();
        // Room for every copy that might have to wait: all of them when the
        // frame is delayed or queues behind held frames, else only the second
        // copy of a duplicate (the wrapped path may refuse it after taking the
        // first, and the first cannot be taken back).
        let copies_maybe_held = if delayed || !state.held.is_empty() {
            copy_count
        } else {
            copy_count - 1
        };
        if self.held_frame_count + copies_maybe_held > HELD_FRAME_COUNT_MAX
            || self.held_bytes + copies_maybe_held * frame_bytes > HELD_BYTES_MAX
        {
            return Ok(false);
        }

        let mut hold = |state: &mut PeerState, header: [u8; HEADER_BYTES], payload: &[u8]| {
            state.held.push_back(HeldFrame {
                due_ns: now_ns.saturating_add(state.faults.delay_ns),
                header,
                payload: payload.to_vec(),
            });
            self.held_frame_count += 1;
            self.held_bytes += frame_bytes;
        };
        let mut outcome = Ok(());
        if delayed || !state.held.is_empty() {
            hold(state, first_header, first_payload);
            if fate.duplicate {
                hold(state, *header, payload);
            }
        } else {
            if !self.inner.try_send(peer, &first_header, first_payload)? {
                return Ok(false);
            }
            if fate.duplicate {
                match self.inner.try_send(peer, header, payload) {
                    Ok(true) => {}
                    Ok(false) => hold(state, *header, payload),
                    Err(error) => outcome = Err(error),
                }
            }
        }

        state.frames_accepted += 1;
        self.stats.frames_corrupted += u64::from(fate.corrupt_bit.is_some());
        self.stats.frames_duplicated += u64::from(fate.duplicate);
        self.stats.frames_delayed += u64::from(delayed);
        outcome.map(|()| true)
    }

    fn poll<F: FnMut(u32, &[u8])>(&mut self, mut handler: F) -> Result<usize, PathError> {
        if !self.spec.has_frame_faults() {
            return self.inner.poll(handler);
        }
        let now_ns = (self.clock)();
        self.release_due(now_ns)?;
        if !self.rail_has_windows {
            return self.inner.poll(handler);
        }
        let FaultyPath {
            inner,
            spec,
            local_rank,
            rail,
            peers,
            stats,
            ..
        } = self;
        let mut delivered = 0;
        inner.poll(|peer, frame| {
            if peer_state(peers, spec, *local_rank, *rail, peer).rail_down_at(now_ns) {
                stats.frames_swallowed_rail_down += 1;
            } else {
                delivered += 1;
                handler(peer, frame);
            }
        })?;
        Ok(delivered)
    }

    fn poll_placing<R: Receiver>(&mut self, receiver: &mut R) -> Result<usize, PathError> {
        if !self.spec.has_frame_faults() {
            return self.inner.poll_placing(receiver);
        }
        let now_ns = (self.clock)();
        self.release_due(now_ns)?;
        if !self.rail_has_windows {
            return self.inner.poll_placing(receiver);
        }
        let FaultyPath {
            inner,
            spec,
            local_rank,
            rail,
            peers,
            stats,
            ..
        } = self;
        let mut filter = RailDownFilter {
            receiver,
            is_down: |peer| peer_state(peers, spec, *local_rank, *rail, peer).rail_down_at(now_ns),
            stats,
            delivered: 0,
        };
        inner.poll_placing(&mut filter)?;
        Ok(filter.delivered)
    }

    fn flush(&mut self) -> Result<(), PathError> {
        if self.held_frame_count > 0 {
            let now_ns = (self.clock)();
            self.release_due(now_ns)?;
        }
        self.inner.flush()
    }

    fn max_payload_bytes(&self) -> usize {
        self.inner.max_payload_bytes()
    }
}
