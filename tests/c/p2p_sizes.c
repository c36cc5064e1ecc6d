/* Message sizes across eager/rendezvous with content checks, MPI ordering,
 * ANY_SOURCE/ANY_TAG, unexpected messages.
 * usage: p2p_sizes [sizes|order|anysource|unexpected ...] (default: all) */
#include "common.h"

static int to, from;
static const size_t SIZES[] = {0, 1, 8, 1024, 4095, 4096, 4097, 16383, 16384, 16385,
                               65535, 65536, 65537, 262144, 1 << 20, (1 << 20) + 3, 16 << 20};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define GUARD 64

static void check_recv(unsigned char *rb, size_t n, unsigned seed, MPI_Status *st, int tag, const char *how) {
    size_t bad = check_pat(rb, n, seed);
    if (bad != (size_t)-1) FAIL("%s size %zu: byte %zu wrong (0x%02x, expected 0x%02x)", how, n, bad, rb[bad], pat(seed, bad));
    for (size_t i = n; i < n + GUARD; i++)
        if (rb[i] != 0xA5) FAIL("%s size %zu: wrote past the message end at %zu", how, n, i);
    if (st) {
        int c = -1;
        MPI_OK(MPI_Get_count(st, MPI_BYTE, &c));
        CHECK(c == (int)n && st->MPI_SOURCE == from && st->MPI_TAG == tag,
              "%s size %zu: status count %d src %d tag %d", how, n, c, st->MPI_SOURCE, st->MPI_TAG);
    }
}

static void t_sizes(void) {
    size_t max = SIZES[NSIZES - 1];
    unsigned char *sb = malloc(max + GUARD), *rb = malloc(max + GUARD);
    MPI_Status st;
    MPI_Request rq, sq;
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = SIZES[k];
        for (int how = 0; how < 4; how++) {
            int tag = (int)k * 4 + how;
            unsigned seed_s = (unsigned)(g_rank * 131 + k * 7 + how), seed_r = (unsigned)(from * 131 + k * 7 + how);
            fill_pat(sb, n, seed_s);
            memset(rb, 0xA5, n + GUARD);
            switch (how) {
            case 0: /* Irecv + Send */
                MPI_OK(MPI_Irecv(rb, (int)n + GUARD, MPI_BYTE, from, tag, MPI_COMM_WORLD, &rq));
                MPI_OK(MPI_Send(sb, (int)n, MPI_BYTE, to, tag, MPI_COMM_WORLD));
                MPI_OK(MPI_Wait(&rq, &st));
                check_recv(rb, n, seed_r, &st, tag, "Irecv+Send");
                break;
            case 1: /* Isend + Recv (receive possibly posted late: unexpected path) */
                MPI_OK(MPI_Isend(sb, (int)n, MPI_BYTE, to, tag, MPI_COMM_WORLD, &sq));
                if (g_rank % 2) sleep_ms(5);
                MPI_OK(MPI_Recv(rb, (int)n + GUARD, MPI_BYTE, from, tag, MPI_COMM_WORLD, &st));
                MPI_OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));
                check_recv(rb, n, seed_r, &st, tag, "Isend+Recv");
                break;
            case 2:
                MPI_OK(MPI_Sendrecv(sb, (int)n, MPI_BYTE, to, tag, rb, (int)n + GUARD, MPI_BYTE, from, tag,
                                    MPI_COMM_WORLD, &st));
                check_recv(rb, n, seed_r, &st, tag, "Sendrecv");
                break;
            case 3: /* Issend + Irecv, as ints when possible */
                MPI_OK(MPI_Irecv(rb, (int)n + GUARD, MPI_BYTE, from, tag, MPI_COMM_WORLD, &rq));
                MPI_OK(MPI_Issend(sb, (int)n, MPI_BYTE, to, tag, MPI_COMM_WORLD, &sq));
                MPI_Request both[2] = {rq, sq};
                MPI_Status sts[2];
                MPI_OK(MPI_Waitall(2, both, sts));
                check_recv(rb, n, seed_r, &sts[0], tag, "Issend+Irecv");
                break;
            }
            /* sender buffer untouched */
            CHECK(check_pat(sb, n, seed_s) == (size_t)-1, "send buffer modified (size %zu)", n);
        }
    }
    free(sb);
    free(rb);
}

/* Non-overtaking: many messages with one tag (mixed sizes, so eager and
 * rendezvous interleave), then the same with ANY_TAG receives. */
static void t_order(void) {
    enum { M = 600, BIG = 200000 };
    unsigned char *sb = malloc((size_t)M * 64), *rb = malloc(BIG + 64), *big[M / 97 + 2];
    MPI_Request *rq = malloc(sizeof(MPI_Request) * M);
    for (int pass = 0; pass < 2; pass++) {
        int nbig = 0;
        for (int i = 0; i < M; i++) {
            int len = (i % 97 == 13) ? BIG : 5 + i % 50;
            unsigned char *p = (len == BIG) ? (big[nbig++] = malloc(BIG)) : sb + (size_t)i * 64;
            memset(p, 0, len);
            memcpy(p, &i, sizeof i);
            p[len - 1] = (unsigned char)i;
            int tag = pass == 0 ? 7 : 1000 + (i * 37) % 500;
            MPI_OK(MPI_Isend(p, len, MPI_BYTE, to, tag, MPI_COMM_WORLD, &rq[i]));
        }
        for (int i = 0; i < M; i++) {
            MPI_Status st;
            int v = -1, c = -1;
            MPI_OK(MPI_Recv(rb, BIG + 64, MPI_BYTE, from, pass == 0 ? 7 : MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            memcpy(&v, rb, sizeof v);
            MPI_OK(MPI_Get_count(&st, MPI_BYTE, &c));
            int len = (i % 97 == 13) ? BIG : 5 + i % 50;
            CHECK(v == i, "pass %d: message %d arrived in position %d (overtaking)", pass, v, i);
            CHECK(c == len && rb[len - 1] == (unsigned char)i, "pass %d msg %d: count %d (want %d)", pass, i, c, len);
            if (pass == 1) CHECK(st.MPI_TAG == 1000 + (i * 37) % 500, "ANY_TAG status tag %d", st.MPI_TAG);
        }
        MPI_OK(MPI_Waitall(M, rq, MPI_STATUSES_IGNORE));
        for (int b = 0; b < nbig; b++) free(big[b]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(sb);
    free(rb);
    free(rq);
}

/* Rank 0 receives from everybody with ANY_SOURCE/ANY_TAG; per-source order
 * must hold and status fields must describe each message. */
static void t_anysource(void) {
    enum { M = 50 };
    if (g_rank == 0) {
        int total = (g_size - 1) * M, *next = calloc(g_size, sizeof(int));
        for (int k = 0; k < total; k++) {
            int buf[8] = {0}, c = -1;
            MPI_Status st;
            MPI_OK(MPI_Recv(buf, 8, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            MPI_OK(MPI_Get_count(&st, MPI_INT, &c));
            int src = st.MPI_SOURCE;
            CHECK(src >= 1 && src < g_size, "status source %d", src);
            CHECK(buf[0] == src, "payload says rank %d, status says %d", buf[0], src);
            CHECK(buf[1] == next[src], "from %d got seq %d, expected %d", src, buf[1], next[src]);
            CHECK(st.MPI_TAG == src * 100 + buf[1] % 5, "status tag %d for src %d seq %d", st.MPI_TAG, src, buf[1]);
            CHECK(c == 2 + buf[1] % 6, "count %d for seq %d", c, buf[1]);
            next[src]++;
        }
        free(next);
    } else {
        for (int i = 0; i < M; i++) {
            int buf[8] = {g_rank, i, 0, 0, 0, 0, 0, 0};
            MPI_OK(MPI_Send(buf, 2 + i % 6, MPI_INT, 0, g_rank * 100 + i % 5, MPI_COMM_WORLD));
        }
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Sends (small and large) issued before the receives are posted. */
static void t_unexpected(void) {
    enum { M = 300, L = 1 << 20 };
    int (*sb)[16] = malloc(sizeof(int[16]) * M);
    unsigned char *lb = malloc(L), *lr = malloc(L + GUARD);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * (M + 1));
    fill_pat(lb, L, 555 + g_rank);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < 16; j++) sb[i][j] = g_rank * 100000 + i * 16 + j;
        MPI_OK(MPI_Isend(sb[i], 1 + i % 16, MPI_INT, to, i % 3, MPI_COMM_WORLD, &rq[i]));
    }
    MPI_OK(MPI_Isend(lb, L, MPI_BYTE, to, 77, MPI_COMM_WORLD, &rq[M]));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    sleep_ms(50);
    /* receive the large one first (it was sent last), then the rest by tag */
    MPI_Status st;
    memset(lr, 0xA5, L + GUARD);
    MPI_OK(MPI_Recv(lr, L + GUARD, MPI_BYTE, from, 77, MPI_COMM_WORLD, &st));
    check_recv(lr, L, 555 + from, &st, 77, "unexpected large");
    for (int t = 2; t >= 0; t--)
        for (int i = t; i < M; i += 3) {
            int rb[16], c;
            MPI_OK(MPI_Recv(rb, 16, MPI_INT, from, t, MPI_COMM_WORLD, &st));
            MPI_OK(MPI_Get_count(&st, MPI_INT, &c));
            CHECK(c == 1 + i % 16, "unexpected msg %d: count %d", i, c);
            for (int j = 0; j < c; j++)
                CHECK(rb[j] == from * 100000 + i * 16 + j, "unexpected msg %d elem %d = %d", i, j, rb[j]);
        }
    MPI_OK(MPI_Waitall(M + 1, rq, MPI_STATUSES_IGNORE));
    free(sb);
    free(lb);
    free(lr);
    free(rq);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    to = (g_rank + 1) % g_size;
    from = (g_rank - 1 + g_size) % g_size;
    if (selected(argc, argv, "sizes")) t_sizes();
    if (selected(argc, argv, "order")) t_order();
    if (selected(argc, argv, "anysource")) t_anysource();
    if (selected(argc, argv, "unexpected")) t_unexpected();
    return test_finish();
}
