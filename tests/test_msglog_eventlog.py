"""The event logger of pessimistic message logging on real processes
(issue 13): `mpiexec --msglog pessimistic` starts one event-logger process
outside MPI_COMM_WORLD (`mpiexec --event-logger`) that stores every rank's
determinants in an append-only, checksummed file (in --ckpt-dir when given,
else a directory of the job's own), syncs each batch once, acks only then,
and serves a restarted rank its determinants.

What must hold:
- two ranks killed at the same instant, neighbours included (under the
  old holder scheme rank r's determinants lived in rank r+1, so ranks 1
  and 2 lost together could not recover), both restart and replay, and
  each rank prints what a fault-free run prints (the ANY_SOURCE program's
  results follow from the match order it printed);
- the event logger SIGKILLed mid-job is started again by mpiexec, reads
  its file back, and the job's output is unchanged; a rank killed after
  that gets its replay from what the new logger read back;
- the same rank killed twice is restarted twice;
- the log is where it was asked to be, and a job's own directory is gone
  at the end.
Every run is bounded by --timeout and a hard subprocess timeout.
"""
import os
import re
import signal
import time

import pytest

import test_msglog as msglog
from test_msglog import anysource_exe, choices_exe, ring_exe  # noqa: F401 (fixtures)
from conftest import Result, kill_group, launch, mpiexec_cmd, reap_strays, run

pytestmark = pytest.mark.resmpi_only("--msglog is resmpi's")

BOUND = msglog.BOUND_SECONDS
# Long enough that timed kills land mid-run: 60 rounds of 10 ms.
RING_ARGS = [60, 16, 0, 10000]
# Hundreds of ANY_SOURCE rounds (about a millisecond each).
ANYSOURCE_ROUNDS = 600


def victims_of(kill):
    return sorted({int(item.split(":")[1].split("@")[0]) for item in kill.split(",")})


def counter(stderr, name):
    """A counter of mpiexec's FT report (0 when it is not there)."""
    m = re.search(rf"\b{name} (\d+)", stderr)
    return int(m[1]) if m else 0


@pytest.mark.parametrize("nprocs,kill", [
    (4, "kill:1@250ms,kill:2@250ms"),     # neighbours: the old holder pair
    (3, "kill:0@200ms,kill:1@200ms"),     # two of three
    (4, "kill:3@300ms,kill:0@300ms"),     # neighbours across the wrap
])
def test_two_ranks_killed_together_in_a_ring_both_replay_and_print_the_same(
        ring_exe, nprocs, kill):
    expected = msglog.baseline(nprocs, ring_exe, RING_ARGS)
    res = msglog.run_logged(nprocs, ring_exe, RING_ARGS, kill)
    for victim in victims_of(kill):
        msglog.assert_recovered(res, victim, nprocs)
    assert msglog.per_rank(res.stdout) == expected, res.describe()
    assert counter(res.stderr, "eventlog_protocol_errors") == 0, res.describe()


@pytest.mark.parametrize("kill", [
    "kill:0@150ms,kill:1@150ms",          # the ANY_SOURCE receiver and its old holder
    "kill:2@150ms,kill:3@150ms",
])
def test_two_ranks_killed_together_with_any_source_replay_the_logged_matches(anysource_exe, kill):
    res = msglog.run_logged(4, anysource_exe, [ANYSOURCE_ROUNDS], kill)
    for victim in victims_of(kill):
        msglog.assert_recovered(res, victim, 4)
    msglog.anysource_consistent(msglog.per_rank(res.stdout), 4, ANYSOURCE_ROUNDS)
    # Rank 0 logged a determinant per match, durably, before its sends.
    assert counter(res.stderr, "eventlog_determinants_stored") >= ANYSOURCE_ROUNDS, res.describe()


def test_completion_choices_of_two_ranks_killed_together_replay_exactly(choices_exe):
    # Rank 0's Waitany/Testsome/Test outcomes must replay exactly while a
    # worker restarts beside it; the checker recomputes every answer.
    rounds = 200
    res = msglog.run_logged(4, choices_exe, [rounds], "kill:0@150ms,kill:1@150ms")
    for victim in (0, 1):
        msglog.assert_recovered(res, victim, 4)
    msglog.choices_consistent(msglog.per_rank(res.stdout), 4, rounds)


def run_killing_the_logger(nprocs, exe, args, ckpt_dir, kill_after_s, inject=None):
    """Run a logged job with its log in ckpt_dir and SIGKILL the event
    logger kill_after_s after it started; returns the Result."""
    opts = ["--msglog", "pessimistic", "--tag-output", "--timeout", str(BOUND),
            "--ckpt-dir", str(ckpt_dir)]
    if inject:
        opts += ["--inject", inject]
    cmd = mpiexec_cmd(nprocs, exe, args, mpiexec_opts=opts)
    pid_file = ckpt_dir / "eventlog.pid"
    started = time.monotonic()
    p = launch(cmd)
    try:
        deadline = started + 20
        while not pid_file.exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.01)
        assert pid_file.exists(), "mpiexec wrote no eventlog.pid"
        first_pid = int(pid_file.read_text())
        time.sleep(kill_after_s)
        # Only the logger this job started (its own --ckpt-dir names it).
        os.kill(first_pid, signal.SIGKILL)
        out, err = p.communicate(timeout=BOUND + 30)
    except BaseException:
        kill_group(p)
        reap_strays()
        raise
    kill_group(p)
    return Result(p.returncode, out, err, time.monotonic() - started, [str(c) for c in cmd]), first_pid


def test_the_event_logger_killed_mid_job_is_restarted_and_the_ring_prints_the_same(ring_exe, tmp_path):
    expected = msglog.baseline(3, ring_exe, RING_ARGS)
    res, pid = run_killing_the_logger(3, ring_exe, RING_ARGS, tmp_path, 0.3)
    assert res.returncode == 0, res.describe()
    assert "mpiexec: event logger started again" in res.stderr, res.describe()
    assert counter(res.stderr, "eventlog_restarts") == 1, res.describe()
    assert msglog.per_rank(res.stdout) == expected, res.describe()
    assert res.elapsed < BOUND, res.describe()


def test_a_rank_killed_after_the_event_logger_restarted_replays_from_the_log_it_read_back(
        anysource_exe, tmp_path):
    # The logger dies at about 0.25 s; rank 0 (every ANY_SOURCE match is
    # its determinant) at 0.6 s: its replay comes from the new logger,
    # which has only what it read back plus what was logged since.
    res, _ = run_killing_the_logger(4, anysource_exe, [ANYSOURCE_ROUNDS], tmp_path, 0.25,
                                    inject="kill:0@600ms")
    msglog.assert_recovered(res, 0, 4)
    assert "mpiexec: event logger started again" in res.stderr, res.describe()
    assert counter(res.stderr, "eventlog_determinants_recovered") > 0, \
        f"the restarted logger read nothing back\n{res.describe()}"
    msglog.anysource_consistent(msglog.per_rank(res.stdout), 4, ANYSOURCE_ROUNDS)
    # The log stays where it was asked to be; the pid file goes.
    log = tmp_path / "determinants.log"
    assert log.stat().st_size > 0
    assert not (tmp_path / "eventlog.pid").exists()


def test_the_any_source_receiver_killed_twice_is_restarted_twice_and_replays(anysource_exe):
    res = msglog.run_logged(4, anysource_exe, [ANYSOURCE_ROUNDS], "kill:0@150ms,kill:0@450ms")
    msglog.assert_recovered(res, 0, 4)
    assert "rank 0 started again as incarnation 2" in res.stderr, res.describe()
    msglog.anysource_consistent(msglog.per_rank(res.stdout), 4, ANYSOURCE_ROUNDS)


def test_without_ckpt_dir_the_log_lives_in_a_job_directory_removed_at_the_end(ring_exe, tmp_path):
    res = run(3, ring_exe, 20, 16, mpiexec_opts=["--msglog", "pessimistic", "--timeout", str(BOUND)],
              timeout=BOUND + 30, env={"TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.describe()
    assert not list(tmp_path.glob("resmpi-eventlog-*")), list(tmp_path.iterdir())




def test_a_rank_killed_before_it_connected_to_a_replacement_is_not_waited_for(ring_exe):
    # Every rank sleeps 300 ms a round outside MPI, so nobody connects to
    # rank 1's replacement until its next round; rank 2 dies before that.
    # The replacement was told to expect rank 2 (alive when it announced)
    # and rank 2's replacement expects it (announced first): each waited
    # in MPI_Init for the other until the accept timeout ("timed out after
    # 30s waiting for ranks [2] to connect to rank 1"), then both died and
    # started again, and again. The replacement now hears of rank 2's
    # death during its wire-up and goes on without it.
    args = [10, 16, 0, 300000]
    expected = msglog.baseline(4, ring_exe, args)
    res = msglog.run_logged(4, ring_exe, args, "kill:1@400ms,kill:2@550ms")
    for victim in (1, 2):
        msglog.assert_recovered(res, victim, 4)
    assert "timed out" not in res.stderr, res.describe()
    assert "incarnation 2" not in res.stderr, res.describe()
    assert msglog.per_rank(res.stdout) == expected, res.describe()
