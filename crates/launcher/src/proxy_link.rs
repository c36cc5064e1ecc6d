//! mpiexec's end of the per-host proxies: starting one proxy per remote
//! host through `--launcher-exec`, admitting its connection, and carrying
//! its ranks' PMI, output, starts and exits (see `proxy` for the other end
//! and `proxy_protocol` for the frames).
//!
//! A remote rank looks to the PMI server exactly like a local one: each of
//! its processes gets a socketpair, one end served by [`PmiServer::serve`],
//! the other pumped to and from the proxy connection as frames tagged with
//! the rank and incarnation. So failure notices, re-join lines and every
//! PMI reply reach remote ranks by the same code as local ones, and a
//! remote rank's PMI connection ends when its proxy says it ended.
//!
//! One thread per proxy reads its connection ([`demultiplex`]): PMI bytes go
//! to the rank's socketpair, output through a line splitter per stream
//! (so `--tag-output` prefixes stay right however the bytes were cut), starts
//! to whoever waits in [`ProxyLink::start`], exits to the supervisor's queue
//! (with a wake-up, so a remote death is judged at once, like a SIGCHLD).
//! When the connection ends while the job runs, the link is lost: the
//! supervisor counts every rank still running there as dead.
//!
//! Anyone who can reach the control port can connect to it before the
//! proxies do. Each new connection's `Hello` is therefore read by a thread
//! of its own (bounded by [`HELLO_TIMEOUT_MS`]), never in the accepting
//! loop, and at most [`UNPROVEN_CONNECTIONS_MAX`] connections wait to say
//! it, the oldest shut down past that: idle strangers cannot hold a real
//! proxy's `Hello` unread until the connect deadline.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::hosts::{first_non_loopback_ipv4, Placement};
use crate::options::Options;
use crate::output::{self, Destination, LineSplitter, OutputLedger, ReplayedFeed};
use crate::pmi_server::PmiServer;
use crate::proxy::Bootstrap;
use crate::proxy_protocol::{
    Frame, FrameReader, Launch, OutputStream, ReadError, PROTOCOL_VERSION,
};
use crate::replicated_output::{RankOutput, ReplicaFeed};
use crate::spawn::{self, JobIdentity, INHERITED_PMI_VARIABLES};

/// How long every proxy together may take to connect back (ssh logins
/// included).
pub const PROXY_CONNECT_TIMEOUT_MS: u64 = 30_000;
/// How long a connection may take to say `Hello`.
const HELLO_TIMEOUT_MS: u64 = 10_000;
/// Most connections whose `Hello` is awaited at once; a real proxy sends
/// it as soon as it connects, so only a flood of strangers reaches this.
const UNPROVEN_CONNECTIONS_MAX: usize = 64;
/// How long a proxy may take to answer a `Start`.
const START_REPLY_TIMEOUT_MS: u64 = 30_000;
/// How long one write to a proxy may block before the proxy counts as lost.
const WRITE_TIMEOUT_MS: u64 = 10_000;

/// A remote process's exit, as its proxy reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteExit {
    /// The rank.
    pub rank: u32,
    /// The incarnation that exited.
    pub incarnation: u32,
    /// Its raw wait status.
    pub wait_status: i32,
}

/// Exits reported by every proxy, for the supervisor to take.
pub type RemoteExits = Arc<Mutex<Vec<RemoteExit>>>;

/// Why a remote rank did not start.
#[derive(Debug)]
pub enum StartError {
    /// The proxy could not exec it (`errno`, reason).
    Refused(i32, String),
    /// The proxy is gone, or did not answer in time.
    ProxyLost(String),
}

/// The PMI socketpair end of one remote process, on mpiexec's side.
struct Route {
    incarnation: u32,
    /// The end whose peer [`PmiServer::serve`] reads.
    to_server: UnixStream,
}

/// One proxy, seen from mpiexec.
pub struct ProxyLink {
    /// Its host's name, as given to `--hosts`.
    pub host: String,
    /// The pid of its launcher process (a child of mpiexec).
    pub launcher_pid: i32,
    writer: Mutex<TcpStream>,
    routes: Mutex<HashMap<u32, Route>>,
    replies: Mutex<Vec<Frame>>,
    reply_arrived: Condvar,
    lost: AtomicBool,
    closing: AtomicBool,
}

/// A lock that a panicked holder does not poison for the others (the
/// proxy's and mpiexec's shared connection state).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ProxyLink {
    /// Whether its connection ended (or its launcher exited).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// The proxy is gone for the job: every route ends (so the PMI server
    /// sees each remote rank's connection close), waiters and the
    /// supervisor wake, and the connection is shut so a proxy still alive
    /// kills its ranks.
    pub fn mark_lost(&self) {
        if self.lost.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = lock(&self.writer).shutdown(Shutdown::Both);
        for route in lock(&self.routes).values() {
            let _ = route.to_server.shutdown(Shutdown::Both);
        }
        self.reply_arrived.notify_all();
        crate::signals::wake();
    }

    /// Writes `frames` in one write; a proxy that cannot take them is lost.
    fn send(&self, frames: &[Frame]) -> bool {
        if self.is_lost() {
            return false;
        }
        let bytes: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
        if lock(&self.writer).write_all(&bytes).is_ok() {
            return true;
        }
        self.mark_lost();
        false
    }

    /// Sends `signal` to each `(rank, incarnation)` at one instant (one
    /// write; the proxy acts on the frames in one pass).
    pub fn signal(&self, targets: &[(u32, u32)], signal: i32) {
        let frames: Vec<Frame> = targets
            .iter()
            .map(|&(rank, incarnation)| Frame::Signal {
                rank,
                incarnation,
                signal,
            })
            .collect();
        self.send(&frames);
    }

    /// The end of the job: the proxy kills what is left and exits.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let _ = lock(&self.writer).shutdown(Shutdown::Write);
    }

    /// Starts incarnation `incarnation` of `rank` through the proxy, its
    /// PMI connection served by `server`; the process's pid on its host.
    pub fn start(
        self: &Arc<ProxyLink>,
        server: &Arc<PmiServer>,
        rank: u32,
        incarnation: u32,
        launch: Launch,
    ) -> Result<i32, StartError> {
        let lost = |what: &str| StartError::ProxyLost(what.to_string());
        let (server_end, proxy_end) =
            UnixStream::pair().map_err(|error| lost(&format!("no socketpair: {error}")))?;
        let pumped_end = proxy_end
            .try_clone()
            .map_err(|error| lost(&format!("no socketpair: {error}")))?;
        if let Some(old) = lock(&self.routes).insert(
            rank,
            Route {
                incarnation,
                to_server: proxy_end,
            },
        ) {
            let _ = old.to_server.shutdown(Shutdown::Both);
        }
        {
            let link = self.clone();
            thread::spawn(move || link.pump_to_proxy(rank, incarnation, pumped_end));
        }
        {
            let server = server.clone();
            thread::spawn(move || server.serve(rank, server_end));
        }
        let end_route = || {
            if let Some(route) = lock(&self.routes).get(&rank) {
                let _ = route.to_server.shutdown(Shutdown::Both);
            }
        };
        let sent = self.send(&[Frame::Start {
            rank,
            incarnation,
            launch,
        }]);
        if !sent {
            end_route();
            return Err(lost("the proxy's connection is closed"));
        }
        let deadline = Instant::now() + Duration::from_millis(START_REPLY_TIMEOUT_MS);
        let mut replies = lock(&self.replies);
        loop {
            let position = replies.iter().position(|reply| {
                matches!(reply,
                    Frame::Started { rank: r, incarnation: i, .. }
                    | Frame::StartFailed { rank: r, incarnation: i, .. }
                    if *r == rank && *i == incarnation)
            });
            if let Some(position) = position {
                return match replies.remove(position) {
                    Frame::Started { pid, .. } => Ok(pid),
                    Frame::StartFailed {
                        error_number,
                        reason,
                        ..
                    } => {
                        drop(replies);
                        end_route();
                        Err(StartError::Refused(error_number, reason))
                    }
                    _ => unreachable!("only starts are matched"),
                };
            }
            let now = Instant::now();
            if self.is_lost() || now >= deadline {
                drop(replies);
                end_route();
                return Err(lost(if self.is_lost() {
                    "the proxy's connection closed"
                } else {
                    "the proxy did not answer in time"
                }));
            }
            replies = self
                .reply_arrived
                .wait_timeout(replies, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    /// Sends what the PMI server writes for one remote process to its proxy.
    fn pump_to_proxy(&self, rank: u32, incarnation: u32, mut source: UnixStream) {
        let mut chunk = [0u8; 4096];
        loop {
            match source.read(&mut chunk) {
                Ok(0) => return,
                Ok(count) => {
                    let frame = Frame::Pmi {
                        rank,
                        incarnation,
                        bytes: chunk[..count].to_vec(),
                    };
                    if !self.send(&[frame]) {
                        return;
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

/// What [`start_proxies`] leaves running.
pub struct Proxies {
    /// Per placed host: its proxy (`None` for this host).
    pub links: Vec<Option<Arc<ProxyLink>>>,
    /// The threads that read the connections and the launchers' output;
    /// each ends when its proxy has gone.
    pub threads: Vec<JoinHandle<()>>,
}

/// The address proxies connect back to: `--control-addr`, else this
/// host's first non-loopback IPv4 address.
pub(crate) fn control_address(options: &Options) -> Result<SocketAddr, String> {
    match &options.control_address {
        Some(text) => {
            let with_port = match text.parse::<std::net::IpAddr>() {
                Ok(ip) => SocketAddr::new(ip, 0).to_string(),
                Err(_) if text.contains(':') => text.clone(),
                Err(_) => format!("{text}:0"),
            };
            with_port
                .to_socket_addrs()
                .ok()
                .and_then(|mut addresses| addresses.next())
                .ok_or_else(|| format!("--control-addr '{text}': cannot resolve it"))
        }
        None => Ok(SocketAddr::new(
            first_non_loopback_ipv4()
                .ok_or("this host has no non-loopback IPv4 address for proxies to reach mpiexec at; give --control-addr")?
                .into(),
            0,
        )),
    }
}

/// How long, when the proxies cannot all start, the launchers' own output
/// (ssh's reason, say) may take to drain before mpiexec says why it failed.
const LAUNCHER_OUTPUT_DRAIN_MS: u64 = 1000;

/// Starts one proxy per remote host of `placement` and waits until each
/// has connected and proved the job's token. Errors are (exit code,
/// message); proxies already started are killed then, after what their
/// launchers wrote has been forwarded.
pub fn start_proxies(
    options: &Options,
    placement: &Placement,
    identity: &JobIdentity,
    exits: &RemoteExits,
    replicated_outputs: &[[Arc<RankOutput>; 2]],
    replay_output: Option<&Arc<OutputLedger>>,
) -> Result<Proxies, (i32, String)> {
    let mut threads = Vec::new();
    match connect_proxies(options, placement, identity, &mut threads) {
        Ok((links, readers)) => {
            for (link, reader) in readers {
                let exits = exits.clone();
                let output = RemoteOutput {
                    tag_output: options.tag_output,
                    rank_count: options.rank_count,
                    replicated: replicated_outputs.to_vec(),
                    replay: replay_output.cloned(),
                };
                threads.push(thread::spawn(move || {
                    demultiplex(&link, reader, &exits, &output)
                }));
            }
            Ok(Proxies { links, threads })
        }
        Err(error) => {
            let deadline = Instant::now() + Duration::from_millis(LAUNCHER_OUTPUT_DRAIN_MS);
            while threads.iter().any(|thread| !thread.is_finished()) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(1));
            }
            Err(error)
        }
    }
}

/// A connected proxy and the reading side of its connection.
type Connected = (Arc<ProxyLink>, FrameReader<TcpStream>);

/// Every link (per placed host) and the connections to read.
type Admitted = (Vec<Option<Arc<ProxyLink>>>, Vec<Connected>);

/// The launching and admission of [`start_proxies`]; the threads that
/// forward the launchers' output go into `threads`.
fn connect_proxies(
    options: &Options,
    placement: &Placement,
    identity: &JobIdentity,
    threads: &mut Vec<JoinHandle<()>>,
) -> Result<Admitted, (i32, String)> {
    let failure = |message: String| (crate::supervisor::EXIT_LAUNCHER_FAILURE, message);
    let address = control_address(options).map_err(failure)?;
    let listener = TcpListener::bind(address)
        .map_err(|error| failure(format!("cannot listen for proxies on {address}: {error}")))?;
    let bound = listener
        .local_addr()
        .map_err(|error| failure(format!("cannot listen for proxies on {address}: {error}")))?;
    let proxy_program = std::env::current_exe()
        .map_err(|error| failure(format!("cannot find mpiexec's own executable: {error}")))?
        .display()
        .to_string();
    let mut launchers: Vec<(usize, std::process::Child)> = Vec::new();
    let kill_launchers = |launchers: &[(usize, std::process::Child)]| {
        for (_, child) in launchers {
            // SAFETY: kill has no memory effects; a launcher we started and
            // have not reaped, so its group id is not reused.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        }
    };
    for (index, host) in placement.hosts.iter().enumerate() {
        if host.local {
            continue;
        }
        let mut command = Command::new(&options.launcher_exec);
        command
            .arg(&host.name)
            .args(spawn::proxy_command_words(
                &options.launcher_exec,
                &proxy_program,
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in INHERITED_PMI_VARIABLES {
            command.env_remove(name);
        }
        spawn::bind_to_this_process(&mut command, None);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(error) => {
                kill_launchers(&launchers);
                let reason = match error.kind() {
                    io::ErrorKind::NotFound => "no such file or command".to_string(),
                    _ => error.to_string(),
                };
                return Err((
                    crate::supervisor::EXIT_CANNOT_RUN,
                    format!(
                        "cannot run the launcher '{}' for host {}: {reason}",
                        options.launcher_exec, host.name
                    ),
                ));
            }
        };
        let bootstrap = Bootstrap {
            address: bound.to_string(),
            token: identity.proxy_token.clone(),
            host_index: index as u32,
            host_name: host.name.clone(),
        };
        if let Some(mut stdin) = child.stdin.take() {
            // The token travels here, not on a command line; a launcher
            // that already died is noticed below.
            let _ = stdin.write_all(bootstrap.encode().as_bytes());
        }
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            threads.push(thread::spawn(move || {
                output::forward(stream, Destination::Stderr, "")
            }));
        }
        launchers.push((index, child));
    }
    let mut links: Vec<Option<Arc<ProxyLink>>> = vec![None; placement.hosts.len()];
    let mut readers: Vec<Connected> = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(PROXY_CONNECT_TIMEOUT_MS);
    if let Err(error) = listener.set_nonblocking(true) {
        kill_launchers(&launchers);
        return Err(failure(format!("cannot listen for proxies: {error}")));
    }
    let (hello_sender, hello_receiver) = mpsc::channel::<(u64, String, Result<Greeting, String>)>();
    // Clones of the connections whose Hello is awaited, oldest first, to
    // shut down past the bound; the id matches the reading thread's report.
    let mut unproven: VecDeque<(u64, TcpStream)> = VecDeque::new();
    let mut connection_count: u64 = 0;
    while readers.len() < launchers.len() {
        match listener.accept() {
            Ok((stream, _)) => {
                let id = connection_count;
                connection_count += 1;
                let peer = stream
                    .peer_addr()
                    .map(|address| address.to_string())
                    .unwrap_or_else(|_| "?".to_string());
                let Ok(clone) = stream.try_clone() else {
                    continue;
                };
                unproven.push_back((id, clone));
                if unproven.len() > UNPROVEN_CONNECTIONS_MAX {
                    if let Some((_, oldest)) = unproven.pop_front() {
                        let _ = oldest.shutdown(Shutdown::Both);
                    }
                }
                let sender = hello_sender.clone();
                thread::spawn(move || {
                    let _ = sender.send((id, peer, read_hello(stream)));
                });
                continue;
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => {
                thread::sleep(Duration::from_millis(5));
                continue;
            }
        }
        let mut admitted_any = false;
        while let Ok((id, peer, greeting)) = hello_receiver.try_recv() {
            unproven.retain(|(waiting, _)| *waiting != id);
            match greeting
                .and_then(|greeting| admit(greeting, identity, placement, &links, &launchers))
            {
                Ok((index, connected)) => {
                    links[index] = Some(connected.0.clone());
                    readers.push(connected);
                    admitted_any = true;
                }
                Err(reason) => {
                    eprintln!("mpiexec: refused a proxy connection from {peer}: {reason}")
                }
            }
        }
        if admitted_any {
            continue;
        }
        let ended = launchers.iter_mut().find_map(|(index, child)| {
            if links[*index].is_some() {
                return None;
            }
            match child.try_wait() {
                Ok(Some(status)) => Some((*index, status)),
                _ => None,
            }
        });
        if let Some((index, status)) = ended {
            kill_launchers(&launchers);
            return Err(failure(format!(
                "the launcher '{}' for host {} ended ({status}) before its proxy connected",
                options.launcher_exec, placement.hosts[index].name
            )));
        }
        if Instant::now() >= deadline {
            let missing: Vec<&str> = launchers
                .iter()
                .filter(|(index, _)| links[*index].is_none())
                .map(|(index, _)| placement.hosts[*index].name.as_str())
                .collect();
            kill_launchers(&launchers);
            return Err(failure(format!(
                "timed out: no proxy connected from host {} within {} s",
                missing.join(", "),
                PROXY_CONNECT_TIMEOUT_MS / 1000
            )));
        }
        thread::sleep(Duration::from_millis(5));
    }
    // Connections still unproven are strangers: let their threads end.
    for (_, stream) in unproven {
        let _ = stream.shutdown(Shutdown::Both);
    }
    Ok((links, readers))
}

/// A new connection and the `Hello` it sent, read by its own thread.
struct Greeting {
    stream: TcpStream,
    writer: TcpStream,
    reader: FrameReader<TcpStream>,
    hello: Frame,
}

/// Reads a new connection's first frame, waiting at most
/// [`HELLO_TIMEOUT_MS`].
fn read_hello(stream: TcpStream) -> Result<Greeting, String> {
    let setup = |error: io::Error| error.to_string();
    stream.set_nonblocking(false).map_err(setup)?;
    stream
        .set_read_timeout(Some(Duration::from_millis(HELLO_TIMEOUT_MS)))
        .map_err(setup)?;
    let _ = stream.set_nodelay(true);
    crate::proxy::detect_silent_peer(&stream);
    let writer = stream.try_clone().map_err(setup)?;
    writer
        .set_write_timeout(Some(Duration::from_millis(WRITE_TIMEOUT_MS)))
        .map_err(setup)?;
    let mut reader = FrameReader::new(stream.try_clone().map_err(setup)?);
    let hello = reader.read_frame().map_err(|error| match error {
        ReadError::Io(ref io_error)
            if matches!(
                io_error.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            format!("no hello: timed out after {} s", HELLO_TIMEOUT_MS / 1000)
        }
        _ => format!("no hello: {error}"),
    })?;
    Ok(Greeting {
        stream,
        writer,
        reader,
        hello,
    })
}

/// Checks a new connection's `Hello`: the token, and a remote host that
/// has no proxy yet.
fn admit(
    greeting: Greeting,
    identity: &JobIdentity,
    placement: &Placement,
    links: &[Option<Arc<ProxyLink>>],
    launchers: &[(usize, std::process::Child)],
) -> Result<(usize, Connected), String> {
    let setup = |error: io::Error| error.to_string();
    let Greeting {
        stream,
        writer,
        reader,
        hello,
    } = greeting;
    let Frame::Hello {
        version,
        host_index,
        token,
    } = hello
    else {
        return Err("the first frame is not a hello".to_string());
    };
    if token != identity.proxy_token {
        return Err("wrong job token".to_string());
    }
    if version != PROTOCOL_VERSION {
        return Err(format!(
            "proxy protocol version {version}, mpiexec speaks {PROTOCOL_VERSION}"
        ));
    }
    let index = host_index as usize;
    let Some(launcher) = launchers.iter().find(|(launched, _)| *launched == index) else {
        return Err(format!("host index {host_index} has no proxy to start"));
    };
    if links[index].is_some() {
        return Err(format!(
            "a second proxy for host {}",
            placement.hosts[index].name
        ));
    }
    stream.set_read_timeout(None).map_err(setup)?;
    let link = Arc::new(ProxyLink {
        host: placement.hosts[index].name.clone(),
        launcher_pid: launcher.1.id() as i32,
        writer: Mutex::new(writer),
        routes: Mutex::new(HashMap::new()),
        replies: Mutex::new(Vec::new()),
        reply_arrived: Condvar::new(),
        lost: AtomicBool::new(false),
        closing: AtomicBool::new(false),
    });
    Ok((index, (link, reader)))
}

/// How the output of a proxy's ranks is shown.
pub struct RemoteOutput {
    /// `--tag-output`.
    pub tag_output: bool,
    /// `-n`: processes are `rank_count * replicas`.
    pub rank_count: u32,
    /// Under `--replicas`, per rank its stdout and stderr, fed by every
    /// replica and shown once (`replicated_output`); empty otherwise.
    pub replicated: Vec<[Arc<RankOutput>; 2]>,
    /// Under `--msglog`, what each rank's incarnations have shown: a
    /// restarted rank's replayed output is not shown twice.
    pub replay: Option<Arc<OutputLedger>>,
}

/// The reading side of one proxy connection, until it ends (see the module
/// text); then the link is lost.
pub fn demultiplex(
    link: &ProxyLink,
    mut reader: FrameReader<TcpStream>,
    exits: &RemoteExits,
    remote_output: &RemoteOutput,
) {
    let tag_output = remote_output.tag_output;
    let mut splitters: HashMap<(u32, u32, bool), LineSplitter> = HashMap::new();
    // Under --replicas: each process's streams go to its rank's outputs.
    let mut feeds: HashMap<(u32, u32, bool), ReplicaFeed> = HashMap::new();
    // Under --msglog: each incarnation's streams, replays left out.
    let mut replayed: HashMap<(u32, u32, bool), ReplayedFeed> = HashMap::new();
    let prefix = |rank: u32| {
        if tag_output {
            format!("[{rank}] ")
        } else {
            String::new()
        }
    };
    let replica_feed = |rank: u32, stream: OutputStream| {
        let outputs = remote_output
            .replicated
            .get((rank % remote_output.rank_count.max(1)) as usize)?;
        let index = usize::from(stream == OutputStream::Stderr);
        Some(ReplicaFeed::new(
            outputs[index].clone(),
            (rank / remote_output.rank_count.max(1)) as usize,
        ))
    };
    let destination = |stream: OutputStream| match stream {
        OutputStream::Stdout => Destination::Stdout,
        OutputStream::Stderr => Destination::Stderr,
    };
    let mut output_open = true;
    let mut emit = |stream: OutputStream, bytes: Vec<u8>| {
        if output_open
            && !bytes.is_empty()
            && output::write_to(destination(stream), &bytes).is_err()
        {
            // Our own output is closed: the ranks' is still drained.
            output_open = false;
        }
    };
    loop {
        let frame = match reader.read_frame() {
            Ok(frame) => frame,
            Err(ReadError::Closed) => break,
            Err(error) => {
                if !link.closing.load(Ordering::SeqCst) {
                    eprintln!(
                        "mpiexec: the connection to the proxy of host {} failed: {error}",
                        link.host
                    );
                }
                break;
            }
        };
        match frame {
            Frame::Pmi {
                rank,
                incarnation,
                bytes,
            } => {
                let routes = lock(&link.routes);
                if let Some(route) = routes
                    .get(&rank)
                    .filter(|route| route.incarnation == incarnation)
                {
                    let _ = (&route.to_server).write_all(&bytes);
                }
            }
            Frame::PmiClosed { rank, incarnation } => {
                let routes = lock(&link.routes);
                if let Some(route) = routes
                    .get(&rank)
                    .filter(|route| route.incarnation == incarnation)
                {
                    let _ = route.to_server.shutdown(Shutdown::Write);
                }
            }
            Frame::Output {
                rank,
                incarnation,
                stream,
                bytes,
            } => {
                let key = (rank, incarnation, stream == OutputStream::Stdout);
                if let Some(ledger) = &remote_output.replay {
                    let feed = replayed.entry(key).or_insert_with(|| {
                        ReplayedFeed::open(
                            ledger.clone(),
                            rank as usize * 2 + usize::from(stream == OutputStream::Stderr),
                            incarnation,
                            &prefix(rank),
                        )
                    });
                    let ready = feed.push(&bytes);
                    emit(stream, ready);
                    continue;
                }
                if !remote_output.replicated.is_empty() {
                    if let Some(feed) = feeds.get_mut(&key) {
                        feed.push(&bytes);
                    } else if let Some(mut feed) = replica_feed(rank, stream) {
                        feed.push(&bytes);
                        feeds.insert(key, feed);
                    }
                    continue;
                }
                let splitter = splitters
                    .entry(key)
                    .or_insert_with(|| LineSplitter::new(&prefix(rank)));
                let ready = splitter.push(&bytes);
                emit(stream, ready);
            }
            Frame::OutputClosed {
                rank,
                incarnation,
                stream,
            } => {
                let key = (rank, incarnation, stream == OutputStream::Stdout);
                if let Some(feed) = feeds.remove(&key) {
                    feed.finish();
                    continue;
                }
                if let Some(feed) = replayed.remove(&key) {
                    emit(stream, feed.finish());
                    // A later incarnation of this stream may wait for it.
                    for ((other, _, stdout), feed) in replayed.iter_mut() {
                        if *other == rank && *stdout == (stream == OutputStream::Stdout) {
                            let ready = feed.retry();
                            emit(stream, ready);
                        }
                    }
                    continue;
                }
                if let Some(mut splitter) = splitters.remove(&key) {
                    emit(stream, splitter.finish());
                }
            }
            reply @ (Frame::Started { .. } | Frame::StartFailed { .. }) => {
                lock(&link.replies).push(reply);
                link.reply_arrived.notify_all();
            }
            Frame::Exited {
                rank,
                incarnation,
                wait_status,
            } => {
                lock(exits).push(RemoteExit {
                    rank,
                    incarnation,
                    wait_status,
                });
                crate::signals::wake();
            }
            other => {
                eprintln!(
                    "mpiexec: the proxy of host {} sent an unexpected frame: {other:?}",
                    link.host
                );
                break;
            }
        }
    }
    for ((_, _, stdout), mut splitter) in splitters.drain() {
        let stream = if stdout {
            OutputStream::Stdout
        } else {
            OutputStream::Stderr
        };
        emit(stream, splitter.finish());
    }
    link.mark_lost();
}
