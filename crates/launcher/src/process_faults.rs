//! The timed process faults of `--inject` that `mpiexec` carries out:
//! `kill:RANK@TIME` and `host-down:HOST@TIME`, as a schedule of SIGKILLs.
//!
//! The schedule is checked against the placement before any rank starts, so
//! a host that runs no rank is a usage error naming the item, not a fault
//! that silently never happens. It holds no clock and sends no signal: the
//! supervisor asks it which kills are due at the time it passes in, and does
//! the killing. (`kill:RANK@sends=N` is not here: the library carries it out
//! itself, and mpiexec only sees the death.)

use resmpi_path::inject_spec::{KillTrigger, ProcessFault};

use crate::hosts::Placement;

/// SIGKILLs to send at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledKill {
    /// When, counted from the moment every rank was started.
    pub at_ns: u64,
    /// The ranks to kill together (one for `kill:`, a host's for
    /// `host-down:`), in increasing order.
    pub ranks: Vec<u32>,
}

/// Every timed kill of a job, soonest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KillSchedule {
    /// Not yet due, sorted by `at_ns` (spec order among equal times).
    pending: Vec<ScheduledKill>,
}

impl KillSchedule {
    /// The schedule of `faults` for a job placed as `placement`;
    /// `is_this_host` says whether a name means this host (so
    /// `host-down:localhost` and `host-down:$(hostname)` both name the
    /// local ranks). Ranks were checked by the options parser; a host that
    /// runs no rank of the job is an error naming the item.
    pub fn new(
        faults: &[ProcessFault],
        placement: &Placement,
        is_this_host: impl Fn(&str) -> bool,
    ) -> Result<KillSchedule, String> {
        let mut pending = Vec::new();
        for fault in faults {
            match fault {
                ProcessFault::Kill {
                    target,
                    trigger: KillTrigger::AfterTime { at_ns },
                } => pending.push(ScheduledKill {
                    at_ns: *at_ns,
                    ranks: vec![target.rank],
                }),
                ProcessFault::Kill {
                    trigger: KillTrigger::AfterSends { .. },
                    ..
                } => {}
                ProcessFault::HostDown { host, at_ns } => {
                    let placed = placement.hosts.iter().find(|placed| {
                        placed.name == *host || (placed.local && is_this_host(host))
                    });
                    let Some(placed) = placed else {
                        let names: Vec<&str> = placement
                            .hosts
                            .iter()
                            .map(|placed| placed.name.as_str())
                            .collect();
                        return Err(format!(
                            "--inject item `{fault}`: no rank of this job runs on host {host} (hosts with ranks: {})",
                            names.join(", ")
                        ));
                    };
                    pending.push(ScheduledKill {
                        at_ns: *at_ns,
                        ranks: placed.ranks.clone(),
                    });
                }
            }
        }
        // Stable: kills due at the same time keep their spec order.
        pending.sort_by_key(|kill| kill.at_ns);
        Ok(KillSchedule { pending })
    }

    /// Whether nothing is left to do.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// When the next kill falls due, if any.
    pub fn next_due_ns(&self) -> Option<u64> {
        self.pending.first().map(|kill| kill.at_ns)
    }

    /// Removes and returns every kill due at `elapsed_ns`, soonest first.
    pub fn take_due(&mut self, elapsed_ns: u64) -> Vec<ScheduledKill> {
        let due_count = self
            .pending
            .iter()
            .take_while(|kill| kill.at_ns <= elapsed_ns)
            .count();
        self.pending.drain(..due_count).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosts::HostSpec;
    use resmpi_path::inject_spec::FaultSpec;

    fn faults(text: &str) -> Vec<ProcessFault> {
        text.parse::<FaultSpec>().unwrap().processes
    }

    fn placement() -> Placement {
        let hosts = [("here", 2), ("nodeb", 2), ("nodec", 1)].map(|(name, slots)| HostSpec {
            name: name.to_string(),
            slots,
        });
        Placement::new(&hosts, None, 5, |name| name == "here")
    }

    fn this_host(name: &str) -> bool {
        name == "here" || name == "localhost"
    }

    #[test]
    fn kills_come_due_in_time_order_and_only_once() {
        let mut schedule = KillSchedule::new(
            &faults("kill:3@2s,host-down:nodeb@500ms,kill:0@sends=4,kill:4@500ms,kill:1@1ms"),
            &placement(),
            this_host,
        )
        .unwrap();
        assert_eq!(schedule.next_due_ns(), Some(1_000_000));
        assert!(schedule.take_due(999_999).is_empty());
        assert_eq!(
            schedule.take_due(1_000_000),
            [ScheduledKill {
                at_ns: 1_000_000,
                ranks: vec![1]
            }]
        );
        assert_eq!(
            schedule.take_due(1_999_999_999),
            [
                ScheduledKill {
                    at_ns: 500_000_000,
                    ranks: vec![2, 3]
                },
                ScheduledKill {
                    at_ns: 500_000_000,
                    ranks: vec![4]
                },
            ]
        );
        assert_eq!(schedule.take_due(u64::MAX).len(), 1);
        assert!(schedule.is_empty());
        assert!(schedule.take_due(u64::MAX).is_empty());
    }

    #[test]
    fn host_down_names_this_host_by_any_of_its_names() {
        for name in ["here", "localhost"] {
            let schedule = KillSchedule::new(
                &faults(&format!("host-down:{name}@1s")),
                &placement(),
                this_host,
            )
            .unwrap();
            assert_eq!(
                schedule.pending,
                [ScheduledKill {
                    at_ns: 1_000_000_000,
                    ranks: vec![0, 1]
                }]
            );
        }
    }

    #[test]
    fn a_host_without_ranks_is_an_error_naming_the_item() {
        let message = KillSchedule::new(
            &faults("kill:0@1s,host-down:nodez@1s"),
            &placement(),
            this_host,
        )
        .unwrap_err();
        assert_eq!(
            message,
            "--inject item `host-down:nodez@1s`: no rank of this job runs on host nodez \
             (hosts with ranks: here, nodeb, nodec)"
        );
        // A host given to --hosts but left without a rank is no target either.
        let hosts = [("here", 1), ("idle", 1)].map(|(name, slots)| HostSpec {
            name: name.to_string(),
            slots,
        });
        let one_rank = Placement::new(&hosts, None, 1, |name| name == "here");
        assert!(KillSchedule::new(&faults("host-down:idle@1s"), &one_rank, this_host).is_err());
    }
}
