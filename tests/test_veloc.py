"""VeloC's checkpoint API (veloc.h, issue 13 item 4) on real processes.

Without message logging: checkpoints written by one run are found and
loaded by the next (a whole-job restart), a corrupt newest version is
refused by every rank's VELOC_Restart_test (the ranks agree on the older
version all of them have intact), bad arguments return VELOC_FAILURE with
a message and never abort, and a heatdis-style program stopped half way
and run again ends with the numbers of an uninterrupted run.

Under `--msglog pessimistic`: a rank of the heatdis-style program killed
at a time inside its loop is restarted and the job's output is, rank by
rank, what a fault-free run prints; and a restarted rank replays
VELOC_Restart_test's recorded answer even when the checkpoints it wrote
since would make it answer otherwise.

Under `--msglog pessimistic --ckpt-dir D`, a checkpoint also saves the
library's position, and a killed rank's replacement resumes there instead
of replaying from MPI_Init: the output is still, rank by rank, what a
fault-free run prints (its own "restarting" line muted), the survivors
re-sent fewer messages than for a replay from MPI_Init (the same kill with
RESMPI_MSGLOG_RESUME=off), and they trimmed their logs.
"""
import re
from pathlib import Path

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("veloc.h is resmpi's")

BOUND_SECONDS = 60
TAG = re.compile(r"^\[(\d+)\] (.*)$")
HEAT_ITERATIONS = 600
HEAT_EVERY = 40


@pytest.fixture(scope="module")
def basic_exe(build):
    return build("veloc_basic")


@pytest.fixture(scope="module")
def heat_exe(build):
    return build("veloc_heat")


def per_rank(stdout):
    lines = {}
    for line in stdout.splitlines():
        m = TAG.match(line)
        assert m, f"untagged line {line!r}"
        lines.setdefault(int(m[1]), []).append(m[2])
    return lines


def config(tmp_path, directory=None):
    cfg = tmp_path / "veloc.cfg"
    text = "# resmpi test\nmode = sync\n"
    if directory is not None:
        text += f"scratch = {directory}\npersistent = {directory}\n"
    cfg.write_text(text)
    return cfg


def tagged(nprocs, exe, *args, opts=()):
    res = run(nprocs, exe, *args, mpiexec_opts=["--tag-output", "--timeout", str(BOUND_SECONDS), *opts],
              timeout=BOUND_SECONDS + 30)
    return res


def flip_byte(path, offset=60):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_checkpoints_of_one_run_are_loaded_by_the_next(basic_exe, tmp_path):
    cfg = config(tmp_path, tmp_path / "ckpt")
    res = tagged(3, basic_exe, "write", cfg)
    assert res.returncode == 0, res.describe()
    for rank in range(3):
        for version in (1, 2):
            assert (tmp_path / "ckpt" / f"basic-{rank}-{version}.dat").is_file(), res.describe()
    assert not [p for p in (tmp_path / "ckpt").iterdir() if ".tmp" in p.name], "a temporary was left"
    res = tagged(3, basic_exe, "read", cfg)
    assert res.returncode == 0, res.describe()
    for rank, lines in per_rank(res.stdout).items():
        assert lines == ["restart_test 2", "restart rc 0 values match scalar match",
                         "restart_test_bound_1 1"], f"rank {rank}\n{res.describe()}"


def test_a_corrupt_newest_checkpoint_is_refused_and_every_rank_takes_the_older_one(basic_exe, tmp_path):
    cfg = config(tmp_path, tmp_path / "ckpt")
    assert tagged(3, basic_exe, "write", cfg).returncode == 0
    flip_byte(tmp_path / "ckpt" / "basic-1-2.dat")
    res = tagged(3, basic_exe, "read", cfg)
    assert res.returncode == 0, res.describe()
    # Rank 1 has only version 1 intact: all three must agree on it (a rank
    # told to load a version it does not have would fail or diverge).
    for rank, lines in per_rank(res.stdout).items():
        assert lines[:2] == ["restart_test 1", "restart rc 0 values match scalar match"], \
            f"rank {rank}\n{res.describe()}"
    assert "refusing" in res.stderr and "basic-1-2.dat: checksum mismatch" in res.stderr, res.describe()


def test_a_truncated_checkpoint_is_refused(basic_exe, tmp_path):
    cfg = config(tmp_path, tmp_path / "ckpt")
    assert tagged(2, basic_exe, "write", cfg).returncode == 0
    path = tmp_path / "ckpt" / "basic-0-2.dat"
    path.write_bytes(path.read_bytes()[:100])
    res = tagged(2, basic_exe, "read", cfg)
    assert res.returncode == 0, res.describe()
    assert [lines[0] for lines in per_rank(res.stdout).values()] == ["restart_test 1"] * 2, res.describe()


def test_no_intact_checkpoint_anywhere_answers_failure(basic_exe, tmp_path):
    cfg = config(tmp_path, tmp_path / "ckpt")
    res = tagged(2, basic_exe, "read", cfg)
    assert res.returncode == 0, res.describe()
    for lines in per_rank(res.stdout).values():
        assert lines == ["restart_test -1", "restart_test_bound_1 -1"], res.describe()


def test_bad_arguments_return_failure_with_a_message_and_never_abort(basic_exe, tmp_path):
    cfg = config(tmp_path, tmp_path / "ckpt")
    res = tagged(2, basic_exe, "errors", cfg)
    assert res.returncode == 0, res.describe()
    for rank, lines in per_rank(res.stdout).items():
        codes = dict(line.split() for line in lines)
        expected_ok = {"restart_test_after_errors", "finalize"}
        assert len(codes) == 22, f"rank {rank}: {codes}"
        for call, code in codes.items():
            assert code == ("0" if call in expected_ok else "-1"), f"rank {rank}: {call} -> {code}"
    for message in ["VELOC_Init: comm is MPI_COMM_NULL",
                    "VELOC_Mem_protect: VeloC is not initialized",
                    "VELOC_Checkpoint_begin: checkpoint name 'a-b'",
                    "VELOC_Recover_selective: region 0: protected with 4 bytes, saved with 4000",
                    "VELOC_Region_protect: named regions",
                    "VELOC_Finalize: VeloC is not initialized"]:
        assert message in res.stderr, f"{message!r} missing\n{res.describe()}"


def test_ckpt_dir_option_is_where_checkpoints_go(basic_exe, tmp_path):
    cfg = config(tmp_path, tmp_path / "from-cfg")
    res = tagged(2, basic_exe, "write", cfg, opts=["--ckpt-dir", str(tmp_path / "from-option")])
    assert res.returncode == 0, res.describe()
    assert sorted(p.name for p in (tmp_path / "from-option").iterdir() if p.suffix == ".dat") == \
        ["basic-0-1.dat", "basic-0-2.dat", "basic-1-1.dat", "basic-1-2.dat"]
    assert not (tmp_path / "from-cfg").exists()


def test_no_directory_anywhere_fails_veloc_init(basic_exe, tmp_path):
    res = tagged(2, basic_exe, "write", config(tmp_path))
    assert res.returncode != 0
    assert "no checkpoint directory" in res.stderr and "VELOC_Init failed" in res.stdout, res.describe()


def test_restart_test_answers_are_recorded_per_call_not_per_init_cycle(basic_exe, tmp_path):
    """Under --msglog each answer is recorded under the call's ordinal in the
    process: a second VELOC_Init cycle's first call is a new call, asked
    afresh (keyed per cycle, it would get the first cycle's -1 back)."""
    ckpt = tmp_path / "ckpt"
    res = tagged(2, basic_exe, "cycles", config(tmp_path),
                 opts=["--msglog", "pessimistic", "--ckpt-dir", str(ckpt)])
    assert res.returncode == 0, res.describe()
    for rank, lines in per_rank(res.stdout).items():
        assert lines == ["first_cycle -1", "checkpoint_7 0", "second_cycle 7"], \
            f"rank {rank}\n{res.describe()}"
    assert (ckpt / ".resmpi-veloc-0.restart-tests").is_file()


def heat_args(cfg, stop_after=None):
    args = [HEAT_ITERATIONS, HEAT_EVERY, cfg]
    return args + [stop_after] if stop_after is not None else args


def final_lines(lines):
    """What a run ends with: the last line of each rank (the checksum)."""
    return {rank: rank_lines[-1] for rank, rank_lines in lines.items()}


@pytest.fixture(scope="module")
def heat_fault_free(heat_exe, tmp_path_factory):
    directory = tmp_path_factory.mktemp("heat-fault-free")
    res = tagged(3, heat_exe, *heat_args(config(directory, directory / "ckpt")))
    assert res.returncode == 0, res.describe()
    lines = per_rank(res.stdout)
    assert all(line.startswith(f"done {HEAT_ITERATIONS} checksum") for line in final_lines(lines).values())
    return lines


def test_heat_stopped_half_way_and_run_again_ends_as_an_uninterrupted_run(
        heat_exe, heat_fault_free, tmp_path):
    cfg = config(tmp_path, tmp_path / "ckpt")
    res = tagged(3, heat_exe, *heat_args(cfg, stop_after=250))
    assert res.returncode == 0, res.describe()
    res = tagged(3, heat_exe, *heat_args(cfg))
    assert res.returncode == 0, res.describe()
    lines = per_rank(res.stdout)
    for rank in range(3):
        assert lines[rank][0] == "restarting from version 240", res.describe()
    assert final_lines(lines) == final_lines(heat_fault_free), res.describe()


def logged(nprocs, exe, args, kill, ckpt_dir):
    opts = ["--msglog", "pessimistic", "--ckpt-dir", str(ckpt_dir), "--inject", kill]
    return tagged(nprocs, exe, *args, opts=opts)


def assert_restarted(res, victim):
    assert res.returncode == 0, f"exit {res.returncode}\n{res.describe()}"
    assert f"rank {victim} started again as incarnation 1" in res.stderr, \
        f"the kill did not happen\n{res.describe()}"
    assert res.elapsed < BOUND_SECONDS, f"took {res.elapsed:.1f} s\n{res.describe()}"


# Seeded kill times inside the loop (600 iterations of at least 2 ms each).
@pytest.mark.parametrize("victim,at", [(1, "150ms"), (0, "420ms"), (2, "730ms"), (1, "900ms")])
def test_heat_under_msglog_with_a_rank_killed_prints_what_a_fault_free_run_prints(
        heat_exe, heat_fault_free, tmp_path, victim, at):
    cfg = config(tmp_path)
    res = logged(3, heat_exe, heat_args(cfg), f"kill:{victim}@{at}", tmp_path / "ckpt")
    assert_restarted(res, victim)
    assert per_rank(res.stdout) == heat_fault_free, res.describe()
    # The victim's checkpoints exist and are intact to the last version.
    assert (tmp_path / "ckpt" / f"heat-{victim}-{HEAT_ITERATIONS}.dat").is_file()


# Once at a time; then at its 600th send (deterministic) and again, while
# incarnation 1 runs on, at a time: incarnation 2 replays the record too.
@pytest.mark.parametrize("kills", ["kill:1@600ms", "kill:1@sends=600,kill:1@700ms"])
def test_a_restarted_rank_replays_the_restart_test_answer_it_gave_before(
        heat_exe, heat_fault_free, tmp_path, kills):
    """Run 1 stops at 250 (checkpoints 40..240). Rank 1's newest (240) is
    corrupted: run 2's ranks agree on 200 and restart from it. Rank 1 then
    writes 240, 280, ... and is killed; its replacement replays from
    MPI_Init. Asked afresh, its Restart_test would offer its newest version
    where it offered 200; at 3 ranks rank 1 combines its own value with
    rank 0's and rank 2's logged ones in the allreduce, gets 240, and the
    replay goes another way than the survivors' (a rank 0 victim would not
    show it: rank 0 is handed the result by rank 1). The recorded answer
    (200, in 2 rounds) keeps the replay exact."""
    ckpt = tmp_path / "ckpt"
    cfg = config(tmp_path)
    res = tagged(3, heat_exe, *heat_args(cfg, stop_after=250), opts=["--ckpt-dir", str(ckpt)])
    assert res.returncode == 0, res.describe()
    flip_byte(ckpt / "heat-1-240.dat")
    res = logged(3, heat_exe, heat_args(cfg), kills, ckpt)
    assert_restarted(res, 1)
    if kills.count("kill:") == 2:
        assert "rank 1 started again as incarnation 2" in res.stderr, res.describe()
    lines = per_rank(res.stdout)
    for rank in range(3):
        assert lines[rank][0] == "restarting from version 200", res.describe()
    assert final_lines(lines) == final_lines(heat_fault_free), res.describe()
    assert lines[0][1:] == [line for line in heat_fault_free[0]
                            if int(line.split()[1]) >= 200 or not line.startswith("step")], res.describe()


def report_counters(path):
    import json
    return json.loads(path.read_text())["counters"]


def logged_with_report(exe, tmp_path, kill, name, env=None):
    cfg = config(tmp_path)
    report = tmp_path / f"{name}.json"
    opts = ["--msglog", "pessimistic", "--ckpt-dir", str(tmp_path / name), "--inject", kill,
            "--report-json", str(report)]
    res = run(3, exe, *heat_args(cfg),
              mpiexec_opts=["--tag-output", "--timeout", str(BOUND_SECONDS), *opts],
              timeout=BOUND_SECONDS + 30, env=env)
    return res, report


# Seeded kill times, each after at least one checkpoint (every 40
# iterations of at least 2 ms): rank 0 prints as it goes, so its resumed
# output must line up with what the original showed; the last kills rank 0
# again while its first replacement runs on (incarnation 2 resumes from a
# checkpoint incarnation 1 wrote).
@pytest.mark.parametrize("victim,kill", [
    (0, "kill:0@330ms"), (1, "kill:1@520ms"), (2, "kill:2@610ms"), (0, "kill:0@870ms"),
    (0, "kill:0@300ms,kill:0@800ms")])
def test_heat_killed_after_a_checkpoint_resumes_from_its_position(
        heat_exe, heat_fault_free, tmp_path, victim, kill):
    import os
    res, report = logged_with_report(heat_exe, tmp_path, kill, "resumed")
    assert_restarted(res, victim)
    if kill.count("kill:") == 2:
        assert f"rank {victim} started again as incarnation 2" in res.stderr, res.describe()
    assert per_rank(res.stdout) == heat_fault_free, res.describe()
    counters = report_counters(report)
    assert counters.get("msglog_trimmed_bytes", 0) > 0, counters
    # The same kill, the replacement replaying from MPI_Init (no position
    # saved, nothing trimmed): the survivors re-send more.
    env = dict(os.environ, RESMPI_MSGLOG_RESUME="off")
    from_start, from_start_report = logged_with_report(heat_exe, tmp_path, kill, "from-start", env=env)
    assert_restarted(from_start, victim)
    assert per_rank(from_start.stdout) == heat_fault_free, from_start.describe()
    from_start_counters = report_counters(from_start_report)
    assert "msglog_trimmed_bytes" not in from_start_counters, from_start_counters
    assert counters["msglog_replayed_messages"] < from_start_counters["msglog_replayed_messages"], \
        (counters, from_start_counters)
