"""Optimistic message logging (O2P, issue 13) on real processes:
`mpiexec --msglog optimistic` runs the message-logging library with sends
that never wait for the event logger's acks; what a process's state
depends on that is not yet on disk travels, piggybacked, with its
messages, and a survivor of a death that depends on determinants the
logger lacks is an orphan.

What must hold:
- the msglog programs (ring, ANY_SOURCE, completion choices, probes,
  collectives) with a rank killed at several points: the job ends with 0
  in bounded time and prints what a fault-free run prints (the
  non-deterministic programs: results that follow from the printed match
  orders and outcomes), exactly as under pessimistic logging, since a
  determinant goes to the logger before the send that may depend on it
  and a killed process's socket is read to its end;
- the FT report counts piggybacked dependency frames when a program has
  determinants, and none without (nothing extra on the wire);
- provably orphaned survivors: the event logger made to store only the
  first few determinants of each rank (the test-only
  RESMPI_EVENTLOG_TEST_STORE_MAX), so rank 0's later wildcard matches are
  never stable while its answers carry them to the workers; killing rank
  0 then leaves them orphans, and since rolling orphans back is not
  built, the job must end with an error naming the orphan, never with
  output a fault-free run would not print.
"""
import pytest

import test_msglog as msglog
from test_msglog import anysource_exe, choices_exe, coll_exe, probes_exe, ring_exe  # noqa: F401
from test_msglog import victim_of
from test_msglog_eventlog import counter
from conftest import run

pytestmark = pytest.mark.resmpi_only("--msglog is resmpi's")

BOUND = msglog.BOUND_SECONDS


def run_optimistic(nprocs, exe, args, kill=None, env=None):
    opts = ["--msglog", "optimistic", "--tag-output", "--timeout", str(BOUND)]
    if kill:
        opts += ["--inject", kill]
    return run(nprocs, exe, *args, mpiexec_opts=opts, timeout=BOUND + 30, env=env)


@pytest.mark.parametrize("nprocs,count,kill", [
    (3, 16, "kill:1@sends=3"),
    (3, 16, "kill:1@sends=41"),
    (4, 16, "kill:0@sends=25"),
    (3, 20000, "kill:2@sends=9"),
])
def test_a_ring_killed_mid_run_prints_what_a_fault_free_run_prints(ring_exe, nprocs, count, kill):
    args = [20, count]
    expected = msglog.baseline(nprocs, ring_exe, args)
    res = run_optimistic(nprocs, ring_exe, args, kill)
    msglog.assert_recovered(res, victim_of(kill), nprocs)
    assert msglog.per_rank(res.stdout) == expected, res.describe()
    # The ring has no determinant: nothing was ever piggybacked.
    assert counter(res.stderr, "msglog_piggybacked_frames") == 0, res.describe()


@pytest.mark.parametrize("nprocs,kill", msglog.ANYSOURCE_KILLS)
def test_any_source_matches_replay_in_the_logged_order(anysource_exe, nprocs, kill):
    rounds = 12
    res = run_optimistic(nprocs, anysource_exe, [rounds], kill)
    msglog.assert_recovered(res, victim_of(kill), nprocs)
    msglog.anysource_consistent(msglog.per_rank(res.stdout), nprocs, rounds)


def test_without_a_fault_the_any_source_program_is_consistent_and_dependencies_travel(
        anysource_exe):
    res = run(4, anysource_exe, 40, mpiexec_opts=["--msglog", "optimistic", "--tag-output"],
              timeout=BOUND)
    assert res.returncode == 0, res.describe()
    msglog.anysource_consistent(msglog.per_rank(res.stdout), 4, 40)
    assert counter(res.stderr, "eventlog_determinants_stored") >= 40, res.describe()


@pytest.mark.parametrize("nprocs,kill", [
    (4, "kill:0@sends=7"),
    (4, "kill:0@sends=22"),
    (4, "kill:2@sends=6"),
])
def test_completion_choices_replay_exactly(choices_exe, nprocs, kill):
    rounds = 8
    res = run_optimistic(nprocs, choices_exe, [rounds], kill)
    msglog.assert_recovered(res, victim_of(kill), nprocs)
    msglog.choices_consistent(msglog.per_rank(res.stdout), nprocs, rounds)


@pytest.mark.parametrize("nprocs,kill", [
    (3, "kill:1@sends=10"),
    (4, "kill:0@sends=33"),
])
def test_a_collective_loop_killed_prints_what_a_fault_free_run_prints(coll_exe, nprocs, kill):
    args = [30]
    expected = msglog.baseline(nprocs, coll_exe, args)
    res = run_optimistic(nprocs, coll_exe, args, kill)
    msglog.assert_recovered(res, victim_of(kill), nprocs)
    assert msglog.per_rank(res.stdout) == expected, res.describe()


def test_survivors_depending_on_determinants_the_logger_lost_end_the_job_as_orphans(
        anysource_exe):
    # Rank 0 matches 3 workers a round; the logger keeps its first 3
    # matches only, so from round 1 on every answer carries a dependency
    # on a determinant that never becomes stable. Killed at its 20th send
    # (round 6), rank 0's replacement could match differently from round
    # 1 on: the workers are orphans.
    env = {"RESMPI_EVENTLOG_TEST_STORE_MAX": "3"}
    res = run_optimistic(4, anysource_exe, [12], "kill:0@sends=20", env=env)
    assert res.returncode != 0, res.describe()
    assert "this rank is an orphan of rank 0" in res.stderr, res.describe()
    assert "rolling orphans back is not built" in res.stderr, res.describe()
    assert res.elapsed < BOUND, res.describe()
    # The FT report counts the orphans (each puts its counters before
    # its abort; how many got there before the job was torn down varies).
    assert counter(res.stderr, "msglog_orphans") >= 1, res.describe()
    # Never a worker's result the printed match order does not imply.
    lines = msglog.per_rank(res.stdout) if res.stdout.strip() else {}
    for worker in range(1, 4):
        assert not lines.get(worker), res.describe()


def test_the_same_store_bound_without_a_kill_ends_normally(anysource_exe):
    # The negative control of the orphan test: unstable determinants alone
    # make nobody an orphan; only a death does.
    env = {"RESMPI_EVENTLOG_TEST_STORE_MAX": "3"}
    res = run_optimistic(4, anysource_exe, [12], env=env)
    assert res.returncode == 0, res.describe()
    msglog.anysource_consistent(msglog.per_rank(res.stdout), 4, 12)
    assert counter(res.stderr, "msglog_piggybacked_frames") > 0, res.describe()


def test_the_any_source_master_killed_after_every_third_send_never_leaves_an_orphan(anysource_exe):
    # Its determinants go to the logger's socket before the send that
    # carries them, and a replacement's hello waits until the old socket
    # was read to its end: with a healthy logger, nothing a worker took in
    # is ever lost, whatever the kill point.
    rounds = 12
    points = msglog.kill_points(
        lambda sends: run_optimistic(4, anysource_exe, [rounds], f"kill:0@sends={sends}"),
        range(1, 40, 3))
    for sends, res in points:
        assert "orphan" not in res.stderr, f"kill at send {sends}\n{res.describe()}"
        msglog.assert_recovered(res, 0, 4)
        msglog.anysource_consistent(msglog.per_rank(res.stdout), 4, rounds)
