"""Survivors of a process death go on (mpiexec --failure-policy continue),
on real processes: the fault is injected (--inject kill:RANK@sends=N at a
seeded moment, kill:RANK@TIME, host-down:HOST@TIME on two namespace hosts),
and the test checks that

- every survivor's result is identical to a fault-free run (a ring of
  point-to-point messages among the survivors),
- what the dead process sent before it died arrived whole, once, in order,
- every operation that needs it ends with MPIX_ERR_PROC_FAILED: a receive
  from it, a pending wildcard receive, a send to it, a barrier and an
  allreduce on MPI_COMM_WORLD, and MPI_Finalize still returns,
- the job ends in bounded time with the dead rank's exit code (137).

The program is tests/c/survivors.c. The negative control runs the same
fault under the default policy (abort): the survivors never get to print.
"""
import random
import re

import pytest

from conftest import mpiexec_cmd, run, run_cmd
from netns import two_hosts  # noqa: F401  (pytest fixture)

pytestmark = pytest.mark.resmpi_only("--failure-policy and --inject kill: are resmpi's")

CONTINUE = ("--failure-policy", "continue")
SEEDS = range(20)
BOUND_SECONDS = 30
RESULT_LINE = re.compile(
    r"^rank (\d+): (receive from victim|wildcard receive), ring (-?\d+), send (\S+), "
    r"barrier (\S+), allreduce (\S+)$", re.M)
WAIT_LINE = re.compile(r"^rank (\d+): waiting ended with (\S+)$", re.M)
WILDCARD_LINE = re.compile(r"^rank 1: wildcard wait ended with (\S+)$", re.M)
IN_ORDER_LINE = re.compile(r"^rank 0: (\d+) messages from the victim, in order$", re.M)


@pytest.fixture(scope="module")
def survivors_exe(build):
    return build("survivors")


def reference_rings(exe, nprocs, survivors):
    """rank -> ring value of a fault-free run with `survivors` live ranks."""
    res = run(nprocs, exe, "reference", survivors, timeout=60)
    assert res.returncode == 0, res.describe()
    rings = {int(m[1]): int(m[2]) for m in re.finditer(r"^rank (\d+): ring (-?\d+)$", res.stdout, re.M)}
    assert sorted(rings) == list(range(survivors)), res.describe()
    return rings


def check_survivors(res, rings, exit_code=137):
    """Every survivor printed its line with the fault-free ring value and
    MPIX_ERR_PROC_FAILED wherever the dead process was needed; the job
    ended with the dead rank's code (137 for a SIGKILL)."""
    assert res.returncode == exit_code, f"exit {res.returncode}, expected the dead rank's {exit_code}\n{res.describe()}"
    assert res.elapsed < BOUND_SECONDS, f"took {res.elapsed:.1f} s\n{res.describe()}"
    results = {int(m[1]): m.groups()[1:] for m in RESULT_LINE.finditer(res.stdout)}
    assert sorted(results) == sorted(rings), f"survivors that finished: {sorted(results)}\n{res.describe()}"
    for rank, (_how, ring, send, barrier, allreduce) in results.items():
        assert int(ring) == rings[rank], f"rank {rank}: ring {ring}, fault-free {rings[rank]}\n{res.describe()}"
        assert (send, barrier, allreduce) == ("proc_failed",) * 3, f"rank {rank}\n{res.describe()}"
    waits = {int(m[1]): m[2] for m in WAIT_LINE.finditer(res.stdout)}
    assert waits == {rank: "proc_failed" for rank in rings}, res.describe()
    # ULFM's rule: a wildcard receive pending at a death stays posted.
    expected = ["proc_failed_pending"] if 1 in rings else []
    assert WILDCARD_LINE.findall(res.stdout) == expected, res.describe()
    assert IN_ORDER_LINE.search(res.stderr), f"rank 0 saw the victim's messages out of order\n{res.describe()}"
    assert "MPI_Finalize returned" not in res.stderr, res.describe()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_rank_killed_at_a_random_send_leaves_survivors_talking_and_fails_only_what_needs_it(
        survivors_exe, seed):
    rings = reference_rings(survivors_exe, 4, 3)
    sends = random.Random(seed).randint(1, 400)
    res = run(4, survivors_exe, mpiexec_opts=(*CONTINUE, "--inject", f"kill:3@sends={sends}",
                                              "--timeout", str(BOUND_SECONDS)),
              timeout=BOUND_SECONDS + 30)
    check_survivors(res, rings)
    received = int(IN_ORDER_LINE.search(res.stderr)[1])
    assert received <= sends, f"{received} messages from a rank killed after {sends} sends\n{res.describe()}"


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_a_rank_killed_at_a_time_is_a_failure_event_over_shared_memory_and_tcp(survivors_exe, paths):
    """Over TCP the survivors may see the closed connection before mpiexec's
    notice: both end in the same event."""
    rings = reference_rings(survivors_exe, 4, 3)
    res = run(4, survivors_exe, mpiexec_opts=(*CONTINUE, "--paths", paths, "--inject", "kill:3@0.5s",
                                              "--timeout", str(BOUND_SECONDS)),
              timeout=BOUND_SECONDS + 30)
    check_survivors(res, rings)


def test_two_ranks_the_lone_survivor_finishes(survivors_exe):
    rings = reference_rings(survivors_exe, 2, 1)
    res = run(2, survivors_exe, mpiexec_opts=(*CONTINUE, "--inject", "kill:1@sends=10",
                                              "--timeout", str(BOUND_SECONDS)),
              timeout=BOUND_SECONDS + 30)
    check_survivors(res, rings)


def test_a_peer_the_network_finds_unreachable_is_the_same_failure_event(survivors_exe):
    """No process dies at first: the only rail between ranks 0 and 3 goes
    down (injected). Rank 3's reliable link gives up on rank 0 (5
    retransmissions), which under continue is a failure event, not a fatal
    error: its MPI_Send returns an error and the program exits 3; mpiexec
    then tells the others, who finish as after a kill."""
    rings = reference_rings(survivors_exe, 4, 3)
    res = run(4, survivors_exe, mpiexec_opts=(
        *CONTINUE, "--paths", "tcp", "-x", "RESMPI_RETRIES=5", "-x", "RESMPI_ACK_TIMEOUT_MS=20",
        "--inject", "rail-down:0@0.3s@ranks=0-3", "--timeout", str(BOUND_SECONDS)), timeout=BOUND_SECONDS + 30)
    assert "victim: a send failed instead of the process being killed" in res.stderr, res.describe()
    check_survivors(res, rings, exit_code=3)


def test_negative_control_under_the_default_policy_the_survivors_never_finish(survivors_exe):
    res = run(4, survivors_exe, mpiexec_opts=("--inject", "kill:3@sends=50", "--timeout", str(BOUND_SECONDS)),
              timeout=BOUND_SECONDS + 30)
    assert res.returncode == 137, res.describe()
    assert not RESULT_LINE.search(res.stdout), res.describe()
    assert re.search(r"^mpiexec: rank 3 \(pid \d+\) killed by signal 9 \(SIGKILL\)$", res.stderr, re.M), \
        res.describe()


def test_a_whole_namespace_host_going_down_leaves_the_other_host_running(survivors_exe, two_hosts):
    """Ranks 0, 1 on host A, ranks 2, 3 on host B; host-down:B kills both
    at once while rank 3 streams to rank 0 over TCP. The survivors on A
    finish with the fault-free ring and an error for everything that needs B."""
    h = two_hosts
    opts = [*h.mpiexec_opts(), "-ppn", "2", *CONTINUE, "--timeout", str(BOUND_SECONDS)]
    reference = run_cmd(h.run_in_a(mpiexec_cmd(4, survivors_exe, ["reference", 2], mpiexec_opts=opts)),
                        timeout=BOUND_SECONDS + 30)
    assert reference.returncode == 0, reference.describe()
    rings = {int(m[1]): int(m[2]) for m in re.finditer(r"^rank (\d+): ring (-?\d+)$", reference.stdout, re.M)}
    assert sorted(rings) == [0, 1], reference.describe()
    res = run_cmd(h.run_in_a(mpiexec_cmd(4, survivors_exe, [2], mpiexec_opts=[
        *opts, "--inject", f"host-down:{h.b}@1s"])), timeout=BOUND_SECONDS + 30)
    check_survivors(res, rings)
    lost = re.findall(rf"^WARNING: mpiexec: rank (\d) \(host {re.escape(h.b)}\) killed by signal 9", res.stderr, re.M)
    assert sorted(lost) == ["2", "3"], res.describe()


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_what_a_rank_sent_before_it_died_is_delivered_after_its_death_is_known(build, paths):
    """Rank 1 sends 20 messages and matches an Issend, then exits; rank 0
    reads them only after the death notice has arrived (tests/c/last_words.c).
    Frames already in the ring or socket must not be dropped, nor the
    Issend failed, because the notice was handled first."""
    exe = build("last_words")
    for _ in range(3):
        res = run(2, exe, mpiexec_opts=(*CONTINUE, "--paths", paths, "--timeout", str(BOUND_SECONDS)),
                  timeout=BOUND_SECONDS + 30)
        assert "rank 0: 20 last words, issend ok" in res.stdout, res.describe()
        assert "FAIL" not in res.output, res.describe()
        assert res.returncode == 1, res.describe()
