//! Start-up, shut-down and environment queries.

use std::ffi::CStr;
use std::sync::atomic::Ordering;

use resmpi_core::{ErrorClass, Mpi, MpiError};

use crate::abi::*;
use crate::global::{abort_job, entry, lock, raise_error, with_mpi};
use crate::handles::comm_index;

/// Version string of this library.
pub const LIBRARY_VERSION: &str = concat!(
    "resmpi ",
    env!("CARGO_PKG_VERSION"),
    " (MPICH ABI, MPI 4.0)"
);

/// The thread that initialized MPI (MPI_Is_thread_main).
static MAIN_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

fn initialize(required: c_int, provided: *mut c_int) -> c_int {
    let _ = MAIN_THREAD.set(std::thread::current().id());
    let mut global = lock();
    if global.initialized || (global.mpi.is_none() && RUNTIME_ENDED.load(Ordering::SeqCst)) {
        drop(global);
        // Through MPI_COMM_WORLD's handler: fatal by default (as MPICH),
        // so a program that did not ask for errors to return stops here;
        // after MPI_Finalize there is no handler left but the fatal one.
        return raise_error(
            "MPI_Init",
            MPI_COMM_WORLD,
            MpiError::new(
                ErrorClass::Other,
                "MPI_Init or MPI_Init_thread called twice (or after MPI_Finalize)",
            ),
        );
    }
    if global.mpi.is_none() {
        // Not up yet (no session started it).
        bring_up(&mut global, required);
    }
    global.initialized = true;
    crate::global::INITIALIZED.store(true, Ordering::SeqCst);
    if !provided.is_null() {
        // SAFETY: the caller's output pointer.
        unsafe { *provided = global.thread_level };
    }
    MPI_SUCCESS
}

/// The runtime (the engine wired up to the other processes) ran and was
/// shut down: it is not started again in this process (MPI-4 allows a
/// process to initialize MPI again through sessions; resmpi's wire-up
/// happens once per process).
pub(crate) static RUNTIME_ENDED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Start the runtime: what MPI_Init and the first MPI_Session_init share
/// (the world model and sessions run over one engine). A failure to start
/// ends the process with the reason, as MPI_Init always has.
pub(crate) fn bring_up(global: &mut crate::global::Global, required: c_int) {
    let initial = match initial_errhandler() {
        Ok((handler, _)) => handler,
        Err(message) => {
            eprintln!("resmpi: {message}");
            std::process::exit(1);
        }
    };
    match Mpi::init(initial) {
        Ok(mut mpi) => {
            // Message logging: a replacement resumes from its checkpoint's
            // position if it has one (before anything is read).
            crate::veloc::resume_at_init(&mut mpi);
            // RESMPI_PROGRESS_THREAD=off exists for tests that show what the thread is for.
            let background_progress = mpi.engine.links.any() && mpi.config.progress_thread;
            if mpi.config.line_buffered {
                line_buffer_standard_output();
            }
            present_replica_to_program(&mpi);
            global.mpi = Some(mpi);
            let replicated = global
                .mpi
                .as_ref()
                .is_some_and(|mpi| mpi.replicas.count > 1);
            global.thread_level = granted_thread_level(required, replicated);
            if global.thread_level == MPI_THREAD_MULTIPLE {
                // The mutex stays on for the whole job, and a thread blocked
                // in MPI lets the others in between progress rounds.
                crate::global::serialize_multiple_threads();
                if let Some(mpi) = global.mpi.as_mut() {
                    mpi.threads_multiple = true;
                }
            }
            if background_progress {
                start_progress_thread();
            } else if global.thread_level < MPI_THREAD_MULTIPLE {
                crate::global::stop_serializing_with_mutex();
            }
            THREAD_LEVEL.store(global.thread_level, Ordering::Relaxed);
        }
        Err(error) => {
            eprintln!("resmpi: {error}");
            std::process::exit(1);
        }
    }
}

/// The thread level granted for `required`: what was asked for, up to
/// MPI_THREAD_MULTIPLE. A `replicated` job (`mpiexec --replicas`) and the
/// builds with a fault-tolerance protocol (replication, message logging)
/// grant at most MPI_THREAD_SERIALIZED: replicas and logs mirror or replay
/// one sequence of calls per process, which threads calling at once do not
/// make (two replicas would match a wildcard receive differently).
fn granted_thread_level(required: c_int, replicated: bool) -> c_int {
    let most = if resmpi_core::PROTOCOL_ALLOWS_THREADS && !replicated {
        MPI_THREAD_MULTIPLE
    } else {
        MPI_THREAD_SERIALIZED
    };
    required.clamp(MPI_THREAD_SINGLE, most)
}

/// The thread level the runtime granted (MPI_THREAD_SINGLE before it started).
pub fn granted_level() -> c_int {
    THREAD_LEVEL.load(Ordering::Relaxed)
}

/// Whether MPI_THREAD_MULTIPLE was granted (other threads may call MPI while
/// one waits).
pub fn thread_multiple() -> bool {
    THREAD_LEVEL.load(std::sync::atomic::Ordering::Relaxed) == MPI_THREAD_MULTIPLE
}

/// The variable `mpiexec --initial-errhandler` sets.
pub const INITIAL_ERRHANDLER_VARIABLE: &str = "RESMPI_INITIAL_ERRHANDLER";

/// The error handler MPI_COMM_WORLD and MPI_COMM_SELF start with, and its
/// MPI-4 name (MPI_INFO_ENV's `mpi_initial_errhandler`): from
/// `RESMPI_INITIAL_ERRHANDLER`, `mpi_errors_are_fatal` when it is unset.
pub fn initial_errhandler() -> Result<(MPI_Errhandler, &'static str), String> {
    let Ok(value) = std::env::var(INITIAL_ERRHANDLER_VARIABLE) else {
        return Ok((MPI_ERRORS_ARE_FATAL, "mpi_errors_are_fatal"));
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "mpi_errors_are_fatal" => Ok((MPI_ERRORS_ARE_FATAL, "mpi_errors_are_fatal")),
        "mpi_errors_abort" => Ok((MPI_ERRORS_ABORT, "mpi_errors_abort")),
        "mpi_errors_return" => Ok((MPI_ERRORS_RETURN, "mpi_errors_return")),
        _ => Err(format!(
            "{INITIAL_ERRHANDLER_VARIABLE}={value:?}: expected mpi_errors_are_fatal, \
             mpi_errors_abort or mpi_errors_return"
        )),
    }
}

/// Make the C library's `stdout` line-buffered when it is not a terminal
/// (a pipe to mpiexec, a file): a rank killed right after a `printf` has
/// lost no line it printed (ulfm-testing's api/revshrinkkill counts them),
/// and the lines of ranks reach mpiexec whole. A terminal is
/// line-buffered already. `RESMPI_LINE_BUFFERED=off` leaves it alone.
fn line_buffer_standard_output() {
    extern "C" {
        /// glibc's `stdout` stream.
        static mut stdout: *mut libc::FILE;
    }
    // SAFETY: isatty on a descriptor number is always safe to call;
    // setvbuf on the C library's own stdout, which exists for the whole
    // process. glibc flushes what was buffered before changing the mode.
    unsafe {
        if libc::isatty(libc::STDOUT_FILENO) == 0 {
            let stream = std::ptr::addr_of!(stdout).read();
            if !stream.is_null() {
                libc::fflush(stream);
                libc::setvbuf(
                    stream,
                    std::ptr::null_mut(),
                    libc::_IOLBF,
                    libc::BUFSIZ as usize,
                );
            }
        }
    }
}

/// What a process of a replicated job (`RESMPI_REPLICAS` > 1) shows the
/// program, whichever process manager started it: `RESMPI_REPLICA` holds
/// its replica index from `MPI_Init` on (resmpi's `mpiexec` sets it before
/// the program starts; hydra and Slurm cannot, since only the library maps
/// a PMI rank to (rank, replica)), so a program can tell its copies apart.
///
/// Under another process manager nobody shows each rank's output once, as
/// resmpi's `mpiexec` does: every replica but replica 0 sends its standard
/// output and error to /dev/null from here on, so the job prints what an
/// unreplicated run prints (`RESMPI_REPLICA_OUTPUT=all` keeps them all).
/// Switching a rank's output to a survivor when replica 0 dies needs
/// resmpi's `mpiexec`, which sees where each replica's output stands.
fn present_replica_to_program(mpi: &Mpi) {
    if mpi.replicas.count <= 1 {
        return;
    }
    let replica = mpi.replicas.replica_of(mpi.rank()).to_string();
    if std::env::var(REPLICA_VARIABLE).ok().as_deref() != Some(replica.as_str()) {
        // Before the program's own threads can read the environment: it
        // is still inside MPI_Init, and the library's threads never read it.
        std::env::set_var(REPLICA_VARIABLE, &replica);
    }
    // resmpi's mpiexec always sets RESMPI_FAILURE_POLICY; it dedups itself.
    let under_resmpi_mpiexec = mpi.config.failure_policy.is_some();
    if under_resmpi_mpiexec || replica == "0" || mpi.config.replica_output_all {
        return;
    }
    extern "C" {
        /// glibc's `stdout` stream.
        static mut stdout: *mut libc::FILE;
    }
    // SAFETY: flushing the C library's own stdout (what the program
    // printed before MPI_Init goes where it was meant to), then pointing
    // descriptors 1 and 2 at /dev/null, which dup2 does atomically.
    unsafe {
        let stream = std::ptr::addr_of!(stdout).read();
        if !stream.is_null() {
            libc::fflush(stream);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, libc::STDOUT_FILENO);
            libc::dup2(null, libc::STDERR_FILENO);
            libc::close(null);
        }
    }
}

/// The variable holding a process's replica index under replication.
pub const REPLICA_VARIABLE: &str = "RESMPI_REPLICA";

/// Whether the background progress thread runs.
static PROGRESS_THREAD_RUNNING: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Start the background progress thread if it does not run yet and
/// `RESMPI_PROGRESS_THREAD` allows it: a window's passive-target operations
/// are executed by whoever progresses the target's engine, so a target
/// that computes outside MPI still serves them (shared-memory-only jobs do
/// not start the thread at MPI_Init). Called with the library state not
/// held, from the thread that makes MPI calls: from here on every entry
/// takes the mutex.
pub(crate) fn ensure_progress_thread() {
    if PROGRESS_THREAD_RUNNING.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let allowed = crate::global::lock()
        .mpi
        .as_ref()
        .is_some_and(|mpi| mpi.config.progress_thread);
    if allowed {
        crate::global::start_serializing_with_mutex();
        start_progress_thread();
    }
}

/// How often the background thread looks for work when the application is
/// outside MPI.
const BACKGROUND_PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1);

/// Keep reliability links alive while the application computes: acks,
/// retransmissions and heartbeats must not wait for the next MPI call, or a
/// busy rank would look dead to its peers (the NewMadeleine paper's point).
/// The thread only takes the library lock when the application does not
/// hold it, so it never competes with an MPI call in progress.
fn start_progress_thread() {
    PROGRESS_THREAD_RUNNING.store(true, std::sync::atomic::Ordering::SeqCst);
    let spawned = std::thread::Builder::new()
        .name("resmpi-progress".into())
        .spawn(|| loop {
            std::thread::sleep(BACKGROUND_PROGRESS_INTERVAL);
            let Ok(mut global) = crate::global::try_lock() else {
                continue;
            };
            match global.mpi.as_mut() {
                // Errors resurface in the application's next MPI call.
                Some(mpi) => drop(mpi.engine.progress()),
                None => return,
            }
        });
    if let Err(error) = spawned {
        eprintln!("resmpi: no background progress thread ({error}); peers may time out while this rank computes");
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    initialize(MPI_THREAD_SINGLE, std::ptr::null_mut())
}
const _: fn_types::MPI_Init = PMPI_Init;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    initialize(required, provided)
}
const _: fn_types::MPI_Init_thread = PMPI_Init_thread;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Initialized(flag: *mut c_int) -> c_int {
    if !flag.is_null() {
        // SAFETY: the caller's output pointer.
        unsafe {
            *flag = crate::global::INITIALIZED.load(std::sync::atomic::Ordering::SeqCst) as c_int
        };
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Initialized = PMPI_Initialized;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Finalized(flag: *mut c_int) -> c_int {
    if !flag.is_null() {
        // SAFETY: the caller's output pointer.
        unsafe {
            *flag = crate::global::FINALIZED.load(std::sync::atomic::Ordering::SeqCst) as c_int
        };
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Finalized = PMPI_Finalized;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Finalize() -> c_int {
    // MPI: MPI_COMM_SELF's attributes are deleted first, while MPI still works.
    if let Err(error) = crate::attr::delete_all_attributes(resmpi_core::SELF) {
        return raise_error("MPI_Finalize", MPI_COMM_SELF, error);
    }
    // Sessions still open keep the runtime up: it ends with the last one
    // (MPI_Session_finalize).
    let sessions_open = crate::session::open_count() > 0;
    let result = if sessions_open {
        with_mpi("MPI_Finalize", MPI_COMM_WORLD, |_, _| Ok(()))
            .map_or_else(|code| code, |()| MPI_SUCCESS)
    } else {
        entry("MPI_Finalize", MPI_COMM_WORLD, |mpi, _| mpi.finalize())
    };
    if result == MPI_SUCCESS {
        let mut global = lock();
        if !sessions_open {
            global.mpi = None;
            RUNTIME_ENDED.store(true, Ordering::SeqCst);
        }
        global.finalized = true;
        crate::global::FINALIZED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    result
}
const _: fn_types::MPI_Finalize = PMPI_Finalize;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Abort(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let rank = lock().mpi.as_ref().map_or(0, |mpi| mpi.rank());
    let _ = comm_index(comm);
    eprintln!("resmpi: rank {rank} called MPI_Abort with error code {errorcode}");
    let after = crate::error_codes::last_error_text()
        .map(|text| format!(" after the MPI error \"{text}\""))
        .unwrap_or_default();
    abort_job(
        errorcode,
        &format!("rank {rank} called MPI_Abort({errorcode}){after}"),
    );
}
const _: fn_types::MPI_Abort = PMPI_Abort;

/// The thread level MPI_Init granted, readable from any thread without
/// the library state (MPI_Query_thread may be called by any thread at any
/// time, and the state has no lock in a job on one host).
static THREAD_LEVEL: std::sync::atomic::AtomicI32 =
    std::sync::atomic::AtomicI32::new(MPI_THREAD_SINGLE);

#[no_mangle]
pub unsafe extern "C" fn PMPI_Query_thread(provided: *mut c_int) -> c_int {
    if !provided.is_null() {
        // SAFETY: the caller's output pointer.
        unsafe { *provided = THREAD_LEVEL.load(std::sync::atomic::Ordering::Relaxed) };
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Query_thread = PMPI_Query_thread;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Is_thread_main(flag: *mut c_int) -> c_int {
    if !flag.is_null() {
        let main = MAIN_THREAD.get() == Some(&std::thread::current().id());
        // SAFETY: the caller's output pointer.
        unsafe { *flag = main as c_int };
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Is_thread_main = PMPI_Is_thread_main;

/// Copy `text` into a C buffer of `capacity` bytes, NUL-terminated; returns the length written.
unsafe fn copy_string(text: &str, buffer: *mut c_char, capacity: usize) -> usize {
    if buffer.is_null() || capacity == 0 {
        return 0;
    }
    let length = text.len().min(capacity - 1);
    // SAFETY: the caller's buffer holds `capacity` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast(), buffer, length);
        *buffer.add(length) = 0;
    }
    length
}

/// Write a string result the MPI way (buffer + resultlen).
pub unsafe fn write_string(text: &str, buffer: *mut c_char, capacity: usize, length: *mut c_int) {
    // SAFETY: forwarded caller pointers.
    let written = unsafe { copy_string(text, buffer, capacity) };
    if !length.is_null() {
        // SAFETY: the caller's output pointer.
        unsafe { *length = written as c_int };
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_processor_name(
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    match with_mpi("MPI_Get_processor_name", MPI_COMM_WORLD, |mpi, _| {
        Ok(mpi.processor_name.clone())
    }) {
        Ok(text) => {
            // SAFETY: the caller's buffer holds MPI_MAX_PROCESSOR_NAME bytes.
            unsafe { write_string(&text, name, MPI_MAX_PROCESSOR_NAME as usize, resultlen) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Get_processor_name = PMPI_Get_processor_name;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    // SAFETY: the caller's output pointers.
    unsafe {
        if !version.is_null() {
            *version = MPI_VERSION;
        }
        if !subversion.is_null() {
            *subversion = MPI_SUBVERSION;
        }
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Get_version = PMPI_Get_version;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_library_version(
    version: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    // SAFETY: the caller's buffer holds MPI_MAX_LIBRARY_VERSION_STRING bytes.
    unsafe {
        write_string(
            LIBRARY_VERSION,
            version,
            MPI_MAX_LIBRARY_VERSION_STRING as usize,
            resultlen,
        )
    };
    MPI_SUCCESS
}
const _: fn_types::MPI_Get_library_version = PMPI_Get_library_version;

#[no_mangle]
pub extern "C" fn PMPI_Wtime() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9
}
const _: fn_types::MPI_Wtime = PMPI_Wtime;

#[no_mangle]
pub extern "C" fn PMPI_Wtick() -> f64 {
    let mut resolution = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_getres writes into the timespec we own.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut resolution) };
    (resolution.tv_sec as f64 + resolution.tv_nsec as f64 * 1e-9).max(1e-9)
}
const _: fn_types::MPI_Wtick = PMPI_Wtick;

/// The description of a predefined error class: the core's own classes,
/// then every other class MPICH 4.0.2 defines (I/O, RMA, spawn, info,
/// MPI_T, sessions...). The library never raises the latter yet, but
/// MPI_Error_class and MPI_Error_string must accept them (mpi4py's
/// test_errorcode walks every MPI_ERR_* constant).
pub fn class_description(code: c_int) -> Option<&'static str> {
    if let Some(class) = ErrorClass::from_i32(code) {
        return Some(class.description());
    }
    Some(match code {
        MPI_ERR_ACCESS => "Permission denied",
        MPI_ERR_AMODE => "Invalid amode value in MPI_File_open",
        MPI_ERR_BAD_FILE => "Invalid file name",
        MPI_ERR_CONVERSION => "An error occurred in a user-supplied data conversion function",
        MPI_ERR_DUP_DATAREP => "Conversion functions could not be registered because a data representation identifier that was already defined was passed to MPI_REGISTER_DATAREP",
        MPI_ERR_FILE_EXISTS => "File exists",
        MPI_ERR_FILE_IN_USE => "File operation could not be completed, as the file is currently open by some process",
        MPI_ERR_FILE => "Invalid MPI_File",
        MPI_ERR_INFO => "Invalid MPI_Info",
        MPI_ERR_INFO_KEY => "Invalid key for MPI_Info",
        MPI_ERR_INFO_VALUE => "Invalid MPI_Info value",
        MPI_ERR_INFO_NOKEY => "MPI_Info key is not defined",
        MPI_ERR_IO => "Other I/O error",
        MPI_ERR_NAME => "Invalid service name (see MPI_Publish_name)",
        MPI_ERR_NOT_SAME => "Collective argument not identical on all processes or collective routines called in a different order",
        MPI_ERR_NO_SPACE => "Not enough space for file",
        MPI_ERR_NO_SUCH_FILE => "File does not exist",
        MPI_ERR_PORT => "Invalid port",
        MPI_ERR_QUOTA => "Quota exceeded for files",
        MPI_ERR_READ_ONLY => "Read-only file or filesystem name",
        MPI_ERR_SERVICE => "Attempt to lookup an unknown service name",
        MPI_ERR_SPAWN => "Error in spawn call",
        MPI_ERR_UNSUPPORTED_DATAREP => "Unsupported datarep passed to MPI_File_set_view",
        MPI_ERR_WIN => "Invalid MPI_Win",
        MPI_ERR_BASE => "Invalid base address",
        MPI_ERR_LOCKTYPE => "Invalid lock type",
        MPI_ERR_RMA_CONFLICT => "Conflicting accesses to window",
        MPI_ERR_RMA_SYNC => "Wrong synchronization of RMA calls",
        MPI_ERR_SIZE => "Invalid size argument",
        MPI_ERR_DISP => "Invalid displacement argument",
        MPI_ERR_ASSERT => "Invalid assert argument",
        MPI_ERR_RMA_RANGE => "Target memory is not part of the window (in the case of a window created with MPI_Win_create_dynamic, target memory is not attached)",
        MPI_ERR_RMA_ATTACH => "Memory cannot be attached (e.g., because of resource exhaustion)",
        MPI_ERR_RMA_SHARED => "Memory cannot be shared (e.g., some process in the group of the specified communicator cannot expose shared memory)",
        MPI_ERR_RMA_FLAVOR => "Passed window has the wrong flavor for the called function",
        MPI_T_ERR_MEMORY => "Out of memory (MPI_T)",
        MPI_T_ERR_NOT_INITIALIZED => "Interface not initialized (MPI_T)",
        MPI_T_ERR_CANNOT_INIT => "Interface not in the state to be initialized (MPI_T)",
        MPI_T_ERR_INVALID_INDEX => "The index is invalid or has been deleted (MPI_T)",
        MPI_T_ERR_INVALID_ITEM => "Item index queried is out of range (MPI_T)",
        MPI_T_ERR_INVALID_HANDLE => "The handle is invalid (MPI_T)",
        MPI_T_ERR_OUT_OF_HANDLES => "No more handles available (MPI_T)",
        MPI_T_ERR_OUT_OF_SESSIONS => "No more sessions available (MPI_T)",
        MPI_T_ERR_INVALID_SESSION => "Session argument is not a valid session (MPI_T)",
        MPI_T_ERR_CVAR_SET_NOT_NOW => "Variable cannot be set at this moment (MPI_T)",
        MPI_T_ERR_CVAR_SET_NEVER => "Variable cannot be set until end of execution (MPI_T)",
        MPI_T_ERR_PVAR_NO_STARTSTOP => "Variable cannot be started or stopped (MPI_T)",
        MPI_T_ERR_PVAR_NO_WRITE => "Variable cannot be written or reset (MPI_T)",
        MPI_T_ERR_PVAR_NO_ATOMIC => "Variable cannot be read and written atomically (MPI_T)",
        MPI_T_ERR_INVALID_NAME => "Name doesn't match (MPI_T)",
        MPI_T_ERR_INVALID => "Generic error code for MPI_T",
        MPI_ERR_SESSION => "Invalid session handle",
        MPI_ERR_PROC_ABORTED => "Operation failed because a peer process has aborted",
        MPI_ERR_VALUE_TOO_LARGE => "Value is too large to store",
        MPI_T_ERR_NOT_SUPPORTED => "Requested functionality not supported (MPI_T)",
        _ => return None,
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Error_string(
    errorcode: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    let latest = crate::error_codes::latest_text_of_bare_class(errorcode);
    let description = match latest.or_else(|| class_description(errorcode).map(str::to_string)) {
        Some(description) => description,
        None => match crate::error_codes::describe(errorcode)
            .or_else(|| crate::error_codes::detail_of(errorcode))
        {
            Some((class, text)) if text.is_empty() => {
                class_description(class).unwrap_or_default().to_string()
            }
            Some((_, text)) => text,
            None => {
                return raise_error(
                    "MPI_Error_string",
                    MPI_COMM_WORLD,
                    MpiError::new(ErrorClass::Arg, format!("{errorcode} is not an error code")),
                )
            }
        },
    };
    // SAFETY: the caller's buffer holds MPI_MAX_ERROR_STRING bytes.
    unsafe {
        write_string(
            &description,
            string,
            MPI_MAX_ERROR_STRING as usize,
            resultlen,
        )
    };
    MPI_SUCCESS
}
const _: fn_types::MPI_Error_string = PMPI_Error_string;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    let class = if class_description(errorcode).is_some() {
        errorcode
    } else if let Some((class, _)) =
        crate::error_codes::describe(errorcode).or_else(|| crate::error_codes::detail_of(errorcode))
    {
        class
    } else {
        return raise_error(
            "MPI_Error_class",
            MPI_COMM_WORLD,
            MpiError::new(ErrorClass::Arg, format!("{errorcode} is not an error code")),
        );
    };
    if !errorclass.is_null() {
        // SAFETY: the caller's output pointer.
        unsafe { *errorclass = class };
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Error_class = PMPI_Error_class;

/// Name printed by a NUL-terminated C string, for messages.
pub unsafe fn c_text(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: the caller's NUL-terminated string.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

// ----- MPICH's GPU queries: resmpi moves host memory only -------------------
//
// Programs (and mpi4py) ask these before handing the library a device
// buffer. They are answered, not stubbed: a stub's error code would read
// as "supported" to a caller that tests the value.

#[no_mangle]
pub extern "C" fn PMPIX_Query_cuda_support() -> c_int {
    0
}
const _: fn_types::MPIX_Query_cuda_support = PMPIX_Query_cuda_support;

#[no_mangle]
pub extern "C" fn PMPIX_Query_hip_support() -> c_int {
    0
}
const _: fn_types::MPIX_Query_hip_support = PMPIX_Query_hip_support;

#[no_mangle]
pub extern "C" fn PMPIX_Query_ze_support() -> c_int {
    0
}
const _: fn_types::MPIX_Query_ze_support = PMPIX_Query_ze_support;

/// MPIX_GPU_query_support: no GPU kind is supported; an unknown kind is
/// MPI_ERR_ARG.
#[no_mangle]
pub unsafe extern "C" fn PMPIX_GPU_query_support(
    gpu_type: c_int,
    is_supported: *mut c_int,
) -> c_int {
    crate::global::local_entry("MPIX_GPU_query_support", || {
        crate::global::out_pointer(is_supported, "is_supported")?;
        if !matches!(
            gpu_type,
            MPIX_GPU_SUPPORT_CUDA | MPIX_GPU_SUPPORT_ZE | MPIX_GPU_SUPPORT_HIP
        ) {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("{gpu_type} is not a GPU kind (MPIX_GPU_SUPPORT_CUDA, _ZE or _HIP)"),
            ));
        }
        // SAFETY: checked non-null; the caller's variable.
        unsafe { *is_supported = 0 };
        Ok(())
    })
}
const _: fn_types::MPIX_GPU_query_support = PMPIX_GPU_query_support;
