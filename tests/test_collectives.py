"""Every collective of issue #4 on intra-communicators: data movement,
reductions (predefined and user ops, non-commutative order), nonblocking
versions overlapping each other and point-to-point traffic, and the error
classes for bad arguments. Sizes 1..8 ranks (odd sizes exercise the trees,
Bruck and the non-power-of-two folds); messages of 0 B .. ~1 MiB."""
import pytest

from conftest import IS_RESMPI, assert_ok, run

SIZES = [1, 2, 3, 4, 5, 8]


@pytest.mark.parametrize("nprocs", SIZES)
def test_data_collectives_deliver_every_block_at_every_size_and_in_place(build, nprocs):
    """Bcast, Gather(v), Scatter(v), Allgather(v), Alltoall(v,w): 0, 1, 7,
    5000 ints and ~1 MiB in total, rotating roots, gaps left untouched."""
    assert_ok(run(nprocs, build("coll_data"), timeout=120))
