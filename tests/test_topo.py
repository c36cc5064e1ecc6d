"""Cartesian, graph and distributed-graph topologies."""
import pytest

from conftest import assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 4, 6, 8])
def test_topologies_give_computed_coordinates_shifts_and_neighbours(build, nprocs):
    assert_ok(run(nprocs, build("topo"), timeout=60))
