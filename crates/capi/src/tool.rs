//! The MPI tool information interface (MPI_T, MPI-4 chapter 15).
//!
//! resmpi exposes no control, performance or event variables through it
//! yet, and no categories or event sources: every count is 0, which the
//! standard allows. What is here is the interface itself, exactly: the
//! reference count of MPI_T_init_thread/MPI_T_finalize (usable before
//! MPI_Init and after MPI_Finalize), MPI_T_ERR_NOT_INITIALIZED outside it,
//! performance-variable sessions that can be made, started, stopped and
//! freed, and the MPI_T error code each lookup of a variable, category,
//! enumeration or event that does not exist returns. MPI_T calls return
//! their codes and call no error handler, as the standard says.
//! (The FT report's counters are the first candidates for performance
//! variables; docs/user-guide.md.)

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::abi::*;

/// MPI_T_init_thread calls not yet matched by MPI_T_finalize.
static INIT_COUNT: AtomicI32 = AtomicI32::new(0);

/// Performance-variable sessions made and not freed (their handles).
static PVAR_SESSIONS: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());
/// The next session's handle (never 0, MPI_T_PVAR_SESSION_NULL).
static NEXT_PVAR_SESSION: AtomicUsize = AtomicUsize::new(1);

extern "C" {
    /// Defined by the C glue (`abi/gen.py`): a data object, as in MPICH.
    static MPI_T_PVAR_ALL_HANDLES: MPI_T_pvar_handle;
}

/// Run `body` when the interface is initialized.
fn tool_entry(body: impl FnOnce() -> c_int) -> c_int {
    if INIT_COUNT.load(Ordering::SeqCst) <= 0 {
        return MPI_T_ERR_NOT_INITIALIZED;
    }
    body()
}

/// `*out = value`, or MPI_ERR_ARG for a NULL pointer.
fn write_out(out: *mut c_int, value: c_int) -> c_int {
    if out.is_null() {
        return MPI_ERR_ARG;
    }
    // SAFETY: a non-null pointer from the caller.
    unsafe { *out = value };
    MPI_SUCCESS
}

/// Whether `session` is a session made by MPI_T_pvar_session_create.
fn valid_session(session: MPI_T_pvar_session) -> bool {
    PVAR_SESSIONS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .contains(&(session as usize))
}

/// Whether `handle` is MPI_T_PVAR_ALL_HANDLES.
fn all_handles(handle: MPI_T_pvar_handle) -> bool {
    // SAFETY: reading a constant data object of the library.
    handle == unsafe { MPI_T_PVAR_ALL_HANDLES }
}

/// `MPI_ERR_ARG` for a NULL name, else: no variable has it.
fn name_not_found(name: *const c_char) -> c_int {
    if name.is_null() {
        return MPI_ERR_ARG;
    }
    MPI_T_ERR_INVALID_NAME
}

/// `code` once `session` is known valid.
fn in_session(session: MPI_T_pvar_session, code: c_int) -> c_int {
    if !valid_session(session) {
        return MPI_T_ERR_INVALID_SESSION;
    }
    code
}

/// Start, stop or reset: done on MPI_T_PVAR_ALL_HANDLES of a valid
/// session (which binds no handle); no single handle exists to be valid.
fn every_handle_in_session(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) -> c_int {
    in_session(
        session,
        if all_handles(handle) {
            MPI_SUCCESS
        } else {
            MPI_T_ERR_INVALID_HANDLE
        },
    )
}

/// MPI_T calls whose answer, once the interface is initialized, is one
/// expression of their arguments (`_` for an argument not looked at):
/// with no variable, category, enumeration, event or source to name, most
/// can only report what does not exist.
macro_rules! tool_calls {
    ($($name:ident = $c_name:ident($($arg:tt: $ty:ty),*) => $answer:expr;)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                tool_entry(|| $answer)
            }
            const _: fn_types::$c_name = $name;
        )*
    };
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
    if provided.is_null() {
        return MPI_ERR_ARG;
    }
    INIT_COUNT.fetch_add(1, Ordering::SeqCst);
    // SAFETY: checked non-null.
    unsafe { *provided = required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE) };
    MPI_SUCCESS
}
const _: fn_types::MPI_T_init_thread = PMPI_T_init_thread;

#[no_mangle]
pub unsafe extern "C" fn PMPI_T_finalize() -> c_int {
    let decremented = INIT_COUNT.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |count| {
        (count > 0).then_some(count - 1)
    });
    match decremented {
        Ok(_) => MPI_SUCCESS,
        Err(_) => MPI_T_ERR_NOT_INITIALIZED,
    }
}
const _: fn_types::MPI_T_finalize = PMPI_T_finalize;

#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_session_create(session: *mut MPI_T_pvar_session) -> c_int {
    tool_entry(|| {
        if session.is_null() {
            return MPI_ERR_ARG;
        }
        let handle = NEXT_PVAR_SESSION.fetch_add(1, Ordering::SeqCst);
        PVAR_SESSIONS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(handle);
        // SAFETY: checked non-null.
        unsafe { *session = handle as MPI_T_pvar_session };
        MPI_SUCCESS
    })
}
const _: fn_types::MPI_T_pvar_session_create = PMPI_T_pvar_session_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_session_free(session: *mut MPI_T_pvar_session) -> c_int {
    tool_entry(|| {
        if session.is_null() {
            return MPI_ERR_ARG;
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *session } as usize;
        let removed = PVAR_SESSIONS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&handle);
        if !removed {
            return MPI_T_ERR_INVALID_SESSION;
        }
        // SAFETY: checked non-null.
        unsafe { *session = MPI_T_PVAR_SESSION_NULL };
        MPI_SUCCESS
    })
}
const _: fn_types::MPI_T_pvar_session_free = PMPI_T_pvar_session_free;

tool_calls! {
    // The set of categories (empty) never changes.
    PMPI_T_category_changed = MPI_T_category_changed(update_number: *mut c_int) => write_out(update_number, 0);
    // No variable, category, event or source exists.
    PMPI_T_cvar_get_num = MPI_T_cvar_get_num(num_cvar: *mut c_int) => write_out(num_cvar, 0);
    PMPI_T_pvar_get_num = MPI_T_pvar_get_num(num_pvar: *mut c_int) => write_out(num_pvar, 0);
    PMPI_T_category_get_num = MPI_T_category_get_num(num_cat: *mut c_int) => write_out(num_cat, 0);
    PMPI_T_event_get_num = MPI_T_event_get_num(num_events: *mut c_int) => write_out(num_events, 0);
    PMPI_T_source_get_num = MPI_T_source_get_num(num_sources: *mut c_int) => write_out(num_sources, 0);
    // No name names one.
    PMPI_T_cvar_get_index = MPI_T_cvar_get_index(name: *const c_char, _: *mut c_int) => name_not_found(name);
    PMPI_T_pvar_get_index = MPI_T_pvar_get_index(name: *const c_char, _: c_int, _: *mut c_int) => name_not_found(name);
    PMPI_T_category_get_index = MPI_T_category_get_index(name: *const c_char, _: *mut c_int) => name_not_found(name);
    PMPI_T_event_get_index = MPI_T_event_get_index(name: *const c_char, _: *mut c_int) => name_not_found(name);
    // No performance variable exists to be bound, nor a handle of one.
    PMPI_T_pvar_handle_alloc = MPI_T_pvar_handle_alloc(session: MPI_T_pvar_session, _: c_int, _: *mut c_void, _: *mut MPI_T_pvar_handle, _: *mut c_int) => in_session(session, MPI_T_ERR_INVALID_INDEX);
    PMPI_T_pvar_handle_free = MPI_T_pvar_handle_free(session: MPI_T_pvar_session, _: *mut MPI_T_pvar_handle) => in_session(session, MPI_T_ERR_INVALID_HANDLE);
    PMPI_T_pvar_read = MPI_T_pvar_read(session: MPI_T_pvar_session, _: MPI_T_pvar_handle, _: *mut c_void) => in_session(session, MPI_T_ERR_INVALID_HANDLE);
    PMPI_T_pvar_write = MPI_T_pvar_write(session: MPI_T_pvar_session, _: MPI_T_pvar_handle, _: *const c_void) => in_session(session, MPI_T_ERR_INVALID_HANDLE);
    PMPI_T_pvar_readreset = MPI_T_pvar_readreset(session: MPI_T_pvar_session, _: MPI_T_pvar_handle, _: *mut c_void) => in_session(session, MPI_T_ERR_INVALID_HANDLE);
    // MPI_T_PVAR_ALL_HANDLES of a valid session: done (it binds no handle).
    PMPI_T_pvar_start = MPI_T_pvar_start(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) => every_handle_in_session(session, handle);
    PMPI_T_pvar_stop = MPI_T_pvar_stop(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) => every_handle_in_session(session, handle);
    PMPI_T_pvar_reset = MPI_T_pvar_reset(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) => every_handle_in_session(session, handle);
    // No index names one of these (there are none).
    PMPI_T_cvar_get_info = MPI_T_cvar_get_info(_: c_int, _: *mut c_char, _: *mut c_int, _: *mut c_int, _: *mut MPI_Datatype, _: *mut MPI_T_enum, _: *mut c_char, _: *mut c_int, _: *mut c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_cvar_handle_alloc = MPI_T_cvar_handle_alloc(_: c_int, _: *mut c_void, _: *mut MPI_T_cvar_handle, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_pvar_get_info = MPI_T_pvar_get_info(_: c_int, _: *mut c_char, _: *mut c_int, _: *mut c_int, _: *mut c_int, _: *mut MPI_Datatype, _: *mut MPI_T_enum, _: *mut c_char, _: *mut c_int, _: *mut c_int, _: *mut c_int, _: *mut c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_category_get_info = MPI_T_category_get_info(_: c_int, _: *mut c_char, _: *mut c_int, _: *mut c_char, _: *mut c_int, _: *mut c_int, _: *mut c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_category_get_cvars = MPI_T_category_get_cvars(_: c_int, _: c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_category_get_pvars = MPI_T_category_get_pvars(_: c_int, _: c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_category_get_categories = MPI_T_category_get_categories(_: c_int, _: c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_category_get_num_events = MPI_T_category_get_num_events(_: c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_category_get_events = MPI_T_category_get_events(_: c_int, _: c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_event_get_info = MPI_T_event_get_info(_: c_int, _: *mut c_char, _: *mut c_int, _: *mut c_int, _: *mut MPI_Datatype, _: *mut MPI_Aint, _: *mut c_int, _: *mut MPI_T_enum, _: *mut MPI_Info, _: *mut c_char, _: *mut c_int, _: *mut c_int) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_event_handle_alloc = MPI_T_event_handle_alloc(_: c_int, _: *mut c_void, _: MPI_Info, _: *mut MPI_T_event_registration) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_source_get_info = MPI_T_source_get_info(_: c_int, _: *mut c_char, _: *mut c_int, _: *mut c_char, _: *mut c_int, _: *mut MPI_T_source_order, _: *mut MPI_Count, _: *mut MPI_Count, _: *mut MPI_Info) => MPI_T_ERR_INVALID_INDEX;
    PMPI_T_source_get_timestamp = MPI_T_source_get_timestamp(_: c_int, _: *mut MPI_Count) => MPI_T_ERR_INVALID_INDEX;
    // No handle of these kinds exists to be valid.
    PMPI_T_cvar_handle_free = MPI_T_cvar_handle_free(_: *mut MPI_T_cvar_handle) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_cvar_read = MPI_T_cvar_read(_: MPI_T_cvar_handle, _: *mut c_void) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_cvar_write = MPI_T_cvar_write(_: MPI_T_cvar_handle, _: *const c_void) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_enum_get_info = MPI_T_enum_get_info(_: MPI_T_enum, _: *mut c_int, _: *mut c_char, _: *mut c_int) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_enum_get_item = MPI_T_enum_get_item(_: MPI_T_enum, _: c_int, _: *mut c_int, _: *mut c_char, _: *mut c_int) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_handle_free = MPI_T_event_handle_free(_: MPI_T_event_registration, _: *mut c_void, _: MPI_T_event_free_cb_function) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_handle_get_info = MPI_T_event_handle_get_info(_: MPI_T_event_registration, _: *mut MPI_Info) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_handle_set_info = MPI_T_event_handle_set_info(_: MPI_T_event_registration, _: MPI_Info) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_register_callback = MPI_T_event_register_callback(_: MPI_T_event_registration, _: MPI_T_cb_safety, _: MPI_Info, _: *mut c_void, _: MPI_T_event_cb_function) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_callback_get_info = MPI_T_event_callback_get_info(_: MPI_T_event_registration, _: MPI_T_cb_safety, _: *mut MPI_Info) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_callback_set_info = MPI_T_event_callback_set_info(_: MPI_T_event_registration, _: MPI_T_cb_safety, _: MPI_Info) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_set_dropped_handler = MPI_T_event_set_dropped_handler(_: MPI_T_event_registration, _: MPI_T_event_dropped_cb_function) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_read = MPI_T_event_read(_: MPI_T_event_instance, _: c_int, _: *mut c_void) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_copy = MPI_T_event_copy(_: MPI_T_event_instance, _: *mut c_void) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_get_timestamp = MPI_T_event_get_timestamp(_: MPI_T_event_instance, _: *mut MPI_Count) => MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_event_get_source = MPI_T_event_get_source(_: MPI_T_event_instance, _: *mut c_int) => MPI_T_ERR_INVALID_HANDLE;
}
