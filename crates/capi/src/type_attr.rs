//! Attribute caching on datatypes: `MPI_Type_create_keyval`, set/get/delete,
//! the copy callbacks `MPI_Type_dup` runs and the delete callbacks run by
//! `MPI_Type_free`, `MPI_Type_delete_attr` and the replacement of a value.
//!
//! Why beside `attr.rs` and not in it: the keyvals, the callbacks and their
//! signatures are the communicators' (an `MPI_Datatype` and an `MPI_Comm`
//! are both ints in MPICH's ABI), so this module reuses `attr.rs`'s keyval
//! table and callback runners and only keeps its own table, keyed by
//! datatype handle. Predefined datatypes take attributes too. As there,
//! callbacks are application code: they run without the library lock.

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::attr::{create_keyval, free_keyval, keyval_entry_any, run_copies, run_delete};
use crate::global::{entry, lock, raise_error};

/// `datatype` is a datatype handle (predefined or derived, committed or not).
fn check_datatype(datatype: MPI_Datatype) -> MpiResult<()> {
    crate::datatype::resolve(datatype).map(|_| ())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_keyval(
    type_copy_attr_fn: MPI_Type_copy_attr_function,
    type_delete_attr_fn: MPI_Type_delete_attr_function,
    type_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    create_keyval(
        "MPI_Type_create_keyval",
        type_copy_attr_fn,
        type_delete_attr_fn,
        type_keyval,
        extra_state,
    )
}
const _: fn_types::MPI_Type_create_keyval = PMPI_Type_create_keyval;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_free_keyval(type_keyval: *mut c_int) -> c_int {
    free_keyval("MPI_Type_free_keyval", type_keyval)
}
const _: fn_types::MPI_Type_free_keyval = PMPI_Type_free_keyval;

/// Remove attribute `keyval` of `datatype` (checking both), returning its
/// keyval entry and the value it had, if any.
fn take_attribute(
    name: &str,
    datatype: MPI_Datatype,
    keyval: c_int,
) -> Result<(crate::objects::Keyval, Option<usize>), c_int> {
    let mut found = None;
    let code = entry(name, MPI_COMM_WORLD, |_, registry| {
        check_datatype(datatype)?;
        let keyval_entry = registry.objects.keyval(keyval)?;
        let attributes = registry
            .objects
            .type_attributes
            .entry(datatype)
            .or_default();
        let old = attributes
            .iter()
            .position(|(other, _)| *other == keyval)
            .map(|position| attributes.remove(position).1);
        found = Some((keyval_entry, old));
        Ok(())
    });
    found.ok_or(code)
}

fn put_attribute(datatype: MPI_Datatype, keyval: c_int, value: usize) {
    let mut global = lock();
    let attributes = global
        .registry
        .objects
        .type_attributes
        .entry(datatype)
        .or_default();
    attributes.retain(|(other, _)| *other != keyval);
    attributes.push((keyval, value));
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_set_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
) -> c_int {
    const NAME: &str = "MPI_Type_set_attr";
    let (keyval_entry, old) = match take_attribute(NAME, datatype, type_keyval) {
        Ok(found) => found,
        Err(code) => return code,
    };
    if let Some(old) = old {
        if let Err(error) = run_delete(&keyval_entry, datatype, type_keyval, old) {
            put_attribute(datatype, type_keyval, old);
            return raise_error(NAME, MPI_COMM_WORLD, error);
        }
    }
    put_attribute(datatype, type_keyval, attribute_val as usize);
    MPI_SUCCESS
}
const _: fn_types::MPI_Type_set_attr = PMPI_Type_set_attr;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    entry("MPI_Type_get_attr", MPI_COMM_WORLD, |_, registry| {
        check_datatype(datatype)?;
        registry.objects.keyval(type_keyval)?;
        if flag.is_null() || attribute_val.is_null() {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "attribute or flag pointer is NULL",
            ));
        }
        let value = registry
            .objects
            .type_attributes
            .get(&datatype)
            .and_then(|attributes| attributes.iter().find(|(other, _)| *other == type_keyval))
            .map(|(_, value)| *value);
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
const _: fn_types::MPI_Type_get_attr = PMPI_Type_get_attr;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_delete_attr(
    datatype: MPI_Datatype,
    type_keyval: c_int,
) -> c_int {
    const NAME: &str = "MPI_Type_delete_attr";
    let (keyval_entry, old) = match take_attribute(NAME, datatype, type_keyval) {
        Ok(found) => found,
        Err(code) => return code,
    };
    // Deleting an attribute that is not set does nothing, as in MPICH
    // (whose datatypes are the ABI this library keeps).
    let Some(old) = old else {
        return MPI_SUCCESS;
    };
    if let Err(error) = run_delete(&keyval_entry, datatype, type_keyval, old) {
        put_attribute(datatype, type_keyval, old);
        return raise_error(NAME, MPI_COMM_WORLD, error);
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Type_delete_attr = PMPI_Type_delete_attr;

/// `MPI_Type_free`'s attribute step, before the type goes: run the delete
/// callbacks of `datatype`'s attributes, last set first. On a failing
/// callback the attributes not yet deleted stay attached (and the type is
/// not freed).
pub(crate) fn delete_all_attributes(datatype: MPI_Datatype) -> MpiResult<()> {
    loop {
        let next = lock()
            .registry
            .objects
            .type_attributes
            .get(&datatype)
            .and_then(|attributes| attributes.last().copied());
        let Some((keyval, value)) = next else {
            lock().registry.objects.type_attributes.remove(&datatype);
            return Ok(());
        };
        if let Some(keyval_entry) = keyval_entry_any(keyval) {
            run_delete(&keyval_entry, datatype, keyval, value)?;
        }
        if let Some(attributes) = lock().registry.objects.type_attributes.get_mut(&datatype) {
            attributes.retain(|(other, _)| *other != keyval);
        }
    }
}

/// `MPI_Type_dup`'s attribute step: run the copy callbacks of `old`'s
/// attributes and attach what they return to `new`.
pub(crate) fn copy_attributes(old: MPI_Datatype, new: MPI_Datatype) -> MpiResult<()> {
    let attributes = lock()
        .registry
        .objects
        .type_attributes
        .get(&old)
        .cloned()
        .unwrap_or_default();
    if attributes.is_empty() {
        return Ok(());
    }
    let copied = run_copies(old, attributes)?;
    lock().registry.objects.type_attributes.insert(new, copied);
    Ok(())
}
