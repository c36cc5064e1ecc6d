"""MPI_Comm_spawn and MPI_Comm_spawn_multiple under resmpi's mpiexec
(issue 15 item 4). What must hold: the children start (a nested mpiexec
per spawn), have their own MPI_COMM_WORLD, find their parents with
MPI_Comm_get_parent, and both sides exchange data over the
inter-communicator (point to point both ways, bcast, allreduce, barrier,
MPI_Intercomm_merge) and disconnect; the children's output reaches
mpiexec's; the job's exit code is a failed child's; nothing hangs.

tests/c/spawn.c is self-checking on both sides; the refusals (a bad
command, the universe, hydra or a singleton) are tests/test_dynproc.py's.
"""
import pytest

from conftest import assert_ok, run

pytestmark = pytest.mark.resmpi_only("resmpi's mpiexec starts the children")


def children_done(result):
    return sorted(line for line in result.stdout.splitlines() if line.startswith("child "))


@pytest.mark.parametrize("parents, children", [(1, 1), (1, 3), (2, 2), (3, 2), (4, 1)])
def test_spawned_children_talk_to_their_parents_both_ways_and_disconnect(build, parents, children):
    result = run(parents, build("spawn"), "one", children,
                 mpiexec_opts=("--universe-size", str(parents + children)), timeout=90)
    assert_ok(result)
    assert f"parents spawned {children}\n" in result.stdout, result.describe()
    assert children_done(result) == sorted(
        f"child {rank} of {children} (one) remote={parents} done" for rank in range(children)), \
        result.describe()


def test_spawned_children_talk_over_tcp_when_the_parents_share_memory(build):
    # the parents reach each other over shared memory and make their first
    # TCP rail for the children; under --paths tcp they use the one they have
    for options in ((), ("--paths", "tcp")):
        result = run(2, build("spawn"), "one", 2,
                     mpiexec_opts=("--universe-size", "4", *options), timeout=90)
        assert_ok(result)
        assert len(children_done(result)) == 2, result.describe()


def test_mpiexec_counts_running_children_against_the_universe(build):
    # universe 4, one parent: 2 children fit; 2 more while they run do not
    # (the library's own check, universe minus the world, would let them)
    result = run(1, build("spawn"), "twice", mpiexec_opts=("--universe-size", "4"), timeout=90)
    assert_ok(result)
    assert "second spawn: " in result.stdout and "room_for_1" in result.stdout, result.describe()
    assert len(children_done(result)) == 2, result.describe()


def test_parents_and_children_may_finalize_without_disconnecting(build):
    result = run(2, build("spawn"), "nodisconnect", mpiexec_opts=("--universe-size", "4"), timeout=90)
    assert_ok(result)
    assert children_done(result) == [f"child {rank} of 2 (nodisconnect) remote=2 done"
                                      for rank in range(2)], result.describe()


def test_spawn_multiple_gives_two_commands_one_world(build):
    result = run(2, build("spawn"), "multiple", mpiexec_opts=("--universe-size", "5"), timeout=90)
    assert_ok(result)
    assert children_done(result) == ["child 0 of 3 (a) remote=2 done",
                                      "child 1 of 3 (b) remote=2 done",
                                      "child 2 of 3 (b) remote=2 done"], result.describe()


def test_a_child_that_dies_is_reported_and_fails_the_job(build):
    # child 1 exits at once: the nested mpiexec reports it and ends the
    # other child; the parents' mpiexec then ends the job with that code,
    # as for a rank's death, whatever the parents were waiting for
    result = run(2, build("spawn"), "dies", mpiexec_opts=("--universe-size", "4"), timeout=60)
    assert result.returncode not in (0, None), result.describe()
    assert "rank 1" in result.stderr and "exited with code 3 before MPI_Finalize" in result.stderr, \
        result.describe()
    assert "parents spawned" not in result.stdout, result.describe()
    assert result.elapsed < 30, result.describe()
