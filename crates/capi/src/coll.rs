//! Collective entry points and reduction operators.
//!
//! Each collective has one body that checks the arguments and builds the
//! schedule (`resmpi_core::coll`); the blocking entry point runs it, the
//! `I` one starts it under a request. Buffers become byte regions in
//! [`region`] and [`block`], the one place where packing of non-contiguous
//! datatypes will plug in.

mod exchange;
mod gather;
mod prefix;

use resmpi_core::coll::{self, Block, Reduction};
use resmpi_core::op::Op;
use resmpi_core::schedule::Schedule;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{buffer_bytes, reduction_element};
use crate::global::{entry, Registry};
use crate::handles::{builtin_op, op_handle, op_index, request_handle};

/// The op behind a handle, or MPI_ERR_OP.
fn resolve_op(global: &Registry, op: MPI_Op) -> MpiResult<Op> {
    let resolved = builtin_op(op)
        .or_else(|| op_index(op).and_then(|index| global.ops.get(index).copied().flatten()));
    resolved.ok_or_else(|| {
        let what = if op == MPI_OP_NULL {
            "MPI_OP_NULL".to_string()
        } else {
            format!("{op:#x}")
        };
        MpiError::new(ErrorClass::Op, format!("operation {what} is not valid"))
    })
}

/// The reduction for (`op`, `datatype`) and how many of its elements one
/// element of `datatype` holds (predefined ops on a contiguous derived type
/// work on its basic elements; user ops see the application's datatype).
fn reduction_of(
    global: &Registry,
    op: MPI_Op,
    datatype: MPI_Datatype,
) -> MpiResult<(Reduction, usize)> {
    let op = resolve_op(global, op)?;
    if matches!(op, Op::User { .. }) {
        let info = crate::datatype::layout_of(datatype)?.info();
        let reduction = Reduction {
            op,
            info,
            datatype_handle: datatype,
        };
        return Ok((reduction, 1));
    }
    let (info, repetitions) = reduction_element(datatype)?;
    // Check op/type compatibility locally, before any rank communicates,
    // so an invalid combination fails everywhere instead of hanging peers.
    resmpi_core::op::reduce_predefined(op, &info, &[], &mut [], 0)?;
    let reduction = Reduction {
        op,
        info,
        datatype_handle: datatype,
    };
    Ok((reduction, repetitions))
}

/// The communicator a collective runs on: an intra-communicator (collectives
/// on inter-communicators are not implemented, and running one over the
/// local group alone would silently be wrong).
fn comm_of(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<usize> {
    let index = crate::p2p::comm_of(mpi, comm)?;
    if mpi.comm(index)?.is_inter() {
        return Err(MpiError::new(
            ErrorClass::Comm,
            "collectives on inter-communicators are not implemented by resmpi",
        ));
    }
    Ok(index)
}

fn check_root(mpi: &Mpi, comm: usize, root: c_int) -> MpiResult<u32> {
    let size = mpi.comm(comm)?.size() as c_int;
    if !(0..size).contains(&root) {
        return Err(MpiError::new(
            ErrorClass::Root,
            format!("root {root} is out of range (communicator size {size})"),
        ));
    }
    Ok(root as u32)
}

fn is_in_place(buffer: *const c_void) -> bool {
    buffer as isize == MPI_IN_PLACE
}

/// MPI_IN_PLACE where the standard does not allow it.
fn in_place_not_allowed(what: &str) -> MpiError {
    MpiError::new(
        ErrorClass::Buffer,
        format!("MPI_IN_PLACE is not allowed here: {what}"),
    )
}

/// `count` elements of `datatype` at `buffer` as a contiguous byte region
/// (checks the count, the datatype and a NULL buffer).
fn region(
    buffer: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
) -> MpiResult<(*mut u8, usize)> {
    let (length_bytes, _) = buffer_bytes(buffer, count, datatype)?;
    Ok((buffer as *mut u8, length_bytes))
}

/// The block of `count` elements of `datatype` at `displacement_bytes` from `base`.
fn block(
    base: *const c_void,
    displacement_bytes: isize,
    count: c_int,
    datatype: MPI_Datatype,
) -> MpiResult<Block> {
    let data = (base as *mut u8).wrapping_offset(displacement_bytes);
    let (_, length_bytes) = region(data.cast(), count, datatype)?;
    Ok(Block { data, length_bytes })
}

/// The extent of `datatype` in bytes (displacements of the v-collectives
/// count in extents).
fn extent_of(datatype: MPI_Datatype) -> MpiResult<isize> {
    Ok(crate::datatype::layout_of(datatype)?.info().extent_bytes as isize)
}

/// `count` entries of a C int array argument; MPI_ERR_ARG when NULL.
///
/// # Safety
/// `values` is NULL or points to `count` ints.
unsafe fn int_array<'a>(values: *const c_int, count: usize, what: &str) -> MpiResult<&'a [c_int]> {
    if values.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, format!("{what} is NULL")));
    }
    // SAFETY: guaranteed by the caller.
    Ok(unsafe { std::slice::from_raw_parts(values, count) })
}

/// Check the request pointer of a nonblocking collective (before anything starts).
fn request_out(request: *mut MPI_Request) -> MpiResult<Option<*mut MPI_Request>> {
    if request.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
    }
    Ok(Some(request))
}

/// Run a built schedule (blocking: `request` None) or start it and hand
/// back its request.
fn launch(mpi: &mut Mpi, schedule: Schedule, request: Option<*mut MPI_Request>) -> MpiResult<()> {
    match request {
        None => mpi.engine.run_schedule(schedule),
        Some(request) => {
            let index = mpi.engine.start_schedule(schedule)?;
            // SAFETY: checked non-null by request_out; the caller's variable.
            unsafe { *request = request_handle(index) };
            Ok(())
        }
    }
}

fn barrier_body(mpi: &mut Mpi, comm: MPI_Comm, request: Option<*mut MPI_Request>) -> MpiResult<()> {
    let index = comm_of(mpi, comm)?;
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::barrier(&mut schedule);
    launch(mpi, schedule, request)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Barrier(comm: MPI_Comm) -> c_int {
    entry("MPI_Barrier", comm, |mpi, _| barrier_body(mpi, comm, None))
}
const _: fn_types::MPI_Barrier = PMPI_Barrier;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ibarrier(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    entry("MPI_Ibarrier", comm, |mpi, _| {
        barrier_body(mpi, comm, request_out(request)?)
    })
}
const _: fn_types::MPI_Ibarrier = PMPI_Ibarrier;

fn bcast_body(
    mpi: &mut Mpi,
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let index = comm_of(mpi, comm)?;
    let root = check_root(mpi, index, root)?;
    let (data, length_bytes) = region(buffer, count, datatype)?;
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::bcast(&mut schedule, data, length_bytes, root);
    launch(mpi, schedule, request)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry("MPI_Bcast", comm, |mpi, _| {
        bcast_body(mpi, buffer, count, datatype, root, comm, None)
    })
}
const _: fn_types::MPI_Bcast = PMPI_Bcast;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ibcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Ibcast", comm, |mpi, _| {
        let request = request_out(request)?;
        bcast_body(mpi, buffer, count, datatype, root, comm, request)
    })
}
const _: fn_types::MPI_Ibcast = PMPI_Ibcast;

fn reduce_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let index = comm_of(mpi, comm)?;
    let root = check_root(mpi, index, root)?;
    let (reduction, scale) = reduction_of(global, op, datatype)?;
    let is_root = mpi.comm(index)?.rank == root;
    let in_place = is_in_place(sendbuf);
    if in_place && !is_root {
        return Err(in_place_not_allowed(
            "only the root of MPI_Reduce may pass it",
        ));
    }
    let (recv, _) = if is_root {
        region(recvbuf, count, datatype)?
    } else {
        (std::ptr::null_mut(), 0)
    };
    let (send, _) = if in_place {
        (recv, 0)
    } else {
        region(sendbuf, count, datatype)?
    };
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    coll::reduce(&mut schedule, send, recv, count as usize * scale, root);
    launch(mpi, schedule, request)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry("MPI_Reduce", comm, |mpi, global| {
        reduce_body(
            mpi, global, sendbuf, recvbuf, count, datatype, op, root, comm, None,
        )
    })
}
const _: fn_types::MPI_Reduce = PMPI_Reduce;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ireduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Ireduce", comm, |mpi, global| {
        let request = request_out(request)?;
        reduce_body(
            mpi, global, sendbuf, recvbuf, count, datatype, op, root, comm, request,
        )
    })
}
const _: fn_types::MPI_Ireduce = PMPI_Ireduce;

/// The common checks of the reductions whose input may be MPI_IN_PLACE on
/// every rank: (comm index, reduction, element scale, send region).
/// In place, the send region is `recv`.
fn everywhere_reduction(
    mpi: &Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recv: *mut u8,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> MpiResult<(usize, Reduction, usize, *const u8)> {
    let index = comm_of(mpi, comm)?;
    let (reduction, scale) = reduction_of(global, op, datatype)?;
    let send = if is_in_place(sendbuf) {
        recv as *const u8
    } else {
        region(sendbuf, count, datatype)?.0
    };
    Ok((index, reduction, scale, send))
}

fn allreduce_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    comm_of(mpi, comm)?;
    let (recv, _) = region(recvbuf, count, datatype)?;
    let (index, reduction, scale, send) =
        everywhere_reduction(mpi, global, sendbuf, recv, count, datatype, op, comm)?;
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    coll::allreduce(&mut schedule, send, recv, count as usize * scale);
    launch(mpi, schedule, request)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    entry("MPI_Allreduce", comm, |mpi, global| {
        allreduce_body(
            mpi, global, sendbuf, recvbuf, count, datatype, op, comm, None,
        )
    })
}
const _: fn_types::MPI_Allreduce = PMPI_Allreduce;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iallreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Iallreduce", comm, |mpi, global| {
        let request = request_out(request)?;
        allreduce_body(
            mpi, global, sendbuf, recvbuf, count, datatype, op, comm, request,
        )
    })
}
const _: fn_types::MPI_Iallreduce = PMPI_Iallreduce;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    entry("MPI_Reduce_local", MPI_COMM_WORLD, |_, global| {
        let (reduction, scale) = reduction_of(global, op, datatype)?;
        let (inout, length) = region(inoutbuf, count, datatype)?;
        let (input, _) = region(inbuf, count, datatype)?;
        if length == 0 {
            return Ok(());
        }
        // SAFETY: spans checked above; the caller's buffers.
        unsafe {
            reduction.apply(
                std::slice::from_raw_parts(input, length),
                std::slice::from_raw_parts_mut(inout, length),
                count as usize * scale,
            )
        }
    })
}
const _: fn_types::MPI_Reduce_local = PMPI_Reduce_local;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Op_create(
    user_fn: MPI_User_function,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    entry("MPI_Op_create", MPI_COMM_WORLD, |_, global| {
        let (Some(function), false) = (user_fn, op.is_null()) else {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "function or op pointer is NULL",
            ));
        };
        global.ops.push(Some(Op::User {
            function,
            commutative: commute != 0,
        }));
        // SAFETY: checked non-null.
        unsafe { *op = op_handle(global.ops.len() - 1) };
        Ok(())
    })
}
const _: fn_types::MPI_Op_create = PMPI_Op_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Op_free(op: *mut MPI_Op) -> c_int {
    entry("MPI_Op_free", MPI_COMM_WORLD, |_, global| {
        if op.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "op pointer is NULL"));
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *op };
        let index = op_index(handle)
            .filter(|index| global.ops.get(*index).is_some_and(Option::is_some))
            .ok_or_else(|| MpiError::new(ErrorClass::Op, "only user-defined ops can be freed"))?;
        global.ops[index] = None;
        // SAFETY: checked non-null.
        unsafe { *op = MPI_OP_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Op_free = PMPI_Op_free;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Op_commutative(op: MPI_Op, commute: *mut c_int) -> c_int {
    entry("MPI_Op_commutative", MPI_COMM_WORLD, |_, global| {
        let op = resolve_op(global, op)?;
        if !commute.is_null() {
            // SAFETY: checked non-null.
            unsafe { *commute = op.is_commutative() as c_int };
        }
        Ok(())
    })
}
const _: fn_types::MPI_Op_commutative = PMPI_Op_commutative;
