"""The event logger trims at checkpoints (issue 13, items 2-3 of the
logger's bounds): under `--msglog MODE --ckpt-dir D` every restartable
checkpoint of a rank (durable, with a position; under optimistic logging
only one taken while its dependencies are stable) tells the logger how
much of the rank's determinant list it covers, and the logger drops that
much from memory and, once the dead records are more than half its file,
rewrites the file without them (temporary, sync, rename).

The program (tests/c/msglog_ckpt_heat.c) makes determinants every
iteration (ANY_SOURCE halo receives, one Waitany at a time) and
checkpoints every CKPT_EVERY iterations. What must hold, in both modes:
- with checkpoints, the most determinants the logger ever held is a
  fraction of what it holds without them, and its file was compacted and
  is smaller;
- a rank killed after its list was trimmed restarts from its checkpoint,
  is served the list from the trim on, and the output is, rank by rank,
  byte-identical to a fault-free run;
- the event logger SIGKILLed after a compaction is started again, reads
  the compacted file back, and a rank killed after that still replays
  exactly.
"""
import json
import os
import signal
import time

import pytest

from conftest import Result, kill_group, launch, mpiexec_cmd, reap_strays, run, run_cmd
from test_veloc import config, per_rank

pytestmark = pytest.mark.resmpi_only("--msglog is resmpi's")

BOUND_SECONDS = 60
# At least 1.5 s of sleeps: every timed kill below lands inside the loop.
ITERATIONS = 1500
EVERY = 20
MODES = ["pessimistic", "optimistic"]


@pytest.fixture(scope="module")
def heat_exe(build):
    return build("msglog_ckpt_heat")


@pytest.fixture(scope="module")
def fault_free(heat_exe, tmp_path_factory):
    directory = tmp_path_factory.mktemp("trim-fault-free")
    res = run(3, heat_exe, ITERATIONS, EVERY, config(directory, directory / "ckpt"),
              mpiexec_opts=["--tag-output", "--timeout", str(BOUND_SECONDS)],
              timeout=BOUND_SECONDS + 30)
    assert res.returncode == 0, res.describe()
    lines = per_rank(res.stdout)
    assert sorted(lines) == [0, 1, 2], res.describe()
    return lines


def logged_command(heat_exe, tmp_path, mode, every, kill=None, name="ckpt"):
    """The mpiexec command of a logged run and the path of its report."""
    report = tmp_path / f"{name}.json"
    opts = ["--tag-output", "--timeout", str(BOUND_SECONDS), "--msglog", mode,
            "--ckpt-dir", str(tmp_path / name), "--report-json", str(report)]
    if kill:
        opts += ["--inject", kill]
    cfg = config(tmp_path)
    return mpiexec_cmd(3, heat_exe, [ITERATIONS, every, cfg], mpiexec_opts=opts), report


def logged(heat_exe, tmp_path, mode, every, kill=None, name="ckpt"):
    cmd, report = logged_command(heat_exe, tmp_path, mode, every, kill, name)
    res = run_cmd(cmd, timeout=BOUND_SECONDS + 30)
    return res, counters_of(report, res)


def counters_of(report, res):
    assert report.exists(), f"no report\n{res.describe()}"
    return json.loads(report.read_text())["counters"]


def assert_clean(res, counters):
    assert res.returncode == 0, res.describe()
    assert res.elapsed < BOUND_SECONDS, res.describe()
    assert counters.get("eventlog_protocol_errors", 0) == 0, counters


@pytest.mark.parametrize("mode", MODES)
def test_periodic_checkpoints_bound_what_the_event_logger_holds_and_its_file(
        heat_exe, fault_free, tmp_path, mode):
    res, trimmed = logged(heat_exe, tmp_path, mode, EVERY, name="with")
    assert_clean(res, trimmed)
    assert per_rank(res.stdout) == fault_free, res.describe()
    res, kept = logged(heat_exe, tmp_path, mode, 0, name="without")
    assert_clean(res, kept)
    # Every determinant stays without checkpoints.
    assert kept.get("eventlog_determinants_trimmed", 0) == 0, kept
    assert kept["eventlog_determinants_live"] == kept["eventlog_determinants_stored"], kept
    assert kept["eventlog_determinants_live_max"] >= ITERATIONS * 6, kept
    # With them, the logger held a fraction at most, and its file shrank.
    assert trimmed["eventlog_determinants_trimmed"] > 0, trimmed
    assert trimmed["eventlog_determinants_live_max"] * 4 < kept["eventlog_determinants_live_max"], \
        (trimmed, kept)
    assert trimmed["eventlog_compactions"] >= 1, trimmed
    assert trimmed["eventlog_log_bytes_compacted"] > 0, trimmed
    assert trimmed["eventlog_log_bytes"] * 2 < kept["eventlog_log_bytes"], (trimmed, kept)
    assert (tmp_path / "with" / "determinants.log").stat().st_size == trimmed["eventlog_log_bytes"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("victim,at", [(1, "700ms"), (0, "1100ms")])
def test_a_rank_killed_after_its_list_was_trimmed_resumes_and_prints_the_same(
        heat_exe, fault_free, tmp_path, mode, victim, at):
    res, counters = logged(heat_exe, tmp_path, mode, EVERY, kill=f"kill:{victim}@{at}")
    assert_clean(res, counters)
    assert f"rank {victim} started again as incarnation 1" in res.stderr, res.describe()
    assert "trimmed this rank's first" not in res.stderr, res.describe()
    assert counters["eventlog_determinants_trimmed"] > 0, counters
    assert per_rank(res.stdout) == fault_free, res.describe()


@pytest.mark.parametrize("mode", MODES)
def test_the_event_logger_killed_after_a_compaction_reads_it_back_and_a_rank_replays(
        heat_exe, fault_free, tmp_path, mode):
    cmd, report = logged_command(heat_exe, tmp_path, mode, EVERY, kill="kill:2@1200ms")
    directory = tmp_path / "ckpt"
    counters_file = directory / "eventlog.counters"
    started = time.monotonic()
    p = launch(cmd)
    try:
        deadline = started + 20
        compacted = False
        while time.monotonic() < deadline and p.poll() is None and not compacted:
            text = counters_file.read_text() if counters_file.exists() else ""
            compacted = any(line.startswith("compactions ") and int(line.split()[1]) > 0
                            for line in text.splitlines())
            time.sleep(0.005)
        assert compacted, "the logger never compacted its file"
        # Only the logger this job started (its own --ckpt-dir names it).
        os.kill(int((directory / "eventlog.pid").read_text()), signal.SIGKILL)
        out, err = p.communicate(timeout=BOUND_SECONDS + 30)
    except BaseException:
        kill_group(p)
        reap_strays()
        raise
    kill_group(p)
    res = Result(p.returncode, out, err, time.monotonic() - started, [str(c) for c in cmd])
    counters = counters_of(report, res)
    assert_clean(res, counters)
    assert "mpiexec: event logger started again" in res.stderr, res.describe()
    assert counters["eventlog_restarts"] == 1, counters
    assert "rank 2 started again as incarnation 1" in res.stderr, res.describe()
    assert counters["eventlog_determinants_recovered"] > 0, counters
    assert per_rank(res.stdout) == fault_free, res.describe()
