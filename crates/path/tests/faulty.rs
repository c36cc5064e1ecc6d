//! `FaultyPath` over an in-memory loopback path on a virtual clock: the
//! faults it injects are the ones the spec asks for, at the stated rates,
//! the same for the same seed, and only where the spec says.

use resmpi_path::faulty::{FaultStats, FaultyPath, HELD_FRAME_COUNT_MAX};
use resmpi_path::inject_spec::FaultSpec;
use resmpi_path::{Path, PathError};
use resmpi_wire::{FrameHeader, FrameKind};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

/// In-memory queues between ranks: one inbox per rank, each holding
/// (source, frame bytes), with an optional capacity for back-pressure.
struct Network {
    inboxes: Vec<VecDeque<(u32, Vec<u8>)>>,
    inbox_frame_count_max: usize,
}

/// One rank's end of a [`Network`]: a `Path` that never faults.
#[derive(Clone)]
struct Loopback {
    rank: u32,
    network: Rc<RefCell<Network>>,
}

fn network(rank_count: u32, inbox_frame_count_max: usize) -> Vec<Loopback> {
    let network = Rc::new(RefCell::new(Network {
        inboxes: (0..rank_count).map(|_| VecDeque::new()).collect(),
        inbox_frame_count_max,
    }));
    (0..rank_count)
        .map(|rank| Loopback {
            rank,
            network: network.clone(),
        })
        .collect()
}

impl Path for Loopback {
    fn try_send(
        &mut self,
        peer: u32,
        header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
        payload: &[u8],
    ) -> Result<bool, PathError> {
        let mut network = self.network.borrow_mut();
        let capacity = network.inbox_frame_count_max;
        let inbox = network
            .inboxes
            .get_mut(peer as usize)
            .ok_or_else(|| PathError::Protocol(format!("no rank {peer}")))?;
        if inbox.len() >= capacity {
            return Ok(false);
        }
        inbox.push_back((self.rank, [&header[..], payload].concat()));
        Ok(true)
    }

    fn poll<F: FnMut(u32, &[u8])>(&mut self, mut handler: F) -> Result<usize, PathError> {
        let frames: Vec<_> = self.network.borrow_mut().inboxes[self.rank as usize]
            .drain(..)
            .collect();
        for (source, frame) in &frames {
            handler(*source, frame);
        }
        Ok(frames.len())
    }

    fn flush(&mut self) -> Result<(), PathError> {
        Ok(())
    }

    fn max_payload_bytes(&self) -> usize {
        1 << 20
    }
}

fn mix64(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Frame `index` from `source`: `payload_bytes` of pseudo-random payload, so
/// any two frames differ in many bits and a one-bit flip still identifies
/// its original.
fn frame(
    source: u32,
    index: u64,
    payload_bytes: usize,
) -> ([u8; resmpi_wire::HEADER_LEN_BYTES], Vec<u8>) {
    let mut header = FrameHeader::new(FrameKind::Eager, source);
    header.seq = index;
    header.message_id = mix64(index);
    header.payload_len = payload_bytes as u32;
    let payload = (0..payload_bytes)
        .map(|offset| mix64(index << 20 | offset as u64) as u8)
        .collect();
    (header.to_bytes(), payload)
}

fn frame_bytes(source: u32, index: u64, payload_bytes: usize) -> Vec<u8> {
    let (header, payload) = frame(source, index, payload_bytes);
    [&header[..], &payload].concat()
}

fn differing_bits(first: &[u8], second: &[u8]) -> u32 {
    assert_eq!(first.len(), second.len());
    first
        .iter()
        .zip(second)
        .map(|(a, b)| (a ^ b).count_ones())
        .sum()
}

fn spec(text: &str) -> FaultSpec {
    text.parse().unwrap()
}

fn virtual_clock() -> (Rc<Cell<u64>>, impl Fn() -> u64) {
    let now_ns = Rc::new(Cell::new(0));
    let reader = now_ns.clone();
    (now_ns, move || reader.get())
}

fn received(endpoint: &mut impl Path) -> Vec<(u32, Vec<u8>)> {
    let mut frames = Vec::new();
    endpoint
        .poll(|source, frame| frames.push((source, frame.to_vec())))
        .unwrap();
    frames
}

/// Sends `frame_count` frames from rank 0 to rank 1 through a wrapper with
/// `spec_text`, returning what rank 1 received and the wrapper's counters.
fn run_pair(spec_text: &str, frame_count: u64, payload_bytes: usize) -> (Vec<Vec<u8>>, FaultStats) {
    let mut endpoints = network(2, usize::MAX);
    let mut receiver = endpoints.pop().unwrap();
    let (_now_ns, clock) = virtual_clock();
    let mut sender = FaultyPath::new(endpoints.pop().unwrap(), spec(spec_text), 0, 0, clock);
    let mut frames = Vec::new();
    for index in 0..frame_count {
        let (header, payload) = frame(0, index, payload_bytes);
        assert!(sender.try_send(1, &header, &payload).unwrap());
        if index % 256 == 255 {
            frames.extend(received(&mut receiver).into_iter().map(|(_, bytes)| bytes));
        }
    }
    frames.extend(received(&mut receiver).into_iter().map(|(_, bytes)| bytes));
    (frames, sender.stats())
}

/// What happened to each sent frame, recovered from the received stream by
/// matching each arrival to the first original (from the last match on)
/// within one bit of it.
#[derive(Default, Debug)]
struct Observed {
    dropped: u64,
    corrupted: u64,
    duplicated: u64,
}

fn observe(frames: &[Vec<u8>], frame_count: u64, payload_bytes: usize) -> Observed {
    let mut observed = Observed::default();
    let mut copies = vec![0u32; frame_count as usize];
    let mut candidate = 0u64;
    for arrival in frames {
        let distance = loop {
            assert!(candidate < frame_count, "an arrival matches no frame sent");
            let distance = differing_bits(arrival, &frame_bytes(0, candidate, payload_bytes));
            if distance <= 1 {
                break distance;
            }
            candidate += 1;
        };
        copies[candidate as usize] += 1;
        observed.corrupted += u64::from(distance);
    }
    for count in copies {
        match count {
            0 => observed.dropped += 1,
            1 => {}
            2 => observed.duplicated += 1,
            _ => panic!("a frame arrived {count} times"),
        }
    }
    observed
}

/// |count - n p| within five standard deviations of a binomial(n, p).
fn assert_binomial(what: &str, count: u64, trials: u64, probability: f64) {
    let mean = trials as f64 * probability;
    let deviation = (mean * (1.0 - probability)).sqrt();
    assert!(
        (count as f64 - mean).abs() <= 5.0 * deviation,
        "{what}: {count} in {trials} trials, expected {mean:.0} ± {:.0}",
        5.0 * deviation
    );
}

#[test]
fn measured_drop_corrupt_and_duplicate_rates_match_the_spec_over_100k_frames() {
    let frame_count = 100_000;
    let (frames, stats) = run_pair(
        "seed:1,drop:0.05,corrupt:0.02,duplicate:0.03",
        frame_count,
        32,
    );
    let observed = observe(&frames, frame_count, 32);
    assert_eq!(observed.dropped, stats.frames_dropped);
    assert_eq!(observed.corrupted, stats.frames_corrupted);
    assert_eq!(observed.duplicated, stats.frames_duplicated);
    assert_eq!(stats.frames_delayed, 0);
    assert_eq!(stats.frames_swallowed_rail_down, 0);
    assert_binomial("dropped", observed.dropped, frame_count, 0.05);
    let sent = frame_count - observed.dropped;
    assert_binomial("corrupted", observed.corrupted, sent, 0.02);
    assert_binomial("duplicated", observed.duplicated, sent, 0.03);
    assert_eq!(frames.len() as u64, sent + observed.duplicated);
}

#[test]
fn rates_of_zero_and_one_are_never_and_always() {
    let (frames, stats) = run_pair("drop:1", 1000, 8);
    assert!(frames.is_empty());
    assert_eq!(stats.frames_dropped, 1000);
    let (frames, stats) = run_pair("drop:0,corrupt:0,duplicate:0", 1000, 8);
    assert_eq!(stats, FaultStats::default());
    assert_eq!(frames.len(), 1000);
    let (frames, stats) = run_pair("duplicate:1", 1000, 8);
    assert_eq!(frames.len(), 2000);
    assert_eq!(stats.frames_duplicated, 1000);
}

#[test]
fn same_seed_gives_the_identical_fault_sequence_and_another_seed_does_not() {
    let faults = "drop:0.1,corrupt:0.1,duplicate:0.1";
    let first = run_pair(&format!("seed:42,{faults}"), 20_000, 24);
    let second = run_pair(&format!("{faults},seed:42"), 20_000, 24);
    assert_eq!(first, second);
    let other = run_pair(&format!("seed:43,{faults}"), 20_000, 24);
    assert_ne!(first.0, other.0);
}

#[test]
fn fate_of_a_frame_depends_neither_on_back_pressure_nor_on_other_peers() {
    let spec_text = "seed:9,drop:0.2,corrupt:0.2,duplicate:0.2";
    let frame_count = 5_000;
    // Reference: no back-pressure, only peer 1.
    let (reference, _) = run_pair(spec_text, frame_count, 16);

    // Inboxes of three frames, and traffic to peer 2 interleaved.
    let mut endpoints = network(3, 3);
    let mut third = endpoints.pop().unwrap();
    let mut receiver = endpoints.pop().unwrap();
    let (_now_ns, clock) = virtual_clock();
    let mut sender = FaultyPath::new(endpoints.pop().unwrap(), spec(spec_text), 0, 0, clock);
    let mut frames = Vec::new();
    let mut refusals = 0;
    for index in 0..frame_count {
        let (header, payload) = frame(0, index, 16);
        while !sender.try_send(1, &header, &payload).unwrap() {
            refusals += 1;
            frames.extend(received(&mut receiver).into_iter().map(|(_, bytes)| bytes));
            sender.flush().unwrap();
        }
        if index % 3 == 0 {
            let (header, payload) = frame(0, index + 1_000_000, 16);
            while !sender.try_send(2, &header, &payload).unwrap() {
                received(&mut third);
                sender.flush().unwrap();
            }
        }
    }
    for _ in 0..HELD_FRAME_COUNT_MAX {
        frames.extend(received(&mut receiver).into_iter().map(|(_, bytes)| bytes));
        if sender.held_frame_count() == 0 && frames.len() >= reference.len() {
            break;
        }
        sender.flush().unwrap();
    }
    assert!(refusals > 100, "the test should exercise back-pressure");
    assert_eq!(frames, reference);
}

#[test]
fn rail_down_window_swallows_exactly_the_frames_inside_it_both_ways() {
    let spec_text = "rail-down:1@1ms+2ms";
    let step_ns = 10_000;
    let frame_count = 500; // 0 .. 5 ms
    let inside = |index: u64| (1_000_000..3_000_000).contains(&(index * step_ns));
    for rail in [0, 1] {
        // Sending side wrapped.
        let mut endpoints = network(2, usize::MAX);
        let mut receiver = endpoints.pop().unwrap();
        let (now_ns, clock) = virtual_clock();
        let mut sender = FaultyPath::new(endpoints.pop().unwrap(), spec(spec_text), 0, rail, clock);
        // Receiving side wrapped (sender plain).
        let mut reverse = network(2, usize::MAX);
        let mut wrapped_receiver =
            FaultyPath::new(reverse.pop().unwrap(), spec(spec_text), 1, rail, {
                let now_ns = now_ns.clone();
                move || now_ns.get()
            });
        let mut plain_sender = reverse.pop().unwrap();

        let mut arrived = Vec::new();
        let mut arrived_through_wrapped_receiver = Vec::new();
        for index in 0..frame_count {
            now_ns.set(index * step_ns);
            let (header, payload) = frame(0, index, 8);
            assert!(sender.try_send(1, &header, &payload).unwrap());
            assert!(plain_sender.try_send(1, &header, &payload).unwrap());
            for (_, bytes) in received(&mut receiver) {
                arrived.push(FrameHeader::parse(&bytes).unwrap().seq);
            }
            for (_, bytes) in received(&mut wrapped_receiver) {
                arrived_through_wrapped_receiver.push(FrameHeader::parse(&bytes).unwrap().seq);
            }
        }
        let expected: Vec<u64> = (0..frame_count)
            .filter(|&index| rail == 0 || !inside(index))
            .collect();
        assert_eq!(arrived, expected, "sending side, rail {rail}");
        assert_eq!(
            arrived_through_wrapped_receiver, expected,
            "receiving side, rail {rail}"
        );
        let swallowed = if rail == 1 { 200 } else { 0 };
        assert_eq!(sender.stats().frames_swallowed_rail_down, swallowed);
        assert_eq!(
            wrapped_receiver.stats().frames_swallowed_rail_down,
            swallowed
        );
    }
}

#[test]
fn rail_down_without_duration_is_down_for_good() {
    let mut endpoints = network(2, usize::MAX);
    let mut receiver = endpoints.pop().unwrap();
    let (now_ns, clock) = virtual_clock();
    let mut sender = FaultyPath::new(
        endpoints.pop().unwrap(),
        spec("rail-down:0@2ms"),
        0,
        0,
        clock,
    );
    for (index, time_ns) in [0, 1_999_999, 2_000_000, 60_000_000_000, u64::MAX]
        .into_iter()
        .enumerate()
    {
        now_ns.set(time_ns);
        let (header, payload) = frame(0, index as u64, 0);
        assert!(sender.try_send(1, &header, &payload).unwrap());
    }
    assert_eq!(received(&mut receiver).len(), 2);
    assert_eq!(sender.stats().frames_swallowed_rail_down, 3);
}

#[test]
fn corrupted_frames_differ_from_the_original_in_exactly_one_bit_outside_the_framing() {
    let mut endpoints = network(2, usize::MAX);
    let mut receiver = endpoints.pop().unwrap();
    let (_now_ns, clock) = virtual_clock();
    let mut sender = FaultyPath::new(
        endpoints.pop().unwrap(),
        spec("seed:5,corrupt:1"),
        0,
        0,
        clock,
    );
    let mut header_flips = 0;
    let mut payload_flips = 0;
    for index in 0..20_000u64 {
        let payload_bytes = (index % 97) as usize;
        let (header, payload) = frame(0, index, payload_bytes);
        let (header_before, payload_before) = (header, payload.clone());
        assert!(sender.try_send(1, &header, &payload).unwrap());
        assert_eq!(
            (header, payload),
            (header_before, payload_before),
            "caller's buffers untouched"
        );
        let arrivals = received(&mut receiver);
        assert_eq!(arrivals.len(), 1);
        let arrival = &arrivals[0].1;
        let original = frame_bytes(0, index, payload_bytes);
        assert_eq!(differing_bits(arrival, &original), 1, "frame {index}");
        // The bytes a path needs to delimit and validate frames never flip.
        assert_eq!(arrival[0..4], original[0..4]);
        assert_eq!(arrival[20..24], original[20..24]);
        if arrival[..resmpi_wire::HEADER_LEN_BYTES] != original[..resmpi_wire::HEADER_LEN_BYTES] {
            header_flips += 1;
        } else {
            payload_flips += 1;
        }
    }
    assert_eq!(sender.stats().frames_corrupted, 20_000);
    // 56 corruptible header bytes against 48 payload bytes on average.
    assert!(
        header_flips > 8_000 && payload_flips > 6_000,
        "{header_flips} {payload_flips}"
    );
}

#[test]
fn pair_filter_leaves_other_pairs_untouched() {
    let spec_text = "drop:1@ranks=0-1,corrupt:1@ranks=1-2,rail-down:0@0ns@ranks=0-1";
    let mut endpoints = network(3, usize::MAX);
    let (_now_ns, clock) = virtual_clock();
    let mut rank_2 = endpoints.pop().unwrap();
    let mut rank_1 = FaultyPath::new(endpoints.pop().unwrap(), spec(spec_text), 1, 0, clock);
    let (_now_ns, clock) = virtual_clock();
    let mut rank_0 = FaultyPath::new(endpoints.pop().unwrap(), spec(spec_text), 0, 0, clock);
    for index in 0..1000 {
        let (header, payload) = frame(0, index, 16);
        assert!(rank_0.try_send(1, &header, &payload).unwrap());
        assert!(rank_0.try_send(2, &header, &payload).unwrap());
    }
    // 0 → 2 is outside every filter: delivered intact and in order.
    let expected: Vec<(u32, Vec<u8>)> = (0..1000)
        .map(|index| (0, frame_bytes(0, index, 16)))
        .collect();
    assert_eq!(received(&mut rank_2), expected);
    // 0 → 1 is swallowed by the rail-down window (checked before dropping).
    assert!(received(&mut rank_1).is_empty());
    assert_eq!(
        rank_0.stats(),
        FaultStats {
            frames_swallowed_rail_down: 1000,
            ..FaultStats::default()
        }
    );
    // 1 → 0 is filtered too (both directions), 1 → 2 only corrupted.
    for index in 0..1000 {
        let (header, payload) = frame(1, index, 16);
        assert!(rank_1.try_send(0, &header, &payload).unwrap());
        assert!(rank_1.try_send(2, &header, &payload).unwrap());
    }
    assert!(received(&mut rank_0).is_empty());
    let to_rank_2 = received(&mut rank_2);
    assert_eq!(to_rank_2.len(), 1000);
    for (index, (source, bytes)) in to_rank_2.iter().enumerate() {
        assert_eq!(*source, 1);
        assert_eq!(differing_bits(bytes, &frame_bytes(1, index as u64, 16)), 1);
    }
    assert_eq!(rank_1.stats().frames_swallowed_rail_down, 1000);
    assert_eq!(rank_1.stats().frames_corrupted, 1000);
}

#[test]
fn delayed_frames_are_released_in_order_once_due_and_the_queue_is_bounded() {
    let mut endpoints = network(2, usize::MAX);
    let mut receiver = endpoints.pop().unwrap();
    let (now_ns, clock) = virtual_clock();
    let mut sender = FaultyPath::new(endpoints.pop().unwrap(), spec("delay:1"), 0, 0, clock);
    for index in 0..10 {
        now_ns.set(index * 100_000);
        let (header, payload) = frame(0, index, 4);
        assert!(sender.try_send(1, &header, &payload).unwrap());
    }
    assert_eq!(sender.next_due_ns(), Some(1_000_000));
    now_ns.set(999_999);
    sender.flush().unwrap();
    assert!(received(&mut receiver).is_empty());
    now_ns.set(1_350_000); // frames sent at 0, 0.1, 0.2, 0.3 ms are due
    sender.poll(|_, _| {}).unwrap();
    let seqs = |frames: Vec<(u32, Vec<u8>)>| -> Vec<u64> {
        frames
            .iter()
            .map(|(_, bytes)| FrameHeader::parse(bytes).unwrap().seq)
            .collect()
    };
    assert_eq!(seqs(received(&mut receiver)), vec![0, 1, 2, 3]);
    now_ns.set(10_000_000);
    sender.flush().unwrap();
    assert_eq!(seqs(received(&mut receiver)), vec![4, 5, 6, 7, 8, 9]);
    assert_eq!(sender.stats().frames_delayed, 10);
    assert_eq!(sender.next_due_ns(), None);

    // Fill the queue: the next send is refused, not lost.
    let (header, payload) = frame(0, 0, 0);
    for _ in 0..HELD_FRAME_COUNT_MAX {
        assert!(sender.try_send(1, &header, &payload).unwrap());
    }
    assert!(!sender.try_send(1, &header, &payload).unwrap());
    assert_eq!(sender.held_frame_count(), HELD_FRAME_COUNT_MAX);
    now_ns.set(11_000_000);
    sender.flush().unwrap();
    assert_eq!(received(&mut receiver).len(), HELD_FRAME_COUNT_MAX);
    assert!(sender.try_send(1, &header, &payload).unwrap());
}

#[test]
fn duplicate_refused_by_a_full_path_waits_and_keeps_the_order() {
    let mut endpoints = network(2, 1);
    let mut receiver = endpoints.pop().unwrap();
    let (_now_ns, clock) = virtual_clock();
    let mut sender = FaultyPath::new(endpoints.pop().unwrap(), spec("duplicate:1"), 0, 0, clock);
    let mut arrived = Vec::new();
    for index in 0..50 {
        let (header, payload) = frame(0, index, 4);
        while !sender.try_send(1, &header, &payload).unwrap() {
            for (_, bytes) in received(&mut receiver) {
                arrived.push(FrameHeader::parse(&bytes).unwrap().seq);
            }
            sender.flush().unwrap();
        }
    }
    for _ in 0..100 {
        for (_, bytes) in received(&mut receiver) {
            arrived.push(FrameHeader::parse(&bytes).unwrap().seq);
        }
        if sender.held_frame_count() == 0 && arrived.len() >= 100 {
            break;
        }
        sender.flush().unwrap();
    }
    let expected: Vec<u64> = (0..50).flat_map(|index| [index, index]).collect();
    assert_eq!(arrived, expected);
    assert_eq!(sender.stats().frames_duplicated, 50);
}

#[test]
fn empty_spec_forwards_everything_untouched() {
    let (frames, stats) = run_pair("", 1000, 8);
    assert_eq!(stats, FaultStats::default());
    let expected: Vec<Vec<u8>> = (0..1000).map(|index| frame_bytes(0, index, 8)).collect();
    assert_eq!(frames, expected);
}

#[test]
fn process_faults_leave_every_frame_alone() {
    let (frames, stats) = run_pair(
        "kill:1@0ns,kill:0@sends=1,host-down:localhost@0ns,seed:5",
        1000,
        8,
    );
    assert_eq!(stats, FaultStats::default());
    let expected: Vec<Vec<u8>> = (0..1000).map(|index| frame_bytes(0, index, 8)).collect();
    assert_eq!(frames, expected);
}
