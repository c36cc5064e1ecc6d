//! The set of paths one rank uses, and which path reaches which peer.
//!
//! Concrete types, not trait objects: the engine's hot path calls straight
//! into the shared-memory ring or the TCP socket.

use std::collections::VecDeque;

use resmpi_path::faulty::FaultyPath;
use resmpi_path::shm::ShmPath;
use resmpi_path::tcp::TcpPath;
use resmpi_path::Path;
use resmpi_wire::HEADER_LEN_BYTES;

use crate::error::{ErrorClass, MpiError, MpiResult};

/// How a peer is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// This process itself.
    Loopback,
    /// Shared-memory rings (same host).
    Shm,
    /// TCP stream.
    Tcp,
}

/// Largest payload of a loopback frame.
const LOOPBACK_MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// All paths of this rank.
pub struct Transports {
    /// Route to each world rank.
    pub routes: Vec<Route>,
    /// Shared-memory path, when there are local peers.
    pub shm: Option<ShmPath>,
    /// TCP path, when there are peers reached over TCP; wrapped for
    /// `--inject` (an empty spec forwards every frame untouched).
    pub tcp: Option<FaultyPath<TcpPath>>,
    /// Frames this rank sent to itself.
    pub loopback: VecDeque<Vec<u8>>,
}

fn path_error(error: impl std::fmt::Display, peer: u32) -> MpiError {
    MpiError::new(
        ErrorClass::Other,
        format!("cannot send to rank {peer}: {error}"),
    )
}

impl Transports {
    /// Only the loopback route (a single-process job).
    pub fn loopback_only() -> Transports {
        Transports {
            routes: vec![Route::Loopback],
            shm: None,
            tcp: None,
            loopback: VecDeque::new(),
        }
    }

    /// Try to put one frame on the path to `peer`, bypassing any
    /// reliability link. False = no room now.
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
                    .map_err(|error| path_error(error, peer))
            }
            Route::Tcp => {
                let tcp = self.tcp.as_mut().expect("tcp route without tcp path");
                tcp.try_send(peer, header, payload)
                    .map_err(|error| path_error(error, peer))
            }
            Route::Loopback => {
                let mut frame = Vec::with_capacity(HEADER_LEN_BYTES + payload.len());
                frame.extend_from_slice(header);
                frame.extend_from_slice(payload);
                self.loopback.push_back(frame);
                Ok(true)
            }
        }
    }

    /// Push out buffered bytes.
    pub fn flush(&mut self) -> MpiResult<()> {
        if let Some(tcp) = self.tcp.as_mut() {
            tcp.flush()
                .map_err(|error| MpiError::new(ErrorClass::Other, format!("TCP path: {error}")))?;
        }
        Ok(())
    }

    /// Largest payload per frame toward `peer`.
    pub fn max_payload_bytes(&self, peer: u32) -> usize {
        match self.routes[peer as usize] {
            Route::Shm => self
                .shm
                .as_ref()
                .map_or(LOOPBACK_MAX_PAYLOAD_BYTES, |shm| shm.max_payload_bytes()),
            Route::Tcp => self
                .tcp
                .as_ref()
                .map_or(LOOPBACK_MAX_PAYLOAD_BYTES, |tcp| tcp.max_payload_bytes()),
            Route::Loopback => LOOPBACK_MAX_PAYLOAD_BYTES,
        }
    }

    /// Sleep until a frame may have arrived, at most `timeout_us`.
    pub fn sleep_until_traffic(&self, timeout_us: u64) {
        if !self.loopback.is_empty() {
            return;
        }
        // A failed wait only means we poll again sooner.
        let _ = match (&self.shm, &self.tcp) {
            (Some(shm), None) => shm.wait(timeout_us),
            (None, Some(tcp)) => tcp.inner().wait(timeout_us),
            (Some(shm), Some(_)) => shm.wait(timeout_us.min(100)),
            (None, None) => {
                std::thread::sleep(std::time::Duration::from_micros(timeout_us.min(100)));
                Ok(())
            }
        };
    }
}
