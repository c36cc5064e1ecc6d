//! The process-wide library state, and the path every entry point takes:
//! run with the state held, then dispatch an error to the communicator's
//! error handler with it released, so a user handler may call MPI.
//!
//! Who may hold the state: below MPI_THREAD_MULTIPLE the application never
//! makes two calls at once; a mutex is needed only while some other thread
//! may enter too. That is before MPI_Init decides (nothing is promised
//! yet), in a job whose background progress thread runs (network rails),
//! and in a job granted MPI_THREAD_MULTIPLE. Otherwise an entry takes no
//! lock at all: two locked instructions per call were a sixth of an 8 B
//! shared-memory hop. Either way a thread that re-enters the library from
//! a callback the library runs is stopped (`LOCK_OWNER`).
//!
//! Under MPI_THREAD_MULTIPLE one lock still serializes the calls, but a
//! thread blocked in MPI does not keep it: every blocking loop of the
//! engine calls [`let_others_in`] between two progress rounds, which
//! releases the mutex, pauses, and takes it again, so another thread's
//! call (the send a blocked receive waits for, MPI_Grequest_complete)
//! gets in.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use crate::abi::*;
use crate::handles::{comm_handle, comm_index};

/// What a user error handler is.
pub type UserErrhandler = MPI_Comm_errhandler_function;

/// Everything the C layer keeps.
pub struct Global {
    /// The MPI library instance, between Init and Finalize.
    pub mpi: Option<Mpi>,
    /// Whether MPI_Init completed once.
    pub initialized: bool,
    /// Whether MPI_Finalize completed.
    pub finalized: bool,
    /// Thread level granted.
    pub thread_level: c_int,
    /// Objects the C layer owns.
    pub registry: Registry,
}

/// User-created objects that live in the C layer.
pub struct Registry {
    /// User error handlers, by index.
    pub errhandlers: Vec<Option<UserErrhandler>>,
    /// User ops, by index.
    pub ops: Vec<Option<resmpi_core::op::Op>>,
    /// Groups, attributes, keyvals, info objects and type names.
    pub objects: crate::objects::Objects,
}

// SAFETY: raw user pointers inside requests are only touched with the lock held,
// by whichever thread holds it (MPI_THREAD_SERIALIZED semantics).
unsafe impl Send for Global {}

/// `Global::initialized` and `finalized`, readable without the lock:
/// MPI_Initialized and MPI_Finalized may be called from anywhere, including
/// user callbacks the library runs (mpi4py's do).
pub static INITIALIZED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// See [`INITIALIZED`].
pub static FINALIZED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The state and the mutex that guards it while [`SERIALIZE_WITH_MUTEX`].
struct LibraryState {
    mutex: Mutex<()>,
    /// The mutex's guard while a [`Guard`] holds the mutex: kept here
    /// rather than in the `Guard`, so that [`let_others_in`] can release
    /// and retake the mutex under a `Guard` further up the stack. Touched
    /// only by the thread that holds the mutex.
    held: UnsafeCell<Option<MutexGuard<'static, ()>>>,
    global: UnsafeCell<Global>,
}

// SAFETY: `global` is reached only through a `Guard`: one at a time, by the
// mutex while `SERIALIZE_WITH_MUTEX`, and otherwise by the MPI thread level
// the application asked for (no two calls at once), with re-entry from the
// holding thread stopped in `lock`.
unsafe impl Sync for LibraryState {}

/// Whether entries take the mutex (see the module comment).
static SERIALIZE_WITH_MUTEX: AtomicBool = AtomicBool::new(true);

static GLOBAL: LibraryState = LibraryState {
    mutex: Mutex::new(()),
    held: UnsafeCell::new(None),
    global: UnsafeCell::new(Global {
        mpi: None,
        initialized: false,
        finalized: false,
        thread_level: MPI_THREAD_SINGLE,
        registry: Registry {
            errhandlers: Vec::new(),
            ops: Vec::new(),
            objects: crate::objects::Objects::new(),
        },
    }),
};

/// From now on entries take no mutex: called by MPI_Init (holding the
/// state) when no thread of the library's own will enter.
pub fn stop_serializing_with_mutex() {
    SERIALIZE_WITH_MUTEX.store(false, Ordering::Relaxed);
}

/// From now on entries take the mutex again: a thread of the library's
/// own (the progress thread a window starts) is about to enter. Called
/// without the state held.
pub fn start_serializing_with_mutex() {
    SERIALIZE_WITH_MUTEX.store(true, Ordering::SeqCst);
}

/// The thread that holds the library lock (its `pthread_self`), 0 when
/// nobody does. An MPI call made by the holder comes from a user function
/// the library called (a reduction op), and taking the lock again would
/// deadlock. An atomic rather than a thread-local flag: in a shared library
/// a thread-local costs a `__tls_get_addr` call on every access, and every
/// MPI call made three of them. Only the holder writes its own id (after
/// locking) and clears it (before unlocking), so a thread reads its own id
/// exactly while it holds the lock; Relaxed suffices for that.
static LOCK_OWNER: AtomicUsize = AtomicUsize::new(0);

/// This thread's id as `LOCK_OWNER` stores it (never 0).
#[inline]
fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions.
    (unsafe { libc::pthread_self() }) as usize
}

/// The library state, held (with the mutex, when one is needed);
/// remembers which thread holds it.
pub struct Guard {
    /// Whether this guard took the mutex (its `MutexGuard` is in
    /// `LibraryState::held`, released after `LOCK_OWNER` is cleared).
    locked: bool,
}

impl Guard {
    /// The state without the mutex (nobody else may enter).
    #[inline]
    fn unlocked() -> Guard {
        LOCK_OWNER.store(this_thread(), Ordering::Relaxed);
        Guard { locked: false }
    }

    /// The state with the mutex, which this thread has just taken. Out of
    /// line, as is the unlock: the single-host path (no mutex) stays as
    /// short as it was.
    #[inline(never)]
    fn with_mutex(mutex: MutexGuard<'static, ()>) -> Guard {
        // SAFETY: this thread holds the mutex: `held` is its own.
        unsafe { *GLOBAL.held.get() = Some(mutex) };
        LOCK_OWNER.store(this_thread(), Ordering::Relaxed);
        Guard { locked: true }
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        LOCK_OWNER.store(0, Ordering::Relaxed);
        if self.locked {
            unlock_mutex();
        }
    }
}

/// Release the mutex a [`Guard`] holds (after `LOCK_OWNER` is cleared).
#[inline(never)]
fn unlock_mutex() {
    // SAFETY: this thread holds the mutex (a `let_others_in` in between
    // took it again before returning): `held` is its own. Dropping the
    // MutexGuard unlocks.
    drop(unsafe { (*GLOBAL.held.get()).take() });
}

/// The hook every blocking loop of the engine calls between two progress
/// rounds under MPI_THREAD_MULTIPLE (installed by MPI_Init_thread, see
/// `resmpi_core::engine::set_between_rounds`): release the library lock,
/// pause as `pause` says, take the lock again. The calling thread holds the
/// state through a [`Guard`] up its stack; while it is released another
/// thread may change anything in it (its own requests, communicators it
/// creates), which is why the engine hands its address here and reads
/// everything again afterwards. The waiting thread's own requests and
/// buffers are its own: MPI forbids other threads to touch them.
pub fn let_others_in(_engine: *mut (), pause: resmpi_core::engine::Pause) {
    // SAFETY: the caller holds the mutex (a blocking loop runs under a
    // Guard): `held` is its own.
    let Some(held) = (unsafe { (*GLOBAL.held.get()).take() }) else {
        // No mutex taken (single-threaded entry): nobody else may enter.
        return;
    };
    LOCK_OWNER.store(0, Ordering::Relaxed);
    drop(held);
    match pause {
        resmpi_core::engine::Pause::None | resmpi_core::engine::Pause::Spin => {
            std::hint::spin_loop()
        }
        resmpi_core::engine::Pause::Yield => std::thread::yield_now(),
        // The engine would sleep on the paths' doorbells, which it must
        // not touch without the lock: a short sleep instead, which bounds
        // how late a completion by another thread, or a message, is seen.
        resmpi_core::engine::Pause::Sleep => std::thread::sleep(MULTIPLE_SLEEP),
    }
    let retaken = GLOBAL
        .mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // SAFETY: this thread holds the mutex again.
    unsafe { *GLOBAL.held.get() = Some(retaken) };
    LOCK_OWNER.store(this_thread(), Ordering::Relaxed);
}

/// How long a thread blocked in MPI under MPI_THREAD_MULTIPLE sleeps
/// between two progress rounds once it has been idle for a while (see
/// [`let_others_in`]).
const MULTIPLE_SLEEP: std::time::Duration = std::time::Duration::from_micros(50);

/// Keep the mutex for the rest of the job, and let the threads blocked in
/// MPI release it between progress rounds: called by MPI_Init_thread
/// (holding the state) when it grants MPI_THREAD_MULTIPLE.
pub fn serialize_multiple_threads() {
    SERIALIZE_WITH_MUTEX.store(true, Ordering::SeqCst);
    resmpi_core::engine::set_between_rounds(let_others_in);
}

impl Deref for Guard {
    type Target = Global;
    fn deref(&self) -> &Global {
        // SAFETY: a Guard is the one way to the state (see `LibraryState`).
        unsafe { &*GLOBAL.global.get() }
    }
}

impl DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Global {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference
        // through this guard.
        unsafe { &mut *GLOBAL.global.get() }
    }
}

/// Whether this thread is inside the library (see `LOCK_OWNER`).
#[inline]
pub fn inside_library() -> bool {
    LOCK_OWNER.load(Ordering::Relaxed) == this_thread()
}

/// Lock the library state. Called again by the thread that holds it (an MPI
/// call from inside a user reduction op that needs the library state), it
/// ends the job with a message instead of deadlocking.
#[inline]
pub fn lock() -> Guard {
    if inside_library() {
        reentered();
    }
    if !SERIALIZE_WITH_MUTEX.load(Ordering::Relaxed) {
        return Guard::unlocked();
    }
    lock_mutex()
}

/// `lock` when entries take the mutex.
#[inline(never)]
fn lock_mutex() -> Guard {
    Guard::with_mutex(
        GLOBAL
            .mutex
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

/// An MPI call that needs the library state from inside a user function
/// the library runs: end the job with a message instead of deadlocking.
#[cold]
fn reentered() -> ! {
    eprintln!(
        "resmpi: an MPI function that needs the library state was called from a user \
         function the library is running (a reduction op or a generalized request's \
         callback); only local queries (datatypes, status setters, MPI_Initialized) \
         may be called there"
    );
    std::process::abort();
}

/// Lock the library state if nobody holds it.
pub fn try_lock() -> Result<Guard, ()> {
    if inside_library() {
        return Err(());
    }
    if !SERIALIZE_WITH_MUTEX.load(Ordering::Relaxed) {
        // Only the application's thread enters now, and it is not inside.
        return Ok(Guard::unlocked());
    }
    match GLOBAL.mutex.try_lock() {
        Ok(guard) => Ok(Guard::with_mutex(guard)),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => {
            Ok(Guard::with_mutex(poisoned.into_inner()))
        }
        Err(std::sync::TryLockError::WouldBlock) => Err(()),
    }
}

/// Run a local query that needs none of the library state (datatype
/// queries: their table has its own lock), so that a user reduction op may
/// call it while the library runs the op. An error goes to
/// MPI_COMM_WORLD's handler, or, inside such an op, is only returned.
pub fn local_entry(name: &str, body: impl FnOnce() -> MpiResult<()>) -> c_int {
    match body() {
        Ok(()) => MPI_SUCCESS,
        Err(error) if inside_library() => error.class as c_int,
        Err(error) => raise_error(name, MPI_COMM_WORLD, error),
    }
}

/// Run `body` with the initialised library; an error goes to `comm`'s handler.
pub fn with_mpi<T>(
    name: &str,
    comm: MPI_Comm,
    body: impl FnOnce(&mut Mpi, &mut Registry) -> MpiResult<T>,
) -> Result<T, c_int> {
    let result = {
        let mut guard = lock();
        let global = &mut *guard;
        match global.mpi.as_mut() {
            Some(mpi) => {
                let result = body(mpi, &mut global.registry);
                crate::datatype_packing::sweep_orphaned_receives(mpi);
                between_calls(mpi);
                result
            }
            None => {
                let when = if global.finalized {
                    "after MPI_Finalize"
                } else {
                    "before MPI_Init"
                };
                eprintln!("resmpi: {name} called {when}");
                std::process::exit(1);
            }
        }
    };
    result.map_err(|error| raise_error(name, comm, error))
}

/// Run `body` on the C layer's objects whether or not MPI is initialised
/// (MPI-4 allows the Info functions before MPI_Init and after
/// MPI_Finalize); it gets the world size (from the launcher's `PMI_SIZE`
/// before MPI_Init, 1 in a singleton). An error goes to MPI_COMM_WORLD's
/// handler, fatal when MPI is not initialised.
pub fn registry_entry(name: &str, body: impl FnOnce(u32, &mut Registry) -> MpiResult<()>) -> c_int {
    let result = {
        let mut guard = lock();
        let global = &mut *guard;
        let world_size = global.mpi.as_ref().map_or_else(
            || {
                std::env::var("PMI_SIZE")
                    .ok()
                    .and_then(|size| size.parse().ok())
                    .unwrap_or(1)
            },
            Mpi::size,
        );
        body(world_size, &mut global.registry)
    };
    match result {
        Ok(()) => MPI_SUCCESS,
        Err(error) => raise_error(name, MPI_COMM_WORLD, error),
    }
}

/// `entry` for calls whose error handler depends on what the body finds
/// (MPI_Wait and MPI_Test report through the request's communicator): the
/// body sets `comm` (MPI_COMM_WORLD until it does).
pub fn entry_with_comm(
    name: &str,
    body: impl FnOnce(&mut Mpi, &mut Registry, &mut MPI_Comm) -> MpiResult<()>,
) -> c_int {
    let mut comm = MPI_COMM_WORLD;
    let result = {
        let mut guard = lock();
        let global = &mut *guard;
        match global.mpi.as_mut() {
            Some(mpi) => {
                let result = body(mpi, &mut global.registry, &mut comm);
                crate::datatype_packing::sweep_orphaned_receives(mpi);
                between_calls(mpi);
                result
            }
            None => {
                let when = if global.finalized {
                    "after MPI_Finalize"
                } else {
                    "before MPI_Init"
                };
                eprintln!("resmpi: {name} called {when}");
                std::process::exit(1);
            }
        }
    };
    match result {
        Ok(()) => MPI_SUCCESS,
        Err(error) => raise_error(name, comm, error),
    }
}

/// `with_mpi` for entry points that only return an error code.
pub fn entry(
    name: &str,
    comm: MPI_Comm,
    body: impl FnOnce(&mut Mpi, &mut Registry) -> MpiResult<()>,
) -> c_int {
    match with_mpi(name, comm, body) {
        Ok(()) => MPI_SUCCESS,
        Err(code) => code,
    }
}

/// Dispatch `error` raised by function `name` on `comm` to its error
/// handler; returns the error code for ERRORS_RETURN-style handlers.
pub fn raise_error(name: &str, comm: MPI_Comm, error: MpiError) -> c_int {
    let code = crate::error_codes::detailed_code(error.class as c_int, format!("{name}: {error}"));
    raise_code(name, comm, code, &error)
}

/// Dispatch error code `code` (described by `error` if the job must end)
/// raised by function `name` on `comm` to its error handler, as is: the
/// code a user handler receives is `code` itself (MPI_Comm_call_errhandler
/// passes the application's own codes, e.g. from MPI_Add_error_code).
pub fn raise_code(name: &str, comm: MPI_Comm, code: c_int, error: &MpiError) -> c_int {
    let (handler, rank) = {
        let guard = lock();
        let mpi = guard.mpi.as_ref();
        let index = comm_index(comm).unwrap_or(resmpi_core::WORLD);
        let handler = mpi
            .and_then(|mpi| {
                mpi.comm(index)
                    .ok()
                    .or_else(|| mpi.comm(resmpi_core::WORLD).ok())
            })
            .map_or(MPI_ERRORS_ARE_FATAL, |comm| comm.errhandler);
        (handler, mpi.map_or(0, |mpi| mpi.rank()))
    };
    match handler {
        MPI_ERRORS_RETURN => code,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => {
            eprintln!("resmpi: rank {rank}: {name}: {error}");
            abort_job(1, &format!("{name}: {error}"));
        }
        user => {
            let function = crate::handles::errhandler_index(user)
                .and_then(|index| lock().registry.errhandlers.get(index).copied().flatten())
                .flatten();
            if let Some(function) = function {
                let mut comm_value = comm_index(comm).map_or(comm, comm_handle);
                let mut code_value = code;
                // SAFETY: a user error handler registered with MPI_Comm_create_errhandler.
                unsafe { function(&mut comm_value, &mut code_value) };
            }
            code
        }
    }
}

/// An output pointer argument is not NULL, or MPI_ERR_ARG naming `what`.
pub fn out_pointer<T>(pointer: *mut T, what: &str) -> MpiResult<()> {
    if pointer.is_null() {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("{what} pointer is NULL"),
        ));
    }
    Ok(())
}

/// End the whole job with `exit_code`.
pub fn abort_job(exit_code: c_int, message: &str) -> ! {
    let mut guard = lock();
    match guard.mpi.as_mut() {
        Some(mpi) => mpi.abort(exit_code, message),
        None => std::process::exit(exit_code),
    }
}

/// Between two calls: where a lost replica may be forked again
/// (`--replica-recovery now`; nothing otherwise). Not in a process that
/// used MPI-IO: its file state is not made fork-aware yet, so its rank goes
/// on with fewer replicas, as without recovery.
fn between_calls(mpi: &mut Mpi) {
    if crate::file::files_used() {
        mpi.decline_replica_recovery(
            "this process used MPI-IO, whose state a fork cannot copy yet",
        );
    } else {
        mpi.recover_replicas();
    }
}
