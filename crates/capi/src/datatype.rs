//! Predefined datatype handles and what each one is.

use resmpi_core::datatype::{BasicKind as K, PairValue, TypeInfo};
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use std::sync::Mutex;

use crate::abi::*;
use crate::global::entry;

/// The [`TypeInfo`] of a predefined datatype handle.
pub fn builtin_info(handle: MPI_Datatype) -> Option<TypeInfo> {
    let basic = TypeInfo::basic;
    let pair = |size_bytes, extent_bytes, value| TypeInfo {
        size_bytes,
        extent_bytes,
        basic_elements: 2,
        kind: K::Pair(value),
    };
    Some(match handle {
        MPI_CHAR | MPI_CHARACTER => basic(1, K::Char),
        MPI_SIGNED_CHAR | MPI_INT8_T | MPI_INTEGER1 => basic(1, K::I8),
        MPI_UNSIGNED_CHAR | MPI_UINT8_T => basic(1, K::U8),
        MPI_BYTE | MPI_PACKED => basic(1, K::Byte),
        MPI_C_BOOL | MPI_CXX_BOOL => basic(1, K::Bool),
        MPI_SHORT | MPI_INT16_T | MPI_INTEGER2 => basic(2, K::I16),
        MPI_UNSIGNED_SHORT | MPI_UINT16_T => basic(2, K::U16),
        MPI_INT | MPI_INT32_T | MPI_INTEGER | MPI_INTEGER4 | MPI_LOGICAL => basic(4, K::I32),
        MPI_WCHAR => basic(4, K::I32),
        MPI_UNSIGNED | MPI_UINT32_T => basic(4, K::U32),
        MPI_LONG | MPI_LONG_LONG_INT | MPI_INT64_T | MPI_INTEGER8 | MPI_AINT | MPI_OFFSET
        | MPI_COUNT => basic(8, K::I64),
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG | MPI_UINT64_T => basic(8, K::U64),
        MPI_FLOAT | MPI_REAL | MPI_REAL4 => basic(4, K::F32),
        MPI_DOUBLE | MPI_DOUBLE_PRECISION | MPI_REAL8 => basic(8, K::F64),
        MPI_LONG_DOUBLE | MPI_REAL16 => basic(16, K::LongDouble),
        MPI_C_FLOAT_COMPLEX | MPI_COMPLEX | MPI_COMPLEX8 | MPI_CXX_FLOAT_COMPLEX => {
            basic(8, K::ComplexF32)
        }
        MPI_C_DOUBLE_COMPLEX | MPI_DOUBLE_COMPLEX | MPI_COMPLEX16 | MPI_CXX_DOUBLE_COMPLEX => {
            basic(16, K::ComplexF64)
        }
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_COMPLEX32 | MPI_CXX_LONG_DOUBLE_COMPLEX => {
            basic(32, K::ComplexLongDouble)
        }
        MPI_FLOAT_INT => pair(8, 8, PairValue::F32),
        MPI_DOUBLE_INT => pair(12, 16, PairValue::F64),
        MPI_LONG_INT => pair(12, 16, PairValue::I64),
        MPI_SHORT_INT => pair(6, 8, PairValue::I16),
        MPI_2INT | MPI_2INTEGER => pair(8, 8, PairValue::I32),
        MPI_2REAL => pair(8, 8, PairValue::F32),
        MPI_2DOUBLE_PRECISION => pair(16, 16, PairValue::F64),
        MPI_LONG_DOUBLE_INT => pair(20, 32, PairValue::LongDouble),
        _ => return None,
    })
}

/// A datatype made by the application. Only layouts that stay contiguous
/// exist until the flattened representation of issue #4.
#[derive(Clone, Copy, Debug)]
struct DerivedType {
    info: TypeInfo,
    /// Basic elements per derived element (for reductions).
    repetitions: usize,
}

/// Derived datatypes by index. Indices below `FIRST_DERIVED_INDEX` are
/// MPICH's direct handles for the pair types (`MPI_FLOAT_INT` = 0x8c000000 ...).
static DERIVED: Mutex<Vec<Option<DerivedType>>> = Mutex::new(Vec::new());
const FIRST_DERIVED_INDEX: usize = 16;
const DIRECT_DATATYPE: u32 = 0x8c00_0000;
const INDEX_MASK: u32 = (1 << 26) - 1;

fn derived(handle: MPI_Datatype) -> Option<DerivedType> {
    let bits = handle as u32;
    if bits & !INDEX_MASK != DIRECT_DATATYPE {
        return None;
    }
    let index = (bits & INDEX_MASK) as usize;
    let table = DERIVED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    index
        .checked_sub(FIRST_DERIVED_INDEX)
        .and_then(|slot| table.get(slot).copied().flatten())
}

fn register(derived_type: DerivedType) -> MPI_Datatype {
    let mut table = DERIVED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let slot = match table.iter().position(Option::is_none) {
        Some(slot) => slot,
        None => {
            table.push(None);
            table.len() - 1
        }
    };
    table[slot] = Some(derived_type);
    (DIRECT_DATATYPE | (slot + FIRST_DERIVED_INDEX) as u32) as MPI_Datatype
}

/// For reductions: the basic element type of `handle` and how many basic
/// elements one element of it holds.
pub fn reduction_element(handle: MPI_Datatype) -> MpiResult<(TypeInfo, usize)> {
    if let Some(derived_type) = derived(handle) {
        let repetitions = derived_type.repetitions;
        let info = derived_type.info;
        let basic = TypeInfo {
            size_bytes: info.size_bytes / repetitions,
            extent_bytes: info.extent_bytes / repetitions,
            basic_elements: info.basic_elements / repetitions,
            kind: info.kind,
        };
        return Ok((basic, repetitions));
    }
    Ok((type_info(handle)?, 1))
}

/// The type of `handle`, or MPI_ERR_TYPE.
pub fn type_info(handle: MPI_Datatype) -> MpiResult<TypeInfo> {
    if handle == MPI_DATATYPE_NULL {
        return Err(MpiError::new(
            ErrorClass::Type,
            "MPI_DATATYPE_NULL is not a valid datatype",
        ));
    }
    if let Some(derived_type) = derived(handle) {
        return Ok(derived_type.info);
    }
    builtin_info(handle).ok_or_else(|| {
        MpiError::new(ErrorClass::Type, format!("datatype handle {handle:#x} is not a datatype resmpi knows (derived datatypes arrive with issue #4)"))
    })
}

/// Check `count` and compute the bytes `count` elements of `datatype` span.
pub fn buffer_bytes(
    buffer: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
) -> MpiResult<(usize, TypeInfo)> {
    if count < 0 {
        return Err(MpiError::new(
            ErrorClass::Count,
            format!("count {count} is negative"),
        ));
    }
    let info = type_info(datatype)?;
    let bytes = info
        .span_bytes(count as usize)
        .ok_or_else(|| MpiError::new(ErrorClass::Count, "count times extent overflows"))?;
    if bytes > 0 && buffer.is_null() {
        return Err(MpiError::new(
            ErrorClass::Buffer,
            format!("buffer is NULL but count is {count}"),
        ));
    }
    Ok((bytes, info))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_contiguous(
    count: c_int,
    oldtype: MPI_Datatype,
    newtype: *mut MPI_Datatype,
) -> c_int {
    entry("MPI_Type_contiguous", MPI_COMM_WORLD, |_, _| {
        if count < 0 {
            return Err(MpiError::new(
                ErrorClass::Count,
                format!("count {count} is negative"),
            ));
        }
        if newtype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "newtype pointer is NULL"));
        }
        let (basic, repetitions) = reduction_element(oldtype)?;
        let old = type_info(oldtype)?;
        let count = count as usize;
        let overflow = || MpiError::new(ErrorClass::Count, "datatype size overflows");
        let info = TypeInfo {
            size_bytes: old.size_bytes.checked_mul(count).ok_or_else(overflow)?,
            extent_bytes: old.extent_bytes.checked_mul(count).ok_or_else(overflow)?,
            basic_elements: old.basic_elements * count,
            kind: basic.kind,
        };
        let handle = register(DerivedType {
            info,
            repetitions: (repetitions * count).max(1),
        });
        // SAFETY: checked non-null.
        unsafe { *newtype = handle };
        Ok(())
    })
}
const _: fn_types::MPI_Type_contiguous = PMPI_Type_contiguous;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_dup(oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
    // SAFETY: forwarded caller pointer.
    unsafe { PMPI_Type_contiguous(1, oldtype, newtype) }
}
const _: fn_types::MPI_Type_dup = PMPI_Type_dup;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_commit(datatype: *mut MPI_Datatype) -> c_int {
    entry("MPI_Type_commit", MPI_COMM_WORLD, |_, _| {
        if datatype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "datatype pointer is NULL"));
        }
        // Layouts are contiguous, so committing has nothing to compute.
        // SAFETY: checked non-null.
        type_info(unsafe { *datatype }).map(|_| ())
    })
}
const _: fn_types::MPI_Type_commit = PMPI_Type_commit;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_free(datatype: *mut MPI_Datatype) -> c_int {
    entry("MPI_Type_free", MPI_COMM_WORLD, |_, _| {
        if datatype.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "datatype pointer is NULL"));
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *datatype };
        if derived(handle).is_none() {
            return Err(MpiError::new(
                ErrorClass::Type,
                "only derived datatypes can be freed",
            ));
        }
        let slot = (handle as u32 & INDEX_MASK) as usize - FIRST_DERIVED_INDEX;
        DERIVED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())[slot] = None;
        // SAFETY: checked non-null.
        unsafe { *datatype = MPI_DATATYPE_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Type_free = PMPI_Type_free;
