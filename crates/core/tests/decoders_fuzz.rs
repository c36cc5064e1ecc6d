//! Business cards (`resmpi_core::wireup::Card`, the `HOST;SHM;TCP` value
//! every rank reads from PMI for each peer at MPI_Init, shm locator
//! included) on random and mutated text (issue 16, item 7;
//! `resmpi_fuzz_input`): a card parses and writes back the same, or is
//! refused with a message; never a panic.
use resmpi_core::wireup::Card;
use resmpi_fuzz_input::Inputs;

#[test]
fn business_cards_from_random_and_mutated_text_parse_or_fail_cleanly() {
    let corpus: [&[u8]; 4] = [
        b"6c6f63616c686f7374-1234;4242.17.0123456789abcdef;10.0.0.1:4000|10.0.1.1:4001",
        b"aa;-;127.0.0.1:5000",
        b"aa;1.3.00000000000000ff;-",
        b"host-key;2147483647.2147483647.ffffffffffffffff;[::1]:7",
    ];
    let (mut accepted, mut refused) = (0, 0);
    Inputs::new(21).check(&corpus, 50_000, 160, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        match Card::parse(&text) {
            Ok(card) => {
                assert_eq!(
                    Card::parse(&card.to_string()).as_ref(),
                    Ok(&card),
                    "{text:?}"
                );
                accepted += 1;
            }
            Err(message) => {
                assert!(!message.is_empty());
                refused += 1;
            }
        }
    });
    assert!(
        accepted >= corpus.len() && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn malformed_cards_are_refused_with_the_reason() {
    for (card, reason) in [
        ("aa;-", "HOST;SHM;TCP"),
        (";-;1.2.3.4:5", "host key"),
        ("aa;0;1.2.3.4:5", "PID.FD.NONCE"),
        ("aa;1.2.3;-", "16 hex digits"),
        ("aa;-;1.2.3.4:5||6.7.8.9:1", "TCP address"),
        ("a a;-;-", "host key"),
    ] {
        let error = Card::parse(card).expect_err(card);
        assert!(error.contains(reason), "{card:?}: {error}");
    }
    let long = format!("aa;-;{}", "1".repeat(Card::MAX_BYTES));
    assert!(Card::parse(&long).unwrap_err().contains("too long"));
}

/// Port names (MPI_Comm_connect takes any string) and MPI_Comm_join's
/// cards (read from a socket) parse and write back the same, or are
/// refused; never a panic.
#[test]
fn port_names_and_join_cards_from_random_and_mutated_bytes_parse_or_fail_cleanly() {
    use resmpi_core::dpm::{JoinCard, PortName};
    let ports: [&[u8]; 3] = [
        b"resmpi-port:kvs_1234_0:3:7",
        b"resmpi-port:kvs:with:colons:0:268435455",
        b"resmpi-port:j:4294967295:0",
    ];
    let (mut accepted, mut refused) = (0, 0);
    Inputs::new(22).check(&ports, 50_000, 96, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        match PortName::parse(&text) {
            Some(port) => {
                assert_eq!(PortName::parse(&port.format()), Some(port), "{text:?}");
                accepted += 1;
            }
            None => refused += 1,
        }
    });
    assert!(
        accepted >= ports.len() && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
    let card = JoinCard {
        job: "kvs_1".to_string(),
        rank: 5,
        next_context: 40,
    }
    .encode();
    let cards: [&[u8]; 1] = [&card[4..]];
    let (mut accepted, mut refused) = (0, 0);
    Inputs::new(23).check(
        &cards,
        50_000,
        JoinCard::MAX_BYTES + 8,
        |bytes| match JoinCard::decode(bytes) {
            Some(card) => {
                assert_eq!(JoinCard::decode(&card.encode()[4..]), Some(card));
                accepted += 1;
            }
            None => refused += 1,
        },
    );
    assert!(
        accepted >= 1 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

/// The message-logging position a checkpoint carries (issue 13 item 5),
/// on random and mutated bytes: it decodes and encodes back to the same
/// bytes, or is refused with a message; never a panic.
#[test]
fn checkpoint_positions_from_random_and_mutated_bytes_decode_or_fail_cleanly() {
    use resmpi_core::engine::{CheckpointPosition, CollectivePosition};
    let position = CheckpointPosition {
        job: "0123abcd".into(),
        delivered: vec![0, 7, 9],
        sent: vec![3, 0, 11],
        ordinals: [2, 40, 5],
        collectives: vec![CollectivePosition {
            context: 0,
            collective_sequence: 12,
            shared_memory_sequence: 0,
        }],
        log: vec![1, 2, 3, 4],
        output_bytes: 28,
    };
    let encoded = position.encode();
    let corpus: [&[u8]; 1] = [&encoded];
    let (mut accepted, mut refused) = (0, 0);
    Inputs::new(22).check(
        &corpus,
        50_000,
        200,
        |bytes| match CheckpointPosition::decode(bytes) {
            Ok(decoded) => {
                assert_eq!(decoded.encode(), bytes);
                accepted += 1;
            }
            Err(message) => {
                assert!(!message.is_empty());
                refused += 1;
            }
        },
    );
    assert!(
        accepted >= 1 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}
