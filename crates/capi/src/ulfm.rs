//! ULFM entry points, MPICH's spelling (`MPIX_Comm_revoke`, `_shrink`,
//! `_agree`, `_failure_ack`, `_failure_get_acked`, `_get_failed`) and Open
//! MPI 5's additions declared in `mpi-ext.h` (`MPIX_Comm_is_revoked`,
//! `_iagree`, `_ishrink`, `_ack_failed`). The meaning lives in
//! `resmpi_core::ulfm`; here are handles, pointers and error handlers.
//!
//! `MPIX_Comm_iagree` and `MPIX_Comm_ishrink` start the agreement and
//! return a request that completes in a later progress once the agreement
//! is decided; the flag (iagree) or the new communicator (ishrink) is
//! written where the caller said when the request is completed by a
//! Wait/Test call ([`finish_nonblocking_agreement`], called from the one
//! `finish` path of the request calls, like MPI_Comm_idup's context).

use std::collections::HashMap;
use std::sync::Mutex;

use resmpi_core::ulfm::{AgreementOutcome, AgreementPurpose, NonblockingAgreement};
use resmpi_core::{ErrorClass, Mpi, MpiError};

use crate::abi::*;
use crate::global::entry;
use crate::global::out_pointer;
use crate::group::new_group;
use crate::handles::{comm_handle, request_handle};
use crate::p2p::comm_of;

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
        out_pointer(flag, "flag")?;
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
        out_pointer(flag, "flag")?;
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
        out_pointer(flag, "flag")?;
        out_pointer(request, "request")?;
        // SAFETY: checked non-null; read now (the caller may reuse it).
        let value = unsafe { *flag };
        let (slot, pending) =
            mpi.start_nonblocking_agreement(index, value, AgreementPurpose::Agree)?;
        remember(mpi, slot, flag as usize, pending);
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
        out_pointer(newcomm, "newcomm")?;
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
        out_pointer(newcomm, "newcomm")?;
        out_pointer(request, "request")?;
        let (slot, pending) =
            mpi.start_nonblocking_agreement(index, !0, AgreementPurpose::Shrink)?;
        remember(mpi, slot, newcomm as usize, pending);
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(slot) };
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
        out_pointer(failedgrp, "failedgrp")?;
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
        out_pointer(failedgrp, "failedgrp")?;
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
        out_pointer(num_acked, "num_acked")?;
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

/// Nonblocking agreements in flight: request slot -> (generation, where the
/// outcome goes: an `int *flag` or an `MPI_Comm *newcomm`, the agreement).
type PendingAgreements = HashMap<u32, (u32, usize, NonblockingAgreement)>;

static PENDING_AGREEMENTS: Mutex<Option<PendingAgreements>> = Mutex::new(None);

fn with_pending<T>(body: impl FnOnce(&mut PendingAgreements) -> T) -> T {
    let mut guard = PENDING_AGREEMENTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    body(guard.get_or_insert_with(Default::default))
}

/// Keep nonblocking agreement `pending` of request `slot` until it completes.
fn remember(mpi: &Mpi, slot: u32, output: usize, pending: NonblockingAgreement) {
    let generation = mpi
        .engine
        .state
        .requests
        .get(slot)
        .map_or(0, |request| request.generation);
    with_pending(|agreements| agreements.insert(slot, (generation, output, pending)));
}

/// Request `slot` of `generation` has completed and been released: if it
/// was an MPIX_Comm_iagree or MPIX_Comm_ishrink, write its outcome where
/// the caller asked.
pub fn finish_nonblocking_agreement(mpi: &mut Mpi, slot: u32, generation: u32) {
    let Some((expected, output, pending)) = with_pending(|agreements| agreements.remove(&slot))
    else {
        return;
    };
    if expected != generation {
        return;
    }
    let purpose = pending.purpose();
    match mpi.finish_nonblocking_agreement(slot, pending) {
        // SAFETY: the caller's `int *flag` of MPIX_Comm_iagree, valid until
        // the request completes (MPI's rule for nonblocking outputs).
        Ok(AgreementOutcome::Flag(flag)) => unsafe { *(output as *mut c_int) = flag },
        // SAFETY: the caller's `MPI_Comm *newcomm` of MPIX_Comm_ishrink, as above.
        Ok(AgreementOutcome::Communicator(index)) => unsafe {
            *(output as *mut MPI_Comm) = comm_handle(index)
        },
        Err(error) => {
            // Only a shrink can fail here (no survivor in the remote group).
            eprintln!("resmpi: rank {}: MPIX_Comm_ishrink: {error}", mpi.rank());
            if purpose == AgreementPurpose::Shrink {
                // SAFETY: as above.
                unsafe { *(output as *mut MPI_Comm) = MPI_COMM_NULL };
            }
        }
    }
}
