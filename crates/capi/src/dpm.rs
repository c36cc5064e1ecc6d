//! Dynamic process entry points: ports, accept/connect, the name service,
//! MPI_Comm_join, MPI_Comm_disconnect, and MPI_Comm_spawn(_multiple),
//! which fail cleanly (MPI_ERR_SPAWN, every error code filled) because
//! resmpi does not start new processes yet.
//!
//! Why spawn fails rather than hangs: the call is collective, and each
//! member learns the outcome from the root through one broadcast over the
//! parent communicator, so every member returns the same error at once.
//! The logic lives in `resmpi_core::dpm`; this file only decodes C
//! arguments and does the socket I/O of MPI_Comm_join (the one place a
//! user file descriptor is touched).

use std::os::raw::{c_char, c_int};

use resmpi_core::dpm::{JoinCard, PORT_NAME_MAX_BYTES};
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::global::{entry, raise_error, with_mpi};
use crate::handles::comm_handle;
use crate::init::{c_text, write_string};
use crate::p2p::comm_of;

/// A required C string argument.
unsafe fn text_argument(text: *const c_char, what: &str) -> MpiResult<String> {
    if text.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, format!("{what} is NULL")));
    }
    // SAFETY: checked non-null; the caller's NUL-terminated string.
    Ok(unsafe { c_text(text) })
}

fn check_newcomm(newcomm: *mut MPI_Comm) -> MpiResult<()> {
    if newcomm.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "newcomm pointer is NULL"));
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Open_port(_info: MPI_Info, port_name: *mut c_char) -> c_int {
    match with_mpi("MPI_Open_port", MPI_COMM_WORLD, |mpi, _| {
        if port_name.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "port_name is NULL"));
        }
        mpi.open_port()
    }) {
        Ok(name) => {
            // SAFETY: the caller's buffer holds MPI_MAX_PORT_NAME bytes.
            unsafe { write_string(&name, port_name, PORT_NAME_MAX_BYTES, std::ptr::null_mut()) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Open_port = PMPI_Open_port;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Close_port(port_name: *const c_char) -> c_int {
    entry("MPI_Close_port", MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: the caller's string.
        let name = unsafe { text_argument(port_name, "port_name") }?;
        mpi.close_port(&name)
    })
}
const _: fn_types::MPI_Close_port = PMPI_Close_port;

/// The port name at `root` (where it is significant); empty elsewhere.
unsafe fn port_at_root(
    mpi: &resmpi_core::Mpi,
    index: usize,
    root: c_int,
    port_name: *const c_char,
) -> MpiResult<String> {
    let is_root = mpi.comm(index)?.rank as c_int == root;
    if !is_root {
        return Ok(String::new());
    }
    // SAFETY: the caller's string.
    unsafe { text_argument(port_name, "port_name") }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_accept(
    port_name: *const c_char,
    _info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Comm_accept", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(newcomm)?;
        // SAFETY: the caller's string.
        let name = unsafe { port_at_root(mpi, index, root, port_name) }?;
        let new_index = mpi.comm_accept(&name, root, index)?;
        // SAFETY: checked non-null.
        unsafe { *newcomm = comm_handle(new_index) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_accept = PMPI_Comm_accept;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_connect(
    port_name: *const c_char,
    _info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Comm_connect", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(newcomm)?;
        // SAFETY: the caller's string.
        let name = unsafe { port_at_root(mpi, index, root, port_name) }?;
        let new_index = mpi.comm_connect(&name, root, index)?;
        // SAFETY: checked non-null.
        unsafe { *newcomm = comm_handle(new_index) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_connect = PMPI_Comm_connect;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Publish_name(
    service_name: *const c_char,
    _info: MPI_Info,
    port_name: *const c_char,
) -> c_int {
    entry("MPI_Publish_name", MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: the caller's strings.
        let service = unsafe { text_argument(service_name, "service_name") }?;
        // SAFETY: as above.
        let port = unsafe { text_argument(port_name, "port_name") }?;
        mpi.publish_name(&service, &port)
    })
}
const _: fn_types::MPI_Publish_name = PMPI_Publish_name;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Lookup_name(
    service_name: *const c_char,
    _info: MPI_Info,
    port_name: *mut c_char,
) -> c_int {
    match with_mpi("MPI_Lookup_name", MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: the caller's string.
        let service = unsafe { text_argument(service_name, "service_name") }?;
        if port_name.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "port_name is NULL"));
        }
        mpi.lookup_name(&service)
    }) {
        Ok(port) => {
            // SAFETY: the caller's buffer holds MPI_MAX_PORT_NAME bytes.
            unsafe { write_string(&port, port_name, PORT_NAME_MAX_BYTES, std::ptr::null_mut()) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Lookup_name = PMPI_Lookup_name;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpublish_name(
    service_name: *const c_char,
    _info: MPI_Info,
    _port_name: *const c_char,
) -> c_int {
    entry("MPI_Unpublish_name", MPI_COMM_WORLD, |mpi, _| {
        // SAFETY: the caller's string.
        let service = unsafe { text_argument(service_name, "service_name") }?;
        mpi.unpublish_name(&service)
    })
}
const _: fn_types::MPI_Unpublish_name = PMPI_Unpublish_name;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_disconnect(comm: *mut MPI_Comm) -> c_int {
    if comm.is_null() {
        return raise_error(
            "MPI_Comm_disconnect",
            MPI_COMM_WORLD,
            MpiError::new(ErrorClass::Comm, "comm pointer is NULL"),
        );
    }
    // SAFETY: checked non-null; the caller's handle.
    let handle = unsafe { *comm };
    let index = match with_mpi("MPI_Comm_disconnect", handle, |mpi, _| {
        let index = comm_of(mpi, handle)?;
        if index == resmpi_core::WORLD || index == resmpi_core::SELF {
            return Err(MpiError::new(
                ErrorClass::Comm,
                "cannot disconnect a predefined communicator",
            ));
        }
        Ok(index)
    }) {
        Ok(index) => index,
        Err(code) => return code,
    };
    // Delete callbacks run first, while the communicator still exists.
    if let Err(error) = crate::attr::delete_all_attributes(index) {
        return raise_error("MPI_Comm_disconnect", handle, error);
    }
    entry("MPI_Comm_disconnect", handle, |mpi, registry| {
        mpi.comm_disconnect(index)?;
        registry.objects.forget_comm(index);
        // SAFETY: checked non-null above.
        unsafe { *comm = MPI_COMM_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_disconnect = PMPI_Comm_disconnect;

/// Write all of `bytes` to `fd`, then read the other side's card.
fn swap_cards(fd: c_int, mine: &JoinCard) -> MpiResult<JoinCard> {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    let io_error = |error: std::io::Error| {
        MpiError::new(
            ErrorClass::Other,
            format!("MPI_Comm_join: the socket failed: {error}"),
        )
    };
    // SAFETY: the application hands MPI_Comm_join a connected socket it
    // owns; ManuallyDrop keeps this File from closing it.
    let mut socket = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    socket.write_all(&mine.encode()).map_err(io_error)?;
    let mut length = [0u8; 4];
    socket.read_exact(&mut length).map_err(io_error)?;
    let length = u32::from_le_bytes(length) as usize;
    if length + 4 > JoinCard::MAX_BYTES {
        return Err(MpiError::new(
            ErrorClass::Other,
            "MPI_Comm_join: the other side did not speak resmpi's join protocol",
        ));
    }
    let mut body = vec![0u8; length];
    socket.read_exact(&mut body).map_err(io_error)?;
    JoinCard::decode(&body).ok_or_else(|| {
        MpiError::new(
            ErrorClass::Other,
            "MPI_Comm_join: the other side did not speak resmpi's join protocol",
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_join(fd: c_int, intercomm: *mut MPI_Comm) -> c_int {
    let mine = match with_mpi("MPI_Comm_join", MPI_COMM_WORLD, |mpi, _| {
        check_newcomm(intercomm)?;
        if fd < 0 {
            return Err(MpiError::new(
                ErrorClass::Arg,
                format!("fd {fd} is not a socket"),
            ));
        }
        Ok(mpi.join_card())
    }) {
        Ok(card) => card,
        Err(code) => return code,
    };
    // The socket is read outside the library lock: the other process may
    // be slow to call MPI_Comm_join.
    let theirs = match swap_cards(fd, &mine) {
        Ok(card) => card,
        Err(error) => return raise_error("MPI_Comm_join", MPI_COMM_WORLD, error),
    };
    entry("MPI_Comm_join", MPI_COMM_WORLD, |mpi, _| {
        let index = mpi.join_with(&theirs)?;
        // SAFETY: checked non-null above.
        unsafe { *intercomm = comm_handle(index) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_join = PMPI_Comm_join;

/// MPI_Comm_spawn(_multiple) after its arguments were checked at the
/// root: every member learns the number of processes asked for from the
/// root, fills its error codes with MPI_ERR_SPAWN and returns it.
fn refuse_spawn(
    mpi: &mut resmpi_core::Mpi,
    index: usize,
    root: c_int,
    at_root: Option<MpiResult<u32>>,
    array_of_errcodes: *mut c_int,
) -> MpiResult<()> {
    let comm = mpi.comm(index)?;
    if comm.is_inter() {
        return Err(MpiError::new(
            ErrorClass::Comm,
            "MPI_Comm_spawn needs an intra-communicator",
        ));
    }
    if root < 0 || root as u32 >= comm.size() {
        return Err(MpiError::new(
            ErrorClass::Root,
            format!("root {root} is out of range (size {})", comm.size()),
        ));
    }
    // [arguments valid at the root, processes asked for]
    let mut words = [0u32; 2];
    let mut root_error = None;
    match at_root {
        Some(Ok(count)) => words = [1, count],
        Some(Err(error)) => root_error = Some(error),
        None => {}
    }
    let mut bytes: Vec<u8> = words.iter().flat_map(|word| word.to_ne_bytes()).collect();
    mpi.bcast(index, &mut bytes, root as u32)?;
    let word =
        |at: usize| u32::from_ne_bytes(bytes[at * 4..at * 4 + 4].try_into().expect("4 bytes"));
    if word(0) == 0 {
        return Err(root_error.unwrap_or_else(|| {
            MpiError::new(ErrorClass::Spawn, "the root's spawn arguments are invalid")
        }));
    }
    let count = word(1) as usize;
    if !array_of_errcodes.is_null() {
        for slot in 0..count {
            // SAFETY: MPI_Comm_spawn's caller passes one code per process
            // asked for (MPI_ERRCODES_IGNORE, NULL, is skipped above).
            unsafe { *array_of_errcodes.add(slot) = MPI_ERR_SPAWN };
        }
    }
    Err(MpiError::new(
        ErrorClass::Spawn,
        format!(
            "starting {count} new processes is not supported: resmpi's mpiexec cannot spawn processes yet (MPI_Comm_accept/MPI_Comm_connect work between processes of one job)"
        ),
    ))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_spawn(
    command: *const c_char,
    _argv: *mut *mut c_char,
    maxprocs: c_int,
    _info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    entry("MPI_Comm_spawn", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(intercomm)?;
        // SAFETY: checked non-null.
        unsafe { *intercomm = MPI_COMM_NULL };
        let is_root = mpi.comm(index)?.rank as c_int == root;
        let at_root = is_root.then(|| {
            // SAFETY: the caller's string.
            unsafe { text_argument(command, "command") }?;
            if maxprocs <= 0 {
                return Err(MpiError::new(
                    ErrorClass::Arg,
                    format!("maxprocs {maxprocs} must be positive"),
                ));
            }
            Ok(maxprocs as u32)
        });
        refuse_spawn(mpi, index, root, at_root, array_of_errcodes)
    })
}
const _: fn_types::MPI_Comm_spawn = PMPI_Comm_spawn;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_spawn_multiple(
    count: c_int,
    array_of_commands: *mut *mut c_char,
    _array_of_argv: *mut *mut *mut c_char,
    array_of_maxprocs: *const c_int,
    _array_of_info: *const MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    entry("MPI_Comm_spawn_multiple", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(intercomm)?;
        // SAFETY: checked non-null.
        unsafe { *intercomm = MPI_COMM_NULL };
        let is_root = mpi.comm(index)?.rank as c_int == root;
        let at_root = is_root.then(|| {
            let mut total = 0u32;
            if count <= 0 || array_of_commands.is_null() || array_of_maxprocs.is_null() {
                return Err(MpiError::new(
                    ErrorClass::Arg,
                    "MPI_Comm_spawn_multiple needs a positive count, commands and maxprocs",
                ));
            }
            for command in 0..count as usize {
                // SAFETY: the caller's arrays hold `count` entries.
                let processes = unsafe { *array_of_maxprocs.add(command) };
                if processes <= 0 {
                    return Err(MpiError::new(
                        ErrorClass::Arg,
                        format!("maxprocs[{command}] = {processes} must be positive"),
                    ));
                }
                total = total.saturating_add(processes as u32);
            }
            Ok(total)
        });
        refuse_spawn(mpi, index, root, at_root, array_of_errcodes)
    })
}
const _: fn_types::MPI_Comm_spawn_multiple = PMPI_Comm_spawn_multiple;
