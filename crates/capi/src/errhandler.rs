//! Error handlers: predefined ones and those made by MPI_Comm_create_errhandler.

use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::global::{entry, raise_code, Registry};
use crate::handles::{errhandler_handle, errhandler_index, is_builtin_errhandler};
use crate::p2p::comm_of;

/// MPI_ERR_ARG unless `errhandler` is predefined or a user handler in
/// `registry` (made by any of the create_errhandler calls).
pub(crate) fn check_errhandler(registry: &Registry, errhandler: MPI_Errhandler) -> MpiResult<()> {
    let user = errhandler_index(errhandler)
        .is_some_and(|index| registry.errhandlers.get(index).is_some_and(Option::is_some));
    if is_builtin_errhandler(errhandler) || user {
        return Ok(());
    }
    Err(MpiError::new(
        ErrorClass::Arg,
        format!("error handler {errhandler:#x} is not valid"),
    ))
}

/// [`check_errhandler`] for a caller that does not hold the library lock.
pub(crate) fn valid_errhandler(errhandler: MPI_Errhandler) -> MpiResult<()> {
    check_errhandler(&crate::global::lock().registry, errhandler)
}

/// Register user handler `function` (a communicator, file, window or
/// session handler: all take a pointer to an int handle and to the code,
/// so they are stored in the communicator form) and return its handle.
pub(crate) fn register_errhandler(
    registry: &mut Registry,
    function: unsafe extern "C" fn(*mut MPI_Comm, *mut c_int, ...),
) -> MPI_Errhandler {
    registry.errhandlers.push(Some(Some(function)));
    errhandler_handle(registry.errhandlers.len() - 1)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_errhandler(
    comm: MPI_Comm,
    errhandler: MPI_Errhandler,
) -> c_int {
    entry("MPI_Comm_set_errhandler", comm, |mpi, global| {
        let index = comm_of(mpi, comm)?;
        check_errhandler(global, errhandler)?;
        mpi.comm_mut(index)?.errhandler = errhandler;
        Ok(())
    })
}
const _: fn_types::MPI_Comm_set_errhandler = PMPI_Comm_set_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_errhandler(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    entry("MPI_Comm_get_errhandler", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        if errhandler.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "errhandler pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *errhandler = mpi.comm(index)?.errhandler };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_get_errhandler = PMPI_Comm_get_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_errhandler(
    function: MPI_Comm_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    entry("MPI_Comm_create_errhandler", MPI_COMM_WORLD, |_, global| {
        let (Some(function), false) = (function, errhandler.is_null()) else {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "function or errhandler pointer is NULL",
            ));
        };
        // SAFETY: checked non-null.
        unsafe { *errhandler = register_errhandler(global, function) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_create_errhandler = PMPI_Comm_create_errhandler;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_free(errhandler: *mut MPI_Errhandler) -> c_int {
    entry("MPI_Errhandler_free", MPI_COMM_WORLD, |_, _global| {
        if errhandler.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "errhandler pointer is NULL"));
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *errhandler };
        if !is_builtin_errhandler(handle) && errhandler_index(handle).is_none() {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("error handler {handle:#x} is not valid"),
            ));
        }
        // User handlers stay registered while communicators may still use
        // them (MPI frees them only when no longer referenced).
        // SAFETY: checked non-null.
        unsafe { *errhandler = MPI_ERRHANDLER_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Errhandler_free = PMPI_Errhandler_free;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_call_errhandler(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let class = ErrorClass::from_i32(errorcode).unwrap_or(ErrorClass::Other);
    raise_code(
        "MPI_Comm_call_errhandler",
        comm,
        errorcode,
        &MpiError::new(
            class,
            format!("error code {errorcode} raised by MPI_Comm_call_errhandler"),
        ),
    );
    MPI_SUCCESS
}
const _: fn_types::MPI_Comm_call_errhandler = PMPI_Comm_call_errhandler;

// ----- MPI-1 names, deleted in MPI-3 but still in MPICH's library ------------

/// MPI_Errhandler_create: MPI_Comm_create_errhandler under its MPI-1 name
/// (programs built against MPICH may still call it).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_create(
    function: MPI_Comm_errhandler_function,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { PMPI_Comm_create_errhandler(function, errhandler) }
}
const _: fn_types::MPI_Errhandler_create = PMPI_Errhandler_create;

/// MPI_Errhandler_get: MPI_Comm_get_errhandler under its MPI-1 name.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_get(
    comm: MPI_Comm,
    errhandler: *mut MPI_Errhandler,
) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { PMPI_Comm_get_errhandler(comm, errhandler) }
}
const _: fn_types::MPI_Errhandler_get = PMPI_Errhandler_get;

/// MPI_Errhandler_set: MPI_Comm_set_errhandler under its MPI-1 name.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_set(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { PMPI_Comm_set_errhandler(comm, errhandler) }
}
const _: fn_types::MPI_Errhandler_set = PMPI_Errhandler_set;
