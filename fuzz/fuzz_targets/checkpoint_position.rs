//! Any bytes as the message-logging position a checkpoint file carries
//! (`resmpi_core::engine::CheckpointPosition`, read by a replacement at
//! `MPI_Init`): decoding must not panic, and every position that decodes
//! must encode back to the very bytes it came from.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_core::engine::CheckpointPosition;

fuzz_target!(|data: &[u8]| {
    if let Ok(position) = CheckpointPosition::decode(data) {
        assert_eq!(position.encode(), data);
    }
});
