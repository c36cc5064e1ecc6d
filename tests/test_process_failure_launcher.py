"""mpiexec when a process dies: the failure policy (abort, the default, and
continue with its hydra / Open MPI spellings) and the process faults of
--inject (kill:RANK@TIME, host-down:HOST@TIME) carried out by mpiexec.

Every test here is about resmpi's own mpiexec options, so each is
resmpi_only. The survivors of a death make no MPI call after it (that needs
the library's failure handling, tested elsewhere); the failure-notice
protocol is covered by the launcher's Rust tests."""
import re

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("mpiexec --failure-policy / --inject kill: are resmpi options")

CONTINUE_LINE = "WARNING: mpiexec: rank {rank} (host localhost) {how} \u2014 the job continues (failure policy continue)"
KILLED = "killed by signal 9 (SIGKILL)"


def stderr_lines(res, needle):
    return [line for line in res.stderr.splitlines() if needle in line]


def test_default_policy_tears_the_job_down_at_an_injected_kill(build):
    exe = build("process_failure")
    res = run(3, exe, "wait", mpiexec_opts=("--inject", "kill:1@0.5s", "--timeout", "30"), timeout=60)
    assert res.returncode == 137, res.describe()
    # The teardown message of any rank killed by a signal, unchanged.
    causes = [line for line in res.stderr.splitlines() if re.fullmatch(
        r"mpiexec: rank 1 \(pid \d+\) killed by signal 9 \(SIGKILL\)", line)]
    assert len(causes) == 1, res.describe()
    assert "the job continues" not in res.stderr, res.describe()
    assert "timed out" not in res.stderr, res.describe()
    assert sorted(res.stdout.split("\n")[:-1]) == ["ready 0", "ready 1", "ready 2"], res.describe()
    assert res.elapsed < 20, res.describe()


@pytest.mark.parametrize("policy", [
    ("--failure-policy", "continue"),
    ("-disable-auto-cleanup",),
    ("--disable-auto-cleanup",),
    ("--with-ft", "ulfm"),
    ("--with-ft", "mpi"),
])
def test_continue_waits_for_the_survivors_and_exits_with_the_killed_ranks_code(build, policy):
    exe = build("process_failure")
    res = run(3, exe, "local", 3, mpiexec_opts=(*policy, "--inject", "kill:1@1s", "--timeout", "30"),
              timeout=60)
    assert res.returncode == 137, res.describe()
    # The survivors ran to their end after the kill: mpiexec waited for them.
    lines = res.stdout.split("\n")[:-1]
    assert sorted(lines) == ["done 0", "done 2", "ready 0", "ready 1", "ready 2"], res.describe()
    assert res.elapsed >= 3, res.describe()
    continued = stderr_lines(res, "the job continues")
    # Rank 1 first; then each survivor, which left without MPI_Finalize.
    assert continued[0] == CONTINUE_LINE.format(rank=1, how=KILLED), res.describe()
    assert sorted(continued[1:]) == [
        CONTINUE_LINE.format(rank=rank, how="exited with code 0 before MPI_Finalize") for rank in (0, 2)
    ], res.describe()
    assert "timed out" not in res.stderr, res.describe()
    report = stderr_lines(res, "FT report")
    assert len(report) == 1 and "processes lost 3" in report[0], res.describe()
    # Under continue a death is expected: every line about it, and the
    # report, is a warning (MPICH's runtests fails a test on other output).
    assert report[0].startswith("WARNING: mpiexec: FT report: "), res.describe()
    assert all(line.startswith("WARNING: ") for line in res.stderr.splitlines()), res.describe()


def test_continue_with_a_host_down_loses_every_rank_of_the_host(build):
    exe = build("process_failure")
    res = run(2, exe, "wait", mpiexec_opts=("--failure-policy", "continue", "--inject",
                                            "host-down:localhost@1s", "--timeout", "30"), timeout=60)
    assert res.returncode == 137, res.describe()
    assert sorted(stderr_lines(res, "the job continues")) == [
        CONTINUE_LINE.format(rank=rank, how=KILLED) for rank in (0, 1)
    ], res.describe()


def test_with_ft_bogus_is_a_usage_error(build):
    exe = build("process_failure")
    res = run(2, exe, "local", 0, mpiexec_opts=("--with-ft", "bogus"))
    assert res.returncode == 2, res.describe()
    assert "mpiexec: --with-ft 'bogus': expected ulfm or mpi or no" in res.stderr, res.describe()
    assert "ready" not in res.stdout, res.describe()


@pytest.mark.parametrize("item,reason", [
    ("kill:9@1s", "rank 9 is not in this job of 2 ranks"),
    ("kill:1.1@1s", "replica 1: no replicas in this job"),
    ("host-down:nowhere@1s", "no rank of this job runs on host nowhere"),
])
def test_process_fault_outside_the_job_is_a_usage_error_naming_the_item(build, item, reason):
    exe = build("process_failure")
    res = run(2, exe, "local", 0, mpiexec_opts=("--inject", item))
    assert res.returncode == 2, res.describe()
    assert f"mpiexec: --inject item `{item}`: {reason}" in res.stderr, res.describe()
    assert "ready" not in res.stdout, res.describe()


def test_a_rank_killed_right_after_printing_has_not_lost_the_line(build):
    """stdout of a rank is a pipe, fully buffered by the C library: resmpi
    line-buffers it at MPI_Init, so a line printed just before a SIGKILL
    reaches mpiexec (tests/c/last_line.c); with RESMPI_LINE_BUFFERED=off
    it is lost, which shows the test can fail."""
    exe = build("last_line")
    res = run(3, exe, mpiexec_opts=("--failure-policy", "continue", "--timeout", "30"), timeout=60)
    assert res.returncode == 137, res.describe()
    assert sorted(res.stdout.splitlines()) == ["rank 0: done", "rank 1: last line", "rank 2: done"], \
        res.describe()
    res = run(3, exe, mpiexec_opts=("--failure-policy", "continue", "-x", "RESMPI_LINE_BUFFERED=off",
                                    "--timeout", "30"), timeout=60)
    assert "rank 1: last line" not in res.stdout, res.describe()


@pytest.mark.parametrize("victim", [0, 1, 2])
def test_a_death_during_wire_up_under_continue_ends_the_job_in_bounded_time(build, victim):
    # Every rank holds between the exchange of business cards and the TCP
    # connections (RESMPI_TEST_WIREUP_PAUSE_MS) while one is killed: the
    # others then wait for a peer that will never connect or accept, with
    # nobody to tell them (they watch for failures only after wire-up).
    # mpiexec ends the job after its start-up grace instead of letting
    # them wait out their connect deadline (or the job's timeout).
    exe = build("process_failure")
    res = run(3, exe, "wait", mpiexec_opts=("--failure-policy", "continue", "--paths", "tcp",
                                            "--inject", f"kill:{victim}@1s", "--timeout", "60"),
              env={"RESMPI_TEST_WIREUP_PAUSE_MS": "3000"}, timeout=90)
    assert res.returncode == 137, res.describe()
    ended = stderr_lines(res, "during MPI_Init")
    assert len(ended) == 1 and f"rank {victim} " in ended[0] and "ending the job" in ended[0], res.describe()
    assert "ready" not in res.stdout, res.describe()
    assert "timed out" not in res.stderr, res.describe()
    assert res.elapsed < 30, res.describe()
