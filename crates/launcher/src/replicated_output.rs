//! The output of a replicated rank (`--replicas`): every replica prints the
//! same lines, and the job must show each once, from one replica, and go
//! on from a survivor, with nothing lost or doubled, when that replica is
//! given up.
//!
//! Each replica's stream is cut into units that depend only on its bytes:
//! a line with its newline, or a piece of exactly
//! [`crate::output::MAX_PARTIAL_LINE_BYTES`] of a longer one, or what is
//! left at end of file. Units are numbered per replica; the primary's are
//! written as they come, and `units_written` counts them. The others'
//! units past that count are held (they are ahead of the primary); those
//! below it are dropped (already shown). When the primary is given up, the
//! next live replica becomes primary and its held units from
//! `units_written` on are written first, so the output goes on exactly
//! where it stopped.
//!
//! Bound: a replica holds at most [`HELD_BYTES_MAX`] ahead of the
//! primary. Past that it drops what it holds and can no longer take over
//! (a gap would be shown otherwise); if no replica can, the rank's output
//! stops with one line on mpiexec's stderr saying so.
//!
//! Not covered: a replica that prints different lines than its siblings
//! (its output depends on `RESMPI_REPLICA`, timing or a clock); and a
//! last line without a newline that the primary printed just before
//! dying, which its successor prints again.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::output::{write_to, Destination, MAX_PARTIAL_LINE_BYTES};

/// Most bytes one replica holds ahead of the primary.
pub const HELD_BYTES_MAX: usize = 4 << 20;

/// One unit of output: bytes, and whether it starts a line (gets the prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Unit {
    bytes: Vec<u8>,
    starts_line: bool,
}

#[derive(Clone, Debug, Default)]
struct ReplicaStream {
    /// Cuts its bytes into units (here, not in its feed: a replica forked
    /// from this one goes on from the same point, [`RankOutput::fork_stream`]).
    cutter: UnitCutter,
    /// The pipe it is read from, while a [`forward_replica`] thread reads
    /// it, and whether that thread holds bytes read and not pushed yet.
    pipe_fd: Option<RawFd>,
    reading: bool,
    /// Units this replica has produced.
    units_seen: u64,
    /// Units ahead of the primary: (number, unit).
    held: VecDeque<(u64, Unit)>,
    held_bytes: usize,
    /// Fell more than `HELD_BYTES_MAX` ahead: cannot take over.
    overflowed: bool,
    given_up: bool,
}

#[derive(Debug)]
struct State {
    primary: Option<usize>,
    units_written: u64,
    replicas: Vec<ReplicaStream>,
    /// Output lost (no replica could take over) was reported.
    loss_reported: bool,
}

/// One stream (stdout or stderr) of one rank, fed by every replica.
#[derive(Debug)]
pub struct RankOutput {
    rank: u32,
    destination: Destination,
    prefix: Vec<u8>,
    state: Mutex<State>,
    /// Where units are written (mpiexec's stream; a test's buffer).
    sink: Sink,
}

#[derive(Debug)]
enum Sink {
    Stream,
    #[cfg(test)]
    Buffer(Mutex<Vec<u8>>),
}

impl RankOutput {
    /// The `destination` stream of `rank` with `replica_count` replicas,
    /// each line prefixed with `prefix`; replica 0 is shown first.
    pub fn new(rank: u32, replica_count: u32, destination: Destination, prefix: &str) -> Arc<Self> {
        Arc::new(RankOutput {
            rank,
            destination,
            prefix: prefix.as_bytes().to_vec(),
            state: Mutex::new(State {
                primary: Some(0),
                units_written: 0,
                replicas: (0..replica_count)
                    .map(|_| ReplicaStream::default())
                    .collect(),
                loss_reported: false,
            }),
            sink: Sink::Stream,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self, unit: &Unit) {
        let mut bytes = Vec::with_capacity(unit.bytes.len() + self.prefix.len());
        if unit.starts_line {
            bytes.extend_from_slice(&self.prefix);
        }
        bytes.extend_from_slice(&unit.bytes);
        match &self.sink {
            // An output mpiexec cannot write any more is not the job's failure.
            Sink::Stream => {
                let _ = write_to(self.destination, &bytes);
            }
            #[cfg(test)]
            Sink::Buffer(buffer) => buffer.lock().unwrap().extend_from_slice(&bytes),
        }
    }

    #[cfg(test)]
    fn push(&self, replica: usize, unit: Unit) {
        self.push_unit(&mut self.state(), replica, unit);
    }

    /// The next bytes of replica `replica`'s stream (its reader holds none
    /// back any more).
    fn push_bytes(&self, replica: usize, bytes: &[u8]) {
        let mut state = self.state();
        let mut cutter = std::mem::take(&mut state.replicas[replica].cutter);
        let mut units = Vec::new();
        cutter.push(bytes, |unit| units.push(unit));
        state.replicas[replica].cutter = cutter;
        state.replicas[replica].reading = false;
        for unit in units {
            self.push_unit(&mut state, replica, unit);
        }
    }

    /// Replica `replica`'s stream ended.
    fn finish_stream(&self, replica: usize) {
        let mut state = self.state();
        let stream = &mut state.replicas[replica];
        stream.pipe_fd = None;
        stream.reading = false;
        let mut unit = None;
        stream.cutter.finish(|last| unit = Some(last));
        if let Some(unit) = unit {
            self.push_unit(&mut state, replica, unit);
        }
    }

    /// Replica `to` was forked from replica `from` (`--replica-recovery`),
    /// which flushed its output before the fork and waits: once `from`'s
    /// pipe is read to its end (at most `wait`), `to`'s stream is `from`'s
    /// up to here, and `to` goes on from there (its own bytes are fed to it
    /// as `to`). False if `from`'s pipe did not drain in time: `to` stays
    /// given up (its output is not shown), so nothing can be doubled.
    pub fn fork_stream(&self, from: usize, to: usize, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            {
                let mut state = self.state();
                let source = &state.replicas[from];
                let drained =
                    !source.reading && source.pipe_fd.is_none_or(|fd| unread_bytes(fd) == Some(0));
                if drained {
                    // Everything but the reader, which is the forker's own.
                    let mut copy = source.clone();
                    copy.pipe_fd = None;
                    state.replicas[to] = copy;
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn push_unit(&self, state: &mut State, replica: usize, unit: Unit) {
        let stream = &mut state.replicas[replica];
        let number = stream.units_seen;
        stream.units_seen += 1;
        if stream.given_up {
            return;
        }
        if state.primary == Some(replica) {
            if number < state.units_written {
                // A successor that was behind: this was shown already.
                return;
            }
            debug_assert_eq!(number, state.units_written);
            self.write(&unit);
            state.units_written = number + 1;
            let written = state.units_written;
            for other in &mut state.replicas {
                while other.held.front().is_some_and(|(held, _)| *held < written) {
                    let (_, unit) = other.held.pop_front().expect("checked");
                    other.held_bytes -= unit.bytes.len();
                }
            }
        } else if number >= state.units_written && !stream.overflowed {
            stream.held_bytes += unit.bytes.len();
            stream.held.push_back((number, unit));
            if stream.held_bytes > HELD_BYTES_MAX {
                stream.overflowed = true;
                stream.held.clear();
                stream.held_bytes = 0;
            }
        }
    }

    /// Replica `replica` is given up: its later output is ignored, and if
    /// it was shown, the next live replica that can take over is.
    pub fn give_up(&self, replica: usize) {
        let mut state = self.state();
        state.replicas[replica].given_up = true;
        state.replicas[replica].held.clear();
        if state.primary != Some(replica) {
            return;
        }
        let successor = (0..state.replicas.len()).find(|&other| {
            let stream = &state.replicas[other];
            !stream.given_up && !stream.overflowed
        });
        state.primary = successor;
        let Some(successor) = successor else {
            if !state.loss_reported && state.replicas.iter().any(|stream| !stream.given_up) {
                state.loss_reported = true;
                eprintln!(
                    "mpiexec: the output of rank {} stops here: no live replica can take it over without a gap (each ran more than {HELD_BYTES_MAX} bytes ahead)",
                    self.rank
                );
            }
            return;
        };
        let held = std::mem::take(&mut state.replicas[successor].held);
        state.replicas[successor].held_bytes = 0;
        for (number, unit) in held {
            if number >= state.units_written {
                debug_assert_eq!(number, state.units_written);
                self.write(&unit);
                state.units_written = number + 1;
            }
        }
    }
}

/// Bytes in pipe `fd` not read yet (None if it cannot be asked).
fn unread_bytes(fd: RawFd) -> Option<usize> {
    let mut count: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into the local `count`.
    let status = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut count) };
    (status == 0).then_some(count.max(0) as usize)
}

/// Cuts a byte stream into [`Unit`]s that depend only on its bytes.
#[derive(Clone, Debug)]
struct UnitCutter {
    pending: Vec<u8>,
    at_line_start: bool,
}

impl Default for UnitCutter {
    fn default() -> UnitCutter {
        UnitCutter::new()
    }
}

impl UnitCutter {
    fn new() -> UnitCutter {
        UnitCutter {
            pending: Vec::new(),
            at_line_start: true,
        }
    }

    fn push(&mut self, bytes: &[u8], mut emit: impl FnMut(Unit)) {
        self.pending.extend_from_slice(bytes);
        loop {
            let end = match self.pending.iter().position(|&byte| byte == b'\n') {
                Some(newline) if newline < MAX_PARTIAL_LINE_BYTES => newline + 1,
                _ if self.pending.len() >= MAX_PARTIAL_LINE_BYTES => MAX_PARTIAL_LINE_BYTES,
                _ => return,
            };
            let bytes: Vec<u8> = self.pending.drain(..end).collect();
            let starts_line = self.at_line_start;
            self.at_line_start = bytes.last() == Some(&b'\n');
            emit(Unit { bytes, starts_line });
        }
    }

    fn finish(&mut self, emit: impl FnOnce(Unit)) {
        if !self.pending.is_empty() {
            emit(Unit {
                bytes: std::mem::take(&mut self.pending),
                starts_line: self.at_line_start,
            });
        }
    }
}

/// Per rank of a replicated job (`--replicas R`, R > 1), its stdout and
/// stderr, fed by every replica; empty without replicas.
pub fn rank_outputs(options: &crate::options::Options) -> Vec<[Arc<RankOutput>; 2]> {
    if options.replica_count <= 1 {
        return Vec::new();
    }
    (0..options.rank_count)
        .map(|rank| {
            let prefix = if options.tag_output {
                format!("[{rank}] ")
            } else {
                String::new()
            };
            [Destination::Stdout, Destination::Stderr].map(|destination| {
                RankOutput::new(rank, options.replica_count, destination, &prefix)
            })
        })
        .collect()
}

/// One replica's stream as it arrives in pieces (from a proxy's output
/// frames from another host), fed into its rank's output.
pub struct ReplicaFeed {
    output: Arc<RankOutput>,
    replica: usize,
}

impl ReplicaFeed {
    /// The stream of replica `replica` of `output`'s rank.
    pub fn new(output: Arc<RankOutput>, replica: usize) -> ReplicaFeed {
        ReplicaFeed { output, replica }
    }

    /// The stream's next bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.output.push_bytes(self.replica, bytes);
    }

    /// The stream ended.
    pub fn finish(self) {
        self.output.finish_stream(self.replica);
    }
}

/// Copies replica `replica`'s stream `source` (a pipe or socket) into
/// `output` until end of file. It waits for bytes before it reads them, and
/// says when it holds some, so that [`RankOutput::fork_stream`] can tell
/// when everything written so far is in.
pub fn forward_replica(
    mut source: impl std::io::Read + AsRawFd,
    output: Arc<RankOutput>,
    replica: usize,
) {
    let fd = source.as_raw_fd();
    output.state().replicas[replica].pipe_fd = Some(fd);
    let mut chunk = [0u8; 8192];
    loop {
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one descriptor this thread owns, into a local.
        if unsafe { libc::poll(&mut pollfd, 1, -1) } < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        output.state().replicas[replica].reading = true;
        match source.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => output.push_bytes(replica, &chunk[..count]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    output.finish_stream(replica);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(replicas: u32, prefix: &str) -> Arc<RankOutput> {
        Arc::new(RankOutput {
            rank: 3,
            destination: Destination::Stdout,
            prefix: prefix.as_bytes().to_vec(),
            state: Mutex::new(State {
                primary: Some(0),
                units_written: 0,
                replicas: (0..replicas).map(|_| ReplicaStream::default()).collect(),
                loss_reported: false,
            }),
            sink: Sink::Buffer(Mutex::new(Vec::new())),
        })
    }

    fn shown(output: &RankOutput) -> String {
        match &output.sink {
            Sink::Buffer(buffer) => String::from_utf8(buffer.lock().unwrap().clone()).unwrap(),
            Sink::Stream => unreachable!(),
        }
    }

    fn feed(output: &RankOutput, replica: usize, text: &str) {
        let mut cutter = UnitCutter::new();
        cutter.push(text.as_bytes(), |unit| output.push(replica, unit));
    }

    #[test]
    fn only_the_primary_is_shown_while_it_lives() {
        let rank = output(2, "[3] ");
        feed(&rank, 1, "a\nb\nc\n");
        feed(&rank, 0, "a\nb\n");
        assert_eq!(shown(&rank), "[3] a\n[3] b\n");
    }

    #[test]
    fn a_survivor_ahead_of_the_given_up_primary_fills_in_exactly_the_rest() {
        let rank = output(3, "");
        feed(&rank, 0, "1\n2\n");
        feed(&rank, 1, "1\n2\n3\n4\n");
        feed(&rank, 2, "1\n");
        rank.give_up(0);
        assert_eq!(shown(&rank), "1\n2\n3\n4\n");
        feed(&rank, 0, "3\n");
        feed(&rank, 1, "5\n");
        feed(&rank, 2, "2\n3\n4\n5\n6\n");
        assert_eq!(shown(&rank), "1\n2\n3\n4\n5\n");
        rank.give_up(1);
        assert_eq!(shown(&rank), "1\n2\n3\n4\n5\n6\n");
    }

    #[test]
    fn a_survivor_behind_the_given_up_primary_shows_only_what_is_new() {
        let rank = output(2, "");
        feed(&rank, 0, "1\n2\n3\n");
        feed(&rank, 1, "1\n");
        rank.give_up(0);
        feed(&rank, 1, "2\n3\n4\n");
        assert_eq!(shown(&rank), "1\n2\n3\n4\n");
    }

    #[test]
    fn a_forked_replica_goes_on_from_its_forkers_point_mid_line_too() {
        let rank = output(2, "[3] ");
        rank.push_bytes(0, b"1\n2\npart");
        rank.push_bytes(1, b"1\n");
        rank.give_up(1);
        // Replica 1 is forked again from replica 0, which has written two
        // lines and half a third.
        assert!(rank.fork_stream(0, 1, Duration::ZERO));
        rank.push_bytes(1, b"ial\n3\n4\n");
        rank.push_bytes(0, b"ial\n");
        assert_eq!(shown(&rank), "[3] 1\n[3] 2\n[3] partial\n");
        rank.give_up(0);
        assert_eq!(shown(&rank), "[3] 1\n[3] 2\n[3] partial\n[3] 3\n[3] 4\n");
    }

    #[test]
    fn a_fork_waits_for_its_forkers_pipe_to_be_read() {
        let rank = output(2, "");
        let (mut writer, reader) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::io::Write;
        writer.write_all(b"unread\n").unwrap();
        // Not read yet: no fork point.
        rank.state().replicas[0].pipe_fd = Some(reader.as_raw_fd());
        assert!(!rank.fork_stream(0, 1, Duration::from_millis(20)));
        let forwarder = {
            let rank = rank.clone();
            std::thread::spawn(move || forward_replica(reader, rank, 0))
        };
        assert!(rank.fork_stream(0, 1, Duration::from_secs(10)));
        drop(writer);
        forwarder.join().unwrap();
        rank.give_up(0);
        rank.push_bytes(1, b"after\n");
        assert_eq!(shown(&rank), "unread\nafter\n");
    }

    #[test]
    fn a_replica_too_far_ahead_cannot_take_over_and_the_next_one_does() {
        let rank = output(3, "");
        feed(&rank, 0, "x\n");
        let long_line = format!("{}\n", "y".repeat(1000));
        for _ in 0..(HELD_BYTES_MAX / 1000 + 2) {
            feed(&rank, 1, &long_line);
        }
        feed(&rank, 2, "x\nz\n");
        rank.give_up(0);
        assert_eq!(shown(&rank), "x\nz\n");
    }

    #[test]
    fn units_depend_on_the_bytes_not_on_how_they_were_read() {
        let text = format!("short\n{}\nend", "w".repeat(MAX_PARTIAL_LINE_BYTES + 10));
        let cut = |chunk_bytes: usize| {
            let mut cutter = UnitCutter::new();
            let mut units = Vec::new();
            for chunk in text.as_bytes().chunks(chunk_bytes) {
                cutter.push(chunk, |unit| units.push(unit));
            }
            cutter.finish(|unit| units.push(unit));
            units
        };
        let whole = cut(text.len());
        assert_eq!(whole.len(), 4);
        assert!(whole[1].starts_line && !whole[2].starts_line);
        assert_eq!(cut(7), whole);
        assert_eq!(cut(8192), whole);
    }
}
