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

/// MPI_T calls that, with no variable, category, enumeration, event or
/// source to name, can only answer `code` once the interface is
/// initialized (their arguments are not looked at).
macro_rules! nothing_to_find {
    ($code:expr; $($name:ident = $c_name:ident($($ty:ty),*);)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($(_: $ty),*) -> c_int {
                tool_entry(|| $code)
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
pub unsafe extern "C" fn PMPI_T_category_changed(update_number: *mut c_int) -> c_int {
    // The set of categories (empty) never changes.
    tool_entry(|| write_out(update_number, 0))
}
const _: fn_types::MPI_T_category_changed = PMPI_T_category_changed;

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

/// None exist.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_cvar_get_num(num_cvar: *mut c_int) -> c_int {
    tool_entry(|| write_out(num_cvar, 0))
}
const _: fn_types::MPI_T_cvar_get_num = PMPI_T_cvar_get_num;

/// None exist.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_get_num(num_pvar: *mut c_int) -> c_int {
    tool_entry(|| write_out(num_pvar, 0))
}
const _: fn_types::MPI_T_pvar_get_num = PMPI_T_pvar_get_num;

/// None exist.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_category_get_num(num_cat: *mut c_int) -> c_int {
    tool_entry(|| write_out(num_cat, 0))
}
const _: fn_types::MPI_T_category_get_num = PMPI_T_category_get_num;

/// None exist.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_get_num(num_events: *mut c_int) -> c_int {
    tool_entry(|| write_out(num_events, 0))
}
const _: fn_types::MPI_T_event_get_num = PMPI_T_event_get_num;

/// None exist.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_source_get_num(num_sources: *mut c_int) -> c_int {
    tool_entry(|| write_out(num_sources, 0))
}
const _: fn_types::MPI_T_source_get_num = PMPI_T_source_get_num;

/// No name names one.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_cvar_get_index(
    name: *const c_char,
    _cvar_index: *mut c_int,
) -> c_int {
    tool_entry(|| {
        if name.is_null() {
            return MPI_ERR_ARG;
        }
        MPI_T_ERR_INVALID_NAME
    })
}
const _: fn_types::MPI_T_cvar_get_index = PMPI_T_cvar_get_index;

/// No name names one.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_get_index(
    name: *const c_char,
    _var_class: c_int,
    _pvar_index: *mut c_int,
) -> c_int {
    tool_entry(|| {
        if name.is_null() {
            return MPI_ERR_ARG;
        }
        MPI_T_ERR_INVALID_NAME
    })
}
const _: fn_types::MPI_T_pvar_get_index = PMPI_T_pvar_get_index;

/// No name names one.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_category_get_index(
    name: *const c_char,
    _cat_index: *mut c_int,
) -> c_int {
    tool_entry(|| {
        if name.is_null() {
            return MPI_ERR_ARG;
        }
        MPI_T_ERR_INVALID_NAME
    })
}
const _: fn_types::MPI_T_category_get_index = PMPI_T_category_get_index;

/// No name names one.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_get_index(
    name: *const c_char,
    _event_index: *mut c_int,
) -> c_int {
    tool_entry(|| {
        if name.is_null() {
            return MPI_ERR_ARG;
        }
        MPI_T_ERR_INVALID_NAME
    })
}
const _: fn_types::MPI_T_event_get_index = PMPI_T_event_get_index;

/// No performance variable exists to be bound.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_handle_alloc(
    session: MPI_T_pvar_session,
    _pvar_index: c_int,
    _obj_handle: *mut c_void,
    _handle: *mut MPI_T_pvar_handle,
    _count: *mut c_int,
) -> c_int {
    tool_entry(|| {
        if !valid_session(session) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        MPI_T_ERR_INVALID_INDEX
    })
}
const _: fn_types::MPI_T_pvar_handle_alloc = PMPI_T_pvar_handle_alloc;

/// No performance-variable handle exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_handle_free(
    session: MPI_T_pvar_session,
    _handle: *mut MPI_T_pvar_handle,
) -> c_int {
    tool_entry(|| {
        if !valid_session(session) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        MPI_T_ERR_INVALID_HANDLE
    })
}
const _: fn_types::MPI_T_pvar_handle_free = PMPI_T_pvar_handle_free;

/// No performance-variable handle exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_read(
    session: MPI_T_pvar_session,
    _handle: MPI_T_pvar_handle,
    _buf: *mut c_void,
) -> c_int {
    tool_entry(|| {
        if !valid_session(session) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        MPI_T_ERR_INVALID_HANDLE
    })
}
const _: fn_types::MPI_T_pvar_read = PMPI_T_pvar_read;

/// No performance-variable handle exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_write(
    session: MPI_T_pvar_session,
    _handle: MPI_T_pvar_handle,
    _buf: *const c_void,
) -> c_int {
    tool_entry(|| {
        if !valid_session(session) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        MPI_T_ERR_INVALID_HANDLE
    })
}
const _: fn_types::MPI_T_pvar_write = PMPI_T_pvar_write;

/// No performance-variable handle exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_readreset(
    session: MPI_T_pvar_session,
    _handle: MPI_T_pvar_handle,
    _buf: *mut c_void,
) -> c_int {
    tool_entry(|| {
        if !valid_session(session) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        MPI_T_ERR_INVALID_HANDLE
    })
}
const _: fn_types::MPI_T_pvar_readreset = PMPI_T_pvar_readreset;

/// On MPI_T_PVAR_ALL_HANDLES of a valid session: done (the session binds no handle); no single handle exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_start(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    tool_entry(|| {
        if !valid_session(session) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        if all_handles(handle) {
            return MPI_SUCCESS;
        }
        MPI_T_ERR_INVALID_HANDLE
    })
}
const _: fn_types::MPI_T_pvar_start = PMPI_T_pvar_start;

/// On MPI_T_PVAR_ALL_HANDLES of a valid session: done (the session binds no handle); no single handle exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_stop(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    tool_entry(|| {
        if !valid_session(session) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        if all_handles(handle) {
            return MPI_SUCCESS;
        }
        MPI_T_ERR_INVALID_HANDLE
    })
}
const _: fn_types::MPI_T_pvar_stop = PMPI_T_pvar_stop;

/// On MPI_T_PVAR_ALL_HANDLES of a valid session: done (the session binds no handle); no single handle exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_reset(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
) -> c_int {
    tool_entry(|| {
        if !valid_session(session) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        if all_handles(handle) {
            return MPI_SUCCESS;
        }
        MPI_T_ERR_INVALID_HANDLE
    })
}
const _: fn_types::MPI_T_pvar_reset = PMPI_T_pvar_reset;

// No index names one of these (there are none).
nothing_to_find! {
    MPI_T_ERR_INVALID_INDEX;
    PMPI_T_cvar_get_info = MPI_T_cvar_get_info(c_int, *mut c_char, *mut c_int, *mut c_int, *mut MPI_Datatype, *mut MPI_T_enum, *mut c_char, *mut c_int, *mut c_int, *mut c_int);
    PMPI_T_cvar_handle_alloc = MPI_T_cvar_handle_alloc(c_int, *mut c_void, *mut MPI_T_cvar_handle, *mut c_int);
    PMPI_T_pvar_get_info = MPI_T_pvar_get_info(c_int, *mut c_char, *mut c_int, *mut c_int, *mut c_int, *mut MPI_Datatype, *mut MPI_T_enum, *mut c_char, *mut c_int, *mut c_int, *mut c_int, *mut c_int, *mut c_int);
    PMPI_T_category_get_info = MPI_T_category_get_info(c_int, *mut c_char, *mut c_int, *mut c_char, *mut c_int, *mut c_int, *mut c_int, *mut c_int);
    PMPI_T_category_get_cvars = MPI_T_category_get_cvars(c_int, c_int, *mut c_int);
    PMPI_T_category_get_pvars = MPI_T_category_get_pvars(c_int, c_int, *mut c_int);
    PMPI_T_category_get_categories = MPI_T_category_get_categories(c_int, c_int, *mut c_int);
    PMPI_T_category_get_num_events = MPI_T_category_get_num_events(c_int, *mut c_int);
    PMPI_T_category_get_events = MPI_T_category_get_events(c_int, c_int, *mut c_int);
    PMPI_T_event_get_info = MPI_T_event_get_info(c_int, *mut c_char, *mut c_int, *mut c_int, *mut MPI_Datatype, *mut MPI_Aint, *mut c_int, *mut MPI_T_enum, *mut MPI_Info, *mut c_char, *mut c_int, *mut c_int);
    PMPI_T_event_handle_alloc = MPI_T_event_handle_alloc(c_int, *mut c_void, MPI_Info, *mut MPI_T_event_registration);
    PMPI_T_source_get_info = MPI_T_source_get_info(c_int, *mut c_char, *mut c_int, *mut c_char, *mut c_int, *mut MPI_T_source_order, *mut MPI_Count, *mut MPI_Count, *mut MPI_Info);
    PMPI_T_source_get_timestamp = MPI_T_source_get_timestamp(c_int, *mut MPI_Count);
}

// No handle of these kinds exists to be valid.
nothing_to_find! {
    MPI_T_ERR_INVALID_HANDLE;
    PMPI_T_cvar_handle_free = MPI_T_cvar_handle_free(*mut MPI_T_cvar_handle);
    PMPI_T_cvar_read = MPI_T_cvar_read(MPI_T_cvar_handle, *mut c_void);
    PMPI_T_cvar_write = MPI_T_cvar_write(MPI_T_cvar_handle, *const c_void);
    PMPI_T_enum_get_info = MPI_T_enum_get_info(MPI_T_enum, *mut c_int, *mut c_char, *mut c_int);
    PMPI_T_enum_get_item = MPI_T_enum_get_item(MPI_T_enum, c_int, *mut c_int, *mut c_char, *mut c_int);
    PMPI_T_event_handle_free = MPI_T_event_handle_free(MPI_T_event_registration, *mut c_void, MPI_T_event_free_cb_function);
    PMPI_T_event_handle_get_info = MPI_T_event_handle_get_info(MPI_T_event_registration, *mut MPI_Info);
    PMPI_T_event_handle_set_info = MPI_T_event_handle_set_info(MPI_T_event_registration, MPI_Info);
    PMPI_T_event_register_callback = MPI_T_event_register_callback(MPI_T_event_registration, MPI_T_cb_safety, MPI_Info, *mut c_void, MPI_T_event_cb_function);
    PMPI_T_event_callback_get_info = MPI_T_event_callback_get_info(MPI_T_event_registration, MPI_T_cb_safety, *mut MPI_Info);
    PMPI_T_event_callback_set_info = MPI_T_event_callback_set_info(MPI_T_event_registration, MPI_T_cb_safety, MPI_Info);
    PMPI_T_event_set_dropped_handler = MPI_T_event_set_dropped_handler(MPI_T_event_registration, MPI_T_event_dropped_cb_function);
    PMPI_T_event_read = MPI_T_event_read(MPI_T_event_instance, c_int, *mut c_void);
    PMPI_T_event_copy = MPI_T_event_copy(MPI_T_event_instance, *mut c_void);
    PMPI_T_event_get_timestamp = MPI_T_event_get_timestamp(MPI_T_event_instance, *mut MPI_Count);
    PMPI_T_event_get_source = MPI_T_event_get_source(MPI_T_event_instance, *mut c_int);
}
