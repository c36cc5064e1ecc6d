//! Latency and bandwidth of the TCP path over loopback, two ranks in two
//! threads of one process.
//!
//! Latency: an 8-byte-payload frame bounced back and forth (one-way = half a
//! round trip). Bandwidth: 4 MiB messages sent as 1 MiB frames, a window of
//! 16 messages per acknowledgement.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use resmpi_path::{Path, TcpPath};
use resmpi_wire::{FrameHeader, FrameKind};

const ROUND_TRIP_COUNT: usize = 20_000;
const MESSAGE_BYTES: usize = 4 << 20;
const WINDOW_COUNT: usize = 16;
const WINDOWS_MEASURED_COUNT: usize = 10;

fn send(
    path: &mut TcpPath,
    peer: u32,
    header: &[u8; resmpi_wire::HEADER_LEN_BYTES],
    payload: &[u8],
) {
    while !path.try_send(peer, header, payload).expect("send") {
        path.flush().expect("flush");
    }
}

/// Busy-poll until `count` frames arrived; returns payload bytes received.
fn receive(path: &mut TcpPath, count: usize) -> usize {
    let (mut frames, mut bytes) = (0, 0);
    while frames < count {
        frames += path
            .poll(|_, frame| bytes += frame.len() - resmpi_wire::HEADER_LEN_BYTES)
            .expect("poll");
        path.flush().expect("flush");
    }
    bytes
}

fn run(mut path: TcpPath, me: u32) -> Option<(f64, f64)> {
    let peer = 1 - me;
    let mut header = FrameHeader::new(FrameKind::Eager, me);
    header.payload_len = 8;
    let small = header.to_bytes();
    let started = Instant::now();
    for _ in 0..ROUND_TRIP_COUNT {
        if me == 0 {
            send(&mut path, peer, &small, &[0; 8]);
            receive(&mut path, 1);
        } else {
            receive(&mut path, 1);
            send(&mut path, peer, &small, &[0; 8]);
        }
    }
    let one_way_us = started.elapsed().as_secs_f64() / ROUND_TRIP_COUNT as f64 / 2.0 * 1e6;
    let fragment_bytes = path.max_payload_bytes();
    let source = vec![1u8; MESSAGE_BYTES];
    header.kind = FrameKind::Data;
    header.payload_len = fragment_bytes as u32;
    let big = header.to_bytes();
    let ack = FrameHeader::new(FrameKind::Ack, me).to_bytes();
    let frames_per_window = WINDOW_COUNT * MESSAGE_BYTES / fragment_bytes;
    let mut started = Instant::now();
    for window in 0..WINDOWS_MEASURED_COUNT + 1 {
        if window == 1 {
            started = Instant::now();
        }
        if me == 0 {
            for frame in 0..frames_per_window {
                let offset = (frame * fragment_bytes) % MESSAGE_BYTES;
                send(
                    &mut path,
                    peer,
                    &big,
                    &source[offset..offset + fragment_bytes],
                );
            }
            receive(&mut path, 1);
        } else {
            receive(&mut path, frames_per_window);
            send(&mut path, peer, &ack, &[]);
        }
    }
    let megabytes_per_second = (WINDOWS_MEASURED_COUNT * WINDOW_COUNT * MESSAGE_BYTES) as f64
        / started.elapsed().as_secs_f64()
        / 1e6;
    (me == 0).then_some((one_way_us, megabytes_per_second))
}

fn main() {
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let (zero, zero_address) = TcpPath::bind(0, localhost).expect("bind");
    let (one, one_address) = TcpPath::bind(1, localhost).expect("bind");
    let peers = vec![(0, zero_address), (1, one_address)];
    let secret = b"benchmark secret".to_vec();
    let threads: Vec<_> = [(zero, 0u32), (one, 1u32)]
        .into_iter()
        .map(|(mut path, me)| {
            let (peers, secret) = (peers.clone(), secret.clone());
            std::thread::spawn(move || {
                // One core each, as two ranks would have; otherwise two
                // busy-polling threads may share a core and measure the
                // scheduler's time slice instead of the path.
                // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(me as usize, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                path.connect_all(&peers, &secret).expect("connect");
                run(path, me)
            })
        })
        .collect();
    for thread in threads {
        if let Some((one_way_us, megabytes_per_second)) = thread.join().expect("rank thread") {
            println!(
                "tcp path (loopback): 8-byte one-way latency {one_way_us:.2} us, \
                 4 MiB bandwidth {megabytes_per_second:.0} MB/s"
            );
        }
    }
}
