"""Re-join on real processes (issue 9, test-only protocol): under
`mpiexec --failure-policy continue --respawn 1`, the last rank is killed
(`--inject kill:V@sends=N`), mpiexec starts it again as incarnation 1
(RESMPI_INCARNATION=1), its MPI_Init joins the running job (survivors
connect to it over TCP when the launcher's re-join notice arrives), and then
it and the survivors exchange messages both ways.

The program is tests/c/rejoin.c. The test checks that

- every survivor received the old process's messages whole and in order,
  then saw MPIX_ERR_PROC_FAILED on its receive from it,
- the replacement said it joined, and every survivor and the replacement
  finished all rounds with the right content (eager and rendezvous); a
  survivor receives with MPI_ANY_TAG, so an old-incarnation message
  delivered after the re-join fails the program,
- mpiexec named the respawn, and the job ended in bounded time with the
  first death's exit code (137: a respawned death still counts).

The negative control runs the same fault without --respawn: the survivors
never get an answer, say so, and the job fails with their own code (3).
"""
import re

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("--respawn and re-join are resmpi's")

BOUND_SECONDS = 40
ROUNDS = 5
OLD_LINE = re.compile(r"^rank (\d+): (\d+) messages from incarnation 0 in order, then proc_failed$", re.M)
SURVIVOR_DONE = re.compile(r"^rank (\d+): exchanged (\d+) rounds with incarnation 1 ", re.M)


@pytest.fixture(scope="module")
def rejoin_exe(build):
    return build("rejoin")


def options(nprocs, sends, paths, respawn=True):
    opts = ["--failure-policy", "continue", "--inject", f"kill:{nprocs - 1}@sends={sends}",
            "--paths", paths, "--timeout", str(BOUND_SECONDS)]
    if respawn:
        opts += ["--respawn", "1"]
    return opts


@pytest.mark.parametrize("paths", ["auto", "tcp"])
@pytest.mark.parametrize("nprocs,sends", [(3, 7), (4, 40), (4, 200)])
def test_a_killed_rank_started_again_joins_and_talks_both_ways_with_every_survivor(
        rejoin_exe, nprocs, sends, paths):
    victim = nprocs - 1
    res = run(nprocs, rejoin_exe, mpiexec_opts=options(nprocs, sends, paths), timeout=BOUND_SECONDS + 30)
    assert "FAIL" not in res.stderr, res.describe()
    assert res.returncode == 137, f"exit {res.returncode}, expected the first death's 137\n{res.describe()}"
    assert res.elapsed < BOUND_SECONDS, f"took {res.elapsed:.1f} s\n{res.describe()}"
    old = {int(m[1]): int(m[2]) for m in OLD_LINE.finditer(res.stdout)}
    assert sorted(old) == list(range(victim)), res.describe()
    per_survivor_sends = sends // victim + 1
    assert all(count <= per_survivor_sends for count in old.values()), \
        f"more messages than the old process sent: {old}\n{res.describe()}"
    assert f"rank {victim}: incarnation 1 joined" in res.stdout, res.describe()
    assert f"rank {victim}: exchanged {ROUNDS} rounds with {victim} survivors" in res.stdout, res.describe()
    done = {int(m[1]): int(m[2]) for m in SURVIVOR_DONE.finditer(res.stdout)}
    assert done == {rank: ROUNDS for rank in range(victim)}, res.describe()
    assert f"rank {victim} started again as incarnation 1" in res.stderr, res.describe()
    assert res.stdout.count("incarnation 1 joined") == 1, res.describe()


@pytest.mark.parametrize("paths", ["auto", "tcp"])
def test_a_survivor_still_in_mpi_init_when_the_replacement_announces_itself_is_not_left_out(
        rejoin_exe, paths):
    # Rank 1 holds 2 s between wire-up and its subscription to failure
    # notices (a slow start on a busy host), while the victim dies and its
    # replacement announces itself. The announcement must wait for it:
    # otherwise rank 1 never hears of the new process and never connects,
    # and the replacement counts it as failed (seen under CI load).
    res = run(4, rejoin_exe, mpiexec_opts=options(4, 40, paths), timeout=BOUND_SECONDS + 30,
              env={"RESMPI_TEST_SUBSCRIBE_PAUSE": "1:2000"})
    assert "FAIL" not in res.stderr, res.describe()
    assert res.returncode == 137, res.describe()
    assert "rank 3: exchanged 5 rounds with 3 survivors" in res.stdout, res.describe()
    done = {int(m[1]): int(m[2]) for m in SURVIVOR_DONE.finditer(res.stdout)}
    assert done == {rank: ROUNDS for rank in range(3)}, res.describe()
    assert res.elapsed < BOUND_SECONDS, res.describe()


def test_without_respawn_nobody_comes_back_and_the_survivors_say_so(rejoin_exe):
    res = run(3, rejoin_exe, "2", mpiexec_opts=options(3, 7, "auto", respawn=False),
              timeout=BOUND_SECONDS + 30)
    assert "started again" not in res.stderr, res.describe()
    assert "joined" not in res.stdout, res.describe()
    assert len(OLD_LINE.findall(res.stdout)) == 2, res.describe()
    assert res.stderr.count("the victim's rank did not come back") == 2, res.describe()
    assert res.returncode == 137, res.describe()


def test_respawn_needs_the_continue_policy(rejoin_exe):
    res = run(2, rejoin_exe, mpiexec_opts=("--respawn", "1"), timeout=30)
    assert res.returncode == 2, res.describe()
    assert "--respawn needs --failure-policy continue" in res.stderr, res.describe()
