"""Every predefined C datatype on contiguous buffers."""
import pytest

from conftest import assert_ok, mpich_known_bug, run


@pytest.mark.parametrize("nprocs", [1, 2, 3])
def test_every_predefined_datatype_roundtrips_with_exact_count(build, nprocs, paths):
    res = run(nprocs, build("datatypes"), mpiexec_opts=paths)
    assert_ok(res)
    assert "tested 39 datatypes" in res.stdout, res.describe()


@pytest.mark.parametrize("nprocs", [1, 2])
def test_packed_data_roundtrips_with_pack_unpack_and_packed_count(build, nprocs, paths):
    res = run(nprocs, build("datatypes"), "packed", mpiexec_opts=paths)
    assert_ok(res)
    assert "tested 40 datatypes" in res.stdout, res.describe()


@mpich_known_bug("MPI_Get_elements on MPI_FLOAT_INT & co. dies with SIGFPE (divide by zero)")
def test_get_elements_counts_two_basic_elements_per_pair_type(build):
    assert_ok(run(2, build("datatypes"), "pair_elements"))
