//! Predefined datatype handles and what each one is.

use resmpi_core::datatype::{BasicKind as K, PairValue, TypeInfo};
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;

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

/// The type of `handle`, or MPI_ERR_TYPE.
pub fn type_info(handle: MPI_Datatype) -> MpiResult<TypeInfo> {
    if handle == MPI_DATATYPE_NULL {
        return Err(MpiError::new(
            ErrorClass::Type,
            "MPI_DATATYPE_NULL is not a valid datatype",
        ));
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
