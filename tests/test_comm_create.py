"""Communicators from groups, by host, idup, and inter-communicators."""
import pytest

from conftest import assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 8])
def test_comm_create_create_group_split_type_and_idup_give_the_computed_ranks(build, nprocs):
    assert_ok(run(nprocs, build("comm_create"), timeout=60))


@pytest.mark.parametrize("nprocs", [2, 3, 5, 8])
def test_intercomm_p2p_names_remote_ranks_and_merge_orders_low_group_first(build, nprocs, paths):
    assert_ok(run(nprocs, build("comm_inter"), mpiexec_opts=paths, timeout=60))
