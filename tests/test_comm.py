"""Communicator management and context isolation."""
import pytest

from conftest import assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 5, 8])
def test_dup_split_compare_free_and_traffic_on_a_dup_never_matches_the_parent(build, nprocs, paths):
    assert_ok(run(nprocs, build("comm"), mpiexec_opts=paths, timeout=90))


@pytest.mark.parametrize("nprocs", [1, 3])
def test_split_type_hardware_guided_and_unguided(build, nprocs):
    assert_ok(run(nprocs, build("split_type")))
