//! Reductions where every rank gets a result: Allreduce, Reduce_scatter,
//! Scan, Exscan.
//!
//! Operand order: MPI defines the result as x0 op x1 op ... in rank order,
//! and a `Reduce` step computes `inout = input op inout`, so wherever an op
//! may not commute the lower ranks' data is the `input`. Recursive doubling
//! keeps each rank's partial result a contiguous run of ranks, which is what
//! makes it valid for non-commutative ops; the ring algorithms are used only
//! for commutative ones.

use super::{
    power_of_two_floor, reduce, scatterv, split, Block, Reduction, ALLREDUCE_RING_MIN_BYTES,
};
use crate::schedule::Schedule;

fn reduction_of(schedule: &Schedule) -> Reduction {
    schedule
        .reduction
        .clone()
        .expect("reduction collectives carry a reduction")
}

/// Allreduce `count` elements from `send` into `recv` (`send == recv` is
/// MPI_IN_PLACE).
pub fn allreduce(schedule: &mut Schedule, send: *const u8, recv: *mut u8, count: usize) {
    let reduction = reduction_of(schedule);
    let size = schedule.size();
    let bytes = reduction.bytes(count);
    if count == 0 {
        return;
    }
    schedule.copy(send, recv, bytes);
    if size == 1 {
        return;
    }
    if reduction.op.is_commutative() && bytes >= ALLREDUCE_RING_MIN_BYTES && count >= size as usize
    {
        let chunks = split(count, size as usize);
        ring_reduce_scatter(schedule, recv, &chunks);
        ring_allgather_chunks(schedule, recv, &chunks);
    } else {
        allreduce_recursive_doubling(schedule, recv, count);
    }
}

/// Recursive doubling on the largest power of two of ranks; the first
/// `2 * remainder` ranks fold pairwise into it first and get the result
/// back at the end.
fn allreduce_recursive_doubling(schedule: &mut Schedule, result: *mut u8, count: usize) {
    let reduction = reduction_of(schedule);
    let (size, rank) = (schedule.size(), schedule.rank);
    let commutative = reduction.op.is_commutative();
    let bytes = reduction.bytes(count);
    let pof2 = power_of_two_floor(size);
    let remainder = size - pof2;
    let incoming = schedule.temporary(bytes);
    let new_rank = if rank < 2 * remainder {
        if rank % 2 == 0 {
            schedule.send(rank + 1, result, bytes);
            schedule.fence();
            None
        } else {
            schedule.receive(rank - 1, incoming, bytes);
            schedule.fence();
            schedule.reduce(incoming, result, count);
            Some(rank / 2)
        }
    } else {
        Some(rank - remainder)
    };
    if let Some(new_rank) = new_rank {
        let mut mask = 1;
        while mask < pof2 {
            let new_partner = new_rank ^ mask;
            let partner = if new_partner < remainder {
                new_partner * 2 + 1
            } else {
                new_partner + remainder
            };
            schedule.receive(partner, incoming, bytes);
            schedule.send(partner, result, bytes);
            schedule.fence();
            if partner < rank || commutative {
                schedule.reduce(incoming, result, count);
            } else {
                schedule.reduce(result, incoming, count);
                schedule.copy(incoming, result, bytes);
            }
            mask <<= 1;
        }
    }
    if rank < 2 * remainder {
        if rank % 2 == 0 {
            schedule.receive(rank + 1, result, bytes);
        } else {
            schedule.send(rank - 1, result, bytes);
        }
        schedule.fence();
    }
}

/// Ring reduce-scatter over `work` (the whole vector, this rank's data on
/// entry): afterwards chunk `rank` of `work` holds the reduction of every
/// rank's chunk. Commutative ops only.
fn ring_reduce_scatter(schedule: &mut Schedule, work: *mut u8, chunks: &[(usize, usize)]) {
    let reduction = reduction_of(schedule);
    let (size, rank) = (schedule.size(), schedule.rank);
    let largest = chunks
        .iter()
        .map(|(_, elements)| *elements)
        .max()
        .unwrap_or(0);
    let incoming = schedule.temporary(reduction.bytes(largest));
    let (left, right) = ((rank + size - 1) % size, (rank + 1) % size);
    let region = |chunk: u32| {
        let (first, elements) = chunks[chunk as usize];
        (work.wrapping_add(reduction.bytes(first)), elements)
    };
    for step in 0..size - 1 {
        let outgoing = (rank + 2 * size - step - 1) % size;
        let arriving = (rank + 2 * size - step - 2) % size;
        let (send_data, send_elements) = region(outgoing);
        let (target, arriving_elements) = region(arriving);
        schedule.receive(left, incoming, reduction.bytes(arriving_elements));
        schedule.send(right, send_data, reduction.bytes(send_elements));
        schedule.fence();
        schedule.reduce(incoming, target, arriving_elements);
    }
}

/// Ring allgather of chunk `rank` of `work` to every rank.
fn ring_allgather_chunks(schedule: &mut Schedule, work: *mut u8, chunks: &[(usize, usize)]) {
    let reduction = reduction_of(schedule);
    let blocks: Vec<Block> = chunks
        .iter()
        .map(|(first, elements)| Block {
            data: work.wrapping_add(reduction.bytes(*first)),
            length_bytes: reduction.bytes(*elements),
        })
        .collect();
    super::allgather::ring(schedule, &blocks);
}

/// Reduce_scatter: rank i gets the reduction of chunk i (`counts[i]`
/// elements, back to back in `send`) in `recv`. `send == recv` is
/// MPI_IN_PLACE (the input then fills `recv`).
pub fn reduce_scatter(schedule: &mut Schedule, send: *const u8, recv: *mut u8, counts: &[usize]) {
    let reduction = reduction_of(schedule);
    let (size, rank) = (schedule.size(), schedule.rank);
    let total: usize = counts.iter().sum();
    let mut chunks = Vec::with_capacity(counts.len());
    let mut first = 0;
    for count in counts {
        chunks.push((first, *count));
        first += count;
    }
    let (own_first, own_count) = chunks[rank as usize];
    if size == 1 || total == 0 {
        schedule.copy(
            send.wrapping_add(reduction.bytes(own_first)),
            recv,
            reduction.bytes(own_count),
        );
        return;
    }
    let work = schedule.temporary(reduction.bytes(total));
    if reduction.op.is_commutative() {
        schedule.copy(send, work, reduction.bytes(total));
        ring_reduce_scatter(schedule, work, &chunks);
        schedule.copy(
            work.wrapping_add(reduction.bytes(own_first)),
            recv,
            reduction.bytes(own_count),
        );
        return;
    }
    // Rank order matters: reduce to rank 0 in order, then scatter the chunks.
    reduce(schedule, send, work, total, 0);
    let blocks: Vec<Block> = chunks
        .iter()
        .map(|(first, elements)| Block {
            data: work.wrapping_add(reduction.bytes(*first)),
            length_bytes: reduction.bytes(*elements),
        })
        .collect();
    let own = Block {
        data: recv,
        length_bytes: reduction.bytes(own_count),
    };
    scatterv(schedule, &blocks, Some(own), 0);
}

/// Inclusive (Scan) or exclusive (Exscan) prefix reduction by recursive
/// doubling: `partial` holds the reduction of this rank's current block of
/// ranks, `recv` the prefix so far.
fn prefix(schedule: &mut Schedule, send: *const u8, recv: *mut u8, count: usize, inclusive: bool) {
    let reduction = reduction_of(schedule);
    let (size, rank) = (schedule.size(), schedule.rank);
    let bytes = reduction.bytes(count);
    if count == 0 {
        return;
    }
    let mut partial = schedule.temporary(bytes);
    schedule.copy(send, partial, bytes);
    if inclusive {
        schedule.copy(send, recv, bytes);
    }
    let mut incoming = schedule.temporary(bytes);
    let mut have_prefix = inclusive;
    let mut mask = 1;
    while mask < size {
        let partner = rank ^ mask;
        if partner < size {
            schedule.receive(partner, incoming, bytes);
            schedule.send(partner, partial, bytes);
            schedule.fence();
            if partner < rank {
                schedule.reduce(incoming, partial, count);
                if have_prefix {
                    schedule.reduce(incoming, recv, count);
                } else {
                    schedule.copy(incoming, recv, bytes);
                    have_prefix = true;
                }
            } else if reduction.op.is_commutative() {
                schedule.reduce(incoming, partial, count);
            } else {
                schedule.reduce(partial, incoming, count);
                std::mem::swap(&mut partial, &mut incoming);
            }
        }
        mask <<= 1;
    }
}

/// MPI_Scan (`send == recv` is MPI_IN_PLACE).
pub fn scan(schedule: &mut Schedule, send: *const u8, recv: *mut u8, count: usize) {
    prefix(schedule, send, recv, count, true);
}

/// MPI_Exscan (`send == recv` is MPI_IN_PLACE); rank 0's `recv` is untouched.
pub fn exscan(schedule: &mut Schedule, send: *const u8, recv: *mut u8, count: usize) {
    prefix(schedule, send, recv, count, false);
}
