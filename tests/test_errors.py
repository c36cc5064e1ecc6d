"""Error handling: classes under ERRORS_RETURN, fatal default."""
import re

import pytest

from conftest import IS_RESMPI, assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_invalid_arguments_return_the_right_error_class_under_errors_return(build, nprocs):
    """rank/tag/count/type/comm/request/buffer/root/op errors, truncation
    (incl. MPI_ERR_IN_STATUS + status.MPI_ERROR), Error_string, get/set
    errhandler; the library keeps working afterwards."""
    assert_ok(run(nprocs, build("errors")))


def test_use_of_a_freed_communicator_returns_err_comm(build):
    assert_ok(run(2, build("errors"), "freed"))


@pytest.mark.parametrize("culprit", [0, 2])
def test_errors_are_fatal_by_default_and_abort_the_whole_job_with_a_message(build, culprit):
    res = run(3, build("fatal"), culprit, timeout=60)
    assert res.returncode != 0, res.describe()
    assert "FAIL" not in res.output, res.describe()
    assert f"rank {culprit} making an invalid call" in res.stdout, res.describe()
    assert re.search(r"rank|Rank|invalid|Invalid", res.stderr), f"no error message\n{res.describe()}"
    if IS_RESMPI:
        # mpiexec repeats the message as the rank wrote it, spaces included.
        assert re.search(r"abort message: \S+ \S+", res.stderr), res.describe()
    assert res.elapsed < 30, res.describe()


def test_a_second_mpi_init_is_fatal_under_the_default_handler(build):
    """MPICH aborts on it, and so must resmpi: a program that goes on after
    a second MPI_Init would run on a library it thinks it re-initialised."""
    res = run(2, build("init_twice"), timeout=60)
    assert res.returncode != 0, res.describe()
    assert "second MPI_Init returned" not in res.stdout, f"the program went on\n{res.describe()}"
    assert "MPI_Init" in res.stderr and "twice" in res.stderr, res.describe()


@pytest.mark.skipif(not IS_RESMPI, reason="whether MPI_ERRORS_RETURN covers a second MPI_Init varies")
def test_a_second_mpi_init_returns_an_error_under_errors_return(build):
    res = run(2, build("init_twice"), "return", timeout=60)
    assert res.returncode == 0, res.describe()
    assert res.stdout.count("second MPI_Init returned class") == 2, res.describe()


@pytest.mark.skipif(not IS_RESMPI, reason="resmpi's diagnostic and RESMPI_* settings")
def test_a_rank_blocked_with_small_sends_held_back_says_so_and_the_credit_setting_lets_them_through(build):
    """Rank 0 sends 20,000 small messages before the barrier that rank 1
    receives them after: legal for MPI to block, so resmpi may hang, but
    it must say why (issue 16, item 6); the setting it names ends it."""
    exe = build("held_sends")
    res = run(2, exe, mpiexec_opts=("--timeout", "8"), env={"RESMPI_HELD_SEND_WARNING_S": "1"}, timeout=40)
    assert res.returncode != 0 and "held_sends done" not in res.stdout, res.describe()
    assert re.search(r"rank 0: blocked for \d+ s with 1 small send\(s\) to rank\(s\) 1 held back", res.stderr), \
        res.describe()
    assert res.stderr.count("held back") == 1, f"said more than once\n{res.describe()}"
    assert "RESMPI_EAGER_CREDIT" in res.stderr, res.describe()
    res = run(2, exe, mpiexec_opts=("--timeout", "20"), env={"RESMPI_EAGER_CREDIT": "4M"}, timeout=40)
    assert res.returncode == 0 and "held_sends done" in res.stdout, res.describe()
    assert "held back" not in res.stderr, res.describe()


@pytest.mark.skipif(not IS_RESMPI, reason="resmpi's own message (other MPIs may deadlock)")
def test_an_mpi_call_from_inside_a_reduction_op_ends_the_job_with_a_message_not_a_deadlock(build):
    """The library lock knows its holder: an op that calls MPI_Barrier while
    MPI_Reduce_local runs it is told so (and the job ends), instead of
    waiting for ever on a lock its own thread holds."""
    res = run(1, build("op_reenter"), timeout=60)
    assert res.returncode != 0, res.describe()
    assert "calling the op" in res.stdout, res.describe()
    assert "FAIL" not in res.output, res.describe()
    assert "called from a user function the library is running" in res.stderr, res.describe()
