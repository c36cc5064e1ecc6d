/* Reduction kernels for C `long double` (x87 80-bit), which Rust cannot
 * express. Called from crates/core/src/op.rs. Returns 0, or -1 for an op
 * that is not defined on the type. */
#include <stddef.h>
#include <string.h>

enum { OP_MAX = 1, OP_MIN, OP_SUM, OP_PROD };

int resmpi_long_double_reduce(int op, const void *in, void *inout, size_t count)
{
    const long double *a = in;
    long double *b = inout;
    for (size_t i = 0; i < count; i++) {
        switch (op) {
        case OP_MAX: if (a[i] > b[i]) b[i] = a[i]; break;
        case OP_MIN: if (a[i] < b[i]) b[i] = a[i]; break;
        case OP_SUM: b[i] += a[i]; break;
        case OP_PROD: b[i] *= a[i]; break;
        default: return -1;
        }
    }
    return 0;
}

int resmpi_long_double_complex_reduce(int op, const void *in, void *inout, size_t count)
{
    const _Complex long double *a = in;
    _Complex long double *b = inout;
    for (size_t i = 0; i < count; i++) {
        switch (op) {
        case OP_SUM: b[i] += a[i]; break;
        case OP_PROD: b[i] *= a[i]; break;
        default: return -1;
        }
    }
    return 0;
}

/* MINLOC / MAXLOC on {long double, int} (MPI_LONG_DOUBLE_INT, 32 bytes). */
int resmpi_long_double_int_loc(int is_max, const void *in, void *inout, size_t count)
{
    struct pair { long double value; int index; };
    const struct pair *a = in;
    struct pair *b = inout;
    for (size_t i = 0; i < count; i++) {
        int better = is_max ? a[i].value > b[i].value : a[i].value < b[i].value;
        if (better || (a[i].value == b[i].value && a[i].index < b[i].index))
            b[i] = a[i];
    }
    return 0;
}
