/* Persistent collectives (MPI-4): every *_init, started several times with
 * new data in the same buffers (MPI_Start and MPI_Startall), completed by
 * Wait/Waitall/Test, freed; an active request cannot be started again;
 * MPI_IN_PLACE; the communicator's other traffic is not disturbed. */
#include "expect.h"
#include <stdlib.h>
#include <string.h>

#define N 4 /* elements per rank */

static int value(int round, int rank, int i) { return 1000 * round + 10 * rank + i; }

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    int p = g_size, me = g_rank;
    int *send = malloc(sizeof(int) * N * p), *recv = malloc(sizeof(int) * N * p);
    int *counts = malloc(sizeof(int) * p), *displs = malloc(sizeof(int) * p);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * p);
    int *bytes_displs = malloc(sizeof(int) * p);
    for (int r = 0; r < p; r++)
        counts[r] = N, displs[r] = N * r, types[r] = MPI_INT, bytes_displs[r] = (int)sizeof(int) * N * r;
    int sum_in = 0, sum_out = 0, allsum_out = 0, scan_out = 0, exscan_out = -1, bcast_value = 0, inplace = 0;

    enum { BARRIER, BCAST, REDUCE, ALLREDUCE, INPLACE, SCAN, EXSCAN, GATHER, GATHERV, SCATTER,
           SCATTERV, ALLGATHER, ALLGATHERV, ALLTOALL, ALLTOALLV, ALLTOALLW, RSBLOCK, RS, KINDS };
    MPI_Request r[KINDS];
    int *ag = malloc(sizeof(int) * N * p), *agv = malloc(sizeof(int) * N * p);
    int *a2a = malloc(sizeof(int) * N * p), *a2av = malloc(sizeof(int) * N * p);
    int *a2aw = malloc(sizeof(int) * N * p), *g = malloc(sizeof(int) * N * p);
    int *gv = malloc(sizeof(int) * N * p), sc[N], scv[N], rsb[N], rs[N];
    MPI_Comm c = MPI_COMM_WORLD;
    MPI_Info i0 = MPI_INFO_NULL;
    MPI_OK(MPI_Barrier_init(c, i0, &r[BARRIER]));
    MPI_OK(MPI_Bcast_init(&bcast_value, 1, MPI_INT, p - 1, c, i0, &r[BCAST]));
    MPI_OK(MPI_Reduce_init(&sum_in, &sum_out, 1, MPI_INT, MPI_SUM, 0, c, i0, &r[REDUCE]));
    MPI_OK(MPI_Allreduce_init(&sum_in, &allsum_out, 1, MPI_INT, MPI_SUM, c, i0, &r[ALLREDUCE]));
    MPI_OK(MPI_Allreduce_init(MPI_IN_PLACE, &inplace, 1, MPI_INT, MPI_MAX, c, i0, &r[INPLACE]));
    MPI_OK(MPI_Scan_init(&sum_in, &scan_out, 1, MPI_INT, MPI_SUM, c, i0, &r[SCAN]));
    MPI_OK(MPI_Exscan_init(&sum_in, &exscan_out, 1, MPI_INT, MPI_SUM, c, i0, &r[EXSCAN]));
    MPI_OK(MPI_Gather_init(send, N, MPI_INT, g, N, MPI_INT, 0, c, i0, &r[GATHER]));
    MPI_OK(MPI_Gatherv_init(send, N, MPI_INT, gv, counts, displs, MPI_INT, 0, c, i0, &r[GATHERV]));
    MPI_OK(MPI_Scatter_init(send, N, MPI_INT, sc, N, MPI_INT, 0, c, i0, &r[SCATTER]));
    MPI_OK(MPI_Scatterv_init(send, counts, displs, MPI_INT, scv, N, MPI_INT, 0, c, i0, &r[SCATTERV]));
    MPI_OK(MPI_Allgather_init(send, N, MPI_INT, ag, N, MPI_INT, c, i0, &r[ALLGATHER]));
    /* With "freed_arrays": the arrays are scribbled over and freed after
     * init (mpi4py frees its own); resmpi keeps what it was given. */
    int scribble = argc > 1 && !strcmp(argv[1], "freed_arrays");
    int *scratch_counts = malloc(sizeof(int) * p), *scratch_displs = malloc(sizeof(int) * p);
    for (int q = 0; q < p; q++) scratch_counts[q] = N, scratch_displs[q] = N * q;
    MPI_OK(MPI_Allgatherv_init(send, N, MPI_INT, agv, scratch_counts, scratch_displs, MPI_INT, c, i0,
                               &r[ALLGATHERV]));
    if (scribble) {
        for (int q = 0; q < p; q++) scratch_counts[q] = -1, scratch_displs[q] = -1;
        free(scratch_counts), free(scratch_displs);
    }
    MPI_OK(MPI_Alltoall_init(send, N, MPI_INT, a2a, N, MPI_INT, c, i0, &r[ALLTOALL]));
    MPI_OK(MPI_Alltoallv_init(send, counts, displs, MPI_INT, a2av, counts, displs, MPI_INT, c, i0,
                              &r[ALLTOALLV]));
    MPI_OK(MPI_Alltoallw_init(send, counts, bytes_displs, types, a2aw, counts, bytes_displs, types,
                              c, i0, &r[ALLTOALLW]));
    MPI_OK(MPI_Reduce_scatter_block_init(send, rsb, N, MPI_INT, MPI_SUM, c, i0, &r[RSBLOCK]));
    MPI_OK(MPI_Reduce_scatter_init(send, rs, counts, MPI_INT, MPI_SUM, c, i0, &r[RS]));

    for (int round = 0; round < 3; round++) {
        /* New data in the same buffers before each start. */
        for (int i = 0; i < N * p; i++) send[i] = value(round, me, i);
        sum_in = round + me;
        inplace = round * 100 + me;
        bcast_value = me == p - 1 ? round + 77 : -1;
        if (round == 1) {
            MPI_OK(MPI_Startall(KINDS, r));
            MPI_OK(MPI_Waitall(KINDS, r, MPI_STATUSES_IGNORE));
        } else {
            for (int k = 0; k < KINDS; k++) MPI_OK(MPI_Start(&r[k]));
            /* Point-to-point on the same communicator meanwhile. */
            int token = me, got = -1;
            MPI_OK(MPI_Sendrecv(&token, 1, MPI_INT, (me + 1) % p, 9, &got, 1, MPI_INT,
                                (me + p - 1) % p, 9, c, MPI_STATUS_IGNORE));
            CHECK(got == (me + p - 1) % p, "ring token %d", got);
            for (int k = 0; k < KINDS; k++) {
                int done = 0;
                while (!done) MPI_OK(MPI_Test(&r[k], &done, MPI_STATUS_IGNORE));
                CHECK(r[k] != MPI_REQUEST_NULL, "completing a persistent request freed it");
            }
        }
        int total = 0, prefix = 0;
        for (int q = 0; q < p; q++) total += round + q;
        for (int q = 0; q <= me; q++) prefix += round + q;
        CHECK(bcast_value == round + 77, "round %d: bcast %d", round, bcast_value);
        if (me == 0) CHECK(sum_out == total, "round %d: reduce %d", round, sum_out);
        CHECK(allsum_out == total, "round %d: allreduce %d", round, allsum_out);
        CHECK(scan_out == prefix, "round %d: scan %d, expected %d", round, scan_out, prefix);
        if (me > 0) CHECK(exscan_out == prefix - (round + me), "round %d: exscan %d", round, exscan_out);
        CHECK(inplace == round * 100 + p - 1, "round %d: in-place max %d", round, inplace);
        for (int q = 0; q < p; q++)
            for (int i = 0; i < N; i++) {
                int mine_of_q = value(round, q, i);       /* q's first block */
                int for_me = value(round, q, N * me + i); /* q's block addressed to me */
                CHECK(ag[N * q + i] == mine_of_q && agv[N * q + i] == mine_of_q,
                      "round %d: allgather(v) block %d", round, q);
                CHECK(a2a[N * q + i] == for_me && a2av[N * q + i] == for_me && a2aw[N * q + i] == for_me,
                      "round %d: alltoall(v/w) block %d", round, q);
                if (me == 0)
                    CHECK(g[N * q + i] == mine_of_q && gv[N * q + i] == mine_of_q,
                          "round %d: gather(v) block %d", round, q);
            }
        for (int i = 0; i < N; i++) {
            int sum = 0;
            for (int q = 0; q < p; q++) sum += value(round, q, N * me + i);
            CHECK(sc[i] == value(round, 0, N * me + i) && scv[i] == sc[i], "round %d: scatter(v)", round);
            CHECK(rsb[i] == sum && rs[i] == sum, "round %d: reduce_scatter(_block) %d %d, want %d", round,
                  rsb[i], rs[i], sum);
        }
    }

    /* Starting an active request is an error; the request stays usable. */
    errors_return();
    MPI_OK(MPI_Start(&r[BARRIER]));
    EXPECT_CLASS(MPI_Start(&r[BARRIER]), MPI_ERR_REQUEST);
    MPI_OK(MPI_Wait(&r[BARRIER], MPI_STATUS_IGNORE));
    for (int k = 0; k < KINDS; k++) {
        MPI_OK(MPI_Request_free(&r[k]));
        CHECK(r[k] == MPI_REQUEST_NULL, "Request_free left the handle");
    }
    free(send), free(recv), free(counts), free(displs), free(types), free(bytes_displs);
    free(ag), free(agv), free(a2a), free(a2av), free(a2aw), free(g), free(gv);
    if (!scribble) free(scratch_counts), free(scratch_displs);
    return test_finish();
}
