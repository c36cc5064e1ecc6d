//! A PMI client that watches failures the way the library does after
//! `MPI_Init`, for the launcher's failure-notice tests. It speaks the wire
//! protocol itself (on `PMI_FD`, so local ranks only): the runtime's client
//! does not know `cmd=resmpi_watch_failures` yet.
//!
//! `launcher_failure_watcher VICTIM`: every rank sends `cmd=init`; rank
//! VICTIM then sleeps (for `--inject kill:VICTIM@...` to end it); every
//! other rank sends `cmd=resmpi_watch_failures`, prints each line it gets
//! after `cmd=resmpi_watch_failures_ok` as `rank R heard: LINE` until it
//! hears of VICTIM (exit 3 after 20 s without), then sends `cmd=finalize`,
//! waits for `cmd=finalize_ack` and exits 0.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::io::FromRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn main() {
    let fail = |message: &str| -> ! {
        eprintln!("launcher_failure_watcher: {message}");
        std::process::exit(3)
    };
    let victim: u32 = std::env::args()
        .nth(1)
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| fail("usage: launcher_failure_watcher VICTIM"));
    let variable = |name: &str| -> u32 {
        std::env::var(name)
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or_else(|| fail(&format!("{name} is not set (a local rank of mpiexec?)")))
    };
    let rank = variable("PMI_RANK");
    let descriptor = variable("PMI_FD") as i32;
    // SAFETY: PMI_FD is the socketpair end mpiexec gave this process, open
    // and owned by nothing else in it.
    let stream = unsafe { UnixStream::from_raw_fd(descriptor) };
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap_or_else(|error| fail(&error.to_string()));
    let mut writer = stream
        .try_clone()
        .unwrap_or_else(|error| fail(&error.to_string()));
    let mut reader = BufReader::new(stream);
    let mut read_line = || -> String {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(count) if count > 0 => line.trim_end().to_string(),
            _ => fail(&format!("rank {rank}: no line from mpiexec within 20 s")),
        }
    };
    let mut send = |text: &str| {
        writer
            .write_all(text.as_bytes())
            .unwrap_or_else(|error| fail(&error.to_string()))
    };
    send("cmd=init pmi_version=1 pmi_subversion=1\n");
    let reply = read_line();
    if !reply.starts_with("cmd=response_to_init") {
        fail(&format!("unexpected reply to init: {reply}"));
    }
    if rank == victim {
        std::thread::sleep(Duration::from_secs(30));
        fail("the victim was not killed");
    }
    send("cmd=resmpi_watch_failures\n");
    let reply = read_line();
    if reply != "cmd=resmpi_watch_failures_ok" {
        fail(&format!(
            "unexpected reply to resmpi_watch_failures: {reply}"
        ));
    }
    let expected = format!("cmd=resmpi_failure rank={victim} incarnation=0");
    loop {
        let line = read_line();
        println!("rank {rank} heard: {line}");
        if line == expected {
            break;
        }
    }
    send("cmd=finalize\n");
    let reply = read_line();
    if reply != "cmd=finalize_ack" {
        fail(&format!("unexpected reply to finalize: {reply}"));
    }
}
