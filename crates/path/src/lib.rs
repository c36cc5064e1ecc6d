//! Paths: the transports a rank uses to move whole wire frames to its peers.
//!
//! A path moves frames (a fixed-size `resmpi_wire` header followed by
//! `payload_len` bytes of payload) between ranks and nothing else: it does not
//! fragment messages, retransmit, match, or look at frame kinds. Those belong
//! to `crates/reliable` and `crates/matching`, which drive paths through the
//! [`Path`] trait. Three paths exist:
//!
//! - [`shm::ShmPath`]: one single-producer / single-consumer ring per
//!   (sender, receiver) pair in anonymous shared memory (memfd), for peers on
//!   this host.
//!   The hot path has no allocation, syscall or lock; a futex doorbell is rung
//!   only when the receiver has announced that it is going to sleep.
//! - [`tcp::TcpPath`]: a full mesh of authenticated, nonblocking TCP
//!   connections, for peers on other hosts (or as a second rail).
//! - [`memory::MemoryPath`]: queues in this process's memory that the
//!   simulator (`crates/sim`) moves frames between, so the production engine
//!   runs unchanged under a seeded scheduler.
//!
//! Every path is nonblocking: back-pressure is reported as `Ok(false)` from
//! [`Path::try_send`], and each path offers its own `wait` for callers that
//! have nothing to do but wait for input.
#![warn(missing_docs)]

pub mod collective_area;
pub mod faulty;
#[doc(hidden)]
pub mod fuzzing;
pub mod inject_spec;
pub mod memory;
mod ring;
pub mod shm;
pub mod tcp;

pub use memory::MemoryPath;
pub use shm::{ShmLocator, ShmPath, ShmSegment};
pub use tcp::TcpPath;

/// Payloads shorter than this are never placed: a copy of them costs less
/// than asking where they go.
pub const PLACEMENT_MIN_PAYLOAD_BYTES: usize = 16 << 10;

/// Why a path operation failed.
#[derive(Debug)]
pub enum PathError {
    /// The connection to this peer rank is gone (end of stream, reset, or a
    /// send to a peer already known to be closed).
    PeerClosed(u32),
    /// An operating-system call failed.
    Io(std::io::Error),
    /// The peer (or the caller) broke the path's protocol: a corrupt frame, a
    /// failed handshake, a frame too large for the path, an unknown peer.
    Protocol(String),
}

impl std::fmt::Display for PathError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathError::PeerClosed(rank) => write!(formatter, "connection to rank {rank} closed"),
            PathError::Io(error) => write!(formatter, "path I/O error: {error}"),
            PathError::Protocol(text) => write!(formatter, "path protocol error: {text}"),
        }
    }
}

impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PathError::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<std::io::Error> for PathError {
    fn from(error: std::io::Error) -> PathError {
        PathError::Io(error)
    }
}

/// Fill `bytes` from the kernel's random source (getrandom(2)).
pub(crate) fn fill_random(bytes: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < bytes.len() {
        let remaining = &mut bytes[filled..];
        // SAFETY: the kernel writes at most `remaining.len()` bytes into it.
        let got = unsafe {
            libc::getrandom(
                remaining.as_mut_ptr() as *mut libc::c_void,
                remaining.len(),
                0,
            )
        };
        if got < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        } else {
            filled += got as usize;
        }
    }
    Ok(())
}

/// Where the payload of a frame goes when the layers above already know it
/// (a rendezvous fragment of a matched receive): a path that can reads the
/// payload straight there instead of into its own buffer, so the bytes are
/// copied once (by the kernel) rather than twice.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    /// First byte of the destination: `payload_len` writable bytes.
    pub start: *mut u8,
    /// Whether the path computes the payload's CRC32C as it reads (each
    /// piece right after its read, while it is in cache) and reports it in
    /// [`Placed::Whole`].
    pub checksum: bool,
}

/// How the payload of a placed frame ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// Every payload byte was written to the placement; `payload_crc` is
    /// their CRC32C when the placement asked for one (else 0). Nothing about
    /// the bytes is trusted yet: the receiver checks them.
    Whole {
        /// CRC32C of the payload as read.
        payload_crc: u32,
    },
    /// The frame is lost (a fault wrapper swallowed it): what was written
    /// to the placement must not be used.
    Lost,
}

/// What a path hands received frames to, when it can place payloads
/// ([`Path::poll_placing`]).
///
/// # Safety
/// A `Placement` returned by [`Receiver::place`] must stay valid for
/// `payload_len` bytes of writes until the path next calls into this
/// receiver or its poll returns. A path asks again before every read of
/// further payload bytes, so a receiver that no longer wants them (its
/// receive ended meanwhile) answers `None` and the path reads the rest of
/// the payload into scratch memory and drops the frame.
pub unsafe trait Receiver {
    /// A whole frame, header and payload, in the path's buffer (valid only
    /// during the call).
    fn frame(&mut self, peer: u32, frame: &[u8]);

    /// `header` arrived from `peer` and its payload is still (partly) on
    /// the wire: where should the payload go? `None`: into the path's
    /// buffer, then to [`Receiver::frame`] as usual. Asked again, with the
    /// same header and `resumed` true, before each further read of that
    /// payload; `None` then abandons it (the rest is read into scratch and
    /// the frame reported [`Placed::Lost`]).
    fn place(
        &mut self,
        peer: u32,
        header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
        resumed: bool,
    ) -> Option<Placement>;

    /// The payload of a frame this receiver placed has ended (see
    /// [`Placed`]); the frame is done with.
    fn placed(&mut self, peer: u32, header: &[u8; resmpi_wire::HEADER_LEN_BYTES], placed: Placed);
}

/// What every path offers.
///
/// Frames are wire frames: a fixed-size header (`resmpi_wire`) followed by the
/// payload; the header's `payload_len` says the payload length. Frames
/// between one (sender, receiver) pair on one path arrive in the order sent.
pub trait Path {
    /// Try to queue or send one frame made of `header` then `payload` to
    /// `peer`. `Ok(false)` means there is no room right now (back-pressure:
    /// the caller retries after `poll`/`flush`). Never blocks.
    fn try_send(
        &mut self,
        peer: u32,
        header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> Result<bool, PathError>;

    /// Deliver every frame that has arrived (up to a fairness bound per
    /// peer), calling `handler(peer, frame_bytes)` for each. `frame_bytes` is
    /// header + payload and is valid only during the call (on shm it points
    /// into the ring: zero copy). Returns the number of frames delivered.
    fn poll<F: FnMut(u32, &[u8])>(&mut self, handler: F) -> Result<usize, PathError>;

    /// `poll`, handing frames to `receiver`, which may give a destination
    /// for a payload still on the wire. A path that cannot read into a
    /// destination (shared memory: the frame is already in memory) delivers
    /// every frame whole, which is what this default does.
    fn poll_placing<R: Receiver>(&mut self, receiver: &mut R) -> Result<usize, PathError> {
        self.poll(|peer, frame| receiver.frame(peer, frame))
    }

    /// Push out anything buffered (TCP partial writes). Never blocks.
    fn flush(&mut self) -> Result<(), PathError>;

    /// Largest payload one frame may carry on this path.
    fn max_payload_bytes(&self) -> usize;
}
