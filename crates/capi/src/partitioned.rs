//! MPI-4 partitioned point-to-point: MPI_Psend_init, MPI_Precv_init,
//! MPI_Pready (and its range and list forms), MPI_Parrived.
//!
//! A partitioned request is a persistent request
//! (`Persistent::Partitioned`). Each MPI_Start begins an activation: a
//! request group (the persistent request's inner request, what MPI_Wait
//! and MPI_Test look at) that completes with the transfer. The receive side
//! posts its whole buffer at once; the send side holds its group open with
//! a placeholder request until the last partition is marked ready, then
//! starts the message and adds it to the group. Partitions therefore
//! arrive together: MPI_Parrived says true for every partition once the
//! message is in (MPI allows that; resmpi sends one message per
//! activation, `resmpi_core::partitioned` says why and how it stays apart
//! from other traffic).

use resmpi_core::request::{Operation, Partitioned, Persistent, Request, Status};
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult};

use crate::abi::*;
use crate::datatype::message_buffer;
use crate::global::{entry, out_pointer};
use crate::handles::request_handle;
use crate::p2p::comm_of;

/// MPI_Psend_init and MPI_Precv_init.
#[allow(clippy::too_many_arguments)]
unsafe fn partitioned_init(
    name: &str,
    send: bool,
    buf: *mut c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    peer: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry(name, comm, |mpi, _| {
        out_pointer(request, "request")?;
        let comm_index = comm_of(mpi, comm)?;
        if partitions < 1 {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("partitions is {partitions}: a partitioned request has at least one"),
            ));
        }
        if count < 0 {
            return Err(MpiError::new(
                ErrorClass::Count,
                format!("count {count} is negative"),
            ));
        }
        let total = count.checked_mul(partitions as MPI_Count).ok_or_else(|| {
            MpiError::new(
                ErrorClass::Count,
                format!("{partitions} partitions of {count} elements overflow a count"),
            )
        })?;
        mpi.check_partitioned_envelope(comm_index, peer, tag)?;
        let (bytes, length) = message_buffer(buf, total, datatype)?.into_user_bytes();
        let template = Persistent::Partitioned(Box::new(Partitioned {
            send,
            peer,
            bytes,
            length,
            tag,
            partitions: partitions as u32,
            ready: Vec::new(),
            ready_count: 0,
            holder: None,
        }));
        let index = crate::requests::persistent_request(mpi, comm_index, template)?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Psend_init(
    buf: *const c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        partitioned_init(
            "MPI_Psend_init",
            true,
            buf.cast_mut(),
            partitions,
            count,
            datatype,
            dest,
            tag,
            comm,
            request,
        )
    }
}
const _: fn_types::MPI_Psend_init = PMPI_Psend_init;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Precv_init(
    buf: *mut c_void,
    partitions: c_int,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    _info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the caller's arguments.
    unsafe {
        partitioned_init(
            "MPI_Precv_init",
            false,
            buf,
            partitions,
            count,
            datatype,
            source,
            tag,
            comm,
            request,
        )
    }
}
const _: fn_types::MPI_Precv_init = PMPI_Precv_init;

/// MPI_Start of partitioned request `index` (`state` is its template):
/// returns the activation's group request.
pub(crate) fn start(mpi: &mut Mpi, index: u32, state: &Partitioned) -> MpiResult<u32> {
    let comm = mpi
        .engine
        .state
        .requests
        .get(index)
        .expect("live request")
        .comm;
    let mut group = mpi.engine.new_request_group(comm)?;
    if !state.send {
        let receive = mpi.partitioned_receive(
            comm,
            state.bytes.clone(),
            state.length,
            state.peer,
            state.tag,
        )?;
        group.adopt(receive);
        group.report_status_of(receive);
        return mpi.engine.start_schedule(group);
    }
    // Holds the group open until the last partition is ready.
    let holder = mpi.engine.insert_request(Request {
        operation: Operation::Nothing,
        comm,
        complete: false,
        status: Status::proc_null(),
        generation: 0,
        persistent: None,
        free_when_complete: false,
        inner: None,
    })?;
    group.adopt(holder);
    let inner = mpi.engine.start_schedule(group)?;
    if let Some(Persistent::Partitioned(active)) = mpi
        .engine
        .state
        .requests
        .get_mut(index)
        .and_then(|request| request.persistent.as_mut())
    {
        active.ready = vec![false; state.partitions as usize];
        active.ready_count = 0;
        active.holder = Some(holder);
    }
    Ok(inner)
}

/// The partitioned request behind `handle`, active, of the kind asked
/// for (`send`): its index and activation.
fn active_partitioned(mpi: &Mpi, handle: MPI_Request, send: bool) -> MpiResult<(u32, u32)> {
    let index = crate::requests::live_request(mpi, handle)?;
    let request = mpi.engine.state.requests.get(index).expect("live request");
    let kind = if send { "send" } else { "receive" };
    match &request.persistent {
        Some(Persistent::Partitioned(state)) if state.send == send => {}
        _ => {
            return Err(MpiError::new(
                ErrorClass::Request,
                format!("the request is not a partitioned {kind} (MPI_P{kind}_init)"),
            ))
        }
    }
    match request.inner {
        Some(inner) => Ok((index, inner)),
        None => Err(MpiError::new(
            ErrorClass::Request,
            format!("the partitioned {kind} is not active: MPI_Start it first"),
        )),
    }
}

/// Mark `partitions` of send request `handle` ready; the last one starts
/// the transfer.
fn mark_ready(mpi: &mut Mpi, handle: MPI_Request, partitions: &[c_int]) -> MpiResult<()> {
    let (index, group) = active_partitioned(mpi, handle, true)?;
    let request = mpi
        .engine
        .state
        .requests
        .get_mut(index)
        .expect("live request");
    let comm = request.comm;
    let Some(Persistent::Partitioned(state)) = request.persistent.as_mut() else {
        unreachable!("checked by active_partitioned");
    };
    for &partition in partitions {
        let Some(ready) = usize::try_from(partition)
            .ok()
            .and_then(|partition| state.ready.get_mut(partition))
        else {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!(
                    "partition {partition} does not exist (0..{})",
                    state.partitions
                ),
            ));
        };
        if *ready {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("partition {partition} is already marked ready in this activation"),
            ));
        }
        *ready = true;
        state.ready_count += 1;
    }
    if state.ready_count < state.partitions {
        return Ok(());
    }
    let Some(holder) = state.holder.take() else {
        return Ok(());
    };
    let (bytes, length, peer, tag) = (state.bytes.clone(), state.length, state.peer, state.tag);
    let transfer = mpi.partitioned_send(comm, bytes, length, peer, tag)?;
    mpi.engine.adopt_into(group, transfer)?;
    if let Some(holder) = mpi.engine.state.requests.get_mut(holder) {
        holder.complete = true;
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pready(partition: c_int, request: MPI_Request) -> c_int {
    entry("MPI_Pready", MPI_COMM_WORLD, |mpi, _| {
        mark_ready(mpi, request, &[partition])
    })
}
const _: fn_types::MPI_Pready = PMPI_Pready;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pready_range(
    partition_low: c_int,
    partition_high: c_int,
    request: MPI_Request,
) -> c_int {
    entry("MPI_Pready_range", MPI_COMM_WORLD, |mpi, _| {
        if partition_low > partition_high {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("partition range {partition_low}..={partition_high} is empty"),
            ));
        }
        let partitions: Vec<c_int> = (partition_low..=partition_high).collect();
        mark_ready(mpi, request, &partitions)
    })
}
const _: fn_types::MPI_Pready_range = PMPI_Pready_range;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pready_list(
    length: c_int,
    array_of_partitions: *mut c_int,
    request: MPI_Request,
) -> c_int {
    entry("MPI_Pready_list", MPI_COMM_WORLD, |mpi, _| {
        if length < 0 || (length > 0 && array_of_partitions.is_null()) {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("length {length} or a NULL array_of_partitions"),
            ));
        }
        let partitions: &[c_int] = if length == 0 {
            &[]
        } else {
            // SAFETY: the caller's array of `length` ints.
            unsafe { std::slice::from_raw_parts(array_of_partitions, length as usize) }
        };
        mark_ready(mpi, request, partitions)
    })
}
const _: fn_types::MPI_Pready_list = PMPI_Pready_list;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Parrived(
    request: MPI_Request,
    partition: c_int,
    flag: *mut c_int,
) -> c_int {
    entry("MPI_Parrived", MPI_COMM_WORLD, |mpi, _| {
        out_pointer(flag, "flag")?;
        let index = crate::requests::live_request(mpi, request)?;
        let slot = mpi.engine.state.requests.get(index).expect("live request");
        let partitions = match &slot.persistent {
            Some(Persistent::Partitioned(state)) if !state.send => state.partitions,
            _ => {
                return Err(MpiError::new(
                    ErrorClass::Request,
                    "the request is not a partitioned receive (MPI_Precv_init)",
                ))
            }
        };
        if !(0..partitions as c_int).contains(&partition) {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("partition {partition} does not exist (0..{partitions})"),
            ));
        }
        let Some(group) = slot.inner else {
            // MPI-4: an inactive request has every partition arrived.
            // SAFETY: checked non-null.
            unsafe { *flag = 1 };
            return Ok(());
        };
        let done = |mpi: &Mpi| {
            mpi.engine
                .state
                .requests
                .get(group)
                .is_none_or(|request| request.complete)
        };
        if !done(mpi) {
            mpi.engine.progress()?;
        }
        // SAFETY: checked non-null.
        unsafe { *flag = c_int::from(done(mpi)) };
        Ok(())
    })
}
const _: fn_types::MPI_Parrived = PMPI_Parrived;
