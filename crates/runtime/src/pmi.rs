//! PMI-1 client over MPICH's "simple PMI" wire protocol.
//!
//! Three ways to start, chosen from the environment the process manager set:
//! - `PMI_FD`: an inherited socket (our `mpiexec`, hydra's default); rank and
//!   size come from `PMI_RANK` / `PMI_SIZE`.
//! - `PMI_PORT=host:port` (+ `PMI_ID`): connect over TCP, say `initack`, and
//!   receive rank and size from the server (hydra's `-pmi-port`).
//! - neither: a singleton, rank 0 of 1, with a local key-value map, so a
//!   program started without any launcher still runs.
//!
//! Every request waits for its one reply line; the only request that does not
//! wait is `abort`, because the process manager may kill us before answering
//! and an aborting rank must never hang.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use crate::codec::{check_token, PmiLine, MAX_LINE_BYTES, PMI2_LENGTH_BYTES, PMI2_MAX_BODY_BYTES};
use crate::notices::FailureNotices;
use crate::PmiError;

/// How long `abort` may block writing its line before giving up.
const ABORT_WRITE_TIMEOUT_MS: u64 = 1000;

/// Set once `PMI_FD` has been turned into a stream, so a second `from_env`
/// cannot create a second owner of the same descriptor.
static PMI_FD_TAKEN: AtomicBool = AtomicBool::new(false);

/// A connection to the process manager, or the singleton stand-in for one.
pub struct Pmi {
    transport: Transport,
    rank: u32,
    size: u32,
    local_rank: u32,
    local_size: u32,
    kvs_name: String,
    appnum: i32,
    universe_size: u32,
    key_max_bytes: usize,
    value_max_bytes: usize,
    finalized: bool,
}

enum Transport {
    Singleton(HashMap<String, String>),
    Connected(Channel),
    Pmix(crate::pmix::PmixClient),
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(stream) => Stream::Unix(stream.try_clone()?),
            Stream::Tcp(stream) => Stream::Tcp(stream.try_clone()?),
        })
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(stream) => stream.set_write_timeout(timeout),
            Stream::Tcp(stream) => stream.set_write_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(stream) => stream.read(buffer),
            Stream::Tcp(stream) => stream.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        // A rank is usually a C program that has not ignored SIGPIPE: a
        // write to a dead launcher (socketpair or TCP) must be an error, not
        // a death.
        let fd = match self {
            Stream::Unix(stream) => stream.as_raw_fd(),
            Stream::Tcp(stream) => stream.as_raw_fd(),
        };
        // SAFETY: `send` reads at most `buffer.len()` bytes from the valid
        // slice `buffer` and writes only to the socket that `self` owns for
        // the duration of the call.
        let sent =
            unsafe { libc::send(fd, buffer.as_ptr().cast(), buffer.len(), libc::MSG_NOSIGNAL) };
        if sent < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(sent as usize)
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(stream) => stream.flush(),
            Stream::Tcp(stream) => stream.flush(),
        }
    }
}

/// Which framing the connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    /// PMI-1: `cmd=NAME key=value ...` lines.
    Pmi1,
    /// PMI-2: a 6-character length, then `cmd=NAME;key=value;...;`.
    Pmi2,
}

/// A stream plus the bytes read past the last complete message.
struct Channel {
    stream: Stream,
    wire: Wire,
    pending: Vec<u8>,
    /// Once failure notices are watched, a thread owns the reading side and
    /// hands every line that is not a notice (the replies) here.
    replies: Option<mpsc::Receiver<Result<PmiLine, PmiError>>>,
}

impl Channel {
    fn new(stream: Stream) -> Channel {
        Channel {
            stream,
            wire: Wire::Pmi1,
            pending: Vec::new(),
            replies: None,
        }
    }

    fn send(&mut self, line: &PmiLine) -> Result<(), PmiError> {
        let bytes = match self.wire {
            Wire::Pmi1 => line.encode().into_bytes(),
            Wire::Pmi2 => line.encode_pmi2(),
        };
        self.stream
            .write_all(&bytes)
            .map_err(|error| match error.kind() {
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => PmiError::new(format!(
                    "cannot send 'cmd={}': the process manager closed the PMI connection (did mpiexec die?)",
                    line.command
                )),
                _ => PmiError::new(format!(
                    "cannot send 'cmd={}' to the process manager: {error}",
                    line.command
                )),
            })
    }

    fn receive(&mut self) -> Result<PmiLine, PmiError> {
        if let Some(replies) = &self.replies {
            return replies.recv().unwrap_or_else(|_| {
                Err(PmiError::new(
                    "the process manager closed the PMI connection (did mpiexec die?)",
                ))
            });
        }
        loop {
            if self.wire == Wire::Pmi2 && self.pending.len() >= PMI2_LENGTH_BYTES {
                let length = PmiLine::parse_pmi2_length(&self.pending[..PMI2_LENGTH_BYTES])?;
                if self.pending.len() >= PMI2_LENGTH_BYTES + length {
                    let message: Vec<u8> =
                        self.pending.drain(..PMI2_LENGTH_BYTES + length).collect();
                    return PmiLine::parse_pmi2_body(&message[PMI2_LENGTH_BYTES..]);
                }
            }
            let line_end = match self.wire {
                Wire::Pmi1 => self.pending.iter().position(|&byte| byte == b'\n'),
                Wire::Pmi2 => None,
            };
            if let Some(end) = line_end {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let text = String::from_utf8(line).map_err(|_| {
                    PmiError::new("the process manager sent a line that is not UTF-8")
                })?;
                return PmiLine::parse(&text);
            }
            let limit_bytes = match self.wire {
                Wire::Pmi1 => MAX_LINE_BYTES,
                Wire::Pmi2 => PMI2_LENGTH_BYTES + PMI2_MAX_BODY_BYTES,
            };
            if self.pending.len() > limit_bytes {
                return Err(PmiError::new(format!(
                    "the process manager sent a message longer than {limit_bytes} bytes"
                )));
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(PmiError::new(
                        "the process manager closed the PMI connection (did mpiexec die?)",
                    ))
                }
                Ok(count) => self.pending.extend_from_slice(&chunk[..count]),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    return Err(PmiError::new(format!(
                        "cannot read from the process manager: {error}"
                    )))
                }
            }
        }
    }

    /// Sends `request` and returns its reply, which must be `cmd=expected`
    /// with `rc` absent or 0.
    fn request(&mut self, request: &PmiLine, expected: &str) -> Result<PmiLine, PmiError> {
        self.send(request)?;
        let reply = self.receive()?;
        if reply.command != expected {
            return Err(PmiError::new(format!(
                "expected 'cmd={expected}' in reply to 'cmd={}', got '{}'",
                request.command,
                reply.encode().trim_end()
            )));
        }
        match reply.get("rc") {
            None | Some("0") => Ok(reply),
            Some(code) => Err(PmiError::new(format!(
                "the process manager refused 'cmd={}' (rc={code}, msg={})",
                request.command,
                reply.get("msg").unwrap_or("none")
            ))),
        }
    }
}

/// A value as it travels in a PMI-2 `kvs-put`: `%` and `;` as `%25` and
/// `%3B` (undone by `codec::decode_text` on the get). PMI-2 says a `;` in a
/// value is doubled, but Slurm's `mpi/pmi2` server does not undo that (a
/// business card came back cut at its first `;`), so no `;` may travel.
fn escape_pmi2_value(value: &str) -> String {
    value.replace('%', "%25").replace(';', "%3B")
}

/// The PMI wire to speak over `PMI_FD`: `RESMPI_PMI=1|2` when set, else
/// PMI-2 where Slurm's `mpi/pmi2` started the process (`PMI_JOBID` in a
/// Slurm job, without the `RESMPI_JOB_ID` that resmpi's mpiexec, which
/// sets `PMI_JOBID` too, gives every rank), else PMI-1 (hydra).
fn wire_from(lookup: &impl Fn(&str) -> Option<String>) -> Result<Wire, PmiError> {
    match lookup("RESMPI_PMI").as_deref().map(str::trim) {
        Some("1") => Ok(Wire::Pmi1),
        Some("2") => Ok(Wire::Pmi2),
        Some(other) => Err(PmiError::new(format!(
            "RESMPI_PMI={other:?}: expected 1 or 2 (the PMI version to speak over PMI_FD)"
        ))),
        None if lookup("PMI_JOBID").is_some()
            && lookup("SLURM_JOB_ID").is_some()
            && lookup("RESMPI_JOB_ID").is_none() =>
        {
            Ok(Wire::Pmi2)
        }
        None => Ok(Wire::Pmi1),
    }
}

/// This process's place among the tasks on its node under Slurm:
/// `SLURM_LOCALID`, and the count for `SLURM_NODEID` in
/// `SLURM_STEP_TASKS_PER_NODE` (`2(x3),1`: two tasks on each of the first
/// three nodes, one on the fourth). None outside Slurm or when malformed.
fn slurm_local_layout(lookup: &impl Fn(&str) -> Option<String>) -> Option<(u32, u32)> {
    let local_rank = lookup("SLURM_LOCALID")?.trim().parse::<u32>().ok()?;
    let node = lookup("SLURM_NODEID")?.trim().parse::<usize>().ok()?;
    let tasks = lookup("SLURM_STEP_TASKS_PER_NODE")?;
    let mut nodes_before = 0usize;
    for group in tasks.trim().split(',') {
        let (count, repeat) = match group.split_once("(x") {
            Some((count, repeat)) => (count, repeat.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (group, 1),
        };
        let count = count.parse::<u32>().ok()?;
        nodes_before += repeat;
        if node < nodes_before {
            return (local_rank < count).then_some((local_rank, count));
        }
    }
    None
}

/// Reads variable `name` through `lookup` as a number, `None` when unset.
fn number_from<T: std::str::FromStr>(
    lookup: &impl Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<T>, PmiError> {
    match lookup(name) {
        None => Ok(None),
        Some(text) => text.trim().parse::<T>().map(Some).map_err(|_| {
            PmiError::new(format!(
                "environment variable {name}='{text}' is not a valid number"
            ))
        }),
    }
}

fn required_number<T: std::str::FromStr>(
    lookup: &impl Fn(&str) -> Option<String>,
    name: &str,
    reason: &str,
) -> Result<T, PmiError> {
    number_from(lookup, name)?
        .ok_or_else(|| PmiError::new(format!("{name} is not set, but {reason}")))
}

fn parse_field<T: std::str::FromStr>(reply: &PmiLine, key: &str) -> Result<T, PmiError> {
    let text = reply.require(key)?;
    text.parse::<T>().map_err(|_| {
        PmiError::new(format!(
            "field {key}='{text}' of 'cmd={}' is not a valid number",
            reply.command
        ))
    })
}

/// Takes ownership of the inherited PMI descriptor `fd`.
fn stream_from_fd(fd: i32) -> Result<UnixStream, PmiError> {
    if fd < 0 {
        return Err(PmiError::new(format!("PMI_FD={fd} is negative")));
    }
    if PMI_FD_TAKEN.swap(true, Ordering::SeqCst) {
        return Err(PmiError::new(
            "PMI_FD was already taken by an earlier Pmi::from_env in this process",
        ));
    }
    // SAFETY: `fstat` and `fcntl` only read and set flags of `fd` and write
    // into the local `status`; they are sound for any integer, returning -1
    // for a descriptor that is not open. `from_raw_fd` needs exclusive
    // ownership of an open descriptor: the process manager handed `fd` to
    // this process for PMI alone, we checked it is an open socket, and
    // PMI_FD_TAKEN makes this the only place that takes it.
    unsafe {
        let mut status: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut status) != 0 {
            return Err(PmiError::new(format!(
                "PMI_FD={fd} is not an open file descriptor: {}",
                io::Error::last_os_error()
            )));
        }
        if status.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return Err(PmiError::new(format!("PMI_FD={fd} is not a socket")));
        }
        // Programs this rank execs must not inherit the PMI connection.
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        Ok(UnixStream::from_raw_fd(fd))
    }
}

impl Pmi {
    /// Connects to the process manager named by the environment: `PMI_FD`
    /// (an inherited socket, as hydra and our `mpiexec` set) or
    /// `PMI_PORT=host:port` (+ `PMI_ID`). With neither set, returns a
    /// singleton: rank 0 of 1, put/get on a local map, barrier a no-op.
    pub fn from_env() -> Result<Pmi, PmiError> {
        Pmi::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Pmi, PmiError> {
        let local_rank = number_from::<u32>(&lookup, "MPI_LOCALRANKID")?.unwrap_or(0);
        let local_size = number_from::<u32>(&lookup, "MPI_LOCALNRANKS")?.unwrap_or(1);
        // Slurm gives no MPI_LOCAL*: its own variables say the same.
        let (local_rank, local_size) = match slurm_local_layout(&lookup) {
            Some(layout) if lookup("MPI_LOCALRANKID").is_none() => layout,
            _ => (local_rank, local_size),
        };
        if let Some(fd) = number_from::<i32>(&lookup, "PMI_FD")? {
            let reason = "PMI_FD is (the process manager must say which rank this is)";
            let rank = required_number::<u32>(&lookup, "PMI_RANK", reason)?;
            let size = required_number::<u32>(&lookup, "PMI_SIZE", reason)?;
            let channel = Channel::new(Stream::Unix(stream_from_fd(fd)?));
            return match wire_from(&lookup)? {
                Wire::Pmi1 => Pmi::handshake(channel, rank, size, local_rank, local_size),
                Wire::Pmi2 => {
                    let job = lookup("PMI_JOBID");
                    Pmi::handshake_pmi2(channel, job.as_deref(), rank, local_rank, local_size)
                }
            };
        }
        if let Some(address) = lookup("PMI_PORT") {
            let stream = TcpStream::connect(address.trim()).map_err(|error| {
                PmiError::new(format!(
                    "cannot connect to the process manager at PMI_PORT={address}: {error}"
                ))
            })?;
            let _ = stream.set_nodelay(true);
            let mut channel = Channel::new(Stream::Tcp(stream));
            let identity = lookup("PMI_ID")
                .or_else(|| lookup("PMI_RANK"))
                .unwrap_or_else(|| "0".to_string());
            // Our mpiexec gives remote ranks a token to prove they belong to
            // the job; other process managers do not (and get no token=).
            let token = lookup("RESMPI_PMI_TOKEN");
            let (rank, size) = Pmi::initack(
                &mut channel,
                identity.trim(),
                token.as_deref().map(str::trim),
            )?;
            return Pmi::handshake(channel, rank, size, local_rank, local_size);
        }
        if lookup("PMIX_NAMESPACE").is_some() {
            return Pmi::from_pmix();
        }
        // Without a PMI connection this process would run alone: say so
        // where the environment shows it was started as one of many.
        // SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: srun's tasks have it, a
        // batch script that runs the program itself (one process) does not.
        if let Some(tasks) =
            number_from::<u32>(&lookup, "SLURM_STEP_NUM_TASKS")?.filter(|&tasks| tasks > 1)
        {
            return Err(PmiError::new(format!(
                "started by Slurm as one of {tasks} tasks without a PMI connection \
                 (srun --mpi=none?): use 'srun --mpi=pmi2'"
            )));
        }
        Ok(Pmi {
            transport: Transport::Singleton(HashMap::new()),
            rank: 0,
            size: 1,
            local_rank: 0,
            local_size: 1,
            kvs_name: format!("singleton_kvs_{}", std::process::id()),
            appnum: 0,
            universe_size: 1,
            key_max_bytes: 256,
            value_max_bytes: 4096,
            finalized: false,
        })
    }

    /// The `PMI_PORT` preamble: `cmd=initack pmiid=ID`, answered by
    /// `cmd=initack` and `cmd=set size=`, `rank=`, `debug=` lines.
    fn initack(
        channel: &mut Channel,
        identity: &str,
        token: Option<&str>,
    ) -> Result<(u32, u32), PmiError> {
        check_token(identity, false).map_err(PmiError::new)?;
        let mut request = PmiLine::new("initack").with("pmiid", identity);
        if let Some(token) = token.filter(|token| !token.is_empty()) {
            check_token(token, false).map_err(PmiError::new)?;
            request = request.with("token", token);
        }
        channel.request(&request, "initack")?;
        let (mut rank, mut size, mut debug_seen) = (None, None, false);
        while rank.is_none() || size.is_none() || !debug_seen {
            let line = channel.receive()?;
            if line.command != "set" {
                return Err(PmiError::new(format!(
                    "expected 'cmd=set' after initack, got '{}'",
                    line.encode().trim_end()
                )));
            }
            if line.get("size").is_some() {
                size = Some(parse_field::<u32>(&line, "size")?);
            } else if line.get("rank").is_some() {
                rank = Some(parse_field::<u32>(&line, "rank")?);
            } else if line.get("debug").is_some() {
                debug_seen = true;
            }
        }
        Ok((rank.unwrap_or(0), size.unwrap_or(1)))
    }

    fn handshake(
        mut channel: Channel,
        rank: u32,
        size: u32,
        local_rank: u32,
        local_size: u32,
    ) -> Result<Pmi, PmiError> {
        if size == 0 || rank >= size {
            return Err(PmiError::new(format!(
                "rank {rank} is not within a job of size {size}"
            )));
        }
        channel.request(
            &PmiLine::new("init")
                .with("pmi_version", 1)
                .with("pmi_subversion", 1),
            "response_to_init",
        )?;
        let maxes = channel.request(&PmiLine::new("get_maxes"), "maxes")?;
        let key_max_bytes = parse_field::<usize>(&maxes, "keylen_max")?;
        let value_max_bytes = parse_field::<usize>(&maxes, "vallen_max")?;
        let appnum_reply = channel.request(&PmiLine::new("get_appnum"), "appnum")?;
        let appnum = parse_field::<i32>(&appnum_reply, "appnum")?;
        let kvs_reply = channel.request(&PmiLine::new("get_my_kvsname"), "my_kvsname")?;
        let kvs_name = kvs_reply.require("kvsname")?.to_string();
        let universe_reply =
            channel.request(&PmiLine::new("get_universe_size"), "universe_size")?;
        // Hydra answers -1 when no universe size was given: use the job size.
        let universe_size = match parse_field::<i64>(&universe_reply, "size")? {
            reported if reported > 0 => u32::try_from(reported).unwrap_or(u32::MAX),
            _ => size,
        };
        Ok(Pmi {
            transport: Transport::Connected(channel),
            rank,
            size,
            local_rank,
            local_size: local_size.max(1),
            kvs_name,
            appnum,
            universe_size,
            key_max_bytes,
            value_max_bytes,
            finalized: false,
        })
    }

    /// PMIx (Slurm's `srun --mpi=pmix`, prterun): through libpmix.
    fn from_pmix() -> Result<Pmi, PmiError> {
        let (client, job) = crate::pmix::PmixClient::init()?;
        if job.size == 0 || job.rank >= job.size {
            return Err(PmiError::new(format!(
                "PMIx: rank {} is not within a job of size {}",
                job.rank, job.size
            )));
        }
        Ok(Pmi {
            transport: Transport::Pmix(client),
            rank: job.rank,
            size: job.size,
            local_rank: job.local_rank,
            local_size: job.local_size,
            kvs_name: job.namespace,
            appnum: 0,
            universe_size: job.size,
            key_max_bytes: 511,
            value_max_bytes: crate::pmix::VALUE_MAX_BYTES - 1,
            finalized: false,
        })
    }

    /// PMI-2 (Slurm's `srun --mpi=pmi2`, hydra): the version is agreed on
    /// in a PMI-1 line (`cmd=init pmi_version=2`), then `fullinit` says
    /// rank, size and appnum, and `job-getid` names the key-value space.
    fn handshake_pmi2(
        mut channel: Channel,
        job: Option<&str>,
        rank: u32,
        local_rank: u32,
        local_size: u32,
    ) -> Result<Pmi, PmiError> {
        let reply = channel.request(
            &PmiLine::new("init")
                .with("pmi_version", 2)
                .with("pmi_subversion", 0),
            "response_to_init",
        )?;
        if reply.get("pmi_version") != Some("2") {
            return Err(PmiError::new(format!(
                "the process manager does not speak PMI-2 (it answered '{}'); set RESMPI_PMI=1",
                reply.encode().trim_end()
            )));
        }
        channel.wire = Wire::Pmi2;
        // Slurm wants the job it set in PMI_JOBID back (it refuses the
        // fullinit without it); hydra sets none.
        let mut fullinit = PmiLine::new("fullinit");
        if let Some(job) = job {
            check_token(job, false).map_err(PmiError::new)?;
            fullinit = fullinit.with("pmijobid", job.trim());
        }
        let init = channel.request(
            &fullinit.with("pmirank", rank).with("threaded", "FALSE"),
            "fullinit-response",
        )?;
        let rank = parse_field::<u32>(&init, "rank")?;
        let size = parse_field::<u32>(&init, "size")?;
        if size == 0 || rank >= size {
            return Err(PmiError::new(format!(
                "rank {rank} is not within a job of size {size}"
            )));
        }
        let appnum = init
            .get("appnum")
            .map_or(Ok(0), |_| parse_field::<i32>(&init, "appnum"))?;
        let job = channel.request(&PmiLine::new("job-getid"), "job-getid-response")?;
        let kvs_name = job.require("jobid")?.to_string();
        Ok(Pmi {
            transport: Transport::Connected(channel),
            rank,
            size,
            local_rank,
            local_size: local_size.max(1),
            kvs_name,
            appnum,
            universe_size: size,
            // PMI2_MAX_KEYLEN and PMI2_MAX_VALLEN of MPICH's and Slurm's pmi2.h.
            key_max_bytes: 64,
            value_max_bytes: 1024,
            finalized: false,
        })
    }

    /// This process's rank in the job (`PMI_RANK`).
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks in the job (`PMI_SIZE`).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Rank among the ranks on this host (`MPI_LOCALRANKID`, else 0).
    pub fn local_rank(&self) -> u32 {
        self.local_rank
    }

    /// Number of ranks on this host (`MPI_LOCALNRANKS`, else 1).
    pub fn local_size(&self) -> u32 {
        self.local_size
    }

    /// Name of the job's key-value space.
    pub fn kvs_name(&self) -> &str {
        &self.kvs_name
    }

    /// Which executable of an MPMD launch this is (0 for a single one).
    pub fn appnum(&self) -> i32 {
        self.appnum
    }

    /// Universe size; the job size when the process manager gives none.
    pub fn universe_size(&self) -> u32 {
        self.universe_size
    }

    /// Longest key the process manager accepts, in bytes (hydra: 64).
    pub fn key_max_bytes(&self) -> usize {
        self.key_max_bytes
    }

    /// Longest value the process manager accepts, in bytes (hydra: 1024).
    pub fn value_max_bytes(&self) -> usize {
        self.value_max_bytes
    }

    /// Whether no process manager is attached (rank 0 of 1).
    pub fn is_singleton(&self) -> bool {
        matches!(self.transport, Transport::Singleton(_))
    }

    fn check_usable(&self, operation: &str) -> Result<(), PmiError> {
        if self.finalized {
            return Err(PmiError::new(format!("PMI {operation} after finalize")));
        }
        Ok(())
    }

    fn check_key(&self, key: &str) -> Result<(), PmiError> {
        check_token(key, true).map_err(PmiError::new)?;
        if key.len() > self.key_max_bytes {
            return Err(PmiError::new(format!(
                "PMI key '{key}' is {} bytes, longer than the process manager's limit of {}",
                key.len(),
                self.key_max_bytes
            )));
        }
        Ok(())
    }

    /// Publishes `key=value` in the job's key-value space. Other ranks see it
    /// after the next [`Pmi::barrier`] (hydra makes puts visible only then).
    /// Keys and values must not contain spaces or control characters (keys
    /// also no `=`) and must fit the process manager's limits.
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        self.check_usable("put")?;
        self.check_key(key)?;
        check_token(value, false).map_err(PmiError::new)?;
        if value.len() > self.value_max_bytes {
            return Err(PmiError::new(format!(
                "PMI value for key '{key}' is {} bytes, longer than the process manager's limit of {}",
                value.len(),
                self.value_max_bytes
            )));
        }
        let kvs_name = self.kvs_name.clone();
        match &mut self.transport {
            Transport::Singleton(map) => {
                map.insert(key.to_string(), value.to_string());
                Ok(())
            }
            Transport::Pmix(client) => client.put(key, value),
            Transport::Connected(channel) => {
                let (request, expected) = match channel.wire {
                    Wire::Pmi1 => (
                        PmiLine::new("put")
                            .with("kvsname", kvs_name)
                            .with("key", key)
                            .with("value", value),
                        "put_result",
                    ),
                    Wire::Pmi2 => (
                        PmiLine::new("kvs-put")
                            .with("key", key)
                            .with("value", escape_pmi2_value(value)),
                        "kvs-put-response",
                    ),
                };
                channel
                    .request(&request, expected)
                    .map(|_| ())
                    .map_err(|error| {
                        PmiError::new(format!("put of key '{key}': {}", error.message()))
                    })
            }
        }
    }

    /// Waits until every rank of the job has entered the barrier; puts made
    /// before it are visible to gets after it.
    pub fn barrier(&mut self) -> Result<(), PmiError> {
        self.check_usable("barrier")?;
        match &mut self.transport {
            Transport::Singleton(_) => Ok(()),
            Transport::Pmix(client) => client.fence(),
            Transport::Connected(channel) => match channel.wire {
                Wire::Pmi1 => channel.request(&PmiLine::new("barrier_in"), "barrier_out"),
                Wire::Pmi2 => channel.request(&PmiLine::new("kvs-fence"), "kvs-fence-response"),
            }
            .map(|_| ()),
        }
    }

    /// The value rank `owner` put under `key`; an error when there is
    /// none. PMI-1 and PMI-2 have one key-value space for the job and need
    /// only the key; PMIx keeps each process's keys apart and needs both.
    pub fn get_from(&mut self, owner: u32, key: &str) -> Result<String, PmiError> {
        self.check_usable("get")?;
        self.check_key(key)?;
        let kvs_name = self.kvs_name.clone();
        match &mut self.transport {
            Transport::Singleton(map) => map
                .get(key)
                .cloned()
                .ok_or_else(|| PmiError::new(format!("PMI get: no value for key '{key}'"))),
            Transport::Pmix(client) => client.get(owner, key)?.ok_or_else(|| {
                PmiError::new(format!(
                    "PMI get: rank {owner} put no value for key '{key}'"
                ))
            }),
            Transport::Connected(channel) => {
                let (request, expected) = match channel.wire {
                    Wire::Pmi1 => (
                        PmiLine::new("get")
                            .with("kvsname", kvs_name)
                            .with("key", key),
                        "get_result",
                    ),
                    Wire::Pmi2 => (
                        PmiLine::new("kvs-get")
                            .with("jobid", kvs_name)
                            .with("srcid", -1)
                            .with("key", key),
                        "kvs-get-response",
                    ),
                };
                let reply = channel.request(&request, expected).map_err(|error| {
                    PmiError::new(format!("get of key '{key}': {}", error.message()))
                })?;
                if reply.get("found").is_some_and(|found| found != "TRUE") {
                    return Err(PmiError::new(format!("PMI get: no value for key '{key}'")));
                }
                let value = reply.require("value")?;
                Ok(match channel.wire {
                    Wire::Pmi1 => value.to_string(),
                    Wire::Pmi2 => crate::codec::decode_text(value),
                })
            }
        }
    }

    /// The value some rank put under `key`; an error when there is none.
    /// Under PMIx, only what rank 0 put (see [`Pmi::get_from`]).
    pub fn get(&mut self, key: &str) -> Result<String, PmiError> {
        self.get_from(0, key)
    }

    /// Asks the process manager to end the whole job with `exit_code`.
    /// Sends `cmd=abort exitcode=N message=...` without waiting for a reply
    /// (the manager kills us), with a bounded write so it cannot hang. The
    /// message travels escaped (`codec::encode_text`: a space is `%20`), so
    /// resmpi's mpiexec shows it as written; the caller should still print
    /// it and then exit.
    pub fn abort(&mut self, exit_code: i32, message: &str) {
        if let Transport::Pmix(client) = &mut self.transport {
            client.abort(exit_code, message);
        }
        if let Transport::Connected(channel) = &mut self.transport {
            let _ = channel
                .stream
                .set_write_timeout(Some(Duration::from_millis(ABORT_WRITE_TIMEOUT_MS)));
            let message: String = message.chars().take(512).collect();
            let message = crate::codec::encode_text(&message);
            let request = match channel.wire {
                Wire::Pmi1 => {
                    let request = PmiLine::new("abort").with("exitcode", exit_code);
                    if message.is_empty() {
                        request
                    } else {
                        request.with("message", message)
                    }
                }
                // PMI-2's abort carries no exit code: the manager ends the job.
                Wire::Pmi2 => PmiLine::new("abort")
                    .with("isworld", "TRUE")
                    .with("msg", message),
            };
            let _ = channel.send(&request);
        }
    }

    /// Subscribes to failure notices: sends `cmd=resmpi_watch_failures`,
    /// expects `cmd=resmpi_watch_failures_ok`, then hands the reading side
    /// of the connection to a thread that records every
    /// `cmd=resmpi_failure rank=R` line in `notices` (deaths before the
    /// subscription come first) and passes every other line on as the reply
    /// to this client's next request. Only resmpi's `mpiexec` speaks this;
    /// call it only when it started the job. A singleton has nobody to die.
    pub fn watch_failures(&mut self, notices: Arc<FailureNotices>) -> Result<(), PmiError> {
        let Transport::Connected(channel) = &mut self.transport else {
            return Ok(());
        };
        if channel.replies.is_some() {
            return Ok(());
        }
        channel.request(
            &PmiLine::new("resmpi_watch_failures"),
            "resmpi_watch_failures_ok",
        )?;
        let stream = channel
            .stream
            .try_clone()
            .map_err(|error| PmiError::new(format!("cannot watch failure notices: {error}")))?;
        let mut reader = Channel::new(stream);
        reader.pending = std::mem::take(&mut channel.pending);
        let (sender, receiver) = mpsc::channel();
        channel.replies = Some(receiver);
        std::thread::Builder::new()
            .name("resmpi-notices".into())
            .spawn(move || read_notices(reader, &notices, &sender))
            .map_err(|error| PmiError::new(format!("cannot start the notice thread: {error}")))?;
        Ok(())
    }

    /// In a process forked from this one (replication's recovery): the
    /// connection `stream` to the launcher, already registered as process
    /// `rank`, with everything else this one learnt at init (the key-value
    /// space, sizes, limits). This process's own connection is not touched
    /// (it belongs to the forker): [`Pmi::connection_fd`] names it, to be
    /// closed.
    pub fn forked(&self, rank: u32, stream: UnixStream) -> Pmi {
        Pmi {
            transport: Transport::Connected(Channel::new(Stream::Unix(stream))),
            rank,
            size: self.size,
            local_rank: self.local_rank,
            local_size: self.local_size,
            kvs_name: self.kvs_name.clone(),
            appnum: self.appnum,
            universe_size: self.universe_size,
            key_max_bytes: self.key_max_bytes,
            value_max_bytes: self.value_max_bytes,
            finalized: false,
        }
    }

    /// A substitute forked pid `pid` as incarnation `incarnation` of dead
    /// process `rank` (replication's recovery): `cmd=resmpi_fork rank=P
    /// incarnation=I pid=X`, answered `cmd=resmpi_fork_ok rc=0` once
    /// resmpi's mpiexec owns the new process. Only it speaks this.
    pub fn announce_fork(&mut self, rank: u32, incarnation: u32, pid: i32) -> Result<(), PmiError> {
        let Transport::Connected(channel) = &mut self.transport else {
            return Err(PmiError::new(
                "a forked replica needs resmpi's mpiexec (no PMI connection)",
            ));
        };
        channel.request(
            &PmiLine::new("resmpi_fork")
                .with("rank", rank)
                .with("incarnation", incarnation)
                .with("pid", pid),
            "resmpi_fork_ok",
        )?;
        Ok(())
    }

    /// The descriptor of the connection to the process manager, if any.
    pub fn connection_fd(&self) -> Option<i32> {
        match &self.transport {
            Transport::Connected(channel) => Some(match &channel.stream {
                Stream::Unix(stream) => stream.as_raw_fd(),
                Stream::Tcp(stream) => stream.as_raw_fd(),
            }),
            _ => None,
        }
    }

    /// A replacement process (incarnation `incarnation` of this rank, see
    /// `RESMPI_INCARNATION`) announces that it listens at `address`:
    /// sends `cmd=resmpi_rejoin incarnation=I address=A`, expects
    /// `cmd=resmpi_rejoin_ok peers=R:I,R:I,...` (`peers=-` for none): the
    /// live ranks, each with its current incarnation, that were just told
    /// to connect to it. Only resmpi's `mpiexec` speaks this.
    pub fn announce_rejoin(
        &mut self,
        incarnation: u32,
        address: &str,
    ) -> Result<Vec<(u32, u32)>, PmiError> {
        self.announce_rejoin_with_cut(incarnation, address, None)
            .map(|answer| answer.peers)
    }

    /// [`Pmi::announce_rejoin`] for a replica forked by a substitute: the
    /// notice every other process gets carries `cut` (hex) as `cut=`. Also
    /// returns the cuts (hex) of the forked replicas among the peers
    /// (`cuts=R:HEX,...`, absent for none), whose notices it may have
    /// missed.
    pub fn announce_rejoin_with_cut(
        &mut self,
        incarnation: u32,
        address: &str,
        cut: Option<&str>,
    ) -> Result<RejoinAnswer, PmiError> {
        let Transport::Connected(channel) = &mut self.transport else {
            return Err(PmiError::new(
                "a replacement process needs the launcher that started it (no PMI connection)",
            ));
        };
        let mut request = PmiLine::new("resmpi_rejoin")
            .with("incarnation", incarnation)
            .with("address", address);
        if let Some(cut) = cut {
            request = request.with("cut", cut);
        }
        let reply = channel.request(&request, "resmpi_rejoin_ok")?;
        let peers = parse_peer_incarnations(reply.require("peers")?)?;
        let cuts = reply
            .get("cuts")
            .map(|cuts| {
                cuts.split(',')
                    .filter_map(|item| {
                        let (rank, cut) = item.split_once(':')?;
                        Some((rank.parse().ok()?, cut.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(RejoinAnswer { peers, cuts })
    }

    /// MPI_Publish_name: `cmd=publish_name service=S port=P` (hydra's
    /// PMI-1 name service, which resmpi's mpiexec also serves). Only over a
    /// PMI-1 connection: PMI-2 and PMIx have none this client speaks.
    pub fn publish_name(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        self.name_request(
            PmiLine::new("publish_name")
                .with("service", crate::codec::encode_text(service))
                .with("port", crate::codec::encode_text(port)),
            "publish_result",
        )
        .map(|_| ())
    }

    /// MPI_Lookup_name: the port published under `service`.
    pub fn lookup_name(&mut self, service: &str) -> Result<String, PmiError> {
        let reply = self.name_request(
            PmiLine::new("lookup_name").with("service", crate::codec::encode_text(service)),
            "lookup_result",
        )?;
        Ok(crate::codec::decode_text(reply.require("port")?))
    }

    /// MPI_Unpublish_name.
    pub fn unpublish_name(&mut self, service: &str) -> Result<(), PmiError> {
        self.name_request(
            PmiLine::new("unpublish_name").with("service", crate::codec::encode_text(service)),
            "unpublish_result",
        )
        .map(|_| ())
    }

    /// MPI_Comm_spawn's request to resmpi's mpiexec (`cmd=resmpi_spawn
    /// count=N script=S parent=P`): start N processes running the shell
    /// script S with `RESMPI_SPAWN_PARENT=P`; the answer is the first
    /// job-wide endpoint number of the new processes.
    pub fn spawn(&mut self, count: u32, script: &str, parent: &str) -> Result<u32, PmiError> {
        let reply = self.name_request(
            PmiLine::new("resmpi_spawn")
                .with("count", count)
                .with("script", crate::codec::encode_text(script))
                .with("parent", crate::codec::encode_text(parent)),
            "resmpi_spawn_result",
        )?;
        reply
            .require("base")?
            .parse()
            .map_err(|_| PmiError::new("mpiexec's spawn reply has no base"))
    }

    fn name_request(&mut self, request: PmiLine, expected: &str) -> Result<PmiLine, PmiError> {
        self.check_usable(&request.command.clone())?;
        match &mut self.transport {
            Transport::Connected(channel) if channel.wire == Wire::Pmi1 => {
                channel.request(&request, expected)
            }
            _ => Err(PmiError::new(
                "no name service: the process manager is not a PMI-1 one (resmpi's mpiexec or hydra)",
            )),
        }
    }

    /// Tells the process manager this rank is done (`cmd=finalize`) and waits
    /// for `finalize_ack`. A second call does nothing.
    pub fn finalize(&mut self) -> Result<(), PmiError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        match &mut self.transport {
            Transport::Singleton(_) => Ok(()),
            Transport::Pmix(client) => client.finalize(),
            Transport::Connected(channel) => match channel.wire {
                Wire::Pmi1 => channel.request(&PmiLine::new("finalize"), "finalize_ack"),
                Wire::Pmi2 => channel.request(&PmiLine::new("finalize"), "finalize-response"),
            }
            .map(|_| ()),
        }
    }
}

/// mpiexec's answer to a re-join announcement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RejoinAnswer {
    /// The live ranks told to connect, each with its incarnation.
    pub peers: Vec<(u32, u32)>,
    /// The fork cuts (hex) of the replicas forked by a substitute among
    /// them (replication's recovery), whose notices a process that
    /// re-joins may have missed.
    pub cuts: Vec<(u32, String)>,
}

/// `R:I,R:I,...` (or `-`): ranks and their incarnations.
fn parse_peer_incarnations(text: &str) -> Result<Vec<(u32, u32)>, PmiError> {
    if text == "-" {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|item| {
            let parsed = item.split_once(':').and_then(|(rank, incarnation)| {
                Some((rank.parse().ok()?, incarnation.parse().ok()?))
            });
            parsed.ok_or_else(|| {
                PmiError::new(format!(
                    "'cmd=resmpi_rejoin_ok' lists peer '{item}', not RANK:INCARNATION"
                ))
            })
        })
        .collect()
}

/// The notice thread: failure notices go to `notices`, other lines (replies
/// to this rank's requests) to `replies`, until the connection closes.
fn read_notices(
    mut reader: Channel,
    notices: &FailureNotices,
    replies: &mpsc::Sender<Result<PmiLine, PmiError>>,
) {
    loop {
        match reader.receive() {
            Ok(line) if line.command == "resmpi_failure" => {
                let incarnation = line
                    .get("incarnation")
                    .and_then(|text| text.parse::<u32>().ok())
                    .unwrap_or(0);
                match line.get("rank").and_then(|rank| rank.parse::<u32>().ok()) {
                    Some(rank) => notices.note_failure(rank, incarnation),
                    None => eprintln!(
                        "resmpi: ignoring a failure notice without a valid rank: '{}'",
                        line.encode().trim_end()
                    ),
                }
            }
            Ok(line) if line.command == "resmpi_rejoin" => {
                let number = |key: &str| line.get(key).and_then(|text| text.parse::<u32>().ok());
                match (number("rank"), number("incarnation"), line.get("address")) {
                    (Some(rank), Some(incarnation), Some(address)) => {
                        notices.note_rejoin_with_cut(
                            rank,
                            incarnation,
                            address.to_string(),
                            line.get("cut").map(str::to_string),
                        )
                    }
                    _ => eprintln!(
                        "resmpi: ignoring a re-join notice without rank, incarnation and address: '{}'",
                        line.encode().trim_end()
                    ),
                }
            }
            Ok(line) => {
                if replies.send(Ok(line)).is_err() {
                    return;
                }
            }
            Err(error) => {
                notices.note_launcher_lost();
                let _ = replies.send(Err(error));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notices::PeerEvent;
    use std::io::{BufRead, BufReader};
    use std::thread;

    /// A scripted server: for each line received, the reply in `script`
    /// (`None` = no reply). Returns the lines it received.
    fn scripted_server(
        stream: UnixStream,
        script: Vec<(&'static str, Option<&'static str>)>,
    ) -> thread::JoinHandle<Vec<String>> {
        thread::spawn(move || {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            let mut received = Vec::new();
            for (expected_prefix, reply) in script {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 {
                    break;
                }
                assert!(line.starts_with(expected_prefix), "got {line:?}");
                received.push(line);
                if let Some(reply) = reply {
                    writer.write_all(reply.as_bytes()).unwrap();
                }
            }
            received
        })
    }

    const HANDSHAKE: [(&str, Option<&str>); 5] = [
        (
            "cmd=init pmi_version=1 pmi_subversion=1",
            Some("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"),
        ),
        (
            "cmd=get_maxes",
            Some("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"),
        ),
        ("cmd=get_appnum", Some("cmd=appnum appnum=0\n")),
        ("cmd=get_my_kvsname", Some("cmd=my_kvsname kvsname=kvs_7\n")),
        ("cmd=get_universe_size", Some("cmd=universe_size size=-1\n")),
    ];

    #[test]
    fn client_speaks_the_hydra_dialogue() {
        let (client, server) = UnixStream::pair().unwrap();
        let mut script = HANDSHAKE.to_vec();
        script.extend([
            (
                "cmd=put kvsname=kvs_7 key=card-1 value=a=b",
                Some("cmd=put_result rc=0 msg=success\n"),
            ),
            ("cmd=barrier_in", Some("cmd=barrier_out\n")),
            (
                "cmd=get kvsname=kvs_7 key=card-0",
                Some("cmd=get_result rc=0 msg=success value=xyz\n"),
            ),
            (
                "cmd=get kvsname=kvs_7 key=nothing",
                Some("cmd=get_result rc=-1 msg=key_nothing_not_found value=unknown\n"),
            ),
            ("cmd=finalize", Some("cmd=finalize_ack\n")),
        ]);
        let server = scripted_server(server, script);
        let mut pmi = Pmi::handshake(Channel::new(Stream::Unix(client)), 1, 2, 1, 2).unwrap();
        assert_eq!((pmi.rank(), pmi.size()), (1, 2));
        assert_eq!((pmi.local_rank(), pmi.local_size()), (1, 2));
        assert_eq!(pmi.kvs_name(), "kvs_7");
        assert_eq!(pmi.universe_size(), 2, "-1 falls back to the job size");
        assert_eq!(pmi.value_max_bytes(), 1024);
        pmi.put("card-1", "a=b").unwrap();
        pmi.barrier().unwrap();
        assert_eq!(pmi.get("card-0").unwrap(), "xyz");
        let error = pmi.get("nothing").unwrap_err().to_string();
        assert!(
            error.contains("nothing") && error.contains("rc=-1"),
            "{error}"
        );
        pmi.finalize().unwrap();
        pmi.finalize().unwrap();
        assert!(pmi.put("late", "x").is_err());
        assert_eq!(server.join().unwrap().len(), 10);
    }

    #[test]
    fn the_name_service_speaks_hydras_lines_with_escaped_names() {
        let (client, server) = UnixStream::pair().unwrap();
        let mut script = HANDSHAKE.to_vec();
        script.extend([
            (
                "cmd=publish_name service=my%20service port=resmpi-port:kvs_7:1:0\n",
                Some("cmd=publish_result rc=0 msg=success\n"),
            ),
            (
                "cmd=lookup_name service=my%20service\n",
                Some("cmd=lookup_result rc=0 msg=success port=resmpi-port:kvs_7:1:0\n"),
            ),
            (
                "cmd=unpublish_name service=my%20service\n",
                Some("cmd=unpublish_result rc=-1 msg=service_not_published\n"),
            ),
            ("cmd=finalize", Some("cmd=finalize_ack\n")),
        ]);
        let server = scripted_server(server, script);
        let mut pmi = Pmi::handshake(Channel::new(Stream::Unix(client)), 1, 2, 1, 2).unwrap();
        pmi.publish_name("my service", "resmpi-port:kvs_7:1:0")
            .unwrap();
        assert_eq!(
            pmi.lookup_name("my service").unwrap(),
            "resmpi-port:kvs_7:1:0"
        );
        let error = pmi.unpublish_name("my service").unwrap_err().to_string();
        assert!(error.contains("service_not_published"), "{error}");
        pmi.finalize().unwrap();
        assert!(pmi.lookup_name("late").is_err());
        assert_eq!(server.join().unwrap().len(), 9);
    }

    #[test]
    fn failure_notices_arrive_between_replies_and_replies_still_reach_requests() {
        let (client, server) = UnixStream::pair().unwrap();
        let mut script = HANDSHAKE.to_vec();
        script.extend([
            (
                "cmd=resmpi_watch_failures",
                // A backlog notice right behind the answer, in one write.
                Some("cmd=resmpi_watch_failures_ok\ncmd=resmpi_failure rank=2 incarnation=0\n"),
            ),
            (
                "cmd=get kvsname=kvs_7 key=k",
                // A notice between a request and its reply.
                Some("cmd=resmpi_failure rank=0 incarnation=0\ncmd=get_result rc=0 msg=success value=v\n"),
            ),
            ("cmd=finalize", Some("cmd=finalize_ack\n")),
        ]);
        let server = scripted_server(server, script);
        let mut pmi = Pmi::handshake(Channel::new(Stream::Unix(client)), 1, 3, 1, 3).unwrap();
        let notices = Arc::new(FailureNotices::new());
        pmi.watch_failures(notices.clone()).unwrap();
        assert_eq!(pmi.get("k").unwrap(), "v");
        pmi.finalize().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while notices.count() < 2 && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        let death = |rank| crate::notices::PeerEvent::Failed {
            rank,
            incarnation: 0,
        };
        assert_eq!(notices.events_since(0), vec![death(2), death(0)]);
        assert_eq!(server.join().unwrap().len(), 8);
        // The server hung up: the thread says no notice can come any more.
        while !notices.launcher_lost() && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        assert!(notices.launcher_lost());
    }

    #[test]
    fn a_replacement_announces_its_rejoin_and_survivors_read_rejoin_notices() {
        let (client, server) = UnixStream::pair().unwrap();
        let mut script = HANDSHAKE.to_vec();
        script.extend([
            (
                "cmd=resmpi_rejoin incarnation=1 address=10.0.0.1:77",
                Some("cmd=resmpi_rejoin_ok rc=0 peers=0:0,2:3\n"),
            ),
            (
                "cmd=resmpi_watch_failures",
                Some(concat!(
                    "cmd=resmpi_watch_failures_ok\n",
                    "cmd=resmpi_failure rank=2 incarnation=3\n",
                    "cmd=resmpi_rejoin rank=2 incarnation=4 address=10.0.0.2:9\n",
                    "cmd=resmpi_rejoin rank=2 incarnation=5\n",
                )),
            ),
            ("cmd=finalize", Some("cmd=finalize_ack\n")),
        ]);
        let server = scripted_server(server, script);
        let mut pmi = Pmi::handshake(Channel::new(Stream::Unix(client)), 1, 3, 1, 3).unwrap();
        assert_eq!(
            pmi.announce_rejoin(1, "10.0.0.1:77").unwrap(),
            vec![(0, 0), (2, 3)]
        );
        let notices = Arc::new(FailureNotices::new());
        pmi.watch_failures(notices.clone()).unwrap();
        pmi.finalize().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !notices.launcher_lost() && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        // The notice without an address is ignored (with a message).
        assert_eq!(
            notices.events_since(0),
            vec![
                PeerEvent::Failed {
                    rank: 2,
                    incarnation: 3
                },
                PeerEvent::Rejoined {
                    rank: 2,
                    incarnation: 4,
                    address: "10.0.0.2:9".into(),
                    cut: None,
                },
            ]
        );
        server.join().unwrap();
        assert_eq!(parse_peer_incarnations("-").unwrap(), vec![]);
        assert!(parse_peer_incarnations("0:0,x").is_err());
    }

    #[test]
    fn put_rejects_values_the_wire_cannot_carry_without_sending() {
        let (client, server) = UnixStream::pair().unwrap();
        let server = scripted_server(server, HANDSHAKE.to_vec());
        let mut pmi = Pmi::handshake(Channel::new(Stream::Unix(client)), 0, 1, 0, 1).unwrap();
        assert!(pmi.put("key", "has space").is_err());
        assert!(pmi.put("key", "line\nbreak").is_err());
        assert!(pmi.put("k=y", "value").is_err());
        assert!(pmi.put(&"k".repeat(65), "value").is_err());
        assert!(pmi.put("key", &"v".repeat(1025)).is_err());
        drop(pmi);
        assert_eq!(server.join().unwrap().len(), 5);
    }

    #[test]
    fn lost_connection_is_an_error_not_a_hang() {
        let (client, server) = UnixStream::pair().unwrap();
        let server = scripted_server(server, HANDSHAKE.to_vec());
        let mut pmi = Pmi::handshake(Channel::new(Stream::Unix(client)), 0, 2, 0, 1).unwrap();
        server.join().unwrap();
        let error = pmi.barrier().unwrap_err().to_string();
        assert!(error.contains("closed"), "{error}");
    }

    #[test]
    fn abort_does_not_wait_for_a_reply() {
        let (client, server) = UnixStream::pair().unwrap();
        let mut script = HANDSHAKE.to_vec();
        script.push(("cmd=abort exitcode=3 message=out%20of%20memory", None));
        let server = scripted_server(server, script);
        let mut pmi = Pmi::handshake(Channel::new(Stream::Unix(client)), 0, 2, 0, 1).unwrap();
        pmi.abort(3, "out of memory");
        assert_eq!(server.join().unwrap().len(), 6);
    }

    #[test]
    fn port_mode_reads_rank_and_size_from_initack() {
        let (client, server) = UnixStream::pair().unwrap();
        let server = scripted_server(
            server,
            vec![(
                "cmd=initack pmiid=5",
                Some("cmd=initack\ncmd=set size=8\ncmd=set rank=5\ncmd=set debug=0\n"),
            )],
        );
        let mut channel = Channel::new(Stream::Unix(client));
        assert_eq!(Pmi::initack(&mut channel, "5", None).unwrap(), (5, 8));
        server.join().unwrap();
    }

    #[test]
    fn port_mode_sends_the_job_token_and_reports_a_refusal() {
        let (client, server) = UnixStream::pair().unwrap();
        let server = scripted_server(
            server,
            vec![(
                "cmd=initack pmiid=1 token=abc",
                Some("cmd=initack\ncmd=set size=2\ncmd=set rank=1\ncmd=set debug=0\n"),
            )],
        );
        let mut channel = Channel::new(Stream::Unix(client));
        assert_eq!(
            Pmi::initack(&mut channel, "1", Some("abc")).unwrap(),
            (1, 2)
        );
        server.join().unwrap();
        let (client, server) = UnixStream::pair().unwrap();
        let server = scripted_server(
            server,
            vec![(
                "cmd=initack pmiid=1 token=bad",
                Some("cmd=initack rc=-1 msg=bad_token\n"),
            )],
        );
        let mut channel = Channel::new(Stream::Unix(client));
        let error = Pmi::initack(&mut channel, "1", Some("bad")).unwrap_err();
        assert!(error.to_string().contains("bad_token"), "{error}");
        server.join().unwrap();
    }

    #[test]
    fn empty_environment_gives_a_singleton() {
        let mut pmi = Pmi::from_lookup(|_| None).unwrap();
        assert!(pmi.is_singleton());
        assert_eq!((pmi.rank(), pmi.size(), pmi.universe_size()), (0, 1, 1));
        assert_eq!((pmi.local_rank(), pmi.local_size()), (0, 1));
        pmi.put("key", "value").unwrap();
        pmi.barrier().unwrap();
        assert_eq!(pmi.get("key").unwrap(), "value");
        assert!(pmi.get("other").is_err());
        pmi.abort(1, "ignored in a singleton");
        pmi.finalize().unwrap();
    }

    #[test]
    fn bad_environment_is_a_clear_error() {
        let error = Pmi::from_lookup(|name| (name == "PMI_FD").then(|| "x".to_string()))
            .err()
            .unwrap();
        assert!(error.to_string().contains("PMI_FD"), "{error}");
        let error = Pmi::from_lookup(|name| (name == "PMI_FD").then(|| "9".to_string()))
            .err()
            .unwrap();
        assert!(error.to_string().contains("PMI_RANK"), "{error}");
    }

    /// A PMI-2 server as Slurm's `mpi/pmi2` answers: the PMI-1 `init`
    /// line, then length-prefixed messages. Returns the bodies received.
    fn pmi2_server(
        stream: UnixStream,
        replies: Vec<&'static str>,
    ) -> thread::JoinHandle<Vec<String>> {
        thread::spawn(move || {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert_eq!(line, "cmd=init pmi_version=2 pmi_subversion=0\n");
            writer
                .write_all(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
                .unwrap();
            let mut received = Vec::new();
            for reply in replies {
                let mut header = [0u8; PMI2_LENGTH_BYTES];
                if reader.read_exact(&mut header).is_err() {
                    break;
                }
                let length = PmiLine::parse_pmi2_length(&header).unwrap();
                let mut body = vec![0u8; length];
                reader.read_exact(&mut body).unwrap();
                received.push(String::from_utf8(body).unwrap());
                if !reply.is_empty() {
                    // Slurm right-aligns the length.
                    writer
                        .write_all(format!("{:>6}{reply}", reply.len()).as_bytes())
                        .unwrap();
                }
            }
            received
        })
    }

    #[test]
    fn client_speaks_the_slurm_pmi2_dialogue() {
        let (client, server) = UnixStream::pair().unwrap();
        let server = pmi2_server(
            server,
            vec![
                "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=3;appnum=0;debugged=FALSE;pmiverbose=FALSE;",
                "cmd=job-getid-response;rc=0;jobid=12.0;",
                "cmd=kvs-put-response;rc=0;",
                "cmd=kvs-fence-response;rc=0;",
                "cmd=kvs-get-response;rc=0;found=TRUE;value=x%3By%25;",
                "cmd=kvs-get-response;rc=0;found=FALSE;",
                "cmd=finalize-response;rc=0;",
            ],
        );
        let mut pmi =
            Pmi::handshake_pmi2(Channel::new(Stream::Unix(client)), Some("12.0"), 1, 1, 2).unwrap();
        assert_eq!((pmi.rank(), pmi.size(), pmi.kvs_name()), (1, 3, "12.0"));
        pmi.put("card-1", "a=b;c%").unwrap();
        pmi.barrier().unwrap();
        assert_eq!(pmi.get("card-0").unwrap(), "x;y%");
        assert!(pmi
            .get("none")
            .unwrap_err()
            .to_string()
            .contains("no value"));
        pmi.finalize().unwrap();
        let received = server.join().unwrap();
        assert_eq!(
            received,
            [
                "cmd=fullinit;pmijobid=12.0;pmirank=1;threaded=FALSE;",
                "cmd=job-getid;",
                "cmd=kvs-put;key=card-1;value=a=b%3Bc%25;",
                "cmd=kvs-fence;",
                "cmd=kvs-get;jobid=12.0;srcid=-1;key=card-0;",
                "cmd=kvs-get;jobid=12.0;srcid=-1;key=none;",
                "cmd=finalize;",
            ]
        );
    }

    #[test]
    fn the_wire_follows_the_environment_and_slurm_gives_the_local_layout() {
        let environment = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| value.to_string())
            }
        };
        assert_eq!(wire_from(&environment(&[])).unwrap(), Wire::Pmi1);
        let slurm = &[("PMI_JOBID", "5.0"), ("SLURM_JOB_ID", "5")];
        assert_eq!(wire_from(&environment(slurm)).unwrap(), Wire::Pmi2);
        // resmpi's mpiexec (inside a Slurm job or not) speaks PMI-1.
        let under_mpiexec = &[
            ("PMI_JOBID", "5.0"),
            ("SLURM_JOB_ID", "5"),
            ("RESMPI_JOB_ID", "0123456789abcdef"),
        ];
        assert_eq!(wire_from(&environment(under_mpiexec)).unwrap(), Wire::Pmi1);
        assert_eq!(
            wire_from(&environment(&[("PMI_JOBID", "j")])).unwrap(),
            Wire::Pmi1
        );
        let chosen = &[
            ("PMI_JOBID", "5.0"),
            ("SLURM_JOB_ID", "5"),
            ("RESMPI_PMI", "1"),
        ];
        assert_eq!(wire_from(&environment(chosen)).unwrap(), Wire::Pmi1);
        assert!(wire_from(&environment(&[("RESMPI_PMI", "3")])).is_err());
        let layout = |node: &'static str, local: &'static str, tasks: &'static str| {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
                ("SLURM_NODEID", node),
                ("SLURM_LOCALID", local),
                ("SLURM_STEP_TASKS_PER_NODE", tasks),
            ]));
            slurm_local_layout(&environment(pairs))
        };
        assert_eq!(layout("0", "1", "4"), Some((1, 4)));
        assert_eq!(layout("2", "0", "2(x3),1"), Some((0, 2)));
        assert_eq!(layout("3", "0", "2(x3),1"), Some((0, 1)));
        assert_eq!(layout("4", "0", "2(x3),1"), None);
        assert_eq!(layout("0", "5", "2"), None);
        assert_eq!(layout("0", "0", "2(x"), None);
        assert_eq!(slurm_local_layout(&environment(&[])), None);
    }

    #[test]
    fn a_task_of_a_larger_launch_without_pmi_is_an_error_not_a_singleton() {
        let error =
            Pmi::from_lookup(|name| (name == "SLURM_STEP_NUM_TASKS").then(|| "4".to_string()))
                .err()
                .unwrap();
        assert!(error.to_string().contains("one of 4 tasks"), "{error}");
        // One task under Slurm is a singleton, as without any launcher.
        let pmi =
            Pmi::from_lookup(|name| (name == "SLURM_NTASKS").then(|| "1".to_string())).unwrap();
        assert!(pmi.is_singleton());
    }
}
