"""Collectives on inter-communicators: data flows between the two groups."""
import pytest

from conftest import assert_ok, run


@pytest.mark.parametrize("nprocs", [2, 3, 5, 8])
def test_inter_collectives_deliver_the_other_groups_data_with_either_group_as_root(build, nprocs):
    assert_ok(run(nprocs, build("coll_inter"), timeout=60))
