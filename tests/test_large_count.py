"""MPI-4's large-count "_c" functions (issue 15 item 5): every family with
ordinary counts against its int form, datatypes whose size and extent need
64 bits, negative counts, an MPI-IO round trip, and a real point-to-point
transfer and broadcast above 2 GiB (tests/c/large_count.c checks itself)."""
import pytest

from conftest import assert_ok, mpich_known_bug, run

FAMILIES = ("p2p", "coll", "datatype", "io")


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_large_count_functions_agree_with_their_int_forms(build, tmp_path, nprocs):
    assert_ok(run(nprocs, build("large_count"), *FAMILIES, cwd=tmp_path, timeout=120))


@mpich_known_bug("MPI_Allreduce_c with a negative count crashes in yaksa instead of MPI_ERR_COUNT")
@pytest.mark.parametrize("nprocs", [1, 2])
def test_negative_large_counts_are_mpi_err_count(build, nprocs):
    assert_ok(run(nprocs, build("large_count"), "negative", timeout=60))


def test_send_recv_and_bcast_above_2_gib_between_two_ranks(build):
    """2 GiB + 4 MiB of MPI_BYTE from rank 0 to rank 1 over shared memory,
    then broadcast back (about 4.1 GiB in all): sampled bytes at the 2^31
    boundary and a checksum of every byte; MPI_Get_count says
    MPI_UNDEFINED and MPI_Get_count_c the true count."""
    assert_ok(run(2, build("large_count"), "big", timeout=300))
