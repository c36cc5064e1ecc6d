//! Single-process checks of the protocol's rules; whole jobs with kills at
//! every step run in `resmpi-sim` (`replication_job`).

use super::*;

fn process(rank: u32, replica: u32) -> Process {
    Process { rank, replica }
}

fn drain(replica: &mut Replica) -> Vec<Action> {
    std::iter::from_fn(|| replica.poll_action()).collect()
}

#[test]
fn a_send_goes_to_the_same_replica_and_waits_for_the_other_replicas_acks() {
    let mut sender = Replica::new(process(0, 1), 2, 3);
    let send = sender.handle_send(1);
    assert_eq!(
        send,
        SendId {
            destination: 1,
            logical_seq: 1
        }
    );
    assert_eq!(
        drain(&mut sender),
        [Action::Transmit {
            send,
            to: process(1, 1)
        }]
    );
    sender.handle_transmitted(send, process(1, 1));
    sender.handle_ack(process(1, 0), 1);
    assert_eq!(drain(&mut sender), [], "replica 2 of rank 1 has not acked");
    sender.handle_ack(process(1, 2), 1);
    assert_eq!(drain(&mut sender), [Action::SendComplete(send)]);
    assert_eq!(sender.pending_send_count(), 0);
}

#[test]
fn an_arrival_acks_every_other_live_replica_of_the_sender_once() {
    let mut receiver = Replica::new(process(1, 0), 2, 3);
    receiver.handle_failure(process(0, 2));
    drain(&mut receiver);
    assert_eq!(receiver.handle_arrival(process(0, 0), 1), Arrival::Deliver);
    assert_eq!(
        drain(&mut receiver),
        [Action::Ack {
            to: process(0, 1),
            acking_rank: 1,
            logical_seq: 1
        }]
    );
    assert_eq!(
        receiver.handle_arrival(process(0, 1), 1),
        Arrival::Duplicate
    );
    assert_eq!(drain(&mut receiver), [], "a duplicate is not acked again");
    assert_eq!(
        receiver.handle_arrival(process(0, 0), 3),
        Arrival::OutOfOrder { expected: 2 }
    );
}

#[test]
fn the_substitute_resends_what_the_dead_replicas_destinations_have_not_acked() {
    let mut sender = Replica::new(process(0, 0), 2, 2);
    let first = sender.handle_send(1);
    let second = sender.handle_send(1);
    sender.handle_transmitted(first, process(1, 0));
    sender.handle_transmitted(second, process(1, 0));
    sender.handle_ack(process(1, 1), 1);
    drain(&mut sender);
    sender.handle_failure(process(0, 1));
    assert_eq!(
        drain(&mut sender),
        [Action::Transmit {
            send: second,
            to: process(1, 1)
        }],
        "only the send replica 1 of rank 1 has not acknowledged"
    );
    sender.handle_transmitted(second, process(1, 1));
    assert_eq!(drain(&mut sender), [Action::SendComplete(second)]);
    // Later sends go to both replicas of the destination.
    let third = sender.handle_send(1);
    assert_eq!(
        drain(&mut sender),
        [
            Action::Transmit {
                send: third,
                to: process(1, 0)
            },
            Action::Transmit {
                send: third,
                to: process(1, 1)
            }
        ]
    );
}

#[test]
fn an_early_ack_spares_the_substitute_a_copy_the_destination_has() {
    let mut sender = Replica::new(process(0, 0), 2, 2);
    // Replica 1 of rank 0 ran ahead: rank 1's replica 1 got message 1 and
    // acked it here before this replica sent it.
    sender.handle_ack(process(1, 1), 1);
    sender.handle_failure(process(0, 1));
    let send = sender.handle_send(1);
    assert_eq!(
        drain(&mut sender),
        [Action::Transmit {
            send,
            to: process(1, 0)
        }]
    );
    sender.handle_transmitted(send, process(1, 0));
    assert_eq!(drain(&mut sender), [Action::SendComplete(send)]);
}

#[test]
fn a_dead_destination_replica_is_neither_sent_to_nor_waited_for() {
    let mut sender = Replica::new(process(0, 0), 2, 2);
    let send = sender.handle_send(1);
    drain(&mut sender);
    sender.handle_failure(process(1, 1));
    assert_eq!(drain(&mut sender), [], "the transmission is not out yet");
    sender.handle_failure(process(1, 0));
    assert_eq!(
        drain(&mut sender),
        [Action::RankLost(1), Action::SendComplete(send)]
    );
}

#[test]
fn receivers_repoint_to_the_same_substitute_everywhere() {
    let mut receivers: Vec<Replica> = (0..3).map(|r| Replica::new(process(1, r), 2, 3)).collect();
    for receiver in &mut receivers {
        receiver.handle_failure(process(0, 1));
    }
    assert_eq!(
        drain(&mut receivers[1]),
        [Action::ReceiveFrom {
            rank: 0,
            replica: 2
        }]
    );
    assert_eq!(
        drain(&mut receivers[0]),
        [],
        "replica 0 still hears replica 0"
    );
    assert_eq!(receivers[2].source_replica(0), 2);
    // The substitute's substitute: the next live one, cyclically.
    receivers[1].handle_failure(process(0, 2));
    assert_eq!(
        drain(&mut receivers[1]),
        [Action::ReceiveFrom {
            rank: 0,
            replica: 0
        }]
    );
}

#[test]
fn a_rank_is_lost_only_with_its_last_replica_and_said_once() {
    let mut observer = Replica::new(process(0, 0), 2, 3);
    observer.handle_failure(process(1, 0));
    observer.handle_failure(process(1, 1));
    assert!(!drain(&mut observer)
        .iter()
        .any(|action| matches!(action, Action::RankLost(_))));
    observer.handle_failure(process(1, 2));
    observer.handle_failure(process(1, 2));
    assert_eq!(drain(&mut observer), [Action::RankLost(1)]);
}

#[test]
fn only_the_substitute_of_a_dead_replica_forks_it_and_the_new_one_starts_at_the_cut() {
    let mut substitute = Replica::new(process(0, 0), 2, 2).with_recovery();
    let mut other_rank = Replica::new(process(1, 0), 2, 2).with_recovery();
    assert!(!substitute.can_fork(1), "replica 1 lives");
    let send = substitute.handle_send(1);
    drain(&mut substitute);
    // Rank 1 replica 1 is dead in this job; then rank 0 replica 1 dies.
    substitute.handle_failure(process(1, 1));
    other_rank.handle_failure(process(1, 1));
    substitute.handle_failure(process(0, 1));
    assert!(substitute.can_fork(1));
    other_rank.handle_failure(process(0, 1));
    // It may fork its own rank's dead replica 1 (as its substitute).
    assert!(other_rank.can_fork(1) && !other_rank.can_fork(0));
    let (mut child, cut) = substitute.fork(1);
    assert_eq!(child.me(), process(0, 1));
    assert_eq!((cut.forker, cut.incarnation), (0, 1));
    assert_eq!(cut.sent, vec![0, 1]);
    assert!(substitute.is_alive(process(0, 1)) && child.is_alive(process(0, 0)));
    // Both wait for the other rank's welcome; the copy of the pending send
    // is the forker's to transmit, so the new replica transmits nothing.
    assert!(substitute.is_rejoining() && child.is_rejoining());
    assert!(!substitute.can_fork(1));
    assert_eq!(drain(&mut child), []);
    assert_eq!(child.pending_send_count(), 1);
    // Rank 1 replica 0 learns of it; it has delivered nothing, so the
    // welcome acks nothing.
    other_rank.handle_rejoin(&cut);
    other_rank.handle_rejoin(&cut);
    let welcomes: Vec<Action> = drain(&mut other_rank)
        .into_iter()
        .filter(|action| matches!(action, Action::Welcome { .. }))
        .collect();
    assert_eq!(
        welcomes,
        [
            Action::Welcome {
                to: process(0, 1),
                joined: process(0, 1),
                incarnation: 1,
                delivered: 0
            },
            Action::Welcome {
                to: process(0, 0),
                joined: process(0, 1),
                incarnation: 1,
                delivered: 0
            },
        ],
        "one welcome each, the repeated notice ignored"
    );
    child.handle_welcome(process(1, 0), process(0, 1), 1, 0);
    substitute.handle_welcome(process(1, 0), process(0, 1), 1, 0);
    assert!(!child.is_rejoining() && !substitute.is_rejoining());
    // The send completes at the new replica once rank 1 replica 0 has it.
    child.handle_ack(process(1, 0), send.logical_seq);
    assert_eq!(drain(&mut child), [Action::SendComplete(send)]);
}

#[test]
fn a_forker_holds_its_acks_to_a_sender_until_that_sender_welcomes_the_new_replica() {
    let mut forker = Replica::new(process(0, 0), 2, 2).with_recovery();
    forker.handle_failure(process(0, 1));
    let (_child, cut) = forker.fork(1);
    drain(&mut forker);
    // A message of rank 1 past the cut: its ack to rank 1 replica 1 would
    // let that sender forget it before it knows the new replica.
    assert_eq!(forker.handle_arrival(process(1, 0), 1), Arrival::Deliver);
    assert!(cut.delivered[1] < 1);
    let acks = drain(&mut forker);
    assert!(
        !acks
            .iter()
            .any(|action| matches!(action, Action::Ack { to, .. } if *to == process(1, 1))),
        "{acks:?}"
    );
    forker.handle_welcome(process(1, 1), process(0, 1), 1, 0);
    assert!(drain(&mut forker).contains(&Action::Ack {
        to: process(1, 1),
        acking_rank: 0,
        logical_seq: 1
    }));
}

#[test]
fn a_fork_cut_survives_its_bytes_and_malformed_bytes_are_refused() {
    let mut forker = Replica::new(
        Process {
            rank: 1,
            replica: 0,
        },
        3,
        2,
    )
    .with_recovery();
    forker.handle_failure(Process {
        rank: 1,
        replica: 1,
    });
    assert!(forker.can_fork(1));
    let (_, cut) = forker.fork(1);
    let bytes = cut.to_bytes();
    assert_eq!(crate::ForkCut::from_bytes(&bytes), Some(cut.clone()));
    assert_eq!(crate::ForkCut::from_bytes(&bytes[..bytes.len() - 1]), None);
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(crate::ForkCut::from_bytes(&longer), None);
}
