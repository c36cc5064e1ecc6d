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
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use resmpi_runtime::codec::{PmiLine, MAX_LINE_BYTES};

/// Longest key accepted (hydra's `keylen_max`).
pub const KEY_MAX_BYTES: usize = 64;
/// Longest value accepted (hydra's `vallen_max`).
pub const VALUE_MAX_BYTES: usize = 1024;
/// Longest key-value space name reported (hydra's `kvsname_max`).
pub const KVS_NAME_MAX_BYTES: usize = 256;
/// Bound on the key-value space: past it, puts fail with `rc=-1`.
pub const KVS_MAX_BYTES: usize = 64 * 1024 * 1024;

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
    /// Aborts not yet handled by the supervisor.
    pub abort_requests: Vec<AbortRequest>,
}

impl ServerState {
    /// Ranks inside a barrier that has not completed.
    pub fn barrier_waiting_count(&self) -> u32 {
        self.barrier_arrived_count
    }
}

/// The server shared by all rank threads.
pub struct PmiServer {
    rank_count: u32,
    kvs_name: String,
    state: Mutex<ServerState>,
    barrier_released: Condvar,
}

impl PmiServer {
    /// A server for `rank_count` ranks with key-value space `kvs_name`.
    pub fn new(rank_count: u32, kvs_name: String) -> Arc<PmiServer> {
        let ranks = rank_count as usize;
        Arc::new(PmiServer {
            rank_count,
            kvs_name,
            state: Mutex::new(ServerState {
                initialized: vec![false; ranks],
                finalized: vec![false; ranks],
                connection_closed: vec![false; ranks],
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

    /// Serves rank `rank` on `stream` until the rank closes it.
    pub fn serve(&self, rank: u32, stream: UnixStream) {
        let mut reader = &stream;
        let mut writer = &stream;
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
                    if writer.write_all(reply.encode().as_bytes()).is_err() {
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
            match reader.read(&mut chunk) {
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
                    // MPICH clients read the rank-to-node map from this key:
                    // every rank on one node.
                    (key == "PMI_process_mapping")
                        .then(|| format!("(vector,(0,1,{}))", self.rank_count))
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
    use std::thread;
    use std::time::Duration;

    fn request(server: &PmiServer, rank: u32, text: &str) -> Option<String> {
        server
            .handle_line(rank, &PmiLine::parse(text).unwrap())
            .map(|reply| reply.encode().trim_end().to_string())
    }

    #[test]
    fn replies_match_hydra() {
        let server = PmiServer::new(2, "kvs_test".to_string());
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
        let server = PmiServer::new(1, "k".to_string());
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
        let server = PmiServer::new(2, "k".to_string());
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
        let server = PmiServer::new(3, "k".to_string());
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
        let server = PmiServer::new(2, "k".to_string());
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
        let server = PmiServer::new(1, "k".to_string());
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
}
