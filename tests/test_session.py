"""MPI-4 sessions (tests/c/session.c): process sets mpi://WORLD and
mpi://SELF, groups and communicators made from them, session error
handlers, a session beside the world model (opened before MPI_Init, used
after MPI_Finalize), and sessions without MPI_Init at all.

Under RESMPI_TEST_MPI=mpich the same program runs against MPICH with the
provoked errors left out (MPICH 4.0 sends them to a fatal handler whatever
the session's handler is), which shows the rest of the test is right."""
import pytest

from conftest import IS_RESMPI, assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 4])
@pytest.mark.parametrize("mode", ["world", "sessions"])
def test_sessions(build, nprocs, mode):
    env = None if IS_RESMPI else {"SESSION_SKIP_ERRORS": "1"}
    res = run(nprocs, build("session"), mode, env=env, timeout=60)
    assert_ok(res)


@pytest.mark.resmpi_only("the text of resmpi's error")
def test_a_session_after_the_runtime_ended_is_refused_with_a_returned_error(build):
    # The program's "sessions" mode checks it (rc and text); here also that
    # nothing else was printed and the job ended cleanly.
    res = run(2, build("session"), "sessions", timeout=60)
    assert_ok(res)
    assert "resmpi:" not in res.stderr, res.describe()
