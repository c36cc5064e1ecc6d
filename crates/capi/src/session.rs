//! MPI-4 sessions: MPI_Session_init/finalize, process sets, session error
//! handlers, and groups made from a process set (which
//! MPI_Comm_create_from_group turns into communicators).
//!
//! Why this shape: resmpi wires a process up once, and the world model and
//! sessions share that runtime. The first of MPI_Init and MPI_Session_init
//! starts it (`init::bring_up`); it ends when the world model is finalized
//! and no session is open, whichever comes last. A process that has ended
//! its runtime cannot start it again (MPI-4 allows it; resmpi's launcher
//! wires each process once), and says so.
//!
//! Process sets: `mpi://WORLD` (every process of the job) and `mpi://SELF`.
//! The names are matched without regard to case, as MPICH does.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::errhandler::{register_errhandler, valid_errhandler};
use crate::global::{abort_job, lock, out_pointer, registry_entry, with_mpi};
use crate::handles::errhandler_index;

/// The process sets every session has, in the order `get_nth_pset` gives.
const PROCESS_SETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// Handles of sessions: `SESSION_BASE | index`, distinct from
/// `MPI_SESSION_NULL` (MPICH's encoding: a directly allocated object of
/// the session kind).
const SESSION_BASE: MPI_Session = 0xB8000000u32 as MPI_Session;
const SESSION_INDEX_MASK: MPI_Session = 0x03ffffff;

/// One open session.
#[derive(Clone, Copy, Debug)]
struct Session {
    errhandler: MPI_Errhandler,
}

/// Open sessions by index (`None`: finalized).
static SESSIONS: Mutex<Vec<Option<Session>>> = Mutex::new(Vec::new());

fn sessions() -> std::sync::MutexGuard<'static, Vec<Option<Session>>> {
    SESSIONS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How many sessions are open (MPI_Finalize leaves the runtime up for them).
pub(crate) fn open_count() -> usize {
    sessions().iter().flatten().count()
}

fn session_index(handle: MPI_Session) -> Option<usize> {
    if handle & !SESSION_INDEX_MASK != SESSION_BASE {
        return None;
    }
    Some((handle & SESSION_INDEX_MASK) as usize)
}

/// The open session behind `handle`.
fn session(handle: MPI_Session) -> MpiResult<Session> {
    session_index(handle)
        .and_then(|index| sessions().get(index).copied().flatten())
        .ok_or_else(|| {
            let what = if handle == MPI_SESSION_NULL {
                "MPI_SESSION_NULL".to_string()
            } else {
                format!("{handle:#x} (finalized or never created)")
            };
            MpiError::new(ErrorClass::Session, format!("session {what} is not valid"))
        })
}

/// Hand `error` of `name` to `handler` (the session's, or the one
/// MPI_Session_init was given) with `session` as the handle a user
/// handler sees; returns the code for handlers that return.
fn raise_with(name: &str, session: MPI_Session, handler: MPI_Errhandler, error: MpiError) -> c_int {
    let mut code =
        crate::error_codes::detailed_code(error.class as c_int, format!("{name}: {error}"));
    match handler {
        MPI_ERRORS_RETURN => code,
        MPI_ERRHANDLER_NULL | MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => {
            eprintln!("resmpi: {name}: {error}");
            abort_job(1, &format!("{name}: {error}"));
        }
        user => {
            let returned = code;
            call_user_handler(user, session, &mut code);
            returned
        }
    }
}

/// Run user error handler `user` (made by MPI_Session_create_errhandler)
/// on `session` and `code`. Session and communicator handles are both C
/// ints, so the handler is stored in the communicator form as it is.
fn call_user_handler(user: MPI_Errhandler, mut session: MPI_Session, code: &mut c_int) {
    let function = errhandler_index(user)
        .and_then(|index| lock().registry.errhandlers.get(index).copied().flatten())
        .flatten();
    if let Some(function) = function {
        // SAFETY: the user's handler, with valid pointers.
        unsafe { function(&mut session, code) };
    }
}

/// `raise_with` the session's own handler. An error on a handle that is
/// no open session goes, as in MPICH, to MPI_COMM_WORLD's handler while the
/// runtime is up (mpi4py sets it to return errors), else it is fatal.
fn raise(name: &str, handle: MPI_Session, error: MpiError) -> c_int {
    match session(handle) {
        Ok(found) => raise_with(name, handle, found.errhandler, error),
        Err(_) if lock().mpi.is_some() => crate::global::raise_error(name, MPI_COMM_WORLD, error),
        Err(_) => raise_with(name, handle, MPI_ERRORS_ARE_FATAL, error),
    }
}

/// Run `body` on an open session with the runtime up; errors go to the
/// session's handler.
fn session_entry(
    name: &str,
    handle: MPI_Session,
    body: impl FnOnce(&mut resmpi_core::Mpi, &mut crate::global::Registry) -> MpiResult<()>,
) -> c_int {
    if let Err(error) = session(handle) {
        return raise(name, handle, error);
    }
    let mut outcome = None;
    let code = with_mpi(name, MPI_COMM_SELF, |mpi, registry| {
        outcome = Some(body(mpi, registry));
        Ok(())
    });
    match outcome {
        Some(Ok(())) => MPI_SUCCESS,
        Some(Err(error)) => raise(name, handle, error),
        None => code.err().unwrap_or(MPI_ERR_OTHER),
    }
}

/// The members (world ranks) of process set `name`.
fn process_set(mpi: &resmpi_core::Mpi, name: &str) -> MpiResult<Vec<u32>> {
    if name.eq_ignore_ascii_case(PROCESS_SETS[0]) {
        Ok((0..mpi.size()).collect())
    } else if name.eq_ignore_ascii_case(PROCESS_SETS[1]) {
        Ok(vec![mpi.rank()])
    } else {
        Err(MpiError::new(
            ErrorClass::Arg,
            format!(
                "no process set is named {name:?} (resmpi has {})",
                PROCESS_SETS.join(" and ")
            ),
        ))
    }
}

/// A C string argument, or MPI_ERR_ARG naming `what`.
unsafe fn c_string(text: *const c_char, what: &str) -> MpiResult<String> {
    if text.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, format!("{what} is NULL")));
    }
    // SAFETY: a non-null C string from the caller.
    Ok(unsafe { std::ffi::CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned())
}

/// The MPI name of a thread level.
fn thread_level_name(level: c_int) -> &'static str {
    match level {
        MPI_THREAD_SINGLE => "MPI_THREAD_SINGLE",
        MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        _ => "MPI_THREAD_MULTIPLE",
    }
}

/// The thread level an info's `thread_level` asks for (MPI_THREAD_SINGLE
/// when it says nothing).
fn requested_thread_level(registry: &crate::global::Registry, info: MPI_Info) -> MpiResult<c_int> {
    if info == MPI_INFO_NULL {
        return Ok(MPI_THREAD_SINGLE);
    }
    let Some(value) = crate::info::hint(registry, info, "thread_level")? else {
        return Ok(MPI_THREAD_SINGLE);
    };
    match value.trim().to_ascii_uppercase().as_str() {
        "MPI_THREAD_SINGLE" => Ok(MPI_THREAD_SINGLE),
        "MPI_THREAD_FUNNELED" => Ok(MPI_THREAD_FUNNELED),
        "MPI_THREAD_SERIALIZED" => Ok(MPI_THREAD_SERIALIZED),
        "MPI_THREAD_MULTIPLE" => Ok(MPI_THREAD_MULTIPLE),
        _ => Err(MpiError::new(
            ErrorClass::Arg,
            format!(
                "info thread_level {value:?}: expected MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, \
                 MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE"
            ),
        )),
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_init(
    info: MPI_Info,
    errhandler: MPI_Errhandler,
    session: *mut MPI_Session,
) -> c_int {
    const NAME: &str = "MPI_Session_init";
    let handler = if valid_errhandler(errhandler).is_ok() {
        errhandler
    } else {
        MPI_ERRORS_ARE_FATAL
    };
    let fail = |error| raise_with(NAME, MPI_SESSION_NULL, handler, error);
    if let Err(error) = valid_errhandler(errhandler) {
        return fail(error);
    }
    if let Err(error) = out_pointer(session, "session") {
        return fail(error);
    }
    let started = {
        let mut global = lock();
        match requested_thread_level(&global.registry, info) {
            Err(error) => Err(error),
            Ok(_) if global.mpi.is_none() && crate::init::RUNTIME_ENDED.load(Ordering::SeqCst) => {
                Err(MpiError::new(
                    ErrorClass::Other,
                    "MPI was finalized in this process and resmpi does not start it again \
                     (its processes are wired up once per job)",
                ))
            }
            Ok(required) => {
                if global.mpi.is_none() {
                    crate::init::bring_up(&mut global, required);
                }
                Ok(())
            }
        }
    };
    if let Err(error) = started {
        return fail(error);
    }
    let index = crate::objects::insert_reusing(&mut sessions(), Session { errhandler });
    // SAFETY: checked non-null.
    unsafe { *session = SESSION_BASE | index as MPI_Session };
    MPI_SUCCESS
}
const _: fn_types::MPI_Session_init = PMPI_Session_init;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_finalize(session: *mut MPI_Session) -> c_int {
    const NAME: &str = "MPI_Session_finalize";
    if session.is_null() {
        return raise(
            NAME,
            MPI_SESSION_NULL,
            MpiError::new(ErrorClass::Arg, "session pointer is NULL"),
        );
    }
    // SAFETY: checked non-null.
    let handle = unsafe { *session };
    if let Err(error) = self::session(handle) {
        return raise(NAME, handle, error);
    }
    let last = {
        let mut open = sessions();
        if let Some(entry) = session_index(handle).and_then(|index| open.get_mut(index)) {
            *entry = None;
        }
        open.iter().flatten().count() == 0
    };
    let world_done = {
        let global = lock();
        !global.initialized || global.finalized
    };
    if last && world_done {
        // The runtime ends with the last user of it.
        let code = crate::global::entry(NAME, MPI_COMM_SELF, |mpi, _| mpi.finalize());
        if code != MPI_SUCCESS {
            return code;
        }
        lock().mpi = None;
        crate::init::RUNTIME_ENDED.store(true, Ordering::SeqCst);
    }
    // SAFETY: checked non-null.
    unsafe { *session = MPI_SESSION_NULL };
    MPI_SUCCESS
}
const _: fn_types::MPI_Session_finalize = PMPI_Session_finalize;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_get_num_psets(
    session: MPI_Session,
    _info: MPI_Info,
    npset_names: *mut c_int,
) -> c_int {
    session_entry("MPI_Session_get_num_psets", session, |_, _| {
        out_pointer(npset_names, "npset_names")?;
        // SAFETY: checked non-null.
        unsafe { *npset_names = PROCESS_SETS.len() as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Session_get_num_psets = PMPI_Session_get_num_psets;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_get_nth_pset(
    session: MPI_Session,
    _info: MPI_Info,
    n: c_int,
    pset_len: *mut c_int,
    pset_name: *mut c_char,
) -> c_int {
    session_entry("MPI_Session_get_nth_pset", session, |_, _| {
        out_pointer(pset_len, "pset_len")?;
        let Some(name) = usize::try_from(n).ok().and_then(|n| PROCESS_SETS.get(n)) else {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!(
                    "process set number {n} does not exist (0..{})",
                    PROCESS_SETS.len()
                ),
            ));
        };
        // SAFETY: checked non-null.
        let capacity = unsafe { *pset_len };
        if capacity <= 0 {
            // MPI-4: a zero length asks for the length, NUL included.
            // SAFETY: checked non-null.
            unsafe { *pset_len = name.len() as c_int + 1 };
            return Ok(());
        }
        out_pointer(pset_name, "pset_name")?;
        let copied = name.len().min(capacity as usize - 1);
        // SAFETY: the caller's buffer holds `capacity` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr(), pset_name.cast::<u8>(), copied);
            *pset_name.add(copied) = 0;
        }
        Ok(())
    })
}
const _: fn_types::MPI_Session_get_nth_pset = PMPI_Session_get_nth_pset;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_get_pset_info(
    session: MPI_Session,
    pset_name: *const c_char,
    info: *mut MPI_Info,
) -> c_int {
    session_entry("MPI_Session_get_pset_info", session, |mpi, registry| {
        out_pointer(info, "info")?;
        // SAFETY: the caller's C string.
        let name = unsafe { c_string(pset_name, "pset_name") }?;
        let members = process_set(mpi, &name)?;
        let entries = vec![("mpi_size".to_string(), members.len().to_string())];
        // SAFETY: checked non-null.
        unsafe { *info = crate::info::new_info(registry, entries) };
        Ok(())
    })
}
const _: fn_types::MPI_Session_get_pset_info = PMPI_Session_get_pset_info;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_get_info(
    session: MPI_Session,
    info_used: *mut MPI_Info,
) -> c_int {
    session_entry("MPI_Session_get_info", session, |_, registry| {
        out_pointer(info_used, "info_used")?;
        let level = crate::init::granted_level();
        let entries = vec![(
            "thread_level".to_string(),
            thread_level_name(level).to_string(),
        )];
        // SAFETY: checked non-null.
        unsafe { *info_used = crate::info::new_info(registry, entries) };
        Ok(())
    })
}
const _: fn_types::MPI_Session_get_info = PMPI_Session_get_info;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_from_session_pset(
    session: MPI_Session,
    pset_name: *const c_char,
    newgroup: *mut MPI_Group,
) -> c_int {
    session_entry("MPI_Group_from_session_pset", session, |mpi, registry| {
        out_pointer(newgroup, "newgroup")?;
        // SAFETY: the caller's C string.
        let name = unsafe { c_string(pset_name, "pset_name") }?;
        let members = process_set(mpi, &name)?;
        // SAFETY: checked non-null.
        unsafe { *newgroup = crate::group::new_group(registry, members) };
        Ok(())
    })
}
const _: fn_types::MPI_Group_from_session_pset = PMPI_Group_from_session_pset;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_create_errhandler(
    function: MPI_Session_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // MPI-4 lets a program make the handler before MPI_Session_init.
    registry_entry("MPI_Session_create_errhandler", |_, registry| {
        let Some(function) = function else {
            return Err(MpiError::new(ErrorClass::Arg, "function is NULL"));
        };
        out_pointer(errhandler, "errhandler")?;
        // Stored as a communicator handler: MPI_Session and MPI_Comm are
        // both C ints, so the two function types are one.
        // SAFETY: checked non-null.
        unsafe { *errhandler = register_errhandler(registry, function) };
        Ok(())
    })
}
const _: fn_types::MPI_Session_create_errhandler = PMPI_Session_create_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_set_errhandler(
    session: MPI_Session,
    errhandler: MPI_Errhandler,
) -> c_int {
    const NAME: &str = "MPI_Session_set_errhandler";
    if let Err(error) = self::session(session).and_then(|_| valid_errhandler(errhandler)) {
        return raise(NAME, session, error);
    }
    let mut open = sessions();
    if let Some(Some(entry)) = session_index(session).and_then(|index| open.get_mut(index)) {
        entry.errhandler = errhandler;
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Session_set_errhandler = PMPI_Session_set_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_get_errhandler(
    session: MPI_Session,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    const NAME: &str = "MPI_Session_get_errhandler";
    match self::session(session)
        .and_then(|found| out_pointer(errhandler, "errhandler").map(|()| found))
    {
        Ok(found) => {
            // SAFETY: checked non-null.
            unsafe { *errhandler = found.errhandler };
            MPI_SUCCESS
        }
        Err(error) => raise(NAME, session, error),
    }
}
const _: fn_types::MPI_Session_get_errhandler = PMPI_Session_get_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Session_call_errhandler(
    session: MPI_Session,
    errorcode: c_int,
) -> c_int {
    const NAME: &str = "MPI_Session_call_errhandler";
    let found = match self::session(session) {
        Ok(found) => found,
        Err(error) => return raise(NAME, session, error),
    };
    let class = ErrorClass::from_i32(errorcode).unwrap_or(ErrorClass::Other);
    let error = MpiError::new(
        class,
        format!("error code {errorcode} raised by MPI_Session_call_errhandler"),
    );
    match found.errhandler {
        MPI_ERRORS_RETURN => {}
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => {
            eprintln!("resmpi: {NAME}: {error}");
            abort_job(1, &format!("{NAME}: {error}"));
        }
        user => {
            let mut code = errorcode;
            call_user_handler(user, session, &mut code);
        }
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Session_call_errhandler = PMPI_Session_call_errhandler;
