//! A rank's socket to the event logger: the I/O half of [`crate::LoggerLink`].
//!
//! Why its own small framing over TCP and not the engine's paths: the
//! logger is no rank (it is outside `MPI_COMM_WORLD`, and outlives any
//! rank's incarnation), so it has no place in the engine's links, and its
//! traffic is a few small frames per determinant. Each frame on the socket
//! is `length u32 | frame`. The socket is non-blocking and polled from the
//! engine's progress; when it breaks (the logger was killed), the link
//! connects again after [`RECONNECT_INTERVAL_MS`] and reports a new
//! connection, and the protocol sends again what is not acked.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::{LinkEvent, LoggerLink};

/// Wait between attempts to reach the logger.
pub const RECONNECT_INTERVAL_MS: u64 = 20;
/// How long one attempt to connect may take.
const CONNECT_TIMEOUT_MS: u64 = 200;
/// The largest frame the logger sends (a replay frame is well under it).
pub const FRAME_BYTES_MAX: usize = 1 << 20;

/// The variable that gives a rank the logger's address (`ip:port`).
pub const ADDRESS_VARIABLE: &str = "RESMPI_EVENTLOG_ADDRESS";

/// A TCP connection to the event logger, made again whenever it breaks.
pub struct TcpLink {
    address: SocketAddr,
    stream: Option<TcpStream>,
    next_attempt: Instant,
    read_buffer: Vec<u8>,
    write_buffer: Vec<u8>,
    events: std::collections::VecDeque<LinkEvent>,
}

impl TcpLink {
    /// A link to the logger at `address`; it connects on first use.
    pub fn new(address: SocketAddr) -> TcpLink {
        TcpLink {
            address,
            stream: None,
            next_attempt: Instant::now(),
            read_buffer: Vec::new(),
            write_buffer: Vec::new(),
            events: std::collections::VecDeque::new(),
        }
    }

    fn lose(&mut self) {
        if self.stream.take().is_some() {
            self.events.push_back(LinkEvent::Lost);
        }
        self.read_buffer.clear();
        self.write_buffer.clear();
        self.next_attempt = Instant::now() + Duration::from_millis(RECONNECT_INTERVAL_MS);
    }

    fn connect(&mut self) {
        if self.stream.is_some() || Instant::now() < self.next_attempt {
            return;
        }
        let timeout = Duration::from_millis(CONNECT_TIMEOUT_MS);
        let connected = TcpStream::connect_timeout(&self.address, timeout).and_then(|stream| {
            stream.set_nodelay(true)?;
            stream.set_nonblocking(true)?;
            Ok(stream)
        });
        match connected {
            Ok(stream) => {
                self.stream = Some(stream);
                self.events.push_back(LinkEvent::Connected);
            }
            Err(_) => {
                self.next_attempt = Instant::now() + Duration::from_millis(RECONNECT_INTERVAL_MS)
            }
        }
    }

    fn flush(&mut self) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        while !self.write_buffer.is_empty() {
            match stream.write(&self.write_buffer) {
                Ok(0) => return self.lose(),
                Ok(written) => {
                    self.write_buffer.drain(..written);
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => return,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.lose(),
            }
        }
    }

    fn read(&mut self) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => return self.lose(),
                Ok(count) => self.read_buffer.extend_from_slice(&chunk[..count]),
                Err(error) if error.kind() == ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.lose(),
            }
        }
        let mut at = 0;
        while let Some(header) = self.read_buffer.get(at..at + 4) {
            let length = u32::from_le_bytes(header.try_into().expect("4 bytes")) as usize;
            if length > FRAME_BYTES_MAX {
                return self.lose();
            }
            let Some(frame) = self.read_buffer.get(at + 4..at + 4 + length) else {
                break;
            };
            self.events.push_back(LinkEvent::Frame(frame.to_vec()));
            at += 4 + length;
        }
        self.read_buffer.drain(..at);
    }
}

impl LoggerLink for TcpLink {
    fn send(&mut self, frame: Vec<u8>) {
        if self.stream.is_none() {
            return;
        }
        self.write_buffer
            .extend_from_slice(&(frame.len() as u32).to_le_bytes());
        self.write_buffer.extend_from_slice(&frame);
        self.flush();
    }

    fn poll(&mut self) -> Option<LinkEvent> {
        if self.events.is_empty() {
            self.connect();
            self.flush();
            self.read();
        }
        self.events.pop_front()
    }
}
