//! Allgather: Bruck's algorithm for small data (ceil(log2 n) rounds, any
//! n, one rotation at the end) and a ring for large data and for varying
//! block sizes (n-1 rounds, each link carries every block once).

use super::{Block, ALLGATHER_BRUCK_MAX_BYTES};
use crate::schedule::Schedule;

/// Allgather `block_bytes` per rank into `recv` (rank order). `send` None =
/// MPI_IN_PLACE (this rank's block is already in `recv`).
pub fn allgather(
    schedule: &mut Schedule,
    send: Option<*const u8>,
    block_bytes: usize,
    recv: *mut u8,
) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let own_slot = recv.wrapping_add(rank as usize * block_bytes);
    if size == 1 || block_bytes == 0 {
        if let Some(send) = send {
            schedule.copy(send, own_slot, block_bytes);
        }
        return;
    }
    if block_bytes * size as usize <= ALLGATHER_BRUCK_MAX_BYTES {
        bruck(schedule, send.unwrap_or(own_slot), block_bytes, recv);
    } else {
        if let Some(send) = send {
            schedule.copy(send, own_slot, block_bytes);
        }
        ring(schedule, &Block::uniform(recv, block_bytes, size as usize));
    }
}

/// Allgather with one block per rank (`blocks[i]` receives rank i's data;
/// `blocks[rank]` is where `send`, if any, is copied).
pub fn allgatherv(schedule: &mut Schedule, send: Option<*const u8>, blocks: &[Block]) {
    let rank = schedule.rank as usize;
    if let Some(send) = send {
        schedule.copy(send, blocks[rank].data, blocks[rank].length_bytes);
    }
    if schedule.size() > 1 {
        ring(schedule, blocks);
    }
}

/// Ring allgather: every rank starts with its own block in place and in
/// round k passes on the block it received in round k-1.
pub(super) fn ring(schedule: &mut Schedule, blocks: &[Block]) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let (left, right) = ((rank + size - 1) % size, (rank + 1) % size);
    for step in 0..size - 1 {
        let outgoing = blocks[((rank + size - step) % size) as usize];
        let arriving = blocks[((rank + 2 * size - step - 1) % size) as usize];
        schedule.receive(left, arriving.data, arriving.length_bytes);
        schedule.send(right, outgoing.data, outgoing.length_bytes);
        schedule.fence();
    }
}

/// Bruck: a temporary holds the blocks of ranks rank, rank+1, ... in
/// order; round k sends the first min(2^k, n-2^k) of them to rank-2^k and
/// appends as many from rank+2^k. A final rotation puts them in rank order.
fn bruck(schedule: &mut Schedule, own: *const u8, block_bytes: usize, recv: *mut u8) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let gathered = schedule.temporary(size as usize * block_bytes);
    schedule.copy(own, gathered, block_bytes);
    let mut distance = 1;
    while distance < size {
        let blocks = distance.min(size - distance) as usize;
        schedule.receive(
            (rank + distance) % size,
            gathered.wrapping_add(distance as usize * block_bytes),
            blocks * block_bytes,
        );
        schedule.send(
            (rank + size - distance) % size,
            gathered,
            blocks * block_bytes,
        );
        schedule.fence();
        distance *= 2;
    }
    for index in 0..size {
        schedule.copy(
            gathered.wrapping_add(index as usize * block_bytes),
            recv.wrapping_add(((rank + index) % size) as usize * block_bytes),
            block_bytes,
        );
    }
}
