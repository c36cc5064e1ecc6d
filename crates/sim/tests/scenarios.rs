//! One scenario per fault kind; each name states what must hold.

use resmpi_sim::{run_job, FaultModel, JobConfig, JobReport};

fn run(config: JobConfig) -> JobReport {
    match run_job(&config) {
        Ok(report) => report,
        Err(failure) => panic!("{failure}"),
    }
}

fn job(seed: u64, rank_count: u32, faults: FaultModel) -> JobConfig {
    JobConfig {
        messages_per_rank: 60,
        ..JobConfig::new(seed, rank_count, faults)
    }
}

#[test]
fn perfect_network_delivers_everything_without_retransmission() {
    let report = run(job(1, 4, FaultModel::none()));
    assert_eq!(report.message_count, 240);
    assert_eq!(report.links.frames_retransmitted, 0);
    assert_eq!(report.links.duplicates_dropped, 0);
    assert!(report.wildcard_receives > 0 && report.receives_posted_early > 0);
}

#[test]
fn loss_10_percent_delivers_everything_in_order() {
    for seed in 0..5 {
        let report = run(job(
            seed,
            4,
            FaultModel {
                loss_rate: 0.1,
                ..FaultModel::none()
            },
        ));
        assert!(report.network.frames_lost > 0);
        assert!(report.links.frames_retransmitted > 0);
    }
}

#[test]
fn loss_30_percent_still_delivers_everything_in_bounded_time() {
    for seed in 0..3 {
        let report = run(job(
            seed,
            3,
            FaultModel {
                loss_rate: 0.3,
                ..FaultModel::none()
            },
        ));
        assert!(report.virtual_time_ns < 1_000_000_000);
    }
}

#[test]
fn duplication_20_percent_delivers_each_message_exactly_once() {
    for seed in 0..5 {
        let report = run(job(
            seed,
            4,
            FaultModel {
                duplication_rate: 0.2,
                ..FaultModel::none()
            },
        ));
        assert!(report.network.frames_duplicated > 0);
        assert!(report.links.duplicates_dropped > 0);
    }
}

#[test]
fn reordering_delays_beyond_the_ack_timeout_keep_send_order() {
    for seed in 0..5 {
        let faults = FaultModel {
            reorder_rate: 0.3,
            reorder_delay_ns_max: 60_000,
            jitter_ns_max: 2_000,
            ..FaultModel::none()
        };
        let report = run(job(seed, 4, faults));
        // Delays past the 20 µs ack timeout cause spurious retransmissions,
        // whose duplicates must be dropped.
        assert!(report.links.frames_retransmitted > 0);
    }
}

#[test]
fn ack_loss_50_percent_only_costs_retransmissions() {
    for seed in 0..5 {
        let report = run(job(
            seed,
            4,
            FaultModel {
                ack_loss_rate: 0.5,
                ..FaultModel::none()
            },
        ));
        assert!(report.links.acks_sent > 0);
    }
}

#[test]
fn small_window_applies_back_pressure_and_bounds_sender_memory() {
    let mut config = job(
        3,
        4,
        FaultModel {
            loss_rate: 0.05,
            ..FaultModel::none()
        },
    );
    config.link.send_window_frames = 2;
    config.issue_gap_ns_max = 0; // every send issued at once
    let report = run(config);
    assert_eq!(report.links.send_buffered_frames_max, 2);
}

#[test]
fn every_fault_at_once_delivers_everything_in_order() {
    for seed in 0..5 {
        let faults = FaultModel {
            loss_rate: 0.15,
            duplication_rate: 0.1,
            reorder_rate: 0.3,
            reorder_delay_ns_max: 50_000,
            ack_loss_rate: 0.2,
            latency_ns: 1_000,
            jitter_ns_max: 1_000,
            cut_links: Vec::new(),
        };
        run(job(seed, 5, faults));
    }
}

#[test]
fn cut_link_is_declared_unreachable_within_the_retry_budget() {
    let faults = FaultModel {
        cut_links: vec![(0, 1)],
        ..FaultModel::none()
    };
    let report = run(job(11, 3, faults));
    assert!(report
        .unreachable_links
        .iter()
        .any(|&(source, destination, _)| (source, destination) == (0, 1)));
}

#[test]
fn same_seed_replays_the_same_run() {
    let config = JobConfig::random(1234, 5);
    let first = run(config.clone());
    let second = run(config);
    assert_eq!(first.virtual_time_ns, second.virtual_time_ns);
    assert_eq!(first.network, second.network);
    assert_eq!(first.links, second.links);
}
