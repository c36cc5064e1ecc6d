//! Two multi-rail `PeerLink`s on a virtual clock: rails are cut (silently)
//! or fail with a send error between steps, and the receiver's application
//! can stop consuming while its link keeps running (a progress thread).

use crate::{LinkEvent, PeerLink, ReliableConfig, StripePolicy, UnreachableCause, ACK_TAG_PROBE};
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};

const RAIL_CONFIG: ReliableConfig = ReliableConfig {
    ack_timeout_ns: 1_000,
    min_rto_ns: 1_000,
    timer_granularity_ns: 100,
    max_backoff_ns: 8_000,
    send_window_frames: 8,
    ack_delay_ns: 100,
    max_retries: 4,
    rail_count: 2,
    stripe_policy: StripePolicy::RoundRobin,
    heartbeat_interval_ns: 5_000,
    rail_silence_timeout_ns: 25_000,
    peer_silence_timeout_ns: 100_000,
    down_rail_probe_interval_ns: 10_000,
};

/// Wire latency of every rail.
const LATENCY_NS: u64 = 200;

fn data_frame(source: u32, body: &[u8]) -> Vec<u8> {
    let mut header = FrameHeader::new(FrameKind::Eager, source);
    header.payload_len = body.len() as u32;
    let mut frame = header.to_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

/// A frame on a rail: (arrival time, rail, bytes).
type InFlight = (u64, u32, Vec<u8>);

struct RailPair {
    now_ns: u64,
    a: PeerLink,
    b: PeerLink,
    a_to_b: Vec<InFlight>,
    b_to_a: Vec<InFlight>,
    /// `cut[rail]`: frames on it vanish (both directions).
    cut: Vec<bool>,
    /// Whether b's application consumes what its link delivers.
    b_consumes: bool,
    delivered_at_b: Vec<String>,
    /// (rail, is data) of every frame a put on the wire.
    sent_by_a: Vec<(u32, bool)>,
    events_at_a: Vec<LinkEvent>,
    /// Messages handed to a so far.
    handed_to_a: usize,
}

impl RailPair {
    fn new(config: ReliableConfig) -> RailPair {
        RailPair {
            now_ns: 0,
            a: PeerLink::<Vec<u8>>::new(0, 1, config),
            b: PeerLink::<Vec<u8>>::new(1, 0, config),
            a_to_b: Vec::new(),
            b_to_a: Vec::new(),
            cut: vec![false; config.rail_count as usize],
            b_consumes: true,
            delivered_at_b: Vec::new(),
            sent_by_a: Vec::new(),
            events_at_a: Vec::new(),
            handed_to_a: 0,
        }
    }

    fn send_from_a(&mut self, count: usize) {
        for _ in 0..count {
            let text = format!("message {}", self.handed_to_a);
            self.handed_to_a += 1;
            self.a
                .handle_send(self.now_ns, data_frame(0, text.as_bytes()))
                .expect("tests stay within the window");
        }
    }

    /// Arrivals due now are received, deliveries consumed, then both links
    /// transmit.
    fn step(&mut self) {
        let now_ns = self.now_ns;
        let (arrived, waiting): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut self.a_to_b)
            .into_iter()
            .partition(|(arrival_ns, _, _)| *arrival_ns <= now_ns);
        self.a_to_b = waiting;
        for (_, rail, frame) in arrived {
            self.b.handle_receive_on_rail(now_ns, rail, &frame).unwrap();
        }
        let (arrived, waiting): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut self.b_to_a)
            .into_iter()
            .partition(|(arrival_ns, _, _)| *arrival_ns <= now_ns);
        self.b_to_a = waiting;
        for (_, rail, frame) in arrived {
            self.a.handle_receive_on_rail(now_ns, rail, &frame).unwrap();
        }
        while self.b_consumes {
            let Some(frame) = self.b.poll_deliver() else {
                break;
            };
            self.delivered_at_b
                .push(String::from_utf8(frame[HEADER_LEN_BYTES..].to_vec()).unwrap());
        }
        while let Some((rail, frame)) = self.a.poll_transmit_on_rail(now_ns) {
            let is_data = FrameHeader::parse(&frame).unwrap().kind != FrameKind::Ack;
            self.sent_by_a.push((rail, is_data));
            if !self.cut[rail as usize] {
                self.a_to_b.push((now_ns + LATENCY_NS, rail, frame));
            }
        }
        while let Some((rail, frame)) = self.b.poll_transmit_on_rail(now_ns) {
            if !self.cut[rail as usize] {
                self.b_to_a.push((now_ns + LATENCY_NS, rail, frame));
            }
        }
        while let Some(event) = self.a.poll_event() {
            self.events_at_a.push(event);
        }
    }

    /// Step the clock event by event up to `until_ns`.
    fn run_until(&mut self, until_ns: u64) {
        for _ in 0..1_000_000 {
            self.step();
            let arrivals = self.a_to_b.iter().chain(&self.b_to_a).map(|f| f.0);
            let next_ns = arrivals
                .chain(self.a.poll_timeout())
                .chain(self.b.poll_timeout())
                .min()
                .unwrap_or(u64::MAX)
                .max(self.now_ns + 1);
            if next_ns > until_ns {
                self.now_ns = until_ns;
                self.step();
                return;
            }
            self.now_ns = next_ns;
            self.a.handle_timeout(self.now_ns);
            self.b.handle_timeout(self.now_ns);
        }
        panic!("no progress towards {until_ns} ns");
    }

    fn data_rails_of_a_after(&self, from: usize) -> Vec<u32> {
        self.sent_by_a[from..]
            .iter()
            .filter(|(_, is_data)| *is_data)
            .map(|(rail, _)| *rail)
            .collect()
    }
}

fn expected_texts(count: usize) -> Vec<String> {
    (0..count).map(|index| format!("message {index}")).collect()
}

#[test]
fn round_robin_stripes_new_frames_over_both_rails() {
    let mut pair = RailPair::new(RAIL_CONFIG);
    pair.send_from_a(6);
    pair.run_until(2_000);
    assert_eq!(pair.data_rails_of_a_after(0), [0, 1, 0, 1, 0, 1]);
    assert_eq!(pair.delivered_at_b, expected_texts(6));
    assert!(pair.a.is_idle());
}

#[test]
fn stripe_off_keeps_data_on_the_lowest_live_rail() {
    let mut pair = RailPair::new(ReliableConfig {
        stripe_policy: StripePolicy::Off,
        ..RAIL_CONFIG
    });
    pair.send_from_a(4);
    pair.run_until(2_000);
    assert_eq!(pair.data_rails_of_a_after(0), [0, 0, 0, 0]);
}

#[test]
fn idle_rails_carry_only_heartbeats_and_stay_up() {
    let mut pair = RailPair::new(RAIL_CONFIG);
    pair.run_until(200_000);
    assert!(pair.a.stats().heartbeats_sent >= 2 * 200_000 / 5_000 / 2);
    assert_eq!(pair.a.live_rail_count(), 2);
    assert_eq!(pair.a.stats().rails_failed + pair.b.stats().rails_failed, 0);
    assert!(pair.events_at_a.is_empty());
}

#[test]
fn rail_error_resends_the_unacked_frames_of_that_rail_at_once_on_the_other() {
    let mut pair = RailPair::new(RAIL_CONFIG);
    pair.send_from_a(4);
    pair.step(); // four frames on the wire: rails 0, 1, 0, 1
    pair.cut[1] = true;
    pair.a_to_b.retain(|(_, rail, _)| *rail != 1);
    let sent_before = pair.sent_by_a.len();
    pair.a.handle_rail_error(pair.now_ns, 1);
    pair.step();
    // Both frames of rail 1 go out again at once, on rail 0, before any
    // retransmission timeout.
    assert_eq!(pair.data_rails_of_a_after(sent_before), [0, 0]);
    pair.run_until(20_000);
    assert_eq!(pair.delivered_at_b, expected_texts(4));
    assert_eq!(
        pair.events_at_a,
        [LinkEvent::RailDown { rail: 1, at_ns: 0 }]
    );
    let stats = pair.a.stats();
    assert_eq!(stats.rails_failed, 1);
    // Resent at once, acked one round trip later (the receiver acks at once:
    // the resent frames fill holes).
    assert_eq!(stats.failover_time_ns, 2 * LATENCY_NS);
    assert_eq!(pair.b.stats().duplicates_dropped, 0);
}

#[test]
fn silent_rail_is_marked_down_in_time_and_comes_back_up_when_answering() {
    let mut pair = RailPair::new(RAIL_CONFIG);
    pair.run_until(10_000);
    let cut_at_ns = pair.now_ns;
    pair.cut[0] = true;
    pair.send_from_a(3);
    pair.run_until(cut_at_ns + RAIL_CONFIG.rail_down_detected_within_ns());
    let down_at_ns = pair.events_at_a.iter().find_map(|event| match event {
        LinkEvent::RailDown { rail: 0, at_ns } => Some(*at_ns),
        _ => None,
    });
    let down_at_ns = down_at_ns.expect("rail 0 marked down");
    assert!(down_at_ns <= cut_at_ns + RAIL_CONFIG.rail_down_detected_within_ns());
    assert!(!pair.a.rail_is_up(0) && !pair.b.rail_is_up(0));
    assert_eq!(pair.delivered_at_b, expected_texts(3));
    // Everything goes to rail 1 now.
    let sent_before = pair.sent_by_a.len();
    pair.send_from_a(2);
    pair.run_until(pair.now_ns + 5_000);
    assert_eq!(pair.data_rails_of_a_after(sent_before), [1, 1]);
    // The rail heals: a slow probe is answered and it is used again.
    pair.cut[0] = false;
    pair.run_until(pair.now_ns + 2 * RAIL_CONFIG.down_rail_probe_interval_ns);
    assert!(pair.a.rail_is_up(0) && pair.b.rail_is_up(0));
    assert!(matches!(
        pair.events_at_a.last(),
        Some(LinkEvent::RailUp { rail: 0, .. })
    ));
    assert_eq!(pair.a.stats().rails_recovered, 1);
    let sent_before = pair.sent_by_a.len();
    pair.send_from_a(2);
    pair.run_until(pair.now_ns + 5_000);
    assert!(pair.data_rails_of_a_after(sent_before).contains(&0));
}

#[test]
fn every_rail_silent_makes_the_peer_unreachable_within_the_peer_silence_timeout() {
    // Retries alone would take longer: silence is what decides here.
    let config = ReliableConfig {
        max_retries: 1_000,
        ..RAIL_CONFIG
    };
    let mut pair = RailPair::new(config);
    pair.run_until(10_000);
    let cut_at_ns = pair.now_ns;
    pair.cut = vec![true, true];
    pair.send_from_a(2);
    // Silence on every rail at once is a slow peer for a while.
    pair.run_until(cut_at_ns + 2 * config.rail_down_detected_within_ns());
    assert!(pair.a.status().is_ok());
    assert_eq!(pair.a.live_rail_count(), 2);
    pair.run_until(cut_at_ns + config.every_rail_down_detected_within_ns());
    let status = pair.a.status().expect_err("peer unreachable");
    assert_eq!(status.cause, UnreachableCause::AllRailsDown);
    assert!(matches!(
        pair.events_at_a.last(),
        Some(LinkEvent::PeerUnreachable(_))
    ));
    assert_eq!(pair.a.poll_transmit_on_rail(pair.now_ns), None);
    assert_eq!(pair.a.poll_timeout(), None);
}

#[test]
fn single_rail_error_makes_the_peer_unreachable() {
    let mut link = PeerLink::<Vec<u8>>::new(0, 1, ReliableConfig::default());
    link.handle_rail_error(5, 0);
    assert_eq!(
        link.status().map_err(|unreachable| unreachable.cause),
        Err(UnreachableCause::AllRailsDown)
    );
}

#[test]
fn single_rail_link_sends_no_heartbeats() {
    let mut pair = RailPair::new(ReliableConfig {
        rail_count: 1,
        ..RAIL_CONFIG
    });
    pair.run_until(1_000_000);
    assert_eq!(pair.a.poll_timeout(), None);
    assert!(pair.sent_by_a.is_empty());
}

#[test]
fn probes_are_pure_acks_answered_on_their_own_rail() {
    let mut link = PeerLink::<Vec<u8>>::new(1, 0, RAIL_CONFIG);
    let mut probe = FrameHeader::new(FrameKind::Ack, 0);
    probe.tag = ACK_TAG_PROBE;
    link.handle_receive_on_rail(0, 1, &probe.to_bytes())
        .unwrap();
    let (rail, answer) = link.poll_transmit_on_rail(0).expect("an answer");
    assert_eq!(rail, 1);
    let answer = FrameHeader::parse(&answer).unwrap();
    assert_eq!((answer.kind, answer.seq), (FrameKind::Ack, 0));
    assert_eq!(answer.message_id, RAIL_CONFIG.send_window_frames as u64);
}

/// The receiver's application stops consuming for far longer than the whole
/// retry budget; its link keeps acking (a progress thread). The sender must
/// wait, not give up, for one rail as for two.
#[test]
fn busy_receiver_that_keeps_acking_is_never_declared_unreachable() {
    for rail_count in [1, 2] {
        let config = ReliableConfig {
            rail_count,
            ..RAIL_CONFIG
        };
        let stall_ns = 100 * config.unreachable_after_ns();
        let mut pair = RailPair::new(config);
        pair.b_consumes = false;
        pair.send_from_a(8);
        pair.run_until(1_000);
        pair.send_from_a(8); // beyond b's window: refused, not lost
        pair.run_until(stall_ns);
        assert_eq!(pair.a.status(), Ok(()), "{rail_count} rails");
        assert!(pair.b.stats().frames_dropped_beyond_window > 0);
        pair.b_consumes = true;
        pair.run_until(stall_ns + 20_000);
        assert_eq!(pair.delivered_at_b.len(), 16, "{rail_count} rails");
        assert!(pair.a.is_idle());
        assert_eq!(pair.a.stats().rails_failed, 0);
    }
}

#[test]
fn peer_silent_on_every_rail_for_a_while_keeps_its_rails() {
    // What a descheduled peer on an oversubscribed node looks like: nothing
    // at all on any rail for several rail timeouts, then everything again.
    let config = ReliableConfig {
        max_retries: 1_000,
        ..RAIL_CONFIG
    };
    let mut pair = RailPair::new(config);
    pair.run_until(10_000);
    let silent_from_ns = pair.now_ns;
    pair.cut = vec![true, true];
    pair.send_from_a(4);
    pair.run_until(silent_from_ns + 3 * config.rail_down_detected_within_ns());
    pair.cut = vec![false, false];
    pair.run_until(pair.now_ns + 4 * config.max_backoff_ns);
    assert!(pair.a.status().is_ok() && pair.b.status().is_ok());
    assert_eq!(pair.a.stats().rails_failed, 0, "{:?}", pair.events_at_a);
    assert_eq!(pair.b.stats().rails_failed, 0);
    assert_eq!(pair.delivered_at_b, expected_texts(4));
}
