//! The job's event logger under `--msglog`: a process outside
//! `MPI_COMM_WORLD` (this same executable, `mpiexec --event-logger DIR`)
//! that stores every rank's determinants durably (`resmpi_msglog::server`).
//!
//! Why mpiexec owns it: mpiexec already owns every process of the job and
//! outlives them all, so it can start the logger before the ranks, start
//! it again when it dies (as it starts a dead rank again), and end it with
//! the job. It is a process and not a thread of mpiexec so that it can be
//! killed and restarted on its own, and so that its fsyncs never stall the
//! supervisor. mpiexec creates the listening socket once and hands the
//! same one to every logger it starts: the address in
//! `RESMPI_EVENTLOG_ADDRESS` never changes, and ranks that connect while
//! the logger is down wait in the backlog.
//!
//! Where the log lives: `--ckpt-dir` when given (durable storage the user
//! chose, beside the checkpoints), else a directory of the job's own under
//! `TMPDIR`, removed at the end. `eventlog.pid` there names the running
//! logger (what a test kills).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use resmpi_msglog::event_logger::LoggerCounters;
use resmpi_msglog::server::{parse_counters, CONNECTIONS_OPEN, COUNTERS_FILE_NAME};

/// How long mpiexec, ending a job, waits for the event logger to take in
/// and sync what the ranks sent before they exited.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The flag that makes this executable an event logger.
pub const EVENT_LOGGER_FLAG: &str = "--event-logger";
/// Given to the first logger of a job: an old log in the directory is
/// discarded (a restarted one reads the log back instead).
const FRESH_FLAG: &str = "--fresh";
/// The file naming the running logger's process id.
pub const PID_FILE_NAME: &str = "eventlog.pid";

/// The running event logger of a job, and how to start it again.
pub struct EventLoggerProcess {
    listener: TcpListener,
    directory: PathBuf,
    /// The directory is the job's own (removed at the end).
    temporary: bool,
    /// The running logger's process id (0: none running).
    pub pid: i32,
    /// How many times it was started again.
    pub restarts: u64,
}

impl EventLoggerProcess {
    /// Listen (on loopback, or on `remote_ip` when ranks run on other
    /// hosts) and start the job's first logger, in `checkpoint_directory`
    /// or a new directory named after `job_id`.
    pub fn start(
        checkpoint_directory: Option<&str>,
        remote_ip: Option<IpAddr>,
        job_id: &str,
    ) -> Result<EventLoggerProcess, String> {
        let (directory, temporary) = match checkpoint_directory {
            Some(directory) => (PathBuf::from(directory), false),
            None => {
                let base = std::env::var("TMPDIR")
                    .ok()
                    .filter(|dir| !dir.is_empty())
                    .unwrap_or_else(|| "/tmp".to_string());
                (
                    Path::new(&base).join(format!("resmpi-eventlog-{job_id}")),
                    true,
                )
            }
        };
        std::fs::create_dir_all(&directory).map_err(|error| {
            format!(
                "event logger: cannot create {}: {error}",
                directory.display()
            )
        })?;
        let ip = remote_ip.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|error| format!("event logger: cannot listen on {ip}: {error}"))?;
        let mut process = EventLoggerProcess {
            listener,
            directory,
            temporary,
            pid: 0,
            restarts: 0,
        };
        process.spawn(true)?;
        Ok(process)
    }

    /// `ip:port` for `RESMPI_EVENTLOG_ADDRESS`.
    pub fn address(&self) -> String {
        self.listener
            .local_addr()
            .map(|address| address.to_string())
            .unwrap_or_default()
    }

    fn spawn(&mut self, fresh: bool) -> Result<(), String> {
        let program = std::env::current_exe()
            .map_err(|error| format!("cannot find mpiexec's own executable: {error}"))?;
        let listener_fd = self.listener.as_raw_fd();
        let mut command = Command::new(program);
        command
            .arg(EVENT_LOGGER_FLAG)
            .arg(&self.directory)
            .arg(listener_fd.to_string());
        if fresh {
            command.arg(FRESH_FLAG);
        }
        command.stdin(Stdio::null()).stdout(Stdio::null());
        // SAFETY: between fork and exec only async-signal-safe calls
        // (fcntl, prctl) run.
        unsafe {
            command.pre_exec(move || {
                // The listening socket stays open across exec, at its number.
                if libc::fcntl(listener_fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // It ends with mpiexec, however mpiexec ends.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|error| format!("cannot start the event logger: {error}"))?;
        self.pid = child.id() as i32;
        let _ = std::fs::write(
            self.directory.join(PID_FILE_NAME),
            format!("{}\n", self.pid),
        );
        Ok(())
    }

    /// The logger exited (mpiexec's reaper saw `pid` end): start it again,
    /// reading its log back. Returns a line for mpiexec's stderr.
    pub fn restart(&mut self) -> Result<String, String> {
        self.restarts += 1;
        self.spawn(false)?;
        Ok(format!(
            "mpiexec: event logger started again (pid {}); it reads its log back",
            self.pid
        ))
    }

    /// End the logger (its log is durable: a SIGKILL loses nothing acked)
    /// and return its counters; remove the job's own directory. The ranks
    /// are gone by now: first give the logger up to
    /// [`DRAIN_WAIT`] to read their sockets to the end and sync what
    /// they sent (under optimistic logging nobody waited for those acks,
    /// and the report's counts would otherwise depend on the disk's speed).
    pub fn stop(mut self) -> LoggerCounters {
        let counters_path = self.directory.join(COUNTERS_FILE_NAME);
        let drained = format!("{CONNECTIONS_OPEN} 0\n");
        let deadline = std::time::Instant::now() + DRAIN_WAIT;
        while self.pid > 0 && std::time::Instant::now() < deadline {
            let text = std::fs::read_to_string(&counters_path).unwrap_or_default();
            if text.ends_with(&drained) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if self.pid > 0 {
            // SAFETY: signals and reaps only the logger this process started.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
            self.pid = 0;
        }
        let counters = std::fs::read_to_string(self.directory.join(COUNTERS_FILE_NAME))
            .map(|text| parse_counters(&text))
            .unwrap_or_default();
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.directory);
        } else {
            let _ = std::fs::remove_file(self.directory.join(PID_FILE_NAME));
        }
        counters
    }
}

/// `mpiexec --event-logger DIR FD [--fresh]`: serve on the listening
/// socket inherited as descriptor FD. Returns the exit code.
pub fn main(arguments: &[String]) -> i32 {
    let (Some(directory), Some(listener_fd)) = (
        arguments.get(1),
        arguments.get(2).and_then(|text| text.parse::<i32>().ok()),
    ) else {
        eprintln!("mpiexec {EVENT_LOGGER_FLAG}: expected DIR FD [{FRESH_FLAG}]");
        return crate::EXIT_USAGE;
    };
    let fresh = arguments.get(3).is_some_and(|flag| flag == FRESH_FLAG);
    // SAFETY: mpiexec left its listening socket open at this descriptor
    // for this process, and nothing else here owns it.
    let listener = unsafe {
        use std::os::fd::FromRawFd;
        TcpListener::from_raw_fd(listener_fd)
    };
    match resmpi_msglog::server::serve(listener, Path::new(directory), fresh) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("mpiexec: {message}");
            1
        }
    }
}
