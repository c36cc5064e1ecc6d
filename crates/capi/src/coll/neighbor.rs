//! Neighbourhood collectives (MPI_Neighbor_allgather/alltoall and their v-
//! and w-forms, blocking and nonblocking) on Cartesian, graph and
//! distributed-graph communicators: one schedule of a send per outgoing
//! and a receive per incoming neighbour, all posted at once.
//!
//! Order: a Cartesian process's neighbours are, per dimension, the one in
//! the negative direction then the positive one (MPI_PROC_NULL off a
//! non-periodic edge: nothing moves). With a periodic dimension of extent
//! 1 or 2 both are the same process, so two messages travel between the
//! pair; the receives are posted positive side first so that the block a
//! neighbour sends downwards lands in the slot of the side it came from.
//! Messages to oneself are local copies, paired the same way.
//!
//! Buffers of any datatype: a non-contiguous block is packed into a
//! staging copy before the schedule starts (inputs) or unpacked from one
//! when it completes (outputs), as the other collectives do (`Staging`).

use resmpi_core::coll::Block;
use resmpi_core::topology::{self, Topology};
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use super::{extent_of, launch, request_out, Staging, Usage};
use crate::abi::*;
use crate::global::{entry, Registry};
#[allow(unused_imports)]
use crate::large_count::{collective, Count};
use crate::p2p::comm_of;

/// This process's neighbourhood: incoming and outgoing neighbours in MPI
/// order (None for MPI_PROC_NULL) and the order to post receives in.
struct Neighbours {
    sources: Vec<Option<u32>>,
    destinations: Vec<Option<u32>>,
    receive_order: Vec<usize>,
}

fn neighbours(mpi: &Mpi, comm_index: usize) -> MpiResult<Neighbours> {
    let comm = mpi.comm(comm_index)?;
    let rank = comm.rank;
    let topology = comm.topology.clone().ok_or_else(|| {
        MpiError::new(
            ErrorClass::Topology,
            "neighbourhood collectives need a Cartesian, graph or distributed-graph communicator",
        )
    })?;
    let ranks = |list: &[i32]| -> Vec<Option<u32>> {
        list.iter().map(|rank| u32::try_from(*rank).ok()).collect()
    };
    Ok(match &*topology {
        Topology::Cartesian { dims, periods } => {
            let mut sides = Vec::with_capacity(2 * dims.len());
            for direction in 0..dims.len() {
                let (negative, positive) = topology::cart_shift(dims, periods, rank, direction, 1);
                sides.push(negative);
                sides.push(positive);
            }
            Neighbours {
                sources: sides.clone(),
                destinations: sides,
                receive_order: (0..dims.len()).flat_map(|d| [2 * d + 1, 2 * d]).collect(),
            }
        }
        Topology::Graph { index, edges } => {
            let list = ranks(topology::graph_neighbors(index, edges, rank));
            Neighbours {
                receive_order: (0..list.len()).collect(),
                sources: list.clone(),
                destinations: list,
            }
        }
        Topology::DistGraph {
            sources,
            destinations,
            ..
        } => Neighbours {
            receive_order: (0..sources.len()).collect(),
            sources: ranks(sources),
            destinations: ranks(destinations),
        },
    })
}

/// Build and launch the schedule: `sends[j]` goes to outgoing neighbour
/// j, incoming neighbour i's message lands in `receives[i]`.
fn exchange(
    mpi: &mut Mpi,
    comm_index: usize,
    neighbours: &Neighbours,
    sends: &[Block],
    receives: &[Block],
    staging: Staging,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let me = mpi.comm(comm_index)?.rank;
    let mut schedule = mpi.engine.new_schedule(comm_index)?;
    let mut to_self = Vec::new();
    for (destination, block) in neighbours.destinations.iter().zip(sends) {
        let (data, length) = (block.data, block.length_bytes);
        match destination {
            Some(peer) if *peer == me => to_self.push((data, length)),
            Some(peer) => schedule.send(*peer, data, length),
            None => {}
        }
    }
    let mut from_self = Vec::new();
    for &slot in &neighbours.receive_order {
        let (data, length) = (receives[slot].data, receives[slot].length_bytes);
        match neighbours.sources[slot] {
            Some(peer) if peer == me => from_self.push((data, length)),
            Some(peer) => schedule.receive(peer, data, length),
            None => {}
        }
    }
    for ((from, sent), (to, room)) in to_self.into_iter().zip(from_self) {
        if sent > room {
            return Err(MpiError::new(
                ErrorClass::Truncate,
                format!("a {sent}-byte block sent to itself does not fit {room} bytes"),
            ));
        }
        schedule.copy(from, to, sent);
    }
    schedule.fence();
    launch(mpi, schedule, staging, request)
}

/// `entries` consecutive blocks of `count` elements of `datatype` from
/// `base` (the fixed-size forms).
fn even_blocks(
    staging: &mut Staging,
    base: *const c_void,
    entries: usize,
    count: MPI_Count,
    datatype: MPI_Datatype,
    usage: Usage,
) -> MpiResult<Vec<Block>> {
    let stride = extent_of(datatype)? * count.max(0) as isize;
    (0..entries)
        .map(|i| staging.block(base, i as isize * stride, count, datatype, usage))
        .collect()
}

/// Blocks of `counts[i]` elements of `datatype` at `displacements[i]`
/// extents from `base` (the v-forms).
///
/// # Safety
/// `counts` and `displacements` hold `entries` ints (checked for NULL).
unsafe fn displaced_blocks<C: Count>(
    staging: &mut Staging,
    base: *const c_void,
    entries: usize,
    counts: *const C,
    displacements: *const C,
    datatype: MPI_Datatype,
    usage: Usage,
) -> MpiResult<Vec<Block>> {
    if entries > 0 && (counts.is_null() || displacements.is_null()) {
        return Err(MpiError::new(
            ErrorClass::Arg,
            "a count or displacement array is NULL",
        ));
    }
    let extent = extent_of(datatype)?;
    (0..entries)
        .map(|i| {
            // SAFETY: by the caller's promise.
            let (count, displacement) = unsafe { (*counts.add(i), *displacements.add(i)) };
            let displacement: MPI_Count = displacement.into();
            staging.block(
                base,
                displacement as isize * extent,
                count.into(),
                datatype,
                usage,
            )
        })
        .collect()
}

/// Shared argument work: the communicator and its neighbourhood.
fn prepare(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<(usize, Neighbours)> {
    let index = comm_of(mpi, comm)?;
    let neighbours = neighbours(mpi, index)?;
    Ok((index, neighbours))
}

unsafe fn allgather_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, neighbours) = prepare(mpi, comm)?;
    let mut staging = Staging::default();
    let send = staging.block(sendbuf, 0, sendcount.into(), sendtype, Usage::Input)?;
    let sends = vec![send; neighbours.destinations.len()];
    let receives = even_blocks(
        &mut staging,
        recvbuf,
        neighbours.sources.len(),
        recvcount.into(),
        recvtype,
        Usage::Output,
    )?;
    exchange(mpi, index, &neighbours, &sends, &receives, staging, request)
}

unsafe fn alltoall_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, neighbours) = prepare(mpi, comm)?;
    let mut staging = Staging::default();
    let sends = even_blocks(
        &mut staging,
        sendbuf,
        neighbours.destinations.len(),
        sendcount.into(),
        sendtype,
        Usage::Input,
    )?;
    let receives = even_blocks(
        &mut staging,
        recvbuf,
        neighbours.sources.len(),
        recvcount.into(),
        recvtype,
        Usage::Output,
    )?;
    exchange(mpi, index, &neighbours, &sends, &receives, staging, request)
}

unsafe fn allgatherv_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, neighbours) = prepare(mpi, comm)?;
    let mut staging = Staging::default();
    let send = staging.block(sendbuf, 0, sendcount.into(), sendtype, Usage::Input)?;
    let sends = vec![send; neighbours.destinations.len()];
    // SAFETY: the caller's arrays hold one entry per incoming neighbour.
    let receives = unsafe {
        displaced_blocks(
            &mut staging,
            recvbuf,
            neighbours.sources.len(),
            recvcounts,
            displs,
            recvtype,
            Usage::Output,
        )?
    };
    exchange(mpi, index, &neighbours, &sends, &receives, staging, request)
}

unsafe fn alltoallv_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, neighbours) = prepare(mpi, comm)?;
    let mut staging = Staging::default();
    // SAFETY: the caller's arrays hold one entry per neighbour.
    let (sends, receives) = unsafe {
        (
            displaced_blocks(
                &mut staging,
                sendbuf,
                neighbours.destinations.len(),
                sendcounts,
                sdispls,
                sendtype,
                Usage::Input,
            )?,
            displaced_blocks(
                &mut staging,
                recvbuf,
                neighbours.sources.len(),
                recvcounts,
                rdispls,
                recvtype,
                Usage::Output,
            )?,
        )
    };
    exchange(mpi, index, &neighbours, &sends, &receives, staging, request)
}

/// The w-form's blocks: per-neighbour types, byte displacements.
///
/// # Safety
/// The arrays hold `entries` values (checked for NULL).
unsafe fn typed_blocks<C: Count>(
    staging: &mut Staging,
    base: *const c_void,
    entries: usize,
    counts: *const C,
    displacements: *const MPI_Aint,
    types: *const MPI_Datatype,
    usage: Usage,
) -> MpiResult<Vec<Block>> {
    if entries > 0 && (counts.is_null() || displacements.is_null() || types.is_null()) {
        return Err(MpiError::new(
            ErrorClass::Arg,
            "a count, displacement or type array is NULL",
        ));
    }
    (0..entries)
        .map(|i| {
            // SAFETY: by the caller's promise.
            let (count, displacement, datatype) =
                unsafe { (*counts.add(i), *displacements.add(i), *types.add(i)) };
            staging.block(base, displacement as isize, count.into(), datatype, usage)
        })
        .collect()
}

unsafe fn alltoallw_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, neighbours) = prepare(mpi, comm)?;
    let mut staging = Staging::default();
    // SAFETY: the caller's arrays hold one entry per neighbour.
    let (sends, receives) = unsafe {
        (
            typed_blocks(
                &mut staging,
                sendbuf,
                neighbours.destinations.len(),
                sendcounts,
                sdispls,
                sendtypes,
                Usage::Input,
            )?,
            typed_blocks(
                &mut staging,
                recvbuf,
                neighbours.sources.len(),
                recvcounts,
                rdispls,
                recvtypes,
                Usage::Output,
            )?,
        )
    };
    exchange(mpi, index, &neighbours, &sends, &receives, staging, request)
}

collective!(PMPI_Neighbor_allgather = MPI_Neighbor_allgather,
    PMPI_Neighbor_allgather_c = MPI_Neighbor_allgather_c,
    PMPI_Ineighbor_allgather = MPI_Ineighbor_allgather,
    PMPI_Ineighbor_allgather_c = MPI_Ineighbor_allgather_c,
    ineighbor_allgather: allgather_body, comm,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: MPI_Datatype, comm: MPI_Comm));
collective!(PMPI_Neighbor_alltoall = MPI_Neighbor_alltoall,
    PMPI_Neighbor_alltoall_c = MPI_Neighbor_alltoall_c,
    PMPI_Ineighbor_alltoall = MPI_Ineighbor_alltoall,
    PMPI_Ineighbor_alltoall_c = MPI_Ineighbor_alltoall_c,
    ineighbor_alltoall: alltoall_body, comm,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcount: Count, recvtype: MPI_Datatype, comm: MPI_Comm));
collective!(PMPI_Neighbor_allgatherv = MPI_Neighbor_allgatherv,
    PMPI_Neighbor_allgatherv_c = MPI_Neighbor_allgatherv_c,
    PMPI_Ineighbor_allgatherv = MPI_Ineighbor_allgatherv,
    PMPI_Ineighbor_allgatherv_c = MPI_Ineighbor_allgatherv_c,
    ineighbor_allgatherv: allgatherv_body, comm,
    (sendbuf: *const c_void, sendcount: Count, sendtype: MPI_Datatype, recvbuf: *mut c_void,
     recvcounts: *const Count, displs: *const Count, recvtype: MPI_Datatype, comm: MPI_Comm));
collective!(PMPI_Neighbor_alltoallv = MPI_Neighbor_alltoallv,
    PMPI_Neighbor_alltoallv_c = MPI_Neighbor_alltoallv_c,
    PMPI_Ineighbor_alltoallv = MPI_Ineighbor_alltoallv,
    PMPI_Ineighbor_alltoallv_c = MPI_Ineighbor_alltoallv_c,
    ineighbor_alltoallv: alltoallv_body, comm,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count,
     sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const Count,
     rdispls: *const Count, recvtype: MPI_Datatype, comm: MPI_Comm));
collective!(PMPI_Neighbor_alltoallw = MPI_Neighbor_alltoallw,
    PMPI_Neighbor_alltoallw_c = MPI_Neighbor_alltoallw_c,
    PMPI_Ineighbor_alltoallw = MPI_Ineighbor_alltoallw,
    PMPI_Ineighbor_alltoallw_c = MPI_Ineighbor_alltoallw_c,
    ineighbor_alltoallw: alltoallw_body, comm,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const MPI_Aint,
     sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const Count,
     rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm));

/// (in-degree, out-degree) of `comm` for copying the arrays of the
/// persistent v- and w-forms; Err is the error code already raised.
pub(crate) fn degrees(name: &str, comm: MPI_Comm) -> Result<(usize, usize), c_int> {
    let mut found = None;
    let code = entry(name, comm, |mpi, _| {
        let (_, neighbours) = prepare(mpi, comm)?;
        found = Some((neighbours.sources.len(), neighbours.destinations.len()));
        Ok(())
    });
    found.ok_or(code)
}
