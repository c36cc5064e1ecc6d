/* Collectives and persistent requests with non-contiguous datatypes.
 *
 * Every buffer is an array of int cells filled with GAP; a datatype's data
 * cells are given by hand (map[] within one extent), so the expected image
 * of every receive buffer is computed independently of MPI: data cells
 * hold the values sent, every other cell must still be GAP. Types: vector,
 * indexed, struct (non-zero lb), resized (negative lb, padded extent),
 * subarray; each collective also runs with mixed type signatures (MPI_INT
 * x n on one side, the derived type on the other: only the packed bytes
 * match).
 * usage: dtype_coll [blocking|wait|test|inplace|reduce|persistent|names|
 *                    userop|userop_refused ...] (default: all but userop_refused) */
#include "common.h"
#include "expect.h"

#define GAP (-7777)
#define NTYPES 6

typedef struct {
    const char *name;
    MPI_Datatype type;
    int n;      /* ints of data per element */
    int extent; /* in ints */
    int map[8]; /* cells of the data of element 0, in type-map order */
} dt;

static dt T[NTYPES];

static void make_types(void) {
    T[0] = (dt){"MPI_INT", MPI_INT, 1, 1, {0}};

    MPI_Datatype vector;
    MPI_OK(MPI_Type_vector(3, 1, 2, MPI_INT, &vector));
    T[1] = (dt){"vector", vector, 3, 5, {0, 2, 4}};

    MPI_Datatype indexed;
    int lengths[2] = {2, 1}, displs[2] = {0, 4};
    MPI_OK(MPI_Type_indexed(2, lengths, displs, MPI_INT, &indexed));
    T[2] = (dt){"indexed", indexed, 3, 5, {0, 1, 4}};

    /* ints at byte 4, 12 and 16: lb 4, ub 20, extent 16 bytes. */
    MPI_Datatype strct;
    int slengths[2] = {1, 2};
    MPI_Aint sdispls[2] = {4, 12};
    MPI_Datatype stypes[2] = {MPI_INT, MPI_INT};
    MPI_OK(MPI_Type_create_struct(2, slengths, sdispls, stypes, &strct));
    T[3] = (dt){"struct", strct, 3, 4, {1, 3, 4}};

    /* two ints, lb -4 bytes, extent 16 bytes: data at cells 0, 1 of every 4. */
    MPI_Datatype pair, resized;
    MPI_OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    MPI_OK(MPI_Type_create_resized(pair, -4, 16, &resized));
    MPI_OK(MPI_Type_free(&pair));
    T[4] = (dt){"resized", resized, 2, 4, {0, 1}};

    /* 2x2 block at (1, 1) of a 3x4 C array. */
    MPI_Datatype sub;
    int sizes[2] = {3, 4}, subsizes[2] = {2, 2}, starts[2] = {1, 1};
    MPI_OK(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &sub));
    T[5] = (dt){"subarray", sub, 4, 12, {5, 6, 9, 10}};

    for (int i = 1; i < NTYPES; i++) MPI_OK(MPI_Type_commit(&T[i].type));
}

static void free_types(void) {
    for (int i = 1; i < NTYPES; i++) MPI_OK(MPI_Type_free(&T[i].type));
}

/* Cells that `count` elements of `d` may touch (with room to spare). */
static size_t cells(const dt *d, int count) { return (size_t)(count + 1) * d->extent + 8; }

static int *gapbuf(size_t n) {
    int *b = malloc(n * sizeof(int) + 1);
    for (size_t i = 0; i < n; i++) b[i] = GAP;
    return b;
}

/* Write packed stream `s` as `count` elements of `d` at `buf`. */
static void put(const dt *d, int *buf, int count, const int *s) {
    for (int k = 0; k < count; k++)
        for (int j = 0; j < d->n; j++) buf[(size_t)k * d->extent + d->map[j]] = s[(size_t)k * d->n + j];
}

static int V(int seed, int p) { return seed * 100000 + p + 1; }

static int *stream(int length, int seed) {
    int *s = malloc((size_t)length * sizeof(int) + 1);
    for (int p = 0; p < length; p++) s[p] = V(seed, p);
    return s;
}

static void expect_image(const int *got, const int *want, size_t n, const char *what, const dt *rd,
                         const dt *sd) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            FAIL("%s (send %s, receive %s): cell %zu is %d, expected %d%s", what, sd->name, rd->name, i,
                 got[i], want[i], want[i] == GAP ? " (a gap: must stay untouched)" : "");
}

/* ----- completion modes ---------------------------------------------------- */

static int g_mode; /* 0 blocking, 1 nonblocking + Wait, 2 nonblocking + Test loop */

static void complete(MPI_Request *request) {
    if (g_mode == 1) {
        MPI_OK(MPI_Wait(request, MPI_STATUS_IGNORE));
        return;
    }
    int flag = 0;
    double start = MPI_Wtime();
    while (!flag) {
        MPI_OK(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
        CHECK(MPI_Wtime() - start < 30, "nonblocking collective did not complete in 30 s of MPI_Test");
    }
    CHECK(*request == MPI_REQUEST_NULL, "completed request not set to MPI_REQUEST_NULL");
}

#define COLL(blocking, ...)                                                    \
    do {                                                                       \
        if (g_mode == 0) {                                                     \
            MPI_OK(blocking);                                                  \
        } else {                                                               \
            MPI_Request rq_;                                                   \
            MPI_OK(__VA_ARGS__);                                               \
            complete(&rq_);                                                    \
        }                                                                      \
    } while (0)

/* ----- data movement: (sd, sc) on the sending side, (rd, rc) receiving ---- */

static void run_bcast(const dt *sd, int sc, const dt *rd, int rc) {
    int root = g_size > 1 ? 1 : 0, L = sc * sd->n;
    int *s = stream(L, 7);
    const dt *d = g_rank == root ? sd : rd;
    int c = g_rank == root ? sc : rc;
    size_t n = cells(d, c);
    int *buf = gapbuf(n), *want = gapbuf(n);
    put(d, want, c, s);
    if (g_rank == root) put(d, buf, c, s);
    COLL(MPI_Bcast(buf, c, d->type, root, MPI_COMM_WORLD),
         MPI_Ibcast(buf, c, d->type, root, MPI_COMM_WORLD, &rq_));
    expect_image(buf, want, n, "Bcast", rd, sd);
    free(s), free(buf), free(want);
}

static void run_gather(const dt *sd, int sc, const dt *rd, int rc) {
    int root = g_size - 1, L = sc * sd->n;
    int *mine = stream(L, 10 + g_rank);
    size_t sn = cells(sd, sc), rn = cells(rd, g_size * rc);
    int *sbuf = gapbuf(sn), *sref = gapbuf(sn), *rbuf = gapbuf(rn), *want = gapbuf(rn);
    put(sd, sbuf, sc, mine), put(sd, sref, sc, mine);
    int *all = malloc((size_t)g_size * L * sizeof(int) + 1);
    for (int r = 0; r < g_size; r++)
        for (int p = 0; p < L; p++) all[(size_t)r * L + p] = V(10 + r, p);
    put(rd, want, g_size * rc, all);
    COLL(MPI_Gather(sbuf, sc, sd->type, rbuf, rc, rd->type, root, MPI_COMM_WORLD),
         MPI_Igather(sbuf, sc, sd->type, rbuf, rc, rd->type, root, MPI_COMM_WORLD, &rq_));
    expect_image(sbuf, sref, sn, "Gather send buffer", rd, sd);
    if (g_rank == root) expect_image(rbuf, want, rn, "Gather", rd, sd);

    /* Allgather: the same data everywhere. */
    for (size_t i = 0; i < rn; i++) rbuf[i] = GAP;
    COLL(MPI_Allgather(sbuf, sc, sd->type, rbuf, rc, rd->type, MPI_COMM_WORLD),
         MPI_Iallgather(sbuf, sc, sd->type, rbuf, rc, rd->type, MPI_COMM_WORLD, &rq_));
    expect_image(rbuf, want, rn, "Allgather", rd, sd);
    free(mine), free(sbuf), free(sref), free(rbuf), free(want), free(all);
}

/* v forms: rank r contributes (r % 2 + 1) blocks, placed one element apart. */
static void run_gatherv(const dt *sd, int sc, const dt *rd, int rc) {
    int root = 0, L = sc * sd->n, mult = g_rank % 2 + 1;
    int *mine = stream(mult * L, 30 + g_rank);
    size_t sn = cells(sd, mult * sc), rn = cells(rd, g_size * (2 * rc + 1));
    int *sbuf = gapbuf(sn), *rbuf = gapbuf(rn), *want = gapbuf(rn);
    put(sd, sbuf, mult * sc, mine);
    int *counts = malloc(g_size * sizeof(int)), *displs = malloc(g_size * sizeof(int));
    for (int r = 0; r < g_size; r++) {
        counts[r] = (r % 2 + 1) * rc;
        displs[r] = r * (2 * rc + 1);
        int *theirs = stream((r % 2 + 1) * L, 30 + r);
        put(rd, want + (size_t)displs[r] * rd->extent, counts[r], theirs);
        free(theirs);
    }
    COLL(MPI_Gatherv(sbuf, mult * sc, sd->type, rbuf, counts, displs, rd->type, root, MPI_COMM_WORLD),
         MPI_Igatherv(sbuf, mult * sc, sd->type, rbuf, counts, displs, rd->type, root, MPI_COMM_WORLD,
                      &rq_));
    if (g_rank == root) expect_image(rbuf, want, rn, "Gatherv", rd, sd);
    for (size_t i = 0; i < rn; i++) rbuf[i] = GAP;
    COLL(MPI_Allgatherv(sbuf, mult * sc, sd->type, rbuf, counts, displs, rd->type, MPI_COMM_WORLD),
         MPI_Iallgatherv(sbuf, mult * sc, sd->type, rbuf, counts, displs, rd->type, MPI_COMM_WORLD,
                         &rq_));
    expect_image(rbuf, want, rn, "Allgatherv", rd, sd);
    free(mine), free(sbuf), free(rbuf), free(want), free(counts), free(displs);
}

static void run_scatter(const dt *sd, int sc, const dt *rd, int rc) {
    int root = g_size / 2, L = sc * sd->n;
    /* Scatter: block r of the root's buffer goes to rank r. */
    size_t sn = cells(sd, g_size * sc), rn = cells(rd, 2 * rc);
    int *sbuf = gapbuf(sn), *sref = gapbuf(sn), *rbuf = gapbuf(rn), *want = gapbuf(rn);
    int *all = malloc((size_t)g_size * L * sizeof(int) + 1);
    for (int r = 0; r < g_size; r++)
        for (int p = 0; p < L; p++) all[(size_t)r * L + p] = V(50 + r, p);
    put(sd, sbuf, g_size * sc, all), put(sd, sref, g_size * sc, all);
    int *mine = stream(L, 50 + g_rank);
    put(rd, want, rc, mine);
    COLL(MPI_Scatter(sbuf, sc, sd->type, rbuf, rc, rd->type, root, MPI_COMM_WORLD),
         MPI_Iscatter(sbuf, sc, sd->type, rbuf, rc, rd->type, root, MPI_COMM_WORLD, &rq_));
    expect_image(rbuf, want, rn, "Scatter", rd, sd);
    expect_image(sbuf, sref, sn, "Scatter send buffer", rd, sd);
    free(sbuf), free(sref), free(all), free(mine), free(rbuf), free(want);

    /* Scatterv: rank r gets (r % 2 + 1) blocks from displacement r * (2 sc + 1). */
    sn = cells(sd, g_size * (2 * sc + 1));
    sbuf = gapbuf(sn);
    int *counts = malloc(g_size * sizeof(int)), *displs = malloc(g_size * sizeof(int));
    for (int r = 0; r < g_size; r++) {
        counts[r] = (r % 2 + 1) * sc;
        displs[r] = r * (2 * sc + 1);
        int *theirs = stream((r % 2 + 1) * L, 60 + r);
        put(sd, sbuf + (size_t)displs[r] * sd->extent, counts[r], theirs);
        free(theirs);
    }
    int mult = g_rank % 2 + 1;
    rbuf = gapbuf(rn), want = gapbuf(rn);
    mine = stream(mult * L, 60 + g_rank);
    put(rd, want, mult * rc, mine);
    COLL(MPI_Scatterv(sbuf, counts, displs, sd->type, rbuf, mult * rc, rd->type, root, MPI_COMM_WORLD),
         MPI_Iscatterv(sbuf, counts, displs, sd->type, rbuf, mult * rc, rd->type, root, MPI_COMM_WORLD,
                       &rq_));
    expect_image(rbuf, want, rn, "Scatterv", rd, sd);
    free(sbuf), free(counts), free(displs), free(mine), free(rbuf), free(want);
}

/* Stream from rank `from` to rank `to` in the all-to-all tests. */
static int a2a_seed(int from, int to) { return 100 + from * 10 + to; }

static void run_alltoall(const dt *sd, int sc, const dt *rd, int rc) {
    int L = sc * sd->n;
    size_t sn = cells(sd, g_size * sc), rn = cells(rd, g_size * rc);
    int *sbuf = gapbuf(sn), *rbuf = gapbuf(rn), *want = gapbuf(rn);
    int *out = malloc((size_t)g_size * L * sizeof(int) + 1), *in = malloc((size_t)g_size * L * sizeof(int) + 1);
    for (int r = 0; r < g_size; r++)
        for (int p = 0; p < L; p++) {
            out[(size_t)r * L + p] = V(a2a_seed(g_rank, r), p);
            in[(size_t)r * L + p] = V(a2a_seed(r, g_rank), p);
        }
    put(sd, sbuf, g_size * sc, out);
    put(rd, want, g_size * rc, in);
    COLL(MPI_Alltoall(sbuf, sc, sd->type, rbuf, rc, rd->type, MPI_COMM_WORLD),
         MPI_Ialltoall(sbuf, sc, sd->type, rbuf, rc, rd->type, MPI_COMM_WORLD, &rq_));
    expect_image(rbuf, want, rn, "Alltoall", rd, sd);
    free(sbuf), free(rbuf), free(want), free(out), free(in);

    /* Alltoallv: ((from + to) % 2 + 1) blocks, one element apart. */
    int *scounts = malloc(g_size * sizeof(int)), *sdispls = malloc(g_size * sizeof(int));
    int *rcounts = malloc(g_size * sizeof(int)), *rdispls = malloc(g_size * sizeof(int));
    sn = cells(sd, g_size * (2 * sc + 1)), rn = cells(rd, g_size * (2 * rc + 1));
    sbuf = gapbuf(sn), rbuf = gapbuf(rn), want = gapbuf(rn);
    for (int r = 0; r < g_size; r++) {
        int mult = (g_rank + r) % 2 + 1;
        scounts[r] = mult * sc, sdispls[r] = r * (2 * sc + 1);
        rcounts[r] = mult * rc, rdispls[r] = r * (2 * rc + 1);
        int *o = stream(mult * L, a2a_seed(g_rank, r)), *i = stream(mult * L, a2a_seed(r, g_rank));
        put(sd, sbuf + (size_t)sdispls[r] * sd->extent, scounts[r], o);
        put(rd, want + (size_t)rdispls[r] * rd->extent, rcounts[r], i);
        free(o), free(i);
    }
    COLL(MPI_Alltoallv(sbuf, scounts, sdispls, sd->type, rbuf, rcounts, rdispls, rd->type, MPI_COMM_WORLD),
         MPI_Ialltoallv(sbuf, scounts, sdispls, sd->type, rbuf, rcounts, rdispls, rd->type, MPI_COMM_WORLD,
                        &rq_));
    expect_image(rbuf, want, rn, "Alltoallv", rd, sd);
    free(sbuf), free(rbuf), free(want);

    /* Alltoallw: the derived type for even peers, MPI_INT x n for odd ones;
     * byte displacements, one block of cells() per peer. */
    MPI_Datatype *stypes = malloc(g_size * sizeof(MPI_Datatype)), *rtypes = malloc(g_size * sizeof(MPI_Datatype));
    size_t sblock = cells(sd, sc) > (size_t)L ? cells(sd, sc) : (size_t)L;
    size_t rblock = cells(rd, rc) > (size_t)L ? cells(rd, rc) : (size_t)L;
    sn = g_size * sblock, rn = g_size * rblock;
    sbuf = gapbuf(sn), rbuf = gapbuf(rn), want = gapbuf(rn);
    for (int r = 0; r < g_size; r++) {
        const dt *st = r % 2 == 0 ? sd : &T[0], *rt = g_rank % 2 == 0 ? rd : &T[0];
        stypes[r] = st->type, scounts[r] = st == sd ? sc : L, sdispls[r] = (int)(r * sblock * sizeof(int));
        rtypes[r] = rt->type, rcounts[r] = rt == rd ? rc : L, rdispls[r] = (int)(r * rblock * sizeof(int));
        int *o = stream(L, a2a_seed(g_rank, r)), *i = stream(L, a2a_seed(r, g_rank));
        put(st, sbuf + r * sblock, scounts[r], o);
        put(rt, want + r * rblock, rcounts[r], i);
        free(o), free(i);
    }
    COLL(MPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, MPI_COMM_WORLD),
         MPI_Ialltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, MPI_COMM_WORLD,
                        &rq_));
    expect_image(rbuf, want, rn, "Alltoallw", rd, sd);
    free(sbuf), free(rbuf), free(want), free(stypes), free(rtypes);
    free(scounts), free(sdispls), free(rcounts), free(rdispls);
}

/* Every derived type, then with MPI_INT on the receiving and on the sending side. */
static void test_movement(void) {
    for (int i = 1; i < NTYPES; i++) {
        const dt *d = &T[i];
        for (int count = 1; count <= 3; count += 2) {
            int ints = count * d->n;
            const dt *sds[3] = {d, &T[0], d}, *rds[3] = {d, d, &T[0]};
            int scs[3] = {count, ints, count}, rcs[3] = {count, count, ints};
            for (int mix = 0; mix < 3; mix++) {
                run_bcast(sds[mix], scs[mix], rds[mix], rcs[mix]);
                run_gather(sds[mix], scs[mix], rds[mix], rcs[mix]);
                run_gatherv(sds[mix], scs[mix], rds[mix], rcs[mix]);
                run_scatter(sds[mix], scs[mix], rds[mix], rcs[mix]);
                run_alltoall(sds[mix], scs[mix], rds[mix], rcs[mix]);
            }
        }
    }
}

/* ----- reductions: MPI_SUM on types made of MPI_INT only --------------------- */

static void test_reduce(void) {
    for (int i = 1; i < NTYPES; i++) {
        const dt *d = &T[i];
        int count = 3, L = count * d->n;
        size_t n = cells(d, count);
        int *mine = stream(L, g_rank + 1), *sum = calloc(L, sizeof(int)), *prefix = calloc(L, sizeof(int));
        for (int r = 0; r < g_size; r++)
            for (int p = 0; p < L; p++) {
                sum[p] += V(r + 1, p);
                if (r <= g_rank) prefix[p] += V(r + 1, p);
            }
        int *sbuf = gapbuf(n), *rbuf = gapbuf(n), *want = gapbuf(n), *sref = gapbuf(n);
        put(d, sbuf, count, mine), put(d, sref, count, mine);
        put(d, want, count, sum);

        int root = g_size - 1;
        COLL(MPI_Reduce(sbuf, rbuf, count, d->type, MPI_SUM, root, MPI_COMM_WORLD),
             MPI_Ireduce(sbuf, rbuf, count, d->type, MPI_SUM, root, MPI_COMM_WORLD, &rq_));
        if (g_rank == root) expect_image(rbuf, want, n, "Reduce", d, d);
        expect_image(sbuf, sref, n, "Reduce send buffer", d, d);

        for (size_t c = 0; c < n; c++) rbuf[c] = GAP;
        COLL(MPI_Allreduce(sbuf, rbuf, count, d->type, MPI_SUM, MPI_COMM_WORLD),
             MPI_Iallreduce(sbuf, rbuf, count, d->type, MPI_SUM, MPI_COMM_WORLD, &rq_));
        expect_image(rbuf, want, n, "Allreduce", d, d);

        /* In place: the input is in the receive buffer. */
        for (size_t c = 0; c < n; c++) rbuf[c] = GAP;
        put(d, rbuf, count, mine);
        COLL(MPI_Allreduce(MPI_IN_PLACE, rbuf, count, d->type, MPI_SUM, MPI_COMM_WORLD),
             MPI_Iallreduce(MPI_IN_PLACE, rbuf, count, d->type, MPI_SUM, MPI_COMM_WORLD, &rq_));
        expect_image(rbuf, want, n, "Allreduce(MPI_IN_PLACE)", d, d);

        for (size_t c = 0; c < n; c++) rbuf[c] = want[c] = GAP;
        put(d, want, count, prefix);
        COLL(MPI_Scan(sbuf, rbuf, count, d->type, MPI_SUM, MPI_COMM_WORLD),
             MPI_Iscan(sbuf, rbuf, count, d->type, MPI_SUM, MPI_COMM_WORLD, &rq_));
        expect_image(rbuf, want, n, "Scan", d, d);

        /* Reduce_scatter_block: `count` elements per rank. */
        int total = g_size * count, TL = total * d->n;
        size_t tn = cells(d, total);
        int *tbuf = gapbuf(tn), *tin = stream(TL, g_rank + 1);
        put(d, tbuf, total, tin);
        int *block_sum = calloc(L, sizeof(int));
        for (int r = 0; r < g_size; r++)
            for (int p = 0; p < L; p++) block_sum[p] += V(r + 1, g_rank * L + p);
        for (size_t c = 0; c < n; c++) rbuf[c] = want[c] = GAP;
        put(d, want, count, block_sum);
        COLL(MPI_Reduce_scatter_block(tbuf, rbuf, count, d->type, MPI_SUM, MPI_COMM_WORLD),
             MPI_Ireduce_scatter_block(tbuf, rbuf, count, d->type, MPI_SUM, MPI_COMM_WORLD, &rq_));
        expect_image(rbuf, want, n, "Reduce_scatter_block", d, d);

        /* Reduce_local: inout keeps its gaps. */
        for (size_t c = 0; c < n; c++) rbuf[c] = want[c] = GAP;
        put(d, rbuf, count, mine);
        int *twice = malloc(L * sizeof(int));
        for (int p = 0; p < L; p++) twice[p] = 2 * mine[p];
        put(d, want, count, twice);
        MPI_OK(MPI_Reduce_local(sbuf, rbuf, count, d->type, MPI_SUM));
        expect_image(rbuf, want, n, "Reduce_local", d, d);

        free(mine), free(sum), free(prefix), free(sbuf), free(rbuf), free(want), free(sref);
        free(tbuf), free(tin), free(block_sum), free(twice);
    }
}

/* ----- MPI_IN_PLACE on data movement ------------------------------------------ */

static void test_inplace(void) {
    for (int i = 1; i < NTYPES; i++) {
        const dt *d = &T[i];
        int count = 2, L = count * d->n;
        size_t n = cells(d, g_size * count);
        int *all = malloc((size_t)g_size * L * sizeof(int) + 1);
        for (int r = 0; r < g_size; r++)
            for (int p = 0; p < L; p++) all[(size_t)r * L + p] = V(200 + r, p);
        int *want = gapbuf(n), *buf = gapbuf(n), *mine = all + (size_t)g_rank * L;
        put(d, want, g_size * count, all);

        /* Gather at the root in place: its own block is already there. */
        int root = 0;
        if (g_rank == root) {
            put(d, buf + (size_t)root * count * d->extent, count, mine);
            MPI_OK(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, d->type, root, MPI_COMM_WORLD));
            expect_image(buf, want, n, "Gather(MPI_IN_PLACE)", d, d);
        } else {
            int *sbuf = gapbuf(cells(d, count));
            put(d, sbuf, count, mine);
            MPI_OK(MPI_Gather(sbuf, count, d->type, NULL, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
            free(sbuf);
        }

        /* Allgather in place. */
        for (size_t c = 0; c < n; c++) buf[c] = GAP;
        put(d, buf + (size_t)g_rank * count * d->extent, count, mine);
        MPI_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, d->type, MPI_COMM_WORLD));
        expect_image(buf, want, n, "Allgather(MPI_IN_PLACE)", d, d);

        /* Alltoall in place: block r goes to rank r, block r comes from it. */
        int *out = malloc((size_t)g_size * L * sizeof(int) + 1), *in = malloc((size_t)g_size * L * sizeof(int) + 1);
        for (int r = 0; r < g_size; r++)
            for (int p = 0; p < L; p++) {
                out[(size_t)r * L + p] = V(a2a_seed(g_rank, r), p);
                in[(size_t)r * L + p] = V(a2a_seed(r, g_rank), p);
            }
        for (size_t c = 0; c < n; c++) buf[c] = want[c] = GAP;
        put(d, buf, g_size * count, out);
        put(d, want, g_size * count, in);
        MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, d->type, MPI_COMM_WORLD));
        expect_image(buf, want, n, "Alltoall(MPI_IN_PLACE)", d, d);
        free(all), free(want), free(buf), free(out), free(in);
    }
}

/* ----- persistent requests ------------------------------------------------------ */

static void test_persistent(void) {
    const dt *vec = &T[1];
    int count = 4, L = count * vec->n;
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    size_t n = cells(vec, count);
    int *sbuf = gapbuf(n), *rbuf = gapbuf(n), *ibuf = gapbuf(L), *want = gapbuf(n), *iwant = gapbuf(L);
    int bsize = 4 * (L * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
    char *attached = malloc(bsize);
    MPI_OK(MPI_Buffer_attach(attached, bsize));

    MPI_Request sends[4], recv_vec, recv_int;
    MPI_Status statuses[2];
    MPI_OK(MPI_Send_init(sbuf, count, vec->type, right, 0, MPI_COMM_WORLD, &sends[0]));
    MPI_OK(MPI_Ssend_init(sbuf, count, vec->type, right, 0, MPI_COMM_WORLD, &sends[1]));
    MPI_OK(MPI_Bsend_init(sbuf, count, vec->type, right, 0, MPI_COMM_WORLD, &sends[2]));
    MPI_OK(MPI_Rsend_init(sbuf, count, vec->type, right, 0, MPI_COMM_WORLD, &sends[3]));
    MPI_OK(MPI_Recv_init(rbuf, count, vec->type, left, 0, MPI_COMM_WORLD, &recv_vec));
    /* Mixed signature: the same bytes into plain ints. */
    MPI_OK(MPI_Recv_init(ibuf, L, MPI_INT, left, 0, MPI_COMM_WORLD, &recv_int));

    for (int round = 0; round < 8; round++) {
        int which = round % 4, into_ints = round % 3 == 2;
        int *out = stream(L, 300 + g_rank * 10 + round), *in = stream(L, 300 + left * 10 + round);
        /* New data at every start: the packing happens at MPI_Start. */
        for (size_t c = 0; c < n; c++) sbuf[c] = rbuf[c] = want[c] = GAP;
        for (int c = 0; c < L; c++) ibuf[c] = iwant[c] = GAP;
        put(vec, sbuf, count, out);
        MPI_Request *recv = into_ints ? &recv_int : &recv_vec;
        MPI_OK(MPI_Start(recv));
        if (which == 3) MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* Rsend needs the receive posted */
        MPI_Request pair[2] = {sends[which], *recv};
        MPI_OK(MPI_Start(&pair[0]));
        if (round % 2) {
            MPI_OK(MPI_Waitall(2, pair, statuses));
        } else {
            int flag = 0;
            while (!flag) MPI_OK(MPI_Testall(2, pair, &flag, statuses));
        }
        if (into_ints) {
            put(&T[0], iwant, L, in);
            expect_image(ibuf, iwant, L, "persistent receive into MPI_INT", &T[0], vec);
        } else {
            put(vec, want, count, in);
            expect_image(rbuf, want, n, "persistent receive", vec, vec);
        }
        free(out), free(in);
    }
    /* Startall of a receive and a send together. */
    for (size_t c = 0; c < n; c++) sbuf[c] = rbuf[c] = want[c] = GAP;
    int *out = stream(L, 400 + g_rank), *in = stream(L, 400 + left);
    put(vec, sbuf, count, out);
    MPI_Request both[2] = {recv_vec, sends[0]};
    MPI_OK(MPI_Startall(2, both));
    MPI_OK(MPI_Waitall(2, both, statuses));
    put(vec, want, count, in);
    expect_image(rbuf, want, n, "persistent receive after Startall", vec, vec);
    recv_vec = both[0], sends[0] = both[1];

    for (int i = 0; i < 4; i++) MPI_OK(MPI_Request_free(&sends[i]));
    MPI_OK(MPI_Request_free(&recv_vec));
    MPI_OK(MPI_Request_free(&recv_int));
    void *detached;
    int detached_size;
    MPI_OK(MPI_Buffer_detach(&detached, &detached_size));
    free(attached), free(sbuf), free(rbuf), free(ibuf), free(want), free(iwant), free(out), free(in);
}

/* ----- names --------------------------------------------------------------------- */

static void test_names(void) {
    char name[MPI_MAX_OBJECT_NAME];
    int length = -1;
    for (int round = 0; round < 3; round++) {
        MPI_Datatype doomed, fresh;
        MPI_OK(MPI_Type_contiguous(2, MPI_INT, &doomed));
        MPI_OK(MPI_Type_set_name(doomed, "doomed type"));
        MPI_OK(MPI_Type_get_name(doomed, name, &length));
        CHECK(!strcmp(name, "doomed type") && length == 11, "name is '%s' (%d)", name, length);
        MPI_OK(MPI_Type_free(&doomed));
        /* A new type (likely in the freed handle's slot) has no name. */
        MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &fresh));
        MPI_OK(MPI_Type_get_name(fresh, name, &length));
        CHECK(length == 0 && name[0] == 0, "a new type shows the name '%s' (%d)", name, length);
        MPI_OK(MPI_Type_free(&fresh));
    }
}

/* ----- user-defined ops ------------------------------------------------------------ */

/* Sums contig(3, MPI_INT) elements: 3 ints each, laid out densely. */
static void sum_triples(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    for (int i = 0; i < 3 * *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void test_userop(void) {
    MPI_Op op;
    MPI_Datatype triple;
    MPI_OK(MPI_Op_create(sum_triples, 1, &op));
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &triple));
    MPI_OK(MPI_Type_commit(&triple));
    int in[6], out[6];
    for (int i = 0; i < 6; i++) in[i] = V(g_rank + 1, i), out[i] = GAP;
    MPI_OK(MPI_Allreduce(in, out, 2, triple, op, MPI_COMM_WORLD));
    for (int i = 0; i < 6; i++) {
        int want = 0;
        for (int r = 0; r < g_size; r++) want += V(r + 1, i);
        CHECK(out[i] == want, "user op on a contiguous type: cell %d is %d, expected %d", i, out[i], want);
    }
    MPI_OK(MPI_Type_free(&triple));
    MPI_OK(MPI_Op_free(&op));
}

/* User functions on types with holes see the data in the type's layout.
 * g_stride_ints: the element stride of the type under test (its extent). */
static int g_stride_ints;

/* Sums the ints at offsets 0 and 2 of each element; touches nothing else. */
static void sum_ends(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    int *a = in, *b = inout;
    for (int e = 0; e < *len; e++) {
        b[e * g_stride_ints] += a[e * g_stride_ints];
        b[e * g_stride_ints + 2] += a[e * g_stride_ints + 2];
    }
}

static void check_ends(const int *out, int count, int stride, int scale, const char *what) {
    for (int e = 0; e < count; e++)
        for (int k = 0; k < stride; k++) {
            int cell = e * stride + k, want = GAP;
            if (k == 0 || k == 2) {
                want = 0;
                for (int r = 0; r < scale; r++) want += V(r + 1, cell);
            }
            CHECK(out[cell] == want, "%s: cell %d is %d, expected %d", what, cell, out[cell], want);
        }
}

static void test_userop_holes(void) {
    MPI_Op op;
    MPI_OK(MPI_Op_create(sum_ends, 1, &op));
    MPI_Datatype ends, padded, types[2];
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &ends)); /* ints 0 and 2, extent 3 ints */
    /* The same data with a lower bound of -1 int and an extent of 4 ints. */
    MPI_OK(MPI_Type_create_resized(ends, -(MPI_Aint)sizeof(int), 4 * sizeof(int), &padded));
    MPI_OK(MPI_Type_commit(&ends));
    MPI_OK(MPI_Type_commit(&padded));
    types[0] = ends, types[1] = padded;
    int strides[2] = {3, 4}, count = 3;
    for (int t = 0; t < 2; t++) {
        int stride = strides[t];
        g_stride_ints = stride;
        /* One spare int in front for the padded type's lower bound. */
        int in_room[16], out_room[16];
        int *in = in_room + 1, *out = out_room + 1;
        for (int i = 0; i < 15; i++) in[i] = V(g_rank + 1, i), out[i] = GAP;
        MPI_OK(MPI_Allreduce(in, out, count, types[t], op, MPI_COMM_WORLD));
        check_ends(out, count, stride, g_size, "Allreduce");
        for (int i = 0; i < 15; i++) out[i] = GAP;
        MPI_Request request;
        MPI_OK(MPI_Iallreduce(in, out, count, types[t], op, MPI_COMM_WORLD, &request));
        MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
        check_ends(out, count, stride, g_size, "Iallreduce");
        for (int i = 0; i < 15; i++) out[i] = GAP;
        MPI_OK(MPI_Reduce(in, out, count, types[t], op, 0, MPI_COMM_WORLD));
        if (g_rank == 0) check_ends(out, count, stride, g_size, "Reduce");
        for (int i = 0; i < 15; i++) out[i] = GAP;
        MPI_OK(MPI_Scan(in, out, count, types[t], op, MPI_COMM_WORLD));
        check_ends(out, count, stride, g_rank + 1, "Scan");
        /* Reduce_local: out starts as rank 0's data with gaps. */
        for (int i = 0; i < 15; i++) out[i] = (i % stride == 0 || i % stride == 2) ? V(1, i) : GAP;
        int mine[16];
        for (int i = 0; i < 15; i++) mine[i] = V(2, i);
        MPI_OK(MPI_Reduce_local(mine, out, count, types[t], op));
        check_ends(out, count, stride, 2, "Reduce_local");
    }
    MPI_OK(MPI_Type_free(&ends));
    MPI_OK(MPI_Type_free(&padded));
    MPI_OK(MPI_Op_free(&op));
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    make_types();
    if (selected(argc, argv, "blocking")) g_mode = 0, test_movement();
    if (selected(argc, argv, "wait")) g_mode = 1, test_movement();
    if (selected(argc, argv, "test")) g_mode = 2, test_movement();
    if (selected(argc, argv, "reduce")) {
        for (g_mode = 0; g_mode < 3; g_mode++) test_reduce();
    }
    if (selected(argc, argv, "inplace")) g_mode = 0, test_inplace();
    if (selected(argc, argv, "persistent")) test_persistent();
    if (selected(argc, argv, "names")) test_names();
    if (selected(argc, argv, "userop")) test_userop();
    if (selected(argc, argv, "userop_holes")) test_userop_holes();
    free_types();
    return test_finish();
}
