//! Hosts of a job: `--hosts` lists and `--hostfile` files, the placement of
//! ranks on them, and which host names mean "this host".
//!
//! Placement follows hydra: hosts are taken in the order given; each host
//! gets as many consecutive ranks as it has slots (`host:N`, `host slots=N`,
//! 1 when not said), or `-ppn N` ranks when `-ppn` is given (it overrides the
//! slots). When every host is full, placement wraps around to the first host
//! again, so `-n` larger than the total slots oversubscribes in blocks.
//! Without `-n`, the job has as many ranks as slots in total (`-ppn` × hosts
//! with `-ppn`).
//!
//! Under `--replicas R` the hosts are cut, in the order given, into R host
//! groups of consecutive entries (as equal as the count allows), and
//! replica k of every rank is placed on group k by the rules above
//! (SDR-MPI's placement): no two replicas of one rank share a host, so a
//! host that goes down takes at most one replica of each rank. A host that
//! would fall into two groups (named twice, or two names of this host) is
//! refused, since it would put two replicas of a rank together.

use std::net::Ipv4Addr;

/// One host entry, as written by the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpec {
    /// Host name or address, passed to the launcher (`ssh HOST …`).
    pub name: String,
    /// Slots: how many consecutive ranks it gets per round.
    pub slots: u32,
}

/// Most slots one host entry may claim.
pub const MAX_SLOTS: u32 = 4096;

fn parse_slots(text: &str, context: &str) -> Result<u32, String> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|slots| (1..=MAX_SLOTS).contains(slots))
        .ok_or_else(|| format!("{context}: slots '{text}' must be a number from 1 to {MAX_SLOTS}"))
}

fn check_host_name(name: &str, context: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && !name.starts_with('-')
        && name.chars().all(|character| {
            character.is_ascii_graphic() && !"'\"`$\\;&|<>(){}*?!#".contains(character)
        });
    if valid {
        Ok(())
    } else {
        Err(format!("{context}: '{name}' is not a valid host name"))
    }
}

/// One `host[:slots]` word.
fn parse_host_word(word: &str, context: &str) -> Result<HostSpec, String> {
    // An IPv6 address has colons of its own: only `[addr]:slots` names slots.
    let (name, slots) = if let Some(rest) = word.strip_prefix('[') {
        match rest.split_once(']') {
            Some((address, "")) => (address, None),
            Some((address, tail)) => match tail.strip_prefix(':') {
                Some(slots) => (address, Some(slots)),
                None => return Err(format!("{context}: '{word}' is not host[:slots]")),
            },
            None => return Err(format!("{context}: '{word}' is not host[:slots]")),
        }
    } else if word.matches(':').count() == 1 {
        let (name, slots) = word.split_once(':').unwrap_or((word, ""));
        (name, Some(slots))
    } else {
        (word, None)
    };
    check_host_name(name, context)?;
    let slots = match slots {
        Some(text) => parse_slots(text, context)?,
        None => 1,
    };
    Ok(HostSpec {
        name: name.to_string(),
        slots,
    })
}

/// `--hosts A,B:2,C`: a comma-separated list of `host[:slots]`.
pub fn parse_host_list(text: &str) -> Result<Vec<HostSpec>, String> {
    let hosts = text
        .split(',')
        .map(str::trim)
        .filter(|word| !word.is_empty())
        .map(|word| parse_host_word(word, "--hosts"))
        .collect::<Result<Vec<_>, _>>()?;
    if hosts.is_empty() {
        return Err("--hosts: no host given".to_string());
    }
    Ok(hosts)
}

/// A hostfile: one host per line, `host`, `host:slots` or `host slots=N`;
/// `#` starts a comment; blank lines are ignored. `source` names the file in
/// error messages.
pub fn parse_hostfile(text: &str, source: &str) -> Result<Vec<HostSpec>, String> {
    let mut hosts = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let context = format!("{source}:{}", index + 1);
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        let mut host = parse_host_word(first, &context)?;
        for word in words {
            let Some(slots) = word.strip_prefix("slots=") else {
                return Err(format!(
                    "{context}: unexpected '{word}' (expected host[:slots] or host slots=N)"
                ));
            };
            host.slots = parse_slots(slots, &context)?;
        }
        hosts.push(host);
    }
    if hosts.is_empty() {
        return Err(format!("{source}: the hostfile names no host"));
    }
    Ok(hosts)
}

/// Where each rank runs: `host_of_rank[rank]` indexes `hosts`.
#[derive(Debug, PartialEq, Eq)]
pub struct Placement {
    /// Distinct hosts in order of first use (entries with the same name and
    /// every name of this host are merged).
    pub hosts: Vec<PlacedHost>,
    /// For each rank, its index in `hosts`.
    pub host_of_rank: Vec<usize>,
}

/// One distinct host of a placement.
#[derive(Debug, PartialEq, Eq)]
pub struct PlacedHost {
    /// The name given (the first one, for merged entries).
    pub name: String,
    /// Started on this host with fork/exec, not through the launcher.
    pub local: bool,
    /// Its ranks, in increasing order.
    pub ranks: Vec<u32>,
}

impl Placement {
    /// Every rank on this host (no `--hosts`).
    pub fn single_host(rank_count: u32) -> Placement {
        Placement {
            hosts: vec![PlacedHost {
                name: "localhost".to_string(),
                local: true,
                ranks: (0..rank_count).collect(),
            }],
            host_of_rank: vec![0; rank_count as usize],
        }
    }

    /// Places `rank_count` ranks on `hosts` as described in the module text;
    /// `is_local` says whether a name means this host.
    pub fn new(
        hosts: &[HostSpec],
        ranks_per_host: Option<u32>,
        rank_count: u32,
        is_local: impl Fn(&str) -> bool,
    ) -> Placement {
        let mut placement = Placement {
            hosts: Vec::new(),
            host_of_rank: Vec::with_capacity(rank_count as usize),
        };
        let mut rank = 0u32;
        'outer: loop {
            for host in hosts {
                let local = is_local(&host.name);
                let index = match placement
                    .hosts
                    .iter()
                    .position(|placed| (local && placed.local) || placed.name == host.name)
                {
                    Some(index) => index,
                    None => {
                        placement.hosts.push(PlacedHost {
                            name: host.name.clone(),
                            local,
                            ranks: Vec::new(),
                        });
                        placement.hosts.len() - 1
                    }
                };
                for _ in 0..ranks_per_host.unwrap_or(host.slots).max(1) {
                    if rank == rank_count {
                        break 'outer;
                    }
                    placement.hosts[index].ranks.push(rank);
                    placement.host_of_rank.push(index);
                    rank += 1;
                }
            }
            if hosts.is_empty() {
                break;
            }
        }
        placement.hosts.retain(|host| !host.ranks.is_empty());
        // Re-index after dropping unused hosts.
        for (index, host) in placement.hosts.iter().enumerate() {
            for &rank in &host.ranks {
                placement.host_of_rank[rank as usize] = index;
            }
        }
        placement
    }

    /// Places replica k of each of `rank_count` ranks (process
    /// `k * rank_count + rank`) on the k-th of `replica_count` host groups
    /// cut from `hosts` (see the module text). An error when there are fewer
    /// distinct hosts than replicas or a host falls into two groups.
    pub fn replicated(
        hosts: &[HostSpec],
        ranks_per_host: Option<u32>,
        rank_count: u32,
        replica_count: u32,
        is_local: impl Fn(&str) -> bool,
    ) -> Result<Placement, String> {
        if replica_count <= 1 {
            return Ok(Placement::new(hosts, ranks_per_host, rank_count, is_local));
        }
        let groups = replica_count as usize;
        if hosts.len() < groups {
            return Err(format!(
                "--replicas {replica_count} needs at least {replica_count} hosts (one host group \
                 per replica, so that no host holds two replicas of a rank); {} given",
                hosts.len()
            ));
        }
        // The group of each distinct host, by the identity `new` merges on.
        let same_host = |a: &HostSpec, b: &HostSpec| {
            (is_local(&a.name) && is_local(&b.name)) || a.name == b.name
        };
        let group_of_entry = |entry: usize| entry * groups / hosts.len();
        for (first, host) in hosts.iter().enumerate() {
            if let Some(second) = (first + 1..hosts.len()).find(|&other| {
                same_host(host, &hosts[other]) && group_of_entry(other) != group_of_entry(first)
            }) {
                return Err(format!(
                    "--replicas {replica_count}: host {} (entry {}) and host {} (entry {}) are \
                     the same host in host groups {} and {}: two replicas of a rank would \
                     share it; name each host once",
                    host.name,
                    first + 1,
                    hosts[second].name,
                    second + 1,
                    group_of_entry(first),
                    group_of_entry(second)
                ));
            }
        }
        let mut placement = Placement {
            hosts: Vec::new(),
            host_of_rank: Vec::with_capacity((rank_count * replica_count) as usize),
        };
        for group in 0..groups {
            let entries: Vec<HostSpec> = (0..hosts.len())
                .filter(|&entry| group_of_entry(entry) == group)
                .map(|entry| hosts[entry].clone())
                .collect();
            let part = Placement::new(&entries, ranks_per_host, rank_count, &is_local);
            let offset = placement.hosts.len();
            let first_process = group as u32 * rank_count;
            placement
                .host_of_rank
                .extend(part.host_of_rank.iter().map(|&index| offset + index));
            placement
                .hosts
                .extend(part.hosts.into_iter().map(|host| PlacedHost {
                    ranks: host.ranks.iter().map(|rank| first_process + rank).collect(),
                    ..host
                }));
        }
        Ok(placement)
    }

    /// (`MPI_LOCALNRANKS`, `MPI_LOCALRANKID`) of `rank`.
    pub fn local_numbers(&self, rank: u32) -> (u32, u32) {
        let host = &self.hosts[self.host_of_rank[rank as usize]];
        let local_rank = host.ranks.iter().position(|&r| r == rank).unwrap_or(0);
        (host.ranks.len() as u32, local_rank as u32)
    }

    /// The host `rank` runs on.
    pub fn host(&self, rank: u32) -> &PlacedHost {
        &self.hosts[self.host_of_rank[rank as usize]]
    }

    /// Whether any rank runs through the launcher.
    pub fn has_remote(&self) -> bool {
        self.hosts.iter().any(|host| !host.local)
    }

    /// The `PMI_process_mapping` value MPICH clients read:
    /// `(vector,(first_node,node_count,ranks_per_node),…)`, blocks of
    /// consecutive ranks on consecutive nodes, as hydra writes it.
    pub fn process_mapping(&self) -> String {
        // Runs of consecutive ranks on one node: (node, length).
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &node in &self.host_of_rank {
            match runs.last_mut() {
                Some((last, length)) if *last == node => *length += 1,
                _ => runs.push((node, 1)),
            }
        }
        // Blocks: (first node, node count, ranks per node).
        let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
        for (node, length) in runs {
            match blocks.last_mut() {
                Some((first, count, per_node))
                    if *per_node == length && *first + *count == node =>
                {
                    *count += 1
                }
                _ => blocks.push((node, 1, length)),
            }
        }
        let mut text = String::from("(vector");
        for (first, count, per_node) in blocks {
            text.push_str(&format!(",({first},{count},{per_node})"));
        }
        text.push(')');
        text
    }
}

/// This host's name (`gethostname`).
pub fn this_host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: gethostname writes at most buffer.len() bytes into `buffer`.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result != 0 {
        return String::new();
    }
    let end = buffer
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// Whether `name` means this host: `localhost`, a loopback address, or this
/// host's name (with or without its domain).
pub fn is_this_host(name: &str, host_name: &str) -> bool {
    let short = |text: &str| text.split('.').next().unwrap_or("").to_ascii_lowercase();
    let lower = name.to_ascii_lowercase();
    lower == "localhost"
        || lower.starts_with("127.")
        || lower == "::1"
        || (!host_name.is_empty()
            && (lower == host_name.to_ascii_lowercase()
                || (!lower.contains('.') && short(&lower) == short(host_name))))
}

/// First IPv4 address of an interface that is up and not loopback: the
/// default `--control-addr`.
pub fn first_non_loopback_ipv4() -> Option<Ipv4Addr> {
    interface_addresses()
        .into_iter()
        .find(|(_, address)| !address.is_loopback())
        .map(|(_, address)| address)
}

/// (interface name, IPv4 address) of every interface that is up, in the
/// order `getifaddrs` gives them; empty when it fails.
pub fn interface_addresses() -> Vec<(String, Ipv4Addr)> {
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
        if up && !node.ifa_addr.is_null() && !node.ifa_name.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family we check first.
            let family = i32::from(unsafe { (*node.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: AF_INET addresses are sockaddr_in.
                let address = unsafe { &*(node.ifa_addr as *const libc::sockaddr_in) };
                // SAFETY: ifa_name is a NUL-terminated string owned by the list.
                let name = unsafe { std::ffi::CStr::from_ptr(node.ifa_name) };
                found.push((
                    name.to_string_lossy().into_owned(),
                    Ipv4Addr::from(u32::from_be(address.sin_addr.s_addr)),
                ));
            }
        }
        entry = node.ifa_next;
    }
    // SAFETY: the list came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, slots: u32) -> HostSpec {
        HostSpec {
            name: name.to_string(),
            slots,
        }
    }

    #[test]
    fn host_lists_take_optional_slots() {
        assert_eq!(
            parse_host_list("a, b:3,[fe80::1]:2,10.0.0.1").unwrap(),
            vec![
                host("a", 1),
                host("b", 3),
                host("fe80::1", 2),
                host("10.0.0.1", 1)
            ]
        );
        assert!(parse_host_list("").unwrap_err().contains("no host"));
        assert!(parse_host_list("a:0").unwrap_err().contains("slots"));
        assert!(parse_host_list("a:x").unwrap_err().contains("slots"));
        assert!(parse_host_list("a;rm")
            .unwrap_err()
            .contains("not a valid host"));
        assert!(parse_host_list("-oProxy")
            .unwrap_err()
            .contains("not a valid host"));
    }

    #[test]
    fn hostfiles_accept_both_slot_spellings_and_comments() {
        let text = "# cluster\n\nnode1\nnode2:4   # big one\n  node3 slots=2\n[::1]:2\n";
        assert_eq!(
            parse_hostfile(text, "hf").unwrap(),
            vec![
                host("node1", 1),
                host("node2", 4),
                host("node3", 2),
                host("::1", 2)
            ]
        );
        assert!(parse_hostfile("# only a comment\n", "hf")
            .unwrap_err()
            .contains("names no host"));
        let error = parse_hostfile("a\nb cores=2\n", "hf").unwrap_err();
        assert!(error.starts_with("hf:2:"), "{error}");
        assert!(parse_hostfile("a slots=0\n", "hf")
            .unwrap_err()
            .contains("slots"));
    }

    fn hosts_of(placement: &Placement) -> Vec<&str> {
        placement
            .host_of_rank
            .iter()
            .map(|&index| placement.hosts[index].name.as_str())
            .collect()
    }

    #[test]
    fn placement_fills_slots_in_order_and_wraps() {
        let hosts = [host("a", 2), host("b", 1)];
        let placement = Placement::new(&hosts, None, 5, |_| false);
        assert_eq!(hosts_of(&placement), ["a", "a", "b", "a", "a"]);
        assert_eq!(placement.local_numbers(3), (4, 2));
        assert_eq!(placement.local_numbers(2), (1, 0));
        assert_eq!(
            placement.process_mapping(),
            "(vector,(0,1,2),(1,1,1),(0,1,2))"
        );
    }

    #[test]
    fn ppn_overrides_slots() {
        let hosts = [host("a", 8), host("b", 1)];
        let placement = Placement::new(&hosts, Some(2), 4, |_| false);
        assert_eq!(hosts_of(&placement), ["a", "a", "b", "b"]);
        assert_eq!(placement.process_mapping(), "(vector,(0,2,2))");
        assert!(placement.has_remote());
    }

    #[test]
    fn unused_hosts_are_dropped_and_local_names_merge() {
        let hosts = [host("localhost", 1), host("me", 1), host("far", 1)];
        let placement = Placement::new(&hosts, None, 2, |name| name != "far");
        assert_eq!(placement.hosts.len(), 1);
        assert!(placement.hosts[0].local);
        assert_eq!(placement.local_numbers(1), (2, 1));
        assert!(!placement.has_remote());
        assert_eq!(placement.process_mapping(), "(vector,(0,1,2))");
        assert_eq!(
            Placement::single_host(3).process_mapping(),
            "(vector,(0,1,3))"
        );
    }

    #[test]
    fn replica_k_of_every_rank_goes_to_host_group_k() {
        let hosts = [host("a", 2), host("b", 2), host("c", 1), host("d", 1)];
        let placement = Placement::replicated(&hosts, None, 3, 2, |_| false).unwrap();
        // Replica 0 (processes 0-2) on a, b; replica 1 (3-5) on c, d.
        assert_eq!(hosts_of(&placement), ["a", "a", "b", "c", "d", "c"]);
        assert_eq!(placement.hosts[1].ranks, [2]);
        assert_eq!(placement.hosts[2].ranks, [3, 5]);
        assert_eq!(placement.local_numbers(5), (2, 1));
        let three = Placement::replicated(&hosts[..3], Some(1), 2, 3, |_| false).unwrap();
        assert_eq!(hosts_of(&three), ["a", "a", "b", "b", "c", "c"]);
        // One replica: the plain placement.
        assert_eq!(
            Placement::replicated(&hosts, None, 5, 1, |_| false).unwrap(),
            Placement::new(&hosts, None, 5, |_| false)
        );
    }

    #[test]
    fn replicas_that_would_share_a_host_are_refused() {
        let error = Placement::replicated(&[host("a", 4)], None, 2, 2, |_| false).unwrap_err();
        assert!(error.contains("at least 2 hosts"), "{error}");
        let twice = [host("a", 1), host("b", 1), host("a", 1)];
        let error = Placement::replicated(&twice, None, 2, 2, |_| false).unwrap_err();
        assert!(
            error.contains("host a") && error.contains("share"),
            "{error}"
        );
        // Two names of this host in different groups are one host.
        let local = [host("localhost", 1), host("me", 1)];
        assert!(Placement::replicated(&local, None, 1, 2, |_| true).is_err());
        // A host named twice inside one group is fine.
        let same_group = [host("a", 1), host("a", 1), host("b", 1), host("c", 1)];
        assert!(Placement::replicated(&same_group, None, 2, 2, |_| false).is_ok());
    }

    #[test]
    fn this_host_is_recognised_by_its_names() {
        assert!(is_this_host("localhost", "node1.example.org"));
        assert!(is_this_host("127.0.0.1", ""));
        assert!(is_this_host("node1", "node1.example.org"));
        assert!(is_this_host("NODE1.example.org", "node1.example.org"));
        assert!(!is_this_host("node2", "node1.example.org"));
        assert!(!is_this_host("node1.other.org", "node1.example.org"));
        assert!(!is_this_host("rmpi-a", ""));
    }
}
