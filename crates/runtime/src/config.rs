//! Job configuration from `RESMPI_*` environment variables.
//!
//! `mpiexec` turns its options into these variables (`--paths` becomes
//! `RESMPI_PATHS`, ...), so a rank reads one source of truth whichever
//! launcher started it. A bad value is an error with a sentence naming the
//! variable, never a silent default: a typo in a tuning knob should not turn
//! into a benchmark that measures something else.
//!
//! | variable                | meaning                                     | default |
//! |-------------------------|---------------------------------------------|---------|
//! | `RESMPI_PATHS`          | `auto` (shm within a host, tcp across) or `tcp` (tcp everywhere) | `auto` |
//! | `RESMPI_EAGER_LIMIT`    | largest message sent eagerly, bytes (`K`/`M` suffixes allowed) | 16384 |
//! | `RESMPI_EAGER_CREDIT`   | unconsumed eager bytes a sender may have at one receiver (`K`/`M`) | 32 MiB / ranks, 4 eager messages to 1 MiB |
//! | `RESMPI_HELD_SEND_WARNING_S` | seconds a blocked rank waits with small sends held back (no eager credit) before it says so; 0: never | 60 |
//! | `RESMPI_SHM_RING_BYTES` | size of each shared-memory ring, bytes     | 1 MiB   |
//! | `RESMPI_JOB_ID`         | job id (mpiexec sets it; checked, not used) | none    |
//! | `RESMPI_JOB_SECRET`     | job secret in hex, proven by peers on connect | none |
//! | `RESMPI_RELIABLE`       | `on`/`off`: reliability layer on network paths | `on` |
//! | `RESMPI_CHECKSUM`       | `crc32c`/`none` on reliable links          | `crc32c` |
//! | `RESMPI_STRIPE`         | `round-robin`, `fragments` or `off`        | `round-robin` |
//! | `RESMPI_RAILS`          | `tcp:IFACE_OR_SUBNET[,…]`, parsed at wire-up | one rail |
//! | `RESMPI_INJECT`         | fault-injection spec, parsed by the path layer | none |
//! | `RESMPI_TCP_ADDR`       | IP address the TCP listener binds and publishes | picked |
//! | `RESMPI_HOST_KEY`       | ranks with equal keys share memory          | host+boot id |
//! | `RESMPI_ACK_TIMEOUT_MS` | first retransmission timeout               | 50 |
//! | `RESMPI_RETRIES`        | resends of one frame before a peer is unreachable | 16 |
//! | `RESMPI_RAIL_TIMEOUT_MS`| silence after which a rail is down while another rail works | 100 |
//! | `RESMPI_PEER_TIMEOUT_MS`| silence on every rail after which the peer is unreachable | 5000 |
//! | `RESMPI_PROGRESS_THREAD`| `on`/`off`: background progress for reliable links | `on` |
//! | `RESMPI_LINE_BUFFERED`  | `on`/`off`: line-buffer the C library's stdout when it is not a terminal | `on` |
//! | `RESMPI_DEBUG_RAILS`    | any value: print rails going down or up    | unset |
//! | `RESMPI_FAILURE_POLICY` | `abort`/`continue`: a dead peer ends the job, or is an event the survivors see (set by our `mpiexec`; unset under other launchers) | unset |
//! | `RESMPI_FT`             | process fault-tolerance protocol, chosen at `MPI_Init` (`none` is the only one yet; `resmpi_ft::Mode`) | `none` |
//! | `RESMPI_MSGLOG`         | `none`/`pessimistic`/`optimistic`: message logging (`mpiexec --msglog`; needs the library in `lib/msglog`) | `none` |
//! | `RESMPI_MSGLOG_MEM`     | bytes one process's message log may hold in memory (`mpiexec --msglog-mem`) | 1 GiB |
//! | `RESMPI_MSGLOG_DISK`    | bytes it may spill past that to local disk (`mpiexec --msglog-disk`; 0: no spilling) | 8 GiB |
//! | `RESMPI_MSGLOG_SPILL_DIR` | directory of the spill file (`mpiexec --msglog-spill-dir`) | `$TMPDIR`, else `/tmp` |

use crate::hex::hex_decode;

/// Which kinds of path ranks use to reach each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathsChoice {
    /// Shared memory between ranks on one host, TCP between hosts.
    Auto,
    /// TCP between every pair of ranks, even on one host.
    Tcp,
}

/// Job configuration, read once at start-up by [`Config::from_env`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `RESMPI_PATHS`.
    pub paths: PathsChoice,
    /// `RESMPI_EAGER_LIMIT`: messages up to this size go eagerly, larger ones
    /// by rendezvous.
    pub eager_limit_bytes: usize,
    /// `RESMPI_EAGER_CREDIT`: eager bytes (payload + header) a sender may
    /// have unconsumed at one receiver; None: the library's default (see
    /// `Mpi::init`).
    pub eager_credit_bytes: Option<usize>,
    /// `RESMPI_HELD_SEND_WARNING_S`: how long a blocked call waits, with
    /// small sends held back for lack of eager credit, before the rank
    /// prints one diagnostic (0: never).
    pub held_send_warning_s: u64,
    /// `RESMPI_SHM_RING_BYTES`: size of each shared-memory ring.
    pub shm_ring_bytes: usize,
    /// `RESMPI_JOB_ID`: set by our `mpiexec`; absent under other launchers.
    pub job_id: Option<String>,
    /// `RESMPI_JOB_SECRET`, decoded from hex.
    pub job_secret: Option<Vec<u8>>,
    /// `RESMPI_RELIABLE`.
    pub reliable: bool,
    /// `RESMPI_CHECKSUM` is `crc32c`.
    pub checksums: bool,
    /// `RESMPI_STRIPE`.
    pub stripe: StripeChoice,
    /// `RESMPI_RAILS`, as given (interfaces are resolved at wire-up).
    pub rails: Option<String>,
    /// `RESMPI_INJECT`, as given (parsed by `resmpi_path::inject_spec`).
    pub inject: Option<String>,
    /// `RESMPI_TCP_ADDR`.
    pub tcp_address: Option<std::net::IpAddr>,
    /// `RESMPI_HOST_KEY`.
    pub host_key: Option<String>,
    /// `RESMPI_ACK_TIMEOUT_MS`.
    pub ack_timeout_ms: u64,
    /// `RESMPI_RETRIES`.
    pub retries: u32,
    /// `RESMPI_RAIL_TIMEOUT_MS`.
    pub rail_timeout_ms: u64,
    /// `RESMPI_PEER_TIMEOUT_MS`.
    pub peer_timeout_ms: u64,
    /// `RESMPI_PROGRESS_THREAD`.
    pub progress_thread: bool,
    /// `RESMPI_LINE_BUFFERED`: standard output of the C library is made
    /// line-buffered at `MPI_Init` when it is a pipe or a file, so a rank
    /// that dies has lost no line it printed and ranks' lines never split
    /// (Open MPI gets the same from the pseudo-terminal it gives ranks).
    pub line_buffered: bool,
    /// `RESMPI_DEBUG_RAILS` is set.
    pub debug_rails: bool,
    /// `RESMPI_FAILURE_POLICY`; `None` when no resmpi launcher set it (then
    /// nobody sends failure notices and a dead peer ends the job).
    pub failure_policy: Option<FailurePolicy>,
    /// `RESMPI_FT`: the name of the process fault-tolerance protocol,
    /// checked by `MPI_Init` against the protocols the library has.
    pub ft_protocol: String,
    /// `RESMPI_INCARNATION`: 0 for a process the job started with; i > 0
    /// for the i-th replacement of its rank that the launcher started
    /// (`mpiexec --respawn`), which joins the running job instead of
    /// wiring up with everyone at MPI_Init.
    pub incarnation: u32,
    /// `RESMPI_REPLICAS` (`mpiexec --replicas`): processes per rank, 1
    /// without replication. The process manager then starts
    /// `ranks * replica_count` processes; PMI rank `p` runs replica
    /// `p / ranks` of rank `p % ranks`.
    pub replica_count: u32,
    /// `RESMPI_SDC` (`mpiexec --sdc`): what a divergence between the
    /// replicas of a rank does under the replication protocol.
    pub sdc: SdcChoice,
    /// `RESMPI_REPLICA_ANYSOURCE` (`mpiexec --replica-anysource`): whether
    /// the replicas of a rank agree on every wildcard receive's source
    /// (`agree`) or each matches on its own (`free`, the default: the
    /// program is taken as send-deterministic).
    pub replica_anysource_agree: bool,
    /// `RESMPI_REPLICA_RECOVERY` (`mpiexec --replica-recovery`): whether
    /// the substitute of a dead replica forks a new one (`now`) or the rank
    /// goes on with fewer replicas (`off`, the default).
    pub replica_recovery: bool,
    /// `RESMPI_REPLICA_OUTPUT=all`: under a process manager other than
    /// resmpi's `mpiexec` (which shows each rank's output once itself),
    /// every replica keeps its standard output and error; by default
    /// (`first`) only replica 0 of each rank does, the others write theirs
    /// to /dev/null from `MPI_Init` on, so the job prints what an
    /// unreplicated run prints.
    pub replica_output_all: bool,
    /// `RESMPI_MSGLOG` (`mpiexec --msglog`): message logging.
    pub msglog: MessageLogging,
    /// `RESMPI_MSGLOG_MEM`: bytes one process's message log may hold
    /// (None: the protocol's default).
    pub msglog_bytes_max: Option<usize>,
    /// `RESMPI_MSGLOG_DISK`: bytes one process's message log may spill to
    /// disk (None: the protocol's default).
    pub msglog_disk_bytes_max: Option<u64>,
    /// `RESMPI_MSGLOG_SPILL_DIR`: where the spill file goes (None:
    /// `$TMPDIR`, else `/tmp`).
    pub msglog_spill_dir: Option<String>,
}

/// What a divergence between replicas does (`RESMPI_SDC`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdcChoice {
    /// Counted and named in the end-of-job report.
    Report,
    /// The job ends with an error naming it.
    Abort,
    /// The replica a majority of its rank's replicas contradicts leaves
    /// the job, and its death is masked (R >= 3).
    Vote,
}

/// Message logging (`RESMPI_MSGLOG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageLogging {
    /// Nothing is logged.
    None,
    /// Pessimistic: determinants stable before any send that depends on them.
    Pessimistic,
    /// Optimistic (O2P): sends do not wait; dependencies are piggybacked.
    Optimistic,
}

impl MessageLogging {
    /// The mode named `text` (`RESMPI_MSGLOG`, `mpiexec --msglog`); what is
    /// not built is refused with a sentence saying so.
    pub fn from_name(text: &str) -> Result<MessageLogging, String> {
        match text.trim() {
            "" | "none" => Ok(MessageLogging::None),
            "pessimistic" => Ok(MessageLogging::Pessimistic),
            "optimistic" => Ok(MessageLogging::Optimistic),
            other => Err(format!(
                "message logging '{other}': expected none, pessimistic or optimistic"
            )),
        }
    }
}

/// What the job does when a process dies (`RESMPI_FAILURE_POLICY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The launcher tears the job down; a rank that sees the death first
    /// reports it as a fatal error.
    Abort,
    /// The job goes on: survivors mark the process failed, end only the
    /// operations that need it, and keep talking to each other.
    Continue,
}

/// How traffic to a peer spreads over its rails (`RESMPI_STRIPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StripeChoice {
    /// Frames take the live rails in turn.
    RoundRobin,
    /// Fragments of one message alternate rails.
    Fragments,
    /// Always the lowest live rail.
    Off,
}

/// Default of [`Config::eager_limit_bytes`].
pub const DEFAULT_EAGER_LIMIT_BYTES: usize = 16 * 1024;
/// Default of [`Config::held_send_warning_s`].
pub const DEFAULT_HELD_SEND_WARNING_S: u64 = 60;
/// Default of [`Config::shm_ring_bytes`].
pub const DEFAULT_SHM_RING_BYTES: usize = 1024 * 1024;
/// Largest eager limit accepted: the largest payload of one wire frame.
pub const MAX_EAGER_LIMIT_BYTES: usize = 16 * 1024 * 1024;
/// Smallest and largest shared-memory ring accepted.
pub const MIN_SHM_RING_BYTES: usize = 4096;
/// Largest shared-memory ring accepted (each peer pair has two of them).
pub const MAX_SHM_RING_BYTES: usize = 1024 * 1024 * 1024;
/// Longest job id accepted (it becomes part of file names).
pub const MAX_JOB_ID_BYTES: usize = 64;

impl Default for Config {
    fn default() -> Config {
        Config {
            paths: PathsChoice::Auto,
            eager_limit_bytes: DEFAULT_EAGER_LIMIT_BYTES,
            eager_credit_bytes: None,
            held_send_warning_s: DEFAULT_HELD_SEND_WARNING_S,
            shm_ring_bytes: DEFAULT_SHM_RING_BYTES,
            job_id: None,
            job_secret: None,
            reliable: true,
            checksums: true,
            stripe: StripeChoice::RoundRobin,
            rails: None,
            inject: None,
            tcp_address: None,
            host_key: None,
            // Real processes share cores with their peers and progress
            // threads: looser than the reliability crate's sans-IO defaults.
            ack_timeout_ms: 50,
            retries: 16,
            rail_timeout_ms: 100,
            peer_timeout_ms: 5000,
            progress_thread: true,
            line_buffered: true,
            debug_rails: false,
            failure_policy: None,
            ft_protocol: "none".into(),
            incarnation: 0,
            replica_count: 1,
            sdc: SdcChoice::Report,
            replica_anysource_agree: false,
            replica_recovery: false,
            replica_output_all: false,
            msglog: MessageLogging::None,
            msglog_bytes_max: None,
            msglog_disk_bytes_max: None,
            msglog_spill_dir: None,
        }
    }
}

/// `text` as one of `choices` (name, value), or an error naming `variable`.
fn choose<T: Copy>(variable: &str, text: &str, choices: &[(&str, T)]) -> Result<T, String> {
    let text = text.trim();
    choices
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, value)| *value)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
            format!("{variable}='{text}' is not one of: {}", names.join(", "))
        })
}

/// Most replicas of one rank (`RESMPI_REPLICAS`): what one send may fan
/// out to (`resmpi_ft::SEND_TARGETS_MAX`).
pub const REPLICAS_MAX: u32 = 8;

/// `text` as a whole number, or an error naming `variable`.
fn whole_number(variable: &str, text: &str) -> Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{variable}='{text}' is not a whole number"))
}

impl Config {
    /// Reads the `RESMPI_*` variables of this process.
    pub fn from_env() -> Result<Config, String> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup` (a name to its value), so tests
    /// need not touch the process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let mut config = Config::default();
        if let Some(text) = lookup("RESMPI_TCP_ADDR") {
            let address = text
                .trim()
                .parse()
                .map_err(|_| format!("RESMPI_TCP_ADDR='{text}' is not an IP address"))?;
            config.tcp_address = Some(address);
        }
        if let Some(text) = lookup("RESMPI_PATHS") {
            config.paths = choose(
                "RESMPI_PATHS",
                &text,
                &[("auto", PathsChoice::Auto), ("tcp", PathsChoice::Tcp)],
            )?;
        }
        if let Some(text) = lookup("RESMPI_EAGER_LIMIT") {
            config.eager_limit_bytes = parse_byte_count(&text)
                .map_err(|problem| format!("RESMPI_EAGER_LIMIT='{text}': {problem}"))?;
            if config.eager_limit_bytes > MAX_EAGER_LIMIT_BYTES {
                return Err(format!(
                    "RESMPI_EAGER_LIMIT='{text}' exceeds the largest frame payload ({MAX_EAGER_LIMIT_BYTES} bytes)"
                ));
            }
        }
        if let Some(text) = lookup("RESMPI_EAGER_CREDIT") {
            let credit_bytes = parse_byte_count(&text)
                .map_err(|problem| format!("RESMPI_EAGER_CREDIT='{text}': {problem}"))?;
            config.eager_credit_bytes = Some(credit_bytes);
        }
        if let Some(text) = lookup("RESMPI_HELD_SEND_WARNING_S") {
            config.held_send_warning_s = whole_number("RESMPI_HELD_SEND_WARNING_S", &text)?;
        }
        if let Some(text) = lookup("RESMPI_SHM_RING_BYTES") {
            config.shm_ring_bytes = parse_byte_count(&text)
                .map_err(|problem| format!("RESMPI_SHM_RING_BYTES='{text}': {problem}"))?;
            if !(MIN_SHM_RING_BYTES..=MAX_SHM_RING_BYTES).contains(&config.shm_ring_bytes) {
                return Err(format!(
                    "RESMPI_SHM_RING_BYTES='{text}' is outside {MIN_SHM_RING_BYTES}..={MAX_SHM_RING_BYTES} bytes"
                ));
            }
        }
        if let Some(text) = lookup("RESMPI_JOB_ID") {
            let valid = !text.is_empty()
                && text.len() <= MAX_JOB_ID_BYTES
                && text
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
            if !valid {
                return Err(format!(
                    "RESMPI_JOB_ID='{text}' must be 1 to {MAX_JOB_ID_BYTES} characters of [A-Za-z0-9_-] (it names shared-memory files)"
                ));
            }
            config.job_id = Some(text);
        }
        if let Some(text) = lookup("RESMPI_JOB_SECRET") {
            let secret = hex_decode(text.trim())
                .filter(|bytes| !bytes.is_empty())
                .ok_or_else(|| {
                    "RESMPI_JOB_SECRET is not a non-empty, even-length hex string".to_string()
                })?;
            config.job_secret = Some(secret);
        }
        // For the settings below, set but empty counts as unset.
        let lookup = |name: &str| lookup(name).filter(|text| !text.trim().is_empty());
        let switch = [("on", true), ("1", true), ("off", false), ("0", false)];
        if let Some(text) = lookup("RESMPI_FAILURE_POLICY") {
            config.failure_policy = Some(choose(
                "RESMPI_FAILURE_POLICY",
                &text,
                &[
                    ("abort", FailurePolicy::Abort),
                    ("continue", FailurePolicy::Continue),
                ],
            )?);
        }
        if let Some(text) = lookup("RESMPI_FT") {
            config.ft_protocol = text.trim().to_string();
        }
        if let Some(text) = lookup("RESMPI_MSGLOG") {
            config.msglog = MessageLogging::from_name(&text)
                .map_err(|problem| format!("RESMPI_MSGLOG: {problem}"))?;
        }
        if let Some(text) = lookup("RESMPI_MSGLOG_MEM") {
            config.msglog_bytes_max = Some(
                parse_byte_count(&text)
                    .map_err(|problem| format!("RESMPI_MSGLOG_MEM: {problem}"))?,
            );
        }
        if let Some(text) = lookup("RESMPI_MSGLOG_DISK") {
            config.msglog_disk_bytes_max = Some(
                parse_byte_count(&text)
                    .map_err(|problem| format!("RESMPI_MSGLOG_DISK: {problem}"))?
                    as u64,
            );
        }
        if let Some(text) = lookup("RESMPI_MSGLOG_SPILL_DIR") {
            if text.is_empty() {
                return Err("RESMPI_MSGLOG_SPILL_DIR: empty directory name".to_string());
            }
            config.msglog_spill_dir = Some(text);
        }
        if let Some(text) = lookup("RESMPI_INCARNATION") {
            config.incarnation = text.trim().parse().map_err(|_| {
                format!("RESMPI_INCARNATION='{text}' is not a process incarnation number")
            })?;
        }
        if let Some(text) = lookup("RESMPI_REPLICAS") {
            config.replica_count = text
                .trim()
                .parse()
                .ok()
                .filter(|count| (1..=REPLICAS_MAX).contains(count))
                .ok_or_else(|| {
                    format!("RESMPI_REPLICAS='{text}' is not a number of replicas from 1 to {REPLICAS_MAX}")
                })?;
        }
        if let Some(text) = lookup("RESMPI_SDC") {
            config.sdc = choose(
                "RESMPI_SDC",
                &text,
                &[
                    ("report", SdcChoice::Report),
                    ("abort", SdcChoice::Abort),
                    ("vote", SdcChoice::Vote),
                ],
            )?;
        }
        if config.sdc == SdcChoice::Vote && config.replica_count < 3 {
            return Err(format!(
                "RESMPI_SDC=vote: a vote needs a majority, so at least 3 replicas \
                 (RESMPI_REPLICAS={}); use report or abort",
                config.replica_count
            ));
        }
        if let Some(text) = lookup("RESMPI_REPLICA_ANYSOURCE") {
            config.replica_anysource_agree = choose(
                "RESMPI_REPLICA_ANYSOURCE",
                &text,
                &[("free", false), ("agree", true)],
            )?;
        }
        if let Some(text) = lookup("RESMPI_REPLICA_RECOVERY") {
            config.replica_recovery = choose(
                "RESMPI_REPLICA_RECOVERY",
                &text,
                &[("off", false), ("now", true)],
            )?;
        }
        if let Some(text) = lookup("RESMPI_REPLICA_OUTPUT") {
            config.replica_output_all = choose(
                "RESMPI_REPLICA_OUTPUT",
                &text,
                &[("first", false), ("all", true)],
            )?;
        }
        if let Some(text) = lookup("RESMPI_RELIABLE") {
            config.reliable = choose("RESMPI_RELIABLE", &text, &switch)?;
        }
        if let Some(text) = lookup("RESMPI_CHECKSUM") {
            config.checksums = choose(
                "RESMPI_CHECKSUM",
                &text,
                &[("crc32c", true), ("none", false)],
            )?;
        }
        if let Some(text) = lookup("RESMPI_STRIPE") {
            let stripes = [
                ("round-robin", StripeChoice::RoundRobin),
                ("fragments", StripeChoice::Fragments),
                ("off", StripeChoice::Off),
            ];
            config.stripe = choose("RESMPI_STRIPE", &text, &stripes)?;
        }
        config.rails = lookup("RESMPI_RAILS");
        config.inject = lookup("RESMPI_INJECT");
        config.host_key = lookup("RESMPI_HOST_KEY");
        if let Some(text) = lookup("RESMPI_ACK_TIMEOUT_MS") {
            config.ack_timeout_ms = whole_number("RESMPI_ACK_TIMEOUT_MS", &text)?.max(1);
        }
        if let Some(text) = lookup("RESMPI_RETRIES") {
            config.retries = whole_number("RESMPI_RETRIES", &text)?.min(u32::MAX as u64) as u32;
        }
        if let Some(text) = lookup("RESMPI_RAIL_TIMEOUT_MS") {
            config.rail_timeout_ms = whole_number("RESMPI_RAIL_TIMEOUT_MS", &text)?.max(5);
        }
        if let Some(text) = lookup("RESMPI_PEER_TIMEOUT_MS") {
            config.peer_timeout_ms = whole_number("RESMPI_PEER_TIMEOUT_MS", &text)?.max(5);
        }
        if let Some(text) = lookup("RESMPI_PROGRESS_THREAD") {
            config.progress_thread = choose("RESMPI_PROGRESS_THREAD", &text, &switch)?;
        }
        if let Some(text) = lookup("RESMPI_LINE_BUFFERED") {
            config.line_buffered = choose("RESMPI_LINE_BUFFERED", &text, &switch)?;
        }
        config.debug_rails = lookup("RESMPI_DEBUG_RAILS").is_some();
        Ok(config)
    }
}

/// Parses a byte count: decimal digits with an optional binary suffix
/// `K`, `M` or `G` (either case, an optional trailing `B` or `iB`).
/// `"16384"`, `"16K"`, `"1MiB"` are accepted.
pub fn parse_byte_count(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let digits_end = text
        .find(|character: char| !character.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(
            "not a byte count (expected digits with an optional K, M or G suffix)".to_string(),
        );
    }
    let multiplier: usize = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("unknown size suffix '{suffix}' (use K, M or G)")),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|count| count.checked_mul(multiplier))
        .ok_or_else(|| "byte count is too large".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config_of(pairs: &[(&str, &str)]) -> Result<Config, String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn ft_protocol_defaults_to_none_and_keeps_the_name_given() {
        assert_eq!(config_of(&[]).unwrap().ft_protocol, "none");
        let chosen = config_of(&[("RESMPI_FT", " replication ")]).unwrap();
        assert_eq!(chosen.ft_protocol, "replication");
    }

    #[test]
    fn sdc_vote_needs_three_replicas() {
        let config = config_of(&[("RESMPI_REPLICAS", "3"), ("RESMPI_SDC", "vote")]).unwrap();
        assert_eq!(config.sdc, SdcChoice::Vote);
        let problem = config_of(&[("RESMPI_REPLICAS", "2"), ("RESMPI_SDC", "vote")]).unwrap_err();
        assert!(problem.contains("at least 3 replicas"), "{problem}");
    }

    #[test]
    fn replica_count_defaults_to_one_and_refuses_zero_and_too_many() {
        assert_eq!(config_of(&[]).unwrap().replica_count, 1);
        assert_eq!(
            config_of(&[("RESMPI_REPLICAS", "3")])
                .unwrap()
                .replica_count,
            3
        );
        for bad in ["0", "9", "two"] {
            let problem = config_of(&[("RESMPI_REPLICAS", bad)]).unwrap_err();
            assert!(problem.contains("RESMPI_REPLICAS"), "{problem}");
        }
    }

    #[test]
    fn replica_output_is_the_first_replicas_unless_all_is_asked_for() {
        assert!(!config_of(&[]).unwrap().replica_output_all);
        assert!(
            !config_of(&[("RESMPI_REPLICA_OUTPUT", "first")])
                .unwrap()
                .replica_output_all
        );
        assert!(
            config_of(&[("RESMPI_REPLICA_OUTPUT", " all ")])
                .unwrap()
                .replica_output_all
        );
        let problem = config_of(&[("RESMPI_REPLICA_OUTPUT", "some")]).unwrap_err();
        assert!(problem.contains("RESMPI_REPLICA_OUTPUT"), "{problem}");
    }

    #[test]
    fn empty_environment_gives_defaults() {
        let config = config_of(&[]).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.eager_limit_bytes, 16384);
        assert_eq!(config.shm_ring_bytes, 1 << 20);
        assert_eq!(config.paths, PathsChoice::Auto);
    }

    #[test]
    fn every_variable_is_read() {
        let config = config_of(&[
            ("RESMPI_PATHS", "tcp"),
            ("RESMPI_EAGER_LIMIT", "64K"),
            ("RESMPI_SHM_RING_BYTES", "2097152"),
            ("RESMPI_JOB_ID", "0123abcd0123abcd"),
            ("RESMPI_JOB_SECRET", "00ff10"),
            ("RESMPI_EAGER_CREDIT", "4M"),
            ("RESMPI_HELD_SEND_WARNING_S", "0"),
        ])
        .unwrap();
        assert_eq!(config.eager_credit_bytes, Some(4 << 20));
        assert_eq!(config.held_send_warning_s, 0);
        assert_eq!(config.paths, PathsChoice::Tcp);
        assert_eq!(config.eager_limit_bytes, 65536);
        assert_eq!(config.shm_ring_bytes, 2 << 20);
        assert_eq!(config.job_id.as_deref(), Some("0123abcd0123abcd"));
        assert_eq!(config.job_secret, Some(vec![0x00, 0xff, 0x10]));
    }

    #[test]
    fn bad_values_are_errors_naming_the_variable() {
        for (name, value) in [
            ("RESMPI_PATHS", "udp"),
            ("RESMPI_EAGER_LIMIT", "lots"),
            ("RESMPI_EAGER_LIMIT", "-1"),
            ("RESMPI_EAGER_LIMIT", "1G"),
            ("RESMPI_SHM_RING_BYTES", "12"),
            ("RESMPI_JOB_ID", "../etc"),
            ("RESMPI_JOB_ID", ""),
            ("RESMPI_JOB_SECRET", "abc"),
            ("RESMPI_JOB_SECRET", "zz"),
            ("RESMPI_JOB_SECRET", ""),
            ("RESMPI_RELIABLE", "maybe"),
            ("RESMPI_CHECKSUM", "md5"),
            ("RESMPI_STRIPE", "random"),
            ("RESMPI_TCP_ADDR", "not-an-ip"),
            ("RESMPI_TCP_ADDR", ""),
            ("RESMPI_ACK_TIMEOUT_MS", "soon"),
            ("RESMPI_RETRIES", "-3"),
            ("RESMPI_RAIL_TIMEOUT_MS", "1s"),
            ("RESMPI_PEER_TIMEOUT_MS", "-1"),
            ("RESMPI_PROGRESS_THREAD", "yes"),
            ("RESMPI_EAGER_CREDIT", "plenty"),
            ("RESMPI_HELD_SEND_WARNING_S", "1m"),
        ] {
            let error = config_of(&[(name, value)]).unwrap_err();
            assert!(error.contains(name), "{name}={value}: {error}");
        }
    }

    #[test]
    fn byte_counts_accept_binary_suffixes() {
        assert_eq!(parse_byte_count("0"), Ok(0));
        assert_eq!(parse_byte_count("16k"), Ok(16384));
        assert_eq!(parse_byte_count("1MiB"), Ok(1 << 20));
        assert_eq!(parse_byte_count(" 2G "), Ok(2 << 30));
        assert!(parse_byte_count("1T").is_err());
        assert!(parse_byte_count("").is_err());
        assert!(parse_byte_count("99999999999999999999999").is_err());
    }
}
