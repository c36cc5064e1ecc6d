//! A shm ring as a faulty or hostile peer may leave it (shared head and
//! tail words, record lengths, skip markers; layout in
//! `resmpi_path::fuzzing::ring_records`): the consumer delivers frames or
//! reports a corrupt ring, the producer pushes or finds no room; no panic,
//! no access outside the ring.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = resmpi_path::fuzzing::ring_records(data);
});
