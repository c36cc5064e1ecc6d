"""Collectives: Barrier, Bcast, Reduce, Allreduce."""
import pytest

from conftest import NPROCS, assert_ok, mpich_known_bug, run


@pytest.mark.parametrize("nprocs", NPROCS)
def test_barrier_blocks_and_bcast_delivers_every_size_from_every_root(build, nprocs, paths):
    assert_ok(run(nprocs, build("coll"), "barrier", "bcast", mpiexec_opts=paths, timeout=120))


@pytest.mark.parametrize("nprocs", NPROCS)
def test_reduce_and_allreduce_give_exact_results_for_every_predefined_op_and_type(build, nprocs, paths):
    """SUM/PROD/MIN/MAX, LAND/LOR/LXOR, BAND/BOR/BXOR, MINLOC/MAXLOC on the
    allowed types; IN_PLACE; every root (rotating, plus all roots for a few);
    large vectors (segmented algorithms)."""
    assert_ok(run(nprocs, build("coll"), "reduce", "roots", "large", mpiexec_opts=paths, timeout=180))


@mpich_known_bug("MIN/MAX on unsigned types compare as signed (pmodels/mpich#6083)")
def test_min_max_on_unsigned_types_use_unsigned_order(build):
    assert_ok(run(3, build("coll"), "unsigned_minmax"))
