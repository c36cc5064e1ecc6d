//! MPI message matching, sans-IO.
//!
//! The matcher owns the two queues every MPI implementation has: receives
//! posted by the application that no message has matched yet, and messages
//! that arrived before any receive wanted them ("unexpected"). It knows
//! nothing about buffers, paths or time: callers hand it envelopes plus an
//! opaque value (`M` for a message, a `u64` token for a receive) and get back
//! what matched. MPI's non-overtaking rule holds as long as the caller feeds
//! arrivals from each sender in that sender's order, which the reliability
//! layer guarantees: both queues are scanned oldest first.
//!
//! Each match is also reported as a [`MatchEvent`] through
//! [`Matcher::poll_event`], the seam where fault-tolerance protocols (message
//! logging's determinants for ANY_SOURCE) observe non-deterministic choices.
#![warn(missing_docs)]

use std::collections::VecDeque;

/// The matching key a message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// Sender's rank in MPI_COMM_WORLD.
    pub source: u32,
    /// Communicator context id.
    pub context: u32,
    /// Message tag (never negative for application messages).
    pub tag: i32,
}

/// What a receive (or probe) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivePattern {
    /// Communicator context id; always exact.
    pub context: u32,
    /// World rank of the wanted sender, or `None` for MPI_ANY_SOURCE.
    pub source: Option<u32>,
    /// Wanted tag, or `None` for MPI_ANY_TAG.
    pub tag: Option<i32>,
}

impl ReceivePattern {
    /// Whether a message with this envelope satisfies the pattern.
    #[inline]
    pub fn matches(&self, envelope: &Envelope) -> bool {
        self.context == envelope.context
            && self.source.is_none_or(|source| source == envelope.source)
            && self.tag.is_none_or(|tag| tag == envelope.tag)
    }
}

/// A match that happened, for interceptors that log non-determinism.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatchEvent {
    /// The receive's token.
    pub receive_token: u64,
    /// The pattern the receive was posted with.
    pub pattern: ReceivePattern,
    /// The envelope of the message it matched.
    pub envelope: Envelope,
}

/// Posted and unexpected queues. `M` is whatever the caller keeps for an
/// unexpected message (buffered eager payload, or a rendezvous handle).
#[derive(Debug)]
pub struct Matcher<M> {
    posted: VecDeque<(ReceivePattern, u64)>,
    unexpected: VecDeque<(Envelope, M)>,
    events: VecDeque<MatchEvent>,
    record_events: bool,
}

impl<M> Default for Matcher<M> {
    fn default() -> Self {
        Matcher::new()
    }
}

impl<M> Matcher<M> {
    /// An empty matcher; events are not recorded until enabled.
    pub fn new() -> Matcher<M> {
        Matcher {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
            events: VecDeque::new(),
            record_events: false,
        }
    }

    /// Record every match for [`Matcher::poll_event`] (off by default so the
    /// pass-through configuration costs nothing).
    pub fn set_record_events(&mut self, record: bool) {
        self.record_events = record;
    }

    /// Post a receive. If an unexpected message already satisfies it, the
    /// oldest such message is removed and returned; otherwise the receive is
    /// queued under `token`.
    pub fn post_receive(&mut self, pattern: ReceivePattern, token: u64) -> Option<(Envelope, M)> {
        let position = self
            .unexpected
            .iter()
            .position(|(envelope, _)| pattern.matches(envelope));
        match position {
            Some(index) => {
                let (envelope, message) = if index == 0 {
                    self.unexpected.pop_front()?
                } else {
                    self.unexpected.remove(index)?
                };
                self.record(token, pattern, envelope);
                Some((envelope, message))
            }
            None => {
                self.posted.push_back((pattern, token));
                None
            }
        }
    }

    /// A message arrived. If a posted receive wants it, the oldest such
    /// receive is removed and its token returned; otherwise the message
    /// value is built (by `make_message`) and queued as unexpected, and
    /// `None` is returned. Building the value only when it is queued means a
    /// matched message costs no allocation.
    ///
    /// This is the only arrival function: the engine and the simulator both
    /// match through it, so an ordering bug here cannot hide from the sims.
    pub fn handle_arrival_with(
        &mut self,
        envelope: Envelope,
        make_message: impl FnOnce() -> M,
    ) -> Option<u64> {
        let position = self
            .posted
            .iter()
            .position(|(pattern, _)| pattern.matches(&envelope));
        match position {
            Some(index) => {
                // The oldest receive is the usual match: take it off the
                // front without shifting the queue.
                let (pattern, token) = if index == 0 {
                    self.posted.pop_front()?
                } else {
                    self.posted.remove(index)?
                };
                self.record(token, pattern, envelope);
                Some(token)
            }
            None => {
                self.unexpected.push_back((envelope, make_message()));
                None
            }
        }
    }

    /// The oldest unexpected message satisfying `pattern`, left in place (MPI_Iprobe).
    pub fn probe(&self, pattern: &ReceivePattern) -> Option<(&Envelope, &M)> {
        self.unexpected
            .iter()
            .find(|(envelope, _)| pattern.matches(envelope))
            .map(|(envelope, message)| (envelope, message))
    }

    /// Remove and return the oldest unexpected message satisfying `pattern`
    /// (MPI_Mprobe/Improbe: the message can then only be received by Mrecv).
    pub fn take_unexpected(&mut self, pattern: &ReceivePattern) -> Option<(Envelope, M)> {
        let index = self
            .unexpected
            .iter()
            .position(|(envelope, _)| pattern.matches(envelope))?;
        self.unexpected.remove(index)
    }

    /// Withdraw a posted receive (MPI_Cancel). True if it was still posted.
    pub fn cancel_receive(&mut self, token: u64) -> bool {
        match self.posted.iter().position(|(_, posted)| *posted == token) {
            Some(index) => {
                self.posted.remove(index);
                true
            }
            None => false,
        }
    }

    /// Give the posted receive of token `old` the token `new`, keeping its
    /// place in the queue. True if it was still posted.
    pub fn replace_token(&mut self, old: u64, new: u64) -> bool {
        match self.posted.iter_mut().find(|(_, token)| *token == old) {
            Some((_, token)) => {
                *token = new;
                true
            }
            None => false,
        }
    }

    /// Remove and return the oldest unexpected message for which `chosen`
    /// holds (a sender withdrawing a message it cancelled), or None if no
    /// such message waits any more (it was matched).
    pub fn withdraw_unexpected(
        &mut self,
        chosen: impl Fn(&Envelope, &M) -> bool,
    ) -> Option<(Envelope, M)> {
        let index = self
            .unexpected
            .iter()
            .position(|(envelope, message)| chosen(envelope, message))?;
        self.unexpected.remove(index)
    }

    /// Mutable access to unexpected messages, oldest first (for bookkeeping
    /// such as completing a buffered message's data in place).
    pub fn unexpected_mut(&mut self) -> impl Iterator<Item = (&Envelope, &mut M)> {
        self.unexpected
            .iter_mut()
            .map(|(envelope, message)| (&*envelope, message))
    }

    /// Number of receives waiting for a message.
    pub fn posted_len(&self) -> usize {
        self.posted.len()
    }

    /// Number of messages waiting for a receive.
    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
    }

    /// Next recorded match, oldest first.
    pub fn poll_event(&mut self) -> Option<MatchEvent> {
        self.events.pop_front()
    }

    fn record(&mut self, receive_token: u64, pattern: ReceivePattern, envelope: Envelope) {
        if self.record_events {
            self.events.push_back(MatchEvent {
                receive_token,
                pattern,
                envelope,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(source: u32, tag: i32) -> Envelope {
        Envelope {
            source,
            context: 0,
            tag,
        }
    }

    fn pattern(source: Option<u32>, tag: Option<i32>) -> ReceivePattern {
        ReceivePattern {
            context: 0,
            source,
            tag,
        }
    }

    #[test]
    fn arrival_matches_oldest_posted_receive_first() {
        let mut matcher = Matcher::new();
        assert!(matcher.post_receive(pattern(None, None), 1).is_none());
        assert!(matcher.post_receive(pattern(Some(3), Some(5)), 2).is_none());
        assert_eq!(matcher.handle_arrival_with(envelope(3, 5), || "a"), Some(1));
        assert_eq!(matcher.handle_arrival_with(envelope(3, 5), || "b"), Some(2));
        assert_eq!(matcher.posted_len(), 0);
    }

    #[test]
    fn a_matched_arrival_builds_no_message_value() {
        let mut matcher: Matcher<&str> = Matcher::new();
        matcher.post_receive(pattern(Some(1), None), 9);
        let matched = matcher.handle_arrival_with(envelope(1, 4), || panic!("built for a match"));
        assert_eq!(matched, Some(9));
        assert_eq!(matcher.unexpected_len(), 0);
    }

    #[test]
    fn a_withdrawn_message_is_gone_and_the_others_keep_their_order() {
        let mut matcher = Matcher::new();
        for index in 0..4 {
            assert!(matcher
                .handle_arrival_with(envelope(1, 7), || index)
                .is_none());
        }
        assert_eq!(
            matcher.withdraw_unexpected(|_, message| *message == 2),
            Some((envelope(1, 7), 2))
        );
        assert_eq!(
            matcher.withdraw_unexpected(|_, message| *message == 2),
            None
        );
        for index in [0, 1, 3] {
            let (_, message) = matcher.post_receive(pattern(Some(1), Some(7)), 0).unwrap();
            assert_eq!(message, index);
        }
        // Matched messages cannot be withdrawn.
        assert_eq!(matcher.withdraw_unexpected(|_, _| true), None);
    }

    #[test]
    fn unexpected_messages_match_in_arrival_order_non_overtaking() {
        let mut matcher = Matcher::new();
        for index in 0..5 {
            assert!(matcher
                .handle_arrival_with(envelope(1, 7), || index)
                .is_none());
        }
        for index in 0..5 {
            let (_, message) = matcher.post_receive(pattern(Some(1), Some(7)), 0).unwrap();
            assert_eq!(message, index);
        }
    }

    #[test]
    fn tag_and_source_and_context_must_all_agree() {
        let mut matcher = Matcher::new();
        matcher.handle_arrival_with(envelope(1, 7), || "tag7");
        matcher.handle_arrival_with(
            Envelope {
                source: 2,
                context: 4,
                tag: 9,
            },
            || "other-context",
        );
        assert!(matcher.post_receive(pattern(Some(1), Some(8)), 1).is_none());
        assert!(matcher.post_receive(pattern(Some(2), None), 2).is_none());
        assert_eq!(
            matcher.post_receive(pattern(None, Some(7)), 3).map(|m| m.1),
            Some("tag7")
        );
        assert_eq!(matcher.unexpected_len(), 1);
    }

    #[test]
    fn probe_leaves_message_and_take_removes_it() {
        let mut matcher = Matcher::new();
        matcher.handle_arrival_with(envelope(0, 1), || 10);
        assert_eq!(matcher.probe(&pattern(None, None)).map(|m| *m.1), Some(10));
        assert_eq!(matcher.unexpected_len(), 1);
        assert_eq!(
            matcher
                .take_unexpected(&pattern(Some(0), None))
                .map(|m| m.1),
            Some(10)
        );
        assert!(matcher.probe(&pattern(None, None)).is_none());
    }

    #[test]
    fn cancelled_receive_no_longer_matches() {
        let mut matcher = Matcher::new();
        matcher.post_receive(pattern(None, None), 42);
        assert!(matcher.cancel_receive(42));
        assert!(!matcher.cancel_receive(42));
        assert!(matcher.handle_arrival_with(envelope(0, 0), || ()).is_none());
        assert_eq!(matcher.unexpected_len(), 1);
    }

    #[test]
    fn events_record_any_source_decisions_when_enabled() {
        let mut matcher = Matcher::new();
        matcher.set_record_events(true);
        matcher.post_receive(pattern(None, None), 5);
        matcher.handle_arrival_with(envelope(2, 3), || ());
        let event = matcher.poll_event().unwrap();
        assert_eq!(event.receive_token, 5);
        assert_eq!(event.envelope, envelope(2, 3));
        assert!(matcher.poll_event().is_none());
    }
}
