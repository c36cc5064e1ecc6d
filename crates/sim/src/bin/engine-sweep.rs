//! `engine-sweep --seeds 2000 --ranks 4 [--first-seed S] [--kill] [--count-failures]`: run
//! many seeded jobs of production engines (up to `--ranks` ranks; eager
//! with little credit, multi-fragment rendezvous, Ssend, Bsend, cancels,
//! wildcard receives, nonblocking collectives) for CI breadth; exits
//! non-zero with the failing seed on the first violated invariant. With
//! `--kill` every job of two ranks or more loses a random rank at a random
//! step and each survivor is told later (`EngineJobConfig::random_with_kill`);
//! the totals then say how many kills landed mid-rendezvous, mid-collective
//! and with frames in flight both ways, so a sweep that stopped reaching
//! those moments shows it. With `--count-failures` it runs every seed and
//! reports how many failed (how strongly a deliberate mutation is caught).

use resmpi_sim::{run_engine_job, EngineJobConfig, EngineJobReport};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The seed being run, so that a panic inside the engine still names it.
static CURRENT_SEED: AtomicU64 = AtomicU64::new(0);

const USAGE: &str =
    "usage: engine-sweep [--seeds N] [--ranks MAX] [--first-seed S] [--kill] [--count-failures]";

fn main() -> ExitCode {
    let mut seed_count: u64 = 1_000;
    let mut rank_count_max: u32 = 4;
    let mut first_seed: u64 = 0;
    let mut count_failures = false;
    let mut kill = false;
    let mut failure_count = 0u64;
    let mut arguments = std::env::args().skip(1);
    while let Some(flag) = arguments.next() {
        if flag == "--count-failures" {
            count_failures = true;
            continue;
        }
        if flag == "--kill" {
            kill = true;
            continue;
        }
        let value = arguments.next();
        let parsed = match (flag.as_str(), value.as_deref()) {
            ("--seeds", Some(value)) => value.parse().map(|n| seed_count = n).is_ok(),
            ("--ranks", Some(value)) => value.parse().map(|n| rank_count_max = n).is_ok(),
            ("--first-seed", Some(value)) => value.parse().map(|n| first_seed = n).is_ok(),
            _ => false,
        };
        if !parsed || rank_count_max == 0 {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let seed = CURRENT_SEED.load(Ordering::Relaxed);
        eprintln!(
            "FAIL panic in seed {seed}; rerun: engine-sweep --first-seed {seed} --seeds 1 --ranks {rank_count_max}{}",
            if kill { " --kill" } else { "" }
        );
        default_hook(info);
    }));
    let started = Instant::now();
    let mut message_count = 0;
    let mut frames_carried = 0;
    let mut steps_max = 0;
    let mut sends_cancelled = 0;
    let mut receives_cancelled = 0;
    let mut collectives_completed = 0;
    let mut kills = KillTotals::default();
    for seed in first_seed..first_seed + seed_count {
        CURRENT_SEED.store(seed, Ordering::Relaxed);
        let config = if kill {
            EngineJobConfig::random_with_kill(seed, rank_count_max)
        } else {
            EngineJobConfig::random(seed, rank_count_max)
        };
        match run_engine_job(&config) {
            Ok(report) => {
                kills.add(&report);
                message_count += report.message_count;
                frames_carried += report.frames_carried;
                steps_max = steps_max.max(report.steps);
                sends_cancelled += report.sends_cancelled;
                receives_cancelled += report.receives_cancelled;
                collectives_completed += report.collectives_completed;
            }
            Err(failure) if count_failures => {
                if failure_count == 0 {
                    eprintln!("first FAIL {failure}");
                }
                failure_count += 1;
            }
            Err(failure) => {
                eprintln!("FAIL {failure}");
                eprintln!("job: {config:?}");
                eprintln!(
                    "rerun: engine-sweep --first-seed {seed} --seeds 1 --ranks {rank_count_max}{}",
                    if kill { " --kill" } else { "" }
                );
                return ExitCode::FAILURE;
            }
        }
    }
    if failure_count > 0 {
        println!("{failure_count} of {seed_count} seeds failed");
        return ExitCode::FAILURE;
    }
    println!(
        "ok: {seed_count} engine jobs (from seed {first_seed}), up to {rank_count_max} ranks, \
         {message_count} messages, {frames_carried} frames, {sends_cancelled} sends and \
         {receives_cancelled} receives cancelled, {collectives_completed} collectives, \
         longest job {steps_max} steps, {:.1} s wall",
        started.elapsed().as_secs_f64()
    );
    if kill {
        println!(
            "kills: {} jobs lost a rank: {} mid-rendezvous, {} mid-collective, {} with frames in \
             flight both ways; survivors ended {} receives, {} sends and {} collectives with \
             PROC_FAILED; {} frames of the dead overtaken by notices",
            kills.jobs,
            kills.mid_rendezvous,
            kills.mid_collective,
            kills.frames_in_flight_both_ways,
            kills.receives_failed,
            kills.sends_failed,
            kills.collectives_failed,
            kills.frames_overtaken_by_notices
        );
    }
    ExitCode::SUCCESS
}

/// What the kills of a sweep did, summed over its jobs.
#[derive(Default)]
struct KillTotals {
    jobs: u64,
    mid_rendezvous: u64,
    mid_collective: u64,
    frames_in_flight_both_ways: u64,
    receives_failed: usize,
    sends_failed: usize,
    collectives_failed: usize,
    frames_overtaken_by_notices: usize,
}

impl KillTotals {
    fn add(&mut self, report: &EngineJobReport) {
        let Some(landing) = report.kill_landing else {
            return;
        };
        self.jobs += 1;
        self.mid_rendezvous += u64::from(landing.mid_rendezvous);
        self.mid_collective += u64::from(landing.mid_collective);
        self.frames_in_flight_both_ways += u64::from(landing.frames_in_flight_both_ways);
        self.receives_failed += report.receives_failed;
        self.sends_failed += report.sends_failed;
        self.collectives_failed += report.collectives_failed;
        self.frames_overtaken_by_notices += report.frames_overtaken_by_notices;
    }
}
