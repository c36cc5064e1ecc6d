//! Interceptors that act (issue 9, part 3): a protocol plugged into the
//! production engine can fan a send out or redirect it, keep every payload,
//! pin or defer a wildcard receive's source, see probe and completion
//! choices, exchange its own frames, and keep timers. Engines run over
//! in-memory paths (as in `crates/sim`), frames moved by `step`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use resmpi_core::comm::Communicator;
use resmpi_core::datatype::{BasicKind, Datatype, TypeInfo};
use resmpi_core::engine::{Destination, Engine, EngineConfig, ProbeLook};
use resmpi_core::transport::Transports;
use resmpi_core::user_bytes::UserBytes;
use resmpi_core::SendMode;
use resmpi_ft::{
    CompletionCall, CompletionChoice, Envelope, Interceptor, PassThrough, Payload, ProbeOutcome,
    ReceivePattern, ReplayedChoice, SendEnvelope, SendTargets, SentMessage, WildcardDecision,
};
use resmpi_path::MemoryPath;

const WORLD: usize = 0;
const CONTEXT: u32 = 0;
const EAGER_LIMIT_BYTES: usize = 1024;
const MAX_PAYLOAD_BYTES: usize = 4096;
const STEPS_MAX: usize = 10_000;

/// `size` engines over memory paths, WORLD = all of them; rank r's
/// protocol is `protocol(r)`.
fn mesh<P: Interceptor>(size: u32, mut protocol: impl FnMut(u32) -> P) -> Vec<Engine<P>> {
    let config = EngineConfig {
        eager_limit_bytes: EAGER_LIMIT_BYTES,
        eager_credit_bytes: 64 * 1024,
    };
    (0..size)
        .map(|rank| {
            let path = MemoryPath::new(64, MAX_PAYLOAD_BYTES);
            let transports = Transports::memory(rank, size, path);
            let mut engine = Engine::new(rank, size, config, transports, protocol(rank));
            let world = Communicator::new(
                CONTEXT,
                Arc::new((0..size).collect()),
                rank,
                0,
                "world".into(),
            );
            engine.state.comms = vec![Some(world)];
            engine
        })
        .collect()
}

/// One round: every engine progresses, then every frame sent moves to
/// its destination (FIFO per pair); frames for ranks outside `engines`
/// (dead ones) are lost.
fn step<P: Interceptor>(engines: &mut [Engine<P>]) {
    for engine in engines.iter_mut() {
        engine.progress().unwrap();
    }
    let mut moving = Vec::new();
    for (source, engine) in engines.iter_mut().enumerate() {
        let memory = engine.transports.memory.as_mut().unwrap();
        while let Some((destination, frame)) = memory.take_outgoing() {
            moving.push((source as u32, destination, frame));
        }
    }
    for (source, destination, frame) in moving {
        let Some(engine) = engines.get_mut(destination as usize) else {
            continue;
        };
        engine
            .transports
            .memory
            .as_mut()
            .unwrap()
            .push_incoming(source, frame);
    }
}

/// Step until `done` holds; panics past a bound (a hang is a failure).
fn run_until<P: Interceptor>(
    engines: &mut [Engine<P>],
    mut done: impl FnMut(&[Engine<P>]) -> bool,
) {
    for _ in 0..STEPS_MAX {
        if done(engines) {
            return;
        }
        step(engines);
    }
    panic!("no progress after {STEPS_MAX} steps");
}

fn is_complete<P: Interceptor>(engine: &Engine<P>, index: u32) -> bool {
    engine
        .state
        .requests
        .get(index)
        .is_none_or(|request| request.complete)
}

fn send<P: Interceptor>(
    engine: &mut Engine<P>,
    peer: u32,
    tag: i32,
    data: &[u8],
    mode: SendMode,
) -> u32 {
    let destination = Destination {
        peer,
        context: CONTEXT,
        tag,
    };
    engine
        .start_send(WORLD, destination, data.as_ptr(), data.len(), mode)
        .unwrap()
}

fn receive<P: Interceptor>(
    engine: &mut Engine<P>,
    buffer: &mut [u8],
    source: Option<u32>,
    tag: Option<i32>,
) -> u32 {
    engine
        .start_receive(
            WORLD,
            buffer.as_mut_ptr(),
            buffer.len(),
            source,
            tag,
            CONTEXT,
        )
        .unwrap()
}

fn pattern_bytes(length: usize, seed: u8) -> Vec<u8> {
    (0..length)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

// ----- fan-out and redirect ---------------------------------------------------

/// Replication's shape: a send to `original` also goes to `replica`
/// (`redirect` false), or only to `replica` (`redirect` true).
struct Replicate {
    original: u32,
    replica: u32,
    redirect: bool,
}

impl Interceptor for Replicate {
    const ROUTES_SENDS: bool = true;
    fn name(&self) -> &'static str {
        "test-replicate"
    }
    fn route_send(&mut self, send: &SendEnvelope, targets: &mut SendTargets) {
        if send.destination != self.original {
            return;
        }
        if self.redirect {
            targets.redirect(self.replica);
        } else {
            assert!(targets.add(self.replica));
        }
    }
}

fn replicating(redirect: bool) -> Vec<Engine<Replicate>> {
    mesh(3, |_| Replicate {
        original: 1,
        replica: 2,
        redirect,
    })
}

#[test]
fn fanned_out_send_reaches_every_target_and_completes_only_after_all_copies() {
    for (length, mode) in [
        (100usize, SendMode::Standard),
        (10_000, SendMode::Standard),
        (100, SendMode::Synchronous),
        (300, SendMode::Buffered),
    ] {
        let mut engines = replicating(false);
        let data = pattern_bytes(length, 7);
        let request = send(&mut engines[0], 1, 5, &data, mode);
        let mut at_original = vec![0u8; length];
        let original = receive(&mut engines[1], &mut at_original, Some(0), Some(5));
        run_until(&mut engines, |engines| is_complete(&engines[1], original));
        // The replica has not received yet: a rendezvous or synchronous
        // copy is still waiting for it, so the send must not be complete.
        if length > EAGER_LIMIT_BYTES || mode == SendMode::Synchronous {
            for _ in 0..20 {
                step(&mut engines);
            }
            assert!(
                !is_complete(&engines[0], request),
                "send of {length} bytes ({mode:?}) completed before its replica copy"
            );
        }
        let mut at_replica = vec![0u8; length];
        let replica = receive(&mut engines[2], &mut at_replica, Some(0), Some(5));
        run_until(&mut engines, |engines| {
            is_complete(&engines[2], replica) && is_complete(&engines[0], request)
        });
        assert_eq!(at_original, data, "{length} bytes {mode:?} at the original");
        assert_eq!(at_replica, data, "{length} bytes {mode:?} at the replica");
        let status = engines[0].state.requests.get(request).unwrap().status;
        assert_eq!(status.error, 0);
        // Only the application's request is left: every copy was freed.
        assert_eq!(engines[0].state.requests.live_indices(), vec![request]);
    }
}

#[test]
fn redirected_send_arrives_only_at_the_substitute() {
    let mut engines = replicating(true);
    let data = pattern_bytes(2_000, 3);
    let request = send(&mut engines[0], 1, 8, &data, SendMode::Standard);
    let mut at_substitute = vec![0u8; data.len()];
    let substitute = receive(&mut engines[2], &mut at_substitute, Some(0), Some(8));
    run_until(&mut engines, |engines| {
        is_complete(&engines[2], substitute) && is_complete(&engines[0], request)
    });
    assert_eq!(at_substitute, data);
    for _ in 0..10 {
        step(&mut engines);
    }
    assert_eq!(engines[1].state.matcher.unexpected_len(), 0);
}

#[test]
fn copy_to_a_dead_replica_does_not_hold_the_send_back() {
    let mut engines = replicating(false);
    let data = pattern_bytes(10_000, 1);
    let request = send(&mut engines[0], 1, 2, &data, SendMode::Standard);
    engines[0].handle_peer_failure(2);
    let mut at_original = vec![0u8; data.len()];
    let original = receive(&mut engines[1], &mut at_original, Some(0), Some(2));
    run_until(&mut engines[..2], |engines| {
        is_complete(&engines[1], original) && is_complete(&engines[0], request)
    });
    assert_eq!(at_original, data);
    assert_eq!(
        engines[0].state.requests.get(request).unwrap().status.error,
        0
    );
}

// ----- payloads ---------------------------------------------------------------

/// Message logging's sender side: keep every payload with its number.
#[derive(Default)]
struct PayloadLog {
    kept: Vec<(SentMessage, Vec<u8>)>,
}

impl Interceptor for PayloadLog {
    const WANTS_PAYLOADS: bool = true;
    fn name(&self) -> &'static str {
        "test-payload-log"
    }
    fn on_send_payload(&mut self, message: &SentMessage, payload: Payload<'_>) {
        self.kept.push((*message, payload.to_vec()));
    }
}

#[test]
fn every_payload_sent_is_kept_with_its_logical_number() {
    let mut engines = mesh(2, |_| PayloadLog::default());
    let small = pattern_bytes(64, 1);
    let large = pattern_bytes(9_000, 2);
    // Words 0 and 2 of every 16 bytes: a non-contiguous message.
    let word = Datatype::basic(TypeInfo::basic(4, BasicKind::I32), 4);
    let pair = Datatype::hvector(2, 1, 8, &word).unwrap();
    let strided = Arc::new(Datatype::resized(&pair, 0, 16).unwrap());
    let memory: Vec<u8> = (0..48).collect();
    let typed = UserBytes::Typed {
        base: memory.as_ptr() as *mut u8,
        datatype: strided,
        count: 3,
    };
    let packed: Vec<u8> = [0..4, 8..12, 16..20, 24..28, 32..36, 40..44]
        .into_iter()
        .flatten()
        .collect();

    let sends = [
        send(&mut engines[0], 1, 1, &small, SendMode::Standard),
        send(&mut engines[0], 1, 2, &large, SendMode::Standard),
        engines[0]
            .start_send(
                WORLD,
                Destination {
                    peer: 1,
                    context: CONTEXT,
                    tag: 3,
                },
                typed,
                packed.len(),
                SendMode::Standard,
            )
            .unwrap(),
    ];
    // MPI_Send's request-free path keeps payloads too.
    assert!(engines[0]
        .send_eager_without_request(
            Destination {
                peer: 1,
                context: CONTEXT,
                tag: 4
            },
            small.as_ptr(),
            small.len()
        )
        .unwrap());
    let mut buffers = [
        vec![0u8; 64],
        vec![0u8; 9_000],
        vec![0u8; 24],
        vec![0u8; 64],
    ];
    let receives: Vec<u32> = buffers
        .iter_mut()
        .zip(1..)
        .map(|(buffer, tag)| receive(&mut engines[1], buffer, Some(0), Some(tag)))
        .collect();
    run_until(&mut engines, |engines| {
        receives.iter().all(|&r| is_complete(&engines[1], r))
            && sends.iter().all(|&s| is_complete(&engines[0], s))
    });
    let kept = &engines[0].state.interceptor.kept;
    let expected = [&small, &large, &packed, &small];
    assert_eq!(kept.len(), 4);
    for (index, ((message, bytes), want)) in kept.iter().zip(expected).enumerate() {
        assert_eq!(message.destination, 1);
        assert_eq!(message.tag, index as i32 + 1);
        assert_eq!(message.logical_seq, index as u64 + 1);
        assert_eq!(bytes, want, "payload {index}");
        assert_eq!(&buffers[index], want, "delivered {index}");
    }
    assert!(engines[1].state.interceptor.kept.is_empty());
}

// ----- pinned and deferred wildcards ---------------------------------------------

/// Replay's shape: wildcard receives are pinned to `pin`, or deferred
/// until the test releases them with a source.
#[derive(Default)]
struct Replay {
    pin: Option<u32>,
    defer: bool,
    deferred: Vec<u64>,
    release: VecDeque<(u64, Option<u32>)>,
}

impl Interceptor for Replay {
    const PINS_WILDCARDS: bool = true;
    fn name(&self) -> &'static str {
        "test-replay"
    }
    fn on_wildcard_receive(&mut self, receive: u64, _pattern: &ReceivePattern) -> WildcardDecision {
        if self.defer {
            self.deferred.push(receive);
            return WildcardDecision::Defer;
        }
        self.pin
            .map_or(WildcardDecision::AnySource, WildcardDecision::Pin)
    }
    fn poll_released_receive(&mut self) -> Option<(u64, Option<u32>)> {
        self.release.pop_front()
    }
}

#[test]
fn pinned_wildcard_receive_takes_the_pinned_source_while_another_waits() {
    let mut engines = mesh(3, |_| Replay {
        pin: Some(2),
        ..Replay::default()
    });
    let from_one = pattern_bytes(16, 1);
    let from_two = pattern_bytes(16, 2);
    let sent_one = send(&mut engines[1], 0, 9, &from_one, SendMode::Standard);
    run_until(&mut engines, |engines| {
        is_complete(&engines[1], sent_one) && engines[0].state.matcher.unexpected_len() == 1
    });
    // Rank 1's message is already here, but the receive is pinned to 2.
    let mut buffer = [0u8; 16];
    let wildcard = receive(&mut engines[0], &mut buffer, None, None);
    for _ in 0..10 {
        step(&mut engines);
    }
    assert!(!is_complete(&engines[0], wildcard));
    let _sent_two = send(&mut engines[2], 0, 9, &from_two, SendMode::Standard);
    run_until(&mut engines, |engines| is_complete(&engines[0], wildcard));
    assert_eq!(buffer.to_vec(), from_two);
    let status = engines[0].state.requests.get(wildcard).unwrap().status;
    assert_eq!(status.source, 2);
    // The application's request still says ANY_SOURCE; rank 1's message waits.
    let request = engines[0].state.requests.get(wildcard).unwrap();
    let resmpi_core::request::Operation::Receive(posted) = &request.operation else {
        panic!("a receive");
    };
    assert_eq!(posted.pattern.source, None);
    assert_eq!(engines[0].state.matcher.unexpected_len(), 1);
}

#[test]
fn deferred_wildcard_receive_matches_nothing_until_released_then_the_named_source() {
    let mut engines = mesh(3, |_| Replay {
        defer: true,
        ..Replay::default()
    });
    let mut buffer = [0u8; 16];
    let wildcard = receive(&mut engines[0], &mut buffer, None, Some(4));
    let from_two = pattern_bytes(16, 2);
    let from_one = pattern_bytes(16, 1);
    send(&mut engines[2], 0, 4, &from_two, SendMode::Standard);
    send(&mut engines[1], 0, 4, &from_one, SendMode::Standard);
    run_until(&mut engines, |engines| {
        engines[0].state.matcher.unexpected_len() == 2
    });
    assert!(!is_complete(&engines[0], wildcard));
    let deferred = engines[0].state.interceptor.deferred.clone();
    assert_eq!(deferred.len(), 1);
    // The event logger says: this receive took rank 1's message.
    engines[0]
        .state
        .interceptor
        .release
        .push_back((deferred[0], Some(1)));
    run_until(&mut engines, |engines| is_complete(&engines[0], wildcard));
    assert_eq!(buffer.to_vec(), from_one);
    assert_eq!(engines[0].state.matcher.unexpected_len(), 1);
}

#[test]
fn deferred_wildcard_receive_can_be_cancelled() {
    let mut engines = mesh(2, |_| Replay {
        defer: true,
        ..Replay::default()
    });
    let mut buffer = [0u8; 4];
    let wildcard = receive(&mut engines[0], &mut buffer, None, None);
    engines[0].cancel(wildcard).unwrap();
    let request = engines[0].state.requests.get(wildcard).unwrap();
    assert!(request.complete && request.status.cancelled);
    // A late release of the cancelled receive posts nothing.
    let deferred = engines[0].state.interceptor.deferred[0];
    engines[0]
        .state
        .interceptor
        .release
        .push_back((deferred, None));
    send(&mut engines[1], 0, 1, &[1, 2, 3, 4], SendMode::Standard);
    for _ in 0..10 {
        step(&mut engines);
    }
    assert_eq!(engines[0].state.matcher.unexpected_len(), 1);
    assert_eq!(buffer, [0; 4]);
}

// ----- non-deterministic choices ---------------------------------------------------

/// A determinant log: every probe and completion choice.
#[derive(Default)]
struct Determinants {
    probes: Vec<ProbeOutcome>,
    choices: Vec<(CompletionCall, usize, Vec<usize>)>,
}

impl Interceptor for Determinants {
    const WANTS_NONDETERMINISM: bool = true;
    fn name(&self) -> &'static str {
        "test-determinants"
    }
    fn on_probe(&mut self, outcome: &ProbeOutcome) {
        self.probes.push(*outcome);
    }
    fn on_completion_choice(&mut self, choice: &CompletionChoice<'_>) {
        self.choices
            .push((choice.call, choice.offered, choice.completed.to_vec()));
    }
}

#[test]
fn probe_outcomes_reach_the_protocol_misses_of_nonblocking_probes_included() {
    let mut engines = mesh(2, |_| Determinants::default());
    let any = ReceivePattern {
        context: CONTEXT,
        source: None,
        tag: None,
    };
    // Iprobe and a blocking probe's round, both before anything arrived.
    assert_eq!(
        engines[0].probe(WORLD, any, false, false).unwrap(),
        ProbeLook::Missed
    );
    assert_eq!(
        engines[0].probe(WORLD, any, false, true).unwrap(),
        ProbeLook::Missed
    );
    send(&mut engines[1], 0, 6, &[9; 40], SendMode::Standard);
    run_until(&mut engines, |engines| {
        engines[0].state.matcher.unexpected_len() == 1
    });
    let ProbeLook::Found(found) = engines[0].probe(WORLD, any, false, true).unwrap() else {
        panic!("the message is there");
    };
    assert_eq!((found.envelope.source, found.length_bytes), (1, 40));
    let ProbeLook::Found(taken) = engines[0].probe(WORLD, any, true, false).unwrap() else {
        panic!("the message is still there");
    };
    assert!(taken.message.is_some());
    assert_eq!(engines[0].state.matcher.unexpected_len(), 0);
    let seen = &engines[0].state.interceptor.probes;
    let envelope = Envelope {
        source: 1,
        context: CONTEXT,
        tag: 6,
    };
    let outcomes: Vec<(Option<Envelope>, usize, bool, bool)> = seen
        .iter()
        .map(|outcome| {
            (
                outcome.found,
                outcome.length_bytes,
                outcome.removed,
                outcome.blocking,
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (None, 0, false, false),
            (Some(envelope), 40, false, true),
            (Some(envelope), 40, true, false),
        ]
    );
}

/// A replay script: the outcome of each non-deterministic call in turn
/// (what `MessageLog` answers in a restarted incarnation), and what the
/// engine then reported.
#[derive(Default)]
struct Script {
    answers: VecDeque<ReplayedChoice>,
    probes: Vec<ProbeOutcome>,
    flags: Vec<(CompletionCall, Vec<usize>)>,
}

impl Script {
    fn next(&self) -> ReplayedChoice {
        self.answers
            .front()
            .cloned()
            .unwrap_or(ReplayedChoice::Free)
    }
}

impl Interceptor for Script {
    const WANTS_NONDETERMINISM: bool = true;
    fn name(&self) -> &'static str {
        "test-script"
    }
    fn replayed_probe(&self, _pattern: &ReceivePattern, _blocking: bool) -> ReplayedChoice {
        self.next()
    }
    fn replayed_completion_choice(&self, _call: CompletionCall, _offered: usize) -> ReplayedChoice {
        self.next()
    }
    fn on_probe(&mut self, outcome: &ProbeOutcome) {
        self.answers.pop_front();
        self.probes.push(*outcome);
    }
    fn on_completion_choice(&mut self, choice: &CompletionChoice<'_>) {
        self.answers.pop_front();
        self.flags.push((choice.call, choice.completed.to_vec()));
    }
}

#[test]
fn a_replayed_probe_reports_the_logged_outcome_whatever_is_there() {
    let mut engines = mesh(3, |_| Script::default());
    let any = ReceivePattern {
        context: CONTEXT,
        source: None,
        tag: None,
    };
    send(&mut engines[1], 0, 4, &[1; 16], SendMode::Standard);
    run_until(&mut engines, |engines| {
        engines[0].state.matcher.unexpected_len() == 1
    });
    engines[0].state.interceptor.answers = VecDeque::from([
        // A miss, though a message is there.
        ReplayedChoice::Logged(vec![]),
        // Not in yet: look again later.
        ReplayedChoice::NotYetKnown,
    ]);
    assert_eq!(
        engines[0].probe(WORLD, any, false, false).unwrap(),
        ProbeLook::Missed
    );
    assert_eq!(
        engines[0].probe(WORLD, any, false, false).unwrap(),
        ProbeLook::Retry
    );
    // A find of rank 2's message while only rank 1's is there: wait for
    // it, then take that very one, though rank 1's came first.
    engines[0].state.interceptor.answers = VecDeque::from([ReplayedChoice::Probed {
        source: 2,
        tag: 9,
        length_bytes: 24,
    }]);
    assert_eq!(
        engines[0].probe(WORLD, any, true, false).unwrap(),
        ProbeLook::Retry
    );
    send(&mut engines[2], 0, 9, &[2; 24], SendMode::Standard);
    run_until(&mut engines, |engines| {
        engines[0].state.matcher.unexpected_len() == 2
    });
    let ProbeLook::Found(found) = engines[0].probe(WORLD, any, true, false).unwrap() else {
        panic!("the logged message is there");
    };
    assert_eq!(
        (
            found.envelope.source,
            found.envelope.tag,
            found.length_bytes
        ),
        (2, 9, 24)
    );
    assert!(found.message.is_some());
    assert_eq!(engines[0].state.matcher.unexpected_len(), 1);
    let outcomes: Vec<Option<u32>> = engines[0]
        .state
        .interceptor
        .probes
        .iter()
        .map(|outcome| outcome.found.map(|envelope| envelope.source))
        .collect();
    assert_eq!(outcomes, vec![None, Some(2)]);
    // What the probe cannot give is a divergence: another length, a
    // source its pattern does not admit, a miss for a blocking probe,
    // a completion call's positions.
    let from_one = ReceivePattern {
        source: Some(1),
        ..any
    };
    for (answer, pattern, blocking) in [
        (
            ReplayedChoice::Probed {
                source: 1,
                tag: 4,
                length_bytes: 15,
            },
            any,
            false,
        ),
        (
            ReplayedChoice::Probed {
                source: 2,
                tag: 4,
                length_bytes: 16,
            },
            from_one,
            false,
        ),
        (ReplayedChoice::Logged(vec![]), any, true),
        (ReplayedChoice::Logged(vec![0]), any, false),
    ] {
        engines[0].state.interceptor.answers = VecDeque::from([answer.clone()]);
        let error = engines[0]
            .probe(WORLD, pattern, false, blocking)
            .expect_err("a divergence");
        assert!(
            error.message.contains("replay diverged"),
            "{answer:?}: {error:?}"
        );
    }
}

#[test]
fn a_replayed_flag_is_the_logged_one_whatever_the_requests_state() {
    let mut engines = mesh(2, |_| Script::default());
    let mut buffer = [0u8; 8];
    let index = receive(&mut engines[0], &mut buffer, Some(1), Some(3));
    let done = move |engine: &Engine<Script>| is_complete(engine, index);
    // Logged "complete" while it is not: not yet.
    engines[0].state.interceptor.answers = VecDeque::from([ReplayedChoice::Logged(vec![0])]);
    assert_eq!(
        engines[0]
            .test_flag_once(CompletionCall::Testall, 1, done)
            .unwrap(),
        None
    );
    send(&mut engines[1], 0, 3, &[7; 8], SendMode::Standard);
    run_until(&mut engines, |engines| is_complete(&engines[0], index));
    assert_eq!(
        engines[0]
            .test_flag_once(CompletionCall::Testall, 1, done)
            .unwrap(),
        Some(true)
    );
    // Logged "not complete" while it is: false.
    engines[0].state.interceptor.answers = VecDeque::from([ReplayedChoice::Logged(vec![])]);
    assert!(!engines[0]
        .test_flag(CompletionCall::RequestGetStatus, 1, done)
        .unwrap());
    // Free: the requests' state.
    assert!(engines[0].test_flag(CompletionCall::Test, 1, done).unwrap());
    assert_eq!(
        engines[0].state.interceptor.flags,
        vec![
            (CompletionCall::Testall, vec![0]),
            (CompletionCall::RequestGetStatus, vec![]),
            (CompletionCall::Test, vec![0]),
        ]
    );
    // A probe's find at a flag's ordinal: a divergence.
    engines[0].state.interceptor.answers = VecDeque::from([ReplayedChoice::Probed {
        source: 1,
        tag: 3,
        length_bytes: 8,
    }]);
    assert!(engines[0]
        .test_flag_once(CompletionCall::Test, 1, done)
        .is_err());
}

#[test]
fn completion_choices_reach_the_protocol_as_reported() {
    let mut engine = mesh(1, |_| Determinants::default()).remove(0);
    engine.report_completion_choice(CompletionCall::Testany, 3, &[]);
    engine.report_completion_choice(CompletionCall::Waitsome, 4, &[0, 3]);
    engine.report_completion_choice(CompletionCall::Test, 1, &[0]);
    assert_eq!(
        engine.state.interceptor.choices,
        vec![
            (CompletionCall::Testany, 3, vec![]),
            (CompletionCall::Waitsome, 4, vec![0, 3]),
            (CompletionCall::Test, 1, vec![0]),
        ]
    );
}

#[test]
fn event_counter_still_counts_matches_and_now_choices() {
    let mut engine = mesh(1, |_| resmpi_ft::EventCounter::default()).remove(0);
    let data = [5u8; 8];
    let sent = send(&mut engine, 0, 1, &data, SendMode::Standard);
    let mut buffer = [0u8; 8];
    let received = receive(&mut engine, &mut buffer, None, None);
    engine.wait_request(received).unwrap();
    engine.wait_request(sent).unwrap();
    engine.report_completion_choice(CompletionCall::Waitany, 2, &[1]);
    let any = ReceivePattern {
        context: CONTEXT,
        source: None,
        tag: None,
    };
    assert_eq!(
        engine.probe(WORLD, any, false, false).unwrap(),
        ProbeLook::Missed
    );
    let counter = &engine.state.interceptor;
    assert_eq!(
        (
            counter.matches,
            counter.receives_completed,
            counter.sends_completed,
            counter.completion_choices,
            counter.probes
        ),
        (1, 1, 1, 1, 1)
    );
}

// ----- protocol frames ---------------------------------------------------------------

/// Answers every protocol frame with the same bytes reversed.
#[derive(Default)]
struct Echo {
    received: Vec<(u32, Vec<u8>)>,
    to_send: VecDeque<(u32, Vec<u8>)>,
}

impl Interceptor for Echo {
    const SENDS_PROTOCOL_FRAMES: bool = true;
    fn name(&self) -> &'static str {
        "test-echo"
    }
    fn on_protocol_frame(&mut self, peer: u32, bytes: &[u8]) {
        self.received.push((peer, bytes.to_vec()));
        if bytes.first() == Some(&b'?') {
            let mut answer = bytes.to_vec();
            answer.reverse();
            self.to_send.push_back((peer, answer));
        }
    }
    fn poll_protocol_frame(&mut self) -> Option<(u32, Vec<u8>)> {
        self.to_send.pop_front()
    }
}

#[test]
fn protocol_frames_travel_between_engines_and_never_reach_matching() {
    let mut engines = mesh(2, |_| Echo::default());
    engines[0].send_protocol_frame(1, b"?ping").unwrap();
    run_until(&mut engines, |engines| {
        !engines[0].state.interceptor.received.is_empty()
    });
    assert_eq!(
        engines[1].state.interceptor.received,
        vec![(0, b"?ping".to_vec())]
    );
    assert_eq!(
        engines[0].state.interceptor.received,
        vec![(1, b"gnip?".to_vec())]
    );
    assert_eq!(engines[1].state.matcher.unexpected_len(), 0);
    // Out of range, too large, or to a dead peer: refused.
    assert!(engines[0].send_protocol_frame(2, b"x").is_err());
    let too_large = vec![0u8; MAX_PAYLOAD_BYTES + 1];
    assert!(engines[0].send_protocol_frame(1, &too_large).is_err());
    engines[0].handle_peer_failure(1);
    assert!(engines[0].send_protocol_frame(1, b"x").is_err());
}

#[test]
fn a_protocol_frame_for_pass_through_is_ignored() {
    let mut engines = mesh(2, |_| PassThrough);
    engines[0].send_protocol_frame(1, b"stray").unwrap();
    for _ in 0..5 {
        step(&mut engines);
    }
    assert_eq!(engines[1].state.matcher.unexpected_len(), 0);
}

// ----- timers --------------------------------------------------------------------------

static VIRTUAL_NOW_NS: AtomicU64 = AtomicU64::new(0);

fn virtual_now_ns() -> u64 {
    VIRTUAL_NOW_NS.load(Ordering::SeqCst)
}

fn clock_must_not_be_read() -> u64 {
    panic!("the engine read the clock for a protocol without timers")
}

/// A heartbeat: fires at `due_ns`, then every `period_ns`, `rounds` times.
struct Heartbeat {
    due_ns: Option<u64>,
    period_ns: u64,
    rounds: u32,
    fired_at_ns: Vec<u64>,
}

impl Interceptor for Heartbeat {
    const USES_TIMERS: bool = true;
    fn name(&self) -> &'static str {
        "test-heartbeat"
    }
    fn poll_timeout(&self) -> Option<u64> {
        self.due_ns
    }
    fn handle_timeout(&mut self, now_ns: u64) {
        self.fired_at_ns.push(now_ns);
        self.rounds -= 1;
        self.due_ns = (self.rounds > 0).then(|| now_ns + self.period_ns);
    }
}

#[test]
fn protocol_timer_fires_when_due_on_progress_and_only_then() {
    let mut engine = mesh(1, |_| Heartbeat {
        due_ns: Some(1_000),
        period_ns: 500,
        rounds: 2,
        fired_at_ns: Vec::new(),
    })
    .remove(0);
    engine.timer_clock = virtual_now_ns;
    VIRTUAL_NOW_NS.store(999, Ordering::SeqCst);
    engine.progress().unwrap();
    assert!(engine.state.interceptor.fired_at_ns.is_empty());
    VIRTUAL_NOW_NS.store(1_200, Ordering::SeqCst);
    assert!(engine.progress().unwrap(), "a fired timer is progress");
    engine.progress().unwrap();
    assert_eq!(engine.state.interceptor.fired_at_ns, vec![1_200]);
    VIRTUAL_NOW_NS.store(5_000, Ordering::SeqCst);
    engine.progress().unwrap();
    engine.progress().unwrap();
    assert_eq!(engine.state.interceptor.fired_at_ns, vec![1_200, 5_000]);
    assert_eq!(engine.state.interceptor.due_ns, None);
}

#[test]
fn progress_never_reads_the_clock_for_a_protocol_without_timers() {
    let mut engines = mesh(2, |_| PassThrough);
    for engine in engines.iter_mut() {
        engine.timer_clock = clock_must_not_be_read;
    }
    let data = pattern_bytes(5_000, 4);
    let sent = send(&mut engines[0], 1, 1, &data, SendMode::Standard);
    let mut buffer = vec![0u8; data.len()];
    let received = receive(&mut engines[1], &mut buffer, Some(0), Some(1));
    run_until(&mut engines, |engines| {
        is_complete(&engines[0], sent) && is_complete(&engines[1], received)
    });
    assert_eq!(buffer, data);
}
