//! Dynamic process entry points: ports, accept/connect, the name service,
//! MPI_Comm_join, MPI_Comm_disconnect, and MPI_Comm_spawn(_multiple),
//! whose request is decoded here (argv, the `wdir` and `host` info keys)
//! and judged and started at the root by `resmpi_core::spawn`: every
//! member returns the inter-communicator to the children, or the root's
//! reason (MPI_ERR_SPAWN, every error code filled) at once.
//! The logic lives in `resmpi_core::dpm`; this file only decodes C
//! arguments and does the socket I/O of MPI_Comm_join (the one place a
//! user file descriptor is touched).

use std::os::raw::{c_char, c_int};

use resmpi_core::dpm::{JoinCard, PORT_NAME_MAX_BYTES};
use resmpi_core::spawn::SpawnCommand;
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

/// A NULL-terminated C argument vector (MPI_ARGV_NULL: none).
unsafe fn argument_vector(argv: *mut *mut c_char) -> Vec<String> {
    let mut arguments = Vec::new();
    if argv.is_null() {
        return arguments;
    }
    // SAFETY: the caller's vector ends with a NULL entry (the standard's
    // rule for argv); each entry is a NUL-terminated string.
    unsafe {
        let mut at = 0;
        while !(*argv.add(at)).is_null() {
            arguments.push(c_text(*argv.add(at)));
            at += 1;
        }
    }
    arguments
}

/// One command of a spawn request: the info keys resmpi reads are `wdir`
/// and `host`; others are ignored, as the standard allows.
unsafe fn spawn_command(
    registry: &crate::global::Registry,
    command: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: MPI_Info,
    what: &str,
) -> MpiResult<SpawnCommand> {
    // SAFETY: the caller's string.
    let command = unsafe { text_argument(command, what) }?;
    if maxprocs <= 0 {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("maxprocs {maxprocs} of {what} must be positive"),
        ));
    }
    Ok(SpawnCommand {
        command,
        // SAFETY: the caller's vector.
        arguments: unsafe { argument_vector(argv) },
        process_count: maxprocs as u32,
        working_directory: crate::info::hint(registry, info, "wdir")?,
        host: crate::info::hint(registry, info, "host")?,
    })
}

/// The shared end of MPI_Comm_spawn(_multiple): `at_root` is the request
/// decoded at the root. Every member gets the inter-communicator to the
/// children, or fills one error code per process asked for and returns
/// the root's reason (see `resmpi_core::spawn`).
fn spawn_at(
    mpi: &mut resmpi_core::Mpi,
    index: usize,
    root: c_int,
    at_root: Option<MpiResult<Vec<SpawnCommand>>>,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> MpiResult<()> {
    let (error, count) = match mpi.comm_spawn(index, root, at_root) {
        Ok(children) => {
            // SAFETY: checked non-null by the caller.
            unsafe { *intercomm = comm_handle(children) };
            if !array_of_errcodes.is_null() {
                let count = mpi
                    .comm(children)?
                    .remote
                    .as_ref()
                    .map_or(0, |remote| remote.group.len());
                for slot in 0..count {
                    // SAFETY: one code per process asked for, as below.
                    unsafe { *array_of_errcodes.add(slot) = MPI_SUCCESS };
                }
            }
            return Ok(());
        }
        Err(failure) => failure,
    };
    if !array_of_errcodes.is_null() {
        for slot in 0..count {
            // SAFETY: MPI_Comm_spawn's caller passes one code per process
            // asked for (MPI_ERRCODES_IGNORE, NULL, is skipped above).
            unsafe { *array_of_errcodes.add(slot) = MPI_ERR_SPAWN };
        }
    }
    Err(error)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_spawn(
    command: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    entry("MPI_Comm_spawn", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(intercomm)?;
        // SAFETY: checked non-null.
        unsafe { *intercomm = MPI_COMM_NULL };
        let is_root = mpi.comm(index)?.rank as c_int == root;
        let at_root = is_root.then(|| {
            // SAFETY: the caller's arguments, significant at the root.
            let command =
                unsafe { spawn_command(registry, command, argv, maxprocs, info, "command") }?;
            Ok(vec![command])
        });
        spawn_at(mpi, index, root, at_root, intercomm, array_of_errcodes)
    })
}
const _: fn_types::MPI_Comm_spawn = PMPI_Comm_spawn;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_spawn_multiple(
    count: c_int,
    array_of_commands: *mut *mut c_char,
    array_of_argv: *mut *mut *mut c_char,
    array_of_maxprocs: *const c_int,
    array_of_info: *const MPI_Info,
    root: c_int,
    comm: MPI_Comm,
    intercomm: *mut MPI_Comm,
    array_of_errcodes: *mut c_int,
) -> c_int {
    entry("MPI_Comm_spawn_multiple", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(intercomm)?;
        // SAFETY: checked non-null.
        unsafe { *intercomm = MPI_COMM_NULL };
        let is_root = mpi.comm(index)?.rank as c_int == root;
        let at_root = is_root.then(|| {
            if count <= 0 || array_of_commands.is_null() || array_of_maxprocs.is_null() {
                return Err(MpiError::new(
                    ErrorClass::Arg,
                    "MPI_Comm_spawn_multiple needs a positive count, commands and maxprocs",
                ));
            }
            (0..count as usize)
                .map(|at| {
                    // SAFETY: the caller's arrays hold `count` entries
                    // (MPI_ARGVS_NULL and a NULL info array: none).
                    unsafe {
                        let argv = if array_of_argv.is_null() {
                            std::ptr::null_mut()
                        } else {
                            *array_of_argv.add(at)
                        };
                        let info = if array_of_info.is_null() {
                            MPI_INFO_NULL
                        } else {
                            *array_of_info.add(at)
                        };
                        spawn_command(
                            registry,
                            *array_of_commands.add(at),
                            argv,
                            *array_of_maxprocs.add(at),
                            info,
                            &format!("command {at}"),
                        )
                    }
                })
                .collect()
        });
        spawn_at(mpi, index, root, at_root, intercomm, array_of_errcodes)
    })
}
const _: fn_types::MPI_Comm_spawn_multiple = PMPI_Comm_spawn_multiple;
