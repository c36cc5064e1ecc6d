#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_ft::ulfm::{decode_frame, encode_frame};

fuzz_target!(|data: &[u8]| {
    if let Some(frame) = decode_frame(data) {
        assert_eq!(decode_frame(&encode_frame(&frame)), Some(frame));
    }
});
