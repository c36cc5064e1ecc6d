"""ABI compatibility with MPICH in both directions."""
import os
import re
import shutil

import pytest

from conftest import IS_RESMPI, RESMPI_LIBDIR, assert_ok, run


def abi_env():
    """Environment that makes an MPICH-built binary load the MPI under test."""
    if not IS_RESMPI:
        return {}
    old = os.environ.get("LD_LIBRARY_PATH")
    return {"LD_LIBRARY_PATH": f"{RESMPI_LIBDIR}:{old}" if old else str(RESMPI_LIBDIR)}


def lines(res):
    return sorted(l for l in res.stdout.splitlines() if l.startswith("R"))


@pytest.mark.parametrize("nprocs", [1, 3, 4])
def test_mpich_compiled_program_runs_under_mpiexec_with_the_same_output(build, build_mpich, nprocs):
    """The reference is the MPICH-built binary under MPICH's own mpiexec."""
    ref = run(nprocs, build_mpich("abi_output"), mpiexec=shutil.which("mpiexec.mpich"))
    assert_ok(ref)
    got = run(nprocs, build_mpich("abi_output"), env=abi_env())
    assert_ok(got)
    assert lines(got) == lines(ref)
    native = run(nprocs, build("abi_output"))
    assert_ok(native)
    assert lines(native) == lines(ref)


@pytest.mark.resmpi_only("checks that MPICH-built binaries load resmpi's libmpich.so.12")
def test_mpich_compiled_binary_really_uses_resmpi_library(build_mpich):
    res = run(1, build_mpich("basic"), env={**abi_env(), "LD_DEBUG": "libs", "FOREIGN_ABI": "1"}, timeout=60)
    assert_ok(res)
    assert re.search(rf"calling init: {re.escape(str(RESMPI_LIBDIR))}/libmpich\.so", res.output), \
        f"libmpich.so.12 was not loaded from {RESMPI_LIBDIR}\n{res.describe()}"


@pytest.mark.resmpi_only("MPICH-built self-checking programs under resmpi")
@pytest.mark.parametrize("prog,args", [("p2p", ["modes", "nonblocking", "persistent", "waittest", "probe",
                                                 "cancel", "procnull", "ignore"]),
                                        ("p2p_sizes", ["sizes"]), ("coll", ["bcast", "roots"]),
                                        ("errors", []), ("datatypes", [])])
def test_mpich_compiled_selfchecking_programs_pass_under_resmpi(build_mpich, prog, args):
    assert_ok(run(3, build_mpich(prog), *args, env=abi_env(), timeout=120))


@pytest.mark.resmpi_only("resmpi's library launched by MPICH's hydra as a PMI-1 client")
@pytest.mark.parametrize("prog,args", [("basic", []), ("p2p", ["modes", "waittest", "probe"]),
                                        ("coll", ["bcast", "roots"]), ("comm", [])])
def test_resmpi_library_runs_under_mpich_hydra(build, prog, args):
    hydra = shutil.which("mpiexec.hydra") or shutil.which("mpiexec.mpich")
    if not hydra:
        pytest.skip("mpiexec.hydra not installed")
    env = {**abi_env(), "EXPECT_SIZE": "3"}
    assert_ok(run(3, build(prog), *args, mpiexec=hydra, env=env, timeout=120))
