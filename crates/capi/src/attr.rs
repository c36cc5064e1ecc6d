//! Attribute caching on communicators: keyvals, set/get/delete, the copy
//! callbacks run by MPI_Comm_dup and the delete callbacks run by
//! MPI_Comm_free, MPI_Comm_delete_attr and the replacement of a value.
//! The predefined attributes (MPI_TAG_UB, ...) are answered for every
//! communicator and cannot be set or deleted.
//!
//! Callbacks are application code that may call MPI, so they never run
//! with the library lock held: each operation reads what it needs under
//! the lock, runs the callbacks, then stores the outcome under the lock.

use std::sync::OnceLock;

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::global::{entry, lock, raise_error, with_mpi};
use crate::handles::{comm_handle, keyval_handle, keyval_index};
use crate::objects::Keyval;
use crate::p2p::comm_of;

/// Storage the predefined attribute pointers point to (they must outlive the call).
struct PredefinedAttributes {
    tag_ub: c_int,
    host: c_int,
    io: c_int,
    wtime_is_global: c_int,
    universe_size: c_int,
    appnum: c_int,
    fault_tolerance: c_int,
}

/// MPI_LASTUSEDCODE's value, refreshed at every get; the attribute points here.
static LAST_USED_CODE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

static PREDEFINED: OnceLock<PredefinedAttributes> = OnceLock::new();

fn is_predefined(keyval: c_int) -> bool {
    matches!(
        keyval,
        MPI_TAG_UB | MPI_HOST | MPI_IO | MPI_WTIME_IS_GLOBAL | MPI_UNIVERSE_SIZE | MPI_APPNUM
    ) || keyval == MPI_LASTUSEDCODE
        || keyval == MPIX_FT
}

/// An error code returned by an application callback, as an MpiError.
fn callback_error(what: &str, keyval: c_int, code: c_int) -> MpiError {
    MpiError::new(
        ErrorClass::from_i32(code).unwrap_or(ErrorClass::Other),
        format!("the {what} callback of keyval {keyval:#x} returned {code}"),
    )
}

/// Run `keyval`'s delete callback on `value` of object `handle` (a
/// communicator, or a datatype: both are ints with the same callback
/// signature).
pub(crate) fn run_delete(
    keyval_entry: &Keyval,
    handle: c_int,
    keyval: c_int,
    value: usize,
) -> MpiResult<()> {
    let Some(delete) = keyval_entry.delete else {
        return Ok(());
    };
    // SAFETY: an application callback registered with its keyval; the
    // library lock is not held.
    let code = unsafe {
        delete(
            handle,
            keyval,
            value as *mut c_void,
            keyval_entry.extra_state as *mut c_void,
        )
    };
    if code == MPI_SUCCESS {
        Ok(())
    } else {
        Err(callback_error("delete", keyval, code))
    }
}

/// The keyval entry of `keyval` whether or not it was freed (attributes
/// outlive the freeing of their keyval).
pub(crate) fn keyval_entry_any(keyval: c_int) -> Option<Keyval> {
    let index = keyval_index(keyval)?;
    lock().registry.objects.keyvals.get(index).copied()
}

/// MPI_Comm_dup's attribute step: run the copy callbacks of `old_index`'s
/// attributes and attach what they return to `new_index`.
pub fn copy_attributes(old_index: usize, new_index: usize) -> MpiResult<()> {
    let attributes = lock()
        .registry
        .objects
        .comm_attributes
        .get(&old_index)
        .cloned()
        .unwrap_or_default();
    let copied = run_copies(comm_handle(old_index), attributes)?;
    if !copied.is_empty() {
        lock()
            .registry
            .objects
            .comm_attributes
            .insert(new_index, copied);
    }
    Ok(())
}

/// The attributes a duplicate of object `handle` gets: what the copy
/// callbacks of its `attributes` return (those whose callback sets the
/// flag). Runs application code: call without the lock.
pub(crate) fn run_copies(
    handle: c_int,
    attributes: Vec<(c_int, usize)>,
) -> MpiResult<Vec<(c_int, usize)>> {
    let mut copied = Vec::new();
    for (keyval, value) in attributes {
        let Some(entry) = keyval_entry_any(keyval) else {
            continue;
        };
        let Some(copy) = entry.copy else {
            continue;
        };
        let mut out: *mut c_void = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: an application callback (or MPI_*_DUP_FN); the lock is not held.
        let code = unsafe {
            copy(
                handle,
                keyval,
                entry.extra_state as *mut c_void,
                value as *mut c_void,
                (&mut out as *mut *mut c_void).cast(),
                &mut flag,
            )
        };
        if code != MPI_SUCCESS {
            return Err(callback_error("copy", keyval, code));
        }
        if flag != 0 {
            copied.push((keyval, out as usize));
        }
    }
    Ok(copied)
}

/// Delete every attribute of communicator `comm_index`, running the delete
/// callbacks last set first (MPI-2.2 requires that order for MPI_COMM_SELF
/// at MPI_Finalize, so attributes can act as LIFO exit handlers). On a
/// failing callback the attributes not yet deleted stay attached.
pub fn delete_all_attributes(comm_index: usize) -> MpiResult<()> {
    loop {
        let next = lock()
            .registry
            .objects
            .comm_attributes
            .get(&comm_index)
            .and_then(|attributes| attributes.last().copied());
        let Some((keyval, value)) = next else {
            return Ok(());
        };
        if let Some(entry) = keyval_entry_any(keyval) {
            run_delete(&entry, comm_handle(comm_index), keyval, value)?;
        }
        let mut global = lock();
        if let Some(attributes) = global.registry.objects.comm_attributes.get_mut(&comm_index) {
            attributes.retain(|(other, _)| *other != keyval);
            if attributes.is_empty() {
                global.registry.objects.comm_attributes.remove(&comm_index);
            }
        }
    }
}

pub(crate) fn create_keyval(
    name: &str,
    copy: MPI_Comm_copy_attr_function,
    delete: MPI_Comm_delete_attr_function,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, registry| {
        if keyval.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "keyval pointer is NULL"));
        }
        let keyvals = &mut registry.objects.keyvals;
        keyvals.push(Keyval {
            copy,
            delete,
            extra_state: extra_state as usize,
            freed: false,
        });
        // SAFETY: checked non-null.
        unsafe { *keyval = keyval_handle(keyvals.len() - 1) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_keyval(
    comm_copy_attr_fn: MPI_Comm_copy_attr_function,
    comm_delete_attr_fn: MPI_Comm_delete_attr_function,
    comm_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    create_keyval(
        "MPI_Comm_create_keyval",
        comm_copy_attr_fn,
        comm_delete_attr_fn,
        comm_keyval,
        extra_state,
    )
}
const _: fn_types::MPI_Comm_create_keyval = PMPI_Comm_create_keyval;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Keyval_create(
    copy_fn: MPI_Copy_function,
    delete_fn: MPI_Delete_function,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    create_keyval("MPI_Keyval_create", copy_fn, delete_fn, keyval, extra_state)
}
const _: fn_types::MPI_Keyval_create = PMPI_Keyval_create;

pub(crate) fn free_keyval(name: &str, keyval: *mut c_int) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, registry| {
        if keyval.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "keyval pointer is NULL"));
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *keyval };
        if registry.objects.keyval(handle)?.freed {
            return Err(MpiError::new(
                ErrorClass::Keyval,
                format!("keyval {handle:#x} is already freed"),
            ));
        }
        let index = keyval_index(handle).expect("a valid user keyval");
        registry.objects.keyvals[index].freed = true;
        // SAFETY: checked non-null.
        unsafe { *keyval = MPI_KEYVAL_INVALID };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_free_keyval(comm_keyval: *mut c_int) -> c_int {
    free_keyval("MPI_Comm_free_keyval", comm_keyval)
}
const _: fn_types::MPI_Comm_free_keyval = PMPI_Comm_free_keyval;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Keyval_free(keyval: *mut c_int) -> c_int {
    free_keyval("MPI_Keyval_free", keyval)
}
const _: fn_types::MPI_Keyval_free = PMPI_Keyval_free;

/// Remove attribute `keyval` of `comm`, returning its value if it was set.
fn take_attribute(
    name: &str,
    comm: MPI_Comm,
    keyval: c_int,
) -> Result<(usize, Keyval, Option<usize>), c_int> {
    with_mpi(name, comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        let entry = registry.objects.keyval(keyval)?;
        let attributes = registry.objects.comm_attributes.entry(index).or_default();
        let old = attributes
            .iter()
            .position(|(other, _)| *other == keyval)
            .map(|position| attributes.remove(position).1);
        Ok((index, entry, old))
    })
}

fn put_attribute(index: usize, keyval: c_int, value: usize) {
    let mut global = lock();
    let attributes = global
        .registry
        .objects
        .comm_attributes
        .entry(index)
        .or_default();
    attributes.retain(|(other, _)| *other != keyval);
    attributes.push((keyval, value));
}

fn set_attribute(name: &str, comm: MPI_Comm, keyval: c_int, value: *mut c_void) -> c_int {
    let (index, entry, old) = match take_attribute(name, comm, keyval) {
        Ok(found) => found,
        Err(code) => return code,
    };
    if let Some(old) = old {
        if let Err(error) = run_delete(&entry, comm_handle(index), keyval, old) {
            put_attribute(index, keyval, old);
            return raise_error(name, comm, error);
        }
    }
    put_attribute(index, keyval, value as usize);
    MPI_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    set_attribute("MPI_Comm_set_attr", comm, comm_keyval, attribute_val)
}
const _: fn_types::MPI_Comm_set_attr = PMPI_Comm_set_attr;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Attr_put(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    set_attribute("MPI_Attr_put", comm, keyval, attribute_val)
}
const _: fn_types::MPI_Attr_put = PMPI_Attr_put;

fn delete_attribute(name: &str, comm: MPI_Comm, keyval: c_int) -> c_int {
    let (index, entry, old) = match take_attribute(name, comm, keyval) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let Some(old) = old else {
        return raise_error(
            name,
            comm,
            MpiError::new(
                ErrorClass::Keyval,
                format!("no attribute with keyval {keyval:#x} is set on this communicator"),
            ),
        );
    };
    if let Err(error) = run_delete(&entry, comm_handle(index), keyval, old) {
        put_attribute(index, keyval, old);
        return raise_error(name, comm, error);
    }
    MPI_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_delete_attr(comm: MPI_Comm, comm_keyval: c_int) -> c_int {
    delete_attribute("MPI_Comm_delete_attr", comm, comm_keyval)
}
const _: fn_types::MPI_Comm_delete_attr = PMPI_Comm_delete_attr;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Attr_delete(comm: MPI_Comm, keyval: c_int) -> c_int {
    delete_attribute("MPI_Attr_delete", comm, keyval)
}
const _: fn_types::MPI_Attr_delete = PMPI_Attr_delete;

fn get_attribute(
    name: &str,
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    entry(name, comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        if flag.is_null() || attribute_val.is_null() {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "attribute or flag pointer is NULL",
            ));
        }
        let value: Option<usize> = if is_predefined(keyval) {
            let universe = mpi.universe_size() as c_int;
            let fault_tolerance = c_int::from(mpi.engine.failures_are_events);
            let predefined = PREDEFINED.get_or_init(|| PredefinedAttributes {
                tag_ub: resmpi_core::TAG_UB,
                host: MPI_PROC_NULL,
                io: MPI_ANY_SOURCE,
                wtime_is_global: 0,
                universe_size: universe,
                appnum: 0,
                fault_tolerance,
            });
            match keyval {
                MPI_TAG_UB => Some(&predefined.tag_ub),
                MPI_HOST => Some(&predefined.host),
                MPI_IO => Some(&predefined.io),
                MPI_WTIME_IS_GLOBAL => Some(&predefined.wtime_is_global),
                MPI_UNIVERSE_SIZE => Some(&predefined.universe_size),
                MPI_APPNUM => Some(&predefined.appnum),
                MPIX_FT => Some(&predefined.fault_tolerance),
                _ => None,
            }
            .map(|value| value as *const c_int as usize)
            .or_else(|| {
                (keyval == MPI_LASTUSEDCODE).then(|| {
                    LAST_USED_CODE.store(
                        crate::error_codes::last_used_code(),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                    LAST_USED_CODE.as_ptr() as usize
                })
            })
        } else {
            registry.objects.keyval(keyval)?;
            registry
                .objects
                .comm_attributes
                .get(&index)
                .and_then(|attributes| attributes.iter().find(|(other, _)| *other == keyval))
                .map(|(_, value)| *value)
        };
        // SAFETY: checked non-null; MPI passes the address of a `void *` variable.
        unsafe {
            *flag = value.is_some() as c_int;
            if let Some(value) = value {
                *(attribute_val as *mut usize) = value;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    get_attribute("MPI_Comm_get_attr", comm, comm_keyval, attribute_val, flag)
}
const _: fn_types::MPI_Comm_get_attr = PMPI_Comm_get_attr;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Attr_get(
    comm: MPI_Comm,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    get_attribute("MPI_Attr_get", comm, keyval, attribute_val, flag)
}
const _: fn_types::MPI_Attr_get = PMPI_Attr_get;
