"""Nothing a job puts in /dev/shm outlives it, whoever is killed and when
(issue 16, item 3).

Each test runs its job with a /dev/shm of its own: a fresh tmpfs, bind
mounted over /dev/shm in a private mount namespace (``unshare --mount``;
root only), so that what is left there after the job can only be the job's
and concurrent jobs of other users or worktrees cannot disturb the check.
Without root the host's /dev/shm is compared before and after instead
(entries that go away again within a few seconds belong to someone else's
running job).

The moments: mpiexec (resmpi's, or MPICH's hydra with resmpi's library)
killed with SIGKILL right after the start, while ranks wait inside
MPI_Init for a late rank (their shared memory made, the others' not yet
mapped), and after MPI_Init; a rank killed inside MPI_Init and after it;
and everybody killed at once inside MPI_Init. Whatever is still running a
moment after the kill is SIGKILLed too, so no clean exit path gets a chance
to tidy up.
"""
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import (IS_RESMPI, MPIEXEC, RESMPI_LIBDIR, kill_group, launch, mpiexec_cmd, reap_strays)

NPROCS = 4
LATE_RANK = 2


class ShmView:
    """The /dev/shm a job sees, and what it holds that was not there before."""

    def __init__(self, directory, wrapper, private):
        self.directory = Path(directory)
        self.wrapper = wrapper
        self.private = private
        self.before = set(os.listdir(self.directory))

    def new_entries(self):
        now = set(os.listdir(self.directory)) - self.before
        if self.private:
            return now
        # Shared /dev/shm: give other jobs' live segments time to go.
        deadline = time.monotonic() + 5
        while now and time.monotonic() < deadline:
            time.sleep(0.2)
            now &= set(os.listdir(self.directory))
        return now


@pytest.fixture
def shm_view(tmp_path):
    directory = tmp_path / "shm"
    directory.mkdir()
    mounted = False
    if os.geteuid() == 0 and shutil.which("unshare"):
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "mode=1777,size=64m", "resmpi-leftover-test", str(directory)],
            capture_output=True).returncode == 0
    if mounted:
        wrapper = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   'mount --bind "$0" /dev/shm && exec "$@"', str(directory)]
        yield ShmView(directory, wrapper, private=True)
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)
    else:
        yield ShmView("/dev/shm", [], private=False)


def _pump(stream, sink):
    for line in iter(stream.readline, ""):
        sink.put(line)
    sink.put(None)


class Job:
    """A running late_init job whose output is read as it comes."""

    def __init__(self, cmd, env):
        self.process = launch(cmd, env=env)
        self.lines = queue.Queue()
        self.text = []
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=_pump, args=(stream, self.lines), daemon=True).start()
        self.pids = {}
        self.initialized = set()

    def wait_for(self, pids, initialized, seconds=60):
        """Read output until `pids` ranks reported their pid and `initialized`
        ranks passed MPI_Init."""
        deadline = time.monotonic() + seconds
        while len(self.pids) < pids or len(self.initialized) < initialized:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                pytest.fail(f"job did not reach {pids} pids, {initialized} past MPI_Init:\n"
                            f"{''.join(self.text)}", pytrace=False)
            self.text.append(line)
            if m := re.match(r"PID (\d+) (\d+)", line):
                self.pids[int(m.group(1))] = int(m.group(2))
            if m := re.match(r"INIT (\d+)", line):
                self.initialized.add(int(m.group(1)))

    def job_pids(self):
        """mpiexec and every process below it (ranks, hydra's proxies)."""
        found, frontier = set(), [self.process.pid]
        while frontier:
            pid = frontier.pop()
            if pid in found:
                continue
            found.add(pid)
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as f:
                        frontier += [int(child) for child in f.read().split()]
            except OSError:
                pass
        return found | set(self.pids.values())

    def end(self, kill):
        """SIGKILL `kill`, give the rest 3 s to react, then SIGKILL
        everything of the job that is left, and wait until it is all gone."""
        everyone = self.job_pids()
        for pid in kill:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(3)
        for pid in everyone | self.job_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        kill_group(self.process)
        self.process.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(pid) for pid in everyone):
            time.sleep(0.1)
        left = [pid for pid in everyone if _alive(pid)]
        reap_strays()
        assert not left, f"processes of the job still alive: {left}"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def hydra():
    return shutil.which("mpiexec.hydra") or shutil.which("mpiexec.mpich")


def start(build, shm_view, late_rank, launcher):
    exe = build("late_init")
    env = {}
    if launcher == "hydra":
        path = hydra()
        if not path:
            pytest.fail("mpiexec.hydra (MPICH) is not installed", pytrace=False)
        old = os.environ.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = f"{RESMPI_LIBDIR}:{old}" if old else str(RESMPI_LIBDIR)
        cmd = mpiexec_cmd(NPROCS, exe, [late_rank], mpiexec=path)
    else:
        cmd = mpiexec_cmd(NPROCS, exe, [late_rank], mpiexec=MPIEXEC)
    return Job([*shm_view.wrapper, *cmd], env)


def check_nothing_left(shm_view, job):
    left = shm_view.new_entries()
    assert not left, (f"left in /dev/shm after the job was killed: {sorted(left)}\n"
                      f"job output:\n{''.join(job.text)}")


pytestmark = pytest.mark.resmpi_only("checks what resmpi's library leaves in /dev/shm")


@pytest.mark.parametrize("launcher", ["resmpi", "hydra"])
@pytest.mark.parametrize("delay_s", [0.0, 0.05, 0.3])
def test_kill_9_of_mpiexec_right_after_the_start_leaves_nothing(build, shm_view, launcher, delay_s):
    job = start(build, shm_view, -1, launcher)
    time.sleep(delay_s)
    job.end([job.process.pid])
    check_nothing_left(shm_view, job)


@pytest.mark.parametrize("launcher", ["resmpi", "hydra"])
def test_kill_9_of_mpiexec_during_mpi_init_leaves_nothing(build, shm_view, launcher):
    job = start(build, shm_view, LATE_RANK, launcher)
    job.wait_for(pids=NPROCS, initialized=0)
    time.sleep(0.5)  # the others are in MPI_Init, waiting for the late rank
    assert not job.initialized, "a rank got through MPI_Init without the late one"
    job.end([job.process.pid])
    check_nothing_left(shm_view, job)


@pytest.mark.parametrize("launcher", ["resmpi", "hydra"])
def test_kill_9_of_mpiexec_after_mpi_init_leaves_nothing(build, shm_view, launcher):
    job = start(build, shm_view, -1, launcher)
    job.wait_for(pids=NPROCS, initialized=NPROCS)
    job.end([job.process.pid])
    check_nothing_left(shm_view, job)


@pytest.mark.parametrize("victim", [0, 3])
def test_kill_9_of_a_rank_during_mpi_init_leaves_nothing(build, shm_view, victim):
    job = start(build, shm_view, LATE_RANK, "resmpi")
    job.wait_for(pids=NPROCS, initialized=0)
    time.sleep(0.5)
    job.end([job.pids[victim]])
    check_nothing_left(shm_view, job)


def test_kill_9_of_a_rank_after_mpi_init_leaves_nothing(build, shm_view):
    job = start(build, shm_view, -1, "resmpi")
    job.wait_for(pids=NPROCS, initialized=NPROCS)
    job.end([job.pids[1]])
    check_nothing_left(shm_view, job)


def test_kill_9_of_everybody_during_mpi_init_leaves_nothing(build, shm_view):
    job = start(build, shm_view, LATE_RANK, "resmpi")
    job.wait_for(pids=NPROCS, initialized=0)
    time.sleep(0.5)
    job.end(sorted(job.job_pids()))
    check_nothing_left(shm_view, job)
