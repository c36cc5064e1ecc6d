"""The C ABI that build/ delivers matches abi/mpi_abi.txt and MPICH 4.0.2.

Needs `make all` first (scripts/test.sh does it).  What must hold:
- the generated mpi.h compiles warning-free as C99 and as C++;
- libmpi.so.12 exports every table function as a strong PMPI_x and a weak
  MPI_x, the data objects as 8-byte data, and nothing else but resmpi_*;
- every constant has MPICH's value (compiled against both headers);
- the function list equals what MPICH's libmpich.so.12 exports, the
  large-count "_c" functions included, and every prototype is MPICH's;
- mpicc shows our include and rpath, also from an installed copy, and a
  program it builds loads our libmpi.so.12 without LD_LIBRARY_PATH;
- crates/capi/src/abi.rs is what the generator makes of the table.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, "build")
INCLUDE = os.path.join(BUILD, "include")
LIBDIR = os.path.join(BUILD, "lib")
LIB = os.path.join(LIBDIR, "libmpi.so.12")
MPICC = os.path.join(BUILD, "bin", "mpicc")
MPICH_INCLUDE = "/usr/include/x86_64-linux-gnu/mpich"
MPICH_LIB = "/usr/lib/x86_64-linux-gnu/libmpich.so.12"

sys.path.insert(0, os.path.join(REPO, "abi"))
import gen  # noqa: E402

ITEMS, FUNCS, CFUNCS = gen.parse_table()
DATA_OBJECTS = [i.name for i in ITEMS if i.kind == "data"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


@pytest.fixture(scope="module", autouse=True)
def built():
    for path in (os.path.join(INCLUDE, "mpi.h"), LIB, MPICC):
        assert os.path.exists(path), f"{path} missing: run `make all` first"


def exported_symbols(lib):
    """name -> (type letter, size) of the dynamic symbols a library defines."""
    out = run(["nm", "-D", "--defined-only", "-S", lib])
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            syms[parts[3]] = (parts[2], int(parts[1], 16))
        elif len(parts) == 3:
            syms[parts[2]] = (parts[1], 0)
    return syms


@pytest.mark.parametrize("compiler,flags", [
    ("gcc", ["-std=c99", "-pedantic", "-x", "c"]),
    ("g++", ["-x", "c++"]),
])
def test_header_compiles_cleanly(tmp_path, compiler, flags):
    src = tmp_path / "t.c"
    src.write_text("#include <mpi.h>\n#include <mpio.h>\n"
                   "int main(void) { MPI_Status s = {0, 0, 0, 0, 0}; (void)s;"
                   " return MPI_COMM_WORLD == MPI_COMM_NULL; }\n")
    run([compiler, "-Wall", "-Wextra", "-Werror", *flags, "-I", INCLUDE, "-c", str(src),
         "-o", str(tmp_path / "t.o")])


def test_every_function_exported_as_mpi_weak_and_pmpi():
    syms = exported_symbols(LIB)
    problems = []
    for f in FUNCS:
        if syms.get(f.pname, ("?",))[0] != "T":
            problems.append(f"{f.pname} not exported as a strong function")
        if syms.get(f.name, ("?",))[0] != "W":
            problems.append(f"{f.name} not exported as a weak function")
    assert not problems, "\n".join(problems[:20]) + f"\n({len(problems)} problems)"


def test_data_objects_and_dup_fn_exported():
    syms = exported_symbols(LIB)
    for name in DATA_OBJECTS:
        assert syms.get(name) == ("D", 8) or syms.get(name) == ("B", 8), (name, syms.get(name))
    assert syms.get("MPIR_Dup_fn", ("?",))[0] == "T"


def veloc_functions():
    """The functions abi/veloc.h declares (VeloC's API, in libmpi itself)."""
    header = open(os.path.join(REPO, "abi", "veloc.h")).read()
    return set(re.findall(r"\b(VELOC_[A-Z][a-z][A-Za-z_]*)\(", header))


def test_nothing_else_exported():
    allowed = {f.name for f in FUNCS} | {f.pname for f in FUNCS} | set(DATA_OBJECTS) | {
        "MPIR_Dup_fn"} | veloc_functions()
    extra = [s for s in exported_symbols(LIB) if s not in allowed and not s.startswith("resmpi_")]
    assert not extra, f"unexpected exports: {sorted(extra)[:30]}"


def test_every_veloc_function_exported():
    declared = veloc_functions()
    assert len(declared) > 20, sorted(declared)
    syms = exported_symbols(LIB)
    missing = sorted(name for name in declared if syms.get(name, ("?",))[0] != "T")
    assert not missing, f"declared in veloc.h but not exported: {missing}"


def test_soname_and_links():
    assert "SONAME" in run(["readelf", "-d", LIB]) and "libmpi.so.12" in run(["readelf", "-d", LIB])
    for link, target in [("libmpi.so.12", "libmpi.so.12.0.0"), ("libmpi.so", "libmpi.so.12"),
                         ("libmpich.so.12", "libmpi.so.12"), ("libmpich.so", "libmpich.so.12")]:
        assert os.readlink(os.path.join(LIBDIR, link)) == target


def test_functions_match_mpich_exports():
    if not os.path.exists(MPICH_LIB):
        pytest.skip(f"{MPICH_LIB} absent (apt-get install libmpich-dev)")
    mpich = {s for s, (t, _) in exported_symbols(MPICH_LIB).items()
             if t in "TW" and re.match(r"^MPIX?_", s)}
    assert len([s for s in mpich if s.endswith("_c")]) == 154
    # Functions newer than MPICH 4.0.2 and Open MPI's mpi-ext.h spelling are ours.
    ours = {f.name for f in FUNCS if not f.tags & {"newer", "ompi-ext"}}
    assert sorted(mpich - ours) == [], "MPICH exports functions the table lacks"
    assert sorted(ours - mpich) == [], "the table has functions MPICH does not export"


def test_prototypes_match_mpich(tmp_path):
    """Every table prototype redeclared after MPICH's mpi.h: a C compiler
    rejects a declaration whose type differs (conflicting types), so each
    function's return and parameter types must be exactly MPICH's."""
    if not os.path.exists(os.path.join(MPICH_INCLUDE, "mpi.h")):
        pytest.skip(f"MPICH's header is absent from {MPICH_INCLUDE} (apt-get install libmpich-dev)")
    theirs = [f for f in FUNCS if not f.tags & {"newer", "ompi-ext"}]
    assert len([f for f in theirs if f.name.endswith("_c")]) == 154
    src = tmp_path / "prototypes.c"
    lines = ["#include <mpi.h>"]
    for f in theirs:
        lines.append(f"{f.ret} {f.name}({f.params});")
        lines.append(f"{f.ret} {f.pname}({f.params});")
    src.write_text("\n".join(lines) + "\n")
    result = subprocess.run(["gcc", "-std=c11", "-Werror", "-I", MPICH_INCLUDE, "-c", str(src),
                             "-o", str(tmp_path / "prototypes.o")], capture_output=True, text=True)
    assert result.returncode == 0, "prototypes differ from MPICH's:\n" + result.stderr[:4000]


def test_constants_match_mpich(tmp_path):
    if not os.path.exists(os.path.join(MPICH_INCLUDE, "mpi.h")):
        pytest.skip(f"MPICH's header is absent from {MPICH_INCLUDE} (apt-get install libmpich-dev)")
    src = tmp_path / "values.c"
    src.write_text(gen.gen_values(ITEMS))
    outputs = {}
    for label, include in (("mpich", MPICH_INCLUDE), ("resmpi", INCLUDE)):
        exe = tmp_path / label
        run(["gcc", "-w", "-I", include, str(src), "-o", str(exe)])
        outputs[label] = run([str(exe)]).splitlines()
    assert len(outputs["resmpi"]) > 350
    diffs = [f"{m}  !=  {r}" for m, r in zip(outputs["mpich"], outputs["resmpi"]) if m != r]
    assert not diffs, "values differ (MPICH != resmpi):\n" + "\n".join(diffs)


def test_abi_rs_is_generated_from_table(tmp_path):
    out = tmp_path / "abi.rs"
    run([sys.executable, os.path.join(REPO, "abi", "gen.py"), "rust", str(out)])
    committed = open(os.path.join(REPO, "crates", "capi", "src", "abi.rs")).read()
    assert committed == out.read_text(), "abi.rs is stale: run `abi/gen.py rust`"


def test_mpicc_show_has_include_and_rpath():
    shown = run([MPICC, "-show", "x.c", "-o", "x"])
    assert f"-I{INCLUDE}" in shown
    assert f"-Wl,-rpath,{LIBDIR}" in shown and "-lmpi" in shown
    compile_only = run([MPICC, "-show", "-c", "x.c"])
    assert "-lmpi" not in compile_only and "-show" not in compile_only


def test_installed_wrapper_finds_its_prefix(tmp_path):
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    for d in ("bin", "include", "lib"):
        shutil.copytree(os.path.join(BUILD, d), prefix / d, symlinks=True)
    shown = run([str(prefix / "bin" / "mpicc"), "-show", "x.c"])
    assert f"-I{prefix}/include" in shown and f"-Wl,-rpath,{prefix}/lib" in shown
    shown = run([str(prefix / "bin" / "mpic++"), "-show", "x.cc"])
    assert f"-I{prefix}/include" in shown


def test_program_built_with_mpicc_loads_our_library(tmp_path):
    src = tmp_path / "p.c"
    src.write_text("#include <mpi.h>\nint main(int argc, char **argv) {"
                   " (void)argc; (void)argv; return MPI_Pcontrol(0); }\n")
    exe = tmp_path / "p"
    run([MPICC, "-Wall", "-o", str(exe), str(src)])
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    ldd = run(["ldd", str(exe)], env=env)
    line = [x for x in ldd.splitlines() if "libmpi.so.12" in x]
    assert line and os.path.realpath(LIBDIR) in os.path.realpath(line[0].split("=>")[1].split()[0])
    subprocess.run([str(exe)], check=True, env=env, timeout=30)
