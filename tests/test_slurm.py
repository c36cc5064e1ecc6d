"""resmpi under Slurm (issue 15, item 1): a one-node Slurm (slurmctld +
slurmd from Debian's slurm-wlm, configured in a temporary directory, no
munge: auth/none) and jobs started with `srun`.

- `srun --mpi=pmi2` (the library's PMI-2 client, PMI_JOBID set) and
  `srun --mpi=pmix` (its PMIx client over Debian's libpmix): the job runs,
  and its results are those of the same program under resmpi's mpiexec.
- `srun --mpi=none`: a clear error, not N singletons.
- A rank killed under srun: Slurm tells the other ranks nothing, so they
  learn it from the dead process's pidfd and the job ends in bounded time
  with the rank named, as under mpiexec.

Needs root (slurmd runs the tasks as root here); CI runs as root. Where
Slurm cannot be started the tests fail in CI (RESMPI_TEST_SKIPS_FAIL)."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import MPIEXEC, assert_ok, launch, mpiexec_cmd, run_cmd

pytestmark = pytest.mark.resmpi_only("the PMI-2/PMIx clients and Slurm integration are resmpi's")

HOST_LINE = re.compile(r"^HOST (\d+) (\d+) ", re.M)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurm:
    def __init__(self, directory):
        self.directory = Path(directory)
        self.conf = self.directory / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons = []

    def srun(self, *args):
        return ["srun", *[str(a) for a in args]]

    def log_tail(self):
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            path = self.directory / name
            if path.exists():
                out.append(f"--- {name} ---\n" + "\n".join(path.read_text().splitlines()[-20:]))
        return "\n".join(out)


def _start_slurm(directory):
    for tool in ("slurmctld", "slurmd", "srun", "sinfo"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (scripts/install-deps.sh installs slurm-wlm)")
    if os.geteuid() != 0:
        pytest.skip("a private Slurm needs root here (slurmd runs the tasks)")
    slurm = Slurm(directory)
    host = socket.gethostname().split(".")[0]
    d = slurm.directory
    (d / "state").mkdir()
    (d / "spool").mkdir()
    slurm.conf.write_text(f"""ClusterName=resmpitest
SlurmctldHost={host}(127.0.0.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SwitchType=switch/none
SlurmdParameters=config_overrides
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
    for daemon in ("slurmctld", "slurmd"):
        slurm.daemons.append(subprocess.Popen(
            [daemon, "-D", "-f", str(slurm.conf)], stdout=subprocess.DEVNULL,
            stderr=open(d / f"{daemon}.out", "w"), start_new_session=True))
    deadline = time.monotonic() + 30
    state = ""
    while time.monotonic() < deadline:
        res = subprocess.run(["sinfo", "-h", "-o", "%t"], env=slurm.env, capture_output=True, text=True)
        state = res.stdout.strip()
        if state == "idle":
            return slurm
        time.sleep(0.3)
    _stop_slurm(slurm)
    pytest.skip(f"the private Slurm did not come up in 30 s (node state {state!r})\n{slurm.log_tail()}")


def _stop_slurm(slurm):
    # Steps still running (a failed test) end first, then the daemons.
    subprocess.run(["scancel", "--full", "--signal=KILL", "--user=root"], env=slurm.env,
                   capture_output=True, timeout=20)
    for daemon in slurm.daemons:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGTERM)
    for daemon in slurm.daemons:
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()


@pytest.fixture(scope="module")
def slurm():
    with tempfile.TemporaryDirectory(prefix="resmpi-slurm-") as directory:
        slurm = _start_slurm(directory)
        try:
            yield slurm
        finally:
            _stop_slurm(slurm)


@pytest.mark.parametrize("plugin", ["pmi2", "pmix"])
def test_srun_runs_a_job_of_four_ranks(build, slurm, plugin):
    exe = build("hosts")
    res = run_cmd(slurm.srun(f"--mpi={plugin}", "-n", 4, exe), env=slurm.env, timeout=60)
    assert_ok(res)
    ranks = {int(m[1]): int(m[2]) for m in HOST_LINE.finditer(res.stdout)}
    assert ranks == {0: 4, 1: 4, 2: 4, 3: 4}, res.describe()


@pytest.mark.parametrize("plugin, program", [("pmi2", "coll"), ("pmi2", "p2p"), ("pmix", "coll")])
def test_srun_gives_the_results_of_mpiexec(build, slurm, plugin, program):
    """The same self-checking program, the same output under srun (PMI-2,
    PMIx) and under resmpi's mpiexec (PMI-1), line for line."""
    exe = build(program)
    under_srun = run_cmd(slurm.srun(f"--mpi={plugin}", "-n", 4, exe), env=slurm.env, timeout=90)
    assert_ok(under_srun)
    under_mpiexec = run_cmd(mpiexec_cmd(4, exe), timeout=90)
    assert_ok(under_mpiexec)
    assert sorted(under_srun.stdout.splitlines()) == sorted(under_mpiexec.stdout.splitlines()), \
        under_srun.describe()


def test_srun_without_pmi_is_a_clear_error(build, slurm):
    """Not two singletons each believing it is the whole job."""
    exe = build("hosts")
    res = run_cmd(slurm.srun("--mpi=none", "-n", 2, exe), env=slurm.env, timeout=60)
    assert res.returncode != 0, res.describe()
    assert "without a PMI connection" in res.stderr and "srun --mpi=pmi2" in res.stderr, res.describe()
    assert "OK" not in res.stdout, res.describe()


@pytest.mark.parametrize("plugin, mode", [("pmi2", ["block"]), ("pmix", ["block"]),
                                          ("pmi2", ["barrier", "2"])],
                         ids=["pmi2-recv", "pmix-recv", "pmi2-barrier"])
def test_a_rank_killed_under_srun_ends_the_job_naming_it(build, slurm, plugin, mode):
    """kill -9 of rank 2 while every other rank waits in MPI_Recv (block)
    or in a shared-memory MPI_Barrier rank 2 never entered (barrier):
    Slurm tells the others nothing; they see the exit through a pidfd and
    fail their call naming rank 2, so srun ends in seconds, not at its
    time limit."""
    exe = build("hosts")
    p = launch(slurm.srun(f"--mpi={plugin}", "-n", 4, exe, *mode), env=slurm.env)
    pids, lines = {}, []
    try:
        deadline = time.monotonic() + 30
        while len(pids) < 4 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.match(r"PID (\d+) (\d+)", line)
            if m:
                pids[int(m[1])] = int(m[2])
        assert len(pids) == 4, f"ranks did not all report: {pids}\n{''.join(lines)}"
        t0 = time.monotonic()
        os.kill(pids[2], signal.SIGKILL)
        code = p.wait(timeout=20)
        elapsed = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    err = p.stderr.read()
    assert code != 0, err
    assert "rank 2 on this host exited before MPI_Finalize" in err, err
    assert elapsed < 15, f"the job took {elapsed:.1f} s to end\n{err}"


@pytest.mark.parametrize("plugin", ["pmi2", "pmix"])
def test_mpi_abort_under_srun_ends_the_step_with_its_code(build, slurm, plugin):
    """MPI_Abort(WORLD, 7) on rank 1 while the others wait in MPI_Recv:
    the process manager ends the step; rank 1's exit code is 7."""
    exe = build("launcher")
    res = run_cmd(slurm.srun(f"--mpi={plugin}", "-n", 4, exe, "abort", 7, 1), env=slurm.env, timeout=60)
    assert res.returncode != 0, res.describe()
    assert "rank 1 called MPI_Abort with error code 7" in res.stderr, res.describe()
    assert re.search(r"task 1: Exited with exit code 7", res.stderr), res.describe()
    assert "FAIL" not in res.stdout, res.describe()
