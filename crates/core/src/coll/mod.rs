//! Collectives as schedules of point-to-point messages in each
//! communicator's collective context, so every protection below
//! (reliability, and later replication and logging) covers them with no
//! special case.
//!
//! Each algorithm is a builder that appends steps to a
//! [`Schedule`](crate::schedule::Schedule); blocking collectives run the
//! schedule to completion, nonblocking ones hand it to a request. The
//! algorithm is chosen from the message size and communicator size (the
//! thresholds below); choices that change which messages flow between
//! which ranks depend only on values every rank agrees on.
//!
//! Buffers are raw pointers with byte lengths: the C layer turns
//! (buffer, count, datatype) into a contiguous region in one place, which is
//! where packing of non-contiguous datatypes plugs in.

mod allgather;
mod alltoall;
pub mod inter;
mod reduction;
pub mod shared_memory;
mod tree;

pub use allgather::{allgather, allgatherv};
pub use alltoall::alltoallw;
pub use reduction::{allreduce, exscan, reduce_scatter, scan};
pub use tree::{barrier, bcast, gather, gatherv, reduce, scatter, scatterv};

use crate::datatype::TypeInfo;
use crate::error::{ErrorClass, MpiResult};
use crate::op::{reduce_predefined, Op};
use crate::Mpi;

/// Broadcasts of at least this many bytes (on 3+ ranks) scatter the data and
/// allgather it around a ring instead of sending it whole down a tree.
pub const BCAST_SCATTER_MIN_BYTES: usize = 64 << 10;
/// Allreduce of at least this many bytes with a commutative op runs a ring
/// reduce-scatter + ring allgather (bandwidth-optimal); below it recursive
/// doubling (latency-optimal).
pub const ALLREDUCE_RING_MIN_BYTES: usize = 32 << 10;
/// Gathers and scatters whose whole data is at most this many bytes go
/// through a binomial tree; larger ones go directly to/from the root.
pub const GATHER_TREE_MAX_BYTES: usize = 64 << 10;
/// Allgathers whose whole result is at most this many bytes use Bruck's
/// algorithm (log2 rounds); larger ones a ring.
pub const ALLGATHER_BRUCK_MAX_BYTES: usize = 64 << 10;
/// Alltoalls whose data per rank is at most this many bytes post every
/// message at once; larger ones exchange pairwise, one peer per round.
pub const ALLTOALL_SCATTERED_MAX_BYTES: usize = 256 << 10;

/// How to combine reduction data: the op, the element type and the datatype
/// handle passed back to user functions.
#[derive(Clone, Debug)]
pub struct Reduction {
    /// The operator.
    pub op: Op,
    /// One element as the op sees it: a basic type for predefined ops, the
    /// application's datatype for user ops (its packed form when `layout`
    /// is set).
    pub info: TypeInfo,
    /// The datatype handle (for user functions).
    pub datatype_handle: i32,
    /// For a user op on a type with holes (or a non-zero lower bound): the
    /// collective moves packed elements, and `apply` unpacks both operands
    /// into the type's layout for the user function, then packs the result.
    pub layout: Option<std::sync::Arc<crate::datatype::Datatype>>,
}

impl Reduction {
    /// `inout = input op inout` over `count` elements.
    pub fn apply(&self, input: &[u8], inout: &mut [u8], count: usize) -> MpiResult<()> {
        match self.op {
            Op::User { function, .. } => match &self.layout {
                // SAFETY: both hold `count` elements in the type's layout.
                None => unsafe { self.call(function, input.as_ptr(), inout.as_mut_ptr(), count) },
                Some(layout) => self.apply_in_layout(function, layout, input, inout, count),
            },
            op => reduce_predefined(op, &self.info, input, inout, count),
        }
    }

    /// Call a user function on `count` elements at `input` and `inout`.
    ///
    /// # Safety
    /// Both must hold `count` elements laid out as the datatype says.
    unsafe fn call(
        &self,
        function: crate::op::UserFunction,
        input: *const u8,
        inout: *mut u8,
        count: usize,
    ) -> MpiResult<()> {
        let mut datatype = self.datatype_handle;
        match function {
            crate::op::UserFunction::Int(function) => {
                let mut length = i32::try_from(count).map_err(|_| {
                    crate::MpiError::new(
                        ErrorClass::Count,
                        format!(
                            "{count} elements exceed the int length of an MPI_User_function \
                             (at most {}); create the op with MPI_Op_create_c",
                            i32::MAX
                        ),
                    )
                })?;
                // SAFETY: by the caller's promise.
                unsafe { function(input as *mut _, inout.cast(), &mut length, &mut datatype) };
            }
            crate::op::UserFunction::Large(function) => {
                let mut length = count as std::ffi::c_long;
                // SAFETY: by the caller's promise.
                unsafe { function(input as *mut _, inout.cast(), &mut length, &mut datatype) };
            }
        }
        Ok(())
    }

    /// A user op on packed operands of a type with holes: unpack both into
    /// scratch memory laid out as the type, apply, pack the result back.
    fn apply_in_layout(
        &self,
        function: crate::op::UserFunction,
        layout: &crate::datatype::Datatype,
        input: &[u8],
        inout: &mut [u8],
        count: usize,
    ) -> MpiResult<()> {
        if count == 0 {
            return Ok(());
        }
        let extent_bytes = layout.extent_bytes();
        if extent_bytes <= 0 && count > 1 {
            return Err(crate::MpiError::new(
                ErrorClass::Type,
                "user-defined ops on datatypes with a non-positive extent are not supported",
            ));
        }
        // Element i's data lies in [i * extent + true_lb, i * extent + true_ub).
        let low_bytes = layout.true_lb_bytes;
        let high_bytes = (count as isize - 1) * extent_bytes.max(0) + layout.true_ub_bytes;
        let span_bytes = (high_bytes - low_bytes).max(0) as usize;
        let mut first = vec![0u8; span_bytes];
        let mut second = vec![0u8; span_bytes];
        // The address the type's offsets are relative to (may lie before the
        // scratch memory when the lower bound is positive; only offsets
        // inside it are touched).
        let input_base = first.as_mut_ptr().wrapping_offset(-low_bytes);
        let inout_base = second.as_mut_ptr().wrapping_offset(-low_bytes);
        // SAFETY: the scratch buffers cover every byte `count` elements of
        // the layout touch from these bases.
        unsafe {
            layout.unpack(input_base, count, 0, input);
            layout.unpack(inout_base, count, 0, inout);
            self.call(function, input_base, inout_base, count)?;
            layout.pack(inout_base, count, 0, inout);
        }
        Ok(())
    }

    /// Bytes of `count` elements.
    pub fn bytes(&self, count: usize) -> usize {
        count * self.info.extent_bytes
    }
}

/// One rank's part of a collective buffer: where it starts and how long it is.
#[derive(Clone, Copy, Debug)]
pub struct Block {
    /// First byte.
    pub data: *mut u8,
    /// Bytes.
    pub length_bytes: usize,
}

impl Block {
    /// Block `index` of `length_bytes` each, laid out back to back from `base`.
    pub fn uniform(base: *mut u8, length_bytes: usize, count: usize) -> Vec<Block> {
        (0..count)
            .map(|index| Block {
                data: base.wrapping_add(index * length_bytes),
                length_bytes,
            })
            .collect()
    }
}

/// A pointer for zero-byte messages.
fn nothing() -> *mut u8 {
    std::ptr::NonNull::dangling().as_ptr()
}

/// Largest power of two not above `value` (value >= 1).
fn power_of_two_floor(value: u32) -> u32 {
    1 << (31 - value.leading_zeros())
}

/// Split `count` elements into `parts` nearly equal runs: (first element, elements) each.
fn split(count: usize, parts: usize) -> Vec<(usize, usize)> {
    let (base, extra) = (count / parts, count % parts);
    let mut first = 0;
    (0..parts)
        .map(|part| {
            let elements = base + usize::from(part < extra);
            let run = (first, elements);
            first += elements;
            run
        })
        .collect()
}

impl Mpi {
    /// MPI_Barrier.
    pub fn barrier(&mut self, comm_index: usize) -> MpiResult<()> {
        let mut schedule = self.engine.new_schedule(comm_index)?;
        barrier(&mut schedule);
        self.engine.run_schedule(schedule)
    }

    /// MPI_Bcast of `buffer` from comm rank `root`.
    pub fn bcast(&mut self, comm_index: usize, buffer: &mut [u8], root: u32) -> MpiResult<()> {
        self.check_root(comm_index, root)?;
        let mut schedule = self.engine.new_schedule(comm_index)?;
        bcast(&mut schedule, buffer.as_mut_ptr(), buffer.len(), root);
        self.engine.run_schedule(schedule)
    }

    /// MPI_Reduce of `count` elements: the result lands in `result` at `root`.
    pub fn reduce(
        &mut self,
        comm_index: usize,
        input: &[u8],
        result: &mut [u8],
        count: usize,
        reduction: Reduction,
        root: u32,
    ) -> MpiResult<()> {
        self.check_root(comm_index, root)?;
        let mut schedule = self.engine.new_schedule(comm_index)?;
        schedule.reduction = Some(reduction);
        reduce(
            &mut schedule,
            input.as_ptr(),
            result.as_mut_ptr(),
            count,
            root,
        );
        self.engine.run_schedule(schedule)
    }

    /// MPI_Allreduce of `count` elements into `result`.
    pub fn allreduce(
        &mut self,
        comm_index: usize,
        input: &[u8],
        result: &mut [u8],
        count: usize,
        reduction: Reduction,
    ) -> MpiResult<()> {
        let mut schedule = self.engine.new_schedule(comm_index)?;
        schedule.reduction = Some(reduction);
        allreduce(&mut schedule, input.as_ptr(), result.as_mut_ptr(), count);
        self.engine.run_schedule(schedule)
    }

    /// Every rank's `mine` (all the same length), concatenated in rank order.
    pub fn allgather_bytes(&mut self, comm_index: usize, mine: &[u8]) -> MpiResult<Vec<u8>> {
        let size = self.comm(comm_index)?.size() as usize;
        let mut all = vec![0u8; mine.len() * size];
        let mut schedule = self.engine.new_schedule(comm_index)?;
        allgather(
            &mut schedule,
            Some(mine.as_ptr()),
            mine.len(),
            all.as_mut_ptr(),
        );
        self.engine.run_schedule(schedule)?;
        Ok(all)
    }

    /// Maximum of one i64 over the communicator (context agreement).
    pub fn allreduce_i64_max(&mut self, comm_index: usize, value: i64) -> MpiResult<i64> {
        let reduction = Reduction {
            op: Op::Max,
            info: TypeInfo::basic(8, crate::datatype::BasicKind::I64),
            datatype_handle: 0,
            layout: None,
        };
        let mut result = [0u8; 8];
        self.allreduce(comm_index, &value.to_ne_bytes(), &mut result, 1, reduction)?;
        Ok(i64::from_ne_bytes(result))
    }

    fn check_root(&self, comm_index: usize, root: u32) -> MpiResult<()> {
        let size = self.comm(comm_index)?.size();
        if root >= size {
            return crate::fail(
                ErrorClass::Root,
                format!("root {root} is out of range (communicator size {size})"),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_spreads_the_remainder_over_the_first_parts() {
        assert_eq!(split(10, 4), vec![(0, 3), (3, 3), (6, 2), (8, 2)]);
        assert_eq!(split(2, 3), vec![(0, 1), (1, 1), (2, 0)]);
    }

    #[test]
    fn power_of_two_floor_of_small_values() {
        assert_eq!(power_of_two_floor(1), 1);
        assert_eq!(power_of_two_floor(5), 4);
        assert_eq!(power_of_two_floor(8), 8);
    }
}
