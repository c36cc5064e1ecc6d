//! Rooted collectives and the barrier: binomial trees for small data
//! (log2 n rounds), direct exchange with the root or scatter + ring for
//! large data (the root's link is the bottleneck either way, and the tree
//! would copy everything log2 n times).
//!
//! Trees work in "relative" ranks (`(rank - root) mod size`), so the root is
//! 0 and the same shapes serve every root.

use super::{nothing, Block, BCAST_SCATTER_MIN_BYTES, GATHER_TREE_MAX_BYTES};
use crate::schedule::Schedule;

/// Communicator rank of relative rank `relative`.
fn real(relative: u32, root: u32, size: u32) -> u32 {
    (relative + root) % size
}

/// Ranks in the binomial subtree rooted at relative rank `relative`.
fn subtree_ranks(relative: u32, size: u32) -> u32 {
    if relative == 0 {
        return size;
    }
    (relative & relative.wrapping_neg()).min(size - relative)
}

/// Dissemination barrier: ceil(log2 n) rounds of zero-byte messages.
pub fn barrier(schedule: &mut Schedule) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let mut distance = 1;
    while distance < size {
        schedule.receive((rank + size - distance) % size, nothing(), 0);
        schedule.send((rank + distance) % size, nothing(), 0);
        schedule.fence();
        distance *= 2;
    }
}

/// Broadcast `length_bytes` at `buffer` from `root`.
pub fn bcast(schedule: &mut Schedule, buffer: *mut u8, length_bytes: usize, root: u32) {
    let size = schedule.size();
    if size == 1 || length_bytes == 0 {
        return;
    }
    if length_bytes >= BCAST_SCATTER_MIN_BYTES && size >= 3 {
        bcast_scatter_ring(schedule, buffer, length_bytes, root);
    } else {
        bcast_binomial(schedule, buffer, length_bytes, root);
    }
}

fn bcast_binomial(schedule: &mut Schedule, buffer: *mut u8, length_bytes: usize, root: u32) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let relative = (rank + size - root) % size;
    let mut mask = 1;
    while mask < size {
        if relative & mask != 0 {
            schedule.receive(real(relative - mask, root, size), buffer, length_bytes);
            schedule.fence();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if relative + mask < size {
            schedule.send(real(relative + mask, root, size), buffer, length_bytes);
        }
        mask >>= 1;
    }
    schedule.fence();
}

/// Van de Geijn's broadcast: binomial scatter of `size` chunks, then a
/// ring allgather of the chunks.
fn bcast_scatter_ring(schedule: &mut Schedule, buffer: *mut u8, length_bytes: usize, root: u32) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let relative = (rank + size - root) % size;
    let chunk_bytes = length_bytes.div_ceil(size as usize);
    // Bytes of chunks [first, end) (relative ranks), clipped to the buffer.
    let span = |first: u32, end: u32| {
        let start = (first as usize * chunk_bytes).min(length_bytes);
        let stop = (end.min(size) as usize * chunk_bytes).min(length_bytes);
        (buffer.wrapping_add(start), stop - start)
    };
    let mut mask = 1;
    while mask < size {
        if relative & mask != 0 {
            let (data, bytes) = span(relative, relative + mask);
            schedule.receive(real(relative - mask, root, size), data, bytes);
            schedule.fence();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if relative + mask < size {
            let (data, bytes) = span(relative + mask, relative + 2 * mask);
            schedule.send(real(relative + mask, root, size), data, bytes);
        }
        mask >>= 1;
    }
    schedule.fence();
    let (left, right) = (
        real((relative + size - 1) % size, root, size),
        real((relative + 1) % size, root, size),
    );
    for step in 0..size - 1 {
        let outgoing = (relative + size - step) % size;
        let incoming = (relative + 2 * size - step - 1) % size;
        let (send_data, send_bytes) = span(outgoing, outgoing + 1);
        let (receive_data, receive_bytes) = span(incoming, incoming + 1);
        schedule.receive(left, receive_data, receive_bytes);
        schedule.send(right, send_data, send_bytes);
        schedule.fence();
    }
}

/// Reduce `count` elements from `send` into `recv` at `root` (`send ==
/// recv` at the root means MPI_IN_PLACE; `recv` matters only at the root).
/// Commutative ops use a binomial tree toward the root; other ops a
/// binomial tree toward rank 0 that keeps rank order, then one message to
/// the root.
pub fn reduce(schedule: &mut Schedule, send: *const u8, recv: *mut u8, count: usize, root: u32) {
    let reduction = schedule
        .reduction
        .clone()
        .expect("reduce needs a reduction");
    let (size, rank) = (schedule.size(), schedule.rank);
    let bytes = reduction.bytes(count);
    if count == 0 {
        return;
    }
    if size == 1 {
        schedule.copy(send, recv, bytes);
        return;
    }
    let commutative = reduction.op.is_commutative();
    let tree_root = if commutative { root } else { 0 };
    let relative = (rank + size - tree_root) % size;
    let has_children = relative % 2 == 0 && relative + 1 < size;
    let result_here = rank == tree_root;
    // The running result: the caller's receive buffer at the tree root when
    // the op lets us combine in place, else a temporary.
    let accumulator = if !has_children {
        send as *mut u8
    } else if result_here && commutative {
        schedule.copy(send, recv, bytes);
        recv
    } else {
        let accumulator = schedule.temporary(bytes);
        schedule.copy(send, accumulator, bytes);
        accumulator
    };
    let mut accumulator = accumulator;
    let mut incoming = if has_children {
        schedule.temporary(bytes)
    } else {
        nothing()
    };
    let mut mask = 1;
    while mask < size {
        if relative & mask == 0 {
            let child = relative | mask;
            if child < size {
                schedule.receive(real(child, tree_root, size), incoming, bytes);
                schedule.fence();
                if commutative {
                    schedule.reduce(incoming, accumulator, count);
                } else {
                    // The child's ranks follow ours: accumulator op incoming.
                    schedule.reduce(accumulator, incoming, count);
                    std::mem::swap(&mut accumulator, &mut incoming);
                }
            }
        } else {
            schedule.send(real(relative - mask, tree_root, size), accumulator, bytes);
            schedule.fence();
            break;
        }
        mask <<= 1;
    }
    if result_here && rank == root {
        schedule.copy(accumulator, recv, bytes);
    } else if result_here {
        schedule.send(root, accumulator, bytes);
    } else if rank == root {
        schedule.receive(tree_root, recv, bytes);
    }
    schedule.fence();
}

/// Gather `block_bytes` from every rank into `recv` (rank order) at
/// `root`. `send` None = MPI_IN_PLACE at the root.
pub fn gather(
    schedule: &mut Schedule,
    send: Option<*const u8>,
    block_bytes: usize,
    recv: *mut u8,
    root: u32,
) {
    let size = schedule.size();
    if block_bytes * size as usize <= GATHER_TREE_MAX_BYTES && size > 2 {
        gather_binomial(schedule, send, block_bytes, recv, root);
    } else {
        let blocks = if schedule.rank == root {
            Block::uniform(recv, block_bytes, size as usize)
        } else {
            Vec::new()
        };
        let own = send.map(|data| Block {
            data: data as *mut u8,
            length_bytes: block_bytes,
        });
        gatherv(schedule, own, &blocks, root);
    }
}

fn gather_binomial(
    schedule: &mut Schedule,
    send: Option<*const u8>,
    block_bytes: usize,
    recv: *mut u8,
    root: u32,
) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let relative = (rank + size - root) % size;
    let subtree = subtree_ranks(relative, size) as usize;
    // Blocks of this subtree in relative order; at root 0 that is the result.
    let collected = if rank == root && root == 0 {
        recv
    } else if subtree == 1 {
        send.expect("only the root gathers in place") as *mut u8
    } else {
        schedule.temporary(subtree * block_bytes)
    };
    let own = send.unwrap_or(recv.wrapping_add(rank as usize * block_bytes));
    schedule.copy(own, collected, block_bytes);
    let mut mask = 1;
    while mask < size {
        if relative & mask == 0 {
            let child = relative | mask;
            if child < size {
                let bytes = subtree_ranks(child, size) as usize * block_bytes;
                schedule.receive(
                    real(child, root, size),
                    collected.wrapping_add(mask as usize * block_bytes),
                    bytes,
                );
            }
        } else {
            schedule.fence();
            schedule.send(
                real(relative - mask, root, size),
                collected,
                subtree * block_bytes,
            );
            break;
        }
        mask <<= 1;
    }
    schedule.fence();
    if rank == root && collected != recv {
        for index in 0..size {
            schedule.copy(
                collected.wrapping_add(index as usize * block_bytes),
                recv.wrapping_add(real(index, root, size) as usize * block_bytes),
                block_bytes,
            );
        }
    }
}

/// Gather with a block per rank (`blocks`, only at the root): every rank
/// sends straight to the root. `own` None = MPI_IN_PLACE at the root.
pub fn gatherv(schedule: &mut Schedule, own: Option<Block>, blocks: &[Block], root: u32) {
    let rank = schedule.rank;
    if rank != root {
        let own = own.expect("non-roots always send");
        schedule.send(root, own.data, own.length_bytes);
    } else {
        for (peer, block) in blocks.iter().enumerate() {
            if peer as u32 != root {
                schedule.receive(peer as u32, block.data, block.length_bytes);
            }
        }
        if let Some(own) = own {
            let target = blocks[root as usize];
            schedule.copy(own.data, target.data, own.length_bytes);
        }
    }
    schedule.fence();
}

/// Scatter `block_bytes` per rank from `send` at `root`. `recv` None =
/// MPI_IN_PLACE at the root.
pub fn scatter(
    schedule: &mut Schedule,
    send: *const u8,
    block_bytes: usize,
    recv: Option<*mut u8>,
    root: u32,
) {
    let size = schedule.size();
    if block_bytes * size as usize <= GATHER_TREE_MAX_BYTES && size > 2 {
        scatter_binomial(schedule, send, block_bytes, recv, root);
    } else {
        let blocks = if schedule.rank == root {
            Block::uniform(send as *mut u8, block_bytes, size as usize)
        } else {
            Vec::new()
        };
        let own = recv.map(|data| Block {
            data,
            length_bytes: block_bytes,
        });
        scatterv(schedule, &blocks, own, root);
    }
}

fn scatter_binomial(
    schedule: &mut Schedule,
    send: *const u8,
    block_bytes: usize,
    recv: Option<*mut u8>,
    root: u32,
) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let relative = (rank + size - root) % size;
    let subtree = subtree_ranks(relative, size) as usize;
    let mut mask;
    // Blocks of this subtree in relative order.
    let held = if relative == 0 {
        mask = super::power_of_two_floor(size);
        if mask == size {
            mask >>= 1;
        }
        if root == 0 {
            send as *mut u8
        } else {
            let rotated = schedule.temporary(size as usize * block_bytes);
            for index in 0..size {
                schedule.copy(
                    send.wrapping_add(real(index, root, size) as usize * block_bytes),
                    rotated.wrapping_add(index as usize * block_bytes),
                    block_bytes,
                );
            }
            rotated
        }
    } else {
        mask = relative & relative.wrapping_neg();
        let held = if subtree == 1 {
            recv.expect("non-roots always receive")
        } else {
            schedule.temporary(subtree * block_bytes)
        };
        schedule.receive(
            real(relative - mask, root, size),
            held,
            subtree * block_bytes,
        );
        schedule.fence();
        mask >>= 1;
        held
    };
    while mask > 0 {
        let child = relative + mask;
        if child < size {
            schedule.send(
                real(child, root, size),
                held.wrapping_add(mask as usize * block_bytes),
                subtree_ranks(child, size) as usize * block_bytes,
            );
        }
        mask >>= 1;
    }
    if let Some(recv) = recv {
        if relative == 0 {
            schedule.copy(
                send.wrapping_add(rank as usize * block_bytes),
                recv,
                block_bytes,
            );
        } else {
            schedule.copy(held, recv, block_bytes);
        }
    }
    schedule.fence();
}

/// Scatter with a block per rank (`blocks`, only at the root), straight
/// from the root. `own` None = MPI_IN_PLACE at the root.
pub fn scatterv(schedule: &mut Schedule, blocks: &[Block], own: Option<Block>, root: u32) {
    let rank = schedule.rank;
    if rank != root {
        let own = own.expect("non-roots always receive");
        schedule.receive(root, own.data, own.length_bytes);
    } else {
        for (peer, block) in blocks.iter().enumerate() {
            if peer as u32 != root {
                schedule.send(peer as u32, block.data, block.length_bytes);
            }
        }
        if let Some(own) = own {
            let source = blocks[root as usize];
            schedule.copy(source.data, own.data, own.length_bytes);
        }
    }
    schedule.fence();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_subtrees_partition_the_ranks() {
        for size in 1..20u32 {
            // Every non-root rank belongs to exactly one child subtree of its parent.
            let total: u32 = (1..size)
                .filter(|relative| {
                    let parent = relative - (relative & relative.wrapping_neg());
                    parent == 0
                })
                .map(|relative| subtree_ranks(relative, size))
                .sum();
            assert_eq!(total + 1, size, "size {size}");
        }
    }
}
