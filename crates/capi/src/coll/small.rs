//! The shortest way into the shared-memory fast path: blocking collectives
//! of predefined contiguous datatypes (and predefined ops) on an
//! intra-communicator.
//!
//! Why: for a few bytes on one host the call itself is the cost. The
//! general bodies in `coll.rs` and its modules handle every datatype, every
//! communicator kind and both the blocking and the `I` forms through
//! staging, so a small bcast spent more instructions finding out it was
//! simple (~700) than moving its bytes. These functions take only the
//! common case, with one look-up of each handle, and hand it straight to
//! the engine.
//!
//! They never decide anything differently from the general bodies: each
//! returns `None` (take the general body) as soon as an argument is not the
//! common case, *including every erroneous one*, so errors are found and
//! reported in one place; and the fast path is entered through the same
//! engine call with the same byte count, so ranks that come in through
//! different doors (one with `MPI_INT`, another with a contiguous derived
//! type of the same signature) still take the same path.

use resmpi_core::coll::shared_memory::{Call, MAX_REDUCTION_FOLD_BYTES};
use resmpi_core::coll::Reduction;
use resmpi_core::{Mpi, MpiResult};

use super::is_in_place;
use crate::abi::*;
use crate::datatype::builtin_info;
use crate::handles::{builtin_op, comm_index};
#[allow(unused_imports)]
use crate::large_count::{int_and_large_count, Count};

/// A collective's result when it took the fast path.
type Done = Option<MpiResult<()>>;

/// Communicator `comm` as (index, rank, size) when it is a valid
/// intra-communicator.
#[inline]
fn intra(mpi: &Mpi, comm: MPI_Comm) -> Option<(usize, u32, u32)> {
    let index = comm_index(comm)?;
    let communicator = mpi.comm(index).ok()?;
    (!communicator.is_inter()).then(|| (index, communicator.rank, communicator.size()))
}

/// A root within a communicator of `size`.
#[inline]
fn valid_root(root: c_int, size: u32) -> Option<u32> {
    u32::try_from(root).ok().filter(|&root| root < size)
}

/// The bytes of `count` elements of a predefined contiguous `datatype` at
/// `buffer` (not `MPI_IN_PLACE`, not NULL unless empty).
#[inline]
fn plain_bytes(buffer: *const c_void, count: MPI_Count, datatype: MPI_Datatype) -> Option<usize> {
    let info = builtin_info(datatype)?;
    if info.size_bytes != info.extent_bytes || is_in_place(buffer) {
        return None;
    }
    let bytes = info.size_bytes.checked_mul(usize::try_from(count).ok()?)?;
    (bytes == 0 || !buffer.is_null()).then_some(bytes)
}

/// A predefined `op` on a predefined contiguous `datatype` that accepts it.
#[inline]
fn plain_reduction(op: MPI_Op, datatype: MPI_Datatype) -> Option<Reduction> {
    let op = builtin_op(op)?;
    let info = builtin_info(datatype)?;
    if info.size_bytes != info.extent_bytes {
        return None;
    }
    resmpi_core::op::check_op_type(op, &info).ok()?;
    Some(Reduction {
        op,
        info,
        datatype_handle: datatype,
        layout: None,
    })
}

/// Enter the fast path on communicator `index` publishing at most
/// `published_bytes`: None when it does not apply.
#[inline]
fn enter(mpi: &mut Mpi, index: usize, published_bytes: usize) -> Option<MpiResult<Call>> {
    mpi.engine
        .shared_memory_call(index, published_bytes)
        .transpose()
}

/// [`enter`] for a reduction of `length_bytes` on `size` members (the
/// general bodies' `reduction_fast_path` limit).
#[inline]
fn enter_reduction(
    mpi: &mut Mpi,
    index: usize,
    size: u32,
    length_bytes: usize,
) -> Option<MpiResult<Call>> {
    if length_bytes.saturating_mul(size as usize) > MAX_REDUCTION_FOLD_BYTES {
        return None;
    }
    enter(mpi, index, length_bytes)
}

pub(super) fn barrier(mpi: &mut Mpi, comm: MPI_Comm) -> Done {
    let (index, _, _) = intra(mpi, comm)?;
    Some(enter(mpi, index, 0)?.and_then(|call| mpi.engine.shared_barrier(&call)))
}

pub(super) fn bcast(
    mpi: &mut Mpi,
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Done {
    let (index, _, size) = intra(mpi, comm)?;
    let root = valid_root(root, size)?;
    let length_bytes = plain_bytes(buffer, count, datatype)?;
    Some(enter(mpi, index, length_bytes)?.and_then(|call| {
        mpi.engine
            .shared_bcast(&call, buffer.cast(), length_bytes, root)
    }))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn reduce(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> Done {
    let (index, rank, size) = intra(mpi, comm)?;
    let root = valid_root(root, size)?;
    let reduction = plain_reduction(op, datatype)?;
    // The root's buffers are those of a reduction that may be in place.
    let (send, recv, length_bytes) = if rank == root {
        everywhere_regions(sendbuf, recvbuf, count, datatype)?
    } else {
        let length_bytes = plain_bytes(sendbuf, count, datatype)?;
        (sendbuf.cast(), std::ptr::null_mut(), length_bytes)
    };
    let call = enter_reduction(mpi, index, size, length_bytes)?;
    Some(call.and_then(|call| {
        mpi.engine.shared_reduce(
            &call,
            &reduction,
            send,
            recv,
            length_bytes,
            count as usize,
            root,
        )
    }))
}

/// Send and receive regions of a reduction whose input may be
/// `MPI_IN_PLACE` on every rank (allreduce, scan, exscan): (send, recv,
/// bytes).
#[inline]
fn everywhere_regions(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> Option<(*const u8, *mut u8, usize)> {
    let length_bytes = plain_bytes(recvbuf, count, datatype)?;
    let send = if is_in_place(sendbuf) {
        recvbuf.cast_const()
    } else {
        (plain_bytes(sendbuf, count, datatype)? == length_bytes).then_some(sendbuf)?
    };
    Some((send.cast(), recvbuf.cast(), length_bytes))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn allreduce(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> Done {
    let (index, _, size) = intra(mpi, comm)?;
    let reduction = plain_reduction(op, datatype)?;
    let (send, recv, length_bytes) = everywhere_regions(sendbuf, recvbuf, count, datatype)?;
    let call = enter_reduction(mpi, index, size, length_bytes)?;
    Some(call.and_then(|call| {
        mpi.engine
            .shared_allreduce(&call, &reduction, send, recv, length_bytes, count as usize)
    }))
}

/// MPI_Scan (`inclusive`) or MPI_Exscan.
#[allow(clippy::too_many_arguments)]
pub(super) fn scan(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    inclusive: bool,
) -> Done {
    let (index, _, size) = intra(mpi, comm)?;
    let reduction = plain_reduction(op, datatype)?;
    let (send, recv, length_bytes) = everywhere_regions(sendbuf, recvbuf, count, datatype)?;
    let call = enter_reduction(mpi, index, size, length_bytes)?;
    Some(call.and_then(|call| {
        mpi.engine.shared_scan(
            &call,
            &reduction,
            send,
            recv,
            length_bytes,
            count as usize,
            inclusive,
        )
    }))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn reduce_scatter_block(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> Done {
    let (index, _, size) = intra(mpi, comm)?;
    let reduction = plain_reduction(op, datatype)?;
    let block_bytes = plain_blocks(recvbuf, recvcount, datatype, size)?;
    // The input is `size` blocks: in `recvbuf` itself in place.
    let total = recvcount * size as MPI_Count;
    let input = if is_in_place(sendbuf) {
        recvbuf.cast_const()
    } else if sendbuf == recvbuf.cast_const() {
        // Aliased buffers (erroneous): the general body's business.
        return None;
    } else {
        sendbuf
    };
    plain_bytes(input, total, datatype)?;
    let published_bytes = block_bytes * size as usize;
    Some(enter(mpi, index, published_bytes)?.and_then(|call| {
        mpi.engine.shared_reduce_scatter_block(
            &call,
            &reduction,
            input.cast(),
            recvbuf.cast(),
            block_bytes,
            recvcount as usize,
        )
    }))
}

/// `count` elements of `datatype` at `buffer`, `blocks` times over, as
/// (bytes of one block), for the block-per-rank collectives; the total
/// must fit an int count as the general bodies require.
#[inline]
fn plain_blocks(
    buffer: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    blocks: u32,
) -> Option<usize> {
    // The small paths keep to int totals; larger ones take the general path.
    c_int::try_from(count)
        .ok()?
        .checked_mul(c_int::try_from(blocks).ok()?)?;
    plain_bytes(buffer, count, datatype)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn gather(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Done {
    let (index, rank, size) = intra(mpi, comm)?;
    let root = valid_root(root, size)?;
    let (send, recv, block_bytes) = if rank == root {
        let block_bytes = plain_blocks(recvbuf, recvcount, recvtype, size)?;
        let send = if is_in_place(sendbuf) {
            None
        } else {
            (plain_bytes(sendbuf, sendcount, sendtype)? == block_bytes).then_some(sendbuf)?;
            Some(sendbuf.cast::<u8>())
        };
        (send, recvbuf.cast::<u8>(), block_bytes)
    } else {
        let block_bytes = plain_bytes(sendbuf, sendcount, sendtype)?;
        (Some(sendbuf.cast()), std::ptr::null_mut(), block_bytes)
    };
    Some(enter(mpi, index, block_bytes)?.and_then(|call| {
        mpi.engine
            .shared_gather(&call, send, block_bytes, recv, root)
    }))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn scatter(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Done {
    let (index, rank, size) = intra(mpi, comm)?;
    let root = valid_root(root, size)?;
    let (send, recv, block_bytes) = if rank == root {
        let block_bytes = plain_blocks(sendbuf, sendcount, sendtype, size)?;
        let recv = if is_in_place(recvbuf) {
            None
        } else {
            (plain_bytes(recvbuf, recvcount, recvtype)? == block_bytes).then_some(recvbuf)?;
            Some(recvbuf.cast::<u8>())
        };
        (sendbuf.cast::<u8>(), recv, block_bytes)
    } else {
        let block_bytes = plain_bytes(recvbuf, recvcount, recvtype)?;
        (std::ptr::null(), Some(recvbuf.cast()), block_bytes)
    };
    let published_bytes = block_bytes.saturating_mul(size as usize);
    Some(enter(mpi, index, published_bytes)?.and_then(|call| {
        mpi.engine
            .shared_scatter(&call, send, block_bytes, recv, root)
    }))
}

/// Allgather (`every_block` false) or Alltoall (true: each rank publishes
/// a block for every member).
#[allow(clippy::too_many_arguments)]
fn all_to(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    every_block: bool,
) -> Done {
    let (index, _, size) = intra(mpi, comm)?;
    let block_bytes = plain_blocks(recvbuf, recvcount, recvtype, size)?;
    let send = if is_in_place(sendbuf) {
        None
    } else {
        let blocks = if every_block { size } else { 1 };
        (plain_blocks(sendbuf, sendcount, sendtype, blocks)? == block_bytes).then_some(())?;
        Some(sendbuf.cast::<u8>())
    };
    let recv = recvbuf.cast::<u8>();
    if every_block {
        let published_bytes = block_bytes.saturating_mul(size as usize);
        Some(
            enter(mpi, index, published_bytes)?
                .and_then(|call| mpi.engine.shared_alltoall(&call, send, recv, block_bytes)),
        )
    } else {
        Some(
            enter(mpi, index, block_bytes)?
                .and_then(|call| mpi.engine.shared_allgather(&call, send, block_bytes, recv)),
        )
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn allgather(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> Done {
    all_to(
        mpi, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, false,
    )
}

#[allow(clippy::too_many_arguments)]
pub(super) fn alltoall(
    mpi: &mut Mpi,
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> Done {
    all_to(
        mpi, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, true,
    )
}
