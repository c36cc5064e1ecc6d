"""Derived datatypes: constructors, queries, packing, point-to-point with
non-contiguous types, partial receives, and error cases."""
import pytest

from conftest import assert_ok, run


def test_every_constructor_has_the_standard_size_bounds_contents_and_type_map(build):
    assert_ok(run(1, build("dtype_constructors")))


P2P_SUBTESTS = ["kinds", "nonblocking", "large", "sendrecv", "probe", "partial", "freed", "truncate"]


@pytest.mark.parametrize("subtest", P2P_SUBTESTS)
@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_noncontiguous_point_to_point_delivers_exact_bytes_and_leaves_gaps(build, subtest, nprocs, paths):
    assert_ok(run(nprocs, build("dtype_p2p"), subtest, mpiexec_opts=paths))
