"""mpiexec --replicas R with --hosts: replica k of every rank runs on host
group k (SDR-MPI's placement), so a host that goes down takes at most one
replica of each rank and the job goes on, its output byte-identical to a
fault-free run, in bounded time.

Two network-namespace hosts A and B (tests/netns.py: the tests fail, not
skip, where namespaces cannot be made), one replica on each; the host with
replica 1 of every rank is taken down (`--inject host-down:B@T`: every
process on it SIGKILLed) at several times, under both replica maskings."""
import os
import re

import pytest

from conftest import mpiexec_cmd, run, run_cmd
from netns import two_hosts  # noqa: F401  (pytest fixture)

pytestmark = pytest.mark.resmpi_only("mpiexec --replicas and --inject host-down are resmpi's")

RANKS = 3
ROUNDS = 60
PAUSE_MS = 20  # per round: the run takes about 1.2 s after MPI_Init
BOUND_SECONDS = 60


def replicated(h, exe, *extra, mark_dir="-", rounds=ROUNDS, slots=RANKS):
    opts = [*h.mpiexec_opts(hosts=f"{h.a}:{slots},{h.b}:{slots}"), "--replicas", "2",
            "--timeout", str(BOUND_SECONDS), *extra]
    return run_cmd(h.run_in_a(mpiexec_cmd(RANKS, exe, [rounds, PAUSE_MS, mark_dir], mpiexec_opts=opts)),
                   timeout=BOUND_SECONDS + 30)


@pytest.fixture(scope="module")
def expected(build):
    res = run(RANKS, build("replication"), ROUNDS, timeout=60)
    assert res.returncode == 0, res.describe()
    return res.stdout


def test_replica_k_of_every_rank_runs_on_host_group_k(build, two_hosts, expected, tmp_path):
    h = two_hosts
    os.chmod(tmp_path, 0o777)
    # Two slots a host for three ranks: the plain placement would put
    # replicas of ranks 1 and 2 on A with replica 0 of every rank.
    res = replicated(h, build("replication"), mark_dir=tmp_path, rounds=4, slots=2)
    assert res.returncode == 0, res.describe()
    assert expected.startswith(res.stdout.rsplit("total", 1)[0]), res.describe()
    where = {name: (tmp_path / name).read_text().strip() for name in os.listdir(tmp_path)}
    assert sorted(where) == sorted(f"{rank}.{replica}" for rank in range(RANKS) for replica in (0, 1))
    for rank in range(RANKS):
        assert where[f"{rank}.0"] == f"net:[{h.netns_inode(h.a)}]", where
        assert where[f"{rank}.1"] == f"net:[{h.netns_inode(h.b)}]", where


@pytest.mark.parametrize("masking", ["replica", "process"])
def test_a_host_with_one_replica_of_every_rank_going_down_is_masked(build, two_hosts, expected, masking):
    h = two_hosts
    exe = build("replication")
    reference = replicated(h, exe, "--replica-masking", masking)
    assert reference.returncode == 0, reference.describe()
    assert reference.stdout == expected, reference.describe()
    masked = 0
    for when_ms in (900, 1400, 2000):
        res = replicated(h, exe, "--replica-masking", masking, "--inject", f"host-down:{h.b}@{when_ms}ms")
        assert res.elapsed < BOUND_SECONDS, res.describe()
        killed = re.findall(r"rank (\d+) replica (\d+) on host \S+ \(pid \d+\) killed by signal 9", res.stderr)
        if not killed:
            # The job ended before the host went down.
            assert res.returncode == 0 and res.stdout == expected, res.describe()
            continue
        if "MPI_Init" in res.stderr and res.returncode != 0:
            # Down while the processes were still wiring up (start-up is
            # slow on a loaded host): the job ends in bounded time.
            continue
        assert res.returncode == 0, res.describe()
        assert res.stdout == expected, res.describe()
        # Only replica 1 was on B.
        assert killed and all(replica == "1" for _, replica in killed), res.describe()
        if masking == "process":
            # Each of B's processes is lost on its own; every rank goes on.
            assert sorted(rank for rank, _ in killed) == ["0", "1", "2"], res.describe()
        assert re.search(r"^mpiexec: FT report: .*processes lost 3\b", res.stderr, re.M), res.describe()
        masked += 1
    assert masked >= 1, "the host never went down mid-run: raise ROUNDS or lower the kill times"


def test_replicas_that_would_share_a_host_are_refused(build, two_hosts):
    h = two_hosts
    for hosts, message in ((h.a, "--replicas 2 needs at least 2 hosts"),
                           (f"{h.a},{h.b},{h.a}", "two replicas of a rank would share it")):
        opts = [*h.mpiexec_opts(hosts=hosts), "--replicas", "2"]
        res = run_cmd(h.run_in_a(mpiexec_cmd(2, build("replication"), [1], mpiexec_opts=opts)), timeout=30)
        assert res.returncode == 2, res.describe()
        assert message in res.stderr, res.describe()
        assert res.stdout == "", res.describe()
