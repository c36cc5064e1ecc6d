//! Any bytes from a proxy connection (or a stranger at mpiexec's control
//! port): splitting and decoding must not panic, and every frame that
//! decodes must encode back to the very bytes it came from.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_launcher::proxy_protocol::{Frame, FrameSplitter};

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = Frame::decode(data) {
        assert_eq!(&frame.encode()[4..], data);
    }
    let mut splitter = FrameSplitter::new();
    splitter.push(data);
    while let Ok(Some(frame)) = splitter.next_frame() {
        let _ = frame.encode();
    }
});
