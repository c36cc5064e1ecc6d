/* Error classes under MPI_ERRORS_RETURN.  usage: errors [freed]
 *   (default) argument errors -> classes, truncation, handler get/set
 *   freed     use of a freed communicator handle -> MPI_ERR_COMM */
#include "common.h"
#include <limits.h>

static void expect(int rc, int cls, const char *what) {
    int c = -1;
    CHECK(rc != MPI_SUCCESS, "%s: returned MPI_SUCCESS, expected class %d", what, cls);
    MPI_OK(MPI_Error_class(rc, &c));
    char s1[MPI_MAX_ERROR_STRING], s2[MPI_MAX_ERROR_STRING];
    int l1 = 0, l2 = 0;
    MPI_OK(MPI_Error_string(c, s1, &l1));
    MPI_OK(MPI_Error_string(rc, s2, &l2));
    CHECK(c == cls, "%s: error class %d (%s), expected %d", what, c, s1, cls);
    CHECK(l1 > 0 && (int)strlen(s1) == l1 && l2 > 0 && (int)strlen(s2) == l2,
          "%s: empty/inconsistent Error_string", what);
}

static int g_counted_errors = 0;
static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    g_counted_errors++;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "default WORLD error handler is not ERRORS_ARE_FATAL");
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "Comm_get_errhandler did not return ERRORS_RETURN");

    /* The MPI-1 names (deleted in MPI-3, still in MPICH's library) act as
     * the MPI_Comm_ forms. */
    {
        MPI_Errhandler mpi1 = MPI_ERRHANDLER_NULL, got = MPI_ERRHANDLER_NULL;
        MPI_OK(MPI_Errhandler_create(count_errors, &mpi1));
        MPI_OK(MPI_Errhandler_set(MPI_COMM_SELF, mpi1));
        MPI_OK(MPI_Errhandler_get(MPI_COMM_SELF, &got));
        CHECK(got == mpi1, "Errhandler_get gave %#x, set %#x", (unsigned)got, (unsigned)mpi1);
        int before = g_counted_errors;
        int s = 0;
        MPI_Comm_size(MPI_COMM_NULL, &s); /* raised on WORLD: not counted */
        MPI_OK(MPI_Comm_call_errhandler(MPI_COMM_SELF, MPI_ERR_OTHER));
        CHECK(g_counted_errors == before + 1, "the MPI-1 handler ran %d times",
              g_counted_errors - before);
        MPI_OK(MPI_Errhandler_set(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        MPI_OK(MPI_Errhandler_free(&mpi1));
    }

    int to = (g_rank + 1) % g_size, from = (g_rank - 1 + g_size) % g_size;
    int buf[16] = {0}, flag;
    MPI_Status st;
    MPI_Request rq;
    MPI_Comm garbage_comm = (MPI_Comm)0x0badbeef;
    MPI_Request garbage_req = (MPI_Request)0x0badbeef;

    if (argc > 1 && !strcmp(argv[1], "freed")) {
        MPI_Comm d, copy;
        MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        copy = d;
        MPI_OK(MPI_Comm_free(&d));
        int s = 0;
        expect(MPI_Comm_size(copy, &s), MPI_ERR_COMM, "Comm_size(freed comm)");
        expect(MPI_Send(buf, 1, MPI_INT, to, 0, copy), MPI_ERR_COMM, "Send(freed comm)");
        return test_finish();
    }

    /* every error class has a non-empty string */
    for (int c = MPI_SUCCESS; c <= MPI_ERR_LASTCODE && c <= 80; c++) {
        char s[MPI_MAX_ERROR_STRING];
        int l = -1;
        if (MPI_Error_string(c, s, &l) == MPI_SUCCESS && c <= 50)
            CHECK(l > 0 && (int)strlen(s) == l, "Error_string(%d) empty", c);
    }

    expect(MPI_Send(buf, 1, MPI_INT, g_size, 0, MPI_COMM_WORLD), MPI_ERR_RANK, "Send to rank == size");
    expect(MPI_Send(buf, 1, MPI_INT, -7, 0, MPI_COMM_WORLD), MPI_ERR_RANK, "Send to rank -7");
    expect(MPI_Recv(buf, 1, MPI_INT, g_size + 3, 0, MPI_COMM_WORLD, &st), MPI_ERR_RANK, "Recv from bad rank");
    expect(MPI_Isend(buf, 1, MPI_INT, g_size, 0, MPI_COMM_WORLD, &rq), MPI_ERR_RANK, "Isend to bad rank");

    int *ub = NULL, ok = 0;
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &ok));
    CHECK(ok && *ub >= 32767, "MPI_TAG_UB %d", ok ? *ub : -1);
    expect(MPI_Send(buf, 1, MPI_INT, to, -1, MPI_COMM_WORLD), MPI_ERR_TAG, "Send tag -1");
    expect(MPI_Send(buf, 1, MPI_INT, to, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG, "Send tag ANY_TAG");
    expect(MPI_Recv(buf, 1, MPI_INT, from, -5, MPI_COMM_WORLD, &st), MPI_ERR_TAG, "Recv tag -5");
    if (*ub < INT_MAX)
        expect(MPI_Send(buf, 1, MPI_INT, to, *ub + 1, MPI_COMM_WORLD), MPI_ERR_TAG, "Send tag TAG_UB+1");

    expect(MPI_Send(buf, -1, MPI_INT, to, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Send count -1");
    expect(MPI_Recv(buf, -3, MPI_INT, from, 0, MPI_COMM_WORLD, &st), MPI_ERR_COUNT, "Recv count -3");
    expect(MPI_Bcast(buf, -2, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Bcast count -2");

    expect(MPI_Send(buf, 1, MPI_DATATYPE_NULL, to, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "Send DATATYPE_NULL");
    expect(MPI_Recv(buf, 1, MPI_DATATYPE_NULL, from, 0, MPI_COMM_WORLD, &st), MPI_ERR_TYPE, "Recv DATATYPE_NULL");
    int tsz;
    expect(MPI_Type_size(MPI_DATATYPE_NULL, &tsz), MPI_ERR_TYPE, "Type_size DATATYPE_NULL");

    expect(MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM, "Send on COMM_NULL");
    int r;
    expect(MPI_Comm_rank(MPI_COMM_NULL, &r), MPI_ERR_COMM, "Comm_rank(COMM_NULL)");
    expect(MPI_Comm_size(garbage_comm, &r), MPI_ERR_COMM, "Comm_size(garbage)");
    expect(MPI_Send(buf, 1, MPI_INT, 0, 0, garbage_comm), MPI_ERR_COMM, "Send on garbage comm");
    expect(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM, "Barrier(COMM_NULL)");

    rq = MPI_REQUEST_NULL;
    MPI_OK(MPI_Wait(&rq, &st));
    MPI_OK(MPI_Test(&rq, &flag, &st));
    expect(MPI_Wait(&garbage_req, &st), MPI_ERR_REQUEST, "Wait(garbage request)");
    garbage_req = (MPI_Request)0x0badbeef;
    expect(MPI_Test(&garbage_req, &flag, &st), MPI_ERR_REQUEST, "Test(garbage request)");

    expect(MPI_Send(NULL, 4, MPI_INT, to, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER, "Send NULL buffer count 4");
    expect(MPI_Recv(NULL, 4, MPI_INT, from, 0, MPI_COMM_WORLD, &st), MPI_ERR_BUFFER, "Recv NULL buffer count 4");
    MPI_OK(MPI_Sendrecv(NULL, 0, MPI_INT, to, 3, NULL, 0, MPI_INT, from, 3, MPI_COMM_WORLD, &st)); /* NULL, 0 is fine */

    expect(MPI_Bcast(buf, 1, MPI_INT, g_size, MPI_COMM_WORLD), MPI_ERR_ROOT, "Bcast root == size");
    expect(MPI_Bcast(buf, 1, MPI_INT, -4, MPI_COMM_WORLD), MPI_ERR_ROOT, "Bcast root -4");
    expect(MPI_Reduce(buf, buf + 8, 1, MPI_INT, MPI_SUM, g_size + 1, MPI_COMM_WORLD), MPI_ERR_ROOT, "Reduce bad root");

    expect(MPI_Allreduce(buf, buf + 8, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP, "Allreduce OP_NULL");
    expect(MPI_Reduce(buf, buf + 8, 1, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD), MPI_ERR_OP, "Reduce OP_NULL");
    expect(MPI_Allreduce(buf, buf + 8, 1, MPI_INT, MPI_MINLOC, MPI_COMM_WORLD), MPI_ERR_OP, "MINLOC on MPI_INT");

    /* truncation: 10 ints into room for 5 */
    int big[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, small[5];
    MPI_Request sr;
    MPI_OK(MPI_Isend(big, 10, MPI_INT, to, 50, MPI_COMM_WORLD, &sr));
    expect(MPI_Recv(small, 5, MPI_INT, from, 50, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE, "Recv truncated");
    MPI_OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    /* multiple completion: MPI_ERR_IN_STATUS and the per-request MPI_ERROR */
    int okv = 0, okr = -1;
    MPI_Request rs[3];
    MPI_Status sts[3];
    MPI_OK(MPI_Isend(big, 10, MPI_INT, to, 51, MPI_COMM_WORLD, &sr));
    MPI_OK(MPI_Irecv(small, 5, MPI_INT, from, 51, MPI_COMM_WORLD, &rs[0]));
    MPI_OK(MPI_Irecv(&okr, 1, MPI_INT, from, 52, MPI_COMM_WORLD, &rs[1]));
    MPI_OK(MPI_Isend(&okv, 1, MPI_INT, to, 52, MPI_COMM_WORLD, &rs[2]));
    for (int i = 0; i < 3; i++) sts[i].MPI_ERROR = -12345;
    int rc = MPI_Waitall(3, rs, sts);
    expect(rc, MPI_ERR_IN_STATUS, "Waitall with a truncated receive");
    int c0 = -1;
    MPI_OK(MPI_Error_class(sts[0].MPI_ERROR, &c0));
    CHECK(c0 == MPI_ERR_TRUNCATE, "status[0].MPI_ERROR class %d, expected MPI_ERR_TRUNCATE", c0);
    /* the other requests either completed (MPI_SUCCESS) or are still pending */
    for (int i = 1; i < 3; i++) {
        CHECK(sts[i].MPI_ERROR == MPI_SUCCESS || sts[i].MPI_ERROR == MPI_ERR_PENDING,
              "status[%d].MPI_ERROR %d for a good request", i, sts[i].MPI_ERROR);
        if (sts[i].MPI_ERROR == MPI_ERR_PENDING) MPI_OK(MPI_Wait(&rs[i], MPI_STATUS_IGNORE));
        else CHECK(rs[i] == MPI_REQUEST_NULL, "completed request %d not nulled", i);
    }
    CHECK(okr == 0, "good receive in the same Waitall got %d", okr);
    MPI_OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));

    /* the library still works after all that */
    int v = g_rank, got = -1;
    MPI_OK(MPI_Sendrecv(&v, 1, MPI_INT, to, 60, &got, 1, MPI_INT, from, 60, MPI_COMM_WORLD, &st));
    CHECK(got == from, "Sendrecv after errors got %d", got);
    MPI_OK(MPI_Allreduce(&v, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(got == g_size * (g_size - 1) / 2, "Allreduce after errors %d", got);

    /* errors on a dup use the dup's handler (inherited ERRORS_RETURN) */
    MPI_Comm d;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    MPI_OK(MPI_Comm_get_errhandler(d, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "dup did not inherit ERRORS_RETURN");
    expect(MPI_Send(buf, 1, MPI_INT, g_size, 0, d), MPI_ERR_RANK, "Send bad rank on dup");
    MPI_OK(MPI_Comm_free(&d));

    /* the returned code's string says what was wrong, not only the class */
    {
        int code = MPI_Send(buf, 1, MPI_INT, g_size + 5, 0, MPI_COMM_WORLD), cls = -1;
        char detail[MPI_MAX_ERROR_STRING], class_text[MPI_MAX_ERROR_STRING];
        int detail_length = 0, class_length = 0;
        MPI_OK(MPI_Error_class(code, &cls));
        CHECK(cls == MPI_ERR_RANK, "bad rank gave class %d", cls);
        MPI_OK(MPI_Error_string(code, detail, &detail_length));
        MPI_OK(MPI_Error_string(cls, class_text, &class_length));
        CHECK(strstr(detail, "MPI_Send") != NULL && detail_length > class_length,
              "Error_string of the returned code lost the detail: '%s' (class: '%s')", detail, class_text);
    }

    /* MPI_Request_get_status of MPI_REQUEST_NULL: the empty status, MPI_ERROR included */
    {
        MPI_Status empty;
        memset(&empty, 0x5a, sizeof empty);
        flag = 0;
        MPI_OK(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &empty));
        CHECK(flag && empty.MPI_SOURCE == MPI_ANY_SOURCE && empty.MPI_TAG == MPI_ANY_TAG &&
                  empty.MPI_ERROR == MPI_SUCCESS,
              "Request_get_status(REQUEST_NULL): flag %d source %d tag %d error %d", flag,
              empty.MPI_SOURCE, empty.MPI_TAG, empty.MPI_ERROR);
        int count = -1;
        MPI_OK(MPI_Get_count(&empty, MPI_INT, &count));
        CHECK(count == 0, "empty status count %d", count);
    }
    return test_finish();
}
