//! Dynamic process management between the processes of one job: ports
//! (MPI_Open_port / MPI_Close_port), MPI_Comm_accept / MPI_Comm_connect,
//! MPI_Comm_join's half that needs the library, and MPI_Comm_disconnect.
//!
//! Why it is small: two groups of one job are already endpoints of one
//! engine (world ranks), so an inter-communicator between them is what
//! MPI_Intercomm_create makes; only the way the two leaders find each
//! other differs. A port names the process that opened it
//! (`resmpi-port:JOB:RANK:ID`); the connecting leader sends its request to
//! that process on MPI_COMM_WORLD's collective context, with a tag above
//! every collective sequence tag and the leader exchange of
//! inter-communicators (`intercomm.rs`), so it can never match a user
//! message or a collective step. The accepting leader takes requests for
//! its port from any source, answers with the agreed context and its
//! group, and each leader broadcasts the outcome to its group, exactly as
//! MPI_Intercomm_create does: no member waits for a leader that failed.
//!
//! Processes of another job (another `mpiexec`, or worlds started by
//! MPI_Comm_spawn, which resmpi does not start yet) have no endpoint in
//! this engine: a port of another job is refused at once with
//! MPI_ERR_PORT, never waited for. A connect whose acceptor never answers
//! gives up after `RESMPI_CONNECT_TIMEOUT` seconds (60 by default;
//! MPICH's ch4 waits 180), so a closed port cannot hang the connecting
//! group.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::comm::Communicator;
use crate::engine::Destination;
use crate::error::{fail, ErrorClass, MpiError, MpiResult};
use crate::intercomm::INTERCOMM_CONTEXT_SPAN;
use crate::request::SendMode;
use crate::Mpi;

/// Prefix of every port name resmpi makes.
const PORT_PREFIX: &str = "resmpi-port";
/// Longest port name (MPI_MAX_PORT_NAME, counting the terminating NUL).
pub const PORT_NAME_MAX_BYTES: usize = 256;
/// Ports one process may have open at once.
const OPEN_PORTS_MAX_COUNT: usize = 1024;
/// Port ids wrap at this bound (they take the low bits of a tag).
const PORT_ID_MODULUS: u32 = 1 << 28;
/// Tags of connect requests (port id in the low 28 bits) and of the
/// acceptor's replies, on MPI_COMM_WORLD's collective context: above the
/// collective sequence tags (below 2^30) and the inter-communicator leader
/// exchange (2^30).
const REQUEST_TAG_BASE: u32 = (1 << 30) | (1 << 29);
const REPLY_TAG_BASE: u32 = (1 << 30) | (1 << 28);
/// First word of a connect request and reply (a version, so that a
/// mismatched peer is an error and not a misread).
const HANDSHAKE_VERSION: u32 = 0x4450_4d01;
/// Default seconds a connecting leader waits for the acceptor.
const CONNECT_TIMEOUT_SECONDS_DEFAULT: u64 = 60;

/// The ports this process opened and has not closed.
#[derive(Debug, Default)]
pub struct Ports {
    open: Vec<u32>,
    next_id: u32,
}

/// A port name taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortName {
    /// The job (PMI key-value space name) of the process that opened it.
    pub job: String,
    /// World rank (engine endpoint) of that process.
    pub owner: u32,
    /// Its number among that process's ports.
    pub id: u32,
}

impl PortName {
    /// Parse `text`; `None` when it is not a port name resmpi made.
    pub fn parse(text: &str) -> Option<PortName> {
        let rest = text.strip_prefix(PORT_PREFIX)?.strip_prefix(':')?;
        let mut fields = rest.rsplitn(3, ':');
        let id = fields.next()?.parse::<u32>().ok()?;
        let owner = fields.next()?.parse::<u32>().ok()?;
        let job = fields.next()?.to_string();
        (id < PORT_ID_MODULUS && !job.is_empty()).then_some(PortName { job, owner, id })
    }

    /// The text of the port name.
    pub fn format(&self) -> String {
        format!("{PORT_PREFIX}:{}:{}:{}", self.job, self.owner, self.id)
    }
}

fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_ne_bytes()).collect()
}

fn bytes_to_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|chunk| u32::from_ne_bytes(chunk.try_into().expect("4 bytes")))
        .collect()
}

/// What MPI_Comm_join's two processes tell each other over the socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinCard {
    /// The job (PMI key-value space name).
    pub job: String,
    /// World rank (engine endpoint).
    pub rank: u32,
    /// Next context id unused by the process.
    pub next_context: u32,
}

impl JoinCard {
    /// Longest encoded card (a 4-byte length, then the fields).
    pub const MAX_BYTES: usize = 4 + 8 + 512;

    /// Bytes to write on the socket: a u32 length (little-endian), then
    /// rank, next context and the job name.
    pub fn encode(&self) -> Vec<u8> {
        let job = self.job.as_bytes();
        let job = &job[..job.len().min(512)];
        let mut bytes = Vec::with_capacity(12 + job.len());
        bytes.extend_from_slice(&((8 + job.len()) as u32).to_le_bytes());
        bytes.extend_from_slice(&self.rank.to_le_bytes());
        bytes.extend_from_slice(&self.next_context.to_le_bytes());
        bytes.extend_from_slice(job);
        bytes
    }

    /// The card in `body` (what followed the length); `None` if malformed.
    pub fn decode(body: &[u8]) -> Option<JoinCard> {
        if body.len() < 8 || body.len() > Self::MAX_BYTES - 4 {
            return None;
        }
        Some(JoinCard {
            rank: u32::from_le_bytes(body[..4].try_into().ok()?),
            next_context: u32::from_le_bytes(body[4..8].try_into().ok()?),
            job: String::from_utf8(body[8..].to_vec()).ok()?,
        })
    }
}

impl Mpi {
    /// This process's world rank as the engine knows it (its endpoint).
    fn endpoint(&self) -> u32 {
        self.engine.state.rank
    }

    /// MPI_Open_port: a new port name of this process.
    pub fn open_port(&mut self) -> MpiResult<String> {
        if self.ports.open.len() >= OPEN_PORTS_MAX_COUNT {
            return fail(
                ErrorClass::Port,
                format!("this process has {OPEN_PORTS_MAX_COUNT} ports open: close some first"),
            );
        }
        let id = self.ports.next_id;
        self.ports.next_id = (id + 1) % PORT_ID_MODULUS;
        self.ports.open.push(id);
        Ok(PortName {
            job: self.pmi.kvs_name().to_string(),
            owner: self.endpoint(),
            id,
        }
        .format())
    }

    /// MPI_Close_port.
    pub fn close_port(&mut self, name: &str) -> MpiResult<()> {
        let id = self.own_port(name)?;
        self.ports.open.retain(|open| *open != id);
        Ok(())
    }

    /// The id of `name`, a port this process opened and has not closed.
    fn own_port(&self, name: &str) -> MpiResult<u32> {
        let port = self.parse_port(name)?;
        if port.owner != self.endpoint() || !self.ports.open.contains(&port.id) {
            return fail(
                ErrorClass::Port,
                format!("port '{name}' is not open in this process"),
            );
        }
        Ok(port.id)
    }

    /// `name` as a port of this job; MPI_ERR_PORT otherwise.
    fn parse_port(&self, name: &str) -> MpiResult<PortName> {
        let Some(port) = PortName::parse(name) else {
            return fail(
                ErrorClass::Port,
                format!("'{name}' is not a port name made by MPI_Open_port"),
            );
        };
        if port.job != self.pmi.kvs_name() || port.owner >= self.engine.state.size {
            return fail(
                ErrorClass::Port,
                format!(
                    "port '{name}' belongs to another job: resmpi connects only processes started by the same mpiexec"
                ),
            );
        }
        Ok(port)
    }

    /// MPI_Comm_accept on `port_name` (significant at `root` only).
    pub fn comm_accept(
        &mut self,
        port_name: &str,
        root: i32,
        comm_index: usize,
    ) -> MpiResult<usize> {
        self.connect_or_accept(port_name, root, comm_index, true)
    }

    /// MPI_Comm_connect to `port_name` (significant at `root` only).
    pub fn comm_connect(
        &mut self,
        port_name: &str,
        root: i32,
        comm_index: usize,
    ) -> MpiResult<usize> {
        self.connect_or_accept(port_name, root, comm_index, false)
    }

    fn connect_or_accept(
        &mut self,
        port_name: &str,
        root: i32,
        comm_index: usize,
        accepting: bool,
    ) -> MpiResult<usize> {
        let local = self.comm(comm_index)?.clone();
        if local.is_inter() {
            return fail(
                ErrorClass::Comm,
                "the communicator must be an intra-communicator",
            );
        }
        if root < 0 || root as u32 >= local.size() {
            return fail(
                ErrorClass::Root,
                format!("root {root} is out of range (size {})", local.size()),
            );
        }
        let local_max = self.allreduce_i64_max(comm_index, self.next_context as i64)? as u32;
        let mut leader_result = None;
        if local.rank == root as u32 {
            leader_result = Some(if accepting {
                self.accept_as_leader(port_name, &local, local_max)
            } else {
                self.connect_as_leader(port_name, &local, local_max)
            });
        }
        self.finish_intercomm(
            comm_index,
            &local,
            root as u32,
            leader_result,
            ErrorClass::Port,
        )
    }

    /// The accepting leader: take the next connect request for the port,
    /// answer it with the agreed context and this group.
    fn accept_as_leader(
        &mut self,
        port_name: &str,
        local: &Communicator,
        local_max: u32,
    ) -> MpiResult<(u32, Vec<u32>)> {
        let id = self.own_port(port_name)?;
        let world_size = self.engine.state.size as usize;
        let mut request = vec![0u8; (4 + world_size) * 4];
        let context = self.comm(crate::WORLD)?.collective_context();
        let index = self.engine.start_receive(
            crate::WORLD,
            request.as_mut_ptr(),
            request.len(),
            None,
            Some((REQUEST_TAG_BASE | id) as i32),
            context,
        )?;
        self.engine.wait_request(index)?;
        let received = self.engine.state.requests.remove(index);
        let length = match received {
            Some(request) if request.status.error == 0 => request.status.count_bytes,
            Some(request) => {
                return fail(
                    ErrorClass::Port,
                    format!(
                        "receiving a connect request failed (error {})",
                        request.status.error
                    ),
                )
            }
            None => return fail(ErrorClass::Intern, "the connect request vanished"),
        };
        let words = bytes_to_words(&request[..length]);
        let (connector, remote_max, remote_group) = match words.as_slice() {
            [HANDSHAKE_VERSION, connector, remote_max, size, group @ ..]
                if *size as usize == group.len() && !group.is_empty() =>
            {
                (*connector, *remote_max, group.to_vec())
            }
            _ => return fail(ErrorClass::Port, "a malformed connect request arrived"),
        };
        let context = local_max.max(remote_max);
        let mut reply = vec![HANDSHAKE_VERSION, context, local.size()];
        reply.extend(local.group.iter());
        // The reply's bytes must outlive the send: it is waited for here.
        let reply_bytes = words_to_bytes(&reply);
        let send = self.engine.start_send(
            crate::WORLD,
            Destination {
                peer: connector,
                context: self.comm(crate::WORLD)?.collective_context(),
                tag: (REPLY_TAG_BASE | id) as i32,
            },
            reply_bytes.as_ptr(),
            reply_bytes.len(),
            SendMode::Standard,
        )?;
        self.engine.wait_request(send)?;
        self.engine.state.requests.remove(send);
        Ok((context, remote_group))
    }

    /// The connecting leader: send the request to the port's owner, wait
    /// (bounded) for its reply.
    fn connect_as_leader(
        &mut self,
        port_name: &str,
        local: &Communicator,
        local_max: u32,
    ) -> MpiResult<(u32, Vec<u32>)> {
        let port = self.parse_port(port_name)?;
        if local.local_rank_of(port.owner).is_some() {
            return fail(
                ErrorClass::Port,
                "the port belongs to a member of the connecting group",
            );
        }
        let context = self.comm(crate::WORLD)?.collective_context();
        let world_size = self.engine.state.size as usize;
        let mut reply = vec![0u8; (3 + world_size) * 4];
        let receive = self.engine.start_receive(
            crate::WORLD,
            reply.as_mut_ptr(),
            reply.len(),
            Some(port.owner),
            Some((REPLY_TAG_BASE | port.id) as i32),
            context,
        )?;
        let mut request = vec![HANDSHAKE_VERSION, self.endpoint(), local_max, local.size()];
        request.extend(local.group.iter());
        let request_bytes = words_to_bytes(&request);
        let send = self.engine.start_send(
            crate::WORLD,
            Destination {
                peer: port.owner,
                context,
                tag: (REQUEST_TAG_BASE | port.id) as i32,
            },
            request_bytes.as_ptr(),
            request_bytes.len(),
            SendMode::Standard,
        )?;
        self.engine.wait_request(send)?;
        self.engine.state.requests.remove(send);
        let deadline = Instant::now() + connect_timeout();
        let mut timed_out = false;
        self.engine.wait_until(|engine| {
            let done = engine
                .state
                .requests
                .get(receive)
                .is_none_or(|request| request.complete);
            timed_out = !done && Instant::now() >= deadline;
            done || timed_out
        })?;
        if timed_out {
            let _ = self.engine.cancel(receive);
            self.engine.state.requests.remove(receive);
            return fail(
                ErrorClass::Port,
                format!(
                    "MPI_Comm_connect: nobody accepted on port '{port_name}' within {} s (RESMPI_CONNECT_TIMEOUT)",
                    connect_timeout().as_secs()
                ),
            );
        }
        let length = match self.engine.state.requests.remove(receive) {
            Some(request) if request.status.error == 0 => request.status.count_bytes,
            _ => return fail(ErrorClass::Port, "receiving the accept reply failed"),
        };
        match bytes_to_words(&reply[..length]).as_slice() {
            [HANDSHAKE_VERSION, context, size, group @ ..]
                if *size as usize == group.len() && !group.is_empty() =>
            {
                Ok((*context, group.to_vec()))
            }
            _ => fail(ErrorClass::Port, "a malformed accept reply arrived"),
        }
    }

    /// The end every inter-communicator creation shares: the leader's
    /// outcome (`Some` at the leader only) is broadcast over `local_index`,
    /// so every member fails or succeeds together (the others with
    /// `failure_class`), then the inter-communicator is stored.
    pub(crate) fn finish_intercomm(
        &mut self,
        local_index: usize,
        local: &Communicator,
        leader: u32,
        leader_result: Option<MpiResult<(u32, Vec<u32>)>>,
        failure_class: ErrorClass,
    ) -> MpiResult<usize> {
        let mut header = [0u32; 3];
        let mut remote_group: Vec<u32> = Vec::new();
        let mut leader_error = None;
        match leader_result {
            Some(Ok((context, group))) => {
                header = [1, context, group.len() as u32];
                remote_group = group;
            }
            Some(Err(error)) => leader_error = Some(error),
            None => {}
        }
        let mut header_bytes = words_to_bytes(&header);
        self.bcast(local_index, &mut header_bytes, leader)?;
        let header = bytes_to_words(&header_bytes);
        if header[0] == 0 {
            return Err(leader_error.unwrap_or_else(|| {
                MpiError::new(
                    failure_class,
                    "creating the inter-communicator failed at the local leader",
                )
            }));
        }
        let (context, remote_size) = (header[1], header[2] as usize);
        let mut group_bytes = words_to_bytes(&remote_group);
        group_bytes.resize(remote_size * 4, 0);
        self.bcast(local_index, &mut group_bytes, leader)?;
        let remote_group = bytes_to_words(&group_bytes);
        self.next_context = self.next_context.max(context + INTERCOMM_CONTEXT_SPAN);
        Ok(self.add_intercomm(context, local, Arc::new(remote_group)))
    }

    /// The name `service` has in the process manager's name service:
    /// under `--replicas`, each replica's processes talk only among
    /// themselves, so each replica publishes in a space of its own.
    fn service_key(&self, service: &str) -> String {
        if self.replicas.count > 1 {
            let replica = self.replicas.replica_of(self.endpoint());
            format!("resmpi-replica-{replica}/{service}")
        } else {
            service.to_string()
        }
    }

    /// MPI_Publish_name, through the process manager's name service
    /// (resmpi's mpiexec, or hydra).
    pub fn publish_name(&mut self, service: &str, port_name: &str) -> MpiResult<()> {
        let key = self.service_key(service);
        self.pmi.publish_name(&key, port_name).map_err(|error| {
            MpiError::new(
                ErrorClass::Service,
                format!("MPI_Publish_name of '{service}': {}", error.message()),
            )
        })
    }

    /// MPI_Lookup_name.
    pub fn lookup_name(&mut self, service: &str) -> MpiResult<String> {
        let key = self.service_key(service);
        self.pmi.lookup_name(&key).map_err(|error| {
            MpiError::new(
                ErrorClass::Name,
                format!("MPI_Lookup_name of '{service}': {}", error.message()),
            )
        })
    }

    /// MPI_Unpublish_name.
    pub fn unpublish_name(&mut self, service: &str) -> MpiResult<()> {
        let key = self.service_key(service);
        self.pmi.unpublish_name(&key).map_err(|error| {
            MpiError::new(
                ErrorClass::Service,
                format!("MPI_Unpublish_name of '{service}': {}", error.message()),
            )
        })
    }

    /// What this process writes on MPI_Comm_join's socket.
    pub fn join_card(&self) -> JoinCard {
        JoinCard {
            job: self.pmi.kvs_name().to_string(),
            rank: self.endpoint(),
            next_context: self.next_context,
        }
    }

    /// MPI_Comm_join once the two cards are swapped: an inter-communicator
    /// between this process and the other.
    pub fn join_with(&mut self, theirs: &JoinCard) -> MpiResult<usize> {
        let mine = self.join_card();
        if theirs.job != mine.job || theirs.rank >= self.engine.state.size {
            return fail(
                ErrorClass::Unsupported,
                "MPI_Comm_join: the other process belongs to another job; resmpi joins only processes started by the same mpiexec",
            );
        }
        if theirs.rank == mine.rank {
            return fail(
                ErrorClass::Arg,
                "MPI_Comm_join: both ends of the socket are this process",
            );
        }
        let context = mine.next_context.max(theirs.next_context);
        self.next_context = context + INTERCOMM_CONTEXT_SPAN;
        let local = self.comm(crate::SELF)?.clone();
        Ok(self.add_intercomm(context, &local, Arc::new(vec![theirs.rank])))
    }

    /// MPI_Comm_disconnect: wait until every request on the communicator
    /// (and its hidden local one) has completed, then free it.
    pub fn comm_disconnect(&mut self, index: usize) -> MpiResult<()> {
        let hidden = self
            .comm(index)?
            .remote
            .as_ref()
            .map(|remote| remote.local_comm);
        let pending = |engine: &mut crate::engine::Engine<crate::JobProtocol>| {
            engine
                .state
                .requests
                .live_indices()
                .into_iter()
                .any(|live| {
                    engine.state.requests.get(live).is_some_and(|request| {
                        !request.complete && (request.comm == index || Some(request.comm) == hidden)
                    })
                })
        };
        self.engine.wait_until(|engine| !pending(engine))?;
        // Processes of another world (spawn's parents or children) may
        // leave once their side is done: their requests are complete, so
        // they hold what we sent them, and a link left waiting for their
        // last acknowledgements must not take their exit for a failure.
        let remote = self
            .comm(index)?
            .remote
            .as_ref()
            .map(|remote| remote.group.clone());
        if let Some(remote) = remote {
            if self.let_other_world_leave(&remote) {
                // Disconnect is collective: neither side leaves before the
                // other is here, so a process still waiting for the
                // acknowledgement of a message the other side already used
                // sees it leave only once it tolerates that.
                let mut schedule = self.engine.new_schedule(index)?;
                crate::coll::inter::barrier(&mut schedule);
                self.engine.run_schedule(schedule)?;
            }
        }
        self.engine.drain()?;
        if self.parent == Some(index) {
            self.parent = None;
        }
        self.free_comm(index)
    }
}

/// How long a connecting leader waits for the acceptor.
fn connect_timeout() -> Duration {
    let seconds = std::env::var("RESMPI_CONNECT_TIMEOUT")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .unwrap_or(CONNECT_TIMEOUT_SECONDS_DEFAULT);
    Duration::from_secs(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_round_trip_and_strangers_are_refused() {
        let port = PortName {
            job: "kvs_12:34".to_string(),
            owner: 3,
            id: 7,
        };
        assert_eq!(PortName::parse(&port.format()), Some(port.clone()));
        assert_eq!(port.format(), "resmpi-port:kvs_12:34:3:7");
        for bad in [
            "",
            "resmpi-port",
            "resmpi-port:",
            "resmpi-port::3:7",
            "resmpi-port:j:x:7",
            "resmpi-port:j:3:y",
            "resmpi-port:j:3:268435456",
            "tag#0$description#host",
        ] {
            assert_eq!(PortName::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn join_cards_round_trip_and_malformed_ones_are_refused() {
        let card = JoinCard {
            job: "kvs_1".to_string(),
            rank: 5,
            next_context: 40,
        };
        let bytes = card.encode();
        let length = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!(length, bytes.len() - 4);
        assert_eq!(JoinCard::decode(&bytes[4..]), Some(card));
        assert_eq!(JoinCard::decode(&[0; 7]), None);
        assert_eq!(JoinCard::decode(&vec![0; JoinCard::MAX_BYTES]), None);
    }
}
