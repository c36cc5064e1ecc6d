"""Dynamic processes (issue 15 item 4): MPI_UNIVERSE_SIZE, ports and
accept/connect within one job (also through MPI_Publish_name), MPI_Comm_join,
MPI_Comm_disconnect, and the clear errors of what resmpi does not do yet
(MPI_Comm_spawn) or what is misused. What must hold: the right groups and
data over the new inter-communicators, every error is the right MPI error
class, and nothing hangs (each job has a timeout; the error paths also time
themselves inside the program).

tests/c/dynproc.c is self-checking. Under RESMPI_TEST_MPI=mpich only the
disconnect mode runs: Debian's MPICH 4.0.2 is built with ch4:ucx, whose
MPI_Open_port (and so MPI_Comm_join) fails with "not supported with ucx
netmod", and which leaves MPI_UNIVERSE_SIZE unset without -usize.
"""
import pytest

from conftest import assert_ok, mpich_known_bug, run


@pytest.mark.resmpi_only("hydra leaves MPI_UNIVERSE_SIZE unset without -usize")
@pytest.mark.parametrize("options, expected", [
    ((), 3),
    (("--universe-size", "8"), 8),
    (("-usize", "5"), 5),
    (("--hosts", "localhost:6"), 6),
])
def test_universe_size_is_the_n_count_unless_the_option_or_slots_say_more(build, options, expected):
    result = run(3, build("dynproc"), "universe", mpiexec_opts=options, timeout=60)
    assert_ok(result)
    assert f"universe={expected} flag=1" in result.stdout, result.describe()


@pytest.mark.resmpi_only("RESMPI_UNIVERSE_SIZE is resmpi's variable")
def test_universe_size_from_the_environment(build):
    result = run(2, build("dynproc"), "universe", env={"RESMPI_UNIVERSE_SIZE": "7"}, timeout=60)
    assert_ok(result)
    assert "universe=7 flag=1" in result.stdout, result.describe()


NO_PORTS_IN_MPICH = "Debian's MPICH (ch4:ucx) has no MPI_Open_port"


@pytest.mark.resmpi_only(NO_PORTS_IN_MPICH)
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_accept_and_connect_through_a_published_name_both_ways(build, nprocs):
    assert_ok(run(nprocs, build("dynproc"), "accept", timeout=60))


@pytest.mark.resmpi_only(NO_PORTS_IN_MPICH)
@pytest.mark.parametrize("nprocs", [2, 4, 5])
def test_accept_and_connect_between_two_multi_process_groups(build, nprocs):
    assert_ok(run(nprocs, build("dynproc"), "halves", timeout=60))


@pytest.mark.resmpi_only("the TCP path between the groups is resmpi's")
def test_accept_and_connect_over_tcp_paths(build):
    assert_ok(run(4, build("dynproc"), "halves", mpiexec_opts=("--paths", "tcp"), timeout=60))


@pytest.mark.resmpi_only(NO_PORTS_IN_MPICH)
@pytest.mark.parametrize("nprocs", [2, 3])
def test_comm_join_over_a_socket_makes_a_working_inter_communicator(build, nprocs):
    assert_ok(run(nprocs, build("dynproc"), "join", timeout=60))


@pytest.mark.parametrize("nprocs", [1, pytest.param(3, marks=mpich_known_bug(
    "MPI_Comm_disconnect returns before a freed MPI_Isend's rendezvous is read (UCX's "
    "process_vm_readv then hits freed memory)"))])
def test_disconnect_completes_pending_sends_and_frees_the_communicator(build, nprocs):
    assert_ok(run(nprocs, build("dynproc"), "disconnect", timeout=60))


@pytest.mark.resmpi_only("resmpi does not start new processes yet: spawn must fail, not hang")
@pytest.mark.parametrize("nprocs", [1, 3])
def test_spawn_fails_fast_with_err_spawn_in_every_errcode(build, nprocs):
    result = run(nprocs, build("dynproc"), "spawn", timeout=60)
    assert_ok(result)
    assert "spawn refused" in result.stdout, result.describe()


@pytest.mark.resmpi_only("port names and the connect timeout are resmpi's")
@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_bad_ports_unknown_names_and_an_unanswered_connect_are_errors_not_hangs(build, nprocs):
    result = run(nprocs, build("dynproc"), "errors", env={"RESMPI_CONNECT_TIMEOUT": "1"}, timeout=60)
    assert_ok(result)
    assert "errors reported" in result.stdout, result.describe()


@pytest.mark.resmpi_only("--replicas is resmpi's")
@pytest.mark.parametrize("mode", ["accept", "halves", "join"])
def test_each_replica_connects_and_publishes_in_a_space_of_its_own(build, mode):
    # both replicas of rank 0 publish the same service name: without a
    # name space per replica the second publish is MPI_ERR_SERVICE
    assert_ok(run(3, build("dynproc"), mode, mpiexec_opts=("--replicas", "2"), timeout=60))
