//! Communicators: an ordered group of world ranks plus two context ids, one
//! for point-to-point traffic and one (`context + 1`) for collectives, so
//! the two never match each other.

use std::sync::Arc;

/// Context id of MPI_COMM_WORLD (its collective context is +1).
pub const WORLD_CONTEXT: u32 = 0;
/// Context id of MPI_COMM_SELF.
pub const SELF_CONTEXT: u32 = 2;
/// First context id available to new communicators.
pub const FIRST_FREE_CONTEXT: u32 = 4;

/// An intra-communicator.
#[derive(Clone, Debug)]
pub struct Communicator {
    /// Point-to-point context id; collectives use `context + 1`.
    pub context: u32,
    /// World rank of each member, indexed by communicator rank.
    pub group: Arc<Vec<u32>>,
    /// This process's rank in the communicator.
    pub rank: u32,
    /// Error handler handle (the C layer's encoding).
    pub errhandler: i32,
    /// Name set with MPI_Comm_set_name.
    pub name: String,
    /// Collectives started on this communicator so far; every member
    /// counts the same, so it tags a collective's messages.
    pub collective_sequence: u32,
    /// True when communicator rank == world rank for every member.
    identity: bool,
}

impl Communicator {
    /// A communicator over `group` in which this process is `rank`.
    pub fn new(
        context: u32,
        group: Arc<Vec<u32>>,
        rank: u32,
        errhandler: i32,
        name: String,
    ) -> Communicator {
        let identity = group
            .iter()
            .enumerate()
            .all(|(index, world)| index as u32 == *world);
        Communicator {
            context,
            group,
            rank,
            errhandler,
            name,
            collective_sequence: 0,
            identity,
        }
    }

    /// Number of members.
    pub fn size(&self) -> u32 {
        self.group.len() as u32
    }

    /// Collective context id.
    pub fn collective_context(&self) -> u32 {
        self.context + 1
    }

    /// World rank of communicator rank `rank`.
    #[inline]
    pub fn world_rank(&self, rank: u32) -> u32 {
        self.group[rank as usize]
    }

    /// Communicator rank of world rank `world`, if a member.
    #[inline]
    pub fn comm_rank_of(&self, world: u32) -> Option<u32> {
        if self.identity {
            return (world < self.size()).then_some(world);
        }
        self.group
            .iter()
            .position(|member| *member == world)
            .map(|rank| rank as u32)
    }
}
