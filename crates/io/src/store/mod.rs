//! A file as MPI-IO sees it: plain, or replicated block by block with a
//! CRC32C per block, read fallback, read-repair and scrub.
//!
//! A replicated write of blocks `b0..=b1` takes an fcntl lock on those
//! blocks (in the lock file beside the primary), reads the partial head and
//! tail blocks it only changes in part (verified, like any read), merges the
//! new bytes, computes each block's CRC over the block padded with zeros to
//! the block size (so extending a file never changes a CRC), and writes
//! data and checksums to all R copies at once, one thread per copy: the
//! time of a replicated write is the slowest copy's, not the sum.
//!
//! A read checks copy 0 (the primary, one `pread` for the whole request)
//! against its checksums; a block that is missing, short, unreadable or
//! fails its checksum is taken from the next copy that passes, and every
//! copy found bad is rewritten from it (read-repair). With
//! `verify_all_copies` every copy of every block read is checked, which is
//! what the `resmpi-io scrub` command does for a whole file. A block no
//! copy has a checksum for was never written: it reads as its bytes (holes
//! read as zeros). A block whose checksummed copies are all bad is an
//! error, never silently wrong data.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::lock::RangeLock;
use crate::placement::{with_suffix, CopyLocation, FileNames, ReplicaLayout};

/// How to open a file (MPI_File_open's amode, in file terms).
#[derive(Clone, Debug, Default)]
pub struct OpenRequest {
    /// Reads are allowed.
    pub read: bool,
    /// Writes are allowed.
    pub write: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail if it exists (with `create`).
    pub exclusive: bool,
    /// The layout for a file this open creates (or finds empty and without
    /// metadata); an existing replicated file keeps its own.
    pub replication: Option<ReplicaLayout>,
}

/// Why one copy of a block was found bad.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Its file (or its checksum file) is missing or cannot be opened.
    Missing,
    /// Its file ends before the block does, and its checksum says bytes
    /// are missing.
    Short,
    /// Its file ends before the block does and it has no checksum for the
    /// block: lost, unless another copy shows the block was never written
    /// (a copy a concurrent writer of another block has not extended yet).
    ShortUnchecked,
    /// Reading it failed.
    Unreadable,
    /// Its data does not match its checksum, or it has no checksum while
    /// another copy has one.
    BadChecksum,
    /// A write to it failed.
    WriteFailed,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Damage::Missing => "missing",
            Damage::Short => "short",
            Damage::ShortUnchecked => "short, no checksum",
            Damage::Unreadable => "unreadable",
            Damage::BadChecksum => "bad checksum",
            Damage::WriteFailed => "write failed",
        })
    }
}

/// One bad copy of one block, and whether it was repaired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The block.
    pub block: u64,
    /// Which copy (0 = the primary).
    pub copy: u32,
    /// The copy's data file.
    pub path: PathBuf,
    /// What was wrong.
    pub damage: Damage,
    /// Whether the copy now holds the right data and checksum.
    pub repaired: bool,
}

impl std::fmt::Display for Repair {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "block {} copy {} ({}): {}, {}",
            self.block,
            self.copy,
            self.path.display(),
            self.damage,
            if self.repaired {
                "repaired"
            } else {
                "NOT repaired"
            }
        )
    }
}

/// One copy's files: data and checksums.
struct CopyFiles {
    data_path: PathBuf,
    checksum_path: PathBuf,
    data: Option<File>,
    checksums: Option<File>,
}

/// Marker in front of every checksum entry, so an entry never written
/// (zeros) is told from a CRC that happens to be 0.
const ENTRY_MARKER: u32 = 0x4352_4332;
const ENTRY_BYTES: u64 = 8;

/// A replicated file's state.
pub struct Replicated {
    layout: ReplicaLayout,
    copies: Vec<CopyFiles>,
    lock: Option<File>,
    writable: bool,
}

/// An open file.
pub struct Store {
    names: FileNames,
    primary: File,
    replicated: Option<Replicated>,
    /// MPI atomic mode: every access locks its byte range.
    pub atomic: bool,
    /// Check every copy of every block read, not only the first good one.
    pub verify_all_copies: bool,
    /// Bad copies found since the caller last took them.
    pub repairs: Vec<Repair>,
    /// Changes kept instead of made, while [`Store::hold_changes`] is on.
    held: Option<HeldChanges>,
    /// Bytes this handle's writes made (held ones not counted).
    bytes_written: u64,
    /// Bytes held and then dropped because another process made them.
    bytes_left_to_others: u64,
}

/// A change to the file kept instead of made: a process that leaves its
/// writes to another one making the same ones (the replicas of a rank
/// under `mpiexec --replicas`) keeps them until that one says it made
/// them, and makes them itself if it never does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldChange {
    /// [`Store::write_at`].
    Write {
        /// Where.
        offset_bytes: u64,
        /// What.
        data: Vec<u8>,
    },
    /// [`Store::set_len`].
    SetLen(u64),
    /// [`Store::preallocate`].
    Preallocate(u64),
}

/// The changes held so far, in order, and the bound on their bytes.
#[derive(Debug, Default)]
struct HeldChanges {
    changes: Vec<HeldChange>,
    bytes: u64,
    bytes_max: u64,
}

fn open_file(
    path: &Path,
    read: bool,
    write: bool,
    create: bool,
    exclusive: bool,
) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(read || !write).write(write);
    if exclusive {
        options.create_new(true);
    } else if create {
        options.create(true);
    }
    options.open(path)
}

/// Read as much of `buffer` as the file has at `offset`; the count read.
fn read_full(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buffer.len() {
        match file.read_at(&mut buffer[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(read) => done += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(done)
}

fn other(message: String) -> io::Error {
    io::Error::other(message)
}

/// The checksum of a block: CRC32C of its bytes padded with zeros.
fn block_checksum(block: &[u8], block_size_bytes: u64) -> u32 {
    if block.len() as u64 == block_size_bytes {
        return resmpi_checksum::crc32c(block);
    }
    let mut padded = block.to_vec();
    padded.resize(block_size_bytes as usize, 0);
    resmpi_checksum::crc32c(&padded)
}

fn encode_entry(checksum: u32) -> [u8; 8] {
    let mut entry = [0u8; 8];
    entry[..4].copy_from_slice(&ENTRY_MARKER.to_le_bytes());
    entry[4..].copy_from_slice(&checksum.to_le_bytes());
    entry
}

/// Where in the lock file (whose bytes are block numbers) the creation of
/// a replicated file is serialised: past any block.
const CREATION_LOCK_AT: u64 = 1 << 62;

/// Read a layout from the metadata beside `path`, if there is any.
pub fn read_metadata(path: &Path) -> io::Result<Option<ReplicaLayout>> {
    let names = FileNames::new(path, &[]);
    match std::fs::read_to_string(&names.metadata) {
        Ok(text) => ReplicaLayout::decode(&text)
            .map(Some)
            .map_err(|error| other(format!("{}: {error}", names.metadata.display()))),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

impl Store {
    /// Open (or create) the file at `path`.
    pub fn open(path: &Path, request: &OpenRequest) -> io::Result<Store> {
        let mut layout = read_metadata(path)?;
        let primary_exists = path.exists();
        // A replicated file whose primary is lost is still there: recreate
        // the primary empty, reads rebuild it from the other copies.
        let create = request.create || (layout.is_some() && !primary_exists && request.write);
        let primary = open_file(path, request.read, request.write, create, request.exclusive)
            .or_else(|error| {
                if layout.is_some() && !primary_exists && !request.write {
                    // Read-only and the primary is gone: an empty stand-in.
                    open_file(Path::new("/dev/null"), true, false, false, false)
                } else {
                    Err(error)
                }
            })?;
        if layout.is_none() && request.write {
            if let Some(wanted) = &request.replication {
                let names = FileNames::new(path, &wanted.targets);
                // Two jobs may create the file at once (the replicas of a
                // rank under `mpiexec --replicas`, each its own
                // MPI_COMM_WORLD): one creates, under a lock, and the other
                // finds its metadata, rather than removing the copies the
                // first has begun to write.
                let lock = open_file(&names.lock, true, true, true, false)?;
                let _creating = RangeLock::exclusive(&lock, CREATION_LOCK_AT, 1)?;
                layout = read_metadata(path)?;
                if layout.is_none() && primary.metadata()?.len() == 0 {
                    // A new file: copies and checksums left by an earlier
                    // file of this name (removed without MPI_File_delete)
                    // must not pass for this one's.
                    let _ = std::fs::remove_file(&names.primary_checksums);
                    for replica in &names.replicas {
                        let _ = std::fs::remove_file(replica);
                        let _ = std::fs::remove_file(with_suffix(replica, ".crc"));
                    }
                    let text = wanted.encode();
                    // Whole or absent: an opener reads it without the lock.
                    let partial =
                        with_suffix(&names.metadata, &format!(".{}.partial", std::process::id()));
                    std::fs::write(&partial, &text)?;
                    std::fs::rename(&partial, &names.metadata)?;
                    // A copy of the metadata on every target (best effort: a
                    // target may be down; scrub restores it).
                    for replica in &names.replicas {
                        let _ = std::fs::write(with_suffix(replica, ".meta"), &text);
                    }
                    layout = Some(wanted.clone());
                }
            }
        }
        let names = FileNames::new(
            path,
            layout
                .as_ref()
                .map_or(&[][..], |layout| &layout.targets[..]),
        );
        let replicated = layout.map(|layout| {
            let writable = request.write || request.read;
            let mut copies = vec![CopyFiles {
                data_path: names.primary.clone(),
                checksum_path: names.primary_checksums.clone(),
                data: None,
                checksums: None,
            }];
            for replica in &names.replicas {
                copies.push(CopyFiles {
                    data_path: replica.clone(),
                    checksum_path: with_suffix(replica, ".crc"),
                    data: None,
                    checksums: None,
                });
            }
            let mut replicated = Replicated {
                layout,
                copies,
                lock: open_file(&names.lock, true, true, true, false).ok(),
                writable,
            };
            for index in 0..replicated.copies.len() {
                replicated.reopen(index, request.write);
            }
            replicated
        });
        Ok(Store {
            names,
            primary,
            replicated,
            atomic: false,
            verify_all_copies: false,
            repairs: Vec::new(),
            held: None,
            bytes_written: 0,
            bytes_left_to_others: 0,
        })
    }

    /// From now on keep writes, size changes and preallocations instead of
    /// making them (until [`Store::take_held`]). Writes past `bytes_max`
    /// held bytes are made at once: the process that should make them makes
    /// the same bytes, so a second write is only a cost, and the memory
    /// held stays bounded.
    pub fn hold_changes(&mut self, bytes_max: u64) {
        self.held = Some(HeldChanges {
            bytes_max,
            ..HeldChanges::default()
        });
    }

    /// Stop holding; the changes held, in the order they were asked for.
    pub fn take_held(&mut self) -> Vec<HeldChange> {
        self.held
            .take()
            .map(|held| held.changes)
            .unwrap_or_default()
    }

    /// Make changes that were held (another process was to make them and
    /// did not).
    pub fn apply_held(&mut self, changes: Vec<HeldChange>) -> io::Result<()> {
        for change in changes {
            match change {
                HeldChange::Write { offset_bytes, data } => self.write_at(offset_bytes, &data)?,
                HeldChange::SetLen(length_bytes) => self.set_len(length_bytes)?,
                HeldChange::Preallocate(length_bytes) => self.preallocate(length_bytes)?,
            }
        }
        Ok(())
    }

    /// Held changes another process made: counted, then dropped.
    pub fn drop_held(&mut self, changes: Vec<HeldChange>) {
        for change in changes {
            if let HeldChange::Write { data, .. } = change {
                self.bytes_left_to_others += data.len() as u64;
            }
        }
    }

    /// Bytes this handle's writes made, and bytes it held and left to
    /// another process that made them.
    pub fn write_counts(&self) -> (u64, u64) {
        (self.bytes_written, self.bytes_left_to_others)
    }

    /// Keep `change` if changes are held and `bytes` more fit; whether it
    /// was kept.
    fn held(&mut self, bytes: u64, change: impl FnOnce() -> HeldChange) -> bool {
        match &mut self.held {
            Some(held) if held.bytes + bytes <= held.bytes_max => {
                held.bytes += bytes;
                held.changes.push(change());
                true
            }
            _ => false,
        }
    }

    /// The file names in use.
    pub fn names(&self) -> &FileNames {
        &self.names
    }

    /// The replication layout, for a replicated file.
    pub fn layout(&self) -> Option<&ReplicaLayout> {
        self.replicated
            .as_ref()
            .map(|replicated| &replicated.layout)
    }

    /// The file's size: the longest copy's.
    pub fn len(&self) -> io::Result<u64> {
        match &self.replicated {
            None => Ok(self.primary.metadata()?.len()),
            Some(replicated) => Ok(replicated.logical_len()),
        }
    }

    /// Whether the file holds no bytes.
    pub fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Read up to `buffer.len()` bytes at `offset`; the count read (short at
    /// the end of the file).
    pub fn read_at(&mut self, offset_bytes: u64, buffer: &mut [u8]) -> io::Result<usize> {
        if buffer.is_empty() {
            return Ok(0);
        }
        let verify_all = self.verify_all_copies;
        match &mut self.replicated {
            None => {
                let _lock = if self.atomic {
                    Some(RangeLock::shared(
                        &self.primary,
                        offset_bytes,
                        buffer.len() as u64,
                    )?)
                } else {
                    None
                };
                read_full(&self.primary, buffer, offset_bytes)
            }
            Some(replicated) => {
                replicated.read_at(offset_bytes, buffer, verify_all, &mut self.repairs)
            }
        }
    }

    /// Write all of `data` at `offset`.
    pub fn write_at(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if self.held(data.len() as u64, || HeldChange::Write {
            offset_bytes,
            data: data.to_vec(),
        }) {
            return Ok(());
        }
        self.bytes_written += data.len() as u64;
        match &mut self.replicated {
            None => {
                let _lock = if self.atomic {
                    Some(RangeLock::exclusive(
                        &self.primary,
                        offset_bytes,
                        data.len() as u64,
                    )?)
                } else {
                    None
                };
                self.primary.write_all_at(data, offset_bytes)
            }
            Some(replicated) => replicated.write_at(offset_bytes, data, &mut self.repairs),
        }
    }

    /// Write each `(offset, bytes)` piece; pieces in increasing file order,
    /// not overlapping (a non-contiguous view's runs). A replicated file
    /// updates each block once however many pieces fall in it, instead of
    /// a read-modify-write per piece.
    pub fn write_pieces(&mut self, pieces: &[(u64, &[u8])]) -> io::Result<()> {
        match &mut self.replicated {
            Some(replicated) if pieces.len() > 1 && self.held.is_none() => {
                self.bytes_written += pieces
                    .iter()
                    .map(|(_, bytes)| bytes.len() as u64)
                    .sum::<u64>();
                replicated.write_pieces(pieces, &mut self.repairs)
            }
            _ => {
                for (offset, bytes) in pieces {
                    self.write_at(*offset, bytes)?;
                }
                Ok(())
            }
        }
    }

    /// Lock `[start, start + length)` of the file (shared for readers,
    /// exclusive for writers) until the lock is dropped: MPI's atomic mode
    /// for an access made of several runs holds one lock over all of them.
    /// Callers that do this leave `atomic` false, so no inner lock of a
    /// sub-range releases part of theirs.
    pub fn lock_range(
        &self,
        start_bytes: u64,
        length_bytes: u64,
        exclusive: bool,
    ) -> io::Result<RangeLock> {
        // On the primary's descriptor, never on the block lock file: closing
        // any descriptor of a file drops all of this process's fcntl locks
        // on it, and block locks come and go inside the access.
        if exclusive {
            RangeLock::exclusive(&self.primary, start_bytes, length_bytes)
        } else {
            RangeLock::shared(&self.primary, start_bytes, length_bytes)
        }
    }

    /// MPI_File_set_size: truncate or extend.
    pub fn set_len(&mut self, length_bytes: u64) -> io::Result<()> {
        if self.held(0, || HeldChange::SetLen(length_bytes)) {
            return Ok(());
        }
        match &mut self.replicated {
            None => self.primary.set_len(length_bytes),
            Some(replicated) => replicated.set_len(length_bytes, &mut self.repairs),
        }
    }

    /// MPI_File_preallocate: make the file at least `length_bytes` long,
    /// with its storage allocated.
    pub fn preallocate(&mut self, length_bytes: u64) -> io::Result<()> {
        if self.held(0, || HeldChange::Preallocate(length_bytes)) {
            return Ok(());
        }
        if self.len()? >= length_bytes {
            return Ok(());
        }
        if self.replicated.is_none() {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid descriptor.
            let result = unsafe {
                libc::posix_fallocate(self.primary.as_raw_fd(), 0, length_bytes as libc::off_t)
            };
            if result == 0 {
                return Ok(());
            }
        }
        self.set_len(length_bytes)
    }

    /// MPI_File_sync: every copy to stable storage.
    pub fn sync(&self) -> io::Result<()> {
        match &self.replicated {
            None => self.primary.sync_all(),
            Some(replicated) => {
                for copy in &replicated.copies {
                    if let Some(data) = &copy.data {
                        data.sync_all()?;
                    }
                    if let Some(checksums) = &copy.checksums {
                        checksums.sync_all()?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Check every copy of every block; repair the bad ones when `repair`.
    /// Returns what was found (also kept in `repairs`).
    pub fn scrub(&mut self, repair: bool) -> io::Result<Vec<Repair>> {
        let Some(replicated) = &mut self.replicated else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        let length = replicated.logical_len();
        let blocks = length.div_ceil(replicated.layout.block_size_bytes);
        if repair {
            for index in 0..replicated.copies.len() {
                replicated.reopen(index, true);
            }
            // A replaced target gets its copy of the metadata back too.
            let text = replicated.layout.encode();
            for replica in &self.names.replicas {
                let _ = std::fs::write(with_suffix(replica, ".meta"), &text);
            }
        }
        let writable = replicated.writable;
        replicated.writable = repair && writable;
        let result: io::Result<()> = (|| {
            for block in 0..blocks {
                let _lock = replicated.lock_blocks(block, block)?;
                replicated.examine_block(block, length, true, &mut found)?;
            }
            if repair {
                replicated.extend_copies(length, &mut found);
            }
            Ok(())
        })();
        replicated.writable = writable;
        result?;
        self.repairs.extend(found.iter().cloned());
        Ok(found)
    }
}

/// Delete a file and, when it is replicated, its copies and side files.
pub fn delete(path: &Path) -> io::Result<()> {
    let layout = read_metadata(path).ok().flatten();
    let primary_result = std::fs::remove_file(path);
    if let Some(layout) = layout {
        let names = FileNames::new(path, &layout.targets);
        for replica in &names.replicas {
            let _ = std::fs::remove_file(replica);
            let _ = std::fs::remove_file(with_suffix(replica, ".crc"));
            let _ = std::fs::remove_file(with_suffix(replica, ".meta"));
        }
        let _ = std::fs::remove_file(&names.primary_checksums);
        let _ = std::fs::remove_file(&names.lock);
        std::fs::remove_file(&names.metadata)?;
        return match primary_result {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
    }
    primary_result
}

impl Replicated {
    fn block_size(&self) -> u64 {
        self.layout.block_size_bytes
    }

    /// (Re)open copy `index`'s files; `create` makes missing ones (repair).
    fn reopen(&mut self, index: usize, create: bool) {
        let writable = self.writable;
        let copy = &mut self.copies[index];
        let create = create && writable;
        let open = |path: &Path| {
            open_file(path, true, writable, create, false)
                .or_else(|_| open_file(path, true, false, false, false))
        };
        if copy.data.is_none() || create {
            copy.data = open(&copy.data_path).ok();
        }
        if copy.checksums.is_none() || create {
            copy.checksums = open(&copy.checksum_path).ok();
        }
    }

    /// The longest copy's length.
    fn logical_len(&self) -> u64 {
        self.copies
            .iter()
            .filter_map(|copy| copy.data.as_ref())
            .filter_map(|file| file.metadata().ok())
            .map(|metadata| metadata.len())
            .max()
            .unwrap_or(0)
    }

    fn lock_blocks(&self, first: u64, last: u64) -> io::Result<Option<RangeLock>> {
        match &self.lock {
            Some(file) => Ok(Some(RangeLock::exclusive(file, first, last - first + 1)?)),
            None => Ok(None),
        }
    }

    /// Whether copy `copy` of `block` lives in `self.copies[index]`.
    fn copy_index(&self, block: u64, copy: u32) -> usize {
        match self.layout.location(block, copy) {
            CopyLocation::Primary => 0,
            CopyLocation::Target(target) => target + 1,
        }
    }

    /// Block `block` as copy `index` holds it (padded with zeros to the
    /// block size) and the checksum it claims, or what is wrong with it.
    fn read_copy(
        &self,
        index: usize,
        block: u64,
        length: u64,
    ) -> Result<(Vec<u8>, Option<u32>), Damage> {
        let copy = &self.copies[index];
        let (Some(data), Some(checksums)) = (&copy.data, &copy.checksums) else {
            return Err(Damage::Missing);
        };
        let block_size = self.block_size();
        let start = block * block_size;
        let expected = block_size.min(length.saturating_sub(start)) as usize;
        let mut bytes = vec![0u8; block_size as usize];
        let read =
            read_full(data, &mut bytes[..expected], start).map_err(|_| Damage::Unreadable)?;
        let mut entry = [0u8; 8];
        let entry_read = read_full(checksums, &mut entry, block * ENTRY_BYTES)
            .map_err(|_| Damage::Unreadable)?;
        let checksum = (entry_read == 8
            && u32::from_le_bytes(entry[..4].try_into().expect("4 bytes")) == ENTRY_MARKER)
            .then(|| u32::from_le_bytes(entry[4..].try_into().expect("4 bytes")));
        // A copy that ends before the block does is short, unless its
        // checksum says the missing bytes are zeros anyway. (A hole in a
        // healthy copy is inside its length: copies are kept as long as
        // the file.)
        let intact_anyway =
            checksum.is_some_and(|checksum| block_checksum(&bytes, block_size) == checksum);
        if read < expected && !intact_anyway {
            return Err(if checksum.is_some() {
                Damage::Short
            } else {
                Damage::ShortUnchecked
            });
        }
        Ok((bytes, checksum))
    }

    /// Find the right content of `block` (file length `length`), checking
    /// copies in order until one passes (all of them when `all`), and
    /// repair every copy found bad. The block's bytes, padded to the block
    /// size.
    fn examine_block(
        &mut self,
        block: u64,
        length: u64,
        all: bool,
        found: &mut Vec<Repair>,
    ) -> io::Result<Vec<u8>> {
        let block_size = self.block_size();
        let mut good: Option<(Vec<u8>, u32)> = None;
        let mut unchecked: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut bad: Vec<(u32, usize, Damage)> = Vec::new();
        for copy in 0..self.layout.replication_factor {
            let index = self.copy_index(block, copy);
            match self.read_copy(index, block, length) {
                Err(damage) => bad.push((copy, index, damage)),
                Ok((bytes, Some(checksum))) if block_checksum(&bytes, block_size) == checksum => {
                    match &good {
                        Some((_, known)) if *known != checksum => {
                            bad.push((copy, index, Damage::BadChecksum))
                        }
                        Some(_) => {}
                        None => {
                            good = Some((bytes, checksum));
                            if !all {
                                break;
                            }
                        }
                    }
                }
                Ok((_, Some(_))) => bad.push((copy, index, Damage::BadChecksum)),
                Ok((bytes, None)) => unchecked.push((copy as usize, bytes)),
            }
        }
        let Some((bytes, checksum)) = good else {
            // Never written only if some copy holds the block's bytes and
            // no copy has a checksum for it; a block every copy of which is
            // missing, short or wrong is lost, and says so.
            if unchecked.is_empty()
                || bad.iter().any(|(_, _, damage)| {
                    *damage == Damage::BadChecksum || *damage == Damage::Short
                })
            {
                return Err(other(format!(
                    "block {block} has no intact copy (all {} copies are damaged or missing)",
                    self.layout.replication_factor
                )));
            }
            // Never written (no copy has a checksum): its bytes as they are.
            return Ok(unchecked
                .into_iter()
                .next()
                .map(|(_, bytes)| bytes)
                .unwrap_or_else(|| vec![0u8; block_size as usize]));
        };
        // Copies without a checksum while another has one are bad too.
        for (copy, _) in unchecked {
            let copy = copy as u32;
            bad.push((copy, self.copy_index(block, copy), Damage::BadChecksum));
        }
        for (copy, index, damage) in bad {
            let repaired = self.writable
                && self
                    .rewrite_block(index, block, &bytes, checksum, length)
                    .is_ok();
            found.push(Repair {
                block,
                copy,
                path: self.copies[index].data_path.clone(),
                damage,
                repaired,
            });
        }
        Ok(bytes)
    }

    /// Write one block and its checksum to copy `index`, creating its files
    /// if they are missing.
    fn rewrite_block(
        &mut self,
        index: usize,
        block: u64,
        bytes: &[u8],
        checksum: u32,
        length: u64,
    ) -> io::Result<()> {
        if self.copies[index].data.is_none() || self.copies[index].checksums.is_none() {
            self.reopen(index, true);
        }
        let block_size = self.block_size();
        let copy = &self.copies[index];
        let (Some(data), Some(checksums)) = (&copy.data, &copy.checksums) else {
            return Err(other(format!(
                "{} cannot be created",
                copy.data_path.display()
            )));
        };
        let start = block * block_size;
        let end = (start + block_size).min(length);
        data.write_all_at(&bytes[..(end - start) as usize], start)?;
        checksums.write_all_at(&encode_entry(checksum), block * ENTRY_BYTES)?;
        if data.metadata()?.len() < length {
            data.set_len(length)?;
        }
        Ok(())
    }

    /// Make every copy at least `length` long (replicas are sparse).
    fn extend_copies(&mut self, length: u64, found: &mut Vec<Repair>) {
        if !self.writable {
            return;
        }
        for copy in &self.copies {
            if let Some(data) = &copy.data {
                if data
                    .metadata()
                    .map(|metadata| metadata.len() < length)
                    .unwrap_or(false)
                    && data.set_len(length).is_err()
                {
                    found.push(Repair {
                        block: length / self.layout.block_size_bytes,
                        copy: 0,
                        path: copy.data_path.clone(),
                        damage: Damage::WriteFailed,
                        repaired: false,
                    });
                }
            }
        }
    }

    fn read_at(
        &mut self,
        offset: u64,
        buffer: &mut [u8],
        all: bool,
        found: &mut Vec<Repair>,
    ) -> io::Result<usize> {
        let length = self.logical_len();
        if offset >= length {
            return Ok(0);
        }
        let wanted = (buffer.len() as u64).min(length - offset) as usize;
        let block_size = self.block_size();
        let first = offset / block_size;
        let last = (offset + wanted as u64 - 1) / block_size;
        let span_start = first * block_size;
        let span_end = ((last + 1) * block_size).min(length);
        let _lock = self.lock_blocks(first, last)?;
        // Fast path: the primary's span and checksums in one read each,
        // straight into the caller's buffer when the request is whole blocks.
        let direct = offset == span_start && wanted as u64 == span_end - span_start;
        let mut owned = Vec::new();
        let span: &mut [u8] = if direct {
            &mut buffer[..wanted]
        } else {
            owned.resize((span_end - span_start) as usize, 0);
            &mut owned
        };
        let mut entries = vec![0u8; ((last - first + 1) * ENTRY_BYTES) as usize];
        let primary_ok = match (&self.copies[0].data, &self.copies[0].checksums) {
            (Some(data), Some(checksums)) => {
                read_full(data, span, span_start).is_ok()
                    && read_full(checksums, &mut entries, first * ENTRY_BYTES).is_ok()
            }
            _ => false,
        };
        for block in first..=last {
            let start = (block * block_size - span_start) as usize;
            let end = (((block + 1) * block_size).min(length) - span_start) as usize;
            let entry = &entries[((block - first) * ENTRY_BYTES) as usize..][..8];
            let marker = u32::from_le_bytes(entry[..4].try_into().expect("4 bytes"));
            let checksum = u32::from_le_bytes(entry[4..].try_into().expect("4 bytes"));
            let passes = primary_ok
                && marker == ENTRY_MARKER
                && block_checksum(&span[start..end], block_size) == checksum;
            if all || !passes {
                let bytes = self.examine_block(block, length, all, found)?;
                span[start..end].copy_from_slice(&bytes[..end - start]);
            }
        }
        self.extend_copies(length, found);
        if !direct {
            let skip = (offset - span_start) as usize;
            buffer[..wanted].copy_from_slice(&owned[skip..skip + wanted]);
        }
        Ok(wanted)
    }

    fn write_at(&mut self, offset: u64, data: &[u8], found: &mut Vec<Repair>) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        let block_size = self.block_size();
        let end = offset + data.len() as u64;
        let first = offset / block_size;
        let last = (end - 1) / block_size;
        let _lock = self.lock_blocks(first, last)?;
        let old_length = self.logical_len();
        let new_length = old_length.max(end);
        let span_start = first * block_size;
        // Whole blocks (or a tail past the old end of the file, which pads
        // with zeros): checksum and write the caller's bytes as they are.
        let whole_blocks =
            offset == span_start && (end.is_multiple_of(block_size) || end >= old_length);
        if whole_blocks {
            return self.write_span(data, first, last, new_length, found);
        }
        let mut span = vec![0u8; ((last - first + 1) * block_size) as usize];
        // The head and tail blocks keep the bytes this write does not cover.
        if offset > span_start && span_start < old_length {
            let bytes = self.examine_block(first, old_length, false, found)?;
            span[..block_size as usize].copy_from_slice(&bytes);
        }
        let last_start = last * block_size;
        if end < last_start + block_size
            && end < old_length
            && (last != first || offset == span_start)
        {
            let bytes = self.examine_block(last, old_length, false, found)?;
            span[(last_start - span_start) as usize..].copy_from_slice(&bytes);
        }
        span[(offset - span_start) as usize..][..data.len()].copy_from_slice(data);
        self.write_span(&span, first, last, new_length, found)
    }

    /// Write `span` (blocks `first..=last`, from the start of `first`; the
    /// last block may be short where the file ends) with its checksums to
    /// every copy at once, one thread per copy file.
    fn write_span(
        &self,
        span: &[u8],
        first: u64,
        last: u64,
        new_length: u64,
        found: &mut Vec<Repair>,
    ) -> io::Result<()> {
        let block_size = self.block_size();
        let span_start = first * block_size;
        let checksums: Vec<u32> = span
            .chunks(block_size as usize)
            .map(|block| block_checksum(block, block_size))
            .collect();
        let span_end = ((last + 1) * block_size).min(new_length);
        // Every copy at once: one thread per copy file.
        let layout = &self.layout;
        let results: Vec<(usize, io::Result<bool>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .copies
                .iter()
                .enumerate()
                .map(|(index, copy)| {
                    let checksums = &checksums;
                    scope.spawn(move || {
                        (
                            index,
                            write_copy(
                                copy, index, layout, first, last, span, span_start, span_end,
                                checksums, new_length,
                            ),
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("copy writer"))
                .collect()
        });
        let mut written = 0;
        for (index, result) in results {
            match result {
                Ok(true) => written += 1,
                Ok(false) => {}
                Err(_) => found.push(Repair {
                    block: first,
                    copy: index as u32,
                    path: self.copies[index].data_path.clone(),
                    damage: Damage::WriteFailed,
                    repaired: false,
                }),
            }
        }
        if written == 0 {
            return Err(other(format!(
                "no copy of blocks {first}..={last} could be written"
            )));
        }
        Ok(())
    }

    /// Pieces in groups of neighbouring blocks (at most 64 blocks a group),
    /// each group updated with one read of its partly covered blocks and
    /// one write of every copy.
    fn write_pieces(&mut self, pieces: &[(u64, &[u8])], found: &mut Vec<Repair>) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        const GROUP_BLOCKS_MAX: u64 = 64;
        let block_size = self.block_size();
        let pieces: Vec<(u64, &[u8])> = pieces
            .iter()
            .copied()
            .filter(|(_, bytes)| !bytes.is_empty())
            .collect();
        let mut start = 0;
        while start < pieces.len() {
            let first = pieces[start].0 / block_size;
            let mut last = (pieces[start].0 + pieces[start].1.len() as u64 - 1) / block_size;
            let mut end = start + 1;
            while end < pieces.len() {
                let (offset, bytes) = pieces[end];
                let piece_first = offset / block_size;
                let piece_last = (offset + bytes.len() as u64 - 1) / block_size;
                if piece_first > last + 1 || piece_last - first >= GROUP_BLOCKS_MAX {
                    break;
                }
                last = last.max(piece_last);
                end += 1;
            }
            self.write_group(&pieces[start..end], first, last, found)?;
            start = end;
        }
        Ok(())
    }

    fn write_group(
        &mut self,
        pieces: &[(u64, &[u8])],
        first: u64,
        last: u64,
        found: &mut Vec<Repair>,
    ) -> io::Result<()> {
        let block_size = self.block_size();
        let _lock = self.lock_blocks(first, last)?;
        let old_length = self.logical_len();
        let span_start = first * block_size;
        let blocks = (last - first + 1) as usize;
        let mut covered = vec![0u64; blocks];
        let mut group_end = 0;
        for (offset, bytes) in pieces {
            let end = offset + bytes.len() as u64;
            group_end = group_end.max(end);
            let mut position = *offset;
            while position < end {
                let block = position / block_size;
                let block_end = ((block + 1) * block_size).min(end);
                covered[(block - first) as usize] += block_end - position;
                position = block_end;
            }
        }
        let mut span = vec![0u8; blocks * block_size as usize];
        for (index, covered_bytes) in covered.iter().enumerate() {
            let block = first + index as u64;
            let block_start = block * block_size;
            // Blocks the pieces cover only in part keep their other bytes.
            if *covered_bytes < block_size && block_start < old_length {
                let bytes = self.examine_block(block, old_length, false, found)?;
                let at = index * block_size as usize;
                span[at..at + block_size as usize].copy_from_slice(&bytes);
            }
        }
        for (offset, bytes) in pieces {
            let at = (offset - span_start) as usize;
            span[at..at + bytes.len()].copy_from_slice(bytes);
        }
        let new_length = old_length.max(group_end);
        self.write_span(&span, first, last, new_length, found)
    }

    fn set_len(&mut self, length: u64, found: &mut Vec<Repair>) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        let _lock = self.lock_blocks(0, i64::MAX as u64 - 1)?;
        let old_length = self.logical_len();
        let block_size = self.block_size();
        let blocks = length.div_ceil(block_size);
        // A new partial last block: its checksum covers the zeroed tail.
        let mut tail = None;
        if length < old_length && !length.is_multiple_of(block_size) {
            let block = length / block_size;
            let mut bytes = self.examine_block(block, old_length, false, found)?;
            bytes[(length % block_size) as usize..].fill(0);
            tail = Some((block, block_checksum(&bytes, block_size)));
        }
        for (index, copy) in self.copies.iter().enumerate() {
            if let Some(data) = &copy.data {
                data.set_len(length)?;
            }
            if let Some(checksums) = &copy.checksums {
                if length < old_length {
                    checksums.set_len(blocks * ENTRY_BYTES)?;
                }
                if let Some((block, checksum)) = tail {
                    let holds = (0..self.layout.replication_factor)
                        .any(|copy| self.copy_index(block, copy) == index);
                    if holds {
                        checksums.write_all_at(&encode_entry(checksum), block * ENTRY_BYTES)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Write the blocks `first..=last` that copy `index` holds (whole span for
/// the primary) and their checksums; Ok(false) when the copy is unavailable.
// One call per copy thread; the span and its bounds travel together.
#[allow(clippy::too_many_arguments)]
fn write_copy(
    copy: &CopyFiles,
    index: usize,
    layout: &ReplicaLayout,
    first: u64,
    last: u64,
    span: &[u8],
    span_start: u64,
    span_end: u64,
    checksums: &[u32],
    new_length: u64,
) -> io::Result<bool> {
    let (Some(data), Some(checksum_file)) = (&copy.data, &copy.checksums) else {
        return Ok(false);
    };
    let block_size = layout.block_size_bytes;
    let holds = |block: u64| {
        (0..layout.replication_factor).any(|n| match layout.location(block, n) {
            CopyLocation::Primary => index == 0,
            CopyLocation::Target(target) => index == target + 1,
        })
    };
    // Runs of consecutive held blocks: one pwrite each.
    let mut block = first;
    while block <= last {
        if !holds(block) {
            block += 1;
            continue;
        }
        let run_first = block;
        while block <= last && holds(block) {
            block += 1;
        }
        let run_last = block - 1;
        let start = run_first * block_size;
        let end = ((run_last + 1) * block_size).min(span_end);
        data.write_all_at(
            &span[(start - span_start) as usize..(end - span_start) as usize],
            start,
        )?;
        let entries: Vec<u8> = (run_first..=run_last)
            .flat_map(|b| encode_entry(checksums[(b - first) as usize]))
            .collect();
        checksum_file.write_all_at(&entries, run_first * ENTRY_BYTES)?;
    }
    if data.metadata()?.len() < new_length {
        data.set_len(new_length)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests;
