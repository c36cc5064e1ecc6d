//! The frames between `mpiexec` and a per-host proxy (`mpiexec --proxy`):
//! one TCP connection per remote host carries every rank's PMI lines,
//! stdout and stderr, its start and its exit, tagged by rank and
//! incarnation.
//!
//! Sans-IO: this module only encodes and decodes bytes, so both ends and
//! the tests share one definition of the wire. A frame is
//!
//! ```text
//! length: u32 (big endian; bytes after this field, at most MAX_FRAME_BYTES)
//! kind:   u8
//! fields: per kind, in order; u32/i32 big endian, a string or byte run
//!         as u32 length + bytes, a list as u32 count + items
//! ```
//!
//! Every field is checked when decoded: a short, over-long or unknown frame
//! is an error, never a panic, and the connection that sent it is dropped.
//! Frames are tagged by incarnation as well as rank so that whatever a dead
//! process left in flight (its last PMI bytes, its exit) can never be taken
//! for its replacement's.

use std::fmt;

/// Version of this protocol; a proxy says it in its `Hello`.
pub const PROTOCOL_VERSION: u32 = 1;
/// Largest frame (after the length field). A `Start` holds the rank's whole
/// environment; output and PMI frames are far smaller (one read each).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;
/// The length field.
const LENGTH_BYTES: usize = 4;

/// Which output stream of a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputStream {
    /// The rank's stdout.
    Stdout,
    /// The rank's stderr.
    Stderr,
}

/// A process for a proxy to start: what mpiexec would run for a local rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Program to exec (a bare name is looked up in `PATH`).
    pub program: String,
    /// Its arguments.
    pub arguments: Vec<String>,
    /// Variables set on top of the proxy's own environment.
    pub environment: Vec<(String, String)>,
    /// Working directory (mpiexec's); the proxy's own when absent there.
    pub directory: String,
}

/// One message between mpiexec and a proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Proxy → mpiexec, first frame: who it is and that it may join.
    Hello {
        /// [`PROTOCOL_VERSION`] of the proxy.
        version: u32,
        /// Index of its host in the job's placement.
        host_index: u32,
        /// The per-job token mpiexec gave it on stdin.
        token: String,
    },
    /// mpiexec → proxy: start this process of `rank`.
    Start {
        /// The rank.
        rank: u32,
        /// Its incarnation (0 unless respawned).
        incarnation: u32,
        /// What to run, and where.
        launch: Launch,
    },
    /// mpiexec → proxy: send `signal` to the process (and its group).
    Signal {
        /// The rank.
        rank: u32,
        /// Only this incarnation: a later one is not hit by an old order.
        incarnation: u32,
        /// The signal number.
        signal: i32,
    },
    /// Proxy → mpiexec: the process runs, with this pid on its host.
    Started {
        /// The rank.
        rank: u32,
        /// The incarnation started.
        incarnation: u32,
        /// Its pid (on the proxy's host).
        pid: i32,
    },
    /// Proxy → mpiexec: the process could not be started.
    StartFailed {
        /// The rank.
        rank: u32,
        /// The incarnation that did not start.
        incarnation: u32,
        /// `errno` of the failure (0 when there is none).
        error_number: i32,
        /// What went wrong, in words.
        reason: String,
    },
    /// PMI bytes: proxy → mpiexec from the rank, mpiexec → proxy to it.
    Pmi {
        /// The rank.
        rank: u32,
        /// Its incarnation.
        incarnation: u32,
        /// Bytes of PMI lines (not split at line ends).
        bytes: Vec<u8>,
    },
    /// Proxy → mpiexec: the rank's PMI connection reached its end.
    PmiClosed {
        /// The rank.
        rank: u32,
        /// Its incarnation.
        incarnation: u32,
    },
    /// Proxy → mpiexec: bytes the rank wrote to stdout or stderr.
    Output {
        /// The rank.
        rank: u32,
        /// Its incarnation.
        incarnation: u32,
        /// Which stream.
        stream: OutputStream,
        /// The bytes (not split at line ends).
        bytes: Vec<u8>,
    },
    /// Proxy → mpiexec: the rank's stream reached its end.
    OutputClosed {
        /// The rank.
        rank: u32,
        /// Its incarnation.
        incarnation: u32,
        /// Which stream.
        stream: OutputStream,
    },
    /// Proxy → mpiexec: `waitpid` reaped the process.
    Exited {
        /// The rank.
        rank: u32,
        /// Its incarnation.
        incarnation: u32,
        /// The raw wait status (`WIFEXITED`, `WTERMSIG`, ... apply).
        wait_status: i32,
    },
}

/// Why bytes are not a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The length field says more than [`MAX_FRAME_BYTES`].
    TooLong(usize),
    /// The frame ends inside a field.
    Truncated,
    /// Bytes left after the last field of the kind.
    TrailingBytes(usize),
    /// A kind byte this version does not know.
    UnknownKind(u8),
    /// A string field that is not UTF-8.
    NotText,
    /// An output stream other than 1 (stdout) or 2 (stderr).
    UnknownStream(u32),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::TooLong(length) => write!(
                formatter,
                "a frame of {length} bytes, more than {MAX_FRAME_BYTES}"
            ),
            DecodeError::Truncated => write!(formatter, "a frame ends inside a field"),
            DecodeError::TrailingBytes(count) => {
                write!(formatter, "{count} bytes after the last field of a frame")
            }
            DecodeError::UnknownKind(kind) => write!(formatter, "unknown frame kind {kind}"),
            DecodeError::NotText => write!(formatter, "a text field is not UTF-8"),
            DecodeError::UnknownStream(stream) => {
                write!(formatter, "unknown output stream {stream}")
            }
        }
    }
}

mod kind {
    pub const HELLO: u8 = 1;
    pub const START: u8 = 2;
    pub const SIGNAL: u8 = 3;
    pub const STARTED: u8 = 4;
    pub const START_FAILED: u8 = 5;
    pub const PMI: u8 = 6;
    pub const PMI_CLOSED: u8 = 7;
    pub const OUTPUT: u8 = 8;
    pub const OUTPUT_CLOSED: u8 = 9;
    pub const EXITED: u8 = 10;
}

impl OutputStream {
    fn number(self) -> u32 {
        match self {
            OutputStream::Stdout => 1,
            OutputStream::Stderr => 2,
        }
    }

    fn from_number(number: u32) -> Result<OutputStream, DecodeError> {
        match number {
            1 => Ok(OutputStream::Stdout),
            2 => Ok(OutputStream::Stderr),
            other => Err(DecodeError::UnknownStream(other)),
        }
    }
}

/// Appends fields to a frame body.
struct Encoder {
    bytes: Vec<u8>,
}

impl Encoder {
    fn u32(&mut self, value: u32) -> &mut Encoder {
        self.bytes.extend_from_slice(&value.to_be_bytes());
        self
    }

    fn i32(&mut self, value: i32) -> &mut Encoder {
        self.u32(value as u32)
    }

    fn bytes(&mut self, value: &[u8]) -> &mut Encoder {
        self.u32(value.len() as u32);
        self.bytes.extend_from_slice(value);
        self
    }

    fn text(&mut self, value: &str) -> &mut Encoder {
        self.bytes(value.as_bytes())
    }
}

/// Reads fields from a frame body, each checked.
struct Decoder<'a> {
    rest: &'a [u8],
}

impl<'a> Decoder<'a> {
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<4>()
            .ok_or(DecodeError::Truncated)?;
        self.rest = rest;
        Ok(u32::from_be_bytes(*head))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.u32()? as i32)
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let length = self.u32()? as usize;
        if length > self.rest.len() {
            return Err(DecodeError::Truncated);
        }
        let (value, rest) = self.rest.split_at(length);
        self.rest = rest;
        Ok(value)
    }

    fn text(&mut self) -> Result<String, DecodeError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| DecodeError::NotText)
    }

    /// A count of items, each at least `item_bytes_min` long: a count the
    /// rest of the frame cannot hold is refused before anything is reserved.
    fn count(&mut self, item_bytes_min: usize) -> Result<usize, DecodeError> {
        let count = self.u32()? as usize;
        if count.saturating_mul(item_bytes_min) > self.rest.len() {
            return Err(DecodeError::Truncated);
        }
        Ok(count)
    }

    fn finish(self) -> Result<(), DecodeError> {
        match self.rest.len() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes(count)),
        }
    }
}

impl Frame {
    /// The frame on the wire, length field included.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Encoder {
            bytes: vec![0; LENGTH_BYTES],
        };
        match self {
            Frame::Hello {
                version,
                host_index,
                token,
            } => {
                body.bytes.push(kind::HELLO);
                body.u32(*version).u32(*host_index).text(token);
            }
            Frame::Start {
                rank,
                incarnation,
                launch:
                    Launch {
                        program,
                        arguments,
                        environment,
                        directory,
                    },
            } => {
                body.bytes.push(kind::START);
                body.u32(*rank).u32(*incarnation).text(program);
                body.u32(arguments.len() as u32);
                for argument in arguments {
                    body.text(argument);
                }
                body.u32(environment.len() as u32);
                for (name, value) in environment {
                    body.text(name).text(value);
                }
                body.text(directory);
            }
            Frame::Signal {
                rank,
                incarnation,
                signal,
            } => {
                body.bytes.push(kind::SIGNAL);
                body.u32(*rank).u32(*incarnation).i32(*signal);
            }
            Frame::Started {
                rank,
                incarnation,
                pid,
            } => {
                body.bytes.push(kind::STARTED);
                body.u32(*rank).u32(*incarnation).i32(*pid);
            }
            Frame::StartFailed {
                rank,
                incarnation,
                error_number,
                reason,
            } => {
                body.bytes.push(kind::START_FAILED);
                body.u32(*rank)
                    .u32(*incarnation)
                    .i32(*error_number)
                    .text(reason);
            }
            Frame::Pmi {
                rank,
                incarnation,
                bytes,
            } => {
                body.bytes.push(kind::PMI);
                body.u32(*rank).u32(*incarnation).bytes(bytes);
            }
            Frame::PmiClosed { rank, incarnation } => {
                body.bytes.push(kind::PMI_CLOSED);
                body.u32(*rank).u32(*incarnation);
            }
            Frame::Output {
                rank,
                incarnation,
                stream,
                bytes,
            } => {
                body.bytes.push(kind::OUTPUT);
                body.u32(*rank)
                    .u32(*incarnation)
                    .u32(stream.number())
                    .bytes(bytes);
            }
            Frame::OutputClosed {
                rank,
                incarnation,
                stream,
            } => {
                body.bytes.push(kind::OUTPUT_CLOSED);
                body.u32(*rank).u32(*incarnation).u32(stream.number());
            }
            Frame::Exited {
                rank,
                incarnation,
                wait_status,
            } => {
                body.bytes.push(kind::EXITED);
                body.u32(*rank).u32(*incarnation).i32(*wait_status);
            }
        }
        let length = (body.bytes.len() - LENGTH_BYTES) as u32;
        body.bytes[..LENGTH_BYTES].copy_from_slice(&length.to_be_bytes());
        body.bytes
    }

    /// Decodes one frame body (the bytes after the length field).
    pub fn decode(body: &[u8]) -> Result<Frame, DecodeError> {
        if body.len() > MAX_FRAME_BYTES {
            return Err(DecodeError::TooLong(body.len()));
        }
        let (&kind, rest) = body.split_first().ok_or(DecodeError::Truncated)?;
        let mut fields = Decoder { rest };
        let frame = match kind {
            kind::HELLO => Frame::Hello {
                version: fields.u32()?,
                host_index: fields.u32()?,
                token: fields.text()?,
            },
            kind::START => {
                let rank = fields.u32()?;
                let incarnation = fields.u32()?;
                let program = fields.text()?;
                let argument_count = fields.count(LENGTH_BYTES)?;
                let mut arguments = Vec::with_capacity(argument_count);
                for _ in 0..argument_count {
                    arguments.push(fields.text()?);
                }
                let variable_count = fields.count(2 * LENGTH_BYTES)?;
                let mut environment = Vec::with_capacity(variable_count);
                for _ in 0..variable_count {
                    environment.push((fields.text()?, fields.text()?));
                }
                Frame::Start {
                    rank,
                    incarnation,
                    launch: Launch {
                        program,
                        arguments,
                        environment,
                        directory: fields.text()?,
                    },
                }
            }
            kind::SIGNAL => Frame::Signal {
                rank: fields.u32()?,
                incarnation: fields.u32()?,
                signal: fields.i32()?,
            },
            kind::STARTED => Frame::Started {
                rank: fields.u32()?,
                incarnation: fields.u32()?,
                pid: fields.i32()?,
            },
            kind::START_FAILED => Frame::StartFailed {
                rank: fields.u32()?,
                incarnation: fields.u32()?,
                error_number: fields.i32()?,
                reason: fields.text()?,
            },
            kind::PMI => Frame::Pmi {
                rank: fields.u32()?,
                incarnation: fields.u32()?,
                bytes: fields.bytes()?.to_vec(),
            },
            kind::PMI_CLOSED => Frame::PmiClosed {
                rank: fields.u32()?,
                incarnation: fields.u32()?,
            },
            kind::OUTPUT => Frame::Output {
                rank: fields.u32()?,
                incarnation: fields.u32()?,
                stream: OutputStream::from_number(fields.u32()?)?,
                bytes: fields.bytes()?.to_vec(),
            },
            kind::OUTPUT_CLOSED => Frame::OutputClosed {
                rank: fields.u32()?,
                incarnation: fields.u32()?,
                stream: OutputStream::from_number(fields.u32()?)?,
            },
            kind::EXITED => Frame::Exited {
                rank: fields.u32()?,
                incarnation: fields.u32()?,
                wait_status: fields.i32()?,
            },
            other => return Err(DecodeError::UnknownKind(other)),
        };
        fields.finish()?;
        Ok(frame)
    }
}

/// Splits a byte stream into frames: bytes go in as they arrive
/// ([`FrameSplitter::push`]), whole frames come out
/// ([`FrameSplitter::next_frame`]). Holds at most one frame's bytes
/// beyond what was pushed in one call.
#[derive(Default)]
pub struct FrameSplitter {
    pending: Vec<u8>,
}

impl FrameSplitter {
    /// A splitter with nothing pending.
    pub fn new() -> FrameSplitter {
        FrameSplitter::default()
    }

    /// Takes bytes in.
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// The next whole frame, `Ok(None)` when more bytes are needed. After an
    /// error the stream cannot be resynchronised: drop the connection.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        let Some(length) = self.pending.first_chunk::<LENGTH_BYTES>() else {
            return Ok(None);
        };
        let length = u32::from_be_bytes(*length) as usize;
        if length > MAX_FRAME_BYTES {
            return Err(DecodeError::TooLong(length));
        }
        if self.pending.len() < LENGTH_BYTES + length {
            return Ok(None);
        }
        let frame = Frame::decode(&self.pending[LENGTH_BYTES..LENGTH_BYTES + length]);
        self.pending.drain(..LENGTH_BYTES + length);
        frame.map(Some)
    }
}

/// Reads frames from a blocking byte stream.
pub struct FrameReader<R> {
    source: R,
    splitter: FrameSplitter,
}

/// What [`FrameReader::read_frame`] gives when no frame comes.
#[derive(Debug)]
pub enum ReadError {
    /// The stream ended (cleanly when no partial frame was pending).
    Closed,
    /// The stream failed.
    Io(std::io::Error),
    /// The bytes are not a frame.
    Decode(DecodeError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Closed => write!(formatter, "the connection closed"),
            ReadError::Io(error) => write!(formatter, "{error}"),
            ReadError::Decode(error) => write!(formatter, "{error}"),
        }
    }
}

impl<R: std::io::Read> FrameReader<R> {
    /// Frames from `source`.
    pub fn new(source: R) -> FrameReader<R> {
        FrameReader {
            source,
            splitter: FrameSplitter::new(),
        }
    }

    /// The next frame; blocks until it has arrived whole.
    pub fn read_frame(&mut self) -> Result<Frame, ReadError> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some(frame) = self.splitter.next_frame().map_err(ReadError::Decode)? {
                return Ok(frame);
            }
            match self.source.read(&mut chunk) {
                Ok(0) => return Err(ReadError::Closed),
                Ok(count) => self.splitter.push(&chunk[..count]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(ReadError::Io(error)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    fn every_kind() -> Vec<Frame> {
        vec![
            Frame::Hello {
                version: PROTOCOL_VERSION,
                host_index: 3,
                token: "0123abcd".to_string(),
            },
            Frame::Start {
                rank: 7,
                incarnation: 2,
                launch: Launch {
                    program: "/bin/prog".to_string(),
                    arguments: vec!["it's".to_string(), String::new(), "x y".to_string()],
                    environment: vec![
                        ("RESMPI_JOB_SECRET".to_string(), "ff00".to_string()),
                        ("EMPTY".to_string(), String::new()),
                    ],
                    directory: "/home/me".to_string(),
                },
            },
            Frame::Signal {
                rank: 1,
                incarnation: 0,
                signal: libc::SIGKILL,
            },
            Frame::Started {
                rank: 1,
                incarnation: 0,
                pid: 4242,
            },
            Frame::StartFailed {
                rank: 0,
                incarnation: 1,
                error_number: libc::ENOENT,
                reason: "no such file".to_string(),
            },
            Frame::Pmi {
                rank: u32::MAX,
                incarnation: 0,
                bytes: b"cmd=init pmi_version=1\ncmd=barr".to_vec(),
            },
            Frame::PmiClosed {
                rank: 5,
                incarnation: 1,
            },
            Frame::Output {
                rank: 2,
                incarnation: 0,
                stream: OutputStream::Stderr,
                bytes: vec![0, 255, b'\n'],
            },
            Frame::OutputClosed {
                rank: 2,
                incarnation: 0,
                stream: OutputStream::Stdout,
            },
            Frame::Exited {
                rank: 9,
                incarnation: 3,
                wait_status: -1,
            },
        ]
    }

    #[test]
    fn every_kind_survives_encode_and_decode() {
        for frame in every_kind() {
            let wire = frame.encode();
            let length = u32::from_be_bytes(wire[..4].try_into().unwrap()) as usize;
            assert_eq!(length, wire.len() - 4, "{frame:?}");
            assert_eq!(Frame::decode(&wire[4..]), Ok(frame.clone()));
        }
    }

    #[test]
    fn frames_fed_one_byte_at_a_time_come_out_whole_and_in_order() {
        let frames = every_kind();
        let wire: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
        let mut splitter = FrameSplitter::new();
        let mut decoded = Vec::new();
        for byte in wire {
            splitter.push(&[byte]);
            while let Some(frame) = splitter.next_frame().unwrap() {
                decoded.push(frame);
            }
        }
        assert_eq!(decoded, frames);
        assert!(splitter.pending.is_empty());
    }

    #[test]
    fn every_cut_short_frame_is_truncated_never_a_panic() {
        for frame in every_kind() {
            let wire = frame.encode();
            for end in 4..wire.len() {
                let error = Frame::decode(&wire[4..end]).unwrap_err();
                assert!(
                    matches!(
                        error,
                        DecodeError::Truncated | DecodeError::UnknownStream(_)
                    ),
                    "{frame:?} cut at {end}: {error:?}"
                );
            }
        }
    }

    #[test]
    fn bad_frames_are_named_errors() {
        assert_eq!(Frame::decode(&[99]), Err(DecodeError::UnknownKind(99)));
        assert_eq!(Frame::decode(&[]), Err(DecodeError::Truncated));
        let mut wire = Frame::PmiClosed {
            rank: 1,
            incarnation: 0,
        }
        .encode();
        wire.push(0);
        assert_eq!(
            Frame::decode(&wire[4..]),
            Err(DecodeError::TrailingBytes(1))
        );
        let mut splitter = FrameSplitter::new();
        splitter.push(&((MAX_FRAME_BYTES + 1) as u32).to_be_bytes());
        assert_eq!(
            splitter.next_frame(),
            Err(DecodeError::TooLong(MAX_FRAME_BYTES + 1))
        );
        // A string that is not UTF-8.
        let mut hello = vec![kind::HELLO];
        hello.extend_from_slice(&1u32.to_be_bytes());
        hello.extend_from_slice(&0u32.to_be_bytes());
        hello.extend_from_slice(&1u32.to_be_bytes());
        hello.push(0xff);
        assert_eq!(Frame::decode(&hello), Err(DecodeError::NotText));
        // A list count the frame cannot hold reserves nothing.
        let mut start = vec![kind::START];
        start.extend_from_slice(&0u32.to_be_bytes());
        start.extend_from_slice(&0u32.to_be_bytes());
        start.extend_from_slice(&0u32.to_be_bytes());
        start.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(Frame::decode(&start), Err(DecodeError::Truncated));
        let mut output = vec![kind::OUTPUT_CLOSED];
        output.extend_from_slice(&[0; 8]);
        output.extend_from_slice(&3u32.to_be_bytes());
        assert_eq!(Frame::decode(&output), Err(DecodeError::UnknownStream(3)));
    }

    #[test]
    fn random_bytes_never_panic_the_decoder_and_what_decodes_round_trips() {
        // A seeded xorshift: the same inputs every run.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let templates = every_kind();
        for round in 0..20_000 {
            let mut body = templates[round % templates.len()].encode()[4..].to_vec();
            // Flip a few bytes of a valid frame, or use pure noise.
            if round % 5 == 0 {
                body = (0..(next() % 64)).map(|_| next() as u8).collect();
            } else {
                for _ in 0..(1 + next() % 3) {
                    let index = (next() as usize) % body.len();
                    body[index] = next() as u8;
                }
            }
            // What decodes is canonical: it encodes back to the same bytes.
            if let Ok(frame) = Frame::decode(&body) {
                assert_eq!(frame.encode()[4..], body[..], "{frame:?}");
            }
        }
    }

    #[test]
    fn a_reader_over_a_socket_gets_frames_written_in_pieces_then_closed() {
        let (mut writer, reader) = UnixStream::pair().unwrap();
        let frames = every_kind();
        let wire: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
        let writer_thread = std::thread::spawn(move || {
            for piece in wire.chunks(7) {
                writer.write_all(piece).unwrap();
            }
        });
        let mut reader = FrameReader::new(reader);
        for frame in &frames {
            assert_eq!(&reader.read_frame().unwrap(), frame);
        }
        writer_thread.join().unwrap();
        assert!(matches!(reader.read_frame(), Err(ReadError::Closed)));
    }
}
