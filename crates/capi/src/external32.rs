//! MPI_Pack_external, MPI_Unpack_external, MPI_Pack_external_size: the
//! portable "external32" representation.
//!
//! On this platform (x86-64, LP64) every predefined C type already has its
//! external32 size, so external32 is the native packed form with every
//! basic element stored big-endian: pack, then reverse the bytes of each
//! element (each half of a complex number). `long double` is byte-reversed
//! as its 16 stored bytes, not converted to IEEE quad precision; a struct
//! mixing complex numbers with other types reverses its complex members
//! whole. Both are round-trip safe within resmpi.

use resmpi_core::datatype::{BasicKind, Datatype};
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{check_count, layout_of};
use crate::datatype_packing::{pack_message, unpack_message};
use crate::global::entry;
use crate::large_count::{int_and_large_count, Count};

/// Check the data representation name: only "external32" exists.
unsafe fn check_datarep(datarep: *const c_char) -> MpiResult<()> {
    if datarep.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "datarep is NULL"));
    }
    // SAFETY: a non-null C string from the caller.
    let name = unsafe { std::ffi::CStr::from_ptr(datarep) };
    if name.to_bytes() != b"external32" {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!(
                "data representation {:?} is not supported (only \"external32\")",
                name.to_string_lossy()
            ),
        ));
    }
    Ok(())
}

/// Reverse the bytes of every basic element in `packed`, which holds whole
/// elements of `datatype` in native packed form (the same call converts
/// back: the reversal is its own inverse).
pub(crate) fn reverse_elements(datatype: &Datatype, packed: &mut [u8]) {
    let halves = datatype.unit.is_some_and(|unit| {
        matches!(
            unit.kind,
            BasicKind::ComplexF32 | BasicKind::ComplexF64 | BasicKind::ComplexLongDouble
        )
    });
    if datatype.size_bytes == 0 {
        return;
    }
    for element in packed.chunks_exact_mut(datatype.size_bytes) {
        let mut position_bytes = 0;
        for run in &datatype.elements {
            let unit_bytes = if halves {
                run.size_bytes / 2
            } else {
                run.size_bytes
            };
            let run_bytes = run.size_bytes * run.count;
            if unit_bytes > 1 {
                for value in
                    element[position_bytes..position_bytes + run_bytes].chunks_exact_mut(unit_bytes)
                {
                    value.reverse();
                }
            }
            position_bytes += run_bytes;
        }
    }
}

/// The external32 bytes of `count` elements, or MPI_ERR_COUNT on overflow.
fn external_bytes(layout: &Datatype, count: usize) -> MpiResult<usize> {
    layout
        .packed_bytes(count)
        .ok_or_else(|| MpiError::new(ErrorClass::Count, "packed size overflows"))
}

unsafe fn pack_external_size<C: Count>(
    name: &str,
    datarep: *const c_char,
    incount: C,
    datatype: MPI_Datatype,
    size: *mut MPI_Aint,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, _| {
        // SAFETY: the caller's string.
        unsafe { check_datarep(datarep)? };
        let count = check_count(incount)?;
        let bytes = external_bytes(&*layout_of(datatype)?, count)?;
        if size.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "size pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *size = bytes as MPI_Aint };
        Ok(())
    })
}
int_and_large_count!(PMPI_Pack_external_size = MPI_Pack_external_size, PMPI_Pack_external_size_c = MPI_Pack_external_size_c, pack_external_size, (
    datarep: *const c_char,
    incount: Count,
    datatype: MPI_Datatype,
    size: *mut MPI_Aint,
));

unsafe fn pack_external<C: Count>(
    name: &str,
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: C,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Aint,
    position: *mut MPI_Aint,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, _| {
        // SAFETY: the caller's arguments, checked inside.
        unsafe {
            check_datarep(datarep)?;
            pack_message(
                name,
                inbuf,
                incount,
                datatype,
                outbuf,
                outsize,
                position,
                reverse_elements,
            )
        }
    })
}
int_and_large_count!(PMPI_Pack_external = MPI_Pack_external, PMPI_Pack_external_c = MPI_Pack_external_c, pack_external, (
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: Count,
    datatype: MPI_Datatype,
    outbuf: *mut c_void,
    outsize: MPI_Aint,
    position: *mut MPI_Aint,
));

unsafe fn unpack_external<C: Count>(
    name: &str,
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Aint,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: C,
    datatype: MPI_Datatype,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, _| {
        // SAFETY: the caller's arguments, checked inside.
        unsafe {
            check_datarep(datarep)?;
            unpack_message(
                name,
                inbuf,
                insize,
                position,
                outbuf,
                outcount,
                datatype,
                Some(reverse_elements),
            )
        }
    })
}
int_and_large_count!(PMPI_Unpack_external = MPI_Unpack_external, PMPI_Unpack_external_c = MPI_Unpack_external_c, unpack_external, (
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Aint,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: Count,
    datatype: MPI_Datatype,
));
