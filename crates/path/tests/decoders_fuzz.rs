//! `--inject` specs on random and mutated text (issue 16, item 7;
//! `resmpi_fuzz_input`): a spec is accepted or refused with a message,
//! never a panic.
use resmpi_fuzz_input::Inputs;
use resmpi_path::inject_spec::FaultSpec;

#[test]
fn inject_specs_from_random_and_mutated_text_parse_or_fail_cleanly() {
    let corpus: [&[u8]; 5] = [
        b"drop:1e-3",
        b"corrupt:0.01@ranks=0-1,delay:5ms",
        b"rail-down:1@0.2s@ranks=0-3",
        b"kill:2@sends=100",
        b"kill:1.0@0.5s,seed=7",
    ];
    let mut accepted = 0;
    Inputs::new(6).check(&corpus, 50_000, 128, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        if text.parse::<FaultSpec>().is_ok() {
            accepted += 1;
        }
    });
    assert!(
        accepted >= corpus.len(),
        "the corpus itself parses ({accepted})"
    );
}

/// Rings as a faulty or hostile peer may leave them (head and tail words,
/// record lengths, skip markers; `resmpi_path::fuzzing::ring_records`):
/// the consumer delivers frames or says the ring is corrupt, the producer
/// pushes or finds no room, and nothing panics or reads outside the ring.
#[test]
fn shm_ring_records_from_random_and_mutated_bytes_decode_or_fail_cleanly() {
    let mut valid = Vec::new();
    valid.extend_from_slice(&0u64.to_le_bytes());
    valid.extend_from_slice(&0u64.to_le_bytes());
    for length in [8u64, 100, 1024, 0] {
        valid.push(2);
        valid.extend_from_slice(&length.to_le_bytes());
    }
    valid.push(1);
    valid.extend_from_slice(&0u64.to_le_bytes());
    valid.extend_from_slice(&[3, 200, 17]);
    let mut skewed = valid.clone();
    skewed[..8].copy_from_slice(&4093u64.to_le_bytes());
    skewed[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let corpus: [&[u8]; 2] = [&valid, &skewed];
    let (mut delivered, mut refused) = (0, 0);
    Inputs::new(16).check(
        &corpus,
        20_000,
        256,
        |bytes| match resmpi_path::fuzzing::ring_records(bytes) {
            Ok(count) => delivered += count,
            Err(_) => refused += 1,
        },
    );
    assert_eq!(resmpi_path::fuzzing::ring_records(&valid), Ok(4));
    assert!(
        delivered > 0 && refused > 0,
        "{delivered} delivered, {refused} refused"
    );
}

/// Strangers on a rank's wire-up port and strangers answering a connecting
/// rank (`resmpi_path::fuzzing::tcp_*_handshake`): hellos with mutated
/// magic, version, rank and nonce, proofs of random bytes, short and long
/// streams. None is taken for a rank and nothing panics.
#[test]
fn tcp_handshakes_with_random_and_mutated_strangers_never_pass_or_panic() {
    let hello_zero = resmpi_path::fuzzing::tcp_hello(0);
    let hello_one = resmpi_path::fuzzing::tcp_hello(1);
    let mut hello_and_proof = hello_zero.clone();
    hello_and_proof.extend_from_slice(&[0x5a; 32]);
    let mut answer = hello_one.clone();
    answer.extend_from_slice(&[0xa5; 32]);
    answer.push(1);
    let corpus: [&[u8]; 4] = [&hello_zero, &hello_and_proof, &hello_one, &answer];
    let mut inputs = Inputs::new(17);
    inputs.check(&corpus, 1_500, 160, |bytes| {
        assert!(
            !resmpi_path::fuzzing::tcp_acceptor_handshake(bytes).expect("loopback sockets"),
            "a stranger passed the acceptor's handshake"
        );
    });
    inputs.check(&corpus, 1_500, 160, |bytes| {
        assert!(
            resmpi_path::fuzzing::tcp_connector_handshake(bytes).is_err(),
            "a stranger passed the connector's handshake"
        );
    });
}
