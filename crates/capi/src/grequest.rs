//! Generalized requests (MPI_Grequest_start / MPI_Grequest_complete): a
//! request the application completes itself, with its query, free and
//! cancel callbacks.
//!
//! The request lives in the ordinary request table (operation
//! `Generalized`), so Wait/Test and their any/all/some forms handle it like
//! any other; this module keeps the callbacks and runs them: the query
//! function when the request's status is asked for (completion, or
//! MPI_Request_get_status), the free function when the request is
//! released (by Wait/Test, or at once by MPI_Request_free, as MPICH does),
//! the cancel function on MPI_Cancel. A callback's error code
//! becomes the call's error. Callbacks run while the library works on the
//! request: they may use the status setters and datatype queries (which
//! need no library state), as queries in practice do; any other MPI call
//! from one ends the job with a message rather than deadlocking.
//!
//! Below MPI_THREAD_MULTIPLE no other thread may call MPI while one waits,
//! so MPI_Wait (or Waitall) on a generalized request that is not complete
//! could never return: it is an error instead. Under MPI_THREAD_MULTIPLE
//! another thread may complete it while this one waits (the wait releases
//! the library lock between progress rounds), so the wait waits.

use std::collections::HashMap;
use std::sync::Mutex;

use resmpi_core::request::{Operation, Request};
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use crate::abi::*;
use crate::global::entry;
use crate::handles::{request_handle, request_index};
use crate::requests::{empty_status, write_status};

/// The callbacks of one generalized request.
struct Callbacks {
    query: MPI_Grequest_query_function,
    free: MPI_Grequest_free_function,
    cancel: MPI_Grequest_cancel_function,
    extra_state: usize,
}

/// Callbacks by request slot.
static CALLBACKS: Mutex<Option<HashMap<u32, Callbacks>>> = Mutex::new(None);

fn with_callbacks<T>(body: impl FnOnce(&mut HashMap<u32, Callbacks>) -> T) -> T {
    let mut guard = CALLBACKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    body(guard.get_or_insert_with(HashMap::new))
}

/// A callback's return code as a result.
fn checked(code: c_int, what: &str) -> MpiResult<()> {
    if code == MPI_SUCCESS {
        return Ok(());
    }
    let class = ErrorClass::from_i32(code).unwrap_or(ErrorClass::Other);
    Err(MpiError::new(
        class,
        format!("the generalized request's {what} function returned error {code}"),
    ))
}

/// Run the query function into `status` (a default status when there is
/// none: source and tag ANY, no error, not cancelled, no elements).
unsafe fn run_query(callbacks: &Callbacks, status: *mut MPI_Status) -> MpiResult<()> {
    let mut scratch = MPI_Status::default();
    let target = if status.is_null() || status as usize == MPI_STATUS_IGNORE {
        &mut scratch as *mut MPI_Status
    } else {
        status
    };
    // SAFETY: `target` is the caller's status or the scratch one.
    unsafe { write_status(target, &empty_status()) };
    match callbacks.query {
        // SAFETY: the application's function and its extra state.
        Some(query) => checked(
            unsafe { query(callbacks.extra_state as *mut c_void, target) },
            "query",
        ),
        None => Ok(()),
    }
}

/// Request `index` (already taken out of the table) is done: query into
/// `status` if `query`, then free. The first error is returned.
///
/// # Safety
/// `status` is NULL, MPI_STATUS_IGNORE or a valid status.
pub unsafe fn finish(index: u32, status: *mut MPI_Status, query: bool) -> MpiResult<()> {
    let Some(callbacks) = with_callbacks(|table| table.remove(&index)) else {
        return Ok(());
    };
    let queried = if query {
        // SAFETY: by the caller's promise.
        unsafe { run_query(&callbacks, status) }
    } else {
        Ok(())
    };
    let freed = match callbacks.free {
        // SAFETY: the application's function and its extra state.
        Some(free) => checked(
            unsafe { free(callbacks.extra_state as *mut c_void) },
            "free",
        ),
        None => Ok(()),
    };
    queried.and(freed)
}

/// MPI_Request_get_status on complete generalized request `index`.
///
/// # Safety
/// `status` is NULL, MPI_STATUS_IGNORE or a valid status.
pub unsafe fn query(index: u32, status: *mut MPI_Status) -> MpiResult<()> {
    with_callbacks(|table| match table.get(&index) {
        // SAFETY: by the caller's promise.
        Some(callbacks) => unsafe { run_query(callbacks, status) },
        None => Ok(()),
    })
}

/// MPI_Cancel on generalized request `index`.
pub fn cancel(index: u32, complete: bool) -> MpiResult<()> {
    with_callbacks(|table| {
        match table.get(&index).and_then(|callbacks| {
            callbacks
                .cancel
                .map(|cancel| (cancel, callbacks.extra_state))
        }) {
            // SAFETY: the application's function and its extra state.
            Some((cancel, extra_state)) => checked(
                unsafe { cancel(extra_state as *mut c_void, complete as c_int) },
                "cancel",
            ),
            None => Ok(()),
        }
    })
}

/// MPI_Wait on `index` could never return if it is a generalized request
/// nobody can complete any more (see the module comment).
pub fn check_waitable(mpi: &Mpi, index: u32) -> MpiResult<()> {
    if is_stuck(mpi, index) {
        return Err(stuck());
    }
    Ok(())
}

/// MPI_Waitany/Waitsome over `slots`: an error if every request that could
/// complete is a generalized one nobody can complete any more.
pub fn check_any_waitable(mpi: &Mpi, slots: &[Option<u32>]) -> MpiResult<()> {
    let live: Vec<u32> = slots
        .iter()
        .flatten()
        .copied()
        .filter(|index| {
            mpi.engine
                .state
                .requests
                .get(*index)
                .is_some_and(|request| request.persistent.is_none())
        })
        .collect();
    let persistent_active = slots.iter().flatten().any(|index| {
        mpi.engine
            .state
            .requests
            .get(*index)
            .is_some_and(|request| request.persistent.is_some() && request.inner.is_some())
    });
    if !persistent_active && !live.is_empty() && live.iter().all(|index| is_stuck(mpi, *index)) {
        return Err(stuck());
    }
    Ok(())
}

fn is_stuck(mpi: &Mpi, index: u32) -> bool {
    !crate::init::thread_multiple()
        && matches!(
            mpi.engine.state.requests.get(index),
            Some(Request {
                operation: Operation::Generalized,
                complete: false,
                ..
            })
        )
}

fn stuck() -> MpiError {
    MpiError::new(
        ErrorClass::Request,
        "waiting for a generalized request that is not complete: below \
         MPI_THREAD_MULTIPLE no other thread can call MPI_Grequest_complete meanwhile",
    )
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Grequest_start(
    query_fn: MPI_Grequest_query_function,
    free_fn: MPI_Grequest_free_function,
    cancel_fn: MPI_Grequest_cancel_function,
    extra_state: *mut c_void,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Grequest_start", MPI_COMM_WORLD, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let index = mpi.engine.insert_request(Request {
            operation: Operation::Generalized,
            comm: resmpi_core::WORLD,
            complete: false,
            status: empty_status(),
            generation: 0,
            persistent: None,
            free_when_complete: false,
            inner: None,
        })?;
        with_callbacks(|table| {
            table.insert(
                index,
                Callbacks {
                    query: query_fn,
                    free: free_fn,
                    cancel: cancel_fn,
                    extra_state: extra_state as usize,
                },
            )
        });
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}
const _: fn_types::MPI_Grequest_start = PMPI_Grequest_start;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Grequest_complete(request: MPI_Request) -> c_int {
    entry("MPI_Grequest_complete", MPI_COMM_WORLD, |mpi, _| {
        let requests = &mut mpi.engine.state.requests;
        let index = request_index(request)
            .filter(|index| {
                requests
                    .get(*index)
                    .is_some_and(|slot| matches!(slot.operation, Operation::Generalized))
            })
            .ok_or_else(|| MpiError::new(ErrorClass::Request, "not a generalized request"))?;
        let slot = requests.get_mut(index).expect("checked");
        slot.complete = true;
        if slot.free_when_complete {
            // Freed by MPI_Request_free before completing (its free
            // function has run): release the slot now.
            requests.remove(index);
        }
        Ok(())
    })
}
const _: fn_types::MPI_Grequest_complete = PMPI_Grequest_complete;
