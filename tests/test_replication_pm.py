"""A replicated job started by another process manager (issue 12, item 1):
hydra's `mpiexec.hydra` and Slurm's `srun` (PMI-2 and PMIx) start N*R
processes of the replication build of the library
(lib/replication/libmpi.so.12) with RESMPI_REPLICAS=R, and the library maps
PMI rank p to rank p % N, replica p / N, as under resmpi's mpiexec. Block
placement (consecutive PMI ranks on one host) then puts replica k of every
rank in the contiguous PMI block k: SDR-MPI's host-group placement.

- Each process is the rank and replica its PMI rank says, MPI_COMM_WORLD
  has N ranks and MPI_UNIVERSE_SIZE counts ranks (replica_identity.c).
- The job's output is the unreplicated run's (replicas other than 0 write
  theirs to /dev/null from MPI_Init on; RESMPI_REPLICA_OUTPUT=all keeps it).
- The library sets RESMPI_REPLICA, which neither process manager can.
- A replica that dies (the program raises SIGKILL, or calls _exit, at a
  given round) is masked: the survivors learn of it from the dead
  process's pidfd, feed it to the replication protocol as a failure
  notice, and the output is the fault-free run's. hydra needs -disable-auto-cleanup (else it kills the
  job on the first bad exit) and a death by exit, not by signal (its proxy
  kills every local process when one is signalled); srun goes on by
  default (--kill-on-bad-exit=0 is given anyway, against a slurm.conf
  that sets KillOnBadExit=1). When every replica of a rank is dead the
  library's error names the rank.

hydra and Slurm missing fails these tests (CI installs them: mpich,
slurmctld, slurmd, slurm-client in scripts/install-deps.sh). Every job is
bounded by a subprocess timeout."""
import os
import shutil
import tempfile

import pytest

from conftest import RESMPI_LIBDIR, run, run_cmd
from test_slurm import _start_slurm, _stop_slurm

pytestmark = pytest.mark.resmpi_only("RESMPI_REPLICAS under another process manager is resmpi's")

ROUNDS = 6
ROUNDS_UNDER_FAULT = 30
PAUSE_MS = 20
REPLICATION_LIBDIR = RESMPI_LIBDIR / "replication"


def hydra():
    path = shutil.which("mpiexec.hydra")
    if path is None:
        pytest.fail("mpiexec.hydra is not installed (scripts/install-deps.sh installs mpich)",
                    pytrace=False)
    return path


def replication_environment(replicas, extra=None):
    if not (REPLICATION_LIBDIR / "libmpi.so.12").exists():
        pytest.fail(f"{REPLICATION_LIBDIR}/libmpi.so.12 is missing: run make", pytrace=False)
    return {"RESMPI_REPLICAS": str(replicas), "LD_LIBRARY_PATH": str(REPLICATION_LIBDIR),
            **(extra or {})}


def hydra_cmd(processes, exe, args, environment, options=()):
    genv = [word for name, value in environment.items() for word in ("-genv", name, value)]
    return [hydra(), *options, *genv, "-n", str(processes), str(exe), *[str(a) for a in args]]


@pytest.fixture(scope="module")
def slurm():
    """test_slurm's one-node Slurm; its absence is a failure here."""
    for tool in ("slurmctld", "slurmd", "srun", "sinfo"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is not installed (scripts/install-deps.sh installs it)", pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("a private Slurm needs root here (slurmd runs the tasks)", pytrace=False)
    with tempfile.TemporaryDirectory(prefix="resmpi-slurm-") as directory:
        try:
            started = _start_slurm(directory)
        except pytest.skip.Exception as why:
            pytest.fail(f"the private Slurm did not start: {why}", pytrace=False)
        try:
            yield started
        finally:
            _stop_slurm(started)


def srun_cmd(slurm, plugin, processes, exe, args, options=()):
    return slurm.srun(f"--mpi={plugin}", *options, "-n", processes, exe, *args)


def under_slurm(slurm, plugin, processes, exe, args, environment, options=(), timeout=90):
    return run_cmd(srun_cmd(slurm, plugin, processes, exe, args, options),
                   env={**slurm.env, **environment}, timeout=timeout)


def fault_free(build, ranks, rounds, pause_ms=0):
    res = run(ranks, build("replication"), rounds, pause_ms, timeout=60)
    assert res.returncode == 0, res.describe()
    assert res.stdout.startswith(f"size {ranks}\n") and res.stdout.endswith("OK\n"), res.describe()
    return res.stdout


CASES = [(2, 2), (3, 2), (2, 3)]
CASE_IDS = [f"N{ranks}-R{replicas}" for ranks, replicas in CASES]


@pytest.mark.parametrize("ranks, replicas", CASES, ids=CASE_IDS)
def test_hydra_runs_a_replicated_job_with_the_unreplicated_output(build, ranks, replicas):
    expected = fault_free(build, ranks, ROUNDS)
    res = run_cmd(hydra_cmd(ranks * replicas, build("replication"), [ROUNDS],
                            replication_environment(replicas)), timeout=90)
    assert res.returncode == 0, res.describe()
    # MPI_COMM_WORLD has N ranks, and each line is printed once.
    assert res.stdout == expected, res.describe()
    assert res.stderr == "", res.describe()


@pytest.mark.parametrize("plugin", ["pmi2", "pmix"])
@pytest.mark.parametrize("ranks, replicas", CASES, ids=CASE_IDS)
def test_srun_runs_a_replicated_job_with_the_unreplicated_output(build, slurm, plugin, ranks, replicas):
    expected = fault_free(build, ranks, ROUNDS)
    res = under_slurm(slurm, plugin, ranks * replicas, build("replication"), [ROUNDS],
                      replication_environment(replicas))
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()


def started_processes(mark_dir):
    return sorted(os.listdir(mark_dir))


def test_hydra_processes_see_their_replica_index(build, tmp_path):
    """replication.c names its mark file RANK.$RESMPI_REPLICA after
    MPI_Init: every (rank, replica) once means the library set it."""
    ranks, replicas = 3, 2
    res = run_cmd(hydra_cmd(ranks * replicas, build("replication"), [2, 0, tmp_path],
                            replication_environment(replicas)), timeout=90)
    assert res.returncode == 0, res.describe()
    assert started_processes(tmp_path) == sorted(
        f"{rank}.{replica}" for rank in range(ranks) for replica in range(replicas)), res.describe()


@pytest.mark.parametrize("plugin", ["pmi2", "pmix"])
def test_srun_processes_see_their_replica_index(build, slurm, plugin, tmp_path):
    ranks, replicas = 2, 3
    res = under_slurm(slurm, plugin, ranks * replicas, build("replication"), [2, 0, tmp_path],
                      replication_environment(replicas))
    assert res.returncode == 0, res.describe()
    assert started_processes(tmp_path) == sorted(
        f"{rank}.{replica}" for rank in range(ranks) for replica in range(replicas)), res.describe()


def identities(ranks, replicas):
    """Block mapping: PMI rank p is rank p % N of replica p / N."""
    return sorted(f"process {process} rank {process % ranks} size {ranks} universe {ranks} "
                  f"replica {process // ranks}" for process in range(ranks * replicas))


@pytest.mark.parametrize("ranks, replicas", [(3, 2), (2, 3)], ids=["N3-R2", "N2-R3"])
def test_hydra_maps_pmi_ranks_to_ranks_and_replicas(build, ranks, replicas):
    res = run_cmd(hydra_cmd(ranks * replicas, build("replica_identity"), [],
                            replication_environment(replicas, {"RESMPI_REPLICA_OUTPUT": "all"})),
                  timeout=90)
    assert res.returncode == 0, res.describe()
    assert sorted(res.stdout.splitlines()) == identities(ranks, replicas), res.describe()


@pytest.mark.parametrize("plugin", ["pmi2", "pmix"])
def test_srun_maps_pmi_ranks_to_ranks_and_replicas(build, slurm, plugin):
    ranks, replicas = 3, 2
    res = under_slurm(slurm, plugin, ranks * replicas, build("replica_identity"), [],
                      replication_environment(replicas, {"RESMPI_REPLICA_OUTPUT": "all"}))
    assert res.returncode == 0, res.describe()
    assert sorted(res.stdout.splitlines()) == identities(ranks, replicas), res.describe()


def test_replica_output_all_keeps_every_replicas_output(build):
    """The once-per-rank output above is the library's doing: with
    RESMPI_REPLICA_OUTPUT=all every replica's lines come out."""
    ranks, replicas = 2, 2
    expected = fault_free(build, ranks, 2)
    res = run_cmd(hydra_cmd(ranks * replicas, build("replication"), [2],
                            replication_environment(replicas, {"RESMPI_REPLICA_OUTPUT": "all"})),
                  timeout=90)
    assert res.returncode == 0, res.describe()
    assert sorted(res.stdout.splitlines()) == sorted(expected.splitlines() * replicas), res.describe()


def doomed(rank, replica, round_index):
    return f"{rank}.{replica}@{round_index}"


@pytest.mark.parametrize("ranks, replicas", [(2, 2), (3, 2)], ids=["N2-R2", "N3-R2"])
def test_a_replica_that_exits_under_hydra_is_masked(build, ranks, replicas):
    """Rank 1's replica 1 calls _exit(1) at round 3 (no MPI_Finalize): its
    siblings and peers see the exit through its pidfd, the replication
    protocol masks it, and the output is the fault-free run's.
    -disable-auto-cleanup keeps hydra from killing the job at the bad exit
    (it sends the others SIGUSR1, which the library takes; hydra still
    returns the dead process's exit code). Not a signal: hydra's proxy
    SIGKILLs every process it started on that host when one is killed by a
    signal, -disable-auto-cleanup or not (MPICH 4.0's pmip.c), so on one
    host that death cannot be masked."""
    expected = fault_free(build, ranks, ROUNDS_UNDER_FAULT, PAUSE_MS)
    res = run_cmd(hydra_cmd(ranks * replicas, build("replication"),
                            [ROUNDS_UNDER_FAULT, PAUSE_MS, "-", 0, doomed(1, 1, 3) + ":exit"],
                            replication_environment(replicas), options=["-disable-auto-cleanup"]),
                  timeout=120)
    assert res.stdout == expected, res.describe()
    assert res.returncode == 1, res.describe()


def test_hydra_without_disable_auto_cleanup_ends_the_job_at_a_death(build):
    """Why the documentation asks for -disable-auto-cleanup: without it
    hydra kills every process at the first bad exit, masked or not."""
    res = run_cmd(hydra_cmd(4, build("replication"),
                            [ROUNDS_UNDER_FAULT, PAUSE_MS, "-", 0, doomed(1, 1, 3) + ":exit"],
                            replication_environment(2)), timeout=120)
    assert res.returncode != 0, res.describe()
    assert "OK" not in res.stdout, res.describe()


@pytest.mark.parametrize("plugin", ["pmi2", "pmix"])
@pytest.mark.parametrize("ranks, replicas", [(2, 2), (3, 2)], ids=["N2-R2", "N3-R2"])
def test_a_replica_killed_under_srun_is_masked(build, slurm, plugin, ranks, replicas):
    expected = fault_free(build, ranks, ROUNDS_UNDER_FAULT, PAUSE_MS)
    res = under_slurm(slurm, plugin, ranks * replicas, build("replication"),
                      [ROUNDS_UNDER_FAULT, PAUSE_MS, "-", 0, doomed(1, 1, 3)],
                      replication_environment(replicas), options=["--kill-on-bad-exit=0"],
                      timeout=120)
    assert res.stdout == expected, res.describe()
    # It did die: PMI rank replica * N + rank, as the mapping says.
    assert f"task {1 * ranks + 1}: Killed" in res.stderr, res.describe()
    assert res.returncode != 0, res.describe()


def test_the_library_without_replication_says_it_masks_no_death(build):
    """lib/libmpi.so.12 maps the processes the same way (the output is the
    unreplicated run's) but masks nothing; PMI rank 0 says so, once."""
    expected = fault_free(build, 2, ROUNDS)
    res = run_cmd(hydra_cmd(4, build("replication"), [ROUNDS],
                            {**replication_environment(2), "LD_LIBRARY_PATH": str(RESMPI_LIBDIR)}),
                  timeout=90)
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    assert res.stderr.count("a process's death will end the job") == 1, res.describe()


def test_srun_lets_the_survivors_run_on_by_default(build, slurm):
    """No --kill-on-bad-exit: Slurm's default (KillOnBadExit=0, unset in
    this slurm.conf) keeps the step going after a task is killed."""
    ranks, replicas = 2, 2
    expected = fault_free(build, ranks, ROUNDS_UNDER_FAULT, PAUSE_MS)
    res = under_slurm(slurm, "pmi2", ranks * replicas, build("replication"),
                      [ROUNDS_UNDER_FAULT, PAUSE_MS, "-", 0, doomed(1, 1, 3)],
                      replication_environment(replicas), timeout=120)
    assert res.stdout == expected, res.describe()
    assert f"task {1 * ranks + 1}: Killed" in res.stderr, res.describe()


@pytest.mark.parametrize("plugin", ["pmi2", "pmix"])
def test_every_replica_of_a_rank_killed_under_srun_ends_the_job_naming_it(build, slurm, plugin):
    """Both replicas of rank 1 raise SIGKILL at round 3: nothing can mask
    that, and with no resmpi mpiexec to say so the library's error names
    the rank; the job ends (bounded by the subprocess timeout)."""
    res = under_slurm(slurm, plugin, 4, build("replication"),
                      [ROUNDS_UNDER_FAULT, PAUSE_MS, "-", 0, "1.*@3"],
                      replication_environment(2), options=["--kill-on-bad-exit=0"], timeout=120)
    assert res.returncode != 0, res.describe()
    assert "every replica of rank 1 has died" in res.stderr, res.describe()
    assert "OK" not in res.stdout, res.describe()
