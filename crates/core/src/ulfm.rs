//! ULFM (User-Level Failure Mitigation) calls: revoke, agree, shrink,
//! failure acknowledgement and the failure queries.
//!
//! Why this shape: the protocol (the uniform agreement, the revoke flood)
//! is sans-IO in `resmpi_ft` and runs inside the engine's progress
//! (`engine/ulfm.rs`); this file is what each MPI call means on top of it.
//! Agree and shrink both run one agreement on the communicator, numbered
//! by the communicator's `agreement_sequence` (every member calls them in
//! the same order, so every member gives its agreement the same number).
//! The decision carries the flag, the failed members, the acknowledged
//! ones and a context id, so shrink needs nothing more: the survivors are
//! the members not in the agreed failed set, in their old order, and the
//! new communicator takes the agreed context, which no survivor has used
//! (it is the largest of the contributors' next free ids).
//!
//! Acknowledgement (`MPIX_Comm_failure_ack`) is a snapshot of the failed
//! members known now. While a failed member is not in the snapshot, a
//! blocking wildcard receive on the communicator fails with
//! `MPIX_ERR_PROC_FAILED`, and MPI_Wait / MPI_Test of a nonblocking one
//! return `MPIX_ERR_PROC_FAILED_PENDING`, leaving it active (MPICH's
//! `ft/anysource` test checks exactly this). Agree returns `MPIX_ERR_PROC_FAILED` (everywhere, with
//! the same flag) when the agreed failed set holds a member that some
//! contributor had not acknowledged.

use std::sync::Arc;

use resmpi_ft::agreement::{Contribution, Decision};
use resmpi_ft::member_set::MemberSet;
use resmpi_ft::ulfm::AgreementKey;

use crate::comm::Communicator;
use crate::error::{fail, ErrorClass, MpiError, MpiResult};
use crate::Mpi;

/// Why a nonblocking agreement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgreementPurpose {
    /// MPIX_Comm_iagree.
    Agree,
    /// MPIX_Comm_ishrink.
    Shrink,
}

/// What a nonblocking agreement gives when its request completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgreementOutcome {
    /// The agreed flag (MPIX_Comm_iagree).
    Flag(i32),
    /// The new communicator's table index (MPIX_Comm_ishrink).
    Communicator(usize),
}

/// A nonblocking agreement waiting for its request to complete.
#[derive(Debug)]
pub struct NonblockingAgreement {
    started: StartedAgreement,
    purpose: AgreementPurpose,
}

impl NonblockingAgreement {
    /// Why it runs.
    pub fn purpose(&self) -> AgreementPurpose {
        self.purpose
    }
}

/// An agreement this process started.
#[derive(Debug)]
struct StartedAgreement {
    key: AgreementKey,
    comm_index: usize,
    /// World rank of each participant.
    members: Vec<u32>,
    /// On an inter-communicator whose local group comes first, the remote
    /// group's AND is the decision's second flag.
    takes_second_flag: bool,
}

/// What one agreement gave this process.
struct Agreed {
    decision: Decision,
    /// World rank of each participant.
    members: Vec<u32>,
    /// The flag this process returns (on an inter-communicator, the AND
    /// of the remote group's flags).
    flag: i32,
}

impl Mpi {
    /// MPIX_Comm_revoke.
    pub fn comm_revoke(&mut self, comm_index: usize) -> MpiResult<()> {
        self.engine.revoke_communicator(comm_index)
    }

    /// Whether the communicator is revoked (MPIX_Comm_is_revoked).
    pub fn comm_is_revoked(&self, comm_index: usize) -> MpiResult<bool> {
        Ok(self.comm(comm_index)?.revoked)
    }

    /// World ranks of the members of `comm_index` known to have failed,
    /// lowest communicator rank first (MPIX_Comm_get_failed).
    pub fn comm_failed_members(&self, comm_index: usize) -> MpiResult<Vec<u32>> {
        let comm = self.comm(comm_index)?;
        let mut members: Vec<u32> = comm.group.to_vec();
        if let Some(remote) = &comm.remote {
            members.extend_from_slice(&remote.group);
        }
        Ok(members
            .into_iter()
            .filter(|&member| self.engine.peer_failed(member))
            .collect())
    }

    /// MPIX_Comm_failure_ack: acknowledge every failure known now.
    pub fn comm_failure_ack(&mut self, comm_index: usize) -> MpiResult<()> {
        let failed = self.comm_failed_members(comm_index)?;
        self.comm_mut(comm_index)?.acknowledged_failures = failed;
        Ok(())
    }

    /// World ranks of the failures acknowledged last
    /// (MPIX_Comm_failure_get_acked).
    pub fn comm_acknowledged_failures(&self, comm_index: usize) -> MpiResult<Vec<u32>> {
        Ok(self.comm(comm_index)?.acknowledged_failures.clone())
    }

    /// MPIX_ERR_PROC_FAILED_PENDING when communicator `comm_index` holds a
    /// failure not acknowledged yet: a wildcard receive on it cannot
    /// complete until `MPIX_Comm_failure_ack` (a blocking one returns
    /// `MPIX_ERR_PROC_FAILED` instead, the caller decides).
    pub fn check_wildcard_allowed(&self, comm_index: usize) -> MpiResult<()> {
        if self.engine.state.failed_count == 0 {
            return Ok(());
        }
        let comm = self.comm(comm_index)?;
        if comm.revoked {
            return Ok(()); // the receive reports the revocation
        }
        let unacknowledged = comm.group.iter().find(|&&member| {
            self.engine.peer_failed(member) && !comm.acknowledged_failures.contains(&member)
        });
        match unacknowledged {
            Some(member) => fail(
                ErrorClass::ProcFailedPending,
                format!(
                    "process {member} (MPI_COMM_WORLD rank) of the communicator has failed and the failure is not acknowledged: an MPI_ANY_SOURCE receive waits for MPIX_Comm_failure_ack"
                ),
            ),
            None => Ok(()),
        }
    }

    /// For MPI_Wait / MPI_Test on request `index`: an incomplete,
    /// unmatched wildcard receive on a communicator with an unacknowledged
    /// failure reports `MPIX_ERR_PROC_FAILED_PENDING` and stays active (it
    /// completes normally once the failure is acknowledged and a message
    /// comes).
    pub fn check_wildcard_request(&self, index: u32) -> MpiResult<()> {
        if self.engine.state.failed_count == 0 {
            return Ok(());
        }
        let Some(request) = self.engine.state.requests.get(index) else {
            return Ok(());
        };
        match &request.operation {
            crate::request::Operation::Receive(receive)
                if !request.complete && !receive.matched && receive.pattern.source.is_none() =>
            {
                self.check_wildcard_allowed(request.comm)
            }
            _ => Ok(()),
        }
    }

    /// Wait for request `index` (an operation, not a persistent request's
    /// handle) to complete. A wildcard receive that cannot complete while
    /// a failure in its communicator is unacknowledged ends the wait with
    /// `MPIX_ERR_PROC_FAILED_PENDING` and stays active (ULFM), whether the
    /// failure was known before the wait or is noticed during it.
    pub fn wait_or_pending(&mut self, index: u32) -> MpiResult<()> {
        let done = |engine: &crate::engine::Engine<_>| engine.state.requests.done(index);
        loop {
            self.check_wildcard_request(index)?;
            let failures = self.engine.state.failed_count;
            self.engine
                .wait_until(|engine| done(engine) || engine.state.failed_count != failures)?;
            if done(&self.engine) {
                return Ok(());
            }
        }
    }

    /// [`wait_or_pending`](Self::wait_or_pending) for a blocking call: a
    /// wildcard receive that would be left pending is withdrawn and ends
    /// with `MPIX_ERR_PROC_FAILED` instead (a blocking receive cannot stay
    /// posted; ULFM).
    pub fn wait_blocking(&mut self, index: u32) -> MpiResult<()> {
        match self.wait_or_pending(index) {
            Err(error) if error.class == ErrorClass::ProcFailedPending => {
                self.engine.state.fail_unmatched_receive(index);
                Ok(())
            }
            other => other,
        }
    }

    /// MPIX_Comm_agree: the bitwise AND of `flag` over the live members,
    /// the same at every survivor; the error (the same everywhere) is
    /// `MPIX_ERR_PROC_FAILED` when a failed member was not acknowledged by
    /// every contributor. Returns (flag, error).
    pub fn comm_agree(
        &mut self,
        comm_index: usize,
        flag: i32,
    ) -> MpiResult<(i32, Option<MpiError>)> {
        let Agreed {
            decision,
            members,
            flag,
        } = self.agree(comm_index, flag)?;
        let error = decision.has_unacknowledged_failure().then(|| {
            let failed: Vec<u32> = decision
                .failed
                .iter()
                .filter(|&index| !decision.acknowledged.contains(index))
                .map(|index| members[index])
                .collect();
            MpiError::new(
                ErrorClass::ProcFailed,
                format!(
                    "processes {failed:?} (MPI_COMM_WORLD ranks) of the communicator failed and not every member acknowledged it (MPIX_Comm_failure_ack)"
                ),
            )
        });
        Ok((flag, error))
    }

    /// MPIX_Comm_shrink: a new communicator of the members not in the
    /// agreed failed set, with an agreed new context.
    pub fn comm_shrink(&mut self, comm_index: usize) -> MpiResult<usize> {
        let agreed = self.agree(comm_index, !0)?;
        self.build_shrunk(comm_index, agreed)
    }

    /// The communicator of the members of `comm_index` not in the agreed
    /// failed set.
    fn build_shrunk(&mut self, comm_index: usize, agreed: Agreed) -> MpiResult<usize> {
        let Agreed {
            decision, members, ..
        } = agreed;
        let failed: Vec<u32> = decision.failed.iter().map(|index| members[index]).collect();
        let survivors_of = |group: &[u32]| -> Vec<u32> {
            group
                .iter()
                .copied()
                .filter(|member| !failed.contains(member))
                .collect()
        };
        let parent = self.comm(comm_index)?.clone();
        let local = survivors_of(&parent.group);
        let me = self.rank();
        let rank = local
            .iter()
            .position(|&member| member == me)
            .expect("a live process is never in the agreed failed set") as u32;
        let context = decision.next_context;
        let Some(remote) = &parent.remote else {
            self.next_context = self.next_context.max(context + 2);
            let comm = Communicator::new(
                context,
                Arc::new(local),
                rank,
                parent.errhandler,
                String::new(),
            );
            return Ok(self.add_comm(comm));
        };
        // An inter-communicator: the survivors of each group, the agreed
        // context for it and the one above for its hidden local
        // communicator, as MPI_Intercomm_create lays them out.
        let remote_survivors = survivors_of(&remote.group);
        if remote_survivors.is_empty() {
            return fail(
                ErrorClass::ProcFailed,
                "MPIX_Comm_shrink: every process of the remote group has failed",
            );
        }
        self.next_context = self
            .next_context
            .max(context + crate::intercomm::INTERCOMM_CONTEXT_SPAN);
        let local_comm = Communicator::new(
            context,
            Arc::new(local),
            rank,
            parent.errhandler,
            String::new(),
        );
        Ok(self.add_intercomm(context, &local_comm, Arc::new(remote_survivors)))
    }

    /// Run the next agreement on `comm_index` with `flag`, to its decision.
    fn agree(&mut self, comm_index: usize, flag: i32) -> MpiResult<Agreed> {
        let started = self.start_agreement(comm_index, flag)?;
        let key = started.key;
        let mut decision = None;
        self.engine.wait_until(|engine| {
            decision = engine.state.ulfm.take_decision(key);
            decision.is_some()
        })?;
        Ok(self.finish_agreement(started, decision.expect("waited for it")))
    }

    /// Start the next agreement on `comm_index` with `flag`.
    fn start_agreement(&mut self, comm_index: usize, flag: i32) -> MpiResult<StartedAgreement> {
        let next_context = self.next_context;
        let comm = self.comm_mut(comm_index)?;
        let key = AgreementKey {
            context: comm.context,
            sequence: comm.agreement_sequence,
        };
        comm.agreement_sequence = comm.agreement_sequence.wrapping_add(1);
        // An inter-communicator agrees over both groups, the group whose
        // first member has the lower world rank first (the same order on
        // both sides); the flag each side gets is the other group's AND.
        let (members, me, split, local_first) = match &comm.remote {
            None => (
                comm.group.to_vec(),
                comm.rank as usize,
                comm.group.len(),
                true,
            ),
            Some(remote) => {
                let local_first = comm.group[0] < remote.group[0];
                let (first, second) = if local_first {
                    (&comm.group, &remote.group)
                } else {
                    (&remote.group, &comm.group)
                };
                let members: Vec<u32> = first.iter().chain(second.iter()).copied().collect();
                let me = if local_first {
                    comm.rank as usize
                } else {
                    remote.group.len() + comm.rank as usize
                };
                (members, me, first.len(), local_first)
            }
        };
        let inter = comm.remote.is_some();
        let acknowledged_world = comm.acknowledged_failures.clone();
        let size = members.len();
        let known_failed =
            MemberSet::from_fn(size, |index| self.engine.peer_failed(members[index]));
        let acknowledged =
            MemberSet::from_fn(size, |index| acknowledged_world.contains(&members[index]));
        let contribution = Contribution {
            flag,
            failed: known_failed.clone(),
            acknowledged,
            next_context,
        };
        let state = &mut self.engine.state;
        if !state
            .ulfm
            .start(key, members.clone(), me, split, contribution, known_failed)
        {
            return fail(
                ErrorClass::Intern,
                format!("agreement {key:?} was already run here"),
            );
        }
        state.flush_ulfm();
        Ok(StartedAgreement {
            key,
            comm_index,
            members,
            takes_second_flag: inter && local_first,
        })
    }

    /// What agreement `started` decided, for this process.
    fn finish_agreement(&mut self, started: StartedAgreement, decision: Decision) -> Agreed {
        // The agreed failed set came from failure notices (dead is dead):
        // a member this process was not told of yet is dead too, so that
        // a failure_ack right after this call covers what agree reported.
        let newly_failed: Vec<u32> = decision
            .failed
            .iter()
            .map(|index| started.members[index])
            .filter(|&member| !self.engine.peer_failed(member))
            .collect();
        for member in newly_failed {
            self.engine.handle_peer_failure(member);
        }
        let flag = if started.takes_second_flag {
            decision.second_flag
        } else {
            decision.flag
        };
        Agreed {
            decision,
            members: started.members,
            flag,
        }
    }

    /// MPIX_Comm_iagree / MPIX_Comm_ishrink: start the agreement and
    /// return a request that completes (in any progress) once it is
    /// decided, with `MPIX_ERR_PROC_FAILED` when agree would return it
    /// (never for shrink); [`Mpi::finish_nonblocking_agreement`] then
    /// gives the outcome.
    pub fn start_nonblocking_agreement(
        &mut self,
        comm_index: usize,
        flag: i32,
        purpose: AgreementPurpose,
    ) -> MpiResult<(u32, NonblockingAgreement)> {
        let started = self.start_agreement(comm_index, flag)?;
        let request = self.engine.start_agreement_request(
            comm_index,
            started.key,
            purpose == AgreementPurpose::Agree,
        )?;
        Ok((request, NonblockingAgreement { started, purpose }))
    }

    /// The outcome of a nonblocking agreement whose request `request`
    /// completed: the flag (iagree) or the new communicator (ishrink).
    pub fn finish_nonblocking_agreement(
        &mut self,
        request: u32,
        pending: NonblockingAgreement,
    ) -> MpiResult<AgreementOutcome> {
        let Some(decision) = self.engine.take_agreement_decision(request) else {
            return fail(
                ErrorClass::Intern,
                "the agreement's request completed without a decision",
            );
        };
        let comm_index = pending.started.comm_index;
        let agreed = self.finish_agreement(pending.started, decision);
        match pending.purpose {
            AgreementPurpose::Agree => Ok(AgreementOutcome::Flag(agreed.flag)),
            AgreementPurpose::Shrink => Ok(AgreementOutcome::Communicator(
                self.build_shrunk(comm_index, agreed)?,
            )),
        }
    }
}
