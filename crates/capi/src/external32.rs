//! MPI_Pack_external, MPI_Unpack_external, MPI_Pack_external_size: the
//! portable "external32" representation.
//!
//! On this platform (x86-64, LP64) almost every predefined C type already
//! has its external32 size, so external32 is mostly the native packed form
//! with every basic element stored big-endian: pack, then reverse the bytes
//! of each element (each half of a complex number). The exceptions are C's
//! `long` and `unsigned long` (8 bytes here, 4 in external32) and `wchar_t`
//! (4 here, 2 there), marked in their layouts' element runs
//! ([`External32`]): a type holding them is packed natively first and then
//! narrowed element by element, and a value that does not fit is
//! MPI_ERR_CONVERSION rather than a silently truncated number (MPICH
//! truncates). `long double` is byte-reversed as its 16 stored bytes, not
//! converted to IEEE quad precision; a struct mixing complex numbers with
//! other types reverses its complex members whole. Both are round-trip safe
//! within resmpi.

use resmpi_core::datatype::{BasicKind, Datatype, ElementRun, External32};
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{check_count, layout_of};
use crate::datatype_packing::{pack_message, unpack_message, Representation};
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
    let halves = complex_halves(datatype);
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

/// Whether the complex members of `datatype` are reversed per half.
fn complex_halves(datatype: &Datatype) -> bool {
    datatype.unit.is_some_and(|unit| {
        matches!(
            unit.kind,
            BasicKind::ComplexF32 | BasicKind::ComplexF64 | BasicKind::ComplexLongDouble
        )
    })
}

/// Convert `native`, whole elements of `datatype` in native packed form,
/// into `external` (their external32 form, [`Datatype::external32_size_bytes`]
/// each): every basic element big-endian, narrowed where its external32
/// size is smaller. MPI_ERR_CONVERSION when a value does not fit.
pub(crate) fn to_external32(
    datatype: &Datatype,
    native: &[u8],
    external: &mut [u8],
) -> MpiResult<()> {
    convert_elements(datatype, native, external, true, |run, from, to| {
        let External32::Narrow { bytes, signed } = run.external32 else {
            to.copy_from_slice(from);
            to.reverse();
            return Ok(());
        };
        let (low, high) = from.split_at(bytes as usize);
        let negative = signed && low[low.len() - 1] & 0x80 != 0;
        let extension = if negative { 0xff } else { 0 };
        if high.iter().any(|&byte| byte != extension) {
            return Err(MpiError::new(
                ErrorClass::Conversion,
                format!(
                    "a value of {} bytes does not fit the {bytes} bytes external32 gives its type                      (C long and unsigned long take 4, wchar_t 2)",
                    from.len()
                ),
            ));
        }
        for (at, byte) in to.iter_mut().zip(low.iter().rev()) {
            *at = *byte;
        }
        Ok(())
    })
}

/// Convert `external`, whole elements of `datatype` in external32 form,
/// into `native` packed form: the inverse of [`to_external32`], widening
/// narrowed values (sign-extended when signed).
pub(crate) fn from_external32(datatype: &Datatype, external: &[u8], native: &mut [u8]) {
    let widened = convert_elements(datatype, external, native, false, |run, from, to| {
        let External32::Narrow { signed, .. } = run.external32 else {
            to.copy_from_slice(from);
            to.reverse();
            return Ok(());
        };
        let negative = signed && from[0] & 0x80 != 0;
        to.fill(if negative { 0xff } else { 0 });
        for (at, byte) in to.iter_mut().zip(from.iter().rev()) {
            *at = *byte;
        }
        Ok(())
    });
    debug_assert!(widened.is_ok(), "widening cannot fail");
}

/// Walk whole elements of `datatype` in `from` and `to` side by side, basic
/// element by basic element (complex numbers per half), `from` in native
/// packed form and `to` in external32 when `from_native` (else the other
/// way round), and let `convert` write each basic element of `to` from the
/// one of `from`.
fn convert_elements(
    datatype: &Datatype,
    from: &[u8],
    to: &mut [u8],
    from_native: bool,
    mut convert: impl FnMut(&ElementRun, &[u8], &mut [u8]) -> MpiResult<()>,
) -> MpiResult<()> {
    let halves = complex_halves(datatype);
    let (mut from_at, mut to_at) = (0, 0);
    while from_at < from.len() && to_at < to.len() {
        for run in &datatype.elements {
            let (mut native_bytes, mut external_bytes) = (run.size_bytes, run.external32_bytes());
            let mut values = run.count;
            if halves {
                (native_bytes, external_bytes, values) =
                    (native_bytes / 2, external_bytes / 2, values * 2);
            }
            let (from_bytes, to_bytes) = if from_native {
                (native_bytes, external_bytes)
            } else {
                (external_bytes, native_bytes)
            };
            for _ in 0..values {
                convert(
                    run,
                    &from[from_at..from_at + from_bytes],
                    &mut to[to_at..to_at + to_bytes],
                )?;
                from_at += from_bytes;
                to_at += to_bytes;
            }
        }
    }
    Ok(())
}

/// The external32 bytes of `count` elements, or MPI_ERR_COUNT on overflow.
fn external_bytes(layout: &Datatype, count: usize) -> MpiResult<usize> {
    Representation::External32.packed_bytes(layout, count)
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
                Representation::External32,
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
                Representation::External32,
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
