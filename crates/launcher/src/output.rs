//! Forwarding of rank stdout/stderr to mpiexec's own, one whole line at a
//! time, so lines from different ranks never interleave mid-line.
//!
//! Each rank stream has its own thread; a line is written under the lock of
//! the destination stream. A line longer than [`MAX_PARTIAL_LINE_BYTES`] is
//! written in pieces (a limit on what a rank that never prints a newline can
//! make us hold). If our own output is closed, the rank's output is still
//! drained so the rank never blocks on a full pipe.

use std::io::{self, Read, Write};

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

/// Copies `source` to `destination` line by line until end of file.
pub fn forward(mut source: impl Read, destination: Destination, prefix: &str) {
    let mut splitter = LineSplitter::new(prefix);
    let mut chunk = [0u8; 8192];
    let mut destination_open = true;
    let emit = |bytes: Vec<u8>, destination_open: &mut bool| {
        if *destination_open && !bytes.is_empty() && write_to(destination, &bytes).is_err() {
            *destination_open = false;
        }
    };
    loop {
        match source.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => emit(splitter.push(&chunk[..count]), &mut destination_open),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    emit(splitter.finish(), &mut destination_open);
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_over_long_line_is_written_in_pieces_with_one_prefix() {
        let mut splitter = LineSplitter::new("[0] ");
        let long = vec![b'x'; MAX_PARTIAL_LINE_BYTES];
        let first = splitter.push(&long);
        assert_eq!(first.len(), MAX_PARTIAL_LINE_BYTES + 4);
        assert!(first.starts_with(b"[0] x"));
        assert_eq!(splitter.push(b"tail\nnext\n"), b"tail\n[0] next\n");
    }
}
