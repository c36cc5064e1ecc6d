//! Reduce_scatter(_block), Scan and Exscan, blocking and nonblocking.

use resmpi_core::coll;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use super::{any_comm_of, comm_of, inter, small};
use super::{everywhere_reduction, int_array, launch, reduction_fast_path, request_out, Staging};
use crate::abi::*;
use crate::global::{entry, Registry};
#[allow(unused_imports)]
use crate::large_count::{collective, int_and_large_count, Count};

/// Reduce_scatter with `counts[i]` elements for rank i.
fn reduce_scatter_common(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: &[MPI_Count],
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let index = comm_of(mpi, comm)?;
    let rank = mpi.comm(index)?.rank as usize;
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
    // In place the whole input sits in recvbuf.
    let recv_count = if super::is_in_place(sendbuf) {
        total
    } else {
        counts[rank]
    };
    let mut staging = Staging::default();
    let (index, reduction, scale, send, recv) = everywhere_reduction(
        mpi,
        global,
        &mut staging,
        sendbuf,
        recvbuf,
        recv_count,
        total,
        datatype,
        op,
        comm,
    )?;
    // Equal blocks (every rank passes the same counts) may take the fast
    // path: each rank publishes its whole input and folds its own block.
    if counts.iter().all(|&count| count == counts[0]) {
        let elements = counts[0] as usize * scale;
        let block_bytes = reduction.bytes(elements);
        let published_bytes = block_bytes.saturating_mul(counts.len());
        // (The fold is `size` blocks, the bytes published: within the
        // reductions' limit whenever they fit a slot.)
        if let Some(call) = super::fast_path(mpi, index, published_bytes, request)? {
            mpi.engine.shared_reduce_scatter_block(
                &call,
                &reduction,
                send,
                recv,
                block_bytes,
                elements,
            )?;
            staging.unpack_outputs();
            return Ok(());
        }
    }
    let scaled: Vec<usize> = counts.iter().map(|count| *count as usize * scale).collect();
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    coll::reduce_scatter(&mut schedule, send, recv, &scaled);
    launch(mpi, schedule, staging, request)
}

fn reduce_scatter_body<C: Count>(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    let size = mpi.comm(index)?.size() as usize;
    // SAFETY: the caller's array holds one count per (local) rank.
    let counts = unsafe { int_array(recvcounts, size, "recvcounts array")? }.to_vec();
    if is_inter {
        return inter::reduce_scatter(
            mpi, global, index, sendbuf, recvbuf, &counts, datatype, op, request,
        );
    }
    reduce_scatter_common(
        mpi, global, sendbuf, recvbuf, &counts, datatype, op, comm, request,
    )
}

collective!(PMPI_Reduce_scatter = MPI_Reduce_scatter, PMPI_Reduce_scatter_c = MPI_Reduce_scatter_c,
    PMPI_Ireduce_scatter = MPI_Ireduce_scatter, PMPI_Ireduce_scatter_c = MPI_Ireduce_scatter_c,
    ireduce_scatter: reduce_scatter_body, comm,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count,
     datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm));

fn reduce_scatter_block_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    let counts = vec![recvcount; mpi.comm(index)?.size() as usize];
    if is_inter {
        return inter::reduce_scatter(
            mpi, global, index, sendbuf, recvbuf, &counts, datatype, op, request,
        );
    }
    reduce_scatter_common(
        mpi, global, sendbuf, recvbuf, &counts, datatype, op, comm, request,
    )
}

collective!(PMPI_Reduce_scatter_block = MPI_Reduce_scatter_block,
    PMPI_Reduce_scatter_block_c = MPI_Reduce_scatter_block_c,
    PMPI_Ireduce_scatter_block = MPI_Ireduce_scatter_block,
    PMPI_Ireduce_scatter_block_c = MPI_Ireduce_scatter_block_c,
    ireduce_scatter_block: reduce_scatter_block_body, comm, fast small::reduce_scatter_block,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count => into,
     datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm));

fn prefix_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    inclusive: bool,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let mut staging = Staging::default();
    let (index, reduction, scale, send, recv) = everywhere_reduction(
        mpi,
        global,
        &mut staging,
        sendbuf,
        recvbuf,
        count,
        count,
        datatype,
        op,
        comm,
    )?;
    let elements = count as usize * scale;
    let length_bytes = reduction.bytes(elements);
    if let Some(call) = reduction_fast_path(mpi, index, length_bytes, request)? {
        mpi.engine.shared_scan(
            &call,
            &reduction,
            send,
            recv,
            length_bytes,
            elements,
            inclusive,
        )?;
        staging.unpack_outputs();
        return Ok(());
    }
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    if inclusive {
        coll::scan(&mut schedule, send, recv, elements);
    } else {
        coll::exscan(&mut schedule, send, recv, elements);
    }
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Scan = MPI_Scan, PMPI_Scan_c = MPI_Scan_c,
    PMPI_Iscan = MPI_Iscan, PMPI_Iscan_c = MPI_Iscan_c, iscan: prefix_body[true], comm,
    fast small::scan[true],
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count => into,
     datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm));

collective!(PMPI_Exscan = MPI_Exscan, PMPI_Exscan_c = MPI_Exscan_c,
    PMPI_Iexscan = MPI_Iexscan, PMPI_Iexscan_c = MPI_Iexscan_c, iexscan: prefix_body[false],
    comm, fast small::scan[false],
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count => into,
     datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm));
