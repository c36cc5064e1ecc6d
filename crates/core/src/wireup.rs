//! Wire-up at MPI_Init: exchange business cards through PMI, pick a path
//! per peer (shared memory on the same host unless `--paths tcp`, TCP
//! otherwise), connect. Shared-memory segments are anonymous (memfd) and
//! reached through the owner's descriptor, so a killed job can leave nothing
//! behind in /dev/shm; each rank closes that descriptor once its local
//! peers have mapped the segment.

use std::net::{IpAddr, Ipv4Addr};

use resmpi_path::faulty::FaultyPath;
use resmpi_path::inject_spec::FaultSpec;
use resmpi_path::shm::{ShmLocator, ShmPath, ShmSegment};
use resmpi_path::tcp::TcpPath;
use resmpi_runtime::{
    hex_decode, hex_encode, random_bytes, Config, FailureNotices, FailurePolicy, PathsChoice, Pmi,
    RejoinAnswer,
};

use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::transport::{Route, Transports};

fn runtime_error(what: &str, error: impl std::fmt::Display) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("MPI_Init: {what}: {error}"))
}

/// An identifier equal for processes on the same host (same kernel boot).
/// `RESMPI_HOST_KEY` overrides it (launchers set it for ranks started on
/// hosts that share a kernel, such as network namespaces).
pub fn host_key(config: &Config) -> String {
    if let Some(key) = &config.host_key {
        return hex_encode(key.as_bytes());
    }
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!(
        "{}-{}",
        hex_encode(processor_name().as_bytes()),
        boot_id.trim()
    )
}

/// This host's name (MPI_Get_processor_name).
pub fn processor_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: gethostname writes at most buffer.len() bytes into the buffer.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result != 0 {
        return "localhost".to_string();
    }
    let end = buffer
        .iter()
        .position(|byte| *byte == 0)
        .unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// One IP address per TCP rail. `RESMPI_RAILS=tcp:IFACE_OR_SUBNET[,…]`
/// names the rails (an interface name, or an IPv4 subnet such as
/// 10.77.1.0/24 in which this host has an address); without it there is one
/// rail on the address `tcp_publish_address` picks.
fn rail_ips(config: &Config, all_local: bool) -> MpiResult<Vec<IpAddr>> {
    let Some(spec) = &config.rails else {
        return Ok(vec![tcp_publish_address(config, all_local)?]);
    };

    let interfaces = interface_addresses();
    spec.split(',')
        .map(|item| {
            let item = item.trim();
            let target = item.strip_prefix("tcp:").ok_or_else(|| {
                runtime_error(
                    "RESMPI_RAILS",
                    format!("rail '{item}' must look like tcp:IFACE or tcp:SUBNET/BITS"),
                )
            })?;
            let found = match target.split_once('/') {
                Some((network, bits)) => {
                    let network: Ipv4Addr = network.parse().map_err(|_| {
                        runtime_error(
                            "RESMPI_RAILS",
                            format!("'{network}' is not an IPv4 address"),
                        )
                    })?;
                    let bits: u32 =
                        bits.parse()
                            .ok()
                            .filter(|bits| *bits <= 32)
                            .ok_or_else(|| {
                                runtime_error(
                                    "RESMPI_RAILS",
                                    format!("'{bits}' is not a prefix length"),
                                )
                            })?;
                    let mask = if bits == 0 {
                        0
                    } else {
                        u32::MAX << (32 - bits)
                    };
                    interfaces
                        .iter()
                        .find(|(_, ip)| u32::from(*ip) & mask == u32::from(network) & mask)
                }
                None => interfaces.iter().find(|(name, _)| name == target),
            };
            found.map(|(_, ip)| IpAddr::V4(*ip)).ok_or_else(|| {
                runtime_error(
                    "RESMPI_RAILS",
                    format!("this host has no IPv4 address for rail '{item}'"),
                )
            })
        })
        .collect()
}

/// The address this rank's TCP listener binds and publishes: `RESMPI_TCP_ADDR`
/// if set, loopback when every rank is on this host, else the first
/// non-loopback IPv4 address of this host.
fn tcp_publish_address(config: &Config, all_local: bool) -> MpiResult<IpAddr> {
    if let Some(address) = config.tcp_address {
        return Ok(address);
    }
    if all_local {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    first_non_loopback_ipv4().map(IpAddr::V4).ok_or_else(|| {
        runtime_error(
            "TCP listen",
            "this host has no non-loopback IPv4 address; set RESMPI_TCP_ADDR",
        )
    })
}

/// First IPv4 address of an interface that is up and not loopback.
fn first_non_loopback_ipv4() -> Option<Ipv4Addr> {
    interface_addresses()
        .into_iter()
        .find(|(_, ip)| !ip.is_loopback())
        .map(|(_, ip)| ip)
}

/// (interface name, IPv4 address) of every interface that is up.
fn interface_addresses() -> Vec<(String, Ipv4Addr)> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates the list; it is freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut entry = list;
    while !entry.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let node = unsafe { &*entry };
        let up = node.ifa_flags & libc::IFF_UP as u32 != 0;
        if up && !node.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family we check first.
            let family = unsafe { (*node.ifa_addr).sa_family } as i32;
            if family == libc::AF_INET {
                // SAFETY: AF_INET addresses are sockaddr_in; ifa_name is a C string.
                let (address, name) = unsafe {
                    (
                        &*(node.ifa_addr as *const libc::sockaddr_in),
                        std::ffi::CStr::from_ptr(node.ifa_name),
                    )
                };
                found.push((
                    name.to_string_lossy().into_owned(),
                    Ipv4Addr::from(u32::from_be(address.sin_addr.s_addr)),
                ));
            }
        }
        entry = node.ifa_next;
    }
    // SAFETY: the list came from getifaddrs.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// `RESMPI_TEST_WIREUP_PAUSE_MS`: a test's way to hold every rank between
/// the exchange of business cards and the connections, so that a kill
/// lands there (tests/test_process_failure_launcher.py: a death during
/// wire-up under `continue` ends the job in bounded time).
fn pause_for_tests() {
    if let Some(pause_ms) = std::env::var("RESMPI_TEST_WIREUP_PAUSE_MS")
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
    }
}

/// A rank's business card, published under `resmpi-card-RANK` (or
/// `resmpi-card-RANK-INCARNATION` by a replacement process) as
/// `HOST;SHM;TCP`: the host key, the locator of its shared-memory segment
/// (`-` for none) and its TCP rail addresses joined by `|` (`-` for none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    /// `host_key` of the rank's host.
    pub host: String,
    /// Where local peers find its segment.
    pub shm: Option<ShmLocator>,
    /// One `IP:PORT` per TCP rail, in rail order.
    pub tcp: Vec<String>,
}

impl Card {
    /// Bytes a card may have (PMI values are shorter still).
    pub const MAX_BYTES: usize = 4096;

    /// Decode a card as `Display` writes it; a malformed one (another field
    /// count, an empty host, a bad locator, an empty or spaced address) is
    /// refused with the reason.
    pub fn parse(text: &str) -> Result<Card, String> {
        if text.len() > Card::MAX_BYTES {
            return Err(format!("a card of {} bytes is too long", text.len()));
        }
        let fields: Vec<&str> = text.split(';').collect();
        let [host, shm, tcp] = fields[..] else {
            return Err(format!("'{text}' is not HOST;SHM;TCP"));
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("'{text}': bad host key '{host}'"));
        }
        let shm = match shm {
            "-" => None,
            locator => Some(locator.parse::<ShmLocator>()?),
        };
        let tcp = match tcp {
            "-" => Vec::new(),
            addresses => addresses
                .split('|')
                .map(|address| {
                    if address.is_empty()
                        || address.chars().any(|c| c.is_whitespace() || c.is_control())
                    {
                        Err(format!("'{text}': bad TCP address '{address}'"))
                    } else {
                        Ok(address.to_string())
                    }
                })
                .collect::<Result<Vec<String>, String>>()?,
        };
        Ok(Card {
            host: host.to_string(),
            shm,
            tcp,
        })
    }
}

impl std::fmt::Display for Card {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{};", self.host)?;
        match &self.shm {
            Some(locator) => write!(f, "{locator};")?,
            None => write!(f, "-;")?,
        }
        if self.tcp.is_empty() {
            write!(f, "-")
        } else {
            write!(f, "{}", self.tcp.join("|"))
        }
    }
}

/// `RESMPI_TEST_SUBSCRIBE_PAUSE=RANK:MS`: a test's way to hold one rank
/// between wire-up and its subscription to failure notices, the end of its
/// MPI_Init, as a rank on a busy host may be (tests/test_rejoin.py: a
/// re-join announced meanwhile must still reach it).
pub fn pause_before_watching_for_tests(rank: u32) {
    let Ok(value) = std::env::var("RESMPI_TEST_SUBSCRIBE_PAUSE") else {
        return;
    };
    if let Some((paused, pause_ms)) = value.split_once(':') {
        if let (Ok(paused), Ok(pause_ms)) = (paused.parse::<u32>(), pause_ms.parse::<u64>()) {
            if paused == rank {
                std::thread::sleep(std::time::Duration::from_millis(pause_ms));
            }
        }
    }
}

/// How long a wire-up that finds a peer's card or connection missing
/// waits for the launcher's notice that the peer died, before it takes
/// the absence for an error.
const DEATH_NOTICE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether `peer` died, waiting up to [`DEATH_NOTICE_WAIT`] for the notice.
fn confirmed_dead(notices: &FailureNotices, peer: u32) -> bool {
    let deadline = std::time::Instant::now() + DEATH_NOTICE_WAIT;
    loop {
        if notices.has_failed(peer) {
            return true;
        }
        if std::time::Instant::now() >= deadline || notices.launcher_lost() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Connect this rank to every other and return its paths. With
/// `departures` (process replication: the job outlives a death, even one
/// inside MPI_Init), a peer the launcher reports dead is left out: its
/// card missing (it died before publishing it; the launcher excused it
/// from the barriers), its shared-memory segment gone, or its TCP
/// listener closed. The engine learns of the death from the same notices.
pub fn wire_up(
    pmi: &mut Pmi,
    config: &Config,
    departures: Option<&FailureNotices>,
) -> MpiResult<(Transports, Vec<u32>)> {
    let confirmed_gone =
        |peer: u32| departures.is_some_and(|notices| confirmed_dead(notices, peer));
    let gone_now = |peer: u32| departures.is_some_and(|notices| notices.has_failed(peer));
    let rank = pmi.rank();
    let size = pmi.size();
    if size == 1 {
        return Ok((Transports::loopback_only(), Vec::new()));
    }
    let mut departed = Vec::new();
    let use_shm = config.paths == PathsChoice::Auto && pmi.local_size() > 1;
    let need_tcp = config.paths == PathsChoice::Tcp || pmi.local_size() < size;
    let own_segment = if use_shm {
        Some(
            ShmSegment::create(rank, size, config.shm_ring_bytes.next_power_of_two())
                .map_err(|e| runtime_error("shared memory", e))?,
        )
    } else {
        None
    };
    let mut rails = Vec::new();
    let mut rail_addresses = Vec::new();
    if need_tcp {
        for ip in rail_ips(config, pmi.local_size() == size)? {
            let (path, address) =
                TcpPath::bind(rank, ip).map_err(|e| runtime_error("TCP listen", e))?;
            rails.push(path);
            rail_addresses.push(address);
        }
    }
    let host = host_key(config);
    let card = Card {
        host: host.clone(),
        shm: own_segment.as_ref().map(ShmSegment::locator),
        tcp: rail_addresses,
    };
    pmi.put(&format!("resmpi-card-{rank}"), &card.to_string())
        .map_err(|e| runtime_error("PMI put", e))?;
    let needs_secret = config.job_secret.is_none() && need_tcp;
    if needs_secret && rank == 0 {
        pmi.put("resmpi-secret", &hex_encode(&random_bytes(32)))
            .map_err(|e| runtime_error("PMI put", e))?;
    }
    pmi.barrier().map_err(|e| runtime_error("PMI barrier", e))?;
    pause_for_tests();
    let secret = match &config.job_secret {
        Some(secret) => secret.clone(),
        None if need_tcp => {
            let text = pmi
                .get_from(0, "resmpi-secret")
                .map_err(|e| runtime_error("PMI get", e))?;
            hex_decode(&text).ok_or_else(|| runtime_error("job secret", "not hex"))?
        }
        None => Vec::new(),
    };
    let mut routes = vec![Route::Tcp; size as usize];
    routes[rank as usize] = Route::Loopback;
    let mut local_peers = Vec::new();
    let mut tcp_peers = Vec::new();
    // Under `--replicas` with replica masking (this build runs no
    // replication protocol), each replica is a job of its own: its
    // processes never talk to another replica's, so they wire up only
    // among themselves, and a process of another replica that died during
    // wire-up (its replica given up, its card maybe never published) does
    // not fail this one's MPI_Init.
    let own_replica_only = config.replica_count > 1 && !cfg!(feature = "replication");
    let ranks_per_replica = size / config.replica_count.max(1);
    let wires_to =
        |peer: u32| !own_replica_only || peer / ranks_per_replica == rank / ranks_per_replica;
    for peer in 0..size {
        if peer == rank || !wires_to(peer) {
            continue;
        }
        let text = match pmi.get_from(peer, &format!("resmpi-card-{peer}")) {
            Ok(text) => text,
            Err(_) if confirmed_gone(peer) => {
                departed.push(peer);
                continue;
            }
            Err(error) => return Err(runtime_error("PMI get", error)),
        };
        let card = Card::parse(&text)
            .map_err(|e| runtime_error("business card", format!("rank {peer}: {e}")))?;
        match card.shm {
            Some(locator) if use_shm && card.host == host => {
                routes[peer as usize] = Route::Shm;
                local_peers.push((peer, locator));
            }
            _ => {
                if card.tcp.is_empty() {
                    return Err(runtime_error(
                        "wire-up",
                        format!("rank {peer} has no TCP address"),
                    ));
                }
                if card.tcp.len() != rails.len() {
                    return Err(runtime_error(
                        "wire-up",
                        format!("rank {peer} has {} TCP rails and this rank has {}: give every rank the same --rails", card.tcp.len(), rails.len()),
                    ));
                }
                tcp_peers.push((peer, card.tcp));
            }
        }
    }
    // An attach error is reported only after the barrier below: a peer
    // that died after publishing its card cannot be mapped any more (its
    // descriptor went with it), and then the barrier waits for it, so the
    // launcher reports that death and its exit code instead of this rank
    // failing first with a consequence of it.
    let (mut shm, shm_error) = match own_segment {
        Some(segment) => {
            match ShmPath::attach_but_gone(segment, rank, &local_peers, &confirmed_gone) {
                Ok((path, left_out)) => {
                    departed.extend(left_out);
                    (Some(path), None)
                }
                Err(error) => (None, Some(error)),
            }
        }
        None => (None, None),
    };
    for (rail, path) in rails.iter_mut().enumerate() {
        let peers: Vec<(u32, String)> = tcp_peers
            .iter()
            .filter(|(peer, _)| !departed.contains(peer))
            .map(|(peer, addresses)| (*peer, addresses[rail].clone()))
            .collect();
        departed.extend(
            path.connect_all_but_gone(&peers, &secret, &gone_now)
                .map_err(|e| runtime_error(&format!("TCP connect on rail {rail}"), e))?,
        );
    }
    if tcp_peers.is_empty() {
        rails.clear();
    }
    pmi.barrier().map_err(|e| runtime_error("PMI barrier", e))?;
    if let Some(error) = shm_error {
        return Err(runtime_error("shared memory attach", error));
    }
    // Every local peer has mapped this rank's segment: nobody needs to
    // open it any more.
    if let Some(shm) = &mut shm {
        shm.close_own_descriptor();
    }
    let spec = injection_spec(config)?;
    // Every rail's clock counts from the same instant, so `rail-down:R@T`
    // means T after wire-up on every rail.
    let epoch = std::time::Instant::now();
    let rails = rails
        .into_iter()
        .enumerate()
        .map(|(rail, path)| {
            let clock: Box<dyn Fn() -> u64 + Send> =
                Box::new(move || epoch.elapsed().as_nanos() as u64);
            FaultyPath::new(path, spec.clone(), rank, rail as u32, clock)
        })
        .collect();
    // Replacement processes join jobs under `continue`, and forked
    // replicas those under `--replica-recovery now`.
    let takes_rejoins =
        config.failure_policy == Some(FailurePolicy::Continue) || config.replica_recovery;
    let joining = if takes_rejoins {
        Some(JoinWiring {
            secret,
            spec,
            bind_ip: tcp_publish_address(config, pmi.local_size() == size)?,
            epoch,
        })
    } else {
        None
    };
    let mut transports = Transports {
        routes,
        shm,
        rails,
        loopback: Default::default(),
        memory: None,
        joining,
    };
    // Dead before their card, their segment, or on some rail: once each.
    departed.sort_unstable();
    departed.dedup();
    for &peer in &departed {
        transports.routes[peer as usize] = Route::Departed;
    }
    Ok((transports, departed))
}

/// How long a survivor waits for a replacement process to accept its
/// connection (the replacement is inside MPI_Init, accepting: this bounds
/// only a replacement that died again meanwhile).
const REJOIN_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What a rank keeps from wire-up to connect a re-joined peer later
/// (failure policy `continue`).
#[derive(Debug)]
pub struct JoinWiring {
    /// The job secret both sides prove on the connection.
    secret: Vec<u8>,
    /// `--inject` faults, for a TCP rail made after wire-up.
    spec: FaultSpec,
    /// Where a TCP rail made after wire-up listens (a rank that had only
    /// shared-memory peers has none until a peer re-joins).
    bind_ip: IpAddr,
    /// The rails' common clock origin.
    epoch: std::time::Instant,
}

/// Why a rank cannot connect a re-joined peer.
fn rejoin_error(what: &str, error: impl std::fmt::Display) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("re-join: {what}: {error}"))
}

/// A survivor's half of re-join: connect to the replacement of `peer`
/// listening at `address` over TCP rail 0 (made now if this rank had no TCP
/// rail), replacing whatever the rail held for the old process. A
/// re-joined peer is always reached over TCP, never shared memory: the
/// survivors closed their segments' descriptors at MPI_Init, so a new
/// process could not map them.
pub fn connect_rejoined_peer(
    transports: &mut Transports,
    rank: u32,
    peer: u32,
    address: &str,
) -> MpiResult<()> {
    let Some(joining) = &transports.joining else {
        return Err(rejoin_error(
            "not prepared",
            "only a job under failure policy continue takes replacement processes",
        ));
    };
    if transports.rails.len() > 1 {
        return Err(rejoin_error(
            "several TCP rails",
            "a replacement process is reached over one rail; run with one rail",
        ));
    }
    if transports.rails.is_empty() {
        let (path, _) = TcpPath::bind(rank, joining.bind_ip)
            .map_err(|error| rejoin_error("TCP listen", error))?;
        let epoch = joining.epoch;
        let clock: Box<dyn Fn() -> u64 + Send> =
            Box::new(move || epoch.elapsed().as_nanos() as u64);
        transports
            .rails
            .push(FaultyPath::new(path, joining.spec.clone(), rank, 0, clock));
    }
    let secret = joining.secret.clone();
    let rail = transports.rails[0].inner_mut();
    rail.set_connect_timeout(REJOIN_CONNECT_TIMEOUT);
    rail.connect_peer(peer, address, &secret)
        .map_err(|error| rejoin_error(&format!("connecting to rank {peer} at {address}"), error))
}

/// A replacement process's MPI_Init (`RESMPI_INCARNATION` > 0): the
/// survivors are not in MPI_Init, so there is no PMI barrier. Listen on
/// TCP, publish the card under `resmpi-card-RANK-INCARNATION`, announce the
/// re-join to the launcher (which tells every live rank to connect here and
/// answers with their ranks and incarnations), and accept each of them.
/// Every peer is reached over TCP, on one rail. Returns the paths and the
/// live peers as (rank, incarnation); a rank not among them is dead.
///
/// `notices` (watched since before the announcement) tell of a peer that
/// dies after the launcher listed it and before it connected: it is not
/// waited for (the engine learns of the death from the same notices).
/// Without them a replacement waited the whole accept timeout for it, and
/// so did that peer's own replacement, which waits for this one (one
/// announced before it is on its list) while this one still accepts.
pub fn wire_up_replacement(
    pmi: &mut Pmi,
    config: &Config,
    notices: Option<&FailureNotices>,
) -> MpiResult<(Transports, Vec<(u32, u32)>)> {
    wire_up_rejoining(pmi, config, notices, None)
        .map(|(transports, answer)| (transports, answer.peers))
}

/// [`wire_up_replacement`] for a replica forked by a substitute
/// (replication's recovery): its re-join notice carries the fork's `cut`
/// (hex) to every other process. Also returns the cuts (hex) of the
/// forked replicas among the live peers, whose notices it may have missed.
pub fn wire_up_rejoining(
    pmi: &mut Pmi,
    config: &Config,
    notices: Option<&FailureNotices>,
    cut: Option<&str>,
) -> MpiResult<(Transports, RejoinAnswer)> {
    let rank = pmi.rank();
    let size = pmi.size();
    let incarnation = config.incarnation;
    if config.failure_policy != Some(FailurePolicy::Continue) {
        return Err(runtime_error(
            "re-join",
            format!("incarnation {incarnation} of rank {rank} needs failure policy continue"),
        ));
    }
    let ips = rail_ips(config, pmi.local_size() == size)?;
    if ips.len() > 1 {
        return Err(runtime_error(
            "re-join",
            "a replacement process is reached over one TCP rail; run with one rail",
        ));
    }
    let ip = ips[0];
    let (mut path, address) =
        TcpPath::bind(rank, ip).map_err(|e| runtime_error("TCP listen", e))?;
    let card = Card {
        host: host_key(config),
        shm: None,
        tcp: vec![address.clone()],
    };
    pmi.put(
        &format!("resmpi-card-{rank}-{incarnation}"),
        &card.to_string(),
    )
    .map_err(|e| runtime_error("PMI put", e))?;
    let secret = match &config.job_secret {
        Some(secret) => secret.clone(),
        None => {
            let text = pmi
                .get_from(0, "resmpi-secret")
                .map_err(|e| runtime_error("PMI get", e))?;
            hex_decode(&text).ok_or_else(|| runtime_error("job secret", "not hex"))?
        }
    };
    let answer = pmi
        .announce_rejoin_with_cut(incarnation, &address, cut)
        .map_err(|e| runtime_error("re-join announcement", e))?;
    let peers = &answer.peers;
    let expected: Vec<u32> = peers.iter().map(|(peer, _)| *peer).collect();
    let gone = |peer: u32| {
        notices.is_some_and(|notices| {
            peers.iter().any(|&(listed, incarnation)| {
                listed == peer && notices.has_failed_since(peer, incarnation)
            })
        })
    };
    path.accept_peers_but_gone(&expected, &secret, &gone)
        .map_err(|e| runtime_error("re-join: accepting the survivors", e))?;
    let mut routes = vec![Route::Tcp; size as usize];
    routes[rank as usize] = Route::Loopback;
    let spec = injection_spec(config)?;
    let epoch = std::time::Instant::now();
    let clock: Box<dyn Fn() -> u64 + Send> = Box::new(move || epoch.elapsed().as_nanos() as u64);
    let rails = vec![FaultyPath::new(path, spec.clone(), rank, 0, clock)];
    let transports = Transports {
        routes,
        shm: None,
        rails,
        loopback: Default::default(),
        memory: None,
        joining: Some(JoinWiring {
            secret,
            spec,
            bind_ip: ip,
            epoch,
        }),
    };
    Ok((transports, answer))
}

/// `RESMPI_INJECT`: the faults `mpiexec --inject` asked for (none if unset).
pub fn injection_spec(config: &Config) -> MpiResult<FaultSpec> {
    match &config.inject {
        Some(text) => text
            .parse()
            .map_err(|error| runtime_error("RESMPI_INJECT", error)),
        None => Ok(FaultSpec::default()),
    }
}

/// A spawned child's MPI_Init (`RESMPI_SPAWN_PARENT` set): its endpoint is
/// `base` + its PMI rank, and it reaches everybody over one TCP rail. It
/// connects to its siblings as MPI_Init does (cards through its own PMI
/// world, its own job's secret); then the children's first process tells
/// the parents' root where every child listens (`report`, which writes on
/// the parents' rendezvous socket), and each child accepts the parents of
/// the spawning communicator, who prove their own job's secret. Returns
/// the paths over `base` + the children's count endpoints.
pub fn wire_up_child(
    pmi: &mut Pmi,
    config: &Config,
    base: u32,
    parents: &[u32],
    parent_secret: &[u8],
    report: impl FnOnce(&[String]) -> MpiResult<()>,
) -> MpiResult<Transports> {
    let rank = base + pmi.rank();
    let size = base + pmi.size();
    let ip = tcp_publish_address(config, true)?;
    let (mut path, address) =
        TcpPath::bind(rank, ip).map_err(|e| runtime_error("TCP listen", e))?;
    pmi.put(&format!("resmpi-child-{}", pmi.rank()), &address)
        .map_err(|e| runtime_error("PMI put", e))?;
    pmi.barrier().map_err(|e| runtime_error("PMI barrier", e))?;
    let secret = match &config.job_secret {
        Some(secret) => secret.clone(),
        None => return Err(runtime_error("spawn", "the children have no job secret")),
    };
    let mut addresses = Vec::with_capacity(pmi.size() as usize);
    for child in 0..pmi.size() {
        addresses.push(
            pmi.get_from(child, &format!("resmpi-child-{child}"))
                .map_err(|e| runtime_error("PMI get", e))?,
        );
    }
    let siblings: Vec<(u32, String)> = addresses
        .iter()
        .enumerate()
        .map(|(child, address)| (base + child as u32, address.clone()))
        .filter(|(endpoint, _)| *endpoint != rank)
        .collect();
    path.connect_all(&siblings, &secret)
        .map_err(|e| runtime_error("TCP connect to the other children", e))?;
    pmi.barrier().map_err(|e| runtime_error("PMI barrier", e))?;
    if pmi.rank() == 0 {
        report(&addresses)?;
    }
    path.accept_peers(parents, parent_secret)
        .map_err(|e| runtime_error("spawn: accepting the parents", e))?;
    let mut routes = vec![Route::Tcp; size as usize];
    routes[rank as usize] = Route::Loopback;
    let spec = injection_spec(config)?;
    let epoch = std::time::Instant::now();
    let clock: Box<dyn Fn() -> u64 + Send> = Box::new(move || epoch.elapsed().as_nanos() as u64);
    Ok(Transports {
        routes,
        shm: None,
        rails: vec![FaultyPath::new(path, spec, rank, 0, clock)],
        loopback: Default::default(),
        memory: None,
        joining: None,
    })
}

/// A parent's half of MPI_Comm_spawn's wire-up: connect to the child
/// `peer` listening at `address` over TCP rail 0 (made now if this
/// process had none: a one-process job, or only shared-memory peers),
/// proving this job's `secret`.
pub fn connect_spawned_peer(
    transports: &mut Transports,
    config: &Config,
    rank: u32,
    peer: u32,
    address: &str,
    secret: &[u8],
) -> MpiResult<()> {
    let spawn_error = |what: &str, error: &dyn std::fmt::Display| {
        MpiError::new(
            ErrorClass::Spawn,
            format!("MPI_Comm_spawn: {what}: {error}"),
        )
    };
    if transports.rails.len() > 1 {
        return Err(spawn_error(
            "several TCP rails",
            &"children are reached over one rail; run with one rail",
        ));
    }
    if transports.rails.is_empty() {
        let ip = tcp_publish_address(config, true)?;
        let (path, _) =
            TcpPath::bind(rank, ip).map_err(|error| spawn_error("TCP listen", &error))?;
        let epoch = std::time::Instant::now();
        let clock: Box<dyn Fn() -> u64 + Send> =
            Box::new(move || epoch.elapsed().as_nanos() as u64);
        transports.rails.push(FaultyPath::new(
            path,
            injection_spec(config)?,
            rank,
            0,
            clock,
        ));
    }
    let rail = transports.rails[0].inner_mut();
    rail.set_connect_timeout(REJOIN_CONNECT_TIMEOUT);
    rail.connect_peer(peer, address, secret)
        .map_err(|error| spawn_error(&format!("connecting to child {peer} at {address}"), &error))
}
