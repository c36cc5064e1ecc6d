//! MPI-4 partitioned point-to-point (MPI_Psend_init, MPI_Precv_init): the
//! transfer behind one activation of a partitioned request.
//!
//! Why this shape: the C layer tracks the partitions (which are ready,
//! which arrived) and starts, per MPI_Start, a request group
//! ([`Engine::new_request_group`]) that completes when the transfer has.
//! A receive posts its whole buffer at once; a send adds its transfer
//! to the group when the last partition is marked ready
//! ([`Engine::adopt_into`]), so an MPI_Wait that begins before then
//! simply waits. One message per activation: MPI lets an implementation
//! send the partitions together, and that keeps matching whole.
//!
//! Matching: partitioned messages must match only partitioned receives.
//! They travel on the communicator's collective context, whose own tags
//! (collective sequence numbers) stay below [`PARTITIONED_TAG_BIT`], with
//! the application's tag (at most `TAG_UB`) above that bit; so neither a
//! point-to-point receive nor a collective can take them.

use crate::engine::Destination;
use crate::error::MpiResult;
use crate::request::SendMode;
use crate::{Mpi, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

/// The bit that sets a partitioned message's tag apart from collective
/// tags on the same context.
pub const PARTITIONED_TAG_BIT: i32 = TAG_UB + 1;

/// The application's tag of a partitioned message's internal one.
pub fn application_tag(internal: i32) -> i32 {
    internal & TAG_UB
}

impl Mpi {
    /// Start the transfer of a partitioned send of `length` packed bytes
    /// to `destination` (a rank of communicator `comm_index`, or
    /// PROC_NULL): returns the request of the message.
    pub fn partitioned_send(
        &mut self,
        comm_index: usize,
        bytes: impl Into<crate::user_bytes::UserBytes>,
        length: usize,
        destination: i32,
        tag: i32,
    ) -> MpiResult<u32> {
        let comm = self.comm(comm_index)?;
        if destination == PROC_NULL {
            return self
                .engine
                .start_nothing(comm_index, crate::request::Status::proc_null());
        }
        let target = Destination {
            peer: comm.peer_world_rank(destination as u32),
            context: comm.collective_context(),
            tag: PARTITIONED_TAG_BIT | tag,
        };
        self.engine
            .start_send(comm_index, target, bytes, length, SendMode::Standard)
    }

    /// Post the receive of a partitioned message of at most `capacity`
    /// packed bytes from `source` (a rank, or PROC_NULL).
    pub fn partitioned_receive(
        &mut self,
        comm_index: usize,
        bytes: impl Into<crate::user_bytes::UserBytes>,
        capacity: usize,
        source: i32,
        tag: i32,
    ) -> MpiResult<u32> {
        let comm = self.comm(comm_index)?;
        if source == PROC_NULL {
            return self
                .engine
                .start_nothing(comm_index, crate::request::Status::proc_null());
        }
        let context = comm.collective_context();
        let source_world = comm.peer_world_rank(source as u32);
        self.engine.start_receive(
            comm_index,
            bytes,
            capacity,
            Some(source_world),
            Some(PARTITIONED_TAG_BIT | tag),
            context,
        )
    }

    /// Check a partitioned operation's peer and tag: a rank of the
    /// communicator or PROC_NULL (no wildcard: MPI-4 matches partitioned
    /// operations by their exact envelope), a tag from 0 to TAG_UB.
    pub fn check_partitioned_envelope(
        &self,
        comm_index: usize,
        peer: i32,
        tag: i32,
    ) -> MpiResult<()> {
        if peer == ANY_SOURCE || tag == ANY_TAG {
            return Err(crate::MpiError::new(
                crate::ErrorClass::Arg,
                "partitioned communication takes no MPI_ANY_SOURCE or MPI_ANY_TAG",
            ));
        }
        self.check_envelope(comm_index, peer, tag, false)
    }
}
