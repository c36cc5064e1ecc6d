#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_path::inject_spec::FaultSpec;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = text.parse::<FaultSpec>();
    }
});
