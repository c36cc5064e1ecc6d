/* Bad datatype arguments return the right error class under
 * MPI_ERRORS_RETURN and leave the library usable.
 * usage: dtype_errors [erroneous_uses | shape_checks]
 *   erroneous_uses  pack windows too small, handles used after MPI_Type_free
 *                   (erroneous programs MPICH does not promise to catch;
 *                   resmpi returns MPI_ERR_TRUNCATE / MPI_ERR_TYPE)
 *   shape_checks    a subarray reaching past its array, a darray grid that
 *                   does not hold `size` processes (MPICH 4.0.2 accepts both) */
#include "common.h"

static void expect_class(int rc, int want, const char *what) {
    int cls = -1;
    CHECK(rc != MPI_SUCCESS, "%s succeeded", what);
    MPI_Error_class(rc, &cls);
    CHECK(cls == want, "%s: error class %d, expected %d", what, cls, want);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Datatype t = MPI_DATATYPE_NULL, v;
    int buf[64] = {0}, size;
    MPI_Aint lb, extent;

    /* negative counts */
    expect_class(MPI_Type_contiguous(-1, MPI_INT, &t), MPI_ERR_COUNT, "Type_contiguous(-1)");
    expect_class(MPI_Type_vector(-2, 1, 1, MPI_INT, &t), MPI_ERR_COUNT, "Type_vector(count -2)");
    int bl[] = {1, 2}, dis[] = {0, 4};
    expect_class(MPI_Type_indexed(-1, bl, dis, MPI_INT, &t), MPI_ERR_COUNT, "Type_indexed(-1)");

    /* MPI_DATATYPE_NULL as the old type */
    expect_class(MPI_Type_contiguous(2, MPI_DATATYPE_NULL, &t), MPI_ERR_TYPE, "Type_contiguous(DATATYPE_NULL)");
    expect_class(MPI_Type_size(MPI_DATATYPE_NULL, &size), MPI_ERR_TYPE, "Type_size(DATATYPE_NULL)");
    expect_class(MPI_Send(buf, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "Send(DATATYPE_NULL)");

    /* an uncommitted type cannot communicate */
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &v));
    expect_class(MPI_Send(buf, 1, v, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "Send(uncommitted)");
    MPI_Request rq;
    expect_class(MPI_Irecv(buf, 1, v, 0, 0, MPI_COMM_WORLD, &rq), MPI_ERR_TYPE, "Irecv(uncommitted)");
    MPI_OK(MPI_Type_commit(&v));

    /* negative count in communication with a derived type */
    expect_class(MPI_Send(buf, -1, v, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Send(count -1, derived)");

    /* freeing a predefined type */
    MPI_Datatype named = MPI_INT;
    expect_class(MPI_Type_free(&named), MPI_ERR_TYPE, "Type_free(MPI_INT)");
    /* freeing MPI_DATATYPE_NULL */
    MPI_Datatype null_type = MPI_DATATYPE_NULL;
    expect_class(MPI_Type_free(&null_type), MPI_ERR_TYPE, "Type_free(DATATYPE_NULL)");

    /* get_contents of a predefined type is erroneous */
    int ints[4];
    MPI_Aint addrs[4];
    MPI_Datatype types[4];
    expect_class(MPI_Type_get_contents(MPI_INT, 4, 4, 4, ints, addrs, types), MPI_ERR_TYPE,
                 "Type_get_contents(MPI_INT)");
    /* negative block length */
    expect_class(MPI_Type_vector(2, -1, 1, MPI_INT, &t), MPI_ERR_COUNT, "Type_vector(blocklength -1)");
    int rc;

    /* subarray / darray arguments */
    int sizes[] = {4, 4}, subsizes[] = {2, 3}, starts[] = {1, 0};
    expect_class(MPI_Type_create_subarray(2, sizes, subsizes, starts, 12345, MPI_INT, &t), MPI_ERR_ARG,
                 "subarray bad order");
    int gsizes[] = {8}, distribs[] = {MPI_DISTRIBUTE_BLOCK}, dargs[] = {MPI_DISTRIBUTE_DFLT_DARG}, psizes[] = {3};
    psizes[0] = 2;
    dargs[0] = 2; /* 2 x 2 processes cannot cover 8 */
    expect_class(MPI_Type_create_darray(2, 0, 1, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t),
                 MPI_ERR_ARG, "darray block too small");

    /* count × extent overflowing 64 bits (the size alone fits): MPI_ERR_COUNT
     * from every call that would walk the buffer, not a crash or a hang */
    MPI_Datatype wide;
    MPI_OK(MPI_Type_create_resized(MPI_INT, 0, (MPI_Aint)1 << 40, &wide));
    MPI_OK(MPI_Type_commit(&wide));
    int many = 1 << 24;
    MPI_Request request;
    expect_class(MPI_Send(buf, many, wide, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Send(count x extent overflows)");
    expect_class(MPI_Isend(buf, many, wide, 0, 0, MPI_COMM_WORLD, &request), MPI_ERR_COUNT, "Isend(overflow)");
    expect_class(MPI_Recv(buf, many, wide, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_COUNT,
                 "Recv(overflow)");
    expect_class(MPI_Bcast(buf, many, wide, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Bcast(overflow)");
    expect_class(MPI_Allreduce(buf, buf + 32, many, wide, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT,
                 "Allreduce(overflow)");
    expect_class(MPI_Pack_size(many, wide, MPI_COMM_WORLD, &size), MPI_ERR_COUNT, "Pack_size(overflow)");
    MPI_OK(MPI_Type_free(&wide));

    /* the library still works: a committed derived type round trip to self */
    int out[3] = {1, 2, 3}, in[3] = {0, 0, 0};
    MPI_OK(MPI_Sendrecv(out, 1, v, 0, 9, in, 1, v, 0, 9, MPI_COMM_SELF, MPI_STATUS_IGNORE));
    CHECK(in[0] == 1 && in[1] == 0 && in[2] == 3, "self round trip after errors");
    MPI_OK(MPI_Type_get_extent(v, &lb, &extent));
    MPI_OK(MPI_Type_free(&v));
    CHECK(v == MPI_DATATYPE_NULL, "Type_free nulls the handle");
    if (argc > 1 && !strcmp(argv[1], "shape_checks")) {
        int bad_starts[] = {1, 2}; /* 2 + 3 > 4 */
        expect_class(MPI_Type_create_subarray(2, sizes, subsizes, bad_starts, MPI_ORDER_C, MPI_INT, &t),
                     MPI_ERR_ARG, "subarray start + subsize > size");
        int three[] = {3}, dflt[] = {MPI_DISTRIBUTE_DFLT_DARG};
        expect_class(MPI_Type_create_darray(4, 0, 1, gsizes, distribs, dflt, three, MPI_ORDER_C, MPI_INT, &t),
                     MPI_ERR_ARG, "darray psizes do not multiply to size");
    }
    if (argc > 1 && !strcmp(argv[1], "erroneous_uses")) {
        /* MPI_Pack into a buffer that is too small */
        MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &v));
        MPI_OK(MPI_Type_commit(&v));
        char small[8];
        int pos = 0;
        expect_class(MPI_Pack(buf, 3, v, small, sizeof small, &pos, MPI_COMM_WORLD), MPI_ERR_TRUNCATE,
                     "Pack of 24 bytes into 8");
        CHECK(pos == 0, "a failed Pack moved the position");
        /* Unpack past the end of the input */
        pos = 4;
        expect_class(MPI_Unpack(small, sizeof small, &pos, buf, 1, v, MPI_COMM_WORLD), MPI_ERR_TRUNCATE,
                     "Unpack of 8 bytes from position 4 of 8");
        MPI_Datatype w, stale;
        MPI_OK(MPI_Type_contiguous(2, MPI_INT, &w));
        MPI_OK(MPI_Type_commit(&w));
        stale = w;
        MPI_OK(MPI_Type_free(&w));
        expect_class(MPI_Type_size(stale, &size), MPI_ERR_TYPE, "Type_size(freed)");
        expect_class(MPI_Send(buf, 1, stale, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "Send(freed)");
        expect_class(MPI_Type_free(&stale), MPI_ERR_TYPE, "Type_free(freed)");
        expect_class(MPI_Type_commit(&stale), MPI_ERR_TYPE, "Type_commit(freed)");
        MPI_OK(MPI_Type_free(&v));
    }
    (void)lb;
    (void)extent;
    return test_finish();
}
