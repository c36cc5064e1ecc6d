"""Collectives and persistent requests with non-contiguous derived
datatypes (vector, indexed, struct, resized, subarray): exact data, gaps in
receive buffers untouched, mixed type signatures between sender and
receiver, nonblocking forms completed by Wait and by Test, MPI_IN_PLACE;
and MPI_Type_free forgetting the type's name."""
import pytest

from conftest import assert_ok, run

NPROCS = [1, 2, 3, 4]


@pytest.mark.parametrize("completion", ["blocking", "wait", "test"])
@pytest.mark.parametrize("nprocs", NPROCS)
def test_data_movement_collectives_pack_and_unpack_exactly_and_leave_gaps(build, completion, nprocs):
    assert_ok(run(nprocs, build("dtype_coll"), completion, timeout=120))


@pytest.mark.parametrize("nprocs", NPROCS)
def test_in_place_gather_allgather_alltoall_on_derived_types(build, nprocs):
    assert_ok(run(nprocs, build("dtype_coll"), "inplace"))


@pytest.mark.resmpi_only(
    "MPICH 4.0.2 and Open MPI 4.1 refuse predefined ops on every derived datatype (MPI_ERR_OP); "
    "resmpi applies them per basic element when the type is one predefined type repeated"
)
@pytest.mark.parametrize("nprocs", NPROCS)
def test_predefined_ops_reduce_derived_types_per_basic_element(build, nprocs):
    assert_ok(run(nprocs, build("dtype_coll"), "reduce"))


@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_persistent_requests_pack_at_every_start_and_unpack_at_every_completion(build, nprocs):
    assert_ok(run(nprocs, build("dtype_coll"), "persistent"))


def test_a_new_type_never_shows_the_name_of_a_freed_one(build):
    assert_ok(run(1, build("dtype_coll"), "names"))


@pytest.mark.parametrize("nprocs", [1, 3])
def test_user_ops_on_types_without_holes_see_the_applications_layout(build, nprocs):
    assert_ok(run(nprocs, build("dtype_coll"), "userop"))


@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_user_ops_on_types_with_holes_see_the_applications_layout_and_gaps_stay(build, nprocs):
    assert_ok(run(nprocs, build("dtype_coll"), "userop_holes"))
