//! The engine on the loopback route alone (a one-rank job): eager and
//! rendezvous self-messages, MPI ordering, unexpected messages, truncation,
//! cancel, and the events reported to the fault-tolerance interceptor.

use resmpi_core::engine::{Destination, Engine, EngineConfig};
use resmpi_core::request::Operation;
use resmpi_core::transport::Transports;
use resmpi_core::{ErrorClass, SendMode, Unexpected};
use resmpi_ft::EventCounter;

const CONTEXT: u32 = 0;

fn engine() -> Engine<EventCounter> {
    let config = EngineConfig {
        eager_limit_bytes: 1024,
        eager_credit_bytes: 64 * 1024,
    };
    Engine::new(
        0,
        1,
        config,
        Transports::loopback_only(),
        EventCounter::default(),
    )
}

fn send(engine: &mut Engine<EventCounter>, data: &[u8], tag: i32, mode: SendMode) -> u32 {
    let destination = Destination {
        peer: 0,
        context: CONTEXT,
        tag,
    };
    engine
        .start_send(0, destination, data.as_ptr(), data.len(), mode)
        .unwrap()
}

fn receive(engine: &mut Engine<EventCounter>, buffer: &mut [u8], tag: Option<i32>) -> u32 {
    engine
        .start_receive(0, buffer.as_mut_ptr(), buffer.len(), None, tag, CONTEXT)
        .unwrap()
}

#[test]
fn eager_and_rendezvous_self_messages_arrive_intact_and_report_events() {
    let mut engine = engine();
    let small: Vec<u8> = (0..100u8).collect();
    let large: Vec<u8> = (0..5_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut small_in = vec![0u8; 100];
    let mut large_in = vec![0u8; large.len()];
    let receive_small = receive(&mut engine, &mut small_in, Some(1));
    let send_large = send(&mut engine, &large, 2, SendMode::Standard);
    let send_small = send(&mut engine, &small, 1, SendMode::Synchronous);
    let receive_large = receive(&mut engine, &mut large_in, Some(2));
    for request in [receive_small, send_large, send_small, receive_large] {
        engine.wait_request(request).unwrap();
    }
    assert_eq!(small_in, small);
    assert_eq!(large_in, large);
    let events = &engine.state.interceptor;
    assert_eq!(
        (
            events.matches,
            events.receives_completed,
            events.sends_completed
        ),
        (2, 2, 2)
    );
}

#[test]
fn same_tag_messages_match_in_send_order_even_when_unexpected() {
    let mut engine = engine();
    let payloads: Vec<[u8; 4]> = (0..50u32).map(|i| i.to_le_bytes()).collect();
    let sends: Vec<u32> = payloads
        .iter()
        .map(|p| send(&mut engine, p, 9, SendMode::Standard))
        .collect();
    for request in sends {
        engine.wait_request(request).unwrap();
    }
    engine.progress().unwrap();
    assert_eq!(engine.state.matcher.unexpected_len(), 50);
    for expected in 0..50u32 {
        let mut buffer = [0u8; 4];
        let request = receive(&mut engine, &mut buffer, None);
        engine.wait_request(request).unwrap();
        assert_eq!(u32::from_le_bytes(buffer), expected);
    }
}

#[test]
fn truncated_receive_keeps_what_fits_and_flags_truncate() {
    let mut engine = engine();
    for length in [10usize, 4_000] {
        let data = vec![7u8; length];
        let mut buffer = vec![0u8; 5];
        let send_request = send(&mut engine, &data, 3, SendMode::Standard);
        let receive_request = receive(&mut engine, &mut buffer, Some(3));
        engine.wait_request(receive_request).unwrap();
        engine.wait_request(send_request).unwrap();
        let status = engine.state.requests.get(receive_request).unwrap().status;
        assert_eq!(status.error, ErrorClass::Truncate as i32, "length {length}");
        assert_eq!(status.count_bytes, 5);
        assert_eq!(buffer, vec![7u8; 5]);
    }
}

#[test]
fn unmatched_receive_can_be_cancelled_and_never_matches_later() {
    let mut engine = engine();
    let mut buffer = [0u8; 4];
    let request = receive(&mut engine, &mut buffer, Some(4));
    engine.cancel(request).unwrap();
    let cancelled = engine.state.requests.get(request).unwrap();
    assert!(cancelled.complete && cancelled.status.cancelled);
    assert!(matches!(cancelled.operation, Operation::Receive(_)));
    let send_request = send(&mut engine, &[1, 2, 3, 4], 4, SendMode::Standard);
    engine.wait_request(send_request).unwrap();
    engine.progress().unwrap();
    assert_eq!(engine.state.matcher.unexpected_len(), 1);
    assert_eq!(buffer, [0u8; 4]);
}

#[test]
fn eager_credit_exhaustion_falls_back_to_rendezvous_instead_of_buffering() {
    // 64 KiB of credit and 1 KiB messages: without credit returns, at most
    // ~60 eager messages may sit unexpected; the rest must wait as
    // rendezvous announcements (no payload buffered at the receiver).
    let mut engine = engine();
    let data = vec![1u8; 1000];
    let sends: Vec<u32> = (0..200)
        .map(|_| send(&mut engine, &data, 5, SendMode::Standard))
        .collect();
    for _ in 0..10 {
        engine.progress().unwrap();
    }
    assert_eq!(engine.state.matcher.unexpected_len(), 200);
    let mut buffered_bytes = 0;
    let mut rendezvous_count = 0;
    for (_, message) in engine.state.matcher.unexpected_mut() {
        match message {
            Unexpected::Eager { data, .. } => buffered_bytes += data.len(),
            Unexpected::Rendezvous { .. } => rendezvous_count += 1,
        }
    }
    assert!(
        buffered_bytes <= 64 * 1024,
        "{buffered_bytes} bytes buffered beyond the credit"
    );
    assert!(
        rendezvous_count >= 130,
        "only {rendezvous_count} sends fell back to rendezvous"
    );
    let mut buffers = vec![vec![0u8; 1000]; 200];
    let receives: Vec<u32> = buffers
        .iter_mut()
        .map(|b| receive(&mut engine, b, Some(5)))
        .collect();
    for request in receives.into_iter().chain(sends) {
        engine.wait_request(request).unwrap();
    }
    assert!(buffers.iter().all(|b| b == &data));
}

/// Every other 8-byte word: packed size 8, extent 16.
fn every_other_word() -> std::sync::Arc<resmpi_core::datatype::Datatype> {
    use resmpi_core::datatype::{BasicKind, Datatype, TypeInfo};
    let word = Datatype::basic(TypeInfo::basic(8, BasicKind::Byte), 8);
    std::sync::Arc::new(Datatype::resized(&word, 0, 16).unwrap())
}

#[test]
fn typed_messages_are_gathered_into_frames_and_scattered_out_of_them() {
    use resmpi_core::user_bytes::UserBytes;
    for elements in [10usize, 200_000] {
        // 80 B goes eagerly; 1.6 MB by rendezvous in many fragments.
        let mut engine = engine();
        let source: Vec<u8> = (0..elements * 16).map(|i| (i * 13 % 251) as u8).collect();
        let mut target = vec![0xEEu8; elements * 16];
        let typed = |base: *mut u8| UserBytes::Typed {
            base,
            datatype: every_other_word(),
            count: elements,
        };
        let destination = Destination {
            peer: 0,
            context: CONTEXT,
            tag: 5,
        };
        let length = elements * 8;
        let receive = engine
            .start_receive(
                0,
                typed(target.as_mut_ptr()),
                length,
                None,
                Some(5),
                CONTEXT,
            )
            .unwrap();
        let send = engine
            .start_send(
                0,
                destination,
                typed(source.as_ptr() as *mut u8),
                length,
                SendMode::Standard,
            )
            .unwrap();
        for request in [receive, send] {
            engine.wait_request(request).unwrap();
        }
        assert_eq!(
            engine
                .state
                .requests
                .get(receive)
                .unwrap()
                .status
                .count_bytes,
            length
        );
        for (position, (got, sent)) in target.iter().zip(&source).enumerate() {
            let wanted = if position % 16 < 8 { *sent } else { 0xEE };
            assert_eq!(*got, wanted, "{elements} elements, byte {position}");
        }
    }
}

#[test]
fn a_send_no_receive_matched_is_withdrawn_and_a_later_one_is_received_instead() {
    for length in [100usize, 5000] {
        // 100 B goes eagerly, 5000 B by rendezvous (eager limit 1024).
        let mut engine = engine();
        let doomed = vec![1u8; length];
        let survivor = vec![2u8; 10];
        let cancelled = send(&mut engine, &doomed, 4, SendMode::Standard);
        engine.cancel(cancelled).unwrap();
        engine.wait_request(cancelled).unwrap();
        assert!(
            engine
                .state
                .requests
                .get(cancelled)
                .unwrap()
                .status
                .cancelled
        );
        let later = send(&mut engine, &survivor, 4, SendMode::Standard);
        let mut received = vec![0u8; length];
        let receive = receive(&mut engine, &mut received, Some(4));
        engine.wait_request(receive).unwrap();
        engine.wait_request(later).unwrap();
        let status = engine.state.requests.get(receive).unwrap().status;
        assert_eq!(
            status.count_bytes, 10,
            "{length}-byte message was not withdrawn"
        );
        assert_eq!(&received[..10], &survivor[..]);
        assert!(!engine.state.requests.get(later).unwrap().status.cancelled);
    }
}

#[test]
fn a_send_already_matched_is_not_cancelled() {
    let mut engine = engine();
    let data = vec![3u8; 100];
    let mut received = vec![0u8; 100];
    let receive = receive(&mut engine, &mut received, Some(6));
    let sent = send(&mut engine, &data, 6, SendMode::Standard);
    engine.wait_request(receive).unwrap();
    engine.cancel(sent).unwrap();
    engine.wait_request(sent).unwrap();
    assert!(!engine.state.requests.get(sent).unwrap().status.cancelled);
    assert_eq!(received, data);
}
