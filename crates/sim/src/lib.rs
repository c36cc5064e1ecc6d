//! Deterministic simulator for resmpi's sans-IO layers.
//!
//! Why: retransmission, duplicate drop and matching bugs hide in rare
//! interleavings that real networks produce once a month. Here one `u64`
//! seed fixes the whole run — workload, losses, duplicates, delays, receive
//! patterns — so a failing seed is a reproducible test case, and a sweep
//! over thousands of seeds explores interleavings cheaply (TigerBeetle's
//! VOPR, quinn's `Pair`).
//!
//! A job ([`run_job`]) has N ranks, a [`resmpi_reliable::PeerLink`] from every
//! rank to every other and a [`resmpi_matching::Matcher`] per rank, over a
//! [`Network`] that applies a [`FaultModel`] (loss, duplication, reordering,
//! ack loss, cut links, bit flips, rails failing and coming back) on a
//! virtual clock. A flipped bit is caught by the receiver's checksum check,
//! modelled here: the frame is dropped before the link sees it. The [`Checker`] is the oracle:
//! every message delivered exactly once, intact, in send order per (source,
//! destination); matching honours patterns (including ANY_SOURCE/ANY_TAG),
//! non-overtaking and posted-receive order; sender and receiver buffers stay
//! within the window; the job ends within a bounded virtual time.
//!
//! An engine job ([`run_engine_job`]) runs N production
//! `resmpi_core::Engine`s (eager with credit, rendezvous, Ssend, cancel,
//! collective schedules) over in-memory paths under a seeded scheduler;
//! the [`EngineChecker`] judges what the application would see. See
//! `engine_job` for the scheduler and `engine_checker` for the invariants.
//!
//! An agreement job ([`run_agreement_job`]) runs the production ULFM
//! agreement table of every participant with crashes placed before any
//! frame of the protocol, and checks uniform agreement, validity and
//! termination.
//!
//! A replication job ([`replication_job::run_replication_job`]) runs the
//! production SDR-MPI state machine (`resmpi_replication::Replica`) of
//! every replica of every rank with replicas killed at any step, and
//! checks exactly-once, in-order delivery, no hang, and the fault-free
//! application trace on every live replica; with `recovery`, substitutes
//! fork new replicas that re-join at any step (the recovery protocol,
//! which the engine does not drive yet).
//!
//! This crate owns no protocol logic; it only drives and judges the real
//! state machines.
#![warn(missing_docs)]

pub mod agreement_job;
pub mod checker;
pub mod engine_checker;
pub mod engine_job;
pub mod engine_plan;
pub mod faults;
pub mod job;
pub mod network;
pub mod replicated_engine_job;
pub mod replication_job;
pub mod rng;
pub mod workload;

pub use agreement_job::{
    run_agreement_job, AgreementCrash, AgreementJobConfig, AgreementJobReport,
};
pub use checker::Checker;
pub use engine_checker::EngineChecker;
pub use engine_job::{
    run_engine_job, EngineJobConfig, EngineJobFailure, EngineJobReport, Kill, KillLanding,
};
pub use faults::{FaultModel, RailOutage};
pub use job::{
    run_job, simulation_link_config, ConsumerStall, JobConfig, JobFailure, JobReport, RailEvent,
};
pub use network::{Arrival, Network, NetworkStats, TransmitOutcome, SIM_RAIL_COUNT_MAX};
pub use rng::SplitMix64;

/// Run `seed_count` random jobs (seeds `first_seed..first_seed + seed_count`,
/// each with up to `rank_count_max` ranks, up to `rail_count_max` rails and a
/// random fault mix); returns the reports, or the first failure.
pub fn sweep(
    first_seed: u64,
    seed_count: u64,
    rank_count_max: u32,
    rail_count_max: u32,
) -> Result<Vec<JobReport>, JobFailure> {
    (first_seed..first_seed + seed_count)
        .map(|seed| {
            run_job(&JobConfig::random_with_rails(
                seed,
                rank_count_max,
                rail_count_max,
            ))
        })
        .collect()
}
