"""mpiexec --replicas R: R processes (replicas) per rank, one MPI_COMM_WORLD
of N ranks in each replica, the job's output once, the job's exit code.

A process killed (--inject kill:RANK.REPLICA@...) gives up its replica of
every rank; the job goes on with the others, its output byte-identical to a
fault-free run, and fails, naming the rank, when no replica is whole. With
--replica-masking process only the dead process is lost: the replication
protocol in the library (crates/replication, Engine<Replication>) has a
substitute take over, and the job fails only when a rank has no live
replica. What is not built yet (issue 12: placement on several hosts;
re-join) is refused with a clear message. Every test is bounded by the
harness's timeout."""
import os
import random
import re

import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("mpiexec --replicas is a resmpi option")

ROUNDS = 6


def fault_free(build, ranks, rounds=ROUNDS):
    res = run(ranks, build("replication"), rounds, timeout=60)
    assert res.returncode == 0, res.describe()
    return res


@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("ranks", [1, 3, 4])
def test_replicated_output_is_byte_identical_to_the_unreplicated_run(build, ranks, replicas):
    expected = fault_free(build, ranks).stdout
    assert expected.startswith(f"size {ranks}\n") and expected.endswith("OK\n")
    res = run(ranks, build("replication"), ROUNDS, mpiexec_opts=("--replicas", replicas), timeout=60)
    assert res.returncode == 0, res.describe()
    # MPI_COMM_WORLD has -n ranks, and each line is printed once.
    assert res.stdout == expected, res.describe()
    assert res.stderr == "", res.describe()


@pytest.mark.parametrize("replicas", [2, 3])
def test_every_replica_of_every_rank_runs_and_knows_its_replica_index(build, tmp_path, replicas):
    ranks = 3
    res = run(ranks, build("replication"), 2, 0, tmp_path, mpiexec_opts=("--replicas", replicas),
              timeout=60)
    assert res.returncode == 0, res.describe()
    started = sorted(os.listdir(tmp_path))
    assert started == sorted(f"{rank}.{replica}" for rank in range(ranks) for replica in range(replicas))


def test_tagged_output_names_the_rank_not_the_process(build):
    res = run(2, build("replication"), 1, mpiexec_opts=("--replicas", 2, "--tag-output"), timeout=60)
    assert res.returncode == 0, res.describe()
    assert res.stdout.splitlines() == ["[0] size 2", "[0] round 0 sum 3 gathered 100", "[0] total 106",
                                       "[0] OK"], res.describe()


@pytest.mark.parametrize("code", [0, 5])
def test_the_exit_code_is_the_jobs(build, code):
    # Every replica of rank 0 returns `code` after MPI_Finalize.
    res = run(2, build("replication"), 1, 0, "-", code, mpiexec_opts=("--replicas", 2), timeout=60)
    assert res.returncode == code, res.describe()
    assert res.stdout.endswith("OK\n"), res.describe()


ROUNDS_UNDER_FAULT = 30
PAUSE_MS = 20  # per round: the job runs about 0.6 s, so a timed kill lands mid-run
GIVEN_UP = re.compile(r"WARNING: mpiexec: rank (\d+) replica (\d+) \(pid \d+\) killed by signal 9 \(SIGKILL\) "
                      r"\u2014 replica (\d+) of every rank is given up; the job continues on replica\(s\) ([\d, ]+)")


def under_fault(build, ranks, mpiexec_opts):
    return run(ranks, build("replication"), ROUNDS_UNDER_FAULT, PAUSE_MS,
               mpiexec_opts=(*mpiexec_opts, "--timeout", "60"), timeout=90)


def seeded_kills(replicas, seeds):
    """(seed, RANK.REPLICA, trigger) for each seed: every replica index is
    hit, after a number of its sends spread over the run (a rank of the
    test program makes about 200). A send count rather than a time: on a
    loaded machine a timed kill can land in MPI_Init, whose wire-up needs
    every process."""
    kills = []
    for seed in seeds:
        draw = random.Random(seed)
        target = f"{draw.randrange(3)}.{seed % replicas}"
        kills.append((seed, target, f"sends={draw.randrange(5, 150)}"))
    return kills


@pytest.mark.parametrize("replicas, seed, target, at", [
    (2, *kill) for kill in seeded_kills(2, range(6))
] + [
    (3, *kill) for kill in seeded_kills(3, range(100, 104))
])
def test_a_killed_replica_is_masked_and_the_output_is_byte_identical(build, replicas, seed, target, at):
    expected = fault_free(build, 3, ROUNDS_UNDER_FAULT).stdout
    res = under_fault(build, 3, ("--replicas", replicas, "--inject", f"kill:{target}@{at}"))
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    given_up = [GIVEN_UP.fullmatch(line) for line in res.stderr.splitlines() if line.startswith("WARNING: ")]
    assert len(given_up) == 1 and given_up[0] is not None, res.describe()
    rank, replica = target.split(".")
    assert given_up[0].group(1, 2, 3) == (rank, replica, replica), res.describe()
    assert re.search(r"^mpiexec: FT report: .*replicas given up 1($|[,;])", res.stderr, re.M), res.describe()


@pytest.mark.parametrize("masking", ["replica", "process"])
@pytest.mark.parametrize("paths, at, pause_ms", [
    ("auto", "0ms", None),       # before it published its card
    ("auto", "300ms", "1500"),   # every process held between cards and connections
    ("tcp", "0ms", None),
    ("tcp", "300ms", "1500"),
])
def test_a_replica_killed_during_mpi_init_is_masked(build, masking, paths, at, pause_ms):
    """A replica dies inside MPI_Init (before its card, or while every
    process waits between the card exchange and the connections), and the
    job's output is the fault-free one. Replica masking: its replica is
    given up, the PMI barriers stop waiting for it, the other replica wires
    up among its own processes only. Process masking (every process wires
    up with every other): the launcher excuses the dead process from the
    barriers, and the others, told of its death from before their wire-up,
    go on without its card, its shared-memory segment or its TCP listener;
    its rank's surviving replica takes over its messages. Before, the
    launcher ended the job (a barrier that could not complete) or the
    others failed to map or reach the dead one."""
    expected = fault_free(build, 3, 10).stdout
    env = {**os.environ, "RESMPI_PATHS": paths}
    if pause_ms:
        env["RESMPI_TEST_WIREUP_PAUSE_MS"] = pause_ms
    res = run(3, build("replication"), 10, 5,
              mpiexec_opts=("--replicas", 2, "--replica-masking", masking, "--inject", f"kill:2.1@{at}",
                            "--timeout", "60"),
              env=env, timeout=90)
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    assert "rank 2 replica 1" in res.stderr and "killed by signal 9" in res.stderr, res.describe()
    if masking == "replica":
        assert re.search(r"^mpiexec: FT report: .*replicas given up 1($|[,;])", res.stderr, re.M), \
            res.describe()
    else:
        assert re.search(r"^mpiexec: FT report: .*processes lost 1($|[,;])", res.stderr, re.M), res.describe()


def test_the_same_kill_without_replicas_ends_the_job(build):
    # Negative control: what --replicas masks above is a real failure.
    res = under_fault(build, 3, ("--inject", "kill:1@0.3s"))
    assert res.returncode == 137, res.describe()
    assert re.search(r"^mpiexec: rank 1 \(pid \d+\) killed by signal 9 \(SIGKILL\)$", res.stderr, re.M), \
        res.describe()


@pytest.mark.parametrize("kills", [
    "kill:0.0@0.2s,kill:2.1@0.4s",   # different ranks, different replicas
    "kill:1.1@0.2s,kill:1.0@0.35s",  # both replicas but one of a rank
])
def test_three_replicas_mask_two_deaths(build, kills):
    expected = fault_free(build, 3, ROUNDS_UNDER_FAULT).stdout
    res = under_fault(build, 3, ("--replicas", 3, "--inject", kills))
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    assert len([line for line in res.stderr.splitlines() if GIVEN_UP.fullmatch(line)]) == 2, res.describe()


def test_a_replica_that_kills_itself_after_its_sends_is_masked_over_tcp(build):
    expected = fault_free(build, 3, ROUNDS_UNDER_FAULT).stdout
    res = under_fault(build, 3, ("--replicas", 2, "--paths", "tcp", "--inject", "kill:2.0@sends=40"))
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    assert "rank 2 replica 0" in res.stderr and "given up" in res.stderr, res.describe()


def test_when_no_replica_is_whole_the_job_fails_naming_the_rank(build):
    res = under_fault(build, 3, ("--replicas", 2, "--inject", "kill:1.0@0.2s,kill:0.1@0.4s"))
    assert res.returncode == 137, res.describe()
    assert re.search(r"^mpiexec: rank 0 replica 1 \(pid \d+\) killed by signal 9 \(SIGKILL\); every replica "
                     r"of the job has now lost a process \(rank 0's last live replica was this one\), so the job "
                     r"cannot go on$", res.stderr, re.M), res.describe()
    assert "timed out" not in res.stderr, res.describe()
    # What was shown came once, in order: a prefix of the fault-free output.
    expected = fault_free(build, 3, ROUNDS_UNDER_FAULT).stdout
    assert expected.startswith(res.stdout), res.describe()


LEFT = re.compile(r"^WARNING: mpiexec: rank (\d) replica (\d) \(pid \d+\) left the job after a vote of the "
                  r"replicas \(--sdc vote\)", re.M)


@pytest.mark.parametrize("count", [16, 100_000])  # eager, and rendezvous into a vector
def test_sdc_vote_removes_the_outvoted_replica_and_the_one_it_corrupted(build, count):
    """Three replicas: replica 1 of rank 0 flips a bit of its send buffer.
    Its siblings' copies, hashed by the replicas of rank 1 that received
    them, agree with each other and not with it: it leaves the job, and so
    does replica 1 of rank 1, which took its bytes in. Both deaths are
    masked and the job's output is the fault-free one."""
    expected = run(3, build("replica_divergence"), 4, count, -1, timeout=60)
    assert expected.returncode == 0, expected.describe()
    res = run(3, build("replica_divergence"), 4, count, 2, timeout=60,
              mpiexec_opts=("--replicas", 3, *PROCESS_MASKING, "--sdc", "vote"))
    assert res.returncode == 0, res.describe()
    assert lines(res) == lines(expected), res.describe()
    assert sorted(LEFT.findall(res.stderr)) == [("0", "1"), ("1", "1")], res.describe()
    # A majority replica names the message (round 2 is message 3 on 0 -> 1)
    # when the corrupted receiver's ack reached it before that receiver
    # left: none, one or both of them.
    found = [DIVERGED.match(line) for line in res.stderr.splitlines() if "diverged" in line]
    assert all(found), res.describe()
    assert {(m[1], m[2], m[3]) for m in found} <= {("3", "1", "0"), ("3", "1", "2")}, res.describe()


def test_without_corruption_sdc_vote_removes_nobody(build):
    expected = run(3, build("replica_divergence"), 4, 16, -1, timeout=60)
    res = run(3, build("replica_divergence"), 4, 16, -1, timeout=60,
              mpiexec_opts=("--replicas", 3, *PROCESS_MASKING, "--sdc", "vote"))
    assert res.returncode == 0 and lines(res) == lines(expected), res.describe()
    assert "left the job" not in res.stderr and "diverged" not in res.stderr, res.describe()


@pytest.mark.parametrize("options, message", [
    (("--replicas", "0"), "--replicas '0': expected a number of replicas from 1 to 8"),
    (("--replicas", "9"), "--replicas '9': expected a number of replicas from 1 to 8"),
    (("--replicas", "2", "--failure-policy", "continue"), "a replicated job handles a death itself"),
    (("--replicas", "2", "--hosts", "localhost:4"), "--replicas 2 needs at least 2 hosts"),
    (("--replicas", "2", "--inject", "kill:1.2@1s"), "replica 2 is not in this job of 2 replicas per rank"),
    (("--inject", "kill:1.1@1s"), "replica 1: no replicas in this job"),
])
def test_what_is_not_built_is_refused_with_a_clear_message(build, options, message):
    res = run(2, build("replication"), 1, mpiexec_opts=options, timeout=30)
    assert res.returncode == 2, res.describe()
    assert message in res.stderr, res.describe()
    assert res.stdout == "", res.describe()


# --replica-masking process: the replication protocol in the library
# (lib/replication/libmpi.so.12, Engine<Replication>): a death loses only
# the dead process; a surviving replica of its rank (the substitute) re-sends
# what the dead one's destinations had not acknowledged and sends for it from
# then on.

PROCESS_MASKING = ("--replica-masking", "process")
SURVIVED = re.compile(r"WARNING: mpiexec: rank (\d+) replica (\d+) \(pid \d+\) killed by signal 9 \(SIGKILL\) "
                      r"\u2014 rank (\d+) goes on with replica\(s\) ([\d, ]+) \(replica masking process\)")


@pytest.mark.parametrize("replicas", [2, 3])
def test_process_masking_runs_fault_free_with_the_unreplicated_output(build, replicas):
    expected = fault_free(build, 3).stdout
    res = run(3, build("replication"), ROUNDS, mpiexec_opts=("--replicas", replicas, *PROCESS_MASKING),
              timeout=60)
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()


def survivors_of(res):
    return [SURVIVED.fullmatch(line) for line in res.stderr.splitlines() if line.startswith("WARNING: ")]


def seeded_send_kills(replicas, seeds):
    """(seed, RANK.REPLICA, sends) for each seed: the process kills itself
    after its N-th send, N drawn over the run (at least 7 sends per round, 30
    rounds): a point of the message stream, never inside MPI_Init, however
    loaded the host."""
    kills = []
    for seed in seeds:
        draw = random.Random(seed)
        kills.append((seed, f"{draw.randrange(3)}.{seed % replicas}", draw.randrange(3, 200)))
    return kills


@pytest.mark.parametrize("replicas, seed, target, sends", [
    (2, *kill) for kill in seeded_send_kills(2, range(200, 208))
] + [
    (3, *kill) for kill in seeded_send_kills(3, range(300, 306))
])
def test_process_masking_masks_a_killed_replica_process(build, replicas, seed, target, sends):
    expected = fault_free(build, 3, ROUNDS_UNDER_FAULT).stdout
    res = under_fault(build, 3, ("--replicas", replicas, *PROCESS_MASKING, "--inject", f"kill:{target}@sends={sends}"))
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    survived = survivors_of(res)
    rank, replica = target.split(".")
    assert len(survived) == 1 and survived[0] is not None, res.describe()
    assert survived[0].group(1, 2, 3) == (rank, replica, rank), res.describe()
    # Only the dead process is lost, not its replica of the other ranks.
    assert "given up" not in res.stderr, res.describe()
    assert re.search(r"^mpiexec: FT report: .*processes lost 1($|[,;])", res.stderr, re.M), res.describe()


@pytest.mark.parametrize("target, at", [("1.0", "0.6s"), ("2.1", "0.9s")])
def test_process_masking_masks_a_replica_killed_by_mpiexec_mid_run(build, target, at):
    # A kill from outside at a time (past MPI_Init even on a loaded host:
    # the run takes about 0.6 s plus start-up), possibly inside a pause.
    expected = fault_free(build, 3, ROUNDS_UNDER_FAULT).stdout
    res = under_fault(build, 3, ("--replicas", 2, *PROCESS_MASKING, "--inject", f"kill:{target}@{at}"))
    if "killed by signal 9" not in res.stderr:
        # The run ended before the kill was due: nothing to mask.
        assert res.returncode == 0 and res.stdout == expected, res.describe()
        return
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    assert f"rank {target.split('.')[0]} replica {target.split('.')[1]}" in res.stderr, res.describe()


@pytest.mark.parametrize("replicas, kills", [
    (2, "kill:0.0@sends=40,kill:2.1@sends=120"),   # replicas of two different ranks
    (3, "kill:1.1@sends=45,kill:1.0@sends=110"),  # two replicas of one rank, the third goes on
    (3, "kill:0.2@sends=30,kill:2.0@sends=50"),
])
def test_process_masking_masks_two_deaths(build, replicas, kills):
    expected = fault_free(build, 3, ROUNDS_UNDER_FAULT).stdout
    res = under_fault(build, 3, ("--replicas", replicas, *PROCESS_MASKING, "--inject", kills))
    assert res.returncode == 0, res.describe()
    assert res.stdout == expected, res.describe()
    assert len([match for match in survivors_of(res) if match]) == 2, res.describe()


def test_process_masking_fails_the_job_naming_the_rank_when_all_its_replicas_die(build):
    # Without recovery (the default under process masking) the first dead
    # replica would be forked back before the second dies.
    res = under_fault(build, 3, ("--replicas", 2, *PROCESS_MASKING, "--replica-recovery", "off",
                                 "--inject", "kill:1.0@sends=30,kill:1.1@sends=90"))
    assert res.returncode == 137, res.describe()
    assert re.search(r"^mpiexec: rank 1 replica 1 \(pid \d+\) killed by signal 9 \(SIGKILL\); every replica "
                     r"of rank 1 is now dead, so the job cannot go on$", res.stderr, re.M), res.describe()
    assert "timed out" not in res.stderr, res.describe()
    expected = fault_free(build, 3, ROUNDS_UNDER_FAULT).stdout
    assert expected.startswith(res.stdout), res.describe()


# Divergence between replicas (issue 12 item 6): every ack of the
# replication protocol carries the CRC32C of the payload the acking replica
# received; the sender's replica compares it with what it sent. A bit
# flipped in one replica's send buffer (replica_divergence.c, replica 1 of
# rank 0) is found by both replicas of rank 0, each from the other
# replica's receiver.

DIVERGED = re.compile(r"(?:WARNING: )?mpiexec: replicas diverged: message (\d+) from rank 0 to rank 1: "
                      r"replica (\d) of rank 1 received bytes with CRC32C [0-9a-f]{8}, "
                      r"replica (\d) of rank 0 sent [0-9a-f]{8} \(silent data corruption")


def lines(res):
    return sorted(res.stdout.splitlines())


def divergence_run(build, count, flip_round, *options, ranks=3):
    return run(ranks, build("replica_divergence"), 4, count, flip_round,
               mpiexec_opts=("--replicas", 2, *PROCESS_MASKING, *options), timeout=60)


@pytest.mark.parametrize("count", [16, 100_000])  # eager, and rendezvous into a vector
def test_a_bit_flipped_in_one_replica_is_reported_naming_the_message_and_replicas(build, count):
    expected = run(3, build("replica_divergence"), 4, count, -1, timeout=60)
    assert expected.returncode == 0, expected.describe()
    clean = divergence_run(build, count, -1)
    # Ranks print concurrently: the lines, not their interleaving, are the result.
    assert clean.returncode == 0 and lines(clean) == lines(expected), clean.describe()
    assert "diverged" not in clean.stderr and "replica_divergences" not in clean.stderr, clean.describe()
    res = divergence_run(build, count, 2, "--sdc", "report")
    assert res.returncode == 0, res.describe()
    # Replica 0, whose output is shown, was not corrupted.
    assert lines(res) == lines(expected), res.describe()
    found = [DIVERGED.match(line) for line in res.stderr.splitlines() if "diverged" in line]
    assert found and all(found), res.describe()
    # Round 2 is message 3 on the channel 0 -> 1; each replica of rank 0
    # hears of it from the replica of rank 1 it did not send to.
    assert sorted((m[1], m[2], m[3]) for m in found) == [("3", "0", "1"), ("3", "1", "0")], res.describe()
    assert "replica_divergences=2" in res.stderr or "replica_divergences 2" in res.stderr, res.describe()


def test_sdc_abort_ends_the_job_naming_the_divergence(build):
    res = divergence_run(build, 16, 1, "--sdc", "abort")
    assert res.returncode != 0, res.describe()
    assert "replicas diverged: message 2 from rank 0 to rank 1" in res.stderr, res.describe()


@pytest.mark.parametrize("options, message", [
    (("--replicas", 2, *PROCESS_MASKING, "--sdc", "vote"),
     "--sdc vote: a vote needs a majority, so at least 3 replicas (--replicas 2)"),
    (("--replicas", 2, *PROCESS_MASKING, "--sdc", "often"), "--sdc 'often': expected report, abort or vote"),
    (("--replicas", 2, "--sdc", "report"), "it needs --replicas R (R >= 2) --replica-masking process"),
    (("--sdc", "abort"), "it needs --replicas R (R >= 2) --replica-masking process"),
])
def test_sdc_options_that_cannot_be_honoured_are_refused(build, options, message):
    res = run(2, build("replica_divergence"), 1, 4, -1, mpiexec_opts=options, timeout=30)
    assert res.returncode == 2, res.describe()
    assert message in res.stderr, res.describe()
