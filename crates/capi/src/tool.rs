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

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_cvar_get_info(
    _cvar_index: c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
    _verbosity: *mut c_int,
    _datatype: *mut MPI_Datatype,
    _enumtype: *mut MPI_T_enum,
    _desc: *mut c_char,
    _desc_len: *mut c_int,
    _bind: *mut c_int,
    _scope: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_cvar_get_info = PMPI_T_cvar_get_info;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_cvar_handle_alloc(
    _cvar_index: c_int,
    _obj_handle: *mut c_void,
    _handle: *mut MPI_T_cvar_handle,
    _count: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_cvar_handle_alloc = PMPI_T_cvar_handle_alloc;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_pvar_get_info(
    _pvar_index: c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
    _verbosity: *mut c_int,
    _var_class: *mut c_int,
    _datatype: *mut MPI_Datatype,
    _enumtype: *mut MPI_T_enum,
    _desc: *mut c_char,
    _desc_len: *mut c_int,
    _bind: *mut c_int,
    _readonly: *mut c_int,
    _continuous: *mut c_int,
    _atomic: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_pvar_get_info = PMPI_T_pvar_get_info;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_category_get_info(
    _cat_index: c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
    _desc: *mut c_char,
    _desc_len: *mut c_int,
    _num_cvars: *mut c_int,
    _num_pvars: *mut c_int,
    _num_categories: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_category_get_info = PMPI_T_category_get_info;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_category_get_cvars(
    _cat_index: c_int,
    _len: c_int,
    _indices: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_category_get_cvars = PMPI_T_category_get_cvars;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_category_get_pvars(
    _cat_index: c_int,
    _len: c_int,
    _indices: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_category_get_pvars = PMPI_T_category_get_pvars;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_category_get_categories(
    _cat_index: c_int,
    _len: c_int,
    _indices: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_category_get_categories = PMPI_T_category_get_categories;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_category_get_num_events(
    _cat_index: c_int,
    _num_events: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_category_get_num_events = PMPI_T_category_get_num_events;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_category_get_events(
    _cat_index: c_int,
    _len: c_int,
    _indices: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_category_get_events = PMPI_T_category_get_events;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_get_info(
    _event_index: c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
    _verbosity: *mut c_int,
    _array_of_datatypes: *mut MPI_Datatype,
    _array_of_displacements: *mut MPI_Aint,
    _num_elements: *mut c_int,
    _enumtype: *mut MPI_T_enum,
    _info: *mut MPI_Info,
    _desc: *mut c_char,
    _desc_len: *mut c_int,
    _bind: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_event_get_info = PMPI_T_event_get_info;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_handle_alloc(
    _event_index: c_int,
    _obj_handle: *mut c_void,
    _info: MPI_Info,
    _event_registration: *mut MPI_T_event_registration,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_event_handle_alloc = PMPI_T_event_handle_alloc;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_source_get_info(
    _source_index: c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
    _desc: *mut c_char,
    _desc_len: *mut c_int,
    _ordering: *mut MPI_T_source_order,
    _ticks_per_second: *mut MPI_Count,
    _max_ticks: *mut MPI_Count,
    _info: *mut MPI_Info,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_source_get_info = PMPI_T_source_get_info;

/// No index names one (there are none).
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_source_get_timestamp(
    _source_index: c_int,
    _timestamp: *mut MPI_Count,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_INDEX)
}
const _: fn_types::MPI_T_source_get_timestamp = PMPI_T_source_get_timestamp;

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

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_cvar_handle_free(_handle: *mut MPI_T_cvar_handle) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_cvar_handle_free = PMPI_T_cvar_handle_free;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_cvar_read(_handle: MPI_T_cvar_handle, _buf: *mut c_void) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_cvar_read = PMPI_T_cvar_read;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_cvar_write(
    _handle: MPI_T_cvar_handle,
    _buf: *const c_void,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_cvar_write = PMPI_T_cvar_write;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_enum_get_info(
    _enumtype: MPI_T_enum,
    _num: *mut c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_enum_get_info = PMPI_T_enum_get_info;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_enum_get_item(
    _enumtype: MPI_T_enum,
    _indx: c_int,
    _value: *mut c_int,
    _name: *mut c_char,
    _name_len: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_enum_get_item = PMPI_T_enum_get_item;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_handle_free(
    _event_registration: MPI_T_event_registration,
    _user_data: *mut c_void,
    _free_cb_function: MPI_T_event_free_cb_function,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_handle_free = PMPI_T_event_handle_free;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_handle_get_info(
    _event_registration: MPI_T_event_registration,
    _info_used: *mut MPI_Info,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_handle_get_info = PMPI_T_event_handle_get_info;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_handle_set_info(
    _event_registration: MPI_T_event_registration,
    _info: MPI_Info,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_handle_set_info = PMPI_T_event_handle_set_info;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_register_callback(
    _event_registration: MPI_T_event_registration,
    _cb_safety: MPI_T_cb_safety,
    _info: MPI_Info,
    _user_data: *mut c_void,
    _event_cb_function: MPI_T_event_cb_function,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_register_callback = PMPI_T_event_register_callback;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_callback_get_info(
    _event_registration: MPI_T_event_registration,
    _cb_safety: MPI_T_cb_safety,
    _info_used: *mut MPI_Info,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_callback_get_info = PMPI_T_event_callback_get_info;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_callback_set_info(
    _event_registration: MPI_T_event_registration,
    _cb_safety: MPI_T_cb_safety,
    _info: MPI_Info,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_callback_set_info = PMPI_T_event_callback_set_info;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_set_dropped_handler(
    _event_registration: MPI_T_event_registration,
    _dropped_cb_function: MPI_T_event_dropped_cb_function,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_set_dropped_handler = PMPI_T_event_set_dropped_handler;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_read(
    _event_instance: MPI_T_event_instance,
    _element_index: c_int,
    _buffer: *mut c_void,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_read = PMPI_T_event_read;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_copy(
    _event_instance: MPI_T_event_instance,
    _buffer: *mut c_void,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_copy = PMPI_T_event_copy;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_get_timestamp(
    _event_instance: MPI_T_event_instance,
    _event_timestamp: *mut MPI_Count,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_get_timestamp = PMPI_T_event_get_timestamp;

/// No handle of this kind exists to be valid.
#[no_mangle]
pub unsafe extern "C" fn PMPI_T_event_get_source(
    _event_instance: MPI_T_event_instance,
    _source_index: *mut c_int,
) -> c_int {
    tool_entry(|| MPI_T_ERR_INVALID_HANDLE)
}
const _: fn_types::MPI_T_event_get_source = PMPI_T_event_get_source;

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
