//! Any bytes as the event logger's file (read back when a logger
//! restarts): recovery must not panic, must stop at a whole record, and
//! what it recovered must be what those records hold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use resmpi_msglog::event_logger::EventLogger;

fuzz_target!(|data: &[u8]| {
    if let Ok((logger, length)) = EventLogger::recover(data) {
        assert!(length <= data.len());
        let (again, again_length) = EventLogger::recover(&data[..length]).expect("a prefix");
        assert_eq!(again_length, length);
        assert_eq!(again.counters, logger.counters);
    }
});
