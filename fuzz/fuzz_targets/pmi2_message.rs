//! A PMI-2 message from a process manager (Slurm's `mpi/pmi2`): the length
//! header and the body must parse or fail without a panic, and a parsed
//! body must re-encode to one that parses to the same message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_runtime::codec::PmiLine;

fuzz_target!(|data: &[u8]| {
    let _ = PmiLine::parse_pmi2_length(&data[..data.len().min(6)]);
    if let Ok(message) = PmiLine::parse_pmi2_body(data) {
        let encoded = message.encode_pmi2();
        let again = PmiLine::parse_pmi2_body(&encoded[6..]).expect("re-encoded message parses");
        assert_eq!(again, message);
    }
});
