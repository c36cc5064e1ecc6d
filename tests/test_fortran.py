"""Fortran (issue 15, item 2): mpif.h, `use mpi`, the mpifort/mpif90/mpif77
wrappers and libmpichfort.so.12, which lets binaries built with Debian's
mpif90.mpich run on resmpi.

The programs under tests/fortran check their own results (sums, ranks,
status fields, 1-based indices, error classes under MPI_ERRORS_RETURN,
Fortran callbacks called from C) and rank 0 prints OK.  Proven against
MPICH: `RESMPI_TEST_MPI=mpich` builds them with mpif90.mpich and runs them
under hydra.  A missing gfortran fails the tests (it is a build dependency,
scripts/install-deps.sh), it does not skip them.
"""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import IS_RESMPI, MPICC, PREFIX, RESMPI_LIBDIR, assert_ok, mpich_known_bug, run

FDIR = Path(__file__).resolve().parent / "fortran"
PROGRAMS = {"f77_basic": "f77_basic.f",   # fixed form, mpif.h
            "p2p": "p2p.f90",             # free form, mpif.h
            "coll": "coll.f90",           # use mpi
            "comm_types": "comm_types.f90"}  # use mpi
MPIFORT = str(PREFIX / "bin" / "mpifort") if IS_RESMPI else "mpif90.mpich"
MPICH_FORT_LIB = Path("/usr/lib/x86_64-linux-gnu/libmpichfort.so.12")
MPICH_MPIF_H = Path("/usr/include/x86_64-linux-gnu/mpich/mpif.h")
# MPICH 4.0.2's Fortran MPI_WAITANY/MPI_TESTANY add 1 to MPI_UNDEFINED too.
MPICH_UNDEFINED_INDEX = mpich_known_bug("Fortran WAITANY/TESTANY return MPI_UNDEFINED+1")
# MPICH 4.0.2's mpi_f08 MPI_Waitany returns a 0-based index.
MPICH_F08_INDEX = mpich_known_bug("mpi_f08 MPI_Waitany returns a 0-based index")


def abi_env():
    return {"LD_LIBRARY_PATH": str(RESMPI_LIBDIR)} if IS_RESMPI else {}


class FortranCompiler:
    def __init__(self, bindir, wrapper, c_wrapper, tag):
        self.bindir, self.wrapper, self.c_wrapper = Path(bindir), wrapper, c_wrapper
        self.tag, self.cache = tag, {}

    def compile(self, cmd):
        # cwd: gfortran writes the programs' own .mod files there.
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=self.bindir)
        if p.returncode != 0:
            pytest.fail(f"compile failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}", pytrace=False)

    def __call__(self, name, c_source=None):
        if name not in self.cache:
            exe = self.bindir / f"{name}-{self.tag}"
            objects = []
            if c_source:
                obj = self.bindir / f"{c_source}-{self.tag}.o"
                self.compile([self.c_wrapper, "-O2", "-Wall", "-c", "-o", str(obj), str(FDIR / c_source)])
                objects.append(str(obj))
            # -O2: what mpif90.mpich uses, and what exposes buffer/compiler races.
            source = FDIR / PROGRAMS.get(name, f"{name}.f90")
            self.compile([self.wrapper, "-O2", "-o", str(exe), str(source), *objects])
            self.cache[name] = exe
        return self.cache[name]


def need(tool):
    if not shutil.which(tool):
        pytest.fail(f"{tool} not found: install it (scripts/install-deps.sh)", pytrace=False)


@pytest.fixture(scope="session")
def build_fortran(bindir):
    need("gfortran")
    if IS_RESMPI and not Path(MPIFORT).exists():
        pytest.fail(f"{MPIFORT} does not exist: run make", pytrace=False)
    need(MPIFORT)
    return FortranCompiler(bindir, MPIFORT, MPICC, "fort")


@pytest.fixture(scope="session")
def build_fortran_mpich(bindir):
    need("gfortran")
    need("mpif90.mpich")
    return FortranCompiler(bindir, "mpif90.mpich", "mpicc.mpich", "mpichfort")


def program_params():
    out = []
    for name in PROGRAMS:
        for nprocs in (1, 2, 4):
            marks = [MPICH_UNDEFINED_INDEX] if name == "p2p" else []
            out.append(pytest.param(name, nprocs, marks=marks, id=f"{name}-{nprocs}"))
    return out


@pytest.mark.parametrize("name,nprocs", program_params())
def test_fortran_program_checks_pass(build_fortran, name, nprocs):
    assert_ok(run(nprocs, build_fortran(name), timeout=90), nprocs)


@MPICH_F08_INDEX
@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_mpi_f08_program_checks_pass(build_fortran, nprocs):
    """`use mpi_f08` (source compatible with MPICH's; its binaries are not
    compatible: MPICH's mpi_f08 calls descriptor-based routines)."""
    assert_ok(run(nprocs, build_fortran("f08"), timeout=90), nprocs)


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_fortran_init_thread_then_abort_ends_the_job_with_its_code(build_fortran, nprocs):
    res = run(nprocs, build_fortran("thread_abort"), timeout=90)
    assert res.returncode not in (0, None), f"MPI_Abort did not fail the job\n{res.describe()}"
    assert res.stdout.count("THREAD-OK") == nprocs, res.describe()
    assert "FAIL" not in res.output, res.describe()
    if IS_RESMPI:  # mpiexec's line; hydra words it differently
        assert "MPI_Abort with code 7" in res.output or "MPI_Abort(7)" in res.output, res.describe()


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_fortran_handles_and_status_used_from_c_after_f2c(build_fortran, nprocs):
    """mixed.f90 + mixed_c.c: MPI_Comm/Type/Op_f2c, MPI_Status_f2c/c2f."""
    assert_ok(run(nprocs, build_fortran("mixed", c_source="mixed_c.c"), timeout=90), nprocs)


@pytest.mark.resmpi_only("MPICH-built mixed Fortran/C binary on resmpi")
def test_mpich_built_mixed_fortran_c_binary_passes_on_resmpi(build_fortran_mpich):
    assert_ok(run(4, build_fortran_mpich("mixed", c_source="mixed_c.c"), env=abi_env(), timeout=90), 4)


@pytest.mark.resmpi_only("MPICH-built Fortran binaries loading resmpi's libraries")
@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_mpif90_mpich_binary_passes_on_resmpi(build_fortran_mpich, name, nprocs):
    assert_ok(run(nprocs, build_fortran_mpich(name), env=abi_env(), timeout=90), nprocs)


@pytest.mark.resmpi_only("checks that resmpi's libmpichfort.so.12 is the one loaded")
def test_mpif90_mpich_binary_really_loads_resmpi_fortran_library(build_fortran_mpich):
    res = run(1, build_fortran_mpich("f77_basic"), env={**abi_env(), "LD_DEBUG": "libs"})
    assert_ok(res)
    # libmpich.so.12 is a link to libmpi.so.12: the loader names the one it met first.
    for lib in (r"libmpichfort\.so\.12", r"libmpi(ch)?\.so\.12"):
        assert re.search(rf"calling init: {re.escape(str(RESMPI_LIBDIR))}/{lib}", res.output), \
            f"{lib} was not loaded from {RESMPI_LIBDIR}\n{res.describe()}"
    assert not re.search(r"calling init: /(usr/)?lib/x86_64-linux-gnu/libmpich", res.output), \
        f"MPICH's own library was loaded too\n{res.describe()}"


def fortran_parameters(path):
    """NAME -> value of every PARAMETER in an mpif.h (MPICH's puts several in one)."""
    values = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"\s+PARAMETER\s*\((.*)\)\s*$", line, re.I)
        if m:
            for item in m.group(1).split(","):
                name, _, value = item.partition("=")
                values[name.strip().upper()] = value.strip()
    return values


def evaluate(value, values):
    if value.upper() in values:  # MPICH writes MPI_INTEGER16=MPI_DATATYPE_NULL
        return evaluate(values[value.upper()], values)
    if value.upper() in (".TRUE.", ".FALSE."):
        return value.upper()
    return eval(value, {})  # integer literals and MPICH's "512-1"


@pytest.mark.resmpi_only("compares resmpi's generated mpif.h with MPICH's")
def test_mpif_h_values_equal_mpich_values():
    if not MPICH_MPIF_H.exists():
        pytest.fail(f"{MPICH_MPIF_H} missing (apt-get install libmpich-dev)", pytrace=False)
    ours = fortran_parameters(PREFIX / "include" / "mpif.h")
    theirs = fortran_parameters(MPICH_MPIF_H)
    ours_only_on_purpose = {"MPI_VERSION", "MPI_SUBVERSION"}  # resmpi claims MPI-3.1
    differ = {n: (ours[n], theirs[n]) for n in ours.keys() & theirs.keys() - ours_only_on_purpose
              if evaluate(ours[n], ours) != evaluate(theirs[n], theirs)}
    assert not differ, f"mpif.h values that differ from MPICH's (ours, MPICH's): {differ}"
    assert not theirs.keys() - ours.keys(), f"missing from our mpif.h: {sorted(theirs.keys() - ours.keys())}"
    for common in ("MPIPRIV1", "MPIPRIV2", "MPIPRIVC", "MPIFCMB5", "MPIFCMB9"):
        assert f"/{common}/" in (PREFIX / "include" / "mpif.h").read_text()


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[-2] in "TW"}


@pytest.mark.resmpi_only("compares resmpi's libmpichfort.so.12 with MPICH's")
def test_libmpichfort_exports_every_mpich_fortran_77_90_name():
    if not MPICH_FORT_LIB.exists():
        pytest.fail(f"{MPICH_FORT_LIB} missing (apt-get install libmpich-dev)", pytrace=False)
    # mpi_f08's symbols (module procedures, *_f08*) are out: no mpi_f08 module here.
    theirs = {s for s in exported(MPICH_FORT_LIB)
              if not ("f08" in s.lower() or s.startswith("__") or s.startswith(("MPIR", "mpir", "pmpir")))}
    ours = exported(RESMPI_LIBDIR / "libmpichfort.so.12")
    missing = sorted(theirs - ours)
    assert not missing, f"{len(missing)} of MPICH's Fortran symbols missing: {missing[:40]}"
    assert {"mpi_send_", "pmpi_send_", "MPI_SEND", "mpi_send__", "mpix_comm_agree_"} <= ours


@pytest.mark.resmpi_only("resmpi's compiler wrappers")
@pytest.mark.parametrize("wrapper", ["mpifort", "mpif90", "mpif77"])
def test_fortran_wrapper_show_prints_gfortran_with_resmpi_paths(wrapper):
    out = subprocess.run([str(PREFIX / "bin" / wrapper), "-show", "x.f90"], capture_output=True,
                         text=True, check=True).stdout
    words = out.split()
    assert words[0] == "gfortran", out
    assert f"-I{PREFIX.resolve()}/include" in words, out
    assert words.index("-lmpichfort") < words.index("-lmpi"), out
    assert "x.f90" in words, out
    compile_only = subprocess.run([str(PREFIX / "bin" / wrapper), "-show", "-c", "x.f90"],
                                  capture_output=True, text=True, check=True).stdout
    assert "-lmpichfort" not in compile_only, compile_only
