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
use crate::coll::PMPI_Ibarrier;
use crate::global::entry;
use crate::handles::{request_handle, request_index};
use crate::large_count::int_and_large_count;
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

/// The arguments of an init call (and its copies of arrays), kept for
/// every MPI_Start.
struct Kept<T>(T);

// SAFETY: the raw pointers inside are the application's buffers, which MPI
// lets the library use until the persistent request is freed; they are
// only handed to entry points, under the library lock.
unsafe impl<T> Send for Kept<T> {}
// SAFETY: as for Send; the starter only reads them.
unsafe impl<T> Sync for Kept<T> {}

impl<T> Kept<T> {
    /// The arguments (a method, so that a closure captures the whole
    /// `Kept`, not the field inside).
    fn get(&self) -> &T {
        &self.0
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

/// The persistent form of one collective, int and `_c`, from one table
/// line: the init call keeps its arguments, with a copy of each array
/// marked `=> copy(LENGTH)` or `=> copy(LENGTH, WANTED)` (fields of
/// [`Lengths`], which `$lengths(name, comm, …)` finds), and every
/// MPI_Start runs `$generic`, the nonblocking call `collective!` made,
/// under the nonblocking call's name.
macro_rules! persistent {
    ($init:ident = $init_name:ident, $init_c:ident = $init_c_name:ident,
     $generic:path = $nonblocking_name:literal, $comm:ident,
     lengths $lengths:ident $([$($lengths_argument:expr),*])?,
     ($($argument:ident: $type:ty $(=> copy($length:ident $(, $wanted:ident)?))?),* $(,)?)) => {
        int_and_large_count!($init = $init_name, $init_c = $init_c_name, |name| {
            #[allow(unused_variables)]
            let lengths = match $lengths(name, $comm $($(, $lengths_argument)*)?) {
                Ok(lengths) => lengths,
                Err(code) => return code,
            };
            $(let $argument = persistent!(@keep $argument, lengths $(, $length $(, $wanted)?)?);)*
            let arguments = Kept(($($argument,)*));
            let starter: Starter = Arc::new(move |inner| {
                let ($($argument,)*) = arguments.get();
                let name = if <Count as crate::large_count::Count>::LARGE {
                    concat!($nonblocking_name, "_c")
                } else {
                    $nonblocking_name
                };
                // SAFETY: the arguments the application gave at init,
                // valid until it frees the persistent request; the copies
                // live in the closure.
                unsafe { $generic(name, $(persistent!(@give $argument $(, $length)?),)* inner) }
            });
            register(name, $comm, request, starter)
        }, ($($argument: $type,)* _info: MPI_Info, request: *mut MPI_Request));
    };
    (@keep $argument:ident, $lengths:ident) => {
        $argument
    };
    (@keep $argument:ident, $lengths:ident, $length:ident) => {
        // SAFETY: the array holds one entry per process it describes.
        unsafe { copied($argument, $lengths.$length, true) }
    };
    (@keep $argument:ident, $lengths:ident, $length:ident, $wanted:ident) => {
        // SAFETY: as above, where significant.
        unsafe { copied($argument, $lengths.$length, $lengths.$wanted) }
    };
    (@give $argument:ident) => {
        *$argument
    };
    (@give $argument:ident, $length:ident) => {
        address($argument)
    };
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Barrier_init(
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let starter: Starter = Arc::new(move |inner: *mut MPI_Request| {
        // SAFETY: a communicator handle and the request slot to fill.
        unsafe { PMPI_Ibarrier(comm, inner) }
    });
    register("MPI_Barrier_init", comm, request, starter)
}
const _: fn_types::MPI_Barrier_init = PMPI_Barrier_init;

/// How many entries the array arguments of an init call have: one per
/// process of the group they describe (the remote group of an
/// inter-communicator, or the local one; the neighbours of a topology),
/// and whether they are significant here (the root's).
#[derive(Default)]
struct Lengths {
    entries: usize,
    local_entries: usize,
    is_root: bool,
    in_degree: usize,
    out_degree: usize,
}

/// Collectives without arrays need no lengths.
fn nothing(_name: &str, _comm: MPI_Comm) -> Result<Lengths, c_int> {
    Ok(Lengths::default())
}

/// The lengths of `comm`'s arrays indexed by rank, with `root` (None for
/// rootless collectives); Err is the error code already raised.
fn ranks(name: &str, comm: MPI_Comm, root: Option<c_int>) -> Result<Lengths, c_int> {
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
        found = Some(Lengths {
            entries,
            local_entries,
            is_root,
            ..Lengths::default()
        });
        Ok(())
    });
    found.ok_or(code)
}

/// The lengths of a neighbourhood collective's arrays: the in- and
/// out-degree of `comm`'s topology.
fn neighbours(name: &str, comm: MPI_Comm) -> Result<Lengths, c_int> {
    let (in_degree, out_degree) = crate::coll::neighbor::degrees(name, comm)?;
    Ok(Lengths {
        in_degree,
        out_degree,
        ..Lengths::default()
    })
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

persistent!(PMPI_Bcast_init = MPI_Bcast_init, PMPI_Bcast_init_c = MPI_Bcast_init_c,
    crate::coll::ibcast = "MPI_Ibcast", comm, lengths nothing,
    (buffer: *mut c_void, count: Count, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent!(PMPI_Reduce_init = MPI_Reduce_init, PMPI_Reduce_init_c = MPI_Reduce_init_c,
    crate::coll::ireduce = "MPI_Ireduce", comm, lengths nothing,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: MPI_Datatype,
     op: MPI_Op, root: c_int, comm: MPI_Comm));
persistent!(PMPI_Allreduce_init = MPI_Allreduce_init, PMPI_Allreduce_init_c = MPI_Allreduce_init_c,
    crate::coll::iallreduce = "MPI_Iallreduce", comm, lengths nothing,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent!(PMPI_Reduce_scatter_block_init = MPI_Reduce_scatter_block_init,
    PMPI_Reduce_scatter_block_init_c = MPI_Reduce_scatter_block_init_c,
    crate::coll::prefix::ireduce_scatter_block = "MPI_Ireduce_scatter_block", comm, lengths nothing,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent!(PMPI_Reduce_scatter_init = MPI_Reduce_scatter_init,
    PMPI_Reduce_scatter_init_c = MPI_Reduce_scatter_init_c,
    crate::coll::prefix::ireduce_scatter = "MPI_Ireduce_scatter", comm, lengths ranks[None],
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count => copy(local_entries),
     datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm));
persistent!(PMPI_Scan_init = MPI_Scan_init, PMPI_Scan_init_c = MPI_Scan_init_c,
    crate::coll::prefix::iscan = "MPI_Iscan", comm, lengths nothing,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent!(PMPI_Exscan_init = MPI_Exscan_init, PMPI_Exscan_init_c = MPI_Exscan_init_c,
    crate::coll::prefix::iexscan = "MPI_Iexscan", comm, lengths nothing,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: MPI_Datatype,
     op: MPI_Op, comm: MPI_Comm));
persistent!(PMPI_Gather_init = MPI_Gather_init, PMPI_Gather_init_c = MPI_Gather_init_c,
    crate::coll::gather::igather = "MPI_Igather", comm, lengths nothing,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent!(PMPI_Gatherv_init = MPI_Gatherv_init, PMPI_Gatherv_init_c = MPI_Gatherv_init_c,
    crate::coll::gather::igatherv = "MPI_Igatherv", comm, lengths ranks[Some(root)],
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count => copy(entries, is_root),
     displs: *const Count => copy(entries, is_root), recvtype: MPI_Datatype, root: c_int,
     comm: MPI_Comm));
persistent!(PMPI_Scatter_init = MPI_Scatter_init, PMPI_Scatter_init_c = MPI_Scatter_init_c,
    crate::coll::gather::iscatter = "MPI_Iscatter", comm, lengths nothing,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm));
persistent!(PMPI_Scatterv_init = MPI_Scatterv_init, PMPI_Scatterv_init_c = MPI_Scatterv_init_c,
    crate::coll::gather::iscatterv = "MPI_Iscatterv", comm, lengths ranks[Some(root)],
    (sendbuf: *const c_void, sendcounts: *const Count => copy(entries, is_root),
     displs: *const Count => copy(entries, is_root), sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcount: Count, recvtype: MPI_Datatype, root: c_int,
     comm: MPI_Comm));
persistent!(PMPI_Allgather_init = MPI_Allgather_init, PMPI_Allgather_init_c = MPI_Allgather_init_c,
    crate::coll::gather::iallgather = "MPI_Iallgather", comm, lengths nothing,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: MPI_Datatype, comm: MPI_Comm));
persistent!(PMPI_Allgatherv_init = MPI_Allgatherv_init,
    PMPI_Allgatherv_init_c = MPI_Allgatherv_init_c,
    crate::coll::gather::iallgatherv = "MPI_Iallgatherv", comm, lengths ranks[None],
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count => copy(entries), displs: *const Count => copy(entries),
     recvtype: MPI_Datatype, comm: MPI_Comm));
persistent!(PMPI_Alltoall_init = MPI_Alltoall_init, PMPI_Alltoall_init_c = MPI_Alltoall_init_c,
    crate::coll::exchange::ialltoall = "MPI_Ialltoall", comm, lengths nothing,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: MPI_Datatype, comm: MPI_Comm));
persistent!(PMPI_Alltoallv_init = MPI_Alltoallv_init, PMPI_Alltoallv_init_c = MPI_Alltoallv_init_c,
    crate::coll::exchange::ialltoallv = "MPI_Ialltoallv", comm, lengths ranks[None],
    (sendbuf: *const c_void, sendcounts: *const Count => copy(entries),
     sdispls: *const Count => copy(entries), sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count => copy(entries), rdispls: *const Count => copy(entries),
     recvtype: MPI_Datatype, comm: MPI_Comm));
persistent!(PMPI_Alltoallw_init = MPI_Alltoallw_init, PMPI_Alltoallw_init_c = MPI_Alltoallw_init_c,
    crate::coll::exchange::ialltoallw = "MPI_Ialltoallw", comm, lengths ranks[None],
    (sendbuf: *const c_void, sendcounts: *const Count => copy(entries),
     sdispls: *const Count => copy(entries), sendtypes: *const MPI_Datatype => copy(entries),
     recvbuf: *mut c_void, recvcounts: *const Count => copy(entries),
     rdispls: *const Count => copy(entries), recvtypes: *const MPI_Datatype => copy(entries),
     comm: MPI_Comm));
persistent!(PMPI_Neighbor_allgather_init = MPI_Neighbor_allgather_init,
    PMPI_Neighbor_allgather_init_c = MPI_Neighbor_allgather_init_c,
    crate::coll::neighbor::ineighbor_allgather = "MPI_Ineighbor_allgather", comm, lengths nothing,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: MPI_Datatype, comm: MPI_Comm));
persistent!(PMPI_Neighbor_alltoall_init = MPI_Neighbor_alltoall_init,
    PMPI_Neighbor_alltoall_init_c = MPI_Neighbor_alltoall_init_c,
    crate::coll::neighbor::ineighbor_alltoall = "MPI_Ineighbor_alltoall", comm, lengths nothing,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: MPI_Datatype, comm: MPI_Comm));
persistent!(PMPI_Neighbor_allgatherv_init = MPI_Neighbor_allgatherv_init,
    PMPI_Neighbor_allgatherv_init_c = MPI_Neighbor_allgatherv_init_c,
    crate::coll::neighbor::ineighbor_allgatherv = "MPI_Ineighbor_allgatherv", comm,
    lengths neighbours,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count => copy(in_degree), displs: *const Count => copy(in_degree),
     recvtype: MPI_Datatype, comm: MPI_Comm));
persistent!(PMPI_Neighbor_alltoallv_init = MPI_Neighbor_alltoallv_init,
    PMPI_Neighbor_alltoallv_init_c = MPI_Neighbor_alltoallv_init_c,
    crate::coll::neighbor::ineighbor_alltoallv = "MPI_Ineighbor_alltoallv", comm,
    lengths neighbours,
    (sendbuf: *const c_void, sendcounts: *const Count => copy(out_degree),
     sdispls: *const Count => copy(out_degree), sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count => copy(in_degree), rdispls: *const Count => copy(in_degree),
     recvtype: MPI_Datatype, comm: MPI_Comm));
persistent!(PMPI_Neighbor_alltoallw_init = MPI_Neighbor_alltoallw_init,
    PMPI_Neighbor_alltoallw_init_c = MPI_Neighbor_alltoallw_init_c,
    crate::coll::neighbor::ineighbor_alltoallw = "MPI_Ineighbor_alltoallw", comm,
    lengths neighbours,
    (sendbuf: *const c_void, sendcounts: *const Count => copy(out_degree),
     sdispls: *const MPI_Aint => copy(out_degree),
     sendtypes: *const MPI_Datatype => copy(out_degree), recvbuf: *mut c_void,
     recvcounts: *const Count => copy(in_degree), rdispls: *const MPI_Aint => copy(in_degree),
     recvtypes: *const MPI_Datatype => copy(in_degree), comm: MPI_Comm));
