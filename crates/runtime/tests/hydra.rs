//! The PMI-1 client against real process managers: MPICH's `mpiexec.hydra`
//! (both its inherited-fd and its `-pmi-port` models) and, when it has been
//! built, our own `mpiexec`. The probe example does put / barrier / get of a
//! neighbour's key on every rank; each rank must print the neighbour's value.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/`, found from this test binary (`target/<profile>/deps/`).
fn profile_directory() -> PathBuf {
    let executable = std::env::current_exe().unwrap();
    executable.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The probe example, which `cargo test` builds before running tests.
fn probe_path() -> PathBuf {
    profile_directory().join("examples").join("pmi_probe")
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|directory| directory.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Runs `launcher arguments... probe -n 3` with a deadline and checks that
/// each of the three ranks got its neighbour's value.
fn run_probe(launcher: &Path, extra_arguments: &[&str]) {
    let probe = probe_path();
    assert!(
        probe.is_file(),
        "missing {}: run `cargo test -p resmpi-runtime` without --test filters (cargo builds examples only then)",
        probe.display()
    );
    let child = Command::new("timeout")
        .arg("30")
        .arg(launcher)
        .args(extra_arguments)
        .args(["-n", "3"])
        .arg(&probe)
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} {extra_arguments:?} failed: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        launcher.display(),
        output.status
    );
    for rank in 0..3 {
        let neighbour = (rank + 1) % 3;
        let expected = format!("got 'from-rank-{neighbour}:a=b' from rank {neighbour}");
        assert!(
            stdout
                .lines()
                .any(|line| line.contains(&format!("rank {rank} of 3")) && line.contains(&expected)),
            "rank {rank} did not report '{expected}'\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
}

#[test]
fn probe_exchanges_keys_under_mpich_hydra() {
    let Some(hydra) = find_in_path("mpiexec.hydra") else {
        println!("SKIP probe_exchanges_keys_under_mpich_hydra: mpiexec.hydra is not in PATH");
        return;
    };
    run_probe(&hydra, &[]);
}

#[test]
fn probe_exchanges_keys_under_mpich_hydra_pmi_port() {
    let Some(hydra) = find_in_path("mpiexec.hydra") else {
        println!(
            "SKIP probe_exchanges_keys_under_mpich_hydra_pmi_port: mpiexec.hydra is not in PATH"
        );
        return;
    };
    run_probe(&hydra, &["-pmi-port"]);
}

#[test]
fn probe_exchanges_keys_under_our_mpiexec() {
    let ours = profile_directory().join("mpiexec");
    if !ours.is_file() {
        println!(
            "SKIP probe_exchanges_keys_under_our_mpiexec: {} is not built (cargo test -p resmpi-launcher runs the same check)",
            ours.display()
        );
        return;
    }
    run_probe(&ours, &[]);
}

#[test]
fn probe_runs_as_a_singleton_without_a_launcher() {
    let output = Command::new(probe_path())
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains("rank 0 of 1") && stdout.contains("got 'from-rank-0:a=b' from rank 0"),
        "{stdout}"
    );
}
