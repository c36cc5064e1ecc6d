//! The shared-memory path: how ranks on one host hand each other frames.
//!
//! Each rank creates one *receive* segment, `/dev/shm/resmpi-<job>-<rank>`,
//! holding a small control block and one SPSC ring (see `ring.rs`) per
//! possible sender rank. A sender writes straight into its ring in the
//! receiver's segment; the receiver hands the frame to its handler in place
//! and frees it afterwards. So a frame is copied exactly twice (in by the
//! sender, out by whoever consumes it), and the fast path has no syscall,
//! lock or allocation.
//!
//! Sleeping: a receiver with nothing to do may call [`ShmPath::wait`]. It
//! raises `sleeping` in its control block, re-checks its rings, and
//! futex-waits on its `doorbell`. A sender, after publishing, looks at the
//! receiver's `sleeping` (after a SeqCst fence, pairing with the sleeper's
//! fence, so that either the sleeper sees the frame or the sender sees the
//! flag) and only then bumps the doorbell and wakes it. The same handshake in
//! the other direction wakes a sender that went to sleep on a full ring once
//! the receiver frees room. Without a sleeper nobody makes a syscall.
//!
//! After the rings comes the rank's collective area (`collective_area.rs`):
//! the slots small blocking collectives publish their contributions in, read
//! by the peers through the same mappings.
//!
//! Segments are created 0600 with `O_EXCL`; the name is removed by
//! [`ShmPath::unlink_own`] as soon as every peer has mapped it, so nothing is
//! left in /dev/shm even if the job is later killed.

use std::ffi::CString;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use crate::collective_area::{collective_area_bytes, CollectiveArea, COLLECTIVE_SLOTS};
use crate::ring::{self, Consumer, Producer, RingView, RING_HEADER_BYTES};
use crate::{Path, PathError};

/// Bytes of the control block at the start of every segment.
const CONTROL_BYTES: usize = 256;
/// Written last when a segment is created ("RESMPISH").
const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"RESMPISH");
const MAGIC_OFFSET_BYTES: usize = 0;
const WORLD_SIZE_OFFSET_BYTES: usize = 8;
const RING_BYTES_OFFSET_BYTES: usize = 16;
/// Random per-segment value from which each ring's stamp key is derived.
const KEY_OFFSET_BYTES: usize = 24;
/// Doorbell and sleeping flag each on their own 128-byte span, away from the
/// read-mostly fields.
const DOORBELL_OFFSET_BYTES: usize = 64;
const SLEEPING_OFFSET_BYTES: usize = 192;
/// `sleeping` bit: the owner sleeps until a frame arrives.
const SLEEPING_FOR_INPUT: u32 = 1;
/// `sleeping` bit: the owner also sleeps until a full ring it sends on has
/// room (so receivers wake it only then, not after every frame they take).
const SLEEPING_FOR_ROOM: u32 = 2;
/// Frames taken from one ring per `poll`, so that one busy sender cannot
/// starve the others.
const FRAMES_PER_RING_PER_POLL: usize = 64;
/// Frame header size (wire format).
const HEADER_BYTES: usize = resmpi_wire::HEADER_LEN_BYTES;

/// One shared mapping; unmapped on drop.
#[derive(Debug)]
struct Mapping {
    base: *mut u8,
    length_bytes: usize,
}

// SAFETY: the mapping is plain shared memory; every cross-process or
// cross-thread access to it goes through atomics or through the ring
// protocol, which does not depend on which thread owns the `Mapping`.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`length_bytes` came from a successful mmap and the
        // owner (ShmSegment/ShmPath) drops every view into it first.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.length_bytes) };
    }
}

impl Mapping {
    /// Create (exclusively, mode 0600) and map a segment of `length_bytes`.
    fn create(name: &CString, length_bytes: usize) -> std::io::Result<Mapping> {
        // SAFETY: `name` is a valid NUL-terminated string.
        let fd = unsafe {
            libc::shm_open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL,
                0o600,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let result = Self::map_fd(fd, Some(length_bytes));
        // SAFETY: fd is ours; the mapping (if any) stays valid after close.
        unsafe { libc::close(fd) };
        if result.is_err() {
            // SAFETY: as above; we created the name, so we remove it.
            unsafe { libc::shm_unlink(name.as_ptr()) };
        }
        result
    }

    /// Map an existing segment, whatever its size.
    fn open(name: &CString) -> std::io::Result<Mapping> {
        // SAFETY: `name` is a valid NUL-terminated string.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let result = Self::map_fd(fd, None);
        // SAFETY: fd is ours; the mapping (if any) stays valid after close.
        unsafe { libc::close(fd) };
        result
    }

    fn map_fd(fd: libc::c_int, truncate_to: Option<usize>) -> std::io::Result<Mapping> {
        let length_bytes = match truncate_to {
            Some(length_bytes) => {
                // SAFETY: plain syscall on an fd we own.
                if unsafe { libc::ftruncate(fd, length_bytes as libc::off_t) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                length_bytes
            }
            None => {
                // SAFETY: `stat` is plain old data; fstat fills it.
                let mut stat: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: valid fd and out-pointer.
                if unsafe { libc::fstat(fd, &mut stat) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                stat.st_size as usize
            }
        };
        if length_bytes < CONTROL_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "shm segment too small",
            ));
        }
        // SAFETY: new shared mapping of an fd we own; the kernel picks the
        // address, so nothing existing is replaced.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            base: base as *mut u8,
            length_bytes,
        })
    }

    fn u64_at(&self, offset_bytes: usize) -> &AtomicU64 {
        debug_assert!(offset_bytes + 8 <= CONTROL_BYTES && offset_bytes.is_multiple_of(8));
        // SAFETY: inside the control block (checked at map time), aligned
        // (the mapping is page aligned), accessed only atomically.
        unsafe { &*(self.base.add(offset_bytes) as *const AtomicU64) }
    }

    fn control(&self) -> ControlView {
        ControlView { base: self.base }
    }

    /// The ring in this segment that carries frames from `sender`.
    ///
    /// # Safety
    /// The segment must have been checked to hold `sender + 1` rings of
    /// `ring_bytes` each.
    unsafe fn ring(&self, sender: u32, ring_bytes: usize) -> RingView {
        let offset_bytes = CONTROL_BYTES + sender as usize * (RING_HEADER_BYTES + ring_bytes);
        // Distinct per ring; the low bit set makes every stamp odd, so the
        // zeroed memory of a fresh ring never matches one.
        let segment_key = self.u64_at(KEY_OFFSET_BYTES).load(Ordering::Relaxed);
        let key = (segment_key ^ (sender as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
        // SAFETY: in bounds by the caller's promise; CONTROL_BYTES and
        // RING_HEADER_BYTES + ring_bytes are multiples of 64, so the ring is
        // 64-byte aligned; the mapping outlives the view (ShmPath drops its
        // producers/consumers together with the mappings).
        unsafe { RingView::new(self.base.add(offset_bytes), ring_bytes, key) }
    }

    /// The collective area after the rings.
    ///
    /// # Safety
    /// The segment must have been checked to be `segment_bytes(world_size,
    /// ring_bytes)` long.
    unsafe fn collective_area(&self, world_size: u32, ring_bytes: usize) -> CollectiveArea {
        let offset_bytes = CONTROL_BYTES + world_size as usize * (RING_HEADER_BYTES + ring_bytes);
        // SAFETY: the area ends the segment (by the caller's promise); the
        // offset is a multiple of 64 like the rings'; the mapping outlives
        // the view (ShmPath keeps its mappings while it lives).
        unsafe { CollectiveArea::new(self.base.add(offset_bytes), world_size) }
    }
}

/// Doorbell and sleeping flag of one segment.
#[derive(Clone, Copy, Debug)]
struct ControlView {
    base: *mut u8,
}

// SAFETY: the control block is accessed only through atomics and futex
// calls, which are valid from any thread.
unsafe impl Send for ControlView {}

impl ControlView {
    #[inline]
    fn doorbell(&self) -> &AtomicU32 {
        // SAFETY: inside the control block of a live mapping, 4-aligned,
        // accessed only atomically (and by the kernel's futex code).
        unsafe { &*(self.base.add(DOORBELL_OFFSET_BYTES) as *const AtomicU32) }
    }

    #[inline]
    fn sleeping(&self) -> &AtomicU32 {
        // SAFETY: as in `doorbell`.
        unsafe { &*(self.base.add(SLEEPING_OFFSET_BYTES) as *const AtomicU32) }
    }

    /// Wake the owner of this control block if it sleeps waiting for any of
    /// `reasons` (`SLEEPING_*` bits). Call after publishing whatever the
    /// sleeper should see.
    #[inline]
    fn wake_if_sleeping(&self, reasons: u32) {
        // Pairs with the fence in `ShmPath::wait`: either the sleeper sees
        // what we published, or we see its flag.
        fence(Ordering::SeqCst);
        if self.sleeping().load(Ordering::Relaxed) & reasons != 0
            && self.sleeping().swap(0, Ordering::SeqCst) != 0
        {
            self.doorbell().fetch_add(1, Ordering::SeqCst);
            // SAFETY: futex on a live, aligned u32 in shared memory (not
            // FUTEX_PRIVATE: the waiter is another process).
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.doorbell().as_ptr(),
                    libc::FUTEX_WAKE,
                    i32::MAX,
                    std::ptr::null::<libc::timespec>(),
                    std::ptr::null::<u32>(),
                    0,
                )
            };
        }
    }
}

fn segment_name(job_id: &str, rank: u32) -> Result<CString, PathError> {
    let valid = !job_id.is_empty()
        && job_id.len() <= 200
        && job_id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"._-".contains(&byte));
    if !valid {
        return Err(PathError::Protocol(format!(
            "job id {job_id:?} must be 1..=200 characters of [A-Za-z0-9._-]"
        )));
    }
    Ok(
        CString::new(format!("/resmpi-{job_id}-{rank}"))
            .expect("checked characters contain no NUL"),
    )
}

fn segment_bytes(world_size: u32, ring_bytes: usize) -> Option<usize> {
    (RING_HEADER_BYTES + ring_bytes)
        .checked_mul(world_size as usize)?
        .checked_add(CONTROL_BYTES + collective_area_bytes(world_size))
}

/// This rank's receive segment: a control block, one ring per possible
/// sender rank (index = sender rank; the ring for this rank is unused) and
/// the collective area.
#[derive(Debug)]
pub struct ShmSegment {
    name: CString,
    mapping: Mapping,
    rank: u32,
    world_size: u32,
    ring_bytes: usize,
}

impl ShmSegment {
    /// Create `/dev/shm/resmpi-<job_id>-<rank>` (exclusively, mode 0600)
    /// with one ring of `ring_bytes` (a power of two, 4 KiB ..= 1 GiB) per
    /// rank of the world. Pages are allocated lazily by the kernel, so rings
    /// of ranks that never send here cost no memory.
    pub fn create(
        job_id: &str,
        rank: u32,
        world_size: u32,
        ring_bytes: usize,
    ) -> Result<ShmSegment, PathError> {
        if rank >= world_size {
            return Err(PathError::Protocol(format!(
                "rank {rank} outside world of {world_size}"
            )));
        }
        if !ring::ring_bytes_valid(ring_bytes) {
            return Err(PathError::Protocol(format!(
                "ring size {ring_bytes} bytes must be a power of two between {} and {}",
                ring::MIN_RING_BYTES,
                ring::MAX_RING_BYTES
            )));
        }
        let name = segment_name(job_id, rank)?;
        let mut key = [0u8; 8];
        crate::fill_random(&mut key)?;
        let length_bytes = segment_bytes(world_size, ring_bytes).ok_or_else(|| {
            PathError::Protocol(format!("{world_size} rings of {ring_bytes} bytes overflow"))
        })?;
        let mapping = Mapping::create(&name, length_bytes).map_err(|error| {
            PathError::Io(std::io::Error::new(
                error.kind(),
                format!("creating shm segment {}: {error}", name.to_string_lossy()),
            ))
        })?;
        mapping
            .u64_at(WORLD_SIZE_OFFSET_BYTES)
            .store(world_size as u64, Ordering::Relaxed);
        mapping
            .u64_at(RING_BYTES_OFFSET_BYTES)
            .store(ring_bytes as u64, Ordering::Relaxed);
        mapping
            .u64_at(KEY_OFFSET_BYTES)
            .store(u64::from_le_bytes(key), Ordering::Relaxed);
        mapping
            .u64_at(MAGIC_OFFSET_BYTES)
            .store(SEGMENT_MAGIC, Ordering::Release);
        Ok(ShmSegment {
            name,
            mapping,
            rank,
            world_size,
            ring_bytes,
        })
    }

    /// The POSIX shared-memory name, e.g. `/resmpi-job7-3` (the file
    /// `/dev/shm/resmpi-job7-3`).
    pub fn name(&self) -> &str {
        self.name.to_str().expect("built from a str")
    }

    /// Bytes of data per ring.
    pub fn ring_bytes(&self) -> usize {
        self.ring_bytes
    }

    /// Remove the segment's name (the memory stays mapped by everyone who
    /// has it). Removing a name that is already gone is not an error.
    pub fn unlink(&self) -> Result<(), PathError> {
        // SAFETY: valid NUL-terminated name.
        if unsafe { libc::shm_unlink(self.name.as_ptr()) } != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::ENOENT) {
                return Err(PathError::Io(error));
            }
        }
        Ok(())
    }
}

/// Writing end towards one local peer: our ring inside the peer's segment.
#[derive(Debug)]
struct Outgoing {
    producer: Producer,
    peer_control: ControlView,
    /// The last send found the ring full; `wait` then also wakes up when
    /// the peer frees room.
    blocked: bool,
}

/// Reading end from one local peer: the peer's ring in our segment.
#[derive(Debug)]
struct Incoming {
    peer: u32,
    consumer: Consumer,
    view: RingView,
    /// The peer's control block, to wake it when we free room it waits for.
    peer_control: ControlView,
}

/// What `attach` builds before it assembles a `ShmPath`.
struct AttachedPeers {
    outgoing: Vec<Option<Outgoing>>,
    incoming: Vec<Incoming>,
    collective_areas: Vec<Option<CollectiveArea>>,
    peer_mappings: Vec<Mapping>,
}

/// Frames to and from the ranks on this host, through shared-memory rings.
#[derive(Debug)]
pub struct ShmPath {
    // Field order matters for drop: views into the mappings go first.
    outgoing: Vec<Option<Outgoing>>,
    incoming: Vec<Incoming>,
    poll_start: usize,
    max_frame_bytes: usize,
    my_rank: u32,
    /// Collective area of each world rank on this host (this one's too),
    /// by world rank.
    collective_areas: Vec<Option<CollectiveArea>>,
    /// The slot of the own area the next publication takes.
    next_collective_slot: usize,
    /// Held only to keep the peers' segments mapped while the rings in them
    /// are in use.
    #[allow(dead_code)]
    peer_mappings: Vec<Mapping>,
    own: ShmSegment,
}

impl ShmPath {
    /// Map every local peer's segment (they must all exist already: the
    /// caller runs a barrier between `ShmSegment::create` and this). Peers
    /// must have the same world size and ring size. `local_peers` may
    /// contain `my_rank`; it is ignored. On error the own segment's name is
    /// removed too (the caller no longer holds the segment to do it).
    pub fn attach(
        own: ShmSegment,
        job_id: &str,
        my_rank: u32,
        local_peers: &[u32],
    ) -> Result<ShmPath, PathError> {
        match Self::attach_peers(&own, job_id, my_rank, local_peers) {
            Ok(AttachedPeers {
                outgoing,
                incoming,
                collective_areas,
                peer_mappings,
            }) => Ok(ShmPath {
                outgoing,
                incoming,
                poll_start: 0,
                max_frame_bytes: ring::max_frame_bytes(own.ring_bytes),
                my_rank,
                collective_areas,
                next_collective_slot: 0,
                peer_mappings,
                own,
            }),
            Err(error) => {
                let _ = own.unlink();
                Err(error)
            }
        }
    }

    fn attach_peers(
        own: &ShmSegment,
        job_id: &str,
        my_rank: u32,
        local_peers: &[u32],
    ) -> Result<AttachedPeers, PathError> {
        if my_rank != own.rank {
            return Err(PathError::Protocol(format!(
                "segment of rank {} attached as rank {my_rank}",
                own.rank
            )));
        }
        let world_size = own.world_size;
        let ring_bytes = own.ring_bytes;
        let mut outgoing: Vec<Option<Outgoing>> = (0..world_size).map(|_| None).collect();
        let mut incoming = Vec::new();
        let mut peer_mappings = Vec::new();
        let mut collective_areas: Vec<Option<CollectiveArea>> =
            (0..world_size).map(|_| None).collect();
        // SAFETY: our own segment was created with `segment_bytes`.
        collective_areas[my_rank as usize] =
            Some(unsafe { own.mapping.collective_area(world_size, ring_bytes) });
        for &peer in local_peers {
            if peer == my_rank {
                continue;
            }
            if peer >= world_size {
                return Err(PathError::Protocol(format!(
                    "local peer {peer} outside world of {world_size}"
                )));
            }
            if outgoing[peer as usize].is_some() {
                return Err(PathError::Protocol(format!(
                    "local peer {peer} listed twice"
                )));
            }
            let name = segment_name(job_id, peer)?;
            let mapping = Mapping::open(&name).map_err(|error| {
                PathError::Io(std::io::Error::new(
                    error.kind(),
                    format!(
                        "opening shm segment {} of rank {peer}: {error}",
                        name.to_string_lossy()
                    ),
                ))
            })?;
            let magic = mapping.u64_at(MAGIC_OFFSET_BYTES).load(Ordering::Acquire);
            let peer_world_size = mapping
                .u64_at(WORLD_SIZE_OFFSET_BYTES)
                .load(Ordering::Relaxed);
            let peer_ring_bytes = mapping
                .u64_at(RING_BYTES_OFFSET_BYTES)
                .load(Ordering::Relaxed);
            if magic != SEGMENT_MAGIC
                || peer_world_size != world_size as u64
                || peer_ring_bytes != ring_bytes as u64
                || segment_bytes(world_size, ring_bytes) != Some(mapping.length_bytes)
            {
                return Err(PathError::Protocol(format!(
                    "shm segment of rank {peer} does not match ours (magic {magic:#x}, world size \
                     {peer_world_size}, ring {peer_ring_bytes} bytes, {} bytes in all)",
                    mapping.length_bytes
                )));
            }
            // SAFETY: both segments were checked to hold `world_size` rings of
            // `ring_bytes`, and my_rank, peer < world_size.
            let (to_peer, from_peer) = unsafe {
                (
                    mapping.ring(my_rank, ring_bytes),
                    own.mapping.ring(peer, ring_bytes),
                )
            };
            prefault(&own.mapping, peer, ring_bytes)?;
            // SAFETY: the peer's segment length was checked just above.
            collective_areas[peer as usize] =
                Some(unsafe { mapping.collective_area(world_size, ring_bytes) });
            outgoing[peer as usize] = Some(Outgoing {
                producer: Producer::new(to_peer),
                peer_control: mapping.control(),
                blocked: false,
            });
            incoming.push(Incoming {
                peer,
                consumer: Consumer::new(from_peer),
                view: from_peer,
                peer_control: mapping.control(),
            });
            peer_mappings.push(mapping);
        }
        Ok(AttachedPeers {
            outgoing,
            incoming,
            collective_areas,
            peer_mappings,
        })
    }

    /// Remove this rank's segment name from /dev/shm. Call once every peer
    /// has attached (after a second barrier).
    pub fn unlink_own(&self) -> Result<(), PathError> {
        self.own.unlink()
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.my_rank
    }

    /// The collective area of world rank `rank` (this one's own included),
    /// or None when it is not on this host. The view stays valid while
    /// this path lives.
    #[inline]
    pub fn collective_area(&self, rank: u32) -> Option<CollectiveArea> {
        self.collective_areas.get(rank as usize).copied().flatten()
    }

    /// The index of the own slot the next publication takes, and move on
    /// (slots are used round robin; the caller waits until it is free).
    #[inline]
    pub fn take_collective_slot(&mut self) -> usize {
        let index = self.next_collective_slot;
        self.next_collective_slot = (index + 1) % COLLECTIVE_SLOTS;
        index
    }

    /// Reserve a contiguous slot of `frame_bytes` (header + payload) in the
    /// ring to `peer`, let `fill` write the frame in place, and publish it.
    /// `Ok(false)` (without calling `fill`) when the ring has no room now.
    #[inline]
    pub fn try_send_with<F: FnOnce(&mut [u8])>(
        &mut self,
        peer: u32,
        frame_bytes: usize,
        fill: F,
    ) -> Result<bool, PathError> {
        let max_frame_bytes = self.max_frame_bytes;
        let Some(Some(outgoing)) = self.outgoing.get_mut(peer as usize) else {
            return Err(PathError::Protocol(format!(
                "rank {peer} is not a local shm peer"
            )));
        };
        if !(HEADER_BYTES..=max_frame_bytes).contains(&frame_bytes) {
            return Err(PathError::Protocol(format!(
                "frame of {frame_bytes} bytes outside {HEADER_BYTES}..={max_frame_bytes} for the shm path"
            )));
        }
        if !outgoing.producer.try_push(frame_bytes, fill) {
            outgoing.blocked = true;
            return Ok(false);
        }
        outgoing.blocked = false;
        outgoing.peer_control.wake_if_sleeping(SLEEPING_FOR_INPUT);
        Ok(true)
    }

    /// Whether a frame waits in any ring to this rank (what `poll` would
    /// deliver now), without taking it: the idle check of a spinning
    /// waiter, one load per local peer.
    #[inline]
    pub fn has_input(&self) -> bool {
        self.incoming
            .iter()
            .any(|incoming| incoming.consumer.ready())
    }

    /// Sleep until a frame may have arrived, room may have appeared in a ring
    /// that refused a send, or `timeout_us` passed. Spurious returns are
    /// possible; callers poll again afterwards.
    pub fn wait(&self, timeout_us: u64) -> Result<(), PathError> {
        let control = self.own.mapping.control();
        let seen = control.doorbell().load(Ordering::SeqCst);
        let any_blocked = self
            .outgoing
            .iter()
            .flatten()
            .any(|outgoing| outgoing.blocked);
        let reasons = if any_blocked {
            SLEEPING_FOR_INPUT | SLEEPING_FOR_ROOM
        } else {
            SLEEPING_FOR_INPUT
        };
        control.sleeping().store(reasons, Ordering::Relaxed);
        // Pairs with the fence in `wake_if_sleeping`.
        fence(Ordering::SeqCst);
        let ready = self
            .incoming
            .iter()
            .any(|incoming| incoming.view.has_unconsumed())
            || self
                .outgoing
                .iter()
                .flatten()
                .any(|outgoing| outgoing.blocked && outgoing.producer.head_moved());
        let mut result = Ok(());
        if !ready && timeout_us > 0 {
            let timeout = libc::timespec {
                tv_sec: (timeout_us / 1_000_000) as libc::time_t,
                tv_nsec: ((timeout_us % 1_000_000) * 1000) as libc::c_long,
            };
            // SAFETY: futex wait on a live, aligned u32 of our own segment
            // with a valid relative timeout.
            let status = unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    control.doorbell().as_ptr(),
                    libc::FUTEX_WAIT,
                    seen,
                    &timeout as *const libc::timespec,
                    std::ptr::null::<u32>(),
                    0,
                )
            };
            if status != 0 {
                let error = std::io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::ETIMEDOUT) | Some(libc::EINTR) => {}
                    _ => result = Err(PathError::Io(error)),
                }
            }
        }
        control.sleeping().store(0, Ordering::Relaxed);
        result
    }
}

/// Ask the kernel to allocate the pages of the ring from `sender` now rather
/// than on first touch in the hot path. This also turns a full /dev/shm
/// (tmpfs does not reserve space at ftruncate) into a clear error here,
/// instead of a SIGBUS in the middle of a send later. Kernels before 5.14
/// lack MADV_POPULATE_WRITE (EINVAL); then the first lap takes the faults.
fn prefault(mapping: &Mapping, sender: u32, ring_bytes: usize) -> Result<(), PathError> {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    const PAGE_BYTES: usize = 4096;
    let start_bytes =
        (CONTROL_BYTES + sender as usize * (RING_HEADER_BYTES + ring_bytes)) & !(PAGE_BYTES - 1);
    let end_bytes = CONTROL_BYTES + (sender as usize + 1) * (RING_HEADER_BYTES + ring_bytes);
    // SAFETY: a page-aligned range inside our own live mapping; populating
    // pages does not change their contents.
    let status = unsafe {
        libc::madvise(
            mapping.base.add(start_bytes) as *mut libc::c_void,
            end_bytes.min(mapping.length_bytes) - start_bytes,
            MADV_POPULATE_WRITE,
        )
    };
    if status != 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(PathError::Io(std::io::Error::new(
                error.kind(),
                format!(
                    "allocating the {ring_bytes}-byte shm ring from rank {sender} (is /dev/shm full? \
                     each rank needs one ring per local peer): {error}"
                ),
            )));
        }
    }
    Ok(())
}

impl Path for ShmPath {
    #[inline]
    fn try_send(
        &mut self,
        peer: u32,
        header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> Result<bool, PathError> {
        self.try_send_with(peer, HEADER_BYTES + payload.len(), |frame| {
            let (frame_header, frame_payload) = frame.split_at_mut(HEADER_BYTES);
            frame_header.copy_from_slice(header);
            frame_payload.copy_from_slice(payload);
        })
    }

    #[inline]
    fn poll<F: FnMut(u32, &[u8])>(&mut self, mut handler: F) -> Result<usize, PathError> {
        let count = self.incoming.len();
        if count == 0 {
            return Ok(0);
        }
        let mut delivered = 0;
        let start = self.poll_start;
        self.poll_start = if start + 1 == count { 0 } else { start + 1 };
        for step in 0..count {
            let index = if start + step >= count {
                start + step - count
            } else {
                start + step
            };
            let incoming = &mut self.incoming[index];
            let peer = incoming.peer;
            let frames = incoming
                .consumer
                .poll(FRAMES_PER_RING_PER_POLL, |frame| handler(peer, frame))
                .map_err(|text| {
                    PathError::Protocol(format!("shm ring from rank {peer}: {text}"))
                })?;
            if frames > 0 {
                incoming.peer_control.wake_if_sleeping(SLEEPING_FOR_ROOM);
                delivered += frames;
            }
        }
        Ok(delivered)
    }

    #[inline]
    fn flush(&mut self) -> Result<(), PathError> {
        Ok(())
    }

    fn max_payload_bytes(&self) -> usize {
        self.max_frame_bytes - HEADER_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resmpi_wire::{FrameHeader, FrameKind};
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    fn unique_job_id(test: &str) -> String {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        format!(
            "test-{}-{test}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Create segments for `world_size` ranks, attach each to all others,
    /// and unlink the names (as the lead does after its second barrier).
    fn world(test: &str, world_size: u32, ring_bytes: usize) -> Vec<ShmPath> {
        let job_id = unique_job_id(test);
        let segments: Vec<ShmSegment> = (0..world_size)
            .map(|rank| ShmSegment::create(&job_id, rank, world_size, ring_bytes).unwrap())
            .collect();
        let ranks: Vec<u32> = (0..world_size).collect();
        let paths: Vec<ShmPath> = segments
            .into_iter()
            .enumerate()
            .map(|(rank, segment)| ShmPath::attach(segment, &job_id, rank as u32, &ranks).unwrap())
            .collect();
        for path in &paths {
            path.unlink_own().unwrap();
        }
        paths
    }

    fn payload_byte(source: u32, sequence: u64, index: usize) -> u8 {
        (sequence as usize)
            .wrapping_mul(131)
            .wrapping_add(index)
            .wrapping_add(source as usize * 7) as u8
    }

    fn frame_header(
        source: u32,
        sequence: u64,
        payload_bytes: usize,
    ) -> [u8; resmpi_wire::HEADER_LEN_BYTES] {
        let mut header = FrameHeader::new(FrameKind::Eager, source);
        header.seq = sequence;
        header.payload_len = payload_bytes as u32;
        header.to_bytes()
    }

    /// Check one received frame; returns its sequence number.
    fn check_frame(peer: u32, frame: &[u8]) -> u64 {
        let header = FrameHeader::parse(frame).unwrap();
        assert_eq!(header.source, peer);
        assert_eq!(
            frame.len(),
            resmpi_wire::HEADER_LEN_BYTES + header.payload_len as usize
        );
        for (index, byte) in frame[resmpi_wire::HEADER_LEN_BYTES..].iter().enumerate() {
            assert_eq!(
                *byte,
                payload_byte(peer, header.seq, index),
                "payload byte {index} of frame {}",
                header.seq
            );
        }
        header.seq
    }

    #[test]
    fn segment_is_private_exclusive_and_unlinked() {
        use std::os::unix::fs::PermissionsExt;
        let job_id = unique_job_id("private");
        let segment = ShmSegment::create(&job_id, 0, 2, 4096).unwrap();
        assert_eq!(segment.name(), format!("/resmpi-{job_id}-0"));
        let file = format!("/dev/shm/resmpi-{job_id}-0");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            ShmSegment::create(&job_id, 0, 2, 4096).is_err(),
            "O_EXCL must refuse a second creation"
        );
        let path = ShmPath::attach(segment, &job_id, 0, &[]).unwrap();
        path.unlink_own().unwrap();
        assert!(!std::path::Path::new(&file).exists());
        path.unlink_own().unwrap();
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(ShmSegment::create("a/b", 0, 2, 4096).is_err());
        assert!(ShmSegment::create("job", 2, 2, 4096).is_err());
        assert!(ShmSegment::create("job", 0, 2, 5000).is_err());
        let mut paths = world("errors", 2, 4096);
        let max_payload = paths[0].max_payload_bytes();
        assert_eq!(max_payload, 1024 - resmpi_wire::HEADER_LEN_BYTES);
        let header = frame_header(0, 0, 0);
        assert!(matches!(
            paths[0].try_send(5, &header, &[]),
            Err(PathError::Protocol(_))
        ));
        assert!(matches!(
            paths[0].try_send(0, &header, &[]),
            Err(PathError::Protocol(_))
        ));
        assert!(matches!(
            paths[0].try_send(1, &header, &vec![0; max_payload + 1]),
            Err(PathError::Protocol(_))
        ));
        assert!(paths[0]
            .try_send(1, &header, &vec![0; max_payload])
            .unwrap());
        let job_id = unique_job_id("missing");
        let lonely = ShmSegment::create(&job_id, 0, 2, 4096).unwrap();
        assert!(ShmPath::attach(lonely, &job_id, 0, &[1]).is_err());
        assert!(
            !std::path::Path::new(&format!("/dev/shm/resmpi-{job_id}-0")).exists(),
            "failed attach must not leak the name"
        );
    }

    #[test]
    fn full_ring_pushes_back_and_frees_after_poll() {
        let mut paths = world("full", 2, 4096);
        let payload = [7u8; 1024 - resmpi_wire::HEADER_LEN_BYTES];
        let header = frame_header(0, 0, payload.len());
        let mut sent = 0;
        while paths[0].try_send(1, &header, &payload).unwrap() {
            sent += 1;
        }
        assert_eq!(
            sent, 3,
            "three 1040-byte records fit in 4096 bytes, a fourth does not"
        );
        assert_eq!(
            paths[1]
                .poll(|peer, frame| assert_eq!((peer, frame.len()), (0, 1024)))
                .unwrap(),
            3
        );
        assert!(paths[0].try_send(1, &header, &payload).unwrap());
    }

    #[test]
    fn has_input_sees_a_frame_until_it_is_polled() {
        let mut paths = world("input", 3, 4096);
        let payload = [3u8; 8];
        let header = frame_header(2, 0, payload.len());
        assert!(!paths[0].has_input(), "nothing sent yet");
        assert!(paths[2].try_send(0, &header, &payload).unwrap());
        assert!(paths[0].has_input(), "a frame from rank 2 waits");
        assert!(!paths[1].has_input(), "nothing was sent to rank 1");
        assert_eq!(paths[0].poll(|peer, _| assert_eq!(peer, 2)).unwrap(), 1);
        assert!(!paths[0].has_input(), "polled: nothing waits");
    }

    /// Two ranks in two threads stream frames of random sizes both ways at
    /// once, sleeping on the doorbell whenever they cannot make progress.
    #[test]
    fn two_ranks_stream_100k_random_frames_each_way_with_content_intact() {
        const FRAMES: u64 = 100_000;
        let paths = world("stream", 2, 64 << 10);
        let started = Instant::now();
        let workers: Vec<_> = paths
            .into_iter()
            .map(|mut path| {
                std::thread::spawn(move || {
                    let me = path.rank();
                    let peer = 1 - me;
                    let max_payload = path.max_payload_bytes();
                    let mut random = 0x2545_f491_4f6c_dd1du64 ^ me as u64;
                    let (mut sent, mut received) = (0u64, 0u64);
                    let mut payload = vec![0u8; max_payload];
                    while sent < FRAMES || received < FRAMES {
                        let mut progress = false;
                        if sent < FRAMES {
                            random ^= random << 13;
                            random ^= random >> 7;
                            random ^= random << 17;
                            // Mostly small frames, some up to the maximum.
                            let length = if random.is_multiple_of(8) {
                                random as usize % (max_payload + 1)
                            } else {
                                random as usize % 200
                            };
                            for (index, byte) in payload[..length].iter_mut().enumerate() {
                                *byte = payload_byte(me, sent, index);
                            }
                            let header = frame_header(me, sent, length);
                            if path.try_send(peer, &header, &payload[..length]).unwrap() {
                                sent += 1;
                                progress = true;
                            }
                        }
                        let delivered = path
                            .poll(|from, frame| {
                                assert_eq!(from, peer);
                                assert_eq!(check_frame(from, frame), received);
                                received += 1;
                            })
                            .unwrap();
                        if delivered == 0 && !progress {
                            path.wait(2_000_000).unwrap();
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        // A lost wake-up costs a 2 s timeout; many would show here.
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "took {:?}",
            started.elapsed()
        );
    }

    /// Eight ranks on (possibly) two cores: everyone sends to everyone,
    /// blocking in `wait` whenever it cannot progress.
    #[test]
    fn oversubscribed_all_to_all_makes_progress() {
        const WORLD: u32 = 8;
        const FRAMES_PER_PEER: u64 = 2_000;
        let paths = world("oversubscribed", WORLD, 16 << 10);
        let started = Instant::now();
        let workers: Vec<_> = paths
            .into_iter()
            .map(|mut path| {
                std::thread::spawn(move || {
                    let me = path.rank();
                    let peers: Vec<u32> = (0..WORLD).filter(|rank| *rank != me).collect();
                    let mut next_to_send = vec![0u64; WORLD as usize];
                    let mut next_expected = vec![0u64; WORLD as usize];
                    let total = FRAMES_PER_PEER * peers.len() as u64;
                    let (mut sent, mut received) = (0u64, 0u64);
                    while sent < total || received < total {
                        let mut progress = false;
                        for &peer in &peers {
                            let sequence = next_to_send[peer as usize];
                            if sequence == FRAMES_PER_PEER {
                                continue;
                            }
                            let length = (sequence as usize * 37) % 700;
                            let payload: Vec<u8> = (0..length)
                                .map(|index| payload_byte(me, sequence, index))
                                .collect();
                            if path
                                .try_send(peer, &frame_header(me, sequence, length), &payload)
                                .unwrap()
                            {
                                next_to_send[peer as usize] += 1;
                                sent += 1;
                                progress = true;
                            }
                        }
                        let delivered = path
                            .poll(|from, frame| {
                                assert_eq!(check_frame(from, frame), next_expected[from as usize]);
                                next_expected[from as usize] += 1;
                                received += 1;
                            })
                            .unwrap();
                        if delivered == 0 && !progress {
                            path.wait(2_000_000).unwrap();
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "took {:?}",
            started.elapsed()
        );
    }

    /// Attach, retrying while the peer's segment is not there (or not fully
    /// initialized) yet: stands in for the launcher's barrier.
    fn attach_when_ready(own: ShmSegment, job_id: &str, my_rank: u32, peers: &[u32]) -> ShmPath {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut own = Some(own);
        loop {
            // `attach` consumes our segment, so probe the peers first.
            let ready = peers.iter().all(|peer| {
                let name = segment_name(job_id, *peer).unwrap();
                Mapping::open(&name).is_ok_and(|mapping| {
                    mapping.u64_at(MAGIC_OFFSET_BYTES).load(Ordering::Acquire) == SEGMENT_MAGIC
                })
            });
            if ready {
                return ShmPath::attach(own.take().unwrap(), job_id, my_rank, peers).unwrap();
            }
            assert!(Instant::now() < deadline, "peer segment never appeared");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Streams frames both ways with one process; used by the two-process
    /// test below.
    fn stream_both_ways(path: &mut ShmPath, peer: u32, frames: u64) {
        let me = path.rank();
        let max_payload = path.max_payload_bytes();
        let mut random = 0x2545_f491_4f6c_dd1du64 ^ me as u64;
        let (mut sent, mut received) = (0u64, 0u64);
        let mut payload = vec![0u8; max_payload];
        while sent < frames || received < frames {
            let mut progress = false;
            if sent < frames {
                random ^= random << 13;
                random ^= random >> 7;
                random ^= random << 17;
                let length = if random.is_multiple_of(8) {
                    random as usize % (max_payload + 1)
                } else {
                    random as usize % 200
                };
                for (index, byte) in payload[..length].iter_mut().enumerate() {
                    *byte = payload_byte(me, sent, index);
                }
                if path
                    .try_send(peer, &frame_header(me, sent, length), &payload[..length])
                    .unwrap()
                {
                    sent += 1;
                    progress = true;
                }
            }
            let delivered = path
                .poll(|from, frame| {
                    assert_eq!(from, peer);
                    assert_eq!(check_frame(from, frame), received);
                    received += 1;
                })
                .unwrap();
            if delivered == 0 && !progress {
                path.wait(2_000_000).unwrap();
            }
        }
    }

    const CHILD_JOB_VARIABLE: &str = "RESMPI_PATH_TEST_CHILD_JOB";

    /// The child half of `two_processes_stream_100k_frames_each_way`; does
    /// nothing when run on its own.
    #[test]
    fn two_process_child() {
        let Ok(job_id) = std::env::var(CHILD_JOB_VARIABLE) else {
            return;
        };
        let segment = ShmSegment::create(&job_id, 1, 2, 64 << 10).unwrap();
        let mut path = attach_when_ready(segment, &job_id, 1, &[0]);
        stream_both_ways(&mut path, 0, 100_000);
        path.unlink_own().unwrap();
    }

    /// Two real processes (this test binary re-run as the child), so the
    /// futex doorbell and the rings are exercised across address spaces.
    #[test]
    fn two_processes_stream_100k_frames_each_way() {
        let job_id = unique_job_id("process");
        let segment = ShmSegment::create(&job_id, 0, 2, 64 << 10).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "shm::tests::two_process_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_JOB_VARIABLE, &job_id)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut path = attach_when_ready(segment, &job_id, 0, &[1]);
        stream_both_ways(&mut path, 1, 100_000);
        assert!(child.wait().unwrap().success(), "child process failed");
        path.unlink_own().unwrap();
        assert!(!std::path::Path::new(&format!("/dev/shm/resmpi-{job_id}-1")).exists());
    }

    /// `wait` with a long timeout returns promptly when a frame arrives, and
    /// when a ring that refused a send gets room again.
    #[test]
    fn sleeper_is_woken_by_a_frame_and_by_freed_room() {
        const LONG_TIMEOUT_US: u64 = 20_000_000;
        let mut paths = world("wake", 2, 4096);
        let mut other = paths.pop().unwrap();
        let mut sleeper = paths.pop().unwrap();
        // Woken by input.
        let started = Instant::now();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            assert!(other.try_send(0, &frame_header(1, 0, 0), &[]).unwrap());
            other
        });
        let mut frames = 0;
        while frames == 0 {
            sleeper.wait(LONG_TIMEOUT_US).unwrap();
            frames += sleeper.poll(|_, _| ()).unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "input did not wake the sleeper"
        );
        let mut other = sender.join().unwrap();
        // Woken by room: fill the ring towards `other`, then sleep.
        let payload = [0u8; 900];
        while sleeper
            .try_send(1, &frame_header(0, 0, payload.len()), &payload)
            .unwrap()
        {}
        let started = Instant::now();
        let receiver = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            assert!(other.poll(|_, _| ()).unwrap() > 0);
            other
        });
        while !sleeper
            .try_send(1, &frame_header(0, 0, payload.len()), &payload)
            .unwrap()
        {
            sleeper.wait(LONG_TIMEOUT_US).unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "freed room did not wake the sender"
        );
        receiver.join().unwrap();
    }

    /// A contribution published in one rank's collective area is found,
    /// whole, by every local peer through its own mapping, and each reader's
    /// receipt, in its own area, is seen by the owner through its mapping.
    #[test]
    fn every_rank_reads_the_collective_areas_of_its_local_peers() {
        use crate::collective_area::{collective_tag, COLLECTIVE_SLOTS};
        let mut paths = world("areas", 3, 4096);
        let index = paths[1].take_collective_slot();
        assert_eq!(index, 0);
        let slot = paths[1].collective_area(1).unwrap().slot(index);
        // SAFETY: rank 1 owns the area; the slot is fresh.
        let publication = unsafe {
            slot.publish(collective_tag(5, 1), |payload| {
                payload[..3].copy_from_slice(b"xyz")
            })
        };
        for reader in [0u32, 2] {
            let area = paths[reader as usize].collective_area(1).unwrap();
            assert!(area.find(collective_tag(5, 2), 0).is_none());
            let found = area.find(collective_tag(5, 1), 7).unwrap();
            assert_eq!(found.index, 0);
            // SAFETY: three bytes inside the slot, published above.
            assert_eq!(
                unsafe { std::slice::from_raw_parts(found.payload(3), 3) },
                b"xyz"
            );
            let own = paths[reader as usize].collective_area(reader).unwrap();
            assert!(found.finish());
            own.write_receipt(1, found.index, found.publication());
            let seen_by_owner = paths[1].collective_area(reader).unwrap().receipts_for(1);
            assert_eq!(seen_by_owner[index], publication);
        }
        assert!(paths[0].collective_area(3).is_none());
        for expected in 1..COLLECTIVE_SLOTS {
            assert_eq!(paths[1].take_collective_slot(), expected);
        }
        assert_eq!(
            paths[1].take_collective_slot(),
            0,
            "slots are taken round robin"
        );
    }

    /// A frame filled in place through `try_send_with` arrives as written.
    #[test]
    fn try_send_with_writes_in_place() {
        let mut paths = world("in-place", 2, 8192);
        let payload_bytes = 100;
        assert!(paths[1]
            .try_send_with(0, resmpi_wire::HEADER_LEN_BYTES + payload_bytes, |frame| {
                frame[..resmpi_wire::HEADER_LEN_BYTES].copy_from_slice(&frame_header(
                    1,
                    42,
                    payload_bytes,
                ));
                for (index, byte) in frame[resmpi_wire::HEADER_LEN_BYTES..]
                    .iter_mut()
                    .enumerate()
                {
                    *byte = payload_byte(1, 42, index);
                }
            })
            .unwrap());
        let mut sequences = Vec::new();
        paths[0]
            .poll(|peer, frame| sequences.push(check_frame(peer, frame)))
            .unwrap();
        assert_eq!(sequences, vec![42]);
        assert!(matches!(
            paths[1].try_send_with(0, 10, |_| ()),
            Err(PathError::Protocol(_))
        ));
    }
}
