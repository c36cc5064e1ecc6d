//! Alltoall, Alltoallv, Alltoallw, blocking and nonblocking: all three
//! become one block per peer each way.

use resmpi_core::coll::{self, Block};
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use super::gather::all_blocks;
use super::{any_comm_of, fast_path, inter, small};
use super::{
    checked_region, extent_of, int_array, is_in_place, launch, request_out, Staging, Usage,
};
use crate::abi::*;
use crate::global::{entry, Registry};
#[allow(unused_imports)]
use crate::large_count::{collective, int_and_large_count, Count};

/// Per-peer datatypes of Alltoallw; MPI_ERR_ARG when NULL.
///
/// # Safety
/// `types` is NULL or holds `size` datatypes.
unsafe fn type_array<'a>(types: *const MPI_Datatype, size: usize) -> MpiResult<&'a [MPI_Datatype]> {
    if types.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "datatypes array is NULL"));
    }
    // SAFETY: guaranteed by the caller.
    Ok(unsafe { std::slice::from_raw_parts(types, size) })
}

/// Blocks with byte displacements and a datatype per peer.
///
/// # Safety
/// The arrays are NULL or hold `size` entries.
unsafe fn w_blocks<C: Count>(
    staging: &mut Staging,
    usage: Usage,
    base: *const c_void,
    counts: *const C,
    displacements_bytes: *const C,
    types: *const MPI_Datatype,
    size: usize,
) -> MpiResult<Vec<Block>> {
    // SAFETY: forwarded.
    let (counts, displacements, types) = unsafe {
        (
            int_array(counts, size, "counts array")?,
            int_array(displacements_bytes, size, "displacements array")?,
            type_array(types, size)?,
        )
    };
    (0..size)
        .map(|peer| {
            staging.block(
                base,
                displacements[peer] as isize,
                counts[peer],
                types[peer],
                usage,
            )
        })
        .collect()
}

/// Blocks with displacements in extents of one datatype (Alltoallv).
///
/// # Safety
/// The arrays are NULL or hold `size` entries.
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
    let (counts, displs) = unsafe {
        (
            int_array(counts, size, "counts array")?,
            int_array(displs, size, "displacements array")?,
        )
    };
    let extent = extent_of(datatype)?;
    (0..size)
        .map(|peer| {
            staging.block(
                base,
                displs[peer] as isize * extent,
                counts[peer],
                datatype,
                usage,
            )
        })
        .collect()
}

/// Uniform blocks of `count` elements (Alltoall).
fn uniform_blocks(
    staging: &mut Staging,
    usage: Usage,
    base: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    size: usize,
) -> MpiResult<Vec<Block>> {
    let extent = extent_of(datatype)?;
    let stride = (count.max(0) as isize)
        .checked_mul(extent)
        .ok_or_else(|| MpiError::new(ErrorClass::Count, "count times extent overflows"))?;
    (0..size)
        .map(|peer| staging.block(base, peer as isize * stride, count, datatype, usage))
        .collect()
}

fn run(
    mpi: &mut Mpi,
    index: usize,
    staging: Staging,
    sends: Option<Vec<Block>>,
    recvs: Vec<Block>,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::alltoallw(&mut schedule, sends.as_deref(), &recvs);
    launch(mpi, schedule, staging, request)
}

/// How the receive blocks are used: in place they are the send data too.
fn receive_usage(sendbuf: *const c_void) -> Usage {
    if is_in_place(sendbuf) {
        Usage::InOut
    } else {
        Usage::Output
    }
}

/// A blocking Alltoall on the shared-memory fast path, when it applies:
/// true once done. Its blocks are uniform and consecutive, so each buffer
/// is staged as one region of `size` blocks (packing `size * count`
/// elements is packing each block in turn), with no per-peer list.
#[allow(clippy::too_many_arguments)]
fn alltoall_shared(
    mpi: &mut Mpi,
    index: usize,
    size: usize,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
) -> MpiResult<bool> {
    let in_place = is_in_place(sendbuf);
    let block_bytes = checked_region(recvbuf, recvcount, recvtype)?;
    // Mismatched sizes (an erroneous call) and counts whose total does
    // not fit an int go through the schedules, which report them.
    let fits = |count: MPI_Count| {
        let count = c_int::try_from(count).ok();
        c_int::try_from(size)
            .ok()
            .and_then(|size| count?.checked_mul(size))
            .is_some()
    };
    if !fits(recvcount)
        || (!in_place
            && (!fits(sendcount) || checked_region(sendbuf, sendcount, sendtype)? != block_bytes))
    {
        return Ok(false);
    }
    let Some(call) = fast_path(mpi, index, block_bytes.saturating_mul(size), None)? else {
        return Ok(false);
    };
    let mut staging = Staging::default();
    let usage = receive_usage(sendbuf);
    let (recv, _) = all_blocks(&mut staging, recvbuf, recvcount, recvtype, size, usage)?;
    let send = if in_place {
        None
    } else {
        let (send, _) = all_blocks(
            &mut staging,
            sendbuf,
            sendcount,
            sendtype,
            size,
            Usage::Input,
        )?;
        Some(send as *const u8)
    };
    mpi.engine.shared_alltoall(&call, send, recv, block_bytes)?;
    staging.unpack_outputs();
    Ok(true)
}

fn alltoall_body(
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
        let blocks = |staging: &mut Staging, size: usize| {
            let sends = uniform_blocks(staging, Usage::Input, sendbuf, sendcount, sendtype, size)?;
            let recvs = uniform_blocks(staging, Usage::Output, recvbuf, recvcount, recvtype, size)?;
            Ok((sends, recvs))
        };
        return inter::alltoallv(mpi, index, sendbuf, blocks, request);
    }
    let size = mpi.comm(index)?.size() as usize;
    if request.is_none()
        && alltoall_shared(
            mpi, index, size, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
        )?
    {
        return Ok(());
    }
    let mut staging = Staging::default();
    let usage = receive_usage(sendbuf);
    let recvs = uniform_blocks(&mut staging, usage, recvbuf, recvcount, recvtype, size)?;
    let sends = if is_in_place(sendbuf) {
        None
    } else {
        Some(uniform_blocks(
            &mut staging,
            Usage::Input,
            sendbuf,
            sendcount,
            sendtype,
            size,
        )?)
    };
    run(mpi, index, staging, sends, recvs, request)
}

collective!(PMPI_Alltoall = MPI_Alltoall, PMPI_Alltoall_c = MPI_Alltoall_c,
    PMPI_Ialltoall = MPI_Ialltoall, PMPI_Ialltoall_c = MPI_Ialltoall_c,
    ialltoall: alltoall_body, comm, fast small::alltoall,
    (sendbuf: *const c_void, sendcount: Count => into, sendtype: MPI_Datatype,
     recvbuf: *mut c_void, recvcount: Count => into, recvtype: MPI_Datatype,
     comm: MPI_Comm));

fn alltoallv_body<C: Count>(
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
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        let blocks = |staging: &mut Staging, size: usize| {
            // SAFETY: the caller's arrays hold one entry per remote rank.
            unsafe {
                let sends = v_blocks(
                    staging,
                    Usage::Input,
                    sendbuf,
                    sendcounts,
                    sdispls,
                    sendtype,
                    size,
                )?;
                let recvs = v_blocks(
                    staging,
                    Usage::Output,
                    recvbuf,
                    recvcounts,
                    rdispls,
                    recvtype,
                    size,
                )?;
                Ok((sends, recvs))
            }
        };
        return inter::alltoallv(mpi, index, sendbuf, blocks, request);
    }
    let size = mpi.comm(index)?.size() as usize;
    let mut staging = Staging::default();
    let usage = receive_usage(sendbuf);
    // SAFETY: the caller's arrays hold one entry per rank.
    let recvs = unsafe {
        v_blocks(
            &mut staging,
            usage,
            recvbuf,
            recvcounts,
            rdispls,
            recvtype,
            size,
        )?
    };
    let sends = if is_in_place(sendbuf) {
        None
    } else {
        // SAFETY: as above.
        Some(unsafe {
            v_blocks(
                &mut staging,
                Usage::Input,
                sendbuf,
                sendcounts,
                sdispls,
                sendtype,
                size,
            )?
        })
    };
    run(mpi, index, staging, sends, recvs, request)
}

collective!(PMPI_Alltoallv = MPI_Alltoallv, PMPI_Alltoallv_c = MPI_Alltoallv_c,
    PMPI_Ialltoallv = MPI_Ialltoallv, PMPI_Ialltoallv_c = MPI_Ialltoallv_c,
    ialltoallv: alltoallv_body, comm,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count,
     sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const Count,
     rdispls: *const Count, recvtype: MPI_Datatype, comm: MPI_Comm));

fn alltoallw_body<C: Count>(
    mpi: &mut Mpi,
    _global: &Registry,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const C,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const C,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        let blocks = |staging: &mut Staging, size: usize| {
            // SAFETY: the caller's arrays hold one entry per remote rank.
            unsafe {
                let sends = w_blocks(
                    staging,
                    Usage::Input,
                    sendbuf,
                    sendcounts,
                    sdispls,
                    sendtypes,
                    size,
                )?;
                let recvs = w_blocks(
                    staging,
                    Usage::Output,
                    recvbuf,
                    recvcounts,
                    rdispls,
                    recvtypes,
                    size,
                )?;
                Ok((sends, recvs))
            }
        };
        return inter::alltoallv(mpi, index, sendbuf, blocks, request);
    }
    let size = mpi.comm(index)?.size() as usize;
    let mut staging = Staging::default();
    let usage = receive_usage(sendbuf);
    // SAFETY: the caller's arrays hold one entry per rank.
    let recvs = unsafe {
        w_blocks(
            &mut staging,
            usage,
            recvbuf,
            recvcounts,
            rdispls,
            recvtypes,
            size,
        )?
    };
    let sends = if is_in_place(sendbuf) {
        None
    } else {
        // SAFETY: as above.
        Some(unsafe {
            w_blocks(
                &mut staging,
                Usage::Input,
                sendbuf,
                sendcounts,
                sdispls,
                sendtypes,
                size,
            )?
        })
    };
    run(mpi, index, staging, sends, recvs, request)
}

collective!(PMPI_Alltoallw = MPI_Alltoallw, PMPI_Alltoallw_c = MPI_Alltoallw_c,
    PMPI_Ialltoallw = MPI_Ialltoallw, PMPI_Ialltoallw_c = MPI_Ialltoallw_c,
    ialltoallw: alltoallw_body, comm,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count,
     sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const Count,
     rdispls: *const Count, recvtypes: *const MPI_Datatype, comm: MPI_Comm));
