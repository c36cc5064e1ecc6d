//! The C ABI of resmpi: `PMPI_*` entry points with MPICH's ABI.
//!
//! `MPI_*` names are weak aliases made by the generated C glue
//! (`abi/gen.py`), exactly as MPICH does, so profiling libraries can wrap them.
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]

pub mod abi;

use std::os::raw::{c_char, c_int};

/// Called by the generated stubs of every MPI function resmpi does not implement.
///
/// # Safety
/// `name` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn resmpi_unimplemented(name: *const c_char) -> c_int {
    // SAFETY: the generated glue passes a string literal.
    let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
    eprintln!("resmpi: {name} is not implemented by resmpi");
    15 // MPI_ERR_OTHER until the error-handler path exists
}
