//! The replication protocol in production engines (`Engine<Replication>`):
//! fault-free runs, then one or two replica processes killed at many
//! steps; every live process must finish with the fault-free trace.

use resmpi_sim::replicated_engine_job::{
    run_replicated_engine_job, ReplicaKill, ReplicatedEngineJobConfig,
};

#[test]
fn fault_free_replicated_jobs_deliver_every_message_once() {
    for seed in 0..40 {
        for (ranks, replicas) in [(2, 2), (3, 2), (4, 3), (1, 2)] {
            let config = ReplicatedEngineJobConfig::new(seed, ranks, replicas);
            let report =
                run_replicated_engine_job(&config).unwrap_or_else(|problem| panic!("{problem}"));
            assert_eq!(report.duplicates_dropped, 0, "seed {seed}");
            assert_eq!(report.resends, 0, "seed {seed}");
        }
    }
}

#[test]
fn one_replica_killed_at_many_steps_is_masked() {
    let mut resends = 0;
    let mut runs = 0;
    for seed in 0..200u64 {
        for (ranks, replicas) in [(3, 2), (4, 3)] {
            let mut config = ReplicatedEngineJobConfig::new(seed, ranks, replicas);
            // Every other run has rendezvous sizes: a sender may die mid-
            // rendezvous, and its substitute's copy must take over.
            if seed % 2 == 1 {
                config.message_bytes_max = 700;
            }
            let rank = (seed % u64::from(ranks)) as u32;
            let replica = (seed / 3 % u64::from(replicas)) as u32;
            let step = 1 + seed * 37 % 2_500;
            config.kills = vec![ReplicaKill {
                rank,
                replica,
                step,
            }];
            let report =
                run_replicated_engine_job(&config).unwrap_or_else(|problem| panic!("{problem}"));
            resends += report.resends;
            runs += 1;
        }
    }
    // Some kill must have landed with sends unacked (else the sweep tests
    // nothing of the take-over).
    assert!(resends > 0, "no substitute re-sent anything in {runs} runs");
}

#[test]
fn replicas_of_two_different_ranks_killed_are_masked() {
    for seed in 0..40u64 {
        let mut config = ReplicatedEngineJobConfig::new(seed, 4, 2);
        config.kills = vec![
            ReplicaKill {
                rank: 1,
                replica: (seed % 2) as u32,
                step: 1 + seed * 53 % 1_500,
            },
            ReplicaKill {
                rank: 3,
                replica: ((seed / 2) % 2) as u32,
                step: 1 + seed * 29 % 1_500,
            },
        ];
        run_replicated_engine_job(&config).unwrap_or_else(|problem| panic!("{problem}"));
    }
}
