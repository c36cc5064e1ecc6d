//! `mpiexec` as a user meets it: real processes, real signals, real files.
//! Each test states what must hold; every run is bounded by `timeout(1)` so
//! a hang fails the test instead of stalling the suite.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn mpiexec() -> &'static str {
    env!("CARGO_BIN_EXE_mpiexec")
}

/// The PMI probe example; `cargo test -p resmpi-launcher` builds it.
fn probe() -> PathBuf {
    example("launcher_pmi_probe")
}

/// The FT report probe example (puts `resmpi-report-<rank>`).
fn report_probe() -> PathBuf {
    example("launcher_report_probe")
}

fn example(name: &str) -> PathBuf {
    let executable = std::env::current_exe().unwrap();
    let path = executable
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.is_file(),
        "missing {}: run `cargo test -p resmpi-launcher` without --test filters (cargo builds examples only then)",
        path.display()
    );
    path
}

fn command(arguments: &[&str]) -> Command {
    let mut command = Command::new("timeout");
    command
        .args(["-s", "KILL", "30", mpiexec()])
        .args(arguments)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn run(arguments: &[&str]) -> Output {
    command(arguments).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn describe(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        text(&output.stdout),
        text(&output.stderr)
    )
}

fn scratch_directory(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!(
        "resmpi-launcher-test-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// Whether `pid` is alive (a zombie counts as dead).
fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    condition()
}

fn read_pid(path: &PathBuf) -> i32 {
    assert!(
        wait_until(Duration::from_secs(10), || {
            std::fs::read_to_string(path).is_ok_and(|text| text.trim().parse::<i32>().is_ok())
        }),
        "{} never appeared",
        path.display()
    );
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn wait_for_exit(mut child: Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "mpiexec did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn probe_exchanges_keys_through_our_pmi_server() {
    let probe = probe();
    let output = run(&["-n", "3", probe.to_str().unwrap()]);
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    for rank in 0..3 {
        let neighbour = (rank + 1) % 3;
        assert!(
            stdout.contains(&format!("rank {rank} of 3 (local {rank} of 3, universe 3,"))
                && stdout.contains(&format!(
                    "got 'from-rank-{neighbour}:a=b' from rank {neighbour}"
                )),
            "{}",
            describe(&output)
        );
    }
}

#[test]
fn first_nonzero_exit_before_finalize_ends_the_job_with_its_code() {
    let started = Instant::now();
    let output = run(&[
        "-n",
        "3",
        "sh",
        "-c",
        "if [ $PMI_RANK = 1 ]; then exit 3; fi; sleep 20",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("mpiexec: rank 1 (pid "), "{stderr}");
    assert!(
        stderr.contains(") exited with code 3 before MPI_Finalize"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the other ranks were not killed"
    );
}

#[test]
fn a_rank_killed_by_a_signal_is_named_and_ends_the_job() {
    let started = Instant::now();
    let output = run(&[
        "-n",
        "2",
        "sh",
        "-c",
        "if [ $PMI_RANK = 0 ]; then kill -9 $$; fi; sleep 20",
    ]);
    assert_eq!(output.status.code(), Some(128 + 9), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("mpiexec: rank 0 (pid "), "{stderr}");
    assert!(
        stderr.contains(") killed by signal 9 (SIGKILL)"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[test]
fn abort_ends_the_job_with_the_abort_code() {
    let probe = probe();
    let output = run(&["-n", "3", probe.to_str().unwrap(), "abort", "5", "1"]);
    assert_eq!(output.status.code(), Some(5), "{}", describe(&output));
    assert!(text(&output.stderr).contains("mpiexec: rank 1 called MPI_Abort with code 5"));
    let output = run(&["-n", "2", probe.to_str().unwrap(), "abort", "0", "0"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "abort code 0 must still fail: {}",
        describe(&output)
    );
}

#[test]
fn leaving_without_finalize_while_others_wait_fails_the_job() {
    let probe = probe();
    let started = Instant::now();
    let output = run(&["-n", "3", probe.to_str().unwrap(), "skip-finalize", "2"]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert!(
        text(&output.stderr).contains("rank 2 (pid "),
        "{}",
        describe(&output)
    );
    assert!(text(&output.stderr).contains("exited with code 0 before MPI_Finalize"));
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[test]
fn programs_that_never_speak_pmi_may_exit_zero() {
    let output = run(&["-n", "2", "true"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(output.stderr.is_empty(), "{}", describe(&output));
}

#[test]
fn timeout_kills_the_job_and_exits_124() {
    let started = Instant::now();
    let output = run(&["--timeout=1", "-n", "2", "sleep", "20"]);
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    assert!(text(&output.stderr).contains("mpiexec: job timed out after 1 s"));
    assert!(started.elapsed() < Duration::from_secs(6));
}

#[test]
fn tag_output_prefixes_lines_and_keeps_streams_apart() {
    let output = run(&[
        "--tag-output",
        "-np",
        "2",
        "sh",
        "-c",
        "echo out-$PMI_RANK; echo err-$PMI_RANK >&2; printf partial-$PMI_RANK",
    ]);
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    for rank in 0..2 {
        assert!(
            stdout
                .lines()
                .any(|line| line == format!("[{rank}] out-{rank}")),
            "{stdout}"
        );
        assert!(
            stdout
                .lines()
                .any(|line| line == format!("[{rank}] partial-{rank}")),
            "{stdout}"
        );
        assert!(
            stderr
                .lines()
                .any(|line| line == format!("[{rank}] err-{rank}")),
            "{stderr}"
        );
    }
    assert!(!stdout.contains("err-"), "{stdout}");
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
}

#[test]
fn environment_options_and_job_variables_reach_every_rank() {
    let output = command(&[
        "-n",
        "2",
        "-x",
        "RESMPI_TEST_PASSED",
        "-x",
        "RESMPI_TEST_SET=two",
        "-genv",
        "RESMPI_TEST_GENV",
        "three",
        "--paths=tcp",
        "--eager-limit",
        "64K",
        "sh",
        "-c",
        "echo $PMI_RANK $PMI_SIZE $MPI_LOCALRANKID $MPI_LOCALNRANKS $RESMPI_TEST_PASSED $RESMPI_TEST_SET $RESMPI_TEST_GENV $RESMPI_PATHS $RESMPI_EAGER_LIMIT $RESMPI_JOB_ID $PMI_JOBID $RESMPI_JOB_SECRET $PMI_FD $LD_LIBRARY_PATH",
    ])
    .env("RESMPI_TEST_PASSED", "one")
    .env("LD_LIBRARY_PATH", "/previous")
    .output()
    .unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    let mut lines: Vec<Vec<&str>> = stdout
        .lines()
        .map(|line| line.split(' ').collect())
        .collect();
    lines.sort();
    assert_eq!(lines.len(), 2, "{stdout}");
    let library_directory = PathBuf::from(mpiexec())
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("lib");
    let expected_library_path = format!("{}:/previous", library_directory.display());
    for (rank, fields) in lines.iter().enumerate() {
        let rank = rank.to_string();
        assert_eq!(
            &fields[..9],
            &[
                rank.as_str(),
                "2",
                rank.as_str(),
                "2",
                "one",
                "two",
                "three",
                "tcp",
                "64K"
            ],
            "{stdout}"
        );
        let (job_id, pmi_job_id, secret, pmi_fd) = (fields[9], fields[10], fields[11], fields[12]);
        assert_eq!(job_id.len(), 16, "{stdout}");
        assert!(job_id.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_eq!(pmi_job_id, job_id);
        assert_eq!(secret.len(), 64, "{stdout}");
        assert!(secret.bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert!(pmi_fd.parse::<u32>().is_ok(), "{stdout}");
        assert_eq!(fields[13], expected_library_path);
    }
    assert_eq!(
        lines[0][9], lines[1][9],
        "ranks of one job share the job id"
    );
    assert_eq!(
        lines[0][11], lines[1][11],
        "ranks of one job share the secret"
    );
}

#[test]
fn every_job_gets_its_own_id_and_secret() {
    let first = text(&run(&["sh", "-c", "echo $RESMPI_JOB_ID $RESMPI_JOB_SECRET"]).stdout);
    let second = text(&run(&["sh", "-c", "echo $RESMPI_JOB_ID $RESMPI_JOB_SECRET"]).stdout);
    assert_ne!(first.trim(), "");
    assert_ne!(first, second);
}

#[test]
fn stdin_goes_to_rank_zero_only() {
    let mut child = command(&[
        "--tag-output",
        "-n",
        "2",
        "sh",
        "-c",
        "echo got-$(cat | tr -d '\\n')",
    ])
    .stdin(Stdio::piped())
    .spawn()
    .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"hello\n").unwrap();
    }
    let output = wait_for_exit(child);
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.lines().any(|line| line == "[0] got-hello"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|line| line == "[1] got-"), "{stdout}");
}

#[test]
fn a_program_that_cannot_run_exits_127_naming_it() {
    let output = run(&["-n", "2", "resmpi-no-such-program"]);
    assert_eq!(output.status.code(), Some(127), "{}", describe(&output));
    assert!(text(&output.stderr).contains("cannot run 'resmpi-no-such-program'"));
    let directory = scratch_directory("not-executable");
    let file = directory.join("data.txt");
    std::fs::write(&file, "not a program").unwrap();
    let output = run(&[file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(127), "{}", describe(&output));
    assert!(
        text(&output.stderr).contains("permission denied"),
        "{}",
        describe(&output)
    );
    std::fs::remove_dir_all(directory).unwrap();
}

#[test]
fn bad_command_lines_exit_2_with_a_reason() {
    let output = run(&["--frobnicate", "true"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("unknown option '--frobnicate'"));
    let output = run(&["-n", "zero", "true"]);
    assert_eq!(output.status.code(), Some(2));
    let output = run(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(text(&output.stdout).contains("usage: mpiexec"));
    let output = run(&["--version"]);
    assert!(text(&output.stdout).starts_with("mpiexec (resmpi)"));
}

#[test]
fn kill_9_of_one_rank_leaves_no_process_behind() {
    let directory = scratch_directory("orphans");
    let script = format!(
        "sleep 30 & echo $! > {0}/child.$PMI_RANK; echo $$ > {0}/rank.$PMI_RANK; wait",
        directory.display()
    );
    let child = command(&["-n", "3", "sh", "-c", &script]).spawn().unwrap();
    let mut pids = Vec::new();
    for rank in 0..3 {
        pids.push(read_pid(&directory.join(format!("rank.{rank}"))));
        pids.push(read_pid(&directory.join(format!("child.{rank}"))));
    }
    // kill(1) rather than libc::kill keeps the tests free of unsafe code.
    Command::new("kill")
        .args(["-9", &pids[2].to_string()])
        .status()
        .unwrap();
    let output = wait_for_exit(child);
    assert_eq!(output.status.code(), Some(137), "{}", describe(&output));
    assert!(
        text(&output.stderr).contains("rank 1 (pid"),
        "{}",
        describe(&output)
    );
    for pid in pids {
        assert!(
            wait_until(Duration::from_secs(3), || !is_alive(pid)),
            "pid {pid} survived"
        );
    }
    std::fs::remove_dir_all(directory).unwrap();
}

#[test]
fn sigterm_to_mpiexec_tears_the_job_down() {
    let directory = scratch_directory("sigterm");
    let script = format!(
        "echo $$ > {}/rank.$PMI_RANK; exec sleep 30",
        directory.display()
    );
    let child = Command::new(mpiexec())
        .args(["-n", "2", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids: Vec<i32> = (0..2)
        .map(|rank| read_pid(&directory.join(format!("rank.{rank}"))))
        .collect();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let output = wait_for_exit(child);
    assert_eq!(
        output.status.code(),
        Some(128 + 15),
        "{}",
        describe(&output)
    );
    assert!(
        text(&output.stderr).contains("received SIGTERM"),
        "{}",
        describe(&output)
    );
    for pid in pids {
        assert!(
            wait_until(Duration::from_secs(3), || !is_alive(pid)),
            "pid {pid} survived"
        );
    }
    std::fs::remove_dir_all(directory).unwrap();
}

#[test]
fn ranks_die_when_mpiexec_is_killed_with_sigkill() {
    let directory = scratch_directory("parent-death");
    let script = format!(
        "echo $$ > {}/rank.$PMI_RANK; exec sleep 30",
        directory.display()
    );
    let mut child = Command::new(mpiexec())
        .args(["-n", "2", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids: Vec<i32> = (0..2)
        .map(|rank| read_pid(&directory.join(format!("rank.{rank}"))))
        .collect();
    child.kill().unwrap();
    child.wait().unwrap();
    for pid in pids {
        assert!(
            wait_until(Duration::from_secs(3), || !is_alive(pid)),
            "pid {pid} survived"
        );
    }
    std::fs::remove_dir_all(directory).unwrap();
}

/// A launcher-exec for tests: `fake-launcher HOST CMD…` runs CMD here with
/// `FAKE_HOST=HOST` (like `ssh HOST CMD…` would run it there). With
/// `linger` it stays alive after CMD ends, as an ssh to a dead host may.
fn fake_launcher(directory: &std::path::Path, linger: bool) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = directory.join(if linger {
        "lingering-launcher"
    } else {
        "fake-launcher"
    });
    let body = if linger {
        "#!/bin/sh\nhost=$1; shift\nFAKE_HOST=$host \"$@\"\nsleep 30\n"
    } else {
        "#!/bin/sh\nhost=$1; shift\nFAKE_HOST=$host exec \"$@\"\n"
    };
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn remote_ranks_reach_the_pmi_server_through_their_hosts_proxy() {
    let directory = scratch_directory("remote");
    let launcher = fake_launcher(&directory, false);
    let probe = probe();
    let output = run(&[
        "--hosts",
        "far-a,far-b:2",
        "-n",
        "4",
        "--launcher-exec",
        launcher.to_str().unwrap(),
        "--control-addr",
        "127.0.0.1",
        probe.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    // far-a gets rank 0 and (after wrapping) rank 3; far-b ranks 1 and 2.
    for (rank, local, local_size) in [(0, 0, 2), (1, 0, 2), (2, 1, 2), (3, 1, 2)] {
        let neighbour = (rank + 1) % 4;
        assert!(
            stdout.contains(&format!(
                "rank {rank} of 4 (local {local} of {local_size}, universe 4,"
            )) && stdout.contains(&format!(
                "got 'from-rank-{neighbour}:a=b' from rank {neighbour}"
            )),
            "rank {rank}: {}",
            describe(&output)
        );
    }
    let output = run(&[
        "--hosts",
        "far-a,localhost",
        "-n",
        "2",
        "--launcher-exec",
        launcher.to_str().unwrap(),
        "--control-addr",
        "127.0.0.1",
        "sh",
        "-c",
        "echo rank=$PMI_RANK host=${FAKE_HOST:-here} key=${RESMPI_HOST_KEY:-none} port=${PMI_PORT:-none} fd=${PMI_FD:-none}",
    ]);
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("rank=0 host=far-a key=far-a port=none fd="),
        "{stdout}"
    );
    assert!(
        stdout.contains("rank=1 host=here key=none port=none fd="),
        "{stdout}"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn a_remote_rank_that_dies_is_named_with_its_host() {
    let directory = scratch_directory("remote-death");
    let probe = probe();
    for linger in [false, true] {
        let launcher = fake_launcher(&directory, linger);
        let started = Instant::now();
        let output = run(&[
            "--hosts",
            "far-a,far-b",
            "--launcher-exec",
            launcher.to_str().unwrap(),
            "--control-addr",
            "127.0.0.1",
            probe.to_str().unwrap(),
            "exit",
            "5",
            "1",
        ]);
        let stderr = text(&output.stderr);
        // The proxy reports the rank's own exit, whether or not its launcher
        // (sleep 30 after the proxy) lingers.
        assert!(
            stderr.contains("mpiexec: rank 1 on host far-b (pid "),
            "{}",
            describe(&output)
        );
        assert_eq!(output.status.code(), Some(5), "{}", describe(&output));
        assert!(
            stderr.contains("exited with code 5 before MPI_Finalize"),
            "{stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}",
            describe(&output)
        );
    }
    std::fs::remove_dir_all(&directory).unwrap();
}

/// Every process's command line that this user can read, as text
/// (NULs between the words become blanks).
fn every_command_line() -> Vec<(String, String)> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) {
            let words = String::from_utf8_lossy(&bytes).replace('\0', " ");
            lines.push((name, words));
        }
    }
    lines
}

/// A launcher that keeps a copy of the bootstrap line mpiexec writes on its
/// stdin (so the test knows the proxy token) and hands the line on to the
/// proxy. As `ssh` it runs its words through a shell, as ssh does; else it
/// runs them as they are. `read` and `printf` are shell builtins: the line
/// is never an argument of a process.
fn recording_launcher(directory: &std::path::Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = directory.join(name);
    let run = if name == "ssh" {
        "sh -c \"$*\""
    } else {
        "\"$@\""
    };
    let body = format!(
        "#!/bin/sh\nhost=$1; shift\nIFS= read -r line\nprintf '%s\\n' \"$line\" > {}/bootstrap-$host\n\
         printf '%s\\n' \"$line\" | FAKE_HOST=$host {run}\n",
        directory.display()
    );
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn no_secret_or_token_is_on_any_command_line_while_a_multi_host_job_runs() {
    for launcher_name in ["ssh", "recording-launcher"] {
        let directory = scratch_directory(&format!("secrets-{launcher_name}"));
        let launcher = recording_launcher(&directory, launcher_name);
        let release = directory.join("release");
        // Each rank writes down the secret it was given, then waits for the
        // test to have looked at every command line.
        let script = format!(
            "echo \"$RESMPI_JOB_SECRET\" > {dir}/secret-$PMI_RANK.tmp && mv {dir}/secret-$PMI_RANK.tmp {dir}/secret-$PMI_RANK; \
             while [ ! -e {release} ]; do sleep 0.05; done",
            dir = directory.display(),
            release = release.display()
        );
        let mut arguments = vec!["--hosts", "far-a,far-b,localhost", "-n", "3"];
        if launcher_name != "ssh" {
            arguments.extend(["--launcher-exec", launcher.to_str().unwrap()]);
        }
        arguments.extend(["--control-addr", "127.0.0.1", "sh", "-c", &script]);
        let mut command = command(&arguments);
        let path = std::env::var("PATH").unwrap_or_default();
        command.env("PATH", format!("{}:{path}", directory.display()));
        let child = command.spawn().unwrap();
        let secret_files: Vec<PathBuf> = (0..3)
            .map(|rank| directory.join(format!("secret-{rank}")))
            .collect();
        let started = wait_until(Duration::from_secs(20), || {
            secret_files.iter().all(|file| file.exists())
        });
        let lines = every_command_line();
        std::fs::write(&release, "").unwrap();
        let output = wait_for_exit(child);
        assert!(started, "{launcher_name}: {}", describe(&output));
        assert!(
            output.status.success(),
            "{launcher_name}: {}",
            describe(&output)
        );
        let secret = std::fs::read_to_string(&secret_files[0])
            .unwrap()
            .trim()
            .to_string();
        assert_eq!(secret.len(), 64, "{launcher_name}: secret '{secret}'");
        for file in &secret_files {
            assert_eq!(std::fs::read_to_string(file).unwrap().trim(), secret);
        }
        let mut tokens = Vec::new();
        for host in ["far-a", "far-b"] {
            let line =
                std::fs::read_to_string(directory.join(format!("bootstrap-{host}"))).unwrap();
            let token = line
                .split_whitespace()
                .find_map(|word| word.strip_prefix("token="))
                .unwrap_or_else(|| panic!("{launcher_name}: no token in '{line}'"))
                .to_string();
            assert!(token.len() >= 16, "{launcher_name}: token '{token}'");
            tokens.push(token);
        }
        // The scan saw the job: the ranks' own command lines, and the
        // proxies, are among the lines read.
        let ranks_seen = lines
            .iter()
            .filter(|(_, line)| line.contains(&format!("while [ ! -e {}", release.display())))
            .count();
        assert!(
            ranks_seen >= 3,
            "{launcher_name}: saw {ranks_seen} ranks in {lines:?}"
        );
        assert!(
            lines
                .iter()
                .filter(|(_, line)| line.contains("--proxy"))
                .count()
                >= 2,
            "{launcher_name}: no proxies in {lines:?}"
        );
        for (pid, line) in &lines {
            assert!(
                !line.contains(&secret),
                "{launcher_name}: the job secret is in the command line of {pid}: {line}"
            );
            for token in &tokens {
                assert!(
                    !line.contains(token.as_str()),
                    "{launcher_name}: a proxy token is in the command line of {pid}: {line}"
                );
            }
        }
        std::fs::remove_dir_all(&directory).unwrap();
    }
}

#[test]
fn idle_connections_to_the_control_port_do_not_stop_the_proxies() {
    use std::os::unix::fs::PermissionsExt;
    const STRANGER_COUNT: usize = 100;
    let directory = scratch_directory("control-port-strangers");
    let go = directory.join("go");
    // Keeps the bootstrap line (the control address is in it) and starts
    // the proxy only once the test has connected its strangers.
    let launcher = directory.join("waiting-launcher");
    std::fs::write(
        &launcher,
        format!(
            "#!/bin/sh\nhost=$1; shift\nIFS= read -r line\nprintf '%s\\n' \"$line\" > {dir}/bootstrap-$host\n\
             while [ ! -e {go} ]; do sleep 0.02; done\nprintf '%s\\n' \"$line\" | FAKE_HOST=$host \"$@\"\n",
            dir = directory.display(),
            go = go.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let child = command(&[
        "--hosts",
        "far-a,far-b",
        "--launcher-exec",
        launcher.to_str().unwrap(),
        "--control-addr",
        "127.0.0.1",
        "sh",
        "-c",
        "echo rank $PMI_RANK ran",
    ])
    .spawn()
    .unwrap();
    let bootstrap = directory.join("bootstrap-far-a");
    let appeared = wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&bootstrap).is_ok_and(|line| line.ends_with('\n'))
    });
    let mut strangers = Vec::new();
    if appeared {
        let line = std::fs::read_to_string(&bootstrap).unwrap();
        let address = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("address="))
            .unwrap()
            .to_string();
        // Each connects and says nothing (one says a little, not a hello).
        for _ in 0..STRANGER_COUNT {
            strangers.push(std::net::TcpStream::connect(&address).unwrap());
        }
        use std::io::Write;
        strangers[0].write_all(b"GET / HTTP/1.0\r\n").unwrap();
    }
    std::fs::write(&go, "").unwrap();
    let output = wait_for_exit(child);
    drop(strangers);
    assert!(appeared, "{}", describe(&output));
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("rank 0 ran") && stdout.contains("rank 1 ran"),
        "{}",
        describe(&output)
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

/// The `mpiexec: FT report:` lines of `stderr`.
fn report_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|line| line.starts_with("mpiexec: FT report:"))
        .collect()
}

#[test]
fn ft_reports_of_every_rank_are_summed_printed_and_written_as_json() {
    let directory = scratch_directory("ft-report");
    let json = directory.join("report.json");
    let probe = report_probe();
    let output = run(&[
        "-n",
        "3",
        "--report-json",
        json.to_str().unwrap(),
        probe.to_str().unwrap(),
        "frames_sent={rank}0;corrupt_caught=1;failover_time_ns=40000000;injected_dropped=2;future_counter=5",
    ]);
    assert!(output.status.success(), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert_eq!(
        report_lines(&stderr),
        [
            "mpiexec: FT report: 3 ranks reported; fragments sent 30, retransmitted 0, \
          corrupt caught 3, duplicates dropped 0, rails failed 0, recovered 0, failover 0.120 s; \
          injected: dropped 6, corrupted 0, duplicated 0, delayed 0, rail-down swallowed 0; \
          other: future_counter 15"
        ],
        "{}",
        describe(&output)
    );
    assert_eq!(
        std::fs::read_to_string(&json).unwrap(),
        "{\"ranks_reported\": 3, \"counters\": {\"frames_sent\": 30, \
         \"frames_retransmitted\": 0, \"corrupt_caught\": 3, \"duplicates_dropped\": 0, \
         \"rails_failed\": 0, \"rails_recovered\": 0, \"failover_time_ns\": 120000000, \
         \"injected_dropped\": 6, \"injected_corrupted\": 0, \"injected_duplicated\": 0, \
         \"injected_delayed\": 0, \"injected_swallowed_rail_down\": 0, \"tail_loss_probes\": 0, \
         \"spurious_retransmissions\": 0, \"future_counter\": 15, \"processes_lost\": 0, \"failure_notices_sent\": 0, \"detection_latency_us_max\": 0, \
         \"replicas_given_up\": 0, \"replicas_recovered\": 0, \"recovery_us_max\": 0}, \"exit_code\": 0}\n"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn a_failed_job_still_reports_with_its_exit_code() {
    let directory = scratch_directory("ft-report-failed");
    let json = directory.join("report.json");
    let probe = report_probe();
    let output = run(&[
        "-n",
        "2",
        "--checksum",
        "crc32c",
        "--report-json",
        json.to_str().unwrap(),
        probe.to_str().unwrap(),
        "frames_sent=7;frames_retransmitted={rank}",
        "fail",
        "1",
        "3",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    let stderr = text(&output.stderr);
    let lines = report_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with(
            "mpiexec: FT report: 2 ranks reported; fragments sent 14, retransmitted 1,"
        ),
        "{stderr}"
    );
    let written = std::fs::read_to_string(&json).unwrap();
    assert!(written.starts_with("{\"ranks_reported\": 2, "), "{written}");
    assert!(
        written.contains("\"frames_sent\": 14, \"frames_retransmitted\": 1,"),
        "{written}"
    );
    assert!(written.ends_with(", \"exit_code\": 3}\n"), "{written}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn the_ft_report_is_printed_only_for_nonzero_counters_or_ft_options() {
    let probe = report_probe();
    let probe = probe.to_str().unwrap();
    // Zero counters, no FT option: silent.
    let output = run(&["-n", "2", probe, "frames_sent=0;rails_failed=0"]);
    assert!(output.status.success(), "{}", describe(&output));
    assert!(
        report_lines(&text(&output.stderr)).is_empty(),
        "{}",
        describe(&output)
    );
    // No report at all, no FT option (an ordinary job): silent.
    let output = run(&["-n", "2", probe, "none"]);
    assert!(output.status.success(), "{}", describe(&output));
    assert!(text(&output.stderr).is_empty(), "{}", describe(&output));
    // An FT option asks for the report even when nothing was reported.
    let output = run(&["-n", "2", "--reliable=on", probe, "none"]);
    assert!(output.status.success(), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert_eq!(
        report_lines(&stderr),
        [
            "mpiexec: FT report: 0 ranks reported; fragments sent 0, retransmitted 0, \
          corrupt caught 0, duplicates dropped 0, rails failed 0, recovered 0, failover 0.000 s; \
          injected: dropped 0, corrupted 0, duplicated 0, delayed 0, rail-down swallowed 0"
        ],
        "{stderr}"
    );
    // One non-zero counter of one rank is enough.
    let output = run(&["-n", "3", probe, "rails_failed={rank}"]);
    assert!(output.status.success(), "{}", describe(&output));
    let stderr = text(&output.stderr);
    let lines = report_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("3 ranks reported;") && lines[0].contains("rails failed 3,"),
        "{stderr}"
    );
}

#[test]
fn ft_options_reach_every_rank_as_variables() {
    let output = run(&[
        "-n",
        "2",
        "--inject",
        " drop:1e-2 , seed:9",
        "--checksum=none",
        "--reliable",
        "off",
        "--rails=tcp:lo,tcp:127.0.0.0/8",
        "--stripe",
        "round-robin",
        "sh",
        "-c",
        "echo \"$PMI_RANK|$RESMPI_INJECT|$RESMPI_CHECKSUM|$RESMPI_RELIABLE|$RESMPI_RAILS|$RESMPI_STRIPE\"",
    ]);
    assert!(output.status.success(), "{}", describe(&output));
    let mut lines: Vec<String> = text(&output.stdout).lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "0|seed:9,drop:0.01|none|off|tcp:lo,tcp:127.0.0.0/8|round-robin",
            "1|seed:9,drop:0.01|none|off|tcp:lo,tcp:127.0.0.0/8|round-robin"
        ],
        "{}",
        describe(&output)
    );
    // Programs that report nothing: the FT options still ask for the line.
    assert_eq!(
        report_lines(&text(&output.stderr)).len(),
        1,
        "{}",
        describe(&output)
    );
}

#[test]
fn bad_ft_options_exit_2_before_starting_anything() {
    let directory = scratch_directory("ft-bad-options");
    let marker = directory.join("started");
    let script = format!("touch {}", marker.display());
    for (option, value, needle) in [
        ("--inject", "drop:1.5", "--inject item 1 `drop:1.5`"),
        ("--inject", "explode:1", "expected one of"),
        (
            "--checksum",
            "sha1",
            "--checksum 'sha1': expected none or crc32c",
        ),
        (
            "--reliable",
            "maybe",
            "--reliable 'maybe': expected on or off",
        ),
        ("--rails", "tcp:10.1.2.0/40", "--rails item 1"),
        ("--rails", "ib:mlx5_0", "only tcp:"),
        ("--stripe", "zigzag", "--stripe 'zigzag'"),
    ] {
        let output = run(&[option, value, "sh", "-c", &script]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{option} {value}: {}",
            describe(&output)
        );
        let stderr = text(&output.stderr);
        assert!(
            stderr.starts_with("mpiexec: ") && stderr.contains(needle),
            "{option} {value}: {stderr}"
        );
        assert!(!marker.exists(), "{option} {value} started a rank");
    }
    let output = run(&["--help"]);
    let usage = text(&output.stdout);
    for option in [
        "--inject SPEC",
        "--checksum none|crc32c",
        "--reliable on|off",
        "--rails tcp:",
        "--stripe round-robin|fragments|off",
        "--report-json FILE",
    ] {
        assert!(usage.contains(option), "--help lacks {option}");
    }
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn every_option_value_is_checked_against_the_job_and_this_host_before_it_starts() {
    let directory = scratch_directory("checked-values");
    let marker = directory.join("started");
    let script = format!("touch {}", marker.display());
    let launcher = fake_launcher(&directory, false);
    let launcher = launcher.to_str().unwrap();
    let unwritable = directory.join("no-such-directory/report.json");
    let unwritable = unwritable.to_str().unwrap();
    let remote = ["--hosts", "far-a", "--launcher-exec", launcher];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--rails", "tcp:nosuchif0"],
            "--rails item 1 'tcp:nosuchif0': this host has no interface nosuchif0",
        ),
        (
            vec!["--rails", "tcp:lo,tcp:203.0.113.0/24"],
            "--rails item 2 'tcp:203.0.113.0/24': no address of this host is in 203.0.113.0/24",
        ),
        (
            [&remote[..], &["--control-addr", "999.1.1.1"]].concat(),
            "--control-addr '999.1.1.1': not an IP address or a name",
        ),
        (
            [&remote[..], &["--control-addr", "203.0.113.7"]].concat(),
            "--control-addr '203.0.113.7': mpiexec cannot listen on 203.0.113.7",
        ),
        (
            vec!["-n", "2", "--inject", "drop:0.5@ranks=5-1"],
            "write @ranks=1-5",
        ),
        (
            vec!["-n", "2", "--inject", "drop:0.5@ranks=0-2"],
            "rank 2 is not in this job of 2 ranks",
        ),
        (
            vec!["-n", "2", "--inject", "rail-down:9@1s"],
            "rail 9 does not exist: the job has 1 rail",
        ),
        (vec!["--report-json", unwritable], "--report-json '"),
    ];
    for (arguments, needle) in cases {
        let mut words = arguments.clone();
        words.extend(["sh", "-c", &script]);
        let output = run(&words);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{arguments:?}: {}",
            describe(&output)
        );
        let stderr = text(&output.stderr);
        assert!(
            stderr.starts_with("mpiexec: ") && stderr.contains(needle),
            "{arguments:?}: {stderr}"
        );
        assert!(!marker.exists(), "{arguments:?} started a rank");
    }
    assert!(!std::path::Path::new(unwritable).exists());
    // The same options with good values run, locally and through a proxy.
    let report = directory.join("report.json");
    let output = run(&[
        "-n",
        "2",
        "--rails",
        "tcp:lo,tcp:127.0.0.0/8",
        "--inject",
        "drop:0.5@ranks=0-1,rail-down:1@1s",
        "--report-json",
        report.to_str().unwrap(),
        "sh",
        "-c",
        &script,
    ]);
    assert!(output.status.success(), "{}", describe(&output));
    assert!(marker.exists() && report.exists(), "{}", describe(&output));
    std::fs::remove_file(&marker).unwrap();
    let output = run(&[
        &remote[..],
        &["--control-addr", "127.0.0.1", "sh", "-c", &script],
    ]
    .concat());
    assert!(output.status.success(), "{}", describe(&output));
    assert!(marker.exists(), "{}", describe(&output));
    std::fs::remove_dir_all(&directory).unwrap();
}

/// The launcher_failure_watcher example.
fn failure_watcher() -> PathBuf {
    example("launcher_failure_watcher")
}

fn stderr_lines_with<'a>(stderr: &'a str, needle: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|line| line.contains(needle))
        .collect()
}

#[test]
fn under_continue_watching_ranks_hear_of_an_injected_kill_and_the_job_ends_137() {
    let directory = scratch_directory("notices");
    let json = directory.join("report.json");
    let watcher = failure_watcher();
    let started = Instant::now();
    let output = run(&[
        "-n",
        "3",
        "--failure-policy",
        "continue",
        "--inject",
        "kill:1@400ms",
        "--report-json",
        json.to_str().unwrap(),
        watcher.to_str().unwrap(),
        "1",
    ]);
    let elapsed = started.elapsed();
    assert_eq!(output.status.code(), Some(137), "{}", describe(&output));
    let stdout = text(&output.stdout);
    let mut heard: Vec<&str> = stdout.lines().collect();
    heard.sort();
    assert_eq!(
        heard,
        [
            "rank 0 heard: cmd=resmpi_failure rank=1 incarnation=0",
            "rank 2 heard: cmd=resmpi_failure rank=1 incarnation=0"
        ],
        "{}",
        describe(&output)
    );
    let stderr = text(&output.stderr);
    assert_eq!(
        stderr_lines_with(&stderr, "the job continues"),
        [
            "WARNING: mpiexec: rank 1 (host localhost) killed by signal 9 (SIGKILL) \u{2014} the job continues (failure policy continue)"
        ],
        "{stderr}"
    );
    let report = stderr_lines_with(&stderr, "FT report");
    assert_eq!(report.len(), 1, "{stderr}");
    assert!(
        report[0].contains(
            "FT report: processes lost 1, failure notices sent 2, detection latency max "
        ),
        "{stderr}"
    );
    let written = std::fs::read_to_string(&json).unwrap();
    assert!(
        written.contains("\"processes_lost\": 1, \"failure_notices_sent\": 2, "),
        "{written}"
    );
    let latency_us: u64 = written
        .split("\"detection_latency_us_max\": ")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no latency in {written}"));
    assert!(
        latency_us > 0 && latency_us < 100_000,
        "detection latency {latency_us} us: the notice must follow the SIGKILL within 100 ms"
    );
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn under_abort_an_injected_kill_ends_the_job_as_any_death_does() {
    let watcher = failure_watcher();
    let started = Instant::now();
    let output = run(&[
        "-n",
        "3",
        "--inject",
        "kill:1@300ms",
        watcher.to_str().unwrap(),
        "1",
    ]);
    assert_eq!(output.status.code(), Some(137), "{}", describe(&output));
    let stderr = text(&output.stderr);
    let cause: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("mpiexec: rank 1 (pid "))
        .collect();
    assert_eq!(cause.len(), 1, "{stderr}");
    assert!(
        cause[0].ends_with(") killed by signal 9 (SIGKILL)"),
        "{stderr}"
    );
    assert!(!stderr.contains("the job continues"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn host_down_kills_every_rank_of_the_host_at_once() {
    let output = run(&[
        "-n",
        "3",
        "--failure-policy=continue",
        "--inject",
        "host-down:localhost@200ms",
        "sh",
        "-c",
        "sleep 20",
    ]);
    assert_eq!(output.status.code(), Some(137), "{}", describe(&output));
    let stderr = text(&output.stderr);
    let mut continued = stderr_lines_with(&stderr, "the job continues");
    continued.sort();
    assert_eq!(continued.len(), 3, "{stderr}");
    for (rank, line) in continued.iter().enumerate() {
        assert!(
            line.starts_with(&format!(
                "WARNING: mpiexec: rank {rank} (host localhost) killed by signal 9 (SIGKILL)"
            )),
            "{stderr}"
        );
    }
    assert!(stderr.contains("processes lost 3"), "{stderr}");
}

#[test]
fn under_continue_mpiexec_waits_for_the_others_and_exits_with_the_first_failure() {
    let started = Instant::now();
    // Rank 0 fails with 5 at once; rank 1 with 7 later; rank 2 ends well.
    // None speaks PMI, so only non-zero exits are failures.
    let output = run(&[
        "-n",
        "3",
        "-disable-auto-cleanup",
        "sh",
        "-c",
        "case $PMI_RANK in 0) exit 5;; 1) sleep 1; exit 7;; *) sleep 2; echo done $PMI_RANK;; esac",
    ]);
    assert_eq!(output.status.code(), Some(5), "{}", describe(&output));
    assert_eq!(text(&output.stdout), "done 2\n", "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert_eq!(
        stderr_lines_with(&stderr, "the job continues"),
        [
            "WARNING: mpiexec: rank 0 (host localhost) exited with code 5 before MPI_Finalize \u{2014} the job continues (failure policy continue)",
            "WARNING: mpiexec: rank 1 (host localhost) exited with code 7 before MPI_Finalize \u{2014} the job continues (failure policy continue)",
        ],
        "{stderr}"
    );
    assert!(started.elapsed() >= Duration::from_secs(2));
}

#[test]
fn the_failure_policy_reaches_every_rank() {
    for (options, expected) in [
        (&[][..], "abort"),
        (&["--with-ft", "ulfm"][..], "continue"),
        (&["--failure-policy", "abort"][..], "abort"),
    ] {
        let mut arguments = options.to_vec();
        arguments.extend(["-n", "2", "sh", "-c", "echo $RESMPI_FAILURE_POLICY"]);
        let output = run(&arguments);
        assert!(output.status.success(), "{}", describe(&output));
        assert_eq!(
            text(&output.stdout),
            format!("{expected}\n{expected}\n"),
            "{options:?}"
        );
    }
}

#[test]
fn bad_failure_options_and_process_faults_exit_2_before_anything_runs() {
    let directory = scratch_directory("bad-process-faults");
    let marker = directory.join("ran");
    let program = format!("touch {}", marker.display());
    for (options, needle) in [
        (&["--with-ft", "bogus"][..], "--with-ft 'bogus': expected ulfm or mpi or no"),
        (
            &["--inject", "kill:9@1s"][..],
            "--inject item `kill:9@1s`: rank 9 is not in this job of 2 ranks",
        ),
        (
            &["--inject", "kill:1.1@1s"][..],
            "--inject item `kill:1.1@1s`: replica 1: no replicas in this job",
        ),
        (
            &["--inject", "host-down:elsewhere@1s"][..],
            "--inject item `host-down:elsewhere@1s`: no rank of this job runs on host elsewhere (hosts with ranks: localhost)",
        ),
        (
            &["--inject", "kill:1@sends=0"][..],
            "--inject item 1 `kill:1@sends=0`",
        ),
    ] {
        let mut arguments = options.to_vec();
        arguments.extend(["-n", "2", "sh", "-c", &program]);
        let output = run(&arguments);
        assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
        let stderr = text(&output.stderr);
        assert!(stderr.starts_with("mpiexec: "), "{stderr}");
        assert!(stderr.contains(needle), "{options:?}: {stderr}");
        assert!(!marker.exists(), "{options:?} started the program");
    }
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn under_continue_the_timeout_still_ends_the_job_and_is_named() {
    let started = Instant::now();
    let output = run(&[
        "-n",
        "2",
        "--failure-policy",
        "continue",
        "--inject",
        "kill:1@200ms",
        "--timeout",
        "2",
        "sh",
        "-c",
        "sleep 20",
    ]);
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "mpiexec: rank 1 (host localhost) killed by signal 9 (SIGKILL) \u{2014} the job continues"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("mpiexec: job timed out after 2 s"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn under_continue_a_remote_death_is_named_and_a_pmi_barrier_waiting_for_it_ends_the_job() {
    let directory = scratch_directory("remote-lost-continue");
    let probe = probe();
    let launcher = fake_launcher(&directory, true);
    let started = Instant::now();
    let output = run(&[
        "--failure-policy",
        "continue",
        "--hosts",
        "far-a,far-b",
        "--launcher-exec",
        launcher.to_str().unwrap(),
        "--control-addr",
        "127.0.0.1",
        probe.to_str().unwrap(),
        "exit",
        "5",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(5), "{}", describe(&output));
    let stderr = text(&output.stderr);
    // Rank 1 leaves before the PMI barrier that rank 0 waits in (the
    // probe's wire-up): the job goes on without rank 1, but that barrier
    // can never complete, so the job ends, with the lost rank's code.
    let lines = stderr_lines_with(&stderr, "rank 1");
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(
        lines[0],
        "WARNING: mpiexec: rank 1 (host far-b) exited with code 5 before MPI_Finalize \
         \u{2014} the job continues (failure policy continue)",
        "{stderr}"
    );
    assert!(lines[1].starts_with("mpiexec: rank 1 on host far-b (pid "));
    assert!(
        lines[1].ends_with(
            ") is gone while other ranks wait for it in a PMI barrier (MPI_Init), \
             which cannot complete; ending the job"
        ),
        "{stderr}"
    );
    // The lingering launcher (sleep 30) was killed, not waited for.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{}",
        describe(&output)
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn a_launcher_that_ends_before_its_proxy_connects_is_named_with_its_status() {
    use std::os::unix::fs::PermissionsExt;
    let directory = scratch_directory("launcher-gone");
    let launcher = directory.join("broken-launcher");
    std::fs::write(&launcher, "#!/bin/sh\necho cannot reach $1 >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let output = run(&[
        "--hosts",
        "far-a",
        "--launcher-exec",
        launcher.to_str().unwrap(),
        "--control-addr",
        "127.0.0.1",
        "true",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("cannot reach far-a"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "mpiexec: the launcher '{}' for host far-a ended (exit status: 3) before its proxy connected",
            launcher.display()
        )),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    std::fs::remove_dir_all(&directory).unwrap();
}
