#!/usr/bin/env python3
"""Generate resmpi's Fortran bindings from abi/mpi_abi.txt (python3 stdlib only).

    gen_fortran.py mpif OUT            mpif.h (fixed and free form alike)
    gen_fortran.py module OUT.f90      the source of `use mpi` (module mpi)
    gen_fortran.py module_f08 OUT.f90  the source of `use mpi_f08`
    gen_fortran.py glue OUT.c          the wrappers of libmpichfort.so.12
    gen_fortran.py names               the Fortran routines wrapped, one a line

The C prototypes of abi/mpi_abi.txt are the table: each C parameter type maps
to one Fortran convention (everything by reference, INTEGER handles equal to
the C handles as in MPICH, CHARACTER with a hidden size_t length after the
arguments, ierror last).  What the C type cannot say is in the small tables
below: which routines are written by hand (SPECIAL), which are left out
(SKIP), which parameters are 1-based indices in Fortran, and the MPI-1
routines whose Fortran address arguments are default INTEGERs.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402  (the C table parser)

# Handle types: an INTEGER in Fortran with the C handle's value (MPI_Comm_c2f
# is the identity in MPICH's ABI), so `MPI_Comm *` passes straight through.
INT_HANDLES = {"MPI_Comm", "MPI_Datatype", "MPI_Group", "MPI_Win", "MPI_Session",
               "MPI_Op", "MPI_Errhandler", "MPI_Request", "MPI_Message", "MPI_Info",
               "MPIX_Grequest_class"}
# Scalars passed by value in C and by reference in Fortran.
BY_VALUE = INT_HANDLES | {"int", "const int", "MPI_Aint", "MPI_Count", "MPI_Offset"}
# Choice buffers: MPI_BOTTOM and MPI_IN_PLACE arrive as common-block addresses.
BUFFER_NAMES = {"buf", "sendbuf", "recvbuf", "inbuf", "inoutbuf", "outbuf", "origin_addr",
                "result_addr", "compare_addr", "buffer", "location", "base"}
# Procedure arguments whose C and Fortran calling conventions agree (all
# arguments by reference), so the Fortran procedure's address is the C pointer.
# (Not quite for files: C passes an MPI_File *, a pointer to a pointer, where
# Fortran expects an INTEGER; resmpi has no MPI-IO yet, so no file errors.)
SAME_CALLBACKS = {"MPI_User_function *", "MPI_Comm_errhandler_function *",
                  "MPI_Win_errhandler_function *", "MPI_File_errhandler_function *",
                  "MPI_Session_errhandler_function *"}
# Written by hand in the glue prologue (see FORTRAN_GLUE_PROLOGUE).
SPECIAL = {"MPI_Info_get_string", "MPI_Init", "MPI_Init_thread", "MPI_Wtime", "MPI_Wtick", "MPI_Pcontrol",
           "MPI_Aint_add", "MPI_Aint_diff", "MPI_Comm_get_attr", "MPI_Type_get_attr",
           "MPI_Win_get_attr", "MPI_Comm_set_attr", "MPI_Type_set_attr", "MPI_Win_set_attr",
           "MPI_Attr_get", "MPI_Attr_put", "MPI_Comm_create_keyval", "MPI_Type_create_keyval",
           "MPI_Win_create_keyval", "MPI_Keyval_create"}
# Not in the Fortran binding (C-only, or needing argv arrays or callbacks of
# another shape that resmpi does not implement anyway).
SKIP_PREFIXES = ("MPI_T_",)
SKIP = {"MPI_Comm_spawn", "MPI_Comm_spawn_multiple", "MPI_Info_create_env",
        "MPI_Register_datarep", "MPI_Grequest_start", "MPIX_Grequest_start",
        "MPIX_Grequest_class_create", "MPIX_Grequest_class_allocate", "MPI_Status_c2f",
        "MPI_Status_f2c"}
# Indices that are 1-based in Fortran.
ONE_BASED = {("MPI_Waitany", "indx"), ("MPI_Testany", "indx"),
             ("MPI_Waitsome", "array_of_indices"), ("MPI_Testsome", "array_of_indices")}
# MPI-1 routines whose Fortran form takes default INTEGER addresses where C
# takes MPI_Aint.
NARROW_AINT = {"MPI_Address", "MPI_Type_extent", "MPI_Type_lb", "MPI_Type_ub",
               "MPI_Type_hvector", "MPI_Type_hindexed", "MPI_Type_struct"}
# Fortran string constants have no room for C's terminating NUL.
STRING_LENGTHS = {"MPI_MAX_PROCESSOR_NAME", "MPI_MAX_LIBRARY_VERSION_STRING",
                  "MPI_MAX_ERROR_STRING", "MPI_MAX_PORT_NAME", "MPI_MAX_OBJECT_NAME",
                  "MPI_MAX_INFO_KEY", "MPI_MAX_INFO_VAL", "MPI_MAX_DATAREP_STRING",
                  "MPI_MAX_STRINGTAG_LEN", "MPI_MAX_PSET_NAME_LEN"}
# C writes up to `valuelen` characters: no more than the Fortran variable holds.
CLAMP_TO_STRING = {("MPI_Info_get", "valuelen"): "value"}
STRING_ROOM = {}  # (function, string) -> a parameter bounding what C writes
# MPI_File_open's handle is output only: no f2c of what the variable held.
FILE_OUT_ONLY = {"MPI_File_open"}

# Predefined attribute keyvals: MPICH's Fortran value is the C value + 1 (the
# low bit says the caller wants the value, not a pointer to it), and
# libmpichfort maps it back (fortran_keyval in fortran_glue.c).
FORTRAN_KEYVALS = {"MPI_TAG_UB", "MPI_HOST", "MPI_IO", "MPI_WTIME_IS_GLOBAL",
                   "MPI_UNIVERSE_SIZE", "MPI_LASTUSEDCODE", "MPI_APPNUM", "MPI_WIN_BASE",
                   "MPI_WIN_SIZE", "MPI_WIN_DISP_UNIT", "MPI_WIN_CREATE_FLAVOR",
                   "MPI_WIN_MODEL"}
# C-only constants: the tool interface and C's 0-based status indices.
C_ONLY_PREFIXES = ("MPI_T_", "MPI_F_")


def split_param(p):
    m = re.match(r"^(.*?)\b(\w+)\s*((?:\[\w*\])*)$", p.strip())
    ctype, name, dims = m.group(1).strip(), m.group(2), m.group(3)
    return ctype, name, dims


def wrapped(funcs):
    """The C functions that get a generated Fortran wrapper."""
    # A renamed C parameter or function must not silently drop a conversion.
    params = {(f.name, split_param(p)[1]) for f in funcs for p in f.param_list() if p != "..."}
    names = {f.name for f in funcs}
    for key in ONE_BASED - params:
        raise SystemExit(f"gen_fortran: ONE_BASED names an unknown parameter {key}")
    for name in (SPECIAL | NARROW_AINT | SKIP) - names:
        raise SystemExit(f"gen_fortran: {name} is not in the C table")
    out = []
    for f in funcs:
        if f.name in SPECIAL or f.name in SKIP or f.name.startswith(SKIP_PREFIXES):
            continue
        if "c2f" in f.name or "f2c" in f.name or f.ret != "int":
            continue
        if "large-count" in f.tags:
            continue  # the "_c" forms are C only, as in MPICH's Fortran library
        if any(convention(f, p) is None for p in f.param_list()):
            continue
        out.append(f)
    return out


def convention(f, p):
    """How one C parameter crosses from Fortran; None when it cannot."""
    if p == "...":
        return None
    ctype, name, dims = split_param(p)
    if f.name in NARROW_AINT and "MPI_Aint" in ctype:
        return "aint_array_in" if dims else ("aint_out" if "*" in ctype else "aint_in")
    if (f.name, name) in ONE_BASED:
        return "index_array" if dims else "index"
    if ctype in BY_VALUE and not dims:
        return "value"
    if ctype == "MPI_File" and not dims:
        return "file_in"
    if ctype == "MPI_File *":
        return "file_inout"
    if ctype in ("const void *", "void *") and name in BUFFER_NAMES:
        return "buffer"
    if ctype == "void *" and name == "baseptr":
        return "pointer"
    if ctype in SAME_CALLBACKS:
        return "pointer"
    if ctype == "MPI_Status *" and not dims:
        return "status"
    if ctype == "MPI_Status" and dims:
        return "statuses"
    if ctype == "const MPI_Status *":
        return "pointer"
    if (ctype == "const char *" and not dims) or (ctype == "const char" and dims == "[]"):
        return "string_in"
    if ctype == "void *" and name == "buffer_addr":
        return "discard_pointer"
    if ctype == "char *" and not dims:
        return "string_out"
    if ctype in ("const int", "int") and name.endswith("weights") and dims:
        return "weights"
    base = ctype.replace("const ", "").rstrip(" *").strip()
    if base in INT_HANDLES | {"int", "MPI_Aint", "MPI_Count", "MPI_Offset"}:
        if ctype.endswith("*") or dims:
            return "pointer"
    return None


# ----------------------------------------------------------------- mpif.h
def signed32(value):
    v = int(value, 0)
    if v >= 1 << 31:
        v -= 1 << 32
    return v


def fortran_int(v):
    # -2147483648 is not a Fortran literal (the minus is an operator).
    return "(-2147483647-1)" if v == -(1 << 31) else str(v)


def constants(items):
    """(name, fortran type, value text) for every constant of mpif.h."""
    out = [("MPI_SOURCE", "INTEGER", "3"), ("MPI_TAG", "INTEGER", "4"),
           ("MPI_ERROR", "INTEGER", "5"), ("MPI_STATUS_SIZE", "INTEGER", "5"),
           ("MPI_ADDRESS_KIND", "INTEGER", "8"), ("MPI_OFFSET_KIND", "INTEGER", "8"),
           ("MPI_COUNT_KIND", "INTEGER", "8"), ("MPI_INTEGER_KIND", "INTEGER", "4"),
           ("MPI_DISPLACEMENT_CURRENT", "INTEGER*8", "-54278278"),
           ("MPI_FILE_NULL", "INTEGER", "0"),
           ("MPI_SUBARRAYS_SUPPORTED", "LOGICAL", ".FALSE."),
           ("MPI_ASYNC_PROTECTS_NONBLOCKING", "LOGICAL", ".FALSE.")]
    taken = {n for n, _, _ in out}
    for i in items:
        if i.kind != "const" or i.name in taken or i.name.startswith(C_ONLY_PREFIXES):
            continue
        ctype, value = i.rest.split()[:2]
        if ctype != "int" and ctype not in INT_HANDLES:
            continue
        v = signed32(value)
        if i.name in STRING_LENGTHS:
            v -= 1
        if i.name in FORTRAN_KEYVALS:
            v += 1
        out.append((i.name, "INTEGER", fortran_int(v)))
    return out


def declarations(items):
    """The lines shared by mpif.h and module mpi (valid fixed and free form:
    statements from column 7, no continuation lines, '!' comments)."""
    o = []
    w = o.append
    for name, ftype, value in constants(items):
        w(f"       {ftype} {name}")
        w(f"       PARAMETER ({name}={value})")
    w("!      Sentinels: libmpichfort recognises their addresses (MPICH's")
    w("!      common blocks, so binaries built against MPICH find them too).")
    w("       INTEGER MPI_BOTTOM, MPI_IN_PLACE")
    w("       INTEGER MPI_STATUS_IGNORE(MPI_STATUS_SIZE)")
    w("       INTEGER MPI_STATUSES_IGNORE(MPI_STATUS_SIZE,1)")
    w("       INTEGER MPI_ERRCODES_IGNORE(1)")
    w("       CHARACTER*1 MPI_ARGVS_NULL(1,1)")
    w("       CHARACTER*1 MPI_ARGV_NULL(1)")
    w("       INTEGER MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY")
    w("       COMMON /MPIFCMB5/ MPI_UNWEIGHTED")
    w("       COMMON /MPIFCMB9/ MPI_WEIGHTS_EMPTY")
    w("       SAVE /MPIFCMB5/")
    w("       SAVE /MPIFCMB9/")
    w("       COMMON /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE")
    w("       COMMON /MPIPRIV2/ MPI_STATUSES_IGNORE, MPI_ERRCODES_IGNORE")
    w("       SAVE /MPIPRIV1/,/MPIPRIV2/")
    w("       COMMON /MPIPRIVC/ MPI_ARGVS_NULL, MPI_ARGV_NULL")
    w("       SAVE /MPIPRIVC/")
    w("       EXTERNAL MPI_DUP_FN, MPI_NULL_DELETE_FN, MPI_NULL_COPY_FN")
    w("       EXTERNAL MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN")
    w("       EXTERNAL MPI_COMM_NULL_COPY_FN")
    w("       EXTERNAL MPI_WIN_DUP_FN, MPI_WIN_NULL_DELETE_FN")
    w("       EXTERNAL MPI_WIN_NULL_COPY_FN")
    w("       EXTERNAL MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN")
    w("       EXTERNAL MPI_TYPE_NULL_COPY_FN")
    w("       EXTERNAL MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK")
    w("       DOUBLE PRECISION MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK")
    return o


def gen_mpif(items):
    head = ["! mpif.h of resmpi " + gen.version() + ", generated by abi/gen_fortran.py",
            "! from abi/mpi_abi.txt.  Do not edit.  Values and common blocks are",
            "! MPICH 4.0.2's, so objects built with either library link with both."]
    return "\n".join(head + declarations(items)) + "\n"


# MPI_SIZEOF: a generic over every intrinsic type and kind gfortran has,
# assumed-rank so scalars and arrays of any rank match.  Module procedures,
# so the modules' objects are part of libmpichfort.
SIZEOF_TYPES = [("integer", k) for k in (1, 2, 4, 8, 16)] + \
    [("real", k) for k in (4, 8, 10, 16)] + [("complex", k) for k in (4, 8, 10, 16)] + \
    [("logical", k) for k in (1, 2, 4, 8)] + [("character", 1)]


def sizeof_generic():
    names = [f"mpi_sizeof_{t[0]}{k}" for t, k in SIZEOF_TYPES]
    iface = ["       interface MPI_SIZEOF"] + [f"         module procedure {n}" for n in names] + \
        ["       end interface"]
    o = []
    for (ftype, kind), name in zip(SIZEOF_TYPES, names):
        decl = "character(len=*)" if ftype == "character" else f"{ftype}(kind={kind})"
        o += [f"  subroutine {name}(x, size, ierror)", f"    {decl}, dimension(..) :: x",
              "    integer, intent(out) :: size", "    integer, optional, intent(out) :: ierror",
              "    size = storage_size(x) / 8" if ftype != "character" else "    size = 1",
              "    if (present(ierror)) ierror = 0", f"  end subroutine {name}"]
    return iface, o


def gen_module(items):
    o = ["! module mpi of resmpi " + gen.version() + ", generated by abi/gen_fortran.py.",
         "! Do not edit.  Like MPICH's, it declares no interfaces for routines with",
         "! choice buffers; it has none at all, so any actual argument type works.",
         "module mpi", "       implicit none"]
    o += declarations(items)
    # MPICH's module types these (its mpif.h does not): programs written for
    # it call them without declaring them.
    o += ["       INTEGER(KIND=MPI_ADDRESS_KIND) MPI_AINT_ADD, MPI_AINT_DIFF",
          "       EXTERNAL MPI_AINT_ADD, MPI_AINT_DIFF"]
    iface, procedures = sizeof_generic()
    o += iface + ["contains"] + procedures
    o += ["end module mpi"]
    return "\n".join(o) + "\n"


# ----------------------------------------------------------------- glue
def aliases(prefix, lower):
    """MPICH's eight names of one Fortran routine (mpi_send_ and friends); the
    strong one is pmpi_send_, as in libmpichfort.  prefix: mpi or mpix."""
    p, upper, up = prefix, lower.upper(), prefix.upper()
    return [f"{p}_{lower}_", f"{p}_{lower}__", f"{p}_{lower}", f"p{p}_{lower}",
            f"p{p}_{lower}__", f"{up}_{upper}", f"P{up}_{upper}"]


def emit_aliases(w, prefix, lower):
    strong = f"p{prefix}_{lower}_"
    for a in aliases(prefix, lower):
        w(f'extern __typeof__({strong}) {a} __attribute__((weak, alias("{strong}")));')


def gen_wrapper(f):
    prefix, _, rest = f.name.partition("_")
    prefix, lower = prefix.lower(), rest.lower()
    fparams, pre, args, post, hidden = [], [], [], [], []
    for p in f.param_list():
        ctype, name, dims = split_param(p)
        kind = convention(f, p)
        n = "p_" + name
        if kind == "value":
            base = ctype.replace("const ", "")
            ftype = "MPI_Fint" if base in INT_HANDLES | {"int"} else base
            fparams.append(f"{ftype} *{n}")
            string = CLAMP_TO_STRING.get((f.name, name))
            if string:
                args.append(f"(*{n} < (MPI_Fint)p_{string}_len ? *{n} : (int)p_{string}_len)")
            else:
                args.append(f"*{n}")
        elif kind == "buffer":
            fparams.append(f"void *{n}")
            args.append(f"fortran_buffer({n})")
        elif kind == "pointer":
            base = ctype.replace("const ", "").rstrip(" *").strip()
            ftype = {"MPI_Aint": "MPI_Aint", "MPI_Count": "MPI_Count",
                     "MPI_Offset": "MPI_Offset"}.get(
                base, "MPI_Fint" if base in INT_HANDLES | {"int"} else "void")
            fparams.append(f"{ftype} *{n}")
            if dims:
                args.append(f"({base} *){n}" if "[3]" not in dims else f"(int (*)[3]){n}")
            else:
                args.append(f"({ctype.replace('const ', '')}){n}")
        elif kind == "discard_pointer":
            # The Fortran argument has no room for a C pointer; MPICH drops it too.
            fparams.append(f"void *{n}")
            pre.append(f"    void *c_{name} = NULL;")
            pre.append(f"    (void){n};")
            args.append(f"&c_{name}")
        elif kind == "status":
            fparams.append(f"MPI_Fint *{n}")
            args.append(f"fortran_status({n})")
        elif kind == "statuses":
            fparams.append(f"MPI_Fint *{n}")
            args.append(f"fortran_statuses({n})")
        elif kind == "weights":
            fparams.append(f"MPI_Fint *{n}")
            args.append(f"fortran_weights({n})")
        elif kind == "string_in":
            fparams.append(f"const char *{n}")
            hidden.append(f"size_t {n}_len")
            # Info keys and values lose leading blanks too (MPI-4.0 section 10.1)
            trim = "fortran_info_string" if f.name.startswith("MPI_Info_") else "fortran_string_in"
            pre.append(f"    char *c_{name} = {trim}({n}, {n}_len);")
            pre.append(f"    if (!c_{name}) rc = MPI_ERR_NO_MEM;")
            args.append(f"c_{name}")
            post.append(f"    free(c_{name});")
        elif kind == "string_out":
            fparams.append(f"char *{n}")
            hidden.append(f"size_t {n}_len")
            room = STRING_ROOM.get((f.name, name))
            extra = f" + (*p_{room} > 0 ? (size_t)*p_{room} : 0)" if room else ""
            pre.append(f"    char *c_{name} = calloc({n}_len + FORTRAN_STRING_SLACK{extra}, 1);")
            pre.append(f"    if (!c_{name}) rc = MPI_ERR_NO_MEM;")
            args.append(f"c_{name}")
            # a value that was not found leaves the variable as it was
            flag_names = [split_param(q)[1] for q in f.param_list()]
            found = " && *p_flag" if "flag" in flag_names else ""
            post.append(f"    if (rc == MPI_SUCCESS{found}) fortran_string_out(c_{name}, {n}, {n}_len);")
            post.append(f"    free(c_{name});")
        elif kind == "file_in":
            fparams.append(f"MPI_Fint *{n}")
            args.append(f"MPI_File_f2c(*{n})")
        elif kind == "file_inout":
            fparams.append(f"MPI_Fint *{n}")
            init = "MPI_FILE_NULL" if f.name in FILE_OUT_ONLY else f"MPI_File_f2c(*{n})"
            pre.append(f"    MPI_File c_{name} = {init};")
            args.append(f"&c_{name}")
            post.append(f"    if (rc == MPI_SUCCESS) *{n} = MPI_File_c2f(c_{name});")
        elif kind == "index":
            fparams.append(f"MPI_Fint *{n}")
            args.append(n)
            post.append(f"    if (rc == MPI_SUCCESS && *{n} >= 0) *{n} += 1;")
        elif kind == "index_array":
            fparams.append(f"MPI_Fint *{n}")
            args.append(n)
            post.append(f"    if (rc == MPI_SUCCESS && *p_outcount != MPI_UNDEFINED)")
            post.append(f"        for (int i = 0; i < *p_outcount; i++) {n}[i] += 1;")
        elif kind == "aint_in":
            fparams.append(f"MPI_Fint *{n}")
            args.append(f"(MPI_Aint)*{n}")
        elif kind == "aint_out":
            fparams.append(f"MPI_Fint *{n}")
            pre.append(f"    MPI_Aint c_{name} = 0;")
            args.append(f"&c_{name}")
            post.append(f"    if (rc == MPI_SUCCESS) *{n} = (MPI_Fint)c_{name};")
        elif kind == "aint_array_in":
            fparams.append(f"MPI_Fint *{n}")
            pre.append(f"    MPI_Aint *c_{name} = fortran_widen({n}, *p_count);")
            pre.append(f"    if (!c_{name}) rc = MPI_ERR_NO_MEM;")
            args.append(f"c_{name}")
            post.append(f"    free(c_{name});")
        else:
            raise SystemExit(f"gen_fortran: {f.name}: no convention for {p!r}")
    sig = ", ".join(fparams + ["MPI_Fint *ierror"] + hidden)
    o = [f"void p{prefix}_{lower}_({sig});", f"void p{prefix}_{lower}_({sig})", "{"]
    o.append("    int rc = MPI_SUCCESS;")
    o += pre
    call = f"{f.name}({', '.join(args)})"
    # Only allocations in `pre` can fail before the call.
    o.append(f"    if (rc == MPI_SUCCESS) rc = {call};" if "rc = MPI_ERR_NO_MEM" in "".join(pre)
             else f"    rc = {call};")
    o += post
    o += ["    set_ierror(ierror, rc);", "}"]
    w = o.append
    emit_aliases(w, prefix, lower)
    return lower, "\n".join(o)


def gen_glue(items, funcs):
    o = [f"/* libmpichfort.so.12 of resmpi {gen.version()}: generated by abi/gen_fortran.py",
         " * from abi/mpi_abi.txt.  Do not edit. */",
         open(os.path.join(gen.HERE, "fortran_glue.c")).read()]
    names = []
    for f in wrapped(funcs):
        lower, text = gen_wrapper(f)
        names.append(lower)
        o.append(text)
    # The routines written by hand in fortran_glue.c get MPICH's names too.
    for lower in HAND_WRITTEN:
        o.append("\n".join(_alias_lines(lower)))
    return "\n\n".join(o) + "\n", names


HAND_WRITTEN = ["init", "init_thread", "wtime", "wtick", "pcontrol", "aint_add", "aint_diff",
                "comm_get_attr", "type_get_attr", "win_get_attr", "comm_set_attr",
                "type_set_attr", "win_set_attr", "attr_get", "attr_put", "comm_create_keyval",
                "type_create_keyval", "win_create_keyval", "keyval_create", "dup_fn",
                "null_copy_fn", "null_delete_fn", "comm_dup_fn", "comm_null_copy_fn",
                "comm_null_delete_fn", "type_dup_fn", "type_null_copy_fn",
                "type_null_delete_fn", "win_dup_fn", "win_null_copy_fn", "win_null_delete_fn",
                "info_create_env", "f_sync_reg", "conversion_fn_null", "register_datarep",
                "grequest_start", "comm_spawn", "comm_spawn_multiple", "info_get_string"]


def _alias_lines(lower):
    o = []
    emit_aliases(o.append, "mpi", lower)
    return o


# ----------------------------------------------------------------- mpi_f08
# The mpi_f08 module: handle types (one INTEGER, MPI_VAL, so a TYPE(MPI_Comm)
# passed by reference is the INTEGER handle), TYPE(MPI_Status) with the C
# layout, and interfaces that bind straight to libmpichfort's routines
# (BIND(C, NAME="pmpi_send_")): the Fortran 77 wrappers already take
# everything by reference, and accept an absent (NULL) OPTIONAL ierror.
# Routines with CHARACTER or procedure arguments cannot be BIND(C) here, so
# they are module procedures calling the same wrappers without an interface.
# Source compatible with MPICH's mpi_f08, not binary compatible: MPICH's
# module procedures use descriptors (mpi_send_f08ts_) that resmpi lacks.
F08_HANDLES = {"MPI_Comm", "MPI_Datatype", "MPI_Group", "MPI_Win", "MPI_Session", "MPI_Op",
               "MPI_Errhandler", "MPI_Request", "MPI_Message", "MPI_Info", "MPI_File"}
# C int parameters that are LOGICAL in Fortran.
LOGICAL_NAMES = {"flag", "commute", "reorder", "periods", "remain_dims", "high", "weighted"}
INTEGER_FLAGS = {"MPIX_Comm_agree", "MPIX_Comm_iagree"}  # a bitwise-AND INTEGER
# MPI-1 routines deleted in MPI-3, and the two with both a string and a buffer.
F08_SKIP = NARROW_AINT | {"MPI_Pack_external", "MPI_Unpack_external", "MPI_Attr_delete",
                          "MPI_Errhandler_create", "MPI_Errhandler_get", "MPI_Errhandler_set",
                          "MPI_Keyval_free", "MPI_Address"}
KIND_OF = {"MPI_Aint": "MPI_ADDRESS_KIND", "MPI_Count": "MPI_COUNT_KIND",
           "MPI_Offset": "MPI_OFFSET_KIND"}


def f08_scalar_type(f, ctype, name):
    base = ctype.replace("const ", "").rstrip(" *").strip()
    if base in F08_HANDLES:
        return f"type({base})"
    if base in KIND_OF:
        return f"integer(kind={KIND_OF[base]})"
    if base == "int" and name in LOGICAL_NAMES and f.name not in INTEGER_FLAGS:
        return "logical"
    return "integer"


def f08_dummy(f, p):
    """(declaration lines, is_buffer, needs_module_procedure) of one dummy."""
    ctype, name, dims = split_param(p)
    kind = convention(f, p)
    if kind == "buffer":
        return [f"!GCC$ ATTRIBUTES NO_ARG_CHECK :: {name}",
                f"type(*), dimension(*) :: {name}"], True, False
    if kind in ("string_in", "string_out"):
        intent = "in" if kind == "string_in" else "out"
        return [f"character(len=*), intent({intent}) :: {name}"], False, True
    if kind == "pointer" and ctype in SAME_CALLBACKS:
        return [f"external :: {name}"], False, True
    if kind in ("pointer", "discard_pointer") and ctype.replace("const ", "").startswith("void"):
        return [f"type(c_ptr) :: {name}"], False, False
    if kind in ("status",) or ctype == "const MPI_Status *":
        return [f"type(MPI_Status) :: {name}"], False, False
    if kind == "statuses":
        return [f"type(MPI_Status) :: {name}(*)"], False, False
    if kind == "weights":
        return [f"integer :: {name}(*)"], False, False
    if kind in ("file_in", "file_inout"):
        return [f"type(MPI_File) :: {name}"], False, False
    ftype = f08_scalar_type(f, ctype, name)
    if dims == "[][3]":
        return [f"{ftype} :: {name}(3, *)"], False, False
    if dims:
        return [f"{ftype} :: {name}(*)"], False, False
    if kind == "value":
        return [f"{ftype}, intent(in) :: {name}"], False, False
    return [f"{ftype} :: {name}"], False, False


def f08_name(f):
    prefix, _, rest = f.name.partition("_")
    return prefix.lower(), rest.lower()


def f08_routine(f):
    """Interface text (bind(C)) or module-procedure text, or None to skip."""
    prefix, lower = f08_name(f)
    names, decls, buffer, module_proc = [], [], False, False
    for p in f.param_list():
        _, name, _ = split_param(p)
        lines, is_buffer, needs_proc = f08_dummy(f, p)
        names.append(name)
        decls += lines
        buffer |= is_buffer
        module_proc |= needs_proc
    if buffer and module_proc:
        return None, None
    args = ", ".join(names + ["ierror"])
    body = [f"      {d}" for d in decls] + ["      integer, optional, intent(out) :: ierror"]
    if not module_proc:
        return ("\n".join([f"    subroutine {f.name}({args}) bind(C, name=\"p{prefix}_{lower}_\")",
                           "      import", "      implicit none"] + body +
                          [f"    end subroutine {f.name}"]), None)
    call = ", ".join(names + ["code"])
    return None, "\n".join(
        [f"  subroutine {f.name}({args})", "    implicit none"] +
        [f"    {d}" for d in decls] + ["    integer, optional, intent(out) :: ierror",
                                        "    integer :: code",
                                        f"    call p{prefix}_{lower}({call})",
                                        "    if (present(ierror)) ierror = code",
                                        f"  end subroutine {f.name}"])


F08_HAND_INTERFACES = """\
    subroutine MPI_Init(ierror) bind(C, name="pmpi_init_")
      integer, optional, intent(out) :: ierror
    end subroutine MPI_Init
    subroutine MPI_Init_thread(required, provided, ierror) bind(C, name="pmpi_init_thread_")
      integer, intent(in) :: required
      integer, intent(out) :: provided
      integer, optional, intent(out) :: ierror
    end subroutine MPI_Init_thread
    function MPI_Wtime() bind(C, name="pmpi_wtime_")
      import :: c_double
      real(c_double) :: MPI_Wtime
    end function MPI_Wtime
    function MPI_Wtick() bind(C, name="pmpi_wtick_")
      import :: c_double
      real(c_double) :: MPI_Wtick
    end function MPI_Wtick
    function MPI_Aint_add(base, disp) bind(C, name="pmpi_aint_add_")
      import :: MPI_ADDRESS_KIND
      integer(kind=MPI_ADDRESS_KIND), intent(in) :: base, disp
      integer(kind=MPI_ADDRESS_KIND) :: MPI_Aint_add
    end function MPI_Aint_add
    function MPI_Aint_diff(addr1, addr2) bind(C, name="pmpi_aint_diff_")
      import :: MPI_ADDRESS_KIND
      integer(kind=MPI_ADDRESS_KIND), intent(in) :: addr1, addr2
      integer(kind=MPI_ADDRESS_KIND) :: MPI_Aint_diff
    end function MPI_Aint_diff
    subroutine MPI_Pcontrol(level, ierror) bind(C, name="pmpi_pcontrol_")
      integer, intent(in) :: level
      integer, optional, intent(out) :: ierror
    end subroutine MPI_Pcontrol
"""


def f08_attr_interfaces():
    o = []
    for kind, handle in (("comm", "MPI_Comm"), ("type", "MPI_Datatype"), ("win", "MPI_Win")):
        name = kind.capitalize()
        o += [f"    subroutine MPI_{name}_get_attr(object, keyval, attribute_val, flag, ierror) &",
              f"        bind(C, name=\"pmpi_{kind}_get_attr_\")",
              "      import", f"      type({handle}), intent(in) :: object",
              "      integer, intent(in) :: keyval",
              "      integer(kind=MPI_ADDRESS_KIND), intent(out) :: attribute_val",
              "      logical, intent(out) :: flag", "      integer, optional, intent(out) :: ierror",
              f"    end subroutine MPI_{name}_get_attr",
              f"    subroutine MPI_{name}_set_attr(object, keyval, attribute_val, ierror) &",
              f"        bind(C, name=\"pmpi_{kind}_set_attr_\")",
              "      import", f"      type({handle}), intent(in) :: object",
              "      integer, intent(in) :: keyval",
              "      integer(kind=MPI_ADDRESS_KIND), intent(in) :: attribute_val",
              "      integer, optional, intent(out) :: ierror",
              f"    end subroutine MPI_{name}_set_attr"]
        for fn, shape in (("dup_fn", "copy"), ("null_copy_fn", "copy"),
                          ("null_delete_fn", "delete")):
            args = ("oldobj, keyval, extra_state, attribute_val_in, attribute_val_out, flag, ierror"
                    if shape == "copy" else "obj, keyval, attribute_val, extra_state, ierror")
            o += [f"    subroutine MPI_{kind.upper()}_{fn.upper()}({args}) &",
                  f"        bind(C, name=\"pmpi_{kind}_{fn}_\")", "      import",
                  f"      type({handle}) :: {'oldobj' if shape == 'copy' else 'obj'}",
                  "      integer :: keyval, ierror"]
            if shape == "copy":
                o += ["      integer(kind=MPI_ADDRESS_KIND) :: extra_state, attribute_val_in, "
                      "attribute_val_out", "      logical :: flag"]
            else:
                o += ["      integer(kind=MPI_ADDRESS_KIND) :: attribute_val, extra_state"]
            o += [f"    end subroutine MPI_{kind.upper()}_{fn.upper()}"]
    return "\n".join(o) + "\n"


def f08_keyval_procedures():
    o = []
    for kind in ("comm", "type", "win"):
        name = kind.capitalize()
        o += [f"  subroutine MPI_{name}_create_keyval(copy_fn, delete_fn, keyval, extra_state, ierror)",
              "    implicit none", "    external :: copy_fn, delete_fn",
              "    integer, intent(out) :: keyval",
              "    integer(kind=MPI_ADDRESS_KIND), intent(in) :: extra_state",
              "    integer, optional, intent(out) :: ierror", "    integer :: code",
              f"    call pmpi_{kind}_create_keyval(copy_fn, delete_fn, keyval, extra_state, code)",
              "    if (present(ierror)) ierror = code",
              f"  end subroutine MPI_{name}_create_keyval"]
    o += ["  subroutine MPI_Info_get_string(info, key, buflen, value, flag, ierror)",
          "    implicit none", "    type(MPI_Info), intent(in) :: info",
          "    character(len=*), intent(in) :: key", "    integer, intent(inout) :: buflen",
          "    character(len=*), intent(out) :: value", "    logical, intent(out) :: flag",
          "    integer, optional, intent(out) :: ierror", "    integer :: code",
          "    call pmpi_info_get_string(info, key, buflen, value, flag, code)",
          "    if (present(ierror)) ierror = code",
          "  end subroutine MPI_Info_get_string"]
    return "\n".join(o) + "\n"


def gen_module_f08(items, funcs):
    o = ["! module mpi_f08 of resmpi " + gen.version() + ", generated by abi/gen_fortran.py.",
         "! Do not edit.  See gen_fortran.py (mpi_f08) for how it binds to libmpichfort.",
         "module mpi_f08", "  use, intrinsic :: iso_c_binding, only: c_ptr, c_double",
         "  implicit none"]
    w = o.append
    for h in sorted(F08_HANDLES):
        w(f"  type, bind(C) :: {h}")
        w("    integer :: MPI_VAL")
        w(f"  end type {h}")
    w("  type, bind(C) :: MPI_Status")
    w("    integer :: count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR")
    w("  end type MPI_Status")
    handles = {i.name: i.rest.split()[0] for i in items if i.kind == "const"}
    for name, ftype, value in constants(items):
        ctype = handles.get(name)
        if ctype in F08_HANDLES:
            w(f"  type({ctype}), parameter :: {name} = {ctype}({value})")
        elif name == "MPI_FILE_NULL":
            w(f"  type(MPI_File), parameter :: {name} = MPI_File({value})")
        elif ftype == "INTEGER*8":
            w(f"  integer(kind=8), parameter :: {name} = {value}")
        else:
            w(f"  {ftype.lower()}, parameter :: {name} = {value}")
    w("  ! the sentinels: MPICH's common blocks, as in mpif.h")
    w("  integer :: MPI_BOTTOM, MPI_IN_PLACE, MPI_ERRCODES_IGNORE(1)")
    w("  type(MPI_Status) :: MPI_STATUS_IGNORE, MPI_STATUSES_IGNORE(1)")
    w("  character(len=1) :: MPI_ARGVS_NULL(1, 1), MPI_ARGV_NULL(1)")
    w("  integer :: MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY")
    w("  common /mpifcmb5/ MPI_UNWEIGHTED")
    w("  common /mpifcmb9/ MPI_WEIGHTS_EMPTY")
    w("  common /mpipriv1/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE")
    w("  common /mpipriv2/ MPI_STATUSES_IGNORE, MPI_ERRCODES_IGNORE")
    w("  common /mpiprivc/ MPI_ARGVS_NULL, MPI_ARGV_NULL")
    w("  save /mpifcmb5/, /mpifcmb9/, /mpipriv1/, /mpipriv2/, /mpiprivc/")
    sizeof_iface, sizeof_procedures = sizeof_generic()
    o.extend(sizeof_iface)
    w("  interface operator(==)")
    w("    module procedure " + ", ".join(f"{h[4:].lower()}_eq" for h in sorted(F08_HANDLES)))
    w("  end interface")
    w("  interface operator(/=)")
    w("    module procedure " + ", ".join(f"{h[4:].lower()}_ne" for h in sorted(F08_HANDLES)))
    w("  end interface")
    interfaces, procedures = [], []
    for f in wrapped(funcs):
        if f.name in F08_SKIP or f.name.startswith("MPIX_Grequest"):
            continue
        iface, proc = f08_routine(f)
        if iface:
            interfaces.append(iface)
        if proc:
            procedures.append(proc)
    w("  interface")
    o.extend(interfaces)
    o.append(F08_HAND_INTERFACES.rstrip("\n"))
    o.append(f08_attr_interfaces().rstrip("\n"))
    w("  end interface")
    w("contains")
    for h in sorted(F08_HANDLES):
        short = h[4:].lower()
        w(f"  elemental logical function {short}_eq(a, b)")
        w(f"    type({h}), intent(in) :: a, b")
        w(f"    {short}_eq = a%MPI_VAL == b%MPI_VAL")
        w(f"  end function {short}_eq")
        w(f"  elemental logical function {short}_ne(a, b)")
        w(f"    type({h}), intent(in) :: a, b")
        w(f"    {short}_ne = a%MPI_VAL /= b%MPI_VAL")
        w(f"  end function {short}_ne")
    o.extend(procedures)
    o.append(f08_keyval_procedures().rstrip("\n"))
    o.extend(sizeof_procedures)
    w("end module mpi_f08")
    return "\n".join(o) + "\n"


def main(argv):
    items, funcs, _ = gen.parse_table()
    if len(argv) == 3 and argv[1] == "mpif":
        gen.write(argv[2], gen_mpif(items))
    elif len(argv) == 3 and argv[1] == "module":
        gen.write(argv[2], gen_module(items))
    elif len(argv) == 3 and argv[1] == "module_f08":
        gen.write(argv[2], gen_module_f08(items, funcs))
    elif len(argv) == 3 and argv[1] == "glue":
        text, names = gen_glue(items, funcs)
        gen.write(argv[2], text)
        print(f"gen_fortran: {len(names)} generated wrappers, {len(HAND_WRITTEN)} by hand")
    elif len(argv) == 2 and argv[1] == "names":
        for f in wrapped(funcs):
            print(f.name)
        for lower in HAND_WRITTEN:
            print("MPI_" + lower.capitalize())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
