//! The inter-communicator forms of the collectives (MPI-4.1 §6.2.2): each
//! body here is called by the intra body of the same collective once the
//! communicator turns out to be an inter-communicator, and builds its
//! schedule with `resmpi_core::coll::inter`.
//!
//! Buffers follow the standard: a rooted collective's root passes
//! MPI_ROOT, the rest of its group MPI_PROC_NULL (their buffers are not
//! looked at), and the other group the root's rank in the remote group.
//! Counts and arrays of receive buffers describe the remote group.
//! MPI_IN_PLACE is not allowed on inter-communicators (MPI_ERR_BUFFER).

use resmpi_core::coll::inter::{self, InterRoot};
use resmpi_core::coll::Block;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use super::{in_place_not_allowed, is_in_place, launch, reduction_of, Staging, Usage};
use crate::abi::*;
use crate::global::Registry;
#[allow(unused_imports)]
use crate::large_count::{int_and_large_count, Count};

/// Local and remote group sizes of inter-communicator `index`.
fn sizes(mpi: &Mpi, index: usize) -> MpiResult<(usize, usize)> {
    let comm = mpi.comm(index)?;
    Ok((comm.size() as usize, comm.peer_count() as usize))
}

/// The root argument of a rooted inter-communicator collective.
fn root_of(mpi: &Mpi, index: usize, root: c_int) -> MpiResult<InterRoot> {
    let (_, remote_size) = sizes(mpi, index)?;
    match root {
        MPI_ROOT => Ok(InterRoot::Here),
        MPI_PROC_NULL => Ok(InterRoot::Beside),
        root if (0..remote_size as c_int).contains(&root) => Ok(InterRoot::Remote(root as u32)),
        root => Err(MpiError::new(
            ErrorClass::Root,
            format!(
                "root {root} is neither MPI_ROOT, MPI_PROC_NULL nor a rank of the remote group (size {remote_size})"
            ),
        )),
    }
}

/// MPI_IN_PLACE is never allowed on an inter-communicator.
fn no_in_place(buffer: *const c_void, what: &str) -> MpiResult<()> {
    if is_in_place(buffer) {
        return Err(in_place_not_allowed(&format!(
            "{what} on an inter-communicator"
        )));
    }
    Ok(())
}

fn block(
    staging: &mut Staging,
    buffer: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    usage: Usage,
) -> MpiResult<Block> {
    let (data, length_bytes) = staging.region(buffer, count, datatype, usage)?;
    Ok(Block { data, length_bytes })
}

pub(super) fn barrier(
    mpi: &mut Mpi,
    index: usize,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let mut schedule = mpi.engine.new_schedule(index)?;
    inter::barrier(&mut schedule);
    launch(mpi, schedule, Staging::default(), request)
}

pub(super) fn bcast(
    mpi: &mut Mpi,
    index: usize,
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let root = root_of(mpi, index, root)?;
    let mut staging = Staging::default();
    let (data, length_bytes) = match root {
        InterRoot::Here => staging.region(buffer, count, datatype, Usage::Input)?,
        InterRoot::Beside => (std::ptr::null_mut(), 0),
        InterRoot::Remote(_) => staging.region(buffer, count, datatype, Usage::Output)?,
    };
    let mut schedule = mpi.engine.new_schedule(index)?;
    inter::bcast(&mut schedule, data, length_bytes, root);
    launch(mpi, schedule, staging, request)
}

pub(super) fn reduce(
    mpi: &mut Mpi,
    global: &Registry,
    index: usize,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let root = root_of(mpi, index, root)?;
    if matches!(root, InterRoot::Beside) {
        // Every argument but the communicator and root is insignificant
        // here (mpi4py passes MPI_BYTE with no buffer): check none of them.
        let mut schedule = mpi.engine.new_schedule(index)?;
        inter::reduce(
            &mut schedule,
            std::ptr::null(),
            std::ptr::null_mut(),
            0,
            root,
        );
        return launch(mpi, schedule, Staging::default(), request);
    }
    let (reduction, scale) = reduction_of(global, op, datatype)?;
    let mut staging = Staging::default();
    let (send, recv) = match root {
        InterRoot::Here => (
            std::ptr::null(),
            staging.region(recvbuf, count, datatype, Usage::Output)?.0,
        ),
        InterRoot::Beside => unreachable!("handled above"),
        InterRoot::Remote(_) => {
            no_in_place(sendbuf, "MPI_Reduce")?;
            let (send, _) = staging.region(sendbuf, count, datatype, Usage::Input)?;
            (send as *const u8, std::ptr::null_mut())
        }
    };
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    inter::reduce(&mut schedule, send, recv, count as usize * scale, root);
    launch(mpi, schedule, staging, request)
}

pub(super) fn allreduce(
    mpi: &mut Mpi,
    global: &Registry,
    index: usize,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    no_in_place(sendbuf, "MPI_Allreduce")?;
    let (reduction, scale) = reduction_of(global, op, datatype)?;
    let mut staging = Staging::default();
    let (recv, _) = staging.region(recvbuf, count, datatype, Usage::Output)?;
    let (send, _) = staging.region(sendbuf, count, datatype, Usage::Input)?;
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    inter::allreduce(&mut schedule, send, recv, count as usize * scale);
    launch(mpi, schedule, staging, request)
}

/// Gather and Gatherv: the root's receive blocks (one per remote rank) come
/// from `receive_blocks`.
pub(super) fn gatherv(
    mpi: &mut Mpi,
    index: usize,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    root: c_int,
    receive_blocks: impl FnOnce(&mut Staging, usize) -> MpiResult<Vec<Block>>,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let root = root_of(mpi, index, root)?;
    let (_, remote_size) = sizes(mpi, index)?;
    let mut staging = Staging::default();
    let (own, blocks) = match root {
        InterRoot::Here => (None, receive_blocks(&mut staging, remote_size)?),
        InterRoot::Beside => (None, Vec::new()),
        InterRoot::Remote(_) => {
            no_in_place(sendbuf, "MPI_Gather")?;
            let own = block(&mut staging, sendbuf, sendcount, sendtype, Usage::Input)?;
            (Some(own), Vec::new())
        }
    };
    let mut schedule = mpi.engine.new_schedule(index)?;
    inter::gatherv(&mut schedule, own, &blocks, root);
    launch(mpi, schedule, staging, request)
}

/// Scatter and Scatterv: the root's send blocks (one per remote rank) come
/// from `send_blocks`.
pub(super) fn scatterv(
    mpi: &mut Mpi,
    index: usize,
    send_blocks: impl FnOnce(&mut Staging, usize) -> MpiResult<Vec<Block>>,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let root = root_of(mpi, index, root)?;
    let (_, remote_size) = sizes(mpi, index)?;
    let mut staging = Staging::default();
    let (blocks, own) = match root {
        InterRoot::Here => (send_blocks(&mut staging, remote_size)?, None),
        InterRoot::Beside => (Vec::new(), None),
        InterRoot::Remote(_) => {
            no_in_place(recvbuf, "MPI_Scatter")?;
            let own = block(&mut staging, recvbuf, recvcount, recvtype, Usage::Output)?;
            (Vec::new(), Some(own))
        }
    };
    let mut schedule = mpi.engine.new_schedule(index)?;
    inter::scatterv(&mut schedule, &blocks, own, root);
    launch(mpi, schedule, staging, request)
}

pub(super) fn allgather(
    mpi: &mut Mpi,
    index: usize,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    no_in_place(sendbuf, "MPI_Allgather")?;
    let (_, remote_size) = sizes(mpi, index)?;
    let mut staging = Staging::default();
    let (send, send_bytes) = staging.region(sendbuf, sendcount, sendtype, Usage::Input)?;
    let (recv, recv_block_bytes) = super::gather::all_blocks(
        &mut staging,
        recvbuf,
        recvcount,
        recvtype,
        remote_size,
        Usage::Output,
    )?;
    let mut schedule = mpi.engine.new_schedule(index)?;
    inter::allgather(&mut schedule, send, send_bytes, recv, recv_block_bytes);
    launch(mpi, schedule, staging, request)
}

pub(super) fn allgatherv(
    mpi: &mut Mpi,
    index: usize,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    receive_blocks: impl FnOnce(&mut Staging, usize) -> MpiResult<Vec<Block>>,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    no_in_place(sendbuf, "MPI_Allgatherv")?;
    let (_, remote_size) = sizes(mpi, index)?;
    let mut staging = Staging::default();
    let send = block(&mut staging, sendbuf, sendcount, sendtype, Usage::Input)?;
    let blocks = receive_blocks(&mut staging, remote_size)?;
    let mut schedule = mpi.engine.new_schedule(index)?;
    inter::allgatherv(&mut schedule, send, &blocks);
    launch(mpi, schedule, staging, request)
}

/// Alltoall, Alltoallv and Alltoallw: one block per remote rank each way.
pub(super) fn alltoallv(
    mpi: &mut Mpi,
    index: usize,
    sendbuf: *const c_void,
    blocks: impl FnOnce(&mut Staging, usize) -> MpiResult<(Vec<Block>, Vec<Block>)>,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    no_in_place(sendbuf, "MPI_Alltoall")?;
    let (_, remote_size) = sizes(mpi, index)?;
    let mut staging = Staging::default();
    let (sends, recvs) = blocks(&mut staging, remote_size)?;
    let mut schedule = mpi.engine.new_schedule(index)?;
    inter::alltoallv(&mut schedule, &sends, &recvs);
    launch(mpi, schedule, staging, request)
}

/// Reduce_scatter and Reduce_scatter_block: `counts[i]` elements for
/// local rank i.
pub(super) fn reduce_scatter(
    mpi: &mut Mpi,
    global: &Registry,
    index: usize,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: &[MPI_Count],
    datatype: MPI_Datatype,
    op: MPI_Op,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    no_in_place(sendbuf, "MPI_Reduce_scatter")?;
    let rank = mpi.comm(index)?.rank as usize;
    let (reduction, scale) = reduction_of(global, op, datatype)?;
    if let Some(count) = counts.iter().find(|count| **count < 0) {
        return Err(MpiError::new(
            ErrorClass::Count,
            format!("count {count} is negative"),
        ));
    }
    let total = counts
        .iter()
        .try_fold(0 as MPI_Count, |sum, count| sum.checked_add(*count))
        .ok_or_else(|| MpiError::new(ErrorClass::Count, "sum of the counts overflows"))?;
    let mut staging = Staging::default();
    let (recv, _) = staging.region(recvbuf, counts[rank], datatype, Usage::Output)?;
    let (send, _) = staging.region(sendbuf, total, datatype, Usage::Input)?;
    let scaled: Vec<usize> = counts.iter().map(|count| *count as usize * scale).collect();
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    inter::reduce_scatter(&mut schedule, send, recv, &scaled);
    launch(mpi, schedule, staging, request)
}
