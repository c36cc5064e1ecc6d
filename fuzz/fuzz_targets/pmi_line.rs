//! Any line from a PMI peer: parsing must not panic, and encode + parse of
//! what parsed must give the same line back.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_runtime::codec::PmiLine;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(line) = PmiLine::parse(text) {
            let encoded = line.encode();
            assert!(PmiLine::parse(encoded.strip_suffix('\n').unwrap_or(&encoded)).is_ok());
        }
    }
});
