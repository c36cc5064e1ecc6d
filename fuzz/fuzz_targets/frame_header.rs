//! Any bytes: parsing a frame header must not panic, and what parses must
//! survive emit + parse unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_wire::{FrameHeader, HEADER_LEN_BYTES};

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = FrameHeader::parse(data) {
        let mut bytes = [0u8; HEADER_LEN_BYTES];
        header.emit(&mut bytes);
        assert_eq!(FrameHeader::parse(&bytes), Ok(header));
    }
});
