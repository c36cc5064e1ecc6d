//! Two `PeerLink`s driven on a virtual clock (quinn's `Pair::step()` style):
//! faults are injected by editing the in-flight queues between steps.

use crate::{
    LinkStatus, PeerLink, PeerUnreachable, ReceiveError, ReliableConfig, StripePolicy,
    UnreachableCause, WindowFull, ACK_TAG_PROBE, ACK_TAG_PROBE_ANSWER, FAST_RETRANSMIT_THRESHOLD,
};
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};
use std::collections::VecDeque;

const TEST_CONFIG: ReliableConfig = ReliableConfig {
    ack_timeout_ns: 1_000,
    min_rto_ns: 1_000,
    timer_granularity_ns: 100,
    max_backoff_ns: 8_000,
    send_window_frames: 8,
    ack_delay_ns: 100,
    max_retries: 4,
    rail_count: 1,
    stripe_policy: StripePolicy::RoundRobin,
    heartbeat_interval_ns: 5_000,
    rail_silence_timeout_ns: 25_000,
    peer_silence_timeout_ns: 100_000,
    down_rail_probe_interval_ns: 10_000,
};

/// An Eager frame from `source` whose payload is `body`.
fn data_frame(source: u32, body: &[u8]) -> Vec<u8> {
    let mut header = FrameHeader::new(FrameKind::Eager, source);
    header.payload_len = body.len() as u32;
    header.aux = body.len() as u64;
    let mut frame = header.to_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}

fn body(frame: &[u8]) -> &[u8] {
    &frame[HEADER_LEN_BYTES..]
}

fn header(frame: &[u8]) -> FrameHeader {
    FrameHeader::parse(frame).expect("test frames parse")
}

/// Link `a` (rank 0) and link `b` (rank 1) with a zero-latency wire each way.
struct Pair {
    now_ns: u64,
    a: PeerLink,
    b: PeerLink,
    a_to_b: VecDeque<Vec<u8>>,
    b_to_a: VecDeque<Vec<u8>>,
    delivered_at_a: Vec<Vec<u8>>,
    delivered_at_b: Vec<Vec<u8>>,
}

impl Pair {
    fn new(config: ReliableConfig) -> Pair {
        Pair {
            now_ns: 0,
            a: PeerLink::<Vec<u8>>::new(0, 1, config),
            b: PeerLink::<Vec<u8>>::new(1, 0, config),
            a_to_b: VecDeque::new(),
            b_to_a: VecDeque::new(),
            delivered_at_a: Vec::new(),
            delivered_at_b: Vec::new(),
        }
    }

    fn send_from_a(&mut self, text: &str) -> Result<u64, WindowFull> {
        self.a
            .handle_send(self.now_ns, data_frame(0, text.as_bytes()))
    }

    fn send_from_b(&mut self, text: &str) -> Result<u64, WindowFull> {
        self.b
            .handle_send(self.now_ns, data_frame(1, text.as_bytes()))
    }

    /// Put everything `a` wants to send on the a->b wire.
    fn transmit_a(&mut self) -> usize {
        let before = self.a_to_b.len();
        while let Some(frame) = self.a.poll_transmit(self.now_ns) {
            self.a_to_b.push_back(frame);
        }
        self.a_to_b.len() - before
    }

    fn transmit_b(&mut self) -> usize {
        let before = self.b_to_a.len();
        while let Some(frame) = self.b.poll_transmit(self.now_ns) {
            self.b_to_a.push_back(frame);
        }
        self.b_to_a.len() - before
    }

    /// Hand every in-flight frame to its receiver, then collect deliveries.
    fn receive_all(&mut self) {
        while let Some(frame) = self.a_to_b.pop_front() {
            self.b
                .handle_receive(self.now_ns, &frame)
                .expect("valid frame");
        }
        while let Some(frame) = self.b_to_a.pop_front() {
            self.a
                .handle_receive(self.now_ns, &frame)
                .expect("valid frame");
        }
        while let Some(frame) = self.a.poll_deliver() {
            self.delivered_at_a.push(frame);
        }
        while let Some(frame) = self.b.poll_deliver() {
            self.delivered_at_b.push(frame);
        }
    }

    /// One round: both sides transmit, the wire delivers. True if anything
    /// moved.
    fn step(&mut self) -> bool {
        let moved = self.transmit_a() + self.transmit_b();
        self.receive_all();
        moved > 0
    }

    /// Jump the clock to the next deadline of either side and fire it.
    fn advance_to_next_timeout(&mut self) -> bool {
        let next_ns = match (self.a.poll_timeout(), self.b.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(next_ns) => next_ns,
                None => return false,
            },
        };
        self.now_ns = self.now_ns.max(next_ns);
        self.a.handle_timeout(self.now_ns);
        self.b.handle_timeout(self.now_ns);
        true
    }

    /// Run until neither side has anything to send or wait for.
    fn drive(&mut self) {
        for _ in 0..10_000 {
            while self.step() {}
            if !self.advance_to_next_timeout() {
                return;
            }
        }
        panic!("pair did not go idle");
    }

    fn texts_at_b(&self) -> Vec<String> {
        self.delivered_at_b
            .iter()
            .map(|frame| String::from_utf8(body(frame).to_vec()).unwrap())
            .collect()
    }
}

#[test]
fn frames_arrive_once_in_order_without_faults() {
    let mut pair = Pair::new(TEST_CONFIG);
    for text in ["one", "two", "three"] {
        pair.send_from_a(text).unwrap();
    }
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["one", "two", "three"]);
    assert!(pair.a.is_idle());
    assert_eq!(pair.a.stats().frames_retransmitted, 0);
    assert_eq!(pair.a.stats().bytes_buffered, 0);
    assert_eq!(pair.b.stats().bytes_buffered, 0);
}

#[test]
fn sequence_numbers_start_at_one_and_are_written_into_the_header() {
    let mut pair = Pair::new(TEST_CONFIG);
    assert_eq!(pair.send_from_a("x"), Ok(1));
    assert_eq!(pair.send_from_a("y"), Ok(2));
    pair.transmit_a();
    let seqs: Vec<u64> = pair.a_to_b.iter().map(|frame| header(frame).seq).collect();
    assert_eq!(seqs, [1, 2]);
}

#[test]
fn lost_frame_is_retransmitted_after_the_ack_timeout() {
    let mut pair = Pair::new(TEST_CONFIG);
    pair.send_from_a("lost once").unwrap();
    pair.transmit_a();
    pair.a_to_b.clear();
    assert_eq!(pair.a.poll_timeout(), Some(TEST_CONFIG.ack_timeout_ns));
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["lost once"]);
    assert_eq!(pair.a.stats().frames_retransmitted, 1);
    assert!(pair.a.is_idle());
}

#[test]
fn duplicated_frame_is_delivered_once() {
    let mut pair = Pair::new(TEST_CONFIG);
    pair.send_from_a("twice on the wire").unwrap();
    pair.transmit_a();
    let copy = pair.a_to_b[0].clone();
    pair.a_to_b.push_back(copy);
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["twice on the wire"]);
    assert_eq!(pair.b.stats().duplicates_dropped, 1);
}

#[test]
fn reordered_frames_are_delivered_in_sequence_and_acked_selectively() {
    let mut pair = Pair::new(TEST_CONFIG);
    for text in ["a", "b", "c", "d"] {
        pair.send_from_a(text).unwrap();
    }
    pair.transmit_a();
    pair.a_to_b.make_contiguous().reverse();
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["a", "b", "c", "d"]);
    assert_eq!(pair.a.stats().frames_retransmitted, 0);
}

#[test]
fn only_the_hole_is_retransmitted_when_later_frames_arrived() {
    let mut pair = Pair::new(TEST_CONFIG);
    for text in ["first", "second", "third", "fourth"] {
        pair.send_from_a(text).unwrap();
    }
    pair.transmit_a();
    pair.a_to_b.pop_front(); // lose seq 1
    pair.receive_all();
    // b acks at once (a hole) with a selective-ack bitmap for 2, 3, 4.
    assert_eq!(pair.transmit_b(), 1);
    let ack = header(&pair.b_to_a[0]);
    assert_eq!((ack.kind, ack.ack, ack.aux), (FrameKind::Ack, 0, 0b111));
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["first", "second", "third", "fourth"]);
    assert_eq!(pair.a.stats().frames_retransmitted, 1);
    assert_eq!(pair.b.stats().duplicates_dropped, 0);
}

#[test]
fn lost_ack_causes_a_retransmission_that_is_dropped_as_duplicate() {
    let mut pair = Pair::new(TEST_CONFIG);
    pair.send_from_a("acked late").unwrap();
    pair.transmit_a();
    pair.receive_all();
    pair.now_ns += TEST_CONFIG.ack_delay_ns;
    assert_eq!(pair.transmit_b(), 1);
    pair.b_to_a.clear(); // the ack is lost
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["acked late"]);
    assert_eq!(pair.a.stats().frames_retransmitted, 1);
    assert_eq!(pair.b.stats().duplicates_dropped, 1);
    assert!(pair.a.is_idle());
}

#[test]
fn pure_acks_wait_for_the_ack_delay_and_coalesce() {
    let mut pair = Pair::new(TEST_CONFIG);
    for text in ["1", "2", "3"] {
        pair.send_from_a(text).unwrap();
    }
    pair.transmit_a();
    pair.receive_all();
    assert_eq!(pair.transmit_b(), 0, "no ack before the delay");
    assert_eq!(pair.b.poll_timeout(), Some(TEST_CONFIG.ack_delay_ns));
    pair.now_ns = TEST_CONFIG.ack_delay_ns;
    assert_eq!(pair.transmit_b(), 1, "one ack covers all three frames");
    assert_eq!(header(&pair.b_to_a[0]).ack, 3);
    pair.receive_all();
    assert!(pair.a.is_idle());
    assert_eq!(pair.b.stats().acks_sent, 1);
}

#[test]
fn acks_piggyback_on_reverse_data_traffic() {
    let mut pair = Pair::new(TEST_CONFIG);
    pair.send_from_a("ping").unwrap();
    pair.transmit_a();
    pair.receive_all();
    pair.send_from_b("pong").unwrap();
    assert_eq!(pair.transmit_b(), 1);
    let reply = header(&pair.b_to_a[0]);
    assert_eq!((reply.kind, reply.seq, reply.ack), (FrameKind::Eager, 1, 1));
    pair.drive();
    assert_eq!(pair.b.stats().acks_sent, 0);
    assert!(pair.a.is_idle() && pair.b.is_idle());
}

#[test]
fn full_send_window_applies_back_pressure_until_acked() {
    let config = ReliableConfig {
        send_window_frames: 2,
        ..TEST_CONFIG
    };
    let mut pair = Pair::new(config);
    pair.send_from_a("1").unwrap();
    pair.send_from_a("2").unwrap();
    assert_eq!(pair.send_from_a("3"), Err(WindowFull));
    assert_eq!(pair.a.stats().send_buffered_frames, 2);
    pair.drive();
    assert_eq!(pair.send_from_a("3"), Ok(3));
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["1", "2", "3"]);
    assert_eq!(pair.a.stats().send_buffered_frames_max, 2);
}

#[test]
fn frames_beyond_the_receive_window_are_dropped_and_retransmitted() {
    let config = ReliableConfig {
        send_window_frames: 2,
        ..TEST_CONFIG
    };
    let mut pair = Pair::new(config);
    // A sender with a larger window than the receiver: seq 3 lands beyond it.
    pair.a = PeerLink::new(
        0,
        1,
        ReliableConfig {
            send_window_frames: 3,
            ..TEST_CONFIG
        },
    );
    for text in ["1", "2", "3"] {
        pair.send_from_a(text).unwrap();
    }
    pair.transmit_a();
    while let Some(frame) = pair.a_to_b.pop_front() {
        pair.b.handle_receive(pair.now_ns, &frame).unwrap();
    }
    assert_eq!(pair.b.stats().frames_dropped_beyond_window, 1);
    assert_eq!(pair.b.stats().receive_buffered_frames, 2);
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["1", "2", "3"]);
}

#[test]
fn silent_peer_is_unreachable_after_max_retries_with_backoff() {
    let mut pair = Pair::new(TEST_CONFIG);
    pair.send_from_a("into the void").unwrap();
    let mut transmit_times_ns = Vec::new();
    while pair.a.status().is_ok() {
        if pair.transmit_a() > 0 {
            transmit_times_ns.push(pair.now_ns);
        }
        pair.a_to_b.clear();
        let Some(next_ns) = pair.a.poll_timeout() else {
            break;
        };
        pair.now_ns = next_ns;
        pair.a.handle_timeout(pair.now_ns);
    }
    // 1 transmission + 4 retries, spaced 1, 2, 4, 8 (capped), 8 µs.
    assert_eq!(transmit_times_ns, [0, 1_000, 3_000, 7_000, 15_000]);
    assert_eq!(pair.now_ns, 23_000);
    assert_eq!(pair.now_ns, TEST_CONFIG.unreachable_after_ns());
    let expected: LinkStatus = Err(PeerUnreachable {
        peer_rank: 1,
        seq: 1,
        retry_count: 4,
        cause: UnreachableCause::RetriesExhausted,
    });
    assert_eq!(pair.a.status(), expected);
    assert_eq!(pair.a.poll_transmit(pair.now_ns), None);
    assert_eq!(pair.a.poll_timeout(), None);
}

#[test]
fn bad_frames_are_errors_and_change_nothing() {
    let mut link = PeerLink::<Vec<u8>>::new(0, 1, TEST_CONFIG);
    assert!(matches!(
        link.handle_receive(0, &[0u8; 10]),
        Err(ReceiveError::Malformed(_))
    ));
    let mut truncated = data_frame(1, b"payload");
    truncated.pop();
    assert!(matches!(
        link.handle_receive(0, &truncated),
        Err(ReceiveError::LengthMismatch { .. })
    ));
    assert_eq!(
        link.handle_receive(0, &data_frame(2, b"")),
        Err(ReceiveError::WrongSource {
            expected: 1,
            found: 2
        })
    );
    assert_eq!(
        link.handle_receive(0, &data_frame(1, b"")),
        Err(ReceiveError::MissingSequence)
    );
    let mut ack = FrameHeader::new(FrameKind::Ack, 1);
    ack.ack = 5;
    assert_eq!(
        link.handle_receive(0, &ack.to_bytes()),
        Err(ReceiveError::AckBeyondSent {
            ack: 5,
            largest_sent_seq: 0
        })
    );
    ack.ack = 0;
    ack.seq = 3;
    assert_eq!(
        link.handle_receive(0, &ack.to_bytes()),
        Err(ReceiveError::SequencedAck)
    );
    assert_eq!(link.stats(), crate::LinkStats::default());
    assert_eq!(link.poll_timeout(), None);
}

#[test]
fn a_frame_asking_for_an_ack_now_is_acked_at_once_and_twice() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, TEST_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, TEST_CONFIG);
    let mut frame = data_frame(0, b"last fragment");
    let mut header = FrameHeader::parse(&frame).unwrap();
    header.flags |= resmpi_wire::FLAG_ACK_NOW;
    frame[..HEADER_LEN_BYTES].copy_from_slice(&header.to_bytes());
    sender.handle_send(0, frame).unwrap();
    let wire = sender.poll_transmit(0).expect("the frame");
    receiver.handle_receive(10, &wire).unwrap();
    // No coalescing delay, and a second copy right behind the first.
    for copy in 0..2 {
        let ack = receiver.poll_transmit(10).expect("an ack copy");
        let ack = FrameHeader::parse(&ack).unwrap();
        assert_eq!((ack.kind, ack.ack), (FrameKind::Ack, 1), "copy {copy}");
    }
    assert_eq!(receiver.poll_transmit(10), None);
    // A plain frame still waits for the coalescing delay.
    sender.handle_send(20, data_frame(0, b"plain")).unwrap();
    let wire = sender.poll_transmit(20).expect("the frame");
    receiver.handle_receive(30, &wire).unwrap();
    assert_eq!(receiver.poll_transmit(30), None);
    assert!(receiver
        .poll_transmit(30 + TEST_CONFIG.ack_delay_ns)
        .is_some());
}

#[test]
fn a_hole_reported_below_later_frames_is_resent_before_its_timeout() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, TEST_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, TEST_CONFIG);
    for index in 0..4u8 {
        sender.handle_send(0, data_frame(0, &[index; 8])).unwrap();
    }
    let frames: Vec<Vec<u8>> = std::iter::from_fn(|| sender.poll_transmit(0)).collect();
    assert_eq!(frames.len(), 4);
    // Frame 1 is lost; the next ones arrive and are reported above the hole.
    let mut fast = 0;
    for frame in &frames[1..] {
        receiver.handle_receive(10, frame).unwrap();
        while let Some(ack) = receiver.poll_transmit(10) {
            sender.handle_receive(20, &ack).unwrap();
        }
        if let Some(resent) = sender.poll_transmit(20) {
            assert_eq!(header(&resent).seq, 1, "only the hole is resent");
            fast += 1;
        }
    }
    assert_eq!(
        fast, 1,
        "resent once, well before the {} ns timeout",
        TEST_CONFIG.ack_timeout_ns
    );
    assert_eq!(sender.stats().fast_retransmits, 1);
    assert_eq!(FAST_RETRANSMIT_THRESHOLD, 2);
}

/// A config whose measured timers are far below the initial timeout.
const MEASURED_CONFIG: ReliableConfig = ReliableConfig {
    ack_timeout_ns: 100_000,
    min_rto_ns: 10,
    timer_granularity_ns: 10,
    ack_delay_ns: 0,
    max_backoff_ns: 1_000_000,
    ..TEST_CONFIG
};

/// Measured timers, with the retransmission timeout's floor (50 µs) far
/// above the round trip, as on real processes: loss is found by probes.
const PROBE_CONFIG: ReliableConfig = ReliableConfig {
    min_rto_ns: 50_000,
    ..MEASURED_CONFIG
};

/// Send one frame from `sender` at `sent_ns`, deliver it, and bring its ack
/// back at `acked_ns` (zero ack delay: the ack leaves at once).
fn round_trip(sender: &mut PeerLink, receiver: &mut PeerLink, sent_ns: u64, acked_ns: u64) -> u64 {
    let seq = sender
        .handle_send(sent_ns, data_frame(0, b"timed"))
        .unwrap();
    let wire = sender.poll_transmit(sent_ns).expect("the frame");
    receiver.handle_receive(sent_ns, &wire).unwrap();
    while receiver.poll_deliver().is_some() {}
    let ack = receiver.poll_transmit(sent_ns).expect("the ack");
    sender.handle_receive(acked_ns, &ack).unwrap();
    assert!(sender.is_idle(), "{:?} {:?}", header(&ack), sender.stats());
    seq
}

#[test]
fn measured_round_trips_set_the_retransmission_timeout() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, MEASURED_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, MEASURED_CONFIG);
    // Before any sample: the initial timeout.
    sender.handle_send(0, data_frame(0, b"first")).unwrap();
    let first = sender.poll_transmit(0).unwrap();
    assert_eq!(sender.poll_timeout(), Some(100_000));
    receiver.handle_receive(0, &first).unwrap();
    let ack = receiver.poll_transmit(0).unwrap();
    sender.handle_receive(1_000, &ack).unwrap();
    assert_eq!(sender.stats().rtt_samples, 1);
    for round in 1..40u64 {
        round_trip(
            &mut sender,
            &mut receiver,
            round * 10_000,
            round * 10_000 + 1_000,
        );
    }
    assert_eq!(sender.stats().smoothed_rtt_ns, 1_000);
    // A frame now: its timeout is the measured one, a few µs, not 100 µs.
    sender.handle_send(500_000, data_frame(0, b"lost")).unwrap();
    sender.poll_transmit(500_000).unwrap();
    let due_ns = sender.poll_timeout().unwrap() - 500_000;
    assert!((1_000..5_000).contains(&due_ns), "due after {due_ns} ns");
}

#[test]
fn retransmitted_frames_give_no_round_trip_sample() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, TEST_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, TEST_CONFIG);
    sender.handle_send(0, data_frame(0, b"x")).unwrap();
    sender.poll_transmit(0).unwrap(); // lost
    let resent = sender.poll_transmit(TEST_CONFIG.ack_timeout_ns).unwrap();
    receiver.handle_receive(1_010, &resent).unwrap();
    let ack = receiver.poll_transmit(2_000).unwrap();
    // Which copy does the ack answer? Karn: no sample.
    sender.handle_receive(2_000, &ack).unwrap();
    assert!(sender.is_idle());
    assert_eq!(sender.stats().rtt_samples, 0);
    assert_eq!(sender.stats().smoothed_rtt_ns, 0);
}

#[test]
fn lost_tail_frame_is_found_by_a_probe_after_a_probe_timeout() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, PROBE_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, PROBE_CONFIG);
    // The path's round trip: 1 µs.
    for round in 0..20u64 {
        round_trip(
            &mut sender,
            &mut receiver,
            round * 10_000,
            round * 10_000 + 1_000,
        );
    }
    // Two frames; the second (the tail) is lost.
    let now_ns = 1_000_000;
    sender.handle_send(now_ns, data_frame(0, b"head")).unwrap();
    sender.handle_send(now_ns, data_frame(0, b"tail")).unwrap();
    let head = sender.poll_transmit(now_ns).unwrap();
    let _tail = sender.poll_transmit(now_ns).unwrap();
    receiver.handle_receive(now_ns + 500, &head).unwrap();
    while receiver.poll_deliver().is_some() {}
    let ack = receiver.poll_transmit(now_ns + 500).unwrap();
    sender.handle_receive(now_ns + 1_000, &ack).unwrap();
    // Nothing more comes back: the probe fires about one round trip after
    // the last transmission (1 µs + granularity), long before a retry, and
    // it is a pure Ack, not a copy of the frame.
    let probe_ns = sender.poll_timeout().unwrap();
    assert!(
        probe_ns - now_ns <= 2_000,
        "probe after {} ns",
        probe_ns - now_ns
    );
    sender.handle_timeout(probe_ns);
    let probe = sender.poll_transmit(probe_ns).expect("the probe");
    assert_eq!(header(&probe).kind, FrameKind::Ack);
    assert_eq!(header(&probe).tag & ACK_TAG_PROBE, ACK_TAG_PROBE);
    assert_eq!(sender.stats().tail_loss_probes, 1);
    assert_eq!(sender.stats().frames_retransmitted, 0);
    // The peer answers at once; the answer does not cover the tail, which
    // went before the probe on the same rail: it is resent now.
    receiver.handle_receive(probe_ns + 500, &probe).unwrap();
    let answer = receiver.poll_transmit(probe_ns + 500).unwrap();
    assert_eq!(
        header(&answer).tag & ACK_TAG_PROBE_ANSWER,
        ACK_TAG_PROBE_ANSWER
    );
    sender.handle_receive(probe_ns + 1_000, &answer).unwrap();
    let resent = sender
        .poll_transmit(probe_ns + 1_000)
        .expect("the tail again");
    assert_eq!(body(&resent), b"tail");
    receiver.handle_receive(probe_ns + 1_500, &resent).unwrap();
    let ack = receiver.poll_transmit(probe_ns + 1_500).unwrap();
    sender.handle_receive(probe_ns + 2_000, &ack).unwrap();
    assert!(sender.is_idle());
    assert_eq!(sender.stats().frames_retransmitted, 1);
}

#[test]
fn a_probe_answered_in_full_resends_nothing() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, PROBE_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, PROBE_CONFIG);
    for round in 0..20u64 {
        round_trip(
            &mut sender,
            &mut receiver,
            round * 10_000,
            round * 10_000 + 1_000,
        );
    }
    // A frame whose ack is late (a descheduled receiver): the probe goes,
    // the frame and the probe both arrive, the answer covers the frame.
    let now_ns = 1_000_000;
    sender.handle_send(now_ns, data_frame(0, b"slow")).unwrap();
    let frame = sender.poll_transmit(now_ns).unwrap();
    let probe_ns = sender.poll_timeout().unwrap();
    sender.handle_timeout(probe_ns);
    let probe = sender.poll_transmit(probe_ns).expect("the probe");
    receiver.handle_receive(probe_ns + 5_000, &frame).unwrap();
    receiver.handle_receive(probe_ns + 5_000, &probe).unwrap();
    while let Some(answer) = receiver.poll_transmit(probe_ns + 5_000) {
        sender.handle_receive(probe_ns + 5_500, &answer).unwrap();
    }
    assert!(sender.is_idle());
    assert_eq!(sender.stats().frames_retransmitted, 0);
    assert_eq!(receiver.stats().duplicates_dropped, 0);
}

#[test]
fn an_ack_faster_than_any_round_trip_marks_the_retransmission_spurious() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, MEASURED_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, MEASURED_CONFIG);
    for round in 0..20u64 {
        round_trip(
            &mut sender,
            &mut receiver,
            round * 10_000,
            round * 10_000 + 1_000,
        );
    }
    // A frame whose ack is slow (a busy receiver): the sender gives up on
    // it and resends, then the ack of the first copy comes.
    let now_ns = 1_000_000;
    sender.handle_send(now_ns, data_frame(0, b"slow")).unwrap();
    let original = sender.poll_transmit(now_ns).unwrap();
    let resend_ns = sender.poll_timeout().unwrap();
    sender.handle_timeout(resend_ns);
    let copy = sender.poll_transmit(resend_ns).expect("a retransmission");
    receiver.handle_receive(resend_ns + 100, &original).unwrap();
    let ack = receiver.poll_transmit(resend_ns + 100).unwrap();
    sender.handle_receive(resend_ns + 200, &ack).unwrap();
    assert!(sender.is_idle());
    assert_eq!(sender.stats().spurious_retransmits, 1);
    // The copy arrives: the receiver drops it as a duplicate.
    receiver.handle_receive(resend_ns + 300, &copy).unwrap();
    assert_eq!(receiver.stats().duplicates_dropped, 1);
}

#[test]
fn the_answer_to_an_older_probe_declares_nothing_lost() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, PROBE_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, PROBE_CONFIG);
    for round in 0..20u64 {
        round_trip(
            &mut sender,
            &mut receiver,
            round * 10_000,
            round * 10_000 + 1_000,
        );
    }
    // Frame A; its ack is late, so a first probe goes.
    let now_ns = 1_000_000;
    sender.handle_send(now_ns, data_frame(0, b"A")).unwrap();
    let frame_a = sender.poll_transmit(now_ns).unwrap();
    let first_ns = sender.poll_timeout().unwrap();
    sender.handle_timeout(first_ns);
    let first_probe = sender.poll_transmit(first_ns).expect("first probe");
    // A's ack comes; the answer to the first probe is held up on the way.
    receiver.handle_receive(first_ns + 5, &frame_a).unwrap();
    while receiver.poll_deliver().is_some() {}
    let ack_a = receiver.poll_transmit(first_ns + 5).unwrap();
    receiver
        .handle_receive(first_ns + 10, &first_probe)
        .unwrap();
    let first_answer = receiver.poll_transmit(first_ns + 10).unwrap();
    assert_eq!(
        header(&first_answer).tag & ACK_TAG_PROBE_ANSWER,
        ACK_TAG_PROBE_ANSWER
    );
    sender.handle_receive(first_ns + 20, &ack_a).unwrap();
    // Frame B, late too: a second probe.
    sender
        .handle_send(first_ns + 100, data_frame(0, b"B"))
        .unwrap();
    let frame_b = sender.poll_transmit(first_ns + 100).unwrap();
    let second_ns = sender.poll_timeout().unwrap();
    sender.handle_timeout(second_ns);
    let second_probe = sender.poll_transmit(second_ns).expect("second probe");
    assert_eq!(sender.stats().tail_loss_probes, 2);
    // Now the first answer arrives. It does not cover B, but it answers the
    // first probe, sent before B: it must not condemn B.
    let late_ns = second_ns + 5_000;
    sender.handle_receive(late_ns, &first_answer).unwrap();
    // Only probes may go out now (a third one is due), no data frame.
    let sent_now: Vec<Vec<u8>> = std::iter::from_fn(|| sender.poll_transmit(late_ns)).collect();
    assert!(
        sent_now
            .iter()
            .all(|frame| header(frame).kind == FrameKind::Ack),
        "nothing resent"
    );
    receiver.handle_receive(late_ns + 10, &frame_b).unwrap();
    receiver
        .handle_receive(late_ns + 10, &second_probe)
        .unwrap();
    for probe in &sent_now {
        receiver.handle_receive(late_ns + 10, probe).unwrap();
    }
    while let Some(answer) = receiver.poll_transmit(late_ns + 10) {
        sender.handle_receive(late_ns + 20, &answer).unwrap();
    }
    assert!(sender.is_idle());
    assert_eq!(sender.stats().frames_retransmitted, 0);
}

#[test]
fn a_frame_filling_a_hole_is_acked_at_once() {
    let mut sender = PeerLink::<Vec<u8>>::new(0, 1, TEST_CONFIG);
    let mut receiver = PeerLink::<Vec<u8>>::new(1, 0, TEST_CONFIG);
    sender.handle_send(0, data_frame(0, b"one")).unwrap();
    sender.handle_send(0, data_frame(0, b"two")).unwrap();
    let one = sender.poll_transmit(0).unwrap();
    let two = sender.poll_transmit(0).unwrap();
    // Two overtakes one: acked at once (selective ack of the hole).
    receiver.handle_receive(10, &two).unwrap();
    assert_eq!(header(&receiver.poll_transmit(10).unwrap()).ack, 0);
    // One fills the hole: the sender is timing it, so no coalescing delay.
    receiver.handle_receive(20, &one).unwrap();
    let ack = receiver.poll_transmit(20).expect("an ack at once");
    assert_eq!(header(&ack).ack, 2);
}

/// Hand `frame` to `link` as a placed frame (its payload already where it
/// belongs, as a TCP path does): its header alone.
fn receive_placed(link: &mut PeerLink, now_ns: u64, frame: &[u8]) -> bool {
    let header: &[u8; HEADER_LEN_BYTES] = frame[..HEADER_LEN_BYTES].try_into().unwrap();
    link.handle_receive_placed_on_rail(now_ns, 0, header)
        .expect("valid header")
}

#[test]
fn placed_frame_fills_its_hole_and_releases_the_frames_waiting_above_it() {
    let mut pair = Pair::new(TEST_CONFIG);
    for text in ["placed", "second", "third"] {
        pair.send_from_a(text).unwrap();
    }
    pair.transmit_a();
    let first = pair.a_to_b.pop_front().unwrap();
    // 2 and 3 overtake 1 (another rail) and wait out of order.
    pair.receive_all();
    assert!(pair.texts_at_b().is_empty());
    assert!(
        pair.b.may_place(1),
        "frames waiting above do not stop a placement"
    );
    assert!(!pair.b.may_place(2));
    assert!(receive_placed(&mut pair.b, pair.now_ns, &first));
    while let Some(frame) = pair.b.poll_deliver() {
        pair.delivered_at_b.push(frame);
    }
    // The placed frame was the caller's to deliver; the others follow.
    assert_eq!(pair.texts_at_b(), ["second", "third"]);
    pair.drive();
    assert_eq!(pair.a.stats().frames_retransmitted, 0);
    assert!(pair.a.is_idle());
}

#[test]
fn placed_frame_that_is_not_next_is_not_kept_and_its_retransmission_is_taken() {
    let mut pair = Pair::new(TEST_CONFIG);
    for text in ["first", "second"] {
        pair.send_from_a(text).unwrap();
    }
    pair.transmit_a();
    let first = pair.a_to_b.pop_front().unwrap();
    let second = pair.a_to_b.pop_front().unwrap();
    // A placed frame ahead of a hole has no payload for the link to keep.
    assert!(!pair.b.may_place(2));
    assert!(!receive_placed(&mut pair.b, pair.now_ns, &second));
    assert!(receive_placed(&mut pair.b, pair.now_ns, &first));
    // A second placed copy of frame 1 is a duplicate: not taken.
    assert!(!receive_placed(&mut pair.b, pair.now_ns, &first));
    pair.drive();
    assert_eq!(pair.texts_at_b(), ["second"]);
    assert_eq!(pair.a.stats().frames_retransmitted, 1);
    assert!(pair.a.is_idle());
}
