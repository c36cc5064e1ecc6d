//! Command-line options of `mpiexec` / `mpirun`.
//!
//! Options come before the program; the first word that is not an option is
//! the program and everything after it belongs to the program. Every option
//! accepts `-name value`, `--name value`, `-name=value` and `--name=value`,
//! so hydra-style and GNU-style command lines both work. An unknown option is
//! an error (exit 2): silently passing a typo to the program as its name
//! would start N copies of the wrong thing.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use resmpi_path::inject_spec::{Fault, FaultRule, FaultSpec, ProcessFault};
use resmpi_runtime::parse_byte_count;

use crate::hosts::{parse_host_list, parse_hostfile, HostSpec};

/// Most ranks one `mpiexec` starts on this host. Each rank costs three
/// descriptors and three threads in the launcher.
pub const MAX_RANK_COUNT: u32 = 1024;

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// Start a job.
    Run(Box<Options>),
    /// Print the usage text.
    Help,
    /// Print the version.
    Version,
}

/// What the job does when a rank dies before `MPI_Finalize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Tear the whole job down at the first death (the default).
    Abort,
    /// Record the death, tell the other ranks, and go on; exit non-zero at
    /// the end.
    Continue,
}

impl FailurePolicy {
    /// The name used on the command line and in `RESMPI_FAILURE_POLICY`.
    pub fn name(self) -> &'static str {
        match self {
            FailurePolicy::Abort => "abort",
            FailurePolicy::Continue => "continue",
        }
    }
}

/// The variable that mirrors `--failure-policy`; mpiexec also sets it in
/// every rank.
pub const FAILURE_POLICY_VARIABLE: &str = "RESMPI_FAILURE_POLICY";

/// The variable that carries `--initial-errhandler` to the ranks.
pub const INITIAL_ERRHANDLER_VARIABLE: &str = "RESMPI_INITIAL_ERRHANDLER";
/// The initial error handlers MPI-4 names (`mpi_initial_errhandler`).
pub const INITIAL_ERRHANDLERS: [&str; 3] = [
    "mpi_errors_are_fatal",
    "mpi_errors_abort",
    "mpi_errors_return",
];

/// The variable that mirrors `--bind-to` (see [`crate::spawn::pin_as_asked`]).
pub const BIND_TO_VARIABLE: &str = "RESMPI_BIND_TO";

/// A job to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// `-n` / `-np`: number of ranks.
    pub rank_count: u32,
    /// Variables to set in every rank, in command-line order (`-x`,
    /// `-genv`, `--paths`, `--eager-limit` and the fault-tolerance options
    /// `--inject`, `--checksum`, `--reliable`, `--rails`, `--stripe`);
    /// later entries win.
    pub environment: Vec<(String, String)>,
    /// `--tag-output`: prefix each line with `[rank] `.
    pub tag_output: bool,
    /// `--timeout`: end the job after this many seconds.
    pub timeout_seconds: Option<u64>,
    /// `--hosts` / `--hostfile`: where ranks run; `None` is this host only.
    pub hosts: Option<Vec<HostSpec>>,
    /// `-ppn`: ranks per host per round (overrides slots).
    pub ranks_per_host: Option<u32>,
    /// `--launcher-exec`: the program that starts a host's proxy on a
    /// remote host (`PROG HOST MPIEXEC --proxy`), `ssh` by default.
    pub launcher_exec: String,
    /// `--control-addr`: the address proxies connect back to mpiexec at;
    /// `None` is this host's first non-loopback IPv4 address.
    pub control_address: Option<String>,
    /// Whether a fault-tolerance option (`--inject`, `--rails`,
    /// `--checksum`, `--reliable`, failure policy `continue`) was given: the
    /// FT report is printed at the end of the job even when every counter
    /// is zero.
    pub ft_options_given: bool,
    /// `--report-json`: where to write the end-of-job FT report as JSON.
    pub report_json: Option<PathBuf>,
    /// `--failure-policy` (or its hydra / Open MPI spellings, or
    /// `RESMPI_FAILURE_POLICY`).
    pub failure_policy: FailurePolicy,
    /// The process faults (`kill:`, `host-down:`) of the last `--inject`.
    pub process_faults: Vec<ProcessFault>,
    /// `--respawn N` (a test-only policy, for re-join): under `continue`,
    /// a rank that dies is started again on its host (a remote one by its
    /// proxy), at most N times per rank, as the next incarnation
    /// (`RESMPI_INCARNATION`).
    pub respawn_count_max: u32,
    /// `--replicas R`: processes per rank (1 without replication). The job
    /// has `rank_count * replica_count` processes; process
    /// `replica * rank_count + rank` is replica `replica` of `rank`.
    pub replica_count: u32,
    /// `--replica-masking`: what a replicated job does when one of its
    /// processes dies.
    pub replica_masking: ReplicaMasking,
    /// `--replica-recovery now` (`RESMPI_REPLICA_RECOVERY`): the substitute
    /// of a dead replica forks a new one, which mpiexec adopts.
    pub replica_recovery: bool,
    /// `--msglog pessimistic` (`RESMPI_MSGLOG`): the processes run
    /// `lib/msglog/libmpi.so` (pessimistic message logging), a dead rank
    /// is started again and replays, and what it prints again while it
    /// replays is not shown twice.
    pub msglog: bool,
    /// `--msglog optimistic`: sends do not wait for the event logger's
    /// acks (O2P); false with `pessimistic` or without message logging.
    pub msglog_optimistic: bool,
    /// `MPI_UNIVERSE_SIZE`: the slots the job may fill, spawned processes
    /// included. `--universe-size N` / `-usize N` / `RESMPI_UNIVERSE_SIZE`
    /// when given, else the larger of `-n` and the hosts' slots.
    pub universe_size: u32,
    /// The program to run, looked up in `PATH` like a shell would.
    pub program: String,
    /// The program's arguments.
    pub arguments: Vec<String>,
}

impl Options {
    /// Processes the job starts: every replica of every rank.
    pub fn process_count(&self) -> u32 {
        self.rank_count * self.replica_count
    }

    /// The (rank, replica) that process `process` runs.
    pub fn rank_and_replica(&self, process: u32) -> (u32, u32) {
        (process % self.rank_count, process / self.rank_count)
    }

    /// The process that runs replica `replica` of `rank`.
    pub fn process_of(&self, rank: u32, replica: u32) -> u32 {
        replica * self.rank_count + rank
    }
}

/// What a replicated job (`--replicas R`, R > 1) does when a process dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaMasking {
    /// The dead process's replica is given up: that replica of every rank
    /// is killed, the job goes on with the others (the default; the
    /// processes run the plain library).
    Replica,
    /// Only the dead process is lost: the processes run the library built
    /// with the replication protocol (`lib/replication/`), whose substitute
    /// replica takes over the dead one's messages; the job fails when a
    /// rank has no live replica.
    Process,
}

impl ReplicaMasking {
    /// The name on the command line and in `RESMPI_REPLICA_MASKING`.
    pub fn name(self) -> &'static str {
        match self {
            ReplicaMasking::Replica => "replica",
            ReplicaMasking::Process => "process",
        }
    }
}

/// The variable that mirrors `--msglog`.
pub const MSGLOG_VARIABLE: &str = "RESMPI_MSGLOG";

/// How many times `--msglog` starts one rank again when `--respawn` does
/// not say: enough for repeated failures, bounded so that a program that
/// kills itself deterministically does not loop for ever.
pub const MSGLOG_RESTARTS_PER_RANK: u32 = 3;

/// `--msglog MODE`: the mode's name, None for none.
fn parse_msglog(text: &str) -> Result<Option<&'static str>, String> {
    match text.trim() {
        "none" | "" => Ok(None),
        "pessimistic" => Ok(Some("pessimistic")),
        "optimistic" => Ok(Some("optimistic")),
        other => Err(format!(
            "--msglog '{other}': expected pessimistic, optimistic or none"
        )),
    }
}

/// What `--msglog` cannot honour refuses to start, rather than run a job
/// that looks protected and is not.
fn check_msglog_supported(
    replica_count: u32,
    rank_count: u32,
    failure_policy: Option<FailurePolicy>,
) -> Result<(), String> {
    if replica_count > 1 {
        return Err(
            "--msglog with --replicas: a job is protected by replication or by message \
             logging, not both; choose one"
                .to_string(),
        );
    }
    if rank_count < 2 {
        return Err(
            "--msglog needs at least 2 ranks: a job of one has no peer to replay its messages"
                .to_string(),
        );
    }
    if failure_policy == Some(FailurePolicy::Abort) {
        return Err(
            "--msglog with failure policy abort: message logging restarts the failed rank, \
             so the job must outlive the death (--msglog sets continue itself)"
                .to_string(),
        );
    }
    Ok(())
}

/// The variable that mirrors `--replica-masking`.
pub const REPLICA_MASKING_VARIABLE: &str = "RESMPI_REPLICA_MASKING";

/// Most replicas of one rank `--replicas` accepts: the interceptor's
/// bound on the copies of one send (`resmpi_ft::SEND_TARGETS_MAX`).
pub const REPLICAS_MAX: u32 = 8;

/// The variable that tells every process how many replicas each rank has;
/// the library builds MPI_COMM_WORLD from it.
pub const REPLICAS_VARIABLE: &str = "RESMPI_REPLICAS";

/// What of issue 12 is not built yet refuses to start, rather than run a
/// job that looks protected and is not: going on after a death (the crash
/// masking of the parallel protocol) and re-join. (Replicas on several
/// hosts are placed by `Placement::replicated`.)
fn check_replication_supported(
    failure_policy: FailurePolicy,
    respawn_count_max: u32,
) -> Result<(), String> {
    if failure_policy == FailurePolicy::Continue {
        return Err(
            "--replicas with failure policy continue: a replicated job handles \
             a death itself (the dead process's replica is given up and the job goes on \
             with the others); per-process substitution is not built yet (issue 12)"
                .to_string(),
        );
    }
    if respawn_count_max > 0 {
        return Err(
            "--replicas with --respawn: recovery of a lost replica is not built yet (issue 12)"
                .to_string(),
        );
    }
    Ok(())
}

/// Usage text for `-h` / `--help`.
pub const USAGE: &str = "\
usage: mpiexec [options] program [arguments...]

Starts N copies of program, on this host or on the hosts given, connected by
a PMI-1 server.

options (each also as --name=value or -name value):
  -n N, -np N           number of ranks (default 1)
  -x VAR                pass VAR from this environment to every rank
  -x VAR=VALUE          set VAR to VALUE in every rank
  -genv VAR VALUE       set VAR to VALUE in every rank (also -env)
  --tag-output          prefix each output line with [rank] (also -l)
  --io-replication-factor R
                        MPI-IO files the job creates keep R copies of every
                        block (RESMPI_IO_REPLICATION_FACTOR)
  --io-replica-targets DIR1,DIR2,...
                        directories for copies 2..R (RESMPI_IO_REPLICA_TARGETS)
  --timeout S           kill the job after S seconds and exit 124
  --paths auto|tcp      paths between ranks (sets RESMPI_PATHS)
  --eager-limit BYTES   largest eager message (sets RESMPI_EAGER_LIMIT)
  --hosts H1[:S],H2...  run on these hosts (S slots each, default 1)
  --hostfile F          hosts from F, one a line: host, host:S or host slots=S;
                        '#' starts a comment (also -f, --machinefile)
  -ppn N                N ranks per host per round (overrides slots)
  --universe-size N     MPI_UNIVERSE_SIZE (also -usize, RESMPI_UNIVERSE_SIZE;
                        N or SYSTEM); default: the larger of -n and the slots
  --launcher-exec PROG  start each remote host's proxy as 'PROG HOST MPIEXEC
                        --proxy' (default ssh)
  --control-addr ADDR   address proxies use to reach mpiexec (default:
                        this host's first non-loopback IPv4 address)
  --bind-to core|none   core: the i-th rank of a host runs only on the i-th
                        CPU mpiexec (or the proxy) may use, when the host
                        has a CPU for each of its ranks (else nothing is
                        bound); none (default): ranks go where the kernel
                        puts them. Also RESMPI_BIND_TO

fault tolerance (each sets a variable in every rank):
  --inject SPEC         inject network faults (RESMPI_INJECT), SPEC a comma
                        list of drop:RATE, corrupt:RATE, duplicate:RATE,
                        delay:MS, rail-down:RAIL@TIME[+DURATION], seed:N; an
                        item may end in @ranks=A-B (between ranks A and B,
                        A <= B, both in the job; RAIL must be one of the
                        job's rails);
                        and process faults: kill:RANK@TIME (SIGKILL RANK at
                        TIME after all ranks started), kill:RANK@sends=N
                        (the rank kills itself after its N-th send),
                        host-down:HOST@TIME (SIGKILL every rank on HOST)
  --checksum none|crc32c
                        checksum every fragment (RESMPI_CHECKSUM)
  --reliable on|off     sequence numbers, acks, retransmission
                        (RESMPI_RELIABLE)
  --rails tcp:R[,tcp:R...]
                        data rails to peers, R an interface name (eth1) or
                        an IPv4 subnet (10.77.1.0/24) (RESMPI_RAILS)
  --stripe round-robin|fragments|off
                        how traffic to a peer spreads over its rails
                        (RESMPI_STRIPE)
  --report-json FILE    write the end-of-job FT report to FILE as JSON
  --failure-policy abort|continue
                        when a rank dies before MPI_Finalize: end the job
                        (abort, the default) or go on without it (continue;
                        exit non-zero at the end). Also RESMPI_FAILURE_POLICY;
                        every rank gets RESMPI_FAILURE_POLICY=abort|continue
  -disable-auto-cleanup, --with-ft ulfm, --with-ft mpi
                        hydra's and Open MPI's ways to say continue
                        (--with-ft no: abort). Under
                        continue every line mpiexec prints about a death,
                        and the FT report, starts with 'WARNING: '
  --initial-errhandler mpi_errors_are_fatal|mpi_errors_abort|mpi_errors_return
                        the error handler MPI_COMM_WORLD and MPI_COMM_SELF
                        start with (MPI_INFO_ENV's mpi_initial_errhandler;
                        RESMPI_INITIAL_ERRHANDLER)
  --replicas R          start R processes (replicas) of every rank, R = 1 to 8;
                        MPI_COMM_WORLD still has N ranks; each
                        process gets RESMPI_REPLICA=K (0..R-1) and
                        RESMPI_REPLICAS=R. Each output line is shown once,
                        from replica 0 until it is given up. A death gives
                        up that replica of every rank and the job goes on
                        with the others; it fails when none is left.
                        With --hosts, replica K of every rank runs on the
                        K-th of R host groups (docs/user-guide.md, Replicas)
  --replica-masking replica|process
                        what a replica's death costs (RESMPI_REPLICA_MASKING):
                        replica (default) gives up that replica of every
                        rank; process loses only the dead process: the
                        processes run lib/replication/libmpi.so (the
                        replication protocol), a surviving replica of its
                        rank takes over its messages, and the job fails
                        only when a rank has no live replica
  --sdc report|abort|vote
                        under --replica-masking process, what a divergence
                        between the replicas of a rank does (every ack
                        carries the CRC32C of the payload received; RESMPI_SDC):
                        report (default) names it in the FT report, abort
                        ends the job with an error naming it, vote (R >= 3)
                        has the replica a majority contradicts leave the
                        job, and its death is masked
  --replica-recovery now|off
                        under --replica-masking process, whether the
                        substitute of a dead replica forks a new one, which
                        re-joins the job in its place (now, the default
                        where it applies: one host, no --replica-anysource
                        agree), or the rank goes on with fewer replicas
                        (off; RESMPI_REPLICA_RECOVERY)
  --replica-anysource free|agree
                        under --replica-masking process, how the replicas
                        of a rank match MPI_ANY_SOURCE receives
                        (RESMPI_REPLICA_ANYSOURCE): free (default) lets each
                        match on its own, right for send-deterministic
                        programs; agree makes the lowest live replica decide
                        each wildcard receive's source and the others follow
                        it, for programs whose sends depend on arrival order
                        (ANY_SOURCE probes and Waitany/Testsome choices are
                        not agreed on)
  --respawn N           test-only re-join policy (needs continue): a rank
                        that dies is started again on its host, up to N
                        times per rank, with RESMPI_INCARNATION=1, 2, ...; it
                        joins the running job and the others connect to it
  --msglog pessimistic  message logging (RESMPI_MSGLOG): the processes run
                        lib/msglog/libmpi.so; a rank that dies is started
                        again (3 times at most; --respawn N changes it) and
                        replays from MPI_Init against the others' sender
                        logs; what it prints again is not shown twice, and
                        the job ends as without the fault. Sets continue.
                        Determinants go to an event-logger process mpiexec
                        starts (and restarts), in --ckpt-dir's
                        determinants.log, else a job directory in $TMPDIR.
                        Not with --replicas or one rank
  --msglog optimistic   the same, but sends do not wait for the event
                        logger's acks (O2P): dependencies on determinants
                        not yet on disk are piggybacked on messages; a rank
                        left an orphan by a death (it depends on a
                        determinant the logger lost) ends the job with an
                        error, since rolling orphans back is not built
  --msglog-mem BYTES    bound of one process's message log in memory
                        (default 1G); past it the oldest payloads spill to disk
  --msglog-disk BYTES   bound of what one process spills (default 8G; 0: no
                        spilling, the log stops at --msglog-mem)
  --msglog-spill-dir DIR
                        where the spill files go (default $TMPDIR, else /tmp;
                        local disk; unlinked at once, nothing is left behind)
  --ckpt-dir DIR        where veloc.h's VELOC_Checkpoint writes each rank's
                        checkpoints (RESMPI_CKPT_DIR; before the cfg file's
                        persistent/scratch), with or without --msglog

  -h, --help            print this text
  --version             print the version

hosts: ranks fill each host's slots in the order given (-ppn N: N ranks
each), wrapping round to the first host when all are full; without -n the job
has as many ranks as slots. A host named localhost or this host's name runs
its ranks here with fork/exec. Every other host gets one proxy, started
through the launcher as 'PROG HOST MPIEXEC --proxy' (mpiexec must be at the
same path there, as must the program: a relative path is made absolute
first). The proxy reads a one-line bootstrap (the control address and a
per-job token) on its stdin, connects back to the control address over TCP,
starts the host's ranks as its children, carries their PMI, stdout and
stderr, reports each exit with its status, and signals or respawns a rank
when mpiexec says so; a remote death is judged like a local one. A proxy
that dies or loses its connection takes its ranks with it (they are counted
as killed by SIGKILL, which is what happens to them). Remote ranks get
/dev/null as stdin.
FT report: in MPI_Finalize each rank reports its fault-tolerance counters
(PMI key resmpi-report-RANK, value name=N;name=N...). At the end of the job,
failed or not, mpiexec sums them and prints one 'mpiexec: FT report:' line to
stderr when a counter is non-zero or an FT option was given; --report-json
writes it as JSON (ranks_reported, counters, exit_code) in any case.

Remote ranks get RESMPI_HOST_KEY=HOST, the RESMPI_* variables of mpiexec's
environment and those of -x/-genv through their proxy's connection, never on
a command line (the job secret included).

failure policy continue: a rank that is killed, or exits before
MPI_Finalize, is named on stderr ('rank R (host H) ... the job continues'),
every rank that sent cmd=resmpi_watch_failures on its PMI connection gets
'cmd=resmpi_failure rank=R incarnation=0', and mpiexec waits for the others.
MPI_Abort, a signal to mpiexec and --timeout still end the whole job.
With --respawn, the dead rank is started again: when its MPI_Init sends
'cmd=resmpi_rejoin incarnation=I address=A', every live watching rank gets
'cmd=resmpi_rejoin rank=R incarnation=I address=A' and connects to it. A
respawned death still counts as the first death for the exit status.

exit status: 0 on success; the first non-zero rank exit code (128+signal
for a rank killed by a signal; 1 for a rank that exited 0 before
MPI_Finalize under continue); N for MPI_Abort(N) (1 when N is 0); 124 on
timeout; 127 when the program cannot be run; 2 for a bad command line
(every option value is checked before any rank starts, against the job and
its hosts: the rails' interfaces or subnets on every host with ranks,
--control-addr, --report-json).
";

/// How an option takes its values.
enum Arity {
    Flag,
    One,
    Two,
}

/// The variable that mirrors `--universe-size`.
pub const UNIVERSE_SIZE_VARIABLE: &str = "RESMPI_UNIVERSE_SIZE";

/// `MPI_UNIVERSE_SIZE` (hydra's `-usize`): a number, or `SYSTEM` for the
/// slots the hosts offer; without one, the larger of `-n` and the slots.
/// Unlike hydra, which leaves the attribute unset without `-usize`, the
/// attribute is always set: the slots are known, and MPICH's spawn tests
/// read it to decide how many processes to start.
fn parse_universe_size(
    given: Option<String>,
    rank_count: u32,
    hosts: Option<&[HostSpec]>,
    ranks_per_host: Option<u32>,
) -> Result<u32, String> {
    let slots: u64 = match (hosts, ranks_per_host) {
        (None, _) => 0,
        (Some(hosts), Some(per_host)) => u64::from(per_host) * hosts.len() as u64,
        (Some(hosts), None) => hosts.iter().map(|host| u64::from(host.slots)).sum(),
    };
    let available = u64::from(rank_count)
        .max(slots)
        .min(u64::from(MAX_RANK_COUNT)) as u32;
    match given.as_deref() {
        None => Ok(available),
        Some(text) if text.eq_ignore_ascii_case("system") => Ok(available),
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|size| (1..=MAX_RANK_COUNT).contains(size))
            .ok_or_else(|| {
                format!(
                    "--universe-size '{text}': expected SYSTEM or a number from 1 to {MAX_RANK_COUNT}"
                )
            }),
    }
}

fn arity_of(name: &str) -> Option<Arity> {
    match name {
        "h" | "help" | "version" | "tag-output" | "l" | "prepend-rank" | "disable-auto-cleanup" => {
            Some(Arity::Flag)
        }
        "n" | "np" | "x" | "timeout" | "paths" | "eager-limit" | "hosts" | "host" | "hostfile"
        | "f" | "machinefile" | "ppn" | "launcher-exec" | "bootstrap-exec" | "control-addr"
        | "inject" | "checksum" | "reliable" | "rails" | "stripe" | "report-json"
        | "failure-policy" | "with-ft" | "respawn" | "bind-to" | "initial-errhandler"
        | "replicas" | "replica-masking" | "replica-anysource" | "replica-recovery" | "sdc"
        | "msglog" | "msglog-mem" | "msglog-disk" | "msglog-spill-dir" | "ckpt-dir"
        | "universe-size" | "usize" => Some(Arity::One),
        "io-replication-factor" | "io-replica-targets" => Some(Arity::One),
        "genv" | "env" => Some(Arity::Two),
        _ => None,
    }
}

fn check_variable_name(name: &str, option: &str) -> Result<(), String> {
    let mut characters = name.chars();
    let valid = matches!(characters.next(), Some(first) if first == '_' || first.is_ascii_alphabetic())
        && characters.all(|character| character == '_' || character.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{option}: '{name}' is not a valid environment variable name"
        ))
    }
}

/// `value` must be one of `choices`.
fn check_choice(option: &str, value: &str, choices: &[&str]) -> Result<(), String> {
    if choices.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{option} '{value}': expected {}",
            choices.join(" or ")
        ))
    }
}

/// `abort` or `continue`, from `source` (an option or the variable).
/// `--bind-to` / `RESMPI_BIND_TO`: `core` or `none` (hydra's and Open
/// MPI's names; `hwthread` is taken as `core`, since resmpi binds one CPU
/// of the launcher's affinity mask per rank either way).
fn parse_bind_to(text: &str, source: &str) -> Result<&'static str, String> {
    match text {
        "core" | "cores" | "hwthread" | "hwthreads" => Ok("core"),
        "none" => Ok("none"),
        _ => Err(format!("{source} '{text}': expected core or none")),
    }
}

/// The variable that mirrors `--sdc`.
pub const SDC_VARIABLE: &str = "RESMPI_SDC";

/// `--sdc`'s value: `report`, `abort` or `vote`.
fn parse_sdc(text: &str) -> Result<&'static str, String> {
    match text {
        "report" => Ok("report"),
        "abort" => Ok("abort"),
        "vote" => Ok("vote"),
        other => Err(format!("--sdc '{other}': expected report, abort or vote")),
    }
}

/// The variable that mirrors `--replica-recovery`.
pub const REPLICA_RECOVERY_VARIABLE: &str = "RESMPI_REPLICA_RECOVERY";

/// `--replica-recovery`'s value (`source` names the option or the
/// variable): whether lost replicas are recovered.
fn parse_replica_recovery(text: &str, source: &str) -> Result<bool, String> {
    match text {
        "now" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{source} '{other}': expected now or off")),
    }
}

/// The variable that mirrors `--replica-anysource`.
pub const REPLICA_ANYSOURCE_VARIABLE: &str = "RESMPI_REPLICA_ANYSOURCE";

/// `--replica-anysource`'s value (`source` names the option or the
/// variable): `free` or `agree`.
fn parse_replica_anysource(text: &str, source: &str) -> Result<&'static str, String> {
    match text {
        "free" => Ok("free"),
        "agree" => Ok("agree"),
        other => Err(format!("{source} '{other}': expected free or agree")),
    }
}

fn parse_replica_masking(text: &str) -> Result<ReplicaMasking, String> {
    match text {
        "replica" => Ok(ReplicaMasking::Replica),
        "process" => Ok(ReplicaMasking::Process),
        other => Err(format!(
            "--replica-masking '{other}': expected replica or process"
        )),
    }
}

fn parse_failure_policy(text: &str, source: &str) -> Result<FailurePolicy, String> {
    check_choice(source, text, &["abort", "continue"])?;
    Ok(if text == "continue" {
        FailurePolicy::Continue
    } else {
        FailurePolicy::Abort
    })
}

/// Longest network interface name Linux accepts (`IFNAMSIZ` - 1).
const INTERFACE_NAME_MAX_BYTES: usize = 15;

/// Checks `--rails`: a comma list of `tcp:IFACE` or `tcp:A.B.C.D/PREFIX`.
fn check_rails(text: &str) -> Result<(), String> {
    let expected = "expected tcp:IFACE or tcp:A.B.C.D/PREFIX (e.g. tcp:eth1,tcp:10.77.1.0/24)";
    for (index, raw) in text.split(',').enumerate() {
        let item = raw.trim();
        let problem =
            |reason: String| format!("--rails item {} '{item}': {reason}; {expected}", index + 1);
        let Some(target) = item.strip_prefix("tcp:") else {
            return Err(problem(if item.is_empty() {
                "empty item".to_string()
            } else {
                "unknown kind of rail (only tcp: is supported)".to_string()
            }));
        };
        if let Some((address, prefix)) = target.split_once('/') {
            address
                .parse::<Ipv4Addr>()
                .map_err(|_| problem(format!("'{address}' is not an IPv4 address")))?;
            let valid_prefix = !prefix.is_empty()
                && prefix.len() <= 2
                && prefix.chars().all(|c| c.is_ascii_digit())
                && prefix.parse::<u8>().is_ok_and(|length| length <= 32);
            if !valid_prefix {
                return Err(problem(format!(
                    "'{prefix}' is not a prefix length from 0 to 32"
                )));
            }
        } else if target.parse::<Ipv4Addr>().is_ok() {
            return Err(problem(format!(
                "an address needs a prefix length ('{target}/24', say)"
            )));
        } else {
            let valid_name = !target.is_empty()
                && target.len() <= INTERFACE_NAME_MAX_BYTES
                && target != "."
                && target != ".."
                && target
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.@:".contains(c));
            if !valid_name {
                return Err(problem(format!(
                    "'{target}' is not an interface name (1 to {INTERFACE_NAME_MAX_BYTES} letters, digits, '-', '_', '.', '@', ':')"
                )));
            }
        }
    }
    Ok(())
}

/// How many rails the ranks will have: the items of the `RESMPI_RAILS`
/// they get (the last `--rails`, `-x` or `-genv`, else mpiexec's own
/// environment), or the one default rail.
fn rail_count(environment: &[(String, String)], lookup: &impl Fn(&str) -> Option<String>) -> u32 {
    let rails = environment
        .iter()
        .rev()
        .find(|(name, _)| name == "RESMPI_RAILS")
        .map(|(_, value)| value.clone())
        .or_else(|| lookup("RESMPI_RAILS"));
    match rails {
        Some(text) if !text.trim().is_empty() => text.split(',').count() as u32,
        _ => 1,
    }
}

/// The frame faults of `--inject` must fit the job: a `@ranks=` filter
/// naming a rank the job does not have, or a `rail-down:` of a rail it
/// does not have, would inject nothing and the run would look like a
/// passed fault test.
fn check_frame_rules(rules: &[FaultRule], rank_count: u32, rail_count: u32) -> Result<(), String> {
    for rule in rules {
        if let Some(pair) = rule.ranks {
            let highest = pair.first.max(pair.second);
            if highest >= rank_count {
                return Err(format!(
                    "--inject item `{rule}`: rank {highest} is not in this job of {rank_count} ranks"
                ));
            }
        }
        if let Fault::RailDown { rail, .. } = rule.fault {
            if rail >= rail_count {
                return Err(format!(
                    "--inject item `{rule}`: rail {rail} does not exist: the job has {rail_count} \
                     rail{} (0 to {}; --rails gives more)",
                    if rail_count == 1 { "" } else { "s" },
                    rail_count - 1
                ));
            }
        }
    }
    Ok(())
}

/// Parses the arguments after the program name. `lookup` reads this
/// process's environment (for `-x VAR`).
pub fn parse(
    arguments: &[String],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Request, String> {
    let mut rank_count = None;
    let mut hosts = None;
    let mut ranks_per_host = None;
    let mut launcher_exec = "ssh".to_string();
    let mut control_address = None;
    let mut environment = Vec::new();
    let mut tag_output = false;
    let mut timeout_seconds = None;
    let mut ft_options_given = false;
    let mut report_json = None;
    let mut failure_policy = None;
    let mut process_faults = Vec::new();
    let mut frame_rules: Vec<FaultRule> = Vec::new();
    let mut respawn_count_max = 0;
    let mut replica_count = 1;
    let mut replica_masking = None;
    let mut sdc = None;
    let mut replica_anysource = None;
    let mut replica_recovery = None;
    let mut msglog = None;
    let mut msglog_bytes_max = None;
    let mut msglog_disk_bytes_max = None;
    let mut msglog_spill_dir = None;
    let mut checkpoint_directory = None;
    let mut universe_size: Option<String> = None;
    let mut index = 0;
    while index < arguments.len() {
        let word = &arguments[index];
        if word == "--" {
            index += 1;
            break;
        }
        if !word.starts_with('-') || word == "-" {
            break;
        }
        let stripped = word.strip_prefix("--").unwrap_or(&word[1..]);
        let (name, inline_value) = match stripped.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (stripped, None),
        };
        let arity = arity_of(name)
            .ok_or_else(|| format!("unknown option '{word}' (see mpiexec --help)"))?;
        index += 1;
        let mut take_value = |what: &str| -> Result<String, String> {
            let value = arguments
                .get(index)
                .cloned()
                .ok_or_else(|| format!("option '-{name}' needs {what}"))?;
            index += 1;
            Ok(value)
        };
        let values: Vec<String> = match (arity, inline_value) {
            (Arity::Flag, None) => Vec::new(),
            (Arity::Flag, Some(_)) => return Err(format!("option '-{name}' takes no value")),
            (Arity::One, Some(value)) => vec![value],
            (Arity::One, None) => vec![take_value("a value")?],
            (Arity::Two, Some(value)) => match value.split_once('=') {
                Some((variable, text)) => vec![variable.to_string(), text.to_string()],
                None => vec![value, take_value("a variable name and a value")?],
            },
            (Arity::Two, None) => vec![
                take_value("a variable name and a value")?,
                take_value("a variable name and a value")?,
            ],
        };
        match name {
            "h" | "help" => return Ok(Request::Help),
            "version" => return Ok(Request::Version),
            "tag-output" | "l" | "prepend-rank" => tag_output = true,
            "n" | "np" => {
                let count = values[0]
                    .parse::<u32>()
                    .ok()
                    .filter(|count| (1..=MAX_RANK_COUNT).contains(count))
                    .ok_or_else(|| {
                        format!(
                            "-{name} '{}': the number of ranks must be 1 to {MAX_RANK_COUNT}",
                            values[0]
                        )
                    })?;
                rank_count = Some(count);
            }
            "x" => {
                let (variable, value) = match values[0].split_once('=') {
                    Some((variable, value)) => (variable.to_string(), value.to_string()),
                    None => {
                        let value = lookup(&values[0]).ok_or_else(|| {
                            format!("-x {0}: {0} is not set in mpiexec's environment", values[0])
                        })?;
                        (values[0].clone(), value)
                    }
                };
                check_variable_name(&variable, "-x")?;
                environment.push((variable, value));
            }
            "genv" | "env" => {
                check_variable_name(&values[0], "-genv")?;
                environment.push((values[0].clone(), values[1].clone()));
            }
            "io-replication-factor" => {
                values[0]
                    .parse::<u32>()
                    .ok()
                    .filter(|factor| (1..=16).contains(factor))
                    .ok_or_else(|| {
                        format!(
                            "--io-replication-factor '{}': expected a whole number from 1 to 16",
                            values[0]
                        )
                    })?;
                environment.push(("RESMPI_IO_REPLICATION_FACTOR".into(), values[0].clone()));
            }
            "io-replica-targets" => {
                // Absolute here, so every rank names the same directories.
                let directory = std::env::current_dir().unwrap_or_default();
                let targets: Vec<String> = values[0]
                    .split(',')
                    .filter(|target| !target.is_empty())
                    .map(|target| directory.join(target).display().to_string())
                    .collect();
                environment.push(("RESMPI_IO_REPLICA_TARGETS".into(), targets.join(",")));
            }
            "timeout" => {
                let seconds = values[0]
                    .parse::<u64>()
                    .ok()
                    .filter(|&seconds| seconds > 0)
                    .ok_or_else(|| {
                        format!(
                            "--timeout '{}': expected a positive whole number of seconds",
                            values[0]
                        )
                    })?;
                timeout_seconds = Some(seconds);
            }
            "bind-to" => {
                let policy = parse_bind_to(&values[0], "--bind-to")?;
                environment.push((BIND_TO_VARIABLE.to_string(), policy.to_string()));
            }
            "paths" => {
                if values[0] != "auto" && values[0] != "tcp" {
                    return Err(format!("--paths '{}': expected auto or tcp", values[0]));
                }
                environment.push(("RESMPI_PATHS".to_string(), values[0].clone()));
            }
            "eager-limit" => {
                parse_byte_count(&values[0])
                    .map_err(|problem| format!("--eager-limit '{}': {problem}", values[0]))?;
                environment.push(("RESMPI_EAGER_LIMIT".to_string(), values[0].clone()));
            }
            "hosts" | "host" => hosts = Some(parse_host_list(&values[0])?),
            "hostfile" | "f" | "machinefile" => {
                let text = std::fs::read_to_string(&values[0])
                    .map_err(|error| format!("--hostfile '{}': {error}", values[0]))?;
                hosts = Some(parse_hostfile(&text, &values[0])?);
            }
            "ppn" => {
                ranks_per_host = Some(
                    values[0]
                        .parse::<u32>()
                        .ok()
                        .filter(|count| (1..=MAX_RANK_COUNT).contains(count))
                        .ok_or_else(|| {
                            format!(
                                "-ppn '{}': ranks per host must be 1 to {MAX_RANK_COUNT}",
                                values[0]
                            )
                        })?,
                );
            }
            "launcher-exec" | "bootstrap-exec" => {
                if values[0].is_empty() {
                    return Err(format!("-{name}: empty program name"));
                }
                launcher_exec = values[0].clone();
            }
            "control-addr" => {
                if values[0].is_empty() || values[0].contains(char::is_whitespace) {
                    return Err(format!("--control-addr '{}': not an address", values[0]));
                }
                control_address = Some(values[0].clone());
            }
            "inject" => {
                let spec: FaultSpec = values[0].parse().map_err(|error| format!("{error}"))?;
                environment.push(("RESMPI_INJECT".to_string(), spec.to_string()));
                process_faults = spec.processes;
                frame_rules = spec.rules;
                ft_options_given = true;
            }
            "checksum" => {
                check_choice("--checksum", &values[0], &["none", "crc32c"])?;
                environment.push(("RESMPI_CHECKSUM".to_string(), values[0].clone()));
                ft_options_given = true;
            }
            "reliable" => {
                check_choice("--reliable", &values[0], &["on", "off"])?;
                environment.push(("RESMPI_RELIABLE".to_string(), values[0].clone()));
                ft_options_given = true;
            }
            "rails" => {
                check_rails(&values[0])?;
                environment.push(("RESMPI_RAILS".to_string(), values[0].clone()));
                ft_options_given = true;
            }
            "stripe" => {
                check_choice("--stripe", &values[0], &["round-robin", "fragments", "off"])?;
                environment.push(("RESMPI_STRIPE".to_string(), values[0].clone()));
            }
            "report-json" => {
                if values[0].is_empty() {
                    return Err("--report-json: empty file name".to_string());
                }
                report_json = Some(PathBuf::from(&values[0]));
            }
            "failure-policy" => {
                failure_policy = Some(parse_failure_policy(&values[0], "--failure-policy")?)
            }
            "disable-auto-cleanup" => failure_policy = Some(FailurePolicy::Continue),
            "replicas" => {
                replica_count = values[0]
                    .parse::<u32>()
                    .ok()
                    .filter(|count| (1..=REPLICAS_MAX).contains(count))
                    .ok_or_else(|| {
                        format!(
                            "--replicas '{}': expected a number of replicas from 1 to {REPLICAS_MAX}",
                            values[0]
                        )
                    })?;
            }
            "replica-masking" => replica_masking = Some(parse_replica_masking(&values[0])?),
            "sdc" => sdc = Some(parse_sdc(&values[0])?),
            "replica-recovery" => {
                replica_recovery = Some(parse_replica_recovery(&values[0], "--replica-recovery")?)
            }
            "replica-anysource" => {
                replica_anysource =
                    Some(parse_replica_anysource(&values[0], "--replica-anysource")?)
            }
            "msglog" => msglog = Some(values[0].clone()),
            "msglog-mem" => {
                msglog_bytes_max = Some(
                    parse_byte_count(&values[0])
                        .map_err(|problem| format!("--msglog-mem '{}': {problem}", values[0]))?,
                )
            }
            "msglog-disk" => {
                msglog_disk_bytes_max = Some(
                    parse_byte_count(&values[0])
                        .map_err(|problem| format!("--msglog-disk '{}': {problem}", values[0]))?,
                )
            }
            "msglog-spill-dir" => {
                if values[0].is_empty() {
                    return Err("--msglog-spill-dir: empty directory name".to_string());
                }
                msglog_spill_dir = Some(values[0].clone())
            }
            "ckpt-dir" => {
                if values[0].is_empty() {
                    return Err("--ckpt-dir: empty directory name".to_string());
                }
                checkpoint_directory = Some(values[0].clone())
            }
            "universe-size" | "usize" => universe_size = Some(values[0].clone()),
            "respawn" => {
                respawn_count_max = values[0].parse::<u32>().map_err(|_| {
                    format!(
                        "--respawn '{}': expected how many times a rank may be started again",
                        values[0]
                    )
                })?
            }
            "initial-errhandler" => {
                let name = values[0].to_ascii_lowercase();
                check_choice("--initial-errhandler", &name, &INITIAL_ERRHANDLERS)?;
                environment.push((INITIAL_ERRHANDLER_VARIABLE.to_string(), name));
            }
            "with-ft" => {
                check_choice("--with-ft", &values[0], &["ulfm", "mpi", "no"])?;
                // Open MPI's `--with-ft no`: a death ends the job.
                failure_policy = Some(if values[0] == "no" {
                    FailurePolicy::Abort
                } else {
                    FailurePolicy::Continue
                });
            }
            _ => unreachable!("every name with an arity is handled"),
        }
    }
    let program = arguments
        .get(index)
        .cloned()
        .ok_or_else(|| "no program given (see mpiexec --help)".to_string())?;
    let rank_count = match (rank_count, &hosts) {
        (Some(count), _) => count,
        (None, None) => 1,
        (None, Some(hosts)) => {
            let slots: u64 = match ranks_per_host {
                Some(per_host) => u64::from(per_host) * hosts.len() as u64,
                None => hosts.iter().map(|host| u64::from(host.slots)).sum(),
            };
            // Under --replicas the slots hold every replica of every rank.
            let total = (slots / u64::from(replica_count.max(1))).max(1);
            u32::try_from(total)
                .ok()
                .filter(|&count| count <= MAX_RANK_COUNT)
                .ok_or_else(|| {
                    format!(
                        "the hosts have {total} slots, more than {MAX_RANK_COUNT} ranks: give -n"
                    )
                })?
        }
    };
    let universe_size = parse_universe_size(
        universe_size.or_else(|| lookup(UNIVERSE_SIZE_VARIABLE)),
        rank_count,
        hosts.as_deref(),
        ranks_per_host,
    )?;
    let msglog_mode = match msglog.or_else(|| lookup(MSGLOG_VARIABLE)) {
        Some(text) => parse_msglog(&text)?,
        None => None,
    };
    let msglog = msglog_mode.is_some();
    let msglog_optimistic = msglog_mode == Some("optimistic");
    if msglog {
        check_msglog_supported(replica_count, rank_count, failure_policy)?;
        // Restart and replay is what the mode is: the job outlives a
        // death, and the dead rank is started again (a bounded number of
        // times, unless --respawn says how many).
        failure_policy = Some(FailurePolicy::Continue);
        if respawn_count_max == 0 {
            respawn_count_max = MSGLOG_RESTARTS_PER_RANK;
        }
        let mode = msglog_mode.unwrap_or("pessimistic");
        environment.push((MSGLOG_VARIABLE.to_string(), mode.to_string()));
        if let Some(bytes) = msglog_bytes_max {
            environment.push(("RESMPI_MSGLOG_MEM".to_string(), bytes.to_string()));
        }
        if let Some(bytes) = msglog_disk_bytes_max {
            environment.push(("RESMPI_MSGLOG_DISK".to_string(), bytes.to_string()));
        }
        if let Some(directory) = &msglog_spill_dir {
            environment.push(("RESMPI_MSGLOG_SPILL_DIR".to_string(), directory.clone()));
        }
    } else if msglog_bytes_max.is_some() {
        return Err("--msglog-mem needs --msglog pessimistic".to_string());
    } else if msglog_disk_bytes_max.is_some() {
        return Err("--msglog-disk needs --msglog pessimistic".to_string());
    } else if msglog_spill_dir.is_some() {
        return Err("--msglog-spill-dir needs --msglog pessimistic".to_string());
    }
    // VeloC's checkpoints (veloc.h) go there, with or without logging: a
    // whole-job restart from checkpoints needs no --msglog.
    if let Some(directory) = &checkpoint_directory {
        environment.push(("RESMPI_CKPT_DIR".to_string(), directory.clone()));
    }
    let failure_policy = match failure_policy {
        Some(policy) => policy,
        None => match lookup(FAILURE_POLICY_VARIABLE) {
            Some(text) => parse_failure_policy(&text, FAILURE_POLICY_VARIABLE)?,
            None => FailurePolicy::Abort,
        },
    };
    // `RESMPI_BIND_TO` in mpiexec's environment is checked here, so a typo
    // fails the launch instead of silently binding (or not).
    if !environment.iter().any(|(name, _)| name == BIND_TO_VARIABLE) {
        if let Some(text) = lookup(BIND_TO_VARIABLE) {
            let policy = parse_bind_to(&text, BIND_TO_VARIABLE)?;
            environment.push((BIND_TO_VARIABLE.to_string(), policy.to_string()));
        }
    }
    for fault in &process_faults {
        let ProcessFault::Kill { target, .. } = fault else {
            continue;
        };
        if target.rank >= rank_count {
            return Err(format!(
                "--inject item `{fault}`: rank {} is not in this job of {rank_count} ranks",
                target.rank
            ));
        }
        if target.replica >= replica_count {
            return Err(if replica_count == 1 {
                format!(
                    "--inject item `{fault}`: replica {}: no replicas in this job",
                    target.replica
                )
            } else {
                format!(
                    "--inject item `{fault}`: replica {} is not in this job of {replica_count} replicas per rank",
                    target.replica
                )
            });
        }
    }
    check_frame_rules(&frame_rules, rank_count, rail_count(&environment, &lookup))?;
    if respawn_count_max > 0 && failure_policy != FailurePolicy::Continue {
        return Err(
            "--respawn needs --failure-policy continue (the job must outlive the death)"
                .to_string(),
        );
    }
    let replica_masking = match replica_masking {
        Some(masking) => masking,
        None => match lookup(REPLICA_MASKING_VARIABLE) {
            Some(text) => parse_replica_masking(&text)?,
            None => ReplicaMasking::Replica,
        },
    };
    if let Some(sdc) = sdc {
        if replica_count < 2 || replica_masking != ReplicaMasking::Process {
            return Err(format!(
                "--sdc {sdc}: divergence between replicas is found by the replication \
                 protocol's acks: it needs --replicas R (R >= 2) --replica-masking process"
            ));
        }
        if sdc == "vote" && replica_count < 3 {
            return Err(format!(
                "--sdc vote: a vote needs a majority, so at least 3 replicas \
                 (--replicas {replica_count}); use report or abort"
            ));
        }
        environment.push((SDC_VARIABLE.to_string(), sdc.to_string()));
    }
    let replica_anysource = match replica_anysource {
        Some(choice) => Some(choice),
        None => lookup(REPLICA_ANYSOURCE_VARIABLE)
            .map(|text| parse_replica_anysource(&text, REPLICA_ANYSOURCE_VARIABLE))
            .transpose()?,
    };
    if replica_anysource == Some("agree") {
        // Under `--replica-masking replica` the replicas never talk, so
        // they cannot agree on anything: refused rather than implied, since
        // process masking changes what a death costs.
        if replica_count < 2 || replica_masking != ReplicaMasking::Process {
            return Err(
                "--replica-anysource agree: the replicas of a rank agree on wildcard \
                        matches through the replication protocol's frames: it needs \
                        --replicas R (R >= 2) --replica-masking process"
                    .to_string(),
            );
        }
    }
    let replica_recovery = match replica_recovery {
        Some(choice) => Some(choice),
        None => lookup(REPLICA_RECOVERY_VARIABLE)
            .map(|text| parse_replica_recovery(&text, REPLICA_RECOVERY_VARIABLE))
            .transpose()?,
    };
    // The default: `now` wherever it can be honoured (process masking, one
    // host, no wildcard agreement); asked for explicitly, it must be.
    let replica_recovery = replica_recovery.unwrap_or(
        replica_count >= 2
            && replica_masking == ReplicaMasking::Process
            && replica_anysource != Some("agree")
            && hosts.is_none(),
    );
    if replica_recovery {
        if replica_count < 2 || replica_masking != ReplicaMasking::Process {
            return Err(
                "--replica-recovery now: a new replica is forked by the substitute \
                        of the dead one, which the replication protocol elects: it needs \
                        --replicas R (R >= 2) --replica-masking process"
                    .to_string(),
            );
        }
        if replica_anysource == Some("agree") {
            return Err(
                "--replica-recovery now with --replica-anysource agree is not \
                        supported yet (a forked replica would take its forker's place in the \
                        agreement)"
                    .to_string(),
            );
        }
        if hosts.is_some() {
            return Err(
                "--replica-recovery now: only on one host so far (a forked process \
                        is adopted by mpiexec itself, not by a host's proxy); run without \
                        --hosts, or with --replica-recovery off"
                    .to_string(),
            );
        }
        environment.push((REPLICA_RECOVERY_VARIABLE.to_string(), "now".to_string()));
    }
    if let Some(choice) = replica_anysource {
        environment.push((REPLICA_ANYSOURCE_VARIABLE.to_string(), choice.to_string()));
    }
    if replica_count > 1 {
        check_replication_supported(failure_policy, respawn_count_max)?;
        environment.push((
            REPLICA_MASKING_VARIABLE.to_string(),
            replica_masking.name().to_string(),
        ));
        if u64::from(rank_count) * u64::from(replica_count) > u64::from(MAX_RANK_COUNT) {
            return Err(format!(
                "--replicas {replica_count} -n {rank_count}: more than {MAX_RANK_COUNT} processes"
            ));
        }
        environment.push((REPLICAS_VARIABLE.to_string(), replica_count.to_string()));
    }
    // Going on after a death is a fault-tolerance mode: report what it cost.
    let ft_options_given = ft_options_given || failure_policy == FailurePolicy::Continue;
    Ok(Request::Run(Box::new(Options {
        rank_count,
        failure_policy,
        process_faults,
        respawn_count_max,
        replica_count,
        replica_masking,
        replica_recovery,
        msglog,
        msglog_optimistic,
        hosts,
        ranks_per_host,
        launcher_exec,
        control_address,
        ft_options_given,
        report_json,
        environment,
        tag_output,
        timeout_seconds,
        universe_size,
        program,
        arguments: arguments[index + 1..].to_vec(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    fn run(text: &str) -> Options {
        match parse(&words(text), |name| {
            (name == "HOME").then(|| "/home/me".to_string())
        }) {
            Ok(Request::Run(options)) => *options,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn error(text: &str) -> String {
        parse(&words(text), |_| None).unwrap_err()
    }

    #[test]
    fn program_and_its_arguments_end_option_parsing() {
        let options = run("-n 4 ./prog -n 2 --tag-output");
        assert_eq!(options.rank_count, 4);
        assert_eq!(options.program, "./prog");
        assert_eq!(options.arguments, words("-n 2 --tag-output"));
        assert!(!options.tag_output);
        let options = run("-- -weird-name a");
        assert_eq!(options.program, "-weird-name");
    }

    #[test]
    fn universe_size_is_the_n_count_unless_slots_or_the_option_say_more() {
        assert_eq!(run("-n 2 p").universe_size, 2);
        assert_eq!(run("-n 2 --universe-size 7 p").universe_size, 7);
        assert_eq!(run("-n 2 -usize 5 p").universe_size, 5);
        assert_eq!(run("-n 2 -usize SYSTEM p").universe_size, 2);
        assert_eq!(run("-n 2 --hosts a:3,b:2 p").universe_size, 5);
        assert_eq!(run("-n 9 --hosts a:3,b:2 p").universe_size, 9);
        assert_eq!(run("-n 2 -ppn 4 --hosts a,b p").universe_size, 8);
        let from_variable = parse(&words("-n 2 p"), |name| {
            (name == UNIVERSE_SIZE_VARIABLE).then(|| "6".to_string())
        });
        match from_variable {
            Ok(Request::Run(options)) => assert_eq!(options.universe_size, 6),
            other => panic!("{other:?}"),
        }
        assert!(error("-n 2 -usize 0 p").contains("--universe-size"));
        assert!(error("-n 2 -usize many p").contains("--universe-size"));
    }

    #[test]
    fn every_option_accepts_all_four_spellings() {
        for text in [
            "-n 3 p", "--n 3 p", "-n=3 p", "--n=3 p", "-np 3 p", "--np=3 p",
        ] {
            assert_eq!(run(text).rank_count, 3, "{text}");
        }
        for text in ["--timeout 5 p", "-timeout=5 p", "--timeout=5 p"] {
            assert_eq!(run(text).timeout_seconds, Some(5), "{text}");
        }
    }

    #[test]
    fn defaults_are_one_rank_untagged_no_timeout() {
        let options = run("hostname");
        assert_eq!(options.rank_count, 1);
        assert!(!options.tag_output);
        assert_eq!(options.timeout_seconds, None);
        assert!(options.environment.is_empty());
    }

    #[test]
    fn io_replication_options_set_the_mpi_io_defaults() {
        let options = run("--io-replication-factor 3 --io-replica-targets /a,/b p");
        assert_eq!(
            options.environment,
            vec![
                ("RESMPI_IO_REPLICATION_FACTOR".to_string(), "3".to_string()),
                ("RESMPI_IO_REPLICA_TARGETS".to_string(), "/a,/b".to_string()),
            ]
        );
        assert!(error("--io-replication-factor 0 p").contains("1 to 16"));
    }

    #[test]
    fn environment_options_keep_command_line_order() {
        let options = run(
            "-x HOME -x A=1 -genv B 2 --env=C=3 -env D 4 --paths tcp --eager-limit=64K --tag-output p",
        );
        let expected: Vec<(String, String)> = [
            ("HOME", "/home/me"),
            ("A", "1"),
            ("B", "2"),
            ("C", "3"),
            ("D", "4"),
            ("RESMPI_PATHS", "tcp"),
            ("RESMPI_EAGER_LIMIT", "64K"),
        ]
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        assert_eq!(options.environment, expected);
        assert!(options.tag_output);
    }

    #[test]
    fn help_and_version_win_wherever_they_appear() {
        assert_eq!(parse(&words("-n 2 --help"), |_| None), Ok(Request::Help));
        assert_eq!(parse(&words("-h"), |_| None), Ok(Request::Help));
        assert_eq!(parse(&words("--version"), |_| None), Ok(Request::Version));
    }

    #[test]
    fn host_options_are_parsed_and_size_the_job() {
        let options = run("--hosts a,b:3 p");
        assert_eq!(options.rank_count, 4);
        assert_eq!(options.launcher_exec, "ssh");
        assert_eq!(options.control_address, None);
        let hosts = options.hosts.unwrap();
        assert_eq!((hosts[1].name.as_str(), hosts[1].slots), ("b", 3));
        let options = run("-hosts=a,b,c -ppn 2 --launcher-exec ./nx --control-addr 10.0.0.1 p");
        assert_eq!(options.rank_count, 6);
        assert_eq!(options.ranks_per_host, Some(2));
        assert_eq!(options.launcher_exec, "./nx");
        assert_eq!(options.control_address.as_deref(), Some("10.0.0.1"));
        assert_eq!(run("--hosts a,b -n 3 p").rank_count, 3);
        assert_eq!(run("-n 3 --hosts a,b p").rank_count, 3);
    }

    #[test]
    fn hostfile_is_read_and_errors_name_the_line() {
        let directory =
            std::env::temp_dir().join(format!("resmpi-hostfile-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let good = directory.join("good");
        std::fs::write(&good, "# two hosts\nx:2\ny slots=3 # comment\n").unwrap();
        let options = run(&format!("--hostfile {} p", good.display()));
        assert_eq!(options.rank_count, 5);
        assert_eq!(options.hosts.unwrap().len(), 2);
        let bad = directory.join("bad");
        std::fs::write(&bad, "x\ny cores=2\n").unwrap();
        let message = error(&format!("-f {} p", bad.display()));
        assert!(message.contains("bad:2"), "{message}");
        assert!(error("--hostfile /nonexistent/hosts p").contains("/nonexistent/hosts"));
        std::fs::remove_dir_all(&directory).unwrap();
    }

    fn variable(options: &Options, name: &str) -> Option<String> {
        crate::spawn::environment_value(&options.environment, name).map(str::to_string)
    }

    #[test]
    fn msglog_optimistic_reaches_the_ranks_and_sets_what_pessimistic_does() {
        let options = run("-n 2 --msglog optimistic p");
        assert!(options.msglog && options.msglog_optimistic);
        assert_eq!(
            variable(&options, "RESMPI_MSGLOG").as_deref(),
            Some("optimistic")
        );
        let options = run("-n 2 --msglog pessimistic p");
        assert!(options.msglog && !options.msglog_optimistic);
        assert_eq!(
            variable(&options, "RESMPI_MSGLOG").as_deref(),
            Some("pessimistic")
        );
        assert!(error("-n 2 --msglog optimist p").contains("--msglog 'optimist'"));
    }

    #[test]
    fn ckpt_dir_reaches_the_ranks_with_or_without_msglog() {
        // veloc.h's checkpoints need no message logging: a whole-job
        // restart reads them back.
        let options = run("-n 2 --ckpt-dir /scratch/ck p");
        assert_eq!(
            variable(&options, "RESMPI_CKPT_DIR").as_deref(),
            Some("/scratch/ck")
        );
        assert_eq!(variable(&options, "RESMPI_MSGLOG"), None);
        let options = run("-n 2 --msglog pessimistic --ckpt-dir /scratch/ck p");
        assert_eq!(
            variable(&options, "RESMPI_CKPT_DIR").as_deref(),
            Some("/scratch/ck")
        );
        assert!(error("-n 2 --msglog-mem 1M p").contains("--msglog-mem needs --msglog pessimistic"));
        assert!(
            error("-n 2 --msglog-disk 1M p").contains("--msglog-disk needs --msglog pessimistic")
        );
        assert!(error("-n 2 --msglog-spill-dir /x p")
            .contains("--msglog-spill-dir needs --msglog pessimistic"));
        assert!(
            error("-n 2 --msglog pessimistic --msglog-disk 1Q p").contains("--msglog-disk '1Q'")
        );
        assert!(error("-n 2 --msglog pessimistic --msglog-spill-dir= p")
            .contains("--msglog-spill-dir: empty directory name"));
        let options =
            run("-n 2 --msglog pessimistic --msglog-disk 2G --msglog-spill-dir /scratch p");
        assert_eq!(
            variable(&options, "RESMPI_MSGLOG_DISK").as_deref(),
            Some("2147483648")
        );
        assert_eq!(
            variable(&options, "RESMPI_MSGLOG_SPILL_DIR").as_deref(),
            Some("/scratch")
        );
        assert!(error("-n 2 --ckpt-dir= p").contains("--ckpt-dir: empty directory name"));
    }

    #[test]
    fn fault_tolerance_options_set_rank_variables() {
        let options = run("--inject drop:1e-2,seed:7 --checksum=crc32c -reliable off \
             --rails tcp:eth1,tcp:10.77.1.0/24 --stripe=fragments --report-json /tmp/r.json p");
        let spec: FaultSpec = "drop:1e-2,seed:7".parse().unwrap();
        assert_eq!(variable(&options, "RESMPI_INJECT"), Some(spec.to_string()));
        assert_eq!(
            variable(&options, "RESMPI_CHECKSUM").as_deref(),
            Some("crc32c")
        );
        assert_eq!(
            variable(&options, "RESMPI_RELIABLE").as_deref(),
            Some("off")
        );
        assert_eq!(
            variable(&options, "RESMPI_RAILS").as_deref(),
            Some("tcp:eth1,tcp:10.77.1.0/24")
        );
        assert_eq!(
            variable(&options, "RESMPI_STRIPE").as_deref(),
            Some("fragments")
        );
        assert_eq!(options.report_json, Some(PathBuf::from("/tmp/r.json")));
        assert!(options.ft_options_given);
        assert_eq!(options.program, "p");
    }

    #[test]
    fn inject_passes_the_canonical_spec() {
        let options = run("--inject=seed:3,drop:0.5@ranks=0-1 -n 2 p");
        let canonical = variable(&options, "RESMPI_INJECT").unwrap();
        let spec: FaultSpec = canonical.parse().unwrap();
        assert_eq!(spec.to_string(), canonical);
        assert_eq!(spec, "seed:3,drop:0.5@ranks=0-1".parse().unwrap());
    }

    #[test]
    fn each_ft_option_but_stripe_and_report_json_asks_for_the_report() {
        for text in [
            "--inject drop:0 p",
            "--checksum none p",
            "--reliable on p",
            "--rails tcp:lo p",
        ] {
            assert!(run(text).ft_options_given, "{text}");
        }
        for text in ["--stripe off p", "--report-json r.json p", "p"] {
            let options = run(text);
            assert!(!options.ft_options_given, "{text}");
        }
        assert_eq!(run("p").report_json, None);
    }

    #[test]
    fn rails_accept_interfaces_and_ipv4_subnets() {
        for rails in [
            "tcp:eth0",
            "tcp:veth-a1",
            "tcp:enp0s31f6",
            "tcp:br0.100",
            "tcp:0.0.0.0/0",
            "tcp:192.168.1.7/32",
            "tcp:eth1, tcp:10.0.0.0/8",
        ] {
            assert!(check_rails(rails).is_ok(), "{rails}");
        }
        for (rails, needle) in [
            ("", "empty item"),
            ("tcp:eth0,", "item 2"),
            ("udp:eth0", "only tcp:"),
            ("eth0", "only tcp:"),
            ("tcp:", "not an interface name"),
            ("tcp:averyveryverylongname", "not an interface name"),
            ("tcp:eth 0", "not an interface name"),
            ("tcp:eth/0", "not an IPv4 address"),
            ("tcp:10.0.0.0/33", "prefix length"),
            ("tcp:10.0.0.0/", "prefix length"),
            ("tcp:10.0.0.0/+8", "prefix length"),
            ("tcp:10.0.0/24", "not an IPv4 address"),
            ("tcp:300.0.0.0/24", "not an IPv4 address"),
            ("tcp:10.0.0.1", "needs a prefix length"),
        ] {
            let message = check_rails(rails).unwrap_err();
            assert!(message.contains(needle), "{rails}: {message}");
            assert!(message.starts_with("--rails item"), "{message}");
        }
    }

    #[test]
    fn bad_ft_values_are_clear_errors() {
        let message = error("--inject drop:2 p");
        assert!(message.starts_with("--inject item 1 `drop:2`"), "{message}");
        assert!(error("--inject bogus p").contains("expected one of"));
        assert!(error("--checksum md5 p").contains("--checksum 'md5': expected none or crc32c"));
        assert!(error("--reliable yes p").contains("--reliable 'yes': expected on or off"));
        assert!(error("--stripe random p")
            .contains("--stripe 'random': expected round-robin or fragments or off"));
        assert!(error("--rails tcp:1.2.3.4 p").contains("--rails"));
        assert!(error("--report-json= p").contains("empty file name"));
        assert!(error("--inject").contains("needs a value"));
    }

    #[test]
    fn bind_to_sets_the_variable_and_checks_its_value() {
        let bound = |options: &Options| {
            options
                .environment
                .iter()
                .filter(|(name, _)| name == BIND_TO_VARIABLE)
                .map(|(_, value)| value.clone())
                .collect::<Vec<_>>()
        };
        assert!(bound(&run("p")).is_empty(), "no binding unless asked");
        assert_eq!(bound(&run("--bind-to core p")), ["core"]);
        assert_eq!(bound(&run("-bind-to hwthread p")), ["core"]);
        assert_eq!(bound(&run("--bind-to=none p")), ["none"]);
        assert!(error("--bind-to socket p").contains("--bind-to 'socket': expected core or none"));
        let from_environment = |value: &str| {
            let value = value.to_string();
            parse(&words("p"), move |name| {
                (name == BIND_TO_VARIABLE).then(|| value.clone())
            })
        };
        match from_environment("core") {
            Ok(Request::Run(options)) => assert_eq!(bound(&options), ["core"]),
            other => panic!("{other:?}"),
        }
        let message = from_environment("all").unwrap_err();
        assert!(
            message.contains("RESMPI_BIND_TO 'all': expected core or none"),
            "{message}"
        );
    }

    #[test]
    fn replica_masking_defaults_to_replica_and_reaches_the_processes() {
        let masking = |options: &Options| {
            options
                .environment
                .iter()
                .find(|(name, _)| name == REPLICA_MASKING_VARIABLE)
                .map(|(_, value)| value.clone())
        };
        let plain = run("--replicas 2 -n 3 p");
        assert_eq!(plain.replica_masking, ReplicaMasking::Replica);
        assert_eq!(masking(&plain).as_deref(), Some("replica"));
        let process = run("--replicas 3 --replica-masking process -n 2 p");
        assert_eq!(process.replica_masking, ReplicaMasking::Process);
        assert_eq!(masking(&process).as_deref(), Some("process"));
        assert_eq!(masking(&run("-n 2 p")), None);
        let message = error("--replicas 2 --replica-masking rank -n 2 p");
        assert!(
            message.contains("--replica-masking 'rank': expected replica or process"),
            "{message}"
        );
    }

    #[test]
    fn replica_recovery_is_on_by_default_wherever_it_applies() {
        assert!(run("--replicas 2 --replica-masking process -n 3 p").replica_recovery);
        assert!(
            !run("--replicas 2 --replica-masking process --replica-recovery off -n 3 p")
                .replica_recovery
        );
        assert!(!run("--replicas 2 -n 3 p").replica_recovery);
        assert!(!run("-n 3 p").replica_recovery);
        assert!(
            !run("--replicas 2 --replica-masking process --replica-anysource agree -n 3 p")
                .replica_recovery
        );
        // Asked for where it cannot be honoured: refused.
        let message = error("--replicas 2 --replica-recovery now -n 3 p");
        assert!(message.contains("--replica-masking process"), "{message}");
    }

    #[test]
    fn replica_anysource_agree_needs_process_masking_and_reaches_the_processes() {
        let choice = |options: &Options| {
            options
                .environment
                .iter()
                .find(|(name, _)| name == REPLICA_ANYSOURCE_VARIABLE)
                .map(|(_, value)| value.clone())
        };
        let agree = run("--replicas 2 --replica-masking process --replica-anysource agree -n 2 p");
        assert_eq!(choice(&agree).as_deref(), Some("agree"));
        let free = run("--replicas 3 --replica-masking process --replica-anysource free -n 2 p");
        assert_eq!(choice(&free).as_deref(), Some("free"));
        assert_eq!(choice(&run("--replicas 2 -n 2 p")), None);
        for text in [
            "--replicas 2 --replica-anysource agree -n 2 p",
            "--replica-anysource agree -n 2 p",
        ] {
            let message = error(text);
            assert!(
                message.contains("--replica-anysource agree")
                    && message.contains("--replica-masking process"),
                "{text}: {message}"
            );
        }
        let message = error("--replicas 2 --replica-masking process --replica-anysource leader p");
        assert!(
            message.contains("'leader': expected free or agree"),
            "{message}"
        );
        let from_variable = parse(&words("--replicas 2 -n 2 p"), |name| {
            (name == REPLICA_ANYSOURCE_VARIABLE).then(|| "agree".to_string())
        })
        .unwrap_err();
        assert!(
            from_variable.contains("--replica-masking process"),
            "{from_variable}"
        );
    }

    #[test]
    fn the_initial_errhandler_goes_to_the_ranks_in_lower_case() {
        let variable = |text: &str| {
            run(text)
                .environment
                .iter()
                .find(|(name, _)| name == INITIAL_ERRHANDLER_VARIABLE)
                .map(|(_, value)| value.clone())
        };
        assert_eq!(variable("p"), None);
        assert_eq!(
            variable("--initial-errhandler MPI_ERRORS_RETURN p").as_deref(),
            Some("mpi_errors_return")
        );
        assert_eq!(
            variable("-initial-errhandler=mpi_errors_abort p").as_deref(),
            Some("mpi_errors_abort")
        );
        assert!(error("--initial-errhandler mpi_errors_ignore p")
            .contains("--initial-errhandler 'mpi_errors_ignore': expected mpi_errors_are_fatal"));
    }

    #[test]
    fn replicas_multiply_the_processes_and_map_each_to_a_rank_and_replica() {
        let options = run("--replicas 3 -n 4 p");
        assert_eq!((options.rank_count, options.replica_count), (4, 3));
        assert_eq!(options.process_count(), 12);
        assert_eq!(options.rank_and_replica(9), (1, 2));
        assert_eq!(options.process_of(1, 2), 9);
        assert!(options
            .environment
            .contains(&(REPLICAS_VARIABLE.to_string(), "3".to_string())));
        assert_eq!(run("-n 4 p").replica_count, 1);
        assert!(!run("-n 4 p")
            .environment
            .iter()
            .any(|(name, _)| name == REPLICAS_VARIABLE));
        assert!(error("--replicas 0 p").contains("from 1 to 8"));
        assert!(
            error("--replicas 2 --failure-policy continue p").contains("handles a death itself")
        );
        assert!(
            error("--replicas 2 --respawn 1 --failure-policy continue p")
                .contains("handles a death itself")
        );
        assert!(error("--replicas 2 -n 2 --inject kill:1.2@1s p")
            .contains("replica 2 is not in this job of 2 replicas per rank"));
    }

    #[test]
    fn failure_policy_defaults_to_abort_and_has_four_spellings_of_continue() {
        assert_eq!(run("p").failure_policy, FailurePolicy::Abort);
        assert!(!run("p").ft_options_given);
        for text in [
            "--failure-policy continue p",
            "-failure-policy=continue p",
            "-disable-auto-cleanup p",
            "--disable-auto-cleanup p",
            "--with-ft ulfm p",
            "--with-ft=mpi p",
            "-with-ft mpi p",
        ] {
            let options = run(text);
            assert_eq!(options.failure_policy, FailurePolicy::Continue, "{text}");
            assert!(options.ft_options_given, "{text}");
        }
        assert_eq!(
            run("--with-ft ulfm --failure-policy abort p").failure_policy,
            FailurePolicy::Abort,
            "the last one wins"
        );
        assert!(
            error("--with-ft bogus p").contains("--with-ft 'bogus': expected ulfm or mpi or no")
        );
        assert_eq!(run("--with-ft no p").failure_policy, FailurePolicy::Abort);
        assert!(error("--failure-policy maybe p")
            .contains("--failure-policy 'maybe': expected abort or continue"));
        assert!(error("-disable-auto-cleanup=1 p").contains("takes no value"));
    }

    #[test]
    fn the_failure_policy_variable_applies_when_no_option_says() {
        let parse_with = |text: &str, value: &str| {
            parse(&words(text), |name| {
                (name == FAILURE_POLICY_VARIABLE).then(|| value.to_string())
            })
        };
        let policy = |text: &str, value: &str| match parse_with(text, value) {
            Ok(Request::Run(options)) => options.failure_policy,
            other => panic!("{other:?}"),
        };
        assert_eq!(policy("p", "continue"), FailurePolicy::Continue);
        assert_eq!(policy("p", "abort"), FailurePolicy::Abort);
        assert_eq!(
            policy("--failure-policy abort p", "continue"),
            FailurePolicy::Abort
        );
        let message = parse_with("p", "sometimes").unwrap_err();
        assert!(
            message.contains("RESMPI_FAILURE_POLICY 'sometimes': expected abort or continue"),
            "{message}"
        );
    }

    #[test]
    fn process_faults_are_kept_and_checked_against_the_job() {
        let options = run("--inject kill:1@500ms,drop:0.1,host-down:nodeb@2s -n 2 p");
        assert_eq!(options.process_faults.len(), 2);
        assert_eq!(
            options.process_faults[0].to_string(),
            "kill:1@500ms",
            "{:?}",
            options.process_faults
        );
        let message = error("-n 2 --inject kill:9@1s p");
        assert!(
            message.contains("--inject item `kill:9@1s`: rank 9 is not in this job of 2 ranks"),
            "{message}"
        );
        assert!(error("--inject kill:1@sends=5 p").contains("rank 1 is not in this job of 1 ranks"));
        let message = error("-n 4 --inject kill:1.1@1s p");
        assert!(
            message.contains("--inject item `kill:1.1@1s`: replica 1: no replicas in this job"),
            "{message}"
        );
        assert!(run("-n 4 --inject kill:1.0@1s p").process_faults.len() == 1);
        let message = error("-n 4 --inject drop:0.1@ranks=1-4 p");
        assert!(
            message.contains(
                "--inject item `drop:0.1@ranks=1-4`: rank 4 is not in this job of 4 ranks"
            ),
            "{message}"
        );
        assert_eq!(
            run("-n 4 --inject drop:0.1@ranks=1-3 p").environment,
            [(
                "RESMPI_INJECT".to_string(),
                "drop:0.1@ranks=1-3".to_string()
            )]
        );
        let message = error("-n 4 --inject drop:0.1@ranks=3-1 p");
        assert!(
            message.contains("names the higher rank first; write @ranks=1-3"),
            "{message}"
        );
        // The last --inject wins, process faults included.
        assert!(run("--inject kill:0@1s --inject drop:0 p")
            .process_faults
            .is_empty());
    }

    #[test]
    fn rail_down_must_name_a_rail_of_the_job() {
        let message = error("-n 2 --inject rail-down:1@1s p");
        assert!(
            message.contains(
                "--inject item `rail-down:1@1s`: rail 1 does not exist: the job has 1 rail (0 to 0"
            ),
            "{message}"
        );
        assert!(
            error("-n 2 --rails tcp:lo,tcp:eth0 --inject rail-down:9@1s p")
                .contains("rail 9 does not exist: the job has 2 rails (0 to 1")
        );
        // --rails may come after --inject, or from the environment.
        run("-n 2 --inject rail-down:1@1s --rails tcp:lo,tcp:eth0 p");
        run("-n 2 -x RESMPI_RAILS=tcp:lo,tcp:eth0 --inject rail-down:1@1s p");
        assert!(parse(&words("-n 2 --inject rail-down:2@1s p"), |name| {
            (name == "RESMPI_RAILS").then(|| "tcp:a,tcp:b,tcp:c".to_string())
        })
        .is_ok());
        run("-n 2 --inject rail-down:0@1s p");
    }

    #[test]
    fn bad_command_lines_are_clear_errors() {
        assert!(error("-ppn 0 --hosts a p").contains("-ppn"));
        assert!(error("--hosts a:0 p").contains("slots"));
        assert!(error("--launcher-exec= p").contains("empty"));
        assert!(error("--frobnicate p").contains("unknown option '--frobnicate'"));
        assert!(error("").contains("no program"));
        assert!(error("-n").contains("needs a value"));
        assert!(error("-n 0 p").contains("number of ranks"));
        assert!(error("-n many p").contains("number of ranks"));
        assert!(error("-n 5000 p").contains("number of ranks"));
        assert!(error("-x UNSET_VARIABLE p").contains("not set"));
        assert!(error("-x 1BAD=2 p").contains("not a valid environment variable name"));
        assert!(error("-genv ONLY_NAME").contains("needs a variable name"));
        assert!(error("--timeout 0 p").contains("--timeout"));
        assert!(error("--timeout soon p").contains("--timeout"));
        assert!(error("--paths udp p").contains("auto or tcp"));
        assert!(error("--eager-limit lots p").contains("--eager-limit"));
        assert!(error("--tag-output=yes p").contains("takes no value"));
    }
}
