"""MPI_THREAD_MULTIPLE: several threads per rank calling MPI at once.

tests/c/threads.c runs 4 threads per rank doing point-to-point traffic
(Waitany over their own requests, blocking and synchronous sends, probes),
blocking collectives on their own communicators, a send to self received
by another thread and a generalized request completed by another thread
than the one that waits on it. Every result is checked exactly; a library
that keeps its lock while a thread waits deadlocks, which the timeout
turns into a failure.
"""
import pytest

from conftest import IS_RESMPI, assert_ok, run

SEEDS = [1, 2, 3]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("nprocs", [2, 4])
def test_threads_calling_mpi_at_once_get_exact_results(build, nprocs, seed, paths):
    assert_ok(run(nprocs, build("threads"), seed, 30, 4, mpiexec_opts=paths, timeout=120))


@pytest.mark.parametrize("nthreads", [1, 2, 8])
def test_the_thread_count_does_not_matter(build, nthreads):
    assert_ok(run(2, build("threads"), 7, 10, nthreads, timeout=120))


@pytest.mark.resmpi_only("RESMPI_COLL_SHM is a resmpi variable")
def test_threads_with_collectives_on_the_schedules(build):
    # Without the shared-memory fast path every blocking collective waits
    # for its schedule's messages in the engine's wait loop.
    res = run(4, build("threads"), 11, 20, 4, env={"RESMPI_COLL_SHM": "0"}, timeout=120)
    assert_ok(res)


@pytest.mark.skipif(not IS_RESMPI, reason="MPICH waits forever for a generalized request nobody completes")
def test_below_multiple_waiting_for_an_incomplete_generalized_request_is_still_an_error(build):
    # grequest.c's "stuck" case asks for MPI_THREAD_SINGLE (MPI_Init).
    assert_ok(run(1, build("grequest"), "stuck"))


def test_multiple_is_granted_and_query_thread_agrees(build):
    res = run(2, build("threads"), "level")
    assert_ok(res)
    assert "provided MPI_THREAD_MULTIPLE" in res.stdout, res.describe()


@pytest.mark.resmpi_only("mpiexec --replicas is a resmpi option")
def test_a_replicated_job_grants_at_most_serialized(build):
    # Replicas mirror one sequence of calls per process: no MULTIPLE there.
    res = run(2, build("threads"), "level", mpiexec_opts=("--replicas", 2))
    assert_ok(res)
    assert "provided MPI_THREAD_SERIALIZED" in res.stdout, res.describe()
