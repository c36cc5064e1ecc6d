//! Recovery of lost replicas (issue 12 item 5) in the protocol simulator:
//! the substitute of a dead replica forks a new one, which re-joins while
//! the job runs. The production `resmpi_replication::Replica` decides from
//! the per-channel logical numbers what the new replica must receive, so
//! every case runs at R = 2 and R = 3 and with several ranks recovering at
//! once. Each live process (new ones included) must end with the
//! fault-free application trace, every message delivered exactly once and
//! in order, and no hang (`ReplicationOutcome::violations`).

use resmpi_replication::Process;
use resmpi_sim::replication_job::{
    run_replication_job, PlannedKill, ReplicationJob, ReplicationOutcome,
};
use resmpi_sim::rng::SplitMix64;

fn kill(rank: u32, replica: u32, at_step: u64) -> PlannedKill {
    PlannedKill {
        process: Process { rank, replica },
        at_step,
    }
}

fn run(
    rank_count: u32,
    replica_count: u32,
    kills: Vec<PlannedKill>,
    seed: u64,
) -> ReplicationOutcome {
    let job = ReplicationJob {
        rank_count,
        replica_count,
        rounds: 4,
        kills,
        seed,
        recovery: true,
    };
    let outcome = run_replication_job(&job);
    assert!(
        outcome.violations.is_empty(),
        "seed {seed} ranks {rank_count} replicas {replica_count} kills {:?}: {:#?}",
        job.kills,
        outcome.violations
    );
    outcome
}

/// Steps a fault-free job of this shape takes (kills are planned inside).
fn length(rank_count: u32, replica_count: u32, seed: u64) -> u64 {
    run(rank_count, replica_count, Vec::new(), seed).steps
}

#[test]
fn a_killed_replica_is_forked_again_and_the_rank_ends_with_every_replica() {
    let mut recovered = 0;
    for replica_count in 2..=3 {
        for rank_count in 1..=4 {
            for seed in 0..40 {
                let steps = length(rank_count, replica_count, seed);
                let rank = (seed % u64::from(rank_count)) as u32;
                let replica = (seed % u64::from(replica_count)) as u32;
                let at_step = 1 + seed * 7919 % steps.max(1);
                let outcome = run(
                    rank_count,
                    replica_count,
                    vec![kill(rank, replica, at_step)],
                    seed,
                );
                assert!(!outcome.rank_really_lost);
                if outcome.forks > 0 {
                    recovered += 1;
                    // The rank is whole again: every process lives.
                    assert_eq!(
                        outcome.traces.len(),
                        (rank_count * replica_count) as usize,
                        "seed {seed}"
                    );
                }
            }
        }
    }
    assert!(recovered > 100, "only {recovered} runs recovered a replica");
}

#[test]
fn a_replica_killed_at_every_step_of_a_small_job_is_recovered() {
    for replica_count in 2..=3 {
        let steps = length(2, replica_count, 5);
        for at_step in 1..=steps {
            for replica in 0..replica_count {
                run(
                    2,
                    replica_count,
                    vec![kill(1, replica, at_step)],
                    5 + at_step,
                );
            }
        }
    }
}

#[test]
fn a_recovered_replica_survives_the_death_of_its_forker() {
    // Replica 0 dies, its substitute (replica 1) forks a new replica 0,
    // then replica 1 dies: the new one must carry the rank alone (R = 2),
    // including what the forker had still to send when it forked.
    let mut carried = 0;
    for rank_count in 2..=4 {
        for seed in 0..300 {
            let mut rng = SplitMix64::new(seed);
            let steps = length(rank_count, 2, seed);
            let rank = rng.below(u64::from(rank_count)) as u32;
            let first = 1 + rng.below(steps / 2);
            let second = first + 1 + rng.below(steps / 2);
            let outcome = run(
                rank_count,
                2,
                vec![kill(rank, 0, first), kill(rank, 1, second)],
                seed,
            );
            if !outcome.rank_really_lost && outcome.forks > 0 && second <= outcome.steps {
                carried += 1;
            }
        }
    }
    assert!(
        carried > 100,
        "only {carried} runs had the new replica carry the rank"
    );
}

#[test]
fn a_new_replica_killed_while_it_rejoins_is_recovered_again() {
    for replica_count in 2..=3 {
        for seed in 0..200 {
            let mut rng = SplitMix64::new(seed ^ 0x1e1e);
            let steps = length(3, replica_count, seed);
            let first = 1 + rng.below(steps / 2);
            // The same slot again, soon after: often the new incarnation
            // mid re-join (or the old one, when no fork happened yet).
            let second = first + 1 + rng.below(120);
            run(
                3,
                replica_count,
                vec![kill(2, 1, first), kill(2, 1, second)],
                seed,
            );
        }
    }
}

#[test]
fn a_host_down_with_one_replica_of_every_rank_is_recovered_everywhere() {
    for replica_count in 2..=3 {
        for rank_count in 2..=4 {
            for seed in 0..100 {
                let mut rng = SplitMix64::new(seed ^ 0x4057);
                let steps = length(rank_count, replica_count, seed);
                let at_step = 1 + rng.below(steps);
                let replica = rng.below(u64::from(replica_count)) as u32;
                let kills = (0..rank_count)
                    .map(|rank| kill(rank, replica, at_step))
                    .collect();
                let outcome = run(rank_count, replica_count, kills, seed);
                assert!(!outcome.rank_really_lost);
            }
        }
    }
}

#[test]
fn random_cascades_of_deaths_and_recoveries_keep_every_trace() {
    let sweep: u64 = std::env::var("RESMPI_SIM_SWEEP")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(3_000);
    for seed in 0..sweep {
        let mut rng = SplitMix64::new(seed ^ 0xcafe);
        let rank_count = rng.between(2, 4) as u32;
        let replica_count = rng.between(2, 3) as u32;
        let steps = length(rank_count, replica_count, seed);
        let kills = (0..rng.between(1, 6))
            .map(|_| {
                kill(
                    rng.below(u64::from(rank_count)) as u32,
                    rng.below(u64::from(replica_count)) as u32,
                    1 + rng.below(steps),
                )
            })
            .collect();
        run(rank_count, replica_count, kills, seed);
    }
}
