//! `sim-sweep --seeds 5000 --ranks 4 --rails 3 [--first-seed S]`: run many
//! seeded jobs (up to `--ranks` ranks, 1 to `--rails` rails, loss,
//! duplication, reordering, bit flips, rail outages) for CI breadth; exits
//! non-zero with the failing seed on the first violated invariant.

use resmpi_sim::{run_job, JobConfig};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The seed being run, so that a panic (an assertion inside a state
/// machine; release builds abort) still names its seed.
static CURRENT_SEED: AtomicU64 = AtomicU64::new(0);

const USAGE: &str = "usage: sim-sweep [--seeds N] [--ranks MAX] [--rails MAX] [--first-seed S]";

fn main() -> ExitCode {
    let mut seed_count: u64 = 1_000;
    let mut rank_count_max: u32 = 4;
    let mut rail_count_max: u32 = 3;
    let mut first_seed: u64 = 0;
    let mut arguments = std::env::args().skip(1);
    while let Some(flag) = arguments.next() {
        let value = arguments.next();
        let parsed = match (flag.as_str(), value.as_deref()) {
            ("--seeds", Some(value)) => value.parse().map(|n| seed_count = n).is_ok(),
            ("--ranks", Some(value)) => value.parse().map(|n| rank_count_max = n).is_ok(),
            ("--rails", Some(value)) => value.parse().map(|n| rail_count_max = n).is_ok(),
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
    let mut corrupt_caught = 0;
    let mut rails_failed = 0;
    let mut rails_recovered = 0;
    let mut failover_time_ns = 0;
    let mut rail_outage_count = 0;
    let mut rail_detections_checked = 0;
    for seed in first_seed..first_seed + seed_count {
        CURRENT_SEED.store(seed, Ordering::Relaxed);
        let config = JobConfig::random_with_rails(seed, rank_count_max, rail_count_max);
        match run_job(&config) {
            Ok(report) => {
                message_count += report.message_count;
                retransmission_count += report.links.frames_retransmitted;
                virtual_time_ns_max = virtual_time_ns_max.max(report.virtual_time_ns);
                corrupt_caught += report.corrupt_caught;
                rails_failed += report.links.rails_failed;
                rails_recovered += report.links.rails_recovered;
                failover_time_ns += report.links.failover_time_ns;
                rail_outage_count += config.faults.rail_outages.len();
                rail_detections_checked += report.rail_detections_checked;
            }
            Err(failure) => {
                eprintln!("FAIL {failure}");
                eprintln!("job: {config:?}");
                eprintln!(
                    "rerun: sim-sweep --first-seed {seed} --seeds 1 --ranks {rank_count_max} --rails {rail_count_max}"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "ok: {seed_count} seeds (from {first_seed}), up to {rank_count_max} ranks and {rail_count_max} rails, \
         {message_count} messages, {retransmission_count} retransmissions, {corrupt_caught} corrupt frames caught, \
         {rail_outage_count} rail outages ({rail_detections_checked} link detections timed), {rails_failed} rails marked down / {rails_recovered} back up, \
         {failover_time_ns} ns in failover, longest job {virtual_time_ns_max} ns virtual, {:.1} s wall",
        started.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}
