//! Random jobs over many seeds: the breadth test, with 1 to 3 rails, rail
//! outages and bit flips. `RESMPI_SIM_SEEDS=N` runs N seeds instead of the
//! default 300; `RESMPI_SIM_FIRST_SEED=S` starts at S.
//! A failure names its seed; rerun it alone with
//! `RESMPI_SIM_FIRST_SEED=S RESMPI_SIM_SEEDS=1`.

use resmpi_sim::{run_job, JobConfig};
use std::sync::atomic::{AtomicU64, Ordering};

/// The seed being run, for the panic hook: a panic inside a state machine
/// (an assertion) must still name its seed.
static CURRENT_SEED: AtomicU64 = AtomicU64::new(0);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[test]
fn random_fault_mixes_deliver_everything_in_order_for_every_seed() {
    let first_seed = env_u64("RESMPI_SIM_FIRST_SEED", 0);
    let seed_count = env_u64("RESMPI_SIM_SEEDS", 300);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let seed = CURRENT_SEED.load(Ordering::Relaxed);
        eprintln!("panic in seed {seed}; rerun: RESMPI_SIM_FIRST_SEED={seed} RESMPI_SIM_SEEDS=1");
        default_hook(info);
    }));
    let mut message_count = 0;
    let mut retransmission_count = 0;
    for seed in first_seed..first_seed + seed_count {
        CURRENT_SEED.store(seed, Ordering::Relaxed);
        match run_job(&JobConfig::random_with_rails(seed, 5, 3)) {
            Ok(report) => {
                message_count += report.message_count;
                retransmission_count += report.links.frames_retransmitted;
            }
            Err(failure) => {
                panic!("{failure}\nrerun: RESMPI_SIM_FIRST_SEED={seed} RESMPI_SIM_SEEDS=1")
            }
        }
    }
    println!("{seed_count} seeds, {message_count} messages, {retransmission_count} retransmissions: all invariants held");
}
