"""One-sided communication (issue 17): windows of every flavor, every
operation and synchronisation mode, derived datatypes, accumulate
atomicity under contention, passive target progress while the target
computes outside MPI, and clear errors for bad calls; on shared memory and
TCP, and under injected loss, corruption and duplication with exact
results. Every program checks its own results (tests/c/rma.c)."""
import pytest

from conftest import IS_RESMPI, assert_ok, run

SUBTESTS = ["flavors", "operations", "derived", "pscw", "contention", "passive", "large", "errors", "edges"]


@pytest.mark.parametrize("nprocs", [1, 2, 4])
@pytest.mark.parametrize("subtest", SUBTESTS)
def test_rma_results_are_exact(build, paths, subtest, nprocs):
    """Each subtest at 1, 2 and 4 ranks, on the default paths and on TCP."""
    assert_ok(run(nprocs, build("rma"), subtest, mpiexec_opts=paths, timeout=120))


FAULTS = [
    "drop:0.02,corrupt:0.01,seed:9",
    "duplicate:0.05,seed:3",
    "drop:0.02,corrupt:0.01,duplicate:0.02,delay:1ms,seed:4",
]


@pytest.mark.resmpi_only("--inject is resmpi's")
@pytest.mark.parametrize("spec", FAULTS)
@pytest.mark.parametrize("subtest", ["operations", "derived", "pscw", "contention", "passive", "large"])
def test_rma_under_injected_faults_gives_the_fault_free_results(build, subtest, spec):
    """RMA traffic is control frames on the reliable links: lost, corrupted
    and duplicated fragments are recovered, and no accumulate is applied
    twice or lost (the counters under contention are exact)."""
    res = run(3, build("rma"), subtest, mpiexec_opts=("--paths", "tcp", "--inject", spec), timeout=180)
    assert_ok(res)


@pytest.mark.resmpi_only("RESMPI_PROGRESS_THREAD is resmpi's")
def test_passive_target_outside_mpi_needs_the_progress_thread(build):
    """Negative control for the passive subtest: with the background
    progress thread off, a target that computes outside MPI serves nothing,
    and the program's own check says so (rather than hanging)."""
    res = run(2, build("rma"), "passive", env={"RESMPI_PROGRESS_THREAD": "off", "RMA_PASSIVE_WAIT_S": "3"},
              timeout=60)
    assert res.returncode != 0, res.describe()
    assert "target outside MPI served 0 of 50" in res.output, res.describe()


@pytest.mark.skipif(not IS_RESMPI, reason="resmpi's error texts")
def test_an_operation_outside_an_epoch_is_a_clear_fatal_error(build):
    """Under the default MPI_ERRORS_ARE_FATAL, a put with no epoch ends the
    job with the class and the reason, not a crash or a hang."""
    res = run(2, build("rma"), "fatal", timeout=60)
    assert res.returncode != 0, res.describe()
    assert "MPI_Put" in res.output and "no access epoch toward rank" in res.output, res.describe()


@pytest.mark.resmpi_only("ULFM's failure policy is resmpi's mpiexec option")
def test_an_epoch_toward_a_dead_rank_fails_with_proc_failed_instead_of_hanging(build):
    """Under ULFM the last rank SIGKILLs itself: each survivor's lock,
    accumulate and unlock toward it end with MPIX_ERR_PROC_FAILED (101), in
    bounded time, and the survivor's own window still works."""
    res = run(3, build("rma"), "failure", mpiexec_opts=("--with-ft", "ulfm", "--timeout", "30"), timeout=60)
    for rank in (0, 1):
        assert f"rank {rank}: survived with class 101" in res.stdout, res.describe()
    assert "FAIL" not in res.stderr, res.describe()
