/* Collectives: Barrier, Bcast (sizes x every root), Reduce (every root) and
 * Allreduce (incl. IN_PLACE) with every predefined op on the types the
 * standard allows.  usage: coll [barrier|bcast|reduce|roots|large|unsigned_minmax ...]
 * (default: all but unsigned_minmax, which MPICH 4.0.2 fails: pmodels/mpich#6083) */
#include "common.h"
#include <stdbool.h>

#define NV 7
#define C_SUM(a, b) ((a) + (b))
#define C_PROD(a, b) ((a) * (b))
#define C_MIN(a, b) ((a) < (b) ? (a) : (b))
#define C_MAX(a, b) ((a) > (b) ? (a) : (b))
#define C_LAND(a, b) ((a) && (b))
#define C_LOR(a, b) ((a) || (b))
#define C_LXOR(a, b) (!(a) != !(b))
#define C_BAND(a, b) ((a) & (b))
#define C_BOR(a, b) ((a) | (b))
#define C_BXOR(a, b) ((a) ^ (b))
#define V_SUM(r, i) (((r) * 3 + (i)) % 5 + 1)
#define V_PROD(r, i) (((r) % 3 == (i) % 3) ? 2 : 1)
#define V_MM(r, i) (((r) * 5 + (i) * 3) % 7 - 3)  /* negative: wraps for unsigned */
#define V_MMU(r, i) (((r) * 5 + (i) * 3) % 7 + 1) /* in range of every type */
#define V_LOG(r, i) ((((r) + (i)) % 3 == 0) ? 0 : ((r) + (i) + 1))
#define V_LOG_AND(r, i) (((r) == (i) % 4) ? 0 : 2) /* some columns all-true */
#define V_BIT(r, i) ((1 << (((r) + (i)) % 7)) | (((r) * (i)) & 0x40))

static long n_checks;

static int all_roots; /* Reduce at every root (else one rotating root) */
#define RUN(CT, DT, OP, COMB, VAL)                                                         \
    do {                                                                                   \
        CT in[NV], out[NV], ex[NV];                                                        \
        for (int i = 0; i < NV; i++) in[i] = (CT)(VAL(g_rank, i));                         \
        for (int i = 0; i < NV; i++) {                                                     \
            CT acc = (CT)(VAL(0, i));                                                      \
            for (int r = 1; r < g_size; r++) { CT v = (CT)(VAL(r, i)); acc = (CT)COMB(acc, v); } \
            ex[i] = acc;                                                                   \
        }                                                                                  \
        memset(out, 0x5a, sizeof out);                                                     \
        MPI_OK(MPI_Allreduce(in, out, NV, DT, OP, MPI_COMM_WORLD));                        \
        for (int i = 0; i < NV; i++)                                                       \
            CHECK(out[i] == ex[i], "Allreduce %s %s elem %d: got %Lg expected %Lg", #OP, #DT, i, \
                  (long double)out[i], (long double)ex[i]);                                \
        if (all_roots || n_checks % 4 == 0) {                                              \
            memcpy(out, in, sizeof out);                                                   \
            MPI_OK(MPI_Allreduce(MPI_IN_PLACE, out, NV, DT, OP, MPI_COMM_WORLD));          \
            for (int i = 0; i < NV; i++)                                                   \
                CHECK(out[i] == ex[i], "Allreduce IN_PLACE %s %s elem %d", #OP, #DT, i);   \
        }                                                                                  \
        for (int root = 0; root < g_size; root++) {                                        \
            if (!all_roots && root != n_checks % g_size) continue;              \
            memset(out, 0x5a, sizeof out);                                                 \
            if (root == g_rank && root % 2) {                                              \
                memcpy(out, in, sizeof out);                                               \
                MPI_OK(MPI_Reduce(MPI_IN_PLACE, out, NV, DT, OP, root, MPI_COMM_WORLD));   \
            } else                                                                         \
                MPI_OK(MPI_Reduce(in, out, NV, DT, OP, root, MPI_COMM_WORLD));             \
            if (root == g_rank)                                                            \
                for (int i = 0; i < NV; i++)                                               \
                    CHECK(out[i] == ex[i], "Reduce root %d %s %s elem %d: got %Lg expected %Lg", root, \
                          #OP, #DT, i, (long double)out[i], (long double)ex[i]);           \
        }                                                                                  \
        n_checks++;                                                                        \
    } while (0)

#define ARITH_V(CT, DT, VMM)                   \
    do {                                       \
        RUN(CT, DT, MPI_SUM, C_SUM, V_SUM);    \
        RUN(CT, DT, MPI_PROD, C_PROD, V_PROD); \
        RUN(CT, DT, MPI_MIN, C_MIN, VMM);      \
        RUN(CT, DT, MPI_MAX, C_MAX, VMM);      \
    } while (0)
#define ARITH(CT, DT) ARITH_V(CT, DT, V_MM)
#define LOGIC(CT, DT)                                 \
    do {                                              \
        RUN(CT, DT, MPI_LAND, C_LAND, V_LOG);         \
        RUN(CT, DT, MPI_LAND, C_LAND, V_LOG_AND);     \
        RUN(CT, DT, MPI_LOR, C_LOR, V_LOG);           \
        RUN(CT, DT, MPI_LXOR, C_LXOR, V_LOG);         \
    } while (0)
#define BITS(CT, DT)                          \
    do {                                      \
        RUN(CT, DT, MPI_BAND, C_BAND, V_BIT); \
        RUN(CT, DT, MPI_BOR, C_BOR, V_BIT);   \
        RUN(CT, DT, MPI_BXOR, C_BXOR, V_BIT); \
    } while (0)
#define INTEGER(CT, DT) do { ARITH(CT, DT); LOGIC(CT, DT); BITS(CT, DT); } while (0)
#define UINTEGER(CT, DT) do { ARITH_V(CT, DT, V_MMU); LOGIC(CT, DT); BITS(CT, DT); } while (0)
/* fixed-width aliases and char types: one op of each class (keeps 8-rank runs short) */
#define INTEGER_LIGHT(CT, DT, VMM)                  \
    do {                                            \
        RUN(CT, DT, MPI_SUM, C_SUM, V_SUM);         \
        RUN(CT, DT, MPI_MAX, C_MAX, VMM);           \
        RUN(CT, DT, MPI_LXOR, C_LXOR, V_LOG);       \
        RUN(CT, DT, MPI_BOR, C_BOR, V_BIT);         \
    } while (0)
#define UMINMAX(CT, DT) do { RUN(CT, DT, MPI_MIN, C_MIN, V_MM); RUN(CT, DT, MPI_MAX, C_MAX, V_MM); } while (0)

#define LOC(VT, DT)                                                                        \
    do {                                                                                   \
        struct { VT v; int i; } in[NV], out[NV], exmin[NV], exmax[NV];                    \
        for (int k = 0; k < NV; k++) { in[k].v = (VT)((g_rank * 5 + k) % 4); in[k].i = g_rank; } \
        for (int k = 0; k < NV; k++) {                                                     \
            exmin[k].v = exmax[k].v = (VT)(k % 4); exmin[k].i = exmax[k].i = 0;            \
            for (int r = 1; r < g_size; r++) {                                             \
                VT v = (VT)((r * 5 + k) % 4);                                              \
                if (v < exmin[k].v) { exmin[k].v = v; exmin[k].i = r; }                    \
                if (v > exmax[k].v) { exmax[k].v = v; exmax[k].i = r; }                    \
            }                                                                              \
        }                                                                                  \
        MPI_OK(MPI_Allreduce(in, out, NV, DT, MPI_MINLOC, MPI_COMM_WORLD));                \
        for (int k = 0; k < NV; k++)                                                       \
            CHECK(out[k].v == exmin[k].v && out[k].i == exmin[k].i, "MINLOC %s elem %d: (%g,%d) expected (%g,%d)", \
                  #DT, k, (double)out[k].v, out[k].i, (double)exmin[k].v, exmin[k].i);     \
        MPI_OK(MPI_Allreduce(in, out, NV, DT, MPI_MAXLOC, MPI_COMM_WORLD));                \
        for (int k = 0; k < NV; k++)                                                       \
            CHECK(out[k].v == exmax[k].v && out[k].i == exmax[k].i, "MAXLOC %s elem %d: (%g,%d) expected (%g,%d)", \
                  #DT, k, (double)out[k].v, out[k].i, (double)exmax[k].v, exmax[k].i);     \
        for (int root = 0; root < g_size; root++) {                                        \
            MPI_OK(MPI_Reduce(in, out, NV, DT, MPI_MINLOC, root, MPI_COMM_WORLD));         \
            if (root == g_rank)                                                            \
                for (int k = 0; k < NV; k++)                                               \
                    CHECK(out[k].v == exmin[k].v && out[k].i == exmin[k].i, "Reduce MINLOC %s root %d", #DT, root); \
            MPI_OK(MPI_Reduce(in, out, NV, DT, MPI_MAXLOC, root, MPI_COMM_WORLD));         \
            if (root == g_rank)                                                            \
                for (int k = 0; k < NV; k++)                                               \
                    CHECK(out[k].v == exmax[k].v && out[k].i == exmax[k].i, "Reduce MAXLOC %s root %d", #DT, root); \
        }                                                                                  \
        n_checks++;                                                                        \
    } while (0)

static void t_reduce(void) {
    INTEGER(int, MPI_INT);
    INTEGER(long, MPI_LONG);
    INTEGER(short, MPI_SHORT);
    UINTEGER(unsigned short, MPI_UNSIGNED_SHORT);
    UINTEGER(unsigned, MPI_UNSIGNED);
    UINTEGER(unsigned long, MPI_UNSIGNED_LONG);
    INTEGER(long long, MPI_LONG_LONG);
    UINTEGER(unsigned long long, MPI_UNSIGNED_LONG_LONG);
    INTEGER_LIGHT(signed char, MPI_SIGNED_CHAR, V_MM);
    INTEGER_LIGHT(unsigned char, MPI_UNSIGNED_CHAR, V_MMU);
    INTEGER_LIGHT(int8_t, MPI_INT8_T, V_MM);
    INTEGER_LIGHT(int16_t, MPI_INT16_T, V_MM);
    INTEGER_LIGHT(int32_t, MPI_INT32_T, V_MM);
    INTEGER_LIGHT(int64_t, MPI_INT64_T, V_MM);
    INTEGER_LIGHT(uint8_t, MPI_UINT8_T, V_MMU);
    INTEGER_LIGHT(uint16_t, MPI_UINT16_T, V_MMU);
    INTEGER_LIGHT(uint32_t, MPI_UINT32_T, V_MMU);
    INTEGER_LIGHT(uint64_t, MPI_UINT64_T, V_MMU);
    ARITH(float, MPI_FLOAT);
    ARITH(double, MPI_DOUBLE);
    ARITH(long double, MPI_LONG_DOUBLE);
    LOGIC(bool, MPI_C_BOOL);
    BITS(unsigned char, MPI_BYTE);
    LOC(double, MPI_DOUBLE_INT);
    LOC(float, MPI_FLOAT_INT);
    LOC(long, MPI_LONG_INT);
    LOC(short, MPI_SHORT_INT);
    {
        struct { int v; int i; } in[NV], out[NV];
        for (int k = 0; k < NV; k++) { in[k].v = (g_rank * 5 + k) % 4; in[k].i = g_rank; }
        MPI_OK(MPI_Allreduce(in, out, NV, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
        for (int k = 0; k < NV; k++) {
            int bv = k % 4, bi = 0;
            for (int r = 1; r < g_size; r++) if ((r * 5 + k) % 4 < bv) { bv = (r * 5 + k) % 4; bi = r; }
            CHECK(out[k].v == bv && out[k].i == bi, "2INT MINLOC elem %d (%d,%d) expected (%d,%d)", k, out[k].v, out[k].i, bv, bi);
        }
        MPI_OK(MPI_Allreduce(in, out, NV, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
        for (int k = 0; k < NV; k++) {
            int bv = k % 4, bi = 0;
            for (int r = 1; r < g_size; r++) if ((r * 5 + k) % 4 > bv) { bv = (r * 5 + k) % 4; bi = r; }
            CHECK(out[k].v == bv && out[k].i == bi, "2INT MAXLOC elem %d", k);
        }
        n_checks++;
    }
}

/* MIN/MAX on unsigned types with values above the signed range.  Separate
 * subtest: MPICH 4.0.2 compares them as signed (pmodels/mpich#6083). */
static void t_unsigned_minmax(void) {
    all_roots = 1;
    UMINMAX(unsigned char, MPI_UNSIGNED_CHAR);
    UMINMAX(unsigned short, MPI_UNSIGNED_SHORT);
    UMINMAX(unsigned, MPI_UNSIGNED);
    UMINMAX(unsigned long, MPI_UNSIGNED_LONG);
    UMINMAX(unsigned long long, MPI_UNSIGNED_LONG_LONG);
    UMINMAX(uint8_t, MPI_UINT8_T);
    UMINMAX(uint16_t, MPI_UINT16_T);
    UMINMAX(uint32_t, MPI_UINT32_T);
    UMINMAX(uint64_t, MPI_UINT64_T);
}

/* every root, a few combinations */
static void t_roots(void) {
    all_roots = 1;
    RUN(int, MPI_INT, MPI_SUM, C_SUM, V_SUM);
    RUN(double, MPI_DOUBLE, MPI_MAX, C_MAX, V_MM);
    RUN(unsigned long, MPI_UNSIGNED_LONG, MPI_BXOR, C_BXOR, V_BIT);
    RUN(long long, MPI_LONG_LONG, MPI_PROD, C_PROD, V_PROD);
    LOC(double, MPI_DOUBLE_INT);
    all_roots = 0;
}

/* large vectors: segmented / pipelined algorithms */
static void t_large(void) {
    int n = 1 << 18;
    double *in = malloc(sizeof(double) * n), *out = malloc(sizeof(double) * n);
    int *ii = malloc(sizeof(int) * n), *io = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) { in[i] = g_rank + i % 13; ii[i] = (g_rank * 7919 + i) % 1000; }
    MPI_OK(MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++)
        CHECK(out[i] == g_size * (g_size - 1) / 2.0 + (double)g_size * (i % 13), "large SUM elem %d = %g", i, out[i]);
    for (int root = 0; root < g_size; root += (g_size > 3 ? g_size - 1 : 1)) {
        MPI_OK(MPI_Reduce(ii, io, n, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD));
        if (g_rank == root)
            for (int i = 0; i < n; i++) {
                int m = -1;
                for (int r = 0; r < g_size; r++) m = C_MAX(m, (r * 7919 + i) % 1000);
                CHECK(io[i] == m, "large Reduce MAX root %d elem %d", root, i);
            }
    }
    free(in); free(out); free(ii); free(io);
}

static void t_bcast(void) {
    static const int sizes[] = {0, 1, 7, 1024, 16383, 16385, 65536, 1 << 20, 4 << 20};
    unsigned char *b = malloc((4 << 20) + 64);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int root = 0; root < g_size; root++) {
            int n = sizes[k];
            unsigned seed = (unsigned)(k * 100 + root);
            if (g_rank == root) fill_pat(b, n, seed);
            else memset(b, 0xA5, n + 64);
            MPI_OK(MPI_Bcast(b, n, MPI_BYTE, root, MPI_COMM_WORLD));
            size_t bad = check_pat(b, n, seed);
            CHECK(bad == (size_t)-1, "Bcast size %d root %d: byte %zu wrong", n, root, bad);
            if (g_rank != root)
                for (int i = n; i < n + 64; i++) CHECK(b[i] == 0xA5, "Bcast wrote past end");
        }
    /* typed bcast */
    double d[100];
    for (int root = 0; root < g_size; root++) {
        for (int i = 0; i < 100; i++) d[i] = g_rank == root ? root * 1.5 + i : -1;
        MPI_OK(MPI_Bcast(d, 100, MPI_DOUBLE, root, MPI_COMM_WORLD));
        for (int i = 0; i < 100; i++) CHECK(d[i] == root * 1.5 + i, "typed Bcast root %d", root);
    }
    free(b);
}

static void t_barrier(void) {
    for (int i = 0; i < 200; i++) MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    /* nobody leaves the barrier before the last one enters */
    for (int late = 0; late < g_size; late += (g_size > 2 ? g_size - 1 : 1)) {
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        if (g_rank == late) sleep_ms(300);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        double dt = MPI_Wtime() - t0;
        CHECK(dt >= 0.25, "left the barrier after %.3f s, before rank %d (sleeping 0.3 s) entered", dt, late);
    }
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (selected(argc, argv, "barrier")) t_barrier();
    if (selected(argc, argv, "bcast")) t_bcast();
    if (selected(argc, argv, "reduce")) t_reduce();
    if (selected(argc, argv, "roots")) t_roots();
    if (argc > 1 && selected(argc, argv, "unsigned_minmax")) t_unsigned_minmax();
    if (selected(argc, argv, "large")) t_large();
    if (g_rank == 0) printf("%ld op/type combinations checked\n", n_checks);
    return test_finish();
}
