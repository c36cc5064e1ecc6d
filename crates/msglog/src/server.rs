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
        }
    }
    let (sender, receiver) = mpsc::channel();
    std::thread::Builder::new()
        .name("eventlog-accept".into())
        .spawn(move || accept(listener, sender))
        .map_err(|error| format!("event logger: cannot start a thread: {error}"))?;
    let mut writers: HashMap<u64, TcpStream> = HashMap::new();
    write_counters(&counters_path, &logger.counters, 0);
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
            write_counters(&counters_path, &logger.counters, writers.len());
            connections_counted = writers.len();
        }
        // Every rank gone and what they sent on disk: mpiexec, ending the
        // job, waits for this before it stops the logger.
        if writers.len() != connections_counted {
            write_counters(&counters_path, &logger.counters, writers.len());
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

/// The logger and its file opened for appending: a fresh one, or one read
/// back (truncated after its last whole record).
fn open_log(path: &Path, fresh: bool) -> Result<(EventLogger, File), String> {
    let name = |error: std::io::Error| format!("event logger: {path:?}: {error}");
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

/// The counters as `name value` lines.
pub fn format_counters(counters: &LoggerCounters) -> String {
    format!(
        "determinants_stored {}\nbatches_synced {}\nbytes_appended {}\ndeterminants_recovered {}\nprotocol_errors {}\n",
        counters.determinants_stored,
        counters.batches_synced,
        counters.bytes_appended,
        counters.determinants_recovered,
        counters.protocol_errors
    )
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
