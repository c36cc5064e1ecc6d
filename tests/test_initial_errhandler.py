"""`mpiexec --initial-errhandler` (MPI-4's mpi_initial_errhandler, Open
MPI's spelling; ulfm-testing's init_errh_info runs with it): the handler
MPI_COMM_WORLD starts with, reported in MPI_INFO_ENV."""
import pytest

from conftest import run

pytestmark = pytest.mark.resmpi_only("--initial-errhandler is resmpi's mpiexec option")


def test_errors_return_from_the_start_is_reported_and_returns_errors(build):
    exe = build("initial_errhandler")
    res = run(2, exe, mpiexec_opts=("--initial-errhandler", "mpi_errors_return", "--timeout", "30"))
    assert res.returncode == 0, res.describe()
    lines = sorted(res.stdout.splitlines())
    assert lines == [
        "rank 0: info 1 mpi_errors_return, world return",
        "rank 0: returned MPI_ERR_RANK",
        "rank 1: info 1 mpi_errors_return, world return",
        "rank 1: returned MPI_ERR_RANK",
    ], res.describe()


def test_the_default_is_fatal_and_reported_as_such(build):
    exe = build("initial_errhandler")
    res = run(2, exe, mpiexec_opts=("--timeout", "30"))
    assert res.returncode != 0, res.describe()
    assert "rank 0: info 1 mpi_errors_are_fatal, world fatal" in res.stdout, res.describe()
    assert "returned" not in res.stdout, res.describe()


def test_an_unknown_handler_is_a_usage_error(build):
    exe = build("initial_errhandler")
    res = run(2, exe, mpiexec_opts=("-initial-errhandler", "mpi_errors_ignore"))
    assert res.returncode == 2, res.describe()
    assert ("--initial-errhandler 'mpi_errors_ignore': expected mpi_errors_are_fatal or "
            "mpi_errors_abort or mpi_errors_return") in res.stderr, res.describe()
    # A rank started with a bad value in the variable says so and stops.
    res = run(1, exe, env={"RESMPI_INITIAL_ERRHANDLER": "bogus"}, mpiexec_opts=("--timeout", "30"))
    assert res.returncode != 0, res.describe()
    assert "RESMPI_INITIAL_ERRHANDLER=\"bogus\"" in res.stderr, res.describe()
