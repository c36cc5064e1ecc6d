"""Groups: set algebra, translation, comparison and error classes."""
import pytest

from conftest import assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 3, 5, 8])
def test_group_algebra_matches_computed_membership_and_bad_ranks_are_errors(build, nprocs):
    assert_ok(run(nprocs, build("group"), timeout=60))
