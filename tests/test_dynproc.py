"""Dynamic processes (issue 15 item 4): MPI_UNIVERSE_SIZE, ports and
accept/connect within one job (also through MPI_Publish_name), MPI_Comm_join,
MPI_Comm_disconnect, and the clear errors of spawns that cannot start
(refused with the reason: tests/test_spawn.py has the spawns that start
processes) or of what is misused. What must hold: the right groups and
data over the new inter-communicators, every error is the right MPI error
class, and nothing hangs (each job has a timeout; the error paths also time
themselves inside the program).

tests/c/dynproc.c is self-checking. Under RESMPI_TEST_MPI=mpich only the
disconnect mode runs: Debian's MPICH 4.0.2 is built with ch4:ucx, whose
MPI_Open_port (and so MPI_Comm_join) fails with "not supported with ucx
netmod", and which leaves MPI_UNIVERSE_SIZE unset without -usize.
"""
import pytest

from conftest import assert_ok, mpich_known_bug, run, run_cmd


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


SPAWN_REASONS = {
    "bad command": "'./no-such-program': not found",
    "over universe": "room for",
    "bad wdir": "info wdir '/no/such/directory' is not a directory",
    "bad host": "info host 'no-such-host.invalid' is not a host of this job",
}


def spawn_lines(result):
    return {line.split(": ", 1)[0][len("spawn "):]: line.split(": ", 1)[1]
            for line in result.stdout.splitlines() if line.startswith("spawn ") and ": " in line}


@pytest.mark.resmpi_only("the reasons are resmpi's messages")
@pytest.mark.parametrize("nprocs", [1, 3])
def test_spawn_is_refused_fast_with_the_reason_and_every_errcode_set(build, nprocs):
    # room for 2 more processes; spawns that start processes: test_spawn.py
    result = run(nprocs, build("dynproc"), "spawn", mpiexec_opts=("--universe-size", str(nprocs + 2)),
                 timeout=60)
    assert_ok(result)
    assert "spawn refused" in result.stdout, result.describe()
    reasons = spawn_lines(result)
    for label, reason in SPAWN_REASONS.items():
        assert reason in reasons.get(label, ""), f"{label}\n{result.describe()}"
    assert "3 new processes asked for" in reasons["over universe"], result.describe()
    assert "4 new processes asked for" in reasons["multiple over universe"], result.describe()
    assert "room for 2" in reasons["multiple over universe"], result.describe()


@pytest.mark.resmpi_only("the universe check is resmpi's")
def test_spawn_past_the_universe_is_refused_even_when_it_could_start(build):
    result = run(2, build("dynproc"), "spawn", timeout=60)
    assert_ok(result)
    reasons = spawn_lines(result)
    assert "1 new processes asked for, but MPI_UNIVERSE_SIZE is 2" in reasons["over universe"], \
        result.describe()
    assert "room for 0" in reasons["multiple over universe"], result.describe()


@pytest.mark.resmpi_only("a resmpi singleton is started by no launcher")
def test_spawn_outside_resmpis_mpiexec_says_it_needs_it(build):
    # a singleton has no RESMPI_JOB_ID, as under hydra or Slurm: the same
    # branch of the verdict, checked before the universe
    result = run_cmd([build("dynproc"), "spawn"], timeout=60)
    assert_ok(result)
    reasons = spawn_lines(result)
    assert "needs resmpi's own mpiexec" in reasons.get("over universe", ""), result.describe()
    assert "'./no-such-program': not found" in reasons.get("bad command", ""), result.describe()


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
