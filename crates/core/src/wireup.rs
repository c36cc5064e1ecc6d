//! Wire-up at MPI_Init: exchange business cards through PMI, pick a path
//! per peer (shared memory on the same host unless `--paths tcp`, TCP
//! otherwise), connect, and remove the shared-memory names at once so a
//! killed job leaves nothing behind in /dev/shm.

use std::net::{IpAddr, Ipv4Addr};

use resmpi_path::faulty::FaultyPath;
use resmpi_path::inject_spec::FaultSpec;
use resmpi_path::shm::{ShmPath, ShmSegment};
use resmpi_path::tcp::TcpPath;
use resmpi_runtime::{hex_decode, hex_encode, random_bytes, Config, PathsChoice, Pmi};

use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::transport::{Route, Transports};

fn runtime_error(what: &str, error: impl std::fmt::Display) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("MPI_Init: {what}: {error}"))
}

/// An identifier equal for processes on the same host (same kernel boot).
/// `RESMPI_HOST_KEY` overrides it (launchers set it for ranks started on
/// hosts that share a kernel, such as network namespaces).
pub fn host_key() -> String {
    if let Ok(key) = std::env::var("RESMPI_HOST_KEY") {
        if !key.is_empty() {
            return hex_encode(key.as_bytes());
        }
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

/// The address this rank's TCP listener binds and publishes: `RESMPI_TCP_ADDR`
/// if set, loopback when every rank is on this host, else the first
/// non-loopback IPv4 address of this host.
fn tcp_publish_address(all_local: bool) -> MpiResult<IpAddr> {
    if let Ok(text) = std::env::var("RESMPI_TCP_ADDR") {
        return text.parse().map_err(|_| {
            runtime_error("RESMPI_TCP_ADDR", format!("'{text}' is not an IP address"))
        });
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
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates the list; it is freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut entry = list;
    while !entry.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let node = unsafe { &*entry };
        let up = node.ifa_flags & libc::IFF_UP as u32 != 0;
        let loopback = node.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
        if up && !loopback && !node.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family we check first.
            let family = unsafe { (*node.ifa_addr).sa_family } as i32;
            if family == libc::AF_INET {
                // SAFETY: AF_INET addresses are sockaddr_in.
                let address = unsafe { &*(node.ifa_addr as *const libc::sockaddr_in) };
                found = Some(Ipv4Addr::from(u32::from_be(address.sin_addr.s_addr)));
                break;
            }
        }
        entry = node.ifa_next;
    }
    // SAFETY: the list came from getifaddrs.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// Connect this rank to every other and return its paths.
pub fn wire_up(pmi: &mut Pmi, config: &Config) -> MpiResult<Transports> {
    let rank = pmi.rank();
    let size = pmi.size();
    if size == 1 {
        return Ok(Transports::loopback_only());
    }
    let job_id = match &config.job_id {
        Some(job_id) => job_id.clone(),
        None => pmi
            .kvs_name()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(48)
            .collect(),
    };
    let use_shm = config.paths == PathsChoice::Auto && pmi.local_size() > 1;
    let need_tcp = config.paths == PathsChoice::Tcp || pmi.local_size() < size;
    let own_segment = if use_shm {
        Some(
            ShmSegment::create(
                &job_id,
                rank,
                size,
                config.shm_ring_bytes.next_power_of_two(),
            )
            .map_err(|e| runtime_error("shared memory", e))?,
        )
    } else {
        None
    };
    let mut tcp = None;
    let mut tcp_address = String::from("-");
    if need_tcp {
        let publish_ip = tcp_publish_address(pmi.local_size() == size)?;
        let (path, address) =
            TcpPath::bind(rank, publish_ip).map_err(|e| runtime_error("TCP listen", e))?;
        tcp = Some(path);
        tcp_address = address;
    }
    let host = host_key();
    pmi.put(
        &format!("resmpi-card-{rank}"),
        &format!("{host};{};{tcp_address}", use_shm as u8),
    )
    .map_err(|e| runtime_error("PMI put", e))?;
    let needs_secret = config.job_secret.is_none() && need_tcp;
    if needs_secret && rank == 0 {
        pmi.put("resmpi-secret", &hex_encode(&random_bytes(32)))
            .map_err(|e| runtime_error("PMI put", e))?;
    }
    pmi.barrier().map_err(|e| runtime_error("PMI barrier", e))?;
    let secret = match &config.job_secret {
        Some(secret) => secret.clone(),
        None if need_tcp => {
            let text = pmi
                .get("resmpi-secret")
                .map_err(|e| runtime_error("PMI get", e))?;
            hex_decode(&text).ok_or_else(|| runtime_error("job secret", "not hex"))?
        }
        None => Vec::new(),
    };
    let mut routes = vec![Route::Tcp; size as usize];
    routes[rank as usize] = Route::Loopback;
    let mut local_peers = Vec::new();
    let mut tcp_peers = Vec::new();
    for peer in 0..size {
        if peer == rank {
            continue;
        }
        let card = pmi
            .get(&format!("resmpi-card-{peer}"))
            .map_err(|e| runtime_error("PMI get", e))?;
        let fields: Vec<&str> = card.split(';').collect();
        if fields.len() != 3 {
            return Err(runtime_error(
                "business card",
                format!("rank {peer} published '{card}'"),
            ));
        }
        if use_shm && fields[0] == host && fields[1] == "1" {
            routes[peer as usize] = Route::Shm;
            local_peers.push(peer);
        } else {
            if fields[2] == "-" {
                return Err(runtime_error(
                    "wire-up",
                    format!("rank {peer} has no TCP address"),
                ));
            }
            tcp_peers.push((peer, fields[2].to_string()));
        }
    }
    let shm = match own_segment {
        Some(segment) => Some(
            ShmPath::attach(segment, &job_id, rank, &local_peers)
                .map_err(|e| runtime_error("shared memory attach", e))?,
        ),
        None => None,
    };
    if let Some(path) = tcp.as_mut() {
        path.connect_all(&tcp_peers, &secret)
            .map_err(|e| runtime_error("TCP connect", e))?;
    }
    if tcp_peers.is_empty() {
        tcp = None;
    }
    pmi.barrier().map_err(|e| runtime_error("PMI barrier", e))?;
    if let Some(shm) = &shm {
        shm.unlink_own()
            .map_err(|e| runtime_error("shared memory unlink", e))?;
    }
    let spec = injection_spec()?;
    let epoch = std::time::Instant::now();
    let clock: Box<dyn Fn() -> u64 + Send> = Box::new(move || epoch.elapsed().as_nanos() as u64);
    let tcp = tcp.map(|path| FaultyPath::new(path, spec, rank, 0, clock));
    Ok(Transports {
        routes,
        shm,
        tcp,
        loopback: Default::default(),
    })
}

/// `RESMPI_INJECT`: the faults `mpiexec --inject` asked for (none if unset).
fn injection_spec() -> MpiResult<FaultSpec> {
    match std::env::var("RESMPI_INJECT") {
        Ok(text) if !text.is_empty() => text
            .parse()
            .map_err(|error| runtime_error("RESMPI_INJECT", error)),
        _ => Ok(FaultSpec::default()),
    }
}
