//! Latency and bandwidth of the shm path between two processes (fork).
//!
//! Latency: an 8-byte-payload frame bounced back and forth; one-way latency
//! is half the round trip. Bandwidth: 4 MiB messages streamed as fragments
//! (copied in from a source buffer by the sender, copied out to a destination
//! buffer by the receiver, as an MPI library would), a window of messages per
//! acknowledgement, like osu_bw.
//!
//! Usage: shm_pingpong [ring_bytes] [fragment_payload_bytes] [--pin]

use std::time::Instant;

use resmpi_path::{Path, ShmPath, ShmSegment};
use resmpi_wire::{FrameHeader, FrameKind};

const LATENCY_WARMUP_COUNT: usize = 20_000;
const LATENCY_BATCH_COUNT: usize = 200;
const LATENCY_ITERATIONS_PER_BATCH: usize = 1_000;
const MESSAGE_BYTES: usize = 4 << 20;
const BANDWIDTH_WINDOW_COUNT: usize = 16;
const BANDWIDTH_WARMUP_COUNT: usize = 3;
const BANDWIDTH_ITERATION_COUNT: usize = 20;

fn pin_to_cpu(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn send_spinning(
    path: &mut ShmPath,
    peer: u32,
    header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
    payload: &[u8],
) {
    while !path.try_send(peer, header, payload).expect("send") {
        std::hint::spin_loop();
    }
}

/// Spin until one frame arrives; returns its payload length.
fn receive_one(path: &mut ShmPath) -> usize {
    let mut length = 0;
    while path
        .poll(|_, frame| length = frame.len() - resmpi_wire::HEADER_LEN_BYTES)
        .expect("poll")
        == 0
    {
        std::hint::spin_loop();
    }
    length
}

/// One-way latency in seconds per batch of round trips, sorted. Batches,
/// because on a shared machine the best and the median batch say more than
/// one average that includes other processes' time slices.
fn latency(path: &mut ShmPath, me: u32) -> Vec<f64> {
    let peer = 1 - me;
    let payload = [0u8; 8];
    let mut header = FrameHeader::new(FrameKind::Eager, me);
    header.payload_len = payload.len() as u32;
    let header = header.to_bytes();
    let round_trip = |path: &mut ShmPath| {
        if me == 0 {
            send_spinning(path, peer, &header, &payload);
            receive_one(path);
        } else {
            receive_one(path);
            send_spinning(path, peer, &header, &payload);
        }
    };
    for _ in 0..LATENCY_WARMUP_COUNT {
        round_trip(path);
    }
    let mut batches: Vec<f64> = (0..LATENCY_BATCH_COUNT)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..LATENCY_ITERATIONS_PER_BATCH {
                round_trip(path);
            }
            started.elapsed().as_secs_f64() / LATENCY_ITERATIONS_PER_BATCH as f64 / 2.0
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    batches
}

/// Bandwidth in MB/s per window of messages, sorted.
fn bandwidth(path: &mut ShmPath, me: u32, fragment_bytes: usize) -> Vec<f64> {
    let peer = 1 - me;
    let source = vec![1u8; MESSAGE_BYTES];
    let mut destination = vec![0u8; MESSAGE_BYTES];
    let mut header = FrameHeader::new(FrameKind::Data, me);
    let mut windows = Vec::new();
    for iteration in 0..BANDWIDTH_WARMUP_COUNT + BANDWIDTH_ITERATION_COUNT {
        let started = Instant::now();
        if me == 0 {
            for _ in 0..BANDWIDTH_WINDOW_COUNT {
                let mut offset = 0;
                while offset < MESSAGE_BYTES {
                    let length = fragment_bytes.min(MESSAGE_BYTES - offset);
                    header.aux = offset as u64;
                    header.payload_len = length as u32;
                    let frame_header = header.to_bytes();
                    // Copy straight from the user buffer into the ring.
                    while !path
                        .try_send_with(peer, resmpi_wire::HEADER_LEN_BYTES + length, |frame| {
                            frame[..resmpi_wire::HEADER_LEN_BYTES].copy_from_slice(&frame_header);
                            frame[resmpi_wire::HEADER_LEN_BYTES..]
                                .copy_from_slice(&source[offset..offset + length]);
                        })
                        .expect("send")
                    {
                        std::hint::spin_loop();
                    }
                    offset += length;
                }
            }
            receive_one(path);
        } else {
            let total = BANDWIDTH_WINDOW_COUNT * MESSAGE_BYTES;
            let mut received = 0;
            while received < total {
                path.poll(|_, frame| {
                    let offset = u64::from_le_bytes(frame[48..56].try_into().unwrap()) as usize;
                    let payload = &frame[resmpi_wire::HEADER_LEN_BYTES..];
                    destination[offset..offset + payload.len()].copy_from_slice(payload);
                    received += payload.len();
                })
                .expect("poll");
            }
            let ack = FrameHeader::new(FrameKind::Ack, me).to_bytes();
            send_spinning(path, peer, &ack, &[]);
        }
        if iteration >= BANDWIDTH_WARMUP_COUNT {
            windows.push(
                (BANDWIDTH_WINDOW_COUNT * MESSAGE_BYTES) as f64
                    / started.elapsed().as_secs_f64()
                    / 1e6,
            );
        }
    }
    assert!(me == 0 || destination.iter().all(|&byte| byte == 1));
    windows.sort_by(f64::total_cmp);
    windows
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let numbers: Vec<usize> = arguments
        .iter()
        .skip(1)
        .filter_map(|argument| argument.parse().ok())
        .collect();
    let ring_bytes = numbers.first().copied().unwrap_or(1 << 20);
    let fragment_bytes_requested = numbers.get(1).copied().unwrap_or(64 << 10);
    let pin = arguments.iter().any(|argument| argument == "--pin");
    let segments = [
        ShmSegment::create(0, 2, ring_bytes).expect("create segment 0"),
        ShmSegment::create(1, 2, ring_bytes).expect("create segment 1"),
    ];
    // Both segments are created before fork, so both processes hold both
    // descriptors under the parent's pid and numbers.
    let locators = [(0, segments[0].locator()), (1, segments[1].locator())];
    // SAFETY: single-threaded at this point; the child only runs this
    // program's own code and leaves through _exit.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    let me: u32 = if child == 0 { 1 } else { 0 };
    if pin {
        pin_to_cpu(me as usize);
    }
    let [segment_zero, segment_one] = segments;
    let own = if me == 0 { segment_zero } else { segment_one };
    let mut path = ShmPath::attach(own, me, &locators).expect("attach");
    let fragment_bytes = fragment_bytes_requested.min(path.max_payload_bytes());
    let one_way_seconds = latency(&mut path, me);
    let megabytes_per_second = bandwidth(&mut path, me, fragment_bytes);
    if me == 0 {
        println!(
            "shm path: ring {} KiB, fragment {} KiB, pinned {pin}: 8-byte one-way latency best {:.3} us, \
             median {:.3} us; 4 MiB bandwidth best {:.0} MB/s, median {:.0} MB/s",
            ring_bytes >> 10,
            fragment_bytes >> 10,
            one_way_seconds[0] * 1e6,
            one_way_seconds[one_way_seconds.len() / 2] * 1e6,
            megabytes_per_second[megabytes_per_second.len() - 1],
            megabytes_per_second[megabytes_per_second.len() / 2],
        );
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(child, &mut status, 0) };
    } else {
        drop(path);
        // SAFETY: leave the child without running the parent's atexit work.
        unsafe { libc::_exit(0) };
    }
}
