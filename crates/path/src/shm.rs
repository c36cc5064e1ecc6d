//! The shared-memory path: how ranks on one host hand each other frames.
//!
//! Each rank creates one *receive* segment holding a small control block
//! and one SPSC ring (see `ring.rs`) per possible sender rank. A sender
//! writes straight into its ring in the receiver's segment; the receiver
//! hands the frame to its handler in place and frees it afterwards. So a
//! frame is copied exactly twice (in by the sender, out by whoever consumes
//! it), and the fast path has no syscall, lock or allocation.
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
//! Why segments have no name (issue 16, item 3): a segment is an anonymous
//! `memfd_create` file, so there is never anything in /dev/shm or any other
//! directory that a killed job could leave behind; the memory goes when the
//! last process mapping it exits, whoever is killed and when. A peer reaches
//! it through the owner's descriptor, `/proc/<pid>/fd/<fd>` (the
//! [`ShmLocator`] in the owner's business card). That needs no server
//! thread and no socket, works wherever the ranks of a host see each other's
//! /proc (our launcher, hydra, re-join), and the kernel lets only processes
//! that may read the owner's memory anyway (same user, ptrace read access)
//! open it; the file is also made 0600. A random nonce in the control block,
//! repeated in the locator, catches a descriptor number or pid that no longer
//! names the segment. The owner closes its descriptor once every peer has
//! mapped the segment ([`ShmPath::close_own_descriptor`], after the second
//! wire-up barrier), so from then on nobody new can open it at all.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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
/// Random per-segment value a peer checks against the owner's locator.
const NONCE_OFFSET_BYTES: usize = 32;
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
    /// Create an anonymous segment of `length_bytes` (mode 0600, closed on
    /// exec) and map it; returns the mapping and the descriptor.
    fn create(length_bytes: usize) -> std::io::Result<(Mapping, OwnedFd)> {
        // SAFETY: a NUL-terminated literal; flags are plain values.
        let raw = unsafe { libc::memfd_create(c"resmpi-shm".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: memfd_create just returned this descriptor; nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain syscall on a descriptor we own.
        if unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mapping = Self::map_fd(fd.as_raw_fd(), Some(length_bytes))?;
        Ok((mapping, fd))
    }

    /// Map the segment another process of this host holds open, through
    /// `/proc/<pid>/fd/<fd>`, whatever its size.
    fn open(locator: &ShmLocator) -> std::io::Result<Mapping> {
        let path = format!("/proc/{}/fd/{}", locator.pid, locator.fd);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|error| std::io::Error::new(error.kind(), format!("{path}: {error}")))?;
        let metadata = file.metadata()?;
        if !metadata.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{path} is not a shared-memory segment"),
            ));
        }
        // The mapping stays valid after `file` closes.
        Self::map_fd(file.as_raw_fd(), None)
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

/// Where a peer finds a rank's segment: the owner's pid, the descriptor
/// number it holds the segment under, and the segment's nonce. Written in
/// business cards as `PID.FD.NONCE` (decimal, decimal, 16 hex digits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShmLocator {
    /// The owner process.
    pub pid: u32,
    /// The owner's descriptor of the segment.
    pub fd: i32,
    /// Random value the segment's control block holds too.
    pub nonce: u64,
}

impl std::fmt::Display for ShmLocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{:016x}", self.pid, self.fd, self.nonce)
    }
}

impl std::str::FromStr for ShmLocator {
    type Err = String;

    /// Parse `PID.FD.NONCE` as written by `Display`; anything else (signs,
    /// spaces, a zero pid, a negative or huge number, a nonce that is not
    /// 16 hex digits) is refused with the reason.
    fn from_str(text: &str) -> Result<ShmLocator, String> {
        let fields: Vec<&str> = text.split('.').collect();
        let [pid, fd, nonce] = fields[..] else {
            return Err(format!("shm locator '{text}' must be PID.FD.NONCE"));
        };
        let decimal = |field: &str, what: &str| -> Result<u32, String> {
            if field.is_empty() || field.len() > 10 || !field.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "shm locator '{text}': {what} '{field}' is not a number"
                ));
            }
            field
                .parse::<u32>()
                .map_err(|_| format!("shm locator '{text}': {what} '{field}' is too large"))
        };
        let pid = decimal(pid, "pid")?;
        let fd = decimal(fd, "descriptor")?;
        if pid == 0 || fd > i32::MAX as u32 {
            return Err(format!(
                "shm locator '{text}': pid or descriptor out of range"
            ));
        }
        if nonce.len() != 16 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "shm locator '{text}': nonce '{nonce}' is not 16 hex digits"
            ));
        }
        let nonce = u64::from_str_radix(nonce, 16)
            .map_err(|_| format!("shm locator '{text}': bad nonce"))?;
        Ok(ShmLocator {
            pid,
            fd: fd as i32,
            nonce,
        })
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
    /// The segment's descriptor, held until every peer has opened it.
    fd: Option<OwnedFd>,
    mapping: Mapping,
    rank: u32,
    world_size: u32,
    ring_bytes: usize,
    nonce: u64,
}

impl ShmSegment {
    /// Create an anonymous segment (memfd, mode 0600) with one ring of
    /// `ring_bytes` (a power of two, 4 KiB ..= 1 GiB) per rank of the
    /// world. Pages are allocated lazily by the kernel, so rings of ranks
    /// that never send here cost no memory.
    pub fn create(rank: u32, world_size: u32, ring_bytes: usize) -> Result<ShmSegment, PathError> {
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
        let mut random = [0u8; 16];
        crate::fill_random(&mut random)?;
        let key = u64::from_le_bytes(random[..8].try_into().expect("8 bytes"));
        let nonce = u64::from_le_bytes(random[8..].try_into().expect("8 bytes"));
        let length_bytes = segment_bytes(world_size, ring_bytes).ok_or_else(|| {
            PathError::Protocol(format!("{world_size} rings of {ring_bytes} bytes overflow"))
        })?;
        let (mapping, fd) = Mapping::create(length_bytes).map_err(|error| {
            PathError::Io(std::io::Error::new(
                error.kind(),
                format!("creating the {length_bytes}-byte shm segment: {error}"),
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
            .store(key, Ordering::Relaxed);
        mapping
            .u64_at(NONCE_OFFSET_BYTES)
            .store(nonce, Ordering::Relaxed);
        mapping
            .u64_at(MAGIC_OFFSET_BYTES)
            .store(SEGMENT_MAGIC, Ordering::Release);
        Ok(ShmSegment {
            fd: Some(fd),
            mapping,
            rank,
            world_size,
            ring_bytes,
            nonce,
        })
    }

    /// Where a peer on this host finds this segment (for the business card).
    /// Valid until [`ShmPath::close_own_descriptor`].
    pub fn locator(&self) -> ShmLocator {
        ShmLocator {
            pid: std::process::id(),
            fd: self.fd.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
            nonce: self.nonce,
        }
    }

    /// Bytes of data per ring.
    pub fn ring_bytes(&self) -> usize {
        self.ring_bytes
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
    peer_processes: Vec<PeerProcess>,
}

/// A local peer's process, as a pidfd: readable once the process has
/// exited (a zombie included, which `kill(pid, 0)` still finds), and never
/// another process that reuses the pid.
#[derive(Debug)]
struct PeerProcess {
    rank: u32,
    pidfd: std::os::fd::OwnedFd,
}

impl PeerProcess {
    /// None where the kernel has no `pidfd_open` (before Linux 5.3) or the
    /// process is already gone (the caller's checks of its segment fail).
    fn open(rank: u32, pid: u32) -> Option<PeerProcess> {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new
        // descriptor (or -1); nothing else is read or written.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: fd was just returned by pidfd_open and is owned by no one else.
        let pidfd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
        Some(PeerProcess { rank, pidfd })
    }

    fn has_exited(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut poll = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut poll, 1, 0) == 1 && poll.revents & libc::POLLIN != 0 }
    }
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
    /// The local peers whose exit [`ShmPath::exited_peers`] has not yet
    /// reported.
    peer_processes: Vec<PeerProcess>,
    own: ShmSegment,
}

impl ShmPath {
    /// Map every local peer's segment, found through its locator (the peers
    /// must all have created theirs already: the caller runs a barrier
    /// between `ShmSegment::create` and this). Peers must have the same
    /// world size and ring size. An entry for `my_rank` is ignored.
    pub fn attach(
        own: ShmSegment,
        my_rank: u32,
        local_peers: &[(u32, ShmLocator)],
    ) -> Result<ShmPath, PathError> {
        Self::attach_but_gone(own, my_rank, local_peers, &|_| false).map(|(path, _)| path)
    }

    /// [`ShmPath::attach`] for a job that outlives a death during its
    /// wire-up (process replication): a peer whose segment cannot be
    /// mapped (its process exited and took its descriptor along) is left
    /// out if `gone` confirms it died, instead of failing the call.
    /// Returns the path and the peers left out.
    pub fn attach_but_gone(
        own: ShmSegment,
        my_rank: u32,
        local_peers: &[(u32, ShmLocator)],
        gone: &dyn Fn(u32) -> bool,
    ) -> Result<(ShmPath, Vec<u32>), PathError> {
        let (
            AttachedPeers {
                outgoing,
                incoming,
                collective_areas,
                peer_mappings,
                peer_processes,
            },
            left_out,
        ) = Self::attach_peers(&own, my_rank, local_peers, gone)?;
        let path = ShmPath {
            outgoing,
            incoming,
            poll_start: 0,
            max_frame_bytes: ring::max_frame_bytes(own.ring_bytes),
            my_rank,
            collective_areas,
            next_collective_slot: 0,
            peer_mappings,
            peer_processes,
            own,
        };
        Ok((path, left_out))
    }

    fn attach_peers(
        own: &ShmSegment,
        my_rank: u32,
        local_peers: &[(u32, ShmLocator)],
        gone: &dyn Fn(u32) -> bool,
    ) -> Result<(AttachedPeers, Vec<u32>), PathError> {
        let mut left_out = Vec::new();
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
        let mut peer_processes = Vec::new();
        let mut collective_areas: Vec<Option<CollectiveArea>> =
            (0..world_size).map(|_| None).collect();
        // SAFETY: our own segment was created with `segment_bytes`.
        collective_areas[my_rank as usize] =
            Some(unsafe { own.mapping.collective_area(world_size, ring_bytes) });
        for &(peer, locator) in local_peers {
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
            let mapping = match Mapping::open(&locator) {
                Ok(mapping) => mapping,
                Err(_) if gone(peer) => {
                    left_out.push(peer);
                    continue;
                }
                Err(error) => {
                    return Err(PathError::Io(std::io::Error::new(
                        error.kind(),
                        format!(
                            "opening the shm segment of rank {peer} (pid {}): {error} (ranks of \
                             one host must see each other in /proc and run as the same user; \
                             RESMPI_PATHS=tcp avoids shared memory)",
                            locator.pid
                        ),
                    )))
                }
            };
            let magic = mapping.u64_at(MAGIC_OFFSET_BYTES).load(Ordering::Acquire);
            let nonce = mapping.u64_at(NONCE_OFFSET_BYTES).load(Ordering::Relaxed);
            if (magic != SEGMENT_MAGIC || nonce != locator.nonce) && gone(peer) {
                left_out.push(peer);
                continue;
            }
            if magic != SEGMENT_MAGIC || nonce != locator.nonce {
                return Err(PathError::Protocol(format!(
                    "/proc/{}/fd/{} is not the shm segment rank {peer} published (the process \
                     exited or closed it)",
                    locator.pid, locator.fd
                )));
            }
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
            peer_processes.extend(PeerProcess::open(peer, locator.pid));
        }
        Ok((
            AttachedPeers {
                outgoing,
                incoming,
                collective_areas,
                peer_mappings,
                peer_processes,
            },
            left_out,
        ))
    }

    /// Close this rank's descriptor of its own segment, so that no process
    /// can open it any more (the mappings stay). Call once every peer has
    /// attached (after a second barrier); calling it again does nothing.
    pub fn close_own_descriptor(&mut self) {
        self.own.fd = None;
    }

    /// The local peers whose process has exited since the last call, each
    /// reported once. A ring has no connection to close, so a launcher that
    /// tells no one of a death (Slurm, hydra) would leave a rank waiting on
    /// a dead peer for ever; this is how it learns. A few poll calls with
    /// no wait: meant for a rank that has been idle a while.
    pub fn exited_peers(&mut self) -> Vec<u32> {
        let mut exited = Vec::new();
        self.peer_processes.retain(|process| {
            let gone = process.has_exited();
            if gone {
                exited.push(process.rank);
            }
            !gone
        });
        exited
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
/// than on first touch in the hot path. This also turns a lack of memory
/// (shmem does not reserve pages at ftruncate) into a clear error here,
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
                    "allocating the {ring_bytes}-byte shm ring from rank {sender} (out of memory? \
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
    use std::time::{Duration, Instant};

    /// Create segments for `world_size` ranks, attach each to all others,
    /// and close the descriptors (as every rank does after its second
    /// barrier).
    fn world(world_size: u32, ring_bytes: usize) -> Vec<ShmPath> {
        let segments: Vec<ShmSegment> = (0..world_size)
            .map(|rank| ShmSegment::create(rank, world_size, ring_bytes).unwrap())
            .collect();
        let locators: Vec<(u32, ShmLocator)> = segments
            .iter()
            .map(|segment| (segment.rank, segment.locator()))
            .collect();
        let mut paths: Vec<ShmPath> = segments
            .into_iter()
            .enumerate()
            .map(|(rank, segment)| ShmPath::attach(segment, rank as u32, &locators).unwrap())
            .collect();
        for path in &mut paths {
            path.close_own_descriptor();
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
    fn segment_is_private_nameless_and_its_descriptor_closes() {
        use std::os::unix::fs::PermissionsExt;
        let segment = ShmSegment::create(0, 2, 4096).unwrap();
        let locator = segment.locator();
        assert_eq!(locator.pid, std::process::id());
        let link = format!("/proc/self/fd/{}", locator.fd);
        let target = std::fs::read_link(&link).unwrap();
        assert!(
            target.to_string_lossy().starts_with("/memfd:resmpi-shm"),
            "{target:?} is not an anonymous memfd"
        );
        let mode = std::fs::metadata(&link).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(locator.to_string().parse::<ShmLocator>(), Ok(locator));
        let mut path = ShmPath::attach(segment, 0, &[]).unwrap();
        path.close_own_descriptor();
        assert!(
            std::fs::read_link(&link).map_or(true, |now| now != target),
            "the descriptor is closed"
        );
        path.close_own_descriptor();
    }

    #[test]
    fn locators_parse_strictly() {
        let good = "123.7.00000000000000ff";
        assert_eq!(
            good.parse::<ShmLocator>(),
            Ok(ShmLocator {
                pid: 123,
                fd: 7,
                nonce: 255
            })
        );
        for bad in [
            "",
            "1.2",
            "1.2.3.4",
            "0.7.00000000000000ff",
            "+1.7.00000000000000ff",
            "1.-7.00000000000000ff",
            "1.2147483648.00000000000000ff",
            "99999999999.7.00000000000000ff",
            "1.7.ff",
            "1.7.+0000000000000ff",
            "1.7.0000000000000ffg",
            " 1.7.00000000000000ff",
        ] {
            assert!(bad.parse::<ShmLocator>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(ShmSegment::create(2, 2, 4096).is_err());
        assert!(ShmSegment::create(0, 2, 5000).is_err());
        let mut paths = world(2, 4096);
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
        // A locator that names no segment, a segment of another shape, or
        // one whose nonce differs: each is refused, nothing is mapped.
        let lonely = ShmSegment::create(0, 2, 4096).unwrap();
        let mut missing = lonely.locator();
        missing.fd = 1_000_000;
        assert!(ShmPath::attach(lonely, 0, &[(1, missing)]).is_err());
        let lonely = ShmSegment::create(0, 2, 4096).unwrap();
        let other_shape = ShmSegment::create(1, 3, 4096).unwrap();
        assert!(matches!(
            ShmPath::attach(lonely, 0, &[(1, other_shape.locator())]),
            Err(PathError::Protocol(_))
        ));
        let lonely = ShmSegment::create(0, 2, 4096).unwrap();
        let peer = ShmSegment::create(1, 2, 4096).unwrap();
        let mut stale = peer.locator();
        stale.nonce ^= 1;
        assert!(matches!(
            ShmPath::attach(lonely, 0, &[(1, stale)]),
            Err(PathError::Protocol(_))
        ));
        let lonely = ShmSegment::create(0, 2, 4096).unwrap();
        let mut not_a_segment = peer.locator();
        not_a_segment.fd = 0;
        assert!(ShmPath::attach(lonely, 0, &[(1, not_a_segment)]).is_err());
        // A peer that cannot be mapped and is confirmed dead is left out;
        // the live ones are attached all the same.
        let own = ShmSegment::create(0, 3, 4096).unwrap();
        let dead_segment = ShmSegment::create(1, 3, 4096).unwrap();
        let live_segment = ShmSegment::create(2, 3, 4096).unwrap();
        let live = live_segment.locator();
        let mut dead = dead_segment.locator();
        dead.fd = 1_000_000;
        let (path, left_out) =
            ShmPath::attach_but_gone(own, 0, &[(1, dead), (2, live)], &|peer| peer == 1).unwrap();
        assert_eq!(left_out, vec![1]);
        assert!(path.outgoing[1].is_none() && path.outgoing[2].is_some());
    }

    #[test]
    fn full_ring_pushes_back_and_frees_after_poll() {
        let mut paths = world(2, 4096);
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
        let mut paths = world(3, 4096);
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
        let paths = world(2, 64 << 10);
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
        let paths = world(WORLD, 16 << 10);
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

    const PARENT_LOCATOR_VARIABLE: &str = "RESMPI_PATH_TEST_PARENT_LOCATOR";
    const CHILD_LOCATOR_FILE_VARIABLE: &str = "RESMPI_PATH_TEST_CHILD_LOCATOR_FILE";

    /// The child half of `two_processes_stream_100k_frames_each_way`; does
    /// nothing when run on its own.
    #[test]
    fn two_process_child() {
        let (Ok(parent), Ok(file)) = (
            std::env::var(PARENT_LOCATOR_VARIABLE),
            std::env::var(CHILD_LOCATOR_FILE_VARIABLE),
        ) else {
            return;
        };
        let parent: ShmLocator = parent.parse().unwrap();
        let segment = ShmSegment::create(1, 2, 64 << 10).unwrap();
        // Written whole, then renamed, so the parent never reads half of it.
        std::fs::write(format!("{file}.part"), segment.locator().to_string()).unwrap();
        std::fs::rename(format!("{file}.part"), &file).unwrap();
        let mut path = ShmPath::attach(segment, 1, &[(0, parent)]).unwrap();
        stream_both_ways(&mut path, 0, 100_000);
        path.close_own_descriptor();
    }

    /// Two real processes (this test binary re-run as the child), so the
    /// futex doorbell and the rings are exercised across address spaces, and
    /// each maps the other's segment through /proc/PID/fd.
    #[test]
    fn two_processes_stream_100k_frames_each_way() {
        let segment = ShmSegment::create(0, 2, 64 << 10).unwrap();
        let file = std::env::temp_dir().join(format!(
            "resmpi-path-test-{}-child-locator",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&file);
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "shm::tests::two_process_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(PARENT_LOCATOR_VARIABLE, segment.locator().to_string())
            .env(CHILD_LOCATOR_FILE_VARIABLE, &file)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let child_locator: ShmLocator = loop {
            if let Ok(text) = std::fs::read_to_string(&file) {
                break text.parse().unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "the child never wrote its locator"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        std::fs::remove_file(&file).unwrap();
        let mut path = ShmPath::attach(segment, 0, &[(1, child_locator)]).unwrap();
        path.close_own_descriptor();
        stream_both_ways(&mut path, 1, 100_000);
        assert!(child.wait().unwrap().success(), "child process failed");
    }

    /// `wait` with a long timeout returns promptly when a frame arrives, and
    /// when a ring that refused a send gets room again.
    #[test]
    fn sleeper_is_woken_by_a_frame_and_by_freed_room() {
        const LONG_TIMEOUT_US: u64 = 20_000_000;
        let mut paths = world(2, 4096);
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
        let mut paths = world(3, 4096);
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
        let mut paths = world(2, 8192);
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
