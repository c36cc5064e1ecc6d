//! Starting one rank: its environment, its PMI socket, its stdio pipes, and
//! the pre-exec steps that keep it from outliving mpiexec.
//!
//! A rank on another host is started as `LAUNCHER HOST env VAR=VALUE…
//! PROGRAM ARGS…` (hydra's way with `ssh`); the launcher process is what
//! mpiexec forks, watches and kills, and it carries the rank's stdio. The
//! rank reaches the PMI server over TCP (`PMI_PORT`, `PMI_ID`).
//!
//! Each rank is the leader of its own process group, so mpiexec can kill a
//! rank together with anything it started (`kill(-pgid)`), and the terminal's
//! Ctrl-C reaches only mpiexec, which then tears down in order. Each rank
//! also asks the kernel for SIGKILL when mpiexec dies (`PR_SET_PDEATHSIG`),
//! checking afterwards that mpiexec did not die before the request was made.

use std::io;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::options::{Options, FAILURE_POLICY_VARIABLE};

/// What every rank of one job shares.
pub struct JobIdentity {
    /// `RESMPI_JOB_ID` (16 hex characters), also `PMI_JOBID`.
    pub job_id: String,
    /// `RESMPI_JOB_SECRET` (64 hex characters).
    pub job_secret_hex: String,
    /// `LD_LIBRARY_PATH` for the ranks, `<mpiexec dir>/../lib` first.
    pub library_path: String,
    /// `RESMPI_PMI_TOKEN` (32 hex characters): what a TCP PMI client must
    /// show in its `cmd=initack` (not the job secret, which never crosses
    /// the PMI connection).
    pub pmi_token: String,
}

/// Where a rank runs and how it reaches the PMI server.
pub struct RankSite<'a> {
    /// (`MPI_LOCALNRANKS`, `MPI_LOCALRANKID`).
    pub local_numbers: (u32, u32),
    /// `None`: this host, PMI over the socketpair end given to `spawn_rank`.
    /// `Some`: a remote host.
    pub remote: Option<RemoteSite<'a>>,
}

/// A rank on another host.
pub struct RemoteSite<'a> {
    /// The host name given to the launcher.
    pub host: &'a str,
    /// `PMI_PORT`: `address:port` of the PMI server's TCP listener.
    pub pmi_port: &'a str,
}

/// Variables of mpiexec's own environment passed on to remote ranks (local
/// ranks inherit the whole environment): the `RESMPI_*` configuration.
fn forwarded_variables() -> Vec<(String, String)> {
    const OWN: [&str; 5] = [
        "RESMPI_JOB_ID",
        "RESMPI_JOB_SECRET",
        "RESMPI_PMI_TOKEN",
        "RESMPI_HOST_KEY",
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

/// The words after `LAUNCHER HOST`: `env VAR=VALUE… PROGRAM ARGS…`.
pub fn remote_command_words(
    options: &Options,
    identity: &JobIdentity,
    rank: u32,
    local_numbers: (u32, u32),
    remote: &RemoteSite<'_>,
    forwarded: &[(String, String)],
) -> Vec<String> {
    let mut variables: Vec<(String, String)> =
        vec![("RESMPI_HOST_KEY".to_string(), remote.host.to_string())];
    variables.extend(forwarded.iter().cloned());
    variables.extend(options.environment.iter().cloned());
    let rank_text = rank.to_string();
    for (name, value) in [
        ("PMI_PORT", remote.pmi_port),
        ("PMI_ID", &rank_text),
        ("PMI_RANK", &rank_text),
        ("PMI_SIZE", &options.rank_count.to_string()),
        ("PMI_JOBID", &identity.job_id),
        ("MPI_LOCALNRANKS", &local_numbers.0.to_string()),
        ("MPI_LOCALRANKID", &local_numbers.1.to_string()),
        ("RESMPI_JOB_ID", &identity.job_id),
        ("RESMPI_JOB_SECRET", &identity.job_secret_hex),
        ("RESMPI_PMI_TOKEN", &identity.pmi_token),
        ("LD_LIBRARY_PATH", &identity.library_path),
        (FAILURE_POLICY_VARIABLE, options.failure_policy.name()),
    ] {
        variables.push((name.to_string(), value.to_string()));
    }
    let mut words = vec!["env".to_string()];
    words.extend(
        variables
            .into_iter()
            .map(|(name, value)| format!("{name}={value}")),
    );
    words.push(remote_program_path(&options.program));
    words.extend(options.arguments.iter().cloned());
    if launcher_uses_a_shell(&options.launcher_exec) {
        words = words.iter().map(|word| shell_quote(word)).collect();
    }
    words
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

/// Starts `rank` (its process `incarnation`: 0 at the start of the job, i
/// for the i-th `--respawn`, as `RESMPI_INCARNATION`) of the job described
/// by `options` at `site`: on this host
/// connected to the PMI server through `pmi_socket` (the rank's end,
/// inherited as `PMI_FD`), or on a remote host through the launcher.
pub fn spawn_rank(
    options: &Options,
    identity: &JobIdentity,
    rank: u32,
    incarnation: u32,
    site: &RankSite<'_>,
    pmi_socket: Option<&UnixStream>,
    standard_input: StandardInput,
) -> io::Result<Child> {
    let pmi_fd = pmi_socket.map(|socket| socket.as_raw_fd());
    let mut command;
    // PMI variables left over from an enclosing launcher must not confuse
    // the rank or anything it (or the remote launcher) starts.
    let inherited = ["PMI_PORT", "PMI_ID", "PMI_FD", "PMI_RANK", "PMI_SIZE"];
    match (&site.remote, pmi_fd) {
        (Some(remote), _) => {
            command = Command::new(&options.launcher_exec);
            command.arg(remote.host).args(remote_command_words(
                options,
                identity,
                rank,
                site.local_numbers,
                remote,
                &forwarded_variables(),
            ));
            for name in inherited {
                command.env_remove(name);
            }
        }
        (None, Some(pmi_fd)) => {
            command = Command::new(&options.program);
            command.args(&options.arguments);
            for name in inherited {
                command.env_remove(name);
            }
            for (name, value) in &options.environment {
                command.env(name, value);
            }
            let rank_text = rank.to_string();
            command
                .env("PMI_FD", pmi_fd.to_string())
                .env("PMI_RANK", &rank_text)
                .env("PMI_SIZE", options.rank_count.to_string())
                .env("PMI_JOBID", &identity.job_id)
                .env("MPI_LOCALNRANKS", site.local_numbers.0.to_string())
                .env("MPI_LOCALRANKID", site.local_numbers.1.to_string())
                .env("RESMPI_JOB_ID", &identity.job_id)
                .env("RESMPI_JOB_SECRET", &identity.job_secret_hex)
                .env("LD_LIBRARY_PATH", &identity.library_path)
                .env(FAILURE_POLICY_VARIABLE, options.failure_policy.name())
                .env("RESMPI_INCARNATION", incarnation.to_string());
        }
        (None, None) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a local rank needs a PMI socket",
            ))
        }
    }
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(match standard_input {
            StandardInput::Inherit => Stdio::inherit(),
            StandardInput::Pipe => Stdio::piped(),
            StandardInput::Null => Stdio::null(),
        });
    // Captured before fork: the child compares its parent with this.
    let launcher_pid = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (setpgid, prctl, getppid, fcntl); it
    // allocates nothing and touches no lock. `pmi_fd` stays open in the
    // parent until after `spawn` returns. For a remote rank these steps bind
    // the launcher process (ssh) to mpiexec instead.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // mpiexec may have died between fork and prctl: then nobody
            // would ever kill us.
            if libc::getppid() != launcher_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // The PMI socket was created close-on-exec; this rank keeps its own.
            if let Some(pmi_fd) = pmi_fd {
                if libc::fcntl(pmi_fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    command.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::FailurePolicy;

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
            program: program.to_string(),
            arguments: vec!["it's".to_string()],
        }
    }

    fn identity() -> JobIdentity {
        JobIdentity {
            job_id: "j1".to_string(),
            job_secret_hex: "s2".to_string(),
            library_path: "/lib".to_string(),
            pmi_token: "t3".to_string(),
        }
    }

    #[test]
    fn remote_command_sets_pmi_port_and_the_job_environment() {
        let remote = RemoteSite {
            host: "node7",
            pmi_port: "10.0.0.1:5000",
        };
        let forwarded = [("RESMPI_PATHS".to_string(), "tcp".to_string())];
        let words = remote_command_words(
            &options("scripts/netns-exec", "/bin/prog"),
            &identity(),
            2,
            (2, 0),
            &remote,
            &forwarded,
        );
        assert_eq!(words[0], "env");
        assert_eq!(&words[words.len() - 2..], ["/bin/prog", "it's"]);
        for expected in [
            "RESMPI_HOST_KEY=node7",
            "RESMPI_PATHS=tcp",
            "A=x y",
            "PMI_PORT=10.0.0.1:5000",
            "PMI_ID=2",
            "PMI_RANK=2",
            "PMI_SIZE=4",
            "MPI_LOCALNRANKS=2",
            "MPI_LOCALRANKID=0",
            "RESMPI_JOB_ID=j1",
            "RESMPI_JOB_SECRET=s2",
            "RESMPI_PMI_TOKEN=t3",
            "LD_LIBRARY_PATH=/lib",
            "RESMPI_FAILURE_POLICY=continue",
        ] {
            assert!(
                words.contains(&expected.to_string()),
                "{expected}: {words:?}"
            );
        }
        // ssh hands the words to a shell: they are quoted for it.
        let words = remote_command_words(
            &options("/usr/bin/ssh", "/bin/prog"),
            &identity(),
            2,
            (2, 0),
            &remote,
            &[],
        );
        assert!(words.contains(&"'A=x y'".to_string()), "{words:?}");
        assert_eq!(words.last().unwrap(), "'it'\\''s'");
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
