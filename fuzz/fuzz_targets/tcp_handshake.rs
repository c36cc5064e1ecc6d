//! A stranger in a TCP handshake: the first byte picks the side (even: it
//! connects to a rank's wire-up port and sends the rest; odd: it answers a
//! connecting rank with the rest). It never knows the job secret, so it
//! must never be taken for a rank, and nothing may panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_path::fuzzing::{tcp_acceptor_handshake, tcp_connector_handshake};

fuzz_target!(|data: &[u8]| {
    let Some((&side, stranger)) = data.split_first() else {
        return;
    };
    if side % 2 == 0 {
        assert!(!tcp_acceptor_handshake(stranger).expect("loopback sockets"));
    } else {
        assert!(tcp_connector_handshake(stranger).is_err());
    }
});
