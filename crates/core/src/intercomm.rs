//! Inter-communicators: MPI_Intercomm_create, MPI_Intercomm_merge, and
//! MPI_Comm_dup, MPI_Comm_split and MPI_Comm_create of an
//! inter-communicator.
//!
//! Every agreement follows one pattern: each group agrees among itself over
//! its hidden local intra-communicator (or the user's local communicator at
//! creation), the two leaders (local rank 0 of each group) swap what their
//! groups agreed over the inter-communicator's collective context, and each
//! leader broadcasts the answer to its group. An inter-communicator takes
//! four context ids: `context` for point-to-point, `context + 1` for the
//! leaders' exchanges, and `context + 2` (+3) for the hidden local
//! intra-communicator.

use std::sync::Arc;

use crate::comm::{Communicator, RemoteSide};
use crate::engine::Destination;
use crate::error::{fail, ErrorClass, MpiResult};
use crate::request::SendMode;
use crate::Mpi;

/// Context ids an inter-communicator takes.
pub(crate) const INTERCOMM_CONTEXT_SPAN: u32 = 4;
/// Tag of the leaders' exchange during MPI_Intercomm_merge / dup: above
/// every collective sequence tag, so that it never matches a message of a
/// collective on the inter-communicator still in flight.
const LEADER_EXCHANGE_TAG: i32 = crate::schedule::SEQUENCE_TAG_MODULUS as i32;

impl Mpi {
    /// Send `outgoing` to and receive `incoming` from world rank `peer` on
    /// (`context`, `tag`), both at once so two leaders cannot deadlock.
    fn swap_with(
        &mut self,
        comm_index: usize,
        peer: u32,
        context: u32,
        tag: i32,
        outgoing: &[u8],
        incoming: &mut [u8],
    ) -> MpiResult<()> {
        let receive = self.engine.start_receive(
            comm_index,
            incoming.as_mut_ptr(),
            incoming.len(),
            Some(peer),
            Some(tag),
            context,
        )?;
        let send = self.engine.start_send(
            comm_index,
            Destination { peer, context, tag },
            outgoing.as_ptr(),
            outgoing.len(),
            SendMode::Standard,
        )?;
        self.engine.wait_request(send)?;
        self.engine.state.requests.remove(send);
        self.engine.wait_request(receive)?;
        let received = self.engine.state.requests.remove(receive);
        match received {
            Some(request)
                if request.status.error == 0 && request.status.count_bytes == incoming.len() =>
            {
                Ok(())
            }
            _ => fail(
                ErrorClass::Intern,
                "inter-communicator leaders disagree on the exchange size",
            ),
        }
    }

    /// Leaders swap two words over inter-communicator `inter`; every local
    /// member gets the remote group's words.
    fn swap_with_remote_group(
        &mut self,
        inter: &Communicator,
        mine: [u32; 2],
    ) -> MpiResult<[u32; 2]> {
        let remote = inter.remote.as_ref().expect("an inter-communicator");
        let mut theirs = [0u8; 8];
        if inter.rank == 0 {
            let outgoing: Vec<u8> = mine.iter().flat_map(|word| word.to_ne_bytes()).collect();
            let index = remote.local_comm;
            self.swap_with(
                index,
                remote.group[0],
                inter.collective_context(),
                LEADER_EXCHANGE_TAG,
                &outgoing,
                &mut theirs,
            )?;
        }
        self.bcast(remote.local_comm, &mut theirs, 0)?;
        Ok([
            u32::from_ne_bytes(theirs[..4].try_into().expect("4 bytes")),
            u32::from_ne_bytes(theirs[4..].try_into().expect("4 bytes")),
        ])
    }

    /// Leaders swap `mine` (any length; every local member passes the
    /// same) over inter-communicator `inter`; every local member gets what
    /// the remote group's leader sent.
    fn exchange_with_remote_group(
        &mut self,
        inter: &Communicator,
        mine: &[u8],
    ) -> MpiResult<Vec<u8>> {
        let remote = inter.remote.as_ref().expect("an inter-communicator");
        let mut length = [0u8; 8];
        let mut theirs = Vec::new();
        if inter.rank == 0 {
            let (local_comm, leader) = (remote.local_comm, remote.group[0]);
            let context = inter.collective_context();
            let my_length = (mine.len() as u64).to_ne_bytes();
            self.swap_with(
                local_comm,
                leader,
                context,
                LEADER_EXCHANGE_TAG,
                &my_length,
                &mut length,
            )?;
            theirs = vec![0u8; u64::from_ne_bytes(length) as usize];
            self.swap_with(
                local_comm,
                leader,
                context,
                LEADER_EXCHANGE_TAG,
                mine,
                &mut theirs,
            )?;
        }
        self.bcast(remote.local_comm, &mut length, 0)?;
        theirs.resize(u64::from_ne_bytes(length) as usize, 0);
        self.bcast(remote.local_comm, &mut theirs, 0)?;
        Ok(theirs)
    }

    /// MPI_Comm_split of inter-communicator `inter_index`: each group splits
    /// by (color, key) on its own, and color c's local part is paired with
    /// the remote group's color c part. None for MPI_UNDEFINED, or when the
    /// remote group has no process of this color.
    pub(crate) fn intercomm_split(
        &mut self,
        inter_index: usize,
        color: i32,
        key: i32,
        undefined: i32,
    ) -> MpiResult<Option<usize>> {
        let inter = self.comm(inter_index)?.clone();
        let remote = inter.remote.clone().expect("an inter-communicator");
        let mut mine = Vec::with_capacity(8);
        mine.extend_from_slice(&color.to_ne_bytes());
        mine.extend_from_slice(&key.to_ne_bytes());
        let local_table = self.allgather_bytes(remote.local_comm, &mine)?;
        let remote_table = self.exchange_with_remote_group(&inter, &local_table)?;
        let (context, _) = self.agree_inter_context(&inter, INTERCOMM_CONTEXT_SPAN, 0)?;
        if remote_table.len() != remote.group.len() * 8 {
            return fail(
                ErrorClass::Intern,
                "the remote group sent a split table of the wrong size",
            );
        }
        if color == undefined {
            return Ok(None);
        }
        let local_members = members_of_color(&local_table, &inter.group, color);
        let remote_members = members_of_color(&remote_table, &remote.group, color);
        if remote_members.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.add_subgroup_intercomm(
            context,
            &inter,
            local_members,
            remote_members,
        )))
    }

    /// MPI_Comm_create of inter-communicator `inter_index`: `members` (world
    /// ranks, in order) is a subgroup of the local group, given alike by
    /// every local process; the result pairs it with the remote group's
    /// subgroup. None outside `members`, or when either subgroup is empty.
    pub(crate) fn intercomm_create_from_group(
        &mut self,
        inter_index: usize,
        members: &[u32],
    ) -> MpiResult<Option<usize>> {
        let inter = self.comm(inter_index)?.clone();
        // Check after the collective part, so a bad group on one process
        // does not leave the others waiting.
        let checked = match members
            .iter()
            .find(|world| inter.local_rank_of(**world).is_none())
        {
            Some(outsider) => fail(
                ErrorClass::Group,
                format!("process {outsider} of the group is not in the local group"),
            ),
            None => Ok(()),
        };
        let mine: Vec<u8> = members
            .iter()
            .flat_map(|world| world.to_ne_bytes())
            .collect();
        let theirs = self.exchange_with_remote_group(&inter, &mine)?;
        let (context, _) = self.agree_inter_context(&inter, INTERCOMM_CONTEXT_SPAN, 0)?;
        checked?;
        let remote_members: Vec<u32> = theirs
            .chunks_exact(4)
            .map(|chunk| u32::from_ne_bytes(chunk.try_into().expect("4 bytes")))
            .collect();
        if members.is_empty() || remote_members.is_empty() || !members.contains(&self.rank()) {
            return Ok(None);
        }
        Ok(Some(self.add_subgroup_intercomm(
            context,
            &inter,
            members.to_vec(),
            remote_members,
        )))
    }

    /// Store an inter-communicator between `local_members` (which holds
    /// this process) and `remote_members`, with `parent`'s error handler.
    fn add_subgroup_intercomm(
        &mut self,
        context: u32,
        parent: &Communicator,
        local_members: Vec<u32>,
        remote_members: Vec<u32>,
    ) -> usize {
        let me = self.rank();
        let rank = local_members
            .iter()
            .position(|world| *world == me)
            .expect("a member of its own subgroup") as u32;
        let local = Communicator::new(
            context,
            Arc::new(local_members),
            rank,
            parent.errhandler,
            String::new(),
        );
        self.add_intercomm(context, &local, Arc::new(remote_members))
    }

    /// A context id unused by every member of both groups of `inter`.
    fn agree_inter_context(
        &mut self,
        inter: &Communicator,
        span: u32,
        extra: u32,
    ) -> MpiResult<(u32, u32)> {
        let local_comm = inter
            .remote
            .as_ref()
            .expect("an inter-communicator")
            .local_comm;
        let local_max = self.allreduce_i64_max(local_comm, self.next_context as i64)? as u32;
        let [remote_max, remote_extra] = self.swap_with_remote_group(inter, [local_max, extra])?;
        let agreed = local_max.max(remote_max);
        self.next_context = agreed + span;
        Ok((agreed, remote_extra))
    }

    /// Build and store an inter-communicator and its hidden local one.
    pub(crate) fn add_intercomm(
        &mut self,
        context: u32,
        local: &Communicator,
        remote_group: Arc<Vec<u32>>,
    ) -> usize {
        let hidden = self.add_comm(Communicator::new(
            context + 2,
            local.group.clone(),
            local.rank,
            local.errhandler,
            String::new(),
        ));
        let inter = Communicator::new(
            context,
            local.group.clone(),
            local.rank,
            local.errhandler,
            String::new(),
        )
        .with_remote(RemoteSide {
            group: remote_group,
            local_comm: hidden,
        });
        self.add_comm(inter)
    }

    /// MPI_Comm_dup of an inter-communicator.
    pub(crate) fn intercomm_dup(&mut self, parent: &Communicator) -> MpiResult<usize> {
        let (context, _) = self.agree_inter_context(parent, INTERCOMM_CONTEXT_SPAN, 0)?;
        let remote_group = parent.remote.as_ref().expect("inter").group.clone();
        Ok(self.add_intercomm(context, parent, remote_group))
    }

    /// MPI_Intercomm_create. `peer_comm_index` and `remote_leader` matter only
    /// at the local leader; `tag` keeps the leaders' exchange on the peer
    /// communicator apart from other traffic.
    pub fn intercomm_create(
        &mut self,
        local_index: usize,
        local_leader: i32,
        peer_comm_index: Option<usize>,
        remote_leader: i32,
        tag: i32,
    ) -> MpiResult<usize> {
        let local = self.comm(local_index)?.clone();
        if local.is_inter() {
            return fail(
                ErrorClass::Comm,
                "the local communicator must be an intra-communicator",
            );
        }
        if local_leader < 0 || local_leader as u32 >= local.size() {
            return fail(
                ErrorClass::Rank,
                format!(
                    "local leader {local_leader} is out of range (size {})",
                    local.size()
                ),
            );
        }
        let local_max = self.allreduce_i64_max(local_index, self.next_context as i64)? as u32;
        let leader_result = (local.rank == local_leader as u32)
            .then(|| self.leader_exchange(&local, local_max, peer_comm_index, remote_leader, tag));
        self.finish_intercomm(
            local_index,
            &local,
            local_leader as u32,
            leader_result,
            ErrorClass::Arg,
        )
    }

    /// The local leader's part of MPI_Intercomm_create: swap (context
    /// candidate, group) with the remote leader over the peer communicator.
    fn leader_exchange(
        &mut self,
        local: &Communicator,
        local_max: u32,
        peer_comm_index: Option<usize>,
        remote_leader: i32,
        tag: i32,
    ) -> MpiResult<(u32, Vec<u32>)> {
        let Some(peer_index) = peer_comm_index else {
            return fail(ErrorClass::Comm, "the peer communicator is not valid");
        };
        self.check_envelope(peer_index, remote_leader, tag, false)?;
        let peer = self.comm(peer_index)?;
        if remote_leader < 0 {
            return fail(
                ErrorClass::Rank,
                format!("remote leader {remote_leader} is not a rank"),
            );
        }
        let (peer_world, context) = (peer.peer_world_rank(remote_leader as u32), peer.context);
        if local.local_rank_of(peer_world).is_some() {
            return fail(
                ErrorClass::Arg,
                "the remote leader belongs to the local group",
            );
        }
        let header = [local_max, local.size()];
        let outgoing: Vec<u8> = header.iter().flat_map(|word| word.to_ne_bytes()).collect();
        let mut incoming = [0u8; 8];
        self.swap_with(
            peer_index,
            peer_world,
            context,
            tag,
            &outgoing,
            &mut incoming,
        )?;
        let remote_max = u32::from_ne_bytes(incoming[..4].try_into().expect("4 bytes"));
        let remote_size = u32::from_ne_bytes(incoming[4..].try_into().expect("4 bytes")) as usize;
        let outgoing: Vec<u8> = local
            .group
            .iter()
            .flat_map(|world| world.to_ne_bytes())
            .collect();
        let mut incoming = vec![0u8; remote_size * 4];
        self.swap_with(
            peer_index,
            peer_world,
            context,
            tag,
            &outgoing,
            &mut incoming,
        )?;
        let group: Vec<u32> = incoming
            .chunks_exact(4)
            .map(|chunk| u32::from_ne_bytes(chunk.try_into().expect("4 bytes")))
            .collect();
        if group
            .iter()
            .any(|world| local.local_rank_of(*world).is_some())
        {
            return fail(ErrorClass::Arg, "the local and remote groups overlap");
        }
        Ok((local_max.max(remote_max), group))
    }

    /// MPI_Intercomm_merge: the group passing `high = false` comes first; on
    /// a tie, the group whose leader has the lower world rank.
    pub fn intercomm_merge(&mut self, inter_index: usize, high: bool) -> MpiResult<usize> {
        let inter = self.comm(inter_index)?.clone();
        let Some(remote) = inter.remote.clone() else {
            return fail(
                ErrorClass::Comm,
                "MPI_Intercomm_merge needs an inter-communicator",
            );
        };
        let (context, remote_high) = self.agree_inter_context(&inter, 2, high as u32)?;
        let remote_high = remote_high != 0;
        let local_first = if high != remote_high {
            !high
        } else {
            inter.group[0] < remote.group[0]
        };
        let (first, second) = if local_first {
            (&inter.group, &remote.group)
        } else {
            (&remote.group, &inter.group)
        };
        let members: Vec<u32> = first.iter().chain(second.iter()).copied().collect();
        let me = self.rank();
        let rank = members
            .iter()
            .position(|world| *world == me)
            .expect("a member") as u32;
        let comm = Communicator::new(
            context,
            Arc::new(members),
            rank,
            inter.errhandler,
            String::new(),
        );
        Ok(self.add_comm(comm))
    }
}

/// The world ranks of `group` whose entry in `table` ((color, key) per
/// rank) has `color`, ordered by key, then rank (MPI_Comm_split's order,
/// for intra- and inter-communicators alike).
pub(crate) fn members_of_color(table: &[u8], group: &[u32], color: i32) -> Vec<u32> {
    let mut members: Vec<(i32, usize)> = table
        .chunks_exact(8)
        .enumerate()
        .filter_map(|(rank, entry)| {
            let their_color = i32::from_ne_bytes(entry[..4].try_into().expect("4 bytes"));
            let their_key = i32::from_ne_bytes(entry[4..].try_into().expect("4 bytes"));
            (their_color == color).then_some((their_key, rank))
        })
        .collect();
    members.sort();
    members.iter().map(|(_, rank)| group[*rank]).collect()
}
