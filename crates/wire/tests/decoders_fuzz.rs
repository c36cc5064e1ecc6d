//! The frame header decoder on random and mutated input (issue 16, item 7;
//! `resmpi_fuzz_input`): never a panic, and what it accepts re-encodes to
//! a header it parses the same.
use resmpi_fuzz_input::Inputs;
use resmpi_wire::{FrameHeader, FrameKind, HEADER_LEN_BYTES};

#[test]
fn frame_headers_from_random_and_mutated_bytes_parse_or_fail_cleanly() {
    let mut header = FrameHeader::new(FrameKind::Data, 3);
    header.tag = 7;
    header.payload_len = 64;
    let valid = header.to_bytes();
    let mut accepted = 0;
    Inputs::new(1).check(&[&valid], 50_000, 2 * HEADER_LEN_BYTES, |bytes| {
        if let Ok(parsed) = FrameHeader::parse(bytes) {
            accepted += 1;
            assert_eq!(
                FrameHeader::parse(&parsed.to_bytes()),
                Ok(parsed),
                "{bytes:02x?}"
            );
        }
    });
    assert!(
        accepted > 100,
        "the corpus should keep many inputs valid ({accepted})"
    );
}
