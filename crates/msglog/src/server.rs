//! The event-logger process's I/O (`mpiexec --event-logger`): the socket
//! every rank connects to, the append-only file, the fsync, around the
//! sans-IO [`EventLogger`].
//!
//! Why threads and one channel: one reader thread per rank's connection
//! turns bytes into frames; the main thread takes every frame that has
//! arrived, hands them to the state machine, appends the batch they make
//! and syncs it once (group commit: the fsync is the cost, and ranks that
//! log at the same time share it), then sends the acks. mpiexec owns the
//! listening socket and passes it to every logger it starts, so a
//! restarted logger is reached at the same address and connections made
//! while it was down wait in the socket's backlog.
//!
//! Compaction (`EventLogger::poll_compaction`) runs on the same thread
//! between batches: the rewrite goes to [`COMPACTING_FILE_NAME`], is
//! synced, renamed over the log, and the directory synced; a logger
//! killed before the rename leaves the old log whole (and the temporary,
//! removed at the next start), one killed after it the new one.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::event_logger::{EventLogger, LoggerCounters};
use crate::logger_link::FRAME_BYTES_MAX;

/// The log's file name in the logger's directory.
pub const LOG_FILE_NAME: &str = "determinants.log";
/// The compaction's temporary (renamed over the log once whole and synced).
pub const COMPACTING_FILE_NAME: &str = "determinants.log.compacting";
/// The counters' file name (rewritten after every batch; mpiexec reads it
/// for the fault-tolerance report).
pub const COUNTERS_FILE_NAME: &str = "eventlog.counters";

enum Input {
    Opened(u64, TcpStream),
    Frame(u64, Vec<u8>),
    Closed(u64),
}

/// The path of the log in `directory`.
pub fn log_path(directory: &Path) -> PathBuf {
    directory.join(LOG_FILE_NAME)
}

/// Serve ranks on `listener`, logging into `directory`; `fresh`: a new
/// job (an old log there is discarded), else a restart that reads the log
/// back. Returns only on an error.
pub fn serve(listener: TcpListener, directory: &Path, fresh: bool) -> Result<(), String> {
    let path = log_path(directory);
    let counters_path = directory.join(COUNTERS_FILE_NAME);
    let (mut logger, mut file) = open_log(&path, fresh)?;
    if let Some(count) = std::env::var(crate::event_logger::STORE_COUNT_MAX_VARIABLE)
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
    {
        logger = logger.with_store_count_max(count);
    }
    if !fresh {
        if let Ok(text) = std::fs::read_to_string(&counters_path) {
            let earlier = parse_counters(&text);
            logger.counters.batches_synced += earlier.batches_synced;
            logger.counters.bytes_appended += earlier.bytes_appended;
            // What the file read back no longer holds was trimmed before.
            logger.counters.determinants_trimmed = earlier
                .determinants_trimmed
                .max(logger.counters.determinants_trimmed);
            logger.counters.compactions += earlier.compactions;
            logger.counters.log_bytes_compacted += earlier.log_bytes_compacted;
            logger.counters.determinants_live_max = earlier
                .determinants_live_max
                .max(logger.counters.determinants_live_max);
        }
    }
    let (sender, receiver) = mpsc::channel();
    std::thread::Builder::new()
        .name("eventlog-accept".into())
        .spawn(move || accept(listener, sender))
        .map_err(|error| format!("event logger: cannot start a thread: {error}"))?;
    let mut writers: HashMap<u64, TcpStream> = HashMap::new();
    write_counters(&counters_path, &logger.report(), 0);
    let mut connections_counted = 0;
    loop {
        let first = receiver
            .recv()
            .map_err(|_| "event logger: the listener stopped".to_string())?;
        // Everything that arrived together is one batch.
        for input in std::iter::once(first).chain(receiver.try_iter()) {
            match input {
                Input::Opened(connection, stream) => {
                    writers.insert(connection, stream);
                }
                Input::Frame(connection, bytes) => logger.handle_frame(connection, &bytes),
                Input::Closed(connection) => {
                    writers.remove(&connection);
                    logger.handle_closed(connection);
                }
            }
        }
        while let Some(batch) = logger.poll_write() {
            file.write_all(&batch)
                .and_then(|()| file.sync_data())
                .map_err(|error| format!("event logger: cannot write {path:?}: {error}"))?;
            logger.handle_durable();
            write_counters(&counters_path, &logger.report(), writers.len());
            connections_counted = writers.len();
        }
        if let Some(image) = logger.poll_compaction() {
            file = compact(&path, &image)?;
            logger.handle_compacted(image.len() as u64);
            write_counters(&counters_path, &logger.report(), writers.len());
        }
        // Every rank gone and what they sent on disk: mpiexec, ending the
        // job, waits for this before it stops the logger.
        if writers.len() != connections_counted {
            write_counters(&counters_path, &logger.report(), writers.len());
            connections_counted = writers.len();
        }
        while let Some((connection, frame)) = logger.poll_frame() {
            if let Some(stream) = writers.get_mut(&connection) {
                let mut bytes = (frame.len() as u32).to_le_bytes().to_vec();
                bytes.extend_from_slice(&frame);
                // A rank gone: its reader reports the close.
                let _ = stream.write_all(&bytes);
            }
        }
    }
}

/// Replace the log at `path` with `image` atomically: a temporary beside
/// it, synced, renamed over it, the directory synced. Returns the new log
/// opened for appending.
pub fn compact(path: &Path, image: &[u8]) -> Result<File, String> {
    let temporary = path.with_file_name(COMPACTING_FILE_NAME);
    let name = |error: std::io::Error| format!("event logger: compacting {path:?}: {error}");
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&temporary)
        .map_err(name)?;
    file.write_all(image)
        .and_then(|()| file.sync_all())
        .map_err(name)?;
    drop(file);
    std::fs::rename(&temporary, path).map_err(name)?;
    if let Some(directory) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        File::open(directory)
            .and_then(|directory| directory.sync_all())
            .map_err(name)?;
    }
    OpenOptions::new().append(true).open(path).map_err(name)
}

/// The logger and its file opened for appending: a fresh one, or one read
/// back (truncated after its last whole record). A compaction's temporary
/// left by a logger killed before its rename is removed: the log beside it
/// is whole.
pub fn open_log(path: &Path, fresh: bool) -> Result<(EventLogger, File), String> {
    let name = |error: std::io::Error| format!("event logger: {path:?}: {error}");
    match std::fs::remove_file(path.with_file_name(COMPACTING_FILE_NAME)) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(name(error)),
    }
    if fresh {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .map_err(name)?;
        file.sync_all().map_err(name)?;
        return Ok((EventLogger::new(), file));
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(name(error)),
    };
    let (logger, length) = EventLogger::recover(&bytes)?;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(name)?;
    if length < bytes.len() {
        // A torn last record: never synced, never acked.
        file.set_len(length as u64).map_err(name)?;
        file.sync_all().map_err(name)?;
    }
    Ok((logger, file))
}

fn accept(listener: TcpListener, sender: mpsc::Sender<Input>) {
    let mut next_connection = 0u64;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        let Ok(writer) = stream.try_clone() else {
            continue;
        };
        next_connection += 1;
        let connection = next_connection;
        if sender.send(Input::Opened(connection, writer)).is_err() {
            return;
        }
        let sender = sender.clone();
        let spawned = std::thread::Builder::new()
            .name("eventlog-read".into())
            .spawn(move || read_frames(connection, stream, &sender));
        if spawned.is_err() {
            return;
        }
    }
}

fn read_frames(connection: u64, mut stream: TcpStream, sender: &mpsc::Sender<Input>) {
    loop {
        let mut header = [0u8; 4];
        if stream.read_exact(&mut header).is_err() {
            break;
        }
        let length = u32::from_le_bytes(header) as usize;
        if length > FRAME_BYTES_MAX {
            break;
        }
        let mut frame = vec![0u8; length];
        if stream.read_exact(&mut frame).is_err() {
            break;
        }
        if sender.send(Input::Frame(connection, frame)).is_err() {
            return;
        }
    }
    let _ = sender.send(Input::Closed(connection));
}

/// The counters by name, as the counters' file and the FT report name them.
pub fn named_counters(counters: &LoggerCounters) -> [(&'static str, u64); 11] {
    [
        ("determinants_stored", counters.determinants_stored),
        ("batches_synced", counters.batches_synced),
        ("bytes_appended", counters.bytes_appended),
        ("determinants_recovered", counters.determinants_recovered),
        ("protocol_errors", counters.protocol_errors),
        ("determinants_trimmed", counters.determinants_trimmed),
        ("compactions", counters.compactions),
        ("log_bytes_compacted", counters.log_bytes_compacted),
        ("determinants_live", counters.determinants_live),
        ("determinants_live_max", counters.determinants_live_max),
        ("log_bytes", counters.log_bytes),
    ]
}

/// The counters as `name value` lines.
pub fn format_counters(counters: &LoggerCounters) -> String {
    named_counters(counters)
        .iter()
        .map(|(name, value)| format!("{name} {value}\n"))
        .collect()
}

/// Counters from [`format_counters`]'s text (unknown or bad lines skipped).
pub fn parse_counters(text: &str) -> LoggerCounters {
    let mut counters = LoggerCounters::default();
    for line in text.lines() {
        let Some((name, value)) = line.split_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        match name {
            "determinants_stored" => counters.determinants_stored = value,
            "batches_synced" => counters.batches_synced = value,
            "bytes_appended" => counters.bytes_appended = value,
            "determinants_recovered" => counters.determinants_recovered = value,
            "protocol_errors" => counters.protocol_errors = value,
            "determinants_trimmed" => counters.determinants_trimmed = value,
            "compactions" => counters.compactions = value,
            "log_bytes_compacted" => counters.log_bytes_compacted = value,
            "determinants_live" => counters.determinants_live = value,
            "determinants_live_max" => counters.determinants_live_max = value,
            "log_bytes" => counters.log_bytes = value,
            _ => {}
        }
    }
    counters
}

/// The line of the counters' file that says how many ranks are connected
/// (written after the batches that came before it are on disk).
pub const CONNECTIONS_OPEN: &str = "connections_open";

fn write_counters(path: &Path, counters: &LoggerCounters, connections_open: usize) {
    // Temporary and rename: mpiexec never reads half a file.
    let temporary = path.with_extension("tmp");
    let text = format!(
        "{}{CONNECTIONS_OPEN} {connections_open}\n",
        format_counters(counters)
    );
    if std::fs::write(&temporary, text).is_ok() {
        let _ = std::fs::rename(&temporary, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_logger::{append_record, TRIM_RECORD_FLAG};
    use crate::frames::{Determinant, Entry};

    fn scratch_directory(name: &str) -> PathBuf {
        let directory = std::env::temp_dir().join(format!(
            "resmpi-eventlog-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        directory
    }

    /// A log of rank 0's determinants 0..`count`, one record each, then a
    /// trim of the first `trimmed`.
    fn log_bytes(count: u64, trimmed: u64) -> Vec<u8> {
        let mut file = Vec::new();
        for ordinal in 0..count {
            let entry = Entry::Wildcard(Determinant { ordinal, source: 1 });
            append_record(&mut file, 0, ordinal, &[entry]);
        }
        append_record(&mut file, TRIM_RECORD_FLAG, trimmed, &[]);
        file
    }

    #[test]
    fn a_logger_killed_before_its_compaction_renamed_reads_back_the_old_log() {
        let directory = scratch_directory("killed-compacting");
        let path = log_path(&directory);
        let old = log_bytes(1000, 990);
        std::fs::write(&path, &old).unwrap();
        let (before, _) = open_log(&path, false).unwrap();
        let image = before.compacted_file();
        // Killed halfway through writing the rewrite.
        let temporary = directory.join(COMPACTING_FILE_NAME);
        std::fs::write(&temporary, &image[..image.len() / 2]).unwrap();
        let (after, _) = open_log(&path, false).unwrap();
        assert_eq!(after.entries(0), before.entries(0));
        assert_eq!(after.trimmed(0), 990);
        assert!(!temporary.exists(), "the half-written rewrite is removed");
        assert_eq!(std::fs::read(&path).unwrap(), old);
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn a_compacted_log_replaces_the_old_one_whole_and_takes_appends() {
        let directory = scratch_directory("compacted");
        let path = log_path(&directory);
        std::fs::write(&path, log_bytes(1000, 990)).unwrap();
        let (before, _) = open_log(&path, false).unwrap();
        let image = before.compacted_file();
        let mut file = compact(&path, &image).unwrap();
        assert!(!directory.join(COMPACTING_FILE_NAME).exists());
        let mut more = Vec::new();
        let entry = Entry::Wildcard(Determinant {
            ordinal: 1000,
            source: 2,
        });
        append_record(&mut more, 0, 1000, std::slice::from_ref(&entry));
        file.write_all(&more).unwrap();
        drop(file);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), image.len() + more.len());
        let (after, _) = open_log(&path, false).unwrap();
        assert_eq!(after.trimmed(0), 990);
        assert_eq!(after.entries(0).len(), 11);
        assert_eq!(after.entries(0)[10], entry);
        let _ = std::fs::remove_dir_all(&directory);
    }
}
