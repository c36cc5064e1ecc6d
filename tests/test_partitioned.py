"""MPI-4 partitioned point-to-point (tests/c/partitioned.c): a ring of
MPI_Psend_init/MPI_Precv_init activated several times, partitions marked
ready out of order (MPI_Pready, _range, _list), MPI_Parrived polled, a
strided datatype, partitioned traffic kept apart from a wildcard receive
and from a collective in between, and bad calls returning errors.

Under RESMPI_TEST_MPI=mpich the program runs without the bad calls,
MPI_PROC_NULL and MPI_Parrived on an inactive request (MPICH 4.0 differs
or crashes there), which shows the rest of the test is right."""
import pytest

from conftest import IS_RESMPI, assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_partitioned_ring(build, nprocs):
    env = None if IS_RESMPI else {"PART_SKIP_ERRORS": "1"}
    assert_ok(run(nprocs, build("partitioned"), env=env, timeout=60))


@pytest.mark.resmpi_only("--paths tcp is resmpi's")
def test_partitioned_ring_over_tcp(build):
    assert_ok(run(3, build("partitioned"), mpiexec_opts=("--paths", "tcp"), timeout=60))
