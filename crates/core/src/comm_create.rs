//! Communicators made from groups (MPI_Comm_create, MPI_Comm_create_group)
//! and by host (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED).
//!
//! A context id must be unused by every member of the new communicator.
//! Comm_create agrees on it over the whole parent, as MPI_Comm_dup does.
//! Comm_create_group may only involve the group's members, so they agree
//! over a short-lived communicator of their own whose context is the
//! parent's with the top bit set: ordinary contexts never reach that bit,
//! and all members create in the same order, so MPI's ordering keeps
//! successive creations on one parent apart. MPI_Comm_create_from_group has
//! no parent: its string tag stands in for the parent's context.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::comm::Communicator;
use crate::error::{fail, ErrorClass, MpiResult};
use crate::Mpi;

/// Marks the context of the temporary communicator of MPI_Comm_create_group.
const GROUP_CREATION_CONTEXT_BIT: u32 = 1 << 31;
/// With the bit above: a temporary of MPI_Comm_create_from_group, whose
/// other bits come from its string tag (ordinary contexts stay far below).
const FROM_GROUP_CONTEXT_BIT: u32 = 1 << 30;

impl Mpi {
    fn check_subgroup(&self, parent: &Communicator, members: &[u32]) -> MpiResult<()> {
        if parent.is_inter() {
            return fail(
                ErrorClass::Comm,
                "MPI_Comm_create_group needs an intra-communicator",
            );
        }
        if let Some(outsider) = members
            .iter()
            .find(|world| parent.local_rank_of(**world).is_none())
        {
            return fail(
                ErrorClass::Group,
                format!("process {outsider} of the group is not in the communicator"),
            );
        }
        Ok(())
    }

    /// MPI_Comm_create: collective over `comm_index`; members of `members`
    /// (world ranks, in the new rank order) get the new communicator,
    /// others None. Disjoint groups on different processes (MPI-2.2) get
    /// disjoint communicators sharing a context id, which is safe because
    /// their members differ.
    pub fn comm_create(&mut self, comm_index: usize, members: &[u32]) -> MpiResult<Option<usize>> {
        let parent = self.comm(comm_index)?.clone();
        if parent.is_inter() {
            return self.intercomm_create_from_group(comm_index, members);
        }
        // Agree first, so a process with a bad group does not leave the
        // others waiting.
        let checked = self.check_subgroup(&parent, members);
        let context = self.agree_context(comm_index)?;
        checked?;
        let me = self.rank();
        let Some(rank) = members.iter().position(|world| *world == me) else {
            return Ok(None);
        };
        let comm = Communicator::new(
            context,
            Arc::new(members.to_vec()),
            rank as u32,
            parent.errhandler,
            String::new(),
        );
        Ok(Some(self.add_comm(comm)))
    }

    /// MPI_Comm_create_group: collective over the members only.
    pub fn comm_create_group(&mut self, comm_index: usize, members: &[u32]) -> MpiResult<usize> {
        let parent = self.comm(comm_index)?.clone();
        self.check_subgroup(&parent, members)?;
        self.create_among(
            members,
            parent.context | GROUP_CREATION_CONTEXT_BIT,
            parent.errhandler,
        )
    }

    /// MPI_Comm_create_from_group (MPI-4, world model): like
    /// Comm_create_group with no parent; `tag` (the string tag) keeps
    /// creations by overlapping groups apart, as the parent's context does
    /// for Comm_create_group.
    pub fn comm_create_from_group(
        &mut self,
        members: &[u32],
        tag: &str,
        errhandler: i32,
    ) -> MpiResult<usize> {
        if let Some(outsider) = members.iter().find(|world| **world >= self.size()) {
            return fail(
                ErrorClass::Group,
                format!("process {outsider} of the group is not in MPI_COMM_WORLD"),
            );
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        tag.hash(&mut hasher);
        let tag_context =
            (hasher.finish() as u32) & !(GROUP_CREATION_CONTEXT_BIT | FROM_GROUP_CONTEXT_BIT);
        self.create_among(
            members,
            GROUP_CREATION_CONTEXT_BIT | FROM_GROUP_CONTEXT_BIT | tag_context,
            errhandler,
        )
    }

    /// A communicator of `members` (this process among them), its context
    /// agreed over a temporary communicator with context `temporary_context`.
    fn create_among(
        &mut self,
        members: &[u32],
        temporary_context: u32,
        errhandler: i32,
    ) -> MpiResult<usize> {
        let me = self.rank();
        let Some(rank) = members.iter().position(|world| *world == me) else {
            return fail(
                ErrorClass::Group,
                "a communicator is being created from a group by a process outside it",
            );
        };
        let temporary = self.add_comm(Communicator::new(
            temporary_context,
            Arc::new(members.to_vec()),
            rank as u32,
            errhandler,
            String::new(),
        ));
        let agreed = self.agree_context(temporary);
        self.engine.state.comms[temporary] = None;
        let comm = Communicator::new(
            agreed?,
            Arc::new(members.to_vec()),
            rank as u32,
            errhandler,
            String::new(),
        );
        Ok(self.add_comm(comm))
    }

    /// MPI_Comm_split_type with MPI_COMM_TYPE_SHARED: one communicator per
    /// host, ordered by `key` then parent rank; a process passing
    /// MPI_UNDEFINED (`joins` false) takes part and gets None. On an
    /// inter-communicator each host's part of one group is paired with the
    /// same host's part of the other (the color is the host's, the same in
    /// both groups).
    pub fn comm_split_shared(
        &mut self,
        comm_index: usize,
        joins: bool,
        key: i32,
    ) -> MpiResult<Option<usize>> {
        const UNDEFINED: i32 = i32::MIN;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        crate::wireup::host_key(&self.config).hash(&mut hasher);
        let host = hasher.finish();
        if self.comm(comm_index)?.is_inter() {
            let color = if joins {
                (host & 0x7fff_ffff) as i32
            } else {
                UNDEFINED
            };
            return self.comm_split(comm_index, color, key, UNDEFINED);
        }
        let all = self.allgather_bytes(comm_index, &host.to_ne_bytes())?;
        let color = all
            .chunks_exact(8)
            .position(|chunk| chunk == host.to_ne_bytes())
            .expect("own host is in the list");
        let color = if joins { color as i32 } else { UNDEFINED };
        self.comm_split(comm_index, color, key, UNDEFINED)
    }
}
