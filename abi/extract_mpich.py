#!/usr/bin/env python3
"""One-time bootstrap of abi/mpi_abi.txt from an installed MPICH header.

This is how the committed table was first produced (and how it can be
re-derived to look for drift).  It is not part of the build: the build reads
only abi/mpi_abi.txt.

    python3 abi/extract_mpich.py [MPICH_INCLUDE_DIR] > /tmp/extracted.txt

Names and prototypes are read from MPICH's preprocessed header; constant values
are read by compiling and running a small C program against that header, so the
table records what the compiler sees, not what a regex guessed.
"""
import os
import re
import subprocess
import sys
import tempfile

MPICH_INCLUDE = "/usr/include/x86_64-linux-gnu/mpich"

# Constants we deliberately do not take over (implementation details of MPICH,
# Fortran-only items, or values resmpi states itself).
SKIP_DEFINES = {
    "MPI_FILE_DEFINED", "MPI_AINT_FMT_DEC_SPEC", "MPI_AINT_FMT_HEX_SPEC",
    "MPI_VERSION", "MPI_SUBVERSION", "MPIR_ERRORS_THROW_EXCEPTIONS",
    "MPIO_Request", "MPIO_Wait", "MPIO_Test", "PMPIO_Wait", "PMPIO_Test",
    "MPIO_REQUEST_DEFINED", "MPIO_USES_MPI_REQUEST", "MPIO_REQUEST_NULL",
    "MPIO_INCLUDE", "MPI_INCLUDED", "MPIU_DLL_SPEC",
}

POINTER_DEFINES = {
    # name: (C pointer type, value)
    "MPI_BOTTOM": ("void *", "0"),
    "MPI_IN_PLACE": ("void *", "-1"),
    "MPI_STATUS_IGNORE": ("MPI_Status *", "1"),
    "MPI_STATUSES_IGNORE": ("MPI_Status *", "1"),
    "MPI_ERRCODES_IGNORE": ("int *", "0"),
    "MPI_ARGV_NULL": ("char **", "0"),
    "MPI_ARGVS_NULL": ("char ***", "0"),
}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def defines(include_dir):
    """(name, body) of every object-like MPI_/MPIX_ #define in mpi.h and mpio.h."""
    out = []
    for header in ("mpi.h", "mpio.h"):
        text = open(os.path.join(include_dir, header)).read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        for m in re.finditer(r"^\s*#\s*define\s+(MPIX?_\w+)([ \t]+(.*))?$", text, re.M):
            name, body = m.group(1), (m.group(3) or "").strip()
            if name in SKIP_DEFINES or "(" in name:
                continue
            if re.match(r"^\w+\(", text[m.start(1):m.start(1) + len(name) + 1]):
                continue  # function-like macro
            out.append((name, body))
    seen, unique = set(), []
    for name, body in out:
        if name not in seen:
            seen.add(name)
            unique.append((name, body))
    return unique


def enum_constants(preprocessed):
    """Enumerators named MPI_* from MPICH's enums (window flavors, topology, T)."""
    names = []
    for tag, body in re.findall(r"enum\s+(\w*)\s*\{(.*?)\}", preprocessed, re.S):
        if tag.startswith("QMPI"):
            continue  # MPICH's QMPI tool interface is not part of the MPI API
        for item in body.split(","):
            name = item.split("=")[0].strip()
            if re.match(r"^MPIX?_\w+$", name):
                names.append(name)
    return names


def prototypes(preprocessed):
    text = re.sub(r"\s+", " ", preprocessed)
    protos = []
    for decl in text.split(";"):
        decl = decl.strip()
        if decl.startswith("typedef") or decl.startswith("extern"):
            continue
        m = re.match(r"^((?:const )?[A-Za-z_]\w*(?: \w+)*?)\s*(\**)\s*(?<!\w)(MPIX?_\w+)\s*\((.*)\)$", decl)
        if not m:
            continue
        ret = (m.group(1) + (" " + m.group(2) if m.group(2) else "")).strip()
        name, params = m.group(3), m.group(4).strip()
        if name.endswith("_c") or name == "MPI_DUP_FN":
            continue
        params = re.sub(r"\s*,\s*", ", ", params)
        params = re.sub(r"\s+\*", " *", params)
        params = re.sub(r"\*\s+(?=\w)", "*", params)
        protos.append((ret, name, params))
    return protos


def main():
    include_dir = sys.argv[1] if len(sys.argv) > 1 else MPICH_INCLUDE
    preprocessed = run(["gcc", "-E", "-P", "-DMPICH_SKIP_MPICXX", "-I", include_dir,
                        "-x", "c", os.path.join(include_dir, "mpi.h")])
    consts = []
    for name, body in defines(include_dir):
        if name in POINTER_DEFINES:
            continue
        cast = re.match(r"^\(*\s*(MPI_\w+)\s*\)", body)
        if "_FN" in name or "FN_NULL" in name:
            continue  # callbacks, handled by hand in the table
        known = {c[0]: c for c in consts}
        if body in known:  # an alias of an earlier constant (MPI_LONG_LONG)
            consts.append((name, known[body][1], known[body][2]))
            continue
        ctype = cast.group(1) if cast else "int"
        consts.append((name, ctype, "0x" in body or ctype != "int"))
    consts += [(n, "int", False) for n in enum_constants(preprocessed)
               if n not in {c[0] for c in consts}]

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "v.c")
        with open(src, "w") as f:
            f.write('#include <mpi.h>\n#include <stdio.h>\nint main(void) {\n')
            for name, _, _ in consts:
                f.write(f'    printf("%s %lld\\n", "{name}", (long long)({name}));\n')
            f.write("    return 0;\n}\n")
        run(["gcc", "-w", "-I", include_dir, src, "-o", os.path.join(tmp, "v")])
        values = dict(line.split() for line in run([os.path.join(tmp, "v")]).splitlines())

    for name, ctype, is_hex in consts:
        v = int(values[name])
        text = ("0x%08x" % (v & 0xffffffff)) if is_hex else str(v)
        if ctype.startswith("MPI_T_") or ctype == "MPI_File":
            print(f"null {name} {ctype}")  # a null pointer handle
        else:
            print(f"const {name} {ctype} {text}")
    for ret, name, params in prototypes(preprocessed):
        print(f"func {ret} {name}({params})")


if __name__ == "__main__":
    main()
