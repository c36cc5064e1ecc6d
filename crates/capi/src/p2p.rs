//! Point-to-point entry points: sends in every mode, receives, probes,
//! matched probes, send-receive.

use resmpi_core::engine::BlockingReceive;
use resmpi_core::{ErrorClass, Mpi, MpiError, MpiResult, SendMode, Status};

use crate::abi::*;
use crate::datatype::{message_buffer, packed_copy};
use crate::global::{entry, with_mpi};
use crate::handles::{comm_index, message_handle, message_index, request_handle};
use crate::requests::{complete_and_release, write_status};

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

fn start_send(
    mpi: &mut Mpi,
    buf: *const c_void,
    count: c_int,
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

fn start_recv(
    mpi: &mut Mpi,
    buf: *mut c_void,
    count: c_int,
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

macro_rules! send_entry {
    ($name:ident, $isend:ident, $mode:expr, $label:literal, $ilabel:literal) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            buf: *const c_void,
            count: c_int,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
        ) -> c_int {
            if $mode == SendMode::Standard {
                return entry($label, comm, |mpi, _| {
                    let index = comm_of(mpi, comm)?;
                    let (bytes, length_bytes) =
                        message_buffer(buf, count, datatype)?.into_user_bytes();
                    mpi.send(index, bytes, length_bytes, dest, tag)
                });
            }
            blocking($label, comm, std::ptr::null_mut(), |mpi| {
                start_send(mpi, buf, count, datatype, dest, tag, comm, $mode)
            })
        }

        #[no_mangle]
        pub unsafe extern "C" fn $isend(
            buf: *const c_void,
            count: c_int,
            datatype: MPI_Datatype,
            dest: c_int,
            tag: c_int,
            comm: MPI_Comm,
            request: *mut MPI_Request,
        ) -> c_int {
            entry($ilabel, comm, |mpi, _| {
                if request.is_null() {
                    return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
                }
                let index = start_send(mpi, buf, count, datatype, dest, tag, comm, $mode)?;
                // SAFETY: checked non-null; the caller passes a valid MPI_Request pointer.
                unsafe { *request = request_handle(index) };
                Ok(())
            })
        }
    };
}

send_entry!(
    PMPI_Send,
    PMPI_Isend,
    SendMode::Standard,
    "MPI_Send",
    "MPI_Isend"
);
send_entry!(
    PMPI_Rsend,
    PMPI_Irsend,
    SendMode::Standard,
    "MPI_Rsend",
    "MPI_Irsend"
);
send_entry!(
    PMPI_Ssend,
    PMPI_Issend,
    SendMode::Synchronous,
    "MPI_Ssend",
    "MPI_Issend"
);
send_entry!(
    PMPI_Bsend,
    PMPI_Ibsend,
    SendMode::Buffered,
    "MPI_Bsend",
    "MPI_Ibsend"
);

const _: fn_types::MPI_Send = PMPI_Send;
const _: fn_types::MPI_Isend = PMPI_Isend;
const _: fn_types::MPI_Rsend = PMPI_Rsend;
const _: fn_types::MPI_Irsend = PMPI_Irsend;
const _: fn_types::MPI_Ssend = PMPI_Ssend;
const _: fn_types::MPI_Issend = PMPI_Issend;
const _: fn_types::MPI_Bsend = PMPI_Bsend;
const _: fn_types::MPI_Ibsend = PMPI_Ibsend;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    entry("MPI_Recv", comm, |mpi, _| {
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
const _: fn_types::MPI_Recv = PMPI_Recv;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Irecv", comm, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let index = start_recv(mpi, buf, count, datatype, source, tag, comm)?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}
const _: fn_types::MPI_Irecv = PMPI_Irecv;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    entry("MPI_Sendrecv", comm, |mpi, _| {
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
const _: fn_types::MPI_Sendrecv = PMPI_Sendrecv;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // Send from a private copy, receive into the buffer: the two may then
    // proceed in any order, exactly as MPI_Sendrecv.
    // The copy is the packed message, sent as bytes; the wire carries
    // packed data for every type, so the receiver sees the same message.
    let copy = match with_mpi("MPI_Sendrecv_replace", comm, |_, _| {
        packed_copy(buf, count, datatype)
    }) {
        Ok(copy) => copy,
        Err(code) => return code,
    };
    let Ok(copy_count) = c_int::try_from(copy.len()) else {
        return crate::global::raise_error(
            "MPI_Sendrecv_replace",
            comm,
            MpiError::new(
                ErrorClass::Count,
                "message larger than an int count of bytes",
            ),
        );
    };
    // SAFETY: `copy` outlives the call; the other pointers are the caller's.
    unsafe {
        PMPI_Sendrecv(
            copy.as_ptr().cast(),
            copy_count,
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
const _: fn_types::MPI_Sendrecv_replace = PMPI_Sendrecv_replace;

/// What MPI_Isendrecv sends: the caller's buffer, or (the replace
/// variant) a packed copy of it that the request keeps until it completes.
enum Outgoing {
    Buffer {
        buffer: *const c_void,
        count: c_int,
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
    recvcount: c_int,
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Isendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Isendrecv", comm, |mpi, _| {
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
const _: fn_types::MPI_Isendrecv = PMPI_Isendrecv;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Isendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Isendrecv_replace", comm, |mpi, _| {
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
const _: fn_types::MPI_Isendrecv_replace = PMPI_Isendrecv_replace;

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
    count: c_int,
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    blocking("MPI_Mrecv", MPI_COMM_WORLD, status, |mpi| {
        start_mrecv(mpi, buf, count, datatype, message)
    })
}
const _: fn_types::MPI_Mrecv = PMPI_Mrecv;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Imrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    entry("MPI_Imrecv", MPI_COMM_WORLD, |mpi, _| {
        if request.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "request pointer is NULL"));
        }
        let index = start_mrecv(mpi, buf, count, datatype, message)?;
        // SAFETY: checked non-null.
        unsafe { *request = request_handle(index) };
        Ok(())
    })
}
const _: fn_types::MPI_Imrecv = PMPI_Imrecv;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    entry("MPI_Buffer_attach", MPI_COMM_WORLD, |mpi, _| {
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
const _: fn_types::MPI_Buffer_attach = PMPI_Buffer_attach;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    entry("MPI_Buffer_detach", MPI_COMM_WORLD, |mpi, _| {
        mpi.wait_bsends()?;
        // SAFETY: MPI passes the address of a pointer variable as void*.
        unsafe {
            if !buffer_addr.is_null() {
                *(buffer_addr as *mut *mut c_void) = mpi.bsend.address as *mut c_void;
            }
            if !size.is_null() {
                *size = mpi.bsend.size_bytes as c_int;
            }
        }
        mpi.bsend.address = 0;
        mpi.bsend.size_bytes = 0;
        Ok(())
    })
}
const _: fn_types::MPI_Buffer_detach = PMPI_Buffer_detach;
