//! Throughput of the ways a send or receive path can move a fragment into
//! or out of a wire buffer with a CRC32C over it:
//!
//! - `memcpy`: the copy alone (the floor with checksums off),
//! - `crc only`: checksumming data already in place,
//! - `memcpy + crc`: copy, then a second pass to checksum,
//! - `fused`: [`Crc32c::copy_and_update`], copy and checksum in one pass,
//!
//! and the checksum and fused copy of the portable table path, so the cost
//! on CPUs without the instruction is known too.
//!
//! The cases are interleaved in rounds and each reports its best round, so
//! a burst of other load on the machine hits all of them alike instead of
//! skewing one ratio. Run with
//! `cargo run --release -p resmpi-checksum --example crc_bench [ROUNDS [DESTINATION_OFFSET_BYTES]]`
//! (defaults 40 and 0; an offset such as 64 moves the destination off the
//! source's page alignment).

use std::hint::black_box;
use std::time::{Duration, Instant};

use resmpi_checksum::{hardware_accelerated, portable, Crc32c};

const CASES: [&str; 6] = [
    "memcpy",
    "crc only",
    "memcpy + crc",
    "fused",
    "table crc",
    "table fused",
];
const ROUND_DURATION_PER_CASE: Duration = Duration::from_millis(10);

/// Runs `operation` repeatedly for about `duration`; returns GB/s
/// (10^9 bytes of source per second).
fn rate(bytes_per_call: usize, duration: Duration, mut operation: impl FnMut()) -> f64 {
    let mut calls = 0u64;
    let start = Instant::now();
    loop {
        for _ in 0..8 {
            operation();
        }
        calls += 8;
        let elapsed = start.elapsed();
        if elapsed >= duration {
            return calls as f64 * bytes_per_call as f64 / elapsed.as_secs_f64() / 1e9;
        }
    }
}

fn run_case(case: usize, source: &[u8], destination: &mut [u8], duration: Duration) -> f64 {
    let size = source.len();
    match case {
        0 => rate(size, duration, || {
            destination.copy_from_slice(black_box(source));
            black_box(&mut *destination);
        }),
        1 => rate(size, duration, || {
            black_box(Crc32c::new().update(black_box(source)));
        }),
        2 => rate(size, duration, || {
            destination.copy_from_slice(black_box(source));
            black_box(Crc32c::new().update(black_box(&*destination)));
        }),
        3 => rate(size, duration, || {
            black_box(Crc32c::new().copy_and_update(destination, black_box(source)));
            black_box(&mut *destination);
        }),
        4 => rate(size, duration, || {
            black_box(portable::update(Crc32c::new(), black_box(source)));
        }),
        _ => rate(size, duration, || {
            black_box(portable::copy_and_update(
                Crc32c::new(),
                destination,
                black_box(source),
            ));
            black_box(&mut *destination);
        }),
    }
}

fn main() {
    let mut arguments = std::env::args().skip(1);
    let rounds: usize = arguments
        .next()
        .map(|argument| argument.parse().expect("ROUNDS"))
        .unwrap_or(40);
    let destination_offset_bytes: usize = arguments
        .next()
        .map(|argument| argument.parse().expect("DESTINATION_OFFSET_BYTES"))
        .unwrap_or(0);
    println!(
        "hardware_accelerated = {}; GB/s = 10^9 source bytes/s, best of {rounds} interleaved \
         rounds; destination offset {destination_offset_bytes} bytes",
        hardware_accelerated()
    );
    print!("{:>9}", "size");
    for name in CASES {
        print!(" {name:>12}");
    }
    println!(" {:>10} {:>13}", "fused/crc", "fused/(m+c)");

    for size in [4 << 10, 64 << 10, 1 << 20] {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let source: Vec<u8> = (0..size)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let mut destination_backing = vec![0u8; size + destination_offset_bytes];
        let destination = &mut destination_backing[destination_offset_bytes..];

        // Warm up caches and clocks.
        for case in 0..CASES.len() {
            run_case(case, &source, destination, ROUND_DURATION_PER_CASE);
        }
        let mut best = [0.0f64; CASES.len()];
        for _ in 0..rounds {
            for (case, best) in best.iter_mut().enumerate() {
                *best = best.max(run_case(
                    case,
                    &source,
                    destination,
                    ROUND_DURATION_PER_CASE,
                ));
            }
        }
        assert_eq!(*destination, *source);

        print!("{:>5} KiB", size >> 10);
        for value in best {
            print!(" {value:>12.2}");
        }
        println!(" {:>10.3} {:>13.2}", best[3] / best[1], best[3] / best[2]);
    }
}
