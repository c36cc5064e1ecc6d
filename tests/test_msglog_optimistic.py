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
  0 then leaves them orphans, which roll back (cut their determinant
  lists at the logger, exit, are started again and replay): the job ends
  with 0 and output a fault-free run prints; also with a worker killed
  together with rank 0.
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


def rolled_back(res):
    """How many orphans rolled back (mpiexec names each exit)."""
    return res.stderr.count("rolled back (an orphan of optimistic message logging")


@pytest.mark.parametrize("rounds,sends", [(12, 20), (800, 600)])
def test_survivors_depending_on_determinants_the_logger_lost_roll_back_and_the_job_recovers(
        anysource_exe, rounds, sends):
    # Rank 0 matches 3 workers a round; the logger keeps its first 3
    # matches only, so from round 1 on every answer carries a dependency
    # on a determinant that never becomes stable. Killed mid-run, rank
    # 0's replacement could match differently from round 1 on: the
    # workers are orphans. Each cuts its list, exits and is started
    # again; everybody's output follows from the printed orders. With
    # 800 rounds rank 0's lines pass its stdio buffer before the kill:
    # what a process wrote while depending on an unstable determinant
    # must have been held, or the lines shown are the dead incarnation's
    # orders and the hash its replacement's.
    env = {"RESMPI_EVENTLOG_TEST_STORE_MAX": "3"}
    res = run_optimistic(4, anysource_exe, [rounds], f"kill:0@sends={sends}", env=env)
    msglog.assert_recovered(res, 0, 4)
    assert "this rank is an orphan of rank 0" in res.stderr, res.describe()
    assert rolled_back(res) >= 1, res.describe()
    msglog.anysource_consistent(msglog.per_rank(res.stdout), 4, rounds)


@pytest.mark.parametrize("kill", ["kill:0@250ms,kill:3@250ms"])
def test_two_ranks_killed_together_roll_their_orphans_back(anysource_exe, kill):
    # Rank 0 (its matches mostly lost) and a worker die together: the
    # other workers are orphans of rank 0 and roll back; the dead
    # worker's replacement replays; the output follows from the printed
    # orders, as a fault-free run's does.
    rounds = 800
    env = {"RESMPI_EVENTLOG_TEST_STORE_MAX": "3"}
    res = run_optimistic(4, anysource_exe, [rounds], kill, env=env)
    msglog.assert_recovered(res, 0, 4)
    assert rolled_back(res) >= 1, res.describe()
    msglog.anysource_consistent(msglog.per_rank(res.stdout), 4, rounds)


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
