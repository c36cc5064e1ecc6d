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
