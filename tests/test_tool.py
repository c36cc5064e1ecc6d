"""The MPI tool information interface (tests/c/tool.c): MPI_T's reference
count before MPI_Init and after MPI_Finalize, MPI_T_ERR_NOT_INITIALIZED
outside it, the error codes of lookups that find nothing, and
performance-variable sessions. Written against the standard only, so it
runs on MPICH too (without the calls MPICH 4.0 crashes in)."""
import pytest

from conftest import IS_RESMPI, assert_ok, run


@pytest.mark.parametrize("nprocs", [1, 2])
def test_tool_interface(build, nprocs):
    env = None if IS_RESMPI else {"TOOL_SKIP_CRASHERS": "1"}
    assert_ok(run(nprocs, build("tool"), env=env, timeout=60))
