/* Nonblocking collectives: Ibarrier does not complete before the last rank
 * enters and completes through MPI_Test alone; every I-collective started
 * at once, overlapped with point-to-point traffic on the same communicator
 * and completed with Waitany/Testall/Waitall in different orders on
 * different ranks; several outstanding collectives of the same kind;
 * nonblocking collectives on a duplicate interleaved with blocking ones.
 * usage: coll_nb [ibarrier|every|same|dup ...] (default: all) */
#include "common.h"

static int val(int rank, int i, int seed) { return rank * 10007 + i * 3 + seed; }

static void test_ibarrier(void) {
    MPI_Request request;
    int flag = -1;
    if (g_rank == g_size - 1) sleep_ms(300);
    double start = MPI_Wtime();
    MPI_OK(MPI_Ibarrier(MPI_COMM_WORLD, &request));
    if (g_rank != g_size - 1 && g_size > 1) {
        MPI_OK(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag, "Ibarrier completed before the last rank entered it");
    }
    /* "Compute" while testing: the barrier must complete through MPI_Test alone. */
    long spins = 0;
    do {
        MPI_OK(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
        spins++;
        CHECK(MPI_Wtime() - start < 20, "Ibarrier did not complete in 20 s of MPI_Test");
    } while (!flag);
    CHECK(request == MPI_REQUEST_NULL, "completed request not set to MPI_REQUEST_NULL");
    /* Ibarrier + Wait after a compute phase. */
    MPI_OK(MPI_Ibarrier(MPI_COMM_WORLD, &request));
    volatile double x = 0;
    for (int i = 0; i < 1000000; i++) x += i * 0.5;
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
}

#define N_REQ 18
static void test_every(void) {
    int n = 3000; /* 12 KB per block: eager; the bcast below is rendezvous */
    int size = g_size, rank = g_rank;
    MPI_Request req[N_REQ];
    int nbig = 6000;
    int *bc = malloc(nbig * sizeof(int));
    for (int i = 0; i < nbig; i++) bc[i] = rank == 0 ? val(0, i, 1) : -1;
    int *ar_in = malloc(n * sizeof(int)), *ar_out = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) ar_in[i] = val(rank, i, 2);
    int *g_in = malloc(n * sizeof(int)), *g_out = malloc((size_t)n * size * sizeof(int));
    for (int i = 0; i < n; i++) g_in[i] = val(rank, i, 3);
    int *s_in = malloc((size_t)n * size * sizeof(int)), *s_out = malloc(n * sizeof(int));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < n; i++) s_in[(size_t)r * n + i] = val(r, i, 4);
    int *ag_out = malloc((size_t)n * size * sizeof(int));
    int *a_in = malloc((size_t)n * size * sizeof(int)), *a_out = malloc((size_t)n * size * sizeof(int));
    for (int d = 0; d < size; d++)
        for (int i = 0; i < n; i++) a_in[(size_t)d * n + i] = val(rank * 100 + d, i, 5);
    int *rd_out = malloc(n * sizeof(int));
    int *sc_out = malloc(n * sizeof(int)), *ex_out = malloc(n * sizeof(int));
    int *rsb_out = malloc(n * sizeof(int));
    int *rs_out = malloc((n + 1) * sizeof(int)), *rs_counts = malloc(size * sizeof(int));
    for (int r = 0; r < size; r++) rs_counts[r] = n / size + (r == 0) - (r == size - 1);
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    for (int r = 0; r < size; r++) {
        counts[r] = 1 + r;
        displs[r] = r * (size + 1);
    }
    int vlen = size * (size + 1);
    int *gv_in = malloc((rank + 1) * sizeof(int)), *gv_out = malloc(vlen * sizeof(int));
    for (int i = 0; i <= rank; i++) gv_in[i] = val(rank, i, 6);
    int *sv_in = malloc(vlen * sizeof(int)), *sv_out = malloc((rank + 1) * sizeof(int));
    for (int r = 0; r < size; r++)
        for (int i = 0; i <= r; i++) sv_in[displs[r] + i] = val(r, i, 7);
    int *agv_out = malloc(vlen * sizeof(int));
    /* Alltoallv / w: one int to every peer at index peer*2. */
    int *one = malloc(size * sizeof(int)), *two = malloc(size * sizeof(int)), *twob = malloc(size * sizeof(int));
    MPI_Datatype *types = malloc(size * sizeof(MPI_Datatype));
    for (int p = 0; p < size; p++) {
        one[p] = 1;
        two[p] = 2 * p;
        twob[p] = 2 * p * (int)sizeof(int);
        types[p] = MPI_INT;
    }
    int *av_in = malloc(2 * size * sizeof(int)), *av_out = malloc(2 * size * sizeof(int));
    int *aw_out = malloc(2 * size * sizeof(int));
    for (int p = 0; p < size; p++) av_in[2 * p] = val(rank * 100 + p, 0, 8);

    int root = size - 1;
    MPI_OK(MPI_Ibcast(bc, nbig, MPI_INT, 0, MPI_COMM_WORLD, &req[0]));
    MPI_OK(MPI_Iallreduce(ar_in, ar_out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[1]));
    MPI_OK(MPI_Igather(g_in, n, MPI_INT, g_out, n, MPI_INT, root, MPI_COMM_WORLD, &req[2]));
    MPI_OK(MPI_Iscatter(s_in, n, MPI_INT, s_out, n, MPI_INT, 0, MPI_COMM_WORLD, &req[3]));
    MPI_OK(MPI_Iallgather(g_in, n, MPI_INT, ag_out, n, MPI_INT, MPI_COMM_WORLD, &req[4]));
    MPI_OK(MPI_Ialltoall(a_in, n, MPI_INT, a_out, n, MPI_INT, MPI_COMM_WORLD, &req[5]));
    MPI_OK(MPI_Ireduce(ar_in, rd_out, n, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD, &req[6]));
    MPI_OK(MPI_Iscan(ar_in, sc_out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[7]));
    MPI_OK(MPI_Iexscan(ar_in, ex_out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[8]));
    int *rsb_in = malloc((size_t)n * size * sizeof(int));
    for (int i = 0; i < n * size; i++) rsb_in[i] = val(rank, i, 9);
    MPI_OK(MPI_Ireduce_scatter_block(rsb_in, rsb_out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[9]));
    MPI_OK(MPI_Ireduce_scatter(rsb_in, rs_out, rs_counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[10]));
    MPI_OK(MPI_Igatherv(gv_in, rank + 1, MPI_INT, gv_out, counts, displs, MPI_INT, 0, MPI_COMM_WORLD, &req[11]));
    MPI_OK(MPI_Iscatterv(sv_in, counts, displs, MPI_INT, sv_out, rank + 1, MPI_INT, root, MPI_COMM_WORLD, &req[12]));
    MPI_OK(MPI_Iallgatherv(gv_in, rank + 1, MPI_INT, agv_out, counts, displs, MPI_INT, MPI_COMM_WORLD, &req[13]));
    MPI_OK(MPI_Ialltoallv(av_in, one, two, MPI_INT, av_out, one, two, MPI_INT, MPI_COMM_WORLD, &req[14]));
    MPI_OK(MPI_Ialltoallw(av_in, one, twob, types, aw_out, one, twob, types, MPI_COMM_WORLD, &req[15]));
    MPI_OK(MPI_Ibarrier(MPI_COMM_WORLD, &req[16]));
    /* Point-to-point on the same communicator meanwhile (tag 0, like nothing internal may match). */
    int token_out = val(rank, 0, 99), token_in = -1;
    MPI_OK(MPI_Irecv(&token_in, 1, MPI_INT, (rank + size - 1) % size, 0, MPI_COMM_WORLD, &req[17]));
    MPI_OK(MPI_Send(&token_out, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD));
    /* Complete in a rank-dependent way. */
    if (rank % 3 == 0) {
        MPI_OK(MPI_Waitall(N_REQ, req, MPI_STATUSES_IGNORE));
    } else if (rank % 3 == 1) {
        for (int k = 0; k < N_REQ; k++) {
            int index;
            MPI_OK(MPI_Waitany(N_REQ, req, &index, MPI_STATUS_IGNORE));
            CHECK(index != MPI_UNDEFINED, "Waitany found nothing active");
        }
    } else {
        int flag = 0;
        double start = MPI_Wtime();
        while (!flag) {
            MPI_OK(MPI_Testall(N_REQ, req, &flag, MPI_STATUSES_IGNORE));
            CHECK(MPI_Wtime() - start < 30, "Testall never completed");
        }
    }
    for (int k = 0; k < N_REQ; k++) CHECK(req[k] == MPI_REQUEST_NULL, "request %d not released", k);
    CHECK(token_in == val((rank + size - 1) % size, 0, 99), "point-to-point token corrupted: %d", token_in);
    for (int i = 0; i < nbig; i++) CHECK(bc[i] == val(0, i, 1), "Ibcast elem %d", i);
    for (int i = 0; i < n; i++) {
        int sum = 0, max = val(0, i, 2), prefix = 0;
        for (int r = 0; r < size; r++) {
            sum += val(r, i, 2);
            if (val(r, i, 2) > max) max = val(r, i, 2);
            if (r < rank) prefix += val(r, i, 2);
        }
        CHECK(ar_out[i] == sum, "Iallreduce elem %d", i);
        if (rank == root) CHECK(rd_out[i] == max, "Ireduce elem %d", i);
        CHECK(sc_out[i] == prefix + val(rank, i, 2), "Iscan elem %d", i);
        if (rank > 0) CHECK(ex_out[i] == prefix, "Iexscan elem %d", i);
        CHECK(s_out[i] == val(rank, i, 4), "Iscatter elem %d", i);
        int rsb = 0;
        for (int r = 0; r < size; r++) rsb += val(r, rank * n + i, 9);
        CHECK(rsb_out[i] == rsb, "Ireduce_scatter_block elem %d", i);
    }
    int first = 0;
    for (int r = 0; r < rank; r++) first += rs_counts[r];
    for (int i = 0; i < rs_counts[rank]; i++) {
        int want = 0;
        for (int r = 0; r < size; r++) want += val(r, first + i, 9);
        CHECK(rs_out[i] == want, "Ireduce_scatter elem %d", i);
    }
    for (int r = 0; r < size; r++)
        for (int i = 0; i < n; i++) {
            if (rank == root) CHECK(g_out[(size_t)r * n + i] == val(r, i, 3), "Igather from %d elem %d", r, i);
            CHECK(ag_out[(size_t)r * n + i] == val(r, i, 3), "Iallgather from %d elem %d", r, i);
            CHECK(a_out[(size_t)r * n + i] == val(r * 100 + rank, i, 5), "Ialltoall from %d elem %d", r, i);
        }
    for (int r = 0; r < size; r++) {
        for (int i = 0; i <= r; i++) {
            if (rank == 0) CHECK(gv_out[displs[r] + i] == val(r, i, 6), "Igatherv from %d elem %d", r, i);
            CHECK(agv_out[displs[r] + i] == val(r, i, 6), "Iallgatherv from %d elem %d", r, i);
        }
        CHECK(av_out[2 * r] == val(r * 100 + rank, 0, 8), "Ialltoallv from %d", r);
        CHECK(aw_out[2 * r] == val(r * 100 + rank, 0, 8), "Ialltoallw from %d", r);
    }
    for (int i = 0; i <= rank; i++) CHECK(sv_out[i] == val(rank, i, 7), "Iscatterv elem %d", i);
    free(bc); free(ar_in); free(ar_out); free(g_in); free(g_out); free(s_in); free(s_out); free(ag_out);
    free(a_in); free(a_out); free(rd_out); free(sc_out); free(ex_out); free(rsb_in); free(rsb_out);
    free(rs_out); free(rs_counts); free(counts); free(displs); free(gv_in); free(gv_out); free(sv_in);
    free(sv_out); free(agv_out); free(one); free(two); free(twob); free(types); free(av_in); free(av_out);
    free(aw_out);
}

/* Several collectives of the same kind outstanding; ranks wait in opposite orders. */
static void test_same(void) {
    enum { K = 6, N = 5000 };
    MPI_Request req[K];
    int *in[K], *out[K];
    for (int k = 0; k < K; k++) {
        in[k] = malloc(N * sizeof(int));
        out[k] = malloc(N * sizeof(int));
        for (int i = 0; i < N; i++) in[k][i] = val(g_rank, i, k * 1000);
        MPI_OK(MPI_Iallreduce(in[k], out[k], N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[k]));
    }
    for (int j = 0; j < K; j++) {
        int k = g_rank % 2 ? K - 1 - j : j;
        MPI_OK(MPI_Wait(&req[k], MPI_STATUS_IGNORE));
    }
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) {
            int sum = 0;
            for (int r = 0; r < g_size; r++) sum += val(r, i, k * 1000);
            CHECK(out[k][i] == sum, "Iallreduce #%d elem %d", k, i);
        }
        free(in[k]);
        free(out[k]);
    }
    /* Ibcasts from different roots outstanding together. */
    int b[4][64];
    MPI_Request breq[4];
    for (int k = 0; k < 4; k++) {
        int root = k % g_size;
        for (int i = 0; i < 64; i++) b[k][i] = g_rank == root ? val(root, i, k) : -1;
        MPI_OK(MPI_Ibcast(b[k], 64, MPI_INT, root, MPI_COMM_WORLD, &breq[k]));
    }
    MPI_OK(MPI_Waitall(4, breq, MPI_STATUSES_IGNORE));
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 64; i++) CHECK(b[k][i] == val(k % g_size, i, k), "Ibcast #%d elem %d", k, i);
}

/* A nonblocking collective on a duplicate while blocking ones run on WORLD. */
static void test_dup(void) {
    MPI_Comm dup;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int n = 20000;
    int *b = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) b[i] = g_rank == 0 ? val(0, i, 5) : -1;
    MPI_Request request;
    MPI_OK(MPI_Ibcast(b, n, MPI_INT, 0, dup, &request));
    int one = 1, total = 0;
    MPI_OK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(total == g_size, "Allreduce during Ibcast: %d", total);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) CHECK(b[i] == val(0, i, 5), "Ibcast on dup elem %d", i);
    free(b);
    MPI_OK(MPI_Comm_free(&dup));
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (selected(argc, argv, "ibarrier")) test_ibarrier();
    if (selected(argc, argv, "every")) test_every();
    if (selected(argc, argv, "same")) test_same();
    if (selected(argc, argv, "dup")) test_dup();
    return test_finish();
}
