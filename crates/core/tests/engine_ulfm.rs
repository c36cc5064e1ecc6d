//! ULFM in production engines over memory paths: the revoke flood reaches
//! every live member when the revoker dies having reached only one, and a
//! revoked communicator ends pending receives and rendezvous sends
//! without ever writing into a receive after it ended.

use std::sync::Arc;

use resmpi_core::comm::Communicator;
use resmpi_core::engine::{Destination, Engine, EngineConfig};
use resmpi_core::transport::Transports;
use resmpi_core::{ErrorClass, SendMode};
use resmpi_ft::PassThrough;
use resmpi_path::MemoryPath;

const WORLD: usize = 0;
const CONTEXT: u32 = 0;
const STEPS_MAX: usize = 10_000;

fn mesh(size: u32) -> Vec<Engine<PassThrough>> {
    let config = EngineConfig {
        eager_limit_bytes: 256,
        eager_credit_bytes: 64 * 1024,
    };
    (0..size)
        .map(|rank| {
            let transports = Transports::memory(rank, size, MemoryPath::new(64, 1024));
            let mut engine = Engine::new(rank, size, config, transports, PassThrough);
            let world = Communicator::new(
                CONTEXT,
                Arc::new((0..size).collect()),
                rank,
                0,
                "world".into(),
            );
            engine.state.comms = vec![Some(world)];
            engine.failures_are_events = true;
            engine
        })
        .collect()
}

/// One round: every live engine progresses, then frames move; `deliver`
/// says whether a frame (source, destination) gets through.
fn step(engines: &mut [Engine<PassThrough>], dead: &[u32], deliver: &dyn Fn(u32, u32) -> bool) {
    for (rank, engine) in engines.iter_mut().enumerate() {
        if !dead.contains(&(rank as u32)) {
            engine.progress().unwrap();
        }
    }
    let mut moving = Vec::new();
    for (source, engine) in engines.iter_mut().enumerate() {
        let memory = engine.transports.memory.as_mut().unwrap();
        while let Some((destination, frame)) = memory.take_outgoing() {
            moving.push((source as u32, destination, frame));
        }
    }
    for (source, destination, frame) in moving {
        if dead.contains(&destination) || !deliver(source, destination) {
            continue;
        }
        engines[destination as usize]
            .transports
            .memory
            .as_mut()
            .unwrap()
            .push_incoming(source, frame);
    }
}

fn error_of(engine: &Engine<PassThrough>, index: u32) -> Option<i32> {
    let request = engine.state.requests.get(index)?;
    request.complete.then_some(request.status.error)
}

#[test]
fn revoke_reaches_every_live_member_when_the_revoker_reached_only_one() {
    let mut engines = mesh(4);
    let mut buffers = [[0u8; 8]; 4];
    // Ranks 1-3 wait for a message from a live rank that never sends.
    let mut receives = Vec::new();
    for rank in 1..4u32 {
        let source = if rank == 3 { 1 } else { rank + 1 };
        let buffer = buffers[rank as usize].as_mut_ptr();
        let index = engines[rank as usize]
            .start_receive(WORLD, buffer, 8, Some(source), Some(5), CONTEXT)
            .unwrap();
        receives.push((rank, index));
    }
    engines[0].revoke_communicator(WORLD).unwrap();
    // Rank 0 dies having reached rank 1 only, which reads the revoke
    // before it is told of the death (after the notice, nothing of the
    // dead is delivered, its revoke included: then nobody saw it, which
    // is the same as a revoker dying before it revoked); then everyone is
    // told.
    let only_to_rank_1 = |source: u32, destination: u32| source != 0 || destination == 1;
    step(&mut engines, &[], &only_to_rank_1);
    step(&mut engines, &[0], &|_, _| true);
    for engine in engines.iter_mut().skip(1) {
        engine.handle_peer_failure(0);
    }
    for _ in 0..STEPS_MAX {
        if receives
            .iter()
            .all(|&(rank, index)| error_of(&engines[rank as usize], index).is_some())
        {
            break;
        }
        step(&mut engines, &[0], &|_, _| true);
    }
    for &(rank, index) in &receives {
        assert_eq!(
            error_of(&engines[rank as usize], index),
            Some(ErrorClass::Revoked as i32),
            "rank {rank}'s receive"
        );
        assert!(
            engines[rank as usize].state.comm_revoked(WORLD),
            "rank {rank}"
        );
    }
    // A later operation fails at once.
    let index = engines[2]
        .start_send(
            WORLD,
            Destination {
                peer: 3,
                context: CONTEXT,
                tag: 1,
            },
            buffers[2].as_ptr(),
            8,
            SendMode::Standard,
        )
        .unwrap();
    assert_eq!(
        error_of(&engines[2], index),
        Some(ErrorClass::Revoked as i32)
    );
}

#[test]
fn a_revoke_during_a_rendezvous_ends_both_sides_and_writes_nothing_after() {
    let mut engines = mesh(2);
    let payload = vec![7u8; 4096];
    let mut target = vec![0u8; 4096];
    let send = engines[0]
        .start_send(
            WORLD,
            Destination {
                peer: 1,
                context: CONTEXT,
                tag: 3,
            },
            payload.as_ptr(),
            payload.len(),
            SendMode::Standard,
        )
        .unwrap();
    let receive = engines[1]
        .start_receive(
            WORLD,
            target.as_mut_ptr(),
            target.len(),
            Some(0),
            Some(3),
            CONTEXT,
        )
        .unwrap();
    // Let the request-to-send and clear-to-send pass, then revoke at the receiver.
    for _ in 0..2 {
        step(&mut engines, &[], &|_, _| true);
    }
    engines[1].revoke_communicator(WORLD).unwrap();
    let ended_with = error_of(&engines[1], receive);
    let written_at_end: usize = target.iter().filter(|&&byte| byte == 7).count();
    for _ in 0..50 {
        step(&mut engines, &[], &|_, _| true);
    }
    assert!(
        error_of(&engines[0], send).is_some(),
        "the send never ended"
    );
    if ended_with == Some(ErrorClass::Revoked as i32) {
        let written_after: usize = target.iter().filter(|&&byte| byte == 7).count();
        assert_eq!(
            written_at_end, written_after,
            "data written into a receive that had ended"
        );
    } else {
        assert_eq!(
            ended_with,
            Some(0),
            "the receive had completed before the revoke"
        );
    }
}
