//! Replicated engines where deaths cascade over many ranks at once: up to
//! R - 1 replicas of every rank killed at close steps (the pattern of a
//! real R = 3 run in which processes exited one after another), and a host
//! holding one replica of every rank going down.

use resmpi_sim::replicated_engine_job::{
    run_replicated_engine_job, ReplicaKill, ReplicatedEngineJobConfig,
};
use resmpi_sim::rng::SplitMix64;

/// Runs `RESMPI_SIM_SWEEP` (default 2000) seeds, each job made by `job`
/// from the seed and a generator salted with `salt`; every run must mask
/// its deaths (no error, no panic).
fn sweep_masks(salt: u64, job: impl Fn(u64, &mut SplitMix64) -> ReplicatedEngineJobConfig) {
    let sweep: u64 = std::env::var("RESMPI_SIM_SWEEP")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(2_000);
    let mut failures = Vec::new();
    for seed in 0..sweep {
        let mut rng = SplitMix64::new(seed ^ salt);
        let config = job(seed, &mut rng);
        let outcome = std::panic::catch_unwind(|| run_replicated_engine_job(&config));
        match outcome {
            Ok(Ok(_)) => {}
            Ok(Err(problem)) => failures.push(format!("seed {seed} {:?}: {problem}", config.kills)),
            Err(panic) => failures.push(format!(
                "seed {seed} {:?}: panicked: {:?}",
                config.kills,
                panic.downcast_ref::<String>()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A job of 2 to 4 ranks × `replicas` with bursts, rendezvous-sized
/// messages and random notice and delivery delays.
fn busy_job(seed: u64, rng: &mut SplitMix64, replicas: u32) -> ReplicatedEngineJobConfig {
    let ranks = rng.between(2, 4) as u32;
    let mut config = ReplicatedEngineJobConfig::new(seed, ranks, replicas);
    config.ring_burst = rng.between(1, 3) as u32;
    config.message_bytes_max = 700;
    config.rounds = 6;
    config.notice_delay_steps_max = rng.between(1, 150);
    config.delivery_delay_steps_max = rng.between(1, 20);
    config
}

#[test]
fn deaths_cascading_over_every_rank_are_masked() {
    sweep_masks(0xca5cade, |seed, rng| {
        let mut config = busy_job(seed, rng, 3);
        let start = rng.between(1, 3_000);
        for rank in 0..config.ranks {
            let count = rng.below(3) as u32;
            let first = rng.below(3) as u32;
            for kill in 0..count {
                config.kills.push(ReplicaKill {
                    rank,
                    replica: (first + kill) % 3,
                    step: start + rng.below(600),
                });
            }
        }
        config
    });
}

/// A host holding replica k of every rank goes down: all of them die at
/// one step and each survivor gets the notices as one burst, so a
/// substitute's take-over of one death can be overtaken by the next
/// notice (the re-send it queued is no longer needed). A real R = 2 run
/// with a host down panicked this way ("re-send ... never started").
#[test]
fn a_host_down_with_one_replica_of_every_rank_is_masked() {
    sweep_masks(0x4057d0, |seed, rng| {
        let replicas = rng.between(2, 3) as u32;
        let mut config = busy_job(seed, rng, replicas);
        let step = rng.between(1, 3_000);
        let replica = rng.below(u64::from(replicas)) as u32;
        for rank in 0..config.ranks {
            config.kills.push(ReplicaKill {
                rank,
                replica,
                step,
            });
        }
        config
    });
}
