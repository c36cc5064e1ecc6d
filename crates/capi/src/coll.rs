//! Collective entry points and reduction operators.

use resmpi_core::coll::Reduction;
use resmpi_core::op::Op;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{buffer_bytes, reduction_element};
use crate::global::{entry, Registry};
use crate::handles::{builtin_op, op_handle, op_index};
use crate::p2p::comm_of;

fn reduction_of(global: &Registry, op: MPI_Op, datatype: MPI_Datatype) -> MpiResult<Reduction> {
    let (info, repetitions) = reduction_element(datatype)?;
    if repetitions != 1 {
        return Err(MpiError::new(
            ErrorClass::Type,
            "reductions on derived datatypes arrive with issue #4",
        ));
    }
    let resolved = builtin_op(op)
        .or_else(|| op_index(op).and_then(|index| global.ops.get(index).copied().flatten()));
    let op = resolved.ok_or_else(|| {
        let what = if op == MPI_OP_NULL {
            "MPI_OP_NULL".to_string()
        } else {
            format!("{op:#x}")
        };
        MpiError::new(ErrorClass::Op, format!("operation {what} is not valid"))
    })?;
    if !matches!(op, Op::User { .. }) {
        // Check op/type compatibility locally, before any rank communicates,
        // so an invalid combination fails everywhere instead of hanging peers.
        resmpi_core::op::reduce_predefined(op, &info, &[], &mut [], 0)?;
    }
    Ok(Reduction {
        op,
        info,
        datatype_handle: datatype,
    })
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

/// Mutable byte view of a user buffer.
unsafe fn bytes_mut<'a>(buffer: *mut c_void, length: usize) -> &'a mut [u8] {
    if length == 0 || buffer.is_null() {
        return &mut [];
    }
    // SAFETY: the caller promises `length` writable bytes.
    unsafe { std::slice::from_raw_parts_mut(buffer.cast(), length) }
}

/// Byte view of a user buffer.
unsafe fn bytes_of<'a>(buffer: *const c_void, length: usize) -> &'a [u8] {
    // SAFETY: forwarded promise.
    unsafe { resmpi_core::engine::slice_from(buffer.cast(), length) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Barrier(comm: MPI_Comm) -> c_int {
    entry("MPI_Barrier", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        mpi.barrier(index)
    })
}
const _: fn_types::MPI_Barrier = PMPI_Barrier;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    entry("MPI_Bcast", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        let (length, _) = buffer_bytes(buffer, count, datatype)?;
        let root = check_root(mpi, index, root)?;
        // SAFETY: buffer_bytes checked the span; the caller owns the buffer.
        mpi.bcast(index, unsafe { bytes_mut(buffer, length) }, root)
    })
}
const _: fn_types::MPI_Bcast = PMPI_Bcast;

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
        let index = comm_of(mpi, comm)?;
        let root = check_root(mpi, index, root)?;
        let reduction = reduction_of(global, op, datatype)?;
        let is_root = mpi.comm(index)?.rank == root;
        let in_place = is_in_place(sendbuf);
        if in_place && !is_root {
            return Err(MpiError::new(
                ErrorClass::Buffer,
                "MPI_IN_PLACE is only valid at the root of MPI_Reduce",
            ));
        }
        let (length, _) = buffer_bytes(if in_place { recvbuf } else { sendbuf }, count, datatype)?;
        if is_root {
            buffer_bytes(recvbuf, count, datatype)?;
        }
        // SAFETY: spans checked above; buffers belong to the caller.
        let input = if in_place {
            unsafe { bytes_of(recvbuf, length) }.to_vec()
        } else {
            unsafe { bytes_of(sendbuf, length) }.to_vec()
        };
        let mut scratch = Vec::new();
        let result: &mut [u8] = if is_root {
            // SAFETY: recvbuf spans `length` bytes at the root.
            unsafe { bytes_mut(recvbuf, length) }
        } else {
            scratch.resize(length, 0);
            &mut scratch
        };
        mpi.reduce(index, &input, result, count as usize, reduction, root)
    })
}
const _: fn_types::MPI_Reduce = PMPI_Reduce;

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
        let index = comm_of(mpi, comm)?;
        let reduction = reduction_of(global, op, datatype)?;
        let (length, _) = buffer_bytes(recvbuf, count, datatype)?;
        let in_place = is_in_place(sendbuf);
        if !in_place {
            buffer_bytes(sendbuf, count, datatype)?;
        }
        // SAFETY: spans checked above.
        let input = if in_place {
            unsafe { bytes_of(recvbuf, length) }.to_vec()
        } else {
            unsafe { bytes_of(sendbuf, length) }.to_vec()
        };
        // SAFETY: recvbuf spans `length` bytes.
        mpi.allreduce(
            index,
            &input,
            unsafe { bytes_mut(recvbuf, length) },
            count as usize,
            reduction,
        )
    })
}
const _: fn_types::MPI_Allreduce = PMPI_Allreduce;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    entry("MPI_Reduce_local", MPI_COMM_WORLD, |_, global| {
        let reduction = reduction_of(global, op, datatype)?;
        let (length, _) = buffer_bytes(inoutbuf, count, datatype)?;
        buffer_bytes(inbuf, count, datatype)?;
        // SAFETY: spans checked above.
        unsafe {
            reduction.apply(
                bytes_of(inbuf, length),
                bytes_mut(inoutbuf, length),
                count as usize,
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
        let reduction = reduction_of(global, op, MPI_BYTE)?;
        if !commute.is_null() {
            // SAFETY: checked non-null.
            unsafe { *commute = reduction.op.is_commutative() as c_int };
        }
        Ok(())
    })
}
const _: fn_types::MPI_Op_commutative = PMPI_Op_commutative;
