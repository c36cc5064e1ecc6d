//! Any bytes as a checkpoint file (`VELOC_Restart_test` reads files a crash,
//! a full disk or a person may have damaged): decoding must not panic or
//! allocate past the file's size, and a file that decodes must encode
//! back to the very bytes it came from.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_veloc::format::{emit, parse, Region};

fuzz_target!(|data: &[u8]| {
    if let Ok(checkpoint) = parse(data, ("heat", 1, 2)) {
        let regions: Vec<Region<'_>> = checkpoint
            .regions
            .iter()
            .map(|(id, bytes)| Region { id: *id, bytes })
            .collect();
        let mut again = Vec::new();
        emit(&mut again, &checkpoint.name, checkpoint.rank, checkpoint.version, &regions).unwrap();
        assert_eq!(again, data);
    }
});
