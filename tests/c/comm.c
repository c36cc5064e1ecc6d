/* Communicator management and context isolation.  usage: comm */
#include "common.h"

static void allsum_check(MPI_Comm c, int expect_sum, const char *what) {
    int v = g_rank, s = -1;
    MPI_OK(MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c));
    CHECK(s == expect_sum, "%s: sum of world ranks %d, expected %d", what, s, expect_sum);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    int res = -1, r, s;
    MPI_Comm dup, dup2, split, rev, half;

    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res));
    CHECK(res == MPI_IDENT, "compare(WORLD, WORLD) = %d", res);
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, &res));
    CHECK(res == (g_size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL), "compare(WORLD, SELF) = %d", res);

    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    MPI_OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(!strcmp(name, "MPI_COMM_WORLD") && len == 14, "WORLD name '%s'", name);

    /* dup */
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_OK(MPI_Comm_rank(dup, &r));
    MPI_OK(MPI_Comm_size(dup, &s));
    CHECK(r == g_rank && s == g_size, "dup rank %d size %d", r, s);
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res));
    CHECK(res == MPI_CONGRUENT, "compare(WORLD, dup) = %d", res);
    MPI_OK(MPI_Comm_dup(dup, &dup2));
    MPI_OK(MPI_Comm_compare(dup, dup2, &res));
    CHECK(res == MPI_CONGRUENT, "compare(dup, dup2) = %d", res);
    allsum_check(dup2, g_size * (g_size - 1) / 2, "dup2");

    /* context isolation: same source/tag on WORLD and dup must not match across */
    int to = (g_rank + 1) % g_size, from = (g_rank - 1 + g_size) % g_size;
    int a = 1000 + g_rank, b = 2000 + g_rank, c = 3000 + g_rank, x = -1;
    MPI_Request rq[3];
    MPI_Status st;
    MPI_OK(MPI_Isend(&a, 1, MPI_INT, to, 5, dup, &rq[0]));   /* first on dup */
    MPI_OK(MPI_Isend(&b, 1, MPI_INT, to, 5, MPI_COMM_WORLD, &rq[1]));
    MPI_OK(MPI_Isend(&c, 1, MPI_INT, to, 5, dup2, &rq[2]));
    MPI_OK(MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHECK(x == 2000 + from, "WORLD receive got %d (leaked from another communicator)", x);
    MPI_OK(MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup2, &st));
    CHECK(x == 3000 + from, "dup2 receive got %d", x);
    MPI_OK(MPI_Recv(&x, 1, MPI_INT, from, 5, dup, &st));
    CHECK(x == 1000 + from, "dup receive got %d", x);
    MPI_OK(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
    /* a pending receive on the parent is not satisfied by collective traffic on the dup */
    MPI_OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[0]));
    for (int i = 0; i < 5; i++) {
        int v = i;
        MPI_OK(MPI_Bcast(&v, 1, MPI_INT, i % g_size, dup));
        allsum_check(dup, g_size * (g_size - 1) / 2, "dup during pending recv");
    }
    int flag = 0;
    MPI_OK(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
    CHECK(!flag, "receive on WORLD matched traffic of a duplicate");
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* everyone tested before anyone sends */
    MPI_OK(MPI_Send(&b, 1, MPI_INT, to, 6, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&rq[0], &st));
    CHECK(x == 2000 + from && st.MPI_TAG == 6, "late WORLD receive %d tag %d", x, st.MPI_TAG);

    /* split by color = rank % 3, key = -rank (reverse order) */
    int color = g_rank % 3;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, color, -g_rank, &split));
    CHECK(split != MPI_COMM_NULL, "split gave COMM_NULL");
    int members = 0, sum = 0, pos = 0;
    for (int q = 0; q < g_size; q++)
        if (q % 3 == color) { members++; sum += q; if (q > g_rank) pos++; }
    MPI_OK(MPI_Comm_rank(split, &r));
    MPI_OK(MPI_Comm_size(split, &s));
    CHECK(s == members && r == pos, "split color %d: rank %d size %d, expected %d/%d", color, r, s, pos, members);
    allsum_check(split, sum, "split");
    /* p2p inside split: ring in split ranks */
    int sv = g_rank, rv = -1;
    MPI_OK(MPI_Sendrecv(&sv, 1, MPI_INT, (r + 1) % s, 9, &rv, 1, MPI_INT, (r - 1 + s) % s, 9, split, &st));
    CHECK(st.MPI_SOURCE == (r - 1 + s) % s, "split status source %d is not a split rank", st.MPI_SOURCE);
    int expect_world = -1;
    { /* world rank of split rank (r-1+s)%s: split ranks run in descending world order */
        int target = (r - 1 + s) % s, k = 0;
        for (int q = g_size - 1; q >= 0; q--)
            if (q % 3 == color) { if (k == target) expect_world = q; k++; }
    }
    CHECK(rv == expect_world, "split ring got world rank %d, expected %d", rv, expect_world);
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, split, &res));
    CHECK(res == (g_size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL), "compare(WORLD, split) = %d", res);

    /* same group, reversed order -> SIMILAR; same order -> CONGRUENT */
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, -g_rank, &rev));
    MPI_OK(MPI_Comm_rank(rev, &r));
    CHECK(r == g_size - 1 - g_rank, "reverse split rank %d", r);
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, rev, &res));
    CHECK(res == (g_size == 1 ? MPI_CONGRUENT : MPI_SIMILAR), "compare(WORLD, reversed) = %d", res);
    MPI_OK(MPI_Comm_free(&rev));
    MPI_OK(MPI_Comm_split(dup, 7, 0, &rev)); /* equal keys: keep parent order */
    MPI_OK(MPI_Comm_rank(rev, &r));
    CHECK(r == g_rank, "equal-key split rank %d", r);
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, rev, &res));
    CHECK(res == MPI_CONGRUENT, "compare(WORLD, same-order split) = %d", res);
    MPI_OK(MPI_Comm_free(&rev));

    /* MPI_UNDEFINED -> COMM_NULL */
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2 ? MPI_UNDEFINED : 1, g_rank, &half));
    if (g_rank % 2) {
        CHECK(half == MPI_COMM_NULL, "UNDEFINED color did not give COMM_NULL");
    } else {
        CHECK(half != MPI_COMM_NULL, "even rank got COMM_NULL");
        MPI_OK(MPI_Comm_size(half, &s));
        CHECK(s == (g_size + 1) / 2, "even half size %d", s);
        int esum = 0;
        for (int q = 0; q < g_size; q += 2) esum += q;
        allsum_check(half, esum, "even half");
        MPI_OK(MPI_Comm_free(&half));
        CHECK(half == MPI_COMM_NULL, "Comm_free did not set COMM_NULL");
    }

    /* many dup/free cycles: context ids are recycled without confusion */
    for (int i = 0; i < 200; i++) {
        MPI_Comm t;
        MPI_OK(MPI_Comm_dup(i % 2 ? dup : MPI_COMM_WORLD, &t));
        if (i % 50 == 0) allsum_check(t, g_size * (g_size - 1) / 2, "dup cycle");
        MPI_OK(MPI_Comm_free(&t));
    }

    MPI_OK(MPI_Comm_free(&split));
    MPI_OK(MPI_Comm_free(&dup2));
    MPI_OK(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL && dup2 == MPI_COMM_NULL, "Comm_free did not null");
    return test_finish();
}
