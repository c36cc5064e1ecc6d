/* Reductions: Reduce, Allreduce, Reduce_scatter(_block), Scan, Exscan at
 * several sizes (0, 1, small, above the eager limit, 1 MiB) and in place;
 * a non-commutative user op (2x2 matrix product mod 1009) must combine in
 * rank order in every one of them; a commutative user op; Op_commutative /
 * Op_free; Reduce_local with every predefined op on the type classes the
 * standard allows (complex, C_BOOL, BYTE, every MINLOC/MAXLOC pair type).
 * usage: coll_reduce [sum|user|local ...] (default: all) | inplace_large
 * (alone: MPICH 4.0.2 crashes in it) */
#include "common.h"
#include <complex.h>
#include <stdbool.h>

#define NSIZES 5
static int sizes[NSIZES] = {0, 1, 7, 5000, 262144};

static int v(int rank, int i) { return (rank * 31 + i * 17) % 1000 - 300; }

static int *ints(size_t n, int fill) {
    int *p = malloc((n ? n : 1) * sizeof(int));
    if (!p) FAIL("out of memory");
    for (size_t i = 0; i < n; i++) p[i] = fill;
    return p;
}

/* Sum over ranks [first, last] of v(rank, i). */
static int sum_v(int first, int last, int i) {
    int acc = 0;
    for (int r = first; r <= last; r++) acc += v(r, i);
    return acc;
}

static void test_sum(void) {
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s];
        int *in = ints(n, 0), *out = ints(n, -1);
        for (int i = 0; i < n; i++) in[i] = v(g_rank, i);
        /* Allreduce, plain and in place. */
        MPI_OK(MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(out[i] == sum_v(0, g_size - 1, i), "Allreduce n=%d elem %d", n, i);
        memcpy(out, in, n * sizeof(int));
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(out[i] == sum_v(0, g_size - 1, i), "Allreduce IN_PLACE n=%d elem %d", n, i);
        /* Double max (exact: integer values). */
        double *din = malloc((n + 1) * sizeof(double)), *dout = malloc((n + 1) * sizeof(double));
        for (int i = 0; i < n; i++) din[i] = v(g_rank, i) * 0.5;
        MPI_OK(MPI_Allreduce(din, dout, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            double best = v(0, i) * 0.5;
            for (int r = 1; r < g_size; r++) best = v(r, i) * 0.5 > best ? v(r, i) * 0.5 : best;
            CHECK(dout[i] == best, "Allreduce MAX double n=%d elem %d", n, i);
        }
        free(din);
        free(dout);
        /* Reduce at a rotating root (every root for small n), in place at odd roots. */
        for (int root = 0; root < g_size; root++) {
            if (n > 10 && root != s % g_size) continue;
            for (int i = 0; i < n; i++) out[i] = -1;
            /* Large in place at a non-zero root: subtest inplace_large (MPICH 4.0.2 crashes). */
            if (g_rank == root && root % 2 && n <= 10) {
                memcpy(out, in, n * sizeof(int));
                MPI_OK(MPI_Reduce(MPI_IN_PLACE, out, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
            } else {
                MPI_OK(MPI_Reduce(in, out, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
            }
            if (g_rank == root)
                for (int i = 0; i < n; i++) CHECK(out[i] == sum_v(0, g_size - 1, i), "Reduce n=%d root %d elem %d", n, root, i);
        }
        /* Scan and Exscan, plain and in place. */
        MPI_OK(MPI_Scan(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(out[i] == sum_v(0, g_rank, i), "Scan n=%d elem %d", n, i);
        memcpy(out, in, n * sizeof(int));
        MPI_OK(MPI_Scan(MPI_IN_PLACE, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(out[i] == sum_v(0, g_rank, i), "Scan IN_PLACE n=%d elem %d", n, i);
        MPI_OK(MPI_Exscan(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        if (g_rank > 0)
            for (int i = 0; i < n; i++) CHECK(out[i] == sum_v(0, g_rank - 1, i), "Exscan n=%d elem %d", n, i);
        memcpy(out, in, n * sizeof(int));
        MPI_OK(MPI_Exscan(MPI_IN_PLACE, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        if (g_rank > 0)
            for (int i = 0; i < n; i++) CHECK(out[i] == sum_v(0, g_rank - 1, i), "Exscan IN_PLACE n=%d elem %d", n, i);
        free(in);
        free(out);
        /* Reduce_scatter_block: n per rank; Reduce_scatter: rank r gets (n + r) % 4 + n/2. */
        int block = n / g_size + (n > 0);
        int total = block * g_size;
        int *all = ints(total, 0), *part = ints(total, -1);
        for (int i = 0; i < total; i++) all[i] = v(g_rank, i);
        MPI_OK(MPI_Reduce_scatter_block(all, part, block, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < block; i++)
            CHECK(part[i] == sum_v(0, g_size - 1, g_rank * block + i), "Reduce_scatter_block n=%d elem %d", block, i);
        memcpy(part, all, total * sizeof(int));
        MPI_OK(MPI_Reduce_scatter_block(MPI_IN_PLACE, part, block, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < block; i++)
            CHECK(part[i] == sum_v(0, g_size - 1, g_rank * block + i), "Reduce_scatter_block IN_PLACE elem %d", i);
        free(all);
        free(part);
        int *counts = malloc(g_size * sizeof(int));
        int first_mine = 0;
        total = 0;
        for (int r = 0; r < g_size; r++) {
            counts[r] = (n + r) % 4 + n / (2 * g_size);
            if (r < g_rank) first_mine += counts[r];
            total += counts[r];
        }
        all = ints(total, 0);
        part = ints(total, -1);
        for (int i = 0; i < total; i++) all[i] = v(g_rank, i);
        MPI_OK(MPI_Reduce_scatter(all, part, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < counts[g_rank]; i++)
            CHECK(part[i] == sum_v(0, g_size - 1, first_mine + i), "Reduce_scatter n=%d elem %d", n, i);
        if (n <= 5000) { /* larger: subtest inplace_large (MPICH 4.0.2 asserts) */
            memcpy(part, all, total * sizeof(int));
            MPI_OK(MPI_Reduce_scatter(MPI_IN_PLACE, part, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            for (int i = 0; i < counts[g_rank]; i++)
                CHECK(part[i] == sum_v(0, g_size - 1, first_mine + i), "Reduce_scatter IN_PLACE n=%d elem %d", n, i);
        }
        free(all);
        free(part);
        free(counts);
    }
}

/* MPI_Reduce with MPI_IN_PLACE at every non-zero root above the eager limit;
 * MPI_Reduce_scatter in place with 1 MiB. */
static void test_inplace_large(void) {
    int n = 5000;
    int *in = ints(n, 0), *out = ints(n, -1);
    for (int i = 0; i < n; i++) in[i] = v(g_rank, i);
    for (int root = 1; root < g_size; root++) {
        if (g_rank == root) {
            memcpy(out, in, n * sizeof(int));
            MPI_OK(MPI_Reduce(MPI_IN_PLACE, out, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
            for (int i = 0; i < n; i++) CHECK(out[i] == sum_v(0, g_size - 1, i), "Reduce IN_PLACE root %d elem %d", root, i);
        } else {
            MPI_OK(MPI_Reduce(in, out, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
        }
    }
    free(in);
    free(out);
    /* MPI_Reduce_scatter in place with 1 MiB of uneven counts. */
    int *counts = malloc(g_size * sizeof(int)), total = 0, first_mine = 0;
    for (int r = 0; r < g_size; r++) {
        counts[r] = 262144 / g_size + r % 3;
        if (r < g_rank) first_mine += counts[r];
        total += counts[r];
    }
    int *part = ints(total, 0);
    for (int i = 0; i < total; i++) part[i] = v(g_rank, i);
    MPI_OK(MPI_Reduce_scatter(MPI_IN_PLACE, part, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < counts[g_rank]; i++)
        CHECK(part[i] == sum_v(0, g_size - 1, first_mine + i), "Reduce_scatter IN_PLACE elem %d", i);
    free(part);
    free(counts);
}

/* ----- user ops ------------------------------------------------------------ */

#define MOD 1009
typedef struct { int m[4]; } mat; /* row-major 2x2 */

static mat mat_of(int rank, int i) {
    mat x = {{(rank * 7 + i + 1) % MOD, (rank * 3 + 2 * i) % MOD, (rank + 5 * i + 2) % MOD, (rank * 11 + i + 3) % MOD}};
    return x;
}
static mat mul(mat a, mat b) {
    mat c;
    c.m[0] = (a.m[0] * b.m[0] + a.m[1] * b.m[2]) % MOD;
    c.m[1] = (a.m[0] * b.m[1] + a.m[1] * b.m[3]) % MOD;
    c.m[2] = (a.m[2] * b.m[0] + a.m[3] * b.m[2]) % MOD;
    c.m[3] = (a.m[2] * b.m[1] + a.m[3] * b.m[3]) % MOD;
    return c;
}
static int mat_eq(mat a, mat b) { return !memcmp(&a, &b, sizeof a); }
/* Product of mat_of(first..last, i) in rank order. */
static mat product(int first, int last, int i) {
    mat acc = mat_of(first, i);
    for (int r = first + 1; r <= last; r++) acc = mul(acc, mat_of(r, i));
    return acc;
}

static MPI_Datatype mat_type;
static void matmul_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    CHECK(*dt == mat_type, "user op got another datatype");
    mat *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = mul(a[i], b[i]); /* inout = in op inout */
}
static void summod_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = (a[i] + b[i]) % MOD;
}

static void test_user(void) {
    MPI_Op matmul, summod;
    MPI_OK(MPI_Type_contiguous(4, MPI_INT, &mat_type));
    MPI_OK(MPI_Type_commit(&mat_type));
    MPI_OK(MPI_Op_create(matmul_op, 0, &matmul));
    MPI_OK(MPI_Op_create(summod_op, 1, &summod));
    int commute = -1;
    MPI_OK(MPI_Op_commutative(matmul, &commute));
    CHECK(commute == 0, "matmul reported commutative");
    MPI_OK(MPI_Op_commutative(summod, &commute));
    CHECK(commute == 1, "summod reported non-commutative");
    MPI_OK(MPI_Op_commutative(MPI_SUM, &commute));
    CHECK(commute == 1, "MPI_SUM reported non-commutative");

    int counts_of[] = {1, 3, 2000}; /* 2000 matrices = 32 KB: above the eager limit */
    for (int c = 0; c < 3; c++) {
        int n = counts_of[c];
        mat *in = malloc(n * sizeof(mat)), *out = malloc(n * sizeof(mat));
        for (int i = 0; i < n; i++) in[i] = mat_of(g_rank, i);
        for (int root = 0; root < g_size; root++) {
            if (n > 3 && root != g_size - 1) continue;
            if (g_rank == root && root % 2) {
                memcpy(out, in, n * sizeof(mat));
                MPI_OK(MPI_Reduce(MPI_IN_PLACE, out, n, mat_type, matmul, root, MPI_COMM_WORLD));
            } else {
                MPI_OK(MPI_Reduce(in, out, n, mat_type, matmul, root, MPI_COMM_WORLD));
            }
            if (g_rank == root)
                for (int i = 0; i < n; i++)
                    CHECK(mat_eq(out[i], product(0, g_size - 1, i)), "non-commutative Reduce root %d n=%d elem %d", root, n, i);
        }
        MPI_OK(MPI_Allreduce(in, out, n, mat_type, matmul, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(mat_eq(out[i], product(0, g_size - 1, i)), "non-commutative Allreduce n=%d elem %d", n, i);
        MPI_OK(MPI_Scan(in, out, n, mat_type, matmul, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(mat_eq(out[i], product(0, g_rank, i)), "non-commutative Scan n=%d elem %d", n, i);
        MPI_OK(MPI_Exscan(in, out, n, mat_type, matmul, MPI_COMM_WORLD));
        if (g_rank > 0)
            for (int i = 0; i < n; i++)
                CHECK(mat_eq(out[i], product(0, g_rank - 1, i)), "non-commutative Exscan n=%d elem %d", n, i);
        free(in);
        free(out);
        /* Reduce_scatter_block / Reduce_scatter: each rank's part in rank order. */
        int total = n * g_size;
        mat *all = malloc(total * sizeof(mat)), *part = malloc(total * sizeof(mat));
        for (int i = 0; i < total; i++) all[i] = mat_of(g_rank, i);
        MPI_OK(MPI_Reduce_scatter_block(all, part, n, mat_type, matmul, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++)
            CHECK(mat_eq(part[i], product(0, g_size - 1, g_rank * n + i)), "non-commutative Reduce_scatter_block elem %d", i);
        int *counts = malloc(g_size * sizeof(int)), first = 0;
        for (int r = 0; r < g_size; r++) {
            counts[r] = (r % 2) ? 2 * n - 1 : 1; /* sums to <= total */
            if (r < g_rank) first += counts[r];
        }
        MPI_OK(MPI_Reduce_scatter(all, part, counts, mat_type, matmul, MPI_COMM_WORLD));
        for (int i = 0; i < counts[g_rank]; i++)
            CHECK(mat_eq(part[i], product(0, g_size - 1, first + i)), "non-commutative Reduce_scatter elem %d", i);
        free(counts);
        free(all);
        free(part);
    }
    /* Commutative user op on a vector big enough for the ring algorithm. */
    int n = 100000;
    int *in = ints(n, 0), *out = ints(n, 0);
    for (int i = 0; i < n; i++) in[i] = (g_rank * 13 + i) % MOD;
    MPI_OK(MPI_Allreduce(in, out, n, MPI_INT, summod, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) {
        int acc = 0;
        for (int r = 0; r < g_size; r++) acc = (acc + (r * 13 + i) % MOD) % MOD;
        CHECK(out[i] == acc, "commutative user Allreduce elem %d: %d vs %d", i, out[i], acc);
    }
    free(in);
    free(out);
    MPI_OK(MPI_Op_free(&matmul));
    CHECK(matmul == MPI_OP_NULL, "Op_free did not reset the handle");
    MPI_OK(MPI_Op_free(&summod));
    MPI_OK(MPI_Type_free(&mat_type));
}

/* ----- every predefined op on the remaining type classes (Reduce_local) ----- */

static void test_local(void) {
    /* Complex SUM / PROD. */
    double complex a[2] = {1 + 2 * I, -3 + 0.5 * I}, b[2] = {2 - 1 * I, 4 + 4 * I};
    double complex t[2];
    memcpy(t, b, sizeof t);
    MPI_OK(MPI_Reduce_local(a, t, 2, MPI_C_DOUBLE_COMPLEX, MPI_SUM));
    CHECK(t[0] == a[0] + b[0] && t[1] == a[1] + b[1], "complex SUM");
    memcpy(t, b, sizeof t);
    MPI_OK(MPI_Reduce_local(a, t, 2, MPI_C_DOUBLE_COMPLEX, MPI_PROD));
    CHECK(t[0] == a[0] * b[0] && t[1] == a[1] * b[1], "complex PROD");
    float complex fa = 1.5f + 2 * I, fb = -2 + 0.25f * I, ft = fb;
    MPI_OK(MPI_Reduce_local(&fa, &ft, 1, MPI_C_FLOAT_COMPLEX, MPI_PROD));
    CHECK(ft == fa * fb, "float complex PROD");
    /* C_BOOL logical ops. */
    bool ba[4] = {0, 0, 1, 1}, bb[4] = {0, 1, 0, 1}, bt[4];
    memcpy(bt, bb, sizeof bt);
    MPI_OK(MPI_Reduce_local(ba, bt, 4, MPI_C_BOOL, MPI_LAND));
    CHECK(!bt[0] && !bt[1] && !bt[2] && bt[3], "C_BOOL LAND");
    memcpy(bt, bb, sizeof bt);
    MPI_OK(MPI_Reduce_local(ba, bt, 4, MPI_C_BOOL, MPI_LOR));
    CHECK(!bt[0] && bt[1] && bt[2] && bt[3], "C_BOOL LOR");
    memcpy(bt, bb, sizeof bt);
    MPI_OK(MPI_Reduce_local(ba, bt, 4, MPI_C_BOOL, MPI_LXOR));
    CHECK(!bt[0] && bt[1] && bt[2] && !bt[3], "C_BOOL LXOR");
    /* BYTE bitwise ops. */
    unsigned char ya[2] = {0xF0, 0x3C}, yb[2] = {0x33, 0x0F}, yt[2];
    memcpy(yt, yb, 2);
    MPI_OK(MPI_Reduce_local(ya, yt, 2, MPI_BYTE, MPI_BAND));
    CHECK(yt[0] == 0x30 && yt[1] == 0x0C, "BYTE BAND");
    memcpy(yt, yb, 2);
    MPI_OK(MPI_Reduce_local(ya, yt, 2, MPI_BYTE, MPI_BOR));
    CHECK(yt[0] == 0xF3 && yt[1] == 0x3F, "BYTE BOR");
    memcpy(yt, yb, 2);
    MPI_OK(MPI_Reduce_local(ya, yt, 2, MPI_BYTE, MPI_BXOR));
    CHECK(yt[0] == 0xC3 && yt[1] == 0x33, "BYTE BXOR");
    /* Integer ops on a few more types. */
    long long la[2] = {-5, 1LL << 40}, lb[2] = {3, 7}, lt[2];
    memcpy(lt, lb, sizeof lt);
    MPI_OK(MPI_Reduce_local(la, lt, 2, MPI_LONG_LONG, MPI_PROD));
    CHECK(lt[0] == -15 && lt[1] == 7LL << 40, "LONG_LONG PROD");
    unsigned short ua[2] = {0xFFF0, 2}, ub[2] = {0x0F0F, 65535}, ut[2];
    memcpy(ut, ub, sizeof ut);
    MPI_OK(MPI_Reduce_local(ua, ut, 2, MPI_UNSIGNED_SHORT, MPI_BAND));
    CHECK(ut[0] == 0x0F00 && ut[1] == 2, "UNSIGNED_SHORT BAND");
    memcpy(ut, ub, sizeof ut);
    MPI_OK(MPI_Reduce_local(ua, ut, 2, MPI_UNSIGNED_SHORT, MPI_LOR));
    CHECK(ut[0] == 1 && ut[1] == 1, "UNSIGNED_SHORT LOR");
    float fla[2] = {1.5f, -2}, flb[2] = {-0.5f, 8}, flt[2];
    memcpy(flt, flb, sizeof flt);
    MPI_OK(MPI_Reduce_local(fla, flt, 2, MPI_FLOAT, MPI_MIN));
    CHECK(flt[0] == -0.5f && flt[1] == -2, "FLOAT MIN");
    /* MINLOC / MAXLOC on every pair type: ties pick the lower index. */
#define LOC(T, DT, A0, A1, B0, B1)                                                            \
    do {                                                                                      \
        struct { T val; int loc; } pa[2] = {{A0, 4}, {A1, 9}}, pb[2] = {{B0, 2}, {B1, 9}}, pt[2]; \
        memcpy(pt, pb, sizeof pt);                                                            \
        MPI_OK(MPI_Reduce_local(pa, pt, 2, DT, MPI_MAXLOC));                                  \
        CHECK(pt[0].val == (A0 > B0 ? A0 : B0) && pt[1].val == (A1 > B1 ? A1 : B1), #DT " MAXLOC value"); \
        CHECK(pt[0].loc == (A0 > B0 ? 4 : A0 == B0 ? 2 : 2), #DT " MAXLOC index");              \
        memcpy(pt, pb, sizeof pt);                                                            \
        MPI_OK(MPI_Reduce_local(pa, pt, 2, DT, MPI_MINLOC));                                  \
        CHECK(pt[0].val == (A0 < B0 ? A0 : B0) && pt[1].val == (A1 < B1 ? A1 : B1), #DT " MINLOC value"); \
        CHECK(pt[0].loc == (A0 < B0 ? 4 : 2), #DT " MINLOC index");                            \
    } while (0)
    LOC(float, MPI_FLOAT_INT, 2.5f, -1.0f, 2.5f, 3.0f);
    LOC(double, MPI_DOUBLE_INT, 7.0, 1.0, -7.0, 2.0);
    LOC(long, MPI_LONG_INT, -3L, 10L, 4L, 10L);
    LOC(int, MPI_2INT, 5, 6, 5, -6);
    LOC(short, MPI_SHORT_INT, (short)-2, (short)3, (short)1, (short)3);
    LOC(long double, MPI_LONG_DOUBLE_INT, 1.25L, 2.0L, 1.0L, 2.0L);
    /* MAXLOC across ranks: value v(rank, i) keeps the lowest rank on ties. */
    struct { double val; int loc; } mine[3], best[3];
    for (int i = 0; i < 3; i++) {
        mine[i].val = (g_rank * (i + 2)) % 3;
        mine[i].loc = g_rank;
    }
    MPI_OK(MPI_Allreduce(mine, best, 3, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    for (int i = 0; i < 3; i++) {
        double want = -1;
        int where = -1;
        for (int r = 0; r < g_size; r++)
            if ((r * (i + 2)) % 3 > want) {
                want = (r * (i + 2)) % 3;
                where = r;
            }
        CHECK(best[i].val == want && best[i].loc == where, "Allreduce MAXLOC elem %d: (%g,%d) vs (%g,%d)", i,
              best[i].val, best[i].loc, want, where);
    }
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (selected(argc, argv, "sum")) test_sum();
    if (argc > 1 && !strcmp(argv[1], "inplace_large")) test_inplace_large();
    if (selected(argc, argv, "user")) test_user();
    if (selected(argc, argv, "local")) test_local();
    return test_finish();
}
