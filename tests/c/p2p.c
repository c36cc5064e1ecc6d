/* Point-to-point semantics on a ring (works for any size, including 1 where
 * every rank talks to itself).  usage: p2p [subtest ...]  (default: all)
 * subtests: modes nonblocking issend persistent waittest probe sendrecv
 *           getcount cancel getstatus procnull ignore procnull_nb getelements_derived */
#include "common.h"

static int to, from;
#define N 64

static void fill_int(int *b, int n, int seed) { for (int i = 0; i < n; i++) b[i] = seed * 1000003 + i; }
static void check_int(const int *b, int n, int seed, const char *what) {
    for (int i = 0; i < n; i++)
        if (b[i] != seed * 1000003 + i) FAIL("%s: element %d is %d, expected %d", what, i, b[i], seed * 1000003 + i);
}
static void check_status(MPI_Status *st, int src, int tag, MPI_Datatype dt, int count, const char *what) {
    int c = -1;
    MPI_OK(MPI_Get_count(st, dt, &c));
    CHECK(st->MPI_SOURCE == src, "%s: status source %d, expected %d", what, st->MPI_SOURCE, src);
    CHECK(st->MPI_TAG == tag, "%s: status tag %d, expected %d", what, st->MPI_TAG, tag);
    CHECK(c == count, "%s: count %d, expected %d", what, c, count);
}

/* Send / Ssend / Rsend / Bsend, each into a pre-posted Irecv. */
static void t_modes(void) {
    int sbuf[N], rbuf[N];
    MPI_Request rq;
    MPI_Status st;
    for (int mode = 0; mode < 4; mode++) {
        int tag = 10 + mode;
        memset(rbuf, 0, sizeof rbuf);
        MPI_OK(MPI_Irecv(rbuf, N, MPI_INT, from, tag, MPI_COMM_WORLD, &rq));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* receive posted everywhere: Rsend legal */
        fill_int(sbuf, N, g_rank * 10 + mode);
        if (mode == 0) MPI_OK(MPI_Send(sbuf, N, MPI_INT, to, tag, MPI_COMM_WORLD));
        if (mode == 1) MPI_OK(MPI_Ssend(sbuf, N, MPI_INT, to, tag, MPI_COMM_WORLD));
        if (mode == 2) MPI_OK(MPI_Rsend(sbuf, N, MPI_INT, to, tag, MPI_COMM_WORLD));
        if (mode == 3) {
            int bsz = 4 * (N * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
            char *bb = malloc(bsz);
            MPI_OK(MPI_Buffer_attach(bb, bsz));
            MPI_OK(MPI_Bsend(sbuf, N, MPI_INT, to, tag, MPI_COMM_WORLD));
            memset(sbuf, 0xee, sizeof sbuf); /* Bsend copied the data */
            void *det = NULL;
            int dsz = 0;
            MPI_OK(MPI_Buffer_detach(&det, &dsz)); /* blocks until buffered msgs are gone */
            CHECK(det == bb && dsz == bsz, "Buffer_detach gave %p/%d, attached %p/%d", det, dsz, (void *)bb, bsz);
            free(bb);
        }
        MPI_OK(MPI_Wait(&rq, &st));
        CHECK(rq == MPI_REQUEST_NULL, "request not nulled by Wait");
        check_status(&st, from, tag, MPI_INT, N, "modes");
        check_int(rbuf, N, from * 10 + mode, "modes");
    }
}

/* Isend / Issend / Irsend / Ibsend with Irecv, Waitall. */
static void t_nonblocking(void) {
    int sbuf[4][N], rbuf[4][N];
    MPI_Request rr[4], sr[4];
    MPI_Status st[4];
    int bsz = N * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
    char *bb = malloc(bsz);
    MPI_OK(MPI_Buffer_attach(bb, bsz));
    memset(rbuf, 0, sizeof rbuf);
    for (int m = 0; m < 4; m++) MPI_OK(MPI_Irecv(rbuf[m], N, MPI_INT, from, 20 + m, MPI_COMM_WORLD, &rr[m]));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int m = 0; m < 4; m++) fill_int(sbuf[m], N, g_rank * 100 + m);
    MPI_OK(MPI_Isend(sbuf[0], N, MPI_INT, to, 20, MPI_COMM_WORLD, &sr[0]));
    MPI_OK(MPI_Issend(sbuf[1], N, MPI_INT, to, 21, MPI_COMM_WORLD, &sr[1]));
    MPI_OK(MPI_Irsend(sbuf[2], N, MPI_INT, to, 22, MPI_COMM_WORLD, &sr[2]));
    MPI_OK(MPI_Ibsend(sbuf[3], N, MPI_INT, to, 23, MPI_COMM_WORLD, &sr[3]));
    MPI_OK(MPI_Waitall(4, rr, st));
    MPI_OK(MPI_Waitall(4, sr, MPI_STATUSES_IGNORE));
    for (int m = 0; m < 4; m++) {
        CHECK(rr[m] == MPI_REQUEST_NULL && sr[m] == MPI_REQUEST_NULL, "Waitall left a request");
        check_status(&st[m], from, 20 + m, MPI_INT, N, "nonblocking");
        check_int(rbuf[m], N, from * 100 + m, "nonblocking");
    }
    void *det;
    int dsz;
    MPI_OK(MPI_Buffer_detach(&det, &dsz));
    free(bb);
}

/* Issend must not complete before the matching receive is posted. */
static void t_issend(void) {
    if (g_size < 2) return;
    int v = 42, go = 1, r = 0, flag = 0;
    MPI_Request rq;
    if (g_rank == 0) {
        MPI_OK(MPI_Issend(&v, 1, MPI_INT, 1, 30, MPI_COMM_WORLD, &rq));
        for (int i = 0; i < 50; i++) {
            MPI_OK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag, "Issend completed before the receive was posted");
            sleep_ms(2);
        }
        MPI_OK(MPI_Send(&go, 1, MPI_INT, 1, 31, MPI_COMM_WORLD));
        MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    } else if (g_rank == 1) {
        MPI_OK(MPI_Recv(&go, 1, MPI_INT, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Recv(&r, 1, MPI_INT, 0, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(r == 42, "got %d", r);
    }
}

/* Send_init / Recv_init / Start / Startall / Request_free. */
static void t_persistent(void) {
    int sbuf[N], rbuf[N];
    MPI_Request rq[2];
    MPI_Status st[2];
    MPI_OK(MPI_Recv_init(rbuf, N, MPI_INT, from, 40, MPI_COMM_WORLD, &rq[0]));
    MPI_OK(MPI_Send_init(sbuf, N, MPI_INT, to, 40, MPI_COMM_WORLD, &rq[1]));
    for (int it = 0; it < 10; it++) {
        fill_int(sbuf, N, g_rank * 1000 + it);
        memset(rbuf, 0, sizeof rbuf);
        if (it % 2) {
            MPI_OK(MPI_Startall(2, rq));
        } else {
            MPI_OK(MPI_Start(&rq[0]));
            MPI_OK(MPI_Start(&rq[1]));
        }
        MPI_OK(MPI_Waitall(2, rq, st));
        CHECK(rq[0] != MPI_REQUEST_NULL && rq[1] != MPI_REQUEST_NULL, "persistent request freed by Waitall");
        check_status(&st[0], from, 40, MPI_INT, N, "persistent");
        check_int(rbuf, N, from * 1000 + it, "persistent");
    }
    /* inactive persistent request: Wait returns immediately with empty status */
    MPI_Status est;
    MPI_OK(MPI_Wait(&rq[0], &est));
    CHECK(rq[0] != MPI_REQUEST_NULL, "inactive persistent request nulled");
    CHECK(est.MPI_SOURCE == MPI_ANY_SOURCE && est.MPI_TAG == MPI_ANY_TAG,
          "inactive wait status src %d tag %d", est.MPI_SOURCE, est.MPI_TAG);
    MPI_OK(MPI_Request_free(&rq[0]));
    MPI_OK(MPI_Request_free(&rq[1]));
    CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL, "Request_free did not null");
    /* Request_free on an active send: the message must still be delivered */
    MPI_Request s;
    int v = g_rank + 7, r = -1;
    MPI_OK(MPI_Isend(&v, 1, MPI_INT, to, 41, MPI_COMM_WORLD, &s));
    MPI_OK(MPI_Request_free(&s));
    MPI_OK(MPI_Recv(&r, 1, MPI_INT, from, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(r == from + 7, "freed-send message %d", r);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Wait/Test families. */
#define K 8
static void post_k(int base, int (*rbuf)[N], MPI_Request *rr, MPI_Request *sr, int (*sbuf)[N]) {
    for (int k = 0; k < K; k++) MPI_OK(MPI_Irecv(rbuf[k], N, MPI_INT, from, base + k, MPI_COMM_WORLD, &rr[k]));
    for (int k = K - 1; k >= 0; k--) { /* sent in reverse order of the receives */
        fill_int(sbuf[k], N, g_rank * 50 + k);
        MPI_OK(MPI_Isend(sbuf[k], N, MPI_INT, to, base + k, MPI_COMM_WORLD, &sr[k]));
    }
}
static void t_waittest(void) {
    int sbuf[K][N], rbuf[K][N], seen[K];
    MPI_Request rr[K], sr[K];
    MPI_Status st, sts[K];
    int idx, flag, outc, ind[K];

    /* Waitany */
    post_k(100, rbuf, rr, sr, sbuf);
    memset(seen, 0, sizeof seen);
    for (int n = 0; n < K; n++) {
        MPI_OK(MPI_Waitany(K, rr, &idx, &st));
        CHECK(idx >= 0 && idx < K && !seen[idx], "Waitany index %d", idx);
        CHECK(rr[idx] == MPI_REQUEST_NULL, "Waitany did not null request");
        seen[idx] = 1;
        check_status(&st, from, 100 + idx, MPI_INT, N, "Waitany");
        check_int(rbuf[idx], N, from * 50 + idx, "Waitany");
    }
    MPI_OK(MPI_Waitany(K, rr, &idx, &st));
    CHECK(idx == MPI_UNDEFINED, "Waitany on all-null gave %d", idx);
    MPI_OK(MPI_Waitall(K, sr, MPI_STATUSES_IGNORE));

    /* Waitsome */
    post_k(200, rbuf, rr, sr, sbuf);
    memset(seen, 0, sizeof seen);
    for (int done = 0; done < K;) {
        MPI_OK(MPI_Waitsome(K, rr, &outc, ind, sts));
        CHECK(outc >= 1 && outc <= K - done, "Waitsome outcount %d", outc);
        for (int j = 0; j < outc; j++) {
            int k = ind[j];
            CHECK(k >= 0 && k < K && !seen[k], "Waitsome index %d", k);
            seen[k] = 1;
            check_status(&sts[j], from, 200 + k, MPI_INT, N, "Waitsome");
            check_int(rbuf[k], N, from * 50 + k, "Waitsome");
        }
        done += outc;
    }
    MPI_OK(MPI_Waitsome(K, rr, &outc, ind, sts));
    CHECK(outc == MPI_UNDEFINED, "Waitsome on all-null gave %d", outc);
    MPI_OK(MPI_Waitall(K, sr, MPI_STATUSES_IGNORE));

    /* Testany */
    post_k(300, rbuf, rr, sr, sbuf);
    memset(seen, 0, sizeof seen);
    double t0 = MPI_Wtime();
    for (int n = 0; n < K;) {
        MPI_OK(MPI_Testany(K, rr, &idx, &flag, &st));
        if (flag) {
            CHECK(idx >= 0 && idx < K && !seen[idx], "Testany index %d", idx);
            seen[idx] = 1;
            check_status(&st, from, 300 + idx, MPI_INT, N, "Testany");
            check_int(rbuf[idx], N, from * 50 + idx, "Testany");
            n++;
        } else CHECK(idx == MPI_UNDEFINED, "Testany flag 0 with index %d", idx);
        CHECK(MPI_Wtime() - t0 < 30, "Testany never completed");
    }
    MPI_OK(MPI_Testany(K, rr, &idx, &flag, &st));
    CHECK(flag && idx == MPI_UNDEFINED, "Testany on all-null: flag %d idx %d", flag, idx);
    MPI_OK(MPI_Waitall(K, sr, MPI_STATUSES_IGNORE));

    /* Testsome */
    post_k(400, rbuf, rr, sr, sbuf);
    memset(seen, 0, sizeof seen);
    t0 = MPI_Wtime();
    for (int done = 0; done < K;) {
        MPI_OK(MPI_Testsome(K, rr, &outc, ind, sts));
        CHECK(outc >= 0 && outc <= K - done, "Testsome outcount %d", outc);
        for (int j = 0; j < outc; j++) {
            int k = ind[j];
            CHECK(k >= 0 && k < K && !seen[k], "Testsome index %d", k);
            seen[k] = 1;
            check_status(&sts[j], from, 400 + k, MPI_INT, N, "Testsome");
        }
        done += outc;
        CHECK(MPI_Wtime() - t0 < 30, "Testsome never completed");
    }
    MPI_OK(MPI_Testsome(K, rr, &outc, ind, sts));
    CHECK(outc == MPI_UNDEFINED, "Testsome on all-null gave %d", outc);
    MPI_OK(MPI_Waitall(K, sr, MPI_STATUSES_IGNORE));

    /* Testall + Test */
    post_k(500, rbuf, rr, sr, sbuf);
    t0 = MPI_Wtime();
    do {
        MPI_OK(MPI_Testall(K, rr, &flag, sts));
        CHECK(MPI_Wtime() - t0 < 30, "Testall never completed");
    } while (!flag);
    for (int k = 0; k < K; k++) {
        CHECK(rr[k] == MPI_REQUEST_NULL, "Testall left request %d", k);
        check_status(&sts[k], from, 500 + k, MPI_INT, N, "Testall");
        check_int(rbuf[k], N, from * 50 + k, "Testall");
    }
    for (int k = 0; k < K; k++) {
        do {
            MPI_OK(MPI_Test(&sr[k], &flag, &st));
            CHECK(MPI_Wtime() - t0 < 30, "Test never completed");
        } while (!flag);
        CHECK(sr[k] == MPI_REQUEST_NULL, "Test did not null request");
    }
    MPI_OK(MPI_Testall(0, rr, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag, "Testall of zero requests not true");
    MPI_OK(MPI_Waitall(0, rr, MPI_STATUSES_IGNORE));
    MPI_Request nul = MPI_REQUEST_NULL;
    MPI_OK(MPI_Test(&nul, &flag, &st));
    CHECK(flag, "Test(REQUEST_NULL) flag 0");
}

/* Probe / Iprobe / Mprobe / Improbe / Mrecv / Imrecv */
static void t_probe(void) {
    int sbuf[N], rbuf[N], flag, c;
    MPI_Request sr, rq;
    MPI_Status st;
    MPI_Message msg;
    double t0 = MPI_Wtime();
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Iprobe(from, 999, MPI_COMM_WORLD, &flag, &st));
    CHECK(!flag, "Iprobe found a message that was never sent");

    for (int variant = 0; variant < 4; variant++) {
        int tag = 60 + variant, cnt = 5 + variant;
        fill_int(sbuf, cnt, g_rank * 7 + variant);
        memset(rbuf, 0, sizeof rbuf);
        MPI_OK(MPI_Isend(sbuf, cnt, MPI_INT, to, tag, MPI_COMM_WORLD, &sr));
        switch (variant) {
        case 0:
            MPI_OK(MPI_Probe(from, tag, MPI_COMM_WORLD, &st));
            check_status(&st, from, tag, MPI_INT, cnt, "Probe");
            MPI_OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st)); /* probe doesn't consume */
            check_status(&st, from, tag, MPI_INT, cnt, "Probe any");
            MPI_OK(MPI_Recv(rbuf, N, MPI_INT, from, tag, MPI_COMM_WORLD, &st));
            break;
        case 1:
            do {
                MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st));
                CHECK(MPI_Wtime() - t0 < 30, "Iprobe never found the message");
            } while (!flag);
            check_status(&st, from, tag, MPI_INT, cnt, "Iprobe");
            MPI_OK(MPI_Recv(rbuf, N, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
            break;
        case 2:
            MPI_OK(MPI_Mprobe(from, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st));
            CHECK(msg != MPI_MESSAGE_NULL, "Mprobe gave MESSAGE_NULL");
            check_status(&st, from, tag, MPI_INT, cnt, "Mprobe");
            /* matched message is removed: Iprobe must not see it */
            MPI_OK(MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag, "Iprobe still sees a message matched by Mprobe");
            MPI_OK(MPI_Get_count(&st, MPI_INT, &c));
            MPI_OK(MPI_Mrecv(rbuf, c, MPI_INT, &msg, &st));
            CHECK(msg == MPI_MESSAGE_NULL, "Mrecv did not null message");
            break;
        case 3:
            do {
                MPI_OK(MPI_Improbe(from, tag, MPI_COMM_WORLD, &flag, &msg, &st));
                CHECK(MPI_Wtime() - t0 < 30, "Improbe never found the message");
            } while (!flag);
            check_status(&st, from, tag, MPI_INT, cnt, "Improbe");
            MPI_OK(MPI_Imrecv(rbuf, N, MPI_INT, &msg, &rq));
            CHECK(msg == MPI_MESSAGE_NULL, "Imrecv did not null message");
            MPI_OK(MPI_Wait(&rq, &st));
            break;
        }
        check_status(&st, from, tag, MPI_INT, cnt, "probe receive");
        check_int(rbuf, cnt, from * 7 + variant, "probe receive");
        MPI_OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    }
    /* Mprobe on PROC_NULL gives MESSAGE_NO_PROC; Mrecv of it is a no-op */
    MPI_OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NO_PROC, "Mprobe(PROC_NULL) message not NO_PROC");
    MPI_OK(MPI_Mrecv(rbuf, N, MPI_INT, &msg, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "Mrecv(NO_PROC) source %d", st.MPI_SOURCE);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void t_sendrecv(void) {
    int sbuf[N], rbuf[N];
    MPI_Status st;
    fill_int(sbuf, N, g_rank + 300);
    MPI_OK(MPI_Sendrecv(sbuf, N, MPI_INT, to, 70, rbuf, N, MPI_INT, from, 70, MPI_COMM_WORLD, &st));
    check_status(&st, from, 70, MPI_INT, N, "Sendrecv");
    check_int(rbuf, N, from + 300, "Sendrecv");
    /* receive side with ANY */
    MPI_OK(MPI_Sendrecv(sbuf, N / 2, MPI_INT, to, 71, rbuf, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                        MPI_COMM_WORLD, &st));
    if (g_size <= 2 || 1) check_status(&st, from, 71, MPI_INT, N / 2, "Sendrecv any");
    fill_int(rbuf, N, g_rank + 400);
    MPI_OK(MPI_Sendrecv_replace(rbuf, N, MPI_INT, to, 72, from, 72, MPI_COMM_WORLD, &st));
    check_status(&st, from, 72, MPI_INT, N, "Sendrecv_replace");
    check_int(rbuf, N, from + 400, "Sendrecv_replace");
    /* large replace (beyond any eager limit) */
    int big = 1 << 20;
    unsigned char *b = malloc(big);
    fill_pat(b, big, g_rank + 11);
    MPI_OK(MPI_Sendrecv_replace(b, big, MPI_BYTE, to, 73, from, 73, MPI_COMM_WORLD, &st));
    check_status(&st, from, 73, MPI_BYTE, big, "Sendrecv_replace big");
    CHECK(check_pat(b, big, from + 11) == (size_t)-1, "Sendrecv_replace big content");
    free(b);
}

static void t_getcount(void) {
    double d[N];
    int ibuf[2 * N], c = -1;
    MPI_Status st;
    MPI_Request sr;
    for (int i = 0; i < 10; i++) d[i] = i + 0.5;
    MPI_OK(MPI_Isend(d, 10, MPI_DOUBLE, to, 80, MPI_COMM_WORLD, &sr));
    MPI_OK(MPI_Recv(ibuf, 2 * N, MPI_INT, from, 80, MPI_COMM_WORLD, &st));
    MPI_OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &c));
    CHECK(c == 10 * (int)(sizeof(double) / sizeof(int)), "Get_count(INT) of 10 doubles = %d", c);
    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &c));
    CHECK(c == 10 * (int)sizeof(double), "Get_count(BYTE) = %d", c);
    MPI_OK(MPI_Get_count(&st, MPI_DOUBLE, &c));
    CHECK(c == 10, "Get_count(DOUBLE) = %d", c);
    MPI_OK(MPI_Get_elements(&st, MPI_DOUBLE, &c));
    CHECK(c == 10, "Get_elements(DOUBLE) = %d", c);
    MPI_Count cc = -1;
    MPI_OK(MPI_Get_elements_x(&st, MPI_DOUBLE, &cc));
    CHECK(cc == 10, "Get_elements_x = %lld", (long long)cc);

    /* zero-byte message */
    MPI_OK(MPI_Sendrecv(NULL, 0, MPI_INT, to, 82, NULL, 0, MPI_INT, from, 82, MPI_COMM_WORLD, &st));
    check_status(&st, from, 82, MPI_INT, 0, "zero-byte");
}

/* Get_count/Get_elements with a derived type and a partial element
 * (needs MPI_Type_contiguous; separate so p2p does not depend on it). */
static void t_getelements_derived(void) {
    int ibuf[2 * N], c = -1;
    MPI_Status st;
    MPI_Request sr;
    MPI_Datatype pair;
    MPI_OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    MPI_OK(MPI_Type_commit(&pair));
    int seven[7] = {1, 2, 3, 4, 5, 6, 7};
    MPI_OK(MPI_Isend(seven, 7, MPI_INT, to, 81, MPI_COMM_WORLD, &sr));
    MPI_OK(MPI_Recv(ibuf, N, pair, from, 81, MPI_COMM_WORLD, &st));
    MPI_OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Get_count(&st, pair, &c));
    CHECK(c == MPI_UNDEFINED, "Get_count(pair) of 7 ints = %d, expected MPI_UNDEFINED", c);
    MPI_OK(MPI_Get_elements(&st, pair, &c));
    CHECK(c == 7, "Get_elements(pair) of 7 ints = %d", c);
    for (int i = 0; i < 7; i++) CHECK(ibuf[i] == i + 1, "pair recv content");
    MPI_OK(MPI_Type_free(&pair));

}

static void t_cancel(void) {
    int buf[N], flag = 0;
    MPI_Request rq;
    MPI_Status st;
    MPI_OK(MPI_Irecv(buf, N, MPI_INT, from, 999, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Cancel(&rq));
    MPI_OK(MPI_Wait(&rq, &st));
    CHECK(rq == MPI_REQUEST_NULL, "cancelled request not nulled by Wait");
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag, "Test_cancelled false for a cancelled unmatched receive");
    /* a receive that completed normally is not cancelled */
    int v = g_rank, r = -1;
    MPI_Request sr;
    MPI_OK(MPI_Irecv(&r, 1, MPI_INT, from, 90, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Send(&v, 1, MPI_INT, to, 90, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&rq, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag && r == from, "completed receive reported cancelled");
    /* cancelled receive must not steal a later message with the same tag */
    MPI_OK(MPI_Irecv(&r, 1, MPI_INT, from, 91, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Cancel(&rq));
    MPI_OK(MPI_Wait(&rq, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag, "second cancel not reported");
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* every receive(91) cancelled before anyone sends */
    MPI_OK(MPI_Isend(&v, 1, MPI_INT, to, 91, MPI_COMM_WORLD, &sr));
    r = -1;
    MPI_OK(MPI_Recv(&r, 1, MPI_INT, from, 91, MPI_COMM_WORLD, &st));
    CHECK(r == from, "message after cancel: %d", r);
    MPI_OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
}

static void t_getstatus(void) {
    int v = g_rank + 5, r = -1, flag = 0;
    MPI_Request rq;
    MPI_Status st;
    MPI_OK(MPI_Irecv(&r, 1, MPI_INT, from, 95, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Request_get_status(rq, &flag, &st));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Send(&v, 1, MPI_INT, to, 95, MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    do {
        MPI_OK(MPI_Request_get_status(rq, &flag, &st));
        CHECK(MPI_Wtime() - t0 < 30, "Request_get_status never reported completion");
    } while (!flag);
    CHECK(rq != MPI_REQUEST_NULL, "Request_get_status freed the request");
    check_status(&st, from, 95, MPI_INT, 1, "Request_get_status");
    CHECK(r == from + 5, "get_status recv value %d", r);
    MPI_OK(MPI_Request_get_status(rq, &flag, &st)); /* still valid, still complete */
    CHECK(flag, "second Request_get_status not complete");
    MPI_OK(MPI_Wait(&rq, &st));
    CHECK(rq == MPI_REQUEST_NULL, "Wait after get_status did not null");
    check_status(&st, from, 95, MPI_INT, 1, "Wait after get_status");
    MPI_OK(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
    CHECK(flag, "get_status(REQUEST_NULL) flag 0");
}

static void check_empty(MPI_Status *st, int src, const char *what) {
    int c = -1;
    MPI_OK(MPI_Get_count(st, MPI_INT, &c));
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == MPI_ANY_TAG && c == 0,
          "%s: status src %d tag %d count %d; expected src %d, ANY_TAG, 0", what, st->MPI_SOURCE,
          st->MPI_TAG, c, src);
}
static void t_procnull(void) {
    int buf[4] = {1, 2, 3, 4}, flag;
    MPI_Status st;
    MPI_Request rq;
    MPI_OK(MPI_Send(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    MPI_OK(MPI_Ssend(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    MPI_OK(MPI_Recv(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
    check_empty(&st, MPI_PROC_NULL, "Recv(PROC_NULL)");
    CHECK(buf[0] == 1 && buf[3] == 4, "Recv(PROC_NULL) modified the buffer");
    MPI_OK(MPI_Isend(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, &st));
    MPI_OK(MPI_Probe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
    check_empty(&st, MPI_PROC_NULL, "Probe(PROC_NULL)");
    MPI_OK(MPI_Iprobe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &flag, &st));
    CHECK(flag, "Iprobe(PROC_NULL) flag 0");
    check_empty(&st, MPI_PROC_NULL, "Iprobe(PROC_NULL)");
    MPI_OK(MPI_Sendrecv(buf, 4, MPI_INT, MPI_PROC_NULL, 1, buf, 4, MPI_INT, MPI_PROC_NULL, 1,
                        MPI_COMM_WORLD, &st));
    check_empty(&st, MPI_PROC_NULL, "Sendrecv(PROC_NULL)");
    /* Wait on REQUEST_NULL: empty status */
    rq = MPI_REQUEST_NULL;
    st.MPI_SOURCE = 1234;
    MPI_OK(MPI_Wait(&rq, &st));
    check_empty(&st, MPI_ANY_SOURCE, "Wait(REQUEST_NULL)");
}

/* Nonblocking receive from PROC_NULL (MPI-3.1 sec. 3.11: same status as the
 * blocking one).  Separate subtest: MPICH 4.0.2 ch4 reports source 0, tag 0. */
static void t_procnull_nb(void) {
    int buf[4] = {1, 2, 3, 4}, flag = 0;
    MPI_Status st;
    MPI_Request rq;
    MPI_OK(MPI_Irecv(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Wait(&rq, &st));
    check_empty(&st, MPI_PROC_NULL, "Irecv(PROC_NULL)+Wait");
    MPI_OK(MPI_Irecv(buf, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rq));
    MPI_OK(MPI_Test(&rq, &flag, &st));
    CHECK(flag, "Irecv(PROC_NULL) not complete at first Test");
    check_empty(&st, MPI_PROC_NULL, "Irecv(PROC_NULL)+Test");
    CHECK(buf[0] == 1 && buf[3] == 4, "Irecv(PROC_NULL) modified the buffer");
}

static void t_ignore(void) {
    int sbuf[N], rbuf[N];
    MPI_Request r[2];
    fill_int(sbuf, N, g_rank + 900);
    MPI_OK(MPI_Sendrecv(sbuf, N, MPI_INT, to, 5, rbuf, N, MPI_INT, from, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    check_int(rbuf, N, from + 900, "Sendrecv STATUS_IGNORE");
    MPI_OK(MPI_Irecv(rbuf, N, MPI_INT, from, 6, MPI_COMM_WORLD, &r[0]));
    MPI_OK(MPI_Isend(sbuf, N, MPI_INT, to, 6, MPI_COMM_WORLD, &r[1]));
    MPI_OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    check_int(rbuf, N, from + 900, "Waitall STATUSES_IGNORE");
    MPI_OK(MPI_Irecv(rbuf, N, MPI_INT, from, 7, MPI_COMM_WORLD, &r[0]));
    MPI_OK(MPI_Send(sbuf, N, MPI_INT, to, 7, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    MPI_OK(MPI_Isend(sbuf, N, MPI_INT, to, 8, MPI_COMM_WORLD, &r[1]));
    MPI_OK(MPI_Recv(rbuf, N, MPI_INT, from, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
    check_int(rbuf, N, from + 900, "Recv STATUS_IGNORE");
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    to = (g_rank + 1) % g_size;
    from = (g_rank - 1 + g_size) % g_size;
    struct { const char *name; void (*fn)(void); } T[] = {
        {"modes", t_modes}, {"nonblocking", t_nonblocking}, {"issend", t_issend},
        {"persistent", t_persistent}, {"waittest", t_waittest}, {"probe", t_probe},
        {"sendrecv", t_sendrecv}, {"getcount", t_getcount}, {"cancel", t_cancel},
        {"getstatus", t_getstatus}, {"procnull", t_procnull}, {"ignore", t_ignore},
        {"procnull_nb", t_procnull_nb}, {"getelements_derived", t_getelements_derived},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        if (!selected(argc, argv, T[i].name)) continue;
        T[i].fn();
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (g_rank == 0) printf("pass %s\n", T[i].name);
    }
    return test_finish();
}
