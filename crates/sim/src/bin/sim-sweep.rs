//! `sim-sweep --seeds 5000 --ranks 4 [--first-seed S]`: run many seeded jobs
//! for CI breadth; exits non-zero with the failing seed on the first
//! violated invariant.

use resmpi_sim::{run_job, JobConfig};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The seed being run, so that a panic (an assertion inside a state
/// machine; release builds abort) still names its seed.
static CURRENT_SEED: AtomicU64 = AtomicU64::new(0);

const USAGE: &str = "usage: sim-sweep [--seeds N] [--ranks MAX] [--first-seed S]";

fn main() -> ExitCode {
    let mut seed_count: u64 = 1_000;
    let mut rank_count_max: u32 = 4;
    let mut first_seed: u64 = 0;
    let mut arguments = std::env::args().skip(1);
    while let Some(flag) = arguments.next() {
        let value = arguments.next();
        let parsed = match (flag.as_str(), value.as_deref()) {
            ("--seeds", Some(value)) => value.parse().map(|n| seed_count = n).is_ok(),
            ("--ranks", Some(value)) => value.parse().map(|n| rank_count_max = n).is_ok(),
            ("--first-seed", Some(value)) => value.parse().map(|n| first_seed = n).is_ok(),
            _ => false,
        };
        if !parsed {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let seed = CURRENT_SEED.load(Ordering::Relaxed);
        eprintln!("FAIL panic in seed {seed}; rerun: sim-sweep --first-seed {seed} --seeds 1");
        default_hook(info);
    }));
    let started = Instant::now();
    let mut message_count = 0;
    let mut retransmission_count = 0;
    let mut virtual_time_ns_max = 0;
    for seed in first_seed..first_seed + seed_count {
        CURRENT_SEED.store(seed, Ordering::Relaxed);
        match run_job(&JobConfig::random(seed, rank_count_max)) {
            Ok(report) => {
                message_count += report.message_count;
                retransmission_count += report.links.frames_retransmitted;
                virtual_time_ns_max = virtual_time_ns_max.max(report.virtual_time_ns);
            }
            Err(failure) => {
                eprintln!("FAIL {failure}");
                eprintln!("job: {:?}", JobConfig::random(seed, rank_count_max));
                eprintln!(
                    "rerun: sim-sweep --first-seed {seed} --seeds 1 --ranks {rank_count_max}"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "ok: {seed_count} seeds (from {first_seed}), up to {rank_count_max} ranks, {message_count} messages, \
         {retransmission_count} retransmissions, longest job {virtual_time_ns_max} ns virtual, {:.1} s wall",
        started.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}
