//! Three ranks' protocols wired together by hand: determinants reach the
//! holder and are acked before sends may start, a restarted rank gets its
//! determinants back and pins its wildcards to them, and a restarted
//! holder is sent its ward's list again.

use super::*;
use resmpi_ft::Envelope;

fn any_source() -> ReceivePattern {
    ReceivePattern {
        source: None,
        context: 0,
        tag: Some(1),
    }
}

fn matched(receive: u64, source: u32) -> MatchEvent {
    MatchEvent {
        receive_token: receive,
        pattern: any_source(),
        envelope: Envelope {
            source,
            context: 0,
            tag: 1,
        },
    }
}

/// Deliver every queued protocol frame until none is left.
fn exchange(ranks: &mut [MessageLog]) {
    loop {
        let mut moved = false;
        for from in 0..ranks.len() {
            while let Some((to, bytes)) = ranks[from].poll_protocol_frame() {
                ranks[to as usize].on_protocol_frame(from as u32, &bytes);
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

#[test]
fn a_wildcard_match_holds_sends_until_the_holder_acknowledges_it() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    assert_eq!(
        ranks[0].on_wildcard_receive(10, &any_source()),
        WildcardDecision::AnySource
    );
    assert!(ranks[0].send_may_start());
    ranks[0].on_match(&matched(10, 2));
    assert!(!ranks[0].send_may_start());
    exchange(&mut ranks);
    assert!(ranks[0].send_may_start());
    assert_eq!(
        ranks[1].held,
        vec![Determinant {
            ordinal: 0,
            source: 2
        }]
    );
}

#[test]
fn a_restarted_rank_defers_wildcards_until_its_replay_then_pins_them() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    for (receive, source) in [(1, 2), (2, 1), (3, 2)] {
        ranks[0].on_wildcard_receive(receive, &any_source());
        ranks[0].on_match(&matched(receive, source));
        exchange(&mut ranks);
    }
    // Rank 0 dies and starts again.
    assert_eq!(ranks[1].on_peer_failure(0), PeerFailureAction::Handled);
    assert_eq!(ranks[2].on_peer_failure(0), PeerFailureAction::Handled);
    ranks[0] = MessageLog::new(0, 3, 1, 1 << 20);
    assert_eq!(
        ranks[0].on_wildcard_receive(7, &any_source()),
        WildcardDecision::Defer
    );
    ranks[1].on_peer_rejoin(0);
    ranks[2].on_peer_rejoin(0);
    exchange(&mut ranks);
    assert!(ranks[0].replay_complete());
    assert_eq!(ranks[0].poll_released_receive(), Some((7, Some(2))));
    assert_eq!(
        ranks[0].on_wildcard_receive(8, &any_source()),
        WildcardDecision::Pin(1)
    );
    assert_eq!(
        ranks[0].on_wildcard_receive(9, &any_source()),
        WildcardDecision::Pin(2)
    );
    // Replayed matches are not logged again; the next one is, after them.
    ranks[0].on_match(&matched(7, 2));
    assert!(ranks[0].send_may_start());
    assert_eq!(
        ranks[0].on_wildcard_receive(11, &any_source()),
        WildcardDecision::AnySource
    );
    ranks[0].on_match(&matched(11, 1));
    assert!(!ranks[0].send_may_start());
    exchange(&mut ranks);
    assert!(ranks[0].send_may_start());
    assert_eq!(ranks[1].held.len(), 4);
    assert_eq!(
        ranks[1].held[3],
        Determinant {
            ordinal: 3,
            source: 1
        }
    );
}

#[test]
fn a_restarted_holder_gets_its_wards_determinants_again() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    ranks[0].on_wildcard_receive(1, &any_source());
    ranks[0].on_match(&matched(1, 2));
    exchange(&mut ranks);
    ranks[0].on_peer_failure(1);
    ranks[2].on_peer_failure(1);
    // A determinant made while the holder is down waits for it.
    ranks[0].on_wildcard_receive(2, &any_source());
    ranks[0].on_match(&matched(2, 2));
    exchange(&mut ranks);
    assert!(!ranks[0].send_may_start());
    ranks[1] = MessageLog::new(1, 3, 1, 1 << 20);
    ranks[0].on_peer_rejoin(1);
    ranks[2].on_peer_rejoin(1);
    exchange(&mut ranks);
    assert!(ranks[0].send_may_start());
    assert_eq!(ranks[1].held.len(), 2);
    assert!(ranks[1].replay_complete());
}

#[test]
fn payloads_are_replayed_by_destination_and_number_and_a_full_log_refuses_restarts() {
    let mut rank = MessageLog::new(0, 2, 0, 200);
    let message = |logical_seq| SentMessage {
        destination: 1,
        context: 4,
        tag: 9,
        logical_seq,
    };
    rank.on_send_payload(&message(1), Payload::Contiguous(b"abc"));
    assert_eq!(rank.replay_message(1, 1), Some((4, 9, &b"abc"[..])));
    assert_eq!(rank.on_peer_failure(1), PeerFailureAction::Handled);
    rank.on_send_payload(&message(2), Payload::Contiguous(&[0; 300]));
    assert!(!rank.log_complete());
    assert_eq!(rank.on_peer_failure(1), PeerFailureAction::AbortJob);
}
