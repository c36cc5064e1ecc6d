//! ULFM beside the engine: revoke and agreement traffic, and what a
//! revoked communicator does to requests.
//!
//! Why here and not behind the interceptor: ULFM is not a protocol that
//! changes where messages go (replication, logging); it is part of MPI's
//! semantics under the `continue` failure policy, and a rank blocked in
//! `MPI_Recv` on a revoked communicator must be woken by the engine's own
//! progress. So the engine owns one control-frame subtype (`CONTROL_ULFM`)
//! whose payloads go to the sans-IO [`AgreementTable`] of `resmpi_ft`
//! (agreements and the revoke flood); this file only plumbs frames in and
//! out and applies a revocation to the communicator table. Nothing here
//! runs until a ULFM frame arrives or a ULFM call is made: the hot path
//! pays one compare of `revoked_count`.
//!
//! Revoke is a reliable flood: the first time a process learns that a
//! context is revoked (its own `MPIX_Comm_revoke` or a frame), it marks
//! the communicator, fails its pending operations with `MPIX_ERR_REVOKED`
//! and sends the revoke to every other live member, once. Any member that
//! received it forwards it, so it reaches every live member even when the
//! revoker dies after reaching only one. A revoke for a context this
//! process does not hold yet (a peer finished a shrink first and revoked
//! the result) is remembered and applied when the communicator is added.
//!
//! [`AgreementTable`]: resmpi_ft::ulfm::AgreementTable

use resmpi_ft::Interceptor;
use resmpi_wire::{FrameHeader, FrameKind};

use super::{Engine, State};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::request::{Operation, SendStage, Status};

/// Control-frame subtype: a ULFM frame (agreement or revoke), the payload
/// encoded by `resmpi_ft::ulfm`.
pub(super) const CONTROL_ULFM: u64 = 5;

/// The error of an operation on a revoked communicator.
pub fn revoked_error() -> MpiError {
    MpiError::new(
        ErrorClass::Revoked,
        "the communicator was revoked (MPIX_Comm_revoke); only agree, shrink and the failure queries work on it",
    )
}

impl<F: Interceptor> State<F> {
    /// Whether communicator `comm` (table index) is revoked.
    #[inline]
    pub fn comm_revoked(&self, comm: usize) -> bool {
        self.revoked_count > 0
            && self
                .comms
                .get(comm)
                .and_then(Option::as_ref)
                .is_some_and(|comm| comm.revoked)
    }

    /// A ULFM frame from `peer`.
    pub(super) fn handle_ulfm_frame(&mut self, peer: u32, payload: &[u8]) {
        if !self.ulfm.handle_frame(peer, payload) {
            self.pending_error.get_or_insert(MpiError::new(
                ErrorClass::Intern,
                format!("malformed ULFM frame from rank {peer}"),
            ));
            return;
        }
        while let Some(context) = self.ulfm.poll_revocation() {
            self.apply_revocation(context);
        }
        self.flush_ulfm();
    }

    /// `peer` died: agreements waiting for it go on without it.
    pub(super) fn ulfm_peer_failure(&mut self, peer: u32) {
        self.ulfm.handle_peer_failure(peer);
        self.flush_ulfm();
    }

    /// Queue every frame the table has for live peers.
    pub fn flush_ulfm(&mut self) {
        while let Some((peer, bytes)) = self.ulfm.poll_transmit() {
            if peer == self.rank || peer >= self.size || self.is_failed(peer) {
                continue;
            }
            let mut header = FrameHeader::new(FrameKind::Control, self.wire_rank);
            header.message_id = CONTROL_ULFM;
            header.payload_len = bytes.len() as u32;
            self.queue_frame(peer, &header, &bytes);
        }
    }

    /// Revoke the communicator(s) of `context` here: mark them, fail their
    /// pending operations, forward the revoke to every other live member.
    /// The context must already be marked in the table.
    pub(super) fn apply_revocation(&mut self, context: u32) {
        // A blocking receive becomes a request first, so that revocation
        // ends it as it ends requests.
        self.promote_direct_receive();
        let indices: Vec<usize> = (0..self.comms.len())
            .filter(|&index| {
                self.comms[index]
                    .as_ref()
                    .is_some_and(|comm| comm.context == context && !comm.revoked)
            })
            .collect();
        for index in indices {
            let comm = self.comms[index].as_mut().expect("filtered above");
            comm.revoked = true;
            self.revoked_count += 1;
            let mut members: Vec<u32> = comm.group.to_vec();
            let mut hidden = None;
            if let Some(remote) = &comm.remote {
                members.extend_from_slice(&remote.group);
                hidden = Some(remote.local_comm);
            }
            self.fail_requests_of_revoked(index);
            // An inter-communicator's collectives also run on its hidden
            // intra-communicator over the local group: revoked with it.
            if let Some(hidden) = hidden {
                if let Some(Some(local)) = self.comms.get_mut(hidden) {
                    if !local.revoked {
                        local.revoked = true;
                        self.revoked_count += 1;
                    }
                }
                self.fail_requests_of_revoked(hidden);
            }
            for member in members {
                if member != self.rank {
                    self.ulfm.send_revoke(member, context);
                }
            }
        }
        self.flush_ulfm();
    }

    /// End with `MPIX_ERR_REVOKED` every pending operation of communicator
    /// `comm` that waits on a peer: posted or matched receives, sends
    /// waiting for a clear-to-send or a sync ack, sends streaming. Sends
    /// whose data the reliable links hold (`AwaitingAcks`) end on their
    /// acks as usual: the links still read the buffer.
    fn fail_requests_of_revoked(&mut self, comm: usize) {
        for index in self.requests.live_indices() {
            let wire_id = self.requests.wire_id(index);
            let Some(request) = self.requests.get(index) else {
                continue;
            };
            if request.complete || request.comm != comm {
                continue;
            }
            let pending = match &request.operation {
                Operation::Send(send) => matches!(
                    send.stage,
                    SendStage::AwaitingClearToSend
                        | SendStage::AwaitingSyncAck
                        | SendStage::Streaming { .. }
                ),
                Operation::Receive(_) => true,
                Operation::Nothing
                | Operation::Buffered { .. }
                | Operation::Generalized
                | Operation::LentOut(_) => false,
            };
            if !pending {
                continue;
            }
            if let Operation::Receive(receive) = &request.operation {
                if !receive.matched {
                    self.matcher.cancel_receive(wire_id);
                }
            }
            // A streaming send leaves pump_streams' queue once it is Done.
            self.fail_request_with(index, ErrorClass::Revoked);
        }
    }
}

impl<F: Interceptor> State<F> {
    /// Complete the requests of nonblocking agreements that are decided;
    /// whether any was.
    pub(super) fn complete_agreement_requests(&mut self) -> bool {
        let mut any = false;
        let mut index = 0;
        while index < self.agreement_requests.len() {
            let (request, key, reports_error) = self.agreement_requests[index];
            let Some(decision) = self.ulfm.take_decision(key) else {
                index += 1;
                continue;
            };
            self.agreement_requests.swap_remove(index);
            let mut kept = true;
            if let Some(entry) = self.requests.get_mut(request) {
                entry.complete = true;
                if reports_error && decision.has_unacknowledged_failure() {
                    entry.status.error = ErrorClass::ProcFailed as i32;
                }
                if entry.free_when_complete {
                    // MPI_Request_free'd: nobody will take the outcome.
                    self.requests.remove(request);
                    kept = false;
                }
            }
            if kept {
                self.agreement_decisions.push((request, decision));
            }
            any = true;
        }
        any
    }
}

impl<F: Interceptor> Engine<F> {
    /// A request for nonblocking agreement `key` (already started) on
    /// communicator `comm`: it completes in a later progress once decided,
    /// with `MPIX_ERR_PROC_FAILED` when `reports_error` and the decision
    /// holds an unacknowledged failure.
    pub fn start_agreement_request(
        &mut self,
        comm: usize,
        key: resmpi_ft::ulfm::AgreementKey,
        reports_error: bool,
    ) -> MpiResult<u32> {
        let status = Status {
            source: -1,
            tag: -1,
            error: 0,
            count_bytes: 0,
            cancelled: false,
        };
        let request = self.start_nothing(comm, status)?;
        if let Some(entry) = self.state.requests.get_mut(request) {
            entry.complete = false;
        }
        self.state
            .agreement_requests
            .push((request, key, reports_error));
        // Decided at once when this process is alone.
        self.state.complete_agreement_requests();
        Ok(request)
    }

    /// The decision of the nonblocking agreement whose request is
    /// `request` (complete), once.
    pub fn take_agreement_decision(
        &mut self,
        request: u32,
    ) -> Option<resmpi_ft::agreement::Decision> {
        let decisions = &mut self.state.agreement_decisions;
        let position = decisions.iter().position(|(other, _)| *other == request)?;
        Some(decisions.swap_remove(position).1)
    }

    /// `MPIX_Comm_revoke` of communicator `comm` (table index).
    pub fn revoke_communicator(&mut self, comm: usize) -> MpiResult<()> {
        let context = match self.state.comms.get(comm) {
            Some(Some(communicator)) => communicator.context,
            _ => return Err(MpiError::new(ErrorClass::Comm, "invalid communicator")),
        };
        if self.state.ulfm.mark_revoked(context) {
            self.state.apply_revocation(context);
        } else if !self.state.comm_revoked(comm) {
            // Revoked before this process held the communicator.
            self.state.apply_revocation(context);
        }
        self.progress().map(|_| ())
    }

    /// A newly added communicator `comm` whose context a peer revoked
    /// already: revoke it here too.
    pub fn apply_early_revocation(&mut self, comm: usize) {
        let context = match self.state.comms.get(comm) {
            Some(Some(communicator)) => communicator.context,
            _ => return,
        };
        if self.state.ulfm.is_revoked(context) {
            self.state.apply_revocation(context);
        }
    }

    /// A request already complete with `MPIX_ERR_REVOKED` (an operation
    /// started on a revoked communicator).
    pub(super) fn start_revoked(&mut self, comm: usize) -> MpiResult<u32> {
        let status = Status {
            source: -1,
            tag: -1,
            error: ErrorClass::Revoked as i32,
            count_bytes: 0,
            cancelled: false,
        };
        self.start_nothing(comm, status)
    }
}
