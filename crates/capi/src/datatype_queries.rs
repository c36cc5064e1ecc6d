//! Datatype queries and lifetime: commit, free, size, extents, envelope and
//! contents, and the address helpers programs use to build struct types.

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{commit, free, layout_of, resolve, Resolved};
use crate::datatype_constructors::constituent_handles;
use crate::global::{entry, local_entry};
use crate::large_count::{int_and_large_count, narrow, Count};

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_commit(datatype: *mut MPI_Datatype) -> c_int {
    entry("MPI_Type_commit", MPI_COMM_WORLD, |_, _| {
        if datatype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "datatype pointer is NULL"));
        }
        // SAFETY: checked non-null.
        commit(unsafe { *datatype })
    })
}
const _: fn_types::MPI_Type_commit = PMPI_Type_commit;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_free(datatype: *mut MPI_Datatype) -> c_int {
    if !datatype.is_null() {
        // SAFETY: checked non-null. Delete callbacks are application code:
        // they run before the state is taken.
        let handle = unsafe { *datatype };
        if matches!(resolve(handle), Ok(Resolved::Derived(..))) {
            if let Err(error) = crate::type_attr::delete_all_attributes(handle) {
                return crate::global::raise_error("MPI_Type_free", MPI_COMM_WORLD, error);
            }
        }
    }
    entry("MPI_Type_free", MPI_COMM_WORLD, |_, registry| {
        if datatype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "datatype pointer is NULL"));
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *datatype };
        free(handle)?;
        // The handle will be reused: a new type must not inherit the name.
        registry.objects.type_names.remove(&handle);
        // SAFETY: checked non-null.
        unsafe { *datatype = MPI_DATATYPE_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Type_free = PMPI_Type_free;

/// Run a query on `datatype`'s layout and write what it returns through `out`.
fn query<T>(
    name: &str,
    datatype: MPI_Datatype,
    out: *mut T,
    value: impl FnOnce(&resmpi_core::datatype::Datatype) -> T,
) -> c_int {
    local_entry(name, || {
        let layout = layout_of(datatype)?;
        if out.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "output pointer is NULL"));
        }
        // SAFETY: checked non-null; the caller's output variable.
        unsafe { *out = value(&layout) };
        Ok(())
    })
}

/// Write two values (lb and extent) through two output pointers.
fn query_pair<T>(
    name: &str,
    datatype: MPI_Datatype,
    first: *mut T,
    second: *mut T,
    values: impl FnOnce(&resmpi_core::datatype::Datatype) -> (T, T),
) -> c_int {
    local_entry(name, || {
        let layout = layout_of(datatype)?;
        if first.is_null() || second.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "output pointer is NULL"));
        }
        let (a, b) = values(&layout);
        // SAFETY: checked non-null; the caller's output variables.
        unsafe {
            *first = a;
            *second = b;
        }
        Ok(())
    })
}

/// MPI_Type_size (int or `_c`): the int form answers MPI_UNDEFINED for a
/// size that does not fit an int, as the standard says.
unsafe fn type_size<C: Count>(name: &str, datatype: MPI_Datatype, size: *mut C) -> c_int {
    query(name, datatype, size, |layout| {
        let undefined = C::try_from(MPI_UNDEFINED as MPI_Count).unwrap_or_else(|_| unreachable!());
        C::try_from(layout.size_bytes as MPI_Count).unwrap_or(undefined)
    })
}
int_and_large_count!(PMPI_Type_size = MPI_Type_size, PMPI_Type_size_c = MPI_Type_size_c, type_size, (
    datatype: MPI_Datatype, size: *mut Count));

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_size_x(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
    query("MPI_Type_size_x", datatype, size, |layout| {
        layout.size_bytes as MPI_Count
    })
}
const _: fn_types::MPI_Type_size_x = PMPI_Type_size_x;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_extent(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
) -> c_int {
    query_pair("MPI_Type_get_extent", datatype, lb, extent, |layout| {
        (
            layout.lb_bytes as MPI_Aint,
            layout.extent_bytes() as MPI_Aint,
        )
    })
}
const _: fn_types::MPI_Type_get_extent = PMPI_Type_get_extent;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_extent_x(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    query_pair("MPI_Type_get_extent_x", datatype, lb, extent, |layout| {
        (
            layout.lb_bytes as MPI_Count,
            layout.extent_bytes() as MPI_Count,
        )
    })
}
const _: fn_types::MPI_Type_get_extent_x = PMPI_Type_get_extent_x;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_extent_c(
    datatype: MPI_Datatype,
    lb: *mut MPI_Count,
    extent: *mut MPI_Count,
) -> c_int {
    // SAFETY: the caller's arguments (MPI_Count and MPI_Aint are one type here).
    unsafe { PMPI_Type_get_extent(datatype, lb, extent) }
}
const _: fn_types::MPI_Type_get_extent_c = PMPI_Type_get_extent_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_true_extent(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Aint,
    true_extent: *mut MPI_Aint,
) -> c_int {
    query_pair(
        "MPI_Type_get_true_extent",
        datatype,
        true_lb,
        true_extent,
        |layout| {
            (
                layout.true_lb_bytes as MPI_Aint,
                layout.true_extent_bytes() as MPI_Aint,
            )
        },
    )
}
const _: fn_types::MPI_Type_get_true_extent = PMPI_Type_get_true_extent;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_true_extent_x(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    query_pair(
        "MPI_Type_get_true_extent_x",
        datatype,
        true_lb,
        true_extent,
        |layout| {
            (
                layout.true_lb_bytes as MPI_Count,
                layout.true_extent_bytes() as MPI_Count,
            )
        },
    )
}
const _: fn_types::MPI_Type_get_true_extent_x = PMPI_Type_get_true_extent_x;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_true_extent_c(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    // SAFETY: the caller's arguments (MPI_Count and MPI_Aint are one type here).
    unsafe { PMPI_Type_get_true_extent(datatype, true_lb, true_extent) }
}
const _: fn_types::MPI_Type_get_true_extent_c = PMPI_Type_get_true_extent_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_extent(datatype: MPI_Datatype, extent: *mut MPI_Aint) -> c_int {
    query("MPI_Type_extent", datatype, extent, |layout| {
        layout.extent_bytes() as MPI_Aint
    })
}
const _: fn_types::MPI_Type_extent = PMPI_Type_extent;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_lb(
    datatype: MPI_Datatype,
    displacement: *mut MPI_Aint,
) -> c_int {
    query("MPI_Type_lb", datatype, displacement, |layout| {
        layout.lb_bytes as MPI_Aint
    })
}
const _: fn_types::MPI_Type_lb = PMPI_Type_lb;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_ub(
    datatype: MPI_Datatype,
    displacement: *mut MPI_Aint,
) -> c_int {
    query("MPI_Type_ub", datatype, displacement, |layout| {
        layout.ub_bytes as MPI_Aint
    })
}
const _: fn_types::MPI_Type_ub = PMPI_Type_ub;

/// MPI_Type_get_envelope (int) and MPI_Type_get_envelope_c: the classic
/// form has no large counts, so it fails (MPI_ERR_TYPE) on a type made by
/// a large-count constructor, whose counts only the `_c` form gives back.
unsafe fn type_get_envelope<C: Count>(
    name: &str,
    datatype: MPI_Datatype,
    num_integers: *mut C,
    num_addresses: *mut C,
    num_large_counts: *mut C,
    num_datatypes: *mut C,
    combiner: *mut c_int,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, _| {
        let counts = match resolve(datatype)? {
            Resolved::Predefined(_) => (0, 0, 0, 0, MPI_COMBINER_NAMED),
            Resolved::Derived(object, _) => {
                let contents = &object.contents;
                if !C::LARGE && !contents.large_counts.is_empty() {
                    return Err(MpiError::new(
                        ErrorClass::Type,
                        format!(
                            "the datatype was made by a large-count constructor: its \
                             {} large counts need {name}_c",
                            contents.large_counts.len()
                        ),
                    ));
                }
                (
                    contents.integers.len(),
                    contents.addresses.len(),
                    contents.large_counts.len(),
                    contents.datatypes.len(),
                    contents.combiner,
                )
            }
        };
        if num_integers.is_null()
            || num_addresses.is_null()
            || (C::LARGE && num_large_counts.is_null())
            || num_datatypes.is_null()
            || combiner.is_null()
        {
            return Err(MpiError::new(ErrorClass::Arg, "output pointer is NULL"));
        }
        let integers: C = narrow(name, "number of integers", counts.0 as MPI_Count)?;
        let addresses: C = narrow(name, "number of addresses", counts.1 as MPI_Count)?;
        let large_counts: C = narrow(name, "number of large counts", counts.2 as MPI_Count)?;
        let datatypes: C = narrow(name, "number of datatypes", counts.3 as MPI_Count)?;
        // SAFETY: checked non-null; the caller's output variables.
        unsafe {
            *num_integers = integers;
            *num_addresses = addresses;
            if C::LARGE {
                *num_large_counts = large_counts;
            }
            *num_datatypes = datatypes;
            *combiner = counts.4;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_envelope(
    datatype: MPI_Datatype,
    num_integers: *mut c_int,
    num_addresses: *mut c_int,
    num_datatypes: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    // SAFETY: the caller's arguments; the classic form has no large counts.
    unsafe {
        type_get_envelope(
            "MPI_Type_get_envelope",
            datatype,
            num_integers,
            num_addresses,
            std::ptr::null_mut(),
            num_datatypes,
            combiner,
        )
    }
}
const _: fn_types::MPI_Type_get_envelope = PMPI_Type_get_envelope;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_envelope_c(
    datatype: MPI_Datatype,
    num_integers: *mut MPI_Count,
    num_addresses: *mut MPI_Count,
    num_large_counts: *mut MPI_Count,
    num_datatypes: *mut MPI_Count,
    combiner: *mut c_int,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        type_get_envelope(
            "MPI_Type_get_envelope_c",
            datatype,
            num_integers,
            num_addresses,
            num_large_counts,
            num_datatypes,
            combiner,
        )
    }
}
const _: fn_types::MPI_Type_get_envelope_c = PMPI_Type_get_envelope_c;

/// Copy `values` into the caller's array of `capacity` entries.
unsafe fn fill<T: Copy>(
    target: *mut T,
    capacity: impl Into<MPI_Count>,
    values: &[T],
    what: &str,
) -> MpiResult<()> {
    let capacity: MPI_Count = capacity.into();
    if capacity < values.len() as MPI_Count {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!(
                "{what}: room for {capacity}, {} needed (see MPI_Type_get_envelope)",
                values.len()
            ),
        ));
    }
    if values.is_empty() {
        return Ok(());
    }
    if target.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, format!("{what} is NULL")));
    }
    // SAFETY: the caller's array holds `capacity` >= values.len() entries.
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), target, values.len()) };
    Ok(())
}

/// MPI_Type_get_contents (int) and MPI_Type_get_contents_c (with the
/// large counts of a type made by a `_c` constructor).
unsafe fn type_get_contents<C: Count>(
    name: &str,
    datatype: MPI_Datatype,
    max_integers: C,
    max_addresses: C,
    max_large_counts: C,
    max_datatypes: C,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_large_counts: *mut MPI_Count,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, _| {
        let Resolved::Derived(object, _) = resolve(datatype)? else {
            return Err(MpiError::new(
                ErrorClass::Type,
                "MPI_Type_get_contents on a predefined datatype (combiner MPI_COMBINER_NAMED)",
            ));
        };
        let contents = &object.contents;
        if !C::LARGE && !contents.large_counts.is_empty() {
            return Err(MpiError::new(
                ErrorClass::Type,
                format!("the datatype was made by a large-count constructor: use {name}_c"),
            ));
        }
        if max_datatypes.into() < contents.datatypes.len() as MPI_Count {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "array_of_datatypes is too short",
            ));
        }
        // SAFETY: the caller's arrays of the given capacities.
        unsafe {
            fill(
                array_of_integers,
                max_integers,
                &contents.integers,
                "array_of_integers",
            )?;
            fill(
                array_of_addresses,
                max_addresses,
                &contents.addresses,
                "array_of_addresses",
            )?;
            fill(
                array_of_large_counts,
                max_large_counts,
                &contents.large_counts,
                "array_of_large_counts",
            )?;
            // Only now hand out new handles, so an error above leaks none.
            let handles = constituent_handles(&contents.datatypes);
            fill(
                array_of_datatypes,
                max_datatypes,
                &handles,
                "array_of_datatypes",
            )?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_contents(
    datatype: MPI_Datatype,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's arguments; the classic form has no large counts.
    unsafe {
        type_get_contents(
            "MPI_Type_get_contents",
            datatype,
            max_integers,
            max_addresses,
            0,
            max_datatypes,
            array_of_integers,
            array_of_addresses,
            std::ptr::null_mut(),
            array_of_datatypes,
        )
    }
}
const _: fn_types::MPI_Type_get_contents = PMPI_Type_get_contents;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_contents_c(
    datatype: MPI_Datatype,
    max_integers: MPI_Count,
    max_addresses: MPI_Count,
    max_large_counts: MPI_Count,
    max_datatypes: MPI_Count,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_large_counts: *mut MPI_Count,
    array_of_datatypes: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        type_get_contents(
            "MPI_Type_get_contents_c",
            datatype,
            max_integers,
            max_addresses,
            max_large_counts,
            max_datatypes,
            array_of_integers,
            array_of_addresses,
            array_of_large_counts,
            array_of_datatypes,
        )
    }
}
const _: fn_types::MPI_Type_get_contents_c = PMPI_Type_get_contents_c;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_address(
    location: *const c_void,
    address: *mut MPI_Aint,
) -> c_int {
    entry("MPI_Get_address", MPI_COMM_WORLD, |_, _| {
        if address.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "address pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *address = location as MPI_Aint };
        Ok(())
    })
}
const _: fn_types::MPI_Get_address = PMPI_Get_address;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Address(location: *mut c_void, address: *mut MPI_Aint) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe { PMPI_Get_address(location, address) }
}
const _: fn_types::MPI_Address = PMPI_Address;

#[no_mangle]
pub extern "C" fn PMPI_Aint_add(base: MPI_Aint, displacement: MPI_Aint) -> MPI_Aint {
    base.wrapping_add(displacement)
}
const _: fn_types::MPI_Aint_add = PMPI_Aint_add;

#[no_mangle]
pub extern "C" fn PMPI_Aint_diff(address_1: MPI_Aint, address_2: MPI_Aint) -> MPI_Aint {
    address_1.wrapping_sub(address_2)
}
const _: fn_types::MPI_Aint_diff = PMPI_Aint_diff;

/// MPI_Type_match_size: the first predefined type of `typeclass` whose size
/// is `size`, searched in MPICH's order (Fortran sized types, Fortran
/// default types, then C types), so both libraries return the same handle.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_match_size(
    typeclass: c_int,
    size: c_int,
    datatype: *mut MPI_Datatype,
) -> c_int {
    local_entry("MPI_Type_match_size", || {
        if datatype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "datatype pointer is NULL"));
        }
        let candidates: &[MPI_Datatype] = match typeclass {
            MPI_TYPECLASS_REAL => &[
                MPI_REAL4,
                MPI_REAL8,
                MPI_REAL16,
                MPI_REAL,
                MPI_DOUBLE_PRECISION,
                MPI_FLOAT,
                MPI_DOUBLE,
                MPI_LONG_DOUBLE,
            ],
            MPI_TYPECLASS_INTEGER => &[
                MPI_INTEGER1,
                MPI_INTEGER2,
                MPI_INTEGER4,
                MPI_INTEGER8,
                MPI_INTEGER16,
                MPI_INTEGER,
                MPI_CHAR,
                MPI_SHORT,
                MPI_INT,
                MPI_LONG,
                MPI_LONG_LONG,
            ],
            MPI_TYPECLASS_COMPLEX => &[
                MPI_COMPLEX8,
                MPI_COMPLEX16,
                MPI_COMPLEX32,
                MPI_COMPLEX,
                MPI_DOUBLE_COMPLEX,
                MPI_C_COMPLEX,
                MPI_C_DOUBLE_COMPLEX,
                MPI_C_LONG_DOUBLE_COMPLEX,
            ],
            _ => {
                return Err(MpiError::new(
                    ErrorClass::Arg,
                    format!("{typeclass} is not MPI_TYPECLASS_REAL, _INTEGER or _COMPLEX"),
                ))
            }
        };
        let found = candidates.iter().copied().find(|candidate| {
            crate::datatype::builtin_info(*candidate)
                .is_some_and(|info| size >= 0 && info.size_bytes == size as usize)
        });
        let Some(found) = found else {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("no predefined type of class {typeclass} has {size} bytes"),
            ));
        };
        // SAFETY: checked non-null; the caller's output variable.
        unsafe { *datatype = found };
        Ok(())
    })
}
const _: fn_types::MPI_Type_match_size = PMPI_Type_match_size;
