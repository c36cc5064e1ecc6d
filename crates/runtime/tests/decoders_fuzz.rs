//! PMI lines (what mpiexec and every process manager send, and what ranks
//! send back) and byte counts on random and mutated input (issue 16, item
//! 7; `resmpi_fuzz_input`): never a panic; an accepted line re-encodes to
//! one that parses.
use resmpi_fuzz_input::Inputs;
use resmpi_runtime::codec::{decode_text, encode_text, PmiLine};
use resmpi_runtime::parse_byte_count;

#[test]
fn pmi_lines_from_random_and_mutated_text_parse_or_fail_cleanly() {
    let corpus: [&[u8]; 4] = [
        b"cmd=get kvsname=kvs_1 key=card-0",
        b"cmd=get_result rc=0 value=127.0.0.1:4000 msg=success",
        b"cmd=barrier_in",
        b"cmd=abort exitcode=3 message=out_of_memory",
    ];
    Inputs::new(2).check(&corpus, 50_000, 256, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        if let Ok(line) = PmiLine::parse(&text) {
            let encoded = line.encode();
            assert!(
                PmiLine::parse(encoded.strip_suffix('\n').unwrap_or(&encoded)).is_ok(),
                "{text:?} -> {encoded:?}"
            );
        }
    });
}

#[test]
fn byte_counts_from_random_text_parse_or_fail_cleanly() {
    let corpus: [&[u8]; 3] = [b"16K", b"1MiB", b"4096"];
    Inputs::new(3).check(&corpus, 20_000, 24, |bytes| {
        let _ = parse_byte_count(&String::from_utf8_lossy(bytes));
    });
}

#[test]
fn free_text_survives_encoding_and_any_value_decodes() {
    let corpus: [&[u8]; 3] = [
        b"MPI_Send: Invalid rank 7",
        b"100% = done\n\ttab",
        "é ü %zz %4".as_bytes(),
    ];
    Inputs::new(9).check(&corpus, 20_000, 128, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        let encoded = encode_text(&text);
        assert!(!encoded.contains([' ', '=', '\n']), "{encoded:?}");
        assert!(PmiLine::parse(&format!("cmd=abort message={encoded}")).is_ok());
        assert_eq!(decode_text(&encoded), text);
        let _ = decode_text(&text);
    });
}

#[test]
fn pmi2_messages_from_random_and_mutated_bytes_parse_or_fail_cleanly() {
    let corpus: [&[u8]; 4] = [
        b"cmd=fullinit-response;rc=0;rank=1;size=4;appnum=0;",
        b"cmd=kvs-get-response;rc=0;found=TRUE;value=a;;b%3B;",
        b"cmd=job-getid-response;rc=0;jobid=12.0;",
        b"    42",
    ];
    Inputs::new(4).check(&corpus, 50_000, 256, |bytes| {
        let _ = PmiLine::parse_pmi2_length(&bytes[..bytes.len().min(6)]);
        if let Ok(message) = PmiLine::parse_pmi2_body(bytes) {
            let encoded = message.encode_pmi2();
            let again = PmiLine::parse_pmi2_body(&encoded[6..]).expect("re-encoded message parses");
            assert_eq!(again, message, "{bytes:?}");
        }
    });
}
