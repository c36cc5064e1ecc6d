/* Every predefined C datatype on contiguous buffers: ring send/recv, content
 * check, Get_count, Type_size/extent.
 * usage: datatypes [packed] [pair_elements]
 *   packed         also MPI_PACKED (MPI_Pack/Unpack/Pack_size)
 *   pair_elements  also MPI_Get_elements on the pair types (crashes MPICH 4.0.2
 *                  with SIGFPE) */
#include "common.h"
#include <complex.h>
#include <stdbool.h>
#include <wchar.h>

#define CNT 37
static int to, from;

/* exchange `bytes`-sized elements of dt along the ring; returns count seen */
static int pair_elements; /* also check Get_elements on pair types */
static void xfer(void *sb, void *rb, MPI_Datatype dt, const char *name, int tag, int elems) {
    MPI_Status st;
    int c = -1;
    MPI_OK(MPI_Sendrecv(sb, CNT, dt, to, tag, rb, CNT + 3, dt, from, tag, MPI_COMM_WORLD, &st));
    MPI_OK(MPI_Get_count(&st, dt, &c));
    CHECK(c == CNT, "%s: Get_count %d, expected %d", name, c, CNT);
    if (elems == CNT || pair_elements) {
        /* pair types are two basic elements each (MPI-3.1 sec. 4.1.11) */
        MPI_OK(MPI_Get_elements(&st, dt, &c));
        CHECK(c == elems, "%s: Get_elements %d, expected %d", name, c, elems);
    }
    CHECK(st.MPI_SOURCE == from && st.MPI_TAG == tag, "%s: status", name);
}

/* Integer-like types: byte pattern, memcmp, size == sizeof. */
#define T_BYTES(CT, DT, tag)                                                          \
    do {                                                                              \
        CT sb[CNT + 3], rb[CNT + 3];                                                  \
        int sz = -1;                                                                  \
        MPI_OK(MPI_Type_size(DT, &sz));                                               \
        CHECK(sz == (int)sizeof(CT), "%s: Type_size %d != sizeof %zu", #DT, sz, sizeof(CT)); \
        fill_pat((unsigned char *)sb, sizeof(CT) * CNT, g_rank * 1000 + tag);         \
        memset(rb, 0, sizeof rb);                                                     \
        xfer(sb, rb, DT, #DT, tag, CNT);                                                   \
        size_t bad = check_pat((unsigned char *)rb, sizeof(CT) * CNT, from * 1000 + tag); \
        CHECK(bad == (size_t)-1, "%s: byte %zu differs", #DT, bad);                   \
        MPI_Status st2;                                                               \
        int cb = -1;                                                                  \
        MPI_OK(MPI_Sendrecv(sb, CNT, DT, to, tag, rb, (int)sizeof rb, MPI_BYTE, from, tag, \
                            MPI_COMM_WORLD, &st2));                                   \
        MPI_OK(MPI_Get_count(&st2, MPI_BYTE, &cb));                                   \
        CHECK(cb == (int)sizeof(CT) * CNT, "%s: %d bytes on the wire as MPI_BYTE", #DT, cb); \
        tested++;                                                                     \
    } while (0)

/* Value types (floating, bool, complex): compare with == */
#define T_VALUES(CT, DT, tag, EXPR)                                                   \
    do {                                                                              \
        CT sb[CNT + 3], rb[CNT + 3];                                                  \
        int sz = -1;                                                                  \
        MPI_OK(MPI_Type_size(DT, &sz));                                               \
        CHECK(sz == (int)sizeof(CT), "%s: Type_size %d != sizeof %zu", #DT, sz, sizeof(CT)); \
        for (int i = 0; i < CNT; i++) { int r = g_rank; sb[i] = (CT)(EXPR); }         \
        memset(rb, 0, sizeof rb);                                                     \
        xfer(sb, rb, DT, #DT, tag, CNT);                                                   \
        for (int i = 0; i < CNT; i++) {                                               \
            int r = from;                                                             \
            CHECK(rb[i] == (CT)(EXPR), "%s: element %d differs", #DT, i);             \
        }                                                                             \
        tested++;                                                                     \
    } while (0)

/* Pair types (struct with padding): compare fields; size = sum of members. */
#define T_PAIR(VT, DT, tag)                                                           \
    do {                                                                              \
        struct { VT v; int i; } sb[CNT + 3], rb[CNT + 3];                             \
        int sz = -1;                                                                  \
        MPI_Aint lb = -1, ext = -1;                                                   \
        MPI_OK(MPI_Type_size(DT, &sz));                                               \
        MPI_OK(MPI_Type_get_extent(DT, &lb, &ext));                                   \
        CHECK(sz == (int)(sizeof(VT) + sizeof(int)), "%s: Type_size %d", #DT, sz);    \
        CHECK(lb == 0 && ext == (MPI_Aint)sizeof sb[0], "%s: lb %ld extent %ld, sizeof %zu", #DT, \
              (long)lb, (long)ext, sizeof sb[0]);                                     \
        for (int k = 0; k < CNT; k++) { sb[k].v = (VT)(g_rank * 3 + k); sb[k].i = -k - g_rank; } \
        memset(rb, 0, sizeof rb);                                                     \
        xfer(sb, rb, DT, #DT, tag, 2 * CNT);                                               \
        for (int k = 0; k < CNT; k++)                                                 \
            CHECK(rb[k].v == (VT)(from * 3 + k) && rb[k].i == -k - from, "%s: element %d", #DT, k); \
        tested++;                                                                     \
    } while (0)

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    to = (g_rank + 1) % g_size;
    from = (g_rank - 1 + g_size) % g_size;
    int tested = 0;
    pair_elements = argc > 1 && selected(argc, argv, "pair_elements");
    int packed = argc > 1 && selected(argc, argv, "packed");

    T_BYTES(char, MPI_CHAR, 1);
    T_BYTES(signed char, MPI_SIGNED_CHAR, 2);
    T_BYTES(unsigned char, MPI_UNSIGNED_CHAR, 3);
    T_BYTES(short, MPI_SHORT, 4);
    T_BYTES(unsigned short, MPI_UNSIGNED_SHORT, 5);
    T_BYTES(int, MPI_INT, 6);
    T_BYTES(unsigned, MPI_UNSIGNED, 7);
    T_BYTES(long, MPI_LONG, 8);
    T_BYTES(unsigned long, MPI_UNSIGNED_LONG, 9);
    T_BYTES(long long, MPI_LONG_LONG, 10);
    T_BYTES(long long, MPI_LONG_LONG_INT, 11);
    T_BYTES(unsigned long long, MPI_UNSIGNED_LONG_LONG, 12);
    T_BYTES(wchar_t, MPI_WCHAR, 13);
    T_BYTES(int8_t, MPI_INT8_T, 14);
    T_BYTES(int16_t, MPI_INT16_T, 15);
    T_BYTES(int32_t, MPI_INT32_T, 16);
    T_BYTES(int64_t, MPI_INT64_T, 17);
    T_BYTES(uint8_t, MPI_UINT8_T, 18);
    T_BYTES(uint16_t, MPI_UINT16_T, 19);
    T_BYTES(uint32_t, MPI_UINT32_T, 20);
    T_BYTES(uint64_t, MPI_UINT64_T, 21);
    T_BYTES(unsigned char, MPI_BYTE, 22);
    T_BYTES(MPI_Aint, MPI_AINT, 23);
    T_BYTES(MPI_Offset, MPI_OFFSET, 24);
    T_BYTES(MPI_Count, MPI_COUNT, 25);

    T_VALUES(float, MPI_FLOAT, 30, r * 1.25f + i * 0.5f - 3);
    T_VALUES(double, MPI_DOUBLE, 31, r * 1e100 + i * 0.1 - 1.0 / 3);
    T_VALUES(long double, MPI_LONG_DOUBLE, 32, r * 1e300L * 1e300L + i / 3.0L);
    T_VALUES(bool, MPI_C_BOOL, 33, (i + r) % 2 == 0);
    T_VALUES(float _Complex, MPI_C_FLOAT_COMPLEX, 34, r + i * 1.5f * I);
    T_VALUES(float _Complex, MPI_C_COMPLEX, 35, r - i * 0.25f * I);
    T_VALUES(double _Complex, MPI_C_DOUBLE_COMPLEX, 36, r / 3.0 + i * I);
    T_VALUES(long double _Complex, MPI_C_LONG_DOUBLE_COMPLEX, 37, r / 3.0L + i / 7.0L * I);

    T_PAIR(float, MPI_FLOAT_INT, 40);
    T_PAIR(double, MPI_DOUBLE_INT, 41);
    T_PAIR(long, MPI_LONG_INT, 42);
    T_PAIR(short, MPI_SHORT_INT, 43);
    T_PAIR(long double, MPI_LONG_DOUBLE_INT, 44);
    {   /* MPI_2INT: two ints, no padding */
        int sb[2 * (CNT + 3)], rb[2 * (CNT + 3)], sz;
        MPI_OK(MPI_Type_size(MPI_2INT, &sz));
        CHECK(sz == 2 * (int)sizeof(int), "MPI_2INT size %d", sz);
        for (int k = 0; k < 2 * CNT; k++) sb[k] = g_rank * 1000 - k;
        xfer(sb, rb, MPI_2INT, "MPI_2INT", 45, 2 * CNT);
        for (int k = 0; k < 2 * CNT; k++) CHECK(rb[k] == from * 1000 - k, "MPI_2INT elem %d", k);
        tested++;
    }
    if (packed) {   /* MPI_PACKED: pack ints + doubles, send the packed bytes */
        char pbuf[4096], rbuf[4096];
        int pos = 0, ints[CNT], psz = 0;
        double dbl[CNT];
        for (int k = 0; k < CNT; k++) { ints[k] = g_rank * 7 + k; dbl[k] = g_rank + k / 4.0; }
        MPI_OK(MPI_Pack_size(CNT, MPI_INT, MPI_COMM_WORLD, &psz));
        CHECK(psz >= CNT * (int)sizeof(int), "Pack_size %d", psz);
        MPI_OK(MPI_Pack(ints, CNT, MPI_INT, pbuf, sizeof pbuf, &pos, MPI_COMM_WORLD));
        MPI_OK(MPI_Pack(dbl, CNT, MPI_DOUBLE, pbuf, sizeof pbuf, &pos, MPI_COMM_WORLD));
        MPI_Status st;
        int c = -1;
        MPI_OK(MPI_Sendrecv(pbuf, pos, MPI_PACKED, to, 46, rbuf, sizeof rbuf, MPI_PACKED, from, 46,
                            MPI_COMM_WORLD, &st));
        MPI_OK(MPI_Get_count(&st, MPI_PACKED, &c));
        CHECK(c == pos, "PACKED count %d, sent %d", c, pos);
        int upos = 0;
        MPI_OK(MPI_Unpack(rbuf, c, &upos, ints, CNT, MPI_INT, MPI_COMM_WORLD));
        MPI_OK(MPI_Unpack(rbuf, c, &upos, dbl, CNT, MPI_DOUBLE, MPI_COMM_WORLD));
        CHECK(upos == pos, "unpack position %d != %d", upos, pos);
        for (int k = 0; k < CNT; k++)
            CHECK(ints[k] == from * 7 + k && dbl[k] == from + k / 4.0, "PACKED element %d", k);
        tested++;
    }
    /* Get_count with the wrong-size type gives MPI_UNDEFINED */
    {
        int sb[3] = {1, 2, 3}, rb[8], c = 0;
        MPI_Status st;
        MPI_OK(MPI_Sendrecv(sb, 3, MPI_INT, to, 47, rb, 8, MPI_INT, from, 47, MPI_COMM_WORLD, &st));
        MPI_OK(MPI_Get_count(&st, MPI_DOUBLE, &c));
        CHECK(c == MPI_UNDEFINED, "Get_count(DOUBLE) of 12 bytes = %d", c);
    }
    if (g_rank == 0) printf("tested %d datatypes\n", tested);
    return test_finish();
}
