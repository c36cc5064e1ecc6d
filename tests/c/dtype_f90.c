/* MPI_Type_create_f90_integer/real/complex: the smallest kind that has
 * the range and precision asked for, the same handle for the same
 * arguments, MPI_COMBINER_F90_* envelopes, usable in communication and
 * reductions, and a clear error for what no kind provides. */
#include "expect.h"

static void check_parameterized(MPI_Datatype type, int combiner, int size, int p, int r) {
    int type_size = -1, ni, na, nd, got;
    MPI_OK(MPI_Type_size(type, &type_size));
    CHECK(type_size == size, "combiner %d (p %d, r %d): size %d, expected %d", combiner, p, r, type_size, size);
    MPI_OK(MPI_Type_get_envelope(type, &ni, &na, &nd, &got));
    CHECK(got == combiner, "combiner %d, expected %d", got, combiner);
    int want_ni = combiner == MPI_COMBINER_F90_INTEGER ? 1 : 2;
    CHECK(ni == want_ni && na == 0 && nd == 0, "envelope counts %d %d %d", ni, na, nd);
    int ints[2] = {-7, -7};
    MPI_Aint addrs[1];
    MPI_Datatype types[1];
    MPI_OK(MPI_Type_get_contents(type, ni, 0, 0, ints, addrs, types));
    if (combiner == MPI_COMBINER_F90_INTEGER)
        CHECK(ints[0] == r, "contents %d, expected r %d", ints[0], r);
    else
        CHECK(ints[0] == p && ints[1] == r, "contents %d %d, expected %d %d", ints[0], ints[1], p, r);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    struct { int r, size; } integers[] = {{1, 1}, {2, 1}, {4, 2}, {9, 4}, {10, 8}, {18, 8}};
    for (int i = 0; i < 6; i++) {
        MPI_Datatype type, again;
        MPI_OK(MPI_Type_create_f90_integer(integers[i].r, &type));
        MPI_OK(MPI_Type_create_f90_integer(integers[i].r, &again));
        CHECK(type == again, "r %d: two calls gave two handles", integers[i].r);
        check_parameterized(type, MPI_COMBINER_F90_INTEGER, integers[i].size, 0, integers[i].r);
    }
    MPI_Datatype real4, real8, complex8, complex16;
    MPI_OK(MPI_Type_create_f90_real(6, 30, &real4));
    check_parameterized(real4, MPI_COMBINER_F90_REAL, 4, 6, 30);
    MPI_OK(MPI_Type_create_f90_real(15, 300, &real8));
    check_parameterized(real8, MPI_COMBINER_F90_REAL, 8, 15, 300);
    MPI_OK(MPI_Type_create_f90_complex(6, 30, &complex8));
    check_parameterized(complex8, MPI_COMBINER_F90_COMPLEX, 8, 6, 30);
    MPI_OK(MPI_Type_create_f90_complex(15, MPI_UNDEFINED, &complex16));
    check_parameterized(complex16, MPI_COMBINER_F90_COMPLEX, 16, 15, MPI_UNDEFINED);

    /* A reduction and a ring exchange in the double-precision kind. */
    double mine = g_rank + 0.5, sum = 0;
    MPI_OK(MPI_Allreduce(&mine, &sum, 1, real8, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == g_size * g_size / 2.0, "sum %g", sum);
    double from_left = -1;
    MPI_OK(MPI_Sendrecv(&mine, 1, real8, (g_rank + 1) % g_size, 5, &from_left, 1, real8,
                        (g_rank + g_size - 1) % g_size, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(from_left == (g_rank + g_size - 1) % g_size + 0.5, "received %g", from_left);

    /* No kind has 100 digits of precision or range (erroneous: MPICH says
     * MPI_ERR_OTHER, resmpi MPI_ERR_ARG; both fail without crashing). */
    MPI_Datatype none;
    CHECK(MPI_Type_create_f90_real(100, 30, &none) != MPI_SUCCESS, "real p=100 accepted");
    CHECK(MPI_Type_create_f90_integer(100, &none) != MPI_SUCCESS, "integer r=100 accepted");
    return test_finish();
}
