//! Three ranks' protocols and the event logger's wired together by hand:
//! determinants reach the logger and are acked (once synced) before sends
//! may start, a restarted rank gets its determinants back and pins its
//! wildcards to them, and a restarted logger that read its file back is
//! sent what it had not acked.

use super::*;
use crate::event_logger::{append_record, EventLogger};
use crate::frames::Dependency;
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

/// The logger's connection id for a rank's incarnation.
fn connection(rank: &MessageLog) -> u64 {
    (u64::from(rank.incarnation) << 32) | u64::from(rank.rank)
}

/// A logger, and every rank connected to it.
fn connect_all(ranks: &mut [MessageLog]) -> EventLogger {
    for rank in ranks.iter_mut() {
        rank.handle_logger_connected();
    }
    let mut logger = EventLogger::new();
    exchange(ranks, &mut logger);
    logger
}

/// Deliver every queued frame (between ranks, and to and from the logger,
/// each batch synced at once) until none is left; what was written is
/// appended to `file` when one is given.
fn exchange_logging(
    ranks: &mut [MessageLog],
    logger: &mut EventLogger,
    mut file: Option<&mut Vec<u8>>,
) {
    loop {
        let mut moved = false;
        for from in 0..ranks.len() {
            while let Some((to, bytes)) = ranks[from].poll_protocol_frame() {
                ranks[to as usize].on_protocol_frame(from as u32, &bytes);
                moved = true;
            }
            let from_connection = connection(&ranks[from]);
            while let Some(bytes) = ranks[from].poll_logger_frame() {
                logger.handle_frame(from_connection, &bytes);
                moved = true;
            }
        }
        while let Some(batch) = logger.poll_write() {
            if let Some(file) = file.as_deref_mut() {
                file.extend_from_slice(&batch);
            }
            logger.handle_durable();
        }
        while let Some((to, bytes)) = logger.poll_frame() {
            if let Some(rank) = ranks.iter_mut().find(|rank| connection(rank) == to) {
                rank.handle_logger_frame(&bytes);
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

fn exchange(ranks: &mut [MessageLog], logger: &mut EventLogger) {
    exchange_logging(ranks, logger, None);
}

/// Incarnation `incarnation` of `rank` replaces the dead one and connects.
fn restart(ranks: &mut [MessageLog], rank: u32, incarnation: u32) {
    let size = ranks.len() as u32;
    ranks[rank as usize] = MessageLog::new(rank, size, incarnation, 1 << 20);
    ranks[rank as usize].handle_logger_connected();
}

#[test]
fn a_wildcard_match_holds_sends_until_the_logger_acknowledges_it() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    assert_eq!(
        ranks[0].on_wildcard_receive(10, &any_source()),
        WildcardDecision::AnySource
    );
    assert!(ranks[0].send_may_start());
    ranks[0].on_match(&matched(10, 2));
    assert!(!ranks[0].send_may_start());
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].send_may_start());
    assert_eq!(
        logger.entries(0),
        vec![Entry::Wildcard(Determinant {
            ordinal: 0,
            source: 2
        })]
    );
}

#[test]
fn a_restarted_rank_defers_wildcards_until_its_replay_then_pins_them() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    for (receive, source) in [(1, 2), (2, 1), (3, 2)] {
        ranks[0].on_wildcard_receive(receive, &any_source());
        ranks[0].on_match(&matched(receive, source));
        exchange(&mut ranks, &mut logger);
    }
    // Rank 0 dies and starts again.
    assert_eq!(ranks[1].on_peer_failure(0), PeerFailureAction::Handled);
    assert_eq!(ranks[2].on_peer_failure(0), PeerFailureAction::Handled);
    restart(&mut ranks, 0, 1);
    assert_eq!(
        ranks[0].on_wildcard_receive(7, &any_source()),
        WildcardDecision::Defer
    );
    ranks[1].on_peer_rejoin(0, 1);
    ranks[2].on_peer_rejoin(0, 1);
    exchange(&mut ranks, &mut logger);
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
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].send_may_start());
    assert_eq!(logger.entries(0).len(), 4);
    assert_eq!(
        logger.entries(0)[3],
        Entry::Wildcard(Determinant {
            ordinal: 3,
            source: 1
        })
    );
}

#[test]
fn a_restarted_logger_reads_its_file_back_and_is_sent_what_it_had_not_acked() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    let mut file = Vec::new();
    ranks[0].on_wildcard_receive(1, &any_source());
    ranks[0].on_match(&matched(1, 2));
    exchange_logging(&mut ranks, &mut logger, Some(&mut file));
    assert!(ranks[0].send_may_start());
    // The logger dies: a determinant made meanwhile waits for it.
    for rank in ranks.iter_mut() {
        rank.handle_logger_lost();
    }
    ranks[0].on_wildcard_receive(2, &any_source());
    ranks[0].on_match(&matched(2, 2));
    assert!(ranks[0].poll_logger_frame().is_none());
    assert!(!ranks[0].send_may_start());
    // Its replacement reads the file back; the ranks connect again.
    let (mut logger, length) = EventLogger::recover(&file).unwrap();
    assert_eq!(length, file.len());
    assert_eq!(logger.entries(0).len(), 1);
    for rank in ranks.iter_mut() {
        rank.handle_logger_connected();
    }
    exchange_logging(&mut ranks, &mut logger, Some(&mut file));
    assert!(ranks[0].send_may_start());
    assert_eq!(logger.entries(0).len(), 2);
    assert_eq!(logger.counters.protocol_errors, 0);
    assert_eq!(
        EventLogger::recover(&file).unwrap().0.entries(0),
        logger.entries(0)
    );
}

#[test]
fn two_ranks_restarted_together_each_get_their_own_determinants() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    for (receive, source) in [(1, 2), (2, 0)] {
        ranks[1].on_wildcard_receive(receive, &any_source());
        ranks[1].on_match(&matched(receive, source));
        ranks[2].on_wildcard_receive(receive, &any_source());
        ranks[2].on_match(&matched(receive, 1 - source.min(1)));
    }
    exchange(&mut ranks, &mut logger);
    // Ranks 1 and 2 (each the other's neighbour) die at once.
    ranks[0].on_peer_failure(1);
    ranks[0].on_peer_failure(2);
    restart(&mut ranks, 1, 1);
    restart(&mut ranks, 2, 1);
    ranks[0].on_peer_rejoin(1, 1);
    ranks[0].on_peer_rejoin(2, 1);
    exchange(&mut ranks, &mut logger);
    for (rank, sources) in [(1, [2, 0]), (2, [0, 1])] {
        let replayed = &mut ranks[rank];
        assert!(replayed.replay_complete());
        for (receive, source) in [10, 11].into_iter().zip(sources) {
            assert_eq!(
                replayed.on_wildcard_receive(receive, &any_source()),
                WildcardDecision::Pin(source),
                "rank {rank}"
            );
        }
    }
}

fn choose(rank: &mut MessageLog, call: CompletionCall, offered: usize, completed: &[usize]) {
    rank.on_completion_choice(&CompletionChoice {
        call,
        offered,
        completed,
    });
}

#[test]
fn completion_choices_are_logged_failed_tests_lazily_and_replayed_exactly() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    // A Waitany over one request cannot choose: not counted, not logged.
    choose(&mut ranks[0], CompletionCall::Waitany, 1, &[0]);
    assert!(ranks[0].send_may_start());
    // Ordinal 0: Waitany chose position 2; held back sends until acked.
    choose(&mut ranks[0], CompletionCall::Waitany, 3, &[2]);
    assert!(!ranks[0].send_may_start());
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].send_may_start());
    // Ordinals 1..=500: a polling loop of failed tests. Nothing is sent
    // and sends are not held: the run is kept here.
    for _ in 0..500 {
        choose(&mut ranks[0], CompletionCall::Testsome, 3, &[]);
        assert!(ranks[0].poll_logger_frame().is_none());
    }
    assert!(ranks[0].send_may_start());
    assert_eq!(logger.entries(0).len(), 1);
    // A send is about to start: the run becomes one determinant.
    ranks[0].before_send();
    assert!(!ranks[0].send_may_start());
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].send_may_start());
    // Ordinals 501..=502 failed, 503 is MPI_Test's success: the run goes
    // first, in order, then the success.
    choose(&mut ranks[0], CompletionCall::Test, 1, &[]);
    choose(&mut ranks[0], CompletionCall::Testany, 2, &[]);
    choose(&mut ranks[0], CompletionCall::Test, 1, &[0]);
    // Ordinal 504: Waitsome's subset, in the order reported.
    choose(&mut ranks[0], CompletionCall::Waitsome, 4, &[3, 1]);
    // A tail of failed tests that no send depends on: never logged.
    choose(&mut ranks[0], CompletionCall::Testany, 2, &[]);
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].send_may_start());
    let choice = |ordinal, repeat, completed: &[u32]| {
        Entry::Choice(Choice {
            ordinal,
            repeat,
            completed: completed.to_vec(),
        })
    };
    assert_eq!(
        logger.entries(0),
        vec![
            choice(0, 1, &[2]),
            choice(1, 500, &[]),
            choice(501, 2, &[]),
            choice(503, 1, &[0]),
            choice(504, 1, &[3, 1]),
        ]
    );
    assert_eq!(ranks[0].choices_logged, 5);

    // Rank 0 restarts: until its replay is in, a choice is not yet known.
    ranks[1].on_peer_failure(0);
    ranks[2].on_peer_failure(0);
    restart(&mut ranks, 0, 1);
    assert_eq!(
        ranks[0].replayed_completion_choice(CompletionCall::Waitany, 3),
        ReplayedChoice::NotYetKnown
    );
    // One that cannot choose is free even then.
    assert_eq!(
        ranks[0].replayed_completion_choice(CompletionCall::Waitany, 1),
        ReplayedChoice::Free
    );
    ranks[1].on_peer_rejoin(0, 1);
    ranks[2].on_peer_rejoin(0, 1);
    exchange(&mut ranks, &mut logger);
    let mut replayed = Vec::new();
    let calls = std::iter::once((CompletionCall::Waitany, 3))
        .chain(std::iter::repeat_n((CompletionCall::Testsome, 3), 500))
        .chain([
            (CompletionCall::Test, 1),
            (CompletionCall::Testany, 2),
            (CompletionCall::Test, 1),
            (CompletionCall::Waitsome, 4),
            (CompletionCall::Testany, 2),
        ]);
    for (call, offered) in calls {
        let answer = ranks[0].replayed_completion_choice(call, offered);
        let positions = match &answer {
            ReplayedChoice::Logged(positions) => positions.clone(),
            _ => vec![9],
        };
        replayed.push(answer);
        choose(&mut ranks[0], call, offered, &positions);
    }
    assert_eq!(replayed[0], ReplayedChoice::Logged(vec![2]));
    assert!(replayed[1..503]
        .iter()
        .all(|answer| *answer == ReplayedChoice::Logged(vec![])));
    assert_eq!(replayed[503], ReplayedChoice::Logged(vec![0]));
    assert_eq!(replayed[504], ReplayedChoice::Logged(vec![3, 1]));
    // Past the log (the unlogged tail): free, and logged anew.
    assert_eq!(replayed[505], ReplayedChoice::Free);
    assert_eq!(ranks[0].determinant_count(), 6);
    // Replayed choices were not sent again; the new one was.
    exchange(&mut ranks, &mut logger);
    assert_eq!(logger.entries(0).len(), 6);
    assert_eq!(logger.entries(0)[5], choice(505, 1, &[9]));
}

#[test]
fn wildcards_and_choices_share_the_list_in_order() {
    let mut ranks: Vec<MessageLog> = (0..2)
        .map(|rank| MessageLog::new(rank, 2, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    choose(&mut ranks[0], CompletionCall::Test, 1, &[]);
    ranks[0].on_wildcard_receive(5, &any_source());
    // The match flushes the failed test before it.
    ranks[0].on_match(&matched(5, 1));
    exchange(&mut ranks, &mut logger);
    assert_eq!(
        logger.entries(0),
        vec![
            Entry::Choice(Choice {
                ordinal: 0,
                repeat: 1,
                completed: vec![]
            }),
            Entry::Wildcard(Determinant {
                ordinal: 0,
                source: 1
            }),
        ]
    );
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
    assert_eq!(rank.replay_message(1, 1), Ok((4, 9, b"abc".to_vec())));
    assert_eq!(rank.on_peer_failure(1), PeerFailureAction::Handled);
    rank.on_send_payload(&message(2), Payload::Contiguous(&[0; 300]));
    assert!(!rank.log_complete());
    assert_eq!(rank.on_peer_failure(1), PeerFailureAction::AbortJob);
}

fn probed(
    rank: &mut MessageLog,
    source: Option<u32>,
    blocking: bool,
    found: Option<(u32, i32, usize)>,
) {
    rank.on_probe(&ProbeOutcome {
        pattern: ReceivePattern {
            source,
            context: 0,
            tag: None,
        },
        found: found.map(|(source, tag, _)| Envelope {
            source,
            context: 0,
            tag,
        }),
        length_bytes: found.map_or(0, |(_, _, length)| length),
        removed: false,
        blocking,
    });
}

#[test]
fn probe_outcomes_share_the_count_and_the_lazy_runs_of_tests_and_replay_exactly() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    let wildcard = ReceivePattern {
        source: None,
        context: 0,
        tag: None,
    };
    let from_two = ReceivePattern {
        source: Some(2),
        ..wildcard
    };
    // A blocking probe of one source cannot choose: not counted.
    probed(&mut ranks[0], Some(2), true, Some((2, 5, 8)));
    assert_eq!(
        ranks[0].replayed_probe(&from_two, true),
        ReplayedChoice::Free
    );
    // Ordinals 0..=2: failed Iprobes and a failed test, one lazy run.
    probed(&mut ranks[0], None, false, None);
    choose(&mut ranks[0], CompletionCall::Testall, 4, &[]);
    probed(&mut ranks[0], Some(2), false, None);
    assert!(ranks[0].send_may_start());
    assert!(ranks[0].poll_logger_frame().is_none());
    // Ordinal 3: an Iprobe found a message: the run, then the find, and
    // sends wait for them.
    probed(&mut ranks[0], None, false, Some((1, 7, 24)));
    assert!(!ranks[0].send_may_start());
    // Ordinal 4: an ANY_SOURCE Probe found one; 5: Request_get_status true.
    probed(&mut ranks[0], None, true, Some((2, 0, 1 << 20)));
    choose(&mut ranks[0], CompletionCall::RequestGetStatus, 1, &[0]);
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].send_may_start());
    let probe = |ordinal, source, tag, length_bytes| {
        Entry::Probe(Probed {
            ordinal,
            source,
            tag,
            length_bytes,
        })
    };
    assert_eq!(
        logger.entries(0),
        vec![
            Entry::Choice(Choice {
                ordinal: 0,
                repeat: 3,
                completed: vec![]
            }),
            probe(3, 1, 7, 24),
            probe(4, 2, 0, 1 << 20),
            Entry::Choice(Choice {
                ordinal: 5,
                repeat: 1,
                completed: vec![0]
            }),
        ]
    );

    // Rank 0 restarts: probes wait for the replay, then get the log.
    ranks[1].on_peer_failure(0);
    ranks[2].on_peer_failure(0);
    restart(&mut ranks, 0, 1);
    assert_eq!(
        ranks[0].replayed_probe(&wildcard, false),
        ReplayedChoice::NotYetKnown
    );
    assert_eq!(
        ranks[0].replayed_probe(&from_two, true),
        ReplayedChoice::Free
    );
    ranks[1].on_peer_rejoin(0, 1);
    ranks[2].on_peer_rejoin(0, 1);
    exchange(&mut ranks, &mut logger);
    probed(&mut ranks[0], Some(2), true, Some((2, 5, 8)));
    let mut answers = Vec::new();
    answers.push(ranks[0].replayed_probe(&wildcard, false));
    probed(&mut ranks[0], None, false, None);
    answers.push(ranks[0].replayed_completion_choice(CompletionCall::Testall, 4));
    choose(&mut ranks[0], CompletionCall::Testall, 4, &[]);
    answers.push(ranks[0].replayed_probe(&from_two, false));
    probed(&mut ranks[0], Some(2), false, None);
    answers.push(ranks[0].replayed_probe(&wildcard, false));
    probed(&mut ranks[0], None, false, Some((1, 7, 24)));
    answers.push(ranks[0].replayed_probe(&wildcard, true));
    probed(&mut ranks[0], None, true, Some((2, 0, 1 << 20)));
    answers.push(ranks[0].replayed_completion_choice(CompletionCall::RequestGetStatus, 1));
    choose(&mut ranks[0], CompletionCall::RequestGetStatus, 1, &[0]);
    answers.push(ranks[0].replayed_probe(&wildcard, false));
    let found = |source, tag, length_bytes| ReplayedChoice::Probed {
        source,
        tag,
        length_bytes,
    };
    assert_eq!(
        answers,
        vec![
            ReplayedChoice::Logged(vec![]),
            ReplayedChoice::Logged(vec![]),
            ReplayedChoice::Logged(vec![]),
            found(1, 7, 24),
            found(2, 0, 1 << 20),
            ReplayedChoice::Logged(vec![0]),
            // Past the log: free.
            ReplayedChoice::Free,
        ]
    );
    // Replayed outcomes were not logged again.
    assert!(ranks[0].send_may_start());
    assert_eq!(ranks[0].choices_logged, 0);
}

#[test]
fn a_logger_that_lost_its_file_is_sent_the_whole_list_again_and_sends_wait_for_it() {
    let mut ranks: Vec<MessageLog> = (0..2)
        .map(|rank| MessageLog::new(rank, 2, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    for receive in 1..=3 {
        ranks[0].on_wildcard_receive(receive, &any_source());
        ranks[0].on_match(&matched(receive, 1));
    }
    exchange(&mut ranks, &mut logger);
    assert_eq!(ranks[0].determinants_acknowledged(), 3);
    // A logger with nothing (its file gone): what it says on the hello
    // is what counts, and rank 0 sends all three again.
    let mut empty = EventLogger::new();
    for rank in ranks.iter_mut() {
        rank.handle_logger_lost();
        rank.handle_logger_connected();
    }
    let from = connection(&ranks[0]);
    while let Some(bytes) = ranks[0].poll_logger_frame() {
        empty.handle_frame(from, &bytes);
    }
    while let Some((_, bytes)) = empty.poll_frame() {
        ranks[0].handle_logger_frame(&bytes);
    }
    assert_eq!(ranks[0].determinants_acknowledged(), 0);
    assert!(!ranks[0].send_may_start());
    exchange(&mut ranks, &mut empty);
    assert!(ranks[0].send_may_start());
    assert_eq!(empty.entries(0), logger.entries(0));
}

fn optimistic_ranks(size: u32) -> Vec<MessageLog> {
    (0..size)
        .map(|rank| MessageLog::new(rank, size, 0, 1 << 20).optimistic())
        .collect()
}

/// Rank `rank` posts wildcard receive `receive` and it matches `source`.
fn wildcard_match(rank: &mut MessageLog, receive: u64, source: u32) {
    rank.on_wildcard_receive(receive, &any_source());
    rank.on_match(&matched(receive, source));
}

/// Hand the piggyback of a message from `from` to `to` over, as the engine
/// does just before the message; whether there was one.
fn send_message(ranks: &mut [MessageLog], from: u32, to: u32) -> bool {
    match ranks[from as usize].piggyback(to) {
        Some(bytes) => {
            ranks[to as usize].on_protocol_frame(from, &bytes);
            true
        }
        None => false,
    }
}

#[test]
fn optimistic_sends_never_wait_and_piggyback_only_unstable_changed_entries() {
    let mut ranks = optimistic_ranks(3);
    let mut logger = connect_all(&mut ranks);
    // Nothing to depend on: no piggyback at all.
    assert!(!send_message(&mut ranks, 0, 1));
    wildcard_match(&mut ranks[0], 1, 2);
    // Unacked, and the send may start anyway (pessimistic would hold it).
    assert!(ranks[0].send_may_start());
    assert!(send_message(&mut ranks, 0, 1));
    assert_eq!(ranks[1].dependencies().dependency(0), 1);
    // Unchanged since the last message to rank 1: nothing again.
    assert!(!send_message(&mut ranks, 0, 1));
    // Rank 1 passes the dependency on to rank 2 (transitively).
    assert!(send_message(&mut ranks, 1, 2));
    assert_eq!(ranks[2].dependencies().dependency(0), 1);
    // Not back to its own maker.
    assert!(!send_message(&mut ranks, 2, 0));
    // The ack carries the stable vector; rank 0 drops its own entry.
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].dependencies().is_stable_on(0));
    assert!(!send_message(&mut ranks, 0, 2));
    assert_eq!(ranks[0].dependencies().piggybacked_frames, 1);
}

#[test]
fn a_rank_that_depended_only_on_stable_determinants_survives_the_death() {
    let mut ranks = optimistic_ranks(3);
    let mut logger = connect_all(&mut ranks);
    wildcard_match(&mut ranks[0], 1, 2);
    assert!(send_message(&mut ranks, 0, 1));
    exchange(&mut ranks, &mut logger);
    // Rank 1 made no determinant, so no ack told it rank 0's is stable.
    assert!(!ranks[1].dependencies().is_stable_on(0));
    assert_eq!(ranks[1].on_peer_failure(0), PeerFailureAction::Handled);
    // It asks the logger, which answers once rank 0's list has ended
    // (its connection closed): it has the determinant on disk.
    exchange(&mut ranks, &mut logger);
    assert!(!ranks[1].dependencies().is_stable_on(0));
    logger.handle_closed(connection(&ranks[0]));
    exchange(&mut ranks, &mut logger);
    assert!(ranks[1].dependencies().is_stable_on(0));
    assert!(!ranks[1].is_orphan());
    assert_eq!(ranks[1].take_fatal_error(), None);
}

#[test]
fn a_rank_that_depended_on_a_lost_determinant_is_an_orphan_and_rolls_back() {
    let mut ranks = optimistic_ranks(3);
    for rank in ranks.iter_mut() {
        rank.handle_logger_connected();
    }
    // The logger stores one determinant per rank: the second is lost.
    let mut logger = EventLogger::new().with_store_count_max(1);
    exchange(&mut ranks, &mut logger);
    // Rank 1 makes a determinant of its own first (kept by its rollback).
    wildcard_match(&mut ranks[1], 1, 2);
    wildcard_match(&mut ranks[0], 1, 2);
    wildcard_match(&mut ranks[0], 2, 1);
    assert!(send_message(&mut ranks, 0, 1));
    // Its next match may rest on rank 0's lost one: cut by the rollback.
    wildcard_match(&mut ranks[1], 2, 0);
    exchange(&mut ranks, &mut logger);
    assert_eq!(logger.durable(0), 1);
    assert_eq!(ranks[1].dependencies().dependency(0), 2);
    // Rank 2 took nothing from rank 0: it is no orphan.
    assert_eq!(ranks[2].on_peer_failure(0), PeerFailureAction::Handled);
    assert_eq!(ranks[1].on_peer_failure(0), PeerFailureAction::Handled);
    // Until the answer, rank 1 may be an orphan: it sends nothing, and
    // holds the re-send of its log to rank 0's replacement.
    assert!(!ranks[1].send_may_start() && ranks[1].holds_replay_to(0));
    assert!(ranks[2].send_may_start());
    // Rank 0's replacement says hello before its old connection's close
    // is seen: the hello waits for the close (the old socket may still
    // hold determinants others depend on), then the old list ends.
    let old = connection(&ranks[0]);
    ranks[0] = MessageLog::new(0, 3, 1, 1 << 20).optimistic();
    ranks[0].handle_logger_connected();
    exchange(&mut ranks, &mut logger);
    assert!(!ranks[1].is_orphan() && !ranks[0].replay_complete());
    logger.handle_closed(old);
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].replay_complete());
    assert!(!ranks[2].is_orphan());
    // Rank 1 is an orphan: it cut its list where it took rank 0's lost
    // dependency in (after its first determinant), the logger has the
    // cut on disk, and it is ready to die. Never a fatal error.
    assert!(ranks[1].is_orphan());
    assert_eq!(ranks[1].rollback_keep_count(), Some(1));
    // Durable, but it dies only once rank 0's replacement re-joined it
    // (the replacement's wire-up waits for every live process).
    assert!(!ranks[1].rollback_ready());
    ranks[1].on_peer_rejoin(0, 1);
    assert!(ranks[1].rollback_ready());
    assert_eq!(logger.durable(1), 1);
    assert_eq!(ranks[1].take_fatal_error(), None);
    assert!(!ranks[1].send_may_start() && ranks[1].holds_replay_to(0));
    // Its death is like any other: its replacement replays the cut list,
    // and rank 2, which took nothing from it, stays.
    let orphan = connection(&ranks[1]);
    ranks[2].on_peer_failure(1);
    logger.handle_closed(orphan);
    ranks[1] = MessageLog::new(1, 3, 1, 1 << 20).optimistic();
    ranks[1].handle_logger_connected();
    exchange(&mut ranks, &mut logger);
    assert!(ranks[1].replay_complete());
    assert_eq!(ranks[1].determinant_count(), 1);
    assert!(!ranks[2].is_orphan());
}

#[test]
fn a_cut_list_reads_back_cut_and_a_later_record_continues_it() {
    let mut ranks = optimistic_ranks(2);
    let mut file = Vec::new();
    for rank in ranks.iter_mut() {
        rank.handle_logger_connected();
    }
    let mut logger = EventLogger::new();
    exchange_logging(&mut ranks, &mut logger, Some(&mut file));
    wildcard_match(&mut ranks[1], 1, 0);
    // Rank 0's determinants never reach the logger (lost with it).
    wildcard_match(&mut ranks[0], 1, 1);
    wildcard_match(&mut ranks[0], 2, 1);
    while ranks[0].poll_logger_frame().is_some() {}
    assert!(send_message(&mut ranks, 0, 1));
    wildcard_match(&mut ranks[1], 2, 0);
    exchange_logging(&mut ranks, &mut logger, Some(&mut file));
    assert_eq!(logger.durable(1), 2);
    let old = connection(&ranks[0]);
    ranks[1].on_peer_failure(0);
    logger.handle_closed(old);
    exchange_logging(&mut ranks, &mut logger, Some(&mut file));
    ranks[1].on_peer_rejoin(0, 1);
    assert!(ranks[1].rollback_ready());
    assert_eq!(logger.durable(1), 1);
    // A restarted logger reads the cut back.
    let (recovered, length) = EventLogger::recover(&file).unwrap();
    assert_eq!(length, file.len());
    assert_eq!(recovered.entries(1), logger.entries(1));
    assert_eq!(recovered.durable(1), 1);
    // A record that continues the cut list is accepted.
    let mut longer = file.clone();
    append_record(
        &mut longer,
        1,
        1,
        &[Entry::Wildcard(Determinant {
            ordinal: 1,
            source: 0,
        })],
    );
    let (recovered, _) = EventLogger::recover(&longer).unwrap();
    assert_eq!(recovered.durable(1), 2);
}

#[test]
fn a_message_an_orphan_sent_before_its_rollback_is_judged_by_its_incarnation_even_late() {
    let mut ranks = optimistic_ranks(3);
    for rank in ranks.iter_mut() {
        rank.handle_logger_connected();
    }
    let mut logger = EventLogger::new().with_store_count_max(1);
    exchange(&mut ranks, &mut logger);
    wildcard_match(&mut ranks[0], 1, 2);
    wildcard_match(&mut ranks[0], 2, 1);
    exchange(&mut ranks, &mut logger);
    // Rank 1 takes in rank 0's lost dependency and passes it on in a
    // message to rank 2 that is still on its way when rank 0 dies.
    assert!(send_message(&mut ranks, 0, 1));
    let late = ranks[1]
        .piggyback(2)
        .expect("rank 1 passes rank 0's entry on");
    let old = connection(&ranks[0]);
    ranks[1].on_peer_failure(0);
    ranks[2].on_peer_failure(0);
    logger.handle_closed(old);
    ranks[0] = MessageLog::new(0, 3, 1, 1 << 20).optimistic();
    ranks[0].handle_logger_connected();
    exchange(&mut ranks, &mut logger);
    ranks[1].on_peer_rejoin(0, 1);
    assert!(ranks[1].rollback_ready());
    // Rank 2 depended on nothing: no query, no orphan. Rank 0's
    // replacement re-joins it and makes determinants of its own.
    assert!(!ranks[2].is_orphan() && ranks[2].send_may_start());
    ranks[2].on_peer_rejoin(0, 1);
    wildcard_match(&mut ranks[0], 1, 2);
    wildcard_match(&mut ranks[0], 2, 2);
    // The late message arrives: its count (2) would be covered by the
    // replacement's list (1 replayed + 2 new), but it is incarnation 0's,
    // which ended at 1: rank 2 is an orphan too.
    ranks[2].on_protocol_frame(1, &late);
    exchange(&mut ranks, &mut logger);
    assert!(ranks[2].is_orphan());
    assert!(ranks[2].rollback_ready());
    // The same count from the replacement would have been no orphan.
    let mut fresh = MessageLog::new(2, 3, 0, 1 << 20).optimistic();
    fresh.on_peer_rejoin(0, 1);
    let from_replacement = Frame::Depend {
        entries: vec![Dependency {
            rank: 0,
            incarnation: 1,
            count: 2,
        }],
    }
    .encode();
    fresh.on_protocol_frame(1, &from_replacement);
    assert!(fresh.send_may_start() && !fresh.is_orphan());
}

#[test]
fn an_optimistic_checkpoint_has_no_position_while_a_dependency_is_unstable() {
    let mut ranks = optimistic_ranks(2);
    let mut logger = connect_all(&mut ranks);
    assert!(ranks[1].checkpoint_log().is_ok());
    wildcard_match(&mut ranks[0], 1, 1);
    assert!(send_message(&mut ranks, 0, 1));
    assert!(ranks[1].checkpoint_log().is_err());
    // Rank 1's own ack brings the stable vector that covers it.
    wildcard_match(&mut ranks[1], 1, 0);
    exchange(&mut ranks, &mut logger);
    assert!(ranks[1].checkpoint_log().is_ok());
}

#[test]
fn a_restarted_peer_gets_every_unstable_dependency_with_its_first_message() {
    let mut ranks = optimistic_ranks(3);
    let _logger = connect_all(&mut ranks);
    wildcard_match(&mut ranks[0], 1, 2);
    assert!(send_message(&mut ranks, 0, 1));
    assert!(!send_message(&mut ranks, 0, 1));
    ranks[0].on_peer_failure(1);
    ranks[0].on_peer_rejoin(1, 1);
    ranks[1] = MessageLog::new(1, 3, 1, 1 << 20).optimistic();
    assert!(send_message(&mut ranks, 0, 1));
    assert_eq!(ranks[1].dependencies().dependency(0), 1);
}

#[test]
fn a_piggyback_naming_a_rank_out_of_range_is_refused_whole() {
    let mut ranks = optimistic_ranks(2);
    let bytes = Frame::Depend {
        entries: vec![
            Dependency {
                rank: 1,
                incarnation: 0,
                count: 3,
            },
            Dependency {
                rank: 9,
                incarnation: 0,
                count: 1,
            },
        ],
    }
    .encode();
    ranks[0].on_protocol_frame(1, &bytes);
    assert_eq!(ranks[0].protocol_errors, 1);
    assert_eq!(ranks[0].dependencies().dependency(1), 0);
}

#[test]
fn a_dead_ranks_end_is_one_number_for_every_asker_and_its_replacement_replays_it() {
    let mut ranks = optimistic_ranks(3);
    let mut logger = connect_all(&mut ranks);
    wildcard_match(&mut ranks[0], 1, 2);
    exchange(&mut ranks, &mut logger);
    wildcard_match(&mut ranks[0], 2, 1);
    assert!(send_message(&mut ranks, 0, 1));
    assert!(send_message(&mut ranks, 0, 2));
    // Rank 0's second determinant reaches the logger, then rank 0 dies;
    // rank 1 asks before the logger sees the close, rank 2 after.
    let from = connection(&ranks[0]);
    while let Some(bytes) = ranks[0].poll_logger_frame() {
        logger.handle_frame(from, &bytes);
    }
    ranks[1].on_peer_failure(0);
    let asker = connection(&ranks[1]);
    while let Some(bytes) = ranks[1].poll_logger_frame() {
        logger.handle_frame(asker, &bytes);
    }
    assert_eq!(
        logger.poll_frame(),
        None,
        "answered before rank 0's end was known"
    );
    logger.handle_closed(from);
    ranks[2].on_peer_failure(0);
    // Its replacement's replay comes from the same list.
    restart(&mut ranks, 0, 1);
    exchange(&mut ranks, &mut logger);
    assert!(!ranks[1].is_orphan() && !ranks[2].is_orphan());
    assert_eq!(ranks[0].determinant_count(), 2);
    // The replacement's own determinants do not count for the old ones.
    wildcard_match(&mut ranks[0], 1, 2);
    exchange(&mut ranks, &mut logger);
    assert_eq!(ranks[1].dependencies().stable(0), 2);
}

/// `rank` posts wildcard receives numbered `ordinals` and each matches
/// `source_of(ordinal)`; everything is exchanged (and written to `file`).
fn match_wildcards(
    ranks: &mut [MessageLog],
    logger: &mut EventLogger,
    file: &mut Vec<u8>,
    rank: usize,
    ordinals: std::ops::Range<u64>,
) {
    for ordinal in ordinals {
        let receive = 100 + ordinal;
        ranks[rank].on_wildcard_receive(receive, &any_source());
        ranks[rank].on_match(&matched(receive, source_of(ordinal)));
        exchange_logging(ranks, logger, Some(file));
    }
}

fn source_of(ordinal: u64) -> u32 {
    1 + (ordinal % 2) as u32
}

#[test]
fn a_checkpoint_trims_the_loggers_list_and_a_resumed_replacement_replays_the_rest() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    let mut file = Vec::new();
    match_wildcards(&mut ranks, &mut logger, &mut file, 0, 0..6);
    // A checkpoint after six matches, durable: it covers them.
    let ordinals = ranks[0].checkpoint_ordinals();
    assert_eq!(ordinals, [6, 0, 6]);
    let carried_log = ranks[0].checkpoint_log().unwrap();
    ranks[0].on_checkpoint(&[0, 0, 0], ordinals);
    exchange_logging(&mut ranks, &mut logger, Some(&mut file));
    assert_eq!(logger.trimmed(0), 6);
    assert!(logger.entries(0).is_empty());
    assert_eq!(logger.counters.determinants_trimmed, 6);
    // The rank drops them too; its list keeps its positions.
    assert_eq!(ranks[0].determinants_held(), 0);
    assert_eq!(ranks[0].determinant_count(), 6);
    match_wildcards(&mut ranks, &mut logger, &mut file, 0, 6..9);
    assert_eq!(logger.stored(0), 9);
    assert_eq!(logger.entries(0).len(), 3);
    assert_eq!(logger.report().determinants_live, 3);
    // A restarted logger reads the trim back with the list.
    let (recovered, length) = EventLogger::recover(&file).unwrap();
    assert_eq!(length, file.len());
    assert_eq!(recovered.trimmed(0), 6);
    assert_eq!(recovered.entries(0), logger.entries(0));
    // Rank 0 dies; its replacement resumes from the checkpoint and is
    // served the list from the trim on.
    for peer in [1, 2] {
        assert_eq!(ranks[peer].on_peer_failure(0), PeerFailureAction::Handled);
    }
    restart(&mut ranks, 0, 1);
    ranks[0].resume_at(ordinals, &carried_log).unwrap();
    for peer in [1, 2] {
        ranks[peer].on_peer_rejoin(0, 1);
    }
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].replay_complete());
    assert_eq!(ranks[0].determinant_count(), 9);
    for ordinal in 6..9 {
        assert_eq!(
            ranks[0].on_wildcard_receive(200 + ordinal, &any_source()),
            WildcardDecision::Pin(source_of(ordinal)),
            "ordinal {ordinal}"
        );
    }
    assert_eq!(
        ranks[0].on_wildcard_receive(300, &any_source()),
        WildcardDecision::AnySource
    );
    assert_eq!(ranks[0].take_fatal_error(), None);
    assert_eq!(ranks[0].protocol_errors, 0);
    // Its next determinant continues the list where it was.
    ranks[0].on_match(&matched(300, 2));
    exchange(&mut ranks, &mut logger);
    assert_eq!(logger.stored(0), 10);
    assert_eq!(ranks[0].determinants_acknowledged(), 10);
    assert_eq!(logger.counters.protocol_errors, 0);
}

#[test]
fn a_replacement_served_a_trimmed_list_that_does_not_resume_is_refused() {
    let mut ranks: Vec<MessageLog> = (0..3)
        .map(|rank| MessageLog::new(rank, 3, 0, 1 << 20))
        .collect();
    let mut logger = connect_all(&mut ranks);
    let mut file = Vec::new();
    match_wildcards(&mut ranks, &mut logger, &mut file, 0, 0..4);
    let ordinals = ranks[0].checkpoint_ordinals();
    ranks[0].on_checkpoint(&[0, 0, 0], ordinals);
    match_wildcards(&mut ranks, &mut logger, &mut file, 0, 4..5);
    for peer in [1, 2] {
        ranks[peer].on_peer_failure(0);
    }
    // Its checkpoint is gone: it starts from MPI_Init, with no resume.
    restart(&mut ranks, 0, 1);
    exchange(&mut ranks, &mut logger);
    assert!(ranks[0].replay_complete());
    ranks[0].on_wildcard_receive(1, &any_source());
    let error = ranks[0].take_fatal_error().expect("refused");
    assert!(
        error.contains("trimmed this rank's first 4 determinants"),
        "{error}"
    );
}

#[test]
fn an_optimistic_checkpoint_asks_the_logger_for_its_stable_vector_and_then_has_a_position() {
    let mut ranks = optimistic_ranks(2);
    let mut logger = connect_all(&mut ranks);
    wildcard_match(&mut ranks[0], 1, 1);
    assert!(send_message(&mut ranks, 0, 1));
    // Rank 0's determinant is on the logger's disk, but rank 1 makes none
    // of its own: no ack tells it.
    exchange(&mut ranks, &mut logger);
    assert!(ranks[1].checkpoint_log().is_err());
    // Its checkpoint asks (once), and the answer settles it.
    assert!(ranks[1].checkpoint_may_wait());
    assert!(ranks[1].checkpoint_may_wait());
    assert_eq!(ranks[1].logger_out.len(), 1);
    exchange(&mut ranks, &mut logger);
    assert!(ranks[1].checkpoint_log().is_ok());
    assert!(!ranks[1].checkpoint_may_wait());
    assert_eq!(logger.counters.protocol_errors, 0);
    assert_eq!(logger.stored(1), 0);
    // A pessimistic rank never waits: its position is refused for other
    // reasons only.
    let mut pessimistic = MessageLog::new(0, 2, 0, 1 << 20);
    assert!(!pessimistic.checkpoint_may_wait());
}

#[test]
fn a_replay_with_a_hole_in_its_completion_choices_is_refused() {
    let mut rank = MessageLog::new(0, 2, 1, 1 << 20);
    rank.handle_logger_connected();
    let choice = |ordinal| {
        Entry::Choice(Choice {
            ordinal,
            repeat: 1,
            completed: vec![0],
        })
    };
    let replay = Frame::Replay {
        first: 0,
        last: true,
        entries: vec![choice(0), choice(2)],
    };
    rank.handle_logger_frame(&replay.encode());
    assert!(rank.replay_complete());
    choose(&mut rank, CompletionCall::Testany, 2, &[0]);
    assert_eq!(rank.take_fatal_error(), None);
    // Call 1 has no logged outcome, call 2 has: entries are missing.
    choose(&mut rank, CompletionCall::Testany, 2, &[1]);
    let error = rank.take_fatal_error().expect("refused");
    assert!(
        error.contains("no outcome of non-deterministic call 1"),
        "{error}"
    );
}
