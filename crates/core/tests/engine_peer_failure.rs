//! A peer's death is an event for the engine: exactly the requests that
//! need the dead process end with MPIX_ERR_PROC_FAILED, everything else
//! goes on, later operations on it fail at once, and nothing it sent is
//! delivered once its death is known.

use std::sync::Arc;

use resmpi_core::comm::Communicator;
use resmpi_core::engine::{Destination, Engine, EngineConfig};
use resmpi_core::transport::{Route, Transports};
use resmpi_core::{ErrorClass, SendMode};
use resmpi_ft::EventCounter;
use resmpi_wire::{FrameHeader, FrameKind};

const WORLD: usize = 0;
const PAIR: usize = 1;
const WORLD_CONTEXT: u32 = 0;
const PAIR_CONTEXT: u32 = 10;
const PROC_FAILED: i32 = ErrorClass::ProcFailed as i32;

/// Rank 0 of a 3-rank job whose peers are never reached over a path here
/// (the test only fails operations on them, or feeds frames in by hand).
/// Communicator 0 is WORLD {0, 1, 2}; communicator 1 holds {0, 2}.
fn rank_zero() -> Engine<EventCounter> {
    let config = EngineConfig {
        eager_limit_bytes: 1024,
        eager_credit_bytes: 64 * 1024,
    };
    let mut transports = Transports::loopback_only();
    transports.routes = vec![Route::Loopback, Route::Tcp, Route::Tcp];
    let mut engine = Engine::new(0, 3, config, transports, EventCounter::default());
    let world = Communicator::new(WORLD_CONTEXT, Arc::new(vec![0, 1, 2]), 0, 0, "world".into());
    let pair = Communicator::new(PAIR_CONTEXT, Arc::new(vec![0, 2]), 0, 0, "pair".into());
    engine.state.comms = vec![Some(world), Some(pair)];
    engine
}

fn receive(
    engine: &mut Engine<EventCounter>,
    comm: usize,
    buffer: &mut [u8],
    source: Option<u32>,
) -> u32 {
    let context = if comm == WORLD {
        WORLD_CONTEXT
    } else {
        PAIR_CONTEXT
    };
    engine
        .start_receive(
            comm,
            buffer.as_mut_ptr(),
            buffer.len(),
            source,
            None,
            context,
        )
        .unwrap()
}

/// (complete, error class) of request `index`.
fn outcome(engine: &Engine<EventCounter>, index: u32) -> (bool, i32) {
    let request = engine.state.requests.get(index).expect("live request");
    (request.complete, request.status.error)
}

#[test]
fn only_requests_that_need_the_dead_peer_fail_and_the_rest_go_on() {
    let mut engine = rank_zero();
    let [mut from_dead, mut any_world, mut any_pair, mut from_live] = [[0u8; 8]; 4];
    let from_dead = receive(&mut engine, WORLD, &mut from_dead, Some(1));
    let any_world = receive(&mut engine, WORLD, &mut any_world, None);
    let any_pair = receive(&mut engine, PAIR, &mut any_pair, None);
    let from_live = receive(&mut engine, WORLD, &mut from_live, Some(2));

    engine.handle_peer_failure(1);
    engine.handle_peer_failure(1);

    assert_eq!(outcome(&engine, from_dead), (true, PROC_FAILED));
    assert_eq!(
        outcome(&engine, any_world),
        (true, PROC_FAILED),
        "a wildcard receive pending on a communicator holding the dead peer fails"
    );
    assert_eq!(
        outcome(&engine, any_pair),
        (false, 0),
        "a communicator without the dead peer is untouched"
    );
    assert_eq!(outcome(&engine, from_live), (false, 0));
    assert_eq!(
        engine.state.interceptor.peer_failures, 1,
        "one event per death"
    );
    assert!(engine.peer_failed(1) && !engine.peer_failed(2) && !engine.peer_failed(0));
    assert_eq!(engine.state.failed_peers(), vec![1]);
}

#[test]
fn later_operations_on_the_dead_peer_fail_at_once() {
    let mut engine = rank_zero();
    engine.handle_peer_failure(1);
    let data = [7u8; 16];
    let large = vec![3u8; 4096];
    let to_dead = Destination {
        peer: 1,
        context: WORLD_CONTEXT,
        tag: 5,
    };
    for (bytes, mode) in [
        (&data[..], SendMode::Standard),
        (&large[..], SendMode::Standard),
        (&data[..], SendMode::Synchronous),
        (&data[..], SendMode::Buffered),
    ] {
        let send = engine
            .start_send(WORLD, to_dead, bytes.as_ptr(), bytes.len(), mode)
            .unwrap();
        assert_eq!(outcome(&engine, send), (true, PROC_FAILED), "{mode:?}");
    }
    let error = engine
        .send_eager_without_request(to_dead, data.as_ptr(), data.len())
        .unwrap_err();
    assert_eq!(error.class, ErrorClass::ProcFailed);
    assert!(error.message.contains("process 1"), "{}", error.message);
    let mut buffer = [0u8; 16];
    let from_dead = receive(&mut engine, WORLD, &mut buffer, Some(1));
    assert_eq!(outcome(&engine, from_dead), (true, PROC_FAILED));
}

#[test]
fn nothing_the_dead_peer_sent_is_delivered_after_its_death_is_known() {
    let mut engine = rank_zero();
    engine.handle_peer_failure(1);
    // A wildcard receive posted after the death waits for live senders.
    let mut buffer = [0u8; 4];
    let any_world = receive(&mut engine, WORLD, &mut buffer, None);
    assert_eq!(outcome(&engine, any_world), (false, 0));
    let mut header = FrameHeader::new(FrameKind::Eager, 1);
    header.context = WORLD_CONTEXT;
    header.tag = 0;
    header.aux = 4;
    header.payload_len = 4;
    header.logical_seq = 1;
    let mut frame = header.to_bytes().to_vec();
    frame.extend_from_slice(&[1, 2, 3, 4]);
    engine.state.handle_frame(1, &frame);
    assert_eq!(
        outcome(&engine, any_world),
        (false, 0),
        "late frame ignored"
    );
    assert_eq!(buffer, [0; 4]);
    // The same frame from a live peer is delivered.
    let mut header = FrameHeader::new(FrameKind::Eager, 2);
    header.context = WORLD_CONTEXT;
    header.aux = 4;
    header.payload_len = 4;
    header.logical_seq = 1;
    let mut frame = header.to_bytes().to_vec();
    frame.extend_from_slice(&[5, 6, 7, 8]);
    engine.state.handle_frame(2, &frame);
    assert_eq!(outcome(&engine, any_world), (true, 0));
    assert_eq!(buffer, [5, 6, 7, 8]);
    // The same message again (a re-send) is recognised by its number.
    let again = receive(&mut engine, WORLD, &mut buffer, Some(2));
    engine.state.handle_frame(2, &frame);
    assert_eq!(outcome(&engine, again), (false, 0), "duplicate delivered");
    assert_eq!(engine.state.duplicate_messages_dropped, 1);
    // Messages to itself still flow.
    let mut own = [0u8; 3];
    let receive_own = receive(&mut engine, WORLD, &mut own, Some(0));
    let data = [9u8; 3];
    let to_self = Destination {
        peer: 0,
        context: WORLD_CONTEXT,
        tag: 1,
    };
    let send = engine
        .start_send(WORLD, to_self, data.as_ptr(), 3, SendMode::Standard)
        .unwrap();
    engine.wait_request(receive_own).unwrap();
    engine.wait_request(send).unwrap();
    assert_eq!(own, data);
}

#[test]
fn cancelling_a_send_to_the_dead_peer_leaves_it_ended() {
    // Found by the simulator's kill sweep: MPI_Cancel reopened a send that
    // had ended with PROC_FAILED and asked the dead peer to withdraw it;
    // no answer ever came, so its MPI_Wait hung.
    let mut engine = rank_zero();
    engine.handle_peer_failure(1);
    let data = [7u8; 16];
    let to_dead = Destination {
        peer: 1,
        context: WORLD_CONTEXT,
        tag: 5,
    };
    for mode in [SendMode::Standard, SendMode::Synchronous] {
        let send = engine
            .start_send(WORLD, to_dead, data.as_ptr(), data.len(), mode)
            .unwrap();
        engine.cancel(send).unwrap();
        assert_eq!(outcome(&engine, send), (true, PROC_FAILED), "{mode:?}");
        let status = engine.state.requests.get(send).unwrap().status;
        assert!(!status.cancelled, "{mode:?}: nothing was withdrawn");
    }
}
