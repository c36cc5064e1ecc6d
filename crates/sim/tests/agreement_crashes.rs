//! The ULFM agreement under crashes at every step: for each job size,
//! each participant and each index of the frames it sends, a run where it
//! dies right before that frame (so a broadcast may be cut anywhere), over
//! several seeds of the interleaving and notice delays; then two crashes
//! at random points. Every run must end with every survivor decided, the
//! same decision everywhere (crashed deciders included) and a valid value
//! (see `resmpi_sim::agreement_job`).

use resmpi_sim::rng::SplitMix64;
use resmpi_sim::{run_agreement_job, AgreementCrash, AgreementJobConfig, AgreementJobReport};

fn run(config: &AgreementJobConfig) -> AgreementJobReport {
    match run_agreement_job(config) {
        Ok(report) => report,
        Err(failure) => panic!("{failure}\njob: {config:?}"),
    }
}

#[test]
fn agreement_is_uniform_when_one_participant_dies_before_any_of_its_frames() {
    let mut crashes_fired = 0;
    let mut decisions_with_failures = 0;
    for size in 2..=5 {
        for participant in 0..size {
            let mut before_frame = 0;
            loop {
                let mut fired_any = false;
                for seed in 0..10 {
                    let config = AgreementJobConfig {
                        seed: seed * 1_000 + before_frame * 10 + participant as u64,
                        size,
                        instances: 2,
                        crashes: vec![AgreementCrash {
                            participant,
                            before_frame,
                        }],
                        notice_delay_steps_max: [0, 5, 60][seed as usize % 3],
                        // Odd seeds: two groups, as on an inter-communicator.
                        split: if seed % 2 == 1 { size / 2 } else { size },
                    };
                    let report = run(&config);
                    fired_any |= report.crashes_fired > 0;
                    crashes_fired += report.crashes_fired;
                    decisions_with_failures += report.decisions_with_failures;
                }
                if !fired_any {
                    break; // the participant never sends this many frames
                }
                before_frame += 1;
            }
            assert!(
                before_frame > 0,
                "participant {participant} of {size} sent nothing"
            );
        }
    }
    assert!(crashes_fired > 500, "only {crashes_fired} crashes landed");
    assert!(
        decisions_with_failures > 100,
        "failures never reached a decision"
    );
}

#[test]
fn agreement_is_uniform_when_two_participants_die_at_random_steps() {
    let mut rng = SplitMix64::new(11);
    let mut two_fired = 0;
    for seed in 0..3_000 {
        let size = 3 + rng.below(4) as usize;
        let first = rng.below(size as u64) as usize;
        let second = (first + 1 + rng.below(size as u64 - 1) as usize) % size;
        let config = AgreementJobConfig {
            seed,
            size,
            instances: 3,
            crashes: vec![
                AgreementCrash {
                    participant: first,
                    before_frame: rng.below(3 * size as u64),
                },
                AgreementCrash {
                    participant: second,
                    before_frame: rng.below(3 * size as u64),
                },
            ],
            notice_delay_steps_max: rng.below(100),
            split: rng.below(size as u64 + 1) as usize,
        };
        let report = run(&config);
        if report.crashes_fired == 2 {
            two_fired += 1;
        }
    }
    assert!(
        two_fired > 1_000,
        "only {two_fired} jobs lost two participants"
    );
}

#[test]
fn agreement_without_failures_decides_in_three_message_delays() {
    for size in 1..=8 {
        let report = run(&AgreementJobConfig {
            seed: size as u64,
            size,
            instances: 1,
            crashes: Vec::new(),
            notice_delay_steps_max: 0,
            split: size,
        });
        // Report, propose, ack from each non-coordinator; decide to each.
        assert_eq!(report.frames_sent, 4 * (size as u64 - 1));
        assert_eq!(report.decisions_with_failures, 0);
    }
}
