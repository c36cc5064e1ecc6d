//! The set of paths one rank uses, and which path reaches which peer.
//!
//! Concrete types, not trait objects: the engine's hot path calls straight
//! into the shared-memory ring or the TCP socket. Peers reached over the
//! network may have several TCP paths ("rails", one per NIC); which rail a
//! frame takes is the reliability link's choice (`try_send_on_rail`).
//! The in-memory route exists so that `crates/sim` can run the production
//! engine over a simulated network; it is one more match arm, not a trait
//! object, so shm and TCP pay nothing for it.

use std::collections::VecDeque;

use resmpi_path::faulty::FaultyPath;
use resmpi_path::memory::MemoryPath;
use resmpi_path::shm::ShmPath;
use resmpi_path::tcp::TcpPath;
use resmpi_path::{Path, PathError};
use resmpi_wire::{FrameHeader, HEADER_LEN_BYTES};

use crate::error::{ErrorClass, MpiError, MpiResult};

/// How a peer is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// This process itself.
    Loopback,
    /// Shared-memory rings (same host).
    Shm,
    /// TCP streams, one per rail.
    Tcp,
    /// In-process queues moved by a simulator (`crates/sim`).
    Memory,
    /// None: the peer died inside MPI_Init and the job went on without it
    /// (process replication). A send to it finds it closed, as a send to a
    /// peer that died later does.
    Departed,
}

/// Largest payload of a loopback frame.
const LOOPBACK_MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// One TCP rail, wrapped for `--inject` (an empty spec forwards every frame
/// untouched).
pub type Rail = FaultyPath<TcpPath>;

/// All paths of this rank.
pub struct Transports {
    /// Route to each world rank.
    pub routes: Vec<Route>,
    /// Shared-memory path, when there are local peers.
    pub shm: Option<ShmPath>,
    /// TCP rails (empty when no peer is reached over TCP). Without the
    /// reliability layer only rail 0 carries traffic.
    pub rails: Vec<Rail>,
    /// Frames this rank sent to itself.
    pub loopback: VecDeque<Vec<u8>>,
    /// In-memory path, when a simulator runs this rank.
    pub memory: Option<MemoryPath>,
    /// What connecting a re-joined peer after wire-up needs (failure policy
    /// `continue` only; see `wireup::connect_rejoined_peer`).
    pub joining: Option<crate::wireup::JoinWiring>,
}

impl Transports {
    /// Only the loopback route (a single-process job).
    pub fn loopback_only() -> Transports {
        Transports {
            routes: vec![Route::Loopback],
            shm: None,
            rails: Vec::new(),
            loopback: VecDeque::new(),
            memory: None,
            joining: None,
        }
    }

    /// Rank `rank` of `size` reaching every other rank over `memory` and
    /// itself over loopback (a simulated job).
    pub fn memory(rank: u32, size: u32, memory: MemoryPath) -> Transports {
        let mut routes = vec![Route::Memory; size as usize];
        routes[rank as usize] = Route::Loopback;
        Transports {
            routes,
            shm: None,
            rails: Vec::new(),
            loopback: VecDeque::new(),
            memory: Some(memory),
            joining: None,
        }
    }

    /// Try to put one frame on the path to `peer` (rail 0 for TCP),
    /// bypassing any reliability link. False = no room now.
    #[inline]
    pub fn try_send_direct(
        &mut self,
        peer: u32,
        header: &[u8; HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> MpiResult<bool> {
        match self.routes[peer as usize] {
            Route::Shm => {
                let shm = self.shm.as_mut().expect("shm route without shm path");
                shm.try_send(peer, header, payload)
                    .map_err(|error| send_error(error, peer))
            }
            Route::Tcp => self
                .try_send_on_rail(0, peer, header, payload)
                .map_err(|error| send_error(error, peer)),
            Route::Loopback => {
                let mut frame = Vec::with_capacity(HEADER_LEN_BYTES + payload.len());
                frame.extend_from_slice(header);
                frame.extend_from_slice(payload);
                self.loopback.push_back(frame);
                Ok(true)
            }
            Route::Memory => {
                let memory = self
                    .memory
                    .as_mut()
                    .expect("memory route without memory path");
                memory
                    .try_send(peer, header, payload)
                    .map_err(|error| send_error(error, peer))
            }
            Route::Departed => Err(send_error(PathError::PeerClosed(peer), peer)),
        }
    }

    /// `try_send_direct` of the frame `header` (sent by incarnation
    /// `incarnation`) + `payload`: on shared memory the header is emitted
    /// straight into the ring's slot, elsewhere as `try_send_direct`.
    #[inline]
    pub fn try_send_frame(
        &mut self,
        peer: u32,
        header: &FrameHeader,
        incarnation: u32,
        payload: &[u8],
    ) -> MpiResult<bool> {
        let mut stamped = *header;
        stamped.incarnation = incarnation;
        if let (Route::Shm, Some(shm)) = (self.routes[peer as usize], self.shm.as_mut()) {
            return shm
                .try_send_with(peer, HEADER_LEN_BYTES + payload.len(), |frame| {
                    let (head, body) = frame.split_at_mut(HEADER_LEN_BYTES);
                    stamped.emit(head.try_into().expect("a frame holds its header"));
                    debug_assert_eq!(body.len(), payload.len());
                    // SAFETY: the slot's body is exactly the payload's length.
                    unsafe {
                        crate::user_bytes::copy_bytes(
                            payload.as_ptr(),
                            body.as_mut_ptr(),
                            payload.len(),
                        )
                    };
                })
                .map_err(|error| send_error(error, peer));
        }
        self.try_send_direct(peer, &stamped.to_bytes(), payload)
    }

    /// `try_send_direct` for a payload of `length` bytes that `fill`
    /// writes: in place in the shared-memory ring (no other copy), or into
    /// a buffer handed to the socket. `fill` is not called when there is
    /// no room on shared memory.
    pub fn try_send_gathered(
        &mut self,
        peer: u32,
        header: &[u8; HEADER_LEN_BYTES],
        length: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> MpiResult<bool> {
        if let Route::Shm = self.routes[peer as usize] {
            let shm = self.shm.as_mut().expect("shm route without shm path");
            return shm
                .try_send_with(peer, HEADER_LEN_BYTES + length, |frame| {
                    let (frame_header, payload) = frame.split_at_mut(HEADER_LEN_BYTES);
                    frame_header.copy_from_slice(header);
                    fill(payload);
                })
                .map_err(|error| send_error(error, peer));
        }
        let mut payload = vec![0u8; length];
        fill(&mut payload);
        self.try_send_direct(peer, header, &payload)
    }

    /// Try to put one frame on TCP rail `rail` toward `peer`.
    #[inline]
    pub fn try_send_on_rail(
        &mut self,
        rail: u32,
        peer: u32,
        header: &[u8; HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> Result<bool, PathError> {
        match self.rails.get_mut(rail as usize) {
            Some(path) => path.try_send(peer, header, payload),
            None => Err(PathError::Protocol(format!("no TCP rail {rail}"))),
        }
    }

    /// Push out buffered bytes on every rail. Errors are the rails' own:
    /// the caller decides whether a rail failing is fatal.
    pub fn flush(&mut self) -> MpiResult<()> {
        for (rail, path) in self.rails.iter_mut().enumerate() {
            match path.flush() {
                Ok(()) | Err(PathError::PeerClosed(_)) => {}
                Err(error) => {
                    return Err(MpiError::new(
                        ErrorClass::Other,
                        format!("TCP rail {rail}: {error}"),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Whether any rail still holds bytes it has not handed to the kernel.
    pub fn rails_hold_output(&self) -> bool {
        self.rails
            .iter()
            .any(|rail| rail.inner().has_pending_output() || rail.held_frame_count() > 0)
    }

    /// Largest payload per frame toward `peer`.
    #[inline]
    pub fn max_payload_bytes(&self, peer: u32) -> usize {
        match self.routes[peer as usize] {
            Route::Shm => self
                .shm
                .as_ref()
                .map_or(LOOPBACK_MAX_PAYLOAD_BYTES, |shm| shm.max_payload_bytes()),
            Route::Tcp => self
                .rails
                .first()
                .map_or(LOOPBACK_MAX_PAYLOAD_BYTES, |rail| rail.max_payload_bytes()),
            Route::Loopback | Route::Departed => LOOPBACK_MAX_PAYLOAD_BYTES,
            Route::Memory => self
                .memory
                .as_ref()
                .map_or(LOOPBACK_MAX_PAYLOAD_BYTES, |memory| {
                    memory.max_payload_bytes()
                }),
        }
    }

    /// Sleep until a frame may have arrived, at most `timeout_us`.
    pub fn sleep_until_traffic(&self, timeout_us: u64) {
        if !self.loopback.is_empty() || self.memory.is_some() {
            // A simulator moves the memory path's frames between calls:
            // sleeping would only slow it down.
            return;
        }
        // A failed wait only means we poll again sooner. With several kinds
        // of path, no single wait covers all of them: sleep briefly.
        let several = self.rails.len() + self.shm.is_some() as usize > 1;
        let timeout_us = if several {
            timeout_us.min(100)
        } else {
            timeout_us
        };
        let _ = match (&self.shm, self.rails.first()) {
            (Some(shm), _) => shm.wait(timeout_us),
            (None, Some(rail)) => rail.inner().wait(timeout_us),
            (None, None) => {
                std::thread::sleep(std::time::Duration::from_micros(timeout_us.min(100)));
                Ok(())
            }
        };
    }
}

/// A send that the path refused. A closed connection means the peer's
/// process is gone (or unreachable): `ProcFailed`, which the engine turns
/// into a failure event under the `continue` policy.
#[cold]
fn send_error(error: PathError, peer: u32) -> MpiError {
    let class = match error {
        PathError::PeerClosed(_) => ErrorClass::ProcFailed,
        _ => ErrorClass::Other,
    };
    MpiError::new(class, format!("cannot send to rank {peer}: {error}"))
}
