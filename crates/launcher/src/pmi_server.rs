//! The launcher's PMI-1 server: one key-value space and one barrier shared by
//! all ranks of the job, one thread per rank connection.
//!
//! It answers exactly as MPICH's hydra does (same reply fields, same limits:
//! keys up to 64 bytes, values up to 1024), so code that works under our
//! `mpiexec` also works under `mpiexec.hydra`. What the supervisor needs to
//! decide a rank's fate (did it init, finalize, abort, close its connection)
//! is recorded here and read by the supervisor's loop.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use resmpi_runtime::codec::{PmiLine, MAX_LINE_BYTES};

/// Longest key accepted (hydra's `keylen_max`).
pub const KEY_MAX_BYTES: usize = 64;
/// Longest value accepted (hydra's `vallen_max`).
pub const VALUE_MAX_BYTES: usize = 1024;
/// Longest key-value space name reported (hydra's `kvsname_max`).
pub const KVS_NAME_MAX_BYTES: usize = 256;
/// Bound on the key-value space: past it, puts fail with `rc=-1`.
pub const KVS_MAX_BYTES: usize = 64 * 1024 * 1024;
/// How long a TCP client may take to send its `cmd=initack` line.
pub const INITACK_TIMEOUT_MS: u64 = 10_000;
/// Most TCP connections waiting for their `cmd=initack` at once; more are
/// closed at once (a bound on what strangers on the network can cost us).
pub const MAX_PENDING_HANDSHAKES: u32 = 64;

/// A rank's request to end the job (`cmd=abort`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbortRequest {
    /// The rank that asked.
    pub rank: u32,
    /// Its `exitcode`.
    pub exit_code: i32,
    /// Its `message`, when it sent one.
    pub message: Option<String>,
}

/// What the server knows about each rank and the shared key-value space.
#[derive(Debug, Default)]
pub struct ServerState {
    key_values: HashMap<String, String>,
    key_values_bytes: usize,
    barrier_epoch: u64,
    barrier_arrived_count: u32,
    shutting_down: bool,
    /// Per rank: sent `cmd=init`.
    pub initialized: Vec<bool>,
    /// Per rank: sent `cmd=finalize`.
    pub finalized: Vec<bool>,
    /// Per rank: its PMI connection reached end of file (it exited or closed it).
    pub connection_closed: Vec<bool>,
    /// Per rank: a TCP connection (`cmd=initack`) was accepted for it.
    pub connected: Vec<bool>,
    /// Aborts not yet handled by the supervisor.
    pub abort_requests: Vec<AbortRequest>,
}

impl ServerState {
    /// The value ranks put under `key`, if any.
    pub fn key_value(&self, key: &str) -> Option<&str> {
        self.key_values.get(key).map(String::as_str)
    }

    /// Ranks inside a barrier that has not completed.
    pub fn barrier_waiting_count(&self) -> u32 {
        self.barrier_arrived_count
    }
}

/// The server shared by all rank threads.
pub struct PmiServer {
    rank_count: u32,
    kvs_name: String,
    process_mapping: String,
    pending_handshakes: AtomicU32,
    state: Mutex<ServerState>,
    barrier_released: Condvar,
}

impl PmiServer {
    /// A server for `rank_count` ranks with key-value space `kvs_name`;
    /// `process_mapping` is the `PMI_process_mapping` value.
    pub fn new(rank_count: u32, kvs_name: String, process_mapping: String) -> Arc<PmiServer> {
        let ranks = rank_count as usize;
        Arc::new(PmiServer {
            rank_count,
            kvs_name,
            process_mapping,
            pending_handshakes: AtomicU32::new(0),
            state: Mutex::new(ServerState {
                initialized: vec![false; ranks],
                finalized: vec![false; ranks],
                connection_closed: vec![false; ranks],
                connected: vec![false; ranks],
                ..ServerState::default()
            }),
            barrier_released: Condvar::new(),
        })
    }

    /// The state, for the supervisor to read or to take abort requests.
    pub fn state(&self) -> MutexGuard<'_, ServerState> {
        // A rank thread cannot panic while holding the lock (panic = abort).
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Releases every thread waiting in a barrier without a reply: the job
    /// is being torn down.
    pub fn shut_down(&self) {
        self.state().shutting_down = true;
        self.barrier_released.notify_all();
    }

    /// Accepts TCP PMI connections on `listener` for ever (hydra's
    /// `PMI_PORT` mode), one thread each. `accepted(rank)` says whether
    /// rank may connect over TCP; `token` is the job's PMI token, which the
    /// client must send as `token=` in its `cmd=initack` line.
    pub fn accept_tcp(
        self: &Arc<PmiServer>,
        listener: TcpListener,
        accepted: Arc<dyn Fn(u32) -> bool + Send + Sync>,
        token: String,
    ) {
        let token = Arc::new(token);
        for stream in listener.incoming() {
            let Ok(stream) = stream else {
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            if self.pending_handshakes.fetch_add(1, Ordering::SeqCst) >= MAX_PENDING_HANDSHAKES {
                self.pending_handshakes.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            let server = self.clone();
            let accepted = accepted.clone();
            let token = token.clone();
            thread::spawn(move || {
                let rank = server.initack(&stream, &*accepted, &token);
                server.pending_handshakes.fetch_sub(1, Ordering::SeqCst);
                if let Some(rank) = rank {
                    server.serve(rank, stream);
                }
            });
        }
    }

    /// The `PMI_PORT` preamble on a new TCP connection: reads
    /// `cmd=initack pmiid=RANK token=T`, answers as hydra does
    /// (`cmd=initack`, then `cmd=set size=`, `rank=`, `debug=`) and returns
    /// the rank; `None` (connection refused) for a bad or duplicate one.
    fn initack(
        &self,
        mut stream: &TcpStream,
        accepted: &dyn Fn(u32) -> bool,
        token: &str,
    ) -> Option<u32> {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(Duration::from_millis(INITACK_TIMEOUT_MS)));
        // One byte at a time: nothing past the first line may be consumed here.
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while line.last() != Some(&b'\n') {
            if line.len() > MAX_LINE_BYTES || !matches!(stream.read(&mut byte), Ok(1)) {
                return None;
            }
            line.push(byte[0]);
        }
        let peer = stream
            .peer_addr()
            .map(|address| address.to_string())
            .unwrap_or_else(|_| "?".to_string());
        let refuse = |mut stream: &TcpStream, message: &str| {
            let reply = PmiLine::new("initack").with("rc", -1).with("msg", message);
            let _ = stream.write_all(reply.encode().as_bytes());
            None
        };
        let Ok(request) = PmiLine::parse(&String::from_utf8_lossy(&line)) else {
            return refuse(stream, "malformed_line");
        };
        if request.command != "initack" {
            return refuse(stream, "expected_initack");
        }
        if request.get("token") != Some(token) {
            eprintln!("mpiexec: refused a PMI connection from {peer}: wrong or missing job token");
            return refuse(stream, "bad_token");
        }
        let rank = request
            .get("pmiid")
            .and_then(|text| text.parse::<u32>().ok())
            .filter(|&rank| rank < self.rank_count && accepted(rank));
        let Some(rank) = rank else {
            eprintln!("mpiexec: refused a PMI connection from {peer}: unknown pmiid");
            return refuse(stream, "unknown_pmiid");
        };
        {
            let mut state = self.state();
            if state.connected[rank as usize] {
                drop(state);
                eprintln!("mpiexec: refused a second PMI connection for rank {rank} from {peer}");
                return refuse(stream, "rank_already_connected");
            }
            state.connected[rank as usize] = true;
        }
        let _ = stream.set_read_timeout(None);
        let reply = format!(
            "{}{}{}{}",
            PmiLine::new("initack").encode(),
            PmiLine::new("set").with("size", self.rank_count).encode(),
            PmiLine::new("set").with("rank", rank).encode(),
            PmiLine::new("set").with("debug", 0).encode()
        );
        if stream.write_all(reply.as_bytes()).is_err() {
            self.state().connection_closed[rank as usize] = true;
            return None;
        }
        Some(rank)
    }

    /// Serves rank `rank` on `stream` (a socketpair end or a TCP
    /// connection) until the rank closes it.
    pub fn serve(&self, rank: u32, mut stream: impl Read + Write) {
        let mut pending: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 4096];
        'connection: loop {
            while let Some(end) = pending.iter().position(|&byte| byte == b'\n') {
                let bytes: Vec<u8> = pending.drain(..=end).collect();
                let text = String::from_utf8_lossy(&bytes);
                let reply = match PmiLine::parse(&text) {
                    Ok(line) => self.handle_line(rank, &line),
                    Err(error) => {
                        eprintln!("mpiexec: rank {rank} sent a malformed PMI line: {error}");
                        Some(
                            PmiLine::new("error")
                                .with("rc", -1)
                                .with("msg", "malformed_line"),
                        )
                    }
                };
                if let Some(reply) = reply {
                    if stream.write_all(reply.encode().as_bytes()).is_err() {
                        break 'connection;
                    }
                }
            }
            if pending.len() > MAX_LINE_BYTES {
                eprintln!(
                    "mpiexec: rank {rank} sent a PMI line longer than {MAX_LINE_BYTES} bytes; closing its connection"
                );
                break;
            }
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(count) => pending.extend_from_slice(&chunk[..count]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.state().connection_closed[rank as usize] = true;
    }

    /// The reply to one request from `rank`; `None` for requests that get no
    /// reply (abort, a barrier ended by shutdown). Blocks in `barrier_in`
    /// until every rank has arrived.
    pub fn handle_line(&self, rank: u32, line: &PmiLine) -> Option<PmiLine> {
        let failure = |command: &str, message: &str| {
            Some(PmiLine::new(command).with("rc", -1).with("msg", message))
        };
        let kvs_matches = || line.get("kvsname") == Some(self.kvs_name.as_str());
        match line.command.as_str() {
            "init" => {
                if line.get("pmi_version") != Some("1") {
                    return failure("response_to_init", "only_pmi_version_1_is_supported");
                }
                self.state().initialized[rank as usize] = true;
                Some(
                    PmiLine::new("response_to_init")
                        .with("pmi_version", 1)
                        .with("pmi_subversion", 1)
                        .with("rc", 0),
                )
            }
            "get_maxes" => Some(
                PmiLine::new("maxes")
                    .with("kvsname_max", KVS_NAME_MAX_BYTES)
                    .with("keylen_max", KEY_MAX_BYTES)
                    .with("vallen_max", VALUE_MAX_BYTES),
            ),
            "get_appnum" => Some(PmiLine::new("appnum").with("appnum", 0)),
            "get_my_kvsname" => Some(PmiLine::new("my_kvsname").with("kvsname", &self.kvs_name)),
            "get_universe_size" => {
                Some(PmiLine::new("universe_size").with("size", self.rank_count))
            }
            "put" => {
                let (Some(key), Some(value)) = (line.get("key"), line.get("value")) else {
                    return failure("put_result", "put_needs_key_and_value");
                };
                if !kvs_matches() {
                    return failure("put_result", "unknown_kvsname");
                }
                if key.len() > KEY_MAX_BYTES || value.len() > VALUE_MAX_BYTES {
                    return failure("put_result", "key_or_value_too_long");
                }
                let mut state = self.state();
                if state.key_values_bytes + key.len() + value.len() > KVS_MAX_BYTES {
                    return failure("put_result", "kvs_full");
                }
                state.key_values_bytes += key.len() + value.len();
                if let Some(old) = state.key_values.insert(key.to_string(), value.to_string()) {
                    state.key_values_bytes -= key.len() + old.len();
                }
                Some(
                    PmiLine::new("put_result")
                        .with("rc", 0)
                        .with("msg", "success"),
                )
            }
            "get" => {
                let Some(key) = line.get("key") else {
                    return failure("get_result", "get_needs_a_key");
                };
                if !kvs_matches() {
                    return failure("get_result", "unknown_kvsname");
                }
                let found = self.state().key_values.get(key).cloned().or_else(|| {
                    // MPICH clients read the rank-to-node map from this key.
                    (key == "PMI_process_mapping").then(|| self.process_mapping.clone())
                });
                Some(match found {
                    Some(value) => PmiLine::new("get_result")
                        .with("rc", 0)
                        .with("msg", "success")
                        .with("value", value),
                    None => PmiLine::new("get_result")
                        .with("rc", -1)
                        .with("msg", format!("key_{key}_not_found"))
                        .with("value", "unknown"),
                })
            }
            "barrier_in" => {
                let mut state = self.state();
                let epoch = state.barrier_epoch;
                state.barrier_arrived_count += 1;
                if state.barrier_arrived_count == self.rank_count {
                    state.barrier_arrived_count = 0;
                    state.barrier_epoch += 1;
                    self.barrier_released.notify_all();
                }
                while state.barrier_epoch == epoch && !state.shutting_down {
                    state = self
                        .barrier_released
                        .wait(state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
                if state.barrier_epoch == epoch {
                    return None;
                }
                Some(PmiLine::new("barrier_out"))
            }
            "finalize" => {
                self.state().finalized[rank as usize] = true;
                Some(PmiLine::new("finalize_ack"))
            }
            "abort" => {
                let exit_code = line
                    .get("exitcode")
                    .and_then(|text| text.parse::<i32>().ok())
                    .unwrap_or(1);
                self.state().abort_requests.push(AbortRequest {
                    rank,
                    exit_code,
                    message: line.get("message").map(str::to_string),
                });
                None
            }
            other => {
                eprintln!("mpiexec: rank {rank} sent an unsupported PMI command 'cmd={other}'");
                failure(&format!("{other}_result"), "unsupported_command")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn server(rank_count: u32, kvs_name: &str) -> Arc<PmiServer> {
        PmiServer::new(
            rank_count,
            kvs_name.to_string(),
            format!("(vector,(0,1,{rank_count}))"),
        )
    }

    fn request(server: &PmiServer, rank: u32, text: &str) -> Option<String> {
        server
            .handle_line(rank, &PmiLine::parse(text).unwrap())
            .map(|reply| reply.encode().trim_end().to_string())
    }

    #[test]
    fn replies_match_hydra() {
        let server = server(2, "kvs_test");
        let cases = [
            (
                "cmd=init pmi_version=1 pmi_subversion=1",
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
            ),
            (
                "cmd=get_maxes",
                "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
            ),
            ("cmd=get_appnum", "cmd=appnum appnum=0"),
            ("cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_test"),
            ("cmd=get_universe_size", "cmd=universe_size size=2"),
            (
                "cmd=put kvsname=kvs_test key=k value=a=b",
                "cmd=put_result rc=0 msg=success",
            ),
            (
                "cmd=get kvsname=kvs_test key=k",
                "cmd=get_result rc=0 msg=success value=a=b",
            ),
            (
                "cmd=get kvsname=kvs_test key=none",
                "cmd=get_result rc=-1 msg=key_none_not_found value=unknown",
            ),
            (
                "cmd=get kvsname=kvs_test key=PMI_process_mapping",
                "cmd=get_result rc=0 msg=success value=(vector,(0,1,2))",
            ),
            (
                "cmd=get kvsname=other key=k",
                "cmd=get_result rc=-1 msg=unknown_kvsname",
            ),
            ("cmd=finalize", "cmd=finalize_ack"),
        ];
        for (sent, expected) in cases {
            assert_eq!(
                request(&server, 0, sent).as_deref(),
                Some(expected),
                "{sent}"
            );
        }
        let state = server.state();
        assert!(state.initialized[0] && state.finalized[0]);
        assert!(!state.initialized[1] && !state.finalized[1]);
    }

    #[test]
    fn puts_past_the_limits_are_refused() {
        let server = server(1, "k");
        let long_value = "v".repeat(VALUE_MAX_BYTES + 1);
        let reply = request(
            &server,
            0,
            &format!("cmd=put kvsname=k key=x value={long_value}"),
        );
        assert!(reply.unwrap().contains("rc=-1"));
        let long_key = "k".repeat(KEY_MAX_BYTES + 1);
        let reply = request(
            &server,
            0,
            &format!("cmd=put kvsname=k key={long_key} value=v"),
        );
        assert!(reply.unwrap().contains("rc=-1"));
    }

    #[test]
    fn abort_is_recorded_and_not_answered() {
        let server = server(2, "k");
        assert_eq!(
            request(&server, 1, "cmd=abort exitcode=7 message=bad_input"),
            None
        );
        assert_eq!(
            server.state().abort_requests,
            vec![AbortRequest {
                rank: 1,
                exit_code: 7,
                message: Some("bad_input".to_string())
            }]
        );
    }

    #[test]
    fn barrier_releases_only_when_every_rank_arrived_and_is_reusable() {
        let server = server(3, "k");
        for _round in 0..2 {
            let waiters: Vec<_> = (0..2)
                .map(|rank| {
                    let server = server.clone();
                    thread::spawn(move || request(&server, rank, "cmd=barrier_in"))
                })
                .collect();
            while server.state().barrier_waiting_count() < 2 {
                thread::sleep(Duration::from_millis(1));
            }
            assert!(waiters.iter().all(|waiter| !waiter.is_finished()));
            assert_eq!(
                request(&server, 2, "cmd=barrier_in").as_deref(),
                Some("cmd=barrier_out")
            );
            for waiter in waiters {
                assert_eq!(waiter.join().unwrap().as_deref(), Some("cmd=barrier_out"));
            }
        }
    }

    #[test]
    fn shutdown_releases_barrier_waiters_without_a_reply() {
        let server = server(2, "k");
        let waiter = {
            let server = server.clone();
            thread::spawn(move || request(&server, 0, "cmd=barrier_in"))
        };
        while server.state().barrier_waiting_count() < 1 {
            thread::sleep(Duration::from_millis(1));
        }
        server.shut_down();
        assert_eq!(waiter.join().unwrap(), None);
    }

    #[test]
    fn serve_answers_over_a_socket_and_notes_the_close() {
        let server = server(1, "k");
        let (client, server_end) = UnixStream::pair().unwrap();
        let thread = {
            let server = server.clone();
            thread::spawn(move || server.serve(0, server_end))
        };
        let mut client_writer = &client;
        client_writer
            .write_all(b"cmd=init pmi_version=1 pmi_subversion=1\nnot a pmi line\ncmd=finalize\n")
            .unwrap();
        let mut received = String::new();
        let mut reader = &client;
        let mut buffer = [0u8; 1024];
        while received.matches('\n').count() < 3 {
            let count = reader.read(&mut buffer).unwrap();
            received.push_str(std::str::from_utf8(&buffer[..count]).unwrap());
        }
        assert!(received.starts_with("cmd=response_to_init"), "{received}");
        assert!(received.contains("cmd=error rc=-1"), "{received}");
        assert!(received.ends_with("cmd=finalize_ack\n"), "{received}");
        drop(client);
        thread.join().unwrap();
        assert!(server.state().connection_closed[0]);
    }

    fn tcp_client(address: std::net::SocketAddr, first_line: &str) -> (TcpStream, String) {
        let mut client = TcpStream::connect(address).unwrap();
        client.write_all(first_line.as_bytes()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut received = String::new();
        let mut buffer = [0u8; 1024];
        while !(received.contains("debug=") || received.contains("rc=-1")) {
            match client.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(count) => received.push_str(std::str::from_utf8(&buffer[..count]).unwrap()),
            }
        }
        (client, received)
    }

    #[test]
    fn tcp_clients_say_initack_with_the_token_once_per_rank() {
        let server = server(4, "k");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        {
            let server = server.clone();
            thread::spawn(move || {
                server.accept_tcp(listener, Arc::new(|rank| rank >= 2), "t0k".to_string())
            });
        }
        let (_, reply) = tcp_client(address, "cmd=initack pmiid=3\n");
        assert!(reply.contains("rc=-1 msg=bad_token"), "{reply}");
        let (_, reply) = tcp_client(address, "cmd=initack pmiid=1 token=t0k\n");
        assert!(reply.contains("msg=unknown_pmiid"), "{reply}");
        // The first request rides in the same packet as initack: not lost.
        let (mut client, reply) = tcp_client(
            address,
            "cmd=initack pmiid=3 token=t0k\ncmd=init pmi_version=1 pmi_subversion=1\n",
        );
        assert_eq!(
            reply.lines().take(4).collect::<Vec<_>>(),
            [
                "cmd=initack",
                "cmd=set size=4",
                "cmd=set rank=3",
                "cmd=set debug=0"
            ]
        );
        let (_, again) = tcp_client(address, "cmd=initack pmiid=3 token=t0k\n");
        assert!(again.contains("rank_already_connected"), "{again}");
        let mut rest = reply.lines().skip(4).collect::<Vec<_>>().join("\n");
        let mut buffer = [0u8; 256];
        while !rest.contains("response_to_init") {
            let count = client.read(&mut buffer).unwrap();
            rest.push_str(std::str::from_utf8(&buffer[..count]).unwrap());
        }
        assert!(server.state().initialized[3]);
        client.write_all(b"cmd=finalize\n").unwrap();
        drop(client);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !server.state().connection_closed[3] {
            assert!(std::time::Instant::now() < deadline, "close not noticed");
            thread::sleep(Duration::from_millis(1));
        }
        assert!(server.state().finalized[3]);
    }
}
