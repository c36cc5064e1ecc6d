"""A rank that computes for seconds without calling MPI is not declared dead:
the background progress thread keeps acknowledging for it. The retry budget
is cut to ~0.15 s (RESMPI_RETRIES=4, RESMPI_ACK_TIMEOUT_MS=5) and frames are
dropped so retransmissions must happen during the compute phase; the
negative control turns the thread off and the peer is (rightly, by its
budget) declared unreachable."""
import pytest

from conftest import assert_ok, run

pytestmark = pytest.mark.resmpi_only("the reliability layer and its progress thread are resmpi's")

SHORT_BUDGET = ("--paths", "tcp", "--inject", "drop:0.05,seed:11",
                "-x", "RESMPI_RETRIES=4", "-x", "RESMPI_ACK_TIMEOUT_MS=5")


def test_rank_computing_five_seconds_without_mpi_is_not_declared_dead(build):
    res = run(2, build("busy"), "5", mpiexec_opts=SHORT_BUDGET, timeout=60)
    assert_ok(res)
    assert res.elapsed < 30, res.describe()


def test_without_the_progress_thread_a_busy_rank_exhausts_its_peers_retry_budget(build):
    res = run(2, build("busy"), "5", mpiexec_opts=SHORT_BUDGET + ("-x", "RESMPI_PROGRESS_THREAD=off"), timeout=60)
    assert res.returncode != 0, res.describe()
    assert "unreachable" in res.output, res.describe()
