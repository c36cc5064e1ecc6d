//! ULFM's protocol traffic for one process, sans-IO: the agreements this
//! process takes part in (one [`Agreement`] per (context, sequence)), the
//! decisions it keeps to answer late askers, messages that arrive before
//! the local call starts, and the revoke flood. The engine hands it
//! protocol frames and failure notices, and sends what it hands out; it
//! holds no communicator, no socket and no clock.
//!
//! Why a table rather than one machine per call: a peer may start an
//! agreement before this process does (its messages wait here), and a
//! process that decided and returned must still answer a later
//! coordinator that asks (the history). Both are bounded: a peer can be at
//! most one agreement ahead on a communicator (the next one needs this
//! process's report or acknowledgement), and at most one behind.
//!
//! Wire form (little-endian): version (1 byte), kind (1 byte), context
//! (u32), sequence (u32), then per kind: `Revoke` nothing more; `Ack` the
//! ballot (u32); `Report`, `Propose`, `Decide` the ballot (u32, 0 unless
//! Propose), the participant count (u32), flag (i32), second-group flag
//! (i32; all ones in a report), next context (u32),
//! the failed and acknowledged bitmaps. Decoding is checked: a short or
//! inconsistent frame is refused, never trusted.

use std::collections::VecDeque;

use crate::agreement::{Agreement, Contribution, Decision, Message};
use crate::member_set::MemberSet;

/// Version byte of the wire form.
const WIRE_VERSION: u8 = 1;
const KIND_REPORT: u8 = 1;
const KIND_PROPOSE: u8 = 2;
const KIND_ACK: u8 = 3;
const KIND_DECIDE: u8 = 4;
const KIND_REVOKE: u8 = 5;

/// Decided agreements remembered to answer late askers.
pub const DECIDED_HISTORY_COUNT: usize = 256;
/// Messages kept for agreements this process has not started yet.
pub const EARLY_MESSAGES_MAX: usize = 1 << 16;

/// Which agreement: the communicator's context id and the agreement's
/// number on it (every member counts its agreements the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgreementKey {
    /// The communicator's (point-to-point) context id.
    pub context: u32,
    /// The agreement's number on that communicator, from 0.
    pub sequence: u32,
}

/// A decoded ULFM frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UlfmFrame {
    /// A message of agreement `key`.
    Agreement {
        /// Which agreement.
        key: AgreementKey,
        /// The message.
        message: Message,
    },
    /// The communicator of `context` is revoked.
    Revoke {
        /// Its context id.
        context: u32,
    },
}

/// Encode a frame.
pub fn encode_frame(frame: &UlfmFrame) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    out.push(WIRE_VERSION);
    match frame {
        UlfmFrame::Revoke { context } => {
            out.push(KIND_REVOKE);
            out.extend_from_slice(&context.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        UlfmFrame::Agreement { key, message } => {
            let (kind, ballot, decision) = match message {
                Message::Report(contribution) => {
                    (KIND_REPORT, 0, Some(contribution_fields(contribution)))
                }
                Message::Propose { ballot, decision } => {
                    (KIND_PROPOSE, *ballot, Some(decision_fields(decision)))
                }
                Message::Ack { ballot } => (KIND_ACK, *ballot, None),
                Message::Decide(decision) => (KIND_DECIDE, 0, Some(decision_fields(decision))),
            };
            out.push(kind);
            out.extend_from_slice(&key.context.to_le_bytes());
            out.extend_from_slice(&key.sequence.to_le_bytes());
            out.extend_from_slice(&ballot.to_le_bytes());
            if let Some((flag, second_flag, next_context, failed, acknowledged)) = decision {
                out.extend_from_slice(&(failed.size() as u32).to_le_bytes());
                out.extend_from_slice(&flag.to_le_bytes());
                out.extend_from_slice(&second_flag.to_le_bytes());
                out.extend_from_slice(&next_context.to_le_bytes());
                failed.encode(&mut out);
                acknowledged.encode(&mut out);
            }
        }
    }
    out
}

type Fields<'a> = (i32, i32, u32, &'a MemberSet, &'a MemberSet);

fn contribution_fields(contribution: &Contribution) -> Fields<'_> {
    (
        contribution.flag,
        !0,
        contribution.next_context,
        &contribution.failed,
        &contribution.acknowledged,
    )
}

fn decision_fields(decision: &Decision) -> Fields<'_> {
    (
        decision.flag,
        decision.second_flag,
        decision.next_context,
        &decision.failed,
        &decision.acknowledged,
    )
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Decode a frame; None for anything malformed.
pub fn decode_frame(bytes: &[u8]) -> Option<UlfmFrame> {
    if *bytes.first()? != WIRE_VERSION {
        return None;
    }
    let kind = *bytes.get(1)?;
    let context = read_u32(bytes, 2)?;
    let sequence = read_u32(bytes, 6)?;
    if kind == KIND_REVOKE {
        return (bytes.len() == 10).then_some(UlfmFrame::Revoke { context });
    }
    let key = AgreementKey { context, sequence };
    let ballot = read_u32(bytes, 10)?;
    if kind == KIND_ACK {
        return (bytes.len() == 14).then_some(UlfmFrame::Agreement {
            key,
            message: Message::Ack { ballot },
        });
    }
    let size = read_u32(bytes, 14)? as usize;
    let flag = read_u32(bytes, 18)? as i32;
    let second_flag = read_u32(bytes, 22)? as i32;
    let next_context = read_u32(bytes, 26)?;
    let set_len = MemberSet::encoded_len(size);
    if bytes.len() != 30 + 2 * set_len {
        return None;
    }
    let failed = MemberSet::decode(size, &bytes[30..])?;
    let acknowledged = MemberSet::decode(size, &bytes[30 + set_len..])?;
    let message = match kind {
        KIND_REPORT if second_flag == !0 => Message::Report(Contribution {
            flag,
            failed,
            acknowledged,
            next_context,
        }),
        KIND_PROPOSE | KIND_DECIDE => {
            let decision = Decision {
                flag,
                second_flag,
                failed,
                acknowledged,
                next_context,
            };
            if kind == KIND_PROPOSE {
                Message::Propose { ballot, decision }
            } else {
                Message::Decide(decision)
            }
        }
        _ => return None,
    };
    Some(UlfmFrame::Agreement { key, message })
}

/// An agreement in progress here.
#[derive(Debug)]
struct Active {
    key: AgreementKey,
    /// World rank of each participant.
    members: Vec<u32>,
    machine: Agreement,
}

/// ULFM traffic of one process (see the module comment).
#[derive(Debug, Default)]
pub struct AgreementTable {
    active: Vec<Active>,
    /// Decided agreements, oldest first, with their members' world ranks.
    decided: VecDeque<(AgreementKey, Vec<u32>, Decision)>,
    /// Messages for agreements not started here: (key, world rank, message).
    early: Vec<(AgreementKey, u32, Message)>,
    /// Early messages dropped at the bound (should stay 0).
    pub early_messages_dropped: u64,
    /// Contexts revoked here (by this process or a flood), newest last.
    revoked: Vec<u32>,
    /// Revocations learned from a frame and not yet taken by the engine.
    revocations: VecDeque<u32>,
    outbox: VecDeque<(u32, Vec<u8>)>,
}

impl AgreementTable {
    /// Start agreement `key` among `members` (world ranks, indexed by
    /// participant; those from `split` on form a second group whose flags
    /// are ANDed apart, `members.len()` for none), this process being
    /// `me`, with `contribution`;
    /// `known_failed` are the participants known dead now. Messages that
    /// arrived for it earlier are handled at once. A key already running
    /// or decided here is refused (false).
    pub fn start(
        &mut self,
        key: AgreementKey,
        members: Vec<u32>,
        me: usize,
        split: usize,
        contribution: Contribution,
        known_failed: MemberSet,
    ) -> bool {
        if self.active.iter().any(|active| active.key == key)
            || self.decided.iter().any(|(decided, ..)| *decided == key)
        {
            return false;
        }
        let machine = Agreement::start(me, members.len(), split, contribution, known_failed);
        self.active.push(Active {
            key,
            members,
            machine,
        });
        let slot = self.active.len() - 1;
        let early = std::mem::take(&mut self.early);
        for (early_key, from, message) in early {
            if early_key == key {
                self.deliver(slot, from, message);
            } else {
                self.early.push((early_key, from, message));
            }
        }
        self.flush(slot);
        true
    }

    /// The decision of agreement `key`, if reached; the agreement then
    /// moves to the history (it still answers late askers from there).
    pub fn take_decision(&mut self, key: AgreementKey) -> Option<Decision> {
        let slot = self.active.iter().position(|active| active.key == key)?;
        let decision = self.active[slot].machine.decision()?.clone();
        let active = self.active.swap_remove(slot);
        if self.decided.len() == DECIDED_HISTORY_COUNT {
            self.decided.pop_front();
        }
        self.decided
            .push_back((key, active.members, decision.clone()));
        Some(decision)
    }

    /// Whether agreement `key` is running here.
    pub fn is_active(&self, key: AgreementKey) -> bool {
        self.active.iter().any(|active| active.key == key)
    }

    /// A ULFM frame from world rank `from`. False when it is malformed.
    pub fn handle_frame(&mut self, from: u32, bytes: &[u8]) -> bool {
        match decode_frame(bytes) {
            Some(UlfmFrame::Revoke { context }) => {
                if self.mark_revoked(context) {
                    self.revocations.push_back(context);
                }
                true
            }
            Some(UlfmFrame::Agreement { key, message }) => {
                self.handle_agreement_message(key, from, message);
                true
            }
            None => false,
        }
    }

    fn handle_agreement_message(&mut self, key: AgreementKey, from: u32, message: Message) {
        if let Some(slot) = self.active.iter().position(|active| active.key == key) {
            self.deliver(slot, from, message);
            self.flush(slot);
            return;
        }
        if let Some((_, members, decision)) =
            self.decided.iter().find(|(decided, ..)| *decided == key)
        {
            // Decided here already: answer from the history (see agreement.rs).
            if !members.contains(&from) {
                return;
            }
            let answer = match message {
                Message::Report(_) => Some(Message::Decide(decision.clone())),
                Message::Propose { ballot, .. } => Some(Message::Ack { ballot }),
                Message::Ack { .. } | Message::Decide(_) => None,
            };
            if let Some(answer) = answer {
                let bytes = encode_frame(&UlfmFrame::Agreement {
                    key,
                    message: answer,
                });
                self.outbox.push_back((from, bytes));
            }
            return;
        }
        if self.early.len() >= EARLY_MESSAGES_MAX {
            self.early_messages_dropped += 1;
            return;
        }
        self.early.push((key, from, message));
    }

    /// World rank `peer` has died.
    pub fn handle_peer_failure(&mut self, peer: u32) {
        for slot in 0..self.active.len() {
            if let Some(index) = self.active[slot]
                .members
                .iter()
                .position(|&member| member == peer)
            {
                self.active[slot].machine.handle_failure(index);
                self.flush(slot);
            }
        }
        self.early.retain(|(_, from, _)| *from != peer);
    }

    fn deliver(&mut self, slot: usize, from: u32, message: Message) {
        let active = &mut self.active[slot];
        if let Some(index) = active.members.iter().position(|&member| member == from) {
            active.machine.handle_message(index, message);
        }
    }

    fn flush(&mut self, slot: usize) {
        let active = &mut self.active[slot];
        while let Some((to, message)) = active.machine.poll_transmit() {
            let bytes = encode_frame(&UlfmFrame::Agreement {
                key: active.key,
                message,
            });
            self.outbox.push_back((active.members[to], bytes));
        }
    }

    /// Record that `context` is revoked; true the first time (the caller
    /// then forwards the revoke to every other member, once).
    pub fn mark_revoked(&mut self, context: u32) -> bool {
        if self.revoked.contains(&context) {
            return false;
        }
        self.revoked.push(context);
        true
    }

    /// Whether `context` was revoked here.
    pub fn is_revoked(&self, context: u32) -> bool {
        self.revoked.contains(&context)
    }

    /// A context a revoke frame revoked for the first time here: the
    /// engine fails its pending operations and forwards the revoke.
    pub fn poll_revocation(&mut self) -> Option<u32> {
        self.revocations.pop_front()
    }

    /// The next frame to send: (world rank, bytes).
    pub fn poll_transmit(&mut self) -> Option<(u32, Vec<u8>)> {
        self.outbox.pop_front()
    }

    /// Queue a revoke of `context` for world rank `peer`.
    pub fn send_revoke(&mut self, peer: u32, context: u32) {
        self.outbox
            .push_back((peer, encode_frame(&UlfmFrame::Revoke { context })));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_decision(size: usize) -> Decision {
        Decision {
            flag: -7,
            second_flag: 5,
            failed: MemberSet::from_fn(size, |index| index == 2),
            acknowledged: MemberSet::from_fn(size, |index| index < 2),
            next_context: 40,
        }
    }

    #[test]
    fn every_frame_kind_round_trips() {
        let key = AgreementKey {
            context: 12,
            sequence: 3,
        };
        let decision = sample_decision(11);
        let frames = [
            UlfmFrame::Revoke { context: 8 },
            UlfmFrame::Agreement {
                key,
                message: Message::Ack { ballot: 4 },
            },
            UlfmFrame::Agreement {
                key,
                message: Message::Decide(decision.clone()),
            },
            UlfmFrame::Agreement {
                key,
                message: Message::Propose {
                    ballot: 1,
                    decision: decision.clone(),
                },
            },
            UlfmFrame::Agreement {
                key,
                message: Message::Report(Contribution {
                    flag: 1,
                    failed: decision.failed.clone(),
                    acknowledged: decision.acknowledged.clone(),
                    next_context: 9,
                }),
            },
        ];
        for frame in frames {
            let bytes = encode_frame(&frame);
            assert_eq!(decode_frame(&bytes), Some(frame));
            // Every truncation and a trailing byte are refused.
            for cut in 0..bytes.len() {
                assert_eq!(decode_frame(&bytes[..cut]), None);
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(decode_frame(&longer), None);
        }
    }

    #[test]
    fn a_decided_agreement_answers_a_late_report_with_its_decision() {
        let mut table = AgreementTable::default();
        let key = AgreementKey {
            context: 4,
            sequence: 0,
        };
        let contribution = Contribution {
            flag: 1,
            failed: MemberSet::empty(1),
            acknowledged: MemberSet::empty(1),
            next_context: 6,
        };
        assert!(table.start(
            key,
            vec![5],
            0,
            1,
            contribution.clone(),
            MemberSet::empty(1)
        ));
        let decision = table.take_decision(key).expect("alone: decided at once");
        assert!(!table.start(
            key,
            vec![5],
            0,
            1,
            contribution.clone(),
            MemberSet::empty(1)
        ));
        // Participant world rank 5 asks again (it is the only member).
        table.handle_frame(
            5,
            &encode_frame(&UlfmFrame::Agreement {
                key,
                message: Message::Report(contribution),
            }),
        );
        let (to, bytes) = table.poll_transmit().expect("answered");
        assert_eq!(to, 5);
        assert_eq!(
            decode_frame(&bytes),
            Some(UlfmFrame::Agreement {
                key,
                message: Message::Decide(decision)
            })
        );
    }
}
