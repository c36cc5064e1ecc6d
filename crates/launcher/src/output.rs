//! Forwarding of rank stdout/stderr to mpiexec's own, one whole line at a
//! time, so lines from different ranks never interleave mid-line.
//!
//! Each rank stream has its own thread; a line is written under the lock of
//! the destination stream. A line longer than [`MAX_PARTIAL_LINE_BYTES`] is
//! written in pieces (a limit on what a rank that never prints a newline can
//! make us hold). If our own output is closed, the rank's output is still
//! drained so the rank never blocks on a full pipe.

use std::io::{self, Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Longest partial line held back while waiting for its newline.
pub const MAX_PARTIAL_LINE_BYTES: usize = 64 * 1024;

/// Where a rank stream goes.
#[derive(Clone, Copy, Debug)]
pub enum Destination {
    /// mpiexec's stdout.
    Stdout,
    /// mpiexec's stderr.
    Stderr,
}

/// Writes `bytes` to `destination` in one locked write.
pub fn write_to(destination: Destination, bytes: &[u8]) -> io::Result<()> {
    match destination {
        Destination::Stdout => {
            let mut stdout = io::stdout().lock();
            stdout.write_all(bytes)?;
            stdout.flush()
        }
        Destination::Stderr => io::stderr().lock().write_all(bytes),
    }
}

/// Splits a byte stream into output chunks of whole lines, each line with
/// `prefix` in front.
pub struct LineSplitter {
    prefix: Vec<u8>,
    pending: Vec<u8>,
    /// Whether the next byte starts a line (so gets the prefix).
    at_line_start: bool,
}

impl LineSplitter {
    /// A splitter putting `prefix` (possibly empty) before each line.
    pub fn new(prefix: &str) -> LineSplitter {
        LineSplitter {
            prefix: prefix.as_bytes().to_vec(),
            pending: Vec::new(),
            at_line_start: true,
        }
    }

    /// Takes `bytes` in; returns what may be written now (whole lines, or a
    /// piece of an over-long line).
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(bytes);
        let mut ready = Vec::new();
        while let Some(end) = self.pending.iter().position(|&byte| byte == b'\n') {
            if self.at_line_start {
                ready.extend_from_slice(&self.prefix);
            }
            ready.extend(self.pending.drain(..=end));
            self.at_line_start = true;
        }
        if self.pending.len() >= MAX_PARTIAL_LINE_BYTES {
            if self.at_line_start {
                ready.extend_from_slice(&self.prefix);
            }
            ready.append(&mut self.pending);
            self.at_line_start = false;
        }
        ready
    }

    /// At end of stream: what is left. A tagged last line without a newline
    /// gets one, so the next rank's tag starts a fresh line.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut ready = Vec::new();
        if !self.pending.is_empty() {
            if self.at_line_start {
                ready.extend_from_slice(&self.prefix);
            }
            ready.append(&mut self.pending);
            if !self.prefix.is_empty() {
                ready.push(b'\n');
            }
        }
        ready
    }
}

/// How long a restarted rank's output waits for its dead incarnation's
/// stream to reach its end before the count of bytes to skip is taken.
const PREVIOUS_STREAM_WAIT: Duration = Duration::from_secs(5);

/// Per rank stream (rank * 2 + 0 for stdout, 1 for stderr): how many bytes
/// its incarnations have shown, and how many of its streams are open.
///
/// Why bytes and not lines: under message logging a restarted rank replays
/// deterministically from `MPI_Init`, so it writes again exactly the bytes
/// its dead incarnation wrote; the first `shown` bytes of the new stream
/// are those, whatever its line breaks.
pub struct OutputLedger {
    streams: Mutex<Vec<StreamLedger>>,
    changed: Condvar,
}

#[derive(Clone, Copy, Default)]
struct StreamLedger {
    /// Bytes shown: the longest any incarnation got.
    shown_bytes: u64,
    /// Incarnations whose stream has not reached its end.
    open_count: u32,
}

impl OutputLedger {
    /// A ledger for `stream_count` streams.
    pub fn new(stream_count: usize) -> OutputLedger {
        OutputLedger {
            streams: Mutex::new(vec![StreamLedger::default(); stream_count]),
            changed: Condvar::new(),
        }
    }
}

/// One incarnation's stream in an [`OutputLedger`].
pub struct ReplayedStream {
    ledger: Arc<OutputLedger>,
    stream: usize,
    incarnation: u32,
}

impl ReplayedStream {
    /// Incarnation `incarnation`'s stream `stream` opens (called before its
    /// forwarding thread starts, so a later incarnation sees it open).
    pub fn open(ledger: Arc<OutputLedger>, stream: usize, incarnation: u32) -> ReplayedStream {
        if let Some(entry) = ledger.streams.lock().expect("ledger").get_mut(stream) {
            entry.open_count += 1;
        }
        ReplayedStream {
            ledger,
            stream,
            incarnation,
        }
    }

    /// [`Self::bytes_to_skip`] without waiting: `None` while an earlier
    /// incarnation's stream is still open and `deadline` has not passed.
    fn bytes_to_skip_now(&self, deadline: Instant) -> Option<u64> {
        if self.incarnation == 0 {
            return Some(0);
        }
        let streams = self.ledger.streams.lock().expect("ledger");
        (streams[self.stream].open_count <= 1 || Instant::now() >= deadline)
            .then_some(streams[self.stream].shown_bytes)
    }

    /// How many bytes at the start of this stream were shown already: 0
    /// for the first incarnation; for a later one, what the earlier ones
    /// showed, once their streams ended (bounded wait).
    fn bytes_to_skip(&self) -> u64 {
        if self.incarnation == 0 {
            return 0;
        }
        let deadline = Instant::now() + PREVIOUS_STREAM_WAIT;
        let mut streams = self.ledger.streams.lock().expect("ledger");
        while streams[self.stream].open_count > 1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            streams = self
                .ledger
                .changed
                .wait_timeout(streams, left)
                .expect("ledger")
                .0;
        }
        streams[self.stream].shown_bytes
    }

    /// This stream has read `position` bytes in all.
    fn reached(&self, position: u64) {
        let mut streams = self.ledger.streams.lock().expect("ledger");
        let entry = &mut streams[self.stream];
        entry.shown_bytes = entry.shown_bytes.max(position);
    }

    fn close(&self) {
        let mut streams = self.ledger.streams.lock().expect("ledger");
        streams[self.stream].open_count -= 1;
        self.ledger.changed.notify_all();
    }
}

/// One incarnation's stream arriving in pieces rather than from a pipe
/// (a proxy's output frames, for a rank on another host), under message
/// logging: what earlier incarnations showed is left out, as
/// [`forward_replayed`] does. It never blocks the reader it runs in (the
/// earlier incarnation's end comes through that same reader): until the
/// earlier streams have ended, what arrives is held, and released by a
/// later call ([`Self::push`], [`Self::retry`] or [`Self::finish`]).
pub struct ReplayedFeed {
    replayed: ReplayedStream,
    /// Bytes still to leave out, once known.
    skip_bytes: Option<u64>,
    /// Until then, what arrived.
    held: Vec<u8>,
    position: u64,
    splitter: LineSplitter,
    deadline: Instant,
}

impl ReplayedFeed {
    /// Incarnation `incarnation`'s stream `stream` of `ledger` opens; lines
    /// get `prefix`.
    pub fn open(
        ledger: Arc<OutputLedger>,
        stream: usize,
        incarnation: u32,
        prefix: &str,
    ) -> ReplayedFeed {
        ReplayedFeed {
            replayed: ReplayedStream::open(ledger, stream, incarnation),
            skip_bytes: None,
            held: Vec::new(),
            position: 0,
            splitter: LineSplitter::new(prefix),
            deadline: Instant::now() + PREVIOUS_STREAM_WAIT,
        }
    }

    /// `replayed` (already open), read by a thread of its own from a pipe:
    /// that thread may wait (bounded) for the earlier incarnations' streams
    /// to end, so the bytes to leave out are known before the first read.
    fn after_earlier(replayed: ReplayedStream, prefix: &str) -> ReplayedFeed {
        let skip_bytes = replayed.bytes_to_skip();
        ReplayedFeed {
            replayed,
            skip_bytes: Some(skip_bytes),
            held: Vec::new(),
            position: 0,
            splitter: LineSplitter::new(prefix),
            deadline: Instant::now(),
        }
    }

    /// The stream's next bytes; returns what may be written now.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.position += bytes.len() as u64;
        self.held.extend_from_slice(bytes);
        self.retry()
    }

    /// What may be written now that another stream may have ended.
    pub fn retry(&mut self) -> Vec<u8> {
        if self.skip_bytes.is_none() {
            self.skip_bytes = self.replayed.bytes_to_skip_now(self.deadline);
        }
        let Some(skip_bytes) = &mut self.skip_bytes else {
            return Vec::new();
        };
        // Only now: what this stream reached must not count as shown
        // before its own skip is known.
        self.replayed.reached(self.position);
        let skipped = (*skip_bytes).min(self.held.len() as u64) as usize;
        *skip_bytes -= skipped as u64;
        let ready = self.splitter.push(&self.held[skipped..]);
        self.held.clear();
        ready
    }

    /// The stream ended; returns the rest to write.
    pub fn finish(mut self) -> Vec<u8> {
        self.deadline = Instant::now().min(self.deadline);
        let mut ready = self.retry();
        ready.extend(self.splitter.finish());
        self.replayed.close();
        ready
    }
}

/// Copies `source` to `destination` line by line until end of file.
pub fn forward(source: impl Read, destination: Destination, prefix: &str) {
    forward_replayed(source, destination, prefix, None)
}

/// [`forward`], and with `replayed`, leave out the first bytes that
/// earlier incarnations of the rank showed already (message logging).
pub fn forward_replayed(
    mut source: impl Read,
    destination: Destination,
    prefix: &str,
    replayed: Option<ReplayedStream>,
) {
    let mut feed = replayed.map(|stream| ReplayedFeed::after_earlier(stream, prefix));
    let mut splitter = LineSplitter::new(prefix);
    let mut chunk = [0u8; 8192];
    let mut destination_open = true;
    let mut emit = |bytes: Vec<u8>| {
        if destination_open && !bytes.is_empty() && write_to(destination, &bytes).is_err() {
            destination_open = false;
        }
    };
    loop {
        match source.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => emit(match &mut feed {
                Some(feed) => feed.push(&chunk[..count]),
                None => splitter.push(&chunk[..count]),
            }),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    emit(match feed {
        Some(feed) => feed.finish(),
        None => splitter.finish(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fed_incarnation_holds_its_bytes_until_the_earlier_one_ended() {
        let ledger = Arc::new(OutputLedger::new(2));
        let mut first = ReplayedFeed::open(ledger.clone(), 1, 0, "[1] ");
        assert_eq!(first.push(b"a\nb"), b"[1] a\n");
        let mut second = ReplayedFeed::open(ledger.clone(), 1, 1, "[1] ");
        // The first is still open: the second's replay is held (and what
        // it holds is not counted as shown).
        assert_eq!(second.push(b"a\nb\nc"), b"");
        assert_eq!(first.push(b"\n"), b"[1] b\n");
        assert_eq!(first.finish(), b"");
        // The first showed 4 bytes: the second goes on after them.
        assert_eq!(second.retry(), b"");
        assert_eq!(second.push(b"\nd\n"), b"[1] c\n[1] d\n");
        assert_eq!(second.finish(), b"");
    }

    #[test]
    fn only_whole_lines_come_out_each_prefixed() {
        let mut splitter = LineSplitter::new("[3] ");
        assert_eq!(splitter.push(b"hel"), b"");
        assert_eq!(splitter.push(b"lo\nwor"), b"[3] hello\n");
        assert_eq!(splitter.push(b"ld\na\nb"), b"[3] world\n[3] a\n");
        assert_eq!(splitter.finish(), b"[3] b\n");
        assert_eq!(splitter.finish(), b"");
    }

    #[test]
    fn untagged_output_is_passed_through_unchanged() {
        let mut splitter = LineSplitter::new("");
        assert_eq!(splitter.push(b"a\nb"), b"a\n");
        assert_eq!(splitter.finish(), b"b");
    }

    #[test]
    fn a_restarted_incarnation_shows_only_what_goes_beyond_its_predecessors() {
        let ledger = Arc::new(OutputLedger::new(2));
        let first = ReplayedStream::open(ledger.clone(), 0, 0);
        assert_eq!(first.bytes_to_skip(), 0);
        first.reached(11);
        let second = ReplayedStream::open(ledger.clone(), 0, 1);
        first.close();
        assert_eq!(second.bytes_to_skip(), 11);
        second.reached(5);
        second.close();
        // A third incarnation skips the most any earlier one showed.
        let third = ReplayedStream::open(ledger, 0, 2);
        assert_eq!(third.bytes_to_skip(), 11);
    }

    #[test]
    fn an_over_long_line_is_written_in_pieces_with_one_prefix() {
        let mut splitter = LineSplitter::new("[0] ");
        let long = vec![b'x'; MAX_PARTIAL_LINE_BYTES];
        let first = splitter.push(&long);
        assert_eq!(first.len(), MAX_PARTIAL_LINE_BYTES + 4);
        assert!(first.starts_with(b"[0] x"));
        assert_eq!(splitter.push(b"tail\nnext\n"), b"tail\n[0] next\n");
    }
}
