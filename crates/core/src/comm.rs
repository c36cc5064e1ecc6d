//! Communicators: an ordered group of world ranks plus two context ids, one
//! for point-to-point traffic and one (`context + 1`) for collectives, so
//! the two never match each other.
//!
//! An inter-communicator also holds the remote group: point-to-point ranks
//! name members of the remote group, while size and rank describe the local
//! one. Its collective context carries its collectives (`coll::inter`) and
//! the leaders' internal exchanges of merge and dup; their work over the
//! local group (context agreement, broadcasts) runs on a hidden
//! intra-communicator.

use std::sync::Arc;

use crate::topology::Topology;

/// Context id of MPI_COMM_WORLD (its collective context is +1).
pub const WORLD_CONTEXT: u32 = 0;
/// Context id of MPI_COMM_SELF.
pub const SELF_CONTEXT: u32 = 2;
/// First context id available to new communicators.
pub const FIRST_FREE_CONTEXT: u32 = 4;

/// The remote side of an inter-communicator.
#[derive(Clone, Debug)]
pub struct RemoteSide {
    /// World rank of each remote member, indexed by remote rank.
    pub group: Arc<Vec<u32>>,
    /// Table index of the hidden intra-communicator over the local group.
    pub local_comm: usize,
}

/// An intra- or inter-communicator.
#[derive(Clone, Debug)]
pub struct Communicator {
    /// Point-to-point context id; collectives use `context + 1`.
    pub context: u32,
    /// World rank of each member, indexed by communicator rank (the local
    /// group of an inter-communicator).
    pub group: Arc<Vec<u32>>,
    /// This process's rank in the communicator.
    pub rank: u32,
    /// Error handler handle (the C layer's encoding).
    pub errhandler: i32,
    /// Name set with MPI_Comm_set_name.
    pub name: String,
    /// Present on inter-communicators.
    pub remote: Option<RemoteSide>,
    /// Cartesian, graph or distributed-graph topology, if any.
    pub topology: Option<Arc<Topology>>,
    /// Collectives started on this communicator so far; every member
    /// counts the same, so it tags a collective's messages.
    pub collective_sequence: u32,
    /// Blocking collectives run on the shared-memory fast path so far
    /// (`coll::shared_memory`); every member counts the same, so it tags
    /// their contributions.
    pub shared_memory_sequence: u64,
    /// Whether every member is reached over shared memory with its
    /// collective area mapped (`coll::shared_memory`), once the fast path
    /// has asked: the group never changes, and the routes only when a peer
    /// re-joins, which clears this (`Engine::handle_peer_rejoin`).
    pub members_on_shared_memory: Option<bool>,
    /// ULFM: revoked (`MPIX_Comm_revoke` here or a revoke flood from a
    /// member); every operation but agree, shrink and the failure queries
    /// then fails with `MPIX_ERR_REVOKED`.
    pub revoked: bool,
    /// ULFM: world ranks of the failed members acknowledged with
    /// `MPIX_Comm_failure_ack` (wildcard receives proceed despite them).
    pub acknowledged_failures: Vec<u32>,
    /// ULFM: agreements (agree, shrink) run on this communicator so far;
    /// every member counts the same, so it names the next one.
    pub agreement_sequence: u32,
    /// True when peer rank == world rank for every peer.
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
        let identity = is_identity(&group);
        Communicator {
            context,
            group,
            rank,
            errhandler,
            name,
            remote: None,
            topology: None,
            collective_sequence: 0,
            shared_memory_sequence: 0,
            members_on_shared_memory: None,
            revoked: false,
            acknowledged_failures: Vec::new(),
            agreement_sequence: 0,
            identity,
        }
    }

    /// Make this an inter-communicator whose peers are `remote.group`.
    pub fn with_remote(mut self, remote: RemoteSide) -> Communicator {
        self.identity = is_identity(&remote.group);
        self.remote = Some(remote);
        self
    }

    /// Attach a topology.
    pub fn with_topology(mut self, topology: Topology) -> Communicator {
        self.topology = Some(Arc::new(topology));
        self
    }

    /// Whether this is an inter-communicator.
    pub fn is_inter(&self) -> bool {
        self.remote.is_some()
    }

    /// Number of members (of the local group).
    pub fn size(&self) -> u32 {
        self.group.len() as u32
    }

    /// The group point-to-point ranks refer to: the remote group of an
    /// inter-communicator, the group itself otherwise.
    #[inline]
    pub fn peer_group(&self) -> &Arc<Vec<u32>> {
        self.remote
            .as_ref()
            .map_or(&self.group, |remote| &remote.group)
    }

    /// World ranks of every process in it: the group, then the remote
    /// group of an inter-communicator.
    pub fn members(&self) -> impl Iterator<Item = &u32> {
        self.group
            .iter()
            .chain(self.remote.iter().flat_map(|remote| remote.group.iter()))
    }

    /// Number of ranks a point-to-point call may name.
    #[inline]
    pub fn peer_count(&self) -> u32 {
        self.peer_group().len() as u32
    }

    /// Collective context id.
    pub fn collective_context(&self) -> u32 {
        self.context + 1
    }

    /// World rank of communicator rank `rank` (local group).
    #[inline]
    pub fn world_rank(&self, rank: u32) -> u32 {
        self.group[rank as usize]
    }

    /// World rank of point-to-point rank `rank` (the remote group of an
    /// inter-communicator).
    #[inline]
    pub fn peer_world_rank(&self, rank: u32) -> u32 {
        self.peer_group()[rank as usize]
    }

    /// Rank by which a point-to-point call names world rank `world` (what a
    /// receive status reports as MPI_SOURCE): its position in the remote
    /// group of an inter-communicator, in the group otherwise.
    #[inline]
    pub fn comm_rank_of(&self, world: u32) -> Option<u32> {
        if self.identity {
            return (world < self.peer_count()).then_some(world);
        }
        self.peer_group()
            .iter()
            .position(|member| *member == world)
            .map(|rank| rank as u32)
    }

    /// Local-group rank of world rank `world`, if a member.
    pub fn local_rank_of(&self, world: u32) -> Option<u32> {
        self.group
            .iter()
            .position(|member| *member == world)
            .map(|rank| rank as u32)
    }
}

fn is_identity(group: &[u32]) -> bool {
    group
        .iter()
        .enumerate()
        .all(|(index, world)| index as u32 == *world)
}
