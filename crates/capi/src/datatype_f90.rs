//! MPI_Type_create_f90_integer/real/complex: the Fortran 90 parameterized
//! types, by decimal range and precision.
//!
//! Each returns the smallest Fortran kind (`INTEGER1..16`, `REAL4/8/16`,
//! `COMPLEX8/16/32`) whose range and precision suffice, as a handle whose
//! envelope says `MPI_COMBINER_F90_*` with the requested (p, r). The
//! standard calls these predefined: the same arguments give the same
//! handle every time, and they cannot be freed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{builtin_info, builtin_layout, commit, register, Contents, TypeObject};
use crate::global::entry;

/// (decimal exponent range, decimal precision, type) of each kind, smallest
/// first (gfortran's kinds on x86-64; INTEGER16 is not a resmpi type).
const INTEGER_KINDS: [(c_int, c_int, MPI_Datatype); 4] = [
    (2, 0, MPI_INTEGER1),
    (4, 0, MPI_INTEGER2),
    (9, 0, MPI_INTEGER4),
    (18, 0, MPI_INTEGER8),
];
const REAL_KINDS: [(c_int, c_int, MPI_Datatype); 3] = [
    (37, 6, MPI_REAL4),
    (307, 15, MPI_REAL8),
    (4931, 33, MPI_REAL16),
];
const COMPLEX_KINDS: [(c_int, c_int, MPI_Datatype); 3] = [
    (37, 6, MPI_COMPLEX8),
    (307, 15, MPI_COMPLEX16),
    (4931, 33, MPI_COMPLEX32),
];

/// (combiner, precision, range): what a parameterized type was asked for.
type Parameters = (c_int, c_int, c_int);

/// Handles already made.
static MADE: Mutex<Option<HashMap<Parameters, MPI_Datatype>>> = Mutex::new(None);

/// The handle for (`combiner`, `precision`, `range`) over `kinds`, made once.
fn parameterized(
    combiner: c_int,
    kinds: &[(c_int, c_int, MPI_Datatype)],
    precision: c_int,
    range: c_int,
) -> MpiResult<MPI_Datatype> {
    let wanted = |value: c_int| if value == MPI_UNDEFINED { 0 } else { value };
    if (precision < 0 && precision != MPI_UNDEFINED) || (range < 0 && range != MPI_UNDEFINED) {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!(
                "precision {precision} and range {range} must be non-negative or MPI_UNDEFINED"
            ),
        ));
    }
    let base = kinds
        .iter()
        .find(|(kind_range, kind_precision, _)| {
            *kind_range >= wanted(range) && *kind_precision >= wanted(precision)
        })
        .map(|(_, _, handle)| *handle)
        .ok_or_else(|| {
            MpiError::new(
                ErrorClass::Arg,
                format!("no Fortran kind has precision {precision} and range {range}"),
            )
        })?;
    let mut made = MADE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let made = made.get_or_insert_with(HashMap::new);
    if let Some(handle) = made.get(&(combiner, precision, range)) {
        return Ok(*handle);
    }
    let info = builtin_info(base).ok_or_else(|| {
        MpiError::new(
            ErrorClass::Intern,
            format!("Fortran kind {base:#x} is not a predefined type"),
        )
    })?;
    let integers = if combiner == MPI_COMBINER_F90_INTEGER {
        vec![range]
    } else {
        vec![precision, range]
    };
    let handle = register(Arc::new(TypeObject {
        layout: Arc::new(builtin_layout(info)),
        contents: Contents {
            combiner,
            integers,
            large_counts: vec![],
            addresses: vec![],
            datatypes: vec![],
        },
        raw_span: true,
    }));
    commit(handle)?;
    made.insert((combiner, precision, range), handle);
    Ok(handle)
}

/// Whether a combiner marks one of these predefined parameterized types.
pub fn is_parameterized(combiner: c_int) -> bool {
    matches!(
        combiner,
        MPI_COMBINER_F90_INTEGER | MPI_COMBINER_F90_REAL | MPI_COMBINER_F90_COMPLEX
    )
}

unsafe fn write_type(
    name: &str,
    newtype: *mut MPI_Datatype,
    make: impl FnOnce() -> MpiResult<MPI_Datatype>,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, _| {
        if newtype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "newtype pointer is NULL"));
        }
        let handle = make()?;
        // SAFETY: checked non-null.
        unsafe { *newtype = handle };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_f90_integer(
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's pointer, checked inside.
    unsafe {
        write_type("MPI_Type_create_f90_integer", newtype, || {
            parameterized(MPI_COMBINER_F90_INTEGER, &INTEGER_KINDS, MPI_UNDEFINED, r)
        })
    }
}
const _: fn_types::MPI_Type_create_f90_integer = PMPI_Type_create_f90_integer;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_f90_real(
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's pointer, checked inside.
    unsafe {
        write_type("MPI_Type_create_f90_real", newtype, || {
            parameterized(MPI_COMBINER_F90_REAL, &REAL_KINDS, p, r)
        })
    }
}
const _: fn_types::MPI_Type_create_f90_real = PMPI_Type_create_f90_real;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_f90_complex(
    p: c_int,
    r: c_int,
    newtype: *mut MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's pointer, checked inside.
    unsafe {
        write_type("MPI_Type_create_f90_complex", newtype, || {
            parameterized(MPI_COMBINER_F90_COMPLEX, &COMPLEX_KINDS, p, r)
        })
    }
}
const _: fn_types::MPI_Type_create_f90_complex = PMPI_Type_create_f90_complex;
