//! Fixed-seed scenarios of production engines under the simulator; each
//! name says what must hold, and each asserts that the scenario really
//! exercised what it names (a scenario that silently stopped producing
//! rendezvous or cancels would otherwise pass forever).

use resmpi_sim::{run_engine_job, EngineJobConfig, EngineJobReport, Kill, KillLanding};

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
        total.blocking_receives_direct += report.blocking_receives_direct;
        total.blocking_receives_promoted += report.blocking_receives_promoted;
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
fn blocking_receives_take_eager_messages_without_a_request_and_become_requests_for_the_rest() {
    let report = run_seeds(0..60, |config| config.blocking_receive_rate = 0.8);
    // Both ways out of a blocking receive happened: straight into the
    // buffer, and promoted to a request (a rendezvous announced, or a
    // message longer than the buffer) with its place in the queue kept.
    assert!(report.blocking_receives_direct > 200, "{report:?}");
    assert!(report.blocking_receives_promoted > 20, "{report:?}");
    assert!(report.frames_by_kind[REQUEST_TO_SEND] > 0, "{report:?}");
}

#[test]
fn a_death_while_a_blocking_receive_waits_ends_it_as_it_ends_a_request() {
    let jobs = run_kill_seeds(0..80, |config| config.blocking_receive_rate = 0.9);
    let promoted: usize = jobs
        .iter()
        .map(|(_, report)| report.blocking_receives_promoted)
        .sum();
    let failed: usize = jobs.iter().map(|(_, report)| report.receives_failed).sum();
    assert!(jobs.len() > 40, "{}", jobs.len());
    assert!(
        promoted > 0 && failed > 0,
        "promoted {promoted}, failed {failed}"
    );
}

#[test]
fn the_same_seed_gives_the_same_job() {
    let config = EngineJobConfig::random(77, 4);
    let first = run(&config);
    let second = run(&config);
    assert_eq!(first.steps, second.steps);
    assert_eq!(first.frames_by_kind, second.frames_by_kind);
}

/// Several seeds, each with a kill (`EngineJobConfig::random_with_kill`),
/// adjusted; returns the reports of the jobs that had one.
fn run_kill_seeds(
    seeds: std::ops::Range<u64>,
    adjust: impl Fn(&mut EngineJobConfig),
) -> Vec<(EngineJobConfig, EngineJobReport)> {
    seeds
        .filter_map(|seed| {
            let mut config = EngineJobConfig::random_with_kill(seed, 4);
            adjust(&mut config);
            config.kill?;
            let report = run(&config);
            Some((config, report))
        })
        .collect()
}

fn landings(reports: &[(EngineJobConfig, EngineJobReport)]) -> Vec<KillLanding> {
    reports
        .iter()
        .filter_map(|(_, report)| report.kill_landing)
        .collect()
}

#[test]
fn a_rank_killed_mid_rendezvous_ends_every_request_that_needs_it() {
    let reports = run_kill_seeds(0..120, |config| {
        // Little eager room: most messages announce themselves.
        config.shape.eager_limit_bytes = 64;
        config.eager_credit_bytes = 150;
    });
    let mid_rendezvous = landings(&reports)
        .iter()
        .filter(|landing| landing.mid_rendezvous)
        .count();
    assert!(mid_rendezvous > 50, "{mid_rendezvous} of {}", reports.len());
    // Survivors' sends to the dead and receives naming it did end, with
    // PROC_FAILED, and every job went quiet (`run` panics otherwise).
    let sends_failed: usize = reports.iter().map(|(_, report)| report.sends_failed).sum();
    let receives_failed: usize = reports
        .iter()
        .map(|(_, report)| report.receives_failed)
        .sum();
    assert!(sends_failed > 100 && receives_failed > 100);
}

#[test]
fn survivors_of_a_death_mid_collective_all_finish_the_collective() {
    let reports = run_kill_seeds(0..120, |config| config.shape.collective_count = 6);
    let mid_collective = landings(&reports)
        .iter()
        .filter(|landing| landing.mid_collective)
        .count();
    assert!(mid_collective > 30, "{mid_collective} of {}", reports.len());
    for (config, report) in &reports {
        // Every survivor ended every collective (the dead rank may have
        // ended some before it died).
        let survivors = config.shape.rank_count as usize - 1;
        assert!(
            report.collectives_completed >= 6 * survivors,
            "seed {}: {report:?}",
            config.seed
        );
    }
    let failed: usize = reports
        .iter()
        .map(|(_, report)| report.collectives_failed)
        .sum();
    assert!(failed > 0);
}

#[test]
fn nothing_from_a_dead_rank_is_delivered_twice_or_after_its_notice() {
    let reports = run_kill_seeds(0..200, |config| {
        // Long delays and prompt notices: the notice overtakes frames the
        // dead rank sent before it died.
        config.delivery_delay_steps_max = 80;
        if let Some(kill) = &mut config.kill {
            kill.notice_delay_steps_max = 5;
        }
    });
    let overtaken: usize = reports
        .iter()
        .map(|(_, report)| report.frames_overtaken_by_notices)
        .sum();
    let both_ways = landings(&reports)
        .iter()
        .filter(|landing| landing.frames_in_flight_both_ways)
        .count();
    assert!(overtaken > 100, "{overtaken} frames overtaken");
    assert!(both_ways > 30, "{both_ways} of {}", reports.len());
}

#[test]
fn a_kill_without_notices_is_reported_as_a_hang_naming_the_dead_rank() {
    // The negative control: the same kill with the notices withheld must
    // leave a survivor waiting on the dead rank, and the step limit must
    // say so, rather than the job passing or the simulator crashing.
    let mut config = EngineJobConfig::random(4, 4);
    config.shape.rank_count = 3;
    config.shape.sends_per_rank = 12;
    config.step_limit = 20_000;
    let kill = Kill {
        rank: 1,
        step: 50,
        notice_delay_steps_max: 100,
        notices: true,
    };
    config.kill = Some(kill);
    run(&config);
    config.kill = Some(Kill {
        notices: false,
        ..kill
    });
    let failure = run_engine_job(&config).expect_err("survivors cannot finish");
    assert!(
        failure.message.contains("did not end") && failure.message.contains("rank 1 dead"),
        "{failure}"
    );
}
