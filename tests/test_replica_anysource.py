"""mpiexec --replicas R --replica-masking process --replica-anysource agree
(issue 12 item 6): the replicas of a rank agree on the source of every
MPI_ANY_SOURCE receive, so a program that is not send-deterministic runs
correctly under replication.

replica_anysource.c is such a program: its master answers the workers in
the order their messages arrived, and each worker's delay depends on its
replica index, so the master's replicas see different orders. Under
`free` (the default, SDR-MPI's send-determinism assumption) the replicas
diverge: the --sdc check reports it, and after a substitute takes over a
worker sees a history that is not its own (FAIL). Under `agree` the lowest
live replica decides each match and the others follow it, with the leader
or any other replica killed. Every run is bounded by mpiexec's --timeout
and the harness's timeout."""
import re

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("mpiexec --replicas is a resmpi option")

RANKS = 4
ROUNDS = 12
DELAY_US = 3000
PROCESS_MASKING = ("--replica-masking", "process")
AGREE = ("--replica-anysource", "agree")
SURVIVED = re.compile(r"WARNING: mpiexec: rank (\d+) replica (\d+) \(pid \d+\) killed by signal 9 \(SIGKILL\) "
                      r"\u2014 rank (\d+) goes on with replica\(s\) ([\d, ]+) \(replica masking process\)")


def anysource_run(build, replicas, *options, rounds=ROUNDS):
    return run(RANKS, build("replica_anysource"), rounds, DELAY_US,
               mpiexec_opts=("--replicas", replicas, *PROCESS_MASKING, *options, "--timeout", "60"),
               timeout=90)


def assert_consistent(res, rounds=ROUNDS):
    """Exit 0, no FAIL; per round a line naming every worker once and a
    pair line in which the named receive got rank 1's message that the
    wildcard did not take; OK."""
    assert res.returncode == 0, res.describe()
    assert "FAIL" not in res.stdout, res.describe()
    lines = res.stdout.splitlines()
    assert lines[-1] == "OK" and len(lines) == 2 * rounds + 1, res.describe()
    for round_ in range(rounds):
        words = lines[2 * round_].split()
        assert words[:3] == ["round", str(round_), "order"], res.describe()
        assert sorted(map(int, words[3:])) == list(range(1, RANKS)), res.describe()
        words = lines[2 * round_ + 1].split()
        assert words[:3] == ["round", str(round_), "pair"], res.describe()
        first, second, third = (10 * round_ + 1, 10 * round_ + 6, 10 * round_ + 2)
        assert [int(word) for word in words[3:]] in (
            [first, second, third], [third, first, second]), res.describe()


def test_the_program_runs_unreplicated(build):
    assert_consistent(run(RANKS, build("replica_anysource"), ROUNDS, DELAY_US, timeout=60))


@pytest.mark.parametrize("replicas", [2, 3])
def test_agree_keeps_the_replicas_of_a_rank_identical(build, replicas):
    res = anysource_run(build, replicas, *AGREE, "--sdc", "abort")
    assert_consistent(res)
    assert "diverged" not in res.stderr, res.describe()
    # The followers' wildcard receives were pinned to the leader's choice:
    # (R - 1) followers x (3 workers + 2 in the pair phase) x ROUNDS.
    pinned = re.search(r"replica_wildcards_pinned (\d+)", res.stderr)
    assert pinned and int(pinned[1]) == (replicas - 1) * (RANKS - 1 + 2) * ROUNDS, res.describe()


def test_free_lets_the_replicas_diverge_and_sdc_finds_it(build):
    """What agree prevents: without it the master's replicas answer in
    different orders (the test program can fail)."""
    res = anysource_run(build, 2, "--sdc", "report")
    assert res.returncode == 0, res.describe()
    assert "replicas diverged" in res.stderr, res.describe()
    res = anysource_run(build, 2, "--replica-anysource", "free", "--sdc", "abort")
    assert res.returncode != 0 and "replicas diverged" in res.stderr, res.describe()


def test_free_with_the_masters_replica_killed_feeds_a_worker_a_foreign_history(build):
    res = anysource_run(build, 2, "--inject", "kill:0.0@sends=12")
    assert "FAIL" in res.stdout, res.describe()


@pytest.mark.parametrize("replicas, kills", [
    (2, "kill:0.0@sends=4"),    # the leader of the master's replicas, early
    (2, "kill:0.0@sends=17"),   # the leader, mid-run
    (2, "kill:0.1@sends=10"),   # the master's follower
    (2, "kill:2.0@sends=5"),    # a worker's replica
    (3, "kill:0.0@sends=8"),    # the leader; replica 1 leads and merges replica 2's decisions
    (3, "kill:0.1@sends=8"),
    (3, "kill:0.0@sends=6,kill:0.1@sends=20"),  # two leaders in turn; replica 2 ends alone
    (3, "kill:0.2@sends=5,kill:0.0@sends=22"),
    (3, "kill:0.0@sends=9,kill:3.1@sends=4"),   # the master's leader and a worker's replica
])
def test_agree_masks_a_killed_replica_including_the_leader(build, replicas, kills):
    res = anysource_run(build, replicas, *AGREE, "--inject", kills)
    assert_consistent(res)
    survived = [SURVIVED.fullmatch(line) for line in res.stderr.splitlines() if line.startswith("WARNING: ")]
    assert len(survived) == kills.count("kill:") and all(survived), res.describe()
    assert "timed out" not in res.stderr, res.describe()


@pytest.mark.parametrize("options, message", [
    (("--replicas", "2", "--replica-anysource", "agree"),
     "--replica-anysource agree: the replicas of a rank agree on wildcard matches through the replication "
     "protocol's frames: it needs --replicas R (R >= 2) --replica-masking process"),
    (("--replica-anysource", "agree"), "it needs --replicas R (R >= 2) --replica-masking process"),
    (("--replicas", "2", *PROCESS_MASKING, "--replica-anysource", "leader"),
     "--replica-anysource 'leader': expected free or agree"),
])
def test_replica_anysource_options_that_cannot_be_honoured_are_refused(build, options, message):
    res = run(2, build("replica_anysource"), 1, 0, mpiexec_opts=options, timeout=30)
    assert res.returncode == 2, res.describe()
    assert message in res.stderr, res.describe()
    assert res.stdout == "", res.describe()
