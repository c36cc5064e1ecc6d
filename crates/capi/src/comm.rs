//! Communicator entry points: rank/size, dup/idup/split/split_type/
//! create/create_group/free/compare, names, inter-communicators.

use resmpi_core::group;
use resmpi_core::{ErrorClass, MpiError};

use crate::abi::*;
use crate::global::{entry, lock, raise_error, with_mpi};
use crate::group::group_members;
use crate::handles::{comm_handle, request_handle};
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

/// MPI_Comm_dup and its variants: a new communicator, then the copy
/// callbacks of the parent's attributes (outside the lock); a failing
/// callback frees the new communicator and fails the call.
fn duplicate(name: &str, comm: MPI_Comm) -> Result<usize, c_int> {
    duplicate_with(name, comm, |mpi, index| Ok((mpi.comm_dup(index)?, ()))).map(|(index, ())| index)
}

/// A duplicate of `comm` made by `make` (which returns the new index and
/// anything else), with the attributes copied as MPI_Comm_dup copies them.
fn duplicate_with<T>(
    name: &str,
    comm: MPI_Comm,
    make: impl FnOnce(&mut resmpi_core::Mpi, usize) -> resmpi_core::MpiResult<(usize, T)>,
) -> Result<(usize, T), c_int> {
    let (old_index, (new_index, extra)) = with_mpi(name, comm, |mpi, _| {
        let index = comm_of(mpi, comm)?;
        Ok((index, make(mpi, index)?))
    })?;
    if let Err(error) = crate::attr::copy_attributes(old_index, new_index) {
        let _ = crate::attr::delete_all_attributes(new_index);
        let mut global = lock();
        global.registry.objects.forget_comm(new_index);
        if let Some(mpi) = global.mpi.as_mut() {
            let _ = mpi.free_comm(new_index);
        }
        drop(global);
        return Err(raise_error(name, comm, error));
    }
    Ok((new_index, extra))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    if newcomm.is_null() {
        return raise_error(
            "MPI_Comm_dup",
            comm,
            MpiError::new(ErrorClass::Arg, "newcomm pointer is NULL"),
        );
    }
    match duplicate("MPI_Comm_dup", comm) {
        Ok(index) => {
            // SAFETY: checked non-null.
            unsafe { *newcomm = comm_handle(index) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
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
    let index = match with_mpi("MPI_Comm_free", handle, |mpi, _| {
        let index = comm_of(mpi, handle)?;
        if index == resmpi_core::WORLD || index == resmpi_core::SELF {
            return Err(MpiError::new(
                ErrorClass::Comm,
                "cannot free a predefined communicator",
            ));
        }
        Ok(index)
    }) {
        Ok(index) => index,
        Err(code) => return code,
    };
    // Delete callbacks run first, while the communicator still exists.
    if let Err(error) = crate::attr::delete_all_attributes(index) {
        return raise_error("MPI_Comm_free", handle, error);
    }
    entry("MPI_Comm_free", handle, |mpi, registry| {
        mpi.free_comm(index)?;
        registry.objects.forget_comm(index);
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
        // Groups compare local with local and remote with remote; an
        // intra- and an inter-communicator are always unequal.
        let groups = |comm: &resmpi_core::Communicator| {
            (
                comm.group.clone(),
                comm.remote.as_ref().map(|remote| remote.group.clone()),
            )
        };
        let ((first_local, first_remote), (second_local, second_remote)) =
            (groups(first), groups(second));
        let answer = if comm1 == comm2 {
            MPI_IDENT
        } else if first_remote.is_some() != second_remote.is_some() {
            MPI_UNEQUAL
        } else {
            let local = group::compare(&first_local, &second_local);
            let remote = match (&first_remote, &second_remote) {
                (Some(a), Some(b)) => group::compare(a, b),
                _ => group::Comparison::Identical,
            };
            match (local, remote) {
                (group::Comparison::Identical, group::Comparison::Identical) => MPI_CONGRUENT,
                (group::Comparison::Unequal, _) | (_, group::Comparison::Unequal) => MPI_UNEQUAL,
                _ => MPI_SIMILAR,
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

/// Write communicator `index` (or MPI_COMM_NULL) to `newcomm`.
fn store_comm(newcomm: *mut MPI_Comm, index: Option<usize>) {
    // SAFETY: the callers check `newcomm` before any collective work.
    unsafe { *newcomm = index.map_or(MPI_COMM_NULL, comm_handle) };
}

fn check_newcomm(newcomm: *mut MPI_Comm) -> resmpi_core::MpiResult<()> {
    if newcomm.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "newcomm pointer is NULL"));
    }
    Ok(())
}

/// MPI_Comm_idup: the duplicate's handle is written at once, its context
/// arrives with the request (see `Mpi::comm_idup_start`) and is installed
/// when the request completes ([`install_idup_context`]).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_idup(
    comm: MPI_Comm,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    if request.is_null() || newcomm.is_null() {
        return raise_error(
            "MPI_Comm_idup",
            comm,
            MpiError::new(ErrorClass::Arg, "newcomm or request pointer is NULL"),
        );
    }
    let made = duplicate_with("MPI_Comm_idup", comm, |mpi, index| {
        let (new_index, slot, cell) = mpi.comm_idup_start(index)?;
        let generation = mpi
            .engine
            .state
            .requests
            .get(slot)
            .map_or(0, |request| request.generation);
        Ok((new_index, (slot, generation, cell)))
    });
    match made {
        Ok((new_index, (slot, generation, cell))) => {
            with_pending_idups(|pending| pending.insert(slot, (generation, new_index, cell)));
            // SAFETY: both checked non-null.
            unsafe {
                *newcomm = comm_handle(new_index);
                *request = request_handle(slot);
            }
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

/// Idup requests in flight: request slot -> (generation, new communicator,
/// the cell its context arrives in).
type PendingIdups = std::collections::HashMap<u32, (u32, usize, Box<[u8]>)>;

static PENDING_IDUPS: std::sync::Mutex<Option<PendingIdups>> = std::sync::Mutex::new(None);

fn with_pending_idups<T>(body: impl FnOnce(&mut PendingIdups) -> T) -> T {
    let mut guard = PENDING_IDUPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    body(guard.get_or_insert_with(Default::default))
}

/// Request `slot` of `generation` has completed and been released: if it
/// was an MPI_Comm_idup, the duplicate gets its context now.
pub fn install_idup_context(mpi: &mut resmpi_core::Mpi, slot: u32, generation: u32) {
    let Some((expected, comm_index, cell)) = with_pending_idups(|pending| pending.remove(&slot))
    else {
        return;
    };
    if expected == generation {
        let context = u32::from_ne_bytes(cell[..4].try_into().expect("4 bytes"));
        // The communicator may already be freed (erroneous, but harmless).
        let _ = mpi.set_comm_context(comm_index, context);
    }
}
const _: fn_types::MPI_Comm_idup = PMPI_Comm_idup;

/// MPI_Comm_idup_with_info: MPI_Comm_idup, then the hints as
/// MPI_Comm_dup_with_info sets them.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_idup_with_info(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller pointers.
    let code = unsafe { PMPI_Comm_idup(comm, newcomm, request) };
    // SAFETY: on success `newcomm` holds the new communicator.
    unsafe { with_hints(code, newcomm, info) }
}
const _: fn_types::MPI_Comm_idup_with_info = PMPI_Comm_idup_with_info;

/// MPI_Comm_get_parent: the inter-communicator to the parents of a
/// process MPI_Comm_spawn started (until it is disconnected), else
/// MPI_COMM_NULL.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_parent(parent: *mut MPI_Comm) -> c_int {
    entry("MPI_Comm_get_parent", MPI_COMM_WORLD, |mpi, _| {
        if parent.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "parent pointer is NULL"));
        }
        let handle = match mpi.parent {
            Some(index) if mpi.comm(index).is_ok() => crate::handles::comm_handle(index),
            _ => MPI_COMM_NULL,
        };
        // SAFETY: checked non-null; the caller's variable.
        unsafe { *parent = handle };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_get_parent = PMPI_Comm_get_parent;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_dup_with_info(
    comm: MPI_Comm,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    // SAFETY: forwarded caller pointer.
    let code = unsafe { PMPI_Comm_dup(comm, newcomm) };
    // SAFETY: on success `newcomm` holds the new communicator.
    unsafe { with_hints(code, newcomm, info) }
}

/// After a successful dup (`code`), give the new communicator `info`'s
/// hints; MPI_INFO_NULL means none.
///
/// # Safety
/// When `code` is MPI_SUCCESS, `newcomm` points to the new communicator.
unsafe fn with_hints(code: c_int, newcomm: *mut MPI_Comm, info: MPI_Info) -> c_int {
    if code != MPI_SUCCESS || info == MPI_INFO_NULL {
        return code;
    }
    // SAFETY: guaranteed by the caller.
    unsafe { crate::info::PMPI_Comm_set_info(*newcomm, info) }
}
const _: fn_types::MPI_Comm_dup_with_info = PMPI_Comm_dup_with_info;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create(
    comm: MPI_Comm,
    group: MPI_Group,
    newcomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Comm_create", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(newcomm)?;
        let members = group_members(registry, group)?;
        store_comm(newcomm, mpi.comm_create(index, &members)?);
        Ok(())
    })
}
const _: fn_types::MPI_Comm_create = PMPI_Comm_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_group(
    comm: MPI_Comm,
    group: MPI_Group,
    tag: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Comm_create_group", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(newcomm)?;
        if !(0..=resmpi_core::TAG_UB).contains(&tag) {
            return Err(MpiError::new(
                ErrorClass::Tag,
                format!("tag {tag} is invalid"),
            ));
        }
        let members = group_members(registry, group)?;
        let me = mpi.rank();
        if !members.contains(&me) {
            // MPI: a process outside the group passes MPI_GROUP_EMPTY and gets MPI_COMM_NULL.
            if members.is_empty() {
                store_comm(newcomm, None);
                return Ok(());
            }
            return Err(MpiError::new(
                ErrorClass::Group,
                "MPI_Comm_create_group called by a process outside the group",
            ));
        }
        store_comm(newcomm, Some(mpi.comm_create_group(index, &members)?));
        Ok(())
    })
}
const _: fn_types::MPI_Comm_create_group = PMPI_Comm_create_group;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_split_type(
    comm: MPI_Comm,
    split_type: c_int,
    key: c_int,
    info: MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Comm_split_type", comm, |mpi, registry| {
        let index = comm_of(mpi, comm)?;
        check_newcomm(newcomm)?;
        // Every process runs the same collective (the shared-memory split),
        // joining it or not, so MPI_UNDEFINED may be mixed with a type.
        let new_index = match split_type {
            MPI_UNDEFINED => mpi.comm_split_shared(index, false, key)?,
            MPI_COMM_TYPE_SHARED => mpi.comm_split_shared(index, true, key)?,
            // The one hardware resource resmpi knows is the node (shared
            // memory); any other resource, or no hint, gives MPI_COMM_NULL.
            MPI_COMM_TYPE_HW_GUIDED => {
                let joins = matches!(
                    crate::info::hint(registry, info, HW_RESOURCE_KEY)?.as_deref(),
                    Some(NODE_RESOURCE | "machine")
                );
                mpi.comm_split_shared(index, joins, key)?
            }
            // A resource strictly smaller than the parent: the node, if
            // the parent spans more than one; named back in `info`.
            MPI_COMM_TYPE_HW_UNGUIDED => {
                let parent_size = mpi.comm(index)?.size();
                match mpi.comm_split_shared(index, true, key)? {
                    Some(node) if mpi.comm(node)?.size() < parent_size => {
                        if info != MPI_INFO_NULL {
                            crate::info::set_hint(registry, info, HW_RESOURCE_KEY, NODE_RESOURCE)?;
                        }
                        Some(node)
                    }
                    Some(node) => {
                        mpi.free_comm(node)?;
                        None
                    }
                    None => None,
                }
            }
            other => {
                return Err(MpiError::new(
                    ErrorClass::Arg,
                    format!("split type {other} is not an MPI_COMM_TYPE_* value"),
                ))
            }
        };
        store_comm(newcomm, new_index);
        Ok(())
    })
}

/// The info key naming the hardware resource of MPI_COMM_TYPE_HW_GUIDED.
const HW_RESOURCE_KEY: &str = "mpi_hw_resource_type";
/// The standard's name for the shared-memory domain (a node here).
const NODE_RESOURCE: &str = "mpi_shared_memory";
const _: fn_types::MPI_Comm_split_type = PMPI_Comm_split_type;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_test_inter(comm: MPI_Comm, flag: *mut c_int) -> c_int {
    entry("MPI_Comm_test_inter", comm, |mpi, _| {
        let inter = mpi.comm(comm_of(mpi, comm)?)?.is_inter();
        if flag.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "flag pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *flag = inter as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_test_inter = PMPI_Comm_test_inter;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_remote_size(comm: MPI_Comm, size: *mut c_int) -> c_int {
    entry("MPI_Comm_remote_size", comm, |mpi, _| {
        let Some(remote) = &mpi.comm(comm_of(mpi, comm)?)?.remote else {
            return Err(MpiError::new(ErrorClass::Comm, "not an inter-communicator"));
        };
        if size.is_null() {
            return Err(MpiError::new(ErrorClass::Arg, "size pointer is NULL"));
        }
        // SAFETY: checked non-null.
        unsafe { *size = remote.group.len() as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_remote_size = PMPI_Comm_remote_size;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Intercomm_create(
    local_comm: MPI_Comm,
    local_leader: c_int,
    peer_comm: MPI_Comm,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Intercomm_create", local_comm, |mpi, _| {
        let index = comm_of(mpi, local_comm)?;
        check_newcomm(newintercomm)?;
        // The peer communicator is significant only at the local leader.
        let peer_index = comm_of(mpi, peer_comm).ok();
        let new_index =
            mpi.intercomm_create(index, local_leader, peer_index, remote_leader, tag)?;
        store_comm(newintercomm, Some(new_index));
        Ok(())
    })
}
const _: fn_types::MPI_Intercomm_create = PMPI_Intercomm_create;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Intercomm_merge(
    intercomm: MPI_Comm,
    high: c_int,
    newintracomm: *mut MPI_Comm,
) -> c_int {
    entry("MPI_Intercomm_merge", intercomm, |mpi, _| {
        let index = comm_of(mpi, intercomm)?;
        check_newcomm(newintracomm)?;
        store_comm(newintracomm, Some(mpi.intercomm_merge(index, high != 0)?));
        Ok(())
    })
}
const _: fn_types::MPI_Intercomm_merge = PMPI_Intercomm_merge;

/// The string tag of the MPI-4 `*_from_group(s)` calls.
unsafe fn string_tag(stringtag: *const c_char) -> resmpi_core::MpiResult<String> {
    if stringtag.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "stringtag is NULL"));
    }
    // SAFETY: checked non-null; a C string.
    Ok(unsafe { c_text(stringtag) })
}

/// The error handler a `*_from_group(s)` call gives its result
/// (MPI_ERRHANDLER_NULL: errors are fatal, as on MPI_COMM_WORLD by default).
fn errhandler_or_fatal(errhandler: MPI_Errhandler) -> MPI_Errhandler {
    if errhandler == MPI_ERRHANDLER_NULL {
        MPI_ERRORS_ARE_FATAL
    } else {
        errhandler
    }
}

/// MPI_Comm_create_from_group (MPI-4): a communicator of `group`'s
/// processes (taken from MPI_COMM_WORLD's), collective over them only.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_from_group(
    group: MPI_Group,
    stringtag: *const c_char,
    _info: MPI_Info,
    errhandler: MPI_Errhandler,
    newcomm: *mut MPI_Comm,
) -> c_int {
    entry(
        "MPI_Comm_create_from_group",
        MPI_COMM_WORLD,
        |mpi, registry| {
            check_newcomm(newcomm)?;
            // SAFETY: the caller's C string.
            let tag = unsafe { string_tag(stringtag) }?;
            let members = group_members(registry, group)?;
            if members.is_empty() {
                store_comm(newcomm, None);
                return Ok(());
            }
            let index =
                mpi.comm_create_from_group(&members, &tag, errhandler_or_fatal(errhandler))?;
            store_comm(newcomm, Some(index));
            Ok(())
        },
    )
}
const _: fn_types::MPI_Comm_create_from_group = PMPI_Comm_create_from_group;

/// MPI_Intercomm_create_from_groups (MPI-4): the local group becomes a
/// communicator (as MPI_Comm_create_from_group does), and the leaders meet
/// over MPI_COMM_WORLD as in MPI_Intercomm_create, on a tag derived from
/// the string tag.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Intercomm_create_from_groups(
    local_group: MPI_Group,
    local_leader: c_int,
    remote_group: MPI_Group,
    remote_leader: c_int,
    stringtag: *const c_char,
    _info: MPI_Info,
    errhandler: MPI_Errhandler,
    newintercomm: *mut MPI_Comm,
) -> c_int {
    entry(
        "MPI_Intercomm_create_from_groups",
        MPI_COMM_WORLD,
        |mpi, registry| {
            check_newcomm(newintercomm)?;
            // SAFETY: the caller's C string.
            let tag = unsafe { string_tag(stringtag) }?;
            let local = group_members(registry, local_group)?;
            let remote = group_members(registry, remote_group)?;
            let Some(&remote_leader_world) = usize::try_from(remote_leader)
                .ok()
                .and_then(|leader| remote.get(leader))
            else {
                return Err(MpiError::new(
                    ErrorClass::Rank,
                    format!("remote leader {remote_leader} is not a rank of the remote group"),
                ));
            };
            let errhandler = errhandler_or_fatal(errhandler);
            let local_index =
                mpi.comm_create_from_group(&local, &format!("{tag}\0local"), errhandler)?;
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&tag, &mut hasher);
            let leader_tag =
                (std::hash::Hasher::finish(&hasher) % resmpi_core::TAG_UB as u64) as c_int;
            let created = mpi.intercomm_create(
                local_index,
                local_leader,
                Some(resmpi_core::WORLD),
                remote_leader_world as c_int,
                leader_tag,
            );
            mpi.free_comm(local_index)?;
            let inter = created?;
            mpi.comm_mut(inter)?.errhandler = errhandler;
            store_comm(newintercomm, Some(inter));
            Ok(())
        },
    )
}
const _: fn_types::MPI_Intercomm_create_from_groups = PMPI_Intercomm_create_from_groups;
