//! Message-logging frames on random and mutated input (`resmpi_fuzz_input`):
//! never a panic; an accepted frame re-encodes to the very bytes it came
//! from.
use resmpi_fuzz_input::Inputs;
use resmpi_msglog::event_logger::{append_record, EventLogger, TRIM_RECORD_FLAG};
use resmpi_msglog::frames::{Choice, Dependency, Determinant, Entry, Frame, Probed};

#[test]
fn message_logging_frames_from_random_and_mutated_bytes_decode_or_fail_cleanly() {
    let entries = vec![
        Entry::Wildcard(Determinant {
            ordinal: 3,
            source: 1,
        }),
        Entry::Choice(Choice {
            ordinal: 7,
            repeat: 1,
            completed: vec![2, 0],
        }),
        Entry::Choice(Choice {
            ordinal: 8,
            repeat: 12,
            completed: vec![],
        }),
        Entry::Wildcard(Determinant {
            ordinal: 4,
            source: 2,
        }),
        Entry::Probe(Probed {
            ordinal: 9,
            source: 1,
            tag: 3,
            length_bytes: 40,
        }),
    ];
    let seeds = [
        Frame::Determinants {
            first: 2,
            entries: entries.clone(),
        }
        .encode(),
        Frame::Ack { count: 9 }.encode(),
        Frame::Replay {
            first: 4,
            last: true,
            entries,
        }
        .encode(),
        Frame::Trim { count: 5 }.encode(),
        Frame::Finished.encode(),
        Frame::Hello {
            rank: 1,
            incarnation: 2,
            replay: true,
            optimistic: true,
        }
        .encode(),
        Frame::Stable {
            count: 3,
            stable: vec![(0, 3), (2, 7)],
        }
        .encode(),
        Frame::Depend {
            entries: vec![
                Dependency {
                    rank: 1,
                    incarnation: 0,
                    count: 4,
                },
                Dependency {
                    rank: 3,
                    incarnation: 2,
                    count: 1,
                },
            ],
        }
        .encode(),
        Frame::Query {
            rank: 3,
            incarnation: 1,
        }
        .encode(),
        Frame::Answer {
            rank: 0,
            incarnation: 0,
            count: 5,
        }
        .encode(),
        Frame::Truncate { count: 3 }.encode(),
        Frame::Truncated { count: 3 }.encode(),
    ];
    let seeds: Vec<&[u8]> = seeds.iter().map(Vec::as_slice).collect();
    Inputs::new(13).check(&seeds, 50_000, 128, |bytes| {
        if let Ok(frame) = Frame::decode(bytes) {
            assert_eq!(frame.encode(), bytes);
        }
    });
}

#[test]
fn the_cargo_fuzz_seeds_are_frames_of_this_version() {
    let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/msglog_frame");
    let mut count = 0;
    for entry in std::fs::read_dir(seeds).expect("seed directory") {
        let path = entry.expect("seed").path();
        let bytes = std::fs::read(&path).expect("seed bytes");
        let frame = Frame::decode(&bytes).unwrap_or_else(|error| panic!("{path:?}: {error}"));
        assert_eq!(frame.encode(), bytes);
        count += 1;
    }
    assert!(count >= 4, "{count} seeds");
}

#[test]
fn event_log_files_from_random_and_mutated_bytes_recover_a_whole_record_prefix() {
    let mut file = Vec::new();
    append_record(
        &mut file,
        0,
        0,
        &[Entry::Wildcard(Determinant {
            ordinal: 0,
            source: 2,
        })],
    );
    append_record(
        &mut file,
        1,
        0,
        &[
            Entry::Choice(Choice {
                ordinal: 0,
                repeat: 3,
                completed: vec![],
            }),
            Entry::Probe(Probed {
                ordinal: 3,
                source: 0,
                tag: 1,
                length_bytes: 8,
            }),
        ],
    );
    append_record(
        &mut file,
        0,
        1,
        &[Entry::Choice(Choice {
            ordinal: 0,
            repeat: 1,
            completed: vec![1, 0],
        })],
    );
    // Rank 1's checkpoint covered its first determinant.
    append_record(&mut file, 1 | TRIM_RECORD_FLAG, 1, &[]);
    let seeds: [&[u8]; 1] = [&file];
    Inputs::new(31).check(&seeds, 50_000, 256, |bytes| {
        if let Ok((logger, length)) = EventLogger::recover(bytes) {
            assert!(length <= bytes.len());
            let (again, again_length) = EventLogger::recover(&bytes[..length]).expect("a prefix");
            assert_eq!(again_length, length);
            assert_eq!(again.counters, logger.counters);
        }
    });
    // The unmutated file reads back whole.
    let (logger, length) = EventLogger::recover(&file).unwrap();
    assert_eq!(length, file.len());
    assert_eq!(logger.entries(0).len(), 2);
    assert_eq!(logger.entries(1).len(), 1);
    assert_eq!(logger.trimmed(1), 1);
    assert_eq!(logger.stored(1), 2);
}
