//! One-sided communication's windows: creation in every flavor (create,
//! allocate, allocate_shared with MPI_Win_shared_query, dynamic with
//! attach/detach), free, attributes, names, info, error handlers and the
//! group. The operations and synchronisation calls are in `rma_ops.rs`;
//! executing them at the target is the engine's (`engine/rma.rs`).
//!
//! Why windows keep their own table, as files do: creating and freeing a
//! window are collectives on the window's own communicator (a duplicate of
//! the one given, with MPI_ERRORS_RETURN, so its traffic never mixes with
//! the application's), and those take the library lock themselves; a
//! window call holds only its window's mutex.
//!
//! The engine knows a window by an id every member agrees on: the context
//! id of that duplicate.
//!
//! Errors go to the window's error handler (MPI_ERRORS_ARE_FATAL unless
//! set, as MPI says); calls on an invalid handle use MPI_COMM_WORLD's.

use std::ffi::CStr;
use std::sync::{Arc, Mutex, MutexGuard};

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::errhandler::{register_errhandler, valid_errhandler};
use crate::file::checked;
use crate::handles::errhandler_index;

/// Handle bits of a window: MPICH's kind "direct" (2) and class 8.
const WINDOW_HANDLE_BITS: c_int = 0xA000_0000_u32 as c_int;

/// What this process's window memory is and who frees it.
pub(crate) enum OwnedMemory {
    /// The application's (MPI_Win_create) or none (dynamic).
    None,
    /// MPI_Win_allocate: from the C allocator.
    Allocated(*mut c_void),
    /// MPI_Win_allocate_shared: one mapping of the shared segment.
    Mapped(*mut c_void, usize),
}

/// The synchronisation state of this process on one window.
#[derive(Default)]
pub(crate) struct Epoch {
    /// Between two fences (not after MPI_MODE_NOSUCCEED).
    pub fence: bool,
    /// MPI_Win_start's targets, world ranks, until MPI_Win_complete.
    pub start: Option<Vec<u32>>,
    /// MPI_Win_post's origins, world ranks, until MPI_Win_wait/test.
    pub post: Option<Vec<u32>>,
    /// Passive-target locks held, by window rank: (exclusive, acquired
    /// (false under MPI_MODE_NOCHECK)).
    pub locks: std::collections::BTreeMap<c_int, (bool, bool)>,
    /// Inside MPI_Win_lock_all.
    pub lock_all: bool,
}

/// One window as this process sees it.
pub(crate) struct Window {
    /// The engine's id of this window.
    pub id: u32,
    /// The window's own communicator (a duplicate).
    pub comm: MPI_Comm,
    /// World rank of each window rank.
    pub group: Vec<u32>,
    /// MPI_WIN_BASE.
    pub base: *mut c_void,
    /// MPI_WIN_SIZE.
    pub size: MPI_Aint,
    /// MPI_WIN_DISP_UNIT.
    pub disp_unit: c_int,
    /// MPI_WIN_CREATE_FLAVOR.
    pub flavor: c_int,
    /// MPI_WIN_MODEL.
    pub model: c_int,
    /// Every rank's window size and displacement unit.
    pub sizes: Vec<MPI_Aint>,
    /// See `sizes`.
    pub disp_units: Vec<c_int>,
    /// Shared windows: every rank's base address in this process.
    pub shared_bases: Vec<usize>,
    /// The error handler.
    pub errhandler: MPI_Errhandler,
    /// MPI_Win_set_name's.
    pub name: String,
    /// MPI_Win_set_info's hints.
    pub info: Vec<(String, String)>,
    /// Cached attributes (keyval, value).
    pub attributes: Vec<(c_int, usize)>,
    /// Synchronisation state.
    pub epoch: Epoch,
    /// Memory freed with the window.
    pub memory: OwnedMemory,
    /// The direct path (`rma_direct.rs`): Some when every member agreed
    /// at creation that this window's operations are loads and stores.
    pub direct: Option<crate::rma_direct::Direct>,
}

// SAFETY: the raw pointers are window memory addresses handed out to the
// application and only dereferenced by the engine under its contract; the
// window itself is reached through its mutex.
unsafe impl Send for Window {}

type WindowSlot = Option<Arc<Mutex<Window>>>;

static WINDOWS: Mutex<Vec<WindowSlot>> = Mutex::new(Vec::new());

fn windows() -> MutexGuard<'static, Vec<WindowSlot>> {
    WINDOWS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn handle_of(index: usize) -> MPI_Win {
    WINDOW_HANDLE_BITS | index as c_int
}

fn index_of(handle: MPI_Win) -> Option<usize> {
    if handle as u32 & 0xFC00_0000 != WINDOW_HANDLE_BITS as u32 {
        return None;
    }
    Some((handle as u32 & 0x03FF_FFFF) as usize)
}

pub(crate) fn lookup(handle: MPI_Win) -> Option<Arc<Mutex<Window>>> {
    windows().get(index_of(handle)?).cloned().flatten()
}

pub(crate) fn invalid_window(handle: MPI_Win) -> MpiError {
    let what = if handle == MPI_WIN_NULL {
        "MPI_WIN_NULL".to_string()
    } else {
        format!("{handle:#x} (freed or never created)")
    };
    MpiError::new(ErrorClass::Win, format!("window {what} is not valid"))
}

pub(crate) fn lock_window(window: &Mutex<Window>) -> MutexGuard<'_, Window> {
    window
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Dispatch `error` of call `name` on window `handle` to `errhandler`.
pub(crate) fn raise_window(
    name: &str,
    handle: MPI_Win,
    errhandler: MPI_Errhandler,
    error: MpiError,
) -> c_int {
    let code = crate::error_codes::detailed_code(error.class as c_int, format!("{name}: {error}"));
    dispatch_window_code(name, handle, errhandler, code, &error)
}

fn dispatch_window_code(
    name: &str,
    handle: MPI_Win,
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
                let mut handle_value = handle;
                let mut code_value = code;
                // SAFETY: the application's handler; window and
                // communicator handlers have the same C signature
                // (int handle pointer, int pointer, ...).
                unsafe { function(&mut handle_value, &mut code_value) };
            }
            code
        }
    }
}

/// Run `body` on window `handle`; an error goes to its error handler (an
/// invalid handle's to MPI_COMM_WORLD's).
pub(crate) fn window_entry(
    name: &str,
    handle: MPI_Win,
    body: impl FnOnce(&mut Window) -> MpiResult<()>,
) -> c_int {
    let Some(window) = lookup(handle) else {
        return crate::global::raise_error(name, MPI_COMM_WORLD, invalid_window(handle));
    };
    let (result, errhandler) = {
        let mut open = lock_window(&window);
        let result = body(&mut open);
        (result, open.errhandler)
    };
    match result {
        Ok(()) => MPI_SUCCESS,
        Err(error) => raise_window(name, handle, errhandler, error),
    }
}

/// The progress thread serves passive-target operations while the
/// application computes; the first window starts it where MPI_Init did not.
fn ensure_background_progress() {
    crate::init::ensure_progress_thread();
}

/// The window hints MPI defines (and MPICH's `alloc_shm`); others are
/// ignored, as MPI allows, so MPI_Win_get_info does not report them.
const KNOWN_HINTS: [&str; 8] = [
    "no_locks",
    "accumulate_ordering",
    "accumulate_ops",
    "same_size",
    "same_disp_unit",
    "alloc_shared_noncontig",
    "mpi_accumulate_granularity",
    "alloc_shm",
];

fn known_hints(pairs: Vec<(String, String)>) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .filter(|(key, _)| KNOWN_HINTS.contains(&key.as_str()))
        .collect()
}

/// Checks the size and displacement unit of a new window; returns the
/// unit as the `int` the window keeps (the `_c` forms pass an `MPI_Aint`).
fn check_create_arguments(size: MPI_Aint, disp_unit: MPI_Aint) -> MpiResult<c_int> {
    if size < 0 {
        return Err(MpiError::new(
            ErrorClass::Size,
            format!("window size {size} is negative"),
        ));
    }
    if disp_unit <= 0 {
        return Err(MpiError::new(
            ErrorClass::Disp,
            format!("displacement unit {disp_unit} must be positive"),
        ));
    }
    c_int::try_from(disp_unit).map_err(|_| {
        MpiError::new(
            ErrorClass::Disp,
            format!(
                "displacement unit {disp_unit} is larger than {}",
                c_int::MAX
            ),
        )
    })
}

/// Every rank's (size, displacement unit) over `comm`.
fn exchange_geometry(
    comm: MPI_Comm,
    size: MPI_Aint,
    disp_unit: c_int,
    ranks: usize,
) -> MpiResult<(Vec<MPI_Aint>, Vec<c_int>)> {
    let mine = [size, disp_unit as i64];
    let mut all = vec![0i64; 2 * ranks];
    // SAFETY: two long longs in, 2 * ranks out, at valid addresses.
    checked(
        unsafe {
            crate::coll::gather::PMPI_Allgather(
                mine.as_ptr().cast(),
                2,
                MPI_LONG_LONG,
                all.as_mut_ptr().cast(),
                2,
                MPI_LONG_LONG,
                comm,
            )
        },
        "MPI_Allgather",
    )?;
    Ok((
        all.chunks(2).map(|pair| pair[0] as MPI_Aint).collect(),
        all.chunks(2).map(|pair| pair[1] as c_int).collect(),
    ))
}

/// A segment every rank of `comm` maps: rank 0 creates a memfd of
/// `total_bytes`, the others open it through /proc. Returns the mapping.
fn map_shared_segment(comm: MPI_Comm, rank: c_int, total_bytes: usize) -> MpiResult<*mut c_void> {
    let length = total_bytes.max(1);
    let mut descriptor: c_int = -1;
    let mut failure = None;
    if rank == 0 {
        // SAFETY: a NUL-terminated name; flags as documented.
        descriptor = unsafe { libc::memfd_create(c"resmpi-window".as_ptr(), libc::MFD_CLOEXEC) };
        // SAFETY: a descriptor we own.
        if descriptor < 0 || unsafe { libc::ftruncate(descriptor, length as libc::off_t) } != 0 {
            failure = Some(std::io::Error::last_os_error().to_string());
        }
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as i64;
    let owner = crate::file::broadcast_i64(comm, pid)?;
    let owner_descriptor = crate::file::broadcast_i64(comm, descriptor as i64)?;
    // /proc/PID/fd/N names rank 0's segment only on rank 0's host (and
    // boot): elsewhere it could be another process's file.
    let host = this_host();
    let owner_host = crate::file::broadcast_i64(comm, host)?;
    if rank != 0 && owner_host != host {
        failure = Some("the window's ranks are not all on one host".to_string());
    } else if rank != 0 && owner_descriptor >= 0 {
        let path = std::ffi::CString::new(format!("/proc/{owner}/fd/{owner_descriptor}"))
            .expect("no NUL in a path of numbers");
        // SAFETY: a NUL-terminated path.
        descriptor = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if descriptor < 0 {
            failure = Some(format!(
                "cannot open rank 0's segment ({}): are all ranks on one host?",
                std::io::Error::last_os_error()
            ));
        }
    }
    let mut mapping = std::ptr::null_mut();
    if descriptor >= 0 && failure.is_none() {
        // SAFETY: a fresh shared mapping of a descriptor of `length` bytes.
        mapping = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                descriptor,
                0,
            )
        };
        if mapping == libc::MAP_FAILED {
            failure = Some(std::io::Error::last_os_error().to_string());
            mapping = std::ptr::null_mut();
        }
    }
    let failed = crate::file::allreduce_i64(comm, failure.is_some() as i64, MPI_MAX)?;
    // Everyone has opened the segment (or failed): the descriptor can go.
    if descriptor >= 0 {
        // SAFETY: our own descriptor.
        unsafe { libc::close(descriptor) };
    }
    if failed != 0 {
        if !mapping.is_null() {
            // SAFETY: the mapping made above.
            unsafe { libc::munmap(mapping, length) };
        }
        return Err(MpiError::new(
            ErrorClass::RmaShared,
            format!(
                "MPI_Win_allocate_shared: the window's processes cannot share memory{}",
                failure.map_or(String::new(), |why| format!(" ({why})"))
            ),
        ));
    }
    Ok(mapping)
}

/// This host and boot, as a number: a hash of the kernel's boot id (new at
/// every boot of every host) and the host name.
fn this_host() -> i64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .hash(&mut hasher);
    let mut name = [0u8; 256];
    // SAFETY: a buffer of the size given.
    unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    name.hash(&mut hasher);
    hasher.finish() as i64
}

/// How a new window gets its memory.
enum Memory {
    Given(*mut c_void),
    Allocate,
    Shared,
    Dynamic,
}

/// Create a window over `comm` (collective); returns its handle.
unsafe fn create_window(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    memory: Memory,
) -> MpiResult<(MPI_Win, *mut c_void)> {
    let disp_unit = check_create_arguments(size, disp_unit)?;
    // SAFETY: the caller's info handle.
    let hints = known_hints(unsafe { crate::file::info_pairs(info) }?);
    let mut is_inter = 0;
    // SAFETY: valid out pointer.
    checked(
        unsafe { crate::comm::PMPI_Comm_test_inter(comm, &mut is_inter) },
        "MPI_Comm_test_inter",
    )?;
    if is_inter != 0 {
        return Err(MpiError::new(
            ErrorClass::Comm,
            "windows need an intracommunicator",
        ));
    }
    let mut window_comm = MPI_COMM_NULL;
    // SAFETY: valid out pointer.
    checked(
        unsafe { crate::comm::PMPI_Comm_dup(comm, &mut window_comm) },
        "MPI_Comm_dup",
    )?;
    // SAFETY: a valid communicator.
    unsafe { crate::errhandler::PMPI_Comm_set_errhandler(window_comm, MPI_ERRORS_RETURN) };
    // SAFETY: as documented for each.
    let result = unsafe { create_on(window_comm, size, disp_unit, hints, memory) };
    if result.is_err() {
        // SAFETY: the duplicate made above.
        unsafe { crate::comm::PMPI_Comm_free(&mut window_comm) };
    }
    result
}

unsafe fn create_on(
    comm: MPI_Comm,
    size: MPI_Aint,
    disp_unit: c_int,
    hints: Vec<(String, String)>,
    memory: Memory,
) -> MpiResult<(MPI_Win, *mut c_void)> {
    let (mut rank, mut ranks) = (0, 0);
    // SAFETY: valid out pointers.
    unsafe {
        checked(
            crate::comm::PMPI_Comm_rank(comm, &mut rank),
            "MPI_Comm_rank",
        )?;
        checked(
            crate::comm::PMPI_Comm_size(comm, &mut ranks),
            "MPI_Comm_size",
        )?;
    }
    let (sizes, disp_units) = exchange_geometry(comm, size, disp_unit, ranks as usize)?;
    let comm_index = crate::handles::comm_index(comm).expect("a duplicate's handle");
    let members = crate::global::with_mpi("MPI_Win_create", MPI_COMM_WORLD, |mpi, _| {
        Ok(mpi.comm(comm_index)?.group.to_vec())
    })
    .map_err(|_| MpiError::new(ErrorClass::Intern, "cannot read the window's group"))?;
    let direct_wanted = match memory {
        Memory::Allocate | Memory::Shared => direct_agreed(comm, &members)?,
        Memory::Given(_) | Memory::Dynamic => false,
    };
    let me = members[rank as usize];
    let mut direct = None;
    let (base, flavor, owned, shared_bases) = match memory {
        Memory::Given(base) => (base, MPI_WIN_FLAVOR_CREATE, OwnedMemory::None, Vec::new()),
        Memory::Dynamic => (
            std::ptr::null_mut(),
            MPI_WIN_FLAVOR_DYNAMIC,
            OwnedMemory::None,
            Vec::new(),
        ),
        Memory::Allocate if direct_wanted => {
            // Each rank's memory at an aligned offset, the control blocks
            // after the last.
            let mut offsets = Vec::with_capacity(sizes.len());
            let mut end = 0usize;
            for &size in &sizes {
                offsets.push(end);
                end = (end + size as usize).next_multiple_of(crate::rma_direct::ALIGNMENT_BYTES);
            }
            let total = end + crate::rma_direct::control_area_bytes(sizes.len());
            // A failure is every member's (the segment's own agreement):
            // then all of them take the active messages.
            match map_shared_segment(comm, rank, total) {
                Ok(mapping) => {
                    let bases: Vec<usize> = offsets
                        .iter()
                        .map(|&offset| mapping as usize + offset)
                        .collect();
                    let base = bases[rank as usize] as *mut c_void;
                    // SAFETY: the bases and control blocks lie in the
                    // mapping, unmapped only with the window.
                    direct = Some(unsafe {
                        crate::rma_direct::Direct::new(
                            bases,
                            mapping as usize + end,
                            members.clone(),
                            me,
                        )
                    });
                    (
                        base,
                        MPI_WIN_FLAVOR_ALLOCATE,
                        OwnedMemory::Mapped(mapping, total),
                        Vec::new(),
                    )
                }
                Err(_) => allocate_privately(size)?,
            }
        }
        Memory::Allocate => allocate_privately(size)?,
        Memory::Shared => {
            // Contiguous across ranks, as MPI's default: rank r's memory
            // starts where rank r-1's ends.
            let total: usize = sizes.iter().map(|&size| size as usize).sum();
            // A direct window's control blocks follow the memory.
            let controls = total.next_multiple_of(crate::rma_direct::ALIGNMENT_BYTES);
            let length = if direct_wanted {
                controls + crate::rma_direct::control_area_bytes(sizes.len())
            } else {
                total
            };
            let mapping = map_shared_segment(comm, rank, length)?;
            let mut bases = Vec::with_capacity(sizes.len());
            let mut offset = 0;
            for &size in &sizes {
                // A rank without memory has no base (MPI_Win_shared_query gives NULL).
                bases.push(if size == 0 {
                    0
                } else {
                    mapping as usize + offset
                });
                offset += size as usize;
            }
            if direct_wanted {
                let mut direct_bases = Vec::with_capacity(sizes.len());
                let mut offset = 0;
                for &size in &sizes {
                    direct_bases.push(mapping as usize + offset);
                    offset += size as usize;
                }
                // SAFETY: the bases and control blocks lie in the mapping,
                // unmapped only with the window.
                direct = Some(unsafe {
                    crate::rma_direct::Direct::new(
                        direct_bases,
                        mapping as usize + controls,
                        members.clone(),
                        me,
                    )
                });
            }
            (
                bases[rank as usize] as *mut c_void,
                MPI_WIN_FLAVOR_SHARED,
                OwnedMemory::Mapped(mapping, length.max(1)),
                bases,
            )
        }
    };
    let registered = crate::global::with_mpi("MPI_Win_create", MPI_COMM_WORLD, |mpi, _| {
        let communicator = mpi.comm(comm_index)?;
        let (id, group) = (communicator.context, communicator.group.to_vec());
        // SAFETY: the window memory lives until MPI_Win_free unregisters it.
        unsafe {
            mpi.engine.rma_register(
                id,
                base.cast(),
                size as usize,
                flavor == MPI_WIN_FLAVOR_DYNAMIC,
            )
        };
        Ok((id, group))
    });
    let (id, group) = match registered {
        Ok(registered) => registered,
        Err(_) => {
            free_memory(&owned);
            return Err(MpiError::new(
                ErrorClass::Intern,
                "cannot register the window",
            ));
        }
    };
    ensure_background_progress();
    // Nobody sends to a window before every member knows it.
    crate::file::barrier(comm)?;
    let window = Window {
        id,
        comm,
        group,
        base,
        size,
        disp_unit,
        flavor,
        model: MPI_WIN_UNIFIED,
        sizes,
        disp_units,
        shared_bases,
        errhandler: MPI_ERRORS_ARE_FATAL,
        name: String::new(),
        info: hints,
        attributes: Vec::new(),
        epoch: Epoch::default(),
        memory: owned,
        direct,
    };
    let mut table = windows();
    let index = crate::objects::insert_reusing(&mut table, Arc::new(Mutex::new(window)));
    Ok((handle_of(index), base))
}

/// MPI_Win_allocate's memory from the C allocator (the active messages' window).
fn allocate_privately(size: MPI_Aint) -> MpiResult<(*mut c_void, c_int, OwnedMemory, Vec<usize>)> {
    // SAFETY: plain allocation (at least one byte).
    let base = unsafe { libc::malloc((size as usize).max(1)) };
    if base.is_null() {
        return Err(MpiError::new(
            ErrorClass::NoMem,
            format!("cannot allocate a window of {size} bytes"),
        ));
    }
    Ok((
        base,
        MPI_WIN_FLAVOR_ALLOCATE,
        OwnedMemory::Allocated(base),
        Vec::new(),
    ))
}

/// Whether a window over world ranks `members` takes the direct path:
/// every member must say yes (`RESMPI_RMA_SHM` not 0, and the engine's
/// `rma_direct_possible`), agreed by an allreduce so that the answer is
/// the same everywhere. An invalid `RESMPI_RMA_SHM` on any member fails
/// the creation on every member.
fn direct_agreed(comm: MPI_Comm, members: &[u32]) -> MpiResult<bool> {
    let (local, problem) = match crate::rma_direct::enabled_by_environment() {
        Err(problem) => (-1, Some(problem)),
        Ok(false) => (0, None),
        Ok(true) => {
            let possible = crate::global::with_mpi("MPI_Win_allocate", MPI_COMM_WORLD, |mpi, _| {
                Ok(mpi.engine.rma_direct_possible(members))
            })
            .unwrap_or(false);
            (possible as i64, None)
        }
    };
    let agreed = crate::file::allreduce_i64(comm, local, MPI_MIN)?;
    if agreed < 0 {
        return Err(MpiError::new(
            ErrorClass::Other,
            problem.unwrap_or_else(|| {
                format!(
                    "a member's {} is not 0 or 1",
                    crate::rma_direct::ENVIRONMENT_VARIABLE
                )
            }),
        ));
    }
    Ok(agreed == 1)
}

fn free_memory(memory: &OwnedMemory) {
    match *memory {
        OwnedMemory::None => {}
        // SAFETY: from malloc in create_on.
        OwnedMemory::Allocated(base) => unsafe { libc::free(base) },
        // SAFETY: the mapping made in map_shared_segment.
        OwnedMemory::Mapped(base, length) => unsafe {
            libc::munmap(base, length);
        },
    }
}

/// Report a creation error through `comm`'s handler.
fn created(name: &str, comm: MPI_Comm, win: *mut MPI_Win, result: MpiResult<MPI_Win>) -> c_int {
    match result {
        Ok(handle) => {
            // SAFETY: checked non-null by the caller.
            unsafe { *win = handle };
            MPI_SUCCESS
        }
        Err(error) => crate::global::raise_error(name, comm, error),
    }
}

/// MPI_Win_create and MPI_Win_create_c.
unsafe fn create(
    name: &str,
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    if let Err(error) = crate::global::out_pointer(win, "win") {
        return crate::global::raise_error(name, comm, error);
    }
    // SAFETY: the caller's arguments.
    let result = unsafe { create_window(size, disp_unit, info, comm, Memory::Given(base)) };
    created(name, comm, win, result.map(|(handle, _)| handle))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_create(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        create(
            "MPI_Win_create",
            base,
            size,
            disp_unit.into(),
            info,
            comm,
            win,
        )
    }
}
const _: fn_types::MPI_Win_create = PMPI_Win_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_create_c(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { create("MPI_Win_create_c", base, size, disp_unit, info, comm, win) }
}
const _: fn_types::MPI_Win_create_c = PMPI_Win_create_c;

/// MPI_Win_allocate and MPI_Win_allocate_shared, in both widths.
unsafe fn allocate(
    name: &str,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
    memory: Memory,
) -> c_int {
    if let Err(error) = crate::global::out_pointer(win, "win")
        .and_then(|()| crate::global::out_pointer(baseptr, "baseptr"))
    {
        return crate::global::raise_error(name, comm, error);
    }
    // SAFETY: the caller's arguments.
    let result = unsafe { create_window(size, disp_unit, info, comm, memory) };
    let result = result.map(|(handle, base)| {
        // SAFETY: `baseptr` is the address of the caller's pointer (C's
        // `void *` that is really `void **`), checked non-null.
        unsafe { *baseptr.cast::<*mut c_void>() = base };
        handle
    });
    created(name, comm, win, result)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_allocate(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        allocate(
            "MPI_Win_allocate",
            size,
            disp_unit.into(),
            info,
            comm,
            baseptr,
            win,
            Memory::Allocate,
        )
    }
}
const _: fn_types::MPI_Win_allocate = PMPI_Win_allocate;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_allocate_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        allocate(
            "MPI_Win_allocate_c",
            size,
            disp_unit,
            info,
            comm,
            baseptr,
            win,
            Memory::Allocate,
        )
    }
}
const _: fn_types::MPI_Win_allocate_c = PMPI_Win_allocate_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_allocate_shared(
    size: MPI_Aint,
    disp_unit: c_int,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        allocate(
            "MPI_Win_allocate_shared",
            size,
            disp_unit.into(),
            info,
            comm,
            baseptr,
            win,
            Memory::Shared,
        )
    }
}
const _: fn_types::MPI_Win_allocate_shared = PMPI_Win_allocate_shared;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_allocate_shared_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: MPI_Info,
    comm: MPI_Comm,
    baseptr: *mut c_void,
    win: *mut MPI_Win,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        allocate(
            "MPI_Win_allocate_shared_c",
            size,
            disp_unit,
            info,
            comm,
            baseptr,
            win,
            Memory::Shared,
        )
    }
}
const _: fn_types::MPI_Win_allocate_shared_c = PMPI_Win_allocate_shared_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_create_dynamic(
    info: MPI_Info,
    comm: MPI_Comm,
    win: *mut MPI_Win,
) -> c_int {
    if let Err(error) = crate::global::out_pointer(win, "win") {
        return crate::global::raise_error("MPI_Win_create_dynamic", comm, error);
    }
    // SAFETY: the caller's arguments.
    let result = unsafe { create_window(0, 1, info, comm, Memory::Dynamic) };
    created(
        "MPI_Win_create_dynamic",
        comm,
        win,
        result.map(|(handle, _)| handle),
    )
}
const _: fn_types::MPI_Win_create_dynamic = PMPI_Win_create_dynamic;

/// MPI_Win_shared_query (`D` = int) and MPI_Win_shared_query_c (`D` =
/// MPI_Aint): only the width of the displacement unit written differs.
unsafe fn shared_query<D: From<c_int>>(
    name: &str,
    win: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut D,
    baseptr: *mut c_void,
) -> c_int {
    window_entry(name, win, |window| {
        if window.flavor != MPI_WIN_FLAVOR_SHARED {
            return Err(MpiError::new(
                ErrorClass::RmaFlavor,
                "MPI_Win_shared_query needs a window from MPI_Win_allocate_shared",
            ));
        }
        crate::global::out_pointer(size, "size")?;
        crate::global::out_pointer(disp_unit, "disp_unit")?;
        crate::global::out_pointer(baseptr, "baseptr")?;
        let ranks = window.group.len() as c_int;
        let chosen = if rank == MPI_PROC_NULL {
            // The lowest rank with memory, as MPI says.
            (0..ranks)
                .find(|&r| window.sizes[r as usize] > 0)
                .unwrap_or(0)
        } else if (0..ranks).contains(&rank) {
            rank
        } else {
            return Err(MpiError::new(
                ErrorClass::Rank,
                format!("rank {rank} is not in the window's group of {ranks}"),
            ));
        };
        let index = chosen as usize;
        // SAFETY: checked non-null output pointers; baseptr is really void**.
        unsafe {
            *size = window.sizes[index];
            *disp_unit = D::from(window.disp_units[index]);
            *baseptr.cast::<*mut c_void>() = window.shared_bases[index] as *mut c_void;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_shared_query(
    win: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut c_int,
    baseptr: *mut c_void,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe { shared_query("MPI_Win_shared_query", win, rank, size, disp_unit, baseptr) }
}
const _: fn_types::MPI_Win_shared_query = PMPI_Win_shared_query;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_shared_query_c(
    win: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut MPI_Aint,
    baseptr: *mut c_void,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        shared_query(
            "MPI_Win_shared_query_c",
            win,
            rank,
            size,
            disp_unit,
            baseptr,
        )
    }
}
const _: fn_types::MPI_Win_shared_query_c = PMPI_Win_shared_query_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_attach(win: MPI_Win, base: *mut c_void, size: MPI_Aint) -> c_int {
    window_entry("MPI_Win_attach", win, |window| {
        if window.flavor != MPI_WIN_FLAVOR_DYNAMIC {
            return Err(MpiError::new(
                ErrorClass::RmaFlavor,
                "MPI_Win_attach needs a window from MPI_Win_create_dynamic",
            ));
        }
        if size < 0 || (base.is_null() && size > 0) {
            return Err(MpiError::new(
                ErrorClass::RmaAttach,
                format!("cannot attach {size} bytes at {base:?}"),
            ));
        }
        let id = window.id;
        crate::global::with_mpi("MPI_Win_attach", MPI_COMM_WORLD, |mpi, _| {
            // SAFETY: MPI: attached memory stays valid until detached.
            unsafe { mpi.engine.rma_attach(id, base.cast(), size as usize) }
        })
        .map_err(|_| MpiError::new(ErrorClass::RmaAttach, "cannot attach"))
    })
}
const _: fn_types::MPI_Win_attach = PMPI_Win_attach;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_detach(win: MPI_Win, base: *const c_void) -> c_int {
    window_entry("MPI_Win_detach", win, |window| {
        if window.flavor != MPI_WIN_FLAVOR_DYNAMIC {
            return Err(MpiError::new(
                ErrorClass::RmaFlavor,
                "MPI_Win_detach needs a window from MPI_Win_create_dynamic",
            ));
        }
        let id = window.id;
        let mut found = Ok(());
        let _ = crate::global::with_mpi("MPI_Win_detach", MPI_COMM_WORLD, |mpi, _| {
            found = mpi.engine.rma_detach(id, base.cast());
            Ok(())
        });
        found
    })
}
const _: fn_types::MPI_Win_detach = PMPI_Win_detach;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_free(win: *mut MPI_Win) -> c_int {
    if win.is_null() {
        return crate::global::raise_error(
            "MPI_Win_free",
            MPI_COMM_WORLD,
            MpiError::new(ErrorClass::Arg, "win pointer is NULL"),
        );
    }
    // SAFETY: checked non-null.
    let handle = unsafe { *win };
    let Some(window) = lookup(handle) else {
        return crate::global::raise_error("MPI_Win_free", MPI_COMM_WORLD, invalid_window(handle));
    };
    let mut open = lock_window(&window);
    let epoch = &open.epoch;
    if !epoch.locks.is_empty() || epoch.lock_all || epoch.start.is_some() || epoch.post.is_some() {
        let errhandler = open.errhandler;
        drop(open);
        return raise_window(
            "MPI_Win_free",
            handle,
            errhandler,
            MpiError::new(
                ErrorClass::RmaSync,
                "MPI_Win_free inside an epoch (unlock, complete or wait first)",
            ),
        );
    }
    let id = open.id;
    let flushed = crate::global::with_mpi("MPI_Win_free", MPI_COMM_WORLD, |mpi, _| {
        mpi.engine.rma_flush(id, None)
    });
    // Every member has completed its operations here once all arrive.
    let synchronised = crate::file::barrier(open.comm);
    let attributes = std::mem::take(&mut open.attributes);
    let errhandler = open.errhandler;
    drop(open);
    let mut result = synchronised;
    for (keyval, value) in attributes {
        if let Err(error) = run_delete(handle, keyval, value) {
            result = result.and(Err(error));
        }
    }
    let mut open = lock_window(&window);
    let _ = crate::global::with_mpi("MPI_Win_free", MPI_COMM_WORLD, |mpi, _| {
        mpi.engine.rma_unregister(id);
        Ok(())
    });
    // SAFETY: the window's own duplicate.
    unsafe { crate::comm::PMPI_Comm_free(&mut open.comm) };
    free_memory(&open.memory);
    open.memory = OwnedMemory::None;
    drop(open);
    if let Some(index) = index_of(handle) {
        if let Some(slot) = windows().get_mut(index) {
            *slot = None;
        }
    }
    // SAFETY: checked non-null.
    unsafe { *win = MPI_WIN_NULL };
    match (flushed, result) {
        (Err(code), _) => code,
        (Ok(()), Ok(())) => MPI_SUCCESS,
        (Ok(()), Err(error)) => raise_window("MPI_Win_free", handle, errhandler, error),
    }
}
const _: fn_types::MPI_Win_free = PMPI_Win_free;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_get_group(win: MPI_Win, group: *mut MPI_Group) -> c_int {
    window_entry("MPI_Win_get_group", win, |window| {
        crate::global::out_pointer(group, "group")?;
        let members = window.group.clone();
        let handle = crate::global::with_mpi("MPI_Win_get_group", MPI_COMM_WORLD, |_, registry| {
            Ok(crate::group::new_group(registry, members))
        })
        .map_err(|_| MpiError::new(ErrorClass::Intern, "cannot make the group"))?;
        // SAFETY: checked non-null.
        unsafe { *group = handle };
        Ok(())
    })
}
const _: fn_types::MPI_Win_get_group = PMPI_Win_get_group;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_set_name(win: MPI_Win, win_name: *const c_char) -> c_int {
    window_entry("MPI_Win_set_name", win, |window| {
        if win_name.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "win_name is NULL"));
        }
        // SAFETY: a NUL-terminated string from the application.
        let name = unsafe { CStr::from_ptr(win_name) }.to_string_lossy();
        window.name = name
            .chars()
            .take(MPI_MAX_OBJECT_NAME as usize - 1)
            .collect();
        Ok(())
    })
}
const _: fn_types::MPI_Win_set_name = PMPI_Win_set_name;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_get_name(
    win: MPI_Win,
    win_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    window_entry("MPI_Win_get_name", win, |window| {
        crate::global::out_pointer(win_name, "win_name")?;
        crate::global::out_pointer(resultlen, "resultlen")?;
        let bytes = window.name.as_bytes();
        // SAFETY: MPI_MAX_OBJECT_NAME bytes at win_name (the caller's
        // promise); the name is shorter.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), win_name, bytes.len());
            *win_name.add(bytes.len()) = 0;
            *resultlen = bytes.len() as c_int;
        }
        Ok(())
    })
}
const _: fn_types::MPI_Win_get_name = PMPI_Win_get_name;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_set_info(win: MPI_Win, info: MPI_Info) -> c_int {
    window_entry("MPI_Win_set_info", win, |window| {
        // SAFETY: the caller's info handle.
        let pairs = known_hints(unsafe { crate::file::info_pairs(info) }?);
        for (key, value) in pairs {
            match window.info.iter_mut().find(|(known, _)| *known == key) {
                Some(entry) => entry.1 = value,
                None => window.info.push((key, value)),
            }
        }
        Ok(())
    })
}
const _: fn_types::MPI_Win_set_info = PMPI_Win_set_info;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_get_info(win: MPI_Win, info_used: *mut MPI_Info) -> c_int {
    window_entry("MPI_Win_get_info", win, |window| {
        crate::global::out_pointer(info_used, "info_used")?;
        let mut pairs = window.info.clone();
        if !pairs.iter().any(|(key, _)| key == "no_locks") {
            pairs.push(("no_locks".into(), "false".into()));
        }
        if !pairs.iter().any(|(key, _)| key == "accumulate_ordering") {
            pairs.push(("accumulate_ordering".into(), "rar,raw,war,waw".into()));
        }
        if !pairs.iter().any(|(key, _)| key == "accumulate_ops") {
            pairs.push(("accumulate_ops".into(), "same_op_no_op".into()));
        }
        // SAFETY: strings without NUL.
        let info = unsafe { crate::file::new_info(&pairs) }?;
        // SAFETY: checked non-null.
        unsafe { *info_used = info };
        Ok(())
    })
}
const _: fn_types::MPI_Win_get_info = PMPI_Win_get_info;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_create_errhandler(
    function: MPI_Win_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    crate::global::entry("MPI_Win_create_errhandler", MPI_COMM_WORLD, |_, global| {
        let Some(function) = function else {
            return Err(MpiError::new(ErrorClass::Arg, "function is NULL"));
        };
        crate::global::out_pointer(errhandler, "errhandler")?;
        // MPI_Win and MPI_Comm are both ints: a window handler has the
        // communicator handler's C type, and dispatch_window_code calls it so.
        let stored: unsafe extern "C" fn(*mut MPI_Comm, *mut c_int, ...) = function;
        // SAFETY: checked non-null.
        unsafe { *errhandler = register_errhandler(global, stored) };
        Ok(())
    })
}
const _: fn_types::MPI_Win_create_errhandler = PMPI_Win_create_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_set_errhandler(
    win: MPI_Win,
    errhandler: MPI_Errhandler,
) -> c_int {
    window_entry("MPI_Win_set_errhandler", win, |window| {
        valid_errhandler(errhandler)?;
        window.errhandler = errhandler;
        Ok(())
    })
}
const _: fn_types::MPI_Win_set_errhandler = PMPI_Win_set_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_get_errhandler(
    win: MPI_Win,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    window_entry("MPI_Win_get_errhandler", win, |window| {
        crate::global::out_pointer(errhandler, "errhandler")?;
        // SAFETY: checked non-null.
        unsafe { *errhandler = window.errhandler };
        Ok(())
    })
}
const _: fn_types::MPI_Win_get_errhandler = PMPI_Win_get_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_call_errhandler(win: MPI_Win, errorcode: c_int) -> c_int {
    let Some(window) = lookup(win) else {
        return crate::global::raise_error(
            "MPI_Win_call_errhandler",
            MPI_COMM_WORLD,
            invalid_window(win),
        );
    };
    let errhandler = lock_window(&window).errhandler;
    let error = MpiError::new(
        ErrorClass::from_i32(errorcode).unwrap_or(ErrorClass::Other),
        format!("MPI_Win_call_errhandler with error code {errorcode}"),
    );
    dispatch_window_code(
        "MPI_Win_call_errhandler",
        win,
        errhandler,
        errorcode,
        &error,
    );
    // MPI: returns MPI_SUCCESS if the handler returned.
    MPI_SUCCESS
}
const _: fn_types::MPI_Win_call_errhandler = PMPI_Win_call_errhandler;

// ---- attributes ----

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_create_keyval(
    win_copy_attr_fn: MPI_Win_copy_attr_function,
    win_delete_attr_fn: MPI_Win_delete_attr_function,
    win_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    crate::global::entry("MPI_Win_create_keyval", MPI_COMM_WORLD, |_, registry| {
        crate::global::out_pointer(win_keyval, "win_keyval")?;
        registry.objects.keyvals.push(crate::objects::Keyval {
            // MPI_Win and MPI_Comm are both ints: the same C signatures.
            copy: win_copy_attr_fn,
            delete: win_delete_attr_fn,
            extra_state: extra_state as usize,
            freed: false,
        });
        // SAFETY: checked non-null.
        unsafe { *win_keyval = crate::handles::keyval_handle(registry.objects.keyvals.len() - 1) };
        Ok(())
    })
}
const _: fn_types::MPI_Win_create_keyval = PMPI_Win_create_keyval;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_free_keyval(win_keyval: *mut c_int) -> c_int {
    crate::global::entry("MPI_Win_free_keyval", MPI_COMM_WORLD, |_, registry| {
        crate::global::out_pointer(win_keyval, "win_keyval")?;
        // SAFETY: checked non-null.
        let keyval = unsafe { *win_keyval };
        let index = crate::handles::keyval_index(keyval)
            .filter(|&index| index < registry.objects.keyvals.len())
            .ok_or_else(|| {
                MpiError::new(
                    ErrorClass::Keyval,
                    format!("keyval {keyval:#x} is not valid"),
                )
            })?;
        if registry.objects.keyvals[index].freed {
            return Err(MpiError::new(
                ErrorClass::Keyval,
                format!("keyval {keyval:#x} was already freed"),
            ));
        }
        registry.objects.keyvals[index].freed = true;
        // SAFETY: checked non-null.
        unsafe { *win_keyval = MPI_KEYVAL_INVALID };
        Ok(())
    })
}
const _: fn_types::MPI_Win_free_keyval = PMPI_Win_free_keyval;

fn is_predefined(keyval: c_int) -> bool {
    matches!(
        keyval,
        MPI_WIN_BASE | MPI_WIN_SIZE | MPI_WIN_DISP_UNIT | MPI_WIN_CREATE_FLAVOR | MPI_WIN_MODEL
    )
}

fn user_keyval(keyval: c_int) -> MpiResult<crate::objects::Keyval> {
    crate::global::lock().registry.objects.keyval(keyval)
}

/// Run `keyval`'s delete callback on `value` of window `handle` (no lock held).
fn run_delete(handle: MPI_Win, keyval: c_int, value: usize) -> MpiResult<()> {
    let entry = user_keyval(keyval)?;
    let Some(delete) = entry.delete else {
        return Ok(());
    };
    // SAFETY: the application's callback, registered with its keyval.
    let code = unsafe {
        delete(
            handle,
            keyval,
            value as *mut c_void,
            entry.extra_state as *mut c_void,
        )
    };
    if code == MPI_SUCCESS {
        Ok(())
    } else {
        Err(MpiError::new(
            ErrorClass::from_i32(code).unwrap_or(ErrorClass::Other),
            format!("the delete callback of keyval {keyval:#x} returned {code}"),
        ))
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_set_attr(
    win: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    let mut replaced = None;
    let code = window_entry("MPI_Win_set_attr", win, |window| {
        if is_predefined(win_keyval) {
            return Err(MpiError::new(
                ErrorClass::Keyval,
                "predefined window attributes cannot be set",
            ));
        }
        user_keyval(win_keyval)?;
        match window
            .attributes
            .iter_mut()
            .find(|(keyval, _)| *keyval == win_keyval)
        {
            Some(entry) => replaced = Some(std::mem::replace(&mut entry.1, attribute_val as usize)),
            None => window.attributes.push((win_keyval, attribute_val as usize)),
        }
        Ok(())
    });
    if code != MPI_SUCCESS {
        return code;
    }
    match replaced.map(|old| run_delete(win, win_keyval, old)) {
        Some(Err(error)) => {
            let errhandler =
                lookup(win).map_or(MPI_ERRORS_ARE_FATAL, |w| lock_window(&w).errhandler);
            raise_window("MPI_Win_set_attr", win, errhandler, error)
        }
        _ => MPI_SUCCESS,
    }
}
const _: fn_types::MPI_Win_set_attr = PMPI_Win_set_attr;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_get_attr(
    win: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    window_entry("MPI_Win_get_attr", win, |window| {
        crate::global::out_pointer(attribute_val, "attribute_val")?;
        crate::global::out_pointer(flag, "flag")?;
        let value: Option<usize> = match win_keyval {
            MPI_WIN_BASE => Some(window.base as usize),
            MPI_WIN_SIZE => Some(&window.size as *const MPI_Aint as usize),
            MPI_WIN_DISP_UNIT => Some(&window.disp_unit as *const c_int as usize),
            MPI_WIN_CREATE_FLAVOR => Some(&window.flavor as *const c_int as usize),
            MPI_WIN_MODEL => Some(&window.model as *const c_int as usize),
            keyval => {
                user_keyval(keyval)?;
                window
                    .attributes
                    .iter()
                    .find(|(known, _)| *known == keyval)
                    .map(|&(_, value)| value)
            }
        };
        // SAFETY: checked non-null; attribute_val is really void**.
        unsafe {
            *flag = value.is_some() as c_int;
            if let Some(value) = value {
                *attribute_val.cast::<*mut c_void>() = value as *mut c_void;
            }
        }
        Ok(())
    })
}
const _: fn_types::MPI_Win_get_attr = PMPI_Win_get_attr;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Win_delete_attr(win: MPI_Win, win_keyval: c_int) -> c_int {
    let mut removed = None;
    let code = window_entry("MPI_Win_delete_attr", win, |window| {
        if is_predefined(win_keyval) {
            return Err(MpiError::new(
                ErrorClass::Keyval,
                "predefined window attributes cannot be deleted",
            ));
        }
        user_keyval(win_keyval)?;
        let position = window
            .attributes
            .iter()
            .position(|(keyval, _)| *keyval == win_keyval)
            .ok_or_else(|| {
                MpiError::new(
                    ErrorClass::Keyval,
                    format!("no attribute with keyval {win_keyval:#x} on this window"),
                )
            })?;
        removed = Some(window.attributes.remove(position).1);
        Ok(())
    });
    if code != MPI_SUCCESS {
        return code;
    }
    match removed.map(|value| run_delete(win, win_keyval, value)) {
        Some(Err(error)) => {
            let errhandler =
                lookup(win).map_or(MPI_ERRORS_ARE_FATAL, |w| lock_window(&w).errhandler);
            raise_window("MPI_Win_delete_attr", win, errhandler, error)
        }
        _ => MPI_SUCCESS,
    }
}
const _: fn_types::MPI_Win_delete_attr = PMPI_Win_delete_attr;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_handles_round_trip_and_reject_other_classes() {
        assert_eq!(index_of(handle_of(0)), Some(0));
        assert_eq!(index_of(handle_of(77)), Some(77));
        assert_eq!(index_of(MPI_WIN_NULL), None);
        assert_eq!(index_of(MPI_COMM_WORLD), None);
        assert_eq!(handle_of(0) as u32 >> 26 & 0xf, 8, "MPICH's window class");
    }
}
