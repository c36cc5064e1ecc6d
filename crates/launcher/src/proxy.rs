//! The per-host proxy (`mpiexec --proxy`, hydra's `hydra_pmi_proxy`): one
//! per remote host, started by mpiexec through `--launcher-exec`. It starts
//! that host's ranks, watches them, and is mpiexec's hands there.
//!
//! Why a proxy: a launcher process per rank (`ssh HOST env … prog`) leaves
//! mpiexec blind and powerless on the other host. With ssh it cannot signal
//! the rank (killing the ssh client does not kill the remote process), it
//! learns of a death only when a connection drops, it cannot start a
//! replacement, and the job secret must ride on a command line that `ps`
//! shows to everyone. The proxy is the parent of its host's ranks: it sees
//! every exit with `waitpid`, signals a rank's process group, forks a
//! replacement, and its ranks die with it (`PR_SET_PDEATHSIG`).
//!
//! What it knows: only what mpiexec tells it. It reads one line on stdin
//! (`cmd=proxy version=1 address=IP:PORT token=HEX host=INDEX name=NAME`),
//! connects back to mpiexec's control address, says `Hello` with the token,
//! and from then on obeys the frames of `proxy_protocol`: `Start` (fork/exec
//! a rank with a `PMI_FD` socketpair and the environment it was given),
//! `Signal`, and `Pmi` bytes for a rank. It sends back each start, the
//! bytes its ranks write on PMI, stdout and stderr, and every exit with its
//! raw wait status, after the rank's PMI and output streams were read to
//! their end, so mpiexec judges a remote death on the same facts as a local
//! one. Policy (abort or continue, respawn or not) stays with mpiexec.
//!
//! When its connection to mpiexec closes or fails (mpiexec ended, died, or
//! the network between them broke), it SIGKILLs every rank and exits: a
//! host that cannot be reached is a host whose ranks are gone, which is what
//! mpiexec concludes on its side.

use crate::proxy_link::lock;
use std::collections::HashMap;
use std::io::{self, BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use resmpi_runtime::codec::PmiLine;

use crate::proxy_protocol::{Frame, FrameReader, Launch, OutputStream, PROTOCOL_VERSION};
use crate::spawn::{
    bind_to_this_process, environment_value, pin_as_asked, INHERITED_PMI_VARIABLES,
};

/// The first argument that puts mpiexec in proxy mode.
pub const PROXY_FLAG: &str = "--proxy";
/// How long the proxy tries to reach mpiexec.
const CONNECT_TIMEOUT_MS: u64 = 10_000;
/// How often the waiter looks for exited ranks when no SIGCHLD wakes it.
const WAIT_POLL_MS: u64 = 10;
/// How long, after a rank exits, its PMI and output streams may take to
/// reach their end before the exit is reported anyway (a grandchild may
/// hold them open).
const STREAM_DRAIN_WAIT_MS: u64 = 200;
/// How long one write of PMI bytes to a rank may block (a rank that stopped
/// reading must not stall the proxy, which also carries kills).
const RANK_WRITE_TIMEOUT_MS: u64 = 1000;
/// Bytes read from a rank's stream per frame.
const READ_CHUNK_BYTES: usize = 8192;
/// Silence on the proxy connection before keepalive probes start, the gap
/// between probes, and how many may go unanswered: a host whose control
/// link is down is lost after about 2 + 3 × 1 = 5 s, on both sides.
const KEEPALIVE_IDLE_S: i32 = 2;
const KEEPALIVE_INTERVAL_S: i32 = 1;
const KEEPALIVE_PROBE_COUNT: i32 = 3;
/// How long data written to the connection may stay unacknowledged before
/// the connection fails (`TCP_USER_TIMEOUT`).
const UNACKNOWLEDGED_MS_MAX: i32 = 5000;

/// Makes a silent peer on the proxy connection an error within about 5 s,
/// so that a host cut off (its control link down, not closed) is noticed
/// as a lost proxy by mpiexec and as a lost mpiexec by the proxy, which
/// then kills its ranks. Without it a TCP connection over a dead link
/// waits for ever when idle.
pub fn detect_silent_peer(stream: &TcpStream) {
    let options = [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, KEEPALIVE_IDLE_S),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, KEEPALIVE_PROBE_COUNT),
        (
            libc::IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            UNACKNOWLEDGED_MS_MAX,
        ),
    ];
    for (level, name, value) in options {
        // SAFETY: setsockopt reads size_of::<c_int>() bytes from `value`,
        // a live local; the descriptor belongs to `stream` for the call.
        unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// `mpiexec --proxy`: the proxy's whole life; returns its exit code.
pub fn main() -> i32 {
    let mut line = String::new();
    if let Err(error) = io::stdin().lock().read_line(&mut line) {
        eprintln!("mpiexec --proxy: cannot read the bootstrap line on stdin: {error}");
        return 1;
    }
    let bootstrap = match Bootstrap::parse(&line) {
        Ok(bootstrap) => bootstrap,
        Err(message) => {
            eprintln!("mpiexec --proxy: {message}");
            return 1;
        }
    };
    let name = bootstrap.host_name.clone();
    let stream = match connect(&bootstrap.address) {
        Ok(stream) => stream,
        Err(error) => {
            eprintln!(
                "mpiexec --proxy (host {name}): cannot reach mpiexec at {}: {error}",
                bootstrap.address
            );
            return 1;
        }
    };
    let _ = stream.set_nodelay(true);
    detect_silent_peer(&stream);
    let hello = Frame::Hello {
        version: PROTOCOL_VERSION,
        host_index: bootstrap.host_index,
        token: bootstrap.token,
    };
    let writer = match stream.try_clone() {
        Ok(writer) => writer,
        Err(error) => {
            eprintln!("mpiexec --proxy (host {name}): {error}");
            return 1;
        }
    };
    if let Err(error) = (&stream).write_all(&hello.encode()) {
        eprintln!("mpiexec --proxy (host {name}): cannot greet mpiexec: {error}");
        return 1;
    }
    crate::signals::install_child_wakeup();
    serve(stream, writer, &name);
    0
}

fn connect(address: &str) -> io::Result<TcpStream> {
    let addresses: Vec<SocketAddr> = address.to_socket_addrs()?.collect();
    let mut last_error = io::Error::new(io::ErrorKind::NotFound, "no address");
    for address in addresses {
        match TcpStream::connect_timeout(&address, Duration::from_millis(CONNECT_TIMEOUT_MS)) {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = error,
        }
    }
    Err(last_error)
}

/// What mpiexec writes on the proxy's stdin.
#[derive(Debug, PartialEq, Eq)]
pub struct Bootstrap {
    /// mpiexec's control address, `IP:PORT`.
    pub address: String,
    /// The per-job token to say in `Hello`.
    pub token: String,
    /// This host's index in the placement.
    pub host_index: u32,
    /// This host's name as mpiexec knows it (for messages).
    pub host_name: String,
}

impl Bootstrap {
    /// The line (newline included) mpiexec writes.
    pub fn encode(&self) -> String {
        PmiLine::new("proxy")
            .with("version", PROTOCOL_VERSION)
            .with("address", &self.address)
            .with("token", &self.token)
            .with("host", self.host_index)
            .with("name", &self.host_name)
            .encode()
    }

    /// Reads the line; a missing field or another version is an error.
    pub fn parse(line: &str) -> Result<Bootstrap, String> {
        let parsed = PmiLine::parse(line)
            .map_err(|error| format!("the bootstrap line on stdin is malformed: {error}"))?;
        if parsed.command != "proxy" {
            return Err("the bootstrap line on stdin is not cmd=proxy".to_string());
        }
        if parsed.get("version") != Some(PROTOCOL_VERSION.to_string().as_str()) {
            return Err(format!(
                "mpiexec speaks proxy protocol version {}, this proxy {PROTOCOL_VERSION}",
                parsed.get("version").unwrap_or("?")
            ));
        }
        let field = |key: &str| {
            parsed
                .get(key)
                .map(str::to_string)
                .ok_or_else(|| format!("the bootstrap line lacks {key}="))
        };
        Ok(Bootstrap {
            address: field("address")?,
            token: field("token")?,
            host_index: field("host")?
                .parse()
                .map_err(|_| "the bootstrap line's host= is not a number".to_string())?,
            host_name: field("name")?,
        })
    }
}

/// One process of a rank, while it runs.
struct RankProcess {
    incarnation: u32,
    pid: i32,
    /// The proxy's end of its PMI socketpair, for writing.
    pmi: Option<UnixStream>,
    /// The threads that read its PMI socket, stdout and stderr.
    readers: Vec<JoinHandle<()>>,
}

/// What the proxy's threads share.
struct Shared {
    /// The connection to mpiexec, for writing frames (one whole frame per
    /// lock, so frames never interleave).
    writer: Mutex<Box<dyn Write + Send>>,
    /// The running process of each rank.
    ranks: Mutex<HashMap<u32, RankProcess>>,
    /// Set when the connection to mpiexec is gone: the waiter stops.
    stopping: AtomicBool,
    host_name: String,
}

impl Shared {
    /// Sends one frame; a failure means mpiexec is gone, which the reading
    /// side notices and acts on.
    fn send(&self, frame: &Frame) {
        let _ = lock(&self.writer).write_all(&frame.encode());
    }
}

/// Serves mpiexec on `reader`/`writer` (one connection, or a fake one in
/// tests) until it closes; then kills every rank and reaps it. The ranks
/// are forked on the calling thread, which must outlive them.
pub fn serve(reader: impl Read, writer: impl Write + Send + 'static, host_name: &str) {
    let shared = Arc::new(Shared {
        writer: Mutex::new(Box::new(writer)),
        ranks: Mutex::new(HashMap::new()),
        stopping: AtomicBool::new(false),
        host_name: host_name.to_string(),
    });
    let waiter = {
        let shared = shared.clone();
        thread::spawn(move || watch_children(&shared))
    };
    let mut frames = FrameReader::new(reader);
    loop {
        let frame = match frames.read_frame() {
            Ok(frame) => frame,
            Err(crate::proxy_protocol::ReadError::Closed) => break,
            Err(error) => {
                eprintln!(
                    "mpiexec --proxy (host {host_name}): the connection to mpiexec failed: {error}"
                );
                break;
            }
        };
        match frame {
            Frame::Start {
                rank,
                incarnation,
                launch,
            } => start(&shared, rank, incarnation, &launch),
            Frame::Signal {
                rank,
                incarnation,
                signal,
            } => {
                let ranks = lock(&shared.ranks);
                if let Some(process) = ranks
                    .get(&rank)
                    .filter(|process| process.incarnation == incarnation)
                {
                    signal_group(process.pid, signal);
                }
            }
            Frame::Pmi {
                rank,
                incarnation,
                bytes,
            } => {
                // Written outside the lock: a rank slow to read must not
                // hold up the waiter or a kill.
                let socket = lock(&shared.ranks)
                    .get(&rank)
                    .filter(|process| process.incarnation == incarnation)
                    .and_then(|process| process.pmi.as_ref())
                    .and_then(|socket| socket.try_clone().ok());
                if let Some(mut socket) = socket {
                    if socket.write_all(&bytes).is_err() {
                        // It stopped reading (or died): it gets nothing more.
                        if let Some(process) = lock(&shared.ranks)
                            .get_mut(&rank)
                            .filter(|process| process.incarnation == incarnation)
                        {
                            process.pmi = None;
                        }
                    }
                }
            }
            other => {
                eprintln!(
                    "mpiexec --proxy (host {host_name}): unexpected frame from mpiexec: {other:?}"
                );
                break;
            }
        }
    }
    // mpiexec is gone or done: nothing of the job may outlive it here.
    shared.stopping.store(true, Ordering::SeqCst);
    let _ = waiter.join();
    let processes: Vec<RankProcess> = lock(&shared.ranks).drain().map(|(_, p)| p).collect();
    for process in &processes {
        signal_group(process.pid, libc::SIGKILL);
    }
    for process in processes {
        let mut status = 0;
        // SAFETY: waitpid writes only to the local `status`; the pid is our
        // child, killed just above, so this returns promptly.
        unsafe { libc::waitpid(process.pid, &mut status, 0) };
    }
}

/// SIGNAL to the process group `pid` leads, and to `pid` in case it left it.
fn signal_group(pid: i32, signal: i32) {
    // SAFETY: kill has no memory effects; `pid` is a child not yet reaped
    // (the waiter reaps and removes it from the table under the lock the
    // caller holds), so neither it nor its group id can have been reused.
    unsafe {
        libc::kill(-pid, signal);
        libc::kill(pid, signal);
    }
}

/// Starts one process of `rank` and answers mpiexec: `Started` before
/// anything the process writes (its streams are read only afterwards), and
/// before its exit (the waiter needs the table entry made under the same
/// lock), or `StartFailed`.
fn start(shared: &Arc<Shared>, rank: u32, incarnation: u32, launch: &Launch) {
    let Launch {
        program,
        arguments,
        environment,
        directory,
    } = launch;
    let failed = |error: io::Error| {
        shared.send(&Frame::StartFailed {
            rank,
            incarnation,
            error_number: error.raw_os_error().unwrap_or(0),
            reason: error.to_string(),
        })
    };
    // An option value this host cannot honour is refused with EINVAL,
    // which mpiexec reports as a usage error (exit 2).
    if let Err(reason) = crate::preflight::check_launch_rails(environment) {
        shared.send(&Frame::StartFailed {
            rank,
            incarnation,
            error_number: libc::EINVAL,
            reason,
        });
        return;
    }
    let mut ranks = lock(&shared.ranks);
    if ranks.contains_key(&rank) {
        return failed(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a process of this rank still runs on this host",
        ));
    }
    let (proxy_end, rank_end) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(error) => return failed(error),
    };
    let mut command = Command::new(program);
    command.args(arguments);
    for name in INHERITED_PMI_VARIABLES {
        command.env_remove(name);
    }
    for (name, value) in environment {
        command.env(name, value);
    }
    command.env("PMI_FD", rank_end.as_raw_fd().to_string());
    if !directory.is_empty() && Path::new(directory).is_dir() {
        command.current_dir(directory);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    bind_to_this_process(&mut command, Some(rank_end.as_raw_fd()));
    let local_number =
        |name| environment_value(environment, name).and_then(|text| text.parse().ok());
    if let (Some(local_count), Some(local_index)) = (
        local_number("MPI_LOCALNRANKS"),
        local_number("MPI_LOCALRANKID"),
    ) {
        pin_as_asked(&mut command, environment, (local_count, local_index));
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => return failed(error),
    };
    drop(rank_end);
    let pid = child.id() as i32;
    shared.send(&Frame::Started {
        rank,
        incarnation,
        pid,
    });
    let mut readers = Vec::new();
    let _ = proxy_end.set_write_timeout(Some(Duration::from_millis(RANK_WRITE_TIMEOUT_MS)));
    match proxy_end.try_clone() {
        Ok(reading_end) => {
            let shared = shared.clone();
            readers.push(thread::spawn(move || {
                forward_stream(&shared, rank, incarnation, reading_end, None)
            }));
        }
        Err(error) => eprintln!(
            "mpiexec --proxy (host {}): rank {rank}'s PMI socket: {error}",
            shared.host_name
        ),
    }
    if let Some(stdout) = child.stdout.take() {
        let shared = shared.clone();
        readers.push(thread::spawn(move || {
            forward_stream(
                &shared,
                rank,
                incarnation,
                stdout,
                Some(OutputStream::Stdout),
            )
        }));
    }
    if let Some(stderr) = child.stderr.take() {
        let shared = shared.clone();
        readers.push(thread::spawn(move || {
            forward_stream(
                &shared,
                rank,
                incarnation,
                stderr,
                Some(OutputStream::Stderr),
            )
        }));
    }
    ranks.insert(
        rank,
        RankProcess {
            incarnation,
            pid,
            pmi: Some(proxy_end),
            readers,
        },
    );
}

/// Sends what `source` gives as frames of `rank` (PMI bytes when `stream`
/// is `None`, else output), then says it ended.
fn forward_stream(
    shared: &Shared,
    rank: u32,
    incarnation: u32,
    mut source: impl Read,
    stream: Option<OutputStream>,
) {
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let count = match source.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let bytes = chunk[..count].to_vec();
        shared.send(&match stream {
            None => Frame::Pmi {
                rank,
                incarnation,
                bytes,
            },
            Some(stream) => Frame::Output {
                rank,
                incarnation,
                stream,
                bytes,
            },
        });
    }
    shared.send(&match stream {
        None => Frame::PmiClosed { rank, incarnation },
        Some(stream) => Frame::OutputClosed {
            rank,
            incarnation,
            stream,
        },
    });
}

/// The waiter: reaps every exited rank and reports it, after its streams
/// have been forwarded to their end (bounded), so that an abort it sent
/// just before dying, and its last lines, reach mpiexec first.
fn watch_children(shared: &Shared) {
    while !shared.stopping.load(Ordering::SeqCst) {
        // Reaped and removed under one lock: a signal is never sent to
        // the pid of a process already reaped (which the kernel may reuse).
        let exited: Vec<(u32, RankProcess, i32)> = {
            let mut ranks = lock(&shared.ranks);
            let mut reaped = Vec::new();
            for (&rank, process) in ranks.iter() {
                let mut status = 0;
                // SAFETY: waitpid writes only to the local `status`; the
                // pid is a child of this process that only this thread reaps.
                if unsafe { libc::waitpid(process.pid, &mut status, libc::WNOHANG) } == process.pid
                {
                    reaped.push((rank, status));
                }
            }
            reaped
                .into_iter()
                .filter_map(|(rank, status)| {
                    ranks.remove(&rank).map(|process| (rank, process, status))
                })
                .collect()
        };
        for (rank, process, status) in exited {
            let deadline = Instant::now() + Duration::from_millis(STREAM_DRAIN_WAIT_MS);
            while process.readers.iter().any(|reader| !reader.is_finished())
                && Instant::now() < deadline
            {
                thread::sleep(Duration::from_millis(1));
            }
            shared.send(&Frame::Exited {
                rank,
                incarnation: process.incarnation,
                wait_status: status,
            });
        }
        crate::signals::wait_for_child(Duration::from_millis(WAIT_POLL_MS));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy_protocol::ReadError;

    /// A proxy serving on one end of a socketpair, on its own thread (which
    /// its ranks die with), and mpiexec's end.
    fn proxy() -> (UnixStream, FrameReader<UnixStream>, JoinHandle<()>) {
        let (mpiexec_end, proxy_end) = UnixStream::pair().unwrap();
        let writer = proxy_end.try_clone().unwrap();
        let thread = thread::spawn(move || serve(proxy_end, writer, "test-host"));
        mpiexec_end
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let reader = FrameReader::new(mpiexec_end.try_clone().unwrap());
        (mpiexec_end, reader, thread)
    }

    /// mpiexec goes away (every handle on its end closed); the proxy ends.
    fn close(connection: UnixStream, reader: FrameReader<UnixStream>, thread: JoinHandle<()>) {
        drop(connection);
        drop(reader);
        thread.join().unwrap();
    }

    fn start_frame(rank: u32, incarnation: u32, script: &str) -> Frame {
        Frame::Start {
            rank,
            incarnation,
            launch: Launch {
                program: "bash".to_string(),
                arguments: vec!["-c".to_string(), script.to_string()],
                environment: vec![("GREETING".to_string(), "hello there".to_string())],
                directory: "/".to_string(),
            },
        }
    }

    fn send(mut connection: &UnixStream, frame: &Frame) {
        connection.write_all(&frame.encode()).unwrap();
    }

    /// Frames until (and with) the exit of `rank`, in order.
    fn frames_until_exit(reader: &mut FrameReader<UnixStream>, rank: u32) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            let frame = reader.read_frame().unwrap();
            let done = matches!(frame, Frame::Exited { rank: exited, .. } if exited == rank);
            frames.push(frame);
            if done {
                return frames;
            }
        }
    }

    fn output_of(frames: &[Frame], wanted: OutputStream) -> String {
        let mut text = Vec::new();
        for frame in frames {
            if let Frame::Output { stream, bytes, .. } = frame {
                if *stream == wanted {
                    text.extend_from_slice(bytes);
                }
            }
        }
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn a_rank_is_started_its_output_forwarded_and_its_exit_reported_last() {
        let (connection, mut reader, thread) = proxy();
        send(
            &connection,
            &start_frame(
                3,
                1,
                "echo \"$GREETING $PMI_RANK_UNSET$RESMPI_X\"; echo oops >&2; exit 7",
            ),
        );
        let frames = frames_until_exit(&mut reader, 3);
        let Frame::Started {
            rank: 3,
            incarnation: 1,
            pid,
        } = frames[0]
        else {
            panic!("{frames:?}");
        };
        assert!(pid > 0);
        assert_eq!(output_of(&frames, OutputStream::Stdout), "hello there \n");
        assert_eq!(output_of(&frames, OutputStream::Stderr), "oops\n");
        // Both streams and the PMI socket ended before the exit was sent.
        for expected in [
            Frame::OutputClosed {
                rank: 3,
                incarnation: 1,
                stream: OutputStream::Stdout,
            },
            Frame::OutputClosed {
                rank: 3,
                incarnation: 1,
                stream: OutputStream::Stderr,
            },
            Frame::PmiClosed {
                rank: 3,
                incarnation: 1,
            },
        ] {
            assert!(frames.contains(&expected), "{expected:?} in {frames:?}");
        }
        let Some(Frame::Exited {
            incarnation: 1,
            wait_status,
            ..
        }) = frames.last()
        else {
            panic!("{frames:?}");
        };
        assert!(libc::WIFEXITED(*wait_status) && libc::WEXITSTATUS(*wait_status) == 7);
        close(connection, reader, thread);
    }

    #[test]
    fn pmi_bytes_go_both_ways_tagged_with_the_rank() {
        let (connection, mut reader, thread) = proxy();
        send(
            &connection,
            &start_frame(
                0,
                0,
                "echo cmd=init >&$PMI_FD; read -r line <&$PMI_FD; echo \"got $line\"",
            ),
        );
        assert!(matches!(
            reader.read_frame().unwrap(),
            Frame::Started { rank: 0, .. }
        ));
        assert_eq!(
            reader.read_frame().unwrap(),
            Frame::Pmi {
                rank: 0,
                incarnation: 0,
                bytes: b"cmd=init\n".to_vec()
            }
        );
        // PMI bytes for another incarnation are not this process's.
        send(
            &connection,
            &Frame::Pmi {
                rank: 0,
                incarnation: 5,
                bytes: b"cmd=stale\n".to_vec(),
            },
        );
        send(
            &connection,
            &Frame::Pmi {
                rank: 0,
                incarnation: 0,
                bytes: b"cmd=response_to_init rc=0\n".to_vec(),
            },
        );
        let frames = frames_until_exit(&mut reader, 0);
        assert_eq!(
            output_of(&frames, OutputStream::Stdout),
            "got cmd=response_to_init rc=0\n"
        );
        close(connection, reader, thread);
    }

    #[test]
    fn a_signal_reaches_the_rank_and_its_death_is_reported_with_the_signal() {
        let (connection, mut reader, thread) = proxy();
        send(&connection, &start_frame(1, 0, "exec sleep 30"));
        assert!(matches!(
            reader.read_frame().unwrap(),
            Frame::Started { rank: 1, .. }
        ));
        // An order for another incarnation is ignored.
        for incarnation in [4, 0] {
            send(
                &connection,
                &Frame::Signal {
                    rank: 1,
                    incarnation,
                    signal: libc::SIGKILL,
                },
            );
        }
        let frames = frames_until_exit(&mut reader, 1);
        let Some(Frame::Exited { wait_status, .. }) = frames.last() else {
            panic!("{frames:?}");
        };
        assert!(libc::WIFSIGNALED(*wait_status) && libc::WTERMSIG(*wait_status) == libc::SIGKILL);
        close(connection, reader, thread);
    }

    #[test]
    fn a_program_that_cannot_run_is_a_start_failure_with_its_errno() {
        let (connection, mut reader, thread) = proxy();
        let mut frame = start_frame(2, 0, "");
        if let Frame::Start { launch, .. } = &mut frame {
            launch.program = "/nonexistent/program".to_string();
        }
        send(&connection, &frame);
        let Frame::StartFailed {
            rank: 2,
            error_number,
            ..
        } = reader.read_frame().unwrap()
        else {
            panic!("expected a start failure");
        };
        assert_eq!(error_number, libc::ENOENT);
        close(connection, reader, thread);
    }

    #[test]
    fn a_rail_this_host_lacks_is_refused_before_the_rank_starts() {
        let (connection, mut reader, thread) = proxy();
        let mut frame = start_frame(3, 0, "touch /nonexistent/started");
        if let Frame::Start { launch, .. } = &mut frame {
            launch.environment.push((
                "RESMPI_RAILS".to_string(),
                "tcp:lo,tcp:nosuchif0".to_string(),
            ));
        }
        send(&connection, &frame);
        let Frame::StartFailed {
            rank: 3,
            error_number,
            reason,
            ..
        } = reader.read_frame().unwrap()
        else {
            panic!("expected a start failure");
        };
        assert_eq!(error_number, libc::EINVAL);
        assert!(reason.contains("'tcp:nosuchif0'"), "{reason}");
        // A rail the host has starts the rank.
        let mut frame = start_frame(3, 0, "exit 0");
        if let Frame::Start { launch, .. } = &mut frame {
            launch
                .environment
                .push(("RESMPI_RAILS".to_string(), "tcp:lo".to_string()));
        }
        send(&connection, &frame);
        assert!(matches!(
            reader.read_frame().unwrap(),
            Frame::Started { rank: 3, .. }
        ));
        close(connection, reader, thread);
    }

    #[test]
    fn when_mpiexec_goes_away_every_rank_is_killed() {
        let (connection, mut reader, thread) = proxy();
        send(&connection, &start_frame(0, 0, "exec sleep 30"));
        let Frame::Started { pid, .. } = reader.read_frame().unwrap() else {
            panic!("expected a start");
        };
        let started = Instant::now();
        drop(connection);
        drop(reader);
        thread.join().unwrap();
        // Reaped by the proxy: the pid no longer exists at all.
        // SAFETY: kill with signal 0 only checks for existence.
        assert_eq!(unsafe { libc::kill(pid, 0) }, -1);
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn the_bootstrap_line_round_trips_and_refuses_another_version() {
        let bootstrap = Bootstrap {
            address: "10.77.0.1:4000".to_string(),
            token: "ab12".to_string(),
            host_index: 2,
            host_name: "nodeb".to_string(),
        };
        assert_eq!(Bootstrap::parse(&bootstrap.encode()), Ok(bootstrap));
        let message = Bootstrap::parse("cmd=proxy version=99 address=a:1 token=t host=0 name=n\n")
            .unwrap_err();
        assert!(message.contains("version 99"), "{message}");
        assert!(
            Bootstrap::parse("cmd=proxy version=1 token=t host=0 name=n\n")
                .unwrap_err()
                .contains("address=")
        );
        assert!(matches!(
            FrameReader::new(io::empty()).read_frame(),
            Err(ReadError::Closed)
        ));
    }
}
