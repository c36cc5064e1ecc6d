//! Re-join at the engine: a peer dies, a new incarnation of it takes its
//! place, and from then on only the new process's messages are delivered,
//! numbered from 1 again, in order, both ways, while frames the old process
//! left in flight are dropped. Two production engines over the in-memory
//! path; the test is the network and decides when each frame moves.

use std::sync::Arc;

use resmpi_core::comm::Communicator;
use resmpi_core::engine::{Destination, Engine, EngineConfig};
use resmpi_core::transport::{Route, Transports};
use resmpi_core::{ErrorClass, SendMode};
use resmpi_ft::PassThrough;
use resmpi_path::memory::MemoryPath;
use resmpi_wire::FrameHeader;

const WORLD: usize = 0;
const WORLD_CONTEXT: u32 = 0;
const SIZE: u32 = 2;
const EAGER_LIMIT_BYTES: usize = 1024;
const PROC_FAILED: i32 = ErrorClass::ProcFailed as i32;
/// Progress rounds that move every frame of a small exchange.
const ROUNDS: usize = 50;

type Frames = Vec<(u32, Vec<u8>)>;

/// World rank `rank` of a 2-rank job over the in-memory path, with WORLD
/// and SELF as `Mpi::init` builds them.
fn engine(rank: u32) -> Engine<PassThrough> {
    let config = EngineConfig {
        eager_limit_bytes: EAGER_LIMIT_BYTES,
        eager_credit_bytes: 64 * 1024,
    };
    let transports = Transports::memory(rank, SIZE, MemoryPath::new(64, 64 * 1024));
    let mut engine = Engine::new(rank, SIZE, config, transports, PassThrough);
    let world = Communicator::new(
        WORLD_CONTEXT,
        Arc::new((0..SIZE).collect()),
        rank,
        0,
        "world".into(),
    );
    let own = Communicator::new(1, Arc::new(vec![rank]), 0, 0, "self".into());
    engine.state.comms = vec![Some(world), Some(own)];
    engine
}

/// Every frame `engine` has sent and the network has not taken yet.
fn take_outgoing(engine: &mut Engine<PassThrough>) -> Frames {
    let memory = engine.transports.memory.as_mut().expect("memory path");
    std::iter::from_fn(|| memory.take_outgoing()).collect()
}

/// Hand `frames` (all from `source`) to `engine`, oldest first.
fn deliver(engine: &mut Engine<PassThrough>, source: u32, frames: Frames) {
    let memory = engine.transports.memory.as_mut().expect("memory path");
    for (destination, frame) in frames {
        assert_eq!(destination, engine.state.rank, "frame for another rank");
        memory.push_incoming(source, frame);
    }
}

/// Progress both engines and move their frames until nothing is left.
fn exchange(zero: &mut Engine<PassThrough>, one: &mut Engine<PassThrough>) {
    for _ in 0..ROUNDS {
        zero.progress().expect("rank 0 progress");
        let frames = take_outgoing(zero);
        deliver(one, 0, frames);
        one.progress().expect("rank 1 progress");
        let frames = take_outgoing(one);
        deliver(zero, 1, frames);
    }
}

fn send(engine: &mut Engine<PassThrough>, peer: u32, tag: i32, bytes: &[u8]) -> u32 {
    let destination = Destination {
        peer,
        context: WORLD_CONTEXT,
        tag,
    };
    engine
        .start_send(
            WORLD,
            destination,
            bytes.as_ptr(),
            bytes.len(),
            SendMode::Standard,
        )
        .expect("send")
}

fn receive(engine: &mut Engine<PassThrough>, source: u32, buffer: &mut [u8]) -> u32 {
    engine
        .start_receive(
            WORLD,
            buffer.as_mut_ptr(),
            buffer.len(),
            Some(source),
            None,
            WORLD_CONTEXT,
        )
        .expect("receive")
}

/// (complete, error class, tag) of request `index`.
fn outcome(engine: &Engine<PassThrough>, index: u32) -> (bool, i32, i32) {
    let request = engine.state.requests.get(index).expect("live request");
    (request.complete, request.status.error, request.status.tag)
}

/// `length` bytes that say which process sent message `tag`.
fn message(incarnation: u8, tag: i32, length: usize) -> Vec<u8> {
    (0..length)
        .map(|index| incarnation.wrapping_mul(101) ^ (tag as u8) ^ (index as u8))
        .collect()
}

#[test]
fn old_incarnation_frames_in_flight_are_dropped_and_the_new_one_is_delivered_in_order() {
    let mut zero = engine(0);
    let mut old_one = engine(1);

    // The first process of rank 1 sends three messages (eager, eager,
    // rendezvous); the network delivers the first only, after rank 0 took
    // it as unexpected, and holds the rest.
    let old_messages: Vec<Vec<u8>> = vec![
        message(0, 1, 16),
        message(0, 2, 32),
        message(0, 3, 4 * EAGER_LIMIT_BYTES),
    ];
    for (tag, bytes) in (1..).zip(&old_messages) {
        send(&mut old_one, 0, tag, bytes);
    }
    old_one.progress().unwrap();
    let mut in_flight = take_outgoing(&mut old_one);
    assert_eq!(in_flight.len(), 3, "two eager frames and a request-to-send");
    let first = in_flight.remove(0);
    deliver(&mut zero, 1, vec![first]);
    zero.progress().unwrap();
    assert_eq!(
        FrameHeader::parse(&in_flight[0].1).unwrap().incarnation,
        0,
        "the first process sends as incarnation 0"
    );

    // Rank 0 waits for rank 1 when the death is noticed.
    let mut pending = [0u8; 64];
    let pending_receive = receive(&mut zero, 1, &mut pending);
    // The unexpected message matched it at once: sent before the death,
    // delivered before the notice.
    assert_eq!(outcome(&zero, pending_receive), (true, 0, 1));
    let mut waiting = [0u8; 64];
    let waiting_receive = receive(&mut zero, 1, &mut waiting);
    zero.handle_peer_failure(1);
    let (complete, error, _) = outcome(&zero, waiting_receive);
    assert!(
        complete && error == PROC_FAILED,
        "a receive from the dead process fails"
    );
    drop(old_one);

    // Incarnation 1 of rank 1 starts; rank 0 is told of it.
    let mut new_one = engine(1);
    new_one.set_own_incarnation(1);
    assert!(zero.handle_peer_rejoin(1, 1, Route::Memory));
    assert!(
        !zero.handle_peer_rejoin(1, 1, Route::Memory),
        "a re-join already known is stale"
    );
    assert!(!zero.peer_failed(1));
    assert_eq!(zero.state.peer_incarnation(1), 1);

    // What the dead process left in flight arrives now: dropped, and the
    // old message numbers 2 and 3 are no gap for the new numbering.
    deliver(&mut zero, 1, std::mem::take(&mut in_flight));
    zero.progress()
        .expect("old frames are dropped, not an error");
    assert_eq!(zero.state.old_incarnation_frames_dropped, 2);

    // Both ways, eager and rendezvous, in order, right content.
    let new_messages: Vec<Vec<u8>> = vec![
        message(1, 1, 16),
        message(1, 2, 4 * EAGER_LIMIT_BYTES),
        message(1, 3, 8),
    ];
    let mut buffers: Vec<Vec<u8>> = new_messages.iter().map(|m| vec![0u8; m.len()]).collect();
    let receives: Vec<u32> = buffers
        .iter_mut()
        .map(|buffer| receive(&mut zero, 1, buffer))
        .collect();
    let sends: Vec<u32> = (1..)
        .zip(&new_messages)
        .map(|(tag, bytes)| send(&mut new_one, 0, tag, bytes))
        .collect();
    let reply = message(2, 9, 3 * EAGER_LIMIT_BYTES);
    let mut reply_buffer = vec![0u8; reply.len()];
    let reply_receive = receive(&mut new_one, 0, &mut reply_buffer);
    let reply_send = send(&mut zero, 1, 9, &reply);
    exchange(&mut zero, &mut new_one);

    for ((tag, index), (buffer, expected)) in
        (1..).zip(&receives).zip(buffers.iter().zip(&new_messages))
    {
        assert_eq!(outcome(&zero, *index), (true, 0, tag), "message {tag}");
        assert_eq!(buffer, expected, "message {tag} is the new process's");
    }
    for index in sends {
        assert!(outcome(&new_one, index).0, "send of the new process done");
    }
    assert_eq!(outcome(&new_one, reply_receive), (true, 0, 9));
    assert_eq!(reply_buffer, reply);
    assert!(outcome(&zero, reply_send).0);
    assert_eq!(zero.state.duplicate_messages_dropped, 0);
    assert_eq!(new_one.state.old_incarnation_frames_dropped, 0);
}

#[test]
fn an_old_incarnation_message_left_unexpected_is_not_delivered_after_the_rejoin() {
    let mut zero = engine(0);
    let mut old_one = engine(1);
    let old = message(0, 4, 24);
    send(&mut old_one, 0, 4, &old);
    old_one.progress().unwrap();
    let frames = take_outgoing(&mut old_one);
    deliver(&mut zero, 1, frames);
    zero.progress().unwrap();
    zero.handle_peer_failure(1);

    let mut new_one = engine(1);
    new_one.set_own_incarnation(1);
    assert!(zero.handle_peer_rejoin(1, 1, Route::Memory));
    let new = message(1, 4, 24);
    let mut buffer = vec![0u8; 24];
    let index = receive(&mut zero, 1, &mut buffer);
    assert!(
        !outcome(&zero, index).0,
        "the old process's unexpected message must not match a receive posted after the re-join"
    );
    send(&mut new_one, 0, 4, &new);
    exchange(&mut zero, &mut new_one);
    assert_eq!(outcome(&zero, index), (true, 0, 4));
    assert_eq!(buffer, new);
}

#[test]
fn a_frame_from_an_unannounced_incarnation_is_an_error_not_a_silent_loss() {
    let mut zero = engine(0);
    let mut stranger = engine(1);
    stranger.set_own_incarnation(2);
    send(&mut stranger, 0, 1, &[1, 2, 3]);
    stranger.progress().unwrap();
    let frames = take_outgoing(&mut stranger);
    deliver(&mut zero, 1, frames);
    let error = zero.progress().unwrap_err();
    assert_eq!(error.class, ErrorClass::Intern);
    assert!(
        error.message.contains("incarnation 2 of rank 1"),
        "{}",
        error.message
    );
}
