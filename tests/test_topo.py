"""Cartesian, graph and distributed-graph topologies."""
import pytest

from conftest import assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 4, 6, 8])
def test_topologies_give_computed_coordinates_shifts_and_neighbours(build, nprocs):
    assert_ok(run(nprocs, build("topo"), timeout=60))


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_neighbourhood_collectives_on_rings_lines_and_graphs(build, nprocs):
    assert_ok(run(nprocs, build("neighbor"), timeout=60))
