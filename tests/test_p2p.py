"""Point-to-point: modes, requests, probe, cancel, sizes, ordering."""
import pytest

from conftest import IS_RESMPI, NPROCS, assert_ok, mpich_known_bug, run

SEMANTICS = ["modes", "nonblocking", "issend", "persistent", "waittest", "probe", "sendrecv",
             "getcount", "cancel", "getstatus", "procnull", "ignore"]


@pytest.mark.parametrize("nprocs", NPROCS)
def test_p2p_modes_requests_probe_cancel_and_status_semantics_hold(build, nprocs, paths):
    """Send/Ssend/Rsend/Bsend, I*send, persistent requests, Wait*/Test*,
    (M/Im/I)probe, Sendrecv(_replace), Get_count/elements, Cancel,
    Request_get_status, PROC_NULL, STATUS(ES)_IGNORE on a ring (1 rank = self)."""
    res = run(nprocs, build("p2p"), *SEMANTICS, mpiexec_opts=paths, timeout=90)
    assert_ok(res)
    for name in SEMANTICS:
        assert f"pass {name}" in res.stdout, f"subtest {name} did not report\n{res.describe()}"


@mpich_known_bug("Irecv from MPI_PROC_NULL completes with MPI_SOURCE=0, MPI_TAG=0")
def test_nonblocking_receive_from_proc_null_reports_proc_null_any_tag_zero_count(build):
    assert_ok(run(2, build("p2p"), "procnull_nb"))


@pytest.mark.parametrize("nprocs", [1, 2])
def test_get_count_and_get_elements_handle_partial_derived_type_elements(build, nprocs):
    """7 ints received with a contiguous(2, INT) type: count UNDEFINED, 7 elements."""
    assert_ok(run(nprocs, build("p2p"), "getelements_derived"))


@pytest.mark.parametrize("nprocs", NPROCS)
def test_p2p_sizes_and_content_survive_eager_and_rendezvous(build, nprocs, paths):
    """0 B .. 16 MiB around the 4/16/64 KiB boundaries, four transfer styles,
    byte-exact content, status count, no write past the message."""
    assert_ok(run(nprocs, build("p2p_sizes"), "sizes", mpiexec_opts=paths, timeout=120))


@pytest.mark.parametrize("nprocs", NPROCS)
def test_messages_between_a_pair_never_overtake_same_tag_or_any_tag(build, nprocs, paths):
    assert_ok(run(nprocs, build("p2p_sizes"), "order", mpiexec_opts=paths, timeout=90))


@pytest.mark.parametrize("nprocs", [2, 3, 4, 8])
def test_any_source_any_tag_receives_report_true_source_tag_and_count(build, nprocs, paths):
    assert_ok(run(nprocs, build("p2p_sizes"), "anysource", mpiexec_opts=paths, timeout=90))


@pytest.mark.parametrize("nprocs", NPROCS)
def test_unexpected_messages_are_kept_until_a_receive_matches(build, nprocs, paths):
    assert_ok(run(nprocs, build("p2p_sizes"), "unexpected", mpiexec_opts=paths, timeout=90))


@pytest.mark.resmpi_only("--eager-limit is a resmpi mpiexec option")
@pytest.mark.parametrize("limit", ["0", "64", "1048576"])
def test_eager_limit_option_does_not_change_results(build, limit, paths):
    res = run(3, build("p2p_sizes"), mpiexec_opts=[*paths, "--eager-limit", limit], timeout=120)
    assert_ok(res)
    assert_ok(run(2, build("p2p"), *SEMANTICS, mpiexec_opts=[*paths, "--eager-limit", limit], timeout=90))


@pytest.mark.resmpi_only("MPICH 4.0.2's ch4 never cancels a send (the standard allows that)")
@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_a_send_no_receive_has_matched_is_cancelled_and_never_arrives(build, nprocs, paths):
    assert_ok(run(nprocs, build("cancel_send"), "unmatched", mpiexec_opts=paths))


@pytest.mark.parametrize("nprocs", [2, 3])
def test_a_send_already_received_is_not_cancelled(build, nprocs, paths):
    assert_ok(run(nprocs, build("cancel_send"), "received", mpiexec_opts=paths))


@pytest.mark.parametrize("nprocs", [1, 2])
def test_generalized_requests_run_their_callbacks(build, nprocs):
    assert_ok(run(nprocs, build("grequest")))


@pytest.mark.resmpi_only("MPICH waits forever for a generalized request nobody completes")
def test_waiting_for_a_generalized_request_nobody_completes_is_an_error(build):
    assert_ok(run(1, build("grequest"), "stuck"))
