//! MPI_Alloc_mem / MPI_Free_mem: memory for the application. resmpi's
//! paths need no registered or pinned memory (shared-memory rings copy, TCP
//! goes through the kernel), so this is the C allocator; the entry points
//! exist because portable programs (mpi4py, one-sided codes) call them.

use std::os::raw::{c_int, c_void};

use resmpi_core::{ErrorClass, MpiError};

use crate::abi::*;
use crate::global::entry;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alloc_mem(
    size: MPI_Aint,
    _info: MPI_Info,
    baseptr: *mut c_void,
) -> c_int {
    entry("MPI_Alloc_mem", MPI_COMM_WORLD, |_, _| {
        if size < 0 {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("size {size} is negative"),
            ));
        }
        if baseptr.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "baseptr is NULL"));
        }
        // SAFETY: plain allocation; at least one byte so a zero-size request
        // still yields a pointer MPI_Free_mem can take.
        let memory = unsafe { libc::malloc((size as usize).max(1)) };
        if memory.is_null() {
            return Err(MpiError::new(
                ErrorClass::NoMem,
                format!("cannot allocate {size} bytes"),
            ));
        }
        // SAFETY: `baseptr` is the address of the caller's pointer variable
        // (C passes `void *` that is really `void **`), checked non-null.
        unsafe { *baseptr.cast::<*mut c_void>() = memory };
        Ok(())
    })
}
const _: fn_types::MPI_Alloc_mem = PMPI_Alloc_mem;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Free_mem(base: *mut c_void) -> c_int {
    entry("MPI_Free_mem", MPI_COMM_WORLD, |_, _| {
        // SAFETY: memory from MPI_Alloc_mem (the C allocator), or NULL.
        unsafe { libc::free(base) };
        Ok(())
    })
}
const _: fn_types::MPI_Free_mem = PMPI_Free_mem;
