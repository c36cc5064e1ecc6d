/* The hand-written part of libmpichfort.so.12: the sentinels, the argument
 * helpers the generated wrappers use, and the routines whose Fortran form the
 * C prototype cannot describe (attributes, keyvals, MPI_Init, MPI_Wtime...).
 * abi/gen_fortran.py prepends this file to the generated wrappers. */
#include "mpi.h"
#include "mpi-ext.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The Fortran names MPI_DUP_FN and friends are routines here, macros in mpi.h. */
#undef MPI_NULL_COPY_FN
#undef MPI_NULL_DELETE_FN
#undef MPI_DUP_FN
#undef MPI_COMM_NULL_COPY_FN
#undef MPI_COMM_NULL_DELETE_FN
#undef MPI_COMM_DUP_FN
#undef MPI_TYPE_NULL_COPY_FN
#undef MPI_TYPE_NULL_DELETE_FN
#undef MPI_TYPE_DUP_FN
#undef MPI_WIN_NULL_COPY_FN
#undef MPI_WIN_NULL_DELETE_FN
#undef MPI_WIN_DUP_FN
#undef MPI_CONVERSION_FN_NULL

/* MPICH's Fortran common blocks (same names, sizes and member order as the
 * COMMON statements of mpif.h).  A program that includes mpif.h defines them
 * too; the dynamic linker binds our references to the program's copy, so
 * comparing an argument's address with a member's tells the sentinel.
 * Exported and not hidden on purpose. */
struct mpipriv1 { MPI_Fint bottom, in_place, status_ignore[MPI_F_STATUS_SIZE]; };
struct mpipriv2 { MPI_Fint statuses_ignore[MPI_F_STATUS_SIZE], errcodes_ignore[1]; };
struct mpiprivc { char argvs_null[1], argv_null[1]; };
/* gfortran aligns common blocks to 16 bytes; the same here, so the linker
 * sees one alignment whichever definition it keeps. */
#define COMMON_BLOCK __attribute__((aligned(16)))
struct mpipriv1 mpipriv1_ COMMON_BLOCK;
struct mpipriv2 mpipriv2_ COMMON_BLOCK;
struct mpiprivc mpiprivc_ COMMON_BLOCK;
MPI_Fint mpifcmb5_ COMMON_BLOCK; /* MPI_UNWEIGHTED */
MPI_Fint mpifcmb9_ COMMON_BLOCK; /* MPI_WEIGHTS_EMPTY */

/* C code handed a Fortran status tells MPI_STATUS_IGNORE by comparing with
 * MPI_F_STATUS_IGNORE (MPI-4.0 section 19.3.5): point libmpi's variables at
 * the common blocks as soon as this library is loaded. */
__attribute__((constructor)) static void fortran_sentinels_for_c(void)
{
    MPI_F_STATUS_IGNORE = mpipriv1_.status_ignore;
    MPI_F_STATUSES_IGNORE = mpipriv2_.statuses_ignore;
}

/* A Fortran status is the C MPI_Status itself (5 INTEGERs, MPI_SOURCE at
 * index 3): MPICH's layout, so only the ignore sentinels need translating. */
_Static_assert(sizeof(MPI_Status) == MPI_F_STATUS_SIZE * sizeof(MPI_Fint),
               "Fortran and C statuses share one layout");
/* Handles cross unchanged (MPI_Comm_c2f is the identity). */
_Static_assert(sizeof(MPI_Comm) == sizeof(MPI_Fint), "INTEGER handles are C handles");

/* ierror is OPTIONAL in mpi_f08, whose interfaces bind to these same
 * routines: an absent one arrives as NULL. */
static inline void set_ierror(MPI_Fint *ierror, int code)
{
    if (ierror)
        *ierror = code;
}

static void *fortran_buffer(void *buffer)
{
    if (buffer == (void *)&mpipriv1_.bottom)
        return MPI_BOTTOM;
    if (buffer == (void *)&mpipriv1_.in_place)
        return MPI_IN_PLACE;
    return buffer;
}

static MPI_Status *fortran_status(MPI_Fint *status)
{
    return status == mpipriv1_.status_ignore ? MPI_STATUS_IGNORE : (MPI_Status *)status;
}

static MPI_Status *fortran_statuses(MPI_Fint *statuses)
{
    return statuses == mpipriv2_.statuses_ignore ? MPI_STATUSES_IGNORE : (MPI_Status *)statuses;
}

static int *fortran_weights(MPI_Fint *weights)
{
    if (weights == &mpifcmb5_)
        return MPI_UNWEIGHTED;
    if (weights == &mpifcmb9_)
        return MPI_WEIGHTS_EMPTY;
    return weights;
}

/* Output strings go through a C buffer this much longer than the Fortran
 * one, because the C routine may write up to its MPI_MAX_* (with the NUL)
 * whatever room the Fortran variable has; the copy back truncates. */
#define FORTRAN_STRING_SLACK (MPI_MAX_LIBRARY_VERSION_STRING + 1)

/* A Fortran CHARACTER argument as a C string: trailing blanks are padding. */
static char *fortran_string_in(const char *text, size_t length)
{
    while (length > 0 && text[length - 1] == ' ')
        length--;
    char *copy = malloc(length + 1);
    if (copy) {
        memcpy(copy, text, length);
        copy[length] = '\0';
    }
    return copy;
}

/* An Info key or value: leading blanks go as well as trailing ones. */
static char *fortran_info_string(const char *text, size_t length)
{
    while (length > 0 && text[0] == ' ') {
        text++;
        length--;
    }
    return fortran_string_in(text, length);
}

/* A C string into a Fortran CHARACTER variable: blank-padded, not terminated. */
static void fortran_string_out(const char *text, char *out, size_t length)
{
    size_t used = strnlen(text, length);
    memcpy(out, text, used);
    memset(out + used, ' ', length - used);
}

/* MPI-1 routines take default-INTEGER addresses in Fortran. */
static MPI_Aint *fortran_widen(const MPI_Fint *values, MPI_Fint count)
{
    size_t n = count > 0 ? (size_t)count : 1;
    MPI_Aint *wide = malloc(n * sizeof(MPI_Aint));
    if (wide)
        for (MPI_Fint i = 0; i < count; i++)
            wide[i] = values[i];
    return wide;
}

/* ------------------------------------------------------------ by hand */
void pmpi_init_(MPI_Fint *ierror);
void pmpi_init_(MPI_Fint *ierror)
{
    set_ierror(ierror, MPI_Init(NULL, NULL));
}

void pmpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror);
void pmpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror)
{
    set_ierror(ierror, MPI_Init_thread(NULL, NULL, *required, provided));
}

double pmpi_wtime_(void);
double pmpi_wtime_(void)
{
    return MPI_Wtime();
}

double pmpi_wtick_(void);
double pmpi_wtick_(void)
{
    return MPI_Wtick();
}

void pmpi_pcontrol_(MPI_Fint *level, MPI_Fint *ierror);
void pmpi_pcontrol_(MPI_Fint *level, MPI_Fint *ierror)
{
    set_ierror(ierror, MPI_Pcontrol(*level));
}

MPI_Aint pmpi_aint_add_(MPI_Aint *base, MPI_Aint *disp);
MPI_Aint pmpi_aint_add_(MPI_Aint *base, MPI_Aint *disp)
{
    return MPI_Aint_add(*base, *disp);
}

MPI_Aint pmpi_aint_diff_(MPI_Aint *addr1, MPI_Aint *addr2);
MPI_Aint pmpi_aint_diff_(MPI_Aint *addr1, MPI_Aint *addr2)
{
    return MPI_Aint_diff(*addr1, *addr2);
}

/* Attributes.  Fortran stores an INTEGER(KIND=MPI_ADDRESS_KIND) value where
 * C stores a pointer; the predefined attributes are pointers to the value in
 * C (to an int, or an MPI_Aint for MPI_WIN_SIZE) and values in Fortran. */
/* MPICH's Fortran predefined keyvals are the C ones + 1 (gen_fortran.py's
 * FORTRAN_KEYVALS). */
static int fortran_keyval(int keyval)
{
    switch (keyval) {
    case MPI_TAG_UB + 1: case MPI_HOST + 1: case MPI_IO + 1: case MPI_WTIME_IS_GLOBAL + 1:
    case MPI_UNIVERSE_SIZE + 1: case MPI_LASTUSEDCODE + 1: case MPI_APPNUM + 1:
    case MPI_WIN_BASE + 1: case MPI_WIN_SIZE + 1: case MPI_WIN_DISP_UNIT + 1:
    case MPI_WIN_CREATE_FLAVOR + 1: case MPI_WIN_MODEL + 1:
        return keyval - 1;
    default:
        return keyval;
    }
}

static MPI_Aint attribute_value(int keyval, void *c_value)
{
    switch (keyval) {
    case MPI_TAG_UB: case MPI_HOST: case MPI_IO: case MPI_WTIME_IS_GLOBAL:
    case MPI_UNIVERSE_SIZE: case MPI_LASTUSEDCODE: case MPI_APPNUM:
    case MPI_WIN_DISP_UNIT: case MPI_WIN_CREATE_FLAVOR: case MPI_WIN_MODEL:
        return c_value ? *(int *)c_value : 0;
    case MPI_WIN_SIZE:
        return c_value ? *(MPI_Aint *)c_value : 0;
    default: /* MPI_WIN_BASE and user attributes: the value is the pointer */
        return (MPI_Aint)(intptr_t)c_value;
    }
}

void pmpi_comm_get_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                         MPI_Fint *ierror);
void pmpi_comm_get_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                         MPI_Fint *ierror)
{
    void *c_value = NULL;
    int c_flag = 0;
    int rc = MPI_Comm_get_attr(*comm, fortran_keyval(*keyval), &c_value, &c_flag);
    set_ierror(ierror, rc);
    *flag = c_flag != 0;
    if (rc == MPI_SUCCESS && c_flag)
        *value = attribute_value(fortran_keyval(*keyval), c_value);
}

void pmpi_type_get_attr_(MPI_Fint *type, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                         MPI_Fint *ierror);
void pmpi_type_get_attr_(MPI_Fint *type, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                         MPI_Fint *ierror)
{
    void *c_value = NULL;
    int c_flag = 0;
    int rc = MPI_Type_get_attr(*type, *keyval, &c_value, &c_flag);
    set_ierror(ierror, rc);
    *flag = c_flag != 0;
    if (rc == MPI_SUCCESS && c_flag)
        *value = (MPI_Aint)(intptr_t)c_value;
}

void pmpi_win_get_attr_(MPI_Fint *win, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                        MPI_Fint *ierror);
void pmpi_win_get_attr_(MPI_Fint *win, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                        MPI_Fint *ierror)
{
    void *c_value = NULL;
    int c_flag = 0;
    int rc = MPI_Win_get_attr(*win, fortran_keyval(*keyval), &c_value, &c_flag);
    set_ierror(ierror, rc);
    *flag = c_flag != 0;
    if (rc == MPI_SUCCESS && c_flag)
        *value = attribute_value(fortran_keyval(*keyval), c_value);
}

void pmpi_attr_get_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *flag,
                    MPI_Fint *ierror);
void pmpi_attr_get_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *flag,
                    MPI_Fint *ierror)
{
    void *c_value = NULL;
    int c_flag = 0;
    int rc = MPI_Comm_get_attr(*comm, fortran_keyval(*keyval), &c_value, &c_flag);
    set_ierror(ierror, rc);
    *flag = c_flag != 0;
    if (rc == MPI_SUCCESS && c_flag)
        *value = (MPI_Fint)attribute_value(fortran_keyval(*keyval), c_value);
}

void pmpi_comm_set_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror);
void pmpi_comm_set_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror)
{
    set_ierror(ierror, MPI_Comm_set_attr(*comm, *keyval, (void *)(intptr_t)*value));
}

void pmpi_type_set_attr_(MPI_Fint *type, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror);
void pmpi_type_set_attr_(MPI_Fint *type, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror)
{
    set_ierror(ierror, MPI_Type_set_attr(*type, *keyval, (void *)(intptr_t)*value));
}

void pmpi_win_set_attr_(MPI_Fint *win, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror);
void pmpi_win_set_attr_(MPI_Fint *win, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror)
{
    set_ierror(ierror, MPI_Win_set_attr(*win, *keyval, (void *)(intptr_t)*value));
}

void pmpi_attr_put_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *ierror);
void pmpi_attr_put_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *ierror)
{
    set_ierror(ierror, MPI_Comm_set_attr(*comm, *keyval, (void *)(intptr_t)*value));
}

/* Keyvals with Fortran callbacks.  The C library calls C-shaped callbacks
 * (handles and values by value); these trampolines find the Fortran
 * procedures of the keyval and call them the Fortran way.  The extra state
 * travels as the C extra_state pointer's value. */
typedef void(fortran_copy_fn)(MPI_Fint *, MPI_Fint *, void *, void *, void *, MPI_Fint *,
                              MPI_Fint *);
typedef void(fortran_delete_fn)(MPI_Fint *, MPI_Fint *, void *, void *, MPI_Fint *);

enum keyval_kind { KEYVAL_COMM, KEYVAL_TYPE, KEYVAL_WIN, KEYVAL_KINDS };

struct fortran_keyval {
    int keyval;
    int narrow; /* MPI_KEYVAL_CREATE: INTEGER values, not ADDRESS_KIND */
    fortran_copy_fn *copy;
    fortran_delete_fn *delete_fn;
};

static struct fortran_keyval *keyvals[KEYVAL_KINDS];
static size_t keyval_count[KEYVAL_KINDS], keyval_capacity[KEYVAL_KINDS];

static struct fortran_keyval *keyval_find(enum keyval_kind kind, int keyval)
{
    for (size_t i = 0; i < keyval_count[kind]; i++)
        if (keyvals[kind][i].keyval == keyval)
            return &keyvals[kind][i];
    return NULL;
}

static int keyval_remember(enum keyval_kind kind, struct fortran_keyval entry)
{
    struct fortran_keyval *old = keyval_find(kind, entry.keyval);
    if (old) { /* a freed keyval's number came back */
        *old = entry;
        return MPI_SUCCESS;
    }
    if (keyval_count[kind] == keyval_capacity[kind]) {
        size_t capacity = keyval_capacity[kind] ? 2 * keyval_capacity[kind] : 16;
        struct fortran_keyval *grown = realloc(keyvals[kind], capacity * sizeof *grown);
        if (!grown)
            return MPI_ERR_NO_MEM;
        keyvals[kind] = grown;
        keyval_capacity[kind] = capacity;
    }
    keyvals[kind][keyval_count[kind]++] = entry;
    return MPI_SUCCESS;
}

static int trampoline_copy(enum keyval_kind kind, int object, int keyval, void *extra_state,
                           void *value_in, void *value_out, int *flag)
{
    struct fortran_keyval *entry = keyval_find(kind, keyval);
    MPI_Fint f_object = object, f_keyval = keyval, f_flag = 0, ierror = MPI_SUCCESS;
    if (!entry) {
        *flag = 0;
        return MPI_ERR_KEYVAL;
    }
    if (entry->narrow) {
        MPI_Fint extra = (MPI_Fint)(intptr_t)extra_state, in = (MPI_Fint)(intptr_t)value_in;
        MPI_Fint out = 0;
        entry->copy(&f_object, &f_keyval, &extra, &in, &out, &f_flag, &ierror);
        *(void **)value_out = (void *)(intptr_t)out;
    } else {
        MPI_Aint extra = (MPI_Aint)(intptr_t)extra_state, in = (MPI_Aint)(intptr_t)value_in;
        MPI_Aint out = 0;
        entry->copy(&f_object, &f_keyval, &extra, &in, &out, &f_flag, &ierror);
        *(void **)value_out = (void *)(intptr_t)out;
    }
    *flag = f_flag != 0;
    return ierror;
}

static int trampoline_delete(enum keyval_kind kind, int object, int keyval, void *value,
                             void *extra_state)
{
    struct fortran_keyval *entry = keyval_find(kind, keyval);
    MPI_Fint f_object = object, f_keyval = keyval, ierror = MPI_SUCCESS;
    if (!entry)
        return MPI_ERR_KEYVAL;
    if (entry->narrow) {
        MPI_Fint f_value = (MPI_Fint)(intptr_t)value, extra = (MPI_Fint)(intptr_t)extra_state;
        entry->delete_fn(&f_object, &f_keyval, &f_value, &extra, &ierror);
    } else {
        MPI_Aint f_value = (MPI_Aint)(intptr_t)value, extra = (MPI_Aint)(intptr_t)extra_state;
        entry->delete_fn(&f_object, &f_keyval, &f_value, &extra, &ierror);
    }
    return ierror;
}

#define TRAMPOLINES(name, kind, handle)                                                       \
    static int copy_##name(handle object, int keyval, void *extra_state, void *in, void *out, \
                           int *flag)                                                         \
    {                                                                                         \
        return trampoline_copy(kind, object, keyval, extra_state, in, out, flag);             \
    }                                                                                         \
    static int delete_##name(handle object, int keyval, void *value, void *extra_state)       \
    {                                                                                         \
        return trampoline_delete(kind, object, keyval, value, extra_state);                   \
    }
TRAMPOLINES(comm, KEYVAL_COMM, MPI_Comm)
TRAMPOLINES(type, KEYVAL_TYPE, MPI_Datatype)
TRAMPOLINES(win, KEYVAL_WIN, MPI_Win)

#define CREATE_KEYVAL(lower, c_name, kind, name)                                              \
    void pmpi_##lower##_(fortran_copy_fn *copy, fortran_delete_fn *delete_fn,                 \
                         MPI_Fint *keyval, MPI_Aint *extra_state, MPI_Fint *ierror);          \
    void pmpi_##lower##_(fortran_copy_fn *copy, fortran_delete_fn *delete_fn,                 \
                         MPI_Fint *keyval, MPI_Aint *extra_state, MPI_Fint *ierror)           \
    {                                                                                         \
        int rc = c_name(copy_##name, delete_##name, keyval, (void *)(intptr_t)*extra_state);  \
        if (rc == MPI_SUCCESS)                                                                \
            rc = keyval_remember(kind, (struct fortran_keyval){*keyval, 0, copy, delete_fn}); \
        set_ierror(ierror, rc);                                                                         \
    }
CREATE_KEYVAL(comm_create_keyval, MPI_Comm_create_keyval, KEYVAL_COMM, comm)
CREATE_KEYVAL(type_create_keyval, MPI_Type_create_keyval, KEYVAL_TYPE, type)
CREATE_KEYVAL(win_create_keyval, MPI_Win_create_keyval, KEYVAL_WIN, win)

void pmpi_keyval_create_(fortran_copy_fn *copy, fortran_delete_fn *delete_fn, MPI_Fint *keyval,
                         MPI_Fint *extra_state, MPI_Fint *ierror);
void pmpi_keyval_create_(fortran_copy_fn *copy, fortran_delete_fn *delete_fn, MPI_Fint *keyval,
                         MPI_Fint *extra_state, MPI_Fint *ierror)
{
    int rc = MPI_Comm_create_keyval(copy_comm, delete_comm, keyval,
                                    (void *)(intptr_t)*extra_state);
    if (rc == MPI_SUCCESS)
        rc = keyval_remember(KEYVAL_COMM, (struct fortran_keyval){*keyval, 1, copy, delete_fn});
    set_ierror(ierror, rc);
}

/* The predefined Fortran callbacks (EXTERNAL in mpif.h). */
#define NULL_COPY(lower, value_type)                                                          \
    void pmpi_##lower##_(MPI_Fint *object, MPI_Fint *keyval, value_type *extra_state,         \
                         value_type *in, value_type *out, MPI_Fint *flag, MPI_Fint *ierror);  \
    void pmpi_##lower##_(MPI_Fint *object, MPI_Fint *keyval, value_type *extra_state,         \
                         value_type *in, value_type *out, MPI_Fint *flag, MPI_Fint *ierror)   \
    {                                                                                         \
        (void)object; (void)keyval; (void)extra_state; (void)in; (void)out;                   \
        *flag = 0;                                                                            \
        set_ierror(ierror, MPI_SUCCESS);                                                                \
    }
#define DUP(lower, value_type)                                                                \
    void pmpi_##lower##_(MPI_Fint *object, MPI_Fint *keyval, value_type *extra_state,         \
                         value_type *in, value_type *out, MPI_Fint *flag, MPI_Fint *ierror);  \
    void pmpi_##lower##_(MPI_Fint *object, MPI_Fint *keyval, value_type *extra_state,         \
                         value_type *in, value_type *out, MPI_Fint *flag, MPI_Fint *ierror)   \
    {                                                                                         \
        (void)object; (void)keyval; (void)extra_state;                                        \
        *out = *in;                                                                           \
        *flag = 1;                                                                            \
        set_ierror(ierror, MPI_SUCCESS);                                                                \
    }
#define NULL_DELETE(lower, value_type)                                                        \
    void pmpi_##lower##_(MPI_Fint *object, MPI_Fint *keyval, value_type *value,               \
                         value_type *extra_state, MPI_Fint *ierror);                          \
    void pmpi_##lower##_(MPI_Fint *object, MPI_Fint *keyval, value_type *value,               \
                         value_type *extra_state, MPI_Fint *ierror)                           \
    {                                                                                         \
        (void)object; (void)keyval; (void)value; (void)extra_state;                           \
        set_ierror(ierror, MPI_SUCCESS);                                                                \
    }
NULL_COPY(null_copy_fn, MPI_Fint)
DUP(dup_fn, MPI_Fint)
NULL_DELETE(null_delete_fn, MPI_Fint)
NULL_COPY(comm_null_copy_fn, MPI_Aint)
DUP(comm_dup_fn, MPI_Aint)
NULL_DELETE(comm_null_delete_fn, MPI_Aint)
NULL_COPY(type_null_copy_fn, MPI_Aint)
DUP(type_dup_fn, MPI_Aint)
NULL_DELETE(type_null_delete_fn, MPI_Aint)
NULL_COPY(win_null_copy_fn, MPI_Aint)
DUP(win_dup_fn, MPI_Aint)
NULL_DELETE(win_null_delete_fn, MPI_Aint)

void pmpi_info_create_env_(MPI_Fint *info, MPI_Fint *ierror);
void pmpi_info_create_env_(MPI_Fint *info, MPI_Fint *ierror)
{
    set_ierror(ierror, MPI_Info_create_env(0, NULL, info));
}

/* MPI_F_SYNC_REG only has to make the compiler believe the buffer is used. */
void pmpi_f_sync_reg_(void *buffer);
void pmpi_f_sync_reg_(void *buffer)
{
    __asm__ __volatile__("" : : "r"(buffer) : "memory");
}

/* MPI_CONVERSION_FN_NULL is a Fortran EXTERNAL that MPI_REGISTER_DATAREP
 * recognises; it is never called. */
void pmpi_conversion_fn_null_(void *userbuf, MPI_Fint *datatype, MPI_Fint *count, void *filebuf,
                              MPI_Offset *position, MPI_Aint *extra_state, MPI_Fint *ierror);
void pmpi_conversion_fn_null_(void *userbuf, MPI_Fint *datatype, MPI_Fint *count, void *filebuf,
                              MPI_Offset *position, MPI_Aint *extra_state, MPI_Fint *ierror)
{
    (void)userbuf; (void)datatype; (void)count; (void)filebuf; (void)position; (void)extra_state;
    set_ierror(ierror, MPI_SUCCESS);
}

/* Fortran data conversion callbacks would need trampolines like the keyvals';
 * resmpi's Fortran MPI_Register_datarep is not built (the C one is), so say so plainly. */
void pmpi_register_datarep_(const char *datarep, void *read_fn, void *write_fn, void *extent_fn,
                            MPI_Aint *extra_state, MPI_Fint *ierror, size_t datarep_len);
void pmpi_register_datarep_(const char *datarep, void *read_fn, void *write_fn, void *extent_fn,
                            MPI_Aint *extra_state, MPI_Fint *ierror, size_t datarep_len)
{
    (void)datarep; (void)read_fn; (void)write_fn; (void)extent_fn; (void)extra_state;
    (void)datarep_len;
    set_ierror(ierror, MPI_ERR_UNSUPPORTED_OPERATION);
}

/* Generalized requests: the Fortran callbacks and extra state ride in a
 * block that is the C extra_state, freed after the Fortran free_fn ran. */
typedef void(fortran_query_fn)(MPI_Aint *, MPI_Fint *, MPI_Fint *);
typedef void(fortran_free_fn)(MPI_Aint *, MPI_Fint *);
typedef void(fortran_cancel_fn)(MPI_Aint *, MPI_Fint *, MPI_Fint *);
/* extra_state is the caller's variable itself, as with MPICH: a free_fn
 * that updates it updates the program's variable (MPICH's greqf test). */
struct fortran_grequest {
    fortran_query_fn *query;
    fortran_free_fn *free_fn;
    fortran_cancel_fn *cancel;
    MPI_Aint *extra_state;
};

static int grequest_query(void *state, MPI_Status *status)
{
    struct fortran_grequest *g = state;
    MPI_Fint ierror = MPI_SUCCESS;
    g->query(g->extra_state, (MPI_Fint *)status, &ierror);
    return ierror;
}

static int grequest_free(void *state)
{
    struct fortran_grequest *g = state;
    MPI_Fint ierror = MPI_SUCCESS;
    g->free_fn(g->extra_state, &ierror);
    free(g);
    return ierror;
}

static int grequest_cancel(void *state, int complete)
{
    struct fortran_grequest *g = state;
    MPI_Fint f_complete = complete != 0, ierror = MPI_SUCCESS;
    g->cancel(g->extra_state, &f_complete, &ierror);
    return ierror;
}

void pmpi_grequest_start_(fortran_query_fn *query, fortran_free_fn *free_fn,
                          fortran_cancel_fn *cancel, MPI_Aint *extra_state, MPI_Fint *request,
                          MPI_Fint *ierror);
void pmpi_grequest_start_(fortran_query_fn *query, fortran_free_fn *free_fn,
                          fortran_cancel_fn *cancel, MPI_Aint *extra_state, MPI_Fint *request,
                          MPI_Fint *ierror)
{
    struct fortran_grequest *g = malloc(sizeof *g);
    if (!g) {
        set_ierror(ierror, MPI_ERR_NO_MEM);
        return;
    }
    *g = (struct fortran_grequest){query, free_fn, cancel, extra_state};
    int rc = MPI_Grequest_start(grequest_query, grequest_free, grequest_cancel, g, request);
    set_ierror(ierror, rc);
    if (rc != MPI_SUCCESS)
        free(g);
}

/* Spawn.  A Fortran argv is a CHARACTER array ended by a blank entry
 * (MPI-4.0 section 11.8.2); MPI_ARGV_NULL is a common-block address. */
static void free_argv(char **argv)
{
    if (argv) {
        for (char **a = argv; *a; a++)
            free(*a);
        free(argv);
    }
}

/* Entries first, first + stride, ... of length `length` until a blank one. */
static char **fortran_argv(const char *first, size_t stride, size_t length)
{
    size_t count = 0;
    while (1) {
        const char *entry = first + count * stride;
        size_t used = length;
        while (used > 0 && entry[used - 1] == ' ')
            used--;
        if (used == 0)
            break;
        count++;
    }
    char **argv = calloc(count + 1, sizeof *argv);
    if (!argv)
        return NULL;
    for (size_t i = 0; i < count; i++)
        if (!(argv[i] = fortran_string_in(first + i * stride, length))) {
            free_argv(argv);
            return NULL;
        }
    return argv;
}

static int *fortran_errcodes(MPI_Fint *errcodes)
{
    return errcodes == mpipriv2_.errcodes_ignore ? MPI_ERRCODES_IGNORE : errcodes;
}

void pmpi_comm_spawn_(const char *command, const char *argv, MPI_Fint *maxprocs, MPI_Fint *info,
                      MPI_Fint *root, MPI_Fint *comm, MPI_Fint *intercomm, MPI_Fint *errcodes,
                      MPI_Fint *ierror, size_t command_len, size_t argv_len);
void pmpi_comm_spawn_(const char *command, const char *argv, MPI_Fint *maxprocs, MPI_Fint *info,
                      MPI_Fint *root, MPI_Fint *comm, MPI_Fint *intercomm, MPI_Fint *errcodes,
                      MPI_Fint *ierror, size_t command_len, size_t argv_len)
{
    char *c_command = fortran_string_in(command, command_len);
    char **c_argv = argv == mpiprivc_.argv_null ? MPI_ARGV_NULL
                                                : fortran_argv(argv, argv_len, argv_len);
    if (!c_command || (argv != mpiprivc_.argv_null && !c_argv))
        set_ierror(ierror, MPI_ERR_NO_MEM);
    else
        set_ierror(ierror, MPI_Comm_spawn(c_command, c_argv, *maxprocs, *info, *root, *comm, intercomm,
                                 fortran_errcodes(errcodes)));
    free(c_command);
    if (argv != mpiprivc_.argv_null)
        free_argv(c_argv);
}

void pmpi_comm_spawn_multiple_(MPI_Fint *count, const char *commands, const char *argvs,
                               MPI_Fint *maxprocs, MPI_Fint *infos, MPI_Fint *root,
                               MPI_Fint *comm, MPI_Fint *intercomm, MPI_Fint *errcodes,
                               MPI_Fint *ierror, size_t commands_len, size_t argvs_len);
void pmpi_comm_spawn_multiple_(MPI_Fint *count, const char *commands, const char *argvs,
                               MPI_Fint *maxprocs, MPI_Fint *infos, MPI_Fint *root,
                               MPI_Fint *comm, MPI_Fint *intercomm, MPI_Fint *errcodes,
                               MPI_Fint *ierror, size_t commands_len, size_t argvs_len)
{
    int n = *count > 0 ? *count : 0;
    int ignore_argv = argvs == mpiprivc_.argvs_null;
    char **c_commands = calloc((size_t)n + 1, sizeof *c_commands);
    char ***c_argvs = ignore_argv ? MPI_ARGVS_NULL : calloc((size_t)n + 1, sizeof *c_argvs);
    int rc = (c_commands && (ignore_argv || c_argvs)) ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        c_commands[i] = fortran_string_in(commands + (size_t)i * commands_len, commands_len);
        /* ARRAY_OF_ARGV(COUNT, *): command i's arguments are column-strided. */
        if (!ignore_argv)
            c_argvs[i] = fortran_argv(argvs + (size_t)i * argvs_len, (size_t)n * argvs_len,
                                      argvs_len);
        if (!c_commands[i] || (!ignore_argv && !c_argvs[i]))
            rc = MPI_ERR_NO_MEM;
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_spawn_multiple(*count, c_commands, c_argvs, maxprocs, infos, *root, *comm,
                                     intercomm, fortran_errcodes(errcodes));
    for (int i = 0; i < n; i++) {
        if (c_commands)
            free(c_commands[i]);
        if (c_argvs)
            free_argv(c_argvs[i]);
    }
    free(c_commands);
    if (!ignore_argv)
        free(c_argvs);
    set_ierror(ierror, rc);
}

/* MPI_INFO_GET_STRING: buflen is the room in value on entry and the value's
 * length (no NUL in Fortran) on return; buflen 0 asks only for the length;
 * value is left alone when the key is absent. */
void pmpi_info_get_string_(MPI_Fint *info, const char *key, MPI_Fint *buflen, char *value,
                           MPI_Fint *flag, MPI_Fint *ierror, size_t key_len, size_t value_len);
void pmpi_info_get_string_(MPI_Fint *info, const char *key, MPI_Fint *buflen, char *value,
                           MPI_Fint *flag, MPI_Fint *ierror, size_t key_len, size_t value_len)
{
    char *c_key = fortran_info_string(key, key_len), *c_value = NULL, probe[1];
    int rc = c_key ? MPI_SUCCESS : MPI_ERR_NO_MEM, c_flag = 0, c_buflen = 0;
    if (rc == MPI_SUCCESS)
        rc = MPI_Info_get_string(*info, c_key, &c_buflen, probe, &c_flag);
    if (rc == MPI_SUCCESS && c_flag && *buflen > 0) {
        int needed = c_buflen;
        if (!(c_value = calloc((size_t)needed + 1, 1)))
            rc = MPI_ERR_NO_MEM;
        else
            rc = MPI_Info_get_string(*info, c_key, &needed, c_value, &c_flag);
        if (rc == MPI_SUCCESS) {
            size_t room = (size_t)*buflen < value_len ? (size_t)*buflen : value_len;
            size_t used = strnlen(c_value, room);
            memcpy(value, c_value, used);
            memset(value + used, ' ', value_len - used);
        }
    }
    if (rc == MPI_SUCCESS) {
        *flag = c_flag != 0;
        if (c_flag)
            *buflen = c_buflen > 0 ? c_buflen - 1 : 0;
    }
    free(c_key);
    free(c_value);
    set_ierror(ierror, rc);
}

/* ------------------------------------------------------------ generated */
