//! Point-to-point entry points: sends in every mode, receives, probes,
//! matched probes, send-receive.

use resmpi_core::engine::BlockingReceive;
use resmpi_core::request::Persistent;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult, SendMode, Status};

use crate::abi::*;
use crate::datatype::{message_buffer, packed_copy};
use crate::global::{entry, with_mpi};
use crate::handles::{comm_index, message_handle, message_index, request_handle};
use crate::large_count::{int_and_large_count, narrow, Count};
use crate::requests::{complete_and_release, persistent_request, write_count, write_status};

/// Communicator index of `comm`, or MPI_ERR_COMM.
#[inline]
pub fn comm_of(mpi: &Mpi, comm: MPI_Comm) -> MpiResult<usize> {
    let index = comm_index(comm).ok_or_else(|| invalid_comm(comm))?;
    mpi.comm(index)?;
    Ok(index)
}

/// MPI_ERR_COMM for a handle that names no communicator.
#[cold]
fn invalid_comm(comm: MPI_Comm) -> MpiError {
    let what = if comm == MPI_COMM_NULL {
        "MPI_COMM_NULL".to_string()
    } else {
        format!("{comm:#x}")
    };
    MpiError::new(
        ErrorClass::Comm,
        format!("communicator {what} is not valid"),
    )
}

pub(crate) fn start_send(
    mpi: &mut Mpi,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mode: SendMode,
) -> MpiResult<u32> {
    let index = comm_of(mpi, comm)?;
    let (bytes, length_bytes) = message_buffer(buf, count, datatype)?.into_user_bytes();
    mpi.isend(index, bytes, length_bytes, dest, tag, mode)
}

pub(crate) fn start_recv(
    mpi: &mut Mpi,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> MpiResult<u32> {
    let index = comm_of(mpi, comm)?;
    let (bytes, capacity_bytes) = message_buffer(buf, count, datatype)?.into_user_bytes();
    mpi.irecv(index, bytes, capacity_bytes, source, tag)
}

fn blocking(
    name: &str,
    comm: MPI_Comm,
    status: *mut MPI_Status,
    start: impl FnOnce(&mut Mpi) -> MpiResult<u32>,
) -> c_int {
    entry(name, comm, |mpi, _| {
        let request = start(mpi)?;
        mpi.wait_blocking(request)?;
        complete_and_release(mpi, request, status)
    })
}

/// A blocking send in `mode` (MPI_Send and its modes, int or `_c`).
unsafe fn blocking_send<C: Count>(
    name: &str,
    mode: SendMode,
    buf: *const c_void,
    count: C,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    let count: MPI_Count = count.into();
    if mode == SendMode::Standard {
        return entry(name, comm, |mpi, _| {
            let index = comm_of(mpi, comm)?;
            let (bytes, length_bytes) = message_buffer(buf, count, datatype)?.into_user_bytes();
            mpi.send(index, bytes, length_bytes, dest, tag)
        });
    }
    blocking(name, comm, std::ptr::null_mut(), |mpi| {
        start_send(mpi, buf, count, datatype, dest, tag, comm, mode)
    })
}

/// A nonblocking send in `mode` (MPI_Isend and its modes, int or `_c`).
unsafe fn nonblocking_send<C: Count>(
    name: &str,
    mode: SendMode,
    buf: *const c_void,
    count: C,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry(name, comm, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let index = start_send(mpi, buf, count.into(), datatype, dest, tag, comm, mode)?;
        // SAFETY: checked non-null; the caller passes a valid MPI_Request pointer.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}

macro_rules! send_entries {
    ($mode:expr, $blocking:ident, $nonblocking:ident,
     $send:ident = $send_name:ident, $send_c:ident = $send_c_name:ident,
     $isend:ident = $isend_name:ident, $isend_c:ident = $isend_c_name:ident) => {
        unsafe fn $blocking<C: Count>(
            name: &str,
            buf: *const c_void,
            count: C,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            // SAFETY: the caller's arguments.
            unsafe { blocking_send(name, $mode, buf, count, datatype, dest, tag, comm) }
        }
        unsafe fn $nonblocking<C: Count>(
            name: &str,
            buf: *const c_void,
            count: C,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
            request: *mut MPI_Request,
        ) -> c_int {
            // SAFETY: the caller's arguments.
            unsafe { nonblocking_send(name, $mode, buf, count, datatype, dest, tag, comm, request) }
        }
        int_and_large_count!($send = $send_name, $send_c = $send_c_name, $blocking, (
            buf: *const c_void, count: Count, datatype: MPI_Datatype, dest: c_int, tag: c_int,
            comm: MPI_Comm));
        int_and_large_count!($isend = $isend_name, $isend_c = $isend_c_name, $nonblocking, (
            buf: *const c_void, count: Count, datatype: MPI_Datatype, dest: c_int, tag: c_int,
            comm: MPI_Comm, request: *mut MPI_Request));
    };
}

send_entries!(
    SendMode::Standard,
    standard_send,
    standard_isend,
    PMPI_Send = MPI_Send,
    PMPI_Send_c = MPI_Send_c,
    PMPI_Isend = MPI_Isend,
    PMPI_Isend_c = MPI_Isend_c
);
send_entries!(
    SendMode::Standard,
    ready_send,
    ready_isend,
    PMPI_Rsend = MPI_Rsend,
    PMPI_Rsend_c = MPI_Rsend_c,
    PMPI_Irsend = MPI_Irsend,
    PMPI_Irsend_c = MPI_Irsend_c
);
send_entries!(
    SendMode::Synchronous,
    synchronous_send,
    synchronous_isend,
    PMPI_Ssend = MPI_Ssend,
    PMPI_Ssend_c = MPI_Ssend_c,
    PMPI_Issend = MPI_Issend,
    PMPI_Issend_c = MPI_Issend_c
);
send_entries!(
    SendMode::Buffered,
    buffered_send,
    buffered_isend,
    PMPI_Bsend = MPI_Bsend,
    PMPI_Bsend_c = MPI_Bsend_c,
    PMPI_Ibsend = MPI_Ibsend,
    PMPI_Ibsend_c = MPI_Ibsend_c
);

unsafe fn recv<C: Count>(
    name: &str,
    buf: *mut c_void,
    count: C,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let count: MPI_Count = count.into();
    entry(name, comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        if source == MPI_ANY_SOURCE {
            // ULFM: a blocking wildcard receive cannot wait for an
            // unacknowledged failure to be acknowledged.
            mpi.check_wildcard_allowed(index).map_err(|mut pending| {
                pending.class = ErrorClass::ProcFailed;
                pending
            })?;
        }
        let (bytes, capacity_bytes) = message_buffer(buf, count, datatype)?.into_user_bytes();
        match mpi.recv(index, bytes, capacity_bytes, source, tag)? {
            BlockingReceive::Done(core_status) => {
                // SAFETY: the caller's status pointer.
                unsafe { write_status(status, &core_status) };
                Ok(())
            }
            BlockingReceive::Request(request) => {
                mpi.wait_blocking(request)?;
                complete_and_release(mpi, request, status)
            }
            BlockingReceive::Waiting => Err(MpiError::new(
                ErrorClass::Intern,
                "MPI_Recv returned while its receive still waits",
            )),
        }
    })
}
int_and_large_count!(PMPI_Recv = MPI_Recv, PMPI_Recv_c = MPI_Recv_c, recv, (
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
));

unsafe fn irecv<C: Count>(
    name: &str,
    buf: *mut c_void,
    count: C,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let count: MPI_Count = count.into();
    entry(name, comm, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let index = start_recv(mpi, buf, count, datatype, source, tag, comm)?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}
int_and_large_count!(PMPI_Irecv = MPI_Irecv, PMPI_Irecv_c = MPI_Irecv_c, irecv, (
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
));

unsafe fn sendrecv<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let sendcount: MPI_Count = sendcount.into();
    let recvcount: MPI_Count = recvcount.into();
    entry(name, comm, |mpi, _| {
        let receive = start_recv(mpi, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        let send = start_send(
            mpi,
            sendbuf,
            sendcount,
            sendtype,
            dest,
            sendtag,
            comm,
            SendMode::Standard,
        )?;
        mpi.engine.wait_request(send)?;
        mpi.wait_blocking(receive)?;
        complete_and_release(mpi, send, std::ptr::null_mut())?;
        complete_and_release(mpi, receive, status)
    })
}
int_and_large_count!(PMPI_Sendrecv = MPI_Sendrecv, PMPI_Sendrecv_c = MPI_Sendrecv_c, sendrecv, (
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
));

unsafe fn sendrecv_replace<C: Count>(
    name: &str,
    buf: *mut c_void,
    count: C,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let count: MPI_Count = count.into();
    // Send from a private copy, receive into the buffer: the two may then
    // proceed in any order, exactly as MPI_Sendrecv.
    // The copy is the packed message, sent as bytes; the wire carries
    // packed data for every type, so the receiver sees the same message.
    let copy = match with_mpi(name, comm, |_, _| packed_copy(buf, count, datatype)) {
        Ok(copy) => copy,
        Err(code) => return code,
    };
    // SAFETY: `copy` outlives the call; the other pointers are the caller's.
    unsafe {
        sendrecv::<MPI_Count>(
            name,
            copy.as_ptr().cast(),
            copy.len() as MPI_Count,
            MPI_BYTE,
            dest,
            sendtag,
            buf,
            count,
            datatype,
            source,
            recvtag,
            comm,
            status,
        )
    }
}
int_and_large_count!(PMPI_Sendrecv_replace = MPI_Sendrecv_replace, PMPI_Sendrecv_replace_c = MPI_Sendrecv_replace_c, sendrecv_replace, (
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
));

/// What MPI_Isendrecv sends: the caller's buffer, or (the replace
/// variant) a packed copy of it that the request keeps until it completes.
enum Outgoing {
    Buffer {
        buffer: *const c_void,
        count: MPI_Count,
        datatype: MPI_Datatype,
    },
    Copy(Box<[u8]>),
}

/// Start MPI_Isendrecv(_replace): the receive and the send are ordinary
/// point-to-point requests, adopted by one request group that completes
/// when both have and reports the receive's status. Everything is checked
/// before anything starts, so an error leaves nothing behind.
fn start_sendrecv(
    mpi: &mut Mpi,
    comm: MPI_Comm,
    outgoing: Outgoing,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
) -> MpiResult<u32> {
    let index = comm_of(mpi, comm)?;
    if let Outgoing::Buffer {
        buffer,
        count,
        datatype,
    } = outgoing
    {
        message_buffer(buffer, count, datatype)?;
    }
    let incoming = message_buffer(recvbuf, recvcount, recvtype)?;
    mpi.check_envelope(index, dest, sendtag, false)?;
    mpi.check_envelope(index, source, recvtag, true)?;
    let mut group = mpi.engine.new_request_group(index)?;
    let (bytes, capacity_bytes) = incoming.into_user_bytes();
    let receive = mpi.irecv(index, bytes, capacity_bytes, source, recvtag)?;
    let send = match outgoing {
        Outgoing::Buffer {
            buffer,
            count,
            datatype,
        } => start_send(
            mpi,
            buffer,
            count,
            datatype,
            dest,
            sendtag,
            comm,
            SendMode::Standard,
        )?,
        Outgoing::Copy(copy) => {
            let send = mpi.isend(
                index,
                copy.as_ptr(),
                copy.len(),
                dest,
                sendtag,
                SendMode::Standard,
            )?;
            // A boxed slice never moves: the send may point into it.
            group.keep(copy);
            send
        }
    };
    group.adopt(receive);
    group.adopt(send);
    group.report_status_of(receive);
    mpi.engine.start_schedule(group)
}

unsafe fn isendrecv<C: Count>(
    name: &str,
    sendbuf: *const c_void,
    sendcount: C,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: C,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let sendcount: MPI_Count = sendcount.into();
    let recvcount: MPI_Count = recvcount.into();
    entry(name, comm, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let outgoing = Outgoing::Buffer {
            buffer: sendbuf,
            count: sendcount,
            datatype: sendtype,
        };
        let index = start_sendrecv(
            mpi, comm, outgoing, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
        )?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}
int_and_large_count!(PMPI_Isendrecv = MPI_Isendrecv, PMPI_Isendrecv_c = MPI_Isendrecv_c, isendrecv, (
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
));

unsafe fn isendrecv_replace<C: Count>(
    name: &str,
    buf: *mut c_void,
    count: C,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let count: MPI_Count = count.into();
    entry(name, comm, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        // Send a packed copy, receive into the buffer, as MPI_Sendrecv_replace.
        let copy = packed_copy(buf, count, datatype)?;
        let outgoing = Outgoing::Copy(copy.into_boxed_slice());
        let index = start_sendrecv(
            mpi, comm, outgoing, dest, sendtag, buf, count, datatype, source, recvtag,
        )?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}
int_and_large_count!(PMPI_Isendrecv_replace = MPI_Isendrecv_replace, PMPI_Isendrecv_replace_c = MPI_Isendrecv_replace_c, isendrecv_replace, (
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
));

fn probe_entry(
    name: &str,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    blocking: bool,
    remove: bool,
) -> Result<Option<(Status, Option<usize>)>, c_int> {
    with_mpi(name, comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        if blocking {
            mpi.probe(index, source, tag, remove).map(Some)
        } else {
            mpi.iprobe(index, source, tag, remove)
        }
    })
}

unsafe fn set_flag(flag: *mut c_int, value: bool) {
    if !flag.is_null() {
        // SAFETY: non-null flag pointer from the caller.
        unsafe { *flag = value as c_int };
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Probe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    match probe_entry("MPI_Probe", source, tag, comm, true, false) {
        Ok(found) => {
            // SAFETY: status is the caller's status pointer (or IGNORE).
            unsafe { write_status(status, &found.expect("blocking probe found").0) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Probe = PMPI_Probe;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    match probe_entry("MPI_Iprobe", source, tag, comm, false, false) {
        Ok(found) => {
            // SAFETY: caller's pointers.
            unsafe {
                set_flag(flag, found.is_some());
                if let Some((found_status, _)) = found {
                    write_status(status, &found_status);
                }
            }
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Iprobe = PMPI_Iprobe;

unsafe fn write_message(message: *mut MPI_Message, index: Option<usize>) {
    if !message.is_null() {
        // SAFETY: caller's pointer. PROC_NULL probes give MPI_MESSAGE_NO_PROC.
        unsafe { *message = index.map_or(MPI_MESSAGE_NO_PROC, message_handle) };
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    match probe_entry("MPI_Mprobe", source, tag, comm, true, true) {
        Ok(found) => {
            let (found_status, index) = found.expect("blocking probe found");
            // SAFETY: caller's pointers.
            unsafe {
                write_message(message, index);
                write_status(status, &found_status);
            }
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Mprobe = PMPI_Mprobe;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Improbe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    match probe_entry("MPI_Improbe", source, tag, comm, false, true) {
        Ok(found) => {
            // SAFETY: caller's pointers.
            unsafe {
                set_flag(flag, found.is_some());
                if let Some((found_status, index)) = found {
                    write_message(message, index);
                    write_status(status, &found_status);
                }
            }
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Improbe = PMPI_Improbe;

fn start_mrecv(
    mpi: &mut Mpi,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
) -> MpiResult<u32> {
    if message.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "message pointer is NULL"));
    }
    // SAFETY: checked non-null.
    let handle = unsafe { *message };
    let message_target = message_buffer(buf, count, datatype)?;
    let request = if handle == MPI_MESSAGE_NO_PROC {
        mpi.engine
            .start_nothing(resmpi_core::WORLD, Status::proc_null())?
    } else {
        let index = message_index(handle)
            .ok_or_else(|| MpiError::new(ErrorClass::Request, "invalid MPI_Message handle"))?;
        let (bytes, capacity_bytes) = message_target.into_user_bytes();
        mpi.imrecv(index, bytes, capacity_bytes)?
    };
    // SAFETY: checked non-null.
    unsafe { *message = MPI_MESSAGE_NULL };
    Ok(request)
}

unsafe fn mrecv<C: Count>(
    name: &str,
    buf: *mut c_void,
    count: C,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let count: MPI_Count = count.into();
    blocking(name, MPI_COMM_WORLD, status, |mpi| {
        start_mrecv(mpi, buf, count, datatype, message)
    })
}
int_and_large_count!(PMPI_Mrecv = MPI_Mrecv, PMPI_Mrecv_c = MPI_Mrecv_c, mrecv, (
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
));

unsafe fn imrecv<C: Count>(
    name: &str,
    buf: *mut c_void,
    count: C,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    let count: MPI_Count = count.into();
    entry(name, MPI_COMM_WORLD, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let index = start_mrecv(mpi, buf, count, datatype, message)?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}
int_and_large_count!(PMPI_Imrecv = MPI_Imrecv, PMPI_Imrecv_c = MPI_Imrecv_c, imrecv, (
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
));

unsafe fn buffer_attach<C: Count>(name: &str, buffer: *mut c_void, size: C) -> c_int {
    let size: MPI_Count = size.into();
    entry(name, MPI_COMM_WORLD, |mpi, _| {
        if size < 0 {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("buffer size {size} is negative"),
            ));
        }
        if mpi.bsend.size_bytes > 0 {
            return Err(MpiError::new(
                ErrorClass::Buffer,
                "a buffer is already attached; detach it first",
            ));
        }
        mpi.bsend.address = buffer as usize;
        mpi.bsend.size_bytes = size as usize;
        Ok(())
    })
}
int_and_large_count!(PMPI_Buffer_attach = MPI_Buffer_attach, PMPI_Buffer_attach_c = MPI_Buffer_attach_c, buffer_attach, (
    buffer: *mut c_void,
    size: Count,
));

unsafe fn buffer_detach<C: Count>(name: &str, buffer_addr: *mut c_void, size: *mut C) -> c_int {
    entry(name, MPI_COMM_WORLD, |mpi, _| {
        mpi.wait_bsends()?;
        let size_bytes: C = narrow(name, "buffer size", mpi.bsend.size_bytes as MPI_Count)?;
        // SAFETY: MPI passes the address of a pointer variable as void*.
        unsafe {
            if !buffer_addr.is_null() {
                *(buffer_addr as *mut *mut c_void) = mpi.bsend.address as *mut c_void;
            }
            if !size.is_null() {
                *size = size_bytes;
            }
        }
        mpi.bsend.address = 0;
        mpi.bsend.size_bytes = 0;
        Ok(())
    })
}
int_and_large_count!(PMPI_Buffer_detach = MPI_Buffer_detach, PMPI_Buffer_detach_c = MPI_Buffer_detach_c, buffer_detach, (
    buffer_addr: *mut c_void,
    size: *mut Count,
));

// ----- persistent point-to-point ---------------------------------------------

/// MPI_Send_init and its modes (int or `_c`): a persistent send request.
unsafe fn send_init<C: Count>(
    name: &str,
    mode: SendMode,
    buf: *const c_void,
    count: C,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry(name, comm, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let comm_index = comm_of(mpi, comm)?;
        let (bytes, length) = message_buffer(buf, count, datatype)?.into_user_bytes();
        mpi.check_envelope(comm_index, dest, tag, false)?;
        let template = Persistent::Send {
            destination: dest,
            bytes,
            length,
            tag,
            mode,
        };
        let index = persistent_request(mpi, comm_index, template)?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}

macro_rules! send_init_entries {
    ($mode:expr, $inner:ident, $int:ident = $int_name:ident, $large:ident = $large_name:ident) => {
        unsafe fn $inner<C: Count>(
            name: &str,
            buf: *const c_void,
            count: C,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
            request: *mut MPI_Request,
        ) -> c_int {
            // SAFETY: the caller's arguments.
            unsafe { send_init(name, $mode, buf, count, datatype, dest, tag, comm, request) }
        }
        int_and_large_count!($int = $int_name, $large = $large_name, $inner, (
            buf: *const c_void, count: Count, datatype: MPI_Datatype, dest: c_int, tag: c_int,
            comm: MPI_Comm, request: *mut MPI_Request));
    };
}

send_init_entries!(
    SendMode::Standard,
    standard_send_init,
    PMPI_Send_init = MPI_Send_init,
    PMPI_Send_init_c = MPI_Send_init_c
);
send_init_entries!(
    SendMode::Standard,
    ready_send_init,
    PMPI_Rsend_init = MPI_Rsend_init,
    PMPI_Rsend_init_c = MPI_Rsend_init_c
);
send_init_entries!(
    SendMode::Synchronous,
    synchronous_send_init,
    PMPI_Ssend_init = MPI_Ssend_init,
    PMPI_Ssend_init_c = MPI_Ssend_init_c
);
send_init_entries!(
    SendMode::Buffered,
    buffered_send_init,
    PMPI_Bsend_init = MPI_Bsend_init,
    PMPI_Bsend_init_c = MPI_Bsend_init_c
);

unsafe fn recv_init<C: Count>(
    name: &str,
    buf: *mut c_void,
    count: C,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry(name, comm, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let comm_index = comm_of(mpi, comm)?;
        let (bytes, capacity) = message_buffer(buf, count, datatype)?.into_user_bytes();
        mpi.check_envelope(comm_index, source, tag, true)?;
        let template = Persistent::Receive {
            source,
            bytes,
            capacity,
            tag,
        };
        let index = persistent_request(mpi, comm_index, template)?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}
int_and_large_count!(PMPI_Recv_init = MPI_Recv_init, PMPI_Recv_init_c = MPI_Recv_init_c, recv_init, (
    buf: *mut c_void, count: Count, datatype: MPI_Datatype, source: c_int, tag: c_int,
    comm: MPI_Comm, request: *mut MPI_Request));

// ----- counts of a received message ------------------------------------------

/// MPI_Get_count (int or `_c`): the int form answers MPI_UNDEFINED for a
/// message whose count does not fit an int, as the standard says.
unsafe fn get_count<C: Count>(
    name: &str,
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut C,
) -> c_int {
    let undefined = C::try_from(MPI_UNDEFINED as MPI_Count).unwrap_or_else(|_| unreachable!());
    // SAFETY: forwarded caller pointers.
    unsafe { write_count(name, status, datatype, false, count, undefined) }
}
int_and_large_count!(PMPI_Get_count = MPI_Get_count, PMPI_Get_count_c = MPI_Get_count_c, get_count, (
    status: *const MPI_Status, datatype: MPI_Datatype, count: *mut Count));

/// MPI_Get_elements (int or `_c`; MPI_Get_elements_x is the `_c` one under
/// MPI-3's name).
unsafe fn get_elements<C: Count>(
    name: &str,
    status: *const MPI_Status,
    datatype: MPI_Datatype,
    count: *mut C,
) -> c_int {
    let undefined = C::try_from(MPI_UNDEFINED as MPI_Count).unwrap_or_else(|_| unreachable!());
    // SAFETY: forwarded caller pointers.
    unsafe { write_count(name, status, datatype, true, count, undefined) }
}
int_and_large_count!(PMPI_Get_elements = MPI_Get_elements, PMPI_Get_elements_c = MPI_Get_elements_c, get_elements, (
    status: *const MPI_Status, datatype: MPI_Datatype, count: *mut Count));
