//! The C ABI of resmpi: `PMPI_*` entry points with MPICH's ABI.
//!
//! Every entry point decodes handles, checks arguments, calls into
//! `resmpi-core` under the library lock, and turns an error into an MPI
//! error class through the communicator's error handler. `MPI_*` names are
//! weak aliases made by the generated C glue (`abi/gen.py glue`), as in
//! MPICH, so profiling libraries can wrap them; functions of the table that
//! are not here get generated stubs that report "not implemented".
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]
#![allow(clippy::missing_safety_doc)]
// Helpers mirror MPI's own argument lists.
#![allow(clippy::too_many_arguments)]

pub mod abi;
mod attr;
mod coll;
mod comm;
mod datarep;
mod datatype;
mod datatype_constructors;
mod datatype_f90;
mod datatype_packing;
mod datatype_queries;
mod dpm;
mod errhandler;
mod error_codes;
mod external32;
mod file;
mod file_access;
mod file_collective;
mod file_siblings;
mod global;
mod grequest;
mod group;
mod handles;
mod info;
mod init;
mod large_count;
mod memory;
mod names;
mod objects;
mod output_position;
mod p2p;
mod partitioned;
mod persistent_coll;
mod requests;
mod rma;
mod rma_direct;
mod rma_ops;
mod session;
mod tool;
mod topo;
mod type_attr;
mod ulfm;
mod veloc;

use std::os::raw::{c_char, c_int};

/// Called by the generated stubs of every MPI function resmpi does not
/// implement: raises MPI_ERR_OTHER through MPI_COMM_WORLD's error handler.
///
/// # Safety
/// `name` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn resmpi_unimplemented(name: *const c_char) -> c_int {
    // SAFETY: the generated glue passes a string literal.
    let name = unsafe { std::ffi::CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    global::raise_error(
        &name,
        abi::MPI_COMM_WORLD,
        resmpi_core::MpiError::new(
            resmpi_core::ErrorClass::Other,
            format!("{name} is not implemented by resmpi"),
        ),
    )
}
