/* Point-to-point with derived datatypes along a ring: every constructor
 * sent and received with verified contents and untouched gaps, blocking and
 * nonblocking, eager and rendezvous sizes, send-receive, probes, partial
 * receives (Get_count / Get_elements), freed types and freed requests.
 * usage: dtype_p2p [kinds] [nonblocking] [large] [sendrecv] [probe]
 *                  [partial] [freed] [truncate] */
#include "common.h"
#include <stddef.h>

static int to, from;
#define POISON 0xee

/* Check that `buf` (bytes) holds the pattern of `seed` exactly at the bytes
 * that `count` elements of `dt` cover, and POISON everywhere else. */
static void check_typed(const unsigned char *buf, size_t len, MPI_Datatype dt, int count, unsigned seed,
                        const char *what) {
    /* Where the data lies: unpack a buffer of 0x01 bytes into a zeroed map. */
    int size;
    MPI_OK(MPI_Type_size(dt, &size));
    size_t packed_len = (size_t)size * count;
    unsigned char *ones = malloc(packed_len + 1), *map = calloc(len, 1);
    memset(ones, 1, packed_len + 1);
    int pos = 0;
    MPI_OK(MPI_Unpack(ones, (int)packed_len, &pos, map, count, dt, MPI_COMM_SELF));
    for (size_t i = 0; i < len; i++) {
        if (map[i])
            CHECK(buf[i] == pat(seed, i), "%s: data byte %zu is %#x, expected %#x", what, i, buf[i], pat(seed, i));
        else
            CHECK(buf[i] == POISON, "%s: gap byte %zu was written (%#x)", what, i, buf[i]);
    }
    free(ones);
    free(map);
}

/* The types under test; each fits in BUFSZ bytes for COUNT elements. */
#define COUNT 3
#define BUFSZ 4096
#define NKINDS 9
static const char *kind_names[NKINDS] = {"vector", "hvector", "indexed", "hindexed", "indexed_block",
                                         "hindexed_block", "struct", "subarray", "darray"};

struct rec { int a; double b; char c[3]; };

static MPI_Datatype make_kind(int k) {
    MPI_Datatype t = MPI_DATATYPE_NULL;
    switch (k) {
    case 0: MPI_OK(MPI_Type_vector(4, 2, 5, MPI_INT, &t)); break;
    case 1: MPI_OK(MPI_Type_create_hvector(3, 3, 14, MPI_SHORT, &t)); break;
    case 2: {
        int bl[] = {2, 1, 3}, dis[] = {5, 0, 8};
        MPI_OK(MPI_Type_indexed(3, bl, dis, MPI_FLOAT, &t));
        break;
    }
    case 3: {
        int bl[] = {1, 2};
        MPI_Aint dis[] = {24, 0};
        MPI_OK(MPI_Type_create_hindexed(2, bl, dis, MPI_DOUBLE, &t));
        break;
    }
    case 4: {
        int dis[] = {3, 0, 7};
        MPI_OK(MPI_Type_create_indexed_block(3, 2, dis, MPI_INT, &t));
        break;
    }
    case 5: {
        MPI_Aint dis[] = {5, 17, 40};
        MPI_OK(MPI_Type_create_hindexed_block(3, 3, dis, MPI_CHAR, &t));
        break;
    }
    case 6: {
        int bl[] = {1, 1, 3};
        MPI_Aint dis[] = {offsetof(struct rec, a), offsetof(struct rec, b), offsetof(struct rec, c)};
        MPI_Datatype types[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
        MPI_OK(MPI_Type_create_struct(3, bl, dis, types, &t));
        break;
    }
    case 7: {
        int sizes[] = {6, 7}, subsizes[] = {3, 4}, starts[] = {2, 1};
        MPI_OK(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &t));
        break;
    }
    case 8: {
        int gsizes[] = {6, 8}, distribs[] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK};
        int dargs[] = {2, MPI_DISTRIBUTE_DFLT_DARG}, psizes[] = {2, 2};
        MPI_OK(MPI_Type_create_darray(4, 1, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_FORTRAN, MPI_INT, &t));
        break;
    }
    }
    MPI_OK(MPI_Type_commit(&t));
    MPI_Aint lb, extent;
    MPI_OK(MPI_Type_get_extent(t, &lb, &extent));
    CHECK(lb >= 0 && lb + COUNT * extent <= BUFSZ, "%s does not fit the test buffer", kind_names[k]);
    return t;
}

/* Blocking send of every kind, received with the same type and, as a
 * check of the packed order, with the same signature as plain basic types. */
static void t_kinds(void) {
    static unsigned char sbuf[BUFSZ], rbuf[BUFSZ];
    for (int k = 0; k < NKINDS; k++) {
        MPI_Datatype t = make_kind(k);
        unsigned seed_out = g_rank * 100 + k, seed_in = from * 100 + k;
        fill_pat(sbuf, BUFSZ, seed_out);
        memset(rbuf, POISON, BUFSZ);
        MPI_Status st;
        MPI_OK(MPI_Sendrecv(sbuf, COUNT, t, to, k, rbuf, COUNT, t, from, k, MPI_COMM_WORLD, &st));
        int c = -1;
        MPI_OK(MPI_Get_count(&st, t, &c));
        CHECK(c == COUNT, "%s: Get_count %d", kind_names[k], c);
        check_typed(rbuf, BUFSZ, t, COUNT, seed_in, kind_names[k]);
        /* blocking Send (the eager path without a request) into a posted receive */
        MPI_Request rq;
        memset(rbuf, POISON, BUFSZ);
        MPI_OK(MPI_Irecv(rbuf, COUNT, t, from, 50 + k, MPI_COMM_WORLD, &rq));
        MPI_OK(MPI_Send(sbuf, COUNT, t, to, 50 + k, MPI_COMM_WORLD));
        MPI_OK(MPI_Wait(&rq, &st));
        check_typed(rbuf, BUFSZ, t, COUNT, seed_in, kind_names[k]);
        /* blocking Recv */
        memset(rbuf, POISON, BUFSZ);
        MPI_OK(MPI_Isend(sbuf, COUNT, t, to, 70 + k, MPI_COMM_WORLD, &rq));
        MPI_OK(MPI_Recv(rbuf, COUNT, t, from, 70 + k, MPI_COMM_WORLD, &st));
        MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        check_typed(rbuf, BUFSZ, t, COUNT, seed_in, kind_names[k]);
        /* received as bytes: equals MPI_Pack of the sender's data */
        int size;
        MPI_OK(MPI_Type_size(t, &size));
        unsigned char packed[BUFSZ], expected[BUFSZ];
        int pos = 0;
        fill_pat(sbuf, BUFSZ, seed_in); /* what the left neighbour sent */
        MPI_OK(MPI_Pack(sbuf, COUNT, t, expected, sizeof expected, &pos, MPI_COMM_WORLD));
        fill_pat(sbuf, BUFSZ, seed_out);
        MPI_OK(MPI_Sendrecv(sbuf, COUNT, t, to, 100 + k, packed, sizeof packed, MPI_BYTE, from, 100 + k,
                            MPI_COMM_WORLD, &st));
        MPI_OK(MPI_Get_count(&st, MPI_BYTE, &c));
        CHECK(c == size * COUNT && c == pos, "%s: %d bytes on the wire, expected %d", kind_names[k], c, size * COUNT);
        CHECK(memcmp(packed, expected, c) == 0, "%s: wire bytes differ from MPI_Pack", kind_names[k]);
        MPI_OK(MPI_Type_free(&t));
    }
}

/* Isend/Irecv of every kind at once, completed by Waitall, Waitany, Testsome. */
static void t_nonblocking(void) {
    static unsigned char sbuf[NKINDS][BUFSZ], rbuf[NKINDS][BUFSZ];
    MPI_Datatype t[NKINDS];
    for (int round = 0; round < 3; round++) {
        MPI_Request rq[2 * NKINDS];
        for (int k = 0; k < NKINDS; k++) {
            t[k] = make_kind(k);
            fill_pat(sbuf[k], BUFSZ, g_rank * 1000 + round * 100 + k);
            memset(rbuf[k], POISON, BUFSZ);
            MPI_OK(MPI_Irecv(rbuf[k], COUNT, t[k], from, 200 + k, MPI_COMM_WORLD, &rq[k]));
        }
        for (int k = 0; k < NKINDS; k++)
            MPI_OK(MPI_Isend(sbuf[k], COUNT, t[k], to, 200 + k, MPI_COMM_WORLD, &rq[NKINDS + k]));
        if (round == 0) {
            MPI_OK(MPI_Waitall(2 * NKINDS, rq, MPI_STATUSES_IGNORE));
        } else if (round == 1) {
            for (int n = 0; n < 2 * NKINDS; n++) {
                int idx;
                MPI_OK(MPI_Waitany(2 * NKINDS, rq, &idx, MPI_STATUS_IGNORE));
                CHECK(idx != MPI_UNDEFINED && rq[idx] == MPI_REQUEST_NULL, "Waitany");
            }
        } else {
            int done = 0, out, idx[2 * NKINDS];
            while (done < 2 * NKINDS) {
                MPI_OK(MPI_Testsome(2 * NKINDS, rq, &out, idx, MPI_STATUSES_IGNORE));
                if (out != MPI_UNDEFINED) done += out;
            }
        }
        for (int k = 0; k < NKINDS; k++) {
            check_typed(rbuf[k], BUFSZ, t[k], COUNT, from * 1000 + round * 100 + k, kind_names[k]);
            MPI_OK(MPI_Type_free(&t[k]));
        }
    }
}

/* Messages far above the eager limit: a vector with a million-byte span. */
static void t_large(void) {
    int n = 40000;
    MPI_Datatype v;
    MPI_OK(MPI_Type_vector(n, 3, 5, MPI_INT, &v));
    MPI_OK(MPI_Type_commit(&v));
    size_t len = (size_t)(5 * (n - 1) + 3) * sizeof(int);
    unsigned char *s = malloc(len), *r = malloc(len);
    fill_pat(s, len, g_rank + 7);
    memset(r, POISON, len);
    MPI_Request rq[2];
    MPI_OK(MPI_Irecv(r, 1, v, from, 300, MPI_COMM_WORLD, &rq[0]));
    MPI_OK(MPI_Isend(s, 1, v, to, 300, MPI_COMM_WORLD, &rq[1]));
    int flag = 0;
    while (!flag) MPI_OK(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    check_typed(r, len, v, 1, from + 7, "large vector");
    /* and Ssend into a posted receive */
    memset(r, POISON, len);
    MPI_OK(MPI_Irecv(r, 1, v, from, 301, MPI_COMM_WORLD, &rq[0]));
    MPI_OK(MPI_Ssend(s, 1, v, to, 301, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    check_typed(r, len, v, 1, from + 7, "large vector (Ssend)");
    free(s);
    free(r);
    MPI_OK(MPI_Type_free(&v));
}

/* Sendrecv with different send and receive types of the same signature,
 * and Sendrecv_replace with a vector. */
static void t_sendrecv(void) {
    MPI_Datatype v, idx;
    MPI_OK(MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &v));
    MPI_OK(MPI_Type_commit(&v));
    int bl[] = {1, 1, 1}, dis[] = {4, 2, 0};
    MPI_OK(MPI_Type_indexed(3, bl, dis, MPI_DOUBLE, &idx));
    MPI_OK(MPI_Type_commit(&idx));
    double s[5], r[5];
    for (int i = 0; i < 5; i++) s[i] = g_rank * 10 + i, r[i] = -1;
    MPI_Status st;
    MPI_OK(MPI_Sendrecv(s, 1, v, to, 400, r, 1, idx, from, 400, MPI_COMM_WORLD, &st));
    /* sender's elements 0, 2, 4 land at 4, 2, 0 */
    CHECK(r[4] == from * 10 + 0 && r[2] == from * 10 + 2 && r[0] == from * 10 + 4, "sendrecv reversed");
    CHECK(r[1] == -1 && r[3] == -1, "sendrecv gaps");
    double b[5];
    for (int i = 0; i < 5; i++) b[i] = g_rank * 10 + i;
    MPI_OK(MPI_Sendrecv_replace(b, 1, v, to, 401, from, 401, MPI_COMM_WORLD, &st));
    for (int i = 0; i < 5; i++) {
        double expected = (i % 2 == 0) ? from * 10 + i : g_rank * 10 + i;
        CHECK(b[i] == expected, "sendrecv_replace element %d is %g, expected %g", i, b[i], expected);
    }
    int c;
    MPI_OK(MPI_Get_count(&st, v, &c));
    CHECK(c == 1, "sendrecv_replace count %d", c);
    MPI_OK(MPI_Type_free(&v));
    MPI_OK(MPI_Type_free(&idx));
}

/* Probe / Get_count with a derived type before receiving; Mprobe + Mrecv. */
static void t_probe(void) {
    MPI_Datatype v;
    MPI_OK(MPI_Type_vector(2, 2, 3, MPI_INT, &v));
    MPI_OK(MPI_Type_commit(&v));
    int s[6 * 5], r[6 * 5];
    for (int i = 0; i < 30; i++) s[i] = g_rank * 100 + i;
    MPI_Request rq;
    MPI_OK(MPI_Isend(s, 5, v, to, 500, MPI_COMM_WORLD, &rq));
    MPI_Status st;
    MPI_OK(MPI_Probe(from, 500, MPI_COMM_WORLD, &st));
    int c, e;
    MPI_OK(MPI_Get_count(&st, v, &c));
    MPI_OK(MPI_Get_elements(&st, v, &e));
    CHECK(c == 5 && e == 20, "probe: count %d elements %d", c, e);
    for (int i = 0; i < 30; i++) r[i] = -1;
    MPI_OK(MPI_Recv(r, c, v, from, 500, MPI_COMM_WORLD, &st));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int el = 0; el < 5; el++)
        for (int i = 0; i < 5; i++) {
            int at = el * 5 + i, in_data = i != 2;
            /* vector(2,2,3) of int: ints 0,1,3,4 of each 5-int extent; int 2 is a gap */
            CHECK(r[at] == (in_data ? from * 100 + at : -1), "probe recv int %d is %d", at, r[at]);
        }
    /* matched probe */
    MPI_OK(MPI_Isend(s, 5, v, to, 501, MPI_COMM_WORLD, &rq));
    MPI_Message msg;
    MPI_OK(MPI_Mprobe(from, 501, MPI_COMM_WORLD, &msg, &st));
    for (int i = 0; i < 30; i++) r[i] = -1;
    MPI_OK(MPI_Mrecv(r, 5, v, &msg, &st));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(msg == MPI_MESSAGE_NULL, "Mrecv sets the message to MPI_MESSAGE_NULL");
    for (int at = 0; at < 25; at++) {
        int i = at % 5, in_data = i != 2;
        CHECK(r[at] == (in_data ? from * 100 + at : -1), "mrecv int %d is %d", at, r[at]);
    }
    MPI_OK(MPI_Type_free(&v));
}

/* A receive longer than the message: whole elements, then part of one. */
static void t_partial(void) {
    /* 5 ints into 4 elements of vector(2,1,2) = {int, gap, int, gap} */
    MPI_Datatype pairv;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &pairv));
    MPI_OK(MPI_Type_commit(&pairv));
    int five[5], r[16];
    for (int i = 0; i < 5; i++) five[i] = g_rank * 10 + i + 1;
    for (int i = 0; i < 16; i++) r[i] = -1;
    MPI_Status st;
    MPI_OK(MPI_Sendrecv(five, 5, MPI_INT, to, 600, r, 4, pairv, from, 600, MPI_COMM_WORLD, &st));
    int c, e;
    MPI_OK(MPI_Get_count(&st, pairv, &c));
    MPI_OK(MPI_Get_elements(&st, pairv, &e));
    CHECK(c == MPI_UNDEFINED, "partial: Get_count %d, expected MPI_UNDEFINED", c);
    CHECK(e == 5, "partial: Get_elements %d, expected 5", e);
    /* vector extent is 3 ints: data at 0,2 | 3,5 | 6,8 | 9,11 */
    int expect_at[] = {0, 2, 3, 5, 6};
    for (int i = 0; i < 16; i++) {
        int want = -1;
        for (int k = 0; k < 5; k++)
            if (expect_at[k] == i) want = from * 10 + k + 1;
        CHECK(r[i] == want, "partial: int %d is %d, expected %d", i, r[i], want);
    }
    /* struct {int, double} x2 receiving {int, double, int}: 3 elements, count undefined */
    struct id { int i; double d; } recv[2];
    struct idi { int i; double d; int j; } send = {g_rank, g_rank + 0.5, g_rank + 7};
    MPI_Datatype tid, tidi;
    int bl[] = {1, 1, 1};
    MPI_Aint dis2[] = {offsetof(struct id, i), offsetof(struct id, d)};
    MPI_Aint dis3[] = {offsetof(struct idi, i), offsetof(struct idi, d), offsetof(struct idi, j)};
    MPI_Datatype ty2[] = {MPI_INT, MPI_DOUBLE}, ty3[] = {MPI_INT, MPI_DOUBLE, MPI_INT};
    MPI_OK(MPI_Type_create_struct(2, bl, dis2, ty2, &tid));
    MPI_OK(MPI_Type_create_struct(3, bl, dis3, ty3, &tidi));
    MPI_OK(MPI_Type_commit(&tid));
    MPI_OK(MPI_Type_commit(&tidi));
    memset(recv, POISON, sizeof recv);
    MPI_OK(MPI_Sendrecv(&send, 1, tidi, to, 601, recv, 2, tid, from, 601, MPI_COMM_WORLD, &st));
    MPI_OK(MPI_Get_count(&st, tid, &c));
    MPI_OK(MPI_Get_elements(&st, tid, &e));
    CHECK(c == MPI_UNDEFINED && e == 3, "struct partial: count %d elements %d", c, e);
    CHECK(recv[0].i == from && recv[0].d == from + 0.5 && recv[1].i == from + 7, "struct partial contents");
    unsigned char poison[sizeof(double)];
    memset(poison, POISON, sizeof poison);
    CHECK(memcmp(&recv[1].d, poison, sizeof poison) == 0, "struct partial: unreceived double written");
    MPI_Count ex;
    MPI_OK(MPI_Get_elements_x(&st, tid, &ex));
    CHECK(ex == 3, "Get_elements_x %ld", (long)ex);
    MPI_OK(MPI_Type_free(&pairv));
    MPI_OK(MPI_Type_free(&tid));
    MPI_OK(MPI_Type_free(&tidi));
}

/* A type freed while requests use it keeps working; a receive freed with
 * MPI_Request_free still lands in the buffer. */
static void t_freed(void) {
    MPI_Datatype v, w;
    MPI_OK(MPI_Type_vector(3, 1, 3, MPI_INT, &v));
    MPI_OK(MPI_Type_commit(&v));
    MPI_OK(MPI_Type_dup(v, &w)); /* dup of a committed type is committed */
    int s[9], r[9], r2[9];
    for (int i = 0; i < 9; i++) s[i] = g_rank * 100 + i, r[i] = -1, r2[i] = -1;
    MPI_Request rq[2], fr;
    MPI_OK(MPI_Irecv(r, 1, v, from, 700, MPI_COMM_WORLD, &rq[0]));
    MPI_OK(MPI_Irecv(r2, 1, w, from, 701, MPI_COMM_WORLD, &fr));
    MPI_OK(MPI_Isend(s, 1, v, to, 700, MPI_COMM_WORLD, &rq[1]));
    MPI_OK(MPI_Type_free(&v));
    MPI_OK(MPI_Type_free(&w));
    MPI_OK(MPI_Request_free(&fr));
    CHECK(fr == MPI_REQUEST_NULL, "Request_free sets MPI_REQUEST_NULL");
    MPI_OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 9; i++) CHECK(r[i] == (i % 3 == 0 ? from * 100 + i : -1), "freed type: int %d is %d", i, r[i]);
    /* the freed receive: message, then an acknowledgement that it was sent */
    MPI_Datatype u;
    MPI_OK(MPI_Type_vector(3, 1, 3, MPI_INT, &u));
    MPI_OK(MPI_Type_commit(&u));
    MPI_OK(MPI_Send(s, 1, u, to, 701, MPI_COMM_WORLD));
    int token = 0, token_in = -1;
    MPI_OK(MPI_Sendrecv(&token, 1, MPI_INT, to, 702, &token_in, 1, MPI_INT, from, 702, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < 9; i++)
        CHECK(r2[i] == (i % 3 == 0 ? from * 100 + i : -1), "freed request: int %d is %d", i, r2[i]);
    MPI_OK(MPI_Type_free(&u));
}

/* A message longer than a derived receive: MPI_ERR_TRUNCATE, and what fit
 * arrives without touching the gaps. */
static void t_truncate(void) {
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Datatype v;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &v));
    MPI_OK(MPI_Type_commit(&v));
    int s[8], r[8];
    for (int i = 0; i < 8; i++) s[i] = g_rank * 10 + i, r[i] = -1;
    MPI_Request rq;
    MPI_OK(MPI_Isend(s, 6, MPI_INT, to, 800, MPI_COMM_WORLD, &rq));
    MPI_Status st;
    int rc = MPI_Recv(r, 2, v, from, 800, MPI_COMM_WORLD, &st);
    int cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "truncated derived receive gives class %d", cls);
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    /* What lands in the buffer on truncation is up to the implementation,
     * but memory outside the type map (ints 1, 4, 6, 7) is never written. */
    int gaps[] = {1, 4, 6, 7};
    for (int i = 0; i < 4; i++) CHECK(r[gaps[i]] == -1, "truncate: gap int %d was written", gaps[i]);
    MPI_OK(MPI_Type_free(&v));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    to = (g_rank + 1) % g_size;
    from = (g_rank - 1 + g_size) % g_size;
    if (selected(argc, argv, "kinds")) t_kinds();
    if (selected(argc, argv, "nonblocking")) t_nonblocking();
    if (selected(argc, argv, "large")) t_large();
    if (selected(argc, argv, "sendrecv")) t_sendrecv();
    if (selected(argc, argv, "probe")) t_probe();
    if (selected(argc, argv, "partial")) t_partial();
    if (selected(argc, argv, "freed")) t_freed();
    if (selected(argc, argv, "truncate")) t_truncate();
    return test_finish();
}
