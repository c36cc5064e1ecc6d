//! Persistent collectives (MPI-4: MPI_Allreduce_init and friends).
//!
//! A persistent collective is its nonblocking collective, started again at
//! every MPI_Start with the arguments given at init: the init call keeps a
//! *starter* (a closure over those arguments that calls the `PMPI_I…`
//! entry point) with a persistent request slot, and MPI_Start runs it and
//! makes the collective's request the slot's active operation, exactly as
//! for persistent point-to-point. The starter runs outside the library lock
//! (the entry point takes it), so argument errors surface at MPI_Start
//! through the communicator's error handler, as the nonblocking call
//! raises them. The count, displacement and type arrays of the v- and
//! w-forms are copied at init where they are significant (clients such as
//! mpi4py free theirs once the init call returns).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use resmpi_core::request::Persistent;
use resmpi_core::{ErrorClass, MpiError};

use crate::abi::*;
use crate::coll::exchange::{PMPI_Ialltoall, PMPI_Ialltoall_c};
use crate::coll::gather::{
    PMPI_Iallgather, PMPI_Iallgather_c, PMPI_Igather, PMPI_Igather_c, PMPI_Iscatter,
    PMPI_Iscatter_c,
};
use crate::coll::neighbor::{
    PMPI_Ineighbor_allgather, PMPI_Ineighbor_allgather_c, PMPI_Ineighbor_alltoall,
    PMPI_Ineighbor_alltoall_c,
};
use crate::coll::prefix::{
    PMPI_Iexscan, PMPI_Iexscan_c, PMPI_Ireduce_scatter_block, PMPI_Ireduce_scatter_block_c,
    PMPI_Iscan, PMPI_Iscan_c,
};
use crate::coll::{
    PMPI_Iallreduce, PMPI_Iallreduce_c, PMPI_Ibarrier, PMPI_Ibcast, PMPI_Ibcast_c, PMPI_Ireduce,
    PMPI_Ireduce_c,
};
use crate::global::entry;
use crate::handles::{request_handle, request_index};
use crate::large_count::{int_and_large_count, Count};
use crate::p2p::comm_of;
use crate::requests::persistent_request;

/// Starts one instance of a persistent collective; writes its request.
type Starter = Arc<dyn Fn(*mut MPI_Request) -> c_int + Send + Sync>;

/// Starters by persistent request slot (removed when the request is freed).
static STARTERS: Mutex<Option<HashMap<u32, Starter>>> = Mutex::new(None);

fn with_starters<T>(body: impl FnOnce(&mut HashMap<u32, Starter>) -> T) -> T {
    let mut guard = STARTERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    body(guard.get_or_insert_with(HashMap::new))
}

/// The arguments of an init call, kept for every MPI_Start.
#[derive(Clone, Copy)]
struct Captured<T: Copy>(T);

// SAFETY: the raw pointers inside are the application's buffers, which MPI
// lets the library use until the persistent request is freed; they are
// only handed to entry points, under the library lock.
unsafe impl<T: Copy> Send for Captured<T> {}
// SAFETY: as for Send; the value is only copied out.
unsafe impl<T: Copy> Sync for Captured<T> {}

impl<T: Copy> Captured<T> {
    fn get(&self) -> T {
        self.0
    }
}

/// Make the persistent request for `starter` on `comm`.
fn register(name: &str, comm: MPI_Comm, request: *mut MPI_Request, starter: Starter) -> c_int {
    entry(name, comm, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let comm_index = comm_of(mpi, comm)?;
        let index = persistent_request(mpi, comm_index, Persistent::Collective)?;
        with_starters(|starters| starters.insert(index, starter));
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}

/// MPI_Start of `handle` if it is a persistent collective (None: it is not,
/// start it as any other persistent request).
///
/// # Safety
/// `handle` is the application's request handle.
pub unsafe fn start(name: &str, handle: MPI_Request) -> Option<c_int> {
    let index = request_index(handle)?;
    let starter = with_starters(|starters| starters.get(&index).cloned())?;
    let ready = entry(name, MPI_COMM_WORLD, |mpi, _| {
        match mpi.engine.state.requests.get(index) {
            Some(slot) if slot.inner.is_some() => Err(MpiError::new(
                ErrorClass::Request,
                "persistent request is already active",
            )),
            Some(_) => Ok(()),
            None => Err(MpiError::new(ErrorClass::Request, "request was freed")),
        }
    });
    if ready != MPI_SUCCESS {
        return Some(ready);
    }
    let mut inner = MPI_REQUEST_NULL;
    let code = starter(&mut inner);
    if code != MPI_SUCCESS {
        return Some(code);
    }
    Some(entry(name, MPI_COMM_WORLD, |mpi, _| {
        let inner = request_index(inner)
            .ok_or_else(|| MpiError::new(ErrorClass::Intern, "collective gave no request"))?;
        if let Some(slot) = mpi.engine.state.requests.get_mut(index) {
            slot.inner = Some(inner);
        }
        Ok(())
    }))
}

/// The persistent request at `index` was freed.
pub fn forget(index: u32) {
    with_starters(|starters| starters.remove(&index));
}

/// `$init` (type `$signature`) keeps its arguments and starts `$start`
/// with them at every MPI_Start; `$comm` names the communicator argument.
macro_rules! persistent_collective {
    ($init:ident, $signature:ident, $label:literal, $start:ident, $comm:ident, ($($argument:ident: $type:ty),*)) => {
        #[no_mangle]
        pub unsafe extern "C" fn $init(
            $($argument: $type,)*
            _info: MPI_Info,
            request: *mut MPI_Request,
        ) -> c_int {
            let arguments = Captured(($($argument,)*));
            let starter: Starter = Arc::new(move |inner: *mut MPI_Request| {
                let ($($argument,)*) = arguments.get();
                // SAFETY: the arguments the application gave at init, valid
                // until it frees the persistent request.
                unsafe { $start($($argument,)* inner) }
            });
            register($label, $comm, request, starter)
        }
        const _: fn_types::$signature = $init;
    };
}

persistent_collective!(PMPI_Barrier_init, MPI_Barrier_init, "MPI_Barrier_init", PMPI_Ibarrier, comm,
    (comm: MPI_Comm));
persistent_collective!(PMPI_Bcast_init, MPI_Bcast_init, "MPI_Bcast_init", PMPI_Ibcast, comm,
    (buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent_collective!(PMPI_Reduce_init, MPI_Reduce_init, "MPI_Reduce_init", PMPI_Ireduce, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype,
     op: MPI_Op, root: c_int, comm: MPI_Comm));
persistent_collective!(PMPI_Allreduce_init, MPI_Allreduce_init, "MPI_Allreduce_init", PMPI_Iallreduce,
    comm, (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent_collective!(PMPI_Reduce_scatter_block_init, MPI_Reduce_scatter_block_init,
    "MPI_Reduce_scatter_block_init", PMPI_Ireduce_scatter_block, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent_collective!(PMPI_Scan_init, MPI_Scan_init, "MPI_Scan_init", PMPI_Iscan, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent_collective!(PMPI_Exscan_init, MPI_Exscan_init, "MPI_Exscan_init", PMPI_Iexscan, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent_collective!(PMPI_Gather_init, MPI_Gather_init, "MPI_Gather_init", PMPI_Igather, comm,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent_collective!(PMPI_Scatter_init, MPI_Scatter_init, "MPI_Scatter_init", PMPI_Iscatter, comm,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent_collective!(PMPI_Allgather_init, MPI_Allgather_init, "MPI_Allgather_init",
    PMPI_Iallgather, comm, (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm));
persistent_collective!(PMPI_Alltoall_init, MPI_Alltoall_init, "MPI_Alltoall_init", PMPI_Ialltoall,
    comm, (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm));

// The large-count forms, started through the `_c` nonblocking ones.
persistent_collective!(PMPI_Bcast_init_c, MPI_Bcast_init_c, "MPI_Bcast_init_c", PMPI_Ibcast_c, comm,
    (buffer: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent_collective!(PMPI_Reduce_init_c, MPI_Reduce_init_c, "MPI_Reduce_init_c", PMPI_Ireduce_c, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype,
     op: MPI_Op, root: c_int, comm: MPI_Comm));
persistent_collective!(PMPI_Allreduce_init_c, MPI_Allreduce_init_c, "MPI_Allreduce_init_c", PMPI_Iallreduce_c,
    comm, (sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent_collective!(PMPI_Reduce_scatter_block_init_c, MPI_Reduce_scatter_block_init_c,
    "MPI_Reduce_scatter_block_init_c", PMPI_Ireduce_scatter_block_c, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: MPI_Count, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent_collective!(PMPI_Scan_init_c, MPI_Scan_init_c, "MPI_Scan_init_c", PMPI_Iscan_c, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent_collective!(PMPI_Exscan_init_c, MPI_Exscan_init_c, "MPI_Exscan_init_c", PMPI_Iexscan_c, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent_collective!(PMPI_Gather_init_c, MPI_Gather_init_c, "MPI_Gather_init_c", PMPI_Igather_c, comm,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent_collective!(PMPI_Scatter_init_c, MPI_Scatter_init_c, "MPI_Scatter_init_c", PMPI_Iscatter_c, comm,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent_collective!(PMPI_Allgather_init_c, MPI_Allgather_init_c, "MPI_Allgather_init_c",
    PMPI_Iallgather_c, comm, (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm));
persistent_collective!(PMPI_Alltoall_init_c, MPI_Alltoall_init_c, "MPI_Alltoall_init_c", PMPI_Ialltoall_c,
    comm, (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm));

/// What the array arguments of an init call are copied by: how many
/// entries they have (one per process of the group they describe: the
/// remote group of an inter-communicator, or the local one) and whether
/// this process is the root.
struct Shape {
    entries: usize,
    local_entries: usize,
    is_root: bool,
}

/// The shape of `comm` for arrays indexed by rank, with `root` (None for
/// rootless collectives); Err is the error code already raised.
fn shape(name: &str, comm: MPI_Comm, root: Option<c_int>) -> Result<Shape, c_int> {
    let mut found = None;
    let code = entry(name, comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        let communicator = mpi.comm(index)?;
        let local_entries = communicator.size() as usize;
        let entries = communicator
            .remote
            .as_ref()
            .map_or(local_entries, |remote| remote.group.len());
        let is_root = match root {
            Some(root) if communicator.is_inter() => root == MPI_ROOT,
            Some(root) => root == communicator.rank as c_int,
            None => true,
        };
        found = Some(Shape {
            entries,
            local_entries,
            is_root,
        });
        Ok(())
    });
    found.ok_or(code)
}

/// A copy of `entries` values at `pointer` if `wanted` and not NULL (NULL
/// or an empty copy otherwise; the collective reports a bad NULL itself).
///
/// # Safety
/// When wanted and non-null, `pointer` holds `entries` values.
unsafe fn copied<T: Copy>(pointer: *const T, entries: usize, wanted: bool) -> Option<Vec<T>> {
    if !wanted || pointer.is_null() {
        return None;
    }
    // SAFETY: by the caller's promise.
    Some(unsafe { std::slice::from_raw_parts(pointer, entries) }.to_vec())
}

/// The address to pass for a copied array: the copy, or NULL.
fn address<T>(copy: &Option<Vec<T>>) -> *const T {
    copy.as_ref().map_or(std::ptr::null(), |copy| copy.as_ptr())
}

/// Register `starter` after `shape` succeeded; the shape's error otherwise.
macro_rules! with_shape {
    ($name:expr, $comm:expr, $root:expr, |$shape:ident| $body:expr) => {
        match shape($name, $comm, $root) {
            Ok($shape) => $body,
            Err(code) => code,
        }
    };
}

unsafe fn reduce_scatter_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    with_shape!(name, comm, None, |shape| {
        // SAFETY: one count per process of the local group.
        let counts = unsafe { copied(recvcounts, shape.local_entries, true) };
        let arguments = Captured((sendbuf, recvbuf, datatype, op, comm));
        let starter: Starter = Arc::new(move |inner| {
            let (sendbuf, recvbuf, datatype, op, comm) = arguments.get();
            // SAFETY: as in `persistent_collective!`; the copy lives in the closure.
            unsafe {
                crate::coll::prefix::ireduce_scatter(
                    if C::LARGE {
                        concat!("MPI_Ireduce_scatter", "_c")
                    } else {
                        "MPI_Ireduce_scatter"
                    },
                    sendbuf,
                    recvbuf,
                    address(&counts),
                    datatype,
                    op,
                    comm,
                    inner,
                )
            }
        });
        register(name, comm, request, starter)
    })
}
int_and_large_count!(PMPI_Reduce_scatter_init = MPI_Reduce_scatter_init, PMPI_Reduce_scatter_init_c = MPI_Reduce_scatter_init_c, reduce_scatter_init, (
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));

unsafe fn gatherv_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const C,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    with_shape!(name, comm, Some(root), |shape| {
        // SAFETY: significant (and so valid) at the root only.
        let (counts, displacements) = unsafe {
            (
                copied(recvcounts, shape.entries, shape.is_root),
                copied(displs, shape.entries, shape.is_root),
            )
        };
        let arguments = Captured((sendbuf, sendcount, sendtype, recvbuf, recvtype, root, comm));
        let starter: Starter = Arc::new(move |inner| {
            let (sendbuf, sendcount, sendtype, recvbuf, recvtype, root, comm) = arguments.get();
            // SAFETY: as in `persistent_collective!`; the copies live in the closure.
            unsafe {
                crate::coll::gather::igatherv(
                    if C::LARGE {
                        concat!("MPI_Igatherv", "_c")
                    } else {
                        "MPI_Igatherv"
                    },
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    address(&counts),
                    address(&displacements),
                    recvtype,
                    root,
                    comm,
                    inner,
                )
            }
        });
        register(name, comm, request, starter)
    })
}
int_and_large_count!(PMPI_Gatherv_init = MPI_Gatherv_init, PMPI_Gatherv_init_c = MPI_Gatherv_init_c, gatherv_init, (
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const Count,
    displs: *const Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));

unsafe fn scatterv_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    with_shape!(name, comm, Some(root), |shape| {
        // SAFETY: significant (and so valid) at the root only.
        let (counts, displacements) = unsafe {
            (
                copied(sendcounts, shape.entries, shape.is_root),
                copied(displs, shape.entries, shape.is_root),
            )
        };
        let arguments = Captured((sendbuf, sendtype, recvbuf, recvcount, recvtype, root, comm));
        let starter: Starter = Arc::new(move |inner| {
            let (sendbuf, sendtype, recvbuf, recvcount, recvtype, root, comm) = arguments.get();
            // SAFETY: as in `persistent_collective!`; the copies live in the closure.
            unsafe {
                crate::coll::gather::iscatterv(
                    if C::LARGE {
                        concat!("MPI_Iscatterv", "_c")
                    } else {
                        "MPI_Iscatterv"
                    },
                    sendbuf,
                    address(&counts),
                    address(&displacements),
                    sendtype,
                    recvbuf,
                    recvcount,
                    recvtype,
                    root,
                    comm,
                    inner,
                )
            }
        });
        register(name, comm, request, starter)
    })
}
int_and_large_count!(PMPI_Scatterv_init = MPI_Scatterv_init, PMPI_Scatterv_init_c = MPI_Scatterv_init_c, scatterv_init, (
    sendbuf: *const c_void,
    sendcounts: *const Count,
    displs: *const Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));

unsafe fn allgatherv_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    with_shape!(name, comm, None, |shape| {
        // SAFETY: one entry per process of the group received from.
        let (counts, displacements) = unsafe {
            (
                copied(recvcounts, shape.entries, true),
                copied(displs, shape.entries, true),
            )
        };
        let arguments = Captured((sendbuf, sendcount, sendtype, recvbuf, recvtype, comm));
        let starter: Starter = Arc::new(move |inner| {
            let (sendbuf, sendcount, sendtype, recvbuf, recvtype, comm) = arguments.get();
            // SAFETY: as in `persistent_collective!`; the copies live in the closure.
            unsafe {
                crate::coll::gather::iallgatherv(
                    if C::LARGE {
                        concat!("MPI_Iallgatherv", "_c")
                    } else {
                        "MPI_Iallgatherv"
                    },
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    address(&counts),
                    address(&displacements),
                    recvtype,
                    comm,
                    inner,
                )
            }
        });
        register(name, comm, request, starter)
    })
}
int_and_large_count!(PMPI_Allgatherv_init = MPI_Allgatherv_init, PMPI_Allgatherv_init_c = MPI_Allgatherv_init_c, allgatherv_init, (
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const Count,
    displs: *const Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));

unsafe fn alltoallv_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    with_shape!(name, comm, None, |shape| {
        let entries = shape.entries;
        // SAFETY: one entry per process of the group exchanged with.
        let arrays = unsafe {
            [
                copied(sendcounts, entries, true),
                copied(sdispls, entries, true),
                copied(recvcounts, entries, true),
                copied(rdispls, entries, true),
            ]
        };
        let arguments = Captured((sendbuf, sendtype, recvbuf, recvtype, comm));
        let starter: Starter = Arc::new(move |inner| {
            let (sendbuf, sendtype, recvbuf, recvtype, comm) = arguments.get();
            let [sendcounts, sdispls, recvcounts, rdispls] = &arrays;
            // SAFETY: as in `persistent_collective!`; the copies live in the closure.
            unsafe {
                crate::coll::exchange::ialltoallv(
                    if C::LARGE {
                        concat!("MPI_Ialltoallv", "_c")
                    } else {
                        "MPI_Ialltoallv"
                    },
                    sendbuf,
                    address(sendcounts),
                    address(sdispls),
                    sendtype,
                    recvbuf,
                    address(recvcounts),
                    address(rdispls),
                    recvtype,
                    comm,
                    inner,
                )
            }
        });
        register(name, comm, request, starter)
    })
}
int_and_large_count!(PMPI_Alltoallv_init = MPI_Alltoallv_init, PMPI_Alltoallv_init_c = MPI_Alltoallv_init_c, alltoallv_init, (
    sendbuf: *const c_void,
    sendcounts: *const Count,
    sdispls: *const Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const Count,
    rdispls: *const Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));

unsafe fn alltoallw_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const C,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const C,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    with_shape!(name, comm, None, |shape| {
        let entries = shape.entries;
        // SAFETY: one entry per process of the group exchanged with.
        let (arrays, types) = unsafe {
            (
                [
                    copied(sendcounts, entries, true),
                    copied(sdispls, entries, true),
                    copied(recvcounts, entries, true),
                    copied(rdispls, entries, true),
                ],
                [
                    copied(sendtypes, entries, true),
                    copied(recvtypes, entries, true),
                ],
            )
        };
        let arguments = Captured((sendbuf, recvbuf, comm));
        let starter: Starter = Arc::new(move |inner| {
            let (sendbuf, recvbuf, comm) = arguments.get();
            let [sendcounts, sdispls, recvcounts, rdispls] = &arrays;
            let [sendtypes, recvtypes] = &types;
            // SAFETY: as in `persistent_collective!`; the copies live in the closure.
            unsafe {
                crate::coll::exchange::ialltoallw(
                    if C::LARGE {
                        concat!("MPI_Ialltoallw", "_c")
                    } else {
                        "MPI_Ialltoallw"
                    },
                    sendbuf,
                    address(sendcounts),
                    address(sdispls),
                    address(sendtypes),
                    recvbuf,
                    address(recvcounts),
                    address(rdispls),
                    address(recvtypes),
                    comm,
                    inner,
                )
            }
        });
        register(name, comm, request, starter)
    })
}
int_and_large_count!(PMPI_Alltoallw_init = MPI_Alltoallw_init, PMPI_Alltoallw_init_c = MPI_Alltoallw_init_c, alltoallw_init, (
    sendbuf: *const c_void,
    sendcounts: *const Count,
    sdispls: *const Count,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const Count,
    rdispls: *const Count,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));

persistent_collective!(PMPI_Neighbor_allgather_init, MPI_Neighbor_allgather_init,
    "MPI_Neighbor_allgather_init", PMPI_Ineighbor_allgather, comm,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm));
persistent_collective!(PMPI_Neighbor_alltoall_init, MPI_Neighbor_alltoall_init,
    "MPI_Neighbor_alltoall_init", PMPI_Ineighbor_alltoall, comm,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm));

persistent_collective!(PMPI_Neighbor_allgather_init_c, MPI_Neighbor_allgather_init_c,
    "MPI_Neighbor_allgather_init_c", PMPI_Ineighbor_allgather_c, comm,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm));
persistent_collective!(PMPI_Neighbor_alltoall_init_c, MPI_Neighbor_alltoall_init_c,
    "MPI_Neighbor_alltoall_init_c", PMPI_Ineighbor_alltoall_c, comm,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm));

/// Register a persistent neighbourhood v/w collective after its degrees are
/// known; `make` builds the starter from (in-degree, out-degree).
fn neighbour_init(
    name: &str,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    make: impl FnOnce(usize, usize) -> Starter,
) -> c_int {
    match crate::coll::neighbor::degrees(name, comm) {
        Ok((in_degree, out_degree)) => register(name, comm, request, make(in_degree, out_degree)),
        Err(code) => code,
    }
}

unsafe fn neighbor_allgatherv_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    neighbour_init(name, comm, request, |in_degree, _| {
        // SAFETY: one entry per incoming neighbour.
        let arrays = unsafe {
            [
                copied(recvcounts, in_degree, true),
                copied(displs, in_degree, true),
            ]
        };
        let arguments = Captured((sendbuf, sendcount, sendtype, recvbuf, recvtype, comm));
        Arc::new(move |inner| {
            let (sendbuf, sendcount, sendtype, recvbuf, recvtype, comm) = arguments.get();
            let [counts, displacements] = &arrays;
            // SAFETY: as in `persistent_collective!`; the copies live in the closure.
            unsafe {
                crate::coll::neighbor::ineighbor_allgatherv(
                    if C::LARGE {
                        concat!("MPI_Ineighbor_allgatherv", "_c")
                    } else {
                        "MPI_Ineighbor_allgatherv"
                    },
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    address(counts),
                    address(displacements),
                    recvtype,
                    comm,
                    inner,
                )
            }
        })
    })
}
int_and_large_count!(PMPI_Neighbor_allgatherv_init = MPI_Neighbor_allgatherv_init, PMPI_Neighbor_allgatherv_init_c = MPI_Neighbor_allgatherv_init_c, neighbor_allgatherv_init, (
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const Count,
    displs: *const Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));

unsafe fn neighbor_alltoallv_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    neighbour_init(name, comm, request, |in_degree, out_degree| {
        // SAFETY: one entry per outgoing / incoming neighbour.
        let arrays = unsafe {
            [
                copied(sendcounts, out_degree, true),
                copied(sdispls, out_degree, true),
                copied(recvcounts, in_degree, true),
                copied(rdispls, in_degree, true),
            ]
        };
        let arguments = Captured((sendbuf, sendtype, recvbuf, recvtype, comm));
        Arc::new(move |inner| {
            let (sendbuf, sendtype, recvbuf, recvtype, comm) = arguments.get();
            let [sendcounts, sdispls, recvcounts, rdispls] = &arrays;
            // SAFETY: as in `persistent_collective!`; the copies live in the closure.
            unsafe {
                crate::coll::neighbor::ineighbor_alltoallv(
                    if C::LARGE {
                        concat!("MPI_Ineighbor_alltoallv", "_c")
                    } else {
                        "MPI_Ineighbor_alltoallv"
                    },
                    sendbuf,
                    address(sendcounts),
                    address(sdispls),
                    sendtype,
                    recvbuf,
                    address(recvcounts),
                    address(rdispls),
                    recvtype,
                    comm,
                    inner,
                )
            }
        })
    })
}
int_and_large_count!(PMPI_Neighbor_alltoallv_init = MPI_Neighbor_alltoallv_init, PMPI_Neighbor_alltoallv_init_c = MPI_Neighbor_alltoallv_init_c, neighbor_alltoallv_init, (
    sendbuf: *const c_void,
    sendcounts: *const Count,
    sdispls: *const Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const Count,
    rdispls: *const Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));

unsafe fn neighbor_alltoallw_init<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    neighbour_init(name, comm, request, |in_degree, out_degree| {
        // SAFETY: one entry per outgoing / incoming neighbour.
        let (counts, displacements, types) = unsafe {
            (
                [
                    copied(sendcounts, out_degree, true),
                    copied(recvcounts, in_degree, true),
                ],
                [
                    copied(sdispls, out_degree, true),
                    copied(rdispls, in_degree, true),
                ],
                [
                    copied(sendtypes, out_degree, true),
                    copied(recvtypes, in_degree, true),
                ],
            )
        };
        let arguments = Captured((sendbuf, recvbuf, comm));
        Arc::new(move |inner| {
            let (sendbuf, recvbuf, comm) = arguments.get();
            let [sendcounts, recvcounts] = &counts;
            let [sdispls, rdispls] = &displacements;
            let [sendtypes, recvtypes] = &types;
            // SAFETY: as in `persistent_collective!`; the copies live in the closure.
            unsafe {
                crate::coll::neighbor::ineighbor_alltoallw(
                    if C::LARGE {
                        concat!("MPI_Ineighbor_alltoallw", "_c")
                    } else {
                        "MPI_Ineighbor_alltoallw"
                    },
                    sendbuf,
                    address(sendcounts),
                    address(sdispls),
                    address(sendtypes),
                    recvbuf,
                    address(recvcounts),
                    address(rdispls),
                    address(recvtypes),
                    comm,
                    inner,
                )
            }
        })
    })
}
int_and_large_count!(PMPI_Neighbor_alltoallw_init = MPI_Neighbor_alltoallw_init, PMPI_Neighbor_alltoallw_init_c = MPI_Neighbor_alltoallw_init_c, neighbor_alltoallw_init, (
    sendbuf: *const c_void,
    sendcounts: *const Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
));
