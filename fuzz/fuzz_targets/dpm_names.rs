//! Dynamic processes: a port name (any string reaches MPI_Comm_connect)
//! and MPI_Comm_join's card (read from a user's socket). Parsing must not
//! panic, and what parses must come back the same after writing it out.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_core::dpm::{JoinCard, PortName};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some(port) = PortName::parse(text) {
            assert_eq!(PortName::parse(&port.format()), Some(port));
        }
    }
    if let Some(card) = JoinCard::decode(data) {
        assert_eq!(JoinCard::decode(&card.encode()[4..]), Some(card));
    }
});
