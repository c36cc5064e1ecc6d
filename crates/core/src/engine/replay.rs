//! Message logging in the engine (`Interceptor::LOGS_MESSAGES`): what a
//! survivor does while a dead peer restarts from `MPI_Init` and replays,
//! and what it does with the messages the replay sends again.
//!
//! Why here and not in the protocol: the protocol (`resmpi-msglog`) keeps
//! the logs and determinants, sans-IO; only the engine owns requests,
//! credit and the per-channel numbers. Every branch into this file is
//! behind `F::LOGS_MESSAGES`, so other builds compile none of it in.
//!
//! The rules:
//! - **A death the protocol takes as `Handled`** makes the peer
//!   *restarting* ([`Engine::await_restart`]): its link and everything
//!   queued or streaming to it are dropped, and every send to it that has
//!   not ended completes (its payload is in the sender log). Nothing
//!   waiting *for* it fails: receives from it, a rendezvous it announced
//!   (matched or not) stay, since its new incarnation sends the same
//!   messages again. Sends to it from then on are numbered and logged and
//!   complete at once; frames to it are dropped.
//! - **Re-join** ([`Engine::replay_to`]): the channel's logical numbers
//!   are kept (not reset as for a fresh peer), and every message numbered
//!   for the peer, 1 to the last, is sent again from the log in order, as
//!   internal requests that own a copy of their bytes.
//! - **What the new incarnation re-sends** is numbered as before: a
//!   number already taken is a duplicate ([`State::replayed_duplicate`]):
//!   an eager one returns its credit (and answers a synchronous send); a
//!   request-to-send whose data all landed is answered
//!   `ALREADY_DELIVERED`; one whose data had not all landed when its first
//!   sender died re-points the rendezvous to the new incarnation (the
//!   replication protocol's `repoint_rendezvous`, with the same process as
//!   old and new sender).
//! - **Pessimistic sends**: while the protocol says a determinant is not
//!   stable ([`resmpi_ft::Interceptor::send_may_start`]), sends are queued
//!   in order without a number and launched by progress once it is; never
//!   a wait inside the engine (collective schedules start sends from
//!   progress).

use resmpi_ft::Interceptor;
use resmpi_wire::{FrameHeader, FrameKind, FLAG_SYNC};

use super::{send_request, Engine, State};
use crate::error::{ErrorClass, MpiError};
use crate::request::{Operation, Request, SendMode};
use crate::user_bytes::UserBytes;

impl<F: Interceptor> State<F> {
    /// Whether world rank `peer` is dead and awaited back (message logging).
    #[inline]
    pub(super) fn is_restarting(&self, peer: u32) -> bool {
        F::LOGS_MESSAGES && self.restarting.get(peer as usize).copied().unwrap_or(false)
    }

    /// Whether a send starting now must wait for the log: a determinant
    /// is not stable, or earlier sends wait already (order).
    #[inline]
    pub(super) fn send_waits_for_log(&mut self) -> bool {
        self.interceptor.before_send();
        // A held re-send goes first: the peer's numbers arrive in order.
        !self.sends_waiting_for_log.is_empty()
            || !self.replays_held.is_empty()
            || !self.interceptor.send_may_start()
    }

    /// A message frame from `peer` whose number was taken already: the new
    /// incarnation's replay of a message delivered from the old one.
    pub(super) fn replayed_duplicate(&mut self, peer: u32, header: &FrameHeader) {
        if header.logical_seq > self.message_seq_in[peer as usize] {
            // A gap, reported by `take_message_seq`.
            return;
        }
        if header.kind == FrameKind::RequestToSend {
            self.repoint_rendezvous(peer, peer, header);
            return;
        }
        self.return_credit(peer, header.payload_len as usize);
        if header.flags & FLAG_SYNC != 0 {
            self.answer_duplicate_sync(peer, peer, header);
        }
    }
}

impl<F: Interceptor> Engine<F> {
    /// Launch, in order, the sends that waited for the log, if it is
    /// stable now. Returns how many went.
    pub(super) fn launch_sends_waiting_for_log(&mut self) -> crate::error::MpiResult<usize> {
        let mut launched = 0;
        while !self.state.sends_waiting_for_log.is_empty()
            && self.state.replays_held.is_empty()
            && self.state.interceptor.send_may_start()
        {
            let (index, mode) = self
                .state
                .sends_waiting_for_log
                .pop_front()
                .expect("not empty");
            let live = matches!(
                self.state.requests.get(index),
                Some(Request {
                    operation: Operation::Send(_),
                    complete: false,
                    ..
                })
            );
            if live {
                self.launch_send(index, mode)?;
            }
            launched += 1;
        }
        Ok(launched)
    }

    /// `MPI_Finalize`, past its barrier: under message logging, stay (and
    /// make progress: re-join, replay) until the protocol says no peer can
    /// need this process's log any more. Nothing to do otherwise.
    pub fn wait_until_peers_need_no_replay(&mut self) -> crate::error::MpiResult<()> {
        if !F::LOGS_MESSAGES {
            return Ok(());
        }
        self.state.interceptor.on_finalize();
        // One round hands the protocol's `Finished` frames to the paths
        // even when every peer's came first (the wait would end at once).
        self.progress_round()?;
        self.wait_until(|engine| engine.state.interceptor.may_leave())
    }

    /// World rank `dead` died and the protocol awaits its new incarnation:
    /// drop what was on the way to it and complete the sends to it (they
    /// are logged); fail nothing.
    pub(super) fn await_restart(&mut self, dead: u32) {
        self.state.restarting[dead as usize] = true;
        // Not numbered yet: launched later, a waiting send is logged then.
        let waiting: Vec<u32> = (self.state.sends_waiting_for_log.iter())
            .map(|(index, _)| *index)
            .collect();
        self.stop_sending_to(dead, |index, _| waiting.contains(&index));
    }

    /// Re-send the log to the re-joined peers whose re-send the protocol
    /// held and no longer holds (before any send that waited for the log
    /// goes: the peer's numbers must arrive in order). Returns how many.
    pub(super) fn release_held_replays(&mut self) -> usize {
        if self.state.replays_held.is_empty() {
            return 0;
        }
        let held = std::mem::take(&mut self.state.replays_held);
        let mut released = 0;
        for peer in held {
            if self.state.is_restarting(peer) {
                // Dead again: its next incarnation's re-join re-sends.
                continue;
            }
            if self.state.interceptor.holds_replay_to(peer) {
                self.state.replays_held.push(peer);
            } else {
                self.replay_to(peer);
                released += 1;
            }
        }
        released
    }

    /// Incarnation `peer` re-joined: send it again, from the log and in
    /// order, every message numbered for it that the log holds (all of
    /// them unless its checkpoint covered some: it replays from `MPI_Init`
    /// or resumes from that checkpoint, `engine/position.rs`).
    pub(super) fn replay_to(&mut self, peer: u32) {
        let last = self.state.message_seq_out[peer as usize];
        // What the peer's checkpoint covers was trimmed from the log (and
        // a replacement's log starts after its own checkpoint): the peer
        // resumes above it, or refuses the gap (`take_message_seq`).
        let first = self.state.interceptor.replay_first(peer).max(1);
        for logical_seq in first..=last {
            self.state.messages_replayed += 1;
            if let Err(error) = self.resend_logged(peer, logical_seq) {
                self.state.fail_later(error);
                return;
            }
        }
    }

    fn resend_logged(&mut self, peer: u32, logical_seq: u64) -> crate::error::MpiResult<()> {
        let (context, tag, mut owned) = self
            .state
            .interceptor
            .replay_message(peer, logical_seq)
            .map_err(|reason| {
                MpiError::new(
                    ErrorClass::ProcFailed,
                    format!("message logging: rank {peer} restarted, but {reason}"),
                )
            })?;
        let length = owned.len();
        let bytes = UserBytes::from(owned.as_mut_ptr());
        let mut request = send_request(0, peer, (context, tag), bytes, length, Some(owned), false);
        request.free_when_complete = true;
        if let Operation::Send(send) = &mut request.operation {
            send.logical_seq = logical_seq;
            send.resend = true;
        }
        let index = self.insert_request(request)?;
        self.launch_send(index, SendMode::Standard)
    }
}
