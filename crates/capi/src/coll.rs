//! Collective entry points and reduction operators.
//!
//! Each collective has one body that checks the arguments and builds the
//! schedule (`resmpi_core::coll`); the blocking entry point runs it, the
//! `I` one starts it under a request.
//!
//! Small blocking collectives on communicators whose members all share
//! this host take the shared-memory fast path instead
//! (`resmpi_core::coll::shared_memory`): the same argument checks and
//! staging, then no schedule at all. The decision ([`fast_path`]) depends
//! only on what every member agrees on, so all take the same path.
//!
//! Buffers become byte regions in one place, [`Staging`]: data of
//! non-contiguous datatypes is packed, so every algorithm works on
//! contiguous bytes and sender and receiver need only agree on the packed
//! bytes (type signatures may differ, as MPI allows). Inputs are packed
//! into copies the schedule owns; outputs are received into staging
//! buffers unpacked when the collective completes: after the run for a
//! blocking call, by the request completion of point-to-point
//! (`datatype_packing`) for a nonblocking one, so the application's gaps
//! are never written and its buffers only at completion.

pub(crate) mod exchange;
pub(crate) mod gather;
mod inter;
pub(crate) mod neighbor;
pub(crate) mod prefix;
mod small;

use resmpi_core::coll::shared_memory::{Call, MAX_REDUCTION_FOLD_BYTES};
use resmpi_core::coll::{self, Block, Reduction};
use resmpi_core::datatype::TypeInfo;
use resmpi_core::op::{Op, UserFunction};
use resmpi_core::schedule::Schedule;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::{collective_buffer, is_raw_span, reduction_element, CollectiveBuffer};
use crate::datatype_packing::{stage_collective, StagedPart};
use crate::global::{entry, Registry};
use crate::handles::{builtin_op, op_handle, op_index, request_handle};
#[allow(unused_imports)]
use crate::large_count::{collective, int_and_large_count, Count};

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
        let layout = crate::datatype::layout_of(datatype)?;
        if is_raw_span(datatype)? {
            let reduction = Reduction {
                op,
                info: layout.info(),
                datatype_handle: datatype,
                layout: None,
            };
            return Ok((reduction, 1));
        }
        // The collective moves packed elements; the function gets them
        // unpacked into the type's layout (see `Reduction::layout`).
        let info = TypeInfo {
            size_bytes: layout.size_bytes,
            extent_bytes: layout.size_bytes,
            basic_elements: layout.basic_elements(),
            kind: layout.info().kind,
        };
        let reduction = Reduction {
            op,
            info,
            datatype_handle: datatype,
            layout: Some(layout),
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
        layout: None,
    };
    Ok((reduction, repetitions))
}

/// The communicator a collective runs on and whether it is an
/// inter-communicator (whose collectives are in [`inter`]).
fn any_comm_of(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<(usize, bool)> {
    let index = crate::p2p::comm_of(mpi, comm)?;
    Ok((index, mpi.comm(index)?.is_inter()))
}

/// The communicator of a collective that has no inter-communicator form
/// here: an intra-communicator (Scan and Exscan are not defined on
/// inter-communicators; Reduce_scatter is not implemented on them, and
/// running one over the local group alone would silently be wrong).
fn comm_of(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<usize> {
    let index = crate::p2p::comm_of(mpi, comm)?;
    if mpi.comm(index)?.is_inter() {
        return Err(MpiError::new(
            ErrorClass::Comm,
            "this collective is not defined or not implemented by resmpi on inter-communicators",
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

/// How a collective uses one of its buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Usage {
    /// Only read (send buffers).
    Input,
    /// Only written (receive buffers).
    Output,
    /// Read and written (MPI_IN_PLACE receive buffers).
    InOut,
}

/// The buffers of one collective call as its schedule sees them.
#[derive(Default)]
struct Staging {
    /// Packed copies of non-contiguous inputs, handed to the schedule.
    inputs: Vec<Box<[u8]>>,
    /// Staging of non-contiguous outputs, unpacked at completion.
    outputs: Vec<StagedPart>,
}

impl Staging {
    /// `count` elements of `datatype` at `buffer` as a contiguous byte
    /// region (checks the count, the datatype and a NULL buffer).
    fn region(
        &mut self,
        buffer: *const c_void,
        count: MPI_Count,
        datatype: MPI_Datatype,
        usage: Usage,
    ) -> MpiResult<(*mut u8, usize)> {
        let packed = match collective_buffer(buffer, count, datatype)? {
            CollectiveBuffer::Raw {
                pointer,
                length_bytes,
            } => return Ok((pointer, length_bytes)),
            CollectiveBuffer::Packed(packed) => packed,
        };
        let length_bytes = packed.length_bytes;
        if usage == Usage::Input {
            let mut copy = vec![0u8; length_bytes].into_boxed_slice();
            packed.pack_into(&mut copy);
            let pointer = copy.as_mut_ptr();
            self.inputs.push(copy);
            return Ok((pointer, length_bytes));
        }
        let mut part = StagedPart::new(packed);
        if usage == Usage::InOut {
            part.target.pack_into(&mut part.staging);
        }
        let pointer = part.staging.as_mut_ptr();
        self.outputs.push(part);
        Ok((pointer, length_bytes))
    }

    /// The block of `count` elements of `datatype` at `displacement_bytes` from `base`.
    fn block(
        &mut self,
        base: *const c_void,
        displacement_bytes: isize,
        count: MPI_Count,
        datatype: MPI_Datatype,
        usage: Usage,
    ) -> MpiResult<Block> {
        let start = (base as *mut u8).wrapping_offset(displacement_bytes);
        let (data, length_bytes) = self.region(start.cast(), count, datatype, usage)?;
        Ok(Block { data, length_bytes })
    }

    /// Unpack every output (the collective has completed).
    fn unpack_outputs(&self) {
        for part in &self.outputs {
            part.unpack(part.staging.len());
        }
    }
}

/// The bytes `count` elements of `datatype` occupy packed (how a block's
/// size is compared between ranks) without staging anything.
fn checked_region(
    buffer: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> MpiResult<usize> {
    Ok(match collective_buffer(buffer, count, datatype)? {
        CollectiveBuffer::Raw { length_bytes, .. } => length_bytes,
        CollectiveBuffer::Packed(packed) => packed.length_bytes,
    })
}

/// The extent of `datatype` in bytes (displacements of the v-collectives
/// count in extents).
fn extent_of(datatype: MPI_Datatype) -> MpiResult<isize> {
    Ok(crate::datatype::layout_of(datatype)?.info().extent_bytes as isize)
}

/// `count` entries of a C count or displacement array argument (`int` in
/// the classic functions, `MPI_Count`/`MPI_Aint` in the `_c` ones),
/// widened; MPI_ERR_ARG when NULL.
///
/// # Safety
/// `values` is NULL or points to `count` entries.
unsafe fn int_array<C: Count>(
    values: *const C,
    count: usize,
    what: &str,
) -> MpiResult<Vec<MPI_Count>> {
    if values.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, format!("{what} is NULL")));
    }
    // SAFETY: guaranteed by the caller.
    let values = unsafe { std::slice::from_raw_parts(values, count) };
    Ok(values.iter().map(|&value| value.into()).collect())
}

/// Check the request pointer of a nonblocking collective (before anything starts).
fn request_out(request: *mut MPI_Request) -> MpiResult<Option<*mut MPI_Request>> {
    if request.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
    }
    Ok(Some(request))
}

/// Run a built schedule (blocking: `request` None) or start it and hand
/// back its request; `staging` holds the packed buffers its steps use.
fn launch(
    mpi: &mut Mpi,
    mut schedule: Schedule,
    staging: Staging,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let Staging { inputs, outputs } = staging;
    for input in inputs {
        schedule.keep(input);
    }
    match request {
        None => match mpi.engine.run_schedule(schedule) {
            Ok(()) => {
                Staging {
                    inputs: Vec::new(),
                    outputs,
                }
                .unpack_outputs();
                Ok(())
            }
            Err(error) => {
                // A schedule that failed may still be in the engine with
                // steps pointing into the staging: never free it under them.
                std::mem::forget(outputs);
                Err(error)
            }
        },
        Some(request) => {
            let index = match mpi.engine.start_schedule(schedule) {
                Ok(index) => index,
                Err(error) => {
                    // As above: the schedule may outlive this call.
                    std::mem::forget(outputs);
                    return Err(error);
                }
            };
            stage_collective(mpi, index, outputs);
            // SAFETY: checked non-null by request_out; the caller's variable.
            unsafe { *request = request_handle(index) };
            Ok(())
        }
    }
}

/// The shared-memory fast path for a blocking (`request` None) collective
/// on intra-communicator `comm` in which each rank publishes at most
/// `published_bytes`, or None for the schedules.
fn fast_path(
    mpi: &mut Mpi,
    comm: usize,
    published_bytes: usize,
    request: Option<*mut MPI_Request>,
) -> MpiResult<Option<Call>> {
    if request.is_some() {
        return Ok(None);
    }
    mpi.engine.shared_memory_call(comm, published_bytes)
}

/// [`fast_path`] for a reduction of `length_bytes` (a smaller limit:
/// every rank folds every contribution, see `MAX_REDUCTION_FOLD_BYTES`).
fn reduction_fast_path(
    mpi: &mut Mpi,
    comm: usize,
    length_bytes: usize,
    request: Option<*mut MPI_Request>,
) -> MpiResult<Option<Call>> {
    let size = mpi.comm(comm)?.size() as usize;
    if length_bytes.saturating_mul(size) > MAX_REDUCTION_FOLD_BYTES {
        return Ok(None);
    }
    fast_path(mpi, comm, length_bytes, request)
}

fn barrier_body(mpi: &mut Mpi, comm: MPI_Comm, request: Option<*mut MPI_Request>) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        return inter::barrier(mpi, index, request);
    }
    if let Some(call) = fast_path(mpi, index, 0, request)? {
        return mpi.engine.shared_barrier(&call);
    }
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::barrier(&mut schedule);
    launch(mpi, schedule, Staging::default(), request)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Barrier(comm: MPI_Comm) -> c_int {
    entry("MPI_Barrier", comm, |mpi, _| {
        small::barrier(mpi, comm).unwrap_or_else(|| barrier_body(mpi, comm, None))
    })
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
    _global: &Registry,
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        return inter::bcast(mpi, index, buffer, count, datatype, root, request);
    }
    let root = check_root(mpi, index, root)?;
    let usage = if mpi.comm(index)?.rank == root {
        Usage::Input
    } else {
        Usage::Output
    };
    let mut staging = Staging::default();
    let (data, length_bytes) = staging.region(buffer, count, datatype, usage)?;
    if let Some(call) = fast_path(mpi, index, length_bytes, request)? {
        mpi.engine.shared_bcast(&call, data, length_bytes, root)?;
        staging.unpack_outputs();
        return Ok(());
    }
    let mut schedule = mpi.engine.new_schedule(index)?;
    coll::bcast(&mut schedule, data, length_bytes, root);
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Bcast = MPI_Bcast, PMPI_Bcast_c = MPI_Bcast_c,
    PMPI_Ibcast = MPI_Ibcast, PMPI_Ibcast_c = MPI_Ibcast_c, ibcast: bcast_body, comm,
    fast small::bcast,
    (buffer: *mut c_void, count: Count => into, datatype: MPI_Datatype, root: c_int,
     comm: MPI_Comm));

fn reduce_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        return inter::reduce(
            mpi, global, index, sendbuf, recvbuf, count, datatype, op, root, request,
        );
    }
    let root = check_root(mpi, index, root)?;
    let (reduction, scale) = reduction_of(global, op, datatype)?;
    let is_root = mpi.comm(index)?.rank == root;
    let in_place = is_in_place(sendbuf);
    if in_place && !is_root {
        return Err(in_place_not_allowed(
            "only the root of MPI_Reduce may pass it",
        ));
    }
    let mut staging = Staging::default();
    let (recv, _) = if is_root {
        let usage = if in_place {
            Usage::InOut
        } else {
            Usage::Output
        };
        staging.region(recvbuf, count, datatype, usage)?
    } else {
        (std::ptr::null_mut(), 0)
    };
    let (send, _) = if in_place {
        (recv, 0)
    } else {
        staging.region(sendbuf, count, datatype, Usage::Input)?
    };
    let elements = count as usize * scale;
    let length_bytes = reduction.bytes(elements);
    if let Some(call) = reduction_fast_path(mpi, index, length_bytes, request)? {
        mpi.engine
            .shared_reduce(&call, &reduction, send, recv, length_bytes, elements, root)?;
        staging.unpack_outputs();
        return Ok(());
    }
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    coll::reduce(&mut schedule, send, recv, elements, root);
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Reduce = MPI_Reduce, PMPI_Reduce_c = MPI_Reduce_c,
    PMPI_Ireduce = MPI_Ireduce, PMPI_Ireduce_c = MPI_Ireduce_c, ireduce: reduce_body, comm,
    fast small::reduce,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count => into,
     datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm));

/// The common checks of the reductions whose input may be MPI_IN_PLACE on
/// every rank: (comm index, reduction, element scale, send region, receive
/// region). The receive buffer holds `recv_count` elements, the input
/// `count`; in place, the send region is the receive region.
fn everywhere_reduction(
    mpi: &Mpi,
    global: &Registry,
    staging: &mut Staging,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recv_count: MPI_Count,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> MpiResult<(usize, Reduction, usize, *const u8, *mut u8)> {
    let index = comm_of(mpi, comm)?;
    let (reduction, scale) = reduction_of(global, op, datatype)?;
    let in_place = is_in_place(sendbuf);
    let usage = if in_place {
        Usage::InOut
    } else {
        Usage::Output
    };
    let (recv, _) = staging.region(recvbuf, recv_count, datatype, usage)?;
    let send = if in_place {
        recv as *const u8
    } else {
        staging.region(sendbuf, count, datatype, Usage::Input)?.0
    };
    Ok((index, reduction, scale, send, recv))
}

fn allreduce_body(
    mpi: &mut Mpi,
    global: &Registry,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: Option<*mut MPI_Request>,
) -> MpiResult<()> {
    let (index, is_inter) = any_comm_of(mpi, comm)?;
    if is_inter {
        return inter::allreduce(
            mpi, global, index, sendbuf, recvbuf, count, datatype, op, request,
        );
    }
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
        mpi.engine
            .shared_allreduce(&call, &reduction, send, recv, length_bytes, elements)?;
        staging.unpack_outputs();
        return Ok(());
    }
    let mut schedule = mpi.engine.new_schedule(index)?;
    schedule.reduction = Some(reduction);
    coll::allreduce(&mut schedule, send, recv, elements);
    launch(mpi, schedule, staging, request)
}

collective!(PMPI_Allreduce = MPI_Allreduce, PMPI_Allreduce_c = MPI_Allreduce_c,
    PMPI_Iallreduce = MPI_Iallreduce, PMPI_Iallreduce_c = MPI_Iallreduce_c,
    iallreduce: allreduce_body, comm, fast small::allreduce,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count => into,
     datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm));

unsafe fn reduce_local<C: Count>(
    name: &str,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: C,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    let count: MPI_Count = count.into();
    entry(name, MPI_COMM_WORLD, |_, global| {
        let (reduction, scale) = reduction_of(global, op, datatype)?;
        let mut staging = Staging::default();
        let (inout, length) = staging.region(inoutbuf, count, datatype, Usage::InOut)?;
        let (input, _) = staging.region(inbuf, count, datatype, Usage::Input)?;
        if length == 0 {
            return Ok(());
        }
        // SAFETY: spans checked above; the caller's buffers or the staging copies.
        unsafe {
            reduction.apply(
                std::slice::from_raw_parts(input, length),
                std::slice::from_raw_parts_mut(inout, length),
                count as usize * scale,
            )?
        };
        staging.unpack_outputs();
        Ok(())
    })
}
int_and_large_count!(PMPI_Reduce_local = MPI_Reduce_local, PMPI_Reduce_local_c = MPI_Reduce_local_c, reduce_local, (
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
));

/// MPI_Op_create and MPI_Op_create_c: the op keeps which kind of function
/// it calls (an `int` or an `MPI_Count` length).
fn op_create(name: &str, function: Option<UserFunction>, commute: c_int, op: *mut MPI_Op) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, global| {
        let (Some(function), false) = (function, op.is_null()) else {
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Op_create(
    user_fn: MPI_User_function,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    op_create("MPI_Op_create", user_fn.map(UserFunction::Int), commute, op)
}
const _: fn_types::MPI_Op_create = PMPI_Op_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Op_create_c(
    user_fn: MPI_User_function_c,
    commute: c_int,
    op: *mut MPI_Op,
) -> c_int {
    op_create(
        "MPI_Op_create_c",
        user_fn.map(UserFunction::Large),
        commute,
        op,
    )
}
const _: fn_types::MPI_Op_create_c = PMPI_Op_create_c;

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
