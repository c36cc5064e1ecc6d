//! Collectives on inter-communicators (MPI-4.1 §6.2.2): data flows from
//! one group to the other.
//!
//! One simple construction for all of them: steps within a group reuse the
//! intra-communicator algorithms over the local group with local rank 0 as
//! the leader, and data crosses between the groups either between the two
//! leaders or directly between the processes concerned (the rooted
//! gathers and scatters, the all-to-alls, Allgatherv). Everything is one
//! schedule in the inter-communicator's collective context, so the
//! nonblocking forms come with it; local and remote messages never match
//! each other because the two groups are disjoint.

use super::{nothing, tree, Block};
use crate::schedule::Schedule;

/// What a process is in a rooted inter-communicator collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterRoot {
    /// The root (MPI_ROOT).
    Here,
    /// Another member of the root's group (MPI_PROC_NULL): takes no part.
    Beside,
    /// A member of the other group; the root is this remote rank.
    Remote(u32),
}

/// Local rank of each group's leader.
const LEADER: u32 = 0;

/// No process of either group leaves before every process of both has
/// entered: a local barrier, the leaders swap a zero-byte message, and a
/// second local barrier releases the group once its leader has heard.
pub fn barrier(schedule: &mut Schedule) {
    tree::barrier(schedule);
    schedule.fence();
    if schedule.rank == LEADER {
        schedule.receive_remote(LEADER, nothing(), 0);
        schedule.send_remote(LEADER, nothing(), 0);
    }
    schedule.fence();
    tree::barrier(schedule);
    schedule.fence();
}

/// The root sends `buffer` to the remote leader, which broadcasts it to
/// its group.
pub fn bcast(schedule: &mut Schedule, buffer: *mut u8, length_bytes: usize, root: InterRoot) {
    match root {
        InterRoot::Here => schedule.send_remote(LEADER, buffer, length_bytes),
        InterRoot::Beside => {}
        InterRoot::Remote(root) => {
            if schedule.rank == LEADER {
                schedule.receive_remote(root, buffer, length_bytes);
                schedule.fence();
            }
            tree::bcast(schedule, buffer, length_bytes, LEADER);
        }
    }
    schedule.fence();
}

/// Spread `length_bytes` that local rank 0 of the *leading* group holds to
/// every process of both groups: the leading group broadcasts it, then its
/// leader sends it to the other group's leader, which broadcasts it there
/// (MPI_Comm_idup of an inter-communicator).
pub fn spread_from_leader(
    schedule: &mut Schedule,
    buffer: *mut u8,
    length_bytes: usize,
    leads: bool,
) {
    if leads {
        tree::bcast(schedule, buffer, length_bytes, LEADER);
        if schedule.rank == LEADER {
            schedule.send_remote(LEADER, buffer, length_bytes);
        }
    } else {
        if schedule.rank == LEADER {
            schedule.receive_remote(LEADER, buffer, length_bytes);
            schedule.fence();
        }
        tree::bcast(schedule, buffer, length_bytes, LEADER);
    }
    schedule.fence();
}

/// The other group reduces to its leader, which sends the result to the root.
pub fn reduce(
    schedule: &mut Schedule,
    send: *const u8,
    recv: *mut u8,
    count: usize,
    root: InterRoot,
) {
    if root == InterRoot::Beside {
        // Takes no part (and may have passed no valid op or datatype).
        schedule.fence();
        return;
    }
    let reduction = schedule
        .reduction
        .clone()
        .expect("reduce needs a reduction");
    let bytes = reduction.bytes(count);
    match root {
        InterRoot::Here => schedule.receive_remote(LEADER, recv, bytes),
        InterRoot::Beside => unreachable!("returned above"),
        InterRoot::Remote(root) => {
            let result = leader_temporary(schedule, bytes);
            tree::reduce(schedule, send, result, count, LEADER);
            schedule.fence();
            if schedule.rank == LEADER {
                schedule.send_remote(root, result, bytes);
            }
        }
    }
    schedule.fence();
}

/// Each group reduces to its leader; the leaders swap their results; each
/// leader broadcasts the other group's result to its group.
pub fn allreduce(schedule: &mut Schedule, send: *const u8, recv: *mut u8, count: usize) {
    let reduction = schedule
        .reduction
        .clone()
        .expect("allreduce needs a reduction");
    let bytes = reduction.bytes(count);
    let local_result = leader_temporary(schedule, bytes);
    tree::reduce(schedule, send, local_result, count, LEADER);
    schedule.fence();
    if schedule.rank == LEADER {
        schedule.receive_remote(LEADER, recv, bytes);
        schedule.send_remote(LEADER, local_result, bytes);
    }
    schedule.fence();
    tree::bcast(schedule, recv, bytes, LEADER);
    schedule.fence();
}

/// The root receives `blocks[i]` from remote rank i; the other group's
/// members each send `own`.
pub fn gatherv(schedule: &mut Schedule, own: Option<Block>, blocks: &[Block], root: InterRoot) {
    match root {
        InterRoot::Here => {
            for (peer, block) in blocks.iter().enumerate() {
                schedule.receive_remote(peer as u32, block.data, block.length_bytes);
            }
        }
        InterRoot::Beside => {}
        InterRoot::Remote(root) => {
            let own = own.expect("the other group always sends");
            schedule.send_remote(root, own.data, own.length_bytes);
        }
    }
    schedule.fence();
}

/// The root sends `blocks[i]` to remote rank i; the other group's members
/// each receive into `own`.
pub fn scatterv(schedule: &mut Schedule, blocks: &[Block], own: Option<Block>, root: InterRoot) {
    match root {
        InterRoot::Here => {
            for (peer, block) in blocks.iter().enumerate() {
                schedule.send_remote(peer as u32, block.data, block.length_bytes);
            }
        }
        InterRoot::Beside => {}
        InterRoot::Remote(root) => {
            let own = own.expect("the other group always receives");
            schedule.receive_remote(root, own.data, own.length_bytes);
        }
    }
    schedule.fence();
}

/// Each group gathers its blocks at its leader; the leaders swap them;
/// each leader broadcasts the other group's blocks. `recv` holds one block
/// of `recv_block_bytes` per remote rank.
pub fn allgather(
    schedule: &mut Schedule,
    send: *const u8,
    send_bytes: usize,
    recv: *mut u8,
    recv_block_bytes: usize,
) {
    let local_bytes = send_bytes * schedule.size() as usize;
    let remote_bytes = recv_block_bytes * schedule.remote_size() as usize;
    let gathered = leader_temporary(schedule, local_bytes);
    tree::gather(schedule, Some(send), send_bytes, gathered, LEADER);
    schedule.fence();
    if schedule.rank == LEADER {
        schedule.receive_remote(LEADER, recv, remote_bytes);
        schedule.send_remote(LEADER, gathered, local_bytes);
    }
    schedule.fence();
    tree::bcast(schedule, recv, remote_bytes, LEADER);
    schedule.fence();
}

/// Every process sends its data to every remote process and receives
/// remote rank i's into `blocks[i]`.
pub fn allgatherv(schedule: &mut Schedule, send: Block, blocks: &[Block]) {
    for (peer, block) in blocks.iter().enumerate() {
        schedule.receive_remote(peer as u32, block.data, block.length_bytes);
    }
    for peer in 0..schedule.remote_size() {
        schedule.send_remote(peer, send.data, send.length_bytes);
    }
    schedule.fence();
}

/// `sends[i]` goes to remote rank i, `recvs[i]` comes from it.
pub fn alltoallv(schedule: &mut Schedule, sends: &[Block], recvs: &[Block]) {
    for (peer, block) in recvs.iter().enumerate() {
        schedule.receive_remote(peer as u32, block.data, block.length_bytes);
    }
    for (peer, block) in sends.iter().enumerate() {
        schedule.send_remote(peer as u32, block.data, block.length_bytes);
    }
    schedule.fence();
}

/// Each group reduces its whole vector (the sum of `counts`, elements per
/// local rank) at its leader; the leaders swap the results; each leader
/// scatters the other group's result, `counts[i]` elements to local rank
/// i. MPI requires both groups' vectors to have the same length.
pub fn reduce_scatter(schedule: &mut Schedule, send: *const u8, recv: *mut u8, counts: &[usize]) {
    let reduction = schedule
        .reduction
        .clone()
        .expect("reduce_scatter needs a reduction");
    let total: usize = counts.iter().sum();
    let bytes = reduction.bytes(total);
    let local_result = leader_temporary(schedule, bytes);
    let remote_result = leader_temporary(schedule, bytes);
    tree::reduce(schedule, send, local_result, total, LEADER);
    schedule.fence();
    if schedule.rank == LEADER {
        schedule.receive_remote(LEADER, remote_result, bytes);
        schedule.send_remote(LEADER, local_result, bytes);
    }
    schedule.fence();
    let own = Block {
        data: recv,
        length_bytes: reduction.bytes(counts[schedule.rank as usize]),
    };
    let mut blocks = Vec::new();
    if schedule.rank == LEADER {
        let mut first = 0;
        for count in counts {
            blocks.push(Block {
                data: remote_result.wrapping_add(reduction.bytes(first)),
                length_bytes: reduction.bytes(*count),
            });
            first += count;
        }
    }
    tree::scatterv(schedule, &blocks, Some(own), LEADER);
    schedule.fence();
}

/// A temporary of `length_bytes` at the leader (where intra steps put a
/// result); other ranks get a pointer that is never used.
fn leader_temporary(schedule: &mut Schedule, length_bytes: usize) -> *mut u8 {
    if schedule.rank == LEADER {
        schedule.temporary(length_bytes)
    } else {
        nothing()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::Reduction;
    use crate::datatype::{BasicKind, TypeInfo};
    use crate::op::Op;
    use crate::schedule::Step;

    /// (peer, whether a remote rank) of one message.
    type Peer = (u32, bool);

    /// The peers of every send and receive of `schedule`.
    fn messages(schedule: &Schedule) -> (Vec<Peer>, Vec<Peer>) {
        let (mut sends, mut receives) = (Vec::new(), Vec::new());
        for step in schedule.steps() {
            match *step {
                Step::Send { peer, remote, .. } => sends.push((peer, remote)),
                Step::Receive { peer, remote, .. } => receives.push((peer, remote)),
                _ => {}
            }
        }
        (sends, receives)
    }

    fn sum() -> Reduction {
        Reduction {
            op: Op::Sum,
            info: TypeInfo::basic(4, BasicKind::I32),
            datatype_handle: 0,
            layout: None,
        }
    }

    #[test]
    fn only_the_leaders_cross_between_the_groups_in_allreduce() {
        for rank in 0..5 {
            let mut schedule = Schedule::detached(rank, 5, 3);
            schedule.reduction = Some(sum());
            let (send, mut recv) = ([0u8; 8], [0u8; 8]);
            allreduce(&mut schedule, send.as_ptr(), recv.as_mut_ptr(), 2);
            let (sends, receives) = messages(&schedule);
            let crossing = |list: &[Peer]| list.iter().filter(|(_, remote)| *remote).count();
            let expected = usize::from(rank == LEADER);
            assert_eq!(crossing(&sends), expected, "rank {rank}");
            assert_eq!(crossing(&receives), expected, "rank {rank}");
        }
    }

    #[test]
    fn bcast_root_sends_once_and_its_group_does_nothing() {
        let mut data = [0u8; 4];
        let buffer = data.as_mut_ptr();
        let mut root = Schedule::detached(2, 3, 4);
        bcast(&mut root, buffer, 4, InterRoot::Here);
        assert_eq!(messages(&root), (vec![(LEADER, true)], vec![]));
        let mut beside = Schedule::detached(1, 3, 4);
        bcast(&mut beside, buffer, 4, InterRoot::Beside);
        assert!(beside.steps().is_empty());
        let mut leader = Schedule::detached(0, 4, 3);
        bcast(&mut leader, buffer, 4, InterRoot::Remote(2));
        let (_, receives) = messages(&leader);
        assert_eq!(receives, vec![(2, true)]);
    }

    #[test]
    fn alltoallv_exchanges_one_block_with_every_remote_rank() {
        let mut data = [0u8; 12];
        let blocks = Block::uniform(data.as_mut_ptr(), 4, 3);
        let mut schedule = Schedule::detached(1, 2, 3);
        alltoallv(&mut schedule, &blocks, &blocks);
        let (sends, receives) = messages(&schedule);
        let every: Vec<Peer> = (0..3).map(|peer| (peer, true)).collect();
        assert_eq!(sends, every);
        assert_eq!(receives, every);
    }
}
