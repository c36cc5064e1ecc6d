//! MPI-IO under `mpiexec --replicas R`: the replicas of a rank make their
//! file calls in step.
//!
//! Every replica of the job is its own MPI_COMM_WORLD running the same
//! program, so every MPI-IO call runs once per replica on the same file.
//! Replaying a write is harmless (the same bytes at the same offsets), but
//! the replicas run at their own pace: a replica that truncates or deletes
//! late would undo what a sibling has written since, and a sibling ahead
//! could overwrite bytes a late one still has to read. So before its n-th
//! file call a process waits until every live replica of its rank has
//! begun its n-th call (so has finished its (n-1)-th): no replica is ever a
//! whole file call ahead of another, and the program's own synchronisation
//! between ranks orders the rest, as in an unreplicated run.
//!
//! Each process announces the number of the call it has reached in a small
//! file, `<temp>/resmpi-io-<job>/<rank>.<replica>` ("pid count", replaced
//! by a rename, so it is read whole). A sibling is waited for until its
//! count is reached or its process is gone: its announced pid no longer
//! runs, the library has been told of its death, or, when it has announced
//! nothing, no process of the job's launcher has its PMI rank. While waiting, the engine makes progress:
//! under `--replica-masking process` a sibling may be blocked on an
//! acknowledgement this process's engine owes it.
//!
//! Writes are made once per rank, not once per replica: the lowest live
//! replica of a rank (the *performer*) makes them; every other one (a
//! *follower*) keeps its writes, size changes and preallocations in memory
//! (`Store::hold_changes`, bounded: past the bound it makes them itself,
//! the same bytes) and, before the call returns, waits until the performer
//! announces it made that call's changes ("done n"), then drops them. If
//! the performer dies first (or moves on having made none), the follower
//! makes them itself, so a file call never returns with its writes left to
//! a dead process; a write made twice that way is the same bytes at the
//! same offsets. Reads stay with each replica (each needs the bytes).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use crate::abi::MPI_COMM_WORLD;

struct Siblings {
    directory: PathBuf,
    job: String,
    rank: u32,
    ranks: u32,
    replica: u32,
    count: u32,
    calls: u64,
    /// The last call whose changes this process made, and whether they
    /// all succeeded.
    done: u64,
    done_ok: bool,
    /// Per replica: known dead (a death is for good).
    dead: Vec<bool>,
}

/// What a sibling has announced.
#[derive(Clone, Copy, Debug)]
struct Announcement {
    pid: i32,
    calls: u64,
    done: u64,
    done_ok: bool,
}

/// This process's part in the file call it is about to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Not a replica: make every change.
    Alone,
    /// The rank's lowest live replica, at call `n`: make every change, and
    /// say so when the call made any ([`performed`]).
    Performer(u64),
    /// Another replica, at call `n`: hold changes and [`settle`] them.
    Follower(u64),
}

/// What a follower does with the changes it held in a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The performer made them: drop them.
    MadeBySibling,
    /// Make them: this process is now the lowest live replica, or the
    /// performer made none (or failed to).
    MakeThem,
}

/// `None` until the first file call; then `Some(None)` outside replication.
static SIBLINGS: Mutex<Option<Option<Siblings>>> = Mutex::new(None);

/// [`SIBLINGS`], whatever a thread that panicked while holding it left.
fn lock_siblings() -> std::sync::MutexGuard<'static, Option<Option<Siblings>>> {
    SIBLINGS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn from_environment() -> Option<Siblings> {
    let number = |name: &str| std::env::var(name).ok()?.trim().parse::<u32>().ok();
    let count = number("RESMPI_REPLICAS").filter(|&count| count > 1)?;
    let replica = number("RESMPI_REPLICA")?;
    let process = number("PMI_RANK")?;
    let size = number("PMI_SIZE")?;
    let job = std::env::var("RESMPI_JOB_ID")
        .or_else(|_| std::env::var("PMI_JOBID"))
        .ok()?;
    let ranks = size / count;
    if ranks == 0 || replica >= count {
        return None;
    }
    let directory = std::env::temp_dir().join(format!("resmpi-io-{job}"));
    std::fs::create_dir_all(&directory).ok()?;
    // SAFETY: registering a plain extern "C" function.
    unsafe { libc::atexit(finished) };
    Some(Siblings {
        directory,
        job,
        rank: process % ranks,
        ranks,
        replica,
        count,
        calls: 0,
        done: 0,
        done_ok: true,
        dead: vec![false; count as usize],
    })
}

impl Siblings {
    fn announcement(&self, replica: u32) -> PathBuf {
        self.directory.join(format!("{}.{}", self.rank, replica))
    }

    fn announce(&self) {
        let path = self.announcement(self.replica);
        let partial = self
            .directory
            .join(format!("{}.{}.partial", self.rank, self.replica));
        let text = format!(
            "{} {} {} {}\n",
            std::process::id(),
            self.calls,
            self.done,
            u8::from(self.done_ok)
        );
        if std::fs::write(&partial, text).is_ok() {
            let _ = std::fs::rename(&partial, &path);
        }
    }

    /// What a sibling has announced, if anything.
    fn announced(&self, replica: u32) -> Option<Announcement> {
        let text = std::fs::read_to_string(self.announcement(replica)).ok()?;
        let mut words = text.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        let calls = words.next()?.parse().ok()?;
        let done = words.next().and_then(|done| done.parse().ok()).unwrap_or(0);
        let done_ok = words.next() != Some("0");
        Some(Announcement {
            pid,
            calls,
            done,
            done_ok,
        })
    }

    /// The process of this rank's replica `replica` (its PMI rank).
    fn process(&self, replica: u32) -> u32 {
        replica * self.ranks + self.rank
    }

    /// The lowest replica of this rank not known dead.
    fn performer(&self) -> u32 {
        (0..self.count)
            .find(|&replica| !self.dead[replica as usize])
            .unwrap_or(self.replica)
    }

    fn step(&self) -> Step {
        if self.performer() == self.replica {
            Step::Performer(self.calls)
        } else {
            Step::Follower(self.calls)
        }
    }
}

/// Watches one sibling until it is found dead: its announced pid no
/// longer runs, the engine knows it failed, or, having announced nothing,
/// no process of the launcher has its PMI rank (looked for every 20 ms).
struct DeathWatch {
    looked_for: Option<std::time::Instant>,
}

impl DeathWatch {
    fn new() -> DeathWatch {
        DeathWatch { looked_for: None }
    }

    /// Drive the engine once; whether the sibling is now known dead.
    fn dead(&mut self, siblings: &Siblings, replica: u32, seen: Option<Announcement>) -> bool {
        let process = siblings.process(replica);
        let dead = match seen {
            Some(announcement) => !running(announcement.pid),
            None => {
                let due = self
                    .looked_for
                    .is_none_or(|then| then.elapsed() >= Duration::from_millis(20));
                if due {
                    self.looked_for = Some(std::time::Instant::now());
                }
                due && !process_runs(&siblings.job, process)
            }
        };
        dead || progress_and_check(process)
    }
}

/// At exit: this process makes no more file calls (announced as the
/// largest count, so no sibling waits for it); the last process of the
/// job to leave, finding every other one finished or gone, removes the
/// announcements.
extern "C" fn finished() {
    // Not waiting: a thread may be inside a file call as the process exits.
    let guard = match SIBLINGS.try_lock() {
        Ok(guard) => guard,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    let Some(Some(siblings)) = guard.as_ref() else {
        return;
    };
    let last = Siblings {
        directory: siblings.directory.clone(),
        job: String::new(),
        calls: u64::MAX,
        dead: Vec::new(),
        ..*siblings
    };
    last.announce();
    let Ok(entries) = std::fs::read_dir(&last.directory) else {
        return;
    };
    let everyone_done = entries.flatten().all(|entry| {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            return true;
        };
        let mut words = text.split_whitespace();
        match (
            words.next().and_then(|pid| pid.parse::<i32>().ok()),
            words.next().and_then(|calls| calls.parse::<u64>().ok()),
        ) {
            (Some(_), Some(u64::MAX)) => true,
            (Some(pid), _) => !running(pid),
            _ => true,
        }
    });
    if everyone_done {
        let _ = std::fs::remove_dir_all(&last.directory);
    }
}

/// Whether process `pid` still runs (a zombie does not).
fn running(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next()),
            Some("Z") | Some("X")
        ),
        Err(_) => false,
    }
}

/// Whether process `process` of job `job` (its PMI rank) still runs: a
/// sibling of this process under the same launcher whose environment names
/// it. Every process of the job existed before MPI_Init returned (the
/// wire-up needs them all), so one not found is dead. For a sibling that
/// died before announcing anything: the library is not told of another
/// replica's deaths under replica masking.
fn process_runs(job: &str, process: u32) -> bool {
    // SAFETY: no arguments, always succeeds.
    let parent = unsafe { libc::getppid() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    let rank_entry = format!("PMI_RANK={process}");
    let job_entry = format!("RESMPI_JOB_ID={job}");
    entries.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let mut fields = stat.rsplit(')').next().unwrap_or("").split_whitespace();
        let state = fields.next();
        let ppid = fields.next().and_then(|ppid| ppid.parse::<i32>().ok());
        if ppid != Some(parent) || matches!(state, Some("Z") | Some("X")) {
            return false;
        }
        let Ok(environment) = std::fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let mut rank_found = false;
        let mut job_found = false;
        for variable in environment.split(|&byte| byte == 0) {
            rank_found |= variable == rank_entry.as_bytes();
            job_found |= variable == job_entry.as_bytes();
        }
        rank_found && job_found
    })
}

/// Drive the engine once; whether process `process` is known dead.
fn progress_and_check(process: u32) -> bool {
    crate::global::with_mpi("MPI-IO", MPI_COMM_WORLD, |mpi, _| {
        let _ = mpi.engine.progress();
        Ok(mpi.engine.peer_failed(process))
    })
    .unwrap_or(false)
}

/// Whether this process is one replica of its rank (`mpiexec --replicas`).
pub(crate) fn replicated() -> bool {
    let mut guard = lock_siblings();
    guard.get_or_insert_with(from_environment).is_some()
}

/// Before a file call: wait until every live replica of this rank has
/// reached this call; this process's part in it. `Step::Alone` outside
/// `mpiexec --replicas`.
pub(crate) fn in_step() -> Step {
    let mut guard = lock_siblings();
    let Some(siblings) = guard.get_or_insert_with(from_environment) else {
        return Step::Alone;
    };
    siblings.calls += 1;
    siblings.announce();
    let calls = siblings.calls;
    for replica in (0..siblings.count).filter(|&replica| replica != siblings.replica) {
        if siblings.dead[replica as usize] {
            continue;
        }
        let mut pause = Duration::from_micros(50);
        let mut watch = DeathWatch::new();
        loop {
            let seen = siblings.announced(replica);
            if seen.is_some_and(|announcement| announcement.calls >= calls) {
                break;
            }
            if watch.dead(siblings, replica, seen) {
                siblings.dead[replica as usize] = true;
                break;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
    siblings.step()
}

/// After call `call` made changes to a file: say so, for the followers.
pub(crate) fn performed(call: u64, ok: bool) {
    let mut guard = lock_siblings();
    if let Some(Some(siblings)) = guard.as_mut() {
        siblings.done = call;
        siblings.done_ok = ok;
        siblings.announce();
    }
}

/// A follower at the end of call `call`, holding changes: wait until the
/// rank's performer has made that call's changes, or is found dead (the
/// next live replica below this one becomes the performer, and if none is
/// left this process makes them), or has moved on to its next call
/// having made none (or announced they failed): then this process makes
/// its own.
pub(crate) fn settle(call: u64) -> Settled {
    let mut guard = lock_siblings();
    let Some(Some(siblings)) = guard.as_mut() else {
        return Settled::MakeThem;
    };
    loop {
        let performer = siblings.performer();
        if performer == siblings.replica {
            return Settled::MakeThem;
        }
        let mut pause = Duration::from_micros(20);
        let mut watch = DeathWatch::new();
        loop {
            let seen = siblings.announced(performer);
            match seen {
                Some(announcement) if announcement.done >= call => {
                    return if announcement.done_ok {
                        Settled::MadeBySibling
                    } else {
                        Settled::MakeThem
                    };
                }
                Some(announcement) if announcement.calls > call => return Settled::MakeThem,
                _ => {}
            }
            if watch.dead(siblings, performer, seen) {
                siblings.dead[performer as usize] = true;
                break;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
}
