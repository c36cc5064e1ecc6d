//! Alltoall in all its forms (uniform, v, w reduce to one block per peer
//! each way). Small exchanges post every message at once (one round, the
//! eager protocol carries them); large ones go pairwise, rank+k / rank-k in
//! round k, so each rank has one message in and one out at a time.
//!
//! There is exactly one message per ordered pair of ranks, so each rank may
//! pick its algorithm from its own sizes (Alltoallv sizes differ by rank).

use super::{Block, ALLTOALL_SCATTERED_MAX_BYTES};
use crate::schedule::Schedule;

/// Send `sends[i]` to rank i and receive rank i's data into `recvs[i]`.
/// `sends` None = MPI_IN_PLACE: `recvs` hold the outgoing data too.
pub fn alltoallw(schedule: &mut Schedule, sends: Option<&[Block]>, recvs: &[Block]) {
    let (size, rank) = (schedule.size(), schedule.rank);
    let staged;
    let sends = match sends {
        Some(sends) => sends,
        None => {
            // In place: copy what goes out before anything arrives.
            let total: usize = recvs.iter().map(|block| block.length_bytes).sum();
            let copy = schedule.temporary(total);
            let mut offset = 0;
            let mut blocks = Vec::with_capacity(recvs.len());
            for block in recvs {
                let data = copy.wrapping_add(offset);
                schedule.copy(block.data, data, block.length_bytes);
                blocks.push(Block {
                    data,
                    length_bytes: block.length_bytes,
                });
                offset += block.length_bytes;
            }
            staged = blocks;
            &staged[..]
        }
    };
    let own = rank as usize;
    schedule.copy(
        sends[own].data,
        recvs[own].data,
        sends[own].length_bytes.min(recvs[own].length_bytes),
    );
    let outgoing_bytes: usize = sends.iter().map(|block| block.length_bytes).sum();
    let scattered = outgoing_bytes <= ALLTOALL_SCATTERED_MAX_BYTES;
    for step in 1..size {
        let to = (rank + step) % size;
        let from = (rank + size - step) % size;
        let (receive, send) = (recvs[from as usize], sends[to as usize]);
        schedule.receive(from, receive.data, receive.length_bytes);
        schedule.send(to, send.data, send.length_bytes);
        if !scattered {
            schedule.fence();
        }
    }
    schedule.fence();
}
