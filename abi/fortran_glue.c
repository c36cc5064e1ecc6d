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

/* MPICH's Fortran common blocks (same names, sizes and member order as the
 * COMMON statements of mpif.h).  A program that includes mpif.h defines them
 * too; the dynamic linker binds our references to the program's copy, so
 * comparing an argument's address with a member's tells the sentinel.
 * Exported and not hidden on purpose. */
struct mpipriv1 { MPI_Fint bottom, in_place, status_ignore[MPI_F_STATUS_SIZE]; };
struct mpipriv2 { MPI_Fint statuses_ignore[MPI_F_STATUS_SIZE], errcodes_ignore[1]; };
struct mpiprivc { char argvs_null[1], argv_null[1]; };
struct mpipriv1 mpipriv1_;
struct mpipriv2 mpipriv2_;
struct mpiprivc mpiprivc_;
MPI_Fint mpifcmb5_; /* MPI_UNWEIGHTED */
MPI_Fint mpifcmb9_; /* MPI_WEIGHTS_EMPTY */

/* A Fortran status is the C MPI_Status itself (5 INTEGERs, MPI_SOURCE at
 * index 3): MPICH's layout, so only the ignore sentinels need translating. */
_Static_assert(sizeof(MPI_Status) == MPI_F_STATUS_SIZE * sizeof(MPI_Fint),
               "Fortran and C statuses share one layout");
/* Handles cross unchanged (MPI_Comm_c2f is the identity). */
_Static_assert(sizeof(MPI_Comm) == sizeof(MPI_Fint), "INTEGER handles are C handles");

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
    *ierror = MPI_Init(NULL, NULL);
}

void pmpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror);
void pmpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror)
{
    *ierror = MPI_Init_thread(NULL, NULL, *required, provided);
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
    *ierror = MPI_Pcontrol(*level);
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
    *ierror = MPI_Comm_get_attr(*comm, *keyval, &c_value, &c_flag);
    *flag = c_flag != 0;
    if (*ierror == MPI_SUCCESS && c_flag)
        *value = attribute_value(*keyval, c_value);
}

void pmpi_type_get_attr_(MPI_Fint *type, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                         MPI_Fint *ierror);
void pmpi_type_get_attr_(MPI_Fint *type, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                         MPI_Fint *ierror)
{
    void *c_value = NULL;
    int c_flag = 0;
    *ierror = MPI_Type_get_attr(*type, *keyval, &c_value, &c_flag);
    *flag = c_flag != 0;
    if (*ierror == MPI_SUCCESS && c_flag)
        *value = (MPI_Aint)(intptr_t)c_value;
}

void pmpi_win_get_attr_(MPI_Fint *win, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                        MPI_Fint *ierror);
void pmpi_win_get_attr_(MPI_Fint *win, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag,
                        MPI_Fint *ierror)
{
    void *c_value = NULL;
    int c_flag = 0;
    *ierror = MPI_Win_get_attr(*win, *keyval, &c_value, &c_flag);
    *flag = c_flag != 0;
    if (*ierror == MPI_SUCCESS && c_flag)
        *value = attribute_value(*keyval, c_value);
}

void pmpi_attr_get_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *flag,
                    MPI_Fint *ierror);
void pmpi_attr_get_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *flag,
                    MPI_Fint *ierror)
{
    void *c_value = NULL;
    int c_flag = 0;
    *ierror = MPI_Comm_get_attr(*comm, *keyval, &c_value, &c_flag);
    *flag = c_flag != 0;
    if (*ierror == MPI_SUCCESS && c_flag)
        *value = (MPI_Fint)attribute_value(*keyval, c_value);
}

void pmpi_comm_set_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror);
void pmpi_comm_set_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror)
{
    *ierror = MPI_Comm_set_attr(*comm, *keyval, (void *)(intptr_t)*value);
}

void pmpi_type_set_attr_(MPI_Fint *type, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror);
void pmpi_type_set_attr_(MPI_Fint *type, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror)
{
    *ierror = MPI_Type_set_attr(*type, *keyval, (void *)(intptr_t)*value);
}

void pmpi_win_set_attr_(MPI_Fint *win, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror);
void pmpi_win_set_attr_(MPI_Fint *win, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierror)
{
    *ierror = MPI_Win_set_attr(*win, *keyval, (void *)(intptr_t)*value);
}

void pmpi_attr_put_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *ierror);
void pmpi_attr_put_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *ierror)
{
    *ierror = MPI_Comm_set_attr(*comm, *keyval, (void *)(intptr_t)*value);
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
        *ierror = rc;                                                                         \
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
    *ierror = rc;
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
        *ierror = MPI_SUCCESS;                                                                \
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
        *ierror = MPI_SUCCESS;                                                                \
    }
#define NULL_DELETE(lower, value_type)                                                        \
    void pmpi_##lower##_(MPI_Fint *object, MPI_Fint *keyval, value_type *value,               \
                         value_type *extra_state, MPI_Fint *ierror);                          \
    void pmpi_##lower##_(MPI_Fint *object, MPI_Fint *keyval, value_type *value,               \
                         value_type *extra_state, MPI_Fint *ierror)                           \
    {                                                                                         \
        (void)object; (void)keyval; (void)value; (void)extra_state;                           \
        *ierror = MPI_SUCCESS;                                                                \
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

/* ------------------------------------------------------------ generated */
