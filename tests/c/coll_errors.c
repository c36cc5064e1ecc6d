/* Bad arguments to collectives return the right error class under
 * MPI_ERRORS_RETURN on every rank (each rank passes the same bad argument,
 * so nothing may hang), and the communicator still works afterwards.
 * usage: coll_errors [unchecked_by_mpich] */
#include "common.h"

static void expect_class(int rc, int want, const char *what) {
    CHECK(rc != MPI_SUCCESS, "%s succeeded", what);
    int cls = -1;
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == want, "%s: error class %d, expected %d", what, cls, want);
}

/* Checks Debian's MPICH 4.0.2 does not make (it crashes on the negative
 * counts, allows logical ops on floating point and passes MPI_DATATYPE_NULL
 * through): subtest unchecked_by_mpich. */
static void unchecked_by_mpich(void) {
    int buf[16] = {0}, out[16 * 8] = {0};
    double d[4] = {0}, dout[4];
    MPI_Request request;
    expect_class(MPI_Allreduce(buf, out, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT, "Allreduce count");
    expect_class(MPI_Scan(buf, out, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT, "Scan count");
    expect_class(MPI_Iallreduce(buf, out, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request), MPI_ERR_COUNT,
                 "Iallreduce count");
    expect_class(MPI_Allreduce(d, dout, 4, MPI_DOUBLE, MPI_LXOR, MPI_COMM_WORLD), MPI_ERR_OP, "LXOR on DOUBLE");
    expect_class(MPI_Allreduce(buf, out, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_TYPE,
                 "Allreduce DATATYPE_NULL");
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (argc > 1 && !strcmp(argv[1], "unchecked_by_mpich")) {
        unchecked_by_mpich();
        return test_finish();
    }
    int buf[16] = {0}, out[16 * 8] = {0};
    double d[4] = {0}, dout[4];
    MPI_Request request;

    /* Invalid roots. */
    expect_class(MPI_Bcast(buf, 1, MPI_INT, g_size, MPI_COMM_WORLD), MPI_ERR_ROOT, "Bcast root=size");
    expect_class(MPI_Bcast(buf, 1, MPI_INT, -1, MPI_COMM_WORLD), MPI_ERR_ROOT, "Bcast root=-1");
    expect_class(MPI_Reduce(buf, out, 1, MPI_INT, MPI_SUM, g_size + 3, MPI_COMM_WORLD), MPI_ERR_ROOT, "Reduce root");
    expect_class(MPI_Gather(buf, 1, MPI_INT, out, 1, MPI_INT, -5, MPI_COMM_WORLD), MPI_ERR_ROOT, "Gather root");
    expect_class(MPI_Scatter(buf, 1, MPI_INT, out, 1, MPI_INT, g_size, MPI_COMM_WORLD), MPI_ERR_ROOT, "Scatter root");
    expect_class(MPI_Ibcast(buf, 1, MPI_INT, g_size, MPI_COMM_WORLD, &request), MPI_ERR_ROOT, "Ibcast root");

    /* Negative counts. */
    expect_class(MPI_Bcast(buf, -1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Bcast count -1");
    expect_class(MPI_Allgather(buf, -1, MPI_INT, out, -1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_COUNT, "Allgather count");
    expect_class(MPI_Alltoall(buf, -1, MPI_INT, out, -1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_COUNT, "Alltoall count");

    /* Op / type combinations the standard does not define, and invalid ops. */
    expect_class(MPI_Allreduce(d, dout, 4, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP, "BAND on DOUBLE");
    expect_class(MPI_Allreduce(buf, out, 2, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD), MPI_ERR_OP, "MAXLOC on INT");
    expect_class(MPI_Allreduce(d, dout, 2, MPI_C_DOUBLE_COMPLEX, MPI_MAX, MPI_COMM_WORLD), MPI_ERR_OP,
                 "MAX on complex");
    expect_class(MPI_Reduce(buf, out, 4, MPI_BYTE, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_OP, "SUM on BYTE");
    expect_class(MPI_Allreduce(buf, out, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP, "MPI_OP_NULL");
    expect_class(MPI_Reduce_local(buf, out, 1, MPI_FLOAT, MPI_BOR), MPI_ERR_OP, "Reduce_local BOR on FLOAT");
    expect_class(MPI_Scan(d, dout, 1, MPI_DOUBLE, MPI_BXOR, MPI_COMM_WORLD), MPI_ERR_OP, "Scan BXOR on DOUBLE");
    expect_class(MPI_Ireduce(d, dout, 1, MPI_DOUBLE, MPI_BAND, 0, MPI_COMM_WORLD, &request), MPI_ERR_OP,
                 "Ireduce BAND on DOUBLE");
    MPI_Op sum = MPI_SUM;
    expect_class(MPI_Op_free(&sum), MPI_ERR_OP, "Op_free of a predefined op");

    /* Invalid datatype and communicator. */
    expect_class(MPI_Bcast(buf, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "Bcast DATATYPE_NULL");
    expect_class(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM, "Barrier COMM_NULL");
    expect_class(MPI_Bcast(buf, 1, MPI_INT, 0, MPI_COMM_NULL), MPI_ERR_COMM, "Bcast COMM_NULL");
    expect_class(MPI_Allreduce(buf, out, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL), MPI_ERR_COMM, "Allreduce COMM_NULL");
    expect_class(MPI_Alltoall(buf, 1, MPI_INT, out, 1, MPI_INT, MPI_COMM_NULL), MPI_ERR_COMM, "Alltoall COMM_NULL");
    expect_class(MPI_Ibarrier(MPI_COMM_NULL, &request), MPI_ERR_COMM, "Ibarrier COMM_NULL");

    /* The communicator still works. */
    int one = 1, total = 0;
    MPI_Comm dup;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_OK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, dup));
    CHECK(total == g_size, "Allreduce after errors: %d", total);
    MPI_OK(MPI_Comm_free(&dup));
    return test_finish();
}
