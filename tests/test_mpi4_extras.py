"""Small MPI functions mpi4py's test suite needs: MPI_Isendrecv(_replace),
status setters, added error classes and codes, MPI_Type_match_size,
MPI_Comm_get_parent, MPI_Comm_idup_with_info."""
import pytest

from conftest import assert_ok, mpich_known_bug, run

SENDRECV_SUBTESTS = ("ring", "replace", "long", "derived", "errors")


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_isendrecv_exchanges_data_in_rings_pairs_and_derived_types(build, nprocs):
    assert_ok(run(nprocs, build("extras_sendrecv"), *SENDRECV_SUBTESTS, timeout=60))


@mpich_known_bug("MPI_Isendrecv completes with an empty status and reports no truncation")
@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_isendrecv_status_is_the_receive_status_with_truncation(build, nprocs):
    assert_ok(run(nprocs, build("extras_sendrecv"), "status", timeout=60))


@mpich_known_bug("MPI_Isendrecv_replace with a strided datatype sends the wrong elements")
@pytest.mark.parametrize("nprocs", [1, 3])
def test_isendrecv_replace_moves_only_the_elements_of_a_strided_type(build, nprocs):
    assert_ok(run(nprocs, build("extras_sendrecv"), "replace_derived", timeout=60))


@mpich_known_bug("MPI_Isendrecv with MPI_PROC_NULL crashes or hangs")
@pytest.mark.parametrize("nprocs", [1, 2])
def test_isendrecv_with_proc_null_moves_nothing(build, nprocs):
    assert_ok(run(nprocs, build("extras_sendrecv"), "procnull", timeout=30))


@pytest.mark.parametrize("nprocs", [1, 2])
def test_status_setters_error_classes_match_size_parent_idup_with_info_and_conversions(build, nprocs):
    assert_ok(
        run(nprocs, build("extras_local"), "status", "errorclass", "matchsize", "comm", "conversions",
            timeout=60)
    )


@mpich_known_bug("MPI_Status_set_elements counts whole derived elements, not basic ones")
def test_status_set_elements_counts_basic_elements_of_derived_types(build):
    assert_ok(run(1, build("extras_local"), "status_derived", timeout=30))
