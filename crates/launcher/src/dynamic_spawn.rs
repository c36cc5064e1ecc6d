//! MPI_Comm_spawn in mpiexec: the processes a spawn asks for are a job of
//! their own, started by a nested `mpiexec` (this same executable).
//!
//! Why nested: the children need everything a job has (their own PMI
//! world with its key-value space, barrier and rank count, output
//! forwarding, exit codes, deaths reported and torn down), and a nested
//! launcher is all of that, unchanged. Making one PMI server and one
//! supervisor keep several worlds would touch every per-rank table of the
//! supervisor. This side only keeps the count of running processes
//! against the universe (a spawn's count is given back when its launcher
//! ends), numbers the new processes' endpoints (job-wide and never
//! reused: the parents' are 0..N, each spawn gets the next block), starts the
//! nested launcher, and at the end waits for it and folds its exit code
//! into the job's. How the children reach their parents is the library's
//! business (`RESMPI_SPAWN_PARENT`, opaque here).

use std::process::Command;

/// The nested launchers of one job.
#[derive(Debug)]
pub struct SpawnedLaunchers {
    /// Processes the universe holds (MPI_UNIVERSE_SIZE, in processes).
    universe_size: u32,
    /// Processes running: the job's own and those of every spawn whose
    /// launcher has not ended.
    running_count: u32,
    /// The first endpoint of the next spawn.
    next_endpoint: u32,
    /// Each nested launcher's pid, process count and, once reaped, its
    /// wait status.
    launchers: Vec<(i32, u32, Option<i32>)>,
}

impl SpawnedLaunchers {
    /// No spawn yet in a job of `process_count` processes.
    pub fn new(process_count: u32) -> SpawnedLaunchers {
        SpawnedLaunchers {
            universe_size: process_count,
            running_count: process_count,
            next_endpoint: process_count,
            launchers: Vec::new(),
        }
    }

    /// MPI_UNIVERSE_SIZE in processes.
    pub fn set_universe_size(&mut self, universe_size: u32) {
        self.universe_size = universe_size;
    }

    /// Start `count` processes running the shell `script` (the library
    /// wrote it: one `case` arm per command, on `PMI_RANK`) under a nested
    /// mpiexec, with `RESMPI_SPAWN_PARENT=parent` and their first endpoint
    /// in `RESMPI_SPAWN_BASE`. Returns that first endpoint.
    pub fn start(&mut self, count: u32, script: &str, parent: &str) -> Result<u32, String> {
        let room_count = self.universe_size.saturating_sub(self.running_count);
        if count == 0 || count > room_count {
            return Err(format!(
                "{count}_processes_asked_for_but_the_universe_has_room_for_{room_count}"
            ));
        }
        let launcher = std::env::current_exe()
            .map_err(|error| format!("mpiexec_cannot_find_itself:_{error}").replace(' ', "_"))?;
        let base = self.next_endpoint;
        let child = Command::new(launcher)
            .arg("-n")
            .arg(count.to_string())
            .arg("/bin/sh")
            .arg("-c")
            .arg(script)
            .env("RESMPI_SPAWN_PARENT", parent)
            .env("RESMPI_SPAWN_BASE", base.to_string())
            .env("RESMPI_UNIVERSE_SIZE", self.universe_size.to_string())
            .spawn()
            .map_err(|error| format!("starting_the_nested_mpiexec:_{error}").replace(' ', "_"))?;
        self.launchers.push((child.id() as i32, count, None));
        self.running_count += count;
        self.next_endpoint += count;
        Ok(base)
    }

    /// The supervisor reaped `pid` with `status`: true when it was a
    /// nested launcher (recorded for the end, its processes no longer
    /// counted against the universe).
    pub fn reaped(&mut self, pid: i32, status: i32) -> bool {
        match self
            .launchers
            .iter_mut()
            .find(|(launcher, _, _)| *launcher == pid)
        {
            Some((_, count, slot)) => {
                // A spawn's processes are room again once it ended.
                if slot.replace(status).is_none() {
                    self.running_count -= *count;
                }
                true
            }
            None => false,
        }
    }

    /// Pids of the nested launchers still running.
    pub fn running_pids(&self) -> Vec<i32> {
        self.launchers
            .iter()
            .filter(|(_, _, status)| status.is_none())
            .map(|(pid, _, _)| *pid)
            .collect()
    }

    /// Record `pid`'s status after a blocking wait (end of job).
    pub fn record(&mut self, pid: i32, status: i32) {
        self.reaped(pid, status);
    }

    /// The first non-zero exit code of a nested launcher (a signal counts
    /// as 128 + its number), else 0.
    pub fn exit_code(&self) -> i32 {
        self.launchers
            .iter()
            .filter_map(|(_, _, status)| *status)
            .map(|status| {
                if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else if libc::WIFSIGNALED(status) {
                    128 + libc::WTERMSIG(status)
                } else {
                    1
                }
            })
            .find(|code| *code != 0)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_universe_bounds_every_spawn_together() {
        let mut launchers = SpawnedLaunchers::new(2);
        launchers.set_universe_size(3);
        let refused = launchers.start(2, "true", "").expect_err("2 > room for 1");
        assert!(refused.contains("room_for_1"), "{refused}");
        assert!(launchers.start(0, "true", "").is_err());
        assert!(launchers.running_pids().is_empty());
    }

    #[test]
    fn a_failed_nested_launcher_fails_the_job() {
        let mut launchers = SpawnedLaunchers::new(1);
        launchers.launchers = vec![(10, 1, Some(0)), (11, 2, None), (12, 1, Some(3 << 8))];
        launchers.running_count = 3;
        assert_eq!(launchers.exit_code(), 3);
        assert_eq!(launchers.running_pids(), vec![11]);
        assert!(launchers.reaped(11, 9));
        assert!(!launchers.reaped(99, 0));
        assert_eq!(launchers.exit_code(), 137);
        // the ended spawn's processes are room again, counted once
        assert_eq!(launchers.running_count, 1);
        assert!(launchers.reaped(11, 9));
        assert_eq!(launchers.running_count, 1);
    }
}
