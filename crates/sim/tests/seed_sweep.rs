//! Random jobs over many seeds: the breadth test. `RESMPI_SIM_SEEDS=N` runs
//! N seeds instead of the default 300; `RESMPI_SIM_FIRST_SEED=S` starts at S.
//! A failure names its seed; rerun it alone with
//! `RESMPI_SIM_FIRST_SEED=S RESMPI_SIM_SEEDS=1`.

use resmpi_sim::{run_job, JobConfig};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

#[test]
fn random_fault_mixes_deliver_everything_in_order_for_every_seed() {
    let first_seed = env_u64("RESMPI_SIM_FIRST_SEED", 0);
    let seed_count = env_u64("RESMPI_SIM_SEEDS", 300);
    let mut message_count = 0;
    let mut retransmission_count = 0;
    for seed in first_seed..first_seed + seed_count {
        match run_job(&JobConfig::random(seed, 5)) {
            Ok(report) => {
                message_count += report.message_count;
                retransmission_count += report.links.frames_retransmitted;
            }
            Err(failure) => panic!("{failure}\nrerun: RESMPI_SIM_FIRST_SEED={seed} RESMPI_SIM_SEEDS=1"),
        }
    }
    println!("{seed_count} seeds, {message_count} messages, {retransmission_count} retransmissions: all invariants held");
}
