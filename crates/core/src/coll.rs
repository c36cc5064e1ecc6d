//! Collectives built on point-to-point messages in each communicator's
//! collective context, so every protection below (reliability, and later
//! replication and logging) covers them with no special case.
//!
//! Algorithms here are the simple correct ones (dissemination barrier,
//! binomial broadcast and reduction); issue #4 tunes them by size.

use crate::datatype::TypeInfo;
use crate::error::{fail, ErrorClass, MpiResult};
use crate::op::{reduce_predefined, Op};
use crate::request::SendMode;
use crate::Mpi;

/// Tag of every internal collective message (collectives on one
/// communicator are ordered, and MPI ordering keeps them apart).
const COLLECTIVE_TAG: i32 = 0;

/// How to combine reduction data: the op, the element type and the datatype
/// handle passed back to user functions.
#[derive(Clone, Copy, Debug)]
pub struct Reduction {
    /// The operator.
    pub op: Op,
    /// The element type.
    pub info: TypeInfo,
    /// The datatype handle (for user functions).
    pub datatype_handle: i32,
}

impl Reduction {
    /// `inout = input op inout` over `count` elements.
    pub fn apply(&self, input: &[u8], inout: &mut [u8], count: usize) -> MpiResult<()> {
        match self.op {
            Op::User { function, .. } => {
                let mut length = i32::try_from(count).map_err(|_| {
                    crate::MpiError::new(ErrorClass::Count, "count too large for a user op")
                })?;
                let mut datatype = self.datatype_handle;
                // SAFETY: the user function reads `length` elements from input and
                // updates `length` elements of inout; both hold `count` elements.
                unsafe {
                    function(
                        input.as_ptr() as *mut _,
                        inout.as_mut_ptr().cast(),
                        &mut length,
                        &mut datatype,
                    )
                };
                Ok(())
            }
            op => reduce_predefined(op, &self.info, input, inout, count),
        }
    }
}

impl Mpi {
    fn coll_isend(&mut self, comm_index: usize, destination: u32, data: &[u8]) -> MpiResult<u32> {
        let comm = self.comm(comm_index)?;
        let (peer, context) = (comm.world_rank(destination), comm.collective_context());
        let destination = crate::Destination {
            peer,
            context,
            tag: COLLECTIVE_TAG,
        };
        self.engine.start_send(
            comm_index,
            destination,
            data.as_ptr(),
            data.len(),
            SendMode::Standard,
        )
    }

    fn coll_irecv(&mut self, comm_index: usize, source: u32, buffer: &mut [u8]) -> MpiResult<u32> {
        let comm = self.comm(comm_index)?;
        let (peer, context) = (comm.world_rank(source), comm.collective_context());
        self.engine.start_receive(
            comm_index,
            buffer.as_mut_ptr(),
            buffer.len(),
            Some(peer),
            Some(COLLECTIVE_TAG),
            context,
        )
    }

    fn coll_wait(&mut self, index: u32) -> MpiResult<()> {
        self.engine.wait_request(index)?;
        let request = self.engine.state.requests.remove(index);
        match request {
            Some(request) if request.status.error == ErrorClass::Truncate as i32 => {
                fail(ErrorClass::Truncate, "collective message longer than expected: are the counts and datatypes the same on every rank?")
            }
            _ => Ok(()),
        }
    }

    fn coll_send(&mut self, comm_index: usize, destination: u32, data: &[u8]) -> MpiResult<()> {
        let index = self.coll_isend(comm_index, destination, data)?;
        self.coll_wait(index)
    }

    fn coll_recv(&mut self, comm_index: usize, source: u32, buffer: &mut [u8]) -> MpiResult<()> {
        let index = self.coll_irecv(comm_index, source, buffer)?;
        self.coll_wait(index)
    }

    /// MPI_Barrier: dissemination, ceil(log2 n) rounds.
    pub fn barrier(&mut self, comm_index: usize) -> MpiResult<()> {
        let comm = self.comm(comm_index)?;
        let (size, rank) = (comm.size(), comm.rank);
        let mut distance = 1;
        while distance < size {
            let mut token = [0u8; 0];
            let receive =
                self.coll_irecv(comm_index, (rank + size - distance) % size, &mut token)?;
            let send = self.coll_isend(comm_index, (rank + distance) % size, &[])?;
            self.coll_wait(send)?;
            self.coll_wait(receive)?;
            distance *= 2;
        }
        Ok(())
    }

    /// MPI_Bcast of `buffer` from comm rank `root`: binomial tree.
    pub fn bcast(&mut self, comm_index: usize, buffer: &mut [u8], root: u32) -> MpiResult<()> {
        let comm = self.comm(comm_index)?;
        let (size, rank) = (comm.size(), comm.rank);
        if root >= size {
            return fail(
                ErrorClass::Root,
                format!("root {root} is out of range (communicator size {size})"),
            );
        }
        let relative = (rank + size - root) % size;
        let mut mask = 1;
        while mask < size {
            if relative & mask != 0 {
                let source = (rank + size - mask) % size;
                self.coll_recv(comm_index, source, buffer)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if relative + mask < size {
                self.coll_send(comm_index, (rank + mask) % size, buffer)?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// MPI_Reduce of `count` elements: the result lands in `result` at `root`.
    /// Commutative ops use a binomial tree; others combine in rank order.
    pub fn reduce(
        &mut self,
        comm_index: usize,
        input: &[u8],
        result: &mut [u8],
        count: usize,
        reduction: Reduction,
        root: u32,
    ) -> MpiResult<()> {
        let comm = self.comm(comm_index)?;
        let (size, rank) = (comm.size(), comm.rank);
        if root >= size {
            return fail(
                ErrorClass::Root,
                format!("root {root} is out of range (communicator size {size})"),
            );
        }
        let bytes = input.len();
        if !reduction.op.is_commutative() {
            return self.reduce_in_rank_order(comm_index, input, result, count, reduction, root);
        }
        let relative = (rank + size - root) % size;
        let mut accumulator = input.to_vec();
        let mut incoming = vec![0u8; bytes];
        let mut mask = 1;
        while mask < size {
            if relative & mask == 0 {
                let child = relative | mask;
                if child < size {
                    self.coll_recv(comm_index, (child + root) % size, &mut incoming)?;
                    reduction.apply(&incoming, &mut accumulator, count)?;
                }
            } else {
                let parent = (relative - mask + root) % size;
                self.coll_send(comm_index, parent, &accumulator)?;
                break;
            }
            mask <<= 1;
        }
        if rank == root {
            result[..bytes].copy_from_slice(&accumulator);
        }
        Ok(())
    }

    fn reduce_in_rank_order(
        &mut self,
        comm_index: usize,
        input: &[u8],
        result: &mut [u8],
        count: usize,
        reduction: Reduction,
        root: u32,
    ) -> MpiResult<()> {
        let comm = self.comm(comm_index)?;
        let (size, rank) = (comm.size(), comm.rank);
        let bytes = input.len();
        if rank != root {
            return self.coll_send(comm_index, root, input);
        }
        // result = x0 op x1 op ... op x(n-1), evaluated from the right.
        let mut accumulator = vec![0u8; bytes];
        let mut incoming = vec![0u8; bytes];
        for source in (0..size).rev() {
            let contribution: &[u8] = if source == rank {
                input
            } else {
                self.coll_recv(comm_index, source, &mut incoming)?;
                &incoming
            };
            if source == size - 1 {
                accumulator.copy_from_slice(contribution);
            } else {
                // MPI defines inoutvec = invec op inoutvec: the lower rank is the left operand.
                reduction.apply(contribution, &mut accumulator, count)?;
            }
        }
        result[..bytes].copy_from_slice(&accumulator);
        Ok(())
    }

    /// MPI_Allreduce: reduce to rank 0, then broadcast.
    pub fn allreduce(
        &mut self,
        comm_index: usize,
        input: &[u8],
        result: &mut [u8],
        count: usize,
        reduction: Reduction,
    ) -> MpiResult<()> {
        self.reduce(comm_index, input, result, count, reduction, 0)?;
        let bytes = input.len();
        self.bcast(comm_index, &mut result[..bytes], 0)
    }

    /// Every rank's `mine` (all the same length), concatenated in rank order.
    pub fn allgather_bytes(&mut self, comm_index: usize, mine: &[u8]) -> MpiResult<Vec<u8>> {
        let comm = self.comm(comm_index)?;
        let (size, rank) = (comm.size() as usize, comm.rank as usize);
        let chunk = mine.len();
        let mut all = vec![0u8; chunk * size];
        if rank == 0 {
            all[..chunk].copy_from_slice(mine);
            for source in 1..size {
                self.coll_recv(
                    comm_index,
                    source as u32,
                    &mut all[source * chunk..(source + 1) * chunk],
                )?;
            }
        } else {
            self.coll_send(comm_index, 0, mine)?;
        }
        self.bcast(comm_index, &mut all, 0)?;
        Ok(all)
    }

    /// Maximum of one i64 over the communicator (context agreement).
    pub fn allreduce_i64_max(&mut self, comm_index: usize, value: i64) -> MpiResult<i64> {
        let reduction = Reduction {
            op: Op::Max,
            info: TypeInfo::basic(8, crate::datatype::BasicKind::I64),
            datatype_handle: 0,
        };
        let mut result = [0u8; 8];
        self.allreduce(comm_index, &value.to_ne_bytes(), &mut result, 1, reduction)?;
        Ok(i64::from_ne_bytes(result))
    }
}
