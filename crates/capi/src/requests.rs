//! Request completion: Wait/Test and their any/all/some forms, persistent
//! requests, cancel, status queries.
//!
//! A persistent request's slot holds the template; each MPI_Start creates an
//! ordinary inner request that the slot points to until it completes,
//! moving the template's buffer (contiguous or typed) exactly as a
//! nonblocking point-to-point call would.

use resmpi_core::request::{Operation, Persistent, Request, RequestTable};
use resmpi_core::{CompletionCall, ErrorClass, Mpi, MpiError, MpiResult, Status};

use crate::abi::*;
use crate::datatype::{bytes_of_elements, count_from_bytes};
use crate::datatype_packing::{finish_staged_receive, orphan_staged_receive};
use crate::global::{entry, entry_with_comm, with_mpi};
use crate::handles::{comm_handle, request_index};

/// Status of an inactive or null request ("empty status").
pub(crate) fn empty_status() -> Status {
    Status {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        error: 0,
        count_bytes: 0,
        cancelled: false,
    }
}

/// Write `status` to a user MPI_Status unless it is MPI_STATUS_IGNORE/NULL.
/// The MPI_ERROR field is left alone: only the multiple-completion calls
/// set it ([`set_status_error`]), as MPI says.
///
/// # Safety
/// `target` is NULL, MPI_STATUS_IGNORE, or a valid MPI_Status pointer.
pub unsafe fn write_status(target: *mut MPI_Status, status: &Status) {
    if target.is_null() || target as usize == MPI_STATUS_IGNORE {
        return;
    }
    let bytes = status.count_bytes as u64;
    let high = ((bytes >> 32) as c_int) << 1;
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*target).count_lo = bytes as u32 as c_int;
        (*target).count_hi_and_cancelled = high | status.cancelled as c_int;
        (*target).MPI_SOURCE = status.source;
        (*target).MPI_TAG = status.tag;
    }
}

/// Write the standard's empty status (MPI_ANY_SOURCE, MPI_ANY_TAG, count 0,
/// MPI_ERROR = MPI_SUCCESS), as for MPI_REQUEST_NULL and inactive requests.
///
/// # Safety
/// `target` is NULL, MPI_STATUS_IGNORE, or a valid MPI_Status pointer.
pub unsafe fn write_empty_status(target: *mut MPI_Status) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        write_status(target, &empty_status());
        set_status_error(target, &Ok(()));
    }
}

/// Set the MPI_ERROR field of a user status (Waitall/Testall/Waitsome/
/// Testsome): the request's error class, or MPI_SUCCESS.
///
/// # Safety
/// `target` is NULL, MPI_STATUS_IGNORE, or a valid MPI_Status pointer.
unsafe fn set_status_error(target: *mut MPI_Status, result: &MpiResult<()>) {
    if target.is_null() || target as usize == MPI_STATUS_IGNORE {
        return;
    }
    // SAFETY: guaranteed by the caller.
    unsafe {
        (*target).MPI_ERROR = match result {
            Ok(()) => MPI_SUCCESS,
            Err(error) => error.class as c_int,
        };
    }
}

/// Bytes recorded in a user MPI_Status.
fn status_bytes(status: &MPI_Status) -> u64 {
    (status.count_lo as u32 as u64) | (((status.count_hi_and_cancelled as u32 >> 1) as u64) << 32)
}

/// Slab index of a live request handle, or MPI_ERR_REQUEST.
pub(crate) fn live_request(mpi: &Mpi, handle: MPI_Request) -> MpiResult<u32> {
    request_index(handle)
        .filter(|index| mpi.engine.state.requests.get(*index).is_some())
        .ok_or_else(|| {
            MpiError::new(
                ErrorClass::Request,
                format!("request handle {handle:#x} is not a live request"),
            )
        })
}

/// Slab index of the live request `*request` points to; MPI_ERR_REQUEST
/// for a NULL pointer or anything but a live request.
///
/// # Safety
/// `request` is NULL or points to an MPI_Request.
unsafe fn live_request_at(mpi: &Mpi, request: *const MPI_Request) -> MpiResult<u32> {
    if request.is_null() {
        return Err(MpiError::new(
            ErrorClass::Request,
            "request pointer is NULL",
        ));
    }
    // SAFETY: checked non-null; the caller's pointer.
    live_request(mpi, unsafe { *request })
}

/// Whether the request at `index` has nothing more to do.
fn is_complete(mpi: &Mpi, index: u32) -> bool {
    request_done(&mpi.engine.state.requests, index)
}

/// [`is_complete`] on the request table alone (for the engine's loops,
/// which hand their closures the engine).
fn request_done(requests: &RequestTable, index: u32) -> bool {
    match requests.get(index) {
        Some(request) if request.persistent.is_some() => {
            request.inner.is_none_or(|inner| requests.done(inner))
        }
        _ => requests.done(index),
    }
}

/// Whether the request is inactive (persistent, not started).
fn is_inactive(mpi: &Mpi, index: u32) -> bool {
    inactive_in(&mpi.engine.state.requests, index)
}

/// [`is_inactive`] on the request table alone.
fn inactive_in(requests: &RequestTable, index: u32) -> bool {
    requests
        .get(index)
        .is_some_and(|request| request.persistent.is_some() && request.inner.is_none())
}

/// Finish a completed request: write its status, release it (or make a
/// persistent one inactive). Returns the request's own error, if any.
/// Returns whether the handle must become MPI_REQUEST_NULL via `released`.
fn finish(mpi: &mut Mpi, index: u32, status: *mut MPI_Status) -> (MpiResult<()>, bool) {
    let requests = &mut mpi.engine.state.requests;
    let (core_status, released) = match requests.get_mut(index) {
        Some(request) if request.persistent.is_some() => {
            let partitioned = matches!(request.persistent, Some(Persistent::Partitioned(_)));
            let mut status = match request.inner.take() {
                Some(inner) => {
                    let status = requests.final_status(inner);
                    match (requests.remove(inner), status) {
                        (Some(request), Some(status)) => {
                            finish_staged_receive(inner, request.generation);
                            status
                        }
                        _ => empty_status(),
                    }
                }
                None => empty_status(),
            };
            if partitioned && status.tag >= 0 {
                // The message travelled under an internal tag.
                status.tag = resmpi_core::partitioned::application_tag(status.tag);
            }
            (status, false)
        }
        Some(request) if matches!(request.operation, Operation::Generalized) => {
            requests.remove(index);
            // The query function writes the status; then the request is freed.
            // SAFETY: the caller's status pointer.
            return (
                unsafe { crate::grequest::finish(index, status, true) },
                true,
            );
        }
        Some(request) => {
            let generation = request.generation;
            // Only a schedule's request (a nonblocking collective, an
            // MPI_Comm_idup) stages data or waits for a context; the
            // point-to-point ones skip both tables (and their locks).
            let scheduled = matches!(request.operation, Operation::Nothing);
            let core_status = requests.final_status(index).unwrap_or_else(empty_status);
            requests.release(index);
            if scheduled {
                finish_staged_receive(index, generation);
                crate::comm::install_idup_context(mpi, index, generation);
                crate::ulfm::finish_nonblocking_agreement(mpi, index, generation);
            }
            (core_status, true)
        }
        None => (empty_status(), true),
    };
    // SAFETY: the caller's status pointer.
    unsafe { write_status(status, &core_status) };
    if core_status.error == MPI_SUCCESS {
        return (Ok(()), released);
    }
    let result = match ErrorClass::from_i32(core_status.error) {
        Some(ErrorClass::Success) | None => Ok(()),
        Some(ErrorClass::ProcFailed) => Err(MpiError::new(
            ErrorClass::ProcFailed,
            "a process this operation needs has failed",
        )),
        Some(ErrorClass::Revoked) => Err(resmpi_core::engine::revoked_error()),
        Some(ErrorClass::ProcFailedPending) => Err(MpiError::new(
            ErrorClass::ProcFailedPending,
            "a failure in the communicator is not acknowledged (MPIX_Comm_failure_ack)",
        )),
        Some(class) => Err(MpiError::new(
            class,
            format!(
                "message of more bytes than the receive buffer holds ({} bytes kept)",
                core_status.count_bytes
            ),
        )),
    };
    (result, released)
}

/// The check MPI_Test and MPI_Request_get_status share: MPI_REQUEST_NULL is
/// complete with an empty status; otherwise progress once if needed and set
/// `flag`. Returns the slab index of a live request that is complete. The
/// outcome (the request done or not) is a non-deterministic choice the FT
/// protocol hears of as `call`'s; in a replay it is the logged one
/// ([`resmpi_core::Engine::test_flag`]).
///
/// # Safety
/// `flag` is a valid pointer; `status` NULL, MPI_STATUS_IGNORE or valid.
unsafe fn test_request(
    mpi: &mut Mpi,
    call: CompletionCall,
    handle: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> MpiResult<Option<u32>> {
    if handle == MPI_REQUEST_NULL {
        // SAFETY: guaranteed by the caller.
        unsafe {
            *flag = 1;
            write_empty_status(status);
        }
        return Ok(None);
    }
    let index = live_request(mpi, handle)?;
    let done = mpi.engine.test_flag(call, 1, |engine| {
        request_done(&engine.state.requests, index)
    })?;
    // SAFETY: guaranteed by the caller.
    unsafe { *flag = done as c_int };
    if !done {
        if let Some(operation) = operation_of(mpi, index) {
            mpi.check_wildcard_request(operation)?;
        }
    }
    Ok(done.then_some(index))
}

/// Message logging, a restarted incarnation: progress until every request
/// in `indices` has completed (the ones the earlier incarnation's call
/// reported), whatever else completes meanwhile.
fn wait_for_replayed(mpi: &mut Mpi, indices: &[u32]) -> MpiResult<()> {
    mpi.engine.wait_until(|engine| {
        indices
            .iter()
            .all(|&index| request_done(&engine.state.requests, index))
    })
}

/// The logged outcome of a completion call does not fit the call the
/// replay makes: the replay is not the same execution.
fn replay_diverged(call: &str, logged: &[usize]) -> MpiError {
    MpiError::new(
        ErrorClass::Intern,
        format!(
            "{call}: message-logging replay diverged: the earlier incarnation reported \
             positions {logged:?}, which this call cannot report"
        ),
    )
}

/// The requests of `slots` at the logged `positions`, each active, or
/// None when one is not (the replay diverged).
fn replayed_slots(mpi: &Mpi, slots: &[Option<u32>], positions: &[usize]) -> Option<Vec<u32>> {
    positions
        .iter()
        .map(|&position| {
            slots
                .get(position)
                .copied()
                .flatten()
                .filter(|&index| !is_inactive(mpi, index))
        })
        .collect()
}

/// Finish request `index` (already complete) and release it.
pub fn complete_and_release(mpi: &mut Mpi, index: u32, status: *mut MPI_Status) -> MpiResult<()> {
    finish(mpi, index, status).0
}

/// The request doing the work of slot `index`: itself, or for a persistent
/// request the operation its last MPI_Start began (None when inactive).
fn operation_of(mpi: &Mpi, index: u32) -> Option<u32> {
    let request = mpi.engine.state.requests.get(index)?;
    if request.persistent.is_some() {
        request.inner
    } else {
        Some(index)
    }
}

/// Wait for the request behind `index`.
fn wait_index(mpi: &mut Mpi, index: u32) -> MpiResult<()> {
    match operation_of(mpi, index) {
        // Already complete (most sends of a window by the time Waitall
        // looks): nothing to check or wait for.
        Some(target)
            if mpi.engine.state.requests.get(target).is_some()
                && mpi.engine.state.requests.done(target) =>
        {
            Ok(())
        }
        Some(target) => {
            crate::grequest::check_waitable(mpi, target)?;
            mpi.wait_or_pending(target)
        }
        None => Ok(()),
    }
}

/// Slot of `requests[i]`, None for MPI_REQUEST_NULL; MPI_ERR_REQUEST for garbage.
unsafe fn load_requests(
    mpi: &Mpi,
    count: c_int,
    requests: *mut MPI_Request,
) -> MpiResult<Vec<Option<u32>>> {
    if count < 0 {
        return Err(MpiError::new(
            ErrorClass::Count,
            format!("count {count} is negative"),
        ));
    }
    if count > 0 && requests.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "array of requests is NULL"));
    }
    (0..count as usize)
        .map(|i| {
            // SAFETY: the caller passes `count` requests.
            let handle = unsafe { *requests.add(i) };
            if handle == MPI_REQUEST_NULL {
                Ok(None)
            } else {
                live_request(mpi, handle).map(Some)
            }
        })
        .collect()
}

unsafe fn status_at(statuses: *mut MPI_Status, i: usize) -> *mut MPI_Status {
    if statuses.is_null() || statuses as usize == MPI_STATUSES_IGNORE {
        std::ptr::null_mut()
    } else {
        // SAFETY: the caller's array has an entry per request.
        unsafe { statuses.add(i) }
    }
}

unsafe fn finish_handle(
    mpi: &mut Mpi,
    handle: *mut MPI_Request,
    index: u32,
    status: *mut MPI_Status,
) -> MpiResult<()> {
    let (result, released) = finish(mpi, index, status);
    if released {
        // SAFETY: the caller's request pointer.
        unsafe { *handle = MPI_REQUEST_NULL };
    }
    result
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    entry_with_comm("MPI_Wait", |mpi, _, error_comm| {
        if request.is_null() {
            return Err(MpiError::new(
                ErrorClass::Request,
                "request pointer is NULL",
            ));
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *request };
        if handle == MPI_REQUEST_NULL {
            // SAFETY: caller's status.
            unsafe { write_empty_status(status) };
            return Ok(());
        }
        let index = live_request(mpi, handle)?;
        *error_comm = request_comm(mpi, index);
        if let Some(operation) = operation_of(mpi, index) {
            mpi.engine.progress()?;
            mpi.check_wildcard_request(operation)?;
        }
        wait_index(mpi, index)?;
        // SAFETY: caller's pointers.
        unsafe { finish_handle(mpi, request, index, status) }
    })
}
const _: fn_types::MPI_Wait = PMPI_Wait;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    entry_with_comm("MPI_Test", |mpi, _, error_comm| {
        if request.is_null() || flag.is_null() {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "request or flag pointer is NULL",
            ));
        }
        // SAFETY: checked non-null.
        if let Some(index) = request_index(unsafe { *request }) {
            *error_comm = request_comm(mpi, index);
        }
        // SAFETY: checked non-null.
        let Some(index) =
            (unsafe { test_request(mpi, CompletionCall::Test, *request, flag, status)? })
        else {
            return Ok(());
        };
        // SAFETY: caller's pointers.
        unsafe { finish_handle(mpi, request, index, status)? };
        Ok(())
    })
}
const _: fn_types::MPI_Test = PMPI_Test;

/// The communicator whose error handler reports on request `index` (the
/// one it was started on; MPI_COMM_WORLD for a request without one).
fn request_comm(mpi: &Mpi, index: u32) -> MPI_Comm {
    mpi.engine
        .state
        .requests
        .get(index)
        .map_or(MPI_COMM_WORLD, |request| comm_handle(request.comm))
}

/// Finish every completed, active entry; returns whether any had an error.
unsafe fn finish_all(
    mpi: &mut Mpi,
    slots: &[Option<u32>],
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
) -> bool {
    let mut any_error = false;
    for (i, slot) in slots.iter().enumerate() {
        // SAFETY: caller's arrays of `slots.len()` entries.
        let status = unsafe { status_at(statuses, i) };
        match slot {
            Some(index) => {
                // SAFETY: caller's arrays.
                let result = unsafe { finish_handle(mpi, requests.add(i), *index, status) };
                // SAFETY: as above.
                unsafe { set_status_error(status, &result) };
                if result.is_err() {
                    any_error = true;
                }
            }
            // SAFETY: caller's status array.
            None => unsafe { write_empty_status(status) },
        }
    }
    any_error
}

fn in_status_error() -> MpiError {
    MpiError::new(
        ErrorClass::InStatus,
        "one or more requests failed; see the MPI_ERROR field of their statuses",
    )
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Waitall(
    count: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
) -> c_int {
    entry("MPI_Waitall", MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: caller's array.
        let slots = unsafe { load_requests(mpi, count, requests)? };
        for index in slots.iter().flatten() {
            wait_index(mpi, *index)?;
        }
        // SAFETY: caller's arrays.
        if unsafe { finish_all(mpi, &slots, requests, statuses) } {
            return Err(in_status_error());
        }
        Ok(())
    })
}
const _: fn_types::MPI_Waitall = PMPI_Waitall;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Testall(
    count: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    entry("MPI_Testall", MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: caller's array.
        let slots = unsafe { load_requests(mpi, count, requests)? };
        // Over no active request the flag is true whatever the timing:
        // not a choice, not reported.
        let done = if slots.iter().flatten().all(|&index| is_inactive(mpi, index)) {
            mpi.engine.progress()?;
            true
        } else {
            mpi.engine
                .test_flag(CompletionCall::Testall, slots.len(), |engine| {
                    slots
                        .iter()
                        .flatten()
                        .all(|&index| request_done(&engine.state.requests, index))
                })?
        };
        if !flag.is_null() {
            // SAFETY: checked non-null.
            unsafe { *flag = done as c_int };
        }
        if !done {
            check_wildcards(mpi, &slots)?;
        }
        // SAFETY: caller's arrays.
        if done && unsafe { finish_all(mpi, &slots, requests, statuses) } {
            return Err(in_status_error());
        }
        Ok(())
    })
}
const _: fn_types::MPI_Testall = PMPI_Testall;

/// ULFM's pending rule over several requests: `MPIX_ERR_PROC_FAILED_PENDING`
/// when one of `slots` is a wildcard receive that cannot complete while a
/// failure in its communicator is unacknowledged (every request stays
/// active). For the multiple-completion calls when nothing completed.
fn check_wildcards(mpi: &Mpi, slots: &[Option<u32>]) -> MpiResult<()> {
    if mpi.engine.state.failed_count == 0 {
        return Ok(());
    }
    for index in slots.iter().flatten() {
        if let Some(operation) = operation_of(mpi, *index) {
            mpi.check_wildcard_request(operation)?;
        }
    }
    Ok(())
}

/// Index of a completed active request among `slots`, if any.
fn find_completed(mpi: &Mpi, slots: &[Option<u32>]) -> Option<usize> {
    first_completed(&mpi.engine.state.requests, slots)
}

/// [`find_completed`] on the request table alone (for the engine's loops).
fn first_completed(requests: &RequestTable, slots: &[Option<u32>]) -> Option<usize> {
    slots.iter().position(|slot| {
        slot.is_some_and(|index| !inactive_in(requests, index) && request_done(requests, index))
    })
}

fn all_inactive(mpi: &Mpi, slots: &[Option<u32>]) -> bool {
    slots
        .iter()
        .all(|slot| slot.is_none_or(|index| is_inactive(mpi, index)))
}

unsafe fn any_entry(
    name: &str,
    count: c_int,
    requests: *mut MPI_Request,
    index_out: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
    blocking: bool,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: caller's array.
        let slots = unsafe { load_requests(mpi, count, requests)? };
        if index_out.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "index pointer is NULL"));
        }
        let set_flag = |value: bool| {
            if !flag.is_null() {
                // SAFETY: checked non-null.
                unsafe { *flag = value as c_int };
            }
        };
        if all_inactive(mpi, &slots) {
            // SAFETY: caller's pointers.
            unsafe {
                *index_out = MPI_UNDEFINED;
                write_empty_status(status);
            }
            set_flag(true);
            return Ok(());
        }
        let call = if blocking {
            CompletionCall::Waitany
        } else {
            CompletionCall::Testany
        };
        let replayed = mpi.engine.replayed_completion_choice(call, slots.len())?;
        let found = if let Some(logged) = replayed {
            // A restarted incarnation: exactly the earlier one's choice,
            // even if another request completed first this time.
            match (logged.as_slice(), replayed_slots(mpi, &slots, &logged)) {
                ([], _) if !blocking => {
                    mpi.engine.progress()?;
                    None
                }
                (&[position], Some(indices)) => {
                    wait_for_replayed(mpi, &indices)?;
                    Some(position)
                }
                _ => return Err(replay_diverged(name, &logged)),
            }
        } else if blocking {
            crate::grequest::check_any_waitable(mpi, &slots)?;
            let mut found = None;
            // Until one completes, or a failure leaves a wildcard receive
            // among them pending (checked again after each new failure).
            while found.is_none() {
                check_wildcards(mpi, &slots)?;
                let failures = mpi.engine.state.failed_count;
                mpi.engine.wait_until(|engine| {
                    found = first_completed(&engine.state.requests, &slots);
                    found.is_some() || engine.state.failed_count != failures
                })?;
            }
            found
        } else {
            mpi.engine.progress()?;
            let found = find_completed(mpi, &slots);
            if found.is_none() {
                set_flag(false);
                check_wildcards(mpi, &slots)?;
            }
            found
        };
        let chosen: &[usize] = match &found {
            Some(i) => std::slice::from_ref(i),
            None => &[],
        };
        mpi.engine
            .report_completion_choice(call, slots.len(), chosen);
        match found {
            Some(i) => {
                set_flag(true);
                // SAFETY: caller's pointers.
                unsafe {
                    *index_out = i as c_int;
                    finish_handle(mpi, requests.add(i), slots[i].expect("active"), status)
                }
            }
            None => {
                set_flag(false);
                // SAFETY: caller's pointer.
                unsafe { *index_out = MPI_UNDEFINED };
                Ok(())
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Waitany(
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe {
        any_entry(
            "MPI_Waitany",
            count,
            requests,
            index,
            std::ptr::null_mut(),
            status,
            true,
        )
    }
}
const _: fn_types::MPI_Waitany = PMPI_Waitany;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Testany(
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe { any_entry("MPI_Testany", count, requests, index, flag, status, false) }
}
const _: fn_types::MPI_Testany = PMPI_Testany;

/// Waitsome/Testsome as usual: wait (when `blocking`) until one of
/// `slots` completes; the positions complete now.
fn some_completed(mpi: &mut Mpi, slots: &[Option<u32>], blocking: bool) -> MpiResult<Vec<usize>> {
    if blocking {
        crate::grequest::check_any_waitable(mpi, slots)?;
        let mut idler = resmpi_core::engine::Idler::default();
        while find_completed(mpi, slots).is_none() {
            check_wildcards(mpi, slots)?;
            mpi.engine.progress_or_idle(&mut idler)?;
        }
    } else {
        mpi.engine.progress()?;
        if find_completed(mpi, slots).is_none() {
            check_wildcards(mpi, slots)?;
        }
    }
    let completed: Vec<usize> = slots
        .iter()
        .enumerate()
        .filter(|(_, slot)| {
            slot.is_some_and(|index| !is_inactive(mpi, index) && is_complete(mpi, index))
        })
        .map(|(i, _)| i)
        .collect();
    Ok(completed)
}

unsafe fn some_entry(
    name: &str,
    incount: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    blocking: bool,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: caller's array.
        let slots = unsafe { load_requests(mpi, incount, requests)? };
        if outcount.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "outcount pointer is NULL"));
        }
        if all_inactive(mpi, &slots) {
            // SAFETY: checked non-null.
            unsafe { *outcount = MPI_UNDEFINED };
            return Ok(());
        }
        let call = if blocking {
            CompletionCall::Waitsome
        } else {
            CompletionCall::Testsome
        };
        let replayed = mpi.engine.replayed_completion_choice(call, slots.len())?;
        let completed: Vec<usize> = if let Some(logged) = replayed {
            // A restarted incarnation: exactly the earlier one's subset, in
            // its order; requests that completed besides stay pending.
            match replayed_slots(mpi, &slots, &logged) {
                Some(_) if logged.is_empty() && !blocking => {
                    mpi.engine.progress()?;
                }
                Some(indices) if !indices.is_empty() => wait_for_replayed(mpi, &indices)?,
                _ => return Err(replay_diverged(name, &logged)),
            }
            logged
        } else {
            some_completed(mpi, &slots, blocking)?
        };
        mpi.engine
            .report_completion_choice(call, slots.len(), &completed);
        let mut done = 0usize;
        let mut any_error = false;
        for i in completed {
            let Some(index) = &slots[i] else { continue };
            // SAFETY: caller's arrays: indices and statuses hold incount entries.
            unsafe {
                if !indices.is_null() {
                    *indices.add(done) = i as c_int;
                }
                let target = status_at(statuses, done);
                let result = finish_handle(mpi, requests.add(i), *index, target);
                set_status_error(target, &result);
                if result.is_err() {
                    any_error = true;
                }
            }
            done += 1;
        }
        // SAFETY: checked non-null.
        unsafe { *outcount = done as c_int };
        if any_error {
            return Err(in_status_error());
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Waitsome(
    incount: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe {
        some_entry(
            "MPI_Waitsome",
            incount,
            requests,
            outcount,
            indices,
            statuses,
            true,
        )
    }
}
const _: fn_types::MPI_Waitsome = PMPI_Waitsome;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Testsome(
    incount: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe {
        some_entry(
            "MPI_Testsome",
            incount,
            requests,
            outcount,
            indices,
            statuses,
            false,
        )
    }
}
const _: fn_types::MPI_Testsome = PMPI_Testsome;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Request_free(request: *mut MPI_Request) -> c_int {
    entry("MPI_Request_free", MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: the caller's request pointer, checked inside.
        let index = unsafe { live_request_at(mpi, request)? };
        let target = operation_of(mpi, index);
        let requests = &mut mpi.engine.state.requests;
        if requests
            .get(index)
            .is_some_and(|slot| slot.persistent.is_some())
        {
            requests.remove(index);
            crate::persistent_coll::forget(index);
        }
        if let Some(target) = target {
            match requests.get_mut(target) {
                Some(request) if matches!(request.operation, Operation::Generalized) => {
                    if request.complete {
                        requests.remove(target);
                        // SAFETY: no status is written (NULL).
                        unsafe { crate::grequest::finish(target, std::ptr::null_mut(), false)? };
                    } else {
                        // The free function runs now (as MPICH runs it);
                        // MPI_Grequest_complete then releases the slot.
                        request.free_when_complete = true;
                        // SAFETY: no status is written (NULL).
                        unsafe { crate::grequest::finish(target, std::ptr::null_mut(), false)? };
                    }
                }
                // A buffered send's request goes now even while its cancel
                // waits: its internal send is let go of with it.
                Some(request)
                    if request.complete
                        || matches!(request.operation, Operation::Buffered { .. }) =>
                {
                    let request = requests.remove(target).expect("live");
                    finish_staged_receive(target, request.generation);
                }
                // A staged receive stays until it completes, to be unpacked.
                Some(_) if orphan_staged_receive(target) => {}
                Some(request) => request.free_when_complete = true,
                None => {}
            }
        }
        // SAFETY: checked non-null.
        unsafe { *request = MPI_REQUEST_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Request_free = PMPI_Request_free;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cancel(request: *mut MPI_Request) -> c_int {
    entry("MPI_Cancel", MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: the caller's request pointer, checked inside.
        let index = unsafe { live_request_at(mpi, request)? };
        if let Some(target) = operation_of(mpi, index) {
            if let Some(Request {
                operation: Operation::Generalized,
                complete,
                ..
            }) = mpi.engine.state.requests.get(target)
            {
                return crate::grequest::cancel(target, *complete);
            }
            // Receives not yet matched are withdrawn, and sends whose
            // message no receive has matched yet; anything else completes
            // normally and MPI_Test_cancelled reports false (the standard
            // allows it).
            mpi.engine.cancel(target)?;
        }
        Ok(())
    })
}
const _: fn_types::MPI_Cancel = PMPI_Cancel;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
    if status.is_null() || flag.is_null() {
        return crate::global::raise_error(
            "MPI_Test_cancelled",
            MPI_COMM_WORLD,
            MpiError::new(ErrorClass::Arg, "status or flag is NULL"),
        );
    }
    // SAFETY: checked non-null; caller's pointers.
    unsafe { *flag = (*status).count_hi_and_cancelled & 1 };
    MPI_SUCCESS
}
const _: fn_types::MPI_Test_cancelled = PMPI_Test_cancelled;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Request_get_status(
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    entry("MPI_Request_get_status", MPI_COMM_WORLD, |mpi, _| {
        if flag.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "flag pointer is NULL"));
        }
        // SAFETY: caller's pointers.
        let Some(index) = (unsafe {
            test_request(mpi, CompletionCall::RequestGetStatus, request, flag, status)?
        }) else {
            return Ok(());
        };
        let requests = &mpi.engine.state.requests;
        let slot = requests.get(index).expect("live");
        if matches!(slot.operation, Operation::Generalized) {
            // SAFETY: the caller's status; the request stays.
            return unsafe { crate::grequest::query(index, status) };
        }
        let core_status = match &slot.persistent {
            Some(_) => slot
                .inner
                .and_then(|inner| requests.get(inner))
                .map_or(empty_status(), |inner| inner.status),
            None => slot.status,
        };
        // SAFETY: caller's status.
        unsafe { write_status(status, &core_status) };
        Ok(())
    })
}
const _: fn_types::MPI_Request_get_status = PMPI_Request_get_status;

// ----- persistent requests ---------------------------------------------------

pub(crate) fn persistent_request(
    mpi: &mut Mpi,
    comm: usize,
    template: Persistent,
) -> MpiResult<u32> {
    mpi.engine.insert_request(Request {
        operation: Operation::Nothing,
        comm,
        complete: true,
        status: empty_status(),
        generation: 0,
        persistent: Some(template),
        free_when_complete: false,
        inner: None,
    })
}

// MPI_Send_init & co. (int and `_c`) are in p2p.rs.

fn start_one(mpi: &mut Mpi, handle: MPI_Request) -> MpiResult<()> {
    let index = live_request(mpi, handle)?;
    let slot = mpi.engine.state.requests.get(index).expect("live");
    let Some(template) = slot.persistent.clone() else {
        return Err(MpiError::new(
            ErrorClass::Request,
            "MPI_Start needs a persistent request",
        ));
    };
    if slot.inner.is_some() {
        return Err(MpiError::new(
            ErrorClass::Request,
            "persistent request is already active",
        ));
    }
    let comm = slot.comm;
    let inner = match template {
        Persistent::Send {
            destination,
            bytes,
            length,
            tag,
            mode,
        } => mpi.isend(comm, bytes, length, destination, tag, mode)?,
        Persistent::Receive {
            source,
            bytes,
            capacity,
            tag,
        } => mpi.irecv(comm, bytes, capacity, source, tag)?,
        Persistent::Collective => {
            return Err(MpiError::new(
                ErrorClass::Intern,
                "a persistent collective is started by persistent_coll::start",
            ))
        }
        Persistent::Partitioned(state) => crate::partitioned::start(mpi, index, &state)?,
    };
    mpi.engine
        .state
        .requests
        .get_mut(index)
        .expect("live")
        .inner = Some(inner);
    Ok(())
}

/// MPI_Start of one handle: a persistent collective starts its
/// nonblocking collective outside the lock (see `persistent_coll`); any
/// other persistent request under it.
unsafe fn start_handle(name: &str, handle: MPI_Request) -> c_int {
    // SAFETY: forwarded handle.
    if let Some(code) = unsafe { crate::persistent_coll::start(name, handle) } {
        return code;
    }
    entry(name, MPI_COMM_WORLD, |mpi, _| start_one(mpi, handle))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Start(request: *mut MPI_Request) -> c_int {
    if request.is_null() {
        return crate::global::raise_error(
            "MPI_Start",
            MPI_COMM_WORLD,
            MpiError::new(ErrorClass::Request, "request pointer is NULL"),
        );
    }
    // SAFETY: checked non-null.
    unsafe { start_handle("MPI_Start", *request) }
}
const _: fn_types::MPI_Start = PMPI_Start;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Startall(count: c_int, requests: *mut MPI_Request) -> c_int {
    if count < 0 || (count > 0 && requests.is_null()) {
        return crate::global::raise_error(
            "MPI_Startall",
            MPI_COMM_WORLD,
            MpiError::new(ErrorClass::Arg, "invalid count or NULL request array"),
        );
    }
    for i in 0..count as usize {
        // SAFETY: the caller's array holds `count` requests.
        let code = unsafe { start_handle("MPI_Startall", *requests.add(i)) };
        if code != MPI_SUCCESS {
            return code;
        }
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Startall = PMPI_Startall;

// ----- status queries ----------------------------------------------------------

unsafe fn count_of(
    name: &str,
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    elements: bool,
) -> Result<i64, c_int> {
    with_mpi(name, MPI_COMM_WORLD, |_, _| {
        if status.is_null() || status as usize == MPI_STATUS_IGNORE {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "status is NULL or MPI_STATUS_IGNORE",
            ));
        }
        // SAFETY: checked; the caller's status.
        let bytes = status_bytes(unsafe { &*status }) as usize;
        count_from_bytes(datatype, bytes, elements)
    })
}

/// Compute a count from a status and store it through `out` as `T`.
pub(crate) unsafe fn write_count<T: TryFrom<i64>>(
    name: &str,
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    elements: bool,
    out: *mut T,
    too_large: T,
) -> c_int {
    // SAFETY: caller's pointers.
    match unsafe { count_of(name, status, datatype, elements) } {
        Ok(value) => {
            if !out.is_null() {
                // SAFETY: checked non-null; the caller's output variable.
                unsafe { *out = T::try_from(value).unwrap_or(too_large) };
            }
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_elements_x(
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut MPI_Count,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    unsafe {
        write_count(
            "MPI_Get_elements_x",
            status,
            datatype,
            true,
            count,
            MPI_UNDEFINED as MPI_Count,
        )
    }
}
const _: fn_types::MPI_Get_elements_x = PMPI_Get_elements_x;

/// Store `elements` basic elements of `datatype` in a user status as the
/// byte count MPI_Get_count/Get_elements read back; the cancelled flag stays.
unsafe fn set_elements(
    name: &str,
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    elements: i64,
) -> c_int {
    // Local (no library lock): generalized-request query functions call
    // it while the library runs them.
    let mut computed = 0u64;
    let code = crate::global::local_entry(name, || {
        if status.is_null() || status as usize == MPI_STATUS_IGNORE {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "status is NULL or MPI_STATUS_IGNORE",
            ));
        }
        let elements = usize::try_from(elements).map_err(|_| {
            MpiError::new(ErrorClass::Count, format!("count {elements} is negative"))
        })?;
        let bytes = bytes_of_elements(datatype, elements)?
            .filter(|bytes| (*bytes as u64) < (1u64 << 63))
            .ok_or_else(|| MpiError::new(ErrorClass::Count, "count too large for a status"))?;
        computed = bytes as u64;
        Ok(())
    });
    if code != MPI_SUCCESS {
        return code;
    }
    let bytes = computed;
    // SAFETY: checked above; the caller's status.
    unsafe {
        let cancelled = (*status).count_hi_and_cancelled & 1;
        (*status).count_lo = bytes as u32 as c_int;
        (*status).count_hi_and_cancelled = (((bytes >> 32) as c_int) << 1) | cancelled;
    }
    MPI_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_elements(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: c_int,
) -> c_int {
    // SAFETY: forwarded caller pointer.
    unsafe { set_elements("MPI_Status_set_elements", status, datatype, count as i64) }
}
const _: fn_types::MPI_Status_set_elements = PMPI_Status_set_elements;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_elements_x(
    status: *mut MPI_Status,
    datatype: MPI_Datatype,
    count: MPI_Count,
) -> c_int {
    // SAFETY: forwarded caller pointer.
    unsafe { set_elements("MPI_Status_set_elements_x", status, datatype, count) }
}
const _: fn_types::MPI_Status_set_elements_x = PMPI_Status_set_elements_x;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_cancelled(status: *mut MPI_Status, flag: c_int) -> c_int {
    if status.is_null() || status as usize == MPI_STATUS_IGNORE {
        return crate::global::raise_error(
            "MPI_Status_set_cancelled",
            MPI_COMM_WORLD,
            MpiError::new(ErrorClass::Arg, "status is NULL or MPI_STATUS_IGNORE"),
        );
    }
    // SAFETY: checked; the caller's status.
    unsafe {
        (*status).count_hi_and_cancelled =
            ((*status).count_hi_and_cancelled & !1) | (flag != 0) as c_int;
    }
    MPI_SUCCESS
}
const _: fn_types::MPI_Status_set_cancelled = PMPI_Status_set_cancelled;

/// Check a status-conversion pair: neither pointer may be NULL or one of
/// the MPI_STATUS(ES)_IGNORE sentinels.
fn check_status_pair(name: &str, c_status: usize, f_status: usize) -> Result<(), c_int> {
    let bad = |address: usize| {
        address == 0 || address == MPI_STATUS_IGNORE || address == MPI_STATUSES_IGNORE
    };
    if bad(c_status) || bad(f_status) {
        return Err(crate::global::raise_error(
            name,
            MPI_COMM_WORLD,
            MpiError::new(
                ErrorClass::Arg,
                "status is NULL or MPI_STATUS_IGNORE (there is nothing to convert)",
            ),
        ));
    }
    Ok(())
}

/// The C status and the Fortran one (`MPI_F_STATUS_SIZE` integers) hold
/// the same five fields in the same order under MPICH's ABI.
const _: () = assert!(
    std::mem::size_of::<MPI_Status>()
        == MPI_F_STATUS_SIZE as usize * std::mem::size_of::<MPI_Fint>()
);

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_c2f(
    c_status: *const MPI_Status,
    f_status: *mut MPI_Fint,
) -> c_int {
    if let Err(code) = check_status_pair("MPI_Status_c2f", c_status as usize, f_status as usize) {
        return code;
    }
    // SAFETY: both checked non-null; the caller's objects, same size.
    unsafe {
        std::ptr::copy_nonoverlapping(
            c_status.cast::<MPI_Fint>(),
            f_status,
            MPI_F_STATUS_SIZE as usize,
        )
    };
    MPI_SUCCESS
}
const _: fn_types::MPI_Status_c2f = PMPI_Status_c2f;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_f2c(
    f_status: *const MPI_Fint,
    c_status: *mut MPI_Status,
) -> c_int {
    if let Err(code) = check_status_pair("MPI_Status_f2c", c_status as usize, f_status as usize) {
        return code;
    }
    // SAFETY: both checked non-null; the caller's objects, same size.
    unsafe {
        std::ptr::copy_nonoverlapping(
            f_status,
            c_status.cast::<MPI_Fint>(),
            MPI_F_STATUS_SIZE as usize,
        )
    };
    MPI_SUCCESS
}
const _: fn_types::MPI_Status_f2c = PMPI_Status_f2c;
