//! ULFM entry points, MPICH's spelling (`MPIX_Comm_revoke`, `_shrink`,
//! `_agree`, `_failure_ack`, `_failure_get_acked`, `_get_failed`) and Open
//! MPI 5's additions declared in `mpi-ext.h` (`MPIX_Comm_is_revoked`,
//! `_iagree`, `_ishrink`, `_ack_failed`). The meaning lives in
//! `resmpi_core::ulfm`; here are handles, pointers and error handlers.
//!
//! `MPIX_Comm_iagree` and `MPIX_Comm_ishrink` complete inside the call
//! (the agreement runs to its decision there) and return a request that
//! is already complete: a program written for the nonblocking forms runs
//! unchanged, but gets no overlap.

use resmpi_core::{ErrorClass, MpiError, MpiResult, Status};

use crate::abi::*;
use crate::global::entry;
use crate::group::new_group;
use crate::handles::{comm_handle, request_handle};
use crate::p2p::comm_of;

/// `pointer` is not NULL, or MPI_ERR_ARG naming `what`.
fn non_null<T>(pointer: *mut T, what: &str) -> MpiResult<()> {
    if pointer.is_null() {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("{what} pointer is NULL"),
        ));
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_revoke(comm: MPI_Comm) -> c_int {
    entry("MPIX_Comm_revoke", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        mpi.comm_revoke(index)
    })
}
const _: fn_types::MPIX_Comm_revoke = PMPIX_Comm_revoke;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_is_revoked(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    entry("MPIX_Comm_is_revoked", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        non_null(flag, "flag")?;
        let revoked = mpi.comm_is_revoked(index)?;
        // SAFETY: checked non-null.
        unsafe { *flag = c_int::from(revoked) };
        Ok(())
    })
}
const _: fn_types::MPIX_Comm_is_revoked = PMPIX_Comm_is_revoked;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_agree(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    entry("MPIX_Comm_agree", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        non_null(flag, "flag")?;
        // SAFETY: checked non-null.
        let (agreed, error) = mpi.comm_agree(index, unsafe { *flag })?;
        // SAFETY: checked non-null.
        unsafe { *flag = agreed };
        error.map_or(Ok(()), Err)
    })
}
const _: fn_types::MPIX_Comm_agree = PMPIX_Comm_agree;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_iagree(
    comm: MPI_Comm,
    flag: *mut c_int,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPIX_Comm_iagree", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        non_null(flag, "flag")?;
        non_null(request, "request")?;
        // SAFETY: checked non-null.
        let (agreed, error) = mpi.comm_agree(index, unsafe { *flag })?;
        // SAFETY: checked non-null.
        unsafe { *flag = agreed };
        let status = Status {
            source: -1,
            tag: -1,
            error: error.map_or(0, |error| error.class as i32),
            count_bytes: 0,
            cancelled: false,
        };
        let slot = mpi.engine.start_nothing(index, status)?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(slot) };
        Ok(())
    })
}
const _: fn_types::MPIX_Comm_iagree = PMPIX_Comm_iagree;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_shrink(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    entry("MPIX_Comm_shrink", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        non_null(newcomm, "newcomm")?;
        let new_index = mpi.comm_shrink(index)?;
        // SAFETY: checked non-null.
        unsafe { *newcomm = comm_handle(new_index) };
        Ok(())
    })
}
const _: fn_types::MPIX_Comm_shrink = PMPIX_Comm_shrink;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_ishrink(
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPIX_Comm_ishrink", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        non_null(newcomm, "newcomm")?;
        non_null(request, "request")?;
        let new_index = mpi.comm_shrink(index)?;
        let slot = mpi.engine.start_nothing(index, Status::default())?;
        // SAFETY: both checked non-null.
        unsafe {
            *newcomm = comm_handle(new_index);
            *request = request_handle(slot);
        }
        Ok(())
    })
}
const _: fn_types::MPIX_Comm_ishrink = PMPIX_Comm_ishrink;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_failure_ack(comm: MPI_Comm) -> c_int {
    entry("MPIX_Comm_failure_ack", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        // Progress first, so failures already notified count.
        mpi.engine.progress()?;
        mpi.comm_failure_ack(index)
    })
}
const _: fn_types::MPIX_Comm_failure_ack = PMPIX_Comm_failure_ack;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_failure_get_acked(
    comm: MPI_Comm,
    failedgrp: *mut MPI_Group,
) -> c_int {
    entry("MPIX_Comm_failure_get_acked", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        non_null(failedgrp, "failedgrp")?;
        let members = mpi.comm_acknowledged_failures(index)?;
        // SAFETY: checked non-null.
        unsafe { *failedgrp = new_group(registry, members) };
        Ok(())
    })
}
const _: fn_types::MPIX_Comm_failure_get_acked = PMPIX_Comm_failure_get_acked;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_get_failed(comm: MPI_Comm, failedgrp: *mut MPI_Group) -> c_int {
    entry("MPIX_Comm_get_failed", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        non_null(failedgrp, "failedgrp")?;
        mpi.engine.progress()?;
        let members = mpi.comm_failed_members(index)?;
        // SAFETY: checked non-null.
        unsafe { *failedgrp = new_group(registry, members) };
        Ok(())
    })
}
const _: fn_types::MPIX_Comm_get_failed = PMPIX_Comm_get_failed;

#[no_mangle]
pub unsafe extern "C" fn PMPIX_Comm_ack_failed(
    comm: MPI_Comm,
    num_to_ack: c_int,
    num_acked: *mut c_int,
) -> c_int {
    entry("MPIX_Comm_ack_failed", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        non_null(num_acked, "num_acked")?;
        if num_to_ack < 0 {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("num_to_ack is {num_to_ack}, negative"),
            ));
        }
        mpi.engine.progress()?;
        let failed = mpi.comm_failed_members(index)?;
        let acknowledged: Vec<u32> = failed.into_iter().take(num_to_ack as usize).collect();
        let count = acknowledged.len();
        mpi.comm_mut(index)?.acknowledged_failures = acknowledged;
        // SAFETY: checked non-null.
        unsafe { *num_acked = count as c_int };
        Ok(())
    })
}
const _: fn_types::MPIX_Comm_ack_failed = PMPIX_Comm_ack_failed;
