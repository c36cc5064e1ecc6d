//! Communicator entry points: rank/size, dup/split/free/compare, names,
//! the predefined attributes.

use std::sync::OnceLock;

use resmpi_core::{ErrorClass, MpiError};

use crate::abi::*;
use crate::global::{entry, with_mpi};
use crate::handles::comm_handle;
use crate::init::{c_text, write_string};
use crate::p2p::comm_of;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int {
    entry("MPI_Comm_rank", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        if rank.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "rank pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *rank = mpi.comm(index)?.rank as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_rank = PMPI_Comm_rank;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    entry("MPI_Comm_size", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        if size.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "size pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *size = mpi.comm(index)?.size() as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_size = PMPI_Comm_size;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    entry("MPI_Comm_dup", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "newcomm pointer is NULL"));
        }
        let new_index = mpi.comm_dup(index)?;
        // SAFETY: checked non-null.
        unsafe { *newcomm = comm_handle(new_index) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_dup = PMPI_Comm_dup;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Comm_split", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "newcomm pointer is NULL"));
        }
        let new_index = mpi.comm_split(index, color, key, MPI_UNDEFINED)?;
        // SAFETY: checked non-null.
        unsafe { *newcomm = new_index.map_or(MPI_COMM_NULL, comm_handle) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_split = PMPI_Comm_split;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    // SAFETY: the caller's pointer (checked below).
    let handle = if comm.is_null() {
        MPI_COMM_NULL
    } else {
        unsafe { *comm }
    };
    entry("MPI_Comm_free", handle, |mpi, _| {
        let index = comm_of(mpi, handle)?;
        mpi.free_comm(index)?;
        // SAFETY: non-null (comm_of rejected MPI_COMM_NULL).
        unsafe { *comm = MPI_COMM_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_free = PMPI_Comm_free;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_compare(
    comm1: MPI_Comm,
    comm2: MPI_Comm,
    result: *mut c_int,
) -> c_int {
    entry("MPI_Comm_compare", comm1, |mpi, _| {
        let first = mpi.comm(comm_of(mpi, comm1)?)?;
        let second = mpi.comm(comm_of(mpi, comm2)?)?;
        if result.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "result pointer is NULL"));
        }
        let answer = if comm1 == comm2 {
            MPI_IDENT
        } else if first.group == second.group {
            MPI_CONGRUENT
        } else {
            let mut a: Vec<u32> = first.group.to_vec();
            let mut b: Vec<u32> = second.group.to_vec();
            a.sort_unstable();
            b.sort_unstable();
            if a == b {
                MPI_SIMILAR
            } else {
                MPI_UNEQUAL
            }
        };
        // SAFETY: checked non-null.
        unsafe { *result = answer };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_compare = PMPI_Comm_compare;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_name(comm: MPI_Comm, comm_name: *const c_char) -> c_int {
    entry("MPI_Comm_set_name", comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        if comm_name.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "name is NULL"));
        }
        // SAFETY: checked non-null; a C string.
        let mut name = unsafe { c_text(comm_name) };
        name.truncate(MPI_MAX_OBJECT_NAME as usize - 1);
        mpi.comm_mut(index)?.name = name;
        Ok(())
    })
}
const _: fn_types::MPI_Comm_set_name = PMPI_Comm_set_name;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_name(
    comm: MPI_Comm,
    comm_name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    match with_mpi("MPI_Comm_get_name", comm, |mpi, _| {
        Ok(mpi.comm(comm_of(mpi, comm)?)?.name.clone())
    }) {
        Ok(name) => {
            // SAFETY: the caller's buffer holds MPI_MAX_OBJECT_NAME bytes.
            unsafe { write_string(&name, comm_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}
const _: fn_types::MPI_Comm_get_name = PMPI_Comm_get_name;

/// Storage the predefined attribute pointers point to (they must outlive the call).
struct PredefinedAttributes {
    tag_ub: c_int,
    host: c_int,
    io: c_int,
    wtime_is_global: c_int,
    universe_size: c_int,
    appnum: c_int,
}

static ATTRIBUTES: OnceLock<PredefinedAttributes> = OnceLock::new();

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_attr(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    entry("MPI_Comm_get_attr", comm, |mpi, _| {
        comm_of(mpi, comm)?;
        if flag.is_null() || attribute_val.is_null() {
            return Err(MpiError::new(
                ErrorClass::Arg,
                "attribute or flag pointer is NULL",
            ));
        }
        let universe = mpi.universe_size() as c_int;
        let attributes = ATTRIBUTES.get_or_init(|| PredefinedAttributes {
            tag_ub: resmpi_core::TAG_UB,
            host: MPI_PROC_NULL,
            io: MPI_ANY_SOURCE,
            wtime_is_global: 0,
            universe_size: universe,
            appnum: 0,
        });
        let value: Option<&c_int> = match comm_keyval {
            MPI_TAG_UB => Some(&attributes.tag_ub),
            MPI_HOST => Some(&attributes.host),
            MPI_IO => Some(&attributes.io),
            MPI_WTIME_IS_GLOBAL => Some(&attributes.wtime_is_global),
            MPI_UNIVERSE_SIZE => Some(&attributes.universe_size),
            MPI_APPNUM => Some(&attributes.appnum),
            MPI_KEYVAL_INVALID => {
                return Err(MpiError::new(ErrorClass::Keyval, "MPI_KEYVAL_INVALID"))
            }
            _ => {
                return Err(MpiError::new(
                    ErrorClass::Keyval,
                    format!("keyval {comm_keyval:#x}: user attributes arrive with issue #4"),
                ))
            }
        };
        // SAFETY: checked non-null; MPI passes the address of a `void *` variable.
        unsafe {
            *flag = value.is_some() as c_int;
            if let Some(value) = value {
                *(attribute_val as *mut *const c_int) = value;
            }
        }
        Ok(())
    })
}
const _: fn_types::MPI_Comm_get_attr = PMPI_Comm_get_attr;
