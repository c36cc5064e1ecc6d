//! The proxy protocol (mpiexec <-> its remote proxies) on random and
//! mutated input (issue 16, item 7; `resmpi_fuzz_input`): never a panic;
//! an accepted frame re-encodes to the same bytes; the splitter of a byte
//! stream never panics whatever arrives.
use resmpi_fuzz_input::Inputs;
use resmpi_launcher::proxy_protocol::{Frame, FrameSplitter, PROTOCOL_VERSION};

#[test]
fn proxy_frames_from_random_and_mutated_bytes_decode_or_fail_cleanly() {
    let frames = [
        Frame::Hello {
            version: PROTOCOL_VERSION,
            host_index: 1,
            token: "0123abcd".into(),
        },
        Frame::Signal {
            rank: 2,
            incarnation: 0,
            signal: 9,
        },
        Frame::Started {
            rank: 3,
            incarnation: 1,
            pid: 4242,
        },
        Frame::StartFailed {
            rank: 0,
            incarnation: 0,
            error_number: 2,
            reason: "no such file".into(),
        },
    ];
    let encoded: Vec<Vec<u8>> = frames.iter().map(Frame::encode).collect();
    // Frame::decode takes the body, after the 4-byte length.
    let bodies: Vec<&[u8]> = encoded.iter().map(|frame| &frame[4..]).collect();
    Inputs::new(4).check(&bodies, 50_000, 512, |body| {
        if let Ok(frame) = Frame::decode(body) {
            assert_eq!(&frame.encode()[4..], body, "{frame:?}");
        }
    });
    let streams: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    Inputs::new(5).check(&streams, 20_000, 1024, |stream| {
        let mut splitter = FrameSplitter::new();
        splitter.push(stream);
        while let Ok(Some(frame)) = splitter.next_frame() {
            let _ = frame.encode();
        }
    });
}
