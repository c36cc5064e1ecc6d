//! Reduce_scatter(_block), Scan and Exscan, blocking and nonblocking.

use resmpi_core::coll;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use super::{any_comm_of, comm_of, inter, small};
use super::{everywhere_reduction, int_array, launch, reduction_fast_path, request_out, Staging};
use crate::abi::*;
use crate::global::{entry, Registry};

/// Reduce_scatter with `counts[i]` elements for rank i.
fn reduce_scatter_common(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: &[c_int],
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
    let total: i64 = counts.iter().map(|count| *count as i64).sum();
    let total = c_int::try_from(total)
        .map_err(|_| MpiError::new(ErrorClass::Count, "sum of the counts does not fit an int"))?;
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

fn reduce_scatter_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    entry("MPI_Reduce_scatter", comm, |mpi, global| {
        reduce_scatter_body(
            mpi, global, sendbuf, recvbuf, recvcounts, datatype, op, comm, None,
        )
    })
}
const _: fn_types::MPI_Reduce_scatter = PMPI_Reduce_scatter;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ireduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Ireduce_scatter", comm, |mpi, global| {
        let request = request_out(request)?;
        reduce_scatter_body(
            mpi, global, sendbuf, recvbuf, recvcounts, datatype, op, comm, request,
        )
    })
}
const _: fn_types::MPI_Ireduce_scatter = PMPI_Ireduce_scatter;

fn reduce_scatter_block_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    entry("MPI_Reduce_scatter_block", comm, |mpi, global| {
        small::reduce_scatter_block(mpi, sendbuf, recvbuf, recvcount, datatype, op, comm)
            .unwrap_or_else(|| {
                reduce_scatter_block_body(
                    mpi, global, sendbuf, recvbuf, recvcount, datatype, op, comm, None,
                )
            })
    })
}
const _: fn_types::MPI_Reduce_scatter_block = PMPI_Reduce_scatter_block;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ireduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Ireduce_scatter_block", comm, |mpi, global| {
        let request = request_out(request)?;
        reduce_scatter_block_body(
            mpi, global, sendbuf, recvbuf, recvcount, datatype, op, comm, request,
        )
    })
}
const _: fn_types::MPI_Ireduce_scatter_block = PMPI_Ireduce_scatter_block;

fn prefix_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    entry("MPI_Scan", comm, |mpi, global| {
        small::scan(mpi, sendbuf, recvbuf, count, datatype, op, comm, true).unwrap_or_else(|| {
            prefix_body(
                mpi, global, sendbuf, recvbuf, count, datatype, op, comm, true, None,
            )
        })
    })
}
const _: fn_types::MPI_Scan = PMPI_Scan;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Iscan", comm, |mpi, global| {
        let request = request_out(request)?;
        prefix_body(
            mpi, global, sendbuf, recvbuf, count, datatype, op, comm, true, request,
        )
    })
}
const _: fn_types::MPI_Iscan = PMPI_Iscan;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Exscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    entry("MPI_Exscan", comm, |mpi, global| {
        small::scan(mpi, sendbuf, recvbuf, count, datatype, op, comm, false).unwrap_or_else(|| {
            prefix_body(
                mpi, global, sendbuf, recvbuf, count, datatype, op, comm, false, None,
            )
        })
    })
}
const _: fn_types::MPI_Exscan = PMPI_Exscan;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iexscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Iexscan", comm, |mpi, global| {
        let request = request_out(request)?;
        prefix_body(
            mpi, global, sendbuf, recvbuf, count, datatype, op, comm, false, request,
        )
    })
}
const _: fn_types::MPI_Iexscan = PMPI_Iexscan;
