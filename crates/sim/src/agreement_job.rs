//! Seeded jobs of the production ULFM agreement
//! (`resmpi_ft::ulfm::AgreementTable`, which runs `resmpi_ft::agreement`)
//! with processes crashing at chosen points of the protocol.
//!
//! Why: agreement is where a fault-tolerance library hangs or returns
//! different answers on different processes (open-mpi #11404, pmodels/mpich
//! #2198). The protocol's argument rests on who died when; here a crash is
//! placed before every frame a participant sends, one run per index, so
//! every step of the protocol (report, proposal, each acknowledgement,
//! each decision of a broadcast cut in the middle) is a crash point.
//!
//! The model is the engine's: frames between two processes arrive in
//! order (per pair FIFO, any interleaving across pairs); a crashed process
//! sends nothing more; of its frames in flight each receiver gets those
//! that arrive before its own failure notice (the engine drops a dead
//! peer's frames once it knows); each survivor gets the notice after a
//! seeded delay. Every process runs `instances` agreements back to back on
//! one communicator, so later agreements meet early messages and answers
//! from the decided history.
//!
//! The oracle, per agreement: every process that decided (crashed ones
//! included) decided the same (uniform agreement); the flag is the AND of
//! a set of contributions holding every survivor's; the failed set holds
//! only crashed processes; the context id is at least every survivor's;
//! every survivor decides within the step bound (termination).

use std::collections::VecDeque;

use resmpi_ft::agreement::{Contribution, Decision};
use resmpi_ft::member_set::MemberSet;
use resmpi_ft::ulfm::{AgreementKey, AgreementTable};

use crate::rng::SplitMix64;

/// Context id of the simulated communicator.
const CONTEXT: u32 = 8;
/// Steps after which a job that has not ended is a hang.
const STEP_LIMIT: u64 = 200_000;

/// A process crashing in a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgreementCrash {
    /// Which participant.
    pub participant: usize,
    /// It dies right before sending its frame number `before_frame`
    /// (0: before its first), counted over the whole job.
    pub before_frame: u64,
}

/// One job.
#[derive(Clone, Debug)]
pub struct AgreementJobConfig {
    /// Seed of every choice.
    pub seed: u64,
    /// Participants.
    pub size: usize,
    /// Agreements run back to back.
    pub instances: u32,
    /// Crashes.
    pub crashes: Vec<AgreementCrash>,
    /// Longest delay, in steps, between a crash and a survivor's notice.
    pub notice_delay_steps_max: u64,
    /// Participants from here on are a second group whose flags are
    /// ANDed apart (an inter-communicator); `size` for none.
    pub split: usize,
}

/// What a job did.
#[derive(Clone, Debug, Default)]
pub struct AgreementJobReport {
    /// Steps taken.
    pub steps: u64,
    /// Frames sent, over all processes.
    pub frames_sent: u64,
    /// Crashes that happened (a crash index past what a process sends
    /// never fires).
    pub crashes_fired: usize,
    /// Decisions that hold an unacknowledged failure (agree returns
    /// MPIX_ERR_PROC_FAILED).
    pub decisions_with_failures: u64,
}

struct Process {
    table: AgreementTable,
    contributions: Vec<Contribution>,
    decisions: Vec<Option<Decision>>,
    /// Agreement running (index) or next to start.
    current: u32,
    running: bool,
    crashed: bool,
    frames_sent: u64,
    /// Participants this process was told are dead.
    told: MemberSet,
}

/// A frame in flight on the (from, to) pair.
struct InFlight {
    bytes: Vec<u8>,
}

/// Run one job; Err says which invariant broke.
pub fn run_agreement_job(config: &AgreementJobConfig) -> Result<AgreementJobReport, String> {
    let size = config.size;
    let mut rng = SplitMix64::new(config.seed);
    let mut processes: Vec<Process> = (0..size)
        .map(|_| Process {
            table: AgreementTable::default(),
            contributions: (0..config.instances)
                .map(|_| Contribution {
                    flag: (rng.below(16) as i32) | 0b1_0000,
                    failed: MemberSet::empty(size),
                    acknowledged: MemberSet::empty(size),
                    next_context: 4 + 2 * rng.below(8) as u32,
                })
                .collect(),
            decisions: vec![None; config.instances as usize],
            current: 0,
            running: false,
            crashed: false,
            frames_sent: 0,
            told: MemberSet::empty(size),
        })
        .collect();
    let mut wires: Vec<VecDeque<InFlight>> = (0..size * size).map(|_| VecDeque::new()).collect();
    // (step due, survivor, dead participant)
    let mut notices: Vec<(u64, usize, usize)> = Vec::new();
    let mut report = AgreementJobReport::default();
    let members: Vec<u32> = (0..size as u32).collect();
    let mut step = 0u64;
    loop {
        step += 1;
        if step > STEP_LIMIT {
            let waiting: Vec<String> = processes
                .iter()
                .enumerate()
                .filter(|(_, process)| !process.crashed && process.current < config.instances)
                .map(|(index, process)| {
                    format!(
                        "participant {index} in agreement {} (told dead: {:?})",
                        process.current,
                        process.told.iter().collect::<Vec<_>>()
                    )
                })
                .collect();
            return Err(format!(
                "no termination within {STEP_LIMIT} steps: {}",
                waiting.join(", ")
            ));
        }
        // Notices due now.
        let mut index = 0;
        while index < notices.len() {
            if notices[index].0 <= step {
                let (_, survivor, dead) = notices.swap_remove(index);
                let process = &mut processes[survivor];
                if !process.crashed {
                    process.told.insert(dead);
                    process.table.handle_peer_failure(dead as u32);
                }
            } else {
                index += 1;
            }
        }
        let all_done = processes
            .iter()
            .all(|process| process.crashed || process.current >= config.instances);
        let in_flight = wires.iter().any(|wire| !wire.is_empty());
        if all_done && !in_flight && notices.is_empty() {
            break;
        }
        // One seeded action: a process's turn, or a frame delivered.
        if in_flight && rng.chance(0.5) {
            let busy: Vec<usize> = (0..wires.len()).filter(|&w| !wires[w].is_empty()).collect();
            let wire = busy[rng.below(busy.len() as u64) as usize];
            let frame = wires[wire].pop_front().expect("busy wire");
            let (from, to) = (wire / size, wire % size);
            let receiver = &mut processes[to];
            if receiver.crashed || receiver.told.contains(from) {
                continue; // a dead process reads nothing; a known-dead sender is dropped
            }
            if !receiver.table.handle_frame(from as u32, &frame.bytes) {
                return Err(format!("participant {to} refused a frame from {from}"));
            }
        } else {
            let who = rng.below(size as u64) as usize;
            let process = &mut processes[who];
            if process.crashed {
                continue;
            }
            // Start the next agreement, or collect the running one's decision.
            let key = AgreementKey {
                context: CONTEXT,
                sequence: process.current,
            };
            if process.running {
                if let Some(decision) = process.table.take_decision(key) {
                    process.decisions[process.current as usize] = Some(decision);
                    process.running = false;
                    process.current += 1;
                }
            } else if process.current < config.instances {
                let mut contribution = process.contributions[process.current as usize].clone();
                contribution.failed = process.told.clone();
                process.contributions[process.current as usize] = contribution.clone();
                process.running = true;
                process.table.start(
                    key,
                    members.clone(),
                    who,
                    config.split,
                    contribution,
                    process.told.clone(),
                );
            }
            // Send what the table has, crashing at the chosen frame.
            while let Some((to, bytes)) = process.table.poll_transmit() {
                let crash_now = config.crashes.iter().any(|crash| {
                    crash.participant == who && crash.before_frame == process.frames_sent
                });
                if crash_now {
                    process.crashed = true;
                    report.crashes_fired += 1;
                    for survivor in (0..size).filter(|&other| other != who) {
                        let delay = rng.below(config.notice_delay_steps_max + 1);
                        notices.push((step + delay, survivor, who));
                    }
                    break;
                }
                process.frames_sent += 1;
                report.frames_sent += 1;
                wires[who * size + to as usize].push_back(InFlight { bytes });
            }
        }
        // A crashed process's unsent frames vanish with it.
        for (who, process) in processes.iter_mut().enumerate() {
            if process.crashed {
                while process.table.poll_transmit().is_some() {}
                for to in 0..size {
                    wires[to * size + who].clear();
                }
            }
        }
    }
    report.steps = step;
    check(config, &processes, &mut report)?;
    Ok(report)
}

fn check(
    config: &AgreementJobConfig,
    processes: &[Process],
    report: &mut AgreementJobReport,
) -> Result<(), String> {
    let crashed = MemberSet::from_fn(config.size, |index| processes[index].crashed);
    for instance in 0..config.instances as usize {
        let mut first: Option<(usize, &Decision)> = None;
        for (index, process) in processes.iter().enumerate() {
            let Some(decision) = &process.decisions[instance] else {
                if !process.crashed {
                    return Err(format!(
                        "survivor {index} never decided agreement {instance}"
                    ));
                }
                continue;
            };
            match first {
                None => first = Some((index, decision)),
                Some((other, earlier)) if earlier != decision => {
                    return Err(format!(
                        "agreement {instance}: participant {index} decided {decision:?} but participant {other} decided {earlier:?}"
                    ));
                }
                _ => {}
            }
        }
        let Some((_, decision)) = first else {
            continue;
        };
        if decision.has_unacknowledged_failure() {
            report.decisions_with_failures += 1;
        }
        let survivors = || processes.iter().filter(|process| !process.crashed);
        for (part, range, agreed) in [
            ("first", 0..config.split, decision.flag),
            ("second", config.split..config.size, decision.second_flag),
        ] {
            let in_part = |index: &usize| range.contains(index);
            let survivors_and = (0..config.size)
                .filter(in_part)
                .filter(|&index| !processes[index].crashed)
                .map(|index| processes[index].contributions[instance].flag)
                .fold(!0, |all, flag| all & flag);
            let everyone_and = (0..config.size)
                .filter(in_part)
                .map(|index| processes[index].contributions[instance].flag)
                .fold(!0, |all, flag| all & flag);
            if agreed & !survivors_and != 0 || everyone_and & !agreed != 0 {
                return Err(format!(
                    "agreement {instance}: {part} group's flag {agreed:#x} is not the AND of a set of its contributions holding every survivor's (survivors' AND {survivors_and:#x}, everyone's {everyone_and:#x})"
                ));
            }
        }
        if !decision.failed.is_subset(&crashed) {
            return Err(format!(
                "agreement {instance}: failed set {:?} names a live process",
                decision.failed.iter().collect::<Vec<_>>()
            ));
        }
        let survivors_context = survivors()
            .map(|process| process.contributions[instance].next_context)
            .max()
            .unwrap_or(0);
        if decision.next_context < survivors_context {
            return Err(format!(
                "agreement {instance}: context {} below a survivor's {survivors_context}",
                decision.next_context
            ));
        }
    }
    Ok(())
}
