//! What `VELOC_Restart_test` answered, per call, recorded so that a rank
//! restarted under `--msglog pessimistic` takes the same branch when it
//! replays the call.
//!
//! Why it is needed: message logging restarts a rank from `MPI_Init` and
//! replays; everything it computes must come out as before. Restart_test
//! reads the checkpoint directory, which the rank itself changed since
//! (it wrote newer checkpoints before it died), so its own contribution to
//! the call's `MPI_Allreduce` is not what it was. The peers' contributions
//! come from their logs and are the old ones; the minimum can still differ
//! (when this rank's old answer was the smallest) and the replay would go
//! another way. The answer is a non-deterministic input of the program,
//! like an `ANY_SOURCE` match: it is logged (here, durably, in the
//! checkpoint directory, before the call returns) and replayed.
//!
//! The file, `.resmpi-veloc-RANK.restart-tests`, is text:
//! `resmpi-veloc restart-tests 1`, `job JOBID`, one line per call
//! `ORDINAL ROUNDS ANSWER NAME`, and `crc32c XXXXXXXX` over the lines
//! before it. A file of another job (another `RESMPI_JOB_ID`) holds nothing
//! for this one.

use crate::atomic_file::write_atomically;
use std::path::{Path, PathBuf};

/// One call of `VELOC_Restart_test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartTest {
    /// Which call of the process it was (0 for the first).
    pub ordinal: u64,
    /// How many `MPI_Allreduce` rounds it made (a replay makes as many).
    pub rounds: u32,
    /// What it returned (`VELOC_FAILURE` is -1).
    pub answer: i32,
    /// The checkpoint name asked for.
    pub name: String,
}

/// The recorded calls of one rank in one job.
#[derive(Debug, Clone)]
pub struct RestartTestLog {
    path: PathBuf,
    job: String,
    tests: Vec<RestartTest>,
}

const HEADER: &str = "resmpi-veloc restart-tests 1";

impl RestartTestLog {
    /// The log of `rank` in `directory` for job `job`: what the file holds
    /// for this job, or nothing (no file, another job's, or damaged).
    pub fn load(directory: &Path, rank: u32, job: &str) -> RestartTestLog {
        let path = directory.join(format!(".resmpi-veloc-{rank}.restart-tests"));
        let tests = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| parse(&text, job))
            .unwrap_or_default();
        RestartTestLog {
            path,
            job: job.to_string(),
            tests,
        }
    }

    /// The call with this ordinal, if it was recorded.
    pub fn get(&self, ordinal: u64) -> Option<&RestartTest> {
        self.tests.iter().find(|test| test.ordinal == ordinal)
    }

    /// Record a call (replacing one with the same ordinal) and write the
    /// file atomically before returning.
    pub fn record(&mut self, test: RestartTest) -> std::io::Result<()> {
        self.tests.retain(|old| old.ordinal != test.ordinal);
        self.tests.push(test);
        let text = emit(&self.job, &self.tests);
        write_atomically(&self.path, |writer| writer.write_all(text.as_bytes()))
    }
}

fn emit(job: &str, tests: &[RestartTest]) -> String {
    let mut text = format!("{HEADER}\njob {job}\n");
    for test in tests {
        text.push_str(&format!(
            "{} {} {} {}\n",
            test.ordinal, test.rounds, test.answer, test.name
        ));
    }
    let crc = resmpi_checksum::crc32c(text.as_bytes());
    text.push_str(&format!("crc32c {crc:08x}\n"));
    text
}

fn parse(text: &str, job: &str) -> Option<Vec<RestartTest>> {
    let body_end = text.rfind("crc32c ")?;
    let (body, trailer) = text.split_at(body_end);
    let stored = u32::from_str_radix(trailer.strip_prefix("crc32c ")?.trim(), 16).ok()?;
    if stored != resmpi_checksum::crc32c(body.as_bytes()) {
        return None;
    }
    let mut lines = body.lines();
    if lines.next()? != HEADER || lines.next()?.strip_prefix("job ")? != job {
        return None;
    }
    lines
        .map(|line| {
            let mut fields = line.splitn(4, ' ');
            Some(RestartTest {
                ordinal: fields.next()?.parse().ok()?,
                rounds: fields.next()?.parse().ok()?,
                answer: fields.next()?.parse().ok()?,
                name: fields.next()?.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::scratch_directory;

    #[test]
    fn recorded_calls_come_back_for_the_same_job_only() {
        let directory = scratch_directory("restart-tests");
        let mut log = RestartTestLog::load(&directory, 1, "job-a");
        assert_eq!(log.get(0), None);
        let first = RestartTest {
            ordinal: 0,
            rounds: 2,
            answer: 40,
            name: "heatdis".to_string(),
        };
        log.record(first.clone()).unwrap();
        log.record(RestartTest {
            ordinal: 1,
            rounds: 1,
            answer: -1,
            name: "other".to_string(),
        })
        .unwrap();
        let again = RestartTestLog::load(&directory, 1, "job-a");
        assert_eq!(again.get(0), Some(&first));
        assert_eq!(again.get(1).map(|test| test.answer), Some(-1));
        assert_eq!(RestartTestLog::load(&directory, 1, "job-b").get(0), None);
        assert_eq!(RestartTestLog::load(&directory, 2, "job-a").get(0), None);
    }

    #[test]
    fn a_damaged_file_holds_nothing() {
        let directory = scratch_directory("restart-tests-damaged");
        let mut log = RestartTestLog::load(&directory, 0, "j");
        log.record(RestartTest {
            ordinal: 0,
            rounds: 1,
            answer: 7,
            name: "n".to_string(),
        })
        .unwrap();
        let path = directory.join(".resmpi-veloc-0.restart-tests");
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace(" 7 n", " 8 n");
        std::fs::write(&path, text).unwrap();
        assert_eq!(RestartTestLog::load(&directory, 0, "j").get(0), None);
    }
}
