"""Communicator management and context isolation."""
import pytest

from conftest import assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 5, 8])
def test_dup_split_compare_free_and_traffic_on_a_dup_never_matches_the_parent(build, nprocs, paths):
    assert_ok(run(nprocs, build("comm"), mpiexec_opts=paths, timeout=90))


@pytest.mark.parametrize("nprocs", [1, 3])
def test_split_type_hardware_guided_and_unguided(build, nprocs):
    assert_ok(run(nprocs, build("split_type")))


@pytest.mark.parametrize("nprocs", [2, 3, 4, 5])
def test_split_and_create_of_an_inter_communicator_pair_the_groups_parts(build, nprocs):
    assert_ok(run(nprocs, build("comm_inter_split"), timeout=60))


@pytest.mark.resmpi_only("MPICH does not check the color of MPI_Comm_split on an inter-communicator")
def test_split_of_an_inter_communicator_rejects_a_negative_color(build):
    assert_ok(run(3, build("comm_inter_split"), "strict", timeout=60))


@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_communicators_from_groups_without_a_parent(build, nprocs):
    assert_ok(run(nprocs, build("from_group"), timeout=60))


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_comm_idup_does_not_block_and_overlapping_idups_complete(build, nprocs):
    assert_ok(run(nprocs, build("comm_idup"), timeout=60))
