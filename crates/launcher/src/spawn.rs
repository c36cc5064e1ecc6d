//! Starting one rank: its environment, its PMI socket, its stdio pipes, and
//! the pre-exec steps that keep it from outliving the process that started
//! it (mpiexec for a rank on this host, the host's proxy for another).
//!
//! A rank on another host is started by that host's proxy (`mpiexec
//! --proxy`, see `proxy`), which mpiexec starts once per host as `LAUNCHER
//! HOST MPIEXEC --proxy` (hydra's way with `ssh`). Here mpiexec only builds
//! what the proxy needs: the rank's program, arguments and environment,
//! sent over the proxy's authenticated connection rather than on a command
//! line that `ps` shows to everyone.
//!
//! Each rank is the leader of its own process group, so its parent can kill
//! a rank together with anything it started (`kill(-pgid)`), and the
//! terminal's Ctrl-C reaches only mpiexec, which then tears down in order.
//! Each rank also asks the kernel for SIGKILL when its parent dies
//! (`PR_SET_PDEATHSIG`), checking afterwards that the parent did not die
//! before the request was made.

use std::io;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::options::{Options, BIND_TO_VARIABLE, FAILURE_POLICY_VARIABLE};

/// What every rank of one job shares.
pub struct JobIdentity {
    /// `RESMPI_JOB_ID` (16 hex characters), also `PMI_JOBID`.
    pub job_id: String,
    /// `RESMPI_JOB_SECRET` (64 hex characters).
    pub job_secret_hex: String,
    /// `LD_LIBRARY_PATH` for the ranks, `<mpiexec dir>/../lib` first.
    pub library_path: String,
    /// What a proxy must show in its `Hello` (32 hex characters): given to
    /// it on its stdin, never on a command line.
    pub proxy_token: String,
}

/// PMI variables left over from an enclosing launcher: they must not
/// confuse the rank or anything it starts.
pub const INHERITED_PMI_VARIABLES: [&str; 5] =
    ["PMI_PORT", "PMI_ID", "PMI_FD", "PMI_RANK", "PMI_SIZE"];

/// Variables of mpiexec's own environment passed on to remote ranks (local
/// ranks inherit the whole environment; a proxy started by ssh has the
/// remote login's): the `RESMPI_*` configuration.
pub fn forwarded_variables() -> Vec<(String, String)> {
    const OWN: [&str; 6] = [
        "RESMPI_JOB_ID",
        "RESMPI_JOB_SECRET",
        "RESMPI_PMI_TOKEN",
        "RESMPI_HOST_KEY",
        "RESMPI_INCARNATION",
        FAILURE_POLICY_VARIABLE,
    ];
    let mut variables: Vec<(String, String)> = std::env::vars()
        .filter(|(name, _)| name.starts_with("RESMPI_") && !OWN.contains(&name.as_str()))
        .collect();
    variables.sort();
    variables
}

/// Whether `launcher` passes its command to a remote shell as one string
/// (so words must be quoted for that shell).
fn launcher_uses_a_shell(launcher: &str) -> bool {
    let base = Path::new(launcher)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or(launcher);
    matches!(base, "ssh" | "rsh")
}

/// `word` quoted for a POSIX shell, unchanged when it needs no quoting.
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The program path remote ranks run: a relative path with a `/` is made
/// absolute from mpiexec's directory; a bare name is looked up in the
/// remote `PATH`.
pub fn remote_program_path(program: &str) -> String {
    let path = Path::new(program);
    if program.contains('/') && path.is_relative() {
        if let Ok(directory) = std::env::current_dir() {
            let joined = directory.join(path);
            let text = joined.display().to_string();
            return text.replace("/./", "/");
        }
    }
    program.to_string()
}

/// The words after `LAUNCHER HOST` that start a host's proxy: this very
/// executable (`proxy_program`, found at the same path there) in proxy
/// mode. Nothing secret: the token goes to the proxy's stdin.
pub fn proxy_command_words(launcher: &str, proxy_program: &str) -> Vec<String> {
    let words = vec![
        proxy_program.to_string(),
        crate::proxy::PROXY_FLAG.to_string(),
    ];
    if launcher_uses_a_shell(launcher) {
        words.iter().map(|word| shell_quote(word)).collect()
    } else {
        words
    }
}

/// The environment a remote rank gets on top of its proxy's: what a local
/// rank gets (its PMI descriptor comes from the proxy), plus
/// `RESMPI_HOST_KEY` and mpiexec's own `RESMPI_*` configuration.
pub fn remote_rank_environment(
    options: &Options,
    identity: &JobIdentity,
    rank: u32,
    incarnation: u32,
    local_numbers: (u32, u32),
    host: &str,
    forwarded: &[(String, String)],
) -> Vec<(String, String)> {
    let mut variables: Vec<(String, String)> =
        vec![("RESMPI_HOST_KEY".to_string(), host.to_string())];
    variables.extend(forwarded.iter().cloned());
    variables.extend(options.environment.iter().cloned());
    let rank_text = rank.to_string();
    for (name, value) in [
        ("PMI_RANK", rank_text.as_str()),
        ("PMI_SIZE", &options.process_count().to_string()),
        ("PMI_JOBID", &identity.job_id),
        ("MPI_LOCALNRANKS", &local_numbers.0.to_string()),
        ("MPI_LOCALRANKID", &local_numbers.1.to_string()),
        ("RESMPI_JOB_ID", &identity.job_id),
        ("RESMPI_JOB_SECRET", &identity.job_secret_hex),
        ("LD_LIBRARY_PATH", &identity.library_path),
        (FAILURE_POLICY_VARIABLE, options.failure_policy.name()),
        ("RESMPI_INCARNATION", &incarnation.to_string()),
    ] {
        variables.push((name.to_string(), value.to_string()));
    }
    if options.replica_count > 1 {
        let (_, replica) = options.rank_and_replica(rank);
        variables.push((REPLICA_VARIABLE.to_string(), replica.to_string()));
    }
    variables
}

/// `<directory of the mpiexec executable>/../lib`, where `libmpich.so.12`
/// of resmpi is installed next to `bin/mpiexec`.
pub fn library_directory() -> Option<PathBuf> {
    let executable = std::env::current_exe().ok()?;
    Some(executable.parent()?.parent()?.join("lib"))
}

/// `directory` in front of `existing` (a colon-separated list).
pub fn prepend_path(directory: &Path, existing: Option<&str>) -> String {
    match existing {
        Some(existing) if !existing.is_empty() => format!("{}:{existing}", directory.display()),
        _ => directory.display().to_string(),
    }
}

/// How rank 0's stdin is wired; other ranks get `/dev/null`.
pub enum StandardInput {
    /// Inherit mpiexec's stdin (it is not a terminal).
    Inherit,
    /// A pipe that mpiexec fills from its terminal (a rank in its own
    /// process group must not read the terminal: it would be stopped).
    Pipe,
    /// `/dev/null`.
    Null,
}

/// Makes the process `command` starts the leader of its own process group,
/// killed by the kernel when the calling thread's process dies, holding
/// `pmi_fd` (created close-on-exec) open across exec. Must be called on
/// the thread that lives as long as the process: `PR_SET_PDEATHSIG` fires
/// when the thread that forked the child ends.
pub fn bind_to_this_process(command: &mut Command, pmi_fd: Option<i32>) {
    // Captured before fork: the child compares its parent with this.
    let parent_pid = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (setpgid, prctl, getppid, fcntl); it
    // allocates nothing and touches no lock. `pmi_fd` stays open in the
    // parent until after `spawn` returns.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then nobody
            // would ever kill us.
            if libc::getppid() != parent_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            if let Some(pmi_fd) = pmi_fd {
                if libc::fcntl(pmi_fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The CPU a rank runs on under `--bind-to` (`policy`: `Some("core")`
/// binds, anything else, the default included, does not), given its
/// `local_numbers` (ranks on this host, its index among them): the
/// index-th CPU of the calling process's affinity mask, when the mask has a
/// CPU for every rank of the host. With more ranks than CPUs nothing is
/// bound: stacking ranks on CPUs by index would leave some CPUs idle while
/// others take turns, and the kernel balances oversubscribed ranks better.
///
/// Why bind: an unbound pair of ranks that wait on each other is sometimes
/// put on one core by the scheduler, and then every message waits for a
/// time slice; bound, each polls on its own core (Open MPI binds by
/// default). Why not by default (as MPICH's hydra): on a host where
/// anything else runs, a bound rank cannot move off a core another process
/// holds, and each message then waits for that process's time slice
/// (docs/benchmarks.md measured milliseconds per 8 B message on a 2-core
/// host during a build, against microseconds unbound).
fn cpu_for_rank(policy: Option<&str>, local_numbers: (u32, u32)) -> Option<usize> {
    if policy != Some("core") {
        return None;
    }
    let (local_count, local_index) = local_numbers;
    let cpus = allowed_cpus();
    if local_count as usize > cpus.len() {
        return None;
    }
    cpus.get(local_index as usize).copied()
}

/// The CPUs this process may run on (its affinity mask), ascending.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain bits; sched_getaffinity writes at most
    // `size_of::<cpu_set_t>()` bytes into it, and CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Makes the process `command` starts run only on `cpu` (see
/// [`cpu_for_rank`]); a failure to bind fails the start, as asked.
fn pin_to_cpu(command: &mut Command, cpu: usize) {
    // SAFETY: cpu_set_t is plain bits; CPU_ZERO/CPU_SET write inside it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        set
    };
    // SAFETY: the closure runs in the forked child before exec and only
    // makes the sched_setaffinity system call on a set built before fork.
    unsafe {
        command.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Pin the rank `command` starts as `--bind-to` (`RESMPI_BIND_TO` in the
/// rank's `environment`) asks, given its `local_numbers`: the one place
/// both launchers (mpiexec for this host, a proxy for its own) decide it.
pub fn pin_as_asked(
    command: &mut Command,
    environment: &[(String, String)],
    local_numbers: (u32, u32),
) {
    let policy = environment_value(environment, BIND_TO_VARIABLE);
    if let Some(cpu) = cpu_for_rank(policy, local_numbers) {
        pin_to_cpu(command, cpu);
    }
}

/// The value of `name` in `environment`, the last one winning.
pub fn environment_value<'a>(environment: &'a [(String, String)], name: &str) -> Option<&'a str> {
    environment
        .iter()
        .rev()
        .find(|(variable, _)| variable == name)
        .map(|(_, value)| value.as_str())
}

/// What to execute for `program`: a name without a `/` that is not on
/// `PATH` but is a file in the working directory runs from there, as
/// hydra and Open MPI's mpirun do (CTest runs `mpiexec -n 4 prog` from the
/// test's build directory); everything else as given.
pub fn program_path(program: &str) -> std::path::PathBuf {
    let given = std::path::PathBuf::from(program);
    if program.contains('/') || program.is_empty() {
        return given;
    }
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|directory| directory.join(program).is_file())
    });
    let here = std::path::Path::new(".").join(program);
    if !on_path && here.is_file() {
        here
    } else {
        given
    }
}

/// The variable that gives each process its replica index under
/// `--replicas` (0 to R-1), so a program can tell its copies apart (for
/// the files it writes itself, say).
pub const REPLICA_VARIABLE: &str = "RESMPI_REPLICA";

/// Starts `rank` (its process `incarnation`: 0 at the start of the job, i
/// for the i-th `--respawn`, as `RESMPI_INCARNATION`) of the job described
/// by `options` on this host, connected to the PMI server through
/// `pmi_socket` (the rank's end, inherited as `PMI_FD`).
pub fn spawn_rank(
    options: &Options,
    identity: &JobIdentity,
    rank: u32,
    incarnation: u32,
    local_numbers: (u32, u32),
    pmi_socket: &UnixStream,
    standard_input: StandardInput,
) -> io::Result<Child> {
    let pmi_fd = pmi_socket.as_raw_fd();
    let mut command = Command::new(program_path(&options.program));
    command.args(&options.arguments);
    for name in INHERITED_PMI_VARIABLES {
        command.env_remove(name);
    }
    for (name, value) in &options.environment {
        command.env(name, value);
    }
    let rank_text = rank.to_string();
    command
        .env("PMI_FD", pmi_fd.to_string())
        .env("PMI_RANK", &rank_text)
        .env("PMI_SIZE", options.process_count().to_string())
        .env("PMI_JOBID", &identity.job_id)
        .env("MPI_LOCALNRANKS", local_numbers.0.to_string())
        .env("MPI_LOCALRANKID", local_numbers.1.to_string())
        .env("RESMPI_JOB_ID", &identity.job_id)
        .env("RESMPI_JOB_SECRET", &identity.job_secret_hex)
        .env("LD_LIBRARY_PATH", &identity.library_path)
        .env(FAILURE_POLICY_VARIABLE, options.failure_policy.name())
        .env("RESMPI_INCARNATION", incarnation.to_string());
    let (_, replica) = options.rank_and_replica(rank);
    if options.replica_count > 1 {
        command.env(REPLICA_VARIABLE, replica.to_string());
    }
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(match standard_input {
            StandardInput::Inherit => Stdio::inherit(),
            StandardInput::Pipe => Stdio::piped(),
            StandardInput::Null => Stdio::null(),
        });
    bind_to_this_process(&mut command, Some(pmi_fd));
    pin_as_asked(&mut command, &options.environment, local_numbers);
    command.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::FailurePolicy;

    #[test]
    fn a_rank_is_bound_only_when_asked_and_when_every_rank_gets_a_cpu() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let count = cpus.len() as u32;
        assert_eq!(
            cpu_for_rank(None, (1, 0)),
            None,
            "the default binds nothing"
        );
        assert_eq!(cpu_for_rank(Some("none"), (1, 0)), None);
        assert_eq!(cpu_for_rank(Some("core"), (1, 0)), Some(cpus[0]));
        assert_eq!(
            cpu_for_rank(Some("core"), (count, count - 1)),
            Some(cpus[cpus.len() - 1])
        );
        assert_eq!(
            cpu_for_rank(Some("core"), (count + 1, 0)),
            None,
            "more ranks than CPUs: nothing is bound"
        );
    }

    #[test]
    fn environment_value_takes_the_last_setting() {
        let environment = vec![
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "2".to_string()),
            ("A".to_string(), "3".to_string()),
        ];
        assert_eq!(environment_value(&environment, "A"), Some("3"));
        assert_eq!(environment_value(&environment, "C"), None);
    }

    #[test]
    fn library_directory_is_beside_the_executable_directory() {
        let directory = library_directory().unwrap();
        assert!(directory.ends_with("lib"));
        let executable = std::env::current_exe().unwrap();
        assert_eq!(directory.parent(), executable.parent().unwrap().parent());
    }

    fn options(launcher: &str, program: &str) -> Options {
        Options {
            respawn_count_max: 0,
            rank_count: 4,
            replica_count: 1,
            replica_masking: crate::options::ReplicaMasking::Replica,
            replica_recovery: false,
            msglog: false,
            msglog_optimistic: false,
            environment: vec![("A".to_string(), "x y".to_string())],
            tag_output: false,
            timeout_seconds: None,
            hosts: None,
            ranks_per_host: None,
            launcher_exec: launcher.to_string(),
            control_address: None,
            ft_options_given: false,
            report_json: None,
            failure_policy: FailurePolicy::Continue,
            process_faults: Vec::new(),
            universe_size: 4,
            program: program.to_string(),
            arguments: vec!["it's".to_string()],
        }
    }

    fn identity() -> JobIdentity {
        JobIdentity {
            job_id: "j1".to_string(),
            job_secret_hex: "s2".to_string(),
            library_path: "/lib".to_string(),
            proxy_token: "t3".to_string(),
        }
    }

    #[test]
    fn a_remote_rank_gets_the_job_environment_and_the_token_stays_with_the_proxy() {
        let forwarded = [("RESMPI_PATHS".to_string(), "tcp".to_string())];
        let variables = remote_rank_environment(
            &options("scripts/netns-exec", "/bin/prog"),
            &identity(),
            2,
            1,
            (2, 0),
            "node7",
            &forwarded,
        );
        let words: Vec<String> = variables
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        for expected in [
            "RESMPI_HOST_KEY=node7",
            "RESMPI_PATHS=tcp",
            "A=x y",
            "PMI_RANK=2",
            "PMI_SIZE=4",
            "MPI_LOCALNRANKS=2",
            "MPI_LOCALRANKID=0",
            "RESMPI_JOB_ID=j1",
            "RESMPI_JOB_SECRET=s2",
            "LD_LIBRARY_PATH=/lib",
            "RESMPI_FAILURE_POLICY=continue",
            "RESMPI_INCARNATION=1",
        ] {
            assert!(
                words.contains(&expected.to_string()),
                "{expected}: {words:?}"
            );
        }
        // The proxy gives PMI_FD; no PMI_PORT, and the proxy's token is
        // nobody else's business.
        assert!(
            words
                .iter()
                .all(|word| !word.starts_with("PMI_PORT=") && !word.contains("t3")),
            "{words:?}"
        );
    }

    #[test]
    fn the_proxy_command_line_holds_no_secret_and_is_quoted_for_ssh() {
        assert_eq!(
            proxy_command_words("scripts/netns-exec", "/opt/resmpi/bin/mpiexec"),
            ["/opt/resmpi/bin/mpiexec", "--proxy"]
        );
        assert_eq!(
            proxy_command_words("/usr/bin/ssh", "/opt/my dir/mpiexec"),
            ["'/opt/my dir/mpiexec'", "--proxy"]
        );
    }

    #[test]
    fn relative_programs_become_absolute_for_remote_hosts() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(
            remote_program_path("./a.out"),
            format!("{}/a.out", here.display())
        );
        assert_eq!(remote_program_path("/bin/true"), "/bin/true");
        assert_eq!(remote_program_path("hostname"), "hostname");
        assert_eq!(shell_quote("plain-word_1.2"), "plain-word_1.2");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn prepend_path_keeps_the_existing_list() {
        let directory = Path::new("/opt/resmpi/lib");
        assert_eq!(prepend_path(directory, None), "/opt/resmpi/lib");
        assert_eq!(prepend_path(directory, Some("")), "/opt/resmpi/lib");
        assert_eq!(
            prepend_path(directory, Some("/a:/b")),
            "/opt/resmpi/lib:/a:/b"
        );
    }
}
