//! Any bytes as a message-logging protocol frame (from a peer's
//! `CONTROL_PROTOCOL` frame): decoding must not panic, and every frame
//! that decodes must encode back to the very bytes it came from.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_msglog::frames::Frame;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = Frame::decode(data) {
        assert_eq!(frame.encode(), data);
    }
});
