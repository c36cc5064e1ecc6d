/* Generalized requests: MPI_Grequest_start/complete with Test, Wait,
 * Waitall (mixed with point-to-point), Request_get_status, Cancel (the
 * cancel function sees whether the request completed), Request_free before
 * completion (the free function runs once, the query never), and the
 * query function's error returned by Wait. With "stuck": waiting for a
 * generalized request nobody can complete is an error, not a hang
 * (resmpi only: MPICH waits forever). */
#include "expect.h"
#include <string.h>

struct state {
    int queries, frees, cancels, last_complete_flag, query_error;
};

static int query(void *extra, MPI_Status *status) {
    struct state *s = extra;
    s->queries++;
    status->MPI_SOURCE = 3;
    status->MPI_TAG = 7;
    MPI_Status_set_cancelled(status, 0);
    MPI_Status_set_elements(status, MPI_INT, 5);
    return s->query_error;
}

static int release(void *extra) {
    ((struct state *)extra)->frees++;
    return MPI_SUCCESS;
}

static int cancel(void *extra, int complete) {
    struct state *s = extra;
    s->cancels++;
    s->last_complete_flag = complete;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    struct state s;
    memset(&s, 0, sizeof s);
    MPI_Request request;
    MPI_Status status;
    int flag = -1, count = -1;

    MPI_OK(MPI_Grequest_start(query, release, cancel, &s, &request));
    MPI_OK(MPI_Test(&request, &flag, &status));
    CHECK(!flag && request != MPI_REQUEST_NULL, "an incomplete generalized request tested complete");
    MPI_OK(MPI_Cancel(&request));
    CHECK(s.cancels == 1 && s.last_complete_flag == 0, "cancel ran %d times, complete %d", s.cancels,
          s.last_complete_flag);
    MPI_OK(MPI_Grequest_complete(request));
    MPI_OK(MPI_Cancel(&request));
    CHECK(s.cancels == 2 && s.last_complete_flag == 1, "cancel after completion: complete %d",
          s.last_complete_flag);
    MPI_OK(MPI_Request_get_status(request, &flag, &status));
    CHECK(flag && s.queries == 1 && s.frees == 0, "get_status: flag %d queries %d frees %d", flag,
          s.queries, s.frees);
    MPI_OK(MPI_Wait(&request, &status));
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    CHECK(request == MPI_REQUEST_NULL && status.MPI_SOURCE == 3 && status.MPI_TAG == 7 && count == 5,
          "wait: source %d tag %d count %d", status.MPI_SOURCE, status.MPI_TAG, count);
    CHECK(s.queries == 2 && s.frees == 1, "after wait: queries %d frees %d", s.queries, s.frees);

    /* Freed before it completes (completed through a copy of the handle):
     * the free function runs once, the query function never. */
    memset(&s, 0, sizeof s);
    MPI_Request kept;
    MPI_OK(MPI_Grequest_start(query, release, cancel, &s, &kept));
    MPI_Request copy = kept;
    MPI_OK(MPI_Request_free(&kept));
    CHECK(kept == MPI_REQUEST_NULL, "Request_free left the handle");
    MPI_OK(MPI_Grequest_complete(copy));
    CHECK(s.frees == 1 && s.queries == 0, "freed early: frees %d queries %d", s.frees, s.queries);

    /* Waitall over two generalized requests and a self message. */
    struct state a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    MPI_Request all[4];
    int out = 11, in = 0;
    MPI_Status statuses[4];
    MPI_OK(MPI_Grequest_start(query, release, cancel, &a, &all[0]));
    MPI_OK(MPI_Irecv(&in, 1, MPI_INT, g_rank, 5, MPI_COMM_WORLD, &all[1]));
    MPI_OK(MPI_Grequest_start(query, release, cancel, &b, &all[2]));
    MPI_OK(MPI_Isend(&out, 1, MPI_INT, g_rank, 5, MPI_COMM_WORLD, &all[3]));
    MPI_OK(MPI_Grequest_complete(all[2]));
    MPI_OK(MPI_Grequest_complete(all[0]));
    MPI_OK(MPI_Waitall(4, all, statuses));
    CHECK(in == 11 && a.frees == 1 && b.frees == 1 && statuses[2].MPI_TAG == 7,
          "waitall: in %d frees %d %d tag %d", in, a.frees, b.frees, statuses[2].MPI_TAG);

    /* The query function's error is the wait's. */
    memset(&s, 0, sizeof s);
    s.query_error = MPI_ERR_BUFFER;
    MPI_OK(MPI_Grequest_start(query, release, cancel, &s, &request));
    MPI_OK(MPI_Grequest_complete(request));
    EXPECT_CLASS(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_ERR_BUFFER);
    CHECK(s.frees == 1, "free after a failing query: %d", s.frees);

    if (argc > 1 && !strcmp(argv[1], "stuck")) {
        memset(&s, 0, sizeof s);
        MPI_OK(MPI_Grequest_start(query, release, cancel, &s, &request));
        EXPECT_CLASS(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
        MPI_OK(MPI_Grequest_complete(request));
        MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    }
    return test_finish();
}
