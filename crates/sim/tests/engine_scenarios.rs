//! Fixed-seed scenarios of production engines under the simulator; each
//! name says what must hold, and each asserts that the scenario really
//! exercised what it names (a scenario that silently stopped producing
//! rendezvous or cancels would otherwise pass forever).

use resmpi_sim::{run_engine_job, EngineJobConfig, EngineJobReport};

const EAGER: usize = 1;
const REQUEST_TO_SEND: usize = 2;
const DATA: usize = 4;
const SYNC_ACK: usize = 6;
const CONTROL: usize = 7;

fn run(config: &EngineJobConfig) -> EngineJobReport {
    match run_engine_job(config) {
        Ok(report) => report,
        Err(failure) => panic!("{failure}\njob: {config:?}"),
    }
}

/// Several seeds of one configuration, their reports summed.
fn run_seeds(
    seeds: std::ops::Range<u64>,
    adjust: impl Fn(&mut EngineJobConfig),
) -> EngineJobReport {
    let mut total = EngineJobReport::default();
    for seed in seeds {
        let mut config = EngineJobConfig::random(seed, 4);
        adjust(&mut config);
        let report = run(&config);
        total.message_count += report.message_count;
        total.frames_carried += report.frames_carried;
        for (sum, count) in total.frames_by_kind.iter_mut().zip(report.frames_by_kind) {
            *sum += count;
        }
        total.sends_cancelled += report.sends_cancelled;
        total.receives_cancelled += report.receives_cancelled;
        total.collectives_completed += report.collectives_completed;
        total.steps = total.steps.max(report.steps);
    }
    total
}

#[test]
fn engine_jobs_hold_every_invariant_over_two_hundred_seeds() {
    let report = run_seeds(0..200, |_| {});
    assert!(report.message_count > 5_000, "{report:?}");
    assert!(report.frames_by_kind[EAGER] > 0 && report.frames_by_kind[DATA] > 0);
}

#[test]
fn credit_starved_senders_fall_back_to_rendezvous_and_lose_nothing() {
    let report = run_seeds(0..40, |config| {
        config.shape.eager_limit_bytes = 256;
        // One small message's worth of credit per receiver.
        config.eager_credit_bytes = 80;
        config.shape.sends_per_rank = 24;
    });
    // Credit comes back in control frames and most messages that could go
    // eagerly had to announce themselves instead.
    assert!(report.frames_by_kind[CONTROL] > 0, "{report:?}");
    assert!(
        report.frames_by_kind[REQUEST_TO_SEND] > report.frames_by_kind[EAGER],
        "{report:?}"
    );
}

#[test]
fn multi_fragment_rendezvous_arrives_intact_through_a_one_frame_path() {
    let report = run_seeds(0..40, |config| {
        config.shape.eager_limit_bytes = 8;
        config.shape.max_payload_bytes = 128;
        config.outgoing_frames_max = 1;
    });
    // Messages up to 4 KiB in 128-byte fragments.
    assert!(
        report.frames_by_kind[DATA] > 4 * report.frames_by_kind[REQUEST_TO_SEND],
        "{report:?}"
    );
}

#[test]
fn cancelled_sends_and_receives_end_cancelled_or_delivered_never_both_never_neither() {
    let report = run_seeds(0..60, |config| config.shape.cancel_rate = 0.6);
    assert!(report.sends_cancelled > 0, "{report:?}");
    assert!(report.receives_cancelled > 0, "{report:?}");
}

#[test]
fn synchronous_sends_complete_only_after_their_receive_matched() {
    let report = run_seeds(0..40, |config| {
        config.shape.eager_limit_bytes = 512;
        config.eager_credit_bytes = 4096;
    });
    assert!(report.frames_by_kind[SYNC_ACK] > 0, "{report:?}");
}

#[test]
fn nonblocking_collectives_interleaved_with_point_to_point_give_the_right_results() {
    let mut completed_expected = 0;
    let report = run_seeds(0..40, |config| {
        config.shape.collective_count = 6;
    });
    for seed in 0..40 {
        completed_expected += 6 * EngineJobConfig::random(seed, 4).shape.rank_count as usize;
    }
    assert_eq!(report.collectives_completed, completed_expected);
}

#[test]
fn a_single_rank_job_talks_to_itself_over_loopback() {
    let report = run_seeds(0..20, |config| config.shape.rank_count = 1);
    assert!(report.message_count > 0);
    // Nothing leaves a lone rank.
    assert_eq!(report.frames_carried, 0, "{report:?}");
}

#[test]
fn eight_ranks_with_long_delivery_delays_end_within_the_step_limit() {
    let report = run_seeds(0..10, |config| {
        *config = EngineJobConfig::random(config.seed, 8);
        config.delivery_delay_steps_max = 200;
    });
    assert!(report.steps < 200_000, "{report:?}");
}

#[test]
fn the_same_seed_gives_the_same_job() {
    let config = EngineJobConfig::random(77, 4);
    let first = run(&config);
    let second = run(&config);
    assert_eq!(first.steps, second.steps);
    assert_eq!(first.frames_by_kind, second.frames_by_kind);
}

/// Until engines are told of deaths (`peer-failure`), a killed rank leaves
/// its peers waiting: the step limit must catch that as a hang, naming the
/// dead rank, rather than the job passing or the simulator crashing.
#[cfg(not(feature = "peer-failure"))]
#[test]
fn a_killed_rank_without_failure_notices_is_reported_as_a_hang() {
    let mut config = EngineJobConfig::random(4, 4);
    config.shape.rank_count = 3;
    config.shape.sends_per_rank = 12;
    config.step_limit = 20_000;
    config.kill = Some(resmpi_sim::Kill {
        rank: 1,
        step: 50,
        notice_delay_steps_max: 100,
    });
    let failure = run_engine_job(&config).expect_err("survivors cannot finish");
    assert!(
        failure.message.contains("did not end") && failure.message.contains("rank 1 dead"),
        "{failure}"
    );
}
