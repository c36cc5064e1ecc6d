//! Replication (SDR-MPI, Algorithm 1) under crashes: the production
//! `resmpi_replication::Replica` of every process, killed at every step of
//! small jobs. Each scenario states what must hold; the oracle is
//! `ReplicationOutcome::violations` (exactly-once in-order delivery to
//! every live replica, the fault-free application trace, no hang).

use resmpi_replication::Process;
use resmpi_sim::replication_job::{
    kills_a_whole_rank, run_replication_job, PlannedKill, ReplicationJob,
};

fn job(rank_count: u32, replica_count: u32, kills: Vec<PlannedKill>, seed: u64) -> ReplicationJob {
    ReplicationJob {
        rank_count,
        replica_count,
        rounds: 4,
        kills,
        seed,
        recovery: false,
    }
}

fn kill(rank: u32, replica: u32, at_step: u64) -> PlannedKill {
    PlannedKill {
        process: Process { rank, replica },
        at_step,
    }
}

fn assert_masked(job: &ReplicationJob) -> u64 {
    let outcome = run_replication_job(job);
    assert!(
        outcome.violations.is_empty(),
        "seed {} kills {:?}: {:#?}",
        job.seed,
        job.kills,
        outcome.violations
    );
    assert!(outcome.lost_ranks.is_empty(), "{job:?}");
    // A kill planned past the job's end never happens.
    let killed = job
        .kills
        .iter()
        .filter(|kill| kill.at_step <= outcome.steps)
        .count();
    let live = (job.rank_count * job.replica_count) as usize - killed;
    assert_eq!(outcome.traces.len(), live, "{job:?}");
    outcome.steps
}

#[test]
fn fault_free_replicated_jobs_give_every_replica_the_unreplicated_trace() {
    for replica_count in 1..=3 {
        for rank_count in 1..=4 {
            for seed in 0..20 {
                assert_masked(&job(rank_count, replica_count, Vec::new(), seed));
            }
        }
    }
}

#[test]
fn one_replica_killed_at_every_step_is_masked_r2() {
    let mut duplicates = 0;
    for seed in 0..6 {
        let steps = assert_masked(&job(3, 2, Vec::new(), seed));
        for at_step in 0..=steps {
            for (rank, replica) in [(0, 0), (1, 1), (2, 0)] {
                let planned = job(3, 2, vec![kill(rank, replica, at_step)], seed);
                assert_masked(&planned);
                duplicates += run_replication_job(&planned).duplicates_dropped;
            }
        }
    }
    // The sweep reached the substitute's re-send of something the dead
    // replica had already delivered (else it proves less than it says).
    assert!(duplicates > 0);
}

#[test]
fn one_replica_killed_at_every_step_is_masked_r3() {
    for seed in 0..3 {
        let steps = assert_masked(&job(3, 3, Vec::new(), seed));
        for at_step in 0..=steps {
            assert_masked(&job(3, 3, vec![kill(0, 1, at_step)], seed));
            assert_masked(&job(3, 3, vec![kill(2, 2, at_step)], seed));
        }
    }
}

#[test]
fn two_replicas_of_one_rank_killed_at_seeded_steps_leave_the_third_to_carry_it_r3() {
    for seed in 0..200u64 {
        let steps = assert_masked(&job(4, 3, Vec::new(), seed));
        let first = seed * 7 % (steps + 1);
        let second = seed * 13 % (steps + 1);
        assert_masked(&job(
            4,
            3,
            vec![kill(1, 0, first), kill(1, 2, second)],
            seed,
        ));
    }
}

#[test]
fn replicas_of_different_ranks_killed_together_or_apart_are_masked() {
    for seed in 0..200u64 {
        let steps = assert_masked(&job(4, 2, Vec::new(), seed));
        let first = seed * 11 % (steps + 1);
        let second = seed * 5 % (steps + 1);
        assert_masked(&job(
            4,
            2,
            vec![kill(0, 1, first), kill(2, 0, second), kill(3, 1, second)],
            seed,
        ));
    }
}

#[test]
fn losing_every_replica_of_a_rank_fails_the_job_naming_that_rank_without_hanging() {
    for seed in 0..100u64 {
        let steps = assert_masked(&job(3, 2, Vec::new(), seed));
        let kills = vec![
            kill(2, 0, seed % (steps + 1)),
            kill(2, 1, seed * 3 % (steps + 1)),
        ];
        assert_eq!(kills_a_whole_rank(&kills, 2), Some(2));
        let outcome = run_replication_job(&job(3, 2, kills, seed));
        let finished_first = outcome.violations.is_empty() && outcome.lost_ranks.is_empty();
        // Killed after its last send mattered, the job may still end well;
        // otherwise it must end by naming rank 2, never by hanging.
        assert!(
            finished_first || outcome.lost_ranks.iter().eq([2].iter()),
            "seed {seed}: {outcome:#?}"
        );
        assert!(
            !outcome
                .violations
                .iter()
                .any(|violation| violation.contains("hang") || violation.contains("no end")),
            "seed {seed}: {outcome:#?}"
        );
    }
}
