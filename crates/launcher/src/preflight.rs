//! Checks of option values against this host, made before the job starts.
//!
//! `options::parse` checks what a command line says (syntax, and that
//! ranks and rails named by `--inject` fit the job) and stays a pure
//! function of its words. What only this host can answer is checked here,
//! right after parsing and before a rank or proxy exists: does the
//! interface or subnet a rail names exist, is `--control-addr` an address
//! mpiexec can listen on, can the `--report-json` file be written. A wrong
//! value then fails at once with exit 2 and a line that names it, instead
//! of a job that runs unprotected, fails later with exit 1 in `MPI_Init`,
//! or loses its report after an hour of work.

use std::fs::OpenOptions;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::Path;

use crate::hosts::{interface_addresses, is_this_host, this_host_name};
use crate::options::Options;

/// Every check of this module; the first failure is the message.
pub fn check(options: &Options) -> Result<(), String> {
    if runs_here(options) {
        if let Some(rails) = rails_of(options) {
            check_rails_exist(&rails, &interface_addresses())?;
        }
    }
    if let Some(text) = &options.control_address {
        check_control_address(text)?;
    }
    if let Some(path) = &options.report_json {
        check_report_writable(path)?;
    }
    Ok(())
}

/// Whether ranks run on this host (no host list, or one that names this
/// host): then the rails must exist here. Each remote host's proxy makes
/// the same check before it starts a rank there (interface names may
/// differ from host to host; [`check_launch_rails`]).
fn runs_here(options: &Options) -> bool {
    let host_name = this_host_name();
    options.hosts.as_ref().is_none_or(|hosts| {
        hosts
            .iter()
            .any(|host| is_this_host(&host.name, &host_name))
    })
}

/// The `RESMPI_RAILS` the ranks get from the command line (`--rails`,
/// `-x`, `-genv`; the last wins).
fn rails_of(options: &Options) -> Option<String> {
    options
        .environment
        .iter()
        .rev()
        .find(|(name, _)| name == "RESMPI_RAILS")
        .map(|(_, value)| value.clone())
}

/// Each rail needs an up interface of that name with an IPv4 address, or
/// an address of this host in that subnet: what the library looks for at
/// wire-up (`RESMPI_RAILS` in crates/core/src/wireup.rs).
pub(crate) fn check_rails_exist(
    rails: &str,
    interfaces: &[(String, Ipv4Addr)],
) -> Result<(), String> {
    for (index, raw) in rails.split(',').enumerate() {
        let item = raw.trim();
        let Some(target) = item.strip_prefix("tcp:") else {
            continue;
        };
        let found = match target.split_once('/') {
            Some((network, bits)) => {
                let (Ok(network), Ok(bits)) = (network.parse::<Ipv4Addr>(), bits.parse::<u32>())
                else {
                    continue;
                };
                let mask = if bits == 0 {
                    0
                } else {
                    u32::MAX.checked_shl(32 - bits.min(32)).unwrap_or(0)
                };
                interfaces
                    .iter()
                    .any(|(_, address)| u32::from(*address) & mask == u32::from(network) & mask)
            }
            None => interfaces.iter().any(|(name, _)| name == target),
        };
        if !found {
            let what = if target.contains('/') {
                format!("no address of this host is in {target}")
            } else {
                format!("this host has no interface {target} that is up with an IPv4 address")
            };
            return Err(format!(
                "--rails item {} '{item}': {what} (this host has: {})",
                index + 1,
                interfaces
                    .iter()
                    .map(|(name, address)| format!("{name} {address}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(())
}

/// The proxy's check of a remote host before it starts a rank: the rails
/// the rank will see (`RESMPI_RAILS` of its launch environment, else of
/// the proxy's own) must exist on this host.
pub(crate) fn check_launch_rails(environment: &[(String, String)]) -> Result<(), String> {
    let rails = environment
        .iter()
        .rev()
        .find(|(name, _)| name == "RESMPI_RAILS")
        .map(|(_, rails)| rails.clone())
        .or_else(|| std::env::var("RESMPI_RAILS").ok());
    match rails {
        Some(rails) => check_rails_exist(&rails, &interface_addresses()),
        None => Ok(()),
    }
}

/// `--control-addr` must resolve to an address of this host: mpiexec
/// listens there for its proxies. Binding port 0 of it is the test the
/// kernel itself applies.
fn check_control_address(text: &str) -> Result<(), String> {
    let host = match text.parse::<IpAddr>() {
        Ok(ip) => Some(ip),
        Err(_) => {
            // `host` or `host:port`; the port is mpiexec's to choose.
            let name = match text.rsplit_once(':') {
                Some((name, port)) if port.parse::<u16>().is_ok() => name,
                _ => text,
            };
            (name, 0)
                .to_socket_addrs()
                .ok()
                .and_then(|mut addresses| addresses.next())
                .map(|address| address.ip())
        }
    };
    let Some(ip) = host else {
        return Err(format!(
            "--control-addr '{text}': not an IP address or a name this host can resolve"
        ));
    };
    TcpListener::bind(SocketAddr::new(ip, 0))
        .map(drop)
        .map_err(|error| {
            format!("--control-addr '{text}': mpiexec cannot listen on {ip} ({error}); give an address of this host that proxies can reach")
        })
}

/// The report is written at the end of the job; a path that cannot be
/// written is found now. An existing file is opened for writing without
/// truncating it; a new one is created and removed again.
fn check_report_writable(path: &Path) -> Result<(), String> {
    let problem = |error: std::io::Error| {
        format!(
            "--report-json '{}': cannot write the report there: {error}",
            path.display()
        )
    };
    if path.exists() {
        OpenOptions::new().write(true).open(path).map_err(problem)?;
    } else {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(problem)?;
        std::fs::remove_file(path).map_err(problem)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interfaces() -> Vec<(String, Ipv4Addr)> {
        vec![
            ("lo".to_string(), Ipv4Addr::new(127, 0, 0, 1)),
            ("eth0".to_string(), Ipv4Addr::new(10, 77, 1, 5)),
        ]
    }

    #[test]
    fn rails_must_name_an_interface_or_subnet_of_this_host() {
        for rails in [
            "tcp:lo",
            "tcp:eth0,tcp:127.0.0.0/8",
            "tcp:10.77.0.0/16",
            "tcp:0.0.0.0/0",
        ] {
            assert!(check_rails_exist(rails, &interfaces()).is_ok(), "{rails}");
        }
        let message = check_rails_exist("tcp:lo,tcp:nosuchif0", &interfaces()).unwrap_err();
        assert!(
            message.starts_with(
                "--rails item 2 'tcp:nosuchif0': this host has no interface nosuchif0"
            ),
            "{message}"
        );
        assert!(message.contains("eth0 10.77.1.5"), "{message}");
        let message = check_rails_exist("tcp:10.77.2.0/24", &interfaces()).unwrap_err();
        assert!(
            message.contains("no address of this host is in 10.77.2.0/24"),
            "{message}"
        );
    }

    #[test]
    fn control_address_must_be_one_mpiexec_can_listen_on() {
        assert!(check_control_address("127.0.0.1").is_ok());
        assert!(check_control_address("localhost").is_ok());
        assert!(check_control_address("localhost:7000").is_ok());
        let message = check_control_address("999.1.1.1").unwrap_err();
        assert!(message.contains("not an IP address or a name"), "{message}");
        // TEST-NET-3: never an address of a test machine.
        let message = check_control_address("203.0.113.7").unwrap_err();
        assert!(
            message.contains("mpiexec cannot listen on 203.0.113.7"),
            "{message}"
        );
    }

    #[test]
    fn report_path_must_be_writable_and_is_left_as_found() {
        let directory =
            std::env::temp_dir().join(format!("resmpi-preflight-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let new_file = directory.join("report.json");
        assert!(check_report_writable(&new_file).is_ok());
        assert!(!new_file.exists(), "the probe must not leave a file");
        std::fs::write(&new_file, "kept").unwrap();
        assert!(check_report_writable(&new_file).is_ok());
        assert_eq!(std::fs::read_to_string(&new_file).unwrap(), "kept");
        let message = check_report_writable(&directory.join("missing/report.json")).unwrap_err();
        assert!(
            message.contains("cannot write the report there"),
            "{message}"
        );
        let message = check_report_writable(&directory).unwrap_err();
        assert!(
            message.contains("cannot write the report there"),
            "{message}"
        );
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
