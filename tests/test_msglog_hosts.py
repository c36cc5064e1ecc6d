"""Pessimistic message logging across hosts: two network-namespace hosts
A and B (tests/netns.py: the tests fail, not skip, where namespaces cannot
be made), two ranks on each, every rank started through its host's proxy.
A rank killed (`--inject kill:R@sends=N`) is started again by its host's
proxy as the next incarnation, re-joins over TCP, replays from MPI_Init
against the survivors' sender logs, and the job's output is, rank by rank,
what a fault-free run prints: what the restarted rank prints again while it
replays arrives in the proxy's output frames and is left out there too.
A rank lost with its host's proxy cannot be started again: the job ends
at once, naming it. Bounded by --timeout."""
import os
import re
import signal
import time

import pytest

import test_msglog as msglog
import test_proxy as proxy
from conftest import mpiexec_cmd, run_cmd
from netns import two_hosts  # noqa: F401  (pytest fixture)

pytestmark = pytest.mark.resmpi_only("--msglog and --inject kill are resmpi's")

RANKS = 4


def logged_on_two_hosts(h, exe, args, kill):
    opts = [*h.mpiexec_opts(), "-ppn", "2", "--msglog", "pessimistic", "--tag-output",
            "--timeout", str(msglog.BOUND_SECONDS), "--inject", kill]
    return run_cmd(h.run_in_a(mpiexec_cmd(RANKS, exe, args, mpiexec_opts=opts)),
                   timeout=msglog.BOUND_SECONDS + 30)


@pytest.mark.parametrize("exe_name, args, kills", [
    # Ranks 2 and 3 run on host B, 0 and 1 on A.
    ("msglog_ring", [20, 16], ["kill:3@sends=17", "kill:0@sends=25"]),
    ("msglog_ring", [20, 20000], ["kill:2@sends=9"]),       # rendezvous-sized messages
    ("msglog_anysource", [12], ["kill:0@sends=9", "kill:2@sends=5"]),
])
def test_a_rank_killed_on_either_host_is_restarted_there_and_replays(build, two_hosts, exe_name, args, kills):
    exe = build(exe_name)
    expected = msglog.baseline(RANKS, exe, args) if exe_name == "msglog_ring" else None
    for kill in kills:
        res = logged_on_two_hosts(two_hosts, exe, args, kill)
        victim = msglog.victim_of(kill)
        msglog.assert_recovered(res, victim, RANKS)
        # Restarted on its own host, through that host's proxy.
        host = two_hosts.b if victim >= 2 else two_hosts.a
        assert f"rank {victim} (host {host}) killed by signal 9" in res.stderr, res.describe()
        if expected is None:
            # Match order differs run to run: every result must follow
            # from the order rank 0 printed.
            msglog.anysource_consistent(msglog.per_rank(res.stdout), RANKS, args[0])
        else:
            assert msglog.per_rank(res.stdout) == expected, res.describe()


def test_a_rank_lost_with_its_hosts_proxy_ends_the_job_naming_it_in_bounded_time(build, two_hosts):
    """Host B's proxy killed mid-run: ranks 2 and 3 cannot be started
    again (nothing on B can start them), so the survivors would wait for
    them for ever; mpiexec ends the job at once, naming the host, instead of
    waiting for --timeout."""
    h = two_hosts
    exe = build("msglog_ring")
    started = time.monotonic()
    opts = [*h.mpiexec_opts(), "-ppn", "2", "--msglog", "pessimistic", "--timeout", str(msglog.BOUND_SECONDS)]
    # 40 rounds of 100 ms: the job runs about 4 s.
    job = proxy.Job(h.run_in_a(mpiexec_cmd(RANKS, exe, [40, 16, 0, 100000], mpiexec_opts=opts)))
    try:
        deadline = time.monotonic() + 20
        while len(proxy.netns_pids(h.b)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        on_b = proxy.netns_pids(h.b)
        time.sleep(1.0)  # past MPI_Init
        os.kill(next(pid for pid in on_b if proxy.is_proxy(pid)), signal.SIGKILL)
        code = job.wait(msglog.BOUND_SECONDS + 10)
    finally:
        if job.process.poll() is None:
            job.process.kill()
    elapsed = time.monotonic() - started
    stderr = job.drain(job.stderr)
    assert code != 0, stderr
    assert re.search(rf"^mpiexec: rank [23] was lost with the proxy of host {re.escape(h.b)}; message logging "
                     r"cannot start it again there: the job ends$", stderr, re.M), stderr
    assert "timed out" not in stderr, stderr
    assert elapsed < msglog.BOUND_SECONDS / 2, f"took {elapsed:.1f} s\n{stderr}"
