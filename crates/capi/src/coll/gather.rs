//! Gather, Scatter, Allgather and their v forms, blocking and nonblocking.

use resmpi_core::coll::{self, Block};
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use super::{any_comm_of, fast_path, inter, small};
use super::{
    check_root, checked_region, extent_of, in_place_not_allowed, int_array, is_in_place, launch,
    request_out, Staging, Usage,
};
use crate::abi::*;
use crate::global::{entry, Registry};
#[allow(unused_imports)]
use crate::large_count::{collective, int_and_large_count, Count};

/// Blocks of a v-collective: `counts[i]` elements at `displs[i]` extents from `base`.
///
/// # Safety
/// `counts` and `displs` are NULL or hold `size` ints.
unsafe fn v_blocks<C: Count>(
    staging: &mut Staging,
    usage: Usage,
    base: *const c_void,
    counts: *const C,
    displs: *const C,
    datatype: MPI_Datatype,
    size: usize,
) -> MpiResult<Vec<Block>> {
    // SAFETY: forwarded.
    let counts = unsafe { int_array(counts, size, "counts array")? };
    // SAFETY: forwarded.
    let displs = unsafe { int_array(displs, size, "displacements array")? };
    let extent = extent_of(datatype)?;
    counts
        .iter()
        .zip(displs)
        .map(|(count, displ)| staging.block(base, displ as isize * extent, *count, datatype, usage))
        .collect()
}

fn same_size(send_bytes: usize, block_bytes: usize, what: &str) -> MpiResult<()> {
    if send_bytes != block_bytes {
        return Err(MpiError::new(
            ErrorClass::Truncate,
            format!("{what}: {send_bytes} bytes sent where the root's block holds {block_bytes}"),
        ));
    }
    Ok(())
}

fn gather_body(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        let receive_blocks = |staging: &mut Staging, size: usize| {
            let (recv, block_bytes) =
                all_blocks(staging, recvbuf, recvcount, recvtype, size, Usage::Output)?;
            Ok(Block::uniform(recv, block_bytes, size))
        };
        return inter::gatherv(
            mpi,
            index,
            sendbuf,
            sendcount,
            sendtype,
            root,
            receive_blocks,
            request,
        );
    }
    let root = check_root(mpi, index, root)?;
    let comm_ref = mpi.comm(index)?;
    let (is_root, size) = (comm_ref.rank == root, comm_ref.size() as usize);
    let in_place = is_in_place(sendbuf);
    if in_place && !is_root {
        return Err(in_place_not_allowed(
            "only the root of MPI_Gather may pass it",
        ));
    }
    let mut staging = Staging::default();
    let send = if in_place {
        None
    } else {
        Some(staging.region(sendbuf, sendcount, sendtype, Usage::Input)?)
    };
    let (recv, block_bytes) = if is_root {
        // In place the root's own block is already in the receive buffer.
        let usage = if in_place {
            Usage::InOut
        } else {
            Usage::Output
        };
        let (recv, block_bytes) =
            all_blocks(&mut staging, recvbuf, recvcount, recvtype, size, usage)?;
        if let Some((_, send_bytes)) = send {
            same_size(send_bytes, block_bytes, "MPI_Gather")?;
        }
        (recv, block_bytes)
    } else {
        (std::ptr::null_mut(), send.map_or(0, |(_, bytes)| bytes))
    };
    // Every member publishes (or reads) one block: the decision rests on
    // the block size, the same on every rank of a correct program.
    if let Some(call) = fast_path(mpi, index, block_bytes, request)? {
        let send = send.map(|(data, _)| data as *const u8);
        mpi.engine
            .shared_gather(&call, send, block_bytes, recv, root)?;
        staging.unpack_outputs();
        return Ok(());
    }
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::gather(
        &mut schedule,
        send.map(|(data, _)| data as *const u8),
        block_bytes,
        recv,
        root,
    );
    launch(mpi, schedule, staging, request)
}

/// The `size` consecutive blocks of `count` elements each at `buffer`
/// (Gather's receive buffer, Scatter's send buffer) as one region.
pub(super) fn all_blocks(
    staging: &mut Staging,
    buffer: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    size: usize,
    usage: Usage,
) -> MpiResult<(*mut u8, usize)> {
    let block_bytes = checked_region(buffer, count, datatype)?;
    block_bytes_fit(block_bytes, size)?;
    let total = MPI_Count::try_from(size)
        .ok()
        .and_then(|size| count.checked_mul(size))
        .ok_or_else(|| {
            MpiError::new(
                ErrorClass::Count,
                "count times communicator size does not fit an int",
            )
        })?;
    let (data, _) = staging.region(buffer, total, datatype, usage)?;
    Ok((data, block_bytes))
}

/// `size` blocks of `block_bytes` must not overflow the address space.
fn block_bytes_fit(block_bytes: usize, size: usize) -> MpiResult<()> {
    block_bytes
        .checked_mul(size)
        .filter(|total| *total <= isize::MAX as usize)
        .map(|_| ())
        .ok_or_else(|| MpiError::new(ErrorClass::Count, "count times communicator size overflows"))
}

collective!(PMPI_Gather = MPI_Gather, PMPI_Gather_c = MPI_Gather_c,
    PMPI_Igather = MPI_Igather, PMPI_Igather_c = MPI_Igather_c, igather: gather_body, comm,
    fast small::gather,
    (sendbuf: *const c_void, sendcount: Count => into, sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcount: Count => into, recvtype: MPI_Datatype, root: c_int,
     comm: MPI_Comm));

fn gatherv_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const C,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        let receive_blocks = |staging: &mut Staging, size: usize| {
            // SAFETY: the root's arrays hold one entry per remote rank.
            unsafe {
                v_blocks(
                    staging,
                    Usage::Output,
                    recvbuf,
                    recvcounts,
                    displs,
                    recvtype,
                    size,
                )
            }
        };
        return inter::gatherv(
            mpi,
            index,
            sendbuf,
            sendcount,
            sendtype,
            root,
            receive_blocks,
            request,
        );
    }
    let root = check_root(mpi, index, root)?;
    let comm_ref = mpi.comm(index)?;
    let (is_root, size) = (comm_ref.rank == root, comm_ref.size() as usize);
    let in_place = is_in_place(sendbuf);
    if in_place && !is_root {
        return Err(in_place_not_allowed(
            "only the root of MPI_Gatherv may pass it",
        ));
    }
    let mut staging = Staging::default();
    let own = if in_place {
        None
    } else {
        let (data, length_bytes) = staging.region(sendbuf, sendcount, sendtype, Usage::Input)?;
        Some(Block { data, length_bytes })
    };
    let blocks = if is_root {
        let usage = if in_place {
            Usage::InOut
        } else {
            Usage::Output
        };
        // SAFETY: the caller's arrays hold one entry per rank at the root.
        unsafe {
            v_blocks(
                &mut staging,
                usage,
                recvbuf,
                recvcounts,
                displs,
                recvtype,
                size,
            )?
        }
    } else {
        Vec::new()
    };
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::gatherv(&mut schedule, own, &blocks, root);
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Gatherv = MPI_Gatherv, PMPI_Gatherv_c = MPI_Gatherv_c,
    PMPI_Igatherv = MPI_Igatherv, PMPI_Igatherv_c = MPI_Igatherv_c, igatherv: gatherv_body,
    comm,
    (sendbuf: *const c_void, sendcount: Count => into, sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count,
     recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm));

fn scatter_body(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        let send_blocks = |staging: &mut Staging, size: usize| {
            let (send, block_bytes) =
                all_blocks(staging, sendbuf, sendcount, sendtype, size, Usage::Input)?;
            Ok(Block::uniform(send, block_bytes, size))
        };
        return inter::scatterv(
            mpi,
            index,
            send_blocks,
            recvbuf,
            recvcount,
            recvtype,
            root,
            request,
        );
    }
    let root = check_root(mpi, index, root)?;
    let comm_ref = mpi.comm(index)?;
    let (is_root, size) = (comm_ref.rank == root, comm_ref.size() as usize);
    let in_place = is_in_place(recvbuf);
    if in_place && !is_root {
        return Err(in_place_not_allowed(
            "only the root of MPI_Scatter may pass it",
        ));
    }
    let mut staging = Staging::default();
    let recv = if in_place {
        None
    } else {
        Some(staging.region(recvbuf, recvcount, recvtype, Usage::Output)?)
    };
    let (send, block_bytes) = if is_root {
        let (send, block_bytes) = all_blocks(
            &mut staging,
            sendbuf,
            sendcount,
            sendtype,
            size,
            Usage::Input,
        )?;
        if let Some((_, recv_bytes)) = recv {
            same_size(recv_bytes, block_bytes, "MPI_Scatter")?;
        }
        (send as *const u8, block_bytes)
    } else {
        (std::ptr::null(), recv.map_or(0, |(_, bytes)| bytes))
    };
    // The root publishes all `size` blocks at once.
    if let Some(call) = fast_path(mpi, index, block_bytes.saturating_mul(size), request)? {
        let recv = recv.map(|(data, _)| data);
        mpi.engine
            .shared_scatter(&call, send, block_bytes, recv, root)?;
        staging.unpack_outputs();
        return Ok(());
    }
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::scatter(
        &mut schedule,
        send,
        block_bytes,
        recv.map(|(data, _)| data),
        root,
    );
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Scatter = MPI_Scatter, PMPI_Scatter_c = MPI_Scatter_c,
    PMPI_Iscatter = MPI_Iscatter, PMPI_Iscatter_c = MPI_Iscatter_c, iscatter: scatter_body,
    comm, fast small::scatter,
    (sendbuf: *const c_void, sendcount: Count => into, sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcount: Count => into, recvtype: MPI_Datatype, root: c_int,
     comm: MPI_Comm));

fn scatterv_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const C,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        let send_blocks = |staging: &mut Staging, size: usize| {
            // SAFETY: the root's arrays hold one entry per remote rank.
            unsafe {
                v_blocks(
                    staging,
                    Usage::Input,
                    sendbuf,
                    sendcounts,
                    displs,
                    sendtype,
                    size,
                )
            }
        };
        return inter::scatterv(
            mpi,
            index,
            send_blocks,
            recvbuf,
            recvcount,
            recvtype,
            root,
            request,
        );
    }
    let root = check_root(mpi, index, root)?;
    let comm_ref = mpi.comm(index)?;
    let (is_root, size) = (comm_ref.rank == root, comm_ref.size() as usize);
    let in_place = is_in_place(recvbuf);
    if in_place && !is_root {
        return Err(in_place_not_allowed(
            "only the root of MPI_Scatterv may pass it",
        ));
    }
    let mut staging = Staging::default();
    let own = if in_place {
        None
    } else {
        let (data, length_bytes) = staging.region(recvbuf, recvcount, recvtype, Usage::Output)?;
        Some(Block { data, length_bytes })
    };
    let blocks = if is_root {
        // SAFETY: the caller's arrays hold one entry per rank at the root.
        unsafe {
            v_blocks(
                &mut staging,
                Usage::Input,
                sendbuf,
                sendcounts,
                displs,
                sendtype,
                size,
            )?
        }
    } else {
        Vec::new()
    };
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::scatterv(&mut schedule, &blocks, own, root);
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Scatterv = MPI_Scatterv, PMPI_Scatterv_c = MPI_Scatterv_c,
    PMPI_Iscatterv = MPI_Iscatterv, PMPI_Iscatterv_c = MPI_Iscatterv_c,
    iscatterv: scatterv_body, comm,
    (sendbuf: *const c_void, sendcounts: *const Count, displs: *const Count,
     sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: Count => into,
     recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm));

fn allgather_body(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        return inter::allgather(
            mpi, index, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, request,
        );
    }
    let size = mpi.comm(index)?.size() as usize;
    let mut staging = Staging::default();
    let in_place = is_in_place(sendbuf);
    let send = if in_place {
        None
    } else {
        Some(staging.region(sendbuf, sendcount, sendtype, Usage::Input)?)
    };
    let usage = if in_place {
        Usage::InOut
    } else {
        Usage::Output
    };
    let (recv, block_bytes) = all_blocks(&mut staging, recvbuf, recvcount, recvtype, size, usage)?;
    if let Some((_, send_bytes)) = send {
        same_size(send_bytes, block_bytes, "MPI_Allgather")?;
    }
    if let Some(call) = fast_path(mpi, index, block_bytes, request)? {
        let send = send.map(|(data, _)| data as *const u8);
        mpi.engine
            .shared_allgather(&call, send, block_bytes, recv)?;
        staging.unpack_outputs();
        return Ok(());
    }
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::allgather(
        &mut schedule,
        send.map(|(data, _)| data as *const u8),
        block_bytes,
        recv,
    );
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Allgather = MPI_Allgather, PMPI_Allgather_c = MPI_Allgather_c,
    PMPI_Iallgather = MPI_Iallgather, PMPI_Iallgather_c = MPI_Iallgather_c,
    iallgather: allgather_body, comm, fast small::allgather,
    (sendbuf: *const c_void, sendcount: Count => into, sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcount: Count => into, recvtype: MPI_Datatype,
     comm: MPI_Comm));

fn allgatherv_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const C,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        let receive_blocks = |staging: &mut Staging, size: usize| {
            // SAFETY: the caller's arrays hold one entry per remote rank.
            unsafe {
                v_blocks(
                    staging,
                    Usage::Output,
                    recvbuf,
                    recvcounts,
                    displs,
                    recvtype,
                    size,
                )
            }
        };
        return inter::allgatherv(
            mpi,
            index,
            sendbuf,
            sendcount,
            sendtype,
            receive_blocks,
            request,
        );
    }
    let comm_ref = mpi.comm(index)?;
    let (rank, size) = (comm_ref.rank as usize, comm_ref.size() as usize);
    let mut staging = Staging::default();
    let in_place = is_in_place(sendbuf);
    let usage = if in_place {
        Usage::InOut
    } else {
        Usage::Output
    };
    // SAFETY: the caller's arrays hold one entry per rank.
    let blocks = unsafe {
        v_blocks(
            &mut staging,
            usage,
            recvbuf,
            recvcounts,
            displs,
            recvtype,
            size,
        )?
    };
    let send = if in_place {
        None
    } else {
        let (data, send_bytes) = staging.region(sendbuf, sendcount, sendtype, Usage::Input)?;
        same_size(send_bytes, blocks[rank].length_bytes, "MPI_Allgatherv")?;
        Some(data as *const u8)
    };
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::allgatherv(&mut schedule, send, &blocks);
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Allgatherv = MPI_Allgatherv, PMPI_Allgatherv_c = MPI_Allgatherv_c,
    PMPI_Iallgatherv = MPI_Iallgatherv, PMPI_Iallgatherv_c = MPI_Iallgatherv_c,
    iallgatherv: allgatherv_body, comm,
    (sendbuf: *const c_void, sendcount: Count => into, sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count,
     recvtype: MPI_Datatype, comm: MPI_Comm));
