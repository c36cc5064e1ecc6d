//! MPI-IO's file handles: open/close/delete, views, hints, sizes, pointers,
//! error handlers. The data access calls are in `file_access.rs`; what a
//! view means in file bytes and how a replicated file is stored are
//! `resmpi-io`'s business.
//!
//! Why files keep their own table and lock instead of the library state:
//! an MPI-IO call is mostly system calls on the file plus, for collective
//! ones, ordinary collectives on the file's own communicator (a duplicate
//! of the one given to MPI_File_open, with MPI_ERRORS_RETURN, so its
//! traffic never mixes with the application's and its errors come back
//! here). Those collectives take the library lock themselves, so a file
//! call must not hold it; it holds only its file's mutex.
//!
//! Errors go to the file's error handler (MPI_ERRORS_RETURN unless set);
//! MPI_File_open and calls on an invalid handle use MPI_FILE_NULL's.
//! Processes agree on the outcome of MPI_File_open (rank 0 creates the file
//! first, then the others open it, and every rank learns the worst error),
//! so a failed open never leaves some ranks with a file and some without.

use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use resmpi_core::datatype::Datatype;
use resmpi_core::{ErrorClass, MpiError, MpiResult};
use resmpi_io::placement::{parse_targets, ReplicaLayout, DEFAULT_BLOCK_SIZE_BYTES};
use resmpi_io::store::{OpenRequest, Store};
use resmpi_io::view::{FileView, FiletypeSegment};

use crate::abi::*;
use crate::errhandler::{register_errhandler, valid_errhandler};
use crate::handles::errhandler_index;

/// A split collective begun and not yet ended: its byte count or error.
pub(crate) struct SplitCollective {
    /// What the `_end` call returns.
    pub result: MpiResult<usize>,
}

/// One open file, as one process sees it.
pub(crate) struct OpenFile {
    /// The file's own communicator (a duplicate).
    pub comm: MPI_Comm,
    /// This process's rank in it.
    pub rank: c_int,
    /// Its size.
    pub size: c_int,
    /// The name given to MPI_File_open.
    pub path: PathBuf,
    /// The access mode.
    pub amode: c_int,
    /// The storage.
    pub store: Store,
    /// The view, flattened.
    pub view: FileView,
    /// The view's etype (a duplicate owned here when derived).
    pub etype: MPI_Datatype,
    /// The view's filetype (likewise).
    pub filetype: MPI_Datatype,
    /// The view's data representation.
    pub datarep: ViewDatarep,
    /// MPI atomic mode: each access holds a lock over all its bytes.
    pub atomic: bool,
    /// The individual file pointer, in etypes.
    pub position_etypes: u64,
    /// The shared file pointer's counter file (etypes).
    pub shared_pointer: Option<std::fs::File>,
    /// Error handler.
    pub errhandler: MPI_Errhandler,
    /// A split collective in progress.
    pub split: Option<SplitCollective>,
    /// Hints in use, for MPI_File_get_info.
    pub hints: Hints,
    /// Buffers two-phase collective I/O reuses between rounds and calls.
    pub exchange_buffers: crate::file_collective::ExchangeBuffers,
    /// Damaged block copies repaired since open.
    pub repaired_blocks: u64,
    /// Damaged block copies found that could not be repaired.
    pub unrepaired_blocks: u64,
}

type FileSlot = Option<Arc<Mutex<OpenFile>>>;

static FILES: Mutex<Vec<FileSlot>> = Mutex::new(Vec::new());

/// Whether this process ever opened a file: its MPI-IO state (the
/// replicas' performer and follower roles, per-replica counters, open
/// descriptors) is its own, and a fork would hand a copy of it to a new
/// replica (see `global::between_calls`).
static FILES_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process ever opened a file with MPI_File_open.
pub(crate) fn files_used() -> bool {
    FILES_USED.load(Ordering::Relaxed)
}

/// MPI_FILE_NULL's error handler: the one MPI_File_open starts files with.
static NULL_FILE_ERRHANDLER: AtomicI32 = AtomicI32::new(MPI_ERRORS_RETURN);

fn files() -> MutexGuard<'static, Vec<FileSlot>> {
    FILES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Handles are small integers (slot + 1), so MPI_FILE_NULL (0) is none of
/// them and MPI_File_c2f is the identity.
fn handle_of(index: usize) -> MPI_File {
    (index + 1) as *mut c_void
}

fn lookup(handle: MPI_File) -> Option<Arc<Mutex<OpenFile>>> {
    let index = (handle as usize).checked_sub(1)?;
    files().get(index).cloned().flatten()
}

fn invalid_file(handle: MPI_File) -> MpiError {
    MpiError::new(
        ErrorClass::File,
        format!("{handle:?} is not an open file handle"),
    )
}

/// Dispatch `error` of call `name` on file `handle` to `errhandler`.
pub(crate) fn raise_file(
    name: &str,
    handle: MPI_File,
    errhandler: MPI_Errhandler,
    error: MpiError,
) -> c_int {
    let code = crate::error_codes::detailed_code(error.class as c_int, format!("{name}: {error}"));
    dispatch_file_error(name, handle, errhandler, code, &error)
}

/// Hand error `code` to `errhandler` of file `handle` (fatal handlers end
/// the job with `error`'s text); returns the code.
fn dispatch_file_error(
    name: &str,
    handle: MPI_File,
    errhandler: MPI_Errhandler,
    code: c_int,
    error: &MpiError,
) -> c_int {
    match errhandler {
        MPI_ERRORS_RETURN => code,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => {
            let rank = crate::global::lock()
                .mpi
                .as_ref()
                .map_or(0, |mpi| mpi.rank());
            eprintln!("resmpi: rank {rank}: {name}: {error}");
            crate::global::abort_job(1, &format!("{name}: {error}"));
        }
        user => {
            let function = errhandler_index(user)
                .and_then(|index| {
                    crate::global::lock()
                        .registry
                        .errhandlers
                        .get(index)
                        .copied()
                        .flatten()
                })
                .flatten();
            if let Some(function) = function {
                // SAFETY: registered by MPI_File_create_errhandler, which
                // stores a file handler under the communicator handler's
                // type; both take (handle pointer, int pointer, ...).
                let function: unsafe extern "C" fn(*mut MPI_File, *mut c_int, ...) =
                    unsafe { std::mem::transmute(function) };
                let mut handle_value = handle;
                let mut code_value = code;
                // SAFETY: the application's handler.
                unsafe { function(&mut handle_value, &mut code_value) };
            }
            code
        }
    }
}

/// Run `body` on open file `handle`; an error goes to its error handler.
pub(crate) fn file_entry(
    name: &str,
    handle: MPI_File,
    body: impl FnOnce(&mut OpenFile) -> MpiResult<()>,
) -> c_int {
    use crate::file_siblings::{Settled, Step};
    let step = crate::file_siblings::in_step();
    let Some(file) = lookup(handle) else {
        return raise_file(
            name,
            handle,
            NULL_FILE_ERRHANDLER.load(Ordering::Relaxed),
            invalid_file(handle),
        );
    };
    let (result, errhandler) = {
        let mut open = file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Step::Follower(_) = step {
            open.store.hold_changes(replica_hold_bytes());
        }
        let (written_before, _) = open.store.write_counts();
        let mut result = body(&mut open);
        match step {
            Step::Alone => {}
            Step::Performer(call) => {
                if open.store.write_counts().0 != written_before {
                    crate::file_siblings::performed(call, result.is_ok());
                }
            }
            Step::Follower(call) => {
                let held = open.store.take_held();
                if !held.is_empty() {
                    match crate::file_siblings::settle(call) {
                        Settled::MadeBySibling => open.store.drop_held(held),
                        Settled::MakeThem => {
                            let made = open.store.apply_held(held);
                            crate::file_siblings::performed(call, made.is_ok());
                            if let Err(error) = made {
                                result = result.and(Err(io_error(name, &error)));
                            }
                        }
                    }
                }
            }
        }
        report_repairs(&mut open);
        (result, open.errhandler)
    };
    match result {
        Ok(()) => MPI_SUCCESS,
        Err(error) => raise_file(name, handle, errhandler, error),
    }
}

/// The most bytes of one file call a follower replica holds for its
/// rank's performer to write (`RESMPI_IO_REPLICA_HOLD_BYTES`, 64 MiB by
/// default); past it the follower writes the rest itself.
fn replica_hold_bytes() -> u64 {
    static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("RESMPI_IO_REPLICA_HOLD_BYTES")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(64 << 20)
    })
}

/// Say what read-repair found, one line per damaged block copy, and count it.
fn report_repairs(file: &mut OpenFile) {
    for repair in file.store.repairs.drain(..) {
        if repair.repaired {
            file.repaired_blocks += 1;
        } else {
            file.unrepaired_blocks += 1;
        }
        eprintln!(
            "resmpi: rank {}: MPI-IO {}: {repair}",
            file.rank,
            file.path.display()
        );
    }
}

// ----- errors and collectives on the file's communicator ----------------------

/// An I/O error as the MPI error class the standard names for it.
pub(crate) fn io_error(what: &str, error: &std::io::Error) -> MpiError {
    use std::io::ErrorKind;
    let class = match error.kind() {
        ErrorKind::NotFound => ErrorClass::NoSuchFile,
        ErrorKind::AlreadyExists => ErrorClass::FileExists,
        ErrorKind::PermissionDenied => ErrorClass::Access,
        _ => match error.raw_os_error() {
            Some(libc::EROFS) => ErrorClass::ReadOnly,
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => ErrorClass::NoSpace,
            Some(libc::ENOTDIR) | Some(libc::EISDIR) | Some(libc::ENAMETOOLONG) => {
                ErrorClass::BadFile
            }
            _ => ErrorClass::Io,
        },
    };
    MpiError::new(class, format!("{what}: {error}"))
}

/// An error code returned by a call on the file's communicator, as an error.
pub(crate) fn checked(code: c_int, what: &str) -> MpiResult<()> {
    if code == MPI_SUCCESS {
        return Ok(());
    }
    let (class, text) = crate::error_codes::detail_of(code).unwrap_or((code, String::new()));
    Err(MpiError::new(
        ErrorClass::from_i32(class).unwrap_or(ErrorClass::Other),
        format!("{what} failed: {text}"),
    ))
}

pub(crate) fn barrier(comm: MPI_Comm) -> MpiResult<()> {
    // SAFETY: a communicator handle; no pointers.
    checked(unsafe { crate::coll::PMPI_Barrier(comm) }, "MPI_Barrier")
}

pub(crate) fn broadcast_i64(comm: MPI_Comm, value: i64) -> MpiResult<i64> {
    let mut value = value;
    // SAFETY: one long long at a valid address.
    checked(
        unsafe {
            crate::coll::PMPI_Bcast(
                &mut value as *mut i64 as *mut c_void,
                1,
                MPI_LONG_LONG,
                0,
                comm,
            )
        },
        "MPI_Bcast",
    )?;
    Ok(value)
}

pub(crate) fn allreduce_i64(comm: MPI_Comm, value: i64, op: MPI_Op) -> MpiResult<i64> {
    let mut result = 0i64;
    // SAFETY: one long long in and out at valid addresses.
    checked(
        unsafe {
            crate::coll::PMPI_Allreduce(
                &value as *const i64 as *const c_void,
                &mut result as *mut i64 as *mut c_void,
                1,
                MPI_LONG_LONG,
                op,
                comm,
            )
        },
        "MPI_Allreduce",
    )?;
    Ok(result)
}

/// The sum of `value` over the ranks below this one (0 on rank 0).
pub(crate) fn exclusive_prefix_sum(comm: MPI_Comm, rank: c_int, value: i64) -> MpiResult<i64> {
    let mut result = 0i64;
    // SAFETY: one long long in and out at valid addresses.
    checked(
        unsafe {
            crate::coll::prefix::PMPI_Exscan(
                &value as *const i64 as *const c_void,
                &mut result as *mut i64 as *mut c_void,
                1,
                MPI_LONG_LONG,
                MPI_SUM,
                comm,
            )
        },
        "MPI_Exscan",
    )?;
    Ok(if rank == 0 { 0 } else { result })
}

/// Make every rank fail with the worst class any rank saw (a collective
/// call must not succeed on some ranks and fail on others).
fn agree(comm: MPI_Comm, local: MpiResult<()>) -> MpiResult<()> {
    let class = local.as_ref().err().map_or(0, |error| error.class as i64);
    let worst = allreduce_i64(comm, class, MPI_MAX)?;
    match local {
        Err(error) => Err(error),
        Ok(()) if worst == 0 => Ok(()),
        Ok(()) => Err(MpiError::new(
            ErrorClass::from_i32(worst as i32).unwrap_or(ErrorClass::Other),
            "failed on another process",
        )),
    }
}

// ----- hints -------------------------------------------------------------------

/// The hints a file uses, from MPI_Info and the environment.
#[derive(Clone, Debug, Default)]
pub(crate) struct Hints {
    /// replication_factor (1 = unreplicated).
    pub replication_factor: u32,
    /// striping_unit: bytes per replicated block.
    pub block_size_bytes: u64,
    /// resmpi_replica_targets.
    pub targets: Vec<PathBuf>,
    /// resmpi_verify_reads=all: check every copy on every read.
    pub verify_all_copies: bool,
    /// romio_cb_write: two-phase collective writes.
    pub collective_buffering_write: CollectiveBuffering,
    /// romio_cb_read: two-phase collective reads.
    pub collective_buffering_read: CollectiveBuffering,
    /// cb_nodes: aggregators (None: one per 8 processes).
    pub aggregator_count: Option<usize>,
    /// cb_buffer_size: bytes an aggregator handles per exchange round.
    pub aggregator_buffer_bytes: u64,
    /// romio_ds_read: data sieving for independent non-contiguous reads.
    pub data_sieving_read: CollectiveBuffering,
    /// ind_rd_buffer_size: the most file bytes one sieving read spans.
    pub sieve_buffer_bytes: u64,
}

/// ROMIO's romio_cb_write / romio_cb_read values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum CollectiveBuffering {
    /// Always aggregate.
    Enable,
    /// Never: every process does its own I/O.
    Disable,
    /// Aggregate when the processes' byte ranges interleave.
    #[default]
    Automatic,
}

impl CollectiveBuffering {
    fn name(self) -> &'static str {
        match self {
            CollectiveBuffering::Enable => "enable",
            CollectiveBuffering::Disable => "disable",
            CollectiveBuffering::Automatic => "automatic",
        }
    }
}

/// The default ind_rd_buffer_size (ROMIO's).
const DEFAULT_SIEVE_BUFFER_BYTES: u64 = 4 << 20;

/// The default cb_buffer_size (ROMIO's).
const DEFAULT_AGGREGATOR_BUFFER_BYTES: u64 = 16 << 20;

/// The (key, value) pairs of `info` (none for MPI_INFO_NULL).
pub(crate) unsafe fn info_pairs(info: MPI_Info) -> MpiResult<Vec<(String, String)>> {
    if info == MPI_INFO_NULL {
        return Ok(Vec::new());
    }
    let mut count = 0;
    // SAFETY: valid out pointer.
    checked(
        unsafe { crate::info::PMPI_Info_get_nkeys(info, &mut count) },
        "MPI_Info_get_nkeys",
    )
    .map_err(|mut error| {
        error.class = ErrorClass::Info;
        error
    })?;
    let mut pairs = Vec::new();
    for n in 0..count {
        let mut key = [0 as c_char; MPI_MAX_INFO_KEY as usize + 1];
        let mut value = [0 as c_char; MPI_MAX_INFO_VAL as usize + 1];
        let mut flag = 0;
        // SAFETY: buffers of the sizes MPI promises to respect.
        unsafe {
            checked(
                crate::info::PMPI_Info_get_nthkey(info, n, key.as_mut_ptr()),
                "MPI_Info_get_nthkey",
            )?;
            checked(
                crate::info::PMPI_Info_get(
                    info,
                    key.as_ptr(),
                    MPI_MAX_INFO_VAL,
                    value.as_mut_ptr(),
                    &mut flag,
                ),
                "MPI_Info_get",
            )?;
        }
        if flag != 0 {
            // SAFETY: NUL-terminated by MPI_Info_get_nthkey / MPI_Info_get.
            let (key, value) = unsafe {
                (
                    CStr::from_ptr(key.as_ptr()).to_string_lossy().into_owned(),
                    CStr::from_ptr(value.as_ptr())
                        .to_string_lossy()
                        .into_owned(),
                )
            };
            pairs.push((key, value));
        }
    }
    Ok(pairs)
}

fn bad_hint(key: &str, value: &str, why: &str) -> MpiError {
    MpiError::new(
        ErrorClass::InfoValue,
        format!("hint {key}={value:?}: {why}"),
    )
}

impl Hints {
    /// The environment's defaults (RESMPI_IO_REPLICATION_FACTOR,
    /// RESMPI_IO_REPLICA_TARGETS, RESMPI_IO_BLOCK_SIZE,
    /// RESMPI_IO_VERIFY_READS), then `pairs` over them.
    fn from_pairs(pairs: &[(String, String)]) -> MpiResult<Hints> {
        let mut hints = Hints {
            replication_factor: 1,
            block_size_bytes: DEFAULT_BLOCK_SIZE_BYTES,
            aggregator_buffer_bytes: DEFAULT_AGGREGATOR_BUFFER_BYTES,
            sieve_buffer_bytes: DEFAULT_SIEVE_BUFFER_BYTES,
            ..Hints::default()
        };
        let environment = [
            ("RESMPI_IO_REPLICATION_FACTOR", "replication_factor"),
            ("RESMPI_IO_REPLICA_TARGETS", "resmpi_replica_targets"),
            ("RESMPI_IO_BLOCK_SIZE", "striping_unit"),
            ("RESMPI_IO_VERIFY_READS", "resmpi_verify_reads"),
        ];
        let mut all: Vec<(String, String)> = environment
            .iter()
            .filter_map(|(variable, key)| {
                std::env::var(variable)
                    .ok()
                    .filter(|value| !value.is_empty())
                    .map(|value| (key.to_string(), value))
            })
            .collect();
        all.extend(pairs.iter().cloned());
        for (key, value) in &all {
            hints.apply(key, value)?;
        }
        Ok(hints)
    }

    fn apply(&mut self, key: &str, value: &str) -> MpiResult<()> {
        let number = || value.trim().parse::<u64>();
        match key {
            "replication_factor" => match number() {
                Ok(factor @ 1..=16) => self.replication_factor = factor as u32,
                _ => return Err(bad_hint(key, value, "must be a whole number from 1 to 16")),
            },
            "striping_unit" => match number() {
                Ok(bytes @ 1..=0x4000_0000) => self.block_size_bytes = bytes,
                _ => return Err(bad_hint(key, value, "must be a byte count from 1 to 2^30")),
            },
            "resmpi_replica_targets" => {
                self.targets = parse_targets(value)
                    .into_iter()
                    .map(|target| resmpi_io::placement::absolute(&target))
                    .collect()
            }
            "romio_ds_read" => {
                self.data_sieving_read = match value.trim() {
                    "enable" => CollectiveBuffering::Enable,
                    "disable" => CollectiveBuffering::Disable,
                    "automatic" => CollectiveBuffering::Automatic,
                    _ => return Err(bad_hint(key, value, "must be enable, disable or automatic")),
                }
            }
            "ind_rd_buffer_size" => match number() {
                Ok(bytes @ 1..=0x4000_0000) => self.sieve_buffer_bytes = bytes,
                _ => return Err(bad_hint(key, value, "must be a byte count from 1 to 2^30")),
            },
            "romio_cb_write" | "romio_cb_read" => {
                let mode = match value.trim() {
                    "enable" => CollectiveBuffering::Enable,
                    "disable" => CollectiveBuffering::Disable,
                    "automatic" => CollectiveBuffering::Automatic,
                    _ => return Err(bad_hint(key, value, "must be enable, disable or automatic")),
                };
                if key == "romio_cb_write" {
                    self.collective_buffering_write = mode;
                } else {
                    self.collective_buffering_read = mode;
                }
            }
            "cb_nodes" => match number() {
                Ok(count @ 1..=1_000_000) => self.aggregator_count = Some(count as usize),
                _ => return Err(bad_hint(key, value, "must be a positive whole number")),
            },
            "cb_buffer_size" => match number() {
                Ok(bytes @ 1..=0x4000_0000) => self.aggregator_buffer_bytes = bytes,
                _ => return Err(bad_hint(key, value, "must be a byte count from 1 to 2^30")),
            },
            "resmpi_verify_reads" => match value.trim() {
                "all" | "true" | "1" => self.verify_all_copies = true,
                "first" | "false" | "0" => self.verify_all_copies = false,
                _ => return Err(bad_hint(key, value, "must be \"all\" or \"first\"")),
            },
            // Hints resmpi does not use are ignored, as MPI allows.
            _ => {}
        }
        Ok(())
    }

    /// The layout a new file gets, if replicated.
    fn layout(&self) -> MpiResult<Option<ReplicaLayout>> {
        if self.replication_factor < 2 {
            return Ok(None);
        }
        ReplicaLayout::new(
            self.replication_factor,
            self.block_size_bytes,
            self.targets.clone(),
        )
        .map(Some)
        .map_err(|why| MpiError::new(ErrorClass::InfoValue, why))
    }
}

// ----- open, close, delete -------------------------------------------------------

fn check_amode(amode: c_int) -> MpiResult<()> {
    let known = MPI_MODE_RDONLY
        | MPI_MODE_WRONLY
        | MPI_MODE_RDWR
        | MPI_MODE_CREATE
        | MPI_MODE_EXCL
        | MPI_MODE_DELETE_ON_CLOSE
        | MPI_MODE_UNIQUE_OPEN
        | MPI_MODE_APPEND
        | MPI_MODE_SEQUENTIAL;
    let fail = |why: &str| {
        Err(MpiError::new(
            ErrorClass::Amode,
            format!("amode {amode:#x}: {why}"),
        ))
    };
    if amode & !known != 0 {
        return fail("unknown bits");
    }
    let access = [MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR]
        .iter()
        .filter(|mode| amode & **mode != 0)
        .count();
    if access != 1 {
        return fail("exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR is needed");
    }
    if amode & MPI_MODE_RDONLY != 0 && amode & (MPI_MODE_CREATE | MPI_MODE_EXCL) != 0 {
        return fail("MPI_MODE_RDONLY cannot be combined with MPI_MODE_CREATE or MPI_MODE_EXCL");
    }
    if amode & MPI_MODE_RDWR != 0 && amode & MPI_MODE_SEQUENTIAL != 0 {
        return fail("MPI_MODE_SEQUENTIAL cannot be combined with MPI_MODE_RDWR");
    }
    Ok(())
}

/// The file name without a ROMIO file-system prefix ("ufs:", "nfs:"...).
fn file_name(filename: *const c_char) -> MpiResult<PathBuf> {
    if filename.is_null() {
        return Err(MpiError::new(ErrorClass::BadFile, "file name is NULL"));
    }
    // SAFETY: a NUL-terminated string from the application.
    let name = unsafe { CStr::from_ptr(filename) }
        .to_string_lossy()
        .into_owned();
    let name = ["ufs:", "nfs:", "lustre:", "gpfs:", "pvfs2:", "testfs:"]
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix))
        .map(str::to_string)
        .unwrap_or(name);
    if name.is_empty() {
        return Err(MpiError::new(ErrorClass::BadFile, "file name is empty"));
    }
    Ok(PathBuf::from(name))
}

/// The shared file pointer's counter file of this process. Under
/// `mpiexec --replicas R` each replica of the job is a whole MPI_COMM_WORLD
/// running the same program on the same files: every replica keeps its own
/// counter (a suffix `.rK`), or replica 1's `MPI_File_write_ordered` would
/// advance the pointer replica 0 writes at and the file would get every
/// piece twice, at different offsets. With separate counters each replica
/// writes the same bytes at the same offsets.
fn shared_pointer_path(names: &resmpi_io::placement::FileNames) -> PathBuf {
    let replica = crate::global::with_mpi("MPI_File_open", MPI_COMM_WORLD, |mpi, _| {
        Ok((mpi.replicas.count > 1).then(|| mpi.replicas.replica_of(mpi.rank())))
    })
    .ok()
    .flatten();
    match replica {
        Some(replica) => {
            let mut path = names.shared_pointer.clone().into_os_string();
            path.push(format!(".r{replica}"));
            PathBuf::from(path)
        }
        None => names.shared_pointer.clone(),
    }
}

fn open_shared_pointer(path: &std::path::Path, create: bool) -> Option<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
        .ok()
}

unsafe fn open(
    comm: MPI_Comm,
    filename: *const c_char,
    amode: c_int,
    info: MPI_Info,
) -> MpiResult<MPI_File> {
    let mut is_inter = 0;
    // SAFETY: valid out pointer.
    checked(
        unsafe { crate::comm::PMPI_Comm_test_inter(comm, &mut is_inter) },
        "MPI_Comm_test_inter",
    )?;
    if is_inter != 0 {
        return Err(MpiError::new(
            ErrorClass::Comm,
            "MPI_File_open needs an intracommunicator",
        ));
    }
    let mut file_comm = MPI_COMM_NULL;
    // SAFETY: valid out pointer.
    checked(
        unsafe { crate::comm::PMPI_Comm_dup(comm, &mut file_comm) },
        "MPI_Comm_dup",
    )?;
    // SAFETY: a valid communicator.
    unsafe { crate::errhandler::PMPI_Comm_set_errhandler(file_comm, MPI_ERRORS_RETURN) };
    // SAFETY: the arguments as given.
    let result = unsafe { open_on(file_comm, filename, amode, info) };
    if result.is_err() {
        // SAFETY: the duplicate made above.
        unsafe { crate::comm::PMPI_Comm_free(&mut file_comm) };
    }
    result
}

unsafe fn open_on(
    comm: MPI_Comm,
    filename: *const c_char,
    amode: c_int,
    info: MPI_Info,
) -> MpiResult<MPI_File> {
    let (mut rank, mut size) = (0, 0);
    // SAFETY: valid out pointers.
    checked(
        unsafe { crate::comm::PMPI_Comm_rank(comm, &mut rank) },
        "MPI_Comm_rank",
    )?;
    // SAFETY: as above.
    checked(
        unsafe { crate::comm::PMPI_Comm_size(comm, &mut size) },
        "MPI_Comm_size",
    )?;
    // Argument errors: every rank sees its own, then all agree.
    let prepared: MpiResult<(PathBuf, Hints, Option<ReplicaLayout>)> = (|| {
        let path = file_name(filename)?;
        check_amode(amode)?;
        // SAFETY: the application's info handle.
        let hints = Hints::from_pairs(&unsafe { info_pairs(info) }?)?;
        let layout = hints.layout()?;
        Ok((path, hints, layout))
    })();
    let (path, hints, layout) = match prepared {
        Ok(prepared) => {
            agree(comm, Ok(()))?;
            prepared
        }
        Err(error) => {
            agree(comm, Err(error.clone()))?;
            return Err(error);
        }
    };
    let write = amode & (MPI_MODE_WRONLY | MPI_MODE_RDWR) != 0;
    let request = |first: bool| OpenRequest {
        read: amode & (MPI_MODE_RDONLY | MPI_MODE_RDWR) != 0,
        write,
        create: first && amode & MPI_MODE_CREATE != 0,
        exclusive: first && amode & MPI_MODE_EXCL != 0,
        replication: if first { layout.clone() } else { None },
    };
    let open_store = |first: bool| {
        Store::open(&path, &request(first))
            .map_err(|error| io_error(&format!("cannot open {}", path.display()), &error))
    };
    // Rank 0 creates (and, for a replicated file, writes the metadata and
    // resets the shared file pointer); then the others open what it made.
    let mut store = None;
    let mut shared_pointer = None;
    let first = if rank == 0 {
        match open_store(true) {
            Ok(opened) => {
                let names = opened.names().clone();
                shared_pointer = open_shared_pointer(&shared_pointer_path(&names), true);
                if let Some(counter) = &shared_pointer {
                    let start = if amode & MPI_MODE_APPEND != 0 {
                        opened.len().unwrap_or(0) as i64
                    } else {
                        0
                    };
                    let _ = resmpi_io::lock::store(counter, start);
                }
                store = Some(opened);
                Ok(())
            }
            Err(error) => Err(error),
        }
    } else {
        Ok(())
    };
    let first_class = broadcast_i64(
        comm,
        first.as_ref().err().map_or(0, |error| error.class as i64),
    )?;
    if first_class != 0 {
        return Err(first.err().unwrap_or_else(|| {
            MpiError::new(
                ErrorClass::from_i32(first_class as i32).unwrap_or(ErrorClass::Other),
                format!("cannot open {}", path.display()),
            )
        }));
    }
    let mine = if rank == 0 {
        Ok(())
    } else {
        open_store(false).map(|opened| {
            shared_pointer = open_shared_pointer(&shared_pointer_path(opened.names()), false);
            store = Some(opened);
        })
    };
    agree(comm, mine)?;
    let mut store = store.expect("opened");
    store.verify_all_copies = hints.verify_all_copies;
    let position_etypes = if amode & MPI_MODE_APPEND != 0 {
        store
            .len()
            .map_err(|error| io_error("cannot read the file size", &error))?
    } else {
        0
    };
    let file = OpenFile {
        comm,
        rank,
        size,
        path,
        amode,
        store,
        view: FileView::bytes(),
        etype: MPI_BYTE,
        filetype: MPI_BYTE,
        datarep: ViewDatarep::Native,
        atomic: false,
        position_etypes,
        shared_pointer,
        errhandler: NULL_FILE_ERRHANDLER.load(Ordering::Relaxed),
        split: None,
        exchange_buffers: Default::default(),
        hints,
        repaired_blocks: 0,
        unrepaired_blocks: 0,
    };
    FILES_USED.store(true, Ordering::Relaxed);
    let mut table = files();
    let index = match table.iter().position(Option::is_none) {
        Some(index) => index,
        None => {
            table.push(None);
            table.len() - 1
        }
    };
    table[index] = Some(Arc::new(Mutex::new(file)));
    Ok(handle_of(index))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_open(
    comm: MPI_Comm,
    filename: *const c_char,
    amode: c_int,
    info: MPI_Info,
    fh: *mut MPI_File,
) -> c_int {
    crate::file_siblings::in_step();
    // Under `--replicas` the replicas' rank 0 both create an MPI_MODE_EXCL
    // file: all look for it first, in step, and where it did not exist the
    // one that finds it made by its sibling opens it, as the sibling's
    // exclusive create did; where it existed, both fail.
    let mut open_amode = amode;
    if amode & MPI_MODE_EXCL != 0 && crate::file_siblings::replicated() {
        let existed = file_name(filename).is_ok_and(|path| path.exists());
        crate::file_siblings::in_step();
        if !existed {
            open_amode &= !MPI_MODE_EXCL;
        }
    }
    let errhandler = NULL_FILE_ERRHANDLER.load(Ordering::Relaxed);
    if fh.is_null() {
        let error = MpiError::new(ErrorClass::Arg, "file handle pointer is NULL");
        return raise_file("MPI_File_open", MPI_FILE_NULL, errhandler, error);
    }
    // SAFETY: the application's arguments.
    match unsafe { open(comm, filename, open_amode, info) } {
        Ok(handle) => {
            if open_amode != amode {
                if let Some(file) = lookup(handle) {
                    // MPI_File_get_amode returns what the program asked for.
                    file.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .amode = amode;
                }
            }
            // SAFETY: checked non-null.
            unsafe { *fh = handle };
            MPI_SUCCESS
        }
        Err(error) => {
            // SAFETY: checked non-null.
            unsafe { *fh = MPI_FILE_NULL };
            raise_file("MPI_File_open", MPI_FILE_NULL, errhandler, error)
        }
    }
}
const _: fn_types::MPI_File_open = PMPI_File_open;

/// Free the view's datatypes if they are duplicates owned by the file.
fn release_view_types(file: &mut OpenFile) {
    for datatype in [&mut file.etype, &mut file.filetype] {
        if crate::datatype::builtin_info(*datatype).is_none() {
            // SAFETY: a duplicate made by MPI_File_set_view.
            unsafe { crate::datatype_queries::PMPI_Type_free(datatype) };
        }
        *datatype = MPI_BYTE;
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_close(fh: *mut MPI_File) -> c_int {
    if fh.is_null() {
        let error = MpiError::new(ErrorClass::Arg, "file handle pointer is NULL");
        return raise_file(
            "MPI_File_close",
            MPI_FILE_NULL,
            NULL_FILE_ERRHANDLER.load(Ordering::Relaxed),
            error,
        );
    }
    // SAFETY: checked non-null.
    let handle = unsafe { *fh };
    let code = file_entry("MPI_File_close", handle, |file| {
        if file.split.is_some() {
            return Err(MpiError::new(
                ErrorClass::Other,
                "a split collective is still in progress (call its _end first)",
            ));
        }
        barrier(file.comm)?;
        let local = if file.rank == 0 {
            let names = file.store.names().clone();
            let _ = std::fs::remove_file(shared_pointer_path(&names));
            if file.amode & MPI_MODE_DELETE_ON_CLOSE != 0 {
                match resmpi_io::store::delete(&file.path) {
                    // A sibling replica (`--replicas`) closed it first.
                    Err(error)
                        if error.kind() == std::io::ErrorKind::NotFound
                            && crate::file_siblings::replicated() =>
                    {
                        Ok(())
                    }
                    deleted => deleted,
                }
                .map_err(|error| io_error("MPI_MODE_DELETE_ON_CLOSE", &error))
            } else {
                Ok(())
            }
        } else {
            Ok(())
        };
        // Nobody returns before the file is gone.
        agree(file.comm, local)?;
        release_view_types(file);
        // SAFETY: the file's own duplicate.
        unsafe { crate::comm::PMPI_Comm_free(&mut file.comm) };
        Ok(())
    });
    if code == MPI_SUCCESS {
        if let Some(index) = (handle as usize).checked_sub(1) {
            if let Some(slot) = files().get_mut(index) {
                *slot = None;
            }
        }
        // SAFETY: checked non-null.
        unsafe { *fh = MPI_FILE_NULL };
    }
    code
}
const _: fn_types::MPI_File_close = PMPI_File_close;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_delete(filename: *const c_char, info: MPI_Info) -> c_int {
    let _ = info;
    // Under `--replicas` every replica of the rank deletes: all look first,
    // in step, so that the one that finds the file already gone behind its
    // sibling's delete still succeeds, as its sibling did.
    crate::file_siblings::in_step();
    let existed = file_name(filename).is_ok_and(|path| path.exists());
    crate::file_siblings::in_step();
    let result = file_name(filename).and_then(|path| match resmpi_io::store::delete(&path) {
        Err(error) if existed && error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        deleted => {
            deleted.map_err(|error| io_error(&format!("cannot delete {}", path.display()), &error))
        }
    });
    match result {
        Ok(()) => MPI_SUCCESS,
        Err(error) => raise_file(
            "MPI_File_delete",
            MPI_FILE_NULL,
            NULL_FILE_ERRHANDLER.load(Ordering::Relaxed),
            error,
        ),
    }
}
const _: fn_types::MPI_File_delete = PMPI_File_delete;

// ----- size, info, group, amode, atomicity, sync ----------------------------------

fn writable(file: &OpenFile, what: &str) -> MpiResult<()> {
    if file.amode & MPI_MODE_RDONLY != 0 {
        return Err(MpiError::new(
            ErrorClass::ReadOnly,
            format!("{what}: the file was opened MPI_MODE_RDONLY"),
        ));
    }
    Ok(())
}

fn offset_argument(value: MPI_Offset, what: &str) -> MpiResult<u64> {
    u64::try_from(value)
        .map_err(|_| MpiError::new(ErrorClass::Arg, format!("{what} {value} is negative")))
}

/// A collective size change: rank 0 does it, everyone agrees on the outcome.
fn resize(file: &mut OpenFile, size: MPI_Offset, grow_only: bool, what: &str) -> MpiResult<()> {
    // Every process's earlier accesses are done before the size changes.
    barrier(file.comm)?;
    let local = offset_argument(size, "size").and_then(|size| {
        writable(file, what)?;
        if file.rank != 0 {
            return Ok(());
        }
        let done = if grow_only {
            file.store.preallocate(size)
        } else {
            file.store.set_len(size)
        };
        done.map_err(|error| io_error(what, &error))
    });
    agree(file.comm, local)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_set_size(fh: MPI_File, size: MPI_Offset) -> c_int {
    file_entry("MPI_File_set_size", fh, |file| {
        resize(file, size, false, "MPI_File_set_size")
    })
}
const _: fn_types::MPI_File_set_size = PMPI_File_set_size;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_preallocate(fh: MPI_File, size: MPI_Offset) -> c_int {
    file_entry("MPI_File_preallocate", fh, |file| {
        resize(file, size, true, "MPI_File_preallocate")
    })
}
const _: fn_types::MPI_File_preallocate = PMPI_File_preallocate;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_size(fh: MPI_File, size: *mut MPI_Offset) -> c_int {
    file_entry("MPI_File_get_size", fh, |file| {
        crate::global::out_pointer(size, "size")?;
        let length = file
            .store
            .len()
            .map_err(|error| io_error("cannot read the file size", &error))?;
        // SAFETY: checked non-null.
        unsafe { *size = length as MPI_Offset };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_size = PMPI_File_get_size;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_amode(fh: MPI_File, amode: *mut c_int) -> c_int {
    file_entry("MPI_File_get_amode", fh, |file| {
        crate::global::out_pointer(amode, "amode")?;
        // SAFETY: checked non-null.
        unsafe { *amode = file.amode };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_amode = PMPI_File_get_amode;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_group(fh: MPI_File, group: *mut MPI_Group) -> c_int {
    file_entry("MPI_File_get_group", fh, |file| {
        crate::global::out_pointer(group, "group")?;
        // SAFETY: checked non-null; the file's communicator.
        checked(
            unsafe { crate::group::PMPI_Comm_group(file.comm, group) },
            "MPI_Comm_group",
        )
    })
}
const _: fn_types::MPI_File_get_group = PMPI_File_get_group;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_set_atomicity(fh: MPI_File, flag: c_int) -> c_int {
    file_entry("MPI_File_set_atomicity", fh, |file| {
        file.atomic = flag != 0;
        barrier(file.comm)
    })
}
const _: fn_types::MPI_File_set_atomicity = PMPI_File_set_atomicity;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_atomicity(fh: MPI_File, flag: *mut c_int) -> c_int {
    file_entry("MPI_File_get_atomicity", fh, |file| {
        crate::global::out_pointer(flag, "flag")?;
        // SAFETY: checked non-null.
        unsafe { *flag = file.atomic as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_atomicity = PMPI_File_get_atomicity;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_sync(fh: MPI_File) -> c_int {
    file_entry("MPI_File_sync", fh, |file| {
        let local = file
            .store
            .sync()
            .map_err(|error| io_error("MPI_File_sync", &error));
        agree(file.comm, local)
    })
}
const _: fn_types::MPI_File_sync = PMPI_File_sync;

/// `pairs` as a new MPI_Info.
pub(crate) unsafe fn new_info(pairs: &[(String, String)]) -> MpiResult<MPI_Info> {
    let mut info = MPI_INFO_NULL;
    // SAFETY: valid out pointer.
    checked(
        unsafe { crate::info::PMPI_Info_create(&mut info) },
        "MPI_Info_create",
    )?;
    for (key, value) in pairs {
        let key = std::ffi::CString::new(key.as_str()).unwrap_or_default();
        let value = std::ffi::CString::new(value.as_str()).unwrap_or_default();
        // SAFETY: NUL-terminated strings.
        checked(
            unsafe { crate::info::PMPI_Info_set(info, key.as_ptr(), value.as_ptr()) },
            "MPI_Info_set",
        )?;
    }
    Ok(info)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_info(fh: MPI_File, info_used: *mut MPI_Info) -> c_int {
    file_entry("MPI_File_get_info", fh, |file| {
        crate::global::out_pointer(info_used, "info_used")?;
        let mut pairs = Vec::new();
        match file.store.layout() {
            Some(layout) => {
                let targets: Vec<String> = layout
                    .targets
                    .iter()
                    .map(|target| target.display().to_string())
                    .collect();
                pairs.push((
                    "replication_factor".to_string(),
                    layout.replication_factor.to_string(),
                ));
                pairs.push((
                    "striping_unit".to_string(),
                    layout.block_size_bytes.to_string(),
                ));
                pairs.push(("resmpi_replica_targets".to_string(), targets.join(",")));
                pairs.push((
                    "resmpi_verify_reads".to_string(),
                    if file.store.verify_all_copies {
                        "all"
                    } else {
                        "first"
                    }
                    .to_string(),
                ));
            }
            None => pairs.push(("replication_factor".to_string(), "1".to_string())),
        }
        let hints = &file.hints;
        pairs.push((
            "romio_cb_write".to_string(),
            hints.collective_buffering_write.name().to_string(),
        ));
        pairs.push((
            "romio_cb_read".to_string(),
            hints.collective_buffering_read.name().to_string(),
        ));
        pairs.push((
            "romio_ds_read".to_string(),
            hints.data_sieving_read.name().to_string(),
        ));
        pairs.push((
            "ind_rd_buffer_size".to_string(),
            hints.sieve_buffer_bytes.to_string(),
        ));
        pairs.push((
            "cb_buffer_size".to_string(),
            hints.aggregator_buffer_bytes.to_string(),
        ));
        pairs.push((
            "cb_nodes".to_string(),
            crate::file_collective::aggregator_count(hints, file.size).to_string(),
        ));
        pairs.push((
            "resmpi_repaired_blocks".to_string(),
            file.repaired_blocks.to_string(),
        ));
        pairs.push((
            "resmpi_unrepaired_blocks".to_string(),
            file.unrepaired_blocks.to_string(),
        ));
        // What this process wrote, and what it left to its rank's other
        // replica that wrote it (`mpiexec --replicas`: written once per
        // rank).
        let (written, left_to_replica) = file.store.write_counts();
        pairs.push(("resmpi_bytes_written".to_string(), written.to_string()));
        pairs.push((
            "resmpi_bytes_left_to_replica".to_string(),
            left_to_replica.to_string(),
        ));
        // SAFETY: checked non-null.
        unsafe { *info_used = new_info(&pairs)? };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_info = PMPI_File_get_info;

/// Hints that can change on an open file (the layout cannot).
unsafe fn apply_runtime_hints(file: &mut OpenFile, info: MPI_Info) -> MpiResult<()> {
    // SAFETY: the application's info handle.
    for (key, value) in unsafe { info_pairs(info) }? {
        if matches!(
            key.as_str(),
            "resmpi_verify_reads"
                | "romio_cb_write"
                | "romio_cb_read"
                | "cb_nodes"
                | "cb_buffer_size"
                | "romio_ds_read"
                | "ind_rd_buffer_size"
        ) {
            file.hints.apply(&key, &value)?;
            file.store.verify_all_copies = file.hints.verify_all_copies;
        }
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_set_info(fh: MPI_File, info: MPI_Info) -> c_int {
    file_entry("MPI_File_set_info", fh, |file| {
        // SAFETY: the application's info handle.
        let local = unsafe { apply_runtime_hints(file, info) };
        agree(file.comm, local)
    })
}
const _: fn_types::MPI_File_set_info = PMPI_File_set_info;

// ----- views, pointers and offsets ----------------------------------------------------

/// The data segments of `datatype`'s type map and its extent.
fn type_geometry(
    datatype: MPI_Datatype,
    what: &str,
) -> MpiResult<(Vec<FiletypeSegment>, i64, u64)> {
    let layout = crate::datatype::committed_layout(datatype)
        .map_err(|error| MpiError::new(ErrorClass::Type, format!("{what}: {}", error.message)))?;
    let segments = layout
        .segments
        .iter()
        .map(|segment| FiletypeSegment {
            offset_bytes: segment.offset_bytes as i64,
            length_bytes: segment.length_bytes as u64,
        })
        .collect();
    Ok((
        segments,
        layout.extent_bytes() as i64,
        layout.size_bytes as u64,
    ))
}

/// A duplicate of a derived datatype the file keeps; predefined ones as is.
fn keep_type(datatype: MPI_Datatype) -> MpiResult<MPI_Datatype> {
    if crate::datatype::builtin_info(datatype).is_some() {
        return Ok(datatype);
    }
    let mut duplicate = MPI_DATATYPE_NULL;
    // SAFETY: valid out pointer.
    checked(
        unsafe { crate::datatype_constructors::PMPI_Type_dup(datatype, &mut duplicate) },
        "MPI_Type_dup",
    )?;
    Ok(duplicate)
}

unsafe fn set_view(
    file: &mut OpenFile,
    disp: MPI_Offset,
    etype: MPI_Datatype,
    filetype: MPI_Datatype,
    datarep: *const c_char,
    info: MPI_Info,
    current_shared_etypes: i64,
) -> MpiResult<()> {
    if datarep.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "datarep is NULL"));
    }
    // SAFETY: a NUL-terminated string from the application.
    let representation = unsafe { CStr::from_ptr(datarep) }
        .to_string_lossy()
        .into_owned();
    let datarep = match representation.as_str() {
        "native" => ViewDatarep::Native,
        // On x86-64 LP64 every predefined type but long, unsigned long and
        // wchar_t has its external32 size: the representation is the
        // native bytes, each element big-endian (those three are refused,
        // see `external32_view_can_hold`).
        "external32" => ViewDatarep::External32,
        name => match crate::datarep::find(name) {
            Some((index, _)) => ViewDatarep::User(index),
            None => {
                return Err(MpiError::new(
                    ErrorClass::UnsupportedDatarep,
                    format!(
                        "data representation {representation:?} (resmpi knows \"native\", \"external32\" \
                         and those registered with MPI_Register_datarep)"
                    ),
                ))
            }
        },
    };
    if file.split.is_some() {
        return Err(MpiError::new(
            ErrorClass::Other,
            "a split collective is in progress",
        ));
    }
    let displacement = if disp == MPI_DISPLACEMENT_CURRENT as MPI_Offset {
        if file.amode & MPI_MODE_SEQUENTIAL == 0 {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "MPI_DISPLACEMENT_CURRENT needs MPI_MODE_SEQUENTIAL",
            ));
        }
        let etypes = u64::try_from(current_shared_etypes)
            .map_err(|_| MpiError::new(ErrorClass::Io, "the shared file pointer is unavailable"))?;
        file.view
            .file_offset_of(etypes * file.view.etype_size_bytes())
    } else {
        offset_argument(disp, "displacement")?
    };
    for (datatype, what) in [(etype, "the etype"), (filetype, "the filetype")] {
        view_can_hold(
            datarep,
            datatype,
            &*crate::datatype::layout_of(datatype)?,
            what,
        )?;
    }
    let (etype_segments, _, etype_size) = type_geometry(etype, "etype")?;
    let (segments, extent, _) = type_geometry(filetype, "filetype")?;
    // A type map MPI-IO cannot use is MPI_ERR_IO, as in ROMIO; overlapping
    // runs only make sense for reading.
    let read_only = file.amode & MPI_MODE_RDONLY != 0;
    for (segments, what) in [(&etype_segments, "etype"), (&segments, "filetype")] {
        resmpi_io::view::check_monotonic(segments, what, read_only)
            .map_err(|error| MpiError::new(ErrorClass::Io, error.0))?;
    }
    let view = FileView::new(displacement, etype_size, segments, extent)
        .map_err(|error| MpiError::new(ErrorClass::Io, error.0))?;
    // SAFETY: the application's info handle.
    unsafe { apply_runtime_hints(file, info) }?;
    let kept_etype = keep_type(etype)?;
    let kept_filetype = keep_type(filetype)?;
    release_view_types(file);
    file.etype = kept_etype;
    file.filetype = kept_filetype;
    file.view = view;
    file.datarep = datarep;
    file.position_etypes = 0;
    if file.rank == 0 {
        if let Some(counter) = &file.shared_pointer {
            resmpi_io::lock::store(counter, 0)
                .map_err(|error| io_error("cannot reset the shared file pointer", &error))?;
        }
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_set_view(
    fh: MPI_File,
    disp: MPI_Offset,
    etype: MPI_Datatype,
    filetype: MPI_Datatype,
    datarep: *const c_char,
    info: MPI_Info,
) -> c_int {
    file_entry("MPI_File_set_view", fh, |file| {
        // Every process's earlier shared-pointer accesses are done, and all
        // learn the pointer (MPI_DISPLACEMENT_CURRENT) before rank 0 resets it.
        barrier(file.comm)?;
        let current = if file.rank == 0 {
            shared_position(file, 0).map_or(-1, |etypes| etypes as i64)
        } else {
            0
        };
        let current = broadcast_i64(file.comm, current)?;
        // SAFETY: the application's arguments.
        let local = unsafe { set_view(file, disp, etype, filetype, datarep, info, current) };
        agree(file.comm, local)
    })
}
const _: fn_types::MPI_File_set_view = PMPI_File_set_view;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_view(
    fh: MPI_File,
    disp: *mut MPI_Offset,
    etype: *mut MPI_Datatype,
    filetype: *mut MPI_Datatype,
    datarep: *mut c_char,
) -> c_int {
    file_entry("MPI_File_get_view", fh, |file| {
        crate::global::out_pointer(disp, "disp")?;
        crate::global::out_pointer(etype, "etype")?;
        crate::global::out_pointer(filetype, "filetype")?;
        crate::global::out_pointer(datarep, "datarep")?;
        let (etype_copy, filetype_copy) = (keep_type(file.etype)?, keep_type(file.filetype)?);
        // SAFETY: checked non-null; datarep holds MPI_MAX_DATAREP_STRING bytes.
        unsafe {
            *disp = file.view.displacement_bytes() as MPI_Offset;
            *etype = etype_copy;
            *filetype = filetype_copy;
            let name = match file.datarep {
                ViewDatarep::Native => "native".to_string(),
                ViewDatarep::External32 => "external32".to_string(),
                ViewDatarep::User(index) => crate::datarep::get(index).name,
            };
            std::ptr::copy_nonoverlapping(name.as_ptr().cast(), datarep, name.len());
            *datarep.add(name.len()) = 0;
        }
        Ok(())
    })
}
const _: fn_types::MPI_File_get_view = PMPI_File_get_view;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_type_extent(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Aint,
) -> c_int {
    file_entry("MPI_File_get_type_extent", fh, |file| {
        crate::global::out_pointer(extent, "extent")?;
        let layout = crate::datatype::layout_of(datatype)?;
        view_can_hold(file.datarep, datatype, &layout, "the datatype")?;
        // SAFETY: checked non-null.
        unsafe { *extent = layout.extent_bytes() as MPI_Aint };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_type_extent = PMPI_File_get_type_extent;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_type_extent_c(
    fh: MPI_File,
    datatype: MPI_Datatype,
    extent: *mut MPI_Count,
) -> c_int {
    // SAFETY: the caller's arguments (MPI_Count and MPI_Aint are one type here).
    unsafe { PMPI_File_get_type_extent(fh, datatype, extent) }
}
const _: fn_types::MPI_File_get_type_extent_c = PMPI_File_get_type_extent_c;

/// The data representation of a file view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewDatarep {
    /// "native": the bytes of memory.
    Native,
    /// "external32": each element big-endian (see `crate::external32`).
    External32,
    /// Registered with MPI_Register_datarep (its index, `crate::datarep`).
    User(usize),
}

/// MPI_ERR_UNSUPPORTED_DATAREP for a `datatype` (whose layout the caller
/// has at hand) a view in `datarep` cannot hold at its native size (see
/// [`external32_view_can_hold`] and `crate::datarep`).
pub(crate) fn view_can_hold(
    datarep: ViewDatarep,
    datatype: MPI_Datatype,
    layout: &Datatype,
    what: &str,
) -> MpiResult<()> {
    match datarep {
        ViewDatarep::Native => Ok(()),
        ViewDatarep::External32 => external32_view_can_hold(layout, what),
        ViewDatarep::User(index) => crate::datarep::get(index).check_sizes(datatype, what),
    }
}

/// MPI_ERR_UNSUPPORTED_DATAREP for a type an "external32" file view cannot
/// hold here: one with C `long`, `unsigned long` or `wchar_t`, which
/// external32 stores in fewer bytes than memory (MPI_Pack_external
/// converts them; file views keep every element at its native size, so
/// such a file would not be external32).
pub(crate) fn external32_view_can_hold(layout: &Datatype, what: &str) -> MpiResult<()> {
    if layout.narrows_in_external32() {
        return Err(MpiError::new(
            ErrorClass::UnsupportedDatarep,
            format!(
                "{what} holds MPI_LONG, MPI_UNSIGNED_LONG or MPI_WCHAR, which \"external32\" stores \
                 in 4, 4 and 2 bytes; resmpi's external32 file views do not convert them \
                 (use MPI_INT32_T/MPI_INT64_T, or the \"native\" representation)"
            ),
        ));
    }
    Ok(())
}

pub(crate) fn not_sequential(file: &OpenFile, what: &str) -> MpiResult<()> {
    if file.amode & MPI_MODE_SEQUENTIAL != 0 {
        return Err(MpiError::new(
            ErrorClass::Unsupported,
            format!("{what} on a file opened MPI_MODE_SEQUENTIAL"),
        ));
    }
    Ok(())
}

/// Where MPI_SEEK_* puts a pointer now at `current` etypes.
fn seek_target(file: &OpenFile, offset: MPI_Offset, whence: c_int, current: u64) -> MpiResult<u64> {
    let base = match whence {
        MPI_SEEK_SET => 0,
        MPI_SEEK_CUR => current as i64,
        MPI_SEEK_END => {
            let size = file
                .store
                .len()
                .map_err(|error| io_error("cannot read the file size", &error))?;
            (file.view.view_bytes_before(size) / file.view.etype_size_bytes()) as i64
        }
        _ => {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("whence {whence} is not MPI_SEEK_SET, MPI_SEEK_CUR or MPI_SEEK_END"),
            ))
        }
    };
    let target = base.checked_add(offset).unwrap_or(-1);
    u64::try_from(target).map_err(|_| {
        MpiError::new(
            ErrorClass::Arg,
            format!("seeking to offset {offset} from {base} gives a negative position"),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_seek(fh: MPI_File, offset: MPI_Offset, whence: c_int) -> c_int {
    file_entry("MPI_File_seek", fh, |file| {
        not_sequential(file, "MPI_File_seek")?;
        file.position_etypes = seek_target(file, offset, whence, file.position_etypes)?;
        Ok(())
    })
}
const _: fn_types::MPI_File_seek = PMPI_File_seek;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_position(fh: MPI_File, offset: *mut MPI_Offset) -> c_int {
    file_entry("MPI_File_get_position", fh, |file| {
        crate::global::out_pointer(offset, "offset")?;
        // SAFETY: checked non-null.
        unsafe { *offset = file.position_etypes as MPI_Offset };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_position = PMPI_File_get_position;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_byte_offset(
    fh: MPI_File,
    offset: MPI_Offset,
    disp: *mut MPI_Offset,
) -> c_int {
    file_entry("MPI_File_get_byte_offset", fh, |file| {
        crate::global::out_pointer(disp, "disp")?;
        let etypes = offset_argument(offset, "offset")?;
        let byte = file
            .view
            .file_offset_of(etypes * file.view.etype_size_bytes());
        // SAFETY: checked non-null.
        unsafe { *disp = byte as MPI_Offset };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_byte_offset = PMPI_File_get_byte_offset;

/// Fetch the shared file pointer and add `delta_etypes` to it.
pub(crate) fn shared_position(file: &OpenFile, delta_etypes: u64) -> MpiResult<u64> {
    let counter = file.shared_pointer.as_ref().ok_or_else(|| {
        MpiError::new(
            ErrorClass::Io,
            format!(
                "the shared file pointer of {} is unavailable (its directory is not writable)",
                file.path.display()
            ),
        )
    })?;
    let before = resmpi_io::lock::fetch_add(counter, delta_etypes as i64)
        .map_err(|error| io_error("shared file pointer", &error))?;
    Ok(before.max(0) as u64)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_position_shared(
    fh: MPI_File,
    offset: *mut MPI_Offset,
) -> c_int {
    file_entry("MPI_File_get_position_shared", fh, |file| {
        crate::global::out_pointer(offset, "offset")?;
        let position = shared_position(file, 0)?;
        // SAFETY: checked non-null.
        unsafe { *offset = position as MPI_Offset };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_position_shared = PMPI_File_get_position_shared;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_seek_shared(
    fh: MPI_File,
    offset: MPI_Offset,
    whence: c_int,
) -> c_int {
    file_entry("MPI_File_seek_shared", fh, |file| {
        barrier(file.comm)?;
        let local = (|| {
            if file.rank != 0 {
                return Ok(());
            }
            let current = shared_position(file, 0)?;
            let target = seek_target(file, offset, whence, current)?;
            let counter = file
                .shared_pointer
                .as_ref()
                .expect("shared_position checked");
            resmpi_io::lock::store(counter, target as i64)
                .map_err(|error| io_error("shared file pointer", &error))
        })();
        agree(file.comm, local)
    })
}
const _: fn_types::MPI_File_seek_shared = PMPI_File_seek_shared;

// ----- error handlers and handle conversion -------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_create_errhandler(
    function: MPI_File_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    crate::global::entry("MPI_File_create_errhandler", MPI_COMM_WORLD, |_, global| {
        let Some(function) = function else {
            return Err(MpiError::new(ErrorClass::Arg, "function is NULL"));
        };
        crate::global::out_pointer(errhandler, "errhandler")?;
        // SAFETY: both are C functions taking (handle pointer, int pointer,
        // ...); raise_file turns it back before calling.
        let stored: unsafe extern "C" fn(*mut MPI_Comm, *mut c_int, ...) =
            unsafe { std::mem::transmute(function) };
        // SAFETY: checked non-null.
        unsafe { *errhandler = register_errhandler(global, stored) };
        Ok(())
    })
}
const _: fn_types::MPI_File_create_errhandler = PMPI_File_create_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_set_errhandler(
    file: MPI_File,
    errhandler: MPI_Errhandler,
) -> c_int {
    if file == MPI_FILE_NULL {
        return match valid_errhandler(errhandler) {
            Ok(()) => {
                NULL_FILE_ERRHANDLER.store(errhandler, Ordering::Relaxed);
                MPI_SUCCESS
            }
            Err(error) => raise_file(
                "MPI_File_set_errhandler",
                file,
                NULL_FILE_ERRHANDLER.load(Ordering::Relaxed),
                error,
            ),
        };
    }
    file_entry("MPI_File_set_errhandler", file, |open| {
        valid_errhandler(errhandler)?;
        open.errhandler = errhandler;
        Ok(())
    })
}
const _: fn_types::MPI_File_set_errhandler = PMPI_File_set_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_get_errhandler(
    file: MPI_File,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    if errhandler.is_null() {
        let error = MpiError::new(ErrorClass::Arg, "errhandler pointer is NULL");
        return raise_file(
            "MPI_File_get_errhandler",
            file,
            NULL_FILE_ERRHANDLER.load(Ordering::Relaxed),
            error,
        );
    }
    if file == MPI_FILE_NULL {
        // SAFETY: checked non-null.
        unsafe { *errhandler = NULL_FILE_ERRHANDLER.load(Ordering::Relaxed) };
        return MPI_SUCCESS;
    }
    file_entry("MPI_File_get_errhandler", file, |open| {
        // SAFETY: checked non-null.
        unsafe { *errhandler = open.errhandler };
        Ok(())
    })
}
const _: fn_types::MPI_File_get_errhandler = PMPI_File_get_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_call_errhandler(fh: MPI_File, errorcode: c_int) -> c_int {
    let errhandler = if fh == MPI_FILE_NULL {
        NULL_FILE_ERRHANDLER.load(Ordering::Relaxed)
    } else {
        match lookup(fh) {
            Some(file) => {
                file.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .errhandler
            }
            None => {
                return raise_file(
                    "MPI_File_call_errhandler",
                    fh,
                    NULL_FILE_ERRHANDLER.load(Ordering::Relaxed),
                    invalid_file(fh),
                )
            }
        }
    };
    if errorcode == MPI_SUCCESS {
        return MPI_SUCCESS;
    }
    // The handler gets the code exactly as given (mpi4py checks it).
    let class = crate::error_codes::detail_of(errorcode)
        .map(|(class, _)| class)
        .unwrap_or(errorcode);
    let class = ErrorClass::from_i32(class).unwrap_or(ErrorClass::Other);
    dispatch_file_error(
        "MPI_File_call_errhandler",
        fh,
        errhandler,
        errorcode,
        &MpiError::new(class, "raised by MPI_File_call_errhandler"),
    );
    MPI_SUCCESS
}
const _: fn_types::MPI_File_call_errhandler = PMPI_File_call_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_c2f(file: MPI_File) -> MPI_Fint {
    file as usize as MPI_Fint
}
const _: fn_types::MPI_File_c2f = PMPI_File_c2f;

#[no_mangle]
pub unsafe extern "C" fn PMPI_File_f2c(file: MPI_Fint) -> MPI_File {
    match usize::try_from(file) {
        Ok(value) if lookup(value as MPI_File).is_some() => value as MPI_File,
        _ => MPI_FILE_NULL,
    }
}
const _: fn_types::MPI_File_f2c = PMPI_File_f2c;
