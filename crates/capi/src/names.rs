//! Datatype names (MPI_Type_set_name / MPI_Type_get_name). Names live in
//! their own table keyed by handle, so the datatype module need not carry
//! them; a predefined type answers its MPI name until renamed.

use resmpi_core::{ErrorClass, MpiError};

use crate::abi::*;
use crate::global::{entry, with_mpi};
use crate::init::{c_text, write_string};

/// Every predefined datatype with its name; where MPICH gives two names
/// one handle, the first listed is the one reported.
const PREDEFINED_TYPE_NAMES: &[(MPI_Datatype, &str)] = &[
    (MPI_CHAR, "MPI_CHAR"),
    (MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR"),
    (MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR"),
    (MPI_BYTE, "MPI_BYTE"),
    (MPI_WCHAR, "MPI_WCHAR"),
    (MPI_SHORT, "MPI_SHORT"),
    (MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT"),
    (MPI_INT, "MPI_INT"),
    (MPI_UNSIGNED, "MPI_UNSIGNED"),
    (MPI_LONG, "MPI_LONG"),
    (MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG"),
    (MPI_FLOAT, "MPI_FLOAT"),
    (MPI_DOUBLE, "MPI_DOUBLE"),
    (MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE"),
    (MPI_LONG_LONG_INT, "MPI_LONG_LONG_INT"),
    (MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG"),
    (MPI_LONG_LONG, "MPI_LONG_LONG"),
    (MPI_PACKED, "MPI_PACKED"),
    (MPI_FLOAT_INT, "MPI_FLOAT_INT"),
    (MPI_DOUBLE_INT, "MPI_DOUBLE_INT"),
    (MPI_LONG_INT, "MPI_LONG_INT"),
    (MPI_SHORT_INT, "MPI_SHORT_INT"),
    (MPI_2INT, "MPI_2INT"),
    (MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT"),
    (MPI_COMPLEX, "MPI_COMPLEX"),
    (MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX"),
    (MPI_LOGICAL, "MPI_LOGICAL"),
    (MPI_REAL, "MPI_REAL"),
    (MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION"),
    (MPI_INTEGER, "MPI_INTEGER"),
    (MPI_2INTEGER, "MPI_2INTEGER"),
    (MPI_2REAL, "MPI_2REAL"),
    (MPI_2DOUBLE_PRECISION, "MPI_2DOUBLE_PRECISION"),
    (MPI_CHARACTER, "MPI_CHARACTER"),
    (MPI_REAL4, "MPI_REAL4"),
    (MPI_REAL8, "MPI_REAL8"),
    (MPI_REAL16, "MPI_REAL16"),
    (MPI_COMPLEX8, "MPI_COMPLEX8"),
    (MPI_COMPLEX16, "MPI_COMPLEX16"),
    (MPI_COMPLEX32, "MPI_COMPLEX32"),
    (MPI_INTEGER1, "MPI_INTEGER1"),
    (MPI_INTEGER2, "MPI_INTEGER2"),
    (MPI_INTEGER4, "MPI_INTEGER4"),
    (MPI_INTEGER8, "MPI_INTEGER8"),
    (MPI_INTEGER16, "MPI_INTEGER16"),
    (MPI_INT8_T, "MPI_INT8_T"),
    (MPI_INT16_T, "MPI_INT16_T"),
    (MPI_INT32_T, "MPI_INT32_T"),
    (MPI_INT64_T, "MPI_INT64_T"),
    (MPI_UINT8_T, "MPI_UINT8_T"),
    (MPI_UINT16_T, "MPI_UINT16_T"),
    (MPI_UINT32_T, "MPI_UINT32_T"),
    (MPI_UINT64_T, "MPI_UINT64_T"),
    (MPI_C_BOOL, "MPI_C_BOOL"),
    // One handle under MPICH's ABI; MPICH names it MPI_C_COMPLEX.
    (MPI_C_COMPLEX, "MPI_C_COMPLEX"),
    (MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"),
    (MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX"),
    (MPIX_C_FLOAT16, "MPIX_C_FLOAT16"),
    (MPI_AINT, "MPI_AINT"),
    (MPI_OFFSET, "MPI_OFFSET"),
    (MPI_COUNT, "MPI_COUNT"),
    (MPI_CXX_BOOL, "MPI_CXX_BOOL"),
    (MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX"),
    (MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX"),
    (MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX"),
];

fn check_type(datatype: MPI_Datatype) -> Result<(), MpiError> {
    if datatype == MPI_DATATYPE_NULL {
        return Err(MpiError::new(
            ErrorClass::Type,
            "datatype is MPI_DATATYPE_NULL",
        ));
    }
    // A freed handle must not collect a name that its next owner would show.
    if !PREDEFINED_TYPE_NAMES
        .iter()
        .any(|(handle, _)| *handle == datatype)
    {
        crate::datatype::resolve(datatype)?;
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_set_name(
    datatype: MPI_Datatype,
    type_name: *const c_char,
) -> c_int {
    entry("MPI_Type_set_name", MPI_COMM_WORLD, |_, registry| {
        check_type(datatype)?;
        if type_name.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "name is NULL"));
        }
        // SAFETY: checked non-null; a C string.
        let mut name = unsafe { c_text(type_name) };
        name.truncate(MPI_MAX_OBJECT_NAME as usize - 1);
        registry.objects.type_names.insert(datatype, name);
        Ok(())
    })
}
const _: fn_types::MPI_Type_set_name = PMPI_Type_set_name;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_name(
    datatype: MPI_Datatype,
    type_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    match with_mpi("MPI_Type_get_name", MPI_COMM_WORLD, |_, registry| {
        check_type(datatype)?;
        if type_name.is_null() || resultlen.is_null() {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "name or resultlen pointer is NULL",
            ));
        }
        let set = registry.objects.type_names.get(&datatype).cloned();
        Ok(set.unwrap_or_else(|| {
            PREDEFINED_TYPE_NAMES
                .iter()
                .find(|(handle, _)| *handle == datatype)
                .map_or(String::new(), |(_, name)| name.to_string())
        }))
    }) {
        Ok(name) => {
            // SAFETY: the caller's buffer holds MPI_MAX_OBJECT_NAME bytes.
            unsafe { write_string(&name, type_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Type_get_name = PMPI_Type_get_name;
