//! A business card from PMI (`HOST;SHM;TCP`, with the shm locator
//! `PID.FD.NONCE`): parsing must not panic, and what parses must come back
//! the same after writing it out again.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_core::wireup::Card;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(card) = Card::parse(text) {
            assert_eq!(Card::parse(&card.to_string()), Ok(card));
        }
    }
});
