//! The TCP path: frames to ranks on other hosts over a full mesh of
//! authenticated, nonblocking TCP connections.
//!
//! Wire-up is deterministic and cannot deadlock: for every pair, the higher
//! rank connects and the lower rank accepts. A rank first connects to every
//! lower peer (each of those is either accepting or will accept once its own
//! connects to even lower ranks are done, and rank 0 connects to nobody),
//! then accepts every higher peer. All of it runs under one deadline.
//!
//! Authentication: both sides prove they know the job secret without sending
//! it. The connector sends a fresh nonce; the acceptor answers with its own
//! nonce and SHA-256 over (secret, connector's nonce, its rank, its role);
//! the connector checks that and answers in kind; the acceptor sends a
//! verdict byte. Role and rank inside the hash stop a proof from being
//! reflected back or replayed for another rank. A connection that fails is
//! dropped, and the acceptor keeps waiting for the real peer.
//!
//! Anyone who can reach a rank's port can open a connection to it, so the
//! acceptor never waits on one connection: it runs every handshake at once
//! (nonblocking sockets and one poll(2)), gives each connection
//! [`HANDSHAKE_TIMEOUT`] to prove itself, and holds at most
//! [`UNPROVEN_CONNECTIONS_MAX`] unproven ones, dropping the oldest past
//! that. Idle or flooding strangers then cost a real peer nothing, or one
//! retry: the connector tries again (new connection, new nonce) after a
//! stalled or reset handshake until the wire-up deadline, and only a peer
//! that fails the proof ends its wire-up at once.
//!
//! Framing: the 64-byte wire header is the length prefix. Sends use
//! `sendmsg` with the header and the payload as two iovecs; what the kernel
//! does not take goes into a bounded per-peer buffer (back-pressure beyond
//! it). Receives go into a per-peer reassembly buffer and whole frames are
//! handed to the handler from there, except the payload of a frame that the
//! receiver places ([`crate::Receiver::place`]: a rendezvous fragment of a
//! matched receive): once its header is in, the rest of its payload is read
//! straight into the destination, with the next frame's header in the same
//! `readv`, and its CRC32C is computed piece by piece right after each read,
//! while the bytes are in cache. The kernel's copy is then the only one, as
//! in MPICH/UCX; nothing is trusted until the receiver has checked it.

use std::cell::RefCell;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use resmpi_wire::{FrameHeader, HEADER_LEN_BYTES};
use sha2::{Digest, Sha256};

use resmpi_checksum::Crc32c;

use crate::{Path, PathError, Placed, Placement, Receiver, PLACEMENT_MIN_PAYLOAD_BYTES};

/// Largest payload of one frame on this path.
const MAX_PAYLOAD_BYTES: usize = 1 << 20;
/// Bytes of unsent frames kept per peer before `try_send` pushes back.
const SEND_BUFFER_LIMIT_BYTES: usize = 8 << 20;
/// Initial size of a peer's reassembly buffer; it grows (once) when a frame
/// larger than it arrives.
const RECEIVE_BUFFER_INITIAL_BYTES: usize = 256 << 10;
/// Upper bound of a peer's reassembly buffer: two largest frames.
const RECEIVE_BUFFER_MAX_BYTES: usize = 2 * (HEADER_LEN_BYTES + MAX_PAYLOAD_BYTES);
/// Frames delivered from one peer per `poll` (fairness between peers).
const FRAMES_PER_PEER_PER_POLL: usize = 64;
/// `recv` calls on one peer per `poll` (fairness against a flooding peer).
const RECEIVES_PER_PEER_PER_POLL: usize = 4;
/// `readv` calls into placed payloads on one peer per `poll`: more than
/// `RECEIVES_PER_PEER_PER_POLL`, since these bytes need no buffer of ours
/// and a frame ends within a bounded number of them anyway.
const PLACED_RECEIVES_PER_PEER_PER_POLL: usize = 32;
/// Most bytes one read into the reassembly buffer asks for when no partial
/// frame waits there: enough for hundreds of small frames, yet little of
/// a large payload that could have been placed.
const GENEROUS_READ_BYTES: usize = 64 << 10;
/// Up to this many peers, `poll` simply tries a nonblocking read on each
/// (one syscall per peer); beyond it, one poll(2) first finds the readable
/// ones.
const DIRECT_RECEIVE_PEER_LIMIT: usize = 4;
/// Socket buffer size asked for, when the system allows that much.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// How often a wire-up that waits for peers to connect asks whether one
/// of them has died.
const GONE_POLL: Duration = Duration::from_millis(50);
/// Default bound on the whole of `connect_all`.
const CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// Bound on one handshake attempt, on either side: how long an acceptor
/// keeps a connection that has not proved the secret, and how long a
/// connector waits for an answer before it tries again.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Most connections one listener keeps while they have not yet proved the
/// job secret; past it the oldest is dropped. Far more than the peers that
/// ever connect at once in a wire-up, far fewer than the descriptors a
/// flood would take.
const UNPROVEN_CONNECTIONS_MAX: usize = 64;

const HANDSHAKE_MAGIC: [u8; 4] = *b"RMPT";
const HANDSHAKE_VERSION: u32 = 1;
const NONCE_BYTES: usize = 32;
const PROOF_BYTES: usize = 32;
/// magic, version, rank, reserved, nonce.
const HELLO_BYTES: usize = 16 + NONCE_BYTES;
const ROLE_ACCEPTOR: u8 = b'A';
const ROLE_CONNECTOR: u8 = b'C';
const VERDICT_ACCEPTED: u8 = 1;
const VERDICT_REJECTED: u8 = 0;

/// One connected peer.
#[derive(Debug)]
struct TcpPeer {
    rank: u32,
    stream: TcpStream,
    /// Unsent bytes are `send_buffer[send_start..]`.
    send_buffer: Vec<u8>,
    send_start: usize,
    /// Received, undelivered bytes are `receive_buffer[receive_start..receive_end]`.
    receive_buffer: Vec<u8>,
    receive_start: usize,
    receive_end: usize,
    /// The frame whose payload is being read into its placement, if any;
    /// meanwhile the reassembly buffer is empty but for what follows it.
    placing: Option<Placing>,
    closed: bool,
    /// A send found the connection gone (the peer closed or reset it).
    /// What it wrote before is still read, up to the end of the stream:
    /// only the read side reports the peer closed, so its last frames (an
    /// Issend's match acknowledgement) are not lost to our own send
    /// failing first. Sends to it are dropped meanwhile (it reads nothing
    /// more).
    send_closed: bool,
}

/// A frame whose payload goes straight to its destination.
#[derive(Debug)]
struct Placing {
    header: [u8; HEADER_LEN_BYTES],
    payload_bytes: usize,
    /// Payload bytes already written (or, once abandoned, read and dropped).
    done_bytes: usize,
    /// CRC32C of the payload bytes written so far, when asked for.
    crc: Option<Crc32c>,
    /// The receiver stopped wanting the payload: the rest is read into the
    /// reassembly buffer as scratch and the frame is reported lost.
    abandoned: bool,
}

/// What one read into a placed payload found.
enum PlacedRead {
    /// Nothing to read.
    WouldBlock,
    /// `drained`: the read got less than it asked for (the socket is empty).
    Read { drained: bool },
}

/// A [`Receiver`] that places nothing: what `Path::poll` uses.
struct WholeFrames<F>(F);

// SAFETY: `place` never returns a placement.
unsafe impl<F: FnMut(u32, &[u8])> Receiver for WholeFrames<F> {
    fn frame(&mut self, peer: u32, frame: &[u8]) {
        (self.0)(peer, frame)
    }

    fn place(
        &mut self,
        _peer: u32,
        _header: &[u8; HEADER_LEN_BYTES],
        _resumed: bool,
    ) -> Option<Placement> {
        None
    }

    fn placed(&mut self, _peer: u32, _header: &[u8; HEADER_LEN_BYTES], _placed: Placed) {}
}

/// Frames to and from ranks on other hosts over TCP.
#[derive(Debug)]
pub struct TcpPath {
    my_rank: u32,
    listener: TcpListener,
    connect_timeout: Duration,
    /// Indexed by rank; `None` for ranks not reached over TCP.
    peers: Vec<Option<TcpPeer>>,
    /// Wire number to peer number, in a forked replica ([`TcpPath::renumber`]).
    slot_of: Option<Vec<u32>>,
    /// Ranks of `peers` that are `Some`, in rank order; parallel to `pollfds`.
    connected: Vec<u32>,
    pollfds: RefCell<Vec<libc::pollfd>>,
}

impl TcpPath {
    /// Listen on `bind_ip` (ephemeral port) and return the path and the
    /// `address:port` other ranks should connect to.
    pub fn bind(my_rank: u32, bind_ip: IpAddr) -> Result<(TcpPath, String), PathError> {
        let listener = TcpListener::bind(SocketAddr::new(bind_ip, 0))?;
        let address = listener.local_addr()?.to_string();
        raise_socket_buffers(listener.as_raw_fd());
        let path = TcpPath {
            my_rank,
            listener,
            connect_timeout: CONNECT_TIMEOUT_DEFAULT,
            peers: Vec::new(),
            slot_of: None,
            connected: Vec::new(),
            pollfds: RefCell::new(Vec::new()),
        };
        Ok((path, address))
    }

    /// Change the bound on `connect_all` (30 s by default).
    pub fn set_connect_timeout(&mut self, timeout: Duration) {
        self.connect_timeout = timeout;
    }

    /// Connect to every rank in `peers` (rank, published address), proving
    /// and checking knowledge of `secret`. `peers` may include this rank; it
    /// is ignored. Fails with a clear error if the mesh is not complete
    /// within the connect timeout.
    pub fn connect_all(&mut self, peers: &[(u32, String)], secret: &[u8]) -> Result<(), PathError> {
        self.connect_all_but_gone(peers, secret, &|_| false)
            .map(|_| ())
    }

    /// [`TcpPath::connect_all`] for a job that outlives a death during its
    /// wire-up (process replication): a peer that `gone` says has died
    /// (asked between tries, so a dead peer costs no timeout) is left out
    /// instead of failing the call. Returns the peers left out.
    pub fn connect_all_but_gone(
        &mut self,
        peers: &[(u32, String)],
        secret: &[u8],
        gone: &dyn Fn(u32) -> bool,
    ) -> Result<Vec<u32>, PathError> {
        let deadline = Instant::now() + self.connect_timeout;
        let mut lower: Vec<&(u32, String)> = peers
            .iter()
            .filter(|(rank, _)| *rank < self.my_rank)
            .collect();
        lower.sort_by_key(|(rank, _)| *rank);
        let mut higher: Vec<u32> = peers
            .iter()
            .map(|(rank, _)| *rank)
            .filter(|rank| *rank > self.my_rank)
            .collect();
        higher.sort_unstable();
        let peer_count = lower.len() + higher.len();
        higher.dedup();
        if lower.windows(2).any(|pair| pair[0].0 == pair[1].0)
            || lower.len() + higher.len() != peer_count
        {
            return Err(PathError::Protocol(
                "a rank is listed twice in the TCP peer list".into(),
            ));
        }
        let mut left_out = Vec::new();
        for (rank, address) in lower {
            if self.is_connected(*rank) {
                return Err(PathError::Protocol(format!(
                    "rank {rank} is already connected"
                )));
            }
            match self.connect_one(*rank, address, secret, deadline, gone) {
                Ok(stream) => self.add_peer(*rank, stream)?,
                Err(PathError::PeerClosed(closed)) if closed == *rank => left_out.push(*rank),
                Err(error) => return Err(error),
            }
        }
        let waiting: Vec<u32> = higher
            .into_iter()
            .filter(|rank| !self.is_connected(*rank))
            .collect();
        left_out.extend(self.accept_waiting(waiting, secret, deadline, gone)?);
        Ok(left_out)
    }

    /// Accept a connection from every rank of `expected`, whatever its rank
    /// relative to this one (a replacement process joining a running job:
    /// every survivor connects to it). Same authentication and timeout as
    /// [`TcpPath::connect_all`].
    pub fn accept_peers(&mut self, expected: &[u32], secret: &[u8]) -> Result<(), PathError> {
        self.accept_peers_but_gone(expected, secret, &|_| false)
            .map(|_| ())
    }

    /// [`TcpPath::accept_peers`] that goes on without a peer that `gone`
    /// says has died (asked between tries: a peer that died after it was
    /// listed costs no timeout). Returns the peers left out.
    pub fn accept_peers_but_gone(
        &mut self,
        expected: &[u32],
        secret: &[u8],
        gone: &dyn Fn(u32) -> bool,
    ) -> Result<Vec<u32>, PathError> {
        let deadline = Instant::now() + self.connect_timeout;
        let mut waiting = expected.to_vec();
        waiting.sort_unstable();
        waiting.dedup();
        waiting.retain(|rank| *rank != self.my_rank);
        self.accept_waiting(waiting, secret, deadline, gone)
    }

    /// Connect to `rank` listening at `address` after wire-up (it replaced
    /// a dead process): whatever this path held for that rank (the dead
    /// process's closed connection, its unread bytes) is dropped first, so
    /// nothing of the old process can be read after this.
    pub fn connect_peer(
        &mut self,
        rank: u32,
        address: &str,
        secret: &[u8],
    ) -> Result<(), PathError> {
        let deadline = Instant::now() + self.connect_timeout;
        self.remove_peer(self.slot(rank));
        let stream = self.connect_one(rank, address, secret, deadline, &|_| false)?;
        self.add_peer(rank, stream)
    }

    /// Forget peer `rank`'s connection (its slot, after a renumbering), if
    /// any, and everything buffered for it.
    pub fn remove_peer(&mut self, rank: u32) {
        if let Some(slot) = self.peers.get_mut(rank as usize) {
            if slot.take().is_some() {
                self.connected.retain(|connected| *connected != rank);
                self.rebuild_pollfds();
            }
        }
    }

    fn rebuild_pollfds(&mut self) {
        let pollfds = self
            .connected
            .iter()
            .map(|rank| libc::pollfd {
                fd: self.peers[*rank as usize]
                    .as_ref()
                    .expect("connected")
                    .stream
                    .as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        *self.pollfds.borrow_mut() = pollfds;
    }

    /// Accept the ranks of `waiting` on the listener until `deadline`,
    /// every handshake at once (see the module comment).
    fn accept_waiting(
        &mut self,
        mut waiting: Vec<u32>,
        secret: &[u8],
        deadline: Instant,
        gone: &dyn Fn(u32) -> bool,
    ) -> Result<Vec<u32>, PathError> {
        self.listener.set_nonblocking(true)?;
        let mut pending: Vec<PendingHandshake> = Vec::new();
        let mut left_out = Vec::new();
        loop {
            waiting.retain(|&rank| {
                let dead = gone(rank);
                if dead {
                    left_out.push(rank);
                }
                !dead
            });
            if waiting.is_empty() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(PathError::Protocol(format!(
                    "timed out after {:?} waiting for ranks {waiting:?} to connect to rank {}",
                    self.connect_timeout, self.my_rank
                )));
            }
            pending.retain(|handshake| handshake.expires_at > now);
            let wake_at = pending
                .iter()
                .map(|handshake| handshake.expires_at)
                .fold(deadline, Instant::min);
            let mut pollfds: Vec<libc::pollfd> = std::iter::once(self.listener.as_raw_fd())
                .chain(pending.iter().map(|handshake| handshake.stream.as_raw_fd()))
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // At most GONE_POLL between looks at `gone`.
            let timeout_ms = wake_at
                .saturating_duration_since(now)
                .min(GONE_POLL)
                .as_millis()
                .clamp(1, i32::MAX as u128) as libc::c_int;
            // SAFETY: `pollfds` is a live array of pollfd and its length is
            // passed with it.
            let status = unsafe {
                libc::poll(
                    pollfds.as_mut_ptr(),
                    pollfds.len() as libc::nfds_t,
                    timeout_ms,
                )
            };
            if status < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return Err(error.into());
            }
            // Handshakes first, while `pending` still matches `pollfds`;
            // from the back, so that removing one keeps the others' places.
            for index in (0..pending.len()).rev() {
                if pollfds[index + 1].revents == 0 {
                    continue;
                }
                match pending[index].handle_readable(self.my_rank, &waiting, secret) {
                    HandshakeStep::Waiting => {}
                    HandshakeStep::Dropped => {
                        pending.swap_remove(index);
                    }
                    HandshakeStep::Proven(rank) => {
                        let handshake = pending.swap_remove(index);
                        waiting.retain(|waiting_rank| *waiting_rank != rank);
                        self.add_peer(rank, handshake.stream)?;
                    }
                }
            }
            if pollfds[0].revents != 0 {
                self.accept_pending(&mut pending)?;
            }
        }
        Ok(left_out)
    }

    /// Takes every connection the listener holds into `pending`, each with
    /// its own deadline; past [`UNPROVEN_CONNECTIONS_MAX`] the oldest go.
    fn accept_pending(&self, pending: &mut Vec<PendingHandshake>) -> Result<(), PathError> {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    pending.push(PendingHandshake {
                        stream,
                        expires_at: Instant::now() + HANDSHAKE_TIMEOUT,
                        received: Vec::with_capacity(HELLO_BYTES),
                        claimed: None,
                    });
                    if pending.len() > UNPROVEN_CONNECTIONS_MAX {
                        let oldest = pending
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, handshake)| handshake.expires_at)
                            .map(|(index, _)| index)
                            .expect("not empty");
                        pending.swap_remove(oldest);
                    }
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(error)
                    if matches!(
                        error.kind(),
                        ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                    ) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }

    fn is_connected(&self, rank: u32) -> bool {
        matches!(self.peers.get(rank as usize), Some(Some(_)))
    }

    fn connect_one(
        &self,
        rank: u32,
        address: &str,
        secret: &[u8],
        deadline: Instant,
        gone: &dyn Fn(u32) -> bool,
    ) -> Result<TcpStream, PathError> {
        let socket_address = address
            .to_socket_addrs()
            .map_err(|error| {
                PathError::Protocol(format!("bad address {address:?} for rank {rank}: {error}"))
            })?
            .next()
            .ok_or_else(|| {
                PathError::Protocol(format!(
                    "address {address:?} of rank {rank} resolves to nothing"
                ))
            })?;
        let mut backoff = Duration::from_millis(5);
        let mut last_problem: Option<String> = None;
        loop {
            if gone(rank) {
                return Err(PathError::PeerClosed(rank));
            }
            let now = Instant::now();
            if now >= deadline {
                let last = last_problem
                    .map(|problem| format!(" (last try: {problem})"))
                    .unwrap_or_default();
                return Err(PathError::Protocol(format!(
                    "timed out after {:?} connecting to rank {rank} at {address}{last}",
                    self.connect_timeout
                )));
            }
            let problem = match TcpStream::connect_timeout(&socket_address, deadline - now) {
                Ok(stream) => {
                    match connect_handshake(&stream, self.my_rank, rank, secret, deadline) {
                        Ok(()) => return Ok(stream),
                        // Stalled (the acceptor busy, or not accepting
                        // yet), reset or closed (a flood pushed us out):
                        // a new connection may well get through.
                        Err(PathError::Io(error)) => error.to_string(),
                        // A wrong proof or another rank at the address: no
                        // retry changes that.
                        Err(error) => return Err(error),
                    }
                }
                Err(error)
                    if matches!(
                        error.kind(),
                        ErrorKind::ConnectionRefused | ErrorKind::Interrupted | ErrorKind::TimedOut
                    ) =>
                {
                    error.to_string()
                }
                Err(error) => {
                    return Err(PathError::Io(std::io::Error::new(
                        error.kind(),
                        format!("connecting to rank {rank} at {address}: {error}"),
                    )))
                }
            };
            last_problem = Some(problem);
            std::thread::sleep(backoff.min(deadline.saturating_duration_since(Instant::now())));
            backoff = (backoff * 2).min(Duration::from_millis(200));
        }
    }

    /// In a replica forked by a substitute (replication's recovery): the
    /// process the wire calls `r` is peer `slot_of[r]` of this path from
    /// now on, for the connections made so far and those made later (the
    /// handshakes still name wire numbers). Used once, right after the
    /// forked process's wire-up.
    pub fn renumber(&mut self, slot_of: Vec<u32>) {
        let mut peers: Vec<Option<TcpPeer>> = Vec::new();
        peers.resize_with(self.peers.len().max(slot_of.len()), || None);
        for rank in std::mem::take(&mut self.connected) {
            let slot = slot_of[rank as usize];
            let mut peer = self.peers[rank as usize].take();
            if let Some(peer) = peer.as_mut() {
                peer.rank = slot;
            }
            peers[slot as usize] = peer;
            self.connected.push(slot);
        }
        self.connected.sort_unstable();
        self.peers = peers;
        self.slot_of = Some(slot_of);
        self.rebuild_pollfds();
    }

    /// The peer slot of the process the wire calls `rank` (the same
    /// unless [`TcpPath::renumber`]ed).
    fn slot(&self, rank: u32) -> u32 {
        self.slot_of
            .as_ref()
            .map_or(rank, |slot_of| slot_of[rank as usize])
    }

    fn add_peer(&mut self, rank: u32, stream: TcpStream) -> Result<(), PathError> {
        let rank = self.slot(rank);
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(None)?;
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        raise_socket_buffers(stream.as_raw_fd());
        if self.peers.len() <= rank as usize {
            self.peers.resize_with(rank as usize + 1, || None);
        }
        self.peers[rank as usize] = Some(TcpPeer {
            rank,
            stream,
            send_buffer: Vec::new(),
            send_start: 0,
            receive_buffer: vec![0; RECEIVE_BUFFER_INITIAL_BYTES],
            receive_start: 0,
            receive_end: 0,
            placing: None,
            closed: false,
            send_closed: false,
        });
        self.connected.push(rank);
        self.connected.sort_unstable();
        self.rebuild_pollfds();
        Ok(())
    }

    /// The listening socket's descriptor.
    pub fn listener_fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }

    /// Raw socket descriptors of the connected peers, in rank order, so a
    /// caller can wait on them together with other descriptors.
    pub fn fds(&self) -> Vec<RawFd> {
        self.connected
            .iter()
            .filter_map(|rank| self.peers[*rank as usize].as_ref())
            .map(|peer| peer.stream.as_raw_fd())
            .collect()
    }

    /// Whether some peer has buffered output (then a waiter should also wake
    /// on POLLOUT and call `flush`).
    pub fn has_pending_output(&self) -> bool {
        self.peers
            .iter()
            .flatten()
            .any(|peer| !peer.closed && peer.send_start < peer.send_buffer.len())
    }

    /// Ranks connected over this path, in rank order.
    pub fn peer_ranks(&self) -> &[u32] {
        &self.connected
    }

    /// Sleep until a socket is readable (or writable, where output is
    /// buffered), or `timeout_us` passed.
    pub fn wait(&self, timeout_us: u64) -> Result<(), PathError> {
        let mut pollfds = self.pollfds.borrow_mut();
        for (pollfd, rank) in pollfds.iter_mut().zip(&self.connected) {
            let peer = self.peers[*rank as usize].as_ref().expect("connected");
            pollfd.fd = if peer.closed {
                -1
            } else {
                peer.stream.as_raw_fd()
            };
            pollfd.events = libc::POLLIN;
            if peer.send_start < peer.send_buffer.len() {
                pollfd.events |= libc::POLLOUT;
            }
            pollfd.revents = 0;
        }
        let timeout = libc::timespec {
            tv_sec: (timeout_us / 1_000_000) as libc::time_t,
            tv_nsec: ((timeout_us % 1_000_000) * 1000) as libc::c_long,
        };
        // SAFETY: `pollfds` is a live array of initialized pollfd structs
        // and its length is passed with it; the timeout is a valid timespec.
        let status = unsafe {
            libc::ppoll(
                pollfds.as_mut_ptr(),
                pollfds.len() as libc::nfds_t,
                &timeout,
                std::ptr::null(),
            )
        };
        if status < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() != ErrorKind::Interrupted {
                return Err(error.into());
            }
        }
        Ok(())
    }

    fn peer_mut(&mut self, rank: u32) -> Result<&mut TcpPeer, PathError> {
        match self.peers.get_mut(rank as usize) {
            Some(Some(peer)) if peer.closed => Err(PathError::PeerClosed(rank)),
            Some(Some(peer)) => Ok(peer),
            _ => Err(PathError::Protocol(format!(
                "rank {rank} is not a TCP peer"
            ))),
        }
    }
}

/// Whether `error` means the connection is gone (closed or reset by the
/// peer).
fn connection_gone(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::BrokenPipe
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::UnexpectedEof
            | ErrorKind::NotConnected
    )
}

impl TcpPeer {
    fn pending_send_bytes(&self) -> usize {
        self.send_buffer.len() - self.send_start
    }

    /// Mark the peer closed if `error` means the connection is gone.
    fn classify(&mut self, error: std::io::Error) -> PathError {
        if connection_gone(&error) {
            self.closed = true;
            PathError::PeerClosed(self.rank)
        } else {
            PathError::Io(error)
        }
    }

    /// Send `parts` with one `sendmsg`; returns bytes the kernel took (0 when
    /// it would block). A connection found gone takes everything (dropped:
    /// see `send_closed`).
    fn send_vectored(&mut self, parts: &[&[u8]]) -> Result<usize, PathError> {
        let total: usize = parts.iter().map(|part| part.len()).sum();
        if self.send_closed {
            return Ok(total);
        }
        let mut iovecs = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 2];
        let mut count = 0;
        for part in parts.iter().filter(|part| !part.is_empty()) {
            iovecs[count] = libc::iovec {
                iov_base: part.as_ptr() as *mut libc::c_void,
                iov_len: part.len(),
            };
            count += 1;
        }
        if count == 0 {
            return Ok(0);
        }
        loop {
            // SAFETY: msghdr is plain old data; zeroed is a valid "no
            // address, no control data" header.
            let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
            message.msg_iov = iovecs.as_mut_ptr();
            message.msg_iovlen = count as _;
            // SAFETY: the iovecs point into slices that live across the call
            // and the kernel only reads them; MSG_NOSIGNAL turns a closed
            // peer into EPIPE instead of SIGPIPE.
            let sent = unsafe {
                libc::sendmsg(
                    self.stream.as_raw_fd(),
                    &message,
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if sent >= 0 {
                return Ok(sent as usize);
            }
            let error = std::io::Error::last_os_error();
            match error.kind() {
                ErrorKind::Interrupted => continue,
                ErrorKind::WouldBlock => return Ok(0),
                // The read side reports it, after the last frames.
                _ if connection_gone(&error) => {
                    self.send_closed = true;
                    return Ok(total);
                }
                _ => return Err(PathError::Io(error)),
            }
        }
    }

    /// Push buffered bytes until the kernel stops taking them.
    fn flush(&mut self) -> Result<(), PathError> {
        while self.send_start < self.send_buffer.len() {
            let pending = std::mem::take(&mut self.send_buffer);
            let result = self.send_vectored(&[&pending[self.send_start..]]);
            self.send_buffer = pending;
            let sent = result?;
            if sent == 0 {
                return Ok(());
            }
            self.send_start += sent;
        }
        self.send_buffer.clear();
        self.send_start = 0;
        Ok(())
    }

    /// Append bytes to the send buffer, compacting it first when at least
    /// half of it is already sent (so compaction is amortized).
    fn buffer(&mut self, parts: &[&[u8]]) {
        if self.send_start > 0 && self.send_start * 2 >= self.send_buffer.len() {
            self.send_buffer.drain(..self.send_start);
            self.send_start = 0;
        }
        for part in parts {
            self.send_buffer.extend_from_slice(part);
        }
    }

    fn try_send(
        &mut self,
        header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> Result<bool, PathError> {
        let frame_bytes = HEADER_LEN_BYTES + payload.len();
        if self.pending_send_bytes() > 0 {
            self.flush()?;
        }
        let pending = self.pending_send_bytes();
        if pending == 0 {
            let sent = self.send_vectored(&[header, payload])?;
            if sent < HEADER_LEN_BYTES {
                self.buffer(&[&header[sent..], payload]);
            } else if sent < frame_bytes {
                self.buffer(&[&payload[sent - HEADER_LEN_BYTES..]]);
            }
            return Ok(true);
        }
        if pending + frame_bytes > SEND_BUFFER_LIMIT_BYTES {
            return Ok(false);
        }
        self.buffer(&[header, payload]);
        Ok(true)
    }

    /// Read what has arrived: hand whole frames to `receiver`, and read the
    /// payload of a frame it places straight into its destination.
    fn receive<R: Receiver>(&mut self, receiver: &mut R) -> Result<usize, PathError> {
        let mut delivered = 0;
        let mut receives = 0;
        let mut placed_receives = 0;
        // A read that returned less than it was offered emptied the socket;
        // another would only cost a syscall to learn EAGAIN.
        let mut drained = false;
        loop {
            if self.placing.is_some() {
                if drained || placed_receives >= PLACED_RECEIVES_PER_PEER_PER_POLL {
                    return Ok(delivered);
                }
                placed_receives += 1;
                match self.read_placed(receiver)? {
                    PlacedRead::WouldBlock => return Ok(delivered),
                    PlacedRead::Read { drained: emptied } => drained = emptied,
                }
                if self.placing.is_some() {
                    continue;
                }
                delivered += 1;
            }
            // Deliver every whole frame already buffered.
            while self.receive_end - self.receive_start >= HEADER_LEN_BYTES {
                let buffered = &self.receive_buffer[self.receive_start..self.receive_end];
                let header = FrameHeader::parse(buffered).map_err(|error| {
                    PathError::Protocol(format!(
                        "bad frame from rank {} over TCP: {error}",
                        self.rank
                    ))
                })?;
                let payload_bytes = header.payload_len as usize;
                if payload_bytes > MAX_PAYLOAD_BYTES {
                    return Err(PathError::Protocol(format!(
                        "frame of {payload_bytes} payload bytes from rank {} exceeds the TCP limit of {MAX_PAYLOAD_BYTES}",
                        self.rank
                    )));
                }
                let frame_bytes = HEADER_LEN_BYTES + payload_bytes;
                if buffered.len() < frame_bytes {
                    if frame_bytes - buffered.len() >= PLACEMENT_MIN_PAYLOAD_BYTES
                        && self.start_placing(receiver, payload_bytes)
                    {
                        break;
                    }
                    self.make_room_for(frame_bytes);
                    break;
                }
                receiver.frame(self.rank, &buffered[..frame_bytes]);
                self.receive_start += frame_bytes;
                delivered += 1;
                if delivered >= FRAMES_PER_PEER_PER_POLL {
                    return Ok(delivered);
                }
            }
            if self.placing.is_some() {
                continue;
            }
            if self.receive_start == self.receive_end {
                self.receive_start = 0;
                self.receive_end = 0;
            } else if self.receive_end == self.receive_buffer.len() {
                self.make_room_for(HEADER_LEN_BYTES);
            }
            if drained || receives >= RECEIVES_PER_PEER_PER_POLL {
                return Ok(delivered);
            }
            receives += 1;
            // With no partial frame buffered, ask for a modest amount: a
            // large payload behind the next header is better placed than
            // read here and copied out.
            let partial = self.receive_end > self.receive_start;
            let space = self.receive_buffer.len() - self.receive_end;
            let offered = if partial {
                space
            } else {
                space.min(GENEROUS_READ_BYTES)
            };
            let read_end = self.receive_end + offered;
            match self
                .stream
                .read(&mut self.receive_buffer[self.receive_end..read_end])
            {
                Ok(0) => {
                    self.closed = true;
                    return Err(PathError::PeerClosed(self.rank));
                }
                Ok(received) => {
                    self.receive_end += received;
                    drained = received < offered;
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(delivered),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(self.classify(error)),
            }
        }
    }

    /// The frame at `receive_start` has a header but not all its payload:
    /// if `receiver` places it, copy the payload bytes already buffered to
    /// the placement and read the rest there from now on. The buffer is
    /// then empty. Whether it was placed.
    fn start_placing<R: Receiver>(&mut self, receiver: &mut R, payload_bytes: usize) -> bool {
        let header: [u8; HEADER_LEN_BYTES] = self.receive_buffer
            [self.receive_start..self.receive_start + HEADER_LEN_BYTES]
            .try_into()
            .expect("a whole header is buffered");
        let Some(placement) = receiver.place(self.rank, &header, false) else {
            return false;
        };
        let buffered =
            &self.receive_buffer[self.receive_start + HEADER_LEN_BYTES..self.receive_end];
        debug_assert!(buffered.len() < payload_bytes);
        // SAFETY: the placement holds `payload_bytes` writable bytes until
        // we next call the receiver (its contract), and fewer are buffered.
        let destination =
            unsafe { std::slice::from_raw_parts_mut(placement.start, buffered.len()) };
        let crc = if placement.checksum {
            Some(Crc32c::new().copy_and_update(destination, buffered))
        } else {
            destination.copy_from_slice(buffered);
            None
        };
        self.placing = Some(Placing {
            header,
            payload_bytes,
            done_bytes: buffered.len(),
            crc,
            abandoned: false,
        });
        self.receive_start = 0;
        self.receive_end = 0;
        true
    }

    /// One `readv` of the placed payload's next bytes (into its placement,
    /// asked for again first, or into scratch once abandoned) and of the
    /// header that follows it (into the empty reassembly buffer). Reports
    /// the frame to `receiver` when its payload is complete.
    fn read_placed<R: Receiver>(&mut self, receiver: &mut R) -> Result<PlacedRead, PathError> {
        let placing = self.placing.as_mut().expect("a frame is being placed");
        debug_assert_eq!(self.receive_end, 0);
        let remaining = placing.payload_bytes - placing.done_bytes;
        if !placing.abandoned {
            match receiver.place(self.rank, &placing.header, true) {
                Some(placement) => {
                    let next_header = &mut self.receive_buffer[..HEADER_LEN_BYTES];
                    let iovecs = [
                        libc::iovec {
                            // SAFETY: `done_bytes < payload_bytes`, inside
                            // the placement.
                            iov_base: unsafe { placement.start.add(placing.done_bytes) }
                                as *mut libc::c_void,
                            iov_len: remaining,
                        },
                        libc::iovec {
                            iov_base: next_header.as_mut_ptr() as *mut libc::c_void,
                            iov_len: HEADER_LEN_BYTES,
                        },
                    ];
                    // SAFETY: the first iovec is the placement's unwritten
                    // rest, valid for writes until we next call the receiver
                    // (below, after the read); the second is our own buffer.
                    let got = match unsafe { read_vectored(&self.stream, &iovecs) } {
                        Ok(Some(got)) => got,
                        Ok(None) => return Ok(PlacedRead::WouldBlock),
                        Err(error) => return Err(self.classify(error)),
                    };
                    if got == 0 {
                        self.closed = true;
                        return Err(PathError::PeerClosed(self.rank));
                    }
                    let placing = self.placing.as_mut().expect("a frame is being placed");
                    let payload_got = got.min(remaining);
                    if let Some(crc) = placing.crc.as_mut() {
                        // SAFETY: these bytes of the placement were just
                        // written by the kernel; the placement is still valid.
                        let written = unsafe {
                            std::slice::from_raw_parts(
                                placement.start.add(placing.done_bytes),
                                payload_got,
                            )
                        };
                        *crc = crc.update(written);
                    }
                    placing.done_bytes += payload_got;
                    self.receive_end = got - payload_got;
                    let drained = got < remaining + HEADER_LEN_BYTES;
                    self.finish_placing_if_done(receiver);
                    return Ok(PlacedRead::Read { drained });
                }
                None => placing.abandoned = true,
            }
        }
        // Abandoned: read the rest of the payload into scratch, to drop it.
        let scratch_bytes = remaining.min(self.receive_buffer.len());
        let got = match self.stream.read(&mut self.receive_buffer[..scratch_bytes]) {
            Ok(0) => {
                self.closed = true;
                return Err(PathError::PeerClosed(self.rank));
            }
            Ok(got) => got,
            Err(error) if error.kind() == ErrorKind::WouldBlock => {
                return Ok(PlacedRead::WouldBlock)
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => 0,
            Err(error) => return Err(self.classify(error)),
        };
        self.placing
            .as_mut()
            .expect("a frame is being placed")
            .done_bytes += got;
        self.finish_placing_if_done(receiver);
        Ok(PlacedRead::Read {
            drained: got < scratch_bytes,
        })
    }

    /// Report the placed frame to `receiver` once all its payload is read.
    fn finish_placing_if_done<R: Receiver>(&mut self, receiver: &mut R) {
        if self
            .placing
            .as_ref()
            .is_some_and(|placing| placing.done_bytes == placing.payload_bytes)
        {
            let placing = self.placing.take().expect("checked above");
            let placed = if placing.abandoned {
                Placed::Lost
            } else {
                Placed::Whole {
                    payload_crc: placing.crc.map_or(0, Crc32c::finish),
                }
            };
            receiver.placed(self.rank, &placing.header, placed);
        }
    }

    /// Make sure a frame of `frame_bytes` starting at `receive_start` fits
    /// in the buffer: grow it (bounded) or move the partial frame to the front.
    fn make_room_for(&mut self, frame_bytes: usize) {
        if frame_bytes > self.receive_buffer.len() {
            let length = (self.receive_buffer.len() * 2)
                .max(frame_bytes)
                .min(RECEIVE_BUFFER_MAX_BYTES);
            self.receive_buffer.resize(length, 0);
        }
        if self.receive_start + frame_bytes > self.receive_buffer.len() {
            self.receive_buffer
                .copy_within(self.receive_start..self.receive_end, 0);
            self.receive_end -= self.receive_start;
            self.receive_start = 0;
        }
    }
}

impl Path for TcpPath {
    fn try_send(
        &mut self,
        peer: u32,
        header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> Result<bool, PathError> {
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(PathError::Protocol(format!(
                "payload of {} bytes exceeds the TCP limit of {MAX_PAYLOAD_BYTES}",
                payload.len()
            )));
        }
        self.peer_mut(peer)?.try_send(header, payload)
    }

    fn poll<F: FnMut(u32, &[u8])>(&mut self, handler: F) -> Result<usize, PathError> {
        self.poll_placing(&mut WholeFrames(handler))
    }

    fn poll_placing<R: Receiver>(&mut self, receiver: &mut R) -> Result<usize, PathError> {
        if self.connected.is_empty() {
            return Ok(0);
        }
        let direct = self.connected.len() <= DIRECT_RECEIVE_PEER_LIMIT;
        if !direct {
            let mut pollfds = self.pollfds.borrow_mut();
            for (pollfd, rank) in pollfds.iter_mut().zip(&self.connected) {
                let peer = self.peers[*rank as usize].as_ref().expect("connected");
                pollfd.fd = if peer.closed {
                    -1
                } else {
                    peer.stream.as_raw_fd()
                };
                pollfd.events = libc::POLLIN;
                pollfd.revents = 0;
            }
            // One syscall tells which of many sockets have input.
            // SAFETY: live array of initialized pollfds, with its length.
            let status =
                unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, 0) };
            if status < 0 {
                let error = std::io::Error::last_os_error();
                return if error.kind() == ErrorKind::Interrupted {
                    Ok(0)
                } else {
                    Err(error.into())
                };
            }
        }
        let mut delivered = 0;
        for index in 0..self.connected.len() {
            let rank = self.connected[index];
            let revents = if direct {
                0
            } else {
                self.pollfds.borrow()[index].revents
            };
            let peer = self.peers[rank as usize].as_mut().expect("connected");
            if peer.closed {
                continue;
            }
            if direct
                || peer.receive_end - peer.receive_start >= HEADER_LEN_BYTES
                || revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
            {
                delivered += peer.receive(receiver)?;
            }
            if peer.pending_send_bytes() > 0 {
                peer.flush()?;
            }
        }
        Ok(delivered)
    }

    fn flush(&mut self) -> Result<(), PathError> {
        for peer in self.peers.iter_mut().flatten() {
            if !peer.closed && peer.pending_send_bytes() > 0 {
                peer.flush()?;
            }
        }
        Ok(())
    }

    fn max_payload_bytes(&self) -> usize {
        MAX_PAYLOAD_BYTES
    }
}

/// Ask for big socket buffers, but only when the system maximum allows them:
/// setting SO_SNDBUF/SO_RCVBUF turns off the kernel's autotuning, and a
/// request capped at a small `*mem_max` would leave smaller buffers than
/// autotuning gives.
fn raise_socket_buffers(fd: RawFd) {
    let allowed = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse::<usize>().ok())
            .is_some_and(|maximum| maximum >= SOCKET_BUFFER_BYTES)
    };
    let size = SOCKET_BUFFER_BYTES as libc::c_int;
    for (option, path) in [
        (libc::SO_SNDBUF, "/proc/sys/net/core/wmem_max"),
        (libc::SO_RCVBUF, "/proc/sys/net/core/rmem_max"),
    ] {
        if allowed(path) {
            // SAFETY: setsockopt with a pointer to a live c_int and its size.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    option,
                    &size as *const libc::c_int as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
    }
}

/// One nonblocking `readv` into `iovecs`: `Ok(None)` when nothing waits;
/// retried on EINTR.
///
/// # Safety
/// Every iovec must describe memory writable for the whole call.
unsafe fn read_vectored(
    stream: &TcpStream,
    iovecs: &[libc::iovec],
) -> std::io::Result<Option<usize>> {
    loop {
        // SAFETY: by the caller's promise the iovecs describe writable
        // memory; the kernel writes only inside them.
        let got = unsafe {
            libc::readv(
                stream.as_raw_fd(),
                iovecs.as_ptr(),
                iovecs.len() as libc::c_int,
            )
        };
        if got >= 0 {
            return Ok(Some(got as usize));
        }
        let error = std::io::Error::last_os_error();
        match error.kind() {
            ErrorKind::Interrupted => continue,
            ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(error),
        }
    }
}

fn random_nonce() -> Result<[u8; NONCE_BYTES], PathError> {
    let mut nonce = [0u8; NONCE_BYTES];
    crate::fill_random(&mut nonce)?;
    Ok(nonce)
}

/// SHA-256 over a domain tag, the prover's role, the secret (length
/// prefixed), the verifier's nonce and the prover's rank.
fn proof(
    secret: &[u8],
    nonce: &[u8; NONCE_BYTES],
    prover_rank: u32,
    role: u8,
) -> [u8; PROOF_BYTES] {
    let mut hasher = Sha256::new();
    hasher.update(b"resmpi-tcp-handshake-v1");
    hasher.update([role]);
    hasher.update((secret.len() as u64).to_le_bytes());
    hasher.update(secret);
    hasher.update(nonce);
    hasher.update(prover_rank.to_le_bytes());
    hasher.finalize().into()
}

/// Compare without an early exit, so timing says nothing about the proof.
fn proofs_equal(left: &[u8; PROOF_BYTES], right: &[u8; PROOF_BYTES]) -> bool {
    left.iter()
        .zip(right)
        .fold(0u8, |difference, (a, b)| difference | (a ^ b))
        == 0
}

fn encode_hello(rank: u32, nonce: &[u8; NONCE_BYTES]) -> [u8; HELLO_BYTES] {
    let mut hello = [0u8; HELLO_BYTES];
    hello[0..4].copy_from_slice(&HANDSHAKE_MAGIC);
    hello[4..8].copy_from_slice(&HANDSHAKE_VERSION.to_le_bytes());
    hello[8..12].copy_from_slice(&rank.to_le_bytes());
    hello[16..].copy_from_slice(nonce);
    hello
}

fn decode_hello(hello: &[u8; HELLO_BYTES]) -> Result<(u32, [u8; NONCE_BYTES]), PathError> {
    if hello[0..4] != HANDSHAKE_MAGIC {
        return Err(PathError::Protocol(
            "TCP handshake: not a resmpi peer".into(),
        ));
    }
    let version = u32::from_le_bytes(hello[4..8].try_into().expect("4 bytes"));
    if version != HANDSHAKE_VERSION {
        return Err(PathError::Protocol(format!(
            "TCP handshake: unsupported version {version}"
        )));
    }
    let rank = u32::from_le_bytes(hello[8..12].try_into().expect("4 bytes"));
    Ok((rank, hello[16..].try_into().expect("nonce bytes")))
}

/// Sets the handshake's read and write timeouts; returns the limit set.
fn set_handshake_timeouts(stream: &TcpStream, deadline: Instant) -> Result<Duration, PathError> {
    let limit = deadline
        .saturating_duration_since(Instant::now())
        .min(HANDSHAKE_TIMEOUT)
        .max(Duration::from_millis(1));
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(limit))?;
    stream.set_write_timeout(Some(limit))?;
    Ok(limit)
}

/// Connector side: we are `my_rank`, the acceptor must be `peer_rank`.
fn connect_handshake(
    mut stream: &TcpStream,
    my_rank: u32,
    peer_rank: u32,
    secret: &[u8],
    deadline: Instant,
) -> Result<(), PathError> {
    let limit = set_handshake_timeouts(stream, deadline)?;
    let context = |error: std::io::Error| {
        let reason = match error.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                format!("timed out after {limit:?} waiting for its answer")
            }
            _ => error.to_string(),
        };
        PathError::Io(std::io::Error::new(
            error.kind(),
            format!("TCP handshake with rank {peer_rank}: {reason}"),
        ))
    };
    let my_nonce = random_nonce()?;
    stream
        .write_all(&encode_hello(my_rank, &my_nonce))
        .map_err(context)?;
    let mut reply = [0u8; HELLO_BYTES + PROOF_BYTES];
    stream.read_exact(&mut reply).map_err(context)?;
    let (their_rank, their_nonce) =
        decode_hello(reply[..HELLO_BYTES].try_into().expect("hello bytes"))?;
    if their_rank != peer_rank {
        return Err(PathError::Protocol(format!(
            "TCP handshake: expected rank {peer_rank} at that address, found rank {their_rank}"
        )));
    }
    let their_proof: [u8; PROOF_BYTES] = reply[HELLO_BYTES..].try_into().expect("proof bytes");
    if !proofs_equal(
        &their_proof,
        &proof(secret, &my_nonce, peer_rank, ROLE_ACCEPTOR),
    ) {
        return Err(PathError::Protocol(format!(
            "TCP handshake: rank {peer_rank} failed to prove the job secret (different job, or wrong secret)"
        )));
    }
    stream
        .write_all(&proof(secret, &their_nonce, my_rank, ROLE_CONNECTOR))
        .map_err(context)?;
    let mut verdict = [0u8; 1];
    stream.read_exact(&mut verdict).map_err(context)?;
    if verdict[0] != VERDICT_ACCEPTED {
        return Err(PathError::Protocol(format!(
            "TCP handshake: rank {peer_rank} rejected our proof"
        )));
    }
    Ok(())
}

/// Acceptor side of one handshake, driven by readiness: the connector's
/// hello, then its proof. The answers are a few dozen bytes on a fresh
/// connection, which the kernel always takes at once; a connection whose
/// answer does not fit is dropped.
struct PendingHandshake {
    stream: TcpStream,
    /// When the connection is dropped if it has not proved itself.
    expires_at: Instant,
    /// What has arrived of the hello, then of the proof.
    received: Vec<u8>,
    /// After the hello: the rank the connector claims and our nonce.
    claimed: Option<(u32, [u8; NONCE_BYTES])>,
}

/// What one readiness event did to a [`PendingHandshake`].
enum HandshakeStep {
    /// More bytes are needed.
    Waiting,
    /// The connector proved the secret for this rank, one of those waited for.
    Proven(u32),
    /// A stranger, a wrong proof, a rank not waited for, or a connection
    /// closed: forget it.
    Dropped,
}

impl PendingHandshake {
    fn handle_readable(&mut self, my_rank: u32, waiting: &[u32], secret: &[u8]) -> HandshakeStep {
        loop {
            let wanted_bytes = if self.claimed.is_none() {
                HELLO_BYTES
            } else {
                PROOF_BYTES
            };
            let mut chunk = [0u8; HELLO_BYTES];
            match self
                .stream
                .read(&mut chunk[..wanted_bytes - self.received.len()])
            {
                Ok(0) => return HandshakeStep::Dropped,
                Ok(count) => self.received.extend_from_slice(&chunk[..count]),
                Err(error) if error.kind() == ErrorKind::WouldBlock => {
                    return HandshakeStep::Waiting
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return HandshakeStep::Dropped,
            }
            if self.received.len() < wanted_bytes {
                continue;
            }
            let received = std::mem::take(&mut self.received);
            match self.claimed {
                None => {
                    let hello: [u8; HELLO_BYTES] = received.try_into().expect("hello bytes");
                    let Ok((their_rank, their_nonce)) = decode_hello(&hello) else {
                        return HandshakeStep::Dropped;
                    };
                    if !waiting.contains(&their_rank) {
                        return HandshakeStep::Dropped;
                    }
                    let Ok(my_nonce) = random_nonce() else {
                        return HandshakeStep::Dropped;
                    };
                    let mut reply = [0u8; HELLO_BYTES + PROOF_BYTES];
                    reply[..HELLO_BYTES].copy_from_slice(&encode_hello(my_rank, &my_nonce));
                    reply[HELLO_BYTES..].copy_from_slice(&proof(
                        secret,
                        &their_nonce,
                        my_rank,
                        ROLE_ACCEPTOR,
                    ));
                    if !write_whole(&self.stream, &reply) {
                        return HandshakeStep::Dropped;
                    }
                    self.claimed = Some((their_rank, my_nonce));
                }
                Some((their_rank, my_nonce)) => {
                    let their_proof: [u8; PROOF_BYTES] = received.try_into().expect("proof bytes");
                    let proven = proofs_equal(
                        &their_proof,
                        &proof(secret, &my_nonce, their_rank, ROLE_CONNECTOR),
                    );
                    // Another connection may have proved the same rank
                    // meanwhile (a retry): the first one stays.
                    if !proven || !waiting.contains(&their_rank) {
                        write_whole(&self.stream, &[VERDICT_REJECTED]);
                        return HandshakeStep::Dropped;
                    }
                    if !write_whole(&self.stream, &[VERDICT_ACCEPTED]) {
                        return HandshakeStep::Dropped;
                    }
                    return HandshakeStep::Proven(their_rank);
                }
            }
        }
    }
}

/// One nonblocking write of all of `bytes`; false if the kernel did not
/// take them all (never the case for a handshake's few bytes on a healthy
/// connection).
fn write_whole(mut stream: &TcpStream, bytes: &[u8]) -> bool {
    loop {
        match stream.write(bytes) {
            Ok(count) => return count == bytes.len(),
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
}

/// The secret of the handshake fuzzers: they play a stranger, who does
/// not know it.
const FUZZ_SECRET: &[u8] = b"resmpi-fuzz-secret";

/// A connected pair of loopback sockets (ours, the stranger's).
fn fuzz_socket_pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let stranger = TcpStream::connect(listener.local_addr()?)?;
    let (ours, _) = listener.accept()?;
    Ok((ours, stranger))
}

/// The acceptor's side of a handshake with a stranger who sends `bytes` and
/// closes (the decoder fuzzers' entry point, through `crate::fuzzing`):
/// true if the stranger was taken for a rank, which must never happen
/// without the secret. Rank 1 accepts, waiting for ranks 0 and 2.
pub(crate) fn fuzz_acceptor_handshake(bytes: &[u8]) -> std::io::Result<bool> {
    let (ours, mut stranger) = fuzz_socket_pair()?;
    ours.set_nonblocking(true)?;
    stranger.write_all(bytes)?;
    stranger.shutdown(std::net::Shutdown::Write)?;
    let mut handshake = PendingHandshake {
        stream: ours,
        expires_at: Instant::now() + HANDSHAKE_TIMEOUT,
        received: Vec::with_capacity(HELLO_BYTES),
        claimed: None,
    };
    // Everything was sent before: each call reads what is there; a few
    // rounds cover the kernel delivering it in pieces.
    for _ in 0..100 {
        match handshake.handle_readable(1, &[0, 2], FUZZ_SECRET) {
            HandshakeStep::Waiting => std::thread::sleep(Duration::from_micros(50)),
            HandshakeStep::Proven(_) => return Ok(true),
            HandshakeStep::Dropped => return Ok(false),
        }
    }
    Ok(false)
}

/// The connector's side of a handshake with a stranger who answers `bytes`
/// and closes (the decoder fuzzers' entry point): rank 0 connects to what
/// should be rank 1. Ok only if the stranger proved the secret, which it
/// cannot.
pub(crate) fn fuzz_connector_handshake(bytes: &[u8]) -> Result<(), PathError> {
    let (ours, mut stranger) = fuzz_socket_pair()?;
    stranger.write_all(bytes)?;
    stranger.shutdown(std::net::Shutdown::Write)?;
    connect_handshake(
        &ours,
        0,
        1,
        FUZZ_SECRET,
        Instant::now() + Duration::from_secs(2),
    )
}

/// A well-formed hello of `rank` (a seed for the handshake fuzzers).
pub(crate) fn fuzz_hello(rank: u32) -> Vec<u8> {
    encode_hello(rank, &[7u8; NONCE_BYTES]).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use resmpi_wire::FrameKind;
    use std::net::Ipv4Addr;

    const SECRET: &[u8] = b"job secret for tests";

    fn localhost() -> IpAddr {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }

    /// Bind `world_size` ranks, then connect them all in parallel threads.
    fn mesh(world_size: u32) -> Vec<TcpPath> {
        let bound: Vec<(TcpPath, String)> = (0..world_size)
            .map(|rank| TcpPath::bind(rank, localhost()).unwrap())
            .collect();
        let addresses: Vec<(u32, String)> = bound
            .iter()
            .enumerate()
            .map(|(rank, (_, address))| (rank as u32, address.clone()))
            .collect();
        let workers: Vec<_> = bound
            .into_iter()
            .map(|(mut path, _)| {
                let addresses = addresses.clone();
                std::thread::spawn(move || {
                    path.connect_all(&addresses, SECRET).unwrap();
                    path
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().unwrap())
            .collect()
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
        let mut header = FrameHeader::new(FrameKind::Data, source);
        header.seq = sequence;
        header.payload_len = payload_bytes as u32;
        header.to_bytes()
    }

    #[test]
    fn three_ranks_exchange_frames_of_all_sizes_up_to_the_limit() {
        const FRAMES_PER_PEER: u64 = 300;
        let paths = mesh(3);
        let workers: Vec<_> = paths
            .into_iter()
            .enumerate()
            .map(|(me, mut path)| {
                std::thread::spawn(move || {
                    let me = me as u32;
                    let peers: Vec<u32> = (0..3).filter(|rank| *rank != me).collect();
                    assert_eq!(path.peer_ranks(), &peers[..]);
                    let max_payload = path.max_payload_bytes();
                    // Larger than the path allows: refused, not sent.
                    let too_big = vec![0u8; 2 << 20];
                    assert!(matches!(
                        path.try_send(peers[0], &frame_header(me, 0, too_big.len()), &too_big),
                        Err(PathError::Protocol(_))
                    ));
                    let length_of = |sequence: u64| match sequence % 10 {
                        0 => 0,
                        1 => max_payload,
                        2 => (sequence as usize * 7919) % max_payload,
                        _ => (sequence as usize * 13) % 3000,
                    };
                    let mut next_to_send = [0u64; 3];
                    let mut next_expected = [0u64; 3];
                    let total = FRAMES_PER_PEER * 2;
                    let (mut sent, mut received) = (0, 0);
                    let mut payload = vec![0u8; max_payload];
                    while sent < total || received < total {
                        let mut progress = false;
                        for &peer in &peers {
                            let sequence = next_to_send[peer as usize];
                            if sequence == FRAMES_PER_PEER {
                                continue;
                            }
                            let length = length_of(sequence);
                            for (index, byte) in payload[..length].iter_mut().enumerate() {
                                *byte = payload_byte(me, sequence, index);
                            }
                            if path
                                .try_send(
                                    peer,
                                    &frame_header(me, sequence, length),
                                    &payload[..length],
                                )
                                .unwrap()
                            {
                                next_to_send[peer as usize] += 1;
                                sent += 1;
                                progress = true;
                            }
                        }
                        path.flush().unwrap();
                        let delivered = path
                            .poll(|from, frame| {
                                let header = FrameHeader::parse(frame).unwrap();
                                assert_eq!(header.source, from);
                                assert_eq!(header.seq, next_expected[from as usize]);
                                assert_eq!(
                                    frame.len(),
                                    resmpi_wire::HEADER_LEN_BYTES + length_of(header.seq)
                                );
                                for (index, byte) in
                                    frame[resmpi_wire::HEADER_LEN_BYTES..].iter().enumerate()
                                {
                                    assert_eq!(*byte, payload_byte(from, header.seq, index));
                                }
                                next_expected[from as usize] += 1;
                                received += 1;
                            })
                            .unwrap();
                        if delivered == 0 && !progress {
                            path.wait(10_000).unwrap();
                        }
                    }
                    // Everything received does not mean everything sent
                    // has left: what the kernel did not take yet is still
                    // in this path's send buffer, and the peers wait for it.
                    while path.has_pending_output() {
                        path.flush().unwrap();
                        path.wait(10_000).unwrap();
                    }
                    // Keep the socket open until the others are done reading.
                    path
                })
            })
            .collect();
        let finished: Vec<TcpPath> = workers
            .into_iter()
            .map(|worker| worker.join().unwrap())
            .collect();
        drop(finished);
    }

    #[test]
    fn connector_with_wrong_secret_is_dropped_and_real_peer_still_connects() {
        let (mut acceptor, address) = TcpPath::bind(0, localhost()).unwrap();
        acceptor.set_connect_timeout(Duration::from_secs(10));
        let peers = vec![(0, address.clone()), (1, "127.0.0.1:1".to_string())];
        let acceptor_thread =
            std::thread::spawn(move || acceptor.connect_all(&peers, SECRET).map(|()| acceptor));
        let (mut impostor, _) = TcpPath::bind(1, localhost()).unwrap();
        let error = impostor
            .connect_all(&[(0, address.clone())], b"not the secret")
            .unwrap_err();
        assert!(
            matches!(error, PathError::Protocol(ref text) if text.contains("failed to prove")),
            "{error}"
        );
        let (mut real, _) = TcpPath::bind(1, localhost()).unwrap();
        real.connect_all(&[(0, address)], SECRET).unwrap();
        let mut acceptor = acceptor_thread.join().unwrap().unwrap();
        assert!(real.try_send(0, &frame_header(1, 5, 3), b"abc").unwrap());
        real.flush().unwrap();
        let mut frames = Vec::new();
        while frames.is_empty() {
            acceptor.wait(100_000).unwrap();
            acceptor
                .poll(|peer, frame| frames.push((peer, frame.to_vec())))
                .unwrap();
        }
        assert_eq!(frames[0].0, 1);
        assert_eq!(&frames[0].1[resmpi_wire::HEADER_LEN_BYTES..], b"abc");
    }

    #[test]
    fn idle_and_flooding_strangers_do_not_hold_up_the_real_peers() {
        // Handled one at a time for up to HANDSHAKE_TIMEOUT each, 100
        // silent connections would hold rank 0 far past its deadline.
        const STRANGER_COUNT: usize = 100;
        let (mut acceptor, address) = TcpPath::bind(0, localhost()).unwrap();
        acceptor.set_connect_timeout(Duration::from_secs(20));
        let mut strangers: Vec<TcpStream> = (0..STRANGER_COUNT)
            .map(|_| TcpStream::connect(&address).unwrap())
            .collect();
        // Half a hello, then silence.
        strangers[0].write_all(&HANDSHAKE_MAGIC).unwrap();
        let peers = vec![
            (1, "127.0.0.1:1".to_string()),
            (2, "127.0.0.1:1".to_string()),
        ];
        let acceptor_thread =
            std::thread::spawn(move || acceptor.connect_all(&peers, SECRET).map(|()| acceptor));
        let connectors: Vec<_> = [1, 2]
            .into_iter()
            .map(|rank| {
                let address = address.clone();
                std::thread::spawn(move || {
                    let (mut path, _) = TcpPath::bind(rank, localhost()).unwrap();
                    path.set_connect_timeout(Duration::from_secs(20));
                    path.connect_all(&[(0, address)], SECRET).map(|()| path)
                })
            })
            .collect();
        for connector in connectors {
            let path = connector.join().unwrap().unwrap();
            assert_eq!(path.peer_ranks(), &[0]);
        }
        let acceptor = acceptor_thread.join().unwrap().unwrap();
        assert_eq!(acceptor.peer_ranks(), &[1, 2]);
        drop(strangers);
    }

    #[test]
    fn a_stalled_handshake_is_retried_and_a_lasting_one_is_named_a_timeout() {
        // A listener nobody serves: the kernel completes the connection,
        // and the hello is never answered.
        let silent = TcpListener::bind((localhost(), 0)).unwrap();
        let silent_address = silent.local_addr().unwrap().to_string();
        let (mut connector, _) = TcpPath::bind(1, localhost()).unwrap();
        connector.set_connect_timeout(Duration::from_millis(700));
        let error = connector
            .connect_all(&[(0, silent_address)], SECRET)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("timed out after")
                && error.contains("(last try: TCP handshake with rank 0: timed out after"),
            "{error}"
        );
        // Rank 0 starts accepting only after the connector's first
        // handshake has stalled past HANDSHAKE_TIMEOUT: the retry gets in.
        let (mut acceptor, address) = TcpPath::bind(0, localhost()).unwrap();
        acceptor.set_connect_timeout(Duration::from_secs(20));
        let connector_thread = std::thread::spawn(move || {
            let (mut path, _) = TcpPath::bind(1, localhost()).unwrap();
            path.set_connect_timeout(Duration::from_secs(20));
            path.connect_all(&[(0, address)], SECRET).map(|()| path)
        });
        std::thread::sleep(HANDSHAKE_TIMEOUT + Duration::from_millis(500));
        acceptor
            .connect_all(&[(1, "127.0.0.1:1".to_string())], SECRET)
            .unwrap();
        assert_eq!(connector_thread.join().unwrap().unwrap().peer_ranks(), &[0]);
    }

    #[test]
    fn acceptor_with_wrong_secret_is_refused_by_the_connector() {
        let (mut acceptor, address) = TcpPath::bind(0, localhost()).unwrap();
        acceptor.set_connect_timeout(Duration::from_millis(500));
        let peers = vec![(1, "127.0.0.1:1".to_string())];
        let acceptor_thread =
            std::thread::spawn(move || acceptor.connect_all(&peers, b"not the secret"));
        let (mut connector, _) = TcpPath::bind(1, localhost()).unwrap();
        let error = connector.connect_all(&[(0, address)], SECRET).unwrap_err();
        assert!(
            error.to_string().contains("failed to prove the job secret"),
            "{error}"
        );
        let error = acceptor_thread.join().unwrap().unwrap_err();
        assert!(error.to_string().contains("timed out"), "{error}");
    }

    #[test]
    fn a_peer_reported_gone_is_left_out_instead_of_waited_for() {
        // Rank 4 connects to a lower rank that refuses (nothing listens on
        // port 1) and waits for a higher one that never connects; both are
        // reported dead after 50 ms: left out, well before the timeout.
        let (mut path, _) = TcpPath::bind(4, localhost()).unwrap();
        path.set_connect_timeout(Duration::from_secs(30));
        let started = Instant::now();
        let gone = |_rank: u32| started.elapsed() > Duration::from_millis(50);
        let left_out = path
            .connect_all_but_gone(
                &[(3, "127.0.0.1:1".into()), (5, "127.0.0.1:1".into())],
                SECRET,
                &gone,
            )
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(left_out, vec![3, 5]);
        // Not reported gone: the same peers are an error at the deadline.
        let (mut path, _) = TcpPath::bind(4, localhost()).unwrap();
        path.set_connect_timeout(Duration::from_millis(200));
        assert!(path
            .connect_all_but_gone(&[(5, "127.0.0.1:1".into())], SECRET, &|_| false)
            .is_err());
    }

    #[test]
    fn missing_peer_times_out_with_a_clear_error() {
        let (mut path, _) = TcpPath::bind(0, localhost()).unwrap();
        path.set_connect_timeout(Duration::from_millis(200));
        let started = Instant::now();
        let error = path
            .connect_all(&[(3, "127.0.0.1:1".into())], SECRET)
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            error.to_string().contains("waiting for ranks [3]"),
            "{error}"
        );
        let (mut path, _) = TcpPath::bind(4, localhost()).unwrap();
        path.set_connect_timeout(Duration::from_millis(200));
        // Nothing listens on port 1: refused until the deadline.
        let error = path
            .connect_all(&[(3, "127.0.0.1:1".into())], SECRET)
            .unwrap_err();
        assert!(error.to_string().contains("timed out"), "{error}");
    }

    /// Polls `survivor` until a peer is reported gone: how many frames came
    /// first (each must carry `payload`), and the error.
    fn frames_until_closed(survivor: &mut TcpPath, payload: &[u8]) -> (usize, PathError) {
        let mut frames = 0;
        loop {
            match survivor.poll(|_, frame| {
                assert_eq!(&frame[resmpi_wire::HEADER_LEN_BYTES..], payload);
                frames += 1;
            }) {
                Ok(_) => survivor.wait(100_000).unwrap(),
                Err(error) => return (frames, error),
            }
        }
    }

    #[test]
    fn closed_peer_is_reported_after_its_last_frames() {
        let mut paths = mesh(2);
        let closer = paths.pop().unwrap();
        let mut survivor = paths.pop().unwrap();
        let mut closer = closer;
        assert!(closer.try_send(0, &frame_header(1, 0, 4), b"last").unwrap());
        closer.flush().unwrap();
        drop(closer);
        let (frames, error) = frames_until_closed(&mut survivor, b"last");
        assert_eq!(frames, 1);
        assert!(matches!(error, PathError::PeerClosed(1)), "{error}");
        assert!(matches!(
            survivor.try_send(1, &frame_header(0, 0, 0), &[]),
            Err(PathError::PeerClosed(1))
        ));
        // Later polls skip the closed peer instead of failing again.
        assert_eq!(survivor.poll(|_, _| ()).unwrap(), 0);
    }

    #[test]
    fn a_reset_found_by_a_send_still_delivers_the_peers_last_frames() {
        let mut paths = mesh(2);
        let closer = paths.pop().unwrap();
        let mut survivor = paths.pop().unwrap();
        let mut closer = closer;
        // The survivor's frame stays unread: the closer's exit resets the
        // connection instead of closing it.
        assert!(survivor
            .try_send(1, &frame_header(0, 0, 4), b"lost")
            .unwrap());
        survivor.flush().unwrap();
        assert!(closer.try_send(0, &frame_header(1, 0, 4), b"last").unwrap());
        closer.flush().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(closer);
        std::thread::sleep(Duration::from_millis(20));
        // The survivor sends first and finds the connection gone: no error
        // yet, its frame is dropped.
        for _ in 0..4 {
            assert!(survivor
                .try_send(1, &frame_header(0, 0, 1000), &[7; 1000])
                .unwrap());
            survivor.flush().unwrap();
        }
        let (frames, error) = frames_until_closed(&mut survivor, b"last");
        assert_eq!(frames, 1, "the closer's last frame");
        assert!(matches!(error, PathError::PeerClosed(1)), "{error}");
    }

    #[test]
    fn garbage_on_the_stream_is_a_protocol_error() {
        let mut paths = mesh(2);
        let mut garbage = [0u8; resmpi_wire::HEADER_LEN_BYTES];
        garbage[0] = 0xff;
        (&paths[1].peers[0].as_ref().unwrap().stream)
            .write_all(&garbage)
            .unwrap();
        let result = loop {
            match paths[0].poll(|_, _| panic!("no frame expected")) {
                Ok(0) => paths[0].wait(100_000).unwrap(),
                other => break other,
            }
        };
        assert!(
            matches!(result, Err(PathError::Protocol(ref text)) if text.contains("bad magic")),
            "{result:?}"
        );
    }

    /// Places the payload of every data frame into `destination` while
    /// `willing`, records what `placed` says, and collects whole frames.
    struct PlacingReceiver {
        destination: Vec<u8>,
        willing: bool,
        place_calls: usize,
        placed: Vec<Placed>,
        frames: Vec<Vec<u8>>,
    }

    // SAFETY: the placement is `destination`, which holds every payload
    // sent in these tests and lives as long as the receiver.
    unsafe impl Receiver for PlacingReceiver {
        fn frame(&mut self, _peer: u32, frame: &[u8]) {
            self.frames.push(frame.to_vec());
        }

        fn place(
            &mut self,
            _peer: u32,
            header: &[u8; HEADER_LEN_BYTES],
            _resumed: bool,
        ) -> Option<Placement> {
            let header = FrameHeader::parse(header).unwrap();
            assert!(header.payload_len as usize <= self.destination.len());
            self.place_calls += 1;
            (self.willing && header.kind == FrameKind::Data).then_some(Placement {
                start: self.destination.as_mut_ptr(),
                checksum: true,
            })
        }

        fn placed(&mut self, _peer: u32, _header: &[u8; HEADER_LEN_BYTES], placed: Placed) {
            self.placed.push(placed);
        }
    }

    fn data_frame(sequence: u64, payload_bytes: usize) -> Vec<u8> {
        let mut header = FrameHeader::new(FrameKind::Data, 1);
        header.seq = sequence;
        header.payload_len = payload_bytes as u32;
        let mut frame = header.to_bytes().to_vec();
        frame.extend((0..payload_bytes).map(|index| payload_byte(1, sequence, index)));
        frame
    }

    /// Write `bytes` to `stream` in `pieces` writes, polling `path` into
    /// `receiver` after each, then until `done` holds.
    fn trickle(
        stream: &TcpStream,
        bytes: &[u8],
        pieces: usize,
        path: &mut TcpPath,
        receiver: &mut PlacingReceiver,
        done: impl Fn(&PlacingReceiver) -> bool,
    ) {
        for piece in bytes.chunks(bytes.len().div_ceil(pieces)) {
            (&*stream).write_all(piece).unwrap();
            path.poll_placing(receiver).unwrap();
        }
        while !done(receiver) {
            path.wait(100_000).unwrap();
            path.poll_placing(receiver).unwrap();
        }
    }

    #[test]
    fn placed_payload_read_in_pieces_lands_whole_with_its_checksum_and_the_stream_stays_in_step() {
        let mut paths = mesh(2);
        let sender = paths.pop().unwrap();
        let mut receiver_path = paths.pop().unwrap();
        let stream = &sender.peers[0].as_ref().unwrap().stream;
        let mut receiver = PlacingReceiver {
            destination: vec![0; 1 << 20],
            willing: true,
            place_calls: 0,
            placed: Vec::new(),
            frames: Vec::new(),
        };
        // A placed frame, then a small one right behind it (read with the
        // placed payload's last `readv`), in 37 uneven pieces.
        let big = data_frame(1, (1 << 20) - 5);
        let small = frame_header(1, 2, 3)
            .iter()
            .chain(b"xyz")
            .copied()
            .collect::<Vec<u8>>();
        let both = [big.clone(), small.clone()].concat();
        trickle(
            stream,
            &both,
            37,
            &mut receiver_path,
            &mut receiver,
            |receiver| receiver.frames.len() == 1,
        );
        let payload = &big[HEADER_LEN_BYTES..];
        assert_eq!(
            receiver.placed,
            vec![Placed::Whole {
                payload_crc: resmpi_checksum::crc32c(payload)
            }]
        );
        assert!(receiver.destination[..payload.len()] == *payload);
        assert!(receiver.place_calls > 2, "asked again before each read");
        assert_eq!(receiver.frames, vec![small.clone()]);
    }

    #[test]
    fn abandoned_placement_is_reported_lost_and_the_next_frame_arrives_intact() {
        let mut paths = mesh(2);
        let sender = paths.pop().unwrap();
        let mut receiver_path = paths.pop().unwrap();
        let stream = &sender.peers[0].as_ref().unwrap().stream;
        let mut receiver = PlacingReceiver {
            destination: vec![0; 1 << 20],
            willing: true,
            place_calls: 0,
            placed: Vec::new(),
            frames: Vec::new(),
        };
        let big = data_frame(1, 1 << 20);
        let small = frame_header(1, 2, 3)
            .iter()
            .chain(b"abc")
            .copied()
            .collect::<Vec<u8>>();
        // Half the payload placed, then the receiver stops wanting it.
        let half = HEADER_LEN_BYTES + (1 << 19);
        (&*stream).write_all(&big[..half]).unwrap();
        while receiver.place_calls == 0
            || receiver_path.peers[1]
                .as_ref()
                .unwrap()
                .placing
                .as_ref()
                .unwrap()
                .done_bytes
                < (1 << 19)
        {
            receiver_path.wait(100_000).unwrap();
            receiver_path.poll_placing(&mut receiver).unwrap();
        }
        receiver.willing = false;
        let written = receiver.destination.clone();
        let rest = [&big[half..], &small[..]].concat();
        trickle(
            stream,
            &rest,
            5,
            &mut receiver_path,
            &mut receiver,
            |receiver| receiver.frames.len() == 1,
        );
        assert_eq!(receiver.placed, vec![Placed::Lost]);
        assert!(
            receiver.destination == written,
            "nothing written once abandoned"
        );
        assert_eq!(receiver.frames, vec![small]);
    }

    #[test]
    fn full_send_buffer_pushes_back_and_flush_drains_it() {
        let mut paths = mesh(2);
        let payload = vec![9u8; 1 << 20];
        let header = frame_header(0, 0, payload.len());
        let mut accepted = 0;
        // Nobody reads: the kernel buffers fill, then ours (8 MiB).
        while paths[0].try_send(1, &header, &payload).unwrap() {
            accepted += 1;
            assert!(accepted < 200, "send buffer is not bounded");
        }
        assert!(paths[0].has_pending_output());
        let mut received = 0;
        while received < accepted || paths[0].has_pending_output() {
            paths[0].flush().unwrap();
            received += paths[1]
                .poll(|_, frame| assert_eq!(frame.len(), resmpi_wire::HEADER_LEN_BYTES + (1 << 20)))
                .unwrap();
        }
        assert_eq!(received, accepted);
    }
}
