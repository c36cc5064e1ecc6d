//! Process groups as ordered lists of world ranks, and the set algebra MPI
//! defines on them. Pure functions: groups are local objects, nothing here
//! communicates, and the C layer owns the handles.

use crate::error::{fail, ErrorClass, MpiResult};

/// A group: the world rank of each member, indexed by group rank.
pub type Members = Vec<u32>;

/// How two groups (or communicators) relate, as MPI_Group_compare reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// Same members in the same order.
    Identical,
    /// Same members, another order.
    Similar,
    /// Different members.
    Unequal,
}

/// MPI_Group_compare.
pub fn compare(first: &[u32], second: &[u32]) -> Comparison {
    if first == second {
        return Comparison::Identical;
    }
    let mut first_sorted = first.to_vec();
    let mut second_sorted = second.to_vec();
    first_sorted.sort_unstable();
    second_sorted.sort_unstable();
    if first_sorted == second_sorted {
        Comparison::Similar
    } else {
        Comparison::Unequal
    }
}

/// MPI_Group_union: every member of `first`, then the members of `second`
/// not in `first`, each in its group's order.
pub fn union(first: &[u32], second: &[u32]) -> Members {
    let mut members = first.to_vec();
    members.extend(second.iter().filter(|world| !first.contains(world)));
    members
}

/// MPI_Group_intersection: members of `first` also in `second`, in `first`'s order.
pub fn intersection(first: &[u32], second: &[u32]) -> Members {
    first
        .iter()
        .copied()
        .filter(|world| second.contains(world))
        .collect()
}

/// MPI_Group_difference: members of `first` not in `second`, in `first`'s order.
pub fn difference(first: &[u32], second: &[u32]) -> Members {
    first
        .iter()
        .copied()
        .filter(|world| !second.contains(world))
        .collect()
}

/// Check that `ranks` are distinct ranks of a group of `size` members.
fn check_distinct_ranks(ranks: &[i32], size: usize) -> MpiResult<()> {
    let mut seen = vec![false; size];
    for &rank in ranks {
        if rank < 0 || rank as usize >= size {
            return fail(
                ErrorClass::Rank,
                format!("rank {rank} is out of range (group size {size})"),
            );
        }
        if std::mem::replace(&mut seen[rank as usize], true) {
            return fail(ErrorClass::Rank, format!("rank {rank} appears twice"));
        }
    }
    Ok(())
}

/// MPI_Group_incl: the members at `ranks`, in that order.
pub fn include(group: &[u32], ranks: &[i32]) -> MpiResult<Members> {
    check_distinct_ranks(ranks, group.len())?;
    Ok(ranks.iter().map(|&rank| group[rank as usize]).collect())
}

/// MPI_Group_excl: every member except those at `ranks`, in group order.
pub fn exclude(group: &[u32], ranks: &[i32]) -> MpiResult<Members> {
    check_distinct_ranks(ranks, group.len())?;
    Ok(group
        .iter()
        .enumerate()
        .filter(|(rank, _)| !ranks.contains(&(*rank as i32)))
        .map(|(_, world)| *world)
        .collect())
}

/// The ranks named by MPI_Group_range_incl/excl triplets (first, last, stride).
pub fn expand_ranges(ranges: &[[i32; 3]], size: usize) -> MpiResult<Vec<i32>> {
    let mut ranks = Vec::new();
    for &[first, last, stride] in ranges {
        if stride == 0 {
            return fail(ErrorClass::Arg, "range stride is 0");
        }
        if (stride > 0 && first > last) || (stride < 0 && first < last) {
            return fail(
                ErrorClass::Arg,
                format!("range ({first}, {last}, {stride}) does not reach its end"),
            );
        }
        for rank in [first, last] {
            if rank < 0 || rank as usize >= size {
                return fail(
                    ErrorClass::Rank,
                    format!("range rank {rank} is out of range (group size {size})"),
                );
            }
        }
        let mut rank = first as i64;
        while (stride > 0 && rank <= last as i64) || (stride < 0 && rank >= last as i64) {
            ranks.push(rank as i32);
            rank += stride as i64;
        }
    }
    Ok(ranks)
}

/// MPI_Group_translate_ranks: for each rank of `first`, its rank in
/// `second`, `undefined` when absent; `proc_null` maps to itself.
pub fn translate(
    first: &[u32],
    ranks: &[i32],
    second: &[u32],
    undefined: i32,
    proc_null: i32,
) -> MpiResult<Vec<i32>> {
    ranks
        .iter()
        .map(|&rank| {
            if rank == proc_null {
                return Ok(proc_null);
            }
            if rank < 0 || rank as usize >= first.len() {
                return fail(
                    ErrorClass::Rank,
                    format!("rank {rank} is out of range (group size {})", first.len()),
                );
            }
            let world = first[rank as usize];
            Ok(second
                .iter()
                .position(|member| *member == world)
                .map_or(undefined, |position| position as i32))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations_keep_the_standard_order() {
        let a = vec![5, 1, 3];
        let b = vec![3, 4, 5, 0];
        assert_eq!(union(&a, &b), vec![5, 1, 3, 4, 0]);
        assert_eq!(intersection(&a, &b), vec![5, 3]);
        assert_eq!(difference(&a, &b), vec![1]);
        assert_eq!(compare(&a, &[1, 3, 5]), Comparison::Similar);
        assert_eq!(compare(&a, &a), Comparison::Identical);
        assert_eq!(compare(&a, &b), Comparison::Unequal);
    }

    #[test]
    fn include_and_exclude_reject_bad_and_repeated_ranks() {
        let g = vec![10, 11, 12, 13];
        assert_eq!(include(&g, &[3, 0]).unwrap(), vec![13, 10]);
        assert_eq!(exclude(&g, &[3, 0]).unwrap(), vec![11, 12]);
        assert_eq!(include(&g, &[4]).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(include(&g, &[1, 1]).unwrap_err().class, ErrorClass::Rank);
        assert_eq!(exclude(&g, &[-1]).unwrap_err().class, ErrorClass::Rank);
    }

    #[test]
    fn ranges_expand_in_both_directions() {
        assert_eq!(expand_ranges(&[[0, 6, 3]], 8).unwrap(), vec![0, 3, 6]);
        assert_eq!(expand_ranges(&[[7, 4, -2]], 8).unwrap(), vec![7, 5]);
        assert_eq!(expand_ranges(&[[2, 2, 5]], 8).unwrap(), vec![2]);
        assert!(expand_ranges(&[[0, 3, 0]], 8).is_err());
        assert!(expand_ranges(&[[0, 8, 1]], 8).is_err());
    }

    #[test]
    fn translate_maps_absent_members_to_undefined() {
        let out = translate(&[4, 2, 0], &[0, 1, 2, -2], &[0, 4], -32766, -2).unwrap();
        assert_eq!(out, vec![1, -32766, 0, -2]);
        assert!(translate(&[4], &[1], &[4], -32766, -2).is_err());
    }
}
