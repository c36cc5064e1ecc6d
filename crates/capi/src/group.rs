//! Group entry points. A group is a list of world ranks held by the C
//! layer; the set algebra is `resmpi_core::group`. Errors on groups go to
//! MPI_COMM_WORLD's error handler (no communicator is involved).

use std::sync::Arc;

use resmpi_core::group::{self, Comparison};
use resmpi_core::{ErrorClass, MpiError, MpiResult};

use crate::abi::*;
use crate::global::out_pointer;
use crate::global::{entry, Registry};
use crate::handles::{group_handle, group_index};
use crate::objects::insert_reusing;
use crate::p2p::comm_of;

/// The members of group `handle`, or MPI_ERR_GROUP.
pub fn group_members(registry: &Registry, handle: MPI_Group) -> MpiResult<Arc<Vec<u32>>> {
    if handle == MPI_GROUP_EMPTY {
        return Ok(Arc::new(Vec::new()));
    }
    group_index(handle)
        .and_then(|index| registry.objects.groups.get(index).cloned().flatten())
        .ok_or_else(|| {
            let what = if handle == MPI_GROUP_NULL {
                "MPI_GROUP_NULL".to_string()
            } else {
                format!("{handle:#x} (freed or never created)")
            };
            MpiError::new(ErrorClass::Group, format!("group {what} is not valid"))
        })
}

/// A handle for a new group of `members` (MPI_GROUP_EMPTY when empty, as MPICH does).
pub fn new_group(registry: &mut Registry, members: Vec<u32>) -> MPI_Group {
    if members.is_empty() {
        return MPI_GROUP_EMPTY;
    }
    group_handle(insert_reusing(
        &mut registry.objects.groups,
        Arc::new(members),
    ))
}

/// `count` ints at `ranks` (NULL allowed when `count` is 0).
unsafe fn int_array<'a>(ranks: *const c_int, count: c_int, what: &str) -> MpiResult<&'a [c_int]> {
    if count < 0 {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("{what} count {count} is negative"),
        ));
    }
    if count == 0 {
        return Ok(&[]);
    }
    if ranks.is_null() {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("{what} array is NULL"),
        ));
    }
    // SAFETY: the caller passes `count` ints.
    Ok(unsafe { std::slice::from_raw_parts(ranks, count as usize) })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
    entry("MPI_Comm_group", comm, |mpi, registry| {
        let members = mpi.comm(comm_of(mpi, comm)?)?.group.to_vec();
        out_pointer(group, "group")?;
        // SAFETY: checked non-null.
        unsafe { *group = new_group(registry, members) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_group = PMPI_Comm_group;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_remote_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
    entry("MPI_Comm_remote_group", comm, |mpi, registry| {
        let Some(remote) = mpi.comm(comm_of(mpi, comm)?)?.remote.clone() else {
            return Err(MpiError::new(ErrorClass::Comm, "not an inter-communicator"));
        };
        out_pointer(group, "group")?;
        // SAFETY: checked non-null.
        unsafe { *group = new_group(registry, remote.group.to_vec()) };
        Ok(())
    })
}
const _: fn_types::MPI_Comm_remote_group = PMPI_Comm_remote_group;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_size(group: MPI_Group, size: *mut c_int) -> c_int {
    entry("MPI_Group_size", MPI_COMM_WORLD, |_, registry| {
        let members = group_members(registry, group)?;
        out_pointer(size, "size")?;
        // SAFETY: checked non-null.
        unsafe { *size = members.len() as c_int };
        Ok(())
    })
}
const _: fn_types::MPI_Group_size = PMPI_Group_size;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_rank(group: MPI_Group, rank: *mut c_int) -> c_int {
    entry("MPI_Group_rank", MPI_COMM_WORLD, |mpi, registry| {
        let members = group_members(registry, group)?;
        out_pointer(rank, "rank")?;
        let me = mpi.rank();
        let position = members.iter().position(|world| *world == me);
        // SAFETY: checked non-null.
        unsafe { *rank = position.map_or(MPI_UNDEFINED, |position| position as c_int) };
        Ok(())
    })
}
const _: fn_types::MPI_Group_rank = PMPI_Group_rank;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_translate_ranks(
    group1: MPI_Group,
    n: c_int,
    ranks1: *const c_int,
    group2: MPI_Group,
    ranks2: *mut c_int,
) -> c_int {
    entry(
        "MPI_Group_translate_ranks",
        MPI_COMM_WORLD,
        |_, registry| {
            let first = group_members(registry, group1)?;
            let second = group_members(registry, group2)?;
            // SAFETY: the caller passes n ranks.
            let ranks = unsafe { int_array(ranks1, n, "ranks1") }?;
            if n > 0 {
                out_pointer(ranks2, "ranks2")?;
            }
            let translated =
                group::translate(&first, ranks, &second, MPI_UNDEFINED, MPI_PROC_NULL)?;
            for (slot, rank) in translated.into_iter().enumerate() {
                // SAFETY: the caller's output array holds n ints.
                unsafe { *ranks2.add(slot) = rank };
            }
            Ok(())
        },
    )
}
const _: fn_types::MPI_Group_translate_ranks = PMPI_Group_translate_ranks;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_compare(
    group1: MPI_Group,
    group2: MPI_Group,
    result: *mut c_int,
) -> c_int {
    entry("MPI_Group_compare", MPI_COMM_WORLD, |_, registry| {
        let first = group_members(registry, group1)?;
        let second = group_members(registry, group2)?;
        out_pointer(result, "result")?;
        let answer = match group::compare(&first, &second) {
            Comparison::Identical => MPI_IDENT,
            Comparison::Similar => MPI_SIMILAR,
            Comparison::Unequal => MPI_UNEQUAL,
        };
        // SAFETY: checked non-null.
        unsafe { *result = answer };
        Ok(())
    })
}
const _: fn_types::MPI_Group_compare = PMPI_Group_compare;

/// A group made from two groups by `combine`.
unsafe fn two_group_operation(
    name: &str,
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
    combine: fn(&[u32], &[u32]) -> Vec<u32>,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, registry| {
        let first = group_members(registry, group1)?;
        let second = group_members(registry, group2)?;
        out_pointer(newgroup, "newgroup")?;
        let members = combine(&first, &second);
        // SAFETY: checked non-null.
        unsafe { *newgroup = new_group(registry, members) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_union(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    // SAFETY: forwarded caller pointer.
    unsafe { two_group_operation("MPI_Group_union", group1, group2, newgroup, group::union) }
}
const _: fn_types::MPI_Group_union = PMPI_Group_union;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_intersection(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    // SAFETY: forwarded caller pointer.
    unsafe {
        two_group_operation(
            "MPI_Group_intersection",
            group1,
            group2,
            newgroup,
            group::intersection,
        )
    }
}
const _: fn_types::MPI_Group_intersection = PMPI_Group_intersection;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_difference(
    group1: MPI_Group,
    group2: MPI_Group,
    newgroup: *mut MPI_Group,
) -> c_int {
    // SAFETY: forwarded caller pointer.
    unsafe {
        two_group_operation(
            "MPI_Group_difference",
            group1,
            group2,
            newgroup,
            group::difference,
        )
    }
}
const _: fn_types::MPI_Group_difference = PMPI_Group_difference;

/// A subgroup chosen by `select` from `group` and the caller's rank list.
fn subgroup_operation(
    name: &str,
    group: MPI_Group,
    newgroup: *mut MPI_Group,
    select: impl FnOnce(&[u32]) -> MpiResult<Vec<u32>>,
) -> c_int {
    entry(name, MPI_COMM_WORLD, |_, registry| {
        let members = group_members(registry, group)?;
        out_pointer(newgroup, "newgroup")?;
        let chosen = select(&members)?;
        // SAFETY: checked non-null.
        unsafe { *newgroup = new_group(registry, chosen) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_incl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    subgroup_operation("MPI_Group_incl", group, newgroup, |members| {
        // SAFETY: the caller passes n ranks.
        group::include(members, unsafe { int_array(ranks, n, "ranks") }?)
    })
}
const _: fn_types::MPI_Group_incl = PMPI_Group_incl;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_excl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    subgroup_operation("MPI_Group_excl", group, newgroup, |members| {
        // SAFETY: the caller passes n ranks.
        group::exclude(members, unsafe { int_array(ranks, n, "ranks") }?)
    })
}
const _: fn_types::MPI_Group_excl = PMPI_Group_excl;

/// The `n` (first, last, stride) triplets at `ranges`.
unsafe fn range_triplets<'a>(ranges: *mut [c_int; 3], n: c_int) -> MpiResult<&'a [[c_int; 3]]> {
    if n < 0 {
        return Err(MpiError::new(
            ErrorClass::Arg,
            format!("range count {n} is negative"),
        ));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if ranges.is_null() {
        return Err(MpiError::new(ErrorClass::Arg, "ranges array is NULL"));
    }
    // SAFETY: the caller passes n triplets.
    Ok(unsafe { std::slice::from_raw_parts(ranges, n as usize) })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_range_incl(
    group: MPI_Group,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    subgroup_operation("MPI_Group_range_incl", group, newgroup, |members| {
        // SAFETY: the caller passes n triplets.
        let ranks = group::expand_ranges(unsafe { range_triplets(ranges, n) }?, members.len())?;
        group::include(members, &ranks)
    })
}
const _: fn_types::MPI_Group_range_incl = PMPI_Group_range_incl;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_range_excl(
    group: MPI_Group,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut MPI_Group,
) -> c_int {
    subgroup_operation("MPI_Group_range_excl", group, newgroup, |members| {
        // SAFETY: the caller passes n triplets.
        let ranks = group::expand_ranges(unsafe { range_triplets(ranges, n) }?, members.len())?;
        group::exclude(members, &ranks)
    })
}
const _: fn_types::MPI_Group_range_excl = PMPI_Group_range_excl;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_free(group: *mut MPI_Group) -> c_int {
    entry("MPI_Group_free", MPI_COMM_WORLD, |_, registry| {
        out_pointer(group, "group")?;
        // SAFETY: checked non-null.
        let handle = unsafe { *group };
        if handle != MPI_GROUP_EMPTY {
            group_members(registry, handle)?;
            let index = group_index(handle).expect("a live user group");
            registry.objects.groups[index] = None;
        }
        // SAFETY: checked non-null.
        unsafe { *group = MPI_GROUP_NULL };
        Ok(())
    })
}
const _: fn_types::MPI_Group_free = PMPI_Group_free;
