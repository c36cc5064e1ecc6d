//! A minimal PMI-1 client run under real process managers (MPICH's
//! `mpiexec.hydra` and our `mpiexec`) by the integration tests, to prove the
//! client speaks the wire protocol they speak.
//!
//! Default: put `probe-<rank>`, barrier, get the right neighbour's key, print
//! it, finalize. With arguments it misbehaves on one rank, for launcher
//! tests (the other ranks wait in a barrier the bad rank never joins):
//! - `abort CODE RANK`: RANK calls abort with CODE.
//! - `exit CODE RANK`: RANK exits with CODE before finalize.
//! - `skip-finalize RANK`: RANK exits 0 without finalize.

use resmpi_runtime::{Config, Pmi};
use std::time::Duration;

fn argument(arguments: &[String], index: usize) -> i64 {
    arguments
        .get(index)
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            eprintln!("pmi_probe: argument {index} must be a number");
            std::process::exit(2)
        })
}

pub fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let mut pmi = Pmi::from_env().unwrap_or_else(|error| {
        eprintln!("pmi_probe: {error}");
        std::process::exit(3)
    });
    if let Err(error) = Config::from_env() {
        eprintln!("pmi_probe: {error}");
        std::process::exit(4)
    }
    let rank = pmi.rank();
    let mode = arguments.first().map(String::as_str).unwrap_or("probe");
    let (code, bad_rank) = match mode {
        "abort" | "exit" => (argument(&arguments, 1), argument(&arguments, 2)),
        "skip-finalize" => (0, argument(&arguments, 1)),
        _ => (0, -1),
    };
    if i64::from(rank) == bad_rank {
        match mode {
            "abort" => {
                pmi.abort(code as i32, "pmi_probe was asked to abort");
                std::thread::sleep(Duration::from_secs(20));
                eprintln!("pmi_probe: still alive 20 s after abort");
                std::process::exit(99);
            }
            "exit" => std::process::exit(code as i32),
            _ => std::process::exit(0),
        }
    }
    let value = format!("from-rank-{rank}:a=b");
    pmi.put(&format!("probe-{rank}"), &value).expect("put");
    pmi.barrier().expect("barrier");
    let neighbour = (rank + 1) % pmi.size();
    let got = pmi.get(&format!("probe-{neighbour}")).expect("get");
    println!(
        "rank {rank} of {} (local {} of {}, universe {}, kvs {}) got '{got}' from rank {neighbour}",
        pmi.size(),
        pmi.local_rank(),
        pmi.local_size(),
        pmi.universe_size(),
        pmi.kvs_name()
    );
    pmi.barrier().expect("second barrier");
    pmi.finalize().expect("finalize");
}
