/* MPI_Isendrecv and MPI_Isendrecv_replace (MPI-4): ring exchanges completed
 * by Wait, Test and Waitall, messages above the eager limit in both
 * directions at once, derived datatypes on either side (gaps untouched,
 * partial receives counted by Get_elements), MPI_PROC_NULL, truncation and
 * argument errors. */
#include "expect.h"

/* The status of a completed MPI_Isendrecv is the receive's (source, tag,
 * count, truncation), as for MPI_Sendrecv. MPICH 4.0.2 leaves it empty and
 * reports no truncation, so those checks run only in subtest "status". */
static int g_status;
#define STATUS_CHECK(cond, ...)                                                \
    do {                                                                       \
        if (g_status) CHECK(cond, __VA_ARGS__);                                \
    } while (0)

#define LONG_COUNT (1 << 18) /* 1 MiB of ints: rendezvous on every path */

static void ring_contiguous(void) {
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    int out[4], in[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++) out[i] = g_rank * 100 + i;
    MPI_Request request;
    MPI_Status status;
    MPI_OK(MPI_Isendrecv(out, 4, MPI_INT, right, 7, in, 4, MPI_INT, left, 7,
                         MPI_COMM_WORLD, &request));
    CHECK(request != MPI_REQUEST_NULL, "no request");
    MPI_OK(MPI_Wait(&request, &status));
    CHECK(request == MPI_REQUEST_NULL, "request not freed by Wait");
    for (int i = 0; i < 4; i++) CHECK(in[i] == left * 100 + i, "in[%d]=%d", i, in[i]);
    STATUS_CHECK(status.MPI_SOURCE == left && status.MPI_TAG == 7, "status %d/%d",
          status.MPI_SOURCE, status.MPI_TAG);
    int count = -1;
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    STATUS_CHECK(count == 4, "count %d", count);

    /* Wildcards, completed by polling MPI_Test. */
    memset(in, 0xff, sizeof in);
    MPI_OK(MPI_Isendrecv(out, 3, MPI_INT, right, 8 + g_rank, in, 4, MPI_INT, MPI_ANY_SOURCE,
                         MPI_ANY_TAG, MPI_COMM_WORLD, &request));
    int flag = 0;
    while (!flag) MPI_OK(MPI_Test(&request, &flag, &status));
    CHECK(request == MPI_REQUEST_NULL, "request not freed by Test");
    STATUS_CHECK(status.MPI_SOURCE == left && status.MPI_TAG == 8 + left, "status %d/%d",
          status.MPI_SOURCE, status.MPI_TAG);
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    STATUS_CHECK(count == 3, "count %d", count);
    CHECK(in[3] == -1, "element past the message written");
}

static void replace_contiguous(void) {
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    double data[5];
    for (int i = 0; i < 5; i++) data[i] = g_rank + i / 10.0;
    MPI_Request request;
    MPI_Status status;
    MPI_OK(MPI_Isendrecv_replace(data, 5, MPI_DOUBLE, right, 3, left, 3, MPI_COMM_WORLD,
                                 &request));
    /* The outgoing data was copied at the call: the buffer may now change. */
    MPI_OK(MPI_Wait(&request, &status));
    for (int i = 0; i < 5; i++)
        CHECK(data[i] == left + i / 10.0, "data[%d]=%g", i, data[i]);
    STATUS_CHECK(status.MPI_SOURCE == left && status.MPI_TAG == 3, "status");
}

static void long_messages_both_ways(void) {
    /* Pairs (0,1), (2,3)...: both sides send a long message at once. */
    int peer = g_rank ^ 1;
    if (peer >= g_size) peer = g_rank;
    int *out = malloc(LONG_COUNT * sizeof(int)), *in = malloc(LONG_COUNT * sizeof(int));
    for (int i = 0; i < LONG_COUNT; i++) out[i] = g_rank * 7 + i;
    MPI_Request requests[2];
    MPI_Status statuses[2];
    MPI_OK(MPI_Isendrecv(out, LONG_COUNT, MPI_INT, peer, 11, in, LONG_COUNT, MPI_INT, peer, 11,
                         MPI_COMM_WORLD, &requests[0]));
    int *replaced = malloc(LONG_COUNT * sizeof(int));
    for (int i = 0; i < LONG_COUNT; i++) replaced[i] = -g_rank - i;
    MPI_OK(MPI_Isendrecv_replace(replaced, LONG_COUNT, MPI_INT, peer, 12, peer, 12,
                                 MPI_COMM_WORLD, &requests[1]));
    MPI_OK(MPI_Waitall(2, requests, statuses));
    for (int i = 0; i < LONG_COUNT; i++) {
        CHECK(in[i] == peer * 7 + i, "in[%d]=%d", i, in[i]);
        CHECK(replaced[i] == -peer - i, "replaced[%d]=%d", i, replaced[i]);
    }
    STATUS_CHECK(statuses[0].MPI_SOURCE == peer && statuses[1].MPI_TAG == 12, "statuses");
    free(out);
    free(in);
    free(replaced);
}

static void derived_types(void) {
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Datatype every_other;
    MPI_OK(MPI_Type_vector(4, 1, 2, MPI_INT, &every_other));
    MPI_OK(MPI_Type_commit(&every_other));

    /* Contiguous out, strided in: gaps keep their values. */
    int out[4], in[8];
    for (int i = 0; i < 4; i++) out[i] = g_rank * 10 + i;
    for (int i = 0; i < 8; i++) in[i] = -1;
    MPI_Request request;
    MPI_Status status;
    MPI_OK(MPI_Isendrecv(out, 4, MPI_INT, right, 5, in, 1, every_other, left, 5,
                         MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, &status));
    for (int i = 0; i < 8; i++) {
        int expected = i % 2 ? -1 : left * 10 + i / 2;
        CHECK(in[i] == expected, "in[%d]=%d, expected %d", i, in[i], expected);
    }

    /* Partial receive into a strided type: three of four elements. */
    for (int i = 0; i < 8; i++) in[i] = -1;
    MPI_OK(MPI_Isendrecv(out, 3, MPI_INT, right, 6, in, 1, every_other, left, 6,
                         MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, &status));
    int elements = -1, count = -1;
    MPI_OK(MPI_Get_elements(&status, every_other, &elements));
    MPI_OK(MPI_Get_count(&status, every_other, &count));
    STATUS_CHECK(elements == 3 && count == MPI_UNDEFINED, "elements %d count %d", elements, count);
    for (int i = 0; i < 8; i++) {
        int expected = (i % 2 || i == 6) ? -1 : left * 10 + i / 2;
        CHECK(in[i] == expected, "partial in[%d]=%d, expected %d", i, in[i], expected);
    }

    MPI_OK(MPI_Type_free(&every_other));
}

/* MPICH 4.0.2 sends the wrong elements here (subtest of its own). */
static void replace_derived(void) {
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Datatype every_other;
    MPI_OK(MPI_Type_vector(4, 1, 2, MPI_INT, &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    MPI_Request request;
    MPI_Status status;
    /* Replace through a strided type: only the elements move. */
    int both[8];
    for (int i = 0; i < 8; i++) both[i] = i % 2 ? 1000 + i : g_rank * 10 + i;
    MPI_OK(MPI_Isendrecv_replace(both, 1, every_other, right, 9, left, 9, MPI_COMM_WORLD,
                                 &request));
    MPI_OK(MPI_Wait(&request, &status));
    for (int i = 0; i < 8; i++) {
        int expected = i % 2 ? 1000 + i : left * 10 + i;
        CHECK(both[i] == expected, "both[%d]=%d, expected %d", i, both[i], expected);
    }
    MPI_OK(MPI_Type_free(&every_other));
}

static void proc_null(void) {
    int out = 5, in = -1;
    MPI_Request request;
    MPI_Status status;
    MPI_OK(MPI_Isendrecv(&out, 1, MPI_INT, MPI_PROC_NULL, 0, &in, 1, MPI_INT, MPI_PROC_NULL, 0,
                         MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, &status));
    CHECK(in == -1, "receive from MPI_PROC_NULL wrote %d", in);
    int count = -1;
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    STATUS_CHECK(count == 0, "count %d", count);
    STATUS_CHECK(status.MPI_SOURCE == MPI_PROC_NULL, "source %d", status.MPI_SOURCE);

    MPI_OK(MPI_Isendrecv_replace(&out, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_PROC_NULL, 0,
                                 MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, &status));
    CHECK(out == 5, "replace from MPI_PROC_NULL changed the buffer to %d", out);

    /* Send to a real peer, receive from nobody (and the reverse). */
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_OK(MPI_Isendrecv(&out, 1, MPI_INT, right, 4, &in, 1, MPI_INT, MPI_PROC_NULL, 4,
                         MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Isendrecv(&out, 1, MPI_INT, MPI_PROC_NULL, 4, &in, 1, MPI_INT, left, 4,
                         MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, &status));
    CHECK(in == 5, "in %d", in);
    STATUS_CHECK(status.MPI_SOURCE == left, "source %d", status.MPI_SOURCE);
}

static void errors(void) {
    errors_return();
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    int out[2] = {1, 2}, in[2];
    MPI_Request request = MPI_REQUEST_NULL;
    EXPECT_CLASS(MPI_Isendrecv(out, 1, MPI_INT, g_size, 0, in, 1, MPI_INT, left, 0,
                               MPI_COMM_WORLD, &request), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Isendrecv(out, 1, MPI_INT, right, 0, in, 1, MPI_INT, g_size + 3, 0,
                               MPI_COMM_WORLD, &request), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Isendrecv(out, 1, MPI_INT, right, -5, in, 1, MPI_INT, left, 0,
                               MPI_COMM_WORLD, &request), MPI_ERR_TAG);
    EXPECT_CLASS(MPI_Isendrecv(out, -1, MPI_INT, right, 0, in, 1, MPI_INT, left, 0,
                               MPI_COMM_WORLD, &request), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Isendrecv(out, 1, MPI_INT, right, 0, in, 1, MPI_DATATYPE_NULL, left, 0,
                               MPI_COMM_WORLD, &request), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Isendrecv(out, 1, MPI_INT, right, 0, in, 1, MPI_INT, left, 0,
                               MPI_COMM_NULL, &request), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Isendrecv_replace(out, 1, MPI_INT, g_size, 0, left, 0, MPI_COMM_WORLD,
                                       &request), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Isendrecv_replace(out, -2, MPI_INT, right, 0, left, 0, MPI_COMM_WORLD,
                                       &request), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Isendrecv_replace(out, 1, MPI_INT, right, 0, left, 0, MPI_COMM_NULL,
                                       &request), MPI_ERR_COMM);
    /* Nothing was left behind by the failed calls: the next exchange is clean. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* A message longer than the receive buffer: MPI_ERR_TRUNCATE at completion. */
    if (!g_status) return;
    MPI_Status status;
    MPI_OK(MPI_Isendrecv(out, 2, MPI_INT, right, 13, in, 1, MPI_INT, left, 13, MPI_COMM_WORLD,
                         &request));
    int rc = MPI_Wait(&request, &status), cls = -1;
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_TRUNCATE, "truncation gave class %d", cls);
    CHECK(in[0] == 1, "truncated receive kept %d", in[0]);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    g_status = selected(argc, argv, "status");
    if (g_status) argc = 1; /* every subtest, with the status checks */
    if (selected(argc, argv, "ring")) ring_contiguous();
    if (selected(argc, argv, "replace")) replace_contiguous();
    if (selected(argc, argv, "long")) long_messages_both_ways();
    if (selected(argc, argv, "derived")) derived_types();
    if (selected(argc, argv, "replace_derived")) replace_derived();
    if (selected(argc, argv, "procnull")) proc_null();
    if (selected(argc, argv, "errors")) errors();
    return test_finish();
}
