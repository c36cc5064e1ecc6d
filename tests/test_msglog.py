"""Pessimistic message logging on real processes (issue 13, first slice):
`mpiexec --msglog pessimistic` runs every rank on lib/msglog (sender-based
payload log, determinants stored by the job's event logger: see
test_msglog_eventlog.py), a rank killed with
`--inject kill:R@sends=N` is started again by mpiexec as the next
incarnation, re-joins, replays from MPI_Init (its ANY_SOURCE receives
pinned to the logged sources, the survivors re-sending every message they
had sent it, its own re-sends dropped as duplicates), and the job goes on.

What must hold, for every kill point:
- the kill happened (mpiexec names the restart), the job ends with 0 in
  bounded time, and nothing is reported as failed;
- each rank's output is byte-for-byte what a fault-free run prints
  (compared per rank: lines of different ranks interleave differently in
  any two runs, with or without a fault); what the restarted rank printed
  again while it replayed is not shown twice;
- for the ANY_SOURCE program, whose result depends on match order (which
  differs from run to run), every rank's result is the one the printed
  match order implies: a replay that matched in another order would give
  the restarted rank answers the survivors never saw.

Options --msglog cannot honour are refused with a clear error.
"""
import random
import re

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("--msglog is resmpi's")

BOUND_SECONDS = 60
TAG = re.compile(r"^\[(\d+)\] (.*)$")


def victim_of(kill):
    """The rank an `--inject kill:RANK@…` spec kills first."""
    return int(kill.split(":")[1].split("@")[0])


@pytest.fixture(scope="module")
def ring_exe(build):
    return build("msglog_ring")


@pytest.fixture(scope="module")
def anysource_exe(build):
    return build("msglog_anysource")


@pytest.fixture(scope="module")
def choices_exe(build):
    return build("msglog_choices")


@pytest.fixture(scope="module")
def probes_exe(build):
    return build("msglog_probes")


@pytest.fixture(scope="module")
def coll_exe(build):
    return build("msglog_coll")


def per_rank(stdout):
    """Each rank's lines, in order ('--tag-output' prefixes them)."""
    lines = {}
    for line in stdout.splitlines():
        m = TAG.match(line)
        assert m, f"untagged line {line!r}"
        lines.setdefault(int(m[1]), []).append(m[2])
    return lines


def run_logged(nprocs, exe, args, kill=None, extra=()):
    opts = ["--msglog", "pessimistic", "--tag-output", "--timeout", str(BOUND_SECONDS), *extra]
    if kill:
        opts += ["--inject", kill]
    return run(nprocs, exe, *args, mpiexec_opts=opts, timeout=BOUND_SECONDS + 30)


def fault_free(nprocs, exe, args):
    res = run(nprocs, exe, *args, mpiexec_opts=["--tag-output"], timeout=BOUND_SECONDS)
    assert res.returncode == 0, res.describe()
    return per_rank(res.stdout)


def assert_recovered(res, victim, nprocs):
    assert res.returncode == 0, f"exit {res.returncode}\n{res.describe()}"
    assert f"rank {victim} started again as incarnation 1" in res.stderr, \
        f"the kill did not happen\n{res.describe()}"
    assert res.elapsed < BOUND_SECONDS, f"took {res.elapsed:.1f} s\n{res.describe()}"
    assert "resmpi:" not in res.stderr.replace("WARNING: ", ""), res.describe()
    assert sorted(per_rank(res.stdout)) == list(range(nprocs)), res.describe()


_baselines = {}


def baseline(nprocs, exe, args):
    key = (str(exe), nprocs, tuple(args))
    if key not in _baselines:
        _baselines[key] = fault_free(nprocs, exe, args)
    return _baselines[key]


@pytest.mark.parametrize("nprocs,count,kill", [
    (3, 16, "kill:1@sends=3"),
    (3, 16, "kill:1@sends=17"),
    (3, 16, "kill:1@sends=41"),
    (4, 16, "kill:0@sends=25"),
    (4, 16, "kill:3@sends=33"),
    (3, 20000, "kill:2@sends=9"),
    (3, 20000, "kill:0@sends=30"),
])
def test_a_ring_exchange_with_a_rank_killed_mid_run_prints_what_a_fault_free_run_prints(
        ring_exe, nprocs, count, kill):
    args = [20, count]
    expected = baseline(nprocs, ring_exe, args)
    res = run_logged(nprocs, ring_exe, args, kill)
    victim = victim_of(kill)
    assert_recovered(res, victim, nprocs)
    assert per_rank(res.stdout) == expected, res.describe()


@pytest.mark.parametrize("count,kill", [
    (16, "kill:1@sends=17"),
    (16, "kill:2@sends=40"),
    (20000, "kill:1@sends=23"),
])
def test_synchronous_sends_replay_and_are_answered(ring_exe, count, kill):
    args = [20, count, 1]
    expected = baseline(3, ring_exe, args)
    res = run_logged(3, ring_exe, args, kill)
    victim = victim_of(kill)
    assert_recovered(res, victim, 3)
    assert per_rank(res.stdout) == expected, res.describe()


def test_the_same_rank_killed_twice_is_restarted_twice_and_the_output_is_unchanged(ring_exe):
    # The first kill at its 17th send (about round 8 of 60, 10 ms a round),
    # the second at 450 ms, while incarnation 1 replays or runs on.
    args = [60, 16, 0, 10000]
    expected = baseline(3, ring_exe, args)
    res = run_logged(3, ring_exe, args, "kill:1@sends=17,kill:1@450ms")
    assert_recovered(res, 1, 3)
    assert "rank 1 started again as incarnation 2" in res.stderr, res.describe()
    assert per_rank(res.stdout) == expected, res.describe()


@pytest.mark.parametrize("kill", ["kill:0@sends=10,kill:2@sends=12", "kill:1@sends=5,kill:3@sends=30"])
def test_two_ranks_killed_at_different_sends_both_recover(ring_exe, kill):
    args = [20, 16]
    expected = baseline(4, ring_exe, args)
    res = run_logged(4, ring_exe, args, kill)
    for victim in (int(item.split(":")[1].split("@")[0]) for item in kill.split(",")):
        assert_recovered(res, victim, 4)
    assert per_rank(res.stdout) == expected, res.describe()


def test_two_any_source_workers_killed_recover_consistently(anysource_exe):
    res = run_logged(5, anysource_exe, [12], "kill:1@sends=4,kill:3@sends=7")
    assert_recovered(res, 1, 5)
    assert_recovered(res, 3, 5)
    anysource_consistent(per_rank(res.stdout), 5, 12)


def test_a_rank_that_dies_more_often_than_it_may_be_restarted_ends_the_job(ring_exe):
    args = [60, 16, 0, 10000]
    res = run_logged(3, ring_exe, args, "kill:1@sends=17,kill:1@450ms", extra=["--respawn", "1"])
    assert res.returncode == 137, res.describe()
    assert "rank 1 died again after 1 restarts" in res.stderr, res.describe()
    assert res.elapsed < BOUND_SECONDS, res.describe()


@pytest.mark.parametrize("mode", ["pessimistic", "optimistic"])
def test_a_rank_dead_after_mpi_finalize_ends_the_job_with_its_code_not_a_replay(ring_exe, mode):
    """A rank killed after MPI_Finalize is not started again (its replay
    would wait for re-sends from peers that have finished: the job hung
    until its timeout): the job ends at once with the death's code and a
    message saying why, and every rank's output, its own included, is
    there."""
    res = run(3, ring_exe, 20, 16, 0, 0, 1,
              mpiexec_opts=["--msglog", mode, "--tag-output", "--timeout", str(BOUND_SECONDS)],
              timeout=BOUND_SECONDS + 30)
    assert res.returncode == 137, res.describe()
    assert "rank 1 died after MPI_Finalize; message logging does not start it again" in res.stderr, \
        res.describe()
    assert "started again" not in res.stderr, res.describe()
    assert res.elapsed < BOUND_SECONDS / 2, res.describe()
    assert per_rank(res.stdout) == baseline(3, ring_exe, [20, 16]), res.describe()


def anysource_consistent(lines, nprocs, rounds):
    """Recompute every rank's result from rank 0's printed match orders."""
    mask = (1 << 64) - 1
    hash_value = 1469598103934665603
    values = {rank: rank for rank in range(1, nprocs)}
    orders = [line for line in lines[0] if line.startswith("round ")]
    assert len(orders) == rounds, lines[0]
    for round_index, line in enumerate(orders):
        order = [int(word) for word in line.split("order")[1].split()]
        assert sorted(order) == list(range(1, nprocs)), line
        sent = dict(values)
        for source in order:
            hash_value = ((hash_value ^ (source * 7919 + sent[source])) * 1099511628211) & mask
        for worker in range(1, nprocs):
            answer = hash_value % 100000 + worker
            values[worker] = values[worker] * 3 + answer
            # C long wraps like two's complement; keep it within 64 bits.
            values[worker] = (values[worker] + (1 << 63)) % (1 << 64) - (1 << 63)
    assert lines[0][-1] == f"rank 0 hash {hash_value}", lines[0]
    for worker in range(1, nprocs):
        assert lines[worker] == [f"rank {worker} value {values[worker]}"], lines[worker]


# Kill points of the ANY_SOURCE program (master 0), shared by both modes.
ANYSOURCE_KILLS = [
    (4, "kill:0@sends=4"),
    (4, "kill:0@sends=14"),
    (3, "kill:0@sends=9"),
    (4, "kill:2@sends=5"),
    (4, "kill:1@sends=7"),
]


@pytest.mark.parametrize("nprocs,kill", ANYSOURCE_KILLS)
def test_any_source_matches_replay_in_the_logged_order(anysource_exe, nprocs, kill):
    rounds = 12
    res = run_logged(nprocs, anysource_exe, [rounds], kill)
    victim = victim_of(kill)
    assert_recovered(res, victim, nprocs)
    anysource_consistent(per_rank(res.stdout), nprocs, rounds)


def test_the_any_source_program_is_consistent_without_a_fault(anysource_exe):
    # The checker itself, on a fault-free run under --msglog and without.
    for opts in (["--msglog", "pessimistic", "--tag-output"], ["--tag-output"]):
        res = run(4, anysource_exe, 12, mpiexec_opts=opts, timeout=BOUND_SECONDS)
        assert res.returncode == 0, res.describe()
        anysource_consistent(per_rank(res.stdout), 4, 12)


def choices_consistent(lines, nprocs, rounds):
    """Recompute every rank's result from what rank 0 printed that its
    completion calls reported (msglog_choices.c)."""
    mask = (1 << 64) - 1
    hash_value = 1469598103934665603
    values = {rank: rank for rank in range(1, nprocs)}
    waitany = [line for line in lines[0] if " waitany" in line]
    polls = [line for line in lines[0] if " poll" in line]
    assert len(waitany) == rounds and len(polls) == rounds, lines[0]

    def fold(numbers):
        nonlocal hash_value
        for number in numbers:
            hash_value = ((hash_value ^ (number & mask)) * 1099511628211) & mask

    for round_index in range(rounds):
        order = [int(word) for word in waitany[round_index].split("waitany")[1].split()]
        assert sorted(order) == list(range(1, nprocs)), waitany[round_index]
        fold(order)
        for worker in range(1, nprocs):
            answer = hash_value % 100000 + worker
            values[worker] = (values[worker] * 3 + answer) & mask
        numbers = [int(word) for word in polls[round_index].split("poll")[1].split()]
        # Each success: the failed polls before it, then what it reported
        # (MPI_Test, odd rounds: the position; MPI_Testsome: the count and
        # the positions).
        fold(numbers)
        reported = []
        at = 0
        while at < len(numbers):
            assert numbers[at] >= 0, polls[round_index]
            count = 1 if round_index % 2 == 1 else numbers[at + 1]
            first = at + 1 if round_index % 2 == 1 else at + 2
            assert count >= 1, polls[round_index]
            reported += numbers[first:first + count]
            at = first + count
        assert sorted(reported) == list(range(1, nprocs)), polls[round_index]
    assert lines[0][-1] == f"rank 0 hash {hash_value}", lines[0]
    for worker in range(1, nprocs):
        assert lines[worker] == [f"rank {worker} value {values[worker]}"], lines[worker]


def test_the_completion_choice_program_is_consistent_without_a_fault(choices_exe):
    # The checker itself, on fault-free runs under --msglog and without.
    for opts in (["--msglog", "pessimistic", "--tag-output"], ["--tag-output"]):
        res = run(4, choices_exe, 8, mpiexec_opts=opts, timeout=BOUND_SECONDS)
        assert res.returncode == 0, res.describe()
        choices_consistent(per_rank(res.stdout), 4, 8)


@pytest.mark.parametrize("nprocs,kill", [
    (4, "kill:0@sends=2"),
    (4, "kill:0@sends=7"),
    (4, "kill:0@sends=13"),
    (4, "kill:0@sends=22"),
    (3, "kill:0@sends=9"),
    (4, "kill:2@sends=6"),
])
def test_waitany_testsome_and_test_outcomes_replay_exactly(choices_exe, nprocs, kill):
    # The master killed in its Waitany rounds and polling loops: its new
    # incarnation must report the same choices and the same number of
    # failed polls, or its answers (hence the workers' values) and its
    # final hash no longer follow from what its first incarnation printed.
    rounds = 8
    res = run_logged(nprocs, choices_exe, [rounds], kill)
    victim = victim_of(kill)
    assert_recovered(res, victim, nprocs)
    choices_consistent(per_rank(res.stdout), nprocs, rounds)


@pytest.mark.parametrize("nprocs,kill", [
    (3, "kill:1@sends=10"),
    (4, "kill:2@sends=50"),
    (4, "kill:0@sends=33"),
])
def test_a_collective_loop_with_a_rank_killed_prints_what_a_fault_free_run_prints(
        coll_exe, nprocs, kill):
    args = [30]
    expected = baseline(nprocs, coll_exe, args)
    res = run_logged(nprocs, coll_exe, args, kill)
    victim = victim_of(kill)
    assert_recovered(res, victim, nprocs)
    assert per_rank(res.stdout) == expected, res.describe()


def kill_points(res_of, points):
    """Run `res_of(sends)` for every kill point; the points where no kill
    happened (the rank sent fewer messages) end the sweep."""
    killed = 0
    for sends in points:
        res = res_of(sends)
        if "started again" not in res.stderr:
            assert res.returncode == 0, res.describe()
            break
        killed += 1
        yield sends, res
    assert killed >= 10, f"only {killed} kill points were reached"


def test_a_ring_with_its_rank_1_killed_after_every_one_of_its_sends_prints_the_same(ring_exe):
    args = [20, 16]
    expected = baseline(3, ring_exe, args)
    for sends, res in kill_points(lambda sends: run_logged(3, ring_exe, args, f"kill:1@sends={sends}"),
                                  range(1, 60)):
        assert_recovered(res, 1, 3)
        assert per_rank(res.stdout) == expected, f"kill at send {sends}\n{res.describe()}"


def test_the_any_source_receiver_killed_after_every_one_of_its_sends_replays_its_matches(
        anysource_exe):
    rounds = 12
    for sends, res in kill_points(
            lambda sends: run_logged(4, anysource_exe, [rounds], f"kill:0@sends={sends}"),
            range(1, 60)):
        assert_recovered(res, 0, 4)
        anysource_consistent(per_rank(res.stdout), 4, rounds)


def test_a_log_past_its_bound_ends_the_job_with_an_error_naming_the_bound(ring_exe):
    res = run_logged(3, ring_exe, [20, 16], "kill:1@sends=17",
                     extra=["--msglog-mem", "2K", "--msglog-disk", "0"])
    assert res.returncode not in (0, 124, None), res.describe()
    assert "sender log lacks messages it would have to replay" in res.stderr, res.describe()
    assert "memory bound of 2048 bytes (RESMPI_MSGLOG_MEM / --msglog-mem) and spilling to disk " \
        "is off" in res.stderr, res.describe()
    assert res.elapsed < BOUND_SECONDS, res.describe()


def spill_report(tmp_path):
    import json
    return json.loads((tmp_path / "report.json").read_text())["counters"]


@pytest.mark.parametrize("kill", ["kill:1@sends=3", "kill:1@sends=30", "kill:0@sends=38"])
def test_a_log_spilled_to_disk_replays_a_killed_rank_and_leaves_nothing_behind(
        ring_exe, tmp_path, kill):
    # 160 KB messages against a 64 KiB memory bound: every payload spills.
    args = [20, 20000]
    expected = baseline(3, ring_exe, args)
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    res = run_logged(3, ring_exe, args, kill,
                     extra=["--msglog-mem", "64K", "--msglog-spill-dir", str(spill_dir),
                            "--report-json", str(tmp_path / "report.json")])
    assert_recovered(res, int(kill.split(":")[1].split("@")[0]), 3)
    assert per_rank(res.stdout) == expected, res.describe()
    counters = spill_report(tmp_path)
    # The two survivors sent 2 x 20 messages of 160000 bytes each.
    assert counters["msglog_spilled_bytes"] >= 2 * 40 * 160000, counters
    assert counters["msglog_memory_bytes"] <= 3 * 64 * 1024, counters
    assert list(spill_dir.iterdir()) == [], "spill files left behind"


def test_a_spill_past_its_disk_bound_ends_the_job_with_an_error_naming_it(ring_exe, tmp_path):
    res = run_logged(3, ring_exe, [20, 20000], "kill:1@sends=38",
                     extra=["--msglog-mem", "64K", "--msglog-disk", "1M",
                            "--msglog-spill-dir", str(tmp_path)])
    assert res.returncode not in (0, 124, None), res.describe()
    assert "sender log lacks messages it would have to replay" in res.stderr, res.describe()
    assert "reached its bound of 1048576 bytes (RESMPI_MSGLOG_DISK / --msglog-disk)" \
        in res.stderr, res.describe()
    assert res.elapsed < BOUND_SECONDS, res.describe()


def test_an_unusable_spill_directory_is_named_when_a_restart_needs_the_log(ring_exe, tmp_path):
    missing = tmp_path / "missing"
    res = run_logged(3, ring_exe, [20, 20000], "kill:1@sends=30",
                     extra=["--msglog-mem", "64K", "--msglog-spill-dir", str(missing)])
    assert res.returncode not in (0, 124, None), res.describe()
    assert f"creating the message-log spill file in {missing}" in res.stderr, res.describe()
    assert res.elapsed < BOUND_SECONDS, res.describe()


def test_a_log_that_fits_in_memory_reports_what_it_logged_and_no_spill(ring_exe):
    res = run(3, ring_exe, 2, 16, mpiexec_opts=["--msglog", "pessimistic"], timeout=BOUND_SECONDS)
    assert res.returncode == 0, res.describe()
    assert "msglog_spilled_bytes" not in res.stderr, res.describe()
    # What logging did, not a row of network zeros.
    report = re.search(r"FT report: 3 ranks reported; message logging: (\d+) messages \((\d+) bytes\) "
                       r"logged, log memory per rank max (\d+) bytes", res.stderr)
    assert report and int(report[1]) > 0 and int(report[2]) > 0 and int(report[3]) > 0, \
        res.describe()
    assert "fragments sent" not in res.stderr and " spilled" not in res.stderr, res.describe()


def test_waitany_and_probes_are_logged_and_finalize_warns_of_nothing(build, choices_exe):
    # MPI_Waitany's outcome is a logged determinant: no warning.
    exe = build("msglog_waitany")
    res = run(4, exe, mpiexec_opts=["--msglog", "pessimistic"], timeout=BOUND_SECONDS)
    assert res.returncode == 0, res.describe()
    assert res.stdout == "sum 60\n", res.describe()
    assert "warning" not in res.stderr, res.describe()
    # So is an MPI_Iprobe's now: MPI_Finalize has nothing to warn of.
    res = run(3, choices_exe, 2, "probe", mpiexec_opts=["--msglog", "pessimistic"],
              timeout=BOUND_SECONDS)
    assert res.returncode == 0, res.describe()
    assert "warning" not in res.stderr, res.describe()


def probes_consistent(lines, nprocs, rounds):
    """Recompute every rank's output from what rank 0 printed that its
    probes and completion calls reported (msglog_probes.c), and compare
    it byte for byte with what each rank printed: the output of the
    fault-free run that observes those outcomes."""
    mask = (1 << 64) - 1
    hash_value = 1469598103934665603
    values = {rank: rank for rank in range(1, nprocs)}
    workers = list(range(1, nprocs))

    def numbers(kind, round_index):
        prefix = f"round {round_index} {kind}"
        matching = [line for line in lines[0] if line.startswith(prefix + " ")]
        assert len(matching) == 1, (prefix, lines[0])
        return [int(word) for word in matching[0][len(prefix):].split()]

    def fold(found):
        nonlocal hash_value
        for number in found:
            hash_value = ((hash_value ^ (number & mask)) * 1099511628211) & mask

    expected_master = []
    for round_index in range(rounds):
        found = numbers("iprobe", round_index)
        assert len(found) == 3 * len(workers), found
        triples = [found[at:at + 3] for at in range(0, len(found), 3)]
        assert sorted(source for _, source, _ in triples) == workers, found
        for polls, source, count in triples:
            assert polls >= 0 and count == 1 + (source + round_index) % 3, found
        fold(found)
        expected_master.append(f"round {round_index} iprobe " + " ".join(map(str, found)))
        for worker in workers:
            answer = hash_value % 100000 + worker
            values[worker] = (values[worker] * 3 + answer) & mask
        order = numbers("probe", round_index)
        assert sorted(order) == workers, order
        fold(order)
        expected_master.append(f"round {round_index} probe " + " ".join(map(str, order)))
        polls = numbers("testall", round_index)
        assert len(polls) == 1 + round_index % 2 and min(polls) >= 0, polls
        fold(polls)
        expected_master.append(f"round {round_index} testall " + " ".join(map(str, polls)))
    expected_master.append(f"rank 0 hash {hash_value}")
    assert lines[0] == expected_master, lines[0]
    for worker in workers:
        assert lines[worker] == [f"rank {worker} value {values[worker]}"], lines[worker]


PROBE_ROUNDS = 6
# Rank 0 sends one answer per worker per round: 18 sends with 4 ranks.
# Kill points drawn once from a fixed seed (different points each phase).
MASTER_KILLS = sorted(random.Random(13).sample(range(1, 3 * PROBE_ROUNDS + 1), 6))


def test_the_probe_program_is_consistent_without_a_fault(probes_exe):
    # The checker itself, on fault-free runs under --msglog and without;
    # and the outcomes do depend on timing (else the kills prove nothing).
    outputs = set()
    for opts in (["--msglog", "pessimistic", "--tag-output"], ["--tag-output"]) * 2:
        res = run(4, probes_exe, PROBE_ROUNDS, mpiexec_opts=opts, timeout=BOUND_SECONDS)
        assert res.returncode == 0, res.describe()
        assert "warning" not in res.stderr, res.describe()
        lines = per_rank(res.stdout)
        probes_consistent(lines, 4, PROBE_ROUNDS)
        outputs.add(tuple(lines[0]))
    assert len(outputs) > 1, "four runs observed the same outcomes: the test would prove nothing"


@pytest.mark.parametrize("nprocs,kill", [
    *((4, f"kill:0@sends={sends}") for sends in MASTER_KILLS),
    (3, "kill:0@sends=5"),
    (4, "kill:2@sends=8"),
])
def test_iprobe_improbe_probe_testall_and_get_status_outcomes_replay_exactly(
        probes_exe, nprocs, kill):
    # The master killed in its polling loops and probes: its new
    # incarnation must find the same messages after the same number of
    # failed polls, or its answers (hence the workers' values), its later
    # lines and its final hash no longer follow from what its first
    # incarnation printed.
    res = run_logged(nprocs, probes_exe, [PROBE_ROUNDS], kill)
    victim = victim_of(kill)
    assert_recovered(res, victim, nprocs)
    probes_consistent(per_rank(res.stdout), nprocs, PROBE_ROUNDS)


@pytest.mark.parametrize("opts,message", [
    (["--msglog", "optimistic", "--replicas", "2"], "--msglog with --replicas"),
    (["--msglog", "pessimistic", "--replicas", "2"], "--msglog with --replicas"),
    (["--msglog", "pessimistic", "--failure-policy", "abort"], "--msglog with failure policy abort"),
    (["--msglog", "bogus"], "--msglog 'bogus'"),
    (["--msglog-mem", "1M"], "--msglog-mem needs --msglog pessimistic"),
    (["--msglog-disk", "1M"], "--msglog-disk needs --msglog pessimistic"),
    (["--msglog", "pessimistic", "--msglog-disk", "lots"], "--msglog-disk 'lots'"),
])
def test_what_msglog_cannot_honour_is_refused(ring_exe, opts, message):
    res = run(3, ring_exe, 2, 4, mpiexec_opts=opts, timeout=30)
    assert res.returncode == 2, res.describe()
    assert message in res.stderr, res.describe()


def test_one_rank_is_refused(ring_exe):
    res = run(1, ring_exe, 2, 4, mpiexec_opts=["--msglog", "pessimistic"], timeout=30)
    assert res.returncode == 2, res.describe()
    assert "at least 2 ranks" in res.stderr, res.describe()


def test_the_environment_variable_mirrors_the_option(ring_exe):
    res = run(3, ring_exe, 2, 4, timeout=30, env={"RESMPI_MSGLOG": "bogus"})
    assert res.returncode == 2, res.describe()
    assert "--msglog 'bogus'" in res.stderr, res.describe()
    res = run(3, ring_exe, 2, 4, timeout=30, env={"RESMPI_MSGLOG": "optimistic"})
    assert res.returncode == 0, res.describe()
