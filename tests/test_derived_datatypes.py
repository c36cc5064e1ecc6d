"""Derived datatypes: constructors, queries, packing, point-to-point with
non-contiguous types, partial receives, and error cases."""
import pytest

from conftest import assert_ok, mpich_known_bug, run


def test_every_constructor_has_the_standard_size_bounds_contents_and_type_map(build):
    assert_ok(run(1, build("dtype_constructors")))


P2P_SUBTESTS = ["kinds", "nonblocking", "large", "sendrecv", "probe", "partial", "freed", "truncate"]


@pytest.mark.parametrize("subtest", P2P_SUBTESTS)
@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_noncontiguous_point_to_point_delivers_exact_bytes_and_leaves_gaps(build, subtest, nprocs, paths):
    assert_ok(run(nprocs, build("dtype_p2p"), subtest, mpiexec_opts=paths))


@pytest.mark.resmpi_only("--reliable is resmpi's")
def test_noncontiguous_point_to_point_without_the_reliability_layer(build):
    # Frames gathered for the socket directly, not for a reliable link.
    assert_ok(run(3, build("dtype_p2p"), mpiexec_opts=("--paths", "tcp", "--reliable", "off")))


def test_pack_external_writes_big_endian_elements_without_gaps_and_round_trips(build):
    assert_ok(run(1, build("pack_external"), "predefined", "derived"))


@pytest.mark.resmpi_only("MPICH ignores the datarep argument")
def test_pack_external_rejects_unknown_representations_short_buffers_and_bad_counts(build):
    assert_ok(run(1, build("pack_external"), "errors"))


@mpich_known_bug("MPI_Pack_external_size gives 0 for MPI_DOUBLE_INT and Pack_external asserts")
def test_pack_external_of_pair_types(build):
    assert_ok(run(1, build("pack_external"), "pairs"))


def test_pack_external_stores_long_and_unsigned_long_in_four_bytes(build):
    assert_ok(run(1, build("pack_external"), "longs"))


@mpich_known_bug("MPI_Pack_external_size dies (SIGILL) on a struct holding MPI_LONG")
def test_pack_external_shrinks_the_longs_inside_a_struct(build):
    assert_ok(run(1, build("pack_external"), "long_records"))


@mpich_known_bug("MPI_Pack_external asserts on MPI_WCHAR")
def test_pack_external_stores_wchar_in_two_bytes(build):
    assert_ok(run(1, build("pack_external"), "wchars"))


@pytest.mark.resmpi_only("MPICH truncates a long that does not fit external32's 4 bytes")
def test_pack_external_refuses_a_long_that_does_not_fit_four_bytes(build):
    assert_ok(run(1, build("pack_external"), "longs_that_do_not_fit"))


@pytest.mark.parametrize("nprocs", [1, 3])
def test_fortran_90_parameterized_types_pick_the_smallest_kind_and_communicate(build, nprocs):
    assert_ok(run(nprocs, build("dtype_f90")))


def test_bad_datatype_arguments_return_their_error_class(build):
    assert_ok(run(1, build("dtype_errors")))


@pytest.mark.resmpi_only("MPICH does not promise to catch freed handles or pack windows too small")
def test_freed_handles_and_short_pack_windows_are_errors_not_crashes(build):
    assert_ok(run(1, build("dtype_errors"), "erroneous_uses"))


@mpich_known_bug("accepts a subarray with start + subsize > size and a darray whose psizes do not multiply to size")
def test_subarray_and_darray_shapes_that_do_not_fit_are_mpi_err_arg(build):
    assert_ok(run(1, build("dtype_errors"), "shape_checks"))
