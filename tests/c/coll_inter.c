/* Collectives on inter-communicators (MPI-4.1 §6.2.2): data flows between
 * the two groups.  Two inter-communicators are built from WORLD: split by
 * rank parity, and split at rank k = max(1, size/3) (groups of different
 * sizes).  Every collective runs blocking and nonblocking, with each group
 * as the root group in turn; expected values are computed here from
 * (group, local rank, element).  Also: MPI_IN_PLACE is refused
 * (MPI_ERR_BUFFER), Scan is refused (MPI_ERR_COMM), and collective traffic
 * never matches a wildcard point-to-point receive on the same communicator.
 * usage: coll_inter  (2 or more ranks) */
#include "expect.h"

/* Group of this process (0 or 1), its rank/size, the remote size. */
static int grp, me, lsize, rsize;

/* MPICH 4.0.2's MPI_Ibcast on inter-communicators fails an assertion or
 * delivers nothing (mpir_localproc.c: r < comm_ptr->remote_size); there
 * the nonblocking pass broadcasts with MPI_Bcast. */
static int ibcast_broken;

static int val(int g, int r, int e) { return g * 10000 + r * 100 + e + 1; }

static void wait_or(int nb, MPI_Request *rq) {
    if (nb) MPI_OK(MPI_Wait(rq, MPI_STATUS_IGNORE));
}

/* Root arguments for a rooted collective whose root is local rank `root`
 * of group `root_group`. */
static int root_arg(int root_group, int root) {
    if (grp != root_group) return root;
    return me == root ? MPI_ROOT : MPI_PROC_NULL;
}

static void test_barrier(MPI_Comm inter, int nb) {
    MPI_Request rq;
    if (nb) MPI_OK(MPI_Ibarrier(inter, &rq)); else MPI_OK(MPI_Barrier(inter));
    wait_or(nb, &rq);
}

static void test_bcast(MPI_Comm inter, int nb, int root_group, int n) {
    int root = (root_group == grp ? lsize : rsize) - 1;
    int *buf = malloc(sizeof(int) * n);
    for (int e = 0; e < n; e++) buf[e] = grp == root_group ? val(grp, me, e) : -1;
    MPI_Request rq;
    nb = nb && !ibcast_broken;
    if (nb) MPI_OK(MPI_Ibcast(buf, n, MPI_INT, root_arg(root_group, root), inter, &rq));
    else MPI_OK(MPI_Bcast(buf, n, MPI_INT, root_arg(root_group, root), inter));
    wait_or(nb, &rq);
    for (int e = 0; e < n; e++) {
        int want = grp == root_group ? val(grp, me, e) : val(root_group, root, e);
        CHECK(buf[e] == want, "bcast n=%d [%d] = %d, want %d", n, e, buf[e], want);
    }
    free(buf);
}

static void test_reduce(MPI_Comm inter, int nb, int root_group) {
    enum { N = 4 };
    int root = 0, in[N], out[N];
    for (int e = 0; e < N; e++) { in[e] = val(grp, me, e); out[e] = -7; }
    MPI_Request rq;
    if (nb) MPI_OK(MPI_Ireduce(in, out, N, MPI_INT, MPI_SUM, root_arg(root_group, root), inter, &rq));
    else MPI_OK(MPI_Reduce(in, out, N, MPI_INT, MPI_SUM, root_arg(root_group, root), inter));
    wait_or(nb, &rq);
    for (int e = 0; e < N; e++) {
        int want = -7;
        if (grp == root_group && me == root) {
            want = 0;
            for (int i = 0; i < rsize; i++) want += val(1 - grp, i, e);
        }
        CHECK(out[e] == want, "reduce [%d] = %d, want %d", e, out[e], want);
    }
}

static void test_allreduce(MPI_Comm inter, int nb) {
    enum { N = 3 };
    int in[N], out[N];
    for (int e = 0; e < N; e++) in[e] = val(grp, me, e);
    MPI_Request rq;
    if (nb) MPI_OK(MPI_Iallreduce(in, out, N, MPI_INT, MPI_MAX, inter, &rq));
    else MPI_OK(MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, inter));
    wait_or(nb, &rq);
    for (int e = 0; e < N; e++) {
        int want = 0;
        for (int i = 0; i < rsize; i++)
            want = nb ? (val(1 - grp, i, e) > want ? val(1 - grp, i, e) : want) : want + val(1 - grp, i, e);
        CHECK(out[e] == want, "allreduce nb=%d [%d] = %d, want %d", nb, e, out[e], want);
    }
}

static void test_gather(MPI_Comm inter, int nb, int root_group, int v) {
    int root = 0, in[8], *out = malloc(sizeof(int) * 16 * rsize + 1);
    int *counts = malloc(sizeof(int) * rsize), *displs = malloc(sizeof(int) * rsize);
    int mine = v ? me + 1 : 2;
    for (int e = 0; e < mine; e++) in[e] = val(grp, me, e);
    for (int i = 0; i < 16 * rsize; i++) out[i] = -1;
    for (int i = 0; i < rsize; i++) { counts[i] = v ? i + 1 : 2; displs[i] = v ? 16 * i + 1 : 2 * i; }
    MPI_Request rq;
    int r = root_arg(root_group, root);
    if (v) {
        if (nb) MPI_OK(MPI_Igatherv(in, mine, MPI_INT, out, counts, displs, MPI_INT, r, inter, &rq));
        else MPI_OK(MPI_Gatherv(in, mine, MPI_INT, out, counts, displs, MPI_INT, r, inter));
    } else {
        if (nb) MPI_OK(MPI_Igather(in, 2, MPI_INT, out, 2, MPI_INT, r, inter, &rq));
        else MPI_OK(MPI_Gather(in, 2, MPI_INT, out, 2, MPI_INT, r, inter));
    }
    wait_or(nb, &rq);
    if (grp == root_group && me == root) {
        for (int i = 0; i < rsize; i++)
            for (int e = 0; e < counts[i]; e++)
                CHECK(out[displs[i] + e] == val(1 - grp, i, e), "gather v=%d from %d [%d] = %d", v,
                      i, e, out[displs[i] + e]);
        if (v) CHECK(out[0] == -1, "gatherv wrote a gap");
    } else {
        CHECK(out[0] == -1, "gather v=%d wrote a non-root's receive buffer", v);
    }
    free(out); free(counts); free(displs);
}

static void test_scatter(MPI_Comm inter, int nb, int root_group, int v) {
    int root = grp == root_group ? lsize - 1 : rsize - 1;
    int *in = malloc(sizeof(int) * 16 * rsize + 1), out[8];
    int *counts = malloc(sizeof(int) * rsize), *displs = malloc(sizeof(int) * rsize);
    int mine = v ? me + 1 : 2;
    for (int i = 0; i < rsize; i++) { counts[i] = v ? i + 1 : 2; displs[i] = v ? 16 * i + 1 : 2 * i; }
    for (int i = 0; i < 16 * rsize; i++) in[i] = -1;
    for (int i = 0; i < rsize; i++)
        for (int e = 0; e < counts[i]; e++) in[displs[i] + e] = val(grp, i, e); /* block for remote i */
    for (int e = 0; e < 8; e++) out[e] = -1;
    MPI_Request rq;
    int r = root_arg(root_group, root);
    if (v) {
        if (nb) MPI_OK(MPI_Iscatterv(in, counts, displs, MPI_INT, out, mine, MPI_INT, r, inter, &rq));
        else MPI_OK(MPI_Scatterv(in, counts, displs, MPI_INT, out, mine, MPI_INT, r, inter));
    } else {
        if (nb) MPI_OK(MPI_Iscatter(in, 2, MPI_INT, out, 2, MPI_INT, r, inter, &rq));
        else MPI_OK(MPI_Scatter(in, 2, MPI_INT, out, 2, MPI_INT, r, inter));
    }
    wait_or(nb, &rq);
    if (grp != root_group) {
        for (int e = 0; e < mine; e++)
            CHECK(out[e] == val(root_group, me, e), "scatter v=%d [%d] = %d", v, e, out[e]);
    } else {
        CHECK(out[0] == -1, "scatter v=%d wrote the root group's receive buffer", v);
    }
    free(in); free(counts); free(displs);
}

static void test_allgather(MPI_Comm inter, int nb, int v) {
    int in[8], *out = malloc(sizeof(int) * 16 * rsize);
    int *counts = malloc(sizeof(int) * rsize), *displs = malloc(sizeof(int) * rsize);
    int mine = v ? me + 1 : 2, at = 0;
    for (int e = 0; e < mine; e++) in[e] = val(grp, me, e);
    for (int i = 0; i < 16 * rsize; i++) out[i] = -1;
    for (int i = 0; i < rsize; i++) { counts[i] = v ? i + 1 : 2; displs[i] = at; at += counts[i] + v; }
    MPI_Request rq;
    if (v) {
        if (nb) MPI_OK(MPI_Iallgatherv(in, mine, MPI_INT, out, counts, displs, MPI_INT, inter, &rq));
        else MPI_OK(MPI_Allgatherv(in, mine, MPI_INT, out, counts, displs, MPI_INT, inter));
    } else {
        if (nb) MPI_OK(MPI_Iallgather(in, 2, MPI_INT, out, 2, MPI_INT, inter, &rq));
        else MPI_OK(MPI_Allgather(in, 2, MPI_INT, out, 2, MPI_INT, inter));
    }
    wait_or(nb, &rq);
    for (int i = 0; i < rsize; i++)
        for (int e = 0; e < counts[i]; e++)
            CHECK(out[displs[i] + e] == val(1 - grp, i, e), "allgather v=%d from %d [%d] = %d", v, i,
                  e, out[displs[i] + e]);
    free(out); free(counts); free(displs);
}

/* Element count from local rank s of one group to local rank j of the other. */
static int a2a_count(int s, int j) { return (s + 2 * j) % 3 + 1; }

static void test_alltoall(MPI_Comm inter, int nb, int v) {
    int *in = malloc(sizeof(int) * 4 * rsize), *out = malloc(sizeof(int) * 4 * rsize);
    int *scounts = malloc(sizeof(int) * rsize), *sdispls = malloc(sizeof(int) * rsize);
    int *rcounts = malloc(sizeof(int) * rsize), *rdispls = malloc(sizeof(int) * rsize);
    for (int j = 0; j < rsize; j++) {
        scounts[j] = v ? a2a_count(me, j) : 2;
        rcounts[j] = v ? a2a_count(j, me) : 2;
        sdispls[j] = v ? 4 * (rsize - 1 - j) : 2 * j;
        rdispls[j] = v ? 4 * j : 2 * j;
        for (int e = 0; e < scounts[j]; e++) in[sdispls[j] + e] = val(grp, me, 10 * j + e);
    }
    for (int i = 0; i < 4 * rsize; i++) out[i] = -1;
    MPI_Request rq;
    if (v) {
        if (nb) MPI_OK(MPI_Ialltoallv(in, scounts, sdispls, MPI_INT, out, rcounts, rdispls, MPI_INT, inter, &rq));
        else MPI_OK(MPI_Alltoallv(in, scounts, sdispls, MPI_INT, out, rcounts, rdispls, MPI_INT, inter));
    } else {
        if (nb) MPI_OK(MPI_Ialltoall(in, 2, MPI_INT, out, 2, MPI_INT, inter, &rq));
        else MPI_OK(MPI_Alltoall(in, 2, MPI_INT, out, 2, MPI_INT, inter));
    }
    wait_or(nb, &rq);
    for (int i = 0; i < rsize; i++)
        for (int e = 0; e < rcounts[i]; e++)
            CHECK(out[rdispls[i] + e] == val(1 - grp, i, 10 * me + e), "alltoall v=%d from %d [%d] = %d",
                  v, i, e, out[rdispls[i] + e]);
    free(in); free(out); free(scounts); free(sdispls); free(rcounts); free(rdispls);
}

/* recvcount = remote size, so each group's vector has lsize * rsize
 * elements, as many as the other group's: the other group's sum arrives
 * scattered, rsize elements per process. */
static void test_reduce_scatter_block(MPI_Comm inter, int nb) {
    int recvcount = rsize, total = lsize * rsize;
    int *in = malloc(sizeof(int) * total), *out = malloc(sizeof(int) * recvcount);
    for (int e = 0; e < total; e++) in[e] = val(grp, me, e);
    MPI_Request rq;
    if (nb) MPI_OK(MPI_Ireduce_scatter_block(in, out, recvcount, MPI_INT, MPI_SUM, inter, &rq));
    else MPI_OK(MPI_Reduce_scatter_block(in, out, recvcount, MPI_INT, MPI_SUM, inter));
    wait_or(nb, &rq);
    for (int e = 0; e < recvcount; e++) {
        int want = 0;
        for (int i = 0; i < rsize; i++) want += val(1 - grp, i, me * recvcount + e);
        CHECK(out[e] == want, "reduce_scatter_block [%d] = %d, want %d", e, out[e], want);
    }
    free(in); free(out);
}

/* Reduce_scatter with uneven counts (some zero) that add up to
 * lsize * rsize in both groups. */
static void test_reduce_scatter(MPI_Comm inter, int nb) {
    int total = lsize * rsize, sum = 0, first = 0;
    int *counts = malloc(sizeof(int) * lsize);
    for (int i = 0; i < lsize - 1; i++) { counts[i] = i % 2 ? rsize - 1 : rsize + 1; sum += counts[i]; }
    counts[lsize - 1] = total - sum;
    for (int i = 0; i < me; i++) first += counts[i];
    int *in = malloc(sizeof(int) * total), *out = malloc(sizeof(int) * (counts[me] + 1));
    for (int e = 0; e < total; e++) in[e] = val(grp, me, e);
    MPI_Request rq;
    if (nb) MPI_OK(MPI_Ireduce_scatter(in, out, counts, MPI_INT, MPI_SUM, inter, &rq));
    else MPI_OK(MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, inter));
    wait_or(nb, &rq);
    for (int e = 0; e < counts[me]; e++) {
        int want = 0;
        for (int i = 0; i < rsize; i++) want += val(1 - grp, i, first + e);
        CHECK(out[e] == want, "reduce_scatter [%d] = %d, want %d", e, out[e], want);
    }
    free(counts); free(in); free(out);
}

/* Several nonblocking collectives in flight at once keep their messages
 * apart, also across an MPI_Comm_dup of the inter-communicator. */
static void test_overlap(MPI_Comm inter) {
    MPI_Request rq[3];
    MPI_Comm dup;
    int in = val(grp, me, 0), sum = -1, *all = malloc(sizeof(int) * rsize), want = 0;
    MPI_OK(MPI_Iallreduce(&in, &sum, 1, MPI_INT, MPI_SUM, inter, &rq[0]));
    MPI_OK(MPI_Ibarrier(inter, &rq[1]));
    MPI_OK(MPI_Iallgather(&in, 1, MPI_INT, all, 1, MPI_INT, inter, &rq[2]));
    MPI_OK(MPI_Comm_dup(inter, &dup));
    MPI_OK(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < rsize; i++) {
        want += val(1 - grp, i, 0);
        CHECK(all[i] == val(1 - grp, i, 0), "overlapped allgather [%d] = %d", i, all[i]);
    }
    CHECK(sum == want, "overlapped allreduce = %d, want %d", sum, want);
    sum = -1;
    MPI_OK(MPI_Allreduce(&in, &sum, 1, MPI_INT, MPI_SUM, dup));
    CHECK(sum == want, "allreduce on the dup = %d, want %d", sum, want);
    MPI_OK(MPI_Comm_free(&dup));
    free(all);
}

/* A wildcard receive posted before collectives gets the point-to-point
 * message sent after them, not collective traffic. */
static void test_isolation(MPI_Comm inter) {
    MPI_Request rq;
    MPI_Status st;
    int got = -1, sent = 4242 + grp;
    if (me == 0) MPI_OK(MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, inter, &rq));
    test_allreduce(inter, 0);
    test_bcast(inter, 1, 0, 3);
    test_barrier(inter, 0);
    if (me == 0) {
        MPI_OK(MPI_Send(&sent, 1, MPI_INT, 0, 7, inter));
        MPI_OK(MPI_Wait(&rq, &st));
        CHECK(got == 4242 + (1 - grp) && st.MPI_TAG == 7 && st.MPI_SOURCE == 0,
              "wildcard receive got %d tag %d source %d", got, st.MPI_TAG, st.MPI_SOURCE);
    }
}

static void test_refusals(MPI_Comm inter) {
    int in[2] = {1, 2}, out[2];
    MPI_OK(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));
    EXPECT_CLASS(MPI_Allreduce(MPI_IN_PLACE, out, 2, MPI_INT, MPI_SUM, inter), MPI_ERR_BUFFER);
    EXPECT_CLASS(MPI_Scan(in, out, 2, MPI_INT, MPI_SUM, inter), MPI_ERR_COMM);
    MPI_OK(MPI_Comm_set_errhandler(inter, MPI_ERRORS_ARE_FATAL));
}

static void run_all(MPI_Comm inter) {
    MPI_OK(MPI_Comm_rank(inter, &me));
    MPI_OK(MPI_Comm_size(inter, &lsize));
    MPI_OK(MPI_Comm_remote_size(inter, &rsize));
    for (int nb = 0; nb < 2; nb++) {
        test_barrier(inter, nb);
        for (int root_group = 0; root_group < 2; root_group++) {
            test_bcast(inter, nb, root_group, 5);
            test_reduce(inter, nb, root_group);
            for (int v = 0; v < 2; v++) {
                test_gather(inter, nb, root_group, v);
                test_scatter(inter, nb, root_group, v);
            }
        }
        test_allreduce(inter, nb);
        for (int v = 0; v < 2; v++) {
            test_allgather(inter, nb, v);
            test_alltoall(inter, nb, v);
        }
        test_reduce_scatter_block(inter, nb);
        test_reduce_scatter(inter, nb);
    }
    /* Large enough for the broadcast's scatter + ring allgather path. */
    test_bcast(inter, 0, 1, 50000);
    test_bcast(inter, 1, 0, 50000);
    test_overlap(inter);
    test_isolation(inter);
    test_refusals(inter);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (g_size < 2) FAIL("needs 2 or more ranks");
    char library[MPI_MAX_LIBRARY_VERSION_STRING];
    int length;
    MPI_OK(MPI_Get_library_version(library, &length));
    ibcast_broken = strstr(library, "MPICH Version:") && strstr(library, "4.0.2");
    MPI_Comm local, inter;

    /* Groups by parity: leaders are world ranks 0 and 1. */
    grp = g_rank % 2;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, grp, g_rank, &local));
    MPI_OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, grp ? 0 : 1, 31, &inter));
    run_all(inter);
    MPI_OK(MPI_Comm_free(&inter));
    MPI_OK(MPI_Comm_free(&local));

    /* Groups [0, k) and [k, size): leaders are world ranks 0 and k. */
    int k = g_size / 3 > 1 ? g_size / 3 : 1;
    grp = g_rank < k ? 0 : 1;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, grp, g_rank, &local));
    MPI_OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, grp ? 0 : k, 32, &inter));
    run_all(inter);
    MPI_OK(MPI_Comm_free(&inter));
    MPI_OK(MPI_Comm_free(&local));
    return test_finish();
}
