//! The sender log's overflow on local disk: payloads that no longer fit
//! the memory bound (`RESMPI_MSGLOG_MEM`) go to one file per process,
//! written by a background thread, read back only when a destination
//! restarts and must be sent its history again.
//!
//! Why a thread: a send that spills must not wait for the disk. The
//! sending thread hands the payload over (a move, not a copy) and goes on;
//! the writer appends it at an offset fixed at hand-over, so the file's
//! layout is known before the bytes are there. Memory stays bounded: the
//! bytes handed over but not yet written count against
//! `queued_bytes_max`, and a sender that would pass it waits for the
//! writer (back-pressure, as the links do).
//!
//! Why the file is unlinked at once: it is this process's scratch. Nobody
//! else reads it (a restarted rank gets its history from the survivors'
//! memory and files, never from its own), so when the process ends, by
//! `MPI_Finalize` or by a crash, the kernel frees it and nothing is left
//! behind in the directory.
//!
//! Every record is `crc32c (4 bytes, little-endian) | payload`: a record
//! read back that does not match is an error naming the file's directory,
//! not a wrong message replayed.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use resmpi_checksum::crc32c;

/// Bytes in front of every record: its payload's CRC32C.
pub const RECORD_HEADER_BYTES: u64 = 4;

/// Default bound of one process's spill file (`RESMPI_MSGLOG_DISK`): 8 GiB.
pub const SPILL_BYTES_MAX_DEFAULT: u64 = 8 << 30;

/// Default bound of the bytes handed to the writer but not yet written.
pub const QUEUED_BYTES_MAX_DEFAULT: usize = 64 << 20;

/// Where and how much a process may spill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpillConfig {
    /// Directory of the spill file (local disk; `RESMPI_MSGLOG_SPILL_DIR`).
    pub directory: PathBuf,
    /// Bytes the file may grow to, record headers included
    /// (`RESMPI_MSGLOG_DISK`); 0 turns spilling off.
    pub bytes_max: u64,
    /// Bytes handed to the writer and not yet written, at most.
    pub queued_bytes_max: usize,
}

impl SpillConfig {
    /// `bytes_max` bytes in `directory`, with the default queue bound.
    pub fn new(directory: impl Into<PathBuf>, bytes_max: u64) -> SpillConfig {
        SpillConfig {
            directory: directory.into(),
            bytes_max,
            queued_bytes_max: QUEUED_BYTES_MAX_DEFAULT,
        }
    }
}

/// Where one spilled payload lies in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpilledAt {
    /// Offset of its record (the CRC in front of the payload).
    pub offset: u64,
    /// Payload bytes.
    pub length: u64,
}

/// What the writer has done, shared with the sending thread.
#[derive(Debug, Default)]
struct Progress {
    /// Every record ending at or before this offset is in the file.
    written_upto: u64,
    /// Bytes handed over and not yet written.
    queued_bytes: usize,
    /// The first write that failed: no record after it can be trusted.
    error: Option<String>,
}

type Shared = Arc<(Mutex<Progress>, Condvar)>;

/// Bytes the writer can own while it writes them (a `Vec`, or a range
/// of the sender log's arena that stays untouched while held).
type SpillBytes = Box<dyn AsRef<[u8]> + Send>;

/// One record for the writer: payload bytes and where they go.
struct Job {
    offset: u64,
    payload: SpillBytes,
}

/// One process's spill file and its writer thread.
pub struct SpillFile {
    file: Arc<File>,
    directory: PathBuf,
    jobs: Option<Sender<Job>>,
    shared: Shared,
    writer: Option<JoinHandle<()>>,
    next_offset: u64,
    bytes_max: u64,
    queued_bytes_max: usize,
}

impl std::fmt::Debug for SpillFile {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SpillFile")
            .field("directory", &self.directory)
            .field("bytes_spilled", &self.next_offset)
            .field("bytes_max", &self.bytes_max)
            .finish()
    }
}

impl SpillFile {
    /// Create the file (unlinked at once) and start its writer.
    pub fn open(config: &SpillConfig, rank: u32) -> Result<SpillFile, String> {
        let file = create_unlinked(&config.directory, rank)?;
        let file = Arc::new(file);
        let shared: Shared = Arc::default();
        let (jobs, inbox) = channel::<Job>();
        let writer = {
            let file = Arc::clone(&file);
            let shared = Arc::clone(&shared);
            let directory = config.directory.clone();
            std::thread::Builder::new()
                .name("resmpi-msglog-spill".to_string())
                .spawn(move || {
                    for job in inbox {
                        let length = (*job.payload).as_ref().len();
                        let outcome = write_record(&file, job.offset, (*job.payload).as_ref());
                        // Let go of the bytes (an arena chunk may wait for
                        // it) before the sender can see them written.
                        drop(job.payload);
                        let (lock, wake) = &*shared;
                        let mut progress = lock.lock().unwrap_or_else(|e| e.into_inner());
                        progress.queued_bytes -= length;
                        match outcome {
                            Ok(()) => {
                                progress.written_upto =
                                    job.offset + RECORD_HEADER_BYTES + length as u64;
                            }
                            Err(error) => {
                                progress.error.get_or_insert(format!(
                                    "writing the message-log spill file in {}: {error}",
                                    directory.display()
                                ));
                            }
                        }
                        wake.notify_all();
                    }
                })
                .map_err(|error| format!("starting the message-log spill writer: {error}"))?
        };
        Ok(SpillFile {
            file,
            directory: config.directory.clone(),
            jobs: Some(jobs),
            shared,
            writer: Some(writer),
            next_offset: 0,
            bytes_max: config.bytes_max,
            queued_bytes_max: config.queued_bytes_max.max(1),
        })
    }

    /// Whether a record of `length` payload bytes still fits the bound.
    pub fn has_room(&self, length: usize) -> bool {
        self.next_offset + RECORD_HEADER_BYTES + length as u64 <= self.bytes_max
    }

    /// Hand `payload` to the writer; where it will lie. Waits only while
    /// the writer is more than `queued_bytes_max` behind. Err: an earlier
    /// write failed, or the payload does not fit the bound.
    pub fn append(
        &mut self,
        payload: impl AsRef<[u8]> + Send + 'static,
    ) -> Result<SpilledAt, String> {
        let length = payload.as_ref().len();
        if !self.has_room(length) {
            return Err(format!(
                "the message-log spill file in {} reached its bound of {} bytes \
                 (RESMPI_MSGLOG_DISK / --msglog-disk)",
                self.directory.display(),
                self.bytes_max
            ));
        }
        {
            let (lock, wake) = &*self.shared;
            let mut progress = lock.lock().unwrap_or_else(|e| e.into_inner());
            while progress.error.is_none()
                && progress.queued_bytes > 0
                && progress.queued_bytes + length > self.queued_bytes_max
            {
                progress = wake.wait(progress).unwrap_or_else(|e| e.into_inner());
            }
            if let Some(error) = &progress.error {
                return Err(error.clone());
            }
            progress.queued_bytes += length;
        }
        let at = SpilledAt {
            offset: self.next_offset,
            length: length as u64,
        };
        let sent = self.jobs.as_ref().is_some_and(|jobs| {
            jobs.send(Job {
                offset: at.offset,
                payload: Box::new(payload),
            })
            .is_ok()
        });
        if !sent {
            return Err("the message-log spill writer has stopped".to_string());
        }
        self.next_offset += RECORD_HEADER_BYTES + at.length;
        Ok(at)
    }

    /// The payload spilled at `at`, once the writer has written it.
    pub fn read(&self, at: SpilledAt) -> Result<Vec<u8>, String> {
        let end = at.offset + RECORD_HEADER_BYTES + at.length;
        {
            let (lock, wake) = &*self.shared;
            let mut progress = lock.lock().unwrap_or_else(|e| e.into_inner());
            while progress.written_upto < end && progress.error.is_none() {
                progress = wake.wait(progress).unwrap_or_else(|e| e.into_inner());
            }
            if progress.written_upto < end {
                return Err(progress.error.clone().unwrap_or_default());
            }
        }
        let mut record = vec![0u8; (RECORD_HEADER_BYTES + at.length) as usize];
        self.file
            .read_exact_at(&mut record, at.offset)
            .map_err(|error| {
                format!(
                    "reading the message-log spill file in {}: {error}",
                    self.directory.display()
                )
            })?;
        let payload = record.split_off(RECORD_HEADER_BYTES as usize);
        let stored = u32::from_le_bytes([record[0], record[1], record[2], record[3]]);
        if crc32c(&payload) != stored {
            return Err(format!(
                "a record of the message-log spill file in {} (offset {}) fails its CRC32C",
                self.directory.display(),
                at.offset
            ));
        }
        Ok(payload)
    }

    /// Bytes handed to the file so far, record headers included.
    pub fn bytes_spilled(&self) -> u64 {
        self.next_offset
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        // Closing the channel ends the writer's loop.
        self.jobs = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

fn write_record(file: &File, offset: u64, payload: &[u8]) -> std::io::Result<()> {
    file.write_all_at(&crc32c(payload).to_le_bytes(), offset)?;
    file.write_all_at(payload, offset + RECORD_HEADER_BYTES)
}

/// A new file in `directory` that no name points to any more.
fn create_unlinked(directory: &Path, rank: u32) -> Result<File, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or(0);
    let path = directory.join(format!(
        ".resmpi-msglog-spill-{}-{rank}-{nanos}",
        std::process::id()
    ));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|error| {
            format!(
                "creating the message-log spill file in {} (RESMPI_MSGLOG_SPILL_DIR / \
                 --msglog-spill-dir): {error}",
                directory.display()
            )
        })?;
    std::fs::remove_file(&path).map_err(|error| {
        format!(
            "unlinking the message-log spill file {}: {error}",
            path.display()
        )
    })?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        std::env::temp_dir()
    }

    #[test]
    fn records_read_back_as_written_and_the_directory_stays_clean() {
        let directory = scratch().join(format!("resmpi-spill-test-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let mut spill = SpillFile::open(&SpillConfig::new(&directory, 1 << 20), 3).unwrap();
        let places: Vec<SpilledAt> = (0..50u8)
            .map(|n| spill.append(vec![n; n as usize * 7]).unwrap())
            .collect();
        for (n, at) in places.iter().enumerate().rev() {
            assert_eq!(spill.read(*at).unwrap(), vec![n as u8; n * 7]);
        }
        assert_eq!(
            spill.bytes_spilled(),
            (0..50u64).map(|n| n * 7 + RECORD_HEADER_BYTES).sum::<u64>()
        );
        assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 0);
        drop(spill);
        std::fs::remove_dir(&directory).unwrap();
    }

    #[test]
    fn the_bound_is_kept_and_named() {
        let mut spill = SpillFile::open(&SpillConfig::new(scratch(), 100), 0).unwrap();
        spill.append(vec![1; 96]).unwrap();
        let error = spill.append(vec![]).unwrap_err();
        assert!(error.contains("bound of 100 bytes"), "{error}");
        assert!(!spill.has_room(0));
    }

    #[test]
    fn a_damaged_record_is_an_error_not_a_message() {
        let spill_config = SpillConfig::new(scratch(), 1 << 20);
        let mut spill = SpillFile::open(&spill_config, 0).unwrap();
        let at = spill.append(vec![9; 64]).unwrap();
        spill.read(at).unwrap();
        spill.file.write_all_at(&[0], at.offset + 10).unwrap();
        let error = spill.read(at).unwrap_err();
        assert!(error.contains("fails its CRC32C"), "{error}");
    }

    #[test]
    fn a_small_queue_bound_makes_the_sender_wait_not_fail() {
        let mut spill_config = SpillConfig::new(scratch(), 1 << 24);
        spill_config.queued_bytes_max = 1000;
        let mut spill = SpillFile::open(&spill_config, 0).unwrap();
        let places: Vec<SpilledAt> = (0..200u32)
            .map(|n| spill.append(vec![n as u8; 900]).unwrap())
            .collect();
        for (n, at) in places.iter().enumerate() {
            assert_eq!(spill.read(*at).unwrap(), vec![n as u8; 900]);
        }
    }

    #[test]
    fn a_missing_directory_is_a_clear_error() {
        let error =
            SpillFile::open(&SpillConfig::new("/nonexistent/resmpi", 1 << 20), 0).unwrap_err();
        assert!(error.contains("/nonexistent/resmpi"), "{error}");
        assert!(error.contains("RESMPI_MSGLOG_SPILL_DIR"), "{error}");
    }
}
