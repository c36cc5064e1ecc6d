"""mpiexec --replica-recovery now (issue 12 item 5): the substitute of a dead
replica forks a new one between two MPI calls; mpiexec adopts it (a child
subreaper), and it re-joins the job over TCP as the dead replica's next
incarnation, its re-join notice carrying the fork's cut (the per-channel
logical numbers of crates/replication/src/recovery.rs). The job's output is
byte-identical to a fault-free run, and the rank has all its replicas again.

Deaths after a recovery are recovered too (of the new replica's sibling, of
another rank, of two ranks at once, R = 3), and a forked replica's output
goes on from where its forker's stood at the fork, so the rank's output is
whole when only forked replicas are left. Limits these tests pin down as
refusals: one host only, not with --replica-anysource agree. Every test is
bounded by the harness's timeout and mpiexec's --timeout."""
import re

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("mpiexec --replica-recovery is a resmpi option")

ROUNDS = 30
PAUSE_MS = 20
RECOVERY = ("--replica-masking", "process", "--replica-recovery", "now")
RECOVERED = re.compile(r"^mpiexec: rank (\d+) replica (\d+) recovered: a sibling forked it as pid \d+ "
                       r"\(incarnation (\d+)\)$", re.M)
FORKED = re.compile(r"replicas_forked[ =](\d+)")
REJOINED = re.compile(r"replicas recovered (\d+) \(death to re-join max \d+\.\d{3} ms\)")


def fault_free(build, ranks):
    res = run(ranks, build("replication"), ROUNDS, PAUSE_MS, timeout=60)
    assert res.returncode == 0, res.describe()
    return res.stdout


def recovered_run(build, ranks, replicas, kills, *options):
    return run(ranks, build("replication"), ROUNDS, PAUSE_MS, timeout=90,
               mpiexec_opts=("--replicas", replicas, *RECOVERY, *options, "--inject", kills,
                             "--timeout", "60"))


@pytest.mark.parametrize("replicas, kill", [
    (2, "1.1"),  # a replica whose output is not shown
    (2, "1.0"),  # the one whose output is shown: it switches to the survivor
    (2, "0.1"),
    (3, "2.1"),
])
def test_a_killed_replica_is_forked_again_and_the_output_is_the_fault_free_one(build, replicas, kill):
    expected = fault_free(build, 3)
    res = recovered_run(build, 3, replicas, f"kill:{kill}@sends=30")
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    rank, replica = kill.split(".")
    assert RECOVERED.findall(res.stderr) == [(rank, replica, "1")], res.describe()
    assert [int(count) for count in FORKED.findall(res.stderr)] == [1], res.describe()
    assert "timed out" not in res.stderr, res.describe()


def test_without_recovery_nothing_is_forked(build):
    expected = fault_free(build, 3)
    res = run(3, build("replication"), ROUNDS, PAUSE_MS, timeout=90,
              mpiexec_opts=("--replicas", 2, "--replica-masking", "process", "--replica-recovery", "off",
                            "--inject", "kill:1.1@sends=30", "--timeout", "60"))
    assert res.returncode == 0 and res.stdout == expected, res.describe()
    assert not RECOVERED.search(res.stderr) and not FORKED.search(res.stderr), res.describe()


def test_recovery_in_a_fault_free_run_changes_nothing_but_the_acks(build):
    expected = fault_free(build, 3)
    res = run(3, build("replication"), ROUNDS, PAUSE_MS, timeout=90,
              mpiexec_opts=("--replicas", 2, *RECOVERY, "--timeout", "60"))
    assert res.returncode == 0 and res.stdout == expected, res.describe()
    assert not RECOVERED.search(res.stderr), res.describe()


@pytest.mark.parametrize("options, message", [
    (("--replicas", 2, "--replica-recovery", "now"),
     "--replica-recovery now: a new replica is forked by the substitute"),
    (("--replica-recovery", "now"), "--replica-recovery now: a new replica is forked by the substitute"),
    (("--replicas", 2, *RECOVERY, "--replica-anysource", "agree"),
     "--replica-recovery now with --replica-anysource agree is not supported yet"),
    (("--replicas", 2, "--replica-masking", "process", "--replica-recovery", "later"),
     "--replica-recovery 'later': expected now or off"),
])
def test_recovery_options_that_cannot_be_honoured_are_refused(build, options, message):
    res = run(2, build("replication"), 2, 0, mpiexec_opts=options, timeout=30)
    assert res.returncode == 2, res.describe()
    assert message in res.stderr, res.describe()


@pytest.mark.parametrize("ranks, replicas, kills, recovered", [
    # Recovered, then its sibling (the forker) killed: the new replica is
    # the substitute now, and forks the next one.
    (3, 2, "kill:1.1@sends=30,kill:1.0@sends=200", [("1", "0", "1"), ("1", "1", "1")]),
    # The same for the rank whose output is shown: it goes on from the
    # forked replica, nothing lost or doubled.
    (3, 2, "kill:0.1@sends=30,kill:0.0@sends=150", [("0", "0", "1"), ("0", "1", "1")]),
    # A death of another rank after a recovery.
    (3, 2, "kill:1.1@sends=30,kill:0.0@sends=200", [("0", "0", "1"), ("1", "1", "1")]),
    # Two ranks at once: each new replica learns of the other.
    (3, 2, "kill:0.1@sends=30,kill:1.0@sends=30", [("0", "1", "1"), ("1", "0", "1")]),
    (4, 2, "kill:0.1@sends=20,kill:1.0@sends=20,kill:2.1@sends=60,kill:3.0@sends=60",
     [("0", "1", "1"), ("1", "0", "1"), ("2", "1", "1"), ("3", "0", "1")]),
    # R = 3: two replicas of one rank, one after the other, and two ranks.
    (3, 3, "kill:0.1@sends=30,kill:1.2@sends=30,kill:2.0@sends=100,kill:2.1@sends=180",
     [("0", "1", "1"), ("1", "2", "1"), ("2", "0", "1"), ("2", "1", "1")]),
])
def test_every_death_is_recovered_and_the_output_is_the_fault_free_one(build, ranks, replicas, kills,
                                                                       recovered):
    expected = fault_free(build, ranks)
    res = recovered_run(build, ranks, replicas, kills)
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    assert sorted(RECOVERED.findall(res.stderr)) == recovered, res.describe()
    assert [int(count) for count in REJOINED.findall(res.stderr)] == [len(recovered)], res.describe()
    assert "timed out" not in res.stderr, res.describe()


@pytest.mark.parametrize("count", [16, 100_000])  # eager, and rendezvous into a vector
def test_replicas_removed_by_a_vote_are_forked_back_from_good_ones(build, count):
    """--sdc vote with R = 3: replica 1 of rank 0 flips a bit of a send
    buffer; it and replica 1 of rank 1, which took the bytes in, leave the
    job (test_replication.py), and each is forked back by its substitute,
    one of the majority, so both ranks have three good replicas again (the
    job goes on long enough after the vote for the forks)."""
    rounds = 2000 if count == 16 else 200
    expected = run(3, build("replica_divergence"), rounds, count, -1, timeout=60)
    assert expected.returncode == 0, expected.describe()
    res = run(3, build("replica_divergence"), rounds, count, 2, timeout=90,
              mpiexec_opts=("--replicas", 3, *RECOVERY, "--sdc", "vote", "--timeout", "60"))
    assert res.returncode == 0, res.describe()
    assert sorted(res.stdout.splitlines()) == sorted(expected.stdout.splitlines()), res.describe()
    assert sorted(RECOVERED.findall(res.stderr)) == [("0", "1", "1"), ("1", "1", "1")], res.describe()
    assert [int(n) for n in REJOINED.findall(res.stderr)] == [2], res.describe()
